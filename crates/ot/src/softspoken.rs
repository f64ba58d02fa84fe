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
//! Layout (both sides): a batch of up to [`CHUNK_ROWS`] rows runs as rayon tasks of 32 blocks
//! of 128 rows; a task reads every leaf's stream at its blocks' offset (counter mode, so no
//! task waits for another), writes the columns of each block next to each other in the output
//! rows themselves and transposes them there, so no batch-sized column buffer exists. The
//! correction message `d` of a batch stays chunk-major on the wire (chunk `i`'s `m` bits in a
//! row, as before the tiles: builds interoperate); each receiver task writes its blocks' words
//! chunk by chunk, and one copy per task and chunk puts them in place before sending.
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
use crate::base::{base_ot_receive, base_ot_send};
use crate::error::OtError;
use crate::ext::{pack_choices, CHUNK_ROWS};
use crate::pack::blocks_of;
use crate::transpose::transpose128_lanes;
use rayon::prelude::*;
use secinfer_core::Block;
use secinfer_core::Prg;
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

const POISONED: &str = "this SoftSpokenOT instance failed earlier and is out of step with its peer";

/// Same guard as IKNP: an error leaves the leaf PRGs out of step, so the instance refuses more.
fn guarded<T>(poisoned: &mut bool, f: impl FnOnce() -> Result<T, OtError>) -> Result<T, OtError> {
    if *poisoned {
        return Err(OtError::arg(POISONED));
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

/// Blocks of 128 rows per rayon task of the extension: a task runs every chunk's leaves over its
/// blocks and transposes them into its rows while they are in cache (columns never go through
/// a batch-sized buffer). 32 blocks: 4096 rows, 16 tasks per [`CHUNK_ROWS`] batch.
const TILE: usize = 32;

/// Per-task scratch of [`accumulate_tile`]: `acc[j]` = v_j, `u`, the stack of partial sums and
/// the current leaf's output, `TILE` blocks each.
struct TileScratch {
    acc: [[Block; TILE]; SOFTSPOKEN_MAX_K as usize],
    stack: [[Block; TILE]; SOFTSPOKEN_MAX_K as usize],
    cur: [Block; TILE],
    u: [Block; TILE],
}

impl TileScratch {
    fn new() -> Box<Self> {
        Box::new(TileScratch {
            acc: [[Block::ZERO; TILE]; SOFTSPOKEN_MAX_K as usize],
            stack: [[Block::ZERO; TILE]; SOFTSPOKEN_MAX_K as usize],
            cur: [Block::ZERO; TILE],
            u: [Block::ZERO; TILE],
        })
    }
}

/// The leaf sums of one chunk over blocks `off .. off + n` (n ≤ `TILE`) of this batch: every
/// leaf `x` in order with a stack of completed subtree sums (level `l` waits for its sibling),
/// about two XORs of `n` blocks per leaf; each leaf's stream is read at that offset without
/// moving it (the caller skips every leaf by the batch's blocks afterwards): `sc.acc[j][..n]` = v_j, `sc.u[..n]` = u. An even leaf is written straight into
/// its stack slot (it waits there for its odd sibling).
fn accumulate_tile(leaves: &[Prg], w: usize, off: u64, n: usize, sc: &mut TileScratch) {
    let TileScratch { acc, stack, cur, u } = sc;
    for a in acc.iter_mut().take(w) {
        a[..n].fill(Block::ZERO);
    }
    for (x, leaf) in leaves.iter().enumerate() {
        if x & 1 == 0 {
            leaf.fill_blocks_at(off, &mut stack[0][..n]);
            continue;
        }
        let cur = &mut cur[..n];
        leaf.fill_blocks_at(off, cur);
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
            u[..n].copy_from_slice(cur);
        }
    }
}

/// Transposes a tile's 128-column blocks in place: block `b` holds column `c` at
/// `tile[128·b + c]` before and row `r` at `tile[128·b + r]` after.
fn transpose_tile(tile: &mut [Block]) {
    for blk in tile.chunks_exact_mut(128) {
        let lanes: &mut [[u64; 2]] = bytemuck::cast_slice_mut(blk);
        let lanes: &mut [[u64; 2]; 128] = lanes.try_into().expect("128 rows");
        transpose128_lanes(lanes);
    }
}

/// Runs `f` on a tile of `n` blocks whose rows go to `rows` (`rows.len() ≤ 128·n`): in place
/// when the rows fill the tile, else (a batch's short last block) in a scratch tile.
fn with_tile(rows: &mut [Block], n: usize, f: impl FnOnce(&mut [Block])) {
    if rows.len() == 128 * n {
        f(rows);
    } else {
        let mut tile = vec![Block::ZERO; 128 * n];
        f(&mut tile);
        rows.copy_from_slice(&tile[..rows.len()]);
    }
}

/// The SoftSpokenOT sender: holds `Δ` and all leaves but one per chunk. Not `Debug` (secret).
pub struct SoftSpokenSender {
    k: usize,
    delta: Block,
    chunks: Vec<Chunk>,
    /// Per column: all-ones where the bit of `Δ` is 1.
    delta_masks: Vec<Block>,
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
        let nmsg = setup_blocks(check_k(k)?);
        let msg: Vec<Block> = if nmsg == 0 {
            Vec::new()
        } else {
            ch.recv_pod(nmsg)?
        };
        Self::from_setup_message(delta, keys, k, bytemuck::cast_slice(&msg))
    }

    /// IO-free: a sender on base OTs made elsewhere and the bytes of the receiver's GGM setup
    /// message ([`SoftSpokenReceiver::setup_message`]), whose length is checked here.
    pub fn from_setup_message(
        delta: Block,
        keys: &[Block],
        k: u32,
        msg: &[u8],
    ) -> Result<Self, OtError> {
        let k = check_k(k)?;
        if delta == Block::ZERO {
            return Err(OtError::arg("Δ must be non-zero"));
        }
        if keys.len() != 128 {
            return Err(OtError::arg("SoftSpokenOT needs exactly 128 base OTs"));
        }
        let msg = blocks_of(msg, setup_blocks(k))?;
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

    /// IO-free correlated OT on at most [`CHUNK_ROWS`] rows: absorbs the message of the
    /// receiver's [`SoftSpokenReceiver::cot_step`] for `out.len()` OTs and writes `q_j` into
    /// `out`. The channel calls are this step in a loop.
    pub fn cot_step(&mut self, msg: &[u8], out: &mut [Block]) -> Result<(), OtError> {
        if out.len() > CHUNK_ROWS {
            return Err(OtError::arg(format!(
                "a SoftSpokenOT step takes at most {CHUNK_ROWS} rows, not {}",
                out.len()
            )));
        }
        let mut poisoned = self.poisoned;
        let r = guarded(&mut poisoned, || self.decode_chunk(msg, out));
        self.poisoned = poisoned;
        r
    }

    fn run<C: Channel>(&mut self, ch: &mut C, out: &mut [Block]) -> Result<(), OtError> {
        for rows in out.chunks_mut(CHUNK_ROWS) {
            let d = ch.recv_frame()?;
            self.decode_chunk(&d, rows)?;
        }
        Ok(())
    }

    /// One chunk (`out.len() ≤ CHUNK_ROWS` rows) from the receiver's correction `d`.
    fn decode_chunk(&mut self, d: &[u8], out: &mut [Block]) -> Result<(), OtError> {
        let len = out.len();
        let k = self.k;
        let nchunks = self.chunks.len();
        let nb = len.div_ceil(128);
        let expected = nchunks * nb * 16;
        if d.len() != expected {
            return Err(NetError::UnexpectedLength {
                expected,
                got: d.len(),
            }
            .into());
        }
        let chunks = &self.chunks;
        let dm = &self.delta_masks;
        out.par_chunks_mut(TILE * 128).enumerate().for_each_init(
            TileScratch::new,
            |sc, (t, rows)| {
                let b0 = t * TILE;
                let n = rows.len().div_ceil(128);
                with_tile(rows, n, |tile| {
                    for (i, chunk) in chunks.iter().enumerate() {
                        // The punctured leaf's (dummy) output lands in both u and every v_j
                        // with Δ_j = 1, so it cancels from v_j ⊕ Δ_j·u: no branch or mask on
                        // Δ_i.
                        accumulate_tile(&chunk.leaves, chunk.w, (t * TILE) as u64, n, sc);
                        let col0 = i * k;
                        for b in 0..n {
                            // u' ⊕ d, then q_j = v'_j ⊕ Δ_j·(u' ⊕ d); d is chunk-major.
                            let at = 16 * (i * nb + b0 + b);
                            let mut db = [0u8; 16];
                            db.copy_from_slice(&d[at..at + 16]);
                            let ud = sc.u[b] ^ Block::from_bytes(db);
                            let row = &mut tile[128 * b + col0..128 * b + col0 + chunk.w];
                            for (j, q) in row.iter_mut().enumerate() {
                                *q = sc.acc[j][b] ^ (ud & dm[col0 + j]);
                            }
                        }
                    }
                    transpose_tile(tile);
                });
            },
        );
        for chunk in &mut self.chunks {
            for leaf in &mut chunk.leaves {
                leaf.skip(nb as u64);
            }
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
    corr: Vec<Block>,
    wire: Vec<Block>,
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
        let (r, msg) = Self::setup_message(keys, k)?;
        if !msg.is_empty() {
            ch.send_pod(&msg)?;
            ch.flush()?;
        }
        Ok(r)
    }

    /// IO-free: a receiver on base OTs made elsewhere and the GGM setup message for
    /// [`SoftSpokenSender::from_setup_message`] (empty when `k = 1`).
    pub fn setup_message(keys: &[[Block; 2]], k: u32) -> Result<(Self, Vec<Block>), OtError> {
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
        Ok((
            SoftSpokenReceiver {
                k,
                chunks,
                corr: Vec::new(),
                wire: Vec::new(),
                code: Vec::new(),
                poisoned: false,
            },
            msg,
        ))
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

    /// IO-free correlated OT on at most [`CHUNK_ROWS`] choices: writes `q_j ⊕ c_j·Δ` into
    /// `out` and returns the message for the sender's [`SoftSpokenSender::cot_step`]
    /// (`⌈128/k⌉` bits per OT).
    pub fn cot_step(&mut self, choices: &[bool], out: &mut [Block]) -> Result<&[u8], OtError> {
        if out.len() != choices.len() {
            return Err(OtError::arg("cot_step: one output block per choice"));
        }
        if choices.len() > CHUNK_ROWS {
            return Err(OtError::arg(format!(
                "a SoftSpokenOT step takes at most {CHUNK_ROWS} rows, not {}",
                choices.len()
            )));
        }
        if self.poisoned {
            return Err(OtError::arg(POISONED));
        }
        Ok(bytemuck::cast_slice(self.encode_chunk(choices, out)))
    }

    fn run<C: Channel>(
        &mut self,
        ch: &mut C,
        choices: &[bool],
        out: &mut [Block],
    ) -> Result<(), OtError> {
        for (c, rows) in choices.chunks(CHUNK_ROWS).zip(out.chunks_mut(CHUNK_ROWS)) {
            let wire = self.encode_chunk(c, rows);
            ch.send_pod(wire)?;
        }
        Ok(())
    }

    /// One chunk (`choices.len() ≤ CHUNK_ROWS`): the `t` rows into `out`, and the correction
    /// `d`, chunk-major, to send.
    fn encode_chunk(&mut self, choices: &[bool], out: &mut [Block]) -> &[Block] {
        let len = choices.len();
        let k = self.k;
        let nchunks = self.chunks.len();
        let nb = len.div_ceil(128);
        self.code.resize(nb, Block::ZERO);
        pack_choices(choices, &mut self.code);
        self.corr.resize(nchunks * nb, Block::ZERO);
        let code = &self.code;
        let chunks = &self.chunks;
        out.par_chunks_mut(TILE * 128)
            .zip(self.corr[..nchunks * nb].par_chunks_mut(TILE * nchunks))
            .enumerate()
            .for_each_init(TileScratch::new, |sc, (t, (rows, corr))| {
                let n = corr.len() / nchunks;
                let b0 = t * TILE;
                with_tile(rows, n, |tile| {
                    for (i, chunk) in chunks.iter().enumerate() {
                        accumulate_tile(&chunk.leaves, chunk.w, b0 as u64, n, sc);
                        let col0 = i * k;
                        for b in 0..n {
                            corr[i * n + b] = sc.u[b] ^ code[b0 + b];
                            tile[128 * b + col0..128 * b + col0 + chunk.w]
                                .iter_mut()
                                .zip(&sc.acc)
                                .for_each(|(v, a)| *v = a[b]);
                        }
                    }
                    transpose_tile(tile);
                });
            });
        for chunk in &mut self.chunks {
            for leaf in &mut chunk.leaves {
                leaf.skip(nb as u64);
            }
        }
        // Each task wrote its blocks' words chunk by chunk; the wire carries d chunk-major
        // (chunk i's m bits in a row, as before the tiles): one copy per task and chunk.
        self.wire.resize(nchunks * nb, Block::ZERO);
        for (t, part) in self.corr[..nchunks * nb].chunks(TILE * nchunks).enumerate() {
            let (b0, n) = (t * TILE, part.len() / nchunks);
            for (i, words) in part.chunks_exact(n).enumerate() {
                self.wire[i * nb + b0..i * nb + b0 + n].copy_from_slice(words);
            }
        }
        &self.wire[..nchunks * nb]
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
    fn tile_sums_match_naive_sums() {
        for w in 1..=5 {
            for (off, n) in [(0u64, TILE), (7, 3), (64, TILE - 1)] {
                let leaves: Vec<Prg> = (0..1u128 << w)
                    .map(|x| Prg::from_seed(Block(100 + x)))
                    .collect();
                let mut sc = TileScratch::new();
                accumulate_tile(&leaves, w, off, n, &mut sc);
                let r: Vec<Vec<Block>> = (0..1u128 << w)
                    .map(|x| {
                        let mut p = Prg::from_seed(Block(100 + x));
                        p.blocks(off as usize + n)[off as usize..].to_vec()
                    })
                    .collect();
                for b in 0..n {
                    let all = r.iter().fold(Block::ZERO, |a, x| a ^ x[b]);
                    assert_eq!(sc.u[b], all, "w {w} u");
                    for j in 0..w {
                        let s = r
                            .iter()
                            .enumerate()
                            .filter(|(x, _)| (x >> j) & 1 == 1)
                            .fold(Block::ZERO, |a, (_, x)| a ^ x[b]);
                        assert_eq!(sc.acc[j][b], s, "w {w} j {j}");
                    }
                }
            }
        }
    }
}
