//! Every fuzz target for a bounded number of seeded mutations (the stable-Rust run CI
//! executes): no input may panic, and no decoder may make a single allocation above the limit
//! it is bounded by. The longer runs are `cargo run --release -p secinfer-fuzz --bin
//! fuzz-stable` and `cargo fuzz run` (docs/reliability.md).
//!
//! This file holds the one test that counts allocations: the counter is process-wide, so a
//! test running beside it in the same process (tests/seeds.rs has the others) would add its
//! own allocations to the targets'.

#[global_allocator]
static ALLOC: secinfer_fuzz::peak::PeakAllocator = secinfer_fuzz::peak::PeakAllocator;

/// Executions per target in CI: many for the cheap decoders, fewer for whole sessions.
fn budget(target: &str) -> u64 {
    match target {
        "handshake_and_server_session" | "client_session" => 40,
        "base_ot" | "noise_records" | "weights" | "gru_hello" | "gru_reply" => 400,
        n if n.starts_with("ot_") => 200,
        "he_galois_keys" => 200,
        "hegc_hello" | "hegc_reply" | "choco_hello" | "ss_request" => 400,
        "she_key_upload" | "she_input" => 2_000,
        "she_reply" => 400,
        "gc_tables_half_gates" | "gc_tables_three_halves" => 2_000,
        "he_public_key" | "he_ciphertext" | "he_seeded_ciphertext" | "he_response" => 2_000,
        _ => 20_000,
    }
}

#[test]
fn every_target_survives_its_bounded_run_without_panic_or_oversized_allocation() {
    // The limit check can fail: an allocation one byte past the stream targets' limit, made
    // inside an execution, is what a run reports as its largest.
    fn oversized(d: &[u8]) {
        let v = vec![d.first().copied().unwrap_or(1); secinfer_fuzz::STREAM_FRAME_LIMIT + 1];
        std::hint::black_box(v);
    }
    let rep = secinfer_fuzz::mutate_and_run(oversized, &[vec![7]], 3, 1);
    assert_eq!(
        rep.largest_allocation,
        secinfer_fuzz::STREAM_FRAME_LIMIT + 1
    );
    assert!(rep.largest_allocation > secinfer_fuzz::allocation_limit("plain_frames"));

    // Hush the default panic printer: panics are counted and reported below.
    std::panic::set_hook(Box::new(|_| {}));
    let mut failures = Vec::new();
    for &(name, f) in secinfer_fuzz::TARGETS {
        let seeds = secinfer_fuzz::seeds(name);
        let rep = secinfer_fuzz::mutate_and_run(f, &seeds, budget(name), 0x5eed);
        let limit = secinfer_fuzz::allocation_limit(name);
        if rep.panic_count > 0 || rep.largest_allocation > limit {
            failures.push(format!(
                "{name}: {} panics in {} runs (first at {:?}), largest allocation {} B at run {} (limit {limit} B)",
                rep.panic_count,
                rep.executions,
                rep.panics.first().map(|p| p.0),
                rep.largest_allocation,
                rep.largest_at,
            ));
        }
        assert_eq!(rep.executions, budget(name));
    }
    let _ = std::panic::take_hook();
    assert!(failures.is_empty(), "{failures:#?}");
}
