//! Activation circuits with fixed-point formats as parameters: ReLU, sigmoid, tanh and
//! requantisation (CryptoGRU's CG-2 runs 20-bit shares through 8-bit activations).
//!
//! ## Sigmoid and tanh: fitted piecewise-linear tables
//! The input X (signed, `bits`, `frac`) is read as U = X + 2^(n−1) (flip the sign bit: free), so
//! U is monotone in X. Its top k bits `hi` select a segment and the low n−k bits `lo` are the
//! offset in it. The circuit computes
//!
//! ```text
//!     y = ⌊(A[hi] + B[hi] · lo) / 2^sh⌋
//! ```
//! with the per-segment integers A (signed) and B ≥ 0 (the functions are increasing) read from one
//! lookup table over `hi` (a [`lut`](crate::gadgets::lut) in algebraic normal form: saturated
//! segments and the shared structure of the table cost nothing), an unsigned multiplier
//! B·lo, one adder and a free shift. A and B are fitted at build time, exactly, against the
//! reference `round(f(X / 2^frac_in) · 2^frac_out)` (round half up, saturated to the output
//! range) for every input of every segment, with tolerance 1 ULP, or exactly for inputs of at
//! most [`EXACT_FIT_BITS`] bits; among all (k, sh) that fit, the circuit with fewest AND gates
//! (counted by the [`Counter`] backend) is kept. So the stated bound is guaranteed by
//! construction for every input, and re-measured exhaustively by [`max_ulp_error`]. Fits are
//! cached per (function, formats).
use crate::backend::{not, Backend, Bit, Word};
use crate::circuit::Circuit;
use crate::counter::Counter;
use crate::gadgets::{
    add, constant_word, lut, mul_unsigned, relu as relu_gadget, saturate, sext, shr_round, zext,
};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

type Wd<B> = Word<<B as Backend>::Wire>;

/// The fixed-point format of every activation: `secinfer-core`'s validated [`Format`].
pub use secinfer_core::Format;
/// The name this crate's fixed-point format had before it moved to `secinfer-core`.
#[doc(hidden)]
pub use secinfer_core::Format as Fixed;

/// The formats the fitted circuits support: 2..=40 bits, at most 40 fractional bits (the
/// sigmoid/tanh fits and the exhaustive scans enumerate every input).
fn check_format(f: Format) -> Result<(), crate::GcError> {
    if f.bits < 2 || f.bits > 40 || f.scale > 40 {
        return Err(crate::GcError::invalid(format!(
            "unsupported fixed-point format {f:?}"
        )));
    }
    Ok(())
}

pub(crate) fn mask(bits: u32) -> u64 {
    if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    }
}

pub(crate) fn sign_extend(v: u64, bits: u32) -> i64 {
    let sh = 64 - bits;
    ((v << sh) as i64) >> sh
}

/// The activation functions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Func {
    /// Requantisation only.
    Identity,
    Relu,
    Sigmoid,
    Tanh,
}

impl Func {
    pub fn eval(self, x: f64) -> f64 {
        match self {
            Func::Identity => x,
            Func::Relu => x.max(0.0),
            Func::Sigmoid => 1.0 / (1.0 + (-x).exp()),
            Func::Tanh => x.tanh(),
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Func::Identity => "identity",
            Func::Relu => "relu",
            Func::Sigmoid => "sigmoid",
            Func::Tanh => "tanh",
        }
    }
}

impl std::str::FromStr for Func {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "identity" => Ok(Func::Identity),
            "relu" => Ok(Func::Relu),
            "sigmoid" => Ok(Func::Sigmoid),
            "tanh" => Ok(Func::Tanh),
            o => Err(format!(
                "unknown function {o:?} (relu, sigmoid, tanh, identity)"
            )),
        }
    }
}

/// The exact reference: f(x) for the exact input value, rounded (half up) to `out` and saturated.
pub fn reference(func: Func, inp: Format, out: Format, x: i64) -> i64 {
    out.quantize(func.eval(inp.to_f64(x)))
}

