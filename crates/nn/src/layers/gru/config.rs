//! What the two parties agree on before a session: CryptoGRU's variants and their fixed-point
//! configurations, the client's options, the OT filler, and the handshake that names them all
//! (with a hash of the architecture, so both roles run the same circuits and products).
use super::model::{ClientModel, ServerModel};
use crate::error::{NnError, Result};
use crate::model::format::const_format;
use crate::model::{ActFormat, Candidate, FixedPointConfig, ModelConfig};
use secinfer_gc::garble::Scheme;
use secinfer_he::kernels::coeff;
use secinfer_net::Channel;
use secinfer_ot::{CotSource, FerretParams};
use sha2::{Digest, Sha256};

/// Protocol identifier exchanged in the handshake.
pub const PROTOCOL: &str = "secinfer-gru/12";
/// How the session's AND gates are garbled unless the client asks otherwise (the client names
/// the scheme in the handshake, the server follows; docs/gru-protocol.md, "Three-halves
/// garbling"). Three-halves: 23 % fewer table bytes than half-gates, as fast on `lan` (0.185 vs
/// 0.194 s for GRU(100,64,30) CG-2) and within 0.3 s on `none` (docs/benchmarks.md).
pub const DEFAULT_GARBLING: Scheme = Scheme::ThreeHalves;
pub(super) const HE_PARAMS: &str = "n8192-z2k32";
pub(super) const MAX_HANDSHAKE: usize = 4096;

/// CryptoGRU's variants.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    /// tanh candidate, 20-bit activations.
    Baseline,
    /// ReLU candidate, 20-bit activations.
    Cg1,
    /// ReLU candidate, 8-bit sigmoid/ReLU (requantised around the GC).
    Cg2,
    /// Not one of CryptoGRU's variants: CG-2's 8-bit activations and gate tables with the
    /// Baseline's tanh candidate (8-bit tanh in the step circuit), for a model trained with
    /// tanh (docs/gru-protocol.md, "The tanh candidate on 8-bit activations").
    Cg2Tanh,
}

impl Variant {
    pub fn name(self) -> &'static str {
        match self {
            Variant::Baseline => "baseline",
            Variant::Cg1 => "cg1",
            Variant::Cg2 => "cg2",
            Variant::Cg2Tanh => "cg2-tanh",
        }
    }
    /// Whether the variant runs the 8-bit activations (the model's `fx8` entry) and with them
    /// CG-2's gate tables.
    pub fn eight_bit(self) -> bool {
        matches!(self, Variant::Cg2 | Variant::Cg2Tanh)
    }
    pub fn candidate(self) -> Candidate {
        match self {
            Variant::Baseline | Variant::Cg2Tanh => Candidate::Tanh,
            Variant::Cg1 | Variant::Cg2 => Candidate::Relu,
        }
    }
}

impl std::str::FromStr for Variant {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "baseline" => Ok(Variant::Baseline),
            "cg1" => Ok(Variant::Cg1),
            "cg2" => Ok(Variant::Cg2),
            "cg2-tanh" => Ok(Variant::Cg2Tanh),
            o => Err(format!(
                "unknown variant {o:?} (baseline, cg1, cg2, cg2-tanh)"
            )),
        }
    }
}

/// The fixed-point configuration a variant runs: the model's `fx20` / `fx8` entry when it has
/// one, else the exporter's preset. Refuses a variant whose candidate differs from the model's.
pub fn fp_for_variant(config: &ModelConfig, v: Variant) -> Result<FixedPointConfig> {
    if config.gru()?.activation != v.candidate() {
        return Err(NnError::Input(format!(
            "variant {} needs a {} candidate activation; this model's is {}",
            v.name(),
            v.candidate().name(),
            config.gru()?.activation.name()
        )));
    }
    let name = if v.eight_bit() { "fx8" } else { "fx20" };
    if let Some((_, fp)) = config.variants.iter().find(|(n, _)| n == name) {
        return check_fp(*fp);
    }
    let main = const_format(20, 12);
    let fp = match v {
        Variant::Cg2 => FixedPointConfig {
            main,
            sigmoid: Some(ActFormat {
                input: const_format(8, 4),
                output: const_format(8, 7),
            }),
            candidate: Some(ActFormat {
                input: const_format(8, 4),
                output: const_format(8, 4),
            }),
        },
        // tanh's output lies in [−1, 1]: seven fraction bits, as the gates'; its input five.
        Variant::Cg2Tanh => FixedPointConfig {
            main,
            sigmoid: Some(ActFormat {
                input: const_format(8, 4),
                output: const_format(8, 7),
            }),
            candidate: Some(ActFormat {
                input: const_format(8, 5),
                output: const_format(8, 7),
            }),
        },
        Variant::Baseline | Variant::Cg1 => FixedPointConfig {
            main,
            sigmoid: None,
            candidate: None,
        },
    };
    check_fp(fp)
}

