//! Per-party protocol state: the party's role, its PRG, its OT-extension endpoints (paired
//! crosswise with the peer's), and the counter of building-block invocations.
use crate::blocks::steps;
use crate::error::{invalid, Result};
use crate::ring::mask;
use rand_core::RngCore;
use secinfer_core::{Block, Prg};
use secinfer_net::{Channel, Meter, NetError};
use secinfer_ot::CotSource;
use std::collections::BTreeMap;
use std::time::Instant;

/// What one building block cost, summed over its invocations (see [`Ctx::stats`]).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct BlockStat {
    /// Invocations.
    pub calls: u64,
    /// Wall time inside the block (seconds).
    pub time_s: f64,
    /// Bytes this party sent plus received inside the block (both directions of the link).
    pub bytes: u64,
    /// 1-of-2 correlated OTs this party took part in (sent or received).
    pub cots: u64,
    /// 1-of-N OTs this party took part in.
    pub kk_ots: u64,
}

/// Total traffic of this party so far (all phases, both directions).
fn traffic<C: Channel>(ch: &C) -> u64 {
    ch.meter().snapshot().total().bytes()
}

/// Test dealer, receiver side: reads `stride` messages per OT (all < 2^bits) and keeps the
/// chosen one of each.
#[cfg(feature = "test-dealer")]
fn dealer_pick<C: Channel, T: Copy>(
    ch: &mut C,
    stride: usize,
    choices: &[T],
    bits: u32,
) -> Result<Vec<u64>>
where
    usize: From<T>,
{
    let total = stride * choices.len();
    let mut msg: Vec<u64> = Vec::with_capacity(total);
    while msg.len() < total {
        let part: Vec<u64> = ch.recv_pod(DEALER_FRAME_WORDS.min(total - msg.len()))?;
        msg.extend_from_slice(&part);
    }
    let m = mask(bits);
    if msg.iter().any(|v| v & !m != 0) {
        return Err(crate::error::SsError::Malformed(
            "dealer value out of range".into(),
        ));
    }
    Ok(choices
        .iter()
        .enumerate()
        .map(|(j, c)| msg[j * stride + usize::from(*c)])
        .collect())
}

/// Words per dealer frame: large batches (the exhaustive 2^20-input tests) would exceed the
/// channel's frame limit in one message.
#[cfg(feature = "test-dealer")]
const DEALER_FRAME_WORDS: usize = 1 << 22;

/// Sends the dealer's message in frames of at most [`DEALER_FRAME_WORDS`] words, as
/// [`dealer_pick`] reads it.
#[cfg(feature = "test-dealer")]
fn dealer_send<C: Channel>(ch: &mut C, msg: &[u64]) -> Result<()> {
    for part in msg.chunks(DEALER_FRAME_WORDS) {
        ch.send_pod(part)?;
    }
    Ok(())
}

/// Which side a party plays. The server is P0 (the OT/1-of-N sender where a protocol has one
/// fixed sender), the client is P1.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Party {
    Client,
    Server,
}

impl Party {
    pub fn is_p0(self) -> bool {
        matches!(self, Party::Server)
    }
    pub fn other(self) -> Party {
        match self {
            Party::Client => Party::Server,
            Party::Server => Party::Client,
        }
    }
}

/// Where the OT correlations come from.
pub(crate) enum Backend {
    /// IKNP/ALSZ and KK13 OT extension from `secinfer-ot`.
    Real(Box<crate::ot_real::RealOt>),
    /// Dry run: no peer and no traffic; every OT output is zero. Used only to count what a
    /// protocol consumes ([`Ctx::dry_run`]), since OT counts never depend on the data.
    Count,
    /// Test only: the sender ships every message in the clear. Not secure.
    #[cfg(feature = "test-dealer")]
    Dealer,
}

/// The correlations a protocol run consumes, counted in OTs per direction. Both parties count
/// the same numbers (one's sends are the other's receives), so each can size its offline phase
/// from its own dry run without a message.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// 1-of-2 OTs with P0 (the server) as sender, plus ⌈log2 N⌉ per 1-of-N OT (P0 sends all
    /// of those): the pool P0 → P1.
    pub cots_from_p0: u64,
    /// 1-of-2 OTs with P1 as sender: the pool P1 → P0.
    pub cots_from_p1: u64,
    /// Beaver bit triples for AND gates (each made offline from one random COT each way, on
    /// the pools' own random choice bits, so with no message). Each carries a second `b`, so
    /// it also serves two ANDs that share one operand (`x∧y`, `x∧z`: [`Ctx::and2_bits`]).
    pub triples: u64,
    /// Half triples for ANDs of *private* bits (P0's `p`, P1's `q`, as in the millionaires'
    /// leaves): P0 knows `u`, P1 knows `v`, both hold XOR shares of `u·v`; one random COT of
    /// the P0 → P1 pool each, no message offline.
    pub half_triples: u64,
    /// Random 1-of-2^m OTs for the millionaires' m-bit leaves (m = [`Ctx::mill_leaf_bits`]
    /// ≥ 2): m COTs of the P0 → P1 pool each, hashed offline, so a leaf online is m choice bits
    /// one way and 2^(m+1) masked bits back, with no hashing.
    pub leaf_ots: u64,
}

impl Plan {
    /// Every count times `k` (`None` on overflow).
    pub fn scaled(&self, k: u64) -> Option<Plan> {
        Some(Plan {
            cots_from_p0: self.cots_from_p0.checked_mul(k)?,
            cots_from_p1: self.cots_from_p1.checked_mul(k)?,
            triples: self.triples.checked_mul(k)?,
            half_triples: self.half_triples.checked_mul(k)?,
            leaf_ots: self.leaf_ots.checked_mul(k)?,
        })
    }

    pub fn add(&mut self, o: &Plan) {
        self.cots_from_p0 += o.cots_from_p0;
        self.cots_from_p1 += o.cots_from_p1;
        self.triples += o.triples;
        self.half_triples += o.half_triples;
        self.leaf_ots += o.leaf_ots;
    }
}

