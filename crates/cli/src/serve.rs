//! `secinfer serve`: the model owner's side. One TCP connection per client session, one thread
//! per session; every error and panic of a session is caught, logged to stderr, and the server
//! keeps accepting. `secinfer export-info` writes the public part a client needs.
use crate::error::Error;
use clap::Args;
use secinfer_nn::layers::gru::Variant;
use secinfer_nn::runtime::{Server, SessionEnd, SessionLog};
use std::io::Write;
use std::net::TcpListener;
use std::path::PathBuf;
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
    let server = Server::load(&a.model, a.variant)?;
    let listener = TcpListener::bind((a.host.as_str(), a.port))?;
    let addr = listener.local_addr()?;
    println!(
        "listening on {addr} (model {}, variant {}, {} steps)",
        a.model.display(),
        a.variant.name(),
        server.steps()
    );
    std::io::stdout().flush()?;
    let log: SessionLog = Arc::new(|id, peer, end| match end {
        SessionEnd::Done(rep) => {
            let c = &rep.cost;
            eprintln!(
                "session {id} ({peer}): done: {:.3} s, {:.2} MB (GC {:.2} MB, HE {:.2} MB)",
                c.setup.time_s + c.offline.time_s + c.online.time_s,
                (c.setup.bytes() + c.offline.bytes() + c.online.bytes()) as f64 / 1e6,
                rep.gc_bytes as f64 / 1e6,
                rep.he_bytes as f64 / 1e6
            );
        }
        SessionEnd::Failed(e) => eprintln!("session {id} ({peer}): failed: {e}"),
        SessionEnd::Panicked => {
            eprintln!("session {id} ({peer}): panicked (caught; server continues)")
        }
    });
    server.serve(&listener, Duration::from_secs(a.timeout), None, log)?;
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
    println!(
        "wrote model.json, vocabulary and embedding.safetensors to {}",
        a.out.display()
    );
    Ok(())
}
