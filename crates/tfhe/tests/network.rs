//! Networks: the circuit on the plaintext backend equals the i64 reference on random networks
//! and inputs; loading checks formats and reports typed errors; the counter's per-layer totals
//! follow the formulas.
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;
use secinfer_tfhe::arch::{self, LstmCell};
use secinfer_tfhe::model::{self, Description};
use secinfer_tfhe::{
    Bit, ConvGeom, Counter, Error, InputFormat, Layer, Network, Pow2Linear, Shape,
};

fn random_lin(
    rng: &mut ChaCha20Rng,
    name: &str,
    outputs: usize,
    fan_in: usize,
    offset: i32,
) -> Pow2Linear {
    let n = outputs * fan_in;
    Pow2Linear {
        name: name.into(),
        outputs,
        fan_in,
        sign: (0..n).map(|_| rng.gen_range(-1..=1)).collect(),
        exp: (0..n).map(|_| rng.gen_range(-6..=1)).collect(),
        bias: (0..outputs).map(|_| rng.gen_range(-40..=40)).collect(),
        offset,
    }
}

fn conv_net(rng: &mut ChaCha20Rng) -> Network {
    let input = InputFormat {
        shape: Shape { c: 2, h: 7, w: 6 },
        bits: 4,
        signed: true,
    };
    let g = ConvGeom {
        in_ch: 2,
        out_ch: 3,
        kernel: 3,
        stride: 2,
        padding: 1,
    };
    Network::new(
        input,
        vec![
            Layer::Conv2d(random_lin(rng, "c", 3, 18, 2), g),
            Layer::Requant {
                shift: 2,
                bits: 5,
                relu: true,
            },
            Layer::MaxPool {
                kernel: 2,
                stride: 1,
                padding: 1,
            },
            Layer::Flatten,
            Layer::Dense(random_lin(rng, "d", 4, 3 * 5 * 4, 1)),
            Layer::Requant {
                shift: 1,
                bits: 4,
                relu: false,
            },
        ],
    )
    .expect("valid network")
}

fn random_input(rng: &mut ChaCha20Rng, net: &Network) -> Vec<i64> {
    let f = net.input();
    let (lo, hi) = if f.signed {
        (-(1i64 << (f.bits - 1)), (1i64 << (f.bits - 1)) - 1)
    } else {
        (0, (1i64 << f.bits) - 1)
    };
    let mut x: Vec<i64> = (0..net.input_len())
        .map(|_| rng.gen_range(lo..=hi))
        .collect();
    x[0] = lo;
    x[1] = hi;
    x
}

#[test]
fn circuit_equals_reference_on_random_networks() {
    let mut rng = ChaCha20Rng::seed_from_u64(11);
    for _ in 0..6 {
        let net = conv_net(&mut rng);
        assert_eq!(net.shapes()[0], Shape { c: 3, h: 4, w: 3 });
        for _ in 0..4 {
            let x = random_input(&mut rng, &net);
            let want = net.reference(&x).expect("reference");
            assert_eq!(want.len(), 4);
            assert_eq!(net.evaluate_plain(&x).expect("plain"), want);
        }
    }
    let net = arch::digits_mlp_random(3).expect("mlp");
    for _ in 0..3 {
        let x = random_input(&mut rng, &net);
        let want = net.reference(&x).expect("reference");
        assert!(
            want.iter().any(|v| *v != 0),
            "a trivial all-zero output would hide bugs"
        );
        assert_eq!(net.evaluate_plain(&x).expect("plain"), want);
    }
}

#[test]
fn lstm_step_circuit_equals_reference() {
    let mut rng = ChaCha20Rng::seed_from_u64(12);
    let cell = LstmCell::random(5, 6, 4);
    let word = |v: i64, w: usize| -> Vec<Bit<bool>> {
        secinfer_tfhe::int::value_bits(v, w)
            .into_iter()
            .map(Bit::Wire)
            .collect()
    };
    let (mut h, mut c) = (vec![0i64; 6], vec![0i64; 6]);
    for _ in 0..4 {
        let x: Vec<i64> = (0..4).map(|_| rng.gen_range(-16..=15)).collect();
        let (xw, hw, cw): (Vec<_>, Vec<_>, Vec<_>) = (
            x.iter().map(|v| word(*v, 5)).collect(),
            h.iter().map(|v| word(*v, 6)).collect(),
            c.iter().map(|v| word(*v, 8)).collect(),
        );
        let (h2, c2) = cell.step(&mut secinfer_tfhe::Plain, &xw, &hw, &cw);
        let (hr, cr) = arch::lstm_reference(&cell, &x, &h, &c);
        let vals = |ws: &[Vec<Bit<bool>>]| {
            ws.iter()
                .map(|w| secinfer_tfhe::int::word_value(w))
                .collect::<Vec<_>>()
        };
        assert_eq!((vals(&h2), vals(&c2)), (hr.clone(), cr.clone()));
        (h, c) = (hr, cr);
    }
}

