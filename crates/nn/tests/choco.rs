//! Family `choco` (CHOCO client-aided HE): every layer's output equals the plaintext
//! fixed-point reference bit for bit (random MLPs and CNNs, the shipped MNIST MLP), what the
//! server returns is re-randomised, and a client with another packing is refused.
#![allow(clippy::unwrap_used, reason = "tests: a panic is the failure report")]
mod common;
use common::Rng;
use secinfer_he::choco::Packing;
use secinfer_net::{mem_pair, simulate, Recording};
use secinfer_nn::layers::choco::{
    client_session, server_session, ChocoClient, ChocoServer, KeyUpload, Results, Upload,
};
use secinfer_nn::model::weights::Tensor;
use secinfer_nn::{
    ErrorKind, ExactActivations, GraphReference, Input, Model, ModelConfig, NnError,
    QuantizedGraph, Tensors,
};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::path::PathBuf;

fn v2(layers: Value, labels: usize) -> ModelConfig {
    v2_format(layers, labels, 20, 12)
}

fn v2_format(layers: Value, labels: usize, bits: u32, frac: u32) -> ModelConfig {
    let j = json!({
        "format": "secinfer-model", "version": 2, "task": "classification",
        "layers": layers,
        "fixed_point": {"bits": bits, "frac_bits": frac},
        "labels": (0..labels).map(|i| format!("c{i}")).collect::<Vec<_>>(),
    });
    ModelConfig::parse(&j.to_string()).unwrap()
}

