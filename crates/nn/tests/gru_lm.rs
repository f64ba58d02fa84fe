//! CryptoGRU's next-word prediction on small random language models (format version 1, task
//! `language-model`): the client learns the indices of the k largest next-word logits from the
//! garbled top-k, and they equal the plaintext fixed-point reference's top-k (largest first,
//! lowest index first among equal logits); a request for more than the protocol allows is a
//! typed input error before anything is sent. The secure log-probability of a word the client
//! names equals the fixed-point reference's bit for bit, within `LOG2_BOUND` of the exact
//! log-softmax, and needs a server that allows logits.
#![allow(clippy::unwrap_used, reason = "tests: a panic is the failure report")]
mod common;
use secinfer_net::simulate;
use secinfer_nn::info::ModelInfo;
use secinfer_nn::layers::gru::circuits::{CircuitCache, StepLayout};
use secinfer_nn::layers::gru::logprob::{log2_prob_exact, log2_prob_fixed, LOG2_BOUND, LOG_FRAC};
use secinfer_nn::layers::gru::{top_k, ClientOptions, ServerPolicy, Variant, MAX_TOP_K};
use secinfer_nn::runtime::{
    ClientInput, ClientSession, Outcome, RunOptions, ServerOptions, ServerSession,
};
use secinfer_nn::{CircuitActivations, ErrorKind, Model, QuantizedModel, Reference, Result};
use serde_json::json;
use std::path::{Path, PathBuf};

const V: usize = 40;
const E: usize = 6;
const H: usize = 5;
const T: usize = 4;

