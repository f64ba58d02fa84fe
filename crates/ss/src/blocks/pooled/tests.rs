//! Every pooled block over real pooled OTs (IKNP from base OTs) between two simulated parties,
//! against its plaintext definition.
#![allow(clippy::unwrap_used)]
use super::*;
use secinfer_net::simulate;
use secinfer_ot::Prg;

fn bit_vec(v: u64, w: usize) -> Vec<bool> {
    (0..w).map(|i| (v >> i) & 1 == 1).collect()
}

fn sign_extend(v: u64, bits: usize) -> i64 {
    let sh = 64 - bits;
    ((v << sh) as i64) >> sh
}

fn pack(bits: &[bool]) -> Vec<u8> {
    let mut out = vec![0u8; bits.len().div_ceil(8)];
    for (i, &b) in bits.iter().enumerate() {
        set_bit(&mut out, i, b);
    }
    out
}

fn unpack(buf: &[u8], n: usize) -> Vec<bool> {
    (0..n).map(|i| get_bit(buf, i)).collect()
}

/// `b2a` against plaintext: random and extreme L-bit words from XOR shares to additive shares
/// of their sign extension mod 2^k, by the split and the sender-first OT.
#[test]
fn b2a_equals_sign_extension_mod_2_k() {
    for (l, k, early) in [
        (20usize, 27usize, false),
        (20, 32, false),
        (8, 8, false),
        (1, 5, false),
        (20, 27, true),
        (16, 32, true),
        (8, 8, true),
        (1, 5, true),
    ] {
        let mut prg = Prg::from_seed(Block(0xb2a0 + (l * 100 + k) as u128));
        let n = 200;
        let mut xs: Vec<u64> = (0..n)
            .map(|_| prg.next_block().low_u64() & ring_mask(l))
            .collect();
        xs[0] = ring_mask(l);
        xs[1] = 1 << (l - 1);
        xs[2] = 0;
        let a: Vec<u64> = (0..n)
            .map(|_| prg.next_block().low_u64() & ring_mask(l))
            .collect();
        let bits = |v: &[u64]| -> Vec<bool> { v.iter().flat_map(|&x| bit_vec(x, l)).collect() };
        let srv = bits(&a);
        let cli = bits(&xs.iter().zip(&a).map(|(x, a)| x ^ a).collect::<Vec<_>>());
        let run = simulate(
            move |ch| {
                let mut r = PooledOtReceiver::setup(ch, &mut Prg::new())?;
                b2a(Err(&mut r), ch, &cli, l, k, early)
            },
            move |ch| {
                let mut s = PooledOtSender::setup(ch, &mut Prg::new())?;
                b2a(Ok(&mut s), ch, &srv, l, k, early)
            },
        );
        let c = run.client.output.unwrap_or_else(|e| panic!("client: {e}"));
        let s = run.server.output.unwrap_or_else(|e| panic!("server: {e}"));
        for i in 0..n {
            let want = (sign_extend(xs[i], l) as u64) & ring_mask(k);
            assert_eq!(
                c[i].wrapping_add(s[i]) & ring_mask(k),
                want,
                "x {} ({l}, {k}, early {early})",
                xs[i]
            );
        }
    }
    // A bit count that is not a whole number of words is refused.
    assert!(matches!(
        b2a_deltas(&[true; 7], 4, 8),
        Err(SsError::InvalidArgument(_))
    ));
}

