//! The windowed-rotation Dense kernel (and Conv2d lowered to it) on CHOCO's packings.
//!
//! The input vector x (n_i values, cut into windows of width w) lives in one ciphertext per
//! window. Row `r` of W·x is a sum over the generalised diagonals of the window: for m rows
//! per output window (m a power of two ≤ w),
//! `z = Σ_{d<m} D_d ⊙ wrot(x, d)` with `D_d[j] = W[j mod m][(j + d) mod w]`, then the
//! rotate-and-sum `z += rot(z, s)` for s = w/2, …, m leaves row i in slot i (GAZELLE's hybrid
//! method, with windowed rotations in place of whole-row ones).
//!
//! With redundant packing every windowed rotation is one rotation, and the diagonal rotations
//! are split baby-step / giant-step (`d = g·B + b`: B − 1 hoisted rotations of x shared by
//! every output, m/B − 1 giant rotations of the partial sums, the plaintexts pre-rotated by
//! −g·B), which keeps the Galois keys the client uploads to about 2·√m. Every plaintext is
//! w-periodic over `[0, 2w)` and every chain of rotations shifts by less than w in total, so
//! each slot read stays inside the redundant copy. The baseline packing rotates each diagonal
//! with masks ([`super::pack::windowed_rotate`]): two rotations and two extra products each.
use rayon::prelude::*;

use super::pack::{windowed_rotate, windowed_steps, Packing, WindowMasks};
use crate::eval::Evaluator;
use crate::HeError;

/// Shapes of a windowed Dense product (public).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DensePlan {
    pub rows: usize,
    pub cols: usize,
    pub packing: Packing,
    pub row_len: usize,
    /// Slots per ciphertext (all rows of slots).
    pub slots: usize,
    /// Window width w (power of two).
    pub window: usize,
    /// Input windows (ciphertexts the client sends).
    pub col_chunks: usize,
    /// Rows per output window (power of two ≤ w).
    pub m: usize,
    /// Output ciphertexts.
    pub out_chunks: usize,
    /// Baby-step size B (divides m; B = m means no giant steps).
    pub baby: usize,
    /// The diagonals the matrix may use (`None`: all m), sorted, 0 included. Public, like
    /// the shape: a banded matrix costs only its band in rotations, products and Galois keys.
    pub support: Option<Vec<usize>>,
}

impl DensePlan {
    /// Plan for a `rows × cols` matrix on ciphertexts of `slot_rows` rows of `row_len` slots.
    pub fn new(
        rows: usize,
        cols: usize,
        packing: Packing,
        row_len: usize,
        slot_rows: usize,
    ) -> Result<DensePlan, HeError> {
        if rows == 0 || cols == 0 || !row_len.is_power_of_two() || row_len < 2 || slot_rows == 0 {
            return Err(HeError::Shape(format!(
                "dense {rows}x{cols} on {slot_rows}x{row_len} slots"
            )));
        }
        let max_w = row_len / packing.footprint(1);
        let window = cols.next_power_of_two().min(max_w);
        let m = rows.next_power_of_two().min(window);
        let baby = match packing {
            Packing::Redundant => 1usize << m.trailing_zeros().div_ceil(2),
            Packing::Baseline => m,
        };
        Ok(DensePlan {
            rows,
            cols,
            packing,
            row_len,
            slots: row_len * slot_rows,
            window,
            col_chunks: cols.div_ceil(window),
            m,
            out_chunks: rows.div_ceil(m),
            baby,
            support: None,
        })
    }

    /// The plan restricted to the diagonals `diags` (each below m; 0 is always kept): every
    /// used diagonal is one hoisted rotation (B = m, no giant steps), and `prepare` refuses
    /// weights on any other diagonal.
    pub fn with_support(mut self, mut diags: Vec<usize>) -> Result<DensePlan, HeError> {
        if let Some(d) = diags.iter().find(|d| **d >= self.m) {
            return Err(HeError::Shape(format!(
                "diagonal {d} of a plan with {} diagonals",
                self.m
            )));
        }
        diags.push(0);
        diags.sort_unstable();
        diags.dedup();
        self.baby = self.m;
        self.support = Some(diags);
        Ok(self)
    }

