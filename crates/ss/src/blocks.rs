//! SIRNN / CrypTFlow2 building blocks on additive shares over Z_{2^l}, batched over slices so the
//! number of rounds does not depend on the number of elements.
//!
//! Conventions: arithmetic shares are `u64` reduced mod 2^bits; boolean shares are `u8` in {0,1}
//! (XOR-shared). Every function is called by both parties with their own shares; P0 is the
//! server. Correlations come from correlated OT (1-of-2) and KK13 1-of-N OT, never from a dealer.
//!
//! Each block here runs its arithmetic's pure steps ([`steps`], [`pooled`]) around `Ctx`'s OTs
//! and bit openings: where a block has steps they are the one definition, the block its
//! sequence over a channel.
use crate::ctx::Ctx;
use crate::error::{invalid, Result};
use crate::ring::{check_bits, mask, msb};
use secinfer_net::Channel;

pub mod modt;
pub mod pooled;
mod reciprocal;
pub mod steps;

use steps::shl;

pub(crate) use reciprocal::reciprocal_raw;
pub use reciprocal::{rec_carry_bits, reciprocal, RecParams};

/// Largest digit size of the millionaires' protocol (one 1-of-2^m OT per digit).
pub const MILL_DIGIT: u32 = 5;

/// Digit size of the millionaires' leaves when ANDs run on triples (default of
/// [`Ctx::mill_leaf_bits`](crate::Ctx::mill_leaf_bits)). 1: each leaf bit is a private AND on a half triple (1 COT). m ≥ 2: each
/// m-bit leaf is a random 1-of-2^m OT made offline (m COTs, hashed offline) and derandomised
/// online with m bits one way and 2^(m+1) bits back, so the leaves cost the same COTs per bit
/// and the AND tree above them (2 COTs per node) shrinks m-fold. A b-bit comparison takes
/// about 3b COTs with m = 1, 2b with m = 2 and 1.5b with m = 4; online bytes are equal for
/// m = 1 and 2 (about 8 bits per compared bit) and 30 % more for m = 4, whose P0 also builds
/// 16 masked entries per leaf. Measured for OPAF sigmoid at 2^14 (LAN, load 3): offline
/// 3216 → 2528 → 2208 B/elt for m = 1, 2, 4, rounds 54 → 45 → 39, online 663 → 664 → 681 B/elt;
/// online time within the run-to-run noise for m = 1 and 2 and higher for m = 4, so on IKNP
/// pools 2 would do. On SoftSpokenOT k = 4 pools (4 bytes per COT, with the pool fill the bulk
/// of the offline CPU) it is 4: a COT costs the two parties several times the CPU
/// of one of the 2m + 2^m leaf hashes, so the COTs m = 4 saves (sigmoid 158 → 138 per element,
/// tanh 211 → 183, ReLU 40 → 30) outweigh its extra hashes; process CPU of a 2^14 run, three interleaved rounds
/// at load 3.6: ReLU 81–97 → 68–85 ms, sigmoid 276–334 → 251–286 ms, tanh 375–470 →
/// 339–435 ms; total bytes per element 1296 → 1233 (sigmoid), 184 → 151 (ReLU); rounds
/// 45 → 39 (sigmoid), 11 → 9 (ReLU).
pub const MILL_LEAF_BITS_TRIPLES: u32 = 4;

/// Digit size for a `bits`-bit comparison: the smallest m ≤ MILL_DIGIT whose AND tree is no
/// deeper than with MILL_DIGIT. Rounds stay those of 5-bit digits, while each 1-of-2^m OT from
/// pooled COTs costs 2m + 2^m hashes and 2^(m+1) payload bits (19 bits: 5; 15 bits: 4 digits of
/// 4 bits, 96 hashes instead of 3 × 42; 4 bits: one 1-of-16).
pub fn mill_digit(bits: u32) -> u32 {
    let levels = |m: u32| {
        let q = bits.div_ceil(m).max(1);
        u32::BITS - (q - 1).leading_zeros()
    };
    let target = levels(MILL_DIGIT);
    (2..=MILL_DIGIT)
        .find(|&m| levels(m) <= target)
        .unwrap_or(MILL_DIGIT)
}

#[inline]
fn add(a: u64, b: u64, m: u64) -> u64 {
    a.wrapping_add(b) & m
}
#[inline]
fn sub(a: u64, b: u64, m: u64) -> u64 {
    a.wrapping_sub(b) & m
}

fn same_len(a: usize, b: usize) -> Result<()> {
    if a != b {
        return Err(invalid(format!("length mismatch: {a} vs {b}")));
    }
    Ok(())
}

// ============================================================================ boolean

/// AND of XOR-shared bits: with Beaver bit triples made offline (the real backend), one opening;
/// otherwise (the test dealer) the one-bit multiplexer: x0y0 ⊕ x1y1 locally and the two cross
/// terms by 1-bit COTs.
pub fn and<C: Channel>(ctx: &mut Ctx, ch: &mut C, x: &[u8], y: &[u8]) -> Result<Vec<u8>> {
    same_len(x.len(), y.len())?;
    ctx.block("and", |ctx| and_raw(ctx, ch, x, y))
}

