#![allow(clippy::unwrap_used)]
use super::*;
use crate::error::ErrorKind;
use crate::reference::argmax;
use crate::reference::fastgrnn::FastGrnnParams;
use secinfer_net::simulate;

fn random_model(seed: u64, input: usize, hidden: usize, classes: usize) -> FastGrnnParams {
    random_params(input, hidden, classes, 8, seed).unwrap()
}

fn random_input(seed: u64, n: usize) -> Vec<i64> {
    super::random_input(1, n, seed)
}

fn open(a: &[u64], b: &[u64], bits: u32) -> Vec<i64> {
    a.iter()
        .zip(b)
        .map(|(x, y)| to_signed(x.wrapping_add(*y) & mask(bits), bits))
        .collect()
}

/// Max-ULP bounds of z and h̃ (both at scale 14): σ's stated bound at 16-bit scale 8 → 14
/// (secinfer-ss tests/math.rs), and twice it for h̃ = 2σ(2x) − 1.
fn bounds(imp: Impl) -> (f64, f64) {
    let sigma = match imp {
        Impl::Opaf => 1.5,
        Impl::Sirnn => 1.0,
    };
    (sigma, 2.0 * sigma)
}

/// Secure FastGRNN equals the fixed-point reference step by step: from the opened previous
/// state, the gates' inputs and the next state bit for bit, σ and tanh within the math's ULP
/// bound of the exact function, and the logits bit for bit on the last state; for OPAF's and
/// SIRNN's math and for OT and HE products in the same build.
#[test]
fn secure_steps_equal_the_reference() {
    let (input, hidden, steps, classes) = (5, 12, 4, 3);
    let m = random_model(0x5eed, input, hidden, classes);
    let x = random_input(0xabc, steps * input);
    let sh = FastGrnnShape::of(&m, steps);
    let wd = m.validate().unwrap();
    let xs = client_input(&sh, Some(&x)).unwrap();
    for (imp, prod) in [
        (Impl::Opaf, Products::Ot),
        (Impl::Sirnn, Products::Ot),
        (Impl::Opaf, Products::He),
        (Impl::Sirnn, Products::He),
    ] {
        let run = |party: Party| {
            let (m, xs) = (&m, &xs);
            move |ch: &mut secinfer_net::DynChannel| {
                let mut ctx = Ctx::setup(party, ch).unwrap();
                let mut tr = Trace::default();
                let (model, x): (_, &[u64]) = match party {
                    Party::Server => (Some(m), &[]),
                    Party::Client => (None, xs),
                };
                let he = (prod == Products::He).then(|| {
                    let keys = products::setup(ch, party == Party::Client).unwrap();
                    let plan = HePlan::of(&sh, &wd).unwrap();
                    HeOnline::prepare(ch, &keys, &plan, model).unwrap()
                });
                let lg = online(
                    &mut ctx,
                    ch,
                    &sh,
                    &wd,
                    imp,
                    model,
                    x,
                    he.as_ref(),
                    Some(&mut tr),
                )
                .unwrap();
                (lg, tr)
            }
        };
        let r = simulate(run(Party::Client), run(Party::Server));
        let ((lc, tc), (ls, ts)) = (r.client.output, r.server.output);
        let (bz, bh) = bounds(imp);
        let mut h = vec![0i64; hidden];
        let mut worst = (0.0f64, 0.0f64);
        for t in 0..steps {
            let acc = m.accumulate(&wd, &x[t * input..(t + 1) * input], &h);
            let (zi, hi) = m.gate_inputs(&wd, &acc);
            assert_eq!(
                open(&tc.z_in[t], &ts.z_in[t], ACT_BITS),
                zi,
                "{imp:?} {prod:?} step {t}: σ input"
            );
            assert_eq!(
                open(&tc.h_in[t], &ts.h_in[t], ACT_BITS),
                hi,
                "{imp:?} {prod:?} step {t}: tanh input"
            );
            let z = open(&tc.z[t], &ts.z[t], ACT_BITS);
            let ht = open(&tc.ht[t], &ts.ht[t], ACT_BITS);
            for i in 0..hidden {
                let xr = zi[i] as f64 / 256.0;
                let ez = (z[i] as f64 - 16384.0 / (1.0 + (-xr).exp())).abs();
                let eh = (ht[i] as f64 - 16384.0 * (hi[i] as f64 / 512.0).tanh()).abs();
                worst = (worst.0.max(ez), worst.1.max(eh));
            }
            let next = open(&tc.h[t], &ts.h[t], UPDATE_BITS);
            assert_eq!(
                next,
                m.update(&z, &ht, &h),
                "{imp:?} {prod:?} step {t}: state update"
            );
            h = next;
        }
        assert!(
            worst.0 <= bz && worst.1 <= bh,
            "{imp:?}: ULP {worst:?} above ({bz}, {bh})"
        );
        assert!(
            h.iter().any(|v| *v != 0),
            "the state stayed zero: the test would be vacuous"
        );
        assert_eq!(
            open(&lc, &ls, sh.head.bits),
            m.logits(&h),
            "{imp:?} {prod:?}: logits"
        );
    }
}

