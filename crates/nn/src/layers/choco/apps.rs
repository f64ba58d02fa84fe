//! CHOCO's applications beyond DNNs (van der Hagen & Lucia, ASPLOS '22, "diverse
//! applications"), on the client-aided linear service: the server's linear algebra runs on
//! ciphertexts, the client's nonlinear steps in the clear. Each app's client algorithm runs
//! against a [`LinearOracle`]: the secure client, or [`PlainOracle`] (the same integers in the
//! clear, the reference the secure run must equal bit for bit).
//!
//! Who owns what, and what the client sees:
//! * **PageRank**: the server owns the graph (its column-stochastic link matrix); the client
//!   owns the personalisation vector and runs the power iteration `r ← α·M·r + (1 − α)·v`,
//!   seeing every iterate `M·r`.
//! * **k-means assignment**: the server owns the centroids; the client owns the points and
//!   sees, per point, `−2·c·x + ‖c‖²` for every centroid (its distances up to ‖x‖²).
//! * **kNN**: the server owns a labelled reference set; the client owns the queries, sees each
//!   query's distance to every reference point, picks the k nearest, and gets the class votes
//!   of its selection (`L·s`, the labels stay with the server except through those counts).
//!   Queries travel in batches of [`KNN_BATCH`]: two calls per batch.
use super::service::LinearSpec;
use crate::error::{NnError, Result};

/// `W_op·x + b_op` over the integers.
pub trait LinearOracle {
    fn apply(&mut self, op: usize, x: &[i64]) -> Result<Vec<i128>>;
}

impl<C: secinfer_net::Channel> LinearOracle for super::service::LinearClient<'_, C> {
    fn apply(&mut self, op: usize, x: &[i64]) -> Result<Vec<i128>> {
        super::service::LinearClient::apply(self, op, x)
    }
}

/// The matrices in the clear: the reference.
pub struct PlainOracle<'a>(pub &'a App);

impl LinearOracle for PlainOracle<'_> {
    fn apply(&mut self, op: usize, x: &[i64]) -> Result<Vec<i128>> {
        let (rows, cols) = self.0.spec.shapes[op];
        let (w, b) = &self.0.mats[op];
        if x.len() != cols {
            return Err(NnError::Input(format!(
                "{} values for {cols} columns",
                x.len()
            )));
        }
        Ok((0..rows)
            .map(|r| {
                w[r * cols..(r + 1) * cols]
                    .iter()
                    .zip(x)
                    .map(|(a, v)| *a as i128 * *v as i128)
                    .sum::<i128>()
                    + b[r] as i128
            })
            .collect())
    }
}

/// A server's matrices and the public spec (shapes and the bound their inputs keep to).
pub struct App {
    pub spec: LinearSpec,
    pub mats: Vec<(Vec<i64>, Vec<i64>)>,
    /// Largest |input| the client sends.
    pub max_input: u64,
}

impl App {
    fn new(mats: Vec<(usize, usize, Vec<i64>, Vec<i64>)>, max_input: u64) -> App {
        let bound = mats
            .iter()
            .flat_map(|(_, c, w, b)| {
                w.chunks(*c).zip(b).map(|(row, bi)| {
                    row.iter().map(|v| v.unsigned_abs() as u128).sum::<u128>() * max_input as u128
                        + bi.unsigned_abs() as u128
                })
            })
            .max()
            .unwrap_or(1)
            .max(1);
        App {
            spec: LinearSpec {
                shapes: mats.iter().map(|(r, c, _, _)| (*r, *c)).collect(),
                bound,
                supports: Vec::new(),
            },
            mats: mats.into_iter().map(|(_, _, w, b)| (w, b)).collect(),
            max_input,
        }
    }
}

/// Fractional bits of PageRank's fixed point.
pub const PR_FRAC: u32 = 16;
/// Fractional bits of the iris features.
pub const IRIS_FRAC: u32 = 8;

fn parse_err(what: &str, line: usize, why: &str) -> NnError {
    NnError::Input(format!("{what} line {}: {why}", line + 1))
}

/// An edge list (`u v` per line, `#` comments): `(nodes, edges)`; at most 4,096 nodes.
pub fn parse_edges(text: &str) -> Result<(usize, Vec<(usize, usize)>)> {
    let mut edges = Vec::new();
    let mut n = 0;
    for (i, l) in text.lines().enumerate() {
        let l = l.trim();
        if l.is_empty() || l.starts_with('#') {
            continue;
        }
        let mut it = l.split_whitespace().map(str::parse::<usize>);
        let (Some(Ok(u)), Some(Ok(v)), None) = (it.next(), it.next(), it.next()) else {
            return Err(parse_err("edges", i, "expected two node numbers"));
        };
        if u.max(v) >= 4096 {
            return Err(parse_err("edges", i, "node number above 4095"));
        }
        n = n.max(u.max(v) + 1);
        edges.push((u, v));
    }
    Ok((n, edges))
}

