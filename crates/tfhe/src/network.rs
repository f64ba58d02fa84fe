//! SHE networks: a typed list of layers over power-of-two weights, evaluated by one circuit on
//! any [`Backend`], and the plaintext fixed-point reference with the very same arithmetic.
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::backend::{Backend, Bit, Word};
use crate::counter::Counter;
use crate::int;
use crate::plain::Plain;
use crate::Error;

/// Largest shift a term may take either way, and the widest activation format: words stay far
/// below 64 bits so the i64 reference cannot overflow.
pub const MAX_SHIFT: i32 = 24;
pub const MAX_BITS: u32 = 16;
const MAX_BIAS: i64 = 1 << 40;

/// A tensor shape, channels × height × width (a flat vector is n × 1 × 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shape {
    pub c: usize,
    pub h: usize,
    pub w: usize,
}

impl Shape {
    pub fn flat(n: usize) -> Self {
        Self { c: n, h: 1, w: 1 }
    }
    pub fn len(&self) -> usize {
        self.c * self.h * self.w
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The client's input format: `bits`-bit integers, signed (two's complement) or unsigned (a
/// public constant-zero sign bit is added, so no ciphertext carries it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputFormat {
    pub shape: Shape,
    pub bits: u32,
    pub signed: bool,
}

/// The weights of a Dense or Conv2d layer: each weight is `sign · 2^exp` (sign 0: a pruned
/// weight, which costs nothing), SHE's 5-bit logarithmic quantisation. A term enters the
/// accumulator as `x · 2^(exp + offset)`, so the accumulator's scale is the input's plus
/// `offset`; a negative total shift is an arithmetic right shift (floor). `bias` is at the
/// accumulator's scale (a folded BatchNorm lands here and in the weights).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pow2Linear {
    pub name: String,
    pub outputs: usize,
    /// Weights per output (the fan-in).
    pub fan_in: usize,
    pub sign: Vec<i8>,
    pub exp: Vec<i8>,
    pub bias: Vec<i64>,
    pub offset: i32,
}

/// Convolution geometry (square kernel, same stride and zero padding both ways).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConvGeom {
    pub in_ch: usize,
    pub out_ch: usize,
    pub kernel: usize,
    pub stride: usize,
    pub padding: usize,
}

/// One SHE layer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Layer {
    /// Weights `[outputs][fan_in]` over the flattened input.
    Dense(Pow2Linear),
    /// Weights `[out_ch][in_ch][kernel][kernel]`.
    Conv2d(Pow2Linear, ConvGeom),
    /// floor(x / 2^shift), then ReLU and saturation to `bits` unsigned bits (`relu`), or
    /// saturation to `bits` signed bits.
    Requant {
        shift: u32,
        bits: u32,
        relu: bool,
    },
    /// Max over each window; padded positions are skipped (they never win).
    MaxPool {
        kernel: usize,
        stride: usize,
        padding: usize,
    },
    Flatten,
}

impl Layer {
    pub fn kind(&self) -> &'static str {
        match self {
            Layer::Dense(_) => "dense",
            Layer::Conv2d(..) => "conv2d",
            Layer::Requant { .. } => "requant",
            Layer::MaxPool { .. } => "maxpool",
            Layer::Flatten => "flatten",
        }
    }
}

/// A validated SHE network.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Network {
    input: InputFormat,
    layers: Vec<Layer>,
    /// Output shape of every layer.
    shapes: Vec<Shape>,
    /// [lo, hi] of every layer's output values (a bound over the tensor).
    ranges: Vec<(i64, i64)>,
}

/// Output size of a window sweep, or None when the window does not fit.
/// Windows (kernel, stride, padding) are at most this many positions wide, and a tensor at most
/// `MAX_VALUES` values, so a hostile description cannot ask for unbounded work.
pub const MAX_WINDOW: usize = 64;
pub const MAX_VALUES: usize = 1 << 24;

fn sweep(n: usize, k: usize, s: usize, p: usize) -> Option<usize> {
    if k == 0 || s == 0 || k > MAX_WINDOW || s > MAX_WINDOW || p > MAX_WINDOW || n > MAX_VALUES {
        return None;
    }
    let padded = n + 2 * p;
    if padded < k {
        return None;
    }
    Some((padded - k) / s + 1)
}

/// Interval of `x · 2^k` (floor) over x in [lo, hi].
fn shifted_range(lo: i64, hi: i64, k: i32) -> (i64, i64) {
    let f = |v: i64| shift_value(v, k);
    (f(lo), f(hi))
}

