//! The client's side of CryptoGRU's secure session: it holds the HE secret key, evaluates the
//! garbled circuits and learns the class (or the logits).
use super::bits::*;
use super::circuits::{
    index_bits, put, step_circuits_with, StepCircuits, StepLayout, GHN_BITS, LEAF_BITS, SHARE_BITS,
};
use super::config::*;
use super::logprob::session_final;
use super::model::{check_state_exact, input_layout, ClientModel};
use super::products::*;
use super::report::{top_k, GruOutcome, Meter, SessionReport};
use super::tables::*;
use crate::error::{NnError, Result};
use crate::model::Candidate;
use secinfer_gc::garble::Scheme;
use secinfer_gc::protocol::{pack_bits, recv_evaluate_known, unpack_bits, wire_outputs, Reveal};
use secinfer_gc::Circuit;
use secinfer_he::kernels::coeff::{self, client_share, to_ring, Layout};
use secinfer_he::{Params, SecretKey};
use secinfer_net::{Channel, Phase};
use secinfer_ot::{
    packed_len, Block, PendingEarlyRecv, PendingOtSend, PooledOtReceiver, PooledOtSender, Prg,
};
use secinfer_ss::blocks::pooled::b2a_receiver;

/// The client's per-element, per-step masks (secret; no `Debug`).
/// Its circuit inputs in place of its online shares: π_P, π_Q (PW bits) for the products,
/// μ (bo bits) for its XOR share of y.
pub(super) struct ElemMasks {
    pi_p: u64,
    pi_q: u64,
    mu: u64,
    /// Its XOR shares of the carry leaves of gi_r, gi_z, gi_n (cryptogru::carry_leaves).
    tau: [[bool; LEAF_BITS]; CARRIES],
    /// v mod 2^L per carry: the client's additive share of it is −v, the server's carry + v
    /// (cryptogru::carry_shares).
    v: [u64; CARRIES],
    /// Its XOR shares of the leaves of gh_r, gh_z, gh_n's carries (`StepLayout::gh_leaves`).
    tau_h: [[bool; LEAF_BITS]; 3],
}

