#![allow(clippy::unwrap_used)]
mod common;
use common::*;
use secinfer_ss::blocks;
use secinfer_ss::ring::{mask, msb, to_signed};

/// Values to test at `bits`: exhaustive up to 12 bits, else random plus the edge values.
fn values(bits: u32, rng: &mut Rng, n_random: usize) -> Vec<u64> {
    if bits <= 12 {
        return (0..(1u64 << bits)).collect();
    }
    let m = mask(bits);
    let mut v = vec![
        0,
        1,
        m,
        m - 1,
        1 << (bits - 1),
        (1 << (bits - 1)) - 1,
        (1 << (bits - 1)) + 1,
    ];
    v.extend((0..n_random).map(|_| rng.bits(bits)));
    v
}

/// Share splits that hit every wrap case: besides random splits, x1 ∈ {0, 1, max} edges.
fn split_edges(x: &[u64], bits: u32, rng: &mut Rng) -> (Vec<u64>, Vec<u64>) {
    let m = mask(bits);
    let c: Vec<u64> = x
        .iter()
        .enumerate()
        .map(|(i, _)| match i % 5 {
            0 => 0,
            1 => m,
            2 => 1 << (bits - 1),
            _ => rng.bits(bits),
        })
        .collect();
    let s = x
        .iter()
        .zip(&c)
        .map(|(a, b)| a.wrapping_sub(*b) & m)
        .collect();
    (s, c)
}

#[test]
fn millionaire_exhaustive_8_and_random_wide() {
    let mut rng = Rng(7);
    for bits in [1u32, 3, 8, 13, 32, 64] {
        let (a, b): (Vec<u64>, Vec<u64>) = if bits <= 8 {
            let n = 1u64 << bits;
            (0..n * n).map(|k| (k / n, k % n)).unzip()
        } else {
            let m = mask(bits);
            let mut a = vec![0, m, m, 0, 5, m - 1];
            let mut b = vec![0, m, 0, m, 5, m];
            for _ in 0..3000 {
                let x = rng.bits(bits);
                a.push(x);
                // equal high digits, differing low digits, and fully random
                b.push(match rng.next() % 3 {
                    0 => x,
                    1 => (x & !0xF) | (rng.bits(4)),
                    _ => rng.bits(bits),
                });
            }
            (a, b)
        };
        check_millionaire(&a, &b, bits, None);
    }
}

/// The millionaire's XOR-shared output equals a < b for every pair (P0 holds `a`, P1 `b`),
/// with the context's default leaf size or `leaf` bits.
fn check_millionaire(a: &[u64], b: &[u64], bits: u32, leaf: Option<u32>) {
    let r = run2(|ctx, ch| {
        if let Some(m) = leaf {
            ctx.set_mill_leaf_bits(m).unwrap();
        }
        let v = if ctx.is_p0() { a } else { b };
        blocks::millionaire(ctx, ch, v, bits).unwrap()
    });
    let got = xor_shares(&r.client, &r.server);
    for i in 0..a.len() {
        assert_eq!(
            got[i],
            (a[i] < b[i]) as u8,
            "leaf {leaf:?} bits {bits}: {} < {}",
            a[i],
            b[i]
        );
    }
}

/// Every leaf size of the millionaires' on triples (1: half triples; 2–4: random 1-of-2^m
/// OTs), exhaustive at 6 bits and random at 19 (the msb width of the default formats), with
/// the correlations made on demand.
#[cfg(not(feature = "test-dealer"))]
#[test]
fn millionaire_every_leaf_size() {
    let mut rng = Rng(17);
    for leaf in 1u32..=4 {
        for bits in [1u32, 2, 5, 6, 19] {
            let (a, b): (Vec<u64>, Vec<u64>) = if bits <= 6 {
                let n = 1u64 << bits;
                (0..n * n).map(|k| (k / n, k % n)).unzip()
            } else {
                (0..2000)
                    .map(|_| {
                        let x = rng.bits(bits);
                        (
                            x,
                            if rng.next() & 1 == 0 {
                                x ^ rng.bits(3)
                            } else {
                                rng.bits(bits)
                            },
                        )
                    })
                    .unzip()
            };
            check_millionaire(&a, &b, bits, Some(leaf));
        }
    }
}

