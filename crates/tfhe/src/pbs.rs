//! The programmable-bootstrapping path: the same quantised SHE network evaluated on tfhe-rs
//! shortint ciphertexts holding base-4 digits, where one bootstrap applies any function of a
//! 4-bit value (a lookup table) instead of one boolean gate (programmable bootstrapping:
//! Chillotti, Joye, Paillier, "Programmable Bootstrapping Enables Efficient Homomorphic
//! Inference of Deep Neural Networks", CSCML 2021).
//!
//! - An activation is its canonical base-4 digits (one shortint ciphertext each, 2-bit message
//!   and 2-bit carry space). A product by `±2^k` is free: the digits of `y` or of `2y` move to
//!   the columns `k / 2` up (or drop off the bottom: SHE's floor shift), and a negative weight
//!   takes the complemented digits `3 - d` and moves the constant into the bias.
//! - A neuron's terms land in columns of a carry-save accumulator. Up to five digits of a
//!   column are added for free (tfhe-rs's noise budget) and one bootstrap pair turns their sum
//!   into this column's digit and the next column's carry: a 5:2 compressor per two bootstraps,
//!   where the gate path spends five bootstraps on a 3:2 full adder per bit.
//! - The accumulator is offset by a public `C` so it is non-negative and works modulo `4^W`;
//!   ReLU and requantisation read the low digits and a two-threshold comparison chain over the
//!   high ones, one lookup per digit.
//!
//! Every lookup's input stays within 0..16 and its noise level within the parameter set's
//! bound ([`MAX_NOISE`]), which the item bookkeeping below tracks exactly as tfhe-rs does.
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tfhe::shortint::atomic_pattern::AtomicPattern;
use tfhe::shortint::parameters::{ClassicPBSParameters, PARAM_MESSAGE_2_CARRY_2_KS_PBS};
use tfhe::shortint::{Ciphertext, ClientKey, CompressedCiphertext, CompressedServerKey, ServerKey};

use serde::{Deserialize, Serialize};

use crate::network::{
    conv_taps, par_fork, shift_value, InputFormat, Layer, Network, Pow2Linear, Shape, MAX_BITS,
    MAX_VALUES,
};
use crate::Error;

mod pool;

/// tfhe-rs's default shortint parameter set (2-bit message, 2-bit carry, TUniform noise,
/// 128-bit security, bootstrap failure probability 2^-129.6).
pub const PBS_PARAMETERS: ClassicPBSParameters = PARAM_MESSAGE_2_CARRY_2_KS_PBS;

/// A digit's base (the message modulus).
const BASE: u64 = 4;
/// Values a bootstrap reads: message × carry modulus.
const SPACE: u64 = 16;
/// The noise level a bootstrap input may reach (the parameter set's `max_noise_level`): a
/// fresh ciphertext has level 1, a sum adds levels, a product by c multiplies by c.
pub const MAX_NOISE: u64 = 5;

/// What the digit circuit runs on: leveled additions and products by small constants (free),
/// and lookups (one programmable bootstrap each).
pub trait PbsBackend: Send + Sized {
    type Ct: Clone + Send + Sync;
    fn add(&mut self, a: &Self::Ct, b: &Self::Ct) -> Self::Ct;
    fn scale(&mut self, a: &Self::Ct, c: u8) -> Self::Ct;
    /// A noiseless encryption of a public digit.
    fn trivial(&mut self, v: u64) -> Self::Ct;
    /// `f(a)` for a value in 0..16.
    fn lut(&mut self, a: &Self::Ct, f: &dyn Fn(u64) -> u64) -> Self::Ct;
    /// Every `f(a)` of `fs` from one bootstrap (tfhe-rs's many-LUT: the test polynomial holds
    /// one table per function, so `a` must stay below `16 / fs.len()`).
    fn lut_many(&mut self, a: &Self::Ct, fs: &[&dyn Fn(u64) -> u64]) -> Vec<Self::Ct>;
    fn fork(&self) -> Self;
    fn absorb(&mut self, other: Self);
    /// A lookup input outside the bounds the bookkeeping promises (a bug in the circuit; the
    /// clear and counting backends record it so tests can fail on it).
    fn violation(&mut self) {}
}

/// A ciphertext with the bounds the circuit keeps on it: its largest value and noise level.
#[derive(Clone, Debug)]
pub struct Item<C> {
    pub ct: C,
    pub max: u64,
    pub noise: u64,
}

impl<C> Item<C> {
    /// A fresh encryption or bootstrap output of a value at most `max`.
    pub fn fresh(ct: C, max: u64) -> Self {
        Self { ct, max, noise: 1 }
    }
}

fn lut<B: PbsBackend>(b: &mut B, a: &Item<B::Ct>, max: u64, f: impl Fn(u64) -> u64) -> Item<B::Ct> {
    if a.max >= SPACE || a.noise > MAX_NOISE {
        b.violation();
    }
    Item::fresh(b.lut(&a.ct, &f), max)
}

/// `f(a)` and `g(a)` from one bootstrap, for an input below `SPACE / 2`.
fn lut2<B: PbsBackend>(
    b: &mut B,
    a: &Item<B::Ct>,
    (fmax, f): (u64, &dyn Fn(u64) -> u64),
    (gmax, g): (u64, &dyn Fn(u64) -> u64),
) -> (Item<B::Ct>, Item<B::Ct>) {
    if a.max >= SPACE / 2 || a.noise > MAX_NOISE {
        b.violation();
    }
    let mut out = b.lut_many(&a.ct, &[f, g]).into_iter();
    match (out.next(), out.next()) {
        (Some(x), Some(y)) => (Item::fresh(x, fmax), Item::fresh(y, gmax)),
        // A backend that returned fewer outputs than functions: recorded, and the values come
        // from two single lookups so the circuit stays well formed.
        _ => {
            b.violation();
            (
                Item::fresh(b.lut(&a.ct, f), fmax),
                Item::fresh(b.lut(&a.ct, g), gmax),
            )
        }
    }
}

