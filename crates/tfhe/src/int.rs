//! SHE's operators on encrypted fixed-width two's-complement integers ([`Word`]s of encrypted
//! bits), written once over [`Backend`] (SHE, Lou & Jiang, NeurIPS 2019, §3.2–3.3).
//!
//! Products by public powers of two are re-wirings (SHE's "TFHE shift": no gate), negation by a
//! public sign is free NOTs plus a carry the caller folds into its bias, and sums go through the
//! mixed-bitwidth adder tree, whose level k adds (b + k)-bit numbers instead of full-width ones.
use crate::backend::{and, mux, not, or, xor, Backend, Bit, Op, Word};

/// The sign bit (the top bit; an empty word is zero).
pub fn sign<W: Clone>(x: &[Bit<W>]) -> Bit<W> {
    x.last().cloned().unwrap_or(Bit::ZERO)
}

/// `x` at width `w`: sign-extended when wider, its low `w` bits when narrower (the caller
/// guarantees the value fits). Re-wiring only.
pub fn resize<W: Clone>(x: &[Bit<W>], w: usize) -> Word<W> {
    let s = sign(x);
    (0..w)
        .map(|i| x.get(i).cloned().unwrap_or_else(|| s.clone()))
        .collect()
}

/// `x · 2^k`: for k ≥ 0 a left shift that grows the word by k constant-zero bits; for k < 0 an
/// arithmetic right shift, floor(x / 2^-k), that drops the low bits and keeps the sign (so a
/// negative value shifts to a negative value, never to a large positive one). No gate.
pub fn shift<W: Clone>(x: &[Bit<W>], k: i32) -> Word<W> {
    let k_abs = k.unsigned_abs() as usize;
    if k >= 0 {
        let mut out = vec![Bit::ZERO; k_abs];
        out.extend_from_slice(x);
        out
    } else if k_abs < x.len() {
        x[k_abs..].to_vec()
    } else {
        vec![sign(x)]
    }
}

/// One full adder: (sum, carry). t = a ⊕ b, sum = t ⊕ c, carry = t ? c : a — two XORs and one
/// mux (four bootstraps, one level on the carry path), or one gate when an input is public.
fn full_add<B: Backend>(
    b: &mut B,
    x: &Bit<B::Wire>,
    y: &Bit<B::Wire>,
    c: &Bit<B::Wire>,
) -> (Bit<B::Wire>, Bit<B::Wire>) {
    // With a public input the adder is a half adder on the other two (one gate each way).
    let (u, v, k) = match (x.as_const(), y.as_const(), c.as_const()) {
        (Some(k), _, _) => (y, c, k),
        (_, Some(k), _) => (x, c, k),
        (_, _, Some(k)) => (x, y, k),
        _ => {
            let t = xor(b, x, y);
            let s = xor(b, &t, c);
            let carry = mux(b, &t, c, x);
            return (s, carry);
        }
    };
    let t = xor(b, u, v);
    if k {
        (not(b, &t), or(b, u, v))
    } else {
        (t, and(b, u, v))
    }
}

/// `x + y + cin` modulo 2^w (both sign-extended to w first): a ripple-carry adder.
pub fn add_mod<B: Backend>(
    b: &mut B,
    x: &[Bit<B::Wire>],
    y: &[Bit<B::Wire>],
    cin: Bit<B::Wire>,
    w: usize,
) -> Word<B::Wire> {
    let (x, y) = (resize(x, w), resize(y, w));
    let mut carry = cin;
    let mut out = Vec::with_capacity(w);
    for i in 0..w {
        // The last carry is not needed: skip its gates.
        if i + 1 == w {
            let t = xor(b, &x[i], &y[i]);
            out.push(xor(b, &t, &carry));
        } else {
            let (s, c) = full_add(b, &x[i], &y[i], &carry);
            out.push(s);
            carry = c;
        }
    }
    out
}

/// `x + y` exactly: one bit wider than the wider operand (SHE's (b+1)-bit adder for b-bit
/// inputs), counted as one CCAdd.
pub fn add<B: Backend>(b: &mut B, x: &[Bit<B::Wire>], y: &[Bit<B::Wire>]) -> Word<B::Wire> {
    b.note(Op::CcAdd, 1);
    add_mod(b, x, y, Bit::ZERO, x.len().max(y.len()) + 1)
}

