//! End-to-end tests of every OT flavour over the in-memory harness, plus hostile peers.
//!
//! Each correctness test checks the defining relation for *every* OT of a batch with random
//! choices, on sizes that leave a partial 128-row block and cross a chunk boundary, and over two
//! calls on one instance (so the PRG streams and tweak counters must stay in step).
use secinfer_net::{simulate, Channel, NetError, Phase};
use secinfer_ot::*;

fn bits_of(prg: &mut Prg, n: usize) -> Vec<bool> {
    prg.bits(n)
}

/// Sizes: tiny, partial block, and one crossing the chunk boundary.
const SIZES: [usize; 3] = [1, 1000, CHUNK_ROWS + 333];

#[test]
fn base_ot_receiver_gets_chosen_key_and_keys_differ() {
    let mut prg = Prg::from_seed(Block(1));
    let choices = bits_of(&mut prg, 128);
    let c2 = choices.clone();
    let run = simulate(
        move |ch| base_ot_receive(ch, &c2, &mut Prg::new()),
        |ch| base_ot_send(ch, 128, &mut Prg::new()),
    );
    let got = run.client.output.expect("receiver");
    let keys = run.server.output.expect("sender");
    assert_eq!(got.len(), 128);
    for i in 0..128 {
        assert_eq!(got[i], keys[i][choices[i] as usize], "base OT {i}");
        assert_ne!(keys[i][0], keys[i][1], "base OT {i}: equal keys");
        assert_ne!(got[i], keys[i][1 - choices[i] as usize]);
    }
    // One message each way: 32 bytes of A, 32 per B.
    assert_eq!(run.server.cost.total().bytes_sent, 32);
    assert_eq!(run.client.cost.total().bytes_sent, 32 * 128);
}

#[test]
fn cot_correlation_holds_for_every_pair() {
    let mut prg = Prg::from_seed(Block(2));
    let batches: Vec<Vec<bool>> = SIZES.iter().map(|&n| bits_of(&mut prg, n)).collect();
    let b2 = batches.clone();
    let delta = Block(0x1234_5678_9abc_def0_0fed_cba9_8765_4321);
    let run = simulate(
        move |ch| {
            let mut r = OtExtReceiver::setup(ch, &mut Prg::new()).expect("setup");
            ch.set_phase(Phase::Offline);
            b2.iter()
                .map(|c| r.recv_cot(ch, c).expect("recv_cot"))
                .collect::<Vec<_>>()
        },
        move |ch| {
            let mut s = OtExtSender::setup_with_delta(ch, &mut Prg::new(), delta).expect("setup");
            ch.set_phase(Phase::Offline);
            assert_eq!(s.delta(), delta);
            SIZES
                .iter()
                .map(|&n| s.send_cot(ch, n).expect("send_cot"))
                .collect::<Vec<_>>()
        },
    );
    let mut all = std::collections::HashSet::new();
    for ((t, q), c) in run
        .client
        .output
        .iter()
        .zip(&run.server.output)
        .zip(&batches)
    {
        assert_eq!(t.len(), c.len());
        assert_eq!(q.len(), c.len());
        for j in 0..c.len() {
            assert_eq!(t[j], q[j] ^ delta.and_bit(c[j]), "COT {j} of {}", c.len());
            all.insert(q[j]);
        }
    }
    // The sender's m0 are pseudorandom: no repeats across the calls.
    assert_eq!(all.len(), SIZES.iter().sum::<usize>());
    // IKNP's 128 bits per OT, plus the padding of each call's last 128-row block.
    let total = SIZES
        .iter()
        .map(|n| n.div_ceil(128) * 128 * 16)
        .sum::<usize>() as u64;
    assert_eq!(run.client.cost.offline.bytes_sent, total);
    assert_eq!(run.client.cost.setup.bytes_sent, 32);
    assert_eq!(run.server.cost.setup.bytes_sent, 32 * 128);
}

