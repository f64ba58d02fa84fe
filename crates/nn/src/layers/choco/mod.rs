//! Family `choco`: CHOCO's client-aided HE (van der Hagen & Lucia, ASPLOS '22) on a model
//! graph. The server evaluates only the linear layers with secret weights (Dense, Conv2d) on
//! BFV ciphertexts, with CHOCO's rotational-redundancy packing (`secinfer_he::choco`: the
//! windowed Dense kernel, and the windowed Conv2d kernel with one rotation per kernel offset); the
//! client decrypts each result, requantises it and computes everything else in the clear
//! (ReLU, max-pool, average pool — a public weight —, flatten, residual add, argmax) exactly as
//! the fixed-point reference does, then re-encrypts the next linear layer's input, which also
//! refreshes the noise.
//!
//! **Leak.** The client sees every intermediate activation: each linear layer's exact
//! accumulator `Σ W·x + b·2^F` (before the shift) and every later layer's output. The server
//! sees only ciphertexts. What it returns is flooded to ≥ 2^-40 statistical distance and
//! re-randomised, so the client learns nothing of the weights beyond those activations
//! (docs/threat-model.md). This mode is never a default: it is chosen by `--family choco`.
//!
//! Exactness: accumulators come back modulo the product of k ≈ 20-bit plaintext primes, k
//! fixed by the public format, shape and input range so that no input can make them wrap
//! (`secinfer_he::choco::accumulator_bound`); results equal the reference bit for bit. A
//! narrow format (e.g. the 8-bit `models/mnist-mlp-q8`) fits one prime of at most 23 bits:
//! one ciphertext up and one down per window and layer.
pub mod apps;
mod client;
mod server;
mod service;
mod wire;

pub use client::{client_session, ChocoClient, ChocoOutcome, ClientCost, ClientRun};
/// The packing both sides name (re-exported so faces need not depend on `secinfer_he`).
pub use secinfer_he::choco::Packing;
pub use server::{server_session, ChocoServer, ServerCost, ServerRun};
pub use service::{on_threads, serve_linear, LinearClient, LinearServer, LinearSpec};
pub use wire::{KeyUpload, Results, Upload};

use crate::error::{NnError, Result};
use crate::model::{FixedPointConfig, LayerKind, ModelConfig, Shape};
use secinfer_he::choco::{
    accumulator_bound, accumulator_bound_for_inputs, ring_for, ConvPlan, DensePlan, Kernel,
    RnsParams,
};

/// What one stage of a choco session computes.
#[derive(Clone, Debug)]
pub(crate) enum Stage {
    /// A Dense or Conv2d layer at the server.
    Linear { layer: usize, plan: Kernel },
    /// A layer the client computes in the clear.
    Client { layer: usize },
}

/// The public schedule both parties derive from the graph.
#[derive(Clone, Debug)]
pub(crate) struct Schedule {
    pub stages: Vec<Stage>,
    pub rns: RnsParams,
    pub packing: Packing,
    pub fp: FixedPointConfig,
    /// (ring degree, Q primes): [`ring_for`]'s unless a measurement asks for another.
    pub ring: (usize, usize),
}

impl Schedule {
    pub fn new(config: &ModelConfig, packing: Packing, ring: (usize, usize)) -> Result<Schedule> {
        supports(config)?;
        let fp = config.fixed_point;
        let mut stages = Vec::new();
        let mut bound = 0u128;
        let row_len = ring.0 / 2;
        for i in 1..config.graph.layers.len() {
            stages.push(match linear_kernel(config, i, packing, row_len)? {
                Some(plan) => {
                    // The bound is per output: a convolution's fan-in is c·kh·kw, not its
                    // image size.
                    let (bits, frac) = (fp.main.bits, fp.main.scale);
                    let b = match input_bound(config, i) {
                        Some(x_max) => {
                            accumulator_bound_for_inputs(plan.fan_in(), bits, frac, x_max)
                        }
                        None => accumulator_bound(plan.fan_in(), bits, frac),
                    };
                    bound = bound.max(b);
                    Stage::Linear { layer: i, plan }
                }
                None => Stage::Client { layer: i },
            });
        }
        let rns = RnsParams::for_ring(bound, ring)?;
        Ok(Schedule {
            stages,
            rns,
            packing,
            fp,
            ring,
        })
    }

    /// The kernel plan of every server-side linear layer, in order.
    pub fn plans(&self) -> impl Iterator<Item = &Kernel> {
        self.stages.iter().filter_map(|s| match s {
            Stage::Linear { plan, .. } => Some(plan),
            Stage::Client { .. } => None,
        })
    }