#[test]
fn and_b2a_mux() {
    let mut rng = Rng(11);
    let n = 4000;
    let x: Vec<u8> = (0..n).map(|_| (rng.next() & 1) as u8).collect();
    let y: Vec<u8> = (0..n).map(|_| (rng.next() & 1) as u8).collect();
    let xc: Vec<u8> = (0..n).map(|_| (rng.next() & 1) as u8).collect();
    let yc: Vec<u8> = (0..n).map(|_| (rng.next() & 1) as u8).collect();
    let xs = xor_shares(&x, &xc);
    let ys = xor_shares(&y, &yc);
    for bits in [1u32, 8, 37, 64] {
        let v: Vec<u64> = (0..n)
            .map(|i| {
                if i < 4 {
                    [0, 1, mask(bits), 1 << (bits - 1)][i]
                } else {
                    rng.bits(bits)
                }
            })
            .collect();
        let (vs, vc) = split(&v, bits, &mut rng);
        let r = run2(|ctx, ch| {
            let (xm, ym, vm) = if ctx.is_p0() {
                (&xs, &ys, &vs)
            } else {
                (&xc, &yc, &vc)
            };
            let z = blocks::and(ctx, ch, xm, ym).unwrap();
            let a = blocks::b2a(ctx, ch, xm, bits).unwrap();
            let mx = blocks::mux(ctx, ch, xm, vm, bits).unwrap();
            (z, a, mx)
        });
        let z = xor_shares(&r.client.0, &r.server.0);
        let a = add_shares(&r.client.1, &r.server.1, bits);
        let mx = add_shares(&r.client.2, &r.server.2, bits);
        for i in 0..n {
            assert_eq!(z[i], x[i] & y[i]);
            assert_eq!(a[i], x[i] as u64);
            assert_eq!(mx[i], if x[i] == 1 { v[i] } else { 0 }, "mux bits {bits}");
        }
    }
}

#[test]
fn msb_wrap_relu_exhaustive_and_random() {
    let mut rng = Rng(3);
    for bits in [2u32, 10, 12, 16, 31, 64] {
        let x = values(bits, &mut rng, 3000);
        let (xs, xc) = split_edges(&x, bits, &mut rng);
        let r = run2(|ctx, ch| {
            let xm = mine(ctx, &xs, &xc);
            let m = blocks::msb_share(ctx, ch, xm, bits).unwrap();
            let w = blocks::wrap(ctx, ch, xm, bits).unwrap();
            let (m2, w2) = blocks::msb_and_wrap(ctx, ch, xm, bits).unwrap();
            let re = blocks::relu(ctx, ch, xm, bits).unwrap();
            (m, w, m2, w2, re)
        });
        let m = xor_shares(&r.client.0, &r.server.0);
        let w = xor_shares(&r.client.1, &r.server.1);
        let m2 = xor_shares(&r.client.2, &r.server.2);
        let w2 = xor_shares(&r.client.3, &r.server.3);
        let re = add_shares(&r.client.4, &r.server.4, bits);
        for i in 0..x.len() {
            let wrap = ((xs[i] as u128 + xc[i] as u128) >> bits) as u8;
            assert_eq!(m[i], msb(x[i], bits), "msb bits {bits} x {}", x[i]);
            assert_eq!(m2[i], msb(x[i], bits));
            assert_eq!(w[i], wrap, "wrap bits {bits}");
            assert_eq!(w2[i], wrap, "msb_and_wrap's wrap bits {bits}");
            let want = if msb(x[i], bits) == 1 { 0 } else { x[i] };
            assert_eq!(re[i], want, "relu bits {bits}");
        }
    }
}

