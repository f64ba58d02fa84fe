//! The client's side of CryptoGRU's secure session: it holds the HE secret key, evaluates the
//! garbled circuits and learns the class (or the logits).
use super::bits::*;
use super::circuits::{put, step_circuits_with, StepLayout};
use super::client_steps::{
    gh_share, ClientNext, ClientRun, ClientState, ElemMasks, Evaluator, HeShares,
};
use super::config::*;
use super::flight;
use super::logprob::session_final;
use super::model::{check_state_exact, input_layout, ClientModel};
use super::products::*;
use super::report::{GruOutcome, Meter, SessionReport};
use super::tables::*;
use crate::error::{NnError, Result};
use crate::model::Candidate;
use secinfer_gc::garble::Scheme;
use secinfer_he::kernels::coeff::{self, client_share, Layout};
use secinfer_he::{Params, SecretKey};
use secinfer_net::{Channel, Phase};
use secinfer_ot::{PooledOtReceiver, PooledOtSender, Prg};

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
    let mut run = client_prepare(ch, m, tokens, opts, filler, garbling, progress)?;
    let steps = m.steps as u64;
    let mut out = run.begin()?;
    loop {
        flight::send(ch, out)?;
        let msg = run.expects()?.recv(ch)?;
        let before = run.steps_done();
        match run.on_msg(msg)? {
            ClientNext::Send(next) => out = next,
            ClientNext::Done(o) => {
                let mut o = *o;
                o.report.cost = ch.cost();
                return Ok(o);
            }
        }
        if run.steps_done() > before {
            // The step's tables are garbled, sent and evaluated now (no longer offline).
            progress("garbled steps", run.steps_done() as u64, steps);
        }
    }
}

/// The client's setup and offline phases over `ch` (the handshake, the base OTs and pool
/// fills of both OT extensions, the HE products on the masks, the labels' COTs and the
/// tables' random OTs: sub-protocols that speak to the channel themselves); returns the online
/// phase as IO-free steps, the channel's phase set to online.
pub fn client_prepare<'a, C: Channel>(
    ch: &mut C,
    m: &'a ClientModel,
    tokens: &[u32],
    opts: ClientOptions,
    filler: OtFiller,
    garbling: Scheme,
    progress: &mut dyn FnMut(&str, u64, u64),
) -> Result<ClientRun<'a>> {
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
    let (st, input_keys) = client_offline(ch, m, opts, garbling, setup, &mut meter)?;
    ch.set_phase(Phase::Online);
    Ok(ClientRun::new(
        m,
        tokens,
        opts,
        st,
        input_keys,
        meter,
        ch.max_frame(),
    ))
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
