//! The garbled circuits of the secure GRU: one per step (all H elements batched, one copy per
//! element) and one for the final dense layer (argmax or logits). Both follow the reference's
//! fixed-point rules (docs/model-format.md, rule 6) operation for operation, so the secure run
//! reproduces [`Reference`](crate::Reference) with [`CircuitActivations`] bit for bit.
//!
//! Share widths: an accumulator Σ W x (+ b·2^F) is shared mod 2^32 by the HE matvec, but
//! `lin()` only reads bits F..F+L−1 of it, which depend only on Σ mod 2^(F+L): the circuit
//! takes the low A = F + L bits of each share, adds them (A−1 ANDs), and drops the low F bits
//! (free) and the wrap to L bits is free too. The hidden state is shared mod 2^32 (the HE needs
//! it sign-extended), but the circuit only needs h mod 2^L: it takes L bits of each share.
use crate::model::{ActFormat, FixedPointConfig};
use crate::reference::SmoothActivations;
use secinfer_gc::activation::{self, eval_plain, ActSpec, Func};
use secinfer_gc::backend::{xor, Bit, Word};
use secinfer_gc::gadgets::cache::{truth_table, ActEntry};
use secinfer_gc::gadgets::fixed::{
    add_truncate, carry_from_leaves, rescale_saturate, rescale_up, smooth_activation,
};
use secinfer_gc::gadgets::topk::top_k_indices;
use secinfer_gc::gadgets::{add, add_cin, add_full, relu, saturate, sext};
use secinfer_gc::{Builder, Circuit};

/// Width of the shares the HE layer produces and the step circuit outputs.
pub const SHARE_BITS: usize = 32;

type W = Word<u32>;

/// The activation circuits a model's layouts, step circuits and reference are built from, each
/// with the range of its outputs, and its log-probability circuit: gc's per-model cache, owned
/// by the model that uses it ([`ServerModel`](super::ServerModel),
/// [`ClientModel`](super::ClientModel), [`CircuitActivations`]).
pub use secinfer_gc::gadgets::cache::CircuitCache;

/// `cache`'s circuit for `func` in the activation formats `af`, with its output range.
fn act(cache: &CircuitCache, func: Func, af: ActFormat) -> ActEntry {
    cache.activation(func, af.input, af.output)
}

/// A model's step layout builds its activation circuits when the model is prepared, not inside
/// its first session (2^20 evaluations each for a 20-bit format).
pub fn cache_for_model(fp: &FixedPointConfig, tanh_candidate: bool) -> CircuitCache {
    let cache = CircuitCache::default();
    StepLayout::for_step(fp, tanh_candidate, &cache);
    cache
}

/// The activations the garbled circuits compute: the gc crate's fitted sigmoid/tanh circuits
/// (≤ 1 ULP from the exactly rounded value). The secure run equals
/// `Reference::new(model, CircuitActivations::default())` bit for bit.
#[derive(Default)]
pub struct CircuitActivations {
    cache: CircuitCache,
}

impl CircuitActivations {
    fn eval(&self, func: Func, x: i64, f: ActFormat) -> i64 {
        let c = act(&self.cache, func, f).0;
        eval_plain(&c, &ActSpec::simple(func, f.input, f.output), x)
    }
}

impl SmoothActivations for CircuitActivations {
    fn sigmoid(&self, x: i64, f: ActFormat) -> i64 {
        self.eval(Func::Sigmoid, x, f)
    }
    fn tanh(&self, x: i64, f: ActFormat) -> i64 {
        self.eval(Func::Tanh, x, f)
    }
}

