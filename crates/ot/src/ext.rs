//! The engine shared by IKNP (128 columns) and KK13 (256 columns): PRG-expanded column seeds,
//! the receiver's correction matrix `u`, the bit transpose, chunked streaming and the hashes.
//!
//! Notation (IKNP): the receiver holds seed pairs `(k0_i, k1_i)`, the sender `k_{s_i}`. For a
//! chunk of rows, column `i` of the receiver's matrix is `t_i = G(k0_i)`, and it sends
//! `u_i = t_i ⊕ G(k1_i) ⊕ code_i`, where `code_i` is column `i` of the encoded choices (the choice
//! bits themselves for IKNP, the Walsh–Hadamard codewords for KK13). The sender computes
//! `q_i = G(k_{s_i}) ⊕ s_i·u_i`; transposed, row `j` is `q_j = t_j ⊕ (code(c_j) ∧ s)`.
//!
//! Rows are processed [`CHUNK_ROWS`] at a time, so scratch memory is a few MiB whatever the
//! count; each chunk is one frame on the wire, and all frames go the same way, so a call costs
//! one round however many chunks it has.
use crate::error::OtError;
use crate::hash::fixed_key_aes;
use crate::transpose::transpose128_lanes;
use rayon::prelude::*;
use secinfer_core::Block;
use secinfer_core::Prg;
use secinfer_net::{Channel, NetError};

/// Rows per extension chunk (a 1 MiB frame of `u` for IKNP, 2 MiB for KK13).
pub const CHUNK_ROWS: usize = 1 << 16;

/// The tweak for OT index `idx` in hash domain `domain` (domains keep the hashes of different
/// OT flavours, and of the two halves of a KK13 row, apart).
#[inline]
pub(crate) fn tweak(domain: u64, idx: u64) -> Block {
    Block(((domain as u128) << 64) | idx as u128)
}

/// `xs[j] = tccr(tweak(j), xs[j])` in place, 64 blocks at a time through AES, no allocation.
pub(crate) fn tccr_inplace(xs: &mut [Block], tweak: impl Fn(usize) -> Block) {
    let fk = fixed_key_aes();
    let mut px = [Block::ZERO; 64];
    for (c, chunk) in xs.chunks_mut(64).enumerate() {
        let n = chunk.len();
        fk.permute_many(chunk);
        px[..n].copy_from_slice(chunk);
        for (j, x) in chunk.iter_mut().enumerate() {
            *x ^= tweak(c * 64 + j);
        }
        fk.permute_many(chunk);
        for (x, p) in chunk.iter_mut().zip(&px[..n]) {
            *x ^= *p;
        }
    }
}

/// `xs[j] = tccr(tweaks[j], xs[j])` in place (lengths must match), no allocation.
pub(crate) fn tccr_tweaked(xs: &mut [Block], tweaks: &[Block]) {
    debug_assert_eq!(xs.len(), tweaks.len());
    let fk = fixed_key_aes();
    let mut px = [Block::ZERO; 64];
    for (chunk, tw) in xs.chunks_mut(64).zip(tweaks.chunks(64)) {
        let n = chunk.len();
        fk.permute_many(chunk);
        px[..n].copy_from_slice(chunk);
        for (x, t) in chunk.iter_mut().zip(tw) {
            *x ^= *t;
        }
        fk.permute_many(chunk);
        for (x, p) in chunk.iter_mut().zip(&px[..n]) {
            *x ^= *p;
        }
    }
}

/// Packs choice bits into blocks (bit `k` of block `b` is `choices[128·b + k]`); the padding of a
/// short last block is zero. Eight bools (bytes 0/1) become eight bits with one multiply.
pub(crate) fn pack_choices(choices: &[bool], out: &mut [Block]) {
    let bytes: &[u8] = bytemuck::cast_slice(choices);
    for (o, c) in out.iter_mut().zip(bytes.chunks(128)) {
        let mut v = 0u128;
        let mut words = c.chunks_exact(8);
        for (i, w) in words.by_ref().enumerate() {
            let mut b = [0u8; 8];
            b.copy_from_slice(w);
            // Byte k (0 or 1) of x lands in bit 56 + k of the product's top byte.
            let x = u64::from_le_bytes(b);
            let bits = (x.wrapping_mul(0x0102_0408_1020_4080) >> 56) as u128;
            v |= bits << (8 * i);
        }
        let done = c.len() - words.remainder().len();
        for (k, &bit) in words.remainder().iter().enumerate() {
            v |= ((bit & 1) as u128) << (done + k);
        }
        *o = Block(v);
    }
}

/// 128-row blocks transposed per task: their column words are adjacent (4 × 16 bytes = one cache
/// line), so the strided gather reads whole lines instead of one word per line.
const GATHER: usize = 4;

