//! GALA image networks in family `hegc`: linear layers by HE on Z_p shares, truncation, ReLU,
//! max-pooling and argmax by garbled circuits (GAZELLE's pipeline with GALA's kernels,
//! DESIGN.md §4).
//!
//! The network runs as a list of [`Op`]s on additive shares mod p. Each Dense or Conv2d layer is
//! one HE flight: the client encrypts its share x_c of the layer input, the server applies W by
//! GALA's kernel (row-encoding-share-RaS matvec, kernel-grouping convolution), GAZELLE's, or
//! a coefficient-encoded product (Cheetah-style, no rotations) as the per-layer cost model
//! ([`cost`]) chooses or the owner asks, masks, floods to ≥ 40 statistical bits and switches modulus; it adds W·x_s of its
//! own share and b·2^F in the clear. Both parties then hold shares of the accumulator Σ W·x +
//! b·2^F mod p, a *pending* value. AvgPool (window sums times the public 1/k², as the
//! reference's) and Add (a residual sum) are local linear maps on shares that also leave a
//! pending value, and Flatten is free (shares stay in the reference's CHW order). One garbled
//! batch then finishes a pending value: truncation (`≫ F`, wrap into the main format), ReLU,
//! and the max-pool window after them fused into the same circuit and round
//! ([`secinfer_gc::requant::window_circuit`]). The last pending value goes into a garbled
//! argmax: the client learns the class, and the logits only when the server allows it.
//!
//! The finishing steps may instead run by OT on the same shares ([`Nonlinear::Ot`],
//! `secinfer_ss::blocks::modt`: SIRNN / Cheetah-style millionaires' comparisons and
//! multiplexers), which computes the same function; the argmax stays garbled.
//!
//! Bit-exactness with the reference holds because every pending value stays within
//! (−p/2, p/2): [`NetShape::check_range`] refuses, naming the layer, a model whose weights could
//! exceed it for some input in the main format.
mod arch;
mod conv;
pub mod cost;
mod model;
mod session;

pub use arch::{random_arch, ARCHS};
pub use conv::ConvGeom;
pub use cost::{Choice, Estimate, Kernel, KernelChoice, UnitCosts};
pub use model::{HegcClientModel, HegcServerModel};
pub use session::{client_session, client_session_images, server_session, MAX_IMAGES};

use crate::error::{NnError, Result};
use crate::model::{Format, Layer, LayerKind, ModelConfig, Shape};
use crate::reference::QuantizedGraph;
use secinfer_gc::requant::Truncation;
use secinfer_he::kernels::coeff_prime::CoeffPlan;
use secinfer_he::{ConvMethod, ConvPlan, MatVecMethod, MatVecPlan, Params};
use sha2::{Digest, Sha256};

/// Protocol identifier exchanged in the handshake.
pub const PROTOCOL: &str = "secinfer-hegc/3";
/// The BFV parameter set: t ≈ 2^23 holds the accumulators under their interval bound
/// ([`NetShape::check_range`]), Q leaves room for 40-bit flooding of every conv and dense layer.
pub const HE_PARAMS: &str = "n8192-t23";
/// Statistical security of every HE response (DESIGN.md §2).
pub const FLOOD_BITS: u32 = 40;
/// SoftSpokenOT's chunk bits k for the pools of the OT finishing steps: 16/k bytes per COT
/// offline (IKNP: 16) for ≈ 2^k/k AES calls per COT. 6 keeps the MNIST CNN's pool fill under
/// its byte budget at a CPU cost the 0.25 s budget absorbs (docs/benchmarks.md, "Truncation,
/// ReLU and max-pool by OT").
pub const OT_CHUNK_BITS: u32 = 6;
/// Most channel blocks per slot row of a convolution: GALA's kernel needs a Galois key per
/// block offset (≈ 0.6 MB each at n = 8192), so small images use fewer, wider blocks
/// ([`secinfer_he::ConvPlan::with_max_groups`]).
pub const MAX_CONV_GROUPS: usize = 16;

