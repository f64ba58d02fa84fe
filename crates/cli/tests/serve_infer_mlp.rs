//! Two real processes over TCP (Noise): `secinfer serve` on the shipped MNIST MLP (family
//! `hegc`: GALA's matvecs and garbled truncation / ReLU / argmax) and `secinfer infer --server`
//! on its samples: each secure class equals the plaintext fixed-point reference's, and the
//! cost report names every layer.
#![allow(clippy::unwrap_used, reason = "tests: a panic is the failure report")]
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

struct Server(Child);
impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// "sample N   <class>" pairs of an infer run's stdout, by the word after `key`.
fn classes(out: &str, key: &str) -> Vec<String> {
    out.lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            w.position(|t| t == key)?;
            w.next().map(String::from)
        })
        .collect()
}

#[test]
fn served_mlp_classifies_like_the_reference() {
    let model = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../models/mnist-mlp");
    let samples = model.join("samples.jsonl");
    let mut srv = Command::new(env!("CARGO_BIN_EXE_secinfer"))
        .args(["serve", "--port", "0", "--timeout", "30", "--model"])
        .arg(&model)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(srv.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let srv = Server(srv);
    let addr = line.split_whitespace().nth(2).unwrap().to_string();
    let run = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_secinfer"))
            .args(["infer", "--limit", "3", "--samples"])
            .arg(&samples)
            .args(args)
            .arg(&model)
            .output()
            .unwrap();
        let so = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "{so}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        so
    };
    let secure = run(&["--server", &addr, "--model-info"]);
    let plain = run(&["--plaintext", "--model"]);
    let got = classes(&secure, "secure:");
    let want = classes(&plain, "class");
    assert_eq!(got.len(), 3, "{secure}");
    assert_eq!(got, want, "{secure}\n{plain}");
    for layer in ["fc1", "fc2", "fc3"] {
        assert!(secure.contains(layer), "{secure}");
    }
    drop(srv);
}
