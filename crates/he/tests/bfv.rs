//! BFV layer: encodings, encryption, every operation against plaintext arithmetic mod t,
//! rotations, hoisting, serialisation and rejection of malformed inputs.

use rand_chacha::rand_core::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use secinfer_he::bfv::{decode_simd, encode_simd};
use secinfer_he::eval::rotate_rows;
use secinfer_he::kernels::{finish_outputs, Flood};
use secinfer_he::*;

fn rand_slots(rng: &mut ChaCha8Rng, n: usize, t: u64) -> Vec<u64> {
    (0..n).map(|_| rng.next_u64() % t).collect()
}

fn setup(name: &str) -> (Params, SecretKey) {
    let p = Params::by_name(name).expect("params");
    let sk = SecretKey::generate(&p);
    (p, sk)
}

#[test]
fn named_sets_validate_and_are_secure() {
    for name in ParamSet::names() {
        let set = ParamSet::by_name(name).expect("set");
        set.validate().expect("valid");
        let max = secinfer_he::params::he_standard_max_log_qp(set.n).expect("table");
        assert!(set.log2_qp() <= max, "{name}: {} > {max}", set.log2_qp());
    }
    // A set over the HE Standard bound is refused.
    let mut bad = ParamSet::by_name("n4096").expect("set");
    bad.p = secinfer_he::arith::prime_below(61, 8192, &bad.q).expect("prime");
    assert!(matches!(
        bad.validate(),
        Err(HeError::InsecureParams { .. })
    ));
    assert!(matches!(
        ParamSet::by_name("n1234"),
        Err(HeError::UnknownParamSet(_))
    ));
}

#[test]
fn simd_encode_decode_round_trip() {
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    for name in ["n4096", "n8192"] {
        let p = Params::by_name(name).expect("params");
        let v = rand_slots(&mut rng, p.n(), p.t());
        let m = encode_simd(&p, &v).expect("enc");
        assert_eq!(decode_simd(&p, &m).expect("dec"), v);
        // Slot-wise product = polynomial product mod (X^n+1, t).
        let w = rand_slots(&mut rng, p.n(), p.t());
        let mw = encode_simd(&p, &w).expect("enc");
        let prod = negacyclic(&m, &mw, p.t());
        let expect: Vec<u64> = v
            .iter()
            .zip(&w)
            .map(|(&a, &b)| (a as u128 * b as u128 % p.t() as u128) as u64)
            .collect();
        assert_eq!(decode_simd(&p, &prod).expect("dec"), expect);
    }
}

#[allow(clippy::needless_range_loop)]
fn negacyclic(a: &[u64], b: &[u64], t: u64) -> Vec<u64> {
    let n = a.len();
    let mut r = vec![0u128; n];
    let t128 = t as u128;
    for i in 0..n {
        if a[i] == 0 {
            continue;
        }
        for j in 0..n {
            let p = a[i] as u128 * b[j] as u128 % t128;
            let k = i + j;
            if k < n {
                r[k] = (r[k] + p) % t128;
            } else {
                r[k - n] = (r[k - n] + t128 - p) % t128;
            }
        }
    }
    r.into_iter().map(|x| x as u64).collect()
}

#[test]
fn encrypt_decrypt_all_sets() {
    let mut rng = ChaCha8Rng::seed_from_u64(2);
    for name in ["n4096", "n8192"] {
        let (p, sk) = setup(name);
        let v = rand_slots(&mut rng, p.n(), p.t());
        let ct = sk.encrypt(&v).expect("enc");
        assert_eq!(sk.decrypt(&ct).expect("dec"), v);
        let b = sk.noise_budget(&ct);
        assert!(b > 30.0, "{name}: fresh budget {b}");
    }
    // Coefficient encoding with t = 2^32.
    let (p, sk) = setup("n8192-z2k32");
    let m: Vec<u64> = (0..p.n()).map(|_| rng.next_u64() % p.t()).collect();
    let ct = sk.encrypt_coeffs(&m).expect("enc");
    assert_eq!(sk.decrypt_poly(&ct), m);
}

