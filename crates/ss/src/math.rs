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
    let mb = mask(bits);
    let mo = mask(out_bits);
    if from <= to {
        let sh = to - from;
        return Ok(v.iter().map(|a| (a << sh) & mo).collect());
    }
    let t = from - to;
    let p0 = ctx.is_p0();
    let b: Vec<u64> = v.iter().map(|a| if p0 { add(*a, 1u64 << (t - 1), mb) } else { a & mb }).collect();
    let r = ctx.block("trunc", |ctx| blocks::trunc_msb0_raw(ctx, ch, &b, bits, t, true))?;
    if out_bits > bits {
        return ctx.block("zext", |ctx| blocks::zext_msb0_raw(ctx, ch, &r, bits, out_bits));
    }
    Ok(r.into_iter().map(|a| a & mo).collect())
}

// ============================================================================ OPAF exp

/// OPAF's local-factor exponential for x < 0 with L = 2^(l−s) ≤ 16. Returns shares (mod 2^64,
/// MSB 0) of e^x at scale `fo`.
///
/// Each party reads its share g_i as a signed integer with msb m_i. With k the ring wrap of the
/// signed shares, g0 + g1 = x + k·2^l and, since x < 0, k = (1−m0)(1−m1). Party i computes
/// a_i = e^{g_i/2^s − (1−m_i)·L/2} ∈ [e^{−L/2}, 1] in f64 and fixes it at 31 fractional bits;
/// then a0·a1 = e^x when m0 = m1 and e^{x − L/2} when m0 ≠ m1. One private×private product,
/// one cheap truncation, one multiplexer on z = m0 ⊕ m1 (whose shares are the parties' own
/// msbs) multiplying by e^{L/2}: no millionaires' at all.
fn exp_neg_direct<C: Channel>(ctx: &mut Ctx, ch: &mut C, x: &[u64], l: u32, s: u32, fo: u32) -> Result<Vec<u64>> {
    let n = x.len();
    let big_l = ((l as f64) - (s as f64)).exp2();
    let fscale = (LOCAL_FRAC as f64).exp2();
    let mine_m: Vec<u8> = x.iter().map(|a| msb(*a, l)).collect();
    let a: Vec<u64> = x
        .iter()
        .zip(&mine_m)
        .map(|(v, m)| {
            let g = to_signed(*v, l) as f64 / (s as f64).exp2();
            let shift = if *m == 0 { big_l / 2.0 } else { 0.0 };
            ((g - shift).exp() * fscale).round() as u64
        })
        .collect();
    let p = ctx.block("mul_private", |ctx| blocks::mul_private_raw(ctx, ch, &a, LOCAL_FRAC + 1, 64))?;
    // p = a0·a1 at scale 62, below 2^62.
    let c = (big_l / 2.0).exp();
    let lc = (c.log2().ceil() as u32).max(1);
    let mut f1 = (fo + lc + 3).min(62);
    let mut fc = 62u32.saturating_sub(1 + lc + f1);
    if fc < 6 {
        fc = 6;
        f1 = 62 - 1 - lc - fc;
    }
    let pt = ctx.block("trunc", |ctx| blocks::trunc_msb0_raw(ctx, ch, &p, 64, 62 - f1, false))?;
    let cm1 = ((c - 1.0) * (fc as f64).exp2()).round() as u64;
    let scaled: Vec<u64> = pt.iter().map(|v| v.wrapping_mul(cm1)).collect();
    let sel = ctx.block("mux", |ctx| blocks::mux_raw(ctx, ch, &mine_m, &scaled, 64))?;
    let v: Vec<u64> = (0..n).map(|i| (pt[i] << fc).wrapping_add(sel[i])).collect();
    // v at scale f1 + fc; bring to fo (cheap truncation: this is an intermediate).
    let from = f1 + fc;
    if from > fo {
        ctx.block("trunc", |ctx| blocks::trunc_msb0_raw(ctx, ch, &v, 64, from - fo, false))
    } else {
        Ok(v.into_iter().map(|a| a << (fo - from)).collect())
    }
}