/// Offline material of one kind, consumed in order from `pos` (the used prefix is dropped
/// before more is appended).
#[derive(Default)]
struct Stock<T> {
    t: Vec<T>,
    pos: usize,
}

impl<T> Stock<T> {
    fn available(&self) -> usize {
        self.t.len() - self.pos
    }
    fn compact(&mut self) {
        self.t.drain(..self.pos);
        self.pos = 0;
    }
}

/// Precomputed Beaver bit triples (this party's shares): a, b, b2 and c = a·b, c2 = a·b2 (XOR
/// shares), packed as bits 0..5 of one byte per triple: the layout [`steps::and_open`] reads.
type Triples = Stock<u8>;

/// Precomputed half triples: bit 0 = this party's known factor (P0's u, P1's v), bit 1 = its
/// share of u·v ([`steps::and_private_open`]'s layout).
type HalfTriples = Stock<u8>;

/// Precomputed random 1-of-2^m leaf OTs: P0 keeps the 2-bit masks of all 2^m keys (packed,
/// mask x at bits 2x..2x+2; m ≤ 4), P1 its random choice r (bits 0..8) and the 2-bit mask of
/// K_r (bits 8..10): the layout [`steps::leaf_query`] and [`steps::leaf_answer`] read.
type LeafOts = Stock<u32>;

/// Random OTs per batch while making triples (bounds the hashed keys held at once).
const TRIPLE_BATCH: usize = 1 << 16;

/// ⌈log2 n⌉ for 2 ≤ n ≤ 256: the pooled COTs one 1-of-n OT takes.
pub(crate) fn log2_ceil(n: usize) -> u64 {
    (usize::BITS - n.saturating_sub(1).leading_zeros()) as u64
}

/// The channel of a dry run: nothing is ever sent or received through it (the `Count` backend
/// does not touch it); a receive is an error rather than a hang.
pub struct DryChannel {
    meter: Meter,
}

impl DryChannel {
    pub fn new() -> Self {
        DryChannel {
            meter: Meter::default(),
        }
    }
}

impl Default for DryChannel {
    fn default() -> Self {
        Self::new()
    }
}

impl Channel for DryChannel {
    fn send_frame(&mut self, _frame: &[u8]) -> secinfer_net::Result<()> {
        Ok(())
    }
    fn recv_frame(&mut self) -> secinfer_net::Result<Vec<u8>> {
        Err(NetError::Closed)
    }
    fn flush(&mut self) -> secinfer_net::Result<()> {
        Ok(())
    }
    fn meter(&self) -> &Meter {
        &self.meter
    }
    fn meter_mut(&mut self) -> &mut Meter {
        &mut self.meter
    }
    fn max_frame(&self) -> usize {
        0
    }
}

/// One party's session state. Channel-independent; every protocol takes `(&mut Ctx, &mut C)`.
///
/// No `Debug`: it holds OT keys.
pub struct Ctx {
    pub party: Party,
    pub(crate) prg: Prg,
    pub(crate) backend: Backend,
    /// Building-block invocations (batched calls, i.e. per element) by name.
    pub counts: BTreeMap<&'static str, u64>,
    /// Cost per building block, keyed by the block directly under the outermost one (a math
    /// function's own steps, e.g. `msb_wrap`, `exp_neg`, `rec`), or the outermost block itself
    /// when the cost is its own. Sub-blocks deeper down are charged to their level-1 ancestor so
    /// the entries add up to the whole function.
    pub stats: BTreeMap<&'static str, BlockStat>,
    /// Names of the running blocks, outermost first.
    path: Vec<&'static str>,
    /// OTs consumed so far (see [`Plan`]).
    used: Plan,
    /// Precomputed bit triples (real backend only).
    triples: Triples,
    /// Precomputed half triples for private-bit ANDs (real backend only).
    halves: HalfTriples,
    /// Precomputed random 1-of-2^m OTs for the millionaires' leaves (real backend only).
    leaves: LeafOts,
    /// The millionaires' leaf size with triples (see [`Ctx::set_mill_leaf_bits`]).
    mill_leaf: u32,
    /// Nesting depth of the running block.
    depth: u32,
    /// Print each block's wall time to stderr (P0 only; off unless [`Ctx::set_trace`]).
    trace: bool,
}

impl Ctx {
    /// Setup phase: base OTs of the COT pools in both directions (filled later by
    /// [`Ctx::preprocess`], or on demand), IKNP filler.
    pub fn setup<C: Channel>(party: Party, ch: &mut C) -> Result<Ctx> {
        Self::setup_with(party, ch, CotSource::Iknp)
    }

    /// Setup with a chosen filler for the COT pools (IKNP: 16 bytes per COT offline;
    /// SoftSpokenOT: 16/k bytes per COT offline for more CPU; Ferret: well under a bit per COT
    /// offline, but it makes ~10^7 COTs per iteration).
    pub fn setup_with<C: Channel>(party: Party, ch: &mut C, source: CotSource) -> Result<Ctx> {
        let mut prg = Prg::new();
        let real = crate::ot_real::RealOt::setup(party, ch, &mut prg, source)?;
        Ok(Ctx {
            party,
            prg,
            backend: Backend::Real(Box::new(real)),
            counts: BTreeMap::new(),
            stats: BTreeMap::new(),
            path: Vec::new(),
            used: Plan::default(),
            triples: Triples::default(),
            halves: HalfTriples::default(),
            leaves: LeafOts::default(),
            mill_leaf: crate::blocks::MILL_LEAF_BITS_TRIPLES,
            depth: 0,
            trace: false,
        })
    }

    /// Test-only context whose "OT" ships messages in the clear (feature `test-dealer`).
    #[cfg(feature = "test-dealer")]
    pub fn insecure_dealer(party: Party) -> Ctx {
        Ctx {
            party,
            prg: Prg::new(),
            backend: Backend::Dealer,
            counts: BTreeMap::new(),
            stats: BTreeMap::new(),
            path: Vec::new(),
            used: Plan::default(),
            triples: Triples::default(),
            halves: HalfTriples::default(),
            leaves: LeafOts::default(),
            mill_leaf: crate::blocks::MILL_LEAF_BITS_TRIPLES,
            depth: 0,
            trace: false,
        }
    }

