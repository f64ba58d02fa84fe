//! One client session of the secure GRU, both roles, over any [`Channel`].
//!
//! Setup: handshake (protocol, architecture hash, variant, steps, OT filler), the client's BFV
//! public key (for re-randomising responses), the base OTs of two OT pools (server → client
//! with Δ = the free-XOR offset; client → server for the multiplexers' other direction).
//! Offline (Delphi-style, cryptogru::offline): HE products on the client's uniform masks ρ_x,
//! ρ_h; pool fills; COTs of every client circuit input (all known now) whose m0 are the zero
//! labels. Online: x − ρ_x for all t; per step A → product P → B → product Q → C → B2A of h',
//! the server learning m = h' + ρ_h; finally the garbled argmax. Each batch (circuit A, B or
//! C for all H elements) is garbled online, as soon as the server knows its inputs, which are
//! folded into the garbling (`BatchJob::g_known`): its tables travel instead of the server's
//! labels, 16 bytes per server input bit fewer (docs/gru-protocol.md, "Session 12").
//! Online each step is six flights: pooled OTs are split into choices and answers so both
//! directions share flights, and the products P = r·trunc(gh_n), Q = z·(h − n) and the B2A of h'
//! are decomposed into sender-first OTs whose correlations the server knows before the client's
//! bits exist (docs/gru-protocol.md, "Online flights", which also has the derivations).
use super::circuits::{
    final_circuit, index_bits, put, sigmoid_table, step_circuits, step_circuits_with, StepCircuits,
    StepLayout, GHN_BITS, LEAF_BITS, SHARE_BITS,
};
use super::coeff::{self, client_share, plain_affine, server_product, to_ring, Layout};
use crate::error::{NnError, Result};
use crate::fixed::{ActFormat, FixedPointConfig, Format, QuantizedModel};
use crate::model::{Candidate, ModelConfig};
pub use secinfer_gc::garble::Scheme;
use secinfer_gc::protocol::{
    garble_batches, pack_bits, recv_evaluate_known, unpack_bits, wire_outputs, BatchJob, Reveal,
};
use secinfer_gc::Circuit;
use secinfer_he::{Params, Plaintext, PublicKey, SecretKey, SeededCiphertext};
use secinfer_net::{Channel, Cost, Phase};
use secinfer_ot::{
    pack_words, packed_len, unpack_words, Block, CotSource, FerretParams, PooledOtReceiver,
    PooledOtSender, Prg,
};
use sha2::{Digest, Sha256};

/// Protocol identifier exchanged in the handshake.
pub const PROTOCOL: &str = "secinfer-gru/10";
/// How the session's AND gates are garbled unless the client asks otherwise (`/6`: the client
/// names the scheme in the handshake, the server follows; docs/gru-protocol.md, "Three-halves
/// garbling (wip-3h)"). Three-halves since `/8`: 23 % fewer table bytes, and since the HE
/// chunking of `/8` it is as fast on `lan` (0.185 vs 0.194 s for GRU(100,64,30) CG-2) and
/// within 0.3 s on `none` (docs/benchmarks.md, "Session 10").
pub const DEFAULT_GARBLING: Scheme = Scheme::ThreeHalves;
const HE_PARAMS: &str = "n8192-z2k32";
const MAX_HANDSHAKE: usize = 4096;
/// The handshake's refusal of a logits request the server's policy does not allow.
pub const LOGITS_REFUSED: &str = "this server does not reveal logits (serve --allow-logits)";

/// CryptoGRU's variants.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    /// tanh candidate, 20-bit activations.
    Baseline,
    /// ReLU candidate, 20-bit activations.
    Cg1,
    /// ReLU candidate, 8-bit sigmoid/ReLU (requantised around the GC).
    Cg2,
}

impl Variant {
    pub fn name(self) -> &'static str {
        match self {
            Variant::Baseline => "baseline",
            Variant::Cg1 => "cg1",
            Variant::Cg2 => "cg2",
        }
    }
    pub fn candidate(self) -> Candidate {
        match self {
            Variant::Baseline => Candidate::Tanh,
            _ => Candidate::Relu,
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
            o => Err(format!("unknown variant {o:?} (baseline, cg1, cg2)")),
        }
    }
}

/// The fixed-point configuration a variant runs: the model's `fx20` / `fx8` entry when it has
/// one, else the exporter's preset. Refuses a variant whose candidate differs from the model's.
pub fn fp_for_variant(config: &ModelConfig, v: Variant) -> Result<FixedPointConfig> {
    if config.arch.activation != v.candidate() {
        return Err(NnError::Input(format!(
            "variant {} needs a {} candidate activation; this model's is {}",
            v.name(),
            v.candidate().name(),
            config.arch.activation.name()
        )));
    }
    let name = if v == Variant::Cg2 { "fx8" } else { "fx20" };
    if let Some((_, fp)) = config.variants.iter().find(|(n, _)| n == name) {
        return check_fp(*fp);
    }
    let main = Format { bits: 20, frac: 12 };
    let fp = match v {
        Variant::Cg2 => FixedPointConfig {
            main,
            sigmoid: Some(ActFormat {
                input: Format { bits: 8, frac: 4 },
                output: Format { bits: 8, frac: 7 },
            }),
            candidate: Some(ActFormat {
                input: Format { bits: 8, frac: 4 },
                output: Format { bits: 8, frac: 4 },
            }),
        },
        _ => FixedPointConfig {
            main,
            sigmoid: None,
            candidate: None,
        },
    };
    check_fp(fp)
}

fn check_fp(fp: FixedPointConfig) -> Result<FixedPointConfig> {
    // The carry leaves split F into two digits of 1 to 8 bits (1-of-2^m OTs, m ≤ 8).
    if !(2..=16).contains(&fp.main.frac) {
        return Err(NnError::Input(format!(
            "main format ({}, {}): the secure GRU needs 2 to 16 fraction bits",
            fp.main.bits, fp.main.frac
        )));
    }
    if fp.main.bits + fp.main.frac > coeff::T_BITS {
        return Err(NnError::Input(format!(
            "main format ({}, {}) needs a 2^{} ring; the secure GRU runs over 2^32",
            fp.main.bits,
            fp.main.frac,
            fp.main.bits + fp.main.frac
        )));
    }
    Ok(fp)
}

fn arch_hash(config: &ModelConfig, fp: &FixedPointConfig, steps: usize) -> String {
    let a = &config.arch;
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
    d.iter().take(16).map(|b| format!("{b:02x}")).collect()
}

fn net(e: secinfer_net::NetError) -> NnError {
    NnError::Net(e.to_string())
}
fn gc(e: secinfer_gc::GcError) -> NnError {
    NnError::Crypto(format!("GC: {e}"))
}
fn ot(e: secinfer_ot::OtError) -> NnError {
    NnError::Crypto(format!("OT: {e}"))
}
fn he(e: secinfer_he::HeError) -> NnError {
    NnError::Crypto(format!("HE: {e}"))
}

/// What one party measured.
#[derive(Clone, Debug, Default)]
pub struct SessionReport {
    pub cost: Cost,
    /// Bytes (both directions) of garbled-circuit traffic: tables, labels, COTs, base OTs.
    pub gc_bytes: u64,
    /// Bytes (both directions) of HE traffic: public key, uploads, responses, and the masked
    /// inputs x − ρ_x.
    pub he_bytes: u64,
    /// Bytes (both directions) of the gate products: base OTs of the client-to-server OT
    /// extension, multiplexer OTs, and the client's share corrections P_c − π_P, Q_c − π_Q.
    pub mux_bytes: u64,
    pub and_gates: u64,
    /// AND gates per element and step of the step circuits this session ran.
    pub and_per_element_step: u64,
    pub steps: usize,
    /// Weakest statistical-flooding exponent of the server's responses (server side only).
    pub flood_stat_bits: f64,
    /// The AND-gate scheme the session's tables used.
    pub garbling: Scheme,
    /// Whether r and z came from OT lookup tables (cryptogru::gate_luts) rather than circuit A.
    pub gate_tables: bool,
    /// Whether the session revealed the logits to the client (server side: what it showed).
    pub logits_revealed: bool,
}

/// Bytes (both directions) so far on a channel.
fn bytes<C: Channel>(ch: &C) -> u64 {
    let c = ch.cost();
    c.setup.bytes() + c.offline.bytes() + c.online.bytes()
}

/// Counts a sub-protocol's bytes into one bucket.
struct Acc {
    mark: u64,
}
impl Acc {
    fn start<C: Channel>(ch: &C) -> Acc {
        Acc { mark: bytes(ch) }
    }
    fn take<C: Channel>(&mut self, ch: &C) -> u64 {
        let b = bytes(ch);
        let d = b - self.mark;
        self.mark = b;
        d
    }
}

/// The layout of a projection whose `steps` input vectors are all known offline (input masks,
/// hidden masks): the column chunks and group size with the fewest bytes (`Layout::batched`).
/// Its weight plaintexts (blocks × chunks of them, ≈ 131 KB each in NTT form) are the server's
/// per-model memory: 121 for GRU(100,64,30), 201 for GRU(10,128,30).
fn input_layout(params: &Params, rows: usize, cols: usize, steps: usize) -> Result<Layout> {
    Layout::batched(
        rows,
        cols,
        params.n(),
        steps,
        coeff::upload_len(params),
        |results| coeff::response_bytes(params, results),
    )
}

/// The server's prepared model (shared by all sessions).
pub struct ServerModel {
    pub q: QuantizedModel,
    pub variant: Variant,
    pub fp: FixedPointConfig,
    pub steps: usize,
    params: Params,
    ih: (Layout, Vec<Plaintext>),
    hh: (Layout, Vec<Plaintext>),
    fc: (Layout, Vec<Plaintext>),
    step: StepCircuits,
}

impl ServerModel {
    /// Prepares the weight plaintexts and the step circuit. `q` must be quantised with
    /// `fp_for_variant(&q.config, variant)`; `steps` is the sequence length T.
    pub fn new(q: QuantizedModel, variant: Variant, steps: usize) -> Result<ServerModel> {
        let fp = fp_for_variant(&q.config, variant)?;
        if fp != q.fp {
            return Err(NnError::Input(
                "the model is quantised with another fixed-point configuration than the variant's"
                    .into(),
            ));
        }
        let params = Params::by_name(HE_PARAMS).map_err(he)?;
        let a = &q.config.arch;
        let (e, h, c) = (a.embed_dim, a.hidden, a.classes);
        let n = params.n();
        let ih = input_layout(&params, 3 * h, e, steps)?;
        // The hidden projections are taken on the client's masks ρ_h(1..T−1), all known
        // offline: batched like the input projections.
        let hh = input_layout(&params, 3 * h, h, steps.saturating_sub(1).max(1))?;
        let fcl = Layout::new(c, h, n)?;
        let ih = (ih, ih.weight_plaintexts(&params, &q.w_ih)?);
        let hh = (hh, hh.weight_plaintexts(&params, &q.w_hh)?);
        let fc = (fcl, fcl.weight_plaintexts(&params, &q.w_fc)?);
        let step = step_circuits(&fp, a.activation == Candidate::Tanh);
        check_state_exact(&step.lay)?;
        Ok(ServerModel {
            q,
            variant,
            fp,
            steps,
            params,
            ih,
            hh,
            fc,
            step,
        })
    }
    /// AND gates per element and step of the default step circuits (gate tables where they
    /// apply; a session's own count is [`SessionReport::and_per_element_step`]).
    pub fn and_gates_per_step_element(&self) -> u64 {
        self.step.and_count()
    }
    /// The step circuits' public shape.
    pub fn step_layout(&self) -> StepLayout {
        self.step.lay
    }
}

/// The client's public view of the model: architecture, formats, quantised embedding table.
pub struct ClientModel {
    pub config: ModelConfig,
    pub variant: Variant,
    pub fp: FixedPointConfig,
    /// Quantised embedding table (V × E, main format).
    pub embed: Vec<i64>,
    pub steps: usize,
}

impl ClientModel {
    pub fn new(
        config: ModelConfig,
        embed_f32: &[f32],
        variant: Variant,
        steps: usize,
    ) -> Result<ClientModel> {
        let fp = fp_for_variant(&config, variant)?;
        let embed = embed_f32
            .iter()
            .map(|&v| fp.main.quantize(v as f64).0)
            .collect();
        Ok(ClientModel {
            config,
            variant,
            fp,
            embed,
            steps,
        })
    }
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
    /// (docs/gru-protocol.md, "Session 11"). A cost trade-off, not a security one.
    pub gates_in_circuit: bool,
}

/// The handshake's names for where r and z are computed.
const GATES_TABLES: &str = "tables";
const GATES_CIRCUIT: &str = "circuit";

/// What fills the session's pool of random COTs (all OTs of the session are drawn from it and
/// derandomised at one bit each): IKNP (16 bytes per COT, cheap to compute), SoftSpokenOT with
/// k bits per chunk (16/k bytes per COT, CPU growing like 2^k/k: `secinfer bench ot --kind
/// softspoken`) or Ferret silent OT (≈ 1.5 MB once for setup and one iteration of 10^7 COTs,
/// then nearly free, but an iteration of 10^7 COTs takes ≈ 1.3 s on two cores: `secinfer bench
/// ot --kind ferret`). A cost trade-off, not a security one: all are semi-honest secure.
///
/// The default (`secinfer-gru/5`) is SoftSpokenOT with k = 4: 4 bytes per COT instead of IKNP's
/// 16 (GRU(10,128,30) CG-2 90.3 → 76.7 MB, GRU(100,64,30) 46.5 → 39.7 MB) at the same session
/// time on two cores since the VAES path of `secinfer_ot::AesCipher` (docs/gru-protocol.md).
/// Since `/8` it is k = 5 (3.2 bytes per COT): −0.48 MB for GRU(100,64,30) CG-2 at the same
/// time within noise on `none` and `lan`; k = 6 saves 0.32 MB more but puts GRU(10,128,30)
/// over 0.3 s on `lan` (docs/benchmarks.md, "Session 10").
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
    fn source(self) -> CotSource {
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

/// What the client learns.
#[derive(Clone, Debug)]
pub struct GruOutcome {
    pub class: usize,
    pub logits: Option<Vec<i64>>,
    pub report: SessionReport,
}

fn handshake_json(
    config: &ModelConfig,
    fp: &FixedPointConfig,
    v: Variant,
    steps: usize,
    reveal: bool,
) -> serde_json::Value {
    serde_json::json!({
        "protocol": PROTOCOL,
        "arch": arch_hash(config, fp, steps),
        "variant": v.name(),
        "steps": steps,
        "reveal_logits": reveal,
    })
}

fn bits_of(out: &mut Vec<bool>, v: u64, w: usize) {
    out.extend((0..w).map(|i| (v >> i) & 1 == 1));
}

fn word(bits: &[bool]) -> u64 {
    bits.iter()
        .enumerate()
        .fold(0u64, |a, (i, &b)| a | ((b as u64) << i))
}

fn sign_extend(v: u64, bits: usize) -> i64 {
    let sh = 64 - bits;
    ((v << sh) as i64) >> sh
}

/// Shares live mod 2^32 (the HE plaintext modulus).
const RING: u64 = 0xffff_ffff;

fn neg(v: u64) -> u64 {
    v.wrapping_neg() & RING
}

fn ring_mask(bits: usize) -> u64 {
    if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    }
}

#[cfg(test)]
fn bit_vec(v: u64, w: usize) -> Vec<bool> {
    (0..w).map(|i| (v >> i) & 1 == 1).collect()
}

/// The client's per-element, per-step masks (secret; no `Debug`).
/// Its circuit inputs in place of its online shares: π_P, π_Q (PW bits) for the products,
/// μ (bo bits) for its XOR share of y.
struct ElemMasks {
    pi_p: u64,
    pi_q: u64,
    mu: u64,
    /// Its XOR shares of the carry leaves of gi_r, gi_z, gi_n (cryptogru::carry_leaves).
    tau: [[bool; LEAF_BITS]; CARRIES],
    /// v mod 2^L per carry: the client's additive share of it is −v, the server's carry + v
    /// (cryptogru::carry_shares).
    v: [u64; CARRIES],
    /// Its XOR shares of the leaves of gh_r, gh_z, gh_n's carries (`StepLayout::gh_leaves`).
    tau_h: [[bool; LEAF_BITS]; 3],
}

