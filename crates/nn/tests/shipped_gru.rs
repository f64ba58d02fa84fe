//! The shipped GRU classifiers run securely: on the first items of each model's `samples.jsonl`,
//! the secure logits equal the plaintext fixed-point reference's (with the circuits'
//! activations, what the secure run is defined to compute) bit for bit, for the SpamAssassin
//! ReLU-GRU under CG-2 (two e-mails) and the IMDB tanh-GRU under CryptoGRU's Baseline variant
//! (one review: its 20-bit tanh circuits make a session ≈ 0.8 GB of garbled tables) and under
//! `cg2-tanh`, the same tanh model on CG-2's 8-bit activations (two reviews).
#![allow(clippy::unwrap_used, reason = "tests: a panic is the failure report")]
use secinfer_net::simulate;
use secinfer_nn::info::ModelInfo;
use secinfer_nn::layers::gru::{ClientOptions, ServerPolicy, Variant};
use secinfer_nn::runtime::{ClientInput, ClientSession, RunOptions, ServerOptions, ServerSession};
use secinfer_nn::{argmax, CircuitActivations, Model, QuantizedModel, Reference};
use std::path::PathBuf;

fn model_dir(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../models")
        .join(name)
}

/// The first `n` sample texts of a shipped model.
fn sample_texts(name: &str, n: usize) -> Vec<String> {
    std::fs::read_to_string(model_dir(name).join("samples.jsonl"))
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .take(n)
        .map(|l| {
            let j: serde_json::Value = serde_json::from_str(l).unwrap();
            j["text"].as_str().unwrap().to_string()
        })
        .collect()
}

fn secure_equals_reference(name: &str, variant: Variant, items: usize) {
    let dir = model_dir(name);
    let model = Model::load(&dir).unwrap();
    let opts = ServerOptions {
        variant,
        ..ServerOptions::default()
    };
    let server = ServerSession::prepare(&model, &opts).unwrap();
    let client = ClientSession::prepare(&ModelInfo::load(&dir).unwrap(), &opts).unwrap();
    let q = QuantizedModel::new(&model, server.gru().unwrap().fp).unwrap();
    let vocab = model.vocab.as_ref().unwrap();
    let run = RunOptions {
        protocol: ClientOptions {
            reveal_logits: true,
            ..ClientOptions::default()
        },
        ..RunOptions::default()
    };
    let texts = sample_texts(name, items);
    assert_eq!(texts.len(), items, "{name}: samples.jsonl is too short");
    for text in &texts {
        let toks = vocab.encode(text);
        let want = Reference::new(&q, CircuitActivations::default()).classify(&toks);
        let r = simulate(
            |ch| client.run(ch, ClientInput::Tokens(&toks), &run, &mut |_, _, _| {}),
            |ch| server.run(ch, ServerPolicy { allow_logits: true }),
        );
        let out = r.client.output.unwrap();
        r.server.output.unwrap();
        assert_eq!(
            out.logits.as_ref(),
            Some(&want),
            "{name} {variant:?}: {text:?}"
        );
        assert_eq!(out.class, argmax(&want));
    }
}

#[test]
fn spam_relu_gru_cg2_equals_the_reference() {
    secure_equals_reference("spam-relu-gru", Variant::Cg2, 2);
}

#[test]
fn imdb_tanh_gru_baseline_equals_the_reference() {
    secure_equals_reference("imdb-tanh-gru", Variant::Baseline, 1);
}

#[test]
fn imdb_tanh_gru_cg2_tanh_equals_the_reference() {
    secure_equals_reference("imdb-tanh-gru", Variant::Cg2Tanh, 2);
}
