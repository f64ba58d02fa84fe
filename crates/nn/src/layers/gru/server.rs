//! The server's side of CryptoGRU's secure session: it holds the model, answers the client's HE
//! uploads with flooded shares and garbles every circuit online with its own inputs folded in.
use super::bits::*;
use super::circuits::{put, sigmoid_table, step_circuits_with, StepCircuits, GHN_BITS, SHARE_BITS};
use super::config::*;
use super::logprob::session_final;
use super::model::ServerModel;
use super::products::*;
use super::report::{Meter, SessionReport};
use super::tables::*;
use crate::error::{NnError, Result};
use crate::model::Candidate;
use secinfer_gc::garble::Scheme;
use secinfer_gc::protocol::{
    garble_batches, pack_bits, unpack_bits, wire_outputs, BatchJob, Reveal,
};
use secinfer_gc::Circuit;
use secinfer_he::kernels::coeff::{self, plain_affine, server_product, Layout};
use secinfer_he::{Plaintext, PublicKey, SeededCiphertext};
use secinfer_net::{Channel, Phase};
use secinfer_ot::{Block, PendingEarlySend, PendingOtRecv, PooledOtReceiver, PooledOtSender, Prg};
use secinfer_ss::blocks::pooled::{b2a_deltas, b2a_sender};

/// The server's side of one session, revealing what the client asks for (logits included):
/// the entry point of in-process tests and benchmarks, where one party runs both sides. A served
/// model goes through [`server_session_with`] and its [`ServerPolicy`].
pub fn server_session<C: Channel>(ch: &mut C, m: &ServerModel) -> Result<SessionReport> {
    server_session_with(ch, m, ServerPolicy { allow_logits: true })
}

/// The server's side of one session under `policy`: a request for more than the policy allows
/// is refused in the handshake, and [`SessionReport::logits_revealed`] records what was shown.
///
/// The phases mirror [`client_session_garbling`](super::client_session_garbling)'s: setup
/// (handshake, base OTs, the client's public key), offline (HE responses on the client's masks,
/// pool fills, the labels' COTs and the tables' random OTs), online (the masked inputs and their
/// carries, six flights per step, the final argmax).
pub fn server_session_with<C: Channel>(
    ch: &mut C,
    m: &ServerModel,
    policy: ServerPolicy,
) -> Result<SessionReport> {
    let mut meter = Meter::start(
        ch,
        SessionReport {
            steps: m.steps,
            flood_stat_bits: f64::INFINITY,
            ..Default::default()
        },
    );
    // ---- setup: handshake
    ch.set_phase(Phase::Setup);
    let agreed = server_handshake(ch, m, policy)?;
    meter.rep.garbling = agreed.garbling;
    meter.rep.logits_revealed = agreed.reveal || agreed.log_prob;
    meter.he(ch);
    let setup = server_setup(ch, m, &agreed, &mut meter)?;
    // ---- offline: HE products on the client's masks
    ch.set_phase(Phase::Offline);
    let uploads = recv_uploads(ch, m)?;
    meter.he(ch);
    let own_step;
    let sc = if agreed.gates_in_circuit && m.step.lay.lut.is_some() {
        own_step = step_circuits_with(
            &m.fp,
            m.q.arch.activation == Candidate::Tanh,
            false,
            &m.circuits,
        );
        &own_step
    } else {
        &m.step
    };
    let (mut st, input_keys) = server_offline(ch, m, &agreed, sc, setup, uploads, &mut meter)?;
    // ---- online
    ch.set_phase(Phase::Online);
    server_inputs(ch, m, &mut st, input_keys, &mut meter)?;
    // Six flights per step, mirroring the client's.
    for t in 0..m.steps {
        server_step(ch, m, &mut st, t, &mut meter)?;
    }
    server_final(ch, m, &mut st, meter)
}

/// What the server's setup leaves for the offline phase.
struct ServerSetup {
    prg: Prg,
    delta: Block,
    ots: PooledOtSender,
    mux_r: PooledOtReceiver,
    pk: PublicKey,
}

