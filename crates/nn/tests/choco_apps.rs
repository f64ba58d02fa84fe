//! CHOCO's applications on the client-aided linear service, on the real data shipped under
//! data/choco: the secure run equals the same algorithm on the matrices in the clear bit for
//! bit, and that fixed-point reference is within a stated tolerance of f64.
#![allow(clippy::unwrap_used, reason = "tests: a panic is the failure report")]
use secinfer_net::simulate;
use secinfer_nn::layers::choco::apps::*;
use secinfer_nn::layers::choco::{serve_linear, LinearClient, LinearServer};
use secinfer_nn::NnError;
use std::path::PathBuf;

fn data(name: &str) -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../data/choco")
        .join(name);
    std::fs::read_to_string(p).unwrap()
}

/// Runs `client` against `app` over a simulated channel: (its result, calls served).
fn secure<T: Send>(
    app: &App,
    client: impl FnOnce(&mut dyn LinearOracle) -> secinfer_nn::Result<T> + Send,
) -> (T, usize) {
    let server = LinearServer::new(&app.spec, &app.mats, app.max_input).unwrap();
    let r = simulate(
        |ch| {
            let mut c = LinearClient::connect(ch, &app.spec)?;
            let out = client(&mut c)?;
            let cost = c.done()?;
            assert!(cost.bytes_up > 0 && cost.bytes_down > 0);
            Ok::<_, NnError>(out)
        },
        |ch| serve_linear(ch, &server),
    );
    let (calls, stat) = r.server.output.unwrap();
    assert!(stat >= 40.0, "flooding 2^-{stat}");
    (r.client.output.unwrap(), calls)
}

#[test]
fn pagerank_on_karate_equals_reference_and_float() {
    let (n, edges) = parse_edges(&data("karate.edges")).unwrap();
    assert_eq!((n, edges.len()), (34, 78));
    let app = pagerank_app(n, &edges);
    let v = vec![1.0 / n as f64; n];
    let iters = 12;
    let want = pagerank_client(&mut PlainOracle(&app), &v, 0.85, iters).unwrap();
    let (got, calls) = secure(&app, |o| pagerank_client(o, &v, 0.85, iters));
    assert_eq!(got, want);
    assert_eq!(calls, iters);
    let f = pagerank_float(n, &edges, &v, 0.85, iters);
    for (a, b) in want.iter().zip(&f) {
        assert!((*a as f64 / 65536.0 - b).abs() < 1e-3, "{a} vs {b}");
    }
    // The hubs of the club (its instructor and president) rank first and second.
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(got[i]));
    assert_eq!(&order[..2], &[33, 0]);
}

#[test]
fn kmeans_assignment_on_iris_equals_reference_and_float() {
    let (xs, _) = parse_iris(&data("iris.csv")).unwrap();
    assert_eq!(xs.len(), 150);
    let c = kmeans_fit(&xs, &[0, 50, 100], 10);
    let app = kmeans_app(&c);
    let want = kmeans_client(&mut PlainOracle(&app), c.len(), &xs).unwrap();
    let (got, calls) = secure(&app, |o| kmeans_client(o, c.len(), &xs));
    assert_eq!(got, want);
    assert_eq!(calls, xs.len().div_ceil(KMEANS_BATCH));
    let agree = xs
        .iter()
        .zip(&want)
        .filter(|(x, a)| nearest_float(&c, x) == **a)
        .count();
    assert!(agree >= 148, "{agree}/150 assignments agree with f64");
}

#[test]
fn knn_on_iris_equals_reference_and_float() {
    let (xs, ys) = parse_iris(&data("iris.csv")).unwrap();
    let (mut refs, mut labels, mut queries) = (Vec::new(), Vec::new(), Vec::new());
    for (i, (x, y)) in xs.iter().zip(&ys).enumerate() {
        if i % 5 == 0 {
            queries.push((*x, *y));
        } else {
            refs.push(*x);
            labels.push(*y);
        }
    }
    let app = knn_app(&refs, &labels);
    let qs: Vec<[f64; 4]> = queries.iter().map(|(q, _)| *q).collect();
    let want = knn_client(&mut PlainOracle(&app), refs.len(), 5, &qs).unwrap();
    // Every query in two calls per batch of KNN_BATCH, the last batch part-filled.
    let (got, calls) = secure(&app, |o| knn_client(o, refs.len(), 5, &qs));
    assert_eq!(got, want);
    assert_eq!(qs.len(), 30);
    assert_eq!(calls, 2 * qs.len().div_ceil(KNN_BATCH));
    // The fixed-point kNN equals f64 kNN on every held-out query.
    for (q, w) in qs.iter().zip(&want) {
        assert_eq!(*w, knn_float(&refs, &labels, 5, q));
    }
}

#[test]
fn hostile_data_and_oversized_products_are_refused() {
    assert!(matches!(parse_edges("0 1\n2 x\n"), Err(NnError::Input(_))));
    assert!(matches!(parse_edges("0 99999\n"), Err(NnError::Input(_))));
    assert!(matches!(parse_iris("1,2,3,4,7\n"), Err(NnError::Input(_))));
    assert!(matches!(parse_iris("1,2,3\n"), Err(NnError::Input(_))));
    let app = pagerank_app(3, &[(0, 1), (1, 2)]);
    assert!(matches!(
        LinearServer::new(&app.spec, &app.mats, app.max_input * 4),
        Err(NnError::Input(_))
    ));
}
