//! The served path over real loopback sockets: the Noise channel round-trips frames of every
//! size, refuses a wrong key, a plaintext downgrade, tampered and replayed bytes with typed
//! errors; admission control refuses beyond the cap with the busy error; the deadlines cut
//! slow, idle and silent peers.
#![allow(clippy::unwrap_used, reason = "tests: a panic is the failure report")]
use secinfer_net::{
    connect_session, serve_sessions, Admitted, Channel, ClientConfig, Deadline, Identity, NetError,
    PeerKey, ServeConfig, ServerSecurity, ServerStats, SessionHandler, TcpChannel, GREETING_LEN,
};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Echoes frames until the peer closes; reports how the session ended.
struct Echo(Mutex<Sender<Result<usize, NetError>>>);

impl SessionHandler for Echo {
    fn session(&self, _who: &Admitted, ch: Result<TcpChannel, NetError>) {
        let r = ch.and_then(|mut ch| {
            let mut n = 0;
            loop {
                match ch.recv_frame() {
                    Ok(f) => {
                        ch.send_frame(&f)?;
                        ch.flush()?;
                        n += 1;
                    }
                    Err(NetError::Closed) => return Ok(n),
                    Err(e) => return Err(e),
                }
            }
        });
        let _ = self.0.lock().unwrap().send(r);
    }
}

struct Served {
    addr: String,
    key: [u8; 32],
    ends: std::sync::mpsc::Receiver<Result<usize, NetError>>,
    stats: Arc<ServerStats>,
    _t: std::thread::JoinHandle<()>,
}

fn serve(mut cfg: ServeConfig, sessions: u64) -> Served {
    let id = Arc::new(Identity::generate().unwrap());
    let key = id.public();
    if matches!(cfg.security, ServerSecurity::Noise(_)) {
        cfg.security = ServerSecurity::Noise(id);
    }
    cfg.stop_after = Some(sessions);
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let (tx, ends) = channel();
    let stats = Arc::new(ServerStats::default());
    let st = stats.clone();
    let t = std::thread::spawn(move || {
        serve_sessions(&l, &cfg, &st, &Echo(Mutex::new(tx))).unwrap();
    });
    Served {
        addr,
        key,
        ends,
        stats,
        _t: t,
    }
}

fn noise_cfg() -> ServeConfig {
    ServeConfig::new(
        2,
        ServerSecurity::Noise(Arc::new(Identity::generate().unwrap())),
    )
}

#[test]
fn noise_channel_round_trips_frames_of_every_size() {
    let s = serve(noise_cfg(), 1);
    let mut ch = connect_session(&s.addr, &ClientConfig::new(PeerKey::Pinned(s.key))).unwrap();
    assert!(ch.is_encrypted());
    for len in [0usize, 1, 65518, 65519, 65520, 300_001] {
        let f: Vec<u8> = (0..len).map(|i| (i * 7 + len) as u8).collect();
        ch.send_frame(&f).unwrap();
        assert_eq!(ch.recv_frame().unwrap(), f, "frame of {len} bytes");
    }
    drop(ch);
    assert_eq!(s.ends.recv().unwrap().unwrap(), 6);
}

#[test]
fn a_wrong_pinned_key_fails_the_key_exchange() {
    let s = serve(noise_cfg(), 1);
    let other = Identity::generate().unwrap().public();
    let r = connect_session(&s.addr, &ClientConfig::new(PeerKey::Pinned(other)));
    // NK: the client's first message is sealed to the pinned key; the server cannot open it and
    // drops the connection, so the client sees the closed channel or a failed exchange.
    assert!(
        matches!(r, Err(NetError::Closed) | Err(NetError::KeyExchange(_))),
        "{:?}",
        r.err()
    );
    assert!(matches!(
        s.ends.recv().unwrap(),
        Err(NetError::KeyExchange(_))
    ));
}

#[test]
fn plaintext_is_refused_by_either_side_that_wants_noise() {
    let s = serve(noise_cfg(), 1);
    let r = connect_session(&s.addr, &ClientConfig::new(PeerKey::InsecurePlaintext));
    assert!(matches!(r, Err(NetError::SecurityMismatch { .. })));
    let p = serve(ServeConfig::new(1, ServerSecurity::InsecurePlaintext), 1);
    let r = connect_session(&p.addr, &ClientConfig::new(PeerKey::Pinned(s.key)));
    assert!(matches!(r, Err(NetError::SecurityMismatch { .. })));
}

