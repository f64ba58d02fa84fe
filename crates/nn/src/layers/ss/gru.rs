//! CryptoGRU's GRU classifier (Embedding → GRU → Dense → argmax) on Z_{2^l} shares: the model
//! `layers::gru` runs on `hegc`, run here with OPAF's (or SIRNN's) sigmoid and tanh and SIRNN's
//! OT products, so the two families' costs compare on one model (`bench gru --family ss`).
//!
//! The client embeds its tokens itself (a public table) and holds the sequence x in the main
//! format (bits, F); every value lives in Z_{2^(bits+F)}, where a product of two main-format
//! values and its exact shift by F fit. Per step, as docs/model-format.md's GRU rule:
//! gh = ARS(W_hh·h, F) + b_hh (an OT product on the client's share, the server's share
//! locally); r, z = σ(gi + gh) on 2H values in one batch (the main format in and out, the
//! math's ULP bound); n = ReLU(gi_n + ARS(r ⊙ gh_n, F)) exactly (the CG variants), or tanh
//! (Baseline) within the bound; h' = n + ARS(z ⊙ (h − n), F). The input projections gi run for
//! all steps in one batch (x is the client's own). Then the head ARS(W_fc·h, F) + b_fc and its
//! argmax on shares ([`super::fastgrnn`]'s tournament): the client learns the class.
//!
//! The reference wraps every intermediate to `bits`; the shares here keep the unwrapped value,
//! so the two agree where the reference counts no overflow (a model whose values stay in
//! range, as the tests assert for theirs).
use super::fastgrnn::{argmax_shared, dot_row, reveal_class, FastGrnnRun};
use crate::error::{NnError, Result};
use crate::model::{Candidate, FixedPointConfig, Format};
use crate::reference::{Arith, Counters, ExactActivations};
use secinfer_net::{Channel, Phase};
use secinfer_ss::blocks::{ars, mul_shared, relu, sext, zext_msb0};
use secinfer_ss::math::{self, Impl};
use secinfer_ss::matmul::{matvec_private, MatDims};
use secinfer_ss::ring::{from_signed, mask};
use secinfer_ss::ulp::MathFn;
use secinfer_ss::{CotSource, Ctx, Party};
use std::time::Instant;

/// What both parties know: the shape, the main format and the candidate activation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GruShape {
    pub input: usize,
    pub hidden: usize,
    pub steps: usize,
    pub classes: usize,
    pub main: Format,
    pub candidate: Candidate,
}

impl GruShape {
    fn check(&self) -> Result<()> {
        let ok = |v: usize| (1..=4096).contains(&v);
        if !ok(self.input) || !ok(self.hidden) || !ok(self.steps) || !ok(self.classes) {
            return Err(NnError::config(format!(
                "gru on ss: every dimension must be in 1..=4096, got {self:?}"
            )));
        }
        let (b, f) = (self.main.bits, self.main.scale);
        if !(2..=16).contains(&f) || b <= f + 1 || b + f > 48 {
            return Err(NnError::Unsupported(format!(
                "gru on ss: main format ({b}, {f}) needs 2..=16 fraction bits and bits + frac ≤ 48"
            )));
        }
        Ok(())
    }
    fn ring(&self) -> u32 {
        self.main.bits + self.main.scale
    }
}

/// A GRU classifier quantized in its main format (every activation in the main format, as
/// CryptoGRU's Baseline and CG-1). Secret (the server's): no `Debug`.
#[derive(Clone)]
pub struct GruParams {
    pub shape: GruShape,
    /// 3H × input, rows r, z, n (PyTorch's order).
    pub w_ih: Vec<i64>,
    /// 3H × H.
    pub w_hh: Vec<i64>,
    pub b_ih: Vec<i64>,
    pub b_hh: Vec<i64>,
    /// classes × H.
    pub w_fc: Vec<i64>,
    pub b_fc: Vec<i64>,
}

impl GruParams {
    fn fp(&self) -> FixedPointConfig {
        FixedPointConfig {
            main: self.shape.main,
            sigmoid: None,
            candidate: None,
        }
    }

    /// The plaintext reference (docs/model-format.md's GRU rule with the exact activations) on
    /// `x` (steps × input in the main format): every state, the logits, and the counters (wraps
    /// the secure run does not reproduce).
    pub fn reference(&self, x: &[i64]) -> (Vec<Vec<i64>>, Vec<i64>, Counters) {
        let sh = self.shape;
        let mut counters = Counters::default();
        let mut a = Arith {
            main: sh.main,
            acts: &ExactActivations,
            counters: &mut counters,
        };
        let mut h = vec![0i64; sh.hidden];
        let mut states = Vec::with_capacity(sh.steps);
        for xt in x.chunks(sh.input) {
            let gi = a.linear(&self.w_ih, &self.b_ih, xt);
            h = a.gru_step(&self.fp(), sh.candidate, &self.w_hh, &self.b_hh, &gi, &h);
            states.push(h.clone());
        }
        let logits = a.linear(&self.w_fc, &self.b_fc, &h);
        (states, logits, counters)
    }
}

