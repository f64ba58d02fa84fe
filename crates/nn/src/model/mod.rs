//! The model: its graph of typed layers (`graph`), fixed-point formats (`format`), weights
//! (`weights`) and vocabulary (`vocab`), loaded from the model directory of
//! docs/model-format.md: `model.json`, `weights.safetensors`, `vocab.json`.
//!
//! Everything read from disk is validated against the spec before use; errors name the field,
//! layer or tensor at fault. The architecture is public; [`Tensors`] are the server's secret and
//! so do not implement `Debug`.
pub mod format;
pub mod graph;
mod json;
pub mod vocab;
pub mod weights;

pub use format::{ActFormat, FixedPointConfig, Format};
pub use graph::{Graph, InputRange, Layer, LayerKind, Shape};
pub use json::parse_fixed_point;
pub use vocab::{shape_tokens, words_v1, Vocab};
pub use weights::{Tensor, Tensors, Weights};

use crate::error::{NnError, Result};
use json::{get, layer_name, obj, side, string, uint};
use serde_json::Value;
use std::path::Path;

/// The model-format versions this reader knows.
pub const VERSIONS: [u64; 2] = [1, 2];

/// Largest model.json / vocab.json accepted (they are small; this bounds a hostile file).
const MAX_JSON_BYTES: u64 = 64 << 20;
/// Largest weights file accepted (2 GiB).
const MAX_WEIGHTS_BYTES: u64 = 2 << 30;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Task {
    Classification,
    LanguageModel,
}

/// The GRU's candidate activation g.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Candidate {
    Tanh,
    Relu,
}

impl Candidate {
    pub fn name(self) -> &'static str {
        match self {
            Candidate::Tanh => "tanh",
            Candidate::Relu => "relu",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    Pre,
    Post,
}

/// Embedding(V, E) → GRU(E, H, g) → Dense(H, C): CryptoGRU's models (the only architecture of
/// format version 1), as the secure GRU protocol reads them from a graph.
#[derive(Clone, Debug, PartialEq)]
pub struct Architecture {
    pub embed_name: String,
    pub vocab: usize,
    pub embed_dim: usize,
    pub gru_name: String,
    pub hidden: usize,
    pub activation: Candidate,
    pub fc_name: String,
    pub classes: usize,
}

/// Tokeniser settings.
#[derive(Clone, Debug, PartialEq)]
pub struct VocabConfig {
    pub file: String,
    pub max_len: usize,
    pub pad: u32,
    pub unk: u32,
    pub padding: Side,
    pub truncation: Side,
}

/// The parsed, validated `model.json`.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelConfig {
    /// The format version the file was written in (a version-1 file is read into a graph).
    pub version: u64,
    pub task: Task,
    pub graph: Graph,
    /// The graph as Embedding → GRU → Dense (→ Argmax), when it is one.
    gru: Option<Architecture>,
    pub fixed_point: FixedPointConfig,
    /// Named alternatives (`fx20`, `fx8`, ...), in file order.
    pub variants: Vec<(String, FixedPointConfig)>,
    pub vocab: Option<VocabConfig>,
    pub labels: Vec<String>,
}

