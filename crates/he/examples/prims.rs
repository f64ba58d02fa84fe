//! Primitive timings: `cargo run -p secinfer-he --release --example prims`.
mod common;
fn t<F: FnMut()>(name: &str, iters: usize, f: F) {
    common::time_best(name, 7, iters, f)
}
fn main() {
    let n = 4096;
    let q = secinfer_he::arith::prime_below(62, 2 * n as u64, &[]).expect("q");
    let plan = tfhe_ntt::prime64::Plan::try_new(n, q).expect("plan");
    let mut a: Vec<u64> = (0..n as u64).map(|i| i * 12345 % q).collect();
    let b: Vec<u64> = (0..n as u64).map(|i| i * 777 % q).collect();
    let mut acc = vec![0u64; n];
    t("fwd", 2000, || plan.fwd(&mut a));
    t("inv", 2000, || plan.inv(&mut a));
    t("normalize", 2000, || plan.normalize(&mut a));
    t("mul_accumulate", 2000, || {
        plan.mul_accumulate(&mut acc, &a, &b)
    });
    t("alloc zero 64KB", 2000, || {
        std::hint::black_box(vec![0u64; 2 * n]);
    });
    let perm: Vec<u32> = (0..n as u32).map(|i| (i * 5 + 3) % n as u32).collect();
    t("permute", 2000, || {
        let v: Vec<u64> = perm.iter().map(|&p| a[p as usize]).collect();
        std::hint::black_box(v);
    });
}
