//! `secinfer._core`: the Rust core as a Python module. Python stays a thin face: no protocol
//! logic lives on that side, only argument conversion and the dicts users read.
#![allow(
    clippy::useless_conversion,
    reason = "pyo3 0.22's #[pyfunction] expansion converts PyErr into itself"
)]
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use secinfer_net::{run_two_party, Channel, Cost, NetError, Profile, Transport};

mod choco;

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
fn echo_cost<'py>(
    py: Python<'py>,
    n: usize,
    net: &str,
    profile: &str,
) -> PyResult<Bound<'py, PyDict>> {
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
    let echoed = run
        .client
        .output
        .map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
    run.server
        .output
        .map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
    if echoed.iter().enumerate().any(|(i, v)| *v != i as u64) {
        return Err(PyRuntimeError::new_err("echo returned different data"));
    }
    cost_to_dict(py, &run.client.cost)
}

/// Classification logits of the plaintext fixed-point reference (docs/model-format.md) for each
/// token sequence, as main-format integers. `fixed_point` names a `fixed_point_variants` entry;
/// `None` selects the model's default format. `activations` is "circuit" (the garbled circuits'
/// sigmoid and tanh: what a secure run computes) or "exact" (correctly rounded).
#[pyfunction]
#[pyo3(signature = (model_dir, tokens, fixed_point=None, activations="circuit"))]
fn eval_fixed_point(
    model_dir: &str,
    tokens: Vec<Vec<u32>>,
    fixed_point: Option<&str>,
    activations: &str,
) -> PyResult<Vec<Vec<i64>>> {
    let err = |e: secinfer_nn::NnError| PyValueError::new_err(e.to_string());
    let model = secinfer_nn::Model::load(model_dir).map_err(err)?;
    let fp = *model.config.fixed_point_named(fixed_point).map_err(err)?;
    let q = secinfer_nn::QuantizedModel::new(&model, fp).map_err(err)?;
    for t in &tokens {
        secinfer_nn::check_tokens(t, q.arch.vocab).map_err(err)?;
    }
    // "circuit" is the definition (what a secure run computes); "exact" the correctly rounded
    // activations of python/secinfer/fixedpoint.py.
    match activations {
        "circuit" => {
            let mut r = secinfer_nn::Reference::new(&q, secinfer_nn::CircuitActivations::default());
            Ok(tokens.iter().map(|t| r.classify(t)).collect())
        }
        "exact" => {
            let mut r = secinfer_nn::Reference::new(&q, secinfer_nn::ExactActivations);
            Ok(tokens.iter().map(|t| r.classify(t)).collect())
        }
        other => Err(PyValueError::new_err(format!(
            "activations {other:?} (expected \"circuit\" or \"exact\")"
        ))),
    }
}

/// The plaintext fixed-point reference of any model graph (format version 2): for each input
/// (floats, row-major in the input layer's shape), the last layer's output as main-format
/// integers (the class index for a model that ends in argmax). `fixed_point` names a
/// `fixed_point_variants` entry; `None` selects the default format.
#[pyfunction]
#[pyo3(signature = (model_dir, inputs, fixed_point=None))]
fn eval_graph(
    py: Python<'_>,
    model_dir: &str,
    inputs: Vec<Vec<f32>>,
    fixed_point: Option<&str>,
) -> PyResult<Vec<Vec<i64>>> {
    let err = |e: secinfer_nn::NnError| PyValueError::new_err(e.to_string());
    let model = secinfer_nn::Model::load(model_dir).map_err(err)?;
    let fp = *model.config.fixed_point_named(fixed_point).map_err(err)?;
    let q = secinfer_nn::QuantizedGraph::new(&model, fp).map_err(err)?;
    py.allow_threads(|| {
        let mut r =
            secinfer_nn::GraphReference::new(&q, secinfer_nn::CircuitActivations::default());
        inputs
            .iter()
            .map(|x| {
                let xq = q.quantize_input(x);
                r.output(secinfer_nn::Input::Fixed(&xq))
            })
            .collect::<Result<Vec<_>, _>>()
    })
    .map_err(err)
}

