//! `secinfer`: two-party private neural-network inference from the command line.
mod bench;
mod error;
mod model_cmd;
mod pair;
mod report;
mod serve;

use clap::{Parser, Subcommand};
use error::Error;
use report::Reporter;

/// Two-party private neural-network inference.
///
/// A client holding a private input and a server holding a private model compute the model's
/// prediction together: the server learns nothing about the input, the client learns only the
/// result. See README.md and docs/ for the protocols, their parameters and security levels.
#[derive(Parser, Debug)]
#[command(name = "secinfer", version, about, long_about)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Measure a protocol between two parties (time, bytes and rounds per phase).
    Bench {
        /// Print one JSON object per measured case instead of a table.
        #[arg(long, global = true)]
        json: bool,
        #[command(subcommand)]
        which: bench::BenchCmd,
    },
    /// Print a model directory's layers, sizes and fixed-point formats.
    Inspect(model_cmd::InspectArgs),
    /// Classify a text privately against a server (or locally with --plaintext).
    Infer(model_cmd::InferArgs),
    /// Serve a model to many clients (secure GRU inference; a capped pool of sessions, a queue, deadlines, the Noise channel).
    Serve(serve::ServeArgs),
    /// Write the public part of a model (model.json, vocabulary, embedding) for clients.
    ExportInfo(serve::ExportInfoArgs),
}

/// mimalloc (2.x) rather than glibc's malloc: a session's offline phase fills tens of MB of OT
/// pools and tables that the online phase frees and reallocates. glibc maps each large buffer
/// afresh (19k page faults for 2^14 OPAF sigmoids, a fifth of both parties' CPU); mimalloc
/// reuses its arenas and commits them on transparent huge pages (< 1k faults). 2.x rather than
/// 3.x: a third less resident memory. Figures in docs/benchmarks.md, "Session 8".
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let cli = Cli::parse();
    let result: Result<(), Error> = match cli.cmd {
        Cmd::Bench { json, which } => {
            let mut out = Reporter::new(json);
            let r = bench::run(which, &mut out);
            out.finish();
            r
        }
        Cmd::Inspect(a) => model_cmd::inspect(a),
        Cmd::Infer(a) => model_cmd::infer(a),
        Cmd::Serve(a) => serve::serve(a),
        Cmd::ExportInfo(a) => serve::export_info(a),
    };
    if let Err(e) = result {
        eprintln!("secinfer: error: {e}");
        std::process::exit(1);
    }
}
