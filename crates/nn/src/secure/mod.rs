//! Secure GRU inference (CryptoGRU, issue 6): HE matvecs over Z_{2^32} (coefficient encoding) on
//! the client's masks (all offline), three garbled circuits per step for the gates and
//! activations, OT multiplexers for the gate products, and a final garbled argmax. See
//! docs/gru-protocol.md.
pub mod circuits;
pub mod coeff;
pub mod session;

pub use circuits::CircuitActivations;
pub use session::{
    client_session, client_session_garbling, client_session_with, fp_for_variant, random_model,
    server_session, server_session_with, ClientModel, ClientOptions, GruOutcome, OtFiller, Scheme,
    ServerModel, ServerPolicy, SessionReport, Variant, DEFAULT_GARBLING, LOGITS_REFUSED, PROTOCOL,
};