/// e^x for x < 0 given at (l, s), any integer width: for l − s > 4 the input is read at scale
/// s + k (x / 2^k, L = 16) and the result squared k times. Shares mod 2^64 at scale `fo`.
fn exp_neg_core<C: Channel>(ctx: &mut Ctx, ch: &mut C, x: &[u64], l: u32, s: u32, fo: u32) -> Result<Vec<u64>> {
    let int_bits = l.saturating_sub(s);
    if int_bits <= MAX_DIRECT_INT_BITS {
        return exp_neg_direct(ctx, ch, x, l, s, fo);
    }
    let k = int_bits - MAX_DIRECT_INT_BITS;
    let fe = (fo + k + 3).min(28);
    let mut e = exp_neg_direct(ctx, ch, x, l, s + k, fe)?;
    let re = fe + 2;
    for _ in 0..k {
        let er: Vec<u64> = e.iter().map(|a| a & mask(re)).collect();
        let sq = ctx.block("mul", |ctx| blocks::mul_nonuniform_msb0_raw(ctx, ch, &er, re, &er, re, 2 * re))?;
        let t = ctx.block("trunc", |ctx| blocks::trunc_msb0_raw(ctx, ch, &sq, 2 * re, fe, false))?;
        e = t;
    }
    let m64 = mask(2 * re);
    let e: Vec<u64> = e.iter().map(|a| a & m64).collect();
    // Widen to 64 bits (MSB known 0) and set the scale to fo.
    let e = if 2 * re < 64 {
        ctx.block("zext", |ctx| blocks::zext_msb0_raw(ctx, ch, &e, 2 * re, 64))?
    } else {
        e
    };
    if fe > fo {
        ctx.block("trunc", |ctx| blocks::trunc_msb0_raw(ctx, ch, &e, 64, fe - fo, false))
    } else {
        Ok(e.into_iter().map(|a| a << (fo - fe)).collect())
    }
}

/// OPAF exp on negative inputs: x < 0 at `inp`, e^x at `out` (out.bits ≥ out.scale + 2).
pub fn exp_neg_opaf<C: Channel>(ctx: &mut Ctx, ch: &mut C, x: &[u64], inp: Fixed, out: Fixed) -> Result<Vec<u64>> {
    check_io(inp, out, 2)?;
    ctx.block("exp_neg", |ctx| {
        let fo = out.scale + 6;
        let e = exp_neg_core(ctx, ch, x, inp.bits, inp.scale, fo)?;
        round_down_msb0(ctx, ch, &e, 64, fo, out.scale, out.bits)
    })
}

/// OPAF exp for any input in the ring with l − s ≤ 4 (|x| < 8): msb(x) and the parties' own
/// msbs select the correction e^{0, L/2, L} by two multiplexers. out.bits must hold e^{L/2}.
pub fn exp_opaf<C: Channel>(ctx: &mut Ctx, ch: &mut C, x: &[u64], inp: Fixed, out: Fixed) -> Result<Vec<u64>> {
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
        let fscale = (LOCAL_FRAC as f64).exp2();
        let a: Vec<u64> = x
            .iter()
            .zip(&mine_m)
            .map(|(v, mi)| {
                let g = to_signed(*v, l) as f64 / (s as f64).exp2();
                let shift = if *mi == 0 { big_l / 2.0 } else { 0.0 };
                ((g - shift).exp() * fscale).round() as u64
            })
            .collect();
        let p = ctx.block("mul_private", |ctx| blocks::mul_private_raw(ctx, ch, &a, LOCAL_FRAC + 1, 64))?;
        let c = (big_l / 2.0).exp();
        let lc2 = ((c * c).log2().ceil() as u32).max(1);
        let fc = 6u32;
        let f1 = 62 - 1 - lc2 - fc;
        let pt = ctx.block("trunc", |ctx| blocks::trunc_msb0_raw(ctx, ch, &p, 64, 62 - f1, false))?;
        let c1 = ((c - 1.0) * (fc as f64).exp2()).round() as u64;
        let c2 = ((c * c - 1.0) * (fc as f64).exp2()).round() as u64;
        let mut sel_bits = mine_m.clone();
        sel_bits.extend_from_slice(&w);
        let mut vals: Vec<u64> = pt.iter().map(|v| v.wrapping_mul(c1)).collect();
        vals.extend(pt.iter().map(|v| v.wrapping_mul(c2)));
        let sel = ctx.block("mux", |ctx| blocks::mux_raw(ctx, ch, &sel_bits, &vals, 64))?;
        let v: Vec<u64> =
            (0..n).map(|i| (pt[i] << fc).wrapping_add(sel[i]).wrapping_add(sel[n + i])).collect();
        round_down_msb0(ctx, ch, &v, 64, f1 + fc, out.scale, out.bits)
    })
}

