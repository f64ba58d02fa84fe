//! Pooled OT: input-independent precomputation of random correlated OTs (the *offline* phase),
//! consumed by derandomisation in the *online* phase (Beaver, CRYPTO '95).
//!
//! The pool holds random COTs under the sender's global `Δ`: the sender keeps `K_j`, the receiver
//! a random bit `r_j` and `M_j = K_j ⊕ r_j·Δ`. [`PooledOtSender::fill`] /
//! [`PooledOtReceiver::fill`] generate them with IKNP (or SoftSpokenOT or Ferret, see [`CotSource`]); the
//! online calls then cost only:
//!
//! * the receiver's derandomisation bits `d_j = b_j ⊕ r_j`, packed 1 bit per OT; the sender sets
//!   `K'_j = K_j ⊕ d_j·Δ`, so that the receiver's `M_j = K'_j ⊕ b_j·Δ` — a COT on `b_j`;
//! * for the chosen and additive flavours, the sender's masked payloads, exactly as in IKNP
//!   (`tccr` under a per-OT unique tweak: the global index of the pooled COT, which is consumed
//!   once, in a domain of its own).
//!
//! 1-of-N OT (2 ≤ N ≤ 256) uses `m = ⌈log2 N⌉` pooled COTs per OT (Naor–Pinkas, "1-of-N from
//! 1-of-2"). For OT `j` with COT keys `k_i^0 = K'_i`, `k_i^1 = K'_i ⊕ Δ` (`i < m`), the key of
//! candidate `x` is
//!
//! ```text
//!   K_x = tccr(τ_out(j, x), S_x),   S_x = ⊕_i tccr(τ_in(i), k_i^{x_i})
//! ```
//!
//! The inner hash breaks the Δ-correlation (without it, `S_x ⊕ S_y` would be a multiple of `Δ`
//! set by the parity of `x ⊕ y`). The outer hash, tweaked by `(j, x)`, is needed too: the bare
//! sum `S_x` is *linear* in the per-bit keys — `S_{00} ⊕ S_{01} ⊕ S_{10} ⊕ S_{11} = 0` — so a
//! receiver with choice `00` who gets `m_x ⊕ S_x` for every `x` would learn
//! `m_{01} ⊕ m_{10} ⊕ m_{11}`. With the outer hash each `K_x` (`x ≠ choice`) is a hash of a value
//! that includes at least one inner output the receiver cannot compute (128 bits of entropy),
//! under a tweak used once — the random-oracle argument of Naor–Pinkas's PRF-per-bit
//! construction, with the tweakable hash in place of `m` PRF keys. The sender builds the `N` sums
//! by prefix XOR (`S_x = S_{x & (x−1)} ⊕ D_{tz(x)}`), so it hashes `2m + N` times per OT (KK13
//! hashes `2N` half-rows), and the wire carries `m` bits from the receiver instead of KK13's 32
//! bytes.
//!
//! Pool exhaustion is never an error: a call that needs more COTs than the pool holds first
//! refills the deficit (exactly with IKNP, by whole iterations with Ferret) in the channel's
//! current phase, so it shows up in the online bytes; size the offline
//! [`fill`](PooledOtSender::fill) with a dry run and [`consumed`](PooledOtSender::consumed). Both
//! parties see the same pool size and the same call sizes, so they refill at the same moment
//! without a message.
//!
//! Messages: the derandomisation bits go in frames of [`DERAND_FRAME_OTS`] bits; chosen and
//! additive calls answer only after reading all of them (two rounds per call, never blocking on
//! bounded socket buffers). After any error an instance refuses further calls (its pool position
//! or filler is out of step with the peer's).
use crate::error::OtError;
use crate::ext::{pack_choices, tccr_tweaked, tweak};
use crate::ferret::{FerretCotReceiver, FerretCotSender, FerretParams};
use crate::iknp::{OtExtReceiver, OtExtSender};
use crate::pack::{check_bits, mask};
use crate::payload::{
    check_fits, check_n_msgs, hash_pairs_in, hash_rows_in, low_bits, recv_chosen_frames,
    recv_chosen_u64_frames, recv_correlated_frames, recv_n_frames, send_chosen_frames,
    send_chosen_u64_frames, send_correlated_frames, send_n_frames_with,
};
use crate::softspoken::{SoftSpokenReceiver, SoftSpokenSender};
use rayon::prelude::*;
use secinfer_core::Block;
use secinfer_core::Prg;
use secinfer_net::Channel;

/// Derandomisation bits per frame (128 KiB of packed bits: small enough that the sender starts
/// on the first frame early, large enough that framing is free).
pub const DERAND_FRAME_OTS: usize = 1 << 20;

/// Hash domain of pooled 1-of-2 OTs (random, chosen, additive).
const DOMAIN_POOL: u64 = 0x1c4e_5200_0000_0001;
/// Inner (per-bit) hash domain of pooled 1-of-N OTs.
const DOMAIN_N_INNER: u64 = 0x1c4e_5200_0000_0002;
/// Outer hash domain of pooled 1-of-N OTs; the candidate `x < 256` is OR-ed into the low byte.
const DOMAIN_N_OUTER: u64 = 0x1c4e_5300_0000_0000;
/// 1-of-N rows per rayon task (and per batched hash call).
const N_TASK_ROWS: usize = 64;

/// Which protocol fills the pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CotSource {
    /// IKNP/ALSZ extension: 16 bytes per COT from receiver to sender, any batch size.
    Iknp,
    /// Ferret silent COT (after IKNP bootstrapping): `t·(2h + 1)` blocks sender → receiver per
    /// iteration of `params.per_iteration()` COTs (0.44 bits per COT for `FerretParams::B13`);
    /// the pool grows by whole iterations.
    Ferret(FerretParams),
    /// SoftSpokenOT (semi-honest) with `k`-bit chunks, `1 ≤ k ≤ 8` (anything else is a typed
    /// error at setup): `⌈128/k⌉` bits per COT from receiver to sender (16 bytes at `k = 1`,
    /// exactly IKNP; 4 bytes at `k = 4`) for `≈ 2^k/k` AES blocks per COT, any batch size; setup
    /// adds `⌈128/k⌉·(k − 1)·32` bytes to IKNP's base OTs.
    SoftSpoken {
        /// Bits of `Δ` per small-field VOLE.
        k: u32,
    },
}

/// `⌈log2 n⌉` for the 1-of-N range, or an argument error.
fn log_n(n: usize) -> Result<usize, OtError> {
    if (2..=256).contains(&n) {
        Ok((usize::BITS - (n - 1).leading_zeros()) as usize)
    } else {
        Err(OtError::arg(format!(
            "1-of-N OT needs 2 ≤ N ≤ 256, got {n}"
        )))
    }
}

/// `source` if a pool it fills can bootstrap the other direction (`bootstrap_reverse`): IKNP
/// and SoftSpokenOT; Ferret is refused (128 COTs would cost a whole LPN iteration).
fn reversible(source: CotSource) -> Result<CotSource, OtError> {
    if matches!(source, CotSource::Ferret(_)) {
        return Err(OtError::arg(
            "a Ferret pool is not bootstrapped in reverse (use base OTs)",
        ));
    }
    Ok(source)
}

/// Sizes of `count` random 1-of-N OTs: `(log2 N, count·N keys, count·log2 N pooled COTs)`.
/// `pow2`: N must be a power of two (the no-message forms, whose choices are the pool's bits).
fn n_sizes(n: usize, count: usize, pow2: bool) -> Result<(usize, usize, usize), OtError> {
    let m = log_n(n)?;
    if pow2 && !n.is_power_of_two() {
        return Err(OtError::arg("random 1-of-N choices need N a power of two"));
    }
    let total = count
        .checked_mul(n)
        .ok_or_else(|| OtError::arg("count × N overflows"))?;
    let cots = count
        .checked_mul(m)
        .ok_or_else(|| OtError::arg("count × log2 N overflows"))?;
    Ok((m, total, cots))
}

