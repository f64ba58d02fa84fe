//! The frames of a choco session and their size limits (peer bytes are hostile: every frame is
//! received with the largest length its message can have, then decoded with range checks).
use crate::error::{NnError, Result};
use secinfer_he::Params;
use secinfer_net::Channel;

pub(super) const HELLO: &[u8; 4] = b"CHC1";
const ACCEPT: u8 = 1;
/// Longest refusal reason the client reads.
const MAX_REASON: usize = 512;

/// Largest seeded-ciphertext upload.
pub(super) fn upload_limit(p: &Params) -> usize {
    4 + 32 + p.residue_bytes() * p.n() * p.num_q()
}

/// Largest response (64-bit coefficients, both components, header).
pub(super) fn response_limit(p: &Params) -> usize {
    8 + 2 * 8 * p.n()
}

pub(super) fn public_key_limit(p: &Params) -> usize {
    32 + p.residue_bytes() * p.n() * p.num_q()
}

/// Galois keys for at most `steps` rotations.
pub(super) fn galois_limit(p: &Params, steps: usize) -> usize {
    8 + steps * (8 + p.ks_digits() * (32 + p.residue_bytes() * p.n() * (p.num_q() + 1)))
}

pub(super) fn hello(id: &[u8; 32]) -> Vec<u8> {
    let mut f = HELLO.to_vec();
    f.extend_from_slice(id);
    f
}

/// Server: reads the hello, answers, and fails when the client's session differs.
pub(super) fn accept_hello<C: Channel>(ch: &mut C, id: &[u8; 32]) -> Result<()> {
    let f = ch.recv_frame_limited(HELLO.len() + 32)?;
    let ok = f.len() == HELLO.len() + 32 && &f[..4] == HELLO && &f[4..] == id;
    if ok {
        ch.send_frame(&[ACCEPT])?;
        ch.flush()?;
        return Ok(());
    }
    let reason = if f.starts_with(HELLO) {
        "choco session mismatch: another model, packing or plaintext primes"
    } else {
        "not a choco session"
    };
    let mut r = vec![0u8];
    r.extend_from_slice(reason.as_bytes());
    ch.send_frame(&r)?;
    ch.flush()?;
    Err(NnError::Refused(reason.into()))
}

/// Client: reads the server's answer to the hello.
pub(super) fn read_accept<C: Channel>(ch: &mut C) -> Result<()> {
    let f = ch.recv_frame_limited(1 + MAX_REASON)?;
    match f.split_first() {
        Some((&ACCEPT, [])) => Ok(()),
        Some((0, reason)) => Err(NnError::Refused(secinfer_net::sanitize_peer_text(
            &String::from_utf8_lossy(reason),
            MAX_REASON,
        ))),
        _ => Err(NnError::Malformed("choco: bad answer to the hello".into())),
    }
}
