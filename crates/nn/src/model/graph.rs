//! The model graph: typed layers in evaluation order, each with the shape it reads and writes.
//!
//! A layer reads the output of the layer before it; `add` also reads the output of an earlier
//! layer named by `other` (a residual connection). Shapes are inferred from the `input` layer
//! and checked at every layer, so a model that parses is one every evaluator can run; an error
//! names the layer (its index and name) and the field at fault.
use super::json::{get, layer_name, obj, string, uint};
use super::Candidate;
use crate::error::{NnError, Result};
use serde_json::{Map, Value};

/// Largest dimension of any axis (channels, features, pixels, steps).
const MAX_DIM: u64 = 1 << 20;
/// Largest number of elements in one tensor (a 3×224×224 image has 150,528).
const MAX_ELEMENTS: usize = 1 << 24;

/// The shape of a tensor flowing between layers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// `len` token ids (text input), or a length fixed only by the caller (`None`).
    Tokens { len: Option<usize> },
    /// A sequence of `steps` vectors of `dim` features.
    Seq { steps: Option<usize>, dim: usize },
    /// A vector of `n` values.
    Vector(usize),
    /// An image of `c` channels of `h` × `w` pixels, channel-major (PyTorch's CHW).
    Image { c: usize, h: usize, w: usize },
}

impl Shape {
    /// Number of values per item (a sequence counts one step).
    pub fn elements(&self) -> usize {
        match *self {
            Shape::Tokens { .. } => 1,
            Shape::Seq { dim, .. } => dim,
            Shape::Vector(n) => n,
            Shape::Image { c, h, w } => c * h * w,
        }
    }
}

impl std::fmt::Display for Shape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let steps = |s: Option<usize>| s.map_or("T".to_string(), |s| s.to_string());
        match *self {
            Shape::Tokens { len } => write!(f, "tokens[{}]", steps(len)),
            Shape::Seq { steps: s, dim } => write!(f, "[{}, {dim}]", steps(s)),
            Shape::Vector(n) => write!(f, "[{n}]"),
            Shape::Image { c, h, w } => write!(f, "[{c}, {h}, {w}]"),
        }
    }
}

/// Two spatial sizes, (height, width).
pub type Pair = [usize; 2];

/// What a layer computes. Weights are named `{layer}.{tensor}` (see [`Layer::tensors`]).
#[derive(Clone, Debug, PartialEq)]
pub enum LayerKind {
    /// The client's input: token ids or fixed-point values of `shape`, with the real interval
    /// the values lie in where the model states one (pixels in [0, 1], say).
    Input {
        shape: Shape,
        range: Option<InputRange>,
    },
    /// A public table lookup applied by the client: token id → row of `dim` values.
    Embedding {
        vocab: usize,
        dim: usize,
    },
    /// `y = W x + b`, W of `output` × `input`; on a sequence, per step.
    Dense {
        input: usize,
        output: usize,
    },
    /// 2-D cross-correlation with zero padding, PyTorch's `Conv2d` (no groups, no dilation).
    Conv2d {
        in_channels: usize,
        out_channels: usize,
        kernel: Pair,
        stride: Pair,
        padding: Pair,
    },
    /// The mean of each window: a linear layer with the public weight 1/(kh·kw).
    AvgPool2d {
        kernel: Pair,
        stride: Pair,
    },
    /// The maximum of each window.
    MaxPool2d {
        kernel: Pair,
        stride: Pair,
    },
    Relu,
    /// Image → vector in channel-major order (PyTorch's `flatten(1)`).
    Flatten,
    /// Element-wise sum with the output of the earlier layer `other` (a residual connection).
    Add {
        other: String,
    },
    /// Per-channel affine `γ (x − μ)/√(σ² + ε) + β`, which exporters fold into the layer before
    /// it where they can.
    BatchNorm {
        channels: usize,
        eps: f64,
    },
    /// PyTorch's single-layer GRU with candidate activation g; `sequences` returns every state.
    Gru {
        input: usize,
        hidden: usize,
        activation: Candidate,
        sequences: bool,
    },
    /// PyTorch's single-layer LSTM.
    Lstm {
        input: usize,
        hidden: usize,
        sequences: bool,
    },
    /// FastGRNN (Kusupati et al. 2018), optionally with low-rank W = W2·W1 and U = U2·U1.
    FastGrnn {
        input: usize,
        hidden: usize,
        w_rank: Option<usize>,
        u_rank: Option<usize>,
        sequences: bool,
    },
    /// The index of the largest value (lowest index on ties): the class the client learns.
    Argmax,
}

