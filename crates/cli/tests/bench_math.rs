//! `secinfer bench math --repeat R`: R whole sessions in one process, a JSON record each, numbered
//! by `params.run`; every session does the same work (bytes and rounds do not depend on the heap
//! being warm) and its outputs keep the stated ULP bound.
#![allow(clippy::unwrap_used, reason = "tests: a panic is the failure report")]
use std::process::Command;

fn bench_math(extra: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_secinfer"))
        .args(["bench", "math", "--fn", "sigmoid", "--n", "256", "--json"])
        .args(extra)
        .output()
        .unwrap()
}

#[test]
fn repeat_runs_whole_sessions_with_one_record_each() {
    let out = bench_math(&["--repeat", "3"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let recs: Vec<serde_json::Value> = stdout
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(recs.len(), 3, "{stdout}");
    for (i, r) in recs.iter().enumerate() {
        assert_eq!(r["params"]["run"], i as u64 + 1);
        assert_eq!(r["params"]["n"], 256);
        // OPAF sigmoid's stated bound (docs/benchmarks.md): max ULP ≤ 3.
        let ulp = r["max_ulp"].as_f64().unwrap();
        assert!(ulp <= 3.0, "run {}: max ULP {ulp}", i + 1);
        // Each run is a fresh session: the same traffic and rounds as the first.
        assert_eq!(r["bytes_total"], recs[0]["bytes_total"]);
        assert_eq!(r["rounds"], recs[0]["rounds"]);
    }
    assert!(recs[0]["bytes_total"].as_u64().unwrap() > 0);
}

#[test]
fn repeat_out_of_range_is_refused() {
    for bad in ["0", "1001"] {
        let out = bench_math(&["--repeat", bad]);
        assert!(!out.status.success(), "--repeat {bad} was accepted");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("--repeat"), "{err}");
    }
}