/// `lo + BASE·hi` as one lookup input (both canonical digits or small states).
fn pack<B: PbsBackend>(b: &mut B, lo: &Item<B::Ct>, hi: &Item<B::Ct>) -> Item<B::Ct> {
    let h = b.scale(&hi.ct, BASE as u8);
    let ct = b.add(&lo.ct, &h);
    Item {
        ct,
        max: lo.max + BASE * hi.max,
        noise: lo.noise + BASE * hi.noise,
    }
}

fn trivial<B: PbsBackend>(b: &mut B, v: u64) -> Item<B::Ct> {
    Item {
        ct: b.trivial(v),
        max: v,
        noise: 0,
    }
}

/// One linear layer (and the requantisation after it) as the digit circuit runs it.
#[derive(Clone, Debug)]
struct Stage {
    /// Index of the linear layer in the network, and of the step's last layer (its
    /// requantisation, or the linear layer itself).
    layer: usize,
    last: usize,
    /// The accumulator runs as `acc + pre + offset` modulo `4^width`.
    offset: i64,
    width: usize,
    /// Added to the accumulator before requantisation: `2^(shift + bits - 1)` turns a signed
    /// requantisation into the unsigned one of `acc + pre`, whose output is the signed value
    /// plus its zero point `2^(bits - 1)`.
    pre: i64,
    /// `(shift, bits)` of the requantisation after the layer; None for the output layer.
    requant: Option<(u32, u32)>,
    /// The activation this layer reads.
    input: Act,
}

/// An activation on the digit path: `bits`-bit unsigned digits `u` standing for `u - zero`
/// (zero 0 after a ReLU, `2^(bits - 1)` after a signed requantisation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Act {
    bits: u32,
    zero: i64,
}

/// Max-pooling over activations (the output keeps the input's zero point: max is monotone).
#[derive(Clone, Copy, Debug)]
struct Pool {
    layer: usize,
    kernel: usize,
    stride: usize,
    padding: usize,
    bits: u32,
}

/// A step of the digit circuit.
#[derive(Clone, Debug)]
enum Step {
    Linear(Stage),
    Pool(Pool),
}

/// A SHE network compiled for the digit circuit.
#[derive(Clone, Debug)]
pub struct PbsNetwork {
    net: Network,
    steps: Vec<Step>,
    info: PbsInfo,
}

/// What a client needs to encrypt inputs and decode outputs of a network on the PBS path
/// (public: no weight is in it beyond the output offset, a bound the weights imply).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PbsInfo {
    pub input: InputFormat,
    pub output_len: usize,
    /// Base-4 digits per output value.
    pub output_digits: usize,
    /// Subtracted from each decoded output value (the accumulator's offset, or 0 after a
    /// requantisation).
    pub output_offset: i64,
}

/// Most base-4 digits an output may have (an accumulator below 2^44).
const MAX_OUTPUT_DIGITS: usize = 22;

impl PbsInfo {
    /// Checks a description read from a file or a peer before anything is sized by it.
    pub fn validate(&self) -> Result<(), Error> {
        let s = self.input.shape;
        let len = s.c.checked_mul(s.h).and_then(|v| v.checked_mul(s.w));
        let ok = !self.input.signed
            && (1..=MAX_BITS).contains(&self.input.bits)
            && len.is_some_and(|v| v > 0 && v <= MAX_VALUES)
            && self.output_len > 0
            && self.output_len <= MAX_VALUES
            && (1..=MAX_OUTPUT_DIGITS).contains(&self.output_digits)
            && self.output_offset >= 0
            && self.output_offset < 1 << (2 * MAX_OUTPUT_DIGITS);
        if ok {
            Ok(())
        } else {
            Err(Error::Format(format!("PBS model info {self:?}")))
        }
    }
    pub fn input_len(&self) -> usize {
        self.input.shape.len()
    }
    /// Ciphertexts per input value.
    pub fn input_digits(&self) -> usize {
        digits_for(self.input.bits)
    }
    /// Ciphertexts the client sends: the digits of every input value, then one encryption of
    /// zero that every output digit absorbs before its last bootstrap.
    pub fn input_ciphertexts(&self) -> usize {
        self.input_len() * self.input_digits() + 1
    }
    pub fn output_ciphertexts(&self) -> usize {
        self.output_len * self.output_digits
    }

    /// The client's input digits (little-endian base 4 per value).
    pub fn input_values(&self, x: &[i64]) -> Result<Vec<u64>, Error> {
        if x.len() != self.input_len() {
            return Err(Error::InputLength {
                got: x.len(),
                want: self.input_len(),
            });
        }
        let hi = (1i64 << self.input.bits) - 1;
        if let Some(index) = x.iter().position(|v| *v < 0 || *v > hi) {
            return Err(Error::InputRange {
                index,
                value: x[index],
                lo: 0,
                hi,
            });
        }
        let d = self.input_digits();
        Ok(x.iter()
            .flat_map(|v| (0..d).map(move |j| ((*v as u64) >> (2 * j)) & 3))
            .collect())
    }

