//! `secinfer bench choco`: CHOCO client-aided inference of a shipped MNIST model, with the
//! client's cost as the first metric: its online time (encrypt + decrypt + the layers it
//! computes in the clear) and bytes, against the same model run locally by the client (a
//! native f32 forward pass, and the fixed-point reference), on `--client-threads` threads.
//! Every session's layer outputs are checked against the fixed-point reference.
//!
//! `--app pagerank|kmeans|knn` runs one of CHOCO's applications beyond DNNs instead, on the
//! real data under data/choco (karate club graph, iris), against the same algorithm run
//! locally in f64; the secure result is checked against the fixed-point run in the clear.
use crate::error::Error;
use crate::pair::{run_pair, NetArgs};
use crate::report::{BenchRecord, Reporter};
use clap::Args;
use secinfer_he::choco::Packing;
use secinfer_he::{CountingEvaluator, Evaluator};
use secinfer_nn::layers::choco::{client_session, server_session, ChocoClient, ChocoServer};
use secinfer_nn::{
    ExactActivations, GraphReference, Input, LayerKind, Model, QuantizedGraph, Shape,
};
use std::path::PathBuf;
use std::time::Instant;

#[derive(Args, Debug)]
pub struct ChocoArgs {
    /// Model: mlp (models/mnist-mlp, 784-128-128-10), mlp-q8 (models/mnist-mlp-q8, the same
    /// network in 8-bit fixed point: one plaintext prime), cnn / mnist-cnn (models/mnist-cnn)
    /// or mnist-cnn-q7 (models/mnist-cnn-q7, the CNN in 7-bit fixed point: one prime).
    #[arg(long, default_value = "mlp",
          value_parser = ["mlp", "mlp-q8", "cnn", "mnist-cnn", "mnist-cnn-q7"])]
    pub arch: String,
    /// Model directory (default: the arch's directory under ./models).
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// Packing: redundant (CHOCO's [x | x], one rotation per windowed rotation) or baseline
    /// (masked windowed rotations).
    #[arg(long, default_value = "redundant")]
    pub packing: Packing,
    /// Run an application instead of a model: pagerank (karate club), kmeans (assignment of
    /// the 150 iris points to the server's 3 centroids) or knn (k = 5, 30 held-out iris
    /// queries against 120 labelled points, 16 queries per two calls).
    #[arg(long, value_parser = ["pagerank", "kmeans", "knn"])]
    pub app: Option<String>,
    /// Directory of the applications' data (karate.edges, iris.csv).
    #[arg(long, default_value = "data/choco")]
    pub data: PathBuf,
    /// Sessions to run (one sample of the model's samples.jsonl each).
    #[arg(long, default_value_t = 3)]
    pub samples: usize,
    /// Threads for the client's work (1 models a small device).
    #[arg(long, default_value_t = 1)]
    pub client_threads: usize,
    /// Statistical flooding of the returned ciphertexts (both packings reach 40). Below 40
    /// only for measuring what flooding costs; such records carry `under_flooded: true`.
    #[arg(long, default_value_t = 40)]
    pub flood_bits: u32,
    /// Ring degree for both parties instead of the packing's own (8192 for both packings):
    /// only for measuring a packing on a larger ring. Needs --q-primes.
    #[arg(long, requires = "q_primes", value_parser = ["8192", "16384"])]
    pub ring_degree: Option<String>,
    /// Q primes (1 to 4) for both parties instead of the packing's own (2 redundant, 3
    /// baseline): measuring only. Needs --ring-degree.
    #[arg(long, requires = "ring_degree", value_parser = clap::value_parser!(u8).range(1..=4))]
    pub q_primes: Option<u8>,
    #[command(flatten)]
    pub net: NetArgs,
}

/// Peak resident memory of this process in bytes (VmHWM), 0 when unknown.
fn peak_rss() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

