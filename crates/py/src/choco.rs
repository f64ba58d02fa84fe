//! Family `choco` (CHOCO's client-aided HE) through the bindings: the options that choose it
//! and the client's cost report as a dict. The session itself is the runtime's (driver): the
//! server evaluates the linear layers on ciphertexts, the client decrypts, computes the rest in
//! the clear and so sees every intermediate activation, which the report names.
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use secinfer_nn::layers::choco::Packing;
use secinfer_nn::plan::{Family, PlanOptions};
use secinfer_nn::runtime::{Client, Detail, RunOptions, ServerOptions};

/// Server and client options for `family` (None: the planner's choice) and CHOCO's `packing`
/// ("redundant" or "baseline"); both sides must name the same.
pub fn options(
    variant: secinfer_nn::layers::gru::Variant,
    family: Option<&str>,
    packing: &str,
) -> PyResult<ServerOptions> {
    let family = family
        .map(|f| f.parse::<Family>())
        .transpose()
        .map_err(crate::nn_err)?;
    Ok(ServerOptions {
        variant,
        plan: PlanOptions { family },
        packing: packing
            .parse::<Packing>()
            .map_err(|e| PyValueError::new_err(e.to_string()))?,
        ..ServerOptions::default()
    })
}

/// One CHOCO session on the main-format input `x`, on `threads` client threads (None: the
/// caller's pool): {"prediction", "outputs" (every layer's output, index 0 the clamped input:
/// what the client sees), "revealed" (the names of the layers whose outputs it sees), "cost"
/// (the channel's report), "client" (keygen_s, encrypt_s, decrypt_s, clear_layers_s,
/// online_s, setup_bytes, bytes_up, bytes_down, ciphertexts_up, ciphertexts_down)}.
pub fn infer<'py>(
    py: Python<'py>,
    client: &Client,
    server: &str,
    x: &[i64],
    threads: Option<usize>,
) -> PyResult<Bound<'py, PyDict>> {
    let run = RunOptions {
        threads,
        ..RunOptions::default()
    };
    let outs = py
        .allow_threads(|| client.infer_inputs(server, &[x], &run, &mut |_, _, _| {}))
        .map_err(crate::nn_err)?;
    let out = outs
        .into_iter()
        .next()
        .ok_or_else(|| crate::SecinferError::new_err("the session returned no outcome"))?;
    let Detail::Choco(o) = &out.detail else {
        return Err(crate::Unsupported::new_err(
            "the model is not served in family choco (pass family=\"choco\" to both sides)",
        ));
    };
    let d = PyDict::new_bound(py);
    d.set_item("prediction", out.class)?;
    d.set_item("outputs", o.outputs.clone())?;
    let revealed: Vec<&str> = client
        .session()
        .config()
        .map(|c| {
            c.graph.layers[1..]
                .iter()
                .map(|l| l.name.as_str())
                .collect()
        })
        .unwrap_or_default();
    d.set_item("revealed", revealed)?;
    d.set_item("cost", crate::cost_to_dict(py, &out.report.cost)?)?;
    let c = &o.cost;
    let e = PyDict::new_bound(py);
    e.set_item("keygen_s", c.keygen_s)?;
    e.set_item("encrypt_s", c.encrypt_s)?;
    e.set_item("decrypt_s", c.decrypt_s)?;
    e.set_item("clear_layers_s", c.plain_s)?;
    e.set_item("online_s", c.online_s())?;
    e.set_item("setup_bytes", c.setup_bytes)?;
    e.set_item("bytes_up", c.bytes_up)?;
    e.set_item("bytes_down", c.bytes_down)?;
    e.set_item("ciphertexts_up", c.ciphertexts_up)?;
    e.set_item("ciphertexts_down", c.ciphertexts_down)?;
    d.set_item("client", e)?;
    Ok(d)
}
