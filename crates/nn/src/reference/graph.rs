//! The reference evaluation of a whole model graph, layer by layer, in the main format.
//!
//! Rules per layer (docs/model-format.md, "Fixed-point semantics", version 2), with F the main
//! format's fraction bits and `wrap` the reduction to its width:
//! * dense, conv2d: `wrap((Σ W·x) ≫ F + b)`, zero padding for conv2d;
//! * avgpool2d: `wrap((Σ_window x) · q ≫ F)` with q = quantize(1 / (kh·kw)), a linear layer with a
//!   public weight;
//! * maxpool2d: the window's maximum; relu: `max(x, 0)`; flatten: the same values;
//! * add: `wrap(a + b)`;
//! * batchnorm: `wrap((x · s_c) ≫ F + t_c)` with s_c = γ/√(σ² + ε) and t_c = β − μ·s_c quantized;
//! * embedding: the quantized row; gru: [`super::Arith::gru_step`] from h₀ = 0;
//! * fastgrnn: the input rescaled to scale 9 and clamped to 16 bits, the cell of
//!   [`super::fastgrnn`] from h₀ = 0, the states rescaled to the main format;
//! * argmax: the index of the largest value, lowest on ties.
use super::fastgrnn::{rescale, Factors, FastGrnnParams, FloatCell, ACT_BITS, ACT_SCALE};
use super::{argmax, check_tokens, Arith, Counters, SmoothActivations};
use crate::error::{NnError, Result};
use crate::model::{Candidate, FixedPointConfig, Format, Layer, LayerKind, Model, Shape};

/// A layer's quantized parameters. Secret: no `Debug`.
enum Params {
    None,
    Table(Vec<i64>),
    Affine {
        w: Vec<i64>,
        b: Vec<i64>,
    },
    Gru {
        w_ih: Vec<i64>,
        w_hh: Vec<i64>,
        b_ih: Vec<i64>,
        b_hh: Vec<i64>,
    },
    Scalar(i64),
    FastGrnn(Box<FastGrnnParams>),
}

/// A model graph with its weights quantized to a fixed-point configuration. Secret: no `Debug`.
pub struct QuantizedGraph {
    pub layers: Vec<Layer>,
    pub fp: FixedPointConfig,
    params: Vec<Params>,
    /// Weights that saturated when quantized.
    pub saturated_weights: u64,
}

