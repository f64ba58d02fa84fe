//! SoftSpokenOT (L. Roy, CRYPTO 2022), semi-honest: correlated OT from small-field subspace
//! VOLE, `128/k` bits per COT from receiver to sender instead of IKNP's 128.
//!
//! It produces exactly IKNP's correlation (the sender holds `Δ` and `q_j`, the receiver
//! `t_j = q_j ⊕ c_j·Δ`), so it fills the pools of [`crate::pool`] unchanged
//! ([`CotSource::SoftSpoken`](crate::CotSource::SoftSpoken)).
//!
//! # Protocol
//!
//! `Δ`'s 128 bits are cut into `⌈128/k⌉` chunks of `k` bits (the last one shorter when `k` does
//! not divide 128); chunk `i` covers columns `i·k ..`, and `Δ_i` is its bits as a number.
//!
//! * **Setup** (once): the same 128 public-key base OTs as IKNP, same roles (the extension sender
//!   is the base-OT receiver and chooses the bits of `Δ`). For each chunk the extension receiver
//!   builds a GGM tree of depth `w` (the chunk's width) whose `2^w` leaves `s_x` it all knows;
//!   the sender must learn every leaf but `s_{Δ_i}` (an all-but-one OT, i.e. a punctured PRF key).
//!   Level 1 of the tree *is* the base OT of the chunk's top bit (node `b` is the key of choice
//!   `1 − b`, so the sender learns the node off its path). For each deeper level `L` the receiver
//!   sends the XOR of the level's even nodes and of its odd nodes, masked by the two keys of the
//!   base OT of bit `w − L` (crossed the same way); the sender unmasks the sum off its path and
//!   recovers the missing sibling. Setup traffic: `⌈128/k⌉·(k − 1)·32` bytes (none for `k = 1`,
//!   3.5 KiB for `k = 8`). GGM children are `AES_s(0), AES_s(1)` (the [`Prg`] keyed by `s`).
//! * **Extension** of `m` rows, per chunk: every leaf `x` is a [`Prg`] keyed by `s_x` whose
//!   counter runs on across calls (so every batch uses fresh output); `r_x = G(s_x)` is `m` bits.
//!   The receiver computes `u = ⊕_x r_x` and, for each bit `j < w`,
//!   `v_j = ⊕_{x : x_j = 1} r_x`, and sends `d = u ⊕ c` (`m` bits per chunk: `⌈128/k⌉` bits per
//!   row). The sender, lacking `r_{Δ_i}`, computes the same sums `u'`, `v'_j` with any stand-in
//!   for it (a dummy leaf); `v'_j ⊕ Δ_j·u' = ⊕_{x : x_j ≠ Δ_j} r_x` never contains the
//!   `x = Δ_i` term (the stand-in cancels, so nothing branches on `Δ_i`) and equals
//!   `v_j ⊕ Δ_j·u`; it sets `q_j = v'_j ⊕ Δ_j·(u' ⊕ d) = v_j ⊕ Δ_j·c`. Column
//!   `i·k + j` of the receiver is `v_j`: stacking the chunks' columns and transposing (the
//!   same [`transpose`](crate::transpose) as IKNP) gives rows with `t_j = q_j ⊕ c_j·Δ`. All sums
//!   run over the leaves in order with a stack of partial subtree sums, about two XORs of an
//!   `m`-bit vector per leaf.
//!
//! `k = 1` is IKNP exactly: one leaf per side of each base OT, the same 16 bytes per COT, no
//! setup message. CPU cost grows like `2^k/k` AES blocks per row (receiver; `(2^k − 1)/k` for
//! the sender) against IKNP's 2 and 1, while the bytes fall like `1/k`.
//!
//! # Security
//!
//! Semi-honest security, as the rest of the project (DESIGN.md §2), in the minicrypt model:
//! AES-128 as a PRF/PRG (the GGM tree, and the leaf streams in counter mode; the sender's view
//! of the punctured tree hides `s_{Δ_i}`, so `r_{Δ_i}` masks `c` in `d`), and the base OTs. COTs
//! are output un-hashed exactly like IKNP's; the derived flavours hash them with the tweakable
//! correlation-robust hash (the pool does so), which is what makes `q_j, q_j ⊕ Δ` usable as
//! independent keys. The receiver's leaf PRGs must never rewind: the counter continues across
//! calls, and an error poisons the instance. The paper's consistency check against a malicious
//! receiver is *not* implemented (out of the threat model): a malicious receiver sending an
//! inconsistent `d` could learn bits of `Δ` by selective failure. The sender's GGM
//! reconstruction indexes by its secret `Δ_i` (setup only; local timing is out of scope).
use crate::aes::Prg;
use crate::base::{base_ot_receive, base_ot_send};
use crate::block::Block;
use crate::error::OtError;
use crate::ext::{cols_to_rows, pack_choices, CHUNK_ROWS};
use rayon::prelude::*;
use secinfer_net::{Channel, NetError};

