//! `secinfer serve` / `infer` / `export-info` for SHE models (a directory with `she.json`): the
//! PBS path of secinfer-tfhe on the served path (admission control, deadlines, the Noise
//! channel). The client makes its keys, uploads the server key once per session, and for each
//! sample sends encrypted input digits and decrypts the encrypted output the server returns.
use std::io::Write;
use std::net::TcpListener;
use std::path::Path;
use std::time::Duration;

use crate::error::Error;
use crate::model_cmd::{sample_lines, InferArgs};
use crate::serve::{serve_config, ServeArgs};
use secinfer_net::{
    connect_session, parse_key_hex, serve_sessions, Admitted, ClientConfig, Identity, NetError,
    PeerKey, ServerStats, SessionHandler, TcpChannel, PUBLIC_KEY_FILE,
};
use secinfer_tfhe::session::{client_session, serve_session};
use secinfer_tfhe::{cost, model, PbsInfo, PbsNetwork};

/// The public description a client reads (written by `export-info`).
pub const INFO_FILE: &str = "she-info.json";
/// Memory of one session: the expanded server key (≈ 120 MB) and the ciphertexts.
const SESSION_BYTES: u64 = 512 << 20;

/// True when `dir` holds a SHE model.
pub fn is_she_model(dir: &Path) -> bool {
    dir.join("she.json").is_file()
}

/// True when `dir` holds a SHE model's public info.
pub fn is_she_info(dir: &Path) -> bool {
    dir.join(INFO_FILE).is_file()
}

fn load_pbs(dir: &Path) -> Result<PbsNetwork, Error> {
    let (net, _) = model::load(dir)?;
    Ok(PbsNetwork::new(&net)?)
}

struct Handler {
    pbs: PbsNetwork,
}

impl SessionHandler for Handler {
    fn session(&self, who: &Admitted, ch: Result<TcpChannel, NetError>) {
        let (id, peer) = (who.id, who.peer.as_str());
        let progress = |k: u32, done: u64, total: u64| {
            eprintln!("session {id} ({peer}): sample {k}: {done} of {total} bootstraps");
        };
        let r = ch
            .map_err(secinfer_tfhe::Error::from)
            .and_then(|mut ch| serve_session(&mut ch, &self.pbs, &progress));
        match r {
            Ok(r) => eprintln!(
                "session {id} ({peer}): done: server key {:.1} MB expanded in {:.2} s, {} \
                 samples in {:.2} s ({} bootstraps)",
                r.key_bytes as f64 / 1e6,
                r.expand_s,
                r.samples,
                r.eval_s,
                r.pbs
            ),
            Err(e) => eprintln!("session {id} ({peer}): failed: {}", Error::from(e)),
        }
    }
    fn refused(&self, peer: &str, reason: &str) {
        eprintln!("connection from {peer}: refused busy: {reason}");
    }
}

pub fn serve(a: ServeArgs) -> Result<(), Error> {
    let pbs = load_pbs(&a.model)?;
    let cfg = serve_config(&a, SESSION_BYTES)?;
    let listener = TcpListener::bind((a.host.as_str(), a.port))?;
    let count = pbs.count();
    println!(
        "listening on {} (SHE model {}, PBS path, {} bootstraps a sample)",
        listener.local_addr()?,
        a.model.display(),
        count.pbs
    );
    eprintln!(
        "max sessions {}, queue {}, session deadline {} s (an evaluation must fit in it)",
        cfg.max_sessions, cfg.queue, a.session_timeout
    );
    std::io::stdout().flush()?;
    let stats = ServerStats::default();
    serve_sessions(&listener, &cfg, &stats, &Handler { pbs })?;
    Ok(())
}

/// Writes she-info.json and server.pub (both public) to `out`.
pub fn export_info(model_dir: &Path, out: &Path, key: &Path) -> Result<(), Error> {
    let pbs = load_pbs(model_dir)?;
    std::fs::create_dir_all(out)?;
    let text = serde_json::to_string_pretty(pbs.info())?;
    std::fs::write(out.join(INFO_FILE), text)?;
    let id = Identity::load_or_create(key)?;
    std::fs::write(out.join(PUBLIC_KEY_FILE), id.public_hex() + "\n")?;
    println!(
        "wrote {INFO_FILE} and {PUBLIC_KEY_FILE} to {}",
        out.display()
    );
    Ok(())
}

