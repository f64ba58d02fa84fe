//! A composed protocol as typed flights, with no channel between the parties.
//!
//! The protocol crates' functions (ss's math functions and products, the nn layers' sessions)
//! compose their blocks against [`Channel`]; the blocks' steps are pure (`ss::blocks::steps`,
//! the OT extensions' `cot_step`s), but the order in which a function calls them, and what it
//! keeps between them, is the function itself. Rewriting
//! each function as an explicit state machine would give OPAF's arithmetic a second copy; so a
//! [`Stepper`] runs the one definition unchanged on its own thread against a [`FlightChannel`]
//! and stops it wherever it waits for the peer: what it sent since the last stop is one
//! [`Flight`], and the next flight it absorbs is what its reads are served from. The trait the
//! functions are written against stays `Channel`; the bytes, frames and rounds are those of the
//! same function on a socket, because they are the same calls. Everything the function does
//! on the channel rides in the flights: base OTs, pool fills and the pools' derandomisation
//! messages as much as the blocks' openings. The price is a thread per stepper, parked while
//! its peer computes, and a copy of the peer flight being read (to check a resent one).
//!
//! Peer flights are hostile. Every read that knows its length (all of the SIRNN blocks' and the OT
//! pools' reads, through [`Channel::recv_pod`] and [`Channel::recv_bytes`]) is checked against the
//! frame before the function sees it, and a read with a limit ([`Channel::recv_frame_limited`])
//! against its limit; the other reads only against the frame limit (the OT extension's chunks,
//! `ss::matmul`'s frames: a wrong one there fails the function instead). A flight that ends in the
//! middle of what the function reads before it speaks again, a frame of the wrong size, or frames
//! left over when the function returns, is refused with [`NetError::Malformed`] and the stepper
//! waits where it was: absorbing the corrected flight (its frames already read must be the same)
//! carries on as if the bad one had never come. A flight "ends in the middle" when the function has
//! read some of the peer's flight and would wait again without having sent anything. No honest run
//! of what is tested here does that (setup, pool fills, the math functions, FastGRNN with either
//! products, hegc's and the GRU's whole sessions); a protocol in which a party reads two of its peer's flights in a row (the second one
//! answering a message of its own that crossed the first) would be refused by this rule. A stepper
//! dropped before it is done ends its thread (its reads then fail with [`NetError::Closed`]).
use crate::{Channel, Meter, NetError, Result, DEFAULT_MAX_FRAME};
use std::collections::VecDeque;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::thread::JoinHandle;

/// The frames one party sends between two waits for its peer, in order.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Flight {
    frames: Vec<Vec<u8>>,
}

impl Flight {
    pub fn new(frames: Vec<Vec<u8>>) -> Flight {
        Flight { frames }
    }
    pub fn frames(&self) -> &[Vec<u8>] {
        &self.frames
    }
    pub fn into_frames(self) -> Vec<Vec<u8>> {
        self.frames
    }
    /// Payload bytes (no framing).
    pub fn bytes(&self) -> usize {
        self.frames.iter().map(Vec::len).sum()
    }
    pub fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }
}

/// Shape only: a flight's frames are shares and OT messages.
impl std::fmt::Debug for Flight {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let lens: Vec<usize> = self.frames.iter().map(Vec::len).collect();
        f.debug_struct("Flight").field("frame_lens", &lens).finish()
    }
}

/// What a stepper does next: send a flight and wait for the peer's, or it is done (with the
/// flight it sent last, possibly empty).
pub enum Step<T> {
    Send(Flight),
    Done { output: T, last: Flight },
}

impl<T> Step<T> {
    /// The flight to hand to the peer; a finished step leaves its output in `out`.
    pub fn into_flight(self, out: &mut Option<T>) -> Flight {
        match self {
            Step::Send(f) => f,
            Step::Done { output, last } => {
                *out = Some(output);
                last
            }
        }
    }