impl LayerKind {
    /// The `type` string of model.json.
    pub fn type_name(&self) -> &'static str {
        match self {
            LayerKind::Input { .. } => "input",
            LayerKind::Embedding { .. } => "embedding",
            LayerKind::Dense { .. } => "dense",
            LayerKind::Conv2d { .. } => "conv2d",
            LayerKind::AvgPool2d { .. } => "avgpool2d",
            LayerKind::MaxPool2d { .. } => "maxpool2d",
            LayerKind::Relu => "relu",
            LayerKind::Flatten => "flatten",
            LayerKind::Add { .. } => "add",
            LayerKind::BatchNorm { .. } => "batchnorm",
            LayerKind::Gru { .. } => "gru",
            LayerKind::Lstm { .. } => "lstm",
            LayerKind::FastGrnn { .. } => "fastgrnn",
            LayerKind::Argmax => "argmax",
        }
    }
}

/// One layer with its inferred shapes.
#[derive(Clone, Debug, PartialEq)]
pub struct Layer {
    pub name: String,
    pub kind: LayerKind,
    pub input: Shape,
    pub output: Shape,
}

impl Layer {
    /// The weight tensors this layer needs: `(name, shape)`, in a fixed order.
    pub fn tensors(&self) -> Vec<(String, Vec<usize>)> {
        let t = |suffix: &str, shape: Vec<usize>| (format!("{}.{suffix}", self.name), shape);
        match self.kind {
            LayerKind::Embedding { vocab, dim } => vec![t("weight", vec![vocab, dim])],
            LayerKind::Dense { input, output } => {
                vec![t("weight", vec![output, input]), t("bias", vec![output])]
            }
            LayerKind::Conv2d {
                in_channels,
                out_channels,
                kernel,
                ..
            } => vec![
                t(
                    "weight",
                    vec![out_channels, in_channels, kernel[0], kernel[1]],
                ),
                t("bias", vec![out_channels]),
            ],
            LayerKind::BatchNorm { channels, .. } => vec![
                t("weight", vec![channels]),
                t("bias", vec![channels]),
                t("running_mean", vec![channels]),
                t("running_var", vec![channels]),
            ],
            LayerKind::Gru { input, hidden, .. } => vec![
                t("weight_ih", vec![3 * hidden, input]),
                t("weight_hh", vec![3 * hidden, hidden]),
                t("bias_ih", vec![3 * hidden]),
                t("bias_hh", vec![3 * hidden]),
            ],
            LayerKind::Lstm { input, hidden, .. } => vec![
                t("weight_ih", vec![4 * hidden, input]),
                t("weight_hh", vec![4 * hidden, hidden]),
                t("bias_ih", vec![4 * hidden]),
                t("bias_hh", vec![4 * hidden]),
            ],
            LayerKind::FastGrnn {
                input,
                hidden,
                w_rank,
                u_rank,
                ..
            } => {
                let mut v = match w_rank {
                    None => vec![t("W", vec![hidden, input])],
                    Some(r) => vec![t("W1", vec![r, input]), t("W2", vec![hidden, r])],
                };
                match u_rank {
                    None => v.push(t("U", vec![hidden, hidden])),
                    Some(r) => {
                        v.push(t("U1", vec![r, hidden]));
                        v.push(t("U2", vec![hidden, r]));
                    }
                }
                v.extend([
                    t("bias_gate", vec![hidden]),
                    t("bias_update", vec![hidden]),
                    t("zeta", vec![1]),
                    t("nu", vec![1]),
                ]);
                v
            }
            LayerKind::Input { .. }
            | LayerKind::AvgPool2d { .. }
            | LayerKind::MaxPool2d { .. }
            | LayerKind::Relu
            | LayerKind::Flatten
            | LayerKind::Add { .. }
            | LayerKind::Argmax => Vec::new(),
        }
    }
}