fn samples(dir: &std::path::Path, n: usize, q: &QuantizedGraph) -> Result<Vec<Vec<i64>>, Error> {
    let text = std::fs::read_to_string(dir.join("samples.jsonl"))?;
    text.lines()
        .take(n)
        .map(|l| {
            let v: serde_json::Value =
                serde_json::from_str(l).map_err(|e| Error::msg(format!("samples.jsonl: {e}")))?;
            let px: Vec<f32> = v["input"]
                .as_array()
                .ok_or_else(|| Error::msg("samples.jsonl: no input array"))?
                .iter()
                .map(|p| p.as_f64().unwrap_or(0.0) as f32)
                .collect();
            Ok(q.quantize_input(&px))
        })
        .collect()
}

/// The model in f32 (dense, relu, flatten, argmax): the client's native local baseline.
/// `None` for a graph with other layers.
fn float_forward(m: &Model, x: &[f32]) -> Option<Vec<f32>> {
    let mut v = x.to_vec();
    for l in &m.config.graph.layers[1..] {
        v = match &l.kind {
            LayerKind::Dense { input, output } => {
                let w = &m.tensors.get(&l.name, "weight").ok()?.data;
                let b = &m.tensors.get(&l.name, "bias").ok()?.data;
                (0..*output)
                    .map(|r| {
                        let row = &w[r * input..(r + 1) * input];
                        row.iter().zip(&v).map(|(a, b)| a * b).sum::<f32>() + b[r]
                    })
                    .collect()
            }
            LayerKind::Conv2d {
                out_channels,
                kernel,
                stride,
                padding,
                ..
            } => {
                let Shape::Image { c, h, w } = l.input else {
                    return None;
                };
                let k = &m.tensors.get(&l.name, "weight").ok()?.data;
                let b = &m.tensors.get(&l.name, "bias").ok()?.data;
                conv_f32(
                    &v,
                    k,
                    b,
                    [c, h, w],
                    *out_channels,
                    *kernel,
                    *stride,
                    *padding,
                )
            }
            LayerKind::MaxPool2d { kernel, stride } => {
                let (Shape::Image { c, h, w }, Shape::Image { h: oh, w: ow, .. }) =
                    (l.input, l.output)
                else {
                    return None;
                };
                let mut y = Vec::with_capacity(c * oh * ow);
                for ci in 0..c {
                    for p in 0..oh {
                        for q in 0..ow {
                            let mut best = f32::NEG_INFINITY;
                            for u in 0..kernel[0] {
                                for t in 0..kernel[1] {
                                    best = best.max(
                                        v[(ci * h + p * stride[0] + u) * w + q * stride[1] + t],
                                    );
                                }
                            }
                            y.push(best);
                        }
                    }
                }
                y
            }
            LayerKind::Relu => v.iter().map(|a| a.max(0.0)).collect(),
            LayerKind::Flatten => v,
            LayerKind::Argmax => {
                let mut best = 0;
                for (i, a) in v.iter().enumerate() {
                    if *a > v[best] {
                        best = i;
                    }
                }
                vec![best as f32]
            }
            _ => return None,
        };
    }
    Some(v)
}

/// Direct f32 convolution (zero padding), output row-major over (channel, y, x).
#[allow(clippy::too_many_arguments)]
fn conv_f32(
    x: &[f32],
    k: &[f32],
    b: &[f32],
    [c, h, w]: [usize; 3],
    co: usize,
    [kh, kw]: [usize; 2],
    [sh, sw]: [usize; 2],
    [ph, pw]: [usize; 2],
) -> Vec<f32> {
    let (oh, ow) = ((h + 2 * ph - kh) / sh + 1, (w + 2 * pw - kw) / sw + 1);
    let mut y = vec![0f32; co * oh * ow];
    for o in 0..co {
        for p in 0..oh {
            for q in 0..ow {
                let mut acc = b[o];
                for ci in 0..c {
                    for u in 0..kh {
                        let yy = p * sh + u;
                        if yy < ph || yy - ph >= h {
                            continue;
                        }
                        for v in 0..kw {
                            let xx = q * sw + v;
                            if xx < pw || xx - pw >= w {
                                continue;
                            }
                            acc += k[((o * c + ci) * kh + u) * kw + v]
                                * x[(ci * h + yy - ph) * w + xx - pw];
                        }
                    }
                }
                y[(o * oh + p) * ow + q] = acc;
            }
        }
    }
    y
}