pub(crate) fn and_raw<C: Channel>(
    ctx: &mut Ctx,
    ch: &mut C,
    x: &[u8],
    y: &[u8],
) -> Result<Vec<u8>> {
    if ctx.has_triples() {
        return ctx.and_bits(ch, x, y);
    }
    // x·y in Z_2 is the one-bit multiplexer of x by the selector y.
    let v: Vec<u64> = x.iter().map(|b| (*b & 1) as u64).collect();
    Ok(mux_raw(ctx, ch, y, &v, 1)?
        .into_iter()
        .map(|b| b as u8)
        .collect())
}

/// (x ∧ y, x ∧ z): on one triple with two b's each when ANDs run on triples, else two ANDs.
pub(crate) fn and2_raw<C: Channel>(
    ctx: &mut Ctx,
    ch: &mut C,
    x: &[u8],
    y: &[u8],
    z: &[u8],
) -> Result<(Vec<u8>, Vec<u8>)> {
    same_len(x.len(), y.len())?;
    same_len(x.len(), z.len())?;
    if ctx.has_triples() {
        return ctx.and2_bits(ch, x, y, z);
    }
    let n = x.len();
    let mut xx = x.to_vec();
    xx.extend_from_slice(x);
    let mut yz = y.to_vec();
    yz.extend_from_slice(z);
    let mut r = and_raw(ctx, ch, &xx, &yz)?;
    let second = r.split_off(n);
    Ok((r, second))
}

/// Millionaires' comparison (CrypTFlow2): P0 inputs `a`, P1 inputs `b` (each its own `v`, both
/// below 2^bits); returns XOR shares of [a < b]. Digits of m = mill_digit(bits) bits, one 1-of-2^m OT per digit
/// giving shares of the digit's lt/eq bits, then a log-depth AND tree.
pub fn millionaire<C: Channel>(ctx: &mut Ctx, ch: &mut C, v: &[u64], bits: u32) -> Result<Vec<u8>> {
    check_bits(bits)?;
    ctx.block("millionaire", |ctx| millionaire_raw(ctx, ch, v, bits))
}

pub(crate) fn millionaire_raw<C: Channel>(
    ctx: &mut Ctx,
    ch: &mut C,
    v: &[u64],
    bits: u32,
) -> Result<Vec<u8>> {
    check_bits(bits)?;
    let n = v.len();
    if n == 0 {
        return Ok(Vec::new());
    }
    let p0 = ctx.is_p0();
    let md = if ctx.has_triples() {
        ctx.mill_leaf_bits().min(bits)
    } else {
        mill_digit(bits)
    };
    // Leaves: index [j * n + i] for digit j (least significant first), element i.
    let (lt, eq) = if md == 1 {
        // With AND gates on precomputed triples, 1-bit digits are cheapest online: the whole
        // comparison is bit openings (no 1-of-2^m OT hashing 2m + 2^m keys per digit). Both
        // operands of lt are private (P0's ¬a, P1's b), so each leaf takes a half triple (one
        // COT of the P0 → P1 pool, one opened bit per party) instead of a full triple.
        let mine = steps::mill_bit_leaves(v, bits, p0);
        (ctx.and_private(ch, &mine)?, mine)
    } else if ctx.has_triples() {
        // m-bit leaves on random 1-of-2^m OTs made offline (m COTs each, no hashing online).
        // (A comparison narrower than m bits uses narrower digits on the same OTs.)
        steps::leaf_split(&ctx.leaf_cmp(ch, &steps::mill_digits(v, bits, md))?)
    } else {
        let digits = steps::mill_digits(v, bits, md);
        let nd = 1usize << md;
        if p0 {
            let r = ctx.rand_bits(2 * digits.len());
            let (msgs, mine) = steps::leaf_rows(&digits, md, &r)?;
            ctx.kk_send(ch, nd, &msgs, 2)?;
            steps::leaf_split(&mine)
        } else {
            let got = ctx.kk_recv(ch, nd, &digits, 2)?;
            steps::leaf_split(&got.iter().map(|g| (*g & 3) as u8).collect::<Vec<_>>())
        }
    };
    let mut tree = steps::MillTree::new(n, lt, eq)?;
    while let Some(level) = tree.level() {
        // eq_hi ∧ lt_lo and eq_hi ∧ eq_lo share eq_hi: one triple with two b's for both.
        match &level.w {
            None => tree.absorb(&and_raw(ctx, ch, &level.x, &level.y)?, &[])?,
            Some(w) => {
                let (zl, ze) = and2_raw(ctx, ch, &level.x, &level.y, w)?;
                tree.absorb(&zl, &ze)?;
            }
        }
    }
    tree.result()
}

/// Carry of the low `bits` bits: shares of [x0 + x1 ≥ 2^bits] (the wrap when `bits` is the ring).
pub fn carry<C: Channel>(ctx: &mut Ctx, ch: &mut C, x: &[u64], bits: u32) -> Result<Vec<u8>> {
    check_bits(bits)?;
    ctx.block("wrap", |ctx| carry_raw(ctx, ch, x, bits))
}

