//! # secinfer-ot
//!
//! Primitives every protocol crate stands on: the 128-bit [`Block`], an AES-CTR [`Prg`] seeded
//! from the OS CSPRNG, fixed-key-AES correlation-robust hashes ([`fixed_key_aes`]), base OT on
//! Ristretto255, and semi-honest OT extension (IKNP/ALSZ for 1-of-2, KK13 for 1-of-N).
//!
//! AES comes from the `aes` crate (AES-NI when the CPU has it) and the curve from
//! `curve25519-dalek`; the OT protocols themselves are written here because their batching,
//! chunking and metering are the substance of this project.
#![deny(unsafe_code)]

mod aes;
mod base;
mod block;
mod error;
mod ext;
mod iknp;
mod kk;
mod pack;
pub mod transpose;

pub use crate::aes::{fixed_key_aes, AesCipher, FixedKeyAes, Prg};
pub use base::{base_ot_receive, base_ot_send, MAX_BASE_OTS};
pub use block::Block;
pub use error::OtError;
pub use ext::CHUNK_ROWS;
pub use iknp::{OtExtReceiver, OtExtSender};
pub use kk::{KkReceiver, KkSender, KK_CODE_BITS};