/// The multiplexer in both directions over real pooled OTs: for random gates g (XOR-shared,
/// `gb` bits, unsigned or with a sign bit) and words v (additively shared mod 2^pw), the sum of
/// both parties' outputs is g·v mod 2^pw.
#[test]
fn mux_equals_the_product() {
    for (gb, pw, signed) in [(7usize, 27usize, false), (8, 27, true), (13, 32, false)] {
        let n = 150;
        let mut prg = Prg::from_seed(Block(0x3a + gb as u128));
        let pm = ring_mask(pw);
        let mut rnd = |m: u64| prg.next_block().low_u64() & m;
        let g: Vec<u64> = (0..n).map(|_| rnd(ring_mask(gb))).collect();
        let gs: Vec<u64> = (0..n).map(|_| rnd(ring_mask(gb))).collect();
        let v: Vec<u64> = (0..n).map(|_| rnd(pm)).collect();
        let vs: Vec<u64> = (0..n).map(|_| rnd(pm)).collect();
        // Server: bits gs, word share vs; client: bits g ⊕ gs, word v − vs.
        let bits = |x: &[u64]| -> Vec<bool> { x.iter().flat_map(|&w| bit_vec(w, gb)).collect() };
        let srv_bits = bits(&gs);
        let cli_bits = bits(&g.iter().zip(&gs).map(|(a, b)| a ^ b).collect::<Vec<_>>());
        let cli_v: Vec<u64> = v
            .iter()
            .zip(&vs)
            .map(|(a, b)| a.wrapping_sub(*b) & pm)
            .collect();
        let weights = move |v: &[u64]| -> Vec<u64> {
            let mut w = Vec::with_capacity(v.len() * gb);
            for &vi in v {
                for j in 0..gb {
                    let x = if signed && j == gb - 1 {
                        vi.wrapping_neg()
                    } else {
                        vi
                    };
                    w.push(x.wrapping_shl(j as u32) & pm);
                }
            }
            w
        };
        let (sw, cw) = (weights(&vs), weights(&cli_v));
        let m = n * gb;
        let run = simulate(
            move |ch| {
                // The client receives on the server's pool and sends on its own.
                let mut r = PooledOtReceiver::setup(ch, &mut Prg::new())?;
                let mut s = PooledOtSender::setup(ch, &mut Prg::new())?;
                let pr = s.recv_choices(ch, m)?;
                let pf = r.send_choices(ch, &cli_bits)?;
                ch.flush()?;
                let y = r.recv_correlated_answer(ch, pf, pw as u32)?;
                let d = mux_deltas(&cw, &cli_bits, pw);
                let x = s.send_correlated_answer(ch, pr, &d, pw as u32)?;
                ch.flush()?;
                mux_combine(&cw, &cli_bits, &y, &x, gb, pw)
            },
            move |ch| {
                let mut s = PooledOtSender::setup(ch, &mut Prg::new())?;
                let mut r = PooledOtReceiver::setup(ch, &mut Prg::new())?;
                let pr = r.send_choices(ch, &srv_bits)?;
                ch.flush()?;
                let pf = s.recv_choices(ch, m)?;
                let d = mux_deltas(&sw, &srv_bits, pw);
                let x = s.send_correlated_answer(ch, pf, &d, pw as u32)?;
                ch.flush()?;
                let y = r.recv_correlated_answer(ch, pr, pw as u32)?;
                mux_combine(&sw, &srv_bits, &y, &x, gb, pw)
            },
        );
        let c = run.client.output.unwrap_or_else(|e| panic!("client: {e}"));
        let s = run.server.output.unwrap_or_else(|e| panic!("server: {e}"));
        for i in 0..n {
            let gv = if signed {
                sign_extend(g[i], gb) as u64
            } else {
                g[i]
            };
            assert_eq!(
                c[i].wrapping_add(s[i]) & pm,
                gv.wrapping_mul(v[i]) & pm,
                "g {} v {} (gb {gb}, pw {pw})",
                g[i],
                v[i]
            );
        }
    }
    assert!(mux_combine(&[1, 2], &[true], &[0, 0], &[0, 0], 2, 8).is_err());
}

