//! Family ss on the shipped FastGRNN (models/mnist-fastgrnn): the parameters it serves compute
//! the graph reference's dense logits bit for bit; a served session (request, answer, run) gives
//! the reference's class on two shipped samples with OPAF's and SIRNN's math; graphs family ss
//! cannot run are refused by name.
#![allow(clippy::unwrap_used, reason = "tests: a panic is the failure report")]
use secinfer_net::simulate;
use secinfer_nn::layers::ss::graph::client_sequence;
use secinfer_nn::layers::ss::{
    client_session, params_of, server_session, shape_of, Impl, Products, SsRequest, SsServer,
};
use secinfer_nn::{
    argmax, ErrorKind, ExactActivations, GraphReference, Input, Model, ModelConfig, QuantizedGraph,
};
use secinfer_ss::CotSource;
use std::path::PathBuf;

fn model_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../models/mnist-fastgrnn")
}

/// The first `n` shipped samples in the main format, with their labels.
fn samples(m: &Model, n: usize) -> Vec<(Vec<i64>, String)> {
    let main = m.config.fixed_point.main;
    std::fs::read_to_string(model_dir().join("samples.jsonl"))
        .unwrap()
        .lines()
        .take(n)
        .map(|l| {
            let j: serde_json::Value = serde_json::from_str(l).unwrap();
            let x = j["input"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| main.quantize(v.as_f64().unwrap()))
                .collect();
            (x, j["label"].as_str().unwrap().to_string())
        })
        .collect()
}

/// The graph reference's outputs (input, cell, dense, argmax) on `x`.
fn reference(m: &Model, x: &[i64]) -> Vec<Vec<i64>> {
    let q = QuantizedGraph::new(m, m.config.fixed_point).unwrap();
    GraphReference::new(&q, ExactActivations)
        .run(Input::Fixed(x))
        .unwrap()
}

#[test]
fn served_parameters_compute_the_graph_dense_logits() {
    let m = Model::load(model_dir()).unwrap();
    let (shape, p) = params_of(&m).unwrap();
    assert_eq!((shape.steps, shape.input, shape.classes), (28, 28, 10));
    for (x, _) in samples(&m, 4) {
        let want = reference(&m, &x);
        let (h, logits) = p.run(&client_sequence(&x, shape.head)).unwrap();
        assert_eq!(h, want[1], "last state");
        assert_eq!(logits, want[2], "dense logits");
        assert_eq!(argmax(&logits) as i64, want[3][0]);
    }
}

#[test]
fn served_sessions_give_the_reference_class() {
    let m = Model::load(model_dir()).unwrap();
    let server = SsServer::new(&m, true).unwrap();
    let shape = *server.shape();
    let main = m.config.fixed_point.main;
    let runs = [
        (Impl::Opaf, Products::He),
        (Impl::Sirnn, Products::Ot),
        (Impl::Opaf, Products::Ot),
        (Impl::Sirnn, Products::He),
    ];
    for ((x, label), (math, products)) in samples(&m, 4).into_iter().zip(runs) {
        let want = reference(&m, &x);
        let req = SsRequest {
            math,
            source: CotSource::SoftSpoken { k: 5 },
            products,
            logits: true,
        };
        let (srv, xr) = (&server, &x);
        let r = simulate(
            move |ch| client_session(ch, &shape, &req, xr, main).unwrap(),
            move |ch| server_session(ch, srv).unwrap(),
        );
        let (c, s) = (r.client.output, r.server.output);
        assert_eq!(
            c.class.map(|k| k as i64),
            Some(want[3][0]),
            "{math:?} {products:?}"
        );
        assert_eq!(c.class.map(|k| k.to_string()), Some(label));
        assert!(s.run.class.is_none() && s.run.logits.is_none());
        // Logits within 2^-4 of the reference's: σ's and tanh's ULPs carried over 28 steps.
        let gap = c
            .logits
            .unwrap()
            .iter()
            .zip(&want[2])
            .map(|(g, w)| (g - w).abs())
            .max()
            .unwrap();
        assert!(gap <= 32, "{math:?} {products:?}: logit gap {gap}");
    }
}

#[test]
fn graphs_family_ss_cannot_run_are_refused() {
    let text = std::fs::read_to_string(model_dir().join("model.json")).unwrap();
    let base: serde_json::Value = serde_json::from_str(&text).unwrap();
    let parse = |v: &serde_json::Value| ModelConfig::parse(&v.to_string()).unwrap();
    assert!(shape_of(&parse(&base)).is_ok());
    let mut narrow = base.clone();
    narrow["fixed_point"] = serde_json::json!({"bits": 16, "frac_bits": 9});
    let mut other_scale = base.clone();
    other_scale["fixed_point"] = serde_json::json!({"bits": 20, "frac_bits": 12});
    let mut relu = base.clone();
    relu["layers"]
        .as_array_mut()
        .unwrap()
        .insert(2, serde_json::json!({"type": "relu", "name": "relu1"}));
    for v in [narrow, other_scale, relu] {
        let e = shape_of(&parse(&v)).err().unwrap();
        assert_eq!(e.kind(), ErrorKind::Unsupported, "{e}");
    }
}