/// A model of `config` with uniform weights in ±`bound`.
fn random_model(config: ModelConfig, bound: f32, seed: u64) -> Model {
    let mut rng = Rng(seed);
    let map: HashMap<String, Tensor> = config
        .graph
        .tensors()
        .into_iter()
        .map(|(name, shape)| {
            let n = shape.iter().product();
            let data = (0..n)
                .map(|_| ((rng.next() >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * bound)
                .collect();
            (name, Tensor { shape, data })
        })
        .collect();
    let tensors = Tensors::from_map(map, &config.graph).unwrap();
    Model {
        config,
        tensors,
        vocab: None,
    }
}

/// Inputs spread over `±2^(bits−1)` (20 bits: the whole main format).
fn random_input(n: usize, bits: u32, seed: u64) -> Vec<i64> {
    let mut rng = Rng(seed);
    let half = 1i64 << (bits - 1);
    (0..n)
        .map(|_| (rng.next() % (2 * half as u64)) as i64 - half)
        .collect()
}

fn reference(m: &Model, x: &[i64]) -> Vec<Vec<i64>> {
    let q = QuantizedGraph::new(m, m.config.fixed_point).unwrap();
    GraphReference::new(&q, ExactActivations)
        .run(Input::Fixed(x))
        .unwrap()
}

fn run(server: &ChocoServer, client: &ChocoClient, x: &[i64]) -> Vec<Vec<i64>> {
    let r = simulate(
        |ch| client_session(ch, client, x),
        |ch| server_session(ch, server),
    );
    let s = match r.server.output {
        Ok(s) => s,
        Err(e) => panic!("server: {e}; client: {:?}", r.client.output.err()),
    };
    let o = r.client.output.unwrap();
    assert!(
        s.flood_stat_bits >= 40.0,
        "flooding 2^-{}",
        s.flood_stat_bits
    );
    assert!(o.cost.bytes_up > 0 && o.cost.bytes_down > 0);
    o.outputs
}

fn mlp(dims: &[usize]) -> ModelConfig {
    mlp_format(dims, 20, 12)
}

fn mlp_format(dims: &[usize], bits: u32, frac: u32) -> ModelConfig {
    let mut layers =
        vec![json!({"type": "input", "name": "input", "dtype": "fixed", "shape": [dims[0]]})];
    for (i, w) in dims.windows(2).enumerate() {
        layers.push(
            json!({"type": "dense", "name": format!("fc{i}"), "input": w[0], "output": w[1]}),
        );
        if i + 2 < dims.len() {
            layers.push(json!({"type": "relu", "name": format!("relu{i}")}));
        }
    }
    layers.push(json!({"type": "argmax", "name": "class"}));
    v2_format(Value::Array(layers), dims[dims.len() - 1], bits, frac)
}

/// The small-plaintext profile: a 6-bit MLP of fan-in 784 runs on one plaintext prime (one
/// ciphertext up and one down per layer instead of one per prime) and still equals the
/// reference bit for bit at the format's extremes: most weights saturated at ±2^5, inputs over
/// the whole format, activations that wrap.
#[test]
fn narrow_mlp_runs_on_one_prime_bit_for_bit() {
    let m = random_model(mlp_format(&[784, 16, 10], 6, 3), 16.0, 4);
    let server = ChocoServer::new(&m, Packing::Redundant).unwrap();
    let client = ChocoClient::new(&m.config, Packing::Redundant).unwrap();
    assert_eq!(client.primes().len(), 1, "one plaintext prime");
    assert_eq!(server.primes(), client.primes());
    for (bits, seed) in [(6, 5), (4, 6)] {
        let x = random_input(784, bits, seed);
        let r = simulate(
            |ch| client_session(ch, &client, &x),
            |ch| server_session(ch, &server),
        );
        let s = r.server.output.unwrap();
        let o = r.client.output.unwrap();
        assert!(
            s.flood_stat_bits >= 40.0,
            "flooding 2^-{}",
            s.flood_stat_bits
        );
        assert_eq!(o.outputs, reference(&m, &x), "{bits}-bit input");
        assert_eq!((o.cost.ciphertexts_up, o.cost.ciphertexts_down), (2, 2));
    }
}

#[test]
fn random_mlp_equals_reference_bit_for_bit() {
    let m = random_model(mlp(&[300, 40, 10]), 0.5, 1);
    for packing in [Packing::Redundant, Packing::Baseline] {
        let server = ChocoServer::new(&m, packing).unwrap();
        let client = ChocoClient::new(&m.config, packing).unwrap();
        // Full-range 20-bit inputs (accumulators far beyond one 20-bit prime, and wraps of
        // the 20-bit format in the reference), then small ones.
        for (bits, seed) in [(20, 2), (13, 3)] {
            let x = random_input(300, bits, seed);
            assert_eq!(
                run(&server, &client, &x),
                reference(&m, &x),
                "{packing:?}, {bits}-bit input"
            );
        }
    }
}

/// The masked baseline on the widest plaintext prime (a (7, 4) MLP of fan-in 784, whose
/// accumulator bound 784·2^12 + 2^10 ≈ 2^21.6 needs 23 bits), with saturated weights and
/// full-range inputs: one 23-bit prime, three Q primes, flooded to 2^-40, every layer equal to
/// the reference.
#[test]
fn narrow_mlp_baseline_floods_40_bits_bit_for_bit() {
    let m = random_model(mlp_format(&[784, 16, 10], 7, 4), 8.0, 9);
    let server = ChocoServer::new(&m, Packing::Baseline).unwrap();
    let client = ChocoClient::new(&m.config, Packing::Baseline).unwrap();
    assert_eq!(client.primes().len(), 1, "one plaintext prime");
    assert_eq!(client.q_primes(), 3);
    assert_eq!(64 - client.primes()[0].leading_zeros(), 23);
    let x = random_input(784, 7, 10);
    let r = simulate(
        |ch| client_session(ch, &client, &x),
        |ch| server_session(ch, &server),
    );
    let s = r.server.output.unwrap();
    assert!(s.flood_stat_bits >= 40.0, "2^-{}", s.flood_stat_bits);
    assert_eq!(r.client.output.unwrap().outputs, reference(&m, &x));
}

#[test]
fn shipped_mnist_mlp_equals_reference_bit_for_bit() {
    shipped_equals_reference("mnist-mlp");
}

/// The 8-bit MNIST MLP (scripts/choco/quantize_mlp.py) on one plaintext prime: one ciphertext
/// up and one down per layer.
#[test]
fn shipped_mnist_mlp_q8_equals_reference_bit_for_bit() {
    shipped_equals_reference_on_one_prime("mnist-mlp-q8");
}

/// The 7-bit MNIST CNN (scripts/choco/quantize_cnn.py) on one plaintext prime for every
/// layer, the convolutions included.
#[test]
fn shipped_mnist_cnn_q7_equals_reference_bit_for_bit() {
    shipped_equals_reference_on_one_prime("mnist-cnn-q7");
}

fn shipped_equals_reference_on_one_prime(model: &str) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../models")
        .join(model);
    let m = Model::load(&dir).unwrap();
    let client = ChocoClient::new(&m.config, Packing::Redundant).unwrap();
    assert_eq!(client.primes().len(), 1, "one plaintext prime");
    shipped_equals_reference(model);
}

/// The MNIST CNN runs on the windowed conv kernel (its Toeplitz matrices would be 3.4 GiB of
/// plaintexts).
#[test]
fn shipped_mnist_cnn_equals_reference_bit_for_bit() {
    shipped_equals_reference("mnist-cnn");
}

fn shipped_equals_reference(model: &str) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../models")
        .join(model);
    let m = Model::load(&dir).unwrap();
    let q = QuantizedGraph::new(&m, m.config.fixed_point).unwrap();
    let server = ChocoServer::new(&m, Packing::Redundant).unwrap();
    let client = ChocoClient::new(&m.config, Packing::Redundant).unwrap();
    let text = std::fs::read_to_string(dir.join("samples.jsonl")).unwrap();
    for line in text.lines().take(2) {
        let v: Value = serde_json::from_str(line).unwrap();
        let px: Vec<f32> = v["input"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p.as_f64().unwrap() as f32)
            .collect();
        let x = q.quantize_input(&px);
        let want = reference(&m, &x);
        let got = run(&server, &client, &x);
        assert_eq!(got, want);
        let label: i64 = v["label"].as_str().unwrap().parse().unwrap();
        assert_eq!(got.last().unwrap()[0], label, "the model's class");
    }
}

