//! The harness's protocols over real TCP between two processes: this test binary re-executes
#![allow(
    clippy::unwrap_used,
    reason = "test helpers: a panic is the failure report"
)]
//! itself as the peer.
use secinfer_net::{Channel, TcpChannel, TcpOptions};
use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::time::Duration;

const PEER_ENV: &str = "SECINFER_NET_TEST_PEER";

/// Runs only inside the child process (the env var is set): acts as the server.
#[test]
fn peer_process_entry() {
    let Ok(addr) = std::env::var(PEER_ENV) else {
        return;
    };
    let mut ch =
        TcpChannel::connect(addr, Duration::from_secs(10), &TcpOptions::default()).unwrap();
    let n = ch.recv_u64().unwrap() as usize;
    let v = ch.recv_u64s(n).unwrap();
    let sum: u64 = v.iter().fold(0u64, |a, b| a.wrapping_add(*b));
    ch.send_u64(sum).unwrap();
    ch.send_u64(std::process::id() as u64).unwrap();
    ch.flush().unwrap();
}

#[test]
fn two_processes_over_tcp() {
    if std::env::var(PEER_ENV).is_ok() {
        return;
    }
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "peer_process_entry",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(PEER_ENV, addr.to_string())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let mut ch = TcpChannel::accept(&listener, &TcpOptions::default()).unwrap();
    let v: Vec<u64> = (1..=100_000).collect();
    ch.send_u64(v.len() as u64).unwrap();
    ch.send_u64s(&v).unwrap();
    assert_eq!(ch.recv_u64().unwrap(), 100_000 * 100_001 / 2);
    let peer_pid = ch.recv_u64().unwrap();
    assert_ne!(
        peer_pid,
        std::process::id() as u64,
        "the peer must be another process"
    );
    assert!(child.wait().unwrap().success());
    let c = ch.cost();
    assert_eq!(c.total().bytes_sent, 8 + 800_000);
    assert_eq!(c.total().bytes_received, 16);
    assert_eq!(c.total().rounds, 2);
}
