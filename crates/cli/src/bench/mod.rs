//! `secinfer bench ...`: each protocol's benchmark, printing JSON lines or a table.
use crate::error::Error;
use crate::report::Reporter;
use clap::Subcommand;

pub mod gc;
pub mod gru;
pub mod he;
pub mod math;
pub mod ot;

/// The benchmarks. Each measures both parties (see `--net`/`--profile`) and reports time, bytes
/// and rounds per phase plus its own fields.
#[derive(Subcommand, Debug)]
pub enum BenchCmd {
    /// Oblivious transfer extension: correlated, random, chosen-message and 1-of-N OTs.
    Ot(ot::OtArgs),
    /// Garbled-circuit activations: AND gates, depth and ULP error per function and width (local).
    Gates(gc::GatesArgs),
    /// Garbled-circuit activations on N secret-shared values between two parties.
    Gc(gc::GcArgs),
    /// Packed-BFV operations: µs per operation per parameter set.
    HeOps(he::HeOpsArgs),
    /// Encrypted matrix–vector product into Z_t shares (naive, GAZELLE, GALA).
    HeMatvec(he::HeMatvecArgs),
    /// Encrypted convolution into Z_t shares (GAZELLE output rotation, GALA kernel grouping).
    HeConv(he::HeConvArgs),
    /// Secret-sharing math: OPAF / SIRNN exp, exp_neg, sigmoid, tanh, ReLU on Z_2^l shares.
    Math(math::MathArgs),
    /// Secure GRU inference (CryptoGRU, issue 6) on a random model: HE matvecs + garbled steps.
    Gru(gru::GruArgs),
}

pub fn run(cmd: BenchCmd, out: &mut Reporter) -> Result<(), Error> {
    match cmd {
        BenchCmd::Ot(a) => ot::run(a, out),
        BenchCmd::Gates(a) => gc::run_gates(a, out),
        BenchCmd::Gc(a) => gc::run_gc(a, out),
        BenchCmd::HeOps(a) => he::run_ops(a, out),
        BenchCmd::HeMatvec(a) => he::run_matvec(a, out),
        BenchCmd::HeConv(a) => he::run_conv(a, out),
        BenchCmd::Math(a) => math::run(a, out),
        BenchCmd::Gru(a) => gru::run(a, out),
    }
}
