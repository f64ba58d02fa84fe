//! Convolution layout shared by GAZELLE's and GALA's MIMO kernels (SAME padding, stride 1,
//! odd square kernels).
//!
//! Each channel image (H×W, row-major) occupies a block of b = next_pow2(H·W) slots; a slot row
//! holds c_n = row_len / b channel blocks. An input ciphertext carries c_n channels, replicated
//! in every slot row; output ciphertext o carries, in slot row r, the output channels of block
//! (o·rows + r). The SISO step rotates the input by dy·W + dx (hoisted) and multiplies by
//! position-dependent kernel weights that are zero where the neighbour falls outside the image.

use rayon::prelude::*;

use super::{acc_add, acc_add_ext, take, Hoisting};
use crate::eval::Evaluator;
use crate::HeError;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConvMethod {
    Gazelle,
    Gala,
}

impl std::str::FromStr for ConvMethod {
    type Err = HeError;
    fn from_str(s: &str) -> Result<Self, HeError> {
        match s {
            "gazelle" => Ok(ConvMethod::Gazelle),
            "gala" => Ok(ConvMethod::Gala),
            _ => Err(HeError::Shape(format!("unknown conv method {s}"))),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConvPlan {
    pub method: ConvMethod,
    pub h: usize,
    pub w: usize,
    /// Input channels.
    pub c: usize,
    /// Output channels (kernels).
    pub m: usize,
    /// Kernel size (odd).
    pub k: usize,
    pub row_len: usize,
    pub slot_rows: usize,
    /// Channel block size b.
    pub block: usize,
    /// Channels per slot row c_n.
    pub cn: usize,
    pub in_cts: usize,
    pub out_cts: usize,
    /// Whether the input rotations are hoisted lazily ([`Hoisting::Auto`] unless set).
    pub hoisting: Hoisting,
}

impl ConvPlan {
    pub fn new(
        method: ConvMethod,
        h: usize,
        w: usize,
        c: usize,
        m: usize,
        k: usize,
        row_len: usize,
        slot_rows: usize,
    ) -> Result<Self, HeError> {
        if h == 0
            || w == 0
            || c == 0
            || m == 0
            || k % 2 == 0
            || !row_len.is_power_of_two()
            || slot_rows == 0
        {
            return Err(HeError::Shape(format!("conv {h}x{w}x{c} with {k}x{k}x{m}")));
        }
        let block = (h * w).next_power_of_two();
        if block > row_len {
            return Err(HeError::Shape(format!(
                "image {h}x{w} exceeds a slot row of {row_len}"
            )));
        }
        let cn = row_len / block;
        Ok(ConvPlan {
            method,
            h,
            w,
            c,
            m,
            k,
            row_len,
            slot_rows,
            block,
            cn,
            in_cts: c.div_ceil(cn),
            out_cts: m.div_ceil(cn * slot_rows),
            hoisting: Hoisting::Auto,
        })
    }

    /// The same plan with at most `groups` channel blocks per slot row (rounded down to a
    /// power of two), by
    /// widening each block. GALA's kernel rotates its output by every multiple of the block
    /// below the row, so a small image (many blocks) needs many Galois keys; fewer, wider
    /// blocks bound the keys at the price of more input or output ciphertexts. Slots past the
    /// image in a block hold zeros and meet zero weights, so the result is unchanged.
    pub fn with_max_groups(mut self, groups: usize) -> Self {
        if self.cn > groups {
            let groups = 1usize << groups.max(1).ilog2();
            self.block = self.row_len / groups;
            self.cn = groups;
            self.in_cts = self.c.div_ceil(self.cn);
            self.out_cts = self.m.div_ceil(self.cn * self.slot_rows);
        }
        self
    }

    /// The same plan with input hoisting forced or left to the cost model.
    pub fn with_hoisting(mut self, hoisting: Hoisting) -> Self {
        self.hoisting = hoisting;
        self
    }

    fn slots(&self) -> usize {
        self.row_len * self.slot_rows
    }

    /// Kernel offsets (dy, dx), the centre first.
    pub(crate) fn offsets(&self) -> Vec<(isize, isize)> {
        let r = (self.k / 2) as isize;
        let mut v = vec![(0, 0)];
        for dy in -r..=r {
            for dx in -r..=r {
                if (dy, dx) != (0, 0) {
                    v.push((dy, dx));
                }
            }
        }
        v
    }

    fn step(&self, (dy, dx): (isize, isize)) -> usize {
        let d = dy * self.w as isize + dx;
        d.rem_euclid(self.row_len as isize) as usize
    }

    /// Rotation steps whose Galois keys the server needs.
    pub fn rotation_steps(&self) -> Vec<usize> {
        let mut v: Vec<usize> = self.offsets()[1..].iter().map(|&o| self.step(o)).collect();
        v.extend((1..self.cn).map(|d| d * self.block));
        v.retain(|&s| s != 0);
        v.sort_unstable();
        v.dedup();
        v
    }

    /// Client packing of an H×W×C input (index (y·W + x)·C + ch, i.e. HWC order).
    pub fn pack_input(&self, x: &[u64]) -> Result<Vec<Vec<u64>>, HeError> {
        let hw = self.h * self.w;
        if x.len() != hw * self.c {
            return Err(HeError::Shape(format!(
                "input has {} values, want {}",
                x.len(),
                hw * self.c
            )));
        }
        Ok((0..self.in_cts)
            .map(|i| {
                (0..self.slots())
                    .map(|q| {
                        let pos = q % self.row_len;
                        let (j, p) = (pos / self.block, pos % self.block);
                        let ch = i * self.cn + j;
                        if p < hw && ch < self.c {
                            x[p * self.c + ch]
                        } else {
                            0
                        }
                    })
                    .collect()
            })
            .collect())
    }

    /// Share extraction from output slot vectors: H×W×M in HWC order.
    pub fn extract(&self, outs: &[Vec<u64>], t: u64) -> Result<Vec<u64>, HeError> {
        if outs.len() != self.out_cts || outs.iter().any(|o| o.len() != self.slots()) {
            return Err(HeError::Shape(
                "output vectors do not match the plan".into(),
            ));
        }
        let hw = self.h * self.w;
        let mut y = vec![0u64; hw * self.m];
        for (o, v) in outs.iter().enumerate() {
            for r in 0..self.slot_rows {
                for j in 0..self.cn {
                    let ch = (o * self.slot_rows + r) * self.cn + j;
                    if ch >= self.m {
                        continue;
                    }
                    for p in 0..hw {
                        y[p * self.m + ch] = v[r * self.row_len + j * self.block + p] % t;
                    }
                }
            }
        }
        Ok(y)
    }

    /// Index of the plaintext for (input ct i, output ct o, diagonal d, offset index e).
    fn pt_index(&self, i: usize, o: usize, d: usize, e: usize) -> usize {
        ((i * self.out_cts + o) * self.cn + d) * self.k * self.k + e
    }

    /// Server setup. `wts` is M×C×K×K (index ((o·C + c)·K + ky)·K + kx), values mod t.
    pub fn prepare<E: Evaluator>(&self, ev: &E, wts: &[u64]) -> Result<Vec<E::Pt>, HeError> {
        let kk = self.k * self.k;
        if wts.len() != self.m * self.c * kk {
            return Err(HeError::Shape(
                "kernel tensor does not match the plan".into(),
            ));
        }
        if ev.row_len() != self.row_len || ev.rows() != self.slot_rows {
            return Err(HeError::Shape(
                "evaluator slot layout does not match the plan".into(),
            ));
        }
        let offs = self.offsets();
        let total = self.in_cts * self.out_cts * self.cn * kk;
        let r = (self.k / 2) as isize;
        (0..total)
            .into_par_iter()
            .map(|idx| {
                let e = idx % kk;
                let d = (idx / kk) % self.cn;
                let o = (idx / (kk * self.cn)) % self.out_cts;
                let i = idx / (kk * self.cn * self.out_cts);
                debug_assert_eq!(self.pt_index(i, o, d, e), idx);
                let (dy, dx) = offs[e];
                ev.encode(|| {
                    (0..self.slots())
                        .map(|q| {
                            let (row, pos) = (q / self.row_len, q % self.row_len);
                            let (j, p) = (pos / self.block, pos % self.block);
                            if p >= self.h * self.w {
                                return 0;
                            }
                            let (y, x) = ((p / self.w) as isize, (p % self.w) as isize);
                            let (yy, xx) = (y + dy, x + dx);
                            if yy < 0 || xx < 0 || yy >= self.h as isize || xx >= self.w as isize {
                                return 0;
                            }
                            let in_ch = i * self.cn + j;
                            let out_ch =
                                (o * self.slot_rows + row) * self.cn + (j + self.cn - d) % self.cn;
                            if in_ch >= self.c || out_ch >= self.m {
                                return 0;
                            }
                            let ky = (dy + r) as usize;
                            let kx = (dx + r) as usize;
                            wts[((out_ch * self.c + in_ch) * self.k + ky) * self.k + kx]
                        })
                        .collect()
                })
            })
            .collect()
    }

    /// Hoisted input rotations: one DecPerm and K² − 1 HstPerm per input ciphertext.
    pub(crate) fn input_rotations<E: Evaluator>(
        &self,
        ev: &E,
        inputs: &[E::Ct],
    ) -> Result<Vec<Vec<E::Ct>>, HeError> {
        self.hoisted_rotations(
            inputs,
            |x| x.clone(),
            |h, st| ev.rotate_hoisted(h, st),
            |x| ev.decompose(x),
        )
    }

    /// [`Self::input_rotations`] with lazy HstPerms (Q·P basis; the unrotated term lifted).
    pub(crate) fn input_rotations_ext<E: Evaluator>(
        &self,
        ev: &E,
        inputs: &[E::Ct],
    ) -> Result<Vec<Vec<E::Ext>>, HeError> {
        self.hoisted_rotations(
            inputs,
            |x| ev.lift_ext(x),
            |h, st| ev.rotate_hoisted_ext(h, st),
            |x| ev.decompose(x),
        )
    }

    /// Per input ciphertext: `unrotated(x)`, then one decomposition shared by the rotations to
    /// every other kernel offset. The eager and lazy forms differ only in the two closures.
    fn hoisted_rotations<Ct: Sync, H, T: Send>(
        &self,
        inputs: &[Ct],
        unrotated: impl Fn(&Ct) -> T + Sync,
        rotate: impl Fn(&H, usize) -> Result<T, HeError> + Sync,
        decompose: impl Fn(&Ct) -> H + Sync,
    ) -> Result<Vec<Vec<T>>, HeError> {
        if inputs.len() != self.in_cts {
            return Err(HeError::Shape(format!(
                "{} input ciphertexts, plan wants {}",
                inputs.len(),
                self.in_cts
            )));
        }
        let offs = self.offsets();
        inputs
            .par_iter()
            .map(|x| {
                let mut v = vec![unrotated(x)];
                if offs.len() > 1 {
                    let h = decompose(x);
                    for &o in &offs[1..] {
                        v.push(rotate(&h, self.step(o))?);
                    }
                }
                Ok(v)
            })
            .collect()
    }

    /// [`Self::siso`] in the Q·P basis.
    pub(crate) fn siso_ext<E: Evaluator>(
        &self,
        ev: &E,
        pts: &[E::Pt],
        rots: &[E::Ext],
        i: usize,
        o: usize,
        d: usize,
    ) -> Result<E::Ext, HeError> {
        let mut acc = None;
        for (e, xr) in rots.iter().enumerate() {
            acc_add_ext(
                ev,
                &mut acc,
                ev.sc_mult_ext(xr, &pts[self.pt_index(i, o, d, e)]),
            );
        }
        take(acc)
    }

    /// One SISO-like convolution: Σ_offsets ScMult(rotated input, weights). K² ScMult, K²−1 Add.
    pub(crate) fn siso<E: Evaluator>(
        &self,
        ev: &E,
        pts: &[E::Pt],
        rots: &[E::Ct],
        i: usize,
        o: usize,
        d: usize,
    ) -> Result<E::Ct, HeError> {
        let mut acc = None;
        for (e, xr) in rots.iter().enumerate() {
            acc_add(
                ev,
                &mut acc,
                ev.sc_mult(xr, &pts[self.pt_index(i, o, d, e)]),
            );
        }
        take(acc)
    }

    /// Runs the kernel of the plan's method.
    pub fn eval<E: Evaluator>(
        &self,
        ev: &E,
        pts: &[E::Pt],
        inputs: &[E::Ct],
    ) -> Result<Vec<E::Ct>, HeError> {
        match self.method {
            ConvMethod::Gazelle => super::gazelle::conv(ev, self, pts, inputs),
            ConvMethod::Gala => super::gala::conv(ev, self, pts, inputs),
        }
    }
}

/// Plaintext reference convolution (SAME, stride 1) mod t: HWC input, M×C×K×K weights.
pub fn reference(
    h: usize,
    w: usize,
    c: usize,
    m: usize,
    k: usize,
    x: &[u64],
    wts: &[u64],
    t: u64,
) -> Vec<u64> {
    let r = (k / 2) as isize;
    let mut y = vec![0u64; h * w * m];
    for yy in 0..h {
        for xx in 0..w {
            for o in 0..m {
                let mut acc: u128 = 0;
                for ky in 0..k {
                    for kx in 0..k {
                        let sy = yy as isize + ky as isize - r;
                        let sx = xx as isize + kx as isize - r;
                        if sy < 0 || sx < 0 || sy >= h as isize || sx >= w as isize {
                            continue;
                        }
                        for ch in 0..c {
                            let xv = x[(sy as usize * w + sx as usize) * c + ch] as u128;
                            let wv = wts[((o * c + ch) * k + ky) * k + kx] as u128;
                            acc = (acc + xv * wv) % t as u128;
                        }
                    }
                }
                y[(yy * w + xx) * m + o] = acc as u64;
            }
        }
    }
    y
}

#[allow(dead_code)]
fn _unused<E: Evaluator>(ev: &E, a: &mut Option<E::Ct>, x: E::Ct) {
    acc_add(ev, a, x)
}
