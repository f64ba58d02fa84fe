//! GALA image networks in family `hegc`: linear layers by HE on Z_p shares, truncation, ReLU and
//! argmax by garbled circuits (GAZELLE's pipeline with GALA's kernels, DESIGN.md §4).
//!
//! Each linear layer runs one HE flight: the client encrypts its share x_c of the layer input,
//! the server multiplies by W with GALA's row-encoding-share-RaS matvec (GAZELLE's hybrid
//! method on request), masks, floods to ≥ 40 statistical bits and switches modulus; it adds
//! W·x_s of its own share and b·2^F in the clear. Both parties then hold shares of the
//! accumulator Σ W·x + b·2^F mod p, and one garbled batch truncates it (`≫ F`, wrap into the
//! main format, ReLU) into fresh shares for the next layer ([`secinfer_gc::requant`]). The last
//! linear layer's shares go into a garbled argmax: the client learns the class, and the logits
//! only when the server allows it.
//!
//! Bit-exactness with the reference (`wrap((Σ W·x) ≫ F + b)`) holds because every accumulator
//! stays within (−p/2, p/2): [`NetShape::check_range`] refuses, naming the layer, a model
//! whose weights could exceed it for some input in the main format.
mod session;

pub use session::{client_session, server_session};

use crate::error::{NnError, Result};
use crate::model::{Format, LayerKind, ModelConfig};
use crate::reference::QuantizedGraph;
use secinfer_gc::requant::Truncation;
use secinfer_he::{MatVecMethod, MatVecPlan, Params, Plaintext, SecretKey};
use sha2::{Digest, Sha256};

/// Protocol identifier exchanged in the handshake.
pub const PROTOCOL: &str = "secinfer-hegc/1";
/// The BFV parameter set: t ≈ 2^25 holds the accumulators, Q leaves room for 40-bit flooding.
pub const HE_PARAMS: &str = "n8192-t25";
/// Statistical security of every HE response (DESIGN.md §2).
pub const FLOOD_BITS: u32 = 40;

/// What follows a linear layer inside the same step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Post {
    /// Truncation only (the next layer is linear).
    Identity,
    /// Truncation then ReLU.
    Relu,
    /// Truncation then argmax: the network's end.
    Argmax,
}

/// One linear layer and what follows it (public: the shapes only).
#[derive(Clone, Debug, PartialEq)]
pub struct StageShape {
    /// Index of the linear layer in the graph.
    pub layer: usize,
    pub name: String,
    pub rows: usize,
    pub cols: usize,
    pub post: Post,
}

/// The public shape of a network the `hegc` family runs.
#[derive(Clone, Debug, PartialEq)]
pub struct NetShape {
    pub stages: Vec<StageShape>,
    pub main: Format,
    pub kernel: MatVecMethod,
}

fn unsupported(i: usize, name: &str, kind: &LayerKind, why: &str) -> NnError {
    NnError::Unsupported(format!("layer {i} ({name}, {}): {why}", kind.type_name()))
}

impl NetShape {
    /// Reads the stages of `config`'s graph: Input, then Flatten / Dense [+ ReLU] ..., ending
    /// in Dense + Argmax. Anything else is refused with an error naming the layer.
    pub fn new(config: &ModelConfig, kernel: MatVecMethod) -> Result<NetShape> {
        let layers = &config.graph.layers;
        let mut stages = Vec::new();
        let mut i = 1;
        while i < layers.len() {
            let l = &layers[i];
            match &l.kind {
                LayerKind::Flatten => i += 1,
                LayerKind::Dense { input, output } => {
                    let next = layers.get(i + 1).map(|n| &n.kind);
                    let post = match next {
                        Some(LayerKind::Relu) => Post::Relu,
                        Some(LayerKind::Argmax) => Post::Argmax,
                        _ => Post::Identity,
                    };
                    stages.push(StageShape {
                        layer: i,
                        name: l.name.clone(),
                        rows: *output,
                        cols: *input,
                        post,
                    });
                    i += if post == Post::Identity { 1 } else { 2 };
                    if post == Post::Argmax && i < layers.len() {
                        let n = &layers[i];
                        return Err(unsupported(i, &n.name, &n.kind, "a layer after the argmax"));
                    }
                }
                k => {
                    return Err(unsupported(
                        i,
                        &l.name,
                        k,
                        "no hegc protocol for this layer kind in this position",
                    ))
                }
            }
        }
        if stages.last().map(|s| s.post) != Some(Post::Argmax) {
            let (j, l) = (layers.len() - 1, &layers[layers.len() - 1]);
            return Err(unsupported(
                j,
                &l.name,
                &l.kind,
                "the hegc network must end in dense + argmax",
            ));
        }
        Ok(NetShape {
            stages,
            main: config.fixed_point.main,
            kernel,
        })
    }