/// `out[2j] = H(first + j, k_j)`, `out[2j+1] = H(first + j, k_j ⊕ Δ)`.
fn hash_pairs(k: &[Block], delta: Block, first: u64, out: &mut [Block]) {
    hash_pairs_in(DOMAIN_POOL, k, delta, first, out);
}

/// [`hash_pairs`] under `Δ`, in the shape the payload framing takes.
fn pairs(delta: Block) -> impl Fn(&[Block], u64, &mut [Block]) {
    move |k, first, out| hash_pairs(k, delta, first, out)
}

/// `xs[j] = H(first + j, xs[j])`.
fn hash_rows(xs: &mut [Block], first: u64) {
    hash_rows_in(DOMAIN_POOL, xs, first);
}

/// The outer tweak of candidate `x` of the 1-of-N OT whose first COT has index `idx`.
#[inline]
fn outer_tweak(idx: u64, x: usize) -> Block {
    tweak(DOMAIN_N_OUTER | x as u64, idx)
}

/// Sender's 1-of-N keys: `kp` holds `m` derandomised COT keys per row, `first` is the global
/// index of `kp[0]`; `out[r·n + x] = K_x` of row `r`. Each task hashes its rows' `2m` inner and
/// `n` outer values in one batch each (short per-row AES calls would leave the pipeline idle).
fn n_keys_sender(kp: &[Block], delta: Block, first: u64, m: usize, n: usize, out: &mut [Block]) {
    out.par_chunks_mut(n * N_TASK_ROWS)
        .zip(kp.par_chunks(m * N_TASK_ROWS))
        .enumerate()
        .for_each_init(
            || {
                (
                    vec![Block::ZERO; 2 * m * N_TASK_ROWS],
                    vec![Block::ZERO; (2 * m).max(n) * N_TASK_ROWS],
                )
            },
            |(inner, tws), (t, (o, k))| {
                let rows = k.len() / m;
                let base = first.wrapping_add((t * N_TASK_ROWS * m) as u64);
                let (inner, itw) = (&mut inner[..2 * m * rows], &mut tws[..2 * m * rows]);
                for (i, ((pair, tp), &ki)) in inner
                    .chunks_exact_mut(2)
                    .zip(itw.chunks_exact_mut(2))
                    .zip(k)
                    .enumerate()
                {
                    pair[0] = ki;
                    pair[1] = ki ^ delta;
                    let tw = tweak(DOMAIN_N_INNER, base.wrapping_add(i as u64));
                    tp[0] = tw;
                    tp[1] = tw;
                }
                tccr_tweaked(inner, itw);
                // Prefix XOR over the cube: S_0 = ⊕ h_i^0, then flip one bit's key at a time.
                for (orow, h) in o.chunks_exact_mut(n).zip(inner.chunks_exact(2 * m)) {
                    orow[0] = h.iter().step_by(2).fold(Block::ZERO, |a, b| a ^ *b);
                    for x in 1..n {
                        let b = x.trailing_zeros() as usize;
                        orow[x] = orow[x & (x - 1)] ^ h[2 * b] ^ h[2 * b + 1];
                    }
                }
                let otw = &mut tws[..n * rows];
                for (r, tr) in otw.chunks_exact_mut(n).enumerate() {
                    let idx0 = base.wrapping_add((r * m) as u64);
                    for (x, tw) in tr.iter_mut().enumerate() {
                        *tw = outer_tweak(idx0, x);
                    }
                }
                tccr_tweaked(o, otw);
            },
        );
}

/// Receiver's 1-of-N keys: `mk` holds `m` COT values per row (`K'_i ⊕ b_i·Δ`), `out[r]` gets
/// `K_{choice_r}` (inner and outer hashes batched per task, as for the sender).
fn n_keys_receiver(mk: &[Block], choices: &[u8], first: u64, m: usize, out: &mut [Block]) {
    out.par_chunks_mut(N_TASK_ROWS)
        .zip(mk.par_chunks(m * N_TASK_ROWS))
        .zip(choices.par_chunks(N_TASK_ROWS))
        .enumerate()
        .for_each_init(
            || {
                (
                    vec![Block::ZERO; m * N_TASK_ROWS],
                    vec![Block::ZERO; m * N_TASK_ROWS],
                )
            },
            |(inner, itw), (t, ((o, k), c))| {
                let base = first.wrapping_add((t * N_TASK_ROWS * m) as u64);
                let (inner, itw) = (&mut inner[..k.len()], &mut itw[..k.len()]);
                inner.copy_from_slice(k);
                for (i, tw) in itw.iter_mut().enumerate() {
                    *tw = tweak(DOMAIN_N_INNER, base.wrapping_add(i as u64));
                }
                tccr_tweaked(inner, itw);
                for (r, ((o, h), &x)) in o.iter_mut().zip(inner.chunks_exact(m)).zip(c).enumerate()
                {
                    *o = h.iter().fold(Block::ZERO, |a, b| a ^ *b);
                    itw[r] = outer_tweak(base.wrapping_add((r * m) as u64), x as usize);
                }
                let rows = o.len();
                tccr_tweaked(o, &itw[..rows]);
            },
        );
}

/// Sends `d_j = b_j ⊕ r_j` packed, [`DERAND_FRAME_OTS`] per frame.
fn send_derand<C: Channel>(ch: &mut C, b: &[bool], r: &[bool]) -> Result<(), OtError> {
    debug_assert_eq!(b.len(), r.len());
    let mut d = vec![false; DERAND_FRAME_OTS.min(b.len())];
    let mut packed = vec![Block::ZERO; d.len().div_ceil(128)];
    for (bc, rc) in b.chunks(DERAND_FRAME_OTS).zip(r.chunks(DERAND_FRAME_OTS)) {
        let d = &mut d[..bc.len()];
        for ((d, &b), &r) in d.iter_mut().zip(bc).zip(rc) {
            *d = b ^ r;
        }
        let p = &mut packed[..bc.len().div_ceil(128)];
        pack_choices(d, p);
        let bytes: &[u8] = bytemuck::cast_slice(p);
        ch.send_pod::<u8>(&bytes[..bc.len().div_ceil(8)])?;
    }
    Ok(())
}

/// Receives `n` derandomisation bits and applies them: `k[j] ^= d_j·Δ`. The padding bits of the
/// last byte of each frame must be zero (anything else is a malformed frame, not ignored).
fn recv_derand<C: Channel>(ch: &mut C, k: &mut [Block], delta: Block) -> Result<(), OtError> {
    for kc in k.chunks_mut(DERAND_FRAME_OTS) {
        let len = kc.len();
        let frame = ch.recv_bytes(len.div_ceil(8))?;
        if len % 8 != 0 && frame[len / 8] >> (len % 8) != 0 {
            return Err(OtError::malformed(
                "derandomisation frame has bits set past its last OT",
            ));
        }
        kc.par_chunks_mut(8 * 1024)
            .zip(frame.par_chunks(1024))
            .for_each(|(k, f)| {
                for (k8, &byte) in k.chunks_mut(8).zip(f) {
                    for (i, k) in k8.iter_mut().enumerate() {
                        *k ^= delta.and_bit((byte >> i) & 1 == 1);
                    }
                }
            });
    }
    Ok(())
}

/// Receives `n` derandomisation bits as booleans (same frames and padding check as
/// [`recv_derand`]).
fn recv_derand_bits<C: Channel>(ch: &mut C, n: usize) -> Result<Vec<bool>, OtError> {
    let mut out = Vec::with_capacity(n);
    let mut left = n;
    while left > 0 {
        let len = left.min(DERAND_FRAME_OTS);
        let frame = ch.recv_bytes(len.div_ceil(8))?;
        #[allow(clippy::manual_is_multiple_of)] // is_multiple_of needs Rust 1.87; the MSRV is 1.85
        if len % 8 != 0 && frame[len / 8] >> (len % 8) != 0 {
            return Err(OtError::malformed(
                "derandomisation frame has bits set past its last OT",
            ));
        }
        out.extend((0..len).map(|j| (frame[j / 8] >> (j % 8)) & 1 == 1));
        left -= len;
    }
    Ok(out)
}

