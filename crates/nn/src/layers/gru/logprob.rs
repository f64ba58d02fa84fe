//! A secure log-probability of one next word: the client names the word privately (its index
//! bits are evaluator inputs of the final garbled circuit) and learns only log2 p(word), the
//! log-softmax of the language model's logits at that word.
//!
//! **Why a garbled log-sum-exp** (not OPAF's exponential on secret shares): the final circuit
//! already holds the logits in the clear inside the garbling, after the truncation and before
//! the argmax, so the whole log-softmax runs there in the same single flight: no conversion of
//! 10,001 logits back to arithmetic shares, no extra rounds, no second protocol's OT pools,
//! and the client's word never leaves its garbled input. The price is garbled exponentials,
//! made cheap by working in base 2 on a few bits:
//!
//! * M = max_j l_j (a tournament of comparators), d_j = M − l_j ≥ 0, saturated at 16 nats
//!   (past that e^−d_j is below the sum's last bit);
//! * y_j = d_j·log2 e rounded to [`Y_FRAC`] fractional bits (a constant multiplication);
//! * 2^−y_j = T[frac y_j] ≫ ⌊y_j⌋ with T a 64-entry table of 2^−r/64 at [`E_FRAC`] bits (gc's
//!   `lut`: shared monomials) and a barrel shifter; Z = Σ_j 2^−y_j ≥ 1 (the maximum gives 1);
//! * log2 Z from Z's leading one (a thermometer code, whose differences are the one-hot
//!   position, so the exponent's bits are free XORs) and a 256-entry table of log2 of the
//!   mantissa's next 8 bits (at the bin's midpoint);
//! * the word's own y_w = d_w·log2 e at [`LOG_FRAC`] bits, its d_w chosen by a multiplexer tree
//!   on the client's index bits;
//! * out: log2 p(w) = −(y_w + log2 Z) at [`LOG_FRAC`] fractional bits, two's complement.
//!
//! [`log2_prob_fixed`] is the same integer algorithm in the clear (the reference the secure
//! result equals bit for bit); against the exact log-softmax of the same fixed-point logits it
//! errs by at most [`LOG2_BOUND`] bits (rounding of y: 2^−7 bits; the sum's floors: one unit of
//! 2^−20 per word, ≤ 0.014 bits for 10,001 words; the mantissa table: 0.003 bits).
use crate::model::FixedPointConfig;
use secinfer_gc::backend::{xor, Bit, Word};
use secinfer_gc::gadgets::{
    add, constant_word, lt_signed, lut, mul_unsigned, mux_word, sext, sub, zext,
};
use secinfer_gc::{Builder, Circuit};
use std::sync::Arc;

use super::circuits::{index_bits, trunc_acc, CircuitCache, StepLayout};

type W = Word<u32>;

/// Fractional bits of y = d·log2 e that index the exponential's table (64 entries).
pub const Y_FRAC: u32 = 6;
/// Fractional bits of each 2^−y and of their sum Z.
pub const E_FRAC: u32 = 20;
/// Fractional bits of the revealed log2 p.
pub const LOG_FRAC: u32 = 16;
/// Integer bits at which d = M − l saturates (16 nats: 2^−23 is below Z's last bit).
const D_INT: u32 = 4;
/// log2 e at 10 fractional bits (for y at [`Y_FRAC`] bits; its error moves y by < 2^−12·d).
const LOG2E_10: u64 = 1477;
/// log2 e at 16 fractional bits (for the word's own y at [`LOG_FRAC`] bits).
const LOG2E_16: u64 = 94548;
/// Mantissa bits below Z's leading one that index the log2 table.
const MANT_BITS: u32 = 8;
/// The largest |secure − exact log2-softmax| in bits, for up to 2^14 words (the error budget
/// in the module docs, with margin).
pub const LOG2_BOUND: f64 = 0.03;

