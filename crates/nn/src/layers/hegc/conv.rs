//! A PyTorch `Conv2d` (any stride, zero padding, rectangular kernels) on GALA's SAME-padded,
//! stride-1, odd-square convolution kernel ([`secinfer_he::ConvPlan`]).
//!
//! The kernel computes, at every centre (cy, cx) of an image, Σ_{u,v<K} x[cy − r + u][cx − r + v]
//! · w'[u][v] with zeros outside the image (K odd, r = K/2). A `kh × kw` kernel is placed in a
//! K × K one (K = max(kh, kw) made odd) at an anchor (a_y, a_x), so output (oy, ox) of the
//! layer is the kernel's value at centre (oy·s − p' + r − a_y, …), p' the padding the kernel's
//! own zero fill stands for. Where no anchor keeps every centre inside the image, the image is
//! padded with zero shares first (free: both parties pad their shares). Strides compute the full
//! output and keep every s-th centre, the price of a stride-1 kernel.
use crate::error::{NnError, Result};
use crate::model::{LayerKind, Shape};

/// The public geometry of one convolution layer and its HE layout.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ConvGeom {
    /// Input channels and image.
    pub c: usize,
    pub h: usize,
    pub w: usize,
    /// Output channels and image.
    pub m: usize,
    pub oh: usize,
    pub ow: usize,
    pub kh: usize,
    pub kw: usize,
    pub stride: [usize; 2],
    pub padding: [usize; 2],
    /// The kernel's odd square size.
    pub k: usize,
    /// Zero rows / columns added to the image before encryption (each side).
    pub pre_pad: [usize; 2],
    /// Where the layer's kernel sits in the K × K one.
    pub anchor: [usize; 2],
}

/// Per dimension: (pre-padding, anchor) keeping every centre within the (padded) image.
fn fit(n: usize, on: usize, kn: usize, k: usize, s: usize, p: usize) -> (usize, usize) {
    let r = k / 2;
    // Without padding the image: centre(o) = o·s − p + r − a ∈ [0, n) for o ∈ [0, on).
    let last = (on - 1) * s;
    let lo = (last + r + 1).saturating_sub(n + p);
    let hi = (k - kn).min(r.saturating_sub(p));
    if p <= r && lo <= hi {
        return (0, lo);
    }
    // Padded by p: centre(o) = o·s + r − a with (on − 1)·s + kn ≤ n + 2p.
    (p, (r + 1).saturating_sub(kn))
}

impl ConvGeom {
    /// The geometry of `kind` on `input`, or `None` if `kind` is no convolution.
    pub fn new(
        i: usize,
        name: &str,
        kind: &LayerKind,
        input: Shape,
        output: Shape,
    ) -> Result<Self> {
        let (
            LayerKind::Conv2d {
                in_channels,
                out_channels,
                kernel: [kh, kw],
                stride,
                padding,
            },
            Shape::Image { c, h, w },
            Shape::Image { h: oh, w: ow, .. },
        ) = (kind, input, output)
        else {
            return Err(NnError::Unsupported(format!(
                "layer {i} ({name}): a convolution needs image input and output"
            )));
        };
        if *in_channels != c || oh == 0 || ow == 0 || stride.contains(&0) {
            return Err(NnError::Unsupported(format!(
                "layer {i} ({name}): the convolution does not match its input {c}×{h}×{w}"
            )));
        }
        let k = (*kh).max(*kw) | 1;
        let (py, ay) = fit(h, oh, *kh, k, stride[0], padding[0]);
        let (px, ax) = fit(w, ow, *kw, k, stride[1], padding[1]);
        Ok(ConvGeom {
            c,
            h,
            w,
            m: *out_channels,
            oh,
            ow,
            kh: *kh,
            kw: *kw,
            stride: *stride,
            padding: *padding,
            k,
            pre_pad: [py, px],
            anchor: [ay, ax],
        })
    }

