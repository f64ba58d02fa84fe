//! The graph reference evaluates `fastgrnn` layers (full and low rank): its states track a
//! float FastGRNN (Kusupati et al. 2018) on the same weights within the quantisation's error.
#![allow(clippy::unwrap_used, reason = "tests: a panic is the failure report")]
use secinfer_nn::model::weights::Tensor;
use secinfer_nn::{
    ExactActivations, GraphReference, Input, Model, ModelConfig, QuantizedGraph, Tensors,
};
use serde_json::json;
use std::collections::HashMap;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> f32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
    }
}

fn matvec(m: &[f32], x: &[f32]) -> Vec<f32> {
    m.chunks(x.len())
        .map(|r| r.iter().zip(x).map(|(a, b)| a * b).sum())
        .collect()
}

#[test]
fn graph_fastgrnn_states_track_the_float_cell() {
    let (steps, input, hidden, rank) = (6usize, 5usize, 8usize, 3usize);
    for w_rank in [None, Some(rank)] {
        let cfg = json!({
            "format": "secinfer-model", "version": 2, "task": "classification",
            "layers": [
                {"type": "input", "name": "x", "shape": [steps, input]},
                {"type": "fastgrnn", "name": "rnn", "input": input, "hidden": hidden,
                 "w_rank": w_rank, "u_rank": null, "return_sequences": false}
            ],
            "fixed_point": {"bits": 20, "frac_bits": 12},
            "labels": (0..hidden).map(|i| format!("c{i}")).collect::<Vec<_>>(),
        });
        let config = ModelConfig::parse(&cfg.to_string()).unwrap();
        let mut rng = Rng(0x1234_5678);
        let mut map = HashMap::new();
        for (name, shape) in config.graph.tensors() {
            let n: usize = shape.iter().product();
            let mut data: Vec<f32> = (0..n).map(|_| 0.5 * rng.next()).collect();
            if name.ends_with("zeta") {
                data = vec![0.9];
            } else if name.ends_with("nu") {
                data = vec![0.05];
            }
            map.insert(name, Tensor { shape, data });
        }
        let f = |k: &str| map[&format!("rnn.{k}")].data.clone();
        let w = match w_rank {
            None => f("W"),
            Some(r) => {
                let (w1, w2) = (f("W1"), f("W2"));
                let mut w = vec![0f32; hidden * input];
                for i in 0..hidden {
                    for j in 0..input {
                        w[i * input + j] = (0..r).map(|k| w2[i * r + k] * w1[k * input + j]).sum();
                    }
                }
                w
            }
        };
        let (u, bg, bu) = (f("U"), f("bias_gate"), f("bias_update"));
        let tensors = Tensors::from_map(map, &config.graph).unwrap();
        let model = Model {
            config,
            tensors,
            vocab: None,
        };
        let qg = QuantizedGraph::new(&model, model.config.fixed_point).unwrap();
        let x: Vec<f32> = (0..steps * input).map(|_| rng.next()).collect();
        let xq: Vec<i64> = x.iter().map(|v| (v * 4096.0).round() as i64).collect();
        let outs = GraphReference::new(&qg, ExactActivations)
            .run(Input::Fixed(&xq))
            .unwrap();
        let got = outs.last().unwrap();
        assert_eq!(got.len(), hidden);
        let mut h = vec![0f32; hidden];
        let mut worst = 0f32;
        for t in 0..steps {
            let wx = matvec(&w, &x[t * input..(t + 1) * input]);
            let uh = matvec(&u, &h);
            h = (0..hidden)
                .map(|i| {
                    let a = wx[i] + uh[i];
                    let z = 1.0 / (1.0 + (-(a + bg[i])).exp());
                    let ht = (a + bu[i]).tanh();
                    (0.9 * (1.0 - z) + 0.05) * ht + z * h[i]
                })
                .collect();
        }
        for i in 0..hidden {
            worst = worst.max((got[i] as f32 / 4096.0 - h[i]).abs());
        }
        // 16-bit formats at scale 9 (h), 8 (weights), 14 (gates): a few 2^-9 per step.
        assert!(worst < 0.03, "rank {w_rank:?}: worst state error {worst}");
        assert!(
            h.iter().any(|v| v.abs() > 0.05),
            "vacuous: the float states stayed near zero"
        );
    }
}
