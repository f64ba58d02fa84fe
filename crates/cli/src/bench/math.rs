//! `secinfer bench math`: the secret-sharing math library (issue 5) between two parties.
//!
//! The client owns the inputs (evenly spaced over the input range, or every input when `--n`
//! covers it) and secret-shares them before timing; the parties then run the function on the
//! shares (phase `offline`: the correlations a dry run says the function consumes, precomputed
//! — pooled random COTs; phase `online`: the function itself, derandomising them), and
//! afterwards the client learns the outputs (not metered) and measures the ULP error against the
//! exact real function. Setup is the base OTs of both pool directions (and Ferret's bootstrap
//! with `--cot-source ferret`).
use crate::error::Error;
use crate::pair::{run_pair, NetArgs};
use crate::report::{BenchRecord, Reporter};
use clap::Args;
use secinfer_net::{Channel, Cost, DynChannel, Phase};
use secinfer_ss::math::{self, Impl};
use secinfer_ss::reveal::{reveal, share_input, RevealTo};
use secinfer_ss::ring::Fixed;
use secinfer_ss::ulp::{inputs, ulp_stats, MathFn};
use secinfer_ss::{CotSource, Ctx, FerretParams, Party};
use serde_json::{Map, Value};
use std::time::Instant;

#[derive(Args, Debug)]
pub struct MathArgs {
    /// Function: exp, exp_neg, sigmoid, tanh or relu.
    #[arg(long = "fn", default_value = "sigmoid")]
    pub func: String,
    /// Implementation: opaf or sirnn.
    #[arg(long = "impl", default_value = "opaf")]
    pub imp: String,
    /// Number of elements (evenly spaced over the input range; all inputs when it covers it).
    #[arg(long, default_value_t = 16384)]
    pub n: usize,
    /// Input bitwidth (default: the papers', see `secinfer_ss::math::default_formats`).
    #[arg(long)]
    pub bits: Option<u32>,
    /// Input scale.
    #[arg(long)]
    pub scale: Option<u32>,
    /// Output bitwidth.
    #[arg(long = "out-bits")]
    pub out_bits: Option<u32>,
    /// Output scale.
    #[arg(long = "out-scale")]
    pub out_scale: Option<u32>,
    /// Print OPAF's Table V layout instead: max ULP per function per scale s = 1..=16 (input
    /// s + 4 bits), exhaustive up to 2^16 inputs, else 2^16 evenly spaced inputs (`--n` unused).
    #[arg(long = "ulp-table")]
    pub ulp_table: bool,
    /// What fills the COT pools offline: `softspoken` (SoftSpokenOT with `--k`: 16/k bytes per
    /// COT; the default, as in the secure GRU), `iknp` (16 bytes per COT) or `ferret` (silent
    /// OT, emp-ot's b13 set: well under a bit per COT, ~10^7 COTs per iteration).
    #[arg(long = "cot-source", default_value = "softspoken")]
    pub cot_source: String,
    /// SoftSpokenOT bits per chunk (1..=8) for `--cot-source softspoken`. 4 (the default):
    /// 4 bytes per COT, measured as fast as IKNP at the lan profile for sigmoid, tanh, exp_neg
    /// and ReLU with 2.3–3.6× fewer total bytes (docs/benchmarks.md, session 4); 2: 8 bytes.
    #[arg(long, default_value_t = 4)]
    pub k: u32,
    /// Measured runs in this one process, each a whole new session (base OTs, pools, function);
    /// a record per run, numbered by the `run` parameter. Run 1 pays for every fresh page of
    /// the process (the pools and tables are tens of MB, and first-touch page faults are
    /// expensive on a VM); later runs show a serving process whose heap is already mapped. With
    /// `--net tcp` and no profile the server half is a new process every run.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub repeat: u32,
    #[command(flatten)]
    pub net: NetArgs,
}

fn cot_source(name: &str, k: u32) -> Result<CotSource, Error> {
    match name {
        "iknp" => Ok(CotSource::Iknp),
        "ferret" => Ok(CotSource::Ferret(FerretParams::B13)),
        "softspoken" if (1..=secinfer_ot::SOFTSPOKEN_MAX_K).contains(&k) => {
            Ok(CotSource::SoftSpoken { k })
        }
        "softspoken" => Err(Error::msg(format!(
            "--k must be in 1..={}, got {k}",
            secinfer_ot::SOFTSPOKEN_MAX_K
        ))),
        _ => Err(Error::msg(
            "--cot-source must be iknp, softspoken or ferret",
        )),
    }
}

/// What each party reports about its own run (serialisable for the two-process mode).
#[derive(serde::Serialize, serde::Deserialize)]
struct PartyReport {
    setup_s: f64,
    offline_s: f64,
    online_s: f64,
    online_rounds: u64,
}

