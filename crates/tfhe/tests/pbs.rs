//! The programmable-bootstrapping path: the digit circuit run in the clear equals the i64
//! reference on random networks (every weight sign, odd and even shifts both ways, odd and
//! even requantisation shifts), never feeds a bootstrap a value it cannot read, and a tiny
//! network run on tfhe-rs shortint ciphertexts decrypts to the reference bit for bit.
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;
use secinfer_tfhe::pbs::{generate_pbs_client_keys, PbsEncrypted};
use secinfer_tfhe::{
    arch, serialized_bytes, ConvGeom, Error, InputFormat, Layer, Network, PbsNetwork, Pow2Linear,
    Shape,
};

fn random_lin(
    rng: &mut ChaCha20Rng,
    outputs: usize,
    fan_in: usize,
    offset: i32,
    bias: i64,
) -> Pow2Linear {
    let n = outputs * fan_in;
    Pow2Linear {
        name: "l".into(),
        outputs,
        fan_in,
        sign: (0..n).map(|_| rng.gen_range(-1..=1)).collect(),
        exp: (0..n).map(|_| rng.gen_range(-5..=2)).collect(),
        bias: (0..outputs).map(|_| rng.gen_range(-bias..=bias)).collect(),
        offset,
    }
}

fn random_net(rng: &mut ChaCha20Rng) -> Network {
    let bits = rng.gen_range(2..=6);
    let hidden = rng.gen_range(3..=9);
    let mid_bits = rng.gen_range(2..=5);
    let offsets = [
        rng.gen_range(-1..=1),
        rng.gen_range(-2..=1),
        rng.gen_range(-1..=2),
    ];
    let input = InputFormat {
        shape: Shape { c: 2, h: 3, w: 3 },
        bits,
        signed: false,
    };
    let g = ConvGeom {
        in_ch: 2,
        out_ch: 2,
        kernel: 2,
        stride: 1,
        padding: 1,
    };
    Network::new(
        input,
        vec![
            Layer::Conv2d(random_lin(rng, 2, 8, offsets[0], 30), g),
            Layer::Requant {
                shift: rng.gen_range(0..=3),
                bits: mid_bits,
                relu: true,
            },
            Layer::Flatten,
            Layer::Dense(random_lin(rng, hidden, 32, offsets[1], 60)),
            Layer::Requant {
                shift: rng.gen_range(0..=3),
                bits: rng.gen_range(2..=5),
                relu: true,
            },
            Layer::Dense(random_lin(rng, 3, hidden, offsets[2], 200)),
        ],
    )
    .expect("valid network")
}

fn random_input(rng: &mut ChaCha20Rng, net: &Network) -> Vec<i64> {
    let hi = (1i64 << net.input().bits) - 1;
    let mut x: Vec<i64> = (0..net.input_len())
        .map(|_| rng.gen_range(0..=hi))
        .collect();
    x[0] = 0;
    x[1] = hi;
    x
}

#[test]
fn digit_circuit_equals_reference_on_random_networks() {
    let mut rng = ChaCha20Rng::seed_from_u64(23);
    let mut signs = [0usize; 2];
    for _ in 0..25 {
        let net = random_net(&mut rng);
        let pbs = PbsNetwork::new(&net).expect("compiles");
        assert_eq!(pbs.count().violations, 0);
        for _ in 0..4 {
            let x = random_input(&mut rng, &net);
            let want = net.reference(&x).expect("reference");
            assert_eq!(pbs.evaluate_plain(&x).expect("plain"), want, "input {x:?}");
        }
        // Inputs at the extremes drive the hidden layers into both clamps.
        for v in [0, (1i64 << net.input().bits) - 1] {
            let x = vec![v; net.input_len()];
            assert_eq!(
                pbs.evaluate_plain(&x).expect("plain"),
                net.reference(&x).expect("ref")
            );
        }
        let hidden = net.reference(&random_input(&mut rng, &net)).expect("ref");
        signs[0] += hidden.iter().filter(|v| **v < 0).count();
        signs[1] += hidden.iter().filter(|v| **v > 0).count();
    }
    assert!(signs[0] > 0 && signs[1] > 0, "outputs of both signs occur");
    let net = arch::digits_mlp_random(3).expect("mlp");
    let pbs = PbsNetwork::new(&net).expect("compiles");
    for _ in 0..3 {
        let x = random_input(&mut rng, &net);
        let want = net.reference(&x).expect("reference");
        assert!(want.iter().any(|v| *v != 0));
        assert_eq!(pbs.evaluate_plain(&x).expect("plain"), want);
    }
    let c = pbs.count();
    assert_eq!(c.violations, 0);
    assert!(c.pbs > 0 && c.depth > 0);
}

