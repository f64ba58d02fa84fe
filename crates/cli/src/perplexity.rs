//! `secinfer infer --perplexity`: a language model's secure perplexity per word over a text.
//! Each word is one session whose final garbled circuit reveals only log2 p(word | context)
//! (`secinfer_nn::layers::gru::logprob`); the client names the word as a private circuit input.
use crate::error::Error;
use crate::model_cmd::{print_report, sample_lines, Gates, InferArgs};
use secinfer_nn::layers::gru::circuits::{CircuitCache, StepLayout};
use secinfer_nn::layers::gru::logprob::{log2_prob_exact, log2_prob_fixed, LOG_FRAC};
use secinfer_nn::layers::gru::{ClientOptions, DEFAULT_GARBLING};
use secinfer_nn::model::shape_tokens;
use secinfer_nn::runtime::Client;
use secinfer_nn::{CircuitActivations, Model, QuantizedModel, Reference, Vocab};

/// One word to score: its context window (shaped to the model's input) and its id.
struct Item {
    context: Vec<u32>,
    word: u32,
    shown: String,
}

/// The words of `--text` after the first (each after the words before it), or each sample's
/// label after its text (`--samples`); at most `--limit`.
fn items(a: &InferArgs, v: &Vocab) -> Result<Vec<Item>, Error> {
    let mut out = Vec::new();
    if let Some(t) = &a.text {
        let ids = v.ids(t);
        let words = secinfer_nn::words_v1(t);
        for i in 1..ids.len() {
            out.push(Item {
                context: shape_tokens(ids[..i].to_vec(), &v.config),
                word: ids[i],
                shown: words[i].clone(),
            });
        }
    } else if let Some(f) = &a.samples {
        for (what, _, j) in sample_lines(f, None)? {
            let (Some(text), Some(label)) = (j["text"].as_str(), j["label"].as_str()) else {
                return Err(Error::msg(format!(
                    "{what}: a perplexity sample needs \"text\" and \"label\" (the next word)"
                )));
            };
            let word = v.ids(label);
            if word.len() != 1 {
                return Err(Error::msg(format!("{what}: the label must be one word")));
            }
            out.push(Item {
                context: v.encode(text),
                word: word[0],
                shown: label.to_string(),
            });
        }
    } else {
        return Err(Error::msg("--perplexity needs --text or --samples"));
    }
    out.truncate(a.limit.unwrap_or(usize::MAX));
    if out.is_empty() {
        return Err(Error::msg(
            "no word to score (a text needs two words or more)",
        ));
    }
    Ok(out)
}

/// Perplexity per word from a sum of log2 probabilities over `n` words.
fn ppw(sum_log2: f64, n: usize) -> f64 {
    (-sum_log2 / n as f64).exp2()
}

pub(crate) fn run(a: &InferArgs, client: &Client, server: &str) -> Result<(), Error> {
    let cm = client.model()?;
    let v = client
        .vocab()
        .ok_or_else(|| Error::msg("--perplexity needs a model with a vocabulary"))?;
    let its = items(a, v)?;
    let reference = if a.compare_plaintext {
        let dir = a.model.as_ref().ok_or_else(|| {
            Error::msg("--compare-plaintext needs --model (the full model directory)")
        })?;
        Some(QuantizedModel::new(&Model::load(dir)?, cm.fp)?)
    } else {
        None
    };
    let l = StepLayout::new(&cm.fp, &CircuitCache::default()).l;
    let f = cm.fp.main.scale as usize;
    let unit = (LOG_FRAC as f64).exp2();
    let (mut secure, mut fixed, mut exact) = (0.0f64, 0.0f64, 0.0f64);
    let mut last = None;
    for (i, it) in its.iter().enumerate() {
        let out = client.infer_with(
            server,
            &it.context,
            ClientOptions {
                gates_in_circuit: a.gates == Gates::Circuit,
                log_prob_of: Some(it.word as usize),
                ..ClientOptions::default()
            },
            a.ot,
            a.garbling.unwrap_or(DEFAULT_GARBLING),
            &mut |_, _, _| {},
        )?;
        let lp = out
            .log2_prob
            .ok_or_else(|| Error::msg("the session returned no log-probability"))?;
        secure += lp as f64 / unit;
        let mut line = format!(
            "word {:<4} {:<14} secure log2 p {:>9.4}",
            i + 1,
            it.shown,
            lp as f64 / unit
        );
        if let Some(q) = &reference {
            let logits = Reference::new(q, CircuitActivations::default()).classify(&it.context);
            let want = log2_prob_fixed(&logits, l, f, it.word as usize);
            let ex = log2_prob_exact(&logits, f, it.word as usize);
            fixed += want as f64 / unit;
            exact += ex;
            line += &format!("  plaintext fixed-point {:>9.4}", want as f64 / unit);
            line += if want == lp {
                "  [match]"
            } else {
                "  [MISMATCH]"
            };
            line += &format!("  exact log-softmax {ex:>9.4}");
        }
        println!("{line}");
        last = Some(out.report);
    }
    let n = its.len();
    println!(
        "secure perplexity per word over {n} words: {:.2}",
        ppw(secure, n)
    );
    if reference.is_some() {
        println!(
            "plaintext fixed-point: {:.2}; exact log-softmax of the fixed-point logits: {:.2}",
            ppw(fixed, n),
            ppw(exact, n)
        );
    }
    if let Some(rep) = &last {
        print_report(rep, a.variant.name());
    }
    Ok(())
}
