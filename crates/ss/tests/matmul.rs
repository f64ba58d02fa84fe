#![allow(clippy::unwrap_used)]
mod common;
use common::*;
use secinfer_ss::matmul::{matvec_private, MatDims};
use secinfer_ss::ring::{mask, to_signed};
use secinfer_ss::{plan_for, Party};

/// M·v_u mod 2^bits in the clear, v's entries read as v_bits-bit (signed or unsigned) integers.
fn plain(m: &[u64], v: &[u64], d: MatDims, v_bits: u32, signed: bool, bits: u32) -> Vec<u64> {
    let mut out = Vec::new();
    for u in 0..d.count {
        for i in 0..d.rows {
            let mut acc = 0u64;
            for j in 0..d.cols {
                let x = v[u * d.cols + j];
                let x = if signed {
                    to_signed(x, v_bits) as u64
                } else {
                    x
                };
                acc = acc.wrapping_add(m[i * d.cols + j].wrapping_mul(x));
            }
            out.push(acc & mask(bits));
        }
    }
    out
}

/// The shares of the OT product add up to the plaintext product, for signed and unsigned
/// client entries, rows not dividing the frame size, and batches of several vectors.
#[test]
fn matvec_private_equals_plaintext() {
    for (rows, cols, count, v_bits, signed, bits) in [
        (7usize, 5usize, 3usize, 16u32, true, 24u32),
        (100, 13, 1, 24, false, 24),
        (3, 40, 5, 8, true, 40),
        (1, 1, 1, 1, false, 1),
    ] {
        let d = MatDims { rows, cols, count };
        let mut rng = Rng(0xfeed ^ rows as u64);
        let m: Vec<u64> = (0..rows * cols).map(|_| rng.bits(bits)).collect();
        let v: Vec<u64> = (0..count * cols).map(|_| rng.bits(v_bits)).collect();
        let r = run2_real(|ctx, ch| {
            if ctx.is_p0() {
                matvec_private(ctx, ch, &m, &[], d, v_bits, signed, bits).unwrap()
            } else {
                matvec_private(ctx, ch, &[], &v, d, v_bits, signed, bits).unwrap()
            }
        });
        let got = add_shares(&r.client, &r.server, bits);
        assert_eq!(
            got,
            plain(&m, &v, d, v_bits, signed, bits),
            "{d:?} {v_bits} {bits}"
        );
    }
}

/// A dry run counts exactly one OT per entry bit of the client's vectors, from the client's pool.
#[test]
fn matvec_private_plan_counts_one_ot_per_entry_bit() {
    let d = MatDims {
        rows: 4,
        cols: 6,
        count: 2,
    };
    for party in [Party::Client, Party::Server] {
        let (m, v) = if party == Party::Server {
            (vec![0u64; 24], vec![])
        } else {
            (vec![], vec![0u64; 12])
        };
        let p = plan_for(party, |ctx, ch| {
            matvec_private(ctx, ch, &m, &v, d, 10, true, 20)
        })
        .unwrap();
        assert_eq!(p.cots_from_p0, 2 * 6 * 10, "{party:?}");
        assert_eq!(p.cots_from_p1, 0);
    }
}

/// Client entries wider than v_bits are refused with a typed error.
#[test]
fn matvec_private_rejects_wide_entries() {
    let d = MatDims {
        rows: 1,
        cols: 1,
        count: 1,
    };
    let p = plan_for(Party::Client, |ctx, ch| {
        matvec_private(ctx, ch, &[], &[1 << 5], d, 5, false, 10)
    });
    assert_eq!(
        p.err().unwrap().kind(),
        secinfer_ss::ErrorKind::InvalidArgument
    );
}