/// How the finishing steps (truncation, ReLU, max-pooling) run on the Z_p shares.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Nonlinear {
    /// One garbled batch per step (`secinfer_gc::requant::window_circuit`).
    Gc,
    /// Millionaires' comparisons and multiplexers on OTs (`secinfer_ss::blocks::modt`).
    #[default]
    Ot,
}

impl Nonlinear {
    pub fn name(self) -> &'static str {
        match self {
            Nonlinear::Gc => "gc",
            Nonlinear::Ot => "ot",
        }
    }
}

impl std::str::FromStr for Nonlinear {
    type Err = NnError;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "gc" => Ok(Nonlinear::Gc),
            "ot" => Ok(Nonlinear::Ot),
            o => Err(NnError::Input(format!(
                "unknown nonlinear protocol {o:?} (gc or ot)"
            ))),
        }
    }
}

/// A max-pool window over a CHW image (public).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Window {
    pub c: usize,
    pub h: usize,
    pub w: usize,
    pub kernel: [usize; 2],
    pub stride: [usize; 2],
    pub oh: usize,
    pub ow: usize,
}

impl Window {
    fn size(&self) -> usize {
        self.kernel[0] * self.kernel[1]
    }
    fn outputs(&self) -> usize {
        self.c * self.oh * self.ow
    }
    /// The input index of every window element, window-major (the reference's `pool` order).
    fn gather(&self) -> Vec<usize> {
        let mut v = Vec::with_capacity(self.outputs() * self.size());
        for ci in 0..self.c {
            for p in 0..self.oh {
                for q in 0..self.ow {
                    for u in 0..self.kernel[0] {
                        for x in 0..self.kernel[1] {
                            v.push(
                                (ci * self.h + p * self.stride[0] + u) * self.w
                                    + q * self.stride[1]
                                    + x,
                            );
                        }
                    }
                }
            }
        }
        v
    }
}

/// What a linear HE layer computes (public: the shapes only).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum LinearShape {
    Dense { rows: usize, cols: usize },
    Conv(ConvGeom),
}

/// One step of the network on shares (public).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum OpKind {
    /// An HE layer: a finished value in, a pending accumulator (scale 2F → F) out.
    Linear(LinearShape),
    /// Window sums times `q` (the reference's quantized 1/k²): local, pending out.
    AvgPool { window: Window, q: i64 },
    /// Plus the finished output of op `other`: local, pending out (shift 0).
    Add { other: usize },
    /// A garbled batch: the pending value truncated, then ReLU and a max-pool window if set.
    Finish {
        tr: Truncation,
        window: Option<Window>,
    },
    /// The garbled argmax of the pending (or finished, shift 0) value.
    Argmax { tr: Truncation },
}

/// One op and the graph layers it covers.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Op {
    /// The first graph layer of the op (its weights, for a linear op).
    pub layer: usize,
    /// The last graph layer whose output the op's result is.
    pub last: usize,
    pub name: String,
    /// Values out.
    pub len: usize,
    pub kind: OpKind,
}

/// The public shape of a network the `hegc` family runs.
#[derive(Clone, Debug, PartialEq)]
pub struct NetShape {
    pub ops: Vec<Op>,
    /// Values of the client's input.
    pub input_len: usize,
    /// The input layer's range in main-format integers, if the model states one: the client
    /// clamps its input into it, and [`NetShape::check_range`] bounds the first layer with it.
    pub input_range: Option<(i64, i64)>,
    pub main: Format,
    /// What the owner asked for: one kernel, or the cost model's per layer.
    pub choice: KernelChoice,
    /// By op index: each linear op's kernel and the cost model's reasons.
    pub choices: Vec<Option<Choice>>,
    /// The finishing steps' protocol.
    pub nonlinear: Nonlinear,
}

fn unsupported(i: usize, name: &str, kind: &LayerKind, why: &str) -> NnError {
    NnError::Unsupported(format!("layer {i} ({name}, {}): {why}", kind.type_name()))
}

/// The convolution kernel for a matvec method (GALA's, or GAZELLE's for both others).
pub fn conv_method(m: MatVecMethod) -> ConvMethod {
    match m {
        MatVecMethod::Gala => ConvMethod::Gala,
        _ => ConvMethod::Gazelle,
    }
}

