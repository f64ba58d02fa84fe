//! `secinfer serve`: the model owner's side, on secinfer-net's served path: a pool of
//! `--max-sessions` workers fed by a bounded queue (beyond it a client reads "busy, retry
//! later"), a whole-session deadline besides the idle and write ones, the Noise channel under
//! the model's key (made at first serve, pinned by clients through `export-info`), and logits
//! only with `--allow-logits`. Every session's end is logged to stderr with what it revealed.
//! `secinfer export-info` writes the public part a client needs, the server's public key
//! included.
use crate::error::Error;
use clap::Args;
use secinfer_net::{
    default_max_sessions, serve_health, Identity, ServeConfig, ServerSecurity, ServerStats,
    PRIVATE_KEY_FILE,
};
use secinfer_nn::layers::gru::{ServerPolicy, Variant};
use secinfer_nn::plan::{Family, PlanOptions};
use secinfer_nn::runtime::{Server, ServerOptions, SessionEnd, SessionLog};
use std::io::Write;
use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Memory one session may use, for the default cap: a served IMDB GRU session peaks at
/// ≈ 70 MB of server RSS (docs/reliability.md); the budget leaves headroom for larger models.
pub const SESSION_BUDGET_BYTES: u64 = 128 << 20;

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Model directory (model.json, weights.safetensors, vocab.json).
    #[arg(long)]
    pub model: PathBuf,
    /// TCP port (0 picks a free one; the address is printed on stdout).
    #[arg(long, default_value_t = 7460)]
    pub port: u16,
    /// Address to bind.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// baseline (tanh, 20-bit), cg1 (ReLU, 20-bit), cg2 (ReLU, 8-bit activations),
    /// cg2-tanh (tanh, 8-bit activations; not a CryptoGRU variant).
    #[arg(long, default_value = "cg2")]
    pub variant: Variant,
    /// Image networks (family hegc): truncation, ReLU and max-pooling by OT (ot) or garbled
    /// circuits (gc); the client must ask for the same.
    #[arg(long, default_value = "ot")]
    pub nonlinear: secinfer_nn::layers::hegc::Nonlinear,
    /// Idle deadline: seconds a session may wait for the next byte from its client.
    #[arg(long, default_value_t = 60)]
    pub timeout: u64,
    /// Seconds a session may wait for its client to take bytes.
    #[arg(long, default_value_t = 60)]
    pub write_timeout: u64,
    /// Seconds a whole session may last, however busy its client keeps it.
    #[arg(long, default_value_t = 600)]
    pub session_timeout: u64,
    /// Seconds for the greeting and key exchange.
    #[arg(long, default_value_t = 10)]
    pub handshake_timeout: u64,
    /// Sessions run at once (default: two per core, within half the available memory at
    /// 128 MB a session; printed at start).
    #[arg(long)]
    pub max_sessions: Option<usize>,
    /// Connections that may wait for a free session (default: 16 per session); beyond it
    /// clients are refused with "busy, retry later".
    #[arg(long)]
    pub queue: Option<usize>,
    /// Seconds a connection may wait in the queue before it is refused as busy.
    #[arg(long, default_value_t = 120)]
    pub queue_timeout: u64,
    /// Let clients ask for the logits (`infer --reveal-logits`); refused otherwise.
    #[arg(long)]
    pub allow_logits: bool,
    /// The server's private key (made there at first serve; default: server.key in the model
    /// directory). Replicas of one model share it.
    #[arg(long)]
    pub key: Option<PathBuf>,
    /// Serve without encryption or authentication: for benchmarks on a trusted loopback only.
    #[arg(long)]
    pub insecure_plaintext: bool,
    /// Also answer each connection on this port with one status line (`ok active=..
    /// queued=.. max_sessions=..`), for a load balancer's health check.
    #[arg(long)]
    pub health_port: Option<u16>,
    /// Return after this many sessions (default: serve forever).
    #[arg(long)]
    pub sessions: Option<u64>,
    /// Protocol family. `choco` (CHOCO client-aided HE: the server computes the dense and
    /// conv2d layers on ciphertexts): THE CLIENT SEES EVERY INTERMEDIATE ACTIVATION (each
    /// linear layer's accumulator and every later layer's output); the weights stay hidden.
    /// `ss` (OPAF: additive shares; chosen anyway for a model with a fastgrnn layer).
    /// Default: the plan's (the secure GRU).
    #[arg(long)]
    pub family: Option<secinfer_nn::plan::Family>,
}

