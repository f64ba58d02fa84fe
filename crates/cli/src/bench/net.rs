//! `secinfer bench net`: a whole image network in family `hegc` (GALA's linear layers, garbled
//! truncation / ReLU / argmax) per image, with per-layer entries and GALA's Table IX operation
//! counts. `--model DIR` runs a shipped model on its first sample; `--arch mlp|cnn|alexnet|vgg|
//! resnet18` a random network of that architecture (the MLP in the format (12, 5), the others
//! in (12, 6)), from a public seed so both processes of `--net tcp` rebuild it. `--images N`
//! classifies N images in one session (the keys go up once): the record's `online_*` and
//! `offline_*` fields are the last image's, `setup_*` the session's. `--count-only` prints a
//! row per linear layer (GALA's counts at 2048 slots, the ciphertexts of this build's BFV
//! parameters) and per garbled step (AND gates) without running. The client's classes are
//! checked against the plaintext reference.
use crate::error::Error;
use crate::pair::{run_pair, NetArgs};
use crate::report::{BenchRecord, Reporter};
use clap::Args;
use secinfer_he::MatVecMethod;
use secinfer_nn::layers::gru::ServerPolicy;
use secinfer_nn::layers::hegc::{
    layer_op_counts, op_counts, random_arch, HegcClientModel, NetShape, OpKind, ARCHS, HE_PARAMS,
};
use secinfer_nn::runtime::{ClientSession, ServerOptions, ServerSession};
use secinfer_nn::{ExactActivations, GraphReference, Input, Model, QuantizedGraph};
use serde_json::json;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct NetBenchArgs {
    /// A model directory (its first `samples.jsonl` line is the image).
    #[arg(long, conflicts_with = "arch")]
    pub model: Option<PathBuf>,
    /// A random network of a known architecture: mlp (784-128-128-10), cnn (MiniONN's MNIST
    /// CNN), alexnet, vgg (VGG-16) or resnet18 (the last three for 32×32×3 inputs).
    #[arg(long)]
    pub arch: Option<String>,
    /// Images classified in one session (the client's keys are sent once).
    #[arg(long, default_value_t = 1)]
    pub images: usize,
    /// The linear layers' kernel: gala or gazelle.
    #[arg(long, default_value = "gala")]
    pub kernel: String,
    /// Print GALA's operation counts only (2048 slots, Table IX), without running.
    #[arg(long)]
    pub count_only: bool,
    /// Seed of the random network and input.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    #[command(flatten)]
    pub net: NetArgs,
}

fn load(a: &NetBenchArgs) -> Result<(Model, Vec<f32>), Error> {
    match (&a.model, a.arch.as_deref()) {
        (Some(dir), _) => {
            let m = Model::load(dir)?;
            let text = std::fs::read_to_string(dir.join("samples.jsonl"))?;
            let line = text
                .lines()
                .next()
                .ok_or_else(|| Error::msg("samples.jsonl is empty"))?;
            let v: serde_json::Value = serde_json::from_str(line)
                .map_err(|e| Error::msg(format!("samples.jsonl: {e}")))?;
            let x = v["input"]
                .as_array()
                .ok_or_else(|| Error::msg("samples.jsonl: no \"input\" array"))?
                .iter()
                .map(|x| x.as_f64().unwrap_or(0.0) as f32)
                .collect();
            Ok((m, x))
        }
        (None, Some(arch)) => {
            let frac = if arch == "mlp" { 5 } else { 6 };
            let m = random_arch(arch, 12, frac, a.seed)?;
            let n = m.config.graph.input_shape().elements() as u64;
            let x = (0..n)
                .map(|i| ((i * 2654435761 + a.seed) % 256) as f32 / 256.0)
                .collect();
            Ok((m, x))
        }
        (None, None) => Err(Error::msg(format!(
            "pass --model DIR or --arch {}",
            ARCHS.join("|")
        ))),
    }
}

