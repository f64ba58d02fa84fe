//! The real OT backend: pooled random COTs in both directions (`secinfer-ot`'s pooled OT, filled
//! by IKNP, SoftSpokenOT or Ferret in the offline phase), derandomised online at 1 bit per 1-of-2
//! OT plus its payload; 1-of-N OTs (P0 sends) take ⌈log2 N⌉ COTs of the P0 → P1 pool each.
use crate::ctx::{Party, Plan};
use crate::error::{Result, SsError};
use secinfer_net::Channel;
use secinfer_ot::{
    Block, CotSource, OtError, OtExtReceiver, OtExtSender, PooledOtReceiver, PooledOtSender, Prg,
    SoftSpokenReceiver, SoftSpokenSender,
};

impl From<OtError> for SsError {
    fn from(e: OtError) -> Self {
        match e {
            OtError::Net(n) => SsError::Net(n),
            other => SsError::Ot(other.to_string()),
        }
    }
}

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
        if source == CotSource::Iknp {
            return Self::setup_iknp(party, ch, prg);
        }
        if let CotSource::SoftSpoken { k } = source {
            return Self::setup_softspoken(party, ch, prg, k);
        }
        if party.is_p0() {
            let sender = PooledOtSender::setup_with_source(ch, prg, source)?;
            let receiver = PooledOtReceiver::setup_with_source(ch, prg, source)?;
            Ok(RealOt {
                sender,
                receiver,
                party,
            })
        } else {
            let receiver = PooledOtReceiver::setup_with_source(ch, prg, source)?;
            let sender = PooledOtSender::setup_with_source(ch, prg, source)?;
            Ok(RealOt {
                sender,
                receiver,
                party,
            })
        }
    }

    /// IKNP setup with one set of public-key base OTs: the P0 → P1 extension is set up with
    /// base OTs, then carries 128 chosen OTs that are the base OTs of the P1 → P0 extension
    /// (P0 sends 128 random seed pairs, P1 picks by the bits of its fresh random Δ).
    fn setup_iknp<C: Channel>(party: Party, ch: &mut C, prg: &mut Prg) -> Result<Self> {
        if party.is_p0() {
            let mut ext = OtExtSender::setup(ch, prg)?;
            let seeds: Vec<[Block; 2]> = (0..128)
                .map(|_| [prg.next_block(), prg.next_block()])
                .collect();
            ext.send_chosen(ch, &seeds)?;
            let back = OtExtReceiver::from_base_ots(&seeds)?;
            Ok(RealOt {
                sender: PooledOtSender::from_iknp(ext),
                receiver: PooledOtReceiver::from_iknp(back, prg),
                party,
            })
        } else {
            let mut ext = OtExtReceiver::setup(ch, prg)?;
            let mut delta = prg.next_block();
            while delta == Block::ZERO {
                delta = prg.next_block();
            }
            let choices: Vec<bool> = (0..128).map(|i| (delta.0 >> i) & 1 == 1).collect();
            let keys = ext.recv_chosen(ch, &choices)?;
            let back = OtExtSender::from_base_ots(delta, &keys)?;
            Ok(RealOt {
                sender: PooledOtSender::from_iknp(back),
                receiver: PooledOtReceiver::from_iknp(ext, prg),
                party,
            })
        }
    }

    /// SoftSpokenOT setup with one set of public-key base OTs, as [`setup_iknp`](Self::setup_iknp):
    /// the P0 → P1 pool (128 COTs, made in the setup phase) carries 128 chosen OTs that are the
    /// base OTs of the P1 → P0 extension, whose GGM message then follows.
    fn setup_softspoken<C: Channel>(
        party: Party,
        ch: &mut C,
        prg: &mut Prg,
        k: u32,
    ) -> Result<Self> {
        let source = CotSource::SoftSpoken { k };
        if party.is_p0() {
            let mut sender = PooledOtSender::setup_with_source(ch, prg, source)?;
            let seeds: Vec<[Block; 2]> = (0..128)
                .map(|_| [prg.next_block(), prg.next_block()])
                .collect();
            sender.send_chosen(ch, &seeds)?;
            let back = SoftSpokenReceiver::from_base_ots(ch, &seeds, k)?;
            Ok(RealOt {
                sender,
                receiver: PooledOtReceiver::from_softspoken(back, prg),
                party,
            })
        } else {
            let mut receiver = PooledOtReceiver::setup_with_source(ch, prg, source)?;
            let mut delta = prg.next_block();
            while delta == Block::ZERO {
                delta = prg.next_block();
            }
            let choices: Vec<bool> = (0..128).map(|i| (delta.0 >> i) & 1 == 1).collect();
            let keys = receiver.recv_chosen(ch, &choices)?;
            let back = SoftSpokenSender::from_base_ots(ch, delta, &keys, k)?;
            Ok(RealOt {
                sender: PooledOtSender::from_softspoken(back),
                receiver,
                party,
            })
        }
    }

    /// Offline phase: fills both pools with what `plan` says the online phase takes, in the
    /// same order on both sides (the P0 → P1 pool first). A pool that runs dry online refills
    /// itself on demand (correct, but then that traffic is online).
    pub(crate) fn preprocess<C: Channel>(
        &mut self,
        ch: &mut C,
        plan: Plan,
        leaf_bits: u32,
    ) -> Result<()> {
        // Each bit triple takes one random OT each way, each half triple one P0 → P1.
        let from_p0 = count(
            plan.cots_from_p0 + plan.triples + plan.half_triples + plan.leaf_ots * leaf_bits as u64,
        )?;
        let from_p1 = count(plan.cots_from_p1 + plan.triples)?;
        if self.party.is_p0() {
            let need = from_p0.saturating_sub(self.sender.available());
            if need > 0 {
                self.sender.fill(ch, need)?;
            }
            let need = from_p1.saturating_sub(self.receiver.available());
            if need > 0 {
                self.receiver.fill(ch, need)?;
            }
        } else {
            let need = from_p0.saturating_sub(self.receiver.available());
            if need > 0 {
                self.receiver.fill(ch, need)?;
            }
            let need = from_p1.saturating_sub(self.sender.available());
            if need > 0 {
                self.sender.fill(ch, need)?;
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
