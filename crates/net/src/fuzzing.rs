//! The decoders of peer bytes in this crate, callable on a byte slice, for the fuzz targets
//! (`fuzz/`, `crates/fuzz`): the plaintext frame stream, the Noise record stream and the
//! greeting. They run the same code as [`crate::TcpChannel`]; only the socket is replaced.
use crate::error::{NetError, Result};
use crate::noise::{Identity, Records};
use crate::serve::{decode_greeting, GREETING_LEN};
use crate::tcp::read_plain_frame;
use std::io::Cursor;

fn frames_until_eof(
    mut next: impl FnMut() -> std::io::Result<Result<Vec<u8>>>,
) -> Result<Vec<Vec<u8>>> {
    let mut out = Vec::new();
    loop {
        match next() {
            Ok(Ok(f)) => out.push(f),
            Ok(Err(e)) => return Err(e),
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(out),
            Err(e) => return Err(e.into()),
        }
    }
}

/// Decodes a stream of plaintext frames of at most `max` bytes each, up to its end.
pub fn decode_plain_stream(bytes: &[u8], max: usize) -> Result<Vec<Vec<u8>>> {
    let mut r = Cursor::new(bytes);
    frames_until_eof(|| read_plain_frame(&mut r, max))
}

/// Decodes a greeting (header and reason text).
pub fn decode_greeting_bytes(bytes: &[u8]) -> Result<(bool, bool, String)> {
    let head: &[u8; GREETING_LEN] = bytes
        .get(..GREETING_LEN)
        .and_then(|h| h.try_into().ok())
        .ok_or(NetError::Closed)?;
    let g = decode_greeting(head)?;
    let reason = bytes
        .get(GREETING_LEN..GREETING_LEN + g.reason_len)
        .ok_or(NetError::Closed)?;
    Ok((
        g.busy,
        g.noise,
        crate::error::sanitize_peer_text(&String::from_utf8_lossy(reason), 200),
    ))
}

/// Both ends of one Noise session made in memory, for fuzzing the record layer: `seal` makes
/// a valid record stream (seeds), `open` decodes hostile bytes as the receiving end would. Each
/// session has fresh keys, so seeds from one session are hostile bytes to another (replays).
pub struct NoiseRecordPair {
    client: Records,
    server: Records,
}

impl NoiseRecordPair {
    pub fn new() -> Result<NoiseRecordPair> {
        Self::pair(&Identity::generate()?, b"fuzz")
    }

    fn pair(id: &Identity, prologue: &[u8]) -> Result<NoiseRecordPair> {
        let params: snow::params::NoiseParams = crate::noise::NOISE_PARAMS
            .parse()
            .map_err(NetError::KeyExchange)?;
        let mut i = snow::Builder::new(params.clone())
            .remote_public_key(&id.public())
            .and_then(|b| b.prologue(prologue))
            .and_then(|b| b.build_initiator())
            .map_err(NetError::KeyExchange)?;
        let mut r = snow::Builder::new(params)
            .local_private_key(id.private_bytes())
            .and_then(|b| b.prologue(prologue))
            .and_then(|b| b.build_responder())
            .map_err(NetError::KeyExchange)?;
        let (mut m1, mut m2, mut p) = ([0u8; 256], [0u8; 256], [0u8; 256]);
        let n1 = i
            .write_message(&[], &mut m1)
            .map_err(NetError::KeyExchange)?;
        r.read_message(&m1[..n1], &mut p)
            .map_err(NetError::KeyExchange)?;
        let n2 = r
            .write_message(&[], &mut m2)
            .map_err(NetError::KeyExchange)?;
        i.read_message(&m2[..n2], &mut p)
            .map_err(NetError::KeyExchange)?;
        Ok(NoiseRecordPair {
            client: Records::new(i.into_transport_mode().map_err(NetError::KeyExchange)?),
            server: Records::new(r.into_transport_mode().map_err(NetError::KeyExchange)?),
        })
    }

    /// The client's records of `frames`.
    pub fn seal(&mut self, frames: &[&[u8]]) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        for f in frames {
            self.client.send_frame(&mut out, f)??;
        }
        Ok(out)
    }

    /// The server's decoding of `bytes` as records of frames of at most `max` bytes.
    pub fn open(&mut self, bytes: &[u8], max: usize) -> Result<Vec<Vec<u8>>> {
        let mut r = Cursor::new(bytes);
        let server = &mut self.server;
        frames_until_eof(|| server.recv_frame(&mut r, max))
    }
}