#[test]
fn bad_shapes_and_inputs_are_typed_errors() {
    let mut rng = ChaCha20Rng::seed_from_u64(13);
    let input = InputFormat {
        shape: Shape::flat(4),
        bits: 5,
        signed: false,
    };
    let err = Network::new(
        input,
        vec![Layer::Dense(random_lin(&mut rng, "d", 2, 3, 0))],
    )
    .unwrap_err();
    assert!(
        matches!(
            err,
            Error::Layer {
                index: 0,
                kind: "dense",
                ..
            }
        ),
        "{err}"
    );
    let mut lin = random_lin(&mut rng, "d", 2, 4, 0);
    lin.exp[0] = 60;
    lin.sign[0] = 1;
    let mut far = lin.clone();
    far.exp[0] = 0;
    far.offset = i32::MAX;
    assert!(matches!(
        Network::new(input, vec![Layer::Dense(far)]),
        Err(Error::Layer { .. })
    ));
    assert!(matches!(
        Network::new(input, vec![Layer::Dense(lin)]),
        Err(Error::Layer { .. })
    ));
    let huge = InputFormat {
        shape: Shape {
            c: usize::MAX,
            h: 2,
            w: 1,
        },
        ..input
    };
    assert!(matches!(Network::new(huge, vec![]), Err(Error::Format(_))));
    let pool = Layer::MaxPool {
        kernel: 2,
        stride: 1,
        padding: usize::MAX / 2,
    };
    let img = InputFormat {
        shape: Shape { c: 1, h: 4, w: 4 },
        ..input
    };
    assert!(matches!(
        Network::new(img, vec![pool]),
        Err(Error::Layer {
            kind: "maxpool",
            ..
        })
    ));
    let net = Network::new(
        input,
        vec![Layer::Dense(random_lin(&mut rng, "d", 2, 4, 0))],
    )
    .expect("valid");
    assert!(matches!(
        net.reference(&[0, 1, 2]),
        Err(Error::InputLength { got: 3, want: 4 })
    ));
    assert!(matches!(
        net.reference(&[0, 1, 2, 32]),
        Err(Error::InputRange {
            index: 3,
            value: 32,
            ..
        })
    ));
    assert!(matches!(
        net.reference(&[0, 1, -1, 3]),
        Err(Error::InputRange { index: 2, .. })
    ));
}

fn tensor_bytes(v: &[i64], dtype: safetensors::Dtype) -> Vec<u8> {
    match dtype {
        safetensors::Dtype::I8 => v.iter().map(|x| *x as i8 as u8).collect(),
        _ => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
    }
}

#[test]
fn model_files_round_trip_and_reject_bad_tensors() {
    use safetensors::tensor::TensorView;
    use safetensors::Dtype;
    let mut rng = ChaCha20Rng::seed_from_u64(14);
    let lin = random_lin(&mut rng, "fc", 3, 8, 1);
    let to64 = |v: &[i8]| v.iter().map(|x| i64::from(*x)).collect::<Vec<_>>();
    let (s, e, b) = (
        tensor_bytes(&to64(&lin.sign), Dtype::I8),
        tensor_bytes(&to64(&lin.exp), Dtype::I8),
        tensor_bytes(&lin.bias, Dtype::I64),
    );
    let desc_json = r#"{"format": "secinfer-she", "version": 1,
        "input": {"shape": {"c": 8, "h": 1, "w": 1}, "bits": 5, "signed": false},
        "layers": [{"kind": "dense", "name": "fc", "outputs": 3, "offset": 1},
                   {"kind": "requant", "shift": 1, "bits": 5, "relu": true}]}"#;
    let desc: Description = serde_json::from_str(desc_json).expect("description");
    let write = |sign_shape: Vec<usize>| {
        let views = vec![
            (
                "fc.sign",
                TensorView::new(Dtype::I8, sign_shape, &s).expect("view"),
            ),
            (
                "fc.exp",
                TensorView::new(Dtype::I8, vec![3, 8], &e).expect("view"),
            ),
            (
                "fc.bias",
                TensorView::new(Dtype::I64, vec![3], &b).expect("view"),
            ),
        ];
        safetensors::serialize(views, &None).expect("serialize")
    };
    let net = model::from_parts(&desc, &write(vec![3, 8])).expect("loads");
    let direct = Network::new(
        desc.input,
        vec![
            Layer::Dense(lin),
            Layer::Requant {
                shift: 1,
                bits: 5,
                relu: true,
            },
        ],
    )
    .expect("valid");
    assert_eq!(net, direct);
    let err = model::from_parts(&desc, &write(vec![8, 3])).unwrap_err();
    assert!(
        matches!(&err, Error::Tensor { name, .. } if name == "fc.sign"),
        "{err}"
    );
    assert!(matches!(
        model::from_parts(&desc, b"not safetensors"),
        Err(Error::Weights(_))
    ));
    let bad: Result<Description, _> =
        serde_json::from_str(&desc_json.replace("\"dense\"", "\"dance\""));
    assert!(bad.is_err());
}

#[test]
fn counter_totals_equal_per_layer_formulas() {
    // A dense layer of n outputs over f unpruned inputs: f PCShifts and f - 1 tree adders per
    // output, plus one bias adder where the bias (with the negated terms' carries) is nonzero.
    let net = arch::digits_mlp_random(1).expect("mlp");
    let c: Counter = net.count();
    let mut shifts = 0;
    let mut adds = 0;
    let mut relus = 0;
    for l in net.layers() {
        match l {
            Layer::Dense(lin) => {
                shifts += (lin.outputs * lin.fan_in) as u64;
                adds += (lin.outputs * (lin.fan_in - 1)) as u64;
                for o in 0..lin.outputs {
                    let negs = lin.sign[o * lin.fan_in..(o + 1) * lin.fan_in]
                        .iter()
                        .filter(|s| **s < 0)
                        .count() as i64;
                    adds += u64::from(lin.bias[o] + negs != 0);
                }
            }
            Layer::Requant { relu: true, .. } => relus += 128,
            _ => {}
        }
    }
    assert_eq!(
        (c.pc_shift, c.cc_add, c.cc_com, c.cc_mult),
        (shifts, adds, relus, 0)
    );
    assert!(c.gates() > 0 && c.pbs() >= c.gates() && c.depth > 0);
}
