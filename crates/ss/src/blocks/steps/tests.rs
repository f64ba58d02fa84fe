//! The steps of each block driven against each other with no channel: both parties' steps in
//! one thread, on correlations dealt here (triples, half triples, leaf OTs, and a hand-written
//! correlated OT), every flight packed and unpacked as it would go over the wire, against the
//! plaintext definition of the block.
#![allow(clippy::unwrap_used)]
use super::*;
use crate::blocks::pooled::{
    b2a_bit_deltas, b2a_bit_sender, b2a_receiver, mux_combine, mux_deltas,
};
use rand_core::RngCore;
use secinfer_core::{Block, Prg};

fn bit(prg: &mut Prg) -> u8 {
    (prg.next_u64() & 1) as u8
}

/// n Beaver bit triples, both parties' bytes (a, b, b2, c = a·b, c2 = a·b2).
fn triples(prg: &mut Prg, n: usize) -> (Vec<u8>, Vec<u8>) {
    (0..n)
        .map(|_| {
            let (a0, a1, b0, b1, e0, e1) =
                (bit(prg), bit(prg), bit(prg), bit(prg), bit(prg), bit(prg));
            let (c, c2) = ((a0 ^ a1) & (b0 ^ b1), (a0 ^ a1) & (e0 ^ e1));
            let (s, s2) = (bit(prg), bit(prg));
            let p0 = a0 | b0 << 1 | e0 << 2 | s << 3 | s2 << 4;
            let p1 = a1 | b1 << 1 | e1 << 2 | (c ^ s) << 3 | (c2 ^ s2) << 4;
            (p0, p1)
        })
        .unzip()
}

/// n half triples: P0's u and P1's v, each with its share of u·v.
fn halves(prg: &mut Prg, n: usize) -> (Vec<u8>, Vec<u8>) {
    (0..n)
        .map(|_| {
            let (u, v, s) = (bit(prg), bit(prg), bit(prg));
            (u | s << 1, v | ((u & v) ^ s) << 1)
        })
        .unzip()
}

/// k random 1-of-2^m leaf OTs: P0's key masks, P1's choice and the mask of its key.
fn leaf_ots(prg: &mut Prg, k: usize, m: u32) -> (Vec<u32>, Vec<u32>) {
    let full = u32::MAX >> (32 - (2 << m));
    (0..k)
        .map(|_| {
            let keys = prg.next_u32() & full;
            let r = prg.next_u32() & ((1 << m) - 1);
            (keys, r | ((keys >> (2 * r)) & 3) << 8)
        })
        .unzip()
}

/// A correlated OT: the sender's outputs x, the receiver's x + c·δ, mod 2^bits.
fn cot(prg: &mut Prg, deltas: &[u64], choices: &[bool], bits: u32) -> (Vec<u64>, Vec<u64>) {
    assert_eq!(deltas.len(), choices.len());
    let m = mask(bits);
    let x: Vec<u64> = deltas.iter().map(|_| prg.next_u64() & m).collect();
    let got = x
        .iter()
        .zip(deltas.iter().zip(choices))
        .map(|(x, (d, &c))| x.wrapping_add(if c { *d } else { 0 }) & m)
        .collect();
    (x, got)
}

/// An opening over the wire: packed, then unpacked by the peer.
fn wire(mine: &[u8]) -> Vec<u8> {
    unpack_opening(&pack_opening(mine), mine.len()).unwrap()
}

fn and_pair(prg: &mut Prg, x: [&[u8]; 2], y: [&[u8]; 2]) -> [Vec<u8>; 2] {
    let (t0, t1) = triples(prg, x[0].len());
    let m0 = and_open(x[0], y[0], &t0).unwrap();
    let m1 = and_open(x[1], y[1], &t1).unwrap();
    [
        and_close(&m0, &wire(&m1), &t0, true).unwrap(),
        and_close(&m1, &wire(&m0), &t1, false).unwrap(),
    ]
}

type Pair2 = ([Vec<u8>; 2], [Vec<u8>; 2]);