#[test]
fn operations_match_plaintext_arithmetic() {
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    for name in ["n4096", "n8192"] {
        let (p, sk) = setup(name);
        let t = p.t();
        let a = rand_slots(&mut rng, p.n(), t);
        let b = rand_slots(&mut rng, p.n(), t);
        let w = rand_slots(&mut rng, p.n(), t);
        let ca = sk.encrypt(&a).expect("enc");
        let cb = sk.encrypt(&b).expect("enc");
        let add: Vec<u64> = a.iter().zip(&b).map(|(&x, &y)| (x + y) % t).collect();
        let sub: Vec<u64> = a.iter().zip(&b).map(|(&x, &y)| (x + t - y) % t).collect();
        let mul: Vec<u64> = a
            .iter()
            .zip(&w)
            .map(|(&x, &y)| (x as u128 * y as u128 % t as u128) as u64)
            .collect();
        assert_eq!(sk.decrypt(&p.add(&ca, &cb)).expect("dec"), add);
        assert_eq!(sk.decrypt(&p.sub(&ca, &cb)).expect("dec"), sub);
        let pw = Plaintext::from_slots(&p, &w).expect("pt");
        let cm = p.mul_plain(&ca, &pw);
        assert_eq!(sk.decrypt(&cm).expect("dec"), mul);
        assert!(sk.noise_budget(&cm) > 3.0);
        // Adding a plaintext.
        let wpoly = encode_simd(&p, &w).expect("enc");
        let cpw = p.add_plain_poly(&ca, &wpoly, false);
        let apw: Vec<u64> = a.iter().zip(&w).map(|(&x, &y)| (x + y) % t).collect();
        assert_eq!(sk.decrypt(&cpw).expect("dec"), apw);
    }
}

#[test]
fn rotations_all_steps_and_hoisting() {
    let mut rng = ChaCha8Rng::seed_from_u64(4);
    let (p, sk) = setup("n4096");
    let rl = p.row_len();
    // Every power-of-two step, plus a sample of other steps (all steps' Galois elements are
    // distinct; the permutation tables are checked for every step below without keys).
    let mut steps: Vec<usize> = (0..11).map(|i| 1usize << i).collect();
    steps.extend([3, 5, 7, 100, 1000, 2047, 1535]);
    let keys = sk.rotation_keys(&steps, true);
    let v = rand_slots(&mut rng, p.n(), p.t());
    let ct = sk.encrypt(&v).expect("enc");
    let h = p.decompose(&ct);
    for &s in &steps {
        let r = p.rotate(&ct, s, &keys).expect("rot");
        let expect = rotate_rows(&v, s, rl);
        assert_eq!(sk.decrypt(&r).expect("dec"), expect, "step {s}");
        let rh = p.rotate_hoisted(&h, s, &keys).expect("hoisted");
        assert_eq!(sk.decrypt(&rh).expect("dec"), expect, "hoisted step {s}");
        assert!(sk.noise_budget(&r) > 30.0);
    }
    // Row swap.
    let sw = p
        .automorph(&ct, p.galois_elt_row_swap(), &keys)
        .expect("swap");
    let mut expect = v[rl..].to_vec();
    expect.extend_from_slice(&v[..rl]);
    assert_eq!(sk.decrypt(&sw).expect("dec"), expect);
    // Missing key is a typed error.
    assert!(matches!(
        p.rotate(&ct, 9, &keys),
        Err(HeError::MissingGaloisKey(_))
    ));
}

#[test]
fn every_rotation_step_permutes_slots() {
    // All n/2 steps of both SIMD sets on the plaintext side: the automorphism X -> X^{3^k}
    // applied to the encoded polynomial moves slot j+k to slot j in both rows.
    for name in ["n4096", "n8192"] {
        let p = Params::by_name(name).expect("params");
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        let v = rand_slots(&mut rng, p.n(), p.t());
        let m = encode_simd(&p, &v).expect("enc");
        let n = p.n();
        for k in 0..p.row_len() {
            let g = p.galois_elt_rotate(k);
            let mut out = vec![0u64; n];
            for (i, &c) in m.iter().enumerate() {
                let e = i * g % (2 * n);
                if e < n {
                    out[e] = c;
                } else {
                    out[e - n] = (p.t() - c) % p.t();
                }
            }
            let got = decode_simd(&p, &out).expect("dec");
            for j in [0usize, 1, k, p.row_len() - 1] {
                let j = j % p.row_len();
                assert_eq!(got[j], v[(j + k) % p.row_len()], "k={k}");
                assert_eq!(got[p.row_len() + j], v[p.row_len() + (j + k) % p.row_len()]);
            }
        }
    }
}

