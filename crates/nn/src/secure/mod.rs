//! Secure GRU inference (CryptoGRU, issue 6): HE matvecs over Z_{2^32} (coefficient encoding),
//! one garbled circuit per step for the gates, products and activations, and a final garbled
//! argmax. See docs/gru-protocol.md.
pub mod circuits;
pub mod coeff;
pub mod session;

pub use circuits::CircuitActivations;
pub use session::{
    client_session, fp_for_variant, random_model, server_session, ClientModel, ClientOptions,
    GruOutcome, ServerModel, SessionReport, Variant, PROTOCOL,
};
