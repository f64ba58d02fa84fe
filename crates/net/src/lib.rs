//! # secinfer-net
//!
//! The bottom layer of secinfer: a [`Channel`] between the two parties carrying length-prefixed
//! frames with a size limit, metered per protocol [`Phase`] (bytes each way, messages, rounds, wall
//! time); an in-memory pair, real TCP, in-process LAN/WAN [`Shaped`] links, and the two-party
//! harness ([`run_two_party`], [`simulate`]) that every protocol test and benchmark runs on; and
//! the served path ([`serve_sessions`], [`connect_session`]): admission control, deadlines, a
//! typed "busy" refusal and the Noise channel that authenticates the server and encrypts every
//! frame.
//!
//! Peer bytes are hostile: frames above the limit are refused before allocation, typed receives
//! state their expected length, and every failure is a [`NetError`].
#![forbid(unsafe_code)]

mod channel;
mod error;
pub mod flight;
pub mod fuzzing;
mod harness;
mod mem;
mod meter;
mod noise;
mod serve;
mod shape;
mod tcp;

pub use channel::{Channel, Recording, DEFAULT_MAX_FRAME};
pub use error::{sanitize_peer_text, Deadline, NetError, Result};
pub use harness::{
    channel_pair, run_two_party, simulate, DynChannel, PartyRun, Transport, TwoPartyRun,
};
pub use mem::{mem_pair, mem_pair_with, MemChannel};
pub use meter::{Cost, Meter, Phase, PhaseCost};
pub use noise::{
    key_hex, parse_key_hex, Identity, CHUNK, MAX_RECORD, NOISE_PARAMS, PRIVATE_KEY_FILE,
    PUBLIC_KEY_FILE,
};
pub use serve::{
    connect_session, decode_greeting, default_max_sessions, encode_greeting, mem_available,
    serve_health, serve_sessions, Admitted, ClientConfig, Greeting, PeerKey, ServeConfig,
    ServerSecurity, ServerStats, SessionHandler, GREETING_LEN, MAX_REASON,
};
pub use shape::{shape_pair, Profile, Shaped};
pub use tcp::{tcp_loopback_pair, TcpChannel, TcpOptions};
