//! `secinfer inspect` and `secinfer infer --plaintext`: the model directory and its fixed-point
//! reference from the command line.
use crate::error::Error;
use clap::Args;
use secinfer_net::{ClientConfig, PeerKey};
use secinfer_nn::layers::gru::{
    fp_for_variant, top_k, ClientOptions, OtFiller, Scheme, SessionReport, Variant,
    DEFAULT_GARBLING,
};
use secinfer_nn::plan::{Family, Plan, PlanOptions};
use secinfer_nn::runtime::{Client, ServerOptions};
use secinfer_nn::{
    argmax, check_tokens, CircuitActivations, GraphReference, Model, ModelConfig, QuantizedGraph,
    QuantizedModel, Reference, Task, Vocab,
};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Args, Debug)]
pub struct InspectArgs {
    /// Model directory (model.json, weights.safetensors, vocab.json).
    pub model: PathBuf,
    /// Also print the plan: which protocol family and protocol compute each layer, and why.
    #[arg(long)]
    pub plan: bool,
}

/// The weights of every layer, from the graph's tensor shapes.
fn parameter_count(c: &ModelConfig) -> usize {
    c.graph
        .tensors()
        .iter()
        .map(|(_, s)| s.iter().product::<usize>())
        .sum()
}

pub fn inspect(a: InspectArgs) -> Result<(), Error> {
    #[cfg(feature = "tfhe")]
    if secinfer_nn::runtime::she::is_she_model(&a.model) {
        return crate::she_cmd::inspect(&a.model, a.plan);
    }
    let m = Model::load(&a.model)?;
    let c = &m.config;
    println!(
        "model      {} (format version {})",
        a.model.display(),
        c.version
    );
    println!("task       {:?}", c.task);
    println!("layers     (name, type, output shape)");
    for l in &c.graph.layers {
        let public = if matches!(l.kind, secinfer_nn::LayerKind::Embedding { .. }) {
            "   (public: applied by the client)"
        } else {
            ""
        };
        println!(
            "  {:<12} {:<10} {}{public}",
            l.name,
            l.kind.type_name(),
            l.output
        );
    }
    println!("parameters {}", parameter_count(c));
    let show = |name: &str, fp: &secinfer_nn::FixedPointConfig| {
        let s = fp.sigmoid_format();
        let g = fp.candidate_format();
        println!(
            "  {name:<10} main ({}, {})  sigmoid ({}, {}) → ({}, {})  candidate ({}, {}) → ({}, {})",
            fp.main.bits, fp.main.scale, s.input.bits, s.input.scale, s.output.bits, s.output.scale,
            g.input.bits, g.input.scale, g.output.bits, g.output.scale
        );
    };
    println!("fixed point (bits, frac_bits)");
    if c.gru().is_ok() {
        show("default", &c.fixed_point);
        for (n, fp) in &c.variants {
            show(n, fp);
        }
    } else {
        for (n, fp) in std::iter::once(("default", &c.fixed_point))
            .chain(c.variants.iter().map(|(n, f)| (n.as_str(), f)))
        {
            println!("  {n:<10} main ({}, {})", fp.main.bits, fp.main.scale);
        }
    }
    if let Some(v) = &c.vocab {
        println!(
            "input      {} tokens (words-v1, padding {:?}, truncation {:?})",
            v.max_len, v.padding, v.truncation
        );
    }
    if !c.labels.is_empty() {
        println!("labels     {}", c.labels.join(", "));
    }
    if a.plan {
        println!("plan       (layers, family, protocol, why)");
        for line in Plan::new(c, PlanOptions::default()).describe(c) {
            println!("  {line}");
        }
    }
    Ok(())
}

