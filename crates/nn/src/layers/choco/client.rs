//! The client's side of a choco session: keys, then per linear layer encrypt → server →
//! decrypt → CRT → requantise, and every other layer in the clear, as the reference computes
//! it. The client's cost (CHOCO's first metric) is measured as it runs.
use super::wire::{hello, read_accept, response_limit, send_galois};
use super::{session_id, Schedule, Stage};
use crate::error::{NnError, Result};
use crate::model::{FixedPointConfig, Layer, LayerKind, ModelConfig, Shape};
use crate::reference::{argmax, pool};
use secinfer_he::choco::{Kernel, Packing};
use secinfer_he::{Response, SecretKey};
use secinfer_net::{Channel, Phase};
use std::time::Instant;

/// The client's view of a model: the public graph only.
pub struct ChocoClient {
    pub config: ModelConfig,
    schedule: Schedule,
    id: [u8; 32],
    /// Threads for the client's own work (`None`: the caller's rayon pool).
    threads: Option<usize>,
}

impl ChocoClient {
    pub fn new(config: &ModelConfig, packing: Packing) -> Result<ChocoClient> {
        let schedule = Schedule::new(config, packing)?;
        let id = session_id(config, &schedule);
        Ok(ChocoClient {
            config: config.clone(),
            schedule,
            id,
            threads: None,
        })
    }

    /// Runs the client's work on `threads` threads (1 models a small device).
    pub fn with_threads(mut self, threads: usize) -> Self {
        self.threads = Some(threads.max(1));
        self
    }

    /// Names of the layers whose outputs this client sees in the clear (the mode's leak).
    pub fn revealed_layers(&self) -> Vec<String> {
        self.schedule.revealed(&self.config)
    }

    pub fn primes(&self) -> Vec<u64> {
        self.schedule.rns.primes()
    }

    /// The kernel plan of every server-side linear layer, in order.
    pub fn plans(&self) -> Vec<Kernel> {
        self.schedule.plans().cloned().collect()
    }

    /// Ring degree of the session's BFV parameters.
    pub fn ring_degree(&self) -> usize {
        self.schedule.rns.ring_degree()
    }

    /// Galois keys the client uploads per plaintext prime.
    pub fn galois_keys(&self) -> usize {
        self.schedule.rotation_steps().len()
    }
}

/// The client's cost of one session.
#[derive(Clone, Debug, Default)]
pub struct ClientCost {
    /// Key generation (secret, public and Galois keys; setup, once per session).
    pub keygen_s: f64,
    /// Packing, encoding, encryption and serialisation of the uploads (online).
    pub encrypt_s: f64,
    /// Parsing, decryption, CRT and slot extraction of the responses (online).
    pub decrypt_s: f64,
    /// Requantisation and the layers computed in the clear (online).
    pub plain_s: f64,
    /// Bytes of the keys uploaded (setup).
    pub setup_bytes: u64,
    /// Online bytes up (ciphertexts) and down (responses).
    pub bytes_up: u64,
    pub bytes_down: u64,
    pub ciphertexts_up: usize,
    pub ciphertexts_down: usize,
}

impl ClientCost {
    /// Encrypt + decrypt + clear layers: the client's online work.
    pub fn online_s(&self) -> f64 {
        self.encrypt_s + self.decrypt_s + self.plain_s
    }
}

/// What the client learns: every layer's output (the activations this mode reveals to it).
pub struct ChocoOutcome {
    /// Output of every layer, in graph order (index 0: the input), row-major.
    pub outputs: Vec<Vec<i64>>,
    /// The class, when the graph ends in an argmax.
    pub class: Option<usize>,
    pub cost: ClientCost,
}

impl ChocoOutcome {
    /// The last layer's output.
    pub fn output(&self) -> &[i64] {
        self.outputs.last().map_or(&[], Vec::as_slice)
    }
}

fn check_input(c: &ChocoClient, x: &[i64]) -> Result<()> {
    let first = c.config.graph.layers[0].output;
    if matches!(first, Shape::Tokens { .. }) || x.len() != first.elements() || x.is_empty() {
        return Err(NnError::Input(format!(
            "{} values, the model reads {first}",
            x.len()
        )));
    }
    let main = c.schedule.fp.main;
    if let Some(i) = x.iter().position(|v| main.clamp(*v) != *v) {
        return Err(NnError::Input(format!(
            "value {i} ({}) is outside the {}-bit main format",
            x[i], main.bits
        )));
    }
    Ok(())
}

/// Runs one session's client side over `ch` on the fixed-point input `x` (main format), on
/// the client's own thread pool when it has one.
pub fn client_session<C: Channel>(ch: &mut C, c: &ChocoClient, x: &[i64]) -> Result<ChocoOutcome> {
    check_input(c, x)?;
    match c.threads {
        None => run_client(ch, c, x),
        Some(n) => rayon::ThreadPoolBuilder::new()
            .num_threads(n)
            .build()
            .map_err(|e| NnError::Protocol(format!("client thread pool: {e}")))?
            .install(|| run_client(ch, c, x)),
    }
}

