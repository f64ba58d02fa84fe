//! An opening frame announcing far more than the handshake limit is refused before any buffer
//! of that size exists, over plaintext TCP and inside the Noise channel alike.
#![allow(clippy::unwrap_used, reason = "tests: a panic is the failure report")]
use secinfer_net::{
    connect_session, serve_sessions, Admitted, Channel, ClientConfig, NetError, PeerKey,
    ServeConfig, ServerSecurity, ServerStats, SessionHandler, TcpChannel, TcpOptions,
};
use std::alloc::{GlobalAlloc, Layout, System};
use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// Records the largest single allocation of the whole test binary.
struct Peak;
static LARGEST: AtomicUsize = AtomicUsize::new(0);

#[allow(unsafe_code)]
// SAFETY: every call is forwarded unchanged to the system allocator, which upholds the
// GlobalAlloc contract; the wrapper only reads the requested size.
unsafe impl GlobalAlloc for Peak {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LARGEST.fetch_max(l.size(), Ordering::Relaxed);
        // SAFETY: the caller's layout is passed through unchanged.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: `p` was allocated by System.alloc with layout `l`.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        LARGEST.fetch_max(n, Ordering::Relaxed);
        // SAFETY: forwarded unchanged from the caller, who upholds realloc's contract.
        unsafe { System.realloc(p, l, n) }
    }
}

#[global_allocator]
static A: Peak = Peak;

const LIMIT: usize = 4096;
/// Nothing in either test needs a buffer near this: the channel's own buffers are 256 KiB.
const MAX_ALLOWED: usize = 1 << 20;

struct Limited(Mutex<Option<Result<Vec<u8>, NetError>>>);
impl SessionHandler for Limited {
    fn session(&self, _: &Admitted, ch: Result<TcpChannel, NetError>) {
        let r = ch.and_then(|mut ch| ch.recv_frame_limited(LIMIT));
        *self.0.lock().unwrap() = Some(r);
    }
}

#[test]
fn an_oversized_opening_frame_is_refused_without_a_large_allocation() {
    // Plaintext: a 64 MiB − 1 length prefix, then a few bytes.
    let big = (64u32 << 20) - 1;
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let h = std::thread::spawn(move || {
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.write_all(&big.to_le_bytes()).unwrap();
        s.write_all(b"{}").unwrap();
        std::thread::sleep(std::time::Duration::from_millis(200));
    });
    let mut ch = TcpChannel::accept(&l, &TcpOptions::default()).unwrap();
    LARGEST.store(0, Ordering::Relaxed);
    let r = ch.recv_frame_limited(LIMIT);
    let largest = LARGEST.load(Ordering::Relaxed);
    assert!(
        matches!(r, Err(NetError::FrameTooLarge { len, max }) if len == big as usize && max == LIMIT)
    );
    assert!(largest < MAX_ALLOWED, "largest allocation {largest} B");
    h.join().unwrap();

    // Inside the Noise channel: a client announcing a 60 MiB frame to a handshake read.
    let id = Arc::new(secinfer_net::Identity::generate().unwrap());
    let key = id.public();
    let mut cfg = ServeConfig::new(1, ServerSecurity::Noise(id));
    cfg.stop_after = Some(1);
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let handler = Arc::new(Limited(Mutex::new(None)));
    let h2 = handler.clone();
    let srv = std::thread::spawn(move || {
        serve_sessions(&l, &cfg, &ServerStats::default(), &*h2).unwrap();
    });
    let mut c = connect_session(addr, &ClientConfig::new(PeerKey::Pinned(key))).unwrap();
    // The sender's 60 MiB frame exists before the count starts; sealing it uses fixed buffers.
    let frame = vec![1u8; 60 << 20];
    LARGEST.store(0, Ordering::Relaxed);
    let _ = c.send_frame(&frame);
    let _ = c.flush();
    drop(c);
    srv.join().unwrap();
    let got = handler.0.lock().unwrap().take().unwrap();
    assert!(
        matches!(got, Err(NetError::FrameTooLarge { len, max }) if len == 60 << 20 && max == LIMIT),
        "{got:?}"
    );
    let largest = LARGEST.load(Ordering::Relaxed);
    assert!(largest < MAX_ALLOWED, "largest allocation {largest} B");
}
