//! Naive row method: one ScMult per row, then a full ciphertext rotate-and-sum per row.
//! n_o output ciphertexts, row i's value in slot 0.

use rayon::prelude::*;

use super::{acc_add, take, MatVecPlan};
use crate::eval::Evaluator;
use crate::HeError;

pub(crate) fn prepare<E: Evaluator>(
    ev: &E,
    plan: &MatVecPlan,
    w: &[Vec<u64>],
) -> Result<Vec<E::Pt>, HeError> {
    let slots = plan.row_len * plan.slot_rows;
    let b = plan.block;
    (0..plan.rows * plan.col_chunks)
        .into_par_iter()
        .map(|idx| {
            let (i, c) = (idx / plan.col_chunks, idx % plan.col_chunks);
            ev.encode(|| {
                let mut v = vec![0u64; slots];
                for (s, vs) in v.iter_mut().enumerate().take(b) {
                    let col = c * b + s;
                    if col < plan.cols {
                        *vs = w[i][col];
                    }
                }
                v
            })
        })
        .collect()
}

/// Naive matrix–vector product: ScMult n_o·cc, Perm n_o·log2 B, Add n_o·(cc − 1 + log2 B).
pub fn matvec<E: Evaluator>(
    ev: &E,
    plan: &MatVecPlan,
    pts: &[E::Pt],
    inputs: &[E::Ct],
) -> Result<Vec<E::Ct>, HeError> {
    (0..plan.rows)
        .into_par_iter()
        .map(|i| {
            let mut acc = None;
            for (c, x) in inputs.iter().enumerate() {
                acc_add(ev, &mut acc, ev.sc_mult(x, &pts[i * plan.col_chunks + c]));
            }
            let mut acc = take(acc)?;
            let mut s = plan.block / 2;
            while s >= 1 {
                let r = ev.rotate(&acc, s)?;
                ev.add_assign(&mut acc, &r);
                s /= 2;
            }
            Ok(acc)
        })
        .collect()
}