/// Largest chunk width `k` (2^8 leaves per chunk).
pub const SOFTSPOKEN_MAX_K: u32 = 8;

/// `k` as a width, or a typed error outside `1..=8`.
pub(crate) fn check_k(k: u32) -> Result<usize, OtError> {
    if (1..=SOFTSPOKEN_MAX_K).contains(&k) {
        Ok(k as usize)
    } else {
        Err(OtError::arg(format!(
            "SoftSpokenOT needs 1 ≤ k ≤ {SOFTSPOKEN_MAX_K}, got {k}"
        )))
    }
}

/// `(first column, width)` of every chunk.
fn layout(k: usize) -> Vec<(usize, usize)> {
    (0..128).step_by(k).map(|c| (c, k.min(128 - c))).collect()
}

/// Blocks of the setup message: two level sums for every level below the first.
fn setup_blocks(k: usize) -> usize {
    layout(k).iter().map(|&(_, w)| 2 * (w - 1)).sum()
}

/// The GGM children of `s`: `AES_s(0), AES_s(1)`.
fn expand(s: Block) -> [Block; 2] {
    let mut o = [Block::ZERO; 2];
    Prg::from_seed(s).fill_blocks(&mut o);
    o
}

/// Same guard as IKNP: an error leaves the leaf PRGs out of step, so the instance refuses more.
fn guarded<T>(poisoned: &mut bool, f: impl FnOnce() -> Result<T, OtError>) -> Result<T, OtError> {
    if *poisoned {
        return Err(OtError::arg(
            "this SoftSpokenOT instance failed earlier and is out of step with its peer",
        ));
    }
    let r = f();
    if r.is_err() {
        *poisoned = true;
    }
    r
}

/// One chunk's leaves (a PRG each; the sender's punctured leaf is a dummy whose output cancels).
struct Chunk {
    w: usize,
    leaves: Vec<Prg>,
}

/// Blocks per leaf per pass of [`accumulate`]: one AES call's worth, so the stack of partial
/// sums and the `v` accumulators (`2·k + 1` arrays of 1 KiB) stay in L1 across all leaves.
const SUB: usize = 64;

/// `v[j·nb..]` = XOR of `r_x` over the leaves with bit `j` of `x` set, `u` = XOR of all, where
/// `r_x` is the next `nb` blocks of leaf `x`. Leaves are visited in order with a stack of
/// completed subtree sums (level `l` waits for its sibling), `SUB` blocks at a time.
fn accumulate(chunk: &mut Chunk, nb: usize, v: &mut [Block], u: &mut [Block]) {
    let w = chunk.w;
    let mut stack = [[Block::ZERO; SUB]; SOFTSPOKEN_MAX_K as usize];
    let mut acc = [[Block::ZERO; SUB]; SOFTSPOKEN_MAX_K as usize];
    let mut cur = [Block::ZERO; SUB];
    for b0 in (0..nb).step_by(SUB) {
        let n = SUB.min(nb - b0);
        for a in acc.iter_mut().take(w) {
            a[..n].fill(Block::ZERO);
        }
        for (x, leaf) in chunk.leaves.iter_mut().enumerate() {
            let cur = &mut cur[..n];
            leaf.fill_blocks(cur);
            let mut idx = x;
            let mut l = 0;
            while l < w {
                if idx & 1 == 0 {
                    stack[l][..n].copy_from_slice(cur);
                    break;
                }
                // An odd node at level l: every leaf below it has bit l set.
                for ((c, a), s) in cur.iter_mut().zip(&mut acc[l][..n]).zip(&stack[l][..n]) {
                    *a ^= *c;
                    *c ^= *s;
                }
                idx >>= 1;
                l += 1;
            }
            if l == w {
                u[b0..b0 + n].copy_from_slice(cur);
            }
        }
        for (j, a) in acc.iter().enumerate().take(w) {
            v[j * nb + b0..j * nb + b0 + n].copy_from_slice(&a[..n]);
        }
    }
}

/// The SoftSpokenOT sender: holds `Δ` and all leaves but one per chunk. Not `Debug` (secret).
pub struct SoftSpokenSender {
    k: usize,
    delta: Block,
    chunks: Vec<Chunk>,
    /// Per column: all-ones where the bit of `Δ` is 1.
    delta_masks: Vec<Block>,
    cols: Vec<Block>,
    poisoned: bool,
}

