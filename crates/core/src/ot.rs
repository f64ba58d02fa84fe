//! The correlated-OT interfaces the garbled-circuit protocols are written against, so `gc` runs
//! on any OT extension (IKNP today, a pool or Ferret tomorrow) without depending on how it is
//! made. They are generic over the channel type `C` because this crate sits below the network
//! crate.
use crate::block::Block;

/// The sender's side of correlated OT with a global Δ (the garbler's: Δ is its free-XOR offset).
pub trait CotSender<C: ?Sized> {
    type Error;
    /// The global correlation Δ.
    fn delta(&self) -> Block;
    /// `n` correlated OTs: returns m0_j; the receiver gets m0_j ⊕ c_j·Δ.
    fn send_cot(&mut self, ch: &mut C, n: usize) -> Result<Vec<Block>, Self::Error>;
}

/// The receiver's side of correlated OT (the evaluator's): one block m0_j ⊕ c_j·Δ per choice.
pub trait CotReceiver<C: ?Sized> {
    type Error;
    fn recv_cot(&mut self, ch: &mut C, choices: &[bool]) -> Result<Vec<Block>, Self::Error>;
}