/// Public shape of a step: three garbled circuits per element (A, B, C) with the two gate
/// products between them done by oblivious-transfer multiplexers (cryptogru::products_by_mux).
///
/// The reference's products are `wrap((g ⊙ v) ≫ F)` with g a gate activation (fo fraction bits,
/// shifted to F) and v a main-format word, i.e. bits fo .. fo + L − 1 of g·v. Those depend only
/// on g·v mod 2^PW, PW = fo + L, which is linear in each bit of g:
/// g·v = Σ_j 2^j g_j v (the top bit weighs −2^(gb−1) when g can be negative). So a circuit
/// reveals the bits of g XOR-masked (server: g ⊕ λ, client: λ) and v additively masked mod
/// 2^PW (server: v + β, client: −β); one multiplexer per bit of g (two correlated OTs carrying
/// a PW-bit word, `secinfer_ss::blocks::mux`) gives additive shares of g·v mod 2^PW exactly,
/// and the next circuit adds the shares and reads bits fo.. (the truncation is exact because it
/// happens inside the circuit, on the reconstructed value). Per element:
///
/// * A: [gate r parts, gate z parts, gh_n (A)] → r, z (gb bits each), the bits κ, o, s of
///   trunc(gh_n) (see `step_circuits`);
/// * P = r · trunc(gh_n) mod 2^PW from a decomposition into OTs (each party's share of gh_n ≫ F
///   and the three bits);
/// * B: [parts of gi_n + P ≫ fo] → y (the candidate's output word, bo bits);
/// * Q = z · (h − n) mod 2^PW from OTs on the bits of z and y and the shares of h (h − n is
///   exact: [`StepLayout::for_step`]);
/// * C: [Q (PW), y (bo, XOR-shared)] → h' (hw bits), then B2A into Z_{2^32}.
///
/// Gate parts, each party: `[hi (L), lo_h (F)]`: for the gates r and z the reference adds two
/// separately truncated accumulators, wrap((gi ≫ F) + (gh ≫ F)); with shares gi = s_i + c_i,
/// gh = s_h + c_h (mod 2^A) that is (s_i≫F) + (s_h≫F) + (c_i≫F) + (c_h≫F) + carry(s_i, c_i) +
/// carry(s_h, c_h) mod 2^L, where carry is the carry out of the low F bits. gi's carry is known
/// before the steps start (the input projections are), so the session turns it into additive
/// shares mod 2^L by OTs (cryptogru::carry_shares); each party adds its two high parts and its
/// share of gi's carry locally (`hi`), and the circuit adds only gh's carry, from the low F bits
/// of each share: one adder with a carry-in, no second carry.
///
/// No output is decoded: each output bit is XOR-shared for free as (server: the permute bit
/// lsb(W0) it garbled, client: lsb of the label it computed), so no masks enter the circuits
/// and no mask adders are garbled. The word that feeds the HE (h') is converted to additive
/// shares by one correlated OT per bit (B2A: w·(a ⊕ b) = w·a + b·w·(1 − 2a)); the products use
/// the XOR-shared bits directly. The client's inputs P, Q, y are online values; its circuit
/// inputs are fresh uniform π_P, π_Q, μ instead, and online it sends P_c − π_P, Q_c − π_Q,
/// y_c ⊕ μ, which the server folds into its own inputs. So every client input of every circuit is known offline
/// (Delphi-style preprocessing) and its labels come from offline COTs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StepLayout {
    /// Accumulator share bits A = F + L.
    pub acc: usize,
    /// Main format bits L.
    pub l: usize,
    /// Fraction bits F.
    pub f: usize,
    /// Product ring bits PW = fo + L.
    pub pw: usize,
    /// Bits of a gate value that enter the multiplexers.
    pub gb: usize,
    /// Whether the top one of them is a sign bit (weight −2^(gb−1)).
    pub g_signed: bool,
    /// Bits of the candidate activation's output word.
    pub bo: usize,
    /// Bits of the hidden state, of h − n and of h' inside the circuits and B2As
    /// ([`StepLayout::for_step`]; L where no narrowing is proven).
    pub hw: usize,
    /// The sigmoid's input bits when r and z come from lookup tables (cryptogru::gate_luts: an
    /// input of at most [`LUT_MAX_BITS`] bits, CG-2's 8): circuit A then outputs the saturated
    /// inputs, not the gate values. `None`: the sigmoids run inside A.
    pub lut: Option<usize>,
    /// Whether the range proof of [`StepLayout::for_step`] holds: h, h − n and h' never wrap, so
    /// h − n is the difference of the parties' shares and n mod 2^PW, which is what lets
    /// Q = z·(h − n) be taken from shares both parties hold before circuit B
    /// (docs/gru-protocol.md, "Online flights"). The secure session needs it.
    pub state_exact: bool,
}