#[test]
fn rot_receiver_gets_chosen_key_and_pair_keys_differ() {
    let mut prg = Prg::from_seed(Block(3));
    let batches: Vec<Vec<bool>> = SIZES.iter().map(|&n| bits_of(&mut prg, n)).collect();
    let b2 = batches.clone();
    let run = simulate(
        move |ch| {
            let mut r = OtExtReceiver::setup(ch, &mut Prg::new()).expect("setup");
            ch.set_phase(Phase::Offline);
            b2.iter()
                .map(|c| r.recv_rot(ch, c).expect("recv_rot"))
                .collect::<Vec<_>>()
        },
        move |ch| {
            let mut s = OtExtSender::setup(ch, &mut Prg::new()).expect("setup");
            ch.set_phase(Phase::Offline);
            SIZES
                .iter()
                .map(|&n| s.send_rot(ch, n).expect("send_rot"))
                .collect::<Vec<_>>()
        },
    );
    let mut seen = std::collections::HashSet::new();
    for ((got, keys), c) in run
        .client
        .output
        .iter()
        .zip(&run.server.output)
        .zip(&batches)
    {
        for j in 0..c.len() {
            assert_eq!(got[j], keys[j][c[j] as usize], "ROT {j}");
            assert_ne!(keys[j][0], keys[j][1], "ROT {j}: equal keys");
            // The keys are hashed: k1 ⊕ k0 is not the global Δ.
            assert!(
                seen.insert(keys[j][0] ^ keys[j][1]),
                "ROT {j}: key difference repeats"
            );
        }
    }
}

#[test]
fn chosen_block_ot_delivers_chosen_messages() {
    let mut prg = Prg::from_seed(Block(4));
    let n = CHUNK_ROWS + 77;
    let choices = bits_of(&mut prg, n);
    let msgs: Vec<[Block; 2]> = (0..n)
        .map(|_| [prg.next_block(), prg.next_block()])
        .collect();
    let (c2, m2) = (choices.clone(), msgs.clone());
    let run = simulate(
        move |ch| {
            let mut r = OtExtReceiver::setup(ch, &mut Prg::new()).expect("setup");
            ch.set_phase(Phase::Offline);
            (
                r.recv_chosen(ch, &c2[..5]).expect("first"),
                r.recv_chosen(ch, &c2).expect("second"),
            )
        },
        move |ch| {
            let mut s = OtExtSender::setup(ch, &mut Prg::new()).expect("setup");
            ch.set_phase(Phase::Offline);
            s.send_chosen(ch, &m2[..5]).expect("first");
            s.send_chosen(ch, &m2).expect("second");
        },
    );
    let (first, got) = run.client.output;
    for j in 0..5 {
        assert_eq!(first[j], msgs[j][choices[j] as usize]);
    }
    for j in 0..n {
        assert_eq!(got[j], msgs[j][choices[j] as usize], "chosen OT {j}");
    }
}

#[test]
fn chosen_u64_ot_delivers_chosen_messages_at_every_width() {
    let mut prg = Prg::from_seed(Block(5));
    let n = 3000;
    let choices = bits_of(&mut prg, n);
    let widths = [1u32, 7, 8, 37, 63, 64];
    let msgs: Vec<Vec<[u64; 2]>> = widths
        .iter()
        .map(|&b| {
            let m = if b == 64 { u64::MAX } else { (1 << b) - 1 };
            (0..n)
                .map(|_| {
                    [
                        prg.next_block().low_u64() & m,
                        prg.next_block().low_u64() & m,
                    ]
                })
                .collect()
        })
        .collect();
    let (c2, m2) = (choices.clone(), msgs.clone());
    let run = simulate(
        move |ch| {
            let mut r = OtExtReceiver::setup(ch, &mut Prg::new()).expect("setup");
            ch.set_phase(Phase::Offline);
            widths
                .iter()
                .map(|&b| r.recv_chosen_u64(ch, &c2, b).expect("recv"))
                .collect::<Vec<_>>()
        },
        move |ch| {
            let mut s = OtExtSender::setup(ch, &mut Prg::new()).expect("setup");
            ch.set_phase(Phase::Offline);
            for (m, &b) in m2.iter().zip(&widths) {
                s.send_chosen_u64(ch, m, b).expect("send");
            }
            s
        },
    );
    for ((got, m), &b) in run.client.output.iter().zip(&msgs).zip(&widths) {
        for j in 0..n {
            assert_eq!(got[j], m[j][choices[j] as usize], "{b}-bit chosen OT {j}");
        }
    }
    // Packed on the wire: per call 2·n·bits bits back (plus nothing else from the sender).
    let back: u64 = widths
        .iter()
        .map(|&b| (2 * n as u64 * b as u64).div_ceil(8))
        .sum();
    assert_eq!(run.server.cost.offline.bytes_sent, back);
}

