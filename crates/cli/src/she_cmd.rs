//! SHE models (a directory with `she.json`) as `serve`, `infer` and `inspect` print them: the
//! driver (`secinfer_nn::runtime`) serves the PBS path of secinfer-tfhe on the served path
//! (admission control, deadlines, the Noise channel). The client makes its keys, uploads the
//! server key once per session, and for each sample sends encrypted input digits and decrypts
//! the encrypted output the server returns.
use std::path::Path;

use crate::error::Error;
use crate::model_cmd::{sample_lines, InferArgs};
use crate::serve::ServeArgs;
use secinfer_nn::runtime::{Client, Detail, RunOptions, ServerSession};
use secinfer_tfhe::{cost, model, PbsNetwork};

/// Memory of one session: the expanded server key (≈ 120 MB) and the ciphertexts.
pub const SESSION_BYTES: u64 = 512 << 20;

/// The listening line's account of a SHE model and the log's note on its deadline.
pub fn describe(a: &ServeArgs, s: &ServerSession) -> (String, Option<String>) {
    let pbs = s.she().map_or(0, |p| p.count().pbs);
    (
        format!(
            "SHE model {}, PBS path, {pbs} bootstraps a sample",
            a.model.display()
        ),
        Some(format!(
            "family tfhe (SHE): the server evaluates the whole network on ciphertexts; an \
             evaluation must fit in the session deadline ({} s)",
            a.session_timeout
        )),
    )
}

/// The client: `--server`, `--model-info DIR` (she-info.json, server.pub), `--samples FILE`
/// (JSON lines `{"input": [integers]}`), every sample in one session.
pub fn infer(a: &InferArgs, client: &Client, server: &str) -> Result<(), Error> {
    let file = a
        .samples
        .as_ref()
        .ok_or_else(|| Error::msg("pass --samples FILE.jsonl ({\"input\": [...]} lines)"))?;
    let mut xs = Vec::new();
    for (what, _, j) in sample_lines(file, a.limit)? {
        let x = j["input"]
            .as_array()
            .ok_or_else(|| Error::msg(format!("{what} has no \"input\" array")))?
            .iter()
            .map(|v| {
                v.as_i64()
                    .ok_or_else(|| Error::msg(format!("{what}: a non-integer in input")))
            })
            .collect::<Result<Vec<i64>, Error>>()?;
        xs.push(x);
    }
    let refs: Vec<&[i64]> = xs.iter().map(Vec::as_slice).collect();
    let outs = client.infer_inputs(server, &refs, &RunOptions::default(), &mut |_, _, _| {})?;
    for (k, o) in outs.iter().enumerate() {
        let Detail::She { sample: s, setup } = &o.detail else {
            return Err(Error::msg("the session returned no SHE outcome"));
        };
        if let Some(r) = setup {
            println!(
                "keys: generated in {:.2} s; server key {:.1} MB uploaded and expanded in \
                 {:.2} s (server expansion {:.2} s)",
                r.keygen_s,
                r.key_bytes as f64 / 1e6,
                r.key_upload_s,
                r.server_expand_s
            );
        }
        println!(
            "sample {}: class {}; encrypt {:.3} s, upload {} B, server evaluation {:.2} s, \
             upload+evaluation+download {:.2} s, download {} B, decrypt {:.3} s",
            k + 1,
            o.class,
            s.encrypt_s,
            s.upload_bytes,
            s.server_eval_s,
            s.wait_s,
            s.download_bytes,
            s.decrypt_s
        );
    }
    Ok(())
}

/// `secinfer inspect DIR [--plan]` for a SHE model: layers, formats, and with `--plan` the
/// family (tfhe) and the evaluator the cost model picks, with its figures.
pub fn inspect(dir: &Path, plan: bool) -> Result<(), Error> {
    let (net, _) = model::load(dir)?;
    let f = net.input();
    println!("model      {} (SHE, she.json)", dir.display());
    println!(
        "input      {}×{}×{} values, {} bits {}",
        f.shape.c,
        f.shape.h,
        f.shape.w,
        f.bits,
        if f.signed { "signed" } else { "unsigned" }
    );
    println!("layers     (index, type, output shape c×h×w)");
    for (i, (l, s)) in net.layers().iter().zip(net.shapes()).enumerate() {
        println!("  {i:<3} {:<10} {}×{}×{}", l.kind(), s.c, s.h, s.w);
    }
    if plan {
        let gates = net.count();
        let family = secinfer_nn::plan::Family::Tfhe.name();
        println!("plan       (layers, family, protocol, why)");
        match PbsNetwork::new(&net) {
            Ok(p) => {
                let plan = cost::Plan::new(&net, &p);
                let name = |c: cost::Path| match c {
                    cost::Path::Pbs => "pbs",
                    cost::Path::Gates => "gates",
                };
                for s in &plan.steps {
                    println!(
                        "  {:>3}-{:<3} {family}  {:<5} ({:<14} {} lookups ≈ {:.0} s against {} \
                         gate bootstraps ≈ {:.0} s on one core)",
                        s.layers.0,
                        s.layers.1,
                        name(s.choice),
                        s.kind,
                        s.lookups,
                        s.pbs_s,
                        s.gate_bootstraps,
                        s.gates_s
                    );
                }
                println!(
                    "  runs on    {}  (predicted {:.0} s on one core; recorded per-operation costs)",
                    name(plan.run_path()),
                    plan.predicted_s
                );
            }
            Err(e) => println!(
                "  all layers  {family}  gates  ({} gate bootstraps; not on the PBS path: {e})",
                gates.pbs()
            ),
        }
    }
    Ok(())
}
