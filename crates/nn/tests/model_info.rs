//! The client's public model information: export, reload, and rejection of a malformed
//! embedding file with the tensor named.
#![allow(clippy::unwrap_used, reason = "tests: a panic is the failure report")]
use secinfer_nn::info::{export_info_with_key, ModelInfo, EMBEDDING_FILE};
use secinfer_nn::{Model, NnError};
use std::path::PathBuf;

fn model_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../models/imdb-relu-gru")
}

fn tempdir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("secinfer-info-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

#[test]
fn exported_info_has_the_public_parts_and_no_secret_weights() {
    let out = tempdir("ok");
    // The server key lives in a scratch directory, not beside the repository's model.
    let keys = out.with_extension("keys");
    export_info_with_key(model_dir(), &out, &keys.join("server.key")).unwrap();
    assert!(!out.join("weights.safetensors").exists());
    let info = ModelInfo::load(&out).unwrap();
    let m = Model::load(model_dir()).unwrap();
    let embed = &m.tensors.get("embed", "weight").unwrap().data;
    assert_eq!(&info.embed, embed);
    assert_eq!(
        info.config.gru().unwrap().hidden,
        m.config.gru().unwrap().hidden
    );
    assert!(info.vocab.is_some());
    // A full model directory is accepted too (only its embedding tensor is read).
    assert_eq!(&ModelInfo::load(model_dir()).unwrap().embed, embed);
    let _ = std::fs::remove_dir_all(&out);
    let _ = std::fs::remove_dir_all(&keys);
}

#[test]
fn embedding_with_wrong_shape_is_rejected_naming_the_tensor() {
    let out = tempdir("bad");
    // The server key lives in a scratch directory, not beside the repository's model.
    let keys = out.with_extension("keys");
    export_info_with_key(model_dir(), &out, &keys.join("server.key")).unwrap();
    let data = vec![0u8; 4 * 6];
    let view =
        safetensors::tensor::TensorView::new(safetensors::Dtype::F32, vec![2, 3], &data).unwrap();
    std::fs::write(
        out.join(EMBEDDING_FILE),
        safetensors::serialize(vec![("embed.weight", view)], &None).unwrap(),
    )
    .unwrap();
    match ModelInfo::load(&out) {
        Err(NnError::Tensor {
            file,
            tensor,
            problem,
        }) => {
            assert_eq!(file, EMBEDDING_FILE);
            assert_eq!(tensor, "embed.weight");
            assert!(problem.contains("shape"), "{problem}");
        }
        other => panic!("expected a tensor error, got {:?}", other.err()),
    }
    let _ = std::fs::remove_dir_all(&out);
    let _ = std::fs::remove_dir_all(&keys);
}