/// T[r] = round(2^E_FRAC · 2^(−r/64)), r < 64.
fn exp2_table() -> Vec<u64> {
    (0..1u64 << Y_FRAC)
        .map(|r| {
            ((E_FRAC as f64) - r as f64 / (1u64 << Y_FRAC) as f64)
                .exp2()
                .round() as u64
        })
        .collect()
}

/// L[m] = round(2^LOG_FRAC · log2(1 + (m + 1/2)/256)), m < 256 (below 2^LOG_FRAC).
fn log2_table() -> Vec<u64> {
    let n = (1u64 << MANT_BITS) as f64;
    (0..1u64 << MANT_BITS)
        .map(|m| ((1.0 + (m as f64 + 0.5) / n).log2() * (1u64 << LOG_FRAC) as f64).round() as u64)
        .collect()
}

/// Bits of the circuit's output word: the log-probability's integer bits (y_w < 1.45·2^(L−f)
/// plus log2 Z < 15) and its sign.
pub fn out_bits(l: usize, f: usize) -> usize {
    l.saturating_sub(f).max(5) + 3 + LOG_FRAC as usize
}

/// The saturation width of d and the shift that rounds d·1477 to y at [`Y_FRAC`] bits.
fn d_sat_bits(l: usize, f: usize) -> usize {
    l.min(D_INT as usize + f)
}

/// The log-probability circuit (one copy): garbler [C logit accumulators, A bits each],
/// evaluator the same then the word's index (⌈log2 C⌉ bits). Output: log2 p(word) at
/// [`LOG_FRAC`] fractional bits, [`out_bits`] bits, two's complement. An index ≥ C gives a
/// meaningless value (the client checks its word first).
pub fn logprob_circuit(fp: &FixedPointConfig, classes: usize, cache: &CircuitCache) -> Circuit {
    let lay = StepLayout::new(fp, cache);
    let (a, l) = (lay.acc, lay.l);
    let f = fp.main.scale as usize;
    let ib = index_bits(classes);
    Circuit::build(2 * classes * a + ib, |b, ins| {
        let (g, rest) = ins.split_at(classes * a);
        let (e, idx) = rest.split_at(classes * a);
        let logits: Vec<W> = (0..classes)
            .map(|k| trunc_acc(b, &g[k * a..(k + 1) * a], &e[k * a..(k + 1) * a], f, l))
            .collect();
        log_softmax_at(b, &logits, idx, l, f)
    })
}

/// A session's final circuit and the client's inputs it has beyond its logit shares: the
/// log-probability circuit with the word's index bits when `log_prob`, else the argmax / top-k
/// / logits circuit. Both are kept in the model's cache, so a language model's sessions build
/// each at most once (a top-5 circuit over 10,001 words is seconds of work); the final circuits
/// are bounded by the `2 · MAX_TOP_K` (k, logits revealed or not) pairs a session may ask for.
pub(super) fn session_final(
    fp: &FixedPointConfig,
    classes: usize,
    reveal_logits: bool,
    top_k: usize,
    log_prob: bool,
    cache: &CircuitCache,
) -> (Arc<Circuit>, usize) {
    if log_prob {
        let key = (
            "logprob",
            vec![classes as u64, fp.main.bits.into(), fp.main.scale.into()],
        );
        let c = cache.get_or_build(key, || logprob_circuit(fp, classes, cache));
        (c, index_bits(classes))
    } else {
        let k = if reveal_logits {
            0
        } else {
            top_k.clamp(1, classes)
        };
        let key = (
            "final",
            vec![
                classes as u64,
                k as u64,
                fp.main.bits.into(),
                fp.main.scale.into(),
            ],
        );
        let c = cache.get_or_build(key, || {
            super::circuits::final_circuit(fp, classes, reveal_logits, top_k, cache)
        });
        (c, 0)
    }
}

