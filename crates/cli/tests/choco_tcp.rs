//! Family choco over TCP, two real processes: `secinfer serve --family choco` on the shipped
//! MNIST MLP (Noise channel, key in a scratch directory) and `secinfer infer --family choco`
//! against it; every layer of the secure run equals the plaintext fixed-point reference, and
//! both sides name the leak.
#![allow(clippy::unwrap_used, reason = "tests: a panic is the failure report")]
mod common;
use common::{export_info, root, serve_command, Served};
use std::process::Command;

#[test]
fn choco_serve_and_infer_over_tcp_match_the_reference() {
    let model = root().join("models/mnist-mlp");
    let (scratch, key, info) = export_info("choco", &model);
    let mut cmd = serve_command(&["--family", "choco", "--sessions", "1", "--model"]);
    cmd.arg(&model).arg("--key").arg(&key);
    let srv = Served::start(cmd, true);
    assert!(srv.line.contains("family choco"), "{}", srv.line);
    let addr = srv.addr.clone();
    let out = Command::new(env!("CARGO_BIN_EXE_secinfer"))
        .args([
            "infer",
            "--family",
            "choco",
            "--client-threads",
            "1",
            "--server",
            &addr,
        ])
        .arg("--model-info")
        .arg(&info)
        .arg("--model")
        .arg(&model)
        .args(["--compare-plaintext", "--limit", "1", "--samples"])
        .arg(model.join("samples.jsonl"))
        .output()
        .unwrap();
    let so = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{so}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        so.contains("secure: 7") && so.contains("true label: 7"),
        "{so}"
    );
    assert!(
        so.contains("every layer matches") && !so.contains("MISMATCH"),
        "{so}"
    );
    assert!(so.contains("sees every intermediate activation"), "{so}");
    let log = srv.stop().join("\n");
    assert!(
        log.contains("client sees every intermediate activation"),
        "{log}"
    );
    let _ = std::fs::remove_dir_all(&scratch);
}