    /// Output values from the decrypted output digits.
    pub fn output_values(&self, digits: &[u64]) -> Result<Vec<i64>, Error> {
        let d = self.output_digits;
        if digits.len() != self.output_ciphertexts() {
            return Err(Error::CiphertextCount {
                got: digits.len(),
                want: self.output_ciphertexts(),
            });
        }
        Ok(digits
            .chunks(d)
            .map(|c| {
                let v = c
                    .iter()
                    .rev()
                    .fold(0i64, |acc, x| acc * BASE as i64 + (*x & 3) as i64);
                v - self.output_offset
            })
            .collect())
    }

    /// Encrypts the input (seeded ciphertexts, as the client uploads them) and the zero.
    pub fn encrypt_input_compressed(
        &self,
        key: &ClientKey,
        x: &[i64],
    ) -> Result<Vec<CompressedCiphertext>, Error> {
        let mut digits = self.input_values(x)?;
        digits.push(0);
        Ok(digits.iter().map(|d| key.encrypt_compressed(*d)).collect())
    }

    pub fn decrypt_output(&self, key: &ClientKey, out: &[Ciphertext]) -> Result<Vec<i64>, Error> {
        let digits: Vec<u64> = out.iter().map(|c| key.decrypt(c)).collect();
        self.output_values(&digits)
    }
}

/// Lookups of one step of the digit circuit.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct StepCount {
    /// First and last network layer of the step; None for the output refresh.
    pub layers: Option<(usize, usize)>,
    pub kind: &'static str,
    /// Values the step outputs, and digits per value.
    pub outputs: usize,
    pub digits: usize,
    pub pbs: u64,
    pub many: u64,
    /// Bootstrap depth of the step's outputs (from the input).
    pub depth: u32,
}

/// Bootstraps and bootstrap depth of the digit circuit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PbsCount {
    pub pbs: u64,
    /// Of `pbs`, the many-LUT bootstraps (several functions of one input at once).
    pub many: u64,
    pub depth: u32,
    /// Lookups whose input could exceed what a bootstrap reads (zero for a correct circuit).
    pub violations: u64,
}

fn digits_for(bits: u32) -> usize {
    bits.div_ceil(2) as usize
}

/// Fewest base-4 digits that hold every value in 0..=top.
fn width_for(top: i64) -> usize {
    let mut w = 1;
    while (BASE as i128).pow(w as u32) <= top as i128 {
        w += 1;
    }
    w
}

