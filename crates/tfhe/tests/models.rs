//! The shipped SHE MNIST model: the Rust reference equals the integer logits the training
//! recipe computed (python/secinfer/she.py), so the recipe's full-split accuracy is the
//! accuracy of the network an encrypted run evaluates.
use std::path::PathBuf;

use safetensors::{Dtype, SafeTensors};
use secinfer_tfhe::{model, PbsNetwork};

fn dir(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../models")
        .join(name)
}

#[test]
fn she_mnist_reference_equals_recipe_logits() {
    let dir = dir("she-mnist");
    let (net, _) = model::load(&dir).expect("she-mnist loads");
    let (xs, ys) =
        model::load_samples(&dir.join("test.safetensors"), net.input_len()).expect("test samples");
    let bytes = std::fs::read(dir.join("test.safetensors")).expect("read");
    let st = SafeTensors::deserialize(&bytes).expect("safetensors");
    let logits = st.tensor("logits").expect("logits");
    assert_eq!(logits.dtype(), Dtype::I64);
    assert_eq!(logits.shape(), [xs.len(), net.output_len()]);
    let want: Vec<i64> = logits
        .data()
        .chunks_exact(8)
        .map(|b| i64::from_le_bytes(b.try_into().expect("8 bytes")))
        .collect();
    assert!(xs.len() >= 100 && xs.len() == ys.len());
    let mut right = 0;
    for (k, x) in xs.iter().enumerate() {
        let got = net.reference(x).expect("reference");
        assert_eq!(
            got,
            want[k * net.output_len()..(k + 1) * net.output_len()],
            "sample {k}"
        );
        let class = (0..got.len()).max_by_key(|i| (got[*i], std::cmp::Reverse(*i)));
        right += usize::from(class == Some(ys[k] as usize));
    }
    // A network this size that classifies 100+ digits worse than 90 % was not trained.
    assert!(right * 10 >= xs.len() * 9, "{right} of {}", xs.len());
    // The digit (PBS) circuit, max-pooling and the signed requantisation included, equals the
    // reference on the shipped model's samples.
    let pbs = PbsNetwork::new(&net).expect("she-mnist is on the PBS path");
    for x in xs.iter().take(8) {
        assert_eq!(
            pbs.evaluate_plain(x).expect("digits"),
            net.reference(x).expect("reference")
        );
    }
    assert_eq!(pbs.count().violations, 0);
}