/// A pooled OT whose derandomisation bits the receiver has sent
/// ([`PooledOtReceiver::send_choices`]) and whose answer it has not read yet. Holds secret pool
/// state (no `Debug`); consumed by [`PooledOtReceiver::recv_correlated_answer`].
#[must_use = "a pending OT must be answered, or the pools fall out of step"]
pub struct PendingOtRecv {
    first: u64,
    keys: Vec<Block>,
    choices: Vec<bool>,
}

impl PendingOtRecv {
    /// OTs in this batch.
    pub fn len(&self) -> usize {
        self.keys.len()
    }
    /// Whether the batch is empty.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
}

/// The sender's side of a split pooled OT: derandomised keys `K'_j` read by
/// [`PooledOtSender::recv_choices`], not answered yet. Secret (no `Debug`); consumed by
/// [`PooledOtSender::send_correlated_answer`].
#[must_use = "a pending OT must be answered, or the pools fall out of step"]
pub struct PendingOtSend {
    first: u64,
    keys: Vec<Block>,
}

impl PendingOtSend {
    /// OTs in this batch.
    pub fn len(&self) -> usize {
        self.keys.len()
    }
    /// Whether the batch is empty.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
}

/// The sender's side of a sender-first additive OT
/// ([`PooledOtSender::send_correlated_early`]): its pads `x_j` and correlations, waiting for the
/// receiver's derandomisation bits. Secret (no `Debug`).
#[must_use = "a pending OT must be finished, or the pools fall out of step"]
pub struct PendingEarlySend {
    x: Vec<u64>,
    deltas: Vec<u64>,
    bits: u32,
}

impl PendingEarlySend {
    /// OTs in this batch.
    pub fn len(&self) -> usize {
        self.x.len()
    }
    /// Whether the batch is empty.
    pub fn is_empty(&self) -> bool {
        self.x.is_empty()
    }
}

/// The receiver's side of a sender-first additive OT
/// ([`PooledOtReceiver::recv_correlated_early`]): `v_j = x_j + r_j·delta_j` on the pool's random
/// bits `r_j`, waiting for the real choices. Secret (no `Debug`).
#[must_use = "a pending OT must be finished, or the pools fall out of step"]
pub struct PendingEarlyRecv {
    v: Vec<u64>,
    r: Vec<bool>,
    bits: u32,
}

impl PendingEarlyRecv {
    /// OTs in this batch.
    pub fn len(&self) -> usize {
        self.v.len()
    }
    /// Whether the batch is empty.
    pub fn is_empty(&self) -> bool {
        self.v.is_empty()
    }
}

/// What the sender's and the receiver's pools share: the guard that refuses calls after an
/// error, and the cursor that hands out pooled COTs (refilling the deficit first). Both sides
/// take the same counts in the same order, so their global indices and refills stay in step.
trait Pool: Sized {
    /// `(poisoned, pos, consumed)`: whether a call failed, where the unused COTs start, and how
    /// many online calls took so far.
    fn state(&mut self) -> (&mut bool, &mut usize, &mut u64);
    /// Unused pooled COTs.
    fn unused(&self) -> usize;
    /// Adds at least `n` COTs to the pool (exactly `n` with IKNP, whole iterations with Ferret).
    fn fill_inner<C: Channel>(&mut self, ch: &mut C, n: usize) -> Result<(), OtError>;

    /// Runs `f` unless the instance failed earlier; any error marks it failed (its pool
    /// position or filler is then out of step with the peer's).
    fn run<C: Channel, T>(
        &mut self,
        ch: &mut C,
        f: impl FnOnce(&mut Self, &mut C) -> Result<T, OtError>,
    ) -> Result<T, OtError> {
        if *self.state().0 {
            return Err(OtError::arg(
                "this pooled OT instance failed earlier and is out of step with its peer",
            ));
        }
        let r = f(self, ch);
        if r.is_err() {
            *self.state().0 = true;
        }
        r
    }

    /// Takes `n` pooled COTs (refilling the deficit first) without reading or sending anything;
    /// returns the global index of the first and where they lie in the pool.
    fn take<C: Channel>(
        &mut self,
        ch: &mut C,
        n: usize,
    ) -> Result<(u64, std::ops::Range<usize>), OtError> {
        if self.unused() < n {
            let deficit = n - self.unused();
            self.fill_inner(ch, deficit)?;
        }
        let (_, pos, consumed) = self.state();
        let first = *consumed;
        *consumed = first
            .checked_add(n as u64)
            .ok_or_else(|| OtError::arg("OT index counter overflow"))?;
        let range = *pos..*pos + n;
        *pos += n;
        Ok((first, range))
    }
}

impl Pool for PooledOtSender {
    fn state(&mut self) -> (&mut bool, &mut usize, &mut u64) {
        (&mut self.poisoned, &mut self.pos, &mut self.consumed)
    }
    fn unused(&self) -> usize {
        self.available()
    }
    fn fill_inner<C: Channel>(&mut self, ch: &mut C, n: usize) -> Result<(), OtError> {
        // Drop the used prefix first so the pool never grows past what is unused plus `n`.
        self.pool.drain(..self.pos);
        self.pos = 0;
        let start = self.pool.len();
        match &mut self.filler {
            SenderFiller::Iknp(ext) => {
                self.pool.resize(start + n, Block::ZERO);
                ext.send_cot_into(ch, &mut self.pool[start..])
            }
            SenderFiller::SoftSpoken(ext) => {
                self.pool.resize(start + n, Block::ZERO);
                ext.send_cot_into(ch, &mut self.pool[start..])
            }
            SenderFiller::Ferret(f) => {
                // Reserve the final size once: growing a 10^7-block vector by doubling would
                // copy it several times.
                let p = f.params();
                let iters = n.div_ceil(p.per_iteration());
                self.pool
                    .reserve(iters * p.per_iteration() + p.main.reserve());
                while self.pool.len() < start + n {
                    f.extend(ch, &mut self.pool)?;
                }
                Ok(())
            }
        }
    }
}

impl Pool for PooledOtReceiver {
    fn state(&mut self) -> (&mut bool, &mut usize, &mut u64) {
        (&mut self.poisoned, &mut self.pos, &mut self.consumed)
    }
    fn unused(&self) -> usize {
        self.available()
    }
    fn fill_inner<C: Channel>(&mut self, ch: &mut C, n: usize) -> Result<(), OtError> {
        self.keys.drain(..self.pos);
        self.bits.drain(..self.pos);
        self.pos = 0;
        let start = self.keys.len();
        match &mut self.filler {
            ReceiverFiller::Iknp(ext) => {
                let r = self.prg.bits(n);
                self.keys.resize(start + n, Block::ZERO);
                ext.recv_cot_into(ch, &r, &mut self.keys[start..])?;
                self.bits.extend_from_slice(&r);
                Ok(())
            }
            ReceiverFiller::SoftSpoken(ext) => {
                let r = self.prg.bits(n);
                self.keys.resize(start + n, Block::ZERO);
                ext.recv_cot_into(ch, &r, &mut self.keys[start..])?;
                self.bits.extend_from_slice(&r);
                Ok(())
            }
            ReceiverFiller::Ferret(f) => {
                let p = f.params();
                let iters = n.div_ceil(p.per_iteration());
                self.keys
                    .reserve(iters * p.per_iteration() + p.main.reserve());
                self.bits
                    .reserve(iters * p.per_iteration() + p.main.reserve());
                while self.keys.len() < start + n {
                    f.extend(ch, &mut self.keys, &mut self.bits)?;
                }
                Ok(())
            }
        }
    }
}

