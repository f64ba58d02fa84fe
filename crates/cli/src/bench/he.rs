//! `secinfer bench he-ops | he-matvec | he-conv`: the packed-BFV layer and the GAZELLE / GALA
//! linear kernels. Both parties run in this process (the kernels are local compute;
//! the bytes are what each side would send): `online` = client encryption + server kernel +
//! masking/flooding/mod-switch + client decryption; `setup` = Galois/public key generation and
//! the server's weight encoding. Kernel times are the fastest of `--reps` runs.
use crate::error::Error;
use crate::report::{BenchRecord, Reporter};
use clap::Args;
use secinfer_he::bench::KernelReport;
use secinfer_he::kernels::Flood;
use secinfer_he::{ConvMethod, MatVecMethod, Params};
use serde_json::json;

/// The statistical security the responses must reach by default (DESIGN.md §2: σ ≥ 40).
const MIN_FLOOD_BITS: u32 = 40;

fn parse_flood(s: &str) -> Result<Flood, String> {
    match s {
        "best-effort" => Ok(Flood::BestEffort(MIN_FLOOD_BITS)),
        "statistical" => Ok(Flood::Statistical(MIN_FLOOD_BITS)),
        "off" => Ok(Flood::Off),
        _ => Err(format!(
            "flood must be best-effort|statistical|off, not {s}"
        )),
    }
}

/// Refuses a flooding mode below 40 statistical bits unless `--insecure-flood` asks for it.
fn check_flood(flood: Flood, insecure: bool) -> Result<(), Error> {
    match flood {
        Flood::Statistical(s) if s >= MIN_FLOOD_BITS => Ok(()),
        _ if insecure => Ok(()),
        _ => Err(Error::msg(format!(
            "--flood {} does not guarantee {MIN_FLOOD_BITS} statistical bits: \
             use --flood statistical (with a parameter set that has room for it, e.g. n8192) \
             or pass --insecure-flood to measure it anyway",
            if flood == Flood::Off {
                "off"
            } else {
                "best-effort"
            }
        ))),
    }
}

/// The flooding a run reached, refused below 40 bits unless `--insecure-flood`.
fn check_reached(stat_bits: f64, insecure: bool) -> Result<(), Error> {
    if stat_bits < MIN_FLOOD_BITS as f64 && !insecure {
        return Err(Error::msg(format!(
            "flooding reached only {stat_bits:.1} statistical bits: use a larger parameter set \
             or pass --insecure-flood"
        )));
    }
    Ok(())
}

/// What the reached flooding means, for the report.
fn margin_text(stat_bits: f64) -> String {
    if stat_bits >= MIN_FLOOD_BITS as f64 {
        format!(
            "the responses are within statistical distance 2^-{stat_bits:.1} of ciphertexts \
             that depend only on the client's share (>= 2^-{MIN_FLOOD_BITS}: meets the design)"
        )
    } else {
        format!(
            "INSECURE: flooding reaches only {stat_bits:.1} statistical bits (below \
             {MIN_FLOOD_BITS}), so the responses' noise may leak information about the weights"
        )
    }
}

fn threads() -> usize {
    rayon_threads()
}

fn rayon_threads() -> usize {
    std::env::var("RAYON_NUM_THREADS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| {
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1)
        })
}

#[derive(Args, Debug)]
pub struct HeOpsArgs {
    /// Parameter sets, comma-separated (n4096, n8192, n8192-z2k32).
    #[arg(long, default_value = "n4096,n8192")]
    pub params: String,
    /// Iterations per timing batch (the minimum of 5 batches is reported).
    #[arg(long, default_value_t = 100)]
    pub iters: usize,
}

#[derive(Args, Debug)]
pub struct HeMatvecArgs {
    /// naive, gazelle or gala; a comma-separated list runs them in one process and reports
    /// GALA's speed-up over GAZELLE.
    #[arg(long, default_value = "gazelle,gala")]
    pub method: String,
    /// Rows of the weight matrix (output length).
    #[arg(long, default_value_t = 16)]
    pub rows: usize,
    /// Columns of the weight matrix (input length).
    #[arg(long, default_value_t = 128)]
    pub cols: usize,
    /// BFV parameter set (n4096, n8192, ...). The default n8192 has room for 40-bit
    /// statistical flooding; n4096 does not, and needs --insecure-flood.
    #[arg(long, default_value = "n8192")]
    pub params: String,
    /// Re-randomisation of the response: statistical (require 2^-40, the default),
    /// best-effort (as much 40-bit flooding as fits) or off; the last two need
    /// --insecure-flood.
    #[arg(long, default_value = "statistical", value_parser = parse_flood)]
    pub flood: Flood,
    /// Allow a flooding mode or parameter set below 40 statistical bits (measurements only:
    /// such responses may leak the weights).
    #[arg(long = "insecure-flood")]
    pub insecure_flood: bool,
    /// Kernel repetitions (fastest reported).
    #[arg(long, default_value_t = 20)]
    pub reps: usize,
}

