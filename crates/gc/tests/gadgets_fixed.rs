//! The fixed-point, carry and top-k gadgets (`gadgets::fixed`, `gadgets::topk`) garbled and
//! evaluated between two parties over real OT extension, against plaintext integer references:
//! the accumulator sum and truncation, the rescale with saturation, the fitted sigmoid (within
//! its 1-ULP bound of the exact value), the rescale back up, the carry from leaf bits and the
//! top-3 indices; and the per-model circuit cache.
use rand::{Rng, SeedableRng};
use secinfer_core::Format;
use secinfer_gc::activation::{reference, Func};
use secinfer_gc::backend::xor;
use secinfer_gc::gadgets::cache::{truth_table, CircuitCache};
use secinfer_gc::gadgets::fixed::{
    add_truncate, carry_from_leaves, rescale_saturate, rescale_up, smooth_activation, LEAF_BITS,
};
use secinfer_gc::gadgets::topk::top_k_indices;
use secinfer_gc::protocol::{evaluate_offline, evaluate_online, garble_offline, garble_online};
use secinfer_gc::Circuit;
use secinfer_net::simulate;
use secinfer_ot::{Block, Prg};
use std::sync::Arc;
mod common;
use common::ot_pair;

const A: usize = 32;
const F: usize = 12;
const L: usize = 20;
const WORDS: usize = 6;
const WB: usize = 8;
const K: usize = 3;

fn fmt(bits: u32, scale: u32) -> Format {
    Format::new(bits, scale).expect("valid format")
}

/// Per party: an accumulator share (A bits), three leaf bits, XOR shares of six 8-bit words.
const PER_PARTY: usize = A + LEAF_BITS + WORDS * WB;

fn circuit() -> Circuit {
    let (inp, out) = (fmt(8, 4), fmt(8, 7));
    Circuit::build(2 * PER_PARTY, |b, ins| {
        let (g, e) = ins.split_at(PER_PARTY);
        let t = add_truncate(b, &g[..A], &e[..A], F, L);
        let x = rescale_saturate(b, &t, F as u32, inp);
        let y = smooth_activation(b, Func::Sigmoid, &t, F as u32, inp, out);
        let up = rescale_up(&x, inp.scale, F as u32, L);
        let c = carry_from_leaves(b, &g[A..A + LEAF_BITS], &e[A..A + LEAF_BITS]);
        let (gw, ew) = (&g[A + LEAF_BITS..], &e[A + LEAF_BITS..]);
        let words: Vec<_> = (0..WORDS)
            .map(|k| {
                (0..WB)
                    .map(|i| xor(b, &gw[k * WB + i], &ew[k * WB + i]))
                    .collect::<Vec<_>>()
            })
            .collect();
        let top = top_k_indices(b, &words, K);
        let mut o = t;
        o.extend(x);
        o.extend(y);
        o.extend(up);
        o.push(c);
        o.extend(top.concat());
        o
    })
}

fn word(bits: &[bool]) -> u64 {
    bits.iter()
        .enumerate()
        .fold(0, |a, (i, &b)| a | ((b as u64) << i))
}

fn sx(v: u64, w: usize) -> i64 {
    let s = 64 - w;
    ((v << s) as i64) >> s
}

fn bits(v: u64, w: usize) -> impl Iterator<Item = bool> {
    (0..w).map(move |i| (v >> i) & 1 == 1)
}