/// Requantises a signed word from `from` to `to`: shift by the fraction difference (rounding half
/// up when bits are dropped), then saturate to `to.bits`.
pub fn requantize<B: Backend>(b: &mut B, x: &[Bit<B::Wire>], from: Format, to: Format) -> Wd<B> {
    let x = sext(x, from.bits as usize);
    let y = if to.scale < from.scale {
        shr_round(b, &x, (from.scale - to.scale) as usize)
    } else {
        let mut v = constant_word(0, (to.scale - from.scale) as usize);
        v.extend(x);
        v
    };
    saturate(b, &y, to.bits as usize)
}

/// ReLU from `inp` to `out` (ReLU, then requantise).
pub fn relu<B: Backend>(b: &mut B, x: &[Bit<B::Wire>], inp: Format, out: Format) -> Wd<B> {
    let r = relu_gadget(b, &sext(x, inp.bits as usize));
    if inp == out {
        return r;
    }
    requantize(b, &r, inp, out)
}

/// Sigmoid from `inp` to `out` (fitted piecewise-linear table, ≤ 1 ULP by construction).
pub fn sigmoid<B: Backend>(b: &mut B, x: &[Bit<B::Wire>], inp: Format, out: Format) -> Wd<B> {
    let p = pwl_params(Func::Sigmoid, inp, out);
    pwl_apply(b, x, inp, out, &p)
}

/// tanh from `inp` to `out` (fitted piecewise-linear table, ≤ 1 ULP by construction).
pub fn tanh<B: Backend>(b: &mut B, x: &[Bit<B::Wire>], inp: Format, out: Format) -> Wd<B> {
    let p = pwl_params(Func::Tanh, inp, out);
    pwl_apply(b, x, inp, out, &p)
}

/// `func` from `inp` to `out`.
pub fn apply<B: Backend>(
    b: &mut B,
    func: Func,
    x: &[Bit<B::Wire>],
    inp: Format,
    out: Format,
) -> Wd<B> {
    match func {
        Func::Identity => requantize(b, x, inp, out),
        Func::Relu => relu(b, x, inp, out),
        Func::Sigmoid => sigmoid(b, x, inp, out),
        Func::Tanh => tanh(b, x, inp, out),
    }
}

/// An activation with requantisation around it: `input` → `act_in` → f → `act_out` → `output`
/// (CG-2: 20-bit shares → 8-bit sigmoid/ReLU → 20-bit).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ActSpec {
    pub func: Func,
    pub input: Format,
    pub act_in: Format,
    pub act_out: Format,
    pub output: Format,
}

impl ActSpec {
    /// f from `inp` straight to `out`.
    pub fn simple(func: Func, inp: Format, out: Format) -> Self {
        ActSpec {
            func,
            input: inp,
            act_in: inp,
            act_out: out,
            output: out,
        }
    }
    /// The default formats used by the benchmarks at width `bits`: input (bits, bits−4) (range
    /// ±8); output (bits, bits−4) for ReLU/identity and (bits, bits−2) for sigmoid/tanh.
    pub fn default_for(func: Func, bits: u32) -> Result<Self, crate::GcError> {
        if bits < 4 {
            return Err(crate::GcError::invalid(format!(
                "default activation formats need at least 4 bits, not {bits}"
            )));
        }
        let inp = Format::new(bits, bits - 4)?;
        let out = match func {
            Func::Relu | Func::Identity => inp,
            Func::Sigmoid | Func::Tanh => Format::new(bits, bits - 2)?,
        };
        Ok(Self::simple(func, inp, out))
    }
    pub fn check(&self) -> Result<(), crate::GcError> {
        for f in [self.input, self.act_in, self.act_out, self.output] {
            check_format(f)?;
        }
        if matches!(self.func, Func::Sigmoid | Func::Tanh) && self.act_in.bits > 22 {
            return Err(crate::GcError::invalid(
                "sigmoid/tanh tables are fitted for inputs of at most 22 bits",
            ));
        }
        Ok(())
    }
    /// The plaintext integer the circuit computes should match: each stage's exact reference.
    pub fn reference(&self, x: i64) -> i64 {
        let a = reference(Func::Identity, self.input, self.act_in, x);
        let y = reference(self.func, self.act_in, self.act_out, a);
        reference(Func::Identity, self.act_out, self.output, y)
    }
    /// Applies the spec to a signed word of `input.bits` bits.
    pub fn apply<B: Backend>(&self, b: &mut B, x: &[Bit<B::Wire>]) -> Wd<B> {
        let a = if self.input == self.act_in {
            sext(x, self.input.bits as usize)
        } else {
            requantize(b, x, self.input, self.act_in)
        };
        let y = apply(b, self.func, &a, self.act_in, self.act_out);
        if self.act_out == self.output {
            sext(&y, self.output.bits as usize)
        } else {
            requantize(b, &y, self.act_out, self.output)
        }
    }
    /// The stand-alone circuit: `input.bits` inputs, `output.bits` outputs.
    pub fn circuit(&self) -> Circuit {
        Circuit::build(self.input.bits as usize, |b, x| self.apply(b, x))
    }
}