impl StepLayout {
    pub fn new(fp: &FixedPointConfig, cache: &CircuitCache) -> Self {
        let sf = fp.sigmoid_format();
        let (_, sig_min, sig_max) = act(cache, Func::Sigmoid, sf);
        // Bits the gate value can occupy: all of them, or (never negative) only up to its maximum.
        let (gb, g_signed) = if sig_min >= 0 {
            let k = 64 - (sig_max.max(1) as u64).leading_zeros() as usize;
            (k.min(sf.output.bits as usize), false)
        } else {
            (sf.output.bits as usize, true)
        };
        StepLayout {
            acc: (fp.main.bits + fp.main.scale) as usize,
            l: fp.main.bits as usize,
            f: fp.main.scale as usize,
            pw: (sf.output.scale + fp.main.bits) as usize,
            gb,
            g_signed,
            bo: fp.candidate_format().output.bits as usize,
            hw: fp.main.bits as usize,
            lut: (sf.input.bits as usize <= LUT_MAX_BITS && gb <= LUT_MAX_OUT)
                .then_some(sf.input.bits as usize),
            state_exact: false,
        }
    }

    /// The layout of the step circuits: as [`StepLayout::new`], with the hidden state's width
    /// narrowed where the reference provably never wraps it (cryptogru::state_range). If every
    /// candidate n lies in [n_lo, n_hi] and every gate z in [0, 1] (0 ≤ z ≤ 2^fo as an integer),
    /// then h' = n + ⌊z·(h − n) / 2^fo⌋ lies between n and h, so by induction from h(0) = 0 every
    /// h lies in [lo, hi] = [min(0, n_lo), max(0, n_hi)] and h − n in [lo − hi, hi − lo]: none of
    /// the reference's wraps of h, h − n, the product term or h' can trigger, and all of them
    /// are exact in hw = bitlen(hi − lo) + 1 bits (16 instead of 20 for CG-2: n ∈ [0, 127·2^8]).
    /// The ranges are the activation circuits' exhaustively computed outputs; when a condition
    /// fails, hw = L (no narrowing) and `state_exact` is false.
    pub fn for_step(fp: &FixedPointConfig, tanh_candidate: bool, cache: &CircuitCache) -> Self {
        let mut lay = Self::new(fp, cache);
        let sf = fp.sigmoid_format();
        let cf = fp.candidate_format();
        let (_, z_min, z_max) = act(cache, Func::Sigmoid, sf);
        let (y_min, y_max) = if tanh_candidate {
            let (_, lo, hi) = act(cache, Func::Tanh, cf);
            (lo, hi)
        } else {
            // relu then saturate to bo bits: [0, 2^(bo−1) − 1]
            (0, (1i64 << (cf.output.bits - 1)) - 1)
        };
        let shift = fp.main.scale.saturating_sub(cf.output.scale);
        let lo = (y_min << shift).min(0);
        let hi = (y_max << shift).max(0);
        let span = (hi - lo) as u64;
        let hw = 65 - span.leading_zeros() as usize;
        if z_min >= 0
            && z_max <= 1i64 << sf.output.scale
            && fp.main.scale >= cf.output.scale
            && hw <= lay.l
        {
            lay.hw = hw;
            lay.state_exact = true;
        }
        lay
    }
    /// Bits of each of r and z that circuit A outputs: the saturated sigmoid input for lookup
    /// tables, else the gate value's gb bits.
    pub fn a_gate_bits(&self) -> usize {
        self.lut.unwrap_or(self.gb)
    }
    /// Whether the hidden projections' carries out of their low F bits come from per-step
    /// carry leaves (cryptogru::carry_leaves on gh; three leaf bits per party into A instead of
    /// F bits, two flights per step). They go with the gate tables: the byte-lean step.
    pub fn gh_leaves(&self) -> bool {
        self.lut.is_some()
    }
    fn gh_low_parts(&self) -> usize {
        if self.gh_leaves() {
            LEAF_BITS
        } else {
            self.f
        }
    }
    fn gate_parts(&self) -> usize {
        self.l + self.gh_low_parts()
    }
    /// Digit widths (high, low) of the input projections' carry leaves
    /// (cryptogru::carry_leaves): F = m_hi + m_lo, m_lo = ⌊F/2⌋.
    pub fn leaf_digits(&self) -> (usize, usize) {
        (self.f - self.f / 2, self.f / 2)
    }
    /// Server inputs per element of circuit A: its gate parts for r and z, its gh_n share.
    pub fn a_garbler(&self) -> usize {
        3 * self.gate_parts()
    }
    /// Client inputs of A: the same.
    pub fn a_evaluator(&self) -> usize {
        self.a_garbler()
    }
    /// Server inputs of B: the candidate sum's parts [hi (L), lo of P (fo)] (see
    /// [`StepLayout::encode_b`]).
    pub fn b_garbler(&self) -> usize {
        self.pw
    }
    /// Client inputs of B: the same.
    pub fn b_evaluator(&self) -> usize {
        self.b_garbler()
    }
    /// Server inputs of C: Q (its ring's bits, [`StepLayout::q_ring`]), its XOR share of y (bo).
    pub fn c_garbler(&self) -> usize {
        self.q_ring().pw + self.bo
    }
    /// The layout Q = z·(h − n) is computed in: the ring 2^(fo + hw) instead of 2^PW. Circuit C
    /// reads bits fo .. fo + hw − 1 of Q (h' has hw bits), which depend only on Q mod 2^(fo + hw),
    /// so Q's OT words, masks and circuit inputs are 4 bits narrower for CG-2 (27 → 23).
    pub fn q_ring(&self) -> StepLayout {
        StepLayout {
            pw: (self.pw - self.l + self.hw).min(self.pw),
            ..*self
        }
    }
    /// Client inputs of C: the same.
    pub fn c_evaluator(&self) -> usize {
        self.c_garbler()
    }
    /// Client input bits per element and step, all circuits.
    pub fn evaluator_inputs(&self) -> usize {
        self.a_evaluator() + self.b_evaluator() + self.c_evaluator()
    }
    /// Appends one party's gate parts for r and z and its gh_n parts (circuit A's shared part):
    /// per gate its high part (gi ≫ F) + (gh ≫ F) + its additive share (mod 2^L) of gi's carry,
    /// then gh_n ≫ F (L bits); after each, the low F bits of its gh share, or with
    /// [`StepLayout::gh_leaves`] its XOR shares of that carry's leaf bits (`leaves`, r z n).
    pub fn encode_a(
        &self,
        gi: [u64; 2],
        carry: [u64; 2],
        gh: [u64; 3],
        leaves: Option<&[[bool; LEAF_BITS]; 3]>,
        out: &mut Vec<bool>,
    ) {
        let lo = (1u64 << self.f) - 1;
        for k in 0..3 {
            let hi = if k < 2 {
                (gi[k] >> self.f)
                    .wrapping_add(gh[k] >> self.f)
                    .wrapping_add(carry[k])
            } else {
                gh[k] >> self.f
            };
            put(out, hi, self.l);
            match leaves {
                Some(lv) => out.extend_from_slice(&lv[k]),
                None => put(out, gh[k] & lo, self.f),
            }
        }
    }
    /// Appends one party's circuit-B input from its shares of P (mod 2^PW) and gi_n (mod 2^A)
    /// and its additive share (mod 2^L) of gi_n's carry. The candidate's input
    /// wrap(gi_n ≫ F + P ≫ fo) is two truncated sums like a gate's, so the party pre-adds its
    /// high parts and its carry share, and the circuit adds only P's carry.
    pub fn encode_b(&self, p: u64, gi_n: u64, carry: u64, out: &mut Vec<bool>) {
        let fo = self.pw - self.l;
        let hi = (gi_n >> self.f).wrapping_add(p >> fo).wrapping_add(carry);
        put(out, hi, self.l);
        put(out, p, fo);
    }

