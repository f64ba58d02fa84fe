//! `secinfer bench she`: SHE (non-interactive TFHE inference) on the digits MLP, SHE's MNIST
//! network or one Penn Treebank ReLU-LSTM step: gate, bootstrap and SHE-operation counts, and
//! (without `--count-only`) the client's key generation, encryption, the server's evaluation
//! and the client's decryption on real 128-bit ciphertexts, each output checked against the
//! plaintext reference.
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::error::Error;
use crate::report::{BenchRecord, Reporter};
use clap::{Args, ValueEnum};
use secinfer_tfhe::arch::{self, LstmCell};
use secinfer_tfhe::cost::{Path, Plan};
use secinfer_tfhe::pbs::generate_pbs_client_keys;
use secinfer_tfhe::{
    decompress, generate_client_keys, model, serialized_bytes, Counter, Encrypted, Network,
    PbsEncrypted, PbsNetwork,
};
use serde_json::json;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Arch {
    /// MLP 64-128-128-10 on scikit-learn's 8×8 digits (trained model from --model).
    DigitsMlp,
    /// SHE's MNIST network C-B-A-P-C-P-F-B-A-F (SHE Table 3): the trained model from --model
    /// (default models/she-mnist), or seeded random power-of-two weights with --random-weights.
    SheMnist,
    /// SHE's Penn Treebank ReLU-LSTM (300 units, SHE Table 7): 25 steps, counted.
    PtbLstmStep,
}

/// How the network is evaluated on ciphertexts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum TfheMode {
    /// tfhe-rs boolean gates, one bootstrap per gate (two per mux).
    Gates,
    /// Programmable bootstrapping on tfhe-rs shortint base-4 digits (lookup tables).
    Pbs,
    /// The cheaper path by the cost model (recorded seconds per gate and per lookup).
    Auto,
}

