//! The two roles of one `hegc` session, flight by flight in the same order:
//! * setup: handshake (protocol, network hash, kernel, logits request), the client's BFV public
//!   key and Galois keys, the base OTs of an IKNP pool whose Δ is the garbler's free-XOR offset;
//! * offline: the garbled truncation batches of every hidden layer and the garbled argmax
//!   (input-independent);
//! * online, per linear layer: the client's encrypted share up, the flooded responses down,
//!   then the garbled batch's OTs and labels; finally the argmax.
use super::{HegcClientModel, HegcServerModel, LayerCost, Post, FLOOD_BITS, PROTOCOL};
use crate::error::{NnError, Result};
use crate::layers::gru::{GruOutcome, ServerPolicy, SessionReport, LOGITS_REFUSED};
use secinfer_gc::protocol::{
    evaluate_offline, evaluate_online, garble_offline, garble_online, GarbledBatch, ReceivedBatch,
};
use secinfer_gc::requant::{argmax_circuit, argmax_index_bits, truncation_circuit};
use secinfer_gc::shares::{ShareDomain, ShareEvaluator, ShareGarbler};
use secinfer_gc::Circuit;
use secinfer_he::kernels::{finish_outputs, Flood};
use secinfer_he::{GaloisKeys, HeEvaluator, PublicKey, Response, SecretKey, SeededCiphertext};
use secinfer_net::{Channel, Phase};
use secinfer_ot::{Block, OtExtReceiver, OtExtSender, Prg};
use std::time::Instant;

const MAX_HANDSHAKE: usize = 4096;

fn bytes<C: Channel>(ch: &C) -> u64 {
    ch.cost().total().bytes()
}
fn rounds<C: Channel>(ch: &C) -> u64 {
    ch.cost().total().rounds
}

/// Measures one step of the network.
struct Step {
    cost: LayerCost,
    t0: Instant,
    b0: u64,
    r0: u64,
}