impl PbsNetwork {
    /// Compiles a network whose activations are all on digits: an unsigned input, every
    /// linear layer followed by a requantisation (ReLU or signed) or ending the network, and
    /// max-pooling on requantised activations or the input.
    pub fn new(net: &Network) -> Result<Self, Error> {
        let unsupported = |index: usize, kind: &'static str, reason: &str| Error::Layer {
            index,
            kind,
            reason: format!("not on the PBS path: {reason}"),
        };
        if net.input().signed {
            return Err(Error::Format(
                "the PBS path takes unsigned inputs only".into(),
            ));
        }
        let layers = net.layers();
        let ranges = net.ranges();
        let mut steps = Vec::new();
        // The activation the next step reads; None once the network ended on a raw accumulator.
        let mut act = Some(Act {
            bits: net.input().bits,
            zero: 0,
        });
        let mut i = 0;
        while i < layers.len() {
            let Some(input) = act else {
                return Err(unsupported(
                    i,
                    layers[i].kind(),
                    "nothing may follow a linear layer that ends without a requantisation",
                ));
            };
            match &layers[i] {
                Layer::Flatten => i += 1,
                Layer::MaxPool {
                    kernel,
                    stride,
                    padding,
                } => {
                    steps.push(Step::Pool(Pool {
                        layer: i,
                        kernel: *kernel,
                        stride: *stride,
                        padding: *padding,
                        bits: input.bits,
                    }));
                    i += 1;
                }
                Layer::Dense(lin) | Layer::Conv2d(lin, _) => {
                    zero_point_exact(lin, input)
                        .map_err(|r| unsupported(i, layers[i].kind(), &r))?;
                    let (lo, hi) = ranges[i];
                    let next = layers[i + 1..].iter().position(|l| *l != Layer::Flatten);
                    match next.map(|n| (i + 1 + n, &layers[i + 1 + n])) {
                        Some((j, Layer::Requant { shift, bits, relu })) => {
                            let pre = if *relu { 0 } else { 1i64 << (shift + bits - 1) };
                            let (lo, hi) = (lo + pre, hi + pre);
                            // The offset is a multiple of 2^(shift + bits), so the low bits of
                            // acc + pre + offset are acc + pre's own.
                            let p = 1i64 << (shift + bits);
                            let offset = (-lo + p - 1).div_euclid(p) * p;
                            let top = (hi + offset).max(offset + p);
                            steps.push(Step::Linear(Stage {
                                layer: i,
                                last: j,
                                offset,
                                width: width_for(top),
                                pre,
                                requant: Some((*shift, *bits)),
                                input,
                            }));
                            act = Some(Act {
                                bits: *bits,
                                zero: pre >> shift,
                            });
                            i = j + 1;
                        }
                        _ => {
                            // The output layer, or a linear layer before something other than
                            // a requantisation (refused at the next step).
                            let offset = -lo;
                            steps.push(Step::Linear(Stage {
                                layer: i,
                                last: i,
                                offset,
                                width: width_for(hi + offset),
                                pre: 0,
                                requant: None,
                                input,
                            }));
                            act = None;
                            i = next.map_or(layers.len(), |n| i + 1 + n);
                        }
                    }
                }
                Layer::Requant { .. } => {
                    return Err(unsupported(
                        i,
                        "requant",
                        "a requantisation must follow a linear layer",
                    ))
                }
            }
        }
        let output_digits = match steps.last() {
            None => return Err(Error::Format("the network has no layer to evaluate".into())),
            Some(Step::Linear(Stage {
                requant: None,
                width,
                ..
            })) => *width,
            Some(_) => act.map_or(0, |a| digits_for(a.bits)),
        };
        if !steps.iter().any(|s| matches!(s, Step::Linear(_))) {
            return Err(Error::Format("the network has no linear layer".into()));
        }
        let output_offset = match (steps.last(), act) {
            (Some(Step::Linear(s)), None) => s.offset,
            (_, Some(a)) => a.zero,
            _ => 0,
        };
        let info = PbsInfo {
            input: net.input(),
            output_len: net.output_len(),
            output_digits,
            output_offset,
        };
        info.validate()?;
        Ok(Self {
            net: net.clone(),
            steps,
            info,
        })
    }

    pub fn network(&self) -> &Network {
        &self.net
    }
    /// The client's view of the network.
    pub fn info(&self) -> &PbsInfo {
        &self.info
    }
    pub fn input_digits(&self) -> usize {
        self.info.input_digits()
    }
    pub fn input_ciphertexts(&self) -> usize {
        self.info.input_ciphertexts()
    }
    pub fn output_digits(&self) -> usize {
        self.info.output_digits
    }
    pub fn output_ciphertexts(&self) -> usize {
        self.info.output_ciphertexts()
    }
    pub fn encrypt_input_compressed(
        &self,
        key: &ClientKey,
        x: &[i64],
    ) -> Result<Vec<CompressedCiphertext>, Error> {
        self.info.encrypt_input_compressed(key, x)
    }
    pub fn decrypt_output(&self, key: &ClientKey, out: &[Ciphertext]) -> Result<Vec<i64>, Error> {
        self.info.decrypt_output(key, out)
    }

    /// Runs the digit circuit: `input` holds `input_digits()` canonical digits per value, `zero`
    /// the client's encryption of zero. Returns `output_ciphertexts()` fresh bootstrap outputs.
    pub fn evaluate_with<B: PbsBackend + Sync>(
        &self,
        b: &mut B,
        input: Vec<B::Ct>,
        zero: &B::Ct,
    ) -> Result<Vec<B::Ct>, Error> {
        self.evaluate_steps(b, input, zero, |_, _, _| {})
    }

    /// [`Self::evaluate_with`], calling `on_step(i, backend, activations)` after step `i`.
    fn evaluate_steps<B: PbsBackend + Sync>(
        &self,
        b: &mut B,
        input: Vec<B::Ct>,
        zero: &B::Ct,
        mut on_step: impl FnMut(usize, &B, &[Vec<Item<B::Ct>>]),
    ) -> Result<Vec<B::Ct>, Error> {
        if input.len() + 1 != self.input_ciphertexts() {
            return Err(Error::CiphertextCount {
                got: input.len() + 1,
                want: self.input_ciphertexts(),
            });
        }
        let d = self.input_digits();
        let bits = self.net.input().bits;
        let mut acts: Vec<Vec<Item<B::Ct>>> = input
            .chunks(d)
            .map(|c| {
                c.iter()
                    .enumerate()
                    .map(|(j, ct)| Item::fresh(ct.clone(), digit_max(bits, j)))
                    .collect()
            })
            .collect();
        for (i, step) in self.steps.iter().enumerate() {
            acts = match step {
                Step::Linear(stage) => self.run_stage(b, stage, &acts)?,
                Step::Pool(p) => pool::run(
                    b,
                    p,
                    self.in_shape(p.layer),
                    self.net.shapes()[p.layer],
                    &acts,
                ),
            };
            on_step(i, b, &acts);
        }
        // Every output digit goes through one more bootstrap after absorbing the client's
        // encryption of zero, so none is a trivial ciphertext or carries circuit-dependent noise.
        let z = Item::fresh(zero.clone(), 0);
        let flat: Vec<Item<B::Ct>> = acts.into_iter().flatten().collect();
        Ok(par_map(b, flat.len(), |b, i| {
            let s = Item {
                ct: b.add(&flat[i].ct, &z.ct),
                max: flat[i].max,
                noise: flat[i].noise + z.noise,
            };
            lut(b, &s, 3, |v| v & 3).ct
        }))
    }

    /// One linear layer and its requantisation, every output on its own worker.
    fn run_stage<B: PbsBackend + Sync>(
        &self,
        b: &mut B,
        stage: &Stage,
        acts: &[Vec<Item<B::Ct>>],
    ) -> Result<Vec<Vec<Item<B::Ct>>>, Error> {
        let in_shape = self.in_shape(stage.layer);
        let out_shape = self.net.shapes()[stage.layer];
        let layer = &self.net.layers()[stage.layer];
        let lin = match layer {
            Layer::Dense(lin) | Layer::Conv2d(lin, _) => lin,
            // `new` makes stages of linear layers only.
            l => {
                return Err(Error::Layer {
                    index: stage.layer,
                    kind: l.kind(),
                    reason: "not a linear layer".into(),
                })
            }
        };
        // (weight row, taps) of output o.
        let taps = |o: usize| -> (usize, Vec<(usize, usize)>) {
            match layer {
                Layer::Conv2d(_, g) => (
                    o / (out_shape.h * out_shape.w),
                    conv_taps(g, in_shape, out_shape, o),
                ),
                _ => (
                    o,
                    (0..lin.fan_in).map(|i| (i, o * lin.fan_in + i)).collect(),
                ),
            }
        };
        // Which variants (y or 2y, plain or complemented) each input needs.
        let mut needs = vec![[[false; 2]; 2]; acts.len()];
        for o in 0..out_shape.len() {
            for (i, j) in taps(o).1 {
                if lin.sign[j] != 0 {
                    let k = i32::from(lin.exp[j]) + lin.offset;
                    needs[i][k.rem_euclid(2) as usize][usize::from(lin.sign[j] < 0)] = true;
                }
            }
        }
        let variants: Vec<Variants<B::Ct>> = par_map(b, acts.len(), |b, i| {
            variants(b, &acts[i], stage.input.bits, &needs[i])
        });
        Ok(par_map(b, out_shape.len(), |b, o| {
            let (row, taps) = taps(o);
            let cols = accumulate(b, lin, row, &taps, &variants, stage);
            let digits = reduce(b, cols, stage.width);
            match stage.requant {
                Some((shift, bits)) => requantize(b, &digits, stage, shift, bits),
                None => digits,
            }
        }))
    }

    /// The shape layer `layer` reads.
    fn in_shape(&self, layer: usize) -> Shape {
        match layer {
            0 => self.net.input().shape,
            l => self.net.shapes()[l - 1],
        }
    }

    /// Lookups of every step (a linear layer with its requantisation, a max-pool) and of the
    /// final refresh, from the circuit run on a counter.
    pub fn count_steps(&self) -> Vec<StepCount> {
        let mut c = PbsCounter::default();
        let mut rows = Vec::with_capacity(self.steps.len() + 1);
        let mut seen = (0, 0);
        let input = vec![0u32; self.input_ciphertexts() - 1];
        let out = self.evaluate_steps(&mut c, input, &0, |i, b, acts| {
            let (first, last, kind, len) = match &self.steps[i] {
                Step::Linear(s) => (
                    s.layer,
                    s.last,
                    if s.requant.is_some() {
                        "linear+requant"
                    } else {
                        "linear"
                    },
                    acts.len(),
                ),
                Step::Pool(p) => (p.layer, p.layer, "maxpool", acts.len()),
            };
            rows.push(StepCount {
                layers: Some((first, last)),
                kind,
                outputs: len,
                digits: acts.first().map_or(0, Vec::len),
                pbs: b.pbs - seen.0,
                many: b.many - seen.1,
                depth: acts.iter().flatten().map(|it| it.ct).max().unwrap_or(0),
            });
            seen = (b.pbs, b.many);
        });
        let out = out.unwrap_or_default();
        rows.push(StepCount {
            layers: None,
            kind: "refresh",
            outputs: self.info.output_len,
            digits: self.info.output_digits,
            pbs: c.pbs - seen.0,
            many: c.many - seen.1,
            depth: out.into_iter().max().unwrap_or(0),
        });
        rows
    }

    /// Bootstraps and depth, from the circuit run on a counter.
    pub fn count(&self) -> PbsCount {
        let mut c = PbsCounter::default();
        let input = vec![0u32; self.input_ciphertexts() - 1];
        if let Ok(out) = self.evaluate_with(&mut c, input, &0) {
            c.depth = out.into_iter().max().unwrap_or(0);
        }
        PbsCount {
            pbs: c.pbs,
            many: c.many,
            depth: c.depth,
            violations: c.violations,
        }
    }

    /// The digit circuit run in the clear (every lookup applied to the plain value).
    pub fn evaluate_plain(&self, x: &[i64]) -> Result<Vec<i64>, Error> {
        self.net.check_input(x)?;
        let input = self.info.input_values(x)?;
        let mut plain = PbsPlain::default();
        let out = self.evaluate_with(&mut plain, input, &0)?;
        if plain.violations > 0 {
            return Err(Error::Format(format!(
                "{} lookups read values beyond the bootstrap's range",
                plain.violations
            )));
        }
        self.info.output_values(&out)
    }

    /// Evaluates on the server: the uploaded ciphertexts are checked against the key's
    /// parameters first, since tfhe-rs asserts (panics) on a dimension mismatch.
    pub fn evaluate_encrypted(
        &self,
        backend: &mut PbsEncrypted<'_>,
        input: &[Ciphertext],
    ) -> Result<Vec<Ciphertext>, Error> {
        if input.len() != self.input_ciphertexts() {
            return Err(Error::CiphertextCount {
                got: input.len(),
                want: self.input_ciphertexts(),
            });
        }
        backend.check(input)?;
        let (zero, x) = input.split_last().ok_or(Error::CiphertextCount {
            got: 0,
            want: self.input_ciphertexts(),
        })?;
        self.evaluate_with(backend, x.to_vec(), zero)
    }
}

