use super::*;
use crate::layers::gru::ServerPolicy;
use crate::model::Model;
use crate::reference::{ExactActivations, GraphReference, Input};
use secinfer_net::mem_pair;

/// Runs one secure session on `x` and the reference; returns (secure class, reference class,
/// secure logits, reference logits).
fn run(
    model: &Model,
    x: &[i64],
    kernel: MatVecMethod,
    allow_logits: bool,
) -> (usize, usize, Option<Vec<i64>>, Vec<i64>) {
    let q = QuantizedGraph::new(model, model.config.fixed_point).unwrap();
    let sm = HegcServerModel::new(&q, &model.config, kernel).unwrap();
    let cm = HegcClientModel::new(&model.config, kernel).unwrap();
    let (mut a, mut b) = mem_pair();
    let policy = ServerPolicy { allow_logits };
    let srv = std::thread::spawn(move || server_session(&mut b, &sm, policy));
    let out = client_session(&mut a, &cm, x, true, &mut |_, _, _| {});
    let rep = srv.join().unwrap();
    let out = if allow_logits {
        let rep = rep.unwrap();
        let out = out.unwrap();
        assert!(
            rep.flood_stat_bits >= FLOOD_BITS as f64,
            "{}",
            rep.flood_stat_bits
        );
        assert_eq!(rep.layers.len(), cm.shape.stages.len());
        out
    } else {
        let e = out.expect_err("a refused logits request");
        assert_eq!(e.kind(), crate::ErrorKind::Refused);
        assert!(rep.is_err());
        let (mut a, mut b) = mem_pair();
        let sm = HegcServerModel::new(&q, &model.config, kernel).unwrap();
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

#[test]
fn shipped_mnist_mlp_equals_the_reference() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../models/mnist-mlp");
    let model = Model::load(dir).unwrap();
    let q = QuantizedGraph::new(&model, model.config.fixed_point).unwrap();
    let text = std::fs::read_to_string(format!("{dir}/samples.jsonl")).unwrap();
    for line in text.lines().take(2) {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let xf: Vec<f32> = v["input"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap() as f32)
            .collect();
        let x = q.quantize_input(&xf);
        let (c, rc, logits, rl) = run(&model, &x, MatVecMethod::Gala, true);
        assert_eq!(logits.as_deref(), Some(rl.as_slice()));
        assert_eq!(c, rc);
        assert_eq!(c.to_string(), v["label"].as_str().unwrap());
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
