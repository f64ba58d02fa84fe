//! The server's side of a choco session: the weights of every linear layer, encoded once per
//! plaintext prime, and the session as a state machine over typed messages ([`ServerRun`]:
//! keys in, then per linear layer an [`Upload`] in and its flooded, re-randomised [`Results`]
//! out), which [`server_session`] drives over a channel.
use super::wire::{
    accept_hello, check_counts, public_key_limit, recv_galois, recv_per_prime, send_per_prime,
    upload_limit, KeyUpload, Results, Upload,
};
use super::{session_id, Schedule, Stage};
use crate::error::{NnError, Result};
use crate::model::{Model, ModelConfig};
use rayon::prelude::*;
use secinfer_he::choco::{self, Kernel, KernelWeights, Packing, FLOOD_STAT_BITS};
use secinfer_he::{
    Evaluator, GaloisKeys, HeEvaluator, OpCounts, Params, Plaintext, PublicKey, SeededCiphertext,
};
use secinfer_net::{Channel, Phase};
use std::time::Instant;

/// Most memory the encoded weights of one model may take.
const MAX_WEIGHT_BYTES: usize = 2 << 30;

/// One linear layer's server state: per prime, the encoded matrix and the bias slots.
struct Linear {
    plan: Kernel,
    /// Per prime: the kernel's plaintexts.
    prepared: Vec<KernelWeights<Plaintext>>,
    /// Per prime, per output window: b·2^F mod t in the output layout.
    bias: Vec<Vec<Vec<u64>>>,
    /// Per output ciphertext: which slots are outputs.
    outputs: Vec<Vec<bool>>,
}

/// A model prepared for choco sessions (secret: no `Debug`).
pub struct ChocoServer {
    pub config: ModelConfig,
    schedule: Schedule,
    linear: Vec<Linear>,
    id: [u8; 32],
    /// Statistical-distance exponent the returned ciphertexts are flooded to.
    flood_bits: u32,
}

/// What the server measured in one session.
#[derive(Clone, Debug, Default)]
pub struct ServerCost {
    /// Seconds of homomorphic evaluation and re-randomisation (online).
    pub eval_s: f64,
    /// HE operations of the linear kernels.
    pub ops: OpCounts,
    /// Weakest statistical-flooding exponent of the returned ciphertexts.
    pub flood_stat_bits: f64,
    pub ciphertexts_in: usize,
    pub ciphertexts_out: usize,
}

/// Galois keys with no key: the evaluator the weight encoding runs on needs none.
pub(super) fn no_keys(p: &Params) -> Result<GaloisKeys> {
    let mut b = b"GKS1".to_vec();
    b.extend_from_slice(&0u32.to_le_bytes());
    Ok(GaloisKeys::from_bytes(p, &b)?)
}

/// Round-to-nearest quantisation of a float tensor in the main format, as the reference does.
fn quantize(model: &Model, layer: &str, suffix: &str) -> Result<Vec<i64>> {
    let main = model.config.fixed_point.main;
    Ok(model
        .tensors
        .get(layer, suffix)?
        .data
        .iter()
        .map(|v| main.quantize(*v as f64))
        .collect())
}

impl ChocoServer {
    /// Quantises and encodes every linear layer of `model` for `packing`.
    pub fn new(model: &Model, packing: Packing) -> Result<ChocoServer> {
        Self::with_ring(model, packing, secinfer_he::choco::ring_for(packing))
    }

