//! The session driver: one path from a model to a secure session, for `serve`, `infer`,
//! `bench` and Python alike, in every family (CryptoGRU and GALA in `hegc`, CHOCO, OPAF's
//! FastGRNN in `ss`, SHE in `tfhe`).
//!
//! `prepare` plans the model ([`Plan`]), refuses a plan with a layer no protocol computes
//! (naming the layer), and builds each step's layer protocol state (weight plaintexts,
//! circuits, encoded kernels); `run` executes the steps over a [`Channel`]. The handshake
//! belongs to the first secure step, which puts the model's hash, the plan's protocol and the
//! client's options in it, so a session costs no frame beyond its protocol's own. Every family
//! ends in the same reports: [`Served`] on the server, [`Outcome`] on the client.
use super::report::{Detail, Served, ServedDetail};
use crate::error::{NnError, Result};
use crate::info::ModelInfo;
use crate::layers::choco::{self, ChocoClient, ChocoServer};
use crate::layers::gru::{
    client_session_garbling, fp_for_variant, server_session_with, ClientModel, ClientOptions,
    GruOutcome, OtFiller, Scheme, ServerModel, ServerPolicy, SessionReport, Variant,
    DEFAULT_GARBLING,
};
use crate::layers::hegc::{self, HegcClientModel, HegcServerModel};
use crate::layers::ss::{self, FastGrnnShape, Impl, SsRequest, SsServer};
use crate::model::{Format, Model, ModelConfig, Shape};
use crate::plan::{Family, Plan, PlanOptions, Protocol};
use crate::reference::{argmax, QuantizedGraph, QuantizedModel};
use secinfer_he::choco::Packing;
use secinfer_net::Channel;
use secinfer_ss::{CotSource, FerretParams};
use std::path::Path;

/// What the model owner chooses for its sessions.
#[derive(Clone, Copy, Debug)]
pub struct ServerOptions {
    /// CryptoGRU's variant (formats and candidate activation) for GRU models.
    pub variant: Variant,
    pub plan: PlanOptions,
    /// The linear kernels of `hegc` networks: the cost model's per layer unless one is asked
    /// for.
    pub kernel: hegc::KernelChoice,
    /// The finishing steps (truncation, ReLU, max-pool) of `hegc` networks: by OT or garbled.
    pub nonlinear: hegc::Nonlinear,
    /// CHOCO's packing (rotational redundancy unless the baseline is asked for).
    pub packing: Packing,
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            variant: Variant::Cg2,
            plan: PlanOptions::default(),
            kernel: hegc::KernelChoice::Auto,
            nonlinear: hegc::Nonlinear::default(),
            packing: Packing::Redundant,
        }
    }
}

/// What the client chooses for one run; the server follows these choices where it allows them.
#[derive(Clone, Copy, Debug)]
pub struct RunOptions {
    pub protocol: ClientOptions,
    pub ot: OtFiller,
    pub garbling: Scheme,
    /// Family `ss`: OPAF's or SIRNN's sigmoid and tanh.
    pub math: Impl,
    /// Family `ss`: the matrix products by Cheetah's HE on masks or by SIRNN's OTs.
    pub products: ss::Products,
    /// Threads for the client's own work in family `choco` (`None`: the caller's pool; 1
    /// models a small device).
    pub threads: Option<usize>,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            protocol: ClientOptions::default(),
            ot: OtFiller::default(),
            garbling: DEFAULT_GARBLING,
            math: Impl::Opaf,
            products: ss::Products::default(),
            threads: None,
        }
    }
}

