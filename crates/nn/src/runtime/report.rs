//! What a session ended with, for every family alike: the channel's cost report (time, bytes
//! each way, rounds per phase) that the driver measures, beside the family's own account (the
//! garbled and HE byte buckets of `hegc`, CHOCO's ciphertext counts, OPAF's math, SHE's
//! bootstraps). The server logs one "done" line per session from it ([`Served`]'s `Display`);
//! the client reads the family's extras from its [`Detail`].
use crate::layers::choco::{ChocoOutcome, ServerCost};
use crate::layers::gru::SessionReport;
use crate::layers::ss::{FastGrnnRun, ServedRun};
use secinfer_net::Cost;
use std::fmt;

/// The server's own account of one session, by family.
pub enum ServedDetail {
    /// CryptoGRU and GALA: their report's byte buckets say it all.
    Hegc,
    /// CHOCO: homomorphic evaluation time, ciphertexts each way, flooding.
    Choco(ServerCost),
    /// OPAF's FastGRNN: the client's request and the run's phases.
    Ss(Box<ServedRun>),
    /// SHE: the server key's expansion and the samples' bootstraps.
    #[cfg(feature = "tfhe")]
    She(secinfer_tfhe::session::ServerReport),
}

/// What the server's side of one session measured.
pub struct Served {
    /// The channel's cost (every family), with `hegc`'s byte buckets and what it revealed.
    pub report: SessionReport,
    pub detail: ServedDetail,
}

impl Served {
    /// A report of a family that fills only the channel's cost.
    pub(crate) fn metered(cost: Cost, logits_revealed: bool, detail: ServedDetail) -> Served {
        Served {
            report: SessionReport {
                cost,
                logits_revealed,
                ..SessionReport::default()
            },
            detail,
        }
    }
}

fn revealed(logits: bool) -> &'static str {
    if logits {
        "class and logits"
    } else {
        "class"
    }
}

fn mb(bytes: u64) -> f64 {
    bytes as f64 / 1e6
}

/// The text of the server's "done" line: what the session cost and what it revealed.
impl fmt::Display for Served {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let rep = &self.report;
        let c = &rep.cost;
        match &self.detail {
            ServedDetail::Hegc => write!(
                f,
                "{:.3} s, {:.2} MB (GC {:.2} MB, HE {:.2} MB), revealed {}",
                c.setup.time_s + c.offline.time_s + c.online.time_s,
                mb(c.setup.bytes() + c.offline.bytes() + c.online.bytes()),
                mb(rep.gc_bytes),
                mb(rep.he_bytes),
                revealed(rep.logits_revealed)
            ),
            ServedDetail::Choco(c) => write!(
                f,
                "{:.3} s of HE, {} ciphertexts in, {} out, flooding 2^-{:.1}; revealed every \
                 intermediate activation (family choco)",
                c.eval_s, c.ciphertexts_in, c.ciphertexts_out, c.flood_stat_bits
            ),
            ServedDetail::Ss(s) => {
                let r = &s.run;
                let bytes = [&r.cost.setup, &r.cost.offline, &r.cost.online]
                    .iter()
                    .map(|p| p.bytes())
                    .sum::<u64>();
                write!(
                    f,
                    "math {}, {:.3} s, {:.2} MB, revealed {}",
                    s.request.math.name(),
                    r.setup_s + r.offline_s + r.online_s,
                    mb(bytes),
                    revealed(s.request.logits)
                )
            }
            #[cfg(feature = "tfhe")]
            ServedDetail::She(r) => write!(
                f,
                "server key {:.1} MB expanded in {:.2} s, {} samples in {:.2} s ({} bootstraps)",
                mb(r.key_bytes),
                r.expand_s,
                r.samples,
                r.eval_s,
                r.pbs
            ),
        }
    }
}

/// SHE's session set-up as the client measured it (on the session's first outcome).
#[cfg(feature = "tfhe")]
#[derive(Clone, Debug, Default)]
pub struct SheSetup {
    pub keygen_s: f64,
    pub key_bytes: u64,
    /// Key upload until the server has expanded it (includes `server_expand_s`).
    pub key_upload_s: f64,
    pub server_expand_s: f64,
}

/// The family's own part of what the client learns and measured.
pub enum Detail {
    /// CryptoGRU and GALA: the outcome's report holds everything.
    Hegc,
    /// CHOCO: every layer's output (the activations this mode reveals) and the client's cost.
    Choco(Box<ChocoOutcome>),
    /// OPAF's FastGRNN: the run's phases, per-block costs.
    Ss(Box<FastGrnnRun>),
    /// SHE: one sample's timings and bytes; the session's key set-up on its first sample.
    #[cfg(feature = "tfhe")]
    She {
        sample: secinfer_tfhe::session::SampleReport,
        setup: Option<SheSetup>,
    },
}
