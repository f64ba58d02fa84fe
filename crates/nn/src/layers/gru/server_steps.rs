//! The server's online phase as a state machine over typed flights ([`ServerRun`]): each step
//! takes the client's flight and returns the server's answer, garbling and running the pooled
//! OTs on an in-memory [`Wire`] (no IO). [`server_session_with`] drives it over a channel; tests
//! drive it against [`ClientRun`](super::ClientRun) with none.
//!
//! [`server_session_with`]: super::server_session_with
use super::bits::*;
use super::circuits::{put, StepCircuits, GHN_BITS, LEAF_BITS, SHARE_BITS};
use super::flight::{self, ClientFlight, ClientMsg, Expect, ServerFlight, ServerMsg, Wire};
use super::model::ServerModel;
use super::products::*;
use super::report::{Meter, SessionReport};
use super::tables::*;
use crate::error::{NnError, Result};
use secinfer_gc::garble::Scheme;
use secinfer_gc::protocol::{
    garble_batches, pack_bits, unpack_bits, wire_outputs, BatchJob, Reveal,
};
use secinfer_gc::Circuit;
use secinfer_he::kernels::coeff::plain_affine;
use secinfer_net::Channel;
use secinfer_ot::{Block, PendingEarlySend, PendingOtRecv, PooledOtReceiver, PooledOtSender, Prg};
use secinfer_ss::blocks::pooled::{b2a_deltas, b2a_sender};

/// The step circuits a session runs: the model's, or its own when the client asked for the
/// gates in circuit A where the model's use gate tables.
pub(super) enum StepRef<'a> {
    Model(&'a StepCircuits),
    Own(Box<StepCircuits>),
}

impl std::ops::Deref for StepRef<'_> {
    type Target = StepCircuits;
    fn deref(&self) -> &StepCircuits {
        match self {
            StepRef::Model(s) => s,
            StepRef::Own(s) => s,
        }
    }
}

/// The server's shares S of the HE products on the client's masks: W_ih ρ_x(t) − S_x(t),
/// W_hh ρ_h(t) − S_h(t) (t ≥ 1) and W_fc ρ_h(T) − S_fc are the client's.
pub(super) struct HeShares {
    pub(super) sx: Vec<Vec<u64>>,
    pub(super) sh: Vec<Vec<u64>>,
    pub(super) sfc: Vec<u64>,
}

/// What the online phase uses, made in setup and offline. Secret (no `Debug`).
pub(super) struct ServerState<'a> {
    pub(super) h: usize,
    pub(super) sc: StepRef<'a>,
    pub(super) fin: std::sync::Arc<Circuit>,
    pub(super) prg: Prg,
    pub(super) ots: PooledOtSender,
    pub(super) mux_r: PooledOtReceiver,
    pub(super) garbler: Garbler,
    pub(super) he: HeShares,
    /// W_ih x(t) + b shares, filled when the masked inputs arrive.
    pub(super) gi: Vec<Vec<u64>>,
    /// This party's additive shares of the input projections' carries mod 2^L, carry
    /// j = (t·3 + gate)·H + i, filled with `gi`.
    pub(super) carries: Vec<u64>,
    /// m(t) = h(t) + ρ_h(t) (h(0) = 0 and ρ_h(0) = 0).
    pub(super) mh: Vec<u64>,
    pub(super) gh_keys: Vec<LeafKeys>,
    pub(super) lut: Option<(LutKeys, Vec<u64>)>,
}

/// Garbles the batches online, this party's bits folded in (`BatchJob::g_known`: no labels of
/// its own cross the wire), the client's wires on their COT zero-labels, consumed in the order
/// the client drew its choices.
pub(super) struct Garbler {
    pub(super) m0: Vec<Block>,
    pub(super) next: usize,
    pub(super) h: usize,
    pub(super) delta: Block,
    pub(super) garbling: Scheme,
}

