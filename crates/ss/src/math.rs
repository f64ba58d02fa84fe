//! Math functions on shares: OPAF's exp, exp on negative inputs, sigmoid and tanh (as DESIGN.md
//! §5 reconstructs them) and SIRNN's digit-lookup exp, sigmoid and tanh as baselines.
use crate::blocks::{self, RecParams};
use crate::ctx::Ctx;
use crate::error::{invalid, Result};
use crate::ring::{mask, msb, to_signed, Fixed};
use secinfer_net::Channel;

/// Fractional bits of each party's local factor in OPAF's exp (the product has 2·F ≤ 62).
pub const LOCAL_FRAC: u32 = 31;
/// Largest integer-part width (l − s) the local-factor method takes directly (L = 2^(l−s) ≤ 16).
pub const MAX_DIRECT_INT_BITS: u32 = 4;
/// Whether sigmoid/tanh round their output with an exact truncation (a millionaires' run) or the
/// cheap one (output ⌊·⌋ or ⌊·⌋ + 1 ULP). Exact: it pays for itself by allowing a reciprocal
/// table half the size at the same max ULP.
pub const FINAL_EXACT: bool = true;
/// Bits of the dropped part whose carry the final rounding computes (two millionaires' digits):
/// round-to-nearest within 0.5 + 2^−10 output units instead of 0.5 (two digits, one AND level
/// instead of four digits and two levels for an 18-bit carry; 5 bits would break SIRNN's 1.0).
pub const ROUND_CARRY_BITS: u32 = 2 * blocks::MILL_DIGIT;
/// OPAF sigmoid's final rounding reads 4 carry bits: one 4-bit millionaires' leaf and no AND
/// (10 bits took three leaves and two ANDs: 12 COTs more per element and two rounds) for
/// 2^−4 instead of 2^−10 of an output ULP, shifted upward (see `round_down_msb0_with`'s
/// `lift`). Exhaustive 16/12 → 18/16 max ULP 2.55 either way. SIRNN's baseline keeps
/// [`ROUND_CARRY_BITS`].
pub const OPAF_ROUND_CARRY_BITS: u32 = 4;
/// How far below the output's ULP OPAF's sigmoid puts its nudge (a sign extension by
/// s_out + this − s_in bits when the input is coarser). 0 since session 6 (was 2): a nudge of
/// one output ULP moves σ by at most σ'·ULP, a quarter ULP at x = 0, where the reciprocal's
/// table error is smallest (its segments at d ≈ 2 err by 2/8 ULP), and under 0.008 ULP where
/// that error peaks (segment 0, |x| ≈ 4.85), so the worst-case sum stays 2.95. At 20/16 → 18/16
/// this drops the sign extension (the wrap's AND, a B2A, two ring bits): 942.6 → 918.3 B/elem,
/// one round fewer.
pub const OPAF_NUDGE_BELOW_OUT: u32 = 0;

/// Index bits of the reciprocal's table for an output scale: the segment error h²/8 with
/// h = 2^−k stays at or below half an output ULP (k ≥ (s_out − 2)/2), between 4 and 8.
pub fn rec_index_bits(out_scale: u32) -> u32 {
    (out_scale.saturating_sub(2)).div_ceil(2).clamp(4, 8)
}

/// Largest reciprocal table OPAF uses (2^7 rows): tanh's σ at scale 17 would take 2^8 rows for
/// a segment error of half its ULP; 2^7 rows make it 2 ULP of σ there (an output ULP of tanh),
/// and the table's rows are most of the online bytes and hashing.
pub const OPAF_REC_MAX_K: u32 = 7;

/// Largest reciprocal table OPAF's sigmoid uses (2^6 rows, half of [`OPAF_REC_MAX_K`]'s): at
/// s_out = 16 the segment error h²/8 is then 2 output ULP (OPAF's budget is 3; measured max
/// 2.6 at 20/16 → 18/16), and the 1-of-2^k lookup was two thirds of the sigmoid's online time
/// and bytes. Output scales ≤ 14 need no more than 2^6 rows and are unchanged. tanh keeps
/// [`OPAF_REC_MAX_K`]: its σ at scale s + 1 already spends 1 ULP of tanh on that cap, and 2^6
/// rows there gave 4.5 ULP.
pub const OPAF_SIGMOID_REC_MAX_K: u32 = 6;

/// Fractional bits OPAF's sigmoid keeps of Δ in the reciprocal, beyond the output's scale
/// (RecParams::delta_frac): the evaluation point then moves by ±2^−(s_out+4), 1/16 output ULP
/// at a slope ≤ 1, and the S·Δ1 product takes 2 correlated OTs fewer than at s_out + 6.
pub const OPAF_REC_DELTA_EXTRA: u32 = 4;
/// Fractional bits of e = exp_neg(u) beyond the reciprocal's kept Δ bits in OPAF's sigmoid:
/// the truncated product's floors (±16.5 units) must stay well below the nudge 2^−s.
pub const OPAF_EXP_EXTRA: u32 = 5;

/// Fractional bits of the reciprocal's result beyond the output in OPAF's sigmoid
/// (RecParams::product_frac): its S·Δ1 terms are truncated as they are made, [0, 15) units of
/// 2^−(s_out+8) (< 0.06 ULP), and its correlated OTs carry s_out + 9 bits instead of f' + 14.
pub const OPAF_REC_PRODUCT_EXTRA: u32 = 8;

/// Fractional bits of OPAF sigmoid's reciprocal offsets beyond the output (tanh's σ keeps 3):
/// with the other small terms of this session (the Δ drop, the truncated S·Δ1, e's error,
/// the final rounding's 4-bit carry) the worst-case sum at segment 0's tangent point was
/// 2.016 + 0.125 (offset rounded up) + 0.0625 (P0's folded S·Δ0) + 0.0625 (slope) + 0.0625
/// (Δ drop) + 0.059 (floors) + 0.5 + 0.0625 (rounding) + 0.077 (e) = 3.03 ULP; one more bit
/// (64 per element) halves the first two: 2.94.
pub const OPAF_SIGMOID_OFFSET_EXTRA: u32 = 4;

/// Index bits of OPAF sigmoid's own reciprocal table.
pub fn sigmoid_rec_index_bits(out_scale: u32) -> u32 {
    rec_index_bits(out_scale).min(OPAF_SIGMOID_REC_MAX_K)
}

/// The reciprocal's table for a result rounded to `out_scale`. OPAF (`compact`): offsets at
/// out_scale + 3 fractional bits (rounded up, with P0's folded S·Δ0 term: at most 3/16 of an
/// output ULP more error, inside OPAF's 3-ULP budget) instead of f + 2, since the 2^k-row table
/// is most of sigmoid's online bytes; `k` rows' index bits (OPAF's sigmoid and tanh differ).
/// The SIRNN baseline keeps f + 2, [`rec_index_bits`] and its ≤ 1 ULP.
fn rec_params(out_scale: u32, compact: Option<u32>) -> RecParams {
    RecParams {
        k: compact.unwrap_or_else(|| rec_index_bits(out_scale)),
        offset_frac: compact.map(|_| out_scale + 3),
        ..RecParams::default()
    }
}
/// SIRNN's digit size for the exponential's lookup tables.
pub const SIRNN_DIGIT: u32 = 8;

#[inline]
fn add(a: u64, b: u64, m: u64) -> u64 {
    a.wrapping_add(b) & m
}
#[inline]
fn sub(a: u64, b: u64, m: u64) -> u64 {
    a.wrapping_sub(b) & m
}

fn check_io(inp: Fixed, out: Fixed, out_int_bits: u32) -> Result<()> {
    if inp.bits < 2 || inp.bits > 62 || inp.scale >= inp.bits + 8 {
        return Err(invalid("input format out of range"));
    }
    if out.bits < out.scale + out_int_bits || out.bits > 62 || out.scale > 40 {
        return Err(invalid(format!(
            "output needs at least scale + {out_int_bits} bits and at most 62 bits, scale ≤ 40"
        )));
    }
    Ok(())
}