/// One level of a pairwise reduction: `f(x, y)` of neighbours (2i, 2i + 1), an odd last word
/// passed up unchanged.
fn pair_level(b: &mut Builder, cur: Vec<W>, mut f: impl FnMut(&mut Builder, W, W) -> W) -> Vec<W> {
    let mut next = Vec::with_capacity(cur.len().div_ceil(2));
    let mut it = cur.into_iter();
    while let Some(x) = it.next() {
        match it.next() {
            None => next.push(x),
            Some(y) => next.push(f(b, x, y)),
        }
    }
    next
}

/// The maximum of signed words by a tournament (no index: half the argmax's multiplexers).
fn max_signed(b: &mut Builder, xs: &[W]) -> W {
    let mut cur: Vec<W> = xs.to_vec();
    while cur.len() > 1 {
        cur = pair_level(b, cur, |b, x, y| {
            let gt = lt_signed(b, &x, &y);
            mux_word(b, &gt, &x, &y)
        });
    }
    cur.pop().unwrap_or_default()
}

/// Unsigned `min(x, 2^w − 1)` on `w` bits.
fn saturate_unsigned(b: &mut Builder, x: &[Bit<u32>], w: usize) -> W {
    if x.len() <= w {
        return zext(x, w);
    }
    let mut over = Bit::Const(false);
    for v in &x[w..] {
        over = secinfer_gc::backend::or(b, &over, v);
    }
    (0..w)
        .map(|i| secinfer_gc::backend::or(b, &x[i], &over))
        .collect()
}

/// `x · c + 2^(k−1)`, then `≫ k` (round half up), for a public constant c.
fn mul_const_round(b: &mut Builder, x: &[Bit<u32>], c: u64, k: usize) -> W {
    let cw = constant_word(c, secinfer_gc::gadgets::bit_len(c));
    let p = mul_unsigned(b, x, &cw);
    let p = zext(&p, p.len() + 1);
    let half = if k == 0 { 0 } else { 1u64 << (k - 1) };
    let s = add(b, &p, &constant_word(half, p.len()));
    s[k.min(s.len())..].to_vec()
}

/// x ≫ s for an unsigned word x and an unsigned shift word s (zeros shifted in).
fn shr_var(b: &mut Builder, x: &[Bit<u32>], s: &[Bit<u32>]) -> W {
    let mut v = x.to_vec();
    for (i, si) in s.iter().enumerate() {
        let k = 1usize << i;
        let shifted: W = (0..v.len())
            .map(|j| v.get(j + k).cloned().unwrap_or(Bit::Const(false)))
            .collect();
        v = mux_word(b, si, &v, &shifted);
    }
    v
}

/// Σ xs by a balanced tree of adders, each one bit wider than its operands.
fn sum_tree(b: &mut Builder, xs: Vec<W>) -> W {
    let mut cur = xs;
    while cur.len() > 1 {
        cur = pair_level(b, cur, |b, x, y| {
            let w = x.len().max(y.len()) + 1;
            add(b, &zext(&x, w), &zext(&y, w))
        });
    }
    cur.pop().unwrap_or_default()
}

/// The word `xs[idx]` by a multiplexer tree on the index bits (little-endian).
fn select(b: &mut Builder, xs: &[W], idx: &[Bit<u32>]) -> W {
    let mut cur: Vec<W> = xs.to_vec();
    for s in idx {
        cur = pair_level(b, cur, |b, x, y| mux_word(b, s, &x, &y));
    }
    cur.pop().unwrap_or_default()
}