#[test]
fn extensions_and_truncations() {
    let mut rng = Rng(5);
    for (bits, to) in [(8u32, 20u32), (12, 12), (16, 40), (40, 64), (63, 64)] {
        let x = values(bits, &mut rng, 3000);
        let (xs, xc) = split_edges(&x, bits, &mut rng);
        let t = (bits / 3).max(1);
        let r = run2(|ctx, ch| {
            let xm = mine(ctx, &xs, &xc);
            let z = blocks::zext(ctx, ch, xm, bits, to).unwrap();
            let s = blocks::sext(ctx, ch, xm, bits, to).unwrap();
            let tr = blocks::trunc_reduce(ctx, ch, xm, bits, t).unwrap();
            let a = blocks::ars(ctx, ch, xm, bits, t).unwrap();
            (z, s, tr, a)
        });
        let z = add_shares(&r.client.0, &r.server.0, to);
        let s = add_shares(&r.client.1, &r.server.1, to);
        let tr = add_shares(&r.client.2, &r.server.2, bits - t);
        let a = add_shares(&r.client.3, &r.server.3, bits);
        for i in 0..x.len() {
            assert_eq!(z[i], x[i], "zext {bits}->{to}");
            assert_eq!(
                s[i],
                (to_signed(x[i], bits) as u64) & mask(to),
                "sext {bits}->{to} x {}",
                x[i]
            );
            assert_eq!(tr[i], x[i] >> t, "trunc_reduce {bits} by {t}");
            assert_eq!(
                a[i],
                ((to_signed(x[i], bits) >> t) as u64) & mask(bits),
                "ars {bits} by {t}"
            );
        }
    }
}

#[test]
fn known_msb_extension_and_truncation() {
    let mut rng = Rng(9);
    for bits in [10u32, 12, 24, 64] {
        // MSB 0 values
        let x: Vec<u64> = values(bits, &mut rng, 3000)
            .into_iter()
            .map(|v| v & mask(bits - 1))
            .filter(|v| *v < (1 << (bits - 1)) - 8)
            .collect();
        let (xs, xc) = split_edges(&x, bits, &mut rng);
        let t = 3u32;
        let to = (bits + 7).min(64);
        let r = run2(|ctx, ch| {
            let xm = mine(ctx, &xs, &xc);
            let z = blocks::zext_msb0(ctx, ch, xm, bits, to).unwrap();
            let e = blocks::trunc_msb0(ctx, ch, xm, bits, t, true).unwrap();
            let a = blocks::trunc_msb0(ctx, ch, xm, bits, t, false).unwrap();
            (z, e, a)
        });
        let z = add_shares(&r.client.0, &r.server.0, to);
        let e = add_shares(&r.client.1, &r.server.1, bits);
        let a = add_shares(&r.client.2, &r.server.2, bits);
        for i in 0..x.len() {
            assert_eq!(
                z[i], x[i],
                "zext_msb0 {bits}->{to} x {} shares {} {}",
                x[i], xs[i], xc[i]
            );
            assert_eq!(
                e[i],
                x[i] >> t,
                "exact trunc bits {bits} x {} shares {} {}",
                x[i],
                xs[i],
                xc[i]
            );
            let fl = x[i] >> t;
            assert!(a[i] == fl || a[i] == fl + 1, "approx trunc {bits}");
        }
    }
}

/// The extension of MSB-0 values with P0's scalar products riding its COTs: every extension
/// equals the value and every product k·x mod 2^to, for the tail only, with scalars at the
/// ring's ends (0, 1, −1, a large odd one), share splits at the edges, and rings 16 → 36 (the
/// FastGRNN update) and 12 → 64; the products cost no round beyond the extension's.
#[test]
fn known_msb_extension_with_scalar_products() {
    let mut rng = Rng(17);
    for (bits, to) in [(16u32, 36u32), (12, 64)] {
        let x: Vec<u64> = values(bits, &mut rng, 600)
            .into_iter()
            .map(|v| v & mask(bits - 1))
            .collect();
        let (xs, xc) = split_edges(&x, bits, &mut rng);
        let tail = x.len() / 2;
        let k: Vec<u64> = vec![0, 1, mask(to), 0x5_dead_beef & mask(to)];
        let r = run2(|ctx, ch| {
            let xm = mine(ctx, &xs, &xc);
            let ks: &[u64] = if ctx.is_p0() { &k } else { &[] };
            blocks::zext_msb0_times(ctx, ch, xm, bits, to, tail, ks, k.len()).unwrap()
        });
        let ext = add_shares(&r.client.0, &r.server.0, to);
        assert_eq!(ext, x, "extension {bits} -> {to}");
        let head = x.len() - tail;
        for (s, ks) in k.iter().enumerate() {
            let got = add_shares(&r.client.1[s], &r.server.1[s], to);
            let want: Vec<u64> = x[head..]
                .iter()
                .map(|v| v.wrapping_mul(*ks) & mask(to))
                .collect();
            assert_eq!(got, want, "k = {ks:#x}, {bits} -> {to}");
        }
        let plain = run2(|ctx, ch| {
            let xm = mine(ctx, &xs, &xc);
            blocks::zext_msb0(ctx, ch, xm, bits, to).unwrap()
        });
        assert_eq!(r.client_cost.online.rounds, plain.client_cost.online.rounds);
    }
}