/// The OT extension family `ss` fills its pools with, as the client's filler names it.
fn cot_source(f: OtFiller) -> CotSource {
    match f {
        OtFiller::Iknp => CotSource::Iknp,
        OtFiller::SoftSpoken { k } => CotSource::SoftSpoken { k },
        OtFiller::Ferret => CotSource::Ferret(FerretParams::B13),
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
    /// The channel's cost (every family), with `hegc`'s byte buckets.
    pub report: SessionReport,
    /// The family's own part.
    pub detail: Detail,
}

impl From<GruOutcome> for Outcome {
    fn from(o: GruOutcome) -> Self {
        Outcome {
            class: o.class,
            top: o.top,
            logits: o.logits,
            log2_prob: o.log2_prob,
            report: o.report,
            detail: Detail::Hegc,
        }
    }
}

impl Outcome {
    /// The outcome of a family that reports only the channel's cost.
    fn metered(
        class: usize,
        logits: Option<Vec<i64>>,
        cost: secinfer_net::Cost,
        d: Detail,
    ) -> Self {
        Outcome {
            class,
            top: vec![class],
            logits,
            log2_prob: None,
            report: SessionReport {
                cost,
                ..SessionReport::default()
            },
            detail: d,
        }
    }
}

/// The server's prepared steps, one per secure step of the plan.
enum ServerStep {
    CryptoGru(Box<ServerModel>),
    Hegc(Box<HegcServerModel>),
    Choco(Box<ChocoServer>),
    Ss(Box<SsServer>),
    #[cfg(feature = "tfhe")]
    She(Box<secinfer_tfhe::PbsNetwork>),
}

/// A model graph and its plan (every family but SHE, whose network has its own format).
struct Planned {
    config: ModelConfig,
    plan: Plan,
}

/// A model prepared for serving sessions.
pub struct ServerSession {
    planned: Option<Planned>,
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
    /// Loads and prepares the model in `dir`: a model graph (`model.json`), or a SHE network
    /// (`she.json`) in a build with the tfhe feature.
    pub fn load(dir: &Path, opts: &ServerOptions) -> Result<ServerSession> {
        if super::she::is_she_model(dir) {
            #[cfg(feature = "tfhe")]
            return Ok(ServerSession {
                planned: None,
                step: ServerStep::She(Box::new(super::she::load_network(dir)?)),
            });
            #[cfg(not(feature = "tfhe"))]
            return Err(super::she::unsupported(dir));
        }
        ServerSession::prepare(&Model::load(dir)?, opts)
    }

    /// Plans `model` and prepares its layer protocols.
    pub fn prepare(model: &Model, opts: &ServerOptions) -> Result<ServerSession> {
        let config = model.config.clone();
        let plan = Plan::new(&config, opts.plan);
        let step = match secure_protocol(&plan, &config)? {
            Protocol::CryptoGruClassifier => {
                let fp = fp_for_variant(&config, opts.variant)?;
                let q = QuantizedModel::new(model, fp)?;
                let sm = ServerModel::new(q, opts.variant, steps_of(&config)?)?;
                ServerStep::CryptoGru(Box::new(sm))
            }
            Protocol::ChocoNetwork => {
                ServerStep::Choco(Box::new(ChocoServer::new(model, opts.packing)?))
            }
            // The policy decides the logits per session (`run`), not the prepared model.
            Protocol::SsFastGrnn => ServerStep::Ss(Box::new(SsServer::new(model, false)?)),
            Protocol::HegcNet => {
                let q = QuantizedGraph::new(model, config.fixed_point)?;
                ServerStep::Hegc(Box::new(
                    HegcServerModel::new(&q, &config, opts.kernel)?.with_nonlinear(opts.nonlinear),
                ))
            }
            Protocol::Local | Protocol::Missing => {
                return Err(NnError::Protocol("a checked plan has a secure step".into()))
            }
        };
        Ok(ServerSession {
            planned: Some(Planned { config, plan }),
            step,
        })
    }

    /// Serves a prepared CryptoGRU model (benches build it from random weights).
    pub fn from_gru(sm: ServerModel) -> ServerSession {
        let config = sm.q.config.clone();
        let plan = Plan::new(&config, PlanOptions::default());
        ServerSession {
            planned: Some(Planned { config, plan }),
            step: ServerStep::CryptoGru(Box::new(sm)),
        }
    }

    /// The model graph (`None` for a SHE network).
    pub fn config(&self) -> Option<&ModelConfig> {
        self.planned.as_ref().map(|p| &p.config)
    }

    /// The plan (`None` for a SHE network, which is one step of family `tfhe`).
    pub fn plan(&self) -> Option<&Plan> {
        self.planned.as_ref().map(|p| &p.plan)
    }

    /// The family the secure steps run in.
    pub fn family(&self) -> Family {
        match &self.step {
            ServerStep::CryptoGru(_) | ServerStep::Hegc(_) => Family::Hegc,
            ServerStep::Choco(_) => Family::Choco,
            ServerStep::Ss(_) => Family::Ss,
            #[cfg(feature = "tfhe")]
            ServerStep::She(_) => Family::Tfhe,
        }
    }

    /// The prepared CryptoGRU model, if this is one.
    pub fn gru(&self) -> Option<&ServerModel> {
        match &self.step {
            ServerStep::CryptoGru(m) => Some(m),
            _ => None,
        }
    }

    /// The prepared CHOCO network, if this is one.
    pub fn choco(&self) -> Option<&ChocoServer> {
        match &self.step {
            ServerStep::Choco(m) => Some(m),
            _ => None,
        }
    }

    /// The public shape of the prepared FastGRNN (family `ss`), if this is one.
    pub fn ss_shape(&self) -> Option<&FastGrnnShape> {
        match &self.step {
            ServerStep::Ss(m) => Some(m.shape()),
            _ => None,
        }
    }

    /// The prepared SHE network, if this is one.
    #[cfg(feature = "tfhe")]
    pub fn she(&self) -> Option<&secinfer_tfhe::PbsNetwork> {
        match &self.step {
            ServerStep::She(m) => Some(m),
            _ => None,
        }
    }

    /// Runs one session's server side over `ch`, revealing no more than `policy` allows.
    pub fn run<C: Channel>(&self, ch: &mut C, policy: ServerPolicy) -> Result<SessionReport> {
        Ok(self.serve_one(ch, policy, &|_| {})?.report)
    }

    /// [`ServerSession::run`] with the family's own account of the session; `progress` hears
    /// how a long evaluation advances (SHE's bootstraps, every few seconds).
    #[cfg_attr(
        not(feature = "tfhe"),
        allow(unused_variables, reason = "only SHE reports progress")
    )]
    pub fn serve_one<C: Channel>(
        &self,
        ch: &mut C,
        policy: ServerPolicy,
        progress: &(dyn Fn(&str) + Sync),
    ) -> Result<Served> {
        Ok(match &self.step {
            ServerStep::CryptoGru(m) => Served {
                report: server_session_with(ch, m, policy)?,
                detail: ServedDetail::Hegc,
            },
            ServerStep::Hegc(m) => Served {
                report: hegc::server_session(ch, m, policy)?,
                detail: ServedDetail::Hegc,
            },
            // The client-aided mode reveals every activation by design: no logits policy.
            ServerStep::Choco(m) => {
                let c = choco::server_session(ch, m)?;
                Served::metered(ch.cost(), true, ServedDetail::Choco(c))
            }
            ServerStep::Ss(m) => {
                let r = ss::session::server_session_with(ch, m, policy.allow_logits)?;
                Served::metered(ch.cost(), r.request.logits, ServedDetail::Ss(Box::new(r)))
            }
            // The client decrypts the network's whole output.
            #[cfg(feature = "tfhe")]
            ServerStep::She(m) => {
                let tell = |k: u32, done: u64, total: u64| {
                    progress(&format!("sample {k}: {done} of {total} bootstraps"));
                };
                let r = secinfer_tfhe::session::serve_session(ch, m, &tell)?;
                Served::metered(ch.cost(), true, ServedDetail::She(r))
            }
        })
    }
}

