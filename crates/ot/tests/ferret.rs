//! Ferret silent COT: the COT relation for every output over several iterations (bootstrapping),
//! balanced receiver bits, the pool filled by Ferret, hostile and malformed inputs.
use secinfer_net::{simulate, Channel, Phase};
use secinfer_ot::*;

const DELTA: Block = Block(0x1357_9bdf_0246_8ace_fdb9_7531_eca8_6420);

/// Small test-only shapes (not secure: only the published sets are): no pre-iteration, and with
/// one, and a 2^13-leaf tree as in `ferret_b13`.
const SMALL: FerretParams = FerretParams {
    main: LpnParams {
        k: 300,
        t: 16,
        log_bin: 6,
    },
    pre: None,
};
const SMALL_PRE: FerretParams = FerretParams {
    main: LpnParams {
        k: 300,
        t: 16,
        log_bin: 6,
    },
    pre: Some(LpnParams {
        k: 100,
        t: 8,
        log_bin: 6,
    }),
};
const DEEP: FerretParams = FerretParams {
    main: LpnParams {
        k: 20_000,
        t: 24,
        log_bin: 13,
    },
    pre: None,
};

fn run_iterations(
    params: FerretParams,
    iters: usize,
) -> (Vec<Block>, Vec<bool>, Vec<Block>, secinfer_net::Cost) {
    let run = simulate(
        move |ch| {
            let mut r = FerretCotReceiver::setup(ch, &mut Prg::new(), params).expect("setup");
            ch.set_phase(Phase::Offline);
            let (mut w, mut b) = (Vec::new(), Vec::new());
            for _ in 0..iters {
                let got = r.extend(ch, &mut w, &mut b).expect("extend");
                assert_eq!(got, params.per_iteration());
            }
            (w, b)
        },
        move |ch| {
            let mut s = FerretCotSender::setup_with_delta(ch, &mut Prg::new(), params, DELTA)
                .expect("setup");
            ch.set_phase(Phase::Offline);
            let mut v = Vec::new();
            for _ in 0..iters {
                s.extend(ch, &mut v).expect("extend");
            }
            v
        },
    );
    let (w, b) = run.client.output;
    (w, b, run.server.output, run.server.cost)
}

fn check_cots(params: FerretParams, iters: usize) {
    let (w, b, v, cost) = run_iterations(params, iters);
    let n = iters * params.per_iteration();
    assert_eq!((w.len(), b.len(), v.len()), (n, n, n));
    for j in 0..n {
        assert_eq!(
            w[j],
            v[j] ^ DELTA.and_bit(b[j]),
            "{params:?}: COT {j} of {n}"
        );
    }
    // Sender keys are pseudorandom: no repeats (a GGM or LPN bug would repeat or zero them).
    let set: std::collections::HashSet<_> = v.iter().collect();
    assert_eq!(set.len(), n, "{params:?}: repeated keys");
    // Receiver bits are uniform: n/2 ± 6σ ones, σ = √n / 2; and per iteration not all zero.
    let ones = b.iter().filter(|&&x| x).count() as f64;
    let sigma = (n as f64).sqrt() / 2.0;
    assert!(
        (ones - n as f64 / 2.0).abs() < 6.0 * sigma,
        "{ones} ones of {n}"
    );
    for it in b.chunks(params.per_iteration()) {
        assert!(it.iter().any(|&x| x) && it.iter().any(|&x| !x));
    }
    // Offline traffic: exactly t·(2h + 1) blocks per main iteration, sender → receiver.
    let h = params.main.log_bin as usize;
    assert_eq!(
        cost.phase(Phase::Offline).bytes_sent as usize,
        iters * params.main.t * (2 * h + 1) * 16
    );
}

#[test]
fn ferret_outputs_are_cots_over_three_iterations() {
    check_cots(SMALL, 3);
}

#[test]
fn ferret_with_pre_iteration_bootstraps() {
    check_cots(SMALL_PRE, 2);
}

#[test]
fn ferret_deep_trees_two_iterations() {
    check_cots(DEEP, 2);
}

#[test]
fn published_parameter_sets_are_well_formed() {
    for (p, n) in [
        (FerretParams::B13, 10_485_760usize),
        (FerretParams::B12, 10_268_672),
        (FerretParams::B11, 10_180_608),
    ] {
        p.check().expect("published set");
        assert_eq!(p.main.n(), n);
        assert!(p.pre.expect("pre").n() >= p.main.reserve());
    }
    assert_eq!(
        FerretParams::B13.per_iteration(),
        10_485_760 - 452_000 - 1280 * 13
    );
    for bad in [
        LpnParams {
            k: 0,
            t: 1,
            log_bin: 4,
        },
        LpnParams {
            k: 100,
            t: 1,
            log_bin: 4,
        },
        LpnParams {
            k: 10,
            t: 4,
            log_bin: 0,
        },
        LpnParams {
            k: 10,
            t: 4,
            log_bin: 30,
        },
    ] {
        let p = FerretParams {
            main: bad,
            pre: None,
        };
        assert!(
            matches!(p.check(), Err(OtError::InvalidArgument(_))),
            "{bad:?}"
        );
    }
    let short_pre = FerretParams {
        main: SMALL.main,
        pre: Some(LpnParams {
            k: 10,
            t: 2,
            log_bin: 6,
        }),
    };
    assert!(short_pre.check().is_err());
}