/// Rounds shares of a non-negative value (MSB known 0) at scale `from` in Z_{2^bits} to scale
/// `to` (round to nearest, exact carry), then reduces to Z_{2^out_bits}.
fn round_down_msb0<C: Channel>(
    ctx: &mut Ctx,
    ch: &mut C,
    v: &[u64],
    bits: u32,
    from: u32,
    to: u32,
    out_bits: u32,
) -> Result<Vec<u64>> {
    round_down_msb0_with(
        ctx,
        ch,
        v,
        bits,
        from,
        to,
        out_bits,
        true,
        ROUND_CARRY_BITS,
        false,
    )
}

/// As [`round_down_msb0`]; with `exact == false` the carry is dropped (one correlated OT instead
/// of a millionaires' run): the result is the rounded value or one more.
fn round_down_msb0_with<C: Channel>(
    ctx: &mut Ctx,
    ch: &mut C,
    v: &[u64],
    bits: u32,
    from: u32,
    to: u32,
    out_bits: u32,
    exact: bool,
    carry_bits: u32,
    lift: bool,
) -> Result<Vec<u64>> {
    let mo = mask(out_bits);
    if from <= to {
        let sh = to - from;
        return Ok(v.iter().map(|a| (a << sh) & mo).collect());
    }
    let t = from - to;
    let p0 = ctx.is_p0();
    // Exact: round to nearest (bias 2^(t−1), exact floor). Cheap: ⌊x/2^t⌋ or ⌊x/2^t⌋ + 1 (no
    // bias), so the truncation's error stays below one unit either way.
    // Exact: the carry comes from the top `carry_bits` of the dropped bits only, which makes
    // the result ⌊(x − ε)/2^t⌋ with 0 ≤ ε < 2^(t − carry_bits). With `lift` P0 adds
    // 2^(t − carry_bits) − 1 first, so the shift is upward instead, (−1, 2^(t − carry_bits))
    // units: a value just below a rounding threshold (a saturated sigmoid, whose reciprocal
    // table sits half an ULP below 1 at d = 1 and is rounded up) still rounds up. Either way at
    // most 2^−carry_bits of an output unit on top of round-to-nearest. (`lift`: OPAF's
    // functions; SIRNN's baseline keeps the downward shift it was measured with.)
    let cb = t.min(carry_bits);
    let bias = match (exact, lift) {
        (true, true) => (1u64 << (t - 1)) + (1u64 << (t - cb)) - 1,
        (true, false) => 1u64 << (t - 1),
        (false, _) => 0,
    };
    let b = blocks::steps::add_public(v, bias, bits, p0);
    let r = ctx.block("trunc", |ctx| {
        blocks::trunc_msb0_carry_raw(ctx, ch, &b, bits, t, exact, cb)
    })?;
    if out_bits > bits {
        return ctx.block("zext", |ctx| {
            blocks::zext_msb0_raw(ctx, ch, &r, bits, out_bits)
        });
    }
    Ok(r.into_iter().map(|a| a & mo).collect())
}

// ============================================================================ OPAF exp

/// exp_neg_direct's fixed-point budget at (l, s, fo, mult).
struct DirectParams {
    /// mult·L/2: the factors' exponent range, C = e^half.
    half: f64,
    /// ⌈log2 C⌉.
    lc: u32,
    /// P1's factor's fractional bits.
    lf: u32,
    /// X's fractional bits.
    fx: u32,
    /// P1's factor's bits (its correlated OTs).
    kb: u32,
}

fn direct_params(l: u32, s: u32, fo: u32, mult: u32) -> DirectParams {
    let big_l = ((l as f64) - (s as f64)).exp2();
    let half = mult as f64 * big_l / 2.0;
    let lc = ((half * std::f64::consts::LOG2_E).ceil() as u32).max(1);
    // P1's factor a1 < 1 at lf fractional bits: enough that a1's rounding, multiplied by
    // X ≤ C < 2^lc, stays below a quarter unit of 2^−fo, but no more than 2^−20 absolute
    // (LOCAL_FRAC at L = 16).
    let lf = (fo + lc + 1).min(LOCAL_FRAC.max(19 + lc));
    // X at fx fractional bits: as many as fit w = fo + 2 + T ≤ 64 (T = lf + fx − fo, one
    // correlated OT selects X_{m1} − R), else fo + 8 in up to 128 bits (a chosen OT of two words).
    let fx_narrow = 62u32.saturating_sub(lf).min(fo + 8);
    let fx = if fx_narrow >= fo + 2 {
        fx_narrow
    } else {
        fo + 8
    };
    // a1 ≤ e^(−mult·2^−s) (u ≤ −2^−s in both of its cases), so when lf > s its rounding stays
    // below 2^lf: lf bits, one correlated OT fewer than lf + 1.
    let kb = if lf > s { lf } else { lf + 1 };
    DirectParams {
        half,
        lc,
        lf,
        fx,
        kb,
    }
}

/// An upper bound on |e − e^(mult·x)| (absolute) for exp_neg_core's output at scale fo: the
/// truncated product's floors (kb + 1 units, one-sided in the worst case), a1's rounding times
/// C, X's rounding; the split path (l − s > 4) adds its constants' and truncation's units.
fn exp_neg_err_bound(l: u32, s: u32, fo: u32, mult: u32) -> f64 {
    let direct = |l: u32, fo: u32, mult: u32| {
        let p = direct_params(l, s, fo, mult);
        let unit = (-(fo as f64)).exp2();
        (p.kb + 1) as f64 * unit
            + 0.5 * p.half.exp() * (-(p.lf as f64)).exp2()
            + 0.5 * (-(p.fx as f64)).exp2()
    };
    if l.saturating_sub(s) <= MAX_DIRECT_INT_BITS {
        return direct(l, fo, mult);
    }
    let fe = (fo + 4).min(28);
    direct(s + MAX_DIRECT_INT_BITS, fe, 1) + (-(fe as f64)).exp2() + 2.0 * (-(fo as f64)).exp2()
}