    /// The weights ν_k of the candidate output's bits in n = sext(y)·2^(F − fo_c) mod 2^PW, as
    /// circuit C reads n (`to_main`): 2^(k + shift), the top bit −2^(bo − 1 + shift).
    pub fn candidate_weights(&self, fp: &FixedPointConfig) -> Vec<u64> {
        let shift = fp.main.scale - fp.candidate_format().output.scale;
        // PW = fo + L ≤ 32: the shares' ring.
        let pm = (1u64 << self.pw) - 1;
        (0..self.bo)
            .map(|k| {
                let w = 1u64.wrapping_shl((k as u32) + shift);
                if k + 1 == self.bo {
                    w.wrapping_neg() & pm
                } else {
                    w & pm
                }
            })
            .collect()
    }
}

/// Bits of trunc(gh_n) that circuit A outputs: κ, o, s (see `step_circuits`).
pub const GHN_BITS: usize = 3;

/// Leaf bits per carry and party (cryptogru::carry_leaves): XOR shares of [s'_hi < c_hi],
/// [s'_hi = c_hi] and [s'_lo < c_lo], where s' = 2^F − 1 − (the server's low F bits), c the
/// client's, split into a high and a low digit. The carry out of the low F bits,
/// [s + c ≥ 2^F] = [s' < c], is lt_hi ⊕ (eq_hi ∧ lt_lo). The input projections' carries are
/// then made additive shares before step 1 (cryptogru::carry_shares); the hidden projections'
/// enter circuit A as these three bits ([`StepLayout::gh_leaves`]).
pub use secinfer_gc::gadgets::fixed::LEAF_BITS;

