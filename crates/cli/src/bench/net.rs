//! `secinfer bench net`: a whole image network in family `hegc` (GALA's linear layers, garbled
//! truncation / ReLU / argmax) per image, with per-layer entries and GALA's Table IX operation
//! counts. `--model DIR` runs a shipped model on its first sample; `--arch mlp` a random
//! 784-128-128-10 MLP in the format (12, 5), from a public seed so both processes of `--net tcp`
//! rebuild it. The client's class is checked against the plaintext reference.
use crate::error::Error;
use crate::pair::{run_pair, NetArgs};
use crate::report::{BenchRecord, Reporter};
use clap::Args;
use secinfer_he::MatVecMethod;
use secinfer_nn::layers::gru::ServerPolicy;
use secinfer_nn::layers::hegc::{op_counts, random_mlp, NetShape};
use secinfer_nn::runtime::{ClientInput, ClientSession, RunOptions, ServerOptions, ServerSession};
use secinfer_nn::{ExactActivations, GraphReference, Input, Model, QuantizedGraph};
use serde_json::json;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct NetBenchArgs {
    /// A model directory (its first `samples.jsonl` line is the image).
    #[arg(long, conflicts_with = "arch")]
    pub model: Option<PathBuf>,
    /// A random network of a known architecture: mlp (784-128-128-10).
    #[arg(long)]
    pub arch: Option<String>,
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
        (None, Some("mlp")) => {
            let m = random_mlp(&[784, 128, 128, 10], 12, 5, a.seed)?;
            let x = (0..784u64)
                .map(|i| ((i * 2654435761 + a.seed) % 256) as f32 / 256.0)
                .collect();
            Ok((m, x))
        }
        (None, Some(o)) => Err(Error::msg(format!(
            "unknown --arch {o:?} (this build runs mlp; conv networks are not in family hegc yet)"
        ))),
        (None, None) => Err(Error::msg("pass --model DIR or --arch mlp")),
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
        let rec = BenchRecord::local("net", 0.0)
            .param("model", what)
            .param("kernel", a.kernel.as_str())
            .param("slots", 2048)
            .field("counts", counts);
        out.emit(rec);
        return Ok(());
    }
    let q = QuantizedGraph::new(&model, model.config.fixed_point)?;
    let x = q.quantize_input(&xf);
    let want = GraphReference::new(&q, ExactActivations)
        .output(Input::Fixed(&x))?
        .first()
        .copied()
        .unwrap_or(-1);
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
    let run = RunOptions::default();
    let r = run_pair(
        &a.net,
        move |ch| Ok(client.run(ch, ClientInput::Fixed(&x), &run, &mut |_, _, _| {})?),
        move |ch| {
            let rep = server.run(ch, ServerPolicy::default())?;
            Ok(rep.flood_stat_bits)
        },
    )?;
    if r.client.class as i64 != want {
        return Err(Error::msg(format!(
            "bench net: secure class {} differs from the reference's {want}",
            r.client.class
        )));
    }
    let rep = &r.client.report;
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
        .param("threads", threads);
    out.emit(
        rec.field("he_bytes", rep.he_bytes)
            .field("gc_bytes", rep.gc_bytes)
            .field("flood_stat_bits", (r.server * 10.0).floor() / 10.0)
            .field("class", r.client.class)
            .field("layers", layers)
            .field("counts", counts),
    );
    Ok(())
}
