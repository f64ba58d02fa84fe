//! Channel behaviour: the harness over every transport, exact metering, shaping, hostile peers.
#![allow(
    clippy::unwrap_used,
    reason = "test helpers: a panic is the failure report"
)]
use secinfer_net::{
    channel_pair, mem_pair, mem_pair_with, run_two_party, simulate, Channel, NetError, Phase,
    Profile, TcpChannel, TcpOptions, Transport,
};
use std::io::Write;
use std::net::TcpListener;
use std::time::{Duration, Instant};

/// Client sends a vector, server answers with each element doubled: the same over every transport.
fn ping_pong(transport: Transport, profile: Profile) {
    let input: Vec<u64> = (0..1000).map(|i| i * 7 + 3).collect();
    let expected: Vec<u64> = input.iter().map(|v| v * 2).collect();
    let inp = input.clone();
    let run = run_two_party(
        transport,
        profile,
        move |ch| {
            ch.send_u64s(&inp)?;
            ch.recv_u64s(inp.len())
        },
        |ch| {
            let v = ch.recv_u64s(1000)?;
            let out: Vec<u64> = v.iter().map(|x| x * 2).collect();
            ch.send_u64s(&out)?;
            Ok::<_, NetError>(())
        },
    )
    .expect("pair opens");
    assert_eq!(run.client.output.expect("client ok"), expected);
    run.server.output.expect("server ok");
    assert_eq!(run.client.cost.total().bytes_sent, 8000);
    assert_eq!(run.server.cost.total().bytes_sent, 8000);
}

#[test]
fn harness_over_mem() {
    ping_pong(Transport::Mem, Profile::NONE);
}

#[test]
fn harness_over_loopback_tcp() {
    ping_pong(Transport::Tcp, Profile::NONE);
}

#[test]
fn harness_over_shaped_mem_and_tcp() {
    ping_pong(Transport::Mem, Profile::LAN);
    ping_pong(Transport::Tcp, Profile::LAN);
}

#[test]
fn metering_counts_exact_bytes_messages_and_rounds() {
    // Pattern: client sends 3 frames (10, 20, 30 bytes); server replies 2 frames (5, 6 bytes);
    // in phase Online the client sends 1 frame (7 bytes) and the server 1 frame (8 bytes).
    let run = simulate(
        |ch| {
            for n in [10usize, 20, 30] {
                ch.send_frame(&vec![1u8; n]).unwrap();
            }
            ch.recv_frame().unwrap();
            ch.recv_frame().unwrap();
            ch.set_phase(Phase::Online);
            ch.send_frame(&[0u8; 7]).unwrap();
            ch.recv_frame().unwrap();
        },
        |ch| {
            for _ in 0..3 {
                ch.recv_frame().unwrap();
            }
            ch.send_frame(&[0u8; 5]).unwrap();
            ch.send_frame(&[0u8; 6]).unwrap();
            ch.set_phase(Phase::Online);
            ch.recv_frame().unwrap();
            ch.send_frame(&[0u8; 8]).unwrap();
        },
    );
    let c = run.client.cost;
    assert_eq!((c.setup.bytes_sent, c.setup.bytes_received), (60, 11));
    assert_eq!((c.setup.messages_sent, c.setup.messages_received), (3, 2));
    assert_eq!(c.setup.rounds, 2, "send run then receive run");
    assert_eq!(
        (
            c.online.bytes_sent,
            c.online.bytes_received,
            c.online.rounds
        ),
        (7, 8, 2)
    );
    let s = run.server.cost;
    assert_eq!(
        (s.setup.bytes_sent, s.setup.bytes_received, s.setup.rounds),
        (11, 60, 2)
    );
    assert_eq!(c.total().bytes(), 86);
    assert_eq!(c.offline, Default::default());
}

#[test]
fn wan_round_trips_take_at_least_the_latency() {
    let k = 5u32;
    let run = run_two_party(
        Transport::Mem,
        Profile::WAN,
        move |ch| {
            let t = Instant::now();
            for i in 0..k {
                ch.send_u64(i as u64).unwrap();
                assert_eq!(ch.recv_u64().unwrap(), i as u64 + 1);
            }
            t.elapsed()
        },
        move |ch| {
            for _ in 0..k {
                let v = ch.recv_u64().unwrap();
                ch.send_u64(v + 1).unwrap();
            }
        },
    )
    .unwrap();
    // 2k one-way trips of 20 ms each.
    let min = Profile::WAN.one_way * (2 * k);
    assert!(
        run.client.output >= min,
        "{:?} < {:?}",
        run.client.output,
        min
    );
    assert_eq!(run.client.cost.total().rounds, 2 * k as u64);
}

