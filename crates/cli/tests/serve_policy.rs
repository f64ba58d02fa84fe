//! `secinfer serve`'s policies between real processes on loopback: logits are refused unless the
//! server allows them (and the log says what each session revealed), a client beyond the cap
//! reads the busy error, a plaintext client is refused by a Noise server, and a client pinning
//! another key cannot open a session, and a server out of file descriptors refuses with a reason
//! the client prints.
#![allow(clippy::unwrap_used, reason = "tests: a panic is the failure report")]
use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::Receiver;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

struct Server {
    child: Child,
    addr: String,
    log: Receiver<String>,
}
impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `serve` on a free port with `extra` flags; its stderr lines arrive on `log`.
fn serve(extra: &[&str]) -> Server {
    serve_with_fd_limit(None, extra)
}

/// [`serve`], with the server process's descriptor limit lowered to `fds` by the shell.
fn serve_with_fd_limit(fds: Option<u32>, extra: &[&str]) -> Server {
    let model = root().join("models/imdb-relu-gru");
    let mut cmd = match fds {
        None => Command::new(env!("CARGO_BIN_EXE_secinfer")),
        Some(n) => {
            let mut c = Command::new("sh");
            c.args(["-c", &format!("ulimit -n {n} && exec \"$0\" \"$@\"")])
                .arg(env!("CARGO_BIN_EXE_secinfer"));
            c
        }
    };
    let mut child = cmd
        .args(["serve", "--port", "0", "--model"])
        .arg(&model)
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line.split_whitespace().nth(2).unwrap().to_string();
    let (tx, log) = std::sync::mpsc::channel();
    let err = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for l in BufReader::new(err).lines().map_while(Result::ok) {
            let _ = tx.send(l);
        }
    });
    Server { child, addr, log }
}

fn infer(addr: &str, info: &PathBuf, extra: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_secinfer"))
        .args([
            "infer",
            "--server",
            addr,
            "--text",
            "a fine film",
            "--model-info",
        ])
        .arg(info)
        .args(extra)
        .output()
        .unwrap()
}

fn wait_for(log: &Receiver<String>, what: &str) -> String {
    loop {
        let l = log
            .recv_timeout(std::time::Duration::from_secs(60))
            .unwrap();
        if l.contains(what) {
            return l;
        }
    }
}

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn logits_are_refused_unless_allowed_and_the_log_says_what_was_revealed() {
    let info = root().join("models/imdb-relu-gru");
    let s = serve(&[]);
    let o = infer(&s.addr, &info, &["--reveal-logits"]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("does not reveal logits"),
        "{}",
        stderr(&o)
    );
    let o = infer(&s.addr, &info, &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(wait_for(&s.log, "done:").ends_with("revealed class"));
    drop(s);
    let s = serve(&["--allow-logits"]);
    let o = infer(&s.addr, &info, &["--reveal-logits"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("logits ["));
    assert!(wait_for(&s.log, "done:").ends_with("revealed class and logits"));
}

#[test]
fn a_client_beyond_the_cap_reads_the_busy_error() {
    let info = root().join("models/imdb-relu-gru");
    let s = serve(&[
        "--max-sessions",
        "1",
        "--queue",
        "0",
        "--handshake-timeout",
        "120",
    ]);
    // A peer that takes the only session and stays silent (held until the key exchange's
    // deadline, 120 s here).
    let mut holder = std::net::TcpStream::connect(&s.addr).unwrap();
    let mut g = [0u8; 9];
    holder.read_exact(&mut g).unwrap();
    let o = infer(&s.addr, &info, &[]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("busy, retry later"), "{}", stderr(&o));
    assert!(wait_for(&s.log, "refused busy").contains("1 sessions running"));
}

#[test]
fn plaintext_and_wrong_key_clients_cannot_open_a_session() {
    let dir = std::env::temp_dir().join(format!("secinfer-policy-{}", std::process::id()));
    let model = root().join("models/imdb-relu-gru");
    let key = dir.join("other.key");
    let out = Command::new(env!("CARGO_BIN_EXE_secinfer"))
        .args(["export-info", "--model"])
        .arg(&model)
        .arg("--out")
        .arg(dir.join("info"))
        .arg("--key")
        .arg(&key)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let s = serve(&[]);
    let o = infer(&s.addr, &dir.join("info"), &[]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("key exchange") || stderr(&o).contains("closed"));
    let o = infer(&s.addr, &model, &["--insecure-plaintext"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("security mismatch"), "{}", stderr(&o));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_server_out_of_descriptors_refuses_with_a_reason_the_client_prints() {
    let info = root().join("models/imdb-relu-gru");
    // 40 descriptors, and room for far more sessions than that in the cap and the queue, so
    // that silent peers exhaust the descriptors before the admission count refuses them.
    let s = serve_with_fd_limit(
        Some(40),
        &[
            "--max-sessions",
            "2",
            "--queue",
            "200",
            "--handshake-timeout",
            "120",
        ],
    );
    let held: Vec<std::net::TcpStream> = (0..60)
        .map(|_| std::net::TcpStream::connect(&s.addr).unwrap())
        .collect();
    // A server that cannot accept would leave the client waiting: 20 s bounds the failure.
    let o = infer(&s.addr, &info, &["--peer-timeout", "20"]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("out of file descriptors"),
        "{}",
        stderr(&o)
    );
    let line = wait_for(&s.log, "out of file descriptors");
    assert!(line.contains("refused"), "{line}");
    drop(held);
}