/// Evaluates the plaintext circuit of `spec` (from [`ActSpec::circuit`]) on the signed input x.
pub fn eval_plain(c: &Circuit, spec: &ActSpec, x: i64) -> i64 {
    let v = spec.input.encode(x);
    let bits: Vec<bool> = (0..spec.input.bits).map(|i| (v >> i) & 1 == 1).collect();
    let out = c.eval_plain(&bits);
    spec.output.decode(
        out.iter()
            .enumerate()
            .fold(0u64, |a, (i, &b)| a | ((b as u64) << i)),
    )
}

/// Parameters of a fitted piecewise-linear table.
#[derive(Clone, Debug)]
pub struct PwlParams {
    /// Segment-index bits (top bits of U).
    pub k: u32,
    /// Extra fractional bits of A and B.
    pub sh: u32,
    /// Tolerance the fit was made for (ULPs).
    pub tol: i64,
    pub a: Vec<i64>,
    pub b: Vec<u64>,
    /// Symmetric variant: the table covers |x| only (see [`pwl_apply`]).
    pub sym: bool,
    /// Bit position of the constant c·2^frac_out of the symmetry f(−x) = c − f(x) (0: c = 0).
    pub func_offset: u32,
}

fn bits_signed(vals: impl Iterator<Item = i64>) -> usize {
    let mut w = 1;
    for v in vals {
        let need = if v >= 0 {
            65 - v.leading_zeros() as usize
        } else {
            65 - (!v).leading_zeros() as usize
        };
        w = w.max(need);
    }
    w
}

fn bits_unsigned(vals: impl Iterator<Item = u64>) -> usize {
    vals.map(|v| 64 - v.leading_zeros() as usize)
        .max()
        .unwrap_or(0)
}

/// y = ⌊(A[hi] + B[hi]·lo) / 2^sh⌋ on `out.bits` bits.
pub fn pwl_apply<B: Backend>(
    b: &mut B,
    x: &[Bit<B::Wire>],
    inp: Format,
    out: Format,
    p: &PwlParams,
) -> Wd<B> {
    if p.sym {
        return pwl_apply_sym(b, x, inp, out, p);
    }
    let n = inp.bits as usize;
    let k = p.k as usize;
    let mut u = sext(x, n);
    u[n - 1] = not(b, &u[n - 1]);
    let lo = u[..n - k].to_vec();
    let hi = u[n - k..].to_vec();
    let aw = bits_signed(p.a.iter().copied());
    let bw = bits_unsigned(p.b.iter().copied());
    let table: Vec<u64> =
        p.a.iter()
            .zip(&p.b)
            .map(|(&a, &bb)| ((a as u64) & mask(aw as u32)) | (bb << aw))
            .collect();
    let t = lut(b, &hi, &table, aw + bw);
    let a = t[..aw].to_vec();
    let bv = t[aw..].to_vec();
    let prod = if lo.is_empty() || bw == 0 {
        Vec::new()
    } else {
        mul_unsigned(b, &bv, &lo)
    };
    let w = aw
        .max(prod.len() + 1)
        .max(p.sh as usize + out.bits as usize)
        + 1;
    let s = add(b, &sext(&a, w), &zext(&prod, w));
    s[p.sh as usize..p.sh as usize + out.bits as usize].to_vec()
}

