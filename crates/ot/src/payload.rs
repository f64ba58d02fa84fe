//! Payload framing shared by IKNP, KK13 and the pooled OT: the sender masks its messages with
//! hashed keys and sends them in frames (of [`CHUNK_ROWS`] OTs for 1-of-2, of a deterministic
//! row count for 1-of-N); the receiver unpacks each frame and keeps the chosen value.
//!
//! Only the framing lives here: which keys, and under which hash domain and tweaks they are
//! hashed, stays with each protocol (passed in as a closure), so every protocol's wire bytes are
//! exactly what its own module says. Nothing here flushes; callers flush at the end of a flight.
use crate::error::OtError;
use crate::ext::{tccr_inplace, tweak, CHUNK_ROWS};
use crate::pack::{mask, pack_into, packed_len, Unpacker};
use rayon::prelude::*;
use secinfer_core::Block;
use secinfer_net::Channel;

/// Rows hashed per rayon task.
const HASH_TASK: usize = 2048;

/// `out[2j] = H(idx_j, k_j)`, `out[2j+1] = H(idx_j, k_j ⊕ Δ)` for `idx_j = first + j`, tweaked in
/// the caller's `domain` (IKNP and the pool each keep their own, so their hashes never collide).
pub(crate) fn hash_pairs_in(domain: u64, k: &[Block], delta: Block, first: u64, out: &mut [Block]) {
    out.par_chunks_mut(2 * HASH_TASK)
        .zip(k.par_chunks(HASH_TASK))
        .enumerate()
        .for_each(|(c, (o, k))| {
            for (pair, k) in o.chunks_exact_mut(2).zip(k) {
                pair[0] = *k;
                pair[1] = *k ^ delta;
            }
            let base = first.wrapping_add((c * HASH_TASK) as u64);
            tccr_inplace(o, |i| tweak(domain, base.wrapping_add((i / 2) as u64)));
        });
}

/// `xs[j] = H(first + j, xs[j])` in the caller's `domain`.
pub(crate) fn hash_rows_in(domain: u64, xs: &mut [Block], first: u64) {
    xs.par_chunks_mut(HASH_TASK).enumerate().for_each(|(c, x)| {
        let base = first.wrapping_add((c * HASH_TASK) as u64);
        tccr_inplace(x, |k| tweak(domain, base.wrapping_add(k as u64)));
    });
}

/// Refuses a message that does not fit in `bits` bits (it would leak through the packing).
pub(crate) fn check_fits(msgs: &[u64], bits: u32) -> Result<(), OtError> {
    let mk = mask(bits);
    if msgs.iter().any(|m| m & !mk != 0) {
        return Err(OtError::arg(format!(
            "a message does not fit in {bits} bits"
        )));
    }
    Ok(())
}

/// The low `bits` bits of each hashed key.
pub(crate) fn low_bits(h: &[Block], bits: u32) -> Vec<u64> {
    let mk = mask(bits);
    h.iter().map(|h| h.low_u64() & mk).collect()
}

/// Chosen-message sender, 128-bit messages: sends `y_j = (H(k_j) ⊕ m0_j, H(k_j ⊕ Δ) ⊕ m1_j)`
/// per [`CHUNK_ROWS`] frame. `hash_pairs(chunk, first_idx, out)` writes the `2·len` hashes of a
/// chunk whose first OT has index `first_idx`.
pub(crate) fn send_chosen_frames<C: Channel>(
    ch: &mut C,
    keys: &[Block],
    first: u64,
    msgs: &[[Block; 2]],
    hash_pairs: impl Fn(&[Block], u64, &mut [Block]),
) -> Result<(), OtError> {
    let mut y = vec![Block::ZERO; 2 * CHUNK_ROWS.min(msgs.len())];
    for (c, (kc, mc)) in keys
        .chunks(CHUNK_ROWS)
        .zip(msgs.chunks(CHUNK_ROWS))
        .enumerate()
    {
        let y = &mut y[..2 * kc.len()];
        hash_pairs(kc, first.wrapping_add((c * CHUNK_ROWS) as u64), y);
        let mflat: &[Block] = bytemuck::cast_slice(mc);
        for (y, m) in y.iter_mut().zip(mflat) {
            *y ^= *m;
        }
        ch.send_pod(y)?;
    }
    Ok(())
}

/// Chosen-message sender, `bits`-bit messages (already checked to fit): as
/// [`send_chosen_frames`], each masked word packed to `bits`.
pub(crate) fn send_chosen_u64_frames<C: Channel>(
    ch: &mut C,
    keys: &[Block],
    first: u64,
    msgs: &[[u64; 2]],
    bits: u32,
    hash_pairs: impl Fn(&[Block], u64, &mut [Block]),
) -> Result<(), OtError> {
    let mut y = vec![Block::ZERO; 2 * CHUNK_ROWS.min(msgs.len())];
    let mut frame = Vec::new();
    for (c, (kc, mc)) in keys
        .chunks(CHUNK_ROWS)
        .zip(msgs.chunks(CHUNK_ROWS))
        .enumerate()
    {
        let y = &mut y[..2 * kc.len()];
        hash_pairs(kc, first.wrapping_add((c * CHUNK_ROWS) as u64), y);
        send_masked(ch, y, bytemuck::cast_slice(mc), bits, &mut frame)?;
    }
    Ok(())
}