#[test]
fn products() {
    let mut rng = Rng(13);
    let n = 2000;
    for bits in [8u32, 16, 37, 64] {
        let x: Vec<u64> = (0..n)
            .map(|i| {
                if i < 3 {
                    [0, 1, mask(bits)][i]
                } else {
                    rng.bits(bits)
                }
            })
            .collect();
        let y: Vec<u64> = (0..n)
            .map(|i| {
                if i < 3 {
                    [mask(bits), 0, mask(bits)][i]
                } else {
                    rng.bits(bits)
                }
            })
            .collect();
        let (xs, xc) = split(&x, bits, &mut rng);
        let (ys, yc) = split(&y, bits, &mut rng);
        let r = run2(|ctx, ch| {
            let (xm, ym) = if ctx.is_p0() { (&xs, &ys) } else { (&xc, &yc) };
            let s = blocks::mul_shared(ctx, ch, xm, ym, bits).unwrap();
            // private × private: server's x times client's y
            let priv_v = if ctx.is_p0() { &x } else { &y };
            let p = blocks::mul_private(ctx, ch, priv_v, bits, bits).unwrap();
            (s, p)
        });
        let s = add_shares(&r.client.0, &r.server.0, bits);
        let p = add_shares(&r.client.1, &r.server.1, bits);
        for i in 0..n {
            let want = x[i].wrapping_mul(y[i]) & mask(bits);
            assert_eq!(s[i], want, "mul_shared {bits}");
            assert_eq!(p[i], want, "mul_private {bits}");
        }
    }
    // non-uniform: x ∈ Z_2^bx, y ∈ Z_2^by with MSB 0, product in Z_2^(bx+by)
    for (bx, by) in [(8u32, 12u32), (20, 30), (31, 33)] {
        let x: Vec<u64> = (0..n)
            .map(|i| {
                if i == 0 {
                    mask(bx - 1)
                } else {
                    rng.bits(bx - 1)
                }
            })
            .collect();
        let y: Vec<u64> = (0..n)
            .map(|i| {
                if i == 0 {
                    mask(by - 1)
                } else {
                    rng.bits(by - 1)
                }
            })
            .collect();
        let (xs, xc) = split_edges(&x, bx, &mut rng);
        let (ys, yc) = split_edges(&y, by, &mut rng);
        let out = bx + by;
        let r = run2(|ctx, ch| {
            let (xm, ym) = if ctx.is_p0() { (&xs, &ys) } else { (&xc, &yc) };
            blocks::mul_nonuniform_msb0(ctx, ch, xm, bx, ym, by, out).unwrap()
        });
        let p = add_shares(&r.client, &r.server, out);
        for i in 0..n {
            assert_eq!(
                p[i],
                (x[i] as u128 * y[i] as u128) as u64 & mask(out),
                "nonuniform {bx}x{by}"
            );
        }
    }
}

