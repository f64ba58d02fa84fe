//! Known answers of the one- and two-prime sets' deterministic arithmetic (a fixed secret
//! key, fixed ciphertexts and responses): products, key switching's division by P, decryption
//! and response decryption. The wide-Q paths must leave these words unchanged; the constants
//! were taken from the build before Q could have three primes.
use super::*;
use rand_core::{RngCore, SeedableRng};

fn fnv(h: &mut u64, words: &[u64]) {
    for &w in words {
        for b in w.to_le_bytes() {
            *h ^= b as u64;
            *h = h.wrapping_mul(0x100_0000_01b3);
        }
    }
}

fn digest(name: &str) -> u64 {
    let params = Params::by_name(name).expect("set");
    let n = params.n();
    let l = params.l();
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(24);
    let coeffs: Vec<i64> = (0..n).map(|_| (rng.next_u64() % 3) as i64 - 1).collect();
    let sk = SecretKey::from_coeffs(&params, coeffs);
    let mut rand_res = |count: usize| -> Vec<u64> {
        let mods = params.ext_mods();
        (0..count * n)
            .map(|k| rng.next_u64() % mods[k / n].q)
            .collect()
    };
    let ct = Ciphertext {
        c0: rand_res(l),
        c1: rand_res(l),
        var: 10.0,
    };
    let mut ext = rand_res(l + 1);
    let t = params.t();
    let w: Vec<u64> = (0..n as u64).map(|i| (i * 7919 + 11) % t).collect();
    let pt = Plaintext::from_slots(&params, &w).expect("pt");
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    let prod = params.mul_plain(&ct, &pt);
    fnv(&mut h, &prod.c0);
    fnv(&mut h, &prod.c1);
    fnv(&mut h, &[prod.var.to_bits()]);
    fnv(&mut h, &params.mod_down(&mut ext));
    fnv(&mut h, &sk.decrypt_poly(&ct));
    fnv(&mut h, &params.0.delta_mod_q);
    let k = 40u32.min(max_response_bits(&params));
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(25);
    let r = Response {
        log_q: k,
        c0: (0..n).map(|_| rng.next_u64() >> (64 - k)).collect(),
        c1: (0..n).map(|_| rng.next_u64() >> (64 - k)).collect(),
    };
    fnv(&mut h, &sk.decrypt_response_poly(&r).expect("response"));
    fnv(
        &mut h,
        &r.to_bytes().iter().map(|&b| b as u64).collect::<Vec<_>>(),
    );
    h
}

#[test]
fn two_prime_words_unchanged() {
    for (name, want) in [
        ("n4096", 0x45a6_97f3_e141_2430u64),
        ("n8192", 0x858b_49a1_0175_abf6),
        ("n8192-t23", 0xf585_f11f_23cf_ef95),
    ] {
        assert_eq!(digest(name), want, "{name}");
    }
}