pub(crate) fn carry_raw<C: Channel>(
    ctx: &mut Ctx,
    ch: &mut C,
    x: &[u64],
    bits: u32,
) -> Result<Vec<u8>> {
    let v = steps::carry_input(x, bits, ctx.is_p0());
    millionaire_raw(ctx, ch, &v, bits)
}

/// Carries at several widths in one millionaires' run (inputs zero-padded to the widest).
pub(crate) fn carries_raw<C: Channel>(
    ctx: &mut Ctx,
    ch: &mut C,
    x: &[u64],
    widths: &[u32],
) -> Result<Vec<Vec<u8>>> {
    if x.is_empty() {
        return Ok(vec![Vec::new(); widths.len()]);
    }
    let wmax = widths.iter().copied().max().unwrap_or(1).max(1);
    let v = steps::carries_input(x, widths, ctx.is_p0());
    let r = millionaire_raw(ctx, ch, &v, wmax)?;
    Ok(r.chunks(x.len().max(1))
        .map(|c| c.to_vec())
        .take(widths.len())
        .collect())
}

/// Wrap of the whole ring: [x0 + x1 ≥ 2^bits].
pub fn wrap<C: Channel>(ctx: &mut Ctx, ch: &mut C, x: &[u64], bits: u32) -> Result<Vec<u8>> {
    carry(ctx, ch, x, bits)
}

/// MSB: msb(x0) ⊕ msb(x1) ⊕ carry of the low bits − 1.
pub fn msb_share<C: Channel>(ctx: &mut Ctx, ch: &mut C, x: &[u64], bits: u32) -> Result<Vec<u8>> {
    check_bits(bits)?;
    ctx.block("msb", |ctx| msb_raw(ctx, ch, x, bits))
}

pub(crate) fn msb_raw<C: Channel>(
    ctx: &mut Ctx,
    ch: &mut C,
    x: &[u64],
    bits: u32,
) -> Result<Vec<u8>> {
    let c = if bits > 1 {
        carry_raw(ctx, ch, x, bits - 1)?
    } else {
        vec![0; x.len()]
    };
    steps::msb_output(x, &c, bits)
}

/// MSB and wrap together: one millionaires' on bits − 1 and one AND round.
/// wrap = m0·m1 ⊕ c·(m0 ⊕ m1) with c the carry of the low bits.
pub fn msb_and_wrap<C: Channel>(
    ctx: &mut Ctx,
    ch: &mut C,
    x: &[u64],
    bits: u32,
) -> Result<(Vec<u8>, Vec<u8>)> {
    check_bits(bits)?;
    if bits < 2 {
        return Err(invalid("msb_and_wrap needs at least 2 bits"));
    }
    ctx.block("msb_wrap", |ctx| {
        let c = carry_raw(ctx, ch, x, bits - 1)?;
        let (xs, ys) = steps::msb_wrap_and_operands(x, &c, bits, ctx.is_p0());
        let z = and_raw(ctx, ch, &xs, &ys)?;
        steps::msb_wrap_output(x, &c, &z, bits)
    })
}

// ============================================================================ conversions

/// Boolean to arithmetic: b0 + b1 − 2·b0·b1 over Z_{2^bits}, the product by one correlated OT.
pub fn b2a<C: Channel>(ctx: &mut Ctx, ch: &mut C, b: &[u8], bits: u32) -> Result<Vec<u64>> {
    check_bits(bits)?;
    ctx.block("b2a", |ctx| b2a_raw(ctx, ch, b, bits))
}

/// [`pooled`]'s B2A of single bits with P0 as the OT sender.
pub(crate) fn b2a_raw<C: Channel>(
    ctx: &mut Ctx,
    ch: &mut C,
    b: &[u8],
    bits: u32,
) -> Result<Vec<u64>> {
    let c: Vec<bool> = b.iter().map(|x| *x & 1 == 1).collect();
    let k = bits as usize;
    if ctx.is_p0() {
        let x = ctx.cot_send(ch, &pooled::b2a_bit_deltas(&c, k)?, bits)?;
        pooled::b2a_bit_sender(&c, &x, k)
    } else {
        let t = ctx.cot_recv(ch, &c, bits)?;
        pooled::b2a_receiver(&t, 1, k)
    }
}

/// Multiplexer: shares of c·v for a shared bit c and shared v, two correlated OTs.
pub fn mux<C: Channel>(
    ctx: &mut Ctx,
    ch: &mut C,
    c: &[u8],
    v: &[u64],
    bits: u32,
) -> Result<Vec<u64>> {
    check_bits(bits)?;
    same_len(c.len(), v.len())?;
    ctx.block("mux", |ctx| mux_raw(ctx, ch, c, v, bits))
}