struct ClientOut {
    report: PartyReport,
    cost: Cost,
    outputs: Vec<u64>,
    blocks: Map<String, Value>,
    block_costs: Map<String, Value>,
}

fn formats(f: MathFn, a: &MathArgs) -> (Fixed, Fixed) {
    let (di, dout) = math::default_formats(f);
    let inp = Fixed {
        bits: a.bits.unwrap_or(di.bits),
        scale: a.scale.unwrap_or(di.scale),
    };
    let out = if f == MathFn::Relu {
        Fixed {
            bits: a.out_bits.unwrap_or(inp.bits),
            scale: a.out_scale.unwrap_or(inp.scale),
        }
    } else {
        Fixed {
            bits: a.out_bits.unwrap_or(dout.bits),
            scale: a.out_scale.unwrap_or(dout.scale),
        }
    };
    (inp, out)
}

fn party(
    party: Party,
    f: MathFn,
    imp: Impl,
    inp: Fixed,
    out: Fixed,
    xs: &[u64],
    source: CotSource,
    ch: &mut DynChannel,
) -> Result<ClientOut, Error> {
    let t0 = Instant::now();
    let mut ctx = Ctx::setup_with(party, ch, source)?;
    let setup_s = t0.elapsed().as_secs_f64();
    // Input sharing (not part of the measured function).
    let mine = share_input(
        &mut ctx,
        ch,
        Party::Client,
        if party == Party::Client {
            Some(xs)
        } else {
            None
        },
        xs.len(),
        inp.bits,
    )?;
    // Offline: the correlations the function will consume, counted by dry runs on this
    // party's side (OT counts do not depend on the data, so both parties agree without a
    // message), then precomputed.
    // Element-wise: two dry runs of 1 and 2 elements size it (see `plan_for_elementwise`).
    let zeros = vec![0u64; xs.len()];
    let plan = secinfer_ss::plan_for_elementwise(party, xs.len(), |c, dry, m| {
        math::evaluate(c, dry, f, imp, &zeros[..m], inp, out)
    })?;
    ch.set_phase(Phase::Offline);
    let t_off = Instant::now();
    ctx.preprocess(ch, plan)?;
    // Barrier (one byte each way, charged to offline): the online clocks start together, so
    // neither party's online time includes waiting for the tail of the other's offline work.
    if party == Party::Server {
        ch.send_pod(&[1u8])?;
        ch.recv_pod::<u8>(1)?;
    } else {
        ch.recv_pod::<u8>(1)?;
        ch.send_pod(&[1u8])?;
    }
    ch.flush()?;
    let offline_s = t_off.elapsed().as_secs_f64();
    ch.set_phase(Phase::Online);
    let t1 = Instant::now();
    let y = math::evaluate(&mut ctx, ch, f, imp, &mine, inp, out)?;
    ch.flush()?;
    let online_s = t1.elapsed().as_secs_f64();
    let cost = ch.cost();
    // Output to the client (after the measurement).
    let revealed = reveal(&mut ctx, ch, &y, out.bits, RevealTo::Only(Party::Client))?;
    let blocks = ctx
        .counts
        .iter()
        .map(|(k, v)| (k.to_string(), Value::from(*v)))
        .collect();
    let n = xs.len().max(1) as f64;
    // Per-step costs as the client saw them (its bytes are both directions of the link).
    let block_costs = ctx
        .stats
        .iter()
        .map(|(k, st)| {
            let mut o = Map::new();
            o.insert("calls".into(), Value::from(st.calls));
            o.insert("ms".into(), Value::from((st.time_s * 1e4).round() / 10.0));
            o.insert(
                "bytes_per_item".into(),
                Value::from((st.bytes as f64 / n * 10.0).round() / 10.0),
            );
            o.insert("cots_per_item".into(), Value::from(st.cots as f64 / n));
            o.insert("kk_ots_per_item".into(), Value::from(st.kk_ots as f64 / n));
            (k.to_string(), Value::Object(o))
        })
        .collect();
    let report = PartyReport {
        setup_s,
        offline_s,
        online_s,
        online_rounds: cost.online.rounds,
    };
    Ok(ClientOut {
        report,
        cost,
        outputs: revealed.unwrap_or_default(),
        blocks,
        block_costs,
    })
}