/// OPAF's local-factor exponential for x < 0 with L = 2^(l−s) ≤ 16. Returns shares (MSB 0) of
/// e^x at scale `fo` in the ring of fo + 2 bits.
///
/// Each party reads its share g_i as a signed integer with msb m_i. With k the ring wrap of the
/// signed shares, g0 + g1 = x + k·2^l and, since x < 0, k = (1−m0)(1−m1); with the parties'
/// factors a_i = e^{g_i/2^s − (1−m_i)·L/2} ∈ [e^{−L/2}, 1], e^x = a0·a1·C^z with C = e^{L/2}
/// and z = m0 ⊕ m1 (OPAF's correction). OPAF multiplies a0·a1 (one private×private product at
/// 2·31 fractional bits, wide enough that the later ×C keeps the output's accuracy) and then
/// selects the correction by a multiplexer on z; session 5 did the same in a 51-bit ring.
///
/// Here the correction is folded into P0's operand instead (`opaf::exp_neg`, reorganised):
/// P0 knows m0, so for each value b of P1's msb it knows X_b = a0·C^(m0 ⊕ b); one correlated
/// OT on P1's m1 (correlation X_1 − X_0) leaves P1 with Y = X_{m1} − R and P0 with R. Then
/// e^x = a1·X_{m1} = a1·Y + a1·R: P1 computes a1·Y itself, and a1·R is a private×private
/// product whose correlated OTs carry ⌊R·2^j / 2^T⌋ already truncated to the output scale, so
/// each of them is fo + 2 bits wide instead of 51, and the multiplexer and the truncation that
/// followed it are gone. R and Y live mod 2^w with w = fo + 2 + T: the wrap of Y + R then
/// vanishes mod 2^(fo+2) after the shift by T.
///
/// With `mult` = 2 the same shares give e^(2x) (C = e^L): tanh's σ(2x) on x's own shares,
/// with four integer bits instead of five (no split of the input, see [`tanh_opaf`]). R and Y
/// then exceed 64 bits, and P1's choice of X_{m1} − R is a chosen 1-of-2 OT of two 64-bit
/// words instead of a correlated OT.
///
/// Error in units of 2^−fo: a1's rounding times X ≤ C (C·2^(fo − lf − 1)), X's rounding
/// (2^(fo − fx − 1)), and the kb + 1 floors of the truncated terms (kb = lf correlated OTs,
/// P1's own term; made ±(kb + 1)/2 by a bias).
fn exp_neg_direct<C: Channel>(
    ctx: &mut Ctx,
    ch: &mut C,
    x: &[u64],
    l: u32,
    s: u32,
    fo: u32,
    mult: u32,
) -> Result<Vec<u64>> {
    let n = x.len();
    let p0 = ctx.is_p0();
    // The factors' exponent range: a_i = e^{mult·(g_i/2^s − (1 − m_i)·L/2)}, C = e^{mult·L/2}.
    let DirectParams {
        half,
        lc,
        lf,
        fx,
        kb,
    } = direct_params(l, s, fo, mult);
    let r = fo + 2;
    let t = lf + fx - fo;
    let w = r + t;
    if r > 62 || lf > 62 || w + lf + 1 > 128 || fx + lc > w {
        return Err(invalid(
            "exp_neg: output scale out of range for the local-factor method",
        ));
    }
    let mw = mask128(w);
    let mr = mask(r);
    let (own_r, ys, own_b) = if p0 {
        let xs = exp_neg_offers(x, l, s, mult, half, fx, mw);
        (exp_neg_offer(ctx, ch, &xs, w)?, Vec::new(), Vec::new())
    } else {
        let (ys, own_b) = exp_neg_choose(ctx, ch, x, l, s, mult, lf, kb, w)?;
        (Vec::new(), ys, own_b)
    };
    // Shares of Σ_j a1_j·⌊R·2^j / 2^T⌋ mod 2^r: P0 correlates the truncated terms of its R,
    // P1 chooses by the kb bits of a1 (R·2^j < 2^(w + lf) ≤ 2^128).
    let kb = kb as usize;
    let (mut deltas, mut choices) = (Vec::new(), Vec::new());
    if p0 {
        deltas.reserve(n * kb);
        for rv in &own_r {
            for j in 0..kb {
                deltas.push(((rv << j) >> t) as u64 & mr);
            }
        }
    } else {
        choices.reserve(n * kb);
        for b in &own_b {
            for j in 0..kb {
                choices.push((b >> j) & 1 == 1);
            }
        }
    }
    let cross = ctx.cross_from_p0(ch, &deltas, &choices, r)?;
    // The floors lose [0, kb + 1) units; a bias centres them, unless e^x could then go
    // below zero (tiny output scales), where the error stays one-sided and the value ≥ 0.
    let floors = (kb + 1) as f64;
    let min_val = (-half).exp() * (fo as f64).exp2();
    let bias = if min_val > floors {
        (kb + 1) as u64 / 2
    } else {
        (kb + 1) as u64
    };
    Ok((0..n)
        .map(|i| {
            let sum = cross[i * kb..(i + 1) * kb]
                .iter()
                .fold(0u64, |a, v| add(a, *v, mr));
            if p0 {
                add(sum, bias, mr)
            } else {
                // a1·Y, truncated the same way (a1 < 2^(lf+1), Y < 2^w: fits u128).
                let local = ((own_b[i] as u128 * ys[i]) >> t) as u64;
                add(sum, local, mr)
            }
        })
        .collect())
}

/// 2^w − 1 as a u128 (all ones from w = 128).
fn mask128(w: u32) -> u128 {
    if w >= 128 {
        u128::MAX
    } else {
        (1u128 << w) - 1
    }
}

/// P0's two candidates X_b = e^{mult·(g0/2^s − (1−m0)·L/2) + (m0 ⊕ b)·C'} at fx bits, one
/// for each value b of P1's msb (`half` = mult·L/2).
fn exp_neg_offers(
    x: &[u64],
    l: u32,
    s: u32,
    mult: u32,
    half: f64,
    fx: u32,
    mw: u128,
) -> Vec<(u128, u128)> {
    let scale_s = (s as f64).exp2();
    let fscale = (fx as f64).exp2();
    x.iter()
        .map(|v| {
            let g = mult as f64 * (to_signed(*v, l) as f64 / scale_s);
            let m0 = msb(*v, l);
            let base = if m0 == 0 { g - half } else { g };
            let xb = |b: u8| {
                let e = if m0 ^ b == 1 { base + half } else { base };
                ((e.exp() * fscale).round() as u128) & mw
            };
            (xb(0), xb(1))
        })
        .collect()
}

/// P0's side of the OT on P1's msb: P1 gets X_{m1} − R, P0 keeps R (mod 2^w).
fn exp_neg_offer<C: Channel>(
    ctx: &mut Ctx,
    ch: &mut C,
    xs: &[(u128, u128)],
    w: u32,
) -> Result<Vec<u128>> {
    let n = xs.len();
    let mw = mask128(w);
    if w <= 64 {
        let deltas: Vec<u64> = xs
            .iter()
            .map(|(a, b)| (b.wrapping_sub(*a) & mw) as u64)
            .collect();
        let q = ctx.cot_send(ch, &deltas, w)?;
        // P1 got q + m1·(X_1 − X_0) = X_{m1} − R with R = X_0 − q.
        return Ok(xs
            .iter()
            .zip(&q)
            .map(|((a, _), q)| a.wrapping_sub(*q as u128) & mw)
            .collect());
    }
    // A chosen 1-of-2 OT of X_b − R (two 64-bit words per element) for a random R.
    let lo = ctx.rand_u64s(n, 64);
    let hi = ctx.rand_u64s(n, w - 64);
    let own_r: Vec<u128> = (0..n)
        .map(|i| ((hi[i] as u128) << 64 | lo[i] as u128) & mw)
        .collect();
    let mut msgs = Vec::with_capacity(4 * n);
    for part in 0..2 {
        for i in 0..n {
            for xb in [xs[i].0, xs[i].1] {
                let m = xb.wrapping_sub(own_r[i]) & mw;
                msgs.push(if part == 0 {
                    m as u64
                } else {
                    (m >> 64) as u64
                });
            }
        }
    }
    ctx.kk_send(ch, 2, &msgs, 64)?;
    Ok(own_r)
}

/// P1's side: Y = X_{m1} − R by its msb m1, and its own factor a1 = e^{mult·(g1/2^s −
/// (1−m1)·L/2)} at lf bits (below 2^kb).
#[allow(clippy::too_many_arguments)]
fn exp_neg_choose<C: Channel>(
    ctx: &mut Ctx,
    ch: &mut C,
    x: &[u64],
    l: u32,
    s: u32,
    mult: u32,
    lf: u32,
    kb: u32,
    w: u32,
) -> Result<(Vec<u128>, Vec<u64>)> {
    let n = x.len();
    let mw = mask128(w);
    let m1: Vec<u8> = x.iter().map(|v| msb(*v, l)).collect();
    let ys: Vec<u128> = if w <= 64 {
        let m1s: Vec<bool> = m1.iter().map(|b| *b == 1).collect();
        ctx.cot_recv(ch, &m1s, w)?
            .into_iter()
            .map(|v| v as u128)
            .collect()
    } else {
        let mut choices = m1.clone();
        choices.extend_from_slice(&m1);
        let got = ctx.kk_recv(ch, 2, &choices, 64)?;
        (0..n)
            .map(|i| ((got[n + i] as u128) << 64 | got[i] as u128) & mw)
            .collect()
    };
    let scale_s = (s as f64).exp2();
    let big_l = ((l as f64) - (s as f64)).exp2();
    let fscale = (lf as f64).exp2();
    // (the min is a no-op by kb's bound; keeps P1's local term and its choice bits the same a1)
    let kmax = mask(kb);
    let own_b = x
        .iter()
        .map(|v| {
            let g = to_signed(*v, l) as f64 / scale_s;
            let shift = if msb(*v, l) == 0 { big_l / 2.0 } else { 0.0 };
            (((mult as f64 * (g - shift)).exp() * fscale).round() as u64).min(kmax)
        })
        .collect();
    Ok((ys, own_b))
}

