//! The client's public model information: `model.json`, `vocab.json` and the embedding table
//! (`embedding.safetensors`, one F32 tensor `{embed}.weight` of shape [V, E]). The embedding is
//! public and applied by the client; the GRU and dense weights stay with the server.
//! [`ModelInfo::load`] reads an info directory written by [`export_info`], or a full model
//! directory (then only the embedding tensor of `weights.safetensors` is read). The server's
//! public key (`server.pub`, see [`secinfer_net::Identity`]) travels with the info: the client
//! pins it, so only the holder of the model's private key can answer its sessions.
use crate::error::{NnError, Result};
use crate::model::weights::read_f32;
use crate::model::{read_bounded, read_text, LayerKind, ModelConfig, Vocab};
use std::path::Path;

const MAX_EMBED_BYTES: u64 = 1 << 30;
pub const EMBEDDING_FILE: &str = "embedding.safetensors";

/// What the client knows about the model.
pub struct ModelInfo {
    pub config: ModelConfig,
    pub vocab: Option<Vocab>,
    /// Float embedding table, V × E row-major (empty when the graph has no embedding).
    pub embed: Vec<f32>,
    /// The server's public key from `server.pub`, if the directory has one.
    pub server_key: Option<[u8; 32]>,
}

/// The embedding layer's name and table size, if the graph has one.
fn embedding_of(config: &ModelConfig) -> Option<(String, usize, usize)> {
    config.graph.layers.iter().find_map(|l| match l.kind {
        LayerKind::Embedding { vocab, dim } => Some((l.name.clone(), vocab, dim)),
        _ => None,
    })
}

fn embed_tensor(bytes: &[u8], name: &str, v: usize, e: usize, file: &str) -> Result<Vec<f32>> {
    let st =
        safetensors::SafeTensors::deserialize(bytes).map_err(|source| NnError::Safetensors {
            file: file.into(),
            source,
        })?;
    read_f32(&st, name, &[v, e], file)
}

/// The server's pinned public key from `dir/server.pub`, if the directory has one.
pub(crate) fn server_key_of(dir: &Path) -> Result<Option<[u8; 32]>> {
    let key_path = dir.join(secinfer_net::PUBLIC_KEY_FILE);
    if !key_path.exists() {
        return Ok(None);
    }
    let text = read_bounded(&key_path, 1024)?;
    let key = std::str::from_utf8(&text)
        .ok()
        .and_then(secinfer_net::parse_key_hex)
        .ok_or_else(|| NnError::Input(format!("{}: not a key", key_path.display())))?;
    Ok(Some(key))
}

impl ModelInfo {
    pub fn load(dir: impl AsRef<Path>) -> Result<ModelInfo> {
        let dir = dir.as_ref();
        let config = ModelConfig::parse(&read_text(&dir.join("model.json"))?)?;
        let vocab = config.load_vocab(dir)?;
        let server_key = server_key_of(dir)?;
        let Some((name, v, e)) = embedding_of(&config) else {
            return Ok(ModelInfo {
                config,
                vocab,
                embed: Vec::new(),
                server_key,
            });
        };
        let name = format!("{name}.weight");
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
        let embed = embed_tensor(&bytes, &name, v, e, file)?;
        Ok(ModelInfo {
            config,
            vocab,
            embed,
            server_key,
        })
    }
}

/// Writes the public part of model directory `model` to `out`: model.json and the vocabulary
/// (copied), `embedding.safetensors`, and the server's public key `server.pub` from the key at
/// `<model>/server.key` (made there if the model has none yet, as `secinfer serve` would).
pub fn export_info(model: impl AsRef<Path>, out: impl AsRef<Path>) -> Result<()> {
    let key = model.as_ref().join(secinfer_net::PRIVATE_KEY_FILE);
    export_info_with_key(model, out, &key)
}

/// [`export_info`] with the server's key at `key` (`secinfer serve --key`).
pub fn export_info_with_key(
    model: impl AsRef<Path>,
    out: impl AsRef<Path>,
    key: &Path,
) -> Result<()> {
    let (model, out) = (model.as_ref(), out.as_ref());
    let info = ModelInfo::load(model)?;
    let id = secinfer_net::Identity::load_or_create(key)?;
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
    let p = out.join(secinfer_net::PUBLIC_KEY_FILE);
    std::fs::write(&p, format!("{}\n", id.public_hex())).map_err(|e| io(&p, e))?;
    let Some((name, v, e)) = embedding_of(&info.config) else {
        return Ok(());
    };
    let data: Vec<u8> = info.embed.iter().flat_map(|x| x.to_le_bytes()).collect();
    let st = |source| NnError::Safetensors {
        file: EMBEDDING_FILE.into(),
        source,
    };
    let view = safetensors::tensor::TensorView::new(safetensors::Dtype::F32, vec![v, e], &data)
        .map_err(st)?;
    let bytes =
        safetensors::serialize(vec![(format!("{name}.weight"), view)], &None).map_err(st)?;
    let p = out.join(EMBEDDING_FILE);
    std::fs::write(&p, bytes).map_err(|e| io(&p, e))?;
    Ok(())
}
