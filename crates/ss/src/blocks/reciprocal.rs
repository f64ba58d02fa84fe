//! SIRNN's reciprocal on [1, 2): a table of line segments indexed by the top bits, then Newton
//! iterations, on additive shares.
use super::*;

/// Parameters of the reciprocal on [1, 2): a 2^k-entry table of line segments, evaluated as
/// T0[j] − S[j]·Δ with Δ the bits below the index.
#[derive(Clone, Copy, Debug)]
pub struct RecParams {
    /// Index bits (table of 2^k segments), k ≤ 8.
    pub k: u32,
    /// Fractional bits of the slope table.
    pub slope_scale: u32,
    /// Newton iterations after the table (0 or more).
    pub newton: u32,
    /// Fractional bits of the offset table beyond the input's scale f (its low bits are zero
    /// and are not sent: the table ships f + 2 + extra bits per entry).
    pub offset_extra: u32,
    /// When set, the offset table's fractional bits outright (overrides `offset_extra`): a
    /// caller that rounds the result to a coarser output needs only a few bits below it, and
    /// every bit here costs 2^k bits on the wire.
    pub offset_frac: Option<u32>,
    /// When set, the fractional bits of d that Δ keeps (below the input's f): both parties drop
    /// the low f − delta_frac bits of their shares before the carry, after P0 adds
    /// 2^(q+1) − 2 (q = f − delta_frac) so the dropped carry can only push the evaluation point
    /// up, by ε ∈ [0, 2^(q+1) − 2] units of 2^−f; the table is fitted to 1/(p − μ) with μ the
    /// middle of that range, so the error is ±2^(q−f) and the carry, the t correlated OTs of
    /// S·Δ1 and the result's scale all shrink by q bits. The caller guarantees
    /// d + 2^(q+1−f) < 2 (no wrap at the top).
    pub delta_frac: Option<u32>,
    /// When set, the carry of Δ's low bits (which fixes the index and Δ's wrap) is read from
    /// their top `carry_bits` bits only (a millionaires' run on carry_bits instead of t bits).
    /// The approximate carry is never 1 when the exact one is 0; when it misses a 1, the index
    /// is one segment lower and Δ overshoots that segment's end by less than 2^(−k−carry_bits),
    /// so each segment's line is fitted over [a, a + h + 2^(−k−carry_bits)]. Below segment 0 the
    /// index would wrap to the top segment: the caller guarantees d ≥ 1 + 2^(−k−carry_bits)
    /// (see [`rec_carry_bits`]).
    pub carry_bits: Option<u32>,
    /// When set, the scale of the result (below f' + slope_scale, at least the offset's
    /// scale): the S·Δ1 correlated OTs then carry ⌊s0·2^b / 2^T⌋ in the result's narrower
    /// ring (T = f' + slope_scale − product_frac; S is widened to that ring plus T first, so
    /// its wrap vanishes after the shift), P1 truncates its own s1·Δ1 the same way, and the
    /// t + 1 floors add [0, t + 1) units of 2^−product_frac to the result.
    pub product_frac: Option<u32>,
    /// The caller guarantees d ≥ 1 + 2^−12, so 1/d plus the table's error stays below 1 and
    /// the result needs one bit less above its scale (ring product_frac + 1): one bit less in
    /// every table row and every correlated OT after the lookup.
    pub below_one: bool,
}

/// The fewest carry bits ([`RecParams::carry_bits`]) for a 2^k-row reciprocal whose input is
/// known to satisfy d − 1 ≥ 2^(−lo) (lo > 0, not necessarily an integer): a missed carry at
/// segment 0 must not wrap the index, i.e. 2^(−k−cb) ≤ d − 1; at least 8 bits (two 4-bit
/// millionaires' leaves either way) keep each segment's extension below 1/256 of its width.
pub fn rec_carry_bits(k: u32, lo: f64) -> u32 {
    let need = (lo - k as f64).ceil().max(0.0) as u32;
    need.max(8)
}