/// The carry out of gh's low F bits from each party's part after the high L bits: its low F
/// bits (an F-bit carry chain) or its leaf bits (one AND).
fn gh_carry(b: &mut Builder, g: &[Bit<u32>], e: &[Bit<u32>], lay: &StepLayout) -> Bit<u32> {
    if lay.gh_leaves() {
        carry_from_leaves(b, g, e)
    } else {
        add_full(b, g, e, Bit::Const(false)).1
    }
}

/// Largest sigmoid input (bits) whose gates come from lookup tables: a table has 2^bits
/// entries, one 1-of-2^bits OT each.
pub const LUT_MAX_BITS: usize = 8;
/// Largest gate value (bits) of a lookup table's entries (the OT pads are kept at 16 bits).
pub const LUT_MAX_OUT: usize = 16;

/// The sigmoid as a lookup table over the saturated input word (cryptogru::gate_luts): entry x
/// is the low gb bits of the same circuit A would run on input bits x, so the tables are the
/// reference's [`CircuitActivations`] exactly. `None` when the layout has no tables.
pub fn sigmoid_table(fp: &FixedPointConfig, lay: &StepLayout) -> Option<Vec<u64>> {
    let nb = lay.lut?;
    let sf = fp.sigmoid_format();
    let c = Circuit::build(nb, |b, x| {
        let y = activation::sigmoid(b, x, sf.input, sf.output);
        sext(&y, sf.output.bits as usize)[..lay.gb].to_vec()
    });
    Some(truth_table(&c, nb))
}

/// Appends the low `w` bits of `v`, least significant first.
pub use secinfer_ss::blocks::pooled::push_bits as put;

/// wrap(gi ≫ F + gh ≫ F) from each party's [hi (L), lo_h (F) or gh's leaf bits (3)].
fn gate_sum(b: &mut Builder, g: &[Bit<u32>], e: &[Bit<u32>], lay: &StepLayout) -> W {
    let l = lay.l;
    let ch = gh_carry(b, &g[l..], &e[l..], lay);
    add_cin(b, &g[..l], &e[..l], ch)
}