/// Fits segments of `2^(n−k)` points (one more, the next segment's first point, when `sym`:
/// the symmetric circuit evaluates a segment at lo + 1).
/// The symmetric variant, for f(−x) = c − f(x) (tanh: c = 0; sigmoid: c = 1). With s the sign
/// of X and m = X ⊕ s (free; m = |X| − 1 when X < 0), it evaluates the table of f(|x|) at
/// m + s — the carry-in s is added to the segment offset `lo` — and returns g or c − g:
///
/// ```text
///     g = ⌊(A[hi] + B[hi] · (lo + s)) / 2^sh⌋,   y = s ? c·2^frac_out − g : g
/// ```
/// The table covers n−1 input bits instead of n (half the lookup-table ANDs) for an
/// incrementer on `lo`, one more multiplier row and a conditional negation.
fn pwl_apply_sym<B: Backend>(
    b: &mut B,
    x: &[Bit<B::Wire>],
    inp: Format,
    out: Format,
    p: &PwlParams,
) -> Wd<B> {
    let n = inp.bits as usize;
    let k = p.k as usize;
    let x = sext(x, n);
    let s = x[n - 1].clone();
    let m: Vec<_> = x[..n - 1]
        .iter()
        .map(|v| crate::backend::xor(b, v, &s))
        .collect();
    let lo = m[..n - 1 - k].to_vec();
    let hi = m[n - 1 - k..].to_vec();
    let aw = bits_signed(p.a.iter().copied());
    let bw = bits_unsigned(p.b.iter().copied());
    let table: Vec<u64> =
        p.a.iter()
            .zip(&p.b)
            .map(|(&a, &bb)| ((a as u64) & mask(aw as u32)) | (bb << aw))
            .collect();
    let t = lut(b, &hi, &table, aw + bw);
    let a = t[..aw].to_vec();
    let bv = t[aw..].to_vec();
    let lo1 = crate::gadgets::add_cin(
        b,
        &zext(&lo, lo.len() + 1),
        &constant_word(0, lo.len() + 1),
        s.clone(),
    );
    let prod = if bw == 0 {
        Vec::new()
    } else {
        mul_unsigned(b, &bv, &lo1)
    };
    let ob = out.bits as usize;
    let w = aw.max(prod.len() + 1).max(p.sh as usize + ob) + 1;
    let sum = add(b, &sext(&a, w), &zext(&prod, w));
    let g = sum[p.sh as usize..p.sh as usize + ob].to_vec();
    // conditional negation: (g ⊕ s) + s
    let gx: Vec<_> = g.iter().map(|v| crate::backend::xor(b, v, &s)).collect();
    let mut c = constant_word(0, ob);
    if p.func_offset > 0 && (p.func_offset as usize) < ob {
        c[p.func_offset as usize] = s.clone();
    }
    crate::gadgets::add_cin(b, &gx, &c, s)
}

