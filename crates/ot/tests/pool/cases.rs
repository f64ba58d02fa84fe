// The pooled-OT cases, included once per COT source by `tests/pool.rs` (`SOURCE`).
use secinfer_net::{simulate, Channel, Phase};
use secinfer_ot::*;

const DELTA: Block = Block(0x0f1e_2d3c_4b5a_6978_8796_a5b4_c3d2_e1f0);

/// Runs `client` on a set-up receiver and `server` on a set-up sender whose pools were filled
/// with `fill` COTs in the offline phase; the online phase is current when they start.
fn pooled<A: Send, B: Send>(
    fill: usize,
    client: impl FnOnce(&mut PooledOtReceiver, &mut secinfer_net::DynChannel) -> A + Send,
    server: impl FnOnce(&mut PooledOtSender, &mut secinfer_net::DynChannel) -> B + Send,
) -> secinfer_net::TwoPartyRun<A, B> {
    simulate(
        move |ch| {
            let mut r =
                PooledOtReceiver::setup_with_source(ch, &mut Prg::new(), SOURCE).expect("setup");
            assert_eq!(r.source(), SOURCE);
            ch.set_phase(Phase::Offline);
            r.fill(ch, fill).expect("fill");
            assert_eq!(r.available(), fill);
            ch.set_phase(Phase::Online);
            client(&mut r, ch)
        },
        move |ch| {
            let mut s =
                PooledOtSender::setup_with_source_and_delta(ch, &mut Prg::new(), SOURCE, DELTA)
                    .expect("setup");
            assert_eq!(s.source(), SOURCE);
            ch.set_phase(Phase::Offline);
            s.fill(ch, fill).expect("fill");
            ch.set_phase(Phase::Online);
            server(&mut s, ch)
        },
    )
}

/// Bytes (receiver → sender) of a fill of `n` COTs by `SOURCE`: one bit per column per row,
/// rows padded to 128 per chunk of `CHUNK_ROWS` (128 columns for IKNP, `⌈128/k⌉` for
/// SoftSpokenOT).
fn cot_bytes(n: usize) -> usize {
    let cols = match SOURCE {
        CotSource::SoftSpoken { k } => 128usize.div_ceil(k as usize),
        _ => 128,
    };
    let full = n / CHUNK_ROWS;
    let rest = n % CHUNK_ROWS;
    cols * 16 * (full * CHUNK_ROWS / 128 + rest.div_ceil(128))
}

/// Tiny, byte/block boundaries, a chunk boundary and one past the derandomisation frame.
const SIZES: [usize; 7] = [0, 1, 7, 8, 129, CHUNK_ROWS + 333, DERAND_FRAME_OTS + 5];

#[test]
fn pooled_cot_and_rot_match_definitions_across_sizes_and_refills() {
    let mut prg = Prg::from_seed(Block(21));
    let batches: Vec<Vec<bool>> = SIZES.iter().map(|&n| prg.bits(n)).collect();
    let b2 = batches.clone();
    let total: usize = SIZES.iter().sum();
    // Half of the COTs are pooled; the rest come from automatic refills mid-sequence.
    let run = pooled(
        total,
        move |r, ch| {
            let mut cots = Vec::new();
            let mut rots = Vec::new();
            for c in &b2 {
                cots.push(r.recv_cot(ch, c).expect("cot"));
                rots.push(r.recv_rot(ch, c).expect("rot"));
            }
            (cots, rots, r.consumed(), r.available())
        },
        move |s, ch| {
            let mut cots = Vec::new();
            let mut rots = Vec::new();
            for &n in &SIZES {
                cots.push(s.send_cot(ch, n).expect("cot"));
                rots.push(s.send_rot(ch, n).expect("rot"));
            }
            (cots, rots, s.consumed(), s.available(), s.delta())
        },
    );
    let (tc, tr, rc, ra) = run.client.output;
    let (qc, qr, sc, sa, delta) = run.server.output;
    assert_eq!(delta, DELTA);
    assert_eq!((rc, sc), (2 * total as u64, 2 * total as u64));
    assert_eq!((ra, sa), (0, 0));
    let mut seen = std::collections::HashSet::new();
    for (i, c) in batches.iter().enumerate() {
        assert_eq!(tc[i].len(), c.len());
        assert_eq!(tr[i].len(), c.len());
        for j in 0..c.len() {
            assert_eq!(
                tc[i][j],
                qc[i][j] ^ DELTA.and_bit(c[j]),
                "COT {j} of {}",
                c.len()
            );
            assert_eq!(tr[i][j], qr[i][j][c[j] as usize], "ROT {j} of {}", c.len());
            assert_ne!(tr[i][j], qr[i][j][1 - c[j] as usize]);
            assert!(seen.insert(qr[i][j][0]), "repeated ROT key");
        }
    }
    // Online bytes: the receiver's bits (≈ 1 per OT) plus the second half's refills (16 B per OT
    // for IKNP, 16/k for SoftSpokenOT), never more than that.
    let online = run.client.cost.phase(Phase::Online).bytes_sent as usize;
    let bits: usize = SIZES.iter().map(|n| 2 * n.div_ceil(8)).sum();
    assert!(online >= bits + cot_bytes(total), "online {online}");
    assert!(
        online <= bits + cot_bytes(total) + 16 * cot_bytes(128),
        "online {online}"
    );
}

