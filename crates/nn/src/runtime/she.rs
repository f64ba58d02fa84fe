//! SHE's models in the driver (Lou & Jiang, NeurIPS 2019, on tfhe-rs: `secinfer_tfhe`): a
//! directory with `she.json` is served on the PBS path, and its public description
//! (`she-info.json`, with the server's `server.pub`) is what a client loads. The session itself
//! is `secinfer_tfhe::session`; this module reads and writes the directories.
use crate::error::NnError;
#[cfg(feature = "tfhe")]
use crate::error::Result;
use std::path::Path;

/// The public description a client reads (written by [`export_info`]).
pub const INFO_FILE: &str = "she-info.json";
/// Largest `she-info.json` a client reads (disk bytes are hostile).
#[cfg(feature = "tfhe")]
const MAX_INFO_BYTES: u64 = 1 << 16;

/// True when `dir` holds a SHE model.
pub fn is_she_model(dir: &Path) -> bool {
    dir.join("she.json").is_file()
}

/// True when `dir` holds a SHE model's public info.
pub fn is_she_info(dir: &Path) -> bool {
    dir.join(INFO_FILE).is_file()
}

/// The refusal of a build without SHE.
#[cfg(not(feature = "tfhe"))]
pub(crate) fn unsupported(dir: &Path) -> NnError {
    NnError::Unsupported(format!(
        "{}: a SHE model; this build has no SHE (build with the tfhe feature)",
        dir.display()
    ))
}

/// The PBS network of the SHE model in `dir`.
#[cfg(feature = "tfhe")]
pub fn load_network(dir: &Path) -> Result<secinfer_tfhe::PbsNetwork> {
    let (net, _) = secinfer_tfhe::model::load(dir)?;
    Ok(secinfer_tfhe::PbsNetwork::new(&net)?)
}

/// A client's view of a SHE model: the validated public description and the server's key
/// from `server.pub`, if the directory has one.
#[cfg(feature = "tfhe")]
pub fn load_info(dir: &Path) -> Result<(secinfer_tfhe::PbsInfo, Option<[u8; 32]>)> {
    let path = dir.join(INFO_FILE);
    let bytes = crate::model::read_bounded(&path, MAX_INFO_BYTES)?;
    let info: secinfer_tfhe::PbsInfo =
        serde_json::from_slice(&bytes).map_err(|source| NnError::Json {
            file: path.display().to_string(),
            source,
        })?;
    info.validate()?;
    Ok((info, crate::info::server_key_of(dir)?))
}

/// Writes `she-info.json` and `server.pub` (both public) for the SHE model in `model_dir`,
/// the key pair made at `key` if absent.
#[cfg(feature = "tfhe")]
pub fn export_info(model_dir: &Path, out: &Path, key: &Path) -> Result<()> {
    let pbs = load_network(model_dir)?;
    let io = |path: &Path| {
        let path = path.display().to_string();
        move |source| NnError::Io { path, source }
    };
    std::fs::create_dir_all(out).map_err(io(out))?;
    let text = serde_json::to_string_pretty(pbs.info()).map_err(|source| NnError::Json {
        file: INFO_FILE.into(),
        source,
    })?;
    let info = out.join(INFO_FILE);
    std::fs::write(&info, text).map_err(io(&info))?;
    let id = secinfer_net::Identity::load_or_create(key)?;
    let public = out.join(secinfer_net::PUBLIC_KEY_FILE);
    std::fs::write(&public, id.public_hex() + "\n").map_err(io(&public))?;
    Ok(())
}