/// The client's input to a graph.
pub enum Input<'a> {
    /// Token ids, for a graph that starts with token input.
    Tokens(&'a [u32]),
    /// Fixed-point values in the main format (row-major: steps × features, or C × H × W).
    Fixed(&'a [i64]),
}

struct Quantizer {
    main: Format,
    saturated: u64,
}

impl Quantizer {
    fn q(&mut self, v: &[f32]) -> Vec<i64> {
        v.iter()
            .map(|x| {
                let (q, s) = self.main.quantize_checked(*x as f64);
                self.saturated += s as u64;
                q
            })
            .collect()
    }
}

impl QuantizedGraph {
    /// Quantizes `model`'s weights with `fp` (its default or one of its variants).
    pub fn new(model: &Model, fp: FixedPointConfig) -> Result<QuantizedGraph> {
        let mut qz = Quantizer {
            main: fp.main,
            saturated: 0,
        };
        let t = &model.tensors;
        let mut params = Vec::with_capacity(model.config.graph.layers.len());
        for l in &model.config.graph.layers {
            let n = l.name.as_str();
            params.push(match &l.kind {
                LayerKind::Embedding { .. } => Params::Table(qz.q(&t.get(n, "weight")?.data)),
                LayerKind::Dense { .. } | LayerKind::Conv2d { .. } => Params::Affine {
                    w: qz.q(&t.get(n, "weight")?.data),
                    b: qz.q(&t.get(n, "bias")?.data),
                },
                LayerKind::BatchNorm { eps, .. } => {
                    let (g, b) = (&t.get(n, "weight")?.data, &t.get(n, "bias")?.data);
                    let (mu, var) = (
                        &t.get(n, "running_mean")?.data,
                        &t.get(n, "running_var")?.data,
                    );
                    if let Some(i) = var.iter().position(|v| *v < 0.0) {
                        return Err(NnError::tensor(
                            "weights.safetensors",
                            &format!("{n}.running_var"),
                            format!("element {i} is negative"),
                        ));
                    }
                    let s: Vec<f32> = g
                        .iter()
                        .zip(var)
                        .map(|(g, v)| g / (v + *eps as f32).sqrt())
                        .collect();
                    let sh: Vec<f32> = b
                        .iter()
                        .zip(mu)
                        .zip(&s)
                        .map(|((b, m), s)| b - m * s)
                        .collect();
                    Params::Affine {
                        w: qz.q(&s),
                        b: qz.q(&sh),
                    }
                }
                LayerKind::AvgPool2d { kernel, .. } => {
                    Params::Scalar(qz.q(&[1.0 / (kernel[0] * kernel[1]) as f32])[0])
                }
                LayerKind::Gru { .. } => Params::Gru {
                    w_ih: qz.q(&t.get(n, "weight_ih")?.data),
                    w_hh: qz.q(&t.get(n, "weight_hh")?.data),
                    b_ih: qz.q(&t.get(n, "bias_ih")?.data),
                    b_hh: qz.q(&t.get(n, "bias_hh")?.data),
                },
                LayerKind::FastGrnn {
                    input,
                    hidden,
                    w_rank,
                    u_rank,
                    ..
                } => {
                    let get = |k: &str| t.get(n, k).map(|v| &v.data[..]);
                    let factors = |full: &str, left: &str, right: &str, r: &Option<usize>| {
                        Ok::<_, NnError>(match r {
                            None => Factors::Full(get(full)?),
                            Some(k) => Factors::LowRank(get(left)?, get(right)?, *k),
                        })
                    };
                    let one = |k: &str| Ok::<_, NnError>(get(k)?.first().copied().unwrap_or(0.0));
                    let (p, sat) = FastGrnnParams::from_float(&FloatCell {
                        input: *input,
                        hidden: *hidden,
                        w: factors("W", "W2", "W1", w_rank)?,
                        u: factors("U", "U2", "U1", u_rank)?,
                        bias_gate: get("bias_gate")?,
                        bias_update: get("bias_update")?,
                        zeta: one("zeta")?,
                        nu: one("nu")?,
                    })?;
                    qz.saturated += sat;
                    Params::FastGrnn(Box::new(p))
                }
                _ => Params::None,
            });
        }
        Ok(QuantizedGraph {
            layers: model.config.graph.layers.clone(),
            fp,
            params,
            saturated_weights: qz.saturated,
        })
    }

    /// The quantized weights (row-major) and biases of a dense or conv2d layer.
    pub fn affine(&self, layer: usize) -> Option<(&[i64], &[i64])> {
        match self.params.get(layer)? {
            Params::Affine { w, b }
                if matches!(
                    self.layers[layer].kind,
                    LayerKind::Dense { .. } | LayerKind::Conv2d { .. }
                ) =>
            {
                Some((w, b))
            }
            _ => None,
        }
    }

    /// The quantized cell of a fastgrnn layer (its head left empty: the graph's dense rule).
    pub fn fastgrnn(&self, layer: usize) -> Option<&FastGrnnParams> {
        match self.params.get(layer)? {
            Params::FastGrnn(p) => Some(p),
            _ => None,
        }
    }

    /// Quantizes a float input to the main format and clamps it into the input layer's range,
    /// as the client does before a secure run.
    pub fn quantize_input(&self, x: &[f32]) -> Vec<i64> {
        let mut q: Vec<i64> = x.iter().map(|v| self.fp.main.quantize(*v as f64)).collect();
        self.clamp_to_range(&mut q);
        q
    }

    /// Clamps main-format input values into the input layer's stated range, if any.
    fn clamp_to_range(&self, x: &mut [i64]) {
        if let LayerKind::Input { range: Some(r), .. } = self.layers[0].kind {
            r.clamp(self.fp.main, x);
        }
    }
}

/// The reference evaluator of a [`QuantizedGraph`] with activation functions `A`.
pub struct GraphReference<'m, A> {
    pub model: &'m QuantizedGraph,
    pub acts: A,
    pub counters: Counters,
}

impl<'m, A: SmoothActivations> GraphReference<'m, A> {
    pub fn new(model: &'m QuantizedGraph, acts: A) -> Self {
        GraphReference {
            model,
            acts,
            counters: Counters {
                saturated_weights: model.saturated_weights,
                ..Default::default()
            },
        }
    }

