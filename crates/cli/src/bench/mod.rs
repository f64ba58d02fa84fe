//! `secinfer bench ...`: each protocol's benchmark, printing JSON lines or a table.
use crate::error::Error;
use crate::report::Reporter;
use clap::Subcommand;

pub mod ot;

/// The benchmarks. Each measures both parties (see `--net`/`--profile`) and reports time, bytes
/// and rounds per phase plus its own fields.
#[derive(Subcommand, Debug)]
pub enum BenchCmd {
    /// Oblivious transfer extension: correlated, random, chosen-message and 1-of-N OTs.
    Ot(ot::OtArgs),
}

pub fn run(cmd: BenchCmd, out: &mut Reporter) -> Result<(), Error> {
    match cmd {
        BenchCmd::Ot(a) => ot::run(a, out),
    }
}