#[test]
fn sessions_beyond_the_cap_get_the_busy_error() {
    let mut cfg = noise_cfg();
    cfg.max_sessions = 1;
    cfg.queue = 0;
    // Refusals do not count as sessions: the server keeps accepting after the first.
    let s = serve(cfg, 2);
    let cc = ClientConfig::new(PeerKey::Pinned(s.key));
    let mut first = connect_session(&s.addr, &cc).unwrap();
    first.send_frame(b"hold").unwrap();
    assert_eq!(first.recv_frame().unwrap(), b"hold");
    for _ in 0..3 {
        match connect_session(&s.addr, &cc) {
            Err(NetError::Busy { reason }) => assert!(reason.contains("1 sessions running")),
            other => panic!("expected busy, got {:?}", other.err()),
        }
    }
    assert_eq!(
        s.stats.refused.load(std::sync::atomic::Ordering::Relaxed),
        3
    );
    drop(first);
    assert_eq!(s.ends.recv().unwrap().unwrap(), 1);
}

#[test]
fn a_queued_client_is_served_when_a_worker_frees() {
    let mut cfg = noise_cfg();
    cfg.max_sessions = 1;
    cfg.queue = 4;
    let s = serve(cfg, 2);
    let cc = ClientConfig::new(PeerKey::Pinned(s.key));
    let mut first = connect_session(&s.addr, &cc).unwrap();
    first.send_frame(b"a").unwrap();
    assert_eq!(first.recv_frame().unwrap(), b"a");
    let (addr, cc2) = (s.addr.clone(), cc.clone());
    let second = std::thread::spawn(move || {
        let mut ch = connect_session(&addr, &cc2)?;
        ch.send_frame(b"b")?;
        ch.recv_frame()
    });
    std::thread::sleep(Duration::from_millis(200));
    drop(first);
    assert_eq!(second.join().unwrap().unwrap(), b"b");
}

fn deadline_cfg() -> ServeConfig {
    let mut cfg = noise_cfg();
    cfg.handshake_timeout = Duration::from_millis(500);
    cfg.tcp.read_timeout = Some(Duration::from_millis(700));
    cfg.tcp.session_timeout = Some(Duration::from_millis(1500));
    cfg
}

