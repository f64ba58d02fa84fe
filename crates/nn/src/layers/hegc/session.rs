//! The two roles of one `hegc` session, flight by flight in the same order:
//! * setup, once per session: handshake (protocol, network hash, kernel, logits request, the
//!   number of images), the client's BFV public key and Galois keys, the base OTs of an IKNP
//!   pool whose Δ is the garbler's free-XOR offset;
//! * per image, offline: the garbled batches of every finishing step and the garbled argmax
//!   (input-independent), or, when the finishing steps run by OT ([`Nonlinear::Ot`]), the
//!   correlated OTs they will use and only the argmax garbled;
//! * per image, online, op by op: for a linear layer the client's encrypted share up and the
//!   flooded responses down; for a finishing step the batch's OTs and labels (or its
//!   comparisons and multiplexers on the pooled OTs); local steps
//!   (average pooling, residual sums) cost nothing; finally the argmax.
//!
//! The keys of the setup serve every image of the session, so a client that classifies many
//! images pays for them once.
use super::model::ServerLinear;
use super::{
    HegcClientModel, HegcServerModel, LayerCost, LinearPlan, LinearShape, NetShape, Nonlinear, Op,
    OpKind, PROTOCOL,
};
use crate::error::{NnError, Result};
use crate::layers::gru::{GruOutcome, ServerPolicy, SessionReport, LOGITS_REFUSED};
use secinfer_gc::gadgets::bit_len;
use secinfer_gc::protocol::{
    evaluate_offline, evaluate_online, garble_offline, garble_online, GarbledBatch, ReceivedBatch,
};
use secinfer_gc::requant::{argmax_circuit, argmax_index_bits, window_circuit};
use secinfer_gc::window::{WindowEvaluator, WindowGarbler};
use secinfer_he::kernels::coeff_prime::CoeffPlan;
use secinfer_he::kernels::finish_outputs;
use secinfer_he::{
    Ciphertext, GaloisKeys, HeEvaluator, PublicKey, Response, SecretKey, SeededCiphertext,
};
use secinfer_net::{Channel, Cost, Phase};
use secinfer_ot::{Block, OtExtReceiver, OtExtSender, Prg};
use secinfer_ss::blocks::modt::{finish_modt, ModtStep};
use secinfer_ss::{CotSource, Ctx, Party};
use std::collections::HashMap;
use std::time::Instant;

const MAX_HANDSHAKE: usize = 4096;
/// Most images one session may declare (the server loops over them).
pub const MAX_IMAGES: u64 = 1 << 20;

fn bytes<C: Channel>(ch: &C) -> u64 {
    ch.cost().total().bytes()
}
fn rounds<C: Channel>(ch: &C) -> u64 {
    ch.cost().total().rounds
}

/// `now − before`, phase by phase.
fn since(now: &Cost, before: &Cost) -> Cost {
    let mut c = *now;
    for p in Phase::ALL {
        let (a, b) = (phase_mut(&mut c, p), before.phase(p));
        a.time_s -= b.time_s;
        a.bytes_sent -= b.bytes_sent;
        a.bytes_received -= b.bytes_received;
        a.messages_sent -= b.messages_sent;
        a.messages_received -= b.messages_received;
        a.rounds -= b.rounds;
    }
    c
}

fn phase_mut(c: &mut Cost, p: Phase) -> &mut secinfer_net::PhaseCost {
    match p {
        Phase::Setup => &mut c.setup,
        Phase::Offline => &mut c.offline,
        Phase::Online => &mut c.online,
    }
}

/// Measures one op of the network.
struct Step {
    cost: LayerCost,
    /// The op runs by OT: its bytes are OT bytes, not garbled ones.
    ot: bool,
    t0: Instant,
    b0: u64,
    r0: u64,
}