#[test]
fn random_cnn_equals_reference_bit_for_bit() {
    let c = v2(
        json!([
            {"type": "input", "name": "input", "dtype": "fixed", "shape": [2, 10, 10]},
            {"type": "conv2d", "name": "conv1", "in_channels": 2, "out_channels": 3,
             "kernel": [3, 3], "stride": [1, 1], "padding": [1, 1]},
            {"type": "relu", "name": "relu1"},
            {"type": "maxpool2d", "name": "pool1", "kernel": [2, 2], "stride": [2, 2]},
            {"type": "conv2d", "name": "conv2", "in_channels": 3, "out_channels": 4,
             "kernel": [3, 3], "stride": [2, 2], "padding": [0, 0]},
            {"type": "relu", "name": "relu2"},
            {"type": "avgpool2d", "name": "pool2", "kernel": [2, 2], "stride": [2, 2]},
            {"type": "flatten", "name": "flat"},
            {"type": "dense", "name": "fc", "input": 4, "output": 3},
            {"type": "argmax", "name": "class"}
        ]),
        3,
    );
    let m = random_model(c, 0.5, 4);
    let x = random_input(200, 20, 5);
    for packing in [Packing::Redundant, Packing::Baseline] {
        let server = ChocoServer::new(&m, packing).unwrap();
        let client = ChocoClient::new(&m.config, packing).unwrap();
        assert_eq!(run(&server, &client, &x), reference(&m, &x), "{packing:?}");
    }
}

