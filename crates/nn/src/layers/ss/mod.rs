//! Family `ss`: layers on additive shares over Z_{2^l} (OPAF, SIRNN). Linear layers with a
//! server matrix are SIRNN's OT products (`secinfer_ss::matmul`); the smooth activations are
//! OPAF's sigmoid and tanh or SIRNN's, selected at run time ([`Impl`]); truncations are exact
//! arithmetic shifts, so the linear parts match the reference bit for bit.
//!
//! * [`fastgrnn`]: FastGRNN → Dense → argmax, the model of OPAF's Table XI.
pub mod fastgrnn;

pub use fastgrnn::{
    random_input, random_params, run_fastgrnn, FastGrnnRun, FastGrnnShape, SsOptions,
};
pub use secinfer_ss::math::Impl;
