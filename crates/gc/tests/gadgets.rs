//! Every gadget against a plaintext integer reference: exhaustive at 8 bits, random and edge
//! values at larger widths; gate counts from the counter backend.
use rand::{Rng, SeedableRng};
use secinfer_gc::backend::Bit;
use secinfer_gc::gadgets::*;
use secinfer_gc::{Circuit, Counter, Plain};

type Wd = Vec<Bit<bool>>;

fn enc(v: u64, w: usize) -> Wd {
    (0..w).map(|i| Bit::Wire((v >> i) & 1 == 1)).collect()
}
fn dec(b: &[Bit<bool>]) -> u64 {
    b.iter().enumerate().fold(0, |a, (i, x)| {
        let v = match x {
            Bit::Const(v) | Bit::Wire(v) => *v,
        };
        a | ((v as u64) << i)
    })
}
fn m(w: usize) -> u64 {
    if w == 64 {
        u64::MAX
    } else {
        (1 << w) - 1
    }
}
fn sx(v: u64, w: usize) -> i64 {
    let s = 64 - w;
    ((v << s) as i64) >> s
}

/// Checks a two-operand gadget against `reference` on all pairs (w ≤ 8) or random + edge pairs.
fn check2(
    w: usize,
    gadget: impl Fn(&mut Plain, &Wd, &Wd) -> Wd,
    reference: impl Fn(u64, u64) -> u64,
    name: &str,
) {
    let mut pairs = Vec::new();
    if w <= 8 {
        for x in 0..(1u64 << w) {
            for y in 0..(1u64 << w) {
                pairs.push((x, y));
            }
        }
    } else {
        let edges = [
            0,
            1,
            m(w),
            m(w) - 1,
            1 << (w - 1),
            (1 << (w - 1)) - 1,
            (1 << (w - 1)) + 1,
        ];
        for &x in &edges {
            for &y in &edges {
                pairs.push((x, y));
            }
        }
        let mut rng = rand::rngs::StdRng::seed_from_u64(w as u64);
        for _ in 0..2000 {
            pairs.push((rng.gen::<u64>() & m(w), rng.gen::<u64>() & m(w)));
        }
    }
    let mut p = Plain;
    for (x, y) in pairs {
        let got = dec(&gadget(&mut p, &enc(x, w), &enc(y, w)));
        assert_eq!(got, reference(x, y), "{name} w={w} x={x} y={y}");
    }
}

#[test]
fn add_sub_neg_against_integers() {
    for w in [8, 13, 32] {
        check2(
            w,
            |p, x, y| add(p, x, y),
            |x, y| x.wrapping_add(y) & m(w),
            "add",
        );
        check2(
            w,
            |p, x, y| sub(p, x, y),
            |x, y| x.wrapping_sub(y) & m(w),
            "sub",
        );
        check2(
            w,
            |p, x, y| {
                let (s, c) = add_full(p, x, y, Bit::Const(false));
                let mut s = s;
                s.push(c);
                s
            },
            |x, y| x + y,
            "add_full",
        );
        check2(
            w,
            |p, x, y| {
                let (_, b) = sub_full(p, x, y);
                vec![b]
            },
            |x, y| (x < y) as u64,
            "borrow",
        );
        check2(
            w,
            |p, x, _| neg(p, x),
            |x, _| x.wrapping_neg() & m(w),
            "neg",
        );
    }
}

#[test]
fn comparisons_and_mux() {
    for w in [8, 20] {
        check2(
            w,
            |p, x, y| vec![lt_unsigned(p, x, y)],
            |x, y| (x < y) as u64,
            "lt_u",
        );
        check2(
            w,
            |p, x, y| vec![ge_unsigned(p, x, y)],
            |x, y| (x >= y) as u64,
            "ge_u",
        );
        check2(
            w,
            |p, x, y| vec![lt_signed(p, x, y)],
            |x, y| (sx(x, w) < sx(y, w)) as u64,
            "lt_s",
        );
        check2(
            w,
            |p, x, y| {
                let s = x[0];
                mux_word(p, &s, x, y)
            },
            |x, y| if x & 1 == 1 { y } else { x },
            "mux",
        );
    }
}

#[test]
fn multiplication() {
    for w in [8, 16] {
        check2(
            w,
            |p, x, y| mul_lo(p, x, y),
            |x, y| x.wrapping_mul(y) & m(w),
            "mul_lo",
        );
        check2(
            w,
            |p, x, y| mul_signed(p, x, y),
            |x, y| (sx(x, w) * sx(y, w)) as u64 & m(2 * w),
            "mul_signed",
        );
        check2(
            w,
            |p, x, y| mul_unsigned(p, x, y),
            |x, y| x * y,
            "mul_unsigned",
        );
    }
}

#[test]
fn relu_abs_saturate_shift() {
    for w in [8, 24] {
        check2(
            w,
            |p, x, _| relu(p, x),
            |x, _| if sx(x, w) < 0 { 0 } else { x },
            "relu",
        );
        check2(
            w,
            |p, x, _| abs(p, x),
            |x, _| sx(x, w).unsigned_abs() & m(w),
            "abs",
        );
        for to in [4, w - 1] {
            check2(
                w,
                |p, x, _| saturate(p, x, to),
                |x, _| {
                    let v = sx(x, w).clamp(-(1 << (to - 1)), (1 << (to - 1)) - 1);
                    v as u64 & m(to)
                },
                "saturate",
            );
        }
        for k in [1, 3] {
            check2(
                w,
                |p, x, _| shr_round(p, x, k),
                |x, _| {
                    let v = (sx(x, w) + (1 << (k - 1))) >> k;
                    v as u64 & m(w - k + 1)
                },
                "shr_round",
            );
        }
    }
}

