//! The client's online phase as a state machine over typed flights ([`ClientRun`]): each step
//! takes the server's flight and returns the client's answer, running the pooled OTs and the
//! garbled-circuit evaluation on an in-memory [`Wire`] (no IO). [`client_session`] drives it
//! over a channel; tests drive it against [`ServerRun`](super::ServerRun) with none.
//!
//! [`client_session`]: super::client_session
use super::bits::*;
use super::circuits::{index_bits, StepCircuits, StepLayout, GHN_BITS, LEAF_BITS, SHARE_BITS};
use super::config::*;
use super::flight::{self, ClientFlight, ClientMsg, Expect, ServerFlight, ServerMsg, Wire};
use super::model::ClientModel;
use super::products::*;
use super::report::{top_k, GruOutcome, Meter};
use super::tables::*;
use crate::error::{NnError, Result};
use secinfer_gc::garble::Scheme;
use secinfer_gc::protocol::{pack_bits, recv_evaluate_known, unpack_bits, wire_outputs, Reveal};
use secinfer_gc::Circuit;
use secinfer_he::kernels::coeff::to_ring;
use secinfer_net::Channel;
use secinfer_ot::{
    packed_len, Block, PendingEarlyRecv, PendingOtSend, PooledOtReceiver, PooledOtSender, Prg,
};
use secinfer_ss::blocks::pooled::b2a_receiver;

/// The client's per-element, per-step masks (secret; no `Debug`).
/// Its circuit inputs in place of its online shares: π_P, π_Q (PW bits) for the products,
/// μ (bo bits) for its XOR share of y.
pub(super) struct ElemMasks {
    pub(super) pi_p: u64,
    pub(super) pi_q: u64,
    pub(super) mu: u64,
    /// Its XOR shares of the carry leaves of gi_r, gi_z, gi_n (cryptogru::carry_leaves).
    pub(super) tau: [[bool; LEAF_BITS]; CARRIES],
    /// v mod 2^L per carry: the client's additive share of it is −v, the server's carry + v
    /// (cryptogru::carry_shares).
    pub(super) v: [u64; CARRIES],
    /// Its XOR shares of the leaves of gh_r, gh_z, gh_n's carries (`StepLayout::gh_leaves`).
    pub(super) tau_h: [[bool; LEAF_BITS]; 3],
}

impl ElemMasks {
    pub(super) fn draw(prg: &mut Prg, lay: &StepLayout) -> ElemMasks {
        let mut r = |bits: usize| prg.next_block().low_u64() & ring_mask(bits);
        let (pi_p, pi_q, mu, t) = (r(lay.pw), r(lay.pw), r(lay.bo), r(LEAF_BITS * CARRIES));
        ElemMasks {
            pi_p,
            pi_q,
            mu,
            v: std::array::from_fn(|_| r(lay.l)),
            tau_h: {
                let t = r(3 * LEAF_BITS);
                std::array::from_fn(|g| {
                    std::array::from_fn(|k| (t >> (g * LEAF_BITS + k)) & 1 == 1)
                })
            },
            tau: std::array::from_fn(|g| {
                std::array::from_fn(|k| (t >> (g * LEAF_BITS + k)) & 1 == 1)
            }),
        }
    }
}

/// The client's shares of the HE products on its masks: c_x(t) + S_x(t) = W_ih ρ_x(t),
/// c_h(t) + S_h(t) = W_hh ρ_h(t) (t ≥ 1), c_fc + S_fc = W_fc ρ_h(T).
pub(super) struct HeShares {
    pub(super) cx: Vec<Vec<u64>>,
    pub(super) chh: Vec<Vec<u64>>,
    pub(super) cfc: Vec<u64>,
}

/// The client's share of W_hh h(t) + b, element j: W_hh h(t) = W_hh m(t) − W_hh ρ_h(t), so it
/// is −c_h(t) (and 0 at t = 0, where h(0) = 0).
pub(super) fn gh_share(he: &HeShares, t: usize, j: usize) -> u64 {
    if t == 0 {
        0
    } else {
        neg(he.chh[t - 1][j])
    }
}

