//! BFV with three and four Q primes ("wide Q"): encryption, products, rotations, the noise
//! budget, flooded responses and the wire forms, against plaintext arithmetic mod t.

use rand_chacha::rand_core::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use secinfer_he::arith::prime_below;
use secinfer_he::bfv::encode_simd;
use secinfer_he::eval::rotate_rows;
use secinfer_he::*;

/// n, t of `t_bits` bits (SIMD), `l` Q primes of `q_bits` bits ≡ 1 mod 2n·t (so Q ≡ 1 mod t),
/// P of `p_bits` bits.
fn wide_set(n: usize, l: usize, q_bits: u32, p_bits: u32, t_bits: u32) -> ParamSet {
    let two_n = 2 * n as u64;
    let t = prime_below(t_bits, two_n, &[]).expect("t");
    let mut q = Vec::new();
    for _ in 0..l {
        q.push(prime_below(q_bits, two_n * t, &q).expect("q"));
    }
    let p = prime_below(p_bits, two_n, &q).expect("p");
    ParamSet {
        name: format!("wide-n{n}-l{l}"),
        n,
        t,
        encoding: Encoding::Simd,
        q,
        p,
        sigma: 3.2,
        ks_digit_bits: 31,
    }
}

/// The slot-wise product mod t.
fn slot_product(v: &[u64], w: &[u64], t: u64) -> Vec<u64> {
    v.iter()
        .zip(w)
        .map(|(&a, &b)| (a as u128 * b as u128 % t as u128) as u64)
        .collect()
}

fn rand_slots(rng: &mut ChaCha8Rng, n: usize, t: u64) -> Vec<u64> {
    (0..n).map(|_| rng.next_u64() % t).collect()
}

/// The sets under test: three 56-bit primes with a 50-bit P at n = 8192 (log2 QP < 218), four
/// 42-bit primes there, and three 62-bit primes with a 62-bit P at n = 16384 (P above the Q
/// primes: the other branch of the division by P).
fn sets() -> Vec<Params> {
    [
        wide_set(8192, 3, 56, 50, 20),
        wide_set(8192, 4, 42, 50, 20),
        wide_set(16384, 3, 62, 62, 23),
    ]
    .into_iter()
    .map(|s| Params::new(s).expect("valid wide set"))
    .collect()
}

#[test]
fn wide_q_encrypt_multiply_rotate() {
    let mut rng = ChaCha8Rng::seed_from_u64(31);
    for p in sets() {
        let name = &p.set().name;
        let (n, t) = (p.n(), p.t());
        let sk = SecretKey::generate(&p);
        let v = rand_slots(&mut rng, n, t);
        let w = rand_slots(&mut rng, n, t);
        let ct = sk.encrypt(&v).expect("enc");
        assert_eq!(sk.decrypt(&ct).expect("dec"), v, "{name}");
        // A fresh ciphertext's noise is the encryption error (|e| ≲ 20): the budget is
        // log2(Δ/2) less a few bits.
        let log_half_delta = p.log2_q() - (t as f64).log2() - 1.0;
        let b = sk.noise_budget(&ct);
        assert!(
            (log_half_delta - 8.0..log_half_delta - 2.0).contains(&b),
            "{name}: fresh budget {b} against log2(Δ/2) = {log_half_delta}"
        );
        let pw = Plaintext::from_slots(&p, &w).expect("pt");
        let prod = p.mul_plain(&ct, &pw);
        let want = slot_product(&v, &w, t);
        assert_eq!(sk.decrypt(&prod).expect("dec"), want, "{name}");
        let bp = sk.noise_budget(&prod);
        assert!(bp > 10.0 && bp < b - 20.0, "{name}: product budget {bp}");
        let sum = p.add(&prod, &ct);
        let want_sum: Vec<u64> = want.iter().zip(&v).map(|(&a, &b)| (a + b) % t).collect();
        assert_eq!(sk.decrypt(&sum).expect("dec"), want_sum, "{name}");
        // Rotations: plain and hoisted, with the row swap.
        let steps = [1usize, 77, n / 2 - 1];
        let keys = sk.rotation_keys(&steps, true);
        let h = p.decompose(&ct);
        for &s in &steps {
            let want = rotate_rows(&v, s, p.row_len());
            let r = p.rotate(&ct, s, &keys).expect("rotate");
            assert_eq!(sk.decrypt(&r).expect("dec"), want, "{name} step {s}");
            assert!(sk.noise_budget(&r) > b - 12.0, "{name}: rotation noise");
            let rh = p.rotate_hoisted(&h, s, &keys).expect("hoisted");
            assert_eq!(sk.decrypt(&rh).expect("dec"), want, "{name} hoisted {s}");
        }
        let mut lazy = p.lift_ext(&ct);
        for &s in &steps {
            let r = p.rotate_hoisted_ext(&h, s, &keys).expect("lazy");
            p.ext_add_assign(&mut lazy, &r);
        }
        let lazy = p.mod_down_ext(lazy);
        let mut want = v.clone();
        for &s in &steps {
            for (o, x) in want.iter_mut().zip(rotate_rows(&v, s, p.row_len())) {
                *o = (*o + x) % t;
            }
        }
        assert_eq!(sk.decrypt(&lazy).expect("dec"), want, "{name} lazy sum");
        let swapped = p
            .automorph(&ct, p.galois_elt_row_swap(), &keys)
            .expect("swap");
        let half = n / 2;
        let want: Vec<u64> = v[half..].iter().chain(&v[..half]).copied().collect();
        assert_eq!(sk.decrypt(&swapped).expect("dec"), want, "{name} row swap");
    }
}