/// Setup after the handshake: the base OTs of both pools (this party's pool carries the
/// free-XOR offset Δ), then the client's BFV public key.
fn server_setup<C: Channel>(
    ch: &mut C,
    m: &ServerModel,
    agreed: &Agreed,
    meter: &mut Meter,
) -> Result<ServerSetup> {
    let params = &m.params;
    let mut prg = Prg::new();
    let delta = Block(prg.next_block().0 | 1);
    let mut ots =
        PooledOtSender::setup_with_source_and_delta(ch, &mut prg, agreed.filler.source(), delta)
            .map_err(NnError::from)?;
    meter.gc(ch);
    // The multiplexers' pool (client → server): bootstrapped from 128 random OTs of the first
    // (as the client does), except with Ferret.
    let mux_r = if agreed.filler == OtFiller::Ferret {
        PooledOtReceiver::setup(ch, &mut prg).map_err(NnError::from)?
    } else {
        ots.bootstrap_reverse(ch, &mut prg).map_err(NnError::from)?
    };
    meter.mux(ch);
    // The client's BFV public key follows the base OTs (it makes it meanwhile). Seed plus one
    // compact residue per coefficient and Q limb (4 or 8 bytes: the set decides).
    let pk_len = 32 + params.residue_bytes() * params.n() * params.set().q.len();
    let pk = PublicKey::from_bytes(params, &ch.recv_bytes(pk_len).map_err(NnError::from)?)
        .map_err(NnError::from)?;
    meter.he(ch);
    Ok(ServerSetup {
        prg,
        delta,
        ots,
        mux_r,
        pk,
    })
}

/// The client's uploads, per projection (input, hidden, final dense): per group of vectors, one
/// upload per column chunk (coeff::Layout).
type Uploads = [Vec<Vec<Vec<u8>>>; 3];

fn recv_uploads<C: Channel>(ch: &mut C, m: &ServerModel) -> Result<Uploads> {
    let up = coeff::upload_len(&m.params);
    let mut recv_groups = |lay: &Layout, count: usize| -> Result<Vec<Vec<Vec<u8>>>> {
        (0..lay.groups(count))
            .map(|_| {
                (0..lay.chunks)
                    .map(|_| ch.recv_bytes(up).map_err(NnError::from))
                    .collect()
            })
            .collect()
    };
    Ok([
        recv_groups(&m.ih.0, m.steps)?,
        recv_groups(&m.hh.0, m.steps - 1)?,
        recv_groups(&m.fc.0, 1)?,
    ])
}

/// The server's shares S of the HE products on the client's masks: W_ih ρ_x(t) − S_x(t),
/// W_hh ρ_h(t) − S_h(t) (t ≥ 1) and W_fc ρ_h(T) − S_fc are the client's.
struct HeShares {
    sx: Vec<Vec<u64>>,
    sh: Vec<Vec<u64>>,
    sfc: Vec<u64>,
}

/// What the online phase uses, made in setup and offline. Secret (no `Debug`).
struct ServerState<'a> {
    h: usize,
    sc: &'a StepCircuits,
    fin: std::sync::Arc<Circuit>,
    prg: Prg,
    ots: PooledOtSender,
    mux_r: PooledOtReceiver,
    garbler: Garbler,
    he: HeShares,
    /// W_ih x(t) + b shares, filled when the masked inputs arrive.
    gi: Vec<Vec<u64>>,
    /// This party's additive shares of the input projections' carries mod 2^L, carry
    /// j = (t·3 + gate)·H + i, filled with `gi`.
    carries: Vec<u64>,
    /// m(t) = h(t) + ρ_h(t) (h(0) = 0 and ρ_h(0) = 0).
    mh: Vec<u64>,
    gh_keys: Vec<LeafKeys>,
    lut: Option<(LutKeys, Vec<u64>)>,
}

