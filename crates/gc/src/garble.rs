//! Garbling with free-XOR and point-and-permute, AND gates by one of two schemes ([`Scheme`]):
//! half-gates (Zahur–Rosulek–Evans 2015, 2κ bits per AND) or three-halves (Rosulek–Roy 2021,
//! 1.5κ + 5 bits per AND; [`crate::three_halves`]). XOR, NOT, constants, input and output
//! labels are the same for both, so one circuit definition runs on either.
//!
//! * A wire carries `L` independent circuit copies at once (`[Block; L]`): the `4L` hashes of an
//!   AND gate (garbler; `6L` with three-halves) or `2L` (evaluator; `3L`) go through AES-NI in
//!   one pipelined batch.
//! * Labels: the garbler's wire is the zero-label `W0` (the one-label is `W0 ⊕ Δ`, lsb(Δ) = 1, so
//!   the permute bit is lsb(W0)); the evaluator's wire is the active label. XOR and NOT are free.
//! * Hash: the tweakable circular correlation-robust hash H(i, x) = π(π(x) ⊕ i) ⊕ π(x) of
//!   `secinfer-ot` (fixed-key AES, same key), with tweak i = nonce‖instance‖(2j or 2j+1) for AND
//!   gate j of circuit copy `instance` (three-halves: 3j, 3j+1, 3j+2 for its A, B and A ⊕ B
//!   hashes, j < 2^30): unique per hash position in a session (the nonce is fresh per batch).
//! * Half-gates: two ciphertexts (32 bytes) per AND gate and copy; three-halves: 24.625 bytes
//!   ([`Scheme::table_bytes`] gives a gate's bytes for `L` copies, the size framing code must
//!   use). Tables are bytes: they go to a [`TableSink`]; the evaluator reads them from a
//!   [`TableSource`]. A short or failing source is recorded (the evaluator then produces
//!   garbage labels instead of panicking) and reported by [`Evaluator::finish`].
//! * Δ: the garbler refuses lsb(Δ) = 0 (point-and-permute needs the colour of X ⊕ Δ to differ
//!   from X's); Δ must be uniform otherwise and secret (the COT pools' Δ in the protocols). The
//!   same Δ serves both schemes.
use crate::backend::Backend;
use crate::three_halves;
use crate::GcError;
use secinfer_core::{AesCipher, Block, Prg};
use secinfer_net::Channel;

/// The fixed key of `secinfer_ot::fixed_key_aes()` (first digits of π); re-instantiated here so
/// the hot loop can batch both AES passes without allocating.
const FIXED_KEY: u128 = 0x243f6a88_85a308d3_13198a2e_03707344;
/// Largest lane count (stack scratch is sized for it).
pub const MAX_LANES: usize = 16;
/// Bytes per table frame on the wire, at most (64 KiB; a frame holds whole gates).
pub const FRAME_BYTES: usize = 65536;
/// [`FRAME_BYTES`] in blocks.
pub const FRAME_BLOCKS: usize = FRAME_BYTES / 16;

/// How AND gates are garbled. Both sides of a batch must agree (the GRU session puts it in its
/// handshake); labels, Δ, XOR/NOT and outputs are the same for both.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Scheme {
    /// Zahur–Rosulek–Evans half-gates: two 128-bit ciphertexts per AND gate, 2 + 2 fixed-key
    /// AES calls (garbler 4 hashes, evaluator 2).
    #[default]
    HalfGates,
    /// Rosulek–Roy three-halves ([`crate::three_halves`]): three 64-bit half-ciphertexts and
    /// five control bits per AND gate; garbler 6 hashes, evaluator 3.
    ThreeHalves,
}

impl Scheme {
    /// Bytes of one AND gate's table for `lanes` circuit copies garbled together (the unit
    /// the evaluator reads; 16 lanes: 512 bytes half-gates, 394 three-halves).
    pub const fn table_bytes(self, lanes: usize) -> usize {
        match self {
            Scheme::HalfGates => 32 * lanes,
            Scheme::ThreeHalves => three_halves::table_bytes(lanes),
        }
    }
    /// Bytes of `and_gates` AND gates' tables for `chunks` chunks of `lanes` copies, or `None`
    /// on overflow.
    pub fn tables_bytes(self, and_gates: u64, chunks: u64, lanes: usize) -> Option<u64> {
        and_gates
            .checked_mul(chunks)?
            .checked_mul(self.table_bytes(lanes) as u64)
    }
    /// Largest number of AND gates in one circuit copy (tweak space: the gate field is 32 bits
    /// and holds 2g + k resp. 3g + k).
    pub const fn max_and_gates(self) -> u32 {
        match self {
            Scheme::HalfGates => 1 << 31,
            Scheme::ThreeHalves => 1 << 30,
        }
    }
    /// The name used on the command line and in handshakes.
    pub const fn name(self) -> &'static str {
        match self {
            Scheme::HalfGates => "half-gates",
            Scheme::ThreeHalves => "three-halves",
        }
    }
    /// Parses [`Scheme::name`].
    pub fn parse(s: &str) -> Result<Self, GcError> {
        match s {
            "half-gates" => Ok(Scheme::HalfGates),
            "three-halves" => Ok(Scheme::ThreeHalves),
            _ => Err(GcError::invalid(format!(
                "garbling scheme {s:?} is not half-gates or three-halves"
            ))),
        }
    }
}

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

