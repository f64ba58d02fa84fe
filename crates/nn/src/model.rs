//! The model directory of docs/model-format.md: `model.json`, `weights.safetensors`, `vocab.json`.
//!
//! Everything read from disk is validated against the spec before use; errors name the field or
//! tensor at fault. The architecture is public; [`Weights`] are the server's secret and so do not
//! implement `Debug`.
use crate::error::{NnError, Result};
use crate::fixed::{ActFormat, FixedPointConfig, Format};
use serde_json::{Map, Value};
use std::path::Path;

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

/// Embedding(V, E) → GRU(E, H, g) → Dense(H, C): the architecture of format version 1.
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
    pub task: Task,
    pub arch: Architecture,
    pub fixed_point: FixedPointConfig,
    /// Named alternatives (`fx20`, `fx8`, ...), in file order.
    pub variants: Vec<(String, FixedPointConfig)>,
    pub vocab: Option<VocabConfig>,
    pub labels: Vec<String>,
}

fn obj<'a>(v: &'a Value, what: &str) -> Result<&'a Map<String, Value>> {
    v.as_object()
        .ok_or_else(|| NnError::config(format!("{what} must be an object")))
}

fn get<'a>(m: &'a Map<String, Value>, key: &str, what: &str) -> Result<&'a Value> {
    m.get(key)
        .ok_or_else(|| NnError::config(format!("{what}.{key} is missing")))
}

fn uint(m: &Map<String, Value>, key: &str, what: &str, lo: u64, hi: u64) -> Result<u64> {
    let v = get(m, key, what)?
        .as_u64()
        .ok_or_else(|| NnError::config(format!("{what}.{key} must be a non-negative integer")))?;
    if v < lo || v > hi {
        return Err(NnError::config(format!(
            "{what}.{key} = {v} is outside [{lo}, {hi}]"
        )));
    }
    Ok(v)
}

fn string<'a>(m: &'a Map<String, Value>, key: &str, what: &str) -> Result<&'a str> {
    get(m, key, what)?
        .as_str()
        .ok_or_else(|| NnError::config(format!("{what}.{key} must be a string")))
}

fn layer_name(m: &Map<String, Value>, what: &str) -> Result<String> {
    let n = string(m, "name", what)?;
    if n.is_empty() || n.contains('.') {
        return Err(NnError::config(format!(
            "{what}.name {n:?} must be non-empty and contain no '.'"
        )));
    }
    Ok(n.to_string())
}

fn parse_format(v: &Value, what: &str) -> Result<Format> {
    let m = obj(v, what)?;
    let bits = uint(m, "bits", what, 2, 24)? as u32;
    let frac = uint(m, "frac_bits", what, 0, bits as u64 - 1)? as u32;
    Ok(Format { bits, frac })
}

/// Parses and validates a fixed-point object (docs/model-format.md, "Fixed-point object").
pub fn parse_fixed_point(v: &Value, what: &str, activation: Candidate) -> Result<FixedPointConfig> {
    let main = parse_format(v, what)?;
    let m = obj(v, what)?;
    let mut cfg = FixedPointConfig {
        main,
        sigmoid: None,
        candidate: None,
    };
    if let Some(acts) = m.get("activations") {
        for (key, a) in obj(acts, &format!("{what}.activations"))? {
            let w = format!("{what}.activations.{key}");
            let am = obj(a, &w)?;
            let af = ActFormat {
                input: parse_format(get(am, "input", &w)?, &format!("{w}.input"))?,
                output: parse_format(get(am, "output", &w)?, &format!("{w}.output"))?,
            };
            for (side, f) in [("input", af.input), ("output", af.output)] {
                if f.bits > main.bits || f.frac > main.frac {
                    return Err(NnError::config(format!(
                        "{w}.{side} ({}, {}) must not be wider or finer than the main format ({}, {})",
                        f.bits, f.frac, main.bits, main.frac
                    )));
                }
            }
            if af.output.bits - af.output.frac > main.bits - main.frac {
                return Err(NnError::config(format!(
                    "{w}.output has more integer bits than the main format"
                )));
            }
            match key.as_str() {
                "sigmoid" => cfg.sigmoid = Some(af),
                "candidate" => {
                    if activation == Candidate::Relu && af.input.frac != af.output.frac {
                        return Err(NnError::config(format!(
                            "{w}: relu needs equal input and output frac_bits"
                        )));
                    }
                    cfg.candidate = Some(af)
                }
                other => {
                    return Err(NnError::config(format!(
                        "{what}.activations: unknown key {other:?} (expected sigmoid, candidate)"
                    )))
                }
            }
        }
    }
    Ok(cfg)
}

