//! The runtime: the session driver ([`driver`]) and its faces over TCP, shared by the
//! `secinfer` CLI and the Python bindings: [`Server`] holds a prepared model and serves
//! sessions, one thread each, catching every session's error and panic so one client can never
//! stop the server; [`Client`] holds only the public model info and runs sessions against a
//! server.
pub mod driver;

pub use driver::{ClientInput, ClientSession, Outcome, RunOptions, ServerOptions, ServerSession};

use crate::check_tokens;
use crate::error::{NnError, Result};
use crate::info::ModelInfo;
use crate::layers::gru::{
    ClientModel, ClientOptions, GruOutcome, OtFiller, Scheme, SessionReport, Variant,
    DEFAULT_GARBLING,
};
use crate::model::{Model, Vocab};
use secinfer_net::{TcpChannel, TcpOptions};
use std::net::TcpListener;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// How one session ended, as the server logs it.
pub enum SessionEnd {
    Done(SessionReport),
    Failed(NnError),
    Panicked,
}

/// Called once per ended session with its id, the peer's address and how it ended.
pub type SessionLog = Arc<dyn Fn(u64, &str, SessionEnd) + Send + Sync>;

/// The model owner's side.
pub struct Server {
    model: Arc<ServerSession>,
    variant: Variant,
}

impl Server {
    /// Loads, plans and prepares `model_dir` (for a GRU model: `variant`'s formats, the weight
    /// plaintexts and the step circuit).
    pub fn load(model_dir: impl AsRef<Path>, variant: Variant) -> Result<Server> {
        let m = Model::load(model_dir)?;
        let opts = ServerOptions {
            variant,
            ..ServerOptions::default()
        };
        Ok(Server {
            model: Arc::new(ServerSession::prepare(&m, &opts)?),
            variant,
        })
    }

    /// The sequence length a GRU model runs (0 for other models).
    pub fn steps(&self) -> usize {
        self.model.gru().map_or(0, |m| m.steps)
    }
    pub fn variant(&self) -> Variant {
        self.variant
    }
    pub fn session(&self) -> &ServerSession {
        &self.model
    }

    /// Accepts connections on `listener`, one session thread each, until `max_sessions` sessions
    /// have been accepted (`None`: forever). `log(id, peer, end)` is called when a session ends.
    /// With `max_sessions` set, returns after those sessions have ended.
    pub fn serve(
        &self,
        listener: &TcpListener,
        timeout: Duration,
        max_sessions: Option<u64>,
        log: SessionLog,
    ) -> Result<()> {
        let opts = TcpOptions {
            read_timeout: Some(timeout.max(Duration::from_secs(1))),
            ..TcpOptions::default()
        };
        let counter = AtomicU64::new(0);
        let mut handles = Vec::new();
        for stream in listener.incoming() {
            let stream = match stream {
                Ok(s) => s,
                // A failed accept concerns that client only.
                Err(_) => continue,
            };
            let id = counter.fetch_add(1, Ordering::Relaxed) + 1;
            let peer = stream
                .peer_addr()
                .map(|p| p.to_string())
                .unwrap_or_else(|_| "?".into());
            let (model, opts, session_log) = (self.model.clone(), opts.clone(), log.clone());
            let spawned = std::thread::Builder::new()
                .name(format!("session-{id}"))
                .spawn(move || {
                    let r = catch_unwind(AssertUnwindSafe(|| -> Result<SessionReport> {
                        let mut ch = TcpChannel::new(stream, &opts).map_err(NnError::from)?;
                        model.run(&mut ch)
                    }));
                    let end = match r {
                        Ok(Ok(rep)) => SessionEnd::Done(rep),
                        Ok(Err(e)) => SessionEnd::Failed(e),
                        Err(_) => SessionEnd::Panicked,
                    };
                    session_log(id, &peer, end);
                });
            match spawned {
                Ok(h) => handles.push(h),
                Err(e) => log(
                    id,
                    "?",
                    SessionEnd::Failed(NnError::Io {
                        path: "session thread".into(),
                        source: e,
                    }),
                ),
            }
            if max_sessions.is_some_and(|m| id >= m) {
                break;
            }
            handles.retain(|h| !h.is_finished());
        }
        for h in handles {
            // A session thread never panics past catch_unwind; a join error is ignored.
            let _ = h.join();
        }
        Ok(())
    }
}

/// The client's side: public model info only (architecture, vocabulary, embedding table).
pub struct Client {
    session: ClientSession,
    vocab: Option<Vocab>,
}

impl Client {
    /// Loads the public info written by `secinfer export-info` (or a full model directory, whose
    /// weights file is then not read).
    pub fn load(info_dir: impl AsRef<Path>, variant: Variant) -> Result<Client> {
        let info = ModelInfo::load(info_dir)?;
        let opts = ServerOptions {
            variant,
            ..ServerOptions::default()
        };
        Ok(Client {
            session: ClientSession::prepare(&info, &opts)?,
            vocab: info.vocab,
        })
    }

    /// The CryptoGRU client model (formats, architecture).
    pub fn model(&self) -> Result<&ClientModel> {
        self.session
            .gru()
            .ok_or_else(|| NnError::Unsupported("not a GRU model".into()))
    }

    pub fn session(&self) -> &ClientSession {
        &self.session
    }

    pub fn vocab(&self) -> Option<&Vocab> {
        self.vocab.as_ref()
    }

    /// Token ids of `text` (words-v1, shaped to the model's length).
    pub fn encode(&self, text: &str) -> Result<Vec<u32>> {
        Ok(self
            .vocab
            .as_ref()
            .ok_or_else(|| NnError::Input("the model info has no vocabulary".into()))?
            .encode(text))
    }

    /// Runs one secure inference against `server` ("host:port") with the default OT filler
    /// and garbling scheme.
    pub fn infer(
        &self,
        server: &str,
        tokens: &[u32],
        opts: ClientOptions,
        progress: &mut dyn FnMut(&str, u64, u64),
    ) -> Result<GruOutcome> {
        self.infer_with(
            server,
            tokens,
            opts,
            OtFiller::default(),
            DEFAULT_GARBLING,
            progress,
        )
    }

    /// [`Client::infer`] with the client's choice of OT filler and AND-gate garbling scheme
    /// (both are agreed in the handshake; the server follows the client).
    pub fn infer_with(
        &self,
        server: &str,
        tokens: &[u32],
        opts: ClientOptions,
        filler: OtFiller,
        garbling: Scheme,
        progress: &mut dyn FnMut(&str, u64, u64),
    ) -> Result<GruOutcome> {
        check_tokens(tokens, self.model()?.arch.vocab)?;
        let mut ch = TcpChannel::connect(server, Duration::from_secs(10), &TcpOptions::default())
            .map_err(NnError::from)?;
        let run = RunOptions {
            protocol: opts,
            ot: filler,
            garbling,
        };
        let o = self
            .session
            .run(&mut ch, ClientInput::Tokens(tokens), &run, progress)?;
        Ok(GruOutcome {
            class: o.class,
            logits: o.logits,
            report: o.report,
        })
    }
}