fn and2_pair(prg: &mut Prg, x: [&[u8]; 2], y: [&[u8]; 2], z: [&[u8]; 2]) -> Pair2 {
    let (t0, t1) = triples(prg, x[0].len());
    let m0 = and2_open(x[0], y[0], z[0], &t0).unwrap();
    let m1 = and2_open(x[1], y[1], z[1], &t1).unwrap();
    let (a0, b0) = and2_close(&m0, &wire(&m1), &t0, true).unwrap();
    let (a1, b1) = and2_close(&m1, &wire(&m0), &t1, false).unwrap();
    ([a0, a1], [b0, b1])
}

fn and_private_pair(prg: &mut Prg, p: &[u8], q: &[u8]) -> [Vec<u8>; 2] {
    let (t0, t1) = halves(prg, p.len());
    let o0 = and_private_open(p, &t0).unwrap();
    let o1 = and_private_open(q, &t1).unwrap();
    [
        and_private_close(&o0, &wire(&o1), &t0, true).unwrap(),
        and_private_close(&o1, &wire(&o0), &t1, false).unwrap(),
    ]
}

/// The millionaires' comparison as the `Ctx` block sequences it on triples: leaves of
/// md = min(m, bits) bits (one-bit leaves on half triples), then the AND tree. Returns the
/// XOR shares of [a < b].
fn mill_pair(prg: &mut Prg, a: &[u64], b: &[u64], bits: u32, m: u32) -> [Vec<u8>; 2] {
    let n = a.len();
    let md = m.min(bits);
    let (lt, eq) = if md == 1 {
        let (p, q) = (
            mill_bit_leaves(a, bits, true),
            mill_bit_leaves(b, bits, false),
        );
        let lt = and_private_pair(prg, &p, &q);
        (lt, [p, q])
    } else {
        let (da, db) = (mill_digits(a, bits, md), mill_digits(b, bits, md));
        let (t0, t1) = leaf_ots(prg, da.len(), m);
        let query = leaf_query(&t1, &db, m).unwrap();
        let shares: Vec<u64> = (0..leaf_share_words(da.len()))
            .map(|_| prg.next_u64())
            .collect();
        let (answer, r0) = leaf_answer(&t0, &da, m, &query, &shares).unwrap();
        let r1 = leaf_result(&t1, &db, m, &answer).unwrap();
        let ((l0, e0), (l1, e1)) = (leaf_split(&r0), leaf_split(&r1));
        ([l0, l1], [e0, e1])
    };
    let [lt0, lt1] = lt;
    let [eq0, eq1] = eq;
    let mut trees = [
        MillTree::new(n, lt0, eq0).unwrap(),
        MillTree::new(n, lt1, eq1).unwrap(),
    ];
    loop {
        let (l0, l1) = match (trees[0].level(), trees[1].level()) {
            (Some(l0), Some(l1)) => (l0, l1),
            (None, None) => break,
            _ => panic!("the parties' trees disagree on their depth"),
        };
        match (&l0.w, &l1.w) {
            (Some(w0), Some(w1)) => {
                let (zl, ze) = and2_pair(prg, [&l0.x, &l1.x], [&l0.y, &l1.y], [w0, w1]);
                trees[0].absorb(&zl[0], &ze[0]).unwrap();
                trees[1].absorb(&zl[1], &ze[1]).unwrap();
            }
            _ => {
                let z = and_pair(prg, [&l0.x, &l1.x], [&l0.y, &l1.y]);
                trees[0].absorb(&z[0], &[]).unwrap();
                trees[1].absorb(&z[1], &[]).unwrap();
            }
        }
    }
    let [t0, t1] = trees;
    [t0.result().unwrap(), t1.result().unwrap()]
}

/// B2A of XOR-shared bits into Z_{2^k} on one hand-written COT (P0 sending), as `blocks::b2a`.
fn b2a_pair(prg: &mut Prg, c: [&[u8]; 2], k: u32) -> [Vec<u64>; 2] {
    let bools = |v: &[u8]| -> Vec<bool> { v.iter().map(|b| *b == 1).collect() };
    let (c0, c1) = (bools(c[0]), bools(c[1]));
    let (x, got) = cot(prg, &b2a_bit_deltas(&c0, k as usize).unwrap(), &c1, k);
    [
        b2a_bit_sender(&c0, &x, k as usize).unwrap(),
        b2a_receiver(&got, 1, k as usize).unwrap(),
    ]
}

