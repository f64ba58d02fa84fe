//! `secinfer`: two-party private neural-network inference from the command line.
mod bench;
mod choco_cmd;
mod error;
mod model_cmd;
mod pair;
mod perplexity;
mod report;
mod serve;
#[cfg(feature = "tfhe")]
mod she_cmd;
mod ss_cmd;

use clap::{Parser, Subcommand};
use error::Error;
use report::Reporter;

/// Two-party private neural-network inference: serve, infer, inspect, export-info, bench.
///
/// A client holding a private input and a server holding a private model compute the model's
/// prediction together: the server learns nothing about the input, the client learns only the
/// result. See README.md and docs/ for the protocols, their parameters and security levels.
#[derive(Parser, Debug)]
#[command(name = "secinfer", version)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Measure a protocol between two parties (time, bytes and rounds per phase).
    Bench {
        /// Print one JSON object per measured case (raw seconds and bytes) instead of a table.
        #[arg(long, global = true)]
        json: bool,
        /// Print every field in the table (it may then be wider than 100 columns).
        #[arg(long, global = true, conflicts_with = "json")]
        wide: bool,
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
/// 3.x: a third less resident memory. Figures in docs/history/benchmarks-by-session.md,
/// "Session 8".
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let cli = Cli::parse();
    let result: Result<(), Error> = match cli.cmd {
        Cmd::Bench { json, wide, which } => {
            let mut out = Reporter::new(json, wide);
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

#[cfg(test)]
mod tests {
    //! What `--help` shows a newcomer, checked over the whole command tree so that options
    //! added later are held to the same rules.
    use super::Cli;
    use clap::CommandFactory;

    /// Every command under `cmd` with its full name.
    fn walk(cmd: &clap::Command, path: String, out: &mut Vec<(String, clap::Command)>) {
        for sub in cmd.get_subcommands() {
            let p = format!("{path} {}", sub.get_name());
            out.push((p.clone(), sub.clone()));
            walk(sub, p, out);
        }
    }

    fn all_commands() -> Vec<(String, clap::Command)> {
        let mut root = Cli::command();
        root.build();
        let mut out = vec![("secinfer".to_string(), root.clone())];
        walk(&root, "secinfer".into(), &mut out);
        out
    }

    #[test]
    fn clap_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn every_option_and_command_has_help() {
        let mut missing = Vec::new();
        for (name, cmd) in all_commands() {
            if name != "secinfer" && cmd.get_about().is_none() && name != "secinfer help" {
                missing.push(format!("{name}: the command has no about text"));
            }
            for arg in cmd.get_arguments() {
                let id = arg.get_id().as_str();
                if matches!(id, "help" | "version") {
                    continue;
                }
                if arg.get_help().is_none() && arg.get_long_help().is_none() {
                    missing.push(format!("{name}: --{id} has no help"));
                }
            }
        }
        assert!(missing.is_empty(), "undocumented:\n{}", missing.join("\n"));
    }

    #[test]
    fn defaults_read_as_a_person_would_write_them() {
        let mut bad = Vec::new();
        for (name, cmd) in all_commands() {
            for arg in cmd.get_arguments() {
                for d in arg.get_default_values() {
                    let d = d.to_string_lossy();
                    // A sentinel such as usize::MAX, or a Debug-formatted enum, is not a default
                    // a reader can use: an Option or a named value says what is meant.
                    let huge = d.parse::<u128>().is_ok_and(|v| v > 1_000_000_000_000);
                    if huge || d.contains('(') || d.contains("::") {
                        bad.push(format!("{name}: --{} [default: {d}]", arg.get_id()));
                    }
                }
            }
        }
        assert!(bad.is_empty(), "defaults:\n{}", bad.join("\n"));
    }

    #[test]
    fn help_names_no_issue_or_session_numbers() {
        let mut bad = Vec::new();
        for (name, mut cmd) in all_commands() {
            let help = cmd.render_long_help().to_string();
            for line in help.lines() {
                let l = line.to_lowercase();
                if l.contains("(issue ") || l.contains("session 1") || l.contains(", issue ") {
                    bad.push(format!("{name}: {line}"));
                }
            }
        }
        assert!(bad.is_empty(), "history in help:\n{}", bad.join("\n"));
    }

    #[test]
    fn softspoken_k_has_one_default_across_commands() {
        use super::{bench::BenchCmd, Cmd};
        use clap::Parser;
        use secinfer_nn::layers::gru::OtFiller;
        let want = OtFiller::default();
        let parse = |args: &[&str]| Cli::try_parse_from(args).map(|c| c.cmd);
        match parse(&["secinfer", "infer"]) {
            Ok(Cmd::Infer(a)) => assert_eq!(a.ot, want),
            other => panic!("infer parsed as {other:?}"),
        }
        match parse(&["secinfer", "bench", "gru"]) {
            Ok(Cmd::Bench {
                which: BenchCmd::Gru(a),
                ..
            }) => assert_eq!(a.ot, want),
            other => panic!("bench gru parsed as {other:?}"),
        }
        match parse(&["secinfer", "bench", "ot"]) {
            Ok(Cmd::Bench {
                which: BenchCmd::Ot(a),
                ..
            }) => assert_eq!(OtFiller::SoftSpoken { k: a.k }, want),
            other => panic!("bench ot parsed as {other:?}"),
        }
    }

    #[test]
    fn top_level_help_lists_every_subcommand() {
        let mut root = Cli::command();
        let help = root.render_help().to_string();
        let about = root.get_about().map(|a| a.to_string()).unwrap_or_default();
        for sub in Cli::command().get_subcommands() {
            let n = sub.get_name();
            assert!(!sub.is_hide_set(), "{n} is hidden");
            assert!(
                help.contains(&format!("  {n} ")),
                "`secinfer -h` omits {n}:\n{help}"
            );
            if n != "help" {
                assert!(about.contains(n), "the one-line about omits {n}: {about}");
            }
        }
    }
}
