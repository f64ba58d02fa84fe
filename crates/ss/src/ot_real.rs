//! The real OT backend: pooled random COTs in both directions (`secinfer-ot`'s pooled OT, filled
//! by IKNP, SoftSpokenOT or Ferret in the offline phase), derandomised online at 1 bit per 1-of-2
//! OT plus its payload; 1-of-N OTs (P0 sends) take ⌈log2 N⌉ COTs of the P0 → P1 pool each.
use crate::ctx::{Party, Plan};
use crate::error::{Result, SsError};
use secinfer_core::{Block, Prg};
use secinfer_net::Channel;
use secinfer_ot::{CotSource, PooledOtReceiver, PooledOtSender};

pub(crate) struct RealOt {
    /// This party as sender (P0: the P0 → P1 pool, which also serves 1-of-N).
    sender: PooledOtSender,
    /// This party as receiver.
    receiver: PooledOtReceiver,
    party: Party,
}

fn count(n: u64) -> Result<usize> {
    usize::try_from(n).map_err(|_| SsError::InvalidArgument("pool size overflows usize".into()))
}

impl RealOt {
    /// Setup: base OTs (and, for Ferret, its bootstrap) of both directions; P0's sender first.
    pub(crate) fn setup<C: Channel>(
        party: Party,
        ch: &mut C,
        prg: &mut Prg,
        source: CotSource,
    ) -> Result<Self> {
        // IKNP and SoftSpoken: one set of public-key base OTs; the P1 → P0 extension is
        // bootstrapped on 128 random OTs of the P0 → P1 pool.
        let reverse = !matches!(source, CotSource::Ferret(_));
        if party.is_p0() {
            let mut sender = PooledOtSender::setup_with_source(ch, prg, source)?;
            let receiver = if reverse {
                sender.bootstrap_reverse(ch, prg)?
            } else {
                PooledOtReceiver::setup_with_source(ch, prg, source)?
            };
            Ok(RealOt {
                sender,
                receiver,
                party,
            })
        } else {
            let mut receiver = PooledOtReceiver::setup_with_source(ch, prg, source)?;
            let sender = if reverse {
                receiver.bootstrap_reverse(ch, prg)?
            } else {
                PooledOtSender::setup_with_source(ch, prg, source)?
            };
            Ok(RealOt {
                sender,
                receiver,
                party,
            })
        }
    }

    /// Offline phase: tops the P0 → P1 pool (`from_p0`) or the P1 → P0 pool up to `n` unused
    /// COTs. Both parties call it at the same point with the same arguments. A pool that runs
    /// dry online refills itself on demand (correct, but then that traffic is online).
    pub(crate) fn top_up<C: Channel>(&mut self, ch: &mut C, from_p0: bool, n: u64) -> Result<()> {
        let n = count(n)?;
        if self.party.is_p0() == from_p0 {
            let need = n.saturating_sub(self.sender.available());
            if need > 0 {
                self.sender.fill(ch, need)?;
            }
        } else {
            let need = n.saturating_sub(self.receiver.available());
            if need > 0 {
                self.receiver.fill(ch, need)?;
            }
        }
        Ok(())
    }

    /// Random OTs on the pool's own random choices, as sender (this party's outgoing pool):
    /// both keys per OT, no message.
    pub(crate) fn rand_rot_send<C: Channel>(
        &mut self,
        ch: &mut C,
        out: &mut [[Block; 2]],
    ) -> Result<()> {
        Ok(self.sender.take_random_rot_into(ch, out)?)
    }
    /// Random OTs on the pool's own random choices, as receiver: the choice bits and keys.
    pub(crate) fn rand_rot_recv<C: Channel>(
        &mut self,
        ch: &mut C,
        choices: &mut [bool],
        out: &mut [Block],
    ) -> Result<()> {
        Ok(self.receiver.take_random_rot_into(ch, choices, out)?)
    }