/// Both cross-term COT batches of a product-like block: P0's δ's chosen by P1's bits and P1's
/// by P0's; returns each party's (received, pad).
type Cots = [(Vec<u64>, Vec<u64>); 2];
fn cots_both(prg: &mut Prg, d: [&[u64]; 2], c: [&[bool]; 2], bits: u32) -> Cots {
    let (pad0, got1) = cot(prg, d[0], c[1], bits);
    let (pad1, got0) = cot(prg, d[1], c[0], bits);
    [(got0, pad0), (got1, pad1)]
}

/// The one-bit multiplexer c·v (pooled's steps) on hand-written COTs.
fn mux_pair(prg: &mut Prg, c: [&[u8]; 2], v: [&[u64]; 2], bits: u32) -> [Vec<u64>; 2] {
    let w = [0, 1].map(|p| -> Vec<u64> { v[p].iter().map(|x| x & mask(bits)).collect() });
    let b = [0, 1].map(|p| -> Vec<bool> { c[p].iter().map(|x| *x == 1).collect() });
    let d = [0, 1].map(|p| mux_deltas(&w[p], &b[p], bits as usize));
    let r = cots_both(prg, [&d[0], &d[1]], [&b[0], &b[1]], bits);
    [0, 1].map(|p| mux_combine(&w[p], &b[p], &r[p].0, &r[p].1, 1, bits as usize).unwrap())
}

/// The product's cross terms x·(y0 + y1) on hand-written COTs.
fn cross_pair(prg: &mut Prg, x: [&[u64]; 2], y: [&[u64]; 2], bits: u32, yb: u32) -> [Vec<u64>; 2] {
    let d = [0, 1].map(|p| cross_deltas(x[p], y[p], bits, yb).unwrap());
    let r = cots_both(prg, [&d[0].0, &d[1].0], [&d[0].1, &d[1].1], bits);
    [0, 1].map(|p| cross_combine(x[p], y[p], &r[p].0, &r[p].1, bits, yb).unwrap())
}

fn shares(prg: &mut Prg, x: &[u64], bits: u32) -> [Vec<u64>; 2] {
    let m = mask(bits);
    let s0: Vec<u64> = x.iter().map(|_| prg.next_u64() & m).collect();
    let s1 = x
        .iter()
        .zip(&s0)
        .map(|(x, s)| x.wrapping_sub(*s) & m)
        .collect();
    [s0, s1]
}

fn open(s: &[Vec<u64>; 2], bits: u32) -> Vec<u64> {
    s[0].iter()
        .zip(&s[1])
        .map(|(a, b)| a.wrapping_add(*b) & mask(bits))
        .collect()
}

/// Asserts that the opened shares are the products x·y mod 2^bits.
fn assert_products(got: &[u64], x: &[u64], y: &[u64], bits: u32, case: &str) {
    for i in 0..x.len() {
        let want = x[i].wrapping_mul(y[i]) & mask(bits);
        assert_eq!(got[i], want, "{} · {} ({case}, {bits} bits)", x[i], y[i]);
    }
}

/// Random values of `bits` bits with the extremes first: 0, 1, 2^bits − 1, 2^(bits−1) and
/// its neighbours.
fn values(prg: &mut Prg, n: usize, bits: u32) -> Vec<u64> {
    let m = mask(bits);
    let top = 1u64 << (bits - 1);
    let mut v = vec![
        0,
        1 & m,
        m,
        top,
        top.wrapping_sub(1) & m,
        top.wrapping_add(1) & m,
    ];
    v.extend((v.len()..n).map(|_| prg.next_u64() & m));
    v
}

#[test]
fn and_steps_equal_and() {
    let mut prg = Prg::from_seed(Block(0xa2d));
    let n = 64;
    let draw = |prg: &mut Prg| -> Vec<u8> { (0..n).map(|_| bit(prg)).collect() };
    let (x0, x1, y0, y1, z0, z1) = (
        draw(&mut prg),
        draw(&mut prg),
        draw(&mut prg),
        draw(&mut prg),
        draw(&mut prg),
        draw(&mut prg),
    );
    let xy = and_pair(&mut prg, [&x0, &x1], [&y0, &y1]);
    let (a, b) = and2_pair(&mut prg, [&x0, &x1], [&y0, &y1], [&z0, &z1]);
    let p = and_private_pair(&mut prg, &x0, &y1);
    for i in 0..n {
        let (x, y, z) = (x0[i] ^ x1[i], y0[i] ^ y1[i], z0[i] ^ z1[i]);
        assert_eq!(xy[0][i] ^ xy[1][i], x & y, "AND {i}");
        assert_eq!(a[0][i] ^ a[1][i], x & y, "first of two ANDs {i}");
        assert_eq!(b[0][i] ^ b[1][i], x & z, "second of two ANDs {i}");
        assert_eq!(p[0][i] ^ p[1][i], x0[i] & y1[i], "private AND {i}");
    }
}

