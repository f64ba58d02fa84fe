//! The reference of CryptoGRU's Embedding → GRU → Dense models, in the form the secure GRU
//! protocol reads: the quantised weights under their roles and the step by step evaluation.
//! It uses the same arithmetic as the graph reference ([`super::Arith`]).
use super::{ActKind, Arith, Counters, SmoothActivations};
use crate::error::Result;
use crate::model::{ActFormat, Architecture, FixedPointConfig, Model, ModelConfig, Task};

/// The quantised model (main-format integers). Secret: no `Debug`.
pub struct QuantizedModel {
    pub config: ModelConfig,
    pub arch: Architecture,
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
    pub fn new(model: &Model, fp: FixedPointConfig) -> Result<QuantizedModel> {
        let mut sat = 0u64;
        let mut q = |v: &[f32]| -> Vec<i64> {
            v.iter()
                .map(|x| {
                    let (q, s) = fp.main.quantize_checked(*x as f64);
                    sat += s as u64;
                    q
                })
                .collect()
        };
        let w = model.gru_weights()?;
        Ok(QuantizedModel {
            config: model.config.clone(),
            arch: model.config.gru()?.clone(),
            fp,
            embed: q(&w.embed),
            w_ih: q(&w.w_ih),
            w_hh: q(&w.w_hh),
            b_ih: q(&w.b_ih),
            b_hh: q(&w.b_hh),
            w_fc: q(&w.w_fc),
            b_fc: q(&w.b_fc),
            saturated_weights: sat,
        })
    }

    pub fn hidden(&self) -> usize {
        self.arch.hidden
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

    fn arith(&mut self) -> Arith<'_, A> {
        Arith {
            main: self.model.fp.main,
            acts: &self.acts,
            counters: &mut self.counters,
        }
    }

    /// `wrap(x)`, counting an overflow when it changes x.
    pub fn wrap(&mut self, x: i64) -> i64 {
        self.arith().wrap(x)
    }

    /// `lin(W, x, b)_i = wrap((Σ_j W_ij x_j) ≫ F + b_i)` for W of `rows` × x.len().
    pub fn linear(&mut self, w: &[i64], b: &[i64], x: &[i64]) -> Vec<i64> {
        self.arith().linear(w, b, x)
    }

    /// `act(kind, x)` in the main format: rescale, saturate, apply, saturate, shift back.
    pub fn activation(&mut self, kind: ActKind, x: i64, af: ActFormat) -> i64 {
        self.arith().activation(kind, x, af)
    }

    /// `gi = lin(W_ih, x_t, b_ih)` for the embedding row of `token`.
    pub fn input_projection(&mut self, token: u32) -> Vec<i64> {
        let m = self.model;
        let e = m.arch.embed_dim;
        let t = token as usize;
        let x = &m.embed[t * e..(t + 1) * e];
        self.linear(&m.w_ih, &m.b_ih, x)
    }

    /// One GRU step (docs/model-format.md, fixed-point rule 6).
    pub fn step(&mut self, gi: &[i64], h: &[i64]) -> Vec<i64> {
        let m = self.model;
        let cand = m.arch.activation;
        self.arith().gru_step(&m.fp, cand, &m.w_hh, &m.b_hh, gi, h)
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
