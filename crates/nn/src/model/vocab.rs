//! The vocabulary and the `words-v1` tokeniser (docs/model-format.md).
use super::{Side, VocabConfig};
use crate::error::{NnError, Result};
use serde_json::Value;

/// The vocabulary: token string → id.
#[derive(Clone, Debug)]
pub struct Vocab {
    pub config: VocabConfig,
    ids: std::collections::HashMap<String, u32>,
    /// id → token, for printing a language model's predictions.
    tokens: Vec<String>,
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
        let mut words = Vec::with_capacity(tokens.len());
        for (i, t) in tokens.iter().enumerate() {
            let s = t
                .as_str()
                .ok_or_else(|| NnError::Vocab(format!("token {i} is not a string")))?;
            words.push(s.to_string());
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
            tokens: words,
            size: tokens.len(),
        })
    }

    /// The token with id `id`, if there is one.
    pub fn token(&self, id: usize) -> Option<&str> {
        self.tokens.get(id).map(String::as_str)
    }

    /// Tokenises `text` with `words-v1` and shapes it to exactly `max_len` ids.
    pub fn encode(&self, text: &str) -> Vec<u32> {
        shape_tokens(self.ids(text), &self.config)
    }

    /// Every word's id (unknown words: `unk`), neither truncated nor padded: a language
    /// model's stream, from which windows and next words are cut.
    pub fn ids(&self, text: &str) -> Vec<u32> {
        words_v1(text)
            .iter()
            .map(|w| self.ids.get(w.as_str()).copied().unwrap_or(self.config.unk))
            .collect()
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
