//! A client-aided linear-algebra service for CHOCO's applications beyond DNNs: the server holds
//! integer matrices (with biases), the client sends encrypted vectors and gets `W·x + b` back
//! exactly (through the plaintext-prime CRT), flooded to 2^-40 and re-randomised; the client
//! does every nonlinear step in the clear between calls. The client sees each product it asks
//! for, and which matrix it asks for is visible to the server (the order of calls).
use super::client::ClientCost;
use super::wire::{
    accept_hello, hello, make_keys, public_key_limit, read_accept, recv_galois, response_limit,
    send_galois, upload_limit,
};
use crate::error::{NnError, Result};
use secinfer_he::choco::{self, DensePlan, Kernel, KernelWeights, Packing, RnsParams, RING_DEGREE};
use secinfer_he::{
    GaloisKeys, HeEvaluator, Params, Plaintext, PublicKey, Response, SecretKey, SeededCiphertext,
};
use secinfer_net::{Channel, Phase};
use std::time::Instant;

/// Frame tags of a call.
const CALL: u8 = 1;
const DONE: u8 = 0;

/// The public description of the service: each matrix's shape and the bound on its products.
#[derive(Clone, Debug)]
pub struct LinearSpec {
    /// `(rows, cols)` of every matrix.
    pub shapes: Vec<(usize, usize)>,
    /// Largest `|W·x + b|` any call can produce (sizes the plaintext primes).
    pub bound: u128,
    /// Per matrix, the diagonals of the Dense kernel it uses when it is banded (`None`: all;
    /// see `DensePlan::with_support`): fewer rotations and Galois keys.
    pub supports: Vec<Option<Vec<usize>>>,
}

struct Shared {
    plans: Vec<Kernel>,
    rns: RnsParams,
    id: [u8; 32],
}

impl Shared {
    fn new(spec: &LinearSpec) -> Result<Shared> {
        let row_len = RING_DEGREE / 2;
        if spec.supports.len() > spec.shapes.len() {
            return Err(NnError::Input(format!(
                "{} supports for {} matrices",
                spec.supports.len(),
                spec.shapes.len()
            )));
        }
        let plans = spec
            .shapes
            .iter()
            .enumerate()
            .map(|(i, &(r, c))| {
                let plan = DensePlan::new(r, c, Packing::Redundant, row_len, 2)?;
                Ok(Kernel::Dense(
                    match spec.supports.get(i).cloned().flatten() {
                        Some(diags) => plan.with_support(diags)?,
                        None => plan,
                    },
                ))
            })
            .collect::<Result<Vec<_>>>()?;
        let rns = RnsParams::for_packing(spec.bound, Packing::Redundant)?;
        use sha2::{Digest, Sha256};
        let mut h = Sha256::new();
        h.update(b"secinfer-choco-linear-v2");
        for (r, c) in &spec.shapes {
            h.update((*r as u64).to_le_bytes());
            h.update((*c as u64).to_le_bytes());
        }
        for p in &plans {
            if let Kernel::Dense(DensePlan {
                support: Some(s), ..
            }) = p
            {
                h.update((s.len() as u64).to_le_bytes());
                for d in s {
                    h.update((*d as u64).to_le_bytes());
                }
            }
        }
        for t in rns.primes() {
            h.update(t.to_le_bytes());
        }
        Ok(Shared {
            plans,
            rns,
            id: h.finalize().into(),
        })
    }

    fn steps(&self) -> Vec<usize> {
        let mut v: Vec<usize> = self.plans.iter().flat_map(Kernel::rotation_steps).collect();
        v.sort_unstable();
        v.dedup();
        v
    }
}

/// One matrix under one plaintext prime: its encoded weights and its bias in the output layout.
type Encoded = (KernelWeights<Plaintext>, Vec<Vec<u64>>);

/// The server: matrices encoded once per plaintext prime (secret: no `Debug`).
pub struct LinearServer {
    shared: Shared,
    /// Per matrix, per prime: the encoded weights and the bias in the output layout.
    ops: Vec<Vec<Encoded>>,
    /// Per matrix, per output ciphertext: which slots are outputs.
    outputs: Vec<Vec<Vec<bool>>>,
}

