//! # secinfer-nn
//!
//! Models and their evaluation: the model directory format (docs/model-format.md) with
//! validation that names the field or tensor at fault, the `words-v1` tokeniser, fixed-point
//! quantisation, and the plaintext fixed-point reference evaluator that fixes bit for bit what a
//! secure run must produce. The layer protocols and the client/server runtime build on these.
#![forbid(unsafe_code)]

mod error;
pub mod fixed;
pub mod info;
pub mod model;
pub mod runtime;
pub mod secure;

pub use error::{NnError, Result};
pub use fixed::{
    argmax, check_tokens, ActFormat, Counters, ExactActivations, FixedPointConfig, Format,
    QuantizedModel, Reference,
};
pub use model::{words_v1, Architecture, Candidate, Model, ModelConfig, Task, Vocab, Weights};