#[derive(Args, Debug)]
pub struct InferArgs {
    /// Evaluate the plaintext fixed-point reference locally (needs the full model directory).
    #[arg(long)]
    pub plaintext: bool,
    /// Full model directory (for --plaintext, or to print the plaintext reference beside the
    /// secure result with --compare-plaintext).
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// Secure inference against `secinfer serve` at HOST:PORT.
    #[arg(long)]
    pub server: Option<String>,
    /// The model's public information (written by `secinfer export-info`, or a full model
    /// directory whose secret weights are not read).
    #[arg(long)]
    pub model_info: Option<PathBuf>,
    /// Text to classify.
    #[arg(long, conflicts_with_all = ["tokens", "samples"])]
    pub text: Option<String>,
    /// File of whitespace-separated token ids.
    #[arg(long, conflicts_with = "samples")]
    pub tokens: Option<PathBuf>,
    /// JSON-lines file of {"text": ..., "label": ...} samples: classifies each.
    #[arg(long)]
    pub samples: Option<PathBuf>,
    /// Classify at most this many samples of --samples [default: all].
    #[arg(long)]
    pub limit: Option<usize>,
    /// A PNG image for a model that reads numbers (e.g. a 28×28 grayscale MNIST digit): each
    /// pixel v (colour read as luminance) becomes v / 256, the scaling of the shipped samples.
    #[arg(long, conflicts_with_all = ["text", "tokens", "samples"])]
    pub image: Option<PathBuf>,
    /// A `fixed_point_variants` entry (e.g. fx20, fx8) for --plaintext; without it --plaintext
    /// uses the formats of --variant, so it prints what the secure run with that variant computes.
    #[arg(long)]
    pub fixed_point: Option<String>,
    /// CryptoGRU variant: baseline, cg1, cg2, or cg2-tanh (tanh on CG-2's 8-bit activations);
    /// must match the server's; --plaintext uses its formats too.
    #[arg(long, default_value = "cg2")]
    pub variant: Variant,
    /// Image networks (family hegc): truncation, ReLU and max-pooling by OT (ot) or garbled
    /// circuits (gc), as the server runs them.
    #[arg(long, default_value = "ot")]
    pub nonlinear: secinfer_nn::layers::hegc::Nonlinear,
    /// Ask the server's circuit to reveal the logits to this client (default: only the class).
    #[arg(long)]
    pub reveal_logits: bool,
    /// Language model: print the predicted next words after the text (--text or --samples;
    /// the last `vocab.max_len` words are the context), most likely first.
    #[arg(long)]
    pub next_word: bool,
    /// How many of the largest logits' indices the secure run reveals (the next-word
    /// candidates of a language model), largest first; 1 is the argmax alone.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=16))]
    pub top_k: u16,
    /// Language model: the secure perplexity per word of the text (--text: every word after
    /// the first, each predicted from the words before it, at most `vocab.max_len` of them;
    /// --samples: each sample's label after its text). One session per word; the client learns
    /// only log2 p of each word (the server must allow logits: `serve --allow-logits`).
    #[arg(long, conflicts_with_all = ["next_word", "reveal_logits", "tokens"])]
    pub perplexity: bool,
    /// With --server: also evaluate the plaintext fixed-point reference from --model and print
    /// it beside the secure prediction.
    #[arg(long)]
    pub compare_plaintext: bool,
    /// What fills the session's OT pools (the server follows the client): softspoken-k<K>
    /// (SoftSpokenOT, 16/K bytes per COT, K in 1..=8), iknp (16 bytes per COT) or ferret
    /// (silent OT). A cost trade-off only: all are semi-honest secure.
    #[arg(long, default_value = "softspoken-k5")]
    pub ot: OtFiller,
    /// How the server garbles AND gates (the server follows the client): half-gates (32 bytes
    /// per AND gate) or three-halves (Rosulek–Roy, 24.625 bytes per AND gate, ≈ 1.5× the
    /// garbling CPU). Default: three-halves.
    #[arg(long, value_parser = parse_scheme)]
    pub garbling: Option<Scheme>,
    /// Where the gates r and z are computed (the server follows the client): tables (OT lookup
    /// tables where the sigmoid's input has at most 8 bits, i.e. cg2: fewer bytes) or circuit
    /// (inside the garbled circuit, with the hidden projections' carries: four flights per step
    /// fewer, better on long round trips).
    #[arg(long, value_enum, default_value = "tables")]
    pub gates: Gates,
    /// Idle deadline: seconds to wait for the next byte from the server.
    #[arg(long, default_value_t = 300)]
    pub peer_timeout: u64,
    /// Seconds to wait in the server's queue before giving up.
    #[arg(long, default_value_t = 300)]
    pub queue_wait: u64,
    /// Talk to a server started with `serve --insecure-plaintext` (benchmarks only: no
    /// encryption, no server authentication).
    #[arg(long)]
    pub insecure_plaintext: bool,
    /// Protocol family; must match the server's. `choco` (CHOCO client-aided HE, images and
    /// vectors via --samples): THIS CLIENT SEES EVERY INTERMEDIATE ACTIVATION (each linear
    /// layer's accumulator and every later layer's output), the weights stay hidden. Default:
    /// the plan's (the secure GRU).
    #[arg(long)]
    pub family: Option<secinfer_nn::plan::Family>,
    /// With --family choco: threads for this client's work (1 models a small device).
    #[arg(long)]
    pub client_threads: Option<usize>,
    /// Family ss (FastGRNN models): the sigmoid/tanh protocol, opaf or sirnn (the server
    /// follows the client).
    #[arg(long, default_value = "opaf")]
    pub math: String,
    /// Family ss: the matrix products, `he` (Cheetah's coefficient-encoded HE on random masks
    /// offline, one masked message per product online) or `ot` (SIRNN's OT products, all
    /// online; more bytes, no HE keys). The server follows the client.
    #[arg(long, value_parser = ["he", "ot"], default_value = "he")]
    pub products: String,
}