impl SoftSpokenSender {
    /// Base OTs (as base-OT receiver, choosing the bits of a random `Δ`) and the GGM setup.
    pub fn setup<C: Channel>(ch: &mut C, prg: &mut Prg, k: u32) -> Result<Self, OtError> {
        let mut delta = prg.next_block();
        while delta == Block::ZERO {
            delta = prg.next_block();
        }
        Self::setup_with_delta(ch, prg, delta, k)
    }

    /// As [`setup`](Self::setup) with a caller-chosen non-zero `Δ`.
    pub fn setup_with_delta<C: Channel>(
        ch: &mut C,
        prg: &mut Prg,
        delta: Block,
        k: u32,
    ) -> Result<Self, OtError> {
        check_k(k)?;
        if delta == Block::ZERO {
            return Err(OtError::arg("Δ must be non-zero"));
        }
        let s: Vec<bool> = (0..128).map(|i| (delta.0 >> i) & 1 == 1).collect();
        let keys = base_ot_receive(ch, &s, prg)?;
        Self::from_base_ots(ch, delta, &keys, k)
    }

    /// A sender on base OTs made elsewhere (`keys[i]` is the key the peer's pair `i` gives for
    /// bit `i` of `delta`, as with [`OtExtSender::from_base_ots`](crate::OtExtSender)); receives
    /// the GGM setup message from [`SoftSpokenReceiver::from_base_ots`].
    pub fn from_base_ots<C: Channel>(
        ch: &mut C,
        delta: Block,
        keys: &[Block],
        k: u32,
    ) -> Result<Self, OtError> {
        let k = check_k(k)?;
        if delta == Block::ZERO {
            return Err(OtError::arg("Δ must be non-zero"));
        }
        if keys.len() != 128 {
            return Err(OtError::arg("SoftSpokenOT needs exactly 128 base OTs"));
        }
        let nmsg = setup_blocks(k);
        let msg: Vec<Block> = if nmsg == 0 {
            Vec::new()
        } else {
            ch.recv_pod(nmsg)?
        };
        let mut msgs = msg.chunks_exact(2);
        let mut chunks = Vec::new();
        for (col0, w) in layout(k) {
            let di = ((delta.0 >> col0) as usize) & ((1 << w) - 1);
            // Level 1: the node off the path is the base-OT key of the chunk's top bit.
            let p1 = di >> (w - 1);
            let mut level = vec![Block::ZERO; 2];
            level[1 - p1] = keys[col0 + w - 1];
            for lv in 2..=w {
                let key = keys[col0 + w - lv];
                let path = di >> (w - lv);
                let parent = path >> 1;
                let mut next = vec![Block::ZERO; 1 << lv];
                for (y, s) in level.iter().enumerate() {
                    if y != parent {
                        let c = expand(*s);
                        next[2 * y] = c[0];
                        next[2 * y + 1] = c[1];
                    }
                }
                // The sum of the side off the path (parity 1 − b), unmasked with key_b.
                let off = 1 - (path & 1);
                let pair = msgs
                    .next()
                    .ok_or_else(|| OtError::malformed("short SoftSpokenOT setup"))?;
                let mut sib = pair[off] ^ key;
                for (y, n) in next.iter().enumerate() {
                    if y & 1 == off && y != path ^ 1 {
                        sib ^= *n;
                    }
                }
                next[path ^ 1] = sib;
                next[path] = Block::ZERO;
                level = next;
            }
            let leaves = level.iter().map(|s| Prg::from_seed(*s)).collect();
            chunks.push(Chunk { w, leaves });
        }
        Ok(SoftSpokenSender {
            k,
            delta,
            chunks,
            delta_masks: s_masks(delta),
            cols: Vec::new(),
            poisoned: false,
        })
    }

    /// The global correlation `Δ`.
    pub fn delta(&self) -> Block {
        self.delta
    }

    /// Bits per chunk.
    pub fn k(&self) -> u32 {
        self.k as u32
    }

    /// Correlated OT into a caller's buffer: `out[j] = q_j`; the receiver gets `q_j ⊕ c_j·Δ`.
    pub fn send_cot_into<C: Channel>(
        &mut self,
        ch: &mut C,
        out: &mut [Block],
    ) -> Result<(), OtError> {
        let mut poisoned = self.poisoned;
        let r = guarded(&mut poisoned, || self.run(ch, out));
        self.poisoned = poisoned;
        r
    }