/// wrap((x ≫ F) + (y ≫ f2)) from each party's [hi (L), lo_y (f2)], hi being the party's
/// (x_share ≫ F) + (y_share ≫ f2) + its additive share of x's carry, mod 2^L: the circuit adds
/// y's carry out of the low parts (f2 ANDs) into the sum of the high parts (L − 1 ANDs).
fn split_sum(b: &mut Builder, g: &[Bit<u32>], e: &[Bit<u32>], l: usize, f2: usize) -> W {
    let (_, ch) = add_full(b, &g[l..l + f2], &e[l..l + f2], Bit::Const(false));
    add_cin(b, &g[..l], &e[..l], ch)
}

/// (s + c) mod 2^A, then bits F..F+L−1: `wrap((Σ) ≫ F)` of the reference.
pub(super) fn trunc_acc(b: &mut Builder, s: &[Bit<u32>], c: &[Bit<u32>], f: usize, l: usize) -> W {
    add_truncate(b, s, c, f, l)
}

/// Rescale to the activation input format (floor shift: dropped wires) and saturate.
fn act_input(b: &mut Builder, x: &[Bit<u32>], main_scale: u32, af: ActFormat) -> W {
    rescale_saturate(b, x, main_scale, af.input)
}

/// A smooth activation's output word (bo bits, signed) for main-format input x.
fn smooth(b: &mut Builder, func: Func, x: &[Bit<u32>], main_scale: u32, af: ActFormat) -> W {
    smooth_activation(b, func, x, main_scale, af.input, af.output)
}

/// The three step circuits (one copy per hidden unit each), see [`StepLayout`].
pub struct StepCircuits {
    pub a: Circuit,
    pub b: Circuit,
    pub c: Circuit,
    pub lay: StepLayout,
}

impl StepCircuits {
    /// AND gates per element and step, all three circuits.
    pub fn and_count(&self) -> u64 {
        self.a.and_count() + self.b.and_count() + self.c.and_count()
    }
}

fn xor_word(b: &mut Builder, x: &[Bit<u32>], y: &[Bit<u32>]) -> W {
    x.iter().zip(y).map(|(x, y)| xor(b, x, y)).collect()
}

/// The step circuits for a fixed-point configuration and candidate activation, with r and z
/// from lookup tables where the sigmoid's input is small enough ([`StepLayout::lut`]).
pub fn step_circuits(
    fp: &FixedPointConfig,
    tanh_candidate: bool,
    cache: &CircuitCache,
) -> StepCircuits {
    step_circuits_with(fp, tanh_candidate, true, cache)
}

