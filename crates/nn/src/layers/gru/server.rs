//! The server's side of CryptoGRU's secure session: it holds the model, answers the client's HE
//! uploads with flooded shares and garbles every circuit online with its own inputs folded in.
use super::circuits::{sigmoid_table, step_circuits_with};
use super::config::*;
use super::flight;
use super::logprob::session_final;
use super::model::ServerModel;
use super::products::*;
use super::report::{Meter, SessionReport};
use super::server_steps::{Garbler, HeShares, ServerRun, ServerState, StepRef};
use super::tables::*;
use crate::error::{NnError, Result};
use crate::model::Candidate;
use secinfer_he::kernels::coeff::{self, server_product, Layout};
use secinfer_he::{Plaintext, PublicKey, SeededCiphertext};
use secinfer_net::{Channel, Phase};
use secinfer_ot::{Block, PooledOtReceiver, PooledOtSender, Prg};

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
    let mut run = server_prepare(ch, m, policy)?;
    while !run.is_done() {
        let msg = run.expects()?.recv(ch)?;
        let out = run.on_msg(msg)?;
        flight::send(ch, out)?;
    }
    Ok(run.into_meter().finish(ch))
}

/// The server's setup and offline phases over `ch` (the handshake, the base OTs and pool
/// fills of both OT extensions, the HE responses, the labels' COTs and the tables' random OTs:
/// sub-protocols that speak to the channel themselves); returns the online phase as IO-free
/// steps, the channel's phase set to online.
pub fn server_prepare<'a, C: Channel>(
    ch: &mut C,
    m: &'a ServerModel,
    policy: ServerPolicy,
) -> Result<ServerRun<'a>> {
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
    let sc = if agreed.gates_in_circuit && m.step.lay.lut.is_some() {
        StepRef::Own(Box::new(step_circuits_with(
            &m.fp,
            m.q.arch.activation == Candidate::Tanh,
            false,
            &m.circuits,
        )))
    } else {
        StepRef::Model(&m.step)
    };
    let (st, input_keys) = server_offline(ch, m, &agreed, sc, setup, uploads, &mut meter)?;
    ch.set_phase(Phase::Online);
    Ok(ServerRun::new(m, st, input_keys, meter, ch.max_frame()))
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

/// Offline after the uploads: the HE responses and pool fills side by side, the tables' random
/// OTs, and the COTs of every client circuit input.
fn server_offline<'a, C: Channel>(
    ch: &mut C,
    m: &ServerModel,
    agreed: &Agreed,
    sc: StepRef<'a>,
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