    /// Correlated OT: returns `q_j`; the receiver gets `q_j ⊕ c_j·Δ`.
    pub fn send_cot<C: Channel>(&mut self, ch: &mut C, n: usize) -> Result<Vec<Block>, OtError> {
        let mut out = vec![Block::ZERO; n];
        self.send_cot_into(ch, &mut out)?;
        Ok(out)
    }

    fn run<C: Channel>(&mut self, ch: &mut C, out: &mut [Block]) -> Result<(), OtError> {
        let m = out.len();
        let k = self.k;
        let nchunks = self.chunks.len();
        let mut start = 0;
        while start < m {
            let len = CHUNK_ROWS.min(m - start);
            let nb = len.div_ceil(128);
            let expected = nchunks * nb * 16;
            let d = ch.recv_frame()?;
            if d.len() != expected {
                return Err(NetError::UnexpectedLength {
                    expected,
                    got: d.len(),
                }
                .into());
            }
            self.cols.resize(128 * nb, Block::ZERO);
            self.cols[..128 * nb]
                .par_chunks_mut(k * nb)
                .zip(d.par_chunks(nb * 16))
                .zip(self.chunks.par_iter_mut())
                .zip(self.delta_masks.par_chunks(k))
                .for_each(|(((v, d), chunk), dm)| {
                    // The punctured leaf's (dummy) output lands in both u and every v_j with
                    // Δ_j = 1, so it cancels from v_j ⊕ Δ_j·u: no branch or mask on Δ_i.
                    let mut u = vec![Block::ZERO; nb];
                    accumulate(chunk, nb, v, &mut u);
                    // u' ⊕ d, then q_j = v'_j ⊕ Δ_j·(u' ⊕ d).
                    for (u, d) in u.iter_mut().zip(d.chunks_exact(16)) {
                        let mut b = [0u8; 16];
                        b.copy_from_slice(d);
                        *u ^= Block::from_bytes(b);
                    }
                    for (vj, &dj) in v.chunks_exact_mut(nb).zip(dm) {
                        for (a, b) in vj.iter_mut().zip(&u) {
                            *a ^= *b & dj;
                        }
                    }
                });
            cols_to_rows(&self.cols[..128 * nb], nb, 1, &mut out[start..start + len]);
            start += len;
        }
        Ok(())
    }
}

fn s_masks(delta: Block) -> Vec<Block> {
    (0..128)
        .map(|i| Block::ONES.and_bit((delta.0 >> i) & 1 == 1))
        .collect()
}

/// The SoftSpokenOT receiver: knows every leaf. Not `Debug` (secret state).
pub struct SoftSpokenReceiver {
    k: usize,
    chunks: Vec<Chunk>,
    cols: Vec<Block>,
    corr: Vec<Block>,
    code: Vec<Block>,
    poisoned: bool,
}

impl SoftSpokenReceiver {
    /// Base OTs (as base-OT sender) and the GGM setup message.
    pub fn setup<C: Channel>(ch: &mut C, prg: &mut Prg, k: u32) -> Result<Self, OtError> {
        check_k(k)?;
        let keys = base_ot_send(ch, 128, prg)?;
        Self::from_base_ots(ch, &keys, k)
    }

    /// A receiver on base OTs made elsewhere (the 128 seed pairs this party sent): sends the
    /// GGM setup message to [`SoftSpokenSender::from_base_ots`].
    pub fn from_base_ots<C: Channel>(
        ch: &mut C,
        keys: &[[Block; 2]],
        k: u32,
    ) -> Result<Self, OtError> {
        let k = check_k(k)?;
        if keys.len() != 128 {
            return Err(OtError::arg("SoftSpokenOT needs exactly 128 base OTs"));
        }
        let mut msg = Vec::with_capacity(setup_blocks(k));
        let mut chunks = Vec::new();
        for (col0, w) in layout(k) {
            // Node b of level 1 is the key of choice 1 − b: the sender learns the node off its
            // path, whose bit is its choice.
            let kp = keys[col0 + w - 1];
            let mut level = vec![kp[1], kp[0]];
            for lv in 2..=w {
                let kp = keys[col0 + w - lv];
                let mut next = vec![Block::ZERO; 1 << lv];
                for (y, s) in level.iter().enumerate() {
                    let c = expand(*s);
                    next[2 * y] = c[0];
                    next[2 * y + 1] = c[1];
                }
                let mut sums = [Block::ZERO; 2];
                for (y, n) in next.iter().enumerate() {
                    sums[y & 1] ^= *n;
                }
                msg.push(sums[0] ^ kp[1]);
                msg.push(sums[1] ^ kp[0]);
                level = next;
            }
            let leaves = level.iter().map(|s| Prg::from_seed(*s)).collect();
            chunks.push(Chunk { w, leaves });
        }
        if !msg.is_empty() {
            ch.send_pod(&msg)?;
            ch.flush()?;
        }
        Ok(SoftSpokenReceiver {
            k,
            chunks,
            cols: Vec::new(),
            corr: Vec::new(),
            code: Vec::new(),
            poisoned: false,
        })
    }