/// Offline after the uploads: the HE responses and pool fills side by side, the tables' random
/// OTs, and the COTs of every client circuit input.
fn server_offline<'a, C: Channel>(
    ch: &mut C,
    m: &ServerModel,
    agreed: &Agreed,
    sc: &'a StepCircuits,
    setup: ServerSetup,
    uploads: Uploads,
    meter: &mut Meter,
) -> Result<(ServerState<'a>, InputCarryKeys)> {
    let (h, c, steps) = (m.q.arch.hidden, m.q.arch.classes, m.steps);
    let ServerSetup {
        prg,
        delta,
        mut ots,
        mut mux_r,
        pk,
    } = setup;
    let lay = sc.lay;
    meter.rep.gate_tables = lay.lut.is_some();
    meter.rep.and_per_element_step = sc.and_count();
    let (fin, extra) = session_final(
        &m.fp,
        c,
        agreed.reveal,
        agreed.top_k,
        agreed.log_prob,
        &m.circuits,
    );
    let n_labels = steps * h * lay.evaluator_inputs() + c * lay.acc + extra;
    let (fwd, rev) = pool_sizes(&lay, steps, h, n_labels);
    let answers = answer_uploads(
        ch,
        m,
        &pk,
        &uploads,
        (&mut ots, &mut mux_r),
        (fwd, rev),
        meter,
    )?;
    let n_carries = steps * h * CARRIES;
    let input_keys = InputCarryKeys {
        leaf: LeafKeys::chooser(&mut mux_r, ch, lay.carries(), n_carries)?,
        carry: CarryKeys::chooser(&mut mux_r, ch, n_carries)?,
    };
    let split = |lay: &Layout, from: usize, cts: usize, count: usize| -> Vec<Vec<u64>> {
        answers[from..from + cts]
            .iter()
            .flat_map(|sh| sh.chunks(lay.rows))
            .take(count)
            .map(|v| v.to_vec())
            .collect()
    };
    let [cts_x, cts_h, _] = &uploads;
    let he = HeShares {
        sx: split(&m.ih.0, 0, cts_x.len(), steps),
        sh: split(&m.hh.0, cts_x.len(), cts_h.len(), steps - 1),
        sfc: split(&m.fc.0, cts_x.len() + cts_h.len(), 1, 1).concat(),
    };
    ch.flush().map_err(NnError::from)?;
    meter.he(ch);
    // ---- offline: COTs for every client input; their m0 are the zero-labels of the client's
    // wires when each circuit is garbled online, once this party's inputs are known
    // (`BatchJob::g_known`: its own inputs are folded into the garbling and cost no label).
    let m0: Vec<Block> = ots
        .send_cot_view(ch, n_labels)
        .map_err(NnError::from)?
        .to_vec();
    ch.flush().map_err(NnError::from)?;
    meter.gc(ch);
    meter.rep.and_gates = sc.and_count() * (h * steps) as u64 + fin.and_count();
    // The gate tables' OTs (cryptogru::gate_luts), after the labels' COTs in this pool.
    let gh_keys: Vec<LeafKeys> = if lay.gh_leaves() {
        (0..steps)
            .map(|_| LeafKeys::chooser(&mut mux_r, ch, lay.carries(), 3 * h))
            .collect::<secinfer_ss::Result<_>>()?
    } else {
        Vec::new()
    };
    let lut = match lay.lut {
        Some(nb) => Some((
            LutKeys::holder(&mut ots, ch, nb, 2 * h * steps)?,
            sigmoid_table(&m.fp, &lay)
                .ok_or_else(|| NnError::Protocol("gate tables: no table".into()))?,
        )),
        None => None,
    };
    let st = ServerState {
        h,
        sc,
        fin,
        prg,
        ots,
        mux_r,
        garbler: Garbler {
            m0,
            next: 0,
            h,
            delta,
            garbling: agreed.garbling,
        },
        he,
        gi: Vec::new(),
        carries: Vec::new(),
        mh: vec![0u64; h],
        gh_keys,
        lut,
    };
    Ok((st, input_keys))
}

