//! `serve` and `infer` for family ss (OPAF's FastGRNN on additive shares over Z_{2^l}): chosen
//! by `--family ss` or by a model whose graph holds a fastgrnn layer. One TCP session per input,
//! on the Noise channel under the model's key unless `--insecure-plaintext`. The client picks
//! the sigmoid/tanh math (`--math opaf|sirnn`) and the OT filler (`--ot`); it learns the class,
//! and the logits only when it asks (`--reveal-logits`) and the server allows
//! (`--allow-logits`); the server learns nothing of the input.
use crate::error::Error;
use crate::model_cmd::{graph_inputs, InferArgs};
use crate::serve::ServeArgs;
use secinfer_net::{
    connect_session, serve_sessions, ClientConfig, Cost, PeerKey, ServeConfig, ServerStats,
    TcpChannel,
};
use secinfer_nn::info::ModelInfo;
use secinfer_nn::layers::gru::OtFiller;
use secinfer_nn::layers::ss::{
    client_session, server_session, shape_of, FastGrnnRun, FastGrnnShape, Impl, SsRequest, SsServer,
};
use secinfer_nn::{CircuitActivations, GraphReference, Model, ModelConfig, QuantizedGraph};
use secinfer_ss::{CotSource, FerretParams};
use std::io::Write;
use std::net::TcpListener;
use std::path::Path;

/// Whether the model directory's graph is one family ss serves (holds a fastgrnn layer).
pub fn is_ss_model(dir: &Path) -> bool {
    std::fs::read_to_string(dir.join("model.json"))
        .ok()
        .and_then(|t| ModelConfig::parse(&t).ok())
        .is_some_and(|c| secinfer_nn::layers::ss::is_fastgrnn_graph(&c))
}

fn shape_line(s: &FastGrnnShape) -> String {
    format!(
        "fastgrnn {} steps × {} → {} → dense {}, main format ({}, {})",
        s.steps, s.input, s.hidden, s.classes, s.head.bits, s.head.scale
    )
}

fn mb(c: &Cost) -> f64 {
    [&c.setup, &c.offline, &c.online]
        .iter()
        .map(|p| p.bytes_sent + p.bytes_received)
        .sum::<u64>() as f64
        / 1e6
}

/// `serve` of a FastGRNN model in family ss on `listener` under `cfg`.
pub fn serve(
    a: &ServeArgs,
    listener: &TcpListener,
    cfg: &ServeConfig,
    stats: &ServerStats,
) -> Result<(), Error> {
    let m = Model::load(&a.model)?;
    let server = SsServer::new(&m, a.allow_logits)?;
    println!(
        "listening on {} (model {}, family ss, {})",
        listener.local_addr()?,
        a.model.display(),
        shape_line(server.shape())
    );
    eprintln!(
        "family ss (OPAF: additive shares, OT products, OPAF or SIRNN sigmoid/tanh as the client \
         asks): the client learns the class{}; max sessions {}",
        if a.allow_logits {
            ", and the logits if it asks"
        } else {
            " only (logits refused)"
        },
        cfg.max_sessions
    );
    std::io::stdout().flush()?;
    let sessions = crate::serve::LoggedSessions(|ch: &mut TcpChannel| {
        let s = server_session(ch, &server)?;
        Ok(format!(
            "math {}, {:.3} s, {:.2} MB, revealed {}",
            s.request.math.name(),
            s.run.setup_s + s.run.offline_s + s.run.online_s,
            mb(&s.run.cost),
            if s.request.logits {
                "class and logits"
            } else {
                "class"
            }
        ))
    });
    serve_sessions(listener, cfg, stats, &sessions)?;
    Ok(())
}

fn cot_source(f: OtFiller) -> CotSource {
    match f {
        OtFiller::Iknp => CotSource::Iknp,
        OtFiller::SoftSpoken { k } => CotSource::SoftSpoken { k },
        OtFiller::Ferret => CotSource::Ferret(FerretParams::B13),
    }
}

fn client_config(a: &InferArgs, info: &ModelInfo) -> Result<ClientConfig, Error> {
    crate::model_cmd::client_channel(a, info.server_key.map(PeerKey::Pinned))
}