/// Where the GRU's gates r and z are computed (`--gates`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Gates {
    Tables,
    Circuit,
}

fn parse_scheme(s: &str) -> Result<Scheme, String> {
    Scheme::parse(s).map_err(|e| e.to_string())
}

struct Input {
    name: String,
    tokens: Vec<u32>,
    label: Option<String>,
}

fn inputs(a: &InferArgs, vocab: Option<&Vocab>, n_vocab: usize) -> Result<Vec<Input>, Error> {
    let need_vocab =
        || vocab.ok_or_else(|| Error::msg("the model has no vocabulary; pass --tokens"));
    let out = match (&a.text, &a.tokens, &a.samples) {
        (Some(t), _, _) => vec![Input {
            name: "text".into(),
            tokens: need_vocab()?.encode(t),
            label: None,
        }],
        (None, Some(f), _) => vec![Input {
            name: f.display().to_string(),
            tokens: std::fs::read_to_string(f)?
                .split_whitespace()
                .map(|s| {
                    s.parse::<u32>().map_err(|_| {
                        Error::msg(format!("{}: {s:?} is not a token id", f.display()))
                    })
                })
                .collect::<Result<_, _>>()?,
            label: None,
        }],
        (None, None, Some(f)) => {
            let v = need_vocab()?;
            let mut out = Vec::new();
            for (what, name, j) in sample_lines(f, a.limit)? {
                let text = j["text"]
                    .as_str()
                    .ok_or_else(|| Error::msg(format!("{what} has no \"text\"")))?;
                out.push(Input {
                    name,
                    tokens: v.encode(text),
                    label: j["label"].as_str().map(String::from),
                });
            }
            out
        }
        (None, None, None) => return Err(Error::msg("pass --text, --tokens or --samples")),
    };
    for i in &out {
        check_tokens(&i.tokens, n_vocab)?;
    }
    Ok(out)
}

/// A language model's predicted words, most likely first.
fn words(vocab: Option<&Vocab>, ids: &[usize]) -> String {
    ids.iter()
        .map(|&i| {
            vocab
                .and_then(|v| v.token(i))
                .map_or_else(|| format!("#{i}"), String::from)
        })
        .collect::<Vec<_>>()
        .join(" | ")
}