/// The HE responses (W·ρ − S, flooded) are computed in the background while this thread fills
/// both OT pools with the client: the fills are a few flights whose parties mostly wait for each
/// other, the HE products keep both cores busy. The responses follow the fills on the wire, in
/// upload order; the client decrypts them as they arrive. Returns the server's shares S of W·ρ,
/// one per upload group, in upload order.
fn answer_uploads<C: Channel>(
    ch: &mut C,
    m: &ServerModel,
    pk: &PublicKey,
    uploads: &Uploads,
    (ots, mux_r): (&mut PooledOtSender, &mut PooledOtReceiver),
    (fwd, rev): (usize, usize),
    meter: &mut Meter,
) -> Result<Vec<Vec<u64>>> {
    let params = &m.params;
    type Answer = Result<(Vec<Vec<u8>>, Vec<u64>, f64)>;
    // Per group: its layout, the weight plaintexts, the chunk uploads.
    type Work<'a> = (&'a Layout, &'a [Plaintext], &'a [Vec<u8>]);
    let [cts_x, cts_h, ct_fc] = uploads;
    let work: Vec<Work<'_>> = cts_x
        .iter()
        .map(|g| (&m.ih.0, m.ih.1.as_slice(), g.as_slice()))
        .chain(
            cts_h
                .iter()
                .map(|g| (&m.hh.0, m.hh.1.as_slice(), g.as_slice())),
        )
        .chain(
            ct_fc
                .iter()
                .map(|g| (&m.fc.0, m.fc.1.as_slice(), g.as_slice())),
        )
        .collect();
    let (tx, rx) = std::sync::mpsc::channel::<Answer>();
    std::thread::scope(|s| {
        let work = &work;
        s.spawn(move || {
            for &(lay, pts, group) in work {
                let r = group
                    .iter()
                    .map(|b| {
                        SeededCiphertext::from_bytes(params, b)
                            .map(|ct| ct.expand(params))
                            .map_err(NnError::from)
                    })
                    .collect::<Result<Vec<_>>>()
                    .and_then(|cts| Ok(server_product(params, pk, lay, pts, &cts)?));
                let failed = r.is_err();
                // The receiver is gone when the fills failed: stop.
                if tx.send(r).is_err() || failed {
                    break;
                }
            }
        });
        let filled = ots
            .fill(ch, fwd)
            .map_err(NnError::from)
            .and_then(|_| mux_r.fill(ch, rev).map_err(NnError::from));
        meter.gc(ch);
        let rx = rx;
        filled?;
        let mut shares = Vec::with_capacity(work.len());
        for _ in work {
            let (resp, share, stat) = rx
                .recv()
                .map_err(|_| NnError::Protocol("HE worker stopped".into()))??;
            meter.rep.flood_stat_bits = meter.rep.flood_stat_bits.min(stat);
            for r in resp {
                ch.send_frame_vec(r).map_err(NnError::from)?;
            }
            shares.push(share);
        }
        Ok(shares)
    })
}

/// Online, first: the client's x_t − ρ_x(t) for every step, from which this party computes its
/// shares of W_ih x(t) + b, then the input projections' carries (cryptogru::carry_leaves,
/// cryptogru::carry_shares), as this party's additive shares mod 2^L.
fn server_inputs<C: Channel>(
    ch: &mut C,
    m: &ServerModel,
    st: &mut ServerState<'_>,
    keys: InputCarryKeys,
    meter: &mut Meter,
) -> Result<()> {
    let (e, h) = (m.q.arch.embed_dim, st.h);
    let lay = st.sc.lay;
    let f = m.fp.main.scale;
    let masked: Vec<u32> = ch.recv_pod(m.steps * e).map_err(NnError::from)?;
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
    meter.he(ch);
    // This party's derandomisation of every leaf, then the client's tables.
    let n_carries = m.steps * h * CARRIES;
    let s_lo: Vec<u64> = st
        .gi
        .iter()
        .flat_map(|x| x[..CARRIES * h].to_vec())
        .collect();
    ch.send_pod(&pack_bits(&leaf_derand(lay.carries(), &keys.leaf, &s_lo)?))
        .map_err(NnError::from)?;
    ch.flush().map_err(NnError::from)?;
    let tables: Vec<u8> = ch
        .recv_pod(lay.carries().leaf_table_bytes(n_carries))
        .map_err(NnError::from)?;
    let leaves = leaf_outputs(lay.carries(), &keys.leaf, &s_lo, &tables)?;
    drop(keys.leaf);
    // The carries as additive shares: this party's derandomisation of each 1-of-8 OT, then the
    // client's tables; this party's share is carry + v.
    ch.send_pod(&pack_bits(&carry_derand(&keys.carry, &leaves)?))
        .map_err(NnError::from)?;
    ch.flush().map_err(NnError::from)?;
    let tables: Vec<u8> = ch
        .recv_pod(lay.carries().carry_table_bytes(n_carries))
        .map_err(NnError::from)?;
    st.carries = carry_shares(lay.carries(), &keys.carry, &leaves, &tables)?;
    drop((leaves, keys.carry));
    meter.mux(ch);
    Ok(())
}

/// Garbles the batches online, this party's bits folded in (`BatchJob::g_known`: no labels of
/// its own cross the wire), the client's wires on their COT zero-labels, consumed in the order
/// the client drew its choices.
struct Garbler {
    m0: Vec<Block>,
    next: usize,
    h: usize,
    delta: Block,
    garbling: Scheme,
}

