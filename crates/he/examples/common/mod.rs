//! What the timing examples share.
use std::time::Instant;

/// Runs `f` once to warm up, then `batches` batches of `iters` calls, and prints the fastest
/// batch's mean in µs per call (the minimum is robust to other load on a shared machine).
pub fn time_best<F: FnMut()>(name: &str, batches: usize, iters: usize, mut f: F) {
    f();
    let mut best = f64::INFINITY;
    for _ in 0..batches {
        let start = Instant::now();
        for _ in 0..iters {
            f();
        }
        best = best.min(start.elapsed().as_secs_f64() * 1e6 / iters as f64);
    }
    println!("{name:40} {best:8.2} us");
}
