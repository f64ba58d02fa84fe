//! GALA: row-encoding-share-RaS matrix–vector product and kernel-grouping convolution.

use rayon::prelude::*;

use super::conv::ConvPlan;
use super::{acc_add, take, MatVecPlan};
use crate::eval::Evaluator;
use crate::HeError;

/// Weight at (output ct gi, chunk c, rotation t, slot q) of the row encoding: the product in
/// slot q is moved by the rotation to slot p = q − t, whose block/in-block index say the row.
fn row_weight(plan: &MatVecPlan, w: &[Vec<u64>], gi: usize, c: usize, t: usize, q: usize) -> u64 {
    let (rl, b) = (plan.row_len, plan.block);
    let (r, pos) = (q / rl, q % rl);
    let p = r * rl + (pos + rl - t % rl) % rl;
    let (u, jp) = (p / b, p % b);
    let row = plan.out_row(gi, u, jp % plan.g);
    let col = c * b + pos % b;
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
                    .map(|q| row_weight(plan, w, gi, c, t, q))
                    .collect()
            })
        })
        .collect()
}

/// GALA row-encoding-share-RaS: per output ciphertext ScMult cc·g, Perm g − 1,
/// Add g·(cc − 1) + g − 1; no rotation of the input and no ciphertext rotate-and-sum (that
/// runs on the plaintext shares, see [`MatVecPlan::extract`]).
pub fn matvec<E: Evaluator>(
    ev: &E,
    plan: &MatVecPlan,
    pts: &[E::Pt],
    inputs: &[E::Ct],
) -> Result<Vec<E::Ct>, HeError> {
    let g = plan.g;
    let cc = plan.col_chunks;
    (0..plan.out_cts)
        .into_par_iter()
        .map(|gi| {
            let parts: Vec<E::Ct> = (0..g)
                .into_par_iter()
                .map(|t| {
                    let mut acc = None;
                    for (c, x) in inputs.iter().enumerate() {
                        acc_add(ev, &mut acc, ev.sc_mult(x, &pts[(gi * cc + c) * g + t]));
                    }
                    let acc = take(acc)?;
                    if t == 0 {
                        Ok(acc)
                    } else {
                        ev.rotate(&acc, t)
                    }
                })
                .collect::<Result<_, HeError>>()?;
            let mut out = None;
            for p in parts {
                acc_add(ev, &mut out, p);
            }
            take(out)
        })
        .collect()
}

/// GALA kernel grouping: SISO results of all input ciphertexts that share a diagonal are
/// added first, then rotated once (first-Add-second-Perm).
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
            for d in 0..cn {
                let mut grp = None;
                for (i, ri) in rots.iter().enumerate() {
                    acc_add(ev, &mut grp, plan.siso(ev, pts, ri, i, o, d)?);
                }
                let mut grp = take(grp)?;
                if d > 0 {
                    grp = ev.rotate(&grp, d * plan.block)?;
                }
                acc_add(ev, &mut out, grp);
            }
            take(out)
        })
        .collect()
}
