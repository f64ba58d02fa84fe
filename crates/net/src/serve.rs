//! The served path every model's server and client share: a greeting the server speaks first
//! (ready, or a typed "busy" refusal), the Noise key exchange ([`crate::noise`]) unless plaintext
//! was chosen for benchmarks, and an accept loop with admission control.
//!
//! Admission: a fixed pool of `max_sessions` worker threads takes connections from a bounded
//! queue; a connection waiting in the queue holds only its socket, never a thread or a buffer.
//! When the queue is full the accept loop itself answers "busy, retry later" and closes, and
//! when the process runs out of descriptors it frees a reserved one to accept and refuse the
//! same way, so a client always reads why. A bounded pool rather than an async runtime: a
//! session is CPU-bound protocol work of a fraction of a second to seconds on blocking
//! channels (the protocol crates are synchronous), so async would buy nothing but a second
//! runtime beside rayon; the pool bounds threads, and the deadlines bound how long a slow or
//! idle peer can keep a worker.
use crate::error::{sanitize_peer_text, Deadline, NetError, Result};
use crate::noise::Identity;
use crate::tcp::{connect_stream, TcpChannel, TcpOptions};
use std::io::Write;
use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Receiver};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const MAGIC: &[u8; 4] = b"SINF";
const VERSION: u8 = 1;
const READY: u8 = 0;
const BUSY: u8 = 1;
const MODE_PLAIN: u8 = 0;
const MODE_NOISE: u8 = 1;
/// Bytes of a greeting before its reason text.
pub const GREETING_LEN: usize = 9;
/// Longest reason text a greeting carries.
pub const MAX_REASON: usize = 512;

/// How the server secures sessions.
#[derive(Clone, Debug)]
pub enum ServerSecurity {
    /// The Noise channel under this identity (the default path).
    Noise(Arc<Identity>),
    /// No encryption or authentication: for benchmarks only.
    InsecurePlaintext,
}

/// What the client requires of the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PeerKey {
    /// The Noise channel with a server holding this public key.
    Pinned([u8; 32]),
    /// No encryption or authentication: for benchmarks only.
    InsecurePlaintext,
}

fn mode_name(m: u8) -> &'static str {
    match m {
        MODE_NOISE => "the Noise channel",
        _ => "insecure plaintext",
    }
}

/// A greeting as sent on the wire: `SINF ‖ version ‖ status ‖ mode ‖ u16 reason length ‖ reason`.
pub fn encode_greeting(busy_reason: Option<&str>, noise: bool) -> Vec<u8> {
    let mut g = MAGIC.to_vec();
    g.push(VERSION);
    g.push(if busy_reason.is_some() { BUSY } else { READY });
    g.push(if noise { MODE_NOISE } else { MODE_PLAIN });
    let reason = busy_reason.unwrap_or("").as_bytes();
    let reason = &reason[..reason.len().min(MAX_REASON)];
    g.extend_from_slice(&(reason.len() as u16).to_le_bytes());
    g.extend_from_slice(reason);
    g
}

/// A decoded greeting header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Greeting {
    pub busy: bool,
    pub noise: bool,
    /// Length of the reason text that follows.
    pub reason_len: usize,
}

/// Decodes the fixed greeting header (hostile bytes: every field is checked).
pub fn decode_greeting(h: &[u8; GREETING_LEN]) -> Result<Greeting> {
    if &h[..4] != MAGIC {
        return Err(NetError::malformed("the peer is not a secinfer server"));
    }
    if h[4] != VERSION {
        return Err(NetError::malformed(format!(
            "greeting version {}, this end speaks {VERSION}",
            h[4]
        )));
    }
    let busy = match h[5] {
        READY => false,
        BUSY => true,
        s => return Err(NetError::malformed(format!("greeting status {s}"))),
    };
    let noise = match h[6] {
        MODE_PLAIN => false,
        MODE_NOISE => true,
        m => return Err(NetError::malformed(format!("greeting mode {m}"))),
    };
    let reason_len = u16::from_le_bytes([h[7], h[8]]) as usize;
    if reason_len > MAX_REASON {
        return Err(NetError::FrameTooLarge {
            len: reason_len,
            max: MAX_REASON,
        });
    }
    Ok(Greeting {
        busy,
        noise,
        reason_len,
    })
}