/// [`step_circuits`], with `gate_tables = false` keeping the sigmoids of r and z inside circuit
/// A whatever their width, and gh's carries with them (four flights per step fewer, more
/// bytes: the client's choice).
pub fn step_circuits_with(
    fp: &FixedPointConfig,
    tanh_candidate: bool,
    gate_tables: bool,
    cache: &CircuitCache,
) -> StepCircuits {
    let mut lay = StepLayout::for_step(fp, tanh_candidate, cache);
    if !gate_tables {
        lay.lut = None;
    }
    let (l, pw, gb, bo, hw) = (lay.l, lay.pw, lay.gb, lay.bo, lay.hw);
    let mf = fp.main.scale;
    let sf = fp.sigmoid_format();
    let cf = fp.candidate_format();
    let p = lay.gate_parts();
    let ga = lay.a_garbler();
    let circ_a = Circuit::build(ga + lay.a_evaluator(), |b, ins| {
        let (g, e) = ins.split_at(ga);
        let ar = gate_sum(b, &g[..p], &e[..p], &lay);
        let az = gate_sum(b, &g[p..2 * p], &e[p..2 * p], &lay);
        // trunc(gh_n) leaves A as three bits, the carry κ out of the low F bits, the carry o
        // out of the high L bits and the sign s of their L-bit sum: trunc(gh_n) =
        // a + b + κ − 2^L·(o + s) mod 2^PW with a, b each party's share ≫ F, so each party
        // knows its own part of the multiplexer's factor before the circuit runs and the
        // product needs no answer flight (docs/gru-protocol.md, "Online flights").
        let (gs, es) = (&g[2 * p..3 * p], &e[2 * p..3 * p]);
        let kappa = gh_carry(b, &gs[l..], &es[l..], &lay);
        let (hi, o) = add_full(b, &gs[..l], &es[..l], kappa);
        // With lookup tables A stops at the saturated sigmoid inputs (cryptogru::gate_luts).
        let (r, z) = if lay.lut.is_some() {
            (act_input(b, &ar, mf, sf), act_input(b, &az, mf, sf))
        } else {
            let r = smooth(b, Func::Sigmoid, &ar, mf, sf);
            let z = smooth(b, Func::Sigmoid, &az, mf, sf);
            (r[..gb].to_vec(), z[..gb].to_vec())
        };
        let mut out = r;
        out.extend_from_slice(&z);
        out.extend([kappa, o, hi[l - 1]]);
        out
    });
    let gbn = lay.b_garbler();
    let circ_b = Circuit::build(gbn + lay.b_evaluator(), |b, ins| {
        let (g, e) = ins.split_at(gbn);
        // n = g(gi_n + wrap((r ⊙ gh_n) ≫ F)), gi_n = wrap(Σ ≫ F), the product term bits
        // fo.. of P: one split sum
        let an = split_sum(b, &g[..pw], &e[..pw], l, pw - l);
        let y = if tanh_candidate {
            smooth(b, Func::Tanh, &an, mf, cf)
        } else {
            let xs = act_input(b, &an, mf, cf);
            let y = relu(b, &xs);
            saturate(b, &y, bo)
        };
        // h − n, the second product's factor, is exact (StepLayout::for_step), so the product
        // z·(h − n) is taken outside from the shares of h and the XOR shares of y
        // (docs/gru-protocol.md, "Online flights"): B outputs y only.
        y
    });
    let gc_in = lay.c_garbler();
    let circ_c = Circuit::build(gc_in + lay.c_evaluator(), |b, ins| {
        let (g, e) = ins.split_at(gc_in);
        // Q's bits fo .. fo + hw − 1 from its shares mod 2^(fo + hw) (StepLayout::q_ring).
        let qw = lay.q_ring().pw;
        let fo = pw - l;
        let zd = add(b, &g[..qw], &e[..qw])[fo..fo + hw].to_vec();
        let y = xor_word(b, &g[qw..qw + bo], &e[qw..qw + bo]);
        let n = rescale_up(&y, cf.output.scale, mf, l);
        // h' = wrap(n + wrap((z ⊙ wrap(h − n)) ≫ F)), in hw bits
        add(b, &n[..hw], &zd)
    });
    StepCircuits {
        a: circ_a,
        b: circ_b,
        c: circ_c,
        lay,
    }
}

/// The final circuit (one copy): garbler [C logit accumulators, A bits each], evaluator the
/// same. Output: the indices of the `top_k` largest logits, largest first (⌈log2 C⌉ bits each,
/// lowest index first among equal logits; `top_k` 1 is the argmax), or with `reveal_logits`
/// the C logits (L bits each, signed).
pub fn final_circuit(
    fp: &FixedPointConfig,
    classes: usize,
    reveal_logits: bool,
    top_k: usize,
    cache: &CircuitCache,
) -> Circuit {
    let lay = StepLayout::new(fp, cache);
    let (a, l) = (lay.acc, lay.l);
    let f = fp.main.scale as usize;
    Circuit::build(2 * classes * a, |b, ins| {
        let (g, e) = ins.split_at(classes * a);
        let logits: Vec<W> = (0..classes)
            .map(|k| trunc_acc(b, &g[k * a..(k + 1) * a], &e[k * a..(k + 1) * a], f, l))
            .collect();
        if reveal_logits {
            logits.concat()
        } else {
            top_k_indices(b, &logits, top_k.clamp(1, classes)).concat()
        }
    })
}