/// [`pooled`]'s multiplexer with one selector bit per product.
pub(crate) fn mux_raw<C: Channel>(
    ctx: &mut Ctx,
    ch: &mut C,
    c: &[u8],
    v: &[u64],
    bits: u32,
) -> Result<Vec<u64>> {
    let m = mask(bits);
    let w: Vec<u64> = v.iter().map(|x| x & m).collect();
    let choices: Vec<bool> = c.iter().map(|b| *b & 1 == 1).collect();
    let deltas = pooled::mux_deltas(&w, &choices, bits as usize);
    let (got, pad) = ctx.cots_both(ch, &deltas, &choices, bits)?;
    pooled::mux_combine(&w, &choices, &got, &pad, 1, bits as usize)
}

/// ReLU on a signed value: x·(1 − msb(x)).
pub fn relu<C: Channel>(ctx: &mut Ctx, ch: &mut C, x: &[u64], bits: u32) -> Result<Vec<u64>> {
    check_bits(bits)?;
    ctx.block("relu", |ctx| {
        let m = ctx.block("msb", |ctx| msb_raw(ctx, ch, x, bits))?;
        let p0 = ctx.is_p0();
        let notm: Vec<u8> = m.iter().map(|b| if p0 { b ^ 1 } else { *b }).collect();
        ctx.block("mux", |ctx| mux_raw(ctx, ch, &notm, x, bits))
    })
}

/// Zero extension Z_{2^from} → Z_{2^to} of an unsigned value: x0 + x1 − 2^from·wrap.
pub fn zext<C: Channel>(
    ctx: &mut Ctx,
    ch: &mut C,
    x: &[u64],
    from: u32,
    to: u32,
) -> Result<Vec<u64>> {
    check_bits(from)?;
    check_bits(to)?;
    if to < from {
        return Err(invalid("zext: target ring is smaller"));
    }
    ctx.block("zext", |ctx| {
        let w = carry_raw(ctx, ch, x, from)?;
        let wa = b2a_raw(ctx, ch, &w, to)?;
        steps::ext_output(x, &wa, from, to)
    })
}

/// Signed extension: bias by 2^(from−1), zero-extend, unbias.
pub fn sext<C: Channel>(
    ctx: &mut Ctx,
    ch: &mut C,
    x: &[u64],
    from: u32,
    to: u32,
) -> Result<Vec<u64>> {
    check_bits(from)?;
    check_bits(to)?;
    if to < from {
        return Err(invalid("sext: target ring is smaller"));
    }
    let p0 = ctx.is_p0();
    let bias = 1u64 << (from - 1);
    let y = steps::add_public(x, bias, from, p0);
    let z = ctx.block("sext", |ctx| {
        let w = carry_raw(ctx, ch, &y, from)?;
        let wa = b2a_raw(ctx, ch, &w, to)?;
        steps::ext_output(&y, &wa, from, to)
    })?;
    Ok(steps::add_public(&z, bias.wrapping_neg(), to, p0))
}

/// Arithmetic shares (mod 2^to) of wrap(x) for x whose MSB is known to be 0:
/// wrap = m0 ∨ m1 = m0 + m1 − m0·m1 (one correlated OT, SIRNN's MSB-to-wrap).
pub(crate) fn wrap_msb0_arith<C: Channel>(
    ctx: &mut Ctx,
    ch: &mut C,
    x: &[u64],
    bits: u32,
    to: u32,
) -> Result<Vec<u64>> {
    let m = steps::msbs(x, bits);
    let deltas: Vec<u64> = m.iter().map(|b| *b as u64).collect();
    let choices: Vec<bool> = m.iter().map(|b| *b == 1).collect();
    let prod = ctx.cross_from_p0(ch, &deltas, &choices, to)?;
    steps::msb0_wrap_output(&m, &prod, to)
}

/// Zero extension of a value whose MSB is known to be 0 (one correlated OT per element).
pub fn zext_msb0<C: Channel>(
    ctx: &mut Ctx,
    ch: &mut C,
    x: &[u64],
    from: u32,
    to: u32,
) -> Result<Vec<u64>> {
    check_bits(from)?;
    check_bits(to)?;
    ctx.block("zext", |ctx| zext_msb0_raw(ctx, ch, x, from, to))
}

pub(crate) fn zext_msb0_raw<C: Channel>(
    ctx: &mut Ctx,
    ch: &mut C,
    x: &[u64],
    from: u32,
    to: u32,
) -> Result<Vec<u64>> {
    let w = wrap_msb0_arith(ctx, ch, x, from, to)?;
    steps::ext_output(x, &w, from, to)
}

