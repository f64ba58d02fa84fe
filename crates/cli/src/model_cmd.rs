//! `secinfer inspect` and `secinfer infer --plaintext`: the model directory and its fixed-point
//! reference from the command line.
use crate::error::Error;
use clap::Args;
use secinfer_nn::{argmax, check_tokens, ExactActivations, Model, QuantizedModel, Reference, Task};
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct InspectArgs {
    /// Model directory (model.json, weights.safetensors, vocab.json).
    pub model: PathBuf,
}

pub fn inspect(a: InspectArgs) -> Result<(), Error> {
    let m = Model::load(&a.model)?;
    let c = &m.config;
    let ar = &c.arch;
    println!("model      {}", a.model.display());
    println!("task       {:?}", c.task);
    println!("layers");
    println!("  {:<10} embedding  vocab {} × dim {}   (public: applied by the client)", ar.embed_name, ar.vocab, ar.embed_dim);
    println!("  {:<10} gru        input {} → hidden {}, candidate {}", ar.gru_name, ar.embed_dim, ar.hidden, ar.activation.name());
    println!("  {:<10} dense      {} → {}", ar.fc_name, ar.hidden, ar.classes);
    let params = ar.vocab * ar.embed_dim + 3 * ar.hidden * (ar.embed_dim + ar.hidden + 2) + ar.classes * (ar.hidden + 1);
    println!("parameters {params}");
    let show = |name: &str, fp: &secinfer_nn::FixedPointConfig| {
        let s = fp.sigmoid_format();
        let g = fp.candidate_format();
        println!(
            "  {name:<10} main ({}, {})  sigmoid ({}, {}) → ({}, {})  candidate ({}, {}) → ({}, {})",
            fp.main.bits, fp.main.frac, s.input.bits, s.input.frac, s.output.bits, s.output.frac,
            g.input.bits, g.input.frac, g.output.bits, g.output.frac
        );
    };
    println!("fixed point (bits, frac_bits)");
    show("default", &c.fixed_point);
    for (n, fp) in &c.variants {
        show(n, fp);
    }
    if let Some(v) = &c.vocab {
        println!("input      {} tokens (words-v1, padding {:?}, truncation {:?})", v.max_len, v.padding, v.truncation);
    }
    if !c.labels.is_empty() {
        println!("labels     {}", c.labels.join(", "));
    }
    Ok(())
}

#[derive(Args, Debug)]
pub struct InferArgs {
    /// Evaluate the plaintext fixed-point reference locally (needs the full model directory).
    #[arg(long)]
    pub plaintext: bool,
    /// Model directory.
    #[arg(long)]
    pub model: PathBuf,
    /// Text to classify.
    #[arg(long, conflicts_with = "tokens")]
    pub text: Option<String>,
    /// File of whitespace-separated token ids.
    #[arg(long)]
    pub tokens: Option<PathBuf>,
    /// A `fixed_point_variants` entry (e.g. fx20, fx8); the model's default if absent.
    #[arg(long)]
    pub fixed_point: Option<String>,
}

pub fn infer(a: InferArgs) -> Result<(), Error> {
    if !a.plaintext {
        return Err(Error::msg("secure inference against a server is not available yet; use --plaintext for the local fixed-point reference"));
    }
    let m = Model::load(&a.model)?;
    let tokens: Vec<u32> = match (&a.text, &a.tokens) {
        (Some(t), _) => m.vocab.as_ref().ok_or_else(|| Error::msg("the model has no vocabulary; pass --tokens"))?.encode(t),
        (None, Some(f)) => std::fs::read_to_string(f)?
            .split_whitespace()
            .map(|s| s.parse::<u32>().map_err(|_| Error::msg(format!("{}: {s:?} is not a token id", f.display()))))
            .collect::<Result<_, _>>()?,
        (None, None) => return Err(Error::msg("pass --text or --tokens")),
    };
    check_tokens(&tokens, m.config.arch.vocab)?;
    if m.config.task != Task::Classification {
        return Err(Error::msg("--plaintext prints classifications; this is a language model"));
    }
    let fp = *m.config.fixed_point_named(a.fixed_point.as_deref())?;
    let q = QuantizedModel::new(&m, fp);
    let mut r = Reference::new(&q, ExactActivations);
    let logits = r.classify(&tokens);
    let k = argmax(&logits);
    let scale = (1u64 << fp.main.frac) as f64;
    println!("class      {} ({})", k, m.config.labels.get(k).map(String::as_str).unwrap_or("?"));
    let shown: Vec<String> = logits.iter().map(|l| format!("{:.4}", *l as f64 / scale)).collect();
    println!("logits     [{}]", shown.join(", "));
    println!("overflows  {}   saturated activations {}", r.counters.overflows, r.counters.saturated_activations);
    Ok(())
}
