//! Family ss (OPAF's FastGRNN on additive shares over Z_{2^l}), as `serve` and `infer` print
//! it; the driver (`secinfer_nn::runtime`) runs the sessions, one per input, and chooses the
//! family for a model whose graph holds a fastgrnn layer (or `--family ss`). The client picks
//! the sigmoid/tanh math (`--math opaf|sirnn`) and the OT filler (`--ot`); it learns the class,
//! and the logits only when it asks (`--reveal-logits`) and the server allows
//! (`--allow-logits`); the server learns nothing of the input.
use crate::error::Error;
use crate::model_cmd::{graph_inputs, label, reference_graph, InferArgs};
use secinfer_nn::layers::gru::ClientOptions;
use secinfer_nn::layers::ss::{FastGrnnRun, FastGrnnShape, Impl, Products};
use secinfer_nn::runtime::{Client, Detail, RunOptions};
use secinfer_nn::{CircuitActivations, GraphReference};

/// The model's shape, as the listening line and the client print it.
pub fn shape_line(s: &FastGrnnShape) -> String {
    format!(
        "fastgrnn {} steps × {} → {} → dense {}, main format ({}, {})",
        s.steps, s.input, s.hidden, s.classes, s.head.bits, s.head.scale
    )
}

/// What the server's log says the family reveals.
pub fn policy_line(allow_logits: bool) -> String {
    format!(
        "family ss (OPAF: additive shares, HE products on masks, OPAF or SIRNN sigmoid/tanh as the client \
         asks): the client learns the class{}",
        if allow_logits {
            ", and the logits if it asks"
        } else {
            " only (logits refused)"
        }
    )
}

fn cost_lines(r: &FastGrnnRun) -> String {
    let c = &r.cost;
    let total: u64 = [&c.setup, &c.offline, &c.online]
        .iter()
        .map(|p| p.bytes())
        .sum();
    let mut s = format!(
        "           client: setup {:.3} s, offline {:.3} s, online {:.3} s; {:.2} MB in all \
         ({:.2} MB online), {} online rounds",
        r.setup_s,
        r.offline_s,
        r.online_s,
        total as f64 / 1e6,
        c.online.bytes() as f64 / 1e6,
        c.online.rounds
    );
    // The offline HE exchange is booked beside the online blocks: print it on its own.
    if let Some(he) = r.block_stats.get("he_offline") {
        s += &format!(
            "\n           HE products on masks, offline: {:.2} MB in {:.3} s",
            he.bytes as f64 / 1e6,
            he.time_s
        );
    }
    let mut blocks: Vec<_> = r
        .block_stats
        .iter()
        .filter(|(k, _)| **k != "he_offline")
        .collect();
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
pub fn infer(a: &InferArgs, client: &Client, server: &str) -> Result<(), Error> {
    let (Some(config), Some(shape)) = (client.session().config(), client.session().ss_shape())
    else {
        return Err(Error::msg("family ss runs FastGRNN graphs"));
    };
    let math = Impl::parse(&a.math).ok_or_else(|| Error::msg("--math must be opaf or sirnn"))?;
    let products =
        Products::parse(&a.products).ok_or_else(|| Error::msg("--products must be he or ot"))?;
    let run = RunOptions {
        protocol: ClientOptions {
            reveal_logits: a.reveal_logits,
            ..ClientOptions::default()
        },
        ot: a.ot,
        math,
        products,
        ..RunOptions::default()
    };
    let reference = reference_graph(a)?;
    println!(
        "family ss, {} math, {} products: {}; the client learns the class{}",
        math.name(),
        products.name(),
        shape_line(shape),
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
        let outs = client.infer_inputs(server, &[&xq], &run, &mut |_, _, _| {})?;
        let Some(Detail::Ss(r)) = outs.into_iter().next().map(|o| o.detail) else {
            return Err(Error::msg("the session returned no family-ss outcome"));
        };
        let class = r
            .class
            .ok_or_else(|| Error::msg("the session revealed no class"))?;
        let mut line = format!("{name:<10} secure: {:<6}", label(&config.labels, class));
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
            line += &format!("  reference: {}", label(&config.labels, ref_class));
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