/// Zero extension of values whose MSB is known to be 0 (as [`zext_msb0`]) and, in the same
/// batch of correlated OTs, shares of the last `tail` extended values times each of P0's
/// scalars `k` (P0 passes the `scalars` values, P1 an empty slice), all mod 2^to.
///
/// With a0, a1 the shares' MSBs, the extension is x0 + x1 − 2^from·w with w = a0 + a1 − a0·a1;
/// so k·ext = k·x0 + k·x1 − 2^from·(k·a0 + k·(1 − a0)·a1): P0 holds k·x0 and k·a0, and k·x1
/// (one COT per bit of P1's share, δ = k·2^j) and k·(1 − a0)·a1 (one COT, δ = k·(1 − a0)) ride
/// the extension's own COTs, so the products cost no flight of their own.
/// Returns the extensions and `products[s][t]` = k_s · ext_(len − tail + t).
#[allow(clippy::too_many_arguments)]
pub fn zext_msb0_times<C: Channel>(
    ctx: &mut Ctx,
    ch: &mut C,
    x: &[u64],
    from: u32,
    to: u32,
    tail: usize,
    k: &[u64],
    scalars: usize,
) -> Result<(Vec<u64>, Vec<Vec<u64>>)> {
    check_bits(from)?;
    check_bits(to)?;
    if to < from || tail > x.len() || (ctx.is_p0() && k.len() != scalars) {
        return Err(invalid(
            "zext_msb0_times: target ring smaller, tail too long or scalars missing",
        ));
    }
    ctx.block("zext", |ctx| {
        let n = x.len();
        let head = n - tail;
        let (mf, mt) = (mask(from), mask(to));
        let p0 = ctx.is_p0();
        let mine: Vec<u64> = x.iter().map(|a| msb(*a, from) as u64).collect();
        // COTs: n for a0·a1; then per scalar and tail element, 1 for k·(1 − a0)·a1 and
        // `from` for the bits of x1.
        let per = 1 + from as usize;
        let total = n + scalars * tail * per;
        let (mut deltas, mut choices) = (Vec::new(), Vec::new());
        if p0 {
            deltas.reserve(total);
            deltas.extend_from_slice(&mine);
            for &ks in k {
                for &a in &mine[head..] {
                    deltas.push(ks.wrapping_mul(1 - a) & mt);
                    deltas.extend((0..from).map(|j| shl(ks, j) & mt));
                }
            }
        } else {
            choices.reserve(total);
            choices.extend(mine.iter().map(|b| *b == 1));
            for _ in 0..scalars {
                for i in head..n {
                    choices.push(mine[i] == 1);
                    choices.extend((0..from).map(|j| (x[i] >> j) & 1 == 1));
                }
            }
        }
        let r = ctx.cross_from_p0(ch, &deltas, &choices, to)?;
        let ext: Vec<u64> = (0..n)
            .map(|i| sub(x[i] & mf, shl(sub(mine[i], r[i], mt), from), mt))
            .collect();
        let products = (0..scalars)
            .map(|s| {
                (0..tail)
                    .map(|t| {
                        let (i, o) = (head + t, n + (s * tail + t) * per);
                        let kx1 = r[o + 1..o + per].iter().fold(0, |a, v| add(a, *v, mt));
                        let (own, kw) = if p0 {
                            let ks = k[s];
                            let kw = ks.wrapping_mul(mine[i]).wrapping_add(r[o]);
                            (ks.wrapping_mul(x[i] & mf), kw)
                        } else {
                            (0, r[o])
                        };
                        own.wrapping_add(kx1).wrapping_sub(shl(kw, from)) & mt
                    })
                    .collect()
            })
            .collect();
        Ok((ext, products))
    })
}

// ============================================================================ truncation

/// Truncate-reduce: ⌊x / 2^t⌋ of an unsigned x ∈ Z_{2^bits}, output in Z_{2^(bits−t)} (exact).
pub fn trunc_reduce<C: Channel>(
    ctx: &mut Ctx,
    ch: &mut C,
    x: &[u64],
    bits: u32,
    t: u32,
) -> Result<Vec<u64>> {
    check_bits(bits)?;
    if t == 0 || t >= bits {
        return Err(invalid("trunc_reduce needs 0 < t < bits"));
    }
    ctx.block("trunc_reduce", |ctx| {
        let c = carry_raw(ctx, ch, x, t)?;
        let ca = b2a_raw(ctx, ch, &c, bits - t)?;
        steps::trunc_reduce_output(x, &ca, bits, t)
    })
}

/// Truncation in the same ring of a value whose MSB is known to be 0 (x < 2^(bits−1) − 2^t):
/// ⌊x / 2^t⌋ exactly when `exact` (one millionaires' on t bits), otherwise ⌊x / 2^t⌋ or one
/// more (one correlated OT).
pub fn trunc_msb0<C: Channel>(
    ctx: &mut Ctx,
    ch: &mut C,
    x: &[u64],
    bits: u32,
    t: u32,
    exact: bool,
) -> Result<Vec<u64>> {
    check_bits(bits)?;
    if t == 0 || t >= bits {
        return Err(invalid("trunc needs 0 < t < bits"));
    }
    ctx.block("trunc", |ctx| trunc_msb0_raw(ctx, ch, x, bits, t, exact))
}

pub(crate) fn trunc_msb0_raw<C: Channel>(
    ctx: &mut Ctx,
    ch: &mut C,
    x: &[u64],
    bits: u32,
    t: u32,
    exact: bool,
) -> Result<Vec<u64>> {
    trunc_msb0_carry_raw(ctx, ch, x, bits, t, exact, t)
}

