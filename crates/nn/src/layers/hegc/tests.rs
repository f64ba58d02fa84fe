use super::*;
use crate::layers::gru::ServerPolicy;
use crate::model::Model;
use crate::reference::{ExactActivations, GraphReference, Input};
use secinfer_he::kernels::Flood;
use secinfer_net::mem_pair;

/// Runs one secure session on `x` and the reference; returns (secure class, reference class,
/// secure logits, reference logits).
fn run(
    model: &Model,
    x: &[i64],
    kernel: impl Into<KernelChoice>,
    allow_logits: bool,
) -> (usize, usize, Option<Vec<i64>>, Vec<i64>) {
    run_flood(
        model,
        x,
        kernel,
        allow_logits,
        Flood::Statistical(FLOOD_BITS),
    )
}

/// [`run`] with the server's flooding set.
fn run_flood(
    model: &Model,
    x: &[i64],
    kernel: impl Into<KernelChoice>,
    allow_logits: bool,
    flood: Flood,
) -> (usize, usize, Option<Vec<i64>>, Vec<i64>) {
    let kernel = kernel.into();
    let q = QuantizedGraph::new(model, model.config.fixed_point).unwrap();
    let mut sm = HegcServerModel::new(&q, &model.config, kernel).unwrap();
    sm.flood = flood;
    let min_bits = match flood {
        Flood::Statistical(b) => b as f64,
        _ => 30.0,
    };
    let cm = HegcClientModel::new(&model.config, kernel).unwrap();
    let (mut a, mut b) = mem_pair();
    let policy = ServerPolicy { allow_logits };
    let srv = std::thread::spawn(move || server_session(&mut b, &sm, policy));
    let out = client_session(&mut a, &cm, x, true, &mut |_, _, _| {});
    let rep = srv.join().unwrap();
    let out = if allow_logits {
        let rep = rep.unwrap();
        let out = out.unwrap();
        assert!(rep.flood_stat_bits >= min_bits, "{}", rep.flood_stat_bits);
        assert_eq!(rep.layers.len(), cm.shape.ops.len());
        out
    } else {
        let e = out.expect_err("a refused logits request");
        assert_eq!(e.kind(), crate::ErrorKind::Refused);
        assert!(rep.is_err());
        let (mut a, mut b) = mem_pair();
        let mut sm = HegcServerModel::new(&q, &model.config, kernel).unwrap();
        sm.flood = flood;
        let srv = std::thread::spawn(move || server_session(&mut b, &sm, policy));
        let out = client_session(&mut a, &cm, x, false, &mut |_, _, _| {}).unwrap();
        srv.join().unwrap().unwrap();
        out
    };
    let mut r = GraphReference::new(&q, ExactActivations);
    let outs = r.run(Input::Fixed(x)).unwrap();
    let logits = outs[outs.len() - 2].clone();
    let class = outs[outs.len() - 1][0] as usize;
    (out.class, class, out.logits, logits)
}

fn random_input(n: usize, bits: u32, seed: u64) -> Vec<i64> {
    let mut prg = secinfer_ot::Prg::from_seed(secinfer_ot::Block(seed as u128 + 77));
    (0..n)
        .map(|_| (prg.next_block().low_u64() % (1 << (bits - 1))) as i64 - (1 << (bits - 2)))
        .collect()
}

#[test]
fn random_mlp_equals_the_reference_bit_for_bit() {
    let model = random_mlp(&[50, 24, 16, 7], 12, 6, 3).unwrap();
    for (seed, kernel) in [(1, MatVecMethod::Gala), (2, MatVecMethod::Gazelle)] {
        let x = random_input(50, 12, seed);
        let (c, rc, logits, rl) = run(&model, &x, kernel, true);
        assert_eq!(logits.as_deref(), Some(rl.as_slice()), "{kernel:?}");
        assert_eq!(c, rc);
    }
}