    /// A context for a dry run of `party`'s side: run a protocol on it with a [`DryChannel`]
    /// (any input of the right length and range) and read [`Ctx::consumed`].
    pub fn dry_run(party: Party) -> Ctx {
        Ctx {
            party,
            prg: Prg::new(),
            backend: Backend::Count,
            counts: BTreeMap::new(),
            stats: BTreeMap::new(),
            path: Vec::new(),
            used: Plan::default(),
            triples: Triples::default(),
            halves: HalfTriples::default(),
            leaves: LeafOts::default(),
            mill_leaf: crate::blocks::MILL_LEAF_BITS_TRIPLES,
            depth: 0,
            trace: false,
        }
    }

    /// Pooled COTs not yet used, per direction (`None` for a backend without pools). After a
    /// preprocess sized by a dry run and the run itself, both are zero.
    pub fn pool_available(&self) -> Option<Plan> {
        match &self.backend {
            Backend::Real(r) => Some(Plan {
                triples: self.triples.available() as u64,
                half_triples: self.halves.available() as u64,
                leaf_ots: self.leaves.available() as u64,
                ..r.available()
            }),
            _ => None,
        }
    }

    /// The millionaires' leaf size m when ANDs run on triples (1 to 4; default
    /// [`crate::blocks::MILL_LEAF_BITS_TRIPLES`]).
    pub fn mill_leaf_bits(&self) -> u32 {
        self.mill_leaf
    }

    /// Sets the millionaires' leaf size m (1 to 4): the trade between offline COTs (about
    /// (1 + 2/m)·b per b-bit comparison), online bytes and rounds (see
    /// [`crate::blocks::MILL_LEAF_BITS_TRIPLES`]). Both parties, and the dry run that sizes the
    /// offline phase ([`crate::plan_for`] uses the default), must use the same m; a mismatch with
    /// the plan is not an error, the missing correlations are then made on demand online.
    pub fn set_mill_leaf_bits(&mut self, m: u32) -> Result<()> {
        if !(1..=4).contains(&m) {
            return Err(invalid("the millionaires' leaf size must be 1 to 4 bits"));
        }
        self.mill_leaf = m;
        Ok(())
    }

    /// Prints each block's wall time to stderr as it ends (P0 only: a profiling aid).
    pub fn set_trace(&mut self, on: bool) {
        self.trace = on && self.party.is_p0();
    }

    /// The OTs consumed since this context was made.
    pub fn consumed(&self) -> Plan {
        self.used
    }

    /// Offline phase: precomputes the correlations `plan` needs, so the online phase carries
    /// only what depends on the inputs. Both parties call it with the same plan. With a backend
    /// that has nothing to precompute it does nothing.
    pub fn preprocess<C: Channel>(&mut self, ch: &mut C, plan: Plan) -> Result<()> {
        match &self.backend {
            Backend::Real(_) => {}
            Backend::Count => return Ok(()),
            #[cfg(feature = "test-dealer")]
            Backend::Dealer => return Ok(()),
        }
        let deficit = |want: u64, have: usize| {
            usize::try_from(want.saturating_sub(have as u64))
                .map_err(|_| invalid("triple count overflows usize"))
        };
        let n = deficit(plan.triples, self.triples.available())?;
        let h = deficit(plan.half_triples, self.halves.available())?;
        let l = deficit(plan.leaf_ots, self.leaves.available())?;
        self.make_offline(ch, n, h, l, Some(plan))
    }

    /// Makes `n` bit triples, `h` half triples and `l` leaf OTs, and with `online` tops the
    /// pools up to the COTs the online phase takes from them.
    ///
    /// Pool by pool, in the order each pool is consumed (the P0 → P1 pool: triples, half
    /// triples, leaves, then the online COTs; the P1 → P0 pool: triples, then the online COTs),
    /// each pool refilling on demand one batch at a time. So the pools only ever hold one batch
    /// plus the online COTs (rather than every offline COT at once: tens of MB of fresh pages
    /// at n = 2^14), and each party still sends on one pool's filler, then the other's: the
    /// same rounds as filling both pools up front. Every pool is consumed in the same order as
    /// before, so each correlation comes from the same pooled COT index.
    fn make_offline<C: Channel>(
        &mut self,
        ch: &mut C,
        n: usize,
        h: usize,
        l: usize,
        online: Option<Plan>,
    ) -> Result<()> {
        self.triples.compact();
        let base = self.triples.t.len();
        self.triples.t.resize(base + n, 0);
        let r = self.make_offline_inner(ch, base, n, h, l, online);
        if r.is_err() {
            // Half-made triples must never be used (the pools refuse further calls after an
            // error, but ANDs on stocked triples would not touch them).
            self.triples.t.truncate(base);
        }
        r
    }

    fn make_offline_inner<C: Channel>(
        &mut self,
        ch: &mut C,
        base: usize,
        n: usize,
        h: usize,
        l: usize,
        online: Option<Plan>,
    ) -> Result<()> {
        self.triple_pass(ch, true, base, n)?;
        self.make_halves(ch, h)?;
        self.make_leaves(ch, l)?;
        if let Some(p) = online {
            self.real()?.top_up(ch, true, p.cots_from_p0)?;
        }
        self.triple_pass(ch, false, base, n)?;
        if let Some(p) = online {
            self.real()?.top_up(ch, false, p.cots_from_p1)?;
        }
        // c = a·b ⊕ u ⊕ v: the passes XORed in u, v (bits 3..5), b (bits 1..3) and a (bit 0).
        for t in &mut self.triples.t[base..base + n] {
            *t ^= (((*t >> 1) & 3) * (*t & 1)) << 3;
        }
        Ok(())
    }