impl Step {
    fn start<C: Channel>(ch: &C, k: usize, shape: &NetShape) -> Step {
        Step {
            cost: LayerCost {
                name: shape.ops[k].name.clone(),
                kernel: shape.kernel_name(k).into(),
                ..Default::default()
            },
            ot: shape.nonlinear == Nonlinear::Ot
                && matches!(shape.ops[k].kind, OpKind::Finish { .. }),
            t0: Instant::now(),
            b0: bytes(ch),
            r0: rounds(ch),
        }
    }
    /// The bytes since the start were HE traffic.
    fn he<C: Channel>(&mut self, ch: &C) {
        let b = bytes(ch);
        self.cost.he_bytes += b - self.b0;
        self.b0 = b;
    }
    fn end<C: Channel>(mut self, ch: &C, rep: &mut SessionReport) {
        let b = bytes(ch);
        if self.ot {
            self.cost.ot_bytes += b - self.b0;
        } else {
            self.cost.gc_bytes += b - self.b0;
        }
        self.cost.time_s = self.t0.elapsed().as_secs_f64();
        self.cost.rounds = rounds(ch) - self.r0;
        rep.he_bytes += self.cost.he_bytes;
        rep.gc_bytes += self.cost.gc_bytes;
        rep.layers.push(self.cost);
    }
}

fn bits_of(out: &mut Vec<bool>, v: u64, w: usize) {
    out.extend((0..w).map(|i| (v >> i) & 1 == 1));
}

fn word(bits: &[bool]) -> u64 {
    bits.iter()
        .enumerate()
        .fold(0, |a, (i, &b)| a | ((b as u64) << i))
}

/// Values into op `k`.
fn in_len(s: &NetShape, k: usize) -> usize {
    if k == 0 {
        s.input_len
    } else {
        s.ops[k - 1].len
    }
}

/// The ops whose outputs a later Add reads.
fn kept(s: &NetShape) -> Vec<bool> {
    let mut v = vec![false; s.ops.len()];
    for o in &s.ops {
        if let OpKind::Add { other } = o.kind {
            v[other] = true;
        }
    }
    v
}

/// The garbled circuit of a finishing op: (circuit, values per window).
fn finish_circuit(p: u64, op: &Op) -> Result<(secinfer_gc::Circuit, usize)> {
    let OpKind::Finish { tr, window } = &op.kind else {
        return Err(NnError::Protocol("not a finishing op".into()));
    };
    let k = window.as_ref().map_or(1, |w| w.size());
    Ok((window_circuit(p, tr, k)?, k))
}

/// The OT pools' filler of the finishing steps: SoftSpokenOT with [`super::OT_CHUNK_BITS`]-bit
/// chunks.
const OT_SOURCE: CotSource = CotSource::SoftSpoken {
    k: super::OT_CHUNK_BITS,
};

/// Whether the session runs finishing steps by OT.
fn by_ot(s: &NetShape) -> bool {
    s.nonlinear == Nonlinear::Ot
        && s.ops
            .iter()
            .any(|o| matches!(o.kind, OpKind::Finish { .. }))
}

/// A finishing op as the OT protocol's step.
fn modt_step(p: u64, op: &Op) -> Result<ModtStep> {
    let OpKind::Finish { tr, window } = &op.kind else {
        return Err(NnError::Protocol("not a finishing op".into()));
    };
    Ok(ModtStep {
        t: p,
        shift: tr.shift,
        bits: tr.bits,
        relu: tr.relu,
        window: window.as_ref().map_or(1, |w| w.size()),
    })
}

/// The offline phase of the OT finishing steps: a dry run of every step of one image sizes the
/// correlations, which both parties then make.
fn ot_offline<C: Channel>(
    ch: &mut C,
    ctx: &mut Ctx,
    party: Party,
    s: &NetShape,
    p: u64,
) -> Result<()> {
    let steps = s
        .ops
        .iter()
        .filter(|o| matches!(o.kind, OpKind::Finish { .. }))
        .map(|o| Ok((modt_step(p, o)?, o.len)))
        .collect::<Result<Vec<_>>>()?;
    let plan = secinfer_ss::plan_for(party, |c, dry| {
        for (step, len) in &steps {
            finish_modt(c, dry, step, &vec![0; len * step.window])?;
        }
        Ok(())
    })?;
    ctx.preprocess(ch, plan)?;
    Ok(())
}

