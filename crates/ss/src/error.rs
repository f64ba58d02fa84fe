//! The crate's error type: every failure on the network path is one of these, never a panic.
use secinfer_net::NetError;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum SsError {
    #[error("network: {0}")]
    Net(#[from] NetError),
    #[error("oblivious transfer: {0}")]
    Ot(String),
    #[error("malformed data from the peer: {0}")]
    Malformed(String),
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
}

pub type Result<T, E = SsError> = std::result::Result<T, E>;

pub(crate) fn invalid(msg: impl Into<String>) -> SsError {
    SsError::InvalidArgument(msg.into())
}
