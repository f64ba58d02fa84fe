//! FastGRNN (Kusupati et al. 2018) → Dense → argmax on Z_{2^l} shares: OPAF's end-to-end
//! model (OPAF §VI-F, Table XI), with OPAF's or SIRNN's sigmoid and tanh.
//!
//! The client owns the sequence x (steps × input, 16-bit at scale 9); the server owns the
//! model ([`FastGrnnParams`]). Per step, on shares of h in Z_{2^32}:
//! 1. acc = W·x_t + U·h in Z_{2^L} (L = [`Widths::acc_bits`]), by [`Products`]: with `He`
//!    (Cheetah's coefficient-encoded HE on masks, [`super::products`]) every step's W·x and
//!    U·h are products on masks prepared offline, and online each is one client flight of the
//!    masked vector; with `Ot`, W·x for all steps in one batch before the first step (x is the
//!    client's own), U·h as U·h_server locally plus U·h_client by SIRNN's OT product
//!    (`secinfer_ss::matmul`);
//! 2. z_in, h_in = ARS(acc + b) to scales 8 and 9, reduced to 16 bits (exact floor shifts,
//!    one call: h's half is doubled first so the same shift reaches scale 9; read mod 2^16 the
//!    shift is SIRNN's truncate-reduce, which needs only the low bits' carry);
//! 3. z = σ(z_in) and S = σ(2·h_in), both at scale 14 in one batch of 2·hidden (OPAF's or
//!    SIRNN's sigmoid), and h̃ = tanh(h_in) = 2S − 1 at scale 14, locally: the identity both
//!    papers build their tanh on, so a step pays one σ's rounds and h̃'s error is twice σ's;
//! 4. h' = ARS((ζ+ν)·h̃ + 2^5·z ⊙ ARS(2^19·h − ζ·h̃, 19), 19) in Z_{2^36}: ζ·h̃ and (ζ+ν)·h̃
//!    are the server's scalars times the shared h̃, carried by the COTs of σ's extension to
//!    36 bits (`secinfer_ss::blocks::zext_msb0_times`), z ⊙ d one product of two shared
//!    vectors.
//!
//! Then the dense head in the model's main format F (the graph's dense rule): logits =
//! wrap(ARS(W_d·h, F) + b_d) by one more product (HE on a mask when F.bits + F.scale ≤ 32,
//! else OT) and one exact shift, and their argmax on
//! shares (a tournament of comparisons and multiplexers): the client learns the class, and the
//! logits only when the run reveals them ([`SsOptions::logits`]); the server learns nothing.
//! [`crate::reference::fastgrnn`] fixes the arithmetic; the secure run equals it bit for bit
//! except σ and tanh, which are within the math's ULP bound.
use super::products::{self, masked_product, HeKeys, Masked, MatJob, Products};
use crate::error::{NnError, Result};
use crate::model::Format as MainFormat;
use crate::reference::fastgrnn::{
    check_head_format, FastGrnnParams, Head, Widths, ACT_BITS, ACT_SCALE, GATE_SCALE, HEAD_FORMAT,
    SIGMOID_IN_SCALE, UPDATE_BITS,
};
use secinfer_core::Format;
use secinfer_net::{Channel, Cost, Phase};
use secinfer_ss::blocks::{ars, msb_share, mul_shared, mux, sext, trunc_reduce, zext_msb0_times};
use secinfer_ss::math::{self, Impl};
use secinfer_ss::matmul::{matvec_private, MatDims};
use secinfer_ss::reveal::{reveal, RevealTo};
use secinfer_ss::ring::{from_signed, mask, to_signed};
use secinfer_ss::ulp::MathFn;
use secinfer_ss::{BlockStat, CotSource, Ctx, Party};
use std::collections::BTreeMap;
use std::time::Instant;

/// What both parties know of the model: its shape and weight scale.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FastGrnnShape {
    pub input: usize,
    pub hidden: usize,
    pub steps: usize,
    pub classes: usize,
    pub weight_scale: u32,
    /// The head's (main) format.
    pub head: MainFormat,
}