/// Iris-style CSV (4 features, then the class 0–2; `#` comments): `(features, classes)`.
pub fn parse_iris(text: &str) -> Result<(Vec<[f64; 4]>, Vec<usize>)> {
    let (mut xs, mut ys) = (Vec::new(), Vec::new());
    for (i, l) in text.lines().enumerate() {
        let l = l.trim();
        if l.is_empty() || l.starts_with('#') {
            continue;
        }
        let f: Vec<&str> = l.split(',').collect();
        if f.len() != 5 {
            return Err(parse_err("iris", i, "expected 5 fields"));
        }
        let mut x = [0f64; 4];
        for (d, s) in x.iter_mut().zip(&f[..4]) {
            *d = s
                .trim()
                .parse()
                .ok()
                .filter(|v: &f64| (0.0..100.0).contains(v))
                .ok_or_else(|| parse_err("iris", i, "feature not in [0, 100)"))?;
        }
        let y: usize = f[4]
            .trim()
            .parse()
            .ok()
            .filter(|c| *c < 3)
            .ok_or_else(|| parse_err("iris", i, "class not 0, 1 or 2"))?;
        xs.push(x);
        ys.push(y);
    }
    Ok((xs, ys))
}

fn q(v: f64, frac: u32) -> i64 {
    (v * (1u64 << frac) as f64).round() as i64
}

// ---------------------------------------------------------------------------------------------
// PageRank

/// The server's link matrix of an undirected graph, column-stochastic, in 2^-16 units.
pub fn pagerank_app(n: usize, edges: &[(usize, usize)]) -> App {
    let mut deg = vec![0usize; n];
    for &(u, v) in edges {
        deg[u] += 1;
        deg[v] += 1;
    }
    let mut w = vec![0i64; n * n];
    for &(u, v) in edges {
        w[v * n + u] = q(1.0 / deg[u] as f64, PR_FRAC);
        w[u * n + v] = q(1.0 / deg[v] as f64, PR_FRAC);
    }
    App::new(vec![(n, n, w, vec![0; n])], 1 << PR_FRAC)
}

/// The client's power iteration on `oracle`: `iters` steps of `r ← α·M·r + (1 − α)·v`, in
/// 2^-16 units (`v` sums to 1). Returns the rank vector.
pub fn pagerank_client(
    oracle: &mut dyn LinearOracle,
    v: &[f64],
    alpha: f64,
    iters: usize,
) -> Result<Vec<i64>> {
    let vq: Vec<i64> = v.iter().map(|x| q(*x, PR_FRAC)).collect();
    let aq = q(alpha, PR_FRAC) as i128;
    let one = 1i128 << PR_FRAC;
    let mut r = vq.clone();
    for _ in 0..iters {
        let y = oracle.apply(0, &r)?;
        // y carries 2^-32 units; α·y ≫ 32 returns to 2^-16.
        r = y
            .iter()
            .zip(&vq)
            .map(|(yi, vi)| {
                ((aq * yi) >> (2 * PR_FRAC)) as i64 + (((one - aq) * *vi as i128) >> PR_FRAC) as i64
            })
            .map(|x| x.clamp(0, 1 << PR_FRAC))
            .collect();
    }
    Ok(r)
}

/// PageRank in f64, the float reference.
pub fn pagerank_float(
    n: usize,
    edges: &[(usize, usize)],
    v: &[f64],
    alpha: f64,
    iters: usize,
) -> Vec<f64> {
    let mut deg = vec![0usize; n];
    for &(u, w) in edges {
        deg[u] += 1;
        deg[w] += 1;
    }
    let mut r = v.to_vec();
    for _ in 0..iters {
        let mut y = vec![0f64; n];
        for &(u, w) in edges {
            y[w] += r[u] / deg[u] as f64;
            y[u] += r[w] / deg[w] as f64;
        }
        r = y
            .iter()
            .zip(v)
            .map(|(a, b)| alpha * a + (1.0 - alpha) * b)
            .collect();
    }
    r
}

// ---------------------------------------------------------------------------------------------
// k-means assignment

/// Points per call of the k-means assignment (a block-diagonal matrix of `BATCH` copies).
pub const KMEANS_BATCH: usize = 32;