#[test]
fn correlated_u64_ot_is_additively_correlated() {
    let mut prg = Prg::from_seed(Block(6));
    let n = CHUNK_ROWS + 5;
    let choices = bits_of(&mut prg, n);
    let deltas: Vec<u64> = (0..n).map(|_| prg.next_block().low_u64()).collect();
    for bits in [1u32, 17, 64] {
        let (c2, d2) = (choices.clone(), deltas.clone());
        let run = simulate(
            move |ch| {
                let mut r = OtExtReceiver::setup(ch, &mut Prg::new()).expect("setup");
                ch.set_phase(Phase::Offline);
                r.recv_correlated_u64(ch, &c2, bits).expect("recv")
            },
            move |ch| {
                let mut s = OtExtSender::setup(ch, &mut Prg::new()).expect("setup");
                ch.set_phase(Phase::Offline);
                s.send_correlated_u64(ch, &d2, bits).expect("send")
            },
        );
        let m = if bits == 64 {
            u64::MAX
        } else {
            (1u64 << bits) - 1
        };
        let (got, xs) = (&run.client.output, &run.server.output);
        for j in 0..n {
            assert!(xs[j] <= m && got[j] <= m);
            let want = xs[j].wrapping_add(deltas[j] * choices[j] as u64) & m;
            assert_eq!(got[j], want, "{bits}-bit additive OT {j}");
        }
        // x is not constant (it is a hash output).
        assert!(xs.iter().any(|&x| x != xs[0]));
        assert_eq!(
            run.server.cost.offline.bytes_sent,
            (n as u64 * bits as u64).div_ceil(8)
        );
    }
}

#[test]
fn kk13_random_receiver_gets_its_key_and_keys_differ() {
    let mut prg = Prg::from_seed(Block(7));
    for n in [2usize, 16, 256] {
        let count = 700;
        let choices: Vec<u8> = (0..count).map(|_| prg.below(n as u64) as u8).collect();
        let c2 = choices.clone();
        let run = simulate(
            move |ch| {
                let mut r = KkReceiver::setup(ch, &mut Prg::new()).expect("setup");
                ch.set_phase(Phase::Offline);
                let a = r.recv_random(ch, n, &c2[..3]).expect("first");
                (a, r.recv_random(ch, n, &c2).expect("second"))
            },
            move |ch| {
                let mut s = KkSender::setup(ch, &mut Prg::new()).expect("setup");
                ch.set_phase(Phase::Offline);
                let a = s.send_random(ch, n, 3).expect("first");
                (a, s.send_random(ch, n, count).expect("second"))
            },
        );
        let (r1, r2) = run.client.output;
        let (s1, s2) = run.server.output;
        for j in 0..3 {
            assert_eq!(r1[j], s1[j * n + choices[j] as usize]);
        }
        for j in 0..count {
            assert_eq!(r2[j], s2[j * n + choices[j] as usize], "1-of-{n} OT {j}");
            let row: std::collections::HashSet<_> = s2[j * n..(j + 1) * n].iter().collect();
            assert_eq!(row.len(), n, "1-of-{n} OT {j}: keys repeat");
        }
    }
}

#[test]
fn kk13_chosen_u64_delivers_chosen_messages() {
    let mut prg = Prg::from_seed(Block(8));
    for (n, bits) in [(2usize, 1u32), (16, 8), (256, 64), (5, 13)] {
        let count = 900;
        let m = if bits == 64 {
            u64::MAX
        } else {
            (1u64 << bits) - 1
        };
        let choices: Vec<u8> = (0..count).map(|_| prg.below(n as u64) as u8).collect();
        let msgs: Vec<u64> = (0..count * n)
            .map(|_| prg.next_block().low_u64() & m)
            .collect();
        let (c2, m2) = (choices.clone(), msgs.clone());
        let run = simulate(
            move |ch| {
                let mut r = KkReceiver::setup(ch, &mut Prg::new()).expect("setup");
                ch.set_phase(Phase::Offline);
                r.recv_u64(ch, n, &c2, bits).expect("recv")
            },
            move |ch| {
                let mut s = KkSender::setup(ch, &mut Prg::new()).expect("setup");
                ch.set_phase(Phase::Offline);
                s.send_u64(ch, n, &m2, bits).expect("send");
            },
        );
        for j in 0..count {
            assert_eq!(
                run.client.output[j],
                msgs[j * n + choices[j] as usize],
                "1-of-{n} {bits}-bit OT {j}"
            );
        }
        assert_eq!(
            run.server.cost.offline.bytes_sent,
            ((count * n) as u64 * bits as u64).div_ceil(8)
        );
    }
}