/// The shares a finishing op feeds its batch: the windows' elements, window-major.
fn gather(op: &Op, x: &[u64]) -> Vec<u64> {
    match &op.kind {
        OpKind::Finish {
            window: Some(w), ..
        } => w.gather().into_iter().map(|i| x[i]).collect(),
        _ => x.to_vec(),
    }
}

/// The local linear ops on one party's shares (both parties run the same map).
fn local(op: &Op, x: &[u64], kept: &HashMap<usize, Vec<u64>>, p: u64) -> Result<Vec<u64>> {
    match &op.kind {
        OpKind::AvgPool { window, q } => {
            let k = window.size();
            let qm = q.rem_euclid(p as i64) as u128;
            Ok(window
                .gather()
                .chunks_exact(k)
                .map(|win| {
                    let s: u128 = win.iter().map(|&i| x[i] as u128).sum();
                    ((s % p as u128) * qm % p as u128) as u64
                })
                .collect())
        }
        OpKind::Add { other } => {
            let y = kept
                .get(other)
                .ok_or_else(|| NnError::Protocol(format!("add: op {other} was not kept")))?;
            Ok(x.iter().zip(y).map(|(a, b)| (a + b) % p).collect())
        }
        _ => Err(NnError::Protocol("not a local op".into())),
    }
}

/// The handshake's fields both sides check.
struct Hello {
    reveal: bool,
    images: u64,
}

fn server_handshake<C: Channel>(
    ch: &mut C,
    m: &HegcServerModel,
    policy: ServerPolicy,
) -> Result<Hello> {
    let hello = ch.recv_frame_limited(MAX_HANDSHAKE)?;
    let hv: serde_json::Value = serde_json::from_slice(&hello)
        .map_err(|e| NnError::Malformed(format!("handshake: {e}")))?;
    let reveal = hv["reveal_logits"].as_bool().unwrap_or(false);
    let images = hv["images"].as_u64().unwrap_or(0);
    let problem = if hv["protocol"] != PROTOCOL {
        Some(format!(
            "protocol mismatch: client {}, server {PROTOCOL}",
            hv["protocol"]
        ))
    } else if hv["arch"] != m.shape.hash().as_str() {
        Some("the client's network (shape, format, kernel or nonlinear protocol) differs from the server's".into())
    } else if images == 0 || images > MAX_IMAGES {
        Some(format!("a session runs 1 to {MAX_IMAGES} images"))
    } else if reveal && !policy.allow_logits {
        Some(LOGITS_REFUSED.to_string())
    } else {
        None
    };
    let reply = match &problem {
        None => serde_json::json!({"ok": true, "reveal_logits": reveal}),
        Some(e) => serde_json::json!({"ok": false, "error": e}),
    };
    ch.send_frame(reply.to_string().as_bytes())?;
    ch.flush()?;
    if let Some(e) = problem {
        return Err(NnError::Refused(e));
    }
    Ok(Hello { reveal, images })
}

/// What the server keeps for the whole session.
struct ServerCtx<'a> {
    m: &'a HegcServerModel,
    pk: PublicKey,
    ev: HeEvaluator<'a>,
    ot: OtExtSender,
    delta: Block,
    reveal: bool,
    /// The OT finishing steps' context ([`Nonlinear::Ot`]).
    ss: Option<Ctx>,
}

