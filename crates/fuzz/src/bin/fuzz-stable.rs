//! Runs fuzz targets on stable Rust for as long as asked: `fuzz-stable [TARGET|all] [EXECUTIONS]
//! [SEED]`. Prints executions, executions per second and panics per target; exits 1 on a panic,
//! writing the first panicking input to `fuzz-crash-<target>.bin`.
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let which = args.get(1).map_or("all", String::as_str);
    let n: u64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(100_000);
    let seed: u64 = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(1);
    std::panic::set_hook(Box::new(|_| {}));
    let mut bad = false;
    for &(name, f) in secinfer_fuzz::TARGETS {
        if which != "all" && which != name {
            continue;
        }
        let seeds = secinfer_fuzz::seeds(name);
        let t = Instant::now();
        let rep = secinfer_fuzz::mutate_and_run(f, &seeds, n, seed);
        let s = t.elapsed().as_secs_f64();
        println!(
            "{name:<30} {:>10} executions {:>9.0}/s {:>6.1} s  panics {}",
            rep.executions,
            rep.executions as f64 / s,
            s,
            rep.panic_count
        );
        if let Some((_, input)) = rep.panics.first() {
            bad = true;
            let _ = std::fs::write(format!("fuzz-crash-{name}.bin"), input);
        }
    }
    std::process::exit(i32::from(bad));
}
