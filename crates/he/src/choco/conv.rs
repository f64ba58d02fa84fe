//! The windowed Conv2d kernel on CHOCO's rotational-redundancy packing (van der Hagen & Lucia,
//! ASPLOS '22): one HE rotation per kernel offset, no Toeplitz matrix.
//!
//! Layout. Each input channel, zero-padded by the client to `hp × wp`, fills one window of
//! `W ≥ hp·wp` slots (a power of two). G channels (a power of two) form a group of G windows;
//! the redundant packing stores the group twice, `[g | g]` over 2GW slots, the baseline once.
//! A ciphertext holds L copies of its group ("lanes", across both slot rows); lane ℓ computes
//! output channels `(o·L + ℓ)·G + j` in its window j, so one input upload serves L·G outputs.
//!
//! Kernel. Output window j of a lane at position `pos = p·sh·wp + q·sw` is
//! `Σ_d Σ_(u,v) K[o_j, c_((j+d) mod G), u, v] · x_((j+d) mod G)[pos + u·wp + v]`: for every
//! channel shift d < G (GAZELLE's diagonal over channels) and kernel offset `s = u·wp + v`,
//! the input rotated by `d·W + s`. With redundancy that is one whole-row rotation: window
//! `j + d < 2G` lies in the second copy when it passes G, and `pos + s < hp·wp ≤ W` for every
//! valid output, so no read leaves the lane and no mask is needed. The rotations are split
//! baby-step / giant-step: the K − 1 offset rotations of each input are hoisted and shared by
//! every output, the plaintexts of shift d are pre-rotated right by d·W, and each output's
//! partial sum for shift d is rotated once by d·W (G − 1 rotations per output ciphertext).
//!
//! The baseline rotates the channels within the group with masks
//! (`M_lo ⊙ rot(x, dW) + M_hi ⊙ rot(x, dW − GW)`: two rotations and a multiplicative level
//! per shift), then the offset rotations of each shifted input.
//!
//! Every plaintext is zero outside the valid output positions of its window, so what the
//! client decrypts is exactly the layer's outputs and zeros: no partial sums of the weights.
use rayon::prelude::*;

use super::pack::Packing;
use crate::eval::Evaluator;
use crate::HeError;

/// Shapes of a windowed Conv2d (public).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConvPlan {
    /// Input channels, height, width (before padding).
    pub input: [usize; 3],
    pub out_channels: usize,
    pub kernel: [usize; 2],
    pub stride: [usize; 2],
    pub padding: [usize; 2],
    pub packing: Packing,
    pub row_len: usize,
    pub slots: usize,
    /// Padded height and width.
    pub padded: [usize; 2],
    /// Output height and width.
    pub out: [usize; 2],
    /// Window width W (one channel).
    pub window: usize,
    /// Channels per group G.
    pub group: usize,
    /// Slots of one lane (2GW redundant with G > 1, else GW).
    pub lane: usize,
    /// Lanes per ciphertext.
    pub lanes: usize,
    /// Input ciphertexts (groups) and output ciphertexts.
    pub in_cts: usize,
    pub out_cts: usize,
}

impl ConvPlan {
    /// Plan for a `co × c × kh × kw` convolution of a `c × h × w` image on ciphertexts of
    /// `slot_rows` rows of `row_len` slots.
    pub fn new(
        [c, h, w]: [usize; 3],
        co: usize,
        [kh, kw]: [usize; 2],
        [sh, sw]: [usize; 2],
        [ph, pw]: [usize; 2],
        packing: Packing,
        row_len: usize,
        slot_rows: usize,
    ) -> Result<ConvPlan, HeError> {
        let (hp, wp) = (h + 2 * ph, w + 2 * pw);
        let bad = c == 0
            || co == 0
            || kh == 0
            || kw == 0
            || sh == 0
            || sw == 0
            || hp < kh
            || wp < kw
            || !row_len.is_power_of_two()
            || slot_rows == 0;
        let window = (hp * wp).next_power_of_two();
        if bad || window > row_len {
            return Err(HeError::Shape(format!(
                "conv {co}x{c}x{kh}x{kw} on {c}x{h}x{w} (padding {ph},{pw}) over \
                 {slot_rows}x{row_len} slots"
            )));
        }
        let lane_of = |g: usize| {
            if g == 1 {
                window
            } else {
                packing.footprint(g * window)
            }
        };
        let mut group = c.next_power_of_two();
        while lane_of(group) > row_len {
            group /= 2;
        }
        let lane = lane_of(group);
        let lanes = row_len / lane * slot_rows;
        Ok(ConvPlan {
            input: [c, h, w],
            out_channels: co,
            kernel: [kh, kw],
            stride: [sh, sw],
            padding: [ph, pw],
            packing,
            row_len,
            slots: row_len * slot_rows,
            padded: [hp, wp],
            out: [(hp - kh) / sh + 1, (wp - kw) / sw + 1],
            window,
            group,
            lane,
            lanes,
            in_cts: c.div_ceil(group),
            out_cts: co.div_ceil(lanes * group),
        })
    }

