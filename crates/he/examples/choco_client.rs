//! The CHOCO client's per-ciphertext work on the q8 MLP's ring (n = 8192, two 62-bit Q primes,
//! one 23-bit t), step by step: `cargo run -p secinfer-he --release --example choco_client
//! [iters]`. One thread; minimum over 5 batches.
use secinfer_he::bfv::{decode_simd, encode_simd, Response};
use secinfer_he::choco::{finish, RnsParams, FLOOD_STAT_BITS};
use secinfer_he::SecretKey;
use std::time::Instant;

fn time<F: FnMut()>(name: &str, iters: usize, mut f: F) {
    f();
    let mut best = f64::INFINITY;
    for _ in 0..5 {
        let t = Instant::now();
        for _ in 0..iters {
            f();
        }
        best = best.min(t.elapsed().as_secs_f64() * 1e6 / iters as f64);
    }
    println!("{name:32} {best:9.1} us");
}

fn main() -> Result<(), secinfer_he::HeError> {
    let iters: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(200);
    let rns = RnsParams::with_prime_bits(1, 23, 8192, 2)?;
    let p = &rns.sets()[0];
    let sk = SecretKey::generate(p);
    let pk = sk.public_key();
    let t = p.t();
    let slots: Vec<u64> = (0..p.n() as u64).map(|i| (i * 7919 + 13) % t).collect();
    let m = encode_simd(p, &slots)?;
    {
        let q = p.set().q[0];
        let plan = tfhe_ntt::prime64::Plan::try_new(p.n(), q).unwrap();
        let mut v: Vec<u64> = (0..p.n() as u64).map(|i| (i * 977) % q).collect();
        time("raw tfhe-ntt fwd 62-bit", iters, || plan.fwd(std::hint::black_box(&mut v)));
        time("raw tfhe-ntt inv 62-bit", iters, || plan.inv(std::hint::black_box(&mut v)));
        let w = v.clone();
        time("raw mul_assign_normalize", iters, || plan.mul_assign_normalize(std::hint::black_box(&mut v), &w));
        let q50 = secinfer_he::arith::prime_below(50, 2 * p.n() as u64, &[]).unwrap();
        let plan = tfhe_ntt::prime64::Plan::try_new(p.n(), q50).unwrap();
        println!("ifma {}", plan.use_ifma());
        let mut v: Vec<u64> = (0..p.n() as u64).map(|i| (i * 977) % q50).collect();
        time("raw tfhe-ntt fwd 50-bit", iters, || plan.fwd(std::hint::black_box(&mut v)));
        time("raw tfhe-ntt inv 50-bit", iters, || plan.inv(std::hint::black_box(&mut v)));
        let q30 = secinfer_he::arith::prime_below(30, 2 * p.n() as u64, &[]).unwrap() as u32;
        let plan = tfhe_ntt::prime32::Plan::try_new(p.n(), q30).unwrap();
        let mut v: Vec<u32> = (0..p.n() as u32).map(|i| (i * 977) % q30).collect();
        time("raw tfhe-ntt fwd 30-bit (32)", iters, || plan.fwd(std::hint::black_box(&mut v)));
        let mut buf = vec![0u8; 20];
        let mut prg = secinfer_core::Prg::new();
        let mut blocks = vec![secinfer_core::Block::ZERO; 8192];
        time("aes 8192 blocks (128 KiB)", iters, || prg.fill_blocks(std::hint::black_box(&mut blocks)));
        let _ = &mut buf;
    }
    time("encode_simd", iters, || {
        std::hint::black_box(encode_simd(p, &slots).unwrap());
    });
    time("encrypt_poly_seeded", iters, || {
        std::hint::black_box(sk.encrypt_poly_seeded(&m).unwrap());
    });
    let ct = sk.encrypt_poly_seeded(&m)?;
    time("SeededCiphertext::to_bytes", iters, || {
        std::hint::black_box(ct.to_bytes());
    });
    time("encrypt total (slots -> bytes)", iters, || {
        std::hint::black_box(sk.encrypt_seeded(&slots).unwrap().to_bytes());
    });
    let full = sk.encrypt(&slots)?;
    let (resp, _) = finish(p, &pk, &full, FLOOD_STAT_BITS)?;
    let bytes = resp.to_bytes();
    time("Response::from_bytes", iters, || {
        std::hint::black_box(Response::from_bytes(p, &bytes).unwrap());
    });
    let r = Response::from_bytes(p, &bytes)?;
    time("decrypt_response_poly", iters, || {
        std::hint::black_box(sk.decrypt_response_poly(&r).unwrap());
    });
    let poly = sk.decrypt_response_poly(&r)?;
    time("decode_simd", iters, || {
        std::hint::black_box(decode_simd(p, &poly).unwrap());
    });
    time("decrypt total (bytes -> slots)", iters, || {
        let r = Response::from_bytes(p, &bytes).unwrap();
        std::hint::black_box(sk.decrypt_response(&r).unwrap());
    });
    assert_eq!(sk.decrypt_response(&r)?, slots, "round trip");
    println!("response {} B, upload {} B", bytes.len(), ct.to_bytes().len());
    Ok(())
}
