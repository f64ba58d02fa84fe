//! The weights of a model (`weights.safetensors`): float32 tensors under `{layer}.{tensor}`
//! names, checked against what the graph's layers need (exact names, dtype, shapes,
//! finiteness, no extra tensors).
use super::graph::Graph;
use super::Architecture;
use crate::error::{NnError, Result};
use std::collections::HashMap;

/// One float32 tensor, row-major.
pub struct Tensor {
    pub shape: Vec<usize>,
    pub data: Vec<f32>,
}

/// A model's weights, validated against its graph. Secret: no `Debug`.
pub struct Tensors {
    map: HashMap<String, Tensor>,
}

/// Reads the F32 tensor `name` of `shape` from a safetensors file, checking every value is
/// finite; `file` names the file in errors.
pub(crate) fn read_f32(
    st: &safetensors::SafeTensors<'_>,
    name: &str,
    shape: &[usize],
    file: &str,
) -> Result<Vec<f32>> {
    let t = st
        .tensor(name)
        .map_err(|_| NnError::tensor(file, name, "missing"))?;
    if t.dtype() != safetensors::Dtype::F32 {
        return Err(NnError::tensor(
            file,
            name,
            format!("dtype {:?}, expected F32", t.dtype()),
        ));
    }
    if t.shape() != shape {
        return Err(NnError::tensor(
            file,
            name,
            format!("shape {:?}, expected {shape:?}", t.shape()),
        ));
    }
    let vals: Vec<f32> = t
        .data()
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    if let Some(i) = vals.iter().position(|x| !x.is_finite()) {
        return Err(NnError::tensor(
            file,
            name,
            format!("element {i} is not finite"),
        ));
    }
    Ok(vals)
}

impl Tensors {
    /// Parses a safetensors buffer holding exactly the tensors `graph` needs.
    pub fn parse(bytes: &[u8], graph: &Graph) -> Result<Tensors> {
        const FILE: &str = "weights.safetensors";
        let st =
            safetensors::SafeTensors::deserialize(bytes).map_err(|e| NnError::Safetensors {
                file: FILE.into(),
                source: e,
            })?;
        let expected = graph.tensors();
        for name in st.names() {
            if !expected.iter().any(|(n, _)| n == name) {
                return Err(NnError::tensor(
                    FILE,
                    name,
                    "unexpected tensor: no layer of model.json reads it",
                ));
            }
        }
        let mut map = HashMap::with_capacity(expected.len());
        for (name, shape) in expected {
            let data = read_f32(&st, &name, &shape, FILE)?;
            map.insert(name, Tensor { shape, data });
        }
        Ok(Tensors { map })
    }

    /// Builds weights from named tensors (tests, random models), checked against `graph` as
    /// [`Tensors::parse`] checks a file.
    pub fn from_map(map: HashMap<String, Tensor>, graph: &Graph) -> Result<Tensors> {
        const WHAT: &str = "weights";
        let expected = graph.tensors();
        if let Some(extra) = map.keys().find(|k| !expected.iter().any(|(n, _)| n == *k)) {
            return Err(NnError::tensor(WHAT, extra, "unexpected tensor"));
        }
        for (name, shape) in &expected {
            let t = map
                .get(name)
                .ok_or_else(|| NnError::tensor(WHAT, name, "missing"))?;
            let n: usize = shape.iter().product();
            if &t.shape != shape || t.data.len() != n {
                return Err(NnError::tensor(
                    WHAT,
                    name,
                    format!("shape {:?}, expected {shape:?}", t.shape),
                ));
            }
            if let Some(i) = t.data.iter().position(|x| !x.is_finite()) {
                return Err(NnError::tensor(
                    WHAT,
                    name,
                    format!("element {i} is not finite"),
                ));
            }
        }
        Ok(Tensors { map })
    }

    /// The tensor `{layer}.{suffix}`; the graph guarantees it exists once parsing succeeded.
    /// The tensors holding values the format `fmt` cannot represent, with how many: those
    /// values are clamped to its bounds when quantised, which the server's operator should hear
    /// about by name (`serve` warns with this list).
    pub fn saturating(&self, fmt: crate::Format) -> Vec<(String, usize)> {
        let mut out: Vec<(String, usize)> = self
            .map
            .iter()
            .map(|(name, t)| {
                let n = t
                    .data
                    .iter()
                    .filter(|v| fmt.quantize_checked(**v as f64).1)
                    .count();
                (name.clone(), n)
            })
            .filter(|(_, n)| *n > 0)
            .collect();
        out.sort();
        out
    }

    pub fn get(&self, layer: &str, suffix: &str) -> Result<&Tensor> {
        let name = format!("{layer}.{suffix}");
        self.map
            .get(&name)
            .ok_or_else(|| NnError::tensor("weights", &name, "missing"))
    }

    fn take(&self, layer: &str, suffix: &str) -> Result<Vec<f32>> {
        Ok(self.get(layer, suffix)?.data.clone())
    }

    /// The weights of CryptoGRU's Embedding → GRU → Dense model, under the layers' names.
    pub fn gru_weights(&self, arch: &Architecture) -> Result<Weights> {
        Ok(Weights {
            embed: self.take(&arch.embed_name, "weight")?,
            w_ih: self.take(&arch.gru_name, "weight_ih")?,
            w_hh: self.take(&arch.gru_name, "weight_hh")?,
            b_ih: self.take(&arch.gru_name, "bias_ih")?,
            b_hh: self.take(&arch.gru_name, "bias_hh")?,
            w_fc: self.take(&arch.fc_name, "weight")?,
            b_fc: self.take(&arch.fc_name, "bias")?,
        })
    }
}

/// The float32 weights of an Embedding → GRU → Dense model, row-major. Secret: no `Debug`.
pub struct Weights {
    pub embed: Vec<f32>,
    pub w_ih: Vec<f32>,
    pub w_hh: Vec<f32>,
    pub b_ih: Vec<f32>,
    pub b_hh: Vec<f32>,
    pub w_fc: Vec<f32>,
    pub b_fc: Vec<f32>,
}