/// Scale at which the sigmoid pipeline carries e and 1 + e.
fn sigmoid_inner_scale(in_scale: u32, out_scale: u32) -> u32 {
    (out_scale + 5).max(in_scale + 4)
}

/// OPAF sigmoid: m = msb(x); one multiplexer gives u = x (x < 0) or −x − 2^−s (x ≥ 0), strictly
/// negative; e = exp_neg(u); r = 1/(1 + e) on (1, 2) with no range search; σ = r + m·(1 − 2r).
pub fn sigmoid_opaf<C: Channel>(ctx: &mut Ctx, ch: &mut C, x: &[u64], inp: Fixed, out: Fixed) -> Result<Vec<u64>> {
    check_io(inp, out, 2)?;
    ctx.block("sigmoid", |ctx| sigmoid_opaf_inner(ctx, ch, x, inp, out))
}

fn sigmoid_opaf_inner<C: Channel>(ctx: &mut Ctx, ch: &mut C, x: &[u64], inp: Fixed, out: Fixed) -> Result<Vec<u64>> {
    let (l, s) = (inp.bits, inp.scale);
    let ml = mask(l);
    let p0 = ctx.is_p0();
    let m = ctx.block("msb", |ctx| blocks::msb_raw(ctx, ch, x, l))?;
    // u = (−x − 1) + m·(2x + 1)
    let two_x1: Vec<u64> = x.iter().map(|a| if p0 { add(a << 1, 1, ml) } else { (a << 1) & ml }).collect();
    let sel = ctx.block("mux", |ctx| blocks::mux_raw(ctx, ch, &m, &two_x1, l))?;
    let u: Vec<u64> = x
        .iter()
        .zip(&sel)
        .map(|(a, s)| {
            let neg = if p0 { sub(a.wrapping_neg(), 1, ml) } else { a.wrapping_neg() & ml };
            add(neg, *s, ml)
        })
        .collect();
    let f = sigmoid_inner_scale(s, out.scale);
    let e = ctx.block("exp_neg", |ctx| exp_neg_core(ctx, ch, &u, l, s, f))?;
    let rb = f + 2;
    let d: Vec<u64> = e.iter().map(|a| if p0 { add(*a, 1u64 << f, mask(rb)) } else { a & mask(rb) }).collect();
    let (w, rw, fw) = ctx.block("rec", |ctx| blocks::reciprocal_raw(ctx, ch, &d, rb, f, RecParams::default()))?;
    let r = round_down_msb0(ctx, ch, &w, rw, fw, out.scale, out.bits)?;
    // σ = r + m·(1 − 2r)
    let mo = mask(out.bits);
    let one = 1u64 << out.scale;
    let v: Vec<u64> = r.iter().map(|a| if p0 { sub(one, a << 1, mo) } else { (a << 1).wrapping_neg() & mo }).collect();
    let sel = ctx.block("mux", |ctx| blocks::mux_raw(ctx, ch, &m, &v, out.bits))?;
    Ok(r.iter().zip(&sel).map(|(a, b)| add(*a, *b, mo)).collect())
}