/// A random GRU classifier in the main format (20, 12): weights in ±0.25, biases in ±0.1, from a
/// public seed (the benchmark's; both processes regenerate it).
pub fn random_gru(shape: GruShape, seed: u64) -> Result<GruParams> {
    shape.check()?;
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let f = shape.main.scale;
    let mut v = |n: usize, r: i64| -> Vec<i64> {
        (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                (s % (2 * r as u64 + 1)) as i64 - r
            })
            .collect()
    };
    let (i, h, c) = (shape.input, shape.hidden, shape.classes);
    let (w, b) = (1i64 << (f - 2), (1i64 << f) / 10);
    Ok(GruParams {
        shape,
        w_ih: v(3 * h * i, w),
        w_hh: v(3 * h * h, w),
        b_ih: v(3 * h, b),
        b_hh: v(3 * h, b),
        w_fc: v(c * h, w),
        b_fc: v(c, b),
    })
}

/// Shares of every step's intermediates (tests compare them with the reference).
#[derive(Default)]
pub(crate) struct GruTrace {
    pub gh: Vec<Vec<u64>>,
    pub rz: Vec<Vec<u64>>,
    pub n: Vec<Vec<u64>>,
    pub h: Vec<Vec<u64>>,
}

/// ARS(M·v, F) + b in Z_{2^ring}: the client's share of v by OT, the server's locally.
#[allow(clippy::too_many_arguments)]
fn linear<C: Channel>(
    ctx: &mut Ctx,
    ch: &mut C,
    m: Option<(&[u64], &[i64])>,
    v: &[u64],
    rows: usize,
    cols: usize,
    ring: u32,
    frac: u32,
) -> secinfer_ss::Result<Vec<u64>> {
    let mr = mask(ring);
    let dims = MatDims {
        rows,
        cols,
        count: 1,
    };
    let (mat, theirs): (&[u64], &[u64]) = match m {
        Some((w, _)) => (w, &[]),
        None => (&[], v),
    };
    let mut acc = matvec_private(ctx, ch, mat, theirs, dims, ring, false, ring)?;
    if let Some((w, _)) = m {
        for (r, a) in acc.iter_mut().enumerate() {
            *a = a.wrapping_add(dot_row(w, r, cols, v, ring)) & mr;
        }
    }
    let mut out = ars(ctx, ch, &acc, ring, frac)?;
    if let Some((_, b)) = m {
        for (o, bi) in out.iter_mut().zip(b) {
            *o = o.wrapping_add(from_signed(*bi, ring)) & mr;
        }
    }
    Ok(out)
}