enum ClientStep {
    CryptoGru(Box<ClientModel>),
    Hegc(Box<HegcClientModel>),
    Choco(Box<ChocoClient>),
    /// FastGRNN's public shape and the main format the client quantises its input to.
    Ss(Box<FastGrnnShape>, Format),
    #[cfg(feature = "tfhe")]
    She(Box<secinfer_tfhe::PbsInfo>),
}

/// The client's side of a model: public information only.
pub struct ClientSession {
    planned: Option<Planned>,
    step: ClientStep,
}

impl ClientSession {
    /// Plans the model described by `info` (written by `export-info`).
    pub fn prepare(info: &ModelInfo, opts: &ServerOptions) -> Result<ClientSession> {
        let config = info.config.clone();
        let plan = Plan::new(&config, opts.plan);
        let step = match secure_protocol(&plan, &config)? {
            Protocol::CryptoGruClassifier => ClientStep::CryptoGru(Box::new(ClientModel::new(
                config.clone(),
                &info.embed,
                opts.variant,
                steps_of(&config)?,
            )?)),
            Protocol::ChocoNetwork => {
                ClientStep::Choco(Box::new(ChocoClient::new(&config, opts.packing)?))
            }
            Protocol::SsFastGrnn => {
                ClientStep::Ss(Box::new(ss::shape_of(&config)?), config.fixed_point.main)
            }
            Protocol::HegcNet => ClientStep::Hegc(Box::new(
                HegcClientModel::new(&config, opts.kernel)?.with_nonlinear(opts.nonlinear),
            )),
            Protocol::Local | Protocol::Missing => {
                return Err(NnError::Protocol("a checked plan has a secure step".into()))
            }
        };
        Ok(ClientSession {
            planned: Some(Planned { config, plan }),
            step,
        })
    }