    /// Products per output: the layer's fan-in `c·kh·kw` (what bounds its accumulator).
    pub fn fan_in(&self) -> usize {
        self.input[0] * self.kernel[0] * self.kernel[1]
    }

    /// Outputs `co·oh·ow`, row-major over (channel, y, x).
    pub fn outputs(&self) -> usize {
        self.out_channels * self.out[0] * self.out[1]
    }

    /// Kernel offsets `u·wp + v`, row-major over (u, v).
    fn offsets(&self) -> Vec<usize> {
        let [kh, kw] = self.kernel;
        (0..kh)
            .flat_map(|u| (0..kw).map(move |v| u * self.padded[1] + v))
            .collect()
    }

    /// First slot of lane ℓ.
    fn lane_base(&self, l: usize) -> usize {
        let per_row = self.row_len / self.lane;
        (l / per_row) * self.row_len + (l % per_row) * self.lane
    }

    /// Window position of output (p, q).
    fn out_pos(&self, p: usize, q: usize) -> usize {
        p * self.stride[0] * self.padded[1] + q * self.stride[1]
    }

    /// Slot of output channel `oc` at (p, q): (output ciphertext, slot).
    fn out_slot(&self, oc: usize, p: usize, q: usize) -> (usize, usize) {
        let per_ct = self.lanes * self.group;
        let (o, l, j) = (oc / per_ct, (oc / self.group) % self.lanes, oc % self.group);
        (o, self.lane_base(l) + j * self.window + self.out_pos(p, q))
    }

    /// Rotation steps whose Galois keys the server needs.
    pub fn rotation_steps(&self) -> Vec<usize> {
        let mut v: Vec<usize> = self.offsets().into_iter().filter(|&s| s > 0).collect();
        let gw = self.group * self.window;
        for d in 1..self.group {
            v.push(d * self.window);
            if self.packing == Packing::Baseline {
                v.push(self.row_len - gw + d * self.window);
            }
        }
        v.sort_unstable();
        v.dedup();
        v
    }

    /// Client: one slot vector per input ciphertext, from the image (`c·h·w` values mod t,
    /// row-major), padded, copied into every lane (twice per lane when redundant).
    pub fn pack_input(&self, x: &[u64]) -> Result<Vec<Vec<u64>>, HeError> {
        let [c, h, w] = self.input;
        if x.len() != c * h * w {
            return Err(HeError::Shape(format!(
                "input has {} values, the plan reads {c}x{h}x{w}",
                x.len()
            )));
        }
        let [ph, pw] = self.padding;
        let wp = self.padded[1];
        let copies = if self.lane > self.group * self.window {
            2
        } else {
            1
        };
        Ok((0..self.in_cts)
            .map(|g| {
                let mut v = vec![0u64; self.slots];
                for l in 0..self.lanes {
                    let base = self.lane_base(l);
                    for j in 0..self.group {
                        let ci = g * self.group + j;
                        if ci >= c {
                            continue;
                        }
                        for copy in 0..copies {
                            let win = base + (copy * self.group + j) * self.window;
                            for y in 0..h {
                                let src = &x[(ci * h + y) * w..][..w];
                                let dst = win + (y + ph) * wp + pw;
                                v[dst..dst + w].copy_from_slice(src);
                            }
                        }
                    }
                }
                v
            })
            .collect())
    }