impl Step {
    fn start<C: Channel>(ch: &C, name: &str, kernel: &str) -> Step {
        Step {
            cost: LayerCost {
                name: name.into(),
                kernel: kernel.into(),
                ..Default::default()
            },
            t0: Instant::now(),
            b0: bytes(ch),
            r0: rounds(ch),
        }
    }
    /// The bytes since the start (or the last mark) were HE traffic.
    fn he<C: Channel>(&mut self, ch: &C) {
        let b = bytes(ch);
        self.cost.he_bytes += b - self.b0;
        self.b0 = b;
    }
    fn end<C: Channel>(mut self, ch: &C, rep: &mut SessionReport) {
        let b = bytes(ch);
        self.cost.gc_bytes += b - self.b0;
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

/// The garbled argmax of the last layer's `n` values.
fn final_circuit(p: u64, m: &super::NetShape, reveal: bool) -> Result<Circuit> {
    let last = m
        .stages
        .last()
        .ok_or_else(|| NnError::Protocol("a network without layers".into()))?;
    Ok(argmax_circuit(p, last.rows, &m.truncation(last), reveal)?)
}

/// Server: one session over `ch`, revealing no more than `policy` allows.
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
    let p = params.t();
    let domain = ShareDomain::ModP(p);
    let w = domain.width();
    // ---- setup
    ch.set_phase(Phase::Setup);
    let hello = ch.recv_frame_limited(MAX_HANDSHAKE)?;
    let hv: serde_json::Value = serde_json::from_slice(&hello)
        .map_err(|e| NnError::Malformed(format!("handshake: {e}")))?;
    let reveal = hv["reveal_logits"].as_bool().unwrap_or(false);
    let problem = if hv["protocol"] != PROTOCOL {
        Some(format!(
            "protocol mismatch: client {}, server {PROTOCOL}",
            hv["protocol"]
        ))
    } else if hv["arch"] != m.shape.hash().as_str() {
        Some("the client's network (shape, format or kernel) differs from the server's".into())
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
    rep.logits_revealed = reveal;
    let pk = PublicKey::from_bytes(params, &ch.recv_frame()?)?;
    let keys = GaloisKeys::from_bytes(params, &ch.recv_frame()?)?;
    let mut prg = Prg::new();
    let delta = Block(prg.next_block().0 | 1);
    let mut ot = OtExtSender::setup_with_delta(ch, &mut prg, delta)?;
    rep.he_bytes += ch.cost().setup.bytes();
    // ---- offline: every garbled batch
    ch.set_phase(Phase::Offline);
    let n_st = m.shape.stages.len();
    let mut garblers = Vec::with_capacity(n_st);
    for s in &m.shape.stages[..n_st - 1] {
        let circ = truncation_circuit(p, &m.shape.truncation(s))?;
        garblers.push(ShareGarbler::offline_circuit(
            ch,
            delta,
            domain,
            &circ,
            m.shape.main.bits,
            s.rows,
        )?);
    }
    let fin = final_circuit(p, &m.shape, reveal)?;
    let fin_batch: GarbledBatch =
        garble_offline(ch, &fin, m.shape.stages[n_st - 1].rows * w, 1, delta)?;
    ch.flush()?;
    rep.gc_bytes += ch.cost().offline.bytes();
    rep.and_gates = fin.and_count();
    // ---- online
    ch.set_phase(Phase::Online);
    let ev = HeEvaluator::new(params, &keys);
    let mut x_s: Option<Vec<u64>> = None;
    let mut garblers = garblers.into_iter();
    for (s, l) in m.shape.stages.iter().zip(&m.layers) {
        let mut st = Step::start(ch, &s.name, kernel_name(m.shape.kernel));
        let mut cts = Vec::with_capacity(l.plan.col_chunks);
        for _ in 0..l.plan.col_chunks {
            cts.push(SeededCiphertext::from_bytes(params, &ch.recv_frame()?)?.expand(params));
        }
        let outs = l.plan.eval(&ev, &l.pts, &cts)?;
        let res = finish_outputs(params, &pk, &outs, Flood::Statistical(FLOOD_BITS))?;
        rep.flood_stat_bits = rep.flood_stat_bits.min(res.flood_stat_bits);
        for r in &res.responses {
            ch.send_frame(&r.to_bytes())?;
        }
        ch.flush()?;
        // The server's share: its masks' extraction, plus W·x_s and b·2^F in the clear.
        let mut share = l.plan.extract(&res.masks, p)?;
        for (i, v) in share.iter_mut().enumerate() {
            let mut acc = (*v as u128 + l.bias[i] as u128) % p as u128;
            if let Some(xs) = &x_s {
                let dot: u128 = l.w[i]
                    .iter()
                    .zip(xs)
                    .fold(0u128, |a, (w, x)| (a + *w as u128 * *x as u128) % p as u128);
                acc = (acc + dot) % p as u128;
            }
            *v = acc as u64;
        }
        st.he(ch);
        if s.post == Post::Argmax {
            let mut bits = Vec::with_capacity(share.len() * w);
            for v in &share {
                bits_of(&mut bits, domain.add(*v, (p - 1) / 2), w);
            }
            garble_online(ch, &mut ot, &fin_batch, &bits)?;
            ch.flush()?;
        } else {
            let g = garblers
                .next()
                .ok_or_else(|| NnError::Protocol("a hidden layer without its batch".into()))?;
            x_s = Some(g.online(ch, &mut ot, &share)?);
        }
        st.end(ch, &mut rep);
    }
    rep.cost = ch.cost();
    Ok(rep)
}

fn kernel_name(k: secinfer_he::MatVecMethod) -> &'static str {
    match k {
        secinfer_he::MatVecMethod::Gala => "gala",
        secinfer_he::MatVecMethod::Gazelle => "gazelle",
        secinfer_he::MatVecMethod::Naive => "naive",
    }
}

/// Client: one session over `ch` on `input` (main-format integers, the flattened image).
pub fn client_session<C: Channel>(
    ch: &mut C,
    m: &HegcClientModel,
    input: &[i64],
    reveal_logits: bool,
    progress: &mut dyn FnMut(&str, u64, u64),
) -> Result<GruOutcome> {
    let params = &m.params;
    let p = params.t();
    let domain = ShareDomain::ModP(p);
    let w = domain.width();
    let first = m
        .shape
        .stages
        .first()
        .ok_or_else(|| NnError::Protocol("a network without layers".into()))?;
    if input.len() != first.cols {
        return Err(NnError::Input(format!(
            "{} values, the network reads {}",
            input.len(),
            first.cols
        )));
    }
    let main = m.shape.main;
    if let Some(i) = input.iter().position(|v| main.clamp(*v) != *v) {
        return Err(NnError::Input(format!(
            "value {i} ({}) is outside the {}-bit main format",
            input[i], main.bits
        )));
    }
    let mut rep = SessionReport::default();
    let total = m.shape.stages.len() as u64 + 2;
    // ---- setup
    ch.set_phase(Phase::Setup);
    progress("setup", 0, total);
    let hs = serde_json::json!({
        "protocol": PROTOCOL,
        "arch": m.shape.hash(),
        "reveal_logits": reveal_logits,
    });
    ch.send_frame(hs.to_string().as_bytes())?;
    let reply = ch.recv_frame_limited(MAX_HANDSHAKE)?;
    let rv: serde_json::Value = serde_json::from_slice(&reply)
        .map_err(|e| NnError::Malformed(format!("handshake reply: {e}")))?;
    if rv["ok"] != serde_json::Value::Bool(true) {
        return Err(NnError::Refused(
            rv["error"]
                .as_str()
                .unwrap_or("no reason given")
                .to_string(),
        ));
    }
    let reveal = rv["reveal_logits"].as_bool().unwrap_or(false) && reveal_logits;
    rep.logits_revealed = reveal;
    let sk = SecretKey::generate(params);
    ch.send_frame(&sk.public_key().to_bytes())?;
    ch.send_frame(&sk.rotation_keys(&m.rotation_steps(), false).to_bytes())?;
    let mut ot = OtExtReceiver::setup(ch, &mut Prg::new())?;
    rep.he_bytes += ch.cost().setup.bytes();
    // ---- offline
    ch.set_phase(Phase::Offline);
    progress("offline", 1, total);
    let n_st = m.shape.stages.len();
    let mut evals = Vec::with_capacity(n_st);
    for s in &m.shape.stages[..n_st - 1] {
        let circ = truncation_circuit(p, &m.shape.truncation(s))?;
        evals.push(ShareEvaluator::offline_circuit(ch, domain, circ, s.rows)?);
    }
    let fin = final_circuit(p, &m.shape, reveal)?;
    let last_rows = m.shape.stages[n_st - 1].rows;
    let fin_batch: ReceivedBatch = evaluate_offline(ch, &fin, last_rows * w, 1)?;
    rep.gc_bytes += ch.cost().offline.bytes();
    rep.and_gates = fin.and_count();
    // ---- online
    ch.set_phase(Phase::Online);
    let mut x_c: Vec<u64> = input.iter().map(|v| domain.embed(*v)).collect();
    let mut evals = evals.into_iter();
    let mut result = None;
    for (k, (s, plan)) in m.shape.stages.iter().zip(&m.plans).enumerate() {
        progress(&s.name, 2 + k as u64, total);
        let mut st = Step::start(ch, &s.name, kernel_name(m.shape.kernel));
        for slots in plan.pack_input(&x_c)? {
            ch.send_frame(&sk.encrypt_seeded(&slots)?.to_bytes())?;
        }
        ch.flush()?;
        let mut dec = Vec::with_capacity(plan.out_cts);
        for _ in 0..plan.out_cts {
            let r = Response::from_bytes(params, &ch.recv_frame()?)?;
            dec.push(sk.decrypt_response(&r)?);
        }
        let share = plan.extract(&dec, p)?;
        st.he(ch);
        if s.post == Post::Argmax {
            let mut bits = Vec::with_capacity(share.len() * w);
            for v in &share {
                bits_of(&mut bits, *v, w);
            }
            let out = evaluate_online(ch, &mut ot, &fin, &fin_batch, &bits)?;
            result = Some(out);
        } else {
            let e = evals
                .next()
                .ok_or_else(|| NnError::Protocol("a hidden layer without its batch".into()))?;
            x_c = e.online(ch, &mut ot, &share)?;
        }
        st.end(ch, &mut rep);
    }
    progress("done", total, total);
    let out = result.ok_or_else(|| NnError::Protocol("no argmax ran".into()))?;
    let ib = argmax_index_bits(last_rows);
    if out.len() < ib {
        return Err(NnError::Malformed("argmax output too short".into()));
    }
    let class = word(&out[..ib]) as usize;
    if class >= last_rows {
        return Err(NnError::Malformed(format!("class {class} of {last_rows}")));
    }
    let logits = reveal.then(|| {
        let b = main.bits as usize;
        out[ib..]
            .chunks(b)
            .map(|c| {
                let v = word(c);
                ((v << (64 - b)) as i64) >> (64 - b)
            })
            .collect()
    });
    rep.cost = ch.cost();
    Ok(GruOutcome {
        class,
        top: vec![class],
        logits,
        log2_prob: None,
        report: rep,
    })
}
