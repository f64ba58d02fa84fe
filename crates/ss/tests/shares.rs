#![allow(clippy::unwrap_used)]
mod common;
use common::*;
use secinfer_ss::reveal::{reveal, share_input, RevealTo};
use secinfer_ss::ring::{decode, encode, mask, Share};
use secinfer_ss::Party;

/// Local linear operations on shares and reveal to both / to one party, at 8, 37 and 64 bits.
#[test]
fn local_ops_and_reveal() {
    for bits in [8u32, 37, 64] {
        let m = mask(bits);
        let x: Vec<u64> = vec![0, 1, m, m >> 1, (m >> 1) + 1, 12345 & m];
        let y: Vec<u64> = vec![m, 1, 1, m >> 1, 7, 0];
        let xr = &x;
        let r = run2(|ctx, ch| {
            // the client owns x, the server owns y
            let xs = share_input(
                ctx,
                ch,
                Party::Client,
                Some(xr).filter(|_| !ctx.is_p0()).map(|v| &v[..]),
                6,
                bits,
            )
            .unwrap();
            let ys = share_input(
                ctx,
                ch,
                Party::Server,
                Some(&y).filter(|_| ctx.is_p0()).map(|v| &v[..]),
                6,
                bits,
            )
            .unwrap();
            let a = Share::new(xs, bits, 0);
            let b = Share::new(ys, bits, 0);
            let p0 = ctx.is_p0();
            let sum = a.add(&b).unwrap().add_const(5, p0).mul_const(3);
            let diff = a.sub(&b).unwrap().neg();
            let both = reveal(ctx, ch, &sum.v, bits, RevealTo::Both).unwrap();
            let only = reveal(ctx, ch, &diff.v, bits, RevealTo::Only(Party::Server)).unwrap();
            (both, only)
        });
        for i in 0..x.len() {
            let want_sum = x[i].wrapping_add(y[i]).wrapping_add(5).wrapping_mul(3) & m;
            assert_eq!(r.client.0.as_ref().unwrap()[i], want_sum);
            assert_eq!(r.server.0.as_ref().unwrap()[i], want_sum);
            assert_eq!(r.server.1.as_ref().unwrap()[i], y[i].wrapping_sub(x[i]) & m);
        }
        assert!(
            r.client.1.is_none(),
            "the client must not learn a server-only reveal"
        );
    }
    // fixed-point encode/decode round trip, signed
    for v in [-8.0, -1.5, -0.0001, 0.0, 0.25, 7.99] {
        assert!((decode(encode(v, 20, 16), 20, 16) - v).abs() <= 2f64.powi(-17));
    }
}
