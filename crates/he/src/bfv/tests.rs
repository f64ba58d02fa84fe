use super::*;

/// The task-split plain rotation (`ks32::rotate_limbs`) gives the same words with one and
/// with two threads, and the same words as the limb decomposition followed by the hoisted
/// key switch (`ks32::decompose` + `ks32::switch_permute`) that it replaces.
#[test]
fn rotate_limbs_two_threads_bit_exact() {
    let params = Params::by_name("n4096").expect("n4096");
    assert!(params.0.ks32.is_some());
    let sk = SecretKey::generate(&params);
    let steps = [1usize, 5, 1000];
    let keys = sk.rotation_keys(&steps, false);
    let t = params.t();
    let v: Vec<u64> = (0..params.n() as u64).map(|i| (i * 7919 + 3) % t).collect();
    let ct = sk.encrypt(&v).expect("encrypt");
    let pool = |k: usize| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(k)
            .build()
            .expect("pool")
    };
    let (p1, p2) = (pool(1), pool(2));
    for &s in &steps {
        let g = params.galois_elt_rotate(s);
        let key = &keys.keys[&g];
        let reference = {
            let digits = crate::ks32::decompose(&params, &ct.c1, true);
            let (kb, ka, kbs, kas) = key.key32(Some(&params.limb_key_indices()));
            crate::ks32::switch_permute(&params, &ct.c0, &digits, &kb, &ka, &kbs, &kas, &key.perms)
        };
        let one = p1.install(|| params.rotate(&ct, s, &keys).expect("rotate"));
        assert_eq!((&one.c0, &one.c1), (&reference.0, &reference.1));
        // Repeat on the two-thread pool: which thread claims which task varies per run.
        for _ in 0..20 {
            let two = p2
                .install(|| rayon::join(|| params.rotate(&ct, s, &keys).expect("rotate"), || ()).0);
            assert_eq!((&two.c0, &two.c1), (&one.c0, &one.c1));
        }
        let want = crate::eval::rotate_rows(&v, s, params.row_len());
        assert_eq!(sk.decrypt(&one).expect("decrypt"), want);
    }
}

/// Lazy hoisted rotations in slot order (`ks32::switch_shift_ext`: no gather, keys and
/// digits in slot order) equal the gather path (`ks32::switch_permute_ext`) word for word
/// once put back in NTT order, for steps from 1 to n/2 − 1 (the edge shifts included: one
/// segment of each half nearly empty), on one and two threads; the row swap has no slot key (gather
/// path); products with plaintexts and sums that mix both orders, and the mod-down of a
/// slot-order sum, equal the NTT-order computation word for word; decryption is right.
#[test]
fn slot_order_lazy_rotations_bit_exact() {
    let params = Params::by_name("n4096").expect("n4096");
    let n = params.n();
    let half = n / 2;
    let sk = SecretKey::generate(&params);
    let steps = [
        1usize, 2, 3, 5, 8, 16, 31, 64, 255, 256, 1000, 1023, 1024, 1025, 2046, 2047,
    ];
    assert_eq!(steps[steps.len() - 1], half - 1);
    let keys = sk.rotation_keys(&steps, true);
    let t = params.t();
    let v: Vec<u64> = (0..n as u64).map(|i| (i * 7919 + 3) % t).collect();
    let ct = sk.encrypt(&v).expect("encrypt");
    let h = params.decompose(&ct);
    let c0_p = params.times_p(&h.c0);
    let w: Vec<u64> = (0..n as u64).map(|i| (i * 31 + 5) % t).collect();
    let pt = Plaintext::from_slots(&params, &w).expect("pt");
    let p2 = rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .build()
        .expect("pool");
    let reference = |g: usize| {
        let key = &keys.keys[&g];
        let (kb, ka, kbs, kas) = key.key32(None);
        let (c0, c1) = crate::ks32::switch_permute_ext(
            &params,
            &c0_p,
            &h.digits32,
            &kb,
            &ka,
            &kbs,
            &kas,
            &key.perms,
        );
        ExtCiphertext {
            c0,
            c1,
            var: 0.0,
            slot: false,
        }
    };
    let mut sum_slot = params.lift_ext(&ct);
    let mut sum_ntt = params.lift_ext(&ct);
    for &s in &steps {
        let g = params.galois_elt_rotate(s);
        let want = reference(g);
        let mut one = params.rotate_hoisted_ext(&h, s, &keys).expect("lazy");
        assert!(one.slot, "step {s} should take the slot-order path");
        {
            let two =
                p2.install(|| rayon::join(|| params.rotate_hoisted_ext(&h, s, &keys), || ()).0);
            let two = two.expect("lazy");
            assert_eq!(
                (&two.c0, &two.c1),
                (&one.c0, &one.c1),
                "step {s}, 2 threads"
            );
            // Products and mixed-order sums, then one mod-down each.
            let prod = params.mul_plain_ext(&one, &pt);
            params.ext_add_assign(&mut sum_slot, &prod);
            params.ext_add_assign(&mut sum_ntt, &params.mul_plain_ext(&want, &pt));
        }
        params.reorder_ext(&mut one, false);
        assert_eq!((&one.c0, &one.c1), (&want.c0, &want.c1), "step {s}");
    }
    assert!(sum_slot.slot && !sum_ntt.slot);
    // The 64-bit division by P (`Params::mod_down`) of the NTT-order sum is the reference
    // for the 32-bit one (`ks32::mod_down`) on both orders.
    let (mut r0, mut r1) = (sum_ntt.c0.clone(), sum_ntt.c1.clone());
    let want = (params.mod_down(&mut r0), params.mod_down(&mut r1));
    let (a, b) = (params.mod_down_ext(sum_slot), params.mod_down_ext(sum_ntt));
    assert_eq!((&a.c0, &a.c1), (&b.c0, &b.c1));
    assert_eq!((&a.c0, &a.c1), (&want.0, &want.1));
    // The row swap is no shift in slot order: gather path, NTT order.
    let g = params.galois_elt_row_swap();
    let key = &keys.keys[&g];
    let (kb, ka, _, _) = key.key32(None);
    assert!(crate::ks32::slot_key(&params, &key.perms, &kb, &ka).is_none());
    // Decryption of a mod-down of one slot-order rotation.
    let r = params.mod_down_ext(params.rotate_hoisted_ext(&h, 5, &keys).expect("lazy"));
    let want = crate::eval::rotate_rows(&v, 5, params.row_len());
    assert_eq!(sk.decrypt(&r).expect("decrypt"), want);
}