/// conv → ReLU → max-pool → conv → signed requantisation → max-pool → dense → ReLU → dense
/// (SHE's MNIST topology at toy size), with random pool windows, widths and shifts. The
/// layer after the signed activation shifts by at least `1 - bits`, which keeps its zero
/// point's shift exact (the compiler refuses the rest, tested below).
fn random_pooled_net(rng: &mut ChaCha20Rng) -> Network {
    let bits = rng.gen_range(2..=5);
    let relu_bits = rng.gen_range(2..=5);
    let signed_bits: u32 = rng.gen_range(2..=5);
    let input = InputFormat {
        shape: Shape { c: 1, h: 5, w: 5 },
        bits,
        signed: false,
    };
    let conv = |in_ch, out_ch, kernel, padding| ConvGeom {
        in_ch,
        out_ch,
        kernel,
        stride: 1,
        padding,
    };
    // A window of 2 or 3 that fits a side of n.
    let pool = |rng: &mut ChaCha20Rng, n: usize| {
        let kernel = rng.gen_range(2..=3);
        let mut padding = rng.gen_range(0..kernel);
        if n + 2 * padding < kernel {
            padding = kernel - 1;
        }
        Layer::MaxPool {
            kernel,
            stride: rng.gen_range(1..=2),
            padding,
        }
    };
    let p1 = pool(rng, 5);
    let o1 = rng.gen_range(-1..=1);
    let c1 = Layer::Conv2d(random_lin(rng, 2, 9, o1, 20), conv(1, 2, 3, 1));
    let r1 = Layer::Requant {
        shift: rng.gen_range(0..=3),
        bits: relu_bits,
        relu: true,
    };
    let prefix = Network::new(input, vec![c1.clone(), r1.clone(), p1.clone()]).expect("prefix");
    let s1 = prefix.shapes()[2];
    let k2 = s1.h.min(2);
    let o2 = rng.gen_range(-1..=1);
    let c2 = Layer::Conv2d(random_lin(rng, 2, 2 * k2 * k2, o2, 20), conv(2, 2, k2, 0));
    let r2 = Layer::Requant {
        shift: rng.gen_range(0..=3),
        bits: signed_bits,
        relu: false,
    };
    let before = Network::new(
        input,
        vec![c1.clone(), r1.clone(), p1.clone(), c2.clone(), r2.clone()],
    )
    .expect("before the second pool");
    let p2 = pool(rng, before.shapes()[4].h);
    let mut layers = before.layers().to_vec();
    layers.push(p2.clone());
    let mid = Network::new(input, layers).expect("mid");
    let flat = mid.output_len();
    let hidden = rng.gen_range(2..=5);
    let offset = rng.gen_range(-1..=1);
    let mut fc1 = random_lin(rng, hidden, flat, offset, 40);
    for e in &mut fc1.exp {
        *e = (*e).max(1 - signed_bits as i8 - offset as i8);
    }
    let o3 = rng.gen_range(-1..=1);
    Network::new(
        input,
        vec![
            c1,
            r1,
            p1,
            c2,
            r2,
            p2,
            Layer::Flatten,
            Layer::Dense(fc1),
            Layer::Requant {
                shift: rng.gen_range(0..=2),
                bits: rng.gen_range(2..=4),
                relu: true,
            },
            Layer::Dense(random_lin(rng, 3, hidden, o3, 60)),
        ],
    )
    .expect("valid network")
}

