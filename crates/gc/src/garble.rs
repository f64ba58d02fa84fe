//! Half-gates garbling (Zahur–Rosulek–Evans 2015) with free-XOR and point-and-permute.
//!
//! * A wire carries `L` independent circuit copies at once (`[Block; L]`): the `4L` hashes of an
//!   AND gate (garbler) or `2L` (evaluator) go through AES-NI in one pipelined batch.
//! * Labels: the garbler's wire is the zero-label `W0` (the one-label is `W0 ⊕ Δ`, lsb(Δ) = 1, so
//!   the permute bit is lsb(W0)); the evaluator's wire is the active label. XOR and NOT are free.
//! * Hash: the tweakable circular correlation-robust hash H(i, x) = π(π(x) ⊕ i) ⊕ π(x) of
//!   `secinfer-ot` (fixed-key AES, same key), with tweak i = nonce‖instance‖(2j or 2j+1) for AND
//!   gate j of circuit copy `instance`: unique per gate in a session.
//! * Two ciphertexts (32 bytes) per AND gate. Tables go to a [`TableSink`]; the evaluator reads
//!   them from a [`TableSource`]. A short or failing source is recorded (the evaluator then
//!   produces garbage labels instead of panicking) and reported by [`Evaluator::finish`].
use crate::backend::Backend;
use crate::GcError;
use secinfer_net::Channel;
use secinfer_ot::{AesCipher, Block, Prg};

/// The fixed key of `secinfer_ot::fixed_key_aes()` (first digits of π); re-instantiated here so
/// the hot loop can batch both AES passes without allocating.
const FIXED_KEY: u128 = 0x243f6a88_85a308d3_13198a2e_03707344;
/// Largest lane count (stack scratch is sized for it).
pub const MAX_LANES: usize = 16;
/// Blocks per table frame on the wire (64 KiB).
pub const FRAME_BLOCKS: usize = 4096;

/// Batched tweakable CCR hash.
#[derive(Clone)]
pub struct TccrHash {
    aes: AesCipher,
}

impl Default for TccrHash {
    fn default() -> Self {
        Self::new()
    }
}

impl TccrHash {
    pub fn new() -> Self {
        TccrHash {
            aes: AesCipher::new(Block(FIXED_KEY)),
        }
    }
    /// xs[i] ← H(t[i], xs[i]), with caller scratch `px` (at least `xs.len()` blocks).
    #[inline]
    pub fn hash_with(&self, t: &[Block], xs: &mut [Block], px: &mut [Block]) {
        let n = xs.len();
        self.aes.encrypt_many(xs);
        px[..n].copy_from_slice(xs);
        for (x, t) in xs.iter_mut().zip(t) {
            *x ^= *t;
        }
        self.aes.encrypt_many(xs);
        for (x, p) in xs.iter_mut().zip(&px[..n]) {
            *x ^= *p;
        }
    }

    /// xs[i] ← H(t[i], xs[i]).
    #[inline]
    pub fn hash(&self, t: &[Block], xs: &mut [Block]) {
        for c in xs.chunks_mut(4 * MAX_LANES).zip(t.chunks(4 * MAX_LANES)) {
            let (xs, t) = c;
            let n = xs.len();
            let mut px = [Block::ZERO; 4 * MAX_LANES];
            self.aes.encrypt_many(xs);
            px[..n].copy_from_slice(xs);
            for (x, t) in xs.iter_mut().zip(t) {
                *x ^= *t;
            }
            self.aes.encrypt_many(xs);
            for (x, p) in xs.iter_mut().zip(&px[..n]) {
                *x ^= *p;
            }
        }
    }
}

#[inline]
fn tweak_base(nonce: u64, instance: u32) -> u128 {
    ((nonce as u128) << 64) | ((instance as u128) << 32)
}

/// One AND gate lane by lane into `out`: the garbler's tables or the evaluator's labels. The
/// two `Backend` entry points (`and` by value, `and_slots` in place) are written once on top.
trait AndCore<const L: usize> {
    fn and_core(&mut self, a: &[Block; L], b: &[Block; L], out: &mut [Block; L]);
}