/// The whole two-party run (setup, offline pools sized by the dry run, online, reveal) gives
/// the client logits within a small distance of the reference's (the gap is only σ's and
/// tanh's ULPs carried through four steps) and the server nothing.
#[test]
fn full_run_tracks_the_reference_logits() {
    let (input, hidden, steps, classes) = (4, 10, 4, 5);
    let m = random_model(0x77, input, hidden, classes);
    let x = random_input(0x99, steps * input);
    let sh = FastGrnnShape::of(&m, steps);
    let mut online_bytes = Vec::new();
    for products in [Products::Ot, Products::He] {
        let opts = SsOptions {
            math: Impl::Opaf,
            source: CotSource::Iknp,
            products,
            logits: true,
        };
        let (mr, xr) = (&m, &x);
        let r = simulate(
            move |ch| run_fastgrnn(Party::Client, ch, &sh, &opts, None, Some(xr)).unwrap(),
            move |ch| run_fastgrnn(Party::Server, ch, &sh, &opts, Some(mr), None).unwrap(),
        );
        let (c, s) = (r.client.output, r.server.output);
        assert!(s.logits.is_none() && s.class.is_none());
        let (_, want) = m.run(&x).unwrap();
        let got = c.logits.unwrap();
        let tol = 1i64 << (sh.head.scale - 5); // 1/32 in real units
        for (g, w) in got.iter().zip(&want) {
            assert!(
                (g - w).abs() <= tol,
                "{products:?}: logits {got:?} vs reference {want:?}"
            );
        }
        assert_eq!(c.class, Some(argmax(&got)));
        assert!(c.cost.online.bytes() > 0 && c.online_s > 0.0);
        online_bytes.push(c.cost.online.bytes());
    }
    // HE moves the products offline: one masked flight each online instead of OT products.
    assert!(
        online_bytes[1] < online_bytes[0],
        "online bytes (ot, he): {online_bytes:?}"
    );
}

/// The argmax on shares equals the plaintext argmax (lowest index on ties) on random signed
/// values, with ties and odd counts, at the extremes of the format.
#[test]
fn shared_argmax_equals_the_plaintext_argmax() {
    let bits = 18u32;
    let lim = 1i64 << (bits - 1);
    let mut seed = 0x1357u64;
    let mut next = move |r: i64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % (2 * r as u64 + 1)) as i64 - r
    };
    let mut cases: Vec<Vec<i64>> = vec![
        vec![3, 3, 3],
        vec![-lim, lim - 1, lim - 1, -lim],
        vec![5],
        vec![-1, -1, 0, 0, -2, 0, 7, 7, 7, -9],
    ];
    for n in [2usize, 7, 10, 13] {
        cases.push((0..n).map(|_| next(4)).collect());
        cases.push((0..n).map(|_| next(lim - 1)).collect());
    }
    for v in cases {
        let ring_v: Vec<u64> = v.iter().map(|a| from_signed(*a, bits)).collect();
        let r0: Vec<u64> = (0..v.len())
            .map(|_| next(lim - 1) as u64 & mask(bits))
            .collect();
        let r1: Vec<u64> = ring_v
            .iter()
            .zip(&r0)
            .map(|(a, r)| a.wrapping_sub(*r) & mask(bits))
            .collect();
        let run = |party: Party, share: Vec<u64>| {
            move |ch: &mut secinfer_net::DynChannel| {
                let mut ctx = Ctx::setup(party, ch).unwrap();
                argmax_shared(&mut ctx, ch, &share, bits).unwrap()
            }
        };
        let r = simulate(run(Party::Client, r1), run(Party::Server, r0));
        let got = (r.client.output.wrapping_add(r.server.output) & mask(bits + 1)) as usize;
        assert_eq!(got, argmax(&v), "{v:?}");
    }
}