/// `v · 2^k`, floor for k < 0 (the reference of [`int::shift`]).
pub fn shift_value(v: i64, k: i32) -> i64 {
    if k >= 0 {
        v << k
    } else {
        v >> (-k).min(63)
    }
}

impl Network {
    /// Checks every layer against the shape it receives (weight counts, kernel fits, shift
    /// and width bounds) and computes value bounds, so evaluation cannot fail or overflow.
    pub fn new(input: InputFormat, layers: Vec<Layer>) -> Result<Self, Error> {
        let bad = |index: usize, layer: &Layer, reason: String| Error::Layer {
            index,
            kind: layer.kind(),
            reason,
        };
        let s = input.shape;
        let values = s.c.checked_mul(s.h).and_then(|v| v.checked_mul(s.w));
        if input.bits == 0
            || input.bits > MAX_BITS
            || values.is_none_or(|v| v == 0 || v > MAX_VALUES)
        {
            return Err(Error::Format(format!(
                "input format {input:?} (bits 1..={MAX_BITS}, 1..={MAX_VALUES} values)"
            )));
        }
        let mut shape = input.shape;
        let mut range = if input.signed {
            (-(1i64 << (input.bits - 1)), (1i64 << (input.bits - 1)) - 1)
        } else {
            (0, (1i64 << input.bits) - 1)
        };
        let (mut shapes, mut ranges) = (Vec::new(), Vec::new());
        for (index, layer) in layers.iter().enumerate() {
            let err = |reason: String| bad(index, layer, reason);
            match layer {
                Layer::Dense(lin) | Layer::Conv2d(lin, _) => {
                    let (out_shape, fan_in) = match layer {
                        Layer::Conv2d(_, g) => {
                            if g.in_ch != shape.c {
                                return Err(err(format!(
                                    "{} input channels, got {}",
                                    g.in_ch, shape.c
                                )));
                            }
                            let oh = sweep(shape.h, g.kernel, g.stride, g.padding);
                            let ow = sweep(shape.w, g.kernel, g.stride, g.padding);
                            let (Some(oh), Some(ow)) = (oh, ow) else {
                                return Err(err(format!("kernel {g:?} does not fit {shape:?}")));
                            };
                            (
                                Shape {
                                    c: g.out_ch,
                                    h: oh,
                                    w: ow,
                                },
                                g.in_ch * g.kernel * g.kernel,
                            )
                        }
                        _ => (Shape::flat(lin.outputs), shape.len()),
                    };
                    lin.check(out_shape.c, fan_in).map_err(&err)?;
                    // Adder-tree words must stay well inside the i64 the reference uses.
                    let max_k = lin
                        .exp
                        .iter()
                        .map(|e| i32::from(*e) + lin.offset)
                        .max()
                        .unwrap_or(0)
                        .max(0);
                    let tree =
                        int::bits_for(range.0, range.1) + max_k as usize + usize::BITS as usize
                            - fan_in.leading_zeros() as usize
                            + 2;
                    if tree > 62 {
                        return Err(err(format!(
                            "adder words would reach {tree} bits; requantise earlier"
                        )));
                    }
                    range = lin.range(range);
                    shape = out_shape;
                }
                Layer::Requant { shift, bits, relu } => {
                    if *bits == 0 || *bits > MAX_BITS || *shift > MAX_SHIFT as u32 {
                        return Err(err(format!(
                            "bits {bits} (1..={MAX_BITS}), shift {shift} (..={MAX_SHIFT})"
                        )));
                    }
                    range = if *relu {
                        (0, (1i64 << bits) - 1)
                    } else {
                        (-(1i64 << (bits - 1)), (1i64 << (bits - 1)) - 1)
                    };
                }
                Layer::MaxPool {
                    kernel,
                    stride,
                    padding,
                } => {
                    let oh = sweep(shape.h, *kernel, *stride, *padding);
                    let ow = sweep(shape.w, *kernel, *stride, *padding);
                    let (Some(oh), Some(ow)) = (oh, ow) else {
                        return Err(err(format!(
                            "window {kernel}/{stride}/{padding} does not fit {shape:?}"
                        )));
                    };
                    if *padding >= *kernel {
                        return Err(err("padding must be smaller than the window".into()));
                    }
                    shape = Shape {
                        c: shape.c,
                        h: oh,
                        w: ow,
                    };
                }
                Layer::Flatten => shape = Shape::flat(shape.len()),
            }
            if range.0 < -MAX_BIAS * 4 || range.1 > MAX_BIAS * 4 {
                return Err(err(format!("values reach {range:?}; requantise earlier")));
            }
            if shape
                .c
                .checked_mul(shape.h)
                .and_then(|v| v.checked_mul(shape.w))
                .is_none_or(|v| v > MAX_VALUES)
            {
                return Err(err(format!(
                    "output shape {shape:?} exceeds {MAX_VALUES} values"
                )));
            }
            shapes.push(shape);
            ranges.push(range);
        }
        Ok(Self {
            input,
            layers,
            shapes,
            ranges,
        })
    }