/// The validated graph: the first layer is `input`; `argmax`, if present, is the last.
#[derive(Clone, Debug, PartialEq)]
pub struct Graph {
    pub layers: Vec<Layer>,
}

/// The real interval `[lo, hi]` a model's fixed-point input lies in (`"range"` of the input
/// layer). Every party clamps the input into it ([`InputRange::clamp`]), so a linear layer's
/// accumulator bound may use it instead of the whole main format: this is what lets an image
/// network's first layer fit a smaller HE plaintext modulus.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct InputRange {
    pub lo: f64,
    pub hi: f64,
}

impl InputRange {
    /// The interval in `main`'s integers, quantised as the input is.
    pub fn fixed(&self, main: crate::Format) -> (i64, i64) {
        (main.quantize(self.lo), main.quantize(self.hi))
    }

    /// Clamps fixed-point input values into the interval.
    pub fn clamp(&self, main: crate::Format, x: &mut [i64]) {
        let (lo, hi) = self.fixed(main);
        for v in x {
            *v = (*v).clamp(lo, hi);
        }
    }
}

/// The range of an input layer: absent, or two finite reals lo < hi.
fn input_range(m: &Map<String, Value>, what: &str) -> Result<Option<InputRange>> {
    let Some(v) = m.get("range") else {
        return Ok(None);
    };
    let pair: Option<Vec<f64>> = v
        .as_array()
        .map(|a| a.iter().filter_map(|x| x.as_f64()).collect());
    match pair.as_deref() {
        Some(&[lo, hi]) if lo.is_finite() && hi.is_finite() && lo < hi => {
            Ok(Some(InputRange { lo, hi }))
        }
        _ => Err(NnError::config(format!(
            "{what}.range must be [lo, hi] with finite lo < hi"
        ))),
    }
}

fn bad(i: usize, name: &str, msg: impl std::fmt::Display) -> NnError {
    NnError::config(format!("layers[{i}] ({name}): {msg}"))
}

fn dims(m: &Map<String, Value>, key: &str, what: &str, default: Option<Pair>) -> Result<Pair> {
    let v = match (m.get(key), default) {
        (None, Some(d)) => return Ok(d),
        (None, None) => return Err(NnError::config(format!("{what}.{key} is missing"))),
        (Some(v), _) => v,
    };
    let one = |x: &Value| -> Result<usize> {
        x.as_u64()
            .filter(|&x| x <= MAX_DIM)
            .map(|x| x as usize)
            .ok_or_else(|| {
                NnError::config(format!(
                    "{what}.{key} must be an integer in [0, {MAX_DIM}] or a pair of them"
                ))
            })
    };
    match v {
        Value::Array(a) if a.len() == 2 => Ok([one(&a[0])?, one(&a[1])?]),
        Value::Array(_) => Err(NnError::config(format!(
            "{what}.{key} must have two entries (height, width)"
        ))),
        x => {
            let d = one(x)?;
            Ok([d, d])
        }
    }
}

fn positive(p: Pair, key: &str, what: &str) -> Result<Pair> {
    if p[0] == 0 || p[1] == 0 {
        return Err(NnError::config(format!("{what}.{key} must be positive")));
    }
    Ok(p)
}

fn flag(m: &Map<String, Value>, key: &str, what: &str) -> Result<bool> {
    match m.get(key) {
        None => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(NnError::config(format!(
            "{what}.{key} must be true or false"
        ))),
    }
}