/// A 2×2 image of `bits`-bit pixels through a 1×1 convolution to one channel, then `rest`.
fn pixel_conv_net(rng: &mut ChaCha20Rng, bits: u32, bias: i64, rest: Vec<Layer>) -> Network {
    let conv = Layer::Conv2d(
        random_lin(rng, 1, 1, 0, bias),
        ConvGeom {
            in_ch: 1,
            out_ch: 1,
            kernel: 1,
            stride: 1,
            padding: 0,
        },
    );
    let input = InputFormat {
        shape: Shape { c: 1, h: 2, w: 2 },
        bits,
        signed: false,
    };
    Network::new(input, [vec![conv], rest].concat()).expect("valid")
}

#[test]
fn pooled_networks_with_signed_activations_equal_reference_on_digits() {
    let mut rng = ChaCha20Rng::seed_from_u64(41);
    let mut hidden_signs = [0usize; 2];
    for _ in 0..25 {
        let net = random_pooled_net(&mut rng);
        let pbs = PbsNetwork::new(&net).expect("compiles");
        assert_eq!(pbs.count().violations, 0);
        let hi = (1i64 << net.input().bits) - 1;
        let mut inputs: Vec<Vec<i64>> = (0..4)
            .map(|_| {
                (0..net.input_len())
                    .map(|_| rng.gen_range(0..=hi))
                    .collect()
            })
            .collect();
        inputs.push(vec![0; net.input_len()]);
        inputs.push(vec![hi; net.input_len()]);
        for x in &inputs {
            let want = net.reference(x).expect("reference");
            assert_eq!(pbs.evaluate_plain(x).expect("digits"), want, "input {x:?}");
        }
        // The signed activations (layer 4's output) take both signs across the runs, so the
        // zero point is exercised on negative values, not only on positive ones.
        let prefix = Network::new(net.input(), net.layers()[..5].to_vec()).expect("prefix");
        for x in &inputs {
            for v in prefix.reference(x).expect("prefix reference") {
                hidden_signs[usize::from(v >= 0)] += 1;
            }
        }
    }
    assert!(
        hidden_signs[0] > 0 && hidden_signs[1] > 0,
        "{hidden_signs:?}"
    );
    // A network ending on a pool and on a signed requantisation decodes through the zero point.
    let net = pixel_conv_net(
        &mut rng,
        4,
        8,
        vec![
            Layer::Requant {
                shift: 0,
                bits: 3,
                relu: false,
            },
            Layer::MaxPool {
                kernel: 2,
                stride: 1,
                padding: 1,
            },
        ],
    );
    let pbs = PbsNetwork::new(&net).expect("compiles");
    for v in 0..16 {
        let x = vec![v, 15 - v, v / 2, 3];
        assert_eq!(
            pbs.evaluate_plain(&x).expect("digits"),
            net.reference(&x).expect("ref")
        );
    }
}

/// Asserts that the PBS compiler refuses `net` naming layer `index` of kind `kind`.
fn refused_at(net: &Network, index: usize, kind: &str) {
    match PbsNetwork::new(net) {
        Err(Error::Layer {
            index: i, kind: k, ..
        }) => assert_eq!((i, k), (index, kind)),
        other => panic!("expected a refusal at layer {index} ({kind}), got {other:?}"),
    }
}

