//! Gadgets, written once against [`Backend`] and parameterised by bit width. Words are
//! little-endian vectors of [`Bit`]s; signed words are two's complement. AND counts below are
//! upper bounds (constant operands fold away).
use crate::backend::{and, mux, not, or, xor, Backend, Bit, Word};
use std::collections::HashMap;

pub mod cache;
pub mod fixed;
pub mod topk;

type W<B> = <B as Backend>::Wire;

/// The low `w` bits of `v` as constants.
pub fn constant_word<X>(v: u64, w: usize) -> Vec<Bit<X>> {
    (0..w)
        .map(|i| Bit::Const(i < 64 && (v >> i) & 1 == 1))
        .collect()
}

/// Zero-extends (or truncates) to `w` bits.
pub fn zext<X: Clone>(x: &[Bit<X>], w: usize) -> Vec<Bit<X>> {
    (0..w)
        .map(|i| x.get(i).cloned().unwrap_or(Bit::Const(false)))
        .collect()
}

/// Sign-extends (or truncates) to `w` bits.
pub fn sext<X: Clone>(x: &[Bit<X>], w: usize) -> Vec<Bit<X>> {
    let s = x.last().cloned().unwrap_or(Bit::Const(false));
    (0..w)
        .map(|i| x.get(i).cloned().unwrap_or_else(|| s.clone()))
        .collect()
}

/// x + y + cin over `max(len)` bits (shorter operand zero-extended); returns (sum, carry out).
/// One AND per bit.
pub fn add_full<B: Backend>(
    b: &mut B,
    x: &[Bit<W<B>>],
    y: &[Bit<W<B>>],
    cin: Bit<W<B>>,
) -> (Word<W<B>>, Bit<W<B>>) {
    let w = x.len().max(y.len());
    let (x, y) = (zext(x, w), zext(y, w));
    let mut c = cin;
    let mut s = Vec::with_capacity(w);
    for i in 0..w {
        let t1 = xor(b, &x[i], &c);
        let t2 = xor(b, &y[i], &c);
        s.push(xor(b, &t1, &y[i]));
        let t = and(b, &t1, &t2);
        c = xor(b, &c, &t);
    }
    (s, c)
}

/// x + y mod 2^w (w = max len): w − 1 ANDs (the last carry is not computed).
pub fn add<B: Backend>(b: &mut B, x: &[Bit<W<B>>], y: &[Bit<W<B>>]) -> Word<W<B>> {
    add_cin(b, x, y, Bit::Const(false))
}

/// x + y + cin mod 2^w.
pub fn add_cin<B: Backend>(
    b: &mut B,
    x: &[Bit<W<B>>],
    y: &[Bit<W<B>>],
    cin: Bit<W<B>>,
) -> Word<W<B>> {
    let w = x.len().max(y.len());
    if w == 0 {
        return Vec::new();
    }
    let (x, y) = (zext(x, w), zext(y, w));
    let (mut s, c) = add_full(b, &x[..w - 1], &y[..w - 1], cin);
    // top bit: x ⊕ y ⊕ carry, no AND.
    let t = xor(b, &x[w - 1], &y[w - 1]);
    s.push(xor(b, &t, &c));
    s
}

/// x − y over `max(len)` bits; returns (difference mod 2^w, borrow = [x < y] as unsigned).
pub fn sub_full<B: Backend>(
    b: &mut B,
    x: &[Bit<W<B>>],
    y: &[Bit<W<B>>],
) -> (Word<W<B>>, Bit<W<B>>) {
    let w = x.len().max(y.len());
    let ny: Vec<_> = zext(y, w).iter().map(|v| not(b, v)).collect();
    let (d, c) = add_full(b, &zext(x, w), &ny, Bit::Const(true));
    let borrow = not(b, &c);
    (d, borrow)
}

