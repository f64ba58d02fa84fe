//! `secinfer._core`: the Rust core as a Python module. Python stays a thin face: no protocol
//! logic lives on that side, only argument conversion and the dicts users read.
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use secinfer_net::{run_two_party, Channel, Cost, NetError, Profile, Transport};

fn cost_to_dict<'py>(py: Python<'py>, c: &Cost) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new_bound(py);
    for p in secinfer_net::Phase::ALL {
        let pc = c.phase(p);
        let e = PyDict::new_bound(py);
        e.set_item("time_s", pc.time_s)?;
        e.set_item("bytes_sent", pc.bytes_sent)?;
        e.set_item("bytes_received", pc.bytes_received)?;
        e.set_item("messages_sent", pc.messages_sent)?;
        e.set_item("messages_received", pc.messages_received)?;
        e.set_item("rounds", pc.rounds)?;
        d.set_item(p.name(), e)?;
    }
    Ok(d)
}

/// The version of the Rust core.
#[pyfunction]
fn version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}

/// Runs a two-party echo of `n` 64-bit words over a fresh channel (`net` = "mem" or "tcp",
/// `profile` = "none", "lan" or "wan") and returns the client's cost report as a dict.
/// A smoke test that the bindings reach the real channel layer.
#[pyfunction]
#[pyo3(signature = (n, net="mem", profile="none"))]
fn echo_cost<'py>(py: Python<'py>, n: usize, net: &str, profile: &str) -> PyResult<Bound<'py, PyDict>> {
    let transport: Transport = net.parse().map_err(PyValueError::new_err)?;
    let profile: Profile = profile.parse().map_err(PyValueError::new_err)?;
    let data: Vec<u64> = (0..n as u64).collect();
    let run = py
        .allow_threads(|| {
            run_two_party(
                transport,
                profile,
                move |ch| -> Result<Vec<u64>, NetError> {
                    ch.send_u64s(&data)?;
                    ch.recv_u64s(n)
                },
                move |ch| -> Result<(), NetError> {
                    let v = ch.recv_u64s(n)?;
                    ch.send_u64s(&v)
                },
            )
        })
        .map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
    let echoed = run.client.output.map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
    run.server.output.map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
    if echoed.iter().enumerate().any(|(i, v)| *v != i as u64) {
        return Err(PyRuntimeError::new_err("echo returned different data"));
    }
    cost_to_dict(py, &run.client.cost)
}

/// Classification logits of the plaintext fixed-point reference (docs/model-format.md) for each
/// token sequence, as main-format integers. `fixed_point` names a `fixed_point_variants` entry;
/// `None` selects the model's default format.
#[pyfunction]
#[pyo3(signature = (model_dir, tokens, fixed_point=None))]
fn eval_fixed_point(model_dir: &str, tokens: Vec<Vec<u32>>, fixed_point: Option<&str>) -> PyResult<Vec<Vec<i64>>> {
    let err = |e: secinfer_nn::NnError| PyValueError::new_err(e.to_string());
    let model = secinfer_nn::Model::load(model_dir).map_err(err)?;
    let fp = *model.config.fixed_point_named(fixed_point).map_err(err)?;
    let q = secinfer_nn::QuantizedModel::new(&model, fp);
    let mut r = secinfer_nn::Reference::new(&q, secinfer_nn::ExactActivations);
    tokens
        .iter()
        .map(|t| {
            secinfer_nn::check_tokens(t, model.config.arch.vocab).map_err(err)?;
            Ok(r.classify(t))
        })
        .collect()
}

/// Token ids of `text` under the model's `words-v1` tokeniser, shaped to `max_len`.
#[pyfunction]
fn encode_text(model_dir: &str, text: &str) -> PyResult<Vec<u32>> {
    let model = secinfer_nn::Model::load(model_dir).map_err(|e| PyValueError::new_err(e.to_string()))?;
    let vocab = model.vocab.as_ref().ok_or_else(|| PyValueError::new_err("the model has no vocabulary"))?;
    Ok(vocab.encode(text))
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(version, m)?)?;
    m.add_function(wrap_pyfunction!(echo_cost, m)?)?;
    m.add_function(wrap_pyfunction!(eval_fixed_point, m)?)?;
    m.add_function(wrap_pyfunction!(encode_text, m)?)?;
    Ok(())
}