    /// The client of a SHE network described by `info`.
    #[cfg(feature = "tfhe")]
    pub fn she(info: secinfer_tfhe::PbsInfo) -> ClientSession {
        ClientSession {
            planned: None,
            step: ClientStep::She(Box::new(info)),
        }
    }

    /// The model graph (`None` for a SHE network).
    pub fn config(&self) -> Option<&ModelConfig> {
        self.planned.as_ref().map(|p| &p.config)
    }

    /// The plan (`None` for a SHE network).
    pub fn plan(&self) -> Option<&Plan> {
        self.planned.as_ref().map(|p| &p.plan)
    }

    /// The family the secure steps run in.
    pub fn family(&self) -> Family {
        match &self.step {
            ClientStep::CryptoGru(_) | ClientStep::Hegc(_) => Family::Hegc,
            ClientStep::Choco(_) => Family::Choco,
            ClientStep::Ss(..) => Family::Ss,
            #[cfg(feature = "tfhe")]
            ClientStep::She(_) => Family::Tfhe,
        }
    }

    /// The public shape of the FastGRNN (family `ss`), if this is one.
    pub fn ss_shape(&self) -> Option<&FastGrnnShape> {
        match &self.step {
            ClientStep::Ss(s, _) => Some(s),
            _ => None,
        }
    }

    /// Whether one session serves many inputs (GALA's networks and SHE send their keys once);
    /// the other families run one session per input.
    pub fn batches_inputs(&self) -> bool {
        match &self.step {
            ClientStep::Hegc(_) => true,
            #[cfg(feature = "tfhe")]
            ClientStep::She(_) => true,
            _ => false,
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
            _ => Err(NnError::Input(
                "one session of many images runs image networks (family hegc)".into(),
            )),
        }
    }

