//! # secinfer-ss
//!
//! Additive secret sharing over Z_{2^l} (l ≤ 64) with per-tensor bitwidth and fixed-point scale,
//! the SIRNN / CrypTFlow2 building blocks (millionaires', wrap, MSB, AND, B2A, multiplexer,
//! extensions, truncations, products with non-uniform bitwidths, lookup tables, digit
//! decomposition, reciprocal, ReLU), and the math functions: SIRNN's exp / sigmoid / tanh
//! baselines and OPAF's exp, exp on negative inputs, sigmoid and tanh (DESIGN.md §5).
//!
//! All correlations come from OT extension (`secinfer-ot`); an insecure dealer exists only behind
//! the `test-dealer` feature.
#![deny(unsafe_code)]

pub mod blocks;
mod ctx;
mod error;
pub mod math;
mod ot_real;
pub mod reveal;
pub mod ring;
pub mod ulp;

pub use ctx::{BlockStat, Ctx, Party};
pub use error::{Result, SsError};
pub use ring::{Fixed, Share};