impl ElemMasks {
    fn draw(prg: &mut Prg, lay: &StepLayout) -> ElemMasks {
        let mut r = |bits: usize| prg.next_block().low_u64() & ring_mask(bits);
        let (pi_p, pi_q, mu, t) = (r(lay.pw), r(lay.pw), r(lay.bo), r(LEAF_BITS * CARRIES));
        ElemMasks {
            pi_p,
            pi_q,
            mu,
            v: std::array::from_fn(|_| r(lay.l)),
            tau_h: {
                let t = r(3 * LEAF_BITS);
                std::array::from_fn(|g| {
                    std::array::from_fn(|k| (t >> (g * LEAF_BITS + k)) & 1 == 1)
                })
            },
            tau: std::array::from_fn(|g| {
                std::array::from_fn(|k| (t >> (g * LEAF_BITS + k)) & 1 == 1)
            }),
        }
    }
}

/// B2A (cryptogru::b2a): additive shares mod 2^k of L-bit two's-complement words given by their
/// XOR-shared bits (L per word), sign-extended into Z_{2^k}. Per bit with weight w (2^j, or
/// −2^(L−1) for the sign), w·(a ⊕ b) = w·a + b·w·(1 − 2a), the second term one additively
/// correlated OT with the server (bit a) as sender and the client's bit b as choice.
/// The bit weights mod 2^k.
fn b2a_weight(j: usize, l: usize, pm: u64) -> u64 {
    let x = 1u64 << j;
    if j == l - 1 {
        x.wrapping_neg() & pm
    } else {
        x & pm
    }
}

fn check_b2a(bits: &[bool], l: usize) -> Result<()> {
    if l == 0 || !bits.len().is_multiple_of(l) {
        return Err(NnError::Protocol("b2a: bit count".into()));
    }
    Ok(())
}

/// Server: the OT correlations w_j·(1 − 2a_j).
fn b2a_deltas(bits: &[bool], l: usize, k: usize) -> Result<Vec<u64>> {
    check_b2a(bits, l)?;
    let pm = ring_mask(k);
    Ok(bits
        .iter()
        .enumerate()
        .map(|(i, &a)| {
            let w = b2a_weight(i % l, l, pm);
            if a {
                w.wrapping_neg() & pm
            } else {
                w
            }
        })
        .collect())
}

/// Server: its word shares Σ_j (w_j·a_j − x_j), x_j its OT outputs.
fn b2a_server(bits: &[bool], x: &[u64], l: usize, k: usize) -> Result<Vec<u64>> {
    check_b2a(bits, l)?;
    if x.len() != bits.len() {
        return Err(NnError::Protocol("b2a: OT count".into()));
    }
    let pm = ring_mask(k);
    let terms: Vec<u64> = bits
        .iter()
        .enumerate()
        .zip(x)
        .map(|((i, &a), x)| if a { b2a_weight(i % l, l, pm) } else { 0 }.wrapping_sub(*x))
        .collect();
    Ok(sum_chunks(&terms, l, pm))
}

/// Client: its word shares, the sums of its OT outputs.
fn b2a_client(terms: &[u64], l: usize, k: usize) -> Result<Vec<u64>> {
    if l == 0 || !terms.len().is_multiple_of(l) {
        return Err(NnError::Protocol("b2a: OT count".into()));
    }
    Ok(sum_chunks(terms, l, ring_mask(k)))
}

fn sum_chunks(terms: &[u64], l: usize, pm: u64) -> Vec<u64> {
    terms
        .chunks(l)
        .map(|t| t.iter().fold(0u64, |a, x| a.wrapping_add(*x)) & pm)
        .collect()
}

/// [`b2a`] pieces run as one sub-protocol (tests): `early` uses the sender-first OT (the
/// session's B2A of h'), else the split pooled OT (the session's B2As of trunc(gh_n) and h − n).
#[cfg(test)]
fn b2a<C: Channel>(
    ot: std::result::Result<&mut PooledOtSender, &mut PooledOtReceiver>,
    ch: &mut C,
    bits: &[bool],
    l: usize,
    k: usize,
    early: bool,
) -> Result<Vec<u64>> {
    check_b2a(bits, l)?;
    match ot {
        Ok(s) => {
            let deltas = b2a_deltas(bits, l, k)?;
            let x = if early {
                let p = s
                    .send_correlated_early(ch, &deltas, k as u32)
                    .map_err(self::ot)?;
                ch.flush().map_err(net)?;
                s.finish_early(ch, p).map_err(self::ot)?
            } else {
                let p = s.recv_choices(ch, bits.len()).map_err(self::ot)?;
                let x = s
                    .send_correlated_answer(ch, p, &deltas, k as u32)
                    .map_err(self::ot)?;
                ch.flush().map_err(net)?;
                x
            };
            b2a_server(bits, &x, l, k)
        }
        Err(r) => {
            let t = if early {
                let p = r
                    .recv_correlated_early(ch, bits.len(), k as u32)
                    .map_err(self::ot)?;
                let t = r.finish_early(ch, p, bits).map_err(self::ot)?;
                ch.flush().map_err(net)?;
                t
            } else {
                let p = r.send_choices(ch, bits).map_err(self::ot)?;
                ch.flush().map_err(net)?;
                r.recv_correlated_answer(ch, p, k as u32)
                    .map_err(self::ot)?
            };
            b2a_client(&t, l, k)
        }
    }
}

/// The product Q = z·(h − n) is taken on the parties' shares of h, which is only right when the
/// reference never wraps h − n ([`StepLayout::for_step`]'s range proof): the fixed-point formats
/// of every variant satisfy it; others are refused.
fn check_state_exact(lay: &StepLayout) -> Result<()> {
    if lay.state_exact {
        Ok(())
    } else {
        Err(NnError::config(
            "fixed-point formats: the secure GRU needs a sigmoid in [0, 1] and a candidate output \
             with no more fraction bits than the main format, so that h − n never wraps",
        ))
    }
}

/// COTs a session draws from its pools: server-to-client (the client's circuit labels, then per
/// step the sender-first OTs of P and Q, the B2A of h' and the gate tables' 1-of-2^b OTs) and
/// client-to-server (the client's direction of both products: r·b and z·h_c).
fn pool_sizes(lay: &StepLayout, steps: usize, h: usize, labels: usize) -> (usize, usize) {
    let luts = lay.lut.map_or(0, |b| 2 * b);
    let per_step_fwd = h * (p_early_len(lay) + q_early_len(lay) + lay.hw + luts);
    // The client → server pool also makes the random 1-of-2^m OTs of the input projections'
    // carry leaves (F COTs per carry; carries r, z, n per element and step), their carry shares'
    // 1-of-8 OTs (3 more per carry) and, with `gh_leaves`, the hidden projections' leaves (F per
    // carry, three per element and step).
    let gh = if lay.gh_leaves() { 3 * lay.f } else { 0 };
    let per_step_rev = h * (2 * lay.gb + CARRIES * (lay.f + LEAF_BITS) + gh);
    (labels + steps * per_step_fwd, steps * per_step_rev)
}

/// Input-projection carries per element and step: gates r, z and the candidate's gi_n.
const CARRIES: usize = 3;

// The input projections' carry leaves ([`LEAF_BITS`]) come from random 1-of-2^m OTs at the
// start of the online phase (the input projections are known then for every step), and a random
// 1-of-8 OT on the server's three leaf bits turns them into additive shares of the carry mod 2^L
// (cryptogru::carry_shares): four flights per session, none per step, and no carry left for the
// circuits. The hidden projections' leaves (`StepLayout::gh_leaves`) are made per step, once
// m(t) is known: two flights per step, three bits per party into circuit A.

/// Random 1-of-N OTs from a pool in calls of [`LEAF_CHUNK`] rows, each key cut by `keep` at
/// once (so a session holds a few bytes per key, not 16): the sender's every key, row-major.
fn random_n_sender<C: Channel, T>(
    s: &mut PooledOtSender,
    ch: &mut C,
    n: usize,
    k: usize,
    keep: impl Fn(Block) -> T,
) -> Result<Vec<T>> {
    let mut keys = Vec::with_capacity(k * n);
    let mut done = 0;
    while done < k {
        let c = LEAF_CHUNK.min(k - done);
        let ks = s.take_random_n(ch, n, c).map_err(ot)?;
        keys.extend(ks.into_iter().map(&keep));
        done += c;
    }
    Ok(keys)
}

/// [`random_n_sender`]'s receiver: each row's random choice and its key, cut by `keep`.
fn random_n_receiver<C: Channel, T>(
    r: &mut PooledOtReceiver,
    ch: &mut C,
    n: usize,
    k: usize,
    keep: impl Fn(Block) -> T,
) -> Result<(Vec<u8>, Vec<T>)> {
    let (mut choices, mut keys) = (Vec::with_capacity(k), Vec::with_capacity(k));
    let mut done = 0;
    while done < k {
        let c = LEAF_CHUNK.min(k - done);
        let (cs, ks) = r.take_random_n(ch, n, c).map_err(ot)?;
        choices.extend(cs);
        keys.extend(ks.into_iter().map(&keep));
        done += c;
    }
    Ok((choices, keys))
}

/// The carry leaves' random 1-of-2^m OTs (cryptogru::carry_leaves), made offline from the
/// client → server pool: the client (sender) holds every key of each, the server (receiver) a
/// random choice r and K_r. Secret (no `Debug`).
struct LeafKeys {
    /// The two low bits of each key (all a leaf's pads need): client, k × 2^m_hi keys then
    /// k × 2^m_lo keys, row-major; server, K_r per leaf, high leaves first.
    keys: Vec<u8>,
    /// Server: the random choices r, high leaves first (empty for the client).
    choices: Vec<u8>,
}

/// Leaves per `take_random_n` call: the hashed keys of a call (16 bytes each) are cut to their
/// two low bits at once, so a session holds 1 byte per key, not 16.
const LEAF_CHUNK: usize = 2048;

impl LeafKeys {
    fn client<C: Channel>(
        s: &mut PooledOtSender,
        ch: &mut C,
        lay: &StepLayout,
        k: usize,
    ) -> Result<Self> {
        let (mh, ml) = lay.leaf_digits();
        let mut keys = random_n_sender(s, ch, 1 << mh, k, low_two_bits)?;
        keys.extend(random_n_sender(s, ch, 1 << ml, k, low_two_bits)?);
        Ok(LeafKeys {
            keys,
            choices: Vec::new(),
        })
    }
    fn server<C: Channel>(
        r: &mut PooledOtReceiver,
        ch: &mut C,
        lay: &StepLayout,
        k: usize,
    ) -> Result<Self> {
        let (mh, ml) = lay.leaf_digits();
        let (mut choices, mut keys) = random_n_receiver(r, ch, 1 << mh, k, low_two_bits)?;
        let (cs, ks) = random_n_receiver(r, ch, 1 << ml, k, low_two_bits)?;
        choices.extend(cs);
        keys.extend(ks);
        Ok(LeafKeys { keys, choices })
    }
}

fn low_two_bits(b: Block) -> u8 {
    (b.0 & 3) as u8
}

/// The carry shares' random 1-of-8 OTs (cryptogru::carry_shares), made offline from the
/// client → server pool like the leaves': the client holds the 8 keys of each carry, the server
/// a random choice r and K_r, each key cut to its low 32 bits (a pad needs L ≤ 30). Secret (no
/// `Debug`).
struct CarryKeys {
    keys: Vec<u32>,
    /// Server: the random choices (empty for the client).
    choices: Vec<u8>,
}

/// Entries of a carry-share table: one per value of the server's three leaf bits.
const CARRY_TABLE: usize = 1 << LEAF_BITS;

impl CarryKeys {
    fn client<C: Channel>(s: &mut PooledOtSender, ch: &mut C, k: usize) -> Result<Self> {
        Ok(CarryKeys {
            keys: random_n_sender(s, ch, CARRY_TABLE, k, |b| b.0 as u32)?,
            choices: Vec::new(),
        })
    }
    fn server<C: Channel>(r: &mut PooledOtReceiver, ch: &mut C, k: usize) -> Result<Self> {
        let (choices, keys) = random_n_receiver(r, ch, CARRY_TABLE, k, |b| b.0 as u32)?;
        Ok(CarryKeys { keys, choices })
    }
}

/// The gate tables' random 1-of-2^b OTs (cryptogru::gate_luts), made offline from the
/// server → client pool: the server (sender) holds every key of each, the client a random
/// choice and its key, each cut to 16 bits (a pad needs gb ≤ 16). Two per element and step (r,
/// z), table u = (t·2 + gate)·H + i. Secret (no `Debug`).
struct LutKeys {
    keys: Vec<u16>,
    /// Client: the random choices (empty for the server).
    choices: Vec<u8>,
}

impl LutKeys {
    fn server<C: Channel>(s: &mut PooledOtSender, ch: &mut C, nb: usize, k: usize) -> Result<Self> {
        Ok(LutKeys {
            keys: random_n_sender(s, ch, 1 << nb, k, |b| b.0 as u16)?,
            choices: Vec::new(),
        })
    }
    fn client<C: Channel>(
        r: &mut PooledOtReceiver,
        ch: &mut C,
        nb: usize,
        k: usize,
    ) -> Result<Self> {
        let (choices, keys) = random_n_receiver(r, ch, 1 << nb, k, |b| b.0 as u16)?;
        Ok(LutKeys { keys, choices })
    }
}

/// Client, online (cryptogru::gate_luts, first flight): d = x ⊕ c per table (b bits), x its XOR
/// share of the saturated sigmoid input (circuit A's output), c the OT's random choice; tables
/// `first..first + count` of the session's.
fn lut_derand(keys: &LutKeys, first: usize, x: &[bool], nb: usize) -> Result<Vec<bool>> {
    let k = x.len() / nb.max(1);
    if nb == 0 || x.len() != k * nb || keys.choices.len() < first + k {
        return Err(NnError::Protocol("gate tables: OT count".into()));
    }
    let mut out = Vec::with_capacity(x.len());
    for (u, xb) in x.chunks(nb).enumerate() {
        put(&mut out, word(xb) ^ keys.choices[first + u] as u64, nb);
    }
    Ok(out)
}

/// Server, online (second flight): per table, entry j of 2^b is σ(a ⊕ j) ⊕ ω padded with the low
/// gb bits of K_{j ⊕ d}, packed at gb bits; a its XOR share of the sigmoid input (its permute
/// bits of A's output), ω its share of the gate value (drawn offline).
fn lut_tables(
    table: &[u64],
    keys: &LutKeys,
    first: usize,
    a: &[bool],
    omega: &[u64],
    d: &[bool],
    gb: usize,
) -> Result<Vec<u8>> {
    let n = table.len();
    let nb = n.trailing_zeros() as usize;
    let k = omega.len();
    if !n.is_power_of_two()
        || nb == 0
        || a.len() != k * nb
        || d.len() != k * nb
        || keys.keys.len() < (first + k) * n
    {
        return Err(NnError::Protocol("gate tables: table count".into()));
    }
    let gm = ring_mask(gb);
    let mut entries = vec![0u64; k * n];
    {
        use rayon::prelude::*;
        entries.par_chunks_mut(n).enumerate().for_each(|(u, row)| {
            let au = word(&a[u * nb..(u + 1) * nb]) as usize;
            let du = word(&d[u * nb..(u + 1) * nb]) as usize;
            let kr = &keys.keys[(first + u) * n..(first + u + 1) * n];
            for (j, e) in row.iter_mut().enumerate() {
                *e = (table[au ^ j] ^ omega[u] ^ kr[j ^ du] as u64) & gm;
            }
        });
    }
    pack_words(&entries, gb as u32).map_err(ot)
}

/// Client, online: its XOR shares of the gate values (gb bits per table), entry x of its table
/// unpadded with K_c.
fn lut_outputs(
    keys: &LutKeys,
    first: usize,
    x: &[bool],
    nb: usize,
    gb: usize,
    tables: &[u8],
) -> Result<Vec<bool>> {
    let n = 1usize << nb;
    let k = x.len() / nb.max(1);
    if nb == 0 || x.len() != k * nb || keys.keys.len() < first + k || keys.choices.len() < first + k
    {
        return Err(NnError::Protocol("gate tables: OT count".into()));
    }
    if tables.len() != packed_len(k * n, gb as u32) {
        return Err(NnError::Protocol("gate tables: frame size".into()));
    }
    let mut out = Vec::with_capacity(k * gb);
    for (u, xb) in x.chunks(nb).enumerate() {
        let off = (u * n + word(xb) as usize) * gb;
        let v = (0..gb).fold(0u64, |acc, i| acc | (get_bit(tables, off + i) as u64) << i);
        put(&mut out, v ^ keys.keys[first + u] as u64, gb);
    }
    Ok(out)
}