/// `s ? -x : x` for an encrypted condition: (x ⊕ s) + s, one bit wider than x.
pub fn cond_negate<B: Backend>(b: &mut B, x: &[Bit<B::Wire>], s: &Bit<B::Wire>) -> Word<B::Wire> {
    let w = x.len() + 1;
    let flipped: Word<B::Wire> = resize(x, w).iter().map(|xi| xor(b, xi, s)).collect();
    add_mod(b, &flipped, &[], s.clone(), w)
}

/// A term `sign · x · 2^k` of a shift-accumulate product with a public weight ±2^k, as SHE
/// computes it: the shift is a re-wiring and a negative sign inverts the bits (NOT is free),
/// so the term equals the product minus `1` when negated. Returns the term and that missing
/// `1` (0 or 1), which the caller adds once to its bias instead of once per term.
pub fn pow2_term<B: Backend>(
    b: &mut B,
    x: &[Bit<B::Wire>],
    k: i32,
    negative: bool,
) -> (Word<B::Wire>, i64) {
    b.note(Op::PcShift, 1);
    let t = shift(x, k);
    if negative {
        // -t = ¬t + 1 at any width ≥ t's width + 1 (t may be the most negative value).
        let wide = resize(&t, t.len() + 1);
        (wide.iter().map(|bit| not(b, bit)).collect(), 1)
    } else {
        (t, 0)
    }
}

/// The mixed-bitwidth adder tree (SHE §3.3): pairs are added level by level, each adder one bit
/// wider than its wider input, so level k of a tree over b-bit terms adds (b + k)-bit numbers.
/// Returns the sum and, per level, the width of every adder's inputs.
pub fn adder_tree<B: Backend>(
    b: &mut B,
    mut terms: Vec<Word<B::Wire>>,
) -> (Word<B::Wire>, Vec<Vec<usize>>) {
    let mut widths = Vec::new();
    if terms.is_empty() {
        return (vec![Bit::ZERO], widths);
    }
    while terms.len() > 1 {
        let mut level = Vec::with_capacity(terms.len() / 2);
        let mut next = Vec::with_capacity(terms.len().div_ceil(2));
        let mut it = terms.into_iter();
        while let Some(x) = it.next() {
            match it.next() {
                Some(y) => {
                    level.push(x.len().max(y.len()));
                    next.push(add(b, &x, &y));
                }
                None => next.push(x),
            }
        }
        widths.push(level);
        terms = next;
    }
    let sum = terms.pop().unwrap_or_else(|| vec![Bit::ZERO]);
    (sum, widths)
}

/// `x + c` for a public constant c, exactly (one bit wider than the wider of the two).
pub fn add_const<B: Backend>(b: &mut B, x: &[Bit<B::Wire>], c: i64) -> Word<B::Wire> {
    if c == 0 {
        return x.to_vec();
    }
    let cw = const_word(c);
    add(b, x, &cw)
}

/// The two's-complement word of a public constant, at its minimal width.
pub fn const_word<W: Clone>(c: i64) -> Word<W> {
    let w = bits_for(c, c);
    (0..w)
        .map(|i| Bit::Const((c >> i.min(63)) & 1 == 1))
        .collect()
}

/// Bits of the narrowest two's-complement word that holds every value in [lo, hi].
pub fn bits_for(lo: i64, hi: i64) -> usize {
    let need = |v: i64| -> usize {
        let m = if v < 0 { !v } else { v };
        (64 - m.leading_zeros() as usize) + 1
    };
    need(lo).max(need(hi))
}

/// ReLU (SHE's ReLU unit): every bit AND NOT the sign; the result's sign is the constant 0.
pub fn relu<B: Backend>(b: &mut B, x: &[Bit<B::Wire>]) -> Word<B::Wire> {
    b.note(Op::CcCom, 1);
    let ns = not(b, &sign(x));
    let mut out: Word<B::Wire> = x[..x.len().saturating_sub(1)]
        .iter()
        .map(|xi| and(b, xi, &ns))
        .collect();
    out.push(Bit::ZERO);
    out
}

/// Saturates a word to the signed range of `bits` bits ([-2^(bits-1), 2^(bits-1) - 1]).
pub fn clip_signed<B: Backend>(b: &mut B, x: &[Bit<B::Wire>], bits: usize) -> Word<B::Wire> {
    if x.len() <= bits {
        return resize(x, bits);
    }
    let s = sign(x);
    // Overflow: some bit at or above bits-1 differs from the sign.
    let mut over = Bit::ZERO;
    for xi in &x[bits - 1..x.len() - 1] {
        let d = xor(b, xi, &s);
        over = or(b, &over, &d);
    }
    // On overflow the result is 0111.. (positive) or 1000.. (negative): low bits ¬s, sign s.
    let ns = not(b, &s);
    let mut out: Word<B::Wire> = x[..bits - 1]
        .iter()
        .map(|xi| mux(b, &over, &ns, xi))
        .collect();
    out.push(s);
    out
}

