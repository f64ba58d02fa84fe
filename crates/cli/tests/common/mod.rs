//! Shared by the cli's two-process tests: the repository root, and a `secinfer serve` child
//! that is killed when dropped, with its address and (when asked) its collected log.
#![allow(dead_code, reason = "each test file uses a subset")]
#![allow(clippy::unwrap_used, reason = "tests: a panic is the failure report")]
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread::JoinHandle;

pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A running server process.
pub struct Served {
    child: Child,
    /// The address from its first stdout line (`listening on ADDR ...`).
    pub addr: String,
    /// That whole line.
    pub line: String,
    log: Option<JoinHandle<Vec<String>>>,
}

impl Served {
    /// Starts `cmd` (a `secinfer serve ... --port 0` command). With `collect_log` its stderr
    /// lines are kept for [`Served::stop`]; otherwise they are discarded.
    pub fn start(mut cmd: Command, collect_log: bool) -> Served {
        let err = if collect_log {
            Stdio::piped()
        } else {
            Stdio::null()
        };
        let mut child = cmd.stdout(Stdio::piped()).stderr(err).spawn().unwrap();
        let log = child.stderr.take().map(|err| {
            std::thread::spawn(move || {
                BufReader::new(err)
                    .lines()
                    .map_while(Result::ok)
                    .collect::<Vec<String>>()
            })
        });
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let addr = line.split_whitespace().nth(2).unwrap().to_string();
        Served {
            child,
            addr,
            line,
            log,
        }
    }

    /// Stops the server and returns its log lines (empty unless collected).
    pub fn stop(mut self) -> Vec<String> {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.log
            .take()
            .map(|h| h.join().unwrap())
            .unwrap_or_default()
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The stdout of a client process that must have succeeded (else the failure shows both
/// streams).
pub fn stdout_of_success(out: &std::process::Output) -> String {
    let so = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{so}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    so
}

/// `secinfer serve --port 0` with `args`.
pub fn serve_command(args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_secinfer"));
    c.args(["serve", "--port", "0"]).args(args);
    c
}

/// A scratch directory named for `tag` and this process, and the model info `export-info`
/// writes into it for `model` with the server's key at `<scratch>/server.key`: returns
/// (scratch, key, info).
pub fn export_info(tag: &str, model: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let scratch = std::env::temp_dir().join(format!("secinfer-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).unwrap();
    let key = scratch.join("server.key");
    let info = scratch.join("info");
    let st = Command::new(env!("CARGO_BIN_EXE_secinfer"))
        .args(["export-info", "--model"])
        .arg(model)
        .arg("--out")
        .arg(&info)
        .arg("--key")
        .arg(&key)
        .output()
        .unwrap();
    assert!(
        st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );
    (scratch, key, info)
}
