//! Helpers shared by the integration tests that write model directories.
#![allow(clippy::unwrap_used, reason = "tests: a panic is the failure report")]
use std::path::Path;

/// Writes `weights.safetensors` into `dir`: float32 tensors given as (name, shape, values).
pub fn write_weights(dir: &Path, tensors: &[(&str, Vec<usize>, Vec<f32>)]) {
    let bytes: Vec<Vec<u8>> = tensors
        .iter()
        .map(|(_, _, d)| d.iter().flat_map(|v| v.to_le_bytes()).collect())
        .collect();
    let views: Vec<(String, safetensors::tensor::TensorView<'_>)> = tensors
        .iter()
        .zip(&bytes)
        .map(|((name, shape, _), d)| {
            (
                name.to_string(),
                safetensors::tensor::TensorView::new(safetensors::Dtype::F32, shape.clone(), d)
                    .unwrap(),
            )
        })
        .collect();
    std::fs::write(
        dir.join("weights.safetensors"),
        safetensors::serialize(views, &None).unwrap(),
    )
    .unwrap();
}