    pub fn input(&self) -> InputFormat {
        self.input
    }
    pub fn layers(&self) -> &[Layer] {
        &self.layers
    }
    /// Output shape of every layer.
    pub fn shapes(&self) -> &[Shape] {
        &self.shapes
    }
    /// [lo, hi] bound of every layer's output values.
    pub fn ranges(&self) -> &[(i64, i64)] {
        &self.ranges
    }
    pub fn input_len(&self) -> usize {
        self.input.shape.len()
    }
    /// Ciphertexts per input value (the sign bit of an unsigned format is public).
    pub fn input_bits(&self) -> usize {
        self.input.bits as usize
    }
    pub fn output_len(&self) -> usize {
        self.shapes.last().map_or(self.input_len(), Shape::len)
    }
    /// Bits per output value: the narrowest two's-complement width that holds the output's
    /// value bound, so every output arrives at one agreed width.
    pub fn output_bits(&self) -> usize {
        let (lo, hi) = self
            .ranges
            .last()
            .copied()
            .unwrap_or((0, (1 << self.input.bits) - 1));
        int::bits_for(lo, hi)
    }

    /// Checks an input vector against the input format.
    pub fn check_input(&self, x: &[i64]) -> Result<(), Error> {
        if x.len() != self.input_len() {
            return Err(Error::InputLength {
                got: x.len(),
                want: self.input_len(),
            });
        }
        let b = self.input.bits;
        let (lo, hi) = if self.input.signed {
            (-(1i64 << (b - 1)), (1i64 << (b - 1)) - 1)
        } else {
            (0, (1i64 << b) - 1)
        };
        match x.iter().position(|v| *v < lo || *v > hi) {
            Some(index) => Err(Error::InputRange {
                index,
                value: x[index],
                lo,
                hi,
            }),
            None => Ok(()),
        }
    }

    /// The input words from per-value input wires (`input_bits()` wires per value).
    pub fn input_words<W: Clone>(&self, wires: &[W]) -> Result<Vec<Word<W>>, Error> {
        let per = self.input_bits();
        if wires.len() != self.input_len() * per {
            return Err(Error::CiphertextCount {
                got: wires.len(),
                want: self.input_len() * per,
            });
        }
        Ok(wires
            .chunks(per)
            .map(|c| {
                let mut w: Word<W> = c.iter().cloned().map(Bit::Wire).collect();
                if !self.input.signed {
                    w.push(Bit::ZERO);
                }
                w
            })
            .collect())
    }

    /// Runs the network's circuit on a backend; every output word is `output_bits()` wide.
    pub fn evaluate_with<B: Backend + Sync>(
        &self,
        b: &mut B,
        input: Vec<Word<B::Wire>>,
    ) -> Result<Vec<Word<B::Wire>>, Error> {
        self.evaluate_layers(b, input, |_, _| {})
    }