/// The client's side of the served path's timing.
#[derive(Clone, Debug)]
pub struct ClientConfig {
    pub peer: PeerKey,
    /// How long to retry connecting (the server may be starting).
    pub connect_wait: Duration,
    /// How long to wait in the server's queue for the greeting.
    pub queue_wait: Duration,
    /// Limit for the key exchange.
    pub handshake_timeout: Duration,
    /// Frame limit and idle/write/session deadlines of the session itself.
    pub tcp: TcpOptions,
}

impl ClientConfig {
    pub fn new(peer: PeerKey) -> ClientConfig {
        ClientConfig {
            peer,
            connect_wait: Duration::from_secs(10),
            queue_wait: Duration::from_secs(300),
            handshake_timeout: Duration::from_secs(10),
            tcp: TcpOptions::default(),
        }
    }
}

/// Opens a session to a server started with [`serve_sessions`]: waits for its greeting, turns a
/// refusal into [`NetError::Busy`], refuses a server that does not offer the security `cfg`
/// requires ([`NetError::SecurityMismatch`]), and runs the key exchange.
pub fn connect_session(addr: impl ToSocketAddrs, cfg: &ClientConfig) -> Result<TcpChannel> {
    let stream = connect_stream(addr, cfg.connect_wait)?;
    let mut ch = TcpChannel::new(stream, &cfg.tcp)?;
    let session_deadline = cfg.tcp.session_timeout.map(|t| Instant::now() + t);
    let queue_until = Instant::now() + cfg.queue_wait;
    let mut head = [0u8; GREETING_LEN];
    let (g, reason) = ch.opening(Deadline::Queue, queue_until, None, |ch| {
        ch.raw_read(&mut head)?;
        let g = decode_greeting(&head)?;
        let mut reason = vec![0u8; g.reason_len];
        ch.raw_read(&mut reason)?;
        Ok((g, reason))
    })?;
    if g.busy {
        return Err(NetError::Busy {
            reason: sanitize_peer_text(&String::from_utf8_lossy(&reason), 200),
        });
    }
    let wanted = matches!(cfg.peer, PeerKey::Pinned(_));
    if wanted != g.noise {
        return Err(NetError::SecurityMismatch {
            ours: mode_name(if wanted { MODE_NOISE } else { MODE_PLAIN }),
            theirs: mode_name(if g.noise { MODE_NOISE } else { MODE_PLAIN }),
        });
    }
    if let PeerKey::Pinned(key) = cfg.peer {
        let until = Instant::now() + cfg.handshake_timeout;
        ch.opening(Deadline::Handshake, until, session_deadline, |ch| {
            ch.secure_as_client(&key, &head)
        })?;
    } else {
        ch.set_deadline(session_deadline)?;
    }
    Ok(ch)
}

/// Admission control and deadlines of a served endpoint.
#[derive(Clone, Debug)]
pub struct ServeConfig {
    /// Sessions run at once (worker threads).
    pub max_sessions: usize,
    /// Connections that may wait for a worker; beyond it new ones are refused as busy.
    pub queue: usize,
    /// Longest wait in the queue; an older connection is refused as busy when its turn comes.
    pub queue_timeout: Duration,
    /// Limit for the greeting and key exchange.
    pub handshake_timeout: Duration,
    /// Frame limit, idle/write deadlines and the whole-session deadline.
    pub tcp: TcpOptions,
    pub security: ServerSecurity,
    /// Return after this many connections were admitted and their sessions ended (`None`:
    /// serve until the listener fails).
    pub stop_after: Option<u64>,
}

impl ServeConfig {
    /// Defaults around `max_sessions`: a queue of 16 per session, 120 s queue wait, 10 s for the
    /// key exchange, 60 s idle and write deadlines, 600 s per session.
    pub fn new(max_sessions: usize, security: ServerSecurity) -> ServeConfig {
        ServeConfig {
            max_sessions: max_sessions.max(1),
            queue: 16 * max_sessions.max(1),
            queue_timeout: Duration::from_secs(120),
            handshake_timeout: Duration::from_secs(10),
            tcp: TcpOptions {
                read_timeout: Some(Duration::from_secs(60)),
                write_timeout: Some(Duration::from_secs(60)),
                session_timeout: Some(Duration::from_secs(600)),
                ..TcpOptions::default()
            },
            security,
            stop_after: None,
        }
    }
}

