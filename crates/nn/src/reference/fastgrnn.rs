//! FastGRNN (Kusupati et al. 2018) in the fixed-point arithmetic of family `ss`'s protocol
//! (`crate::layers::ss`): z = σ(Wx + Uh + b_z), h̃ = tanh(Wx + Uh + b_h),
//! h' = (ζ(1 − z) + ν) ⊙ h̃ + z ⊙ h, then a dense head on the last state.
//!
//! Formats follow OPAF's FastGRNN (§VI-F, SIRNN's formats): activations x, h, h̃ are 16-bit at
//! scale [`ACT_SCALE`]; σ reads 16 bits at scale 8 and writes scale 14; tanh reads scale 9 and
//! writes scale 14 (h̃ feeds only the update, in a wider ring). Every step below is an integer operation the secure protocol performs on shares
//! (products and sums mod 2^bits, exact floor shifts), so the linear parts and the update agree
//! bit for bit; σ and tanh here are the correctly rounded functions, which the secure OPAF and
//! SIRNN math meets within its stated ULP bound.
//!
//! The update h' is rearranged so it takes a single product of two shared vectors:
//! h' = (ζ + ν)·h̃ + z ⊙ (h − ζ·h̃); ζ and ν stay the server's (their products with h̃ are
//! products of a server scalar with a shared vector).
use crate::error::{NnError, Result};
use crate::model::format::const_format;
use crate::model::Format;

/// Bitwidth of x, h̃ and the gates' inputs and outputs.
pub const ACT_BITS: u32 = 16;
/// Scale of x, h and h̃ (tanh's input and output scale).
pub const ACT_SCALE: u32 = 9;
/// σ's input scale.
pub const SIGMOID_IN_SCALE: u32 = 8;
/// σ's output scale, and the scale of ζ and ν.
pub const GATE_SCALE: u32 = 14;
/// The ring of the state update and of h: ζ·h̃ at scale 28 beside h at scale 9, |h| < 2^6.
pub const UPDATE_BITS: u32 = 36;

/// The main format a FastGRNN model's dense head runs in by default: the state's scale, and
/// room for a state of 17 bits (the update's range) without a wrap.
pub const HEAD_FORMAT: Format = const_format(18, ACT_SCALE);

/// The dense head on the last state, the graph's dense rule in the model's main format:
/// logits = wrap((W_d·h) ≫ F + b_d) with h read at scale F = [`ACT_SCALE`].
#[derive(Clone)]
pub struct Head {
    pub classes: usize,
    /// classes × hidden, in `format`.
    pub w: Vec<i64>,
    /// In `format`.
    pub b: Vec<i64>,
    /// The main format: fraction bits [`ACT_SCALE`] (h needs no rescale) and 17..=27 bits (h,
    /// 17 bits, never wraps, and the product's ring, bits + frac, fits the update's 36).
    pub format: Format,
}

/// Checks a head format against [`Head::format`]'s rule.
pub fn check_head_format(f: Format) -> Result<()> {
    if f.scale != ACT_SCALE || !(ACT_BITS + 1..=UPDATE_BITS - ACT_SCALE).contains(&f.bits) {
        return Err(NnError::Unsupported(format!(
            "fastgrnn: the dense head runs in the main format, which must have {ACT_SCALE} \
             fraction bits (the state's scale) and {}..={} bits, got ({}, {})",
            ACT_BITS + 1,
            UPDATE_BITS - ACT_SCALE,
            f.bits,
            f.scale
        )));
    }
    Ok(())
}

/// A quantised FastGRNN with its head. Secret (the server's): no `Debug`.
#[derive(Clone)]
pub struct FastGrnnParams {
    pub input: usize,
    pub hidden: usize,
    /// Scale of W, U and the head's weights (16-bit integers).
    pub weight_scale: u32,
    /// hidden × input.
    pub w: Vec<i64>,
    /// hidden × hidden.
    pub u: Vec<i64>,
    /// At the accumulator scale (ACT_SCALE + weight_scale).
    pub b_z: Vec<i64>,
    pub b_h: Vec<i64>,
    /// ζ and ν at [`GATE_SCALE`] (16-bit).
    pub zeta: i64,
    pub nu: i64,
    pub head: Head,
}

/// The derived widths of a weight scale.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Widths {
    /// Scale of W·x + U·h.
    pub acc_scale: u32,
    /// Ring of the accumulator: 16 bits after the shift to σ's input scale.
    pub acc_bits: u32,
    /// Shift to σ's input scale.
    pub shift_z: u32,
    /// Shift to tanh's input scale.
    pub shift_h: u32,
}

