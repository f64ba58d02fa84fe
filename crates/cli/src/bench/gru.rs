//! `secinfer bench gru`: the secure GRU (CryptoGRU Table 3) on a random model of the given sizes.
//! The client evaluates, the server garbles; both models come from a public seed so the two
//! processes of `--net tcp` regenerate them. After metering, the client's class is checked
//! against the plaintext reference with the circuit's activations.
use crate::error::Error;
use crate::pair::{run_pair, NetArgs};
use crate::report::{BenchRecord, Reporter};
use clap::Args;
use secinfer_nn::layers::gru::{
    random_model, ClientModel, ClientOptions, OtFiller, Scheme, ServerModel, ServerPolicy, Variant,
    DEFAULT_GARBLING,
};
use secinfer_nn::runtime::{ClientInput, ClientSession, RunOptions, ServerSession};
use secinfer_nn::{argmax, CircuitActivations, Reference};

#[derive(Args, Debug)]
pub struct GruArgs {
    /// Input (embedding) size E.
    #[arg(long, default_value_t = 100)]
    pub input: usize,
    /// Hidden size H.
    #[arg(long, default_value_t = 64)]
    pub hidden: usize,
    /// Time steps T.
    #[arg(long, default_value_t = 30)]
    pub steps: usize,
    /// Classes of the final dense layer.
    #[arg(long, default_value_t = 2)]
    pub classes: usize,
    /// baseline (tanh, 20-bit), cg1 (ReLU, 20-bit), cg2 (ReLU, 8-bit activations),
    /// cg2-tanh (tanh, 8-bit activations; not a CryptoGRU variant).
    #[arg(long, default_value = "cg2")]
    pub variant: Variant,
    /// What fills the sessions' OT pools: softspoken-k<K> (SoftSpokenOT, 16/K bytes per COT for
    /// more CPU, K in 1..=8; the default K 5 costs IKNP's time here, and is `bench ot --k`'s
    /// and `infer --ot`'s default too), iknp (16 bytes per COT) or ferret (silent OT: ≈ 1.5 MB
    /// once, then nearly free, but each 10^7-COT iteration takes ≈ 1.3 s on two cores).
    #[arg(long, default_value = "softspoken-k5")]
    pub ot: OtFiller,
    /// How AND gates are garbled: half-gates (32 B per AND gate) or three-halves (Rosulek–Roy,
    /// 24.625 B per AND gate, ≈ 1.5× the garbling hashes). Default: the session's default.
    #[arg(long, value_parser = parse_scheme)]
    pub garbling: Option<Scheme>,
    /// Where the gates r and z are computed: tables (OT lookup tables for 8-bit sigmoids, cg2)
    /// with per-step carry leaves, or circuit (garbled: four flights per step fewer, more bytes).
    #[arg(long, value_enum, default_value = "tables")]
    pub gates: crate::model_cmd::Gates,
    /// Seed of the random model and tokens.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    #[command(flatten)]
    pub net: NetArgs,
}

fn parse_scheme(s: &str) -> Result<Scheme, String> {
    Scheme::parse(s).map_err(|e| e.to_string())
}

pub fn run(a: GruArgs, out: &mut Reporter) -> Result<(), Error> {
    let garbling = a.garbling.unwrap_or(DEFAULT_GARBLING);
    if a.input == 0
        || a.hidden == 0
        || a.steps == 0
        || a.classes < 2
        || a.input > 4096
        || a.hidden > 4096
        || a.steps > 4096
    {
        return Err(Error::msg(
            "sizes must be positive (classes ≥ 2) and at most 4096",
        ));
    }
    let (q, embed) = random_model(a.input, a.hidden, a.classes, a.steps, a.variant, a.seed)?;
    let tokens: Vec<u32> = (0..a.steps as u64)
        .map(|i| ((i * 2654435761 + a.seed * 97) % 64) as u32)
        .collect();
    let client = ClientSession::from_gru(ClientModel::new(
        q.config.clone(),
        &embed,
        a.variant,
        a.steps,
    )?);
    let mut reference = Reference::new(&q, CircuitActivations::default());
    let want = argmax(&reference.classify(&tokens));
    let server = ServerSession::from_gru(ServerModel::new(q, a.variant, a.steps)?);
    let toks = tokens.clone();
    let run = RunOptions {
        protocol: ClientOptions {
            gates_in_circuit: a.gates == crate::model_cmd::Gates::Circuit,
            ..ClientOptions::default()
        },
        ot: a.ot,
        garbling,
        ..RunOptions::default()
    };
    let r = run_pair(
        &a.net,
        move |ch| Ok(client.run(ch, ClientInput::Tokens(&toks), &run, &mut |_, _, _| {})?),
        move |ch| {
            let rep = server.run(ch, ServerPolicy { allow_logits: true })?;
            Ok(rep.flood_stat_bits)
        },
    )?;
    if r.client.class != want {
        return Err(Error::msg(format!(
            "bench gru: secure class {} differs from the reference's {want}",
            r.client.class
        )));
    }
    let rep = &r.client.report;
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let rec = BenchRecord::from_costs("gru", r.wall_s, &r.client_cost, &r.server_cost)
        .param("input", a.input)
        .param("hidden", a.hidden)
        .param("steps", a.steps)
        .param("classes", a.classes)
        .param("variant", a.variant.name())
        .param("bits", if a.variant.eight_bit() { 8 } else { 20 })
        .param("net", a.net.net_name())
        .param("profile", a.net.profile.name)
        .param("ot", a.ot.name())
        .param("garbling", garbling.name())
        .param("gates", if rep.gate_tables { "tables" } else { "circuit" })
        .param("threads", threads);
    out.emit(
        rec.field("gc_bytes", rep.gc_bytes)
            .field("he_bytes", rep.he_bytes)
            .field("mux_bytes", rep.mux_bytes)
            .field("and_gates", rep.and_gates)
            .field("and_per_element_step", rep.and_per_element_step)
            .field("flood_stat_bits", (r.server * 10.0).floor() / 10.0)
            .field("class", r.client.class),
    );
    Ok(())
}