/// Sessions to run at once by default: two per core, and no more than half of the memory
/// available now allows at `per_session_bytes` each; at least one.
pub fn default_max_sessions(per_session_bytes: u64) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let by_mem = mem_available()
        .map(|m| (m / 2 / per_session_bytes.max(1)) as usize)
        .unwrap_or(usize::MAX);
    (2 * cores).min(by_mem).max(1)
}

/// MemAvailable from /proc/meminfo, in bytes (Linux; `None` elsewhere).
pub fn mem_available() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// One admitted connection.
#[derive(Clone, Debug)]
pub struct Admitted {
    pub id: u64,
    pub peer: String,
    /// Time spent in the queue.
    pub waited: Duration,
}

/// What a served endpoint does with its connections.
pub trait SessionHandler: Sync {
    /// Runs one session on an opened channel, or reports why the opening failed.
    fn session(&self, who: &Admitted, channel: Result<TcpChannel>);
    /// A connection refused before any session state was made.
    fn refused(&self, _peer: &str, _reason: &str) {}
}

/// Live counters of a served endpoint (for logs and the health line).
#[derive(Debug, Default)]
pub struct ServerStats {
    pub max_sessions: AtomicUsize,
    pub active: AtomicUsize,
    pub queued: AtomicUsize,
    pub admitted: AtomicU64,
    pub refused: AtomicU64,
    pub panicked: AtomicU64,
}

impl ServerStats {
    /// One status line: `ok active=A queued=Q max_sessions=M admitted=N refused=R`.
    pub fn line(&self) -> String {
        format!(
            "ok active={} queued={} max_sessions={} admitted={} refused={}\n",
            self.active.load(Ordering::Relaxed),
            self.queued.load(Ordering::Relaxed),
            self.max_sessions.load(Ordering::Relaxed),
            self.admitted.load(Ordering::Relaxed),
            self.refused.load(Ordering::Relaxed),
        )
    }
}

/// Answers every connection on `listener` with [`ServerStats::line`] and closes it, on a thread
/// of its own, for a load balancer's health check.
pub fn serve_health(listener: TcpListener, stats: Arc<ServerStats>) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("health".into())
        .spawn(move || {
            for s in listener.incoming().flatten() {
                let _ = s.set_write_timeout(Some(Duration::from_secs(1)));
                let _ = (&s).write_all(stats.line().as_bytes());
            }
        })?;
    Ok(())
}

fn refuse(mut s: TcpStream, reason: &str) {
    let _ = s.set_write_timeout(Some(Duration::from_secs(1)));
    // The mode byte of a refusal is irrelevant: the client stops at the status.
    let _ = s.write_all(&encode_greeting(Some(reason), false));
    let _ = s.shutdown(std::net::Shutdown::Write);
}

fn is_out_of_descriptors(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMFILE) | Some(libc::ENFILE))
}

struct Queued {
    stream: TcpStream,
    at: Instant,
    id: u64,
}

/// Opens an admitted connection: greeting, then the key exchange under its own deadline; the
/// session deadline starts when the session does.
fn open(stream: TcpStream, cfg: &ServeConfig) -> Result<TcpChannel> {
    let tcp = TcpOptions {
        session_timeout: None,
        ..cfg.tcp.clone()
    };
    let mut ch = TcpChannel::new(stream, &tcp)?;
    let noise = matches!(cfg.security, ServerSecurity::Noise(_));
    let greeting = encode_greeting(None, noise);
    let until = Instant::now() + cfg.handshake_timeout;
    ch.opening(Deadline::Handshake, until, None, |ch| {
        ch.raw_write(&greeting)?;
        if let ServerSecurity::Noise(id) = &cfg.security {
            ch.secure_as_server(id, &greeting)?;
        }
        Ok(())
    })?;
    ch.set_deadline(cfg.tcp.session_timeout.map(|t| Instant::now() + t))?;
    Ok(ch)
}