impl Garbler {
    /// Garbles H copies of `circ` and sends their tables; returns this party's XOR shares of the
    /// outputs, the permute bits it garbled (constants in place).
    fn run(
        &mut self,
        w: &mut Wire,
        circ: &Circuit,
        g_in: usize,
        bits: &[bool],
    ) -> Result<Vec<bool>> {
        let h = self.h;
        let e_in = circ.n_inputs - g_in;
        let job = BatchJob {
            circ,
            g_in,
            n: h,
            e_zero: Some(
                self.m0
                    .get(self.next..self.next + h * e_in)
                    .ok_or_else(|| NnError::Protocol("label count mismatch".into()))?,
            ),
            reveal: Reveal::Garbler,
            scheme: self.garbling,
            g_known: Some(bits),
        };
        self.next += h * e_in;
        let b = garble_batches(w, &[job], self.delta)?
            .pop()
            .ok_or_else(|| NnError::Protocol("missing garbled batch".into()))?;
        Ok(b.decode(circ, &vec![false; h * wire_outputs(circ)])?)
    }

    /// Garbles the final circuit (one copy, the client learns the outputs) on the remaining
    /// labels.
    fn finish(&self, w: &mut Wire, circ: &Circuit, bits: &[bool]) -> Result<()> {
        let job = BatchJob {
            circ,
            g_in: bits.len(),
            n: 1,
            e_zero: Some(
                self.m0
                    .get(self.next..)
                    .ok_or_else(|| NnError::Protocol("label count mismatch".into()))?,
            ),
            reveal: Reveal::Evaluator,
            scheme: self.garbling,
            g_known: Some(bits),
        };
        garble_batches(w, &[job], self.delta)?;
        Ok(())
    }
}

/// What flight 1 (and the gate tables) leave for the products: this party's XOR shares of z,
/// the pending halves of the OTs whose answers come later and P's local part.
struct Gates {
    z_bits: Vec<bool>,
    pr_rev: PendingOtRecv,
    qr_rev: PendingOtRecv,
    pe: PendingEarlySend,
    local_p: Vec<u64>,
}

/// What flight 3 leaves for flight 4: the received z·h_C terms, Q's pending sender-first OTs
/// and local part, this party's XOR shares of y.
struct Candidate {
    y_q: Vec<u64>,
    qe: PendingEarlySend,
    local_q: Vec<u64>,
    y: Vec<bool>,
}

/// Where the server stands: which client flight it takes next, and what it keeps until then.
enum Stage {
    Inputs(InputCarryKeys),
    LeafTables(InputCarryKeys, Vec<u64>),
    CarryTables(CarryKeys, Vec<[bool; LEAF_BITS]>),
    StepLeafTables(usize, Vec<u64>),
    GateDerand(usize, Gates, Vec<bool>, Vec<u64>),
    Products(usize, Gates),
    Corrections(usize, Candidate),
    Hidden(usize, PendingEarlySend, Vec<bool>),
    Done,
}

/// The server's online phase, flight by flight: [`on_msg`](Self::on_msg) takes each client
/// flight and answers it, the last answer being the final circuit ([`is_done`](Self::is_done)).
/// A flight of the wrong kind or shape is refused as `Malformed` before anything changes.
/// Secret (no `Debug`).
pub struct ServerRun<'a> {
    m: &'a ServerModel,
    st: ServerState<'a>,
    meter: Meter,
    w: Wire,
    stage: Stage,
}

