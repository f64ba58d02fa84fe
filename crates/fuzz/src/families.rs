//! The other families' openings, each read alone from a hostile peer: GALA's handshake (the
//! server reading a hello, the client reading a reply), CHOCO's hello and OPAF's request. What
//! follows an opening is BFV keys and ciphertexts, OT messages and garbled tables, whose
//! decoders have their own targets.
use crate::{against_frames, Scripted};
use secinfer_he::{choco::Packing, MatVecMethod};
use secinfer_nn::layers::choco::{self, ChocoServer};
use secinfer_nn::layers::gru::ServerPolicy;
use secinfer_nn::layers::hegc::{self, random_mlp, HegcClientModel, HegcServerModel};
use secinfer_nn::layers::ss::{self, SsServer};
use secinfer_nn::model::Model;
use secinfer_nn::QuantizedGraph;
use std::sync::OnceLock;

/// A small GALA MLP (20-8-5, format (12, 6)): the handshake does not depend on the size.
fn mlp() -> Option<&'static Model> {
    static M: OnceLock<Option<Model>> = OnceLock::new();
    M.get_or_init(|| random_mlp(&[20, 8, 5], 12, 6, 4).ok())
        .as_ref()
}

fn hegc_models() -> Option<&'static (HegcServerModel, HegcClientModel)> {
    static M: OnceLock<Option<(HegcServerModel, HegcClientModel)>> = OnceLock::new();
    M.get_or_init(|| {
        let m = mlp()?;
        let q = QuantizedGraph::new(m, m.config.fixed_point).ok()?;
        let sm = HegcServerModel::new(&q, &m.config, MatVecMethod::Gala).ok()?;
        let cm = HegcClientModel::new(&m.config, MatVecMethod::Gala).ok()?;
        Some((sm, cm))
    })
    .as_ref()
}

fn choco_server() -> Option<&'static ChocoServer> {
    static S: OnceLock<Option<ChocoServer>> = OnceLock::new();
    S.get_or_init(|| ChocoServer::new(mlp()?, Packing::Redundant).ok())
        .as_ref()
}

/// The shipped FastGRNN (OPAF's request names its shape).
fn fastgrnn() -> Option<&'static Model> {
    static M: OnceLock<Option<Model>> = OnceLock::new();
    M.get_or_init(|| {
        let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../models/mnist-fastgrnn");
        Model::load(dir).ok()
    })
    .as_ref()
}

fn ss_server() -> Option<&'static SsServer> {
    static S: OnceLock<Option<SsServer>> = OnceLock::new();
    S.get_or_init(|| SsServer::new(fastgrnn()?, true).ok())
        .as_ref()
}

fn hegc_server(ch: &mut Scripted) -> bool {
    hegc_models().is_some_and(|(sm, _)| {
        hegc::server_session(ch, sm, ServerPolicy { allow_logits: true }).is_ok()
    })
}

fn hegc_client(ch: &mut Scripted) -> bool {
    hegc_models().is_some_and(|(_, cm)| {
        let x = vec![3i64; 20];
        hegc::client_session(ch, cm, &x, true, &mut |_, _, _| {}).is_ok()
    })
}

pub fn hegc_hello(d: &[u8]) {
    against_frames(vec![d.to_vec()], hegc_server);
}

pub fn hegc_reply(d: &[u8]) {
    against_frames(vec![d.to_vec()], hegc_client);
}

pub fn choco_hello(d: &[u8]) {
    if let Some(s) = choco_server() {
        let _ = against_frames(vec![d.to_vec()], |ch| choco::server_session(ch, s));
    }
}

pub fn ss_request(d: &[u8]) {
    if let Some(s) = ss_server() {
        let _ = against_frames(vec![d.to_vec()], |ch| ss::server_session(ch, s));
    }
}

/// The first frame `party` sends when every receive fails: an honest opening.
fn first_sent(party: impl FnOnce(&mut Scripted) -> bool) -> Option<Vec<u8>> {
    let mut ch = Scripted::new(vec![]);
    let _ = party(&mut ch);
    ch.sent.into_iter().next()
}

/// Seeds of this module's targets, made by the honest code; `None` for a name it does not own.
pub fn seeds(target: &str) -> Option<Vec<Vec<u8>>> {
    let hello = || first_sent(hegc_client);
    let seed = match target {
        "hegc_hello" => hello(),
        "hegc_reply" => hello().and_then(|h| {
            let mut ch = Scripted::new(vec![h]);
            let _ = hegc_server(&mut ch);
            ch.sent.into_iter().next()
        }),
        "choco_hello" => {
            let s = choco_server()?;
            let c = choco::ChocoClient::new(&mlp()?.config, s.packing())
                .ok()?
                .with_threads(1);
            first_sent(|ch| choco::client_session(ch, &c, &[1i64; 20]).is_ok())
        }
        "ss_request" => {
            let m = fastgrnn()?;
            let shape = ss::shape_of(&m.config).ok()?;
            let req = ss::SsRequest {
                math: ss::Impl::Opaf,
                source: secinfer_ss::CotSource::Iknp,
                products: ss::Products::default(),
                logits: false,
            };
            let x = vec![0i64; shape.steps * shape.input];
            let main = m.config.fixed_point.main;
            first_sent(|ch| ss::client_session(ch, &shape, &req, &x, main).is_ok())
        }
        _ => return None,
    };
    Some(seed.into_iter().collect())
}