/// Token ids of `text` under the model's `words-v1` tokeniser, shaped to `max_len`.
#[pyfunction]
fn encode_text(model_dir: &str, text: &str) -> PyResult<Vec<u32>> {
    let model =
        secinfer_nn::Model::load(model_dir).map_err(|e| PyValueError::new_err(e.to_string()))?;
    let vocab = model
        .vocab
        .as_ref()
        .ok_or_else(|| PyValueError::new_err("the model has no vocabulary"))?;
    Ok(vocab.encode(text))
}

fn variant_of(name: &str) -> PyResult<secinfer_nn::layers::gru::Variant> {
    name.parse().map_err(|e: String| PyValueError::new_err(e))
}

// One Python exception class per [`secinfer_nn::ErrorKind`], under a common base that is a
// RuntimeError (so code written against the untyped face still catches them): a caller retries
// on a timeout, reports a refusal and fixes a model without parsing messages.
#[allow(
    unexpected_cfgs,
    reason = "pyo3 0.22's create_exception! tests a `gil-refs` feature this crate does not declare"
)]
mod errors {
    use pyo3::exceptions::PyRuntimeError;
    pyo3::create_exception!(
        _core,
        SecinferError,
        PyRuntimeError,
        "Base of every secinfer error."
    );
    pyo3::create_exception!(
        _core,
        PeerTimeout,
        SecinferError,
        "The peer did not answer in time."
    );
    pyo3::create_exception!(
        _core,
        PeerClosed,
        SecinferError,
        "The peer closed the connection."
    );
    pyo3::create_exception!(
        _core,
        MalformedMessage,
        SecinferError,
        "The peer sent bytes that are not a valid message."
    );
    pyo3::create_exception!(
        _core,
        Refused,
        SecinferError,
        "The peer declined the session or the request."
    );
    pyo3::create_exception!(
        _core,
        BadModel,
        SecinferError,
        "The model directory is invalid (file, JSON, layer, tensor, vocabulary)."
    );
    pyo3::create_exception!(
        _core,
        BadInput,
        SecinferError,
        "The caller's input or options are invalid."
    );
    pyo3::create_exception!(
        _core,
        Unsupported,
        SecinferError,
        "The model or mode has no secure protocol here."
    );
}
use errors::*;

fn nn_err(e: secinfer_nn::NnError) -> PyErr {
    use secinfer_nn::ErrorKind as K;
    let m = e.to_string();
    match e.kind() {
        K::Timeout => PeerTimeout::new_err(m),
        K::PeerClosed => PeerClosed::new_err(m),
        K::Malformed => MalformedMessage::new_err(m),
        K::Refused => Refused::new_err(m),
        K::BadModel => BadModel::new_err(m),
        K::BadInput => BadInput::new_err(m),
        K::Unsupported => Unsupported::new_err(m),
        K::Internal => SecinferError::new_err(m),
    }
}

/// The model owner's side: holds the prepared model (weights never leave Rust).
#[pyclass(module = "secinfer._core")]
struct Server {
    inner: std::sync::Arc<secinfer_nn::runtime::Server>,
    /// The model directory: the server's Noise key lives there (`server.key`).
    model_dir: std::path::PathBuf,
}

#[pymethods]
impl Server {
    /// `family` ("hegc", "ss", "choco"; None: the planner's choice) and CHOCO's `packing`
    /// ("redundant" or "baseline") must be the clients'.
    #[new]
    #[pyo3(signature = (model_dir, variant="cg2", family=None, packing="redundant"))]
    fn new(
        py: Python<'_>,
        model_dir: &str,
        variant: &str,
        family: Option<&str>,
        packing: &str,
    ) -> PyResult<Self> {
        let opts = choco::options(variant_of(variant)?, family, packing)?;
        let inner = py
            .allow_threads(|| secinfer_nn::runtime::Server::load_with(model_dir, &opts))
            .map_err(nn_err)?;
        Ok(Server {
            inner: std::sync::Arc::new(inner),
            model_dir: model_dir.into(),
        })
    }