    /// The image the HE kernel sees (after pre-padding).
    pub fn he_image(&self) -> (usize, usize) {
        (self.h + 2 * self.pre_pad[0], self.w + 2 * self.pre_pad[1])
    }

    pub fn out_len(&self) -> usize {
        self.m * self.oh * self.ow
    }

    pub fn in_len(&self) -> usize {
        self.c * self.h * self.w
    }

    /// The client's CHW share, pre-padded, in the kernel's HWC order.
    pub fn to_hwc(&self, x: &[u64]) -> Vec<u64> {
        let (hp, wp) = self.he_image();
        let [py, px] = self.pre_pad;
        let mut out = vec![0u64; hp * wp * self.c];
        for ch in 0..self.c {
            for y in 0..self.h {
                for xx in 0..self.w {
                    out[((y + py) * wp + xx + px) * self.c + ch] =
                        x[(ch * self.h + y) * self.w + xx];
                }
            }
        }
        out
    }

    /// The layer's CHW output from the kernel's full HWC output (hp·wp·m values).
    pub fn crop(&self, full: &[u64]) -> Vec<u64> {
        let (_, wp) = self.he_image();
        let r = self.k / 2;
        let centre = |o: usize, d: usize| {
            o * self.stride[d] + self.pre_pad[d] + r - self.padding[d] - self.anchor[d]
        };
        let mut out = Vec::with_capacity(self.out_len());
        for o in 0..self.m {
            for oy in 0..self.oh {
                let cy = centre(oy, 0);
                for ox in 0..self.ow {
                    out.push(full[(cy * wp + centre(ox, 1)) * self.m + o]);
                }
            }
        }
        out
    }

    /// The K × K kernel tensor (M×C×K×K) holding the layer's `kh × kw` weights (mod p).
    pub fn square_weights(&self, w: &[u64]) -> Vec<u64> {
        let k = self.k;
        let mut out = vec![0u64; self.m * self.c * k * k];
        for o in 0..self.m {
            for ch in 0..self.c {
                for u in 0..self.kh {
                    for v in 0..self.kw {
                        let src = ((o * self.c + ch) * self.kh + u) * self.kw + v;
                        let dst =
                            ((o * self.c + ch) * k + u + self.anchor[0]) * k + v + self.anchor[1];
                        out[dst] = w[src];
                    }
                }
            }
        }
        out
    }

    /// The im2col vectors of a CHW share, one per output pixel (row-major), each holding the
    /// C·kh·kw values under the kernel (C, then kernel row, then column; 0 in the padding):
    /// the layer is then W (M × C·kh·kw) times these vectors.
    pub fn im2col(&self, x: &[u64]) -> Vec<u64> {
        let per = self.c * self.kh * self.kw;
        let mut out = Vec::with_capacity(self.oh * self.ow * per);
        for oy in 0..self.oh {
            for ox in 0..self.ow {
                for ch in 0..self.c {
                    for u in 0..self.kh {
                        let y = (oy * self.stride[0] + u) as isize - self.padding[0] as isize;
                        for v in 0..self.kw {
                            let xx = (ox * self.stride[1] + v) as isize - self.padding[1] as isize;
                            let inside = (0..self.h as isize).contains(&y)
                                && (0..self.w as isize).contains(&xx);
                            out.push(if inside {
                                x[(ch * self.h + y as usize) * self.w + xx as usize]
                            } else {
                                0
                            });
                        }
                    }
                }
            }
        }
        out
    }

    /// The layer's CHW output from the product's pixel-major values (pixel × M).
    pub fn from_pixels(&self, y: &[u64]) -> Vec<u64> {
        let px = self.oh * self.ow;
        let mut out = vec![0u64; self.out_len()];
        for (k, v) in y.iter().enumerate() {
            out[(k % self.m) * px + k / self.m] = *v;
        }
        out
    }