#[derive(Args, Debug)]
pub struct HeConvArgs {
    /// gazelle or gala, or a comma-separated list.
    #[arg(long, default_value = "gazelle,gala")]
    pub method: String,
    /// Input HxWxC.
    #[arg(long, default_value = "16x16x16")]
    pub input: String,
    /// Kernel KxKxM (M output channels).
    #[arg(long, default_value = "3x3x16")]
    pub kernel: String,
    /// BFV parameter set (n4096, n8192, ...). The default n8192 has room for 40-bit
    /// statistical flooding; n4096 does not, and needs --insecure-flood.
    #[arg(long, default_value = "n8192")]
    pub params: String,
    /// Re-randomisation of the response: statistical (require 2^-40, the default),
    /// best-effort (as much 40-bit flooding as fits) or off; the last two need
    /// --insecure-flood.
    #[arg(long, default_value = "statistical", value_parser = parse_flood)]
    pub flood: Flood,
    /// Allow a flooding mode or parameter set below 40 statistical bits (measurements only:
    /// such responses may leak the weights).
    #[arg(long = "insecure-flood")]
    pub insecure_flood: bool,
    /// Kernel repetitions (fastest reported).
    #[arg(long, default_value_t = 3)]
    pub reps: usize,
}

pub fn run_ops(a: HeOpsArgs, out: &mut Reporter) -> Result<(), Error> {
    for name in a.params.split(',') {
        let p = Params::by_name(name.trim())?;
        for o in secinfer_he::bench::he_ops(&p, a.iters)? {
            out.emit(
                BenchRecord::local("he-ops", o.micros * 1e-6)
                    .param("params", name.trim())
                    .param("n", p.n())
                    .param("log2_q", (p.log2_q() * 10.0).round() / 10.0)
                    .param("threads", threads())
                    .field("op", o.op)
                    .field("micros", (o.micros * 100.0).round() / 100.0)
                    .field("cpu_micros", (o.cpu_micros * 100.0).round() / 100.0),
            );
        }
    }
    Ok(())
}

fn record(bench: &str, method: &str, p: &Params, r: &KernelReport, threads: usize) -> BenchRecord {
    let online = r.client_encrypt_s + r.server_kernel_s + r.server_finish_s + r.client_decrypt_s;
    let mut rec = BenchRecord::local(bench, online + r.server_setup_s)
        .param("method", method)
        .param("params", p.set().name.clone())
        .param("n", p.n())
        .param("threads", threads)
        .field("perm", r.counts.perm)
        .field("hst_perm", r.counts.hst_perm)
        .field("dec_perm", r.counts.dec_perm)
        .field("sc_mult", r.counts.sc_mult)
        .field("add", r.counts.add)
        .field("server_kernel_s", r.server_kernel_s)
        .field(
            "server_kernel_cpu_s",
            if r.server_kernel_cpu_s.is_finite() {
                json!(r.server_kernel_cpu_s)
            } else {
                json!(null)
            },
        )
        .field("server_finish_s", r.server_finish_s)
        .field("client_encrypt_s", r.client_encrypt_s)
        .field("client_decrypt_s", r.client_decrypt_s)
        .field("input_cts", r.input_cts)
        .field("output_cts", r.output_cts)
        .field("bytes_up", r.bytes_up)
        .field("bytes_down", r.bytes_down)
        .field(
            "noise_budget_bits",
            (r.noise_budget_bits * 10.0).round() / 10.0,
        )
        .field("flood_stat_bits", (r.flood_stat_bits * 10.0).round() / 10.0)
        .field("security_margin", margin_text(r.flood_stat_bits))
        .field("correct", r.correct);
    rec.phases.insert(
        "setup".into(),
        json!({"time_s": r.server_setup_s, "bytes": r.bytes_keys}),
    );
    rec.phases
        .insert("offline".into(), json!({"time_s": 0.0, "bytes": 0}));
    rec.phases.insert(
        "online".into(),
        json!({"time_s": online, "bytes": r.bytes_up + r.bytes_down}),
    );
    rec.bytes_total = (r.bytes_keys + r.bytes_up + r.bytes_down) as u64;
    rec.rounds = 1;
    rec
}