fn check_fp(fp: FixedPointConfig) -> Result<FixedPointConfig> {
    // The carry leaves split F into two digits of 1 to 8 bits (1-of-2^m OTs, m ≤ 8).
    if !(2..=16).contains(&fp.main.scale) {
        return Err(NnError::Input(format!(
            "main format ({}, {}): the secure GRU needs 2 to 16 fraction bits",
            fp.main.bits, fp.main.scale
        )));
    }
    if fp.main.bits + fp.main.scale > coeff::T_BITS {
        return Err(NnError::Input(format!(
            "main format ({}, {}) needs a 2^{} ring; the secure GRU runs over 2^32",
            fp.main.bits,
            fp.main.scale,
            fp.main.bits + fp.main.scale
        )));
    }
    Ok(fp)
}

fn arch_hash(config: &ModelConfig, fp: &FixedPointConfig, steps: usize) -> Result<String> {
    let a = config.gru()?;
    let s = format!(
        "{PROTOCOL}|E{}|H{}|C{}|V{}|{}|T{steps}|{:?}|{:?}|{:?}",
        a.embed_dim,
        a.hidden,
        a.classes,
        a.vocab,
        a.activation.name(),
        fp.main,
        fp.sigmoid_format(),
        fp.candidate_format()
    );
    let d = Sha256::digest(s.as_bytes());
    Ok(d.iter().take(16).map(|b| format!("{b:02x}")).collect())
}

/// Client options.
#[derive(Clone, Copy, Debug, Default)]
pub struct ClientOptions {
    /// Ask for the logits (main-format integers) instead of only the class.
    pub reveal_logits: bool,
    /// Keep the sigmoids of r and z inside the garbled circuit even where OT lookup tables
    /// could compute them (8-bit sigmoid inputs, CG-2), and the hidden projections' carries
    /// with them (no per-step leaves): four flights per step fewer (120 rounds for T = 30,
    /// ≈ 2.3 s on a 40 ms round trip) for ≈ 2.8 KB more per element and step
    /// (docs/gru-protocol.md, "carry shares and gate tables"). A cost trade-off, not a security
    /// one.
    pub gates_in_circuit: bool,
    /// How many of the largest logits' indices to learn, largest first (0 or 1: the argmax
    /// only). A language model's next-word candidates; at most [`MAX_TOP_K`]. Each index past
    /// the first costs one more garbled tournament over the C logits.
    pub top_k: usize,
    /// A language model's next word whose log-probability the client learns instead of any
    /// index (the word's index is a private input of the final circuit; [`super::logprob`]).
    /// The server must allow logits: a log-probability per word of the vocabulary would give
    /// the logits up to a shift.
    pub log_prob_of: Option<usize>,
}

/// The most indices a client may ask for ([`ClientOptions::top_k`]): a handful of next-word
/// candidates, not a ranking of the vocabulary.
pub const MAX_TOP_K: usize = 16;

impl ClientOptions {
    /// The number of indices the final circuit outputs for `classes` logits.
    pub fn indices(&self, classes: usize) -> usize {
        self.top_k.clamp(1, classes.max(1))
    }
}

/// The handshake's names for where r and z are computed.
pub(super) const GATES_TABLES: &str = "tables";
pub(super) const GATES_CIRCUIT: &str = "circuit";

/// What fills the session's pool of random COTs (all OTs of the session are drawn from it and
/// derandomised at one bit each): IKNP (16 bytes per COT, cheap to compute), SoftSpokenOT with
/// k bits per chunk (16/k bytes per COT, CPU growing like 2^k/k: `secinfer bench ot --kind
/// softspoken`) or Ferret silent OT (≈ 1.5 MB once for setup and one iteration of 10^7 COTs,
/// then nearly free, but an iteration of 10^7 COTs takes ≈ 1.3 s on two cores: `secinfer bench
/// ot --kind ferret`). A cost trade-off, not a security one: all are semi-honest secure.
///
/// The default is SoftSpokenOT with k = 5: 3.2 bytes per COT instead of IKNP's 16, at IKNP's
/// session time on two cores (the VAES path of `secinfer_ot::AesCipher`; docs/gru-protocol.md);
/// k = 6 saves 0.32 MB more for GRU(100,64,30) CG-2 but puts GRU(10,128,30) over 0.3 s on
/// `lan` (docs/benchmarks.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OtFiller {
    Iknp,
    SoftSpoken { k: u32 },
    Ferret,
}