    /// Every layer's output for `input`, in layer order (each flattened row-major).
    pub fn run(&mut self, input: Input<'_>) -> Result<Vec<Vec<i64>>> {
        let m = self.model;
        let first = m.layers[0].output;
        let x0 = match (input, first) {
            (Input::Tokens(t), Shape::Tokens { len }) => {
                if len.is_some_and(|n| n != t.len()) {
                    return Err(NnError::Input(format!(
                        "{} tokens, the model reads {}",
                        t.len(),
                        len.unwrap_or(0)
                    )));
                }
                t.iter().map(|&v| v as i64).collect()
            }
            (Input::Fixed(x), s) if !matches!(s, Shape::Tokens { .. }) => {
                let n = match s {
                    Shape::Seq { steps: None, dim } => x.len() / dim.max(1) * dim,
                    Shape::Seq {
                        steps: Some(t),
                        dim,
                    } => t * dim,
                    s => s.elements(),
                };
                if x.len() != n || n == 0 {
                    return Err(NnError::Input(format!(
                        "{} values, the model reads {first}",
                        x.len()
                    )));
                }
                let main = m.fp.main;
                if let Some(i) = x.iter().position(|v| main.clamp(*v) != *v) {
                    return Err(NnError::Input(format!(
                        "value {i} ({}) is outside the {}-bit main format",
                        x[i], main.bits
                    )));
                }
                let mut x = x.to_vec();
                m.clamp_to_range(&mut x);
                x
            }
            (_, s) => {
                return Err(NnError::Input(format!(
                    "the model's input layer reads {s}, a different kind of input"
                )))
            }
        };
        let mut outs: Vec<Vec<i64>> = vec![x0];
        for (i, l) in m.layers.iter().enumerate().skip(1) {
            let y = self.layer(i, l, &outs)?;
            outs.push(y);
        }
        Ok(outs)
    }

    /// The last layer's output for `input`.
    pub fn output(&mut self, input: Input<'_>) -> Result<Vec<i64>> {
        Ok(self.run(input)?.pop().unwrap_or_default())
    }

