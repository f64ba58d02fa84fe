//! prime32 vs prime64 NTT timings and agreement at n = 4096:
//! `cargo run -p secinfer-he --release --example ntt32`. These are tfhe-ntt's plans; the crate's
//! own transform for primes below 2^30 (`src/ntt32.rs`) is timed beside them by
//! `secinfer bench he-ops` (rows `ntt_fwd`/`ntt_inv`).
mod common;
fn t<F: FnMut()>(name: &str, iters: usize, f: F) {
    common::time_best(name, 9, iters, f)
}
fn main() {
    if std::env::args().nth(1).as_deref() == Some("join") {
        join_check();
        return;
    }
    let n = 4096usize;
    for bits in [30u32, 31, 32] {
        let q = secinfer_he::arith::prime_below(bits, 2 * n as u64, &[]).expect("q");
        let p32 = tfhe_ntt::prime32::Plan::try_new(n, q as u32).expect("plan");
        let p64 = tfhe_ntt::prime64::Plan::try_new(n, q).expect("plan");
        let mut a: Vec<u32> = (0..n as u64).map(|i| (i * 12345 % q) as u32).collect();
        let b: Vec<u32> = (0..n as u64).map(|i| (i * 777 % q) as u32).collect();
        let mut acc = vec![0u32; n];
        let mut a64: Vec<u64> = a.iter().map(|&x| x as u64).collect();
        let mut x32 = a.clone();
        p32.fwd(&mut x32);
        p64.fwd(&mut a64);
        let same = x32.iter().zip(&a64).all(|(&x, &y)| x as u64 == y);
        println!(
            "q = {q} ({bits} bits), prime32 fwd == prime64 fwd: {same}, fast red: {}",
            p32.can_use_fast_reduction_code()
        );
        t(&format!("p32 fwd {bits}"), 4000, || p32.fwd(&mut a));
        t(&format!("p32 inv {bits}"), 4000, || p32.inv(&mut a));
        t(&format!("p32 normalize {bits}"), 4000, || {
            p32.normalize(&mut a)
        });
        t(&format!("p32 mul_accumulate {bits}"), 4000, || {
            p32.mul_accumulate(&mut acc, &a, &b)
        });
        t(&format!("p64 fwd {bits}"), 2000, || p64.fwd(&mut a64));
    }
}

/// Two-thread check: `RAYON_NUM_THREADS=2 ... --example ntt32 join` times `rayon::join` of
/// two independent work items against running them one after the other (inside the pool).
fn join_check() {
    let n = 4096usize;
    let q = secinfer_he::arith::prime_below(31, 2 * n as u64, &[]).expect("q") as u32;
    let p = tfhe_ntt::prime32::Plan::try_new(n, q).expect("plan");
    let mut a: Vec<u32> = (0..n as u32).map(|i| i % q).collect();
    let mut b = a.clone();
    for k in [1usize, 4, 8] {
        rayon::join(
            || {
                t(&format!("{k}+{k} NTTs sequential"), 500, || {
                    for _ in 0..k {
                        p.fwd(&mut a);
                    }
                    for _ in 0..k {
                        p.fwd(&mut b);
                    }
                })
            },
            || (),
        );
        let (pa, pb) = (&p, &p);
        let (ra, rb) = (&mut a, &mut b);
        rayon::join(
            || {
                t(&format!("{k}+{k} NTTs under rayon::join"), 500, || {
                    rayon::join(
                        || {
                            for _ in 0..k {
                                pa.fwd(ra);
                            }
                        },
                        || {
                            for _ in 0..k {
                                pb.fwd(rb);
                            }
                        },
                    );
                })
            },
            || (),
        );
    }
}