/// The client learns the class and no logits unless the run reveals them, and the class is
/// the reference's on a random model.
#[test]
fn class_only_run_hides_the_logits() {
    let (input, hidden, steps, classes) = (3, 6, 3, 4);
    let m = random_model(0x42, input, hidden, classes);
    let x = random_input(0x43, steps * input);
    let sh = FastGrnnShape::of(&m, steps);
    let opts = SsOptions {
        math: Impl::Sirnn,
        source: CotSource::Iknp,
        products: Products::Ot,
        logits: false,
    };
    let (mr, xr) = (&m, &x);
    let r = simulate(
        move |ch| run_fastgrnn(Party::Client, ch, &sh, &opts, None, Some(xr)).unwrap(),
        move |ch| run_fastgrnn(Party::Server, ch, &sh, &opts, Some(mr), None).unwrap(),
    );
    let (c, s) = (r.client.output, r.server.output);
    assert!(c.logits.is_none() && s.logits.is_none() && s.class.is_none());
    let (_, want) = m.run(&x).unwrap();
    let mut sorted = want.clone();
    sorted.sort_unstable();
    // The seed's two best logits are further apart than σ's and tanh's error carries.
    let margin = sorted[classes - 1] - sorted[classes - 2];
    assert!(
        margin > 1 << (sh.head.scale - 5),
        "margin {margin}: take another seed"
    );
    assert_eq!(c.class, Some(argmax(&want)));
}

/// A client sequence of the wrong length or outside 16 bits, and a model of another shape, are
/// refused with typed errors before any traffic.
#[test]
fn bad_inputs_are_typed_errors() {
    let m = random_model(1, 3, 4, 2);
    let sh = FastGrnnShape::of(&m, 2);
    assert_eq!(
        client_input(&sh, Some(&[0; 5])).err().unwrap().kind(),
        ErrorKind::BadInput
    );
    let big = vec![1 << 15; 6];
    assert_eq!(
        client_input(&sh, Some(&big)).err().unwrap().kind(),
        ErrorKind::BadInput
    );
    let other = FastGrnnShape { hidden: 5, ..sh };
    let opts = SsOptions {
        math: Impl::Sirnn,
        source: CotSource::Iknp,
        products: Products::Ot,
        logits: false,
    };
    let mut ch = secinfer_ss::DryChannel::new();
    let e = run_fastgrnn(Party::Server, &mut ch, &other, &opts, Some(&m), None)
        .err()
        .unwrap();
    assert_eq!(e.kind(), ErrorKind::BadModel);
}

/// A small random model and input for the flight tests, its shape, the reference logits, and
/// the options of a run with logits on IKNP.
fn flight_case(
    seed: u64,
    (input, hidden, steps, classes): (usize, usize, usize, usize),
) -> (FastGrnnParams, Vec<i64>, FastGrnnShape, Vec<i64>) {
    let m = random_model(seed, input, hidden, classes);
    let x = random_input(seed + 1, steps * input);
    let sh = FastGrnnShape::of(&m, steps);
    let (_, want) = m.run(&x).unwrap();
    (m, x, sh, want)
}

fn flight_opts(math: Impl, products: Products) -> SsOptions {
    SsOptions {
        math,
        source: CotSource::Iknp,
        products,
        logits: true,
    }
}

/// The client's logits are within 1/32 of the reference's.
fn assert_near(sh: &FastGrnnShape, got: &[i64], want: &[i64]) {
    let tol = 1i64 << (sh.head.scale - 5);
    for (g, w) in got.iter().zip(want) {
        assert!((g - w).abs() <= tol, "{got:?} vs {want:?}");
    }
}

