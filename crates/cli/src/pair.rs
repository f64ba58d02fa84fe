//! Runs a benchmark's two parties: two threads over an in-memory or loopback-TCP pair (shaped by
//! a profile), or — with `--net tcp` and no profile — two processes over loopback TCP.
//!
//! The two-process mode re-executes this binary with the same arguments and the environment
//! variable [`PEER_ENV`] naming the address to connect to; the child runs only the server closure,
//! sends back its output and cost (after metering stopped, so the report is not counted), and exits.
use crate::error::Error;
use clap::Args;
use secinfer_net::{
    run_two_party, Channel, Cost, DynChannel, NetError, Profile, TcpChannel, TcpOptions, Transport,
};
use serde::{de::DeserializeOwned, Serialize};
use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Environment variable that turns a re-executed bench into its server half.
pub const PEER_ENV: &str = "SECINFER_BENCH_PEER";

/// Network options shared by the two-party benches.
#[derive(Args, Clone, Debug)]
pub struct NetArgs {
    /// Transport: `mem` (in-process queues) or `tcp` (loopback TCP; two processes unless a
    /// profile is set, in which case two threads, since shaping needs a shared clock).
    #[arg(long, default_value = "mem", value_parser = parse_transport)]
    pub net: Transport,
    /// Network profile imposed in-process: `none`, `lan` (0.3 ms RTT, 3 Gbit/s) or `wan`
    /// (40 ms RTT, 400 Mbit/s).
    #[arg(long, default_value = "none", value_parser = parse_profile)]
    pub profile: Profile,
}

fn parse_transport(s: &str) -> Result<Transport, String> {
    s.parse()
}
fn parse_profile(s: &str) -> Result<Profile, String> {
    s.parse()
}

impl NetArgs {
    pub fn net_name(&self) -> &'static str {
        match self.net {
            Transport::Mem => "mem",
            Transport::Tcp => "tcp",
        }
    }
    /// Whether this run uses two processes.
    pub fn two_process(&self) -> bool {
        self.net == Transport::Tcp && self.profile.is_none()
    }
}

/// Both parties' outputs and costs.
pub struct PairOutcome<A, B> {
    pub client: A,
    pub server: B,
    pub client_cost: Cost,
    pub server_cost: Cost,
    pub wall_s: f64,
}

#[derive(Serialize, serde::Deserialize)]
struct PeerReport<B> {
    output: B,
    cost: Cost,
}

/// Runs `client` here and `server` in a thread or peer process, per `net`.
pub fn run_pair<A, B, FA, FB>(
    net: &NetArgs,
    client: FA,
    server: FB,
) -> Result<PairOutcome<A, B>, Error>
where
    A: Send,
    B: Send + Serialize + DeserializeOwned,
    FA: FnOnce(&mut DynChannel) -> Result<A, Error> + Send,
    FB: FnOnce(&mut DynChannel) -> Result<B, Error> + Send,
{
    if let Ok(addr) = std::env::var(PEER_ENV) {
        serve_as_peer(&addr, server);
    }
    if !net.two_process() {
        let run = run_two_party(net.net, net.profile, client, server)?;
        // When one party fails, the other usually sees only the closed channel: report the
        // failing party's own error.
        let (client, server) = match (run.client.output, run.server.output) {
            (Err(c), Err(s)) if c.is_peer_closed() => return Err(s),
            (c, s) => (c?, s?),
        };
        return Ok(PairOutcome {
            client,
            server,
            client_cost: run.client.cost,
            server_cost: run.server.cost,
            wall_s: run.wall_s,
        });
    }
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    let exe = std::env::current_exe()?;
    let mut child = Command::new(exe)
        .args(std::env::args_os().skip(1))
        .env(PEER_ENV, addr.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()?;
    let opts = TcpOptions::default();
    let accepted = accept_with_deadline(&listener, Duration::from_secs(60), &mut child);
    let mut ch: DynChannel = Box::new(TcpChannel::new(accepted?, &opts)?);
    let start = Instant::now();
    let client_out = client(&mut ch);
    ch.flush()?;
    let wall_s = start.elapsed().as_secs_f64();
    let client_cost = ch.cost();
    let client_out = client_out?;
    let report_bytes = ch.recv_frame()?;
    let report: PeerReport<B> = serde_json::from_slice(&report_bytes)
        .map_err(|e| NetError::malformed(format!("peer report: {e}")))?;
    let status = child.wait()?;
    if !status.success() {
        return Err(Error::msg(format!("peer process exited with {status}")));
    }
    Ok(PairOutcome {
        client: client_out,
        server: report.output,
        client_cost,
        server_cost: report.cost,
        wall_s,
    })
}

fn accept_with_deadline(
    listener: &TcpListener,
    wait: Duration,
    child: &mut std::process::Child,
) -> Result<std::net::TcpStream, Error> {
    listener.set_nonblocking(true)?;
    let deadline = Instant::now() + wait;
    loop {
        match listener.accept() {
            Ok((s, _)) => {
                s.set_nonblocking(false)?;
                return Ok(s);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if let Some(st) = child.try_wait()? {
                    return Err(Error::msg(format!("peer process exited early with {st}")));
                }
                if Instant::now() > deadline {
                    let _ = child.kill();
                    return Err(Error::msg("peer process did not connect within 60 s"));
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// The child side of a two-process run: never returns.
fn serve_as_peer<B, FB>(addr: &str, server: FB) -> !
where
    B: Serialize,
    FB: FnOnce(&mut DynChannel) -> Result<B, Error>,
{
    let code = match peer_main(addr, server) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("secinfer bench peer: {e}");
            1
        }
    };
    std::process::exit(code)
}

fn peer_main<B, FB>(addr: &str, server: FB) -> Result<(), Error>
where
    B: Serialize,
    FB: FnOnce(&mut DynChannel) -> Result<B, Error>,
{
    let mut ch: DynChannel = Box::new(TcpChannel::connect(
        addr,
        Duration::from_secs(30),
        &TcpOptions::default(),
    )?);
    let out = server(&mut ch)?;
    ch.flush()?;
    let cost = ch.cost();
    let report = serde_json::to_vec(&PeerReport { output: out, cost })
        .map_err(|e| Error::msg(format!("serialising peer report: {e}")))?;
    ch.send_frame(&report)?;
    ch.flush()?;
    Ok(())
}