/// Whether every term of `lin` over the activation `a` splits exactly into the digits' term
/// and a constant: `zero · 2^k` must be an integer for every shift `k` in use.
fn zero_point_exact(lin: &Pow2Linear, a: Act) -> Result<(), String> {
    if a.zero == 0 {
        return Ok(());
    }
    let tz = i32::try_from(a.zero.trailing_zeros()).unwrap_or(0);
    match lin
        .sign
        .iter()
        .zip(&lin.exp)
        .filter(|(s, _)| **s != 0)
        .map(|(_, e)| i32::from(*e) + lin.offset)
        .find(|k| tz + k < 0)
    {
        Some(k) => Err(format!(
            "a shift by {k} of a signed activation (zero point {}) is not exact on digits",
            a.zero
        )),
        None => Ok(()),
    }
}

/// Largest value of digit `j` of a `bits`-bit unsigned value.
fn digit_max(bits: u32, j: usize) -> u64 {
    let left = bits as i64 - 2 * j as i64;
    if left >= 2 {
        3
    } else if left == 1 {
        1
    } else {
        0
    }
}

/// Digits of `y·2^b` (`b` 0 or 1), plain or complemented (`3 - d`), indexed `[b][negated]`.
type Variants<C> = [[Option<Vec<Item<C>>>; 2]; 2];