/// Lloyd's k-means in f64 from the points `init` (the server's model).
pub fn kmeans_fit(xs: &[[f64; 4]], init: &[usize], iters: usize) -> Vec<[f64; 4]> {
    let mut c: Vec<[f64; 4]> = init.iter().map(|&i| xs[i]).collect();
    for _ in 0..iters {
        let mut sum = vec![[0f64; 4]; c.len()];
        let mut cnt = vec![0usize; c.len()];
        for x in xs {
            let j = nearest_float(&c, x);
            cnt[j] += 1;
            for (s, v) in sum[j].iter_mut().zip(x) {
                *s += v;
            }
        }
        for ((cj, s), n) in c.iter_mut().zip(&sum).zip(&cnt) {
            if *n > 0 {
                *cj = s.map(|v| v / *n as f64);
            }
        }
    }
    c
}

/// Index of the nearest centroid in f64 (ties: the lowest index).
pub fn nearest_float(c: &[[f64; 4]], x: &[f64; 4]) -> usize {
    let d = |a: &[f64; 4]| a.iter().zip(x).map(|(u, v)| (u - v) * (u - v)).sum::<f64>();
    (0..c.len()).fold(0, |b, j| if d(&c[j]) < d(&c[b]) { j } else { b })
}

/// The server's assignment matrix: `KMEANS_BATCH` diagonal blocks of −2·C, biases ‖c‖².
pub fn kmeans_app(c: &[[f64; 4]]) -> App {
    let k = c.len();
    let cq: Vec<[i64; 4]> = c.iter().map(|r| r.map(|v| q(v, IRIS_FRAC))).collect();
    let (rows, cols) = (KMEANS_BATCH * k, KMEANS_BATCH * 4);
    let mut w = vec![0i64; rows * cols];
    let mut b = vec![0i64; rows];
    for blk in 0..KMEANS_BATCH {
        for (j, cj) in cq.iter().enumerate() {
            let r = blk * k + j;
            for f in 0..4 {
                w[r * cols + blk * 4 + f] = -2 * cj[f];
            }
            b[r] = cj.iter().map(|v| v * v).sum();
        }
    }
    App::new(vec![(rows, cols, w, b)], 100 << IRIS_FRAC)
}