/// Several tables at one index: packed into one message (3 × 20 bits) and one OT row per table
/// (3 × 40 bits over 300 elements: 900 rows of 1-of-256, frames of 256 rows, so frames start
/// in the middle of an element's rows), against the plaintext tables.
#[test]
fn lut_tables_packed_and_row_per_table() {
    let mut rng = Rng(23);
    let k = 8u32;
    let idx: Vec<u64> = (0..256u64).chain((0..44).map(|_| rng.bits(8))).collect();
    let (is, ic) = split(&idx, k, &mut rng);
    for w in [20u32, 40] {
        let tables: Vec<Vec<u64>> = (0..3)
            .map(|_| (0..256).map(|_| rng.bits(w)).collect())
            .collect();
        let (is, ic, t2) = (is.clone(), ic.clone(), tables.clone());
        let r = run2(move |ctx, ch| {
            let refs: Vec<&[u64]> = t2.iter().map(|t| &t[..]).collect();
            blocks::lut_tables(ctx, ch, mine(ctx, &is, &ic), k, &refs, &[w; 3]).unwrap()
        });
        for (q, t) in tables.iter().enumerate() {
            let v = add_shares(&r.client[q], &r.server[q], w);
            for (i, x) in idx.iter().enumerate() {
                assert_eq!(v[i], t[*x as usize], "width {w} table {q} element {i}");
            }
        }
    }
}

#[test]
fn lut_digits_reciprocal() {
    let mut rng = Rng(17);
    // LUT exhaustive at k = 8 with random tables
    let k = 8u32;
    let table: Vec<u64> = (0..256).map(|_| rng.bits(40)).collect();
    let idx: Vec<u64> = (0..256u64).chain((0..500).map(|_| rng.bits(8))).collect();
    let (is, ic) = split(&idx, k, &mut rng);
    // digit decomposition, 20 bits into 8-bit digits
    let x: Vec<u64> = values(20, &mut rng, 3000);
    let (xs, xc) = split_edges(&x, 20, &mut rng);
    let r = run2(|ctx, ch| {
        let l = blocks::lut(ctx, ch, mine(ctx, &is, &ic), k, &table, 40).unwrap();
        let d = blocks::digit_decompose(ctx, ch, mine(ctx, &xs, &xc), 20, 8).unwrap();
        (l, d)
    });
    let l = add_shares(&r.client.0, &r.server.0, 40);
    for i in 0..idx.len() {
        assert_eq!(l[i], table[idx[i] as usize]);
    }
    for (kk, ((dc, w), (ds, _))) in r.client.1.iter().zip(&r.server.1).enumerate() {
        let d = add_shares(dc, ds, *w);
        for i in 0..x.len() {
            assert_eq!(d[i], (x[i] >> (8 * kk)) & mask(*w), "digit {kk}");
        }
    }
    // reciprocal on [1, 2): exhaustive over 2^12 inputs at scale 12... and random at scale 20
    for f in [12u32, 20] {
        let bits = f + 2;
        let d: Vec<u64> = if f == 12 {
            (0..(1u64 << f)).map(|v| v + (1 << f)).collect()
        } else {
            (0..3000).map(|_| rng.bits(f) + (1 << f)).collect()
        };
        let (ds, dc) = split_edges(&d, bits, &mut rng);
        let r = run2(|ctx, ch| {
            blocks::reciprocal(ctx, ch, mine(ctx, &ds, &dc), bits, f, Default::default()).unwrap()
        });
        let (rw, fw) = (r.client.1, r.client.2);
        let w = add_shares(&r.client.0, &r.server.0, rw);
        let maxerr = reciprocal_max_err(&d, &w, f, fw);
        // segment error ≤ 2^-19.x plus the offset table's quantisation at scale f + 2: rounded
        // up (≤ 1 unit) and P0's folded S·Δ0 term rounded (≤ 1/2 unit)
        let bound = 2f64.powi(-18) + 1.5 * 2f64.powi(-(f as i32) - 2);
        assert!(
            maxerr < bound,
            "reciprocal max abs error {maxerr:e} at f {f} (bound {bound:e})"
        );
    }
}

