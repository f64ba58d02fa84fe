//! Secure GRU inference (CryptoGRU): HE matvecs over Z_{2^32} (coefficient encoding) on the
//! client's masks (all offline), three garbled circuits per step for the gates and activations,
//! OT multiplexers for the gate products, and a final garbled argmax, or top-k for a language
//! model's next words (docs/gru-protocol.md).
//!
//! One session, both roles, over any [`Channel`](secinfer_net::Channel):
//! * setup ([`config`] handshake: protocol, architecture hash, variant, steps, OT filler), the
//!   client's BFV public key (for re-randomising responses), the base OTs of two OT pools
//!   (server → client with Δ = the free-XOR offset; client → server for the multiplexers' other
//!   direction);
//! * offline (Delphi-style, cryptogru::offline): HE products on the client's uniform masks ρ_x,
//!   ρ_h; pool fills; COTs of every client circuit input (all known now) whose m0 are the zero
//!   labels; the random OTs of the lookup tables ([`tables`], on `secinfer_ss::blocks::pooled`);
//! * online: x − ρ_x for all t; per step A → product P → B → product Q → C → B2A of h', the
//!   server learning m = h' + ρ_h; finally the garbled argmax (or the client's top-k: k
//!   tournaments, each winner's logit replaced by one below every logit before the next). Each batch (circuit A, B or C for
//!   all H elements) is garbled online, as soon as the server knows its inputs, which are folded
//!   into the garbling (`BatchJob::g_known`): its tables travel instead of the server's labels,
//!   16 bytes per server input bit fewer.
//!
//! Online each step is six flights: pooled OTs are split into choices and answers so both
//! directions share flights, and the products P = r·trunc(gh_n), Q = z·(h − n) ([`products`])
//! and the B2A of h' (`secinfer_ss::blocks::pooled::b2a`) are decomposed into sender-first OTs
//! whose correlations the server knows before the client's bits exist (docs/gru-protocol.md, "Online flights", which also has
//! the derivations).
//!
//! [`client`] and [`server`] hold the two roles' setup and offline phases: the handshake, the
//! base OTs, the OT-extension pool fills, the HE products and the labels' COTs, sub-protocols
//! that speak to the channel themselves ([`client_prepare`], [`server_prepare`]). The online
//! phase is IO-free: [`ClientRun`] (`client_steps`) and [`ServerRun`] (`server_steps`) are state
//! machines that take the peer's flight, a typed [`Msg`] whose shape each checks against its
//! [`Expect`] before anything changes (`flight`), and return their own. One driver loop per role
//! ([`client_session_garbling`], [`server_session_with`]) moves the flights over the channel;
//! tests hand them from one side to the other with none.
mod bits;
pub mod circuits;
mod client;
mod client_steps;
mod config;
mod flight;
pub mod logprob;
mod model;
mod products;
mod report;
mod server;
mod server_steps;
mod tables;

pub use circuits::{CircuitActivations, CircuitCache};
pub use client::{client_prepare, client_session, client_session_garbling, client_session_with};
pub use client_steps::{ClientNext, ClientRun};
pub use config::{
    fp_for_variant, ClientOptions, OtFiller, ServerPolicy, Variant, DEFAULT_GARBLING,
    LOGITS_REFUSED, MAX_TOP_K, PROTOCOL,
};
pub use flight::{ClientFlight, ClientMsg, Expect, Msg, ServerFlight, ServerMsg};
pub use model::{random_model, ClientModel, ServerModel};
pub use report::{top_k, GruOutcome, SessionReport};
pub use secinfer_gc::garble::Scheme;
pub use server::{server_prepare, server_session, server_session_with};
pub use server_steps::ServerRun;
