//! A tiny network evaluated on tfhe-rs ciphertexts decrypts to the plaintext reference bit for
//! bit. It runs with the default 128-bit parameter set (no test-only parameters): the network
//! is kept small instead, so the test stays within seconds.
use secinfer_tfhe::{
    decompress, generate_client_keys, serialized_bytes, Ciphertext, ConvGeom, Encrypted,
    InputFormat, Layer, Network, Pow2Linear, Shape,
};

fn lin(
    name: &str,
    outputs: usize,
    fan_in: usize,
    sign: &[i8],
    exp: &[i8],
    bias: &[i64],
    offset: i32,
) -> Pow2Linear {
    let n = outputs * fan_in;
    Pow2Linear {
        name: name.into(),
        outputs,
        fan_in,
        sign: sign.iter().cycle().take(n).copied().collect(),
        exp: exp.iter().cycle().take(n).copied().collect(),
        bias: bias.to_vec(),
        offset,
    }
}

#[test]
fn tiny_network_encrypted_equals_reference() {
    // conv (1→2 channels, 2×2, stride 1) → ReLU → max-pool 2×2 → dense 2→2.
    let input = InputFormat {
        shape: Shape { c: 1, h: 3, w: 3 },
        bits: 3,
        signed: true,
    };
    let g = ConvGeom {
        in_ch: 1,
        out_ch: 2,
        kernel: 2,
        stride: 1,
        padding: 0,
    };
    let net = Network::new(
        input,
        vec![
            Layer::Conv2d(
                lin(
                    "c",
                    2,
                    4,
                    &[1, -1, 0, 1, -1, 1, 1, 0],
                    &[0, -1, 0, 1, 0, 0, -1, 0],
                    &[1, -2],
                    1,
                ),
                g,
            ),
            Layer::Requant {
                shift: 1,
                bits: 3,
                relu: true,
            },
            Layer::MaxPool {
                kernel: 2,
                stride: 2,
                padding: 0,
            },
            Layer::Flatten,
            Layer::Dense(lin("d", 2, 2, &[1, -1, -1, 1], &[0, 1, -1, 0], &[0, 3], 0)),
        ],
    )
    .expect("valid network");
    // The path a client takes: a seeded server key and seeded input ciphertexts, which the
    // server expands.
    let (ck, csk) = generate_client_keys();
    let sk = csk.decompress();
    let (up, full) = (
        serialized_bytes(&csk).expect("size"),
        serialized_bytes(&sk).expect("size"),
    );
    assert!(up > 1 << 20, "a 128-bit server key is megabytes");
    assert!(
        up * 4 < full,
        "the seeded key is a fraction of the expanded one: {up} vs {full}"
    );
    // One input with both extremes of the 3-bit format, negatives and zero (each encrypted
    // run costs about a thousand bootstraps).
    let x = vec![-4, 3, 0, 1, -1, 2, 3, -4, 1];
    let want = net.reference(&x).expect("reference");
    let cts = decompress(&net.encrypt_input_compressed(&ck, &x).expect("encrypt"));
    assert_eq!(cts.len(), 9 * 3 + 1);
    let mut b = Encrypted::new(&sk);
    let out = net.evaluate_encrypted(&mut b, &cts).expect("evaluate");
    assert_eq!(
        net.decrypt_output(&ck, &out).expect("decrypt"),
        want,
        "input {x:?}"
    );
    assert!(
        out.iter().all(|c| matches!(c, Ciphertext::Encrypted(_))),
        "no output bit is a trivial (public) ciphertext"
    );
    assert_eq!(
        b.bootstraps(),
        net.count().pbs(),
        "the counter predicts the bootstraps run"
    );
    let short = net.encrypt_input(&ck, &[0; 9]).expect("encrypt");
    assert!(
        net.evaluate(&sk, &short[..5]).is_err(),
        "a short ciphertext vector is rejected"
    );
}
