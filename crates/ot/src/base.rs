//! Base OT: batched semi-honest Chou–Orlandi ("The Simplest OT", 2015) on Ristretto255.
//!
//! One message each way: the sender draws `a`, sends `A = a·G`; the receiver draws `b_i`, sends
//! `B_i = b_i·G + c_i·A` and keeps `k_{c_i} = H(A, i, B_i, b_i·A)`; the sender sets
//! `k_0 = H(A, i, B_i, a·B_i)` and `k_1 = H(A, i, B_i, a·B_i − a·A)`. `H` is SHA-256 with a
//! domain label, truncated to 128 bits; the sender's fresh `A` acts as the session id, and the
//! index `i` and `B_i` bind each key to its slot of the transcript.
//!
//! Hostile input: points arrive as 32-byte Ristretto encodings; a non-canonical encoding or the
//! identity is a [`OtError::Malformed`], never a panic.
use crate::aes::Prg;
use crate::block::Block;
use crate::error::OtError;
use curve25519_dalek::ristretto::{CompressedRistretto, RistrettoBasepointTable, RistrettoPoint};
use curve25519_dalek::scalar::Scalar;
use curve25519_dalek::traits::Identity;
use rayon::prelude::*;
use secinfer_net::Channel;
use sha2::{Digest, Sha256};

const LABEL: &[u8] = b"secinfer-ot/base/co15/v1";
/// Largest batch accepted (OT extension needs 128 or 256).
pub const MAX_BASE_OTS: usize = 1 << 16;

fn key(a: &[u8; 32], i: usize, b: &[u8; 32], p: &RistrettoPoint) -> Block {
    let mut h = Sha256::new();
    h.update(LABEL);
    h.update(a);
    h.update((i as u64).to_le_bytes());
    h.update(b);
    h.update(p.compress().as_bytes());
    let d = h.finalize();
    let mut k = [0u8; 16];
    k.copy_from_slice(&d[..16]);
    Block::from_bytes(k)
}

/// Decodes one canonical, non-identity Ristretto point.
fn decode(bytes: &[u8], what: &str) -> Result<RistrettoPoint, OtError> {
    let c = CompressedRistretto::from_slice(bytes)
        .map_err(|_| OtError::malformed(format!("{what}: not 32 bytes")))?;
    let p = c.decompress().ok_or_else(|| {
        OtError::malformed(format!("{what}: not a canonical Ristretto255 encoding"))
    })?;
    if p == RistrettoPoint::identity() {
        return Err(OtError::malformed(format!("{what}: the identity point")));
    }
    Ok(p)
}

/// Sender of `n` base OTs: returns the key pairs `(k0_i, k1_i)`.
pub fn base_ot_send<C: Channel>(
    ch: &mut C,
    n: usize,
    prg: &mut Prg,
) -> Result<Vec<[Block; 2]>, OtError> {
    if n > MAX_BASE_OTS {
        return Err(OtError::arg(format!(
            "{n} base OTs exceed the limit of {MAX_BASE_OTS}"
        )));
    }
    let a = Scalar::random(prg);
    let big_a = RistrettoPoint::mul_base(&a);
    let a_bytes = big_a.compress().to_bytes();
    ch.send_pod::<u8>(&a_bytes)?;
    ch.flush()?;
    let bs = ch.recv_pod::<u8>(32 * n)?;
    let aa = a * big_a;
    bs.par_chunks_exact(32)
        .enumerate()
        .map(|(i, enc)| {
            let b = decode(enc, "base OT receiver point")?;
            let ab = a * b;
            let mut eb = [0u8; 32];
            eb.copy_from_slice(enc);
            Ok([
                key(&a_bytes, i, &eb, &ab),
                key(&a_bytes, i, &eb, &(ab - aa)),
            ])
        })
        .collect()
}

/// Receiver of `choices.len()` base OTs: returns `k_{c_i}`.
pub fn base_ot_receive<C: Channel>(
    ch: &mut C,
    choices: &[bool],
    prg: &mut Prg,
) -> Result<Vec<Block>, OtError> {
    let n = choices.len();
    if n > MAX_BASE_OTS {
        return Err(OtError::arg(format!(
            "{n} base OTs exceed the limit of {MAX_BASE_OTS}"
        )));
    }
    let scalars: Vec<Scalar> = (0..n).map(|_| Scalar::random(prg)).collect();
    let a_frame = ch.recv_pod::<u8>(32)?;
    let big_a = decode(&a_frame, "base OT sender point")?;
    let mut a_bytes = [0u8; 32];
    a_bytes.copy_from_slice(&a_frame);
    // B_i = b_i·G + c_i·A, with c_i·A as a scalar multiplication so there is no secret branch.
    // Both multiples of A go through one precomputed table of A (constant-time fixed-base
    // multiplication, ~3× cheaper per product than a variable-base one; built once per batch).
    let table_a = RistrettoBasepointTable::create(&big_a);
    let out: Vec<([u8; 32], Block)> = scalars
        .par_iter()
        .zip(choices.par_iter())
        .enumerate()
        .map(|(i, (b, &c))| {
            let big_b = RistrettoPoint::mul_base(b) + &table_a * &Scalar::from(c as u8);
            let enc = big_b.compress().to_bytes();
            let k = key(&a_bytes, i, &enc, &(&table_a * b));
            (enc, k)
        })
        .collect();
    let mut frame = Vec::with_capacity(32 * n);
    for (enc, _) in &out {
        frame.extend_from_slice(enc);
    }
    ch.send_pod::<u8>(&frame)?;
    ch.flush()?;
    Ok(out.into_iter().map(|(_, k)| k).collect())
}