impl Default for RecParams {
    fn default() -> Self {
        RecParams {
            k: 8,
            slope_scale: 12,
            newton: 0,
            offset_extra: 2,
            offset_frac: None,
            delta_frac: None,
            carry_bits: None,
            product_frac: None,
            below_one: false,
        }
    }
}

/// Reciprocal of d ∈ [1, 2) given at scale `f` (shares mod 2^bits, bits ≥ f + 2): returns shares
/// of 1/d at scale `f + slope_scale` in Z_{2^(f + slope_scale + 2)} (value in (1/2, 1]).
/// Lookup on the top k fractional bits (SIRNN's lookup initialisation), one product with a
/// non-uniform bitwidth for the segment's slope, then optional Newton steps.
pub fn reciprocal<C: Channel>(
    ctx: &mut Ctx,
    ch: &mut C,
    d: &[u64],
    bits: u32,
    f: u32,
    p: RecParams,
) -> Result<(Vec<u64>, u32, u32)> {
    check_bits(bits)?;
    check_rec(bits, f, p)?;
    ctx.block("rec", |ctx| reciprocal_raw(ctx, ch, d, bits, f, p))
}

fn check_rec(bits: u32, f: u32, p: RecParams) -> Result<()> {
    if p.k == 0 || p.k > 8 || f < p.k + 1 || bits < f + 2 || f + p.slope_scale + 2 > 62 {
        return Err(invalid(
            "reciprocal: need 1 ≤ k ≤ 8, k < f, bits ≥ f + 2, f + slope_scale + 2 ≤ 62",
        ));
    }
    Ok(())
}

/// Both shares of Δ with their `q` low bits dropped (precision `fd` of `bits`), and the centre
/// μ of the evaluation point's upward shift that P0's offset causes, in units of the input's
/// 2^−(fd + q).
fn drop_low_bits(d: &[u64], bits: u32, fd: u32, q: u32, p0: bool) -> (Vec<u64>, f64) {
    let mb = mask(bits);
    let off = (1u64 << (q + 1)) - 2;
    let dropped = d
        .iter()
        .map(|a| (if p0 { add(*a, off, mb) } else { a & mb }) >> q)
        .collect();
    let mu = ((1u64 << q) - 1) as f64 * (-((fd + q) as f64)).exp2();
    (dropped, mu)
}

/// The `nn` segments' lines T0 − S·Δ for 1/(x − μ) on [1, 2) (segment j covers
/// [1 + j·h, 1 + (j + 1)·h + ext)): each secant lowered by half its largest gap to the curve,
/// T0 at scale `fo_t` in `rt` bits and the slope S at `slope_scale` in `rs` bits. `ext` is the
/// overshoot of a segment's end by a missed carry (carry_bits < t).
fn secant_tables(
    nn: usize,
    h: f64,
    mu: f64,
    ext: f64,
    (fo_t, rt): (u32, u32),
    (slope_scale, rs): (u32, u32),
) -> (Vec<u64>, Vec<u64>) {
    let g = |x: f64| 1.0 / (x - mu);
    (0..nn)
        .map(|j| {
            let a = 1.0 + j as f64 * h;
            let b = a + h + ext;
            let slope = (g(b) - g(a)) / (b - a); // negative
            let xt = mu + (-1.0 / slope).sqrt(); // tangent point where −1/(x − μ)² = slope
            let gap = g(a) + slope * (xt - a) - g(xt); // secant above the curve
            let off = g(a) - gap / 2.0;
            // Rounded up: at d = 1 the lowered line sits exactly half an output ULP below 1
            // when h²/8 is half a ULP (rec_index_bits' choice), and a downward rounding there
            // turns every saturated sigmoid into 1 − 1 ULP. Up is at most 2^−fo_t extra error.
            let t0 = (off * (fo_t as f64).exp2()).ceil() as u64 & mask(rt);
            let s = ((-slope) * (slope_scale as f64).exp2()).round() as u64 & mask(rs);
            (t0, s)
        })
        .unzip()
}

