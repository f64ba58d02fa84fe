//! Unit tests of the 32-bit key switching: gathers, reductions and rotations against scalar
//! references.
use super::*;

/// Every Galois element a key can be built for (each rotation step and the row swap) has
/// the block-of-8 property on every modulus of every parameter set, and the AVX2 block
/// gather equals the scalar gather word for word on each of them.
#[test]
fn block8_gather_matches_scalar_for_every_galois_element() {
    for name in crate::params::ParamSet::names() {
        let params = Params::by_name(name).unwrap();
        let n = params.n();
        let mods: Vec<_> = params.0.qs.iter().chain([&params.0.pm]).collect();
        let a: Vec<u32> = (0..n as u32)
            .map(|i| i.wrapping_mul(0x9e37_79b9) >> 2)
            .collect();
        let mut want = vec![0u64; n];
        let mut got = vec![0u64; n];
        let elts = (0..params.row_len())
            .map(|s| params.galois_elt_rotate(s))
            .chain([params.galois_elt_row_swap()]);
        for g in elts {
            let perms = GaloisPerms::new(mods.iter().map(|m| m.galois_perm(g)).collect());
            assert!(
                perms.block8(),
                "{name}: g = {g} breaks the block-of-8 property"
            );
            for perm in perms.iter() {
                gather_plain(&mut want, &a, perm);
                gather_perm(&mut got, &a, perm, true);
                assert_eq!(got, want, "{name}: g = {g}");
            }
        }
    }
}

/// A permutation without the property is detected (so the key keeps the scalar gather).
#[test]
fn block8_check_rejects_a_crossing_permutation() {
    let mut perm: Vec<u32> = (0..64).collect();
    assert!(is_block8(&perm));
    perm.swap(3, 11);
    assert!(!is_block8(&perm));
    assert!(!GaloisPerms::new(vec![(0..64).collect(), perm]).block8());
}

/// `dot_shift`'s Montgomery sums are exact mod q for 1 to 6 digits (the AVX2 steps up to
/// 4 digits below 2^30, the word-by-word path beyond, with several reductions per word, and
/// for a modulus above 2^30), at random residues and with every digit and key at q − 1
/// (each 64-bit sum at its largest), with and without the added residue, at offsets, over a
/// length that leaves a tail after the 8-word steps.
#[test]
fn montgomery_key_products_exact_at_the_bounds() {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = |m: u32| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x % m as u64) as u32
    };
    let n = 600;
    for q in [1073692673u32, 978247681, 12289, (1 << 31) - 1] {
        let qn = mont_neg_inv(q);
        assert_eq!(q.wrapping_mul(qn), u32::MAX, "−q^−1 mod 2^32");
        let r = ((1u64 << 32) % q as u64) as u32;
        for digits in 1..=6 {
            for extreme in [false, true] {
                let mut val = |_: usize| if extreme { q - 1 } else { next(q) };
                let d: Vec<Vec<u32>> = (0..digits)
                    .map(|_| (0..n).map(&mut val).collect())
                    .collect();
                let k: Vec<Vec<u32>> = (0..digits)
                    .map(|_| (0..n).map(&mut val).collect())
                    .collect();
                let c: Vec<u32> = (0..n).map(&mut val).collect();
                let km: Vec<Vec<u32>> = k
                    .iter()
                    .map(|v| {
                        v.iter()
                            .map(|&y| mul_shoup32(y, r, shoup32(r, q), q))
                            .collect()
                    })
                    .collect();
                let dr: Vec<&[u32]> = d.iter().map(|v| v.as_slice()).collect();
                let kr: Vec<&[u32]> = km.iter().map(|v| v.as_slice()).collect();
                let (xo, wo, len) = (7, 3, n - 10);
                for add in [None, Some(c.as_slice())] {
                    let mut out = vec![0u64; len];
                    dot_shift(&mut out, &kr, &dr, add, xo, wo, q, qn);
                    for (j, &o) in out.iter().enumerate() {
                        let mut want = add.map_or(0, |c| c[wo + j] as u128);
                        for (dv, kv) in d.iter().zip(&k) {
                            want += dv[wo + j] as u128 * kv[xo + j] as u128;
                        }
                        assert_eq!(o as u128, want % q as u128, "q {q}, {digits} digits, j {j}");
                    }
                }
            }
        }
    }
}

