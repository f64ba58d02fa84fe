//! TCP transport: u32 little-endian length prefix (or Noise records, see [`crate::noise`]),
//! buffered, TCP_NODELAY, with idle, write and whole-session deadlines.
use crate::channel::{Channel, DEFAULT_MAX_FRAME};
use crate::error::{Deadline, NetError, Result};
use crate::meter::Meter;
use crate::noise::Records;
use std::io::{BufReader, BufWriter, ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// Buffer per direction. Small enough that an idle connection costs little; large reads bypass
/// it anyway.
const BUF_BYTES: usize = 256 << 10;

/// Options for a TCP channel.
#[derive(Clone, Debug)]
pub struct TcpOptions {
    /// Largest frame accepted from the peer.
    pub max_frame: usize,
    /// Idle deadline: how long one receive may wait for the next byte; `None` waits forever.
    pub read_timeout: Option<Duration>,
    /// How long one send may wait for the peer to take bytes; `None` waits forever.
    pub write_timeout: Option<Duration>,
    /// Whole-session deadline, counted from when the channel is made; `None`: none.
    pub session_timeout: Option<Duration>,
}

impl Default for TcpOptions {
    fn default() -> Self {
        TcpOptions {
            max_frame: DEFAULT_MAX_FRAME,
            read_timeout: Some(Duration::from_secs(300)),
            write_timeout: Some(Duration::from_secs(300)),
            session_timeout: None,
        }
    }
}

/// A socket half whose every read and write waits at most its own limit and never past the
/// deadline: a peer trickling one byte at a time cannot stretch a session beyond it.
struct Timed {
    s: TcpStream,
    limit: Option<Duration>,
    deadline: Option<Instant>,
    read: bool,
}

impl Timed {
    fn arm(&mut self) -> std::io::Result<()> {
        let Some(d) = self.deadline else {
            return Ok(());
        };
        let left = d.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(ErrorKind::TimedOut.into());
        }
        let t = Some(self.limit.map_or(left, |l| l.min(left)));
        if self.read {
            self.s.set_read_timeout(t)
        } else {
            self.s.set_write_timeout(t)
        }
    }
    fn set_deadline(&mut self, d: Option<Instant>) -> std::io::Result<()> {
        self.deadline = d;
        if d.is_none() {
            if self.read {
                self.s.set_read_timeout(self.limit)?;
            } else {
                self.s.set_write_timeout(self.limit)?;
            }
        }
        Ok(())
    }
}

impl Read for Timed {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.arm()?;
        self.s.read(buf)
    }
}

impl Write for Timed {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.arm()?;
        self.s.write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.s.flush()
    }
}

/// One end of a TCP connection carrying frames.
pub struct TcpChannel {
    reader: BufReader<Timed>,
    writer: BufWriter<Timed>,
    meter: Meter,
    max_frame: usize,
    pending: bool,
    records: Option<Records>,
    deadline: Option<Instant>,
    /// Set while the greeting and key exchange run under their own deadline.
    opening: Option<Deadline>,
}

impl TcpChannel {
    /// Wraps an established stream (plaintext frames; see [`crate::connect_session`] and
    /// [`crate::serve_sessions`] for the secured, admission-controlled path).
    pub fn new(stream: TcpStream, opts: &TcpOptions) -> Result<Self> {
        stream.set_nodelay(true)?;
        stream.set_read_timeout(opts.read_timeout)?;
        stream.set_write_timeout(opts.write_timeout)?;
        let deadline = opts.session_timeout.map(|t| Instant::now() + t);
        let reader = Timed {
            s: stream.try_clone()?,
            limit: opts.read_timeout,
            deadline,
            read: true,
        };
        let writer = Timed {
            s: stream,
            limit: opts.write_timeout,
            deadline,
            read: false,
        };
        Ok(TcpChannel {
            reader: BufReader::with_capacity(BUF_BYTES, reader),
            writer: BufWriter::with_capacity(BUF_BYTES, writer),
            meter: Meter::default(),
            max_frame: opts.max_frame,
            pending: false,
            records: None,
            deadline,
            opening: None,
        })
    }