#[test]
fn n8192_rotation_and_digit_sizes() {
    let mut rng = ChaCha8Rng::seed_from_u64(6);
    for w in [20u32, 30, 40] {
        let set = ParamSet::by_name("n4096").expect("set").with_digit_bits(w);
        let p = Params::new(set).expect("params");
        let sk = SecretKey::generate(&p);
        let keys = sk.rotation_keys(&[1, 77], false);
        let v = rand_slots(&mut rng, p.n(), p.t());
        let ct = sk.encrypt(&v).expect("enc");
        let r = p.rotate(&ct, 77, &keys).expect("rot");
        assert_eq!(
            sk.decrypt(&r).expect("dec"),
            rotate_rows(&v, 77, p.row_len()),
            "w={w}"
        );
    }
    let (p, sk) = setup("n8192");
    let keys = sk.rotation_keys(&[1, 4095], false);
    let v = rand_slots(&mut rng, p.n(), p.t());
    let ct = sk.encrypt(&v).expect("enc");
    for s in [1, 4095] {
        let r = p.rotate(&ct, s, &keys).expect("rot");
        assert_eq!(
            sk.decrypt(&r).expect("dec"),
            rotate_rows(&v, s, p.row_len())
        );
    }
}

#[test]
fn serialisation_round_trip_and_rejection() {
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    for name in ["n4096", "n8192"] {
        let (p, sk) = setup(name);
        let v = rand_slots(&mut rng, p.n(), p.t());
        let sct = sk.encrypt_seeded(&v).expect("enc");
        let bytes = sct.to_bytes();
        // Seeded upload is half a full ciphertext.
        let full = sct.expand(&p).to_bytes();
        assert!(bytes.len() * 2 < full.len() + 100);
        let back = SeededCiphertext::from_bytes(&p, &bytes).expect("parse");
        assert_eq!(sk.decrypt(&back.expand(&p)).expect("dec"), v);
        let ct = Ciphertext::from_bytes(&p, &full).expect("parse");
        assert_eq!(sk.decrypt(&ct).expect("dec"), v);
        // Wrong sizes.
        assert!(matches!(
            Ciphertext::from_bytes(&p, &full[..full.len() - 8]),
            Err(HeError::WrongLength { .. })
        ));
        assert!(matches!(
            SeededCiphertext::from_bytes(&p, &bytes[1..]),
            Err(HeError::WrongLength { .. })
        ));
        // Out-of-range coefficient (≥ q).
        let mut bad = full.clone();
        bad[4..12].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(matches!(
            Ciphertext::from_bytes(&p, &bad),
            Err(HeError::OutOfRange { .. })
        ));
        let mut bad = bytes.clone();
        let l = bad.len();
        bad[l - 8..].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(matches!(
            SeededCiphertext::from_bytes(&p, &bad),
            Err(HeError::OutOfRange { .. })
        ));
        // Bad header.
        let mut bad = full.clone();
        bad[0] = b'X';
        assert!(matches!(
            Ciphertext::from_bytes(&p, &bad),
            Err(HeError::BadHeader(_))
        ));
        // Ciphertext of another parameter set.
        let other = Params::by_name(if name == "n4096" { "n8192" } else { "n4096" }).expect("p");
        let e = Ciphertext::from_bytes(&other, &full)
            .err()
            .expect("another set's bytes");
        assert_eq!(e.kind(), ErrorKind::Malformed, "{e}");
        // Every hostile decoding above is a malformed message to a caller matching kinds.
        for e in [
            Ciphertext::from_bytes(&p, &full[..full.len() - 8]).err(),
            SeededCiphertext::from_bytes(&p, &bytes[1..]).err(),
            Ciphertext::from_bytes(&p, &bad).err(),
        ] {
            assert_eq!(e.map(|e| e.kind()), Some(ErrorKind::Malformed));
        }
        // Public key round trip.
        let pk = sk.public_key();
        let pkb = pk.to_bytes();
        assert!(PublicKey::from_bytes(&p, &pkb).is_ok());
        let e = PublicKey::from_bytes(&p, &pkb[..pkb.len() - 1])
            .err()
            .expect("short key");
        assert_eq!(e.kind(), ErrorKind::Malformed, "{e}");
        // Plaintext out of range.
        assert!(matches!(
            Plaintext::from_slots(&p, &[p.t()]),
            Err(HeError::OutOfRange { .. })
        ));
    }
}