#[test]
fn zero_length_calls_send_nothing() {
    let run = simulate(
        |ch| {
            let mut r = OtExtReceiver::setup(ch, &mut Prg::new()).expect("setup");
            ch.set_phase(Phase::Offline);
            let before = ch.cost().total().bytes_sent;
            assert!(r.recv_cot(ch, &[]).expect("cot").is_empty());
            assert!(r.recv_chosen_u64(ch, &[], 8).expect("chosen").is_empty());
            ch.cost().total().bytes_sent - before
        },
        |ch| {
            let mut s = OtExtSender::setup(ch, &mut Prg::new()).expect("setup");
            ch.set_phase(Phase::Offline);
            assert!(s.send_cot(ch, 0).expect("cot").is_empty());
            s.send_chosen_u64(ch, &[], 8).expect("chosen");
        },
    );
    assert_eq!(run.client.output, 0);
}

// ---------------------------------------------------------------- hostile peers and bad input

fn is_malformed<T>(r: &Result<T, OtError>) -> bool {
    matches!(r, Err(OtError::Malformed(_)))
}
fn is_net<T>(r: &Result<T, OtError>) -> bool {
    matches!(r, Err(OtError::Net(_)))
}

#[test]
fn base_ot_rejects_noncanonical_identity_and_short_points() {
    // Non-canonical encoding (not reduced mod p), the identity, and a short frame of A.
    for bad in [vec![0xffu8; 32], vec![0u8; 32], vec![1u8; 31]] {
        let b2 = bad.clone();
        let run = simulate(
            move |ch| base_ot_receive(ch, &[true, false], &mut Prg::new()),
            move |ch| ch.send_pod::<u8>(&b2),
        );
        let r = run.client.output;
        if bad.len() == 32 {
            assert!(is_malformed(&r), "A = {:?}: {:?}", &bad[..4], r.err());
        } else {
            assert!(matches!(
                r,
                Err(OtError::Net(NetError::UnexpectedLength { .. }))
            ));
        }
    }
    // The sender gets one invalid B among valid ones.
    let run = simulate(
        |ch| {
            let _a = ch.recv_pod::<u8>(32)?;
            let mut frame = Vec::new();
            frame.extend_from_slice(curve25519_valid_point().as_slice());
            frame.extend_from_slice(&[0xff; 32]);
            ch.send_pod::<u8>(&frame)
        },
        |ch| base_ot_send(ch, 2, &mut Prg::new()),
    );
    assert!(is_malformed(&run.server.output));
    // Too many B's for the agreed count.
    let run = simulate(
        |ch| {
            let _a = ch.recv_pod::<u8>(32)?;
            ch.send_pod::<u8>(&[0u8; 96])
        },
        |ch| base_ot_send(ch, 2, &mut Prg::new()),
    );
    assert!(matches!(
        run.server.output,
        Err(OtError::Net(NetError::UnexpectedLength { .. }))
    ));
}

/// A valid encoding: the Ristretto basepoint.
fn curve25519_valid_point() -> [u8; 32] {
    [
        0xe2, 0xf2, 0xae, 0x0a, 0x6a, 0xbc, 0x4e, 0x71, 0xa8, 0x84, 0xa9, 0x61, 0xc5, 0x00, 0x51,
        0x5f, 0x58, 0xe3, 0x0b, 0x6a, 0xa5, 0x82, 0xdd, 0x8d, 0xb6, 0xa6, 0x59, 0x45, 0xe0, 0x8d,
        0x2d, 0x76,
    ]
}