pub(crate) fn reciprocal_raw<C: Channel>(
    ctx: &mut Ctx,
    ch: &mut C,
    d: &[u64],
    bits: u32,
    f: u32,
    p: RecParams,
) -> Result<(Vec<u64>, u32, u32)> {
    check_rec(bits, f, p)?;
    let n = d.len();
    let k = p.k;
    let p0 = ctx.is_p0();
    // Δ's precision: drop q low bits of both shares (see RecParams::delta_frac); P0's offset
    // makes the dropped part's carry push the evaluation point up only.
    let fd = p.delta_frac.unwrap_or(f).min(f);
    if fd < k + 1 {
        return Err(invalid("reciprocal: delta_frac must exceed k"));
    }
    let q = f - fd;
    let dropped: Vec<u64>;
    let (d, f, bits, mu) = if q > 0 {
        let mu;
        (dropped, mu) = drop_low_bits(d, bits, fd, q, p0);
        (&dropped[..], fd, bits - q, mu)
    } else {
        (d, f, bits, 0.0)
    };
    let t = f - k; // bits of Δ
    let cb = p.carry_bits.unwrap_or(t).clamp(1, t);
    let fw = f + p.slope_scale;
    // The result's scale and ring (RecParams::product_frac, below_one); T bits of S·Δ1 are
    // dropped as its correlated OTs are made, and S is widened to rw + T for that.
    let fo_min = p.offset_frac.unwrap_or(f + p.offset_extra).min(fw);
    let fwn = p
        .product_frac
        .unwrap_or(fw)
        .clamp(fo_min, fw)
        .max(fw.saturating_sub(t));
    let tt = fw - fwn;
    let fw = fwn;
    let rw = fw + if p.below_one { 1 } else { 2 };
    let rwide = rw + tt;
    let mt = mask(t);
    // The carry of the low t bits fixes both the index and Δ's wrap. The index only needs it
    // mod 2^k, so the B2A is k bits wide. With carry_bits < t it comes from Δ's top bits.
    let c = ctx.block("wrap", |ctx| {
        let (v, w) = super::steps::trunc_carry_operand(d, t, cb);
        carry_raw(ctx, ch, &v, w)
    })?;
    let ck = ctx.block("b2a", |ctx| b2a_raw(ctx, ch, &c, k))?;
    let idx: Vec<u64> = (0..n).map(|i| add(d[i] >> t, ck[i], mask(k))).collect();
    // Tables: segment j covers [1 + j/2^k, 1 + (j+1)/2^k); the line T0 − S·Δ is the secant
    // lowered by half its largest gap to 1/d (equioscillating error).
    let nn = 1usize << k;
    let h = (k as f64).exp2().recip();
    // The offset is shipped at scale f + offset_extra and shifted up by z locally (shares of
    // T·2^z mod 2^rw are the shares of T mod 2^(rw−z) shifted); the slope (≤ 1) is shipped in
    // slope_scale + 2 bits with MSB 0 and widened by one correlated OT.
    let fo_t = fo_min;
    // z: the offset column's shift up to the result's scale; zs: S·Δ0's (at scale fw + tt).
    let z = fw - fo_t;
    let zs = z + tt;
    let rt = rw - z;
    // The slope is below 1 (1/((a − μ)(b − μ)), largest in segment 0), so slope_scale + 1
    // bits usually hold it with MSB 0 for the zero extension.
    let ext = if cb < t {
        (-((k + cb) as f64)).exp2()
    } else {
        0.0
    };
    let s_max = (((1.0 - mu) * (1.0 + h + ext - mu)).recip() * (p.slope_scale as f64).exp2())
        .round() as u64;
    let rs = p.slope_scale + if s_max < 1u64 << p.slope_scale { 1 } else { 2 };
    let (t0, s) = secant_tables(nn, h, mu, ext, (fo_t, rt), (p.slope_scale, rs));
    // Δ = Δ0 + Δ1 − 2^t·c with Δ_i = d_i mod 2^t, so 1/d ≈ T0 − S·Δ0 − S·Δ1 + 2^t·c·S. P0 knows
    // Δ0, so it folds S[j]·Δ0 (rounded to the offset's scale: error ≤ 2^−(fo_t+1)) into the
    // offset column of its table; only S·Δ1 (t correlated OTs, P1 choosing by Δ1's bits) and
    // c·S (a multiplexer) remain. SIRNN's shared×shared product here took 2t.
    let delta: Vec<u64> = d.iter().map(|a| a & mt).collect();
    let half_z = if zs > 0 { 1u64 << (zs - 1) } else { 0 };
    let tabs = ctx.block("lut", |ctx| {
        lut_rows_raw(ctx, ch, &idx, k, &[rt, rs], |i, j, q| {
            if q == 1 {
                return s[j];
            }
            let sd = (s[j] * delta[i] + half_z) >> zs;
            t0[j].wrapping_sub(sd) & mask(rt)
        })
    })?;
    let slope = ctx.block("zext", |ctx| zext_msb0_raw(ctx, ch, &tabs[1], rs, rwide))?;
    let w = ctx.block("mul", |ctx| {
        offset_minus_slope_product(
            ctx,
            ch,
            SlopeProduct {
                offset: &tabs[0],
                slope: &slope,
                delta: &delta,
                carry: &c,
                t,
                tt,
                z,
                rw,
            },
        )
    })?;
    let mut w = w;
    for _ in 0..p.newton {
        w = newton_step(ctx, ch, d, bits, f, &w, fw)?;
    }
    Ok((w, rw, fw))
}

