//! Model format version 2: graphs of typed layers, their validation (errors name the layer),
//! and the graph reference against independent per-layer computations and against CryptoGRU's
//! step-form reference.
#![allow(clippy::unwrap_used, reason = "tests: a panic is the failure report")]
mod common;
use common::Rng;
use secinfer_nn::model::weights::Tensor;
use secinfer_nn::{
    argmax, CircuitActivations, ExactActivations, GraphReference, Input, Model, ModelConfig,
    QuantizedGraph, QuantizedModel, Reference, Shape, Tensors,
};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::path::PathBuf;

fn model_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../models/imdb-relu-gru")
}

fn v2(layers: Value, labels: usize) -> Value {
    json!({
        "format": "secinfer-model", "version": 2, "task": "classification",
        "layers": layers,
        "fixed_point": {"bits": 20, "frac_bits": 12},
        "labels": (0..labels).map(|i| format!("c{i}")).collect::<Vec<_>>(),
    })
}

fn parse_err(v: &Value) -> String {
    match ModelConfig::parse(&v.to_string()) {
        Err(e) => e.to_string(),
        Ok(_) => panic!("expected an error for {v}"),
    }
}

/// A model of `config` with uniform random weights in ±`bound` (running variances positive).
fn random_model(config: ModelConfig, bound: f32, seed: u64) -> Model {
    let mut rng = Rng(seed);
    let map: HashMap<String, Tensor> = config
        .graph
        .tensors()
        .into_iter()
        .map(|(name, shape)| {
            let n = shape.iter().product();
            let mut data = rng.uniform(n, bound);
            if name.ends_with("running_var") {
                data.iter_mut().for_each(|v| *v = v.abs() + 0.5);
            }
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

const F: u32 = 12;

fn wrap20(x: i64) -> i64 {
    ((x + (1 << 19)).rem_euclid(1 << 20)) - (1 << 19)
}

/// `wrap(floor(acc / 2^F) + b)`, written with division instead of a shift.
fn requant(acc: i64, b: i64) -> i64 {
    wrap20(acc.div_euclid(1 << F) + b)
}

fn q(t: &Tensor) -> Vec<i64> {
    t.data
        .iter()
        .map(|v| (*v as f64 * 4096.0 + 0.5).floor() as i64)
        .collect()
}

fn random_input(n: usize, seed: u64) -> Vec<i64> {
    let mut rng = Rng(seed);
    (0..n).map(|_| (rng.next() % 8192) as i64 - 4096).collect()
}

#[test]
fn version_1_and_its_version_2_form_load_the_same_graph_and_compute_the_same_logits() {
    let m = Model::load(model_dir()).unwrap();
    assert_eq!(m.config.version, 1);
    let types = m.config.layer_types();
    assert_eq!(types, ["input", "embedding", "gru", "dense", "argmax"]);
    let mut j: Value =
        serde_json::from_str(&std::fs::read_to_string(model_dir().join("model.json")).unwrap())
            .unwrap();
    j["version"] = 2.into();
    j["layers"] = m.config.graph.to_json();
    let c2 = ModelConfig::parse(&j.to_string()).unwrap();
    assert_eq!(c2.graph, m.config.graph);
    assert_eq!(c2.gru().unwrap(), m.config.gru().unwrap());

    // The graph reference and the step-form reference agree on the shipped samples.
    let fp = *m.config.fixed_point_named(Some("fx8")).unwrap();
    let qm = QuantizedModel::new(&m, fp).unwrap();
    let qg = QuantizedGraph::new(&m, fp).unwrap();
    let vocab = m.vocab.as_ref().unwrap();
    for text in [
        "A moving film, beautifully acted.",
        "Dull and far too long.",
    ] {
        let toks = vocab.encode(text);
        let want = Reference::new(&qm, CircuitActivations::default()).classify(&toks);
        let outs = GraphReference::new(&qg, CircuitActivations::default())
            .run(Input::Tokens(&toks))
            .unwrap();
        assert_eq!(outs[3], want, "{text}");
        assert_eq!(outs[4], vec![argmax(&want) as i64]);
    }
}

#[test]
fn mlp_equals_a_layer_by_layer_computation() {
    let c = ModelConfig::parse(
        &v2(
            json!([
                {"type": "input", "name": "x", "shape": [20]},
                {"type": "dense", "name": "fc1", "input": 20, "output": 16},
                {"type": "relu", "name": "r1"},
                {"type": "dense", "name": "fc2", "input": 16, "output": 3},
                {"type": "argmax", "name": "out"}
            ]),
            3,
        )
        .to_string(),
    )
    .unwrap();
    let m = random_model(c, 0.5, 1);
    let qg = QuantizedGraph::new(&m, m.config.fixed_point).unwrap();
    for seed in 0..5 {
        let x = random_input(20, 100 + seed);
        let outs = GraphReference::new(&qg, ExactActivations)
            .run(Input::Fixed(&x))
            .unwrap();
        let dense = |x: &[i64], name: &str| -> Vec<i64> {
            let w = q(m.tensors.get(name, "weight").unwrap());
            let b = q(m.tensors.get(name, "bias").unwrap());
            b.iter()
                .enumerate()
                .map(|(i, bi)| {
                    let acc: i64 = (0..x.len()).map(|j| w[i * x.len() + j] * x[j]).sum();
                    requant(acc, *bi)
                })
                .collect()
        };
        let h1: Vec<i64> = dense(&x, "fc1").into_iter().map(|v| v.max(0)).collect();
        let y = dense(&h1, "fc2");
        assert_eq!(outs[2], h1);
        assert_eq!(outs[3], y);
        assert_eq!(outs[4], vec![argmax(&y) as i64]);
    }
}

/// conv2d with stride 2 and padding 1, then maxpool, avgpool, batchnorm, a residual add,
/// flatten and dense, each checked against a direct computation on a zero-padded copy.
#[test]
fn cnn_layers_equal_direct_computations() {
    let c = ModelConfig::parse(
        &v2(
            json!([
                {"type": "input", "name": "img", "shape": [2, 9, 9]},
                {"type": "conv2d", "name": "conv", "in_channels": 2, "out_channels": 3,
                 "kernel": 3, "stride": 2, "padding": 1},
                {"type": "batchnorm", "name": "bn", "channels": 3},
                {"type": "relu", "name": "relu"},
                {"type": "maxpool2d", "name": "mp", "kernel": 2, "stride": 1},
                {"type": "add", "name": "res", "other": "mp"},
                {"type": "avgpool2d", "name": "ap", "kernel": 2},
                {"type": "flatten", "name": "flat"},
                {"type": "dense", "name": "fc", "input": 12, "output": 4}
            ]),
            4,
        )
        .to_string(),
    )
    .unwrap();
    let shapes: Vec<Shape> = c.graph.layers.iter().map(|l| l.output).collect();
    assert_eq!(shapes[1], Shape::Image { c: 3, h: 5, w: 5 });
    assert_eq!(shapes[4], Shape::Image { c: 3, h: 4, w: 4 });
    assert_eq!(shapes[6], Shape::Image { c: 3, h: 2, w: 2 });
    assert_eq!(shapes[7], Shape::Vector(12));
    let m = random_model(c, 0.5, 7);
    let qg = QuantizedGraph::new(&m, m.config.fixed_point).unwrap();
    let x = random_input(2 * 81, 9);
    let outs = GraphReference::new(&qg, ExactActivations)
        .run(Input::Fixed(&x))
        .unwrap();

    // conv: pad to 11 × 11, then slide.
    let w = q(m.tensors.get("conv", "weight").unwrap());
    let b = q(m.tensors.get("conv", "bias").unwrap());
    let mut padded = vec![0i64; 2 * 11 * 11];
    for ci in 0..2 {
        for y in 0..9 {
            for xx in 0..9 {
                padded[(ci * 11 + y + 1) * 11 + xx + 1] = x[(ci * 9 + y) * 9 + xx];
            }
        }
    }
    let mut conv = Vec::new();
    for o in 0..3 {
        for p in 0..5 {
            for r in 0..5 {
                let mut acc = 0;
                for ci in 0..2 {
                    for u in 0..3 {
                        for v in 0..3 {
                            acc += w[((o * 2 + ci) * 3 + u) * 3 + v]
                                * padded[(ci * 11 + 2 * p + u) * 11 + 2 * r + v];
                        }
                    }
                }
                conv.push(requant(acc, b[o]));
            }
        }
    }
    assert_eq!(outs[1], conv);

    // batchnorm folded to scale and shift per channel.
    let t = |s: &str| m.tensors.get("bn", s).unwrap().data.clone();
    let (g, beta, mu, var) = (t("weight"), t("bias"), t("running_mean"), t("running_var"));
    let quant = |v: f32| (v as f64 * 4096.0 + 0.5).floor() as i64;
    let bn: Vec<i64> = conv
        .iter()
        .enumerate()
        .map(|(k, v)| {
            let ch = k / 25;
            let s = g[ch] / (var[ch] + 1e-5).sqrt();
            requant(v * quant(s), quant(beta[ch] - mu[ch] * s))
        })
        .collect();
    assert_eq!(outs[2], bn);
    let relu: Vec<i64> = bn.iter().map(|v| (*v).max(0)).collect();
    assert_eq!(outs[3], relu);
    let mut mp = Vec::new();
    for ch in 0..3 {
        for p in 0..4 {
            for r in 0..4 {
                let at = |dy: usize, dx: usize| relu[ch * 25 + (p + dy) * 5 + r + dx];
                mp.push(at(0, 0).max(at(0, 1)).max(at(1, 0)).max(at(1, 1)));
            }
        }
    }
    assert_eq!(outs[4], mp);
    let res: Vec<i64> = mp.iter().map(|v| wrap20(2 * v)).collect();
    assert_eq!(outs[5], res);
    let quarter = 1024; // quantize(1/4) at F = 12
    let mut ap = Vec::new();
    for ch in 0..3 {
        for p in 0..2 {
            for r in 0..2 {
                let at = |dy: usize, dx: usize| res[ch * 16 + (2 * p + dy) * 4 + 2 * r + dx];
                ap.push(requant(
                    (at(0, 0) + at(0, 1) + at(1, 0) + at(1, 1)) * quarter,
                    0,
                ));
            }
        }
    }
    assert_eq!(outs[6], ap);
    assert_eq!(outs[7], ap);
    assert_eq!(outs[8].len(), 4);
}

#[test]
fn broken_graphs_are_refused_naming_the_layer() {
    let img = json!({"type": "input", "name": "img", "shape": [1, 8, 8]});
    let cases = [
        (
            json!([img, {"type": "conv2d", "name": "c1", "in_channels": 3, "out_channels": 4, "kernel": 3}]),
            "layers[1] (c1): in_channels = 3 but its input has 1 channels",
        ),
        (
            json!([img, {"type": "dense", "name": "fc", "input": 64, "output": 2}]),
            "layers[1] (fc): needs a vector input (add a flatten)",
        ),
        (
            json!([img, {"type": "conv2d", "name": "c1", "in_channels": 1, "out_channels": 1, "kernel": 9}]),
            "layers[1] (c1): kernel [9, 9] is larger than the padded input",
        ),
        (
            json!([img, {"type": "add", "name": "a", "other": "nope"}]),
            "layers[1] (a): other = \"nope\" names no earlier layer",
        ),
        (
            json!([img, {"type": "softmax", "name": "s"}]),
            "layers[1] (s).type \"softmax\" is not a layer kind",
        ),
        (
            json!([{"type": "input", "name": "x", "shape": [4]}, {"type": "argmax", "name": "a"},
                   {"type": "relu", "name": "r"}]),
            "layers[1] (a): argmax must be the last layer",
        ),
        (
            json!([{"type": "relu", "name": "r"}]),
            "layers[0] (r): the first layer must be of type input",
        ),
        (
            json!([img, {"type": "relu", "name": "img"}]),
            "layers[1] (img): the name is used by an earlier layer",
        ),
        (
            json!([img, {"type": "maxpool2d", "name": "mp", "kernel": 0}]),
            "layers[1] (mp).kernel must be positive",
        ),
    ];
    for (layers, want) in cases {
        let e = parse_err(&v2(layers.clone(), 2));
        assert!(e.contains(want), "{layers}: got {e:?}, want {want:?}");
    }
    // The class count must match the labels.
    let e = parse_err(&v2(
        json!([{"type": "input", "name": "x", "shape": [4]},
               {"type": "dense", "name": "fc", "input": 4, "output": 3}]),
        2,
    ));
    assert!(e.contains("2 labels for 3 classes"), "{e}");
}

#[test]
fn weights_are_checked_against_the_graph() {
    let c = ModelConfig::parse(
        &v2(
            json!([{"type": "input", "name": "x", "shape": [4]},
                   {"type": "dense", "name": "fc", "input": 4, "output": 2}]),
            2,
        )
        .to_string(),
    )
    .unwrap();
    let t = |shape: Vec<usize>| Tensor {
        data: vec![0.25; shape.iter().product()],
        shape,
    };
    let ok: HashMap<String, Tensor> = [
        ("fc.weight".to_string(), t(vec![2, 4])),
        ("fc.bias".to_string(), t(vec![2])),
    ]
    .into_iter()
    .collect();
    assert!(Tensors::from_map(ok, &c.graph).is_ok());
    let wrong: HashMap<String, Tensor> = [
        ("fc.weight".to_string(), t(vec![4, 2])),
        ("fc.bias".to_string(), t(vec![2])),
    ]
    .into_iter()
    .collect();
    let e = Tensors::from_map(wrong, &c.graph)
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("fc.weight") && e.contains("shape [4, 2], expected [2, 4]"),
        "{e}"
    );
    let mut nan: HashMap<String, Tensor> = [
        ("fc.weight".to_string(), t(vec![2, 4])),
        ("fc.bias".to_string(), t(vec![2])),
    ]
    .into_iter()
    .collect();
    nan.get_mut("fc.bias").unwrap().data[1] = f32::NAN;
    let e = Tensors::from_map(nan, &c.graph).err().unwrap().to_string();
    assert!(
        e.contains("fc.bias") && e.contains("element 1 is not finite"),
        "{e}"
    );
}