/// As [`trunc_msb0_raw`]; when `exact`, the carry of the low t bits is taken from their top
/// `carry_bits` bits only (a millionaires' run on carry_bits instead of t bits). Dropping the
/// carry of the t − carry_bits lowest bits makes the result ⌊(x − ε)/2^t⌋ with
/// 0 ≤ ε < 2^(t − carry_bits): off by −1 only when x mod 2^t < 2^(t − carry_bits), i.e. an
/// error below 2^(−carry_bits) of the output unit on top of the floor.
pub(crate) fn trunc_msb0_carry_raw<C: Channel>(
    ctx: &mut Ctx,
    ch: &mut C,
    x: &[u64],
    bits: u32,
    t: u32,
    exact: bool,
    carry_bits: u32,
) -> Result<Vec<u64>> {
    if exact && carry_bits == 0 {
        return Err(invalid("trunc: carry_bits must be ≥ 1"));
    }
    if t == 0 || t >= bits || bits > 64 {
        return Err(invalid("trunc needs 0 < t < bits ≤ 64"));
    }
    let x = steps::trunc_msb0_bias(x, bits, t, exact, ctx.is_p0());
    let carry = if exact {
        let (v, w) = steps::trunc_carry_operand(&x, t, carry_bits);
        Some(carry_raw(ctx, ch, &v, w)?)
    } else {
        None
    };
    let deltas = steps::trunc_msb0_deltas(&x, bits, carry.as_deref());
    let choices: Vec<bool> = deltas.iter().map(|b| *b == 1).collect();
    let prod = ctx.cross_from_p0(ch, &deltas, &choices, bits)?;
    steps::trunc_msb0_output(&x, &deltas, &prod, bits, t, exact)
}

/// Arithmetic (signed) right shift by t in the same ring for |x| < 2^(bits−2): bias to a known
/// MSB of 0, truncate, unbias.
pub fn trunc_signed_small<C: Channel>(
    ctx: &mut Ctx,
    ch: &mut C,
    x: &[u64],
    bits: u32,
    t: u32,
    exact: bool,
) -> Result<Vec<u64>> {
    check_bits(bits)?;
    if bits < 3 || t == 0 || t >= bits - 1 {
        return Err(invalid(
            "trunc_signed_small needs bits ≥ 3 and 0 < t < bits − 1",
        ));
    }
    ctx.block("trunc", |ctx| {
        trunc_signed_small_raw(ctx, ch, x, bits, t, exact)
    })
}

pub(crate) fn trunc_signed_small_raw<C: Channel>(
    ctx: &mut Ctx,
    ch: &mut C,
    x: &[u64],
    bits: u32,
    t: u32,
    exact: bool,
) -> Result<Vec<u64>> {
    let p0 = ctx.is_p0();
    let bias = 1u64 << (bits - 2);
    let y = steps::add_public(x, bias, bits, p0);
    let z = trunc_msb0_raw(ctx, ch, &y, bits, t, exact)?;
    Ok(steps::add_public(&z, (bias >> t).wrapping_neg(), bits, p0))
}

/// Arithmetic right shift by t of any signed x ∈ Z_{2^bits}, exact (floor): carry of the low t
/// bits and wrap of the biased value in one millionaires' run, then B2A.
pub fn ars<C: Channel>(
    ctx: &mut Ctx,
    ch: &mut C,
    x: &[u64],
    bits: u32,
    t: u32,
) -> Result<Vec<u64>> {
    check_bits(bits)?;
    if t == 0 || t >= bits {
        return Err(invalid("ars needs 0 < t < bits"));
    }
    ctx.block("ars", |ctx| {
        let y = steps::ars_bias(x, bits, ctx.is_p0());
        let cs = carries_raw(ctx, ch, &y, &[t, bits])?;
        let b: Vec<u8> = cs.concat();
        let a = b2a_raw(ctx, ch, &b, bits)?;
        steps::ars_output(&y, &a, bits, t, ctx.is_p0())
    })
}

// ============================================================================ products

/// Product of two private values: P0 holds a (any ring element), P1 holds b < 2^b_bits.
/// Returns shares of a·b mod 2^bits: b_bits correlated OTs, P1 choosing by the bits of b.
pub fn mul_private<C: Channel>(
    ctx: &mut Ctx,
    ch: &mut C,
    v: &[u64],
    b_bits: u32,
    bits: u32,
) -> Result<Vec<u64>> {
    check_bits(bits)?;
    check_bits(b_bits)?;
    ctx.block("mul_private", |ctx| {
        mul_private_raw(ctx, ch, v, b_bits, bits)
    })
}

pub(crate) fn mul_private_raw<C: Channel>(
    ctx: &mut Ctx,
    ch: &mut C,
    v: &[u64],
    b_bits: u32,
    bits: u32,
) -> Result<Vec<u64>> {
    let (deltas, choices) = if ctx.is_p0() {
        (steps::private_product_deltas(v, b_bits, bits), Vec::new())
    } else {
        (Vec::new(), steps::private_product_choices(v, b_bits))
    };
    let r = ctx.cross_from_p0(ch, &deltas, &choices, bits)?;
    steps::private_product_output(&r, v.len(), b_bits, bits)
}