/// What fills the sender's pool.
enum SenderFiller {
    Iknp(OtExtSender),
    SoftSpoken(SoftSpokenSender),
    Ferret(FerretCotSender),
}

/// What fills the receiver's pool.
enum ReceiverFiller {
    Iknp(OtExtReceiver),
    SoftSpoken(SoftSpokenReceiver),
    Ferret(FerretCotReceiver),
}

/// The pooled-OT sender: holds `Δ` and the pooled `K_j`. Not `Debug` (secret state).
pub struct PooledOtSender {
    filler: SenderFiller,
    delta: Block,
    /// Pooled `K_j`; `pool[pos..]` are unused.
    pool: Vec<Block>,
    pos: usize,
    consumed: u64,
    poisoned: bool,
}

impl PooledOtSender {
    /// Base OTs for an IKNP filler with a random `Δ` (the pool starts empty).
    pub fn setup<C: Channel>(ch: &mut C, prg: &mut Prg) -> Result<Self, OtError> {
        Ok(Self::from_iknp(OtExtSender::setup(ch, prg)?))
    }

    /// Base OTs for an IKNP filler with a caller-chosen non-zero `Δ` (garbling: `lsb(Δ) = 1`).
    pub fn setup_with_delta<C: Channel>(
        ch: &mut C,
        prg: &mut Prg,
        delta: Block,
    ) -> Result<Self, OtError> {
        Ok(Self::from_iknp(OtExtSender::setup_with_delta(
            ch, prg, delta,
        )?))
    }

    /// Base OTs for the chosen filler with a random `Δ` (Ferret also makes its first reserve
    /// here: the setup phase). Pairs with [`PooledOtReceiver::setup_with_source`].
    pub fn setup_with_source<C: Channel>(
        ch: &mut C,
        prg: &mut Prg,
        source: CotSource,
    ) -> Result<Self, OtError> {
        match source {
            CotSource::Iknp => Self::setup(ch, prg),
            CotSource::Ferret(p) => Ok(Self::from_ferret(FerretCotSender::setup(ch, prg, p)?)),
            CotSource::SoftSpoken { k } => {
                Ok(Self::from_softspoken(SoftSpokenSender::setup(ch, prg, k)?))
            }
        }
    }

    /// As [`setup_with_source`](Self::setup_with_source) with a caller-chosen non-zero `Δ`.
    pub fn setup_with_source_and_delta<C: Channel>(
        ch: &mut C,
        prg: &mut Prg,
        source: CotSource,
        delta: Block,
    ) -> Result<Self, OtError> {
        match source {
            CotSource::Iknp => Self::setup_with_delta(ch, prg, delta),
            CotSource::Ferret(p) => Ok(Self::from_ferret(FerretCotSender::setup_with_delta(
                ch, prg, p, delta,
            )?)),
            CotSource::SoftSpoken { k } => Ok(Self::from_softspoken(
                SoftSpokenSender::setup_with_delta(ch, prg, delta, k)?,
            )),
        }
    }

    /// Wraps a bootstrapped Ferret sender (its `Δ` becomes the pool's).
    pub fn from_ferret(f: FerretCotSender) -> Self {
        Self::with_filler(f.delta(), SenderFiller::Ferret(f))
    }

    /// Wraps a SoftSpokenOT sender that is already set up (its `Δ` becomes the pool's).
    pub fn from_softspoken(ext: SoftSpokenSender) -> Self {
        Self::with_filler(ext.delta(), SenderFiller::SoftSpoken(ext))
    }

    /// Wraps an IKNP sender that is already set up (its `Δ` becomes the pool's).
    pub fn from_iknp(ext: OtExtSender) -> Self {
        Self::with_filler(ext.delta(), SenderFiller::Iknp(ext))
    }

    fn with_filler(delta: Block, filler: SenderFiller) -> Self {
        PooledOtSender {
            delta,
            filler,
            pool: Vec::new(),
            pos: 0,
            consumed: 0,
            poisoned: false,
        }
    }

    /// The global correlation `Δ`.
    pub fn delta(&self) -> Block {
        self.delta
    }

    /// The filler protocol.
    pub fn source(&self) -> CotSource {
        match &self.filler {
            SenderFiller::Iknp(_) => CotSource::Iknp,
            SenderFiller::SoftSpoken(s) => CotSource::SoftSpoken { k: s.k() },
            SenderFiller::Ferret(f) => CotSource::Ferret(f.params()),
        }
    }

    /// The extension running the other way (this party receiving), bootstrapped on 128 random
    /// OTs of this pool instead of a second run of public-key base OTs (the standard reverse
    /// bootstrap): the random OTs' hashed key pairs, independent of this pool's Δ, are the new
    /// extension's base-OT pairs. The peer calls [`PooledOtReceiver::bootstrap_reverse`] at the
    /// same point. Same filler as this pool; Ferret pools are refused (128 COTs would cost a
    /// whole LPN iteration: set the other direction up with base OTs instead).
    pub fn bootstrap_reverse<C: Channel>(
        &mut self,
        ch: &mut C,
        prg: &mut Prg,
    ) -> Result<PooledOtReceiver, OtError> {
        let source = reversible(self.source())?;
        let base = self.send_rot(ch, 128)?;
        Ok(match source {
            CotSource::SoftSpoken { k } => PooledOtReceiver::from_softspoken(
                SoftSpokenReceiver::from_base_ots(ch, &base, k)?,
                prg,
            ),
            _ => PooledOtReceiver::from_iknp(OtExtReceiver::from_base_ots(&base)?, prg),
        })
    }

    /// Unused pooled COTs.
    pub fn available(&self) -> usize {
        self.pool.len() - self.pos
    }

    /// Pooled COTs consumed so far by online calls (1 per 1-of-2 OT, `⌈log2 N⌉` per 1-of-N OT):
    /// run the online calls once against a pool and fill this many next time.
    pub fn consumed(&self) -> u64 {
        self.consumed
    }

    /// Offline phase: adds at least `n` random COTs to the pool (exactly `n` with IKNP, whole
    /// iterations of `per_iteration()` with Ferret); pairs with the receiver's `fill(n)`.
    pub fn fill<C: Channel>(&mut self, ch: &mut C, n: usize) -> Result<(), OtError> {
        self.run(ch, |s, ch| s.fill_inner(ch, n))
    }

    /// Offline phase: tops the pool up to at least `n` unused COTs (fills the deficit, if any);
    /// pairs with the receiver's `reserve(n)`.
    pub fn reserve<C: Channel>(&mut self, ch: &mut C, n: usize) -> Result<(), OtError> {
        let deficit = n.saturating_sub(self.available());
        self.run(ch, |s, ch| s.fill_inner(ch, deficit))
    }

    /// Takes `n` pooled COTs (refilling the deficit first) and applies the derandomisation bits
    /// read from the peer in place (they are consumed anyway); returns the global index of the
    /// first and where the `K'_j = K_j ⊕ d_j·Δ` lie in the pool.
    fn derand<C: Channel>(
        &mut self,
        ch: &mut C,
        n: usize,
    ) -> Result<(u64, std::ops::Range<usize>), OtError> {
        let (first, range) = self.take(ch, n)?;
        recv_derand(ch, &mut self.pool[range.clone()], self.delta)?;
        Ok((first, range))
    }

    /// Correlated OT into a caller's buffer: `out[j] = m0_j`; the receiver gets `m0_j ⊕ c_j·Δ`.
    pub fn send_cot_into<C: Channel>(
        &mut self,
        ch: &mut C,
        out: &mut [Block],
    ) -> Result<(), OtError> {
        self.run(ch, |s, ch| {
            let (_, r) = s.derand(ch, out.len())?;
            out.copy_from_slice(&s.pool[r]);
            Ok(())
        })
    }