/// The carry leaves and carry shares over real pooled OTs against plaintext: lt_hi ⊕ (eq_hi ∧
/// lt_lo) from both parties' leaf shares, and the sum mod 2^L of both parties' carry shares,
/// equal [s + c ≥ 2^F] for every pair of low parts at F = 4 and 5 (odd: digits 3 and 2) and for
/// random and extreme shares at F = 12 and 16 (L = 20, and 1 and 30 for the packing).
#[test]
fn carry_leaves_and_shares_equal_the_carry() {
    for (f, l) in [(4usize, 20usize), (5, 1), (12, 20), (16, 30)] {
        let lay = CarryLayout { f, l };
        let lo = ring_mask(f);
        let (mut ss, mut cs) = (Vec::new(), Vec::new());
        if f <= 5 {
            for a in 0..=lo {
                for b in 0..=lo {
                    // high bits above F must not matter
                    ss.push(a | (0xabc << f));
                    cs.push(b | (0x5 << f));
                }
            }
        } else {
            let mut prg = Prg::from_seed(Block(0x1eaf + f as u128));
            for (a, b) in [(0, 0), (lo, 0), (0, lo), (lo, lo), (1, lo), (lo, 1)] {
                ss.push(a);
                cs.push(b);
            }
            for _ in 0..3000 {
                ss.push(prg.next_block().low_u64() & 0xffff_ffff);
                cs.push(prg.next_block().low_u64() & 0xffff_ffff);
            }
        }
        let k = ss.len();
        let mut prg = Prg::from_seed(Block(0x7a0 + f as u128));
        let tau: Vec<[bool; LEAF_BITS]> = (0..k)
            .map(|_| {
                let t = prg.next_block().low_u64();
                [t & 1 == 1, t & 2 == 2, t & 4 == 4]
            })
            .collect();
        let v: Vec<u64> = (0..k)
            .map(|_| prg.next_block().low_u64() & ring_mask(l))
            .collect();
        let (cs2, tau2, ss2, v2) = (cs.clone(), tau.clone(), ss.clone(), v.clone());
        let cots = k * (f + LEAF_BITS);
        let run = simulate(
            move |ch| {
                let mut s = PooledOtSender::setup(ch, &mut Prg::new())?;
                s.fill(ch, cots)?;
                let keys = LeafKeys::holder(&mut s, ch, lay, k)?;
                let ckeys = CarryKeys::holder(&mut s, ch, k)?;
                let d = unpack(&ch.recv_pod::<u8>((k * f).div_ceil(8))?, k * f);
                let t = leaf_tables(lay, &keys, &cs2, &tau2, &d)?;
                ch.send_pod(&t)?;
                ch.flush()?;
                let n = k * LEAF_BITS;
                let d = unpack(&ch.recv_pod::<u8>(n.div_ceil(8))?, n);
                let t = carry_tables(lay, &ckeys, &tau2, &v2, &d)?;
                ch.send_pod(&t)?;
                ch.flush()?;
                Ok::<(), SsError>(())
            },
            move |ch| {
                let mut r = PooledOtReceiver::setup(ch, &mut Prg::new())?;
                r.fill(ch, cots)?;
                let keys = LeafKeys::chooser(&mut r, ch, lay, k)?;
                let ckeys = CarryKeys::chooser(&mut r, ch, k)?;
                ch.send_pod(&pack(&leaf_derand(lay, &keys, &ss2)?))?;
                ch.flush()?;
                let t: Vec<u8> = ch.recv_pod(lay.leaf_table_bytes(k))?;
                let leaves = leaf_outputs(lay, &keys, &ss2, &t)?;
                ch.send_pod(&pack(&carry_derand(&ckeys, &leaves)?))?;
                ch.flush()?;
                let t: Vec<u8> = ch.recv_pod(lay.carry_table_bytes(k))?;
                let shares = carry_shares(lay, &ckeys, &leaves, &t)?;
                Ok::<_, SsError>((leaves, shares))
            },
        );
        run.client.output.unwrap_or_else(|e| panic!("client: {e}"));
        let (out, shares) = run.server.output.unwrap_or_else(|e| panic!("server: {e}"));
        for j in 0..k {
            let b: Vec<bool> = (0..LEAF_BITS).map(|x| out[j][x] ^ tau[j][x]).collect();
            let carry = b[0] ^ (b[1] & b[2]);
            let want = (ss[j] & lo) + (cs[j] & lo) > lo;
            assert_eq!(carry, want, "F {f}: s {:#x} c {:#x}", ss[j], cs[j]);
            let sum = shares[j].wrapping_sub(v[j]) & ring_mask(l);
            assert_eq!(
                sum, want as u64,
                "F {f} L {l}: carry share of s {:#x} c {:#x}",
                ss[j], cs[j]
            );
        }
    }
}