fn worker(
    rx: &Mutex<Receiver<Queued>>,
    cfg: &ServeConfig,
    stats: &ServerStats,
    h: &dyn SessionHandler,
) {
    loop {
        // The lock is held only while waiting for the next connection.
        let next = match rx.lock() {
            Ok(r) => r.recv(),
            Err(_) => return,
        };
        let Ok(q) = next else { return };
        // Active first, then no longer queued: the admission count never dips in between.
        stats.active.fetch_add(1, Ordering::Relaxed);
        stats.queued.fetch_sub(1, Ordering::Relaxed);
        let peer = q
            .stream
            .peer_addr()
            .map_or_else(|_| "?".into(), |p| p.to_string());
        let waited = q.at.elapsed();
        if waited > cfg.queue_timeout {
            stats.refused.fetch_add(1, Ordering::Relaxed);
            h.refused(&peer, "waited too long in the queue");
            refuse(q.stream, "waited too long in the queue");
            stats.active.fetch_sub(1, Ordering::Relaxed);
            continue;
        }
        let who = Admitted {
            id: q.id,
            peer,
            waited,
        };
        let r = catch_unwind(AssertUnwindSafe(|| h.session(&who, open(q.stream, cfg))));
        if r.is_err() {
            stats.panicked.fetch_add(1, Ordering::Relaxed);
        }
        stats.active.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Serves connections on `listener` under `cfg` with `handler` (see the module docs). Returns
/// after `cfg.stop_after` admitted sessions have ended, or with the listener's error.
pub fn serve_sessions(
    listener: &TcpListener,
    cfg: &ServeConfig,
    stats: &ServerStats,
    handler: &dyn SessionHandler,
) -> Result<()> {
    stats
        .max_sessions
        .store(cfg.max_sessions, Ordering::Relaxed);
    // Unbounded channel, bounded by the admission count below.
    let (tx, rx) = channel::<Queued>();
    let rx = Mutex::new(rx);
    std::thread::scope(|scope| -> Result<()> {
        for i in 0..cfg.max_sessions.max(1) {
            let (rx, cfg) = (&rx, &cfg);
            std::thread::Builder::new()
                .name(format!("session-worker-{i}"))
                .spawn_scoped(scope, move || worker(rx, cfg, stats, handler))?;
        }
        // A descriptor held back so that, when the process runs out, one can be freed to
        // accept and refuse instead of leaving clients in the backlog.
        let mut spare = std::fs::File::open("/dev/null").ok();
        let mut admitted = 0u64;
        while cfg.stop_after.is_none_or(|n| admitted < n) {
            let stream = match listener.accept() {
                Ok((s, _)) => s,
                Err(e) if is_out_of_descriptors(&e) => {
                    drop(spare.take());
                    if let Ok((s, p)) = listener.accept() {
                        stats.refused.fetch_add(1, Ordering::Relaxed);
                        handler.refused(&p.to_string(), "server out of file descriptors");
                        refuse(s, "server out of file descriptors");
                    }
                    spare = std::fs::File::open("/dev/null").ok();
                    std::thread::sleep(Duration::from_millis(10));
                    continue;
                }
                Err(e) if e.kind() == std::io::ErrorKind::InvalidInput => return Err(e.into()),
                // A failed accept concerns that client only.
                Err(_) => continue,
            };
            // Admission counts sessions running plus waiting, so a worker that is between two
            // sessions is not mistaken for a busy one.
            let in_flight =
                stats.active.load(Ordering::Relaxed) + stats.queued.load(Ordering::Relaxed);
            if in_flight >= cfg.max_sessions + cfg.queue {
                stats.refused.fetch_add(1, Ordering::Relaxed);
                let peer = stream
                    .peer_addr()
                    .map_or_else(|_| "?".into(), |p| p.to_string());
                let reason = format!(
                    "{} sessions running and {} waiting",
                    cfg.max_sessions, cfg.queue
                );
                handler.refused(&peer, &reason);
                refuse(stream, &reason);
                continue;
            }
            let id = stats.admitted.fetch_add(1, Ordering::Relaxed) + 1;
            stats.queued.fetch_add(1, Ordering::Relaxed);
            let q = Queued {
                stream,
                at: Instant::now(),
                id,
            };
            if tx.send(q).is_err() {
                // Every worker is gone (they only stop when this loop does): nothing to serve.
                return Ok(());
            }
            admitted += 1;
        }
        drop(tx);
        Ok(())
    })
}