#[test]
fn networks_off_the_pbs_path_are_typed_errors() {
    let mut rng = ChaCha20Rng::seed_from_u64(5);
    let flat = |n| InputFormat {
        shape: Shape::flat(n),
        bits: 4,
        signed: false,
    };
    let signed = Network::new(
        InputFormat {
            signed: true,
            ..flat(4)
        },
        vec![Layer::Dense(random_lin(&mut rng, 2, 4, 0, 3))],
    )
    .expect("valid");
    assert!(matches!(PbsNetwork::new(&signed), Err(Error::Format(_))));
    // A requantisation must follow a linear layer.
    let bare_requant = Network::new(
        flat(4),
        vec![
            Layer::Requant {
                shift: 0,
                bits: 3,
                relu: true,
            },
            Layer::Dense(random_lin(&mut rng, 2, 4, 0, 3)),
        ],
    )
    .expect("valid");
    refused_at(&bare_requant, 0, "requant");
    // Nothing follows a raw accumulator (a linear layer without requantisation).
    let pool_after_sum = pixel_conv_net(
        &mut rng,
        3,
        3,
        vec![Layer::MaxPool {
            kernel: 2,
            stride: 2,
            padding: 0,
        }],
    );
    refused_at(&pool_after_sum, 1, "maxpool");
    // A signed activation's zero point 2^(bits-1) shifted right past its lowest bit is not an
    // integer: the term does not split into digits plus a constant.
    let inexact = Network::new(
        flat(2),
        vec![
            Layer::Dense(random_lin(&mut rng, 2, 2, 0, 3)),
            Layer::Requant {
                shift: 0,
                bits: 3,
                relu: false,
            },
            Layer::Dense(Pow2Linear {
                name: "l".into(),
                outputs: 1,
                fan_in: 2,
                sign: vec![1, 1],
                exp: vec![0, -3],
                bias: vec![0],
                offset: 0,
            }),
        ],
    )
    .expect("valid");
    refused_at(&inexact, 2, "dense");
    let net = Network::new(
        flat(4),
        vec![Layer::Dense(random_lin(&mut rng, 2, 4, 0, 3))],
    )
    .expect("valid");
    let pbs = PbsNetwork::new(&net).expect("compiles");
    assert!(matches!(
        pbs.evaluate_plain(&[1, 2, 3]),
        Err(Error::InputLength { got: 3, want: 4 })
    ));
    assert!(matches!(
        pbs.evaluate_plain(&[1, 2, 3, 16]),
        Err(Error::InputRange { index: 3, .. })
    ));
}

#[test]
fn tiny_network_on_shortint_ciphertexts_equals_reference() {
    // dense 3→3 (odd and even shifts, negative weights) → ReLU to 3 bits → dense 3→2. The
    // default 128-bit parameter set: the network is kept tiny instead, so the test takes
    // seconds.
    let mk = |outputs, fan_in, sign: &[i8], exp: &[i8], bias: &[i64], offset| Pow2Linear {
        name: "l".into(),
        outputs,
        fan_in,
        sign: sign.to_vec(),
        exp: exp.to_vec(),
        bias: bias.to_vec(),
        offset,
    };
    let net = Network::new(
        InputFormat {
            shape: Shape::flat(3),
            bits: 3,
            signed: false,
        },
        vec![
            Layer::Dense(mk(
                3,
                3,
                &[1, -1, 1, -1, 1, 0, 1, 1, -1],
                &[0, 1, -1, 2, 0, 0, -2, 1, 0],
                &[2, -3, 0],
                0,
            )),
            Layer::Requant {
                shift: 1,
                bits: 3,
                relu: true,
            },
            Layer::Dense(mk(
                2,
                3,
                &[1, -1, 1, -1, 1, 1],
                &[1, 0, -1, 0, 2, 1],
                &[-4, 5],
                0,
            )),
        ],
    )
    .expect("valid network");
    let pbs = PbsNetwork::new(&net).expect("compiles");
    let (ck, csk) = generate_pbs_client_keys();
    let sk = csk.decompress();
    assert!(serialized_bytes(&csk).expect("size") < serialized_bytes(&sk).expect("size"));
    let mut backend = PbsEncrypted::new(&sk).expect("key fits");
    for x in [[7, 0, 5], [1, 6, 2]] {
        let want = net.reference(&x).expect("reference");
        let up = pbs.encrypt_input_compressed(&ck, &x).expect("encrypt");
        assert_eq!(up.len(), pbs.input_ciphertexts());
        let cts: Vec<_> = up.iter().map(|c| c.decompress()).collect();
        let out = pbs
            .evaluate_encrypted(&mut backend, &cts)
            .expect("evaluate");
        assert_eq!(out.len(), pbs.output_ciphertexts());
        assert_eq!(pbs.decrypt_output(&ck, &out).expect("decrypt"), want);
    }
    let count = pbs.count();
    assert_eq!(backend.bootstraps(), 2 * count.pbs);
    // Some column sums are small enough for digit and carry from one many-LUT bootstrap, so
    // the encrypted run above went through tfhe-rs's many-LUT path too.
    assert!(count.many > 0, "{count:?}");
    // A ciphertext short of one input is a typed error, not a tfhe-rs assertion.
    let up = pbs
        .encrypt_input_compressed(&ck, &[0, 0, 0])
        .expect("encrypt");
    let cts: Vec<_> = up.iter().take(3).map(|c| c.decompress()).collect();
    assert!(matches!(
        pbs.evaluate_encrypted(&mut backend, &cts),
        Err(Error::CiphertextCount { .. })
    ));
}

