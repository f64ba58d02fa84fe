//! The client/server runtime over TCP, shared by the `secinfer` CLI and the Python bindings:
//! [`Server`] holds a prepared model and serves sessions through secinfer-net's served path
//! (a bounded worker pool and queue, deadlines, the Noise channel), catching every session's
//! error and panic so one client can never stop the server; [`Client`] holds only the public
//! model info (with the server's pinned key) and runs sessions against a server.
use crate::error::{NnError, Result};
use crate::info::ModelInfo;
use crate::model::{Model, Vocab};
use crate::secure::{
    client_session_garbling, fp_for_variant, server_session_with, ClientModel, ClientOptions,
    GruOutcome, OtFiller, Scheme, ServerModel, ServerPolicy, SessionReport, Variant,
    DEFAULT_GARBLING,
};
use crate::{check_tokens, QuantizedModel};
use secinfer_net::{
    connect_session, serve_sessions, Admitted, ClientConfig, PeerKey, ServeConfig, ServerStats,
    SessionHandler, TcpChannel,
};
use std::net::TcpListener;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::sync::Arc;

fn net(e: secinfer_net::NetError) -> NnError {
    NnError::Net(e.to_string())
}

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
    /// Refused before it started (busy, out of descriptors); the id is 0.
    Refused(String),
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
        let q = QuantizedModel::new(&m, fp);
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
        serve_sessions(listener, cfg, stats, &h).map_err(net)
    }
}

struct Handler {
    model: Arc<ServerModel>,
    policy: ServerPolicy,
    log: SessionLog,
}

impl SessionHandler for Handler {
    fn session(&self, who: &Admitted, ch: secinfer_net::Result<TcpChannel>) {
        let r = catch_unwind(AssertUnwindSafe(|| -> Result<SessionReport> {
            let mut ch = ch.map_err(net)?;
            server_session_with(&mut ch, &self.model, self.policy)
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
    model: ClientModel,
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
        let steps = steps_of(&info.config)?;
        let model = ClientModel::new(info.config.clone(), &info.embed, variant, steps)?;
        Ok(Client {
            model,
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
        check_tokens(tokens, self.model.config.arch.vocab)?;
        let cfg = self.net.as_ref().ok_or_else(|| {
            NnError::Input(format!(
                "the model info has no {} (the server's key to pin): run export-info again, \
                 or choose insecure plaintext",
                secinfer_net::PUBLIC_KEY_FILE
            ))
        })?;
        let mut ch = connect_session(server, cfg).map_err(net)?;
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
