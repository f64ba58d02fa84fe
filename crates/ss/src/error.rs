//! The crate's error type: every failure on the network path is one of these, never a panic.
use secinfer_core::{ErrorKind, FormatError};
use secinfer_net::NetError;
use secinfer_ot::OtError;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum SsError {
    #[error("network: {0}")]
    Net(#[from] NetError),
    #[error("oblivious transfer: {0}")]
    Ot(#[from] OtError),
    #[error("fixed-point format: {0}")]
    Format(#[from] FormatError),
    #[error("malformed data from the peer: {0}")]
    Malformed(String),
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
}

impl SsError {
    /// The class of this failure, from its source chain.
    pub fn kind(&self) -> ErrorKind {
        match self {
            SsError::Net(e) => secinfer_ot::net_error_kind(e),
            SsError::Ot(e) => e.kind(),
            SsError::Format(e) => e.kind(),
            SsError::Malformed(_) => ErrorKind::Malformed,
            SsError::InvalidArgument(_) => ErrorKind::InvalidArgument,
        }
    }
}

pub type Result<T, E = SsError> = std::result::Result<T, E>;

pub(crate) fn invalid(msg: impl Into<String>) -> SsError {
    SsError::InvalidArgument(msg.into())
}