/// Sends `(keys[j] ⊕ msgs[j]) mod 2^bits` packed to `bits`, as one frame (`frame` is scratch).
fn send_masked<C: Channel>(
    ch: &mut C,
    keys: &[Block],
    msgs: &[u64],
    bits: u32,
    frame: &mut Vec<u8>,
) -> Result<(), OtError> {
    let mk = mask(bits);
    frame.clear();
    pack_into(
        keys.iter().zip(msgs).map(|(k, m)| (k.low_u64() ^ m) & mk),
        bits,
        frame,
    );
    ch.send_pod::<u8>(frame)?;
    Ok(())
}

/// Additive sender over `Z_{2^bits}`: returns `x_j = H(k_j)` and sends
/// `x_j + deltas[j] − H(k_j ⊕ Δ)` packed to `bits`, in frames of [`CHUNK_ROWS`].
pub(crate) fn send_correlated_frames<C: Channel>(
    ch: &mut C,
    keys: &[Block],
    first: u64,
    deltas: &[u64],
    bits: u32,
    hash_pairs: impl Fn(&[Block], u64, &mut [Block]),
) -> Result<Vec<u64>, OtError> {
    let mk = mask(bits);
    // Filled chunk by chunk rather than zeroed first: every x_j is written once.
    let mut xs = Vec::with_capacity(deltas.len());
    let mut y = vec![Block::ZERO; 2 * CHUNK_ROWS.min(deltas.len())];
    let mut frame = Vec::new();
    for (c, (kc, dc)) in keys
        .chunks(CHUNK_ROWS)
        .zip(deltas.chunks(CHUNK_ROWS))
        .enumerate()
    {
        let y = &mut y[..2 * kc.len()];
        hash_pairs(kc, first.wrapping_add((c * CHUNK_ROWS) as u64), y);
        let start = xs.len();
        xs.extend(y.chunks_exact(2).map(|h| h[0].low_u64() & mk));
        let xc = &xs[start..];
        frame.clear();
        pack_into(
            xc.iter()
                .zip(dc)
                .zip(y.chunks_exact(2))
                .map(|((x, d), h)| x.wrapping_add(*d).wrapping_sub(h[1].low_u64()) & mk),
            bits,
            &mut frame,
        );
        ch.send_pod::<u8>(&frame)?;
    }
    Ok(xs)
}

/// Chosen-message receiver, 128-bit messages: `out[j]` holds `H(k_{c_j})` and becomes
/// `msgs[j][c_j]`.
pub(crate) fn recv_chosen_frames<C: Channel>(
    ch: &mut C,
    out: &mut [Block],
    choices: &[bool],
) -> Result<(), OtError> {
    for (oc, cc) in out.chunks_mut(CHUNK_ROWS).zip(choices.chunks(CHUNK_ROWS)) {
        let y = ch.recv_pod::<Block>(2 * oc.len())?;
        for ((o, &c), y) in oc.iter_mut().zip(cc).zip(y.chunks_exact(2)) {
            // Branch-free pick of y[c].
            *o ^= y[0].and_bit(!c) ^ y[1].and_bit(c);
        }
    }
    Ok(())
}

/// Chosen-message receiver, `bits`-bit messages: `out[j]` holds `H(k_{c_j})` truncated and
/// becomes `msgs[j][c_j]`.
pub(crate) fn recv_chosen_u64_frames<C: Channel>(
    ch: &mut C,
    out: &mut [u64],
    choices: &[bool],
    bits: u32,
) -> Result<(), OtError> {
    for (oc, cc) in out.chunks_mut(CHUNK_ROWS).zip(choices.chunks(CHUNK_ROWS)) {
        let frame = ch.recv_bytes(packed_len(2 * oc.len(), bits))?;
        let mut up = Unpacker::new(&frame, bits);
        for (o, &c) in oc.iter_mut().zip(cc) {
            let y0 = up.next_value();
            let y1 = up.next_value();
            let cm = (c as u64).wrapping_neg();
            *o ^= (y0 & !cm) | (y1 & cm);
        }
    }
    Ok(())
}