/// A pooling layer's window on its input image.
fn window(
    i: usize,
    l: &crate::model::Layer,
    kernel: [usize; 2],
    stride: [usize; 2],
) -> Result<Window> {
    match (l.input, l.output) {
        (Shape::Image { c, h, w }, Shape::Image { h: oh, w: ow, .. })
            if kernel[0] * kernel[1] > 0 && oh > 0 && ow > 0 =>
        {
            Ok(Window {
                c,
                h,
                w,
                kernel,
                stride,
                oh,
                ow,
            })
        }
        _ => Err(unsupported(i, &l.name, &l.kind, "pooling needs an image")),
    }
}

/// Pushes the truncation of the pending linear value (layer `layer`, `len` values), if any.
fn truncate_pending(
    ops: &mut Vec<Op>,
    pending: &mut Option<u32>,
    name: &str,
    layer: usize,
    len: usize,
    bits: u32,
) {
    if let Some(shift) = pending.take() {
        ops.push(Op {
            layer,
            last: layer,
            name: format!("{name}.trunc"),
            len,
            kind: OpKind::Finish {
                tr: Truncation {
                    shift,
                    bits,
                    relu: false,
                },
                window: None,
            },
        });
    }
}

/// The op whose output layer `i` (an Add) adds: it must be a finished value on shares of the
/// same size as the layer's input.
fn add_source(layers: &[Layer], ops: &[Op], i: usize, other: &str) -> Result<usize> {
    let l = &layers[i];
    let j = layers.iter().position(|o| o.name == other);
    let src = j.and_then(|j| {
        if j == 0 {
            return None;
        }
        ops.iter().rposition(|o| {
            o.last == j
                && !matches!(
                    o.kind,
                    OpKind::Linear(_) | OpKind::AvgPool { .. } | OpKind::Add { .. }
                )
        })
    });
    let Some(src) = src else {
        return Err(unsupported(i, &l.name, &l.kind, "the added layer's output is not a finished value on shares (add the output of a ReLU, pooling or the truncation after a linear layer)"));
    };
    if ops[src].len != l.input.elements() {
        return Err(unsupported(
            i,
            &l.name,
            &l.kind,
            "the added values differ in size",
        ));
    }
    Ok(src)
}

/// One finishing op for the run of ReLU and (at most one) max-pool layers starting at `*i`,
/// after a value pending truncation by `shift`; leaves `*i` on the run's last layer.
fn finishing_run(layers: &[Layer], i: &mut usize, shift: u32, bits: u32) -> Result<Op> {
    let first = *i;
    let mut relu = false;
    let mut win: Option<Window> = None;
    let mut len = layers[first].input.elements();
    while let Some(n) = layers.get(*i) {
        match &n.kind {
            LayerKind::Relu => relu = true,
            LayerKind::MaxPool2d { kernel: k, stride } if win.is_none() => {
                win = Some(window(*i, n, *k, *stride)?);
                len = n.output.elements();
            }
            _ => break,
        }
        *i += 1;
    }
    *i -= 1;
    let name = if *i > first {
        format!("{}..{}", layers[first].name, layers[*i].name)
    } else {
        layers[first].name.clone()
    };
    Ok(Op {
        layer: first.saturating_sub(1),
        last: *i,
        name,
        len,
        kind: OpKind::Finish {
            tr: Truncation { shift, bits, relu },
            window: win,
        },
    })
}

/// What every hegc network needs: an argmax at the end, a linear layer, and an input.
fn check_ops(layers: &[Layer], ops: &[Op], input_len: usize) -> Result<()> {
    if !matches!(ops.last().map(|o| &o.kind), Some(OpKind::Argmax { .. })) {
        let (j, l) = (layers.len() - 1, &layers[layers.len() - 1]);
        return Err(unsupported(
            j,
            &l.name,
            &l.kind,
            "the hegc network must end in an argmax",
        ));
    }
    if !ops.iter().any(|o| matches!(o.kind, OpKind::Linear(_))) {
        return Err(NnError::Unsupported(
            "an hegc network needs a dense or conv2d layer".into(),
        ));
    }
    if input_len == 0 {
        return Err(NnError::Unsupported(
            "the hegc network reads no values".into(),
        ));
    }
    Ok(())
}