/// The name of class `k` ("class k" when the model names none).
pub(crate) fn label(labels: &[String], k: usize) -> String {
    labels
        .get(k)
        .cloned()
        .unwrap_or_else(|| format!("class {k}"))
}

/// The plaintext fixed-point reference of `--model` for `--compare-plaintext` (`None`
/// without it), in the model's main format.
pub(crate) fn reference_graph(a: &InferArgs) -> Result<Option<QuantizedGraph>, Error> {
    match (a.compare_plaintext, &a.model) {
        (false, _) => Ok(None),
        (true, Some(dir)) => {
            let m = Model::load(dir)?;
            Ok(Some(QuantizedGraph::new(&m, m.config.fixed_point)?))
        }
        (true, None) => Err(Error::msg(
            "--compare-plaintext needs --model (the full model directory)",
        )),
    }
}

/// The channel the client requires: `pinned`, the server key from the model info, or plaintext
/// if asked; deadlines from the flags. Every family's client connects through it.
pub(crate) fn client_channel(
    a: &InferArgs,
    pinned: Option<PeerKey>,
) -> Result<ClientConfig, Error> {
    let peer = if a.insecure_plaintext {
        PeerKey::InsecurePlaintext
    } else {
        pinned.ok_or_else(|| {
            Error::msg(
                "the model info has no server.pub: run `secinfer export-info` again (or pass \
                 --insecure-plaintext against an --insecure-plaintext server)",
            )
        })?
    };
    let mut cfg = ClientConfig::new(peer);
    cfg.tcp.read_timeout = Some(Duration::from_secs(a.peer_timeout.max(1)));
    cfg.tcp.write_timeout = Some(Duration::from_secs(a.peer_timeout.max(1)));
    cfg.queue_wait = Duration::from_secs(a.queue_wait.max(1));
    Ok(cfg)
}

pub fn infer(a: InferArgs) -> Result<(), Error> {
    if a.plaintext {
        return infer_plaintext(&a);
    }
    let server = a.server.as_deref().ok_or_else(|| {
        Error::msg("pass --server HOST:PORT (or --plaintext for the local reference)")
    })?;
    let info_dir = a
        .model_info
        .as_ref()
        .or(a.model.as_ref())
        .ok_or_else(|| Error::msg("pass --model-info DIR (see secinfer export-info)"))?;
    let opts = ServerOptions {
        variant: a.variant,
        plan: PlanOptions { family: a.family },
        nonlinear: a.nonlinear,
        ..ServerOptions::default()
    };
    let mut client = Client::load_with(info_dir, &opts)?;
    let net = client_channel(&a, client.net().map(|c| c.peer))?;
    match client.session().family() {
        Family::Choco => {
            client.set_net(net);
            return crate::choco_cmd::infer(&a, &client, server);
        }
        Family::Ss => {
            client.set_net(net);
            return crate::ss_cmd::infer(&a, &client, server);
        }
        #[cfg(feature = "tfhe")]
        Family::Tfhe => {
            // The server evaluates without a word for as long as a sample takes.
            let mut net = net;
            net.tcp.session_timeout = None;
            client.set_net(net);
            return crate::she_cmd::infer(&a, &client, server);
        }
        _ => client.set_net(net),
    }
    if client.model().is_err() {
        return infer_graph_secure(&a, &client, server);
    }
    if a.perplexity {
        return crate::perplexity::run(&a, &client, server);
    }
    let cm = client.model()?;
    let ins = inputs(&a, client.vocab(), cm.arch.vocab)?;
    let reference = if a.compare_plaintext {
        let dir = a.model.as_ref().ok_or_else(|| {
            Error::msg("--compare-plaintext needs --model (the full model directory)")
        })?;
        let m = Model::load(dir)?;
        Some(QuantizedModel::new(&m, cm.fp)?)
    } else {
        None
    };
    let labels = &cm.config.labels;
    let mut rows = Vec::new();
    for inp in &ins {
        let mut bars = Progress::new();
        let out = client.infer_with(
            server,
            &inp.tokens,
            ClientOptions {
                reveal_logits: a.reveal_logits,
                gates_in_circuit: a.gates == Gates::Circuit,
                top_k: usize::from(a.top_k),
                log_prob_of: None,
            },
            a.ot,
            a.garbling.unwrap_or(DEFAULT_GARBLING),
            &mut |s, d, t| bars.update(s, d, t),
        );
        bars.finish();
        let out = out?;
        let secure = if a.next_word {
            words(client.vocab(), &out.top)
        } else {
            label(labels, out.class)
        };
        let mut line = secure_line(&inp.name, &secure, &out, cm.fp.main.scale);
        if let Some(q) = &reference {
            let logits = Reference::new(q, CircuitActivations::default()).classify(&inp.tokens);
            let top = top_k(&logits, out.top.len().max(1));
            let shown = if a.next_word {
                words(client.vocab(), &top)
            } else {
                label(labels, top[0])
            };
            line += &format!("  plaintext fixed-point: {shown:<10}");
            line += if top == out.top {
                "  [match]"
            } else {
                "  [MISMATCH]"
            };
        }
        if let Some(l) = &inp.label {
            line += &format!("  true label: {l}");
        }
        println!("{line}");
        rows.push(out.report);
    }
    if let Some(rep) = rows.last() {
        print_report(rep, a.variant.name());
    }
    Ok(())
}