/// A short, long or padded table frame from the peer is `Malformed`, not a panic; keys for too
/// few carries are refused.
#[test]
fn carry_blocks_refuse_bad_frames() {
    let lay = CarryLayout { f: 12, l: 20 };
    let k = 5;
    let keys = CarryKeys {
        keys: vec![0; k],
        choices: vec![0; k],
    };
    let leaves = vec![[false; LEAF_BITS]; k];
    let n = lay.carry_table_bytes(k);
    assert!(carry_shares(lay, &keys, &leaves, &vec![0; n]).is_ok());
    for bad in [vec![0u8; n - 1], vec![0u8; n + 1]] {
        let e = carry_shares(lay, &keys, &leaves, &bad).unwrap_err();
        assert_eq!(e.kind(), secinfer_core::ErrorKind::Malformed, "{e}");
    }
    if !(k * CARRY_TABLE * lay.l).is_multiple_of(8) {
        let mut t = vec![0u8; n];
        t[n - 1] = 0x80;
        assert!(carry_shares(lay, &keys, &leaves, &t).is_err());
    }
    let short = CarryKeys {
        keys: vec![0; k - 1],
        choices: vec![0; k - 1],
    };
    assert!(carry_shares(lay, &short, &leaves, &vec![0; n]).is_err());
    assert!(carry_derand(&short, &leaves).is_err());
    let lkeys = LeafKeys {
        keys: vec![0; 2 * k],
        choices: vec![0; 2 * k],
    };
    let s = vec![0u64; k];
    let m = lay.leaf_table_bytes(k);
    assert!(leaf_outputs(lay, &lkeys, &s, &vec![0; m]).is_ok());
    let e = leaf_outputs(lay, &lkeys, &s, &vec![0; m - 1])
        .err()
        .unwrap();
    assert_eq!(e.kind(), secinfer_core::ErrorKind::Malformed);
}

