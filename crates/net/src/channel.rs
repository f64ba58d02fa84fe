//! The [`Channel`] trait: metered, length-checked frames between the two parties.
use crate::error::{NetError, Result};
use crate::meter::{Cost, Meter, Phase};
use bytemuck::Pod;

/// Default largest frame a receiver accepts (64 MiB). Protocols stream bigger payloads in chunks.
pub const DEFAULT_MAX_FRAME: usize = 64 << 20;

/// A bidirectional, ordered, reliable frame channel to the other party.
///
/// Implementors provide raw frames and a [`Meter`]; everything typed is a provided method. Frames
/// are the unit of metering: one frame is one message. Wire integers are little-endian (the crate
/// refuses to build on big-endian targets), and every typed receive states how many items it
/// expects, so a hostile peer cannot make the receiver allocate more than the caller asked for.
pub trait Channel: Send {
    /// Queues one frame. It may sit in a buffer until [`Channel::flush`] or the next receive.
    fn send_frame(&mut self, frame: &[u8]) -> Result<()>;
    /// Receives one frame (flushing pending sends first), at most [`Channel::max_frame`] bytes.
    fn recv_frame(&mut self) -> Result<Vec<u8>>;
    /// Receives one frame of at most `max` bytes (and at most [`Channel::max_frame`]). A longer
    /// announced length is refused with [`NetError::FrameTooLarge`] before a buffer of that size
    /// exists on transports that read peer bytes (TCP); in-process channels check after the fact.
    /// Openings (handshakes) use it with their own small limit.
    fn recv_frame_limited(&mut self, max: usize) -> Result<Vec<u8>> {
        let f = self.recv_frame()?;
        if f.len() > max {
            return Err(NetError::FrameTooLarge { len: f.len(), max });
        }
        Ok(f)
    }
    /// Pushes queued frames to the peer.
    fn flush(&mut self) -> Result<()>;
    fn meter(&self) -> &Meter;
    fn meter_mut(&mut self) -> &mut Meter;
    /// The largest frame this end accepts.
    fn max_frame(&self) -> usize;

    // ---- provided ----

    /// Switches the phase that subsequent traffic and time are charged to.
    fn set_phase(&mut self, p: Phase) {
        self.meter_mut().set_phase(p);
    }
    /// This party's cost so far.
    fn cost(&self) -> Cost {
        self.meter().snapshot()
    }

    /// Queues one frame the caller no longer needs: an in-memory channel moves it to the peer
    /// instead of copying it (same bytes, same metering as [`Channel::send_frame`]).
    fn send_frame_vec(&mut self, frame: Vec<u8>) -> Result<()> {
        self.send_frame(&frame)
    }

    /// Sends a slice of plain-old-data values (u8, u32, u64, u128, blocks) as one frame.
    fn send_pod<T: Pod>(&mut self, items: &[T]) -> Result<()>
    where
        Self: Sized,
    {
        self.send_frame(bytemuck::cast_slice(items))
    }

    /// Receives exactly `count` values of type `T` in one frame; any other length is an error.
    fn recv_pod<T: Pod>(&mut self, count: usize) -> Result<Vec<T>>
    where
        Self: Sized,
    {
        let expected =
            count
                .checked_mul(std::mem::size_of::<T>())
                .ok_or(NetError::FrameTooLarge {
                    len: usize::MAX,
                    max: self.max_frame(),
                })?;
        // The length is checked by `recv_bytes`, so a channel that checks it before taking the
        // frame (the flight channel) does so for every fixed-length read.
        let bytes = self.recv_bytes(expected)?;
        let mut out = vec![T::zeroed(); count];
        bytemuck::cast_slice_mut::<T, u8>(&mut out).copy_from_slice(&bytes);
        Ok(out)
    }

    /// Receives a frame of `T` values of any count up to `max_count`.
    fn recv_pod_upto<T: Pod>(&mut self, max_count: usize) -> Result<Vec<T>>
    where
        Self: Sized,
    {
        let bytes = self.recv_frame()?;
        let size = std::mem::size_of::<T>();
        if bytes.len() % size != 0 || bytes.len() / size > max_count {
            return Err(NetError::malformed(format!(
                "frame of {} bytes is not at most {max_count} items of {size} bytes",
                bytes.len()
            )));
        }
        let mut out = vec![T::zeroed(); bytes.len() / size];
        bytemuck::cast_slice_mut::<T, u8>(&mut out).copy_from_slice(&bytes);
        Ok(out)
    }