/// A ciphertext of uniform residues has noise up to Δ/2 in some coefficient: its budget is 0
/// (the path where the noise does not fit the first two primes), as with two primes.
#[test]
fn wide_q_noise_budget_of_random_ciphertext_is_zero() {
    let mut rng = ChaCha8Rng::seed_from_u64(32);
    for p in sets().into_iter().take(2) {
        let sk = SecretKey::generate(&p);
        let n = p.n();
        let mut bytes = b"CTX1".to_vec();
        for _ in 0..2 {
            for &q in &p.set().q {
                for _ in 0..n {
                    bytes.extend_from_slice(&(rng.next_u64() % q).to_le_bytes());
                }
            }
        }
        let ct = Ciphertext::from_bytes(&p, &bytes).expect("parse");
        let b = sk.noise_budget(&ct);
        assert!(b.abs() < 0.01, "{}: random budget {b}", p.set().name);
    }
}

#[test]
fn wide_q_flooded_responses_decrypt() {
    let mut rng = ChaCha8Rng::seed_from_u64(33);
    for p in sets() {
        let name = &p.set().name;
        let (n, t) = (p.n(), p.t());
        let sk = SecretKey::generate(&p);
        let pk = PublicKey::from_bytes(&p, &sk.public_key().to_bytes()).expect("pk");
        let v = rand_slots(&mut rng, n, t);
        let w = rand_slots(&mut rng, n, t);
        let prod = p.mul_plain(
            &sk.encrypt(&v).expect("enc"),
            &Plaintext::from_slots(&p, &w).expect("pt"),
        );
        let want = slot_product(&v, &w, t);
        // CHOCO's unmasked finish: 2^-40 and more.
        let (r, stat) = choco::finish(&p, &pk, &prod, 40).expect("room for 2^-40");
        assert!(stat >= 40.0, "{name}: {stat}");
        let r = Response::from_bytes(&p, &r.to_bytes()).expect("parse");
        assert_eq!(sk.decrypt_response(&r).expect("dec"), want, "{name}");
        // A masked response with a 2^100 flood: decryption plus the mask is the product.
        let mask = rand_slots(&mut rng, n, t);
        let mpoly = encode_simd(&p, &mask).expect("mask");
        let k = choco::response_log_q(&p);
        let r = p
            .finish_response(&prod, &pk, 100, Some(&mpoly), k)
            .expect("masked");
        let dec = sk.decrypt_response(&r).expect("dec");
        for i in 0..n {
            assert_eq!((dec[i] + mask[i]) % t, want[i], "{name} slot {i}");
        }
        // Amplitudes of 2^126 and more are refused (Q/4 lies above them here).
        assert!(matches!(
            p.finish_response(&prod, &pk, 126, None, k),
            Err(HeError::NoiseBudget(_))
        ));
    }
}

#[test]
fn wide_q_wire_forms_checked() {
    let p = &sets()[0];
    let n = p.n();
    let sk = SecretKey::generate(p);
    let v: Vec<u64> = (0..n as u64).map(|i| i % p.t()).collect();
    let sc = sk.encrypt_seeded(&v).expect("enc");
    let bytes = sc.to_bytes();
    assert_eq!(bytes.len(), 4 + 32 + 8 * n * 3);
    let back = SeededCiphertext::from_bytes(p, &bytes).expect("parse");
    assert_eq!(sk.decrypt(&back.expand(p)).expect("dec"), v);
    assert!(matches!(
        SeededCiphertext::from_bytes(p, &bytes[..bytes.len() - 8]),
        Err(HeError::WrongLength { .. })
    ));
    // A residue of the third prime at its modulus.
    let mut bad = bytes.clone();
    let at = 36 + 8 * (2 * n + 5);
    bad[at..at + 8].copy_from_slice(&p.set().q[2].to_le_bytes());
    assert!(matches!(
        SeededCiphertext::from_bytes(p, &bad),
        Err(HeError::OutOfRange { .. })
    ));
    let ct = sk.encrypt(&v).expect("enc");
    let full = ct.to_bytes();
    assert_eq!(full.len(), 4 + 2 * 8 * n * 3);
    assert_eq!(
        sk.decrypt(&Ciphertext::from_bytes(p, &full).expect("parse"))
            .expect("dec"),
        v
    );
    let keys = sk.rotation_keys(&[3], false);
    let kb = keys.to_bytes();
    assert_eq!(kb.len(), keys.upload_bytes());
    let back = GaloisKeys::from_bytes(p, &kb).expect("keys");
    let r = p.rotate(&ct, 3, &back).expect("rotate");
    assert_eq!(
        sk.decrypt(&r).expect("dec"),
        rotate_rows(&v, 3, p.row_len())
    );
    let mut bad = kb.clone();
    let last = bad.len() - 8;
    bad[last..].copy_from_slice(&p.set().p.to_le_bytes());
    assert!(matches!(
        GaloisKeys::from_bytes(p, &bad),
        Err(HeError::OutOfRange { .. })
    ));
}

#[test]
fn wide_q_validation() {
    // Three 62-bit primes and a 62-bit P exceed n = 8192's 218 bits.
    assert!(matches!(
        wide_set(8192, 3, 62, 62, 20).validate(),
        Err(HeError::InsecureParams { .. })
    ));
    // Five primes are refused whatever their size.
    assert!(matches!(
        wide_set(16384, 5, 50, 50, 20).validate(),
        Err(HeError::InvalidParams(_))
    ));
    // The rescale keeps q0 and q1 and needs q1 < q0 < 2·q1.
    let mut s = wide_set(8192, 3, 56, 50, 20);
    s.q.swap(0, 1);
    assert!(matches!(s.validate(), Err(HeError::InvalidParams(_))));
    wide_set(16384, 4, 62, 62, 20)
        .validate()
        .expect("four primes fit n = 16384");
}
