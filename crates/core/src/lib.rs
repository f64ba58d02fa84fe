//! # secinfer-core
//!
//! The ground every secinfer crate stands on (DESIGN.md §3); it depends on no other secinfer
//! crate:
//!
//! * [`Block`] — 128 bits: OT messages, garbled-circuit labels, the free-XOR Δ, PRG seeds. Its
//!   `Debug` prints a keyed 32-bit fingerprint ([`Block::fingerprint`]), never the value.
//!   Hand-written: a `repr(transparent)` `u128` is the whole type, and its layout is the wire
//!   format.
//! * [`Prg`] — the one PRG: AES-128 in counter mode seeded from the OS CSPRNG ([`Prg::new`]) or
//!   from a protocol-derived seed ([`Prg::from_seed`]), also a `rand_core` `CryptoRng`.
//!   [`AesCipher`] wraps the `aes` crate (AES-NI); the VAES path (two blocks per instruction,
//!   Rust ≥ 1.89) is written here because that crate has none, and it doubles the throughput
//!   of the PRG and of the fixed-key hashes built on this cipher in `secinfer-ot`.
//! * [`Format`] — the one fixed-point format `{ bits, scale }`, validated by its constructor
//!   ([`FormatError`]).
//! * [`CotSender`] / [`CotReceiver`] — the correlated-OT interfaces the garbled-circuit
//!   protocols use; `secinfer-ot`'s extensions implement them.
//! * [`ErrorKind`] — the classes every crate's error type maps its source chain to (timeout,
//!   peer closed, malformed message, refused, invalid argument, crypto, I/O).
#![deny(unsafe_code)]

mod aes;
mod block;
mod error;
mod format;
mod ot;

pub use crate::aes::{AesCipher, Prg, AES_CALL_BLOCKS};
pub use block::Block;
pub use error::{ErrorKind, FormatError};
pub use format::{Format, MAX_BITS};
pub use ot::{CotReceiver, CotSender};