impl LinearServer {
    /// `mats`: per matrix its row-major weights and bias (shapes as in `spec`). Refuses a
    /// matrix whose products could exceed `spec.bound` for inputs within `max_input`.
    pub fn new(spec: &LinearSpec, mats: &[(Vec<i64>, Vec<i64>)], max_input: u64) -> Result<Self> {
        let shared = Shared::new(spec)?;
        if mats.len() != spec.shapes.len() {
            return Err(NnError::Input(format!(
                "{} matrices for {} shapes",
                mats.len(),
                spec.shapes.len()
            )));
        }
        let mut ops = Vec::new();
        let outputs = shared
            .plans
            .iter()
            .map(Kernel::output_slots)
            .collect::<std::result::Result<Vec<_>, _>>()?;
        for (i, ((w, b), plan)) in mats.iter().zip(&shared.plans).enumerate() {
            let (rows, cols) = spec.shapes[i];
            if w.len() != rows * cols || b.len() != rows {
                return Err(NnError::Input(format!("matrix {i}: not {rows}x{cols}")));
            }
            for (r, row) in w.chunks(cols).enumerate() {
                let worst: u128 = row.iter().map(|v| v.unsigned_abs() as u128).sum::<u128>()
                    * max_input as u128
                    + b[r].unsigned_abs() as u128;
                if worst > spec.bound {
                    return Err(NnError::Input(format!(
                        "matrix {i} row {r}: products up to {worst} exceed the bound {}",
                        spec.bound
                    )));
                }
            }
            let res = shared.rns.residues(b);
            let mut per = Vec::new();
            for (p, br) in shared.rns.sets().iter().zip(&res) {
                let keys = super::server::no_keys(p)?;
                let ev = HeEvaluator::new(p, &keys);
                per.push((plan.prepare(&ev, w)?, plan.output_layout(br)?));
            }
            ops.push(per);
        }
        Ok(LinearServer {
            shared,
            ops,
            outputs,
        })
    }

    pub fn primes(&self) -> Vec<u64> {
        self.shared.rns.primes()
    }
}

/// Serves one session: keys, then calls until the client says done. Returns the calls served
/// and the weakest flooding exponent reached.
pub fn serve_linear<C: Channel>(ch: &mut C, s: &LinearServer) -> Result<(usize, f64)> {
    ch.set_phase(Phase::Setup);
    accept_hello(ch, &s.shared.id)?;
    let steps = s.shared.steps().len();
    let mut keys = Vec::new();
    for p in s.shared.rns.sets() {
        let pk = PublicKey::from_bytes(p, &ch.recv_frame_limited(public_key_limit(p))?)?;
        let gk = GaloisKeys::from_bytes(p, &recv_galois(ch, p, steps)?)?;
        keys.push((pk, gk));
    }
    ch.set_phase(Phase::Online);
    let (mut calls, mut stat) = (0usize, f64::INFINITY);
    loop {
        let f = ch.recv_frame_limited(5)?;
        let op = match f.as_slice() {
            [DONE] => return Ok((calls, stat)),
            [CALL, a, b, c, d] => u32::from_le_bytes([*a, *b, *c, *d]) as usize,
            _ => return Err(NnError::Malformed("choco linear: bad call frame".into())),
        };
        let plan = s
            .shared
            .plans
            .get(op)
            .ok_or_else(|| NnError::Malformed(format!("choco linear: no matrix {op}")))?;
        for (i, (p, (pk, gk))) in s.shared.rns.sets().iter().zip(&keys).enumerate() {
            let cts = (0..plan.in_cts())
                .map(|_| {
                    let f = ch.recv_frame_limited(upload_limit(p))?;
                    Ok(SeededCiphertext::from_bytes(p, &f)?.expand(p))
                })
                .collect::<Result<Vec<_>>>()?;
            let ev = HeEvaluator::new(p, gk);
            let (w, bias) = &s.ops[op][i];
            let res = plan.eval(&ev, w, &cts)?;
            for ((ct, b), outs) in res.iter().zip(bias).zip(&s.outputs[op]) {
                let ct = choco::add_plain_hiding(p, ct, b, outs)?;
                let (r, st) = choco::finish(p, pk, &ct, choco::FLOOD_STAT_BITS)?;
                stat = stat.min(st);
                ch.send_frame_vec(r.to_bytes())?;
            }
        }
        ch.flush()?;
        calls += 1;
    }
}