#[test]
fn logits_stay_hidden_unless_the_server_allows_them() {
    let model = random_mlp(&[20, 8, 5], 12, 6, 4).unwrap();
    let x = random_input(20, 12, 9);
    let (c, rc, logits, _) = run(&model, &x, MatVecMethod::Gala, false);
    assert_eq!(c, rc);
    assert!(logits.is_none());
}

/// A shipped model, its quantized graph, and its first `n` samples (main-format input, label).
fn shipped(dir: &str, n: usize) -> (Model, QuantizedGraph, Vec<(Vec<i64>, String)>) {
    let model = Model::load(dir).unwrap();
    let q = QuantizedGraph::new(&model, model.config.fixed_point).unwrap();
    let text = std::fs::read_to_string(format!("{dir}/samples.jsonl")).unwrap();
    let samples = text
        .lines()
        .take(n)
        .map(|line| {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            let xf: Vec<f32> = v["input"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_f64().unwrap() as f32)
                .collect();
            (
                q.quantize_input(&xf),
                v["label"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    (model, q, samples)
}

#[test]
fn shipped_mnist_mlp_equals_the_reference() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../models/mnist-mlp");
    let (model, _, samples) = shipped(dir, 2);
    for (x, label) in samples {
        let (c, rc, logits, rl) = run(&model, &x, MatVecMethod::Gala, true);
        assert_eq!(logits.as_deref(), Some(rl.as_slice()));
        assert_eq!(c, rc);
        assert_eq!(c.to_string(), label);
    }
}

#[test]
fn unsupported_layers_and_ranges_are_refused_naming_the_layer() {
    // Too many bits: the accumulator bound exceeds the plaintext modulus.
    let model = random_mlp(&[400, 8, 3], 20, 12, 5).unwrap();
    let q = QuantizedGraph::new(&model, model.config.fixed_point).unwrap();
    let Err(e) = HegcServerModel::new(&q, &model.config, MatVecMethod::Gala) else {
        panic!("a model beyond the plaintext range was accepted");
    };
    assert_eq!(e.kind(), crate::ErrorKind::Unsupported);
    assert!(e.to_string().contains("fc1"), "{e}");
    // A network that does not end in an argmax.
    let json = serde_json::json!({
        "format": "secinfer-model", "version": 2, "task": "classification",
        "layers": [
            {"type": "input", "name": "input", "dtype": "fixed", "shape": [4]},
            {"type": "dense", "name": "fc", "input": 4, "output": 2},
            {"type": "relu", "name": "last"}
        ],
        "fixed_point": {"bits": 12, "frac_bits": 6},
        "labels": ["a", "b"],
    });
    let config = ModelConfig::parse(&json.to_string()).unwrap();
    let e = NetShape::new(&config, MatVecMethod::Gala).expect_err("refused");
    assert!(e.to_string().contains("last"), "{e}");
    // Batch normalisation must be folded at export; the refusal names the layer.
    let json = serde_json::json!({
        "format": "secinfer-model", "version": 2, "task": "classification",
        "layers": [
            {"type": "input", "name": "input", "dtype": "fixed", "shape": [1, 4, 4]},
            {"type": "conv2d", "name": "c1", "in_channels": 1, "out_channels": 2,
             "kernel": [3, 3], "stride": [1, 1], "padding": [1, 1]},
            {"type": "batchnorm", "name": "bn1", "channels": 2},
            {"type": "flatten", "name": "f"},
            {"type": "dense", "name": "fc", "input": 32, "output": 2},
            {"type": "argmax", "name": "class"}
        ],
        "fixed_point": {"bits": 12, "frac_bits": 6},
        "labels": ["a", "b"],
    });
    let config = ModelConfig::parse(&json.to_string()).unwrap();
    let e = NetShape::new(&config, MatVecMethod::Gala).expect_err("refused");
    assert_eq!(e.kind(), crate::ErrorKind::Unsupported);
    assert!(e.to_string().contains("bn1"), "{e}");
}

/// GALA's Table II formulas for one n_o × n_i layer at n slots (one input ciphertext):
/// (GAZELLE (Perm, ScMult, Add), GALA (Perm, ScMult, Add)). Both multiply ⌈n_i·n_o/n⌉
/// diagonals and add them with one Perm each but the first; GAZELLE then rotates and sums
/// the ciphertext over the remaining log2(min(n/n_o, n_i)) levels, GALA on the shares.
fn table_ii(ni: usize, no: usize, n: usize) -> ((u64, u64, u64), (u64, u64, u64)) {
    let d = (ni * no).div_ceil(n) as u64;
    let ras = (n / no).min(ni).ilog2() as u64;
    ((d - 1 + ras, d, d - 1 + ras), (d - 1, d, d - 1))
}

#[test]
fn mlp_counts_against_gala_table_ix() {
    // GALA's Table IX for 784-128-128-10 at 2048 slots: GAZELLE Perm 70, ScMult 56, Add 70;
    // GALA Perm 55, ScMult 56, Add 55. Its Table II formulas on the unpadded layers give the
    // Perm and Add cells exactly, and ScMult 49 + 8 + 1 = 58, not 56: the ScMult cell
    // contradicts the formulas, so the formula's 58 is asserted.
    let mut gz = (0, 0, 0);
    let mut ga = (0, 0, 0);
    for (ni, no) in [(784, 128), (128, 128), (128, 10)] {
        let (a, b) = table_ii(ni, no, 2048);
        gz = (gz.0 + a.0, gz.1 + a.1, gz.2 + a.2);
        ga = (ga.0 + b.0, ga.1 + b.1, ga.2 + b.2);
    }
    assert_eq!(gz, (70, 58, 70));
    assert_eq!(ga, (55, 58, 55));
    // The kernels pad 784 to a power-of-two block of 1024 (rotations within blocks need it):
    // their counts are the same formulas on the padded layer (64 diagonals instead of 49).
    let model = random_mlp(&[784, 128, 128, 10], 12, 5, 1).unwrap();
    let mut want = [(0, 0, 0); 2];
    for (ni, no) in [(1024, 128), (128, 128), (128, 10)] {
        let (a, b) = table_ii(ni, no, 2048);
        want[0] = (want[0].0 + a.0, want[0].1 + a.1, want[0].2 + a.2);
        want[1] = (want[1].0 + b.0, want[1].1 + b.1, want[1].2 + b.2);
    }
    for (k, m) in [MatVecMethod::Gazelle, MatVecMethod::Gala]
        .into_iter()
        .enumerate()
    {
        let shape = NetShape::new(&model.config, m).unwrap();
        let c = op_counts(&shape, m, 2048).unwrap();
        // GAZELLE's hoisted rotations are Perms of Table II (the input's rotations share
        // one decomposition per layer).
        assert_eq!(
            (c.perm + c.hst_perm, c.sc_mult, c.add),
            want[k],
            "{m:?} {c:?}"
        );
    }
    assert_eq!(want, [(85, 73, 85), (70, 73, 70)]);
}

fn conv(name: &str, cin: usize, cout: usize, k: usize, s: usize, p: usize) -> serde_json::Value {
    serde_json::json!({"type": "conv2d", "name": name, "in_channels": cin, "out_channels": cout,
                       "kernel": [k, k], "stride": [s, s], "padding": [p, p]})
}
fn simple(kind: &str, name: &str) -> serde_json::Value {
    serde_json::json!({"type": kind, "name": name})
}
fn pool(kind: &str, name: &str, k: usize, s: usize) -> serde_json::Value {
    serde_json::json!({"type": kind, "name": name, "kernel": [k, k], "stride": [s, s]})
}
fn input(c: usize, h: usize) -> serde_json::Value {
    serde_json::json!({"type": "input", "name": "input", "dtype": "fixed", "shape": [c, h, h]})
}
fn dense(name: &str, i: usize, o: usize) -> serde_json::Value {
    serde_json::json!({"type": "dense", "name": name, "input": i, "output": o})
}

/// conv(pad 1) → relu → maxpool 2 → conv(valid, 4×4 even kernel) → relu → flatten → dense →
/// argmax on 1×10×10.
fn small_cnn(seed: u64) -> Model {
    let layers = vec![
        input(1, 10),
        conv("c1", 1, 4, 3, 1, 1),
        simple("relu", "r1"),
        pool("maxpool2d", "p1", 2, 2),
        conv("c2", 4, 3, 4, 1, 0),
        simple("relu", "r2"),
        simple("flatten", "f"),
        dense("fc", 12, 5),
        simple("argmax", "class"),
    ];
    random_model(layers, 5, 12, 6, seed).unwrap()
}

#[test]
fn random_cnn_equals_the_reference_bit_for_bit() {
    let model = small_cnn(7);
    for (seed, kernel) in [(11, MatVecMethod::Gala), (12, MatVecMethod::Gazelle)] {
        let x = random_input(100, 12, seed);
        let (c, rc, logits, rl) = run(&model, &x, kernel, true);
        assert_eq!(logits.as_deref(), Some(rl.as_slice()), "{kernel:?}");
        assert_eq!(c, rc);
    }
}

/// Stride 2, overlapping max-pool windows, a residual Add and an average pool.
#[test]
fn residual_cnn_with_strides_and_average_pooling_equals_the_reference() {
    let layers = vec![
        input(2, 9),
        conv("c1", 2, 3, 3, 2, 1),
        simple("relu", "r1"),
        conv("c2", 3, 3, 3, 1, 1),
        serde_json::json!({"type": "add", "name": "sum", "other": "r1"}),
        simple("relu", "r2"),
        pool("maxpool2d", "p1", 3, 1),
        pool("avgpool2d", "a1", 2, 1),
        simple("flatten", "f"),
        dense("fc", 12, 4),
        simple("argmax", "class"),
    ];
    let model = random_model(layers, 4, 12, 6, 3).unwrap();
    let shape = NetShape::new(&model.config, MatVecMethod::Gala).unwrap();
    assert!(shape
        .ops
        .iter()
        .any(|o| matches!(o.kind, OpKind::Add { .. })));
    let x = random_input(2 * 81, 12, 5);
    let (c, rc, logits, rl) = run(&model, &x, MatVecMethod::Gala, true);
    assert_eq!(logits.as_deref(), Some(rl.as_slice()));
    assert_eq!(c, rc);
}

#[test]
fn shipped_mnist_cnn_equals_the_reference() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../models/mnist-cnn");
    let (model, _, samples) = shipped(dir, 2);
    // The default: every response flooded to 40 statistical bits (`run` asserts the report).
    for (x, label) in samples {
        let (c, rc, logits, rl) = run(&model, &x, MatVecMethod::Gala, true);
        assert_eq!(logits.as_deref(), Some(rl.as_slice()));
        assert_eq!(c, rc);
        assert_eq!(c.to_string(), label);
    }
}

/// The input range is part of the bound: without it, the shipped MLP's first layer could
/// overflow t ≈ 2^23 and the server refuses it, naming the layer; a value outside the range
/// is clamped by both the secure run and the reference.
#[test]
fn the_input_range_bounds_the_first_layer_and_clamps_the_input() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../models/mnist-mlp");
    let (model, _, samples) = shipped(dir, 1);
    let mut free = Model::load(dir).unwrap();
    if let LayerKind::Input { range, .. } = &mut free.config.graph.layers[0].kind {
        *range = None;
    }
    let q = QuantizedGraph::new(&free, free.config.fixed_point).unwrap();
    let e = HegcServerModel::new(&q, &free.config, MatVecMethod::Gala)
        .err()
        .expect("no range, no bound");
    assert!(e.to_string().contains("fc1"), "{e}");
    let (mut x, _) = samples.into_iter().next().unwrap();
    let main = model.config.fixed_point.main;
    x[200] = main.max_int();
    x[300] = main.min_int();
    let (c, rc, logits, rl) = run(&model, &x, MatVecMethod::Gala, true);
    assert_eq!(logits.as_deref(), Some(rl.as_slice()));
    assert_eq!(c, rc);
    let q = QuantizedGraph::new(&model, model.config.fixed_point).unwrap();
    let outs = GraphReference::new(&q, ExactActivations)
        .run(Input::Fixed(&x))
        .unwrap();
    assert_eq!(outs[0][200], 1 << main.scale);
    assert_eq!(outs[0][300], 0);
}

/// Several images under one set of keys: the keys go up once, and every image's class and
/// logits equal the reference.
#[test]
fn one_session_classifies_many_images_with_one_set_of_keys() {
    let model = small_cnn(9);
    let q = QuantizedGraph::new(&model, model.config.fixed_point).unwrap();
    let sm = HegcServerModel::new(&q, &model.config, MatVecMethod::Gala).unwrap();
    let cm = HegcClientModel::new(&model.config, MatVecMethod::Gala).unwrap();
    let xs: Vec<Vec<i64>> = (0..3).map(|s| random_input(100, 12, 40 + s)).collect();
    let refs: Vec<&[i64]> = xs.iter().map(|x| x.as_slice()).collect();
    let (mut a, mut b) = mem_pair();
    let policy = ServerPolicy { allow_logits: true };
    let srv = std::thread::spawn(move || server_session(&mut b, &sm, policy));
    let outs = client_session_images(&mut a, &cm, &refs, true, &mut |_, _, _| {}).unwrap();
    let rep = srv.join().unwrap().unwrap();
    assert_eq!(outs.len(), 3);
    assert_eq!(rep.layers.len(), 3 * cm.shape.ops.len());
    let mut r = GraphReference::new(&q, ExactActivations);
    for (x, o) in xs.iter().zip(&outs) {
        let want = r.run(Input::Fixed(x)).unwrap();
        assert_eq!(o.logits.as_deref(), Some(want[want.len() - 2].as_slice()));
        assert_eq!(o.class as i64, want[want.len() - 1][0]);
    }
    // Only the first image pays for the keys.
    assert!(outs[0].report.cost.setup.bytes() > 1_000_000);
    for o in &outs[1..] {
        assert_eq!(o.report.cost.setup.bytes(), 0);
        assert!(o.report.cost.online.bytes() > 0);
    }
}

/// The coefficient kernel forced on every layer: the random MLP and CNN (padding, stride 1,
/// an even kernel, max-pool) equal the reference bit for bit at 40-bit flooding, and the
/// client uploads no Galois keys.
#[test]
fn coefficient_kernel_equals_the_reference_bit_for_bit() {
    let coeff = KernelChoice::Fixed(Kernel::Coeff);
    for (model, n, seed) in [
        (random_mlp(&[50, 24, 16, 7], 12, 6, 3).unwrap(), 50, 21),
        (small_cnn(7), 100, 22),
    ] {
        let cm = HegcClientModel::new(&model.config, coeff).unwrap();
        assert!(cm.rotation_steps().is_empty());
        assert!(cm
            .plans
            .iter()
            .flatten()
            .all(|p| matches!(p, LinearPlan::Coeff(_))));
        let x = random_input(n, 12, seed);
        let (c, rc, logits, rl) = run(&model, &x, coeff, true);
        assert_eq!(logits.as_deref(), Some(rl.as_slice()));
        assert_eq!(c, rc);
    }
}

/// `auto` takes, layer by layer, the candidate the cost model rates fastest, and the model's
/// bytes are the bytes a session sends: each linear layer's measured HE bytes equal its
/// estimate's up + down, whichever kernel won.
/// The stated case: on MNIST's 784 → 128 dense layer GALA packs 16 rows per 1024-slot block
/// and needs 15 Galois keys that no earlier layer paid for (≈ 9.4 MB and their generation),
/// while the coefficient kernel sends 13 small responses and no key, so it wins.
#[test]
fn auto_takes_the_cheapest_estimate_and_its_bytes_are_the_wire_bytes() {
    let small = random_mlp(&[784, 128], 12, 6, 5).unwrap();
    let shape = NetShape::new(&small.config, KernelChoice::Auto).unwrap();
    let ch = shape.choices[0].as_ref().unwrap();
    let gala = ch
        .estimates
        .iter()
        .find(|e| e.kernel == Kernel::Gala)
        .unwrap();
    assert_eq!(gala.galois_keys, 15);
    assert!(gala.new_key_bytes > 9_000_000, "{gala:?}");
    let coeff = ch
        .estimates
        .iter()
        .find(|e| e.kernel == Kernel::Coeff)
        .unwrap();
    assert_eq!((coeff.galois_keys, coeff.rotations), (0, 0));
    assert_eq!(ch.kernel, Kernel::Coeff, "{}", ch.why);
    for model in [
        random_mlp(&[50, 24, 16, 7], 12, 6, 3).unwrap(),
        small_cnn(9),
    ] {
        let shape = NetShape::new(&model.config, KernelChoice::Auto).unwrap();
        let q = QuantizedGraph::new(&model, model.config.fixed_point).unwrap();
        let sm = HegcServerModel::new(&q, &model.config, KernelChoice::Auto).unwrap();
        let cm = HegcClientModel::new(&model.config, KernelChoice::Auto).unwrap();
        let plans = cm.plans.clone();
        let (mut a, mut b) = mem_pair();
        let policy = ServerPolicy { allow_logits: true };
        let srv = std::thread::spawn(move || server_session(&mut b, &sm, policy));
        let x = random_input(shape.input_len, 12, 4);
        let out = client_session(&mut a, &cm, &x, false, &mut |_, _, _| {}).unwrap();
        srv.join().unwrap().unwrap();
        for (k, c) in shape.choices.iter().enumerate() {
            let Some(c) = c else { continue };
            let best = c
                .estimates
                .iter()
                .min_by(|a, b| a.time_s.total_cmp(&b.time_s))
                .unwrap();
            assert_eq!(c.kernel, best.kernel, "{}", c.why);
            let e = c.estimates.iter().find(|e| e.kernel == c.kernel).unwrap();
            let l = &out.report.layers[k];
            assert_eq!(l.kernel, c.kernel.name());
            assert!(plans[k].is_some());
            assert_eq!(l.he_bytes, e.bytes_up + e.bytes_down, "{}", l.name);
        }
    }
}

/// Both parties' models on the auto kernel with finishing protocol `nl`.
fn models_with(
    q: &QuantizedGraph,
    model: &Model,
    nl: Nonlinear,
) -> (HegcServerModel, HegcClientModel) {
    let sm = HegcServerModel::new(q, &model.config, KernelChoice::Auto)
        .unwrap()
        .with_nonlinear(nl);
    let cm = HegcClientModel::new(&model.config, KernelChoice::Auto)
        .unwrap()
        .with_nonlinear(nl);
    (sm, cm)
}

/// One session of `model` on `x` with the finishing steps run by `nl`; returns the secure
/// logits, the reference's, and the server's report.
fn run_nonlinear(
    model: &Model,
    x: &[i64],
    nl: Nonlinear,
) -> (Vec<i64>, Vec<i64>, crate::layers::gru::SessionReport) {
    let q = QuantizedGraph::new(model, model.config.fixed_point).unwrap();
    let (sm, cm) = models_with(&q, model, nl);
    let (mut a, mut b) = mem_pair();
    let policy = ServerPolicy { allow_logits: true };
    let srv = std::thread::spawn(move || server_session(&mut b, &sm, policy));
    let out = client_session(&mut a, &cm, x, true, &mut |_, _, _| {}).unwrap();
    let rep = srv.join().unwrap().unwrap();
    let mut r = GraphReference::new(&q, ExactActivations);
    let outs = r.run(Input::Fixed(x)).unwrap();
    assert_eq!(out.class as i64, outs[outs.len() - 1][0]);
    (out.logits.unwrap(), outs[outs.len() - 2].clone(), rep)
}

#[test]
fn finishing_steps_by_ot_and_by_gc_equal_the_reference_bit_for_bit() {
    // Narrow main formats make the truncation wrap; the CNN has ReLU + max-pool windows.
    let mlp = random_mlp(&[40, 24, 16, 7], 10, 4, 5).unwrap();
    let cnn = small_cnn(4);
    for (model, bits, seed) in [(&mlp, 10, 3), (&cnn, 12, 8)] {
        let n = model.config.graph.input_shape().elements();
        for seed in [seed, seed + 1] {
            let x = random_input(n, bits, seed);
            for nl in [Nonlinear::Gc, Nonlinear::Ot] {
                let (logits, want, rep) = run_nonlinear(model, &x, nl);
                assert_eq!(logits, want, "{nl:?}");
                let shape = NetShape::new(&model.config, KernelChoice::Auto).unwrap();
                assert_eq!(rep.layers.len(), shape.ops.len());
                let finish: Vec<&LayerCost> = rep
                    .layers
                    .iter()
                    .zip(&shape.ops)
                    .filter(|(_, o)| matches!(o.kind, OpKind::Finish { .. }))
                    .map(|(l, _)| l)
                    .collect();
                assert!(finish.len() >= 2);
                for l in finish {
                    assert_eq!(l.kernel, nl.name(), "{}", l.name);
                    match nl {
                        Nonlinear::Ot => assert!(l.ot_bytes > 0 && l.gc_bytes == 0, "{l:?}"),
                        Nonlinear::Gc => assert!(l.gc_bytes > 0 && l.ot_bytes == 0, "{l:?}"),
                    }
                }
            }
        }
    }
    // Different protocols are different networks to the handshake.
    let a = NetShape::new(&mlp.config, KernelChoice::Auto).unwrap();
    let mut b = a.clone();
    b.nonlinear = if a.nonlinear == Nonlinear::Ot {
        Nonlinear::Gc
    } else {
        Nonlinear::Ot
    };
    assert_ne!(a.hash(), b.hash());
    assert_eq!("ot".parse::<Nonlinear>().unwrap(), Nonlinear::Ot);
    assert!("garbled".parse::<Nonlinear>().is_err());
}

/// The whole session (handshake, keys, base OTs, pool fills, HE products, finishing steps,
/// argmax) driven as typed flights with no channel between the parties
/// (`secinfer_net::flight`), under both finishing protocols: logits and class equal the
/// reference's bit for bit, over more than four flights each way.
#[test]
fn whole_session_as_flights_equals_the_reference_bit_for_bit() {
    let mlp = random_mlp(&[30, 16, 6], 10, 4, 9).unwrap();
    let cnn = small_cnn(5);
    for (model, bits, seed, nls) in [
        (&mlp, 10, 21, &[Nonlinear::Gc, Nonlinear::Ot][..]),
        (&cnn, 12, 22, &[Nonlinear::Ot][..]),
    ] {
        let n = model.config.graph.input_shape().elements();
        let x = random_input(n, bits, seed);
        let q = QuantizedGraph::new(model, model.config.fixed_point).unwrap();
        let mut r = GraphReference::new(&q, ExactActivations);
        let outs = r.run(Input::Fixed(&x)).unwrap();
        for &nl in nls {
            let (sm, cm) = models_with(&q, model, nl);
            let xc = x.clone();
            let policy = ServerPolicy { allow_logits: true };
            let d = secinfer_net::flight::drive(
                move |ch| client_session(ch, &cm, &xc, true, &mut |_, _, _| {}),
                move |ch| server_session(ch, &sm, policy),
            )
            .unwrap();
            let out = d.a.unwrap();
            d.b.unwrap();
            assert_eq!(out.logits.unwrap(), outs[outs.len() - 2], "{nl:?}");
            assert_eq!(out.class as i64, outs[outs.len() - 1][0], "{nl:?}");
            assert!(d.flights_a.len() > 4 && d.flights_b.len() > 4, "{nl:?}");
        }
    }
}