#[inline]
fn and_by_value<const L: usize, T: AndCore<L>>(
    t: &mut T,
    a: &[Block; L],
    b: &[Block; L],
) -> [Block; L] {
    let mut out = [Block::ZERO; L];
    t.and_core(a, b, &mut out);
    out
}

#[inline]
fn and_in_slots<const L: usize, T: AndCore<L>>(
    t: &mut T,
    w: &mut [[Block; L]],
    x: usize,
    y: usize,
    out: usize,
) {
    match split_slots(w, x, y, out) {
        Some((a, b, o)) => t.and_core(a, b, o),
        // The output reuses an input's slot.
        None => {
            let o = and_by_value(t, &w[x], &w[y]);
            w[out] = o;
        }
    }
}

/// `(&w[x], &w[y], &mut w[out])` when `out` is neither `x` nor `y` (`x = y` is fine); `None`
/// otherwise. (`slice::get_disjoint_mut` would need Rust 1.86, past the workspace's minimum,
/// and refuses `x = y`.)
#[inline]
#[allow(clippy::type_complexity)]
fn split_slots<const L: usize>(
    w: &mut [[Block; L]],
    x: usize,
    y: usize,
    out: usize,
) -> Option<(&[Block; L], &[Block; L], &mut [Block; L])> {
    if out == x || out == y {
        return None;
    }
    let (lo, rest) = w.split_at_mut(out);
    let (o, hi) = rest.split_first_mut()?;
    let pick = |i: usize| -> &[Block; L] {
        if i < out {
            &lo[i]
        } else {
            &hi[i - out - 1]
        }
    };
    Some((pick(x), pick(y), o))
}

/// `w[out] = w[x] ⊕ w[y]`, lane by lane (no wire-sized temporaries; `out` may equal `x`/`y`).
#[inline]
// Indexed, not iterated: `out` may be `x` or `y`, so no two borrows of `w` can be held.
#[allow(clippy::needless_range_loop)]
fn xor_lanes<const L: usize>(w: &mut [[Block; L]], x: usize, y: usize, out: usize) {
    for l in 0..L {
        let v = w[x][l] ^ w[y][l];
        w[out][l] = v;
    }
}

/// Where the garbler's tables go.
pub trait TableSink {
    fn put(&mut self, blocks: &[Block]) -> Result<(), GcError>;
}

/// Keeps tables in [`Garbler::tables`] (bounded by the caller: one chunk of circuit copies).
#[derive(Debug, Default)]
pub struct Buffer;
impl TableSink for Buffer {
    fn put(&mut self, _blocks: &[Block]) -> Result<(), GcError> {
        Ok(())
    }
}

/// Streams tables to the peer in frames of [`FRAME_BLOCKS`].
pub struct ChannelSink<'a, C: Channel>(pub &'a mut C);
impl<C: Channel> TableSink for ChannelSink<'_, C> {
    fn put(&mut self, blocks: &[Block]) -> Result<(), GcError> {
        self.0.send_pod(blocks)?;
        Ok(())
    }
}

/// The garbler backend for `L` copies of a circuit.
pub struct Garbler<const L: usize, S: TableSink = Buffer> {
    delta: Block,
    hash: TccrHash,
    bases: [u128; L],
    gate: u32,
    /// Tables produced and not yet handed to the sink: per AND gate, per lane, (TG, TE).
    pub tables: Vec<Block>,
    sink: Option<S>,
    prg: Prg,
    err: Option<GcError>,
    x: [Block; 4 * MAX_LANES],
    t: [Block; 4 * MAX_LANES],
    px: [Block; 4 * MAX_LANES],
}

impl<const L: usize> Garbler<L, Buffer> {
    /// A garbler that keeps its tables in memory; lanes are circuit copies
    /// `first_instance..first_instance + L` of session `nonce`.
    pub fn new(delta: Block, nonce: u64, first_instance: u32, prg: Prg) -> Result<Self, GcError> {
        Self::with_sink(delta, nonce, first_instance, prg, None)
    }
}