    /// Every rotation step any linear stage uses (the Galois keys the client uploads).
    pub fn rotation_steps(&self) -> Vec<usize> {
        let mut v: Vec<usize> = self.plans().flat_map(Kernel::rotation_steps).collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    /// The names of the layers whose outputs the client sees (every layer after the input).
    pub fn revealed(&self, config: &ModelConfig) -> Vec<String> {
        config.graph.layers[1..]
            .iter()
            .map(|l| l.name.clone())
            .collect()
    }
}

/// The largest |x| layer `i` can read when that is known publicly and below the format's
/// 2^(bits−1): its input is the model's input (through flattens only) and the model states a
/// range, which the client applies before encrypting. Narrow formats then fit one plaintext
/// prime (`secinfer_he::choco::MAX_SINGLE_T_BITS`).
fn input_bound(config: &ModelConfig, i: usize) -> Option<u128> {
    let layers = &config.graph.layers;
    let mut j = i - 1;
    while j > 0 && matches!(layers[j].kind, LayerKind::Flatten) {
        j -= 1;
    }
    if j != 0 {
        return None;
    }
    let (lo, hi) = config.graph.input_range()?.fixed(config.fixed_point.main);
    Some(lo.unsigned_abs().max(hi.unsigned_abs()) as u128)
}

/// The kernel of layer `i` when the server computes it, `None` when the client does; an
/// error naming the layer when family choco cannot run it.
fn linear_kernel(
    config: &ModelConfig,
    i: usize,
    packing: Packing,
    row_len: usize,
) -> Result<Option<Kernel>> {
    let l = &config.graph.layers[i];
    let named = |e: secinfer_he::HeError| {
        NnError::Unsupported(format!("layer {i} ({}): family choco: {e}", l.name))
    };
    Ok(match (&l.kind, l.input) {
        (LayerKind::Dense { input, output }, s) if s.elements() == *input => Some(Kernel::Dense(
            DensePlan::new(*output, *input, packing, row_len, 2).map_err(named)?,
        )),
        (
            LayerKind::Conv2d {
                in_channels,
                out_channels,
                kernel,
                stride,
                padding,
            },
            Shape::Image { c, h, w },
        ) if c == *in_channels => Some(Kernel::Conv(
            ConvPlan::new(
                [c, h, w],
                *out_channels,
                *kernel,
                *stride,
                *padding,
                packing,
                row_len,
                2,
            )
            .map_err(named)?,
        )),
        (
            LayerKind::Relu
            | LayerKind::MaxPool2d { .. }
            | LayerKind::AvgPool2d { .. }
            | LayerKind::Flatten
            | LayerKind::Add { .. }
            | LayerKind::Argmax,
            _,
        ) => None,
        (kind, _) => {
            return Err(NnError::Unsupported(format!(
                "layer {i} ({}, {}): family choco runs dense, conv2d, relu, maxpool2d, \
                 avgpool2d, flatten, add and argmax on single (unbatched) inputs",
                l.name,
                kind.type_name()
            )))
        }
    })
}

/// Whether family choco runs every layer after the input (the planner's check; cheap).
pub fn supports(config: &ModelConfig) -> Result<()> {
    let mut any = false;
    for i in 1..config.graph.layers.len() {
        any |= linear_kernel(
            config,
            i,
            Packing::Redundant,
            ring_for(Packing::Redundant).0 / 2,
        )?
        .is_some();
    }
    if !any {
        return Err(NnError::Unsupported(
            "family choco: the model has no dense or conv2d layer for the server".into(),
        ));
    }
    Ok(())
}

/// Hash of what both parties must agree on: the graph, the format, the packing, the primes.
pub(crate) fn session_id(config: &ModelConfig, s: &Schedule) -> [u8; 32] {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    h.update(b"secinfer-choco-v1");
    h.update(config.graph.to_json().to_string().as_bytes());
    h.update(s.fp.main.bits.to_le_bytes());
    h.update(s.fp.main.scale.to_le_bytes());
    h.update(s.packing.name().as_bytes());
    for t in s.rns.primes() {
        h.update(t.to_le_bytes());
    }
    if s.ring != ring_for(s.packing) {
        // A ring chosen for a measurement: both sides must have chosen it (the default
        // rings keep their hashes).
        h.update((s.ring.0 as u64).to_le_bytes());
        h.update((s.ring.1 as u64).to_le_bytes());
    }
    h.finalize().into()
}