/// Server: one session over `ch` (as many images as the client declared), revealing no more
/// than `policy` allows. The report sums every image; `layers` lists each image's ops.
pub fn server_session<C: Channel>(
    ch: &mut C,
    m: &HegcServerModel,
    policy: ServerPolicy,
) -> Result<SessionReport> {
    let mut rep = SessionReport {
        flood_stat_bits: f64::INFINITY,
        ..Default::default()
    };
    let params = &m.params;
    ch.set_phase(Phase::Setup);
    let hello = server_handshake(ch, m, policy)?;
    rep.logits_revealed = hello.reveal;
    let pk = PublicKey::from_bytes(params, &ch.recv_frame()?)?;
    let keys = GaloisKeys::from_bytes(params, &ch.recv_frame()?)?;
    let mut prg = Prg::new();
    let delta = Block(prg.next_block().0 | 1);
    let ot = OtExtSender::setup_with_delta(ch, &mut prg, delta)?;
    rep.he_bytes += ch.cost().setup.bytes();
    let ss = by_ot(&m.shape)
        .then(|| Ctx::setup_with(Party::Server, ch, OT_SOURCE))
        .transpose()?;
    let mut ctx = ServerCtx {
        m,
        pk,
        ev: HeEvaluator::new(params, &keys),
        ot,
        delta,
        reveal: hello.reveal,
        ss,
    };
    for _ in 0..hello.images {
        server_image(ch, &mut ctx, &mut rep)?;
    }
    rep.cost = ch.cost();
    Ok(rep)
}

/// A linear op at the server: the client's ciphertexts in, flooded responses out; returns the
/// server's share of the accumulator.
fn server_linear<C: Channel>(
    ch: &mut C,
    ctx: &ServerCtx<'_>,
    lin: &ServerLinear,
    shape: &LinearShape,
    x: Option<&[u64]>,
    rep: &mut SessionReport,
) -> Result<Vec<u64>> {
    let params = &ctx.m.params;
    let p = params.t();
    let mut cts: Vec<Ciphertext> = Vec::with_capacity(lin.plan.in_cts());
    for _ in 0..lin.plan.in_cts() {
        cts.push(SeededCiphertext::from_bytes(params, &ch.recv_frame()?)?.expand(params));
    }
    let pts = lin.plaintexts(shape, &ctx.ev, params)?;
    let own = lin.plain(shape, x, p);
    let outs = match &lin.plan {
        LinearPlan::Dense(pl) => pl.eval(&ctx.ev, &pts, &cts)?,
        LinearPlan::Conv(pl) => pl.eval(&ctx.ev, &pts, &cts)?,
        LinearPlan::Coeff(pl) => {
            let (resp, share, stat) = pl.server(params, &ctx.pk, &pts, &cts, ctx.m.flood)?;
            drop(pts);
            rep.flood_stat_bits = rep.flood_stat_bits.min(stat);
            for r in &resp {
                ch.send_frame(r)?;
            }
            ch.flush()?;
            let share = from_product(shape, share);
            return Ok(share.iter().zip(own).map(|(a, b)| (a + b) % p).collect());
        }
    };
    drop(pts);
    let res = finish_outputs(params, &ctx.pk, &outs, ctx.m.flood)?;
    rep.flood_stat_bits = rep.flood_stat_bits.min(res.flood_stat_bits);
    for r in &res.responses {
        ch.send_frame(&r.to_bytes())?;
    }
    ch.flush()?;
    let share = extract(&lin.plan, shape, &res.masks, p)?;
    Ok(share.iter().zip(own).map(|(a, b)| (a + b) % p).collect())
}

/// A coefficient product's values (pixel × channel for a convolution) as the layer's output.
fn from_product(shape: &LinearShape, y: Vec<u64>) -> Vec<u64> {
    match shape {
        LinearShape::Conv(g) => g.from_pixels(&y),
        LinearShape::Dense { .. } => y,
    }
}

/// A linear op's output shares from its decrypted (or mask) slot vectors.
fn extract(plan: &LinearPlan, shape: &LinearShape, v: &[Vec<u64>], p: u64) -> Result<Vec<u64>> {
    Ok(match (plan, shape) {
        (LinearPlan::Dense(pl), _) => pl.extract(v, p)?,
        (LinearPlan::Conv(pl), LinearShape::Conv(g)) => g.crop(&pl.extract(v, p)?),
        _ => return Err(NnError::Protocol("a plan of the wrong kind".into())),
    })
}