/// What the online phase uses, made in setup and offline. Secret (no `Debug`).
pub(super) struct ClientState {
    pub(super) h: usize,
    pub(super) sc: StepCircuits,
    pub(super) fin: std::sync::Arc<Circuit>,
    pub(super) otr: PooledOtReceiver,
    pub(super) mux_s: PooledOtSender,
    pub(super) eval: Evaluator,
    pub(super) rho_x: Vec<Vec<u64>>,
    pub(super) rho_h: Vec<Vec<u64>>,
    pub(super) he: HeShares,
    pub(super) masks: Vec<Vec<ElemMasks>>,
    pub(super) lut_keys: Option<LutKeys>,
    pub(super) gh_keys: Vec<LeafKeys>,
}

/// Evaluates the batches the server garbles online (its own inputs folded in, so it sends only
/// the tables), on this party's offline COT labels, consumed in the order of its choices.
pub(super) struct Evaluator {
    pub(super) labels: Vec<Block>,
    pub(super) next: usize,
    pub(super) h: usize,
    pub(super) garbling: Scheme,
}

impl Evaluator {
    /// This party's XOR shares of a batch's outputs (`Reveal::Garbler`: H copies), or the
    /// outputs themselves (`Reveal::Evaluator`: one copy).
    fn eval(
        &mut self,
        w: &mut Wire,
        circ: &Circuit,
        g_in: usize,
        reveal: Reveal,
    ) -> Result<Vec<bool>> {
        let n = self.copies(reveal);
        let e_in = circ.n_inputs - g_in;
        let mine = self
            .labels
            .get(self.next..self.next + n * e_in)
            .ok_or_else(|| NnError::Protocol("label count mismatch".into()))?;
        self.next += n * e_in;
        let bits = recv_evaluate_known(w, circ, g_in, n, reveal, self.garbling, mine)?;
        Ok(if reveal == Reveal::Garbler {
            client_output_shares(circ, &bits)
        } else {
            bits
        })
    }

    fn copies(&self, reveal: Reveal) -> usize {
        if reveal == Reveal::Garbler {
            self.h
        } else {
            1
        }
    }

    /// The frames of a batch of `circ` (what the server's garbling sends).
    fn expect(&self, circ: &Circuit, reveal: Reveal) -> Result<Vec<flight::Segment>> {
        flight::batch(self.garbling, circ, self.copies(reveal), reveal)
    }
}