impl FastGrnnShape {
    /// The shape of `m` on `steps` steps.
    pub fn of(m: &FastGrnnParams, steps: usize) -> FastGrnnShape {
        FastGrnnShape {
            input: m.input,
            hidden: m.hidden,
            steps,
            classes: m.head.classes,
            weight_scale: m.weight_scale,
            head: m.head.format,
        }
    }
    fn check(&self) -> Result<Widths> {
        let ok = |v: usize| (1..=4096).contains(&v);
        if !ok(self.input) || !ok(self.hidden) || !ok(self.steps) || !ok(self.classes) {
            return Err(NnError::config(format!(
                "fastgrnn: every dimension must be in 1..=4096, got {self:?}"
            )));
        }
        check_head_format(self.head)?;
        Widths::new(self.weight_scale)
    }
}

/// The run's options: the math of σ and tanh, what fills the OT pools, how the products with
/// the server's matrices run, and whether the client learns the logits besides the class.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SsOptions {
    pub math: Impl,
    pub source: CotSource,
    pub products: Products,
    pub logits: bool,
}

/// One party's account of a run (FastGRNN's or the GRU's on ss).
pub struct FastGrnnRun {
    /// Wall time of each phase on this party's clock (seconds).
    pub setup_s: f64,
    pub offline_s: f64,
    pub online_s: f64,
    /// This party's meter at the end of the online phase (the reveals excluded).
    pub cost: Cost,
    /// The client's, when revealed: the logits in the head's format.
    pub logits: Option<Vec<i64>>,
    /// The client's: the class (the logits' argmax, lowest index on ties).
    pub class: Option<usize>,
    /// Cost per online building block as this party saw it; with HE products also
    /// `he_offline`, the offline exchange of the products on masks.
    pub block_stats: BTreeMap<&'static str, BlockStat>,
}

/// Shares of every step's intermediates (tests compare them with the reference).
#[derive(Default)]
pub(crate) struct Trace {
    pub z_in: Vec<Vec<u64>>,
    pub h_in: Vec<Vec<u64>>,
    pub z: Vec<Vec<u64>>,
    pub ht: Vec<Vec<u64>>,
    pub h: Vec<Vec<u64>>,
}

fn fmt(bits: u32, scale: u32) -> secinfer_ss::Result<Format> {
    Ok(Format::new(bits, scale)?)
}

fn ring(v: &[i64], bits: u32) -> Vec<u64> {
    v.iter().map(|a| from_signed(*a, bits)).collect()
}

/// Row `r` of the `cols`-wide matrix `m` times `v` mod 2^bits.
pub(crate) fn dot_row(m: &[u64], r: usize, cols: usize, v: &[u64], bits: u32) -> u64 {
    m[r * cols..(r + 1) * cols]
        .iter()
        .zip(v)
        .fold(0u64, |s, (a, b)| s.wrapping_add(a.wrapping_mul(*b)))
        & mask(bits)
}

/// The server's matrices in ring form (empty at the client).
struct RingModel<'a> {
    p: &'a FastGrnnParams,
    w: Vec<u64>,
    u: Vec<u64>,
    head: Vec<u64>,
    /// ζ and ζ + ν in Z_{2^32}, as a 2 × 1 matrix.
    gates: Vec<u64>,
}

/// The products on masks a run with [`Products::He`] prepares offline: every step's W·x, U·h
/// from the second step on (h is zero before it), and the head's when its ring fits t = 2^32.
#[derive(Clone, Copy, Debug)]
pub(crate) struct HePlan {
    wx: MatJob,
    uh: Option<MatJob>,
    head: Option<MatJob>,
}

impl HePlan {
    pub(crate) fn of(sh: &FastGrnnShape, wd: &Widths) -> Result<HePlan> {
        let l = wd.acc_bits;
        if l > secinfer_he::kernels::coeff::T_BITS {
            return Err(NnError::Unsupported(format!(
                "fastgrnn: HE products need an accumulator of at most 32 bits, got {l} \
                 (a smaller weight scale, or --products ot)"
            )));
        }
        let hb = sh.head.bits + sh.head.scale;
        let job = |rows, cols, count, bits| MatJob {
            rows,
            cols,
            count,
            bits,
        };
        Ok(HePlan {
            wx: job(sh.hidden, sh.input, sh.steps, l),
            uh: (sh.steps > 1).then(|| job(sh.hidden, sh.hidden, sh.steps - 1, l)),
            head: (hb <= secinfer_he::kernels::coeff::T_BITS)
                .then(|| job(sh.classes, sh.hidden, 1, hb)),
        })
    }
    fn jobs(&self) -> Vec<MatJob> {
        [Some(self.wx), self.uh, self.head]
            .into_iter()
            .flatten()
            .collect()
    }
}

