//! In-process network shaping: one-way latency and bandwidth imposed on frame delivery.
//!
//! These kernels have no netem, so both ends of a shaped pair live in one process and share a
//! clock epoch. Each frame carries its delivery time (an 8-byte trailer, not metered); the receiver
//! waits until then. A trailer rather than a header: the receiver strips it by truncating, where
//! a header would move the whole frame (megabytes in the offline phase). The sender never blocks: its link is a queue that drains at the profile's bandwidth.
use crate::channel::Channel;
use crate::error::{NetError, Result};
use crate::meter::Meter;
use serde::Serialize;
use std::str::FromStr;
use std::time::{Duration, Instant};

/// A network profile (DESIGN.md §4).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Profile {
    pub name: &'static str,
    /// One-way latency.
    pub one_way: Duration,
    /// Bits per second on each direction; `None` is unlimited.
    pub bits_per_second: Option<f64>,
}

impl Profile {
    /// No shaping at all.
    pub const NONE: Profile = Profile {
        name: "none",
        one_way: Duration::ZERO,
        bits_per_second: None,
    };
    /// 0.3 ms round trip, 3 Gbit/s.
    pub const LAN: Profile = Profile {
        name: "lan",
        one_way: Duration::from_micros(150),
        bits_per_second: Some(3e9),
    };
    /// 40 ms round trip, 400 Mbit/s.
    pub const WAN: Profile = Profile {
        name: "wan",
        one_way: Duration::from_millis(20),
        bits_per_second: Some(400e6),
    };

    pub fn is_none(&self) -> bool {
        self.one_way.is_zero() && self.bits_per_second.is_none()
    }
}

impl FromStr for Profile {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "none" => Ok(Profile::NONE),
            "lan" => Ok(Profile::LAN),
            "wan" => Ok(Profile::WAN),
            other => Err(format!(
                "unknown network profile {other:?} (expected none, lan or wan)"
            )),
        }
    }
}

/// Wraps a channel so that delivery obeys a [`Profile`]. Both ends must share `epoch`.
pub struct Shaped<C> {
    inner: C,
    profile: Profile,
    epoch: Instant,
    link_free_at: Duration,
    meter: Meter,
}

impl<C: Channel> Shaped<C> {
    pub fn new(inner: C, profile: Profile, epoch: Instant) -> Self {
        Shaped {
            inner,
            profile,
            epoch,
            link_free_at: Duration::ZERO,
            meter: Meter::default(),
        }
    }
    pub fn into_inner(self) -> C {
        self.inner
    }
}

/// Wraps both ends of an in-process pair with the same profile and clock.
pub fn shape_pair<C: Channel>(a: C, b: C, profile: Profile) -> (Shaped<C>, Shaped<C>) {
    let epoch = Instant::now();
    (
        Shaped::new(a, profile, epoch),
        Shaped::new(b, profile, epoch),
    )
}

fn wait_until(t: Instant) {
    loop {
        let now = Instant::now();
        if now >= t {
            return;
        }
        let left = t - now;
        // Sleep overshoots by tens of microseconds, so the last stretch yields in a loop for LAN
        // accuracy; yielding rather than spinning leaves the core to the peer (both parties and
        // their workers share the machine's cores, where a real receiver would be idle).
        if left > Duration::from_micros(300) {
            std::thread::sleep(left - Duration::from_micros(200));
        } else {
            std::thread::yield_now();
        }
    }
}

impl<C: Channel> Channel for Shaped<C> {
    fn send_frame(&mut self, frame: &[u8]) -> Result<()> {
        // One copy (frame plus trailer), then moved to the inner channel.
        let mut buf = Vec::with_capacity(frame.len() + 8);
        buf.extend_from_slice(frame);
        self.send_frame_vec(buf)
    }

    /// Appends the trailer to the caller's buffer and moves it on: no copy of the frame unless
    /// the buffer has no room for 8 more bytes.
    fn send_frame_vec(&mut self, mut buf: Vec<u8>) -> Result<()> {
        let len = buf.len();
        let now = self.epoch.elapsed();
        let start = now.max(self.link_free_at);
        let tx = match self.profile.bits_per_second {
            Some(bps) => Duration::from_secs_f64((len as f64 + 8.0) * 8.0 / bps),
            None => Duration::ZERO,
        };
        self.link_free_at = start + tx;
        let deliver = (self.link_free_at + self.profile.one_way).as_nanos() as u64;
        buf.extend_from_slice(&deliver.to_le_bytes());
        self.inner.send_frame_vec(buf)?;
        self.meter.record_send(len);
        Ok(())
    }

    fn recv_frame(&mut self) -> Result<Vec<u8>> {
        let mut buf = self.inner.recv_frame()?;
        let Some(body) = buf.len().checked_sub(8) else {
            return Err(NetError::malformed(
                "shaped frame shorter than its 8-byte trailer",
            ));
        };
        let mut t = [0u8; 8];
        t.copy_from_slice(&buf[body..]);
        let deliver = Duration::from_nanos(u64::from_le_bytes(t));
        wait_until(self.epoch + deliver);
        buf.truncate(body);
        self.meter.record_recv(buf.len());
        Ok(buf)
    }

    fn flush(&mut self) -> Result<()> {
        self.inner.flush()
    }
    fn meter(&self) -> &Meter {
        &self.meter
    }
    fn meter_mut(&mut self) -> &mut Meter {
        &mut self.meter
    }
    fn max_frame(&self) -> usize {
        self.inner.max_frame().saturating_sub(8)
    }
}