fn input_shape(m: &Map<String, Value>, what: &str) -> Result<Shape> {
    let dtype = match m.get("dtype") {
        None => "fixed",
        Some(v) => v
            .as_str()
            .ok_or_else(|| NnError::config(format!("{what}.dtype must be a string")))?,
    };
    let shape: Vec<usize> = get(m, "shape", what)?
        .as_array()
        .ok_or_else(|| NnError::config(format!("{what}.shape must be an array")))?
        .iter()
        .map(|x| {
            x.as_u64()
                .filter(|&x| (1..=MAX_DIM).contains(&x))
                .map(|x| x as usize)
                .ok_or_else(|| {
                    NnError::config(format!("{what}.shape entries must be in [1, {MAX_DIM}]"))
                })
        })
        .collect::<Result<_>>()?;
    let s = match (dtype, shape.as_slice()) {
        ("tokens", [t]) => Shape::Tokens { len: Some(*t) },
        ("fixed", [n]) => Shape::Vector(*n),
        ("fixed", [t, n]) => Shape::Seq {
            steps: Some(*t),
            dim: *n,
        },
        ("fixed", [c, h, w]) => Shape::Image {
            c: *c,
            h: *h,
            w: *w,
        },
        ("tokens", _) => {
            return Err(NnError::config(format!(
                "{what}.shape of token input must be [length]"
            )))
        }
        ("fixed", _) => {
            return Err(NnError::config(format!(
                "{what}.shape must be [n], [steps, n] or [channels, height, width]"
            )))
        }
        (other, _) => {
            return Err(NnError::config(format!(
                "{what}.dtype {other:?} (expected \"tokens\" or \"fixed\")"
            )))
        }
    };
    if s.elements() > MAX_ELEMENTS {
        return Err(NnError::config(format!(
            "{what}.shape has more than {MAX_ELEMENTS} elements"
        )));
    }
    Ok(s)
}

fn activation_of(m: &Map<String, Value>, what: &str) -> Result<Candidate> {
    match string(m, "activation", what)? {
        "tanh" => Ok(Candidate::Tanh),
        "relu" => Ok(Candidate::Relu),
        other => Err(NnError::config(format!(
            "{what}.activation {other:?} (expected tanh or relu)"
        ))),
    }
}

fn rank(m: &Map<String, Value>, key: &str, what: &str) -> Result<Option<usize>> {
    match m.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(_) => Ok(Some(uint(m, key, what, 1, 4096)? as usize)),
    }
}

/// Parses one layer object's kind (shapes come later, from the graph).
fn parse_kind(m: &Map<String, Value>, what: &str) -> Result<LayerKind> {
    let d =
        |key: &str, lo: u64, hi: u64| -> Result<usize> { Ok(uint(m, key, what, lo, hi)? as usize) };
    Ok(match string(m, "type", what)? {
        "input" => LayerKind::Input {
            shape: input_shape(m, what)?,
            range: input_range(m, what)?,
        },
        "embedding" => LayerKind::Embedding {
            vocab: d("vocab", 2, 1 << 20)?,
            dim: d("dim", 1, 4096)?,
        },
        "dense" => LayerKind::Dense {
            input: d("input", 1, MAX_DIM)?,
            output: d("output", 1, MAX_DIM)?,
        },
        "conv2d" => LayerKind::Conv2d {
            in_channels: d("in_channels", 1, 4096)?,
            out_channels: d("out_channels", 1, 4096)?,
            kernel: positive(dims(m, "kernel", what, None)?, "kernel", what)?,
            stride: positive(dims(m, "stride", what, Some([1, 1]))?, "stride", what)?,
            padding: dims(m, "padding", what, Some([0, 0]))?,
        },
        t @ ("avgpool2d" | "maxpool2d") => {
            let kernel = positive(dims(m, "kernel", what, None)?, "kernel", what)?;
            let stride = positive(dims(m, "stride", what, Some(kernel))?, "stride", what)?;
            if t == "avgpool2d" {
                LayerKind::AvgPool2d { kernel, stride }
            } else {
                LayerKind::MaxPool2d { kernel, stride }
            }
        }
        "relu" => LayerKind::Relu,
        "flatten" => LayerKind::Flatten,
        "add" => LayerKind::Add {
            other: string(m, "other", what)?.to_string(),
        },
        "batchnorm" => {
            let eps = match m.get("eps") {
                None => 1e-5,
                Some(v) => v
                    .as_f64()
                    .filter(|e| e.is_finite() && *e > 0.0 && *e < 1.0)
                    .ok_or_else(|| NnError::config(format!("{what}.eps must be in (0, 1)")))?,
            };
            LayerKind::BatchNorm {
                channels: d("channels", 1, 4096)?,
                eps,
            }
        }
        "gru" => LayerKind::Gru {
            input: d("input", 1, 4096)?,
            hidden: d("hidden", 1, 4096)?,
            activation: activation_of(m, what)?,
            sequences: flag(m, "return_sequences", what)?,
        },
        "lstm" => LayerKind::Lstm {
            input: d("input", 1, 4096)?,
            hidden: d("hidden", 1, 4096)?,
            sequences: flag(m, "return_sequences", what)?,
        },
        "fastgrnn" => LayerKind::FastGrnn {
            input: d("input", 1, 4096)?,
            hidden: d("hidden", 1, 4096)?,
            w_rank: rank(m, "w_rank", what)?,
            u_rank: rank(m, "u_rank", what)?,
            sequences: flag(m, "return_sequences", what)?,
        },
        "argmax" => LayerKind::Argmax,
        other => {
            return Err(NnError::config(format!(
                "{what}.type {other:?} is not a layer kind (known: input, embedding, dense, \
                 conv2d, avgpool2d, maxpool2d, relu, flatten, add, batchnorm, gru, lstm, \
                 fastgrnn, argmax)"
            )))
        }
    })
}