/// Transposes `w` groups of 128 columns (`cols[col·nb + b]`) into rows: row `r` of the chunk is
/// `rows[r·w .. r·w + w]`. `rows` holds only the real rows (the last 128-block may be partial).
pub(crate) fn cols_to_rows(cols: &[Block], nb: usize, w: usize, rows: &mut [Block]) {
    rows.par_chunks_mut(GATHER * 128 * w)
        .enumerate()
        .for_each(|(t, out)| {
            let b0 = t * GATHER;
            let nblk = out.len().div_ceil(128 * w);
            let mut a = [[[0u64; 2]; 128]; GATHER];
            for g in 0..w {
                for i in 0..128 {
                    let col = &cols[(g * 128 + i) * nb + b0..(g * 128 + i) * nb + b0 + nblk];
                    for (ak, c) in a.iter_mut().zip(col) {
                        ak[i] = [c.0 as u64, (c.0 >> 64) as u64];
                    }
                }
                for (k, ak) in a.iter_mut().enumerate().take(nblk) {
                    transpose128_lanes(ak);
                    let o = &mut out[k * 128 * w..];
                    let nrows = (o.len() / w).min(128);
                    for (r, x) in ak.iter().enumerate().take(nrows) {
                        o[r * w + g] = Block(x[0] as u128 | (x[1] as u128) << 64);
                    }
                }
            }
        });
}

/// The receiving side of the extension (it knows both seeds of every column).
pub(crate) struct ExtReceiver {
    g0: Vec<Prg>,
    g1: Vec<Prg>,
    t_cols: Vec<Block>,
    u_cols: Vec<Block>,
    rows: Vec<Block>,
    code: Vec<Block>,
}

impl ExtReceiver {
    pub(crate) fn new(keys: &[[Block; 2]]) -> Self {
        ExtReceiver {
            g0: keys.iter().map(|k| Prg::from_seed(k[0])).collect(),
            g1: keys.iter().map(|k| Prg::from_seed(k[1])).collect(),
            t_cols: Vec::new(),
            u_cols: Vec::new(),
            rows: Vec::new(),
            code: Vec::new(),
        }
    }

    fn width(&self) -> usize {
        self.g0.len() / 128
    }

    /// IO-free step 1 of a chunk of `len ≤ CHUNK_ROWS` rows: `fill_code(len, nb, code)` writes the
    /// encoded choices (either `nb` blocks shared by every column, or `nb` per column); returns
    /// the correction `u`, column-major, which is the whole message of the chunk to the sender.
    pub(crate) fn encode_chunk(
        &mut self,
        len: usize,
        fill_code: impl FnOnce(usize, &mut Vec<Block>),
    ) -> &[Block] {
        debug_assert!(len <= CHUNK_ROWS);
        let ncols = 128 * self.width();
        let nb = len.div_ceil(128);
        self.t_cols.resize(ncols * nb, Block::ZERO);
        self.u_cols.resize(ncols * nb, Block::ZERO);
        self.code.clear();
        fill_code(nb, &mut self.code);
        let code = &self.code;
        let shared = code.len() == nb;
        debug_assert!(shared || code.len() == ncols * nb);
        self.t_cols[..ncols * nb]
            .par_chunks_mut(nb)
            .zip(self.u_cols[..ncols * nb].par_chunks_mut(nb))
            .zip(self.g0.par_iter_mut().zip(self.g1.par_iter_mut()))
            .enumerate()
            .for_each(|(i, ((t, u), (g0, g1)))| {
                g0.fill_blocks(t);
                g1.fill_blocks(u);
                let c = if shared {
                    &code[..nb]
                } else {
                    &code[i * nb..(i + 1) * nb]
                };
                for ((u, t), c) in u.iter_mut().zip(t.iter()).zip(c) {
                    *u ^= *t ^ *c;
                }
            });
        &self.u_cols[..ncols * nb]
    }

    /// The message of the chunk [`encode_chunk`](Self::encode_chunk) made last (`len` rows).
    pub(crate) fn last_message(&self, len: usize) -> &[Block] {
        &self.u_cols[..128 * self.width() * len.div_ceil(128)]
    }

    /// IO-free step 2 of the chunk [`encode_chunk`](Self::encode_chunk) made: its `t` rows,
    /// `len·w` blocks, into `rows`. Split from step 1 so that a driver sends `u` before the
    /// transpose.
    pub(crate) fn chunk_rows(&self, len: usize, rows: &mut [Block]) {
        let w = self.width();
        let nb = len.div_ceil(128);
        cols_to_rows(&self.t_cols[..128 * w * nb], nb, w, rows);
    }

