//! `ferret::lpn` — the primal-LPN expansion with a local linear code: output `i` is
//! `y_i = v_i ⊕ ⊕_{d<D} x_{pos(i, d)}` for the `k`-vector `x` of reserved COTs, `D = 10`
//! positions per row (Ferret's local linear code, as in emp-ot). Applied to both parties' COTs it
//! keeps the correlation (`z ⊕ y = (e ⊕ A·r)·Δ`), and under LPN with regular noise `e ⊕ A·r` is
//! pseudorandom.
//!
//! The positions are public: AES-CTR under a fixed public key is read as a stream of 32-bit words,
//! ten per row (words `10i … 10i + 9` for row `i`), each mapped to `[0, k)` by `⌊w·k / 2^32⌋` (a
//! public code, so the ≤ k/2^32 relative non-uniformity of the map is harmless). Rows are processed in tasks
//! of `LPN_TASK` rows: the positions of a task are generated in one pipelined AES call, then the
//! ten gathers per row run from the `k`-vector (16·k bytes: 7 MiB for `ferret_b13`, which sits in
//! L3 — the loads are random, so the task batching mainly keeps the AES pipeline full).
use rayon::prelude::*;
use secinfer_core::AesCipher;
use secinfer_core::Block;
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

/// The positions of rows `first..first + rows`, `LPN_D` each (`k < 2^32`): word `LPN_D·i + d`
/// of the AES-CTR stream is position `d` of row `i` (2.5 blocks per row, none wasted).
fn positions(first: usize, rows: usize, k: usize, buf: &mut Vec<Block>, pos: &mut Vec<u32>) {
    let w0 = LPN_D * first;
    let skip = w0 % 4;
    let nb = (skip + LPN_D * rows).div_ceil(4);
    buf.resize(nb, Block::ZERO);
    code_cipher().ctr_fill((w0 / 4) as u128, buf);
    pos.resize(LPN_D * rows, 0);
    let words: &[u32] = bytemuck::cast_slice(&buf[..]);
    for (p, &w) in pos.iter_mut().zip(&words[skip..]) {
        *p = ((w as u64 * k as u64) >> 32) as u32;
    }
}

/// `out[r] ^= ⊕_d x[pos(r, d)]` for the rows of one task.
#[inline]
fn gather_blocks(x: &[Block], pos: &[u32], out: &mut [Block]) {
    for (y, p) in out.iter_mut().zip(pos.chunks_exact(LPN_D)) {
        let mut acc = *y;
        for &j in p {
            acc ^= x[j as usize];
        }
        *y = acc;
    }
}

/// Sender: `out[i] ^= ⊕_d x[pos(i, d)]` for every row (row `i` of `out` is code row `i`).
pub(crate) fn lpn_encode_send(x: &[Block], out: &mut [Block]) {
    let k = x.len();
    out.par_chunks_mut(LPN_TASK).enumerate().for_each_init(
        || (Vec::new(), Vec::new()),
        |(buf, pos), (t, o)| {
            positions(t * LPN_TASK, o.len(), k, buf, pos);
            gather_blocks(x, pos, o);
        },
    );
}

/// Receiver: the same on its values, and `out_bits[i] ^= ⊕_d x_bits[pos(i, d)]` on its choice
/// bits (`out_bits` holds `e` on entry). The bits are gathered from a packed copy (k/8 bytes,
/// L1/L2-resident) in a second pass over the task's positions, which are still in cache.
pub(crate) fn lpn_encode_receive(
    x: &[Block],
    x_bits: &[bool],
    out: &mut [Block],
    out_bits: &mut [bool],
) {
    let k = x.len();
    debug_assert_eq!(x_bits.len(), k);
    let mut packed = vec![0u64; k.div_ceil(64)];
    for (j, &b) in x_bits.iter().enumerate() {
        packed[j / 64] |= (b as u64) << (j % 64);
    }
    let packed = &packed;
    out.par_chunks_mut(LPN_TASK)
        .zip(out_bits.par_chunks_mut(LPN_TASK))
        .enumerate()
        .for_each_init(
            || (Vec::new(), Vec::new()),
            |(buf, pos), (t, (o, ob))| {
                positions(t * LPN_TASK, o.len(), k, buf, pos);
                gather_blocks(x, pos, o);
                for (b, p) in ob.iter_mut().zip(pos.chunks_exact(LPN_D)) {
                    let mut acc = *b as u64;
                    for &j in p {
                        acc ^= packed[j as usize / 64] >> (j % 64);
                    }
                    *b = acc & 1 == 1;
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

#[cfg(test)]
mod timing {
    use super::*;
    use secinfer_core::Prg;

    /// `cargo test --release -p secinfer-ot --lib lpn_timing -- --ignored --nocapture`
    #[test]
    #[ignore]
    fn lpn_timing() {
        let (n, k) = (10_485_760usize, 452_000usize);
        let mut prg = Prg::from_seed(Block(1));
        let x = prg.blocks(k);
        let xb = prg.bits(k);
        let mut out = prg.blocks(n);
        let mut ob = prg.bits(n);
        for _ in 0..3 {
            let t = std::time::Instant::now();
            lpn_encode_send(&x, &mut out);
            let s = t.elapsed().as_secs_f64();
            let t = std::time::Instant::now();
            lpn_encode_receive(&x, &xb, &mut out, &mut ob);
            let r = t.elapsed().as_secs_f64();
            let t = std::time::Instant::now();
            let (mut buf, mut pos) = (Vec::new(), Vec::new());
            for i in (0..n).step_by(LPN_TASK) {
                positions(i, LPN_TASK, k, &mut buf, &mut pos);
            }
            let p = t.elapsed().as_secs_f64();
            eprintln!("send {s:.3} s, receive {r:.3} s, positions only {p:.3} s");
        }
    }
}