impl NetShape {
    /// Reads `config`'s graph into ops. Dense, Conv2d, AvgPool2d, MaxPool2d, ReLU, Flatten and
    /// Add are supported, ending in an argmax; anything else is refused with an error naming
    /// the layer (BatchNorm must be folded at export).
    pub fn new(config: &ModelConfig, kernel: impl Into<KernelChoice>) -> Result<NetShape> {
        let choice = kernel.into();
        let layers = &config.graph.layers;
        let main = config.fixed_point.main;
        let input_len = config.graph.input_shape().elements();
        let mut ops: Vec<Op> = Vec::new();
        // Shift of the pending value, `None` when the current value is finished.
        let mut pending: Option<u32> = None;
        let finish = |ops: &mut Vec<Op>, pending: &mut Option<u32>, i: usize, len: usize| {
            truncate_pending(ops, pending, &layers[i - 1].name, i - 1, len, main.bits)
        };
        let mut i = 1;
        while i < layers.len() {
            let l = &layers[i];
            let in_len = l.input.elements();
            let out_len = l.output.elements();
            match &l.kind {
                LayerKind::Flatten => {
                    if let Some(op) = ops.last_mut() {
                        if pending.is_none() {
                            op.last = i;
                        }
                    }
                }
                LayerKind::Dense { input, output } => {
                    finish(&mut ops, &mut pending, i, in_len);
                    if *input != in_len {
                        return Err(unsupported(i, &l.name, &l.kind, "input size mismatch"));
                    }
                    let shape = LinearShape::Dense {
                        rows: *output,
                        cols: *input,
                    };
                    ops.push(Op {
                        layer: i,
                        last: i,
                        name: l.name.clone(),
                        len: *output,
                        kind: OpKind::Linear(shape),
                    });
                    pending = Some(main.scale);
                }
                LayerKind::Conv2d { .. } => {
                    finish(&mut ops, &mut pending, i, in_len);
                    let g = ConvGeom::new(i, &l.name, &l.kind, l.input, l.output)?;
                    ops.push(Op {
                        layer: i,
                        last: i,
                        name: l.name.clone(),
                        len: out_len,
                        kind: OpKind::Linear(LinearShape::Conv(g)),
                    });
                    pending = Some(main.scale);
                }
                LayerKind::AvgPool2d { kernel: k, stride } => {
                    finish(&mut ops, &mut pending, i, in_len);
                    let window = window(i, l, *k, *stride)?;
                    let q = main.quantize((1.0 / (k[0] * k[1]) as f32) as f64);
                    ops.push(Op {
                        layer: i,
                        last: i,
                        name: l.name.clone(),
                        len: out_len,
                        kind: OpKind::AvgPool { window, q },
                    });
                    pending = Some(main.scale);
                }
                LayerKind::Add { other } => {
                    finish(&mut ops, &mut pending, i, in_len);
                    let other = add_source(layers, &ops, i, other)?;
                    ops.push(Op {
                        layer: i,
                        last: i,
                        name: l.name.clone(),
                        len: out_len,
                        kind: OpKind::Add { other },
                    });
                    pending = Some(0);
                }
                LayerKind::Relu | LayerKind::MaxPool2d { .. } => {
                    let shift = pending.take().unwrap_or(0);
                    let op = finishing_run(layers, &mut i, shift, main.bits)?;
                    ops.push(op);
                }
                LayerKind::Argmax => {
                    if i + 1 != layers.len() {
                        let n = &layers[i + 1];
                        return Err(unsupported(
                            i + 1,
                            &n.name,
                            &n.kind,
                            "a layer after the argmax",
                        ));
                    }
                    let shift = pending.take().unwrap_or(0);
                    ops.push(Op {
                        layer: i,
                        last: i,
                        name: l.name.clone(),
                        len: 1,
                        kind: OpKind::Argmax {
                            tr: Truncation {
                                shift,
                                bits: main.bits,
                                relu: false,
                            },
                        },
                    });
                }
                LayerKind::BatchNorm { .. } => {
                    return Err(unsupported(
                        i,
                        &l.name,
                        &l.kind,
                        "fold batch normalisation into the layer before it at export",
                    ))
                }
                k => {
                    return Err(unsupported(
                        i,
                        &l.name,
                        k,
                        "no hegc protocol for this layer kind",
                    ))
                }
            }
            i += 1;
        }
        check_ops(layers, &ops, input_len)?;
        let params = he_params()?;
        let linear: Vec<Option<(String, &LinearShape)>> = ops
            .iter()
            .map(|o| match &o.kind {
                OpKind::Linear(s) => Some((format!("layer {} ({})", o.layer, o.name), s)),
                _ => None,
            })
            .collect();
        let choices = cost::choose(&linear, choice, params, &UnitCosts::MEASURED)?;
        Ok(NetShape {
            ops,
            input_len,
            input_range: config.graph.input_range().map(|r| r.fixed(main)),
            main,
            choice,
            choices,
            nonlinear: Nonlinear::default(),
        })
    }