impl ModelConfig {
    /// Parses `model.json` text of any known version.
    pub fn parse(text: &str) -> Result<ModelConfig> {
        let v: Value = serde_json::from_str(text).map_err(|e| NnError::Json {
            file: "model.json".into(),
            source: e,
        })?;
        let m = obj(&v, "model.json")?;
        if string(m, "format", "model")? != "secinfer-model" {
            return Err(NnError::config("format must be \"secinfer-model\""));
        }
        let version = get(m, "version", "model")?;
        let version = match version.as_u64() {
            Some(n) if VERSIONS.contains(&n) => n,
            _ => {
                return Err(NnError::config(format!(
                    "version {version} is not supported (this reader knows {VERSIONS:?})"
                )))
            }
        };
        let task = match string(m, "task", "model")? {
            "classification" => Task::Classification,
            "language-model" => Task::LanguageModel,
            other => {
                return Err(NnError::config(format!(
                    "task {other:?} (expected classification or language-model)"
                )))
            }
        };
        let vocab_cfg = match m.get("vocab") {
            None => None,
            Some(vv) => Some(parse_vocab(vv)?),
        };
        let layers = get(m, "layers", "model")?;
        let graph = if version == 1 {
            graph_v1(layers, task, vocab_cfg.as_ref())?
        } else {
            Graph::parse(layers)?
        };
        let gru = gru_pattern(&graph);
        let candidate = graph
            .layers
            .iter()
            .find_map(|l| match l.kind {
                LayerKind::Gru { activation, .. } => Some(activation),
                _ => None,
            })
            .unwrap_or(Candidate::Tanh);
        let fixed_point =
            parse_fixed_point(get(m, "fixed_point", "model")?, "fixed_point", candidate)?;
        let mut variants = Vec::new();
        if let Some(vs) = m.get("fixed_point_variants") {
            for (name, fv) in obj(vs, "fixed_point_variants")? {
                variants.push((
                    name.clone(),
                    parse_fixed_point(fv, &format!("fixed_point_variants.{name}"), candidate)?,
                ));
            }
        }
        let labels = match m.get("labels") {
            None => Vec::new(),
            Some(l) => l
                .as_array()
                .ok_or_else(|| NnError::config("labels must be an array of strings"))?
                .iter()
                .map(|s| {
                    s.as_str()
                        .map(str::to_string)
                        .ok_or_else(|| NnError::config("labels must be strings"))
                })
                .collect::<Result<Vec<_>>>()?,
        };
        let config = ModelConfig {
            version,
            task,
            graph,
            gru,
            fixed_point,
            variants,
            vocab: vocab_cfg,
            labels,
        };
        config.check_task()?;
        Ok(config)
    }

    /// Checks what the task needs of the graph, the vocabulary and the labels.
    fn check_task(&self) -> Result<()> {
        let g = &self.graph;
        let tokens = matches!(g.input_shape(), Shape::Tokens { .. });
        if let (Some(vc), Shape::Tokens { len: Some(t) }) = (&self.vocab, g.input_shape()) {
            if vc.max_len != t {
                return Err(NnError::config(format!(
                    "vocab.max_len = {} but the input layer reads {t} tokens",
                    vc.max_len
                )));
            }
        }
        match self.task {
            Task::Classification => {
                if tokens && self.vocab.is_none() {
                    return Err(NnError::config(
                        "a classification model on text needs a vocab section",
                    ));
                }
                if self.labels.is_empty() {
                    return Err(NnError::config("a classification model needs labels"));
                }
                let classes = self.classes();
                if !matches!(g.output_shape(), Shape::Vector(_)) {
                    return Err(NnError::config(format!(
                        "a classification model ends in a vector (or argmax), not {}",
                        g.output_shape()
                    )));
                }
                if self.labels.len() != classes {
                    return Err(NnError::config(format!(
                        "{} labels for {classes} classes",
                        self.labels.len()
                    )));
                }
            }
            Task::LanguageModel => {
                let vocab = g.layers.iter().find_map(|l| match l.kind {
                    LayerKind::Embedding { vocab, .. } => Some(vocab),
                    _ => None,
                });
                let ok = match (vocab, g.output_shape()) {
                    (Some(v), Shape::Seq { dim, .. }) => {
                        dim == v || (dim == 1 && g.ends_in_argmax())
                    }
                    _ => false,
                };
                if !ok || self.classes() != vocab.unwrap_or(0) {
                    return Err(NnError::config(
                        "a language model maps token ids to a sequence of next-token logits \
                         over the embedding's vocabulary (a dense output must equal embedding.vocab)",
                    ));
                }
            }
        }
        Ok(())
    }

    /// Logits the model computes per item: the output size before a final argmax.
    pub fn classes(&self) -> usize {
        let l = &self.graph.layers;
        let last = if self.graph.ends_in_argmax() && l.len() > 1 {
            &l[l.len() - 2]
        } else {
            &l[l.len() - 1]
        };
        last.output.elements()
    }

