//! Measures one programmable bootstrap (a lookup on a fresh ciphertext) under each 128-bit
//! shortint parameter set of tfhe-rs 1.8.2 that could carry the digit circuit or a wider
//! accumulator: classic KS-PBS at 1 to 4 message bits (2 to 8 bits of lookup input), the KS32
//! atomic pattern at 2_2, and multi-bit PBS (groups 2, 3, 4) at 2_2 and 3_3. Prints, per set,
//! client and server key generation seconds, the seeded server key's bytes, and the mean
//! seconds of a lookup over `--reps` runs after one warm-up, on the calling thread (run it with
//! `RAYON_NUM_THREADS=1` for one core: multi-bit PBS splits its work over threads).
//!
//! `cargo run --release -p secinfer-tfhe --example pbs_params -- [--reps N] [--only NAME]`
use std::time::Instant;

use tfhe::shortint::parameters::v1_8::*;
use tfhe::shortint::parameters::ShortintParameterSet;
use tfhe::shortint::{ClientKey, CompressedServerKey};

fn measure(name: &str, params: ShortintParameterSet, reps: u32) {
    let t = Instant::now();
    let ck = ClientKey::new(params);
    let ck_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let csk = CompressedServerKey::new(&ck);
    let sk_s = t.elapsed().as_secs_f64();
    let key_bytes = secinfer_tfhe::serialized_bytes(&csk).unwrap_or(0);
    let sk = csk.decompress();
    let modulus = sk.message_modulus.0;
    let lut = sk.generate_lookup_table(|v| (v + 1) % modulus);
    let mut x = sk.apply_lookup_table(&ck.encrypt(1), &lut);
    let t = Instant::now();
    for _ in 0..reps {
        x = sk.apply_lookup_table(&x, &lut);
    }
    let pbs_s = t.elapsed().as_secs_f64() / f64::from(reps);
    let want = (1 + u64::from(reps) + 1) % modulus;
    let ok = ck.decrypt(&x) == want;
    println!(
        "{name:<22} lookup_bits {:>2}  pbs_s {pbs_s:.4}  client_keygen_s {ck_s:.1}  \
         server_keygen_s {sk_s:.1}  seeded_key_mb {:.1}  correct {ok}",
        (sk.message_modulus.0 * sk.carry_modulus.0).ilog2(),
        key_bytes as f64 / 1e6
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let flag = |f: &str| {
        args.iter()
            .position(|a| a == f)
            .and_then(|i| args.get(i + 1).cloned())
    };
    let reps: u32 = flag("--reps").and_then(|v| v.parse().ok()).unwrap_or(16);
    let only = flag("--only");
    let sets: Vec<(&str, ShortintParameterSet, u32)> = vec![
        (
            "classic_1_1",
            V1_8_PARAM_MESSAGE_1_CARRY_1_KS_PBS_TUNIFORM_2M128.into(),
            reps,
        ),
        (
            "classic_2_2",
            V1_8_PARAM_MESSAGE_2_CARRY_2_KS_PBS_TUNIFORM_2M128.into(),
            reps,
        ),
        (
            "ks32_2_2",
            V1_8_PARAM_MESSAGE_2_CARRY_2_KS32_PBS_TUNIFORM_2M128.into(),
            reps,
        ),
        (
            "multibit2_2_2",
            V1_8_PARAM_MULTI_BIT_GROUP_2_MESSAGE_2_CARRY_2_KS_PBS_TUNIFORM_2M128.into(),
            reps,
        ),
        (
            "multibit3_2_2",
            V1_8_PARAM_MULTI_BIT_GROUP_3_MESSAGE_2_CARRY_2_KS_PBS_TUNIFORM_2M128.into(),
            reps,
        ),
        (
            "multibit4_2_2",
            V1_8_PARAM_MULTI_BIT_GROUP_4_MESSAGE_2_CARRY_2_KS_PBS_TUNIFORM_2M128.into(),
            reps,
        ),
        (
            "classic_3_3",
            V1_8_PARAM_MESSAGE_3_CARRY_3_KS_PBS_TUNIFORM_2M128.into(),
            reps / 2,
        ),
        (
            "multibit3_3_3",
            V1_8_PARAM_MULTI_BIT_GROUP_3_MESSAGE_3_CARRY_3_KS_PBS_TUNIFORM_2M128.into(),
            reps / 2,
        ),
        (
            "classic_4_4",
            V1_8_PARAM_MESSAGE_4_CARRY_4_KS_PBS_TUNIFORM_2M128.into(),
            2,
        ),
    ];
    for (name, params, n) in sets {
        if only.as_deref().is_none_or(|o| o == name) {
            measure(name, params, n.max(1));
        }
    }
}
