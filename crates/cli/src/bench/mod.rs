//! `secinfer bench ...`: each protocol's benchmark, printing JSON lines or a table.
use crate::error::Error;
use crate::report::Reporter;
use clap::Subcommand;

pub mod choco;
pub mod fastgrnn;
pub mod gc;
pub mod gru;
pub mod he;
pub mod math;
pub mod net;
pub mod ot;
#[cfg(feature = "tfhe")]
pub mod she;

/// SoftSpokenOT's chunk size k wherever a command fills OT pools or measures SoftSpokenOT:
/// the secure GRU sessions' own default ([`secinfer_nn::layers::gru::OtFiller::default`]), so a bench
/// measures what `serve`/`infer` run (3.2 bytes per COT at the cost of IKNP's time on two cores).
pub const SOFTSPOKEN_K: u32 = 5;

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
    /// Secure GRU inference (CryptoGRU) on a random model: HE matvecs + garbled steps.
    Gru(gru::GruArgs),
    /// Secure FastGRNN (OPAF Table XI) on a random model in family ss: OPAF or SIRNN math.
    Fastgrnn(fastgrnn::FastGrnnArgs),
    /// CHOCO client-aided inference of a shipped MNIST model: client time and bytes against local.
    Choco(choco::ChocoArgs),
    /// A whole image network in family hegc (GALA): per-layer time, bytes, rounds, op counts.
    Net(net::NetBenchArgs),
    /// SHE (non-interactive TFHE inference): gates, bootstraps, depth, keys, time per sample.
    #[cfg(feature = "tfhe")]
    She(she::SheArgs),
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
        BenchCmd::Fastgrnn(a) => fastgrnn::run(a, out),
        BenchCmd::Choco(a) => choco::run(a, out),
        BenchCmd::Net(a) => net::run(a, out),
        #[cfg(feature = "tfhe")]
        BenchCmd::She(a) => she::run(a, out),
    }
}

#[cfg(test)]
mod tests {
    use secinfer_nn::layers::gru::OtFiller;

    #[test]
    fn softspoken_k_is_the_sessions_default() {
        assert_eq!(
            OtFiller::default(),
            OtFiller::SoftSpoken {
                k: super::SOFTSPOKEN_K
            }
        );
    }
}
