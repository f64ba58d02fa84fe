//! Two real processes over TCP (Noise): `secinfer serve` on the shipped MNIST MLP and CNN
//! (family `hegc`: GALA's matvecs and convolutions, truncation / ReLU / max-pool by OT or
//! garbled, a garbled argmax, every response flooded to 40 bits by default) and
//! `secinfer infer --server` on their samples: each secure class equals the plaintext
//! fixed-point reference's, and the cost report names every layer and its protocol.
#![allow(clippy::unwrap_used, reason = "tests: a panic is the failure report")]
mod common;
use common::{root, serve_command, Served};
use std::process::Command;

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
    served_model_classifies_like_the_reference("models/mnist-mlp", &["fc1", "fc2", "fc3"], None);
}

#[test]
fn served_cnn_classifies_like_the_reference() {
    for nonlinear in ["ot", "gc"] {
        served_model_classifies_like_the_reference(
            "models/mnist-cnn",
            &[
                "conv1",
                "relu1..maxpool1",
                "conv2",
                "relu2..maxpool2",
                "fc1",
                "fc2",
            ],
            Some(nonlinear),
        );
    }
}

/// `nonlinear`: the finishing steps' protocol both processes are told (`None`: the default).
fn served_model_classifies_like_the_reference(dir: &str, layers: &[&str], nonlinear: Option<&str>) {
    let model = root().join(dir);
    let samples = model.join("samples.jsonl");
    let nl: Vec<&str> = nonlinear.map_or(Vec::new(), |n| vec!["--nonlinear", n]);
    let mut cmd = serve_command(&["--timeout", "30", "--model"]);
    cmd.arg(&model).args(&nl);
    let srv = Served::start(cmd, false);
    let addr = srv.addr.clone();
    let run = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_secinfer"))
            .args(["infer", "--limit", "3", "--samples"])
            .arg(&samples)
            .args(&nl)
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
    for layer in layers {
        assert!(secure.contains(layer), "{layer}: {secure}");
    }
    // The ReLU layers' rows name their protocol.
    let proto = nonlinear.unwrap_or("ot");
    let relu_rows: Vec<&str> = secure.lines().filter(|l| l.contains("relu")).collect();
    assert!(!relu_rows.is_empty(), "{secure}");
    for row in relu_rows {
        assert_eq!(row.split_whitespace().nth(1), Some(proto), "{row}");
    }
    if nonlinear == Some("gc") {
        // A client asking for the other protocol runs another network: refused by the server.
        let out = Command::new(env!("CARGO_BIN_EXE_secinfer"))
            .args(["infer", "--limit", "1", "--nonlinear", "ot", "--samples"])
            .arg(&samples)
            .args(["--server", &addr, "--model-info"])
            .arg(&model)
            .output()
            .unwrap();
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("nonlinear protocol"), "{err}");
    }
    drop(srv);
}