/// OPAF's local step (DESIGN.md §5): each party turns its own share X_i into the factor
/// e^{X_i/2^s}, pre-scaled by e^{−L/2} when its top bit is clear so it stays in range, fixed at
/// LOCAL_FRAC fractional bits; one private×private product gives shares of a0·a1 at scale
/// 2·LOCAL_FRAC.
fn opaf_local_product<C: Channel>(
    ctx: &mut Ctx,
    ch: &mut C,
    x: &[u64],
    mine_m: &[u8],
    l: u32,
    s: u32,
    big_l: f64,
) -> Result<Vec<u64>> {
    let a = opaf_local_factors(x, mine_m, l, s, big_l);
    ctx.block("mul_private", |ctx| {
        blocks::mul_private_raw(ctx, ch, &a, LOCAL_FRAC + 1, 64)
    })
}

/// Each party's local factor e^{X_i/2^s − (1 − m_i)·L/2} at LOCAL_FRAC fractional bits.
fn opaf_local_factors(x: &[u64], mine_m: &[u8], l: u32, s: u32, big_l: f64) -> Vec<u64> {
    let fscale = (LOCAL_FRAC as f64).exp2();
    x.iter()
        .zip(mine_m)
        .map(|(v, m)| {
            let g = to_signed(*v, l) as f64 / (s as f64).exp2();
            let shift = if *m == 0 { big_l / 2.0 } else { 0.0 };
            ((g - shift).exp() * fscale).round() as u64
        })
        .collect()
}

/// The correction constant C = e^{L/2} and its fixed-point budget: (C, lc = ⌈log2 C⌉, fc, f1).
/// The product p' (scale f1) times (C − 1) (scale fc, < 2^lc) stays below 2^62; the truncation
/// error 2^(lc − f1) and the constant's error 2^(−fc − 1 − lc) are balanced.
fn correction_scales(big_l: f64) -> (f64, u32, u32, u32) {
    let c = (big_l / 2.0).exp();
    let lc = (c.log2().ceil() as u32).max(1);
    let fc = (60u32.saturating_sub(3 * lc) / 2).max(1);
    (c, lc, fc, 61 - lc - fc)
}

/// e^x for x < 0 given at (l, s), any integer width. With more than 4 integer bits, y = −x is
/// split at p = s + 3 bits (one carry): the low part gives z = −y_lo − 2^−s ∈ [−8, 0), done by
/// the local-factor method; the high part indexes SIRNN's lookup table of e^{−8·y_hi}·e^{2^−s};
/// one product joins them. (At most two high bits take two multiplexers instead.)
/// Shares (MSB 0) at scale `fo`, and their ring.
fn exp_neg_core<C: Channel>(
    ctx: &mut Ctx,
    ch: &mut C,
    x: &[u64],
    l: u32,
    s: u32,
    fo: u32,
    mult: u32,
) -> Result<(Vec<u64>, u32)> {
    let int_bits = l.saturating_sub(s);
    if int_bits <= MAX_DIRECT_INT_BITS {
        let e = ctx.block("mul_private", |ctx| {
            exp_neg_direct(ctx, ch, x, l, s, fo, mult)
        })?;
        return Ok((e, fo + 2));
    }
    if mult != 1 {
        return Err(invalid(
            "exp_neg: e^(2x) only for inputs with at most 4 integer bits",
        ));
    }
    let p = s + MAX_DIRECT_INT_BITS - 1;
    let hi_bits = l - p;
    if hi_bits > 8 {
        return Err(invalid(
            "exp_neg: at most 11 integer bits (a 2^8-entry table for the high part)",
        ));
    }
    let n = x.len();
    let p0 = ctx.is_p0();
    let ml = mask(l);
    let y: Vec<u64> = x.iter().map(|a| a.wrapping_neg() & ml).collect();
    let c = ctx.block("wrap", |ctx| blocks::carry_raw(ctx, ch, &y, p))?;
    let ca = ctx.block("b2a", |ctx| blocks::b2a_raw(ctx, ch, &c, p + 1))?;
    let mp1 = mask(p + 1);
    // z = −(y0_lo + y1_lo − 2^p·c) − 2^−s in Z_{2^(p+1)}, scale s: strictly negative, |z| ≤ 8.
    let z: Vec<u64> = (0..n)
        .map(|i| {
            let lo = sub(y[i] & mask(p), ca[i] << p, mp1);
            let v = lo.wrapping_neg() & mp1;
            if p0 {
                sub(v, 1, mp1)
            } else {
                v
            }
        })
        .collect();
    let fe = (fo + 4).min(28);
    let re = fe + 2;
    let nudge = (-(s as f64)).exp2().exp();
    if hi_bits <= 2 {
        // At most two high bits (5 integer bits, e.g. tanh's 2x): h = y >> p is 0, 1 or 2 (2 only
        // for y = 2^(l−1) exactly, where z = −2^−s), so e^x = e^z·e^{2^−s}·(1, e^−8 or e^−16):
        // two multiplexers on the bits of h replace SIRNN's table and the shared product.
        // Bit p of y is each party's own bit p XOR its share of the carry c just computed; the
        // carry into bit p + 1 is b0·b1 ⊕ c·(b0 ⊕ b1) with b_i the parties' bits p (one AND round).
        let bp: Vec<u8> = y.iter().map(|a| ((a >> p) & 1) as u8).collect();
        let h1: Vec<u8> = (0..n).map(|i| bp[i] ^ c[i]).collect();
        let h2: Vec<u8> = if hi_bits == 2 {
            let mut xs = c.clone();
            xs.extend(bp.iter().map(|b| if p0 { *b } else { 0 }));
            let mut ys = bp.clone();
            ys.extend(bp.iter().map(|b| if p0 { 0 } else { *b }));
            let zz = ctx.block("and", |ctx| blocks::and_raw(ctx, ch, &xs, &ys))?;
            (0..n)
                .map(|i| ((y[i] >> (p + 1)) & 1) as u8 ^ zz[i] ^ zz[n + i])
                .collect()
        } else {
            vec![0; n]
        };
        let elo = ctx.block("mul_private", |ctx| {
            exp_neg_direct(ctx, ch, &z, p + 1, s, fe, 1)
        })?;
        // The constants below need room above e_lo: widen its ring (MSB 0: one COT).
        let r = (2 * fe + 5).min(62);
        let elo = ctx.block("zext", |ctx| {
            blocks::zext_msb0_raw(ctx, ch, &elo, fe + 2, r)
        })?;
        let mr = mask(r);
        // Constants at g fractional bits: e_lo·K ≤ 2^(fe + g)·(1 + ε) stays below 2^(r − 2).
        let g = r - fe - 3;
        let step = ((1u64 << p) as f64 / (s as f64).exp2()).exp().recip(); // e^−8
        let scale_g = (g as f64).exp2();
        let k1 = (nudge * scale_g).round() as u64;
        let k2 = (nudge * (1.0 - step) * scale_g).round() as u64;
        let k3 = (nudge * (1.0 - step * step) * scale_g).round() as u64;
        let mut bitsel = h1;
        bitsel.extend_from_slice(&h2);
        let mut vals: Vec<u64> = elo.iter().map(|a| a.wrapping_mul(k2) & mr).collect();
        vals.extend(elo.iter().map(|a| a.wrapping_mul(k3) & mr));
        let sel = ctx.block("mux", |ctx| blocks::mux_raw(ctx, ch, &bitsel, &vals, r))?;
        let v: Vec<u64> = (0..n)
            .map(|i| {
                elo[i]
                    .wrapping_mul(k1)
                    .wrapping_sub(sel[i])
                    .wrapping_sub(sel[n + i])
                    & mr
            })
            .collect();
        let t = ctx.block("trunc", |ctx| {
            blocks::trunc_msb0_raw(ctx, ch, &v, r, fe + g - fo, false)
        })?;
        return Ok((t, r));
    }
    let table: Vec<u64> = (0..(1u64 << hi_bits))
        .map(|j| {
            let v = (-((j << p) as f64) / (s as f64).exp2()).exp() * nudge;
            (v * (fe as f64).exp2()).round() as u64
        })
        .collect();
    let hi: Vec<u64> = (0..n)
        .map(|i| add(y[i] >> p, ca[i], mask(hi_bits)))
        .collect();
    let th = ctx.block("lut", |ctx| {
        blocks::lut_raw(ctx, ch, &hi, hi_bits, &[&table], &[re])
    })?;
    let elo = ctx.block("mul_private", |ctx| {
        exp_neg_direct(ctx, ch, &z, p + 1, s, fe, 1)
    })?;
    let prod = ctx.block("mul", |ctx| {
        blocks::mul_nonuniform_msb0_raw(ctx, ch, &elo, re, &th[0], re, 2 * re)
    })?;
    // prod at scale 2fe in Z_{2^(2re)} → scale fo, in the same ring.
    let t = ctx.block("trunc", |ctx| {
        blocks::trunc_msb0_raw(ctx, ch, &prod, 2 * re, 2 * fe - fo, false)
    })?;
    Ok((t, 2 * re))
}