    /// [`PooledOtSender::send_cot`] without the copy: the `m0_j` as a view into the pool, valid
    /// while the pool is not used again (the GRU's ≈ 0.8 M label COTs feed the garbler
    /// straight from it).
    pub fn send_cot_view<C: Channel>(&mut self, ch: &mut C, n: usize) -> Result<&[Block], OtError> {
        let r = self.run(ch, |s, ch| s.derand(ch, n).map(|(_, r)| r))?;
        Ok(&self.pool[r])
    }

    /// Correlated OT: returns `m0_j`; the receiver gets `m0_j ⊕ (c_j · Δ)`.
    pub fn send_cot<C: Channel>(&mut self, ch: &mut C, n: usize) -> Result<Vec<Block>, OtError> {
        self.run(ch, |s, ch| {
            let (_, r) = s.derand(ch, n)?;
            Ok(s.pool[r].to_vec())
        })
    }

    /// Random OT on the pool's own random choice bits, with **no message** either way: takes
    /// `out.len()` pooled COTs (refilling the deficit first, like every call) and writes
    /// `(H(j, K_j), H(j, K_j ⊕ Δ))`; the receiver's [`PooledOtReceiver::take_random_rot_into`]
    /// gets its pool bit `r_j` and `H(j, K_j ⊕ r_j·Δ)`. These are exactly the keys of
    /// [`send_rot_into`](Self::send_rot_into) with the choice `c_j = r_j` (derandomisation bit
    /// `d_j = 0`, which then need not travel), for material whose choice may be random (Beaver
    /// bit triples). Each pooled COT is still consumed once under its global index.
    pub fn take_random_rot_into<C: Channel>(
        &mut self,
        ch: &mut C,
        out: &mut [[Block; 2]],
    ) -> Result<(), OtError> {
        self.run(ch, |s, ch| {
            let (first, r) = s.take(ch, out.len())?;
            hash_pairs(&s.pool[r], s.delta, first, bytemuck::cast_slice_mut(out));
            Ok(())
        })
    }

    /// Random OT into a caller's buffer: `(k0_j, k1_j)`; the receiver gets `k_{c_j}`.
    pub fn send_rot_into<C: Channel>(
        &mut self,
        ch: &mut C,
        out: &mut [[Block; 2]],
    ) -> Result<(), OtError> {
        self.run(ch, |s, ch| {
            let (first, r) = s.derand(ch, out.len())?;
            let k = &s.pool[r];
            hash_pairs(k, s.delta, first, bytemuck::cast_slice_mut(out));
            Ok(())
        })
    }

    /// Random OT: returns `(k0_j, k1_j)`; the receiver gets `k_{c_j}`.
    pub fn send_rot<C: Channel>(
        &mut self,
        ch: &mut C,
        n: usize,
    ) -> Result<Vec<[Block; 2]>, OtError> {
        let mut out = vec![[Block::ZERO; 2]; n];
        self.send_rot_into(ch, &mut out)?;
        Ok(out)
    }

    /// Chosen-message OT on 128-bit messages: the receiver learns `msgs[j][c_j]`.
    pub fn send_chosen<C: Channel>(
        &mut self,
        ch: &mut C,
        msgs: &[[Block; 2]],
    ) -> Result<(), OtError> {
        self.run(ch, |s, ch| {
            let (first, r) = s.derand(ch, msgs.len())?;
            send_chosen_frames(ch, &s.pool[r], first, msgs, pairs(s.delta))?;
            ch.flush()?;
            Ok(())
        })
    }

    /// Chosen-message OT on `bits`-bit messages (each `< 2^bits`), packed to `bits` on the wire.
    pub fn send_chosen_u64<C: Channel>(
        &mut self,
        ch: &mut C,
        msgs: &[[u64; 2]],
        bits: u32,
    ) -> Result<(), OtError> {
        check_bits(bits)?;
        check_fits(bytemuck::cast_slice(msgs), bits)?;
        self.run(ch, |s, ch| {
            let (first, r) = s.derand(ch, msgs.len())?;
            send_chosen_u64_frames(ch, &s.pool[r], first, msgs, bits, pairs(s.delta))?;
            ch.flush()?;
            Ok(())
        })
    }

    /// Additively correlated OT over `Z_{2^bits}`: returns `x_j` (uniform); the receiver gets
    /// `x_j + c_j·deltas[j] mod 2^bits`. One packed `bits`-bit word per OT back.
    pub fn send_correlated_u64<C: Channel>(
        &mut self,
        ch: &mut C,
        deltas: &[u64],
        bits: u32,
    ) -> Result<Vec<u64>, OtError> {
        check_bits(bits)?;
        self.run(ch, |s, ch| {
            let (first, r) = s.derand(ch, deltas.len())?;
            let xs = send_correlated_frames(ch, &s.pool[r], first, deltas, bits, pairs(s.delta))?;
            ch.flush()?;
            Ok(xs)
        })
    }

    /// First half of a pooled OT split over two flights: takes `n` pooled COTs and reads their
    /// derandomisation bits (sent by [`PooledOtReceiver::send_choices`], possibly in one flight
    /// with other messages); the answer goes out later with
    /// [`send_correlated_answer`](Self::send_correlated_answer).
    pub fn recv_choices<C: Channel>(
        &mut self,
        ch: &mut C,
        n: usize,
    ) -> Result<PendingOtSend, OtError> {
        self.run(ch, |s, ch| {
            let (first, r) = s.derand(ch, n)?;
            Ok(PendingOtSend {
                first,
                keys: s.pool[r].to_vec(),
            })
        })
    }

    /// Second half: answers `pending` as [`send_correlated_u64`](Self::send_correlated_u64)
    /// does (returns `x_j`; the receiver gets `x_j + c_j·deltas[j]`) but **does not flush**, so
    /// that the answers of several calls travel in one flight. `deltas.len()` must equal
    /// `pending.len()`; `pending` is consumed, so its COTs cannot be answered twice.
    pub fn send_correlated_answer<C: Channel>(
        &mut self,
        ch: &mut C,
        pending: PendingOtSend,
        deltas: &[u64],
        bits: u32,
    ) -> Result<Vec<u64>, OtError> {
        check_bits(bits)?;
        if deltas.len() != pending.keys.len() {
            return Err(OtError::arg(format!(
                "send_correlated_answer: {} correlations for {} pending OTs",
                deltas.len(),
                pending.keys.len()
            )));
        }
        self.run(ch, |s, ch| {
            send_correlated_frames(
                ch,
                &pending.keys,
                pending.first,
                deltas,
                bits,
                pairs(s.delta),
            )
        })
    }

    /// Sender-first additive OT over `Z_{2^bits}` (Beaver's derandomisation): for correlations
    /// known *before* the receiver's choices, takes `deltas.len()` pooled COTs and sends
    /// `H(j, K_j) + deltas[j] − H(j, K_j ⊕ Δ)` on the *random* COTs now (not flushed); the
    /// receiver's choices follow later as derandomisation bits `d_j`, read by
    /// [`finish_early`](Self::finish_early). One word sender → receiver and one bit back per OT,
    /// as for [`send_correlated_u64`](Self::send_correlated_u64), but the word can leave a flight
    /// earlier. Pairs with [`PooledOtReceiver::recv_correlated_early`].
    pub fn send_correlated_early<C: Channel>(
        &mut self,
        ch: &mut C,
        deltas: &[u64],
        bits: u32,
    ) -> Result<PendingEarlySend, OtError> {
        check_bits(bits)?;
        self.run(ch, |s, ch| {
            let (first, r) = s.take(ch, deltas.len())?;
            let x = send_correlated_frames(ch, &s.pool[r], first, deltas, bits, pairs(s.delta))?;
            Ok(PendingEarlySend {
                x,
                deltas: deltas.to_vec(),
                bits,
            })
        })
    }