fn side(m: &Map<String, Value>, key: &str, what: &str) -> Result<Side> {
    match m.get(key) {
        None => Ok(Side::Pre),
        Some(Value::String(s)) if s == "pre" => Ok(Side::Pre),
        Some(Value::String(s)) if s == "post" => Ok(Side::Post),
        Some(other) => Err(NnError::config(format!(
            "{what}.{key} = {other} (expected \"pre\" or \"post\")"
        ))),
    }
}

impl ModelConfig {
    /// Parses `model.json` text.
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
        if version.as_u64() != Some(1) {
            return Err(NnError::config(format!(
                "version {version} is not supported (this reader knows 1)"
            )));
        }
        let task = match string(m, "task", "model")? {
            "classification" => Task::Classification,
            "language-model" => Task::LanguageModel,
            other => {
                return Err(NnError::config(format!(
                    "task {other:?} (expected classification or language-model)"
                )))
            }
        };
        let layers = get(m, "layers", "model")?
            .as_array()
            .ok_or_else(|| NnError::config("layers must be an array"))?;
        let types: Vec<&str> = layers
            .iter()
            .map(|l| l.get("type").and_then(Value::as_str).unwrap_or("?"))
            .collect();
        if types != ["embedding", "gru", "dense"] {
            return Err(NnError::config(format!(
                "layers must be [embedding, gru, dense] in this order, found {types:?}"
            )));
        }
        let (le, lg, ld) = (
            obj(&layers[0], "layers[0]")?,
            obj(&layers[1], "layers[1]")?,
            obj(&layers[2], "layers[2]")?,
        );
        let vocab = uint(le, "vocab", "embedding", 2, 1 << 20)? as usize;
        let embed_dim = uint(le, "dim", "embedding", 1, 4096)? as usize;
        let gru_input = uint(lg, "input", "gru", 1, 4096)? as usize;
        if gru_input != embed_dim {
            return Err(NnError::config(format!(
                "gru.input = {gru_input} must equal embedding.dim = {embed_dim}"
            )));
        }
        let hidden = uint(lg, "hidden", "gru", 1, 4096)? as usize;
        let activation = match string(lg, "activation", "gru")? {
            "tanh" => Candidate::Tanh,
            "relu" => Candidate::Relu,
            other => {
                return Err(NnError::config(format!(
                    "gru.activation {other:?} (expected tanh or relu)"
                )))
            }
        };
        let dense_input = uint(ld, "input", "dense", 1, 4096)? as usize;
        if dense_input != hidden {
            return Err(NnError::config(format!(
                "dense.input = {dense_input} must equal gru.hidden = {hidden}"
            )));
        }
        let classes = uint(ld, "output", "dense", 1, 1 << 20)? as usize;
        if task == Task::LanguageModel && classes != vocab {
            return Err(NnError::config(
                "a language model's dense.output must equal embedding.vocab",
            ));
        }
        let names = [
            layer_name(le, "embedding")?,
            layer_name(lg, "gru")?,
            layer_name(ld, "dense")?,
        ];
        if names[0] == names[1] || names[1] == names[2] || names[0] == names[2] {
            return Err(NnError::config("layer names must be distinct"));
        }
        let [embed_name, gru_name, fc_name] = names;
        let arch = Architecture {
            embed_name,
            vocab,
            embed_dim,
            gru_name,
            hidden,
            activation,
            fc_name,
            classes,
        };

        let fixed_point =
            parse_fixed_point(get(m, "fixed_point", "model")?, "fixed_point", activation)?;
        let mut variants = Vec::new();
        if let Some(vs) = m.get("fixed_point_variants") {
            for (name, fv) in obj(vs, "fixed_point_variants")? {
                variants.push((
                    name.clone(),
                    parse_fixed_point(fv, &format!("fixed_point_variants.{name}"), activation)?,
                ));
            }
        }