    /// Extends `m` rows, the driver over [`encode_chunk`](Self::encode_chunk) and
    /// [`chunk_rows`](Self::chunk_rows): `fill_code(start, len, nb, code)` encodes the chunk
    /// starting at row `start`, its frame of `u` goes to the peer, and `sink(start, rows)` gets
    /// the chunk's `t` rows.
    ///
    /// With `direct = Some(out)` (`m·w` blocks) the rows are transposed straight into `out` and
    /// `sink` sees them there.
    pub(crate) fn run<C: Channel>(
        &mut self,
        ch: &mut C,
        m: usize,
        mut direct: Option<&mut [Block]>,
        mut fill_code: impl FnMut(usize, usize, usize, &mut Vec<Block>),
        mut sink: impl FnMut(usize, &mut [Block]) -> Result<(), OtError>,
    ) -> Result<(), OtError> {
        let w = self.width();
        let mut scratch = std::mem::take(&mut self.rows);
        let mut start = 0;
        let r = (|| {
            while start < m {
                let len = CHUNK_ROWS.min(m - start);
                let u = self.encode_chunk(len, |nb, code| fill_code(start, len, nb, code));
                ch.send_pod(u)?;
                let rows = match direct.as_deref_mut() {
                    Some(out) => &mut out[start * w..(start + len) * w],
                    None => {
                        scratch.resize(len * w, Block::ZERO);
                        &mut scratch[..len * w]
                    }
                };
                self.chunk_rows(len, rows);
                sink(start, rows)?;
                start += len;
            }
            Ok(())
        })();
        self.rows = scratch;
        r
    }
}

/// The sending side of the extension (it knows one seed per column, chosen by `s`).
pub(crate) struct ExtSender {
    g: Vec<Prg>,
    /// All-ones where `s_i = 1`: applied with AND, so no branch depends on `s`.
    s_mask: Vec<Block>,
    q_cols: Vec<Block>,
    rows: Vec<Block>,
}

impl ExtSender {
    pub(crate) fn new(keys: &[Block], s: &[bool]) -> Self {
        ExtSender {
            g: keys.iter().map(|k| Prg::from_seed(*k)).collect(),
            s_mask: s.iter().map(|&b| Block::ONES.and_bit(b)).collect(),
            q_cols: Vec::new(),
            rows: Vec::new(),
        }
    }

    fn width(&self) -> usize {
        self.g.len() / 128
    }

    /// IO-free step of a chunk of `len ≤ CHUNK_ROWS` rows: absorbs the receiver's correction
    /// `u` (the chunk's whole message, whose length is checked here) and writes the chunk's `q`
    /// rows, `len·w` blocks, into `rows`.
    pub(crate) fn decode_chunk(
        &mut self,
        u: &[u8],
        len: usize,
        rows: &mut [Block],
    ) -> Result<(), OtError> {
        debug_assert!(len <= CHUNK_ROWS);
        let w = self.width();
        let ncols = 128 * w;
        let nb = len.div_ceil(128);
        let expected = ncols * nb * 16;
        if u.len() != expected {
            return Err(NetError::UnexpectedLength {
                expected,
                got: u.len(),
            }
            .into());
        }
        self.q_cols.resize(ncols * nb, Block::ZERO);
        self.q_cols[..ncols * nb]
            .par_chunks_mut(nb)
            .zip(u.par_chunks(nb * 16))
            .zip(self.g.par_iter_mut().zip(self.s_mask.par_iter()))
            .for_each(|((q, u), (g, &s))| {
                g.fill_blocks(q);
                for (q, u) in q.iter_mut().zip(u.chunks_exact(16)) {
                    let mut b = [0u8; 16];
                    b.copy_from_slice(u);
                    *q ^= Block::from_bytes(b) & s;
                }
            });
        cols_to_rows(&self.q_cols[..ncols * nb], nb, w, rows);
        Ok(())
    }

    /// Extends `m` rows, the driver over [`decode_chunk`](Self::decode_chunk): one frame of `u`
    /// per chunk; `sink(start, rows)` gets the chunk's `q` rows (written straight into `direct`
    /// when given, `m·w` blocks).
    pub(crate) fn run<C: Channel>(
        &mut self,
        ch: &mut C,
        m: usize,
        mut direct: Option<&mut [Block]>,
        mut sink: impl FnMut(usize, &mut [Block]) -> Result<(), OtError>,
    ) -> Result<(), OtError> {
        let w = self.width();
        let mut scratch = std::mem::take(&mut self.rows);
        let mut start = 0;
        let r = (|| {
            while start < m {
                let len = CHUNK_ROWS.min(m - start);
                // The frame is read in place (no typed copy); `decode_chunk` checks its length.
                let u = ch.recv_frame()?;
                let rows = match direct.as_deref_mut() {
                    Some(out) => &mut out[start * w..(start + len) * w],
                    None => {
                        scratch.resize(len * w, Block::ZERO);
                        &mut scratch[..len * w]
                    }
                };
                self.decode_chunk(&u, len, rows)?;
                sink(start, rows)?;
                start += len;
            }
            Ok(())
        })();
        self.rows = scratch;
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn pack_choices_matches_bitwise_packing() {
        let mut prg = Prg::from_seed(Block(11));
        for n in [0usize, 1, 7, 8, 9, 127, 128, 129, 1000] {
            let c = prg.bits(n);
            let mut out = vec![Block::ONES; n.div_ceil(128)];
            pack_choices(&c, &mut out);
            for (j, &bit) in c.iter().enumerate() {
                assert_eq!((out[j / 128].0 >> (j % 128)) & 1 == 1, bit, "n {n} bit {j}");
            }
            if n % 128 != 0 {
                assert_eq!(out[n / 128].0 >> (n % 128), 0, "padding of n {n}");
            }
        }
    }
}