/// The public active labels of garbler input `wire` in circuit copies `first_instance..+L` of
/// batch `nonce`: π(x) ⊕ x (fixed-key AES) of x = nonce‖instance‖wire, which both parties
/// compute. A garbler that knows its input bit a when it garbles gives the wire the zero-label
/// K ⊕ a·Δ, so its active label is K whatever a is and never crosses the wire: the input is
/// folded into the garbling, as a constant would be. The evaluator's view is unchanged in
/// distribution where it matters: the inactive label K ⊕ Δ stays hidden behind the secret Δ,
/// and its colour lsb(K) does not depend on a.
pub fn public_labels<const L: usize>(nonce: u64, first_instance: u32, wire: u32) -> [Block; L] {
    let mut x: [Block; L] = std::array::from_fn(|l| {
        Block(tweak_base(nonce, first_instance.wrapping_add(l as u32)) | wire as u128)
    });
    let plain = x;
    secinfer_ot::fixed_key_aes().permute_many(&mut x);
    for (k, p) in x.iter_mut().zip(plain) {
        *k ^= p;
    }
    x
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

/// Where the garbler's tables go (bytes, whole gates).
pub trait TableSink {
    fn put(&mut self, bytes: &[u8]) -> Result<(), GcError>;
}

/// Keeps tables in [`Garbler::tables`] (bounded by the caller: one chunk of circuit copies).
#[derive(Debug, Default)]
pub struct Buffer;
impl TableSink for Buffer {
    fn put(&mut self, _bytes: &[u8]) -> Result<(), GcError> {
        Ok(())
    }
}

/// Streams tables to the peer in frames of at most [`FRAME_BYTES`].
pub struct ChannelSink<'a, C: Channel>(pub &'a mut C);
impl<C: Channel> TableSink for ChannelSink<'_, C> {
    fn put(&mut self, bytes: &[u8]) -> Result<(), GcError> {
        self.0.send_frame(bytes)?;
        Ok(())
    }
}