fn fit(
    targets: &[i64],
    n: u32,
    k: u32,
    sh: u32,
    tol: i64,
    omin: i64,
    omax: i64,
    sym: bool,
) -> Option<PwlParams> {
    let s = 1usize << (n - k);
    let pts = s + sym as usize;
    let mut a_v = Vec::with_capacity(1 << k);
    let mut b_v = Vec::with_capacity(1 << k);
    let scale = 1i64 << sh;
    for seg in 0..(1usize << k) {
        let t = &targets[seg * s..seg * s + pts];
        let s = pts;
        if s == 1 {
            a_v.push(t[0] * scale);
            b_v.push(0);
            continue;
        }
        let lob = |l: usize| (t[l] - tol).max(omin) * scale;
        let hib = |l: usize| ((t[l] + tol).min(omax) + 1) * scale - 1;
        let ideal = ((t[s - 1] - t[0]) * scale) as f64 / (s - 1) as f64;
        let b0 = ideal.round().max(0.0) as i64;
        let maxd = 2 * scale + 8;
        let mut found = None;
        'search: for d in 0..=maxd {
            for cand in [b0 + d, b0 - d] {
                if cand < 0 || (d == 0 && cand != b0) {
                    continue;
                }
                let mut lo_a = i64::MIN;
                let mut hi_a = i64::MAX;
                for l in 0..s {
                    let bl = cand * l as i64;
                    lo_a = lo_a.max(lob(l) - bl);
                    hi_a = hi_a.min(hib(l) - bl);
                    if lo_a > hi_a {
                        break;
                    }
                }
                if lo_a <= hi_a {
                    // Centre A in its interval, then prefer the exact rounding of segment start.
                    let mid = lo_a + (hi_a - lo_a) / 2;
                    found = Some((mid, cand as u64));
                    break 'search;
                }
            }
        }
        let (a, bb) = found?;
        a_v.push(a);
        b_v.push(bb);
    }
    Some(PwlParams {
        k,
        sh,
        tol,
        a: a_v,
        b: b_v,
        sym,
        func_offset: 0,
    })
}

type FitKey = (Func, Format, Format);

/// Inputs of at most this many bits get an exactly rounded fit (tolerance 0): CryptoGRU's 8-bit
/// activations then equal the plain rounding rule of the model format (what
/// `secinfer.fixedpoint` computes) at every input, for more AND gates than a 1-ULP fit
/// (the GRU step's circuit B with the 8-bit tanh (8,5) → (8,7): 92 → 118 AND gates; an exact fit
/// always exists: one segment per input).
pub const EXACT_FIT_BITS: u32 = 8;

/// The cheapest (fewest AND gates) fitted table for `func` from `inp` to `out` (cached).
pub fn pwl_params(func: Func, inp: Format, out: Format) -> Arc<PwlParams> {
    static CACHE: OnceLock<Mutex<HashMap<FitKey, Arc<PwlParams>>>> = OnceLock::new();
    let cache = CACHE.get_or_init(|| Mutex::new(HashMap::new()));
    if let Some(p) = cache
        .lock()
        .ok()
        .and_then(|c| c.get(&(func, inp, out)).cloned())
    {
        return p;
    }
    let p = Arc::new(search_pwl(func, inp, out));
    if let Ok(mut c) = cache.lock() {
        c.insert((func, inp, out), p.clone());
    }
    p
}

