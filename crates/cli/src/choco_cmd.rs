//! `infer --family choco`: the printing of CHOCO client-aided HE sessions run by the driver
//! (`secinfer_nn::runtime`), one session per input. The server evaluates the linear layers on
//! ciphertexts; the client decrypts, computes the rest in the clear and so sees every
//! intermediate activation, which both `serve` and `infer` state.
use crate::error::Error;
use crate::model_cmd::{graph_inputs, label, reference_graph, InferArgs};
use secinfer_nn::runtime::{Client, Detail, RunOptions};
use secinfer_nn::{CircuitActivations, GraphReference, ModelConfig};

/// The leak, as both commands print it.
pub fn leak_line(config: &ModelConfig) -> String {
    let names: Vec<&str> = config.graph.layers[1..]
        .iter()
        .map(|l| l.name.as_str())
        .collect();
    format!(
        "family choco (CHOCO client-aided HE): the client sees every intermediate activation \
         ({}); the weights stay hidden (results flooded to 2^-40 and re-randomised)",
        names.join(", ")
    )
}

/// `infer --family choco`: one session per input against `server`.
pub fn infer(a: &InferArgs, client: &Client, server: &str) -> Result<(), Error> {
    let config = client
        .session()
        .config()
        .ok_or_else(|| Error::msg("family choco runs model graphs"))?;
    let run = RunOptions {
        threads: a.client_threads,
        ..RunOptions::default()
    };
    let reference = reference_graph(a)?;
    println!("{}", leak_line(config));
    let main = config.fixed_point.main;
    for (name, x, truth) in graph_inputs(a)? {
        let xq: Vec<i64> = x.iter().map(|v| main.quantize(*v as f64)).collect();
        let outs = client.infer_inputs(server, &[&xq], &run, &mut |_, _, _| {})?;
        let Some(Detail::Choco(o)) = outs.into_iter().next().map(|o| o.detail) else {
            return Err(Error::msg("the session returned no CHOCO outcome"));
        };
        let class = o.class.unwrap_or_else(|| secinfer_nn::argmax(o.output()));
        let mut line = format!("{name:<10} secure: {:<6}", label(&config.labels, class));
        if let Some(t) = truth {
            line += &format!(" true label: {t:<4}");
        }
        if let Some(q) = &reference {
            let want = GraphReference::new(q, CircuitActivations::default())
                .run(secinfer_nn::Input::Fixed(&xq))?;
            line += if want == o.outputs {
                "  [every layer matches the plaintext fixed-point reference]"
            } else {
                "  [MISMATCH with the plaintext fixed-point reference]"
            };
        }
        println!("{line}");
        let c = &o.cost;
        println!(
            "           client: {:.2} ms online (encrypt {:.2}, decrypt {:.2}, clear layers \
             {:.3}), keys {:.2} s; {:.1} kB up, {:.1} kB down online, {:.1} MB of keys",
            c.online_s() * 1e3,
            c.encrypt_s * 1e3,
            c.decrypt_s * 1e3,
            c.plain_s * 1e3,
            c.keygen_s,
            c.bytes_up as f64 / 1e3,
            c.bytes_down as f64 / 1e3,
            c.setup_bytes as f64 / 1e6
        );
    }
    Ok(())
}
