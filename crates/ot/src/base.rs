//! Base OT: batched semi-honest Chou–Orlandi ("The Simplest OT", 2015) on Ristretto255.
//!
//! One message each way: the sender draws `a`, sends `A = a·G`; the receiver draws `b_i`, sends
//! `B_i = b_i·G + c_i·A` and keeps `k_{c_i} = H(A, i, B_i, b_i·A)`; the sender sets
//! `k_0 = H(A, i, B_i, a·B_i)` and `k_1 = H(A, i, B_i, a·B_i − a·A)`. `H` is SHA-256 with a
//! domain label, truncated to 128 bits; the sender's fresh `A` acts as the session id, and the
//! index `i` and `B_i` bind each key to its slot of the transcript.
//!
//! Computation (not the protocol): both sides work with halved scalars and encode the doubled
//! points with Ristretto's batched double-and-encode (one field inversion per 64 points instead
//! of an inverse square root per point), and the receiver's `c_i·A` is a constant-time
//! selection of `A` or the identity; the encodings, messages and keys are those of the plain
//! computation (test `batched_encodings_match_plain_ones`).
//!
//! Hostile input: points arrive as 32-byte Ristretto encodings; a non-canonical encoding or the
//! identity is a [`OtError::Malformed`], never a panic.
use crate::error::OtError;
use curve25519_dalek::ristretto::{CompressedRistretto, RistrettoBasepointTable, RistrettoPoint};
use curve25519_dalek::scalar::Scalar;
use curve25519_dalek::traits::Identity;
use rayon::prelude::*;
use secinfer_core::Block;
use secinfer_core::Prg;
use secinfer_net::Channel;
use sha2::{Digest, Sha256};
use subtle::{Choice, ConditionallySelectable};

const LABEL: &[u8] = b"secinfer-ot/base/co15/v1";
/// Largest batch accepted (OT extension needs 128 or 256).
pub const MAX_BASE_OTS: usize = 1 << 16;

fn key(a: &[u8; 32], i: usize, b: &[u8; 32], p: &CompressedRistretto) -> Block {
    let mut h = Sha256::new();
    h.update(LABEL);
    h.update(a);
    h.update((i as u64).to_le_bytes());
    h.update(b);
    h.update(p.as_bytes());
    let d = h.finalize();
    let mut k = [0u8; 16];
    k.copy_from_slice(&d[..16]);
    Block::from_bytes(k)
}

/// Points per batch of [`double_and_compress`] (one field inversion per batch; two batches per
/// 128 OTs keep both cores busy).
const COMPRESS_BATCH: usize = 64;

/// The encodings of `2·P` for every `P`, by Ristretto's batched double-and-encode: one field
/// inversion per [`COMPRESS_BATCH`] points instead of an inverse square root per point (a
/// plain `compress` is most of a base OT's field work). Both sides halve their scalars so that
/// the doubled points are exactly the ones the protocol names (the encodings, hence the keys
/// and the messages, are those of the one-point-at-a-time computation).
fn double_and_compress(points: &[RistrettoPoint]) -> Vec<CompressedRistretto> {
    points
        .par_chunks(COMPRESS_BATCH)
        .flat_map_iter(RistrettoPoint::double_and_compress_batch)
        .collect()
}

/// 1/2 mod ℓ.
fn half() -> Scalar {
    Scalar::from(2u8).invert()
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
    // With a' = a/2: a·B_i = 2·(a'·B_i) and a·B_i − a·A = 2·(a'·B_i − a'·A), encoded in batches.
    let ah = a * half();
    let ah_a = ah * big_a;
    let pts: Vec<[RistrettoPoint; 2]> = bs
        .par_chunks_exact(32)
        .map(|enc| {
            let b = decode(enc, "base OT receiver point")?;
            let p = ah * b;
            Ok([p, p - ah_a])
        })
        .collect::<Result<_, OtError>>()?;
    let flat: Vec<RistrettoPoint> = pts.iter().flatten().copied().collect();
    let encs = double_and_compress(&flat);
    Ok(bs
        .chunks_exact(32)
        .zip(encs.chunks_exact(2))
        .enumerate()
        .map(|(i, (enc, e))| {
            let mut eb = [0u8; 32];
            eb.copy_from_slice(enc);
            [key(&a_bytes, i, &eb, &e[0]), key(&a_bytes, i, &eb, &e[1])]
        })
        .collect())
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
    // b_i = 2·h_i (uniform, as h_i is): B_i = 2·(h_i·G + c_i·A/2) and b_i·A = 2·(h_i·A), so
    // both points are encoded by the batched double-and-encode.
    let hs: Vec<Scalar> = (0..n).map(|_| Scalar::random(prg)).collect();
    let a_frame = ch.recv_pod::<u8>(32)?;
    let big_a = decode(&a_frame, "base OT sender point")?;
    let mut a_bytes = [0u8; 32];
    a_bytes.copy_from_slice(&a_frame);
    // One precomputed table of A (constant-time fixed-base multiplication, ~3× cheaper per
    // product than a variable-base one; built once per batch). c_i·A/2 is a constant-time
    // selection between the identity and A/2, so there is no secret branch.
    let table_a = RistrettoBasepointTable::create(&big_a);
    let a_half = &table_a * &half();
    let id = RistrettoPoint::identity();
    let pts: Vec<[RistrettoPoint; 2]> = hs
        .par_iter()
        .zip(choices.par_iter())
        .map(|(h, &c)| {
            let ca = RistrettoPoint::conditional_select(&id, &a_half, Choice::from(c as u8));
            [RistrettoPoint::mul_base(h) + ca, &table_a * h]
        })
        .collect();
    let flat: Vec<RistrettoPoint> = pts.iter().flatten().copied().collect();
    let encs = double_and_compress(&flat);
    let mut frame = Vec::with_capacity(32 * n);
    for e in encs.chunks_exact(2) {
        frame.extend_from_slice(e[0].as_bytes());
    }
    ch.send_pod::<u8>(&frame)?;
    ch.flush()?;
    Ok(encs
        .chunks_exact(2)
        .enumerate()
        .map(|(i, e)| key(&a_bytes, i, e[0].as_bytes(), &e[1]))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batched_encodings_match_plain_ones() {
        let mut prg = Prg::from_seed(Block(17));
        let mut pts: Vec<RistrettoPoint> = (0..130)
            .map(|_| RistrettoPoint::mul_base(&Scalar::random(&mut prg)))
            .collect();
        pts.push(RistrettoPoint::identity());
        let got = double_and_compress(&pts);
        for (p, e) in pts.iter().zip(&got) {
            assert_eq!((p + p).compress(), *e);
        }
        // The halved scalars give the protocol's points.
        let a = Scalar::random(&mut prg);
        let b = pts[3];
        assert_eq!(
            (a * b).compress(),
            ((a * half()) * b + (a * half()) * b).compress()
        );
    }
}