/// The lazily reduced key products (`dot`, `dot_sub_scale`) are exact mod q for the
/// largest 30-bit NTT prime, with 2, 3 (the generic loop) and 4 digits, at random residues and at the extremes
/// (every digit and key q − 1, so each lazy sum sits at its upper bound; lp = 0 and q − 1).
#[test]
fn lazy_key_products_exact_at_the_bounds() {
    let q = 1073692673u32; // < 2^30, ≡ 1 mod 8192
    let n = 1024;
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut next = |m: u32| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x % m as u64) as u32
    };
    for digits in [2usize, 3, 4] {
        let mut d: Vec<Vec<u32>> = (0..digits)
            .map(|_| (0..n).map(|_| next(q)).collect())
            .collect();
        let mut k: Vec<Vec<u32>> = (0..digits)
            .map(|_| (0..n).map(|_| next(q)).collect())
            .collect();
        let mut lp: Vec<u32> = (0..n).map(|_| next(q)).collect();
        let c0: Vec<u64> = (0..n).map(|_| next(q) as u64).collect();
        for j in 0..digits {
            for i in 0..64 {
                d[j][i] = q - 1;
                k[j][i] = q - 1 - (i as u32 % 3);
            }
        }
        for (i, v) in lp.iter_mut().enumerate().take(64) {
            *v = if i % 2 == 0 { 0 } else { q - 1 };
        }
        let ks: Vec<Vec<u32>> = k
            .iter()
            .map(|v| v.iter().map(|&w| shoup32(w, q)).collect())
            .collect();
        fn slices(v: &[Vec<u32>]) -> Residues<'_> {
            v.iter().map(|x| &x[..]).collect()
        }
        let (dr, kr, ksr) = (slices(&d), slices(&k), slices(&ks));
        let want_dot: Vec<u64> = (0..n)
            .map(|i| {
                (0..digits)
                    .map(|j| d[j][i] as u64 * k[j][i] as u64 % q as u64)
                    .sum::<u64>()
                    % q as u64
            })
            .collect();
        let mut acc = vec![0u32; n];
        dot(&mut acc, &dr, &kr, &ksr, None, q);
        assert!(
            acc.iter().zip(&want_dot).all(|(&a, &b)| a as u64 == b),
            "dot, {digits} digits"
        );
        // With an addend at its largest (q − 1) and at random.
        let mut c1 = c0.clone();
        c1[..64].iter_mut().for_each(|v| *v = q as u64 - 1);
        dot(&mut acc, &dr, &kr, &ksr, Some(&c1), q);
        for i in 0..n {
            assert_eq!(
                acc[i] as u64,
                (want_dot[i] + c1[i]) % q as u64,
                "dot + c, i = {i}"
            );
        }
        let w = 123_456_789u32;
        for c in [None, Some(&c0[..])] {
            let mut a = vec![0u32; n];
            dot_sub_scale(&mut a, &dr, &kr, &ksr, &lp, c, w, shoup32(w, q), q);
            for i in 0..n {
                let diff = (want_dot[i] + q as u64 - lp[i] as u64) % q as u64;
                let mut want = diff * w as u64 % q as u64;
                if let Some(c) = c {
                    want = (want + c[i]) % q as u64;
                }
                assert_eq!(a[i] as u64, want, "dot_sub_scale, {digits} digits, i = {i}");
            }
        }
    }
}

/// The Barrett product is exact for moduli of every bit length it is used with (the
/// `n4096` primes below 2^30, 31-bit primes, a 20-bit t), at random and edge residues.
#[test]
fn barrett_products_exact_for_every_octave() {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for q in [
        1032193u64,
        (1 << 29) + 1,
        1073692673,
        2147377153,
        (1 << 31) - 1,
    ] {
        let b = 64 - q.leading_zeros();
        let mu = (1u64 << (2 * b)) / q;
        let mut a: Vec<u64> = (0..4096).map(|_| next() % q).collect();
        let mut c: Vec<u64> = (0..4096).map(|_| next() % q).collect();
        for (i, e) in [0, 1, q / 2, q - 2, q - 1].into_iter().enumerate() {
            a[i] = e;
            c[i * 7] = e;
            a[100 + i] = q - 1;
            c[100 + i] = e;
        }
        let mut prod = vec![0u64; a.len()];
        mul_small(&mut prod, &a, &c, q, mu, b);
        let mut acc: Vec<u64> = (0..a.len()).map(|_| next() % q).collect();
        let acc0 = acc.clone();
        mul_acc_small(&mut acc, &a, &c, q, mu, b);
        for i in 0..a.len() {
            let want = (a[i] as u128 * c[i] as u128 % q as u128) as u64;
            assert_eq!(prod[i], want, "q = {q}, {} · {}", a[i], c[i]);
            assert_eq!(acc[i], (acc0[i] + want) % q, "q = {q}");
        }
    }
}