    /// [`Step::into_flight`] on a step held in place, which is left an empty `Send`.
    pub fn take_flight(&mut self, out: &mut Option<T>) -> Flight {
        std::mem::replace(self, Step::Send(Flight::default())).into_flight(out)
    }
}

/// Shapes only: the output is this party's shares.
impl<T> std::fmt::Debug for Step<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Step::Send(fl) => f.debug_tuple("Send").field(fl).finish(),
            Step::Done { last, .. } => f.debug_struct("Done").field("last", last).finish(),
        }
    }
}

/// The stepper's thread to its driver.
enum Report {
    /// Waiting for the peer, having sent this.
    Flight(Vec<Vec<u8>>),
    /// The flight just absorbed was refused; waiting for it again.
    Refused(String),
    /// The function returned (its output is the thread's); it sent this last.
    Finished(Vec<Vec<u8>>),
}

/// The channel a stepped function runs on: sends are collected into the outgoing flight; a
/// read with nothing left to read stops the function until the peer's next flight.
pub struct FlightChannel {
    to_driver: Sender<Report>,
    from_driver: Receiver<Vec<Vec<u8>>>,
    inbox: VecDeque<Vec<u8>>,
    /// Frames of the flight being read that the function has already taken.
    taken: Vec<Vec<u8>>,
    outbox: Vec<Vec<u8>>,
    meter: Meter,
}

impl FlightChannel {
    /// Hands the outgoing flight over and waits for the peer's.
    fn stop(&mut self, report: Report) -> Result<()> {
        self.to_driver.send(report).map_err(|_| NetError::Closed)?;
        let frames = self.from_driver.recv().map_err(|_| NetError::Closed)?;
        self.taken.clear();
        self.inbox = frames.into();
        Ok(())
    }

    /// Refuses the flight being read and waits for it again: the frames already taken must
    /// come back unchanged (they were read), the rest replaces what is left.
    fn refuse(&mut self, mut why: String) -> Result<()> {
        loop {
            self.to_driver
                .send(Report::Refused(why))
                .map_err(|_| NetError::Closed)?;
            let frames = self.from_driver.recv().map_err(|_| NetError::Closed)?;
            let k = self.taken.len();
            if frames.len() >= k && frames[..k] == self.taken[..] {
                self.inbox = frames.into_iter().skip(k).collect();
                return Ok(());
            }
            why = format!("a resent flight must start with the {k} frames already read");
        }
    }

    /// The next frame: of exactly `want` bytes when the read knows its length, else at most
    /// `limit`.
    fn take(&mut self, want: Option<usize>, limit: usize) -> Result<Vec<u8>> {
        loop {
            let Some(front) = self.inbox.front() else {
                if !self.taken.is_empty() && self.outbox.is_empty() {
                    // It read part of the peer's flight and would wait again without having
                    // said anything: the flight stopped short.
                    self.refuse(format!(
                        "flight ended after {} frames, before the next read",
                        self.taken.len()
                    ))?;
                    continue;
                }
                let out = std::mem::take(&mut self.outbox);
                self.stop(Report::Flight(out))?;
                continue;
            };
            let why = match want {
                Some(w) if front.len() != w => {
                    Some(format!("frame of {} bytes, expected {w}", front.len()))
                }
                None if front.len() > limit => {
                    Some(format!("frame of {} bytes, at most {limit}", front.len()))
                }
                _ => None,
            };
            if let Some(why) = why {
                self.refuse(why)?;
                continue;
            }
            let f = self
                .inbox
                .pop_front()
                .expect("the front frame was just seen");
            self.taken.push(f.clone());
            self.meter.record_recv(f.len());
            return Ok(f);
        }
    }

    /// After the function returned: nothing of the peer's may be left unread.
    fn finish(&mut self) -> Result<()> {
        while !self.inbox.is_empty() {
            let extra = self.inbox.len();
            self.refuse(format!("{extra} frames past the end of the protocol"))?;
        }
        let out = std::mem::take(&mut self.outbox);
        self.to_driver
            .send(Report::Finished(out))
            .map_err(|_| NetError::Closed)
    }
}