/// "NAME secure: CLASS [logits [...]]" for one secure result (logits scaled by 2^-frac).
fn secure_line(
    name: &str,
    secure: &str,
    out: &secinfer_nn::layers::gru::GruOutcome,
    frac: u32,
) -> String {
    let mut line = format!("{name:<10} secure: {secure:<10}");
    if let Some(l) = &out.logits {
        let sc = (1u64 << frac) as f64;
        line += &format!(
            " logits [{}]",
            l.iter()
                .map(|v| format!("{:.4}", *v as f64 / sc))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    line
}

/// `infer` against a served network that reads numbers (family `hegc`).
fn infer_graph_secure(a: &InferArgs, client: &Client, server: &str) -> Result<(), Error> {
    let config = client
        .session()
        .config()
        .ok_or_else(|| Error::msg("this model reads no numbers"))?;
    let main = config.fixed_point.main;
    let labels = &config.labels;
    // One session for every image: the client's keys go up once and serve them all.
    let inputs = graph_inputs(a)?;
    let xq: Vec<Vec<i64>> = inputs
        .iter()
        .map(|(_, x, _)| x.iter().map(|v| main.quantize(*v as f64)).collect())
        .collect();
    let refs: Vec<&[i64]> = xq.iter().map(|x| x.as_slice()).collect();
    let mut bars = Progress::new();
    let outs = client.infer_fixed_images(server, &refs, a.reveal_logits, &mut |s, d, t| {
        bars.update(s, d, t)
    });
    bars.finish();
    let outs = outs?;
    let reference = reference_graph(a)?;
    let (mut right, mut known, mut agree) = (0usize, 0usize, 0usize);
    let mut last = None;
    for (((name, _, truth), out), x) in inputs.iter().zip(outs).zip(&xq) {
        let mut line = secure_line(name, &label(labels, out.class), &out, main.scale);
        if let Some(l) = truth {
            line += &format!("  true label: {l}");
            known += 1;
            right += (*l == label(labels, out.class)) as usize;
        }
        if let Some(q) = &reference {
            let outs = GraphReference::new(q, CircuitActivations::default())
                .run(secinfer_nn::Input::Fixed(x))?;
            let want = outs[outs.len() - 1][0] as usize;
            agree += (want == out.class) as usize;
            line += &format!("  plaintext: {}", label(labels, want));
        }
        if last.is_none() {
            let s = out.report.cost.setup;
            println!(
                "session setup (once, keys and base OTs): {:.4} s, {} bytes, {} rounds",
                s.time_s,
                s.bytes(),
                s.rounds
            );
        }
        println!("{line}");
        last = Some(out.report);
    }
    if known > 0 {
        println!(
            "secure accuracy: {right}/{known} = {:.2} %",
            100.0 * right as f64 / known as f64
        );
    }
    if reference.is_some() {
        println!(
            "secure class = plaintext fixed-point reference's on {agree}/{}",
            inputs.len()
        );
    }
    if let Some(rep) = &last {
        println!("cost of the last image per step (client's view):");
        let w = rep
            .layers
            .iter()
            .map(|l| l.name.len())
            .max()
            .unwrap_or(0)
            .max(10);
        println!(
            "  {:<w$} {:<8} {:>10} {:>10} {:>10} {:>9} {:>7}",
            "layer", "kernel", "HE bytes", "GC bytes", "OT bytes", "time (s)", "rounds"
        );
        for l in &rep.layers {
            println!(
                "  {:<w$} {:<8} {:>10} {:>10} {:>10} {:>9.4} {:>7}",
                l.name, l.kernel, l.he_bytes, l.gc_bytes, l.ot_bytes, l.time_s, l.rounds
            );
        }
        let (off, on) = (rep.cost.offline, rep.cost.online);
        println!(
            "  per image: offline {:.4} s, {} bytes; online {:.4} s, {} bytes, {} rounds \
             ({} HE, {} GC bytes)",
            off.time_s,
            off.bytes(),
            on.time_s,
            on.bytes(),
            on.rounds,
            rep.he_bytes,
            rep.gc_bytes
        );
    }
    Ok(())
}

pub(crate) fn print_report(rep: &SessionReport, variant: &str) {
    let c = &rep.cost;
    let mb = |b: u64| b as f64 / 1e6;
    println!(
        "cost of the last session (client's view, variant {variant}, {} steps):",
        rep.steps
    );
    println!(
        "  {:<8} {:>9} {:>14} {:>14} {:>7}",
        "phase", "time (s)", "client→server", "server→client", "rounds"
    );
    for (n, p) in [
        ("setup", &c.setup),
        ("offline", &c.offline),
        ("online", &c.online),
    ] {
        println!(
            "  {:<8} {:>9.3} {:>11.2} MB {:>11.2} MB {:>7}",
            n,
            p.time_s,
            mb(p.bytes_sent),
            mb(p.bytes_received),
            p.rounds
        );
    }
    let t = c.total();
    println!(
        "  {:<8} {:>9.3} {:>11.2} MB {:>11.2} MB {:>7}",
        "total",
        t.time_s,
        mb(t.bytes_sent),
        mb(t.bytes_received),
        t.rounds
    );
    println!(
        "  GC bytes {:.2} MB ({} AND gates), HE bytes {:.2} MB",
        mb(rep.gc_bytes),
        rep.and_gates,
        mb(rep.he_bytes)
    );
}

/// Progress bars on stderr, only when stderr is a terminal.
struct Progress {
    on: bool,
    stage: String,
    bar: Option<indicatif::ProgressBar>,
}

impl Progress {
    fn new() -> Self {
        Progress {
            on: std::io::stderr().is_terminal(),
            stage: String::new(),
            bar: None,
        }
    }
    fn update(&mut self, stage: &str, done: u64, total: u64) {
        if !self.on {
            return;
        }
        if stage != self.stage {
            if let Some(b) = self.bar.take() {
                b.finish_and_clear();
            }
            let b = indicatif::ProgressBar::new(total);
            b.set_style(
                indicatif::ProgressStyle::with_template("{msg:>16} [{bar:30}] {pos}/{len}")
                    .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
            );
            b.set_message(stage.to_string());
            self.bar = Some(b);
            self.stage = stage.to_string();
        }
        if let Some(b) = &self.bar {
            b.set_position(done);
        }
    }
    fn finish(&mut self) {
        if let Some(b) = self.bar.take() {
            b.finish_and_clear();
        }
    }
}

fn infer_plaintext(a: &InferArgs) -> Result<(), Error> {
    let dir = a
        .model
        .as_ref()
        .ok_or_else(|| Error::msg("--plaintext needs --model (the full model directory)"))?;
    let m = Model::load(dir)?;
    if m.config.task != Task::Classification && !a.next_word {
        return Err(Error::msg(
            "--plaintext prints classifications; this is a language model (pass --next-word)",
        ));
    }
    if m.config.gru().is_err() {
        return infer_plaintext_graph(a, &m);
    }
    let ins = inputs(a, m.vocab.as_ref(), m.config.gru()?.vocab)?;
    // The variant's formats unless a named entry is asked for: then this prints what
    // `infer --server` with the same --variant computes, bit for bit.
    let fp = match &a.fixed_point {
        Some(name) => *m.config.fixed_point_named(Some(name))?,
        None => fp_for_variant(&m.config, a.variant)?,
    };
    let q = QuantizedModel::new(&m, fp)?;
    let scale = (1u64 << fp.main.scale) as f64;
    let formats = a
        .fixed_point
        .clone()
        .unwrap_or_else(|| format!("variant {}", a.variant.name()));
    println!("reference  plaintext fixed point, {formats}: what the secure run computes");
    for inp in &ins {
        let mut r = Reference::new(&q, CircuitActivations::default());
        let logits = r.classify(&inp.tokens);
        let k = argmax(&logits);
        if ins.len() > 1 {
            println!("{}", inp.name);
        }
        if a.next_word {
            let top = top_k(&logits, usize::from(a.top_k));
            println!("next word  {}", words(m.vocab.as_ref(), &top));
            continue;
        }
        println!("class      {} ({})", k, label(&m.config.labels, k));
        if let Some(l) = &inp.label {
            println!("true label {l}");
        }
        let shown: Vec<String> = logits
            .iter()
            .map(|l| format!("{:.4}", *l as f64 / scale))
            .collect();
        println!("logits     [{}]", shown.join(", "));
        println!(
            "overflows  {}   saturated activations {}",
            r.counters.overflows, r.counters.saturated_activations
        );
    }
    Ok(())
}

/// The JSON objects of a `--samples` file (non-empty lines, at most `limit`), each with the
/// place to name in errors ("FILE: line N") and its display name ("sample N").
pub(crate) fn sample_lines(
    f: &std::path::Path,
    limit: Option<usize>,
) -> Result<Vec<(String, String, serde_json::Value)>, Error> {
    std::fs::read_to_string(f)?
        .lines()
        .filter(|l| !l.trim().is_empty())
        .take(limit.unwrap_or(usize::MAX))
        .enumerate()
        .map(|(i, line)| {
            let what = format!("{}: line {}", f.display(), i + 1);
            let j = serde_json::from_str(line).map_err(|e| Error::msg(format!("{what}: {e}")))?;
            Ok((what, format!("sample {}", i + 1), j))
        })
        .collect()
}

/// One numeric input: its name, its values and its true label if known.
type GraphInput = (String, Vec<f32>, Option<String>);

/// Fixed-point inputs of a model with `dtype: fixed` input: `--samples` lines
/// `{"input": [floats], "label": ...}` or `--tokens FILE` of whitespace-separated floats.
pub(crate) fn graph_inputs(a: &InferArgs) -> Result<Vec<GraphInput>, Error> {
    let floats = |text: &str, what: &str| -> Result<Vec<f32>, Error> {
        text.split_whitespace()
            .map(|s| {
                s.parse::<f32>()
                    .ok()
                    .filter(|v| v.is_finite())
                    .ok_or_else(|| Error::msg(format!("{what}: {s:?} is not a finite number")))
            })
            .collect()
    };
    if let Some(f) = &a.image {
        return Ok(vec![(f.display().to_string(), read_png(f)?, None)]);
    }
    match (&a.samples, &a.tokens) {
        (Some(f), _) => {
            let mut out = Vec::new();
            for (what, name, j) in sample_lines(f, a.limit)? {
                let x = j["input"]
                    .as_array()
                    .ok_or_else(|| Error::msg(format!("{what} has no \"input\" array")))?
                    .iter()
                    .map(|v| {
                        v.as_f64()
                            .filter(|v| v.is_finite())
                            .map(|v| v as f32)
                            .ok_or_else(|| Error::msg(format!("{what}: a non-number in input")))
                    })
                    .collect::<Result<Vec<f32>, Error>>()?;
                let label = j["label"].as_str().map(String::from);
                out.push((name, x, label));
            }
            Ok(out)
        }
        (None, Some(f)) => Ok(vec![(
            f.display().to_string(),
            floats(&std::fs::read_to_string(f)?, &f.display().to_string())?,
            None,
        )]),
        (None, None) => Err(Error::msg(
            "this model reads numbers: pass --samples FILE.jsonl ({\"input\": [...]} lines) \
             or --tokens FILE (whitespace-separated numbers)",
        )),
    }
}

/// Largest PNG decoded: a file from disk is hostile, so its declared size is bounded before
/// any pixel buffer exists.
const MAX_PNG_BYTES: usize = 64 << 20;

/// The pixels of a PNG file as floats v / 256, colour read as luminance (ITU-R BT.601).
fn read_png(path: &std::path::Path) -> Result<Vec<f32>, Error> {
    let what = path.display().to_string();
    let bad = |e: png::DecodingError| Error::msg(format!("{what}: not a readable PNG: {e}"));
    let mut dec = png::Decoder::new_with_limits(
        std::io::BufReader::new(std::fs::File::open(path)?),
        png::Limits {
            bytes: MAX_PNG_BYTES,
        },
    );
    dec.set_transformations(png::Transformations::EXPAND | png::Transformations::STRIP_16);
    let mut reader = dec.read_info().map_err(bad)?;
    let mut buf = vec![0u8; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).map_err(bad)?;
    let px = &buf[..info.buffer_size()];
    let ch = info.color_type.samples();
    Ok(px
        .chunks_exact(ch)
        .map(|p| {
            let v = match p.len() {
                1 | 2 => p[0] as f32,
                _ => 0.299 * p[0] as f32 + 0.587 * p[1] as f32 + 0.114 * p[2] as f32,
            };
            v / 256.0
        })
        .collect())
}

/// `infer --plaintext` for a model graph (format version 2): the reference's class per input.
fn infer_plaintext_graph(a: &InferArgs, m: &Model) -> Result<(), Error> {
    let fp = *m.config.fixed_point_named(a.fixed_point.as_deref())?;
    let q = QuantizedGraph::new(m, fp)?;
    let ends_in_argmax = m.config.graph.ends_in_argmax();
    let (mut right, mut known) = (0usize, 0usize);
    let ins = graph_inputs(a)?;
    println!(
        "reference  plaintext fixed point, main ({}, {}): what the secure run computes",
        fp.main.bits, fp.main.scale
    );
    for (name, x, truth) in &ins {
        let mut r = GraphReference::new(&q, CircuitActivations::default());
        let xq = q.quantize_input(x);
        let outs = r.run(secinfer_nn::Input::Fixed(&xq))?;
        let (k, logits) = if ends_in_argmax {
            (outs[outs.len() - 1][0] as usize, &outs[outs.len() - 2])
        } else {
            let l = &outs[outs.len() - 1];
            (argmax(l), l)
        };
        let scale = (1u64 << fp.main.scale) as f64;
        let shown: Vec<String> = logits
            .iter()
            .map(|l| format!("{:.3}", *l as f64 / scale))
            .collect();
        let t = truth
            .as_ref()
            .map(|l| format!("   true label: {l}"))
            .unwrap_or_default();
        println!("{name:<10} class {} ({}){t}", k, label(&m.config.labels, k));
        if ins.len() == 1 {
            println!("logits     [{}]", shown.join(", "));
        }
        if let Some(l) = truth {
            known += 1;
            right += (label(&m.config.labels, k) == *l) as usize;
        }
    }
    if known > 1 {
        println!("accuracy   {right}/{known} of the labelled inputs");
    }
    Ok(())
}
