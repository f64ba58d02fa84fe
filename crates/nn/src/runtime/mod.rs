//! The runtime: the session driver ([`driver`]) and its faces over TCP, shared by the
//! `secinfer` CLI and the Python bindings, for every family: [`Server`] holds a prepared model
//! and serves sessions through secinfer-net's served path (a bounded worker pool and queue,
//! deadlines, the Noise channel), catching every session's error and panic so one client can
//! never stop the server; [`Client`] holds only the public model info (with the server's
//! pinned key) and runs sessions against a server.
pub mod driver;
pub mod report;
pub mod she;

pub use driver::{ClientInput, ClientSession, Outcome, RunOptions, ServerOptions, ServerSession};
pub use report::{Detail, Served, ServedDetail};

use crate::check_tokens;
use crate::error::{NnError, Result};
use crate::info::ModelInfo;
use crate::layers::gru::{
    ClientModel, ClientOptions, GruOutcome, OtFiller, Scheme, ServerPolicy, Variant,
    DEFAULT_GARBLING,
};
use crate::model::Vocab;
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
    /// Served; its `Display` is the text of the "done" line.
    Done(Box<Served>),
    Failed(NnError),
    Panicked,
    /// Refused before it started (busy, out of descriptors); the id is 0.
    Refused(String),
}

/// Called once per ended session with its id, the peer's address and how it ended.
pub type SessionLog = Arc<dyn Fn(u64, &str, SessionEnd) + Send + Sync>;

/// Called with a session's id, its peer's address and a line on how a long evaluation
/// advances (SHE's bootstraps).
pub type ProgressLog = Arc<dyn Fn(u64, &str, &str) + Send + Sync>;

/// The model owner's side.
pub struct Server {
    model: Arc<ServerSession>,
    variant: Variant,
    progress: Option<ProgressLog>,
}

impl Server {
    /// Loads, plans and prepares `model_dir` (for a GRU model: `variant`'s formats, the weight
    /// plaintexts and the step circuit).
    pub fn load(model_dir: impl AsRef<Path>, variant: Variant) -> Result<Server> {
        let opts = ServerOptions {
            variant,
            ..ServerOptions::default()
        };
        Server::load_with(model_dir, &opts)
    }

    /// [`Server::load`] under `opts` (the family, CHOCO's packing, the matvec kernel): a model
    /// graph, or a SHE network in a build with the tfhe feature.
    pub fn load_with(model_dir: impl AsRef<Path>, opts: &ServerOptions) -> Result<Server> {
        Ok(Server {
            model: Arc::new(ServerSession::load(model_dir.as_ref(), opts)?),
            variant: opts.variant,
            progress: None,
        })
    }

    /// Where the sessions' progress lines go (none by default).
    pub fn set_progress(&mut self, log: ProgressLog) {
        self.progress = Some(log);
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
            progress: self.progress.clone(),
        };
        Ok(serve_sessions(listener, cfg, stats, &h)?)
    }
}

struct Handler {
    model: Arc<ServerSession>,
    policy: ServerPolicy,
    log: SessionLog,
    progress: Option<ProgressLog>,
}

impl SessionHandler for Handler {
    fn session(&self, who: &Admitted, ch: secinfer_net::Result<TcpChannel>) {
        let progress = |line: &str| {
            if let Some(p) = &self.progress {
                p(who.id, &who.peer, line);
            }
        };
        let r = catch_unwind(AssertUnwindSafe(|| -> Result<Served> {
            let mut ch = ch?;
            self.model.serve_one(&mut ch, self.policy, &progress)
        }));
        let end = match r {
            Ok(Ok(rep)) => SessionEnd::Done(Box::new(rep)),
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
        let opts = ServerOptions {
            variant,
            ..ServerOptions::default()
        };
        Client::load_with(info_dir, &opts)
    }

    /// [`Client::load`] under `opts` (the family and CHOCO's packing must be the server's): a
    /// model graph's info, or a SHE network's (`she-info.json`) with the tfhe feature.
    pub fn load_with(info_dir: impl AsRef<Path>, opts: &ServerOptions) -> Result<Client> {
        let dir = info_dir.as_ref();
        if she::is_she_info(dir) {
            #[cfg(feature = "tfhe")]
            {
                let (info, key) = she::load_info(dir)?;
                return Ok(Client {
                    session: ClientSession::she(info),
                    vocab: None,
                    net: key.map(|k| ClientConfig::new(PeerKey::Pinned(k))),
                });
            }
            #[cfg(not(feature = "tfhe"))]
            return Err(she::unsupported(dir));
        }
        let info = ModelInfo::load(dir)?;
        Ok(Client {
            session: ClientSession::prepare(&info, opts)?,
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
        let mut ch = connect_session(server, self.pinned()?)?;
        self.session
            .run_images(&mut ch, xs, reveal_logits, progress)
    }

    /// Runs every input of `xs` (main-format integers; SHE's input digits) against `server`:
    /// in one session where the family sends its keys once (GALA's networks, SHE), otherwise
    /// one session per input. One outcome per input, in order.
    pub fn infer_inputs(
        &self,
        server: &str,
        xs: &[&[i64]],
        run: &RunOptions,
        progress: &mut dyn FnMut(&str, u64, u64),
    ) -> Result<Vec<Outcome>> {
        if self.session.batches_inputs() {
            let mut ch = connect_session(server, self.pinned()?)?;
            return self.session.run_many(&mut ch, xs, run, progress);
        }
        xs.iter()
            .map(|x| {
                let mut ch = connect_session(server, self.pinned()?)?;
                self.session
                    .run(&mut ch, ClientInput::Fixed(x), run, progress)
            })
            .collect()
    }

    /// How sessions connect, or the error that the info has no key to pin.
    fn pinned(&self) -> Result<&ClientConfig> {
        self.net.as_ref().ok_or_else(|| {
            NnError::Input(format!(
                "the model info has no {} (the server's key to pin): run export-info again, \
                 or choose insecure plaintext",
                secinfer_net::PUBLIC_KEY_FILE
            ))
        })
    }

    /// Connects to `server` with the pinned key and runs one session on `input`.
    fn run_on(
        &self,
        server: &str,
        input: ClientInput<'_>,
        run: &RunOptions,
        progress: &mut dyn FnMut(&str, u64, u64),
    ) -> Result<GruOutcome> {
        let mut ch = connect_session(server, self.pinned()?)?;
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
            ..RunOptions::default()
        };
        self.run_on(server, ClientInput::Tokens(tokens), &run, progress)
    }
}
