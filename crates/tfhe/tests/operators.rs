//! Every SHE operator on the plaintext backend against i64 arithmetic, on random values that
//! include negatives, zero and both extremes of the width.
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;
use secinfer_tfhe::int::{self, bits_value, value_bits, word_value};
use secinfer_tfhe::{Bit, Counter, Plain, Word};

fn word(v: i64, w: usize) -> Word<bool> {
    value_bits(v, w).into_iter().map(Bit::Wire).collect()
}

/// Extremes, zero, ±1 and random values of a signed w-bit word.
fn samples(rng: &mut ChaCha20Rng, w: usize) -> Vec<i64> {
    let (lo, hi) = (-(1i64 << (w - 1)), (1i64 << (w - 1)) - 1);
    let mut v = vec![lo, lo + 1, -1, 0, 1, hi - 1, hi];
    v.extend((0..24).map(|_| rng.gen_range(lo..=hi)));
    v.retain(|x| (lo..=hi).contains(x));
    v
}

#[test]
fn bits_round_trip() {
    for w in 1..=12 {
        for v in -(1i64 << (w - 1))..(1i64 << (w - 1)) {
            assert_eq!(bits_value(&value_bits(v, w)), v, "w={w} v={v}");
        }
    }
}

#[test]
fn right_shift_is_arithmetic_on_negatives() {
    // SHE's released shifter fills with zeros; a negative value must stay negative (floor).
    let x = word(-5, 6);
    let y = int::shift(&x, -1);
    assert_eq!(word_value(&y), -3);
    assert_eq!(word_value(&int::shift(&x, -2)), -2);
    assert_eq!(word_value(&int::shift(&x, -3)), -1);
    assert_eq!(
        word_value(&int::shift(&x, -9)),
        -1,
        "every bit shifted out leaves the sign"
    );
    assert_eq!(word_value(&int::shift(&word(5, 6), -9)), 0);
}

#[test]
fn shift_matches_floor_multiplication() {
    let mut rng = ChaCha20Rng::seed_from_u64(1);
    for w in [1, 2, 5, 8] {
        for v in samples(&mut rng, w) {
            for k in -10..=6 {
                let got = word_value(&int::shift(&word(v, w), k));
                let want = if k >= 0 { v << k } else { v >> -k };
                assert_eq!(got, want, "{v} · 2^{k} at width {w}");
            }
        }
    }
}

#[test]
fn add_is_exact_and_grows_one_bit() {
    let mut rng = ChaCha20Rng::seed_from_u64(2);
    for (wx, wy) in [(1, 1), (5, 5), (5, 8), (9, 3)] {
        for x in samples(&mut rng, wx) {
            for y in samples(&mut rng, wy) {
                let s = int::add(&mut Plain, &word(x, wx), &word(y, wy));
                assert_eq!(s.len(), wx.max(wy) + 1);
                assert_eq!(word_value(&s), x + y, "{x} + {y}");
            }
        }
    }
}

#[test]
fn add_folds_public_bits_exactly() {
    let mut rng = ChaCha20Rng::seed_from_u64(3);
    for x in samples(&mut rng, 7) {
        for c in [-70, -64, -1, 0, 1, 5, 63, 64, 1000] {
            assert_eq!(
                word_value(&int::add_const(&mut Plain, &word(x, 7), c)),
                x + c
            );
        }
    }
}

#[test]
fn negation_by_public_sign_and_encrypted_sign() {
    let mut rng = ChaCha20Rng::seed_from_u64(4);
    for w in [1, 5, 8] {
        for x in samples(&mut rng, w) {
            for k in [-3, 0, 2] {
                let (t, carry) = int::pow2_term(&mut Plain, &word(x, w), k, true);
                let scaled = if k >= 0 { x << k } else { x >> -k };
                assert_eq!(word_value(&t) + carry, -scaled, "-({x} · 2^{k})");
                let (t, carry) = int::pow2_term(&mut Plain, &word(x, w), k, false);
                assert_eq!((word_value(&t), carry), (scaled, 0));
            }
            for s in [false, true] {
                let r = int::cond_negate(&mut Plain, &word(x, w), &Bit::Wire(s));
                assert_eq!(
                    word_value(&r),
                    if s { -x } else { x },
                    "cond_negate({x}, {s})"
                );
            }
        }
    }
}