pub fn run_matvec(a: HeMatvecArgs, out: &mut Reporter) -> Result<(), Error> {
    check_flood(a.flood, a.insecure_flood)?;
    let p = Params::by_name(&a.params)?;
    let mut gazelle_kernel = None;
    let mut gazelle_cpu = None;
    let mut gazelle_total = None;
    for m in a.method.split(',') {
        let method: MatVecMethod = m.trim().parse()?;
        let r = secinfer_he::bench::he_matvec(&p, method, a.rows, a.cols, a.flood, a.reps)?;
        if !r.correct {
            return Err(Error::msg(format!("{m}: shares do not sum to W·x")));
        }
        check_reached(r.flood_stat_bits, a.insecure_flood)?;
        let mut rec = record("he-matvec", m.trim(), &p, &r, threads())
            .param("rows", a.rows)
            .param("cols", a.cols);
        let total = r.server_kernel_s + r.server_finish_s;
        match method {
            MatVecMethod::Gazelle => {
                gazelle_kernel = Some(r.server_kernel_s);
                gazelle_cpu = Some(r.server_kernel_cpu_s);
                gazelle_total = Some(total);
            }
            MatVecMethod::Gala => {
                if let (Some(gk), Some(gt), Some(gc)) = (gazelle_kernel, gazelle_total, gazelle_cpu)
                {
                    rec = rec
                        .field(
                            "speedup_kernel_vs_gazelle",
                            (gk / r.server_kernel_s * 10.0).round() / 10.0,
                        )
                        .field(
                            "speedup_kernel_cpu_vs_gazelle",
                            cpu_ratio(gc, r.server_kernel_cpu_s),
                        )
                        .field(
                            "speedup_server_vs_gazelle",
                            (gt / total * 10.0).round() / 10.0,
                        );
                }
            }
            MatVecMethod::Naive => {}
        }
        out.emit(rec);
    }
    Ok(())
}

fn cpu_ratio(a: f64, b: f64) -> serde_json::Value {
    if a.is_finite() && b.is_finite() && b > 0.0 {
        json!((a / b * 10.0).round() / 10.0)
    } else {
        json!(null)
    }
}

fn dims(s: &str, what: &str) -> Result<Vec<usize>, Error> {
    let v: Result<Vec<usize>, _> = s.split('x').map(|d| d.trim().parse::<usize>()).collect();
    match v {
        Ok(v) if v.len() == 3 => Ok(v),
        _ => Err(Error::msg(format!("{what} must look like AxBxC, got {s}"))),
    }
}

pub fn run_conv(a: HeConvArgs, out: &mut Reporter) -> Result<(), Error> {
    check_flood(a.flood, a.insecure_flood)?;
    let p = Params::by_name(&a.params)?;
    let i = dims(&a.input, "--input")?;
    let k = dims(&a.kernel, "--kernel")?;
    if k[0] != k[1] {
        return Err(Error::msg("kernels must be square"));
    }
    let mut gazelle_kernel = None;
    let mut gazelle_cpu = None;
    for m in a.method.split(',') {
        let method: ConvMethod = m.trim().parse()?;
        let r = secinfer_he::bench::he_conv(
            &p,
            method,
            (i[0], i[1], i[2]),
            (k[0], k[2]),
            a.flood,
            a.reps,
        )?;
        if !r.correct {
            return Err(Error::msg(format!(
                "{m}: shares do not sum to the convolution"
            )));
        }
        check_reached(r.flood_stat_bits, a.insecure_flood)?;
        let mut rec = record("he-conv", m.trim(), &p, &r, threads())
            .param("input", a.input.clone())
            .param("kernel", a.kernel.clone());
        match method {
            ConvMethod::Gazelle => {
                gazelle_kernel = Some(r.server_kernel_s);
                gazelle_cpu = Some(r.server_kernel_cpu_s);
            }
            ConvMethod::Gala => {
                if let (Some(gk), Some(gc)) = (gazelle_kernel, gazelle_cpu) {
                    rec = rec
                        .field(
                            "speedup_kernel_vs_gazelle",
                            (gk / r.server_kernel_s * 10.0).round() / 10.0,
                        )
                        .field(
                            "speedup_kernel_cpu_vs_gazelle",
                            cpu_ratio(gc, r.server_kernel_cpu_s),
                        );
                }
            }
        }
        out.emit(rec);
    }
    Ok(())
}
