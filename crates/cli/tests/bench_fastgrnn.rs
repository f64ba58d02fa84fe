//! `secinfer bench fastgrnn --net tcp`: the secure FastGRNN between two processes over loopback
//! TCP, with OPAF's and SIRNN's math and HE and OT products from the same binary; the client's class equals the
//! plaintext reference's and its logits stay within a small distance of them.
#![allow(clippy::unwrap_used, reason = "tests: a panic is the failure report")]
use std::process::Command;

#[test]
fn two_process_runs_match_the_reference_for_both_maths() {
    for (math, products) in [("opaf", "he"), ("sirnn", "ot")] {
        let out = Command::new(env!("CARGO_BIN_EXE_secinfer"))
            .args([
                "bench", "fastgrnn", "--input", "6", "--hidden", "16", "--steps", "5",
            ])
            .args(["--classes", "4", "--net", "tcp", "--json", "--math", math])
            .args(["--products", products])
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let r: serde_json::Value = stdout
            .lines()
            .find(|l| l.starts_with('{'))
            .map(|l| serde_json::from_str(l).unwrap())
            .unwrap();
        assert_eq!(r["params"]["math"], math);
        assert_eq!(r["params"]["products"], products);
        assert_eq!(r["params"]["net"], "tcp");
        assert_eq!(r["class"], r["reference_class"], "{stdout}");
        // σ and tanh's ULPs carried through five steps: well under 1/32 per logit.
        let gap = r["max_logit_gap"].as_f64().unwrap();
        assert!(gap <= 1.0 / 32.0, "{math}: logit gap {gap}");
        assert!(r["phases"]["online"]["bytes"].as_u64().unwrap() > 0);
        assert!(r["rounds"].as_u64().unwrap() > 0);
    }
}

/// `bench fastgrnn --cell gru --net tcp`: CryptoGRU's GRU classifier on family ss between two
/// processes; the client's class equals the plaintext reference's for both candidates.
#[test]
fn two_process_gru_on_ss_matches_the_reference_class() {
    for candidate in ["relu", "tanh"] {
        let out = Command::new(env!("CARGO_BIN_EXE_secinfer"))
            .args([
                "bench",
                "fastgrnn",
                "--cell",
                "gru",
                "--candidate",
                candidate,
            ])
            .args([
                "--input",
                "5",
                "--hidden",
                "8",
                "--steps",
                "4",
                "--classes",
                "3",
            ])
            .args(["--net", "tcp", "--json"])
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let r: serde_json::Value = stdout
            .lines()
            .find(|l| l.starts_with('{'))
            .map(|l| serde_json::from_str(l).unwrap())
            .unwrap();
        assert_eq!(r["bench"], "gru-ss");
        assert_eq!(r["params"]["candidate"], candidate);
        assert_eq!(r["class"], r["reference_class"], "{stdout}");
        assert!(r["rounds"].as_u64().unwrap() > 0);
    }
}