impl<const L: usize, S: TableSink> Garbler<L, S> {
    /// A garbler that hands tables to `sink` every [`FRAME_BLOCKS`] blocks (streaming).
    pub fn with_sink(
        delta: Block,
        nonce: u64,
        first_instance: u32,
        prg: Prg,
        sink: Option<S>,
    ) -> Result<Self, GcError> {
        if !delta.lsb() {
            return Err(GcError::invalid("free-XOR offset needs lsb(Δ) = 1"));
        }
        if L == 0 || L > MAX_LANES {
            return Err(GcError::invalid(format!(
                "lane count {L} not in 1..={MAX_LANES}"
            )));
        }
        let last = first_instance as u64 + L as u64;
        if last > u32::MAX as u64 {
            return Err(GcError::invalid("too many circuit copies in one session"));
        }
        let mut bases = [0u128; L];
        for (l, b) in bases.iter_mut().enumerate() {
            *b = tweak_base(nonce, first_instance + l as u32);
        }
        Ok(Garbler {
            delta,
            hash: TccrHash::new(),
            bases,
            gate: 0,
            tables: Vec::new(),
            sink,
            prg,
            err: None,
            x: [Block::ZERO; 4 * MAX_LANES],
            t: [Block::ZERO; 4 * MAX_LANES],
            px: [Block::ZERO; 4 * MAX_LANES],
        })
    }

    pub fn delta(&self) -> Block {
        self.delta
    }

    /// Restarts gate numbering for the next `L` circuit copies `first_instance..` (reusing this
    /// garbler, its key schedule and buffers, across chunks of a batch).
    pub fn set_instances(&mut self, nonce: u64, first_instance: u32) -> Result<(), GcError> {
        if first_instance as u64 + L as u64 > u32::MAX as u64 {
            return Err(GcError::invalid("too many circuit copies in one session"));
        }
        for (l, b) in self.bases.iter_mut().enumerate() {
            *b = tweak_base(nonce, first_instance + l as u32);
        }
        self.gate = 0;
        Ok(())
    }

    /// A fresh input wire: random zero-labels (one per lane).
    pub fn input(&mut self) -> [Block; L] {
        let mut w = [Block::ZERO; L];
        self.prg.fill_blocks(&mut w);
        w
    }

    /// The label encoding `bit` on a wire whose zero-label is `w0`.
    #[inline]
    pub fn encode(&self, w0: Block, bit: bool) -> Block {
        w0 ^ self.delta.and_bit(bit)
    }

    fn flush_if_full(&mut self, force: bool) {
        if let Some(s) = self.sink.as_mut() {
            if (force && !self.tables.is_empty()) || self.tables.len() >= FRAME_BLOCKS {
                if self.err.is_none() {
                    if let Err(e) = s.put(&self.tables) {
                        self.err = Some(e);
                    }
                }
                self.tables.clear();
            }
        }
    }

    /// Hands remaining tables to the sink and reports the first error (sink failure or
    /// gate-index overflow).
    pub fn finish(&mut self) -> Result<(), GcError> {
        self.flush_if_full(true);
        match self.err.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// The sink, after [`Garbler::finish`] handed it the last tables.
    pub fn into_sink(self) -> Option<S> {
        self.sink
    }

    /// AND gates garbled so far (per lane).
    pub fn and_gates(&self) -> u64 {
        self.gate as u64
    }
}

impl<const L: usize, S: TableSink> Backend for Garbler<L, S> {
    type Wire = [Block; L];

    #[inline]
    fn xor_slots(&mut self, w: &mut [[Block; L]], x: usize, y: usize, out: usize) {
        xor_lanes(w, x, y, out);
    }

