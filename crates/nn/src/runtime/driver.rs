//! The session driver: one path from a model to a secure session, for `serve`, `infer`,
//! `bench` and Python alike.
//!
//! `prepare` plans the model ([`Plan`]), refuses a plan with a layer no protocol computes
//! (naming the layer), and builds each step's layer protocol state (weight plaintexts,
//! circuits); `run` executes the steps over a [`Channel`]. The handshake belongs to the first
//! secure step, which puts the model's hash, the plan's protocol and the client's options in
//! it, so a session costs no frame beyond its protocol's own.
use crate::error::{NnError, Result};
use crate::info::ModelInfo;
use crate::layers::gru::{
    client_session_garbling, fp_for_variant, server_session_with, ClientModel, ClientOptions,
    GruOutcome, OtFiller, Scheme, ServerModel, ServerPolicy, SessionReport, Variant,
    DEFAULT_GARBLING,
};
use crate::layers::hegc::{self, HegcClientModel, HegcServerModel};
use crate::model::{Model, ModelConfig, Shape};
use crate::plan::{Plan, PlanOptions, Protocol};
use crate::reference::{QuantizedGraph, QuantizedModel};
use secinfer_he::MatVecMethod;
use secinfer_net::Channel;

/// What the model owner chooses for its sessions.
#[derive(Clone, Copy, Debug)]
pub struct ServerOptions {
    /// CryptoGRU's variant (formats and candidate activation) for GRU models.
    pub variant: Variant,
    pub plan: PlanOptions,
    /// The matvec kernel of `hegc` networks (GALA unless GAZELLE is asked for).
    pub kernel: MatVecMethod,
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            variant: Variant::Cg2,
            plan: PlanOptions::default(),
            kernel: MatVecMethod::Gala,
        }
    }
}

/// What the client chooses for one run; the server follows these choices where it allows them.
#[derive(Clone, Copy, Debug)]
pub struct RunOptions {
    pub protocol: ClientOptions,
    pub ot: OtFiller,
    pub garbling: Scheme,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            protocol: ClientOptions::default(),
            ot: OtFiller::default(),
            garbling: DEFAULT_GARBLING,
        }
    }
}