#[test]
fn response_flooding_mod_switch_and_serialisation() {
    let mut rng = ChaCha8Rng::seed_from_u64(8);
    // n8192 has room for 40-bit statistical flooding; n4096 does not and says so.
    let (p, sk) = setup("n8192");
    let pk = sk.public_key();
    let v = rand_slots(&mut rng, p.n(), p.t());
    let w = rand_slots(&mut rng, p.n(), p.t());
    let ct = p.mul_plain(
        &sk.encrypt(&v).expect("enc"),
        &Plaintext::from_slots(&p, &w).expect("pt"),
    );
    let res = finish_outputs(&p, &pk, std::slice::from_ref(&ct), Flood::Statistical(40))
        .expect("flood fits");
    assert!(res.flood_stat_bits >= 40.0);
    let bytes = res.responses[0].to_bytes();
    let full = ct.to_bytes().len();
    assert!(
        bytes.len() * 3 < full,
        "response {} vs ciphertext {}",
        bytes.len(),
        full
    );
    let r = Response::from_bytes(&p, &bytes).expect("parse");
    let dec = sk.decrypt_response(&r).expect("dec");
    let t = p.t();
    for i in 0..p.n() {
        let y = (v[i] as u128 * w[i] as u128 % t as u128) as u64;
        assert_eq!((dec[i] + res.masks[0][i]) % t, y);
    }
    assert!(Response::from_bytes(&p, &bytes[..bytes.len() - 1]).is_err());
    let mut bad = bytes.clone();
    bad[3] = 63;
    assert!(Response::from_bytes(&p, &bad).is_err());

    let (p4, sk4) = setup("n4096");
    let pk4 = sk4.public_key();
    let v4 = rand_slots(&mut rng, p4.n(), p4.t());
    let ct4 = p4.mul_plain(
        &sk4.encrypt(&v4).expect("enc"),
        &Plaintext::from_slots(&p4, &v4).expect("pt"),
    );
    assert!(matches!(
        finish_outputs(
            &p4,
            &pk4,
            std::slice::from_ref(&ct4),
            Flood::Statistical(40)
        ),
        Err(HeError::NoiseBudget(_))
    ));
    let be = finish_outputs(&p4, &pk4, std::slice::from_ref(&ct4), Flood::BestEffort(40))
        .expect("best effort");
    let dec = sk4.decrypt_response(&be.responses[0]).expect("dec");
    for i in 0..p4.n() {
        let y = (v4[i] as u128 * v4[i] as u128 % p4.t() as u128) as u64;
        assert_eq!((dec[i] + be.masks[0][i]) % p4.t(), y);
    }
}

#[test]
fn every_rotation_step_with_keys_n4096() {
    // All n/2 − 1 non-trivial steps on real ciphertexts: a key per step (generated, used, dropped),
    // hoisted from one decomposition; every 64th step is also checked unhoisted.
    let mut rng = ChaCha8Rng::seed_from_u64(9);
    let (p, sk) = setup("n4096");
    let v = rand_slots(&mut rng, p.n(), p.t());
    let ct = sk.encrypt(&v).expect("enc");
    let h = p.decompose(&ct);
    for s in 1..p.row_len() {
        let keys = sk.rotation_keys(&[s], false);
        let expect = rotate_rows(&v, s, p.row_len());
        let rh = p.rotate_hoisted(&h, s, &keys).expect("hoisted");
        assert_eq!(sk.decrypt(&rh).expect("dec"), expect, "hoisted step {s}");
        if s % 64 == 0 {
            let r = p.rotate(&ct, s, &keys).expect("rot");
            assert_eq!(sk.decrypt(&r).expect("dec"), expect, "step {s}");
        }
    }
}