    /// [`ChocoServer::new`] on another ring: (degree, Q primes), as [`ChocoClient::with_ring`].
    pub fn with_ring(model: &Model, packing: Packing, ring: (usize, usize)) -> Result<ChocoServer> {
        let config = model.config.clone();
        let schedule = Schedule::new(&config, packing, ring)?;
        let frac = schedule.fp.main.scale;
        let mut linear = Vec::new();
        let mut pt_bytes = 0usize;
        for st in &schedule.stages {
            let Stage::Linear { layer, plan, .. } = st else {
                continue;
            };
            // Each plaintext is n residues per Q prime, per plaintext prime.
            let sets = schedule.rns.sets();
            pt_bytes += plan.plaintexts() * sets[0].n() * sets[0].num_q() * 8 * sets.len();
            if pt_bytes > MAX_WEIGHT_BYTES {
                return Err(NnError::Unsupported(format!(
                    "family choco: the encoded weights would take {} MiB (limit {} MiB) at \
                     layer {}",
                    pt_bytes >> 20,
                    MAX_WEIGHT_BYTES >> 20,
                    config.graph.layers[*layer].name
                )));
            }
            let l = &config.graph.layers[*layer];
            // Dense: the row-major matrix; Conv2d: the co × c × kh × kw kernel itself.
            let matrix = quantize(model, &l.name, "weight")?;
            let b = quantize(model, &l.name, "bias")?;
            // Conv2d's bias is per output channel; the outputs are (channel, y, x).
            let outputs = plan.outputs();
            let per = outputs / b.len().max(1);
            let bias_rows: Vec<i64> = (0..outputs).map(|r| b[r / per] << frac).collect();
            let rns = &schedule.rns;
            let res = rns.residues(&bias_rows);
            let mut prepared = Vec::new();
            let mut bias = Vec::new();
            for (p, br) in rns.sets().iter().zip(&res) {
                let keys = no_keys(p)?;
                let ev = HeEvaluator::new(p, &keys);
                prepared.push(plan.prepare(&ev, &matrix)?);
                bias.push(plan.output_layout(br)?);
            }
            linear.push(Linear {
                outputs: plan.output_slots()?,
                plan: plan.clone(),
                prepared,
                bias,
            });
        }
        let id = session_id(&config, &schedule);
        Ok(ChocoServer {
            config,
            schedule,
            linear,
            id,
            flood_bits: FLOOD_STAT_BITS,
        })
    }

    /// Floods the returned ciphertexts to 2^-`bits` instead of 2^-40. Only for measuring what
    /// flooding costs (both packings flood to 2^-40 by default): figures taken below 40 bits
    /// are labelled so, and no default path calls this.
    pub fn with_flood_bits(mut self, bits: u32) -> Self {
        self.flood_bits = bits;
        self
    }

    pub fn packing(&self) -> Packing {
        self.schedule.packing
    }

    /// The plaintext primes (one ciphertext per prime and window).
    pub fn primes(&self) -> Vec<u64> {
        self.schedule.rns.primes()
    }
}

/// Runs one session's server side over `ch`: the wire around [`ServerRun`]'s steps.
pub fn server_session<C: Channel>(ch: &mut C, s: &ChocoServer) -> Result<ServerCost> {
    ch.set_phase(Phase::Setup);
    accept_hello(ch, &s.id)?;
    let steps = s.schedule.rotation_steps().len();
    let mut keys = KeyUpload {
        per_prime: Vec::new(),
    };
    for p in s.schedule.rns.sets() {
        let pk = ch.recv_frame_limited(public_key_limit(p))?;
        keys.per_prime.push((pk, recv_galois(ch, p, steps)?));
    }
    let mut run = s.start(&keys)?;
    drop(keys);
    ch.set_phase(Phase::Online);
    while let Some(n) = run.expects() {
        let per_prime = recv_per_prime(ch, s.schedule.rns.sets(), n, upload_limit)?;
        let results = run.answer(&Upload { per_prime })?;
        send_per_prime(ch, results.per_prime)?;
    }
    run.finish()
}

/// One session's server side between two messages; it does no IO, so a test can drive it
/// with messages it builds or corrupts.
pub struct ServerRun<'a> {
    s: &'a ChocoServer,
    /// Per prime: the client's public key and Galois keys.
    keys: Vec<(PublicKey, GaloisKeys)>,
    /// The next linear layer to answer.
    layer: usize,
    cost: ServerCost,
}

