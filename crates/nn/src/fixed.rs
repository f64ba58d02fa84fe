//! Fixed-point quantisation and the plaintext reference evaluator of docs/model-format.md
//! ("Fixed-point semantics"). It fixes, integer for integer, what a secure run must produce; the
//! Python reference `python/secinfer/fixedpoint.py` implements the same rules and the tests hold
//! the two to each other.
use crate::model::{Candidate, Model, ModelConfig, Task};

/// A two's-complement fixed-point format: `bits`-bit integers X meaning X / 2^frac.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Format {
    pub bits: u32,
    pub frac: u32,
}

impl Format {
    pub fn lo(self) -> i64 {
        -(1i64 << (self.bits - 1))
    }
    pub fn hi(self) -> i64 {
        (1i64 << (self.bits - 1)) - 1
    }
    /// Round to nearest (ties up), saturating; returns the value and whether it saturated.
    pub fn quantize(self, v: f64) -> (i64, bool) {
        let x = (v * (1u64 << self.frac) as f64 + 0.5).floor();
        let q = x.clamp(self.lo() as f64, self.hi() as f64);
        (q as i64, q != x)
    }
    /// Two's-complement reduction to `bits` bits.
    pub fn wrap(self, x: i64) -> i64 {
        let m = (1i64 << self.bits) - 1;
        (x.wrapping_sub(self.lo()) & m) + self.lo()
    }
    pub fn clamp(self, x: i64) -> i64 {
        x.clamp(self.lo(), self.hi())
    }
}

/// Input and output formats of one activation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ActFormat {
    pub input: Format,
    pub output: Format,
}

/// A model's fixed-point configuration: the main format and optional activation formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FixedPointConfig {
    pub main: Format,
    pub sigmoid: Option<ActFormat>,
    pub candidate: Option<ActFormat>,
}

impl FixedPointConfig {
    pub fn sigmoid_format(&self) -> ActFormat {
        self.sigmoid.unwrap_or(ActFormat {
            input: self.main,
            output: self.main,
        })
    }
    pub fn candidate_format(&self) -> ActFormat {
        self.candidate.unwrap_or(ActFormat {
            input: self.main,
            output: self.main,
        })
    }
}

/// The smooth activations on already-saturated inputs: `x` in `f.input` → unsaturated integer in
/// `f.output`. The reference uses [`ExactActivations`]; a secure runtime plugs in the function its
/// circuit computes so the reference predicts its output bit for bit.
pub trait SmoothActivations {
    fn sigmoid(&self, x: i64, f: ActFormat) -> i64;
    fn tanh(&self, x: i64, f: ActFormat) -> i64;
}

/// `floor(f(x / 2^fi) · 2^fo + 1/2)` with f evaluated in binary64, as the spec says.
#[derive(Clone, Copy, Debug, Default)]
pub struct ExactActivations;

impl SmoothActivations for ExactActivations {
    fn sigmoid(&self, x: i64, f: ActFormat) -> i64 {
        let r = x as f64 / (1u64 << f.input.frac) as f64;
        let s = 1.0 / (1.0 + (-r).exp());
        (s * (1u64 << f.output.frac) as f64 + 0.5).floor() as i64
    }
    fn tanh(&self, x: i64, f: ActFormat) -> i64 {
        let r = x as f64 / (1u64 << f.input.frac) as f64;
        (r.tanh() * (1u64 << f.output.frac) as f64 + 0.5).floor() as i64
    }
}

/// What the reference saw: wraps of named intermediates, saturated weights and activations.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    pub overflows: u64,
    pub saturated_weights: u64,
    pub saturated_activations: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ActKind {
    Sigmoid,
    Tanh,
    Relu,
}

/// The quantised model (main-format integers). Secret: no `Debug`.
pub struct QuantizedModel {
    pub config: ModelConfig,
    pub fp: FixedPointConfig,
    pub embed: Vec<i64>,
    pub w_ih: Vec<i64>,
    pub w_hh: Vec<i64>,
    pub b_ih: Vec<i64>,
    pub b_hh: Vec<i64>,
    pub w_fc: Vec<i64>,
    pub b_fc: Vec<i64>,
    /// Saturations met while quantising the weights.
    pub saturated_weights: u64,
}

impl QuantizedModel {
    /// Quantises `model`'s weights with `fp` (the default or a variant of its config).
    pub fn new(model: &Model, fp: FixedPointConfig) -> QuantizedModel {
        let mut sat = 0u64;
        let mut q = |v: &[f32]| -> Vec<i64> {
            v.iter()
                .map(|x| {
                    let (q, s) = fp.main.quantize(*x as f64);
                    sat += s as u64;
                    q
                })
                .collect()
        };
        let w = &model.weights;
        QuantizedModel {
            config: model.config.clone(),
            fp,
            embed: q(&w.embed),
            w_ih: q(&w.w_ih),
            w_hh: q(&w.w_hh),
            b_ih: q(&w.b_ih),
            b_hh: q(&w.b_hh),
            w_fc: q(&w.w_fc),
            b_fc: q(&w.b_fc),
            saturated_weights: sat,
        }
    }

    pub fn hidden(&self) -> usize {
        self.config.arch.hidden
    }
}

/// The reference evaluator over a quantised model and an activation implementation.
pub struct Reference<'m, A> {
    pub model: &'m QuantizedModel,
    pub acts: A,
    pub counters: Counters,
}