/// Saturates a non-negative word (constant-zero sign, as ReLU leaves it) to `bits` unsigned
/// bits; the result carries a constant-zero sign bit above them.
pub fn clip_unsigned<B: Backend>(b: &mut B, x: &[Bit<B::Wire>], bits: usize) -> Word<B::Wire> {
    let mut over = Bit::ZERO;
    for xi in x.iter().skip(bits) {
        over = or(b, &over, xi);
    }
    let mut out: Word<B::Wire> = (0..bits)
        .map(|i| {
            let xi = x.get(i).cloned().unwrap_or(Bit::ZERO);
            or(b, &xi, &over)
        })
        .collect();
    out.push(Bit::ZERO);
    out
}

/// Requantisation to the activation format: floor(x / 2^shift) (an arithmetic right shift),
/// then ReLU and saturation to `bits` unsigned bits, or saturation to `bits` signed bits.
pub fn requantize<B: Backend>(
    b: &mut B,
    x: &[Bit<B::Wire>],
    shift_right: u32,
    bits: usize,
    relu_first: bool,
) -> Word<B::Wire> {
    let y = shift(x, -(shift_right as i32));
    if relu_first {
        let r = relu(b, &y);
        clip_unsigned(b, &r, bits)
    } else {
        clip_signed(b, &y, bits)
    }
}

/// `x < y` for signed words: the sign of x - y computed at one bit wider (a borrow chain of
/// one mux per bit).
pub fn less_than<B: Backend>(b: &mut B, x: &[Bit<B::Wire>], y: &[Bit<B::Wire>]) -> Bit<B::Wire> {
    let w = x.len().max(y.len()) + 1;
    let ny: Word<B::Wire> = resize(y, w).iter().map(|yi| not(b, yi)).collect();
    let d = add_mod(b, x, &ny, Bit::ONE, w);
    sign(&d)
}

/// max(x, y) (SHE's max-pooling unit): a comparison and a multiplexer per bit.
pub fn max<B: Backend>(b: &mut B, x: &[Bit<B::Wire>], y: &[Bit<B::Wire>]) -> Word<B::Wire> {
    b.note(Op::CcCom, 1);
    let w = x.len().max(y.len());
    let lt = less_than(b, x, y);
    let (x, y) = (resize(x, w), resize(y, w));
    x.iter()
        .zip(&y)
        .map(|(xi, yi)| mux(b, &lt, yi, xi))
        .collect()
}

/// x · y for two encrypted signed words: shift-and-add of the partial products at the exact
/// product width (|x| + |y| bits), an array multiplier.
pub fn mul<B: Backend>(b: &mut B, x: &[Bit<B::Wire>], y: &[Bit<B::Wire>]) -> Word<B::Wire> {
    b.note(Op::CcMult, 1);
    let w = x.len() + y.len();
    let xe = resize(x, w);
    let ye = resize(y, w);
    let mut acc: Word<B::Wire> = vec![Bit::ZERO; w];
    for (j, yj) in ye.iter().enumerate() {
        if yj.as_const() == Some(false) {
            continue;
        }
        let pp: Word<B::Wire> = (0..w)
            .map(|i| {
                if i < j {
                    Bit::ZERO
                } else {
                    and(b, &xe[i - j], yj)
                }
            })
            .collect();
        acc = add_mod(b, &acc, &pp, Bit::ZERO, w);
    }
    acc
}

/// The value of a plaintext word (for the plaintext backend and tests).
pub fn word_value(x: &[Bit<bool>]) -> i64 {
    let bits: Vec<bool> = x
        .iter()
        .map(|bit| match bit {
            Bit::Const(v) | Bit::Wire(v) => *v,
        })
        .collect();
    bits_value(&bits)
}

/// The signed value of little-endian two's-complement bits (at most 64).
pub fn bits_value(bits: &[bool]) -> i64 {
    let mut v: i64 = 0;
    for (i, &bit) in bits.iter().enumerate().take(64) {
        if bit {
            v |= 1 << i;
        }
    }
    let w = bits.len().min(64);
    if w < 64 && bits.last() == Some(&true) {
        v -= 1 << w;
    }
    v
}

/// The low `w` bits of `v`, little-endian.
pub fn value_bits(v: i64, w: usize) -> Vec<bool> {
    (0..w).map(|i| (v >> i.min(63)) & 1 == 1).collect()
}