    /// Serves clients on host:port (port 0 picks one; `on_listen(addr)` is called with the bound
    /// address). With `sessions` set, returns after that many sessions; otherwise serves forever.
    /// `on_session(id, peer, status, info)` is called as each session ends: status "done" (info:
    /// time_s, bytes, gc_bytes, he_bytes, flood_stat_bits), "failed" (info: error), "refused"
    /// (info: reason) or "panicked"; without it failures are printed to stderr. Sessions run on
    /// the Noise channel under the model's key (made at first serve), at most `max_sessions` at
    /// once (default: from cores and memory); logits only with `allow_logits`.
    #[pyo3(signature = (port, host="127.0.0.1", sessions=None, on_listen=None, timeout_s=60,
                        on_session=None, allow_logits=false, max_sessions=None))]
    #[allow(
        clippy::too_many_arguments,
        reason = "mirrors the Python keyword arguments"
    )]
    fn serve(
        &self,
        py: Python<'_>,
        port: u16,
        host: &str,
        sessions: Option<u64>,
        on_listen: Option<PyObject>,
        timeout_s: u64,
        on_session: Option<PyObject>,
        allow_logits: bool,
        max_sessions: Option<usize>,
    ) -> PyResult<()> {
        let key = self.model_dir.join(secinfer_net::PRIVATE_KEY_FILE);
        let id = secinfer_net::Identity::load_or_create(&key)
            .map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
        let cap = max_sessions.unwrap_or_else(|| secinfer_net::default_max_sessions(128 << 20));
        let mut cfg = secinfer_net::ServeConfig::new(
            cap,
            secinfer_net::ServerSecurity::Noise(std::sync::Arc::new(id)),
        );
        cfg.tcp.read_timeout = Some(std::time::Duration::from_secs(timeout_s.max(1)));
        cfg.stop_after = sessions;
        let policy = secinfer_nn::layers::gru::ServerPolicy { allow_logits };
        let listener = std::net::TcpListener::bind((host, port))
            .map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
        let addr = listener
            .local_addr()
            .map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
        if let Some(cb) = on_listen {
            cb.call1(py, (addr.to_string(),))?;
        }
        let inner = self.inner.clone();
        let log: secinfer_nn::runtime::SessionLog = match on_session {
            Some(cb) => std::sync::Arc::new(move |id, peer, end| {
                Python::with_gil(|py| {
                    // A failing callback must not take the server down: Python prints it.
                    if let Err(e) = session_event(py, end)
                        .and_then(|(status, info)| cb.call1(py, (id, peer, status, info)))
                    {
                        e.print(py);
                    }
                })
            }),
            None => std::sync::Arc::new(|id, peer, end| {
                if let secinfer_nn::runtime::SessionEnd::Failed(e) = end {
                    eprintln!("secinfer: session {id} ({peer}) failed: {e}");
                }
            }),
        };
        py.allow_threads(move || {
            let stats = secinfer_net::ServerStats::default();
            inner.serve(&listener, &cfg, policy, &stats, log)
        })
        .map_err(nn_err)
    }
}

/// A session's end as `(status, info)` for `Server.serve(on_session=...)`.
fn session_event(
    py: Python<'_>,
    end: secinfer_nn::runtime::SessionEnd,
) -> PyResult<(&'static str, Bound<'_, PyDict>)> {
    use secinfer_nn::runtime::SessionEnd;
    let info = PyDict::new_bound(py);
    let status = match end {
        SessionEnd::Done(served) => {
            let rep = &served.report;
            let t = rep.cost.total();
            info.set_item("time_s", t.time_s)?;
            info.set_item("bytes", t.bytes())?;
            info.set_item("gc_bytes", rep.gc_bytes)?;
            info.set_item("he_bytes", rep.he_bytes)?;
            let flood = match &served.detail {
                secinfer_nn::runtime::ServedDetail::Choco(c) => c.flood_stat_bits,
                _ => rep.flood_stat_bits,
            };
            info.set_item("flood_stat_bits", flood)?;
            "done"
        }
        SessionEnd::Failed(e) => {
            info.set_item("error", e.to_string())?;
            "failed"
        }
        SessionEnd::Panicked => "panicked",
        SessionEnd::Refused(reason) => {
            info.set_item("reason", reason)?;
            "refused"
        }
    };
    Ok((status, info))
}

