#![allow(clippy::unwrap_used)]
mod common;
use common::*;
use secinfer_ss::blocks;

#[test]
#[ignore]
fn probe_costs() {
    let n = 4096usize;
    let x: Vec<u64> = (0..n as u64).map(|v| v * 7919 % 65536).collect();
    macro_rules! probe {
        ($name:expr, $body:expr) => {{
            let r = run2(|ctx, ch| {
                let f: &dyn Fn(&mut secinfer_ss::Ctx, &mut secinfer_net::DynChannel) = &$body;
                f(ctx, ch)
            });
            let c = r.client_cost.online;
            eprintln!(
                "{:>28}: {:8.1} B/item, rounds {}",
                $name,
                (c.bytes_sent + c.bytes_received) as f64 / n as f64,
                c.rounds
            );
        }};
    }
    probe!("cot 64-bit x1", |ctx, ch| {
        blocks::b2a(ctx, ch, &vec![1u8; n], 64).unwrap();
    });
    probe!("cot 1-bit x1 (b2a 1)", |ctx, ch| {
        blocks::b2a(ctx, ch, &vec![1u8; n], 1).unwrap();
    });
    probe!("mux 20", |ctx, ch| {
        blocks::mux(ctx, ch, &vec![1u8; n], &x, 20).unwrap();
    });
    probe!("and", |ctx, ch| {
        blocks::and(ctx, ch, &vec![1u8; n], &vec![1u8; n]).unwrap();
    });
    probe!("millionaire 16", |ctx, ch| {
        blocks::millionaire(ctx, ch, &x, 16).unwrap();
    });
    probe!("msb 20", |ctx, ch| {
        blocks::msb_share(ctx, ch, &x, 20).unwrap();
    });
    probe!("mul_private 32x64", |ctx, ch| {
        blocks::mul_private(ctx, ch, &x, 32, 64).unwrap();
    });
    probe!("lut k8 40", |ctx, ch| {
        blocks::lut(ctx, ch, &x, 8, &vec![3u64; 256], 40).unwrap();
    });
    probe!("trunc exact 64 by 13", |ctx, ch| {
        blocks::trunc_msb0(ctx, ch, &x, 64, 13, true).unwrap();
    });
    probe!("ars 25 by 8", |ctx, ch| {
        blocks::ars(ctx, ch, &x, 25, 8).unwrap();
    });
    probe!("ars 36 by 19", |ctx, ch| {
        blocks::ars(ctx, ch, &x, 36, 19).unwrap();
    });
    probe!("zext msb0 16 to 36", |ctx, ch| {
        let h: Vec<u64> = x.iter().map(|v| v & 0x7fff).collect();
        blocks::zext_msb0(ctx, ch, &h, 16, 36).unwrap();
    });
    probe!("mul_shared 36", |ctx, ch| {
        blocks::mul_shared(ctx, ch, &x, &x, 36).unwrap();
    });
    probe!("rec f20", |ctx, ch| {
        let d: Vec<u64> = x.iter().map(|v| (v << 4) + (1 << 20)).collect();
        blocks::reciprocal(ctx, ch, &d, 22, 20, Default::default()).unwrap();
    });
}
