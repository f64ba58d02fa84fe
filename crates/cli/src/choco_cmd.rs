//! `serve --family choco` and `infer --family choco`: CHOCO client-aided HE over TCP (the
//! Noise channel unless `--insecure-plaintext`). The server evaluates the linear layers on
//! ciphertexts; the client decrypts, computes the rest in the clear and so sees every
//! intermediate activation, which both commands state.
use crate::error::Error;
use crate::model_cmd::{graph_inputs, InferArgs};
use secinfer_he::choco::Packing;
use secinfer_net::{
    connect_session, serve_sessions, PeerKey, ServeConfig, ServerStats, TcpChannel,
};
use secinfer_nn::layers::choco::{client_session, server_session, ChocoClient, ChocoServer};
use secinfer_nn::{CircuitActivations, GraphReference, Model, ModelConfig, QuantizedGraph};
use std::net::TcpListener;
use std::path::Path;

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

/// Serves `model` in family choco on `listener` under `cfg`.
pub fn serve(
    model: &Path,
    listener: &TcpListener,
    cfg: &ServeConfig,
    stats: &ServerStats,
) -> Result<(), Error> {
    let m = Model::load(model)?;
    let server = ChocoServer::new(&m, Packing::Redundant)?;
    println!(
        "listening on {} (model {}, family choco, {} plaintext primes)",
        listener.local_addr()?,
        model.display(),
        server.primes().len()
    );
    eprintln!("{}", leak_line(&m.config));
    use std::io::Write;
    std::io::stdout().flush()?;
    let sessions = crate::serve::LoggedSessions(|ch: &mut TcpChannel| {
        let c = server_session(ch, &server)?;
        Ok(format!(
            "{:.3} s of HE, {} ciphertexts in, {} out, flooding 2^-{:.1}; revealed every \
             intermediate activation (family choco)",
            c.eval_s, c.ciphertexts_in, c.ciphertexts_out, c.flood_stat_bits
        ))
    });
    serve_sessions(listener, cfg, stats, &sessions)?;
    Ok(())
}

/// `infer --family choco`: one session per input against `--server`.
pub fn infer(a: &InferArgs) -> Result<(), Error> {
    let (server, info) = crate::model_cmd::server_and_info(a)?;
    let net = crate::model_cmd::client_channel(a, info.server_key.map(PeerKey::Pinned))?;
    let config = &info.config;
    let mut client = ChocoClient::new(config, Packing::Redundant)?;
    if let Some(t) = a.client_threads {
        client = client.with_threads(t);
    }
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
    println!("{}", leak_line(config));
    let main = config.fixed_point.main;
    for (name, x, truth) in graph_inputs(a)? {
        let xq: Vec<i64> = x.iter().map(|v| main.quantize(*v as f64)).collect();
        let mut ch = connect_session(server, &net)?;
        let o = client_session(&mut ch, &client, &xq)?;
        let class = o.class.unwrap_or_else(|| secinfer_nn::argmax(o.output()));
        let label = config
            .labels
            .get(class)
            .cloned()
            .unwrap_or_else(|| format!("class {class}"));
        let mut line = format!("{name:<10} secure: {label:<6}");
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