#[test]
fn millionaire_steps_equal_less_than() {
    let mut prg = Prg::from_seed(Block(0x3111));
    for bits in [1u32, 3, 8, 17, 32, 64] {
        for m in 1..=4 {
            let a = values(&mut prg, 96, bits);
            let mut b = values(&mut prg, 96, bits);
            // Equal values, and neighbours either way, at the extremes.
            b[..6].copy_from_slice(&a[..6]);
            b[6] = a[6].wrapping_add(1) & mask(bits);
            b[7] = a[7].wrapping_sub(1) & mask(bits);
            let r = mill_pair(&mut prg, &a, &b, bits, m);
            for i in 0..a.len() {
                assert_eq!(
                    r[0][i] ^ r[1][i],
                    (a[i] < b[i]) as u8,
                    "{} < {} ({bits} bits, m {m})",
                    a[i],
                    b[i]
                );
            }
        }
    }
}

#[test]
fn trunc_reduce_steps_equal_the_floor() {
    let mut prg = Prg::from_seed(Block(0x7e4));
    for bits in [2u32, 8, 21, 37, 64] {
        for t in [1, bits / 2, bits - 1].into_iter().filter(|&t| t > 0) {
            let mut x = values(&mut prg, 80, bits);
            x.push(mask(t));
            x.push(1u64 << t);
            let s = shares(&mut prg, &x, bits);
            let c = [0, 1].map(|p| carry_input(&s[p], t, p == 0));
            let w = mill_pair(&mut prg, &c[0], &c[1], t, 4);
            let ca = b2a_pair(&mut prg, [&w[0], &w[1]], bits - t);
            let out = [0, 1].map(|p| trunc_reduce_output(&s[p], &ca[p], bits, t).unwrap());
            let got = open(&out, bits - t);
            for i in 0..x.len() {
                assert_eq!(got[i], x[i] >> t, "x {} ({bits} bits, t {t})", x[i]);
            }
        }
    }
}

#[test]
fn ars_steps_equal_the_signed_floor() {
    let mut prg = Prg::from_seed(Block(0xa45));
    for bits in [2u32, 8, 21, 37, 64] {
        for t in [1, bits / 2, bits - 1].into_iter().filter(|&t| t > 0) {
            let x = values(&mut prg, 80, bits);
            let s = shares(&mut prg, &x, bits);
            let y = [0, 1].map(|p| ars_bias(&s[p], bits, p == 0));
            let c = [0, 1].map(|p| carries_input(&y[p], &[t, bits], p == 0));
            let w = mill_pair(&mut prg, &c[0], &c[1], bits, 4);
            let a = b2a_pair(&mut prg, [&w[0], &w[1]], bits);
            let out = [0, 1].map(|p| ars_output(&y[p], &a[p], bits, t, p == 0).unwrap());
            let got = open(&out, bits);
            for i in 0..x.len() {
                let want = (crate::ring::to_signed(x[i], bits) >> t) as u64 & mask(bits);
                assert_eq!(got[i], want, "x {} ({bits} bits, t {t})", x[i]);
            }
        }
    }
}

#[test]
fn mul_shared_steps_equal_the_product() {
    let mut prg = Prg::from_seed(Block(0x3a1));
    for bits in [1u32, 16, 37, 64] {
        let (x, y) = (values(&mut prg, 64, bits), values(&mut prg, 64, bits));
        let (sx, sy) = (shares(&mut prg, &x, bits), shares(&mut prg, &y, bits));
        let out = cross_pair(&mut prg, [&sx[0], &sx[1]], [&sy[0], &sy[1]], bits, bits);
        assert_products(&open(&out, bits), &x, &y, bits, "mul_shared");
    }
}

