//! `secinfer bench net`: a whole image network in family `hegc` (GALA's linear layers, garbled
//! truncation / ReLU / argmax) per image, with per-layer entries and GALA's Table IX operation
//! counts. `--model DIR` runs a shipped model on its first sample; `--arch mlp|cnn|alexnet|vgg|
//! resnet18` a random network of that architecture (the MLP in the format (12, 5), the others
//! in (12, 6)), from a public seed so both processes of `--net tcp` rebuild it. `--images N`
//! classifies N images in one session (the keys go up once): the record's `online_*` and
//! `offline_*` fields are the last image's, `setup_*` the session's. `--count-only` prints a
//! row per linear layer (GALA's counts at 2048 slots, the ciphertexts of this build's BFV
//! parameters) and per garbled step (AND gates) without running. The client's classes are
//! checked against the plaintext reference. `--kernel auto` (the default) lets the cost model
//! pick each linear layer's kernel; each layer's record names it, the reason and every
//! candidate's estimate. `--unit-costs` measures the HE unit costs that model uses.
use crate::error::Error;
use crate::pair::{run_pair, NetArgs};
use crate::report::{BenchRecord, Reporter};
use clap::Args;
use secinfer_he::kernels::coeff_prime::upload_bytes;
use secinfer_he::kernels::{finish_outputs, Flood};
use secinfer_he::{Evaluator, HeEvaluator, MatVecMethod, Params, Plaintext, SecretKey};
use secinfer_nn::layers::gru::ServerPolicy;
use secinfer_nn::layers::hegc::{
    layer_op_counts, op_counts, random_arch, Estimate, HegcClientModel, Kernel, KernelChoice,
    NetShape, Nonlinear, OpKind, ARCHS, HE_PARAMS,
};
use secinfer_nn::runtime::{ClientSession, ServerOptions, ServerSession};
use secinfer_nn::{ExactActivations, GraphReference, Input, Model, QuantizedGraph};
use serde_json::json;
use std::path::PathBuf;
use std::time::Instant;

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
    /// The linear layers' kernel: auto (the cost model's choice per layer), gala, gazelle or
    /// coeff (coefficient encoding, no rotations).
    #[arg(long, default_value = "auto")]
    pub kernel: String,
    /// Truncation, ReLU and max-pooling by OT (ot) or garbled circuits (gc).
    #[arg(long, default_value = "ot")]
    pub nonlinear: Nonlinear,
    /// Measure the HE unit costs of the kernel cost model on this machine, without running a
    /// network.
    #[arg(long)]
    pub unit_costs: bool,
    /// Run only one ReLU layer of this many values in the networks' own format (shares mod
    /// n8192-t23's t, truncation by 6 fraction bits into 12-bit values), by OT.
    #[arg(long)]
    pub relu_layer: Option<usize>,
    /// `--relu-layer`'s OT pools: SoftSpokenOT's chunk bits k (1 to 8; 16/k bytes per COT).
    #[arg(long, default_value_t = secinfer_nn::layers::hegc::OT_CHUNK_BITS)]
    pub ot_chunk: u32,
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
    if a.unit_costs {
        return unit_costs(out);
    }
    if let Some(n) = a.relu_layer {
        return relu_layer(&a, n, out);
    }
    let kernel: KernelChoice = a.kernel.parse()?;
    // GALA's Table IX counts are of a slot kernel: GAZELLE's when asked for, else GALA's.
    let count_method = match kernel {
        KernelChoice::Fixed(Kernel::Gazelle) => MatVecMethod::Gazelle,
        _ => MatVecMethod::Gala,
    };
    let (model, xf) = load(&a)?;
    let what = a
        .model
        .as_ref()
        .map(|d| d.display().to_string())
        .or(a.arch.clone())
        .unwrap_or_default();
    let shape = NetShape::new(&model.config, kernel)?;
    let c = op_counts(&shape, count_method, 2048)?;
    let counts = json!({
        "perm": c.perm + c.hst_perm, "hst_perm": c.hst_perm, "dec_perm": c.dec_perm,
        "sc_mult": c.sc_mult, "add": c.add,
    });
    if a.count_only {
        return count_rows(&a, &what, &model, &shape, count_method, out);
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
        nonlinear: a.nonlinear,
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
        .zip(&shape.choices)
        .map(|(l, c)| {
            let mut v = json!({"name": l.name, "kernel": l.kernel, "time_s": l.time_s,
                   "he_bytes": l.he_bytes, "gc_bytes": l.gc_bytes, "ot_bytes": l.ot_bytes,
                   "rounds": l.rounds});
            if let Some(c) = c {
                v["why"] = c.why.clone().into();
                v["estimates"] = c.estimates.iter().map(estimate_json).collect();
            }
            v
        })
        .collect();
    let rec = BenchRecord::from_costs("net", r.wall_s, &r.client_cost, &r.server_cost)
        .param("model", what)
        .param("kernel", a.kernel.as_str())
        .param("nonlinear", a.nonlinear.name())
        .param("net", a.net.net_name())
        .param("profile", a.net.profile.name)
        .param("threads", threads)
        .param("images", a.images);
    let setup = first.report.cost.setup;
    // The OT finishing steps' bytes: their online steps and their offline pool fill (the
    // report's HE and GC buckets hold the rest; the pools' base OTs are in the setup's).
    let ot_bytes = rep
        .cost
        .total()
        .bytes()
        .saturating_sub(rep.he_bytes + rep.gc_bytes);
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
            .field("ot_bytes", ot_bytes)
            .field("flood_stat_bits", (r.server * 10.0).floor() / 10.0)
            .field("class", last.class)
            .field("layers", layers)
            .field("counts", counts),
    );
    Ok(())
}