/// The output size of a window sliding over `n` positions (after padding) or an error.
fn slide(n: usize, pad: usize, k: usize, s: usize) -> Option<usize> {
    let padded = n + 2 * pad;
    (padded >= k).then(|| (padded - k) / s + 1)
}

fn window(input: Shape, c_out: Option<usize>, k: Pair, s: Pair, p: Pair) -> Result<Shape, String> {
    let Shape::Image { c, h, w } = input else {
        return Err(format!("needs an image input, got {input}"));
    };
    if p[0] >= k[0] || p[1] >= k[1] {
        return Err(format!(
            "padding {p:?} must be smaller than the kernel {k:?}"
        ));
    }
    match (slide(h, p[0], k[0], s[0]), slide(w, p[1], k[1], s[1])) {
        (Some(oh), Some(ow)) => Ok(Shape::Image {
            c: c_out.unwrap_or(c),
            h: oh,
            w: ow,
        }),
        _ => Err(format!(
            "kernel {k:?} is larger than the padded input {input}"
        )),
    }
}

/// The output shape of `kind` on `input`, or why it cannot read it.
fn infer(kind: &LayerKind, input: Shape) -> Result<Shape, String> {
    let seq_in = |want: usize| match input {
        Shape::Seq { steps, dim } if dim == want => Ok(steps),
        Shape::Seq { dim, .. } => Err(format!("input = {want} but it reads {dim} features")),
        other => Err(format!("needs a sequence input, got {other}")),
    };
    let recurrent = |steps: Option<usize>, hidden: usize, sequences: bool| {
        if sequences {
            Shape::Seq { steps, dim: hidden }
        } else {
            Shape::Vector(hidden)
        }
    };
    match *kind {
        LayerKind::Input { .. } => Err("input must be the first layer, and only it".into()),
        LayerKind::Embedding { dim, .. } => match input {
            Shape::Tokens { len } => Ok(Shape::Seq { steps: len, dim }),
            other => Err(format!("needs token input, got {other}")),
        },
        LayerKind::Dense {
            input: n_in,
            output,
        } => match input {
            Shape::Vector(n) if n == n_in => Ok(Shape::Vector(output)),
            Shape::Seq { steps, dim } if dim == n_in => Ok(Shape::Seq { steps, dim: output }),
            Shape::Vector(n) | Shape::Seq { dim: n, .. } => {
                Err(format!("input = {n_in} but it reads {n} values"))
            }
            other => Err(format!("needs a vector input (add a flatten), got {other}")),
        },
        LayerKind::Conv2d {
            in_channels,
            out_channels,
            kernel,
            stride,
            padding,
        } => {
            if let Shape::Image { c, .. } = input {
                if c != in_channels {
                    return Err(format!(
                        "in_channels = {in_channels} but its input has {c} channels"
                    ));
                }
            }
            window(input, Some(out_channels), kernel, stride, padding)
        }
        LayerKind::AvgPool2d { kernel, stride } | LayerKind::MaxPool2d { kernel, stride } => {
            window(input, None, kernel, stride, [0, 0])
        }
        LayerKind::Relu | LayerKind::Add { .. } => match input {
            Shape::Tokens { .. } => Err("cannot read token ids".into()),
            s => Ok(s),
        },
        LayerKind::Flatten => match input {
            Shape::Image { .. } | Shape::Vector(_) => Ok(Shape::Vector(input.elements())),
            other => Err(format!("needs an image or a vector, got {other}")),
        },
        LayerKind::BatchNorm { channels, .. } => match input {
            Shape::Image { c, .. } | Shape::Vector(c) if c == channels => Ok(input),
            Shape::Image { c, .. } | Shape::Vector(c) => {
                Err(format!("channels = {channels} but its input has {c}"))
            }
            other => Err(format!("needs an image or a vector, got {other}")),
        },
        LayerKind::Gru {
            input: n,
            hidden,
            sequences,
            ..
        }
        | LayerKind::Lstm {
            input: n,
            hidden,
            sequences,
        }
        | LayerKind::FastGrnn {
            input: n,
            hidden,
            sequences,
            ..
        } => Ok(recurrent(seq_in(n)?, hidden, sequences)),
        LayerKind::Argmax => match input {
            Shape::Vector(_) => Ok(Shape::Vector(1)),
            Shape::Seq { steps, .. } => Ok(Shape::Seq { steps, dim: 1 }),
            other => Err(format!(
                "needs a vector or a sequence of vectors, got {other}"
            )),
        },
    }
}