/// A carry's three leaf bits as a table index: lt_hi, eq_hi, lt_lo from bit 0 up.
fn leaf_index(x: &[bool; LEAF_BITS]) -> usize {
    x.iter()
        .enumerate()
        .fold(0, |a, (i, &b)| a | (b as usize) << i)
}

/// The carry lt_hi ⊕ (eq_hi ∧ lt_lo) of the leaf bits given as a table index.
fn carry_of_index(x: usize) -> u64 {
    ((x & 1) ^ ((x >> 1) & (x >> 2) & 1)) as u64
}

/// Server, online (cryptogru::carry_shares, first flight): d = x ⊕ r per carry (3 bits), x its
/// XOR shares of the carry's leaf bits.
fn carry_derand(keys: &CarryKeys, leaves: &[[bool; LEAF_BITS]]) -> Result<Vec<bool>> {
    if keys.choices.len() != leaves.len() {
        return Err(NnError::Protocol("carry shares: OT count".into()));
    }
    let mut out = Vec::with_capacity(leaves.len() * LEAF_BITS);
    for (x, &r) in leaves.iter().zip(&keys.choices) {
        put(&mut out, (leaf_index(x) ^ r as usize) as u64, LEAF_BITS);
    }
    Ok(out)
}

/// Bytes of the client's carry-share tables for `k` carries: 8 entries of L bits each.
fn carry_table_bytes(lay: &StepLayout, k: usize) -> usize {
    packed_len(k * CARRY_TABLE, lay.l as u32)
}

/// Client, online (second flight): per carry, entry x of 8 is (carry(x ⊕ τ) + v) mod 2^L
/// padded with the low L bits of K_{x ⊕ d}; τ its leaf shares, v its mask (its own share of the
/// carry is −v).
fn carry_tables(
    lay: &StepLayout,
    keys: &CarryKeys,
    tau: &[[bool; LEAF_BITS]],
    v: &[u64],
    d: &[bool],
) -> Result<Vec<u8>> {
    let k = tau.len();
    if v.len() != k || d.len() != k * LEAF_BITS || keys.keys.len() != k * CARRY_TABLE {
        return Err(NnError::Protocol("carry shares: table count".into()));
    }
    let pm = ring_mask(lay.l);
    let mut entries = Vec::with_capacity(k * CARRY_TABLE);
    for j in 0..k {
        let t = leaf_index(&tau[j]);
        let dj = word(&d[j * LEAF_BITS..(j + 1) * LEAF_BITS]) as usize;
        let row = &keys.keys[j * CARRY_TABLE..(j + 1) * CARRY_TABLE];
        entries.extend(
            (0..CARRY_TABLE)
                .map(|x| (carry_of_index(x ^ t).wrapping_add(v[j]) ^ row[x ^ dj] as u64) & pm),
        );
    }
    pack_words(&entries, lay.l as u32).map_err(ot)
}

/// Server, online: its additive shares (mod 2^L) of each carry, carry + v, read from the
/// client's tables at its own leaf bits.
fn carry_shares(
    lay: &StepLayout,
    keys: &CarryKeys,
    leaves: &[[bool; LEAF_BITS]],
    tables: &[u8],
) -> Result<Vec<u64>> {
    let k = leaves.len();
    if keys.keys.len() != k {
        return Err(NnError::Protocol("carry shares: key count".into()));
    }
    let entries = unpack_words(tables, k * CARRY_TABLE, lay.l as u32).map_err(ot)?;
    let pm = ring_mask(lay.l);
    Ok(leaves
        .iter()
        .zip(&keys.keys)
        .enumerate()
        .map(|(j, (x, &key))| (entries[j * CARRY_TABLE + leaf_index(x)] ^ key as u64) & pm)
        .collect())
}

/// The digits of the server's complemented low bits s' = 2^F − 1 − (s mod 2^F): the carry of
/// s + c out of F bits is [s' < c].
fn leaf_digits_of(lay: &StepLayout, v: u64, server: bool) -> (u64, u64) {
    let (_, ml) = lay.leaf_digits();
    let lo = ring_mask(lay.f);
    let x = if server { lo - (v & lo) } else { v & lo };
    (x >> ml, x & ring_mask(ml))
}

/// Server, online (cryptogru::carry_leaves, first flight): d = s'_digit ⊕ r for every leaf
/// (m bits each, high leaves then low ones) from its low bits `s` of each carry's gi share.
fn leaf_derand(lay: &StepLayout, keys: &LeafKeys, s: &[u64]) -> Result<Vec<bool>> {
    let (mh, ml) = lay.leaf_digits();
    let k = s.len();
    if keys.choices.len() != 2 * k {
        return Err(NnError::Protocol("carry leaves: OT count".into()));
    }
    let mut out = Vec::with_capacity(k * lay.f);
    for (part, m) in [(0usize, mh), (1, ml)] {
        for (j, &v) in s.iter().enumerate() {
            let (hi, lo) = leaf_digits_of(lay, v, true);
            let digit = if part == 0 { hi } else { lo };
            put(&mut out, digit ^ keys.choices[part * k + j] as u64, m);
        }
    }
    Ok(out)
}

/// Carries per group of the leaves' table frame: a group's high tables are 8 × 2^m_hi 2-bit
/// fields (2^(m_hi + 1) whole bytes), its low tables 8 × 2^m_lo bits (2^m_lo bytes).
const LEAF_GROUP: usize = 8;

/// Bytes of the client's table frame for `k` carries (the last group zero-padded).
fn leaf_table_bytes(lay: &StepLayout, k: usize) -> usize {
    let (mh, ml) = lay.leaf_digits();
    k.div_ceil(LEAF_GROUP) * (2 * (1 << mh) + (1 << ml))
}

fn set_bit(buf: &mut [u8], i: usize, v: bool) {
    buf[i / 8] |= (v as u8) << (i % 8);
}

fn get_bit(buf: &[u8], i: usize) -> bool {
    (buf[i / 8] >> (i % 8)) & 1 == 1
}

/// Client, online (second flight): for every carry the high leaf's table (2^m_hi entries of
/// ([x < c_hi] ⊕ τ_lt, [x = c_hi] ⊕ τ_eq), 2 bits) and the low leaf's (2^m_lo entries of
/// [x < c_lo] ⊕ τ_lo, 1 bit), entry x padded with the low bits of K_{x ⊕ d}; groups of
/// [`LEAF_GROUP`] carries ([their high tables][their low tables]) built in parallel. `c` are its
/// low bits of each gi share, `tau` its output shares (its circuit inputs, drawn offline).
fn leaf_tables(
    lay: &StepLayout,
    keys: &LeafKeys,
    c: &[u64],
    tau: &[[bool; LEAF_BITS]],
    d: &[bool],
) -> Result<Vec<u8>> {
    use rayon::prelude::*;
    let (mh, ml) = lay.leaf_digits();
    let (nh, nl) = (1usize << mh, 1usize << ml);
    let k = c.len();
    if tau.len() != k || d.len() != k * lay.f || keys.keys.len() != k * (nh + nl) {
        return Err(NnError::Protocol("carry leaves: table count".into()));
    }
    let gbytes = 2 * nh + nl;
    let mut out = vec![0u8; leaf_table_bytes(lay, k)];
    out.par_chunks_mut(gbytes).enumerate().for_each(|(g, buf)| {
        let (hi_buf, lo_buf) = buf.split_at_mut(2 * nh);
        for u in 0..LEAF_GROUP.min(k - g * LEAF_GROUP) {
            let j = g * LEAF_GROUP + u;
            let (hi, lo) = leaf_digits_of(lay, c[j], false);
            let t = tau[j];
            let dh = word(&d[j * mh..(j + 1) * mh]) as usize;
            let dl = word(&d[k * mh + j * ml..k * mh + (j + 1) * ml]) as usize;
            let row = &keys.keys[j * nh..(j + 1) * nh];
            for x in 0..nh {
                let pad = row[x ^ dh];
                let b = 2 * (u * nh + x);
                set_bit(hi_buf, b, ((x as u64) < hi) ^ t[0] ^ (pad & 1 == 1));
                set_bit(hi_buf, b + 1, (x as u64 == hi) ^ t[1] ^ (pad & 2 == 2));
            }
            let row = &keys.keys[k * nh + j * nl..k * nh + (j + 1) * nl];
            for x in 0..nl {
                let v = ((x as u64) < lo) ^ t[2] ^ (row[x ^ dl] & 1 == 1);
                set_bit(lo_buf, u * nl + x, v);
            }
        }
    });
    Ok(out)
}

/// Server, online: its XOR shares of each carry's leaf bits, read from the client's tables at
/// its own digits (entry s' padded with K_r, d = s' ⊕ r).
fn leaf_outputs(
    lay: &StepLayout,
    keys: &LeafKeys,
    s: &[u64],
    tables: &[u8],
) -> Result<Vec<[bool; LEAF_BITS]>> {
    let (mh, ml) = lay.leaf_digits();
    let (nh, nl) = (1usize << mh, 1usize << ml);
    let k = s.len();
    if tables.len() != leaf_table_bytes(lay, k) || keys.keys.len() != 2 * k {
        return Err(NnError::Protocol("carry leaves: table size".into()));
    }
    let gbytes = 2 * nh + nl;
    Ok(s.iter()
        .enumerate()
        .map(|(j, &v)| {
            let (hi, lo) = leaf_digits_of(lay, v, true);
            let (kh, kl) = (keys.keys[j], keys.keys[k + j]);
            let (g, u) = (j / LEAF_GROUP, j % LEAF_GROUP);
            let buf = &tables[g * gbytes..(g + 1) * gbytes];
            let b = 2 * (u * nh + hi as usize);
            [
                get_bit(buf, b) ^ (kh & 1 == 1),
                get_bit(buf, b + 1) ^ (kh & 2 == 2),
                get_bit(&buf[2 * nh..], u * nl + lo as usize) ^ (kl & 1 == 1),
            ]
        })
        .collect())
}

/// The gate-bit weights ω_j: 2^j, or −2^(gb−1) for a signed gate's top bit, mod 2^PW.
fn gate_weight(lay: &StepLayout, j: usize) -> u64 {
    let x = 1u64 << j;
    let w = if lay.g_signed && j == lay.gb - 1 {
        x.wrapping_neg()
    } else {
        x
    };
    w & ring_mask(lay.pw)
}

/// The weights τ_k of trunc(gh_n)'s bits κ, o, s: 1, −2^L, −2^L mod 2^PW.
fn ghn_weights(lay: &StepLayout) -> [u64; GHN_BITS] {
    let pm = ring_mask(lay.pw);
    let t = (1u64 << lay.l).wrapping_neg() & pm;
    [1, t, t]
}

/// Sender-first OTs of a product g·(a + T) per element (P = r·trunc(gh_n), Q = z·(h − n)): g a
/// gate value (gb XOR-shared bits), T a word of `k` XOR-shared bits, a the server's own additive
/// part: gb OTs on the client's bits m_j of g, k on its bits m'_k of T, gb·k on the products
/// m_j·m'_k.
fn early_len(lay: &StepLayout, k: usize) -> usize {
    lay.gb + k + lay.gb * k
}

/// P's: T = κ − 2^L(o + s), the three bits circuit A outputs.
fn p_early_len(lay: &StepLayout) -> usize {
    early_len(lay, GHN_BITS)
}

/// Q's: T = −n, the bo bits of y.
fn q_early_len(lay: &StepLayout) -> usize {
    early_len(lay, lay.bo)
}

/// Client: its choices for a product's sender-first OTs, per element in `early_len` order.
fn early_choices(lay: &StepLayout, g_bits: &[bool], t_bits: &[bool], k: usize) -> Vec<bool> {
    let gb = lay.gb;
    let mut out = Vec::with_capacity(g_bits.len() / gb.max(1) * early_len(lay, k));
    for (g, t) in g_bits.chunks(gb).zip(t_bits.chunks(k)) {
        out.extend_from_slice(g);
        out.extend_from_slice(t);
        for &m in g {
            out.extend(t.iter().map(|&mt| m & mt));
        }
    }
    out
}

/// Server: the correlations of a product's sender-first OTs and its local part, per element.
/// With g = Λ + Σ_j m_j·α_j (α_j = ω_j(1 − 2λ_j), Λ = Σ_j ω_j·λ_j: λ its permute bits, m the
/// client's bits) and T = Λ_T + Σ_k m'_k·β_k likewise (weights `wt`),
/// g·(a + T) = Λ(a + Λ_T) + Σ_j m_j·α_j(a + Λ_T) + Σ_k m'_k·Λβ_k + Σ_{j,k} m_j m'_k·α_jβ_k:
/// every term the client's bit times a value this party knows before the client's bits exist.
/// P: T = κ − 2^L(o + s) (weights 1, −2^L, −2^L), a = its share of gh_n ≫ F. Q: h − n is exact
/// ([`StepLayout::for_step`]), so Q = z·(h_S + h_C) − z·n mod 2^PW: T = −n (weights −ν, ν those
/// of y's bits in n), a = h_S = m(t); z·h_C is the client-sender OT of [`p_client_weights`].
fn early_server(
    lay: &StepLayout,
    wt: &[u64],
    g_bits: &[bool],
    t_bits: &[bool],
    a: &[u64],
) -> (Vec<u64>, Vec<u64>) {
    let (gb, k, pm) = (lay.gb, wt.len(), ring_mask(lay.pw));
    let sign = |w: u64, b: bool| if b { w.wrapping_neg() & pm } else { w };
    let mut corr = Vec::with_capacity(a.len() * early_len(lay, k));
    let mut local = Vec::with_capacity(a.len());
    for ((g, t), &a) in g_bits.chunks(gb).zip(t_bits.chunks(k)).zip(a) {
        let big_l = (0..gb).fold(0u64, |s, j| {
            s.wrapping_add(if g[j] { gate_weight(lay, j) } else { 0 })
        });
        let big_lt = (0..k).fold(0u64, |s, x| s.wrapping_add(if t[x] { wt[x] } else { 0 }));
        let alpha: Vec<u64> = (0..gb).map(|j| sign(gate_weight(lay, j), g[j])).collect();
        let beta: Vec<u64> = (0..k).map(|x| sign(wt[x], t[x])).collect();
        let at = a.wrapping_add(big_lt);
        corr.extend(alpha.iter().map(|al| al.wrapping_mul(at) & pm));
        corr.extend(beta.iter().map(|be| be.wrapping_mul(big_l) & pm));
        for al in &alpha {
            corr.extend(beta.iter().map(|be| al.wrapping_mul(*be) & pm));
        }
        local.push(big_l.wrapping_mul(at) & pm);
    }
    (corr, local)
}

/// The weights −ν_k of y's bits in T = −n (Q's second factor), mod 2^PW.
fn q_weights(lay: &StepLayout, nu: &[u64]) -> Vec<u64> {
    let pm = ring_mask(lay.pw);
    nu.iter().map(|v| v.wrapping_neg() & pm).collect()
}

/// Client: a multiplexer cross term g·b for its own word b (r·b with b = gc ≫ F its share of
/// trunc(gh_n); z·h_C with h_C its share of h), as the OT sender (the server chooses with its
/// permute bits of g): weights ω_j·b, correlations (1 − 2m_j)·ω_j·b.
fn p_client_weights(lay: &StepLayout, b: &[u64]) -> Vec<u64> {
    let pm = ring_mask(lay.pw);
    let mut w = Vec::with_capacity(b.len() * lay.gb);
    for &bi in b {
        w.extend((0..lay.gb).map(|j| gate_weight(lay, j).wrapping_mul(bi) & pm));
    }
    w
}

/// Per-element sums of `per` consecutive terms mod 2^PW.
fn sums(terms: &[u64], per: usize, pm: u64) -> Vec<u64> {
    sum_chunks(terms, per, pm)
}

/// Per copy, the bits `range` of each copy's outputs (`per` outputs per copy).
fn pick(out: &[bool], per: usize, range: std::ops::Range<usize>) -> Vec<bool> {
    out.chunks(per)
        .flat_map(|o| o[range.clone()].to_vec())
        .collect()
}