fn variants<B: PbsBackend>(
    b: &mut B,
    y: &[Item<B::Ct>],
    bits: u32,
    needs: &[[bool; 2]; 2],
) -> Variants<B::Ct> {
    let mut out: Variants<B::Ct> = Default::default();
    if needs[0][0] {
        out[0][0] = Some(y.to_vec());
    }
    if needs[0][1] {
        out[0][1] = Some(y.iter().map(|d| lut(b, d, 3, |v| 3 - (v & 3))).collect());
    }
    for neg in [false, true] {
        if !needs[1][usize::from(neg)] {
            continue;
        }
        // Digit j of 2y takes the low bit of y_j and the high bit of y_{j-1}.
        let f = move |v: u64| {
            let d = ((v & 1) << 1) | ((v >> 3) & 1);
            if neg {
                3 - d
            } else {
                d
            }
        };
        let n = digits_for(bits + 1);
        let zero = trivial(b, 0);
        let digits = (0..n)
            .map(|j| {
                let lo = y.get(j).unwrap_or(&zero);
                let hi = if j == 0 { &zero } else { &y[j - 1] };
                let p = pack(b, lo, hi);
                lut(b, &p, 3, f)
            })
            .collect();
        out[1][usize::from(neg)] = Some(digits);
    }
    out
}

/// The neuron's terms and bias placed in the columns of `acc + offset` modulo `4^width`.
fn accumulate<B: PbsBackend>(
    b: &mut B,
    lin: &Pow2Linear,
    row: usize,
    taps: &[(usize, usize)],
    variants: &[Variants<B::Ct>],
    stage: &Stage,
) -> Vec<Vec<Item<B::Ct>>> {
    let w = stage.width;
    let modulus = (BASE as i128).pow(w as u32);
    let mut cols: Vec<Vec<Item<B::Ct>>> = vec![Vec::new(); w];
    let mut constant = i128::from(lin.bias[row]) + i128::from(stage.pre + stage.offset);
    for &(i, j) in taps {
        if lin.sign[j] == 0 {
            continue;
        }
        let k = i32::from(lin.exp[j]) + lin.offset;
        let neg = lin.sign[j] < 0;
        // The digits hold x + zero: floor((x + zero)·2^k) - zero·2^k is x's term, the second
        // part an integer by [`zero_point_exact`].
        let z = i128::from(shift_value(stage.input.zero, k));
        constant -= if neg { -z } else { z };
        let (a, bit) = (k.div_euclid(2), k.rem_euclid(2) as usize);
        // Built for every (input, variant) a tap uses, so present.
        let Some(digits) = &variants[i][bit][usize::from(neg)] else {
            continue;
        };
        for (jd, d) in digits.iter().enumerate() {
            let col = jd as i64 + i64::from(a);
            if col < 0 || col >= w as i64 {
                continue;
            }
            if neg {
                // -d·4^col = (3 - d)·4^col - 3·4^col.
                constant -= 3 * (BASE as i128).pow(col as u32);
            }
            cols[col as usize].push(d.clone());
        }
    }
    let mut k = constant.rem_euclid(modulus);
    for col in cols.iter_mut() {
        let d = (k % BASE as i128) as u64;
        k /= BASE as i128;
        if d != 0 {
            col.push(trivial(b, d));
        }
    }
    cols
}

/// Carry-save reduction to `width` canonical digits (each at most 3, noise level at most 1):
/// in each column, as many items as fit one bootstrap's input (sum ≤ 15, noise ≤ MAX_NOISE)
/// are added and split into this column's digit and the next column's carry.
fn reduce<B: PbsBackend>(
    b: &mut B,
    mut cols: Vec<Vec<Item<B::Ct>>>,
    width: usize,
) -> Vec<Item<B::Ct>> {
    let mut out = Vec::with_capacity(width);
    for j in 0..width {
        let mut items = std::mem::take(&mut cols[j]);
        // Quiet items first, so a group holds as many as the noise budget allows.
        items.sort_by_key(|it| std::cmp::Reverse((it.noise, it.max)));
        let digit = loop {
            match items.len() {
                0 => break trivial(b, 0),
                1 if items[0].max < BASE && items[0].noise <= 1 => {
                    break items.pop().unwrap_or_else(|| trivial(b, 0))
                }
                _ => {}
            }
            // A group below SPACE / 2 gives digit and carry from one many-LUT bootstrap, a
            // larger one needs two: take the small group when it removes at least half as many
            // items per bootstrap.
            let small = j + 1 < width && {
                let (wide, narrow) = (group_len(&items, SPACE), group_len(&items, SPACE / 2));
                narrow >= 3 && 2 * (narrow - 2) >= wide.saturating_sub(2)
            };
            let bound = if small { SPACE / 2 } else { SPACE };
            let mut group: Vec<Item<B::Ct>> = Vec::new();
            let (mut max, mut noise) = (0, 0);
            let mut rest = Vec::with_capacity(items.len());
            while let Some(it) = items.pop() {
                if max + it.max < bound && noise + it.noise <= MAX_NOISE {
                    max += it.max;
                    noise += it.noise;
                    group.push(it);
                } else {
                    rest.push(it);
                }
            }
            items = rest;
            items.reverse();
            let sum = if group.len() == 1 {
                // Nothing joins it: an item is too noisy or too large, so that one is split.
                items.append(&mut group);
                let noisiest = (0..items.len())
                    .max_by_key(|i| (items[*i].noise, items[*i].max))
                    .unwrap_or(0);
                items.swap_remove(noisiest)
            } else {
                let mut it = group.into_iter();
                let Some(mut sum) = it.next() else {
                    continue;
                };
                for t in it {
                    sum = Item {
                        ct: b.add(&sum.ct, &t.ct),
                        max: sum.max + t.max,
                        noise: sum.noise + t.noise,
                    };
                }
                if sum.max < BASE {
                    // Still a digit: the sum is free, bootstrapped later only if it must be.
                    items.push(sum);
                    continue;
                }
                sum
            };
            if sum.max >= BASE && sum.max < SPACE / 2 && j + 1 < width {
                let (digit, carry) = lut2(
                    b,
                    &sum,
                    (sum.max.min(3), &|v| v % BASE),
                    (sum.max / BASE, &|v| v / BASE),
                );
                cols[j + 1].push(carry);
                items.push(digit);
                continue;
            }
            if sum.max >= BASE && j + 1 < width {
                let carry = lut(b, &sum, sum.max / BASE, |v| v / BASE);
                cols[j + 1].push(carry);
            }
            items.push(lut(b, &sum, sum.max.min(3), |v| v % BASE));
        };
        out.push(digit);
    }
    out
}