impl<'a> ServerRun<'a> {
    pub(super) fn new(
        m: &'a ServerModel,
        st: ServerState<'a>,
        keys: InputCarryKeys,
        mut meter: Meter,
        max_frame: usize,
    ) -> ServerRun<'a> {
        let w = Wire::new(max_frame);
        meter.rebase(&w);
        ServerRun {
            m,
            st,
            meter,
            w,
            stage: Stage::Inputs(keys),
        }
    }

    /// Whether the final circuit has gone out.
    pub fn is_done(&self) -> bool {
        matches!(self.stage, Stage::Done)
    }

    /// What this party measured, the cost being its wire's (the driver puts the channel's).
    pub fn report(&self) -> SessionReport {
        self.meter.snapshot(&self.w)
    }

    pub(super) fn into_meter(self) -> Meter {
        self.meter
    }

    /// The client flight this server takes next, with its exact shape.
    pub fn expects(&self) -> Result<Expect<ClientFlight>> {
        let (lay, h, steps) = (self.st.sc.lay, self.st.h, self.m.steps);
        let n_carries = steps * h * CARRIES;
        let qlay = lay.q_ring();
        use flight::Segment::{Bits, Bytes};
        Ok(match &self.stage {
            Stage::Inputs(_) => {
                Expect::new(ClientFlight::Inputs).with([Bytes(4 * steps * self.m.q.arch.embed_dim)])
            }
            Stage::LeafTables(..) => Expect::new(ClientFlight::LeafTables)
                .with([Bytes(lay.carries().leaf_table_bytes(n_carries))]),
            Stage::CarryTables(..) => Expect::new(ClientFlight::CarryTables)
                .with([Bytes(lay.carries().carry_table_bytes(n_carries))]),
            Stage::StepLeafTables(..) => Expect::new(ClientFlight::StepLeafTables)
                .with([Bytes(lay.carries().leaf_table_bytes(3 * h))]),
            Stage::GateDerand(..) => {
                Expect::new(ClientFlight::GateDerand).with([Bits(2 * h * lay.lut.unwrap_or(0))])
            }
            Stage::Products(..) => Expect::new(ClientFlight::Products)
                .with(flight::derand(h * p_early_len(&lay)))
                .with(flight::words(h * lay.gb, lay.pw))
                .with([Bytes(4 * h)])
                .with(flight::words(h * lay.gb, qlay.pw)),
            Stage::Corrections(..) => Expect::new(ClientFlight::Corrections)
                .with([Bits(h * lay.bo)])
                .with(flight::derand(h * q_early_len(&qlay)))
                .with([Bytes(4 * h)]),
            Stage::Hidden(..) => Expect::new(ClientFlight::Hidden)
                .with(flight::derand(h * lay.hw))
                .with([Bytes(4 * h)]),
            Stage::Done => {
                return Err(NnError::Protocol(
                    "gru: the server expects no client flight now".into(),
                ))
            }
        })
    }

    /// Takes the client's flight and answers it. A flight of the wrong kind or shape is
    /// refused before anything changes.
    pub fn on_msg(&mut self, msg: ClientMsg) -> Result<ServerMsg> {
        self.expects()?.check(&msg)?;
        self.w.load(msg);
        let (kind, next) = match std::mem::replace(&mut self.stage, Stage::Done) {
            Stage::Inputs(keys) => self.inputs(keys)?,
            Stage::LeafTables(keys, s_lo) => self.leaves(keys, &s_lo)?,
            Stage::CarryTables(keys, leaves) => {
                let lay = self.st.sc.lay;
                let n = self.m.steps * self.st.h * CARRIES;
                let tables: Vec<u8> = self.w.recv_pod(lay.carries().carry_table_bytes(n))?;
                self.st.carries = carry_shares(lay.carries(), &keys, &leaves, &tables)?;
                self.meter.mux(&self.w);
                self.open_step(0)?
            }
            Stage::StepLeafTables(t, gh) => {
                let lay = self.st.sc.lay;
                let h = self.st.h;
                let keys = &self.st.gh_keys[t];
                let tables: Vec<u8> = self.w.recv_pod(lay.carries().leaf_table_bytes(3 * h))?;
                let lv = leaf_outputs(lay.carries(), keys, &gh[..3 * h], &tables)?;
                self.meter.mux(&self.w);
                self.gates(t, &gh, Some(&lv))?
            }
            Stage::GateDerand(t, g, a_bits, omega) => {
                self.gate_tables(t, &a_bits, &omega)?;
                (ServerFlight::GateTables, Stage::Products(t, g))
            }
            Stage::Products(t, g) => {
                let (p, y_q, z_bits) = server_p(&mut self.w, &mut self.st, g, &mut self.meter)?;
                let c = server_q1(
                    &mut self.w,
                    self.m,
                    &mut self.st,
                    t,
                    &p,
                    y_q,
                    &z_bits,
                    &mut self.meter,
                )?;
                (ServerFlight::Candidate, Stage::Corrections(t, c))
            }
            Stage::Corrections(t, c) => {
                let (q, yd) = server_q2(
                    &mut self.w,
                    &mut self.st,
                    c.qe,
                    &c.local_q,
                    &c.y_q,
                    &mut self.meter,
                )?;
                let (hp, out) =
                    server_h1(&mut self.w, &mut self.st, &q, &c.y, &yd, &mut self.meter)?;
                (ServerFlight::State, Stage::Hidden(t, hp, out))
            }
            Stage::Hidden(t, hp, out) => {
                self.st.mh = server_h2(&mut self.w, &mut self.st, hp, &out, &mut self.meter)?;
                self.open_step(t + 1)?
            }
            Stage::Done => return Err(NnError::Protocol("gru: no server step now".into())),
        };
        self.stage = next;
        self.w.take(kind)
    }

    /// The client's x_t − ρ_x(t) for every step, from which this party computes its shares of
    /// W_ih x(t) + b; then its derandomisation of every input-projection carry leaf
    /// (cryptogru::carry_leaves).
    fn inputs(&mut self, keys: InputCarryKeys) -> Result<(ServerFlight, Stage)> {
        let (m, st) = (self.m, &mut self.st);
        let (e, h) = (m.q.arch.embed_dim, st.h);
        let f = m.fp.main.scale;
        let masked: Vec<u32> = self.w.recv_pod(m.steps * e)?;
        // W_ih x(t) + b = [W_ih (x − ρ_x) + b + S_x] + c_x
        st.gi = masked
            .chunks(e)
            .zip(&st.he.sx)
            .map(|(xm, s)| {
                let xm: Vec<u64> = xm.iter().map(|&v| v as u64).collect();
                plain_affine(&m.q.w_ih, &xm, &m.q.b_ih, f)
                    .iter()
                    .zip(s)
                    .map(|(p, s)| p.wrapping_add(*s) & RING)
                    .collect()
            })
            .collect();
        self.meter.he(&self.w);
        let s_lo: Vec<u64> = st
            .gi
            .iter()
            .flat_map(|x| x[..CARRIES * h].to_vec())
            .collect();
        let lay = st.sc.lay;
        self.w
            .send_pod(&pack_bits(&leaf_derand(lay.carries(), &keys.leaf, &s_lo)?))?;
        Ok((ServerFlight::LeafDerand, Stage::LeafTables(keys, s_lo)))
    }

    /// The client's leaf tables → this party's leaves; then its derandomisation of each 1-of-8
    /// carry OT (cryptogru::carry_shares).
    fn leaves(&mut self, keys: InputCarryKeys, s_lo: &[u64]) -> Result<(ServerFlight, Stage)> {
        let lay = self.st.sc.lay;
        let n = self.m.steps * self.st.h * CARRIES;
        let tables: Vec<u8> = self.w.recv_pod(lay.carries().leaf_table_bytes(n))?;
        let leaves = leaf_outputs(lay.carries(), &keys.leaf, s_lo, &tables)?;
        drop(keys.leaf);
        self.w
            .send_pod(&pack_bits(&carry_derand(&keys.carry, &leaves)?))?;
        Ok((
            ServerFlight::CarryDerand,
            Stage::CarryTables(keys.carry, leaves),
        ))
    }

    /// Opens step `t` from m(t) (W_hh h + b = [W_hh m + b − S_h] + (−c_h)): its hidden
    /// projections' leaf derandomisation where the layout has them, else flight 1; after the
    /// last step, the final circuit.
    fn open_step(&mut self, t: usize) -> Result<(ServerFlight, Stage)> {
        let (m, h) = (self.m, self.st.h);
        if t == m.steps {
            self.final_circuit()?;
            return Ok((ServerFlight::Final, Stage::Done));
        }
        let mut gh = plain_affine(&m.q.w_hh, &self.st.mh, &m.q.b_hh, m.fp.main.scale);
        if t > 0 {
            for (g, s) in gh.iter_mut().zip(&self.st.he.sh[t - 1]) {
                *g = g.wrapping_sub(*s) & RING;
            }
        }
        match self.st.gh_keys.get(t) {
            Some(keys) => {
                let lay = self.st.sc.lay;
                self.w
                    .send_pod(&pack_bits(&leaf_derand(lay.carries(), keys, &gh[..3 * h])?))?;
                Ok((ServerFlight::StepLeafDerand, Stage::StepLeafTables(t, gh)))
            }
            None => self.gates(t, &gh, None),
        }
    }

    /// Flight 1 (out): A's tables, this party's choices for both products' client → server
    /// direction (its XOR shares of r and z: its permute bits or table masks), and the
    /// sender-first words of P: their correlations need only its permute bits of A's outputs
    /// and its share a = gs ≫ F of gh_n. With gate tables (cryptogru::gate_luts), the client's
    /// derandomisation comes next.
    fn gates(
        &mut self,
        t: usize,
        gh: &[u64],
        gh_lv: Option<&[[bool; LEAF_BITS]]>,
    ) -> Result<(ServerFlight, Stage)> {
        let (st, w) = (&mut self.st, &mut self.w);
        let (lay, h) = (st.sc.lay, st.h);
        let gb = lay.gb;
        let x = &st.gi[t];
        let cv = &st.carries[t * CARRIES * h..(t + 1) * CARRIES * h];
        let mut bits = Vec::with_capacity(h * lay.a_garbler());
        for i in 0..h {
            let lv = gh_lv.map(|lv| [lv[i], lv[h + i], lv[2 * h + i]]);
            lay.encode_a(
                [x[i], x[h + i]],
                [cv[i], cv[h + i]],
                [gh[i], gh[h + i], gh[2 * h + i]],
                lv.as_ref(),
                &mut bits,
            );
        }
        let out = st.garbler.run(w, &st.sc.a, lay.a_garbler(), &bits)?;
        self.meter.gc(w);
        let per = st.sc.a.n_outputs();
        let ab = lay.a_gate_bits();
        let t_bits = pick(&out, per, 2 * ab..2 * ab + GHN_BITS);
        // With gate tables this party's shares of r and z are its table masks ω (fresh per
        // step), and A's outputs are the sigmoid inputs the tables are read at.
        let omega: Vec<u64> = if lay.lut.is_some() {
            (0..2 * h)
                .map(|_| st.prg.next_block().low_u64() & ring_mask(gb))
                .collect()
        } else {
            Vec::new()
        };
        let (r_bits, z_bits) = if lay.lut.is_some() {
            let mut r = Vec::with_capacity(2 * h * gb);
            for &o in &omega {
                put(&mut r, o, gb);
            }
            let z = r.split_off(h * gb);
            (r, z)
        } else {
            (pick(&out, per, 0..gb), pick(&out, per, gb..2 * gb))
        };
        let pr_rev = st.mux_r.send_choices(w, &r_bits)?;
        let qr_rev = st.mux_r.send_choices(w, &z_bits)?;
        let a_hi: Vec<u64> = (0..h)
            .map(|i| (gh[2 * h + i] >> lay.f) & ring_mask(lay.l))
            .collect();
        let (corr, local_p) = early_server(&lay, &ghn_weights(&lay), &r_bits, &t_bits, &a_hi);
        let pe = st.ots.send_correlated_early(w, &corr, lay.pw as u32)?;
        let g = Gates {
            z_bits,
            pr_rev,
            qr_rev,
            pe,
            local_p,
        };
        Ok(match lay.lut {
            Some(nb) => {
                let mut a_bits = pick(&out, per, 0..nb);
                a_bits.extend(pick(&out, per, nb..2 * nb));
                (ServerFlight::Gates, Stage::GateDerand(t, g, a_bits, omega))
            }
            None => (ServerFlight::Gates, Stage::Products(t, g)),
        })
    }

    /// The gate tables: the client's derandomisation is in; this party's tables at its shares
    /// of A's outputs go out.
    fn gate_tables(&mut self, t: usize, a_bits: &[bool], omega: &[u64]) -> Result<()> {
        let (lay, h) = (self.st.sc.lay, self.st.h);
        let (nb, keys, table) = match (lay.lut, &self.st.lut) {
            (Some(nb), Some((keys, table))) => (nb, keys, table),
            _ => return Err(NnError::Protocol("gru: gate tables without keys".into())),
        };
        let d = unpack_bits(
            &self.w.recv_pod::<u8>((2 * h * nb).div_ceil(8))?,
            2 * h * nb,
        );
        let tables = lut_tables(table, keys, t * 2 * h, a_bits, omega, &d, lay.gb)?;
        self.w.send_pod(&tables)?;
        self.meter.mux(&self.w);
        Ok(())
    }

    /// The final garbled circuit on W_fc h(T) + b = [W_fc m + b − S_fc] + (−c_fc).
    fn final_circuit(&mut self) -> Result<()> {
        let (m, st) = (self.m, &mut self.st);
        let lay = st.sc.lay;
        let ls: Vec<u64> = plain_affine(&m.q.w_fc, &st.mh, &m.q.b_fc, m.fp.main.scale)
            .iter()
            .zip(&st.he.sfc)
            .map(|(p, s)| p.wrapping_sub(*s) & RING)
            .collect();
        let amask = (1u64 << lay.acc) - 1;
        let mut bits = Vec::with_capacity(ls.len() * lay.acc);
        for v in &ls {
            put(&mut bits, v & amask, lay.acc);
        }
        st.garbler.finish(&mut self.w, &st.fin, &bits)?;
        self.meter.gc(&self.w);
        Ok(())
    }
}