    /// Random 1-of-n OTs on the P0 → P1 pool's own choices (P0: `count × n` keys).
    pub(crate) fn rand_n_send<C: Channel>(
        &mut self,
        ch: &mut C,
        n: usize,
        count: usize,
    ) -> Result<Vec<Block>> {
        Ok(self.sender.take_random_n(ch, n, count)?)
    }
    /// P1's side of [`RealOt::rand_n_send`]: the random choices and their keys.
    pub(crate) fn rand_n_recv<C: Channel>(
        &mut self,
        ch: &mut C,
        n: usize,
        count: usize,
    ) -> Result<(Vec<u8>, Vec<Block>)> {
        Ok(self.receiver.take_random_n(ch, n, count)?)
    }

    /// Chosen-choice random OTs as sender: both 128-bit keys per OT (the receiver's
    /// derandomisation bits arrive first).
    pub(crate) fn rot_send<C: Channel>(
        &mut self,
        ch: &mut C,
        out: &mut [[Block; 2]],
    ) -> Result<()> {
        Ok(self.sender.send_rot_into(ch, out)?)
    }
    /// Chosen-choice random OTs as receiver: the key of each choice.
    pub(crate) fn rot_recv<C: Channel>(
        &mut self,
        ch: &mut C,
        choices: &[bool],
        out: &mut [Block],
    ) -> Result<()> {
        Ok(self.receiver.recv_rot_into(ch, choices, out)?)
    }

    /// Unused pooled COTs per direction.
    pub(crate) fn available(&self) -> Plan {
        let (mine_out, mine_in) = (
            self.sender.available() as u64,
            self.receiver.available() as u64,
        );
        if self.party.is_p0() {
            Plan {
                cots_from_p0: mine_out,
                cots_from_p1: mine_in,
                ..Plan::default()
            }
        } else {
            Plan {
                cots_from_p0: mine_in,
                cots_from_p1: mine_out,
                ..Plan::default()
            }
        }
    }

    pub(crate) fn cot_send<C: Channel>(
        &mut self,
        ch: &mut C,
        deltas: &[u64],
        bits: u32,
    ) -> Result<Vec<u64>> {
        Ok(self.sender.send_correlated_u64(ch, deltas, bits)?)
    }
    pub(crate) fn cot_recv<C: Channel>(
        &mut self,
        ch: &mut C,
        choices: &[bool],
        bits: u32,
    ) -> Result<Vec<u64>> {
        Ok(self.receiver.recv_correlated_u64(ch, choices, bits)?)
    }
    pub(crate) fn kk_send<C: Channel>(
        &mut self,
        ch: &mut C,
        n: usize,
        msgs: &[u64],
        bits: u32,
    ) -> Result<()> {
        if !self.party.is_p0() {
            return Err(SsError::InvalidArgument("only P0 sends 1-of-N OTs".into()));
        }
        Ok(self.sender.send_u64(ch, n, msgs, bits)?)
    }
    pub(crate) fn kk_send_with<C: Channel>(
        &mut self,
        ch: &mut C,
        n: usize,
        count: usize,
        bits: u32,
        msgs_of: impl FnMut(usize, &mut [u64]),
    ) -> Result<()> {
        if !self.party.is_p0() {
            return Err(SsError::InvalidArgument("only P0 sends 1-of-N OTs".into()));
        }
        Ok(self.sender.send_u64_with(ch, n, count, bits, msgs_of)?)
    }
    pub(crate) fn kk_recv<C: Channel>(
        &mut self,
        ch: &mut C,
        n: usize,
        choices: &[u8],
        bits: u32,
    ) -> Result<Vec<u64>> {
        if self.party.is_p0() {
            return Err(SsError::InvalidArgument(
                "only P1 receives 1-of-N OTs".into(),
            ));
        }
        Ok(self.receiver.recv_u64(ch, n, choices, bits)?)
    }
}