    fn real(&mut self) -> Result<&mut crate::ot_real::RealOt> {
        match &mut self.backend {
            Backend::Real(r) => Ok(r),
            _ => Err(invalid("offline correlations need the real OT backend")),
        }
    }

    /// Makes `count` random 1-of-2^m leaf OTs (m = [`Ctx::mill_leaf_bits`]) from the
    /// P0 → P1 pool, with no message (see [`LeafOts`]).
    fn make_leaves<C: Channel>(&mut self, ch: &mut C, count: usize) -> Result<()> {
        if count == 0 {
            return Ok(());
        }
        let m = self.mill_leaf;
        if !(2..=4).contains(&m) {
            return Err(invalid("leaf OTs need 2 ≤ m ≤ 4"));
        }
        let nd = 1usize << m;
        let p0 = self.is_p0();
        let r = match &mut self.backend {
            Backend::Real(r) => r,
            _ => return Err(invalid("leaf OTs need the real OT backend")),
        };
        self.leaves.compact();
        self.leaves.t.reserve(count);
        let mut done = 0;
        // Batches of TRIPLE_BATCH keys (the sender's keys are 2^m blocks per OT), so the
        // hashed keys held at once stay at 1 MiB.
        let batch = (TRIPLE_BATCH / nd).max(1);
        while done < count {
            let k = batch.min(count - done);
            if p0 {
                let keys = r.rand_n_send(ch, nd, k)?;
                self.leaves.t.extend(keys.chunks_exact(nd).map(|row| {
                    row.iter()
                        .enumerate()
                        .fold(0u32, |a, (x, key)| a | ((key.0 & 3) as u32) << (2 * x))
                }));
            } else {
                let (c, keys) = r.rand_n_recv(ch, nd, k)?;
                self.leaves.t.extend(
                    c.iter()
                        .zip(&keys)
                        .map(|(c, key)| *c as u32 | ((key.0 & 3) as u32) << 8),
                );
            }
            done += k;
        }
        Ok(())
    }

    /// The millionaires' m-bit leaves on random 1-of-2^m OTs: P0 passes its digits `a`, P1 its
    /// digits `b` (each < 2^m); returns XOR shares of ([a < b], [a = b]) as bits 0 and 1. P1
    /// sends d = b ⊕ r (m bits), P0 answers y_x = msg_x ⊕ K_{x ⊕ d} for every x (2 bits
    /// each), with msg_x = ([a < x] ⊕ s_l, [a = x] ⊕ s_e) and (s_l, s_e) its random shares;
    /// P1 takes y_b ⊕ K_r = msg_b. One round trip, no hashing online.
    pub(crate) fn leaf_cmp<C: Channel>(&mut self, ch: &mut C, digits: &[u8]) -> Result<Vec<u8>> {
        let k = digits.len();
        self.used.leaf_ots += k as u64;
        match &self.backend {
            Backend::Real(_) => {}
            Backend::Count => return Ok(vec![0; k]),
            #[cfg(feature = "test-dealer")]
            Backend::Dealer => return Err(invalid("the dealer has no leaf OTs")),
        }
        let m = self.mill_leaf;
        steps::check_leaf_digits(m, digits)?;
        if self.leaves.available() < k {
            let need = k - self.leaves.available();
            self.make_leaves(ch, need)?;
        }
        let b0 = traffic(ch);
        let p = self.leaves.pos;
        let out = if self.is_p0() {
            let shares: Vec<u64> = (0..steps::leaf_share_words(k))
                .map(|_| self.prg.next_u64())
                .collect();
            let d = ch.recv_bytes(steps::leaf_query_bytes(k, m))?;
            let t = &self.leaves.t[p..p + k];
            let (y, out) = steps::leaf_answer(t, digits, m, &d, &shares)?;
            ch.send_pod(&y)?;
            out
        } else {
            let t = &self.leaves.t[p..p + k];
            ch.send_pod(&steps::leaf_query(t, digits, m)?)?;
            ch.flush()?;
            let y = ch.recv_bytes(steps::leaf_answer_bytes(k, m))?;
            steps::leaf_result(t, digits, m, &y)?
        };
        self.leaves.pos += k;
        self.charge(traffic(ch) - b0, 0, 0);
        Ok(out)
    }

    /// One pool's share of `n` Beaver bit triples (stored at `triples.t[base..]`), from the
    /// pools' random COTs taken as random OTs on the pools' own choice bits
    /// (`take_random_rot_into`: no message at all unless a pool runs dry). Both parties take
    /// the same counts in the same order.
    ///
    /// Triple: with P0 → P1 ROT keys (k0, k1) and P1's random choice r1, P0 sets its two bits
    /// (b0, b2_0) = low2(k0 ⊕ k1) and keeps u0 = low2(k0), P1 gets v1 = low2(k_r1), so
    /// u0 ⊕ v1 = r1·(b0, b2_0); the mirror ROT gives r0·(b1, b2_1). With a_i = r_i,
    /// c_i = a_i·b_i ⊕ u_i ⊕ v_i (and the same for b2) are shares of (a0 ⊕ a1)(b0 ⊕ b1).
    /// The sender's pass XORs in b (bits 1..3) and u (bits 3..5), the receiver's a (bit 0) and
    /// v (bits 3..5); [`Ctx::make_offline`] adds a·b once both passes are done. The keys are
    /// hashed (tccr under their global index), so their low bits are independent of Δ.
    fn triple_pass<C: Channel>(
        &mut self,
        ch: &mut C,
        from_p0: bool,
        base: usize,
        n: usize,
    ) -> Result<()> {
        if n == 0 {
            return Ok(());
        }
        let sends = self.is_p0() == from_p0;
        let r = match &mut self.backend {
            Backend::Real(r) => r,
            _ => return Err(invalid("bit triples need the real OT backend")),
        };
        let low2 = |k: &Block| (k.0 & 3) as u8;
        let cap = TRIPLE_BATCH.min(n);
        let t = &mut self.triples.t[base..base + n];
        if sends {
            let mut keys = vec![[Block::ZERO; 2]; cap];
            for tc in t.chunks_mut(TRIPLE_BATCH) {
                let keys = &mut keys[..tc.len()];
                r.rand_rot_send(ch, keys)?;
                for (t, k) in tc.iter_mut().zip(keys.iter()) {
                    let k0 = low2(&k[0]);
                    *t ^= (k0 ^ low2(&k[1])) << 1 | k0 << 3;
                }
            }
        } else {
            let mut got = vec![Block::ZERO; cap];
            let mut bits = vec![false; cap];
            for tc in t.chunks_mut(TRIPLE_BATCH) {
                let (got, bits) = (&mut got[..tc.len()], &mut bits[..tc.len()]);
                r.rand_rot_recv(ch, bits, got)?;
                for ((t, k), a) in tc.iter_mut().zip(got.iter()).zip(bits.iter()) {
                    *t ^= *a as u8 | low2(k) << 3;
                }
            }
        }
        Ok(())
    }

