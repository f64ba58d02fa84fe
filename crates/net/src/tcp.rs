//! TCP transport: u32 little-endian length prefix, buffered, TCP_NODELAY, read timeouts.
use crate::channel::{Channel, DEFAULT_MAX_FRAME};
use crate::error::{NetError, Result};
use crate::meter::Meter;
use std::io::{BufReader, BufWriter, ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

const BUF_BYTES: usize = 1 << 20;

/// Options for a TCP channel.
#[derive(Clone, Debug)]
pub struct TcpOptions {
    /// Largest frame accepted from the peer.
    pub max_frame: usize,
    /// How long a receive may wait for the peer; `None` waits forever.
    pub read_timeout: Option<Duration>,
}

impl Default for TcpOptions {
    fn default() -> Self {
        TcpOptions {
            max_frame: DEFAULT_MAX_FRAME,
            read_timeout: Some(Duration::from_secs(300)),
        }
    }
}

/// One end of a TCP connection carrying frames.
pub struct TcpChannel {
    reader: BufReader<TcpStream>,
    writer: BufWriter<TcpStream>,
    meter: Meter,
    max_frame: usize,
    pending: bool,
}

impl TcpChannel {
    /// Wraps an established stream.
    pub fn new(stream: TcpStream, opts: &TcpOptions) -> Result<Self> {
        stream.set_nodelay(true)?;
        stream.set_read_timeout(opts.read_timeout)?;
        let reader = BufReader::with_capacity(BUF_BYTES, stream.try_clone()?);
        let writer = BufWriter::with_capacity(BUF_BYTES, stream);
        Ok(TcpChannel {
            reader,
            writer,
            meter: Meter::default(),
            max_frame: opts.max_frame,
            pending: false,
        })
    }

    /// Connects to `addr`, retrying until `wait` has passed (the peer may still be starting).
    pub fn connect(addr: impl ToSocketAddrs, wait: Duration, opts: &TcpOptions) -> Result<Self> {
        let addrs: Vec<SocketAddr> = addr.to_socket_addrs()?.collect();
        let deadline = Instant::now() + wait;
        loop {
            let mut last_err = None;
            for a in &addrs {
                match TcpStream::connect_timeout(a, Duration::from_secs(5)) {
                    Ok(s) => return TcpChannel::new(s, opts),
                    Err(e) => last_err = Some(e),
                }
            }
            if Instant::now() >= deadline {
                return Err(last_err.map(NetError::Io).unwrap_or(NetError::Timeout));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Accepts one connection on `listener`.
    pub fn accept(listener: &TcpListener, opts: &TcpOptions) -> Result<Self> {
        let (s, _) = listener.accept()?;
        TcpChannel::new(s, opts)
    }

    /// The peer's address.
    pub fn peer_addr(&self) -> Result<SocketAddr> {
        Ok(self.writer.get_ref().peer_addr()?)
    }
}

fn map_read_err(e: std::io::Error) -> NetError {
    match e.kind() {
        ErrorKind::UnexpectedEof | ErrorKind::ConnectionReset | ErrorKind::ConnectionAborted => {
            NetError::Closed
        }
        ErrorKind::WouldBlock | ErrorKind::TimedOut => NetError::Timeout,
        _ => NetError::Io(e),
    }
}

fn map_write_err(e: std::io::Error) -> NetError {
    match e.kind() {
        ErrorKind::BrokenPipe | ErrorKind::ConnectionReset | ErrorKind::ConnectionAborted => {
            NetError::Closed
        }
        _ => NetError::Io(e),
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
        self.writer
            .write_all(&(frame.len() as u32).to_le_bytes())
            .map_err(map_write_err)?;
        self.writer.write_all(frame).map_err(map_write_err)?;
        self.pending = true;
        self.meter.record_send(frame.len());
        Ok(())
    }

    fn recv_frame(&mut self) -> Result<Vec<u8>> {
        self.flush()?;
        let mut len = [0u8; 4];
        self.reader.read_exact(&mut len).map_err(map_read_err)?;
        let len = u32::from_le_bytes(len) as usize;
        if len > self.max_frame {
            return Err(NetError::FrameTooLarge {
                len,
                max: self.max_frame,
            });
        }
        let mut buf = vec![0u8; len];
        self.reader.read_exact(&mut buf).map_err(map_read_err)?;
        self.meter.record_recv(len);
        Ok(buf)
    }

    fn flush(&mut self) -> Result<()> {
        if self.pending {
            self.writer.flush().map_err(map_write_err)?;
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
