//! Runs fuzz targets on stable Rust for as long as asked: `fuzz-stable [TARGET|all] [EXECUTIONS]
//! [SEED] [SECONDS]` (SECONDS, if given, stops each target early once it has run that long). Prints per target the executions, executions per second, panics and the largest
//! single allocation an execution made, against the limit the target's decoder is bounded by.
//! Exits 1 on a panic (writing the first panicking input to `fuzz-crash-<target>.bin`) or on an
//! allocation above the limit (its execution index is printed: a rerun with the same seed and
//! index + 1 executions ends on it).
use std::time::Instant;

#[global_allocator]
static ALLOC: secinfer_fuzz::peak::PeakAllocator = secinfer_fuzz::peak::PeakAllocator;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let which = args.get(1).map_or("all", String::as_str);
    let n: u64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(100_000);
    let seed: u64 = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(1);
    let seconds: Option<u64> = args.get(4).and_then(|s| s.parse().ok());
    std::panic::set_hook(Box::new(|_| {}));
    let mut bad = false;
    let mut ran = false;
    for &(name, f) in secinfer_fuzz::TARGETS {
        if which != "all" && which != name {
            continue;
        }
        ran = true;
        let seeds = secinfer_fuzz::seeds(name);
        let t = Instant::now();
        let deadline = seconds.map(|s| t + std::time::Duration::from_secs(s));
        let rep = secinfer_fuzz::mutate_and_run_until(f, &seeds, n, seed, deadline);
        let s = t.elapsed().as_secs_f64();
        let limit = secinfer_fuzz::allocation_limit(name);
        let over = rep.largest_allocation > limit;
        println!(
            "{name:<30} {:>10} executions {:>9.0}/s {:>7.1} s  panics {}  largest allocation {} B (limit {limit} B){}",
            rep.executions,
            rep.executions as f64 / s,
            s,
            rep.panic_count,
            rep.largest_allocation,
            if over {
                format!("  OVER at execution {}", rep.largest_at)
            } else {
                String::new()
            },
        );
        if let Some((_, input)) = rep.panics.first() {
            bad = true;
            let _ = std::fs::write(format!("fuzz-crash-{name}.bin"), input);
        }
        bad |= over;
    }
    if !ran {
        eprintln!("fuzz-stable: no target named {which}");
        std::process::exit(2);
    }
    if !secinfer_fuzz::peak::installed() {
        eprintln!("fuzz-stable: the counting allocator saw nothing; allocations were not measured");
        bad = true;
    }
    std::process::exit(i32::from(bad));
}