/// Records every frame it receives (the client's view of the server's responses).
#[test]
fn responses_are_rerandomised_and_other_sessions_refused() {
    let m = random_model(mlp(&[64, 8]), 0.5, 6);
    let server = ChocoServer::new(&m, Packing::Redundant).unwrap();
    let client = ChocoClient::new(&m.config, Packing::Redundant).unwrap();
    let x = random_input(64, 16, 7);
    let mut runs = Vec::new();
    for _ in 0..2 {
        let (c, mut s) = mem_pair();
        let mut rc = Recording::new(c);
        let (out, srv) = std::thread::scope(|sc| {
            let h = sc.spawn(|| server_session(&mut s, &server));
            let o = client_session(&mut rc, &client, &x);
            (o, h.join().unwrap())
        });
        srv.unwrap();
        runs.push((out.unwrap().outputs, rc.into_frames()));
    }
    assert_eq!(runs[0].0, runs[1].0, "the same result");
    assert_eq!(runs[0].0, reference(&m, &x));
    // Frame 0 is the accept; the rest are responses: all fresh.
    let (a, b) = (&runs[0].1, &runs[1].1);
    assert_eq!(a.len(), b.len());
    assert!(a.len() > 1);
    for (fa, fb) in a.iter().zip(b).skip(1) {
        assert_ne!(fa, fb, "a response repeated across sessions");
    }
    // The masked baseline spends a multiplicative level per windowed rotation, so it runs on
    // a third Q prime (CHOCO's case for redundancy: the baseline needs larger parameters), and
    // floods to 2^-40 by default like the redundant packing.
    let bs = ChocoServer::new(&m, Packing::Baseline).unwrap();
    let bc = ChocoClient::new(&m.config, Packing::Baseline).unwrap();
    let r = simulate(
        |ch| client_session(ch, &bc, &x),
        |ch| server_session(ch, &bs),
    );
    assert!(r.server.output.unwrap().flood_stat_bits >= 40.0);
    assert_eq!(r.client.output.unwrap().outputs, reference(&m, &x));
    // A client that packs differently is refused by name on both sides.
    let other = ChocoClient::new(&m.config, Packing::Baseline).unwrap();
    let r = simulate(
        |ch| client_session(ch, &other, &x),
        |ch| server_session(ch, &server),
    );
    assert!(matches!(r.client.output, Err(NnError::Refused(_))));
    assert!(matches!(r.server.output, Err(NnError::Refused(_))));
    // Inputs outside the format or of the wrong length never reach the wire.
    assert!(matches!(client.primes().len(), 1..=4));
    let (mut c, _s) = mem_pair();
    assert!(matches!(
        client_session(&mut c, &client, &[0; 3]),
        Err(NnError::Input(_))
    ));
    assert!(matches!(
        client_session(&mut c, &client, &[1 << 20; 64]),
        Err(NnError::Input(_))
    ));
}

/// The session's steps without a channel: the client's and the server's state machines pass
/// their typed messages directly, every layer equals the reference bit for bit, and a message
/// of the wrong shape or out of turn is a `Malformed` error that leaves the step where it was.
#[test]
fn steps_without_a_channel_equal_the_reference_and_refuse_bad_messages() {
    let m = random_model(mlp(&[40, 12, 5]), 0.5, 7);
    let server = ChocoServer::new(&m, Packing::Redundant).unwrap();
    let client = ChocoClient::new(&m.config, Packing::Redundant).unwrap();
    let malformed = |e: NnError| assert_eq!(e.kind(), ErrorKind::Malformed, "{e}");
    let x = random_input(40, 20, 8);
    let (mut c, keys) = client.start(&x).unwrap();
    malformed(
        server
            .start(&KeyUpload { per_prime: vec![] })
            .err()
            .unwrap(),
    );
    let mut s = server.start(&keys).unwrap();
    malformed(c.absorb(&Results { per_prime: vec![] }).err().unwrap());
    let mut answered = 0;
    while let Some(up) = c.next_upload().unwrap() {
        assert_eq!(s.expects(), up.per_prime.first().map(Vec::len));
        let mut short = Upload {
            per_prime: up.per_prime.clone(),
        };
        short.per_prime[0].pop();
        malformed(s.answer(&short).err().unwrap());
        let r = s.answer(&up).unwrap();
        malformed(
            c.absorb(&Results {
                per_prime: vec![vec![]; r.per_prime.len()],
            })
            .err()
            .unwrap(),
        );
        c.absorb(&r).unwrap();
        answered += 1;
    }
    assert_eq!(answered, 2, "two dense layers");
    assert_eq!(s.expects(), None);
    malformed(s.answer(&Upload { per_prime: vec![] }).err().unwrap());
    assert!(s.finish().unwrap().flood_stat_bits >= 40.0);
    assert_eq!(c.finish().outputs, reference(&m, &x));
}
