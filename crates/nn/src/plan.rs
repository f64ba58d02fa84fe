//! The plan: which protocol family computes each layer of a graph, with which protocol, and why.
//!
//! A plan is a list of steps, each covering consecutive layers that one layer protocol computes
//! together (CryptoGRU's protocol takes the GRU, the dense layer and the argmax as one step,
//! because the dense layer's product is folded into the last step's flights). The session
//! driver runs the steps in order; a step whose protocol this build lacks makes the plan
//! unrunnable, and [`Plan::check_runnable`] names the layer.
use crate::error::{NnError, Result};
use crate::model::{LayerKind, ModelConfig, Shape};
use std::ops::Range;

/// How a layer is computed securely (DESIGN.md §3a).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Family {
    /// Public to the client: its own input, a public table (embedding), a reshape.
    Client,
    /// HE linear layers (GAZELLE / GALA / coefficient-encoded kernels), nonlinear layers by
    /// garbled circuits and OT blocks: CryptoGRU, GALA.
    Hegc,
    /// Additive secret sharing over Z_{2^l} with OPAF / SIRNN math: OPAF.
    Ss,
    /// Client-aided HE: linear layers on ciphertexts at the server, nonlinear layers in the clear
    /// at the client, which sees the activations: CHOCO.
    Choco,
    /// Non-interactive TFHE: the server evaluates the whole network on ciphertexts: SHE.
    Tfhe,
}

impl Family {
    pub fn name(self) -> &'static str {
        match self {
            Family::Client => "client",
            Family::Hegc => "hegc",
            Family::Ss => "ss",
            Family::Choco => "choco",
            Family::Tfhe => "tfhe",
        }
    }
}

impl std::str::FromStr for Family {
    type Err = NnError;
    fn from_str(s: &str) -> Result<Self> {
        Ok(match s {
            "hegc" => Family::Hegc,
            "ss" => Family::Ss,
            "choco" => Family::Choco,
            "tfhe" => Family::Tfhe,
            other => {
                return Err(NnError::Input(format!(
                    "family {other:?} (expected hegc, ss, choco or tfhe)"
                )))
            }
        })
    }
}

impl std::fmt::Display for Family {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The protocols a step can run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// Computed by the client alone on public data.
    Local,
    /// CryptoGRU's Embedding-fed GRU + Dense (+ Argmax) (`layers::gru`).
    CryptoGruClassifier,
    /// CHOCO's client-aided network: linear layers on ciphertexts, the rest in the clear at
    /// the client (`layers::choco`).
    ChocoNetwork,
    /// GALA's network of dense layers on Z_p shares: HE matvecs, truncation / ReLU / argmax in
    /// garbled circuits (`layers::hegc`).
    HegcNet,
    /// OPAF's FastGRNN → Dense → Argmax on additive shares over Z_2^l (`layers::ss`).
    SsFastGrnn,
    /// No protocol in this build for this layer in this family.
    Missing,
}

/// One step of a plan.
#[derive(Clone, Debug, PartialEq)]
pub struct Step {
    /// The graph's layers this step computes.
    pub layers: Range<usize>,
    pub family: Family,
    pub protocol: Protocol,
    /// Why this family and protocol (or what is missing).
    pub why: String,
}

/// A runnable or unrunnable plan for one model.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    pub steps: Vec<Step>,
}

/// What the user asked of the planner.
#[derive(Clone, Copy, Debug, Default)]
pub struct PlanOptions {
    /// The family for every secure layer; `None` picks the cheapest one this build runs.
    pub family: Option<Family>,
}

fn is_local(kind: &LayerKind) -> bool {
    matches!(kind, LayerKind::Input { .. } | LayerKind::Embedding { .. })
}