impl Channel for FlightChannel {
    fn send_frame(&mut self, frame: &[u8]) -> Result<()> {
        self.send_frame_vec(frame.to_vec())
    }
    fn send_frame_vec(&mut self, frame: Vec<u8>) -> Result<()> {
        if frame.len() > DEFAULT_MAX_FRAME {
            return Err(NetError::FrameTooLarge {
                len: frame.len(),
                max: DEFAULT_MAX_FRAME,
            });
        }
        self.meter.record_send(frame.len());
        self.outbox.push(frame);
        Ok(())
    }
    fn recv_frame(&mut self) -> Result<Vec<u8>> {
        self.take(None, DEFAULT_MAX_FRAME)
    }
    fn recv_frame_limited(&mut self, max: usize) -> Result<Vec<u8>> {
        self.take(None, max.min(DEFAULT_MAX_FRAME))
    }
    /// As the provided method, but the length is checked before the frame is taken, so a
    /// frame of the wrong size is refused without the function seeing it (`recv_pod` reads
    /// through this).
    fn recv_bytes(&mut self, len: usize) -> Result<Vec<u8>>
    where
        Self: Sized,
    {
        if len > DEFAULT_MAX_FRAME {
            return Err(NetError::FrameTooLarge {
                len,
                max: DEFAULT_MAX_FRAME,
            });
        }
        self.take(Some(len), len)
    }
    fn flush(&mut self) -> Result<()> {
        Ok(())
    }
    fn meter(&self) -> &Meter {
        &self.meter
    }
    fn meter_mut(&mut self) -> &mut Meter {
        &mut self.meter
    }
    fn max_frame(&self) -> usize {
        DEFAULT_MAX_FRAME
    }
}

/// One party's side of a protocol, run flight by flight.
pub struct Stepper<T> {
    to_thread: Option<Sender<Vec<Vec<u8>>>>,
    reports: Receiver<Report>,
    thread: Option<JoinHandle<Result<T>>>,
}

impl<T: Send + 'static> Stepper<T> {
    /// Starts `f` (one party's whole protocol, written against [`Channel`]) and runs it to its
    /// first wait: the stepper and the first flight (empty when it reads first). `f`'s own
    /// failures are in its output `T` (any error type: the nn layers' too).
    pub fn start<F>(f: F) -> Result<(Stepper<T>, Step<T>)>
    where
        F: FnOnce(&mut FlightChannel) -> T + Send + 'static,
    {
        let (to_driver, reports) = channel();
        let (to_thread, from_driver) = channel();
        let thread = std::thread::Builder::new()
            .name("ss-flight".into())
            .spawn(move || {
                let mut ch = FlightChannel {
                    to_driver,
                    from_driver,
                    inbox: VecDeque::new(),
                    taken: Vec::new(),
                    outbox: Vec::new(),
                    meter: Meter::default(),
                };
                let out = f(&mut ch);
                ch.finish()?;
                Ok(out)
            })
            .map_err(NetError::Io)?;
        let mut s = Stepper {
            to_thread: Some(to_thread),
            reports,
            thread: Some(thread),
        };
        let first = s.next()?;
        Ok((s, first))
    }

    /// Serves the function's reads from the peer's `flight` and runs it to its next wait.
    /// A refused flight is [`NetError::Malformed`]; the stepper is then where it was before.
    pub fn absorb(&mut self, flight: Flight) -> Result<Step<T>> {
        let Some(tx) = &self.to_thread else {
            return Err(NetError::Closed);
        };
        if tx.send(flight.frames).is_err() {
            self.join()?;
            return Err(NetError::Closed);
        }
        self.next()
    }

    fn next(&mut self) -> Result<Step<T>> {
        match self.reports.recv() {
            Ok(Report::Flight(f)) => Ok(Step::Send(Flight::new(f))),
            Ok(Report::Refused(why)) => Err(NetError::Malformed(why)),
            Ok(Report::Finished(last)) => Ok(Step::Done {
                output: self.join()?,
                last: Flight::new(last),
            }),
            // The thread ended without finishing: its link failed.
            Err(_) => {
                self.join()?;
                Err(NetError::Closed)
            }
        }
    }

    fn join(&mut self) -> Result<T> {
        self.to_thread = None;
        let Some(h) = self.thread.take() else {
            return Err(NetError::Closed);
        };
        h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))
    }
}