/// The client's XOR shares of a batch's outputs: the label lsbs of the wire outputs, zero at
/// constant outputs (the server's share holds the constant).
fn client_output_shares(circ: &Circuit, lsbs: &[bool]) -> Vec<bool> {
    let wo = wire_outputs(circ).max(1);
    lsbs.chunks(wo)
        .flat_map(|l| {
            let mut k = 0;
            circ.outputs
                .iter()
                .map(|o| match o {
                    secinfer_gc::Bit::Const(_) => false,
                    secinfer_gc::Bit::Wire(_) => {
                        k += 1;
                        l.get(k - 1).copied().unwrap_or(false)
                    }
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

/// What flight 1 leaves for the products before the gate tables (if any): A's outputs, the
/// XOR shares of trunc(gh_n)'s three bits, and the pending halves of the OTs whose answers
/// come later.
struct Pending {
    out: Vec<bool>,
    t_bits: Vec<bool>,
    pr_rev: PendingOtSend,
    qr_rev: PendingOtSend,
    pe: PendingEarlyRecv,
}

/// Where the client stands: which server flight it takes next, and what it keeps until then.
enum Stage {
    Start(InputCarryKeys),
    LeafDerand(InputCarryKeys),
    CarryDerand(CarryKeys),
    StepLeafDerand(usize),
    Gates(usize),
    GateTables(usize, Pending),
    Candidate {
        t: usize,
        z_bits: Vec<bool>,
        q_hc: Vec<u64>,
    },
    State(usize),
    Final,
    Done,
}

/// What a client step returns: its next flight, or the outcome after the final circuit.
pub enum ClientNext {
    Send(ClientMsg),
    Done(Box<GruOutcome>),
}

/// The client's online phase, flight by flight: [`begin`](Self::begin) makes the first flight,
/// [`on_msg`](Self::on_msg) takes each server flight and answers it. A flight of the wrong kind
/// or shape is refused as `Malformed` before anything changes. Secret (no `Debug`).
pub struct ClientRun<'a> {
    m: &'a ClientModel,
    tokens: Vec<u32>,
    opts: ClientOptions,
    st: ClientState,
    meter: Meter,
    w: Wire,
    stage: Stage,
    steps_done: usize,
}

impl<'a> ClientRun<'a> {
    pub(super) fn new(
        m: &'a ClientModel,
        tokens: &[u32],
        opts: ClientOptions,
        st: ClientState,
        keys: InputCarryKeys,
        mut meter: Meter,
        max_frame: usize,
    ) -> ClientRun<'a> {
        let w = Wire::new(max_frame);
        meter.rebase(&w);
        ClientRun {
            m,
            tokens: tokens.to_vec(),
            opts,
            st,
            meter,
            w,
            stage: Stage::Start(keys),
            steps_done: 0,
        }
    }

    /// Steps whose six flights are done.
    pub fn steps_done(&self) -> usize {
        self.steps_done
    }

    /// The first online flight: x_t − ρ_x(t) for every step (a one-time pad mod 2^32).
    pub fn begin(&mut self) -> Result<ClientMsg> {
        let keys = match std::mem::replace(&mut self.stage, Stage::Done) {
            Stage::Start(keys) => keys,
            other => {
                self.stage = other;
                return Err(NnError::Protocol("gru: the client began twice".into()));
            }
        };
        let (e, m, st) = (self.m.arch.embed_dim, self.m, &self.st);
        let mut masked: Vec<u32> = Vec::with_capacity(m.steps * e);
        for (t, &tok) in self.tokens.iter().enumerate() {
            let x = to_ring(&m.embed[tok as usize * e..(tok as usize + 1) * e]);
            masked.extend(
                x.iter()
                    .zip(&st.rho_x[t])
                    .map(|(x, r)| (x.wrapping_sub(*r) & RING) as u32),
            );
        }
        self.w.send_pod(&masked)?;
        self.meter.he(&self.w);
        self.stage = Stage::LeafDerand(keys);
        self.w.take(ClientFlight::Inputs)
    }

    /// The server flight this client takes next, with its exact shape.
    pub fn expects(&self) -> Result<Expect<ServerFlight>> {
        let (st, h) = (&self.st, self.st.h);
        let lay = st.sc.lay;
        let n_carries = self.m.steps * h * CARRIES;
        use flight::Segment::{Bits, Bytes};
        Ok(match &self.stage {
            Stage::LeafDerand(_) => {
                Expect::new(ServerFlight::LeafDerand).with([Bits(n_carries * lay.f)])
            }
            Stage::CarryDerand(_) => {
                Expect::new(ServerFlight::CarryDerand).with([Bits(n_carries * LEAF_BITS)])
            }
            Stage::StepLeafDerand(_) => {
                Expect::new(ServerFlight::StepLeafDerand).with([Bits(3 * h * lay.f)])
            }
            Stage::Gates(_) => Expect::new(ServerFlight::Gates)
                .with(st.eval.expect(&st.sc.a, Reveal::Garbler)?)
                .with(flight::derand(h * lay.gb))
                .with(flight::derand(h * lay.gb))
                .with(flight::words(h * p_early_len(&lay), lay.pw)),
            Stage::GateTables(..) => {
                let nb = lay.lut.unwrap_or(0);
                Expect::new(ServerFlight::GateTables)
                    .with([Bytes(packed_len((2 * h) << nb, lay.gb as u32))])
            }
            Stage::Candidate { .. } => {
                let qlay = lay.q_ring();
                Expect::new(ServerFlight::Candidate)
                    .with(st.eval.expect(&st.sc.b, Reveal::Garbler)?)
                    .with(flight::words(h * q_early_len(&qlay), qlay.pw))
            }
            Stage::State(_) => Expect::new(ServerFlight::State)
                .with(st.eval.expect(&st.sc.c, Reveal::Garbler)?)
                .with(flight::words(h * lay.hw, SHARE_BITS)),
            Stage::Final => {
                Expect::new(ServerFlight::Final).with(st.eval.expect(&st.fin, Reveal::Evaluator)?)
            }
            Stage::Start(_) | Stage::Done => {
                return Err(NnError::Protocol(
                    "gru: the client expects no server flight now".into(),
                ))
            }
        })
    }

    /// Takes the server's flight and answers it (or ends the session after the final
    /// circuit). A flight of the wrong kind or shape is refused before anything changes.
    pub fn on_msg(&mut self, msg: ServerMsg) -> Result<ClientNext> {
        self.expects()?.check(&msg)?;
        self.w.load(msg);
        let stage = std::mem::replace(&mut self.stage, Stage::Done);
        let (kind, next) = match stage {
            Stage::LeafDerand(keys) => (ClientFlight::LeafTables, self.leaf_tables(keys)?),
            Stage::CarryDerand(keys) => (ClientFlight::CarryTables, self.carry_tables(keys)?),
            Stage::StepLeafDerand(t) => {
                client_gh_leaves(&mut self.w, &self.st, t, &mut self.meter)?;
                (ClientFlight::StepLeafTables, Stage::Gates(t))
            }
            Stage::Gates(t) => {
                let p = client_gates(&mut self.w, &mut self.st, &mut self.meter)?;
                match (self.st.sc.lay.lut, &self.st.lut_keys) {
                    (Some(nb), Some(keys)) => {
                        let x = lut_inputs(&self.st, &p.out, nb);
                        self.w.send_pod(&pack_bits(&lut_derand(
                            keys,
                            t * 2 * self.st.h,
                            &x,
                            nb,
                        )?))?;
                        (ClientFlight::GateDerand, Stage::GateTables(t, p))
                    }
                    _ => {
                        let gb = self.st.sc.lay.gb;
                        let per = self.st.sc.a.n_outputs();
                        let r = pick(&p.out, per, 0..gb);
                        let z = pick(&p.out, per, gb..2 * gb);
                        (ClientFlight::Products, self.products(t, p, r, z)?)
                    }
                }
            }
            Stage::GateTables(t, p) => {
                let (r, z) = self.gate_tables(t, &p)?;
                (ClientFlight::Products, self.products(t, p, r, z)?)
            }
            Stage::Candidate { t, z_bits, q_hc } => {
                client_q(
                    &mut self.w,
                    &mut self.st,
                    t,
                    &z_bits,
                    &q_hc,
                    &mut self.meter,
                )?;
                (ClientFlight::Corrections, Stage::State(t))
            }
            Stage::State(t) => {
                client_h(&mut self.w, &mut self.st, t, &mut self.meter)?;
                self.steps_done = t + 1;
                (ClientFlight::Hidden, self.step_stage(t + 1))
            }
            Stage::Final => return Ok(ClientNext::Done(Box::new(self.finish()?))),
            Stage::Start(_) | Stage::Done => {
                return Err(NnError::Protocol("gru: no client step now".into()))
            }
        };
        self.stage = next;
        Ok(ClientNext::Send(self.w.take(kind)?))
    }

    /// The stage that opens step `t` (the final circuit after the last).
    fn step_stage(&self, t: usize) -> Stage {
        if t == self.m.steps {
            Stage::Final
        } else if t < self.st.gh_keys.len() {
            Stage::StepLeafDerand(t)
        } else {
            Stage::Gates(t)
        }
    }

    /// The input projections' carry leaves (cryptogru::carry_leaves): the server's
    /// derandomisation of every leaf is in; this party's tables go out. Carry
    /// j = (t·3 + gate)·H + i.
    fn leaf_tables(&mut self, keys: InputCarryKeys) -> Result<Stage> {
        let (st, h) = (&self.st, self.st.h);
        let lay = st.sc.lay;
        let n_carries = self.m.steps * h * CARRIES;
        let d = unpack_bits(
            &self.w.recv_pod::<u8>((n_carries * lay.f).div_ceil(8))?,
            n_carries * lay.f,
        );
        let (c_lo, tau, _) = input_carry_parts(st);
        let tables = leaf_tables(lay.carries(), &keys.leaf, &c_lo, &tau, &d)?;
        drop(keys.leaf);
        self.w.send_pod(&tables)?;
        Ok(Stage::CarryDerand(keys.carry))
    }

    /// The carries as additive shares (cryptogru::carry_shares): the server's derandomisation
    /// of each 1-of-8 OT is in; this party's tables go out.
    fn carry_tables(&mut self, keys: CarryKeys) -> Result<Stage> {
        let st = &self.st;
        let n_carries = self.m.steps * st.h * CARRIES;
        let d = unpack_bits(
            &self.w.recv_pod::<u8>((n_carries * LEAF_BITS).div_ceil(8))?,
            n_carries * LEAF_BITS,
        );
        let (_, tau, v) = input_carry_parts(st);
        let tables = carry_tables(st.sc.lay.carries(), &keys, &tau, &v, &d)?;
        drop(keys);
        self.w.send_pod(&tables)?;
        self.meter.mux(&self.w);
        Ok(self.step_stage(0))
    }

    /// The gate tables (cryptogru::gate_luts): the server's tables are in; r and z come out
    /// XOR-shared.
    fn gate_tables(&mut self, t: usize, p: &Pending) -> Result<(Vec<bool>, Vec<bool>)> {
        let (st, h) = (&self.st, self.st.h);
        let lay = st.sc.lay;
        let (nb, keys) = match (lay.lut, &st.lut_keys) {
            (Some(nb), Some(keys)) => (nb, keys),
            _ => return Err(NnError::Protocol("gru: gate tables without keys".into())),
        };
        let x = lut_inputs(st, &p.out, nb);
        let tables: Vec<u8> = self.w.recv_pod(packed_len((2 * h) << nb, lay.gb as u32))?;
        let mut g = lut_outputs(keys, t * 2 * h, &x, nb, lay.gb, &tables)?;
        let z = g.split_off(h * lay.gb);
        self.meter.mux(&self.w);
        Ok((g, z))
    }

    /// Flight 2 out, then wait for flight 3.
    fn products(&mut self, t: usize, p: Pending, r: Vec<bool>, z: Vec<bool>) -> Result<Stage> {
        let (z_bits, q_hc) = client_p(&mut self.w, &mut self.st, t, p, r, z, &mut self.meter)?;
        Ok(Stage::Candidate { t, z_bits, q_hc })
    }

    /// The final circuit's outputs: the class, the top k, the logits or log2 p(word).
    fn finish(&mut self) -> Result<GruOutcome> {
        let (lay, c) = (self.st.sc.lay, self.m.arch.classes);
        let fin = self.st.fin.clone();
        let out = self
            .st
            .eval
            .eval(&mut self.w, &fin, c * lay.acc, Reveal::Evaluator)?;
        self.meter.gc(&self.w);
        self.stage = Stage::Done;
        let report = self.meter.snapshot(&self.w);
        final_outcome(&out, lay.l, c, self.opts, report)
    }
}

/// A's outputs the gate tables are read at: r's then z's nb-bit inputs, per element.
fn lut_inputs(st: &ClientState, out: &[bool], nb: usize) -> Vec<bool> {
    let per = st.sc.a.n_outputs();
    let mut x = pick(out, per, 0..nb);
    x.extend(pick(out, per, nb..2 * nb));
    x
}

/// The input projections' carries as the client holds them: its shares of the low bits, its
/// leaf masks τ and its carry masks v, carry j = (t·3 + gate)·H + i.
fn input_carry_parts(st: &ClientState) -> (Vec<u64>, Vec<[bool; LEAF_BITS]>, Vec<u64>) {
    let h = st.h;
    let n = st.masks.len() * h * CARRIES;
    let (mut c_lo, mut tau, mut v) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    for (x, mk) in st.he.cx.iter().zip(&st.masks) {
        for g in 0..CARRIES {
            c_lo.extend_from_slice(&x[g * h..(g + 1) * h]);
            tau.extend(mk.iter().map(|m| m.tau[g]));
            v.extend(mk.iter().map(|m| m.v[g]));
        }
    }
    (c_lo, tau, v)
}

/// The outcome the final circuit's outputs give, per what the client asked for.
fn final_outcome(
    out: &[bool],
    l: usize,
    c: usize,
    opts: ClientOptions,
    report: super::SessionReport,
) -> Result<GruOutcome> {
    if opts.log_prob_of.is_some() {
        // log2 p(word) at LOG_FRAC fractional bits, two's complement.
        let v = sign_extend(word(out), out.len());
        return Ok(GruOutcome {
            class: 0,
            top: Vec::new(),
            logits: None,
            log2_prob: Some(v),
            report,
        });
    }
    let (top, logits) = if opts.reveal_logits {
        let lg: Vec<i64> = out.chunks(l).map(|b| sign_extend(word(b), l)).collect();
        (top_k(&lg, opts.indices(c)), Some(lg))
    } else {
        let ib = index_bits(c);
        let top = out
            .chunks(ib)
            .take(opts.indices(c))
            .map(|b| {
                let k = word(b) as usize;
                if k >= c {
                    return Err(NnError::Malformed(format!(
                        "decoded class {k} out of range"
                    )));
                }
                Ok(k)
            })
            .collect::<Result<Vec<usize>>>()?;
        (top, None)
    };
    Ok(GruOutcome {
        class: top.first().copied().unwrap_or(0),
        top,
        logits,
        log2_prob: None,
        report,
    })
}

/// The hidden projections' carry leaves: the server's derandomisation is in, this party's
/// tables go out; carry j = gate·H + i.
fn client_gh_leaves(w: &mut Wire, st: &ClientState, t: usize, meter: &mut Meter) -> Result<()> {
    let (lay, h) = (st.sc.lay, st.h);
    let n = 3 * h * lay.f;
    let d = unpack_bits(&w.recv_pod::<u8>(n.div_ceil(8))?, n);
    let c_lo: Vec<u64> = (0..3 * h).map(|j| gh_share(&st.he, t, j)).collect();
    let tau: Vec<[bool; LEAF_BITS]> = (0..3)
        .flat_map(|g| st.masks[t].iter().map(move |m| m.tau_h[g]))
        .collect();
    w.send_pod(&leaf_tables(
        lay.carries(),
        &st.gh_keys[t],
        &c_lo,
        &tau,
        &d,
    )?)?;
    meter.mux(w);
    Ok(())
}

/// Flight 1 (in): A's tables; the server's choices for both products' client → server
/// direction (its XOR shares of r and z); the server's sender-first words for P (their
/// correlations need only its permute bits and its share of gh_n).
fn client_gates(w: &mut Wire, st: &mut ClientState, meter: &mut Meter) -> Result<Pending> {
    let (lay, h) = (st.sc.lay, st.h);
    let gb = lay.gb;
    let out = st
        .eval
        .eval(w, &st.sc.a, lay.a_garbler(), Reveal::Garbler)?;
    meter.gc(w);
    let pr_rev = st.mux_s.recv_choices(w, h * gb)?;
    let qr_rev = st.mux_s.recv_choices(w, h * gb)?;
    let pe = st
        .otr
        .recv_correlated_early(w, h * p_early_len(&lay), lay.pw as u32)?;
    let per = st.sc.a.n_outputs();
    let ab = lay.a_gate_bits();
    let t_bits = pick(&out, per, 2 * ab..2 * ab + GHN_BITS);
    Ok(Pending {
        out,
        t_bits,
        pr_rev,
        qr_rev,
        pe,
    })
}

/// Flight 2 (out): P's derandomisation bits, the client-sender OTs of r·b, P_C − π_P, and the
/// client-sender OTs of z·h_C. Returns z's bits and this party's part of Q from the last.
fn client_p(
    w: &mut Wire,
    st: &mut ClientState,
    t: usize,
    g: Pending,
    r_bits: Vec<bool>,
    z_bits: Vec<bool>,
    meter: &mut Meter,
) -> Result<(Vec<bool>, Vec<u64>)> {
    let (lay, h) = (st.sc.lay, st.h);
    let (pmask, pwu) = (ring_mask(lay.pw), lay.pw as u32);
    // Q = z·(h − n) lives in the narrower ring 2^(fo + hw) (StepLayout::q_ring).
    let qlay = lay.q_ring();
    let (qmask, qwu) = (ring_mask(qlay.pw), qlay.pw as u32);
    let mk = &st.masks[t];
    let u = st
        .otr
        .finish_early(w, g.pe, &early_choices(&lay, &r_bits, &g.t_bits, GHN_BITS))?;
    // b = gc ≫ F: this party's share of gh_n, as it entered circuit A.
    let b_hi: Vec<u64> = (0..h)
        .map(|i| (gh_share(&st.he, t, 2 * h + i) >> lay.f) & ring_mask(lay.l))
        .collect();
    let wt = p_client_weights(&lay, &b_hi);
    let x_p = st
        .mux_s
        .send_correlated_answer(w, g.pr_rev, &mux_deltas(&lay, &wt, &r_bits), pwu)?;
    let zero = vec![0u64; wt.len()];
    let p: Vec<u64> = mux_combine(&lay, &wt, &r_bits, &zero, &x_p)?
        .iter()
        .zip(sum_chunks(&u, p_early_len(&lay), pmask))
        .map(|(a, b)| a.wrapping_add(b) & pmask)
        .collect();
    send_delta(w, &p, mk.iter().map(|k| k.pi_p), pmask)?;
    // This party's share of h(t) (−ρ_h(t)), in Q's ring.
    let h_cq: Vec<u64> = st.rho_h[t]
        .iter()
        .map(|r| neg(*r) & pmask & qmask)
        .collect();
    let w_q = p_client_weights(&qlay, &h_cq);
    let x_q =
        st.mux_s
            .send_correlated_answer(w, g.qr_rev, &mux_deltas(&qlay, &w_q, &z_bits), qwu)?;
    let q_hc = mux_combine(&qlay, &w_q, &z_bits, &zero, &x_q)?;
    meter.mux(w);
    Ok((z_bits, q_hc))
}

/// Flight 3 (in): B's tables → y; the server's sender-first words for Q (their correlations need
/// its permute bits of B's outputs and its share of h). Flight 4 (out): y re-based on μ (the
/// server's C input becomes its share ⊕ y_c ⊕ μ), Q's derandomisation bits and Q_C − π_Q.
fn client_q(
    w: &mut Wire,
    st: &mut ClientState,
    t: usize,
    z_bits: &[bool],
    q_hc: &[u64],
    meter: &mut Meter,
) -> Result<()> {
    let (lay, h) = (st.sc.lay, st.h);
    let bo = lay.bo;
    let qlay = lay.q_ring();
    let (qmask, qwu) = (ring_mask(qlay.pw), qlay.pw as u32);
    let mk = &st.masks[t];
    let out = st
        .eval
        .eval(w, &st.sc.b, lay.b_garbler(), Reveal::Garbler)?;
    meter.gc(w);
    let qe = st
        .otr
        .recv_correlated_early(w, h * q_early_len(&qlay), qwu)?;
    let y = pick(&out, st.sc.b.n_outputs(), 0..bo);
    let yd: Vec<bool> = y
        .chunks(bo)
        .zip(mk)
        .flat_map(|(y, k)| {
            y.iter()
                .enumerate()
                .map(|(j, &b)| b ^ ((k.mu >> j) & 1 == 1))
                .collect::<Vec<_>>()
        })
        .collect();
    w.send_pod(&pack_bits(&yd))?;
    let u = st
        .otr
        .finish_early(w, qe, &early_choices(&qlay, z_bits, &y, bo))?;
    let q: Vec<u64> = q_hc
        .iter()
        .zip(sum_chunks(&u, q_early_len(&qlay), qmask))
        .map(|(a, b)| a.wrapping_add(b) & qmask)
        .collect();
    send_delta(w, &q, mk.iter().map(|k| k.pi_q), qmask)?;
    meter.mux(w);
    Ok(())
}

/// Flight 5 (in): C's tables → h', and the server's sender-first B2A words for h' (its
/// correlations are its permute bits, fixed when it garbled). Flight 6 (out): the B2A's
/// derandomisation bits and h'_c + ρ_h(t+1); the server gets m = h' + ρ_h(t+1).
fn client_h(w: &mut Wire, st: &mut ClientState, t: usize, meter: &mut Meter) -> Result<()> {
    let (lay, h) = (st.sc.lay, st.h);
    let out = st
        .eval
        .eval(w, &st.sc.c, lay.c_garbler(), Reveal::Garbler)?;
    meter.gc(w);
    let hp = st
        .otr
        .recv_correlated_early(w, h * lay.hw, SHARE_BITS as u32)?;
    let hc = b2a_receiver(&st.otr.finish_early(w, hp, &out)?, lay.hw, SHARE_BITS)?;
    let msk: Vec<u32> = hc
        .iter()
        .zip(&st.rho_h[t + 1])
        .map(|(a, r)| (a.wrapping_add(*r) & RING) as u32)
        .collect();
    w.send_pod(&msk)?;
    meter.mux(w);
    Ok(())
}