/// OPAF exp on negative inputs: x < 0 at `inp`, e^x at `out` (out.bits ≥ out.scale + 2).
pub fn exp_neg_opaf<C: Channel>(
    ctx: &mut Ctx,
    ch: &mut C,
    x: &[u64],
    inp: Fixed,
    out: Fixed,
) -> Result<Vec<u64>> {
    check_io(inp, out, 2)?;
    ctx.block("exp_neg", |ctx| {
        // e at 6 bits below the output (the product's floors: ±16.5 units there, 0.26 ULP),
        // rounded with the carry of the dropped bits' top OPAF_ROUND_CARRY_BITS (one leaf).
        // At least so many bits that e^(−L/2) exceeds the floors' range twice over: below
        // that exp_neg_direct keeps the floors one-sided (0.45 ULP instead of ±0.23 at s ≤ 10).
        let ib = inp.bits.saturating_sub(inp.scale).min(MAX_DIRECT_INT_BITS);
        let floors = (LOCAL_FRAC + 2) as f64;
        let fo_min = (2.0 * floors).log2() + (ib as f64 - 1.0).exp2() * std::f64::consts::LOG2_E;
        let fo = (out.scale + 6).max(fo_min.ceil() as u32);
        let (e, r) = exp_neg_core(ctx, ch, x, inp.bits, inp.scale, fo, 1)?;
        round_down_msb0_with(
            ctx,
            ch,
            &e,
            r,
            fo,
            out.scale,
            out.bits,
            true,
            OPAF_ROUND_CARRY_BITS,
            true,
        )
    })
}

/// OPAF exp for any input in the ring with l − s ≤ 4 (|x| < 8): msb(x) and the parties' own
/// msbs select the correction e^{0, L/2, L} by two multiplexers. out.bits must hold e^{L/2}.
pub fn exp_opaf<C: Channel>(
    ctx: &mut Ctx,
    ch: &mut C,
    x: &[u64],
    inp: Fixed,
    out: Fixed,
) -> Result<Vec<u64>> {
    let (l, s) = (inp.bits, inp.scale);
    if l.saturating_sub(s) > MAX_DIRECT_INT_BITS {
        return Err(invalid("exp_opaf takes at most 4 integer bits (|x| < 8)"));
    }
    let big_l = ((l as f64) - (s as f64)).exp2();
    let lc_out = ((big_l / 2.0).exp().log2().ceil() as u32) + 2;
    check_io(inp, out, lc_out)?;
    ctx.block("exp", |ctx| {
        let n = x.len();
        let m = ctx.block("msb", |ctx| blocks::msb_raw(ctx, ch, x, l))?;
        let mine_m: Vec<u8> = x.iter().map(|a| msb(*a, l)).collect();
        let p0 = ctx.is_p0();
        // w = ¬z ∧ ¬m with z = m0 ⊕ m1 (shares: own msb).
        let nz: Vec<u8> = mine_m.iter().map(|b| if p0 { b ^ 1 } else { *b }).collect();
        let nm: Vec<u8> = m.iter().map(|b| if p0 { b ^ 1 } else { *b }).collect();
        let w = ctx.block("and", |ctx| blocks::and_raw(ctx, ch, &nz, &nm))?;
        let p = opaf_local_product(ctx, ch, x, &mine_m, l, s, big_l)?;
        // Correction C^(z + 2w), C = e^{L/2}, in two multiplexer stages so each multiplies by
        // at most C (the constants keep enough fractional bits): stage 1 by C when z ∨ w,
        // stage 2 by C again when w.
        let (c, lc, fc, f1) = correction_scales(big_l);
        let pt = ctx.block("trunc", |ctx| {
            blocks::trunc_msb0_raw(ctx, ch, &p, 64, 62 - f1, false)
        })?;
        let c1 = ((c - 1.0) * (fc as f64).exp2()).round() as u64;
        let zw: Vec<u8> = (0..n).map(|i| mine_m[i] ^ w[i]).collect(); // z ⊕ w = z ∨ w (exclusive)
        let vals: Vec<u64> = pt.iter().map(|v| v.wrapping_mul(c1)).collect();
        let sel = ctx.block("mux", |ctx| blocks::mux_raw(ctx, ch, &zw, &vals, 64))?;
        let v1: Vec<u64> = (0..n).map(|i| (pt[i] << fc).wrapping_add(sel[i])).collect();
        // v1 ≤ e^{L/2} at scale f1 + fc; stage 2 at scale g with g + fc2 + lc ≤ 61.
        let fc2 = (60 - lc) / 2;
        let g = 61 - lc - fc2;
        let v1 = ctx.block("trunc", |ctx| {
            blocks::trunc_msb0_raw(ctx, ch, &v1, 64, f1 + fc - g, false)
        })?;
        let c2 = ((c - 1.0) * (fc2 as f64).exp2()).round() as u64;
        let vals2: Vec<u64> = v1.iter().map(|v| v.wrapping_mul(c2)).collect();
        let sel2 = ctx.block("mux", |ctx| blocks::mux_raw(ctx, ch, &w, &vals2, 64))?;
        let v: Vec<u64> = (0..n)
            .map(|i| (v1[i] << fc2).wrapping_add(sel2[i]))
            .collect();
        let (f1, fc) = (g, fc2);
        round_down_msb0(ctx, ch, &v, 64, f1 + fc, out.scale, out.bits)
    })
}

/// Scale at which the sigmoid pipeline carries e and 1 + e.
/// Shares of 1 + e in the ring of `rb` bits at scale `f` (party 0 adds the public 1): the
/// reciprocal's input in both sigmoids.
fn one_plus(e: &[u64], p0: bool, f: u32, rb: u32) -> Vec<u64> {
    blocks::steps::add_public(e, 1u64 << f, rb, p0)
}

fn sigmoid_inner_scale(in_scale: u32, out_scale: u32) -> u32 {
    // at least the reciprocal's index bits plus four bits of Δ
    (out_scale + 5)
        .max(in_scale + 4)
        .max(RecParams::default().k + 4)
}

/// OPAF sigmoid: m = msb(x); one multiplexer gives u = x (x < 0) or −x − 2^−s (x ≥ 0), strictly
/// negative; e = exp_neg(u); r = 1/(1 + e) on (1, 2) with no range search; σ = r + m·(1 − 2r).
pub fn sigmoid_opaf<C: Channel>(
    ctx: &mut Ctx,
    ch: &mut C,
    x: &[u64],
    inp: Fixed,
    out: Fixed,
) -> Result<Vec<u64>> {
    check_io(inp, out, 2)?;
    ctx.block("sigmoid", |ctx| {
        let k = sigmoid_rec_index_bits(out.scale);
        sigmoid_opaf_inner(ctx, ch, x, inp, out, k, 1, OPAF_SIGMOID_OFFSET_EXTRA)
    })
}