    /// Second half of the sender-first OT: reads the receiver's `d_j` and returns
    /// `s_j = x_j` (d_j = 0) or `−x_j − deltas[j]` (d_j = 1), so that the receiver's
    /// `u_j = s_j + c_j·deltas[j] mod 2^bits`.
    pub fn finish_early<C: Channel>(
        &mut self,
        ch: &mut C,
        pending: PendingEarlySend,
    ) -> Result<Vec<u64>, OtError> {
        self.run(ch, |_, ch| {
            let d = recv_derand_bits(ch, pending.x.len())?;
            let mk = mask(pending.bits);
            Ok(pending
                .x
                .iter()
                .zip(&pending.deltas)
                .zip(&d)
                .map(|((x, dl), &d)| {
                    if d {
                        x.wrapping_add(*dl).wrapping_neg() & mk
                    } else {
                        *x
                    }
                })
                .collect())
        })
    }

    /// Random 1-of-N from `⌈log2 N⌉` pooled COTs per OT: returns `count × n` keys, row-major;
    /// the receiver gets key `choices[j]` of row `j`.
    pub fn send_random<C: Channel>(
        &mut self,
        ch: &mut C,
        n: usize,
        count: usize,
    ) -> Result<Vec<Block>, OtError> {
        let (m, total, cots) = n_sizes(n, count, false)?;
        self.run(ch, |s, ch| {
            let (first, r) = s.derand(ch, cots)?;
            let k = &s.pool[r];
            let mut out = vec![Block::ZERO; total];
            n_keys_sender(k, s.delta, first, m, n, &mut out);
            Ok(out)
        })
    }

    /// Random 1-of-N on the pool's own random choices, with no message (`n` a power of two,
    /// 2 ≤ n ≤ 256): takes `count·log2 n` pooled COTs and returns `count × n` keys, row-major:
    /// those of [`send_random`](Self::send_random) with every derandomisation bit 0. The
    /// receiver's [`PooledOtReceiver::take_random_n`] gets the random choice of each row (bit `i`
    /// = the pool bit of its `i`-th COT) and that key. Offline material: the chooser later
    /// sends `d = c ⊕ r` and the sender answers `m_x ⊕ K_{x ⊕ d}`, with no hashing online.
    pub fn take_random_n<C: Channel>(
        &mut self,
        ch: &mut C,
        n: usize,
        count: usize,
    ) -> Result<Vec<Block>, OtError> {
        let (m, total, cots) = n_sizes(n, count, true)?;
        self.run(ch, |s, ch| {
            let (first, r) = s.take(ch, cots)?;
            let mut out = vec![Block::ZERO; total];
            n_keys_sender(&s.pool[r], s.delta, first, m, n, &mut out);
            Ok(out)
        })
    }

    /// Chosen 1-of-N on `bits`-bit values: `msgs` is `count × n`, row-major, each `< 2^bits`;
    /// the receiver learns `msgs[j·n + choices[j]]`. `N·bits` bits per OT back.
    pub fn send_u64<C: Channel>(
        &mut self,
        ch: &mut C,
        n: usize,
        msgs: &[u64],
        bits: u32,
    ) -> Result<(), OtError> {
        check_n_msgs(n, msgs, bits)?;
        self.send_u64_with(ch, n, msgs.len() / n, bits, |row0, out| {
            out.copy_from_slice(&msgs[row0 * n..row0 * n + out.len()])
        })
    }

    /// [`send_u64`](Self::send_u64) on `count` rows made frame by frame: `msgs_of(row0, out)`
    /// writes rows `row0..row0 + out.len() / n` (row-major, `n` per row). The same bytes on the
    /// wire; the caller's table of `count × n` words is never held at once. A message that does
    /// not fit in `bits` is an error (nothing of its frame is sent).
    pub fn send_u64_with<C: Channel>(
        &mut self,
        ch: &mut C,
        n: usize,
        count: usize,
        bits: u32,
        msgs_of: impl FnMut(usize, &mut [u64]),
    ) -> Result<(), OtError> {
        let m = log_n(n)?;
        check_bits(bits)?;
        self.run(ch, |s, ch| {
            let (first, r) = s.derand(ch, count * m)?;
            let k = &s.pool[r];
            send_n_frames_with(
                ch,
                n,
                count,
                bits,
                |row0, keys| {
                    let kf = &k[row0 * m..(row0 + keys.len() / n) * m];
                    let base = first.wrapping_add((row0 * m) as u64);
                    n_keys_sender(kf, s.delta, base, m, n, keys);
                },
                msgs_of,
            )?;
            ch.flush()?;
            Ok(())
        })
    }
}

/// The pooled-OT receiver: holds the pooled `(r_j, M_j)`. Not `Debug` (secret state).
pub struct PooledOtReceiver {
    filler: ReceiverFiller,
    /// Draws the pool's random choice bits `r_j`.
    prg: Prg,
    bits: Vec<bool>,
    keys: Vec<Block>,
    pos: usize,
    consumed: u64,
    poisoned: bool,
}

impl PooledOtReceiver {
    /// Base OTs for an IKNP filler (the pool starts empty).
    pub fn setup<C: Channel>(ch: &mut C, prg: &mut Prg) -> Result<Self, OtError> {
        let ext = OtExtReceiver::setup(ch, prg)?;
        Ok(Self::from_iknp(ext, prg))
    }

    /// Base OTs for the chosen filler (Ferret also makes its first reserve here). Pairs with
    /// [`PooledOtSender::setup_with_source`] and `setup_with_source_and_delta`.
    pub fn setup_with_source<C: Channel>(
        ch: &mut C,
        prg: &mut Prg,
        source: CotSource,
    ) -> Result<Self, OtError> {
        match source {
            CotSource::Iknp => Self::setup(ch, prg),
            CotSource::Ferret(p) => {
                let f = FerretCotReceiver::setup(ch, prg, p)?;
                Ok(Self::from_ferret(f, prg))
            }
            CotSource::SoftSpoken { k } => {
                let r = SoftSpokenReceiver::setup(ch, prg, k)?;
                Ok(Self::from_softspoken(r, prg))
            }
        }
    }

    /// Wraps a bootstrapped Ferret receiver (`prg` is unused by Ferret's pool bits, which come
    /// from the protocol, but seeds any later needs the same way as `from_iknp`).
    pub fn from_ferret(f: FerretCotReceiver, prg: &mut Prg) -> Self {
        Self::with_filler(ReceiverFiller::Ferret(f), prg)
    }

    /// Wraps a SoftSpokenOT receiver that is already set up; `prg` seeds the pool's choice bits.
    pub fn from_softspoken(ext: SoftSpokenReceiver, prg: &mut Prg) -> Self {
        Self::with_filler(ReceiverFiller::SoftSpoken(ext), prg)
    }

    /// Wraps an IKNP receiver that is already set up; `prg` seeds the pool's choice bits.
    pub fn from_iknp(ext: OtExtReceiver, prg: &mut Prg) -> Self {
        Self::with_filler(ReceiverFiller::Iknp(ext), prg)
    }

    fn with_filler(filler: ReceiverFiller, prg: &mut Prg) -> Self {
        PooledOtReceiver {
            filler,
            prg: Prg::from_seed(prg.next_block()),
            bits: Vec::new(),
            keys: Vec::new(),
            pos: 0,
            consumed: 0,
            poisoned: false,
        }
    }

    /// The filler protocol.
    pub fn source(&self) -> CotSource {
        match &self.filler {
            ReceiverFiller::Iknp(_) => CotSource::Iknp,
            ReceiverFiller::SoftSpoken(r) => CotSource::SoftSpoken { k: r.k() },
            ReceiverFiller::Ferret(f) => CotSource::Ferret(f.params()),
        }
    }