#[test]
fn online_cost_is_one_bit_per_ot_when_pooled() {
    let n = 10_000;
    let mut prg = Prg::from_seed(Block(22));
    let c = prg.bits(n);
    let c2 = c.clone();
    let run = pooled(
        n,
        move |r, ch| r.recv_cot(ch, &c2).expect("cot"),
        move |s, ch| s.send_cot(ch, n).expect("cot"),
    );
    for ((t, q), &c) in run.client.output.iter().zip(&run.server.output).zip(&c) {
        assert_eq!(*t, *q ^ DELTA.and_bit(c));
    }
    assert_eq!(
        run.client.cost.phase(Phase::Online).bytes_sent,
        n.div_ceil(8) as u64
    );
    assert_eq!(run.server.cost.phase(Phase::Online).bytes_sent, 0);
    assert_eq!(run.client.cost.phase(Phase::Online).messages_sent, 1);
}

/// `send_cot_view` is `send_cot` without the copy: same messages, same correlation, and the
/// pools stay in step for the calls after it.
#[test]
fn cot_view_matches_the_receivers_cots() {
    let mut prg = Prg::from_seed(Block(24));
    let sizes = [0usize, 1, 777, CHUNK_ROWS + 5];
    let choices: Vec<Vec<bool>> = sizes.iter().map(|&n| prg.bits(n)).collect();
    let total: usize = sizes.iter().sum();
    let c2 = choices.clone();
    let run = pooled(
        2 * total,
        move |r, ch| {
            let mut out: Vec<Vec<Block>> =
                c2.iter().map(|c| r.recv_cot(ch, c).expect("cot")).collect();
            out.push(r.recv_cot(ch, &[true, false]).expect("after"));
            out
        },
        move |s, ch| {
            let mut out: Vec<Vec<Block>> = sizes
                .iter()
                .map(|&n| s.send_cot_view(ch, n).expect("view").to_vec())
                .collect();
            out.push(s.send_cot(ch, 2).expect("after"));
            out
        },
    );
    let (t, q) = (run.client.output, run.server.output);
    let mut all = choices;
    all.push(vec![true, false]);
    for ((t, q), c) in t.iter().zip(&q).zip(&all) {
        assert_eq!(t.len(), c.len());
        for j in 0..c.len() {
            assert_eq!(t[j], q[j] ^ DELTA.and_bit(c[j]));
        }
    }
}

#[test]
fn pooled_chosen_block_and_every_width() {
    let mut prg = Prg::from_seed(Block(23));
    let sizes = [0usize, 1, 129, CHUNK_ROWS + 3];
    let choices: Vec<Vec<bool>> = sizes.iter().map(|&n| prg.bits(n)).collect();
    let msgs: Vec<Vec<[Block; 2]>> = sizes
        .iter()
        .map(|&n| {
            (0..n)
                .map(|_| [prg.next_block(), prg.next_block()])
                .collect()
        })
        .collect();
    let n64 = 37;
    let c64 = prg.bits(n64);
    let m64: Vec<Vec<[u64; 2]>> = (1..=64u32)
        .map(|b| {
            let mk = if b == 64 { u64::MAX } else { (1 << b) - 1 };
            (0..n64)
                .map(|_| {
                    [
                        prg.next_block().low_u64() & mk,
                        prg.next_block().low_u64() & mk,
                    ]
                })
                .collect()
        })
        .collect();
    let deltas: Vec<u64> = (0..n64).map(|_| prg.next_block().low_u64()).collect();
    let (c2, c64b, m64b, d2) = (choices.clone(), c64.clone(), m64.clone(), deltas.clone());
    let msgs2 = msgs.clone();
    let run = pooled(
        1000,
        move |r, ch| {
            let blocks: Vec<_> = c2
                .iter()
                .map(|c| r.recv_chosen(ch, c).expect("chosen"))
                .collect();
            let words: Vec<_> = (1..=64)
                .map(|b| r.recv_chosen_u64(ch, &c64b, b).expect("u64"))
                .collect();
            let add: Vec<_> = (1..=64)
                .map(|b| r.recv_correlated_u64(ch, &c64b, b).expect("add"))
                .collect();
            (blocks, words, add)
        },
        move |s, ch| {
            for m in &msgs2 {
                s.send_chosen(ch, m).expect("chosen");
            }
            for (b, m) in (1..=64).zip(&m64b) {
                s.send_chosen_u64(ch, m, b).expect("u64");
            }
            (1..=64)
                .map(|b| s.send_correlated_u64(ch, &d2, b).expect("add"))
                .collect::<Vec<_>>()
        },
    );
    let (blocks, words, add) = run.client.output;
    let xs = run.server.output;
    for (i, c) in choices.iter().enumerate() {
        for j in 0..c.len() {
            assert_eq!(blocks[i][j], msgs[i][j][c[j] as usize], "chosen {j}");
        }
    }
    for b in 1..=64u32 {
        let mk = if b == 64 { u64::MAX } else { (1 << b) - 1 };
        let bi = (b - 1) as usize;
        for j in 0..n64 {
            assert_eq!(words[bi][j], m64[bi][j][c64[j] as usize], "bits {b} OT {j}");
            let want = xs[bi][j].wrapping_add(deltas[j] & (c64[j] as u64).wrapping_neg()) & mk;
            assert_eq!(add[bi][j], want, "additive bits {b} OT {j}");
            assert_eq!(xs[bi][j] & !mk, 0);
        }
    }
}

