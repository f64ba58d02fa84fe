//! SoftSpokenOT: the COT correlation for every tested `k` and awkward sizes over several calls on
//! one instance, wire cost against IKNP's through the channel meter, hostile peers, bad `k`.
use secinfer_net::{simulate, Channel, NetError, Phase};
use secinfer_ot::*;

const DELTA: Block = Block(0x1234_5678_9abc_def0_0fed_cba9_8765_4321);
/// Not multiples of 128, one crossing the chunk boundary; run in sequence on one instance.
const SIZES: [usize; 5] = [1, 1000, 129, CHUNK_ROWS + 333, 0];

/// Runs `SIZES` as COT calls; returns (receiver outputs, sender outputs, client cost, server
/// cost), the offline phase being the extension calls.
#[allow(clippy::type_complexity)]
fn run_cots(
    k: u32,
    choices: Vec<Vec<bool>>,
) -> (
    Vec<Vec<Block>>,
    Vec<Vec<Block>>,
    secinfer_net::Cost,
    secinfer_net::Cost,
) {
    let run = simulate(
        move |ch| {
            let mut r = SoftSpokenReceiver::setup(ch, &mut Prg::new(), k).expect("setup");
            assert_eq!(r.k(), k);
            ch.set_phase(Phase::Offline);
            choices
                .iter()
                .map(|c| r.recv_cot(ch, c).expect("recv_cot"))
                .collect::<Vec<_>>()
        },
        move |ch| {
            let mut s =
                SoftSpokenSender::setup_with_delta(ch, &mut Prg::new(), DELTA, k).expect("setup");
            assert_eq!(s.delta(), DELTA);
            ch.set_phase(Phase::Offline);
            SIZES
                .iter()
                .map(|&n| s.send_cot(ch, n).expect("send_cot"))
                .collect::<Vec<_>>()
        },
    );
    (
        run.client.output,
        run.server.output,
        run.client.cost,
        run.server.cost,
    )
}

/// Receiver → sender bytes of an `n`-COT call with `cols` correction bits per row.
fn ext_bytes(n: usize, cols: usize) -> u64 {
    let full = n / CHUNK_ROWS;
    let rest = n % CHUNK_ROWS;
    (cols * 16 * (full * CHUNK_ROWS / 128 + rest.div_ceil(128))) as u64
}

#[test]
fn cot_correlation_holds_for_every_pair_and_k() {
    for k in [1u32, 2, 3, 4, 5, 8] {
        let mut prg = Prg::from_seed(Block(100 + k as u128));
        let batches: Vec<Vec<bool>> = SIZES.iter().map(|&n| prg.bits(n)).collect();
        let (t, q, client, server) = run_cots(k, batches.clone());
        let mut seen = std::collections::HashSet::new();
        for (i, c) in batches.iter().enumerate() {
            assert_eq!(t[i].len(), c.len());
            assert_eq!(q[i].len(), c.len());
            for j in 0..c.len() {
                assert_eq!(
                    t[i][j],
                    q[i][j] ^ DELTA.and_bit(c[j]),
                    "k {k}: COT {j} of call {i}"
                );
                assert!(seen.insert(q[i][j]), "k {k}: repeated q (stale PRG output)");
            }
        }
        // Wire: ⌈128/k⌉ bits per row, receiver → sender only.
        let cols = 128usize.div_ceil(k as usize);
        let expect: u64 = SIZES.iter().map(|&n| ext_bytes(n, cols)).sum();
        assert_eq!(client.phase(Phase::Offline).bytes_sent, expect, "k {k}");
        assert_eq!(server.phase(Phase::Offline).bytes_sent, 0, "k {k}");
        // Setup: IKNP's base OTs (32 B each way per OT, plus A) and the GGM level sums.
        let ggm = (cols * (k as usize - 1) * 32) as u64
            - if 128 % k == 0 {
                0
            } else {
                32 * (k as u64 - (128 % k) as u64)
            };
        assert_eq!(client.phase(Phase::Setup).bytes_sent, 32 + ggm, "k {k}");
        assert_eq!(server.phase(Phase::Setup).bytes_sent, 32 * 128, "k {k}");
    }
}

#[test]
fn k1_costs_exactly_what_iknp_costs_and_k4_a_quarter() {
    let n = 3 * CHUNK_ROWS + 777;
    let mut prg = Prg::from_seed(Block(7));
    let c = prg.bits(n);
    let c2 = c.clone();
    let iknp = simulate(
        move |ch| {
            let mut r = OtExtReceiver::setup(ch, &mut Prg::new()).expect("setup");
            r.recv_cot(ch, &c2).expect("cot");
        },
        move |ch| {
            let mut s = OtExtSender::setup(ch, &mut Prg::new()).expect("setup");
            s.send_cot(ch, n).expect("cot");
        },
    );
    let mut per_k = Vec::new();
    for k in [1u32, 4] {
        let c2 = c.clone();
        let run = simulate(
            move |ch| {
                let mut r = SoftSpokenReceiver::setup(ch, &mut Prg::new(), k).expect("setup");
                let before = ch.cost().total().bytes_sent;
                r.recv_cot(ch, &c2).expect("cot");
                ch.cost().total().bytes_sent - before
            },
            move |ch| {
                let mut s = SoftSpokenSender::setup(ch, &mut Prg::new(), k).expect("setup");
                s.send_cot(ch, n).expect("cot");
            },
        );
        if k == 1 {
            for (a, b) in [
                (iknp.client.cost.total(), run.client.cost.total()),
                (iknp.server.cost.total(), run.server.cost.total()),
            ] {
                assert_eq!(a.bytes_sent, b.bytes_sent, "k = 1 bytes differ from IKNP");
                assert_eq!(a.messages_sent, b.messages_sent, "k = 1 messages differ");
            }
        }
        per_k.push(run.client.output);
    }
    assert_eq!(per_k[0], ext_bytes(n, 128));
    assert_eq!(per_k[1], ext_bytes(n, 32));
    assert_eq!(per_k[0], 4 * per_k[1]);
}