    fn arith(&mut self) -> Arith<'_, A> {
        Arith {
            main: self.model.fp.main,
            acts: &self.acts,
            counters: &mut self.counters,
        }
    }

    fn layer(&mut self, i: usize, l: &Layer, outs: &[Vec<i64>]) -> Result<Vec<i64>> {
        let m = self.model;
        let x = &outs[i - 1];
        let p = &m.params[i];
        Ok(match (&l.kind, p) {
            (LayerKind::Embedding { vocab, dim }, Params::Table(t)) => {
                let toks: Vec<u32> = x.iter().map(|&v| v as u32).collect();
                check_tokens(&toks, *vocab)?;
                toks.iter()
                    .flat_map(|&k| t[k as usize * dim..(k as usize + 1) * dim].iter().copied())
                    .collect()
            }
            (LayerKind::Dense { input, .. }, Params::Affine { w, b }) => {
                let mut a = self.arith();
                x.chunks(*input)
                    .flat_map(|row| a.linear(w, b, row))
                    .collect()
            }
            (LayerKind::Conv2d { .. }, Params::Affine { w, b }) => self.conv(l, w, b, x),
            (LayerKind::AvgPool2d { kernel, stride }, Params::Scalar(q)) => {
                let sums = pool(l, *kernel, *stride, x, |w| w.iter().sum());
                let mut a = self.arith();
                sums.into_iter().map(|s| a.requantize(s * q, 0)).collect()
            }
            (LayerKind::MaxPool2d { kernel, stride }, _) => pool(l, *kernel, *stride, x, |w| {
                w.iter().copied().max().unwrap_or(0)
            }),
            (LayerKind::Relu, _) => x.iter().map(|v| (*v).max(0)).collect(),
            (LayerKind::Flatten, _) => x.clone(),
            (LayerKind::Add { other }, _) => {
                let j = m
                    .layers
                    .iter()
                    .position(|o| &o.name == other)
                    .ok_or_else(|| NnError::Protocol(format!("add: no layer {other}")))?;
                let mut a = self.arith();
                x.iter().zip(&outs[j]).map(|(u, v)| a.wrap(u + v)).collect()
            }
            (LayerKind::BatchNorm { channels, .. }, Params::Affine { w, b }) => {
                let per = x.len() / channels;
                let mut a = self.arith();
                x.iter()
                    .enumerate()
                    .map(|(k, v)| a.requantize(v * w[k / per], b[k / per]))
                    .collect()
            }
            (
                LayerKind::Gru {
                    input,
                    hidden,
                    activation,
                    sequences,
                },
                Params::Gru {
                    w_ih,
                    w_hh,
                    b_ih,
                    b_hh,
                },
            ) => self.gru(
                x,
                *input,
                *hidden,
                *activation,
                *sequences,
                [w_ih, w_hh, b_ih, b_hh],
            ),
            (LayerKind::FastGrnn { sequences, .. }, Params::FastGrnn(p)) => {
                // The cell's own formats (16-bit at scale 9, `super::fastgrnn`) inside, the
                // main format outside.
                let main = m.fp.main;
                let lim = 1i64 << (ACT_BITS - 1);
                let xs: Vec<i64> = x
                    .iter()
                    .map(|v| rescale(*v, main.scale, ACT_SCALE).clamp(-lim, lim - 1))
                    .collect();
                let mut states = p.states(&xs)?;
                if !sequences {
                    states = states.split_off(states.len().saturating_sub(1));
                }
                let mut a = self.arith();
                states
                    .iter()
                    .flatten()
                    .map(|h| a.wrap(rescale(*h, ACT_SCALE, main.scale)))
                    .collect()
            }
            (LayerKind::Argmax, _) => {
                let per = l.input.elements();
                x.chunks(per).map(|c| argmax(c) as i64).collect()
            }
            (kind, _) => {
                return Err(NnError::Unsupported(format!(
                    "layer {} ({}): the reference has no {} yet",
                    i,
                    l.name,
                    kind.type_name()
                )))
            }
        })
    }

    fn conv(&mut self, l: &Layer, w: &[i64], b: &[i64], x: &[i64]) -> Vec<i64> {
        let (
            Shape::Image { c, h, w: wd },
            Shape::Image {
                c: co,
                h: oh,
                w: ow,
            },
        ) = (l.input, l.output)
        else {
            return Vec::new();
        };
        let LayerKind::Conv2d {
            kernel: [kh, kw],
            stride: [sh, sw],
            padding: [ph, pw],
            ..
        } = l.kind
        else {
            return Vec::new();
        };
        let mut a = self.arith();
        let mut out = Vec::with_capacity(co * oh * ow);
        for (o, bo) in b.iter().enumerate().take(co) {
            for p in 0..oh {
                for q in 0..ow {
                    let mut acc = 0i64;
                    for ci in 0..c {
                        for u in 0..kh {
                            let y = (p * sh + u) as isize - ph as isize;
                            if y < 0 || y >= h as isize {
                                continue;
                            }
                            for v in 0..kw {
                                let xx = (q * sw + v) as isize - pw as isize;
                                if xx < 0 || xx >= wd as isize {
                                    continue;
                                }
                                let wi = ((o * c + ci) * kh + u) * kw + v;
                                acc += w[wi] * x[(ci * h + y as usize) * wd + xx as usize];
                            }
                        }
                    }
                    out.push(a.requantize(acc, *bo));
                }
            }
        }
        out
    }

    fn gru(
        &mut self,
        x: &[i64],
        input: usize,
        hidden: usize,
        activation: Candidate,
        sequences: bool,
        [w_ih, w_hh, b_ih, b_hh]: [&Vec<i64>; 4],
    ) -> Vec<i64> {
        let fp = self.model.fp;
        let mut a = self.arith();
        let mut h = vec![0i64; hidden];
        let mut all = Vec::new();
        for xt in x.chunks(input) {
            let gi = a.linear(w_ih, b_ih, xt);
            h = a.gru_step(&fp, activation, w_hh, b_hh, &gi, &h);
            if sequences {
                all.extend_from_slice(&h);
            }
        }
        if sequences {
            all
        } else {
            h
        }
    }
}

/// Applies `f` to every window of an image layer's input, channel by channel.
pub(crate) fn pool(
    l: &Layer,
    k: [usize; 2],
    s: [usize; 2],
    x: &[i64],
    f: impl Fn(&[i64]) -> i64,
) -> Vec<i64> {
    let (Shape::Image { c, h, w }, Shape::Image { h: oh, w: ow, .. }) = (l.input, l.output) else {
        return Vec::new();
    };
    let mut out = Vec::with_capacity(c * oh * ow);
    let mut win = Vec::with_capacity(k[0] * k[1]);
    for ci in 0..c {
        for p in 0..oh {
            for q in 0..ow {
                win.clear();
                for u in 0..k[0] {
                    for v in 0..k[1] {
                        win.push(x[(ci * h + p * s[0] + u) * w + q * s[1] + v]);
                    }
                }
                out.push(f(&win));
            }
        }
    }
    out
}
