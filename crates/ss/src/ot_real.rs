//! The real OT backend: IKNP/ALSZ 1-of-2 extension both ways and KK13 1-of-N (P0 sends).
use crate::ctx::Party;
use crate::error::{Result, SsError};
use secinfer_net::Channel;
use secinfer_ot::{KkReceiver, KkSender, OtError, OtExtReceiver, OtExtSender, Prg};

impl From<OtError> for SsError {
    fn from(e: OtError) -> Self {
        match e {
            OtError::Net(n) => SsError::Net(n),
            other => SsError::Ot(other.to_string()),
        }
    }
}

pub(crate) struct RealOt {
    sender: OtExtSender,
    receiver: OtExtReceiver,
    kk_s: Option<KkSender>,
    kk_r: Option<KkReceiver>,
}

impl RealOt {
    pub(crate) fn setup<C: Channel>(party: Party, ch: &mut C, prg: &mut Prg) -> Result<Self> {
        if party.is_p0() {
            let sender = OtExtSender::setup(ch, prg)?;
            let receiver = OtExtReceiver::setup(ch, prg)?;
            let kk = KkSender::setup(ch, prg)?;
            Ok(RealOt {
                sender,
                receiver,
                kk_s: Some(kk),
                kk_r: None,
            })
        } else {
            let receiver = OtExtReceiver::setup(ch, prg)?;
            let sender = OtExtSender::setup(ch, prg)?;
            let kk = KkReceiver::setup(ch, prg)?;
            Ok(RealOt {
                sender,
                receiver,
                kk_s: None,
                kk_r: Some(kk),
            })
        }
    }
    /// Offline phase: nothing to precompute for on-demand IKNP/KK13.
    pub(crate) fn preprocess<C: Channel>(
        &mut self,
        _ch: &mut C,
        _p0: bool,
        _plan: crate::ctx::Plan,
    ) -> Result<()> {
        Ok(())
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
        match &mut self.kk_s {
            Some(k) => Ok(k.send_u64(ch, n, msgs, bits)?),
            None => Err(SsError::InvalidArgument("only P0 sends 1-of-N OTs".into())),
        }
    }
    pub(crate) fn kk_recv<C: Channel>(
        &mut self,
        ch: &mut C,
        n: usize,
        choices: &[u8],
        bits: u32,
    ) -> Result<Vec<u64>> {
        match &mut self.kk_r {
            Some(k) => Ok(k.recv_u64(ch, n, choices, bits)?),
            None => Err(SsError::InvalidArgument(
                "only P1 receives 1-of-N OTs".into(),
            )),
        }
    }
}
