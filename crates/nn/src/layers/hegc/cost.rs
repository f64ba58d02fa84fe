//! The per-layer kernel choice: GALA's, GAZELLE's or the coefficient-encoded product, by a
//! cost model of each candidate on the layer's own shape.
//!
//! Each candidate is planned on the real BFV layout and counted on the counting backend
//! (rotations and ScMults, as GALA's Table IX counts them), with its wire bytes from the wire
//! formats (seeded uploads, slot responses, sparse coefficient responses) and its Galois keys
//! from its rotation steps. The time estimate adds the unit costs of [`UnitCosts::MEASURED`]
//! (one party's HE work per operation, measured by `secinfer bench net --unit-costs`) and the
//! bytes at the LAN profile's bandwidth. Galois keys are a one-time upload shared by every
//! layer that rotates by the same step: a layer pays for the keys the layers before it have
//! not already asked for (their generation and their bytes), so the choice is made layer by
//! layer in network order and is the same at both parties.
use super::{ConvGeom, LinearShape, MAX_CONV_GROUPS};
use crate::error::{NnError, Result};
use secinfer_he::kernels::coeff_prime::{self, CoeffPlan};
use secinfer_he::{ConvPlan, CountingEvaluator, Evaluator, MatVecMethod, MatVecPlan, Params};
use std::collections::BTreeSet;

/// A linear layer's HE kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kernel {
    /// GALA's row-encoding-share-RaS matvec and kernel-grouping convolution.
    Gala,
    /// GAZELLE's hybrid matvec and output-rotation convolution.
    Gazelle,
    /// Coefficient encoding (Cheetah-style): no rotations, no Galois keys.
    Coeff,
}

impl Kernel {
    pub const ALL: [Kernel; 3] = [Kernel::Gala, Kernel::Gazelle, Kernel::Coeff];
    pub fn name(self) -> &'static str {
        match self {
            Kernel::Gala => "gala",
            Kernel::Gazelle => "gazelle",
            Kernel::Coeff => "coeff",
        }
    }
    /// The slot kernel's matvec method (GALA's for the coefficient kernel's counts, unused).
    pub fn method(self) -> MatVecMethod {
        match self {
            Kernel::Gazelle => MatVecMethod::Gazelle,
            _ => MatVecMethod::Gala,
        }
    }
}

/// What the model owner asks for: one kernel for every layer, or the cost model's choice per
/// layer (the default).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum KernelChoice {
    #[default]
    Auto,
    Fixed(Kernel),
}

impl std::str::FromStr for KernelChoice {
    type Err = NnError;
    fn from_str(s: &str) -> Result<Self> {
        Ok(match s {
            "auto" => KernelChoice::Auto,
            "gala" => KernelChoice::Fixed(Kernel::Gala),
            "gazelle" => KernelChoice::Fixed(Kernel::Gazelle),
            "coeff" => KernelChoice::Fixed(Kernel::Coeff),
            o => {
                return Err(NnError::Input(format!(
                    "unknown kernel {o:?} (auto, gala, gazelle or coeff)"
                )))
            }
        })
    }
}

impl From<MatVecMethod> for KernelChoice {
    fn from(m: MatVecMethod) -> Self {
        match m {
            MatVecMethod::Gala => KernelChoice::Fixed(Kernel::Gala),
            _ => KernelChoice::Fixed(Kernel::Gazelle),
        }
    }
}

impl From<Kernel> for KernelChoice {
    fn from(k: Kernel) -> Self {
        KernelChoice::Fixed(k)
    }
}

/// Seconds per operation of one party's HE work, and the bandwidth the bytes travel at.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct UnitCosts {
    /// A key-switched rotation (server).
    pub rotation_s: f64,
    /// A ciphertext–plaintext product (server; slot and coefficient encodings alike).
    pub sc_mult_s: f64,
    /// Masking, flooding and switching one slot output, and its decryption (both parties).
    pub slot_response_s: f64,
    /// The same for one sparse coefficient response.
    pub coeff_response_s: f64,
    /// Encrypting one upload (client) and expanding it (server).
    pub upload_s: f64,
    /// Generating one Galois key (client, once per session).
    pub galois_key_s: f64,
    /// Bytes per second on the wire.
    pub bandwidth: f64,
}

impl UnitCosts {
    /// Measured on `n8192-t23` with `secinfer bench net --unit-costs` (2 cores, load ≈ 10,
    /// 2026-11-28); bandwidth is the `lan` profile's 3 Gbit/s.
    pub const MEASURED: UnitCosts = UnitCosts {
        rotation_s: 1.6e-3,
        sc_mult_s: 4.2e-5,
        slot_response_s: 1.6e-3,
        coeff_response_s: 5.1e-4,
        upload_s: 3.5e-4,
        galois_key_s: 9.5e-3,
        bandwidth: 3.0e9 / 8.0,
    };
}