impl Garbler {
    /// Garbles H copies of `circ` and sends their tables; returns this party's XOR shares of the
    /// outputs, the permute bits it garbled (constants in place).
    fn run<C: Channel>(
        &mut self,
        ch: &mut C,
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
        let b = garble_batches(ch, &[job], self.delta)
            .map_err(NnError::from)?
            .pop()
            .ok_or_else(|| NnError::Protocol("missing garbled batch".into()))?;
        b.decode(circ, &vec![false; h * wire_outputs(circ)])
            .map_err(NnError::from)
    }

    /// Garbles the final circuit (one copy, the client learns the outputs) on the remaining
    /// labels.
    fn finish<C: Channel>(&self, ch: &mut C, circ: &Circuit, bits: &[bool]) -> Result<()> {
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
        garble_batches(ch, &[job], self.delta).map_err(NnError::from)?;
        Ok(())
    }
}

/// One step online, mirroring the client's (docs/gru-protocol.md, "Online flights"): from
/// m(t) to m(t+1).
fn server_step<C: Channel>(
    ch: &mut C,
    m: &ServerModel,
    st: &mut ServerState<'_>,
    t: usize,
    meter: &mut Meter,
) -> Result<()> {
    // W_hh h + b = [W_hh m + b − S_h] + (−c_h)
    let mut gh = plain_affine(&m.q.w_hh, &st.mh, &m.q.b_hh, m.fp.main.scale);
    if t > 0 {
        for (g, s) in gh.iter_mut().zip(&st.he.sh[t - 1]) {
            *g = g.wrapping_sub(*s) & RING;
        }
    }
    let gates = server_gates(ch, st, t, &gh, meter)?;
    let (p, y_q, z_bits) = server_p(ch, st, gates, meter)?;
    let (q, y, yd) = server_q(ch, m, st, t, &p, (y_q, &z_bits), meter)?;
    st.mh = server_h(ch, st, &q, &y, &yd, meter)?;
    Ok(())
}

/// This party's shares of step t's input-projection carries (r, z, n; H each).
fn step_carries<'s>(st: &'s ServerState<'_>, t: usize) -> &'s [u64] {
    let h = st.h;
    &st.carries[t * CARRIES * h..(t + 1) * CARRIES * h]
}

/// What flight 1 (and the gate tables) leave for the products: this party's XOR shares of r
/// and z, the pending halves of the OTs whose answers come later and P's local part.
struct Gates {
    z_bits: Vec<bool>,
    pr_rev: PendingOtRecv,
    qr_rev: PendingOtRecv,
    pe: PendingEarlySend,
    local_p: Vec<u64>,
}