#[test]
fn trunc_msb0_steps_equal_the_floor() {
    let mut prg = Prg::from_seed(Block(0x75b0));
    for (bits, t) in [(8u32, 3u32), (21, 10), (37, 1), (64, 20)] {
        // Values with a known MSB of 0, below 2^(bits−1) − 2^t, with their extremes.
        let top = (1u64 << (bits - 1)) - (1u64 << t);
        let mut x: Vec<u64> = (0..80).map(|_| prg.next_u64() % top).collect();
        x.extend([0, top - 1, mask(t), 1u64 << t]);
        for (exact, carry_bits) in [(true, t), (true, t.div_ceil(2)), (false, t)] {
            let s = shares(&mut prg, &x, bits);
            let b = [0, 1].map(|p| trunc_msb0_bias(&s[p], bits, t, exact, p == 0));
            let carry = exact.then(|| {
                let ops = [0, 1].map(|p| trunc_carry_operand(&b[p], t, carry_bits));
                let w = ops[0].1;
                let c = [0, 1].map(|p| carry_input(&ops[p].0, w, p == 0));
                mill_pair(&mut prg, &c[0], &c[1], w, 4)
            });
            let d =
                [0, 1].map(|p| trunc_msb0_deltas(&b[p], bits, carry.as_ref().map(|c| &c[p][..])));
            // The COT batch with P0 sending: P0 keeps −x, P1 gets x + c·δ.
            let choices: Vec<bool> = d[1].iter().map(|v| *v == 1).collect();
            let (pad, got) = cot(&mut prg, &d[0], &choices, bits);
            let neg: Vec<u64> = pad.iter().map(|v| v.wrapping_neg() & mask(bits)).collect();
            let out = [
                trunc_msb0_output(&b[0], &d[0], &neg, bits, t, exact).unwrap(),
                trunc_msb0_output(&b[1], &d[1], &got, bits, t, exact).unwrap(),
            ];
            let r = open(&out, bits);
            for i in 0..x.len() {
                let floor = x[i] >> t;
                let ok = if !exact {
                    r[i] == floor || r[i] == floor + 1
                } else if carry_bits == t || x[i] & mask(t) >= 1u64 << (t - carry_bits) {
                    r[i] == floor
                } else {
                    r[i] == floor || (r[i] + 1) & mask(bits) == floor
                };
                assert!(
                    ok,
                    "x {} → {} ({bits} bits, t {t}, exact {exact}, {carry_bits})",
                    x[i], r[i]
                );
            }
        }
    }
}

#[test]
fn msb_and_wrap_steps_equal_the_plaintext() {
    let mut prg = Prg::from_seed(Block(0x3b5));
    for bits in [2u32, 8, 37, 64] {
        let x = values(&mut prg, 80, bits);
        let s = shares(&mut prg, &x, bits);
        let ci = [0, 1].map(|p| carry_input(&s[p], bits - 1, p == 0));
        let c = mill_pair(&mut prg, &ci[0], &ci[1], bits - 1, 4);
        let ops = [0, 1].map(|p| msb_wrap_and_operands(&s[p], &c[p], bits, p == 0));
        let z = and_pair(&mut prg, [&ops[0].0, &ops[1].0], [&ops[0].1, &ops[1].1]);
        let out = [0, 1].map(|p| msb_wrap_output(&s[p], &c[p], &z[p], bits).unwrap());
        let msb_only = [0, 1].map(|p| msb_output(&s[p], &c[p], bits).unwrap());
        for i in 0..x.len() {
            let wrap = (s[0][i] as u128 + s[1][i] as u128) >> bits;
            let m = ((x[i] >> (bits - 1)) & 1) as u8;
            assert_eq!(
                out[0].0[i] ^ out[1].0[i],
                m,
                "msb of {} ({bits} bits)",
                x[i]
            );
            assert_eq!(msb_only[0][i] ^ msb_only[1][i], m);
            assert_eq!(
                (out[0].1[i] ^ out[1].1[i]) as u128,
                wrap,
                "wrap ({bits} bits)"
            );
        }
    }
}