    #[inline]
    fn xor(&mut self, a: &[Block; L], b: &[Block; L]) -> [Block; L] {
        let mut o = *a;
        for (x, y) in o.iter_mut().zip(b) {
            *x ^= *y;
        }
        o
    }

    #[inline]
    fn not(&mut self, a: &[Block; L]) -> [Block; L] {
        let mut o = *a;
        for x in o.iter_mut() {
            *x ^= self.delta;
        }
        o
    }

    fn constant(&mut self, v: bool) -> [Block; L] {
        // Public constant: the evaluator holds the all-zero label, which means `v`.
        [self.delta.and_bit(v); L]
    }

    #[inline]
    fn and(&mut self, a: &[Block; L], b: &[Block; L]) -> [Block; L] {
        and_by_value(self, a, b)
    }

    #[inline]
    fn and_slots(&mut self, w: &mut [[Block; L]], x: usize, y: usize, out: usize) {
        and_in_slots(self, w, x, y, out)
    }
}

impl<const L: usize, S: TableSink> AndCore<L> for Garbler<L, S> {
    /// One AND gate's tables, `out` ← the output zero-labels (written lane by lane).
    #[inline]
    fn and_core(&mut self, a: &[Block; L], b: &[Block; L], out: &mut [Block; L]) {
        let j = self.gate;
        if j >= (1 << 31) {
            self.err.get_or_insert(GcError::invalid(
                "more than 2^31 AND gates in one circuit copy",
            ));
        }
        self.gate = j.wrapping_add(1);
        let d = self.delta;
        let (x, t, px) = (&mut self.x, &mut self.t, &mut self.px);
        let t0 = (2 * j) as u128;
        for l in 0..L {
            x[l] = a[l];
            x[L + l] = a[l] ^ d;
            x[2 * L + l] = b[l];
            x[3 * L + l] = b[l] ^ d;
            let tw0 = Block(self.bases[l] | t0);
            let tw1 = Block(self.bases[l] | (t0 + 1));
            t[l] = tw0;
            t[L + l] = tw0;
            t[2 * L + l] = tw1;
            t[3 * L + l] = tw1;
        }
        self.hash
            .hash_with(&t[..4 * L], &mut x[..4 * L], &mut px[..4 * L]);
        let x = &self.x;
        self.tables.reserve(2 * L);
        for l in 0..L {
            let (ha0, ha1, hb0, hb1) = (x[l], x[L + l], x[2 * L + l], x[3 * L + l]);
            let pa = a[l].lsb();
            let pb = b[l].lsb();
            let tg = ha0 ^ ha1 ^ d.and_bit(pb);
            let wg0 = ha0 ^ tg.and_bit(pa);
            let te = hb0 ^ hb1 ^ a[l];
            let we0 = hb0 ^ (te ^ a[l]).and_bit(pb);
            out[l] = wg0 ^ we0;
            self.tables.push(tg);
            self.tables.push(te);
        }
        if self.sink.is_some() {
            self.flush_if_full(false);
        }
    }
}

/// Where the evaluator's tables come from.
pub trait TableSource {
    /// Fills `out` with the next tables.
    fn fill(&mut self, out: &mut [Block]) -> Result<(), GcError>;
}

/// Tables already in memory (received in the offline phase).
pub struct SliceSource<'a> {
    data: &'a [Block],
    pos: usize,
}
impl<'a> SliceSource<'a> {
    pub fn new(data: &'a [Block]) -> Self {
        SliceSource { data, pos: 0 }
    }
    /// Blocks not consumed.
    pub fn remaining(&self) -> usize {
        self.data.len() - self.pos
    }
}
impl TableSource for SliceSource<'_> {
    fn fill(&mut self, out: &mut [Block]) -> Result<(), GcError> {
        let end = self.pos + out.len();
        if end > self.data.len() {
            return Err(GcError::Truncated {
                expected: end as u64,
                got: self.data.len() as u64,
            });
        }
        out.copy_from_slice(&self.data[self.pos..end]);
        self.pos = end;
        Ok(())
    }
}