/// The coefficient kernel at the client: its share's product vectors (the im2col vectors of a
/// convolution) encrypted up, the sparse responses decrypted into its share.
fn client_coeff<C: Channel>(
    ch: &mut C,
    ctx: &ClientCtx<'_>,
    plan: &CoeffPlan,
    shape: &LinearShape,
    x: &[u64],
) -> Result<Vec<u64>> {
    let params = &ctx.m.params;
    let vecs = match shape {
        LinearShape::Conv(g) => g.im2col(x),
        LinearShape::Dense { .. } => x.to_vec(),
    };
    for poly in plan.pack(&vecs)? {
        ch.send_frame(&ctx.sk.encrypt_poly_seeded(&poly)?.to_bytes())?;
    }
    ch.flush()?;
    let mut resp = Vec::with_capacity(plan.out_cts());
    for k in 0..plan.out_cts() {
        resp.push(ch.recv_frame_limited(plan.response_len(params, k))?);
    }
    Ok(from_product(shape, plan.client(&ctx.sk, &resp)?))
}

fn server_image<C: Channel>(
    ch: &mut C,
    ctx: &mut ServerCtx<'_>,
    rep: &mut SessionReport,
) -> Result<()> {
    let m = ctx.m;
    let shape = &m.shape;
    let p = m.params.t();
    let w = bit_len(p);
    // ---- offline: every garbled batch
    ch.set_phase(Phase::Offline);
    let b0 = ch.cost().offline.bytes();
    let mut garblers: Vec<Option<WindowGarbler>> = Vec::with_capacity(shape.ops.len());
    let mut fin: Option<(GarbledBatch, usize)> = None;
    for (k, op) in shape.ops.iter().enumerate() {
        garblers.push(match &op.kind {
            OpKind::Finish { .. } if ctx.ss.is_some() => None,
            OpKind::Finish { tr, .. } => {
                let (circ, win) = finish_circuit(p, op)?;
                let g = WindowGarbler::offline(ch, ctx.delta, p, &circ, win, tr.bits, op.len)?;
                Some(g)
            }
            OpKind::Argmax { tr } => {
                let n = in_len(shape, k);
                let circ = argmax_circuit(p, n, tr, ctx.reveal)?;
                rep.and_gates += circ.and_count();
                fin = Some((garble_offline(ch, &circ, n * w, 1, ctx.delta)?, n));
                None
            }
            _ => None,
        });
    }
    ch.flush()?;
    rep.gc_bytes += ch.cost().offline.bytes() - b0;
    if let Some(ss) = ctx.ss.as_mut() {
        ot_offline(ch, ss, Party::Server, shape, p)?;
    }
    let (fin_batch, n_fin) = fin.ok_or_else(|| NnError::Protocol("no argmax".into()))?;
    // ---- online
    ch.set_phase(Phase::Online);
    let keep = kept(shape);
    let mut kept_vals: HashMap<usize, Vec<u64>> = HashMap::new();
    let mut x: Option<Vec<u64>> = None;
    for (k, op) in shape.ops.iter().enumerate() {
        let mut st = Step::start(ch, k, shape);
        let cur = || x.clone().unwrap_or_else(|| vec![0; in_len(shape, k)]);
        let y = match &op.kind {
            OpKind::Linear(lin_shape) => {
                let lin = m.layers[k]
                    .as_ref()
                    .ok_or_else(|| NnError::Protocol("a linear op without weights".into()))?;
                let y = server_linear(ch, ctx, lin, lin_shape, x.as_deref(), rep)?;
                st.he(ch);
                y
            }
            OpKind::AvgPool { .. } | OpKind::Add { .. } => local(op, &cur(), &kept_vals, p)?,
            OpKind::Finish { .. } if ctx.ss.is_some() => {
                let ss = ctx
                    .ss
                    .as_mut()
                    .ok_or_else(|| NnError::Protocol("no OT context".into()))?;
                finish_modt(ss, ch, &modt_step(p, op)?, &gather(op, &cur()))?
            }
            OpKind::Finish { .. } => {
                let g = garblers[k]
                    .take()
                    .ok_or_else(|| NnError::Protocol("a finishing op without its batch".into()))?;
                g.online(ch, &mut ctx.ot, &gather(op, &cur()))?
            }
            OpKind::Argmax { .. } => {
                let v = cur();
                if v.len() != n_fin {
                    return Err(NnError::Protocol("argmax input size".into()));
                }
                let mut bits = Vec::with_capacity(v.len() * w);
                for s in &v {
                    bits_of(&mut bits, (s + (p - 1) / 2) % p, w);
                }
                garble_online(ch, &mut ctx.ot, &fin_batch, &bits)?;
                ch.flush()?;
                Vec::new()
            }
        };
        st.end(ch, rep);
        if keep[k] {
            kept_vals.insert(k, y.clone());
        }
        x = Some(y);
    }
    Ok(())
}