    /// [`Self::evaluate_with`], calling `on_layer(i, backend)` after layer `i`.
    fn evaluate_layers<B: Backend + Sync>(
        &self,
        b: &mut B,
        input: Vec<Word<B::Wire>>,
        mut on_layer: impl FnMut(usize, &B),
    ) -> Result<Vec<Word<B::Wire>>, Error> {
        if input.len() != self.input_len() {
            return Err(Error::InputLength {
                got: input.len(),
                want: self.input_len(),
            });
        }
        let mut x = input;
        let mut shape = self.input.shape;
        for (i, (layer, out_shape)) in self.layers.iter().zip(&self.shapes).enumerate() {
            x = match layer {
                Layer::Dense(lin) => par_map(b, lin.outputs, |b, o| {
                    let terms = (0..lin.fan_in)
                        .map(|i| (i, o * lin.fan_in + i))
                        .collect::<Vec<_>>();
                    lin.neuron(b, &x, o, &terms)
                }),
                Layer::Conv2d(lin, g) => par_map(b, out_shape.len(), |b, o| {
                    let terms = conv_taps(g, shape, *out_shape, o);
                    lin.neuron(b, &x, o / (out_shape.h * out_shape.w), &terms)
                }),
                Layer::Requant { shift, bits, relu } => par_map(b, x.len(), |b, i| {
                    int::requantize(b, &x[i], *shift, *bits as usize, *relu)
                }),
                Layer::MaxPool {
                    kernel,
                    stride,
                    padding,
                } => par_map(b, out_shape.len(), |b, o| {
                    let mut window: Vec<Word<B::Wire>> =
                        pool_taps(*kernel, *stride, *padding, shape, *out_shape, o)
                            .into_iter()
                            .map(|i| x[i].clone())
                            .collect();
                    // A balanced tree of max units keeps the depth logarithmic in the window.
                    while window.len() > 1 {
                        let mut next = Vec::with_capacity(window.len().div_ceil(2));
                        for pair in window.chunks(2) {
                            next.push(if pair.len() == 2 {
                                int::max(b, &pair[0], &pair[1])
                            } else {
                                pair[0].clone()
                            });
                        }
                        window = next;
                    }
                    window.pop().unwrap_or_else(|| vec![Bit::ZERO])
                }),
                Layer::Flatten => x,
            };
            shape = *out_shape;
            on_layer(i, b);
        }
        let w = self.output_bits();
        Ok(x.iter().map(|word| int::resize(word, w)).collect())
    }

    /// The circuit's gate counts, bootstrap depth and SHE operation counts.
    pub fn count(&self) -> Counter {
        let mut c = Counter::new();
        let wires = vec![0u32; self.input_len() * self.input_bits()];
        // Input arity was fixed by construction, so evaluation cannot fail here.
        if let Ok(words) = self.input_words(&wires) {
            if let Ok(out) = self.evaluate_with(&mut c, words) {
                self.refresh_outputs(&mut c, &out, &0);
            }
        }
        c
    }

    /// Gate bootstraps of every layer, then of the output refresh (the last entry).
    pub fn count_layers(&self) -> Vec<u64> {
        let mut c = Counter::new();
        let mut per = Vec::with_capacity(self.layers.len() + 1);
        let mut seen = 0;
        let wires = vec![0u32; self.input_len() * self.input_bits()];
        if let Ok(words) = self.input_words(&wires) {
            if let Ok(out) = self.evaluate_layers(&mut c, words, |_, b| {
                per.push(b.pbs() - seen);
                seen = b.pbs();
            }) {
                self.refresh_outputs(&mut c, &out, &0);
            }
        }
        per.push(c.pbs() - seen);
        per
    }

    /// Every output bit as a freshly bootstrapped wire, from the client's encryption of zero:
    /// a bit the circuit left as a public constant (which would tell the client something about
    /// the weights, e.g. that no weight is negative) becomes AND(zero, zero) or its negation,
    /// and every other bit goes through XOR with zero, so no output ciphertext is trivial or a
    /// copy of another.
    pub fn refresh_outputs<B: Backend>(
        &self,
        b: &mut B,
        out: &[Word<B::Wire>],
        zero: &B::Wire,
    ) -> Vec<B::Wire> {
        out.iter()
            .flatten()
            .map(|bit| match bit {
                Bit::Const(v) => {
                    let z = b.and(zero, zero);
                    if *v {
                        b.not(&z)
                    } else {
                        z
                    }
                }
                Bit::Wire(w) => b.xor(w, zero),
            })
            .collect()
    }

    /// Ciphertexts the client sends: `input_bits()` per input value, then one encryption of
    /// zero for [`Self::refresh_outputs`].
    pub fn input_ciphertexts(&self) -> usize {
        self.input_len() * self.input_bits() + 1
    }

    /// The circuit run in the clear (bit by bit, as the encrypted backend runs it).
    pub fn evaluate_plain(&self, x: &[i64]) -> Result<Vec<i64>, Error> {
        self.check_input(x)?;
        let bits: Vec<bool> = x
            .iter()
            .flat_map(|v| int::value_bits(*v, self.input_bits()))
            .collect();
        let words = self.input_words(&bits)?;
        let out = self.evaluate_with(&mut Plain, words)?;
        let flat = self.refresh_outputs(&mut Plain, &out, &false);
        Ok(flat
            .chunks(self.output_bits())
            .map(int::bits_value)
            .collect())
    }