fn cost_lines(r: &FastGrnnRun) -> String {
    let c = &r.cost;
    let mut s = format!(
        "           client: setup {:.3} s, offline {:.3} s, online {:.3} s; {:.2} MB in all \
         ({:.2} MB online), {} online rounds",
        r.setup_s,
        r.offline_s,
        r.online_s,
        mb(c),
        (c.online.bytes_sent + c.online.bytes_received) as f64 / 1e6,
        c.online.rounds
    );
    let mut blocks: Vec<_> = r.block_stats.iter().collect();
    blocks.sort_by_key(|b| std::cmp::Reverse(b.1.bytes));
    let top: Vec<String> = blocks
        .iter()
        .take(5)
        .map(|(k, st)| format!("{k} {:.2} MB", st.bytes as f64 / 1e6))
        .collect();
    if !top.is_empty() {
        s += &format!("\n           online blocks: {}", top.join(", "));
    }
    s
}

/// `infer` against a family-ss server: one session per input.
pub fn infer(a: &InferArgs) -> Result<(), Error> {
    let (server, info) = crate::model_cmd::server_and_info(a)?;
    let net = client_config(a, &info)?;
    let config = &info.config;
    let shape = shape_of(config)?;
    let math = Impl::parse(&a.math).ok_or_else(|| Error::msg("--math must be opaf or sirnn"))?;
    let request = SsRequest {
        math,
        source: cot_source(a.ot),
        logits: a.reveal_logits,
    };
    let reference = match (a.compare_plaintext, &a.model) {
        (false, _) => None,
        (true, Some(dir)) => {
            let m = Model::load(dir)?;
            Some(QuantizedGraph::new(&m, m.config.fixed_point)?)
        }
        (true, None) => {
            return Err(Error::msg(
                "--compare-plaintext needs --model (the full model directory)",
            ))
        }
    };
    println!(
        "family ss, {} math: {}; the client learns the class{}",
        math.name(),
        shape_line(&shape),
        if a.reveal_logits {
            " and the logits"
        } else {
            ""
        }
    );
    let main = config.fixed_point.main;
    let per = shape.steps * shape.input;
    for (name, x, truth) in graph_inputs(a)? {
        if x.len() != per {
            return Err(Error::msg(format!(
                "{name}: {} values, the model reads {} steps × {} features",
                x.len(),
                shape.steps,
                shape.input
            )));
        }
        let xq: Vec<i64> = x.iter().map(|v| main.quantize(*v as f64)).collect();
        let mut ch = connect_session(server, &net)?;
        let r = client_session(&mut ch, &shape, &request, &xq, main)?;
        let class = r
            .class
            .ok_or_else(|| Error::msg("the session revealed no class"))?;
        let label = config
            .labels
            .get(class)
            .cloned()
            .unwrap_or_else(|| format!("class {class}"));
        let mut line = format!("{name:<10} secure: {label:<6}");
        if let Some(t) = truth {
            line += &format!(" true label: {t:<4}");
        }
        if let Some(lg) = &r.logits {
            let f: Vec<String> = lg
                .iter()
                .map(|v| format!("{:.3}", *v as f64 / f64::from(1u32 << main.scale)))
                .collect();
            line += &format!(" logits [{}]", f.join(", "));
        }
        if let Some(q) = &reference {
            let want = GraphReference::new(q, CircuitActivations::default())
                .run(secinfer_nn::Input::Fixed(&xq))?;
            let dense = want.get(2).map_or(&[][..], |v| &v[..]);
            let ref_class = secinfer_nn::argmax(dense);
            line += &format!("  reference: {}", label_of(config, ref_class));
            line += if ref_class == class {
                "  [class matches the plaintext fixed-point reference]"
            } else {
                "  [class DIFFERS from the plaintext fixed-point reference]"
            };
            if let Some(lg) = &r.logits {
                let gap = lg.iter().zip(dense).map(|(g, w)| (g - w).abs()).max();
                line += &format!(" (largest logit gap {} ULP)", gap.unwrap_or(0));
            }
        }
        println!("{line}");
        println!("{}", cost_lines(&r));
    }
    Ok(())
}

fn label_of(config: &ModelConfig, k: usize) -> String {
    config
        .labels
        .get(k)
        .cloned()
        .unwrap_or_else(|| format!("class {k}"))
}