impl Plan {
    /// Plans `config`'s graph.
    pub fn new(config: &ModelConfig, opts: PlanOptions) -> Plan {
        let layers = &config.graph.layers;
        let mut steps = Vec::new();
        let mut i = 0;
        while i < layers.len() && is_local(&layers[i].kind) {
            let why = match layers[i].kind {
                LayerKind::Embedding { .. } => {
                    "the embedding table is public: the client looks up its own tokens"
                }
                _ => "the client's own input",
            };
            steps.push(Step {
                layers: i..i + 1,
                family: Family::Client,
                protocol: Protocol::Local,
                why: why.into(),
            });
            i += 1;
        }
        let family = opts.family.unwrap_or(Family::Hegc);
        let gru =
            config.gru().is_ok() && matches!(config.graph.input_shape(), Shape::Tokens { .. });
        // CryptoGRU's protocol takes everything after the client's input and embedding steps.
        if gru && i == 2 && family == Family::Hegc {
            steps.push(Step {
                layers: i..layers.len(),
                family,
                protocol: Protocol::CryptoGruClassifier,
                why: "CryptoGRU: HE products by coefficient encoding over Z_2^32, the gates in \
                      garbled circuits and OT tables; the dense layer's product rides the last \
                      step's flights"
                    .into(),
            });
            return Plan { steps };
        }
        if family == Family::Choco && i == 1 && crate::layers::choco::supports(config).is_ok() {
            steps.push(Step {
                layers: i..layers.len(),
                family,
                protocol: Protocol::ChocoNetwork,
                why: "CHOCO client-aided HE: dense/conv2d on BFV ciphertexts at the server, the \
                      rest in the clear at the client, which sees every activation"
                    .into(),
            });
            return Plan { steps };
        }
        // A FastGRNN graph runs in family ss unless another family is asked for.
        let ss = opts.family.map_or_else(
            || crate::layers::ss::is_fastgrnn_graph(config),
            |f| f == Family::Ss,
        );
        if ss && i == 1 {
            let (protocol, why) = match crate::layers::ss::shape_of(config) {
                Ok(_) => (
                    Protocol::SsFastGrnn,
                    "OPAF: FastGRNN on additive shares over Z_2^l, OT products, OPAF's or \
                     SIRNN's sigmoid and tanh, the class from an argmax on shares"
                        .to_string(),
                ),
                Err(e) => (Protocol::Missing, e.to_string()),
            };
            steps.push(Step {
                layers: i..layers.len(),
                family: Family::Ss,
                protocol,
                why,
            });
            return Plan { steps };
        }
        let vector_input = !matches!(config.graph.input_shape(), Shape::Tokens { .. });
        if vector_input && i == 1 && family == Family::Hegc {
            let auto = crate::layers::hegc::KernelChoice::Auto;
            match crate::layers::hegc::NetShape::new(config, auto) {
                Ok(shape) => {
                    // Each linear layer's kernel as the cost model chose it, and why.
                    let kernels: Vec<String> = shape
                        .ops
                        .iter()
                        .zip(&shape.choices)
                        .filter_map(|(o, c)| {
                            let c = c.as_ref()?;
                            Some(format!("{}: {} ({})", o.name, c.kernel.name(), c.why))
                        })
                        .collect();
                    steps.push(Step {
                        layers: i..layers.len(),
                        family,
                        protocol: Protocol::HegcNet,
                        why: format!(
                            "GALA: each linear layer an HE product on Z_p shares, truncation, \
                             ReLU and argmax in garbled circuits; kernels by cost: {}",
                            kernels.join("; ")
                        ),
                    });
                    return Plan { steps };
                }
                Err(e) => {
                    steps.push(Step {
                        layers: i..layers.len(),
                        family,
                        protocol: Protocol::Missing,
                        why: e.to_string(),
                    });
                    return Plan { steps };
                }
            }
        }
        for (j, l) in layers.iter().enumerate().skip(i) {
            steps.push(Step {
                layers: j..j + 1,
                family,
                protocol: Protocol::Missing,
                why: format!(
                    "no {} protocol for {} in this build",
                    family,
                    l.kind.type_name()
                ),
            });
        }
        Plan { steps }
    }

    /// An error naming the first layer no protocol computes, if any.
    pub fn check_runnable(&self, config: &ModelConfig) -> Result<()> {
        match self.steps.iter().find(|s| s.protocol == Protocol::Missing) {
            None => Ok(()),
            Some(s) => {
                let l = &config.graph.layers[s.layers.start];
                Err(NnError::Unsupported(format!(
                    "layer {} ({}, {}): {}",
                    s.layers.start,
                    l.name,
                    l.kind.type_name(),
                    s.why
                )))
            }
        }
    }

    /// The plan as lines a person reads: layers, family, protocol, why.
    pub fn describe(&self, config: &ModelConfig) -> Vec<String> {
        self.steps
            .iter()
            .map(|s| {
                let names: Vec<String> = config.graph.layers[s.layers.clone()]
                    .iter()
                    .map(|l| format!("{} ({})", l.name, l.kind.type_name()))
                    .collect();
                let proto = match s.protocol {
                    Protocol::Local => "local",
                    Protocol::CryptoGruClassifier => "cryptogru",
                    Protocol::ChocoNetwork => "choco",
                    Protocol::HegcNet => "gala",
                    Protocol::SsFastGrnn => "opaf",
                    Protocol::Missing => "MISSING",
                };
                format!(
                    "{:<40} {:<7} {:<10} {}",
                    names.join(" + "),
                    s.family.name(),
                    proto,
                    s.why
                )
            })
            .collect()
    }
}
