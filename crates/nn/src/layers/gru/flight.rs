//! The online flights of a GRU session as typed messages, and the in-memory [`Wire`] on which
//! the session's steps run them.
//!
//! A flight is one party's messages between two changes of direction: a kind ([`ClientFlight`],
//! [`ServerFlight`]) and its frames. The receiving step states, before it reads anything, the
//! exact shape of the flight it accepts ([`Expect`]: frame by frame, the byte length, the bit
//! count whose padding must be zero, or a run of garbled-table frames of a known total). A
//! flight of another kind or shape is refused as [`NnError::Malformed`] before any state
//! changes, and a receiver never holds more than the expected bytes.
//!
//! The OT-pool and garbling calls of `secinfer_ot` and `secinfer_gc` speak frames through the
//! [`Channel`] trait; a step runs them on a [`Wire`] that holds the incoming flight's frames and
//! collects the outgoing ones, so no step does IO: the driver (or a test) moves the flights.
use crate::error::{NnError, Result};
use secinfer_gc::protocol::{batch_lanes, batch_table_bytes, wire_outputs, Reveal};
use secinfer_gc::{garble::Scheme, garble::FRAME_BYTES, Circuit};
use secinfer_net::{Channel, Meter, NetError, Phase};
use secinfer_ot::{packed_len, CHUNK_ROWS, DERAND_FRAME_OTS};
use std::collections::VecDeque;

/// What the client sends online, flight by flight (docs/gru-protocol.md, "Online flights").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientFlight {
    /// x_t − ρ_x(t) for every step.
    Inputs,
    /// The tables of the input projections' carry leaves.
    LeafTables,
    /// The tables that turn those leaves into additive carry shares.
    CarryTables,
    /// One step's hidden-projection leaf tables.
    StepLeafTables,
    /// The derandomisation of one step's gate-table OTs (cryptogru::gate_luts).
    GateDerand,
    /// Flight 2: P's derandomisation bits, the client-sender OTs of r·b and z·h_C, P_C − π_P.
    Products,
    /// Flight 4: y ⊕ μ, Q's derandomisation bits, Q_C − π_Q.
    Corrections,
    /// Flight 6: the B2A's derandomisation bits and h'_c + ρ_h(t+1).
    Hidden,
}

/// What the server sends online, flight by flight.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ServerFlight {
    /// The derandomisation of the input projections' leaf OTs.
    LeafDerand,
    /// The derandomisation of the carry OTs.
    CarryDerand,
    /// One step's hidden-projection leaf derandomisation.
    StepLeafDerand,
    /// Flight 1: circuit A's tables, the server's choices for both products' client → server
    /// OTs, the sender-first words of P.
    Gates,
    /// One step's gate tables.
    GateTables,
    /// Flight 3: circuit B's tables and the sender-first words of Q.
    Candidate,
    /// Flight 5: circuit C's tables and the sender-first B2A words of h'.
    State,
    /// The final circuit's tables and decoding bits.
    Final,
}

/// One flight: its kind and its frames, in wire order. Its frames are protocol messages, not
/// secrets, but `Debug` shows their sizes only.
#[derive(Clone, PartialEq, Eq)]
pub struct Msg<K> {
    pub kind: K,
    pub frames: Vec<Vec<u8>>,
}

impl<K: std::fmt::Debug> std::fmt::Debug for Msg<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let sizes: Vec<usize> = self.frames.iter().map(Vec::len).collect();
        write!(f, "{:?}{sizes:?}", self.kind)
    }
}

pub type ClientMsg = Msg<ClientFlight>;
pub type ServerMsg = Msg<ServerFlight>;

/// One frame (or run of frames) of an expected flight.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Segment {
    /// One frame of exactly this many bytes.
    Bytes(usize),
    /// One frame of this many bits, packed little-endian, with zero padding.
    Bits(usize),
    /// Garbled tables: frames of whole gates (`gate` bytes), each non-empty and at most
    /// [`FRAME_BYTES`], `total` bytes in all.
    Tables { total: usize, gate: usize },
}

/// The kind and shape of the flight a step accepts next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expect<K> {
    pub kind: K,
    segments: Vec<Segment>,
}