impl Widths {
    /// Widths for weights at `weight_scale` (1..=14).
    pub fn new(weight_scale: u32) -> Result<Widths> {
        if !(1..=14).contains(&weight_scale) {
            return Err(NnError::config(format!(
                "fastgrnn: weight scale {weight_scale} is outside 1..=14"
            )));
        }
        let acc_scale = ACT_SCALE + weight_scale;
        let shift_z = acc_scale - SIGMOID_IN_SCALE;
        Ok(Widths {
            acc_scale,
            acc_bits: ACT_BITS + shift_z,
            shift_z,
            shift_h: acc_scale - ACT_SCALE,
        })
    }
}

/// `x` reduced mod 2^bits, read as a signed integer.
pub fn wrap(x: i64, bits: u32) -> i64 {
    let s = 64 - bits;
    (x << s) >> s
}

/// σ(x / 2^8) rounded to nearest at scale 14.
pub fn sigmoid(x: i64) -> i64 {
    let r = x as f64 / f64::from(1u32 << SIGMOID_IN_SCALE);
    (f64::from(1u32 << GATE_SCALE) / (1.0 + (-r).exp()) + 0.5).floor() as i64
}

/// tanh(x / 2^9) rounded to nearest at scale 14.
pub fn tanh(x: i64) -> i64 {
    let r = x as f64 / f64::from(1u32 << ACT_SCALE);
    (r.tanh() * f64::from(1u32 << GATE_SCALE) + 0.5).floor() as i64
}

impl FastGrnnParams {
    /// Checks the tensor sizes and ranges (16-bit weights).
    pub fn validate(&self) -> Result<Widths> {
        let wd = Widths::new(self.weight_scale)?;
        let (i, h, c) = (self.input, self.hidden, self.head.classes);
        let sizes = [
            ("W", self.w.len(), h * i),
            ("U", self.u.len(), h * h),
            ("bias_gate", self.b_z.len(), h),
            ("bias_update", self.b_h.len(), h),
            ("head weight", self.head.w.len(), c * h),
            ("head bias", self.head.b.len(), c),
        ];
        for (name, got, want) in sizes {
            if got != want || want == 0 {
                return Err(NnError::config(format!(
                    "fastgrnn: {name} has {got} values, expected {want} (> 0)"
                )));
            }
        }
        check_head_format(self.head.format)?;
        let fits = |v: &[i64], bits: u32| v.iter().all(|x| wrap(*x, bits) == *x);
        let hb = self.head.format.bits;
        if !fits(&self.head.w, hb) || !fits(&self.head.b, hb) {
            return Err(NnError::config(
                "fastgrnn: the head must fit the main format",
            ));
        }
        if !fits(&self.w, ACT_BITS) || !fits(&self.u, ACT_BITS) {
            return Err(NnError::config("fastgrnn: weights must fit 16 bits"));
        }
        if !fits(&self.b_z, wd.acc_bits) || !fits(&self.b_h, wd.acc_bits) {
            return Err(NnError::config("fastgrnn: biases must fit the accumulator"));
        }
        if !fits(&[self.zeta, self.nu, self.zeta + self.nu], ACT_BITS) {
            return Err(NnError::config("fastgrnn: ζ and ν must fit 16 bits"));
        }
        Ok(wd)
    }

    /// W·x_t + U·h mod 2^acc_bits (no bias).
    pub fn accumulate(&self, wd: &Widths, x: &[i64], h: &[i64]) -> Vec<i64> {
        (0..self.hidden)
            .map(|r| {
                let wx: i64 = (0..self.input)
                    .map(|j| self.w[r * self.input + j].wrapping_mul(x[j]))
                    .fold(0, i64::wrapping_add);
                let uh: i64 = (0..self.hidden)
                    .map(|j| self.u[r * self.hidden + j].wrapping_mul(h[j]))
                    .fold(0, i64::wrapping_add);
                wrap(wx.wrapping_add(uh), wd.acc_bits)
            })
            .collect()
    }