#[test]
fn extension_steps_equal_the_extended_value() {
    let mut prg = Prg::from_seed(Block(0xe47));
    for (from, to) in [(1u32, 8u32), (8, 8), (13, 37), (37, 64)] {
        let x = values(&mut prg, 80, from);
        let s = shares(&mut prg, &x, from);
        for signed in [false, true] {
            let bias = 1u64 << (from - 1);
            let y = [0, 1].map(|p| {
                if signed {
                    add_public(&s[p], bias, from, p == 0)
                } else {
                    s[p].clone()
                }
            });
            let ci = [0, 1].map(|p| carry_input(&y[p], from, p == 0));
            let w = mill_pair(&mut prg, &ci[0], &ci[1], from, 4);
            let wa = b2a_pair(&mut prg, [&w[0], &w[1]], to);
            let e = [0, 1].map(|p| {
                let e = ext_output(&y[p], &wa[p], from, to).unwrap();
                if signed {
                    add_public(&e, bias.wrapping_neg(), to, p == 0)
                } else {
                    e
                }
            });
            let got = open(&e, to);
            for i in 0..x.len() {
                let want = if signed {
                    crate::ring::to_signed(x[i], from) as u64 & mask(to)
                } else {
                    x[i]
                };
                assert_eq!(
                    got[i], want,
                    "{} from {from} to {to} (signed {signed})",
                    x[i]
                );
            }
        }
    }
}

#[test]
fn digit_steps_equal_the_digits() {
    let mut prg = Prg::from_seed(Block(0xd19));
    for (bits, d) in [(8u32, 8u32), (16, 5), (21, 4), (64, 6)] {
        let x = values(&mut prg, 64, bits);
        let s = shares(&mut prg, &x, bits);
        let widths = digit_carry_widths(bits, d);
        let ca = if widths.is_empty() {
            [Vec::new(), Vec::new()]
        } else {
            let ci = [0, 1].map(|p| carries_input(&s[p], &widths, p == 0));
            let wmax = *widths.iter().max().unwrap();
            let c = mill_pair(&mut prg, &ci[0], &ci[1], wmax, 4);
            b2a_pair(&mut prg, [&c[0], &c[1]], d)
        };
        let out = [0, 1].map(|p| digit_output(&s[p], &ca[p], bits, d).unwrap());
        assert_eq!(out[0].len() as u32, bits.div_ceil(d));
        for (k, ((v0, w), (v1, _))) in out[0].iter().zip(&out[1]).enumerate() {
            let got = open(&[v0.clone(), v1.clone()], *w);
            for i in 0..x.len() {
                let want = (x[i] >> (k as u32 * d)) & mask(*w);
                assert_eq!(got[i], want, "digit {k} of {} ({bits} bits, d {d})", x[i]);
            }
        }
    }
}

#[test]
fn nonuniform_product_steps_equal_the_product() {
    let mut prg = Prg::from_seed(Block(0x9f1));
    for (bx, by, bits) in [
        (8u32, 8u32, 16u32),
        (13, 21, 30),
        (20, 12, 32),
        (40, 24, 64),
    ] {
        let (tx, ty) = (1u64 << (bx - 1), 1u64 << (by - 1));
        let mut x: Vec<u64> = (0..70).map(|_| prg.next_u64() % tx).collect();
        let mut y: Vec<u64> = (0..70).map(|_| prg.next_u64() % ty).collect();
        x.extend([0, tx - 1, tx - 1, 1]);
        y.extend([ty - 1, 0, ty - 1, 1]);
        let (sx, sy) = (shares(&mut prg, &x, bx), shares(&mut prg, &y, by));
        let n = x.len();
        let m = [0, 1].map(|p| [msbs(&sx[p], bx), msbs(&sy[p], by)].concat());
        let ops = [0, 1].map(|p| private_and_operands(&m[p], p == 0));
        let z = and_pair(&mut prg, [&ops[0].0, &ops[1].0], [&ops[0].1, &ops[1].1]);
        let w = [0, 1].map(|p| -> Vec<u8> { m[p].iter().zip(&z[p]).map(|(a, b)| a ^ b).collect() });
        let base = cross_pair(&mut prg, [&sx[0], &sx[1]], [&sy[0], &sy[1]], bits, by);
        let c = [0, 1].map(|p| [&w[p][n..], &w[p][..n]].concat());
        let v = [0, 1].map(|p| [sx[p].clone(), sy[p].clone()].concat());
        let mx = mux_pair(&mut prg, [&c[0], &c[1]], [&v[0], &v[1]], bits);
        let out = [0, 1].map(|p| nonuniform_output(&base[p], &mx[p], bx, by, bits).unwrap());
        assert_products(&open(&out, bits), &x, &y, bits, "non-uniform");
    }
}

