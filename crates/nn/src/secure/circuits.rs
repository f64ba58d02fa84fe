//! The garbled circuits of the secure GRU: one per step (all H elements batched, one copy per
//! element) and one for the final dense layer (argmax or logits). Both follow the reference's
//! fixed-point rules (docs/model-format.md, rule 6) operation for operation, so the secure run
//! reproduces [`Reference`](crate::Reference) with [`CircuitActivations`] bit for bit.
//!
//! Share widths: an accumulator Σ W x (+ b·2^F) is shared mod 2^32 by the HE matvec, but
//! `lin()` only reads bits F..F+L−1 of it, which depend only on Σ mod 2^(F+L): the circuit
//! takes the low A = F + L bits of each share, adds them (A−1 ANDs), and drops the low F bits
//! (free) and the wrap to L bits is free too. The hidden state is shared mod 2^32 (the HE needs
//! it sign-extended), but the circuit only needs h mod 2^L: it takes L bits of each share.
use crate::fixed::{ActFormat, FixedPointConfig, SmoothActivations};
use secinfer_gc::activation::{self, eval_plain, ActSpec, Fixed, Func};
use secinfer_gc::backend::{and, Backend, Bit, Word};
use secinfer_gc::gadgets::{
    add, add_cin, add_full, argmax, constant_word, mul_trunc, relu, saturate, sext, sub, zext,
};
use secinfer_gc::{Builder, Circuit};
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

/// Width of the shares the HE layer produces and the step circuit outputs.
pub const SHARE_BITS: usize = 32;

type W = Word<u32>;

fn fixed(f: crate::fixed::Format) -> Fixed {
    Fixed::new(f.bits, f.frac)
}

type Key = (Func, u32, u32, u32, u32);

type Entry = (Arc<Circuit>, i64, i64);

fn circuits() -> &'static Mutex<HashMap<Key, Entry>> {
    static C: OnceLock<Mutex<HashMap<Key, Entry>>> = OnceLock::new();
    C.get_or_init(|| Mutex::new(HashMap::new()))
}

/// The gc crate's stand-alone circuit for `func` from `af.input` to `af.output`, and the
/// smallest and largest values it outputs over all inputs (cached per process).
fn act_circuit(func: Func, af: ActFormat) -> Entry {
    let key = (
        func,
        af.input.bits,
        af.input.frac,
        af.output.bits,
        af.output.frac,
    );
    if let Some(c) = circuits().lock().ok().and_then(|m| m.get(&key).cloned()) {
        return c;
    }
    let spec = ActSpec::simple(func, fixed(af.input), fixed(af.output));
    let c = spec.circuit();
    // Smallest output over every input (bit-sliced, 64 inputs per evaluation).
    let nb = af.input.bits as usize;
    let total = 1u64 << nb;
    let ob = af.output.bits;
    let mut min = i64::MAX;
    let mut max = i64::MIN;
    let mut base = 0u64;
    while base < total {
        let ins: Vec<u64> = (0..nb)
            .map(|i| {
                (0..64u64)
                    .filter(|l| base + l < total && ((base + l) >> i) & 1 == 1)
                    .fold(0u64, |a, l| a | (1 << l))
            })
            .collect();
        let outs = c.eval_sliced(&ins);
        for l in 0..64u64.min(total - base) {
            let v = outs
                .iter()
                .enumerate()
                .fold(0u64, |a, (j, w)| a | (((w >> l) & 1) << j));
            let y = spec.output.decode(v & ((1u64 << ob) - 1));
            min = min.min(y);
            max = max.max(y);
        }
        base += 64;
    }
    let e = (Arc::new(c), min, max);
    if let Ok(mut m) = circuits().lock() {
        m.insert(key, e.clone());
    }
    e
}

/// The activations the garbled circuits compute: the gc crate's fitted sigmoid/tanh circuits
/// (≤ 1 ULP from the exactly rounded value). The secure run equals
/// `Reference::new(model, CircuitActivations::default())` bit for bit.
#[derive(Default)]
pub struct CircuitActivations {
    cache: RefCell<HashMap<Key, Arc<Circuit>>>,
}

impl CircuitActivations {
    fn eval(&self, func: Func, x: i64, f: ActFormat) -> i64 {
        let key = (
            func,
            f.input.bits,
            f.input.frac,
            f.output.bits,
            f.output.frac,
        );
        let c = self.cache.borrow().get(&key).cloned();
        let c = match c {
            Some(c) => c,
            None => {
                let c = act_circuit(func, f).0;
                self.cache.borrow_mut().insert(key, c.clone());
                c
            }
        };
        eval_plain(
            &c,
            &ActSpec::simple(func, fixed(f.input), fixed(f.output)),
            x,
        )
    }
}

