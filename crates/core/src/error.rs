//! [`ErrorKind`]: what a caller can match on, whatever crate an error comes from; and the
//! errors of this crate's own checks.
use thiserror::Error;

/// The class of a failure, derived by each crate's error type from its source chain (its
/// `kind()` method), so a caller can tell a timeout from a hostile message without reading
/// strings.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The peer did not answer in time.
    Timeout,
    /// The peer closed the connection (or it was reset) before the protocol finished.
    PeerClosed,
    /// The peer's bytes (or a file's) do not decode to what the protocol allows: wrong length,
    /// out-of-range value, invalid point, oversized frame.
    Malformed,
    /// The peer or the local system refused the connection or the request.
    Refused,
    /// The caller passed parameters outside what the protocol supports, or used an object an
    /// earlier error left out of step with its peer.
    InvalidArgument,
    /// A cryptographic check failed or a bound was exceeded (e.g. an HE noise budget).
    Crypto,
    /// Any other operating-system I/O failure.
    Io,
}

/// A fixed-point format outside the supported ranges.
#[derive(Clone, Copy, Debug, Error, PartialEq, Eq)]
pub enum FormatError {
    #[error("fixed-point bitwidth {bits} is not in 1..=64")]
    Bits { bits: u32 },
    #[error("fixed-point scale {scale} must be below the bitwidth {bits}")]
    Scale { bits: u32, scale: u32 },
}

impl FormatError {
    pub fn kind(&self) -> ErrorKind {
        ErrorKind::InvalidArgument
    }
}
