//! `secinfer bench fastgrnn`: OPAF's end-to-end model (Table XI: FastGRNN on Google-30's shape,
//! 99 steps × 32 features, hidden 100) on a random model, through
//! `secinfer_nn::layers::ss::run_fastgrnn`, with OPAF's or SIRNN's math. Model and input come
//! from a public seed so the two processes of `--net tcp` regenerate them. After metering, the
//! client's logits are compared with the plaintext reference (exact σ and tanh).
//!
//! `--cell gru` runs CryptoGRU's GRU classifier on the same family instead
//! (`secinfer_nn::layers::ss::gru`, main format (20, 12), ReLU or tanh candidate), for a side by
//! side with `bench gru` on `hegc`: `bench fastgrnn --cell gru --input 100 --hidden 64 --steps 30`.
use crate::bench::math::cot_source;
use crate::error::Error;
use crate::pair::{run_pair, NetArgs};
use crate::report::{BenchRecord, Reporter};
use clap::Args;
use secinfer_net::Cost;
use secinfer_nn::argmax;
use secinfer_nn::layers::ss::{
    random_input, random_params, run_fastgrnn, FastGrnnRun, FastGrnnShape, Impl, Products,
    SsOptions,
};
use secinfer_ss::{CotSource, Party};

#[derive(Args, Debug)]
pub struct FastGrnnArgs {
    /// Features per step.
    #[arg(long, default_value_t = 32)]
    pub input: usize,
    /// Hidden size.
    #[arg(long, default_value_t = 100)]
    pub hidden: usize,
    /// Time steps.
    #[arg(long, default_value_t = 99)]
    pub steps: usize,
    /// Classes of the dense head.
    #[arg(long, default_value_t = 30)]
    pub classes: usize,
    /// σ and tanh: opaf or sirnn.
    #[arg(long, default_value = "opaf")]
    pub math: String,
    /// The products with the server's matrices: he (coefficient-encoded HE on masks offline,
    /// one masked flight online) or ot (SIRNN's OT products online).
    #[arg(long, default_value = "he")]
    pub products: String,
    /// Scale of the 16-bit weights (the accumulator ring is 16 + 1 + scale bits).
    #[arg(long = "weight-scale", default_value_t = 8)]
    pub weight_scale: u32,
    /// What fills the COT pools offline: softspoken (with `--k`), iknp or ferret.
    #[arg(long = "cot-source", default_value = "softspoken")]
    pub cot_source: String,
    /// SoftSpokenOT bits per chunk for `--cot-source softspoken`.
    #[arg(long, default_value_t = crate::bench::SOFTSPOKEN_K)]
    pub k: u32,
    /// Seed of the random model and input.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// The recurrent cell: fastgrnn, or gru (CryptoGRU's classifier on family ss).
    #[arg(long, default_value = "fastgrnn")]
    pub cell: String,
    /// With --cell gru: the candidate activation, relu (CryptoGRU's CG-1) or tanh (Baseline).
    #[arg(long, default_value = "relu")]
    pub candidate: String,
    #[command(flatten)]
    pub net: NetArgs,
}

/// What the server reports of its own run (serialisable for the two-process mode).
#[derive(serde::Serialize, serde::Deserialize)]
struct ServerReport {
    setup_s: f64,
    offline_s: f64,
    online_s: f64,
    online_rounds: u64,
}

pub fn run(a: FastGrnnArgs, out: &mut Reporter) -> Result<(), Error> {
    let imp = Impl::parse(&a.math).ok_or_else(|| Error::msg("--math must be opaf or sirnn"))?;
    let source = cot_source(&a.cot_source, a.k)?;
    let products =
        Products::parse(&a.products).ok_or_else(|| Error::msg("--products must be ot or he"))?;
    match a.cell.as_str() {
        "fastgrnn" => {}
        "gru" => return run_gru_cell(&a, imp, source, out),
        _ => return Err(Error::msg("--cell must be fastgrnn or gru")),
    }
    let model = random_params(a.input, a.hidden, a.classes, a.weight_scale, a.seed)?;
    let shape = FastGrnnShape::of(&model, a.steps);
    let x = random_input(a.steps, a.input, a.seed);
    let opts = SsOptions {
        math: imp,
        source,
        products,
        logits: true,
    };
    let (m, xr, sh, op) = (&model, &x, &shape, &opts);
    let r = run_pair(
        &a.net,
        move |ch| Ok(run_fastgrnn(Party::Client, ch, sh, op, None, Some(xr))?),
        move |ch| {
            let r = run_fastgrnn(Party::Server, ch, sh, op, Some(m), None)?;
            Ok(ServerReport::of(&r))
        },
    )?;
    let (c, s) = (r.client, r.server);
    // The client's per-block view (its bytes are both directions of the link).
    let blocks: serde_json::Map<String, serde_json::Value> = c
        .block_stats
        .iter()
        .map(|(k, st)| {
            let v = serde_json::json!({
                "calls": st.calls,
                "ms": (st.time_s * 1e4).round() / 10.0,
                "mb": st.bytes as f64 / 1e6,
                "cots": st.cots,
            });
            (k.to_string(), v)
        })
        .collect();
    let logits = c
        .logits
        .ok_or_else(|| Error::msg("bench fastgrnn: the client learned no logits"))?;
    let (_, want) = model.run(&x)?;
    let gap = logits
        .iter()
        .zip(&want)
        .map(|(g, w)| (g - w).abs())
        .max()
        .unwrap_or(0);
    let (client_cost, server_cost) = party_costs(c.cost, [c.setup_s, c.offline_s, c.online_s], &s);
    let (setup_s, offline_s, online_s) = (
        c.setup_s.max(s.setup_s),
        c.offline_s.max(s.offline_s),
        c.online_s.max(s.online_s),
    );
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let total = client_cost.total().bytes();
    let mut rec = BenchRecord::from_costs(
        "fastgrnn",
        setup_s + offline_s + online_s,
        &client_cost,
        &server_cost,
    )
    .param("input", a.input)
    .param("hidden", a.hidden)
    .param("steps", a.steps)
    .param("classes", a.classes)
    .param("math", imp.name())
    .param("products", products.name())
    .param("weight_scale", a.weight_scale)
    .param("net", a.net.net_name())
    .param("profile", a.net.profile.name)
    .param("cot_source", source_name(source))
    .param("threads", threads);
    rec.rounds = client_cost.online.rounds.max(s.online_rounds);
    let acc_unit = f64::from(1u32 << shape.head.scale);
    out.emit(
        rec.field("online_s", online_s)
            .field("mb_total", total as f64 / 1e6)
            .field("online_mb", client_cost.online.bytes() as f64 / 1e6)
            .field("class", c.class.unwrap_or(0))
            .field("reference_class", argmax(&want))
            .field("max_logit_gap", gap as f64 / acc_unit)
            .field("block_costs", serde_json::Value::Object(blocks)),
    );
    Ok(())
}

