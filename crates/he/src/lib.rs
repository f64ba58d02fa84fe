//! secinfer-he: a lean RLWE/BFV layer on `tfhe-ntt` (special-prime key switching, hoisted
//! rotations, modulus switching, noise flooding; for primes below 2^30 an own AVX2 NTT,
//! `ntt32`, whose module docs say why) and the GAZELLE / GALA linear kernels that
//! turn the client's encrypted vector into additive Z_t shares of W·x or of a convolution.
//!
//! Share convention (all kernels): the server samples a uniform mask r (mod t) and returns
//! Enc(y − r), re-randomised and modulus-switched; the client decrypts it into its share
//! `y − r`, the server keeps `r`. So **client share + server share ≡ y (mod t)**. For GALA the
//! same holds after both parties run the plaintext rotate-and-sum on their share.

// `u64::is_multiple_of` needs Rust 1.87; the workspace's rust-version is 1.85.
#![allow(clippy::manual_is_multiple_of)]

#[macro_use]
mod dispatch;
pub mod arith;
/// Measurement helpers of the CLI's HE benches (feature `bench`; not the library's API).
#[cfg(feature = "bench")]
#[doc(hidden)]
pub mod bench;
pub mod bfv;
pub mod choco;
mod decimated;
pub mod eval;
pub mod kernels;
mod ks32;
mod ntt32;
pub mod params;

pub use bfv::{
    Ciphertext, Decomposed, ExtCiphertext, GaloisKeys, Plaintext, PublicKey, Response, SecretKey,
    SeededCiphertext, SparseResponse,
};
pub use eval::{CountingEvaluator, Evaluator, HeEvaluator, OpCounts, PlainEvaluator};
pub use kernels::{
    conv, gala, gazelle, naive, ConvMethod, ConvPlan, Hoisting, MatVecMethod, MatVecPlan,
};
pub use params::{Encoding, ParamSet, Params};
pub use secinfer_core::ErrorKind;

/// Errors of the HE layer.
#[derive(Debug, thiserror::Error)]
pub enum HeError {
    #[error("unknown parameter set {0:?}")]
    UnknownParamSet(String),
    #[error("invalid parameters: {0}")]
    InvalidParams(String),
    #[error("insecure parameters: log2(QP) = {log_qp:.1} exceeds the HE Standard bound {max}")]
    InsecureParams { log_qp: f64, max: f64 },
    #[error("no NTT-friendly prime found")]
    NoPrime,
    #[error("wrong length: expected {expected} bytes/values, got {got}")]
    WrongLength { expected: usize, got: usize },
    #[error("value out of range at index {index}: {value} ≥ modulus {modulus}")]
    OutOfRange {
        index: usize,
        value: u64,
        modulus: u64,
    },
    #[error("bad header: {0}")]
    BadHeader(String),
    #[error("missing Galois key for element {0}")]
    MissingGaloisKey(usize),
    #[error("operation needs a SIMD parameter set")]
    NotSimd,
    #[error("shape unsupported: {0}")]
    Shape(String),
    #[error("noise budget: {0}")]
    NoiseBudget(String),
}

impl HeError {
    /// The class of this failure: bytes that decode to nothing valid are
    /// [`ErrorKind::Malformed`], unsupported parameters and shapes
    /// [`ErrorKind::InvalidArgument`], an exhausted noise budget [`ErrorKind::Crypto`].
    pub fn kind(&self) -> ErrorKind {
        match self {
            HeError::WrongLength { .. } | HeError::OutOfRange { .. } | HeError::BadHeader(_) => {
                ErrorKind::Malformed
            }
            HeError::UnknownParamSet(_)
            | HeError::InvalidParams(_)
            | HeError::InsecureParams { .. }
            | HeError::NoPrime
            | HeError::MissingGaloisKey(_)
            | HeError::NotSimd
            | HeError::Shape(_) => ErrorKind::InvalidArgument,
            HeError::NoiseBudget(_) => ErrorKind::Crypto,
        }
    }
}