#[test]
fn bad_k_is_a_typed_error_before_any_traffic() {
    for k in [0u32, 9, 128] {
        let run = simulate(
            move |ch| {
                let r = SoftSpokenReceiver::setup(ch, &mut Prg::new(), k).map(|_| ());
                let p = PooledOtReceiver::setup_with_source(
                    ch,
                    &mut Prg::new(),
                    CotSource::SoftSpoken { k },
                )
                .map(|_| ());
                (r, p, ch.cost().total().bytes_sent)
            },
            move |ch| {
                let s = SoftSpokenSender::setup(ch, &mut Prg::new(), k).map(|_| ());
                let p = PooledOtSender::setup_with_source(
                    ch,
                    &mut Prg::new(),
                    CotSource::SoftSpoken { k },
                )
                .map(|_| ());
                (s, p, ch.cost().total().bytes_sent)
            },
        );
        let (r, p, b) = run.client.output;
        assert!(matches!(r, Err(OtError::InvalidArgument(_))), "k {k}");
        assert!(matches!(p, Err(OtError::InvalidArgument(_))), "k {k}");
        assert_eq!(b, 0);
        let (s, p, b) = run.server.output;
        assert!(matches!(s, Err(OtError::InvalidArgument(_))), "k {k}");
        assert!(matches!(p, Err(OtError::InvalidArgument(_))), "k {k}");
        assert_eq!(b, 0);
    }
}

/// A hostile receiver completes the base OTs and the GGM message honestly, then sends a
/// correction frame of the wrong length: the sender gets a typed `OtError::Net`, never a panic,
/// and refuses further calls.
#[test]
fn sender_survives_short_oversized_and_empty_corrections() {
    for k in [1u32, 4, 8] {
        let cols = 128usize.div_ceil(k as usize);
        // 100 COTs: one 128-row block per chunk = 16·cols bytes.
        for (name, frame_len) in [
            ("short", 16 * cols - 1),
            ("one block short", 16 * (cols - 1)),
            ("oversized", 16 * cols * 2),
            ("empty", 0),
        ] {
            let run = simulate(
                move |ch| {
                    let keys = base_ot_send(ch, 128, &mut Prg::new()).expect("base");
                    // The honest GGM message (reuse the honest constructor on these keys).
                    let _r = SoftSpokenReceiver::from_base_ots(ch, &keys, k).expect("ggm");
                    ch.send_pod::<u8>(&vec![0xa5u8; frame_len]).expect("send");
                },
                move |ch| {
                    let mut s = SoftSpokenSender::setup(ch, &mut Prg::new(), k).expect("setup");
                    let r = s.send_cot(ch, 100);
                    let again = s.send_cot(ch, 1);
                    (r.map(|_| ()), again.map(|_| ()))
                },
            );
            let (r, again) = run.server.output;
            assert!(
                matches!(r, Err(OtError::Net(NetError::UnexpectedLength { .. }))),
                "k {k} {name}: {:?}",
                r.err()
            );
            assert!(
                matches!(again, Err(OtError::InvalidArgument(_))),
                "k {k} {name}: not poisoned"
            );
        }
    }
}

#[test]
fn sender_survives_a_wrong_length_ggm_message() {
    for extra in [-16i64, 16] {
        let run = simulate(
            move |ch| {
                let _keys = base_ot_send(ch, 128, &mut Prg::new()).expect("base");
                // k = 4: 32 chunks · 3 levels · 2 blocks.
                let len = (32 * 3 * 2 * 16) as i64 + extra;
                ch.send_pod::<u8>(&vec![7u8; len as usize]).expect("send");
            },
            |ch| SoftSpokenSender::setup(ch, &mut Prg::new(), 4).map(|_| ()),
        );
        assert!(
            matches!(
                run.server.output,
                Err(OtError::Net(NetError::UnexpectedLength { .. }))
            ),
            "extra {extra}"
        );
    }
}

#[test]
fn receiver_rejects_mismatched_output_buffer_and_wrong_base_count() {
    let run = simulate(
        |ch| {
            let mut r = SoftSpokenReceiver::setup(ch, &mut Prg::new(), 2).expect("setup");
            let mut out = vec![Block::ZERO; 3];
            let e = r.recv_cot_into(ch, &[true, false], &mut out);
            let few = SoftSpokenReceiver::from_base_ots(ch, &[[Block::ZERO; 2]; 3], 2).map(|_| ());
            (e, few)
        },
        |ch| SoftSpokenSender::setup(ch, &mut Prg::new(), 2).map(|_| ()),
    );
    let (e, few) = run.client.output;
    assert!(matches!(e, Err(OtError::InvalidArgument(_))));
    assert!(matches!(few, Err(OtError::InvalidArgument(_))));
    assert!(run.server.output.is_ok());
}