    /// Connects to `addr`, retrying until `wait` has passed (the peer may still be starting).
    pub fn connect(addr: impl ToSocketAddrs, wait: Duration, opts: &TcpOptions) -> Result<Self> {
        TcpChannel::new(connect_stream(addr, wait)?, opts)
    }

    /// Accepts one connection on `listener`.
    pub fn accept(listener: &TcpListener, opts: &TcpOptions) -> Result<Self> {
        let (s, _) = listener.accept()?;
        TcpChannel::new(s, opts)
    }

    /// The peer's address.
    pub fn peer_addr(&self) -> Result<SocketAddr> {
        Ok(self.writer.get_ref().s.peer_addr()?)
    }

    /// Whether frames travel inside the Noise channel.
    pub fn is_encrypted(&self) -> bool {
        self.records.is_some()
    }

    /// Sets (or clears) the whole-session deadline.
    pub fn set_deadline(&mut self, deadline: Option<Instant>) -> Result<()> {
        self.deadline = deadline;
        self.reader.get_mut().set_deadline(deadline)?;
        self.writer.get_mut().set_deadline(deadline)?;
        Ok(())
    }

    /// Runs `f` under the opening deadline `until` (a timeout reports `kind`), then sets
    /// `after` as the session deadline.
    pub(crate) fn opening<T>(
        &mut self,
        kind: Deadline,
        until: Instant,
        after: Option<Instant>,
        f: impl FnOnce(&mut Self) -> Result<T>,
    ) -> Result<T> {
        self.opening = Some(kind);
        self.set_deadline(Some(until))?;
        let r = f(self);
        self.opening = None;
        self.set_deadline(after)?;
        r
    }

    pub(crate) fn raw_write(&mut self, bytes: &[u8]) -> Result<()> {
        self.writer
            .write_all(bytes)
            .map_err(|e| self.write_err(e))?;
        self.writer.flush().map_err(|e| self.write_err(e))
    }

    pub(crate) fn raw_read(&mut self, buf: &mut [u8]) -> Result<()> {
        self.reader.read_exact(buf).map_err(|e| self.read_err(e))
    }

    /// The client's key exchange (after the greeting).
    pub(crate) fn secure_as_client(&mut self, key: &[u8; 32], prologue: &[u8]) -> Result<()> {
        let mut rw = Halves(&mut self.reader, &mut self.writer);
        let st = crate::noise::initiate(&mut rw, key, prologue);
        let st = st.map_err(|e| self.read_err(e))??;
        self.records = Some(Records::new(st));
        Ok(())
    }

    /// The server's key exchange (after the greeting).
    pub(crate) fn secure_as_server(
        &mut self,
        id: &crate::noise::Identity,
        prologue: &[u8],
    ) -> Result<()> {
        let mut rw = Halves(&mut self.reader, &mut self.writer);
        let st = crate::noise::respond(&mut rw, id, prologue);
        let st = st.map_err(|e| self.read_err(e))??;
        self.records = Some(Records::new(st));
        Ok(())
    }

    fn timeout(&self, write: bool) -> NetError {
        if let Some(kind) = self.opening {
            NetError::Timeout(kind)
        } else if self.deadline.is_some_and(|d| Instant::now() >= d) {
            NetError::Timeout(Deadline::Session)
        } else if write {
            NetError::Timeout(Deadline::Write)
        } else {
            NetError::Timeout(Deadline::Idle)
        }
    }

    fn read_err(&self, e: std::io::Error) -> NetError {
        match e.kind() {
            ErrorKind::UnexpectedEof
            | ErrorKind::ConnectionReset
            | ErrorKind::ConnectionAborted => NetError::Closed,
            ErrorKind::WouldBlock | ErrorKind::TimedOut => self.timeout(false),
            _ => NetError::Io(e),
        }
    }

    fn write_err(&self, e: std::io::Error) -> NetError {
        match e.kind() {
            ErrorKind::BrokenPipe | ErrorKind::ConnectionReset | ErrorKind::ConnectionAborted => {
                NetError::Closed
            }
            ErrorKind::WouldBlock | ErrorKind::TimedOut => self.timeout(true),
            _ => NetError::Io(e),
        }
    }

