//! TEMPORARY stub until secinfer-ot's extension API compiles.
use crate::ctx::Party;
use crate::error::{Result, SsError};
use secinfer_net::Channel;
use secinfer_ot::Prg;
pub(crate) struct RealOt;
fn na() -> SsError { SsError::Ot("OT extension not available yet".into()) }
impl RealOt {
    pub(crate) fn setup<C: Channel>(_p: Party, _ch: &mut C, _prg: &mut Prg) -> Result<Self> { Err(na()) }
    pub(crate) fn cot_send<C: Channel>(&mut self, _ch: &mut C, _d: &[u64], _b: u32) -> Result<Vec<u64>> { Err(na()) }
    pub(crate) fn cot_recv<C: Channel>(&mut self, _ch: &mut C, _c: &[bool], _b: u32) -> Result<Vec<u64>> { Err(na()) }
    pub(crate) fn kk_send<C: Channel>(&mut self, _ch: &mut C, _n: usize, _m: &[u64], _b: u32) -> Result<()> { Err(na()) }
    pub(crate) fn kk_recv<C: Channel>(&mut self, _ch: &mut C, _n: usize, _c: &[u8], _b: u32) -> Result<Vec<u64>> { Err(na()) }
}