pub fn run(a: NetBenchArgs, out: &mut Reporter) -> Result<(), Error> {
    let kernel: MatVecMethod = a.kernel.parse()?;
    if kernel == MatVecMethod::Naive {
        return Err(Error::msg("--kernel is gala or gazelle"));
    }
    let (model, xf) = load(&a)?;
    let what = a
        .model
        .as_ref()
        .map(|d| d.display().to_string())
        .or(a.arch.clone())
        .unwrap_or_default();
    let shape = NetShape::new(&model.config, kernel)?;
    let c = op_counts(&shape, kernel, 2048)?;
    let counts = json!({
        "perm": c.perm + c.hst_perm, "hst_perm": c.hst_perm, "dec_perm": c.dec_perm,
        "sc_mult": c.sc_mult, "add": c.add,
    });
    if a.count_only {
        return count_rows(&a, &what, &model, &shape, kernel, out);
    }
    let q = QuantizedGraph::new(&model, model.config.fixed_point)?;
    if a.images == 0 || a.images as u64 > secinfer_nn::layers::hegc::MAX_IMAGES {
        return Err(Error::msg("--images is at least 1"));
    }
    // Image i is the sample with its pixels rotated by i (distinct inputs, same statistics).
    let x0 = q.quantize_input(&xf);
    let xs: Vec<Vec<i64>> = (0..a.images)
        .map(|i| {
            let mut x = x0.clone();
            x.rotate_left(i % x0.len().max(1));
            x
        })
        .collect();
    let mut reference = GraphReference::new(&q, ExactActivations);
    let want: Vec<i64> = xs
        .iter()
        .map(|x| {
            Ok(reference
                .output(Input::Fixed(x))?
                .first()
                .copied()
                .unwrap_or(-1))
        })
        .collect::<Result<_, Error>>()?;
    let opts = ServerOptions {
        kernel,
        ..ServerOptions::default()
    };
    let server = ServerSession::prepare(&model, &opts)?;
    let info = secinfer_nn::info::ModelInfo {
        config: model.config.clone(),
        vocab: None,
        embed: Vec::new(),
        server_key: None,
    };
    let client = ClientSession::prepare(&info, &opts)?;
    let r = run_pair(
        &a.net,
        move |ch| {
            let refs: Vec<&[i64]> = xs.iter().map(|x| x.as_slice()).collect();
            Ok(client.run_images(ch, &refs, false, &mut |_, _, _| {})?)
        },
        move |ch| {
            let rep = server.run(ch, ServerPolicy::default())?;
            Ok(rep.flood_stat_bits)
        },
    )?;
    let classes: Vec<i64> = r.client.iter().map(|o| o.class as i64).collect();
    if classes != want {
        return Err(Error::msg(format!(
            "bench net: secure classes {classes:?} differ from the reference's {want:?}"
        )));
    }
    let first = r.client.first().ok_or_else(|| Error::msg("no image ran"))?;
    let last = r.client.last().ok_or_else(|| Error::msg("no image ran"))?;
    let rep = &last.report;
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let layers: Vec<serde_json::Value> = rep
        .layers
        .iter()
        .map(|l| {
            json!({"name": l.name, "kernel": l.kernel, "time_s": l.time_s,
                   "he_bytes": l.he_bytes, "gc_bytes": l.gc_bytes, "rounds": l.rounds})
        })
        .collect();
    let rec = BenchRecord::from_costs("net", r.wall_s, &r.client_cost, &r.server_cost)
        .param("model", what)
        .param("kernel", a.kernel.as_str())
        .param("net", a.net.net_name())
        .param("profile", a.net.profile.name)
        .param("threads", threads)
        .param("images", a.images);
    let setup = first.report.cost.setup;
    let (off, on) = (rep.cost.offline, rep.cost.online);
    out.emit(
        rec.field("setup_s", setup.time_s)
            .field("setup_bytes", setup.bytes())
            .field("offline_s", off.time_s)
            .field("offline_bytes", off.bytes())
            .field("online_s", on.time_s)
            .field("online_bytes", on.bytes())
            .field("online_rounds", on.rounds)
            .field("he_bytes", rep.he_bytes)
            .field("gc_bytes", rep.gc_bytes)
            .field("flood_stat_bits", (r.server * 10.0).floor() / 10.0)
            .field("class", last.class)
            .field("layers", layers)
            .field("counts", counts),
    );
    Ok(())
}

/// `--count-only`: one row per linear layer (GALA's operation counts at 2048 slots; the
/// ciphertexts each way with this build's parameters) and per garbled step (AND gates), then
/// the network's total.
fn count_rows(
    a: &NetBenchArgs,
    what: &str,
    model: &Model,
    shape: &NetShape,
    kernel: MatVecMethod,
    out: &mut Reporter,
) -> Result<(), Error> {
    let counts = layer_op_counts(shape, kernel, 2048)?;
    let cm = HegcClientModel::new(&model.config, kernel)?;
    let plans = cm.shape.plans(&cm.params)?;
    let p = cm.params.t();
    let mut counts = counts.into_iter();
    let (mut cts_up, mut cts_down, mut ands) = (0usize, 0usize, 0u64);
    let mut total = secinfer_he::OpCounts::default();
    for (k, op) in shape.ops.iter().enumerate() {
        let row = BenchRecord::local("net", 0.0)
            .param("model", what)
            .param("kernel", a.kernel.as_str())
            .field("layer", op.name.as_str());
        let row = match (&op.kind, &plans[k]) {
            (OpKind::Linear(_), Some(plan)) => {
                let (_, c) = counts
                    .next()
                    .ok_or_else(|| Error::msg("a linear layer without counts"))?;
                cts_up += plan.in_cts();
                cts_down += plan.out_cts();
                total.perm += c.perm + c.hst_perm;
                total.hst_perm += c.hst_perm;
                total.dec_perm += c.dec_perm;
                total.sc_mult += c.sc_mult;
                total.add += c.add;
                row.field("perm", c.perm + c.hst_perm)
                    .field("hst_perm", c.hst_perm)
                    .field("dec_perm", c.dec_perm)
                    .field("sc_mult", c.sc_mult)
                    .field("add", c.add)
                    .field("cts_up", plan.in_cts())
                    .field("cts_down", plan.out_cts())
            }
            (OpKind::Finish { tr, window }, _) => {
                let kw = window.as_ref().map_or(1, |w| w.kernel[0] * w.kernel[1]);
                let circ = secinfer_gc::requant::window_circuit(p, tr, kw)?;
                let n = circ.and_count() * op.len as u64;
                ands += n;
                row.field("and_gates", n)
            }
            _ => continue,
        };
        out.emit(row);
    }
    out.emit(
        BenchRecord::local("net", 0.0)
            .param("model", what)
            .param("kernel", a.kernel.as_str())
            .field("layer", "total")
            .field("perm", total.perm)
            .field("hst_perm", total.hst_perm)
            .field("dec_perm", total.dec_perm)
            .field("sc_mult", total.sc_mult)
            .field("add", total.add)
            .field("cts_up", cts_up)
            .field("cts_down", cts_down)
            .field("and_gates", ands)
            .field("he_params", HE_PARAMS),
    );
    Ok(())
}
