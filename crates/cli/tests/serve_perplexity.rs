//! Two real processes over TCP on the shipped Penn Treebank model: `infer --perplexity` learns
//! the log-probability of a sample's next word from a server that allows logits, equal to the
//! plaintext fixed-point reference's bit for bit; a server that refuses logits refuses it, and
//! the client says why.
#![allow(clippy::unwrap_used, reason = "tests: a panic is the failure report")]
use std::process::Command;

mod common;
use common::{root, serve_command, stdout_of_success, Served};

fn perplexity(addr: &str) -> std::process::Output {
    let model = root().join("models/ptb-relu-gru");
    Command::new(env!("CARGO_BIN_EXE_secinfer"))
        .args(["infer", "--server", addr, "--perplexity", "--limit", "1"])
        .args(["--compare-plaintext", "--model-info"])
        .arg(&model)
        .arg("--model")
        .arg(&model)
        .arg("--samples")
        .arg(model.join("samples.jsonl"))
        .output()
        .unwrap()
}

#[test]
fn served_perplexity_equals_the_reference_and_needs_allowed_logits() {
    let model = root().join("models/ptb-relu-gru");
    let mut cmd = serve_command(&["--allow-logits", "--model"]);
    cmd.arg(&model);
    let srv = Served::start(cmd, false);
    let so = stdout_of_success(&perplexity(&srv.addr));
    assert!(so.contains("[match]") && !so.contains("MISMATCH"), "{so}");
    assert!(
        so.contains("secure perplexity per word over 1 words"),
        "{so}"
    );
    srv.stop();

    let mut cmd = serve_command(&["--model"]);
    cmd.arg(&model);
    let srv = Served::start(cmd, false);
    let out = perplexity(&srv.addr);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("does not reveal logits"), "{err}");
    srv.stop();
}
