//! Family ss over TCP, two real processes: `secinfer serve` on the shipped FastGRNN (chosen by
//! its graph, Noise channel under a scratch key) and `secinfer infer` against it. On two shipped
//! samples the secure class equals the plaintext fixed-point reference's and the label; the
//! client learns no logits unless the server allows them, and asking is refused by name.
#![allow(clippy::unwrap_used, reason = "tests: a panic is the failure report")]
mod common;
use common::{export_info, root, serve_command, Served};
use std::process::Command;

fn infer(addr: &str, info: &std::path::Path, extra: &[&str]) -> (bool, String, String) {
    let model = root().join("models/mnist-fastgrnn");
    let out = Command::new(env!("CARGO_BIN_EXE_secinfer"))
        .args(["infer", "--server", addr, "--model-info"])
        .arg(info)
        .arg("--model")
        .arg(&model)
        .args(extra)
        .arg("--samples")
        .arg(model.join("samples.jsonl"))
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn fastgrnn_serve_and_infer_over_tcp_match_the_reference() {
    let model = root().join("models/mnist-fastgrnn");
    let (scratch, key, info) = export_info("ss", &model);
    let mut cmd = serve_command(&["--sessions", "4", "--model"]);
    cmd.arg(&model).arg("--key").arg(&key);
    let srv = Served::start(cmd, true);
    assert!(srv.line.contains("family ss"), "{}", srv.line);
    let addr = srv.addr.clone();
    let (ok, so, se) = infer(&addr, &info, &["--compare-plaintext", "--limit", "2"]);
    assert!(ok, "{so}\n{se}");
    assert!(
        so.contains("secure: 7") && so.contains("true label: 7"),
        "{so}"
    );
    assert!(
        so.contains("secure: 2") && so.contains("true label: 2"),
        "{so}"
    );
    assert_eq!(
        so.matches("[class matches the plaintext fixed-point reference]")
            .count(),
        2,
        "{so}"
    );
    assert!(!so.contains("logits ["), "{so}");
    assert!(so.contains("online rounds"), "{so}");
    assert!(so.contains("opaf math, he products"), "{so}");
    // The other products and math, chosen by the client: the same class.
    let (ok, so, se) = infer(
        &addr,
        &info,
        &[
            "--compare-plaintext",
            "--limit",
            "1",
            "--products",
            "ot",
            "--math",
            "sirnn",
        ],
    );
    assert!(ok, "{so}\n{se}");
    assert!(so.contains("sirnn math, ot products"), "{so}");
    assert!(
        so.contains("secure: 7")
            && so.contains("[class matches the plaintext fixed-point reference]"),
        "{so}"
    );
    let (ok, so, se) = infer(&addr, &info, &["--reveal-logits", "--limit", "1"]);
    assert!(!ok, "{so}");
    assert!(se.contains("does not reveal logits"), "{se}");
    let log = srv.stop().join("\n");
    assert_eq!(log.matches("revealed class").count(), 3, "{log}");
    assert!(log.contains("not allowed"), "{log}");
    let _ = std::fs::remove_dir_all(&scratch);
}