/// What the client keeps for the whole session.
struct ClientCtx<'a> {
    m: &'a HegcClientModel,
    sk: SecretKey,
    ot: OtExtReceiver,
    reveal: bool,
    /// The OT finishing steps' context ([`Nonlinear::Ot`]).
    ss: Option<Ctx>,
}

/// Client: one session over `ch` on `input` (main-format integers, the image in CHW order).
pub fn client_session<C: Channel>(
    ch: &mut C,
    m: &HegcClientModel,
    input: &[i64],
    reveal_logits: bool,
    progress: &mut dyn FnMut(&str, u64, u64),
) -> Result<GruOutcome> {
    let mut v = client_session_images(ch, m, &[input], reveal_logits, progress)?;
    v.pop()
        .ok_or_else(|| NnError::Protocol("no image ran".into()))
}

/// Client: one session over `ch` classifying every image of `inputs` under one set of keys.
/// The first outcome's report carries the session's setup (keys, base OTs); each report's
/// `cost` is its own image's (and, for the first, the setup's).
pub fn client_session_images<C: Channel>(
    ch: &mut C,
    m: &HegcClientModel,
    inputs: &[&[i64]],
    reveal_logits: bool,
    progress: &mut dyn FnMut(&str, u64, u64),
) -> Result<Vec<GruOutcome>> {
    if inputs.is_empty() || inputs.len() as u64 > MAX_IMAGES {
        return Err(NnError::Input(format!(
            "a session runs 1 to {MAX_IMAGES} images"
        )));
    }
    let main = m.shape.main;
    for input in inputs {
        if input.len() != m.shape.input_len {
            return Err(NnError::Input(format!(
                "{} values, the network reads {}",
                input.len(),
                m.shape.input_len
            )));
        }
        if let Some(i) = input.iter().position(|v| main.clamp(*v) != *v) {
            return Err(NnError::Input(format!(
                "value {i} ({}) is outside the {}-bit main format",
                input[i], main.bits
            )));
        }
    }
    // The model's stated input range, applied as the reference applies it.
    let clamped: Vec<Vec<i64>> = inputs
        .iter()
        .map(|x| match m.shape.input_range {
            Some((lo, hi)) => x.iter().map(|v| (*v).clamp(lo, hi)).collect(),
            None => x.to_vec(),
        })
        .collect();
    let total = (m.shape.ops.len() as u64 + 1) * inputs.len() as u64 + 1;
    // ---- setup
    ch.set_phase(Phase::Setup);
    progress("setup", 0, total);
    let hs = serde_json::json!({
        "protocol": PROTOCOL,
        "arch": m.shape.hash(),
        "reveal_logits": reveal_logits,
        "images": inputs.len(),
    });
    ch.send_frame(hs.to_string().as_bytes())?;
    let reply = ch.recv_frame_limited(MAX_HANDSHAKE)?;
    let rv: serde_json::Value = serde_json::from_slice(&reply)
        .map_err(|e| NnError::Malformed(format!("handshake reply: {e}")))?;
    if rv["ok"] != serde_json::Value::Bool(true) {
        // The peer's text reaches the user's terminal: no control characters, bounded length.
        return Err(NnError::Refused(secinfer_net::sanitize_peer_text(
            rv["error"].as_str().unwrap_or("no reason given"),
            300,
        )));
    }
    let reveal = rv["reveal_logits"].as_bool().unwrap_or(false) && reveal_logits;
    let sk = SecretKey::generate(&m.params);
    ch.send_frame(&sk.public_key().to_bytes())?;
    ch.send_frame(&sk.rotation_keys(&m.rotation_steps(), false).to_bytes())?;
    let ot = OtExtReceiver::setup(ch, &mut Prg::new())?;
    let ss = by_ot(&m.shape)
        .then(|| Ctx::setup_with(Party::Client, ch, OT_SOURCE))
        .transpose()?;
    let mut ctx = ClientCtx {
        m,
        sk,
        ot,
        reveal,
        ss,
    };
    let mut outs = Vec::with_capacity(inputs.len());
    let mut before = Cost::default();
    for (i, input) in clamped.iter().enumerate() {
        let mut rep = SessionReport {
            logits_revealed: reveal,
            ..Default::default()
        };
        if i == 0 {
            rep.he_bytes += ch.cost().setup.bytes();
        }
        let base = 1 + i as u64 * (m.shape.ops.len() as u64 + 1);
        let mut prog = |s: &str, k: u64| progress(s, base + k, total);
        let (class, logits) = client_image(ch, &mut ctx, input, &mut rep, &mut prog)?;
        let now = ch.cost();
        rep.cost = since(&now, &before);
        before = now;
        outs.push(GruOutcome {
            class,
            top: vec![class],
            logits,
            log2_prob: None,
            report: rep,
        });
    }
    progress("done", total, total);
    Ok(outs)
}