/// Mean seconds of `f` over enough repetitions to fill ~0.2 s.
fn time_it(mut f: impl FnMut()) -> f64 {
    f();
    let mut reps = 1u32;
    loop {
        let t = Instant::now();
        for _ in 0..reps {
            f();
        }
        let s = t.elapsed().as_secs_f64();
        if s > 0.2 || reps >= 1 << 20 {
            return s / reps as f64;
        }
        reps *= 4;
    }
}

pub fn run(a: ChocoArgs, out: &mut Reporter) -> Result<(), Error> {
    if a.samples == 0
        || a.samples > 100
        || a.client_threads == 0
        || a.client_threads > 256
        || !(1..=64).contains(&a.flood_bits)
    {
        return Err(Error::msg(
            "--samples in 1..=100, --client-threads in 1..=256, --flood-bits in 1..=64",
        ));
    }
    if let Some(app) = &a.app {
        return run_app(&a, app, out);
    }
    let dir = a.model.clone().unwrap_or_else(|| {
        // "cnn" and "mnist-cnn" name the same shipped model.
        PathBuf::from("models").join(match a.arch.as_str() {
            "mlp" => "mnist-mlp",
            "mlp-q8" => "mnist-mlp-q8",
            "mnist-cnn-q7" => "mnist-cnn-q7",
            _ => "mnist-cnn",
        })
    });
    let m = Model::load(&dir)?;
    let q = QuantizedGraph::new(&m, m.config.fixed_point)?;
    let inputs = samples(&dir, a.samples, &q)?;
    let ring = match (&a.ring_degree, a.q_primes) {
        (Some(n), Some(l)) => (
            n.parse::<usize>().map_err(|e| Error::msg(e.to_string()))?,
            l as usize,
        ),
        _ => secinfer_he::choco::ring_for(a.packing),
    };
    let client = ChocoClient::with_ring(&m.config, a.packing, ring)?.with_threads(a.client_threads);
    let (rotations, sc_mults) = server_op_counts(&client)?;
    let primes = client.primes().len() as u64;
    // The local baselines, on the client's thread budget (both are single-threaded loops).
    let first = inputs.first().ok_or_else(|| Error::msg("no samples"))?;
    let fx: Vec<f32> = first
        .iter()
        .map(|v| *v as f32 / (1u64 << m.config.fixed_point.main.scale) as f32)
        .collect();
    let local_float_s = float_forward(&m, &fx).map(|_| {
        time_it(|| {
            std::hint::black_box(float_forward(&m, std::hint::black_box(&fx)));
        })
    });
    let local_fixed_s = time_it(|| {
        let mut r = GraphReference::new(&q, ExactActivations);
        std::hint::black_box(r.run(Input::Fixed(first)).ok());
    });
    let server = ChocoServer::with_ring(&m, a.packing, ring)?.with_flood_bits(a.flood_bits);
    let counts = |rec: BenchRecord| {
        rec.param("arch", a.arch.as_str())
            .param("packing", a.packing.name())
            .param("client_threads", a.client_threads)
            .param("ring_degree", client.ring_degree())
            .param("q_primes", client.q_primes())
            .param("flood_bits", a.flood_bits)
            .field(
                "under_flooded",
                a.flood_bits < secinfer_he::choco::FLOOD_STAT_BITS,
            )
            .param("plaintext_primes", primes)
            .field("rotations", rotations * primes)
            .field("sc_mults", sc_mults * primes)
            .field("galois_keys", (client.galois_keys() as u64) * primes)
    };
    for (i, x) in inputs.iter().enumerate() {
        let want = GraphReference::new(&q, ExactActivations).run(Input::Fixed(x))?;
        let xs = x.clone();
        let r = run_pair(
            &a.net,
            |ch| Ok(client_session(ch, &client, &xs)?),
            |ch| {
                let c = server_session(ch, &server)?;
                Ok((c.flood_stat_bits, c.eval_s))
            },
        );
        let r = match (r, a.packing) {
            (Ok(r), _) => r,
            // On a smaller ring than `ring_for` picks (--ring-degree, --q-primes) the masked
            // baseline may have no room for its flooding: report its counts and why it did not run.
            (Err(e), Packing::Baseline) => {
                out.emit(
                    counts(BenchRecord::local("choco", 0.0))
                        .field("ran", false)
                        .field("error", e.to_string()),
                );
                return Ok(());
            }
            (Err(e), Packing::Redundant) => return Err(e),
        };
        if r.client.outputs != want {
            return Err(Error::msg(format!(
                "bench choco: sample {i}: the secure run differs from the fixed-point reference"
            )));
        }
        let c = &r.client.cost;
        let client_s = c.online_s();
        let local = local_float_s.unwrap_or(local_fixed_s);
        let image = matches!(m.config.graph.input_shape(), Shape::Image { .. });
        let rec = counts(BenchRecord::from_costs(
            "choco",
            r.wall_s,
            &r.client_cost,
            &r.server_cost,
        ))
        .param("sample", i)
        .param("image_input", image)
        .param("net", a.net.net_name())
        .param("profile", a.net.profile.name);
        out.emit(
            rec.field("client_time_s", client_s)
                .field("client_encrypt_s", c.encrypt_s)
                .field("client_decrypt_s", c.decrypt_s)
                .field("client_clear_layers_s", c.plain_s)
                .field("client_keygen_s", c.keygen_s)
                .field("local_time_s", local)
                .field(
                    "local_baseline",
                    if local_float_s.is_some() {
                        "native-f32"
                    } else {
                        "fixed-point-reference"
                    },
                )
                .field("local_fixed_point_s", local_fixed_s)
                .field("client_overhead", client_s / local)
                .field("client_bytes", c.bytes_up + c.bytes_down)
                .field("client_bytes_up", c.bytes_up)
                .field("client_bytes_down", c.bytes_down)
                .field("setup_bytes", c.setup_bytes)
                .field(
                    "ciphertexts",
                    (c.ciphertexts_up + c.ciphertexts_down) as u64,
                )
                .field("server_eval_s", r.server.1)
                .field("flood_stat_bits", (r.server.0 * 10.0).floor() / 10.0)
                .field("peak_rss_bytes", peak_rss())
                .field("class", r.client.class.unwrap_or(usize::MAX) as u64),
        );
    }
    Ok(())
}