impl ServerReport {
    fn of(r: &FastGrnnRun) -> ServerReport {
        ServerReport {
            setup_s: r.setup_s,
            offline_s: r.offline_s,
            online_s: r.online_s,
            online_rounds: r.cost.online.rounds,
        }
    }
}

/// Both parties' costs with each one's phase times (the client's meter, the server's report).
fn party_costs(client: Cost, times: [f64; 3], s: &ServerReport) -> (Cost, Cost) {
    let mut c = client;
    [c.setup.time_s, c.offline.time_s, c.online.time_s] = times;
    let mut sc = Cost::default();
    sc.setup.time_s = s.setup_s;
    sc.offline.time_s = s.offline_s;
    sc.online.time_s = s.online_s;
    sc.online.rounds = s.online_rounds;
    (c, sc)
}

fn source_name(source: CotSource) -> String {
    match source {
        CotSource::SoftSpoken { k } => format!("softspoken-k{k}"),
        CotSource::Ferret(_) => "ferret".to_string(),
        other => format!("{other:?}").to_lowercase(),
    }
}

/// `--cell gru`: the GRU classifier on family ss, a random model in (20, 12).
fn run_gru_cell(
    a: &FastGrnnArgs,
    imp: Impl,
    source: CotSource,
    out: &mut Reporter,
) -> Result<(), Error> {
    use secinfer_nn::layers::ss::gru::{random_gru, run_gru, GruShape};
    use secinfer_nn::model::format::const_format;
    use secinfer_nn::model::Candidate;
    let candidate = match a.candidate.as_str() {
        "relu" => Candidate::Relu,
        "tanh" => Candidate::Tanh,
        _ => return Err(Error::msg("--candidate must be relu or tanh")),
    };
    let shape = GruShape {
        input: a.input,
        hidden: a.hidden,
        steps: a.steps,
        classes: a.classes,
        main: const_format(20, 12),
        candidate,
    };
    let model = random_gru(shape, a.seed)?;
    // Embedded tokens stand-in: values in ±1 at scale 12 from the public seed.
    let mut s = a.seed.wrapping_mul(0x2545_f491_4f6c_dd1d) | 1;
    let x: Vec<i64> = (0..a.steps * a.input)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s % (1 << 13)) as i64 - (1 << 12)
        })
        .collect();
    let (_, want, _) = model.reference(&x);
    let (m, xr, sh) = (&model, &x, &shape);
    let r = run_pair(
        &a.net,
        move |ch| Ok(run_gru(Party::Client, ch, sh, imp, source, None, Some(xr))?),
        move |ch| {
            let r = run_gru(Party::Server, ch, sh, imp, source, Some(m), None)?;
            Ok(ServerReport::of(&r))
        },
    )?;
    let (c, s) = (r.client, r.server);
    let (client_cost, server_cost) = party_costs(c.cost, [c.setup_s, c.offline_s, c.online_s], &s);
    let total = c.setup_s.max(s.setup_s) + c.offline_s.max(s.offline_s);
    let online_s = c.online_s.max(s.online_s);
    let mut rec = BenchRecord::from_costs("gru-ss", total + online_s, &client_cost, &server_cost)
        .param("input", a.input)
        .param("hidden", a.hidden)
        .param("steps", a.steps)
        .param("classes", a.classes)
        .param("math", imp.name())
        .param("candidate", a.candidate.as_str())
        .param("net", a.net.net_name())
        .param("profile", a.net.profile.name)
        .param("cot_source", source_name(source));
    rec.rounds = client_cost.online.rounds.max(s.online_rounds);
    out.emit(
        rec.field("online_s", online_s)
            .field("mb_total", client_cost.total().bytes() as f64 / 1e6)
            .field("online_mb", client_cost.online.bytes() as f64 / 1e6)
            .field("class", c.class.unwrap_or(0))
            .field("reference_class", argmax(&want)),
    );
    Ok(())
}
