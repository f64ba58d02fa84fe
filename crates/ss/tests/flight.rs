//! OPAF's exp on negatives, sigmoid and tanh driven as typed flights (no channel between the
//! parties): within the same ULP bounds as over a channel, with the same online bytes and
//! rounds, and hostile flights refused with the stepper left where it was.
#![allow(clippy::unwrap_used)]
mod common;
use common::*;
use secinfer_net::flight::{drive, Flight, FlightChannel, Stepper};
use secinfer_net::{Channel, NetError, Phase};
use secinfer_ss::math::{self, Impl};
use secinfer_ss::ring::Fixed;
use secinfer_ss::ulp::{inputs, ulp_stats, MathFn};
use secinfer_ss::{Ctx, Party, Result};

fn fx(bits: u32, scale: u32) -> Fixed {
    Fixed::new(bits, scale).unwrap()
}

/// The offline phase as `bench math` runs it: the correlations `f` consumes on `n` elements,
/// counted by dry runs, made before the online phase (so no pool refills there).
fn offline<C: Channel>(ctx: &mut Ctx, ch: &mut C, f: MathFn, n: usize, inp: Fixed, out: Fixed) {
    let zeros = vec![0u64; n];
    let plan = secinfer_ss::plan_for_elementwise(ctx.party, n, |c, dry, m| {
        math::evaluate(c, dry, f, Impl::Opaf, &zeros[..m], inp, out)
    })
    .unwrap();
    ch.set_phase(Phase::Offline);
    ctx.preprocess(ch, plan).unwrap();
    ch.set_phase(Phase::Online);
}

/// One party's whole run: setup, offline, then `f` on its share; its output share and online
/// bytes and rounds, and all the bytes it sent.
fn party_fn(
    party: Party,
    f: MathFn,
    share: Vec<u64>,
    inp: Fixed,
    out: Fixed,
) -> impl FnOnce(&mut FlightChannel) -> Result<(Vec<u64>, u64, u64, u64)> + Send + 'static {
    move |ch| {
        let mut ctx = common::try_ctx(party, ch)?;
        offline(&mut ctx, ch, f, share.len(), inp, out);
        let y = math::evaluate(&mut ctx, ch, f, Impl::Opaf, &share, inp, out)?;
        let (c, all) = (ch.cost().online, ch.cost().total());
        Ok((y, c.bytes_sent + c.bytes_received, c.rounds, all.bytes_sent))
    }
}

/// Inputs over the whole domain (both ends included) and random ones.
fn test_inputs(f: MathFn, inp: Fixed) -> Vec<u64> {
    let mut xs = inputs(f, inp, 64);
    let mut rng = Rng(0xf1_9417);
    for _ in 0..64 {
        let mut v = rng.bits(inp.bits);
        if f == MathFn::ExpNeg {
            // strictly negative: the top bit set, never zero
            v |= 1 << (inp.bits - 1);
        }
        xs.push(v);
    }
    xs
}

/// The revealed outputs are compared with the plaintext, not with the channel run's: the
/// cheap truncations' unit depends on the shares' randomness, so any two runs (two channel
/// runs as much as a flight run and a channel run) differ by one output unit on a few percent
/// of the inputs.
#[test]
fn opaf_functions_as_flights_match_the_channel_run() {
    let (inp, out) = (fx(20, 16), fx(18, 16));
    for (f, bound) in [
        (MathFn::ExpNeg, 1.0),
        (MathFn::Sigmoid, 3.0),
        (MathFn::Tanh, 2.0),
    ] {
        let xs = test_inputs(f, inp);
        let mut rng = Rng(0x5eed);
        let (ss, cs) = split(&xs, inp.bits, &mut rng);
        let d = drive(
            party_fn(Party::Server, f, ss.clone(), inp, out),
            party_fn(Party::Client, f, cs.clone(), inp, out),
        )
        .unwrap();
        let (da, db) = (d.a.unwrap(), d.b.unwrap());
        let ys = add_shares(&da.0, &db.0, out.bits);
        let u = ulp_stats(f, &xs, inp, &ys, out);
        assert_eq!(u.count, xs.len());
        assert!(u.max <= bound, "{}: flights max ulp {}", f.name(), u.max);
        // Over a channel: the same calls, so the same online bytes and rounds.
        let r = run2(|ctx, ch| {
            offline(ctx, ch, f, xs.len(), inp, out);
            let y = math::evaluate(ctx, ch, f, Impl::Opaf, mine(ctx, &ss, &cs), inp, out);
            y.unwrap()
        });
        let yc = add_shares(&r.client, &r.server, out.bits);
        let uc = ulp_stats(f, &xs, inp, &yc, out);
        assert!(uc.max <= bound);
        let c = r.client_cost.online;
        assert_eq!(db.1, c.bytes_sent + c.bytes_received, "{}", f.name());
        assert_eq!(db.2, c.rounds, "{}", f.name());
        let s = r.server_cost.online;
        assert_eq!(da.1, s.bytes_sent + s.bytes_received, "{}", f.name());
        assert_eq!(da.2, s.rounds, "{}", f.name());
        // The flights carry everything each party sent, setup to end.
        let sent = |fl: &[Vec<usize>]| fl.iter().flatten().sum::<usize>() as u64;
        assert_eq!(sent(&d.flights_a), da.3, "{}", f.name());
        assert_eq!(sent(&d.flights_b), db.3, "{}", f.name());
    }
}