/// The client's input to one session.
pub enum ClientInput<'a> {
    Tokens(&'a [u32]),
    /// Main-format integers (a flattened image or vector).
    Fixed(&'a [i64]),
}

/// What the client learns from one session.
pub struct Outcome {
    /// The class index (the argmax of the logits).
    pub class: usize,
    /// The indices of the largest logits, largest first, as many as asked for (`class` first).
    pub top: Vec<usize>,
    /// The logits, when the client asked for them and the protocol revealed them.
    pub logits: Option<Vec<i64>>,
    /// log2 p of the word a language model's client named (`ClientOptions::log_prob_of`).
    pub log2_prob: Option<i64>,
    pub report: SessionReport,
}

impl From<GruOutcome> for Outcome {
    fn from(o: GruOutcome) -> Self {
        Outcome {
            class: o.class,
            top: o.top,
            logits: o.logits,
            log2_prob: o.log2_prob,
            report: o.report,
        }
    }
}

/// The server's prepared steps, one per secure step of the plan.
enum ServerStep {
    CryptoGru(Box<ServerModel>),
    Hegc(Box<HegcServerModel>),
}

/// A model prepared for serving sessions.
pub struct ServerSession {
    pub config: ModelConfig,
    pub plan: Plan,
    step: ServerStep,
}

/// Sequence length of a token-input model (the GRU always runs all of it).
fn steps_of(config: &ModelConfig) -> Result<usize> {
    match config.graph.input_shape() {
        Shape::Tokens { len: Some(t) } => Ok(t),
        _ => Err(NnError::Unsupported(
            "the secure GRU needs a fixed sequence length (vocab.max_len)".into(),
        )),
    }
}

fn secure_protocol(plan: &Plan, config: &ModelConfig) -> Result<Protocol> {
    plan.check_runnable(config)?;
    plan.steps
        .iter()
        .map(|s| s.protocol)
        .find(|p| *p != Protocol::Local)
        .ok_or_else(|| NnError::Unsupported("the model has no layer for the server".into()))
}

impl ServerSession {
    /// Plans `model` and prepares its layer protocols.
    pub fn prepare(model: &Model, opts: &ServerOptions) -> Result<ServerSession> {
        let config = model.config.clone();
        let plan = Plan::new(&config, opts.plan);
        match secure_protocol(&plan, &config)? {
            Protocol::CryptoGruClassifier => {
                let fp = fp_for_variant(&config, opts.variant)?;
                let q = QuantizedModel::new(model, fp)?;
                let sm = ServerModel::new(q, opts.variant, steps_of(&config)?)?;
                Ok(ServerSession {
                    config,
                    plan,
                    step: ServerStep::CryptoGru(Box::new(sm)),
                })
            }
            Protocol::ChocoNetwork => Err(NnError::Unsupported(
                "family choco runs through nn::layers::choco (serve/infer --family choco)".into(),
            )),
            Protocol::HegcNet => {
                let q = QuantizedGraph::new(model, config.fixed_point)?;
                let sm = HegcServerModel::new(&q, &config, opts.kernel)?;
                Ok(ServerSession {
                    config,
                    plan,
                    step: ServerStep::Hegc(Box::new(sm)),
                })
            }
            Protocol::Local | Protocol::Missing => {
                Err(NnError::Protocol("a checked plan has a secure step".into()))
            }
        }
    }

    /// Serves a prepared CryptoGRU model (benches build it from random weights).
    pub fn from_gru(sm: ServerModel) -> ServerSession {
        let config = sm.q.config.clone();
        let plan = Plan::new(&config, PlanOptions::default());
        ServerSession {
            config,
            plan,
            step: ServerStep::CryptoGru(Box::new(sm)),
        }
    }

    /// The prepared CryptoGRU model, if this is one.
    pub fn gru(&self) -> Option<&ServerModel> {
        match &self.step {
            ServerStep::CryptoGru(m) => Some(m),
            ServerStep::Hegc(_) => None,
        }
    }

    /// Runs one session's server side over `ch`, revealing no more than `policy` allows.
    pub fn run<C: Channel>(&self, ch: &mut C, policy: ServerPolicy) -> Result<SessionReport> {
        match &self.step {
            ServerStep::CryptoGru(m) => server_session_with(ch, m, policy),
            ServerStep::Hegc(m) => hegc::server_session(ch, m, policy),
        }
    }
}

enum ClientStep {
    CryptoGru(Box<ClientModel>),
    Hegc(Box<HegcClientModel>),
}

/// The client's side of a model: public information only.
pub struct ClientSession {
    pub config: ModelConfig,
    pub plan: Plan,
    step: ClientStep,
}

impl ClientSession {
    /// Plans the model described by `info` (written by `export-info`).
    pub fn prepare(info: &ModelInfo, opts: &ServerOptions) -> Result<ClientSession> {
        let config = info.config.clone();
        let plan = Plan::new(&config, opts.plan);
        match secure_protocol(&plan, &config)? {
            Protocol::CryptoGruClassifier => {
                let cm = ClientModel::new(
                    config.clone(),
                    &info.embed,
                    opts.variant,
                    steps_of(&config)?,
                )?;
                Ok(ClientSession {
                    config,
                    plan,
                    step: ClientStep::CryptoGru(Box::new(cm)),
                })
            }
            Protocol::ChocoNetwork => Err(NnError::Unsupported(
                "family choco runs through nn::layers::choco (serve/infer --family choco)".into(),
            )),
            Protocol::HegcNet => Ok(ClientSession {
                step: ClientStep::Hegc(Box::new(HegcClientModel::new(&config, opts.kernel)?)),
                config,
                plan,
            }),
            Protocol::Local | Protocol::Missing => {
                Err(NnError::Protocol("a checked plan has a secure step".into()))
            }
        }
    }

    /// Runs one `hegc` session classifying every image of `xs` under one set of keys (the
    /// keys and base OTs go up once; the first outcome's report carries them).
    pub fn run_images<C: Channel>(
        &self,
        ch: &mut C,
        xs: &[&[i64]],
        reveal_logits: bool,
        progress: &mut dyn FnMut(&str, u64, u64),
    ) -> Result<Vec<GruOutcome>> {
        match &self.step {
            ClientStep::Hegc(m) => hegc::client_session_images(ch, m, xs, reveal_logits, progress),
            ClientStep::CryptoGru(_) => Err(NnError::Input(
                "one session of many images runs image networks (family hegc)".into(),
            )),
        }
    }

    /// A client of a prepared CryptoGRU model (benches).
    pub fn from_gru(cm: ClientModel) -> ClientSession {
        let config = cm.config.clone();
        let plan = Plan::new(&config, PlanOptions::default());
        ClientSession {
            config,
            plan,
            step: ClientStep::CryptoGru(Box::new(cm)),
        }
    }

    /// The CryptoGRU client model, if this is one.
    pub fn gru(&self) -> Option<&ClientModel> {
        match &self.step {
            ClientStep::CryptoGru(m) => Some(m),
            ClientStep::Hegc(_) => None,
        }
    }

    /// Runs one session's client side over `ch`.
    pub fn run<C: Channel>(
        &self,
        ch: &mut C,
        input: ClientInput<'_>,
        opts: &RunOptions,
        progress: &mut dyn FnMut(&str, u64, u64),
    ) -> Result<Outcome> {
        match (&self.step, input) {
            (ClientStep::CryptoGru(m), ClientInput::Tokens(t)) => Ok(client_session_garbling(
                ch,
                m,
                t,
                opts.protocol,
                opts.ot,
                opts.garbling,
                progress,
            )?
            .into()),
            (ClientStep::Hegc(m), ClientInput::Fixed(x)) => {
                Ok(hegc::client_session(ch, m, x, opts.protocol.reveal_logits, progress)?.into())
            }
            (_, ClientInput::Tokens(_)) => Err(NnError::Input(
                "this model reads numbers, not tokens".into(),
            )),
            (_, ClientInput::Fixed(_)) => Err(NnError::Input(
                "this model reads tokens, not numbers".into(),
            )),
        }
    }
}