/// OPAF's sigmoid as tanh's inner σ (at scale s_out + 1): the larger reciprocal table. `inp`
/// reads tanh's x as 2x (one scale lower). When x itself has at most 4 integer bits, σ(2x)
/// runs on x's own format with e^(2u) in the local-factor exponential (`mult` = 2): 2x's five
/// integer bits would otherwise split the exponential's input (a 22-bit carry, a zero
/// extension, an AND and two multiplexers, ≈ 30 more COTs per element).
fn sigmoid_opaf_for_tanh<C: Channel>(
    ctx: &mut Ctx,
    ch: &mut C,
    x: &[u64],
    inp: Fixed,
    out: Fixed,
) -> Result<Vec<u64>> {
    let k = rec_index_bits(out.scale).min(OPAF_REC_MAX_K);
    let own = Fixed::new(inp.bits, inp.scale + 1)?;
    if own.bits.saturating_sub(own.scale) <= MAX_DIRECT_INT_BITS {
        sigmoid_opaf_inner(ctx, ch, x, own, out, k, 2, 3)
    } else {
        sigmoid_opaf_inner(ctx, ch, x, inp, out, k, 1, 3)
    }
}

/// OPAF's sigmoid with a 2^`rec_k`-row reciprocal table: σ(mult·x) for mult ∈ {1, 2}.
fn sigmoid_opaf_inner<C: Channel>(
    ctx: &mut Ctx,
    ch: &mut C,
    x: &[u64],
    inp: Fixed,
    out: Fixed,
    rec_k: u32,
    mult: u32,
    offset_extra: u32,
) -> Result<Vec<u64>> {
    let (l0, s0) = (inp.bits, inp.scale);
    let p0 = ctx.is_p0();
    // The nudge is one ULP of the input; when the output is finer than the input, first carry
    // j more fractional bits so the nudge (times mult) stays at or below the output's ULP
    // (OPAF_NUDGE_BELOW_OUT). The sign-extension to l + j bits shares the msb's millionaires'
    // run: with y = x + 2^(l−1),
    // msb(x) = ¬msb(y) and x = y − 2^l·wrap(y) − 2^(l−1), and msb and wrap of y come from one
    // carry.
    let j = (out.scale + OPAF_NUDGE_BELOW_OUT + mult.ilog2())
        .saturating_sub(s0)
        .min(62u32.saturating_sub(l0));
    let (x, m, l, s) = if j == 0 {
        let m = ctx.block("msb", |ctx| blocks::msb_raw(ctx, ch, x, l0))?;
        (x.to_vec(), m, l0, s0)
    } else {
        let l = l0 + j;
        let half = 1u64 << (l0 - 1);
        let y = blocks::steps::add_public(x, half, l0, p0);
        let (my, wy) = blocks::msb_and_wrap(ctx, ch, &y, l0)?;
        let m: Vec<u8> = my.iter().map(|b| if p0 { b ^ 1 } else { *b }).collect();
        let wa = ctx.block("b2a", |ctx| blocks::b2a_raw(ctx, ch, &wy, l))?;
        let ml = mask(l);
        let xe: Vec<u64> = y
            .iter()
            .zip(&wa)
            .map(|(a, w)| {
                let v = sub(*a, w << l0, ml);
                let v = if p0 { sub(v, half, ml) } else { v };
                (v << j) & ml
            })
            .collect();
        (xe, m, l, s0 + j)
    };
    let x = &x[..];
    let ml = mask(l);
    // u = (−x − 1) + m·(2x + 1)
    let two_x1: Vec<u64> = x
        .iter()
        .map(|a| {
            if p0 {
                add(a << 1, 1, ml)
            } else {
                (a << 1) & ml
            }
        })
        .collect();
    let sel = ctx.block("mux", |ctx| blocks::mux_raw(ctx, ch, &m, &two_x1, l))?;
    let u: Vec<u64> = x
        .iter()
        .zip(&sel)
        .map(|(a, s)| {
            let neg = if p0 {
                sub(a.wrapping_neg(), 1, ml)
            } else {
                a.wrapping_neg() & ml
            };
            add(neg, *s, ml)
        })
        .collect();
    // e comes OPAF_EXP_EXTRA bits below the reciprocal's Δ (OPAF_REC_DELTA_EXTRA bits below
    // the output), so that its error stays well below the nudge.
    let f =
        sigmoid_inner_scale(s, out.scale).max(out.scale + OPAF_REC_DELTA_EXTRA + OPAF_EXP_EXTRA);
    let (e, _) = ctx.block("exp_neg", |ctx| exp_neg_core(ctx, ch, &u, l, s, f, mult))?;
    let rb = f + 2;
    let d = one_plus(&e, p0, f, rb);
    let err = exp_neg_err_bound(l, s, f, mult);
    let mut rp = rec_params(out.scale, Some(rec_k));
    rp.offset_frac = Some(out.scale + offset_extra);
    // Δ keeps the fewest bits (from s_out + OPAF_REC_DELTA_EXTRA up) whose dropped part's
    // shift, < 2^(1 − fd), still keeps 1 + e below 2 in the worst case: u ≤ −2^−s, so
    // e ≤ e^(−mult·2^−s) plus its error (RecParams::delta_frac's guarantee). Sigmoid at 20/16:
    // fd = 20; tanh's σ(2x) (one-sided floors, C = e^16): 22.
    let slack = 1.0 - (-(mult as f64) * (-(s as f64)).exp2()).exp() - err;
    if let Some(fd) =
        (out.scale + OPAF_REC_DELTA_EXTRA..f).find(|fd| (1.0 - *fd as f64).exp2() < slack)
    {
        rp.delta_frac = Some(fd);
    }
    // u ≥ −2^(l−s−1) − 2^−s, so d − 1 ≥ e^u minus e's error: the approximate carry may read
    // only the top bits of Δ that this bound allows (RecParams::carry_bits).
    let e_min = (mult as f64 * (-((l - s - 1) as f64).exp2() - (-(s as f64)).exp2())).exp() - err;
    if e_min > 0.0 {
        rp.carry_bits = Some(blocks::rec_carry_bits(rec_k, -e_min.log2()));
    }
    // The result only feeds the final rounding: OPAF_REC_PRODUCT_EXTRA bits below the output
    // are enough (its floors cost [0, t + 1) units there), and 1/d < 1 when d ≥ 1 + 2^−12.
    rp.product_frac = Some(out.scale + OPAF_REC_PRODUCT_EXTRA);
    rp.below_one = e_min >= (-12f64).exp2();
    let (w, rw, fw) = ctx.block("rec", |ctx| blocks::reciprocal_raw(ctx, ch, &d, rb, f, rp))?;
    let r = round_down_msb0_with(
        ctx,
        ch,
        &w,
        rw,
        fw,
        out.scale,
        out.bits,
        FINAL_EXACT,
        OPAF_ROUND_CARRY_BITS,
        true,
    )?;
    // σ = r + m·(1 − 2r)
    let mo = mask(out.bits);
    let one = 1u64 << out.scale;
    let v: Vec<u64> = r
        .iter()
        .map(|a| {
            if p0 {
                sub(one, a << 1, mo)
            } else {
                (a << 1).wrapping_neg() & mo
            }
        })
        .collect();
    let sel = ctx.block("mux", |ctx| blocks::mux_raw(ctx, ch, &m, &v, out.bits))?;
    Ok(r.iter().zip(&sel).map(|(a, b)| add(*a, *b, mo)).collect())
}

/// A sigmoid protocol on raw shares: (ctx, channel, x, input format, output format).
type SigmoidProtocol<C> = fn(&mut Ctx, &mut C, &[u64], Fixed, Fixed) -> Result<Vec<u64>>;

/// tanh = 2·sigmoid(2x) − 1 on a given sigmoid protocol: 2x at scale s is x read at scale
/// s − 1, and 2σ at scale s_out is σ at scale s_out + 1, so one sigmoid and a local subtraction.
fn tanh_via_sigmoid<C: Channel>(
    ctx: &mut Ctx,
    ch: &mut C,
    x: &[u64],
    inp: Fixed,
    out: Fixed,
    sigmoid: SigmoidProtocol<C>,
) -> Result<Vec<u64>> {
    check_io(inp, out, 2)?;
    if inp.scale == 0 {
        return Err(invalid("tanh needs input scale ≥ 1"));
    }
    ctx.block("tanh", |ctx| {
        let si = Fixed::new(inp.bits, inp.scale - 1)?;
        let so = Fixed::new(out.bits.max(out.scale + 3), out.scale + 1)?;
        let sig = sigmoid(ctx, ch, x, si, so)?;
        let p0 = ctx.is_p0();
        let mo = mask(out.bits);
        Ok(sig
            .iter()
            .map(|a| {
                if p0 {
                    sub(*a, 1u64 << out.scale, mo)
                } else {
                    a & mo
                }
            })
            .collect())
    })
}