impl Graph {
    /// Parses and validates the `layers` array of a version-2 model.json.
    pub fn parse(layers: &Value) -> Result<Graph> {
        let arr = layers
            .as_array()
            .ok_or_else(|| NnError::config("layers must be an array"))?;
        if arr.is_empty() || arr.len() > 4096 {
            return Err(NnError::config("layers must hold 1 to 4096 layers"));
        }
        let mut kinds = Vec::with_capacity(arr.len());
        for (i, l) in arr.iter().enumerate() {
            let what = format!("layers[{i}]");
            let m = obj(l, &what)?;
            let name = layer_name(m, &what)?;
            let what = format!("layers[{i}] ({name})");
            kinds.push((name, parse_kind(m, &what)?));
        }
        Graph::from_kinds(kinds)
    }

    /// Infers and checks every layer's shapes; the first layer must be `input`.
    pub fn from_kinds(kinds: Vec<(String, LayerKind)>) -> Result<Graph> {
        let mut layers: Vec<Layer> = Vec::with_capacity(kinds.len());
        let n = kinds.len();
        for (i, (name, kind)) in kinds.into_iter().enumerate() {
            if layers.iter().any(|l| l.name == name) {
                return Err(bad(i, &name, "the name is used by an earlier layer"));
            }
            let (input, output) = match (&kind, layers.last()) {
                (LayerKind::Input { shape, .. }, None) => (*shape, *shape),
                (_, None) => return Err(bad(i, &name, "the first layer must be of type input")),
                (_, Some(prev)) => {
                    let out = infer(&kind, prev.output).map_err(|m| bad(i, &name, m))?;
                    (prev.output, out)
                }
            };
            if let LayerKind::Add { other } = &kind {
                let o = layers.iter().find(|l| &l.name == other).ok_or_else(|| {
                    bad(
                        i,
                        &name,
                        format!("other = {other:?} names no earlier layer"),
                    )
                })?;
                if o.output != input {
                    return Err(bad(
                        i,
                        &name,
                        format!("adds {} (from {other}) to {input}", o.output),
                    ));
                }
            }
            if kind == LayerKind::Argmax && i + 1 != n {
                return Err(bad(i, &name, "argmax must be the last layer"));
            }
            if output.elements() > MAX_ELEMENTS {
                return Err(bad(i, &name, format!("output {output} is too large")));
            }
            layers.push(Layer {
                name,
                kind,
                input,
                output,
            });
        }
        Ok(Graph { layers })
    }