/// The garbler backend for `L` copies of a circuit.
pub struct Garbler<const L: usize, S: TableSink = Buffer> {
    delta: Block,
    hash: TccrHash,
    scheme: Scheme,
    bases: [u128; L],
    gate: u32,
    /// Tables produced and not yet handed to the sink, as bytes: per AND gate
    /// [`Scheme::table_bytes`]`(L)` (half-gates: per lane TG, TE as little-endian blocks).
    pub tables: Vec<u8>,
    sink: Option<S>,
    prg: Prg,
    err: Option<GcError>,
    x: [Block; 6 * MAX_LANES],
    t: [Block; 6 * MAX_LANES],
    px: [Block; 6 * MAX_LANES],
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
            scheme: Scheme::HalfGates,
            bases,
            gate: 0,
            tables: Vec::new(),
            sink,
            prg,
            err: None,
            x: [Block::ZERO; 6 * MAX_LANES],
            t: [Block::ZERO; 6 * MAX_LANES],
            px: [Block::ZERO; 6 * MAX_LANES],
        })
    }

    /// This garbler with AND gates garbled by `scheme` (half-gates unless set; set it before
    /// the first gate).
    pub fn with_scheme(mut self, scheme: Scheme) -> Self {
        self.scheme = scheme;
        self
    }

    pub fn scheme(&self) -> Scheme {
        self.scheme
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

    /// Hands the tables to the sink when forced or when the next gate would not fit in a
    /// frame (frames hold whole gates and at most [`FRAME_BYTES`]; half-gates frames are
    /// exactly 64 KiB as before).
    fn flush_if_full(&mut self, force: bool) {
        let gate = self.scheme.table_bytes(L);
        if let Some(s) = self.sink.as_mut() {
            if (force && !self.tables.is_empty()) || self.tables.len() + gate > FRAME_BYTES {
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
        if j >= self.scheme.max_and_gates() {
            self.err.get_or_insert(GcError::invalid(
                "too many AND gates in one circuit copy for the tweak space",
            ));
        }
        self.gate = j.wrapping_add(1);
        match self.scheme {
            Scheme::HalfGates => self.half_gates(j, a, b, out),
            Scheme::ThreeHalves => self.three_halves(j, a, b, out),
        }
        if self.sink.is_some() {
            self.flush_if_full(false);
        }
    }
}

impl<const L: usize, S: TableSink> Garbler<L, S> {
    #[inline(always)]
    fn half_gates(&mut self, j: u32, a: &[Block; L], b: &[Block; L], out: &mut [Block; L]) {
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
        self.tables.reserve(32 * L);
        for l in 0..L {
            let (ha0, ha1, hb0, hb1) = (x[l], x[L + l], x[2 * L + l], x[3 * L + l]);
            let pa = a[l].lsb();
            let pb = b[l].lsb();
            let tg = ha0 ^ ha1 ^ d.and_bit(pb);
            let wg0 = ha0 ^ tg.and_bit(pa);
            let te = hb0 ^ hb1 ^ a[l];
            let we0 = hb0 ^ (te ^ a[l]).and_bit(pb);
            out[l] = wg0 ^ we0;
            self.tables.extend_from_slice(&tg.to_bytes());
            self.tables.extend_from_slice(&te.to_bytes());
        }
    }

    /// Three-halves (Rosulek–Roy 2021): six hashes per lane, tweaks 3j, 3j + 1, 3j + 2 for the
    /// A, B and A ⊕ B positions; two fresh random bits r per lane from the PRG.
    #[inline(always)]
    fn three_halves(&mut self, j: u32, a: &[Block; L], b: &[Block; L], out: &mut [Block; L]) {
        let d = self.delta;
        let (x, t, px) = (&mut self.x, &mut self.t, &mut self.px);
        let t0 = (3 * j) as u128;
        let mut hats = [(Block::ZERO, Block::ZERO); L];
        for l in 0..L {
            hats[l] = three_halves::garble_inputs::<L>(a[l], b[l], d, l, &mut x[..]);
            for k in 0..3 {
                let tw = Block(self.bases[l] | (t0 + k as u128));
                t[2 * k * L + l] = tw;
                t[(2 * k + 1) * L + l] = tw;
            }
        }
        self.hash
            .hash_with(&t[..6 * L], &mut x[..6 * L], &mut px[..6 * L]);
        // Two random bits per lane (L ≤ 16: 32 of the block's 128).
        let r = self.prg.next_block().0;
        let x = &self.x;
        let mut g = [0u64; 3 * MAX_LANES];
        let mut ctrl = 0u128;
        for l in 0..L {
            let (ah, bh) = hats[l];
            let mut gl = [0u64; 3];
            let (c0, z) = three_halves::garble_lane::<L>(
                &x[..],
                l,
                a[l],
                b[l],
                ah,
                bh,
                d,
                (r >> (2 * l)) as u32 & 3,
                &mut gl,
            );
            out[l] = c0;
            g[3 * l..3 * l + 3].copy_from_slice(&gl);
            ctrl |= (z as u128) << (5 * l);
        }
        three_halves::put_gate::<L>(&mut self.tables, &g, ctrl);
    }
}

/// Where the evaluator's tables come from (bytes, in the garbler's order).
pub trait TableSource {
    /// Fills `out` with the next table bytes.
    fn fill(&mut self, out: &mut [u8]) -> Result<(), GcError>;
}

/// Tables already in memory (received in the offline phase).
pub struct SliceSource<'a> {
    data: &'a [u8],
    pos: usize,
}
impl<'a> SliceSource<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        SliceSource { data, pos: 0 }
    }
    /// Bytes not consumed.
    pub fn remaining(&self) -> usize {
        self.data.len() - self.pos
    }
}
impl TableSource for SliceSource<'_> {
    fn fill(&mut self, out: &mut [u8]) -> Result<(), GcError> {
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

/// Tables kept as the raw frames they arrived in (no copy into one buffer), read from byte
/// offset `start`.
pub struct FrameSource<'a> {
    frames: &'a [Vec<u8>],
    fi: usize,
    pos: usize,
}
impl<'a> FrameSource<'a> {
    /// `starts[i]` is the byte offset of frame i (prefix sums of frame lengths).
    pub fn at(frames: &'a [Vec<u8>], starts: &[u64], start: u64) -> Self {
        let fi = starts.partition_point(|&s| s <= start).saturating_sub(1);
        let pos = starts.get(fi).map_or(0, |&s| (start - s) as usize);
        FrameSource { frames, fi, pos }
    }
}
impl TableSource for FrameSource<'_> {
    fn fill(&mut self, out: &mut [u8]) -> Result<(), GcError> {
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
            let take = (out.len() - k).min(f.len() - self.pos);
            out[k..k + take].copy_from_slice(&f[self.pos..self.pos + take]);
            self.pos += take;
            k += take;
        }
        Ok(())
    }
}