/// The shares and scales [`offset_minus_slope_product`] combines.
struct SlopeProduct<'a> {
    /// The looked-up offset column T0 − S·Δ0 at scale fw − z.
    offset: &'a [u64],
    /// The looked-up slope S, zero-extended to rw + tt bits.
    slope: &'a [u64],
    /// Each party's Δ_i = d_i mod 2^t.
    delta: &'a [u64],
    /// Shares of Δ's wrap c (bit 0).
    carry: &'a [u8],
    t: u32,
    /// Bits of S·Δ1 dropped as its correlated OTs are made.
    tt: u32,
    /// The offset column's shift up to the result's scale.
    z: u32,
    rw: u32,
}

/// Shares of T0 − S·Δ0 − S·Δ1 + 2^t·c·S mod 2^rw at the result's scale.
///
/// The t + 1 floors of S·Δ1 (t cross terms, P1's own term) lose [0, t + 1) units, which w
/// gains: left one-sided (no bias) like the offset's upward rounding, so a saturated sigmoid
/// (d → 1, where the lowered line sits E below 1) still rounds to 1. Centring them made half of
/// those round to 1 − 1 ULP (mean ULP of sigmoid 16/8 → 16/14: 0.043 → 0.12). One P0→P1 batch
/// carries the t cross terms s0·2^b·[bit b of Δ1] and the P0 half of the multiplexer c·S; the
/// P1→P0 batch the other half.
fn offset_minus_slope_product<C: Channel>(
    ctx: &mut Ctx,
    ch: &mut C,
    v: SlopeProduct<'_>,
) -> Result<Vec<u64>> {
    let SlopeProduct {
        offset,
        slope,
        delta,
        carry: c,
        t,
        tt,
        z,
        rw,
    } = v;
    let n = slope.len();
    let p0 = ctx.is_p0();
    let mw = mask(rw);
    // ⌊v·2^b / 2^tt⌋ mod 2^rw: S·Δ1's terms already at the result's scale.
    let tr = |v: u64, b: u32| ((((v as u128) << b) >> tt) as u64) & mw;
    let tu = t as usize;
    let mut deltas = Vec::new();
    let mut choices = Vec::new();
    let mux_delta: Vec<u64> = (0..n)
        .map(|i| {
            if c[i] & 1 == 1 {
                slope[i].wrapping_neg() & mw
            } else {
                slope[i] & mw
            }
        })
        .collect();
    if p0 {
        deltas.reserve(n * (tu + 1));
        for sv in slope {
            for b in 0..t {
                deltas.push(tr(*sv, b));
            }
        }
        deltas.extend_from_slice(&mux_delta);
    } else {
        choices.reserve(n * (tu + 1));
        for dv in delta {
            for b in 0..t {
                choices.push((dv >> b) & 1 == 1);
            }
        }
        choices.extend(c.iter().map(|b| b & 1 == 1));
    }
    let x = ctx.cross_from_p0(ch, &deltas, &choices, rw)?;
    let cb: Vec<bool> = c.iter().map(|b| b & 1 == 1).collect();
    let y = ctx.cross_from_p1(ch, &mux_delta, &cb, rw)?;
    Ok((0..n)
        .map(|i| {
            let cross = x[i * tu..(i + 1) * tu]
                .iter()
                .fold(0u64, |a, v| add(a, *v, mw));
            // S·Δ1: P1's local s1·Δ1 plus the cross terms.
            let sd1 = if p0 {
                cross
            } else {
                let own = ((slope[i] as u128 * delta[i] as u128) >> tt) as u64;
                add(cross, own, mw)
            };
            let cs = add(
                add(x[n * tu + i], y[i], mw),
                if c[i] & 1 == 1 { slope[i] } else { 0 },
                mw,
            );
            let base = shl(offset[i], z) & mw;
            // c·S·2^t at the result's scale: 2^(t − tt) (tt ≤ t above).
            add(sub(base, sd1, mw), shl(cs, t - tt), mw)
        })
        .collect())
}

