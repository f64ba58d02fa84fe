use thiserror::Error;

/// Which deadline ran out (see [`crate::Deadlines`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Deadline {
    /// No byte arrived from the peer within the idle limit.
    Idle,
    /// The peer did not take our bytes within the write limit.
    Write,
    /// The whole session ran past its limit, however busy the peer kept it.
    Session,
    /// The opening (greeting and key exchange) took longer than its own short limit.
    Handshake,
    /// The server did not start the session within the client's queue wait.
    Queue,
}

impl std::fmt::Display for Deadline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Deadline::Idle => "idle deadline (no byte from the peer)",
            Deadline::Write => "write deadline (the peer does not read)",
            Deadline::Session => "session deadline",
            Deadline::Handshake => "handshake deadline",
            Deadline::Queue => "queue wait (the server did not start the session)",
        })
    }
}

/// Everything that can go wrong on a channel. Peer bytes are hostile: every malformed input
/// maps to one of these, never to a panic. Callers match on the kind: [`NetError::Timeout`],
/// [`NetError::Closed`], [`NetError::Malformed`] / [`NetError::UnexpectedLength`],
/// [`NetError::Busy`], [`NetError::FrameTooLarge`], [`NetError::Tampered`].
#[derive(Debug, Error)]
pub enum NetError {
    #[error("the peer closed the channel")]
    Closed,
    #[error("timed out: {0}")]
    Timeout(Deadline),
    #[error("frame of {len} bytes exceeds the limit of {max} bytes")]
    FrameTooLarge { len: usize, max: usize },
    #[error("malformed message: {0}")]
    Malformed(String),
    #[error("unexpected message length: expected {expected} bytes, got {got}")]
    UnexpectedLength { expected: usize, got: usize },
    /// The server refused the connection before any session state was made; the text is the
    /// server's, sanitised (see [`sanitize_peer_text`]).
    #[error("the server is busy, retry later: {reason}")]
    Busy { reason: String },
    /// The two ends disagree on the channel's security (one side plaintext): refused rather
    /// than downgraded.
    #[error("channel security mismatch: this end requires {ours}, the peer offers {theirs}")]
    SecurityMismatch {
        ours: &'static str,
        theirs: &'static str,
    },
    /// The key exchange failed: the server does not hold the pinned key, or the opening bytes
    /// were altered.
    #[error("channel key exchange failed (wrong server key or altered handshake)")]
    KeyExchange(#[source] snow::Error),
    /// A record failed authentication: bytes were altered, replayed, reordered or cut.
    #[error("channel record failed authentication (tampered, replayed or reordered bytes)")]
    Tampered(#[source] snow::Error),
    /// The server identity (key file) could not be read or written.
    #[error("server identity {path}")]
    IdentityIo {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// The server identity (key file) holds no valid key.
    #[error("server identity {path}: {problem}")]
    IdentityFormat { path: String, problem: &'static str },
    #[error("i/o error: {0}")]
    Io(#[from] std::io::Error),
}

impl NetError {
    pub fn malformed(what: impl Into<String>) -> Self {
        NetError::Malformed(what.into())
    }
}

/// A peer's free text made safe to print: control characters (terminal escapes included) become
/// `?`, and the text is cut at `max` characters.
pub fn sanitize_peer_text(text: &str, max: usize) -> String {
    let mut out: String = text
        .chars()
        .take(max)
        .map(|c| if c.is_control() { '?' } else { c })
        .collect();
    if text.chars().nth(max).is_some() {
        out.push('…');
    }
    out
}

pub type Result<T, E = NetError> = std::result::Result<T, E>;
