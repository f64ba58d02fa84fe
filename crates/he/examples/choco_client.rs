//! The CHOCO client's per-ciphertext work on the q8 MLP's ring (n = 8192, two 62-bit Q primes,
//! one 23-bit t), step by step: `cargo run -p secinfer-he --release --example choco_client
//! [iters]`. One thread; minimum over 5 batches.
use secinfer_he::bfv::{decode_simd, encode_simd, Response};
use secinfer_he::choco::{finish, RnsParams, FLOOD_STAT_BITS};
use secinfer_he::SecretKey;
mod common;

fn time<F: FnMut()>(name: &str, iters: usize, f: F) {
    common::time_best(name, 5, iters, f)
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
    // The floors: the transforms and the PRG output one encryption and one decryption need.
    let q = p.set().q[0];
    let plan = tfhe_ntt::prime64::Plan::try_new(p.n(), q).expect("plan");
    let mut v: Vec<u64> = (0..p.n() as u64).map(|i| (i * 977) % q).collect();
    time("NTT fwd, 62-bit Q prime", iters, || {
        plan.fwd(std::hint::black_box(&mut v))
    });
    time("NTT inv, 62-bit Q prime", iters, || {
        plan.inv(std::hint::black_box(&mut v))
    });
    let q50 = secinfer_he::arith::prime_below(50, 2 * p.n() as u64, &[]).expect("prime");
    let plan = tfhe_ntt::prime64::Plan::try_new(p.n(), q50).expect("plan");
    let mut v: Vec<u64> = (0..p.n() as u64).map(|i| (i * 977) % q50).collect();
    let ifma = if plan.use_ifma() { "IFMA" } else { "no IFMA" };
    time(&format!("NTT fwd, 50-bit prime ({ifma})"), iters, || {
        plan.fwd(std::hint::black_box(&mut v))
    });
    let mut prg = secinfer_core::Prg::new();
    let mut blocks = vec![secinfer_core::Block::ZERO; p.n()];
    time("AES-CTR, 2n words", iters, || {
        prg.fill_blocks(std::hint::black_box(&mut blocks))
    });
    time("encode_simd", iters, || {
        std::hint::black_box(encode_simd(p, &slots).expect("ok"));
    });
    time("encrypt_poly_seeded", iters, || {
        std::hint::black_box(sk.encrypt_poly_seeded(&m).expect("ok"));
    });
    let ct = sk.encrypt_poly_seeded(&m)?;
    time("SeededCiphertext::to_bytes", iters, || {
        std::hint::black_box(ct.to_bytes());
    });
    time("encrypt total (slots -> bytes)", iters, || {
        std::hint::black_box(sk.encrypt_seeded(&slots).expect("ok").to_bytes());
    });
    let full = sk.encrypt(&slots)?;
    let (resp, _) = finish(p, &pk, &full, FLOOD_STAT_BITS)?;
    let bytes = resp.to_bytes();
    time("Response::from_bytes", iters, || {
        std::hint::black_box(Response::from_bytes(p, &bytes).expect("ok"));
    });
    let r = Response::from_bytes(p, &bytes)?;
    time("decrypt_response_poly", iters, || {
        std::hint::black_box(sk.decrypt_response_poly(&r).expect("ok"));
    });
    let poly = sk.decrypt_response_poly(&r)?;
    time("decode_simd", iters, || {
        std::hint::black_box(decode_simd(p, &poly).expect("ok"));
    });
    time("decrypt total (bytes -> slots)", iters, || {
        let r = Response::from_bytes(p, &bytes).expect("ok");
        std::hint::black_box(sk.decrypt_response(&r).expect("ok"));
    });
    assert_eq!(sk.decrypt_response(&r)?, slots, "round trip");
    println!(
        "response {} B, upload {} B",
        bytes.len(),
        ct.to_bytes().len()
    );
    Ok(())
}