/// One measured run; returns the record.
fn measure(
    f: MathFn,
    imp: Impl,
    inp: Fixed,
    out: Fixed,
    n: usize,
    net: &NetArgs,
    source: CotSource,
) -> Result<BenchRecord, Error> {
    let xs = inputs(f, inp, n);
    let xs_ref = &xs;
    let r = run_pair(
        net,
        |ch| party(Party::Client, f, imp, inp, out, xs_ref, source, ch),
        |ch| party(Party::Server, f, imp, inp, out, xs_ref, source, ch).map(|r| r.report),
    )?;
    let c = r.client;
    let s = r.server;
    if c.outputs.len() != xs.len() {
        return Err(Error::msg("client did not receive every output"));
    }
    let st = ulp_stats(f, &xs, inp, &c.outputs, out);
    // Costs of the function only: the client's meter (both directions) up to the end of the
    // function; the server's times from its own report.
    let mut server_cost = Cost::default();
    server_cost.setup.time_s = s.setup_s;
    server_cost.offline.time_s = s.offline_s;
    server_cost.online.time_s = s.online_s;
    server_cost.online.rounds = s.online_rounds;
    let mut client_cost = c.cost;
    client_cost.setup.time_s = c.report.setup_s;
    client_cost.offline.time_s = c.report.offline_s;
    client_cost.online.time_s = c.report.online_s;
    let online_s = c.report.online_s.max(s.online_s);
    let setup_s = c.report.setup_s.max(s.setup_s);
    let offline_s = c.report.offline_s.max(s.offline_s);
    let threads = std::thread::available_parallelism()
        .map(|v| v.get())
        .unwrap_or(1);
    let mut rec = BenchRecord::from_costs(
        "math",
        setup_s + offline_s + online_s,
        &client_cost,
        &server_cost,
    )
    .param("fn", f.name())
    .param("impl", imp.name())
    .param("n", xs.len())
    .param("bits", inp.bits)
    .param("scale", inp.scale)
    .param("out_bits", out.bits)
    .param("out_scale", out.scale)
    .param("net", net.net_name())
    .param("profile", net.profile.name)
    .param("threads", threads)
    .param(
        "cot_source",
        match source {
            CotSource::Iknp => "iknp".to_string(),
            CotSource::SoftSpoken { k } => format!("softspoken-k{k}"),
            other => format!("{other:?}"),
        },
    );
    let online_bytes = client_cost.online.bytes();
    rec = rec
        .field("online_s", online_s)
        .field("max_ulp", st.max)
        .field("mean_ulp", st.mean)
        .field("bytes_per_item", online_bytes as f64 / xs.len() as f64)
        .field("offline_s", offline_s)
        .field(
            "offline_bytes_per_item",
            client_cost.offline.bytes() as f64 / xs.len() as f64,
        )
        .field("blocks", Value::Object(c.blocks))
        .field("block_costs", Value::Object(c.block_costs));
    // Rounds of the function itself (setup excluded).
    rec.rounds = client_cost.online.rounds.max(s.online_rounds);
    Ok(rec)
}

pub fn run(args: MathArgs, out: &mut Reporter) -> Result<(), Error> {
    let imp = Impl::parse(&args.imp).ok_or_else(|| Error::msg("--impl must be opaf or sirnn"))?;
    if args.ulp_table {
        return ulp_table(imp, &args, out);
    }
    let f = MathFn::parse(&args.func)
        .ok_or_else(|| Error::msg("--fn must be exp, exp_neg, sigmoid, tanh or relu"))?;
    if args.n == 0 {
        return Err(Error::msg("--n must be positive"));
    }
    let (inp, outf) = formats(f, &args);
    let source = cot_source(&args.cot_source, args.k)?;
    for run in 1..=args.repeat {
        let rec = measure(f, imp, inp, outf, args.n, &args.net, source)?;
        out.emit(rec.param("run", run));
    }
    Ok(())
}

/// OPAF Table V: max ULP per function per scale (input s + 4 bits; outputs of the minimal width:
/// s + 2 bits, exp s + 14 bits).
fn ulp_table(imp: Impl, args: &MathArgs, out: &mut Reporter) -> Result<(), Error> {
    let _ = args.n;
    let n = 1usize << 16;
    for f in [MathFn::Exp, MathFn::ExpNeg, MathFn::Sigmoid, MathFn::Tanh] {
        if f == MathFn::Exp && imp == Impl::Sirnn {
            continue;
        }
        let mut rec = BenchRecord::local("math_ulp_table", 0.0)
            .param("fn", f.name())
            .param("impl", imp.name());
        let t0 = Instant::now();
        for s in 1..=16u32 {
            let inp = Fixed {
                bits: s + 4,
                scale: s,
            };
            let outf = if f == MathFn::Exp {
                Fixed {
                    bits: s + 14,
                    scale: s,
                }
            } else {
                Fixed {
                    bits: s + 2,
                    scale: s,
                }
            };
            let v = match measure(
                f,
                imp,
                inp,
                outf,
                n,
                &args.net,
                cot_source(&args.cot_source, args.k)?,
            ) {
                Ok(r) => r.extra.get("max_ulp").cloned().unwrap_or(Value::Null),
                Err(_) => Value::Null,
            };
            rec = rec.field(&format!("s{s}"), v);
        }
        rec.time_s = t0.elapsed().as_secs_f64();
        out.emit(rec.field("inputs_per_scale", format!("min(2^(s+4), {n})")));
    }
    Ok(())
}