fn estimate_json(e: &Estimate) -> serde_json::Value {
    json!({"kernel": e.kernel.name(), "bytes_up": e.bytes_up, "bytes_down": e.bytes_down,
           "galois_keys": e.galois_keys, "new_key_bytes": e.new_key_bytes,
           "rotations": e.rotations, "sc_mults": e.sc_mults, "time_s": e.time_s})
}

/// Median seconds of `reps` runs of `f`.
fn median_s(reps: usize, mut f: impl FnMut() -> Result<(), Error>) -> Result<f64, Error> {
    let mut v = Vec::with_capacity(reps);
    for _ in 0..reps {
        let t = Instant::now();
        f()?;
        v.push(t.elapsed().as_secs_f64());
    }
    v.sort_by(f64::total_cmp);
    Ok(v[reps / 2])
}

/// `--unit-costs`: the seconds per operation the kernel cost model uses
/// (`hegc::UnitCosts`), measured on the hegc parameter set: a rotation, a ScMult, a slot
/// response (mask, flood, switch, and its decryption), a sparse coefficient response with 64
/// results (likewise), an upload (encryption and expansion) and a Galois key's generation.
fn unit_costs(out: &mut Reporter) -> Result<(), Error> {
    let params = Params::by_name(HE_PARAMS)?;
    let n = params.n();
    let t = params.t();
    let sk = SecretKey::generate(&params);
    let pk = sk.public_key();
    let keys = sk.rotation_keys(&[1], false);
    let ev = HeEvaluator::new(&params, &keys);
    let slots: Vec<u64> = (0..n as u64).map(|i| i * 7919 % t).collect();
    let ct = sk.encrypt(&slots)?;
    let pt = Plaintext::from_coeffs(&params, &slots)?;
    let rotation_s = median_s(21, || {
        ev.rotate(&ct, 1)?;
        Ok(())
    })?;
    let sc_mult_s = median_s(201, || {
        std::hint::black_box(params.mul_plain(&ct, &pt));
        Ok(())
    })?;
    let prod = params.mul_plain(&ct, &pt);
    let slot_response_s = median_s(11, || {
        let r = finish_outputs(
            &params,
            &pk,
            std::slice::from_ref(&prod),
            Flood::Statistical(40),
        )?;
        for resp in &r.responses {
            sk.decrypt_response(resp)?;
        }
        Ok(())
    })?;
    let pos: Vec<usize> = (0..64).map(|i| i * 100 + 99).collect();
    let mask = vec![1u64; pos.len()];
    let log_q = secinfer_he::kernels::coeff_prime::response_bits(&params);
    let coeff_response_s = median_s(11, || {
        let r = params.finish_response_at(prod.clone(), &pk, 80, &pos, &mask, log_q)?;
        sk.decrypt_sparse(&r, &pos)?;
        Ok(())
    })?;
    let upload_s = median_s(21, || {
        std::hint::black_box(sk.encrypt_poly_seeded(&slots)?.expand(&params));
        Ok(())
    })?;
    let steps: Vec<usize> = (1..=8).collect();
    let galois_key_s = median_s(5, || {
        std::hint::black_box(sk.rotation_keys(&steps, false));
        Ok(())
    })? / steps.len() as f64;
    out.emit(
        BenchRecord::local("net", 0.0)
            .param("he_params", HE_PARAMS)
            .param("upload_bytes", upload_bytes(&params))
            .field("rotation_s", rotation_s)
            .field("sc_mult_s", sc_mult_s)
            .field("slot_response_s", slot_response_s)
            .field("coeff_response_s", coeff_response_s)
            .field("upload_s", upload_s)
            .field("galois_key_s", galois_key_s),
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
    // The cost model's choice per linear layer (with `--kernel auto`) and its estimate.
    let (mut est_s, mut est_bytes, mut finish_values) = (0.0f64, 0u64, 0usize);
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
                let row = match shape.choices.get(k).and_then(|c| c.as_ref()) {
                    Some(ch) => {
                        let e = ch.estimates.iter().find(|e| e.kernel == ch.kernel);
                        let (t, b) = e.map_or((0.0, 0), |e| {
                            (e.time_s, e.bytes_up + e.bytes_down + e.new_key_bytes)
                        });
                        est_s += t;
                        est_bytes += b;
                        row.field("chosen", ch.kernel.name())
                            .field("est_time_s", t)
                            .field("est_bytes", b)
                    }
                    None => row,
                };
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
                finish_values += op.len * kw;
                row.field("and_gates", n).field("values", op.len * kw)
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
            .field("finish_values", finish_values)
            .field("est_he_time_s", est_s)
            .field("est_he_bytes", est_bytes)
            .field("he_params", HE_PARAMS),
    );
    Ok(())
}

