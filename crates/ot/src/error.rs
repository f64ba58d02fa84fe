//! [`OtError`]: every way an OT call can fail. Peer bytes never cause a panic; they end here.
use secinfer_core::ErrorKind;
use secinfer_net::NetError;
use std::io;
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
    /// The class of this failure, from its source chain.
    pub fn kind(&self) -> ErrorKind {
        match self {
            OtError::Net(e) => net_error_kind(e),
            OtError::Malformed(_) => ErrorKind::Malformed,
            OtError::InvalidArgument(_) => ErrorKind::InvalidArgument,
        }
    }
}

/// The [`ErrorKind`] of a channel error, shared by every protocol crate above the network
/// layer; an I/O error is classed by its `io::ErrorKind`.
pub fn net_error_kind(e: &NetError) -> ErrorKind {
    match e {
        NetError::Closed => ErrorKind::PeerClosed,
        NetError::Timeout(_) => ErrorKind::Timeout,
        NetError::FrameTooLarge { .. }
        | NetError::Malformed(_)
        | NetError::UnexpectedLength { .. }
        | NetError::Tampered(_) => ErrorKind::Malformed,
        NetError::Busy { .. } | NetError::SecurityMismatch { .. } => ErrorKind::Refused,
        NetError::KeyExchange(_) => ErrorKind::Crypto,
        NetError::IdentityIo { .. } => ErrorKind::Io,
        NetError::IdentityFormat { .. } => ErrorKind::InvalidArgument,
        NetError::Io(io) => match io.kind() {
            io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock => ErrorKind::Timeout,
            io::ErrorKind::UnexpectedEof
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::BrokenPipe => ErrorKind::PeerClosed,
            io::ErrorKind::ConnectionRefused | io::ErrorKind::PermissionDenied => {
                ErrorKind::Refused
            }
            io::ErrorKind::InvalidData => ErrorKind::Malformed,
            _ => ErrorKind::Io,
        },
    }
}
