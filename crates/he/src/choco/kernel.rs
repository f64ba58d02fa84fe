//! One interface over the two server-side kernels, so a session schedules Dense and Conv2d
//! layers alike: what the client packs and extracts, what the server encodes and evaluates.
use super::conv::{ConvPlan, ConvPrepared};
use super::dense::{DensePlan, Prepared};
use crate::eval::Evaluator;
use crate::HeError;

/// A linear layer's kernel plan (public).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Kernel {
    Dense(DensePlan),
    Conv(ConvPlan),
}

/// A kernel's encoded weights (server state; secret: no `Debug`).
pub enum KernelWeights<P> {
    Dense(Prepared<P>),
    Conv(ConvPrepared<P>),
}

impl Kernel {
    /// Ciphertexts the client uploads per plaintext prime.
    pub fn in_cts(&self) -> usize {
        match self {
            Kernel::Dense(p) => p.col_chunks,
            Kernel::Conv(p) => p.in_cts,
        }
    }

    /// Ciphertexts the server returns per plaintext prime.
    pub fn out_cts(&self) -> usize {
        match self {
            Kernel::Dense(p) => p.out_chunks,
            Kernel::Conv(p) => p.out_cts,
        }
    }

    /// Products summed into one output (bounds the accumulator).
    pub fn fan_in(&self) -> usize {
        match self {
            Kernel::Dense(p) => p.cols,
            Kernel::Conv(p) => p.fan_in(),
        }
    }

    /// Outputs of the layer.
    pub fn outputs(&self) -> usize {
        match self {
            Kernel::Dense(p) => p.rows,
            Kernel::Conv(p) => p.outputs(),
        }
    }

    /// `(row_len, slots)` of the ciphertexts the kernel runs on.
    pub fn slot_layout(&self) -> (usize, usize) {
        match self {
            Kernel::Dense(p) => (p.row_len, p.slots),
            Kernel::Conv(p) => (p.row_len, p.slots),
        }
    }

    /// Weights [`Kernel::prepare`] reads.
    pub fn weights(&self) -> usize {
        match self {
            Kernel::Dense(p) => p.rows * p.cols,
            Kernel::Conv(p) => p.out_channels * p.fan_in(),
        }
    }

    /// Encoded plaintexts the server keeps per plaintext prime (at most; zeros are skipped).
    pub fn plaintexts(&self) -> usize {
        match self {
            Kernel::Dense(p) => p.out_chunks * p.col_chunks * p.m,
            Kernel::Conv(p) => p.plaintexts(),
        }
    }

    pub fn rotation_steps(&self) -> Vec<usize> {
        match self {
            Kernel::Dense(p) => p.rotation_steps(),
            Kernel::Conv(p) => p.rotation_steps(),
        }
    }

    pub fn pack_input(&self, x: &[u64]) -> Result<Vec<Vec<u64>>, HeError> {
        match self {
            Kernel::Dense(p) => p.pack_input(x),
            Kernel::Conv(p) => p.pack_input(x),
        }
    }

    pub fn extract(&self, outs: &[Vec<u64>]) -> Result<Vec<u64>, HeError> {
        match self {
            Kernel::Dense(p) => p.extract(outs),
            Kernel::Conv(p) => p.extract(outs),
        }
    }

    /// One value per output → the output ciphertexts' slot vectors (for the bias).
    pub fn output_layout(&self, vals: &[u64]) -> Result<Vec<Vec<u64>>, HeError> {
        match self {
            Kernel::Dense(p) => p.output_layout(vals),
            Kernel::Conv(p) => p.output_layout(vals),
        }
    }

    /// Per output ciphertext, which slots hold an output (the rest are hidden by
    /// [`super::add_plain_hiding`]).
    pub fn output_slots(&self) -> Result<Vec<Vec<bool>>, HeError> {
        Ok(self
            .output_layout(&vec![1; self.outputs()])?
            .into_iter()
            .map(|v| v.into_iter().map(|x| x == 1).collect())
            .collect())
    }

    /// Encodes the weights: the row-major matrix for Dense, the `co × c × kh × kw` kernel for
    /// Conv2d.
    pub fn prepare<E: Evaluator>(
        &self,
        ev: &E,
        w: &[i64],
    ) -> Result<KernelWeights<E::Pt>, HeError> {
        Ok(match self {
            Kernel::Dense(p) => KernelWeights::Dense(p.prepare(ev, w)?),
            Kernel::Conv(p) => KernelWeights::Conv(p.prepare(ev, w)?),
        })
    }

    pub fn eval<E: Evaluator>(
        &self,
        ev: &E,
        w: &KernelWeights<E::Pt>,
        inputs: &[E::Ct],
    ) -> Result<Vec<E::Ct>, HeError> {
        match (self, w) {
            (Kernel::Dense(p), KernelWeights::Dense(w)) => p.eval(ev, w, inputs),
            (Kernel::Conv(p), KernelWeights::Conv(w)) => p.eval(ev, w, inputs),
            _ => Err(HeError::Shape("weights encoded for another kernel".into())),
        }
    }
}