    /// The kernel of op `k` (`None` for a non-linear op).
    pub fn kernel_of(&self, k: usize) -> Option<Kernel> {
        self.choices.get(k)?.as_ref().map(|c| c.kernel)
    }

    /// `gala`, `gazelle`, `coeff`, `gc`, `ot` or `local`, for the cost report.
    pub fn kernel_name(&self, k: usize) -> &'static str {
        match (&self.ops[k].kind, self.kernel_of(k)) {
            (OpKind::Linear(_), Some(kr)) => kr.name(),
            (OpKind::Linear(_), None) => "none",
            (OpKind::AvgPool { .. } | OpKind::Add { .. }, _) => "local",
            (OpKind::Finish { .. }, _) => self.nonlinear.name(),
            (OpKind::Argmax { .. }, _) => "gc",
        }
    }

    /// The linear ops' HE plans, by op index (`None` for the other ops), each with its chosen
    /// kernel.
    pub fn plans(&self, params: &Params) -> Result<Vec<Option<LinearPlan>>> {
        self.ops
            .iter()
            .enumerate()
            .map(|(k, o)| {
                let (OpKind::Linear(shape), Some(kernel)) = (&o.kind, self.kernel_of(k)) else {
                    return Ok(None);
                };
                let planned = cost::plan(shape, kernel, params).map_err(|e| {
                    NnError::Unsupported(format!("layer {} ({}): {e}", o.layer, o.name))
                })?;
                Ok(Some(match planned {
                    cost::Planned::Dense(p) => LinearPlan::Dense(p),
                    cost::Planned::Conv(p) => LinearPlan::Conv(p),
                    cost::Planned::Coeff(p) => LinearPlan::Coeff(p),
                }))
            })
            .collect()
    }

    fn plans_on(
        &self,
        m: MatVecMethod,
        row_len: usize,
        rows: usize,
        groups: usize,
    ) -> Result<Vec<Option<LinearPlan>>> {
        self.ops
            .iter()
            .map(|o| {
                Ok(match &o.kind {
                    OpKind::Linear(LinearShape::Dense { rows: r, cols }) => Some(
                        LinearPlan::Dense(MatVecPlan::new(m, *r, *cols, row_len, rows)?),
                    ),
                    OpKind::Linear(LinearShape::Conv(g)) => {
                        let (hp, wp) = g.he_image();
                        let plan =
                            ConvPlan::new(conv_method(m), hp, wp, g.c, g.m, g.k, row_len, rows)
                                .map_err(|e| {
                                    NnError::Unsupported(format!(
                                        "layer {} ({}): {e}",
                                        o.layer, o.name
                                    ))
                                })?
                                .with_max_groups(groups);
                        Some(LinearPlan::Conv(plan))
                    }
                    _ => None,
                })
            })
            .collect()
    }

    /// A hash of everything both parties must agree on.
    pub fn hash(&self) -> String {
        let s = format!(
            "{PROTOCOL}|{HE_PARAMS}|{:?}|{:?}|{}|{:?}|{:?}",
            self.main,
            self.choices
                .iter()
                .map(|c| c.as_ref().map(|c| c.kernel))
                .collect::<Vec<_>>(),
            self.input_len,
            self.input_range,
            self.ops
        );
        // The garbled protocol adds nothing to the string; the OT one names itself and its
        // pools' chunk, which both parties' fillers must share.
        let s = match self.nonlinear {
            Nonlinear::Gc => s,
            Nonlinear::Ot => format!("{s}|nonlinear-ot-k{OT_CHUNK_BITS}"),
        };
        let d = Sha256::digest(s.as_bytes());
        d.iter().take(16).map(|b| format!("{b:02x}")).collect()
    }

    /// Refuses weights whose pending values could leave (−p/2, p/2) for some input. The bound
    /// is interval arithmetic over the ops: the input lies in its stated range (else anywhere
    /// in the main format); a linear layer's output i over inputs in [lo, hi] lies in
    /// [Σ_j min(W_ij·lo, W_ij·hi), Σ_j max(…)] + b_i·2^F (zero padding adds 0, so 0 joins the
    /// interval); an average's in k²·q·[lo, hi]; a sum's in the sum of its operands'; a
    /// truncation's result is its pending interval shifted where that fits the format (else the
    /// whole format), and ReLU keeps its non-negative part. A ReLU network's hidden layers thus
    /// see [0, 2^(bits−1)), half the signed worst case, and an image's pixels [0, 1].
    pub fn check_range(&self, q: &QuantizedGraph, p: u64) -> Result<()> {
        let half = ((p - 1) / 2) as i128;
        let (f_lo, f_hi) = (self.main.min_int() as i128, self.main.max_int() as i128);
        let mut cur = self
            .input_range
            .map_or((f_lo, f_hi), |(lo, hi)| (lo as i128, hi as i128));
        // The finished interval of each op, for Add's operand.
        let mut finished: Vec<(i128, i128)> = Vec::with_capacity(self.ops.len());
        let mut pending = cur;
        for o in &self.ops {
            let worst: Vec<(i128, i128)> = match &o.kind {
                OpKind::Linear(shape) => {
                    let (w, b) = q.affine(o.layer).ok_or_else(|| {
                        NnError::Protocol(format!("layer {} has no weights", o.layer))
                    })?;
                    let per = match shape {
                        LinearShape::Dense { cols, .. } => *cols,
                        LinearShape::Conv(g) => g.c * g.kh * g.kw,
                    };
                    if w.len() != b.len() * per {
                        return Err(NnError::Protocol(format!(
                            "layer {} ({}): weights do not match its shape",
                            o.layer, o.name
                        )));
                    }
                    let (lo, hi) = (cur.0.min(0), cur.1.max(0));
                    let one = 1i128 << self.main.scale;
                    w.chunks_exact(per)
                        .zip(b)
                        .map(|(row, bi)| {
                            let (mut a, mut z) = (*bi as i128 * one, *bi as i128 * one);
                            for v in row {
                                let (x, y) = (*v as i128 * lo, *v as i128 * hi);
                                a += x.min(y);
                                z += x.max(y);
                            }
                            (a, z)
                        })
                        .collect()
                }
                OpKind::AvgPool { window, q } => {
                    let k = window.size() as i128 * *q as i128;
                    let (x, y) = (k * cur.0, k * cur.1);
                    vec![(x.min(y), x.max(y))]
                }
                OpKind::Add { other } => {
                    let o2 = finished.get(*other).copied().unwrap_or((f_lo, f_hi));
                    vec![(cur.0 + o2.0, cur.1 + o2.1)]
                }
                OpKind::Finish { tr, .. } => {
                    let (lo, hi) = (pending.0 >> tr.shift, pending.1 >> tr.shift);
                    cur = if lo >= f_lo && hi <= f_hi {
                        (lo, hi)
                    } else {
                        (f_lo, f_hi)
                    };
                    if tr.relu {
                        cur = (cur.0.max(0), cur.1.max(0));
                    }
                    finished.push(cur);
                    continue;
                }
                OpKind::Argmax { .. } => {
                    finished.push(cur);
                    continue;
                }
            };
            let far = worst
                .iter()
                .map(|(a, z)| a.abs().max(z.abs()))
                .enumerate()
                .find(|(_, a)| *a > half);
            if let Some((i, acc)) = far {
                return Err(NnError::Unsupported(format!(
                    "layer {} ({}): output {i}'s accumulator can reach 2^{:.1}, beyond the HE \
                     plaintext's ±2^{:.1}: use a main format with fewer bits or state the \
                     input's range (docs/model-format.md)",
                    o.layer,
                    o.name,
                    (acc as f64).log2(),
                    (half as f64).log2()
                )));
            }
            pending = worst.iter().fold((i128::MAX, i128::MIN), |(a, z), (x, y)| {
                (a.min(*x), z.max(*y))
            });
            finished.push(cur);
        }
        Ok(())
    }
}