fn search_pwl(func: Func, inp: Format, out: Format) -> PwlParams {
    let n = inp.bits;
    let half = 1i64 << (n - 1);
    let targets: Vec<i64> = (0..(1i64 << n))
        .map(|u| reference(func, inp, out, u - half))
        .collect();
    let (omin, omax) = (out.min_int(), out.max_int());
    // Symmetric variant: targets f(m) for m = 0..=2^(n−1) (the last point is |min|).
    let sym_offset: Option<u32> = match func {
        Func::Tanh => Some(0),
        Func::Sigmoid if out.scale + 1 < out.bits => Some(out.scale),
        _ => None,
    };
    let sym_targets: Vec<i64> = (0..=half)
        .map(|m| out.quantize(func.eval(m as f64 / (1u64 << inp.scale) as f64)))
        .collect();
    // Symmetry holds for the rounded outputs only if no saturation breaks it: the unclamped
    // rounded values and their mirror images must all be representable.
    let sym_offset = sym_offset.filter(|&off| {
        let c = if off == 0 { 0 } else { 1i64 << off };
        (0..=half).all(|m| {
            let raw = (func.eval(m as f64 / (1u64 << inp.scale) as f64)
                * (1u64 << out.scale) as f64
                + 0.5)
                .floor() as i64;
            (omin..=omax).contains(&raw) && (omin..=omax).contains(&(c - raw))
        })
    });
    let first_tol = if n <= EXACT_FIT_BITS { 0 } else { 1 };
    for tol in first_tol..=8 {
        let mut best: Option<(u64, u32, PwlParams)> = None;
        if let Some(off) = sym_offset {
            let kmin = (n - 1).saturating_sub(10).max(1);
            let kmax = (n - 2).min(12);
            for k in kmin..=kmax {
                for sh in 0..=10u32 {
                    let Some(mut p) = fit(&sym_targets, n - 1, k, sh, tol, omin, omax, true) else {
                        continue;
                    };
                    p.func_offset = off;
                    let mut c = Counter::new();
                    let x: Vec<Bit<u32>> = (0..n).map(|_| Bit::Wire(0)).collect();
                    pwl_apply(&mut c, &x, inp, out, &p);
                    if best
                        .as_ref()
                        .is_none_or(|(a, d, _)| (c.ands, c.max_depth) < (*a, *d))
                    {
                        best = Some((c.ands, c.max_depth, p));
                    }
                }
            }
        }
        let kmin = n.saturating_sub(10).max(1);
        let kmax = n.min(13);
        for k in kmin..=kmax {
            for sh in 0..=10u32 {
                if k == n && sh > 0 {
                    continue;
                }
                let Some(p) = fit(&targets, n, k, sh, tol, omin, omax, false) else {
                    continue;
                };
                let mut c = Counter::new();
                let x: Vec<Bit<u32>> = (0..n).map(|_| Bit::Wire(0)).collect();
                pwl_apply(&mut c, &x, inp, out, &p);
                let better = match &best {
                    None => true,
                    Some((a, d, _)) => (c.ands, c.max_depth) < (*a, *d),
                };
                if better {
                    best = Some((c.ands, c.max_depth, p));
                }
            }
        }
        if let Some((_, _, p)) = best {
            return p;
        }
    }
    // Last resort: the exact full table (always fits).
    fit(&targets, n, n, 0, 0, omin, omax, false).unwrap_or(PwlParams {
        k: n,
        sh: 0,
        tol: 0,
        a: targets,
        b: vec![0; 1 << n],
        sym: false,
        func_offset: 0,
    })
}

/// Maximum |circuit − reference| in ULPs of the output format over all inputs (exhaustive when
/// `input.bits ≤ 20`, else over `2^20` pseudorandom inputs), for a circuit built from `spec`.
/// Returns (max ULP error, inputs checked, exhaustive).
pub fn max_ulp_error(spec: &ActSpec) -> (u64, u64, bool) {
    let c = spec.circuit();
    let n = spec.input.bits;
    let exhaustive = n <= 20;
    let total: u64 = if exhaustive { 1 << n } else { 1 << 20 };
    let mut worst = 0u64;
    let mut rng: u64 = 0x9e3779b97f4a7c15;
    let mut base = 0u64;
    while base < total {
        let lanes = (total - base).min(64) as usize;
        let mut xs = [0u64; 64];
        for (j, x) in xs.iter_mut().enumerate().take(lanes) {
            *x = if exhaustive {
                base + j as u64
            } else {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                rng & mask(n)
            };
        }
        let ins: Vec<u64> = (0..n as usize)
            .map(|i| {
                xs.iter()
                    .enumerate()
                    .take(lanes)
                    .fold(0u64, |acc, (j, x)| acc | (((x >> i) & 1) << j))
            })
            .collect();
        let outs = c.eval_sliced(&ins);
        for (j, x) in xs.iter().enumerate().take(lanes) {
            let y = outs
                .iter()
                .enumerate()
                .fold(0u64, |acc, (i, o)| acc | (((o >> j) & 1) << i));
            let got = spec.output.decode(y);
            let want = spec.reference(spec.input.decode(*x));
            worst = worst.max(got.abs_diff(want));
        }
        base += lanes as u64;
    }
    (worst, total, exhaustive)
}