/// OPAF sigmoid's compact reciprocal (RecParams::delta_frac, carry_bits, product_frac,
/// below_one) against 1/d over its promised domain d ∈ [1 + 2^−12, 2 − 2^−18], with many
/// inputs just above segment boundaries so that the approximate carry misses some carries
/// (counted from the shares below: the test fails if none was missed).
#[test]
fn reciprocal_compact_options() {
    let mut rng = Rng(29);
    let (f, k, out) = (25u32, 6u32, 16u32);
    let bits = f + 2;
    let p = blocks::RecParams {
        k,
        offset_frac: Some(out + 3),
        delta_frac: Some(out + 4),
        carry_bits: Some(blocks::rec_carry_bits(k, 11.6)),
        product_frac: Some(out + 8),
        below_one: true,
        ..Default::default()
    };
    assert_eq!(p.carry_bits, Some(8));
    let lo = (1u64 << f) + (1u64 << (f - 12));
    let hi = (2u64 << f) - (1u64 << (f - 18));
    let mut d: Vec<u64> = vec![lo, lo + 1, hi, hi - 1, (3u64 << f) / 2];
    // just above and below each segment boundary, several times each (fresh share splits)
    for j in 1..(1u64 << k) {
        let b = (1u64 << f) + (j << (f - k));
        for _ in 0..24 {
            d.push(b + rng.bits(f - 14));
            d.push(b - 1 - rng.bits(4));
        }
    }
    d.extend((0..3000).map(|_| lo + rng.bits(f) % (hi - lo)));
    let (ds, dc) = split_edges(&d, bits, &mut rng);
    // Which elements take the approximate carry's miss (the protocol's own arithmetic).
    let q = f - (out + 4);
    let t = out + 4 - k;
    let missed = (0..d.len())
        .filter(|&i| {
            let e0 = ((ds[i] + (1u64 << (q + 1)) - 2) & mask(bits)) >> q;
            let e1 = dc[i] >> q;
            let (a, b) = (e0 & mask(t), e1 & mask(t));
            a + b >= 1 << t && (a >> (t - 8)) + (b >> (t - 8)) < 1 << 8
        })
        .count();
    assert!(missed > 0, "no missed carry exercised");
    let r = run2(|ctx, ch| blocks::reciprocal(ctx, ch, mine(ctx, &ds, &dc), bits, f, p).unwrap());
    let (rw, fw) = (r.client.1, r.client.2);
    assert_eq!((rw, fw), (out + 9, out + 8));
    let w = add_shares(&r.client.0, &r.server.0, rw);
    let maxerr = reciprocal_max_err(&d, &w, f, fw);
    // segment error h'²/8 at d = 1 (h' = 2^−6 plus the 2^−14 extension), the offset rounded up
    // (2^−19) and P0's folded S·Δ0 (2^−20), the dropped bits (±2^−20 at a slope ≤ 1), the
    // slope's rounding (2^−13 × Δ < 2^−6) and the truncated products ([0, 15) units of 2^−24)
    let h = 2f64.powi(-6) + 2f64.powi(-14);
    let bound = h * h / 8.0
        + 2f64.powi(-19)
        + 2.0 * 2f64.powi(-20)
        + 2f64.powi(-19)
        + 15.0 * 2f64.powi(-24);
    let total = d.len();
    eprintln!(
        "compact reciprocal: max abs error {maxerr:e} (bound {bound:e}), \
         {missed} missed carries of {total}"
    );
    assert!(
        maxerr < bound,
        "compact reciprocal max abs error {maxerr:e} (bound {bound:e})"
    );
}

#[test]
fn rounds_do_not_depend_on_n() {
    let mut rounds = Vec::new();
    for n in [1usize, 300] {
        let x: Vec<u64> = (0..n as u64).collect();
        let r = run2(|ctx, ch| {
            let m = blocks::msb_share(ctx, ch, &x, 32).unwrap();
            blocks::mux(ctx, ch, &m, &x, 32).unwrap()
        });
        rounds.push(r.client_cost.online.rounds);
    }
    assert_eq!(rounds[0], rounds[1]);
}

/// Largest |w/2^fw − 2^f/d| over the inputs d (values at scale f) and the reciprocal's reconstructed
/// outputs w (at scale fw).
fn reciprocal_max_err(d: &[u64], w: &[u64], f: u32, fw: u32) -> f64 {
    d.iter()
        .zip(w)
        .map(|(&di, &wi)| {
            let real = (1u64 << f) as f64 / di as f64;
            (wi as f64 / (fw as f64).exp2() - real).abs()
        })
        .fold(0.0, f64::max)
}
