//! The two parties' prepared networks: the server's encoded weights, the client's plans.
use super::{KernelChoice, Nonlinear};
use super::{LinearPlan, LinearShape, NetShape, OpKind, FLOOD_BITS, HE_PARAMS};
use crate::error::{NnError, Result};
use crate::model::ModelConfig;
use crate::reference::QuantizedGraph;
use secinfer_he::kernels::Flood;
use secinfer_he::{HeEvaluator, Params, Plaintext, SecretKey};

/// Bytes of encoded weight plaintexts a server model keeps between sessions; layers beyond it
/// are encoded per image and dropped after use. A ResNet-18 on 32×32 images needs ≈ 46 GB of
/// plaintexts in GALA's layout (351,007 ScMults at n = 8192), far beyond any one machine's
/// memory; the MNIST networks need 0.2–0.4 GB and keep all of theirs.
pub const PLAINTEXT_BUDGET: usize = 2 << 30;

/// A linear layer's encoded weights: kept, or encoded when an image needs them.
pub(super) enum Encoded {
    Kept(Vec<Plaintext>),
    PerImage,
}

/// One prepared linear layer of the server. Secret: no `Debug`.
pub(super) struct ServerLinear {
    pub plan: LinearPlan,
    pub pts: Encoded,
    /// W mod p in the layer's own layout (rows × cols, or M×C×kh×kw), for W·x_s.
    pub w: Vec<u64>,
    /// b·2^F mod p.
    pub bias: Vec<u64>,
}

impl ServerLinear {
    /// The layer's weights as the plan's plaintexts.
    pub fn encode(
        plan: &LinearPlan,
        shape: &LinearShape,
        w: &[u64],
        ev: &HeEvaluator<'_>,
        params: &Params,
    ) -> Result<Vec<Plaintext>> {
        Ok(match (plan, shape) {
            // W in the layer's own row-major layout is the product's matrix (a convolution's
            // M × C·kh·kw, the im2col vectors' order).
            (LinearPlan::Coeff(pl), _) => pl.prepare(params, w)?,
            (LinearPlan::Dense(pl), LinearShape::Dense { cols, .. }) => {
                let rows: Vec<Vec<u64>> = w.chunks_exact(*cols).map(|r| r.to_vec()).collect();
                pl.prepare(ev, &rows)?
            }
            (LinearPlan::Conv(pl), LinearShape::Conv(g)) => pl.prepare(ev, &g.square_weights(w))?,
            _ => return Err(NnError::Protocol("a plan of the wrong kind".into())),
        })
    }

    /// The kept plaintexts, or this image's encoding of them.
    pub fn plaintexts<'a>(
        &'a self,
        shape: &LinearShape,
        ev: &HeEvaluator<'_>,
        params: &Params,
    ) -> Result<std::borrow::Cow<'a, [Plaintext]>> {
        Ok(match &self.pts {
            Encoded::Kept(p) => std::borrow::Cow::Borrowed(p.as_slice()),
            Encoded::PerImage => {
                std::borrow::Cow::Owned(Self::encode(&self.plan, shape, &self.w, ev, params)?)
            }
        })
    }

    /// W·x + b·2^F mod p on the server's share `x` (`None`: a zero share).
    pub fn plain(&self, shape: &LinearShape, x: Option<&[u64]>, p: u64) -> Vec<u64> {
        let mut y = match (shape, x) {
            (LinearShape::Dense { rows, .. }, None) => vec![0u64; *rows],
            (LinearShape::Conv(g), None) => vec![0u64; g.out_len()],
            (LinearShape::Dense { cols, .. }, Some(x)) => self
                .w
                .chunks_exact(*cols)
                .map(|row| {
                    let acc = row
                        .iter()
                        .zip(x)
                        .fold(0u128, |a, (w, x)| a + *w as u128 * *x as u128);
                    (acc % p as u128) as u64
                })
                .collect(),
            (LinearShape::Conv(g), Some(x)) => g.plain(&self.w, x, p),
        };
        let per = y.len() / self.bias.len().max(1);
        for (i, v) in y.iter_mut().enumerate() {
            *v = (*v + self.bias[i / per.max(1)]) % p;
        }
        y
    }
}

