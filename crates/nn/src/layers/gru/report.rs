//! What a session measured and what the client learns: the cost report, with bytes split into
//! the garbled-circuit, HE and multiplexer buckets as each sub-protocol's flights run.
use secinfer_gc::garble::Scheme;
use secinfer_net::{Channel, Cost};

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
    /// Per-step costs of a multi-step network (family `hegc`'s image networks).
    pub layers: Vec<crate::layers::hegc::LayerCost>,
}

/// Bytes (both directions) so far on a channel.
fn bytes<C: Channel>(ch: &C) -> u64 {
    let c = ch.cost();
    c.setup.bytes() + c.offline.bytes() + c.online.bytes()
}

/// A session's report as it is filled: each sub-protocol's bytes since the last count go into
/// one bucket (GC, HE or multiplexers) when it ends.
pub(super) struct Meter {
    pub(super) rep: SessionReport,
    mark: u64,
}

impl Meter {
    pub(super) fn start<C: Channel>(ch: &C, rep: SessionReport) -> Meter {
        Meter {
            rep,
            mark: bytes(ch),
        }
    }
    fn take<C: Channel>(&mut self, ch: &C) -> u64 {
        let b = bytes(ch);
        let d = b - self.mark;
        self.mark = b;
        d
    }
    /// The bytes since the last count were garbled-circuit traffic.
    pub(super) fn gc<C: Channel>(&mut self, ch: &C) {
        self.rep.gc_bytes += self.take(ch);
    }
    /// The bytes since the last count were HE traffic.
    pub(super) fn he<C: Channel>(&mut self, ch: &C) {
        self.rep.he_bytes += self.take(ch);
    }
    /// The bytes since the last count were the gate products' (and tables') traffic.
    pub(super) fn mux<C: Channel>(&mut self, ch: &C) {
        self.rep.mux_bytes += self.take(ch);
    }
    /// Counts from `ch`'s bytes on: the online steps meter their in-memory wire, not the
    /// session's channel.
    pub(super) fn rebase<C: Channel>(&mut self, ch: &C) {
        self.mark = bytes(ch);
    }
    /// The report so far, with `ch`'s cost.
    pub(super) fn snapshot<C: Channel>(&self, ch: &C) -> SessionReport {
        let mut rep = self.rep.clone();
        rep.cost = ch.cost();
        rep
    }
    /// The report, with the channel's cost so far.
    pub(super) fn finish<C: Channel>(mut self, ch: &C) -> SessionReport {
        self.rep.cost = ch.cost();
        self.rep
    }
}

/// What the client learns.
#[derive(Clone, Debug)]
pub struct GruOutcome {
    /// The argmax of the logits.
    pub class: usize,
    /// The indices of the largest logits, largest first, as many as the client asked for
    /// (`ClientOptions::top_k`; `class` is the first).
    pub top: Vec<usize>,
    pub logits: Option<Vec<i64>>,
    /// log2 p(word) of the word the client named (`ClientOptions::log_prob_of`), at
    /// `logprob::LOG_FRAC` fractional bits; `class` and `top` are then empty.
    pub log2_prob: Option<i64>,
    pub report: SessionReport,
}

/// The indices of the `k` largest logits, largest first, the lowest index first among equal
/// logits: what the final circuit's top-k reveals, in the clear.
pub fn top_k(logits: &[i64], k: usize) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..logits.len()).collect();
    idx.sort_by(|&a, &b| logits[b].cmp(&logits[a]).then(a.cmp(&b)));
    idx.truncate(k);
    idx
}