/// One party's products on masks ([`HePlan`]), ready for the online phase. Secret: no `Debug`.
pub(crate) struct HeOnline {
    wx: Masked,
    uh: Option<Masked>,
    head: Option<Masked>,
}

impl HeOnline {
    /// The plan's shapes alone, for the dry run that sizes the OT pools.
    pub(crate) fn dry(p: &HePlan) -> HeOnline {
        HeOnline {
            wx: Masked::dry(p.wx),
            uh: p.uh.map(Masked::dry),
            head: p.head.map(Masked::dry),
        }
    }

    /// Offline: the plan's products on masks (the server passes the model).
    pub(crate) fn prepare<C: Channel>(
        ch: &mut C,
        keys: &HeKeys,
        p: &HePlan,
        model: Option<&FastGrnnParams>,
    ) -> Result<HeOnline> {
        let mats: [&[i64]; 3] = match model {
            Some(m) => [&m.w, &m.u, &m.head.w],
            None => [&[], &[], &[]],
        };
        let jobs: Vec<(MatJob, &[i64])> = [Some(p.wx), p.uh, p.head]
            .into_iter()
            .zip(mats)
            .filter_map(|(j, w)| j.map(|j| (j, w)))
            .collect();
        debug_assert_eq!(jobs.len(), p.jobs().len());
        let mut done = products::offline(ch, keys, &jobs)?.into_iter();
        let mut next = || {
            done.next()
                .ok_or_else(|| NnError::Protocol("HE products: a job is missing".into()))
        };
        let wx = next()?;
        let uh = p.uh.map(|_| next()).transpose()?;
        let head = p.head.map(|_| next()).transpose()?;
        Ok(HeOnline { wx, uh, head })
    }
}