    /// The plaintext fixed-point reference on i64: the arithmetic every backend must match bit
    /// for bit (floor shifts, exact sums, saturation).
    pub fn reference(&self, x: &[i64]) -> Result<Vec<i64>, Error> {
        self.check_input(x)?;
        let mut x = x.to_vec();
        let mut shape = self.input.shape;
        for (layer, out_shape) in self.layers.iter().zip(&self.shapes) {
            x = match layer {
                Layer::Dense(lin) => (0..lin.outputs)
                    .map(|o| lin.reference(&x, o, (0..lin.fan_in).map(|i| (i, o * lin.fan_in + i))))
                    .collect(),
                Layer::Conv2d(lin, g) => (0..out_shape.len())
                    .map(|o| {
                        lin.reference(
                            &x,
                            o / (out_shape.h * out_shape.w),
                            conv_taps(g, shape, *out_shape, o).into_iter(),
                        )
                    })
                    .collect(),
                Layer::Requant { shift, bits, relu } => x
                    .iter()
                    .map(|v| requant_value(*v, *shift, *bits, *relu))
                    .collect(),
                Layer::MaxPool {
                    kernel,
                    stride,
                    padding,
                } => (0..out_shape.len())
                    .map(|o| {
                        pool_taps(*kernel, *stride, *padding, shape, *out_shape, o)
                            .into_iter()
                            .map(|i| x[i])
                            .max()
                            .unwrap_or(0)
                    })
                    .collect(),
                Layer::Flatten => x,
            };
            shape = *out_shape;
        }
        Ok(x)
    }
}

