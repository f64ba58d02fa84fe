//! The authenticated, encrypted channel: the Noise protocol framework's NK pattern
//! (`Noise_NK_25519_ChaChaPoly_BLAKE2s`, Perrin, "The Noise Protocol Framework", rev. 34) through
//! the `snow` crate. The server holds a static X25519 key ([`Identity`]); the client knows its
//! public half in advance (pinned through `secinfer export-info`), so the server is
//! authenticated in one round trip, the client stays anonymous, and each session's keys come
//! from fresh ephemerals (forward secrecy).
//!
//! Why Noise rather than TLS: the client already receives a file from the server's owner (the
//! public model info), so a pinned raw key needs no certificate authority, no names and no
//! certificate parsing on the hostile path; `snow` is pure Rust (no C toolchain), and one
//! pattern with one cipher suite leaves nothing to negotiate or downgrade.
//!
//! Records: every frame is sent as a header record (its length, encrypted) and chunk records of
//! at most [`CHUNK`] bytes; each record travels as `u16 length ‖ ciphertext`. AEAD nonces count
//! records, so a replayed, reordered, cut or altered record fails with [`NetError::Tampered`],
//! and since the server's ephemeral key differs per session, a recorded session replayed
//! against the server fails at its first record. The greeting is the handshake's prologue, so
//! altering it (e.g. to claim plaintext) fails the key exchange.
use crate::error::{NetError, Result};
use snow::resolvers::{CryptoResolver, DefaultResolver, FallbackResolver, RingResolver};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// The one Noise protocol this channel speaks.
pub const NOISE_PARAMS: &str = "Noise_NK_25519_ChaChaPoly_BLAKE2s";
/// Largest Noise message (the framework's limit).
pub const MAX_RECORD: usize = 65535;
const TAG: usize = 16;
/// Plaintext bytes per chunk record.
pub const CHUNK: usize = MAX_RECORD - TAG;
/// Largest handshake message accepted (NK's two messages are 48 bytes each with empty payloads).
const MAX_HANDSHAKE_RECORD: usize = 256;
/// Length of a public key in hex.
const KEY_HEX: usize = 64;

fn params() -> snow::params::NoiseParams {
    // A constant string the crate parses; a failure here is a build defect, caught by tests.
    NOISE_PARAMS
        .parse()
        .unwrap_or_else(|_| unreachable!("{NOISE_PARAMS} parses"))
}

/// The primitives of [`NOISE_PARAMS`]: ring's ChaCha20-Poly1305 (and its OS random source),
/// snow's own X25519 and BLAKE2s, which ring lacks. The records are the cipher's, so a peer on
/// snow's default resolver reads them unchanged (`ring_records_are_the_default_resolvers`);
/// the default resolver's sealing and opening were 9–13 % of each GRU process's CPU, and with
/// ring's both processes used less (docs/gru-protocol.md, "Where a 100-step session goes").
fn builder() -> snow::Builder<'static> {
    snow::Builder::with_resolver(
        params(),
        Box::new(FallbackResolver::new(
            Box::new(RingResolver),
            Box::new(DefaultResolver),
        )),
    )
}

/// The server's static key pair. The private half never prints.
pub struct Identity {
    private: [u8; 32],
    public: [u8; 32],
}

impl std::fmt::Debug for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Identity(public {})", self.public_hex())
    }
}

fn public_of(private: &[u8; 32]) -> Result<[u8; 32]> {
    let mut dh = DefaultResolver
        .resolve_dh(&snow::params::DHChoice::Curve25519)
        .ok_or(NetError::KeyExchange(snow::Error::Init(
            snow::error::InitStage::GetDhImpl,
        )))?;
    dh.set(private);
    let mut out = [0u8; 32];
    out.copy_from_slice(dh.pubkey());
    Ok(out)
}

/// Lower-case hex of a key.
pub fn key_hex(k: &[u8; 32]) -> String {
    k.iter().map(|b| format!("{b:02x}")).collect()
}

