//! The runtime: the session driver ([`driver`]) and its faces over TCP, shared by the
//! `secinfer` CLI and the Python bindings: [`Server`] holds a prepared model and serves
//! sessions through secinfer-net's served path (a bounded worker pool and queue, deadlines, the
//! Noise channel), catching every session's error and panic so one client can never stop the
//! server; [`Client`] holds only the public model info (with the server's pinned key) and runs
//! sessions against a server.
pub mod driver;

pub use driver::{ClientInput, ClientSession, Outcome, RunOptions, ServerOptions, ServerSession};

use crate::check_tokens;
use crate::error::{NnError, Result};
use crate::info::ModelInfo;
use crate::layers::gru::{
    ClientModel, ClientOptions, GruOutcome, OtFiller, Scheme, ServerPolicy, SessionReport, Variant,
    DEFAULT_GARBLING,
};
use crate::model::{Model, Vocab};
use secinfer_net::{
    connect_session, serve_sessions, Admitted, ClientConfig, PeerKey, ServeConfig, ServerStats,
    SessionHandler, TcpChannel,
};
use std::net::TcpListener;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::sync::Arc;

/// How one session ended, as the server logs it.
pub enum SessionEnd {
    Done(SessionReport),
    Failed(NnError),
    Panicked,
    /// Refused before it started (busy, out of descriptors); the id is 0.
    Refused(String),
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

    /// Serves sessions on `listener` under `cfg` (admission control, deadlines, channel
    /// security: [`secinfer_net::serve_sessions`]) and `policy`. `log(id, peer, end)` is called
    /// when a session ends or a connection is refused. Returns after `cfg.stop_after` sessions
    /// (forever if `None`).
    pub fn serve(
        &self,
        listener: &TcpListener,
        cfg: &ServeConfig,
        policy: ServerPolicy,
        stats: &ServerStats,
        log: SessionLog,
    ) -> Result<()> {
        let h = Handler {
            model: self.model.clone(),
            policy,
            log,
        };
        Ok(serve_sessions(listener, cfg, stats, &h)?)
    }
}

struct Handler {
    model: Arc<ServerSession>,
    policy: ServerPolicy,
    log: SessionLog,
}

impl SessionHandler for Handler {
    fn session(&self, who: &Admitted, ch: secinfer_net::Result<TcpChannel>) {
        let r = catch_unwind(AssertUnwindSafe(|| -> Result<SessionReport> {
            let mut ch = ch?;
            self.model.run(&mut ch, self.policy)
        }));
        let end = match r {
            Ok(Ok(rep)) => SessionEnd::Done(rep),
            Ok(Err(e)) => SessionEnd::Failed(e),
            Err(_) => SessionEnd::Panicked,
        };
        (self.log)(who.id, &who.peer, end);
    }
    fn refused(&self, peer: &str, reason: &str) {
        (self.log)(0, peer, SessionEnd::Refused(reason.to_string()));
    }
}

/// The client's side: public model info only (architecture, vocabulary, embedding table).
pub struct Client {
    session: ClientSession,
    vocab: Option<Vocab>,
    /// How sessions connect: the pinned key from the info's `server.pub`, or `None` when the
    /// info has none (then [`Client::set_net`] must choose).
    net: Option<ClientConfig>,
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
            net: info
                .server_key
                .map(|k| ClientConfig::new(PeerKey::Pinned(k))),
        })
    }

    /// Sets how sessions connect (pinned key or insecure plaintext, deadlines).
    pub fn set_net(&mut self, cfg: ClientConfig) {
        self.net = Some(cfg);
    }

    /// How sessions connect, if known.
    pub fn net(&self) -> Option<&ClientConfig> {
        self.net.as_ref()
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

    /// Runs one secure inference of a network that reads numbers (`hegc`: GALA's MLPs) on
    /// `x`, main-format integers (see [`crate::QuantizedGraph::quantize_input`]).
    pub fn infer_fixed(
        &self,
        server: &str,
        x: &[i64],
        reveal_logits: bool,
        progress: &mut dyn FnMut(&str, u64, u64),
    ) -> Result<GruOutcome> {
        let run = RunOptions {
            protocol: ClientOptions {
                reveal_logits,
                ..ClientOptions::default()
            },
            ..RunOptions::default()
        };
        self.run_on(server, ClientInput::Fixed(x), &run, progress)
    }

    /// Classifies every image of `xs` in one session with `server` (family `hegc`): the
    /// client's keys are sent once and serve every image.
    pub fn infer_fixed_images(
        &self,
        server: &str,
        xs: &[&[i64]],
        reveal_logits: bool,
        progress: &mut dyn FnMut(&str, u64, u64),
    ) -> Result<Vec<GruOutcome>> {
        let cfg = self.net.as_ref().ok_or_else(|| {
            NnError::Input(format!(
                "the model info has no {} (the server's key to pin): run export-info again",
                secinfer_net::PUBLIC_KEY_FILE
            ))
        })?;
        let mut ch = connect_session(server, cfg)?;
        self.session
            .run_images(&mut ch, xs, reveal_logits, progress)
    }

    /// Connects to `server` with the pinned key and runs one session on `input`.
    fn run_on(
        &self,
        server: &str,
        input: ClientInput<'_>,
        run: &RunOptions,
        progress: &mut dyn FnMut(&str, u64, u64),
    ) -> Result<GruOutcome> {
        let cfg = self.net.as_ref().ok_or_else(|| {
            NnError::Input(format!(
                "the model info has no {} (the server's key to pin): run export-info again, \
                 or choose insecure plaintext",
                secinfer_net::PUBLIC_KEY_FILE
            ))
        })?;
        let mut ch = connect_session(server, cfg)?;
        let o = self.session.run(&mut ch, input, run, progress)?;
        Ok(GruOutcome {
            class: o.class,
            top: o.top,
            logits: o.logits,
            log2_prob: o.log2_prob,
            report: o.report,
        })
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
        let run = RunOptions {
            protocol: opts,
            ot: filler,
            garbling,
        };
        self.run_on(server, ClientInput::Tokens(tokens), &run, progress)
    }
}