/// Product of two shared values in one ring: x0y0 + x1y1 locally, both cross terms by
/// correlated OT choosing on the bits of y's shares (`y_bits` = bits of the y shares).
pub fn mul_shared<C: Channel>(
    ctx: &mut Ctx,
    ch: &mut C,
    x: &[u64],
    y: &[u64],
    bits: u32,
) -> Result<Vec<u64>> {
    check_bits(bits)?;
    same_len(x.len(), y.len())?;
    ctx.block("mul", |ctx| mul_cross_raw(ctx, ch, x, y, bits, bits))
}

/// x·(y0 + y1) where y's shares are below 2^y_bits as integers: local x_i·y_i plus cross terms.
pub(crate) fn mul_cross_raw<C: Channel>(
    ctx: &mut Ctx,
    ch: &mut C,
    x: &[u64],
    y: &[u64],
    bits: u32,
    y_bits: u32,
) -> Result<Vec<u64>> {
    let (deltas, choices) = steps::cross_deltas(x, y, bits, y_bits)?;
    let (got, pad) = ctx.cots_both(ch, &deltas, &choices, bits)?;
    steps::cross_combine(x, y, &got, &pad, bits, y_bits)
}

/// Product with non-uniform bitwidths (SIRNN §4) of two unsigned values whose MSBs are known to
/// be 0: x ∈ Z_{2^bx}, y ∈ Z_{2^by}, result in Z_{2^bits} (bits ≤ bx + by). Uses
/// x·y = (x0+x1)(y0+y1) − 2^by·wy·(x0+x1) − 2^bx·wx·(y0+y1) + 2^(bx+by)·wx·wy with the wraps
/// from the known MSBs, the cross terms choosing on the by-bit shares of y, and two muxes.
pub fn mul_nonuniform_msb0<C: Channel>(
    ctx: &mut Ctx,
    ch: &mut C,
    x: &[u64],
    bx: u32,
    y: &[u64],
    by: u32,
    bits: u32,
) -> Result<Vec<u64>> {
    check_bits(bits)?;
    same_len(x.len(), y.len())?;
    if bits > bx + by {
        return Err(invalid("mul_nonuniform: output ring wider than bx + by"));
    }
    ctx.block("mul", |ctx| {
        mul_nonuniform_msb0_raw(ctx, ch, x, bx, y, by, bits)
    })
}

pub(crate) fn mul_nonuniform_msb0_raw<C: Channel>(
    ctx: &mut Ctx,
    ch: &mut C,
    x: &[u64],
    bx: u32,
    y: &[u64],
    by: u32,
    bits: u32,
) -> Result<Vec<u64>> {
    check_bits(bx)?;
    check_bits(by)?;
    check_bits(bits)?;
    let n = x.len();
    let xs: Vec<u64> = x.iter().map(|a| a & mask(bx)).collect();
    let ys: Vec<u64> = y.iter().map(|a| a & mask(by)).collect();
    // Boolean wraps from the MSBs: w = m0 ∨ m1; as XOR shares: m0 ⊕ m1 ⊕ m0m1.
    let mut m = steps::msbs(&xs, bx);
    m.extend(steps::msbs(&ys, by));
    let (a, b) = steps::private_and_operands(&m, ctx.is_p0());
    let z = and_raw(ctx, ch, &a, &b)?;
    let w: Vec<u8> = m.iter().zip(&z).map(|(m, z)| m ^ z).collect();
    // Cross terms of (x0+x1)(y0+y1).
    let base = mul_cross_raw(ctx, ch, &xs, &ys, bits, by)?;
    // wy·(x0+x1) and wx·(y0+y1) in one mux batch.
    let c = [&w[n..], &w[..n]].concat();
    let mx = mux_raw(ctx, ch, &c, &[xs, ys].concat(), bits)?;
    steps::nonuniform_output(&base, &mx, bx, by, bits)
}

// ============================================================================ tables

/// Lookup table: `idx` shared mod 2^k (k ≤ 8), public `table` of 2^k entries; returns shares
/// of table[idx] mod 2^bits. One 1-of-2^k OT per element (P0 rotates the table by its share).
pub fn lut<C: Channel>(
    ctx: &mut Ctx,
    ch: &mut C,
    idx: &[u64],
    k: u32,
    table: &[u64],
    bits: u32,
) -> Result<Vec<u64>> {
    check_bits(bits)?;
    if !(1..=8).contains(&k) || table.len() != 1usize << k {
        return Err(invalid("lut: table needs 2^k entries with 1 ≤ k ≤ 8"));
    }
    ctx.block("lut", |ctx| {
        lut_raw(ctx, ch, idx, k, &[table], &[bits]).map(|mut v| v.remove(0))
    })
}