#[test]
fn a_slowloris_key_exchange_is_cut_at_the_handshake_deadline() {
    let s = serve(deadline_cfg(), 1);
    let t0 = Instant::now();
    let mut raw = TcpStream::connect(&s.addr).unwrap();
    let mut g = [0u8; GREETING_LEN];
    raw.read_exact(&mut g).unwrap();
    // Never completes the key exchange: announces its 48-byte first message, then sends one
    // byte of it every 200 ms.
    raw.write_all(&[48, 0]).unwrap();
    let tr = std::thread::spawn(move || {
        for _ in 0..40 {
            if raw.write_all(&[0]).is_err() {
                break;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    });
    let end = s.ends.recv_timeout(Duration::from_secs(10)).unwrap();
    let took = t0.elapsed();
    assert!(
        matches!(end, Err(NetError::Timeout(Deadline::Handshake))),
        "{end:?}"
    );
    assert!(took < Duration::from_millis(1500), "{took:?}");
    let _ = tr.join();
}

#[test]
fn a_trickling_session_is_cut_at_the_session_deadline_and_an_idle_one_at_the_idle_deadline() {
    // Trickle: a valid session that sends one small frame every 300 ms, forever.
    let s = serve(deadline_cfg(), 1);
    let mut ch = connect_session(&s.addr, &ClientConfig::new(PeerKey::Pinned(s.key))).unwrap();
    let t0 = Instant::now();
    let tr = std::thread::spawn(move || {
        for _ in 0..30 {
            if ch.send_frame(b"x").and_then(|()| ch.flush()).is_err() {
                break;
            }
            std::thread::sleep(Duration::from_millis(300));
        }
    });
    let end = s.ends.recv_timeout(Duration::from_secs(10)).unwrap();
    let took = t0.elapsed();
    assert!(
        matches!(
            end,
            Err(NetError::Timeout(Deadline::Session)) | Err(NetError::Closed)
        ),
        "{end:?}"
    );
    assert!(
        took >= Duration::from_millis(1400) && took < Duration::from_millis(2500),
        "{took:?}"
    );
    let _ = tr.join();
    // Idle: opens a session and sends nothing.
    let s = serve(deadline_cfg(), 1);
    let t0 = Instant::now();
    let _ch = connect_session(&s.addr, &ClientConfig::new(PeerKey::Pinned(s.key))).unwrap();
    let end = s.ends.recv_timeout(Duration::from_secs(10)).unwrap();
    let took = t0.elapsed();
    assert!(
        matches!(end, Err(NetError::Timeout(Deadline::Idle))),
        "{end:?}"
    );
    assert!(took < Duration::from_millis(1400), "{took:?}");
}

/// Forwards client → server bytes, recording them, and server → client bytes, optionally
/// flipping the byte at `flip` (counted in the client → server stream).
fn proxy(server: String, flip: Option<usize>) -> (String, Arc<Mutex<Vec<u8>>>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let rec = Arc::new(Mutex::new(Vec::new()));
    let r2 = rec.clone();
    std::thread::spawn(move || {
        let (mut c, _) = l.accept().unwrap();
        let mut s = TcpStream::connect(server).unwrap();
        let (mut c2, mut s2) = (c.try_clone().unwrap(), s.try_clone().unwrap());
        std::thread::spawn(move || std::io::copy(&mut s2, &mut c2));
        let mut buf = [0u8; 4096];
        let mut seen = 0usize;
        loop {
            let n = match c.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            if let Some(f) = flip {
                if (seen..seen + n).contains(&f) {
                    buf[f - seen] ^= 0x20;
                }
            }
            seen += n;
            r2.lock().unwrap().extend_from_slice(&buf[..n]);
            if s.write_all(&buf[..n]).is_err() {
                break;
            }
        }
        let _ = s.shutdown(std::net::Shutdown::Write);
    });
    (addr, rec)
}

#[test]
fn a_tampered_record_fails_with_the_tampered_error() {
    let s = serve(noise_cfg(), 1);
    // Bytes 0..50 are the key exchange (2 + 48); flip one inside the first frame's records.
    let (addr, _) = proxy(s.addr.clone(), Some(80));
    let mut ch = connect_session(&addr, &ClientConfig::new(PeerKey::Pinned(s.key))).unwrap();
    ch.send_frame(&[5u8; 100]).unwrap();
    ch.flush().unwrap();
    let end = s.ends.recv_timeout(Duration::from_secs(10)).unwrap();
    assert!(matches!(end, Err(NetError::Tampered(_))), "{end:?}");
}

#[test]
fn a_replayed_session_fails_with_the_tampered_error() {
    let s = serve(noise_cfg(), 2);
    let (addr, rec) = proxy(s.addr.clone(), None);
    let mut ch = connect_session(&addr, &ClientConfig::new(PeerKey::Pinned(s.key))).unwrap();
    ch.send_frame(b"transfer 100").unwrap();
    assert_eq!(ch.recv_frame().unwrap(), b"transfer 100");
    drop(ch);
    assert_eq!(s.ends.recv().unwrap().unwrap(), 1);
    std::thread::sleep(Duration::from_millis(100));
    let recorded = rec.lock().unwrap().clone();
    assert!(recorded.len() > 50);
    let mut raw = TcpStream::connect(&s.addr).unwrap();
    let mut g = [0u8; GREETING_LEN];
    raw.read_exact(&mut g).unwrap();
    raw.write_all(&recorded).unwrap();
    let end = s.ends.recv_timeout(Duration::from_secs(10)).unwrap();
    assert!(matches!(end, Err(NetError::Tampered(_))), "{end:?}");
}

#[test]
fn the_health_port_reports_the_live_counts() {
    let s = serve(noise_cfg(), 2);
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let haddr = l.local_addr().unwrap();
    secinfer_net::serve_health(l, s.stats.clone()).unwrap();
    let mut ch = connect_session(&s.addr, &ClientConfig::new(PeerKey::Pinned(s.key))).unwrap();
    ch.send_frame(b"x").unwrap();
    assert_eq!(ch.recv_frame().unwrap(), b"x");
    let mut line = String::new();
    TcpStream::connect(haddr)
        .unwrap()
        .read_to_string(&mut line)
        .unwrap();
    assert_eq!(
        line,
        "ok active=1 queued=0 max_sessions=2 admitted=1 refused=0\n"
    );
}

/// Threads that start one server key at once all end with the same key and its public half
/// published beside it (two writers once renamed each other's temporary file away).
#[test]
fn concurrent_identity_creation_agrees_on_one_key() {
    let dir = std::env::temp_dir().join(format!("secinfer-id-race-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let key = dir.join(secinfer_net::PRIVATE_KEY_FILE);
    let ids: Vec<String> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..8)
            .map(|_| s.spawn(|| Identity::load_or_create(&key).unwrap().public_hex()))
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(ids.iter().all(|k| k == &ids[0]), "{ids:?}");
    let published = std::fs::read_to_string(Identity::public_path(&key)).unwrap();
    assert_eq!(published.trim(), ids[0]);
    let _ = std::fs::remove_dir_all(&dir);
}