impl<'m, A: SmoothActivations> Reference<'m, A> {
    pub fn new(model: &'m QuantizedModel, acts: A) -> Self {
        Reference {
            model,
            acts,
            counters: Counters {
                saturated_weights: model.saturated_weights,
                ..Default::default()
            },
        }
    }

    fn main(&self) -> Format {
        self.model.fp.main
    }

    /// `wrap(x)`, counting an overflow when it changes x.
    pub fn wrap(&mut self, x: i64) -> i64 {
        let y = self.main().wrap(x);
        self.counters.overflows += (y != x) as u64;
        y
    }

    /// `lin(W, x, b)_i = wrap((Σ_j W_ij x_j) ≫ F + b_i)` for W of `rows` × x.len().
    pub fn linear(&mut self, w: &[i64], b: &[i64], x: &[i64]) -> Vec<i64> {
        let f = self.main().frac;
        let cols = x.len();
        w.chunks_exact(cols)
            .zip(b)
            .map(|(row, bi)| {
                let acc: i64 = row.iter().zip(x).map(|(a, b)| a * b).sum();
                self.wrap((acc >> f) + bi)
            })
            .collect()
    }

    /// `act(kind, x)` in the main format: rescale, saturate, apply, saturate, shift back.
    pub fn activation(&mut self, kind: ActKind, x: i64, af: ActFormat) -> i64 {
        let main = self.main();
        let xa = x >> (main.frac - af.input.frac);
        let xs = af.input.clamp(xa);
        self.counters.saturated_activations += (xs != xa) as u64;
        let y = match kind {
            ActKind::Relu => xs.max(0),
            ActKind::Sigmoid => self.acts.sigmoid(xs, af),
            ActKind::Tanh => self.acts.tanh(xs, af),
        };
        let ys = af.output.clamp(y);
        self.counters.saturated_activations += (ys != y) as u64;
        ys << (main.frac - af.output.frac)
    }

    /// `gi = lin(W_ih, x_t, b_ih)` for the embedding row of `token`.
    pub fn input_projection(&mut self, token: u32) -> Vec<i64> {
        let m = self.model;
        let e = m.config.arch.embed_dim;
        let t = token as usize;
        let x = &m.embed[t * e..(t + 1) * e];
        self.linear(&m.w_ih, &m.b_ih, x)
    }

    /// One GRU step (docs/model-format.md, fixed-point rule 6).
    pub fn step(&mut self, gi: &[i64], h: &[i64]) -> Vec<i64> {
        let m = self.model;
        let hd = m.hidden();
        let f = self.main().frac;
        let gh = self.linear(&m.w_hh, &m.b_hh, h);
        let (sf, cf) = (m.fp.sigmoid_format(), m.fp.candidate_format());
        let cand = match m.config.arch.activation {
            Candidate::Tanh => ActKind::Tanh,
            Candidate::Relu => ActKind::Relu,
        };
        let mut out = Vec::with_capacity(hd);
        for i in 0..hd {
            let ar = self.wrap(gi[i] + gh[i]);
            let r = self.activation(ActKind::Sigmoid, ar, sf);
            let az = self.wrap(gi[hd + i] + gh[hd + i]);
            let z = self.activation(ActKind::Sigmoid, az, sf);
            let rh = self.wrap((r * gh[2 * hd + i]) >> f);
            let an = self.wrap(gi[2 * hd + i] + rh);
            let n = self.activation(cand, an, cf);
            let d = self.wrap(h[i] - n);
            let zd = self.wrap((z * d) >> f);
            out.push(self.wrap(n + zd));
        }
        out
    }

    /// Runs the GRU over `tokens` from h_0 = 0; returns every hidden state.
    pub fn run_gru(&mut self, tokens: &[u32]) -> Vec<Vec<i64>> {
        let mut h = vec![0i64; self.model.hidden()];
        let mut states = Vec::with_capacity(tokens.len());
        for &t in tokens {
            let gi = self.input_projection(t);
            h = self.step(&gi, &h);
            states.push(h.clone());
        }
        states
    }

    /// Logits of the dense layer on state `h`.
    pub fn dense(&mut self, h: &[i64]) -> Vec<i64> {
        let m = self.model;
        self.linear(&m.w_fc, &m.b_fc, h)
    }

    /// Classification logits: the dense layer on the last state.
    pub fn classify(&mut self, tokens: &[u32]) -> Vec<i64> {
        let states = self.run_gru(tokens);
        let last = states
            .last()
            .cloned()
            .unwrap_or_else(|| vec![0; self.model.hidden()]);
        self.dense(&last)
    }

    /// Language model: logits after every step.
    pub fn language_model(&mut self, tokens: &[u32]) -> Vec<Vec<i64>> {
        debug_assert_eq!(self.model.config.task, Task::LanguageModel);
        self.run_gru(tokens).iter().map(|h| self.dense(h)).collect()
    }
}

/// Index of the largest value, lowest index on ties.
pub fn argmax(v: &[i64]) -> usize {
    let mut best = 0;
    for (i, x) in v.iter().enumerate() {
        if *x > v[best] {
            best = i;
        }
    }
    best
}

/// Checks token ids against the vocabulary size.
pub fn check_tokens(tokens: &[u32], vocab: usize) -> crate::error::Result<()> {
    match tokens.iter().position(|t| *t as usize >= vocab) {
        Some(i) => Err(crate::error::NnError::Input(format!(
            "token {} at position {i} is not below the vocabulary size {vocab}",
            tokens[i]
        ))),
        None => Ok(()),
    }
}