/// Several public tables read at one shared index (SIRNN's exponential reads one table per
/// digit this way): shares of `tables[q][idx]` mod 2^`bits[q]` for every q, in one 1-of-2^k
/// batch (entries packed into one message when they fit in 64 bits, else one OT row per table).
pub fn lut_tables<C: Channel>(
    ctx: &mut Ctx,
    ch: &mut C,
    idx: &[u64],
    k: u32,
    tables: &[&[u64]],
    bits: &[u32],
) -> Result<Vec<Vec<u64>>> {
    if !(1..=8).contains(&k) || bits.iter().any(|b| !(1..=64).contains(b)) {
        return Err(invalid("lut: need 1 ≤ k ≤ 8 and 1 ≤ bits ≤ 64"));
    }
    if tables
        .iter()
        .zip(bits)
        .any(|(t, b)| t.iter().any(|v| v & !mask(*b) != 0))
    {
        return Err(invalid("lut: a table entry does not fit its bitwidth"));
    }
    ctx.block("lut", |ctx| lut_raw(ctx, ch, idx, k, tables, bits))
}

/// Several tables read at one index in one 1-of-N batch: entries packed side by side in one
/// message when they fit in 64 bits, otherwise one OT row per table (same rounds).
pub(crate) fn lut_raw<C: Channel>(
    ctx: &mut Ctx,
    ch: &mut C,
    idx: &[u64],
    k: u32,
    tables: &[&[u64]],
    bits: &[u32],
) -> Result<Vec<Vec<u64>>> {
    if tables.len() != bits.len() || tables.is_empty() {
        return Err(invalid("lut: one bitwidth per table"));
    }
    if tables.iter().any(|t| t.len() != 1usize << k) {
        return Err(invalid("lut: every table needs 2^k entries"));
    }
    lut_rows_raw(ctx, ch, idx, k, bits, |_, j, q| tables[q][j])
}

/// As [`lut_raw`], but P0's entry `q` of row `j` for element `i` is `entry(i, j, q)`: P0 may
/// fold its own per-element data into the table (the reciprocal folds in its share of Δ), since
/// only P0 writes the messages. P1's `entry` is never called.
pub(crate) fn lut_rows_raw<C: Channel>(
    ctx: &mut Ctx,
    ch: &mut C,
    idx: &[u64],
    k: u32,
    bits: &[u32],
    entry: impl Fn(usize, usize, usize) -> u64 + Sync,
) -> Result<Vec<Vec<u64>>> {
    let lay = steps::LutLayout::new(k, bits)?;
    let (n, nn, rows) = (idx.len(), lay.entries(), lay.rows);
    if ctx.is_p0() {
        let rs: Vec<Vec<u64>> = bits.iter().map(|b| ctx.rand_u64s(n, *b)).collect();
        if ctx.is_dry_run() {
            // A dry run only counts: the n·2^k rows (tens of ms at n = 2^14, while the peer's
            // offline phase waits for this party's plan) are never read.
            ctx.kk_send_count(nn, n * rows)?;
            return Ok(rs);
        }
        // Made frame by frame and in parallel (n·2^k words: 8 MB at n = 2^14, k = 6, were
        // written on one core into fresh pages while the peer waited). kk rows are
        // (element, q) pairs; a frame starts at a kk row, so at an element when rows = 1 and
        // possibly mid-element otherwise: fill whole elements and copy out.
        let mut failed = None;
        let mut fill = |e0: usize, out: &mut [u64]| {
            if let Err(e) = steps::lut_rows(lay, idx, bits, &rs, e0, out, &entry) {
                failed.get_or_insert(e);
            }
        };
        if rows == 1 {
            ctx.kk_send_with(ch, nn, n, lay.wire_bits, &mut fill)?;
        } else {
            ctx.kk_send_with(ch, nn, n * rows, lay.wire_bits, |r0, out| {
                let (e0, e1) = (r0 / rows, (r0 + out.len() / nn).div_ceil(rows));
                let mut whole = vec![0u64; (e1 - e0) * rows * nn];
                fill(e0, &mut whole);
                let skip = (r0 - e0 * rows) * nn;
                out.copy_from_slice(&whole[skip..skip + out.len()]);
            })?;
        }
        if let Some(e) = failed {
            return Err(e);
        }
        Ok(rs)
    } else {
        let got = ctx.kk_recv(ch, nn, &steps::lut_choices(lay, idx), lay.wire_bits)?;
        steps::lut_read(lay, bits, &got)
    }
}

/// Digit decomposition of an unsigned x ∈ Z_{2^bits} into digits of d bits (least significant
/// first); digit k is shared mod 2^{min(d, bits − kd)}. One millionaires' run for all carries.
pub fn digit_decompose<C: Channel>(
    ctx: &mut Ctx,
    ch: &mut C,
    x: &[u64],
    bits: u32,
    d: u32,
) -> Result<Vec<(Vec<u64>, u32)>> {
    check_bits(bits)?;
    if d == 0 || d > bits {
        return Err(invalid("digit size out of range"));
    }
    ctx.block("digit_dec", |ctx| {
        let widths = steps::digit_carry_widths(bits, d);
        let carries = if widths.is_empty() {
            Vec::new()
        } else {
            carries_raw(ctx, ch, x, &widths)?
        };
        let ca = b2a_raw(ctx, ch, &carries.concat(), d)?;
        steps::digit_output(x, &ca, bits, d)
    })
}
