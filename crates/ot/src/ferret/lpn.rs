//! `ferret::lpn` — the primal-LPN expansion with a local linear code: output `i` is
//! `y_i = v_i ⊕ ⊕_{d<D} x_{pos(i, d)}` for the `k`-vector `x` of reserved COTs, `D = 10`
//! positions per row (Ferret §5, the code emp-ot uses). Applied to both parties' COTs it keeps the
//! correlation (`z ⊕ y = (e ⊕ A·r)·Δ`), and under LPN with regular noise `e ⊕ A·r` is
//! pseudorandom.
//!
//! The positions are public: AES under a fixed public key of the counter `3i, 3i+1, 3i+2` gives
//! twelve 32-bit words for row `i`; the first ten are mapped to `[0, k)` by `⌊w·k / 2^32⌋` (a
//! public code, so the tiny non-uniformity of the map is harmless). Rows are processed in tasks
//! of [`LPN_TASK`]: the positions of a task are generated in one pipelined AES call, then the
//! ten gathers per row run from the `k`-vector (16·k bytes: 7 MiB for `ferret_b13`, which sits in
//! L3 — the loads are random, so the task batching mainly keeps the AES pipeline full).
use crate::aes::AesCipher;
use crate::block::Block;
use rayon::prelude::*;
use std::sync::OnceLock;

/// Positions per row (the code's row weight).
pub const LPN_D: usize = 10;
/// Rows per rayon task.
const LPN_TASK: usize = 2048;
/// Public key of the position generator (digits of √2).
const LPN_KEY: u128 = 0x6a09_e667_f3bc_c908_b2fb_1366_ea95_7d3e;

fn code_cipher() -> &'static AesCipher {
    static C: OnceLock<AesCipher> = OnceLock::new();
    C.get_or_init(|| AesCipher::new(Block(LPN_KEY)))
}

/// The positions of rows `first..first + rows`, `LPN_D` each (`k < 2^32`).
fn positions(first: usize, rows: usize, k: usize, buf: &mut Vec<Block>, pos: &mut Vec<u32>) {
    buf.resize(3 * rows, Block::ZERO);
    code_cipher().ctr_fill(3 * first as u128, buf);
    pos.clear();
    for row in buf.chunks_exact(3) {
        let mut words = row
            .iter()
            .flat_map(|b| (0..4).map(move |q| (b.0 >> (32 * q)) as u32));
        for _ in 0..LPN_D {
            let w = words.next().unwrap_or(0) as u64;
            pos.push(((w * k as u64) >> 32) as u32);
        }
    }
}

/// Sender: `out[i] ^= ⊕_d x[pos(i, d)]` for every row (row `i` of `out` is code row `i`).
pub(crate) fn lpn_encode_send(x: &[Block], out: &mut [Block]) {
    let k = x.len();
    out.par_chunks_mut(LPN_TASK).enumerate().for_each_init(
        || (Vec::new(), Vec::new()),
        |(buf, pos), (t, o)| {
            positions(t * LPN_TASK, o.len(), k, buf, pos);
            for (y, p) in o.iter_mut().zip(pos.chunks_exact(LPN_D)) {
                let mut acc = *y;
                for &j in p {
                    acc ^= x[j as usize];
                }
                *y = acc;
            }
        },
    );
}

/// Receiver: the same on its values, and `out_bits[i] ^= ⊕_d x_bits[pos(i, d)]` on its choice
/// bits (`out_bits` holds `e` on entry).
pub(crate) fn lpn_encode_receive(
    x: &[Block],
    x_bits: &[bool],
    out: &mut [Block],
    out_bits: &mut [bool],
) {
    let k = x.len();
    debug_assert_eq!(x_bits.len(), k);
    out.par_chunks_mut(LPN_TASK)
        .zip(out_bits.par_chunks_mut(LPN_TASK))
        .enumerate()
        .for_each_init(
            || (Vec::new(), Vec::new()),
            |(buf, pos), (t, (o, ob))| {
                positions(t * LPN_TASK, o.len(), k, buf, pos);
                for ((y, b), p) in o.iter_mut().zip(ob.iter_mut()).zip(pos.chunks_exact(LPN_D)) {
                    let mut acc = *y;
                    let mut bit = *b;
                    for &j in p {
                        acc ^= x[j as usize];
                        bit ^= x_bits[j as usize];
                    }
                    *y = acc;
                    *b = bit;
                }
            },
        );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_are_in_range_and_spread() {
        let (mut buf, mut pos) = (Vec::new(), Vec::new());
        let k = 1000;
        positions(5, 3000, k, &mut buf, &mut pos);
        assert_eq!(pos.len(), 3000 * LPN_D);
        assert!(pos.iter().all(|&p| (p as usize) < k));
        let mut hits = vec![0u32; k];
        for &p in &pos {
            hits[p as usize] += 1;
        }
        // 30 per position on average; a broken map would leave many empty or pile up.
        assert!(hits.iter().all(|&h| (5..=70).contains(&h)), "{hits:?}");
        // Rows are a function of their index only (both parties, any task split).
        let (mut b2, mut p2) = (Vec::new(), Vec::new());
        positions(6, 1, k, &mut b2, &mut p2);
        assert_eq!(p2[..], pos[LPN_D..2 * LPN_D]);
    }
}