/// What `infer` and `infer_image` return (their docs name the keys).
fn outcome_dict<'py>(
    py: Python<'py>,
    out: &secinfer_nn::layers::gru::GruOutcome,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new_bound(py);
    d.set_item("prediction", out.class)?;
    d.set_item("logits", out.logits.clone())?;
    d.set_item("cost", cost_to_dict(py, &out.report.cost)?)?;
    d.set_item("gc_bytes", out.report.gc_bytes)?;
    d.set_item("he_bytes", out.report.he_bytes)?;
    d.set_item("and_gates", out.report.and_gates)?;
    d.set_item("and_per_element_step", out.report.and_per_element_step)?;
    d.set_item("gate_tables", out.report.gate_tables)?;
    d.set_item("steps", out.report.steps)?;
    Ok(d)
}

/// The client's side: public model info only (model.json, vocabulary, embedding table).
#[pyclass(module = "secinfer._core")]
struct Client {
    inner: secinfer_nn::runtime::Client,
    server: String,
}

#[pymethods]
impl Client {
    #[new]
    #[pyo3(signature = (host, port, model_info_dir, variant="cg2", family=None, packing="redundant"))]
    fn new(
        host: &str,
        port: u16,
        model_info_dir: &str,
        variant: &str,
        family: Option<&str>,
        packing: &str,
    ) -> PyResult<Self> {
        let opts = choco::options(variant_of(variant)?, family, packing)?;
        let inner =
            secinfer_nn::runtime::Client::load_with(model_info_dir, &opts).map_err(nn_err)?;
        Ok(Client {
            inner,
            server: format!("{host}:{port}"),
        })
    }

    /// Fraction bits of the revealed logits (they are fixed-point integers: divide by 2^bits).
    #[getter]
    fn logit_frac_bits(&self) -> PyResult<u32> {
        Ok(match self.inner.model() {
            Ok(m) => m.fp.main.scale,
            // A network that reads numbers (family hegc) reveals logits in its main format.
            Err(_) => self
                .inner
                .session()
                .config()
                .map_or(0, |c| c.fixed_point.main.scale),
        })
    }