    /// Runs one session over `ch` on every input of `xs` (main-format integers; SHE's input
    /// digits): one outcome per input, the session's set-up on the first. Only the families
    /// that [`ClientSession::batches_inputs`] take more than one.
    pub fn run_many<C: Channel>(
        &self,
        ch: &mut C,
        xs: &[&[i64]],
        opts: &RunOptions,
        progress: &mut dyn FnMut(&str, u64, u64),
    ) -> Result<Vec<Outcome>> {
        match &self.step {
            ClientStep::Hegc(m) => {
                Ok(
                    hegc::client_session_images(ch, m, xs, opts.protocol.reveal_logits, progress)?
                        .into_iter()
                        .map(Outcome::from)
                        .collect(),
                )
            }
            #[cfg(feature = "tfhe")]
            ClientStep::She(info) => she_session(ch, info, xs),
            _ => match xs {
                [x] => Ok(vec![self.run(ch, ClientInput::Fixed(x), opts, progress)?]),
                _ => Err(NnError::Input(format!(
                    "family {} runs one input per session",
                    self.family()
                ))),
            },
        }
    }

    /// A client of a prepared CryptoGRU model (benches).
    pub fn from_gru(cm: ClientModel) -> ClientSession {
        let config = cm.config.clone();
        let plan = Plan::new(&config, PlanOptions::default());
        ClientSession {
            planned: Some(Planned { config, plan }),
            step: ClientStep::CryptoGru(Box::new(cm)),
        }
    }

    /// The CryptoGRU client model, if this is one.
    pub fn gru(&self) -> Option<&ClientModel> {
        match &self.step {
            ClientStep::CryptoGru(m) => Some(m),
            _ => None,
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
            (ClientStep::Choco(m), ClientInput::Fixed(x)) => {
                let o = match opts.threads {
                    None => choco::client_session(ch, m, x)?,
                    Some(n) => choco::on_threads(n, || choco::client_session(ch, m, x))?,
                };
                let class = o.class.unwrap_or_else(|| argmax(o.output()));
                Ok(Outcome::metered(
                    class,
                    None,
                    ch.cost(),
                    Detail::Choco(Box::new(o)),
                ))
            }
            (ClientStep::Ss(shape, main), ClientInput::Fixed(x)) => {
                let request = SsRequest {
                    math: opts.math,
                    source: cot_source(opts.ot),
                    products: opts.products,
                    logits: opts.protocol.reveal_logits,
                };
                let r = ss::client_session(ch, shape, &request, x, *main)?;
                let class = r
                    .class
                    .ok_or_else(|| NnError::Protocol("the session revealed no class".into()))?;
                let logits = r.logits.clone();
                Ok(Outcome::metered(
                    class,
                    logits,
                    ch.cost(),
                    Detail::Ss(Box::new(r)),
                ))
            }
            #[cfg(feature = "tfhe")]
            (ClientStep::She(info), ClientInput::Fixed(x)) => she_session(ch, info, &[x])?
                .pop()
                .ok_or_else(|| NnError::Protocol("a SHE session without its sample".into())),
            (_, ClientInput::Tokens(_)) => Err(NnError::Input(
                "this model reads numbers, not tokens".into(),
            )),
            (_, ClientInput::Fixed(_)) => Err(NnError::Input(
                "this model reads tokens, not numbers".into(),
            )),
        }
    }
}

/// One SHE session on every sample of `xs`: the client's keys are made and uploaded once; each
/// outcome is a sample's decrypted output, its class the output's argmax.
#[cfg(feature = "tfhe")]
fn she_session<C: Channel>(
    ch: &mut C,
    info: &secinfer_tfhe::PbsInfo,
    xs: &[&[i64]],
) -> Result<Vec<Outcome>> {
    let samples: Vec<Vec<i64>> = xs.iter().map(|x| x.to_vec()).collect();
    let r = secinfer_tfhe::session::client_session(ch, info, &samples)?;
    let mut setup = Some(super::report::SheSetup {
        keygen_s: r.keygen_s,
        key_bytes: r.key_bytes,
        key_upload_s: r.key_upload_s,
        server_expand_s: r.server_expand_s,
    });
    let cost = ch.cost();
    Ok(r.samples
        .into_iter()
        .map(|sample| {
            let class = argmax(&sample.output);
            let logits = Some(sample.output.clone());
            let detail = Detail::She {
                sample,
                setup: setup.take(),
            };
            Outcome::metered(class, logits, cost, detail)
        })
        .collect())
}
