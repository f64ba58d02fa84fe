//! In-memory duplex pair: two ends connected by bounded queues of frames.
use crate::channel::{Channel, DEFAULT_MAX_FRAME};
use crate::error::{NetError, Result};
use crate::meter::Meter;
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::time::Duration;

/// Frames in flight per direction before a sender blocks: bounds memory like a socket buffer.
const QUEUE_FRAMES: usize = 1024;

/// One end of an in-memory pair.
pub struct MemChannel {
    tx: SyncSender<Vec<u8>>,
    rx: Receiver<Vec<u8>>,
    meter: Meter,
    max_frame: usize,
    timeout: Option<Duration>,
}

/// Two connected ends with the default frame limit and no timeout.
pub fn mem_pair() -> (MemChannel, MemChannel) {
    mem_pair_with(DEFAULT_MAX_FRAME, None)
}

/// Two connected ends with the given frame limit and receive timeout.
pub fn mem_pair_with(max_frame: usize, timeout: Option<Duration>) -> (MemChannel, MemChannel) {
    let (tx_a, rx_b) = sync_channel(QUEUE_FRAMES);
    let (tx_b, rx_a) = sync_channel(QUEUE_FRAMES);
    let a = MemChannel {
        tx: tx_a,
        rx: rx_a,
        meter: Meter::default(),
        max_frame,
        timeout,
    };
    let b = MemChannel {
        tx: tx_b,
        rx: rx_b,
        meter: Meter::default(),
        max_frame,
        timeout,
    };
    (a, b)
}

impl Channel for MemChannel {
    fn send_frame(&mut self, frame: &[u8]) -> Result<()> {
        self.send_frame_vec(frame.to_vec())
    }

    /// Moves the frame into the queue: no copy.
    fn send_frame_vec(&mut self, v: Vec<u8>) -> Result<()> {
        let len = v.len();
        if len > self.max_frame {
            return Err(NetError::FrameTooLarge {
                len,
                max: self.max_frame,
            });
        }
        match self.tx.try_send(v) {
            Ok(()) => {}
            Err(TrySendError::Full(v)) => self.tx.send(v).map_err(|_| NetError::Closed)?,
            Err(TrySendError::Disconnected(_)) => return Err(NetError::Closed),
        }
        self.meter.record_send(len);
        Ok(())
    }

    fn recv_frame(&mut self) -> Result<Vec<u8>> {
        let v = match self.timeout {
            None => self.rx.recv().map_err(|_| NetError::Closed)?,
            Some(t) => self.rx.recv_timeout(t).map_err(|e| match e {
                RecvTimeoutError::Timeout => NetError::Timeout(crate::error::Deadline::Idle),
                RecvTimeoutError::Disconnected => NetError::Closed,
            })?,
        };
        if v.len() > self.max_frame {
            return Err(NetError::FrameTooLarge {
                len: v.len(),
                max: self.max_frame,
            });
        }
        self.meter.record_recv(v.len());
        Ok(v)
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
        self.max_frame
    }
}