/// One candidate kernel's cost on one layer.
#[derive(Clone, Debug, PartialEq)]
pub struct Estimate {
    pub kernel: Kernel,
    pub bytes_up: u64,
    pub bytes_down: u64,
    /// Galois keys the layer's rotations need (all of them, shared or not).
    pub galois_keys: u64,
    /// Of those, the keys no earlier layer asked for: bytes this layer adds to the setup.
    pub new_key_bytes: u64,
    pub rotations: u64,
    pub sc_mults: u64,
    /// Estimated seconds: HE work at [`UnitCosts`], bytes at its bandwidth, new keys included.
    pub time_s: f64,
}

/// The kernel of one linear layer and why.
#[derive(Clone, Debug, PartialEq)]
pub struct Choice {
    pub kernel: Kernel,
    /// Every candidate that fits the layer, cheapest first when the model chose.
    pub estimates: Vec<Estimate>,
    pub why: String,
}

/// The public layout of one candidate on a layer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Planned {
    Dense(MatVecPlan),
    Conv(ConvPlan),
    Coeff(CoeffPlan),
}

/// The coefficient product of a layer: W (rows × cols) on `count` vectors.
pub fn coeff_dims(shape: &LinearShape) -> (usize, usize, usize) {
    match shape {
        LinearShape::Dense { rows, cols } => (*rows, *cols, 1),
        LinearShape::Conv(g) => (g.m, g.c * g.kh * g.kw, g.oh * g.ow),
    }
}

/// The slot convolution plan of `g` for `kernel` on `row_len × rows` slots.
pub fn conv_plan(
    g: &ConvGeom,
    kernel: Kernel,
    row_len: usize,
    rows: usize,
    groups: usize,
) -> std::result::Result<ConvPlan, secinfer_he::HeError> {
    let (hp, wp) = g.he_image();
    let method = match kernel {
        Kernel::Gala => secinfer_he::ConvMethod::Gala,
        _ => secinfer_he::ConvMethod::Gazelle,
    };
    Ok(ConvPlan::new(method, hp, wp, g.c, g.m, g.k, row_len, rows)?.with_max_groups(groups))
}

/// `kernel`'s layout for `shape` on `params`.
pub fn plan(shape: &LinearShape, kernel: Kernel, params: &Params) -> Result<Planned> {
    Ok(match (kernel, shape) {
        (Kernel::Coeff, s) => {
            let (rows, cols, count) = coeff_dims(s);
            Planned::Coeff(CoeffPlan::new(rows, cols, count, params)?)
        }
        (k, LinearShape::Dense { rows, cols }) => {
            Planned::Dense(MatVecPlan::for_params(k.method(), *rows, *cols, params)?)
        }
        (k, LinearShape::Conv(g)) => {
            Planned::Conv(conv_plan(g, k, params.row_len(), 2, MAX_CONV_GROUPS)?)
        }
    })
}

/// Wire bytes of one slot response on `params` (the format of `finish_outputs`).
fn slot_response_bytes(params: &Params) -> u64 {
    5 + (2 * params.n() as u64 * coeff_prime::response_bits(params) as u64).div_ceil(8)
}

/// Wire bytes of one Galois key on `params`.
pub fn galois_key_bytes(params: &Params) -> u64 {
    let digit = 32 + params.residue_bytes() * params.n() * (params.num_q() + 1);
    (8 + params.ks_digits() * digit) as u64
}

