use secinfer_ot::{AesCipher, Block};
use std::time::Instant;
fn main() {
    let a = AesCipher::new(Block(5));
    let mut v = vec![Block(1); 1 << 20];
    let t = Instant::now();
    for _ in 0..20 { a.encrypt_many(&mut v); }
    let dt = t.elapsed().as_secs_f64();
    println!("bulk: {:.1} M blocks/s", 20.0 * (1 << 20) as f64 / dt / 1e6);
    let mut w = [Block(1); 32];
    let t = Instant::now();
    for _ in 0..(1 << 20) { a.encrypt_many(&mut w); }
    let dt = t.elapsed().as_secs_f64();
    println!("32-block calls: {:.1} M blocks/s", 32.0 * (1 << 20) as f64 / dt / 1e6);
}
#[allow(dead_code)]
fn stats() {}