    /// Makes `h` half triples from the P0 → P1 pool: u = lsb(k0 ⊕ k1) at P0, v = r1 at P1,
    /// shares lsb(k0) and lsb(k_r1) of u·v (see [`Ctx::triple_pass`]).
    fn make_halves<C: Channel>(&mut self, ch: &mut C, h: usize) -> Result<()> {
        if h == 0 {
            return Ok(());
        }
        let p0 = self.is_p0();
        let r = match &mut self.backend {
            Backend::Real(r) => r,
            _ => return Err(invalid("bit triples need the real OT backend")),
        };
        self.halves.compact();
        self.halves.t.reserve(h);
        let cap = TRIPLE_BATCH.min(h);
        let mut done = 0;
        if p0 {
            let mut sent = vec![[Block::ZERO; 2]; cap];
            while done < h {
                let m = TRIPLE_BATCH.min(h - done);
                r.rand_rot_send(ch, &mut sent[..m])?;
                self.halves.t.extend(sent[..m].iter().map(|k| {
                    let (k0, k1) = ((k[0].0 & 1) as u8, (k[1].0 & 1) as u8);
                    (k0 ^ k1) | k0 << 1
                }));
                done += m;
            }
        } else {
            let mut got = vec![Block::ZERO; cap];
            let mut bits = vec![false; cap];
            while done < h {
                let m = TRIPLE_BATCH.min(h - done);
                r.rand_rot_recv(ch, &mut bits[..m], &mut got[..m])?;
                self.halves.t.extend(
                    bits[..m]
                        .iter()
                        .zip(&got[..m])
                        .map(|(v, k)| *v as u8 | ((k.0 & 1) as u8) << 1),
                );
                done += m;
            }
        }
        Ok(())
    }

    /// Whether ANDs run on bit triples (real and dry-run backends; the dealer uses COTs).
    pub(crate) fn has_triples(&self) -> bool {
        match self.backend {
            Backend::Real(_) | Backend::Count => true,
            #[cfg(feature = "test-dealer")]
            Backend::Dealer => false,
        }
    }

    /// Opens bits: each party sends its `mine` (bytes 0/1, packed) and gets the peer's, P0
    /// sending first (one round trip on any channel). Padding bits past the end must be zero.
    fn open_bits<C: Channel>(&mut self, ch: &mut C, mine: &[u8]) -> Result<Vec<u8>> {
        let packed = steps::pack_opening(mine);
        let theirs = if self.is_p0() {
            ch.send_pod(&packed)?;
            ch.recv_bytes(packed.len())?
        } else {
            let t = ch.recv_bytes(packed.len())?;
            ch.send_pod(&packed)?;
            ch.flush()?;
            t
        };
        steps::unpack_opening(&theirs, mine.len())
    }

    /// Makes the triples (or half triples) an online call lacks, on demand (both parties
    /// know the counts); the traffic then shows in the current phase.
    fn ensure_triples<C: Channel>(&mut self, ch: &mut C, n: usize, h: usize) -> Result<()> {
        let n = n.saturating_sub(self.triples.available());
        let h = h.saturating_sub(self.halves.available());
        if n == 0 && h == 0 {
            return Ok(());
        }
        self.make_offline(ch, n, h, 0, None)
    }

    /// AND of XOR-shared bits with Beaver triples: each party opens x ⊕ a and y ⊕ b (P0 sends
    /// first, so one round trip on any channel) and computes c ⊕ d·b ⊕ e·a (⊕ d·e at P0). No
    /// hashing online and one round trip instead of two correlated-OT batches. Triples missing
    /// from the offline phase are made on demand (both parties know the count).
    pub(crate) fn and_bits<C: Channel>(
        &mut self,
        ch: &mut C,
        x: &[u8],
        y: &[u8],
    ) -> Result<Vec<u8>> {
        let n = x.len();
        if y.len() != n {
            return Err(invalid("AND needs equal lengths"));
        }
        self.used.triples += n as u64;
        match &self.backend {
            Backend::Real(_) => {}
            Backend::Count => return Ok(vec![0; n]),
            #[cfg(feature = "test-dealer")]
            Backend::Dealer => return Err(invalid("the dealer has no triples")),
        }
        self.ensure_triples(ch, n, 0)?;
        let b0 = traffic(ch);
        let p = self.triples.pos;
        let mine = steps::and_open(x, y, &self.triples.t[p..p + n])?;
        let theirs = self.open_bits(ch, &mine)?;
        let out = steps::and_close(&mine, &theirs, &self.triples.t[p..p + n], self.is_p0())?;
        self.triples.pos += n;
        self.charge(traffic(ch) - b0, 0, 0);
        Ok(out)
    }