    /// Whether diagonal `d` may be nonzero.
    fn uses(&self, d: usize) -> bool {
        self.support
            .as_ref()
            .is_none_or(|s| s.binary_search(&d).is_ok())
    }

    fn giants(&self) -> usize {
        self.m / self.baby
    }

    /// Rotation steps whose Galois keys the server needs.
    pub fn rotation_steps(&self) -> Vec<usize> {
        let mut v = Vec::new();
        for b in (1..self.baby).filter(|b| self.uses(*b)) {
            v.extend(windowed_steps(self.packing, self.window, b, self.row_len));
        }
        v.extend((1..self.giants()).map(|g| g * self.baby));
        let mut s = self.window / 2;
        while s >= self.m {
            v.push(s);
            s /= 2;
        }
        v.sort_unstable();
        v.dedup();
        v
    }

    /// Client: one packed slot vector per input window (values mod t).
    pub fn pack_input(&self, x: &[u64]) -> Result<Vec<Vec<u64>>, HeError> {
        if x.len() != self.cols {
            return Err(HeError::Shape(format!(
                "input has {} values, the plan reads {}",
                x.len(),
                self.cols
            )));
        }
        x.chunks(self.window)
            .map(|c| super::pack::pack(c, self.window, self.slots, self.packing))
            .collect()
    }

    /// Client: the rows of W·x from the decrypted output slot vectors.
    pub fn extract(&self, outs: &[Vec<u64>]) -> Result<Vec<u64>, HeError> {
        if outs.len() != self.out_chunks || outs.iter().any(|o| o.len() < self.m) {
            return Err(HeError::Shape(
                "output vectors do not match the plan".into(),
            ));
        }
        Ok(outs
            .iter()
            .flat_map(|o| o[..self.m].iter().copied())
            .take(self.rows)
            .collect())
    }

    /// Server: output slot vector of one output window holding `vals[r]` for its rows
    /// (for adding a bias homomorphically).
    pub fn output_layout(&self, vals: &[u64]) -> Result<Vec<Vec<u64>>, HeError> {
        if vals.len() != self.rows {
            return Err(HeError::Shape(format!(
                "{} values for {} rows",
                vals.len(),
                self.rows
            )));
        }
        Ok(vals
            .chunks(self.m)
            .map(|c| {
                let mut v = vec![0u64; self.slots];
                v[..c.len()].copy_from_slice(c);
                v
            })
            .collect())
    }

    /// Diagonal `d` of output window `o`, input window `c`, at window slot `j`.
    fn diag(&self, w: &[i64], t: u64, o: usize, c: usize, d: usize, j: usize) -> u64 {
        let r = o * self.m + j % self.m;
        let col = c * self.window + (j + d) % self.window;
        if r < self.rows && col < self.cols {
            w[r * self.cols + col].rem_euclid(t as i64) as u64
        } else {
            0
        }
    }