impl SmoothActivations for CircuitActivations {
    fn sigmoid(&self, x: i64, f: ActFormat) -> i64 {
        self.eval(Func::Sigmoid, x, f)
    }
    fn tanh(&self, x: i64, f: ActFormat) -> i64 {
        self.eval(Func::Tanh, x, f)
    }
}

/// Public shape of the step circuit.
///
/// Per element, each party feeds (same order for both; the client then its output mask):
/// `[hi_r (L), lo_ir (F), lo_hr (F), hi_z (L), lo_iz (F), lo_hz (F), gi_n (A), gh_n (A), h (L)]`.
/// For the gates r and z the reference adds two separately truncated accumulators,
/// wrap((gi ≫ F) + (gh ≫ F)); with shares gi = s_i + c_i, gh = s_h + c_h (mod 2^A) that is
/// (s_i≫F) + (s_h≫F) + (c_i≫F) + (c_h≫F) + carry(s_i, c_i) + carry(s_h, c_h) mod 2^L, where
/// carry is the carry out of the low F bits. So each party adds its two high parts locally
/// (`hi`), and the circuit only needs the low F bits of each share for the carries.
///
/// The output mask is the client's (evaluator's) input: the circuit outputs sext(h', 32) + ρ to
/// the server (garbler-decoded), so the server learns the masked state m = h' + ρ and the
/// client's share is −ρ, known before the session's input (Delphi-style preprocessing: every
/// client input of every step circuit is then known offline).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StepLayout {
    /// Accumulator share bits A = F + L.
    pub acc: usize,
    /// Main format bits L.
    pub l: usize,
    /// Fraction bits F.
    pub f: usize,
}

impl StepLayout {
    pub fn new(fp: &FixedPointConfig) -> Self {
        StepLayout {
            acc: (fp.main.bits + fp.main.frac) as usize,
            l: fp.main.bits as usize,
            f: fp.main.frac as usize,
        }
    }
    /// Input bits per element of each party (without the client's mask).
    fn per_party(&self) -> usize {
        2 * (self.l + 2 * self.f) + 2 * self.acc + self.l
    }
    /// Garbler (server) inputs per element: its shares.
    pub fn garbler_inputs(&self) -> usize {
        self.per_party()
    }
    /// Evaluator (client) inputs per element: its shares, then the output mask (32 bits).
    pub fn evaluator_inputs(&self) -> usize {
        self.per_party() + SHARE_BITS
    }
    /// Appends one party's input bits for one element: its shares (mod 2^32) of the six
    /// accumulators [r, z, n] of gi and of gh, and of h.
    pub fn encode(&self, gi: [u64; 3], gh: [u64; 3], h: u64, out: &mut Vec<bool>) {
        let mut put = |v: u64, w: usize| out.extend((0..w).map(|i| (v >> i) & 1 == 1));
        let lo = (1u64 << self.f) - 1;
        for k in 0..2 {
            put((gi[k] >> self.f).wrapping_add(gh[k] >> self.f), self.l);
            put(gi[k] & lo, self.f);
            put(gh[k] & lo, self.f);
        }
        put(gi[2], self.acc);
        put(gh[2], self.acc);
        put(h, self.l);
    }
}

/// wrap(gi ≫ F + gh ≫ F) from each party's [hi (L), lo_i (F), lo_h (F)].
fn gate_sum(b: &mut Builder, g: &[Bit<u32>], e: &[Bit<u32>], f: usize, l: usize) -> W {
    let (_, ci) = add_full(b, &g[l..l + f], &e[l..l + f], Bit::Const(false));
    let (_, ch) = add_full(
        b,
        &g[l + f..l + 2 * f],
        &e[l + f..l + 2 * f],
        Bit::Const(false),
    );
    let s1 = add_cin(b, &g[..l], &e[..l], ci);
    add_cin(b, &s1, &constant_word(0, l), ch)
}

/// (s + c) mod 2^A, then bits F..F+L−1: `wrap((Σ) ≫ F)` of the reference.
fn trunc_acc(b: &mut Builder, s: &[Bit<u32>], c: &[Bit<u32>], f: usize, l: usize) -> W {
    let sum = add(b, s, c);
    sum[f..f + l].to_vec()
}