fn log_end(id: u64, peer: &str, end: SessionEnd) {
    match end {
        SessionEnd::Done(served) => eprintln!("session {id} ({peer}): done: {served}"),
        SessionEnd::Failed(e) => eprintln!("session {id} ({peer}): failed: {e}"),
        SessionEnd::Panicked => {
            eprintln!("session {id} ({peer}): panicked (caught; server continues)")
        }
        SessionEnd::Refused(why) => eprintln!("connection from {peer}: refused busy: {why}"),
    }
}

/// The served path's settings from the command line: the channel's security under the model's
/// key, the session cap (by `session_bytes` of memory each unless set), queue and deadlines.
pub fn serve_config(a: &ServeArgs, session_bytes: u64) -> Result<ServeConfig, Error> {
    let security = if a.insecure_plaintext {
        ServerSecurity::InsecurePlaintext
    } else {
        let key = a
            .key
            .clone()
            .unwrap_or_else(|| a.model.join(PRIVATE_KEY_FILE));
        ServerSecurity::Noise(Arc::new(Identity::load_or_create(&key)?))
    };
    let max_sessions = a
        .max_sessions
        .unwrap_or_else(|| default_max_sessions(session_bytes));
    let mut cfg = ServeConfig::new(max_sessions, security);
    if let Some(q) = a.queue {
        cfg.queue = q;
    }
    cfg.queue_timeout = Duration::from_secs(a.queue_timeout);
    cfg.handshake_timeout = Duration::from_secs(a.handshake_timeout.max(1));
    cfg.tcp.read_timeout = Some(Duration::from_secs(a.timeout.max(1)));
    cfg.tcp.write_timeout = Some(Duration::from_secs(a.write_timeout.max(1)));
    cfg.tcp.session_timeout = Some(Duration::from_secs(a.session_timeout.max(1)));
    cfg.stop_after = a.sessions;
    Ok(cfg)
}

/// What the listening line says runs, and the family's own line for the log: its leak, its
/// policy, its deadline.
fn describe(a: &ServeArgs, server: &Server) -> (String, Option<String>) {
    let s = server.session();
    let model = a.model.display();
    match (s.family(), s.config()) {
        (Family::Choco, Some(config)) => {
            let primes = s.choco().map_or(0, |c| c.primes().len());
            (
                format!("model {model}, family choco, {primes} plaintext primes"),
                Some(crate::choco_cmd::leak_line(config)),
            )
        }
        (Family::Ss, _) => (
            format!(
                "model {model}, family ss, {}",
                s.ss_shape()
                    .map_or_else(String::new, crate::ss_cmd::shape_line)
            ),
            Some(crate::ss_cmd::policy_line(a.allow_logits)),
        ),
        #[cfg(feature = "tfhe")]
        (Family::Tfhe, _) => crate::she_cmd::describe(a, s),
        _ if s.gru().is_some() => (
            format!(
                "model {model}, variant {}, {} steps",
                a.variant.name(),
                server.steps()
            ),
            None,
        ),
        (family, _) => (format!("model {model}, family {family}"), None),
    }
}

