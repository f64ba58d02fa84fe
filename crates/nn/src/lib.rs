//! # secinfer-nn
//!
//! Models and the secure runtime, in the layers of DESIGN.md §3a:
//!
//! * [`model`]: the model graph (typed layers with inferred shapes), fixed-point formats,
//!   weights and vocabulary, loaded from a model directory (docs/model-format.md) and validated
//!   with errors that name the layer, field or tensor at fault;
//! * [`reference`]: the plaintext fixed-point evaluation of a graph, which fixes bit for bit
//!   what every secure run produces;
//! * [`plan`]: the protocol family (and kernel) that computes each layer, and why;
//! * [`layers`]: the layer protocols, a client and a server step per layer kind and family,
//!   composed from the protocol crates' blocks (CryptoGRU's GRU is [`layers::gru`]);
//! * [`runtime`]: the session driver over a channel, the TCP server and client, the reports.
#![forbid(unsafe_code)]

mod error;
pub mod info;
pub mod layers;
pub mod model;
pub mod plan;
pub mod reference;
pub mod runtime;

pub use error::{ErrorKind, NnError, Result};
pub use model::{
    words_v1, ActFormat, Architecture, Candidate, FixedPointConfig, Format, Graph, Layer,
    LayerKind, Model, ModelConfig, Shape, Task, Tensors, Vocab, Weights,
};
pub use reference::{
    argmax, check_tokens, CircuitActivations, Counters, ExactActivations, GraphReference, Input,
    QuantizedGraph, QuantizedModel, Reference, SmoothActivations,
};