/// Flight 2 (in): P's derandomisation bits, the client's OTs of r·b, P_C − π_P, and the
/// client's OTs of z·h_C. Returns this party's share of P (re-based by the client's
/// correction), its received z·h_C terms and its bits of z.
fn server_p(
    w: &mut Wire,
    st: &mut ServerState<'_>,
    g: Gates,
    meter: &mut Meter,
) -> Result<(Vec<u64>, Vec<u64>, Vec<bool>)> {
    let lay = st.sc.lay;
    let (gb, pmask, pwu) = (lay.gb, ring_mask(lay.pw), lay.pw as u32);
    let qwu = lay.q_ring().pw as u32;
    let s_p = st.ots.finish_early(w, g.pe)?;
    let y_p = st.mux_r.recv_correlated_answer(w, g.pr_rev, pwu)?;
    // P_S = Λ(a + Λ_T) − Σ (sender-first outputs) + Σ (received r·b terms)
    let p: Vec<u64> = g
        .local_p
        .iter()
        .zip(sum_chunks(&s_p, p_early_len(&lay), pmask))
        .zip(sum_chunks(&y_p, gb, pmask))
        .map(|((l, s), y)| l.wrapping_sub(s).wrapping_add(y) & pmask)
        .collect();
    let p = recv_delta(w, &p, pmask)?;
    let y_q = st.mux_r.recv_correlated_answer(w, g.qr_rev, qwu)?;
    meter.mux(w);
    Ok((p, y_q, g.z_bits))
}