/// The client's XOR shares of a batch's outputs: the label lsbs of the wire outputs, zero at
/// constant outputs (the server's share holds the constant).
fn client_output_shares(circ: &Circuit, lsbs: &[bool]) -> Vec<bool> {
    let wo = wire_outputs(circ).max(1);
    lsbs.chunks(wo)
        .flat_map(|l| {
            let mut k = 0;
            circ.outputs
                .iter()
                .map(|o| match o {
                    secinfer_gc::Bit::Const(_) => false,
                    secinfer_gc::Bit::Wire(_) => {
                        k += 1;
                        l.get(k - 1).copied().unwrap_or(false)
                    }
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

/// One party's OT endpoints for the multiplexers: the session's IKNP pair (server sends) and
/// a second pair in the other direction (client sends).
#[cfg(test)]
enum MuxOt<'a> {
    Server(&'a mut PooledOtSender, &'a mut PooledOtReceiver),
    Client(&'a mut PooledOtReceiver, &'a mut PooledOtSender),
}

/// Shares of g·v mod 2^PW for a gate value g given by its XOR-shared bits (`gb` per element) and
/// v additively shared mod 2^PW (cryptogru::products_by_mux). Per bit j of g the product
/// (c0 ⊕ c1)·w with w = ±2^j·v (−2^(gb−1) for a sign bit), w = w0 + w1, is
/// c_i·w_i + c_{1−i}·(1 − 2c_i)·w_i summed over the parties i; the cross term is one additively
/// correlated OT with party i as sender (correlation (1 − 2c_i)·w_i) and the other party's
/// bit as choice. Exact mod 2^PW; the next circuit does the reference's truncation on the sum.
/// This party's weights w_i, one per gate bit.
#[cfg(test)]
fn mux_weights(lay: &StepLayout, v: &[u64]) -> Vec<u64> {
    let (gb, pm) = (lay.gb, ring_mask(lay.pw));
    let mut w = Vec::with_capacity(v.len() * gb);
    for &vi in v {
        for j in 0..gb {
            let x = if lay.g_signed && j == gb - 1 {
                vi.wrapping_neg()
            } else {
                vi
            };
            w.push(x.wrapping_shl(j as u32) & pm);
        }
    }
    w
}

/// This party's correlations (1 − 2c_i)·w_i as the OT sender.
fn mux_deltas(lay: &StepLayout, w: &[u64], gbits: &[bool]) -> Vec<u64> {
    let pm = ring_mask(lay.pw);
    w.iter()
        .zip(gbits)
        .map(|(x, &c)| if c { x.wrapping_neg() & pm } else { *x })
        .collect()
}

/// This party's product shares: c_i·w_i + (received cross term) − (its pad as sender).
fn mux_combine(
    lay: &StepLayout,
    w: &[u64],
    gbits: &[bool],
    received: &[u64],
    pad: &[u64],
) -> Result<Vec<u64>> {
    if gbits.len() != w.len() || received.len() != w.len() || pad.len() != w.len() {
        return Err(NnError::Protocol("gate product: OT count".into()));
    }
    let terms: Vec<u64> = w
        .iter()
        .zip(gbits)
        .zip(received.iter().zip(pad))
        .map(|((x, &c), (y, p))| {
            let cross = y.wrapping_sub(*p);
            if c {
                x.wrapping_add(cross)
            } else {
                cross
            }
        })
        .collect();
    Ok(sum_chunks(&terms, lay.gb, ring_mask(lay.pw)))
}

/// The multiplexer as one sub-protocol (tests), in the session's flight order: the server's
/// choices, then the client's choices, the server's answer, the client's answer.
#[cfg(test)]
fn gate_product<C: Channel>(
    ot: MuxOt<'_>,
    ch: &mut C,
    lay: &StepLayout,
    gbits: &[bool],
    v: &[u64],
) -> Result<Vec<u64>> {
    if gbits.len() != v.len() * lay.gb {
        return Err(NnError::Protocol("gate product: bit count".into()));
    }
    let pw = lay.pw as u32;
    let w = mux_weights(lay, v);
    let deltas = mux_deltas(lay, &w, gbits);
    match ot {
        MuxOt::Server(s, r) => {
            let pr = r.send_choices(ch, gbits).map_err(self::ot)?;
            ch.flush().map_err(net)?;
            let pf = s.recv_choices(ch, gbits.len()).map_err(self::ot)?;
            let x = s
                .send_correlated_answer(ch, pf, &deltas, pw)
                .map_err(self::ot)?;
            ch.flush().map_err(net)?;
            let y = r.recv_correlated_answer(ch, pr, pw).map_err(self::ot)?;
            mux_combine(lay, &w, gbits, &y, &x)
        }
        MuxOt::Client(r, s) => {
            let pr = s.recv_choices(ch, gbits.len()).map_err(self::ot)?;
            let pf = r.send_choices(ch, gbits).map_err(self::ot)?;
            ch.flush().map_err(net)?;
            let y = r.recv_correlated_answer(ch, pf, pw).map_err(self::ot)?;
            let x = s
                .send_correlated_answer(ch, pr, &deltas, pw)
                .map_err(self::ot)?;
            ch.flush().map_err(net)?;
            mux_combine(lay, &w, gbits, &y, &x)
        }
    }
}

/// Client: sends its product shares re-based on the offline-chosen circuit inputs π
/// (the server adds them to its shares), so that its circuit labels could come from offline COTs.
fn send_delta<C: Channel>(
    ch: &mut C,
    shares: &[u64],
    pis: impl Iterator<Item = u64>,
    pm: u64,
) -> Result<()> {
    let d: Vec<u32> = shares
        .iter()
        .zip(pis)
        .map(|(s, p)| (s.wrapping_sub(p) & pm) as u32)
        .collect();
    // Not flushed: it closes a flight together with other messages.
    ch.send_pod(&d).map_err(net)
}

/// Server: its product shares plus the client's corrections.
fn recv_delta<C: Channel>(ch: &mut C, shares: &[u64], pm: u64) -> Result<Vec<u64>> {
    let d: Vec<u32> = ch.recv_pod(shares.len()).map_err(net)?;
    Ok(shares
        .iter()
        .zip(&d)
        .map(|(s, d)| s.wrapping_add(*d as u64) & pm)
        .collect())
}

/// Fresh uniform values mod 2^32.
fn uniform(prg: &mut Prg, len: usize) -> Vec<u64> {
    (0..len)
        .map(|_| prg.next_block().low_u64() & RING)
        .collect()
}

/// The client's side of one session. `progress(stage, done, total)` reports preparation.
///
/// Delphi-style preprocessing (cryptogru::offline): every HE product is taken on the client's
/// uniform masks ρ, not on its data, so all of HE, all COTs and all garbling run offline. Online
/// the client sends x_t − ρ_x(t) (a one-time pad mod 2^32: the server computes W_ih·(x − ρ_x)
/// in the clear), and per step the server sends its input labels and the client returns the
/// permute bits of the outputs, from which the server decodes m = h' + ρ_h (uniform to it).
pub fn client_session<C: Channel>(
    ch: &mut C,
    m: &ClientModel,
    tokens: &[u32],
    opts: ClientOptions,
    progress: &mut dyn FnMut(&str, u64, u64),
) -> Result<GruOutcome> {
    client_session_with(ch, m, tokens, opts, OtFiller::default(), progress)
}

/// [`client_session`] with a chosen OT filler (the server follows the client's choice).
pub fn client_session_with<C: Channel>(
    ch: &mut C,
    m: &ClientModel,
    tokens: &[u32],
    opts: ClientOptions,
    filler: OtFiller,
    progress: &mut dyn FnMut(&str, u64, u64),
) -> Result<GruOutcome> {
    client_session_garbling(ch, m, tokens, opts, filler, DEFAULT_GARBLING, progress)
}

/// [`client_session_with`] with a chosen AND-gate garbling scheme (half-gates or three-halves:
/// 32 or 24.625 bytes per AND gate; the server follows the client's choice).
pub fn client_session_garbling<C: Channel>(
    ch: &mut C,
    m: &ClientModel,
    tokens: &[u32],
    opts: ClientOptions,
    filler: OtFiller,
    garbling: Scheme,
    progress: &mut dyn FnMut(&str, u64, u64),
) -> Result<GruOutcome> {
    let a = &m.config.arch;
    let (e, h, c) = (a.embed_dim, a.hidden, a.classes);
    let steps = m.steps;
    if tokens.len() != steps {
        return Err(NnError::Input(format!(
            "{} tokens for a {steps}-step model",
            tokens.len()
        )));
    }
    crate::fixed::check_tokens(tokens, a.vocab)?;
    let mut rep = SessionReport {
        steps,
        garbling,
        ..Default::default()
    };
    let mut acc = Acc::start(ch);
    // ---- setup
    ch.set_phase(Phase::Setup);
    let mut hs = handshake_json(&m.config, &m.fp, m.variant, steps, opts.reveal_logits);
    hs["ot"] = serde_json::Value::from(filler.name());
    hs["garbling"] = serde_json::Value::from(garbling.name());
    hs["gates"] = serde_json::Value::from(if opts.gates_in_circuit {
        GATES_CIRCUIT
    } else {
        GATES_TABLES
    });
    ch.send_frame(hs.to_string().as_bytes()).map_err(net)?;
    // The reply is read with the handshake's own limit: a longer announced length is refused
    // before a buffer of that size exists.
    let reply = ch.recv_frame_limited(MAX_HANDSHAKE).map_err(net)?;
    let rv: serde_json::Value = serde_json::from_slice(&reply)
        .map_err(|e| NnError::Protocol(format!("handshake reply: {e}")))?;
    if rv["ok"] != serde_json::Value::Bool(true) {
        return Err(NnError::Protocol(format!(
            "server refused the session: {}",
            secinfer_net::sanitize_peer_text(rv["error"].as_str().unwrap_or("?"), 300)
        )));
    }
    rep.he_bytes += acc.take(ch);
    progress("keys", 0, 2);
    let params = Params::by_name(HE_PARAMS).map_err(he)?;
    let n = params.n();
    let ih = input_layout(&params, 3 * h, e, steps)?;
    let hh = input_layout(&params, 3 * h, h, steps.saturating_sub(1).max(1))?;
    let fcl = Layout::new(c, h, n)?;
    // The BFV key, the masks and their encrypted uploads need nothing from the server: a helper
    // thread makes them while this one runs the OT pools' base OTs (which mostly wait on the
    // server); the public key follows the base OTs, the uploads open the offline phase.
    let keys = {
        let params = params.clone();
        std::thread::spawn(move || -> Result<ClientKeys> {
            let sk = SecretKey::generate(&params);
            let pk = sk.public_key().to_bytes();
            let mut prg = Prg::new();
            let rho_x: Vec<Vec<u64>> = (0..steps).map(|_| uniform(&mut prg, e)).collect();
            // ρ_h(t) masks h(t), t = 1..=T; h(0) = 0 is public, so ρ_h(0) = 0.
            let rho_h: Vec<Vec<u64>> = (0..=steps)
                .map(|t| {
                    if t == 0 {
                        vec![0; h]
                    } else {
                        uniform(&mut prg, h)
                    }
                })
                .collect();
            let mut uploads = Vec::new();
            for (lay, xs) in [
                (&ih, &rho_x[..]),
                (&hh, &rho_h[1..steps]),
                (&fcl, &rho_h[steps..]),
            ] {
                for group in xs.chunks(lay.group) {
                    let refs: Vec<&[u64]> = group.iter().map(|x| x.as_slice()).collect();
                    for poly in lay.input_polys(&refs) {
                        let ct = sk.encrypt_poly_seeded(&poly).map_err(he)?;
                        uploads.push(ct.to_bytes());
                    }
                }
            }
            Ok(ClientKeys {
                sk,
                pk,
                rho_x,
                rho_h,
                uploads,
            })
        })
    };
    let mut otr =
        PooledOtReceiver::setup_with_source(ch, &mut Prg::new(), filler.source()).map_err(ot)?;
    rep.gc_bytes += acc.take(ch);
    // The multiplexers' second direction: the client sends. With IKNP or SoftSpoken it is
    // bootstrapped on 128 random OTs of the first pool (`bootstrap_reverse`): no second set of
    // public-key base OTs. (A Ferret pool would pay a whole LPN iteration for 128 COTs there:
    // Chou–Orlandi base OTs and IKNP instead.)
    let mut mux_s = if filler == OtFiller::Ferret {
        PooledOtSender::setup(ch, &mut Prg::new()).map_err(ot)?
    } else {
        otr.bootstrap_reverse(ch, &mut Prg::new()).map_err(ot)?
    };
    rep.mux_bytes += acc.take(ch);
    progress("keys", 1, 2);
    let ClientKeys {
        sk,
        pk,
        rho_x,
        rho_h,
        uploads,
    } = keys
        .join()
        .map_err(|_| NnError::Crypto("key generation panicked".into()))??;
    ch.send_frame_vec(pk).map_err(net)?;
    rep.he_bytes += acc.take(ch);
    progress("keys", 2, 2);
    // ---- offline: HE products on the masks
    ch.set_phase(Phase::Offline);
    let mut prg = Prg::new();
    for u in uploads {
        ch.send_frame_vec(u).map_err(net)?;
    }
    ch.flush().map_err(net)?;
    rep.he_bytes += acc.take(ch);
    let sc = step_circuits_with(
        &m.fp,
        a.activation == Candidate::Tanh,
        !opts.gates_in_circuit,
    );
    let lay = sc.lay;
    rep.gate_tables = lay.lut.is_some();
    rep.and_per_element_step = sc.and_count();
    check_state_exact(&lay)?;
    let fin = final_circuit(&m.fp, c, opts.reveal_logits);
    let amask = (1u64 << lay.acc) - 1;
    let pmask = ring_mask(lay.pw);
    let ei = lay.evaluator_inputs();
    let n_labels = steps * h * ei + c * lay.acc;
    // Fill both pools with every COT the session will use (the labels' COTs below, the B2A and
    // multiplexer OTs online), so online OTs cost one derandomisation bit each. The server
    // computes the HE responses meanwhile; they follow the fills.
    let (fwd, rev) = pool_sizes(&lay, steps, h, n_labels);
    otr.fill(ch, fwd).map_err(ot)?;
    mux_s.fill(ch, rev).map_err(ot)?;
    rep.gc_bytes += acc.take(ch);
    // The responses of every upload, in upload order; each group is decrypted on the pool as
    // soon as its frames are in, groups in parallel (an input-projection group is one block).
    let groups: Vec<(&Layout, usize)> = [(&ih, steps), (&hh, steps - 1), (&fcl, 1)]
        .into_iter()
        .flat_map(|(lay, count)| {
            (0..count.div_ceil(lay.group)).map(move |g| (lay, lay.group.min(count - g * lay.group)))
        })
        .collect();
    let (tx, rx) = std::sync::mpsc::channel::<(usize, Result<Vec<u64>>)>();
    let sk_r = &sk;
    rayon::in_place_scope(|s| -> Result<()> {
        for (gi, &(lay, _)) in groups.iter().enumerate() {
            let r: Vec<Vec<u8>> = (0..lay.blocks)
                .map(|b| {
                    ch.recv_bytes(coeff::response_len(&params, lay, b))
                        .map_err(net)
                })
                .collect::<Result<_>>()?;
            let tx = tx.clone();
            s.spawn(move |_| {
                let _ = tx.send((gi, client_share(sk_r, lay, &r)));
            });
        }
        Ok(())
    })?;
    drop(tx);
    let mut shares: Vec<Option<Vec<u64>>> = vec![None; groups.len()];
    for (gi, r) in rx {
        shares[gi] = Some(r?);
    }
    let mut per_input = groups.iter().zip(shares).flat_map(|(&(lay, k), sh)| {
        sh.unwrap_or_default()
            .chunks(lay.rows)
            .take(k)
            .map(|v| v.to_vec())
            .collect::<Vec<_>>()
    });
    // c_x(t) + S_x(t) = W_ih ρ_x(t), c_h(t) + S_h(t) = W_hh ρ_h(t) (t ≥ 1), c_fc + S_fc = W_fc ρ_h(T)
    let cx: Vec<Vec<u64>> = per_input.by_ref().take(steps).collect();
    let chh: Vec<Vec<u64>> = per_input.by_ref().take(steps - 1).collect();
    let cfc: Vec<u64> = per_input.next().unwrap_or_default();
    if cx.len() != steps || chh.len() != steps - 1 || cfc.len() != c {
        return Err(NnError::Protocol("missing HE shares".into()));
    }
    rep.he_bytes += acc.take(ch);
    // ---- offline: the client's GC inputs are all known now; their labels by COT
    // Per step and element: λ_r, λ_z (gb bits), β, π_P, β_d, π_Q (PW bits), λ_n (bo bits).
    let masks: Vec<Vec<ElemMasks>> = (0..steps)
        .map(|_| (0..h).map(|_| ElemMasks::draw(&mut prg, &lay)).collect())
        .collect();
    let mut choices = Vec::with_capacity(steps * h * ei + c * lay.acc);
    for t in 0..steps {
        // W_hh h(t) = W_hh m(t) − W_hh ρ_h(t): the client's share is −c_h(t).
        let gh = |i: usize| -> u64 {
            if t == 0 {
                0
            } else {
                neg(chh[t - 1][i])
            }
        };
        let x = &cx[t];
        for (i, mk) in masks[t].iter().enumerate() {
            lay.encode_a(
                [x[i], x[h + i]],
                [neg(mk.v[0]), neg(mk.v[1])],
                [gh(i), gh(h + i), gh(2 * h + i)],
                lay.gh_leaves().then_some(&mk.tau_h),
                &mut choices,
            );
        }
        for (i, mk) in masks[t].iter().enumerate() {
            lay.encode_b(mk.pi_p, x[2 * h + i], neg(mk.v[2]), &mut choices);
        }
        for mk in &masks[t] {
            put(&mut choices, mk.pi_q, lay.q_ring().pw);
            put(&mut choices, mk.mu, lay.bo);
        }
    }
    for v in &cfc {
        bits_of(&mut choices, neg(*v) & amask, lay.acc);
    }
    if choices.len() != n_labels {
        return Err(NnError::Protocol("label count mismatch".into()));
    }
    // One buffer for every batch's labels, shared rather than copied batch by batch.
    let labels = std::sync::Arc::new(otr.recv_cot(ch, &choices).map_err(ot)?);
    ch.flush().map_err(net)?;
    // The carry leaves' OTs: hashing 2^m keys per leaf is this party's work alone, so it runs
    // after the label COTs, which the server's garbling waits for.
    let n_carries = steps * h * CARRIES;
    let leaf_keys = LeafKeys::client(&mut mux_s, ch, &lay, n_carries)?;
    let carry_keys = CarryKeys::client(&mut mux_s, ch, n_carries)?;
    // The gate tables' OTs (cryptogru::gate_luts) follow the labels' COTs in the server →
    // client pool.
    let lut_keys = match lay.lut {
        Some(nb) => Some(LutKeys::client(&mut otr, ch, nb, 2 * h * steps)?),
        None => None,
    };
    // The hidden projections' leaves, one set per step (`StepLayout::gh_leaves`).
    let gh_keys: Vec<LeafKeys> = if lay.gh_leaves() {
        (0..steps)
            .map(|_| LeafKeys::client(&mut mux_s, ch, &lay, 3 * h))
            .collect::<Result<_>>()?
    } else {
        Vec::new()
    };
    rep.gc_bytes += acc.take(ch);
    rep.and_gates = sc.and_count() * (h * steps) as u64 + fin.and_count();
    // ---- online
    ch.set_phase(Phase::Online);
    let mut masked: Vec<u32> = Vec::with_capacity(steps * e);
    for (t, &tok) in tokens.iter().enumerate() {
        let x = to_ring(&m.embed[tok as usize * e..(tok as usize + 1) * e]);
        masked.extend(
            x.iter()
                .zip(&rho_x[t])
                .map(|(x, r)| (x.wrapping_sub(*r) & RING) as u32),
        );
    }
    ch.send_pod(&masked).map_err(net)?;
    ch.flush().map_err(net)?;
    rep.he_bytes += acc.take(ch);
    // The input projections' carries (cryptogru::carry_leaves): the server's derandomisation
    // of every leaf, then this party's tables; carry j = (t·3 + gate)·H + i.
    let d = unpack_bits(
        &ch.recv_pod::<u8>((n_carries * lay.f).div_ceil(8))
            .map_err(net)?,
        n_carries * lay.f,
    );
    let mut c_lo = Vec::with_capacity(n_carries);
    let mut tau = Vec::with_capacity(n_carries);
    let mut v = Vec::with_capacity(n_carries);
    for (x, mk) in cx.iter().zip(&masks) {
        for g in 0..CARRIES {
            c_lo.extend_from_slice(&x[g * h..(g + 1) * h]);
            tau.extend(mk.iter().map(|m| m.tau[g]));
            v.extend(mk.iter().map(|m| m.v[g]));
        }
    }
    let tables = leaf_tables(&lay, &leaf_keys, &c_lo, &tau, &d)?;
    drop(leaf_keys);
    ch.send_pod(&tables).map_err(net)?;
    ch.flush().map_err(net)?;
    // The carries as additive shares (cryptogru::carry_shares): the server's derandomisation of
    // each 1-of-8 OT, then this party's tables.
    let d = unpack_bits(
        &ch.recv_pod::<u8>((n_carries * LEAF_BITS).div_ceil(8))
            .map_err(net)?,
        n_carries * LEAF_BITS,
    );
    let tables = carry_tables(&lay, &carry_keys, &tau, &v, &d)?;
    drop(carry_keys);
    ch.send_pod(&tables).map_err(net)?;
    ch.flush().map_err(net)?;
    rep.mux_bytes += acc.take(ch);
    // Evaluates a batch the server garbles now (its own inputs folded in, so it sends only the
    // tables) as its tables arrive, on this party's offline COT labels (`labels[o..]`, in the
    // order of its choices); returns this party's XOR shares of the outputs.
    let mut o = 0;
    let mut eval = |ch: &mut C, circ: &Circuit, g_in: usize, reveal: Reveal| -> Result<Vec<bool>> {
        let n = if reveal == Reveal::Garbler { h } else { 1 };
        let e_in = circ.n_inputs - g_in;
        let mine = labels
            .get(o..o + n * e_in)
            .ok_or_else(|| NnError::Protocol("label count mismatch".into()))?;
        o += n * e_in;
        let bits = recv_evaluate_known(ch, circ, g_in, n, reveal, garbling, mine).map_err(gc)?;
        Ok(if reveal == Reveal::Garbler {
            client_output_shares(circ, &bits)
        } else {
            bits
        })
    };
    let (gb, bo, l, hw) = (lay.gb, lay.bo, lay.l, lay.hw);
    let pwu = lay.pw as u32;
    // Q = z·(h − n) lives in the narrower ring 2^(fo + hw) (StepLayout::q_ring).
    let qlay = lay.q_ring();
    let (qmask, qwu) = (ring_mask(qlay.pw), qlay.pw as u32);
    // Six flights per step (docs/gru-protocol.md, "Online flights"): each party's independent
    // messages travel together, every pooled OT is split into its derandomisation half and its
    // answer half, and both products are sender-first OTs on decompositions.
    for t in 0..steps {
        let mk = &masks[t];
        // This party's share of h(t) (−ρ_h(t)), mod 2^PW.
        let h_c: Vec<u64> = rho_h[t].iter().map(|r| neg(*r) & pmask).collect();
        if let Some(keys) = gh_keys.get(t) {
            // The hidden projections' carry leaves (two flights): the server's
            // derandomisation, then this party's tables; carry j = gate·H + i.
            let n = 3 * h * lay.f;
            let d = unpack_bits(&ch.recv_pod::<u8>(n.div_ceil(8)).map_err(net)?, n);
            let c_lo: Vec<u64> = (0..3 * h)
                .map(|j| if t == 0 { 0 } else { neg(chh[t - 1][j]) })
                .collect();
            let tau: Vec<[bool; LEAF_BITS]> = (0..3)
                .flat_map(|g| mk.iter().map(move |m| m.tau_h[g]))
                .collect();
            ch.send_pod(&leaf_tables(&lay, keys, &c_lo, &tau, &d)?)
                .map_err(net)?;
            ch.flush().map_err(net)?;
            rep.mux_bytes += acc.take(ch);
        }
        // Flight 1 (in): A's tables; the server's choices for both products' client → server
        // direction (its XOR shares of r and z); the server's sender-first words for P (their
        // correlations need only its permute bits and its share of gh_n).
        let out = eval(ch, &sc.a, lay.a_garbler(), Reveal::Garbler)?;
        rep.gc_bytes += acc.take(ch);
        let pr_rev = mux_s.recv_choices(ch, h * gb).map_err(ot)?;
        let qr_rev = mux_s.recv_choices(ch, h * gb).map_err(ot)?;
        let pe = otr
            .recv_correlated_early(ch, h * p_early_len(&lay), pwu)
            .map_err(ot)?;
        let per = sc.a.n_outputs();
        let ab = lay.a_gate_bits();
        let t_bits = pick(&out, per, 2 * ab..2 * ab + GHN_BITS);
        let (r_bits, z_bits) = match (lay.lut, &lut_keys) {
            // Two more flights (cryptogru::gate_luts): this party's derandomisation of the
            // gate tables' OTs, then the server's tables; r and z come out XOR-shared.
            (Some(nb), Some(keys)) => {
                let mut x = pick(&out, per, 0..nb);
                x.extend(pick(&out, per, nb..2 * nb));
                ch.send_pod(&pack_bits(&lut_derand(keys, t * 2 * h, &x, nb)?))
                    .map_err(net)?;
                ch.flush().map_err(net)?;
                let tables: Vec<u8> = ch
                    .recv_pod(packed_len((2 * h) << nb, gb as u32))
                    .map_err(net)?;
                let mut g = lut_outputs(keys, t * 2 * h, &x, nb, gb, &tables)?;
                let z = g.split_off(h * gb);
                (g, z)
            }
            _ => (pick(&out, per, 0..gb), pick(&out, per, gb..2 * gb)),
        };
        rep.mux_bytes += acc.take(ch);
        // Flight 2 (out): P's derandomisation bits, the client-sender OTs of r·b, P_C − π_P,
        // and the client-sender OTs of z·h_C.
        let u = otr
            .finish_early(ch, pe, &early_choices(&lay, &r_bits, &t_bits, GHN_BITS))
            .map_err(ot)?;
        // b = gc ≫ F: this party's share of gh_n, as it entered circuit A.
        let b_hi: Vec<u64> = (0..h)
            .map(|i| {
                let g = if t == 0 {
                    0
                } else {
                    neg(chh[t - 1][2 * h + i])
                };
                (g >> lay.f) & ring_mask(l)
            })
            .collect();
        let w = p_client_weights(&lay, &b_hi);
        let x_p = mux_s
            .send_correlated_answer(ch, pr_rev, &mux_deltas(&lay, &w, &r_bits), pwu)
            .map_err(ot)?;
        let zero = vec![0u64; w.len()];
        let p: Vec<u64> = mux_combine(&lay, &w, &r_bits, &zero, &x_p)?
            .iter()
            .zip(sums(&u, p_early_len(&lay), pmask))
            .map(|(a, b)| a.wrapping_add(b) & pmask)
            .collect();
        send_delta(ch, &p, mk.iter().map(|k| k.pi_p), pmask)?;
        let h_cq: Vec<u64> = h_c.iter().map(|v| v & qmask).collect();
        let w_q = p_client_weights(&qlay, &h_cq);
        let x_q = mux_s
            .send_correlated_answer(ch, qr_rev, &mux_deltas(&qlay, &w_q, &z_bits), qwu)
            .map_err(ot)?;
        let q_hc = mux_combine(&qlay, &w_q, &z_bits, &zero, &x_q)?;
        ch.flush().map_err(net)?;
        rep.mux_bytes += acc.take(ch);
        // Flight 3 (in): B's tables → y; the server's sender-first words for Q (their
        // correlations need its permute bits of B's outputs and its share of h).
        let out = eval(ch, &sc.b, lay.b_garbler(), Reveal::Garbler)?;
        rep.gc_bytes += acc.take(ch);
        let qe = otr
            .recv_correlated_early(ch, h * q_early_len(&qlay), qwu)
            .map_err(ot)?;
        // Flight 4 (out): y re-based on μ (the server's C input becomes its share ⊕ y_c ⊕ μ),
        // Q's derandomisation bits and Q_C − π_Q.
        let y = pick(&out, sc.b.n_outputs(), 0..bo);
        let yd: Vec<bool> = y
            .chunks(bo)
            .zip(mk)
            .flat_map(|(y, k)| {
                y.iter()
                    .enumerate()
                    .map(|(j, &b)| b ^ ((k.mu >> j) & 1 == 1))
                    .collect::<Vec<_>>()
            })
            .collect();
        ch.send_pod(&pack_bits(&yd)).map_err(net)?;
        let u = otr
            .finish_early(ch, qe, &early_choices(&qlay, &z_bits, &y, bo))
            .map_err(ot)?;
        let q: Vec<u64> = q_hc
            .iter()
            .zip(sums(&u, q_early_len(&qlay), qmask))
            .map(|(a, b)| a.wrapping_add(b) & qmask)
            .collect();
        send_delta(ch, &q, mk.iter().map(|k| k.pi_q), qmask)?;
        ch.flush().map_err(net)?;
        rep.mux_bytes += acc.take(ch);
        // Flight 5 (in): C's tables → h', and the server's sender-first B2A words for h' (its
        // correlations are its permute bits, fixed when it garbled).
        let out = eval(ch, &sc.c, lay.c_garbler(), Reveal::Garbler)?;
        rep.gc_bytes += acc.take(ch);
        let hp = otr
            .recv_correlated_early(ch, h * hw, SHARE_BITS as u32)
            .map_err(ot)?;
        // Flight 6 (out): the B2A's derandomisation bits and h'_c + ρ_h(t+1); the server gets
        // m = h' + ρ_h(t+1).
        let hc = b2a_client(&otr.finish_early(ch, hp, &out).map_err(ot)?, hw, SHARE_BITS)?;
        let msk: Vec<u32> = hc
            .iter()
            .zip(&rho_h[t + 1])
            .map(|(a, r)| (a.wrapping_add(*r) & RING) as u32)
            .collect();
        ch.send_pod(&msk).map_err(net)?;
        ch.flush().map_err(net)?;
        rep.mux_bytes += acc.take(ch);
        // The step's tables are garbled, sent and evaluated now (no longer offline).
        progress("garbled steps", t as u64 + 1, steps as u64);
    }
    let out = eval(ch, &fin, c * lay.acc, Reveal::Evaluator)?;
    rep.gc_bytes += acc.take(ch);
    rep.cost = ch.cost();
    let (class, logits) = if opts.reveal_logits {
        let l: Vec<i64> = out
            .chunks(lay.l)
            .map(|b| sign_extend(word(b), lay.l))
            .collect();
        (crate::fixed::argmax(&l), Some(l))
    } else {
        let k = word(&out[..index_bits(c)]) as usize;
        if k >= c {
            return Err(NnError::Protocol(format!("decoded class {k} out of range")));
        }
        (k, None)
    };
    Ok(GruOutcome {
        class,
        logits,
        report: rep,
    })
}

/// What the client's helper thread prepares during the base OTs.
struct ClientKeys {
    sk: SecretKey,
    pk: Vec<u8>,
    rho_x: Vec<Vec<u64>>,
    rho_h: Vec<Vec<u64>>,
    uploads: Vec<Vec<u8>>,
}

/// What a server lets its clients learn beyond the class.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ServerPolicy {
    /// Whether a client may ask for the logits (`secinfer serve --allow-logits`). They tell
    /// more about the weights than the class does, so a served model refuses them by default.
    pub allow_logits: bool,
}

/// The server's side of one session, revealing what the client asks for (logits included):
/// the entry point of in-process tests and benchmarks, where one party runs both sides. A served
/// model goes through [`server_session_with`] and its [`ServerPolicy`].
pub fn server_session<C: Channel>(ch: &mut C, m: &ServerModel) -> Result<SessionReport> {
    server_session_with(ch, m, ServerPolicy { allow_logits: true })
}

/// The server's side of one session under `policy`: a request for more than the policy allows
/// is refused in the handshake, and [`SessionReport::logits_revealed`] records what was shown.
pub fn server_session_with<C: Channel>(
    ch: &mut C,
    m: &ServerModel,
    policy: ServerPolicy,
) -> Result<SessionReport> {
    let a = &m.q.config.arch;
    let (e, h, c) = (a.embed_dim, a.hidden, a.classes);
    let steps = m.steps;
    let f = m.fp.main.frac;
    let mut rep = SessionReport {
        steps,
        flood_stat_bits: f64::INFINITY,
        ..Default::default()
    };
    let mut acc = Acc::start(ch);
    // ---- setup: handshake
    ch.set_phase(Phase::Setup);
    // Read with the handshake's own limit, before any large buffer.
    let hello = ch.recv_frame_limited(MAX_HANDSHAKE).map_err(net)?;
    let hv: serde_json::Value =
        serde_json::from_slice(&hello).map_err(|e| NnError::Protocol(format!("handshake: {e}")))?;
    let reveal = hv["reveal_logits"].as_bool().unwrap_or(false);
    rep.logits_revealed = reveal;
    let want = handshake_json(&m.q.config, &m.fp, m.variant, steps, reveal);
    // The client picks the OT filler (a cost trade-off, not a security one); absent = the
    // default.
    let ot_src: std::result::Result<OtFiller, String> = match hv["ot"].as_str() {
        Some(name) => name.parse(),
        None => Ok(OtFiller::default()),
    };
    let mut problem = ot_src.as_ref().err().cloned();
    if reveal && !policy.allow_logits {
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
    // under the same hash assumption); `/6` handshakes always name it.
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
    if let Some(p) = problem {
        let _ = ch.send_frame(
            serde_json::json!({"ok": false, "error": p})
                .to_string()
                .as_bytes(),
        );
        let _ = ch.flush();
        return Err(NnError::Protocol(p));
    }
    let ot_src = ot_src.unwrap_or_default();
    let garbling = garbling.unwrap_or(DEFAULT_GARBLING);
    rep.garbling = garbling;
    ch.send_frame(serde_json::json!({"ok": true}).to_string().as_bytes())
        .map_err(net)?;
    rep.he_bytes += acc.take(ch);
    let params = &m.params;
    let mut prg = Prg::new();
    let delta = Block(prg.next_block().0 | 1);
    let mut ots = PooledOtSender::setup_with_source_and_delta(ch, &mut prg, ot_src.source(), delta)
        .map_err(ot)?;
    rep.gc_bytes += acc.take(ch);
    // The multiplexers' pool (client → server): bootstrapped from 128 random OTs of the first
    // (as the client does), except with Ferret.
    let mut mux_r = if ot_src == OtFiller::Ferret {
        PooledOtReceiver::setup(ch, &mut prg).map_err(ot)?
    } else {
        ots.bootstrap_reverse(ch, &mut prg).map_err(ot)?
    };
    rep.mux_bytes += acc.take(ch);
    // The client's BFV public key follows the base OTs (it makes it meanwhile). Seed plus one
    // compact residue per coefficient and Q limb (4 or 8 bytes: the set decides).
    let pk_len = 32 + params.residue_bytes() * params.n() * params.set().q.len();
    let pk = PublicKey::from_bytes(params, &ch.recv_bytes(pk_len).map_err(net)?).map_err(he)?;
    rep.he_bytes += acc.take(ch);
    // ---- offline: HE products on the client's masks
    ch.set_phase(Phase::Offline);
    let up = coeff::upload_len(params);
    let (ih, ihp) = (&m.ih.0, &m.ih.1);
    let (hh, hhp) = (&m.hh.0, &m.hh.1);
    let (fcl, fcp) = (&m.fc.0, &m.fc.1);
    // Per group of vectors, one upload per column chunk (coeff::Layout).
    let mut recv_groups = |lay: &Layout, count: usize| -> Result<Vec<Vec<Vec<u8>>>> {
        (0..lay.groups(count))
            .map(|_| {
                (0..lay.chunks)
                    .map(|_| ch.recv_bytes(up).map_err(net))
                    .collect()
            })
            .collect()
    };
    let cts_x = recv_groups(ih, steps)?;
    let cts_h = recv_groups(hh, steps - 1)?;
    let ct_fc = recv_groups(fcl, 1)?;
    rep.he_bytes += acc.take(ch);
    let own_step;
    let sc = if gates_in_circuit && m.step.lay.lut.is_some() {
        own_step = step_circuits_with(&m.fp, a.activation == Candidate::Tanh, false);
        &own_step
    } else {
        &m.step
    };
    let lay = sc.lay;
    rep.gate_tables = lay.lut.is_some();
    rep.and_per_element_step = sc.and_count();
    let fin = final_circuit(&m.fp, c, reveal);
    let ei = lay.evaluator_inputs();
    let pmask = ring_mask(lay.pw);
    let n_labels = steps * h * ei + c * lay.acc;
    let (fwd, rev) = pool_sizes(&lay, steps, h, n_labels);
    // The HE responses (W·ρ − S, flooded) are computed in the background while this thread
    // fills both OT pools with the client: the fills are a few flights whose parties mostly wait
    // for each other, the HE products keep both cores busy. The responses follow the fills on the
    // wire, in upload order; the client decrypts them as they arrive.
    type Answer = Result<(Vec<Vec<u8>>, Vec<u64>, f64)>;
    // Per group: its layout, the weight plaintexts, the chunk uploads.
    type Work<'a> = (&'a Layout, &'a [Plaintext], &'a [Vec<u8>]);
    let work: Vec<Work<'_>> = cts_x
        .iter()
        .map(|g| (ih, ihp.as_slice(), g.as_slice()))
        .chain(cts_h.iter().map(|g| (hh, hhp.as_slice(), g.as_slice())))
        .chain(ct_fc.iter().map(|g| (fcl, fcp.as_slice(), g.as_slice())))
        .collect();
    let (tx, rx) = std::sync::mpsc::channel::<Answer>();
    let pk = &pk;
    let answers: Result<Vec<Vec<u64>>> = std::thread::scope(|s| {
        let work = &work;
        s.spawn(move || {
            for &(lay, pts, group) in work {
                let r = group
                    .iter()
                    .map(|b| {
                        SeededCiphertext::from_bytes(params, b)
                            .map(|ct| ct.expand(params))
                            .map_err(he)
                    })
                    .collect::<Result<Vec<_>>>()
                    .and_then(|cts| server_product(params, pk, lay, pts, &cts));
                let failed = r.is_err();
                // The receiver is gone when the fills failed: stop.
                if tx.send(r).is_err() || failed {
                    break;
                }
            }
        });
        let filled = ots
            .fill(ch, fwd)
            .map_err(ot)
            .and_then(|_| mux_r.fill(ch, rev).map_err(ot));
        rep.gc_bytes += acc.take(ch);
        let rx = rx;
        filled?;
        // The server's shares S of W·ρ, one per input vector, in upload order.
        let mut shares = Vec::with_capacity(work.len());
        for _ in work {
            let (resp, share, stat) = rx
                .recv()
                .map_err(|_| NnError::Protocol("HE worker stopped".into()))??;
            rep.flood_stat_bits = rep.flood_stat_bits.min(stat);
            for r in resp {
                ch.send_frame_vec(r).map_err(net)?;
            }
            shares.push(share);
        }
        Ok(shares)
    });
    let answers = answers?;
    let n_carries = steps * h * CARRIES;
    let leaf_keys = LeafKeys::server(&mut mux_r, ch, &lay, n_carries)?;
    let carry_keys = CarryKeys::server(&mut mux_r, ch, n_carries)?;
    let split = |lay: &Layout, from: usize, cts: usize, count: usize| -> Vec<Vec<u64>> {
        answers[from..from + cts]
            .iter()
            .flat_map(|sh| sh.chunks(lay.rows))
            .take(count)
            .map(|v| v.to_vec())
            .collect()
    };
    let sx = split(ih, 0, cts_x.len(), steps);
    let sh = split(hh, cts_x.len(), cts_h.len(), steps - 1);
    let sfc = split(fcl, cts_x.len() + cts_h.len(), 1, 1).concat();
    ch.flush().map_err(net)?;
    rep.he_bytes += acc.take(ch);
    // ---- offline: COTs for every client input; their m0 are the zero-labels of the client's
    // wires when each circuit is garbled online, once this party's inputs are known
    // (`BatchJob::g_known`: its own inputs are folded into the garbling and cost no label).
    let m0: Vec<Block> = ots.send_cot_view(ch, n_labels).map_err(ot)?.to_vec();
    ch.flush().map_err(net)?;
    rep.gc_bytes += acc.take(ch);
    rep.and_gates = sc.and_count() * (h * steps) as u64 + fin.and_count();
    // The gate tables' OTs (cryptogru::gate_luts), after the labels' COTs in this pool.
    let gh_keys: Vec<LeafKeys> = if lay.gh_leaves() {
        (0..steps)
            .map(|_| LeafKeys::server(&mut mux_r, ch, &lay, 3 * h))
            .collect::<Result<_>>()?
    } else {
        Vec::new()
    };
    let lut = match lay.lut {
        Some(nb) => Some((
            LutKeys::server(&mut ots, ch, nb, 2 * h * steps)?,
            sigmoid_table(&m.fp, &lay)
                .ok_or_else(|| NnError::Protocol("gate tables: no table".into()))?,
        )),
        None => None,
    };
    // ---- online
    ch.set_phase(Phase::Online);
    let masked: Vec<u32> = ch.recv_pod(steps * e).map_err(net)?;
    // W_ih x(t) + b = [W_ih (x − ρ_x) + b + S_x] + c_x
    let gi: Vec<Vec<u64>> = masked
        .chunks(e)
        .zip(&sx)
        .map(|(xm, s)| {
            let xm: Vec<u64> = xm.iter().map(|&v| v as u64).collect();
            plain_affine(&m.q.w_ih, &xm, &m.q.b_ih, f)
                .iter()
                .zip(s)
                .map(|(p, s)| p.wrapping_add(*s) & RING)
                .collect()
        })
        .collect();
    rep.he_bytes += acc.take(ch);
    // The input projections' carries (cryptogru::carry_leaves), carry j = (t·3 + gate)·H + i:
    // this party's derandomisation of every leaf, then the client's tables.
    let s_lo: Vec<u64> = gi.iter().flat_map(|x| x[..CARRIES * h].to_vec()).collect();
    ch.send_pod(&pack_bits(&leaf_derand(&lay, &leaf_keys, &s_lo)?))
        .map_err(net)?;
    ch.flush().map_err(net)?;
    let tables: Vec<u8> = ch
        .recv_pod(leaf_table_bytes(&lay, n_carries))
        .map_err(net)?;
    let leaves = leaf_outputs(&lay, &leaf_keys, &s_lo, &tables)?;
    drop(leaf_keys);
    // The carries as additive shares (cryptogru::carry_shares): this party's derandomisation of
    // each 1-of-8 OT, then the client's tables; this party's share is carry + v.
    ch.send_pod(&pack_bits(&carry_derand(&carry_keys, &leaves)?))
        .map_err(net)?;
    ch.flush().map_err(net)?;
    let tables: Vec<u8> = ch
        .recv_pod(carry_table_bytes(&lay, n_carries))
        .map_err(net)?;
    let carries = carry_shares(&lay, &carry_keys, &leaves, &tables)?;
    drop((leaves, carry_keys));
    rep.mux_bytes += acc.take(ch);
    // Garbles one batch now, this party's bits folded in (`BatchJob::g_known`: no labels of
    // its own cross the wire), the client's wires on their COT zero-labels (`m0[o..]`, in the
    // order the client drew its choices); returns this party's XOR shares of the outputs, the
    // permute bits it garbled (constants in place).
    let mut o = 0;
    let mut run = |ch: &mut C, circ: &Circuit, g_in: usize, bits: &[bool]| -> Result<Vec<bool>> {
        let e_in = circ.n_inputs - g_in;
        let job = BatchJob {
            circ,
            g_in,
            n: h,
            e_zero: Some(
                m0.get(o..o + h * e_in)
                    .ok_or_else(|| NnError::Protocol("label count mismatch".into()))?,
            ),
            reveal: Reveal::Garbler,
            scheme: garbling,
            g_known: Some(bits),
        };
        o += h * e_in;
        let b = garble_batches(ch, &[job], delta)
            .map_err(gc)?
            .pop()
            .ok_or_else(|| NnError::Protocol("missing garbled batch".into()))?;
        b.decode(circ, &vec![false; h * wire_outputs(circ)])
            .map_err(gc)
    };
    let (gb, pw, bo, l, hw) = (lay.gb, lay.pw, lay.bo, lay.l, lay.hw);
    let pwu = pw as u32;
    // Q = z·(h − n) lives in the narrower ring 2^(fo + hw) (StepLayout::q_ring).
    let qlay = lay.q_ring();
    let (qmask, qwu) = (ring_mask(qlay.pw), qlay.pw as u32);
    let neg_nu = q_weights(&qlay, &qlay.candidate_weights(&m.fp));
    // m(t) = h(t) + ρ_h(t): h(0) = 0 and ρ_h(0) = 0.
    let mut mh = vec![0u64; h];
    // Six flights per step, mirroring client_session_with.
    for t in 0..steps {
        // W_hh h + b = [W_hh m + b − S_h] + (−c_h)
        let mut gh = plain_affine(&m.q.w_hh, &mh, &m.q.b_hh, f);
        if t > 0 {
            for (g, s) in gh.iter_mut().zip(&sh[t - 1]) {
                *g = g.wrapping_sub(*s) & RING;
            }
        }
        let x = &gi[t];
        let cv = &carries[t * CARRIES * h..(t + 1) * CARRIES * h];
        // The hidden projections' carry leaves (two flights, `StepLayout::gh_leaves`): this
        // party's derandomisation, then the client's tables; carry j = gate·H + i.
        let gh_lv = match gh_keys.get(t) {
            Some(keys) => {
                ch.send_pod(&pack_bits(&leaf_derand(&lay, keys, &gh[..3 * h])?))
                    .map_err(net)?;
                ch.flush().map_err(net)?;
                let tables: Vec<u8> = ch.recv_pod(leaf_table_bytes(&lay, 3 * h)).map_err(net)?;
                let lv = leaf_outputs(&lay, keys, &gh[..3 * h], &tables)?;
                rep.mux_bytes += acc.take(ch);
                Some(lv)
            }
            None => None,
        };
        let mut bits = Vec::with_capacity(h * lay.a_garbler());
        for i in 0..h {
            let lv = gh_lv.as_ref().map(|lv| [lv[i], lv[h + i], lv[2 * h + i]]);
            lay.encode_a(
                [x[i], x[h + i]],
                [cv[i], cv[h + i]],
                [gh[i], gh[h + i], gh[2 * h + i]],
                lv.as_ref(),
                &mut bits,
            );
        }
        // Flight 1 (out): A's tables, then this party's choices for both products' client →
        // server direction (its XOR shares of r and z: its permute bits or table masks), then
        // the sender-first words of P: their correlations need only its permute bits of A's
        // outputs and its share a = gs ≫ F of gh_n.
        let out = run(ch, &sc.a, lay.a_garbler(), &bits)?;
        rep.gc_bytes += acc.take(ch);
        let per = sc.a.n_outputs();
        let ab = lay.a_gate_bits();
        let t_bits = pick(&out, per, 2 * ab..2 * ab + GHN_BITS);
        // With gate tables this party's shares of r and z are its table masks ω (fresh per
        // step), and A's outputs are the sigmoid inputs the tables are read at.
        let omega: Vec<u64> = if lay.lut.is_some() {
            (0..2 * h)
                .map(|_| prg.next_block().low_u64() & ring_mask(gb))
                .collect()
        } else {
            Vec::new()
        };
        let (r_bits, z_bits) = if lay.lut.is_some() {
            let mut r = Vec::with_capacity(2 * h * gb);
            for &w in &omega {
                put(&mut r, w, gb);
            }
            let z = r.split_off(h * gb);
            (r, z)
        } else {
            (pick(&out, per, 0..gb), pick(&out, per, gb..2 * gb))
        };
        let pr_rev = mux_r.send_choices(ch, &r_bits).map_err(ot)?;
        let qr_rev = mux_r.send_choices(ch, &z_bits).map_err(ot)?;
        let a_hi: Vec<u64> = (0..h)
            .map(|i| (gh[2 * h + i] >> lay.f) & ring_mask(l))
            .collect();
        let (corr, local_p) = early_server(&lay, &ghn_weights(&lay), &r_bits, &t_bits, &a_hi);
        let pe = ots.send_correlated_early(ch, &corr, pwu).map_err(ot)?;
        ch.flush().map_err(net)?;
        if let (Some(nb), Some((keys, table))) = (lay.lut, &lut) {
            // The gate tables (cryptogru::gate_luts): the client's derandomisation, then this
            // party's tables at its shares of A's outputs.
            let d = unpack_bits(
                &ch.recv_pod::<u8>((2 * h * nb).div_ceil(8)).map_err(net)?,
                2 * h * nb,
            );
            let mut a_bits = pick(&out, per, 0..nb);
            a_bits.extend(pick(&out, per, nb..2 * nb));
            let tables = lut_tables(table, keys, t * 2 * h, &a_bits, &omega, &d, gb)?;
            ch.send_pod(&tables).map_err(net)?;
            ch.flush().map_err(net)?;
            rep.mux_bytes += acc.take(ch);
        }
        // Flight 2 (in): P's derandomisation bits, the client's OTs of r·b, P_C − π_P, and the
        // client's OTs of z·h_C.
        let s_p = ots.finish_early(ch, pe).map_err(ot)?;
        let y_p = mux_r.recv_correlated_answer(ch, pr_rev, pwu).map_err(ot)?;
        // P_S = Λ(a + Λ_T) − Σ (sender-first outputs) + Σ (received r·b terms)
        let p: Vec<u64> = local_p
            .iter()
            .zip(sums(&s_p, p_early_len(&lay), pmask))
            .zip(sums(&y_p, gb, pmask))
            .map(|((l, s), y)| l.wrapping_sub(s).wrapping_add(y) & pmask)
            .collect();
        let p = recv_delta(ch, &p, pmask)?;
        let y_q = mux_r.recv_correlated_answer(ch, qr_rev, qwu).map_err(ot)?;
        rep.mux_bytes += acc.take(ch);
        // Flight 3 (out): B's tables, then the sender-first words of Q: their correlations need
        // this party's permute bits of B's outputs and its share m(t) of h.
        let mut bits = Vec::with_capacity(h * lay.b_garbler());
        for i in 0..h {
            lay.encode_b(p[i], x[2 * h + i], cv[2 * h + i], &mut bits);
        }
        let out = run(ch, &sc.b, lay.b_garbler(), &bits)?;
        rep.gc_bytes += acc.take(ch);
        let h_s: Vec<u64> = mh.iter().map(|v| v & qmask).collect();
        let (corr, local_q) = early_server(&qlay, &neg_nu, &z_bits, &out, &h_s);
        let qe = ots.send_correlated_early(ch, &corr, qwu).map_err(ot)?;
        ch.flush().map_err(net)?;
        rep.mux_bytes += acc.take(ch);
        // Flight 4 (in): y_c ⊕ μ, Q's derandomisation bits and Q_C − π_Q.
        let yd = unpack_bits(
            &ch.recv_pod::<u8>((h * bo).div_ceil(8)).map_err(net)?,
            h * bo,
        );
        let s_q = ots.finish_early(ch, qe).map_err(ot)?;
        // Q_S = Λ(h_S − Σ_y) − Σ (sender-first outputs) + Σ (received z·h_C terms)
        let q: Vec<u64> = local_q
            .iter()
            .zip(sums(&s_q, q_early_len(&qlay), qmask))
            .zip(sums(&y_q, gb, qmask))
            .map(|((l, s), y)| l.wrapping_sub(s).wrapping_add(y) & qmask)
            .collect();
        let q = recv_delta(ch, &q, qmask)?;
        let y = pick(&out, sc.b.n_outputs(), 0..bo);
        rep.mux_bytes += acc.take(ch);
        // Flight 5 (out): C's tables, then the sender-first B2A words for h' (the correlations
        // are this party's permute bits, so they need no answer round).
        let mut bits = Vec::with_capacity(h * lay.c_garbler());
        for i in 0..h {
            put(&mut bits, q[i], qlay.pw);
            bits.extend((0..bo).map(|j| y[i * bo + j] ^ yd[i * bo + j]));
        }
        let out = run(ch, &sc.c, lay.c_garbler(), &bits)?;
        rep.gc_bytes += acc.take(ch);
        let hp = ots
            .send_correlated_early(ch, &b2a_deltas(&out, hw, SHARE_BITS)?, SHARE_BITS as u32)
            .map_err(ot)?;
        ch.flush().map_err(net)?;
        // Flight 6 (in): the client's derandomisation bits and h'_c + ρ_h(t+1).
        let x_h = ots.finish_early(ch, hp).map_err(ot)?;
        let hs = b2a_server(&out, &x_h, hw, SHARE_BITS)?;
        let hc: Vec<u32> = ch.recv_pod(h).map_err(net)?;
        mh = hs
            .iter()
            .zip(&hc)
            .map(|(a, b)| a.wrapping_add(*b as u64) & RING)
            .collect();
        rep.mux_bytes += acc.take(ch);
    }
    // W_fc h(T) + b = [W_fc m + b − S_fc] + (−c_fc)
    let ls: Vec<u64> = plain_affine(&m.q.w_fc, &mh, &m.q.b_fc, f)
        .iter()
        .zip(&sfc)
        .map(|(p, s)| p.wrapping_sub(*s) & RING)
        .collect();
    let amask = (1u64 << lay.acc) - 1;
    let mut bits = Vec::with_capacity(c * lay.acc);
    for v in &ls {
        bits_of(&mut bits, v & amask, lay.acc);
    }
    let job = BatchJob {
        circ: &fin,
        g_in: c * lay.acc,
        n: 1,
        e_zero: Some(
            m0.get(o..)
                .ok_or_else(|| NnError::Protocol("label count mismatch".into()))?,
        ),
        reveal: Reveal::Evaluator,
        scheme: garbling,
        g_known: Some(&bits),
    };
    garble_batches(ch, &[job], delta).map_err(gc)?;
    rep.gc_bytes += acc.take(ch);
    rep.cost = ch.cost();
    Ok(rep)
}

/// A random model of the given sizes (for tests and `secinfer bench gru`): weights uniform in
/// ±2^F/√fan-in·1.5, embeddings in ±2^F, from a public seed; returns the quantised model and
/// the float embedding table (the client's public part).
pub fn random_model(
    e: usize,
    h: usize,
    c: usize,
    steps: usize,
    variant: Variant,
    seed: u64,
) -> Result<(QuantizedModel, Vec<f32>)> {
    let vocab = 64usize;
    let act = variant.candidate().name();
    let json = serde_json::json!({
        "format": "secinfer-model", "version": 1, "task": "classification",
        "layers": [
            {"type": "embedding", "name": "embed", "vocab": vocab, "dim": e},
            {"type": "gru", "name": "gru", "input": e, "hidden": h, "activation": act},
            {"type": "dense", "name": "fc", "input": h, "output": c}
        ],
        "fixed_point": {"bits": 20, "frac_bits": 12},
        "vocab": {"file": "vocab.json", "max_len": steps, "pad": 0, "unk": 1},
        "labels": (0..c).map(|i| format!("class{i}")).collect::<Vec<_>>(),
    });
    let config = ModelConfig::parse(&json.to_string())?;
    let fp = fp_for_variant(&config, variant)?;
    let mut prg = Prg::from_seed(Block(
        0x6772_7500_0000_0000_0000_0000_0000_0000 | seed as u128,
    ));
    let mut uni = |n: usize, bound: f64| -> Vec<f32> {
        (0..n)
            .map(|_| {
                ((prg.next_block().low_u64() >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0)
                    * bound
            })
            .map(|v| v as f32)
            .collect()
    };
    let embed = uni(vocab * e, 1.0);
    let w_ih = uni(3 * h * e, 1.5 / (e as f64).sqrt());
    let w_hh = uni(3 * h * h, 1.5 / (h as f64).sqrt());
    let b_ih = uni(3 * h, 0.5);
    let b_hh = uni(3 * h, 0.5);
    let w_fc = uni(c * h, 1.5 / (h as f64).sqrt());
    let b_fc = uni(c, 0.5);
    let weights = crate::model::Weights {
        embed: embed.clone(),
        w_ih,
        w_hh,
        b_ih,
        b_hh,
        w_fc,
        b_fc,
    };
    let model = crate::model::Model {
        config,
        weights,
        vocab: None,
    };
    Ok((QuantizedModel::new(&model, fp), embed))
}

/// The step layouts the product tests sweep: unsigned 7-bit, signed 8-bit and unsigned
/// 13-bit gates (product rings of 27, 27 and 32 bits) at L = 20, F = 12 and hidden width `hw`.
#[cfg(test)]
fn test_layouts(hw: usize) -> impl Iterator<Item = StepLayout> {
    [(7, 27, false), (8, 27, true), (13, 32, false)]
        .into_iter()
        .map(move |(gb, pw, g_signed)| StepLayout {
            acc: 32,
            l: 20,
            f: 12,
            pw,
            gb,
            g_signed,
            bo: 8,
            hw,
            lut: None,
            state_exact: true,
        })
}

/// A decomposed product (P or Q) for one element with every OT replaced by its definition
/// (tests): the sender-first OTs `(corr, client choices, server's local part)` give the client
/// c·δ + ρ and the server −ρ; the client-sender multiplexer `(weights, client's gate bits,
/// server's gate bits)` gives the server x + c·δ and the client its `mux_combine` part.
/// Returns the client's and the server's shares mod 2^PW.
#[cfg(test)]
fn ideal_decomposed_product(
    lay: &StepLayout,
    (corr, choices, local): (&[u64], &[bool], u64),
    (w, cli_bits, srv_bits): (&[u64], &[bool], &[bool]),
    rnd: &mut dyn FnMut(u64) -> u64,
) -> (u64, u64) {
    let pm = ring_mask(lay.pw);
    let (mut cs, mut ss) = (0u64, local);
    for (d, &c) in corr.iter().zip(choices) {
        let r = rnd(pm);
        cs = cs.wrapping_add(if c { *d } else { 0 }).wrapping_add(r);
        ss = ss.wrapping_sub(r);
    }
    let del = mux_deltas(lay, w, cli_bits);
    let x: Vec<u64> = w.iter().map(|_| rnd(pm)).collect();
    let recv: Vec<u64> = x
        .iter()
        .zip(&del)
        .zip(srv_bits)
        .map(|((x, d), &c)| x.wrapping_add(if c { *d } else { 0 }) & pm)
        .collect();
    let zero = vec![0u64; w.len()];
    cs = cs.wrapping_add(mux_combine(lay, w, cli_bits, &zero, &x).expect("mux")[0]);
    ss = ss.wrapping_add(sums(&recv, lay.gb, pm)[0]);
    (cs & pm, ss & pm)
}

#[cfg(test)]
mod tests {
    use super::*;
    use secinfer_net::simulate;

    /// `gate_product` against plaintext: g (unsigned, or signed with its top bit weighing
    /// −2^(gb−1)) times v mod 2^PW, from XOR shares of g's bits and additive shares of v,
    /// including the extremes of both.
    #[test]
    fn gate_product_equals_plaintext_mod_2_pw() {
        for lay in test_layouts(20) {
            let StepLayout {
                gb, pw, g_signed, ..
            } = lay;
            let pm = ring_mask(pw);
            let mut prg = Prg::from_seed(Block(0x5eed_0000 + gb as u128));
            let n = 300;
            let mut gs: Vec<u64> = (0..n)
                .map(|_| prg.next_block().low_u64() & ring_mask(gb))
                .collect();
            let mut vs: Vec<u64> = (0..n).map(|_| prg.next_block().low_u64() & pm).collect();
            gs[0] = ring_mask(gb);
            gs[1] = 1 << (gb - 1);
            vs[0] = pm;
            vs[1] = 1 << (pw - 1);
            let lam: Vec<u64> = (0..n)
                .map(|_| prg.next_block().low_u64() & ring_mask(gb))
                .collect();
            let beta: Vec<u64> = (0..n).map(|_| prg.next_block().low_u64() & pm).collect();
            let bits =
                |x: &[u64]| -> Vec<bool> { x.iter().flat_map(|&v| bit_vec(v, gb)).collect() };
            let g_srv: Vec<u64> = gs.iter().zip(&lam).map(|(g, l)| g ^ l).collect();
            let v_srv: Vec<u64> = vs
                .iter()
                .zip(&beta)
                .map(|(v, b)| v.wrapping_add(*b) & pm)
                .collect();
            let v_cli: Vec<u64> = beta.iter().map(|b| b.wrapping_neg() & pm).collect();
            let (bc, bs) = (bits(&lam), bits(&g_srv));
            let run = simulate(
                move |ch| {
                    let mut r = PooledOtReceiver::setup(ch, &mut Prg::new()).map_err(ot)?;
                    let mut s = PooledOtSender::setup(ch, &mut Prg::new()).map_err(ot)?;
                    gate_product(MuxOt::Client(&mut r, &mut s), ch, &lay, &bc, &v_cli)
                },
                move |ch| {
                    let mut s = PooledOtSender::setup(ch, &mut Prg::new()).map_err(ot)?;
                    let mut r = PooledOtReceiver::setup(ch, &mut Prg::new()).map_err(ot)?;
                    gate_product(MuxOt::Server(&mut s, &mut r), ch, &lay, &bs, &v_srv)
                },
            );
            let pc = run.client.output.unwrap_or_else(|e| panic!("client: {e}"));
            let ps = run.server.output.unwrap_or_else(|e| panic!("server: {e}"));
            for i in 0..n {
                let g = if g_signed {
                    sign_extend(gs[i], gb)
                } else {
                    gs[i] as i64
                };
                let want = (g as i128 * vs[i] as i128) as u64 & pm;
                assert_eq!(
                    pc[i].wrapping_add(ps[i]) & pm,
                    want,
                    "g {g} v {} ({gb}, {pw})",
                    vs[i]
                );
            }
        }
    }
}

#[cfg(test)]
mod p_tests {
    use super::*;

    /// P = r·trunc(gh_n) from the decomposition a + b + κ − 2^L(o + s) against plaintext: the
    /// server's correlations and local part, the client's choices and r·b weights, with every
    /// OT replaced by its definition (u − s = c·δ). Random and extreme shares, including sums
    /// that wrap L bits and negative words; unsigned and signed gates.
    #[test]
    fn product_decomposition_equals_plaintext_mod_2_pw() {
        for lay in test_layouts(16) {
            let StepLayout {
                gb, pw, g_signed, ..
            } = lay;
            let (l, f, pm) = (lay.l, lay.f, ring_mask(pw));
            let mut prg = Prg::from_seed(Block(0x9d0c + gb as u128));
            let mut rnd = |m: u64| prg.next_block().low_u64() & m;
            for it in 0..400 {
                let (gs, gc) = match it {
                    0 => (RING, RING),
                    1 => (0, 0),
                    2 => (0x7fff_f000, 0x0000_1000),
                    _ => (rnd(RING), rnd(RING)),
                };
                let g = match it {
                    0 => ring_mask(gb),
                    1 => 1 << (gb - 1),
                    _ => rnd(ring_mask(gb)),
                };
                // plaintext: trunc(gh_n) sign-extended, times the gate value
                let v = ((gs.wrapping_add(gc) & RING) >> f) & ring_mask(l);
                let gv = if g_signed {
                    sign_extend(g, gb)
                } else {
                    g as i64
                };
                let want = (gv as i128 * sign_extend(v, l) as i128) as u64 & pm;
                // circuit A's outputs κ, o, s
                let kappa = ((gs & ring_mask(f)) + (gc & ring_mask(f))) >> f;
                let (a, b) = ((gs >> f) & ring_mask(l), (gc >> f) & ring_mask(l));
                let sum = a + b + kappa;
                let t = [kappa == 1, sum >> l == 1, (sum >> (l - 1)) & 1 == 1];
                // XOR shares: the server's are its permute bits
                let lam = rnd(ring_mask(gb));
                let lam_t: Vec<bool> = (0..GHN_BITS).map(|_| rnd(1) == 1).collect();
                let r_srv = bit_vec(lam, gb);
                let r_cli = bit_vec(g ^ lam, gb);
                let t_cli: Vec<bool> = t.iter().zip(&lam_t).map(|(x, y)| x ^ y).collect();
                let (corr, local) = early_server(&lay, &ghn_weights(&lay), &r_srv, &lam_t, &[a]);
                let ch = early_choices(&lay, &r_cli, &t_cli, GHN_BITS);
                assert_eq!(corr.len(), p_early_len(&lay));
                assert_eq!(ch.len(), corr.len());
                let w = p_client_weights(&lay, &[b]);
                let (pc, ps) = ideal_decomposed_product(
                    &lay,
                    (&corr, &ch, local[0]),
                    (&w, &r_cli, &r_srv),
                    &mut rnd,
                );
                assert_eq!(
                    pc.wrapping_add(ps) & pm,
                    want,
                    "gs {gs:#x} gc {gc:#x} g {g} ({gb}, {pw}, {g_signed})"
                );
            }
        }
    }
}

#[cfg(test)]
mod q_tests {
    use super::*;

    /// Q = z·(h − n) from the decomposition against plaintext: the server's correlations and
    /// local part, the client's choices and z·h_C weights, every OT replaced by its definition.
    /// h in [−2^(hw−1), 2^(hw−1)) shared mod 2^32 as the session shares it (m = h + ρ, −ρ),
    /// n = sext(y)·2^shift for a bo-bit y, XOR shares with random permute bits; unsigned and
    /// signed gates, extremes of h, y and z included.
    #[test]
    fn q_decomposition_equals_plaintext_mod_2_pw() {
        for lay in test_layouts(16) {
            let StepLayout {
                gb,
                pw,
                g_signed,
                bo,
                hw,
                ..
            } = lay;
            let pm = ring_mask(pw);
            for shift in [0u32, 4, 8] {
                // ν as `StepLayout::candidate_weights` makes them for this shift
                let nu: Vec<u64> = (0..bo)
                    .map(|k| {
                        let w = 1u64 << (k as u32 + shift);
                        if k + 1 == bo {
                            w.wrapping_neg() & pm
                        } else {
                            w & pm
                        }
                    })
                    .collect();
                let mut prg = Prg::from_seed(Block(0x0e0c + (gb * 10) as u128 + shift as u128));
                let mut rnd = |m: u64| prg.next_block().low_u64() & m;
                for it in 0..400 {
                    let hv: i64 = match it {
                        0 => (1 << (hw - 1)) - 1,
                        1 => -(1 << (hw - 1)),
                        2 => 0,
                        _ => sign_extend(rnd(ring_mask(hw)), hw),
                    };
                    let y = match it {
                        0 => ring_mask(bo),
                        1 => 1 << (bo - 1),
                        2 => (1 << (bo - 1)) - 1,
                        _ => rnd(ring_mask(bo)),
                    };
                    let g = match it {
                        0 => ring_mask(gb),
                        1 => 1 << (gb - 1),
                        _ => rnd(ring_mask(gb)),
                    };
                    let gv = if g_signed {
                        sign_extend(g, gb)
                    } else {
                        g as i64
                    };
                    let n = sign_extend(y, bo) << shift;
                    let want = (gv as i128 * (hv - n) as i128) as u64 & pm;
                    // the session's shares of h: m = h + ρ (server), −ρ (client), mod 2^32
                    let rho = rnd(RING);
                    let h_s = (hv as u64).wrapping_add(rho) & RING & pm;
                    let h_c = neg(rho) & pm;
                    let lam = rnd(ring_mask(gb));
                    let sig = rnd(ring_mask(bo));
                    let (z_srv, z_cli) = (bit_vec(lam, gb), bit_vec(g ^ lam, gb));
                    let (y_srv, y_cli) = (bit_vec(sig, bo), bit_vec(y ^ sig, bo));
                    let (corr, local) =
                        early_server(&lay, &q_weights(&lay, &nu), &z_srv, &y_srv, &[h_s]);
                    let ch = early_choices(&lay, &z_cli, &y_cli, bo);
                    assert_eq!(corr.len(), q_early_len(&lay));
                    assert_eq!(ch.len(), corr.len());
                    let w = p_client_weights(&lay, &[h_c]);
                    let (qc, qs) = ideal_decomposed_product(
                        &lay,
                        (&corr, &ch, local[0]),
                        (&w, &z_cli, &z_srv),
                        &mut rnd,
                    );
                    assert_eq!(
                        qc.wrapping_add(qs) & pm,
                        want,
                        "h {hv} y {y} g {g} shift {shift} ({gb}, {pw}, {g_signed})"
                    );
                }
            }
        }
    }
}

#[cfg(test)]
mod leaf_tests {
    use super::*;
    use secinfer_net::simulate;

    /// The carry leaves and carry shares over real pooled OTs against plaintext: lt_hi ⊕ (eq_hi ∧
    /// lt_lo) from both parties' leaf shares, and the sum mod 2^L of both parties' carry shares,
    /// equal [s + c ≥ 2^F] for every pair of low parts at F = 4 and 5 (odd: digits 3 and 2) and
    /// for random and extreme shares at F = 12 and 16 (L = 20, and 1 and 30 for the packing).
    #[test]
    fn carry_leaves_and_shares_equal_the_carry() {
        for (f, l) in [(4usize, 20usize), (5, 1), (12, 20), (16, 30)] {
            let lay = StepLayout {
                f,
                l,
                ..test_layouts(16).next().unwrap()
            };
            let lo = ring_mask(f);
            let (mut ss, mut cs) = (Vec::new(), Vec::new());
            if f <= 5 {
                for a in 0..=lo {
                    for b in 0..=lo {
                        // high bits above F must not matter
                        ss.push(a | (0xabc << f));
                        cs.push(b | (0x5 << f));
                    }
                }
            } else {
                let mut prg = Prg::from_seed(Block(0x1eaf + f as u128));
                for (a, b) in [(0, 0), (lo, 0), (0, lo), (lo, lo), (1, lo), (lo, 1)] {
                    ss.push(a);
                    cs.push(b);
                }
                for _ in 0..3000 {
                    ss.push(prg.next_block().low_u64() & RING);
                    cs.push(prg.next_block().low_u64() & RING);
                }
            }
            let k = ss.len();
            let mut prg = Prg::from_seed(Block(0x7a0 + f as u128));
            let tau: Vec<[bool; LEAF_BITS]> = (0..k)
                .map(|_| {
                    let t = prg.next_block().low_u64();
                    [t & 1 == 1, t & 2 == 2, t & 4 == 4]
                })
                .collect();
            let v: Vec<u64> = (0..k)
                .map(|_| prg.next_block().low_u64() & ring_mask(l))
                .collect();
            let (cs2, tau2, ss2, v2) = (cs.clone(), tau.clone(), ss.clone(), v.clone());
            let cots = k * (f + LEAF_BITS);
            let run = simulate(
                move |ch| {
                    let mut s = PooledOtSender::setup(ch, &mut Prg::new()).map_err(ot)?;
                    s.fill(ch, cots).map_err(ot)?;
                    let keys = LeafKeys::client(&mut s, ch, &lay, k)?;
                    let ckeys = CarryKeys::client(&mut s, ch, k)?;
                    let d =
                        unpack_bits(&ch.recv_pod::<u8>((k * f).div_ceil(8)).map_err(net)?, k * f);
                    let t = leaf_tables(&lay, &keys, &cs2, &tau2, &d)?;
                    ch.send_pod(&t).map_err(net)?;
                    ch.flush().map_err(net)?;
                    let n = k * LEAF_BITS;
                    let d = unpack_bits(&ch.recv_pod::<u8>(n.div_ceil(8)).map_err(net)?, n);
                    let t = carry_tables(&lay, &ckeys, &tau2, &v2, &d)?;
                    ch.send_pod(&t).map_err(net)?;
                    ch.flush().map_err(net)?;
                    Ok::<(), NnError>(())
                },
                move |ch| {
                    let mut r = PooledOtReceiver::setup(ch, &mut Prg::new()).map_err(ot)?;
                    r.fill(ch, cots).map_err(ot)?;
                    let keys = LeafKeys::server(&mut r, ch, &lay, k)?;
                    let ckeys = CarryKeys::server(&mut r, ch, k)?;
                    ch.send_pod(&pack_bits(&leaf_derand(&lay, &keys, &ss2)?))
                        .map_err(net)?;
                    ch.flush().map_err(net)?;
                    let t: Vec<u8> = ch.recv_pod(leaf_table_bytes(&lay, k)).map_err(net)?;
                    let leaves = leaf_outputs(&lay, &keys, &ss2, &t)?;
                    ch.send_pod(&pack_bits(&carry_derand(&ckeys, &leaves)?))
                        .map_err(net)?;
                    ch.flush().map_err(net)?;
                    let t: Vec<u8> = ch.recv_pod(carry_table_bytes(&lay, k)).map_err(net)?;
                    let shares = carry_shares(&lay, &ckeys, &leaves, &t)?;
                    Ok::<_, NnError>((leaves, shares))
                },
            );
            run.client.output.unwrap_or_else(|e| panic!("client: {e}"));
            let (out, shares) = run.server.output.unwrap_or_else(|e| panic!("server: {e}"));
            for j in 0..k {
                let b: Vec<bool> = (0..LEAF_BITS).map(|x| out[j][x] ^ tau[j][x]).collect();
                let carry = b[0] ^ (b[1] & b[2]);
                let want = (ss[j] & lo) + (cs[j] & lo) > lo;
                assert_eq!(carry, want, "F {f}: s {:#x} c {:#x}", ss[j], cs[j]);
                let sum = shares[j].wrapping_sub(v[j]) & ring_mask(l);
                assert_eq!(
                    sum, want as u64,
                    "F {f} L {l}: carry share of s {:#x} c {:#x}",
                    ss[j], cs[j]
                );
            }
        }
    }

    /// A short, long or padded carry-share table frame is a typed error, not a panic.
    #[test]
    fn carry_shares_refuse_bad_tables() {
        let lay = test_layouts(16).next().unwrap();
        let k = 5;
        let keys = CarryKeys {
            keys: vec![0; k],
            choices: vec![0; k],
        };
        let leaves = vec![[false; LEAF_BITS]; k];
        let n = carry_table_bytes(&lay, k);
        assert!(carry_shares(&lay, &keys, &leaves, &vec![0; n]).is_ok());
        for bad in [vec![0u8; n - 1], vec![0u8; n + 1]] {
            assert!(carry_shares(&lay, &keys, &leaves, &bad).is_err());
        }
        if !(k * CARRY_TABLE * lay.l).is_multiple_of(8) {
            let mut t = vec![0u8; n];
            t[n - 1] = 0x80;
            assert!(carry_shares(&lay, &keys, &leaves, &t).is_err());
        }
        let short = CarryKeys {
            keys: vec![0; k - 1],
            choices: vec![0; k - 1],
        };
        assert!(carry_shares(&lay, &short, &leaves, &vec![0; n]).is_err());
        assert!(carry_derand(&short, &leaves).is_err());
    }
}

#[cfg(test)]
mod lut_tests {
    use super::*;
    use secinfer_net::simulate;

    /// The gate tables over real pooled OTs against plaintext: for random tables, masks and
    /// XOR-shared inputs (every input value at b = 3, random ones at b = 8), the client's share
    /// ⊕ the server's ω is the table entry at the reconstructed input, for two calls on
    /// consecutive key ranges (as two steps take them).
    #[test]
    fn gate_tables_read_the_entry_at_the_shared_input() {
        for (nb, gb, k) in [(3usize, 7usize, 64usize), (8, 7, 300), (8, 13, 50)] {
            let mut prg = Prg::from_seed(Block(0x7ab + nb as u128));
            let n = 1usize << nb;
            let table: Vec<u64> = (0..n)
                .map(|_| prg.next_block().low_u64() & ring_mask(gb))
                .collect();
            let mut draw = |bits: usize| -> Vec<u64> {
                (0..2 * k)
                    .map(|_| prg.next_block().low_u64() & ring_mask(bits))
                    .collect()
            };
            let (xs, a, omega) = (draw(nb), draw(nb), draw(gb));
            let xs: Vec<u64> = if nb == 3 {
                (0..2 * k).map(|u| (u % n) as u64).collect()
            } else {
                xs
            };
            let bits = |v: &[u64]| -> Vec<bool> {
                let mut out = Vec::new();
                for &w in v {
                    put(&mut out, w, nb);
                }
                out
            };
            // The client's share b = x ⊕ a.
            let b: Vec<u64> = xs.iter().zip(&a).map(|(x, a)| x ^ a).collect();
            let (a_bits, b_bits) = (bits(&a), bits(&b));
            let (t2, o2) = (table.clone(), omega.clone());
            let run = simulate(
                move |ch| {
                    let mut r = PooledOtReceiver::setup(ch, &mut Prg::new()).map_err(ot)?;
                    r.fill(ch, 2 * k * nb).map_err(ot)?;
                    let keys = LutKeys::client(&mut r, ch, nb, 2 * k)?;
                    let mut out = Vec::new();
                    for call in 0..2 {
                        let x = &b_bits[call * k * nb..(call + 1) * k * nb];
                        let d = lut_derand(&keys, call * k, x, nb)?;
                        ch.send_pod(&pack_bits(&d)).map_err(net)?;
                        ch.flush().map_err(net)?;
                        let t: Vec<u8> = ch.recv_pod(packed_len(k * n, gb as u32)).map_err(net)?;
                        // one byte short is refused
                        assert!(lut_outputs(&keys, call * k, x, nb, gb, &t[1..]).is_err());
                        out.extend(lut_outputs(&keys, call * k, x, nb, gb, &t)?);
                    }
                    Ok::<_, NnError>(out)
                },
                move |ch| {
                    let mut s = PooledOtSender::setup(ch, &mut Prg::new()).map_err(ot)?;
                    s.fill(ch, 2 * k * nb).map_err(ot)?;
                    let keys = LutKeys::server(&mut s, ch, nb, 2 * k)?;
                    for call in 0..2 {
                        let d = unpack_bits(
                            &ch.recv_pod::<u8>((k * nb).div_ceil(8)).map_err(net)?,
                            k * nb,
                        );
                        let a = &a_bits[call * k * nb..(call + 1) * k * nb];
                        let om = &o2[call * k..(call + 1) * k];
                        // a derandomisation of the wrong length, or keys for too few tables,
                        // are refused
                        assert!(lut_tables(&t2, &keys, call * k, a, om, &d[1..], gb).is_err());
                        assert!(lut_tables(&t2, &keys, 2 * k, a, om, &d, gb).is_err());
                        let t = lut_tables(&t2, &keys, call * k, a, om, &d, gb)?;
                        ch.send_pod(&t).map_err(net)?;
                        ch.flush().map_err(net)?;
                    }
                    Ok::<(), NnError>(())
                },
            );
            run.server.output.unwrap_or_else(|e| panic!("server: {e}"));
            let out = run.client.output.unwrap_or_else(|e| panic!("client: {e}"));
            for u in 0..2 * k {
                let share = word(&out[u * gb..(u + 1) * gb]);
                assert_eq!(
                    share ^ omega[u],
                    table[xs[u] as usize],
                    "b {nb} gb {gb} table {u} input {}",
                    xs[u]
                );
            }
        }
    }
}

#[cfg(test)]
mod b2a_tests {
    use super::*;
    use secinfer_net::simulate;

    /// `b2a` against plaintext: random and extreme L-bit words from XOR shares to additive
    /// shares of their sign extension mod 2^k.
    #[test]
    fn b2a_equals_sign_extension_mod_2_k() {
        for (l, k, early) in [
            (20usize, 27usize, false),
            (20, 32, false),
            (8, 8, false),
            (1, 5, false),
            (20, 27, true),
            (16, 32, true),
            (8, 8, true),
            (1, 5, true),
        ] {
            let mut prg = Prg::from_seed(Block(0xb2a0 + (l * 100 + k) as u128));
            let n = 200;
            let mut xs: Vec<u64> = (0..n)
                .map(|_| prg.next_block().low_u64() & ring_mask(l))
                .collect();
            xs[0] = ring_mask(l);
            xs[1] = 1 << (l - 1);
            xs[2] = 0;
            let a: Vec<u64> = (0..n)
                .map(|_| prg.next_block().low_u64() & ring_mask(l))
                .collect();
            let bits = |v: &[u64]| -> Vec<bool> { v.iter().flat_map(|&x| bit_vec(x, l)).collect() };
            let srv = bits(&a);
            let cli = bits(&xs.iter().zip(&a).map(|(x, a)| x ^ a).collect::<Vec<_>>());
            let run = simulate(
                move |ch| {
                    let mut r = PooledOtReceiver::setup(ch, &mut Prg::new()).map_err(ot)?;
                    b2a(Err(&mut r), ch, &cli, l, k, early)
                },
                move |ch| {
                    let mut s = PooledOtSender::setup(ch, &mut Prg::new()).map_err(ot)?;
                    b2a(Ok(&mut s), ch, &srv, l, k, early)
                },
            );
            let c = run.client.output.unwrap_or_else(|e| panic!("client: {e}"));
            let s = run.server.output.unwrap_or_else(|e| panic!("server: {e}"));
            for i in 0..n {
                let want = (sign_extend(xs[i], l) as u64) & ring_mask(k);
                assert_eq!(
                    c[i].wrapping_add(s[i]) & ring_mask(k),
                    want,
                    "x {} ({l}, {k}, early {early})",
                    xs[i]
                );
            }
        }
    }
}
