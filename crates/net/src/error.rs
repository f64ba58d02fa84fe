use thiserror::Error;

/// Everything that can go wrong on a channel. Peer bytes are hostile: every malformed input
/// maps to one of these, never to a panic.
#[derive(Debug, Error)]
pub enum NetError {
    #[error("the peer closed the channel")]
    Closed,
    #[error("timed out waiting for the peer")]
    Timeout,
    #[error("frame of {len} bytes exceeds the limit of {max} bytes")]
    FrameTooLarge { len: usize, max: usize },
    #[error("malformed message: {0}")]
    Malformed(String),
    #[error("unexpected message length: expected {expected} bytes, got {got}")]
    UnexpectedLength { expected: usize, got: usize },
    #[error("i/o error: {0}")]
    Io(#[from] std::io::Error),
}

impl NetError {
    pub fn malformed(what: impl Into<String>) -> Self {
        NetError::Malformed(what.into())
    }
}

pub type Result<T, E = NetError> = std::result::Result<T, E>;