fn malformed(kind: impl std::fmt::Debug, what: String) -> NnError {
    NnError::Malformed(format!("gru flight {kind:?}: {what}"))
}

impl<K: Copy + PartialEq + std::fmt::Debug> Expect<K> {
    pub(super) fn new(kind: K) -> Self {
        Expect {
            kind,
            segments: Vec::new(),
        }
    }

    pub(super) fn with(mut self, segs: impl IntoIterator<Item = Segment>) -> Self {
        self.segments.extend(segs);
        self
    }

    /// Bytes of the whole flight.
    pub fn bytes(&self) -> usize {
        self.segments
            .iter()
            .map(|s| match *s {
                Segment::Bytes(n) => n,
                Segment::Bits(n) => n.div_ceil(8),
                Segment::Tables { total, .. } => total,
            })
            .sum()
    }

    /// Whether `msg` has this kind and shape; nothing is changed either way.
    pub fn check(&self, msg: &Msg<K>) -> Result<()> {
        if msg.kind != self.kind {
            return Err(malformed(
                msg.kind,
                format!("this step expects {:?}", self.kind),
            ));
        }
        let mut frames = msg.frames.iter();
        for seg in &self.segments {
            match *seg {
                Segment::Bytes(_) | Segment::Bits(_) => {
                    let f = frames
                        .next()
                        .ok_or_else(|| malformed(self.kind, "too few frames".into()))?;
                    check_frame(self.kind, *seg, f)?;
                }
                Segment::Tables { total, gate } => {
                    let mut got = 0;
                    while got < total {
                        let f = frames
                            .next()
                            .ok_or_else(|| malformed(self.kind, "tables cut short".into()))?;
                        check_table_frame(self.kind, f.len(), got, total, gate)?;
                        got += f.len();
                    }
                }
            }
        }
        if frames.next().is_some() {
            return Err(malformed(self.kind, "frames past its end".into()));
        }
        Ok(())
    }

    /// Receives this flight from `ch`, frame by frame, each frame limited to what may come next.
    pub fn recv<C: Channel>(&self, ch: &mut C) -> Result<Msg<K>> {
        let mut frames = Vec::new();
        for seg in &self.segments {
            match *seg {
                Segment::Bytes(n) | Segment::Bits(n) => {
                    let len = if let Segment::Bits(_) = seg {
                        n.div_ceil(8)
                    } else {
                        n
                    };
                    let f = ch.recv_frame_limited(len)?;
                    check_frame(self.kind, *seg, &f)?;
                    frames.push(f);
                }
                Segment::Tables { total, gate } => {
                    let mut got = 0;
                    while got < total {
                        let f = ch.recv_frame_limited((total - got).min(FRAME_BYTES))?;
                        check_table_frame(self.kind, f.len(), got, total, gate)?;
                        got += f.len();
                        frames.push(f);
                    }
                }
            }
        }
        Ok(Msg {
            kind: self.kind,
            frames,
        })
    }
}

fn check_frame(kind: impl std::fmt::Debug + Copy, seg: Segment, f: &[u8]) -> Result<()> {
    match seg {
        Segment::Bytes(n) if f.len() != n => Err(malformed(
            kind,
            format!("a frame of {} bytes where {n} belong", f.len()),
        )),
        Segment::Bits(n) if f.len() != n.div_ceil(8) => Err(malformed(
            kind,
            format!("a frame of {} bytes for {n} bits", f.len()),
        )),
        Segment::Bits(n) if n % 8 != 0 && f.last().is_some_and(|b| b >> (n % 8) != 0) => {
            Err(malformed(kind, format!("bits set past the last of {n}")))
        }
        _ => Ok(()),
    }
}

fn check_table_frame(
    kind: impl std::fmt::Debug + Copy,
    len: usize,
    got: usize,
    total: usize,
    gate: usize,
) -> Result<()> {
    if len == 0 || len > FRAME_BYTES || !len.is_multiple_of(gate.max(1)) || got + len > total {
        return Err(malformed(
            kind,
            format!("a table frame of {len} bytes after {got} of {total}"),
        ));
    }
    Ok(())
}

