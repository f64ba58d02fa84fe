//! GAZELLE: hybrid matrix–vector product (diagonals + ciphertext rotate-and-sum) and the
//! output-rotation MIMO convolution.

use rayon::prelude::*;

use super::conv::ConvPlan;
use super::{acc_add, acc_add_ext, lazy_pays, take, MatVecPlan};
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
    super::prepare_diagonals(ev, plan, w, hybrid_weight)
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
    // Lazy key switching: the hoisted rotations stay in the Q·P basis, the ScMults run there,
    // and each output ciphertext is divided by P once instead of every rotation (when the
    // cost model says so: few output ciphertexts per input).
    let lazy = g > 1
        && lazy_pays(
            plan.hoisting,
            ev.num_q(),
            ev.mod_down_passes(),
            inputs.len() * (g - 1),
            plan.out_cts,
            plan.out_cts * inputs.len() * g,
        );
    if lazy {
        let rots: Vec<Vec<E::Ext>> = inputs
            .par_iter()
            .map(|x| {
                let mut v = vec![ev.lift_ext(x)];
                let h = ev.decompose(x);
                for t in 1..g {
                    v.push(ev.rotate_hoisted_ext(&h, t)?);
                }
                Ok(v)
            })
            .collect::<Result<_, HeError>>()?;
        return (0..plan.out_cts)
            .into_par_iter()
            .map(|gi| {
                let mut acc = None;
                for (c, rc) in rots.iter().enumerate() {
                    for (t, xr) in rc.iter().enumerate() {
                        acc_add_ext(
                            ev,
                            &mut acc,
                            ev.sc_mult_ext(xr, &pts[(gi * cc + c) * g + t]),
                        );
                    }
                }
                rotate_and_sum(ev, plan, ev.mod_down_ext(take(acc)?))
            })
            .collect();
    }
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
            rotate_and_sum(ev, plan, take(acc)?)
        })
        .collect()
}

/// Ciphertext rotate-and-sum over the blocks (each step depends on the previous one, so
/// these rotations can be neither hoisted nor lazily summed).
fn rotate_and_sum<E: Evaluator>(ev: &E, plan: &MatVecPlan, acc: E::Ct) -> Result<E::Ct, HeError> {
    let g = plan.g;
    let mut acc = acc;
    let mut s = plan.block / 2;
    while s >= g {
        let r = ev.rotate(&acc, s)?;
        ev.add_assign(&mut acc, &r);
        s /= 2;
    }
    Ok(acc)
}

/// GAZELLE output-rotation MIMO convolution: every (input ct, output ct) block rotates its
/// c_n − 1 diagonals separately.
pub fn conv<E: Evaluator>(
    ev: &E,
    plan: &ConvPlan,
    pts: &[E::Pt],
    inputs: &[E::Ct],
) -> Result<Vec<E::Ct>, HeError> {
    let cn = plan.cn;
    let k2 = plan.offsets().len();
    let n_in = inputs.len();
    // Lazy hoisting of the input rotations (SISO sums in the Q·P basis) when it pays; lazy
    // output rotations (one division by P per output instead of per rotation) whenever an
    // output sums at least two rotations.
    let lazy_in = k2 > 1
        && lazy_pays(
            plan.hoisting,
            ev.num_q(),
            ev.mod_down_passes(),
            n_in * (k2 - 1),
            plan.out_cts,
            n_in * plan.out_cts * cn * k2,
        );
    let lazy_out = lazy_in || n_in * (cn - 1) >= 2;
    if lazy_in {
        let rots = plan.input_rotations_ext(ev, inputs)?;
        return (0..plan.out_cts)
            .into_par_iter()
            .map(|o| {
                let mut out = None;
                for (i, ri) in rots.iter().enumerate() {
                    for d in 0..cn {
                        let siso = plan.siso_ext(ev, pts, ri, i, o, d)?;
                        let term = if d > 0 {
                            ev.rotate_ext(&ev.mod_down_ext(siso), d * plan.block)?
                        } else {
                            siso
                        };
                        acc_add_ext(ev, &mut out, term);
                    }
                }
                Ok(ev.mod_down_ext(take(out)?))
            })
            .collect();
    }
    let rots = plan.input_rotations(ev, inputs)?;
    if lazy_out {
        return (0..plan.out_cts)
            .into_par_iter()
            .map(|o| {
                let mut out = None;
                for (i, ri) in rots.iter().enumerate() {
                    for d in 0..cn {
                        let siso = plan.siso(ev, pts, ri, i, o, d)?;
                        let term = if d > 0 {
                            ev.rotate_ext(&siso, d * plan.block)?
                        } else {
                            ev.lift_ext(&siso)
                        };
                        acc_add_ext(ev, &mut out, term);
                    }
                }
                Ok(ev.mod_down_ext(take(out)?))
            })
            .collect();
    }
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
