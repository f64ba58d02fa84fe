//! The cost model behind `--tfhe-mode auto`: recorded single-core seconds per boolean gate
//! bootstrap and per shortint lookup (both tfhe-rs default 128-bit parameter sets), measured
//! with `cargo run --release -p secinfer-tfhe --example cost` on this project's 2-core machine
//! while other builds ran (loaded; the ratio is what the choice uses).
//!
//! The choice is per network, not per layer: a boolean ciphertext and a shortint digit are
//! encryptions under different keys and parameters, and tfhe-rs has no key switch between
//! them, so one network runs entirely on one path.
use crate::counter::Counter;
use crate::pbs::PbsCount;

/// Seconds per boolean gate bootstrap (tfhe-rs `DEFAULT_PARAMETERS`, one core).
pub const GATE_S: f64 = 0.0423;
/// Seconds per shortint lookup (`PARAM_MESSAGE_2_CARRY_2_KS_PBS`, one core).
pub const PBS_S: f64 = 0.0455;

/// Which evaluator runs a network.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Path {
    Gates,
    Pbs,
}

/// Predicted single-core seconds of each path.
pub fn predict(gates: &Counter, pbs: &PbsCount) -> (f64, f64) {
    (gates.pbs() as f64 * GATE_S, pbs.pbs as f64 * PBS_S)
}

/// The path predicted to be faster.
pub fn choose(gates: &Counter, pbs: &PbsCount) -> Path {
    let (g, p) = predict(gates, pbs);
    if p < g {
        Path::Pbs
    } else {
        Path::Gates
    }
}