    fn send_u64s(&mut self, v: &[u64]) -> Result<()>
    where
        Self: Sized,
    {
        self.send_pod(v)
    }
    fn recv_u64s(&mut self, count: usize) -> Result<Vec<u64>>
    where
        Self: Sized,
    {
        self.recv_pod(count)
    }
    fn send_u128s(&mut self, v: &[u128]) -> Result<()>
    where
        Self: Sized,
    {
        self.send_pod(v)
    }
    fn recv_u128s(&mut self, count: usize) -> Result<Vec<u128>>
    where
        Self: Sized,
    {
        self.recv_pod(count)
    }
    fn send_u64(&mut self, v: u64) -> Result<()>
    where
        Self: Sized,
    {
        self.send_pod(&[v])
    }
    fn recv_u64(&mut self) -> Result<u64>
    where
        Self: Sized,
    {
        Ok(self.recv_pod::<u64>(1)?[0])
    }
    /// Receives a frame of exactly `len` bytes.
    fn recv_bytes(&mut self, len: usize) -> Result<Vec<u8>>
    where
        Self: Sized,
    {
        if len > self.max_frame() {
            return Err(NetError::FrameTooLarge {
                len,
                max: self.max_frame(),
            });
        }
        // The frame is the result: no copy (recv_pod copies into a buffer of T).
        let bytes = self.recv_frame()?;
        if bytes.len() != len {
            return Err(NetError::UnexpectedLength {
                expected: len,
                got: bytes.len(),
            });
        }
        Ok(bytes)
    }
}

#[cfg(target_endian = "big")]
compile_error!("secinfer's wire format is little-endian; big-endian targets are not supported");

impl<C: Channel + ?Sized> Channel for Box<C> {
    fn send_frame(&mut self, frame: &[u8]) -> Result<()> {
        (**self).send_frame(frame)
    }
    fn send_frame_vec(&mut self, frame: Vec<u8>) -> Result<()> {
        (**self).send_frame_vec(frame)
    }
    fn recv_frame(&mut self) -> Result<Vec<u8>> {
        (**self).recv_frame()
    }
    fn recv_frame_limited(&mut self, max: usize) -> Result<Vec<u8>> {
        (**self).recv_frame_limited(max)
    }
    fn flush(&mut self) -> Result<()> {
        (**self).flush()
    }
    fn meter(&self) -> &Meter {
        (**self).meter()
    }
    fn meter_mut(&mut self) -> &mut Meter {
        (**self).meter_mut()
    }
    fn max_frame(&self) -> usize {
        (**self).max_frame()
    }
}

impl<C: Channel + ?Sized> Channel for &mut C {
    fn send_frame(&mut self, frame: &[u8]) -> Result<()> {
        (**self).send_frame(frame)
    }
    fn send_frame_vec(&mut self, frame: Vec<u8>) -> Result<()> {
        (**self).send_frame_vec(frame)
    }
    fn recv_frame(&mut self) -> Result<Vec<u8>> {
        (**self).recv_frame()
    }
    fn recv_frame_limited(&mut self, max: usize) -> Result<Vec<u8>> {
        (**self).recv_frame_limited(max)
    }
    fn flush(&mut self) -> Result<()> {
        (**self).flush()
    }
    fn meter(&self) -> &Meter {
        (**self).meter()
    }
    fn meter_mut(&mut self) -> &mut Meter {
        (**self).meter_mut()
    }
    fn max_frame(&self) -> usize {
        (**self).max_frame()
    }
}

/// A channel that keeps a copy of every frame it receives: transcripts for tests and fuzz seeds.
pub struct Recording<C> {
    inner: C,
    frames: Vec<Vec<u8>>,
}

impl<C: Channel> Recording<C> {
    pub fn new(inner: C) -> Recording<C> {
        Recording {
            inner,
            frames: Vec::new(),
        }
    }

    /// The frames received so far, in order.
    pub fn into_frames(self) -> Vec<Vec<u8>> {
        self.frames
    }
}

impl<C: Channel> Channel for Recording<C> {
    fn send_frame(&mut self, f: &[u8]) -> Result<()> {
        self.inner.send_frame(f)
    }
    fn recv_frame(&mut self) -> Result<Vec<u8>> {
        let f = self.inner.recv_frame()?;
        self.frames.push(f.clone());
        Ok(f)
    }
    fn flush(&mut self) -> Result<()> {
        self.inner.flush()
    }
    fn meter(&self) -> &Meter {
        self.inner.meter()
    }
    fn meter_mut(&mut self) -> &mut Meter {
        self.inner.meter_mut()
    }
    fn max_frame(&self) -> usize {
        self.inner.max_frame()
    }
    fn cost(&self) -> Cost {
        self.inner.cost()
    }
}