#[test]
fn bandwidth_limits_large_transfers() {
    // 4 MB at 400 Mbit/s takes at least 80 ms.
    let run = run_two_party(
        Transport::Mem,
        Profile::WAN,
        |ch| {
            let t = Instant::now();
            ch.send_frame(&vec![0u8; 4_000_000]).unwrap();
            ch.recv_u64().unwrap();
            t.elapsed()
        },
        |ch| {
            ch.recv_frame().unwrap();
            ch.send_u64(1).unwrap();
        },
    )
    .unwrap();
    assert!(
        run.client.output >= Duration::from_millis(80 + 40),
        "{:?}",
        run.client.output
    );
}

#[test]
fn typed_receive_rejects_wrong_lengths() {
    let (mut a, mut b) = mem_pair();
    a.send_u64s(&[1, 2, 3]).unwrap();
    match b.recv_u64s(4) {
        Err(NetError::UnexpectedLength {
            expected: 32,
            got: 24,
        }) => {}
        other => panic!("expected UnexpectedLength, got {other:?}"),
    }
    a.send_frame(&[1, 2, 3]).unwrap();
    assert!(matches!(
        b.recv_pod_upto::<u64>(10),
        Err(NetError::Malformed(_))
    ));
    // A typed receive larger than the frame limit fails before waiting for data.
    assert!(matches!(
        b.recv_u64s(usize::MAX / 4),
        Err(NetError::FrameTooLarge { .. })
    ));
}

#[test]
fn frame_limit_is_enforced_on_both_sides() {
    let (mut a, mut b) = mem_pair_with(16, Some(Duration::from_millis(200)));
    assert!(matches!(
        a.send_frame(&[0u8; 17]),
        Err(NetError::FrameTooLarge { len: 17, max: 16 })
    ));
    assert!(matches!(
        b.recv_frame(),
        Err(NetError::Timeout(secinfer_net::Deadline::Idle))
    ));
    drop(a);
    assert!(matches!(b.recv_frame(), Err(NetError::Closed)));
}

/// A hand-written hostile TCP peer: raw bytes, not a `TcpChannel`.
fn hostile_peer(bytes: Vec<u8>) -> (TcpChannel, std::thread::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let h = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let _ = s.write_all(&bytes);
        // Hang up right after: the victim must report, not hang or panic.
    });
    let opts = TcpOptions {
        max_frame: 1 << 20,
        read_timeout: Some(Duration::from_secs(5)),
        ..TcpOptions::default()
    };
    let ch = TcpChannel::connect(addr, Duration::from_secs(5), &opts).unwrap();
    (ch, h)
}

#[test]
fn hostile_tcp_peer_oversized_length_prefix() {
    let (mut ch, h) = hostile_peer(u32::MAX.to_le_bytes().to_vec());
    assert!(matches!(
        ch.recv_frame(),
        Err(NetError::FrameTooLarge { .. })
    ));
    h.join().unwrap();
}

#[test]
fn hostile_tcp_peer_truncated_frame() {
    let mut bytes = 100u32.to_le_bytes().to_vec();
    bytes.extend_from_slice(&[7u8; 40]);
    let (mut ch, h) = hostile_peer(bytes);
    assert!(matches!(ch.recv_frame(), Err(NetError::Closed)));
    h.join().unwrap();
}

#[test]
fn hostile_tcp_peer_garbage_for_typed_receive() {
    let mut bytes = 13u32.to_le_bytes().to_vec();
    bytes.extend_from_slice(b"not u64 data!");
    let (mut ch, h) = hostile_peer(bytes);
    assert!(matches!(
        ch.recv_u64s(2),
        Err(NetError::UnexpectedLength {
            expected: 16,
            got: 13
        })
    ));
    h.join().unwrap();
}

#[test]
fn hostile_shaped_frame_without_header() {
    let (a, b) = mem_pair();
    let (mut a_raw, b) = (
        a,
        secinfer_net::Shaped::new(b, Profile::LAN, Instant::now()),
    );
    let mut b = b;
    a_raw.send_frame(&[1, 2, 3]).unwrap();
    assert!(matches!(b.recv_frame(), Err(NetError::Malformed(_))));
}

#[test]
fn channel_pair_builds_every_combination() {
    for t in [Transport::Mem, Transport::Tcp] {
        for p in [Profile::NONE, Profile::LAN] {
            let (mut a, mut b) = channel_pair(t, p).unwrap();
            a.send_u128s(&[u128::MAX, 5]).unwrap();
            a.flush().unwrap();
            assert_eq!(b.recv_u128s(2).unwrap(), vec![u128::MAX, 5]);
        }
    }
}