/// x − y mod 2^w.
pub fn sub<B: Backend>(b: &mut B, x: &[Bit<W<B>>], y: &[Bit<W<B>>]) -> Word<W<B>> {
    let w = x.len().max(y.len());
    let ny: Vec<_> = zext(y, w).iter().map(|v| not(b, v)).collect();
    add_cin(b, &zext(x, w), &ny, Bit::Const(true))
}

/// −x mod 2^w (two's complement negation).
pub fn neg<B: Backend>(b: &mut B, x: &[Bit<W<B>>]) -> Word<W<B>> {
    let zero = constant_word(0, x.len());
    sub(b, &zero, x)
}

/// [x < y] for unsigned words (shorter one zero-extended): one AND per bit.
pub fn lt_unsigned<B: Backend>(b: &mut B, x: &[Bit<W<B>>], y: &[Bit<W<B>>]) -> Bit<W<B>> {
    let w = x.len().max(y.len());
    let (x, y) = (zext(x, w), zext(y, w));
    // carry chain of x + ¬y + 1; carry out = [x ≥ y].
    let mut c = Bit::Const(true);
    for i in 0..w {
        let ny = not(b, &y[i]);
        let t1 = xor(b, &x[i], &c);
        let t2 = xor(b, &ny, &c);
        let t = and(b, &t1, &t2);
        c = xor(b, &c, &t);
    }
    not(b, &c)
}

/// [x ≥ y] unsigned.
pub fn ge_unsigned<B: Backend>(b: &mut B, x: &[Bit<W<B>>], y: &[Bit<W<B>>]) -> Bit<W<B>> {
    let l = lt_unsigned(b, x, y);
    not(b, &l)
}

fn flip_msb<B: Backend>(b: &mut B, x: &[Bit<W<B>>], w: usize) -> Word<W<B>> {
    let mut v = sext(x, w);
    if let Some(m) = v.last_mut() {
        *m = not(b, m);
    }
    v
}

/// [x < y] for signed words (sign-extended to a common width).
pub fn lt_signed<B: Backend>(b: &mut B, x: &[Bit<W<B>>], y: &[Bit<W<B>>]) -> Bit<W<B>> {
    let w = x.len().max(y.len());
    let xf = flip_msb(b, x, w);
    let yf = flip_msb(b, y, w);
    lt_unsigned(b, &xf, &yf)
}

/// Bitwise s ? y : x (one AND per bit).
pub fn mux_word<B: Backend>(
    b: &mut B,
    s: &Bit<W<B>>,
    x: &[Bit<W<B>>],
    y: &[Bit<W<B>>],
) -> Word<W<B>> {
    let w = x.len().max(y.len());
    let (x, y) = (zext(x, w), zext(y, w));
    (0..w).map(|i| mux(b, s, &x[i], &y[i])).collect()
}

/// Number of bits of p.
pub fn bit_len(p: u64) -> usize {
    (64 - p.leading_zeros()) as usize
}

/// (x0 + x1) mod p for x0, x1 ∈ [0, p): x0 + x1 − p·[x0 + x1 ≥ p]; result on bit_len(p) bits.
/// About 3·bit_len(p) ANDs.
pub fn mod_add<B: Backend>(b: &mut B, x0: &[Bit<W<B>>], x1: &[Bit<W<B>>], p: u64) -> Word<W<B>> {
    let w = bit_len(p);
    let (s, c) = add_full(b, &zext(x0, w), &zext(x1, w), Bit::Const(false));
    let mut v = s;
    v.push(c); // w + 1 bits, < 2p
    let (d, borrow) = sub_full(b, &v, &constant_word(p, w + 1));
    let r = mux_word(b, &borrow, &d, &v);
    r[..w].to_vec()
}

/// Signed lift of u ∈ [0, p): u − p if u ≥ (p+1)/2, else u; result on bit_len(p) + 1 bits.
pub fn lift_signed<B: Backend>(b: &mut B, u: &[Bit<W<B>>], p: u64) -> Word<W<B>> {
    let w = bit_len(p) + 1;
    let u = zext(u, w);
    let big = ge_unsigned(b, &u, &constant_word(p.div_ceil(2), w));
    let d = sub(b, &u, &constant_word(p, w));
    mux_word(b, &big, &u, &d)
}