/// Tables kept as the raw frames they arrived in (no copy into one buffer), read from block
/// offset `start`.
pub struct FrameSource<'a> {
    frames: &'a [Vec<u8>],
    fi: usize,
    pos: usize,
}
impl<'a> FrameSource<'a> {
    /// `starts[i]` is the block offset of frame i (prefix sums of frame lengths / 16).
    pub fn at(frames: &'a [Vec<u8>], starts: &[u64], start: u64) -> Self {
        let fi = starts.partition_point(|&s| s <= start).saturating_sub(1);
        let pos = starts.get(fi).map_or(0, |&s| ((start - s) * 16) as usize);
        FrameSource { frames, fi, pos }
    }
}
impl TableSource for FrameSource<'_> {
    fn fill(&mut self, out: &mut [Block]) -> Result<(), GcError> {
        let mut k = 0;
        while k < out.len() {
            let Some(f) = self.frames.get(self.fi) else {
                return Err(GcError::Truncated {
                    expected: out.len() as u64,
                    got: k as u64,
                });
            };
            if self.pos >= f.len() {
                self.fi += 1;
                self.pos = 0;
                continue;
            }
            let take = (out.len() - k).min((f.len() - self.pos) / 16);
            for (o, b) in out[k..k + take]
                .iter_mut()
                .zip(f[self.pos..self.pos + take * 16].chunks_exact(16))
            {
                let mut a = [0u8; 16];
                a.copy_from_slice(b);
                *o = Block::from_bytes(a);
            }
            self.pos += take * 16;
            k += take;
        }
        Ok(())
    }
}

/// Tables streamed from the peer in frames of at most [`FRAME_BLOCKS`] blocks.
pub struct ChannelSource<'a, C: Channel> {
    ch: &'a mut C,
    frame: Vec<Block>,
    pos: usize,
    got: u64,
}
impl<'a, C: Channel> ChannelSource<'a, C> {
    pub fn new(ch: &'a mut C) -> Self {
        ChannelSource {
            ch,
            frame: Vec::new(),
            pos: 0,
            got: 0,
        }
    }
}
impl<C: Channel> TableSource for ChannelSource<'_, C> {
    fn fill(&mut self, out: &mut [Block]) -> Result<(), GcError> {
        let mut k = 0;
        while k < out.len() {
            if self.pos == self.frame.len() {
                let f: Vec<Block> = match self.ch.recv_pod_upto(FRAME_BLOCKS) {
                    Ok(f) => f,
                    Err(secinfer_net::NetError::Closed) => {
                        return Err(GcError::Truncated {
                            expected: self.got + (out.len() - k) as u64,
                            got: self.got,
                        })
                    }
                    Err(e) => return Err(e.into()),
                };
                if f.is_empty() {
                    return Err(GcError::Malformed("empty table frame".into()));
                }
                self.got += f.len() as u64;
                self.frame = f;
                self.pos = 0;
            }
            let take = (out.len() - k).min(self.frame.len() - self.pos);
            out[k..k + take].copy_from_slice(&self.frame[self.pos..self.pos + take]);
            self.pos += take;
            k += take;
        }
        Ok(())
    }
}

/// The evaluator backend for `L` copies of a circuit.
pub struct Evaluator<const L: usize, Src: TableSource> {
    hash: TccrHash,
    bases: [u128; L],
    gate: u32,
    src: Src,
    err: Option<GcError>,
    tab: [Block; 2 * MAX_LANES],
    x: [Block; 2 * MAX_LANES],
    t: [Block; 2 * MAX_LANES],
    px: [Block; 2 * MAX_LANES],
}