/// The whole run (setup, offline, online, reveal) driven as typed flights with no channel
/// between the parties (`secinfer_net::flight`): the same online bytes and rounds as over a
/// channel, for each party, and logits within the reference's tolerance, for both products.
#[test]
fn full_run_as_flights_matches_the_channel_run() {
    let (m, x, sh, want) = flight_case(0x51, (4, 10, 3, 5));
    for (math, products) in [(Impl::Opaf, Products::He), (Impl::Sirnn, Products::Ot)] {
        let opts = flight_opts(math, products);
        let (mr, xr) = (m.clone(), x.clone());
        let d = secinfer_net::flight::drive(
            move |ch| run_fastgrnn(Party::Client, ch, &sh, &opts, None, Some(&xr)),
            move |ch| run_fastgrnn(Party::Server, ch, &sh, &opts, Some(&mr), None),
        )
        .unwrap();
        let (fc, fs) = (d.a.unwrap(), d.b.unwrap());
        let (mr, xr) = (&m, &x);
        let r = simulate(
            move |ch| run_fastgrnn(Party::Client, ch, &sh, &opts, None, Some(xr)).unwrap(),
            move |ch| run_fastgrnn(Party::Server, ch, &sh, &opts, Some(mr), None).unwrap(),
        );
        let (cc, cs) = (r.client.output, r.server.output);
        for (f, c, who) in [(&fc, &cc, "client"), (&fs, &cs, "server")] {
            let (a, b) = (f.cost.online, c.cost.online);
            assert_eq!(
                a.bytes(),
                b.bytes(),
                "{math:?} {products:?} {who}: online bytes"
            );
            assert_eq!(
                a.rounds, b.rounds,
                "{math:?} {products:?} {who}: online rounds"
            );
        }
        let got = fc.logits.unwrap();
        assert_near(&sh, &got, &want);
        assert_eq!(fc.class, Some(argmax(&got)));
        assert!(fs.logits.is_none() && fs.class.is_none());
    }
}

/// A FastGRNN step's flight cut short is refused with the typed kind, the server's stepper
/// left where it was: the real flight then finishes the run with the reference's logits.
#[test]
fn a_short_fastgrnn_flight_is_refused_and_the_run_carries_on() {
    use secinfer_net::flight::{Flight, Stepper};
    let (m, x, sh, want) = flight_case(0x61, (3, 6, 2, 3));
    let opts = flight_opts(Impl::Opaf, Products::He);
    let (mr, xr) = (m.clone(), x.clone());
    let (mut sc, mut step_c) =
        Stepper::start(move |ch| run_fastgrnn(Party::Client, ch, &sh, &opts, None, Some(&xr)))
            .unwrap();
    let (mut ss, mut step_s) =
        Stepper::start(move |ch| run_fastgrnn(Party::Server, ch, &sh, &opts, Some(&mr), None))
            .unwrap();
    let (mut out_c, mut out_s) = (None, None);
    let (mut seen, mut refused) = (0, 0);
    loop {
        let fc = step_c.take_flight(&mut out_c);
        let fs = step_s.take_flight(&mut out_s);
        if out_c.is_some() && out_s.is_some() {
            break;
        }
        if !fc.is_empty() {
            seen += 1;
        }
        // The client's flights of the online phase: every tenth, its first frame one byte short.
        if seen > 8 && seen % 10 == 0 && !fc.is_empty() && out_s.is_none() {
            let mut fr = fc.frames().to_vec();
            fr[0].pop();
            let e = ss.absorb(Flight::new(fr)).unwrap_err();
            assert!(matches!(e, secinfer_net::NetError::Malformed(_)), "{e}");
            refused += 1;
        }
        if out_c.is_none() {
            step_c = sc.absorb(fs).unwrap();
        }
        if out_s.is_none() {
            step_s = ss.absorb(fc).unwrap();
        }
    }
    assert!(refused >= 2, "only {refused} flights tampered");
    assert_near(&sh, &out_c.unwrap().unwrap().logits.unwrap(), &want);
    assert!(out_s.unwrap().is_ok());
}
