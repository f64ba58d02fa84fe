//! # secinfer-net
//!
//! The bottom layer of secinfer: a [`Channel`] between the two parties carrying length-prefixed
//! frames with a size limit, metered per protocol [`Phase`] (bytes each way, messages, rounds, wall
//! time); an in-memory pair, real TCP, in-process LAN/WAN [`Shaped`] links, and the two-party
//! harness ([`run_two_party`], [`simulate`]) that every protocol test and benchmark runs on.
//!
//! Peer bytes are hostile: frames above the limit are refused before allocation, typed receives
//! state their expected length, and every failure is a [`NetError`].
#![forbid(unsafe_code)]

mod channel;
mod error;
mod harness;
mod mem;
mod meter;
mod shape;
mod tcp;

pub use channel::{Channel, DEFAULT_MAX_FRAME};
pub use error::{NetError, Result};
pub use harness::{
    channel_pair, run_two_party, simulate, DynChannel, PartyRun, Transport, TwoPartyRun,
};
pub use mem::{mem_pair, mem_pair_with, MemChannel};
pub use meter::{Cost, Meter, Phase, PhaseCost};
pub use shape::{shape_pair, Profile, Shaped};
pub use tcp::{tcp_loopback_pair, TcpChannel, TcpOptions};