/// The hidden projections' carry leaves (two flights, `StepLayout::gh_leaves`), then flight 1
/// (out): A's tables, this party's choices for both products' client → server direction (its
/// XOR shares of r and z: its permute bits or table masks), and the sender-first words of P:
/// their correlations need only its permute bits of A's outputs and its share a = gs ≫ F of
/// gh_n. With gate tables, two more flights (cryptogru::gate_luts).
fn server_gates<C: Channel>(
    ch: &mut C,
    st: &mut ServerState<'_>,
    t: usize,
    gh: &[u64],
    meter: &mut Meter,
) -> Result<Gates> {
    let (lay, h) = (st.sc.lay, st.h);
    let gb = lay.gb;
    let x = &st.gi[t];
    let cv = step_carries(st, t);
    // The hidden projections' carry leaves: this party's derandomisation, then the client's
    // tables; carry j = gate·H + i.
    let gh_lv = match st.gh_keys.get(t) {
        Some(keys) => {
            ch.send_pod(&pack_bits(&leaf_derand(lay.carries(), keys, &gh[..3 * h])?))
                .map_err(NnError::from)?;
            ch.flush().map_err(NnError::from)?;
            let tables: Vec<u8> = ch
                .recv_pod(lay.carries().leaf_table_bytes(3 * h))
                .map_err(NnError::from)?;
            let lv = leaf_outputs(lay.carries(), keys, &gh[..3 * h], &tables)?;
            meter.mux(ch);
            Some(lv)
        }
        None => None,
    };
    let mut bits = Vec::with_capacity(h * lay.a_garbler());
    for i in 0..h {
        let lv = gh_lv.as_ref().map(|lv| [lv[i], lv[h + i], lv[2 * h + i]]);
        lay.encode_a(
            [x[i], x[h + i]],
            [cv[i], cv[h + i]],
            [gh[i], gh[h + i], gh[2 * h + i]],
            lv.as_ref(),
            &mut bits,
        );
    }
    let out = st.garbler.run(ch, &st.sc.a, lay.a_garbler(), &bits)?;
    meter.gc(ch);
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
        for &w in &omega {
            put(&mut r, w, gb);
        }
        let z = r.split_off(h * gb);
        (r, z)
    } else {
        (pick(&out, per, 0..gb), pick(&out, per, gb..2 * gb))
    };
    let pr_rev = st.mux_r.send_choices(ch, &r_bits).map_err(NnError::from)?;
    let qr_rev = st.mux_r.send_choices(ch, &z_bits).map_err(NnError::from)?;
    let a_hi: Vec<u64> = (0..h)
        .map(|i| (gh[2 * h + i] >> lay.f) & ring_mask(lay.l))
        .collect();
    let (corr, local_p) = early_server(&lay, &ghn_weights(&lay), &r_bits, &t_bits, &a_hi);
    let pe = st
        .ots
        .send_correlated_early(ch, &corr, lay.pw as u32)
        .map_err(NnError::from)?;
    ch.flush().map_err(NnError::from)?;
    if let (Some(nb), Some((keys, table))) = (lay.lut, &st.lut) {
        // The gate tables: the client's derandomisation, then this party's tables at its
        // shares of A's outputs.
        let d = unpack_bits(
            &ch.recv_pod::<u8>((2 * h * nb).div_ceil(8))
                .map_err(NnError::from)?,
            2 * h * nb,
        );
        let mut a_bits = pick(&out, per, 0..nb);
        a_bits.extend(pick(&out, per, nb..2 * nb));
        let tables = lut_tables(table, keys, t * 2 * h, &a_bits, &omega, &d, gb)?;
        ch.send_pod(&tables).map_err(NnError::from)?;
        ch.flush().map_err(NnError::from)?;
        meter.mux(ch);
    }
    Ok(Gates {
        z_bits,
        pr_rev,
        qr_rev,
        pe,
        local_p,
    })
}

/// Flight 2 (in): P's derandomisation bits, the client's OTs of r·b, P_C − π_P, and the
/// client's OTs of z·h_C. Returns this party's share of P (re-based by the client's
/// correction), its received z·h_C terms and its bits of z.
fn server_p<C: Channel>(
    ch: &mut C,
    st: &mut ServerState<'_>,
    g: Gates,
    meter: &mut Meter,
) -> Result<(Vec<u64>, Vec<u64>, Vec<bool>)> {
    let lay = st.sc.lay;
    let (gb, pmask, pwu) = (lay.gb, ring_mask(lay.pw), lay.pw as u32);
    let qwu = lay.q_ring().pw as u32;
    let s_p = st.ots.finish_early(ch, g.pe).map_err(NnError::from)?;
    let y_p = st
        .mux_r
        .recv_correlated_answer(ch, g.pr_rev, pwu)
        .map_err(NnError::from)?;
    // P_S = Λ(a + Λ_T) − Σ (sender-first outputs) + Σ (received r·b terms)
    let p: Vec<u64> = g
        .local_p
        .iter()
        .zip(sum_chunks(&s_p, p_early_len(&lay), pmask))
        .zip(sum_chunks(&y_p, gb, pmask))
        .map(|((l, s), y)| l.wrapping_sub(s).wrapping_add(y) & pmask)
        .collect();
    let p = recv_delta(ch, &p, pmask)?;
    let y_q = st
        .mux_r
        .recv_correlated_answer(ch, g.qr_rev, qwu)
        .map_err(NnError::from)?;
    meter.mux(ch);
    Ok((p, y_q, g.z_bits))
}