/// Flight 3 (out): B's tables, then the sender-first words of Q: their correlations need this
/// party's permute bits of B's outputs and its share m(t) of h.
#[allow(
    clippy::too_many_arguments,
    reason = "the step's state, its wire and the products' parts"
)]
fn server_q1(
    w: &mut Wire,
    m: &ServerModel,
    st: &mut ServerState<'_>,
    t: usize,
    p: &[u64],
    y_q: Vec<u64>,
    z_bits: &[bool],
    meter: &mut Meter,
) -> Result<Candidate> {
    let (lay, h) = (st.sc.lay, st.h);
    // Q = z·(h − n) lives in the narrower ring 2^(fo + hw) (StepLayout::q_ring).
    let qlay = lay.q_ring();
    let (qmask, qwu) = (ring_mask(qlay.pw), qlay.pw as u32);
    let neg_nu = q_weights(&qlay, &qlay.candidate_weights(&m.fp));
    let x = &st.gi[t];
    let cv = &st.carries[t * CARRIES * h..(t + 1) * CARRIES * h];
    let mut bits = Vec::with_capacity(h * lay.b_garbler());
    for i in 0..h {
        lay.encode_b(p[i], x[2 * h + i], cv[2 * h + i], &mut bits);
    }
    let out = st.garbler.run(w, &st.sc.b, lay.b_garbler(), &bits)?;
    meter.gc(w);
    let h_s: Vec<u64> = st.mh.iter().map(|v| v & qmask).collect();
    let (corr, local_q) = early_server(&qlay, &neg_nu, z_bits, &out, &h_s);
    let qe = st.ots.send_correlated_early(w, &corr, qwu)?;
    meter.mux(w);
    let y = pick(&out, st.sc.b.n_outputs(), 0..lay.bo);
    Ok(Candidate {
        y_q,
        qe,
        local_q,
        y,
    })
}