    /// The peer's side of [`PooledOtSender::bootstrap_reverse`]: draws a fresh Δ ≠ 0, takes
    /// 128 random OTs of this pool with Δ's bits as choices, and returns the sender of the
    /// extension running the other way (same filler as this pool; Ferret refused).
    pub fn bootstrap_reverse<C: Channel>(
        &mut self,
        ch: &mut C,
        prg: &mut Prg,
    ) -> Result<PooledOtSender, OtError> {
        let source = reversible(self.source())?;
        let mut delta = prg.next_block();
        while delta == Block::ZERO {
            delta = prg.next_block();
        }
        let bits: Vec<bool> = (0..128).map(|i| (delta.0 >> i) & 1 == 1).collect();
        let keys = self.recv_rot(ch, &bits)?;
        Ok(match source {
            CotSource::SoftSpoken { k } => PooledOtSender::from_softspoken(
                SoftSpokenSender::from_base_ots(ch, delta, &keys, k)?,
            ),
            _ => PooledOtSender::from_iknp(OtExtSender::from_base_ots(delta, &keys)?),
        })
    }

    /// Unused pooled COTs.
    pub fn available(&self) -> usize {
        self.keys.len() - self.pos
    }

    /// Pooled COTs consumed so far (see [`PooledOtSender::consumed`]).
    pub fn consumed(&self) -> u64 {
        self.consumed
    }

    /// Offline phase: adds at least `n` random COTs to the pool (exactly `n` with IKNP, whole
    /// iterations with Ferret); pairs with the sender's `fill(n)`.
    pub fn fill<C: Channel>(&mut self, ch: &mut C, n: usize) -> Result<(), OtError> {
        self.run(ch, |s, ch| s.fill_inner(ch, n))
    }

    /// Offline phase: tops the pool up to at least `n` unused COTs; pairs with the sender's
    /// `reserve(n)`.
    pub fn reserve<C: Channel>(&mut self, ch: &mut C, n: usize) -> Result<(), OtError> {
        let deficit = n.saturating_sub(self.available());
        self.run(ch, |s, ch| s.fill_inner(ch, deficit))
    }

    /// Takes `choices.len()` pooled COTs (refilling the deficit first) and sends the
    /// derandomisation bits; returns the global index of the first and where the
    /// `M_j = K'_j ⊕ c_j·Δ` lie in the pool.
    fn derand_range<C: Channel>(
        &mut self,
        ch: &mut C,
        choices: &[bool],
    ) -> Result<(u64, std::ops::Range<usize>), OtError> {
        let r = self.take_and_send(ch, choices)?;
        ch.flush()?;
        Ok(r)
    }

    /// Takes `choices.len()` pooled COTs and sends their derandomisation bits without flushing
    /// (a caller that batches several calls into one flight flushes once at its end).
    fn take_and_send<C: Channel>(
        &mut self,
        ch: &mut C,
        choices: &[bool],
    ) -> Result<(u64, std::ops::Range<usize>), OtError> {
        let (first, range) = self.take(ch, choices.len())?;
        send_derand(ch, choices, &self.bits[range.clone()])?;
        Ok((first, range))
    }

    /// [`derand_range`](Self::derand_range), copying the `M_j` to `out`.
    fn derand<C: Channel>(
        &mut self,
        ch: &mut C,
        choices: &[bool],
        out: &mut [Block],
    ) -> Result<u64, OtError> {
        let (first, range) = self.derand_range(ch, choices)?;
        out.copy_from_slice(&self.keys[range]);
        Ok(first)
    }

    /// Correlated OT into a caller's buffer: `out[j] = m0_j ⊕ c_j·Δ`.
    pub fn recv_cot_into<C: Channel>(
        &mut self,
        ch: &mut C,
        choices: &[bool],
        out: &mut [Block],
    ) -> Result<(), OtError> {
        if out.len() != choices.len() {
            return Err(OtError::arg("recv_cot_into: one output block per choice"));
        }
        self.run(ch, |s, ch| s.derand(ch, choices, out).map(|_| ()))
    }

    /// Correlated OT: returns `m0_j ⊕ (c_j · Δ)`.
    pub fn recv_cot<C: Channel>(
        &mut self,
        ch: &mut C,
        choices: &[bool],
    ) -> Result<Vec<Block>, OtError> {
        // Copied straight out of the pool: a zeroed buffer first would cost a pass over it
        // (13 MB for the GRU's labels).
        self.run(ch, |s, ch| {
            let (_, range) = s.derand_range(ch, choices)?;
            Ok(s.keys[range].to_vec())
        })
    }

    /// Random OT on the pool's own random choice bits, with no message: takes `out.len()`
    /// pooled COTs and writes `choices[j] = r_j`, `out[j] = H(j, K_j ⊕ r_j·Δ)`; pairs with
    /// [`PooledOtSender::take_random_rot_into`] (see there).
    pub fn take_random_rot_into<C: Channel>(
        &mut self,
        ch: &mut C,
        choices: &mut [bool],
        out: &mut [Block],
    ) -> Result<(), OtError> {
        if out.len() != choices.len() {
            return Err(OtError::arg(
                "take_random_rot_into: one output block per choice",
            ));
        }
        self.run(ch, |s, ch| {
            let (first, r) = s.take(ch, out.len())?;
            choices.copy_from_slice(&s.bits[r.clone()]);
            out.copy_from_slice(&s.keys[r]);
            hash_rows(out, first);
            Ok(())
        })
    }

    /// Random OT into a caller's buffer: `out[j] = k_{c_j}`.
    pub fn recv_rot_into<C: Channel>(
        &mut self,
        ch: &mut C,
        choices: &[bool],
        out: &mut [Block],
    ) -> Result<(), OtError> {
        if out.len() != choices.len() {
            return Err(OtError::arg("recv_rot_into: one output block per choice"));
        }
        self.run(ch, |s, ch| {
            let first = s.derand(ch, choices, out)?;
            hash_rows(out, first);
            Ok(())
        })
    }

    /// Random OT: returns `k_{c_j}`.
    pub fn recv_rot<C: Channel>(
        &mut self,
        ch: &mut C,
        choices: &[bool],
    ) -> Result<Vec<Block>, OtError> {
        let mut out = vec![Block::ZERO; choices.len()];
        self.recv_rot_into(ch, choices, &mut out)?;
        Ok(out)
    }

    /// Chosen-message OT on 128-bit messages: returns `msgs[j][c_j]`.
    pub fn recv_chosen<C: Channel>(
        &mut self,
        ch: &mut C,
        choices: &[bool],
    ) -> Result<Vec<Block>, OtError> {
        self.run(ch, |s, ch| {
            let mut out = vec![Block::ZERO; choices.len()];
            let first = s.derand(ch, choices, &mut out)?;
            hash_rows(&mut out, first);
            recv_chosen_frames(ch, &mut out, choices)?;
            Ok(out)
        })
    }

    /// Hashed derandomised COTs, truncated to `bits`.
    fn hashed_u64<C: Channel>(
        &mut self,
        ch: &mut C,
        choices: &[bool],
        bits: u32,
    ) -> Result<Vec<u64>, OtError> {
        // Hashed in place in the pool: these M_j are consumed here (the used prefix is dropped
        // at the next refill), so a zeroed copy of n blocks would only cost time and pages.
        let (first, range) = self.derand_range(ch, choices)?;
        let h = &mut self.keys[range];
        hash_rows(h, first);
        Ok(low_bits(h, bits))
    }

    /// Chosen-message OT on `bits`-bit messages: returns `msgs[j][c_j]`.
    pub fn recv_chosen_u64<C: Channel>(
        &mut self,
        ch: &mut C,
        choices: &[bool],
        bits: u32,
    ) -> Result<Vec<u64>, OtError> {
        check_bits(bits)?;
        self.run(ch, |s, ch| {
            let mut out = s.hashed_u64(ch, choices, bits)?;
            recv_chosen_u64_frames(ch, &mut out, choices, bits)?;
            Ok(out)
        })
    }