    /// The layer's convolution of a CHW vector mod p (the server's own share).
    pub fn plain(&self, w: &[u64], x: &[u64], p: u64) -> Vec<u64> {
        let mut out = Vec::with_capacity(self.out_len());
        for o in 0..self.m {
            for oy in 0..self.oh {
                for ox in 0..self.ow {
                    let mut acc: u128 = 0;
                    for ch in 0..self.c {
                        for u in 0..self.kh {
                            let y = (oy * self.stride[0] + u) as isize - self.padding[0] as isize;
                            if y < 0 || y >= self.h as isize {
                                continue;
                            }
                            for v in 0..self.kw {
                                let xx =
                                    (ox * self.stride[1] + v) as isize - self.padding[1] as isize;
                                if xx < 0 || xx >= self.w as isize {
                                    continue;
                                }
                                let wi = ((o * self.c + ch) * self.kh + u) * self.kw + v;
                                let xi = (ch * self.h + y as usize) * self.w + xx as usize;
                                acc += w[wi] as u128 * x[xi] as u128;
                            }
                        }
                    }
                    out.push((acc % p as u128) as u64);
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use secinfer_he::kernels::conv::reference;

    fn geom(c: usize, hw: usize, m: usize, k: [usize; 2], s: usize, p: usize) -> ConvGeom {
        let oh = (hw + 2 * p - k[0]) / s + 1;
        let ow = (hw + 2 * p - k[1]) / s + 1;
        let kind = LayerKind::Conv2d {
            in_channels: c,
            out_channels: m,
            kernel: k,
            stride: [s, s],
            padding: [p, p],
        };
        let input = Shape::Image { c, h: hw, w: hw };
        let output = Shape::Image { c: m, h: oh, w: ow };
        ConvGeom::new(1, "conv", &kind, input, output).unwrap()
    }

    /// The SAME-kernel path (pre-pad, square weights, plaintext SAME conv, crop) and the
    /// im2col path (W times the im2col vectors, back to CHW) equal the layer's direct
    /// convolution for strides, paddings and even / rectangular kernels.
    #[test]
    fn same_kernel_layout_equals_the_direct_convolution() {
        let p = 65537u64;
        let mut s = 12345u64;
        let mut rnd = |m: u64| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (s >> 33) % m
        };
        for (c, hw, m, k, st, pd) in [
            (2, 7, 3, [3, 3], 1, 1),
            (1, 8, 2, [5, 5], 1, 0),
            (3, 9, 2, [3, 3], 2, 1),
            (2, 6, 2, [2, 2], 1, 0),
            (2, 6, 2, [4, 4], 2, 1),
            (1, 7, 2, [1, 3], 1, 2),
            (2, 5, 3, [3, 3], 1, 3),
        ] {
            let g = geom(c, hw, m, k, st, pd);
            let x: Vec<u64> = (0..g.in_len()).map(|_| rnd(p)).collect();
            let w: Vec<u64> = (0..m * c * k[0] * k[1]).map(|_| rnd(p)).collect();
            let (hp, wp) = g.he_image();
            let full = reference(hp, wp, c, m, g.k, &g.to_hwc(&x), &g.square_weights(&w), p);
            assert_eq!(g.crop(&full), g.plain(&w, &x, p), "{g:?}");
            // The coefficient kernel's layout: W times the im2col vectors, back to CHW.
            let cols = c * k[0] * k[1];
            let pixels: Vec<u64> = g
                .im2col(&x)
                .chunks_exact(cols)
                .flat_map(|v| {
                    w.chunks_exact(cols)
                        .map(|row| {
                            let s: u128 = row
                                .iter()
                                .zip(v)
                                .map(|(a, b)| *a as u128 * *b as u128)
                                .sum();
                            (s % p as u128) as u64
                        })
                        .collect::<Vec<_>>()
                })
                .collect();
            assert_eq!(g.from_pixels(&pixels), g.plain(&w, &x, p), "im2col {g:?}");
        }
    }
}