/// log2 softmax(logits)[idx] at [`LOG_FRAC`] bits (module docs).
fn log_softmax_at(b: &mut Builder, logits: &[W], idx: &[Bit<u32>], l: usize, f: usize) -> W {
    let m = max_signed(b, logits);
    // d_j = M − l_j ∈ [0, 2^L): L + 1 signed bits, the top one always 0.
    let ds: Vec<W> = logits
        .iter()
        .map(|x| sub(b, &sext(&m, l + 1), &sext(x, l + 1))[..l].to_vec())
        .collect();
    let sat = d_sat_bits(l, f);
    let yk = f + 10 - Y_FRAC as usize;
    let t = exp2_table();
    let terms: Vec<W> = ds
        .iter()
        .map(|d| {
            let d = saturate_unsigned(b, d, sat);
            let y = mul_const_round(b, &d, LOG2E_10, yk);
            let (r, k) = y.split_at(Y_FRAC as usize);
            let e = lut(b, r, &t, E_FRAC as usize + 1);
            shr_var(b, &e, &k[..k.len().min(5)])
        })
        .collect();
    let z = sum_tree(b, terms);
    let log2z = log2_fixed(b, &z);
    let dw = select(b, &ds, idx);
    let yw = mul_const_round(b, &dw, LOG2E_16, f);
    let w = out_bits(l, f);
    let total = add(b, &zext(&yw, w), &zext(&log2z, w));
    let zero = constant_word(0, w);
    sub(b, &zero, &total)
}

/// log2 of Z (E_FRAC fractional bits, Z ≥ 1) at LOG_FRAC bits: the leading one's position
/// p ≥ E_FRAC (a thermometer code o, one-hot o_p ⊕ o_{p+1}, so p's bits are free) and a table
/// of the MANT_BITS bits below it.
fn log2_fixed(b: &mut Builder, z: &[Bit<u32>]) -> W {
    let top = z.len();
    let lo = E_FRAC as usize;
    // o[i] = OR of z[i..], for i in lo..top
    let mut o: Vec<Bit<u32>> = vec![Bit::Const(false); top + 1];
    for i in (lo..top).rev() {
        o[i] = secinfer_gc::backend::or(b, &o[i + 1], &z[i]);
    }
    let pb = secinfer_gc::gadgets::bit_len((top - lo) as u64).max(1);
    let mut exp: W = constant_word(0, pb);
    let mut mant: W = constant_word(0, MANT_BITS as usize);
    for p in lo..top {
        let hit = xor(b, &o[p], &o[p + 1]);
        for (j, e) in exp.iter_mut().enumerate() {
            if ((p - lo) >> j) & 1 == 1 {
                *e = xor(b, e, &hit);
            }
        }
        for (j, m) in mant.iter_mut().enumerate() {
            let bit = &z[p - MANT_BITS as usize + j];
            let t = secinfer_gc::backend::and(b, &hit, bit);
            *m = xor(b, m, &t);
        }
    }
    let frac = lut(b, &mant, &log2_table(), LOG_FRAC as usize);
    // (p − E_FRAC)·2^LOG_FRAC + frac: the exponent sits above the fraction's bits.
    let mut out = frac;
    out.extend(exp);
    out
}

/// [`logprob_circuit`]'s function in the clear on the logits (L-bit signed, `f` fractional
/// bits) and a word index `w < logits.len()`: log2 p(w) at [`LOG_FRAC`] fractional bits.
pub fn log2_prob_fixed(logits: &[i64], l: usize, f: usize, w: usize) -> i64 {
    let m = logits.iter().copied().max().unwrap_or(0);
    let sat = d_sat_bits(l, f);
    let yk = f + 10 - Y_FRAC as usize;
    let t = exp2_table();
    let mut z: u64 = 0;
    for &x in logits {
        let d = ((m - x) as u64).min((1u64 << sat) - 1);
        let y = (d * LOG2E_10 + (1u64 << (yk - 1))) >> yk;
        let (r, k) = (y & ((1 << Y_FRAC) - 1), (y >> Y_FRAC).min(31));
        z += t[r as usize] >> k;
    }
    let p = 63 - z.leading_zeros();
    let mant = (z >> (p - MANT_BITS)) & ((1 << MANT_BITS) - 1);
    let log2z = (((p - E_FRAC) as u64) << LOG_FRAC) + log2_table()[mant as usize];
    let dw = (m - logits[w]) as u64;
    let half = if f == 0 { 0 } else { 1u128 << (f - 1) };
    let yw = (dw as u128 * LOG2E_16 as u128 + half) >> f;
    -((yw as i64) + log2z as i64)
}