/// The online phase: shares of the logits (Z_{2^F.bits}, the head's format). `x` is the
/// client's sequence in Z_{2^16} (empty at the server); `model` the server's; `he` the
/// products on masks of a run with [`Products::He`].
#[allow(clippy::too_many_arguments)]
pub(crate) fn online<C: Channel>(
    ctx: &mut Ctx,
    ch: &mut C,
    sh: &FastGrnnShape,
    wd: &Widths,
    imp: Impl,
    model: Option<&FastGrnnParams>,
    x: &[u64],
    he: Option<&HeOnline>,
    mut trace: Option<&mut Trace>,
) -> secinfer_ss::Result<Vec<u64>> {
    let (hid, l) = (sh.hidden, wd.acc_bits);
    let (ml, m16) = (mask(l), mask(ACT_BITS));
    let hf = sh.head;
    let hb = hf.bits + hf.scale;
    let rm = model.map(|p| RingModel {
        p,
        w: ring(&p.w, l),
        u: ring(&p.u, l),
        head: ring(&p.head.w, hb),
        gates: ring(&[p.zeta, p.zeta + p.nu], UPDATE_BITS),
    });
    let empty: &[u64] = &[];
    let (w, u, head, gates) = match &rm {
        Some(m) => (&m.w[..], &m.u[..], &m.head[..], &m.gates[..]),
        None => (empty, empty, empty, empty),
    };
    let client = |v: &[u64]| -> Vec<u64> {
        if rm.is_some() {
            Vec::new()
        } else {
            v.to_vec()
        }
    };
    let dims = |rows, cols, count| MatDims { rows, cols, count };
    let wx = match he {
        // x is the client's alone: its own share, sign-extended to L bits.
        Some(he) => {
            let own: Vec<u64> = x
                .iter()
                .map(|v| from_signed(to_signed(*v, ACT_BITS), l))
                .collect();
            masked_product(ctx, ch, &he.wx, w, &own, 0, sh.steps)?
        }
        None => matvec_private(
            ctx,
            ch,
            w,
            x,
            dims(hid, sh.input, sh.steps),
            ACT_BITS,
            true,
            l,
        )?,
    };
    let mut h = vec![0u64; hid];
    for t in 0..sh.steps {
        let hl: Vec<u64> = h.iter().map(|v| v & ml).collect();
        // With HE the masked product already holds U·h_server (and step 0's state is zero).
        let (uh, with_own) = match (he, t) {
            (Some(_), 0) => (vec![0; hid], true),
            (Some(he), t) => {
                let m = he.uh.as_ref().ok_or_else(|| {
                    secinfer_ss::SsError::InvalidArgument("no masks for U·h".into())
                })?;
                (masked_product(ctx, ch, m, u, &hl, t - 1, 1)?, true)
            }
            (None, _) => {
                let d = dims(hid, hid, 1);
                (
                    matvec_private(ctx, ch, u, &client(&hl), d, l, false, l)?,
                    false,
                )
            }
        };
        // [acc + b_z ; 2·(acc + b_h)]: one shift to scale 8 gives σ's input and, read at scale
        // 8, 2x for tanh's (the doubled half fits: the reference's ring bound, see gate_inputs).
        let mut acc = vec![0u64; 2 * hid];
        for i in 0..hid {
            let mut a = wx[t * hid + i].wrapping_add(uh[i]);
            let (mut bz, mut bh) = (0, 0);
            if let Some(m) = &rm {
                if !with_own {
                    a = a.wrapping_add(dot_row(&m.u, i, hid, &hl, l));
                }
                bz = from_signed(m.p.b_z[i], l);
                bh = from_signed(m.p.b_h[i], l);
            }
            acc[i] = a.wrapping_add(bz) & ml;
            acc[hid + i] = a.wrapping_add(bh).wrapping_mul(2) & ml;
        }
        // The gate inputs are the arithmetic shift read mod 2^16, and L − shift = 16: the
        // wrap of the whole accumulator moves ⌊x / 2^shift⌋ by a multiple of 2^16, so SIRNN's
        // truncate-reduce (the low bits' carry alone: a millionaires' run on `shift` bits, not
        // on L) gives the same 16 bits with fewer rounds and bytes than the exact shift.
        let gi: Vec<u64> = if l - wd.shift_z == ACT_BITS {
            trunc_reduce(ctx, ch, &acc, l, wd.shift_z)?
        } else {
            ars(ctx, ch, &acc, l, wd.shift_z)?
                .iter()
                .map(|v| v & m16)
                .collect()
        };
        h = update_step(ctx, ch, imp, &gi, &h, gates, trace.as_deref_mut())?;
    }
    // The head: W_d·h mod 2^(F.bits + F.scale), whose exact shift by F is (W_d·h) ≫ F mod
    // 2^F.bits whatever the sum's size: the reference's wrap((W_d·h) ≫ F + b_d).
    let hl: Vec<u64> = h.iter().map(|v| v & mask(hb)).collect();
    let masked = he.and_then(|he| he.head.as_ref());
    let mut acc = match masked {
        Some(m) => masked_product(ctx, ch, m, head, &hl, 0, 1)?,
        None => matvec_private(
            ctx,
            ch,
            head,
            &client(&hl),
            dims(sh.classes, hid, 1),
            hb,
            false,
            hb,
        )?,
    };
    if let (Some(m), None) = (&rm, masked) {
        for (c, v) in acc.iter_mut().enumerate() {
            *v = v.wrapping_add(dot_row(&m.head, c, hid, &hl, hb)) & mask(hb);
        }
    }
    let mut lg = ars(ctx, ch, &acc, hb, hf.scale)?;
    for (c, v) in lg.iter_mut().enumerate() {
        let b = rm
            .as_ref()
            .map_or(0, |m| from_signed(m.p.head.b[c], hf.bits));
        *v = v.wrapping_add(b) & mask(hf.bits);
    }
    Ok(lg)
}

