//! `secinfer serve`: the model owner's side. One TCP connection per client session, one thread
//! per session; every error and panic of a session is caught, logged to stderr, and the server
//! keeps accepting. `secinfer export-info` writes the public part a client needs.
use crate::error::Error;
use clap::Args;
use secinfer_net::{TcpChannel, TcpOptions};
use secinfer_nn::secure::{fp_for_variant, server_session, ServerModel, Variant};
use secinfer_nn::{Model, QuantizedModel};
use std::io::Write;
use std::net::TcpListener;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

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
    /// baseline (tanh, 20-bit), cg1 (ReLU, 20-bit), cg2 (ReLU, 8-bit activations).
    #[arg(long, default_value = "cg2")]
    pub variant: Variant,
    /// Seconds a session may wait for its client before it is dropped.
    #[arg(long, default_value_t = 60)]
    pub timeout: u64,
}

pub fn serve(a: ServeArgs) -> Result<(), Error> {
    let m = Model::load(&a.model)?;
    let fp = fp_for_variant(&m.config, a.variant)?;
    let steps = m.config.vocab.as_ref().map(|v| v.max_len).ok_or_else(|| Error::msg("the model has no vocab.max_len (sequence length)"))?;
    let q = QuantizedModel::new(&m, fp);
    let sm = Arc::new(ServerModel::new(q, a.variant, steps)?);
    let listener = TcpListener::bind((a.host.as_str(), a.port))?;
    let addr = listener.local_addr()?;
    println!("listening on {addr} (model {}, variant {}, {steps} steps)", a.model.display(), a.variant.name());
    std::io::stdout().flush()?;
    let opts = TcpOptions { read_timeout: Some(Duration::from_secs(a.timeout.max(1))), ..TcpOptions::default() };
    let counter = Arc::new(AtomicU64::new(0));
    for stream in listener.incoming() {
        let stream = match stream {
            Ok(s) => s,
            Err(e) => {
                eprintln!("serve: accept failed: {e}");
                continue;
            }
        };
        let id = counter.fetch_add(1, Ordering::Relaxed) + 1;
        let peer = stream.peer_addr().map(|p| p.to_string()).unwrap_or_else(|_| "?".into());
        let sm = sm.clone();
        let opts = opts.clone();
        let spawned = std::thread::Builder::new().name(format!("session-{id}")).spawn(move || {
            let r = catch_unwind(AssertUnwindSafe(|| -> Result<_, Error> {
                let mut ch = TcpChannel::new(stream, &opts)?;
                Ok(server_session(&mut ch, &sm)?)
            }));
            match r {
                Ok(Ok(rep)) => {
                    let c = &rep.cost;
                    eprintln!(
                        "session {id} ({peer}): done: {:.3} s, {:.2} MB (GC {:.2} MB, HE {:.2} MB)",
                        c.setup.time_s + c.offline.time_s + c.online.time_s,
                        (c.setup.bytes() + c.offline.bytes() + c.online.bytes()) as f64 / 1e6,
                        rep.gc_bytes as f64 / 1e6,
                        rep.he_bytes as f64 / 1e6
                    );
                }
                Ok(Err(e)) => eprintln!("session {id} ({peer}): failed: {e}"),
                Err(_) => eprintln!("session {id} ({peer}): panicked (caught; server continues)"),
            }
        });
        if let Err(e) = spawned {
            eprintln!("serve: cannot start a session thread: {e}");
        }
    }
    Ok(())
}

#[derive(Args, Debug)]
pub struct ExportInfoArgs {
    /// Full model directory.
    #[arg(long)]
    pub model: PathBuf,
    /// Output directory: model.json, vocab.json, embedding.safetensors (all public).
    #[arg(long)]
    pub out: PathBuf,
}

pub fn export_info(a: ExportInfoArgs) -> Result<(), Error> {
    secinfer_nn::info::export_info(&a.model, &a.out)?;
    println!("wrote model.json, vocabulary and embedding.safetensors to {}", a.out.display());
    Ok(())
}