    /// Bits per chunk.
    pub fn k(&self) -> u32 {
        self.k as u32
    }

    /// Correlated OT into a caller's buffer: `out[j] = q_j ⊕ c_j·Δ`.
    pub fn recv_cot_into<C: Channel>(
        &mut self,
        ch: &mut C,
        choices: &[bool],
        out: &mut [Block],
    ) -> Result<(), OtError> {
        if out.len() != choices.len() {
            return Err(OtError::arg("recv_cot_into: one output block per choice"));
        }
        let mut poisoned = self.poisoned;
        let r = guarded(&mut poisoned, || {
            self.run(ch, choices, out)?;
            ch.flush()?;
            Ok(())
        });
        self.poisoned = poisoned;
        r
    }

    /// Correlated OT: returns `q_j ⊕ c_j·Δ`.
    pub fn recv_cot<C: Channel>(
        &mut self,
        ch: &mut C,
        choices: &[bool],
    ) -> Result<Vec<Block>, OtError> {
        let mut out = vec![Block::ZERO; choices.len()];
        self.recv_cot_into(ch, choices, &mut out)?;
        Ok(out)
    }

    fn run<C: Channel>(
        &mut self,
        ch: &mut C,
        choices: &[bool],
        out: &mut [Block],
    ) -> Result<(), OtError> {
        let m = choices.len();
        let k = self.k;
        let nchunks = self.chunks.len();
        let mut start = 0;
        while start < m {
            let len = CHUNK_ROWS.min(m - start);
            let nb = len.div_ceil(128);
            self.code.resize(nb, Block::ZERO);
            pack_choices(&choices[start..start + len], &mut self.code);
            self.cols.resize(128 * nb, Block::ZERO);
            self.corr.resize(nchunks * nb, Block::ZERO);
            let code = &self.code;
            self.cols[..128 * nb]
                .par_chunks_mut(k * nb)
                .zip(self.corr[..nchunks * nb].par_chunks_mut(nb))
                .zip(self.chunks.par_iter_mut())
                .for_each(|((v, d), chunk)| {
                    accumulate(chunk, nb, v, d);
                    for (d, c) in d.iter_mut().zip(code) {
                        *d ^= *c;
                    }
                });
            ch.send_pod(&self.corr[..nchunks * nb])?;
            cols_to_rows(&self.cols[..128 * nb], nb, 1, &mut out[start..start + len]);
            start += len;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_covers_128_columns() {
        for k in 1..=8 {
            let l = layout(k);
            assert_eq!(l.iter().map(|c| c.1).sum::<usize>(), 128, "k {k}");
            assert_eq!(l.len(), 128usize.div_ceil(k));
        }
        assert_eq!(setup_blocks(1), 0);
        assert_eq!(setup_blocks(8), 16 * 14);
        assert!(check_k(0).is_err() && check_k(9).is_err() && check_k(4).is_ok());
    }

    #[test]
    fn accumulate_matches_naive_sums() {
        for w in 1..=5 {
            let nb = 3 + SUB;
            let mk = |seed: u128| Chunk {
                w,
                leaves: (0..1u128 << w)
                    .map(|x| Prg::from_seed(Block(seed + x)))
                    .collect(),
            };
            let mut c = mk(100);
            let mut v = vec![Block::ONES; w * nb];
            let mut u = vec![Block::ZERO; nb];
            accumulate(&mut c, nb, &mut v, &mut u);
            let r: Vec<Vec<Block>> = mk(100).leaves.iter_mut().map(|p| p.blocks(nb)).collect();
            for b in 0..nb {
                let all = r.iter().fold(Block::ZERO, |a, x| a ^ x[b]);
                assert_eq!(u[b], all, "w {w} u");
                for j in 0..w {
                    let s = r
                        .iter()
                        .enumerate()
                        .filter(|(x, _)| (x >> j) & 1 == 1)
                        .fold(Block::ZERO, |a, (_, x)| a ^ x[b]);
                    assert_eq!(v[j * nb + b], s, "w {w} j {j}");
                }
            }
        }
    }
}