    fn recv_upto(&mut self, max: usize) -> Result<Vec<u8>> {
        self.flush()?;
        let buf = if let Some(rec) = self.records.as_mut() {
            let r = rec.recv_frame(&mut self.reader, max);
            r.map_err(|e| self.read_err(e))??
        } else {
            let r = read_plain_frame(&mut self.reader, max);
            r.map_err(|e| self.read_err(e))??
        };
        self.meter.record_recv(buf.len());
        Ok(buf)
    }
}

/// Reads one plaintext frame (`u32` length, then the bytes) of at most `max` bytes; the length
/// is checked before the buffer is made. I/O failures come back raw for the caller to map.
pub(crate) fn read_plain_frame(r: &mut impl Read, max: usize) -> std::io::Result<Result<Vec<u8>>> {
    let mut len = [0u8; 4];
    r.read_exact(&mut len)?;
    let len = u32::from_le_bytes(len) as usize;
    if len > max {
        return Ok(Err(NetError::FrameTooLarge { len, max }));
    }
    let mut buf = vec![0u8; len];
    r.read_exact(&mut buf)?;
    Ok(Ok(buf))
}

/// Both buffered halves as one stream (for the key exchange).
struct Halves<'a>(&'a mut BufReader<Timed>, &'a mut BufWriter<Timed>);
impl Read for Halves<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.0.read(buf)
    }
}
impl Write for Halves<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.1.write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.1.flush()
    }
}

/// Connects to `addr`, retrying until `wait` has passed.
pub(crate) fn connect_stream(addr: impl ToSocketAddrs, wait: Duration) -> Result<TcpStream> {
    let addrs: Vec<SocketAddr> = addr.to_socket_addrs()?.collect();
    let deadline = Instant::now() + wait;
    loop {
        let mut last_err = None;
        for a in &addrs {
            match TcpStream::connect_timeout(a, Duration::from_secs(5)) {
                Ok(s) => return Ok(s),
                Err(e) => last_err = Some(e),
            }
        }
        if Instant::now() >= deadline {
            return Err(last_err
                .map(NetError::Io)
                .unwrap_or(NetError::Timeout(Deadline::Queue)));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

impl Channel for TcpChannel {
    fn send_frame(&mut self, frame: &[u8]) -> Result<()> {
        if frame.len() > self.max_frame || frame.len() > u32::MAX as usize {
            return Err(NetError::FrameTooLarge {
                len: frame.len(),
                max: self.max_frame,
            });
        }
        let r = if let Some(rec) = self.records.as_mut() {
            rec.send_frame(&mut self.writer, frame)?
        } else {
            let len = (frame.len() as u32).to_le_bytes();
            self.writer
                .write_all(&len)
                .and_then(|()| self.writer.write_all(frame))
        };
        r.map_err(|e| self.write_err(e))?;
        self.pending = true;
        self.meter.record_send(frame.len());
        Ok(())
    }

    fn recv_frame(&mut self) -> Result<Vec<u8>> {
        self.recv_upto(self.max_frame)
    }

    fn recv_frame_limited(&mut self, max: usize) -> Result<Vec<u8>> {
        self.recv_upto(max.min(self.max_frame))
    }

    fn flush(&mut self) -> Result<()> {
        if self.pending {
            self.writer.flush().map_err(|e| self.write_err(e))?;
            self.pending = false;
        }
        Ok(())
    }
    fn meter(&self) -> &Meter {
        &self.meter
    }
    fn meter_mut(&mut self) -> &mut Meter {
        &mut self.meter
    }
    fn max_frame(&self) -> usize {
        self.max_frame
    }
}

/// A connected pair over real loopback TCP inside one process (both ends returned).
pub fn tcp_loopback_pair(opts: &TcpOptions) -> Result<(TcpChannel, TcpChannel)> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    let client = TcpStream::connect(addr)?;
    let (server, _) = listener.accept()?;
    Ok((
        TcpChannel::new(client, opts)?,
        TcpChannel::new(server, opts)?,
    ))
}