/// Parses 64 hex digits (surrounding white space allowed) into a key.
pub fn parse_key_hex(text: &str) -> Option<[u8; 32]> {
    let t = text.trim();
    if t.len() != KEY_HEX || !t.is_ascii() {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(&t[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

impl Identity {
    /// A fresh key pair from the OS CSPRNG (through snow's resolver).
    pub fn generate() -> Result<Identity> {
        let kp = builder()
            .generate_keypair()
            .map_err(NetError::KeyExchange)?;
        let mut private = [0u8; 32];
        private.copy_from_slice(&kp.private);
        let public = public_of(&private)?;
        Ok(Identity { private, public })
    }

    /// From a private key.
    pub fn from_private(private: [u8; 32]) -> Result<Identity> {
        let public = public_of(&private)?;
        Ok(Identity { private, public })
    }

    pub(crate) fn private_bytes(&self) -> &[u8; 32] {
        &self.private
    }

    pub fn public(&self) -> [u8; 32] {
        self.public
    }
    pub fn public_hex(&self) -> String {
        key_hex(&self.public)
    }

    /// Reads the key file at `path` (64 hex digits of the private key), or makes one there if
    /// there is none (mode 0600 on Unix; made under a temporary name and linked into place, so
    /// two servers starting at once agree on one key), and writes the public key to
    /// [`Identity::public_path`] for `export-info` to hand to clients.
    pub fn load_or_create(path: &Path) -> Result<Identity> {
        let io = |p: &Path, source| NetError::IdentityIo {
            path: p.display().to_string(),
            source,
        };
        let id = match std::fs::read(path) {
            Ok(bytes) => Self::parse_file(path, &bytes)?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                    std::fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
                }
                let id = Identity::generate()?;
                let tmp = unique_tmp(path);
                write_private(&tmp, &key_hex(&id.private)).map_err(|e| io(&tmp, e))?;
                let linked = std::fs::hard_link(&tmp, path);
                let _ = std::fs::remove_file(&tmp);
                match linked {
                    Ok(()) => id,
                    // Another process made it first: use theirs.
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                        let bytes = std::fs::read(path).map_err(|e| io(path, e))?;
                        Self::parse_file(path, &bytes)?
                    }
                    Err(e) => return Err(io(path, e)),
                }
            }
            Err(e) => return Err(io(path, e)),
        };
        let pubp = Self::public_path(path);
        let tmp = unique_tmp(&pubp);
        std::fs::write(&tmp, format!("{}\n", id.public_hex())).map_err(|e| io(&tmp, e))?;
        std::fs::rename(&tmp, &pubp).map_err(|e| io(&pubp, e))?;
        Ok(id)
    }

    /// Where [`Identity::load_or_create`] writes the public key: `server.pub` beside the key.
    pub fn public_path(key_path: &Path) -> PathBuf {
        key_path.with_file_name(PUBLIC_KEY_FILE)
    }

    fn parse_file(path: &Path, bytes: &[u8]) -> Result<Identity> {
        let bad = |problem| NetError::IdentityFormat {
            path: path.display().to_string(),
            problem,
        };
        let text = std::str::from_utf8(bytes).map_err(|_| bad("not text"))?;
        let private = parse_key_hex(text).ok_or(bad("not 64 hex digits"))?;
        Identity::from_private(private)
    }
}

/// The file name of a server's public key, beside its private key and in exported model info.
pub const PUBLIC_KEY_FILE: &str = "server.pub";
/// The default file name of a server's private key, beside the model.
pub const PRIVATE_KEY_FILE: &str = "server.key";

/// A temporary name beside `path` that no other writer in any process uses, so that two
/// threads publishing the same key never rename each other's file away.
fn unique_tmp(path: &Path) -> PathBuf {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    PathBuf::from(format!("{}.tmp{}-{n}", path.display(), std::process::id()))
}

fn write_private(path: &Path, text: &str) -> std::io::Result<()> {
    let mut o = std::fs::OpenOptions::new();
    o.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut o, 0o600);
    o.open(path)?.write_all(text.as_bytes())
}

/// Writes one record: `u16 length ‖ bytes`.
fn write_record(w: &mut impl Write, rec: &[u8]) -> std::io::Result<()> {
    debug_assert!(rec.len() <= MAX_RECORD);
    w.write_all(&(rec.len() as u16).to_le_bytes())?;
    w.write_all(rec)
}

/// Reads one record of at most `max` bytes into `buf`; returns its length. An I/O failure is
/// returned raw so the caller maps it with its deadlines.
pub(crate) fn read_record(
    r: &mut impl Read,
    buf: &mut [u8],
    max: usize,
) -> std::result::Result<std::result::Result<usize, NetError>, std::io::Error> {
    let mut len = [0u8; 2];
    r.read_exact(&mut len)?;
    let len = u16::from_le_bytes(len) as usize;
    if len > max.min(buf.len()) {
        return Ok(Err(NetError::FrameTooLarge {
            len,
            max: max.min(buf.len()),
        }));
    }
    r.read_exact(&mut buf[..len])?;
    Ok(Ok(len))
}

