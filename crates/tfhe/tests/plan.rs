//! The per-step plan behind `--tfhe-mode auto`: the step counts add up to the whole circuits'
//! counts, the assignment is the cheapest one on stated costs (switching encodings included),
//! and on the digits MLP and a pooled network the model picks the PBS path for every step.
use secinfer_tfhe::cost::{self, Path, Plan};
use secinfer_tfhe::{arch, ConvGeom, InputFormat, Layer, Network, PbsNetwork, Pow2Linear, Shape};

#[test]
fn assignment_is_the_cheapest_on_stated_costs() {
    use Path::{Gates, Pbs};
    // Step 1 is cheaper on gates: worth two switches of 1 s each, not of 50 s.
    let costs = [(10.0, 2.0), (3.0, 6.0), (10.0, 2.0)];
    let (choice, total) = cost::assign(&costs, &[1.0, 1.0, 0.0]);
    assert_eq!(choice, vec![Pbs, Gates, Pbs]);
    assert!(
        (total - (2.0 + 1.0 + 3.0 + 1.0 + 2.0)).abs() < 1e-9,
        "{total}"
    );
    let (choice, total) = cost::assign(&costs, &[50.0, 50.0, 0.0]);
    assert_eq!(choice, vec![Pbs, Pbs, Pbs]);
    assert!((total - 10.0).abs() < 1e-9, "{total}");
    // A switch is paid once: gates from step 1 on beats returning to PBS for the last step.
    let (choice, _) = cost::assign(&[(9.0, 1.0), (1.0, 9.0), (2.0, 1.5)], &[2.0, 2.0, 0.0]);
    assert_eq!(choice, vec![Pbs, Gates, Gates]);
    // Exhaustive check against every assignment of four steps.
    let costs = [(4.0, 5.0), (7.0, 1.0), (2.0, 6.0), (5.0, 5.5)];
    let convert = [1.5, 0.5, 2.5, 0.0];
    let (_, total) = cost::assign(&costs, &convert);
    let brute = (0..16u32)
        .map(|m| {
            let on = |i: usize| m >> i & 1 == 1;
            (0..4)
                .map(|i| {
                    let own = if on(i) { costs[i].1 } else { costs[i].0 };
                    let switch = if i > 0 && on(i) != on(i - 1) {
                        convert[i - 1]
                    } else {
                        0.0
                    };
                    own + switch
                })
                .sum::<f64>()
        })
        .fold(f64::INFINITY, f64::min);
    assert!((total - brute).abs() < 1e-9, "{total} vs {brute}");
}

fn check_plan(net: &Network) -> Plan {
    let pbs = PbsNetwork::new(net).expect("on the PBS path");
    let plan = Plan::new(net, &pbs);
    // The steps partition both circuits: their counts add up to the whole network's.
    let lookups: u64 = plan.steps.iter().map(|s| s.lookups).sum();
    let gates: u64 = plan.steps.iter().map(|s| s.gate_bootstraps).sum();
    assert_eq!(lookups, pbs.count().pbs);
    assert_eq!(gates, net.count().pbs());
    for s in &plan.steps {
        let want = if s.pbs_s <= s.gates_s {
            Path::Pbs
        } else {
            Path::Gates
        };
        assert_eq!(s.choice, want, "{s:?}");
    }
    plan
}

#[test]
fn auto_picks_pbs_for_every_step_of_the_digits_mlp_and_a_pooled_network() {
    let plan = check_plan(&arch::digits_mlp_random(7).expect("mlp"));
    assert_eq!(plan.steps.len(), 3);
    assert_eq!(plan.uniform(), Some(Path::Pbs));
    assert_eq!(plan.run_path(), Path::Pbs);
    let lin = |outputs, fan_in| Pow2Linear {
        name: "l".into(),
        outputs,
        fan_in,
        sign: (0..outputs * fan_in).map(|i| [1, -1][i % 2]).collect(),
        exp: (0..outputs * fan_in).map(|i| -((i % 4) as i8)).collect(),
        bias: vec![3; outputs],
        offset: 1,
    };
    let net = Network::new(
        InputFormat {
            shape: Shape { c: 1, h: 6, w: 6 },
            bits: 5,
            signed: false,
        },
        vec![
            Layer::Conv2d(
                lin(3, 9),
                ConvGeom {
                    in_ch: 1,
                    out_ch: 3,
                    kernel: 3,
                    stride: 1,
                    padding: 1,
                },
            ),
            Layer::Requant {
                shift: 2,
                bits: 5,
                relu: true,
            },
            Layer::MaxPool {
                kernel: 3,
                stride: 2,
                padding: 1,
            },
            Layer::Flatten,
            Layer::Dense(lin(4, 27)),
        ],
    )
    .expect("valid");
    let plan = check_plan(&net);
    let kinds: Vec<&str> = plan.steps.iter().map(|s| s.kind).collect();
    assert_eq!(kinds, ["linear+requant", "maxpool", "linear"]);
    assert_eq!(plan.uniform(), Some(Path::Pbs), "{plan:#?}");
}