/// Additive receiver: adds the sender's packed answer words (frames of [`CHUNK_ROWS`]) where the
/// choice is 1: `out[j] += c_j·y_j mod 2^bits`.
pub(crate) fn recv_correlated_frames<C: Channel>(
    ch: &mut C,
    mut out: Vec<u64>,
    choices: &[bool],
    bits: u32,
) -> Result<Vec<u64>, OtError> {
    let mk = mask(bits);
    for (oc, cc) in out.chunks_mut(CHUNK_ROWS).zip(choices.chunks(CHUNK_ROWS)) {
        let frame = ch.recv_bytes(packed_len(oc.len(), bits))?;
        let mut up = Unpacker::new(&frame, bits);
        for (o, &c) in oc.iter_mut().zip(cc) {
            let y = up.next_value() & (c as u64).wrapping_neg();
            *o = o.wrapping_add(y) & mk;
        }
    }
    Ok(out)
}

/// Checks a 1-of-N message matrix: a whole number of rows of `n`, each value `< 2^bits`.
pub(crate) fn check_n_msgs(n: usize, msgs: &[u64], bits: u32) -> Result<(), OtError> {
    #[allow(clippy::manual_is_multiple_of)] // is_multiple_of needs Rust 1.87; the MSRV is 1.85
    if msgs.len() % n != 0 {
        return Err(OtError::arg(format!(
            "{} messages are not a whole number of rows of {n}",
            msgs.len()
        )));
    }
    check_fits(msgs, bits)
}

/// Target size of one frame of 1-of-N payloads.
const N_FRAME_BYTES: usize = 4 << 20;
/// Candidate keys per frame at most (bounds the sender's 16-byte-per-key scratch).
const N_FRAME_KEYS: usize = 1 << 16;

/// Rows per frame of 1-of-N payloads: deterministic in `(n, bits)` so both sides agree.
fn n_frame_rows(n: usize, bits: u32) -> usize {
    (N_FRAME_BYTES * 8 / (n * bits as usize))
        .min(N_FRAME_KEYS / n)
        .max(1)
}

/// 1-of-N sender: for each frame of [`n_frame_rows`] rows, `keys_of(row0, keys)` writes the `n`
/// candidate keys of rows `row0..` (`keys.len() / n` rows); the masked values go out packed.
pub(crate) fn send_n_frames<C: Channel>(
    ch: &mut C,
    n: usize,
    msgs: &[u64],
    bits: u32,
    keys_of: impl FnMut(usize, &mut [Block]),
) -> Result<(), OtError> {
    send_n_frames_with(
        ch,
        n,
        msgs.len() / n,
        bits,
        keys_of,
        |row0, out: &mut [u64]| out.copy_from_slice(&msgs[row0 * n..row0 * n + out.len()]),
    )
}

/// [`send_n_frames`] with the messages made frame by frame: `msgs_of(row0, out)` writes the `n`
/// messages of rows `row0..` (`out.len() / n` rows), so a caller's `count × n` table never
/// exists at once (at n = 2^14 lookups of 2^7 rows it would be 16 MB of fresh pages, written
/// on one core). Every message is checked to fit in `bits` before it is masked.
pub(crate) fn send_n_frames_with<C: Channel>(
    ch: &mut C,
    n: usize,
    count: usize,
    bits: u32,
    mut keys_of: impl FnMut(usize, &mut [Block]),
    mut msgs_of: impl FnMut(usize, &mut [u64]),
) -> Result<(), OtError> {
    let rows_per_frame = n_frame_rows(n, bits);
    let cap = rows_per_frame.min(count) * n;
    let mut keys = vec![Block::ZERO; cap];
    let mut msgs = vec![0u64; cap];
    let mut frame = Vec::new();
    let mut row0 = 0;
    while row0 < count {
        let len = rows_per_frame.min(count - row0) * n;
        let (keys, msgs) = (&mut keys[..len], &mut msgs[..len]);
        msgs_of(row0, msgs);
        check_fits(msgs, bits)?;
        keys_of(row0, keys);
        send_masked(ch, keys, msgs, bits, &mut frame)?;
        row0 += rows_per_frame;
    }
    Ok(())
}

/// 1-of-N receiver: `out[j]` holds the chosen key truncated to `bits` and becomes
/// `msgs[j·n + choices[j]]`.
pub(crate) fn recv_n_frames<C: Channel>(
    ch: &mut C,
    n: usize,
    out: &mut [u64],
    choices: &[u8],
    bits: u32,
) -> Result<(), OtError> {
    let rows_per_frame = n_frame_rows(n, bits);
    for (oc, cc) in out
        .chunks_mut(rows_per_frame)
        .zip(choices.chunks(rows_per_frame))
    {
        let frame = ch.recv_bytes(packed_len(oc.len() * n, bits))?;
        let mut up = Unpacker::new(&frame, bits);
        for (o, &w) in oc.iter_mut().zip(cc) {
            // Read every candidate (the position in the frame must not depend on `w` through a
            // branch), keep the chosen one.
            let mut pick = 0u64;
            for x in 0..n {
                let v = up.next_value();
                pick |= v & ((x == w as usize) as u64).wrapping_neg();
            }
            *o ^= pick;
        }
    }
    Ok(())
}