/// One step's gates and update from the gate inputs `gi` ([z_in ; 2·h_in] mod 2^16, scale 8)
/// and the state `h` (scale 9): σ of both halves in one batch, tanh from σ, and
/// FastGRNN's update h' = (ζ(1 − z) + ν)·h̃ + z·h (the server's scalars ζ, ζ + ν in `gates`).
fn update_step<C: Channel>(
    ctx: &mut Ctx,
    ch: &mut C,
    imp: Impl,
    gi: &[u64],
    h: &[u64],
    gates: &[u64],
    trace: Option<&mut Trace>,
) -> secinfer_ss::Result<Vec<u64>> {
    let hid = h.len();
    let (m16, mu) = (mask(ACT_BITS), mask(UPDATE_BITS));
    let (sig_in, sig_out) = (fmt(ACT_BITS, SIGMOID_IN_SCALE)?, fmt(ACT_BITS, GATE_SCALE)?);
    // σ on both halves in one batch: z = σ(z_in) and S = σ(2·h_in), all at scale 14.
    let sg = math::evaluate(ctx, ch, MathFn::Sigmoid, imp, gi, sig_in, sig_out)?;
    // σ ∈ [0, 1] at scale 14 has a zero MSB in 16 bits. The extension also gives ζ·S and
    // (ζ+ν)·S of the tanh half from its own COTs (the server's scalars times shared
    // values), so ζ·h̃ = 2ζ·S − ζ·2^14 and (ζ+ν)·h̃ need no product flights.
    let (s32, ks) = zext_msb0_times(ctx, ch, &sg, ACT_BITS, UPDATE_BITS, hid, gates, 2)?;
    let z32 = s32[..hid].to_vec();
    // h̃ = tanh(h_in) = 2σ(2·h_in) − 1 at scale 14: local, exact from S.
    let p0 = ctx.is_p0();
    let ht32: Vec<u64> = s32[hid..]
        .iter()
        .map(|v| {
            let t = v.wrapping_mul(2);
            if p0 {
                t.wrapping_sub(1 << GATE_SCALE) & mu
            } else {
                t & mu
            }
        })
        .collect();
    // ζ·h̃ and (ζ+ν)·h̃ (scale 28) from the extension's k·S.
    let g: Vec<u64> = (0..hid)
        .flat_map(|i| [0, 1].map(|k| (i, k)))
        .map(|(i, k)| {
            let off = gates.get(k).map_or(0, |gk| gk << GATE_SCALE);
            ks[k][i].wrapping_mul(2).wrapping_sub(off) & mu
        })
        .collect();
    // d = h − ζ·h̃ at scale 9; s = (ζ+ν)·h̃ + z·d at scale 28; h' = s at scale 9.
    let up = 2 * GATE_SCALE - ACT_SCALE;
    let dp: Vec<u64> = (0..hid)
        .map(|i| (h[i] << up).wrapping_sub(g[2 * i]) & mu)
        .collect();
    let d = ars(ctx, ch, &dp, UPDATE_BITS, up)?;
    let p = mul_shared(ctx, ch, &z32, &d, UPDATE_BITS)?;
    let zd_up = GATE_SCALE - ACT_SCALE;
    let s: Vec<u64> = (0..hid)
        .map(|i| g[2 * i + 1].wrapping_add(p[i] << zd_up) & mu)
        .collect();
    let h = ars(ctx, ch, &s, UPDATE_BITS, up)?;
    if let Some(tr) = trace {
        tr.z_in.push(gi[..hid].to_vec());
        tr.h_in.push(gi[hid..].to_vec());
        tr.z.push(sg[..hid].to_vec());
        tr.ht.push(ht32.iter().map(|v| v & m16).collect());
        tr.h.push(h.clone());
    }
    Ok(h)
}

/// Shares (Z_{2^(bits+1)}) of the index of the largest of the signed `bits`-bit shared values
/// `v`, the lowest on ties: each round compares neighbours (the MSB of a − b, exact after one
/// sign extension) and keeps the right one, value and index by one multiplexer, only when it
/// is strictly larger; the left side always holds the lower indices, so ties keep them.
pub(crate) fn argmax_shared<C: Channel>(
    ctx: &mut Ctx,
    ch: &mut C,
    v: &[u64],
    bits: u32,
) -> secinfer_ss::Result<u64> {
    let w = bits + 1;
    let mw = mask(w);
    let p0 = ctx.is_p0();
    let mut vals = sext(ctx, ch, v, bits, w)?;
    let mut idx: Vec<u64> = (0..v.len() as u64)
        .map(|i| if p0 { i } else { 0 })
        .collect();
    while vals.len() > 1 {
        let n = vals.len() / 2;
        let diff: Vec<u64> = (0..n)
            .map(|k| vals[2 * k].wrapping_sub(vals[2 * k + 1]) & mw)
            .collect();
        let lt = msb_share(ctx, ch, &diff, w)?;
        let mut sel = lt.clone();
        sel.extend_from_slice(&lt);
        let mut delta: Vec<u64> = (0..n)
            .map(|k| vals[2 * k + 1].wrapping_sub(vals[2 * k]) & mw)
            .collect();
        delta.extend((0..n).map(|k| idx[2 * k + 1].wrapping_sub(idx[2 * k]) & mw));
        let picked = mux(ctx, ch, &sel, &delta, w)?;
        let carry = (vals.len() % 2 == 1).then(|| (vals[2 * n], idx[2 * n]));
        let mut nv: Vec<u64> = (0..n)
            .map(|k| vals[2 * k].wrapping_add(picked[k]) & mw)
            .collect();
        let mut ni: Vec<u64> = (0..n)
            .map(|k| idx[2 * k].wrapping_add(picked[n + k]) & mw)
            .collect();
        if let Some((a, i)) = carry {
            nv.push(a);
            ni.push(i);
        }
        (vals, idx) = (nv, ni);
    }
    Ok(idx[0])
}

