//! `secinfer infer --image FILE.png`: a shipped MNIST sample written as a 28×28 grayscale PNG
//! classifies as its samples line does (plaintext reference), and a file that is not a PNG is
//! refused with an error naming it.
#![allow(clippy::unwrap_used, reason = "tests: a panic is the failure report")]
use std::path::PathBuf;
use std::process::Command;

#[test]
fn a_png_digit_classifies_like_its_samples_line() {
    let model = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../models/mnist-mlp");
    let text = std::fs::read_to_string(model.join("samples.jsonl")).unwrap();
    let dir = std::env::temp_dir().join(format!("secinfer-png-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (k, line) in text.lines().take(3).enumerate() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let px: Vec<u8> = v["input"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| (x.as_f64().unwrap() * 256.0).round().min(255.0) as u8)
            .collect();
        let path = dir.join(format!("digit{k}.png"));
        let mut enc = png::Encoder::new(std::fs::File::create(&path).unwrap(), 28, 28);
        enc.set_color(png::ColorType::Grayscale);
        enc.set_depth(png::BitDepth::Eight);
        enc.write_header().unwrap().write_image_data(&px).unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_secinfer"))
            .args(["infer", "--plaintext", "--model"])
            .arg(&model)
            .arg("--image")
            .arg(&path)
            .output()
            .unwrap();
        let so = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "{so}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let want = format!("class {}", v["label"].as_str().unwrap());
        assert!(so.contains(&want), "{so} (want {want})");
    }
    let junk = dir.join("junk.png");
    std::fs::write(&junk, b"not a png at all").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_secinfer"))
        .args(["infer", "--plaintext", "--model"])
        .arg(&model)
        .arg("--image")
        .arg(&junk)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("junk.png"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