impl Default for OtFiller {
    fn default() -> Self {
        OtFiller::SoftSpoken { k: 5 }
    }
}

impl OtFiller {
    /// The handshake's name: `iknp`, `softspoken-k<k>` or `ferret`.
    pub fn name(self) -> String {
        match self {
            OtFiller::Iknp => "iknp".into(),
            OtFiller::SoftSpoken { k } => format!("softspoken-k{k}"),
            OtFiller::Ferret => "ferret".into(),
        }
    }
    pub(super) fn source(self) -> CotSource {
        match self {
            OtFiller::Iknp => CotSource::Iknp,
            OtFiller::SoftSpoken { k } => CotSource::SoftSpoken { k },
            OtFiller::Ferret => CotSource::Ferret(FerretParams::B13),
        }
    }
}

impl std::str::FromStr for OtFiller {
    type Err = String;
    /// `iknp`, `ferret`, `softspoken` (k = 2) or `softspoken-k<k>` with 1 ≤ k ≤ 8.
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        let bad =
            || format!("unknown OT filler {s:?} (iknp, softspoken, softspoken-k<1..=8>, ferret)");
        match s {
            "iknp" => Ok(OtFiller::Iknp),
            "ferret" => Ok(OtFiller::Ferret),
            "softspoken" => Ok(OtFiller::SoftSpoken { k: 2 }),
            o => {
                let k: u32 = o
                    .strip_prefix("softspoken-k")
                    .and_then(|k| k.parse().ok())
                    .ok_or_else(bad)?;
                if (1..=secinfer_ot::SOFTSPOKEN_MAX_K).contains(&k) {
                    Ok(OtFiller::SoftSpoken { k })
                } else {
                    Err(bad())
                }
            }
        }
    }
}

fn handshake_json(
    config: &ModelConfig,
    fp: &FixedPointConfig,
    v: Variant,
    steps: usize,
    reveal: bool,
) -> Result<serde_json::Value> {
    Ok(serde_json::json!({
        "protocol": PROTOCOL,
        "arch": arch_hash(config, fp, steps)?,
        "variant": v.name(),
        "steps": steps,
        "reveal_logits": reveal,
    }))
}

/// Client: sends the handshake (with the OT filler, the garbling scheme and where r and z are
/// computed: the client's choices, which the server follows) and reads the server's verdict.
pub(super) fn client_handshake<C: Channel>(
    ch: &mut C,
    m: &ClientModel,
    opts: ClientOptions,
    filler: OtFiller,
    garbling: Scheme,
) -> Result<()> {
    if opts.top_k > MAX_TOP_K {
        return Err(NnError::Input(format!(
            "top-{} asked; at most {MAX_TOP_K} indices",
            opts.top_k
        )));
    }
    if let Some(w) = opts.log_prob_of {
        if w >= m.arch.classes || opts.reveal_logits || opts.top_k > 1 {
            return Err(NnError::Input(format!(
                "log-probability of word {w}: needs a word below {} and neither logits nor top-k",
                m.arch.classes
            )));
        }
    }
    let mut hs = handshake_json(&m.config, &m.fp, m.variant, m.steps, opts.reveal_logits)?;
    hs["top_k"] = serde_json::Value::from(opts.indices(m.arch.classes));
    if opts.log_prob_of.is_some() {
        hs["log_prob"] = serde_json::Value::Bool(true);
    }
    hs["ot"] = serde_json::Value::from(filler.name());
    hs["garbling"] = serde_json::Value::from(garbling.name());
    hs["gates"] = serde_json::Value::from(if opts.gates_in_circuit {
        GATES_CIRCUIT
    } else {
        GATES_TABLES
    });
    ch.send_frame(hs.to_string().as_bytes())
        .map_err(NnError::from)?;
    // The reply is read with the handshake's own limit: a longer announced length is refused
    // before a buffer of that size exists.
    let reply = ch.recv_frame_limited(MAX_HANDSHAKE)?;
    let rv: serde_json::Value = serde_json::from_slice(&reply)
        .map_err(|e| NnError::Malformed(format!("handshake reply: {e}")))?;
    if rv["ok"] != serde_json::Value::Bool(true) {
        return Err(NnError::Refused(format!(
            "the server refused the session: {}",
            secinfer_net::sanitize_peer_text(rv["error"].as_str().unwrap_or("?"), 300)
        )));
    }
    Ok(())
}