/// One linear op's HE layout.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LinearPlan {
    Dense(MatVecPlan),
    Conv(ConvPlan),
    /// The coefficient-encoded product (a convolution on the client's im2col vectors).
    Coeff(CoeffPlan),
}

impl LinearPlan {
    pub fn rotation_steps(&self) -> Vec<usize> {
        match self {
            LinearPlan::Dense(p) => p.rotation_steps(),
            LinearPlan::Conv(p) => p.rotation_steps(),
            LinearPlan::Coeff(_) => Vec::new(),
        }
    }
    pub fn in_cts(&self) -> usize {
        match self {
            LinearPlan::Dense(p) => p.col_chunks,
            LinearPlan::Conv(p) => p.in_cts,
            LinearPlan::Coeff(p) => p.in_cts(),
        }
    }
    pub fn out_cts(&self) -> usize {
        match self {
            LinearPlan::Dense(p) => p.out_cts,
            LinearPlan::Conv(p) => p.out_cts,
            LinearPlan::Coeff(p) => p.out_cts(),
        }
    }
    /// Weight plaintexts the kernel encodes: one per (output ct, column chunk, diagonal) for
    /// GALA's and GAZELLE's matvecs, one per (input ct, output ct, channel shift, kernel
    /// offset) for the convolution, one per (block, column chunk) for the coefficient kernel.
    pub fn plaintext_count(&self) -> usize {
        match self {
            LinearPlan::Dense(p) => p.out_cts * p.col_chunks * p.g,
            LinearPlan::Conv(p) => p.in_cts * p.out_cts * p.cn * p.k * p.k,
            LinearPlan::Coeff(p) => p.plaintext_count(),
        }
    }
}