impl ElemMasks {
    fn draw(prg: &mut Prg, lay: &StepLayout) -> ElemMasks {
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

/// The client's side of one session. `progress(stage, done, total)` reports preparation.
///
/// Delphi-style preprocessing (cryptogru::offline): every HE product is taken on the client's
/// uniform masks ρ, not on its data, so all of HE, all COTs and all garbling run offline. Online
/// the client sends x_t − ρ_x(t) (a one-time pad mod 2^32: the server computes W_ih·(x − ρ_x)
/// in the clear), and per step the server sends its input labels and the client returns the
/// permute bits of the outputs, from which the server decodes m = h' + ρ_h (uniform to it).
pub fn client_session<C: Channel>(
    ch: &mut C,
    m: &ClientModel,
    tokens: &[u32],
    opts: ClientOptions,
    progress: &mut dyn FnMut(&str, u64, u64),
) -> Result<GruOutcome> {
    client_session_with(ch, m, tokens, opts, OtFiller::default(), progress)
}

/// [`client_session`] with a chosen OT filler (the server follows the client's choice).
pub fn client_session_with<C: Channel>(
    ch: &mut C,
    m: &ClientModel,
    tokens: &[u32],
    opts: ClientOptions,
    filler: OtFiller,
    progress: &mut dyn FnMut(&str, u64, u64),
) -> Result<GruOutcome> {
    client_session_garbling(ch, m, tokens, opts, filler, DEFAULT_GARBLING, progress)
}

/// [`client_session_with`] with a chosen AND-gate garbling scheme (half-gates or three-halves:
/// 32 or 24.625 bytes per AND gate; the server follows the client's choice).
///
/// The phases mirror [`server_session`](super::server_session)'s: setup (handshake, keys, base
/// OTs), offline (HE products on the masks, pool fills, the labels' COTs and the tables' random
/// OTs), online (the masked inputs and their carries, six flights per step, the final argmax).
pub fn client_session_garbling<C: Channel>(
    ch: &mut C,
    m: &ClientModel,
    tokens: &[u32],
    opts: ClientOptions,
    filler: OtFiller,
    garbling: Scheme,
    progress: &mut dyn FnMut(&str, u64, u64),
) -> Result<GruOutcome> {
    let steps = m.steps;
    if tokens.len() != steps {
        return Err(NnError::Input(format!(
            "{} tokens for a {steps}-step model",
            tokens.len()
        )));
    }
    crate::reference::check_tokens(tokens, m.arch.vocab)?;
    let mut meter = Meter::start(
        ch,
        SessionReport {
            steps,
            garbling,
            ..Default::default()
        },
    );
    let setup = client_setup(ch, m, opts, filler, garbling, &mut meter, progress)?;
    let (mut st, input_keys) = client_offline(ch, m, opts, garbling, setup, &mut meter)?;
    // ---- online
    ch.set_phase(Phase::Online);
    client_inputs(ch, m, tokens, &st, input_keys, &mut meter)?;
    for t in 0..steps {
        client_step(ch, &mut st, t, &mut meter)?;
        // The step's tables are garbled, sent and evaluated now (no longer offline).
        progress("garbled steps", t as u64 + 1, steps as u64);
    }
    client_final(ch, m, opts, &mut st, meter)
}

/// What the client's helper thread prepares during the base OTs.
struct ClientKeys {
    sk: SecretKey,
    pk: Vec<u8>,
    rho_x: Vec<Vec<u64>>,
    rho_h: Vec<Vec<u64>>,
    uploads: Vec<Vec<u8>>,
}

/// The layouts of the three HE projections (input, hidden, final dense).
struct Projections {
    ih: Layout,
    hh: Layout,
    fc: Layout,
}

/// What the client's setup leaves for the offline phase.
struct ClientSetup {
    params: Params,
    proj: Projections,
    otr: PooledOtReceiver,
    mux_s: PooledOtSender,
    sk: SecretKey,
    rho_x: Vec<Vec<u64>>,
    rho_h: Vec<Vec<u64>>,
    uploads: Vec<Vec<u8>>,
}

/// Setup: the handshake, the BFV key and masks (made on a helper thread), the base OTs of both
/// pools, then the public key.
fn client_setup<C: Channel>(
    ch: &mut C,
    m: &ClientModel,
    opts: ClientOptions,
    filler: OtFiller,
    garbling: Scheme,
    meter: &mut Meter,
    progress: &mut dyn FnMut(&str, u64, u64),
) -> Result<ClientSetup> {
    let a = &m.arch;
    let (e, h, c) = (a.embed_dim, a.hidden, a.classes);
    let steps = m.steps;
    ch.set_phase(Phase::Setup);
    client_handshake(ch, m, opts, filler, garbling)?;
    meter.he(ch);
    progress("keys", 0, 2);
    let params = Params::by_name(HE_PARAMS).map_err(NnError::from)?;
    let proj = Projections {
        ih: input_layout(&params, 3 * h, e, steps)?,
        hh: input_layout(&params, 3 * h, h, steps.saturating_sub(1).max(1))?,
        fc: Layout::new(c, h, params.n())?,
    };
    // The BFV key, the masks and their encrypted uploads need nothing from the server: a helper
    // thread makes them while this one runs the OT pools' base OTs (which mostly wait on the
    // server); the public key follows the base OTs, the uploads open the offline phase.
    let keys = {
        let params = params.clone();
        let (ih, hh, fc) = (proj.ih, proj.hh, proj.fc);
        std::thread::spawn(move || make_keys(&params, [&ih, &hh, &fc], steps, e, h))
    };
    let mut otr = PooledOtReceiver::setup_with_source(ch, &mut Prg::new(), filler.source())
        .map_err(NnError::from)?;
    meter.gc(ch);
    // The multiplexers' second direction: the client sends. With IKNP or SoftSpoken it is
    // bootstrapped on 128 random OTs of the first pool (`bootstrap_reverse`): no second set of
    // public-key base OTs. (A Ferret pool would pay a whole LPN iteration for 128 COTs there:
    // Chou–Orlandi base OTs and IKNP instead.)
    let mux_s = if filler == OtFiller::Ferret {
        PooledOtSender::setup(ch, &mut Prg::new()).map_err(NnError::from)?
    } else {
        otr.bootstrap_reverse(ch, &mut Prg::new())
            .map_err(NnError::from)?
    };
    meter.mux(ch);
    progress("keys", 1, 2);
    let ClientKeys {
        sk,
        pk,
        rho_x,
        rho_h,
        uploads,
    } = keys
        .join()
        .map_err(|_| NnError::Protocol("key generation panicked".into()))??;
    ch.send_frame_vec(pk).map_err(NnError::from)?;
    meter.he(ch);
    progress("keys", 2, 2);
    Ok(ClientSetup {
        params,
        proj,
        otr,
        mux_s,
        sk,
        rho_x,
        rho_h,
        uploads,
    })
}

/// The helper thread's work: the BFV key pair, the masks ρ_x(t), ρ_h(t) and the encrypted
/// uploads of every projection's inputs (`lays`: input, hidden, final dense).
fn make_keys(
    params: &Params,
    lays: [&Layout; 3],
    steps: usize,
    e: usize,
    h: usize,
) -> Result<ClientKeys> {
    let sk = SecretKey::generate(params);
    let pk = sk.public_key().to_bytes();
    let mut prg = Prg::new();
    let rho_x: Vec<Vec<u64>> = (0..steps).map(|_| uniform(&mut prg, e)).collect();
    // ρ_h(t) masks h(t), t = 1..=T; h(0) = 0 is public, so ρ_h(0) = 0.
    let rho_h: Vec<Vec<u64>> = (0..=steps)
        .map(|t| {
            if t == 0 {
                vec![0; h]
            } else {
                uniform(&mut prg, h)
            }
        })
        .collect();
    let mut uploads = Vec::new();
    for (lay, xs) in lays
        .into_iter()
        .zip([&rho_x[..], &rho_h[1..steps], &rho_h[steps..]])
    {
        for group in xs.chunks(lay.group) {
            let refs: Vec<&[u64]> = group.iter().map(|x| x.as_slice()).collect();
            for poly in lay.input_polys(&refs) {
                let ct = sk.encrypt_poly_seeded(&poly).map_err(NnError::from)?;
                uploads.push(ct.to_bytes());
            }
        }
    }
    Ok(ClientKeys {
        sk,
        pk,
        rho_x,
        rho_h,
        uploads,
    })
}

/// The client's shares of the HE products on its masks: c_x(t) + S_x(t) = W_ih ρ_x(t),
/// c_h(t) + S_h(t) = W_hh ρ_h(t) (t ≥ 1), c_fc + S_fc = W_fc ρ_h(T).
struct HeShares {
    cx: Vec<Vec<u64>>,
    chh: Vec<Vec<u64>>,
    cfc: Vec<u64>,
}

/// What the online phase uses, made in setup and offline. Secret (no `Debug`).
struct ClientState {
    h: usize,
    sc: StepCircuits,
    fin: std::sync::Arc<Circuit>,
    otr: PooledOtReceiver,
    mux_s: PooledOtSender,
    eval: Evaluator,
    rho_x: Vec<Vec<u64>>,
    rho_h: Vec<Vec<u64>>,
    he: HeShares,
    masks: Vec<Vec<ElemMasks>>,
    lut_keys: Option<LutKeys>,
    gh_keys: Vec<LeafKeys>,
}

/// Offline: the uploads, the pool fills (the server computes the HE responses meanwhile), the
/// responses decrypted into shares, then every client circuit input's label by COT and the
/// tables' random OTs.
fn client_offline<C: Channel>(
    ch: &mut C,
    m: &ClientModel,
    opts: ClientOptions,
    garbling: Scheme,
    setup: ClientSetup,
    meter: &mut Meter,
) -> Result<(ClientState, InputCarryKeys)> {
    let (h, c, steps) = (m.arch.hidden, m.arch.classes, m.steps);
    let ClientSetup {
        params,
        proj,
        mut otr,
        mut mux_s,
        sk,
        rho_x,
        rho_h,
        uploads,
    } = setup;
    // ---- offline: HE products on the masks
    ch.set_phase(Phase::Offline);
    let mut prg = Prg::new();
    for u in uploads {
        ch.send_frame_vec(u).map_err(NnError::from)?;
    }
    ch.flush().map_err(NnError::from)?;
    meter.he(ch);
    let sc = step_circuits_with(
        &m.fp,
        m.arch.activation == Candidate::Tanh,
        !opts.gates_in_circuit,
        &m.circuits,
    );
    let lay = sc.lay;
    meter.rep.gate_tables = lay.lut.is_some();
    meter.rep.and_per_element_step = sc.and_count();
    check_state_exact(&lay)?;
    let (fin, extra) = session_final(
        &m.fp,
        c,
        opts.reveal_logits,
        opts.indices(c),
        opts.log_prob_of.is_some(),
        &m.circuits,
    );
    let n_labels = steps * h * lay.evaluator_inputs() + c * lay.acc + extra;
    // Fill both pools with every COT the session will use (the labels' COTs below, the B2A and
    // multiplexer OTs online), so online OTs cost one derandomisation bit each. The server
    // computes the HE responses meanwhile; they follow the fills.
    let (fwd, rev) = pool_sizes(&lay, steps, h, n_labels);
    otr.fill(ch, fwd).map_err(NnError::from)?;
    mux_s.fill(ch, rev).map_err(NnError::from)?;
    meter.gc(ch);
    let he = recv_he_shares(ch, &params, &proj, &sk, steps, c)?;
    meter.he(ch);
    // ---- offline: the client's GC inputs are all known now; their labels by COT
    // Per step and element: λ_r, λ_z (gb bits), β, π_P, β_d, π_Q (PW bits), λ_n (bo bits).
    let masks: Vec<Vec<ElemMasks>> = (0..steps)
        .map(|_| (0..h).map(|_| ElemMasks::draw(&mut prg, &lay)).collect())
        .collect();
    let mut choices = label_choices(&lay, h, &he, &masks);
    if let Some(w) = opts.log_prob_of {
        put(&mut choices, w as u64, extra);
    }
    if choices.len() != n_labels {
        return Err(NnError::Protocol("label count mismatch".into()));
    }
    let labels = otr.recv_cot(ch, &choices).map_err(NnError::from)?;
    ch.flush().map_err(NnError::from)?;
    // The carry leaves' OTs: hashing 2^m keys per leaf is this party's work alone, so it runs
    // after the label COTs, which the server's garbling waits for.
    let n_carries = steps * h * CARRIES;
    let input_keys = InputCarryKeys {
        leaf: LeafKeys::holder(&mut mux_s, ch, lay.carries(), n_carries)?,
        carry: CarryKeys::holder(&mut mux_s, ch, n_carries)?,
    };
    // The gate tables' OTs (cryptogru::gate_luts) follow the labels' COTs in the server →
    // client pool.
    let lut_keys = match lay.lut {
        Some(nb) => Some(LutKeys::reader(&mut otr, ch, nb, 2 * h * steps)?),
        None => None,
    };
    // The hidden projections' leaves, one set per step (`StepLayout::gh_leaves`).
    let gh_keys: Vec<LeafKeys> = if lay.gh_leaves() {
        (0..steps)
            .map(|_| LeafKeys::holder(&mut mux_s, ch, lay.carries(), 3 * h))
            .collect::<secinfer_ss::Result<_>>()?
    } else {
        Vec::new()
    };
    meter.gc(ch);
    meter.rep.and_gates = sc.and_count() * (h * steps) as u64 + fin.and_count();
    let st = ClientState {
        h,
        sc,
        fin,
        otr,
        mux_s,
        eval: Evaluator {
            labels,
            next: 0,
            h,
            garbling,
        },
        rho_x,
        rho_h,
        he,
        masks,
        lut_keys,
        gh_keys,
    };
    Ok((st, input_keys))
}

/// The responses of every upload, in upload order; each group is decrypted on the pool as soon
/// as its frames are in, groups in parallel (an input-projection group is one block).
fn recv_he_shares<C: Channel>(
    ch: &mut C,
    params: &Params,
    proj: &Projections,
    sk: &SecretKey,
    steps: usize,
    c: usize,
) -> Result<HeShares> {
    let groups: Vec<(&Layout, usize)> = [(&proj.ih, steps), (&proj.hh, steps - 1), (&proj.fc, 1)]
        .into_iter()
        .flat_map(|(lay, count)| {
            (0..count.div_ceil(lay.group)).map(move |g| (lay, lay.group.min(count - g * lay.group)))
        })
        .collect();
    let (tx, rx) = std::sync::mpsc::channel::<(usize, Result<Vec<u64>>)>();
    rayon::in_place_scope(|s| -> Result<()> {
        for (gi, &(lay, _)) in groups.iter().enumerate() {
            let r: Vec<Vec<u8>> = (0..lay.blocks)
                .map(|b| {
                    ch.recv_bytes(coeff::response_len(params, lay, b))
                        .map_err(NnError::from)
                })
                .collect::<Result<_>>()?;
            let tx = tx.clone();
            s.spawn(move |_| {
                let _ = tx.send((gi, client_share(sk, lay, &r).map_err(NnError::from)));
            });
        }
        Ok(())
    })?;
    drop(tx);
    let mut shares: Vec<Option<Vec<u64>>> = vec![None; groups.len()];
    for (gi, r) in rx {
        shares[gi] = Some(r?);
    }
    let mut per_input = groups.iter().zip(shares).flat_map(|(&(lay, k), sh)| {
        sh.unwrap_or_default()
            .chunks(lay.rows)
            .take(k)
            .map(|v| v.to_vec())
            .collect::<Vec<_>>()
    });
    let cx: Vec<Vec<u64>> = per_input.by_ref().take(steps).collect();
    let chh: Vec<Vec<u64>> = per_input.by_ref().take(steps - 1).collect();
    let cfc: Vec<u64> = per_input.next().unwrap_or_default();
    if cx.len() != steps || chh.len() != steps - 1 || cfc.len() != c {
        return Err(NnError::Protocol("missing HE shares".into()));
    }
    Ok(HeShares { cx, chh, cfc })
}

/// The client's share of W_hh h(t) + b, element j: W_hh h(t) = W_hh m(t) − W_hh ρ_h(t), so it
/// is −c_h(t) (and 0 at t = 0, where h(0) = 0).
fn gh_share(he: &HeShares, t: usize, j: usize) -> u64 {
    if t == 0 {
        0
    } else {
        neg(he.chh[t - 1][j])
    }
}

/// The client's choice bits for every label of the session, in the order the circuits consume
/// them: per step A's, B's and C's evaluator inputs, then the final circuit's.
fn label_choices(lay: &StepLayout, h: usize, he: &HeShares, masks: &[Vec<ElemMasks>]) -> Vec<bool> {
    let amask = (1u64 << lay.acc) - 1;
    let steps = masks.len();
    let mut choices =
        Vec::with_capacity(steps * h * lay.evaluator_inputs() + he.cfc.len() * lay.acc);
    for (t, mt) in masks.iter().enumerate() {
        let x = &he.cx[t];
        for (i, mk) in mt.iter().enumerate() {
            lay.encode_a(
                [x[i], x[h + i]],
                [neg(mk.v[0]), neg(mk.v[1])],
                [
                    gh_share(he, t, i),
                    gh_share(he, t, h + i),
                    gh_share(he, t, 2 * h + i),
                ],
                lay.gh_leaves().then_some(&mk.tau_h),
                &mut choices,
            );
        }
        for (i, mk) in mt.iter().enumerate() {
            lay.encode_b(mk.pi_p, x[2 * h + i], neg(mk.v[2]), &mut choices);
        }
        for mk in mt {
            put(&mut choices, mk.pi_q, lay.q_ring().pw);
            put(&mut choices, mk.mu, lay.bo);
        }
    }
    for v in &he.cfc {
        put(&mut choices, neg(*v) & amask, lay.acc);
    }
    choices
}

/// Online, first: x_t − ρ_x(t) for every step, then the input projections' carries
/// (cryptogru::carry_leaves, cryptogru::carry_shares): four flights per session, none per step.
fn client_inputs<C: Channel>(
    ch: &mut C,
    m: &ClientModel,
    tokens: &[u32],
    st: &ClientState,
    keys: InputCarryKeys,
    meter: &mut Meter,
) -> Result<()> {
    let (e, h) = (m.arch.embed_dim, st.h);
    let lay = st.sc.lay;
    let mut masked: Vec<u32> = Vec::with_capacity(m.steps * e);
    for (t, &tok) in tokens.iter().enumerate() {
        let x = to_ring(&m.embed[tok as usize * e..(tok as usize + 1) * e]);
        masked.extend(
            x.iter()
                .zip(&st.rho_x[t])
                .map(|(x, r)| (x.wrapping_sub(*r) & RING) as u32),
        );
    }
    ch.send_pod(&masked).map_err(NnError::from)?;
    ch.flush().map_err(NnError::from)?;
    meter.he(ch);
    // The input projections' carries (cryptogru::carry_leaves): the server's derandomisation
    // of every leaf, then this party's tables; carry j = (t·3 + gate)·H + i.
    let n_carries = m.steps * h * CARRIES;
    let d = unpack_bits(
        &ch.recv_pod::<u8>((n_carries * lay.f).div_ceil(8))
            .map_err(NnError::from)?,
        n_carries * lay.f,
    );
    let mut c_lo = Vec::with_capacity(n_carries);
    let mut tau = Vec::with_capacity(n_carries);
    let mut v = Vec::with_capacity(n_carries);
    for (x, mk) in st.he.cx.iter().zip(&st.masks) {
        for g in 0..CARRIES {
            c_lo.extend_from_slice(&x[g * h..(g + 1) * h]);
            tau.extend(mk.iter().map(|m| m.tau[g]));
            v.extend(mk.iter().map(|m| m.v[g]));
        }
    }
    let tables = leaf_tables(lay.carries(), &keys.leaf, &c_lo, &tau, &d)?;
    drop(keys.leaf);
    ch.send_pod(&tables).map_err(NnError::from)?;
    ch.flush().map_err(NnError::from)?;
    // The carries as additive shares (cryptogru::carry_shares): the server's derandomisation of
    // each 1-of-8 OT, then this party's tables.
    let d = unpack_bits(
        &ch.recv_pod::<u8>((n_carries * LEAF_BITS).div_ceil(8))
            .map_err(NnError::from)?,
        n_carries * LEAF_BITS,
    );
    let tables = carry_tables(lay.carries(), &keys.carry, &tau, &v, &d)?;
    drop(keys.carry);
    ch.send_pod(&tables).map_err(NnError::from)?;
    ch.flush().map_err(NnError::from)?;
    meter.mux(ch);
    Ok(())
}

/// Evaluates the batches the server garbles online (its own inputs folded in, so it sends only
/// the tables) as their tables arrive, on this party's offline COT labels, consumed in the
/// order of its choices.
struct Evaluator {
    labels: Vec<Block>,
    next: usize,
    h: usize,
    garbling: Scheme,
}

impl Evaluator {
    /// This party's XOR shares of a batch's outputs (`Reveal::Garbler`: H copies), or the
    /// outputs themselves (`Reveal::Evaluator`: one copy).
    fn eval<C: Channel>(
        &mut self,
        ch: &mut C,
        circ: &Circuit,
        g_in: usize,
        reveal: Reveal,
    ) -> Result<Vec<bool>> {
        let n = if reveal == Reveal::Garbler { self.h } else { 1 };
        let e_in = circ.n_inputs - g_in;
        let mine = self
            .labels
            .get(self.next..self.next + n * e_in)
            .ok_or_else(|| NnError::Protocol("label count mismatch".into()))?;
        self.next += n * e_in;
        let bits = recv_evaluate_known(ch, circ, g_in, n, reveal, self.garbling, mine)
            .map_err(NnError::from)?;
        Ok(if reveal == Reveal::Garbler {
            client_output_shares(circ, &bits)
        } else {
            bits
        })
    }
}

/// One step online: six flights (docs/gru-protocol.md, "Online flights"), plus two for the
/// hidden projections' carry leaves and two for the gate tables where the layout has them.
/// Each party's independent messages travel together, every pooled OT is split into its
/// derandomisation half and its answer half, and both products are sender-first OTs on
/// decompositions.
fn client_step<C: Channel>(
    ch: &mut C,
    st: &mut ClientState,
    t: usize,
    meter: &mut Meter,
) -> Result<()> {
    if t < st.gh_keys.len() {
        client_gh_leaves(ch, st, t, meter)?;
    }
    let gates = client_gates(ch, st, t, meter)?;
    let (z_bits, q_hc) = client_p(ch, st, t, gates, meter)?;
    client_q(ch, st, t, &z_bits, &q_hc, meter)?;
    client_h(ch, st, t, meter)
}

/// The hidden projections' carry leaves (two flights): the server's derandomisation, then this
/// party's tables; carry j = gate·H + i.
fn client_gh_leaves<C: Channel>(
    ch: &mut C,
    st: &ClientState,
    t: usize,
    meter: &mut Meter,
) -> Result<()> {
    let (lay, h) = (st.sc.lay, st.h);
    let n = 3 * h * lay.f;
    let d = unpack_bits(&ch.recv_pod::<u8>(n.div_ceil(8)).map_err(NnError::from)?, n);
    let c_lo: Vec<u64> = (0..3 * h).map(|j| gh_share(&st.he, t, j)).collect();
    let tau: Vec<[bool; LEAF_BITS]> = (0..3)
        .flat_map(|g| st.masks[t].iter().map(move |m| m.tau_h[g]))
        .collect();
    ch.send_pod(&leaf_tables(
        lay.carries(),
        &st.gh_keys[t],
        &c_lo,
        &tau,
        &d,
    )?)
    .map_err(NnError::from)?;
    ch.flush().map_err(NnError::from)?;
    meter.mux(ch);
    Ok(())
}

/// What flight 1 (and the gate tables) leave for the products: the XOR shares of r, z and of
/// trunc(gh_n)'s three bits, and the pending halves of the OTs whose answers come later.
struct Gates {
    r_bits: Vec<bool>,
    z_bits: Vec<bool>,
    t_bits: Vec<bool>,
    pr_rev: PendingOtSend,
    qr_rev: PendingOtSend,
    pe: PendingEarlyRecv,
}

/// Flight 1 (in): A's tables; the server's choices for both products' client → server
/// direction (its XOR shares of r and z); the server's sender-first words for P (their
/// correlations need only its permute bits and its share of gh_n). With gate tables, two more
/// flights (cryptogru::gate_luts): this party's derandomisation of the tables' OTs, then the
/// server's tables; r and z come out XOR-shared.
fn client_gates<C: Channel>(
    ch: &mut C,
    st: &mut ClientState,
    t: usize,
    meter: &mut Meter,
) -> Result<Gates> {
    let (lay, h) = (st.sc.lay, st.h);
    let gb = lay.gb;
    let out = st
        .eval
        .eval(ch, &st.sc.a, lay.a_garbler(), Reveal::Garbler)?;
    meter.gc(ch);
    let pr_rev = st.mux_s.recv_choices(ch, h * gb).map_err(NnError::from)?;
    let qr_rev = st.mux_s.recv_choices(ch, h * gb).map_err(NnError::from)?;
    let pe = st
        .otr
        .recv_correlated_early(ch, h * p_early_len(&lay), lay.pw as u32)
        .map_err(NnError::from)?;
    let per = st.sc.a.n_outputs();
    let ab = lay.a_gate_bits();
    let t_bits = pick(&out, per, 2 * ab..2 * ab + GHN_BITS);
    let (r_bits, z_bits) = match (lay.lut, &st.lut_keys) {
        (Some(nb), Some(keys)) => {
            let mut x = pick(&out, per, 0..nb);
            x.extend(pick(&out, per, nb..2 * nb));
            ch.send_pod(&pack_bits(&lut_derand(keys, t * 2 * h, &x, nb)?))
                .map_err(NnError::from)?;
            ch.flush().map_err(NnError::from)?;
            let tables: Vec<u8> = ch
                .recv_pod(packed_len((2 * h) << nb, gb as u32))
                .map_err(NnError::from)?;
            let mut g = lut_outputs(keys, t * 2 * h, &x, nb, gb, &tables)?;
            let z = g.split_off(h * gb);
            (g, z)
        }
        _ => (pick(&out, per, 0..gb), pick(&out, per, gb..2 * gb)),
    };
    meter.mux(ch);
    Ok(Gates {
        r_bits,
        z_bits,
        t_bits,
        pr_rev,
        qr_rev,
        pe,
    })
}

/// Flight 2 (out): P's derandomisation bits, the client-sender OTs of r·b, P_C − π_P, and the
/// client-sender OTs of z·h_C. Returns z's bits and this party's part of Q from the last.
fn client_p<C: Channel>(
    ch: &mut C,
    st: &mut ClientState,
    t: usize,
    g: Gates,
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
        .finish_early(
            ch,
            g.pe,
            &early_choices(&lay, &g.r_bits, &g.t_bits, GHN_BITS),
        )
        .map_err(NnError::from)?;
    // b = gc ≫ F: this party's share of gh_n, as it entered circuit A.
    let b_hi: Vec<u64> = (0..h)
        .map(|i| (gh_share(&st.he, t, 2 * h + i) >> lay.f) & ring_mask(lay.l))
        .collect();
    let w = p_client_weights(&lay, &b_hi);
    let x_p = st
        .mux_s
        .send_correlated_answer(ch, g.pr_rev, &mux_deltas(&lay, &w, &g.r_bits), pwu)
        .map_err(NnError::from)?;
    let zero = vec![0u64; w.len()];
    let p: Vec<u64> = mux_combine(&lay, &w, &g.r_bits, &zero, &x_p)?
        .iter()
        .zip(sum_chunks(&u, p_early_len(&lay), pmask))
        .map(|(a, b)| a.wrapping_add(b) & pmask)
        .collect();
    send_delta(ch, &p, mk.iter().map(|k| k.pi_p), pmask)?;
    // This party's share of h(t) (−ρ_h(t)), in Q's ring.
    let h_cq: Vec<u64> = st.rho_h[t]
        .iter()
        .map(|r| neg(*r) & pmask & qmask)
        .collect();
    let w_q = p_client_weights(&qlay, &h_cq);
    let x_q = st
        .mux_s
        .send_correlated_answer(ch, g.qr_rev, &mux_deltas(&qlay, &w_q, &g.z_bits), qwu)
        .map_err(NnError::from)?;
    let q_hc = mux_combine(&qlay, &w_q, &g.z_bits, &zero, &x_q)?;
    ch.flush().map_err(NnError::from)?;
    meter.mux(ch);
    Ok((g.z_bits, q_hc))
}

/// Flight 3 (in): B's tables → y; the server's sender-first words for Q (their correlations need
/// its permute bits of B's outputs and its share of h). Flight 4 (out): y re-based on μ (the
/// server's C input becomes its share ⊕ y_c ⊕ μ), Q's derandomisation bits and Q_C − π_Q.
fn client_q<C: Channel>(
    ch: &mut C,
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
        .eval(ch, &st.sc.b, lay.b_garbler(), Reveal::Garbler)?;
    meter.gc(ch);
    let qe = st
        .otr
        .recv_correlated_early(ch, h * q_early_len(&qlay), qwu)
        .map_err(NnError::from)?;
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
    ch.send_pod(&pack_bits(&yd)).map_err(NnError::from)?;
    let u = st
        .otr
        .finish_early(ch, qe, &early_choices(&qlay, z_bits, &y, bo))
        .map_err(NnError::from)?;
    let q: Vec<u64> = q_hc
        .iter()
        .zip(sum_chunks(&u, q_early_len(&qlay), qmask))
        .map(|(a, b)| a.wrapping_add(b) & qmask)
        .collect();
    send_delta(ch, &q, mk.iter().map(|k| k.pi_q), qmask)?;
    ch.flush().map_err(NnError::from)?;
    meter.mux(ch);
    Ok(())
}

/// Flight 5 (in): C's tables → h', and the server's sender-first B2A words for h' (its
/// correlations are its permute bits, fixed when it garbled). Flight 6 (out): the B2A's
/// derandomisation bits and h'_c + ρ_h(t+1); the server gets m = h' + ρ_h(t+1).
fn client_h<C: Channel>(
    ch: &mut C,
    st: &mut ClientState,
    t: usize,
    meter: &mut Meter,
) -> Result<()> {
    let (lay, h) = (st.sc.lay, st.h);
    let out = st
        .eval
        .eval(ch, &st.sc.c, lay.c_garbler(), Reveal::Garbler)?;
    meter.gc(ch);
    let hp = st
        .otr
        .recv_correlated_early(ch, h * lay.hw, SHARE_BITS as u32)
        .map_err(NnError::from)?;
    let hc = b2a_receiver(
        &st.otr.finish_early(ch, hp, &out).map_err(NnError::from)?,
        lay.hw,
        SHARE_BITS,
    )?;
    let msk: Vec<u32> = hc
        .iter()
        .zip(&st.rho_h[t + 1])
        .map(|(a, r)| (a.wrapping_add(*r) & RING) as u32)
        .collect();
    ch.send_pod(&msk).map_err(NnError::from)?;
    ch.flush().map_err(NnError::from)?;
    meter.mux(ch);
    Ok(())
}

/// The final garbled circuit: the argmax (or the logits) of W_fc h(T) + b.
fn client_final<C: Channel>(
    ch: &mut C,
    m: &ClientModel,
    opts: ClientOptions,
    st: &mut ClientState,
    mut meter: Meter,
) -> Result<GruOutcome> {
    let (lay, c) = (st.sc.lay, m.arch.classes);
    let out = st.eval.eval(ch, &st.fin, c * lay.acc, Reveal::Evaluator)?;
    meter.gc(ch);
    let report = meter.finish(ch);
    if opts.log_prob_of.is_some() {
        // log2 p(word) at LOG_FRAC fractional bits, two's complement.
        let ob = out.len();
        let v = sign_extend(word(&out), ob);
        return Ok(GruOutcome {
            class: 0,
            top: Vec::new(),
            logits: None,
            log2_prob: Some(v),
            report,
        });
    }
    let (top, logits) = if opts.reveal_logits {
        let l: Vec<i64> = out
            .chunks(lay.l)
            .map(|b| sign_extend(word(b), lay.l))
            .collect();
        (top_k(&l, opts.indices(c)), Some(l))
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