/// Rescale to the activation input format (floor shift: dropped wires) and saturate.
fn act_input(b: &mut Builder, x: &[Bit<u32>], main_frac: u32, af: ActFormat) -> W {
    let xa = x[(main_frac - af.input.frac) as usize..].to_vec();
    saturate(b, &xa, af.input.bits as usize)
}

/// A smooth activation's output word (bo bits, signed) for main-format input x.
fn smooth(b: &mut Builder, func: Func, x: &[Bit<u32>], main_frac: u32, af: ActFormat) -> W {
    let xs = act_input(b, x, main_frac, af);
    let y = if func == Func::Tanh {
        activation::tanh(b, &xs, fixed(af.input), fixed(af.output))
    } else {
        activation::sigmoid(b, &xs, fixed(af.input), fixed(af.output))
    };
    sext(&y, af.output.bits as usize)
}

/// y (bo bits) ≪ (F − fo), as an L-bit main-format word.
fn to_main(y: &[Bit<u32>], main_frac: u32, af: ActFormat, l: usize) -> W {
    let mut v: W = constant_word(0, (main_frac - af.output.frac) as usize);
    v.extend(y.iter().cloned());
    sext(&v, l)
}

/// wrap((g ≪ (F − fo)) · v ≫ F) where g is a gate activation word (bo bits): bits
/// F − shift .. F − shift + L − 1 of g·v. When the activation never outputs a negative value
/// (checked exhaustively) only its low `g_bits` bits (up to its largest output) are used and g·v = g·v_u − (g·sign(v)) ≪ (L−1) with
/// v_u the low L−1 bits of v: each partial-product row costs L−1 ANDs plus an (L−1)-bit adder
/// over only the accumulator bits it touches. Otherwise a generic signed product mod 2^(F+L).
fn gate_mul(
    b: &mut Builder,
    g: &[Bit<u32>],
    g_bits: Option<usize>,
    v: &[Bit<u32>],
    main_frac: u32,
    af: ActFormat,
    lay: StepLayout,
) -> W {
    let shift = (main_frac - af.output.frac) as usize;
    let f = main_frac as usize;
    let Some(gb) = g_bits.filter(|&k| k < g.len()) else {
        let mut gw: W = constant_word(0, shift);
        gw.extend(sext(g, lay.acc - shift));
        let p = mul_trunc(b, &sext(v, lay.acc), &gw, lay.acc);
        return p[f..f + lay.l].to_vec();
    };
    let lo = f - shift;
    let w = lo + lay.l;
    let p = mul_unsigned_signed(b, &g[..gb], v, w);
    p[lo..w].to_vec()
}

/// Low `w` bits of g·v for g unsigned and v signed (two's complement, len ≥ 2).
pub(crate) fn mul_unsigned_signed<B: Backend>(
    b: &mut B,
    g: &[Bit<B::Wire>],
    v: &[Bit<B::Wire>],
    w: usize,
) -> Word<B::Wire> {
    let lv = v.len();
    let vu = &v[..lv - 1];
    let sign = v[lv - 1].clone();
    let mut acc: Word<B::Wire> = constant_word(0, w);
    for (j, gj) in g.iter().enumerate() {
        if j >= w {
            break;
        }
        if gj.as_const() == Some(false) {
            continue;
        }
        let width = (lv - 1).min(w - j);
        let pp: Word<B::Wire> = vu[..width].iter().map(|x| and(b, x, gj)).collect();
        // Before this row the accumulator is zero at positions ≥ j + lv − 1.
        let top = j + width;
        let (s, cout) = add_full(b, &acc[j..top], &pp, Bit::Const(false));
        acc.splice(j..top, s);
        if top < w {
            acc[top] = cout;
        }
    }
    // − (g · sign) ≪ (lv − 1)
    if lv - 1 < w {
        let mut corr: Word<B::Wire> = constant_word(0, lv - 1);
        corr.extend(g.iter().map(|gj| and(b, gj, &sign)));
        corr.truncate(w);
        acc = sub(b, &acc, &zext(&corr, w));
        acc.truncate(w);
    }
    acc
}