impl<const L: usize, Src: TableSource> Evaluator<L, Src> {
    pub fn new(nonce: u64, first_instance: u32, src: Src) -> Result<Self, GcError> {
        if L == 0 || L > MAX_LANES {
            return Err(GcError::invalid(format!(
                "lane count {L} not in 1..={MAX_LANES}"
            )));
        }
        if first_instance as u64 + L as u64 > u32::MAX as u64 {
            return Err(GcError::invalid("too many circuit copies in one session"));
        }
        let mut bases = [0u128; L];
        for (l, b) in bases.iter_mut().enumerate() {
            *b = tweak_base(nonce, first_instance + l as u32);
        }
        Ok(Evaluator {
            hash: TccrHash::new(),
            bases,
            gate: 0,
            src,
            err: None,
            tab: [Block::ZERO; 2 * MAX_LANES],
            x: [Block::ZERO; 2 * MAX_LANES],
            t: [Block::ZERO; 2 * MAX_LANES],
            px: [Block::ZERO; 2 * MAX_LANES],
        })
    }

    /// Restarts gate numbering for the next `L` circuit copies (see [`Garbler::set_instances`]).
    pub fn set_instances(&mut self, nonce: u64, first_instance: u32) -> Result<(), GcError> {
        if first_instance as u64 + L as u64 > u32::MAX as u64 {
            return Err(GcError::invalid("too many circuit copies in one session"));
        }
        for (l, b) in self.bases.iter_mut().enumerate() {
            *b = tweak_base(nonce, first_instance + l as u32);
        }
        self.gate = 0;
        Ok(())
    }

    /// The first error met (a short or failing table source), if any.
    pub fn finish(&mut self) -> Result<(), GcError> {
        match self.err.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    pub fn into_source(self) -> Src {
        self.src
    }
}

impl<const L: usize, Src: TableSource> Backend for Evaluator<L, Src> {
    type Wire = [Block; L];

    #[inline]
    fn xor_slots(&mut self, w: &mut [[Block; L]], x: usize, y: usize, out: usize) {
        xor_lanes(w, x, y, out);
    }

    #[inline]
    fn xor(&mut self, a: &[Block; L], b: &[Block; L]) -> [Block; L] {
        let mut o = *a;
        for (x, y) in o.iter_mut().zip(b) {
            *x ^= *y;
        }
        o
    }
    #[inline]
    fn not(&mut self, a: &[Block; L]) -> [Block; L] {
        *a
    }
    fn constant(&mut self, _v: bool) -> [Block; L] {
        [Block::ZERO; L]
    }

    #[inline]
    fn and(&mut self, a: &[Block; L], b: &[Block; L]) -> [Block; L] {
        and_by_value(self, a, b)
    }

    #[inline]
    fn and_slots(&mut self, w: &mut [[Block; L]], x: usize, y: usize, out: usize) {
        and_in_slots(self, w, x, y, out)
    }
}

impl<const L: usize, Src: TableSource> AndCore<L> for Evaluator<L, Src> {
    /// One AND gate from its tables, `out` ← the output labels (written lane by lane; all
    /// zero after an error).
    #[inline]
    fn and_core(&mut self, a: &[Block; L], b: &[Block; L], out: &mut [Block; L]) {
        let j = self.gate;
        self.gate = j.wrapping_add(1);
        if self.err.is_some() {
            *out = [Block::ZERO; L];
            return;
        }
        if let Err(e) = self.src.fill(&mut self.tab[..2 * L]) {
            self.err = Some(e);
            *out = [Block::ZERO; L];
            return;
        }
        let (x, t, px, tab) = (&mut self.x, &mut self.t, &mut self.px, &self.tab);
        let t0 = (2 * j) as u128;
        for l in 0..L {
            x[l] = a[l];
            x[L + l] = b[l];
            t[l] = Block(self.bases[l] | t0);
            t[L + l] = Block(self.bases[l] | (t0 + 1));
        }
        self.hash
            .hash_with(&t[..2 * L], &mut x[..2 * L], &mut px[..2 * L]);
        for l in 0..L {
            let (tg, te) = (tab[2 * l], tab[2 * l + 1]);
            let wg = x[l] ^ tg.and_bit(a[l].lsb());
            let we = x[L + l] ^ (te ^ a[l]).and_bit(b[l].lsb());
            out[l] = wg ^ we;
        }
    }
}
