//! The client's side of a choco session: keys, then per linear layer encrypt → server →
//! decrypt → CRT → requantise, and every other layer in the clear, as the reference computes
//! it. The client's cost (CHOCO's first metric) is measured as it runs. The session is a state
//! machine over typed messages ([`ClientRun`]), which [`client_session`] drives over a channel.
use super::wire::{
    check_counts, hello, make_keys, read_accept, recv_per_prime, response_limit, send_galois,
    send_per_prime, KeyUpload, Results, Upload,
};
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
        Self::with_ring(config, packing, secinfer_he::choco::ring_for(packing))
    }

    /// [`ChocoClient::new`] on another ring: (degree, Q primes). Only for measuring a packing
    /// where its own ring is not (`secinfer bench choco --ring-degree --q-primes`); the server
    /// must use the same ring.
    pub fn with_ring(
        config: &ModelConfig,
        packing: Packing,
        ring: (usize, usize),
    ) -> Result<ChocoClient> {
        let schedule = Schedule::new(config, packing, ring)?;
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

    /// Q primes of the session's BFV parameters (three for the masked baseline).
    pub fn q_primes(&self) -> usize {
        self.schedule.rns.sets()[0].num_q()
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
    ch.set_phase(Phase::Setup);
    let (mut run, keys) = c.start(x)?;
    ch.send_frame(&hello(&c.id))?;
    ch.flush()?;
    read_accept(ch)?;
    let sets = c.schedule.rns.sets();
    for ((pk, gk), p) in keys.per_prime.into_iter().zip(sets) {
        ch.send_frame_vec(pk)?;
        send_galois(ch, p, gk)?;
    }
    ch.set_phase(Phase::Online);
    while let Some(up) = run.next_upload()? {
        let n = run.expects();
        // Sending is not the client's work: a slow server (still reading the keys) would
        // otherwise be counted as encryption time.
        send_per_prime(ch, up.per_prime)?;
        let per_prime = recv_per_prime(ch, sets, n, response_limit)?;
        run.absorb(&Results { per_prime })?;
    }
    Ok(run.finish())
}

/// One session's client side between two messages; it does no IO, so a test can drive it
/// with the server's steps directly.
pub struct ClientRun<'a> {
    c: &'a ChocoClient,
    /// One secret key per plaintext prime.
    keys: Vec<SecretKey>,
    /// Every layer's output so far (index 0: the input).
    outs: Vec<Vec<i64>>,
    /// The next stage of the schedule.
    stage: usize,
    cost: ClientCost,
}

impl ChocoClient {
    /// The session's opening message (the hash of the graph, format, packing and primes).
    pub fn hello(&self) -> Vec<u8> {
        hello(&self.id)
    }

    /// Starts a session on the fixed-point input `x` (main format): fresh keys, and the key
    /// message for the server.
    pub fn start(&self, x: &[i64]) -> Result<(ClientRun<'_>, KeyUpload)> {
        check_input(self, x)?;
        let s = &self.schedule;
        let mut cost = ClientCost::default();
        let t0 = Instant::now();
        let steps = s.rotation_steps();
        let (keys, upload) = make_keys(s.rns.sets(), &steps);
        cost.keygen_s = t0.elapsed().as_secs_f64();
        cost.setup_bytes = upload
            .per_prime
            .iter()
            .map(|(pk, gk)| (pk.len() + gk.len()) as u64)
            .sum();
        // The model's stated input range, applied as the reference applies it.
        let mut x = x.to_vec();
        self.config.graph.clamp_input(s.fp.main, &mut x);
        let run = ClientRun {
            c: self,
            keys,
            outs: vec![x],
            stage: 0,
            cost,
        };
        Ok((run, upload))
    }
}