/// A linear op at the client: its share encrypted up, the responses decrypted into its share.
fn client_linear<C: Channel>(
    ch: &mut C,
    ctx: &ClientCtx<'_>,
    plan: &LinearPlan,
    shape: &LinearShape,
    x: &[u64],
) -> Result<Vec<u64>> {
    let params = &ctx.m.params;
    if let LinearPlan::Coeff(pl) = plan {
        return client_coeff(ch, ctx, pl, shape, x);
    }
    let packed = match (plan, shape) {
        (LinearPlan::Dense(pl), _) => pl.pack_input(x)?,
        (LinearPlan::Conv(pl), LinearShape::Conv(g)) => pl.pack_input(&g.to_hwc(x))?,
        _ => return Err(NnError::Protocol("a plan of the wrong kind".into())),
    };
    for slots in packed {
        ch.send_frame(&ctx.sk.encrypt_seeded(&slots)?.to_bytes())?;
    }
    ch.flush()?;
    let mut dec = Vec::with_capacity(plan.out_cts());
    for _ in 0..plan.out_cts() {
        let r = Response::from_bytes(params, &ch.recv_frame()?)?;
        dec.push(ctx.sk.decrypt_response(&r)?);
    }
    extract(plan, shape, &dec, params.t())
}

#[allow(clippy::type_complexity)]
fn client_image<C: Channel>(
    ch: &mut C,
    ctx: &mut ClientCtx<'_>,
    input: &[i64],
    rep: &mut SessionReport,
    progress: &mut dyn FnMut(&str, u64),
) -> Result<(usize, Option<Vec<i64>>)> {
    let m = ctx.m;
    let shape = &m.shape;
    let p = m.params.t();
    let w = bit_len(p);
    // ---- offline
    ch.set_phase(Phase::Offline);
    progress("offline", 0);
    let b0 = ch.cost().offline.bytes();
    let mut evals: Vec<Option<WindowEvaluator>> = Vec::with_capacity(shape.ops.len());
    let mut fin: Option<(secinfer_gc::Circuit, ReceivedBatch, usize)> = None;
    for (k, op) in shape.ops.iter().enumerate() {
        evals.push(match &op.kind {
            OpKind::Finish { .. } if ctx.ss.is_some() => None,
            OpKind::Finish { .. } => {
                let (circ, win) = finish_circuit(p, op)?;
                Some(WindowEvaluator::offline(ch, p, circ, win, op.len)?)
            }
            OpKind::Argmax { tr } => {
                let n = in_len(shape, k);
                let circ = argmax_circuit(p, n, tr, ctx.reveal)?;
                rep.and_gates += circ.and_count();
                let b = evaluate_offline(ch, &circ, n * w, 1)?;
                fin = Some((circ, b, n));
                None
            }
            _ => None,
        });
    }
    rep.gc_bytes += ch.cost().offline.bytes() - b0;
    if let Some(ss) = ctx.ss.as_mut() {
        ot_offline(ch, ss, Party::Client, shape, p)?;
    }
    let (fin_circ, fin_batch, n_fin) = fin.ok_or_else(|| NnError::Protocol("no argmax".into()))?;
    // ---- online
    ch.set_phase(Phase::Online);
    let keep = kept(shape);
    let mut kept_vals: HashMap<usize, Vec<u64>> = HashMap::new();
    let mut x: Vec<u64> = input
        .iter()
        .map(|v| v.rem_euclid(p as i64) as u64)
        .collect();
    let mut result = None;
    for (k, op) in shape.ops.iter().enumerate() {
        progress(&op.name, 1 + k as u64);
        let mut st = Step::start(ch, k, shape);
        let y = match &op.kind {
            OpKind::Linear(lin_shape) => {
                let plan = m.plans[k]
                    .as_ref()
                    .ok_or_else(|| NnError::Protocol("a linear op without its plan".into()))?;
                let y = client_linear(ch, ctx, plan, lin_shape, &x)?;
                st.he(ch);
                y
            }
            OpKind::AvgPool { .. } | OpKind::Add { .. } => local(op, &x, &kept_vals, p)?,
            OpKind::Finish { .. } if ctx.ss.is_some() => {
                let ss = ctx
                    .ss
                    .as_mut()
                    .ok_or_else(|| NnError::Protocol("no OT context".into()))?;
                finish_modt(ss, ch, &modt_step(p, op)?, &gather(op, &x))?
            }
            OpKind::Finish { .. } => {
                let e = evals[k]
                    .take()
                    .ok_or_else(|| NnError::Protocol("a finishing op without its batch".into()))?;
                e.online(ch, &mut ctx.ot, &gather(op, &x))?
            }
            OpKind::Argmax { .. } => {
                if x.len() != n_fin {
                    return Err(NnError::Protocol("argmax input size".into()));
                }
                let mut bits = Vec::with_capacity(x.len() * w);
                for v in &x {
                    bits_of(&mut bits, *v, w);
                }
                result = Some(evaluate_online(
                    ch,
                    &mut ctx.ot,
                    &fin_circ,
                    &fin_batch,
                    &bits,
                )?);
                Vec::new()
            }
        };
        st.end(ch, rep);
        if keep[k] {
            kept_vals.insert(k, y.clone());
        }
        x = y;
    }
    let out = result.ok_or_else(|| NnError::Protocol("no argmax ran".into()))?;
    let ib = argmax_index_bits(n_fin);
    if out.len() < ib {
        return Err(NnError::Malformed("argmax output too short".into()));
    }
    let class = word(&out[..ib]) as usize;
    if class >= n_fin {
        return Err(NnError::Malformed(format!("class {class} of {n_fin}")));
    }
    let logits = ctx.reveal.then(|| {
        let b = shape.main.bits as usize;
        out[ib..]
            .chunks(b)
            .map(|c| {
                let v = word(c);
                ((v << (64 - b)) as i64) >> (64 - b)
            })
            .collect()
    });
    Ok((class, logits))
}