/// Cost of one step of the network, as one party measured it.
#[derive(Clone, Debug, Default)]
pub struct LayerCost {
    pub name: String,
    /// `gala`, `gazelle`, `coeff`, `gc`, `ot` or `local`.
    pub kernel: String,
    pub he_bytes: u64,
    pub gc_bytes: u64,
    /// Bytes of the OT finishing steps ([`Nonlinear::Ot`]).
    pub ot_bytes: u64,
    pub time_s: f64,
    pub rounds: u64,
}

#[cfg(test)]
mod tests;

/// The BFV parameters of [`HE_PARAMS`], built once (the cost model plans on them).
pub fn he_params() -> Result<&'static Params> {
    static P: std::sync::OnceLock<Params> = std::sync::OnceLock::new();
    if let Some(p) = P.get() {
        return Ok(p);
    }
    let p = Params::by_name(HE_PARAMS)?;
    Ok(P.get_or_init(|| p))
}

/// A random MLP `dims[0] → dims[1] → … → dims[k]` with ReLU between layers and an argmax at the
/// end, in the main format `(bits, frac)` (tests and `secinfer bench net`): weights uniform in
/// ±1/√fan-in, biases in ±0.25, from a public seed.
pub fn random_mlp(dims: &[usize], bits: u32, frac: u32, seed: u64) -> Result<crate::model::Model> {
    if dims.len() < 2 {
        return Err(NnError::Input("an MLP needs at least two sizes".into()));
    }
    let mut layers = vec![serde_json::json!({
        "type": "input", "name": "input", "dtype": "fixed", "shape": [dims[0]]
    })];
    for k in 1..dims.len() {
        layers.push(serde_json::json!({
            "type": "dense", "name": format!("fc{k}"), "input": dims[k - 1], "output": dims[k]
        }));
        if k + 1 < dims.len() {
            layers.push(serde_json::json!({"type": "relu", "name": format!("relu{k}")}));
        }
    }
    layers.push(serde_json::json!({"type": "argmax", "name": "class"}));
    random_model(layers, dims[dims.len() - 1], bits, frac, seed)
}

