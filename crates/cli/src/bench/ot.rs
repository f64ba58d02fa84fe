//! `secinfer bench ot`.
use crate::error::Error;
use crate::pair::NetArgs;
use crate::report::Reporter;
use clap::{Args, ValueEnum};

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum OtKind {
    /// Correlated OT with a global Δ (m1 = m0 ⊕ Δ): IKNP without hashing.
    Cot,
    /// Random OT: two hashed keys per OT.
    Rot,
    /// Chosen-message 1-of-2 OT on 128-bit messages.
    Chosen,
    /// KK13 1-of-16 OT on 8-bit messages (the lookup tables of the math library).
    Kk,
}

#[derive(Args, Debug)]
pub struct OtArgs {
    /// Number of OTs.
    #[arg(long, default_value_t = 10_000_000)]
    pub count: usize,
    /// Which OT.
    #[arg(long, value_enum, default_value_t = OtKind::Cot)]
    pub kind: OtKind,
    #[command(flatten)]
    pub net: NetArgs,
}

pub fn run(_args: OtArgs, _out: &mut Reporter) -> Result<(), Error> {
    Err(Error::msg("bench ot: the OT extension is being written (crates/ot)"))
}
