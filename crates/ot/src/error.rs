//! [`OtError`]: every way an OT call can fail. Peer bytes never cause a panic; they end here.
use secinfer_net::NetError;
use thiserror::Error;

/// Errors of the OT protocols.
#[derive(Debug, Error)]
pub enum OtError {
    /// The channel failed (closed, timed out, a frame of the wrong length or too large).
    #[error("network: {0}")]
    Net(#[from] NetError),
    /// The peer sent bytes that decode to nothing valid (e.g. a non-canonical or identity curve
    /// point).
    #[error("malformed OT message: {0}")]
    Malformed(String),
    /// The caller passed parameters outside the protocol's range, or used an instance that an
    /// earlier error left out of step with its peer.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
}

impl OtError {
    pub(crate) fn arg(what: impl Into<String>) -> Self {
        OtError::InvalidArgument(what.into())
    }
    pub(crate) fn malformed(what: impl Into<String>) -> Self {
        OtError::Malformed(what.into())
    }
}
