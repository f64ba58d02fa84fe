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
    let signed_requant = Network::new(
        flat(4),
        vec![
            Layer::Dense(random_lin(&mut rng, 2, 4, 0, 3)),
            Layer::Requant {
                shift: 0,
                bits: 3,
                relu: false,
            },
        ],
    )
    .expect("valid");
    assert!(matches!(
        PbsNetwork::new(&signed_requant),
        Err(Error::Layer { index: 1, .. })
    ));
    let pool = Network::new(
        InputFormat {
            shape: Shape { c: 1, h: 2, w: 2 },
            bits: 3,
            signed: false,
        },
        vec![Layer::MaxPool {
            kernel: 2,
            stride: 2,
            padding: 0,
        }],
    )
    .expect("valid");
    assert!(matches!(
        PbsNetwork::new(&pool),
        Err(Error::Layer {
            index: 0,
            kind: "maxpool",
            ..
        })
    ));
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