    /// The graph as CryptoGRU's Embedding → GRU → Dense architecture, or why it is not one.
    pub fn gru(&self) -> Result<&Architecture> {
        self.gru.as_ref().ok_or_else(|| {
            NnError::Unsupported(format!(
                "this model's layers ({}) are not input → embedding → gru → dense (→ argmax), \
                 the only graph the secure GRU protocol runs",
                self.layer_types().join(" → ")
            ))
        })
    }

    /// The layers' type names, in order.
    pub fn layer_types(&self) -> Vec<&'static str> {
        self.graph
            .layers
            .iter()
            .map(|l| l.kind.type_name())
            .collect()
    }

    /// The fixed-point configuration named `name` (a variant), or the default for `None`.
    pub fn fixed_point_named(&self, name: Option<&str>) -> Result<&FixedPointConfig> {
        match name {
            None => Ok(&self.fixed_point),
            Some(n) => self
                .variants
                .iter()
                .find(|(k, _)| k == n)
                .map(|(_, c)| c)
                .ok_or_else(|| {
                    let known: Vec<&str> = self.variants.iter().map(|(k, _)| k.as_str()).collect();
                    NnError::config(format!(
                        "no fixed_point_variants entry {n:?} (known: {known:?})"
                    ))
                }),
        }
    }
}

fn parse_vocab(vv: &Value) -> Result<VocabConfig> {
    let vm = obj(vv, "vocab")?;
    let file = string(vm, "file", "vocab")?.to_string();
    if file.is_empty() || file.contains('/') || file.contains('\\') || file.starts_with('.') {
        return Err(NnError::config(format!(
            "vocab.file {file:?} must be a plain file name"
        )));
    }
    if let Some(t) = vm.get("tokenizer") {
        if t.as_str() != Some("words-v1") {
            return Err(NnError::config(format!(
                "vocab.tokenizer {t} (this reader knows words-v1)"
            )));
        }
    }
    Ok(VocabConfig {
        file,
        max_len: uint(vm, "max_len", "vocab", 1, 4096)? as usize,
        pad: uint(vm, "pad", "vocab", 0, 0)? as u32,
        unk: uint(vm, "unk", "vocab", 1, 1)? as u32,
        padding: side(vm, "padding", "vocab")?,
        truncation: side(vm, "truncation", "vocab")?,
    })
}

/// A name for a layer the version-1 reader adds, distinct from the file's names.
fn fresh_name(base: &str, taken: &[String]) -> String {
    let mut n = base.to_string();
    while taken.contains(&n) {
        n.push('_');
    }
    n
}

/// Reads version 1's three layers (embedding, gru, dense) into a graph: token input of the
/// vocabulary's length in front, argmax behind for a classifier.
fn graph_v1(layers: &Value, task: Task, vocab: Option<&VocabConfig>) -> Result<Graph> {
    let layers = layers
        .as_array()
        .ok_or_else(|| NnError::config("layers must be an array"))?;
    let types: Vec<&str> = layers
        .iter()
        .map(|l| l.get("type").and_then(Value::as_str).unwrap_or("?"))
        .collect();
    if types != ["embedding", "gru", "dense"] {
        return Err(NnError::config(format!(
            "version 1 layers must be [embedding, gru, dense] in this order, found {types:?}"
        )));
    }
    let (le, lg, ld) = (
        obj(&layers[0], "layers[0]")?,
        obj(&layers[1], "layers[1]")?,
        obj(&layers[2], "layers[2]")?,
    );
    let names = [
        layer_name(le, "embedding")?,
        layer_name(lg, "gru")?,
        layer_name(ld, "dense")?,
    ];
    if names[0] == names[1] || names[1] == names[2] || names[0] == names[2] {
        return Err(NnError::config("layer names must be distinct"));
    }
    let activation = match string(lg, "activation", "gru")? {
        "tanh" => Candidate::Tanh,
        "relu" => Candidate::Relu,
        other => {
            return Err(NnError::config(format!(
                "gru.activation {other:?} (expected tanh or relu)"
            )))
        }
    };
    let lm = task == Task::LanguageModel;
    let mut kinds = vec![
        (
            fresh_name("tokens", &names),
            LayerKind::Input {
                shape: Shape::Tokens {
                    len: vocab.map(|v| v.max_len),
                },
                range: None,
            },
        ),
        (
            names[0].clone(),
            LayerKind::Embedding {
                vocab: uint(le, "vocab", "embedding", 2, 1 << 20)? as usize,
                dim: uint(le, "dim", "embedding", 1, 4096)? as usize,
            },
        ),
        (
            names[1].clone(),
            LayerKind::Gru {
                input: uint(lg, "input", "gru", 1, 4096)? as usize,
                hidden: uint(lg, "hidden", "gru", 1, 4096)? as usize,
                activation,
                sequences: lm,
            },
        ),
        (
            names[2].clone(),
            LayerKind::Dense {
                input: uint(ld, "input", "dense", 1, 4096)? as usize,
                output: uint(ld, "output", "dense", 1, 1 << 20)? as usize,
            },
        ),
    ];
    if !lm {
        kinds.push((fresh_name("class", &names), LayerKind::Argmax));
    }
    Graph::from_kinds(kinds)
}

