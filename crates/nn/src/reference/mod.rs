//! The plaintext fixed-point reference: the definition of what every secure run computes,
//! integer for integer (docs/model-format.md, "Fixed-point semantics").
//!
//! [`GraphReference`] evaluates any model graph; [`Reference`] is CryptoGRU's Embedding → GRU →
//! Dense model in the form the secure GRU protocol reads. Both use one arithmetic ([`Arith`]).
//! The smooth activations (sigmoid, tanh) are a parameter: [`CircuitActivations`] are the
//! functions the garbled circuits compute, and so the definition the secure runs are held to;
//! [`ExactActivations`] are the correctly rounded functions, for measuring that gap.
pub mod fastgrnn;
mod graph;
mod gru;

pub use crate::layers::gru::circuits::CircuitActivations;
pub(crate) use graph::pool;
pub use graph::{GraphReference, Input, QuantizedGraph};
pub use gru::{QuantizedModel, Reference};

use crate::error::{NnError, Result};
use crate::model::{ActFormat, Candidate, FixedPointConfig, Format};

/// The smooth activations on already-saturated inputs: `x` in `f.input` → unsaturated integer in
/// `f.output`. The reference uses [`ExactActivations`]; a secure runtime plugs in the function its
/// circuit computes so the reference predicts its output bit for bit.
pub trait SmoothActivations {
    fn sigmoid(&self, x: i64, f: ActFormat) -> i64;
    fn tanh(&self, x: i64, f: ActFormat) -> i64;
}

/// `floor(f(x / 2^fi) · 2^fo + 1/2)` with f evaluated in binary64, as the spec says.
#[derive(Clone, Copy, Debug, Default)]
pub struct ExactActivations;

impl SmoothActivations for ExactActivations {
    fn sigmoid(&self, x: i64, f: ActFormat) -> i64 {
        let r = x as f64 / (1u64 << f.input.scale) as f64;
        let s = 1.0 / (1.0 + (-r).exp());
        (s * (1u64 << f.output.scale) as f64 + 0.5).floor() as i64
    }
    fn tanh(&self, x: i64, f: ActFormat) -> i64 {
        let r = x as f64 / (1u64 << f.input.scale) as f64;
        (r.tanh() * (1u64 << f.output.scale) as f64 + 0.5).floor() as i64
    }
}

/// What the reference saw: wraps of named intermediates, saturated weights and activations.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    pub overflows: u64,
    pub saturated_weights: u64,
    pub saturated_activations: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ActKind {
    Sigmoid,
    Tanh,
    Relu,
}

/// The fixed-point arithmetic every layer of the reference is made of, in main format `main`.
pub(crate) struct Arith<'a, A> {
    pub main: Format,
    pub acts: &'a A,
    pub counters: &'a mut Counters,
}

impl<A: SmoothActivations> Arith<'_, A> {
    /// `wrap(x)`, counting an overflow when it changes x.
    pub fn wrap(&mut self, x: i64) -> i64 {
        let y = self.main.wrap(x);
        self.counters.overflows += (y != x) as u64;
        y
    }

    /// `wrap(acc ≫ F + b)`: a product's accumulator back in the main format.
    pub fn requantize(&mut self, acc: i64, b: i64) -> i64 {
        self.wrap((acc >> self.main.scale) + b)
    }

    /// `lin(W, x, b)_i = wrap((Σ_j W_ij x_j) ≫ F + b_i)` for W of `b.len()` × x.len().
    pub fn linear(&mut self, w: &[i64], b: &[i64], x: &[i64]) -> Vec<i64> {
        let cols = x.len();
        w.chunks_exact(cols)
            .zip(b)
            .map(|(row, bi)| {
                let acc: i64 = row.iter().zip(x).map(|(a, b)| a * b).sum();
                self.requantize(acc, *bi)
            })
            .collect()
    }

    /// `act(kind, x)` in the main format: rescale, saturate, apply, saturate, shift back.
    pub fn activation(&mut self, kind: ActKind, x: i64, af: ActFormat) -> i64 {
        let main = self.main;
        let xa = x >> (main.scale - af.input.scale);
        let xs = af.input.clamp(xa);
        self.counters.saturated_activations += (xs != xa) as u64;
        let y = match kind {
            ActKind::Relu => xs.max(0),
            ActKind::Sigmoid => self.acts.sigmoid(xs, af),
            ActKind::Tanh => self.acts.tanh(xs, af),
        };
        let ys = af.output.clamp(y);
        self.counters.saturated_activations += (ys != y) as u64;
        ys << (main.scale - af.output.scale)
    }

    /// One GRU step (docs/model-format.md, fixed-point rule 6) from the input projection `gi`
    /// (3H values, rows r, z, n) and the state `h`.
    pub fn gru_step(
        &mut self,
        fp: &FixedPointConfig,
        candidate: Candidate,
        w_hh: &[i64],
        b_hh: &[i64],
        gi: &[i64],
        h: &[i64],
    ) -> Vec<i64> {
        let hd = h.len();
        let f = self.main.scale;
        let gh = self.linear(w_hh, b_hh, h);
        let (sf, cf) = (fp.sigmoid_format(), fp.candidate_format());
        let cand = match candidate {
            Candidate::Tanh => ActKind::Tanh,
            Candidate::Relu => ActKind::Relu,
        };
        let mut out = Vec::with_capacity(hd);
        for i in 0..hd {
            let ar = self.wrap(gi[i] + gh[i]);
            let r = self.activation(ActKind::Sigmoid, ar, sf);
            let az = self.wrap(gi[hd + i] + gh[hd + i]);
            let z = self.activation(ActKind::Sigmoid, az, sf);
            let rh = self.wrap((r * gh[2 * hd + i]) >> f);
            let an = self.wrap(gi[2 * hd + i] + rh);
            let n = self.activation(cand, an, cf);
            let d = self.wrap(h[i] - n);
            let zd = self.wrap((z * d) >> f);
            out.push(self.wrap(n + zd));
        }
        out
    }
}

/// Index of the largest value, lowest index on ties.
pub fn argmax(v: &[i64]) -> usize {
    let mut best = 0;
    for (i, x) in v.iter().enumerate() {
        if *x > v[best] {
            best = i;
        }
    }
    best
}

/// Checks token ids against the vocabulary size.
pub fn check_tokens(tokens: &[u32], vocab: usize) -> Result<()> {
    match tokens.iter().position(|t| *t as usize >= vocab) {
        Some(i) => Err(NnError::Input(format!(
            "token {} at position {i} is not below the vocabulary size {vocab}",
            tokens[i]
        ))),
        None => Ok(()),
    }
}