    /// The shape the client provides.
    pub fn input_shape(&self) -> Shape {
        self.layers[0].output
    }

    /// The input layer's stated range, if any.
    pub fn input_range(&self) -> Option<InputRange> {
        match self.layers[0].kind {
            LayerKind::Input { range, .. } => range,
            _ => None,
        }
    }

    /// Clamps a fixed-point input into the stated range (no-op without one): every party
    /// applies it, so the secure run and the reference see the same values.
    pub fn clamp_input(&self, main: crate::Format, x: &mut [i64]) {
        if let Some(r) = self.input_range() {
            r.clamp(main, x);
        }
    }

    /// The final layer's output shape.
    pub fn output_shape(&self) -> Shape {
        self.layers[self.layers.len() - 1].output
    }

    /// Whether the graph ends in `argmax` (the client learns a class index).
    pub fn ends_in_argmax(&self) -> bool {
        self.layers
            .last()
            .is_some_and(|l| l.kind == LayerKind::Argmax)
    }

    /// Every weight tensor of the graph, in layer order.
    pub fn tensors(&self) -> Vec<(String, Vec<usize>)> {
        self.layers.iter().flat_map(Layer::tensors).collect()
    }

    /// The layer called `name`.
    pub fn layer(&self, name: &str) -> Option<&Layer> {
        self.layers.iter().find(|l| l.name == name)
    }

    /// The graph as model.json's `layers` array.
    pub fn to_json(&self) -> Value {
        Value::Array(self.layers.iter().map(layer_json).collect())
    }
}

fn pair(p: Pair) -> Value {
    serde_json::json!([p[0], p[1]])
}

fn layer_json(l: &Layer) -> Value {
    use serde_json::json;
    let mut v = match &l.kind {
        LayerKind::Input { shape, range } => {
            let mut v = match *shape {
                Shape::Tokens { len } => json!({"dtype": "tokens", "shape": [len.unwrap_or(0)]}),
                Shape::Vector(n) => json!({"dtype": "fixed", "shape": [n]}),
                Shape::Seq { steps, dim } => {
                    json!({"dtype": "fixed", "shape": [steps.unwrap_or(0), dim]})
                }
                Shape::Image { c, h, w } => json!({"dtype": "fixed", "shape": [c, h, w]}),
            };
            if let Some(r) = range {
                v["range"] = json!([r.lo, r.hi]);
            }
            v
        }
        LayerKind::Embedding { vocab, dim } => json!({"vocab": vocab, "dim": dim}),
        LayerKind::Dense { input, output } => json!({"input": input, "output": output}),
        LayerKind::Conv2d {
            in_channels,
            out_channels,
            kernel,
            stride,
            padding,
        } => json!({"in_channels": in_channels, "out_channels": out_channels,
                    "kernel": pair(*kernel), "stride": pair(*stride), "padding": pair(*padding)}),
        LayerKind::AvgPool2d { kernel, stride } | LayerKind::MaxPool2d { kernel, stride } => {
            json!({"kernel": pair(*kernel), "stride": pair(*stride)})
        }
        LayerKind::Relu | LayerKind::Flatten | LayerKind::Argmax => json!({}),
        LayerKind::Add { other } => json!({"other": other}),
        LayerKind::BatchNorm { channels, eps } => json!({"channels": channels, "eps": eps}),
        LayerKind::Gru {
            input,
            hidden,
            activation,
            sequences,
        } => json!({"input": input, "hidden": hidden, "activation": activation.name(),
                    "return_sequences": sequences}),
        LayerKind::Lstm {
            input,
            hidden,
            sequences,
        } => json!({"input": input, "hidden": hidden, "return_sequences": sequences}),
        LayerKind::FastGrnn {
            input,
            hidden,
            w_rank,
            u_rank,
            sequences,
        } => json!({"input": input, "hidden": hidden, "w_rank": w_rank, "u_rank": u_rank,
                    "return_sequences": sequences}),
    };
    if let Value::Object(m) = &mut v {
        m.insert("type".into(), l.kind.type_name().into());
        m.insert("name".into(), l.name.clone().into());
    }
    v
}