/// Recognises input → embedding → gru → dense (→ argmax).
fn gru_pattern(g: &Graph) -> Option<Architecture> {
    let l = &g.layers;
    let body = match l.len() {
        4 => &l[1..4],
        5 if g.ends_in_argmax() => &l[1..4],
        _ => return None,
    };
    match (&body[0].kind, &body[1].kind, &body[2].kind) {
        (
            LayerKind::Embedding { vocab, dim },
            LayerKind::Gru {
                hidden, activation, ..
            },
            LayerKind::Dense { output, .. },
        ) => Some(Architecture {
            embed_name: body[0].name.clone(),
            vocab: *vocab,
            embed_dim: *dim,
            gru_name: body[1].name.clone(),
            hidden: *hidden,
            activation: *activation,
            fc_name: body[2].name.clone(),
            classes: *output,
        }),
        _ => None,
    }
}

pub(crate) fn read_bounded(path: &Path, max: u64) -> Result<Vec<u8>> {
    let io = |e| NnError::Io {
        path: path.display().to_string(),
        source: e,
    };
    let len = std::fs::metadata(path).map_err(io)?.len();
    if len > max {
        return Err(NnError::Io {
            path: path.display().to_string(),
            source: std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("{len} bytes exceeds {max}"),
            ),
        });
    }
    std::fs::read(path).map_err(io)
}

pub(crate) fn read_text(path: &Path) -> Result<String> {
    let bytes = read_bounded(path, MAX_JSON_BYTES)?;
    String::from_utf8(bytes).map_err(|_| NnError::Io {
        path: path.display().to_string(),
        source: std::io::Error::new(std::io::ErrorKind::InvalidData, "not UTF-8"),
    })
}

/// A whole model directory: the server's view (weights included).
pub struct Model {
    pub config: ModelConfig,
    pub tensors: Tensors,
    pub vocab: Option<Vocab>,
}

impl Model {
    pub fn load(dir: impl AsRef<Path>) -> Result<Model> {
        let dir = dir.as_ref();
        let config = ModelConfig::parse(&read_text(&dir.join("model.json"))?)?;
        let tensors = Tensors::parse(
            &read_bounded(&dir.join("weights.safetensors"), MAX_WEIGHTS_BYTES)?,
            &config.graph,
        )?;
        let vocab = config.load_vocab(dir)?;
        Ok(Model {
            config,
            tensors,
            vocab,
        })
    }

    /// The weights of a CryptoGRU model.
    pub fn gru_weights(&self) -> Result<Weights> {
        self.tensors.gru_weights(self.config.gru()?)
    }
}

impl ModelConfig {
    /// The vocabulary file of `dir`, if the model has one.
    pub fn load_vocab(&self, dir: &Path) -> Result<Option<Vocab>> {
        let Some(vc) = &self.vocab else {
            return Ok(None);
        };
        let size = self
            .graph
            .layers
            .iter()
            .find_map(|l| match l.kind {
                LayerKind::Embedding { vocab, .. } => Some(vocab),
                _ => None,
            })
            .ok_or_else(|| NnError::config("a vocab section needs an embedding layer"))?;
        Ok(Some(Vocab::parse(
            &read_text(&dir.join(&vc.file))?,
            vc,
            size,
        )?))
    }
}