#[derive(Args, Debug)]
pub struct SheArgs {
    /// The network to count or run (SHE's networks and the digits MLP Concrete ML runs).
    #[arg(long, value_enum, default_value = "digits-mlp")]
    pub arch: Arch,
    /// Model directory (she.json, weights.safetensors, test.safetensors); by default
    /// models/she-digits-mlp for digits-mlp and models/she-mnist for she-mnist.
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// she-mnist with seeded random weights (the unpruned network's cost) instead of a model.
    #[arg(long)]
    pub random_weights: bool,
    /// How the network is evaluated on ciphertexts (gate by gate, or programmable
    /// bootstrapping where this build has it).
    #[arg(long, value_enum, default_value = "auto")]
    pub tfhe_mode: TfheMode,
    /// Count gates, bootstraps and depth without running anything encrypted.
    #[arg(long)]
    pub count_only: bool,
    /// Test samples to run encrypted end to end.
    #[arg(long, default_value_t = 1)]
    pub samples: usize,
    /// Seed of the random weights (she-mnist, ptb-lstm-step) and random inputs.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

const LSTM_UNITS: usize = 300;
const LSTM_STEPS: usize = 25;

fn counts(rec: BenchRecord, c: &Counter) -> BenchRecord {
    rec.field("gates", c.gates())
        .field("pbs", c.pbs())
        .field("depth", c.depth)
        .field(
            "gates_by_kind",
            json!({ "xor": c.xor, "and": c.and, "or": c.or, "mux": c.mux }),
        )
        .field("cc_add", c.cc_add)
        .field("pc_shift", c.pc_shift)
        .field("cc_com", c.cc_com)
        .field("cc_mult", c.cc_mult)
}

pub fn run(a: SheArgs, out: &mut Reporter) -> Result<(), Error> {
    if a.samples == 0 || a.samples > 10_000 {
        return Err(Error::msg("--samples must be in 1..=10000"));
    }
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let base = |name: &str| {
        BenchRecord::local("she", 0.0)
            .param("arch", name)
            .param("tfhe_mode", "gates")
            .param("threads", threads)
            .param(
                "params",
                "tfhe-rs boolean DEFAULT_PARAMETERS (128-bit, p_fail ≤ 2^-64)",
            )
    };
    if a.arch == Arch::PtbLstmStep {
        if !a.count_only {
            return Err(Error::msg(
                "ptb-lstm-step is counted only (--count-only): a 300-unit step is tens of millions of bootstraps",
            ));
        }
        let cell = LstmCell::random(a.seed, LSTM_UNITS, LSTM_UNITS);
        let t = Instant::now();
        let step = cell.count(1);
        let all = cell.count(LSTM_STEPS);
        let rec = counts(base("ptb-lstm-step"), &all)
            .param("units", LSTM_UNITS)
            .param("steps", LSTM_STEPS)
            .param("count_only", true)
            .field("count_s", t.elapsed().as_secs_f64())
            .field("step_gates", step.gates())
            .field("step_pbs", step.pbs())
            .field("accuracy", serde_json::Value::Null);
        out.emit(rec);
        return Ok(());
    }
    let trained = |default: &str| -> Result<(Network, Option<Samples>), Error> {
        let dir = a.model.clone().unwrap_or_else(|| PathBuf::from(default));
        let (net, _) = model::load(&dir)?;
        let s = model::load_samples(&dir.join("test.safetensors"), net.input_len())?;
        Ok((net, Some(s)))
    };
    let (net, samples, name) = match a.arch {
        Arch::DigitsMlp => {
            let (net, s) = trained("models/she-digits-mlp")?;
            (net, s, "digits-mlp")
        }
        _ if a.random_weights => (arch::she_mnist(a.seed)?, None, "she-mnist"),
        _ => {
            let (net, s) = trained("models/she-mnist")?;
            (net, s, "she-mnist")
        }
    };
    let t = Instant::now();
    let c = net.count();
    let count_s = t.elapsed().as_secs_f64();
    let pbs_net = PbsNetwork::new(&net);
    let path = match (a.tfhe_mode, &pbs_net) {
        (TfheMode::Gates, _) => Path::Gates,
        (TfheMode::Pbs, Err(e)) => {
            return Err(Error::msg(format!("--tfhe-mode pbs: {e}")));
        }
        (TfheMode::Pbs, Ok(_)) => Path::Pbs,
        (TfheMode::Auto, Ok(p)) => Plan::new(&net, p).run_path(),
        (TfheMode::Auto, Err(_)) => Path::Gates,
    };
    if let (Path::Pbs, Ok(p)) = (path, pbs_net) {
        return run_pbs(&a, out, &net, &p, samples, name, &c);
    }
    let accuracy = reference_accuracy(&net, &samples)?;
    let rec = counts(base(name), &c)
        .param("count_only", a.count_only)
        .param("input_len", net.input_len())
        .param("input_bits", net.input_bits())
        .param("output_bits", net.output_bits())
        .field("count_s", count_s)
        .field("accuracy", accuracy)
        .field("test_samples", samples.as_ref().map_or(0, |s| s.1.len()));
    if a.count_only {
        out.emit(rec);
        return Ok(());
    }
    let inputs = bench_inputs(&a, &net, &samples);
    let t = Instant::now();
    let (ck, csk) = generate_client_keys();
    let keygen_s = t.elapsed().as_secs_f64();
    // The client uploads the seeded server key once; the server expands it.
    let server_key_bytes = serialized_bytes(&csk)?;
    let t = Instant::now();
    let sk = csk.decompress();
    let expand_s = t.elapsed().as_secs_f64();
    let expanded_bytes = serialized_bytes(&sk)?;
    drop(csk);
    eprintln!(
        "she: keys generated in {keygen_s:.2} s; server key {server_key_bytes} bytes uploaded, \
         expanded by the server in {expand_s:.2} s to {expanded_bytes} bytes"
    );
    let (mut enc_s, mut eval_s, mut dec_s) = (0.0, 0.0, 0.0);
    let (mut upload, mut download, mut right) = (0u64, 0u64, 0usize);
    for (k, x) in inputs.iter().enumerate() {
        let want = net.reference(x)?;
        let t = Instant::now();
        let seeded = net.encrypt_input_compressed(&ck, x)?;
        let e = t.elapsed().as_secs_f64();
        enc_s += e;
        let up = serialized_bytes(&seeded)?;
        upload += up;
        let cts = decompress(&seeded);
        eprintln!(
            "she: sample {k}: {} ciphertexts encrypted in {e:.3} s, {up} bytes",
            cts.len()
        );
        let mut b = Encrypted::new(&sk);
        let progress = b.progress();
        let total = c.pbs();
        let t = Instant::now();
        let outc = with_progress(k, total, progress, || net.evaluate_encrypted(&mut b, &cts))?;
        eval_s += t.elapsed().as_secs_f64();
        download += serialized_bytes(&outc)?;
        let t = Instant::now();
        let got = net.decrypt_output(&ck, &outc)?;
        dec_s += t.elapsed().as_secs_f64();
        right += check_sample(k, &got, &want, &samples)?;
    }
    let tally = Tally {
        keygen_s,
        expand_s,
        server_key_bytes,
        expanded_bytes,
        enc_s,
        eval_s,
        dec_s,
        upload,
        download,
        right,
        samples: inputs.len(),
        bootstraps: c.pbs(),
        labelled: samples.is_some(),
    };
    out.emit(tally.finish(rec));
    Ok(())
}

type Samples = (Vec<Vec<i64>>, Vec<i64>);

/// Totals of an encrypted run (either path), and the record fields they give.
struct Tally {
    keygen_s: f64,
    expand_s: f64,
    server_key_bytes: u64,
    expanded_bytes: u64,
    enc_s: f64,
    eval_s: f64,
    dec_s: f64,
    upload: u64,
    download: u64,
    right: usize,
    samples: usize,
    /// Bootstraps of one sample.
    bootstraps: u64,
    labelled: bool,
}

impl Tally {
    fn finish(&self, mut rec: BenchRecord) -> BenchRecord {
        let n = self.samples.max(1) as f64;
        let per = (self.enc_s + self.eval_s + self.dec_s) / n;
        let per_sample = |v: u64| v / self.samples.max(1) as u64;
        rec.time_s = per;
        rec.phases.insert(
            "setup".into(),
            json!({ "time_s": self.keygen_s + self.expand_s, "bytes": self.server_key_bytes }),
        );
        rec.phases.insert(
            "online".into(),
            json!({ "time_s": per, "bytes": per_sample(self.upload + self.download) }),
        );
        rec.bytes_total = self.server_key_bytes + self.upload + self.download;
        rec.rounds = 1;
        rec = rec
            .param("samples", self.samples)
            .field("keygen_s", self.keygen_s)
            .field("encrypt_s", self.enc_s / n)
            .field("eval_s", self.eval_s / n)
            .field("decrypt_s", self.dec_s / n)
            .field(
                "pbs_per_s",
                self.bootstraps as f64 * n / self.eval_s.max(1e-9),
            )
            .field("server_key_bytes", self.server_key_bytes)
            .field("server_key_expand_s", self.expand_s)
            .field("server_key_expanded_bytes", self.expanded_bytes)
            .field("upload_bytes", per_sample(self.upload))
            .field("download_bytes", per_sample(self.download))
            .field("encrypted_matches_reference", true);
        if self.labelled {
            rec = rec.field("encrypted_accuracy", self.right as f64 / n);
        }
        rec
    }
}

/// Accuracy of the bit-exact reference on the whole test split.
fn reference_accuracy(
    net: &Network,
    samples: &Option<Samples>,
) -> Result<serde_json::Value, Error> {
    Ok(match samples {
        Some((xs, ys)) => {
            let mut right = 0usize;
            for (x, y) in xs.iter().zip(ys) {
                right += usize::from(argmax(&net.reference(x)?) == *y);
            }
            json!(right as f64 / xs.len().max(1) as f64)
        }
        None => serde_json::Value::Null,
    })
}

/// The programmable-bootstrapping path end to end: shortint keys, digit encryption, the
/// server's lookups, decryption, each output checked against the reference.
fn run_pbs(
    a: &SheArgs,
    out: &mut Reporter,
    net: &Network,
    pbs: &PbsNetwork,
    samples: Option<Samples>,
    name: &str,
    gates: &Counter,
) -> Result<(), Error> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let t = Instant::now();
    let pc = pbs.count();
    let count_s = t.elapsed().as_secs_f64();
    let rec = BenchRecord::local("she", 0.0)
        .param("arch", name)
        .param("tfhe_mode", "pbs")
        .param(
            "requested_mode",
            format!("{:?}", a.tfhe_mode).to_lowercase(),
        )
        .param("threads", threads)
        .param(
            "params",
            "tfhe-rs shortint PARAM_MESSAGE_2_CARRY_2_KS_PBS (128-bit, p_fail 2^-129.6)",
        )
        .param("count_only", a.count_only)
        .param("input_len", net.input_len())
        .param("input_digits", pbs.input_digits())
        .param("output_digits", pbs.output_digits())
        .field("pbs", pc.pbs)
        .field("many_lut_pbs", pc.many)
        .field("depth", pc.depth)
        .field("gate_path_bootstraps", gates.pbs())
        .field("gate_path_depth", gates.depth)
        .field("cc_add", gates.cc_add)
        .field("pc_shift", gates.pc_shift)
        .field("cc_com", gates.cc_com)
        .field(
            "plan",
            serde_json::to_value(Plan::new(net, pbs)).unwrap_or_default(),
        )
        .field("count_s", count_s)
        .field("accuracy", reference_accuracy(net, &samples)?)
        .field("test_samples", samples.as_ref().map_or(0, |s| s.1.len()));
    if a.count_only {
        out.emit(rec);
        return Ok(());
    }
    let inputs = bench_inputs(a, net, &samples);
    let t = Instant::now();
    let (ck, csk) = generate_pbs_client_keys();
    let keygen_s = t.elapsed().as_secs_f64();
    let server_key_bytes = serialized_bytes(&csk)?;
    let t = Instant::now();
    let sk = csk.decompress();
    let expand_s = t.elapsed().as_secs_f64();
    let expanded_bytes = serialized_bytes(&sk)?;
    drop(csk);
    eprintln!(
        "she: shortint keys generated in {keygen_s:.2} s; server key {server_key_bytes} bytes \
         uploaded, expanded in {expand_s:.2} s to {expanded_bytes} bytes"
    );
    let (mut enc_s, mut eval_s, mut dec_s) = (0.0, 0.0, 0.0);
    let (mut upload, mut download, mut right) = (0u64, 0u64, 0usize);
    for (k, x) in inputs.iter().enumerate() {
        let want = net.reference(x)?;
        let t = Instant::now();
        let seeded = pbs.encrypt_input_compressed(&ck, x)?;
        enc_s += t.elapsed().as_secs_f64();
        upload += serialized_bytes(&seeded)?;
        let cts: Vec<_> = seeded.iter().map(|c| c.decompress()).collect();
        let mut b = PbsEncrypted::new(&sk)?;
        let progress = b.progress();
        let t = Instant::now();
        let outc = with_progress(k, pc.pbs, progress, || pbs.evaluate_encrypted(&mut b, &cts))?;
        eval_s += t.elapsed().as_secs_f64();
        download += serialized_bytes(&outc)?;
        let t = Instant::now();
        let got = pbs.decrypt_output(&ck, &outc)?;
        dec_s += t.elapsed().as_secs_f64();
        right += check_sample(k, &got, &want, &samples)?;
        eprintln!(
            "she: sample {k}: class {} (reference {})",
            argmax(&got),
            argmax(&want)
        );
    }
    let tally = Tally {
        keygen_s,
        expand_s,
        server_key_bytes,
        expanded_bytes,
        enc_s,
        eval_s,
        dec_s,
        upload,
        download,
        right,
        samples: inputs.len(),
        bootstraps: pc.pbs,
        labelled: samples.is_some(),
    };
    out.emit(tally.finish(rec));
    Ok(())
}