    /// The truncation after stage `s`.
    pub fn truncation(&self, s: &StageShape) -> Truncation {
        Truncation {
            shift: self.main.frac,
            bits: self.main.bits,
            relu: s.post == Post::Relu,
        }
    }

    /// Each stage's matvec plan.
    pub fn plans(&self, params: &Params) -> Result<Vec<MatVecPlan>> {
        self.stages
            .iter()
            .map(|s| Ok(MatVecPlan::for_params(self.kernel, s.rows, s.cols, params)?))
            .collect()
    }

    /// A hash of everything both parties must agree on.
    pub fn hash(&self) -> String {
        let mut s = format!("{PROTOCOL}|{HE_PARAMS}|{:?}|{:?}", self.main, self.kernel);
        for st in &self.stages {
            s.push_str(&format!("|{}x{}:{:?}", st.rows, st.cols, st.post));
        }
        let d = Sha256::digest(s.as_bytes());
        d.iter().take(16).map(|b| format!("{b:02x}")).collect()
    }

    /// Refuses weights whose accumulator could leave (−p/2, p/2) for an input anywhere in the
    /// main format: the worst case of row i is Σ_j |W_ij|·2^(bits−1) + |b_i|·2^F.
    pub fn check_range(&self, q: &QuantizedGraph, p: u64) -> Result<()> {
        let half = ((p - 1) / 2) as i128;
        for s in &self.stages {
            let (w, b) = q
                .affine(s.layer)
                .ok_or_else(|| NnError::Protocol(format!("layer {} has no weights", s.layer)))?;
            let x_max = 1i128 << (self.main.bits - 1);
            for (i, row) in w.chunks_exact(s.cols).enumerate() {
                let acc: i128 = row.iter().map(|v| (*v as i128).abs()).sum::<i128>() * x_max
                    + (b[i] as i128).abs() * (1i128 << self.main.frac);
                if acc > half {
                    return Err(NnError::Unsupported(format!(
                        "layer {} ({}): row {i}'s accumulator can reach 2^{:.1}, beyond the HE \
                         plaintext's ±2^{:.1}: use a main format with fewer bits \
                         (docs/model-format.md)",
                        s.layer,
                        s.name,
                        (acc as f64).log2(),
                        (half as f64).log2()
                    )));
                }
            }
        }
        Ok(())
    }
}

/// One prepared linear layer of the server. Secret: no `Debug`.
struct ServerLinear {
    plan: MatVecPlan,
    pts: Vec<Plaintext>,
    /// W mod p (rows × cols), for W·x_s on the server's own share.
    w: Vec<Vec<u64>>,
    /// b·2^F mod p.
    bias: Vec<u64>,
}

/// A network prepared for serving `hegc` sessions. Secret: no `Debug`.
pub struct HegcServerModel {
    pub shape: NetShape,
    pub params: Params,
    layers: Vec<ServerLinear>,
}

impl HegcServerModel {
    /// Checks the graph and the accumulator range, encodes every weight matrix.
    pub fn new(q: &QuantizedGraph, config: &ModelConfig, kernel: MatVecMethod) -> Result<Self> {
        let shape = NetShape::new(config, kernel)?;
        let params = Params::by_name(HE_PARAMS)?;
        let p = params.t();
        shape.check_range(q, p)?;
        // The plaintexts do not depend on the keys: a throwaway evaluator encodes them.
        let no_keys = SecretKey::generate(&params).rotation_keys(&[], false);
        let ev = secinfer_he::HeEvaluator::new(&params, &no_keys);
        let embed = |v: i64| v.rem_euclid(p as i64) as u64;
        let mut layers = Vec::new();
        for (s, plan) in shape.stages.iter().zip(shape.plans(&params)?) {
            let (w, b) = q
                .affine(s.layer)
                .ok_or_else(|| NnError::Protocol(format!("layer {} has no weights", s.layer)))?;
            let w: Vec<Vec<u64>> = w
                .chunks_exact(s.cols)
                .map(|r| r.iter().map(|v| embed(*v)).collect())
                .collect();
            let pts = plan.prepare(&ev, &w)?;
            let bias = b.iter().map(|v| embed(*v << shape.main.frac)).collect();
            layers.push(ServerLinear { plan, pts, w, bias });
        }
        Ok(HegcServerModel {
            shape,
            params,
            layers,
        })
    }
}

/// The client's side of a network: its shape and parameters (public).
pub struct HegcClientModel {
    pub shape: NetShape,
    pub params: Params,
    plans: Vec<MatVecPlan>,
}