/// The exact log2-softmax of fixed-point logits at word `w`, in bits (the float reference of
/// [`LOG2_BOUND`]).
pub fn log2_prob_exact(logits: &[i64], f: usize, w: usize) -> f64 {
    let s = (f as f64).exp2();
    let m = logits.iter().copied().max().unwrap_or(0) as f64 / s;
    let z: f64 = logits.iter().map(|&x| (x as f64 / s - m).exp()).sum();
    ((logits[w] as f64 / s - m) - z.ln()) / std::f64::consts::LN_2
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::format::const_format;

    /// A second session with the same final circuit gets the cached one; another k, the
    /// logits, or the log-probability get their own, each equal to a freshly built circuit.
    #[test]
    fn final_circuits_are_built_once_per_model_and_kind() {
        let fp = FixedPointConfig {
            main: const_format(20, 12),
            sigmoid: None,
            candidate: None,
        };
        let cache = CircuitCache::default();
        let (a, _) = session_final(&fp, 12, false, 3, false, &cache);
        let (b, _) = session_final(&fp, 12, false, 3, false, &cache);
        assert!(Arc::ptr_eq(&a, &b), "same k: the cached circuit");
        let (c, _) = session_final(&fp, 12, false, 2, false, &cache);
        let (d, _) = session_final(&fp, 12, true, 3, false, &cache);
        let (e, extra) = session_final(&fp, 12, false, 3, true, &cache);
        assert!(!Arc::ptr_eq(&a, &c) && !Arc::ptr_eq(&a, &d) && !Arc::ptr_eq(&c, &d));
        assert!(!Arc::ptr_eq(&a, &e));
        assert_eq!(extra, index_bits(12));
        for (got, reveal, k) in [(&a, false, 3), (&c, false, 2), (&d, true, 3)] {
            let fresh = super::super::circuits::final_circuit(&fp, 12, reveal, k, &cache);
            assert_eq!(got.gates, fresh.gates, "reveal {reveal} k {k}");
            assert_eq!(got.outputs, fresh.outputs, "reveal {reveal} k {k}");
        }
    }

    /// The garbled function equals the integer reference on random logits (evaluated in the
    /// clear), and the reference is within LOG2_BOUND of the exact log2-softmax.
    #[test]
    fn circuit_equals_reference_and_reference_is_within_bound() {
        let (l, f) = (20usize, 12usize);
        let mut s = 0x1234_5678_9abc_def1u64;
        let mut next = || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        };
        for (n, spread) in [(7usize, 3i64), (33, 20), (100, 8)] {
            let logits: Vec<i64> = (0..n)
                .map(|_| ((next() % (2 * spread as u64 * 4096)) as i64) - spread * 4096)
                .collect();
            let ib = index_bits(n);
            let circ = Circuit::build(n * l + ib, |b, ins| {
                let (xs, idx) = ins.split_at(n * l);
                let words: Vec<W> = xs.chunks(l).map(|c| c.to_vec()).collect();
                log_softmax_at(b, &words, idx, l, f)
            });
            for w in [0, n / 2, n - 1] {
                let mut ins = Vec::new();
                for &x in &logits {
                    super::super::circuits::put(&mut ins, x as u64, l);
                }
                super::super::circuits::put(&mut ins, w as u64, ib);
                let out = circ.eval_plain(&ins);
                let ob = out_bits(l, f);
                let mut v: i64 = 0;
                for (i, &bit) in out.iter().enumerate() {
                    v |= (bit as i64) << i;
                }
                let v = (v << (64 - ob)) >> (64 - ob);
                let want = log2_prob_fixed(&logits, l, f, w);
                assert_eq!(v, want, "n {n} w {w}");
                let exact = log2_prob_exact(&logits, f, w);
                let got = want as f64 / (LOG_FRAC as f64).exp2();
                assert!((got - exact).abs() <= LOG2_BOUND, "{got} vs {exact}");
            }
        }
    }
}
