//! The frames of a choco session and their size limits (peer bytes are hostile: every frame is
//! received with the largest length its message can have, then decoded with range checks).
use crate::error::{NnError, Result};
use secinfer_he::{Params, SecretKey};
use secinfer_net::Channel;

pub(super) const HELLO: &[u8; 4] = b"CHC1";

/// The client's keys, per plaintext prime: its public key and its Galois keys (`GKS1`),
/// serialised; the server's step decodes them with the session's parameters.
pub struct KeyUpload {
    pub per_prime: Vec<(Vec<u8>, Vec<u8>)>,
}

/// One linear layer's input: per plaintext prime, the client's seeded ciphertexts, serialised.
pub struct Upload {
    pub per_prime: Vec<Vec<Vec<u8>>>,
}

/// One linear layer's result: per plaintext prime, the flooded and re-randomised ciphertexts,
/// serialised.
pub struct Results {
    pub per_prime: Vec<Vec<Vec<u8>>>,
}

/// The client's fresh secret keys, one per parameter set, and the key message carrying their
/// public and Galois keys for `steps`.
pub(super) fn make_keys(sets: &[Params], steps: &[usize]) -> (Vec<SecretKey>, KeyUpload) {
    let keys: Vec<SecretKey> = sets.iter().map(SecretKey::generate).collect();
    let per_prime = keys
        .iter()
        .map(|sk| {
            (
                sk.public_key().to_bytes(),
                sk.rotation_keys(steps, false).to_bytes(),
            )
        })
        .collect();
    (keys, KeyUpload { per_prime })
}

/// Receives `per` frames of at most `limit(p)` bytes for each parameter set `p`.
pub(super) fn recv_per_prime<C: Channel>(
    ch: &mut C,
    sets: &[Params],
    per: usize,
    limit: fn(&Params) -> usize,
) -> Result<Vec<Vec<Vec<u8>>>> {
    sets.iter()
        .map(|p| {
            (0..per)
                .map(|_| Ok(ch.recv_frame_limited(limit(p))?))
                .collect()
        })
        .collect()
}

/// Sends every frame of `per_prime`, in order, and flushes.
pub(super) fn send_per_prime<C: Channel>(ch: &mut C, per_prime: Vec<Vec<Vec<u8>>>) -> Result<()> {
    for f in per_prime.into_iter().flatten() {
        ch.send_frame_vec(f)?;
    }
    Ok(ch.flush()?)
}

/// A message with per-prime parts must have one part per prime and `per` items in each.
pub(super) fn check_counts<T>(
    what: &str,
    per_prime: &[Vec<T>],
    primes: usize,
    per: usize,
) -> Result<()> {
    if per_prime.len() != primes || per_prime.iter().any(|v| v.len() != per) {
        return Err(NnError::Malformed(format!(
            "choco: {what} of another shape than {primes} primes × {per} ciphertexts"
        )));
    }
    Ok(())
}
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

/// Bytes of one Galois key record in the `GKS1` wire form.
fn galois_record(p: &Params) -> usize {
    8 + p.ks_digits() * (32 + p.residue_bytes() * p.n() * (p.num_q() + 1))
}

/// Galois key records per frame: a session's keys (hundreds of megabytes for the masked
/// baseline) go in frames that stay under the channel's frame limit.
const KEYS_PER_FRAME: usize = 16;

/// Client: sends `GaloisKeys::to_bytes` as its 8-byte header, then frames of at most
/// [`KEYS_PER_FRAME`] key records. Returns the bytes sent.
pub(super) fn send_galois<C: Channel>(ch: &mut C, p: &Params, bytes: Vec<u8>) -> Result<u64> {
    let rec = galois_record(p);
    if bytes.len() < 8 || !(bytes.len() - 8).is_multiple_of(rec) {
        return Err(NnError::Protocol(
            "choco: Galois keys of an odd length".into(),
        ));
    }
    ch.send_frame(&bytes[..8])?;
    for chunk in bytes[8..].chunks(rec * KEYS_PER_FRAME) {
        ch.send_frame(chunk)?;
    }
    Ok(bytes.len() as u64)
}

/// Server: receives the frames of [`send_galois`] for at most `steps` keys and joins them
/// into the `GKS1` form, checking the count against `steps` before allocating.
pub(super) fn recv_galois<C: Channel>(ch: &mut C, p: &Params, steps: usize) -> Result<Vec<u8>> {
    let head = ch.recv_frame_limited(8)?;
    if head.len() != 8 || &head[..4] != b"GKS1" {
        return Err(NnError::Malformed("choco: bad Galois key header".into()));
    }
    let count = u32::from_le_bytes([head[4], head[5], head[6], head[7]]) as usize;
    if count > steps {
        return Err(NnError::Malformed(format!(
            "choco: {count} Galois keys, the session uses at most {steps}"
        )));
    }
    let rec = galois_record(p);
    let mut out = Vec::with_capacity(8 + count * rec);
    out.extend_from_slice(&head);
    let mut left = count;
    while left > 0 {
        let take = left.min(KEYS_PER_FRAME);
        let f = ch.recv_frame_limited(take * rec)?;
        if f.len() != take * rec {
            return Err(NnError::Malformed("choco: short Galois key frame".into()));
        }
        out.extend_from_slice(&f);
        left -= take;
    }
    Ok(out)
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