/// Reveals the class share of [`argmax_shared`] on `bits`-bit values to the client, which
/// checks it against `classes` (the server's share is the peer's bytes).
pub(crate) fn reveal_class<C: Channel>(
    ctx: &mut Ctx,
    ch: &mut C,
    cls: u64,
    bits: u32,
    classes: usize,
) -> Result<Option<usize>> {
    let class = reveal(ctx, ch, &[cls], bits + 1, RevealTo::Only(Party::Client))?
        .and_then(|v| v.first().copied())
        .map(|c| c as usize);
    if class.is_some_and(|c| c >= classes) {
        return Err(NnError::Malformed(
            "the revealed class is out of range".into(),
        ));
    }
    Ok(class)
}

/// The online phase and the argmax: shares of the logits and of the class.
#[allow(clippy::too_many_arguments)]
fn online_class<C: Channel>(
    ctx: &mut Ctx,
    ch: &mut C,
    sh: &FastGrnnShape,
    wd: &Widths,
    imp: Impl,
    model: Option<&FastGrnnParams>,
    x: &[u64],
    he: Option<&HeOnline>,
) -> secinfer_ss::Result<(Vec<u64>, u64)> {
    let lg = online(ctx, ch, sh, wd, imp, model, x, he, None)?;
    let class = argmax_shared(ctx, ch, &lg, sh.head.bits)?;
    Ok((lg, class))
}

/// A public-seed xorshift: the benchmark's random models and inputs, which both processes of
/// a two-process run regenerate. Not a source of secrets.
struct SeedRng(u64);
impl SeedRng {
    fn new(seed: u64) -> SeedRng {
        SeedRng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }
    /// Uniform in [−r, r].
    fn int(&mut self, r: i64) -> i64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % (2 * r as u64 + 1)) as i64 - r
    }
}

/// A random FastGRNN of the given shape (Google-30's for OPAF's Table XI): weights and biases
/// uniform in ±0.5, ζ ≈ 0.9, ν ≈ 0.05, FastGRNN's usual range after training; the head in
/// [`HEAD_FORMAT`].
pub fn random_params(
    input: usize,
    hidden: usize,
    classes: usize,
    weight_scale: u32,
    seed: u64,
) -> Result<FastGrnnParams> {
    let wd = Widths::new(weight_scale)?;
    let mut r = SeedRng::new(seed);
    let mut v =
        |n: usize, scale: u32| -> Vec<i64> { (0..n).map(|_| r.int(1 << (scale - 1))).collect() };
    let p = FastGrnnParams {
        input,
        hidden,
        weight_scale,
        w: v(hidden * input, weight_scale),
        u: v(hidden * hidden, weight_scale),
        b_z: v(hidden, wd.acc_scale),
        b_h: v(hidden, wd.acc_scale),
        zeta: (0.9 * f64::from(1u32 << GATE_SCALE)) as i64,
        nu: (0.05 * f64::from(1u32 << GATE_SCALE)) as i64,
        head: Head {
            classes,
            w: v(classes * hidden, HEAD_FORMAT.scale),
            b: v(classes, HEAD_FORMAT.scale),
            format: HEAD_FORMAT,
        },
    };
    p.validate()?;
    Ok(p)
}

/// A random client sequence (steps × input) in ±2 at scale 9.
pub fn random_input(steps: usize, input: usize, seed: u64) -> Vec<i64> {
    let mut r = SeedRng::new(seed ^ 0x5555);
    (0..steps * input).map(|_| r.int(2 << ACT_SCALE)).collect()
}

