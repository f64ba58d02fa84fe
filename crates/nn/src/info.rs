//! The client's public model information: `model.json`, `vocab.json` and the embedding table
//! (`embedding.safetensors`, one F32 tensor `{embed}.weight` of shape [V, E]). The embedding is
//! public and applied by the client; the GRU and dense weights stay with the server.
//! [`ModelInfo::load`] reads an info directory written by [`export_info`], or a full model
//! directory (then only the embedding tensor of `weights.safetensors` is read).
use crate::error::{NnError, Result};
use crate::model::{read_bounded, read_text, ModelConfig, Vocab};
use std::path::Path;

const MAX_EMBED_BYTES: u64 = 1 << 30;
pub const EMBEDDING_FILE: &str = "embedding.safetensors";

/// What the client knows about the model.
pub struct ModelInfo {
    pub config: ModelConfig,
    pub vocab: Option<Vocab>,
    /// Float embedding table, V × E row-major.
    pub embed: Vec<f32>,
}

fn embed_tensor(bytes: &[u8], name: &str, v: usize, e: usize, file: &str) -> Result<Vec<f32>> {
    let st = safetensors::SafeTensors::deserialize(bytes)
        .map_err(|er| NnError::Weights(format!("{file}: {er}")))?;
    let t = st
        .tensor(name)
        .map_err(|_| NnError::tensor(name, format!("missing from {file}")))?;
    if t.dtype() != safetensors::Dtype::F32 {
        return Err(NnError::tensor(
            name,
            format!("dtype {:?}, expected F32", t.dtype()),
        ));
    }
    if t.shape() != [v, e] {
        return Err(NnError::tensor(
            name,
            format!("shape {:?}, expected {:?}", t.shape(), [v, e]),
        ));
    }
    let vals: Vec<f32> = t
        .data()
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    if let Some(i) = vals.iter().position(|x| !x.is_finite()) {
        return Err(NnError::tensor(name, format!("element {i} is not finite")));
    }
    Ok(vals)
}

impl ModelInfo {
    pub fn load(dir: impl AsRef<Path>) -> Result<ModelInfo> {
        let dir = dir.as_ref();
        let config = ModelConfig::parse(&read_text(&dir.join("model.json"))?)?;
        let vocab = match &config.vocab {
            Some(vc) => Some(Vocab::parse(
                &read_text(&dir.join(&vc.file))?,
                vc,
                config.arch.vocab,
            )?),
            None => None,
        };
        let a = &config.arch;
        let name = format!("{}.weight", a.embed_name);
        let (file, bytes) = if dir.join(EMBEDDING_FILE).exists() {
            (
                EMBEDDING_FILE,
                read_bounded(&dir.join(EMBEDDING_FILE), MAX_EMBED_BYTES)?,
            )
        } else {
            (
                "weights.safetensors",
                read_bounded(&dir.join("weights.safetensors"), 2 << 30)?,
            )
        };
        let embed = embed_tensor(&bytes, &name, a.vocab, a.embed_dim, file)?;
        Ok(ModelInfo {
            config,
            vocab,
            embed,
        })
    }
}

/// Writes the public part of model directory `model` to `out`: model.json and the vocabulary
/// (copied) and `embedding.safetensors`.
pub fn export_info(model: impl AsRef<Path>, out: impl AsRef<Path>) -> Result<()> {
    let (model, out) = (model.as_ref(), out.as_ref());
    let info = ModelInfo::load(model)?;
    let io = |p: &Path, e: std::io::Error| NnError::Io {
        path: p.display().to_string(),
        source: e,
    };
    std::fs::create_dir_all(out).map_err(|e| io(out, e))?;
    for f in std::iter::once("model.json".to_string())
        .chain(info.config.vocab.as_ref().map(|v| v.file.clone()))
    {
        std::fs::copy(model.join(&f), out.join(&f)).map_err(|e| io(&model.join(&f), e))?;
    }
    let a = &info.config.arch;
    let data: Vec<u8> = info.embed.iter().flat_map(|x| x.to_le_bytes()).collect();
    let view = safetensors::tensor::TensorView::new(
        safetensors::Dtype::F32,
        vec![a.vocab, a.embed_dim],
        &data,
    )
    .map_err(|e| NnError::Weights(e.to_string()))?;
    let bytes = safetensors::serialize(vec![(format!("{}.weight", a.embed_name), view)], &None)
        .map_err(|e| NnError::Weights(e.to_string()))?;
    let p = out.join(EMBEDDING_FILE);
    std::fs::write(&p, bytes).map_err(|e| io(&p, e))?;
    Ok(())
}