/// The client's assignment of its points: per batch one call, then the argmin per point.
pub fn kmeans_client(
    oracle: &mut dyn LinearOracle,
    k: usize,
    xs: &[[f64; 4]],
) -> Result<Vec<usize>> {
    let mut out = Vec::with_capacity(xs.len());
    for chunk in xs.chunks(KMEANS_BATCH) {
        let mut x = vec![0i64; KMEANS_BATCH * 4];
        for (i, p) in chunk.iter().enumerate() {
            for f in 0..4 {
                x[i * 4 + f] = q(p[f], IRIS_FRAC);
            }
        }
        let y = oracle.apply(0, &x)?;
        for i in 0..chunk.len() {
            let d = &y[i * k..(i + 1) * k];
            out.push((0..k).fold(0, |b, j| if d[j] < d[b] { j } else { b }));
        }
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// kNN

/// Queries per batch of the kNN: their distances come back from one call, their votes from a
/// second (16 × 120 iris distances fill one 2,048-slot window; the server's distance matrix
/// is held dense, `(16·n)²` integers, before its 7 nonzero diagonals are encoded).
pub const KNN_BATCH: usize = 16;

/// Widest window of the service's Dense kernel (redundant packing at n = 8192).
fn max_window() -> usize {
    secinfer_he::choco::RING_DEGREE / 2 / secinfer_he::choco::Packing::Redundant.footprint(1)
}

/// The batched kNN's public layout.
struct KnnLayout {
    /// Reference points, and their count rounded up to a multiple of 4.
    n: usize,
    n4: usize,
    /// Rows per output window of the votes product (3 per query, to a power of two).
    m: usize,
    /// Input windows of the votes product.
    chunks: usize,
}

impl KnnLayout {
    fn new(n: usize) -> KnnLayout {
        let w = max_window();
        let m = (3 * KNN_BATCH).next_power_of_two().min(w);
        KnnLayout {
            n,
            n4: n.div_ceil(4) * 4,
            m,
            chunks: n.div_ceil(w / m).max(1),
        }
    }

    /// Column of the votes input holding reference `i` for output row `r` (`w / m` references
    /// per window, `m` apart, so each row's sum is the kernel's rotate-and-sum alone).
    fn vote_col(&self, i: usize, r: usize) -> usize {
        let w = max_window();
        let per = w / self.m;
        (i / per) * w + (i % per) * self.m + r
    }
}

/// The server's matrices for batches of `KNN_BATCH` queries.
/// * op 0, the distances: row `b·n4 + i` is `−2·R_i·q_b + ‖R_i‖²` and reads the 4 columns
///   `4⌊row/4⌋ + f`, where the client puts query b's features (every block of `n4` columns
///   holds its query 4 times per 4 rows), so the matrix has 7 nonzero diagonals and one call
///   carries the whole batch in ⌈KNN_BATCH·n4 / 2048⌉ ciphertexts per prime;
/// * op 1, the votes: row `3·b + y` counts the selected references of class y for query b, each
///   reference's indicator at [`KnnLayout::vote_col`] (one nonzero diagonal per window).
pub fn knn_app(refs: &[[f64; 4]], labels: &[usize]) -> App {
    let lay = KnnLayout::new(refs.len());
    let rows = KNN_BATCH * lay.n4;
    let mut w = vec![0i64; rows * rows];
    let mut b = vec![0i64; rows];
    for blk in 0..KNN_BATCH {
        for (i, x) in refs.iter().enumerate() {
            let r = blk * lay.n4 + i;
            let xq = x.map(|v| q(v, IRIS_FRAC));
            for f in 0..4 {
                w[r * rows + r / 4 * 4 + f] = -2 * xq[f];
            }
            b[r] = xq.iter().map(|v| v * v).sum();
        }
    }
    let vcols = lay.chunks * max_window();
    let mut l = vec![0i64; 3 * KNN_BATCH * vcols];
    for blk in 0..KNN_BATCH {
        for (i, &y) in labels.iter().enumerate() {
            let r = 3 * blk + y;
            l[r * vcols + lay.vote_col(i, r)] = 1;
        }
    }
    let mut app = App::new(
        vec![
            (rows, rows, w, b),
            (3 * KNN_BATCH, vcols, l, vec![0; 3 * KNN_BATCH]),
        ],
        100 << IRIS_FRAC,
    );
    // Distances: row j reads columns j − 3 … j + 3 of its window (m = w, rows ≥ w or one
    // window); votes: one diagonal.
    let m = rows.next_power_of_two().min(max_window());
    app.spec.supports = vec![Some(vec![0, 1, 2, 3, m - 3, m - 2, m - 1]), Some(vec![0])];
    app
}

/// The client's kNN classification of `queries`, `KNN_BATCH` per two calls: distances, the
/// `k` nearest per query (ties: the lower index), their votes, the majority (ties: the lower
/// class).
pub fn knn_client(
    oracle: &mut dyn LinearOracle,
    n_refs: usize,
    k: usize,
    queries: &[[f64; 4]],
) -> Result<Vec<usize>> {
    let lay = KnnLayout::new(n_refs);
    let mut out = Vec::with_capacity(queries.len());
    for batch in queries.chunks(KNN_BATCH) {
        let mut x = vec![0i64; KNN_BATCH * lay.n4];
        for (blk, qr) in batch.iter().enumerate() {
            let qx = qr.map(|v| q(v, IRIS_FRAC));
            for (c, v) in x[blk * lay.n4..(blk + 1) * lay.n4].iter_mut().enumerate() {
                *v = qx[c % 4];
            }
        }
        let d = oracle.apply(0, &x)?;
        let mut s = vec![0i64; lay.chunks * max_window()];
        for blk in 0..batch.len() {
            let d = &d[blk * lay.n4..blk * lay.n4 + lay.n];
            let mut idx: Vec<usize> = (0..lay.n).collect();
            idx.sort_by_key(|&i| (d[i], i));
            for &i in idx.iter().take(k) {
                for y in 0..3 {
                    s[lay.vote_col(i, 3 * blk + y)] = 1;
                }
            }
        }
        let votes = oracle.apply(1, &s)?;
        for blk in 0..batch.len() {
            let v = &votes[3 * blk..3 * blk + 3];
            out.push((0..3).fold(0, |b, c| if v[c] > v[b] { c } else { b }));
        }
    }
    Ok(out)
}

/// kNN in f64, the float reference.
pub fn knn_float(refs: &[[f64; 4]], labels: &[usize], k: usize, query: &[f64; 4]) -> usize {
    let d = |a: &[f64; 4]| {
        a.iter()
            .zip(query)
            .map(|(u, v)| (u - v) * (u - v))
            .sum::<f64>()
    };
    let mut idx: Vec<usize> = (0..refs.len()).collect();
    idx.sort_by(|&a, &b| d(&refs[a]).total_cmp(&d(&refs[b])).then(a.cmp(&b)));
    let mut votes = [0usize; 3];
    for &i in idx.iter().take(k) {
        votes[labels[i]] += 1;
    }
    (0..3).fold(0, |b, c| if votes[c] > votes[b] { c } else { b })
}