/// The handshake's refusal of a logits request the server's policy does not allow.
pub const LOGITS_REFUSED: &str = "this server does not reveal logits (serve --allow-logits)";

/// What a server lets its clients learn beyond the class.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ServerPolicy {
    /// Whether a client may ask for the logits (`secinfer serve --allow-logits`). They tell
    /// more about the weights than the class does, so a served model refuses them by default.
    pub allow_logits: bool,
}

/// What the server accepted from the client's handshake.
pub(super) struct Agreed {
    pub(super) reveal: bool,
    pub(super) filler: OtFiller,
    pub(super) garbling: Scheme,
    pub(super) gates_in_circuit: bool,
    /// Indices the final circuit outputs (1: the argmax).
    pub(super) top_k: usize,
    /// The final circuit is the log-probability of a word the client names.
    pub(super) log_prob: bool,
}

/// Server: reads the client's handshake, checks it against this model and answers; a mismatch
/// is refused (the client is told why) and returned as an error.
pub(super) fn server_handshake<C: Channel>(
    ch: &mut C,
    m: &ServerModel,
    policy: ServerPolicy,
) -> Result<Agreed> {
    // Read with the handshake's own limit, before any large buffer.
    let hello = ch.recv_frame_limited(MAX_HANDSHAKE)?;
    let hv: serde_json::Value = serde_json::from_slice(&hello)
        .map_err(|e| NnError::Malformed(format!("handshake: {e}")))?;
    let reveal = hv["reveal_logits"].as_bool().unwrap_or(false);
    let want = handshake_json(&m.q.config, &m.fp, m.variant, m.steps, reveal)?;
    // The client picks the OT filler (a cost trade-off, not a security one); absent = the
    // default.
    let ot_src: std::result::Result<OtFiller, String> = match hv["ot"].as_str() {
        Some(name) => name.parse(),
        None => Ok(OtFiller::default()),
    };
    let mut problem = ot_src.as_ref().err().cloned();
    let log_prob = hv["log_prob"].as_bool().unwrap_or(false);
    if (reveal || log_prob) && !policy.allow_logits {
        problem = Some(LOGITS_REFUSED.to_string());
    }
    for k in ["protocol", "variant", "steps", "arch"] {
        if problem.is_none() && hv[k] != want[k] {
            problem = Some(format!(
                "{k} mismatch: client {}, server {}",
                hv[k], want[k]
            ));
            break;
        }
    }
    // The client picks the garbling scheme too (a cost trade-off: both are semi-honest secure
    // under the same hash assumption); the handshake always names it.
    let garbling = match hv["garbling"].as_str() {
        Some(name) => Scheme::parse(name).map_err(|e| e.to_string()),
        None => Err("the handshake names no garbling scheme".to_string()),
    };
    if problem.is_none() {
        problem = garbling.as_ref().err().cloned();
    }
    // And where r and z are computed (absent: lookup tables where they apply).
    let gates_in_circuit = match hv["gates"].as_str() {
        None | Some(GATES_TABLES) => false,
        Some(GATES_CIRCUIT) => true,
        Some(other) => {
            if problem.is_none() {
                problem = Some(format!(
                    "unknown gates {other:?} ({GATES_TABLES} or {GATES_CIRCUIT})"
                ));
            }
            false
        }
    };
    // How many indices the client learns (absent: the argmax).
    let classes = m.q.arch.classes;
    let top_k = match &hv["top_k"] {
        serde_json::Value::Null => Some(1),
        v => v
            .as_u64()
            .and_then(|k| usize::try_from(k).ok())
            .filter(|k| (1..=MAX_TOP_K.min(classes)).contains(k)),
    };
    if problem.is_none() && top_k.is_none() {
        problem = Some(format!(
            "top_k {} (1 to {} for {classes} logits)",
            hv["top_k"],
            MAX_TOP_K.min(classes)
        ));
    }
    if let Some(p) = problem {
        let _ = ch.send_frame(
            serde_json::json!({"ok": false, "error": p})
                .to_string()
                .as_bytes(),
        );
        let _ = ch.flush();
        return Err(NnError::Refused(p));
    }
    ch.send_frame(serde_json::json!({"ok": true}).to_string().as_bytes())
        .map_err(NnError::from)?;
    Ok(Agreed {
        reveal,
        filler: ot_src.unwrap_or_default(),
        garbling: garbling.unwrap_or(DEFAULT_GARBLING),
        gates_in_circuit,
        top_k: top_k.unwrap_or(1),
        log_prob,
    })
}