/// Runs `f` on a pool of `threads` threads (the client's work; 1 models a small device).
pub fn on_threads<T: Send>(threads: usize, f: impl FnOnce() -> Result<T> + Send) -> Result<T> {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads.max(1))
        .build()
        .map_err(|e| NnError::Protocol(format!("client thread pool: {e}")))?
        .install(f)
}

/// The client's side: its keys and the cost so far.
pub struct LinearClient<'a, C: Channel> {
    ch: &'a mut C,
    shared: Shared,
    keys: Vec<SecretKey>,
    pub cost: ClientCost,
}

impl<'a, C: Channel> LinearClient<'a, C> {
    /// Generates keys and opens the session over `ch`.
    pub fn connect(ch: &'a mut C, spec: &LinearSpec) -> Result<Self> {
        let shared = Shared::new(spec)?;
        let mut cost = ClientCost::default();
        ch.set_phase(Phase::Setup);
        let t0 = Instant::now();
        let steps = shared.steps();
        let (keys, upload) = make_keys(shared.rns.sets(), &steps);
        let frames = upload.per_prime;
        cost.keygen_s = t0.elapsed().as_secs_f64();
        ch.send_frame(&hello(&shared.id))?;
        ch.flush()?;
        read_accept(ch)?;
        for ((pk, gk), p) in frames.into_iter().zip(shared.rns.sets()) {
            cost.setup_bytes += pk.len() as u64;
            ch.send_frame_vec(pk)?;
            cost.setup_bytes += send_galois(ch, p, gk)?;
        }
        ch.flush()?;
        ch.set_phase(Phase::Online);
        Ok(LinearClient {
            ch,
            shared,
            keys,
            cost,
        })
    }

    /// `W_op·x + b_op`, exactly.
    pub fn apply(&mut self, op: usize, x: &[i64]) -> Result<Vec<i128>> {
        let plan = self
            .shared
            .plans
            .get(op)
            .ok_or_else(|| NnError::Input(format!("no matrix {op}")))?;
        let t = Instant::now();
        let res = self.shared.rns.residues(x);
        let mut frames = Vec::new();
        for (sk, xr) in self.keys.iter().zip(&res) {
            for v in plan.pack_input(xr)? {
                frames.push(sk.encrypt_seeded(&v)?.to_bytes());
            }
        }
        self.cost.encrypt_s += t.elapsed().as_secs_f64();
        let mut call = vec![CALL];
        call.extend_from_slice(&(op as u32).to_le_bytes());
        self.ch.send_frame(&call)?;
        for f in frames {
            self.cost.bytes_up += f.len() as u64;
            self.cost.ciphertexts_up += 1;
            self.ch.send_frame_vec(f)?;
        }
        self.ch.flush()?;
        let mut rows = Vec::new();
        for (sk, p) in self.keys.iter().zip(self.shared.rns.sets()) {
            let mut dec = Vec::new();
            for _ in 0..plan.out_cts() {
                let f = self.ch.recv_frame_limited(response_limit(p))?;
                let t = Instant::now();
                self.cost.bytes_down += f.len() as u64;
                self.cost.ciphertexts_down += 1;
                dec.push(decrypt(sk, p, &f)?);
                self.cost.decrypt_s += t.elapsed().as_secs_f64();
            }
            let t = Instant::now();
            rows.push(plan.extract(&dec)?);
            self.cost.decrypt_s += t.elapsed().as_secs_f64();
        }
        let t = Instant::now();
        let y = self.shared.rns.reconstruct(&rows)?;
        self.cost.decrypt_s += t.elapsed().as_secs_f64();
        Ok(y)
    }

    /// Ends the session.
    pub fn done(self) -> Result<ClientCost> {
        self.ch.send_frame(&[DONE])?;
        self.ch.flush()?;
        Ok(self.cost)
    }
}

fn decrypt(sk: &SecretKey, p: &Params, f: &[u8]) -> Result<Vec<u64>> {
    let r = Response::from_bytes(p, f)?;
    let want = choco::response_log_q(p);
    if r.log_q() != want {
        return Err(NnError::Malformed(format!(
            "choco: response modulus 2^{}, expected 2^{want}",
            r.log_q()
        )));
    }
    Ok(sk.decrypt_response(&r)?)
}