#[test]
fn msb0_extension_and_private_product_steps_equal_the_plaintext() {
    let mut prg = Prg::from_seed(Block(0x9e0));
    for (from, to) in [(2u32, 9u32), (13, 37), (37, 64), (20, 12)] {
        let top = 1u64 << (from - 1);
        let mut x: Vec<u64> = (0..70).map(|_| prg.next_u64() % top).collect();
        x.extend([0, top - 1]);
        let s = shares(&mut prg, &x, from);
        let m = [0, 1].map(|p| msbs(&s[p], from));
        // P0's MSBs as correlations, P1's as choices: one COT each, P0 keeping −pad.
        let d: Vec<u64> = m[0].iter().map(|b| *b as u64).collect();
        let c: Vec<bool> = m[1].iter().map(|b| *b == 1).collect();
        let (pad, got) = cot(&mut prg, &d, &c, to);
        let neg: Vec<u64> = pad.iter().map(|v| v.wrapping_neg() & mask(to)).collect();
        let w = [
            msb0_wrap_output(&m[0], &neg, to).unwrap(),
            msb0_wrap_output(&m[1], &got, to).unwrap(),
        ];
        let e = [0, 1].map(|p| ext_output(&s[p], &w[p], from, to).unwrap());
        let got = open(&e, to);
        for i in 0..x.len() {
            assert_eq!(got[i], x[i] & mask(to), "{} from {from} to {to}", x[i]);
        }
    }
    for (b_bits, bits) in [(1u32, 8u32), (16, 32), (20, 64)] {
        let a = values(&mut prg, 60, bits);
        let b = values(&mut prg, 60, b_bits);
        let (pad, got) = cot(
            &mut prg,
            &private_product_deltas(&a, b_bits, bits),
            &private_product_choices(&b, b_bits),
            bits,
        );
        let neg: Vec<u64> = pad.iter().map(|v| v.wrapping_neg() & mask(bits)).collect();
        let out = [
            private_product_output(&neg, a.len(), b_bits, bits).unwrap(),
            private_product_output(&got, a.len(), b_bits, bits).unwrap(),
        ];
        assert_products(&open(&out, bits), &a, &b, bits, "private");
    }
}

#[test]
fn lookup_table_steps_read_the_entry_at_the_shared_index() {
    let mut prg = Prg::from_seed(Block(0x1a7));
    // Packed (16 + 20 + 28 ≤ 64 bits: one row per element) and one row per table (40 + 64).
    for (k, bits) in [(1u32, vec![16u32, 20, 28]), (6, vec![40, 64]), (8, vec![1])] {
        let lay = LutLayout::new(k, &bits).unwrap();
        assert_eq!(lay.packed, bits.iter().sum::<u32>() <= 64);
        let nn = lay.entries();
        let tables: Vec<Vec<u64>> = bits
            .iter()
            .map(|b| (0..nn).map(|_| prg.next_u64() & mask(*b)).collect())
            .collect();
        let idx = values(&mut prg, 40, k);
        let s = shares(&mut prg, &idx, k);
        let rs: Vec<Vec<u64>> = bits
            .iter()
            .map(|b| idx.iter().map(|_| prg.next_u64() & mask(*b)).collect())
            .collect();
        let mut rows = vec![0u64; idx.len() * lay.rows * nn];
        lut_rows(lay, &s[0], &bits, &rs, 0, &mut rows, |_, j, q| tables[q][j]).unwrap();
        // The 1-of-N OT: P1 reads its choice of each row.
        let got: Vec<u64> = lut_choices(lay, &s[1])
            .iter()
            .enumerate()
            .map(|(row, &c)| rows[row * nn + c as usize])
            .collect();
        let read = lut_read(lay, &bits, &got).unwrap();
        for (q, b) in bits.iter().enumerate() {
            for i in 0..idx.len() {
                assert_eq!(
                    read[q][i].wrapping_add(rs[q][i]) & mask(*b),
                    tables[q][idx[i] as usize],
                    "table {q} at {} (k {k})",
                    idx[i]
                );
            }
        }
        // Rows for elements past the end, and OT outputs not a whole number of elements.
        let mut one = vec![0u64; lay.rows * nn];
        assert!(lut_rows(lay, &s[0], &bits, &rs, idx.len(), &mut one, |_, _, _| 0).is_err());
        if lay.rows > 1 {
            assert!(matches!(
                lut_read(lay, &bits, &got[1..]),
                Err(SsError::InvalidArgument(_))
            ));
        }
    }
}