/// Completes the base OTs honestly (as IKNP receiver = base-OT sender) and returns the channel
/// for hostile extension traffic.
#[test]
fn extension_sender_survives_truncated_oversized_and_missing_u() {
    for (name, frame_len) in [
        ("truncated", 16 * 128 - 1),
        ("oversized", 16 * 128 * 2),
        ("empty", 0),
    ] {
        let run = simulate(
            move |ch| {
                let _keys = base_ot_send(ch, 128, &mut Prg::new()).expect("base");
                ch.send_pod::<u8>(&vec![0xa5u8; frame_len]).expect("send");
            },
            |ch| {
                let mut s = OtExtSender::setup(ch, &mut Prg::new()).expect("setup");
                ch.set_phase(Phase::Offline);
                let r = s.send_cot(ch, 100);
                // Poisoned afterwards: out of step with the peer.
                let again = s.send_cot(ch, 1);
                (r.map(|_| ()), again.map(|_| ()))
            },
        );
        let (r, again) = run.server.output;
        assert!(is_net(&r), "{name}: {:?}", r.err());
        assert!(
            matches!(again, Err(OtError::InvalidArgument(_))),
            "{name}: not poisoned"
        );
    }
    // The peer hangs up mid-stream (after the first of two chunks).
    let run = simulate(
        |ch| {
            let mut r = OtExtReceiver::setup(ch, &mut Prg::new()).expect("setup");
            ch.set_phase(Phase::Offline);
            let _ = r.recv_cot(ch, &vec![true; CHUNK_ROWS]);
        },
        |ch| {
            let mut s = OtExtSender::setup(ch, &mut Prg::new()).expect("setup");
            ch.set_phase(Phase::Offline);
            s.send_cot(ch, CHUNK_ROWS + 1).map(|_| ())
        },
    );
    assert!(matches!(
        run.server.output,
        Err(OtError::Net(NetError::Closed))
    ));
}

#[test]
fn extension_receiver_survives_bad_answers() {
    // Chosen-block OT: the answer frame has the wrong length, or never comes.
    for frame_len in [0usize, 31, 16 * 2 * 10 + 16] {
        let run = simulate(
            |ch| {
                let mut r = OtExtReceiver::setup(ch, &mut Prg::new()).expect("setup");
                ch.set_phase(Phase::Offline);
                r.recv_chosen(ch, &[true; 10]).map(|_| ())
            },
            move |ch| {
                let _k = base_ot_receive(ch, &[false; 128], &mut Prg::new()).expect("base");
                let _u = ch.recv_pod::<Block>(128).expect("u");
                ch.send_pod::<u8>(&vec![7u8; frame_len]).expect("send");
            },
        );
        assert!(
            is_net(&run.client.output),
            "len {frame_len}: {:?}",
            run.client.output.err()
        );
    }
    // Packed answers of a wrong length for u64 OT, correlated OT and KK13.
    let run = simulate(
        |ch| {
            let mut r = OtExtReceiver::setup(ch, &mut Prg::new()).expect("setup");
            ch.set_phase(Phase::Offline);
            let a = r.recv_chosen_u64(ch, &[true; 10], 8).map(|_| ());
            let mut r = OtExtReceiver::setup(ch, &mut Prg::new()).expect("setup");
            ch.set_phase(Phase::Offline);
            let b = r.recv_correlated_u64(ch, &[true; 10], 8).map(|_| ());
            (a, b)
        },
        |ch| {
            for _ in 0..2 {
                let _k = base_ot_receive(ch, &[true; 128], &mut Prg::new()).expect("base");
                let _u = ch.recv_pod::<Block>(128).expect("u");
                ch.send_pod::<u8>(&[1u8; 21]).expect("send");
            }
        },
    );
    assert!(is_net(&run.client.output.0));
    assert!(is_net(&run.client.output.1));
    let run = simulate(
        |ch| {
            let mut r = KkReceiver::setup(ch, &mut Prg::new()).expect("setup");
            ch.set_phase(Phase::Offline);
            r.recv_u64(ch, 16, &[3u8; 10], 8).map(|_| ())
        },
        |ch| {
            let _k = base_ot_receive(ch, &[true; 256], &mut Prg::new()).expect("base");
            let _u = ch.recv_pod::<Block>(256).expect("u");
            ch.send_pod::<u8>(&[1u8; 16 * 10 + 1]).expect("send");
        },
    );
    assert!(is_net(&run.client.output));
}