/// Sends every frame of `msg` and flushes: one flight.
pub(super) fn send<C: Channel, K>(ch: &mut C, msg: Msg<K>) -> Result<()> {
    for f in msg.frames {
        ch.send_frame_vec(f)?;
    }
    Ok(ch.flush()?)
}

/// The derandomisation bits of `n` pooled OTs (`secinfer_ot`'s frames of
/// [`DERAND_FRAME_OTS`]).
pub(super) fn derand(n: usize) -> impl Iterator<Item = Segment> {
    (0..n)
        .step_by(DERAND_FRAME_OTS)
        .map(move |s| Segment::Bits((n - s).min(DERAND_FRAME_OTS)))
}

/// `n` OT words of `bits` bits (`secinfer_ot`'s frames of [`CHUNK_ROWS`] words).
pub(super) fn words(n: usize, bits: usize) -> impl Iterator<Item = Segment> {
    (0..n)
        .step_by(CHUNK_ROWS)
        .map(move |s| Segment::Bytes(packed_len((n - s).min(CHUNK_ROWS), bits as u32)))
}

/// A garbled batch of `n` copies of `circ` garbled with its garbler's inputs known: the nonce,
/// the tables, and the decoding bits when the evaluator learns the outputs.
pub(super) fn batch(
    scheme: Scheme,
    circ: &Circuit,
    n: usize,
    reveal: Reveal,
) -> Result<Vec<Segment>> {
    let total = batch_table_bytes(scheme, circ, n)
        .and_then(|b| usize::try_from(b).ok())
        .ok_or_else(|| NnError::Protocol("garbled tables overflow".into()))?;
    let mut segs = vec![
        Segment::Bytes(8),
        Segment::Tables {
            total,
            gate: scheme.table_bytes(batch_lanes(n)),
        },
    ];
    if reveal == Reveal::Evaluator {
        segs.push(Segment::Bits(n * wire_outputs(circ)));
    }
    Ok(segs)
}

/// An in-memory [`Channel`] holding one incoming flight's frames and collecting the outgoing
/// ones: what a step's OT and garbling calls read and write. It meters like a channel, so the
/// session's byte headings (GC, HE, multiplexers) are counted as its flights pass.
pub(super) struct Wire {
    inbox: VecDeque<Vec<u8>>,
    outbox: Vec<Vec<u8>>,
    meter: Meter,
    max_frame: usize,
}

impl Wire {
    pub(super) fn new(max_frame: usize) -> Wire {
        let mut meter = Meter::default();
        meter.set_phase(Phase::Online);
        Wire {
            inbox: VecDeque::new(),
            outbox: Vec::new(),
            meter,
            max_frame,
        }
    }

    /// Takes a checked flight's frames as the next input.
    pub(super) fn load<K>(&mut self, msg: Msg<K>) {
        self.inbox.extend(msg.frames);
    }

    /// The frames sent since the last flight, as a flight of `kind`. Frames left unread mean
    /// the step and its [`Expect`] disagree: a local error.
    pub(super) fn take<K: std::fmt::Debug>(&mut self, kind: K) -> Result<Msg<K>> {
        if !self.inbox.is_empty() {
            return Err(NnError::Protocol(format!(
                "gru: {} frames left unread before {kind:?}",
                self.inbox.len()
            )));
        }
        Ok(Msg {
            kind,
            frames: std::mem::take(&mut self.outbox),
        })
    }
}

impl Channel for Wire {
    fn send_frame(&mut self, frame: &[u8]) -> secinfer_net::Result<()> {
        self.send_frame_vec(frame.to_vec())
    }

    fn send_frame_vec(&mut self, frame: Vec<u8>) -> secinfer_net::Result<()> {
        if frame.len() > self.max_frame {
            return Err(NetError::FrameTooLarge {
                len: frame.len(),
                max: self.max_frame,
            });
        }
        self.meter.record_send(frame.len());
        self.outbox.push(frame);
        Ok(())
    }

    fn recv_frame(&mut self) -> secinfer_net::Result<Vec<u8>> {
        let f = self
            .inbox
            .pop_front()
            .ok_or_else(|| NetError::Malformed("the flight ended early".into()))?;
        self.meter.record_recv(f.len());
        Ok(f)
    }

    fn flush(&mut self) -> secinfer_net::Result<()> {
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