/// Flight 3 (out): B's tables, then the sender-first words of Q: their correlations need this
/// party's permute bits of B's outputs and its share m(t) of h. Flight 4 (in): y_c ⊕ μ, Q's
/// derandomisation bits and Q_C − π_Q. Returns this party's share of Q (re-based by the
/// client's correction), its XOR shares of y and the client's y_c ⊕ μ.
fn server_q<C: Channel>(
    ch: &mut C,
    m: &ServerModel,
    st: &mut ServerState<'_>,
    t: usize,
    p: &[u64],
    (y_q, z_bits): (Vec<u64>, &[bool]),
    meter: &mut Meter,
) -> Result<(Vec<u64>, Vec<bool>, Vec<bool>)> {
    let (lay, h) = (st.sc.lay, st.h);
    let (gb, bo) = (lay.gb, lay.bo);
    // Q = z·(h − n) lives in the narrower ring 2^(fo + hw) (StepLayout::q_ring).
    let qlay = lay.q_ring();
    let (qmask, qwu) = (ring_mask(qlay.pw), qlay.pw as u32);
    let neg_nu = q_weights(&qlay, &qlay.candidate_weights(&m.fp));
    let (x, cv) = (&st.gi[t], step_carries(st, t));
    let mut bits = Vec::with_capacity(h * lay.b_garbler());
    for i in 0..h {
        lay.encode_b(p[i], x[2 * h + i], cv[2 * h + i], &mut bits);
    }
    let out = st.garbler.run(ch, &st.sc.b, lay.b_garbler(), &bits)?;
    meter.gc(ch);
    let h_s: Vec<u64> = st.mh.iter().map(|v| v & qmask).collect();
    let (corr, local_q) = early_server(&qlay, &neg_nu, z_bits, &out, &h_s);
    let qe = st
        .ots
        .send_correlated_early(ch, &corr, qwu)
        .map_err(NnError::from)?;
    ch.flush().map_err(NnError::from)?;
    meter.mux(ch);
    let yd = unpack_bits(
        &ch.recv_pod::<u8>((h * bo).div_ceil(8))
            .map_err(NnError::from)?,
        h * bo,
    );
    let s_q = st.ots.finish_early(ch, qe).map_err(NnError::from)?;
    // Q_S = Λ(h_S − Σ_y) − Σ (sender-first outputs) + Σ (received z·h_C terms)
    let q: Vec<u64> = local_q
        .iter()
        .zip(sum_chunks(&s_q, q_early_len(&qlay), qmask))
        .zip(sum_chunks(&y_q, gb, qmask))
        .map(|((l, s), y)| l.wrapping_sub(s).wrapping_add(y) & qmask)
        .collect();
    let q = recv_delta(ch, &q, qmask)?;
    let y = pick(&out, st.sc.b.n_outputs(), 0..bo);
    meter.mux(ch);
    Ok((q, y, yd))
}

/// Flight 5 (out): C's tables, then the sender-first B2A words for h' (the correlations are
/// this party's permute bits, so they need no answer round). Flight 6 (in): the client's
/// derandomisation bits and h'_c + ρ_h(t+1). Returns m(t+1) = h' + ρ_h(t+1).
fn server_h<C: Channel>(
    ch: &mut C,
    st: &mut ServerState<'_>,
    q: &[u64],
    y: &[bool],
    yd: &[bool],
    meter: &mut Meter,
) -> Result<Vec<u64>> {
    let (lay, h) = (st.sc.lay, st.h);
    let (bo, hw) = (lay.bo, lay.hw);
    let mut bits = Vec::with_capacity(h * lay.c_garbler());
    for i in 0..h {
        put(&mut bits, q[i], lay.q_ring().pw);
        bits.extend((0..bo).map(|j| y[i * bo + j] ^ yd[i * bo + j]));
    }
    let out = st.garbler.run(ch, &st.sc.c, lay.c_garbler(), &bits)?;
    meter.gc(ch);
    let hp = st
        .ots
        .send_correlated_early(ch, &b2a_deltas(&out, hw, SHARE_BITS)?, SHARE_BITS as u32)
        .map_err(NnError::from)?;
    ch.flush().map_err(NnError::from)?;
    let x_h = st.ots.finish_early(ch, hp).map_err(NnError::from)?;
    let hs = b2a_sender(&out, &x_h, hw, SHARE_BITS)?;
    let hc: Vec<u32> = ch.recv_pod(h).map_err(NnError::from)?;
    let mh = hs
        .iter()
        .zip(&hc)
        .map(|(a, b)| a.wrapping_add(*b as u64) & RING)
        .collect();
    meter.mux(ch);
    Ok(mh)
}

/// The final garbled circuit on W_fc h(T) + b = [W_fc m + b − S_fc] + (−c_fc).
fn server_final<C: Channel>(
    ch: &mut C,
    m: &ServerModel,
    st: &mut ServerState<'_>,
    mut meter: Meter,
) -> Result<SessionReport> {
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
    st.garbler.finish(ch, &st.fin, &bits)?;
    meter.gc(ch);
    Ok(meter.finish(ch))
}