/// The client's sequence as ring elements, checked (steps × input values in 16 bits).
fn client_input(sh: &FastGrnnShape, x: Option<&[i64]>) -> Result<Vec<u64>> {
    let x = x.ok_or_else(|| NnError::Input("the client passes its sequence".into()))?;
    if x.len() != sh.steps * sh.input {
        return Err(NnError::Input(format!(
            "fastgrnn: {} values, expected {} steps × {} features",
            x.len(),
            sh.steps,
            sh.input
        )));
    }
    let lim = 1i64 << (ACT_BITS - 1);
    if x.iter().any(|v| !(-lim..lim).contains(v)) {
        return Err(NnError::Input("fastgrnn: inputs must fit 16 bits".into()));
    }
    Ok(ring(x, ACT_BITS))
}

/// Runs FastGRNN → Dense → argmax as `party` over `ch`: setup (base OTs; with HE products the
/// client's public key), offline (the HE products on masks, then the OT pools a dry run says
/// the online phase consumes), online, then the class (and the logits when `opts.logits`) to
/// the client.
/// The server passes `model` (whose shape must be `shape`), the client its sequence `x`
/// (steps × input, 16-bit at scale 9).
pub fn run_fastgrnn<C: Channel>(
    party: Party,
    ch: &mut C,
    shape: &FastGrnnShape,
    opts: &SsOptions,
    model: Option<&FastGrnnParams>,
    x: Option<&[i64]>,
) -> Result<FastGrnnRun> {
    let wd = shape.check()?;
    let (model, xs) = match party {
        Party::Server => {
            let m = model.ok_or_else(|| NnError::config("the server passes the model"))?;
            m.validate()?;
            if FastGrnnShape::of(m, shape.steps) != *shape {
                return Err(NnError::config(
                    "fastgrnn: the model does not have the shape",
                ));
            }
            (Some(m), Vec::new())
        }
        Party::Client => (None, client_input(shape, x)?),
    };
    let he_plan = match opts.products {
        Products::He => Some(HePlan::of(shape, &wd)?),
        Products::Ot => None,
    };
    ch.set_phase(Phase::Setup);
    let t0 = Instant::now();
    let mut ctx = Ctx::setup_with(party, ch, opts.source)?;
    let keys = he_plan
        .map(|_| products::setup(ch, party == Party::Client))
        .transpose()?;
    let setup_s = t0.elapsed().as_secs_f64();
    let dry_he = he_plan.as_ref().map(HeOnline::dry);
    let plan = secinfer_ss::plan_for(party, |c, dry| {
        online_class(c, dry, shape, &wd, opts.math, model, &xs, dry_he.as_ref())
    })?;
    ch.set_phase(Phase::Offline);
    let t1 = Instant::now();
    let (b0, t_he) = (ch.cost().total().bytes(), Instant::now());
    let he = match (&keys, &he_plan) {
        (Some(k), Some(p)) => Some(HeOnline::prepare(ch, k, p, model)?),
        _ => None,
    };
    let he_stat = BlockStat {
        calls: 1,
        time_s: t_he.elapsed().as_secs_f64(),
        bytes: ch.cost().total().bytes() - b0,
        ..BlockStat::default()
    };
    ctx.preprocess(ch, plan)?;
    secinfer_ss::session::barrier(party, ch)?;
    let offline_s = t1.elapsed().as_secs_f64();
    ch.set_phase(Phase::Online);
    ctx.reset_counts();
    let t2 = Instant::now();
    let (lg, cls) = online_class(&mut ctx, ch, shape, &wd, opts.math, model, &xs, he.as_ref())?;
    ch.flush()?;
    let online_s = t2.elapsed().as_secs_f64();
    let cost = ch.cost();
    let to_client = RevealTo::Only(Party::Client);
    let class = reveal_class(&mut ctx, ch, cls, shape.head.bits, shape.classes)?;
    let logits = if opts.logits {
        let out = reveal(&mut ctx, ch, &lg, shape.head.bits, to_client)?;
        out.map(|v| v.iter().map(|a| to_signed(*a, shape.head.bits)).collect())
    } else {
        None
    };
    Ok(FastGrnnRun {
        setup_s,
        offline_s,
        online_s,
        cost,
        logits,
        class,
        block_stats: {
            let mut st = std::mem::take(&mut ctx.stats);
            // The offline HE exchange, beside the online blocks: its wire cost and wall time.
            if he.is_some() {
                st.insert("he_offline", he_stat);
            }
            st
        },
    })
}

#[cfg(test)]
mod tests;