/// An I/O failure (returned raw, for the caller to map with its deadlines) or a typed outcome.
type Io<T> = std::result::Result<Result<T>, std::io::Error>;

/// Writes this side's handshake message (empty payload).
fn write_handshake(hs: &mut snow::HandshakeState, stream: &mut impl Write) -> Io<()> {
    let mut buf = [0u8; MAX_HANDSHAKE_RECORD];
    let n = match hs.write_message(&[], &mut buf) {
        Ok(n) => n,
        Err(e) => return Ok(Err(NetError::KeyExchange(e))),
    };
    write_record(stream, &buf[..n])?;
    stream.flush()?;
    Ok(Ok(()))
}

/// Reads and checks the peer's handshake message, at most [`MAX_HANDSHAKE_RECORD`] bytes.
fn read_handshake(hs: &mut snow::HandshakeState, stream: &mut impl Read) -> Io<()> {
    let mut rec = [0u8; MAX_HANDSHAKE_RECORD];
    let n = match read_record(stream, &mut rec, MAX_HANDSHAKE_RECORD)? {
        Ok(n) => n,
        Err(e) => return Ok(Err(e)),
    };
    let mut payload = [0u8; MAX_HANDSHAKE_RECORD];
    Ok(hs
        .read_message(&rec[..n], &mut payload)
        .map(|_| ())
        .map_err(NetError::KeyExchange))
}

/// Runs the two handshake messages (the initiator writes first) and enters
/// transport mode.
fn exchange(
    hs: std::result::Result<snow::HandshakeState, snow::Error>,
    stream: &mut (impl Read + Write),
    initiator: bool,
) -> Io<snow::TransportState> {
    let mut hs = match hs {
        Ok(h) => h,
        Err(e) => return Ok(Err(NetError::KeyExchange(e))),
    };
    for write in [initiator, !initiator] {
        let step = if write {
            write_handshake(&mut hs, stream)?
        } else {
            read_handshake(&mut hs, stream)?
        };
        if let Err(e) = step {
            return Ok(Err(e));
        }
    }
    Ok(hs.into_transport_mode().map_err(NetError::KeyExchange))
}

/// The client's half of the key exchange: `-> e, es` then `<- e, ee`. `prologue` is the
/// greeting the server sent.
pub(crate) fn initiate(
    stream: &mut (impl Read + Write),
    server_key: &[u8; 32],
    prologue: &[u8],
) -> Io<snow::TransportState> {
    let hs = builder()
        .remote_public_key(server_key)
        .and_then(|b| b.prologue(prologue))
        .and_then(|b| b.build_initiator());
    exchange(hs, stream, true)
}

/// The server's half of the key exchange.
pub(crate) fn respond(
    stream: &mut (impl Read + Write),
    id: &Identity,
    prologue: &[u8],
) -> Io<snow::TransportState> {
    let hs = builder()
        .local_private_key(&id.private)
        .and_then(|b| b.prologue(prologue))
        .and_then(|b| b.build_responder());
    exchange(hs, stream, false)
}

/// Record layer over an established Noise session.
pub(crate) struct Records {
    state: snow::TransportState,
    wire: Box<[u8]>,
    plain: Box<[u8]>,
}

impl Records {
    pub(crate) fn new(state: snow::TransportState) -> Records {
        Records {
            state,
            wire: vec![0u8; MAX_RECORD].into_boxed_slice(),
            plain: vec![0u8; MAX_RECORD].into_boxed_slice(),
        }
    }

    fn seal(&mut self, w: &mut impl Write, plain: &[u8]) -> Result<std::io::Result<()>> {
        let n = self
            .state
            .write_message(plain, &mut self.wire)
            .map_err(NetError::Tampered)?;
        Ok(write_record(w, &self.wire[..n]))
    }