#[test]
fn bad_arguments_are_typed_errors_and_do_not_poison() {
    let run = simulate(
        |ch| {
            let mut r = OtExtReceiver::setup(ch, &mut Prg::new()).expect("setup");
            ch.set_phase(Phase::Offline);
            let mut k = KkReceiver::setup(ch, &mut Prg::new()).expect("setup");
            ch.set_phase(Phase::Offline);
            let errs = vec![
                r.recv_chosen_u64(ch, &[true], 0).is_err(),
                r.recv_correlated_u64(ch, &[true], 65).is_err(),
                k.recv_u64(ch, 16, &[16], 8).is_err(),
                k.recv_random(ch, 1, &[0]).is_err(),
                k.recv_random(ch, 257, &[0]).is_err(),
            ];
            // Still in step: a real call works.
            (errs, r.recv_cot(ch, &[true, false]).expect("cot"))
        },
        |ch| {
            let mut s = OtExtSender::setup(ch, &mut Prg::new()).expect("setup");
            ch.set_phase(Phase::Offline);
            let mut k = KkSender::setup(ch, &mut Prg::new()).expect("setup");
            ch.set_phase(Phase::Offline);
            let errs = vec![
                matches!(
                    s.send_chosen_u64(ch, &[[256, 0]], 8),
                    Err(OtError::InvalidArgument(_))
                ),
                matches!(
                    k.send_u64(ch, 16, &[0; 17], 8),
                    Err(OtError::InvalidArgument(_))
                ),
                matches!(
                    k.send_u64(ch, 2, &[0, 2], 1),
                    Err(OtError::InvalidArgument(_))
                ),
                matches!(k.send_random(ch, 300, 1), Err(OtError::InvalidArgument(_))),
                matches!(
                    OtExtSender::setup_with_delta(
                        &mut secinfer_net::mem_pair().0,
                        &mut Prg::new(),
                        Block::ZERO
                    ),
                    Err(OtError::InvalidArgument(_))
                ),
            ];
            (errs, s.delta(), s.send_cot(ch, 2).expect("cot"))
        },
    );
    let (rerrs, t) = run.client.output;
    let (serrs, delta, q) = run.server.output;
    assert!(rerrs.iter().all(|&e| e), "{rerrs:?}");
    assert!(serrs.iter().all(|&e| e), "{serrs:?}");
    assert_eq!(t[0], q[0] ^ delta);
    assert_eq!(t[1], q[1]);
}

/// Raw bytes over real loopback TCP: the honest OT party reads length-prefixed frames from a
/// socket whose other end writes whatever it likes.
fn against_raw_tcp<T: Send>(
    hostile: impl FnOnce(&mut std::net::TcpStream) + Send,
    honest: impl FnOnce(&mut secinfer_net::TcpChannel) -> T + Send,
) -> T {
    use std::io::Write;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    std::thread::scope(|s| {
        let h = s.spawn(move || {
            let mut raw = std::net::TcpStream::connect(addr).expect("connect");
            hostile(&mut raw);
            let _ = raw.flush();
            // Hang up: the honest side must see an error, not wait forever.
        });
        let (stream, _) = listener.accept().expect("accept");
        let opts = secinfer_net::TcpOptions {
            read_timeout: Some(std::time::Duration::from_secs(20)),
            ..Default::default()
        };
        let mut ch = secinfer_net::TcpChannel::new(stream, &opts).expect("channel");
        let out = honest(&mut ch);
        h.join().expect("hostile thread");
        out
    })
}

#[test]
fn hostile_tcp_peer_oversized_prefix_truncated_frame_and_garbage_point() {
    use std::io::Write;
    // A length prefix far above the frame limit, where the base-OT point A should come.
    let r = against_raw_tcp(
        |raw| raw.write_all(&u32::MAX.to_le_bytes()).expect("write"),
        |ch| OtExtSender::setup(ch, &mut Prg::new()).map(|_| ()),
    );
    assert!(
        matches!(r, Err(OtError::Net(NetError::FrameTooLarge { .. }))),
        "{:?}",
        r.err()
    );
    // A frame announcing 32 bytes that stops after 10.
    let r = against_raw_tcp(
        |raw| {
            raw.write_all(&32u32.to_le_bytes()).expect("write");
            raw.write_all(&[9u8; 10]).expect("write");
        },
        |ch| OtExtSender::setup(ch, &mut Prg::new()).map(|_| ()),
    );
    assert!(is_net(&r), "{:?}", r.err());
    // A well-framed 32-byte garbage point.
    let r = against_raw_tcp(
        |raw| {
            raw.write_all(&32u32.to_le_bytes()).expect("write");
            raw.write_all(&[0xee; 32]).expect("write");
        },
        |ch| OtExtSender::setup(ch, &mut Prg::new()).map(|_| ()),
    );
    assert!(is_malformed(&r), "{:?}", r.err());
}