/// One Newton step w' = w + w·(1 − d·w) for w at scale fw (≈ 1/d, d ∈ [1,2) at scale f).
fn newton_step<C: Channel>(
    ctx: &mut Ctx,
    ch: &mut C,
    d: &[u64],
    bits: u32,
    f: u32,
    w: &[u64],
    fw: u32,
) -> Result<Vec<u64>> {
    let n = d.len();
    let rw = fw + 2;
    // d·w at scale f + fw: bring d into ring rp = f + fw + 2 (d < 2^{f+1}, msb 0 in ring f + 2).
    let rp = (f + fw + 2).min(64);
    let mp = mask(rp);
    let dd: Vec<u64> = d.iter().map(|a| a & mask(f + 2)).collect();
    let _ = bits;
    let prod = mul_nonuniform_msb0_raw(ctx, ch, w, rw, &dd, f + 2, rp)?;
    // e = 1 − d·w (tiny, signed) at scale f + fw; bring to scale fw.
    let e: Vec<u64> = prod
        .iter()
        .map(|p| {
            if ctx.is_p0() {
                sub(1u64 << (f + fw), *p, mp)
            } else {
                p.wrapping_neg() & mp
            }
        })
        .collect();
    let e = trunc_signed_small_raw(ctx, ch, &e, rp, f, false)?;
    // w·e at scale 2fw in ring rp (|w·e| small), then back to fw.
    let e_r: Vec<u64> = e.iter().map(|a| a & mp).collect();
    let w_r = zext_msb0_raw(ctx, ch, w, rw, rp)?;
    let we = mul_cross_raw(ctx, ch, &w_r, &e_r, rp, rp)?;
    let we = trunc_signed_small_raw(ctx, ch, &we, rp, fw, false)?;
    let mw = mask(rw);
    Ok((0..n).map(|i| add(w[i], we[i], mw)).collect())
}