/// The test samples, or deterministic 5-bit inputs for a random-weight network.
fn bench_inputs(a: &SheArgs, net: &Network, samples: &Option<Samples>) -> Vec<Vec<i64>> {
    match samples {
        Some((xs, _)) => xs.iter().take(a.samples).cloned().collect(),
        None => (0..a.samples as u64)
            .map(|i| {
                (0..net.input_len() as u64)
                    .map(|j| ((j * 2654435761 + (a.seed + i) * 97) >> 7) as i64 & 31)
                    .collect()
            })
            .collect(),
    }
}

/// Runs `f` while a thread reports the shared bootstrap counter every 30 s.
fn with_progress<R>(
    k: usize,
    total: u64,
    progress: std::sync::Arc<std::sync::atomic::AtomicU64>,
    f: impl FnOnce() -> R,
) -> R {
    std::thread::scope(|s| {
        let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = std::sync::Arc::clone(&done);
        s.spawn(move || {
            let started = Instant::now();
            let mut last = Instant::now();
            while !flag.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(200));
                if last.elapsed() >= Duration::from_secs(30) {
                    let done = progress.load(Ordering::Relaxed);
                    let rate = done as f64 / started.elapsed().as_secs_f64();
                    eprintln!(
                        "she: sample {k}: {done} of {total} bootstraps ({rate:.1} per second)"
                    );
                    last = Instant::now();
                }
            }
        });
        let r = f();
        done.store(true, Ordering::Relaxed);
        r
    })
}

/// Refuses a sample whose decryption differs from the reference; 1 if a labelled sample's class
/// is right, else 0.
fn check_sample(
    k: usize,
    got: &[i64],
    want: &[i64],
    samples: &Option<Samples>,
) -> Result<usize, Error> {
    if got != want {
        return Err(Error::msg(format!(
            "bench she: sample {k} decrypts to {got:?}, the reference gives {want:?}"
        )));
    }
    Ok(samples
        .as_ref()
        .map_or(0, |(_, ys)| usize::from(argmax(got) == ys[k])))
}

fn argmax(v: &[i64]) -> i64 {
    let mut best = 0;
    for (i, x) in v.iter().enumerate() {
        if *x > v[best] {
            best = i;
        }
    }
    best as i64
}
