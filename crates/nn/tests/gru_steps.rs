//! The GRU session's online phase as IO-free steps: after setup and offline over an in-memory
//! channel, the client's and the server's steps are driven against each other with no channel
//! (each flight handed to the other side), and the logits equal the plaintext reference bit for
//! bit, for all three CryptoGRU variants. Every flight is first offered truncated, overlong,
//! with a frame too many and under another kind: each is refused as `Malformed`, and the step
//! still expects the same flight and goes on to the right result.
#![allow(clippy::unwrap_used, reason = "tests: a panic is the failure report")]
use secinfer_net::simulate;
use secinfer_nn::layers::gru::{
    client_prepare, random_model, server_prepare, CircuitActivations, ClientFlight, ClientModel,
    ClientNext, ClientOptions, Msg, OtFiller, ServerFlight, ServerModel, ServerPolicy, Variant,
    DEFAULT_GARBLING,
};
use secinfer_nn::{ErrorKind, NnError, Reference};
use std::collections::HashSet;

/// Ways a peer's flight can be wrong, each made from the honest flight.
fn corruptions<K: Copy>(msg: &Msg<K>, other: K) -> Vec<(&'static str, Msg<K>)> {
    let mut out = Vec::new();
    let last = msg.frames.iter().rposition(|f| !f.is_empty());
    if let Some(i) = last {
        let mut m = msg.clone();
        m.frames[i].pop();
        out.push(("truncated", m));
    }
    let mut m = msg.clone();
    match m.frames.last_mut() {
        Some(f) => f.push(0),
        None => m.frames.push(vec![0]),
    }
    out.push(("oversized", m));
    let mut m = msg.clone();
    m.frames.push(vec![0; 8]);
    out.push(("extra frame", m));
    if msg.frames.len() > 1 {
        let mut m = msg.clone();
        m.frames.pop();
        out.push(("missing frame", m));
    }
    out.push((
        "wrong kind",
        Msg {
            kind: other,
            frames: msg.frames.clone(),
        },
    ));
    out
}

fn assert_malformed(r: Result<impl Sized, NnError>, what: &str) {
    match r {
        Err(e) => assert_eq!(e.kind(), ErrorKind::Malformed, "{what}: {e}"),
        Ok(_) => panic!("{what}: accepted"),
    }
}

/// Runs one session with its online phase as steps; returns the client's logits and the reference's
/// and the flight kinds seen.
fn run_steps(v: Variant, gates_in_circuit: bool) -> (Vec<i64>, Vec<i64>, HashSet<String>) {
    let (e, h, c, steps, seed) = (6, 10, 3, 3, 11);
    let (q, embed) = random_model(e, h, c, steps, v, seed).unwrap();
    let tokens: Vec<u32> = (0..steps as u32).map(|i| (i * 7 + 5) % 64).collect();
    let want = Reference::new(&q, CircuitActivations::default()).classify(&tokens);
    let cm = ClientModel::new(q.config.clone(), &embed, v, steps).unwrap();
    let sm = ServerModel::new(q, v, steps).unwrap();
    let opts = ClientOptions {
        reveal_logits: true,
        gates_in_circuit,
        ..ClientOptions::default()
    };
    let run = simulate(
        |ch| {
            client_prepare(
                ch,
                &cm,
                &tokens,
                opts,
                OtFiller::default(),
                DEFAULT_GARBLING,
                &mut |_, _, _| {},
            )
        },
        |ch| server_prepare(ch, &sm, ServerPolicy { allow_logits: true }),
    );
    let (mut client, mut server) = match (run.client.output, run.server.output) {
        (Ok(c), Ok(s)) => (c, s),
        (c, s) => panic!("offline: client {:?}, server {:?}", c.err(), s.err()),
    };
    let mut seen = HashSet::new();
    let mut out = client.begin().unwrap();
    let outcome = loop {
        seen.insert(format!("{:?}", out.kind));
        let expect = server.expects().unwrap();
        let other = if out.kind == ClientFlight::Inputs {
            ClientFlight::Hidden
        } else {
            ClientFlight::Inputs
        };
        for (what, bad) in corruptions(&out, other) {
            assert_malformed(
                server.on_msg(bad),
                &format!("{v:?} server, {what} {:?}", out.kind),
            );
            assert_eq!(
                server.expects().unwrap(),
                expect,
                "{what}: the server moved on"
            );
        }
        let reply = server.on_msg(out).unwrap();
        seen.insert(format!("{:?}", reply.kind));
        let expect = client.expects().unwrap();
        let other = if reply.kind == ServerFlight::Final {
            ServerFlight::Gates
        } else {
            ServerFlight::Final
        };
        for (what, bad) in corruptions(&reply, other) {
            assert_malformed(
                client.on_msg(bad),
                &format!("{v:?} client, {what} {:?}", reply.kind),
            );
            assert_eq!(
                client.expects().unwrap(),
                expect,
                "{what}: the client moved on"
            );
        }
        match client.on_msg(reply).unwrap() {
            ClientNext::Send(m) => out = m,
            ClientNext::Done(o) => break *o,
        }
    };
    assert!(server.is_done());
    assert_eq!(client.steps_done(), steps);
    // A step after the end is a local error, not a peer's.
    let late = client.begin().err().unwrap();
    assert_eq!(late.kind(), ErrorKind::Internal, "{late}");
    // Both parties file every byte under the same heading.
    let (cr, sr) = (&outcome.report, server.report());
    assert_eq!(
        (cr.gc_bytes, cr.he_bytes, cr.mux_bytes),
        (sr.gc_bytes, sr.he_bytes, sr.mux_bytes)
    );
    assert_eq!(cr.cost.online.bytes_sent, sr.cost.online.bytes_received);
    (outcome.logits.unwrap(), want, seen)
}

#[test]
fn steps_without_a_channel_equal_the_reference_and_refuse_bad_flights() {
    let mut kinds = HashSet::new();
    for (v, gates_in_circuit) in [
        (Variant::Baseline, false),
        (Variant::Cg1, false),
        (Variant::Cg2, false),
        (Variant::Cg2, true),
    ] {
        let (got, want, seen) = run_steps(v, gates_in_circuit);
        assert_eq!(got, want, "{v:?}, gates in circuit: {gates_in_circuit}");
        kinds.extend(seen);
    }
    // Every flight kind of both parties ran (and was refused when corrupted).
    assert_eq!(kinds.len(), 8 + 8, "{kinds:?}");
}