#[test]
fn relu_clip_requantize_match_reference() {
    let mut rng = ChaCha20Rng::seed_from_u64(5);
    for w in [3, 6, 12] {
        for x in samples(&mut rng, w) {
            let r = int::relu(&mut Plain, &word(x, w));
            assert_eq!(word_value(&r), x.max(0));
            assert_eq!(
                r.last(),
                Some(&Bit::Const(false)),
                "ReLU's sign is public zero"
            );
            for bits in [1, 3, 5] {
                let c = int::clip_signed(&mut Plain, &word(x, w), bits);
                let lim = 1i64 << (bits - 1);
                assert_eq!(
                    word_value(&c),
                    x.clamp(-lim, lim - 1),
                    "clip_signed({x}, {bits})"
                );
                for shift in [0, 1, 4] {
                    for relu in [false, true] {
                        let q = int::requantize(&mut Plain, &word(x, w), shift, bits, relu);
                        let want =
                            secinfer_tfhe::network::requant_value(x, shift, bits as u32, relu);
                        assert_eq!(
                            word_value(&q),
                            want,
                            "requant({x}, >>{shift}, {bits}, relu={relu})"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn compare_max_and_multiply_match_reference() {
    let mut rng = ChaCha20Rng::seed_from_u64(6);
    for (wx, wy) in [(1, 1), (5, 5), (4, 7)] {
        for x in samples(&mut rng, wx) {
            for y in samples(&mut rng, wy) {
                let (a, b) = (word(x, wx), word(y, wy));
                let lt = int::less_than(&mut Plain, &a, &b);
                assert_eq!(lt, Bit::Wire(x < y), "{x} < {y}");
                assert_eq!(word_value(&int::max(&mut Plain, &a, &b)), x.max(y));
                assert_eq!(
                    word_value(&int::mul(&mut Plain, &a, &b)),
                    x * y,
                    "{x} · {y}"
                );
            }
        }
    }
}

#[test]
fn adder_tree_sums_and_widths_follow_the_formula() {
    let mut rng = ChaCha20Rng::seed_from_u64(7);
    let b = 5;
    for n in [1usize, 2, 3, 8, 13, 64] {
        let xs: Vec<i64> = (0..n).map(|_| rng.gen_range(-16..=15)).collect();
        let terms = xs.iter().map(|x| word(*x, b)).collect();
        let (sum, widths) = int::adder_tree(&mut Plain, terms);
        assert_eq!(word_value(&sum), xs.iter().sum::<i64>());
        assert_eq!(
            widths.len(),
            n.next_power_of_two().trailing_zeros() as usize
        );
        for (k, level) in widths.iter().enumerate() {
            assert_eq!(
                level.len(),
                n.div_ceil(1 << k) / 2,
                "adders at level {k} of {n}"
            );
            // Level k adds (b + k)-bit numbers when n is a power of two; a carried odd term
            // can only be narrower.
            assert!(level.iter().all(|w| *w <= b + k), "level {k}: {level:?}");
            if n.is_power_of_two() {
                assert!(level.iter().all(|w| *w == b + k), "level {k}: {level:?}");
            }
        }
    }
}

#[test]
fn counter_totals_equal_the_adder_tree_formula() {
    // An adder on w-bit inputs: a half adder at bit 0 (XOR, AND), w-1 full adders (2 XOR and a
    // mux each) and a sum-only top bit (2 XOR). A tree over 2^m terms of b bits has 2^(m-k-1)
    // adders of (b + k)-bit inputs at level k.
    for (b, m) in [(5usize, 3u32), (5, 6), (8, 4)] {
        let mut c = Counter::new();
        let terms = (0..1usize << m)
            .map(|_| (0..b).map(|_| Bit::Wire(0u32)).collect())
            .collect();
        let (sum, _) = int::adder_tree(&mut c, terms);
        let (mut xor, mut and, mut mux) = (0u64, 0u64, 0u64);
        for k in 0..m as usize {
            let adders = 1u64 << (m as usize - k - 1);
            let w = (b + k) as u64;
            xor += adders * (2 * w + 1);
            and += adders;
            mux += adders * (w - 1);
        }
        assert_eq!(
            (c.xor, c.and, c.or, c.mux),
            (xor, and, 0, mux),
            "b={b} m={m}"
        );
        assert_eq!(c.pbs(), xor + and + 2 * mux);
        assert_eq!(c.cc_add, (1u64 << m) - 1);
        assert_eq!(sum.len(), b + m as usize);
        // The top sum bit waits for the carry through every level's ripple.
        assert!(c.depth as usize >= b + m as usize);
    }
}