impl HegcClientModel {
    pub fn new(config: &ModelConfig, kernel: MatVecMethod) -> Result<Self> {
        let shape = NetShape::new(config, kernel)?;
        let params = Params::by_name(HE_PARAMS)?;
        let plans = shape.plans(&params)?;
        Ok(HegcClientModel {
            shape,
            params,
            plans,
        })
    }

    /// Rotation steps of every layer's kernel (the Galois keys the client uploads).
    fn rotation_steps(&self) -> Vec<usize> {
        let mut v: Vec<usize> = self.plans.iter().flat_map(|p| p.rotation_steps()).collect();
        v.sort_unstable();
        v.dedup();
        v
    }
}

/// Cost of one step of the network, as one party measured it.
#[derive(Clone, Debug, Default)]
pub struct LayerCost {
    pub name: String,
    /// `gala`, `gazelle` or `gc`.
    pub kernel: String,
    pub he_bytes: u64,
    pub gc_bytes: u64,
    pub time_s: f64,
    pub rounds: u64,
}

#[cfg(test)]
mod tests;

/// A random MLP `dims[0] → dims[1] → … → dims[k]` with ReLU between layers and an argmax at the
/// end, in the main format `(bits, frac)` (tests and `secinfer bench net`): weights uniform in
/// ±1/√fan-in, biases in ±0.25, from a public seed.
pub fn random_mlp(dims: &[usize], bits: u32, frac: u32, seed: u64) -> Result<crate::model::Model> {
    if dims.len() < 2 {
        return Err(NnError::Input("an MLP needs at least two sizes".into()));
    }
    let mut layers = vec![serde_json::json!({
        "type": "input", "name": "input", "dtype": "fixed", "shape": [dims[0]]
    })];
    for k in 1..dims.len() {
        layers.push(serde_json::json!({
            "type": "dense", "name": format!("fc{k}"), "input": dims[k - 1], "output": dims[k]
        }));
        if k + 1 < dims.len() {
            layers.push(serde_json::json!({"type": "relu", "name": format!("relu{k}")}));
        }
    }
    layers.push(serde_json::json!({"type": "argmax", "name": "class"}));
    let classes = dims[dims.len() - 1];
    let json = serde_json::json!({
        "format": "secinfer-model", "version": 2, "task": "classification",
        "layers": layers,
        "fixed_point": {"bits": bits, "frac_bits": frac},
        "labels": (0..classes).map(|i| i.to_string()).collect::<Vec<_>>(),
    });
    let config = ModelConfig::parse(&json.to_string())?;
    let mut prg = secinfer_ot::Prg::from_seed(secinfer_ot::Block(
        0x6865_6763_0000_0000_0000_0000_0000_0000 | seed as u128,
    ));
    let mut uni = |n: usize, bound: f64| -> Vec<f32> {
        (0..n)
            .map(|_| {
                let u = (prg.next_block().low_u64() >> 11) as f64 / (1u64 << 53) as f64;
                ((u * 2.0 - 1.0) * bound) as f32
            })
            .collect()
    };
    let mut map = std::collections::HashMap::new();
    for k in 1..dims.len() {
        let (i, o) = (dims[k - 1], dims[k]);
        let t = |shape: Vec<usize>, data| crate::model::weights::Tensor { shape, data };
        map.insert(
            format!("fc{k}.weight"),
            t(vec![o, i], uni(o * i, 1.0 / (i as f64).sqrt())),
        );
        map.insert(format!("fc{k}.bias"), t(vec![o], uni(o, 0.25)));
    }
    let tensors = crate::model::Tensors::from_map(map, &config.graph)?;
    Ok(crate::model::Model {
        config,
        tensors,
        vocab: None,
    })
}

/// GALA's operation counts (Perm, HstPerm, DecPerm, ScMult, Add) of the network's linear layers
/// with `method`, on the counting backend with `slots` slots in one cyclic row (GALA's Table IX
/// model is 2048).
pub fn op_counts(
    shape: &NetShape,
    method: MatVecMethod,
    slots: usize,
) -> Result<secinfer_he::OpCounts> {
    let ev = secinfer_he::CountingEvaluator::new(slots, 1);
    for s in &shape.stages {
        let plan = MatVecPlan::new(method, s.rows, s.cols, slots, 1)?;
        let w = vec![vec![0u64; s.cols]; s.rows];
        let pts = plan.prepare(&ev, &w)?;
        plan.eval(&ev, &pts, &vec![(); plan.col_chunks])?;
    }
    use secinfer_he::Evaluator;
    Ok(ev.counter().snapshot())
}