/// `kernel`'s estimate on `shape`, given the rotation steps earlier layers already have keys
/// for; also the steps it needs.
pub fn estimate(
    shape: &LinearShape,
    kernel: Kernel,
    params: &Params,
    have: &BTreeSet<usize>,
    u: &UnitCosts,
) -> Result<(Estimate, Vec<usize>)> {
    let up_ct = coeff_prime::upload_bytes(params) as u64;
    let planned = plan(shape, kernel, params)?;
    let (steps, rotations, sc_mults, bytes_up, bytes_down, responses, resp_s) = match &planned {
        Planned::Coeff(p) => {
            let (up, down) = p.wire_bytes(params);
            let n = p.out_cts();
            let sc = p.sc_mults() as u64;
            (
                Vec::new(),
                0,
                sc,
                up as u64,
                down as u64,
                n,
                u.coeff_response_s,
            )
        }
        Planned::Dense(_) | Planned::Conv(_) => {
            let ev = CountingEvaluator::new(params.row_len(), 2);
            let (steps, ins, outs) = match &planned {
                Planned::Conv(p) => {
                    let w = vec![0u64; p.m * p.c * p.k * p.k];
                    let pts = p.prepare(&ev, &w)?;
                    p.eval(&ev, &pts, &vec![(); p.in_cts])?;
                    (p.rotation_steps(), p.in_cts, p.out_cts)
                }
                _ => {
                    let Planned::Dense(p) = &planned else {
                        return Err(NnError::Protocol("a plan of the wrong kind".into()));
                    };
                    let w = vec![vec![0u64; p.cols]; p.rows];
                    let pts = p.prepare(&ev, &w)?;
                    p.eval(&ev, &pts, &vec![(); p.col_chunks])?;
                    (p.rotation_steps(), p.col_chunks, p.out_cts)
                }
            };
            let c = ev.counter().snapshot();
            let resp = slot_response_bytes(params);
            (
                steps,
                c.perm + c.hst_perm,
                c.sc_mult,
                ins as u64 * up_ct,
                outs as u64 * resp,
                outs,
                u.slot_response_s,
            )
        }
    };
    let galois_keys = steps.len() as u64;
    let new_keys = steps.iter().filter(|s| !have.contains(s)).count() as u64;
    let new_key_bytes = new_keys * galois_key_bytes(params);
    let uploads = bytes_up / up_ct;
    let time_s = rotations as f64 * u.rotation_s
        + sc_mults as f64 * u.sc_mult_s
        + responses as f64 * resp_s
        + uploads as f64 * u.upload_s
        + new_keys as f64 * u.galois_key_s
        + (bytes_up + bytes_down + new_key_bytes) as f64 / u.bandwidth;
    Ok((
        Estimate {
            kernel,
            bytes_up,
            bytes_down,
            galois_keys,
            new_key_bytes,
            rotations,
            sc_mults,
            time_s,
        },
        steps,
    ))
}

fn mb(b: u64) -> f64 {
    b as f64 / 1e6
}

/// The kernel of every linear layer (`None` for the other ops), in network order.
/// `shapes` names each layer ("layer i (name)") for the errors.
pub fn choose(
    shapes: &[Option<(String, &LinearShape)>],
    choice: KernelChoice,
    params: &Params,
    u: &UnitCosts,
) -> Result<Vec<Option<Choice>>> {
    let mut have = BTreeSet::new();
    shapes
        .iter()
        .map(|s| {
            let Some((label, shape)) = s else {
                return Ok(None);
            };
            let mut cands = Vec::new();
            let mut refusals = Vec::new();
            for k in Kernel::ALL {
                match estimate(shape, k, params, &have, u) {
                    Ok(e) => cands.push(e),
                    Err(e) => refusals.push(format!("{} does not fit ({e})", k.name())),
                }
            }
            let (kernel, why) = match choice {
                KernelChoice::Fixed(k) => (k, "asked for".to_string()),
                KernelChoice::Auto => {
                    cands.sort_by(|a, b| a.0.time_s.total_cmp(&b.0.time_s));
                    let best = cands.first().ok_or_else(|| {
                        NnError::Unsupported(format!(
                            "{label}: no HE kernel fits: {}",
                            refusals.join("; ")
                        ))
                    })?;
                    let mut why = format!(
                        "est. {:.1} ms, {:.2} MB",
                        best.0.time_s * 1e3,
                        mb(best.0.bytes_up + best.0.bytes_down + best.0.new_key_bytes)
                    );
                    if best.0.galois_keys > 0 {
                        why += &format!(", {} rotations", best.0.rotations);
                    } else {
                        why += ", no rotations or keys";
                    }
                    if let Some(next) = cands.get(1) {
                        why += &format!(
                            " against {} {:.1} ms, {:.2} MB",
                            next.0.kernel.name(),
                            next.0.time_s * 1e3,
                            mb(next.0.bytes_up + next.0.bytes_down + next.0.new_key_bytes)
                        );
                    }
                    for r in &refusals {
                        why += &format!("; {r}");
                    }
                    (best.0.kernel, why)
                }
            };
            let (_, steps) = cands
                .iter()
                .find(|(e, _)| e.kernel == kernel)
                .ok_or_else(|| {
                    NnError::Unsupported(format!(
                        "{label}: kernel {} does not fit: {}",
                        kernel.name(),
                        refusals.join("; ")
                    ))
                })?;
            have.extend(steps.iter().copied());
            Ok(Some(Choice {
                kernel,
                estimates: cands.into_iter().map(|(e, _)| e).collect(),
                why,
            }))
        })
        .collect()
}
