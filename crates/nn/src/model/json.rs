//! Readers for the JSON fields of `model.json`, each error naming the field at fault.
use super::{Candidate, Side};
use crate::error::{NnError, Result};
use crate::model::format::{ActFormat, FixedPointConfig, Format};
use serde_json::{Map, Value};

pub(crate) fn obj<'a>(v: &'a Value, what: &str) -> Result<&'a Map<String, Value>> {
    v.as_object()
        .ok_or_else(|| NnError::config(format!("{what} must be an object")))
}

pub(crate) fn get<'a>(m: &'a Map<String, Value>, key: &str, what: &str) -> Result<&'a Value> {
    m.get(key)
        .ok_or_else(|| NnError::config(format!("{what}.{key} is missing")))
}

pub(crate) fn uint(m: &Map<String, Value>, key: &str, what: &str, lo: u64, hi: u64) -> Result<u64> {
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

pub(crate) fn string<'a>(m: &'a Map<String, Value>, key: &str, what: &str) -> Result<&'a str> {
    get(m, key, what)?
        .as_str()
        .ok_or_else(|| NnError::config(format!("{what}.{key} must be a string")))
}

pub(crate) fn layer_name(m: &Map<String, Value>, what: &str) -> Result<String> {
    let n = string(m, "name", what)?;
    if n.is_empty() || n.contains('.') {
        return Err(NnError::config(format!(
            "{what}.name {n:?} must be non-empty and contain no '.'"
        )));
    }
    Ok(n.to_string())
}

pub(crate) fn parse_format(v: &Value, what: &str) -> Result<Format> {
    let m = obj(v, what)?;
    // 2..=24 bits is what the activation circuits and the HE ring accept; the format's own
    // rules (scale below bits) are `Format::new`'s.
    let bits = uint(m, "bits", what, 2, 24)? as u32;
    let scale = uint(m, "frac_bits", what, 0, 64)? as u32;
    Format::new(bits, scale).map_err(|source| NnError::Format {
        what: what.to_string(),
        source,
    })
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
                if f.bits > main.bits || f.scale > main.scale {
                    return Err(NnError::config(format!(
                        "{w}.{side} ({}, {}) must not be wider or finer than the main format ({}, {})",
                        f.bits, f.scale, main.bits, main.scale
                    )));
                }
            }
            if af.output.bits - af.output.scale > main.bits - main.scale {
                return Err(NnError::config(format!(
                    "{w}.output has more integer bits than the main format"
                )));
            }
            match key.as_str() {
                "sigmoid" => cfg.sigmoid = Some(af),
                "candidate" => {
                    if activation == Candidate::Relu && af.input.scale != af.output.scale {
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

pub(crate) fn side(m: &Map<String, Value>, key: &str, what: &str) -> Result<Side> {
    match m.get(key) {
        None => Ok(Side::Pre),
        Some(Value::String(s)) if s == "pre" => Ok(Side::Pre),
        Some(Value::String(s)) if s == "post" => Ok(Side::Post),
        Some(other) => Err(NnError::config(format!(
            "{what}.{key} = {other} (expected \"pre\" or \"post\")"
        ))),
    }
}
