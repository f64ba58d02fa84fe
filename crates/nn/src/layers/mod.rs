//! Layer protocols: for each layer kind and protocol family, the client's and the server's
//! steps. A layer protocol composes the protocol crates' blocks (HE kernels, garbled gadgets,
//! secret-sharing blocks) and holds no cryptography of its own.
//!
//! * [`gru`]: CryptoGRU's Embedding → GRU → Dense classifier in family `hegc`: HE products on
//!   Z_{2^32} by coefficient encoding, garbled circuits and OT blocks for the gates.
//! * [`hegc`]: GALA / GAZELLE image networks in family `hegc`: HE matvecs on Z_p shares,
//!   truncation, ReLU and argmax in garbled circuits.
pub mod gru;
pub mod hegc;