#[test]
fn pool_filled_by_ferret_serves_every_flavour() {
    let src = CotSource::Ferret(SMALL_PRE);
    let mut prg = Prg::from_seed(Block(31));
    let c = prg.bits(2000);
    let msgs: Vec<[Block; 2]> = (0..2000)
        .map(|_| [prg.next_block(), prg.next_block()])
        .collect();
    let choices16: Vec<u8> = (0..500).map(|_| prg.below(16) as u8).collect();
    let (c2, ch16) = (c.clone(), choices16.clone());
    let run = simulate(
        move |ch| {
            let mut r =
                PooledOtReceiver::setup_with_source(ch, &mut Prg::new(), src).expect("setup");
            assert_eq!(r.source(), src);
            ch.set_phase(Phase::Offline);
            r.fill(ch, 1000).expect("fill");
            assert!(r.available() >= 1000);
            ch.set_phase(Phase::Online);
            // More than the pool holds: Ferret refills by whole iterations.
            let t = r.recv_cot(ch, &c2).expect("cot");
            let m = r.recv_chosen(ch, &c2).expect("chosen");
            let k = r.recv_random(ch, 16, &ch16).expect("1-of-16");
            (t, m, k)
        },
        move |ch| {
            let mut s =
                PooledOtSender::setup_with_source_and_delta(ch, &mut Prg::new(), src, DELTA)
                    .expect("setup");
            ch.set_phase(Phase::Offline);
            s.fill(ch, 1000).expect("fill");
            ch.set_phase(Phase::Online);
            let q = s.send_cot(ch, 2000).expect("cot");
            s.send_chosen(ch, &msgs).expect("chosen");
            let k = s.send_random(ch, 16, 500).expect("1-of-16");
            (q, k, msgs, s.consumed())
        },
    );
    let (t, m, k) = run.client.output;
    let (q, sk, msgs, used) = run.server.output;
    assert_eq!(used, 2000 + 2000 + 500 * 4);
    for j in 0..2000 {
        assert_eq!(t[j], q[j] ^ DELTA.and_bit(c[j]));
        assert_eq!(m[j], msgs[j][c[j] as usize]);
    }
    for j in 0..500 {
        assert_eq!(k[j], sk[j * 16 + choices16[j] as usize]);
    }
}

#[test]
fn hostile_ferret_message_is_a_typed_error() {
    for len in [0usize, 16 * 16 * 13 - 16, 16 * 16 * 13 + 16] {
        let run = simulate(
            move |ch| {
                let mut r = FerretCotReceiver::setup(ch, &mut Prg::new(), SMALL).expect("setup");
                let (mut w, mut b) = (Vec::new(), Vec::new());
                let e = r.extend(ch, &mut w, &mut b).map(|_| ());
                let again = r.extend(ch, &mut w, &mut b).map(|_| ());
                (e, again)
            },
            move |ch| {
                let _s = FerretCotSender::setup(ch, &mut Prg::new(), SMALL).expect("setup");
                ch.send_pod::<u8>(&vec![0x5a; len]).expect("send");
                ch.flush().expect("flush");
            },
        );
        let (e, again) = run.client.output;
        assert!(
            matches!(e, Err(OtError::Net(_))),
            "len {len}: {:?}",
            e.err()
        );
        assert!(
            matches!(again, Err(OtError::InvalidArgument(_))),
            "not poisoned"
        );
    }
    // A garbage message of the right length is not detectable (semi-honest) but must not panic.
    let run = simulate(
        |ch| {
            let mut r = FerretCotReceiver::setup(ch, &mut Prg::new(), SMALL).expect("setup");
            let (mut w, mut b) = (Vec::new(), Vec::new());
            r.extend(ch, &mut w, &mut b).map(|_| w.len())
        },
        |ch| {
            let _s = FerretCotSender::setup(ch, &mut Prg::new(), SMALL).expect("setup");
            ch.send_pod::<u8>(&vec![0xff; 16 * 16 * 13]).expect("send");
        },
    );
    assert_eq!(run.client.output.expect("extend"), SMALL.per_iteration());
}

/// The published set end to end (≈ 1 GB, a few seconds):
/// `cargo test --release -p secinfer-ot --test ferret -- --ignored`.
#[test]
#[ignore]
fn ferret_b13_every_output_is_a_cot() {
    let (w, b, v, _) = run_iterations(FerretParams::B13, 1);
    assert_eq!(w.len(), FerretParams::B13.per_iteration());
    let bad = (0..w.len())
        .filter(|&j| w[j] != v[j] ^ DELTA.and_bit(b[j]))
        .count();
    assert_eq!(bad, 0);
    let ones = b.iter().filter(|&&x| x).count() as f64;
    let n = b.len() as f64;
    assert!(
        (ones - n / 2.0).abs() < 6.0 * n.sqrt() / 2.0,
        "{ones} of {n}"
    );
}