/// A network prepared for serving `hegc` sessions. Secret: no `Debug`.
pub struct HegcServerModel {
    pub shape: NetShape,
    pub params: Params,
    /// Flooding of every HE response: [`FLOOD_BITS`] statistical bits, refused where the
    /// parameters have no room (the default); tests of layouts that cannot reach it yet set
    /// `Flood::BestEffort` explicitly.
    pub flood: Flood,
    /// By op index: the linear ops' weights.
    pub(super) layers: Vec<Option<ServerLinear>>,
}

impl HegcServerModel {
    /// Checks the graph and the accumulator range, encodes every weight tensor.
    pub fn new(
        q: &QuantizedGraph,
        config: &ModelConfig,
        kernel: impl Into<KernelChoice>,
    ) -> Result<Self> {
        let shape = NetShape::new(config, kernel)?;
        let params = Params::by_name(HE_PARAMS)?;
        let p = params.t();
        shape.check_range(q, p)?;
        // The plaintexts do not depend on the keys: a throwaway evaluator encodes them.
        let no_keys = SecretKey::generate(&params).rotation_keys(&[], false);
        let ev = HeEvaluator::new(&params, &no_keys);
        let embed = |v: &i64| v.rem_euclid(p as i64) as u64;
        let mut layers = Vec::with_capacity(shape.ops.len());
        let pt_bytes = params.n() * params.set().q.len() * 8;
        let mut kept = 0usize;
        for (o, plan) in shape.ops.iter().zip(shape.plans(&params)?) {
            let (OpKind::Linear(lin), Some(plan)) = (&o.kind, plan) else {
                layers.push(None);
                continue;
            };
            let (w, b) = q
                .affine(o.layer)
                .ok_or_else(|| NnError::Protocol(format!("layer {} has no weights", o.layer)))?;
            let w: Vec<u64> = w.iter().map(embed).collect();
            let need = plan.plaintext_count() * pt_bytes;
            let pts = if kept + need <= PLAINTEXT_BUDGET {
                kept += need;
                Encoded::Kept(ServerLinear::encode(&plan, lin, &w, &ev, &params)?)
            } else {
                Encoded::PerImage
            };
            let bias = b.iter().map(|v| embed(&(*v << shape.main.scale))).collect();
            layers.push(Some(ServerLinear { plan, pts, w, bias }));
        }
        Ok(HegcServerModel {
            shape,
            params,
            flood: Flood::Statistical(FLOOD_BITS),
            layers,
        })
    }
}

impl HegcServerModel {
    /// The same network with its finishing steps run by `n`.
    pub fn with_nonlinear(mut self, n: Nonlinear) -> Self {
        self.shape.nonlinear = n;
        self
    }
}

/// The client's side of a network: its shape and parameters (public).
pub struct HegcClientModel {
    pub shape: NetShape,
    pub params: Params,
    pub(super) plans: Vec<Option<LinearPlan>>,
}

impl HegcClientModel {
    pub fn new(config: &ModelConfig, kernel: impl Into<KernelChoice>) -> Result<Self> {
        let shape = NetShape::new(config, kernel)?;
        let params = Params::by_name(HE_PARAMS)?;
        let plans = shape.plans(&params)?;
        Ok(HegcClientModel {
            shape,
            params,
            plans,
        })
    }

    /// The same network with its finishing steps run by `n`.
    pub fn with_nonlinear(mut self, n: Nonlinear) -> Self {
        self.shape.nonlinear = n;
        self
    }

    /// Rotation steps of every layer's kernel (the Galois keys the client uploads).
    pub(super) fn rotation_steps(&self) -> Vec<usize> {
        let mut v: Vec<usize> = self
            .plans
            .iter()
            .flatten()
            .flat_map(|p| p.rotation_steps())
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    }
}