    /// σ's and tanh's inputs from the accumulator, in the accumulator ring: σ's is
    /// (acc + b_z) floor-shifted to scale 8, tanh's 2·(acc + b_h) floor-shifted by the same
    /// amount (so to scale 9: the secure run shifts both halves in one call), each reduced to
    /// 16 bits.
    pub fn gate_inputs(&self, wd: &Widths, acc: &[i64]) -> (Vec<i64>, Vec<i64>) {
        let (l, t) = (wd.acc_bits, wd.shift_z);
        let zi = acc
            .iter()
            .zip(&self.b_z)
            .map(|(a, b)| wrap(wrap(a + b, l) >> t, ACT_BITS))
            .collect();
        let hi = acc
            .iter()
            .zip(&self.b_h)
            .map(|(a, b)| wrap(wrap(2 * wrap(a + b, l), l) >> t, ACT_BITS))
            .collect();
        (zi, hi)
    }

    /// h' = ⌊((ζ + ν)·h̃ + 2^5·z·⌊(2^19·h − ζ·h̃) / 2^19⌋) / 2^19⌋ in Z_{2^36}: z and h̃ at
    /// scale 14, h at scale 9.
    pub fn update(&self, z: &[i64], ht: &[i64], h: &[i64]) -> Vec<i64> {
        let b = UPDATE_BITS;
        let up = 2 * GATE_SCALE - ACT_SCALE;
        (0..z.len())
            .map(|i| {
                let d = wrap((h[i] << up) - self.zeta * ht[i], b) >> up;
                let p = wrap(z[i].wrapping_mul(d), b) << (GATE_SCALE - ACT_SCALE);
                let s = wrap((self.zeta + self.nu) * ht[i] + p, b);
                s >> up
            })
            .collect()
    }

    /// The head's logits wrap((W_d·h) ≫ F + b_d) in the main format ([`Head`]).
    pub fn logits(&self, h: &[i64]) -> Vec<i64> {
        let f = self.head.format;
        (0..self.head.classes)
            .map(|c| {
                let s: i64 = (0..self.hidden)
                    .map(|j| self.head.w[c * self.hidden + j].wrapping_mul(h[j]))
                    .fold(0, i64::wrapping_add);
                wrap((s >> f.scale).wrapping_add(self.head.b[c]), f.bits)
            })
            .collect()
    }

    /// The whole reference on `x` (steps × input, 16-bit at scale 9): the last state and the
    /// logits.
    pub fn run(&self, x: &[i64]) -> Result<(Vec<i64>, Vec<i64>)> {
        let h = self.states(x)?.pop().unwrap_or_default();
        let logits = self.logits(&h);
        Ok((h, logits))
    }
}

/// The weight scale of FastGRNN layers quantised from a float model graph.
pub const GRAPH_WEIGHT_SCALE: u32 = 8;

/// Round to nearest at `scale`, saturating to `bits` bits; counts saturations in `sat`.
fn quantize(v: f32, scale: u32, bits: u32, sat: &mut u64) -> i64 {
    let x = (f64::from(v) * f64::from(1u32 << scale) + 0.5).floor();
    let lim = (1i64 << (bits - 1)) as f64;
    let q = x.clamp(-lim, lim - 1.0);
    *sat += u64::from(q != x);
    q as i64
}

/// `a` (m × k) times `b` (k × n), row-major: a low-rank factor pair composed in float.
fn compose(a: &[f32], b: &[f32], m: usize, k: usize, n: usize) -> Vec<f32> {
    let mut out = vec![0f32; m * n];
    for i in 0..m {
        for r in 0..k {
            let x = a[i * k + r];
            for j in 0..n {
                out[i * n + j] += x * b[r * n + j];
            }
        }
    }
    out
}

/// A graph layer's float FastGRNN tensors (low-rank factors already given as pairs).
pub struct FloatCell<'a> {
    pub input: usize,
    pub hidden: usize,
    /// W (hidden × input), or (W2 hidden × r, W1 r × input).
    pub w: Factors<'a>,
    pub u: Factors<'a>,
    pub bias_gate: &'a [f32],
    pub bias_update: &'a [f32],
    pub zeta: f32,
    pub nu: f32,
}

/// A full-rank matrix or a low-rank pair (left, right, rank).
pub enum Factors<'a> {
    Full(&'a [f32]),
    LowRank(&'a [f32], &'a [f32], usize),
}

impl Factors<'_> {
    fn matrix(&self, rows: usize, cols: usize) -> Vec<f32> {
        match self {
            Factors::Full(m) => m.to_vec(),
            Factors::LowRank(l, r, k) => compose(l, r, rows, *k, cols),
        }
    }
}

