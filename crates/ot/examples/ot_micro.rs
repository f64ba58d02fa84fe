//! Single-core timings of the OT extension's inner pieces (AES-CTR expansion, fixed-key AES,
//! bit transpose), best of several runs since the machine is shared:
//! `cargo run --release -p secinfer-ot --example ot_micro`.
use secinfer_ot::transpose::transpose128;
use secinfer_ot::{fixed_key_aes, Block, Prg};
use std::time::Instant;

fn best(reps: usize, mut f: impl FnMut()) -> f64 {
    (0..reps)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64()
        })
        .fold(f64::INFINITY, f64::min)
}

fn main() {
    let n = 1usize << 18;
    let mut prg = Prg::from_seed(Block(1));
    let mut buf = vec![Block::ZERO; n];
    let ctr = best(20, || prg.fill_blocks(&mut buf));
    let fk = fixed_key_aes();
    let perm = best(20, || fk.permute_many(&mut buf));
    let mut a = [0u128; 128];
    let tr = best(20, || {
        for blk in buf.chunks_exact(128) {
            for (x, b) in a.iter_mut().zip(blk) {
                *x = b.0;
            }
            transpose128(&mut a);
            std::hint::black_box(&a);
        }
    });
    let ns = |s: f64| s * 1e9 / n as f64;
    println!(
        "one core: AES-CTR {:.2} ns/block, fixed-key π {:.2} ns/block, 128x128 transpose {:.2} ns/row",
        ns(ctr),
        ns(perm),
        ns(tr)
    );
}