/// `decrypt_poly`'s division-free rounding and Shoup CRT equal `mul_div_round` of the CRT
/// phase on every coefficient, for fresh ciphertexts and for uniformly random ones (whose
/// phases cover the whole of [0, Q), rounding boundaries included in expectation), and
/// at the edge phases 0, 1, Q − 1 and around Q/2.
#[test]
fn decrypt_fast_rounding_matches_reference() {
    use rand_core::{RngCore, SeedableRng};
    for name in ["n4096", "n8192"] {
        let params = Params::by_name(name).expect("set");
        let sk = SecretKey::generate(&params);
        let n = params.n();
        let t = params.t();
        let qb = params.0.q_big;
        let reference = |ct: &Ciphertext| -> Vec<u64> {
            sk.phase(ct)
                .into_iter()
                .map(|x| (crate::arith::mul_div_round(x, t, qb) % t as u128) as u64)
                .collect()
        };
        let v: Vec<u64> = (0..n as u64).map(|i| (i * 31 + 7) % t).collect();
        let ct = sk.encrypt(&v).expect("encrypt");
        assert_eq!(sk.decrypt_poly(&ct), reference(&ct));
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(7);
        for _ in 0..4 {
            let mut c0 = vec![0u64; params.l() * n];
            let mut c1 = vec![0u64; params.l() * n];
            for (i, md) in params.0.qs.iter().enumerate() {
                for k in i * n..(i + 1) * n {
                    c0[k] = rng.next_u64() % md.q;
                    c1[k] = rng.next_u64() % md.q;
                }
            }
            let ct = Ciphertext { c0, c1, var: 0.0 };
            assert_eq!(sk.decrypt_poly(&ct), reference(&ct));
        }
        // Phase = c0 when c1 = 0: put edge values in coefficient form into c0.
        let edges: Vec<u128> = vec![0, 1, qb - 1, qb / 2 - 1, qb / 2, qb / 2 + 1, qb / t as u128];
        let mut coef = vec![0u64; params.l() * n];
        for (i, md) in params.0.qs.iter().enumerate() {
            for (k, &e) in edges.iter().cycle().take(n).enumerate() {
                coef[i * n + k] = (e % md.q as u128) as u64;
            }
            md.to_ntt(&mut coef[i * n..(i + 1) * n]);
        }
        let ct = Ciphertext {
            c0: coef,
            c1: vec![0u64; params.l() * n],
            var: 0.0,
        };
        assert_eq!(sk.decrypt_poly(&ct), reference(&ct));
    }
}