    /// Additively correlated OT over `Z_{2^bits}`: returns `x_j + c_j·delta_j mod 2^bits`.
    pub fn recv_correlated_u64<C: Channel>(
        &mut self,
        ch: &mut C,
        choices: &[bool],
        bits: u32,
    ) -> Result<Vec<u64>, OtError> {
        check_bits(bits)?;
        self.run(ch, |s, ch| {
            let out = s.hashed_u64(ch, choices, bits)?;
            recv_correlated_frames(ch, out, choices, bits)
        })
    }

    /// First half of a pooled OT split over two flights: takes `choices.len()` pooled COTs and
    /// sends their derandomisation bits **without flushing**, so that several calls (in either
    /// direction's pool) travel in one flight; the answer is read later by
    /// [`recv_correlated_answer`](Self::recv_correlated_answer) on the returned [`PendingOtRecv`].
    /// Pairs with [`PooledOtSender::recv_choices`]. The caller flushes at the end of its flight.
    pub fn send_choices<C: Channel>(
        &mut self,
        ch: &mut C,
        choices: &[bool],
    ) -> Result<PendingOtRecv, OtError> {
        self.run(ch, |s, ch| {
            let (first, r) = s.take_and_send(ch, choices)?;
            // Copied out: a later refill drains the pool's used prefix, so a range would not
            // stay valid until the answer arrives.
            Ok(PendingOtRecv {
                first,
                keys: s.keys[r].to_vec(),
                choices: choices.to_vec(),
            })
        })
    }

    /// Second half: reads the sender's answer to `pending` (from
    /// [`PooledOtSender::send_correlated_answer`]) and returns `x_j + c_j·delta_j mod 2^bits`,
    /// exactly as [`recv_correlated_u64`](Self::recv_correlated_u64). `pending` is consumed, so
    /// its COTs cannot be answered twice.
    pub fn recv_correlated_answer<C: Channel>(
        &mut self,
        ch: &mut C,
        pending: PendingOtRecv,
        bits: u32,
    ) -> Result<Vec<u64>, OtError> {
        check_bits(bits)?;
        self.run(ch, |_, ch| {
            let PendingOtRecv {
                first,
                mut keys,
                choices,
            } = pending;
            hash_rows(&mut keys, first);
            recv_correlated_frames(ch, low_bits(&keys, bits), &choices, bits)
        })
    }

    /// Receiver of a *sender-first* additive OT (Beaver's derandomisation with the sender's
    /// message sent before the choice is known): takes `n` pooled COTs, reads the sender's
    /// words `y_j = H(j, K_j) + delta_j − H(j, K_j ⊕ Δ)` and keeps `v_j = H(j, M_j) + r_j·y_j =
    /// x_j + r_j·delta_j` on the pool's random bit `r_j`. The choices come later, in
    /// [`finish_early`](Self::finish_early). Pairs with [`PooledOtSender::send_correlated_early`].
    pub fn recv_correlated_early<C: Channel>(
        &mut self,
        ch: &mut C,
        n: usize,
        bits: u32,
    ) -> Result<PendingEarlyRecv, OtError> {
        check_bits(bits)?;
        self.run(ch, |s, ch| {
            let (first, range) = s.take(ch, n)?;
            let mut h = s.keys[range.clone()].to_vec();
            hash_rows(&mut h, first);
            let r = s.bits[range].to_vec();
            let v = recv_correlated_frames(ch, low_bits(&h, bits), &r, bits)?;
            Ok(PendingEarlyRecv { v, r, bits })
        })
    }

    /// Second half of the sender-first OT: sends `d_j = c_j ⊕ r_j` (not flushed: it joins the
    /// caller's flight) and returns `u_j = (1 − 2d_j)·v_j`, so that `u_j − s_j = c_j·delta_j`
    /// for the sender's `s_j` from [`PooledOtSender::finish_early`].
    pub fn finish_early<C: Channel>(
        &mut self,
        ch: &mut C,
        pending: PendingEarlyRecv,
        choices: &[bool],
    ) -> Result<Vec<u64>, OtError> {
        if choices.len() != pending.v.len() {
            return Err(OtError::arg(format!(
                "finish_early: {} choices for {} pending OTs",
                choices.len(),
                pending.v.len()
            )));
        }
        self.run(ch, |_, ch| {
            send_derand(ch, choices, &pending.r)?;
            let mk = mask(pending.bits);
            Ok(pending
                .v
                .iter()
                .zip(choices.iter().zip(&pending.r))
                .map(|(v, (&c, &r))| if c ^ r { v.wrapping_neg() & mk } else { *v })
                .collect())
        })
    }

    fn check_choices(n: usize, choices: &[u8]) -> Result<usize, OtError> {
        let m = log_n(n)?;
        if let Some(w) = choices.iter().find(|&&w| w as usize >= n) {
            return Err(OtError::arg(format!("choice {w} is not below N = {n}")));
        }
        choices
            .len()
            .checked_mul(m)
            .ok_or_else(|| OtError::arg("count × log2 N overflows"))?;
        Ok(m)
    }

    /// The receiver's 1-of-N keys: `m` COTs per row on the bits of `choices[j]`.
    fn n_keys<C: Channel>(
        &mut self,
        ch: &mut C,
        m: usize,
        choices: &[u8],
    ) -> Result<Vec<Block>, OtError> {
        let bits: Vec<bool> = choices
            .iter()
            .flat_map(|&w| (0..m).map(move |i| (w >> i) & 1 == 1))
            .collect();
        let (first, range) = self.derand_range(ch, &bits)?;
        let mut out = vec![Block::ZERO; choices.len()];
        n_keys_receiver(&self.keys[range], choices, first, m, &mut out);
        Ok(out)
    }

    /// Random 1-of-N on the pool's own random choices, with no message; pairs with
    /// [`PooledOtSender::take_random_n`]: returns each row's random choice `r` (bit `i` = the
    /// pool bit of its `i`-th COT) and key `K_r`.
    pub fn take_random_n<C: Channel>(
        &mut self,
        ch: &mut C,
        n: usize,
        count: usize,
    ) -> Result<(Vec<u8>, Vec<Block>), OtError> {
        let (m, _, cots) = n_sizes(n, count, true)?;
        self.run(ch, |s, ch| {
            let (first, range) = s.take(ch, cots)?;
            let choices: Vec<u8> = s.bits[range.clone()]
                .chunks_exact(m)
                .map(|b| {
                    b.iter()
                        .enumerate()
                        .fold(0u8, |a, (i, &x)| a | (x as u8) << i)
                })
                .collect();
            let mut out = vec![Block::ZERO; count];
            n_keys_receiver(&s.keys[range], &choices, first, m, &mut out);
            Ok((choices, out))
        })
    }

    /// Random 1-of-N: returns key `choices[j]` of row `j`.
    pub fn recv_random<C: Channel>(
        &mut self,
        ch: &mut C,
        n: usize,
        choices: &[u8],
    ) -> Result<Vec<Block>, OtError> {
        let m = Self::check_choices(n, choices)?;
        self.run(ch, |s, ch| s.n_keys(ch, m, choices))
    }

    /// Chosen 1-of-N on `bits`-bit values: returns `msgs[j·n + choices[j]]`.
    pub fn recv_u64<C: Channel>(
        &mut self,
        ch: &mut C,
        n: usize,
        choices: &[u8],
        bits: u32,
    ) -> Result<Vec<u64>, OtError> {
        let m = Self::check_choices(n, choices)?;
        check_bits(bits)?;
        self.run(ch, |s, ch| {
            let keys = s.n_keys(ch, m, choices)?;
            let mut out = low_bits(&keys, bits);
            drop(keys);
            recv_n_frames(ch, n, &mut out, choices, bits)?;
            Ok(out)
        })
    }
}