/// The lookup tables over real pooled OTs against plaintext: for random tables, masks and
/// XOR-shared indices (every index at b = 3, random ones at b = 8), the reader's share ⊕ the
/// holder's ω is the table entry at the reconstructed index, for two calls on consecutive key
/// ranges (as two steps take them).
#[test]
fn lookup_tables_read_the_entry_at_the_shared_index() {
    for (nb, gb, k) in [(3usize, 7usize, 64usize), (8, 7, 300), (8, 13, 50)] {
        let mut prg = Prg::from_seed(Block(0x7ab + nb as u128));
        let n = 1usize << nb;
        let table: Vec<u64> = (0..n)
            .map(|_| prg.next_block().low_u64() & ring_mask(gb))
            .collect();
        let mut draw = |bits: usize| -> Vec<u64> {
            (0..2 * k)
                .map(|_| prg.next_block().low_u64() & ring_mask(bits))
                .collect()
        };
        let (xs, a, omega) = (draw(nb), draw(nb), draw(gb));
        let xs: Vec<u64> = if nb == 3 {
            (0..2 * k).map(|u| (u % n) as u64).collect()
        } else {
            xs
        };
        let bits = |v: &[u64]| -> Vec<bool> {
            let mut out = Vec::new();
            for &w in v {
                push_bits(&mut out, w, nb);
            }
            out
        };
        // The reader's share b = x ⊕ a.
        let b: Vec<u64> = xs.iter().zip(&a).map(|(x, a)| x ^ a).collect();
        let (a_bits, b_bits) = (bits(&a), bits(&b));
        let (t2, o2) = (table.clone(), omega.clone());
        let run = simulate(
            move |ch| {
                let mut r = PooledOtReceiver::setup(ch, &mut Prg::new())?;
                r.fill(ch, 2 * k * nb)?;
                let keys = LutKeys::reader(&mut r, ch, nb, 2 * k)?;
                let mut out = Vec::new();
                for call in 0..2 {
                    let x = &b_bits[call * k * nb..(call + 1) * k * nb];
                    let d = lut_derand(&keys, call * k, x, nb)?;
                    ch.send_pod(&pack(&d))?;
                    ch.flush()?;
                    let t: Vec<u8> = ch.recv_pod(packed_len(k * n, gb as u32))?;
                    // one byte short is malformed
                    let e = lut_outputs(&keys, call * k, x, nb, gb, &t[1..])
                        .err()
                        .unwrap();
                    assert_eq!(e.kind(), secinfer_core::ErrorKind::Malformed);
                    out.extend(lut_outputs(&keys, call * k, x, nb, gb, &t)?);
                }
                Ok::<_, SsError>(out)
            },
            move |ch| {
                let mut s = PooledOtSender::setup(ch, &mut Prg::new())?;
                s.fill(ch, 2 * k * nb)?;
                let keys = LutKeys::holder(&mut s, ch, nb, 2 * k)?;
                for call in 0..2 {
                    let d = unpack(&ch.recv_pod::<u8>((k * nb).div_ceil(8))?, k * nb);
                    let a = &a_bits[call * k * nb..(call + 1) * k * nb];
                    let om = &o2[call * k..(call + 1) * k];
                    // a derandomisation of the wrong length, or keys for too few tables,
                    // are refused
                    assert!(lut_tables(&t2, &keys, call * k, a, om, &d[1..], gb).is_err());
                    assert!(lut_tables(&t2, &keys, 2 * k, a, om, &d, gb).is_err());
                    let t = lut_tables(&t2, &keys, call * k, a, om, &d, gb)?;
                    ch.send_pod(&t)?;
                    ch.flush()?;
                }
                Ok::<(), SsError>(())
            },
        );
        run.server.output.unwrap_or_else(|e| panic!("server: {e}"));
        let out = run.client.output.unwrap_or_else(|e| panic!("client: {e}"));
        for u in 0..2 * k {
            let share = word(&out[u * gb..(u + 1) * gb]);
            assert_eq!(
                share ^ omega[u],
                table[xs[u] as usize],
                "b {nb} gb {gb} table {u} input {}",
                xs[u]
            );
        }
    }
}

/// The single-bit steps (what `blocks::b2a` runs on `Ctx`'s OTs) on every pair of bits and
/// rings of 1, 37 and 64 bits, with the correlated OT written out (the receiver gets
/// x + b·δ): the shares sum to a ⊕ b, where the signed one-bit word gives −(a ⊕ b).
#[test]
fn bit_b2a_steps_equal_xor() {
    let mut prg = Prg::from_seed(Block(0xb17));
    for k in [1usize, 37, 64] {
        let pm = ring_mask(k);
        let a = [false, false, true, true];
        let b = [false, true, false, true];
        let x: Vec<u64> = (0..4).map(|_| prg.next_block().low_u64() & pm).collect();
        let ot = |d: &[u64]| -> Vec<u64> {
            (0..4)
                .map(|i| x[i].wrapping_add(if b[i] { d[i] } else { 0 }) & pm)
                .collect()
        };
        let s = b2a_bit_sender(&a, &x, k).unwrap();
        let r = b2a_receiver(&ot(&b2a_bit_deltas(&a, k).unwrap()), 1, k).unwrap();
        let ss = b2a_sender(&a, &x, 1, k).unwrap();
        let rs = b2a_receiver(&ot(&b2a_deltas(&a, 1, k).unwrap()), 1, k).unwrap();
        for i in 0..4 {
            let want = (a[i] ^ b[i]) as u64;
            assert_eq!(s[i].wrapping_add(r[i]) & pm, want, "k {k} pair {i}");
            assert_eq!(ss[i].wrapping_add(rs[i]) & pm, want.wrapping_neg() & pm);
        }
    }
    assert!(matches!(
        b2a_bit_sender(&[true; 3], &[0; 2], 8),
        Err(SsError::InvalidArgument(_))
    ));
}