#[test]
fn galois_keys_serialisation() {
    let mut rng = ChaCha8Rng::seed_from_u64(10);
    let (p, sk) = setup("n4096");
    let keys = sk.rotation_keys(&[1, 5, 300], true);
    let bytes = keys.to_bytes();
    assert_eq!(bytes.len(), keys.upload_bytes());
    let back = GaloisKeys::from_bytes(&p, &bytes).expect("parse");
    assert_eq!(back.elements(), keys.elements());
    let v = rand_slots(&mut rng, p.n(), p.t());
    let ct = sk.encrypt(&v).expect("enc");
    let r = p.rotate(&ct, 300, &back).expect("rot");
    assert_eq!(
        sk.decrypt(&r).expect("dec"),
        rotate_rows(&v, 300, p.row_len())
    );
    assert!(matches!(
        GaloisKeys::from_bytes(&p, &bytes[..bytes.len() - 8]),
        Err(HeError::WrongLength { .. })
    ));
    let mut bad = bytes.clone();
    bad[8..16].copy_from_slice(&4u64.to_le_bytes()); // even Galois element
    assert!(matches!(
        GaloisKeys::from_bytes(&p, &bad),
        Err(HeError::BadHeader(_))
    ));
    let mut bad = bytes.clone();
    let l = bad.len();
    bad[l - 8..].copy_from_slice(&u64::MAX.to_le_bytes());
    assert!(matches!(
        GaloisKeys::from_bytes(&p, &bad),
        Err(HeError::OutOfRange { .. })
    ));
}

#[test]
fn lazy_hoisted_rotations_sum_equals_plain_sum() {
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    for name in ["n4096", "n8192"] {
        let (p, sk) = setup(name);
        let steps = [0usize, 1, 2, 5, 64, 1000];
        let keys = sk.rotation_keys(&steps, false);
        let v = rand_slots(&mut rng, p.n(), p.t());
        let ct = sk.encrypt(&v).expect("enc");
        let h = p.decompose(&ct);
        let mut acc = p.rotate_hoisted_ext(&h, steps[0], &keys).expect("ext");
        let mut plain = ct.clone();
        for &s in &steps[1..] {
            p.ext_add_assign(&mut acc, &p.rotate_hoisted_ext(&h, s, &keys).expect("ext"));
            plain = p.add(&plain, &p.rotate(&ct, s, &keys).expect("rot"));
        }
        let lazy = p.mod_down_ext(acc);
        assert_eq!(
            sk.decrypt(&lazy).expect("dec"),
            sk.decrypt(&plain).expect("dec"),
            "{name}"
        );
        assert!(sk.noise_budget(&lazy) > 30.0);
    }
}

#[test]
fn n4096_is_three_30_bit_primes_with_q_one_mod_t() {
    // The fast key switch relies on these: every modulus in (2^29, 2^30) (tfhe-ntt's faster
    // 32-bit path below 2^30, reduction-free lifts between moduli of one octave), Q ≡ 1
    // (mod t) (smallest ScMult rounding term), and the HE Standard bound counting P.
    let set = ParamSet::by_name("n4096").expect("set");
    assert_eq!(set.q.len(), 2);
    for &m in set.q.iter().chain(std::iter::once(&set.p)) {
        assert!(m > (1 << 29) && m < (1 << 30), "{m}");
        assert_eq!(m % 8192, 1);
    }
    let q_mod_t = (set.q[0] as u128 * set.q[1] as u128 % set.t as u128) as u64;
    assert_eq!(q_mod_t, 1);
    assert!(set.log2_qp() <= 109.0);
    assert!(set.log2_q() > 59.5, "{}", set.log2_q());
    // A SIMD set whose Q is not ≡ 1 (mod t) is refused.
    let mut bad = set.clone();
    bad.q[1] =
        secinfer_he::arith::prime_below(31, 8192, &[set.q[0], set.q[1], set.p]).expect("prime");
    assert!(matches!(bad.validate(), Err(HeError::InvalidParams(_))));
}