/// Most values `--relu-layer` runs (the shares and the pools stay well within memory).
const MAX_RELU_LAYER: usize = 1 << 24;

/// One party's side of `--relu-layer`: the OT pools' setup, their fill sized by a dry run
/// (offline), the step (online); returns the party's output shares.
fn relu_party(
    party: secinfer_ss::Party,
    k: u32,
    ch: &mut secinfer_net::DynChannel,
    step: &secinfer_ss::blocks::modt::ModtStep,
    x: &[u64],
) -> Result<Vec<u64>, Error> {
    use secinfer_net::{Channel, Phase};
    use secinfer_ss::blocks::modt::finish_modt;
    ch.set_phase(Phase::Setup);
    let mut ctx =
        secinfer_ss::Ctx::setup_with(party, ch, secinfer_ss::CotSource::SoftSpoken { k })?;
    ch.set_phase(Phase::Offline);
    let plan = secinfer_ss::plan_for(party, |c, dry| finish_modt(c, dry, step, x))?;
    ctx.preprocess(ch, plan)?;
    ch.set_phase(Phase::Online);
    let y = finish_modt(&mut ctx, ch, step, x)?;
    ch.flush()?;
    Ok(y)
}

/// `--relu-layer N`: truncation + ReLU of N accumulators on hegc's shares mod t, by OT, checked
/// against the step's plaintext function.
fn relu_layer(a: &NetBenchArgs, n: usize, out: &mut Reporter) -> Result<(), Error> {
    use secinfer_ss::blocks::modt::ModtStep;
    if n == 0 || n > MAX_RELU_LAYER {
        return Err(Error::msg(format!(
            "--relu-layer takes 1 to {MAX_RELU_LAYER} values"
        )));
    }
    let t = secinfer_nn::layers::hegc::he_params()?.t();
    let step = ModtStep {
        t,
        shift: 6,
        bits: 12,
        relu: true,
        window: 1,
    };
    // Accumulators of 12-bit values times 6-bit weights: within ±2^18.
    let mut prg = secinfer_ot::Prg::from_seed(secinfer_ot::Block(0x72656c75 ^ a.seed as u128));
    let accs: Vec<i64> = (0..n)
        .map(|_| (prg.next_block().low_u64() % (1 << 19)) as i64 - (1 << 18))
        .collect();
    let server_x: Vec<u64> = (0..n).map(|_| prg.below(t)).collect();
    let client_x: Vec<u64> = accs
        .iter()
        .zip(&server_x)
        .map(|(v, s)| (v.rem_euclid(t as i64) as u64 + t - s) % t)
        .collect();
    let (st, sx, cx) = (&step, &server_x, &client_x);
    let r = run_pair(
        &a.net,
        |ch| relu_party(secinfer_ss::Party::Client, a.ot_chunk, ch, st, cx),
        |ch| relu_party(secinfer_ss::Party::Server, a.ot_chunk, ch, st, sx),
    )?;
    for (i, acc) in accs.iter().enumerate() {
        let v = (r.client[i] + r.server[i]) % t;
        let got = if v > t / 2 {
            v as i64 - t as i64
        } else {
            v as i64
        };
        if got != step.reference(&[*acc]) {
            return Err(Error::msg(format!(
                "bench net --relu-layer: value {i} is {got}, the reference's {}",
                step.reference(&[*acc])
            )));
        }
    }
    let c = &r.client_cost;
    let rec = BenchRecord::from_costs("net", r.wall_s, c, &r.server_cost)
        .param("relu_layer", n)
        .param("nonlinear", "ot")
        .param("ot_chunk", a.ot_chunk)
        .param("net", a.net.net_name())
        .param("profile", a.net.profile.name);
    out.emit(
        rec.field("setup_bytes", c.setup.bytes())
            .field("offline_s", c.offline.time_s)
            .field("offline_bytes", c.offline.bytes())
            .field("online_s", c.online.time_s)
            .field("online_bytes", c.online.bytes())
            .field("online_rounds", c.online.rounds)
            .field(
                "bytes_per_value",
                (c.offline.bytes() + c.online.bytes()) / n as u64,
            ),
    );
    Ok(())
}
