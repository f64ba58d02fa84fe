//! The prepared models of both roles: the server's weight plaintexts and step circuits, the
//! client's public view (architecture, formats, embedding table), and random models for tests
//! and benchmarks.
use super::circuits::{cache_for_model, step_circuits, CircuitCache, StepCircuits, StepLayout};
use super::config::{fp_for_variant, Variant, HE_PARAMS};
use crate::error::{NnError, Result};
use crate::model::{Architecture, Candidate, FixedPointConfig, ModelConfig};
use crate::reference::QuantizedModel;
use secinfer_he::kernels::coeff::{self, Layout};
use secinfer_he::{Params, Plaintext};
use secinfer_ot::{Block, Prg};

/// The layout of a projection whose `steps` input vectors are all known offline (input masks,
/// hidden masks): the column chunks and group size with the fewest bytes (`Layout::batched`).
/// Its weight plaintexts (blocks × chunks of them, ≈ 131 KB each in NTT form) are the server's
/// per-model memory: 121 for GRU(100,64,30), 201 for GRU(10,128,30).
pub(super) fn input_layout(
    params: &Params,
    rows: usize,
    cols: usize,
    steps: usize,
) -> Result<Layout> {
    Ok(Layout::batched(
        rows,
        cols,
        params.n(),
        steps,
        coeff::upload_len(params),
        |results| coeff::response_bytes(params, results),
    )?)
}

/// The server's prepared model (shared by all sessions).
pub struct ServerModel {
    pub q: QuantizedModel,
    pub variant: Variant,
    pub fp: FixedPointConfig,
    pub steps: usize,
    pub(super) params: Params,
    pub(super) ih: (Layout, Vec<Plaintext>),
    pub(super) hh: (Layout, Vec<Plaintext>),
    pub(super) fc: (Layout, Vec<Plaintext>),
    pub(super) step: StepCircuits,
    /// The activation circuits this model's step and final circuits are built from.
    pub(super) circuits: CircuitCache,
}

impl ServerModel {
    /// Prepares the weight plaintexts and the step circuit. `q` must be quantised with
    /// `fp_for_variant(&q.config, variant)`; `steps` is the sequence length T.
    pub fn new(q: QuantizedModel, variant: Variant, steps: usize) -> Result<ServerModel> {
        let fp = fp_for_variant(&q.config, variant)?;
        if fp != q.fp {
            return Err(NnError::Input(
                "the model is quantised with another fixed-point configuration than the variant's"
                    .into(),
            ));
        }
        let params = Params::by_name(HE_PARAMS).map_err(NnError::from)?;
        let a = &q.arch;
        let (e, h, c) = (a.embed_dim, a.hidden, a.classes);
        let n = params.n();
        let ih = input_layout(&params, 3 * h, e, steps)?;
        // The hidden projections are taken on the client's masks ρ_h(1..T−1), all known
        // offline: batched like the input projections.
        let hh = input_layout(&params, 3 * h, h, steps.saturating_sub(1).max(1))?;
        let fcl = Layout::new(c, h, n)?;
        let ih = (ih, ih.weight_plaintexts(&params, &q.w_ih)?);
        let hh = (hh, hh.weight_plaintexts(&params, &q.w_hh)?);
        let fc = (fcl, fcl.weight_plaintexts(&params, &q.w_fc)?);
        let circuits = CircuitCache::default();
        let step = step_circuits(&fp, a.activation == Candidate::Tanh, &circuits);
        check_state_exact(&step.lay)?;
        Ok(ServerModel {
            q,
            variant,
            fp,
            steps,
            params,
            ih,
            hh,
            fc,
            step,
            circuits,
        })
    }
    /// AND gates per element and step of the default step circuits (gate tables where they
    /// apply; a session's own count is [`SessionReport::and_per_element_step`](super::SessionReport::and_per_element_step)).
    pub fn and_gates_per_step_element(&self) -> u64 {
        self.step.and_count()
    }
    /// The step circuits' public shape.
    pub fn step_layout(&self) -> StepLayout {
        self.step.lay
    }
}

/// The client's public view of the model: architecture, formats, quantised embedding table.
pub struct ClientModel {
    pub config: ModelConfig,
    pub arch: Architecture,
    pub variant: Variant,
    pub fp: FixedPointConfig,
    /// Quantised embedding table (V × E, main format).
    pub embed: Vec<i64>,
    pub steps: usize,
    /// The activation circuits this model's step and final circuits are built from.
    pub(super) circuits: CircuitCache,
}

