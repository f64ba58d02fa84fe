use thiserror::Error;

/// Errors of the model layer. Messages name the file, field or tensor at fault.
#[derive(Debug, Error)]
pub enum NnError {
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("{file}: invalid JSON: {source}")]
    Json {
        file: String,
        source: serde_json::Error,
    },
    #[error("model.json: {0}")]
    Config(String),
    #[error("weights.safetensors: tensor `{tensor}`: {problem}")]
    Tensor { tensor: String, problem: String },
    #[error("weights.safetensors: {0}")]
    Weights(String),
    #[error("vocabulary: {0}")]
    Vocab(String),
    #[error("input: {0}")]
    Input(String),
    #[error("protocol: {0}")]
    Protocol(String),
    #[error("network: {0}")]
    Net(String),
    #[error("{0}")]
    Crypto(String),
}

impl NnError {
    pub(crate) fn config(m: impl Into<String>) -> Self {
        NnError::Config(m.into())
    }
    pub(crate) fn tensor(t: &str, p: impl Into<String>) -> Self {
        NnError::Tensor {
            tensor: t.to_string(),
            problem: p.into(),
        }
    }
}

pub type Result<T, E = NnError> = std::result::Result<T, E>;