/// OPAF tanh = 2·sigmoid(2x) − 1 on OPAF's sigmoid.
pub fn tanh_opaf<C: Channel>(
    ctx: &mut Ctx,
    ch: &mut C,
    x: &[u64],
    inp: Fixed,
    out: Fixed,
) -> Result<Vec<u64>> {
    tanh_via_sigmoid(ctx, ch, x, inp, out, sigmoid_opaf_for_tanh)
}

// ============================================================================ SIRNN baselines

/// Several lookup tables (one per digit) in one 1-of-N OT batch: N = 2^max width, rows of
/// narrower digits padded (never chosen).
fn lut_digits<C: Channel>(
    ctx: &mut Ctx,
    ch: &mut C,
    digits: &[(Vec<u64>, u32)],
    tables: &[Vec<u64>],
    bits: u32,
) -> Result<Vec<Vec<u64>>> {
    let kmax = digits.iter().map(|d| d.1).max().unwrap_or(1).max(1);
    let nn = 1usize << kmax;
    let n = digits.first().map(|d| d.0.len()).unwrap_or(0);
    let q = digits.len();
    let mb = mask(bits);
    ctx.block("lut", |ctx| {
        if ctx.is_p0() {
            let mut shares = Vec::with_capacity(q);
            // Written row by row rather than zeroed first (tens of MB at n = 2^14): each row
            // is its 2^w entries, then zeros up to nn for a narrower digit.
            let mut msgs = Vec::with_capacity(q * n * nn);
            for (k, (dv, w)) in digits.iter().enumerate() {
                let r = ctx.rand_u64s(n, bits);
                let wm = mask(*w);
                for i in 0..n {
                    let i0 = dv[i] & wm;
                    msgs.extend((0..(1usize << w)).map(|t| {
                        let j = ((t as u64 + i0) & wm) as usize;
                        sub(tables[k][j], r[i], mb)
                    }));
                    msgs.resize((k * n + i + 1) * nn, 0);
                }
                shares.push(r);
            }
            ctx.kk_send(ch, nn, &msgs, bits)?;
            Ok(shares)
        } else {
            let mut choices = Vec::with_capacity(q * n);
            for (dv, w) in digits {
                choices.extend(dv.iter().map(|a| (a & mask(*w)) as u8));
            }
            let got = ctx.kk_recv(ch, nn, &choices, bits)?;
            Ok(got.chunks(n.max(1)).map(|c| c.to_vec()).take(q).collect())
        }
    })
}

/// SIRNN exp for x ≤ 0: digits of −x (8 bits each) index tables of e^{−digit·2^{8k}/2^s}, and
/// the per-digit factors are multiplied in a tree (non-uniform products + truncations).
/// Shares of e^x at scale `ft` in Z_{2^(ft+2)}.
fn exp_neg_sirnn_core<C: Channel>(
    ctx: &mut Ctx,
    ch: &mut C,
    x: &[u64],
    l: u32,
    s: u32,
    ft: u32,
) -> Result<Vec<u64>> {
    let ml = mask(l);
    let y: Vec<u64> = x.iter().map(|a| a.wrapping_neg() & ml).collect();
    let digits = blocks::digit_decompose(ctx, ch, &y, l, SIRNN_DIGIT.min(l))?;
    let rt = ft + 2;
    let tables: Vec<Vec<u64>> = digits
        .iter()
        .enumerate()
        .map(|(k, (_, w))| {
            (0..(1u64 << w))
                .map(|j| {
                    let xr = -((j << (SIRNN_DIGIT * k as u32)) as f64) / (s as f64).exp2();
                    (xr.exp() * (ft as f64).exp2()).round() as u64
                })
                .collect()
        })
        .collect();
    let mut factors = lut_digits(ctx, ch, &digits, &tables, rt)?;
    while factors.len() > 1 {
        let pairs = factors.len() / 2;
        let n = factors[0].len();
        let mut xa = Vec::with_capacity(pairs * n);
        let mut ya = Vec::with_capacity(pairs * n);
        for p in 0..pairs {
            xa.extend_from_slice(&factors[2 * p]);
            ya.extend_from_slice(&factors[2 * p + 1]);
        }
        let prod = ctx.block("mul", |ctx| {
            blocks::mul_nonuniform_msb0_raw(ctx, ch, &xa, rt, &ya, rt, 2 * rt)
        })?;
        let tr = ctx.block("trunc", |ctx| {
            blocks::trunc_msb0_raw(ctx, ch, &prod, 2 * rt, ft, false)
        })?;
        let mut next: Vec<Vec<u64>> = tr
            .chunks(n.max(1))
            .map(|c| c.iter().map(|a| a & mask(rt)).collect())
            .collect();
        next.truncate(pairs);
        if factors.len() % 2 == 1 {
            if let Some(last) = factors.pop() {
                next.push(last);
            }
        }
        factors = next;
    }
    Ok(factors.pop().unwrap_or_default())
}

/// SIRNN's exponential for x ≤ 0 (digit lookup tables).
pub fn exp_neg_sirnn<C: Channel>(
    ctx: &mut Ctx,
    ch: &mut C,
    x: &[u64],
    inp: Fixed,
    out: Fixed,
) -> Result<Vec<u64>> {
    check_io(inp, out, 2)?;
    ctx.block("exp_neg", |ctx| {
        let ft = out.scale + 4;
        let e = exp_neg_sirnn_core(ctx, ch, x, inp.bits, inp.scale, ft)?;
        round_down_msb0(ctx, ch, &e, ft + 2, ft, out.scale, out.bits)
    })
}

/// SIRNN sigmoid: m = msb(x); −|x| by a multiplexer; e = exp(−|x|) by digit tables;
/// r = 1/(1 + e); p = e·r; σ = m ? p : r by a second multiplexer.
pub fn sigmoid_sirnn<C: Channel>(
    ctx: &mut Ctx,
    ch: &mut C,
    x: &[u64],
    inp: Fixed,
    out: Fixed,
) -> Result<Vec<u64>> {
    check_io(inp, out, 2)?;
    ctx.block("sigmoid", |ctx| sigmoid_sirnn_inner(ctx, ch, x, inp, out))
}

fn sigmoid_sirnn_inner<C: Channel>(
    ctx: &mut Ctx,
    ch: &mut C,
    x: &[u64],
    inp: Fixed,
    out: Fixed,
) -> Result<Vec<u64>> {
    let (l, s) = (inp.bits, inp.scale);
    let ml = mask(l);
    let p0 = ctx.is_p0();
    let m = ctx.block("msb", |ctx| blocks::msb_raw(ctx, ch, x, l))?;
    // −|x| = −x + m·2x
    let two_x: Vec<u64> = x.iter().map(|a| (a << 1) & ml).collect();
    let sel = ctx.block("mux", |ctx| blocks::mux_raw(ctx, ch, &m, &two_x, l))?;
    let nabs: Vec<u64> = x
        .iter()
        .zip(&sel)
        .map(|(a, b)| add(a.wrapping_neg(), *b, ml))
        .collect();
    let f = sigmoid_inner_scale(s, out.scale);
    let e = ctx.block("exp_neg", |ctx| exp_neg_sirnn_core(ctx, ch, &nabs, l, s, f))?;
    let rb = f + 2;
    // e can be exactly 1 (x = 0): d = 2 is outside [1, 2); SIRNN clamps e ≤ 1 − 2^−f.
    let d = one_plus(&e, p0, f, rb);
    let d = clamp_below_two(ctx, ch, &d, rb)?;
    let (w, rw, fw) = ctx.block("rec", |ctx| {
        blocks::reciprocal_raw(ctx, ch, &d, rb, f, rec_params(out.scale, None))
    })?;
    // Ring of the product e·r: r's shares shifted by f stay valid mod 2^(rw + f).
    let pr = rw + f;
    let p = ctx.block("mul", |ctx| {
        blocks::mul_nonuniform_msb0_raw(ctx, ch, &e, rb, &w, rw, pr)
    })?;
    // p at scale f + fw; r at fw → both to the output scale, then σ = r + m·(p − r).
    let mut both = w
        .iter()
        .map(|a| a & mask(pr))
        .map(|a| a << f)
        .collect::<Vec<u64>>();
    both.extend_from_slice(&p);
    let rounded = round_down_msb0(ctx, ch, &both, pr, f + fw, out.scale, out.bits)?;
    let n = x.len();
    let mo = mask(out.bits);
    let diff: Vec<u64> = (0..n)
        .map(|i| sub(rounded[n + i], rounded[i], mo))
        .collect();
    let sel = ctx.block("mux", |ctx| blocks::mux_raw(ctx, ch, &m, &diff, out.bits))?;
    Ok((0..n).map(|i| add(rounded[i], sel[i], mo)).collect())
}