/// The step circuit for one element (one copy per hidden unit).
///
/// Inputs: garbler [its shares, [`StepLayout`]], evaluator [the same, then the mask (32)].
/// Output: sext(h', 32) + mask mod 2^32 (decoded by the garbler).
pub fn step_circuit(fp: &FixedPointConfig, tanh_candidate: bool) -> Circuit {
    let lay = StepLayout::new(fp);
    let (a, l) = (lay.acc, lay.l);
    let f = fp.main.frac as usize;
    let mf = fp.main.frac;
    let sf = fp.sigmoid_format();
    let cf = fp.candidate_format();
    let (_, sig_min, sig_max) = act_circuit(Func::Sigmoid, sf);
    // Bits the gate value can occupy: all of them, or (never negative) only up to its maximum.
    let sig_bits = if sig_min >= 0 {
        Some(64 - (sig_max.max(1) as u64).leading_zeros() as usize)
    } else {
        None
    };
    let gi = lay.garbler_inputs();
    Circuit::build(gi + lay.evaluator_inputs(), |b, ins| {
        let (g, e) = ins.split_at(gi);
        let p = l + 2 * f;
        let ar = gate_sum(b, &g[..p], &e[..p], f, l);
        let az = gate_sum(b, &g[p..2 * p], &e[p..2 * p], f, l);
        let o = 2 * p;
        let gin = trunc_acc(b, &g[o..o + a], &e[o..o + a], f, l);
        let ghn = trunc_acc(b, &g[o + a..o + 2 * a], &e[o + a..o + 2 * a], f, l);
        let (gin, ghn) = (&gin, &ghn);
        let o = o + 2 * a;
        let h = add(b, &g[o..o + l], &e[o..o + l]);
        let mask = e[lay.garbler_inputs()..].to_vec();
        let r = smooth(b, Func::Sigmoid, &ar, mf, sf);
        let z = smooth(b, Func::Sigmoid, &az, mf, sf);
        // n = g(gi_n + wrap((r ⊙ gh_n) ≫ F))
        let rh = gate_mul(b, &r, sig_bits, ghn, mf, sf, lay);
        let an = add(b, gin, &rh);
        let n = if tanh_candidate {
            let y = smooth(b, Func::Tanh, &an, mf, cf);
            to_main(&y, mf, cf, l)
        } else {
            let xs = act_input(b, &an, mf, cf);
            let y = relu(b, &xs);
            let y = saturate(b, &y, cf.output.bits as usize);
            to_main(&y, mf, cf, l)
        };
        // h' = wrap(n + wrap((z ⊙ wrap(h − n)) ≫ F))
        let d = sub(b, &h, &n);
        let zd = gate_mul(b, &z, sig_bits, &d, mf, sf, lay);
        let hn = add(b, &n, &zd);
        add(b, &sext(&hn, SHARE_BITS), &mask)
    })
}

/// The final circuit (one copy): garbler [C logit accumulators, A bits each], evaluator the
/// same. Output: the argmax index (⌈log2 C⌉ bits, lowest index on ties), or with
/// `reveal_logits` the C logits (L bits each, signed).
pub fn final_circuit(fp: &FixedPointConfig, classes: usize, reveal_logits: bool) -> Circuit {
    let lay = StepLayout::new(fp);
    let (a, l) = (lay.acc, lay.l);
    let f = fp.main.frac as usize;
    Circuit::build(2 * classes * a, |b, ins| {
        let (g, e) = ins.split_at(classes * a);
        let logits: Vec<W> = (0..classes)
            .map(|k| trunc_acc(b, &g[k * a..(k + 1) * a], &e[k * a..(k + 1) * a], f, l))
            .collect();
        if reveal_logits {
            logits.concat()
        } else {
            argmax(b, &logits).0
        }
    })
}

/// Bits of the argmax index the final circuit outputs.
pub fn index_bits(classes: usize) -> usize {
    secinfer_gc::gadgets::bit_len(classes.saturating_sub(1) as u64).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unsigned_by_signed_multiplier_is_exact_mod_2_w() {
        for (gb, lv, w) in [(5usize, 7usize, 11usize), (4, 6, 14), (5, 7, 8), (3, 8, 12)] {
            let c = Circuit::build(gb + lv, |b, ins| {
                let g = ins[..gb].to_vec();
                let v = ins[gb..].to_vec();
                mul_unsigned_signed(b, &g, &v, w)
            });
            for g in 0..(1u64 << gb) {
                for v in 0..(1u64 << lv) {
                    let mut bits: Vec<bool> = (0..gb).map(|i| (g >> i) & 1 == 1).collect();
                    bits.extend((0..lv).map(|i| (v >> i) & 1 == 1));
                    let out = c.eval_plain(&bits);
                    let got = out
                        .iter()
                        .enumerate()
                        .fold(0u64, |a, (i, &x)| a | ((x as u64) << i));
                    let vs = ((v << (64 - lv)) as i64) >> (64 - lv);
                    let want = ((g as i64 * vs) as u64) & ((1 << w) - 1);
                    assert_eq!(got, want, "g {g} v {vs} ({gb}, {lv}, {w})");
                }
            }
        }
    }
}
