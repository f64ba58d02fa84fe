//! Helpers shared by the integration tests: deterministic test data and model directories.
#![allow(clippy::unwrap_used, reason = "tests: a panic is the failure report")]
#![allow(dead_code, reason = "each test file uses a subset")]
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

/// A splitmix64 stream: deterministic test data.
pub struct Rng(pub u64);
impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// `n` values uniform in [−bound, bound).
    pub fn uniform(&mut self, n: usize, bound: f32) -> Vec<f32> {
        (0..n)
            .map(|_| ((self.next() >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * bound)
            .collect()
    }
}