/// How many of `items` (taken from the back, as [`reduce`] takes them) one group below `bound`
/// within the noise budget holds.
fn group_len<C>(items: &[Item<C>], bound: u64) -> usize {
    let (mut max, mut noise, mut n) = (0, 0, 0);
    for it in items.iter().rev() {
        if max + it.max < bound && noise + it.noise <= MAX_NOISE {
            max += it.max;
            noise += it.noise;
            n += 1;
        }
    }
    n
}

/// ReLU and requantisation of `x = acc + offset` (canonical digits): the low bits give
/// `acc >> shift` while `0 <= acc < 2^(shift+bits)`; a comparison chain of the high digits
/// with `offset` and `offset + 2^(shift+bits)` says whether acc fell below or above.
fn requantize<B: PbsBackend>(
    b: &mut B,
    x: &[Item<B::Ct>],
    stage: &Stage,
    shift: u32,
    bits: u32,
) -> Vec<Item<B::Ct>> {
    let l = shift + bits;
    let g = (l / 2) as usize;
    let t1 = (stage.offset >> (2 * g)) as u64;
    let t2 = ((stage.offset + (1i64 << l)) >> (2 * g)) as u64;
    let digit = |t: u64, j: usize| (t >> (2 * j)) & 3;
    // state bit 0: high part ≥ t1 so far; bit 1: ≥ t2 (prefix comparisons from the bottom).
    let mut state: Option<Item<B::Ct>> = None;
    for (n, xj) in x.iter().enumerate().skip(g) {
        let (a, c) = (digit(t1, n - g), digit(t2, n - g));
        let f = move |v: u64| {
            let d = v & 3;
            let (p1, p2) = ((v >> 2) & 1, (v >> 3) & 1);
            let ge = |t: u64, p: u64| u64::from(d > t || (d == t && p == 1));
            ge(a, p1) | (ge(c, p2) << 1)
        };
        state = Some(match &state {
            None => lut(b, xj, 3, move |v| f(v | 0b1100)),
            Some(s) => {
                let p = pack(b, xj, s);
                lut(b, &p, 3, f)
            }
        });
    }
    let zero = trivial(b, 0);
    let state = state.unwrap_or_else(|| trivial(b, 1));
    (0..digits_for(bits))
        .map(|j| {
            let p = shift as usize + 2 * j;
            let src = if p.is_multiple_of(2) {
                x.get(p / 2).cloned().unwrap_or_else(|| zero.clone())
            } else {
                let lo = x.get(p / 2).unwrap_or(&zero);
                let hi = x.get(p / 2 + 1).unwrap_or(&zero);
                let q = pack(b, lo, hi);
                lut(b, &q, 3, |v| ((v & 3) >> 1) | ((v >> 2) & 1) << 1)
            };
            let mask = (1u64 << (bits as usize - 2 * j).min(2)) - 1;
            let q = pack(b, &src, &state);
            lut(b, &q, mask, move |v| match v >> 2 {
                0 => 0,
                1 => (v & 3) & mask,
                _ => mask,
            })
        })
        .collect()
}

/// `f` over 0..n on all cores, each worker on a fork of `b`.
fn par_map<B, R, F>(b: &mut B, n: usize, f: F) -> Vec<R>
where
    B: PbsBackend + Sync,
    R: Send,
    F: Fn(&mut B, usize) -> R + Sync,
{
    par_fork(b, n, B::fork, B::absorb, f)
}

/// The digit circuit in the clear; records any lookup input a bootstrap could not read.
#[derive(Clone, Copy, Debug, Default)]
pub struct PbsPlain {
    pub violations: u64,
}