#[test]
fn mod_p_reduction_exhaustive_small_prime() {
    for p in [251u64, 257] {
        let w = bit_len(p);
        let mut pl = Plain;
        for x in 0..p {
            for y in 0..p {
                let got = dec(&mod_add(&mut pl, &enc(x, w), &enc(y, w), p));
                assert_eq!(got, (x + y) % p, "p={p} x={x} y={y}");
            }
            let got = sx(dec(&lift_signed(&mut pl, &enc(x, w), p)), w + 1);
            let want = if x >= p.div_ceil(2) {
                x as i64 - p as i64
            } else {
                x as i64
            };
            assert_eq!(got, want, "lift p={p} x={x}");
        }
    }
}

#[test]
fn mod_p_reduction_20_bit_prime_edges_and_random() {
    let p = 1_048_573u64; // 2^20 − 3
    let w = bit_len(p);
    let edges = [0, 1, 2, p / 2, p / 2 + 1, p - 2, p - 1];
    let mut pairs: Vec<(u64, u64)> = edges
        .iter()
        .flat_map(|&x| edges.iter().map(move |&y| (x, y)))
        .collect();
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    for _ in 0..3000 {
        pairs.push((rng.gen_range(0..p), rng.gen_range(0..p)));
    }
    let mut pl = Plain;
    for (x, y) in pairs {
        assert_eq!(
            dec(&mod_add(&mut pl, &enc(x, w), &enc(y, w), p)),
            (x + y) % p,
            "x={x} y={y}"
        );
    }
    let mut c = Counter::new();
    let ins: Vec<Bit<u32>> = (0..w).map(|_| Bit::Wire(0)).collect();
    mod_add(&mut c, &ins, &ins, p);
    assert!(c.ands <= 3 * w as u64 + 1, "mod_add used {} ANDs", c.ands);
}

#[test]
fn argmax_against_reference() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(3);
    let mut pl = Plain;
    for n in [1usize, 2, 5, 10] {
        for _ in 0..200 {
            let xs: Vec<u64> = (0..n).map(|_| rng.gen::<u64>() & 0xff).collect();
            let words: Vec<Wd> = xs.iter().map(|&x| enc(x, 8)).collect();
            let (i, v) = argmax(&mut pl, &words);
            let best = xs.iter().map(|&x| sx(x, 8)).max().unwrap_or(0);
            let first = xs.iter().position(|&x| sx(x, 8) == best).unwrap_or(0);
            assert_eq!(dec(&i) as usize, first, "{xs:?}");
            assert_eq!(sx(dec(&v), 8), best);
        }
    }
}

#[test]
fn lut_matches_table_exhaustively() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(11);
    for k in 1..=6 {
        let table: Vec<u64> = (0..1 << k).map(|_| rng.gen::<u64>() & 0x3ff).collect();
        let mut pl = Plain;
        for i in 0..(1u64 << k) {
            assert_eq!(
                dec(&lut(&mut pl, &enc(i, k), &table, 10)),
                table[i as usize],
                "k={k} i={i}"
            );
        }
        let mut c = Counter::new();
        let ins: Vec<Bit<u32>> = (0..k).map(|_| Bit::Wire(0)).collect();
        lut(&mut c, &ins, &table, 10);
        assert!(
            c.ands < (1 << k) - k as u64,
            "lut k={k} used {} ANDs",
            c.ands
        );
    }
}

#[test]
fn gate_counts_match_the_design() {
    type G<'a> = &'a dyn Fn(&mut Counter, &[Bit<u32>], &[Bit<u32>]);
    let count = |w: usize, f: G<'_>| {
        let mut c = Counter::new();
        let x: Vec<Bit<u32>> = (0..w).map(|_| Bit::Wire(0)).collect();
        f(&mut c, &x, &x);
        c.ands
    };
    assert_eq!(
        count(8, &|c, x, y| {
            add(c, x, y);
        }),
        7
    );
    assert_eq!(
        count(8, &|c, x, _| {
            relu(c, x);
        }),
        7
    );
    assert_eq!(
        count(8, &|c, x, y| {
            lt_unsigned(c, x, y);
        }),
        8
    );
    assert_eq!(
        count(8, &|c, x, y| {
            mux_word(c, &x[0], x, y);
        }),
        8
    );
    // constants fold: adding zero costs nothing
    assert_eq!(
        count(8, &|c, x, _| {
            add(c, x, &constant_word(0, 8));
        }),
        0
    );
}

#[test]
fn recorded_circuit_replays_like_direct_execution() {
    let c = Circuit::build(16, |b, ins| {
        let s = add(b, &ins[..8], &ins[8..]);
        let m = mul_lo(b, &s, &ins[8..]);
        relu(b, &m)
    });
    let mut rng = rand::rngs::StdRng::seed_from_u64(5);
    for _ in 0..500 {
        let (x, y) = (rng.gen::<u64>() & 0xff, rng.gen::<u64>() & 0xff);
        let mut bits: Vec<bool> = (0..8).map(|i| (x >> i) & 1 == 1).collect();
        bits.extend((0..8).map(|i| (y >> i) & 1 == 1));
        let out = c.eval_plain(&bits);
        let got = out
            .iter()
            .enumerate()
            .fold(0u64, |a, (i, &b)| a | ((b as u64) << i));
        let v = sx((x.wrapping_add(y).wrapping_mul(y)) & 0xff, 8);
        assert_eq!(got, v.max(0) as u64);
    }
}