    /// Client: the outputs (`co·oh·ow`, row-major) from the decrypted output slot vectors.
    pub fn extract(&self, outs: &[Vec<u64>]) -> Result<Vec<u64>, HeError> {
        if outs.len() != self.out_cts || outs.iter().any(|o| o.len() != self.slots) {
            return Err(HeError::Shape(
                "output vectors do not match the plan".into(),
            ));
        }
        let [oh, ow] = self.out;
        let mut y = Vec::with_capacity(self.outputs());
        for oc in 0..self.out_channels {
            for p in 0..oh {
                for q in 0..ow {
                    let (o, s) = self.out_slot(oc, p, q);
                    y.push(outs[o][s]);
                }
            }
        }
        Ok(y)
    }

    /// Server: output slot vectors holding `vals` (one per output, row-major) at their slots
    /// (for adding a bias homomorphically).
    pub fn output_layout(&self, vals: &[u64]) -> Result<Vec<Vec<u64>>, HeError> {
        if vals.len() != self.outputs() {
            return Err(HeError::Shape(format!(
                "{} values for {} outputs",
                vals.len(),
                self.outputs()
            )));
        }
        let [oh, ow] = self.out;
        let mut v = vec![vec![0u64; self.slots]; self.out_cts];
        for oc in 0..self.out_channels {
            for p in 0..oh {
                for q in 0..ow {
                    let (o, s) = self.out_slot(oc, p, q);
                    v[o][s] = vals[(oc * oh + p) * ow + q];
                }
            }
        }
        Ok(v)
    }

    /// Plaintexts per (output ciphertext, input group, shift d, offset): their count.
    pub fn plaintexts(&self) -> usize {
        self.out_cts * self.in_cts * self.group * self.kernel[0] * self.kernel[1]
    }

    /// The plaintext of output ciphertext `o`, input group `g`, channel shift `d` and kernel
    /// offset `(u, v)`, rotated right by `pre` slots within each row.
    #[allow(clippy::too_many_arguments)]
    fn weight_slots(
        &self,
        k: &[i64],
        t: u64,
        [o, g, d]: [usize; 3],
        [u, v]: [usize; 2],
        pre: usize,
        valid: &[usize],
    ) -> Option<Vec<u64>> {
        let [c, _, _] = self.input;
        let [kh, kw] = self.kernel;
        let mut out = vec![0u64; self.slots];
        let mut any = false;
        for l in 0..self.lanes {
            let base = self.lane_base(l);
            for j in 0..self.group {
                let oc = (o * self.lanes + l) * self.group + j;
                let ci = g * self.group + (j + d) % self.group;
                if oc >= self.out_channels || ci >= c {
                    continue;
                }
                let wv = k[((oc * c + ci) * kh + u) * kw + v].rem_euclid(t as i64) as u64;
                if wv == 0 {
                    continue;
                }
                any = true;
                for &pos in valid {
                    let s = base + j * self.window + pos;
                    let (row, col) = (s / self.row_len, s % self.row_len);
                    out[row * self.row_len + (col + pre) % self.row_len] = wv;
                }
            }
        }
        any.then_some(out)
    }