/// The online phase: shares of the logits in Z_{2^bits}. `x` is the client's sequence
/// (main-format values mod 2^bits; empty at the server), `model` the server's.
pub(crate) fn gru_online<C: Channel>(
    ctx: &mut Ctx,
    ch: &mut C,
    sh: &GruShape,
    imp: Impl,
    model: Option<&GruParams>,
    x: &[u64],
    mut trace: Option<&mut GruTrace>,
) -> secinfer_ss::Result<Vec<u64>> {
    let (bits, f, hid) = (sh.main.bits, sh.main.scale, sh.hidden);
    let l = sh.ring();
    let (ml, mb) = (mask(l), mask(bits));
    let ring = |v: &[i64]| -> Vec<u64> { v.iter().map(|a| from_signed(*a, l)).collect() };
    let rm = model.map(|p| (ring(&p.w_ih), ring(&p.w_hh), ring(&p.w_fc)));
    let empty: &[u64] = &[];
    let w_ih = rm.as_ref().map_or(empty, |m| &m.0[..]);
    let dims = MatDims {
        rows: 3 * hid,
        cols: sh.input,
        count: sh.steps,
    };
    let acc = matvec_private(ctx, ch, w_ih, x, dims, bits, true, l)?;
    let mut gi = ars(ctx, ch, &acc, l, f)?;
    if let Some(p) = model {
        for (k, g) in gi.iter_mut().enumerate() {
            *g = g.wrapping_add(from_signed(p.b_ih[k % (3 * hid)], l)) & ml;
        }
    }
    let mf = sh.main;
    let mut h = vec![0u64; hid];
    for t in 0..sh.steps {
        let git = &gi[t * 3 * hid..(t + 1) * 3 * hid];
        let whh = rm.as_ref().zip(model).map(|(m, p)| (&m.1[..], &p.b_hh[..]));
        let gh = linear(ctx, ch, whh, &h, 3 * hid, hid, l, f)?;
        let a: Vec<u64> = (0..2 * hid)
            .map(|i| git[i].wrapping_add(gh[i]) & mb)
            .collect();
        let rz = math::evaluate(ctx, ch, MathFn::Sigmoid, imp, &a, mf, mf)?;
        // σ ∈ [0, 1] in the main format has a zero MSB.
        let rz_l = zext_msb0(ctx, ch, &rz, bits, l)?;
        let rgh = mul_shared(ctx, ch, &rz_l[..hid], &gh[2 * hid..], l)?;
        let rh = ars(ctx, ch, &rgh, l, f)?;
        let an: Vec<u64> = (0..hid)
            .map(|i| git[2 * hid + i].wrapping_add(rh[i]) & ml)
            .collect();
        let n = match sh.candidate {
            Candidate::Relu => relu(ctx, ch, &an, l)?,
            Candidate::Tanh => {
                let a16: Vec<u64> = an.iter().map(|v| v & mb).collect();
                let th = math::evaluate(ctx, ch, MathFn::Tanh, imp, &a16, mf, mf)?;
                sext(ctx, ch, &th, bits, l)?
            }
        };
        let d: Vec<u64> = (0..hid).map(|i| h[i].wrapping_sub(n[i]) & ml).collect();
        let zd = mul_shared(ctx, ch, &rz_l[hid..], &d, l)?;
        let zd = ars(ctx, ch, &zd, l, f)?;
        h = (0..hid).map(|i| n[i].wrapping_add(zd[i]) & ml).collect();
        if let Some(tr) = trace.as_deref_mut() {
            tr.gh.push(gh);
            tr.rz.push(rz);
            tr.n.push(n);
            tr.h.push(h.clone());
        }
    }
    let wfc = rm.as_ref().zip(model).map(|(m, p)| (&m.2[..], &p.b_fc[..]));
    let lg = linear(ctx, ch, wfc, &h, sh.classes, hid, l, f)?;
    Ok(lg.iter().map(|v| v & mb).collect())
}

/// Runs the GRU classifier as `party` over `ch` (setup, OT pools sized by a dry run, online,
/// the class to the client). The server passes `model` (of shape `shape`), the client its
/// sequence `x` (steps × input, main format).
pub fn run_gru<C: Channel>(
    party: Party,
    ch: &mut C,
    shape: &GruShape,
    math: Impl,
    source: CotSource,
    model: Option<&GruParams>,
    x: Option<&[i64]>,
) -> Result<FastGrnnRun> {
    shape.check()?;
    let bits = shape.main.bits;
    let xs: Vec<u64> = match (party, model, x) {
        (Party::Server, Some(m), _) if m.shape == *shape => Vec::new(),
        (Party::Server, _, _) => {
            return Err(NnError::config(
                "gru on ss: the server passes a model of the shape",
            ))
        }
        (Party::Client, _, Some(x)) if x.len() == shape.steps * shape.input => {
            if x.iter().any(|v| shape.main.wrap(*v) != *v) {
                return Err(NnError::Input(
                    "gru on ss: inputs must fit the main format".into(),
                ));
            }
            x.iter().map(|v| from_signed(*v, bits)).collect()
        }
        (Party::Client, _, _) => {
            return Err(NnError::Input(
                "gru on ss: the client passes steps × input values".into(),
            ))
        }
    };
    ch.set_phase(Phase::Setup);
    let t0 = Instant::now();
    let mut ctx = Ctx::setup_with(party, ch, source)?;
    let setup_s = t0.elapsed().as_secs_f64();
    let both = |c: &mut Ctx, ch: &mut secinfer_ss::DryChannel| {
        let lg = gru_online(c, ch, shape, math, model, &xs, None)?;
        argmax_shared(c, ch, &lg, bits)
    };
    let plan = secinfer_ss::plan_for(party, both)?;
    ch.set_phase(Phase::Offline);
    let t1 = Instant::now();
    ctx.preprocess(ch, plan)?;
    secinfer_ss::session::barrier(party, ch)?;
    let offline_s = t1.elapsed().as_secs_f64();
    ch.set_phase(Phase::Online);
    ctx.reset_counts();
    let t2 = Instant::now();
    let lg = gru_online(&mut ctx, ch, shape, math, model, &xs, None)?;
    let cls = argmax_shared(&mut ctx, ch, &lg, bits)?;
    ch.flush()?;
    let online_s = t2.elapsed().as_secs_f64();
    let cost = ch.cost();
    let class = reveal_class(&mut ctx, ch, cls, bits, shape.classes)?;
    Ok(FastGrnnRun {
        setup_s,
        offline_s,
        online_s,
        cost,
        logits: None,
        class,
        block_stats: std::mem::take(&mut ctx.stats),
    })
}

#[cfg(test)]
mod tests;