    /// Two ANDs sharing an operand, (x ∧ y, x ∧ z), on one triple each (its two b's): each
    /// party opens x ⊕ a, y ⊕ b, z ⊕ b2 (3 bits instead of 4), one round trip.
    pub(crate) fn and2_bits<C: Channel>(
        &mut self,
        ch: &mut C,
        x: &[u8],
        y: &[u8],
        z: &[u8],
    ) -> Result<(Vec<u8>, Vec<u8>)> {
        let n = x.len();
        if y.len() != n || z.len() != n {
            return Err(invalid("AND needs equal lengths"));
        }
        self.used.triples += n as u64;
        match &self.backend {
            Backend::Real(_) => {}
            Backend::Count => return Ok((vec![0; n], vec![0; n])),
            #[cfg(feature = "test-dealer")]
            Backend::Dealer => return Err(invalid("the dealer has no triples")),
        }
        self.ensure_triples(ch, n, 0)?;
        let b0 = traffic(ch);
        let p = self.triples.pos;
        let mine = steps::and2_open(x, y, z, &self.triples.t[p..p + n])?;
        let theirs = self.open_bits(ch, &mine)?;
        let (oy, oz) = steps::and2_close(&mine, &theirs, &self.triples.t[p..p + n], self.is_p0())?;
        self.triples.pos += n;
        self.charge(traffic(ch) - b0, 0, 0);
        Ok((oy, oz))
    }

    /// AND of private bits: P0 passes its bits p, P1 its bits q; returns XOR shares of p ∧ q.
    /// On half triples: P0 opens d = p ⊕ u, P1 opens e = q ⊕ v (1 bit each, one round trip);
    /// p·q = d·e ⊕ e·u ⊕ d·v ⊕ u·v, P0 taking d·e ⊕ e·u and P1 d·v. u and v are uniform and
    /// unknown to the peer, so each opening is a one-time pad.
    pub(crate) fn and_private<C: Channel>(&mut self, ch: &mut C, mine: &[u8]) -> Result<Vec<u8>> {
        let n = mine.len();
        self.used.half_triples += n as u64;
        match &self.backend {
            Backend::Real(_) => {}
            Backend::Count => return Ok(vec![0; n]),
            #[cfg(feature = "test-dealer")]
            Backend::Dealer => {
                // The dealer has no triples: one 1-bit COT per AND (P0's bit as the δ).
                let deltas: Vec<u64> = mine.iter().map(|b| (*b & 1) as u64).collect();
                let choices: Vec<bool> = mine.iter().map(|b| *b & 1 == 1).collect();
                let s = self.cross_from_p0(ch, &deltas, &choices, 1)?;
                return Ok(s.into_iter().map(|v| v as u8 & 1).collect());
            }
        }
        self.ensure_triples(ch, 0, n)?;
        let b0 = traffic(ch);
        let p = self.halves.pos;
        let open = steps::and_private_open(mine, &self.halves.t[p..p + n])?;
        let theirs = self.open_bits(ch, &open)?;
        let out = steps::and_private_close(&open, &theirs, &self.halves.t[p..p + n], self.is_p0())?;
        self.halves.pos += n;
        self.charge(traffic(ch) - b0, 0, 0);
        Ok(out)
    }

    pub fn is_p0(&self) -> bool {
        self.party.is_p0()
    }

    /// Runs `f` as one invocation of the named building block. Invocations are counted at the
    /// outermost level and one level below it (a math function and the blocks it calls
    /// directly, as in OPAF's Table VI); deeper sub-blocks are not counted.
    pub(crate) fn block<T>(
        &mut self,
        name: &'static str,
        f: impl FnOnce(&mut Ctx) -> Result<T>,
    ) -> Result<T> {
        let counted = self.depth <= 1;
        if counted {
            *self.counts.entry(name).or_insert(0) += 1;
        }
        // Time is charged at level 1 only (level 0 is the sum of its children plus local work,
        // which `charge` books under the outermost name).
        let timed = self.depth == 1;
        self.path.push(name);
        self.depth += 1;
        let t0 = if self.trace || timed {
            Some(Instant::now())
        } else {
            None
        };
        let r = f(self);
        self.depth -= 1;
        self.path.pop();
        if timed {
            if let Some(t0) = t0 {
                let st = self.stats.entry(name).or_default();
                st.calls += 1;
                st.time_s += t0.elapsed().as_secs_f64();
            }
        }
        if !self.trace {
            return r;
        }
        if let Some(t0) = t0 {
            eprintln!(
                "{:indent$}{name}: {:.1} ms",
                "",
                t0.elapsed().as_secs_f64() * 1e3,
                indent = 2 * self.depth as usize
            );
        }
        r
    }
    /// Runs `f` as one invocation of the named block for a protocol built outside this crate
    /// (the nn layers' HE products on masks): its time and its traffic on `ch` are booked to
    /// the block as this crate's own blocks book theirs.
    pub fn outside_block<C: Channel, T>(
        &mut self,
        ch: &mut C,
        name: &'static str,
        f: impl FnOnce(&mut C) -> Result<T>,
    ) -> Result<T> {
        self.block(name, |ctx| {
            let b0 = traffic(ch);
            let r = f(ch);
            ctx.charge(traffic(ch) - b0, 0, 0);
            r
        })
    }

    /// Counts of the top-level blocks since the last reset.
    pub fn reset_counts(&mut self) {
        self.counts.clear();
        self.stats.clear();
    }