/// Flight 4 (in): y_c ⊕ μ, Q's derandomisation bits and Q_C − π_Q. Returns this party's share
/// of Q (re-based by the client's correction) and the client's y_c ⊕ μ.
fn server_q2(
    w: &mut Wire,
    st: &mut ServerState<'_>,
    qe: PendingEarlySend,
    local_q: &[u64],
    y_q: &[u64],
    meter: &mut Meter,
) -> Result<(Vec<u64>, Vec<bool>)> {
    let (lay, h) = (st.sc.lay, st.h);
    let qlay = lay.q_ring();
    let qmask = ring_mask(qlay.pw);
    let yd = unpack_bits(&w.recv_pod::<u8>((h * lay.bo).div_ceil(8))?, h * lay.bo);
    let s_q = st.ots.finish_early(w, qe)?;
    // Q_S = Λ(h_S − Σ_y) − Σ (sender-first outputs) + Σ (received z·h_C terms)
    let q: Vec<u64> = local_q
        .iter()
        .zip(sum_chunks(&s_q, q_early_len(&qlay), qmask))
        .zip(sum_chunks(y_q, lay.gb, qmask))
        .map(|((l, s), y)| l.wrapping_sub(s).wrapping_add(y) & qmask)
        .collect();
    let q = recv_delta(w, &q, qmask)?;
    meter.mux(w);
    Ok((q, yd))
}