    /// Server setup: encodes W (row-major `rows × cols`, signed) into the kernel's plaintexts,
    /// reduced mod the evaluator's t. All-zero diagonals are skipped (a banded or
    /// block-structured matrix, such as the batched kNN's, costs only its nonzero diagonals),
    /// except each output's first, which keeps every sum non-empty.
    pub fn prepare<E: Evaluator>(&self, ev: &E, w: &[i64]) -> Result<Prepared<E::Pt>, HeError> {
        if w.len() != self.rows * self.cols {
            return Err(HeError::Shape(format!(
                "{} weights for a {}x{} matrix",
                w.len(),
                self.rows,
                self.cols
            )));
        }
        if ev.row_len() != self.row_len || ev.slots() != self.slots {
            return Err(HeError::Shape(
                "evaluator slot layout does not match the plan".into(),
            ));
        }
        let t = ev.t();
        let (wd, b) = (self.window, self.baby);
        let span = self.packing.footprint(wd);
        let per_out = self.col_chunks * self.m;
        let pts = (0..self.out_chunks * per_out)
            .into_par_iter()
            .map(|idx| {
                let (o, c, d) = (
                    idx / per_out,
                    (idx / self.m) % self.col_chunks,
                    idx % self.m,
                );
                // Pre-rotated right by the giant step g·B (mod w) so that the giant rotation
                // of the partial sum brings it back into place.
                let shift = d / b * b;
                let mut v = vec![0u64; self.slots];
                for (j, s) in v[..span].iter_mut().enumerate() {
                    *s = self.diag(w, t, o, c, d, (j % wd + wd - shift) % wd);
                }
                let nonzero = v.iter().any(|x| *x != 0);
                if nonzero && !self.uses(d) {
                    Err(HeError::Shape(format!(
                        "weights on diagonal {d}, outside the plan's support"
                    )))
                } else if c == 0 && d == 0 || nonzero {
                    ev.encode(|| v).map(Some)
                } else {
                    Ok(None)
                }
            })
            .collect::<Result<Vec<_>, _>>()?;
        let masks = match self.packing {
            Packing::Redundant => Vec::new(),
            Packing::Baseline => (1..self.baby)
                .map(|k| WindowMasks::new(ev, wd, k))
                .collect::<Result<Vec<_>, _>>()?,
        };
        Ok(Prepared { pts, masks })
    }