fn run_client<C: Channel>(ch: &mut C, c: &ChocoClient, x: &[i64]) -> Result<ChocoOutcome> {
    let s = &c.schedule;
    let mut cost = ClientCost::default();
    ch.set_phase(Phase::Setup);
    let t0 = Instant::now();
    let steps = s.rotation_steps();
    let keys: Vec<SecretKey> = s.rns.sets().iter().map(SecretKey::generate).collect();
    let mut key_frames = Vec::with_capacity(2 * keys.len());
    for sk in &keys {
        key_frames.push(sk.public_key().to_bytes());
        key_frames.push(sk.rotation_keys(&steps, false).to_bytes());
    }
    cost.keygen_s = t0.elapsed().as_secs_f64();
    ch.send_frame(&hello(&c.id))?;
    ch.flush()?;
    read_accept(ch)?;
    for (i, f) in key_frames.into_iter().enumerate() {
        // Even frames: a public key; odd: the Galois keys of the same prime.
        if i % 2 == 0 {
            cost.setup_bytes += f.len() as u64;
            ch.send_frame_vec(f)?;
        } else {
            cost.setup_bytes += send_galois(ch, &s.rns.sets()[i / 2], f)?;
        }
    }
    ch.set_phase(Phase::Online);
    let layers = &c.config.graph.layers;
    let fp = s.fp;
    let mut outs: Vec<Vec<i64>> = vec![x.to_vec()];
    for st in &s.stages {
        match st {
            Stage::Client { layer } => {
                let t = Instant::now();
                let y = clear_layer(&layers[*layer], *layer, &outs, &c.config, &fp)?;
                cost.plain_s += t.elapsed().as_secs_f64();
                outs.push(y);
            }
            Stage::Linear { layer, plan, .. } => {
                let t = Instant::now();
                let res = s.rns.residues(&outs[layer - 1]);
                let mut frames = Vec::new();
                for (sk, xr) in keys.iter().zip(&res) {
                    for v in plan.pack_input(xr)? {
                        frames.push(sk.encrypt_seeded(&v)?.to_bytes());
                    }
                }
                // Sending is not the client's work: a slow server (still reading the keys) would
                // otherwise be counted as encryption time.
                cost.encrypt_s += t.elapsed().as_secs_f64();
                for f in frames {
                    cost.bytes_up += f.len() as u64;
                    cost.ciphertexts_up += 1;
                    ch.send_frame_vec(f)?;
                }
                ch.flush()?;
                let mut rows = Vec::with_capacity(keys.len());
                for sk in &keys {
                    let p = sk.params();
                    let want = secinfer_he::choco::response_log_q(p);
                    let mut dec = Vec::with_capacity(plan.out_cts());
                    for _ in 0..plan.out_cts() {
                        let f = ch.recv_frame_limited(response_limit(p))?;
                        let t = Instant::now();
                        cost.bytes_down += f.len() as u64;
                        cost.ciphertexts_down += 1;
                        let r = Response::from_bytes(p, &f)?;
                        if r.log_q() != want {
                            return Err(NnError::Malformed(format!(
                                "choco: response modulus 2^{}, expected 2^{want}",
                                r.log_q()
                            )));
                        }
                        dec.push(sk.decrypt_response(&r)?);
                        cost.decrypt_s += t.elapsed().as_secs_f64();
                    }
                    let t = Instant::now();
                    rows.push(plan.extract(&dec)?);
                    cost.decrypt_s += t.elapsed().as_secs_f64();
                }
                let t = Instant::now();
                let acc = s.rns.reconstruct(&rows)?;
                cost.decrypt_s += t.elapsed().as_secs_f64();
                let t = Instant::now();
                // The bias rode in as b·2^F, so ⌊acc / 2^F⌋ = ⌊ΣWx / 2^F⌋ + b: the reference's
                // wrap((ΣWx ≫ F) + b).
                let y = acc
                    .iter()
                    .map(|a| fp.main.wrap((a >> fp.main.scale) as i64))
                    .collect();
                cost.plain_s += t.elapsed().as_secs_f64();
                outs.push(y);
            }
        }
    }
    let class = match layers.last().map(|l| &l.kind) {
        Some(LayerKind::Argmax) => outs.last().and_then(|o| o.first()).map(|v| *v as usize),
        _ => None,
    };
    Ok(ChocoOutcome {
        outputs: outs,
        class,
        cost,
    })
}

/// A layer the client computes in the clear, by the reference's rules.
fn clear_layer(
    l: &Layer,
    i: usize,
    outs: &[Vec<i64>],
    config: &ModelConfig,
    fp: &FixedPointConfig,
) -> Result<Vec<i64>> {
    let x = &outs[i - 1];
    let main = fp.main;
    Ok(match &l.kind {
        LayerKind::Relu => x.iter().map(|v| (*v).max(0)).collect(),
        LayerKind::Flatten => x.clone(),
        LayerKind::MaxPool2d { kernel, stride } => pool(l, *kernel, *stride, x, |w| {
            w.iter().copied().max().unwrap_or(0)
        }),
        LayerKind::AvgPool2d { kernel, stride } => {
            // The public weight quantize(1 / (kh·kw)), as the reference quantises it.
            let q = main.quantize((1.0f32 / (kernel[0] * kernel[1]) as f32) as f64);
            pool(l, *kernel, *stride, x, |w| w.iter().sum())
                .into_iter()
                .map(|s| main.wrap((s * q) >> main.scale))
                .collect()
        }
        LayerKind::Add { other } => {
            let j = config
                .graph
                .layers
                .iter()
                .position(|o| &o.name == other)
                .ok_or_else(|| NnError::Protocol(format!("add: no layer {other}")))?;
            x.iter()
                .zip(&outs[j])
                .map(|(u, v)| main.wrap(u + v))
                .collect()
        }
        LayerKind::Argmax => {
            let per = l.input.elements();
            x.chunks(per).map(|c| argmax(c) as i64).collect()
        }
        kind => {
            return Err(NnError::Protocol(format!(
                "choco: layer {i} ({}) is not a client layer",
                kind.type_name()
            )))
        }
    })
}