impl ClientRun<'_> {
    /// Computes the clear layers up to the next linear one and returns that layer's upload;
    /// `None` once the network is done.
    pub fn next_upload(&mut self) -> Result<Option<Upload>> {
        let c = self.c;
        let s = &c.schedule;
        let layers = &c.config.graph.layers;
        while let Some(st) = s.stages.get(self.stage) {
            match st {
                Stage::Client { layer } => {
                    let t = Instant::now();
                    let y = clear_layer(&layers[*layer], *layer, &self.outs, &c.config, &s.fp)?;
                    self.cost.plain_s += t.elapsed().as_secs_f64();
                    self.outs.push(y);
                    self.stage += 1;
                }
                Stage::Linear { layer, plan } => {
                    let t = Instant::now();
                    let res = s.rns.residues(&self.outs[layer - 1]);
                    let mut per_prime = Vec::with_capacity(self.keys.len());
                    for (sk, xr) in self.keys.iter().zip(&res) {
                        let frames = plan
                            .pack_input(xr)?
                            .iter()
                            .map(|v| Ok(sk.encrypt_seeded(v)?.to_bytes()))
                            .collect::<Result<Vec<_>>>()?;
                        self.cost.ciphertexts_up += frames.len();
                        self.cost.bytes_up += frames.iter().map(|f| f.len() as u64).sum::<u64>();
                        per_prime.push(frames);
                    }
                    self.cost.encrypt_s += t.elapsed().as_secs_f64();
                    return Ok(Some(Upload { per_prime }));
                }
            }
        }
        Ok(None)
    }

    /// Ciphertexts per prime the pending layer's results hold (0 when none is pending).
    pub fn expects(&self) -> usize {
        match self.c.schedule.stages.get(self.stage) {
            Some(Stage::Linear { plan, .. }) => plan.out_cts(),
            _ => 0,
        }
    }

    /// Takes the server's results for the pending linear layer: decrypt, CRT, requantise.
    pub fn absorb(&mut self, r: &Results) -> Result<()> {
        let s = &self.c.schedule;
        let Some(Stage::Linear { plan, .. }) = s.stages.get(self.stage) else {
            return Err(NnError::Malformed(
                "choco: results with no linear layer pending".into(),
            ));
        };
        check_counts("results", &r.per_prime, self.keys.len(), plan.out_cts())?;
        let t = Instant::now();
        let mut rows = Vec::with_capacity(self.keys.len());
        for (sk, frames) in self.keys.iter().zip(&r.per_prime) {
            let p = sk.params();
            let want = secinfer_he::choco::response_log_q(p);
            let mut dec = Vec::with_capacity(frames.len());
            for f in frames {
                self.cost.bytes_down += f.len() as u64;
                self.cost.ciphertexts_down += 1;
                let r = Response::from_bytes(p, f)?;
                if r.log_q() != want {
                    return Err(NnError::Malformed(format!(
                        "choco: response modulus 2^{}, expected 2^{want}",
                        r.log_q()
                    )));
                }
                dec.push(sk.decrypt_response(&r)?);
            }
            rows.push(plan.extract(&dec)?);
        }
        let acc = s.rns.reconstruct(&rows)?;
        self.cost.decrypt_s += t.elapsed().as_secs_f64();
        let t = Instant::now();
        // The bias rode in as b·2^F, so ⌊acc / 2^F⌋ = ⌊ΣWx / 2^F⌋ + b: the reference's
        // wrap((ΣWx ≫ F) + b).
        let main = s.fp.main;
        let y = acc
            .iter()
            .map(|a| main.wrap((a >> main.scale) as i64))
            .collect();
        self.cost.plain_s += t.elapsed().as_secs_f64();
        self.outs.push(y);
        self.stage += 1;
        Ok(())
    }

    /// What the client learned, once [`ClientRun::next_upload`] has returned `None`.
    pub fn finish(self) -> ChocoOutcome {
        let class = match self.c.config.graph.layers.last().map(|l| &l.kind) {
            Some(LayerKind::Argmax) => self
                .outs
                .last()
                .and_then(|o| o.first())
                .map(|v| *v as usize),
            _ => None,
        };
        ChocoOutcome {
            outputs: self.outs,
            class,
            cost: self.cost,
        }
    }
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