/// Flight 5 (out): C's tables, then the sender-first B2A words for h' (the correlations are
/// this party's permute bits, so they need no answer round). Returns the pending B2A and C's
/// outputs.
fn server_h1(
    w: &mut Wire,
    st: &mut ServerState<'_>,
    q: &[u64],
    y: &[bool],
    yd: &[bool],
    meter: &mut Meter,
) -> Result<(PendingEarlySend, Vec<bool>)> {
    let (lay, h) = (st.sc.lay, st.h);
    let (bo, hw) = (lay.bo, lay.hw);
    let mut bits = Vec::with_capacity(h * lay.c_garbler());
    for i in 0..h {
        put(&mut bits, q[i], lay.q_ring().pw);
        bits.extend((0..bo).map(|j| y[i * bo + j] ^ yd[i * bo + j]));
    }
    let out = st.garbler.run(w, &st.sc.c, lay.c_garbler(), &bits)?;
    meter.gc(w);
    let hp =
        st.ots
            .send_correlated_early(w, &b2a_deltas(&out, hw, SHARE_BITS)?, SHARE_BITS as u32)?;
    Ok((hp, out))
}

/// Flight 6 (in): the client's derandomisation bits and h'_c + ρ_h(t+1). Returns
/// m(t+1) = h' + ρ_h(t+1).
fn server_h2(
    w: &mut Wire,
    st: &mut ServerState<'_>,
    hp: PendingEarlySend,
    out: &[bool],
    meter: &mut Meter,
) -> Result<Vec<u64>> {
    let (hw, h) = (st.sc.lay.hw, st.h);
    let x_h = st.ots.finish_early(w, hp)?;
    let hs = b2a_sender(out, &x_h, hw, SHARE_BITS)?;
    let hc: Vec<u32> = w.recv_pod(h)?;
    let mh = hs
        .iter()
        .zip(&hc)
        .map(|(a, b)| a.wrapping_add(*b as u64) & RING)
        .collect();
    meter.mux(w);
    Ok(mh)
}
