//! # secinfer-ot
//!
//! The oblivious-transfer layer every protocol crate stands on (semi-honest, κ = 128):
//!
//! * primitives — fixed-key-AES correlation-robust hashes ([`fixed_key_aes`]: `cr_hash`,
//!   `tccr`) on `secinfer-core`'s cipher; the 128-bit [`Block`] and the AES-CTR [`Prg`] live in
//!   `secinfer-core` and are re-exported here;
//! * base OT — batched Chou–Orlandi on Ristretto255 ([`base_ot_send`], [`base_ot_receive`]): one
//!   message each way, keys `SHA-256(label, A, i, B_i, point)`, non-canonical or identity points
//!   rejected;
//! * IKNP/ALSZ 1-of-2 OT extension ([`OtExtSender`], [`OtExtReceiver`]): correlated OT with a
//!   global Δ (no hashing: 16 bytes per OT), random OT, chosen-message OT on 128-bit or packed
//!   `bits`-bit messages, and additively correlated OT over `Z_{2^bits}`;
//! * KK13 1-of-N OT extension, N ≤ 256, with the 256-bit Walsh–Hadamard code ([`KkSender`],
//!   [`KkReceiver`]), for the lookup tables of the math library;
//! * pooled OT ([`PooledOtSender`], [`PooledOtReceiver`]): random COTs made offline by IKNP,
//!   SoftSpokenOT or Ferret ([`CotSource`]), consumed online by derandomisation — 1 bit per 1-of-2
//!   OT and `⌈log2 N⌉` bits per 1-of-N OT from the receiver, plus the payloads — with the same
//!   method signatures as the IKNP and KK13 types; `bootstrap_reverse` sets up the other
//!   direction on 128 random OTs of a pool instead of a second run of base OTs;
//! * semi-honest SoftSpokenOT ([`SoftSpokenSender`], [`SoftSpokenReceiver`]): IKNP's
//!   correlation from `⌈128/k⌉` small-field VOLEs, `128/k` bits per COT for `k ≤ 8`, at
//!   `≈ 2^k/k` AES blocks per COT; a [`CotSource`] for the pools;
//! * semi-honest Ferret silent COT ([`ferret`]: GGM SPCOT, regular-noise MPCOT, primal LPN with a
//!   `d = 10` local code, emp-ot's 128-bit `ferret_b11/b12/b13` parameter sets): 0.44 bits per
//!   COT for [`FerretParams::B13`], bootstrapped from IKNP.
//!
//! Every call works on whole slices, streams rows in chunks of [`CHUNK_ROWS`] (so scratch memory
//! is a few MiB for any count, 10^8 OTs included), keeps messages in one direction at a time (a
//! call costs one or two rounds however many OTs it has), and uses all cores through rayon.
//! Bytes from the peer are hostile: every frame length is checked against the agreed counts,
//! curve points are validated, and failures are [`OtError`]s, never panics. Types that hold
//! secrets (Δ, seeds, PRGs) do not implement `Debug`.
//!
//! The extensions' protocol logic is IO-free: `cot_step` ([`OtExtReceiver::cot_step`],
//! [`SoftSpokenReceiver::cot_step`] and the senders' mirrors) makes or absorbs one chunk's
//! message as bytes, and `extend_step` ([`FerretCotSender::extend_step`]) one Ferret iteration's;
//! the methods that take a [`Channel`](secinfer_net::Channel) are those steps in a loop, so a
//! caller with its own transport, or a test, can run them with no channel at all. Base OTs and
//! Ferret's bootstrap from IKNP are driven over the channel.
//!
//! AES comes from the `aes` crate (AES-NI when the CPU has it), the curve from
//! `curve25519-dalek` and SHA-256 from `sha2`; the OT protocols, the bit transpose and the
//! packing are written here because their batching, chunking, wire format and metering are the
//! substance of this project, and because the two parties must agree on them byte for byte.
#![deny(unsafe_code)]

mod base;
mod error;
mod ext;
pub mod ferret;
mod hash;
mod iknp;
mod kk;
mod pack;
mod payload;
mod pool;
mod softspoken;
pub mod transpose;

pub use base::{base_ot_receive, base_ot_send, MAX_BASE_OTS};
pub use error::{net_error_kind, OtError};
pub use ext::CHUNK_ROWS;
pub use ferret::{FerretCotReceiver, FerretCotSender, FerretParams, LpnParams};
pub use hash::{fixed_key_aes, FixedKeyAes};
pub use iknp::{OtExtReceiver, OtExtSender};
pub use kk::{KkReceiver, KkSender, KK_CODE_BITS};
pub use pack::{pack_words, packed_len, unpack_words};
pub use pool::{
    CotSource, PendingEarlyRecv, PendingEarlySend, PendingOtRecv, PendingOtSend, PooledOtReceiver,
    PooledOtSender, DERAND_FRAME_OTS,
};
pub use secinfer_core::ErrorKind;
/// Re-exports of `secinfer-core`'s primitives at the paths the protocol crates used before
/// they moved there.
#[doc(hidden)]
pub use secinfer_core::{AesCipher, Block, Prg};
pub use softspoken::{SoftSpokenReceiver, SoftSpokenSender, SOFTSPOKEN_MAX_K};