    /// Server setup: encodes the kernel (`co × c × kh × kw`, signed, row-major) reduced mod
    /// the evaluator's t; all-zero plaintexts are skipped.
    pub fn prepare<E: Evaluator>(&self, ev: &E, k: &[i64]) -> Result<ConvPrepared<E::Pt>, HeError> {
        let [c, _, _] = self.input;
        let [kh, kw] = self.kernel;
        if k.len() != self.out_channels * c * kh * kw {
            return Err(HeError::Shape(format!(
                "{} weights for a {}x{c}x{kh}x{kw} kernel",
                k.len(),
                self.out_channels
            )));
        }
        if ev.row_len() != self.row_len || ev.slots() != self.slots {
            return Err(HeError::Shape(
                "evaluator slot layout does not match the plan".into(),
            ));
        }
        let valid: Vec<usize> = (0..self.out[0])
            .flat_map(|p| (0..self.out[1]).map(move |q| (p, q)))
            .map(|(p, q)| self.out_pos(p, q))
            .collect();
        let t = ev.t();
        let kk = kh * kw;
        let pts = (0..self.plaintexts())
            .into_par_iter()
            .map(|idx| {
                let (o, g, d, off) = (
                    idx / (self.in_cts * self.group * kk),
                    (idx / (self.group * kk)) % self.in_cts,
                    (idx / kk) % self.group,
                    idx % kk,
                );
                let pre = match self.packing {
                    Packing::Redundant => d * self.window,
                    Packing::Baseline => 0,
                };
                self.weight_slots(k, t, [o, g, d], [off / kw, off % kw], pre, &valid)
                    .map(|v| ev.encode(|| v))
                    .transpose()
            })
            .collect::<Result<Vec<_>, _>>()?;
        let masks = match self.packing {
            Packing::Redundant => Vec::new(),
            Packing::Baseline => (1..self.group)
                .map(|d| {
                    let (lo, hi) = self.group_masks(d);
                    Ok((ev.encode(|| lo)?, ev.encode(|| hi)?))
                })
                .collect::<Result<Vec<_>, HeError>>()?,
        };
        Ok(ConvPrepared { pts, masks })
    }

    /// Baseline masks of a shift by d windows: `lo` keeps windows j < G − d of every lane,
    /// `hi` windows G − d ≤ j < G.
    fn group_masks(&self, d: usize) -> (Vec<u64>, Vec<u64>) {
        let mut lo = vec![0u64; self.slots];
        let mut hi = vec![0u64; self.slots];
        let w = self.window;
        for l in 0..self.lanes {
            let base = self.lane_base(l);
            let split = base + (self.group - d) * w;
            lo[base..split].iter_mut().for_each(|v| *v = 1);
            hi[split..base + self.group * w]
                .iter_mut()
                .for_each(|v| *v = 1);
        }
        (lo, hi)
    }

    /// Offset rotations of `x` (index 0: x itself), hoisted.
    fn babies<E: Evaluator>(&self, ev: &E, x: &E::Ct) -> Result<Vec<E::Ct>, HeError> {
        let offs = self.offsets();
        let h = ev.decompose(x);
        offs.par_iter()
            .map(|&s| {
                if s == 0 {
                    Ok(x.clone())
                } else {
                    ev.rotate_hoisted(&h, s)
                }
            })
            .collect()
    }

    /// `Σ_g Σ_k P[o, g, d, k] ⊙ babies[g][k]`, `None` when every plaintext is zero.
    fn partial<E: Evaluator>(
        &self,
        ev: &E,
        prep: &ConvPrepared<E::Pt>,
        [o, d]: [usize; 2],
        babies: &[(usize, Vec<E::Ct>)],
    ) -> Option<E::Ct> {
        let kk = self.kernel[0] * self.kernel[1];
        let mut acc: Option<E::Ct> = None;
        for (g, rots) in babies {
            for (k, r) in rots.iter().enumerate() {
                let idx = ((o * self.in_cts + g) * self.group + d) * kk + k;
                if let Some(pt) = &prep.pts[idx] {
                    let p = ev.sc_mult(r, pt);
                    match &mut acc {
                        None => acc = Some(p),
                        Some(a) => ev.add_assign(a, &p),
                    }
                }
            }
        }
        acc
    }

