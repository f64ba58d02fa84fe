//! A peer that sends short, oversized, out-of-range or no data gives a typed error, never a panic.
#![allow(clippy::unwrap_used)]
mod common;
use common::*;
use secinfer_net::{simulate, Channel};
use secinfer_ss::math;
use secinfer_ss::reveal::{reveal, share_input, RevealTo};
use secinfer_ss::ring::Fixed;
use secinfer_ss::{ErrorKind, Party, SsError};

const INP: Fixed = fmt(20, 16);
const OUT: Fixed = fmt(18, 16);

const fn fmt(bits: u32, scale: u32) -> Fixed {
    match Fixed::new(bits, scale) {
        Ok(f) => f,
        Err(_) => panic!("invalid test format"),
    }
}

/// The honest client runs OPAF's sigmoid; the server sets up and then misbehaves with `bad`.
fn against(bad: impl Fn(&mut secinfer_net::DynChannel) + Send + Sync) -> SsError {
    let x = vec![5u64; 64];
    let r = simulate(
        |ch| {
            let mut c = ctx(Party::Client, ch);
            math::sigmoid_opaf(&mut c, ch, &x, INP, OUT).err()
        },
        |ch| {
            let _s = ctx(Party::Server, ch);
            bad(ch);
        },
    );
    r.client.output.expect("the client must fail")
}

#[test]
fn short_frame_is_an_error() {
    let e = against(|ch| {
        let _ = ch.send_pod(&[7u8; 3]);
        let _ = ch.flush();
        let _ = ch.recv_frame();
    });
    eprintln!("{e}");
}

#[test]
fn oversized_frame_is_an_error() {
    let e = against(|ch| {
        let _ = ch.send_pod(&vec![0xffu8; 1 << 20]);
        let _ = ch.flush();
        let _ = ch.recv_frame();
    });
    eprintln!("{e}");
}

#[test]
fn silent_peer_is_an_error() {
    let e = against(|_| {});
    assert!(matches!(e, SsError::Net(_) | SsError::Ot(_)), "{e}");
    assert_eq!(e.kind(), ErrorKind::PeerClosed, "{e}");
}

#[test]
fn out_of_range_shares_are_rejected() {
    let r = simulate(
        |ch| {
            let mut c = ctx(Party::Client, ch);
            let a = reveal(&mut c, ch, &[1, 2, 3], 16, RevealTo::Both).err();
            let b = share_input(&mut c, ch, Party::Server, None, 3, 16).err();
            (a, b)
        },
        |ch| {
            let _s = ctx(Party::Server, ch);
            // a "share" with bits above the 16-bit ring, twice
            let _ = ch.send_pod(&[1u64 << 40, 0, 0]);
            let _ = ch.recv_frame();
            let _ = ch.send_pod(&[u64::MAX, 0, 0]);
            let _ = ch.flush();
        },
    );
    let (a, b) = r.client.output;
    assert!(matches!(a, Some(SsError::Malformed(_))), "reveal: {a:?}");
    assert_eq!(a.map(|e| e.kind()), Some(ErrorKind::Malformed));
    assert!(
        matches!(b, Some(SsError::Malformed(_))),
        "share_input: {b:?}"
    );
}

#[test]
fn bad_arguments_are_typed_errors() {
    let r = run2(|c, ch| {
        let e1 = math::exp_opaf(c, ch, &[0], fmt(20, 12), fmt(40, 12)).err();
        let e2 = secinfer_ss::blocks::lut(c, ch, &[0], 9, &[0; 512], 8).err();
        let e3 = secinfer_ss::blocks::mux(c, ch, &[0, 1], &[0], 8).err();
        [e1, e2, e3].iter().all(|e| {
            matches!(e, Some(SsError::InvalidArgument(_)))
                && e.as_ref().map(SsError::kind) == Some(ErrorKind::InvalidArgument)
        })
    });
    assert!(r.client && r.server);
}

/// An AND opening with bits set past its last pair is a typed error, not ignored.
#[cfg(not(feature = "test-dealer"))]
#[test]
fn bad_and_opening_is_malformed() {
    use secinfer_ss::{blocks, Ctx, Plan};
    let plan = Plan {
        triples: 3,
        ..Plan::default()
    };
    let r = simulate(
        |ch| {
            let mut c = Ctx::setup(Party::Client, ch).unwrap();
            c.preprocess(ch, plan).unwrap();
            blocks::and(&mut c, ch, &[1, 0, 1], &[1, 1, 0]).err()
        },
        |ch| {
            let mut s = Ctx::setup(Party::Server, ch).unwrap();
            s.preprocess(ch, plan).unwrap();
            // 3 ANDs open 6 bits: one byte whose top two bits must be zero
            let _ = ch.send_pod(&[0xffu8]);
            let _ = ch.flush();
            let _ = ch.recv_frame();
        },
    );
    let a = r.client.output;
    assert!(matches!(a, Some(SsError::Malformed(_))), "padding: {a:?}");
}

/// The millionaires' leaves: with 1-bit leaves (half triples) P0 opens one bit per leaf first;
/// with m-bit leaves (random 1-of-2^m OTs) P1 sends m choice bits per leaf first. Either way,
/// bits set past the last leaf are a typed error.
#[cfg(not(feature = "test-dealer"))]
#[test]
fn bad_leaf_frame_is_malformed() {
    use secinfer_ss::{blocks, Ctx, Plan};
    for leaf_bits in [1u32, 2, 3] {
        let leaf = leaf_bits > 1;
        let plan = Plan {
            triples: 8,
            half_triples: if leaf { 0 } else { 3 },
            leaf_ots: if leaf { 3 } else { 0 },
            ..Plan::default()
        };
        // The honest party: P1 when P0 speaks first (1-bit leaves), else P0.
        let honest = if leaf { Party::Server } else { Party::Client };
        let r = simulate(
            move |ch| {
                let mut c = Ctx::setup(Party::Client, ch).unwrap();
                c.set_mill_leaf_bits(leaf_bits).unwrap();
                c.preprocess(ch, plan).unwrap();
                if honest == Party::Client {
                    blocks::millionaire(&mut c, ch, &[5], 3).err()
                } else {
                    // ≤ 2 leaves of ≤ 3 bits: one byte whose top bits must be zero
                    let _ = ch.send_pod(&[0xffu8]);
                    let _ = ch.flush();
                    let _ = ch.recv_frame();
                    None
                }
            },
            move |ch| {
                let mut s = Ctx::setup(Party::Server, ch).unwrap();
                s.set_mill_leaf_bits(leaf_bits).unwrap();
                s.preprocess(ch, plan).unwrap();
                if honest == Party::Server {
                    blocks::millionaire(&mut s, ch, &[5], 3).err()
                } else {
                    // 3 leaves open 3 bits: one byte whose top five bits must be zero
                    let _ = ch.send_pod(&[0x0fu8]);
                    let _ = ch.flush();
                    let _ = ch.recv_frame();
                    None
                }
            },
        );
        let a = if honest == Party::Client {
            r.client.output
        } else {
            r.server.output
        };
        assert!(
            matches!(a, Some(SsError::Malformed(_))),
            "leaf {leaf_bits}: padding: {a:?}"
        );
    }
}