/// OPAF tanh = 2·sigmoid(2x) − 1: 2x at scale s is x read at scale s − 1, and 2σ at scale s_out
/// is σ at scale s_out + 1, so one sigmoid and a local subtraction.
pub fn tanh_opaf<C: Channel>(ctx: &mut Ctx, ch: &mut C, x: &[u64], inp: Fixed, out: Fixed) -> Result<Vec<u64>> {
    check_io(inp, out, 2)?;
    if inp.scale == 0 {
        return Err(invalid("tanh needs input scale ≥ 1"));
    }
    ctx.block("tanh", |ctx| {
        let si = Fixed { bits: inp.bits, scale: inp.scale - 1 };
        let so = Fixed { bits: out.bits.max(out.scale + 3), scale: out.scale + 1 };
        let sig = ctx.block("sigmoid", |ctx| sigmoid_opaf_inner(ctx, ch, x, si, so))?;
        let p0 = ctx.is_p0();
        let mo = mask(out.bits);
        Ok(sig.iter().map(|a| if p0 { sub(*a, 1u64 << out.scale, mo) } else { a & mo }).collect())
    })
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
            let mut msgs = vec![0u64; q * n * nn];
            for (k, (dv, w)) in digits.iter().enumerate() {
                let r = ctx.rand_u64s(n, bits);
                let wm = mask(*w);
                for i in 0..n {
                    let i0 = dv[i] & wm;
                    for t in 0..(1usize << w) {
                        let j = ((t as u64 + i0) & wm) as usize;
                        msgs[(k * n + i) * nn + t] = sub(tables[k][j], r[i], mb);
                    }
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
fn exp_neg_sirnn_core<C: Channel>(ctx: &mut Ctx, ch: &mut C, x: &[u64], l: u32, s: u32, ft: u32) -> Result<Vec<u64>> {
    let ml = mask(l);
    let y: Vec<u64> = x.iter().map(|a| a.wrapping_neg() & ml).collect();
    let digits = blocks::digit_decompose(ctx, ch, &y, l, SIRNN_DIGIT)?;
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
        let prod = ctx.block("mul", |ctx| blocks::mul_nonuniform_msb0_raw(ctx, ch, &xa, rt, &ya, rt, 2 * rt))?;
        let tr = ctx.block("trunc", |ctx| blocks::trunc_msb0_raw(ctx, ch, &prod, 2 * rt, ft, false))?;
        let mut next: Vec<Vec<u64>> = tr.chunks(n.max(1)).map(|c| c.iter().map(|a| a & mask(rt)).collect()).collect();
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
pub fn exp_neg_sirnn<C: Channel>(ctx: &mut Ctx, ch: &mut C, x: &[u64], inp: Fixed, out: Fixed) -> Result<Vec<u64>> {
    check_io(inp, out, 2)?;
    ctx.block("exp_neg", |ctx| {
        let ft = out.scale + 4;
        let e = exp_neg_sirnn_core(ctx, ch, x, inp.bits, inp.scale, ft)?;
        round_down_msb0(ctx, ch, &e, ft + 2, ft, out.scale, out.bits)
    })
}

/// SIRNN sigmoid: m = msb(x); −|x| by a multiplexer; e = exp(−|x|) by digit tables;
/// r = 1/(1 + e); p = e·r; σ = m ? p : r by a second multiplexer.
pub fn sigmoid_sirnn<C: Channel>(ctx: &mut Ctx, ch: &mut C, x: &[u64], inp: Fixed, out: Fixed) -> Result<Vec<u64>> {
    check_io(inp, out, 2)?;
    ctx.block("sigmoid", |ctx| sigmoid_sirnn_inner(ctx, ch, x, inp, out))
}

fn sigmoid_sirnn_inner<C: Channel>(ctx: &mut Ctx, ch: &mut C, x: &[u64], inp: Fixed, out: Fixed) -> Result<Vec<u64>> {
    let (l, s) = (inp.bits, inp.scale);
    let ml = mask(l);
    let p0 = ctx.is_p0();
    let m = ctx.block("msb", |ctx| blocks::msb_raw(ctx, ch, x, l))?;
    // −|x| = −x + m·2x
    let two_x: Vec<u64> = x.iter().map(|a| (a << 1) & ml).collect();
    let sel = ctx.block("mux", |ctx| blocks::mux_raw(ctx, ch, &m, &two_x, l))?;
    let nabs: Vec<u64> = x.iter().zip(&sel).map(|(a, b)| add(a.wrapping_neg(), *b, ml)).collect();
    let f = sigmoid_inner_scale(s, out.scale);
    let e = ctx.block("exp_neg", |ctx| exp_neg_sirnn_core(ctx, ch, &nabs, l, s, f))?;
    let rb = f + 2;
    // e can be exactly 1 (x = 0): d = 2 is outside [1, 2); SIRNN clamps e ≤ 1 − 2^−f.
    let d: Vec<u64> = e.iter().map(|a| if p0 { add(*a, 1u64 << f, mask(rb)) } else { a & mask(rb) }).collect();
    let d = clamp_below_two(ctx, ch, &d, rb)?;
    let (w, rw, fw) = ctx.block("rec", |ctx| blocks::reciprocal_raw(ctx, ch, &d, rb, f, RecParams::default()))?;
    let pr = (rb + rw).min(62);
    let p = ctx.block("mul", |ctx| blocks::mul_nonuniform_msb0_raw(ctx, ch, &e, rb, &w, rw, pr))?;
    // p at scale f + fw; r at fw → both to the output scale, then σ = r + m·(p − r).
    let mut both = w.iter().map(|a| a & mask(pr)).map(|a| a << f).collect::<Vec<u64>>();
    both.extend_from_slice(&p);
    let rounded = round_down_msb0(ctx, ch, &both, pr, f + fw, out.scale, out.bits)?;
    let n = x.len();
    let mo = mask(out.bits);
    let diff: Vec<u64> = (0..n).map(|i| sub(rounded[n + i], rounded[i], mo)).collect();
    let sel = ctx.block("mux", |ctx| blocks::mux_raw(ctx, ch, &m, &diff, out.bits))?;
    Ok((0..n).map(|i| add(rounded[i], sel[i], mo)).collect())
}

/// d ∈ [1, 2] at scale f → min(d, 2 − 2^−f): only d = 2 exactly (e = 1) needs the clamp; it is
/// detected as bit f+1 of d (a carry on f + 1 bits) and corrected by a multiplexer.
fn clamp_below_two<C: Channel>(ctx: &mut Ctx, ch: &mut C, d: &[u64], bits: u32) -> Result<Vec<u64>> {
    // d ≥ 2^{f+1}  ⟺  msb of d in Z_{2^{f+2}} (d < 2^{f+2})
    let ge = ctx.block("msb", |ctx| blocks::msb_raw(ctx, ch, d, bits))?;
    let ones: Vec<u64> = vec![1; d.len()];
    let corr = ctx.block("mux", |ctx| blocks::mux_raw(ctx, ch, &ge, &ones, bits))?;
    let mb = mask(bits);
    Ok(d.iter().zip(&corr).map(|(a, c)| sub(*a, *c, mb)).collect())
}

/// SIRNN-style tanh as 2·sigmoid(2x) − 1 on the SIRNN sigmoid.
pub fn tanh_sirnn<C: Channel>(ctx: &mut Ctx, ch: &mut C, x: &[u64], inp: Fixed, out: Fixed) -> Result<Vec<u64>> {
    check_io(inp, out, 2)?;
    if inp.scale == 0 {
        return Err(invalid("tanh needs input scale ≥ 1"));
    }
    ctx.block("tanh", |ctx| {
        let si = Fixed { bits: inp.bits, scale: inp.scale - 1 };
        let so = Fixed { bits: out.bits.max(out.scale + 3), scale: out.scale + 1 };
        let sig = ctx.block("sigmoid", |ctx| sigmoid_sirnn_inner(ctx, ch, x, si, so))?;
        let p0 = ctx.is_p0();
        let mo = mask(out.bits);
        Ok(sig.iter().map(|a| if p0 { sub(*a, 1u64 << out.scale, mo) } else { a & mo }).collect())
    })
}

/// ReLU (SIRNN's: msb + multiplexer), output in the input ring.
pub fn relu<C: Channel>(ctx: &mut Ctx, ch: &mut C, x: &[u64], inp: Fixed) -> Result<Vec<u64>> {
    blocks::relu(ctx, ch, x, inp.bits)
}
