//! Fixed-point gadgets on shared words (CryptoGRU's step circuits, cryptogru::requantize):
//! adding two parties' accumulator shares and truncating, rescaling a word into an
//! activation's input format with saturation, a fitted smooth activation on that word, and
//! rescaling an activation's output back into the main format. Written against [`Backend`] like
//! [`gadgets`](super), so the same code garbles, counts and evaluates in the clear.
use super::{add, saturate, sext};
use crate::activation::{self, Func};
use crate::backend::{and, xor, Backend, Bit, Word};
use secinfer_core::Format;

type W<B> = <B as Backend>::Wire;

/// `wrap((s + c) ≫ f)` on `l` bits: the two shares added mod 2^len (len − 1 ANDs), then bits
/// f .. f + l − 1 (free). An accumulator shared mod 2^32 needs only its low f + l bits here.
pub fn add_truncate<B: Backend>(
    b: &mut B,
    s: &[Bit<W<B>>],
    c: &[Bit<W<B>>],
    f: usize,
    l: usize,
) -> Word<W<B>> {
    let sum = add(b, s, c);
    sum[f..f + l].to_vec()
}

/// A main-format word (`main_scale` fractional bits) rescaled to `to` by a floor shift (dropped
/// wires, free) and saturated to `to.bits`: the input of an activation circuit.
pub fn rescale_saturate<B: Backend>(
    b: &mut B,
    x: &[Bit<W<B>>],
    main_scale: u32,
    to: Format,
) -> Word<W<B>> {
    let xa = x[(main_scale - to.scale) as usize..].to_vec();
    saturate(b, &xa, to.bits as usize)
}

/// The fitted sigmoid or tanh ([`activation`]) of a main-format word: rescaled and saturated to
/// `input`, then the activation into `output`, sign-extended to `output.bits`. Any other
/// `func` is read as the sigmoid.
pub fn smooth_activation<B: Backend>(
    b: &mut B,
    func: Func,
    x: &[Bit<W<B>>],
    main_scale: u32,
    input: Format,
    output: Format,
) -> Word<W<B>> {
    let xs = rescale_saturate(b, x, main_scale, input);
    let y = if func == Func::Tanh {
        activation::tanh(b, &xs, input, output)
    } else {
        activation::sigmoid(b, &xs, input, output)
    };
    sext(&y, output.bits as usize)
}

/// An activation's output word y (`from` fractional bits) as an `l`-bit main-format word:
/// y ≪ (main_scale − from), sign-extended (free: constant zeros and copied wires).
pub fn rescale_up<X: Clone>(y: &[Bit<X>], from: u32, main_scale: u32, l: usize) -> Vec<Bit<X>> {
    let mut v: Vec<Bit<X>> = super::constant_word(0, (main_scale - from) as usize);
    v.extend(y.iter().cloned());
    sext(&v, l)
}

/// Leaf bits per carry and party of a split comparison: XOR shares of [s'_hi < c_hi],
/// [s'_hi = c_hi] and [s'_lo < c_lo] (`secinfer_ss::blocks::pooled`'s carry leaves).
pub const LEAF_BITS: usize = 3;

/// The carry lt_hi ⊕ (eq_hi ∧ lt_lo) from both parties' XOR shares of the [`LEAF_BITS`] leaf
/// bits (one AND).
pub fn carry_from_leaves<B: Backend>(b: &mut B, g: &[Bit<W<B>>], e: &[Bit<W<B>>]) -> Bit<W<B>> {
    let [lt_hi, eq_hi, lt_lo]: [Bit<W<B>>; LEAF_BITS] =
        std::array::from_fn(|k| xor(b, &g[k], &e[k]));
    let t = and(b, &eq_hi, &lt_lo);
    xor(b, &lt_hi, &t)
}
