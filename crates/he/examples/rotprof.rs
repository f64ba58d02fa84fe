//! Profiling loop for one key-switched rotation (perf record --call-graph).
//! `cargo run --release -p secinfer-he --example rotprof -- [n4096] [iters] [rotate|hoisted|lazy|decompose|decompose+lazy|decompose+lazy+moddown|decrypt]`
use secinfer_he::{Params, SecretKey};
fn main() {
    let a: Vec<String> = std::env::args().collect();
    let name = a.get(1).map(|s| s.as_str()).unwrap_or("n4096");
    let iters: usize = a.get(2).and_then(|s| s.parse().ok()).unwrap_or(2000);
    let op = a.get(3).map(|s| s.as_str()).unwrap_or("rotate");
    let params = Params::by_name(name).expect("rotprof");
    let sk = SecretKey::generate(&params);
    let keys = sk.rotation_keys(&[1, 2, 3], false);
    let v: Vec<u64> = (0..params.n() as u64).map(|i| i % params.t()).collect();
    let ct = sk.encrypt(&v).expect("rotprof");
    let h = params.decompose(&ct);
    // On a pool worker, as `secinfer bench he-ops` does (RAYON_NUM_THREADS sets the pool).
    rayon::join(|| run(&params, &sk, &ct, &h, &keys, iters, op), || ());
    let r = params.rotate(&ct, 1, &keys).expect("rotprof");
    let want = secinfer_he::eval::rotate_rows(&v, 1, params.row_len());
    assert_eq!(sk.decrypt(&r).expect("rotprof"), want);
}

fn run(
    params: &Params,
    sk: &SecretKey,
    ct: &secinfer_he::Ciphertext,
    h: &secinfer_he::Decomposed,
    keys: &secinfer_he::GaloisKeys,
    iters: usize,
    op: &str,
) {
    let mut best = f64::INFINITY;
    let c0 = secinfer_he::bench::process_cpu_ns();
    for _ in 0..5 {
        let t0 = std::time::Instant::now();
        for _ in 0..iters {
            match op {
                "rotate" => drop(std::hint::black_box(
                    params.rotate(ct, 1, keys).expect("rotprof"),
                )),
                "hoisted" => drop(std::hint::black_box(
                    params.rotate_hoisted(h, 1, keys).expect("rotprof"),
                )),
                "decompose" => drop(std::hint::black_box(params.decompose(ct))),
                "decrypt" => drop(std::hint::black_box(sk.decrypt(ct).ok())),
                "lazy" => drop(std::hint::black_box(
                    params.rotate_hoisted_ext(h, 1, keys).expect("rotprof"),
                )),
                // A fresh hoisted ciphertext and its first lazy rotation (the one that pays
                // for the slot-order conversion), then its division by P.
                "decompose+lazy" => {
                    let h = params.decompose(ct);
                    drop(std::hint::black_box(
                        params.rotate_hoisted_ext(&h, 1, keys).expect("rotprof"),
                    ))
                }
                "decompose+lazy+moddown" => {
                    let h = params.decompose(ct);
                    let e = params.rotate_hoisted_ext(&h, 1, keys).expect("rotprof");
                    drop(std::hint::black_box(params.mod_down_ext(e)))
                }
                _ => panic!("op"),
            }
        }
        best = best.min(t0.elapsed().as_secs_f64() * 1e6 / iters as f64);
    }
    let cpu = (secinfer_he::bench::process_cpu_ns() - c0) as f64 * 1e-3 / (5 * iters) as f64;
    eprintln!("{op}: {best:.1} µs wall (min of 5 batches), {cpu:.1} µs CPU");
}
