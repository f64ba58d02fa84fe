//! `secinfer bench math`: the secret-sharing math library between two parties, through
//! `secinfer_ss::session::run_math` (this module only parses options and reports).
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
use secinfer_net::Cost;
use secinfer_ss::math::{self, Impl};
use secinfer_ss::ring::Format;
use secinfer_ss::session::{run_math, MathJob, MathRun};
use secinfer_ss::ulp::{inputs, MathFn};
use secinfer_ss::{CotSource, FerretParams, Party, SsError};
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

pub(super) fn cot_source(name: &str, k: u32) -> Result<CotSource, Error> {
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

impl PartyReport {
    fn of(r: &MathRun) -> PartyReport {
        PartyReport {
            setup_s: r.setup_s,
            offline_s: r.offline_s,
            online_s: r.online_s,
            online_rounds: r.cost.online.rounds,
        }
    }
}

/// A format from the command line: ranges checked by `secinfer_ss::ring::Format::new`.
fn format(bits: u32, scale: u32) -> Result<Format, Error> {
    Ok(Format::new(bits, scale).map_err(SsError::from)?)
}

fn formats(f: MathFn, a: &MathArgs) -> Result<(Format, Format), Error> {
    let (di, dout) = math::default_formats(f);
    let inp = format(a.bits.unwrap_or(di.bits), a.scale.unwrap_or(di.scale))?;
    let out = if f == MathFn::Relu {
        format(
            a.out_bits.unwrap_or(inp.bits),
            a.out_scale.unwrap_or(inp.scale),
        )?
    } else {
        format(
            a.out_bits.unwrap_or(dout.bits),
            a.out_scale.unwrap_or(dout.scale),
        )?
    };
    Ok((inp, out))
}

/// The client's block counts and per-block costs (its bytes are both directions of the link)
/// as JSON.
fn block_json(r: &MathRun, n: usize) -> (Map<String, Value>, Map<String, Value>) {
    let blocks = r
        .blocks
        .iter()
        .map(|(k, v)| (k.to_string(), Value::from(*v)))
        .collect();
    let n = n.max(1) as f64;
    let costs = r
        .block_stats
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
    (blocks, costs)
}

/// One measured run; returns the record.
fn measure(
    f: MathFn,
    imp: Impl,
    inp: Format,
    out: Format,
    n: usize,
    net: &NetArgs,
    source: CotSource,
) -> Result<BenchRecord, Error> {
    let xs = inputs(f, inp, n);
    let job = MathJob {
        func: f,
        imp,
        input: inp,
        output: out,
        source,
    };
    let (job_ref, xs_ref) = (&job, &xs);
    let r = run_pair(
        net,
        |ch| {
            Ok::<_, Error>(run_math(
                Party::Client,
                ch,
                job_ref,
                Some(xs_ref),
                xs_ref.len(),
            )?)
        },
        |ch| {
            let r = run_math(Party::Server, ch, job_ref, None, xs_ref.len())?;
            Ok::<_, Error>(PartyReport::of(&r))
        },
    )?;
    let c = r.client;
    let s = r.server;
    let st = c.ulp(&job, &xs)?;
    let cr = PartyReport::of(&c);
    let (blocks, block_costs) = block_json(&c, xs.len());
    // Costs of the function only: the client's meter (both directions) up to the end of the
    // function; the server's times from its own report.
    let mut server_cost = Cost::default();
    server_cost.setup.time_s = s.setup_s;
    server_cost.offline.time_s = s.offline_s;
    server_cost.online.time_s = s.online_s;
    server_cost.online.rounds = s.online_rounds;
    let mut client_cost = c.cost;
    client_cost.setup.time_s = cr.setup_s;
    client_cost.offline.time_s = cr.offline_s;
    client_cost.online.time_s = cr.online_s;
    let online_s = cr.online_s.max(s.online_s);
    let setup_s = cr.setup_s.max(s.setup_s);
    let offline_s = cr.offline_s.max(s.offline_s);
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
        .field("blocks", Value::Object(blocks))
        .field("block_costs", Value::Object(block_costs));
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
    let (inp, outf) = formats(f, &args)?;
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
            let inp = format(s + 4, s)?;
            let outf = format(if f == MathFn::Exp { s + 14 } else { s + 2 }, s)?;
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