/// Rotations and plaintext products of the server's kernels per plaintext prime, counted by
/// running each layer's plan on the counting backend (the same counts on every backend).
fn server_op_counts(client: &ChocoClient) -> Result<(u64, u64), Error> {
    let (mut rotations, mut sc_mults) = (0u64, 0u64);
    for plan in client.plans() {
        let (row_len, slots) = plan.slot_layout();
        let ev = CountingEvaluator::new(row_len, slots / row_len);
        // Nonzero weights: the conv kernel skips all-zero plaintexts.
        let prep = plan.prepare(&ev, &vec![1; plan.weights()])?;
        plan.eval(&ev, &prep, &vec![(); plan.in_cts()])?;
        let c = ev.counter().snapshot();
        rotations += c.perm + c.hst_perm;
        sc_mults += c.sc_mult;
    }
    Ok((rotations, sc_mults))
}

/// One application session: the client's algorithm on the secure service, checked against the
/// same algorithm in the clear, timed against the f64 algorithm run locally.
fn run_app(a: &ChocoArgs, name: &str, out: &mut Reporter) -> Result<(), Error> {
    use secinfer_nn::layers::choco::apps::*;
    use secinfer_nn::layers::choco::{on_threads, serve_linear, LinearClient, LinearServer};
    let read = |f: &str| std::fs::read_to_string(a.data.join(f));
    type Client<'a> =
        Box<dyn Fn(&mut dyn LinearOracle) -> secinfer_nn::Result<Vec<i64>> + Send + Sync + 'a>;
    let (app, client, local): (App, Client<'_>, Box<dyn Fn()>) = match name {
        "pagerank" => {
            let (n, edges) = parse_edges(&read("karate.edges")?)?;
            let v = vec![1.0 / n as f64; n];
            let v2 = v.clone();
            (
                pagerank_app(n, &edges),
                Box::new(move |o| pagerank_client(o, &v, 0.85, 20)),
                Box::new(move || {
                    std::hint::black_box(pagerank_float(n, &edges, &v2, 0.85, 20));
                }),
            )
        }
        "kmeans" => {
            let (xs, _) = parse_iris(&read("iris.csv")?)?;
            let c = kmeans_fit(&xs, &[0, 50, 100], 10);
            let (xs2, c2) = (xs.clone(), c.clone());
            (
                kmeans_app(&c),
                Box::new(move |o| {
                    Ok(kmeans_client(o, c.len(), &xs)?
                        .into_iter()
                        .map(|v| v as i64)
                        .collect())
                }),
                Box::new(move || {
                    for x in &xs2 {
                        std::hint::black_box(nearest_float(&c2, x));
                    }
                }),
            )
        }
        _ => {
            let (xs, ys) = parse_iris(&read("iris.csv")?)?;
            let (mut refs, mut labels, mut queries) = (Vec::new(), Vec::new(), Vec::new());
            for (i, (x, y)) in xs.iter().zip(&ys).enumerate() {
                if i % 5 == 0 {
                    queries.push(*x);
                } else {
                    refs.push(*x);
                    labels.push(*y);
                }
            }
            let (r2, l2, q2) = (refs.clone(), labels.clone(), queries.clone());
            let n = refs.len();
            (
                knn_app(&refs, &labels),
                Box::new(move |o| {
                    Ok(knn_client(o, n, 5, &queries)?
                        .into_iter()
                        .map(|c| c as i64)
                        .collect())
                }),
                Box::new(move || {
                    for q in &q2 {
                        std::hint::black_box(knn_float(&r2, &l2, 5, q));
                    }
                }),
            )
        }
    };
    let want = client(&mut PlainOracle(&app))?;
    let local_s = time_it(local);
    let server = LinearServer::new(&app.spec, &app.mats, app.max_input)?;
    let threads = a.client_threads;
    let r = run_pair(
        &a.net,
        |ch| {
            Ok(on_threads(threads, || {
                let mut c = LinearClient::connect(ch, &app.spec)?;
                let res = client(&mut c)?;
                Ok((res, c.done()?))
            })?)
        },
        |ch| Ok(serve_linear(ch, &server)?),
    )?;
    let (got, cost) = &r.client;
    if *got != want {
        return Err(Error::msg(format!(
            "bench choco --app {name}: the secure run differs from the run in the clear"
        )));
    }
    let client_s = cost.encrypt_s + cost.decrypt_s;
    out.emit(
        BenchRecord::from_costs("choco", r.wall_s, &r.client_cost, &r.server_cost)
            .param("app", name)
            .param("client_threads", a.client_threads)
            .param("net", a.net.net_name())
            .param("plaintext_primes", server.primes().len() as u64)
            .field("calls", r.server.0 as u64)
            .field("flood_stat_bits", (r.server.1 * 10.0).floor() / 10.0)
            .field("client_time_s", client_s)
            .field("client_encrypt_s", cost.encrypt_s)
            .field("client_decrypt_s", cost.decrypt_s)
            .field("client_keygen_s", cost.keygen_s)
            .field("local_time_s", local_s)
            .field("local_baseline", "native-f64")
            .field("client_overhead", client_s / local_s)
            .field("client_bytes", cost.bytes_up + cost.bytes_down)
            .field("client_bytes_up", cost.bytes_up)
            .field("client_bytes_down", cost.bytes_down)
            .field("setup_bytes", cost.setup_bytes),
    );
    Ok(())
}
