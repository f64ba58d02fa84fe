//! Profiling loop: `cargo run -p secinfer-he --release --example rot_loop`.
fn main() -> Result<(), secinfer_he::HeError> {
    let p = secinfer_he::Params::by_name("n4096")?;
    let sk = secinfer_he::SecretKey::generate(&p);
    let keys = sk.rotation_keys(&[1], false);
    let v: Vec<u64> = (0..p.n() as u64).collect();
    let ct = sk.encrypt(&v)?;
    let start = std::time::Instant::now();
    let iters = 3000;
    for _ in 0..iters {
        std::hint::black_box(p.rotate(&ct, 1, &keys)?);
    }
    println!(
        "{:.1} us/rotation",
        start.elapsed().as_secs_f64() * 1e6 / iters as f64
    );
    Ok(())
}