/// A model of the layers `layers` (model.json entries, the input first) with random weights
/// from a public seed: every weight tensor uniform in ±1/√fan-in, every bias in ±0.25
/// (`secinfer bench net --arch` rebuilds the same network in both processes).
pub fn random_model(
    layers: Vec<serde_json::Value>,
    classes: usize,
    bits: u32,
    frac: u32,
    seed: u64,
) -> Result<crate::model::Model> {
    let json = serde_json::json!({
        "format": "secinfer-model", "version": 2, "task": "classification",
        "layers": layers,
        "fixed_point": {"bits": bits, "frac_bits": frac},
        "labels": (0..classes).map(|i| i.to_string()).collect::<Vec<_>>(),
    });
    let config = ModelConfig::parse(&json.to_string())?;
    let mut prg = secinfer_ot::Prg::from_seed(secinfer_ot::Block(
        0x6865_6763_0000_0000_0000_0000_0000_0000 | seed as u128,
    ));
    let mut uni = |n: usize, bound: f64| -> Vec<f32> {
        (0..n)
            .map(|_| {
                let u = (prg.next_block().low_u64() >> 11) as f64 / (1u64 << 53) as f64;
                ((u * 2.0 - 1.0) * bound) as f32
            })
            .collect()
    };
    let mut map = std::collections::HashMap::new();
    for l in &config.graph.layers {
        for (name, shape) in l.tensors() {
            let n: usize = shape.iter().product();
            let bound = if shape.len() > 1 {
                1.0 / (shape[1..].iter().product::<usize>() as f64).sqrt()
            } else {
                0.25
            };
            let data = uni(n, bound);
            map.insert(name, crate::model::weights::Tensor { shape, data });
        }
    }
    let tensors = crate::model::Tensors::from_map(map, &config.graph)?;
    Ok(crate::model::Model {
        config,
        tensors,
        vocab: None,
    })
}

/// GALA's operation counts (Perm, HstPerm, DecPerm, ScMult, Add) of each linear layer with
/// `method`, on the counting backend with `slots` slots in one cyclic row (GALA's Table IX
/// model is 2048): `(name, counts)` per linear op.
pub fn layer_op_counts(
    shape: &NetShape,
    method: MatVecMethod,
    slots: usize,
) -> Result<Vec<(String, secinfer_he::OpCounts)>> {
    use secinfer_he::Evaluator;
    let plans = shape.plans_on(method, slots, 1, usize::MAX)?;
    let mut out = Vec::new();
    for (o, plan) in shape.ops.iter().zip(plans) {
        let ev = secinfer_he::CountingEvaluator::new(slots, 1);
        match plan {
            Some(LinearPlan::Dense(plan)) => {
                let w = vec![vec![0u64; plan.cols]; plan.rows];
                let pts = plan.prepare(&ev, &w)?;
                plan.eval(&ev, &pts, &vec![(); plan.col_chunks])?;
            }
            Some(LinearPlan::Conv(plan)) => {
                let w = vec![0u64; plan.m * plan.c * plan.k * plan.k];
                let pts = plan.prepare(&ev, &w)?;
                plan.eval(&ev, &pts, &vec![(); plan.in_cts])?;
            }
            // `plans_on` plans slot kernels only.
            Some(LinearPlan::Coeff(_)) | None => continue,
        }
        out.push((o.name.clone(), ev.counter().snapshot()));
    }
    Ok(out)
}

/// [`layer_op_counts`] summed over the network.
pub fn op_counts(
    shape: &NetShape,
    method: MatVecMethod,
    slots: usize,
) -> Result<secinfer_he::OpCounts> {
    let mut t = secinfer_he::OpCounts::default();
    for (_, c) in layer_op_counts(shape, method, slots)? {
        t.perm += c.perm;
        t.hst_perm += c.hst_perm;
        t.dec_perm += c.dec_perm;
        t.sc_mult += c.sc_mult;
        t.add += c.add;
    }
    Ok(t)
}