#[test]
fn garbage_u_of_the_right_length_is_survived() {
    // Semi-honest OT cannot detect a wrong u; it must still neither panic nor misbehave.
    let run = simulate(
        |ch| {
            let _keys = base_ot_send(ch, 128, &mut Prg::new()).expect("base");
            ch.send_pod::<u8>(&vec![0x5au8; 16 * 128 * 2])
                .expect("send");
        },
        |ch| {
            let mut s = OtExtSender::setup(ch, &mut Prg::new()).expect("setup");
            s.send_cot(ch, 200).map(|q| q.len())
        },
    );
    assert_eq!(
        run.server
            .output
            .expect("garbage of the right length decodes"),
        200
    );
}

#[test]
fn kk13_crosses_chunk_boundaries_in_step() {
    // Two calls, the second spanning two extension chunks with a partial last 128-row block.
    let mut prg = Prg::from_seed(Block(12));
    let count = CHUNK_ROWS + 129;
    let choices: Vec<u8> = (0..count).map(|_| prg.below(3) as u8).collect();
    let msgs: Vec<u64> = (0..3 * count)
        .map(|_| prg.next_block().low_u64() & 0xfff)
        .collect();
    let (c2, m2) = (choices.clone(), msgs.clone());
    let run = simulate(
        move |ch| {
            let mut r = KkReceiver::setup(ch, &mut Prg::new()).expect("setup");
            let a = r.recv_random(ch, 3, &c2[..10]).expect("first");
            (a, r.recv_u64(ch, 3, &c2, 12).expect("second"))
        },
        move |ch| {
            let mut s = KkSender::setup(ch, &mut Prg::new()).expect("setup");
            let a = s.send_random(ch, 3, 10).expect("first");
            s.send_u64(ch, 3, &m2, 12).expect("second");
            a
        },
    );
    let (r1, got) = run.client.output;
    for j in 0..10 {
        assert_eq!(r1[j], run.server.output[3 * j + choices[j] as usize]);
    }
    for j in 0..count {
        assert_eq!(got[j], msgs[3 * j + choices[j] as usize], "1-of-3 OT {j}");
    }
}

/// The second direction of a session bootstrapped from the first: 128 chosen IKNP OTs carry
/// the base OTs of the reverse extension, whose COTs then satisfy `t_j = q_j ⊕ c_j·Δ'`.
#[test]
fn reverse_extension_from_chosen_ots() {
    let r = secinfer_net::simulate(
        |ch| {
            // Client: receiver of the first extension, sender of the second.
            let mut prg = Prg::new();
            let mut ext = OtExtReceiver::setup(ch, &mut prg).unwrap();
            let delta = Block(0x1234_5678_9abc_def0_0fed_cba9_8765_4321);
            let c: Vec<bool> = (0..128).map(|i| (delta.0 >> i) & 1 == 1).collect();
            let keys = ext.recv_chosen(ch, &c).unwrap();
            assert!(OtExtSender::from_base_ots(Block::ZERO, &keys).is_err());
            assert!(OtExtSender::from_base_ots(delta, &keys[..127]).is_err());
            let mut back = OtExtSender::from_base_ots(delta, &keys).unwrap();
            (back.send_cot(ch, 1000).unwrap(), delta)
        },
        |ch| {
            let mut prg = Prg::new();
            let mut ext = OtExtSender::setup(ch, &mut prg).unwrap();
            let seeds: Vec<[Block; 2]> = (0..128)
                .map(|_| [prg.next_block(), prg.next_block()])
                .collect();
            ext.send_chosen(ch, &seeds).unwrap();
            assert!(OtExtReceiver::from_base_ots(&seeds[..5]).is_err());
            let mut back = OtExtReceiver::from_base_ots(&seeds).unwrap();
            let choices = prg.bits(1000);
            let t = back.recv_cot(ch, &choices).unwrap();
            (t, choices)
        },
    );
    let ((q, delta), (t, c)) = (r.client.output, r.server.output);
    for j in 0..1000 {
        let want = if c[j] { q[j] ^ delta } else { q[j] };
        assert_eq!(t[j], want, "COT {j}");
    }
}
