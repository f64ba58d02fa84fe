//! Measures the cost model's constants: single-core seconds per boolean gate bootstrap and per
//! shortint lookup, each the mean over 64 operations after one warm-up.
use std::time::Instant;

use tfhe::boolean::server_key::BinaryBooleanGates;

fn main() {
    const N: u32 = 64;
    let (ck, sk) = secinfer_tfhe::generate_keys();
    let (a, b) = (ck.encrypt(true), ck.encrypt(false));
    let mut c = sk.and(&a, &b);
    let t = Instant::now();
    for _ in 0..N {
        c = sk.and(&c, &a);
    }
    let gate = t.elapsed().as_secs_f64() / f64::from(N);
    let (ck, csk) = secinfer_tfhe::pbs::generate_pbs_client_keys();
    let sk = csk.decompress();
    let lut = sk.generate_lookup_table(|v| (v + 1) % 4);
    let mut x = sk.apply_lookup_table(&ck.encrypt(1), &lut);
    let t = Instant::now();
    for _ in 0..N {
        x = sk.apply_lookup_table(&x, &lut);
    }
    let pbs = t.elapsed().as_secs_f64() / f64::from(N);
    println!("gate_s {gate:.5} pbs_s {pbs:.5} (one core, {N} operations each)");
}