/// Response decryption equals its definition, round(t·((c0 + c1·s) mod 2^k) / 2^k) mod t with
/// c1 centered and c1·s the negacyclic product over the integers (schoolbook, i128), for
/// random responses at every k that picks another path: the auxiliary 50-bit prime (n·2^k
/// below it), the first Q prime alone with u64 and with u128 rounding, and two Q primes;
/// on the CHOCO ring (62-bit Q primes) and on `n4096` (32-bit transforms). Also the bit
/// packing round trip at every field width, 56 and 57 (one or two words per load) included.
#[test]
fn response_decryption_matches_definition() {
    use rand_core::{RngCore, SeedableRng};
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(11);
    let choco = crate::choco::RnsParams::with_prime_bits(1, 23, 8192, 2).expect("ring");
    let sets = [
        (
            choco.sets()[0].clone(),
            vec![1u32, 20, 35, 36, 37, 40, 45, 56, 57, 62],
        ),
        (Params::by_name("n4096").expect("set"), vec![8u32, 17, 30]),
    ];
    for (params, ks) in sets {
        let sk = SecretKey::generate(&params);
        let n = params.n();
        let t = params.t();
        for k in ks {
            assert!(k <= max_response_bits(&params), "k = {k}");
            let mask = (1u64 << k) - 1;
            let r = Response {
                log_q: k,
                c0: (0..n).map(|_| rng.next_u64() & mask).collect(),
                c1: (0..n).map(|_| rng.next_u64() & mask).collect(),
            };
            let back = Response::from_bytes(&params, &r.to_bytes()).expect("parse");
            assert_eq!((&back.c0, &back.c1), (&r.c0, &r.c1), "k = {k}");
            let c1: Vec<i128> = r.c1.iter().map(|&c| center_pow2(c, k) as i128).collect();
            let mut prod = vec![0i128; n];
            for (j, &s) in sk.coeffs.iter().enumerate() {
                if s == 0 {
                    continue;
                }
                for (i, &c) in c1.iter().enumerate() {
                    let (idx, sign) = if i + j < n {
                        (i + j, s)
                    } else {
                        (i + j - n, -s)
                    };
                    prod[idx] += sign as i128 * c;
                }
            }
            let qr = 1i128 << k;
            let want: Vec<u64> = (0..n)
                .map(|i| {
                    let x = (r.c0[i] as i128 + prod[i]).rem_euclid(qr) as u128;
                    (crate::arith::mul_div_round(x, t, qr as u128) % t as u128) as u64
                })
                .collect();
            assert_eq!(
                sk.decrypt_response_poly(&r).expect("decrypt"),
                want,
                "k = {k}"
            );
        }
    }
}

/// A best-effort flood shares the room with the kernel's noise bound. The ciphertext carries
/// a known noise of +0.35·Δ/2 on every coefficient with a variance whose 10σ bound is that
/// noise; a flood sized to the whole room (0.71·Δ/2) would push thousands of its 4096
/// coefficients past Δ/2, so one wrong slot in the decryption shows the flood ignored it.
#[test]
fn best_effort_flood_leaves_room_for_the_kernel_noise() {
    use crate::kernels::{finish_outputs, Flood};
    let params = Params::by_name("n4096").expect("n4096");
    let (n, t) = (params.n(), params.t());
    let sk = SecretKey::generate(&params);
    let pk = sk.public_key();
    let v: Vec<u64> = (0..n as u64).map(|i| (i * 7919 + 3) % t).collect();
    let mut ct = sk.encrypt(&v).expect("encrypt");
    let e = params.0.delta * 35 / 200;
    for (i, md) in params.0.qs.iter().enumerate() {
        let mut poly = vec![(e % md.q as u128) as u64; n];
        md.to_ntt(&mut poly);
        for (x, &y) in ct.c0[i * n..(i + 1) * n].iter_mut().zip(&poly) {
            *x = add_mod(*x, y, md.q);
        }
    }
    ct.var = (e as f64 / 10.0).powi(2);
    assert!(
        sk.noise_budget(&ct) < 1.6,
        "the test's noise is near the kernel's bound"
    );
    for _ in 0..4 {
        let res = finish_outputs(
            &params,
            &pk,
            std::slice::from_ref(&ct),
            Flood::BestEffort(40),
        )
        .expect("best effort");
        let dec = sk.decrypt_response(&res.responses[0]).expect("decrypt");
        for i in 0..n {
            assert_eq!((dec[i] + res.masks[0][i]) % t, v[i], "slot {i}");
        }
    }
}