#[test]
fn steps_refuse_peer_messages_of_the_wrong_shape() {
    let malformed = |r: Result<Vec<u8>>| matches!(r, Err(SsError::Malformed(_)));
    // Openings: a byte short or long, and bits set in the padding.
    assert!(malformed(unpack_opening(&[0], 9)));
    assert!(malformed(unpack_opening(&[0, 0, 0], 9)));
    assert!(malformed(unpack_opening(&[0, 2], 9)));
    // ANDs: the peer's opened bits of the wrong count.
    let mut prg = Prg::from_seed(Block(0xbad));
    let (t0, _) = triples(&mut prg, 4);
    let mine = and_open(&[1, 0, 1, 0], &[0, 0, 1, 1], &t0).unwrap();
    assert!(malformed(and_close(&mine, &mine[..7], &t0, true)));
    let mine2 = and2_open(&[1; 4], &[0; 4], &[1; 4], &t0).unwrap();
    assert!(matches!(
        and2_close(&mine2, &mine2[..11], &t0, false),
        Err(SsError::Malformed(_))
    ));
    let (h0, _) = halves(&mut prg, 4);
    let o = and_private_open(&[1, 1, 0, 0], &h0).unwrap();
    assert!(malformed(and_private_close(&o, &o[..3], &h0, true)));
    // Leaves: a query or an answer of the wrong size, and a query with padding set.
    let (k0, k1) = leaf_ots(&mut prg, 3, 4);
    let digits = [1u8, 15, 7];
    let q = leaf_query(&k1, &digits, 4).unwrap();
    let sh = [prg.next_u64()];
    let answer = |q: &[u8]| leaf_answer(&k0, &digits, 4, q, &sh).map(|(y, _)| y);
    assert!(malformed(answer(&q[..1])));
    assert!(malformed(answer(&[q.clone(), vec![0]].concat())));
    let mut padded = q.clone();
    *padded.last_mut().unwrap() |= 0x80;
    assert!(malformed(answer(&padded)));
    let y = answer(&q).unwrap();
    assert!(malformed(leaf_result(&k1, &digits, 4, &y[..y.len() - 1])));
    // Local arguments of the wrong length are this party's error, not the peer's.
    assert!(matches!(
        cross_combine(&[1, 2], &[3, 4], &[0; 7], &[0; 8], 4, 4),
        Err(SsError::InvalidArgument(_))
    ));
    let mut tree = MillTree::new(2, vec![0; 8], vec![0; 8]).unwrap();
    assert!(matches!(
        tree.absorb(&[0; 3], &[0; 4]),
        Err(SsError::InvalidArgument(_))
    ));
    assert!(matches!(
        trunc_reduce_output(&[1, 2], &[0], 8, 3),
        Err(SsError::InvalidArgument(_))
    ));
    assert!(matches!(
        ars_output(&[1, 2], &[0; 3], 8, 3, true),
        Err(SsError::InvalidArgument(_))
    ));
    // Widths out of range are refused, never a panic (no shift by 64 or by −1).
    assert!(matches!(
        trunc_reduce_output(&[1], &[0], 65, 3),
        Err(SsError::InvalidArgument(_))
    ));
    assert!(matches!(
        LutLayout::new(9, &[8]),
        Err(SsError::InvalidArgument(_))
    ));
    assert!(matches!(
        leaf_query(&[0], &[1], 5),
        Err(SsError::InvalidArgument(_))
    ));
    assert_eq!(msbs(&[u64::MAX], 0), vec![1]);
    assert_eq!(ars_bias(&[0], 0, true).len(), 1);
    assert_eq!(trunc_msb0_bias(&[0], 64, 64, false, true), vec![0]);
}