    /// Encrypts one frame onto `w`: a header record, then chunk records.
    pub(crate) fn send_frame(
        &mut self,
        w: &mut impl Write,
        frame: &[u8],
    ) -> Result<std::io::Result<()>> {
        let hdr = (frame.len() as u32).to_le_bytes();
        if let Err(e) = self.seal(w, &hdr)? {
            return Ok(Err(e));
        }
        for c in frame.chunks(CHUNK) {
            if let Err(e) = self.seal(w, c)? {
                return Ok(Err(e));
            }
        }
        Ok(Ok(()))
    }

    /// Decrypts one record of exactly `want` plaintext bytes into `out`.
    fn open_into(
        &mut self,
        r: &mut impl Read,
        want: usize,
        out: &mut Vec<u8>,
    ) -> std::io::Result<Result<()>> {
        let n = match read_record(r, &mut self.wire, want + TAG)? {
            Ok(n) => n,
            Err(e) => return Ok(Err(e)),
        };
        let got = match self.state.read_message(&self.wire[..n], &mut self.plain) {
            Ok(g) => g,
            Err(e) => return Ok(Err(NetError::Tampered(e))),
        };
        if got != want {
            return Ok(Err(NetError::UnexpectedLength {
                expected: want,
                got,
            }));
        }
        out.extend_from_slice(&self.plain[..got]);
        Ok(Ok(()))
    }

    /// Reads one frame of at most `max` bytes; its length is checked before any buffer of
    /// that size exists.
    pub(crate) fn recv_frame(
        &mut self,
        r: &mut impl Read,
        max: usize,
    ) -> std::io::Result<Result<Vec<u8>>> {
        let mut hdr = Vec::with_capacity(4);
        if let Err(e) = self.open_into(r, 4, &mut hdr)? {
            return Ok(Err(e));
        }
        let len = u32::from_le_bytes([hdr[0], hdr[1], hdr[2], hdr[3]]) as usize;
        if len > max {
            return Ok(Err(NetError::FrameTooLarge { len, max }));
        }
        let mut out = Vec::with_capacity(len);
        while out.len() < len {
            let want = (len - out.len()).min(CHUNK);
            if let Err(e) = self.open_into(r, want, &mut out)? {
                return Ok(Err(e));
            }
        }
        Ok(Ok(out))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests: a panic is the failure report")]
    use super::*;

    /// One party on this crate's resolver, the other on snow's default: the handshake agrees
    /// and records sealed by either side open on the other (both directions, several sizes),
    /// so the faster cipher implementation changes no byte of the protocol.
    #[test]
    fn ring_records_are_the_default_resolvers() {
        let id = Identity::from_private([7u8; 32]).unwrap();
        let prologue = b"secinfer test";
        let default = || snow::Builder::with_resolver(params(), Box::new(DefaultResolver));
        for ring_is_client in [false, true] {
            let (ci, ri) = if ring_is_client {
                (builder(), default())
            } else {
                (default(), builder())
            };
            let mut c = ci
                .remote_public_key(&id.public())
                .unwrap()
                .prologue(prologue)
                .unwrap()
                .build_initiator()
                .unwrap();
            let mut s = ri
                .local_private_key(id.private_bytes())
                .unwrap()
                .prologue(prologue)
                .unwrap()
                .build_responder()
                .unwrap();
            let mut m = vec![0u8; MAX_RECORD];
            let mut p = vec![0u8; MAX_RECORD];
            let n = c.write_message(&[], &mut m).unwrap();
            s.read_message(&m[..n], &mut p).unwrap();
            let n = s.write_message(&[], &mut m).unwrap();
            c.read_message(&m[..n], &mut p).unwrap();
            let mut c = c.into_transport_mode().unwrap();
            let mut s = s.into_transport_mode().unwrap();
            for len in [0usize, 1, 63, 64, 1000, CHUNK] {
                let msg: Vec<u8> = (0..len).map(|i| (i * 31 + len) as u8).collect();
                let n = c.write_message(&msg, &mut m).unwrap();
                assert_eq!(n, len + TAG);
                let got = s.read_message(&m[..n], &mut p).unwrap();
                assert_eq!(&p[..got], &msg[..]);
                let n = s.write_message(&msg, &mut m).unwrap();
                let got = c.read_message(&m[..n], &mut p).unwrap();
                assert_eq!(&p[..got], &msg[..]);
            }
            // A flipped bit is refused by the other implementation too.
            let n = c.write_message(b"last", &mut m).unwrap();
            m[0] ^= 1;
            assert!(s.read_message(&m[..n], &mut p).is_err());
        }
    }
}
