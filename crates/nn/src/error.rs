use secinfer_gc::GcError;
use secinfer_he::HeError;
use secinfer_net::NetError;
use secinfer_ot::OtError;
use secinfer_ss::SsError;
use thiserror::Error;

/// Errors of the model layer and the runtime. Messages name the file, layer, field or tensor
/// at fault; errors of the protocol crates keep their source, so [`NnError::kind`] can tell a
/// timeout from a malformed message from a bad model.
#[derive(Debug, Error)]
pub enum NnError {
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{file}: invalid JSON: {source}")]
    Json {
        file: String,
        #[source]
        source: serde_json::Error,
    },
    #[error("{file}: {source}")]
    Safetensors {
        file: String,
        #[source]
        source: safetensors::SafeTensorError,
    },
    #[error("model.json: {0}")]
    Config(String),
    /// A fixed-point object of `model.json` (named by `what`) that is no valid format.
    #[error("model.json: {what}: {source}")]
    Format {
        what: String,
        #[source]
        source: secinfer_core::FormatError,
    },
    #[error("{file}: tensor `{tensor}`: {problem}")]
    Tensor {
        file: String,
        tensor: String,
        problem: String,
    },
    #[error("vocabulary: {0}")]
    Vocab(String),
    #[error("input: {0}")]
    Input(String),
    /// The model or the requested mode has no secure protocol (yet) in the chosen family.
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// The peer declined the session: another protocol, model, variant or option.
    #[error("refused: {0}")]
    Refused(String),
    /// The peer's bytes decode to nothing valid at the runtime's level.
    #[error("malformed message from the peer: {0}")]
    Malformed(String),
    /// A local invariant of the runtime failed (a bug, or an instance left out of step).
    #[error("protocol: {0}")]
    Protocol(String),
    #[error("network: {0}")]
    Net(#[from] NetError),
    #[error("oblivious transfer: {0}")]
    Ot(#[from] OtError),
    #[error("garbled circuits: {0}")]
    Gc(#[from] GcError),
    #[error("homomorphic encryption: {0}")]
    He(#[from] HeError),
    #[error("secret sharing: {0}")]
    Ss(#[from] SsError),
    /// SHE's model or session (TFHE on tfhe-rs), shown as its own message.
    #[cfg(feature = "tfhe")]
    #[error(transparent)]
    She(#[from] secinfer_tfhe::Error),
}

/// What went wrong, for a caller that decides what to do next (retry, report, fix the model).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// The peer did not answer in time.
    Timeout,
    /// The peer closed the connection.
    PeerClosed,
    /// The peer sent bytes that are not a valid message.
    Malformed,
    /// The peer declined the session or the request.
    Refused,
    /// The model directory is invalid (file, JSON, layer, tensor, vocabulary).
    BadModel,
    /// The caller's input or options are invalid.
    BadInput,
    /// The model or mode has no secure protocol here.
    Unsupported,
    /// Local I/O or a broken invariant.
    Internal,
}

/// The runtime's kind of a protocol crate's kind (secinfer-core's classification).
fn from_core(k: secinfer_core::ErrorKind) -> ErrorKind {
    use secinfer_core::ErrorKind as K;
    match k {
        K::Timeout => ErrorKind::Timeout,
        K::PeerClosed => ErrorKind::PeerClosed,
        K::Malformed => ErrorKind::Malformed,
        K::Refused => ErrorKind::Refused,
        K::InvalidArgument => ErrorKind::BadInput,
        _ => ErrorKind::Internal,
    }
}

impl NnError {
    pub(crate) fn config(m: impl Into<String>) -> Self {
        NnError::Config(m.into())
    }
    pub(crate) fn tensor(file: &str, tensor: &str, p: impl Into<String>) -> Self {
        NnError::Tensor {
            file: file.to_string(),
            tensor: tensor.to_string(),
            problem: p.into(),
        }
    }

    /// The kind of failure, looking through the protocol crates' errors to the channel's.
    pub fn kind(&self) -> ErrorKind {
        match self {
            NnError::Io { .. } | NnError::Protocol(_) => ErrorKind::Internal,
            NnError::Json { .. }
            | NnError::Safetensors { .. }
            | NnError::Config(_)
            | NnError::Format { .. }
            | NnError::Tensor { .. }
            | NnError::Vocab(_) => ErrorKind::BadModel,
            NnError::Input(_) => ErrorKind::BadInput,
            NnError::Unsupported(_) => ErrorKind::Unsupported,
            NnError::Refused(_) => ErrorKind::Refused,
            NnError::Malformed(_) => ErrorKind::Malformed,
            NnError::Net(e) => from_core(secinfer_ot::net_error_kind(e)),
            NnError::Ot(e) => from_core(e.kind()),
            NnError::Gc(e) => from_core(e.kind()),
            NnError::Ss(e) => from_core(e.kind()),
            NnError::He(e) => from_core(e.kind()),
            #[cfg(feature = "tfhe")]
            NnError::She(e) => she_kind(e),
        }
    }
}

/// The runtime's kind of a SHE error: the channel's own kind, the peer's unusable bytes, the
/// model directory's faults and the caller's input.
#[cfg(feature = "tfhe")]
fn she_kind(e: &secinfer_tfhe::Error) -> ErrorKind {
    use secinfer_tfhe::Error as E;
    match e {
        E::Net(n) => from_core(secinfer_ot::net_error_kind(n)),
        E::Peer(_) | E::CiphertextCount { .. } | E::Serialize(_) => ErrorKind::Malformed,
        E::Io { .. } | E::Json(_) | E::Weights(_) | E::Tensor { .. } | E::Layer { .. } => {
            ErrorKind::BadModel
        }
        E::Format(_) | E::InputLength { .. } | E::InputRange { .. } => ErrorKind::BadInput,
    }
}

pub type Result<T, E = NnError> = std::result::Result<T, E>;
