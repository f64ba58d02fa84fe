//! # secinfer-gc
//!
//! Boolean circuits for the nonlinear half of the HE–GC pipeline (GAZELLE, CryptoGRU):
//!
//! * [`backend`]: the [`Backend`] trait (XOR, AND, NOT, constants) and [`Bit`], a wire or a
//!   public constant, so gadgets fold constants for every backend alike;
//! * [`gadgets`]: adders, comparators, multiplexers, negation, reduction mod p, multiplication,
//!   argmax, lookup tables — written once, generic over the backend;
//! * four backends: [`plain::Plain`] (bools), [`plain::BitSliced`] (64 plaintext instances per
//!   word, for exhaustive error scans), [`counter::Counter`] (AND/XOR counts and AND depth),
//!   and the [`garble::Garbler`] / [`garble::Evaluator`] (free-XOR, point-and-permute,
//!   fixed-key-AES tweakable hash, `L` independent circuit copies per wire so hashes pipeline)
//!   with AND gates by half-gates or by three-halves ([`three_halves`], Rosulek–Roy 2021:
//!   24.625 instead of 32 bytes per AND), chosen per batch by [`garble::Scheme`];
//! * [`circuit`]: a recorded circuit IR ([`circuit::Builder`] is a backend) replayed into any backend;
//! * [`activation`]: ReLU, sigmoid, tanh and requantisation with fixed-point formats as parameters;
//! * [`protocol`]: batched two-party garbling (tables offline, streamed in 64 KiB frames; input
//!   labels by correlated OT online; or, when the garbler knows its inputs as it garbles, those
//!   folded into the garbling under public labels and the tables evaluated as they arrive), and
//!   [`shares`]: GAZELLE-style shares in, shares out over Z_p or Z_{2^l}.
#![deny(unsafe_code)]

pub mod activation;
pub mod backend;
pub mod circuit;
pub mod counter;
pub mod gadgets;
pub mod garble;
pub mod plain;
pub mod protocol;
pub mod requant;
pub mod shares;
pub mod three_halves;
pub mod window;

pub use backend::{Backend, Bit};
pub use circuit::{Builder, Circuit};
pub use counter::Counter;
pub use plain::{BitSliced, Plain};
pub use secinfer_core::ErrorKind;

use secinfer_core::FormatError;
use secinfer_net::NetError;
use secinfer_ot::OtError;

/// Everything that can go wrong in this crate. Peer bytes are hostile: a malformed or short
/// message maps to one of these, never to a panic. [`GcError::kind`] classes it.
#[derive(Debug, thiserror::Error)]
pub enum GcError {
    #[error("channel: {0}")]
    Net(#[from] NetError),
    #[error("oblivious transfer: {0}")]
    Ot(#[from] OtError),
    #[error("fixed-point format: {0}")]
    Format(#[from] FormatError),
    #[error("malformed message from the peer: {0}")]
    Malformed(String),
    #[error("truncated garbled-table stream: expected {expected} bytes, got {got}")]
    Truncated { expected: u64, got: u64 },
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
}

impl GcError {
    pub fn invalid(s: impl Into<String>) -> Self {
        GcError::InvalidArgument(s.into())
    }
    /// The class of this failure, from its source chain.
    pub fn kind(&self) -> ErrorKind {
        match self {
            GcError::Net(e) => secinfer_ot::net_error_kind(e),
            GcError::Ot(e) => e.kind(),
            GcError::Format(e) => e.kind(),
            GcError::Malformed(_) | GcError::Truncated { .. } => ErrorKind::Malformed,
            GcError::InvalidArgument(_) => ErrorKind::InvalidArgument,
        }
    }
}
