//! # secinfer-ss
//!
//! Additive secret sharing over Z_{2^l} (l ≤ 64) with per-tensor bitwidth and fixed-point scale,
//! the SIRNN / CrypTFlow2 building blocks (millionaires', wrap, MSB, AND, B2A, multiplexer,
//! extensions, truncations, products with non-uniform bitwidths, lookup tables, digit
//! decomposition, reciprocal, ReLU), and the math functions: SIRNN's exp / sigmoid / tanh
//! baselines and OPAF's exp, exp on negative inputs, sigmoid and tanh (DESIGN.md §5).
//!
//! All correlations come from `secinfer-ot`'s pooled OT: random COTs in both directions,
//! made in the offline phase ([`Ctx::preprocess`], sized by a dry run: [`plan_for`]) by IKNP or
//! Ferret, and derandomised online (1 bit per 1-of-2 OT plus its payload; 1-of-N OTs from
//! ⌈log2 N⌉ of them). An insecure dealer exists only behind the `test-dealer` feature.
#![deny(unsafe_code)]

pub mod blocks;
mod ctx;
mod error;
pub mod math;
mod ot_real;
pub mod reveal;
pub mod ring;
pub mod ulp;

pub use ctx::{BlockStat, Ctx, DryChannel, Party, Plan};
pub use secinfer_ot::{CotSource, FerretParams};

/// Counts the OTs `f` consumes on `party`'s side (a dry run: no peer, no traffic, outputs are
/// meaningless). Sizes the offline phase: pass the result to [`Ctx::preprocess`].
pub fn plan_for<T>(
    party: Party,
    f: impl FnOnce(&mut Ctx, &mut DryChannel) -> Result<T>,
) -> Result<Plan> {
    let mut ctx = Ctx::dry_run(party);
    let mut ch = DryChannel::new();
    f(&mut ctx, &mut ch)?;
    Ok(ctx.consumed())
}
pub use error::{Result, SsError};
pub use ring::{Fixed, Share};