/// Tables streamed from the peer in frames of at most [`FRAME_BYTES`].
pub struct ChannelSource<'a, C: Channel> {
    ch: &'a mut C,
    frame: Vec<u8>,
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
    fn fill(&mut self, out: &mut [u8]) -> Result<(), GcError> {
        let mut k = 0;
        while k < out.len() {
            if self.pos == self.frame.len() {
                let f = match self.ch.recv_frame() {
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
                if f.len() > FRAME_BYTES {
                    return Err(GcError::Malformed(format!(
                        "table frame of {} bytes (at most {FRAME_BYTES})",
                        f.len()
                    )));
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
    scheme: Scheme,
    bases: [u128; L],
    gate: u32,
    src: Src,
    err: Option<GcError>,
    tab: [u8; 32 * MAX_LANES],
    x: [Block; 3 * MAX_LANES],
    t: [Block; 3 * MAX_LANES],
    px: [Block; 3 * MAX_LANES],
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
            scheme: Scheme::HalfGates,
            bases,
            gate: 0,
            src,
            err: None,
            tab: [0; 32 * MAX_LANES],
            x: [Block::ZERO; 3 * MAX_LANES],
            t: [Block::ZERO; 3 * MAX_LANES],
            px: [Block::ZERO; 3 * MAX_LANES],
        })
    }

    /// This evaluator for tables garbled by `scheme` (half-gates unless set).
    pub fn with_scheme(mut self, scheme: Scheme) -> Self {
        self.scheme = scheme;
        self
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
        let nb = self.scheme.table_bytes(L);
        if let Err(e) = self.src.fill(&mut self.tab[..nb]) {
            self.err = Some(e);
            *out = [Block::ZERO; L];
            return;
        }
        match self.scheme {
            Scheme::HalfGates => self.half_gates(j, a, b, out),
            Scheme::ThreeHalves => self.three_halves(j, a, b, out),
        }
    }
}

impl<const L: usize, Src: TableSource> Evaluator<L, Src> {
    #[inline(always)]
    fn half_gates(&mut self, j: u32, a: &[Block; L], b: &[Block; L], out: &mut [Block; L]) {
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
            let tg = block_at(tab, 2 * l);
            let te = block_at(tab, 2 * l + 1);
            let wg = x[l] ^ tg.and_bit(a[l].lsb());
            let we = x[L + l] ^ (te ^ a[l]).and_bit(b[l].lsb());
            out[l] = wg ^ we;
        }
    }

    /// Three-halves (Rosulek–Roy 2021): three hashes per lane under the garbler's tweaks.
    #[inline(always)]
    fn three_halves(&mut self, j: u32, a: &[Block; L], b: &[Block; L], out: &mut [Block; L]) {
        let (x, t, px) = (&mut self.x, &mut self.t, &mut self.px);
        let t0 = (3 * j) as u128;
        for l in 0..L {
            x[l] = a[l];
            x[L + l] = b[l];
            x[2 * L + l] = a[l] ^ b[l];
            t[l] = Block(self.bases[l] | t0);
            t[L + l] = Block(self.bases[l] | (t0 + 1));
            t[2 * L + l] = Block(self.bases[l] | (t0 + 2));
        }
        self.hash
            .hash_with(&t[..3 * L], &mut x[..3 * L], &mut px[..3 * L]);
        let mut g = [0u64; 3 * MAX_LANES];
        let ctrl = three_halves::get_gate::<L>(&self.tab[..three_halves::table_bytes(L)], &mut g);
        for l in 0..L {
            let gl = [g[3 * l], g[3 * l + 1], g[3 * l + 2]];
            let z = (ctrl >> (5 * l)) as u32 & 31;
            out[l] = three_halves::eval_lane(a[l], b[l], x[l], x[L + l], x[2 * L + l], gl, z);
        }
    }
}

/// Block `k` of a table read as little-endian bytes.
#[inline(always)]
fn block_at(tab: &[u8], k: usize) -> Block {
    let mut w = [0u8; 16];
    w.copy_from_slice(&tab[16 * k..16 * k + 16]);
    Block::from_bytes(w)
}