#[test]
fn rotation_noise_within_estimate_all_paths() {
    // Plain rotations use whole centered limbs as digits, hoisted ones base-2^w digits, lazy
    // ones defer the division by P: each path's measured noise must stay under 10 standard
    // deviations of the variance tracker (what flooding is sized from), and a plain rotation
    // must leave most of the fresh budget.
    let mut rng = ChaCha8Rng::seed_from_u64(12);
    for name in ["n4096", "n8192"] {
        let (p, sk) = setup(name);
        let steps = [1usize, 3, 100, 1000];
        let keys = sk.rotation_keys(&steps, false);
        let v = rand_slots(&mut rng, p.n(), p.t());
        let ct = sk.encrypt(&v).expect("enc");
        let h = p.decompose(&ct);
        let headroom = p.set().log2_delta_half();
        for &s in &steps {
            let expect = rotate_rows(&v, s, p.row_len());
            let plain = p.rotate(&ct, s, &keys).expect("rot");
            let hoisted = p.rotate_hoisted(&h, s, &keys).expect("hoisted");
            let lazy = p.mod_down_ext(p.rotate_hoisted_ext(&h, s, &keys).expect("ext"));
            let lazy_plain = p.mod_down_ext(p.rotate_ext(&ct, s, &keys).expect("ext"));
            for (what, r) in [
                ("plain", &plain),
                ("hoisted", &hoisted),
                ("lazy hoisted", &lazy),
                ("lazy plain", &lazy_plain),
            ] {
                assert_eq!(
                    sk.decrypt(r).expect("dec"),
                    expect,
                    "{name} {what} step {s}"
                );
                let measured = headroom - sk.noise_budget(r);
                let bound = r.est_noise_log2() + 10f64.log2();
                assert!(
                    measured <= bound,
                    "{name} {what} step {s}: noise 2^{measured:.1} above 10σ = 2^{bound:.1}"
                );
                assert!(sk.noise_budget(r) > 30.0, "{name} {what} step {s}");
            }
        }
    }
}

#[test]
fn serialisation_rejects_each_modulus_at_its_bound() {
    // Every residue block is checked against its own prime: writing q_i (the first value out
    // of range) into limb i of a ciphertext, or P into the P block of a Galois key, fails;
    // q_i − 1 parses.
    let mut rng = ChaCha8Rng::seed_from_u64(13);
    let (p, sk) = setup("n4096");
    let n = p.n();
    let set = p.set().clone();
    let v = rand_slots(&mut rng, n, p.t());
    let full = sk.encrypt(&v).expect("enc").to_bytes();
    for (i, &q) in set.q.iter().enumerate() {
        for (component, base) in [(0usize, 4usize), (1, 4 + 8 * n * set.q.len())] {
            let at = base + 8 * i * n + 8 * 17;
            let mut bad = full.clone();
            bad[at..at + 8].copy_from_slice(&q.to_le_bytes());
            assert!(
                matches!(
                    Ciphertext::from_bytes(&p, &bad),
                    Err(HeError::OutOfRange { modulus, .. }) if modulus == q
                ),
                "c{component} limb {i}"
            );
            bad[at..at + 8].copy_from_slice(&(q - 1).to_le_bytes());
            assert!(
                Ciphertext::from_bytes(&p, &bad).is_ok(),
                "c{component} limb {i}"
            );
        }
    }
    let keys = sk.rotation_keys(&[1], false);
    let bytes = keys.to_bytes();
    // Compact residues: 4 bytes each at n4096 (every modulus < 2^32).
    let rb = p.residue_bytes();
    assert_eq!(rb, 4);
    // Header (8), Galois element (8), first digit's seed (32), then (L+1)·n residues: the P
    // block is the last n of them.
    let at = 8 + 8 + 32 + rb * (set.q.len() * n + 5);
    let mut bad = bytes.clone();
    bad[at..at + rb].copy_from_slice(&set.p.to_le_bytes()[..rb]);
    assert!(matches!(
        GaloisKeys::from_bytes(&p, &bad),
        Err(HeError::OutOfRange { modulus, .. }) if modulus == set.p
    ));
    bad[at..at + rb].copy_from_slice(&(set.p - 1).to_le_bytes()[..rb]);
    assert!(GaloisKeys::from_bytes(&p, &bad).is_ok());
    // The same for a seeded upload's second limb and the public key's first.
    let sct = sk.encrypt_seeded(&v).expect("enc").to_bytes();
    assert_eq!(sct.len(), 4 + 32 + rb * n * set.q.len());
    let at = 4 + 32 + rb * (n + 3);
    let mut bad = sct.clone();
    bad[at..at + rb].copy_from_slice(&set.q[1].to_le_bytes()[..rb]);
    assert!(matches!(
        SeededCiphertext::from_bytes(&p, &bad),
        Err(HeError::OutOfRange { modulus, .. }) if modulus == set.q[1]
    ));
    let pk = sk.public_key().to_bytes();
    let mut bad = pk.clone();
    bad[32..32 + rb].copy_from_slice(&set.q[0].to_le_bytes()[..rb]);
    assert!(matches!(
        PublicKey::from_bytes(&p, &bad),
        Err(HeError::OutOfRange { modulus, .. }) if modulus == set.q[0]
    ));
    assert!(PublicKey::from_bytes(&p, &pk).is_ok());
}