/// Unsigned full product (len x + len y bits), schoolbook with carry-save rows.
pub fn mul_unsigned<B: Backend>(b: &mut B, x: &[Bit<W<B>>], y: &[Bit<W<B>>]) -> Word<W<B>> {
    mul_trunc(b, x, y, x.len() + y.len())
}

/// The low `w` bits of the unsigned product x·y.
pub fn mul_trunc<B: Backend>(b: &mut B, x: &[Bit<W<B>>], y: &[Bit<W<B>>], w: usize) -> Word<W<B>> {
    let mut acc: Word<W<B>> = constant_word(0, w);
    for (j, yj) in y.iter().enumerate() {
        if j >= w {
            break;
        }
        if yj.as_const() == Some(false) {
            continue;
        }
        let pp: Vec<_> = x.iter().take(w - j).map(|xi| and(b, xi, yj)).collect();
        if pp.iter().all(|v| v.as_const() == Some(false)) {
            continue;
        }
        // add pp into acc[j..]
        let hi = acc[j..].to_vec();
        let s = add(b, &hi, &pp);
        acc.truncate(j);
        acc.extend(s);
        acc.truncate(w);
    }
    acc
}

/// Element-wise product of two signed w-bit words, low w bits (= the signed product mod 2^w).
pub fn mul_lo<B: Backend>(b: &mut B, x: &[Bit<W<B>>], y: &[Bit<W<B>>]) -> Word<W<B>> {
    let w = x.len().max(y.len());
    mul_trunc(b, &sext(x, w), &sext(y, w), w)
}

/// Full signed product of two signed words (len x + len y bits).
pub fn mul_signed<B: Backend>(b: &mut B, x: &[Bit<W<B>>], y: &[Bit<W<B>>]) -> Word<W<B>> {
    let w = x.len() + y.len();
    mul_trunc(b, &sext(x, w), &sext(y, w), w)
}

/// max(x, 0) for a signed word: one AND per non-sign bit.
pub fn relu<B: Backend>(b: &mut B, x: &[Bit<W<B>>]) -> Word<W<B>> {
    let Some(s) = x.last() else { return Vec::new() };
    let ns = not(b, s);
    let mut r: Vec<_> = x[..x.len() - 1].iter().map(|v| and(b, v, &ns)).collect();
    r.push(Bit::Const(false));
    r
}

/// |x| for a signed word (the most negative value maps to itself read as unsigned).
pub fn abs<B: Backend>(b: &mut B, x: &[Bit<W<B>>]) -> Word<W<B>> {
    let Some(s) = x.last().cloned() else {
        return Vec::new();
    };
    let f: Vec<_> = x.iter().map(|v| xor(b, v, &s)).collect();
    add_cin(b, &f, &constant_word(0, x.len()), s)
}

/// Saturates a signed word to `w` bits (w ≤ len): min/max when it does not fit.
pub fn saturate<B: Backend>(b: &mut B, x: &[Bit<W<B>>], w: usize) -> Word<W<B>> {
    if x.len() <= w {
        return sext(x, w);
    }
    let s = x[x.len() - 1].clone();
    // overflow iff some bit in [w-1, len-2] differs from the sign.
    let mut ov = Bit::Const(false);
    for v in &x[w - 1..x.len() - 1] {
        let d = xor(b, v, &s);
        ov = or(b, &ov, &d);
    }
    let ns = not(b, &s);
    (0..w)
        .map(|i| {
            let sat = if i == w - 1 { s.clone() } else { ns.clone() };
            let v = if i == w - 1 { s.clone() } else { x[i].clone() };
            mux(b, &ov, &v, &sat)
        })
        .collect()
}