impl ChocoServer {
    /// Starts a session from the client's keys (hostile bytes: decoded against the session's
    /// parameters, one key pair per plaintext prime, at most the session's rotations).
    pub fn start(&self, keys: &KeyUpload) -> Result<ServerRun<'_>> {
        let sets = self.schedule.rns.sets();
        if keys.per_prime.len() != sets.len() {
            return Err(NnError::Malformed(format!(
                "choco: keys for {} primes, the session has {}",
                keys.per_prime.len(),
                sets.len()
            )));
        }
        let steps = self.schedule.rotation_steps().len();
        let keys = sets
            .iter()
            .zip(&keys.per_prime)
            .map(|(p, (pk, gk))| {
                let count = gk
                    .get(4..8)
                    .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]));
                if count.is_none_or(|c| c as usize > steps) {
                    return Err(NnError::Malformed(format!(
                        "choco: Galois keys beyond the session's {steps} rotations"
                    )));
                }
                Ok((
                    PublicKey::from_bytes(p, pk)?,
                    GaloisKeys::from_bytes(p, gk)?,
                ))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(ServerRun {
            s: self,
            keys,
            layer: 0,
            cost: ServerCost {
                flood_stat_bits: f64::INFINITY,
                ..ServerCost::default()
            },
        })
    }
}

impl ServerRun<'_> {
    /// Ciphertexts per prime the next upload holds; `None` once every linear layer is answered.
    pub fn expects(&self) -> Option<usize> {
        self.s.linear.get(self.layer).map(|l| l.plan.in_cts())
    }

    /// Answers the next linear layer's upload: the kernel on the client's ciphertexts, the
    /// bias, the hiding of the non-output slots, flooding and re-randomisation.
    pub fn answer(&mut self, up: &Upload) -> Result<Results> {
        let lin =
            self.s.linear.get(self.layer).ok_or_else(|| {
                NnError::Malformed("choco: an upload after the last layer".into())
            })?;
        let plan = &lin.plan;
        let sets = self.s.schedule.rns.sets();
        check_counts("an upload", &up.per_prime, sets.len(), plan.in_cts())?;
        let inputs = sets
            .iter()
            .zip(&up.per_prime)
            .map(|(p, frames)| {
                frames
                    .iter()
                    .map(|f| Ok(SeededCiphertext::from_bytes(p, f)?.expand(p)))
                    .collect::<Result<Vec<_>>>()
            })
            .collect::<Result<Vec<_>>>()?;
        self.cost.ciphertexts_in += inputs.iter().map(Vec::len).sum::<usize>();
        let t0 = Instant::now();
        let flood_bits = self.s.flood_bits;
        type PrimeOut = (Vec<Vec<u8>>, f64, OpCounts);
        let outs: Vec<Result<PrimeOut>> = sets
            .par_iter()
            .zip(&self.keys)
            .zip(&inputs)
            .enumerate()
            .map(|(i, ((p, (pk, gk)), cts))| {
                let ev = HeEvaluator::new(p, gk);
                let res = plan.eval(&ev, &lin.prepared[i], cts)?;
                let mut stat = f64::INFINITY;
                let mut frames = Vec::with_capacity(res.len());
                for ((ct, b), outs) in res.iter().zip(&lin.bias[i]).zip(&lin.outputs) {
                    let ct = choco::add_plain_hiding(p, ct, b, outs)?;
                    let (r, st) = choco::finish(p, pk, &ct, flood_bits)?;
                    stat = stat.min(st);
                    frames.push(r.to_bytes());
                }
                Ok((frames, stat, ev.counter().snapshot()))
            })
            .collect();
        self.cost.eval_s += t0.elapsed().as_secs_f64();
        let mut per_prime = Vec::with_capacity(outs.len());
        for o in outs {
            let (frames, stat, ops) = o?;
            self.cost.flood_stat_bits = self.cost.flood_stat_bits.min(stat);
            self.cost.ops = add_counts(self.cost.ops, ops);
            self.cost.ciphertexts_out += frames.len();
            per_prime.push(frames);
        }
        self.layer += 1;
        Ok(Results { per_prime })
    }

    /// What the session cost, once every linear layer is answered.
    pub fn finish(self) -> Result<ServerCost> {
        if self.expects().is_some() || !self.cost.flood_stat_bits.is_finite() {
            return Err(NnError::Protocol(
                "choco: the session ended before its last linear layer".into(),
            ));
        }
        Ok(self.cost)
    }
}

fn add_counts(a: OpCounts, b: OpCounts) -> OpCounts {
    OpCounts {
        perm: a.perm + b.perm,
        hst_perm: a.hst_perm + b.hst_perm,
        dec_perm: a.dec_perm + b.dec_perm,
        sc_mult: a.sc_mult + b.sc_mult,
        add: a.add + b.add,
    }
}
