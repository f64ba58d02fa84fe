//! GALA: row-encoding-share-RaS matrix–vector product and kernel-grouping convolution.

use rayon::prelude::*;

use super::conv::ConvPlan;
use super::{acc_add, acc_add_ext, lazy_pays, take, MatVecPlan};
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
    super::prepare_diagonals(ev, plan, w, row_weight)
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
    // With two or more rotations per output, their divisions by P are deferred to one.
    if g >= 3 {
        return (0..plan.out_cts)
            .into_par_iter()
            .map(|gi| {
                let parts: Vec<E::Ext> = (0..g)
                    .into_par_iter()
                    .map(|t| {
                        let mut acc = None;
                        for (c, x) in inputs.iter().enumerate() {
                            acc_add(ev, &mut acc, ev.sc_mult(x, &pts[(gi * cc + c) * g + t]));
                        }
                        let acc = take(acc)?;
                        if t == 0 {
                            Ok(ev.lift_ext(&acc))
                        } else {
                            ev.rotate_ext(&acc, t)
                        }
                    })
                    .collect::<Result<_, HeError>>()?;
                let mut out = None;
                for p in parts {
                    acc_add_ext(ev, &mut out, p);
                }
                Ok(ev.mod_down_ext(take(out)?))
            })
            .collect();
    }
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
    let cn = plan.cn;
    let k2 = plan.offsets().len();
    let n_in = inputs.len();
    // As in GAZELLE's conv: lazy input hoisting when the cost model says so, lazy output
    // rotations whenever an output sums at least two rotations.
    let lazy_in = k2 > 1
        && lazy_pays(
            plan.hoisting,
            ev.num_q(),
            ev.mod_down_passes(),
            n_in * (k2 - 1),
            plan.out_cts,
            n_in * plan.out_cts * cn * k2,
        );
    if lazy_in {
        let rots = plan.input_rotations_ext(ev, inputs)?;
        return (0..plan.out_cts)
            .into_par_iter()
            .map(|o| {
                let mut out = None;
                for d in 0..cn {
                    let mut grp = None;
                    for (i, ri) in rots.iter().enumerate() {
                        acc_add_ext(ev, &mut grp, plan.siso_ext(ev, pts, ri, i, o, d)?);
                    }
                    let grp = take(grp)?;
                    let term = if d > 0 {
                        ev.rotate_ext(&ev.mod_down_ext(grp), d * plan.block)?
                    } else {
                        grp
                    };
                    acc_add_ext(ev, &mut out, term);
                }
                Ok(ev.mod_down_ext(take(out)?))
            })
            .collect();
    }
    let rots = plan.input_rotations(ev, inputs)?;
    if cn >= 3 {
        return (0..plan.out_cts)
            .into_par_iter()
            .map(|o| {
                let mut out = None;
                for d in 0..cn {
                    let mut grp = None;
                    for (i, ri) in rots.iter().enumerate() {
                        acc_add(ev, &mut grp, plan.siso(ev, pts, ri, i, o, d)?);
                    }
                    let grp = take(grp)?;
                    let term = if d > 0 {
                        ev.rotate_ext(&grp, d * plan.block)?
                    } else {
                        ev.lift_ext(&grp)
                    };
                    acc_add_ext(ev, &mut out, term);
                }
                Ok(ev.mod_down_ext(take(out)?))
            })
            .collect();
    }
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
