//! SHE (Lou & Jiang, "SHE: A Fast and Accurate Deep Neural Network for Encrypted Data",
//! NeurIPS 2019) on tfhe-rs: the client encrypts its input bit by bit under TFHE, the server
//! evaluates the whole quantised network on ciphertexts with no interaction, and the client
//! decrypts the result.
//!
//! - [`int`]: SHE's operators on encrypted two's-complement words — power-of-two products as
//!   re-wiring shifts, the mixed-bitwidth adder tree, ReLU, max-pool, requantisation.
//! - [`backend::Backend`]: the one circuit runs on ciphertexts ([`Encrypted`]), in the clear
//!   ([`Plain`]) and on a [`Counter`] (gates by kind, bootstraps, depth, SHE's op counts).
//! - [`network`]: layers over power-of-two weights, the network's circuit, and the i64
//!   reference it matches bit for bit; [`model`] loads one from `she.json` + safetensors.
//! - [`arch`]: the architectures of SHE's tables (MNIST, the Penn Treebank ReLU-LSTM step).
//! - [`pbs`]: the same network on tfhe-rs shortint digits with programmable bootstrapping (a
//!   lookup table per bootstrap instead of a gate), equal to the reference bit for bit;
//!   [`cost`] picks between the two evaluators; [`session`] runs the PBS path between a client
//!   and a server over a secinfer-net channel.
pub mod arch;
pub mod backend;
pub mod cost;
pub mod counter;
pub mod encrypted;
pub mod int;
pub mod model;
pub mod network;
pub mod pbs;
pub mod plain;
pub mod session;

pub use backend::{Backend, Bit, Op, Word};
pub use counter::Counter;
pub use encrypted::{
    decompress, generate_client_keys, generate_keys, serialized_bytes, Encrypted, PARAMETERS,
};
pub use network::{ConvGeom, InputFormat, Layer, Network, Pow2Linear, Shape};
pub use pbs::{PbsCount, PbsEncrypted, PbsInfo, PbsNetwork, StepCount, PBS_PARAMETERS};
pub use plain::Plain;
pub use tfhe::boolean::ciphertext::{Ciphertext, CompressedCiphertext};
pub use tfhe::boolean::client_key::ClientKey;
pub use tfhe::boolean::server_key::{CompressedServerKey, ServerKey};

use std::path::PathBuf;

/// Everything that can go wrong loading or running a SHE network.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("reading {path}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("parsing the network description")]
    Json(#[from] serde_json::Error),
    #[error("reading the weights")]
    Weights(#[from] safetensors::SafeTensorError),
    #[error("tensor {name}: {reason}")]
    Tensor { name: String, reason: String },
    #[error("bad format: {0}")]
    Format(String),
    #[error("layer {index} ({kind}): {reason}")]
    Layer {
        index: usize,
        kind: &'static str,
        reason: String,
    },
    #[error("input has {got} values, the network takes {want}")]
    InputLength { got: usize, want: usize },
    #[error("input value {value} at index {index} is outside [{lo}, {hi}]")]
    InputRange {
        index: usize,
        value: i64,
        lo: i64,
        hi: i64,
    },
    #[error("got {got} ciphertexts, expected {want}")]
    CiphertextCount { got: usize, want: usize },
    #[error("serialising a key or ciphertext")]
    Serialize(#[from] bincode::Error),
    #[error("channel")]
    Net(#[from] secinfer_net::NetError),
    /// The peer's bytes were refused (tfhe-rs's safe deserialisation reports its reason as
    /// text, kept here as it comes).
    #[error("peer sent an unusable message: {0}")]
    Peer(String),
}