fn tempdir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("secinfer-gru-lm-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Writes a V-word GRU language model: weights from a fixed stream, except the output layer
/// when `fc` gives its (weight, bias).
fn write_lm(dir: &Path, fc: Option<(Vec<f32>, Vec<f32>)>) {
    let tokens: Vec<String> = ["<pad>", "<unk>"]
        .iter()
        .map(|s| s.to_string())
        .chain((2..V).map(|i| format!("w{i}")))
        .collect();
    std::fs::write(
        dir.join("vocab.json"),
        json!({"tokenizer": "words-v1", "pad": 0, "unk": 1, "tokens": tokens}).to_string(),
    )
    .unwrap();
    let cfg = json!({
        "format": "secinfer-model", "version": 1, "task": "language-model",
        "layers": [
            {"type": "embedding", "name": "embed", "vocab": V, "dim": E},
            {"type": "gru", "name": "gru", "input": E, "hidden": H, "activation": "relu"},
            {"type": "dense", "name": "fc", "input": H, "output": V}
        ],
        "fixed_point": {"bits": 20, "frac_bits": 12},
        "vocab": {"file": "vocab.json", "max_len": T, "pad": 0, "unk": 1},
    });
    std::fs::write(dir.join("model.json"), cfg.to_string()).unwrap();
    let mut state = 0x5eed_1a46_0000_0001u64;
    let mut draw = |n: usize| -> Vec<f32> {
        (0..n)
            .map(|_| {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((state >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 1.6
            })
            .collect()
    };
    let mut tensors: Vec<(&str, Vec<usize>, Vec<f32>)> = vec![
        ("embed.weight", vec![V, E], draw(V * E)),
        ("gru.weight_ih", vec![3 * H, E], draw(3 * H * E)),
        ("gru.weight_hh", vec![3 * H, H], draw(3 * H * H)),
        ("gru.bias_ih", vec![3 * H], draw(3 * H)),
        ("gru.bias_hh", vec![3 * H], draw(3 * H)),
    ];
    let (w, b) = fc.unwrap_or_else(|| (draw(V * H), draw(V)));
    tensors.push(("fc.weight", vec![V, H], w));
    tensors.push(("fc.bias", vec![V], b));
    common::write_weights(dir, &tensors);
}

struct Lm {
    server: ServerSession,
    client: ClientSession,
    q: QuantizedModel,
}

impl Lm {
    fn q_fp(&self) -> secinfer_nn::FixedPointConfig {
        self.server.gru().unwrap().fp
    }
}

fn load(dir: &Path) -> Lm {
    let model = Model::load(dir).unwrap();
    let opts = ServerOptions {
        variant: Variant::Cg2,
        ..ServerOptions::default()
    };
    let server = ServerSession::prepare(&model, &opts).unwrap();
    let client = ClientSession::prepare(&ModelInfo::load(dir).unwrap(), &opts).unwrap();
    let q = QuantizedModel::new(&model, server.gru().unwrap().fp).unwrap();
    Lm { server, client, q }
}

fn secure_top(lm: &Lm, toks: &[u32], k: usize) -> Result<Outcome> {
    let opts = ClientOptions {
        top_k: k,
        ..ClientOptions::default()
    };
    secure_run(lm, toks, opts, ServerPolicy::default())
}

fn secure_run(lm: &Lm, toks: &[u32], opts: ClientOptions, policy: ServerPolicy) -> Result<Outcome> {
    let run = RunOptions {
        protocol: opts,
        ..RunOptions::default()
    };
    let r = simulate(
        |ch| {
            lm.client
                .run(ch, ClientInput::Tokens(toks), &run, &mut |_, _, _| {})
        },
        |ch| lm.server.run(ch, policy),
    );
    let out = r.client.output?;
    r.server.output?;
    Ok(out)
}

#[test]
fn secure_top_k_next_words_equal_the_references() {
    let dir = tempdir("random");
    write_lm(&dir, None);
    let lm = load(&dir);
    for (toks, k) in [
        (vec![2u32, 3, 4, 5], 3usize),
        (vec![0, 0, 17, 9], 5),
        (vec![39, 1, 12, 12], 1),
    ] {
        let mut r = Reference::new(&lm.q, CircuitActivations::default());
        let logits = r.classify(&toks);
        // The next-word logits are the language model's last step.
        let per_step = Reference::new(&lm.q, CircuitActivations::default()).language_model(&toks);
        assert_eq!(per_step.last(), Some(&logits));
        let want = top_k(&logits, k);
        assert_eq!(want.len(), k);
        let out = secure_top(&lm, &toks, k).unwrap();
        assert_eq!(out.top, want, "{toks:?} top-{k}");
        assert_eq!(out.class, want[0]);
        assert!(out.logits.is_none());
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Equal logits: the output layer ignores h, so the logits are its bias. The order is by value,
/// then by index, and a taken word never comes back (the circuit's "taken" value is below
/// every logit).
#[test]
fn top_k_orders_ties_by_index_and_never_repeats_a_word() {
    let dir = tempdir("ties");
    let mut bias = vec![0.0f32; V];
    bias[7] = 0.5;
    bias[5] = 0.5;
    bias[3] = 0.25;
    for b in &mut bias[20..] {
        *b = -100.0;
    }
    write_lm(&dir, Some((vec![0.0; V * H], bias)));
    let lm = load(&dir);
    let toks = [4u32, 8, 15, 16];
    let logits = Reference::new(&lm.q, CircuitActivations::default()).classify(&toks);
    let want = top_k(&logits, 6);
    assert_eq!(want, vec![5, 7, 3, 0, 1, 2]);
    assert_eq!(secure_top(&lm, &toks, 6).unwrap().top, want);
    // Past the words with non-minimal logits, the minimal ones in index order.
    let all = top_k(&logits, MAX_TOP_K);
    assert_eq!(&all[..4], &[5, 7, 3, 0]);
    assert_eq!(secure_top(&lm, &toks, MAX_TOP_K).unwrap().top, all);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn more_than_max_top_k_is_an_input_error() {
    let dir = tempdir("limit");
    write_lm(&dir, None);
    let lm = load(&dir);
    let e = secure_top(&lm, &[2, 3, 4, 5], MAX_TOP_K + 1).err().unwrap();
    assert_eq!(e.kind(), ErrorKind::BadInput, "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The client names a word privately and learns log2 p(word) from the garbled log-sum-exp: equal
/// to the integer reference on the reference's logits, within `LOG2_BOUND` bits of the exact
/// log-softmax; no class or index comes with it. A server that refuses logits refuses it, and
/// a word outside the vocabulary is an input error.
#[test]
fn secure_log_probability_equals_the_fixed_point_reference() {
    let dir = tempdir("logprob");
    write_lm(&dir, None);
    let lm = load(&dir);
    let l = StepLayout::new(&lm.q_fp(), &CircuitCache::default()).l;
    let f = lm.q_fp().main.scale as usize;
    let allow = ServerPolicy { allow_logits: true };
    let mut seen = std::collections::HashSet::new();
    for (toks, w) in [
        (vec![2u32, 3, 4, 5], 7usize),
        (vec![0, 0, 17, 9], 0),
        (vec![39, 1, 12, 12], V - 1),
    ] {
        let logits = Reference::new(&lm.q, CircuitActivations::default()).classify(&toks);
        let want = log2_prob_fixed(&logits, l, f, w);
        let opts = ClientOptions {
            log_prob_of: Some(w),
            ..ClientOptions::default()
        };
        let out = secure_run(&lm, &toks, opts, allow).unwrap();
        assert_eq!(out.log2_prob, Some(want), "{toks:?} word {w}");
        assert!(out.top.is_empty() && out.logits.is_none());
        let got = want as f64 / (LOG_FRAC as f64).exp2();
        let exact = log2_prob_exact(&logits, f, w);
        assert!(
            got < 0.0 && (got - exact).abs() <= LOG2_BOUND,
            "{got} vs {exact}"
        );
        seen.insert(want);
    }
    assert_eq!(
        seen.len(),
        3,
        "distinct words give distinct log-probabilities"
    );
    let opts = ClientOptions {
        log_prob_of: Some(3),
        ..ClientOptions::default()
    };
    let e = secure_run(&lm, &[2, 3, 4, 5], opts, ServerPolicy::default())
        .err()
        .unwrap();
    assert_eq!(e.kind(), ErrorKind::Refused, "{e}");
    let opts = ClientOptions {
        log_prob_of: Some(V),
        ..ClientOptions::default()
    };
    let e = secure_run(&lm, &[2, 3, 4, 5], opts, allow).err().unwrap();
    assert_eq!(e.kind(), ErrorKind::BadInput, "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}