/// `send_u64_with` makes the rows frame by frame: over several frames (1-of-256 on 64-bit
/// words: 256 rows per frame) the receiver gets the function's value at its choice, each row is
/// asked for exactly once and in order, and the wire bytes equal `send_u64`'s.
#[test]
fn pooled_one_of_n_made_frame_by_frame_matches_definition() {
    let (n, count, bits) = (256usize, 700usize, 64u32);
    let f = |row: usize, x: usize| ((row as u64) << 40) ^ (x as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    let mut prg = Prg::from_seed(Block(77));
    let choices: Vec<u8> = (0..count).map(|_| prg.below(n as u64) as u8).collect();
    let c2 = choices.clone();
    let run = pooled(
        100,
        move |r, ch| {
            let a = r.recv_u64(ch, n, &c2, bits).expect("with");
            let b = r.recv_u64(ch, n, &c2, bits).expect("slice");
            (a, b)
        },
        move |s, ch| {
            let mut asked = Vec::new();
            let b0 = ch.cost().total().bytes_sent;
            s.send_u64_with(ch, n, count, bits, |row0, out| {
                asked.push((row0, out.len() / n));
                for (i, o) in out.iter_mut().enumerate() {
                    *o = f(row0 + i / n, i % n);
                }
            })
            .expect("with");
            let b1 = ch.cost().total().bytes_sent;
            let all: Vec<u64> = (0..count * n).map(|i| f(i / n, i % n)).collect();
            s.send_u64(ch, n, &all, bits).expect("slice");
            let b2 = ch.cost().total().bytes_sent;
            (asked, b1 - b0, b2 - b1)
        },
    );
    let (a, b) = run.client.output;
    let (asked, with_bytes, slice_bytes) = run.server.output;
    for j in 0..count {
        assert_eq!(a[j], f(j, choices[j] as usize), "row {j}");
        assert_eq!(b[j], a[j], "row {j}");
    }
    assert!(asked.len() > 1, "one frame only: {asked:?}");
    let mut next = 0;
    for (row0, rows) in asked {
        assert_eq!(row0, next);
        next += rows;
    }
    assert_eq!(next, count);
    assert_eq!(with_bytes, slice_bytes);
}

#[test]
fn pooled_one_of_n_matches_definition() {
    for n in [2usize, 3, 16, 256] {
        let mut prg = Prg::from_seed(Block(24 + n as u128));
        let count = 300;
        let ch1: Vec<u8> = (0..count).map(|_| prg.below(n as u64) as u8).collect();
        let ch2: Vec<u8> = (0..count).map(|_| prg.below(n as u64) as u8).collect();
        let widths = [1u32, 8, 64];
        let msgs: Vec<Vec<u64>> = widths
            .iter()
            .map(|&b| {
                let mk = if b == 64 { u64::MAX } else { (1 << b) - 1 };
                (0..count * n)
                    .map(|_| prg.next_block().low_u64() & mk)
                    .collect()
            })
            .collect();
        let (a1, a2, m2) = (ch1.clone(), ch2.clone(), msgs.clone());
        // A small pool: the 1-of-N calls refill on the way.
        let run = pooled(
            100,
            move |r, ch| {
                let keys = r.recv_random(ch, n, &a1).expect("random");
                let vals: Vec<_> = widths
                    .iter()
                    .map(|&b| r.recv_u64(ch, n, &a2, b).expect("u64"))
                    .collect();
                (keys, vals, r.consumed())
            },
            move |s, ch| {
                let keys = s.send_random(ch, n, count).expect("random");
                for (&b, m) in widths.iter().zip(&m2) {
                    s.send_u64(ch, n, m, b).expect("u64");
                }
                (keys, s.consumed())
            },
        );
        let (rk, vals, rc) = run.client.output;
        let (sk, sc) = run.server.output;
        let m = (usize::BITS - (n - 1).leading_zeros()) as u64;
        assert_eq!(rc, sc);
        assert_eq!(rc, 4 * count as u64 * m, "N {n}: log2 N COTs per OT");
        for j in 0..count {
            let row = &sk[j * n..(j + 1) * n];
            assert_eq!(rk[j], row[ch1[j] as usize], "N {n} row {j}");
            let distinct: std::collections::HashSet<_> = row.iter().collect();
            assert_eq!(distinct.len(), n, "N {n} row {j}: repeated keys");
            for (w, v) in vals.iter().enumerate() {
                assert_eq!(
                    v[j],
                    msgs[w][j * n + ch2[j] as usize],
                    "N {n} width {w} row {j}"
                );
            }
        }
        // The keys must not be linear in the per-bit keys: XOR over a face of the cube would be
        // zero for `K_x = ⊕_i H(k_i^{x_i})` (and leak XORs of messages to the receiver).
        if n >= 4 {
            for j in 0..count {
                let r = &sk[j * n..];
                assert_ne!(
                    r[0] ^ r[1] ^ r[2] ^ r[3],
                    Block::ZERO,
                    "N {n} row {j}: linear keys"
                );
            }
        }
    }
}

#[test]
fn exhausted_pool_refills_in_the_current_phase() {
    let mut prg = Prg::from_seed(Block(25));
    let c = prg.bits(5000);
    let c2 = c.clone();
    let run = pooled(
        10,
        move |r, ch| {
            let t = r.recv_cot(ch, &c2).expect("cot");
            // `reserve` tops up to 64 (fills 64, the pool being empty), then finds enough.
            r.reserve(ch, 64).expect("reserve");
            r.reserve(ch, 10).expect("reserve");
            (t, r.available())
        },
        move |s, ch| {
            let q = s.send_cot(ch, 5000).expect("cot");
            s.reserve(ch, 64).expect("reserve");
            s.reserve(ch, 10).expect("reserve");
            (q, s.available(), s.consumed())
        },
    );
    let (t, ra) = run.client.output;
    let (q, sa, used) = run.server.output;
    assert_eq!((ra, sa, used), (64, 64, 5000));
    for j in 0..5000 {
        assert_eq!(t[j], q[j] ^ DELTA.and_bit(c[j]));
    }
    // The 4990-COT refill (padded to 128 rows) and the 64-COT top-up are charged to the current
    // (online) phase.
    let online = run.client.cost.phase(Phase::Online).bytes_sent as usize;
    assert_eq!(online, cot_bytes(4990) + 5000 / 8 + cot_bytes(64));
    if SOURCE == CotSource::Iknp {
        assert_eq!(online, 4992 * 16 + 5000 / 8 + 128 * 16);
    }
}

fn is_invalid<T>(r: &Result<T, OtError>) -> bool {
    matches!(r, Err(OtError::InvalidArgument(_)))
}

#[test]
fn hostile_derandomisation_frames_are_typed_errors() {
    // (name, frame bytes for a 100-OT call)
    let cases: Vec<(&str, Vec<u8>, bool)> = vec![
        ("short", vec![0u8; 12], false),
        ("long", vec![0u8; 14], false),
        ("empty", vec![], false),
        (
            "padding bits set",
            {
                let mut f = vec![0u8; 13];
                f[12] = 0x10; // bit 100: past the last OT
                f
            },
            true,
        ),
    ];
    for (name, frame, malformed) in cases {
        let run = pooled(
            200,
            move |_r, ch| {
                ch.send_pod::<u8>(&frame).expect("send");
                ch.flush().expect("flush");
            },
            |s, ch| {
                let r = s.send_cot(ch, 100).map(|_| ());
                let again = s.send_cot(ch, 1).map(|_| ());
                (r, again)
            },
        );
        let (r, again) = run.server.output;
        if malformed {
            assert!(
                matches!(r, Err(OtError::Malformed(_))),
                "{name}: {:?}",
                r.err()
            );
        } else {
            assert!(matches!(r, Err(OtError::Net(_))), "{name}: {:?}", r.err());
        }
        assert!(is_invalid(&again), "{name}: not poisoned");
    }
    // 1-of-N: the frame carries log2 N bits per OT; one OT's worth too few is refused.
    let run = pooled(
        200,
        |_r, ch| ch.send_pod::<u8>(&[0u8; 3]).expect("send"),
        |s, ch| s.send_random(ch, 16, 10).map(|_| ()),
    );
    assert!(matches!(run.server.output, Err(OtError::Net(_))));
}

#[test]
fn hostile_answers_are_typed_errors() {
    for frame_len in [0usize, 31, 2 * 16 * 10 + 16] {
        let run = pooled(
            100,
            |r, ch| r.recv_chosen(ch, &[true; 10]).map(|_| ()),
            move |_s, ch| {
                let _bits = ch.recv_pod::<u8>(2).expect("bits");
                ch.send_pod::<u8>(&vec![7u8; frame_len]).expect("send");
            },
        );
        assert!(
            matches!(run.client.output, Err(OtError::Net(_))),
            "len {frame_len}"
        );
    }
    // 1-of-N chosen: 10 OTs of N = 16 at 8 bits is 160 bytes; 159 and 161 are refused.
    for frame_len in [159usize, 161] {
        let run = pooled(
            100,
            |r, ch| {
                let e = r.recv_u64(ch, 16, &[3; 10], 8).map(|_| ());
                (e, r.recv_cot(ch, &[true]).map(|_| ()))
            },
            move |_s, ch| {
                let _bits = ch.recv_pod::<u8>(5).expect("bits");
                ch.send_pod::<u8>(&vec![7u8; frame_len]).expect("send");
            },
        );
        let (e, again) = run.client.output;
        assert!(matches!(e, Err(OtError::Net(_))), "len {frame_len}");
        assert!(is_invalid(&again));
    }
    // The peer hangs up before answering.
    let run = pooled(
        100,
        |r, ch| r.recv_correlated_u64(ch, &[true; 10], 16).map(|_| ()),
        |_s, _ch| {},
    );
    assert!(matches!(run.client.output, Err(OtError::Net(_))));
}

#[test]
fn bad_arguments_are_typed_and_do_not_poison() {
    let run = pooled(
        10,
        |r, ch| {
            let errs = [
                is_invalid(&r.recv_chosen_u64(ch, &[true], 0)),
                is_invalid(&r.recv_correlated_u64(ch, &[true], 65)),
                is_invalid(&r.recv_u64(ch, 16, &[16], 8)),
                is_invalid(&r.recv_random(ch, 1, &[0])),
                is_invalid(&r.recv_random(ch, 257, &[0])),
                is_invalid(&r.recv_cot_into(ch, &[true], &mut [])),
            ];
            (errs, r.recv_cot(ch, &[true, false]).expect("cot"))
        },
        |s, ch| {
            let errs = [
                is_invalid(&s.send_chosen_u64(ch, &[[256, 0]], 8)),
                is_invalid(&s.send_u64(ch, 16, &[0; 17], 8)),
                is_invalid(&s.send_u64(ch, 2, &[0, 2], 1)),
                is_invalid(&s.send_random(ch, 300, 1)),
                is_invalid(&s.send_correlated_u64(ch, &[1], 0)),
            ];
            (errs, s.send_cot(ch, 2).expect("cot"))
        },
    );
    let (re, t) = run.client.output;
    let (se, q) = run.server.output;
    assert!(re.iter().all(|&e| e), "{re:?}");
    assert!(se.iter().all(|&e| e), "{se:?}");
    assert_eq!(t[0], q[0] ^ DELTA);
    assert_eq!(t[1], q[1]);
}

#[test]
fn pool_bits_are_balanced_and_from_iknp_wrappers() {
    // `from_iknp` on instances that were set up directly. With all-zero choices the
    // derandomisation frame *is* the pool's random bits r_j: the sender reads it raw and checks
    // that they are balanced (they must be uniform, or d_j = b_j ⊕ r_j would not hide b_j).
    let n = 1 << 16;
    let run = simulate(
        move |ch| {
            let ext = OtExtReceiver::setup(ch, &mut Prg::new()).expect("setup");
            let mut r = PooledOtReceiver::from_iknp(ext, &mut Prg::new());
            r.fill(ch, n).expect("fill");
            let _ = r.recv_cot(ch, &vec![false; n]);
        },
        move |ch| {
            let ext = OtExtSender::setup(ch, &mut Prg::new()).expect("setup");
            let mut s = PooledOtSender::from_iknp(ext);
            assert_eq!(s.source(), CotSource::Iknp);
            s.fill(ch, n).expect("fill");
            let frame = ch.recv_pod::<u8>(n / 8).expect("bits");
            frame.iter().map(|b| b.count_ones() as i64).sum::<i64>()
        },
    );
    // n/2 ± 6σ, σ = √n / 2 = 128.
    let ones = run.server.output;
    assert!(
        (ones - (n as i64) / 2).abs() < 6 * 128,
        "{ones} ones of {n}"
    );
}

#[test]
fn zero_length_calls_consume_and_send_nothing() {
    let run = pooled(
        4,
        |r, ch| {
            let a = r.recv_random(ch, 16, &[]).expect("random").len();
            let b = r.recv_u64(ch, 256, &[], 8).expect("u64").len();
            let c = r.recv_chosen_u64(ch, &[], 7).expect("chosen").len();
            let d = r.recv_correlated_u64(ch, &[], 64).expect("add").len();
            (a + b + c + d, r.consumed(), r.available())
        },
        |s, ch| {
            let a = s.send_random(ch, 16, 0).expect("random").len();
            s.send_u64(ch, 256, &[], 8).expect("u64");
            s.send_chosen_u64(ch, &[], 7).expect("chosen");
            let d = s.send_correlated_u64(ch, &[], 64).expect("add").len();
            (a + d, s.consumed(), s.available())
        },
    );
    assert_eq!(run.client.output, (0, 0, 4));
    assert_eq!(run.server.output, (0, 0, 4));
    assert_eq!(run.client.cost.phase(Phase::Online).bytes_sent, 0);
    assert_eq!(run.server.cost.phase(Phase::Online).bytes_sent, 0);
}

/// Online-only timing of pooled 1-of-16 (8-bit) against a filled pool:
/// `cargo test --release -p secinfer-ot --test pool online_timing -- --ignored --nocapture`.
#[test]
#[ignore]
fn online_timing() {
    let count = 1 << 20;
    let reps = 3;
    let mut prg = Prg::from_seed(Block(41));
    let choices: Vec<u8> = (0..count).map(|_| prg.below(16) as u8).collect();
    let msgs: Vec<u64> = (0..count * 16)
        .map(|_| prg.next_block().low_u64() & 0xff)
        .collect();
    let run = pooled(
        4 * count * reps,
        move |r, ch| {
            (0..reps)
                .map(|_| {
                    let t = std::time::Instant::now();
                    r.recv_u64(ch, 16, &choices, 8).expect("u64");
                    t.elapsed().as_secs_f64()
                })
                .fold(f64::INFINITY, f64::min)
        },
        move |s, ch| {
            (0..reps)
                .map(|_| {
                    let t = std::time::Instant::now();
                    s.send_u64(ch, 16, &msgs, 8).expect("u64");
                    t.elapsed().as_secs_f64()
                })
                .fold(f64::INFINITY, f64::min)
        },
    );
    eprintln!(
        "pooled 1-of-16, 2^20 OTs online: receiver {:.3} s, sender {:.3} s",
        run.client.output, run.server.output
    );
}

/// Split pooled OT: two batches' choices in one flight, both answers in the next (one flush
/// each), against the definition `recv = x + c·δ mod 2^bits`, across sizes, widths and a refill;
/// then an ordinary call on the same pools still agrees (the pools stayed in step).
#[test]
fn split_correlated_ot_matches_definition_in_two_flights() {
    let mut prg = Prg::from_seed(Block(0x5b1e));
    for &(n1, n2, bits, fill) in &[
        (0usize, 1usize, 1u32, 10usize),
        (7, 8, 27, 100),
        (129, CHUNK_ROWS + 333, 32, 200), // refills the deficit inside the call
        (1000, 3, 64, 5000),
    ] {
        let c1 = prg.bits(n1);
        let c2 = prg.bits(n2);
        let mk = if bits == 64 {
            u64::MAX
        } else {
            (1u64 << bits) - 1
        };
        let d1: Vec<u64> = (0..n1).map(|_| prg.next_block().low_u64() & mk).collect();
        let d2: Vec<u64> = (0..n2).map(|_| prg.next_block().low_u64() & mk).collect();
        let (cc1, cc2, dd1, dd2) = (c1.clone(), c2.clone(), d1.clone(), d2.clone());
        let run = pooled(
            fill,
            move |r, ch| {
                let p1 = r.send_choices(ch, &cc1).expect("choices 1");
                let p2 = r.send_choices(ch, &cc2).expect("choices 2");
                assert_eq!((p1.len(), p2.len()), (cc1.len(), cc2.len()));
                ch.flush().expect("flush");
                let o1 = r.recv_correlated_answer(ch, p1, bits).expect("answer 1");
                let o2 = r.recv_correlated_answer(ch, p2, bits).expect("answer 2");
                let after = r.recv_cot(ch, &[true, false]).expect("cot after");
                (o1, o2, after, ch.cost().online.rounds)
            },
            move |s, ch| {
                let p1 = s.recv_choices(ch, dd1.len()).expect("read 1");
                let p2 = s.recv_choices(ch, dd2.len()).expect("read 2");
                let x1 = s
                    .send_correlated_answer(ch, p1, &dd1, bits)
                    .expect("send 1");
                let x2 = s
                    .send_correlated_answer(ch, p2, &dd2, bits)
                    .expect("send 2");
                ch.flush().expect("flush");
                let after = s.send_cot(ch, 2).expect("cot after");
                (x1, x2, after, s.delta())
            },
        );
        let (o1, o2, ra, rounds) = run.client.output;
        let (x1, x2, sa, delta) = run.server.output;
        for (o, x, c, d) in [(&o1, &x1, &c1, &d1), (&o2, &x2, &c2, &d2)] {
            assert_eq!(o.len(), c.len());
            for j in 0..c.len() {
                let want = x[j].wrapping_add(if c[j] { d[j] } else { 0 }) & mk;
                assert_eq!(o[j], want, "n ({n1}, {n2}) bits {bits} ot {j}");
                assert_eq!(x[j] & !mk, 0);
            }
        }
        assert_eq!(ra, vec![sa[0] ^ delta, sa[1]], "pools out of step");
        // Choices out, answers in (plus any refill of the deficit, which is also one flight
        // each way before the choices), then the trailing COT's bits out.
        if fill >= n1 + n2 {
            assert_eq!(rounds, 3, "n ({n1}, {n2})");
        }
    }
}

/// Sender-first additive OT: the sender's words go before the choices exist; the receiver's
/// `u` and the sender's `s` satisfy `u − s = c·δ mod 2^bits`; two flights in all.
#[test]
fn early_correlated_ot_matches_definition_in_two_flights() {
    let mut prg = Prg::from_seed(Block(0xea21));
    for &(n, bits, fill) in &[
        (0usize, 8u32, 4usize),
        (1, 1, 4),
        (129, 27, 200),
        (CHUNK_ROWS + 333, 32, 100), // refill inside the call
        (500, 64, 600),
    ] {
        let c = prg.bits(n);
        let mk = if bits == 64 {
            u64::MAX
        } else {
            (1u64 << bits) - 1
        };
        let d: Vec<u64> = (0..n).map(|_| prg.next_block().low_u64() & mk).collect();
        let (cc, dd) = (c.clone(), d.clone());
        let run = pooled(
            fill,
            move |r, ch| {
                let p = r.recv_correlated_early(ch, cc.len(), bits).expect("early");
                assert_eq!(p.len(), cc.len());
                let u = r.finish_early(ch, p, &cc).expect("finish");
                ch.flush().expect("flush");
                let after = r.recv_cot(ch, &[true]).expect("cot after");
                (u, after, ch.cost().online.rounds)
            },
            move |s, ch| {
                let p = s.send_correlated_early(ch, &dd, bits).expect("early");
                ch.flush().expect("flush");
                let x = s.finish_early(ch, p).expect("finish");
                let after = s.send_cot(ch, 1).expect("cot after");
                (x, after, s.delta())
            },
        );
        let (u, ra, rounds) = run.client.output;
        let (x, sa, delta) = run.server.output;
        assert_eq!(u.len(), n);
        for j in 0..n {
            let want = x[j].wrapping_add(if c[j] { d[j] } else { 0 }) & mk;
            assert_eq!(u[j], want, "n {n} bits {bits} ot {j}");
        }
        assert_eq!(ra, vec![sa[0] ^ delta], "pools out of step");
        if fill >= n && n > 0 {
            // words in, bits out (the trailing COT's bits join that flight)
            assert_eq!(rounds, 2, "n {n}");
        }
    }
}

/// The split and sender-first halves refuse hostile frames with typed errors and then poison
/// the instance; mismatched lengths are argument errors.
#[test]
fn split_and_early_halves_refuse_hostile_frames() {
    // The sender's answer to 100 OTs at 27 bits is 338 bytes; 337 and 339 are refused.
    for frame_len in [0usize, 337, 339] {
        let run = pooled(
            200,
            move |r, ch| {
                let p = r.send_choices(ch, &[true; 100]).expect("choices");
                ch.flush().expect("flush");
                let e = r.recv_correlated_answer(ch, p, 27).map(|_| ());
                (e, r.recv_cot(ch, &[true]).map(|_| ()))
            },
            move |_s, ch| {
                let _bits = ch.recv_pod::<u8>(13).expect("bits");
                ch.send_pod::<u8>(&vec![0xffu8; frame_len]).expect("send");
                ch.flush().expect("flush");
            },
        );
        let (e, again) = run.client.output;
        assert!(matches!(e, Err(OtError::Net(_))), "len {frame_len}: {e:?}");
        assert!(is_invalid(&again), "not poisoned");
    }
    // Derandomisation bits of a split call: padding bits set past the last OT.
    let run = pooled(
        200,
        |_r, ch| {
            let mut f = vec![0u8; 13];
            f[12] = 0x10;
            ch.send_pod::<u8>(&f).expect("send");
            ch.flush().expect("flush");
        },
        |s, ch| {
            let e = s.recv_choices(ch, 100).map(|_| ());
            (e, s.send_cot(ch, 1).map(|_| ()))
        },
    );
    let (e, again) = run.server.output;
    assert!(matches!(e, Err(OtError::Malformed(_))), "{e:?}");
    assert!(is_invalid(&again));
    // Sender-first: the receiver's bits come back short, or with padding bits set.
    for (frame, malformed) in [
        (vec![0u8; 12], false),
        (
            {
                let mut f = vec![0u8; 13];
                f[12] = 0x80;
                f
            },
            true,
        ),
    ] {
        let run = pooled(
            200,
            move |r, ch| {
                let p = r.recv_correlated_early(ch, 100, 32).expect("early");
                drop(p);
                ch.send_pod::<u8>(&frame).expect("send");
                ch.flush().expect("flush");
            },
            |s, ch| {
                let p = s
                    .send_correlated_early(ch, &[5u64; 100], 32)
                    .expect("early");
                ch.flush().expect("flush");
                let e = s.finish_early(ch, p).map(|_| ());
                (e, s.send_cot(ch, 1).map(|_| ()))
            },
        );
        let (e, again) = run.server.output;
        if malformed {
            assert!(matches!(e, Err(OtError::Malformed(_))), "{e:?}");
        } else {
            assert!(matches!(e, Err(OtError::Net(_))), "{e:?}");
        }
        assert!(is_invalid(&again));
    }
    // Sender-first words cut short.
    let run = pooled(
        200,
        |r, ch| {
            let e = r.recv_correlated_early(ch, 100, 32).map(|_| ());
            (e, r.recv_cot(ch, &[true]).map(|_| ()))
        },
        |_s, ch| {
            ch.send_pod::<u8>(&[1u8; 399]).expect("send");
            ch.flush().expect("flush");
        },
    );
    let (e, again) = run.client.output;
    assert!(matches!(e, Err(OtError::Net(_))), "{e:?}");
    assert!(is_invalid(&again));
    // Lengths that do not match the pending batch are argument errors.
    let run = pooled(
        20,
        |r, ch| {
            let p = r.send_choices(ch, &[true; 3]).expect("choices");
            ch.flush().expect("flush");
            let q = r.recv_correlated_early(ch, 2, 8).expect("early");
            let e = r.finish_early(ch, q, &[true; 3]).map(|_| ());
            drop(p);
            e
        },
        |s, ch| {
            let p = s.recv_choices(ch, 3).expect("read");
            let e = s.send_correlated_answer(ch, p, &[1, 2], 8).map(|_| ());
            let q = s.send_correlated_early(ch, &[1, 2], 8).expect("early");
            ch.flush().expect("flush");
            drop(q);
            e
        },
    );
    assert!(is_invalid(&run.client.output), "{:?}", run.client.output);
    assert!(is_invalid(&run.server.output), "{:?}", run.server.output);
}

#[test]
fn random_rot_on_pool_bits_sends_nothing_and_matches_definition() {
    // Offline fill of 1000; the calls take 600 then 700 (the second refills 300, offline).
    let r = pooled(
        1000,
        |r, ch| {
            ch.set_phase(Phase::Offline);
            let mut out = Vec::new();
            for n in [600usize, 0, 700] {
                let mut c = vec![false; n];
                let mut k = vec![Block::ZERO; n];
                r.take_random_rot_into(ch, &mut c, &mut k).unwrap();
                out.push((c, k));
            }
            // Mismatched lengths: an argument error that does not poison the instance.
            let mut c = vec![false; 2];
            let mut k = vec![Block::ZERO; 3];
            assert!(r.take_random_rot_into(ch, &mut c, &mut k).is_err());
            assert_eq!(r.consumed(), 1300);
            (out, ch.cost())
        },
        |s, ch| {
            ch.set_phase(Phase::Offline);
            let mut out = Vec::new();
            for n in [600usize, 0, 700] {
                let mut k = vec![[Block::ZERO; 2]; n];
                s.take_random_rot_into(ch, &mut k).unwrap();
                out.push(k);
            }
            // Same keys as a derandomised ROT would give for the same index: d_j = 0.
            (out, s.delta())
        },
    );
    let ((got, cost), (sent, delta)) = (r.client.output, r.server.output);
    assert_eq!(delta, DELTA);
    // Nothing online; offline only the fills (IKNP: 16 B per COT, padded to whole 128-row blocks).
    assert_eq!(cost.online.bytes(), 0);
    for ((c, k), s) in got.iter().zip(&sent) {
        assert_eq!(c.len(), s.len());
        for j in 0..c.len() {
            assert_eq!(k[j], s[j][c[j] as usize], "chosen key");
            assert_ne!(k[j], s[j][1 - c[j] as usize], "other key");
            assert_ne!(s[j][0] ^ s[j][1], DELTA, "keys are hashed");
        }
    }
    let ones: usize = got.iter().flat_map(|(c, _)| c).filter(|b| **b).count();
    assert!(
        (450..=850).contains(&ones),
        "pool bits look random: {ones} of 1300"
    );
}

#[test]
fn random_one_of_n_on_pool_bits_sends_nothing_and_matches_definition() {
    for n in [2usize, 4, 16, 256] {
        let count = 300;
        let r = pooled(
            100,
            move |r, ch| {
                ch.set_phase(Phase::Offline);
                assert!(r.take_random_n(ch, 6, 3).is_err(), "N not a power of two");
                let got = r.take_random_n(ch, n, count).unwrap();
                (got, ch.cost())
            },
            move |s, ch| {
                ch.set_phase(Phase::Offline);
                assert!(s.take_random_n(ch, 6, 3).is_err());
                s.take_random_n(ch, n, count).unwrap()
            },
        );
        let ((choices, keys), cost) = r.client.output;
        let all = r.server.output;
        assert_eq!(cost.online.bytes(), 0);
        assert_eq!(all.len(), count * n);
        let mut seen = vec![false; n];
        for j in 0..count {
            let c = choices[j] as usize;
            assert!(c < n);
            seen[c] = true;
            for x in 0..n {
                assert_eq!(keys[j] == all[j * n + x], x == c, "N {n} row {j} key {x}");
            }
        }
        if n <= 16 {
            assert!(
                seen.iter().all(|s| *s),
                "N {n}: every choice occurs in 300 rows"
            );
        }
    }
}

/// `bootstrap_reverse` on both sides gives pools running the other way, with the same filler,
/// whose COTs satisfy the correlation under the new sender's Δ (which is not the first pool's)
/// across a refill; 128 COTs of the first pool are spent on it.
#[test]
fn reverse_bootstrap_gives_working_pools_the_other_way() {
    let n = 1000;
    let mut prg = Prg::from_seed(Block(77));
    let choices = prg.bits(n);
    let c2 = choices.clone();
    let run = pooled(
        128,
        move |r, ch| {
            let mut back = r.bootstrap_reverse(ch, &mut Prg::new()).expect("reverse");
            assert_eq!(back.source(), SOURCE);
            assert_eq!(r.available(), 0);
            let d = back.delta();
            (d, back.send_cot(ch, n).expect("cot"))
        },
        move |s, ch| {
            let mut back = s.bootstrap_reverse(ch, &mut Prg::new()).expect("reverse");
            assert_eq!(back.source(), SOURCE);
            back.recv_cot(ch, &c2).expect("cot")
        },
    );
    let (delta, k0) = run.client.output;
    let got = run.server.output;
    assert_ne!(delta, DELTA);
    assert_ne!(delta, Block::ZERO);
    for j in 0..n {
        let want = if choices[j] { k0[j] ^ delta } else { k0[j] };
        assert_eq!(got[j], want, "COT {j}");
    }
}