pub fn serve(a: ServeArgs) -> Result<(), Error> {
    let opts = ServerOptions {
        variant: a.variant,
        plan: PlanOptions { family: a.family },
        nonlinear: a.nonlinear,
        ..ServerOptions::default()
    };
    let mut server = Server::load_with(&a.model, &opts)?;
    let budget = match server.session().family() {
        #[cfg(feature = "tfhe")]
        Family::Tfhe => crate::she_cmd::SESSION_BYTES,
        _ => SESSION_BUDGET_BYTES,
    };
    let cfg = serve_config(&a, budget)?;
    let security = cfg.security.clone();
    let listener = TcpListener::bind((a.host.as_str(), a.port))?;
    let addr = listener.local_addr()?;
    let stats = Arc::new(ServerStats::default());
    let health = match a.health_port {
        Some(p) => {
            let l = TcpListener::bind((a.host.as_str(), p))?;
            let h = l.local_addr()?;
            serve_health(l, stats.clone())?;
            format!(", health on {h}")
        }
        None => String::new(),
    };
    let channel = match &security {
        ServerSecurity::Noise(id) => format!("Noise NK, key {}", id.public_hex()),
        ServerSecurity::InsecurePlaintext => "INSECURE PLAINTEXT (benchmarks only)".into(),
    };
    let (runs, family_line) = describe(&a, &server);
    println!("listening on {addr} ({runs})");
    warn_saturating_weights(&a.model);
    // The settings go to the log (stderr): a supervisor may stop reading stdout after the
    // address line.
    eprintln!(
        "max sessions {} ({}), queue {}, session deadline {} s, idle {} s, logits {}, \
         channel {channel}{health}",
        cfg.max_sessions,
        if a.max_sessions.is_some() {
            "set".to_string()
        } else {
            format!(
                "default: 2 per core, within half the available memory at {} MB a session",
                budget >> 20
            )
        },
        cfg.queue,
        a.session_timeout,
        a.timeout,
        if a.allow_logits { "allowed" } else { "refused" },
    );
    if let Some(line) = family_line {
        eprintln!("{line}");
    }
    std::io::stdout().flush()?;
    server.set_progress(Arc::new(|id, peer, line| {
        eprintln!("session {id} ({peer}): {line}")
    }));
    let log: SessionLog = Arc::new(log_end);
    let policy = ServerPolicy {
        allow_logits: a.allow_logits,
    };
    server.serve(&listener, &cfg, policy, &stats, log)?;
    Ok(())
}

#[derive(Args, Debug)]
pub struct ExportInfoArgs {
    /// Full model directory.
    #[arg(long)]
    pub model: PathBuf,
    /// Output directory: model.json, vocab.json, embedding.safetensors and server.pub (all
    /// public).
    #[arg(long)]
    pub out: PathBuf,
    /// The server's private key whose public half clients pin (made there if absent; default:
    /// server.key in the model directory, as `serve` uses).
    #[arg(long)]
    pub key: Option<PathBuf>,
}

pub fn export_info(a: ExportInfoArgs) -> Result<(), Error> {
    let key = a
        .key
        .clone()
        .unwrap_or_else(|| a.model.join(PRIVATE_KEY_FILE));
    #[cfg(feature = "tfhe")]
    if secinfer_nn::runtime::she::is_she_model(&a.model) {
        secinfer_nn::runtime::she::export_info(&a.model, &a.out, &key)?;
        println!(
            "wrote {} and {} to {}",
            secinfer_nn::runtime::she::INFO_FILE,
            secinfer_net::PUBLIC_KEY_FILE,
            a.out.display()
        );
        return Ok(());
    }
    secinfer_nn::info::export_info_with_key(&a.model, &a.out, &key)?;
    println!(
        "wrote model.json, vocabulary, embedding.safetensors and server.pub to {}",
        a.out.display()
    );
    Ok(())
}

/// Names, on the log, every weight tensor with values beyond the model's main format: they are
/// clamped to its bounds, which changes the model the operator meant to serve.
fn warn_saturating_weights(dir: &std::path::Path) {
    // SHE's networks have their own integer format and no `Model`; nothing to check there.
    let Ok(m) = secinfer_nn::Model::load(dir) else {
        return;
    };
    let main = m.config.fixed_point.main;
    let sat = m.tensors.saturating(main);
    if !sat.is_empty() {
        let list: Vec<String> = sat.iter().map(|(n, k)| format!("{n} ({k})")).collect();
        eprintln!(
            "warning: weights beyond the main format ({}, {}) are clamped to its bounds: {}",
            main.bits,
            main.scale,
            list.join(", ")
        );
    }
}