/// Drives sigmoid between the parties; at the server's non-empty flight `from_end` before its
/// last (0: the last), first offers the client `tamper(flight)`, which must be refused as
/// malformed, then the real flight; the revealed outputs must still be within 1.5 ULP.
fn run_with_tamper(from_end: usize, tamper: impl Fn(&Flight) -> Flight) {
    let (inp, out) = (fx(16, 12), fx(14, 12));
    let f = MathFn::Sigmoid;
    let xs = test_inputs(f, inp);
    let (ss, cs) = split(&xs, inp.bits, &mut Rng(7));
    // The online phase is the server's last flights: count them on an untouched run.
    let clean = drive(
        party_fn(Party::Server, f, ss.clone(), inp, out),
        party_fn(Party::Client, f, cs.clone(), inp, out),
    )
    .unwrap();
    let target = clean.flights_a.len() - from_end;
    assert!(target > 0);
    let (mut sa, mut step_a) = Stepper::start(party_fn(Party::Server, f, ss, inp, out)).unwrap();
    let (mut sb, mut step_b) = Stepper::start(party_fn(Party::Client, f, cs, inp, out)).unwrap();
    let (mut out_a, mut out_b) = (None, None);
    let mut seen = 0;
    let mut tampered = false;
    loop {
        let fa = step_a.take_flight(&mut out_a);
        let fb = step_b.take_flight(&mut out_b);
        if out_a.is_some() && out_b.is_some() {
            assert!(fa.is_empty() && fb.is_empty());
            break;
        }
        if !fa.is_empty() {
            seen += 1;
        }
        if seen == target && !tampered && !fa.is_empty() && out_b.is_none() {
            tampered = true;
            let bad = tamper(&fa);
            let e = sb.absorb(bad).unwrap_err();
            assert!(matches!(e, NetError::Malformed(_)), "{e}");
            // Refused twice in a row: still where it was.
            let e = sb.absorb(tamper(&fa)).unwrap_err();
            assert!(matches!(e, NetError::Malformed(_)), "{e}");
        }
        if out_a.is_none() {
            step_a = sa.absorb(fb).unwrap();
        } else {
            assert!(fb.is_empty());
        }
        if out_b.is_none() {
            step_b = sb.absorb(fa).unwrap();
        } else {
            assert!(fa.is_empty());
        }
    }
    assert!(tampered, "no server flight {target}");
    let (oa, ob) = (out_a.unwrap().unwrap(), out_b.unwrap().unwrap());
    let ys = add_shares(&oa.0, &ob.0, out.bits);
    let u = ulp_stats(f, &xs, inp, &ys, out);
    assert!(u.max <= 1.5, "after a refused flight: max ulp {}", u.max);
}

#[test]
fn a_short_frame_is_refused_and_the_run_carries_on() {
    for from_end in [0, 2, 5] {
        run_with_tamper(from_end, |f| {
            let mut fr = f.frames().to_vec();
            fr[0].pop();
            Flight::new(fr)
        });
    }
}

#[test]
fn a_long_frame_is_refused_and_the_run_carries_on() {
    run_with_tamper(3, |f| {
        let mut fr = f.frames().to_vec();
        let last = fr.len() - 1;
        fr[last].push(0);
        Flight::new(fr)
    });
}

#[test]
fn a_missing_frame_or_an_extra_frame_is_refused() {
    // A flight of several frames with its last one dropped: the client stops short of what it
    // reads before it speaks again.
    // (The server's last flight has two: its first opens what the second's OTs carry.)
    run_with_tamper(0, |f| {
        let mut fr = f.frames().to_vec();
        assert!(fr.len() > 1, "{f:?}");
        fr.pop();
        Flight::new(fr)
    });
    // An extra frame (zeros, 3 bytes longer than the first) where the client reads its next frame.
    run_with_tamper(1, |f| {
        let mut fr = f.frames().to_vec();
        fr.push(vec![0u8; fr[0].len() + 3]);
        Flight::new(fr)
    });
}

#[test]
fn an_empty_run_finishes_and_a_flight_after_the_end_is_refused() {
    // A stepper whose function reads nothing is done at once; anything sent to it after its
    // end is left over, which the driver refuses.
    let d = drive(
        |ch: &mut FlightChannel| ch.send_frame(&[1, 2, 3]),
        |ch: &mut FlightChannel| {
            let v: Result<Vec<u8>> = ch.recv_pod(3).map_err(Into::into);
            v
        },
    )
    .unwrap();
    assert_eq!(d.b.unwrap(), vec![1, 2, 3]);
    let e = drive(
        |ch: &mut FlightChannel| {
            ch.send_frame(&[1, 2, 3])?;
            ch.send_frame(&[4])
        },
        |ch: &mut FlightChannel| {
            let v: Result<Vec<u8>> = ch.recv_pod(3).map_err(Into::into);
            v
        },
    )
    .unwrap_err();
    assert!(matches!(e, NetError::Malformed(_)), "{e}");
}

#[test]
fn a_party_waiting_on_a_finished_peer_is_refused() {
    // One party is done with nothing left to send while the other waits for a frame: the
    // driver reports the deadlock instead of handing the waiting party empty flights forever.
    let e = drive(
        |_: &mut FlightChannel| (),
        |ch: &mut FlightChannel| ch.recv_frame().map(|_| ()),
    )
    .unwrap_err();
    assert!(matches!(e, NetError::Malformed(_)), "{e}");
}