    /// The family the model's secure steps run in ("hegc", "ss", "choco", "tfhe").
    #[getter]
    fn family(&self) -> &'static str {
        self.inner.session().family().name()
    }

    /// One CHOCO session (family choco) on `image`, the flattened floats, on `client_threads`
    /// threads (None: all); the dict `choco::infer` documents, with the client's cost report
    /// and every activation the client saw.
    #[pyo3(signature = (image, client_threads=None))]
    fn infer_choco<'py>(
        &self,
        py: Python<'py>,
        image: Vec<f32>,
        client_threads: Option<usize>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let x = self.quantize_image(&image)?;
        choco::infer(py, &self.inner, &self.server, &x, client_threads)
    }

    /// Token ids for `text` under the model's tokeniser.
    fn encode(&self, text: &str) -> PyResult<Vec<u32>> {
        self.inner.encode(text).map_err(nn_err)
    }

    /// One secure inference: {"prediction", "logits" (if revealed), "cost", "gc_bytes",
    /// "he_bytes", "and_gates", "and_per_element_step", "gate_tables", "steps"}. `gates` is
    /// "tables" (OT lookup tables for 8-bit sigmoids, fewest bytes) or "circuit" (garbled:
    /// four flights per step fewer), as `secinfer infer --gates`.
    #[pyo3(signature = (tokens, reveal_logits=false, gates="tables"))]
    fn infer<'py>(
        &self,
        py: Python<'py>,
        tokens: Vec<u32>,
        reveal_logits: bool,
        gates: &str,
    ) -> PyResult<Bound<'py, PyDict>> {
        let gates_in_circuit = match gates {
            "tables" => false,
            "circuit" => true,
            other => {
                return Err(PyValueError::new_err(format!(
                    "gates must be \"tables\" or \"circuit\", not {other:?}"
                )))
            }
        };
        let opts = secinfer_nn::layers::gru::ClientOptions {
            reveal_logits,
            gates_in_circuit,
            ..Default::default()
        };
        let out = py
            .allow_threads(|| {
                self.inner
                    .infer(&self.server, &tokens, opts, &mut |_, _, _| {})
            })
            .map_err(nn_err)?;
        outcome_dict(py, &out)
    }

    /// One secure inference of a network that reads numbers (GALA's image networks, family
    /// hegc) on `image`, the flattened floats (row-major C × H × W, or a vector); the result
    /// has the keys of `infer`, with "layers": one dict per step (name, kernel, he_bytes,
    /// gc_bytes, ot_bytes, time_s, rounds).
    #[pyo3(signature = (image, reveal_logits=false))]
    fn infer_image<'py>(
        &self,
        py: Python<'py>,
        image: Vec<f32>,
        reveal_logits: bool,
    ) -> PyResult<Bound<'py, PyDict>> {
        let x = self.quantize_image(&image)?;
        let out = py
            .allow_threads(|| {
                self.inner
                    .infer_fixed(&self.server, &x, reveal_logits, &mut |_, _, _| {})
            })
            .map_err(nn_err)?;
        let d = outcome_dict(py, &out)?;
        let layers = out
            .report
            .layers
            .iter()
            .map(|l| {
                let e = PyDict::new_bound(py);
                e.set_item("name", &l.name)?;
                e.set_item("kernel", &l.kernel)?;
                e.set_item("he_bytes", l.he_bytes)?;
                e.set_item("gc_bytes", l.gc_bytes)?;
                e.set_item("ot_bytes", l.ot_bytes)?;
                e.set_item("time_s", l.time_s)?;
                e.set_item("rounds", l.rounds)?;
                Ok(e)
            })
            .collect::<PyResult<Vec<_>>>()?;
        d.set_item("layers", layers)?;
        Ok(d)
    }
}

impl Client {
    /// `image` in the model's main format (what a network that reads numbers takes).
    fn quantize_image(&self, image: &[f32]) -> PyResult<Vec<i64>> {
        let main = self
            .inner
            .session()
            .config()
            .ok_or_else(|| BadModel::new_err("a SHE network does not read images here"))?
            .fixed_point
            .main;
        Ok(image.iter().map(|v| main.quantize(*v as f64)).collect())
    }
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(version, m)?)?;
    m.add_function(wrap_pyfunction!(echo_cost, m)?)?;
    m.add_function(wrap_pyfunction!(eval_fixed_point, m)?)?;
    m.add_function(wrap_pyfunction!(eval_graph, m)?)?;
    m.add_function(wrap_pyfunction!(encode_text, m)?)?;
    m.add_class::<Server>()?;
    m.add_class::<Client>()?;
    let py = m.py();
    m.add("SecinferError", py.get_type_bound::<SecinferError>())?;
    m.add("PeerTimeout", py.get_type_bound::<PeerTimeout>())?;
    m.add("PeerClosed", py.get_type_bound::<PeerClosed>())?;
    m.add("MalformedMessage", py.get_type_bound::<MalformedMessage>())?;
    m.add("Refused", py.get_type_bound::<Refused>())?;
    m.add("BadModel", py.get_type_bound::<BadModel>())?;
    m.add("BadInput", py.get_type_bound::<BadInput>())?;
    m.add("Unsupported", py.get_type_bound::<Unsupported>())?;
    Ok(())
}