impl ClientModel {
    /// The client's view of a model run as `variant` over `steps` tokens; builds the activation
    /// circuits its step layout needs ([`cache_for_model`]) now, before any session.
    pub fn new(
        config: ModelConfig,
        embed_f32: &[f32],
        variant: Variant,
        steps: usize,
    ) -> Result<ClientModel> {
        let fp = fp_for_variant(&config, variant)?;
        let arch = config.gru()?.clone();
        let circuits = cache_for_model(&fp, arch.activation == Candidate::Tanh);
        let embed = embed_f32
            .iter()
            .map(|&v| fp.main.quantize(v as f64))
            .collect();
        Ok(ClientModel {
            config,
            arch,
            variant,
            fp,
            embed,
            steps,
            circuits,
        })
    }
}

/// The product Q = z·(h − n) is taken on the parties' shares of h, which is only right when the
/// reference never wraps h − n ([`StepLayout::for_step`]'s range proof): the fixed-point formats
/// of every variant satisfy it; others are refused.
pub(super) fn check_state_exact(lay: &StepLayout) -> Result<()> {
    if lay.state_exact {
        Ok(())
    } else {
        Err(NnError::config(
            "fixed-point formats: the secure GRU needs a sigmoid in [0, 1] and a candidate output \
             with no more fraction bits than the main format, so that h − n never wraps",
        ))
    }
}

/// A random model of the given sizes (for tests and `secinfer bench gru`): weights uniform in
/// ±2^F/√fan-in·1.5, embeddings in ±2^F, from a public seed; returns the quantised model and
/// the float embedding table (the client's public part).
pub fn random_model(
    e: usize,
    h: usize,
    c: usize,
    steps: usize,
    variant: Variant,
    seed: u64,
) -> Result<(QuantizedModel, Vec<f32>)> {
    let vocab = 64usize;
    let act = variant.candidate().name();
    let json = serde_json::json!({
        "format": "secinfer-model", "version": 1, "task": "classification",
        "layers": [
            {"type": "embedding", "name": "embed", "vocab": vocab, "dim": e},
            {"type": "gru", "name": "gru", "input": e, "hidden": h, "activation": act},
            {"type": "dense", "name": "fc", "input": h, "output": c}
        ],
        "fixed_point": {"bits": 20, "frac_bits": 12},
        "vocab": {"file": "vocab.json", "max_len": steps, "pad": 0, "unk": 1},
        "labels": (0..c).map(|i| format!("class{i}")).collect::<Vec<_>>(),
    });
    let config = ModelConfig::parse(&json.to_string())?;
    let fp = fp_for_variant(&config, variant)?;
    let mut prg = Prg::from_seed(Block(
        0x6772_7500_0000_0000_0000_0000_0000_0000 | seed as u128,
    ));
    let mut uni = |n: usize, bound: f64| -> Vec<f32> {
        (0..n)
            .map(|_| {
                ((prg.next_block().low_u64() >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0)
                    * bound
            })
            .map(|v| v as f32)
            .collect()
    };
    let embed = uni(vocab * e, 1.0);
    let w_ih = uni(3 * h * e, 1.5 / (e as f64).sqrt());
    let w_hh = uni(3 * h * h, 1.5 / (h as f64).sqrt());
    let b_ih = uni(3 * h, 0.5);
    let b_hh = uni(3 * h, 0.5);
    let w_fc = uni(c * h, 1.5 / (h as f64).sqrt());
    let b_fc = uni(c, 0.5);
    let t = |s: &[usize], data: Vec<f32>| crate::model::weights::Tensor {
        shape: s.to_vec(),
        data,
    };
    let map = [
        ("embed.weight", t(&[vocab, e], embed.clone())),
        ("gru.weight_ih", t(&[3 * h, e], w_ih)),
        ("gru.weight_hh", t(&[3 * h, h], w_hh)),
        ("gru.bias_ih", t(&[3 * h], b_ih)),
        ("gru.bias_hh", t(&[3 * h], b_hh)),
        ("fc.weight", t(&[c, h], w_fc)),
        ("fc.bias", t(&[c], b_fc)),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    let tensors = crate::model::Tensors::from_map(map, &config.graph)?;
    let model = crate::model::Model {
        config,
        tensors,
        vocab: None,
    };
    Ok((QuantizedModel::new(&model, fp)?, embed))
}