    /// Server: the output ciphertexts.
    pub fn eval<E: Evaluator>(
        &self,
        ev: &E,
        prep: &ConvPrepared<E::Pt>,
        inputs: &[E::Ct],
    ) -> Result<Vec<E::Ct>, HeError> {
        if inputs.len() != self.in_cts || prep.pts.len() != self.plaintexts() {
            return Err(HeError::Shape(format!(
                "{} input ciphertexts, the plan reads {}",
                inputs.len(),
                self.in_cts
            )));
        }
        let sums: Vec<Option<E::Ct>> = match self.packing {
            Packing::Redundant => {
                let babies: Vec<(usize, Vec<E::Ct>)> = inputs
                    .iter()
                    .enumerate()
                    .map(|(g, x)| Ok((g, self.babies(ev, x)?)))
                    .collect::<Result<_, HeError>>()?;
                (0..self.out_cts)
                    .into_par_iter()
                    .map(|o| {
                        let mut z: Option<E::Ct> = None;
                        for d in 0..self.group {
                            let Some(acc) = self.partial(ev, prep, [o, d], &babies) else {
                                continue;
                            };
                            let r = if d == 0 {
                                acc
                            } else {
                                ev.rotate(&acc, d * self.window)?
                            };
                            match &mut z {
                                None => z = Some(r),
                                Some(a) => ev.add_assign(a, &r),
                            }
                        }
                        Ok(z)
                    })
                    .collect::<Result<_, HeError>>()?
            }
            Packing::Baseline => {
                // One shift at a time keeps the G·K rotated inputs of all shifts out of memory.
                let mut z: Vec<Option<E::Ct>> = (0..self.out_cts).map(|_| None).collect();
                let gw = self.group * self.window;
                for d in 0..self.group {
                    let babies: Vec<(usize, Vec<E::Ct>)> = inputs
                        .iter()
                        .enumerate()
                        .map(|(g, x)| {
                            let xd = if d == 0 {
                                x.clone()
                            } else {
                                let (lo, hi) = &prep.masks[d - 1];
                                let a = ev.sc_mult(&ev.rotate(x, d * self.window)?, lo);
                                let b = ev.rotate(x, self.row_len - gw + d * self.window)?;
                                ev.add(&a, &ev.sc_mult(&b, hi))
                            };
                            Ok((g, self.babies(ev, &xd)?))
                        })
                        .collect::<Result<_, HeError>>()?;
                    let parts: Vec<Option<E::Ct>> = (0..self.out_cts)
                        .into_par_iter()
                        .map(|o| self.partial(ev, prep, [o, d], &babies))
                        .collect();
                    for (acc, p) in z.iter_mut().zip(parts) {
                        match (acc.as_mut(), p) {
                            (_, None) => {}
                            (None, Some(p)) => *acc = Some(p),
                            (Some(a), Some(p)) => ev.add_assign(a, &p),
                        }
                    }
                }
                z
            }
        };
        // An output ciphertext whose weights are all zero still answers: as 0·x.
        sums.into_iter()
            .map(|s| match s {
                Some(c) => Ok(c),
                None => {
                    let zero = ev.encode(|| vec![0u64; self.slots])?;
                    Ok(ev.sc_mult(&inputs[0], &zero))
                }
            })
            .collect()
    }
}

/// A conv plan's encoded kernel (server state; secret: no `Debug`).
pub struct ConvPrepared<P> {
    /// Per (output ciphertext, group, shift, offset); `None` when all zero.
    pts: Vec<Option<P>>,
    /// Baseline: per shift d ≥ 1, the (lo, hi) masks.
    masks: Vec<(P, P)>,
}

/// Direct 2-D convolution over the integers (zero padding), the kernel's plaintext reference:
/// `co·oh·ow` outputs, row-major.
pub fn plain_conv(
    k: &[i64],
    x: &[i64],
    [c, h, w]: [usize; 3],
    co: usize,
    [kh, kw]: [usize; 2],
    [sh, sw]: [usize; 2],
    [ph, pw]: [usize; 2],
) -> Vec<i128> {
    let (oh, ow) = ((h + 2 * ph - kh) / sh + 1, (w + 2 * pw - kw) / sw + 1);
    let mut y = vec![0i128; co * oh * ow];
    for o in 0..co {
        for p in 0..oh {
            for q in 0..ow {
                let mut acc = 0i128;
                for ci in 0..c {
                    for u in 0..kh {
                        for v in 0..kw {
                            let (yy, xx) = (p * sh + u, q * sw + v);
                            if yy < ph || xx < pw || yy - ph >= h || xx - pw >= w {
                                continue;
                            }
                            acc += k[((o * c + ci) * kh + u) * kw + v] as i128
                                * x[(ci * h + yy - ph) * w + xx - pw] as i128;
                        }
                    }
                }
                y[(o * oh + p) * ow + q] = acc;
            }
        }
    }
    y
}
