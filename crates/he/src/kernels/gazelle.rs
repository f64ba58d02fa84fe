//! GAZELLE: hybrid matrix–vector product (diagonals + ciphertext rotate-and-sum) and the
//! output-rotation MIMO convolution.

use rayon::prelude::*;

use super::conv::ConvPlan;
use super::{acc_add, take, MatVecPlan};
use crate::eval::Evaluator;
use crate::HeError;

/// Weight at (output ct gi, chunk c, diagonal t, slot s) of the hybrid encoding.
fn hybrid_weight(
    plan: &MatVecPlan,
    w: &[Vec<u64>],
    gi: usize,
    c: usize,
    t: usize,
    s: usize,
) -> u64 {
    let b = plan.block;
    let (u, j) = (s / b, s % b);
    let row = plan.out_row(gi, u, j % plan.g);
    let col = c * b + (j + t) % b;
    if row < plan.rows && col < plan.cols {
        w[row][col]
    } else {
        0
    }
}

pub(crate) fn prepare<E: Evaluator>(
    ev: &E,
    plan: &MatVecPlan,
    w: &[Vec<u64>],
) -> Result<Vec<E::Pt>, HeError> {
    let slots = plan.row_len * plan.slot_rows;
    let (cc, g) = (plan.col_chunks, plan.g);
    (0..plan.out_cts * cc * g)
        .into_par_iter()
        .map(|idx| {
            let (gi, c, t) = (idx / (cc * g), (idx / g) % cc, idx % g);
            ev.encode(|| {
                (0..slots)
                    .map(|s| hybrid_weight(plan, w, gi, c, t, s))
                    .collect()
            })
        })
        .collect()
}

/// GAZELLE hybrid: per output ciphertext ScMult cc·g, HstPerm cc·(g − 1) (one DecPerm per
/// input when g > 1), then log2(B/g) Perm + Add of ciphertext rotate-and-sum.
pub fn matvec<E: Evaluator>(
    ev: &E,
    plan: &MatVecPlan,
    pts: &[E::Pt],
    inputs: &[E::Ct],
) -> Result<Vec<E::Ct>, HeError> {
    let g = plan.g;
    let cc = plan.col_chunks;
    // Hoisted rotations of each input by 1..g−1.
    let rots: Vec<Vec<E::Ct>> = inputs
        .par_iter()
        .map(|x| {
            let mut v = vec![x.clone()];
            if g > 1 {
                let h = ev.decompose(x);
                for t in 1..g {
                    v.push(ev.rotate_hoisted(&h, t)?);
                }
            }
            Ok(v)
        })
        .collect::<Result<_, HeError>>()?;
    (0..plan.out_cts)
        .into_par_iter()
        .map(|gi| {
            let mut acc = None;
            for (c, rc) in rots.iter().enumerate() {
                for (t, xr) in rc.iter().enumerate() {
                    acc_add(ev, &mut acc, ev.sc_mult(xr, &pts[(gi * cc + c) * g + t]));
                }
            }
            let mut acc = take(acc)?;
            let mut s = plan.block / 2;
            while s >= g {
                let r = ev.rotate(&acc, s)?;
                ev.add_assign(&mut acc, &r);
                s /= 2;
            }
            Ok(acc)
        })
        .collect()
}

/// GAZELLE output-rotation MIMO convolution: every (input ct, output ct) block rotates its
/// c_n − 1 diagonals separately.
pub fn conv<E: Evaluator>(
    ev: &E,
    plan: &ConvPlan,
    pts: &[E::Pt],
    inputs: &[E::Ct],
) -> Result<Vec<E::Ct>, HeError> {
    let rots = plan.input_rotations(ev, inputs)?;
    let cn = plan.cn;
    (0..plan.out_cts)
        .into_par_iter()
        .map(|o| {
            let mut out = None;
            for (i, ri) in rots.iter().enumerate() {
                let mut blk = None;
                for d in 0..cn {
                    let mut siso = plan.siso(ev, pts, ri, i, o, d)?;
                    if d > 0 {
                        siso = ev.rotate(&siso, d * plan.block)?;
                    }
                    acc_add(ev, &mut blk, siso);
                }
                acc_add(ev, &mut out, take(blk)?);
            }
            take(out)
        })
        .collect()
}