impl FastGrnnParams {
    /// The cell of a float graph layer at [`GRAPH_WEIGHT_SCALE`] (no head: a graph's dense
    /// layers follow its own rules), and the number of saturated weights.
    pub fn from_float(c: &FloatCell<'_>) -> Result<(FastGrnnParams, u64)> {
        let wd = Widths::new(GRAPH_WEIGHT_SCALE)?;
        let mut sat = 0u64;
        let mut q = |v: &[f32], scale: u32, bits: u32| -> Vec<i64> {
            v.iter()
                .map(|x| quantize(*x, scale, bits, &mut sat))
                .collect()
        };
        let (ws, acc) = (GRAPH_WEIGHT_SCALE, wd.acc_scale);
        let p = FastGrnnParams {
            input: c.input,
            hidden: c.hidden,
            weight_scale: ws,
            w: q(&c.w.matrix(c.hidden, c.input), ws, ACT_BITS),
            u: q(&c.u.matrix(c.hidden, c.hidden), ws, ACT_BITS),
            b_z: q(c.bias_gate, acc, wd.acc_bits),
            b_h: q(c.bias_update, acc, wd.acc_bits),
            zeta: q(&[c.zeta], GATE_SCALE, ACT_BITS)[0],
            nu: q(&[c.nu], GATE_SCALE, ACT_BITS)[0],
            head: Head {
                classes: 1,
                w: vec![0; c.hidden],
                b: vec![0],
                format: HEAD_FORMAT,
            },
        };
        p.validate()?;
        Ok((p, sat))
    }

    /// Every state h_1 … h_T (scale 9) of the cell on `x` (steps × input at scale 9).
    pub fn states(&self, x: &[i64]) -> Result<Vec<Vec<i64>>> {
        let wd = self.validate()?;
        if x.is_empty() || !x.len().is_multiple_of(self.input) {
            return Err(NnError::Input(format!(
                "fastgrnn: {} values are not a whole number of {}-feature steps",
                x.len(),
                self.input
            )));
        }
        let mut h = vec![0i64; self.hidden];
        let mut all = Vec::with_capacity(x.len() / self.input);
        for xt in x.chunks(self.input) {
            let acc = self.accumulate(&wd, xt, &h);
            let (zi, hi) = self.gate_inputs(&wd, &acc);
            let z: Vec<i64> = zi.iter().map(|v| sigmoid(*v)).collect();
            let ht: Vec<i64> = hi.iter().map(|v| tanh(*v)).collect();
            h = self.update(&z, &ht, &h);
            all.push(h.clone());
        }
        Ok(all)
    }
}

/// `v` at scale `from` rescaled to `to` (floor when narrowing).
pub fn rescale(v: i64, from: u32, to: u32) -> i64 {
    if from >= to {
        v >> (from - to)
    } else {
        v << (to - from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fixed-point update tracks the real-valued FastGRNN update within a few output ULPs
    /// (the floors lose at most one ULP each; z and h̃ are exact inputs here).
    #[test]
    fn update_tracks_the_real_formula() {
        let p = FastGrnnParams {
            input: 1,
            hidden: 1,
            weight_scale: 8,
            w: vec![0],
            u: vec![0],
            b_z: vec![0],
            b_h: vec![0],
            zeta: 13_000,
            nu: 300,
            head: Head {
                classes: 1,
                w: vec![0],
                b: vec![0],
                format: HEAD_FORMAT,
            },
        };
        let (zf, nf) = (13_000.0 / 16384.0, 300.0 / 16384.0);
        for (z, ht, h) in [
            (0i64, 16352i64, -511i64),
            (16384, -9600, 400),
            (8000, 3936, -77),
        ] {
            let got = p.update(&[z], &[ht], &[h])[0] as f64 / 512.0;
            let (zr, htr, hr) = (z as f64 / 16384.0, ht as f64 / 16384.0, h as f64 / 512.0);
            let want = (zf * (1.0 - zr) + nf) * htr + zr * hr;
            assert!(
                (got - want).abs() <= 3.0 / 512.0,
                "{z} {ht} {h}: {got} vs {want}"
            );
        }
    }

    /// Widths: 16 bits at σ's input after the shift; the shifts reach scales 8 and 9.
    #[test]
    fn widths_of_weight_scale_8() {
        let w = Widths::new(8).unwrap();
        assert_eq!(
            (w.acc_scale, w.acc_bits, w.shift_z, w.shift_h),
            (17, 25, 9, 8)
        );
        assert!(Widths::new(0).is_err());
    }
}