#[test]
fn tiny_pooled_network_on_shortint_ciphertexts_equals_reference() {
    // conv 1→2 (1×1 kernel, a negative weight) → ReLU to 3 bits → max-pool 2×2 → dense 2→2 on
    // the default 128-bit parameter set; the image is 2×2 so the run is a few hundred lookups
    // (seconds). The random networks above cover wider windows, strides, padding and signed
    // activations on the clear digit backend, which runs the very same circuit.
    let lin = |outputs, fan_in, sign: &[i8], exp: &[i8], bias: &[i64]| Pow2Linear {
        name: "l".into(),
        outputs,
        fan_in,
        sign: sign.to_vec(),
        exp: exp.to_vec(),
        bias: bias.to_vec(),
        offset: 0,
    };
    let net = Network::new(
        InputFormat {
            shape: Shape { c: 1, h: 2, w: 2 },
            bits: 2,
            signed: false,
        },
        vec![
            Layer::Conv2d(
                lin(2, 1, &[1, -1], &[1, 0], &[0, 4]),
                ConvGeom {
                    in_ch: 1,
                    out_ch: 2,
                    kernel: 1,
                    stride: 1,
                    padding: 0,
                },
            ),
            Layer::Requant {
                shift: 0,
                bits: 3,
                relu: true,
            },
            Layer::MaxPool {
                kernel: 2,
                stride: 1,
                padding: 0,
            },
            Layer::Flatten,
            Layer::Dense(lin(2, 2, &[1, -1, -1, 1], &[0, 1, 0, 0], &[1, 2])),
        ],
    )
    .expect("valid network");
    let pbs = PbsNetwork::new(&net).expect("compiles");
    let count = pbs.count();
    assert_eq!(count.violations, 0);
    let (ck, csk) = generate_pbs_client_keys();
    let sk = csk.decompress();
    let mut backend = PbsEncrypted::new(&sk).expect("key fits");
    // The max sits in a different corner each time, and the second channel's max is the
    // smallest input.
    let inputs = [[3, 0, 1, 2], [0, 2, 3, 1]];
    for x in inputs {
        let want = net.reference(&x).expect("reference");
        let up = pbs.encrypt_input_compressed(&ck, &x).expect("encrypt");
        let cts: Vec<_> = up.iter().map(|c| c.decompress()).collect();
        let out = pbs
            .evaluate_encrypted(&mut backend, &cts)
            .expect("evaluate");
        assert_eq!(
            pbs.decrypt_output(&ck, &out).expect("decrypt"),
            want,
            "{x:?}"
        );
    }
    assert_eq!(backend.bootstraps(), inputs.len() as u64 * count.pbs);
    assert!(count.many > 0, "{count:?}");
}