/// The reference of [`int::requantize`].
pub fn requant_value(v: i64, shift: u32, bits: u32, relu: bool) -> i64 {
    let y = v >> shift;
    if relu {
        y.clamp(0, (1 << bits) - 1)
    } else {
        y.clamp(-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
    }
}

impl Pow2Linear {
    fn check(&self, outputs: usize, fan_in: usize) -> Result<(), String> {
        // Bounded first so exponent + offset cannot overflow anywhere below.
        if self.offset.abs() > 2 * MAX_SHIFT {
            return Err(format!(
                "{}: offset {} beyond ±{}",
                self.name,
                self.offset,
                2 * MAX_SHIFT
            ));
        }
        let n = outputs
            .checked_mul(fan_in)
            .ok_or_else(|| format!("{}: {outputs}×{fan_in} weights", self.name))?;
        if self.outputs != outputs || self.fan_in != fan_in {
            return Err(format!(
                "{}: weights are {}×{}, the input needs {outputs}×{fan_in}",
                self.name, self.outputs, self.fan_in
            ));
        }
        if self.sign.len() != n || self.exp.len() != n || self.bias.len() != outputs {
            return Err(format!(
                "{}: {} signs, {} exponents, {} biases for {outputs}×{fan_in}",
                self.name,
                self.sign.len(),
                self.exp.len(),
                self.bias.len()
            ));
        }
        if let Some(s) = self.sign.iter().find(|s| !(-1..=1).contains(*s)) {
            return Err(format!("{}: sign {s} (must be -1, 0 or 1)", self.name));
        }
        for (s, e) in self.sign.iter().zip(&self.exp) {
            let k = i32::from(*e) + self.offset;
            if *s != 0 && !(-MAX_SHIFT..=MAX_SHIFT).contains(&k) {
                return Err(format!("{}: shift {k} outside ±{MAX_SHIFT}", self.name));
            }
        }
        if let Some(b) = self.bias.iter().find(|b| b.abs() > MAX_BIAS) {
            return Err(format!("{}: bias {b} beyond ±2^40", self.name));
        }
        Ok(())
    }

    /// Bound on the outputs given a bound on the inputs.
    fn range(&self, (lo, hi): (i64, i64)) -> (i64, i64) {
        let (mut out_lo, mut out_hi) = (i64::MAX, i64::MIN);
        for o in 0..self.outputs {
            let (mut a, mut z) = (self.bias[o], self.bias[o]);
            for j in o * self.fan_in..(o + 1) * self.fan_in {
                let (l, h) = shifted_range(lo, hi, i32::from(self.exp[j]) + self.offset);
                match self.sign[j] {
                    1 => (a, z) = (a + l, z + h),
                    -1 => (a, z) = (a - h, z - l),
                    _ => {}
                }
            }
            (out_lo, out_hi) = (out_lo.min(a), out_hi.max(z));
        }
        (out_lo.min(0), out_hi.max(0))
    }

    /// One output: shift terms, the mixed-bitwidth adder tree, the bias (plus the carries the
    /// negated terms left out). `taps` pairs an input index with a weight index.
    fn neuron<B: Backend>(
        &self,
        b: &mut B,
        x: &[Word<B::Wire>],
        o: usize,
        taps: &[(usize, usize)],
    ) -> Word<B::Wire> {
        let mut carries = 0;
        let mut terms = Vec::with_capacity(taps.len());
        for &(i, j) in taps {
            if self.sign[j] == 0 {
                continue;
            }
            let (t, c) = int::pow2_term(
                b,
                &x[i],
                i32::from(self.exp[j]) + self.offset,
                self.sign[j] < 0,
            );
            carries += c;
            terms.push(t);
        }
        // Narrow terms pair with narrow ones, so wide words meet only near the root.
        terms.sort_by_key(Vec::len);
        let (sum, _) = int::adder_tree(b, terms);
        int::add_const(b, &sum, self.bias[o] + carries)
    }

    fn reference(&self, x: &[i64], o: usize, taps: impl Iterator<Item = (usize, usize)>) -> i64 {
        let mut acc = self.bias[o];
        for (i, j) in taps {
            let t = shift_value(x[i], i32::from(self.exp[j]) + self.offset);
            acc += i64::from(self.sign[j]) * t;
        }
        acc
    }
}

/// (input index, weight index) of every in-bounds tap of conv output `o` (CHW order).
pub(crate) fn conv_taps(g: &ConvGeom, inp: Shape, out: Shape, o: usize) -> Vec<(usize, usize)> {
    let (oc, oy, ox) = (o / (out.h * out.w), (o / out.w) % out.h, o % out.w);
    let mut taps = Vec::with_capacity(g.in_ch * g.kernel * g.kernel);
    for ic in 0..g.in_ch {
        for ky in 0..g.kernel {
            for kx in 0..g.kernel {
                let (iy, ix) = (
                    (oy * g.stride + ky) as isize - g.padding as isize,
                    (ox * g.stride + kx) as isize - g.padding as isize,
                );
                if iy < 0 || ix < 0 || iy as usize >= inp.h || ix as usize >= inp.w {
                    continue;
                }
                let i = (ic * inp.h + iy as usize) * inp.w + ix as usize;
                taps.push((i, ((oc * g.in_ch + ic) * g.kernel + ky) * g.kernel + kx));
            }
        }
    }
    taps
}

/// Input indices in the window of pooling output `o` (CHW order), padding skipped.
fn pool_taps(k: usize, s: usize, p: usize, inp: Shape, out: Shape, o: usize) -> Vec<usize> {
    let (c, oy, ox) = (o / (out.h * out.w), (o / out.w) % out.h, o % out.w);
    let mut taps = Vec::with_capacity(k * k);
    for ky in 0..k {
        for kx in 0..k {
            let (iy, ix) = (
                (oy * s + ky) as isize - p as isize,
                (ox * s + kx) as isize - p as isize,
            );
            if iy >= 0 && ix >= 0 && (iy as usize) < inp.h && (ix as usize) < inp.w {
                taps.push((c * inp.h + iy as usize) * inp.w + ix as usize);
            }
        }
    }
    taps
}

/// `f` over 0..n on all cores, each worker on a fork of `b`; the forks' tallies fold back.
pub(crate) fn par_map<B, R, F>(b: &mut B, n: usize, f: F) -> Vec<R>
where
    B: Backend + Sync,
    R: Send,
    F: Fn(&mut B, usize) -> R + Sync,
{
    par_fork(b, n, B::fork, B::absorb, f)
}

/// [`par_map`] for any backend kind, given how to fork a worker's backend and fold it back.
pub(crate) fn par_fork<B, R, F>(
    b: &mut B,
    n: usize,
    fork: fn(&B) -> B,
    absorb: fn(&mut B, B),
    f: F,
) -> Vec<R>
where
    B: Send + Sync,
    R: Send,
    F: Fn(&mut B, usize) -> R + Sync,
{
    let base: &B = b;
    let done: Vec<(R, B)> = (0..n)
        .into_par_iter()
        .map(|i| {
            let mut w = fork(base);
            let r = f(&mut w, i);
            (r, w)
        })
        .collect();
    let mut out = Vec::with_capacity(n);
    for (r, w) in done {
        absorb(b, w);
        out.push(r);
    }
    out
}