/// The client: `--server`, `--model-info DIR` (she-info.json, server.pub), `--samples FILE`
/// (JSON lines `{"input": [integers]}`).
pub fn infer(a: &InferArgs) -> Result<(), Error> {
    const MAX_INFO_BYTES: u64 = 1 << 16;
    let server = a
        .server
        .as_deref()
        .ok_or_else(|| Error::msg("pass --server HOST:PORT"))?;
    let info_dir = a
        .model_info
        .as_ref()
        .ok_or_else(|| Error::msg("pass --model-info DIR (see secinfer export-info)"))?;
    let bytes = read_capped(&info_dir.join(INFO_FILE), MAX_INFO_BYTES)?;
    let info: PbsInfo = serde_json::from_slice(&bytes)?;
    info.validate()?;
    let key_text = String::from_utf8_lossy(&read_capped(&info_dir.join(PUBLIC_KEY_FILE), 256)?)
        .trim()
        .to_string();
    let key = parse_key_hex(&key_text)
        .ok_or_else(|| Error::msg(format!("{PUBLIC_KEY_FILE}: not a 32-byte hex key")))?;
    let file = a
        .samples
        .as_ref()
        .ok_or_else(|| Error::msg("pass --samples FILE.jsonl ({\"input\": [...]} lines)"))?;
    let mut xs = Vec::new();
    for (what, _, j) in sample_lines(file, a.limit)? {
        let x = j["input"]
            .as_array()
            .ok_or_else(|| Error::msg(format!("{what} has no \"input\" array")))?
            .iter()
            .map(|v| {
                v.as_i64()
                    .ok_or_else(|| Error::msg(format!("{what}: a non-integer in input")))
            })
            .collect::<Result<Vec<i64>, Error>>()?;
        xs.push(x);
    }
    let mut cfg = ClientConfig::new(PeerKey::Pinned(key));
    // The server evaluates without a word for as long as a sample takes.
    cfg.tcp.read_timeout = Some(Duration::from_secs(a.peer_timeout.max(1)));
    cfg.tcp.session_timeout = None;
    let mut ch = connect_session(server, &cfg)?;
    let r = client_session(&mut ch, &info, &xs)?;
    println!(
        "keys: generated in {:.2} s; server key {:.1} MB uploaded and expanded in {:.2} s \
         (server expansion {:.2} s)",
        r.keygen_s,
        r.key_bytes as f64 / 1e6,
        r.key_upload_s,
        r.server_expand_s
    );
    for (k, s) in r.samples.iter().enumerate() {
        println!(
            "sample {}: class {}; encrypt {:.3} s, upload {} B, server evaluation {:.2} s, \
             upload+evaluation+download {:.2} s, download {} B, decrypt {:.3} s",
            k + 1,
            argmax(&s.output),
            s.encrypt_s,
            s.upload_bytes,
            s.server_eval_s,
            s.wait_s,
            s.download_bytes,
            s.decrypt_s
        );
    }
    Ok(())
}

fn read_capped(path: &Path, cap: u64) -> Result<Vec<u8>, Error> {
    let f =
        std::fs::File::open(path).map_err(|e| Error::msg(format!("{}: {e}", path.display())))?;
    let mut buf = Vec::new();
    std::io::Read::read_to_end(&mut std::io::Read::take(f, cap + 1), &mut buf)?;
    if buf.len() as u64 > cap {
        return Err(Error::msg(format!(
            "{}: larger than {cap} bytes",
            path.display()
        )));
    }
    Ok(buf)
}

fn argmax(v: &[i64]) -> usize {
    let mut best = 0;
    for (i, x) in v.iter().enumerate() {
        if *x > v[best] {
            best = i;
        }
    }
    best
}

/// `secinfer inspect DIR [--plan]` for a SHE model: layers, formats, and with `--plan` the
/// family (tfhe) and the evaluator the cost model picks, with its figures.
pub fn inspect(dir: &Path, plan: bool) -> Result<(), Error> {
    let (net, _) = model::load(dir)?;
    let f = net.input();
    println!("model      {} (SHE, she.json)", dir.display());
    println!(
        "input      {}×{}×{} values, {} bits {}",
        f.shape.c,
        f.shape.h,
        f.shape.w,
        f.bits,
        if f.signed { "signed" } else { "unsigned" }
    );
    println!("layers     (index, type, output shape c×h×w)");
    for (i, (l, s)) in net.layers().iter().zip(net.shapes()).enumerate() {
        println!("  {i:<3} {:<10} {}×{}×{}", l.kind(), s.c, s.h, s.w);
    }
    if plan {
        let gates = net.count();
        let family = secinfer_nn::plan::Family::Tfhe.name();
        println!("plan       (layers, family, protocol, why)");
        match PbsNetwork::new(&net) {
            Ok(p) => {
                let c = p.count();
                let (g, l) = cost::predict(&gates, &c);
                let pick = match cost::choose(&gates, &c) {
                    cost::Path::Pbs => "pbs",
                    cost::Path::Gates => "gates",
                };
                println!(
                    "  all layers  {family}  {pick}  ({} lookups ≈ {l:.0} s on one core against \
                     {} gate bootstraps ≈ {g:.0} s, recorded per-operation costs)",
                    c.pbs,
                    gates.pbs()
                );
            }
            Err(e) => println!(
                "  all layers  {family}  gates  ({} gate bootstraps; not on the PBS path: {e})",
                gates.pbs()
            ),
        }
    }
    Ok(())
}
