//! The client/server runtime over TCP, shared by the `secinfer` CLI and the Python bindings:
//! [`Server`] holds a prepared model and serves sessions, one thread each, catching every
//! session's error and panic so one client can never stop the server; [`Client`] holds only the
//! public model info and runs sessions against a server.
use crate::error::{NnError, Result};
use crate::info::ModelInfo;
use crate::layers::gru::{
    client_session_garbling, fp_for_variant, server_session, ClientModel, ClientOptions,
    GruOutcome, OtFiller, Scheme, ServerModel, SessionReport, Variant, DEFAULT_GARBLING,
};
use crate::model::{Model, Vocab};
use crate::{check_tokens, QuantizedModel};
use secinfer_net::{TcpChannel, TcpOptions};
use std::net::TcpListener;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

fn steps_of(config: &crate::ModelConfig) -> Result<usize> {
    config.vocab.as_ref().map(|v| v.max_len).ok_or_else(|| {
        NnError::Input("model.json has no vocab.max_len (the sequence length)".into())
    })
}

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
    model: Arc<ServerModel>,
}

impl Server {
    /// Loads and prepares `model_dir` for `variant` (weight plaintexts, step circuit).
    pub fn load(model_dir: impl AsRef<Path>, variant: Variant) -> Result<Server> {
        let m = Model::load(model_dir)?;
        let fp = fp_for_variant(&m.config, variant)?;
        let steps = steps_of(&m.config)?;
        let q = QuantizedModel::new(&m, fp)?;
        Ok(Server {
            model: Arc::new(ServerModel::new(q, variant, steps)?),
        })
    }

    pub fn steps(&self) -> usize {
        self.model.steps
    }
    pub fn variant(&self) -> Variant {
        self.model.variant
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
                        server_session(&mut ch, &model)
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
    model: ClientModel,
    vocab: Option<Vocab>,
}

impl Client {
    /// Loads the public info written by `secinfer export-info` (or a full model directory, whose
    /// weights file is then not read).
    pub fn load(info_dir: impl AsRef<Path>, variant: Variant) -> Result<Client> {
        let info = ModelInfo::load(info_dir)?;
        let steps = steps_of(&info.config)?;
        let model = ClientModel::new(info.config.clone(), &info.embed, variant, steps)?;
        Ok(Client {
            model,
            vocab: info.vocab,
        })
    }

    pub fn model(&self) -> &ClientModel {
        &self.model
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
        check_tokens(tokens, self.model.arch.vocab)?;
        let mut ch = TcpChannel::connect(server, Duration::from_secs(10), &TcpOptions::default())
            .map_err(NnError::from)?;
        client_session_garbling(
            &mut ch,
            &self.model,
            tokens,
            opts,
            filler,
            garbling,
            progress,
        )
    }
}