    /// The key traffic is charged to: the level-1 block, else the outermost, else "other".
    fn charge_key(&self) -> &'static str {
        self.path
            .get(1)
            .or_else(|| self.path.first())
            .copied()
            .unwrap_or("other")
    }

    /// Books `bytes` and OT counts to the running block.
    fn charge(&mut self, bytes: u64, cots: u64, kk: u64) {
        let st = self.stats.entry(self.charge_key()).or_default();
        st.bytes += bytes;
        st.cots += cots;
        st.kk_ots += kk;
    }

    /// Books `n` COTs to the direction whose sender is P0 (`p0_sends`) or P1.
    fn count_cots(&mut self, p0_sends: bool, n: u64) {
        if p0_sends {
            self.used.cots_from_p0 += n;
        } else {
            self.used.cots_from_p1 += n;
        }
    }

    /// Runs one raw OT call and charges its traffic, `cots` COTs and `kk` 1-of-n OTs to the
    /// running block.
    fn metered<C: Channel, R>(
        &mut self,
        ch: &mut C,
        cots: u64,
        kk: u64,
        call: impl FnOnce(&mut Self, &mut C) -> Result<R>,
    ) -> Result<R> {
        let b0 = traffic(ch);
        let r = call(self, ch);
        self.charge(traffic(ch) - b0, cots, kk);
        r
    }

    pub(crate) fn rand_u64s(&mut self, n: usize, bits: u32) -> Vec<u64> {
        let m = mask(bits);
        (0..n).map(|_| self.prg.next_u64() & m).collect()
    }
    pub(crate) fn rand_bits(&mut self, n: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(n);
        while out.len() < n {
            let w = self.prg.next_u64();
            for i in 0..64 {
                if out.len() == n {
                    break;
                }
                out.push(((w >> i) & 1) as u8);
            }
        }
        out
    }

    // ------------------------------------------------------------------ raw OT calls

    /// Additively correlated OT, sender side: returns x_j; the receiver gets x_j + c_j·δ_j.
    pub(crate) fn cot_send<C: Channel>(
        &mut self,
        ch: &mut C,
        deltas: &[u64],
        bits: u32,
    ) -> Result<Vec<u64>> {
        let n = deltas.len() as u64;
        self.count_cots(self.is_p0(), n);
        self.metered(ch, n, 0, |s, ch| s.cot_send_inner(ch, deltas, bits))
    }
    fn cot_send_inner<C: Channel>(
        &mut self,
        ch: &mut C,
        deltas: &[u64],
        bits: u32,
    ) -> Result<Vec<u64>> {
        match &mut self.backend {
            Backend::Real(r) => r.cot_send(ch, deltas, bits),
            Backend::Count => Ok(vec![0; deltas.len()]),
            #[cfg(feature = "test-dealer")]
            Backend::Dealer => {
                let m = mask(bits);
                let x: Vec<u64> = (0..deltas.len()).map(|_| self.prg.next_u64() & m).collect();
                let mut msg = Vec::with_capacity(2 * deltas.len());
                for (a, d) in x.iter().zip(deltas) {
                    msg.push(*a);
                    msg.push(a.wrapping_add(*d) & m);
                }
                dealer_send(ch, &msg)?;
                Ok(x)
            }
        }
    }
    pub(crate) fn cot_recv<C: Channel>(
        &mut self,
        ch: &mut C,
        choices: &[bool],
        bits: u32,
    ) -> Result<Vec<u64>> {
        let n = choices.len() as u64;
        self.count_cots(!self.is_p0(), n);
        self.metered(ch, n, 0, |s, ch| s.cot_recv_inner(ch, choices, bits))
    }
    fn cot_recv_inner<C: Channel>(
        &mut self,
        ch: &mut C,
        choices: &[bool],
        bits: u32,
    ) -> Result<Vec<u64>> {
        match &mut self.backend {
            Backend::Real(r) => r.cot_recv(ch, choices, bits),
            Backend::Count => Ok(vec![0; choices.len()]),
            #[cfg(feature = "test-dealer")]
            Backend::Dealer => dealer_pick(ch, 2, choices, bits),
        }
    }
    /// Chosen-choice random OTs, sender side: both keys of each of `n` OTs (zero keys in a
    /// dry run). The peer calls [`Ctx::rot_recv`] with its choices.
    pub(crate) fn rot_send<C: Channel>(&mut self, ch: &mut C, n: usize) -> Result<Vec<[Block; 2]>> {
        self.count_cots(self.is_p0(), n as u64);
        self.metered(ch, n as u64, 0, |s, ch| {
            let mut out = vec![[Block::ZERO; 2]; n];
            match &mut s.backend {
                Backend::Real(r) => r.rot_send(ch, &mut out)?,
                Backend::Count => {}
                #[cfg(feature = "test-dealer")]
                Backend::Dealer => return Err(invalid("vector OTs need the real OT backend")),
            }
            Ok(out)
        })
    }
    /// Receiver side of [`Ctx::rot_send`]: the key of each choice.
    pub(crate) fn rot_recv<C: Channel>(
        &mut self,
        ch: &mut C,
        choices: &[bool],
    ) -> Result<Vec<Block>> {
        let n = choices.len();
        self.count_cots(!self.is_p0(), n as u64);
        self.metered(ch, n as u64, 0, |s, ch| {
            let mut out = vec![Block::ZERO; n];
            match &mut s.backend {
                Backend::Real(r) => r.rot_recv(ch, choices, &mut out)?,
                Backend::Count => {}
                #[cfg(feature = "test-dealer")]
                Backend::Dealer => return Err(invalid("vector OTs need the real OT backend")),
            }
            Ok(out)
        })
    }
    /// Runs `f`, which sends or receives a protocol's own messages (not OT traffic), and books
    /// its traffic to the running block.
    pub(crate) fn metered_io<C: Channel, R>(
        &mut self,
        ch: &mut C,
        f: impl FnOnce(&mut C) -> Result<R>,
    ) -> Result<R> {
        self.metered(ch, 0, 0, |_, ch| f(ch))
    }
    /// 1-of-n OT (KK13) on `bits`-bit messages, sender side; `msgs` is count × n row-major.
    pub(crate) fn kk_send<C: Channel>(
        &mut self,
        ch: &mut C,
        n: usize,
        msgs: &[u64],
        bits: u32,
    ) -> Result<()> {
        if !(2..=256).contains(&n) || msgs.len() / n * n != msgs.len() {
            return Err(invalid("1-of-n OT needs 2 ≤ n ≤ 256 and count·n messages"));
        }
        let count = (msgs.len() / n) as u64;
        self.count_cots(true, count * log2_ceil(n));
        self.metered(ch, 0, count, |s, ch| s.kk_send_inner(ch, n, msgs, bits))
    }
    /// [`Ctx::kk_send`] on `count` rows made frame by frame by `msgs_of(row0, out)` (rows
    /// `row0..row0 + out.len() / n`, row-major): the same OTs and bytes, without the whole
    /// `count × n` table in memory (the dealer backend, test-only, still makes it whole).
    pub(crate) fn kk_send_with<C: Channel>(
        &mut self,
        ch: &mut C,
        n: usize,
        count: usize,
        bits: u32,
        msgs_of: impl FnMut(usize, &mut [u64]),
    ) -> Result<()> {
        if !(2..=256).contains(&n) {
            return Err(invalid("1-of-n OT needs 2 ≤ n ≤ 256"));
        }
        self.count_cots(true, count as u64 * log2_ceil(n));
        self.metered(ch, 0, count as u64, |s, ch| match &mut s.backend {
            Backend::Real(r) => r.kk_send_with(ch, n, count, bits, msgs_of),
            Backend::Count => Ok(()),
            #[cfg(feature = "test-dealer")]
            Backend::Dealer => {
                let mut msgs_of = msgs_of;
                let mut msgs = vec![0u64; count * n];
                msgs_of(0, &mut msgs);
                dealer_send(ch, &msgs)?;
                Ok(())
            }
        })
    }
    /// What [`Ctx::kk_send`] of `count` 1-of-`n` OTs books, without the messages: for dry runs
    /// ([`Ctx::is_dry_run`]), whose OT calls read nothing.
    pub(crate) fn kk_send_count(&mut self, n: usize, count: usize) -> Result<()> {
        if !(2..=256).contains(&n) {
            return Err(invalid("1-of-n OT needs 2 ≤ n ≤ 256"));
        }
        if !self.is_dry_run() {
            return Err(invalid("kk_send_count is for dry runs only"));
        }
        self.count_cots(true, count as u64 * log2_ceil(n));
        self.charge(0, 0, count as u64);
        Ok(())
    }

    /// Whether this context only counts (a dry run: [`Ctx::dry_run`]); protocols may then skip
    /// local work whose results nobody reads, as long as they book the same OTs. Protocols that
    /// take no OTs (the HE products of the nn layers) skip their messages too: a dry run's
    /// channel carries nothing.
    pub fn is_dry_run(&self) -> bool {
        matches!(self.backend, Backend::Count)
    }

    fn kk_send_inner<C: Channel>(
        &mut self,
        ch: &mut C,
        n: usize,
        msgs: &[u64],
        bits: u32,
    ) -> Result<()> {
        match &mut self.backend {
            Backend::Real(r) => r.kk_send(ch, n, msgs, bits),
            Backend::Count => Ok(()),
            #[cfg(feature = "test-dealer")]
            Backend::Dealer => {
                let _ = bits;
                dealer_send(ch, msgs)?;
                Ok(())
            }
        }
    }
    pub(crate) fn kk_recv<C: Channel>(
        &mut self,
        ch: &mut C,
        n: usize,
        choices: &[u8],
        bits: u32,
    ) -> Result<Vec<u64>> {
        if !(2..=256).contains(&n) || choices.iter().any(|c| *c as usize >= n) {
            return Err(invalid("1-of-n OT choice out of range"));
        }
        let count = choices.len() as u64;
        self.count_cots(true, count * log2_ceil(n));
        self.metered(ch, 0, count, |s, ch| s.kk_recv_inner(ch, n, choices, bits))
    }
    fn kk_recv_inner<C: Channel>(
        &mut self,
        ch: &mut C,
        n: usize,
        choices: &[u8],
        bits: u32,
    ) -> Result<Vec<u64>> {
        match &mut self.backend {
            Backend::Real(r) => r.kk_recv(ch, n, choices, bits),
            Backend::Count => Ok(vec![0; choices.len()]),
            #[cfg(feature = "test-dealer")]
            Backend::Dealer => dealer_pick(ch, n, choices, bits),
        }
    }

    // ------------------------------------------------------------------ derived correlations

    /// Additive shares (mod 2^bits) of δ·c, where P0 holds the δ's and P1 the bits c.
    /// Each party passes its own argument; the other is ignored.
    pub(crate) fn cross_from_p0<C: Channel>(
        &mut self,
        ch: &mut C,
        deltas: &[u64],
        choices: &[bool],
        bits: u32,
    ) -> Result<Vec<u64>> {
        self.cross_from(true, ch, deltas, choices, bits)
    }
    /// Mirror of [`Ctx::cross_from_p0`]: P1 holds the δ's, P0 the bits.
    pub(crate) fn cross_from_p1<C: Channel>(
        &mut self,
        ch: &mut C,
        deltas: &[u64],
        choices: &[bool],
        bits: u32,
    ) -> Result<Vec<u64>> {
        self.cross_from(false, ch, deltas, choices, bits)
    }
    /// Shares of δ·c with the δ's at P0 (`p0_sends`) or P1: the δ holder sends one COT per δ
    /// and keeps −x, the other receives x + c·δ.
    fn cross_from<C: Channel>(
        &mut self,
        p0_sends: bool,
        ch: &mut C,
        deltas: &[u64],
        choices: &[bool],
        bits: u32,
    ) -> Result<Vec<u64>> {
        let m = mask(bits);
        if self.is_p0() == p0_sends {
            let x = self.cot_send(ch, deltas, bits)?;
            Ok(x.into_iter().map(|v| v.wrapping_neg() & m).collect())
        } else {
            self.cot_recv(ch, choices, bits)
        }
    }
    /// One correlated-OT batch each way, P0 sending first: this party's δ's as sender and its
    /// bits as chooser. Returns (what it received as chooser, its outputs x as sender).
    pub(crate) fn cots_both<C: Channel>(
        &mut self,
        ch: &mut C,
        deltas: &[u64],
        choices: &[bool],
        bits: u32,
    ) -> Result<(Vec<u64>, Vec<u64>)> {
        if deltas.len() != choices.len() {
            return Err(invalid("cross terms need as many deltas as choices"));
        }
        if self.is_p0() {
            let pad = self.cot_send(ch, deltas, bits)?;
            Ok((self.cot_recv(ch, choices, bits)?, pad))
        } else {
            let got = self.cot_recv(ch, choices, bits)?;
            Ok((got, self.cot_send(ch, deltas, bits)?))
        }
    }
}