        let vocab_cfg = match m.get("vocab") {
            None => None,
            Some(vv) => {
                let vm = obj(vv, "vocab")?;
                let file = string(vm, "file", "vocab")?.to_string();
                if file.is_empty()
                    || file.contains('/')
                    || file.contains('\\')
                    || file.starts_with('.')
                {
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
                let max_len = uint(vm, "max_len", "vocab", 1, 4096)? as usize;
                let pad = uint(vm, "pad", "vocab", 0, 0)? as u32;
                let unk = uint(vm, "unk", "vocab", 1, 1)? as u32;
                Some(VocabConfig {
                    file,
                    max_len,
                    pad,
                    unk,
                    padding: side(vm, "padding", "vocab")?,
                    truncation: side(vm, "truncation", "vocab")?,
                })
            }
        };
        if task == Task::Classification && vocab_cfg.is_none() {
            return Err(NnError::config(
                "a classification model needs a vocab section",
            ));
        }
        let labels = match m.get("labels") {
            None if task == Task::Classification => {
                return Err(NnError::config("a classification model needs labels"))
            }
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
        if task == Task::Classification && labels.len() != classes {
            return Err(NnError::config(format!(
                "{} labels for {classes} classes",
                labels.len()
            )));
        }
        Ok(ModelConfig {
            task,
            arch,
            fixed_point,
            variants,
            vocab: vocab_cfg,
            labels,
        })
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

/// The float32 weights, row-major, under the spec's names. Secret: no `Debug`.
pub struct Weights {
    pub embed: Vec<f32>,
    pub w_ih: Vec<f32>,
    pub w_hh: Vec<f32>,
    pub b_ih: Vec<f32>,
    pub b_hh: Vec<f32>,
    pub w_fc: Vec<f32>,
    pub b_fc: Vec<f32>,
}

impl Weights {
    /// Parses and validates a safetensors buffer against `arch`: exact names, dtype F32, shapes,
    /// finiteness, and no extra tensors.
    pub fn parse(bytes: &[u8], arch: &Architecture) -> Result<Weights> {
        let st = safetensors::SafeTensors::deserialize(bytes)
            .map_err(|e| NnError::Weights(e.to_string()))?;
        let (v, e, h, c) = (arch.vocab, arch.embed_dim, arch.hidden, arch.classes);
        let expected: Vec<(String, Vec<usize>)> = vec![
            (format!("{}.weight", arch.embed_name), vec![v, e]),
            (format!("{}.weight_ih", arch.gru_name), vec![3 * h, e]),
            (format!("{}.weight_hh", arch.gru_name), vec![3 * h, h]),
            (format!("{}.bias_ih", arch.gru_name), vec![3 * h]),
            (format!("{}.bias_hh", arch.gru_name), vec![3 * h]),
            (format!("{}.weight", arch.fc_name), vec![c, h]),
            (format!("{}.bias", arch.fc_name), vec![c]),
        ];
        for name in st.names() {
            if !expected.iter().any(|(n, _)| n == name) {
                return Err(NnError::tensor(
                    name,
                    "unexpected tensor (version 1 has exactly seven)",
                ));
            }
        }
        let mut out = Vec::with_capacity(7);
        for (name, shape) in &expected {
            let t = st
                .tensor(name)
                .map_err(|_| NnError::tensor(name, "missing"))?;
            if t.dtype() != safetensors::Dtype::F32 {
                return Err(NnError::tensor(
                    name,
                    format!("dtype {:?}, expected F32", t.dtype()),
                ));
            }
            if t.shape() != shape.as_slice() {
                return Err(NnError::tensor(
                    name,
                    format!("shape {:?}, expected {:?}", t.shape(), shape),
                ));
            }
            let data = t.data();
            let vals: Vec<f32> = data
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect();
            if let Some(i) = vals.iter().position(|x| !x.is_finite()) {
                return Err(NnError::tensor(name, format!("element {i} is not finite")));
            }
            out.push(vals);
        }
        let mut it = out.into_iter();
        let mut next = || it.next().unwrap_or_default();
        Ok(Weights {
            embed: next(),
            w_ih: next(),
            w_hh: next(),
            b_ih: next(),
            b_hh: next(),
            w_fc: next(),
            b_fc: next(),
        })
    }
}

/// The vocabulary: token string → id.
#[derive(Clone, Debug)]
pub struct Vocab {
    pub config: VocabConfig,
    ids: std::collections::HashMap<String, u32>,
    pub size: usize,
}

impl Vocab {
    pub fn parse(text: &str, config: &VocabConfig, vocab_size: usize) -> Result<Vocab> {
        let v: Value = serde_json::from_str(text).map_err(|e| NnError::Json {
            file: config.file.clone(),
            source: e,
        })?;
        let tokens = v
            .get("tokens")
            .and_then(Value::as_array)
            .ok_or_else(|| NnError::Vocab("vocab.json needs a \"tokens\" array".into()))?;
        if tokens.len() != vocab_size {
            return Err(NnError::Vocab(format!(
                "{} tokens, but embedding.vocab = {vocab_size}",
                tokens.len()
            )));
        }
        let mut ids = std::collections::HashMap::with_capacity(tokens.len());
        for (i, t) in tokens.iter().enumerate() {
            let s = t
                .as_str()
                .ok_or_else(|| NnError::Vocab(format!("token {i} is not a string")))?;
            if ids.insert(s.to_string(), i as u32).is_some() {
                return Err(NnError::Vocab(format!("duplicate token {s:?}")));
            }
        }
        if tokens.first().and_then(Value::as_str) != Some("<pad>")
            || tokens.get(1).and_then(Value::as_str) != Some("<unk>")
        {
            return Err(NnError::Vocab(
                "tokens[0] must be \"<pad>\" and tokens[1] \"<unk>\"".into(),
            ));
        }
        Ok(Vocab {
            config: config.clone(),
            ids,
            size: tokens.len(),
        })
    }

    /// Tokenises `text` with `words-v1` and shapes it to exactly `max_len` ids.
    pub fn encode(&self, text: &str) -> Vec<u32> {
        let ids: Vec<u32> = words_v1(text)
            .iter()
            .map(|w| self.ids.get(w.as_str()).copied().unwrap_or(self.config.unk))
            .collect();
        shape_tokens(ids, &self.config)
    }
}

/// Truncates or pads to exactly `max_len` ids, per the config's sides.
pub fn shape_tokens(mut ids: Vec<u32>, cfg: &VocabConfig) -> Vec<u32> {
    let t = cfg.max_len;
    if ids.len() > t {
        ids = match cfg.truncation {
            Side::Pre => ids.split_off(ids.len() - t),
            Side::Post => {
                ids.truncate(t);
                ids
            }
        };
    }
    let pad = t - ids.len();
    match cfg.padding {
        Side::Pre => {
            let mut out = vec![cfg.pad; pad];
            out.extend(ids);
            out
        }
        Side::Post => {
            ids.extend(std::iter::repeat_n(cfg.pad, pad));
            ids
        }
    }
}

/// Python's `re` `\s` on str: Unicode whitespace plus the four ASCII separators \x1c–\x1f.
fn py_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// Length in bytes of a `<br\s*/?>` match (case-insensitive) at the start of `s`, if any.
fn br_tag(s: &str) -> Option<usize> {
    let mut it = s.char_indices();
    let ok = |c: Option<(usize, char)>, want: char| {
        c.is_some_and(|(_, ch)| ch.eq_ignore_ascii_case(&want))
    };
    if !(ok(it.next(), '<') && ok(it.next(), 'b') && ok(it.next(), 'r')) {
        return None;
    }
    let mut rest = it.peekable();
    while rest.peek().is_some_and(|(_, c)| py_space(*c)) {
        rest.next();
    }
    if rest.peek().is_some_and(|(_, c)| *c == '/') {
        rest.next();
    }
    match rest.next() {
        Some((i, '>')) => Some(i + 1),
        _ => None,
    }
}

/// The `words-v1` tokeniser (docs/model-format.md): `<br>` tags become spaces, ASCII is
/// lower-cased, tokens are the maximal runs of `[a-z0-9]`.
pub fn words_v1(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut i = 0;
    while i < text.len() {
        if let Some(n) = br_tag(&text[i..]) {
            if !cur.is_empty() {
                out.push(std::mem::take(&mut cur));
            }
            i += n;
            continue;
        }
        let c = text[i..].chars().next().unwrap_or(' ');
        let l = c.to_ascii_lowercase();
        if l.is_ascii_lowercase() || l.is_ascii_digit() {
            cur.push(l);
        } else if !cur.is_empty() {
            out.push(std::mem::take(&mut cur));
        }
        i += c.len_utf8();
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
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
    pub weights: Weights,
    pub vocab: Option<Vocab>,
}

impl Model {
    pub fn load(dir: impl AsRef<Path>) -> Result<Model> {
        let dir = dir.as_ref();
        let config = ModelConfig::parse(&read_text(&dir.join("model.json"))?)?;
        let weights = Weights::parse(
            &read_bounded(&dir.join("weights.safetensors"), MAX_WEIGHTS_BYTES)?,
            &config.arch,
        )?;
        let vocab = match &config.vocab {
            Some(vc) => Some(Vocab::parse(
                &read_text(&dir.join(&vc.file))?,
                vc,
                config.arch.vocab,
            )?),
            None => None,
        };
        Ok(Model {
            config,
            weights,
            vocab,
        })
    }
}
