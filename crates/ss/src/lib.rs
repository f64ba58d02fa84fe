//! # secinfer-ss
//!
//! Additive secret sharing over Z_{2^l} (l ≤ 64) with per-tensor bitwidth and fixed-point scale,
//! the SIRNN / CrypTFlow2 building blocks (millionaires', wrap, MSB, AND, B2A, multiplexer,
//! extensions, truncations, products with non-uniform bitwidths, lookup tables, digit
//! decomposition, reciprocal, ReLU), and the math functions: SIRNN's exp / sigmoid / tanh
//! baselines and OPAF's exp, exp on negative inputs, sigmoid and tanh (DESIGN.md §5).
//!
//! All correlations come from `secinfer-ot`'s pooled OT: random COTs in both directions,
//! made in the offline phase ([`Ctx::preprocess`], sized by a dry run: [`plan_for`], or for an
//! element-wise function by dry runs of 1 and 2 elements: [`plan_for_elementwise`]) by IKNP,
//! SoftSpokenOT or Ferret, and derandomised online (1 bit per 1-of-2 OT plus its payload;
//! 1-of-N OTs from ⌈log2 N⌉ of them). The millionaires' comparisons use 4-bit leaves by default
//! ([`blocks::MILL_LEAF_BITS_TRIPLES`]). An insecure dealer exists only behind the
//! `test-dealer` feature. [`session::run_math`] runs a whole two-party evaluation of one
//! function (setup, offline, online, outputs to the client): the entry point of `bench math`.
//! `secinfer_net::flight` runs any of these protocols flight by flight with no channel between
//! the parties (`tests/flight.rs`).
#![deny(unsafe_code)]

pub mod blocks;
mod ctx;
mod error;
pub mod math;
pub mod matmul;
mod ot_real;
pub mod reveal;
pub mod ring;
pub mod session;
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
/// [`plan_for`] of an element-wise protocol on `n` elements from two tiny dry runs: when the
/// plan of 2 elements is twice the plan of 1 (no per-call constant; every batched protocol here
/// costs the same OTs per element), the plan of `n` is `n` times the plan of 1; otherwise (a
/// protocol with a per-call term) the full dry run on `n` elements. `f(ctx, ch, m)` runs the
/// protocol on `m` elements. The full dry run replays the whole function's local work on `n`
/// dummy elements (P0's 1-of-2^k table rows, the products' payloads: tens of ms at
/// n = 2^14, different for the two parties), which the peer's offline phase then waits for.
pub fn plan_for_elementwise<T>(
    party: Party,
    n: usize,
    f: impl Fn(&mut Ctx, &mut DryChannel, usize) -> Result<T>,
) -> Result<Plan> {
    if n <= 2 {
        return plan_for(party, |c, ch| f(c, ch, n));
    }
    let one = plan_for(party, |c, ch| f(c, ch, 1))?;
    let two = plan_for(party, |c, ch| f(c, ch, 2))?;
    match (one.scaled(2), one.scaled(n as u64)) {
        (Some(d), Some(all)) if d == two => Ok(all),
        _ => plan_for(party, |c, ch| f(c, ch, n)),
    }
}
pub use error::{Result, SsError};
pub use ring::{Fixed, Share};
pub use secinfer_core::ErrorKind;