#[test]
fn fixed_point_carry_and_top_k_gadgets_equal_plaintext_when_garbled() {
    let circ = circuit();
    let n = 300;
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x9adc);
    // Accumulators over the whole 20-bit range and beyond it (saturation), words with ties.
    let acc: Vec<u64> = (0..n)
        .map(|i| match i {
            0 => 0,
            1 => (1 << (F + L - 1)) - 1,
            2 => 1 << (F + L - 1),
            _ => rng.gen::<u64>() & ((1 << (F + L)) - 1),
        })
        .collect();
    let leaves: Vec<u64> = (0..n).map(|i| (i % 8) as u64).collect();
    let words: Vec<Vec<u64>> = (0..n)
        .map(|_| {
            (0..WORDS)
                .map(|_| rng.gen_range(0..6u64) * 37 % 256)
                .collect()
        })
        .collect();
    let mut gi = Vec::new();
    let mut ei = Vec::new();
    for i in 0..n {
        let s = rng.gen::<u32>() as u64;
        let c = acc[i].wrapping_sub(s) & 0xffff_ffff;
        let lg = rng.gen::<u64>() & 7;
        gi.extend(bits(s, A));
        ei.extend(bits(c, A));
        gi.extend(bits(lg, LEAF_BITS));
        ei.extend(bits(lg ^ leaves[i], LEAF_BITS));
        for &w in &words[i] {
            let m = rng.gen::<u64>() & 0xff;
            gi.extend(bits(m, WB));
            ei.extend(bits(m ^ w, WB));
        }
    }
    let mut prg = Prg::new();
    let d = Block(prg.next_block().0 | 1);
    let (so, co) = ot_pair(d);
    let (c1, c2) = (circ.clone(), circ.clone());
    let run = simulate(
        move |ch| {
            let mut ot = co(ch);
            let b = evaluate_offline(ch, &c1, PER_PARTY, n)?;
            evaluate_online(ch, &mut ot, &c1, &b, &ei)
        },
        move |ch| {
            let mut ot = so(ch);
            let b = garble_offline(ch, &c2, PER_PARTY, n, d)?;
            garble_online(ch, &mut ot, &b, &gi)
        },
    );
    run.server.output.expect("garbler");
    let got = run.client.output.expect("evaluator");
    let no = circ.n_outputs();
    let (inp, out) = (fmt(8, 4), fmt(8, 7));
    for i in 0..n {
        let o = &got[i * no..(i + 1) * no];
        let t = sx(acc[i] >> F, L);
        assert_eq!(sx(word(&o[..L]), L), t, "truncation of {:#x}", acc[i]);
        let x = (t >> (F as u32 - inp.scale)).clamp(-128, 127);
        assert_eq!(sx(word(&o[L..L + 8]), 8), x, "rescale of {t}");
        let y = sx(word(&o[L + 8..L + 16]), 8);
        let exact = reference(Func::Sigmoid, inp, out, x);
        assert!((y - exact).abs() <= 1, "sigmoid({x}) = {y}, exact {exact}");
        assert_eq!(
            sx(word(&o[L + 16..2 * L + 16]), L),
            x << (F as u32 - inp.scale)
        );
        let lv = leaves[i];
        let carry = (lv & 1) ^ ((lv >> 1) & (lv >> 2) & 1);
        assert_eq!(o[2 * L + 16] as u64, carry, "carry of leaves {lv:03b}");
        // Largest first, lowest index first among equals.
        let mut order: Vec<usize> = (0..WORDS).collect();
        order.sort_by_key(|&k| (-sx(words[i][k], WB), k));
        let ib = 3;
        let top: Vec<usize> = (0..K)
            .map(|r| word(&o[2 * L + 17 + r * ib..2 * L + 17 + (r + 1) * ib]) as usize)
            .collect();
        assert_eq!(top, order[..K], "top-{K} of {:?}", words[i]);
    }
}

/// A cache builds an activation circuit once and hands that one out again, with the range of
/// its outputs over every input (σ in [0, 1] at 7 fraction bits, equal to the truth table's);
/// another cache (another model's) builds its own, equal one; keyed circuits likewise.
#[test]
fn circuit_cache_builds_each_circuit_once_per_cache() {
    let (inp, out) = (fmt(8, 4), fmt(8, 7));
    let (a, b) = (CircuitCache::default(), CircuitCache::default());
    let (c1, lo1, hi1) = a.activation(Func::Sigmoid, inp, out);
    let (c2, lo2, hi2) = a.activation(Func::Sigmoid, inp, out);
    assert!(Arc::ptr_eq(&c1, &c2));
    assert_eq!((lo1, hi1), (lo2, hi2));
    let (c3, lo3, hi3) = b.activation(Func::Sigmoid, inp, out);
    assert!(!Arc::ptr_eq(&c1, &c3));
    assert_eq!((c1.and_count(), lo1, hi1), (c3.and_count(), lo3, hi3));
    let table = truth_table(&c1, 8);
    assert_eq!(table.len(), 256);
    let ys: Vec<i64> = table.iter().map(|&v| out.decode(v)).collect();
    assert_eq!(ys.iter().min().copied(), Some(lo1));
    assert_eq!(ys.iter().max().copied(), Some(hi1));
    assert!(lo1 >= 0 && lo1 < hi1 && hi1 <= 1 << 7, "{lo1} {hi1}");
    let (t, ..) = a.activation(Func::Tanh, inp, out);
    assert!(!Arc::ptr_eq(&c1, &t));
    let mut builds = 0;
    let key = || ("test", vec![1, 2]);
    let k1 = a.get_or_build(key(), || {
        builds += 1;
        circuit()
    });
    let k2 = a.get_or_build(key(), || {
        builds += 1;
        circuit()
    });
    assert!(Arc::ptr_eq(&k1, &k2));
    assert_eq!(builds, 1);
}