    /// Server: the output ciphertexts (row i of output window o in slot i of output o).
    pub fn eval<E: Evaluator>(
        &self,
        ev: &E,
        prep: &Prepared<E::Pt>,
        inputs: &[E::Ct],
    ) -> Result<Vec<E::Ct>, HeError> {
        if inputs.len() != self.col_chunks
            || prep.pts.len() != self.out_chunks * self.col_chunks * self.m
        {
            return Err(HeError::Shape(format!(
                "{} input ciphertexts, the plan reads {}",
                inputs.len(),
                self.col_chunks
            )));
        }
        // Baby steps of every input window, shared by every output window and giant step.
        let babies: Vec<Vec<Option<E::Ct>>> = inputs
            .par_iter()
            .map(|x| self.baby_steps(ev, prep, x))
            .collect::<Result<_, _>>()?;
        let per_out = self.col_chunks * self.m;
        let g_count = self.giants();
        (0..self.out_chunks)
            .into_par_iter()
            .map(|o| {
                let parts: Vec<Option<E::Ct>> = (0..g_count)
                    .into_par_iter()
                    .map(|g| {
                        let mut acc: Option<E::Ct> = None;
                        for (c, rots) in babies.iter().enumerate() {
                            for (b, r) in rots.iter().enumerate() {
                                let idx = o * per_out + c * self.m + g * self.baby + b;
                                let (Some(r), Some(pt)) = (r, &prep.pts[idx]) else {
                                    continue;
                                };
                                let p = ev.sc_mult(r, pt);
                                match &mut acc {
                                    None => acc = Some(p),
                                    Some(a) => ev.add_assign(a, &p),
                                }
                            }
                        }
                        // A giant step whose diagonals are all zero adds nothing.
                        match acc {
                            None => Ok(None),
                            Some(acc) if g == 0 => Ok(Some(acc)),
                            Some(acc) => ev.rotate(&acc, g * self.baby).map(Some),
                        }
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                let mut it = parts.into_iter().flatten();
                let mut z = it.next().ok_or(HeError::Shape("empty sum".into()))?;
                for p in it {
                    ev.add_assign(&mut z, &p);
                }
                let mut s = self.window / 2;
                while s >= self.m {
                    let r = ev.rotate(&z, s)?;
                    ev.add_assign(&mut z, &r);
                    s /= 2;
                }
                Ok(z)
            })
            .collect()
    }

    /// `wrot(x, b)` for b in 0..B (`None` for a diagonal outside the support).
    fn baby_steps<E: Evaluator>(
        &self,
        ev: &E,
        prep: &Prepared<E::Pt>,
        x: &E::Ct,
    ) -> Result<Vec<Option<E::Ct>>, HeError> {
        if self.baby == 1 {
            return Ok(vec![Some(x.clone())]);
        }
        let h = match self.packing {
            Packing::Redundant => Some(ev.decompose(x)),
            Packing::Baseline => None,
        };
        let mut v = vec![Some(x.clone())];
        let rest: Vec<Option<E::Ct>> = (1..self.baby)
            .into_par_iter()
            .map(|b| {
                if !self.uses(b) {
                    return Ok(None);
                }
                match &h {
                    Some(h) => ev.rotate_hoisted(h, b),
                    None => {
                        windowed_rotate(ev, x, b, self.window, self.packing, prep.masks.get(b - 1))
                    }
                }
                .map(Some)
            })
            .collect::<Result<_, _>>()?;
        v.extend(rest);
        Ok(v)
    }
}

/// A plan's encoded weights (server state; secret: no `Debug`); `None` for an all-zero
/// diagonal.
pub struct Prepared<P> {
    pts: Vec<Option<P>>,
    masks: Vec<WindowMasks<P>>,
}

/// `W·x` over the integers (row-major W), the plaintext reference of the kernel.
pub fn plain_matvec(w: &[i64], x: &[i64], rows: usize) -> Vec<i128> {
    let cols = x.len();
    (0..rows)
        .map(|r| {
            w[r * cols..(r + 1) * cols]
                .iter()
                .zip(x)
                .map(|(&a, &b)| a as i128 * b as i128)
                .sum()
        })
        .collect()
}

/// The matrix of a 2-D convolution (zero padding), so that Conv2d runs on the Dense kernel:
/// rows `co·oh·ow`, columns `c·h·w`, both row-major over (channel, y, x). `k` is the kernel
/// tensor `co × c × kh × kw`.
#[allow(clippy::too_many_arguments)]
pub fn conv_matrix(
    k: &[i64],
    [c, h, w]: [usize; 3],
    co: usize,
    [kh, kw]: [usize; 2],
    [sh, sw]: [usize; 2],
    [ph, pw]: [usize; 2],
) -> Result<(Vec<i64>, [usize; 2]), HeError> {
    if k.len() != co * c * kh * kw || sh == 0 || sw == 0 || h + 2 * ph < kh || w + 2 * pw < kw {
        return Err(HeError::Shape(format!(
            "conv kernel of {} values for {co}x{c}x{kh}x{kw} on {c}x{h}x{w}",
            k.len()
        )));
    }
    let (oh, ow) = ((h + 2 * ph - kh) / sh + 1, (w + 2 * pw - kw) / sw + 1);
    let cols = c * h * w;
    let mut m = vec![0i64; co * oh * ow * cols];
    for o in 0..co {
        for p in 0..oh {
            for q in 0..ow {
                let row = &mut m[((o * oh + p) * ow + q) * cols..][..cols];
                for ci in 0..c {
                    for u in 0..kh {
                        let y = (p * sh + u) as isize - ph as isize;
                        if y < 0 || y >= h as isize {
                            continue;
                        }
                        for v in 0..kw {
                            let x = (q * sw + v) as isize - pw as isize;
                            if x < 0 || x >= w as isize {
                                continue;
                            }
                            row[(ci * h + y as usize) * w + x as usize] =
                                k[((o * c + ci) * kh + u) * kw + v];
                        }
                    }
                }
            }
        }
    }
    Ok((m, [oh, ow]))
}