/// Bits of the argmax index the final circuit outputs.
pub fn index_bits(classes: usize) -> usize {
    secinfer_gc::gadgets::bit_len(classes.saturating_sub(1) as u64).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::format::const_format;
    use crate::model::Format;

    fn fx8(input: Format) -> FixedPointConfig {
        FixedPointConfig {
            main: const_format(20, 12),
            sigmoid: Some(ActFormat {
                input,
                output: const_format(8, 7),
            }),
            candidate: Some(ActFormat {
                input: const_format(8, 4),
                output: const_format(8, 4),
            }),
        }
    }

    /// The gate table equals the reference's sigmoid (`CircuitActivations`, the function the
    /// bit-exact tests hold the session to) at every saturated input, read as two's complement;
    /// a 9-bit sigmoid input gets no table (the gates stay in the circuit).
    #[test]
    fn sigmoid_table_is_the_reference_sigmoid() {
        for input in [const_format(8, 4), const_format(6, 3)] {
            let fp = fx8(input);
            let lay = StepLayout::for_step(&fp, false, &CircuitCache::default());
            assert_eq!(lay.lut, Some(input.bits as usize));
            let table = sigmoid_table(&fp, &lay).expect("a table");
            assert_eq!(table.len(), 1 << input.bits);
            let act = CircuitActivations::default();
            let nb = input.bits;
            for (x, &t) in table.iter().enumerate() {
                let v = ((x as i64) << (64 - nb)) >> (64 - nb);
                let want = act.sigmoid(v, fp.sigmoid_format()) as u64 & ((1 << lay.gb) - 1);
                assert_eq!(t, want, "input {v}");
            }
        }
        let fp = fx8(const_format(9, 4));
        let lay = StepLayout::for_step(&fp, false, &CircuitCache::default());
        assert_eq!(lay.lut, None);
        assert!(sigmoid_table(&fp, &lay).is_none());
    }

    /// The 8-bit activations of `cg2-tanh` (the shipped tanh model's `fx8`: σ (8,4) → (8,7),
    /// tanh (8,5) → (8,7)) are exactly rounded at every input, so `secinfer.fixedpoint` (which
    /// rounds exactly and saturates to the output format) computes what the secure run does; a
    /// one-ULP fit anywhere fails this.
    #[test]
    fn eight_bit_tanh_variant_activations_are_exactly_rounded() {
        use crate::reference::ExactActivations;
        let circ = CircuitActivations::default();
        let sig = ActFormat {
            input: const_format(8, 4),
            output: const_format(8, 7),
        };
        let tanh = ActFormat {
            input: const_format(8, 5),
            output: const_format(8, 7),
        };
        let clamp = |v: i64| v.clamp(-128, 127);
        for x in -128i64..128 {
            assert_eq!(
                circ.sigmoid(x, sig),
                clamp(ExactActivations.sigmoid(x, sig)),
                "sigmoid {x}"
            );
            assert_eq!(
                circ.tanh(x, tanh),
                clamp(ExactActivations.tanh(x, tanh)),
                "tanh {x}"
            );
        }
    }

    #[test]
    #[ignore = "prints the per-circuit AND counts"]
    fn print_and_counts() {
        let fp = fx8(const_format(8, 4));
        let s = step_circuits(&fp, false, &CircuitCache::default());
        let t = step_circuits(&fp, true, &CircuitCache::default());
        eprintln!("tanh candidate: B {}", t.b.and_count());
        eprintln!(
            "A {} B {} C {} lay {:?}",
            s.a.and_count(),
            s.b.and_count(),
            s.c.and_count(),
            s.lay
        );
        let sf = fp.sigmoid_format();
        // The sigmoid input is bits 8.. of the main format's 20: 12 input bits, saturated to 8.
        let c = Circuit::build(20, |b, x| smooth(b, Func::Sigmoid, x, 12, sf));
        eprintln!("sat+sigmoid from 12 bits: {}", c.and_count());
        let c = Circuit::build(64, |b, x| trunc_acc(b, &x[..32], &x[32..], 12, 20));
        eprintln!("trunc_acc {}", c.and_count());
        let lay = s.lay;
        let p = lay.gate_parts();
        let c = Circuit::build(2 * p, |b, x| gate_sum(b, &x[..p], &x[p..], &lay));
        eprintln!("gate_sum {}", c.and_count());
    }
}