/// Arithmetic right shift by k with round-half-up (adds bit k−1 before dropping).
pub fn shr_round<B: Backend>(b: &mut B, x: &[Bit<W<B>>], k: usize) -> Word<W<B>> {
    if k == 0 {
        return x.to_vec();
    }
    if k >= x.len() {
        return constant_word(0, 1);
    }
    let hi = x[k..].to_vec();
    let r = x[k - 1].clone();
    // hi + r with one extra bit so +1 on the maximum does not wrap.
    let hi = sext(&hi, hi.len() + 1);
    add_cin(b, &hi, &constant_word(0, hi.len()), r)
}

/// Index (⌈log2 n⌉ bits) and value of the maximum of signed words (first index on ties),
/// by a tournament of comparators and multiplexers.
pub fn argmax<B: Backend>(b: &mut B, xs: &[Word<W<B>>]) -> (Word<W<B>>, Word<W<B>>) {
    let n = xs.len();
    let ib = bit_len(n.saturating_sub(1) as u64).max(1);
    type Cand<X> = (Word<X>, Word<X>);
    let mut cur: Vec<Cand<W<B>>> = xs
        .iter()
        .enumerate()
        .map(|(i, x)| (constant_word(i as u64, ib), x.clone()))
        .collect();
    while cur.len() > 1 {
        let mut next = Vec::with_capacity(cur.len().div_ceil(2));
        let mut it = cur.into_iter();
        while let Some((ia, va)) = it.next() {
            match it.next() {
                None => next.push((ia, va)),
                Some((ib_, vb)) => {
                    let gt = lt_signed(b, &va, &vb); // take b only if strictly greater
                    let v = mux_word(b, &gt, &va, &vb);
                    let i = mux_word(b, &gt, &ia, &ib_);
                    next.push((i, v));
                }
            }
        }
        cur = next;
    }
    cur.pop()
        .unwrap_or_else(|| (constant_word(0, ib), Vec::new()))
}

/// Table lookup: bit j of the output is bit j of `table[index(sel)]` (sel little-endian,
/// `table.len() == 2^sel.len()`). Each output bit is written in algebraic normal form (XOR of
/// monomials of the selector bits, by the Möbius transform of its truth table); monomials are
/// shared across output bits and built lazily, so the cost is at most 2^k − k − 1 ANDs for any
/// number of output bits, and far fewer for smooth tables.
pub fn lut<B: Backend>(b: &mut B, sel: &[Bit<W<B>>], table: &[u64], out_bits: usize) -> Word<W<B>> {
    let k = sel.len();
    assert_eq!(table.len(), 1usize << k, "lut: table size must be 2^k");
    let mut memo: HashMap<usize, Bit<W<B>>> = HashMap::new();
    memo.insert(0, Bit::Const(true));
    let mut out = Vec::with_capacity(out_bits);
    for j in 0..out_bits {
        let mut anf: Vec<u8> = table.iter().map(|t| ((t >> j) & 1) as u8).collect();
        for i in 0..k {
            for m in 0..anf.len() {
                if m & (1 << i) != 0 {
                    anf[m] ^= anf[m ^ (1 << i)];
                }
            }
        }
        let mut acc = Bit::Const(false);
        for (m, &c) in anf.iter().enumerate() {
            if c == 1 {
                let mono = monomial(b, sel, m, &mut memo);
                acc = xor(b, &acc, &mono);
            }
        }
        out.push(acc);
    }
    out
}

fn monomial<B: Backend>(
    b: &mut B,
    sel: &[Bit<W<B>>],
    m: usize,
    memo: &mut HashMap<usize, Bit<W<B>>>,
) -> Bit<W<B>> {
    if let Some(v) = memo.get(&m) {
        return v.clone();
    }
    let top = usize::BITS as usize - 1 - m.leading_zeros() as usize;
    let rest = m & !(1 << top);
    let r = monomial(b, sel, rest, memo);
    let v = and(b, &r, &sel[top]);
    memo.insert(m, v.clone());
    v
}
