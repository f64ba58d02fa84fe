//! The session driver on models read from disk in format version 2: a GRU classifier runs
//! securely and equals the reference; a graph without a protocol is refused naming the layer;
//! a hostile or vanished peer surfaces as a typed error kind.
#![allow(clippy::unwrap_used, reason = "tests: a panic is the failure report")]
mod common;
use secinfer_net::simulate;
use secinfer_nn::info::ModelInfo;
use secinfer_nn::layers::gru::{ServerPolicy, Variant};
use secinfer_nn::runtime::{ClientInput, ClientSession, RunOptions, ServerOptions, ServerSession};
use secinfer_nn::{argmax, CircuitActivations, ErrorKind, Model, QuantizedModel, Reference};
use serde_json::json;
use std::path::{Path, PathBuf};

fn tempdir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("secinfer-driver-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Writes model.json (`layers`), vocab.json and weights drawn from a fixed stream.
fn write_model(
    dir: &Path,
    layers: serde_json::Value,
    tensors: &[(&str, Vec<usize>)],
    extra: serde_json::Value,
) {
    let mut cfg = json!({
        "format": "secinfer-model", "version": 2, "task": "classification",
        "layers": layers,
        "fixed_point": {"bits": 20, "frac_bits": 12},
        "labels": ["no", "yes"],
    });
    for (k, v) in extra.as_object().unwrap() {
        cfg[k] = v.clone();
    }
    std::fs::write(dir.join("model.json"), cfg.to_string()).unwrap();
    let mut state = 0x1234_5678u64;
    let data: Vec<(&str, Vec<usize>, Vec<f32>)> = tensors
        .iter()
        .map(|(name, shape)| {
            let n: usize = shape.iter().product();
            let values = (0..n)
                .map(|_| {
                    state = state
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    ((state >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 1.2
                })
                .collect();
            (*name, shape.clone(), values)
        })
        .collect();
    common::write_weights(dir, &data);
}

#[test]
fn a_version_2_gru_model_runs_through_the_driver_and_equals_the_reference() {
    let dir = tempdir("gru");
    let (v, e, h, t) = (16usize, 6usize, 5usize, 4usize);
    let tokens: Vec<String> = ["<pad>", "<unk>"]
        .iter()
        .map(|s| s.to_string())
        .chain((2..v).map(|i| format!("w{i}")))
        .collect();
    std::fs::write(
        dir.join("vocab.json"),
        json!({"tokenizer": "words-v1", "pad": 0, "unk": 1, "tokens": tokens}).to_string(),
    )
    .unwrap();
    write_model(
        &dir,
        json!([
            {"type": "input", "name": "text", "dtype": "tokens", "shape": [t]},
            {"type": "embedding", "name": "emb", "vocab": v, "dim": e},
            {"type": "gru", "name": "rnn", "input": e, "hidden": h, "activation": "relu"},
            {"type": "dense", "name": "head", "input": h, "output": 2},
            {"type": "argmax", "name": "class"}
        ]),
        &[
            ("emb.weight", vec![v, e]),
            ("rnn.weight_ih", vec![3 * h, e]),
            ("rnn.weight_hh", vec![3 * h, h]),
            ("rnn.bias_ih", vec![3 * h]),
            ("rnn.bias_hh", vec![3 * h]),
            ("head.weight", vec![2, h]),
            ("head.bias", vec![2]),
        ],
        json!({"vocab": {"file": "vocab.json", "max_len": t, "pad": 0, "unk": 1}}),
    );
    let model = Model::load(&dir).unwrap();
    assert_eq!(model.config.version, 2);
    let opts = ServerOptions {
        variant: Variant::Cg2,
        ..ServerOptions::default()
    };
    let server = ServerSession::prepare(&model, &opts).unwrap();
    let client = ClientSession::prepare(&ModelInfo::load(&dir).unwrap(), &opts).unwrap();
    let q = QuantizedModel::new(&model, server.gru().unwrap().fp).unwrap();
    for toks in [vec![2u32, 3, 4, 5], vec![15, 1, 0, 9], vec![7, 7, 7, 7]] {
        let mut want = Reference::new(&q, CircuitActivations::default()).classify(&toks);
        let run = RunOptions {
            protocol: secinfer_nn::layers::gru::ClientOptions {
                reveal_logits: true,
                ..Default::default()
            },
            ..RunOptions::default()
        };
        let r = simulate(
            |ch| client.run(ch, ClientInput::Tokens(&toks), &run, &mut |_, _, _| {}),
            |ch| server.run(ch, ServerPolicy { allow_logits: true }),
        );
        let out = r.client.output.unwrap();
        r.server.output.unwrap();
        assert_eq!(out.class, argmax(&want), "{toks:?}");
        assert_eq!(
            out.logits.as_ref(),
            Some(&std::mem::take(&mut want)),
            "{toks:?}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_graph_without_a_protocol_is_refused_naming_the_layer() {
    let dir = tempdir("mlp");
    write_model(
        &dir,
        json!([
            {"type": "input", "name": "x", "shape": [4]},
            {"type": "dense", "name": "fc1", "input": 4, "output": 2},
            {"type": "relu", "name": "act"}
        ]),
        &[("fc1.weight", vec![2, 4]), ("fc1.bias", vec![2])],
        json!({}),
    );
    let model = Model::load(&dir).unwrap();
    let e = ServerSession::prepare(&model, &ServerOptions::default())
        .err()
        .unwrap();
    assert_eq!(e.kind(), ErrorKind::Unsupported);
    // hegc runs dense networks that end in an argmax; this one ends in a ReLU.
    assert!(e.to_string().contains("layer 2 (act, relu)"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_hostile_or_vanished_peer_is_a_typed_error() {
    let model =
        Model::load(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../models/imdb-relu-gru"))
            .unwrap();
    let server = ServerSession::prepare(&model, &ServerOptions::default()).unwrap();
    // Garbage where the handshake belongs.
    let r = simulate(
        |ch| {
            ch.send_frame(b"\x00\xffnot json").unwrap();
            ch.flush().unwrap();
        },
        |ch| server.run(ch, ServerPolicy { allow_logits: true }),
    );
    let e = r.server.output.err().unwrap();
    assert_eq!(e.kind(), ErrorKind::Malformed, "{e}");
    // A client that hangs up before saying anything.
    let r = simulate(|_ch| {}, |ch| server.run(ch, ServerPolicy::default()));
    let e = r.server.output.err().unwrap();
    assert_eq!(e.kind(), ErrorKind::PeerClosed, "{e}");
}