/// d ∈ [1, 2] at scale f → min(d, 2 − 2^−f): only d = 2 exactly (e = 1) needs the clamp; it is
/// detected as bit f+1 of d (a carry on f + 1 bits) and corrected by a multiplexer.
fn clamp_below_two<C: Channel>(
    ctx: &mut Ctx,
    ch: &mut C,
    d: &[u64],
    bits: u32,
) -> Result<Vec<u64>> {
    // d ≥ 2^{f+1}  ⟺  msb of d in Z_{2^{f+2}} (d < 2^{f+2})
    let ge = ctx.block("msb", |ctx| blocks::msb_raw(ctx, ch, d, bits))?;
    let ones: Vec<u64> = vec![1; d.len()];
    let corr = ctx.block("mux", |ctx| blocks::mux_raw(ctx, ch, &ge, &ones, bits))?;
    let mb = mask(bits);
    Ok(d.iter().zip(&corr).map(|(a, c)| sub(*a, *c, mb)).collect())
}

/// SIRNN-style tanh as 2·sigmoid(2x) − 1 on the SIRNN sigmoid.
pub fn tanh_sirnn<C: Channel>(
    ctx: &mut Ctx,
    ch: &mut C,
    x: &[u64],
    inp: Fixed,
    out: Fixed,
) -> Result<Vec<u64>> {
    tanh_via_sigmoid(ctx, ch, x, inp, out, sigmoid_sirnn_inner)
}

/// ReLU (SIRNN's: msb + multiplexer), output in the input ring.
pub fn relu<C: Channel>(ctx: &mut Ctx, ch: &mut C, x: &[u64], inp: Fixed) -> Result<Vec<u64>> {
    blocks::relu(ctx, ch, x, inp.bits)
}

// ============================================================================ dispatch

/// Which protocol family computes a function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Impl {
    Opaf,
    Sirnn,
}

impl Impl {
    pub fn parse(s: &str) -> Option<Impl> {
        match s {
            "opaf" => Some(Impl::Opaf),
            "sirnn" => Some(Impl::Sirnn),
            _ => None,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Impl::Opaf => "opaf",
            Impl::Sirnn => "sirnn",
        }
    }
}

/// The papers' default formats: OPAF's tests use input s + 4 bits at scale s and outputs of the
/// minimal width (exp_neg, sigmoid, tanh: s + 2 bits; exp: s + 14 bits); exp at s = 10, the
/// others at s = 16.
pub fn default_formats(f: crate::ulp::MathFn) -> (Fixed, Fixed) {
    use crate::ring::const_format;
    use crate::ulp::MathFn::*;
    const EXP: (Fixed, Fixed) = (const_format(14, 10), const_format(24, 10));
    const SMOOTH: (Fixed, Fixed) = (const_format(20, 16), const_format(18, 16));
    const RELU: (Fixed, Fixed) = (const_format(20, 16), const_format(20, 16));
    match f {
        Exp => EXP,
        ExpNeg | Sigmoid | Tanh => SMOOTH,
        Relu => RELU,
    }
}

/// Evaluates `f` with `imp` on shares `x` at `inp`, returning shares at `out`.
pub fn evaluate<C: Channel>(
    ctx: &mut Ctx,
    ch: &mut C,
    f: crate::ulp::MathFn,
    imp: Impl,
    x: &[u64],
    inp: Fixed,
    out: Fixed,
) -> Result<Vec<u64>> {
    use crate::ulp::MathFn::*;
    match (f, imp) {
        (Exp, Impl::Opaf) => exp_opaf(ctx, ch, x, inp, out),
        (Exp, Impl::Sirnn) => Err(invalid(
            "SIRNN has no exponential for general inputs (only x ≤ 0)",
        )),
        (ExpNeg, Impl::Opaf) => exp_neg_opaf(ctx, ch, x, inp, out),
        (ExpNeg, Impl::Sirnn) => exp_neg_sirnn(ctx, ch, x, inp, out),
        (Sigmoid, Impl::Opaf) => sigmoid_opaf(ctx, ch, x, inp, out),
        (Sigmoid, Impl::Sirnn) => sigmoid_sirnn(ctx, ch, x, inp, out),
        (Tanh, Impl::Opaf) => tanh_opaf(ctx, ch, x, inp, out),
        (Tanh, Impl::Sirnn) => tanh_sirnn(ctx, ch, x, inp, out),
        (Relu, _) => {
            if out.bits != inp.bits || out.scale != inp.scale {
                return Err(invalid("relu keeps the input format"));
            }
            relu(ctx, ch, x, inp)
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::Party;
    use secinfer_net::simulate;

    /// exp_neg_err_bound, on which sigmoid's Δ drop and approximate carry rely for their
    /// no-wrap guarantees, bounds the measured error of exp_neg_core's output before rounding:
    /// sigmoid's and tanh's σ(2x) formats (direct path, mult 1 and 2), exp_neg's, and the split
    /// path (five integer bits). Inputs: x = −2^−s (the nudge, e closest to 1), the most
    /// negative x, and values in between, with random share splits.
    #[test]
    fn exp_neg_err_bound_holds() {
        for (l, s, fo, mult) in [
            (22u32, 18u32, 25u32, 1u32),
            (24, 20, 26, 2),
            (16, 12, 18, 1),
            (24, 19, 26, 1),
        ] {
            let m = mask(l);
            let min = 1u64 << (l - 1);
            let mut xs: Vec<u64> = vec![m, m - 1, min, min + 1];
            xs.extend((1..1500u64).map(|i| (m - i * (min / 1500)) & m));
            let mut st = 0x9e37_79b9_7f4a_7c15u64;
            let cs: Vec<u64> = xs
                .iter()
                .map(|_| {
                    st ^= st << 13;
                    st ^= st >> 7;
                    st ^= st << 17;
                    st & m
                })
                .collect();
            let ss: Vec<u64> = xs.iter().zip(&cs).map(|(x, c)| sub(*x, *c, m)).collect();
            let run = |party: Party, mine: &[u64]| {
                let mine = mine.to_vec();
                move |ch: &mut secinfer_net::DynChannel| {
                    let mut ctx = Ctx::setup(party, ch).unwrap();
                    exp_neg_core(&mut ctx, ch, &mine, l, s, fo, mult).unwrap()
                }
            };
            let r = simulate(run(Party::Client, &cs), run(Party::Server, &ss));
            let ((ec, rc), (es, _)) = (r.client.output, r.server.output);
            let bound = exp_neg_err_bound(l, s, fo, mult);
            let mut worst: f64 = 0.0;
            for i in 0..xs.len() {
                let x = to_signed(xs[i], l) as f64 / (s as f64).exp2();
                let got = add(ec[i], es[i], mask(rc)) as f64 / (fo as f64).exp2();
                worst = worst.max((got - (mult as f64 * x).exp()).abs());
            }
            assert!(
                worst <= bound,
                "exp_neg ({l}, {s}) → {fo}, ×{mult}: error {worst:e} above the bound {bound:e}"
            );
        }
    }
}