impl PbsBackend for PbsPlain {
    type Ct = u64;
    fn add(&mut self, a: &u64, b: &u64) -> u64 {
        a + b
    }
    fn scale(&mut self, a: &u64, c: u8) -> u64 {
        a * u64::from(c)
    }
    fn trivial(&mut self, v: u64) -> u64 {
        v
    }
    fn lut(&mut self, a: &u64, f: &dyn Fn(u64) -> u64) -> u64 {
        if *a >= SPACE {
            self.violations += 1;
        }
        f(a % SPACE)
    }
    fn lut_many(&mut self, a: &u64, fs: &[&dyn Fn(u64) -> u64]) -> Vec<u64> {
        if fs.is_empty() || *a >= SPACE / fs.len() as u64 {
            self.violations += 1;
        }
        fs.iter().map(|f| f(a % SPACE)).collect()
    }
    fn fork(&self) -> Self {
        Self::default()
    }
    fn absorb(&mut self, other: Self) {
        self.violations += other.violations;
    }
    fn violation(&mut self) {
        self.violations += 1;
    }
}

/// Counts bootstraps; a wire is its bootstrap depth.
#[derive(Clone, Copy, Debug, Default)]
pub struct PbsCounter {
    pub pbs: u64,
    pub many: u64,
    pub depth: u32,
    pub violations: u64,
}

impl PbsBackend for PbsCounter {
    type Ct = u32;
    fn add(&mut self, a: &u32, b: &u32) -> u32 {
        *a.max(b)
    }
    fn scale(&mut self, a: &u32, _c: u8) -> u32 {
        *a
    }
    fn trivial(&mut self, _v: u64) -> u32 {
        0
    }
    fn lut(&mut self, a: &u32, _f: &dyn Fn(u64) -> u64) -> u32 {
        self.pbs += 1;
        a + 1
    }
    fn lut_many(&mut self, a: &u32, fs: &[&dyn Fn(u64) -> u64]) -> Vec<u32> {
        self.pbs += 1;
        self.many += 1;
        vec![a + 1; fs.len()]
    }
    fn fork(&self) -> Self {
        Self::default()
    }
    fn absorb(&mut self, other: Self) {
        self.pbs += other.pbs;
        self.many += other.many;
        self.depth = self.depth.max(other.depth);
        self.violations += other.violations;
    }
    fn violation(&mut self) {
        self.violations += 1;
    }
}

/// Runs lookups on shortint ciphertexts with the server key; forks share a progress counter.
#[derive(Clone)]
pub struct PbsEncrypted<'k> {
    key: &'k ServerKey,
    done: Arc<AtomicU64>,
}

impl<'k> PbsEncrypted<'k> {
    /// Checks that the key has the digit circuit's moduli and noise budget (a client could send
    /// a key of another parameter set).
    pub fn new(key: &'k ServerKey) -> Result<Self, Error> {
        if key.message_modulus.0 != BASE
            || key.carry_modulus.0 != SPACE / BASE
            || key.max_noise_level.get() < MAX_NOISE
        {
            return Err(Error::Format(format!(
                "server key has message modulus {}, carry modulus {}, noise bound {}; the PBS \
                 path needs 4, 4 and at least {MAX_NOISE}",
                key.message_modulus.0,
                key.carry_modulus.0,
                key.max_noise_level.get()
            )));
        }
        Ok(Self {
            key,
            done: Arc::new(AtomicU64::new(0)),
        })
    }
    pub fn bootstraps(&self) -> u64 {
        self.done.load(Ordering::Relaxed)
    }
    pub fn progress(&self) -> Arc<AtomicU64> {
        Arc::clone(&self.done)
    }
    /// Ciphertexts must match the key's dimension, moduli and atomic pattern.
    fn check(&self, cts: &[Ciphertext]) -> Result<(), Error> {
        let dim = self.key.ciphertext_lwe_dimension();
        for (i, c) in cts.iter().enumerate() {
            if c.ct.lwe_size().to_lwe_dimension() != dim
                || c.ct.ciphertext_modulus() != self.key.ciphertext_modulus
                || c.message_modulus != self.key.message_modulus
                || c.carry_modulus != self.key.carry_modulus
                || c.atomic_pattern != self.key.atomic_pattern.kind()
            {
                return Err(Error::Format(format!(
                    "ciphertext {i} does not match the server key's parameters"
                )));
            }
        }
        Ok(())
    }
}

impl PbsBackend for PbsEncrypted<'_> {
    type Ct = Ciphertext;
    fn add(&mut self, a: &Ciphertext, b: &Ciphertext) -> Ciphertext {
        self.key.unchecked_add(a, b)
    }
    fn scale(&mut self, a: &Ciphertext, c: u8) -> Ciphertext {
        self.key.unchecked_scalar_mul(a, c)
    }
    fn trivial(&mut self, v: u64) -> Ciphertext {
        self.key.create_trivial(v)
    }
    fn lut(&mut self, a: &Ciphertext, f: &dyn Fn(u64) -> u64) -> Ciphertext {
        let table = self.key.generate_lookup_table(f);
        self.done.fetch_add(1, Ordering::Relaxed);
        self.key.apply_lookup_table(a, &table)
    }
    fn lut_many(&mut self, a: &Ciphertext, fs: &[&dyn Fn(u64) -> u64]) -> Vec<Ciphertext> {
        let table = self.key.generate_many_lookup_table(fs);
        self.done.fetch_add(1, Ordering::Relaxed);
        self.key.apply_many_lookup_table(a, &table)
    }
    fn fork(&self) -> Self {
        self.clone()
    }
    fn absorb(&mut self, _other: Self) {}
}

/// The client's shortint key and the seeded server key it uploads.
pub fn generate_pbs_client_keys() -> (ClientKey, CompressedServerKey) {
    let ck = ClientKey::new(PBS_PARAMETERS);
    let sk = CompressedServerKey::new(&ck);
    (ck, sk)
}
