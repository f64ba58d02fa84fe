//! Single-threaded timings of the OT extension's inner pieces (AES-CTR expansion, bit
//! transpose, tweakable hash), to see which one bounds throughput:
//! `cargo run --release -p secinfer-ot --example ot_micro`.
use secinfer_ot::transpose::transpose128;
use secinfer_ot::{fixed_key_aes, Block, Prg};
use std::time::Instant;

fn main() {
    let rows = 1usize << 20;
    let mut prg = Prg::from_seed(Block(1));
    let mut cols = vec![Block::ZERO; rows]; // rows/128 blocks × 128 columns
    let t = Instant::now();
    for _ in 0..4 {
        prg.fill_blocks(&mut cols);
    }
    let aes = t.elapsed().as_secs_f64() / 4.0;
    let t = Instant::now();
    let mut a = [0u128; 128];
    for _ in 0..4 {
        for blk in cols.chunks_exact(128) {
            for (x, b) in a.iter_mut().zip(blk) {
                *x = b.0;
            }
            transpose128(&mut a);
            std::hint::black_box(&a);
        }
    }
    let tr = t.elapsed().as_secs_f64() / 4.0;
    let t = Instant::now();
    let fk = fixed_key_aes();
    for _ in 0..4 {
        fk.permute_many(&mut cols);
    }
    let perm = t.elapsed().as_secs_f64() / 4.0;
    let ns = |s: f64| s * 1e9 / rows as f64;
    println!("per OT row, one core: AES-CTR one column-row {:.2} ns (×128 per row: {:.2} ns/OT)", ns(aes) / 128.0, ns(aes));
    println!("AES-CTR {:.2} ns/block, fixed-key π {:.2} ns/block, transpose {:.2} ns/OT", ns(aes), ns(perm), ns(tr));
}