impl<T> Drop for Stepper<T> {
    fn drop(&mut self) {
        // Closing the link fails the thread's next read; it then returns.
        self.to_thread = None;
        if let Some(h) = self.thread.take() {
            let _ = h.join();
        }
    }
}

/// Both parties' outputs and the shapes of the non-empty flights they sent (each flight's
/// frame lengths, in order).
pub struct Driven<A, B> {
    pub a: A,
    pub b: B,
    pub flights_a: Vec<Vec<usize>>,
    pub flights_b: Vec<Vec<usize>>,
}

/// Shapes only: the outputs are the parties' shares.
impl<A, B> std::fmt::Debug for Driven<A, B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Driven")
            .field("flights_a", &self.flights_a)
            .field("flights_b", &self.flights_b)
            .finish()
    }
}

enum Side<T> {
    Running(Stepper<T>),
    Done(T),
}

/// Runs two steppers against each other, each absorbing the other's flights, until both are
/// done. A party that waits while its peer has nothing to send is a deadlock (`Malformed`).
pub fn drive<A, B, FA, FB>(fa: FA, fb: FB) -> Result<Driven<A, B>>
where
    A: Send + 'static,
    B: Send + 'static,
    FA: FnOnce(&mut FlightChannel) -> A + Send + 'static,
    FB: FnOnce(&mut FlightChannel) -> B + Send + 'static,
{
    let (sa, step_a) = Stepper::start(fa)?;
    let (sb, step_b) = Stepper::start(fb)?;
    let (mut a, mut pa) = settle(sa, step_a);
    let (mut b, mut pb) = settle(sb, step_b);
    let (mut flights_a, mut flights_b) = (Vec::new(), Vec::new());
    loop {
        for (f, log) in [(&pa, &mut flights_a), (&pb, &mut flights_b)] {
            if !f.is_empty() {
                log.push(f.frames.iter().map(Vec::len).collect());
            }
        }
        let idle = pa.is_empty() && pb.is_empty();
        match (a, b) {
            (Side::Done(oa), Side::Done(ob)) if idle => {
                return Ok(Driven {
                    a: oa,
                    b: ob,
                    flights_a,
                    flights_b,
                })
            }
            // A party waits and its peer, running or done, has nothing to send.
            _ if idle => {
                return Err(NetError::Malformed(
                    "a party waits and its peer has nothing to send".into(),
                ))
            }
            (na, nb) => {
                let (to_a, to_b) = (std::mem::take(&mut pb), std::mem::take(&mut pa));
                (a, pa) = deliver(na, to_a)?;
                (b, pb) = deliver(nb, to_b)?;
            }
        }
    }
}

fn settle<T: Send + 'static>(s: Stepper<T>, step: Step<T>) -> (Side<T>, Flight) {
    match step {
        Step::Send(f) => (Side::Running(s), f),
        Step::Done { output, last } => (Side::Done(output), last),
    }
}

fn deliver<T: Send + 'static>(side: Side<T>, f: Flight) -> Result<(Side<T>, Flight)> {
    match side {
        Side::Running(mut s) => {
            let step = s.absorb(f)?;
            Ok(settle(s, step))
        }
        Side::Done(_) if !f.is_empty() => Err(NetError::Malformed(
            "a flight for a party that is done".into(),
        )),
        done => Ok((done, Flight::default())),
    }
}
