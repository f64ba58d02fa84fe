//! Layer protocols: for each layer kind and protocol family, the client's and the server's
//! steps. A layer protocol composes the protocol crates' blocks (HE kernels, garbled gadgets,
//! secret-sharing blocks) and holds no cryptography of its own.
//!
//! * [`gru`]: CryptoGRU's Embedding → GRU → Dense classifier in family `hegc`: HE products on
//!   Z_{2^32} by coefficient encoding, garbled circuits and OT blocks for the gates.
//! * [`ss`]: FastGRNN → Dense in family `ss`: OT products and OPAF's (or SIRNN's) math on
//!   Z_{2^l} shares.
//! * [`choco`]: CHOCO's client-aided networks in family `choco`: linear layers on BFV
//!   ciphertexts at the server, the rest in the clear at the client (which sees activations).
//! * [`hegc`]: GALA / GAZELLE image networks in family `hegc`: HE matvecs on Z_p shares,
//!   truncation, ReLU and argmax in garbled circuits.
pub mod choco;
pub mod gru;
pub mod hegc;
pub mod ss;
