//! Family `ss`: layers on additive shares over Z_{2^l} (OPAF, SIRNN). Linear layers with a
//! server matrix are SIRNN's OT products (`secinfer_ss::matmul`); the smooth activations are
//! OPAF's sigmoid and tanh or SIRNN's, selected at run time ([`Impl`]); truncations are exact
//! arithmetic shifts, so the linear parts match the reference bit for bit.
//!
//! * [`fastgrnn`]: FastGRNN → Dense → argmax, the model of OPAF's Table XI.
//! * [`graph`]: that model read from a model graph (model.json), as the graph reference reads it.
//! * [`products`]: the products with the server's matrices by Cheetah's coefficient-encoded
//!   HE on masks (offline), one masked flight each online.
//! * [`session`]: one served session (`secinfer serve` / `secinfer infer`).
//! * [`gru`]: CryptoGRU's GRU classifier on shares, beside its `hegc` run.
pub mod fastgrnn;
pub mod graph;
pub mod gru;
pub mod products;
pub mod session;

pub use fastgrnn::{
    random_input, random_params, run_fastgrnn, FastGrnnRun, FastGrnnShape, SsOptions,
};
pub use graph::{is_fastgrnn_graph, params_of, shape_of};
pub use products::Products;
pub use secinfer_ss::math::Impl;
pub use session::{client_session, server_session, ServedRun, SsRequest, SsServer};
