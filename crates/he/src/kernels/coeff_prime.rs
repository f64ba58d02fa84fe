//! Coefficient-encoded (Cheetah-style, `cheetah::hom_mat_mul`) matrix products on a BFV set
//! with a prime plaintext modulus t (the SIMD sets, e.g. `n8192-t23`), ending in additive
//! shares mod t: no rotations and no Galois keys.
//!
//! The product is W·X for a server matrix W (rows × cols, entries mod t) and `count` client
//! vectors X (each of cols values mod t). The polynomial layout is [`Layout`]'s (Cheetah's
//! split into m_w rows, n_w columns and k_w vectors per product, m_w·n_w·k_w ≤ n), which only
//! relies on negacyclic products and so holds in Z_t[Y]/(Y^n + 1) for any t; this module
//! encodes the weights mod t (centered, so the noise of a product grows with |W|, not with t)
//! and picks the split with [`CoeffPlan::new`]. A convolution runs as this product on the
//! client's im2col vectors (one per output pixel, public geometry), so strides and padding
//! cost nothing extra but each input value is sent k_h·k_w times: cheap for small images
//! and few channels, dear for wide layers, which is what the per-layer cost model weighs.
//!
//! The server masks each result with a fresh uniform r mod t (Enc(W·x − r)), floods the
//! noise of the result coefficients to the requested statistical distance and switches to a
//! small power-of-two modulus, sending c0 only at the result coefficients
//! (`Params::finish_response_at`); the client's share is its decryption, the server's r.
use rayon::prelude::*;

use super::coeff::Layout;
use super::Flood;
use crate::arith::Sampler;
use crate::bfv::{Ciphertext, Plaintext, PublicKey, SecretKey, SparseResponse};
use crate::params::Params;
use crate::HeError;

type Result<T, E = HeError> = std::result::Result<T, E>;

/// A W·X product of `count` vectors in coefficient encoding (public: shapes only).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CoeffPlan {
    pub lay: Layout,
    /// Vectors in the product.
    pub count: usize,
    /// log2 of the response modulus.
    pub log_q_out: u32,
    /// Wire bytes of one seeded upload.
    pub upload_bytes: usize,
}

/// log2 of the response modulus for plaintext modulus t on `params`: t, 2 bits of slack for
/// the rounding, 10 std of the switch's rounding noise and 2 bits of margin (as
/// [`super::finish_outputs`]).
pub fn response_bits(params: &Params) -> u32 {
    let n = params.n() as f64;
    let round_bound = 10.0 * ((1.0 + n * 2.0 / 3.0) / 12.0).sqrt();
    ((params.t() as f64).log2() + 2.0 + round_bound.log2() + 2.0).ceil() as u32
}

/// Wire bytes of one seeded upload on `params`.
pub fn upload_bytes(params: &Params) -> usize {
    4 + 32 + params.residue_bytes() * params.n() * params.num_q()
}

impl CoeffPlan {
    /// The split of a rows × cols product of `count` vectors with the fewest bytes on the
    /// wire. Chunk widths are the divisor-like widths ⌈cols / k⌉ and group sizes every count
    /// up to the ring's room; the bytes of a layout are closed-form, so the search stays in
    /// microseconds even for wide layers.
    pub fn new(rows: usize, cols: usize, count: usize, params: &Params) -> Result<CoeffPlan> {
        let n = params.n();
        if rows == 0 || cols == 0 || count == 0 {
            return Err(HeError::Shape(format!(
                "coefficient product {rows}×{cols} of {count} vectors"
            )));
        }
        let log_q_out = response_bits(params);
        let up = upload_bytes(params);
        let resp = |k: usize| SparseResponse::wire_len(params, k, log_q_out);
        let mut best: Option<(usize, Layout)> = None;
        let mut last_width = 0;
        for chunks in 1..=cols {
            let width = cols.div_ceil(chunks);
            if width == last_width || width > n {
                continue;
            }
            last_width = width;
            let max_group = count.min(n / width);
            // Group sizes: every one up to 64, then powers of two and the largest (the bytes
            // change slowly with the group once responses carry many results).
            let mut groups: Vec<usize> = (1..=max_group.min(64)).collect();
            let mut g = 128;
            while g < max_group {
                groups.push(g);
                g *= 2;
            }
            groups.push(max_group);
            for g in groups {
                let l = Layout::shaped(rows, cols, n, g, chunks)?;
                let full = l.blocks - 1;
                let per_group = l.chunks * up
                    + full * resp(g * l.per_block)
                    + resp(g * l.rows_in(l.blocks - 1));
                let cost = l.groups(count) * per_group;
                if best.as_ref().is_none_or(|(c, _)| cost < *c) {
                    best = Some((cost, l));
                }
            }
        }
        let (_, lay) = best.ok_or_else(|| {
            HeError::Shape(format!(
                "no coefficient layout for {rows}×{cols} in n = {n}"
            ))
        })?;
        Ok(CoeffPlan {
            lay,
            count,
            log_q_out,
            upload_bytes: up,
        })
    }

    pub fn groups(&self) -> usize {
        self.lay.groups(self.count)
    }
    /// Ciphertexts the client uploads.
    pub fn in_cts(&self) -> usize {
        self.groups() * self.lay.chunks
    }
    /// Responses the server returns.
    pub fn out_cts(&self) -> usize {
        self.groups() * self.lay.blocks
    }
    /// Plaintext–ciphertext products the server computes.
    pub fn sc_mults(&self) -> usize {
        self.groups() * self.lay.blocks * self.lay.chunks
    }
    /// Weight plaintexts the server encodes (shared by every group).
    pub fn plaintext_count(&self) -> usize {
        self.lay.blocks * self.lay.chunks
    }
    /// Results of group `gi` (the last group may be partial).
    fn vectors_in(&self, gi: usize) -> usize {
        self.lay.group.min(self.count - gi * self.lay.group)
    }
    /// Result coefficients of response `k` (group-major, then block).
    fn positions(&self, k: usize) -> Vec<usize> {
        let (gi, b) = (k / self.lay.blocks, k % self.lay.blocks);
        let used = self.vectors_in(gi);
        (0..used)
            .flat_map(|u| (0..self.lay.rows_in(b)).map(move |i| self.lay.pos(u, i)))
            .collect()
    }
    /// Wire bytes of response `k`.
    pub fn response_len(&self, params: &Params, k: usize) -> usize {
        SparseResponse::wire_len(params, self.positions(k).len(), self.log_q_out)
    }
    /// Bytes each way: (up, down).
    pub fn wire_bytes(&self, params: &Params) -> (usize, usize) {
        let down = (0..self.out_cts())
            .map(|k| self.response_len(params, k))
            .sum();
        (self.in_cts() * self.upload_bytes, down)
    }

    /// Client: the input polynomials of `xs` (`count` vectors of `cols` values mod t, one
    /// after the other), group-major then chunk.
    pub fn pack(&self, xs: &[u64]) -> Result<Vec<Vec<u64>>> {
        let cols = self.lay.cols;
        if xs.len() != self.count * cols {
            return Err(HeError::Shape(format!(
                "{} input values for {} vectors of {cols}",
                xs.len(),
                self.count
            )));
        }
        let vecs: Vec<&[u64]> = xs.chunks_exact(cols).collect();
        Ok(vecs
            .chunks(self.lay.group)
            .flat_map(|g| self.lay.input_polys(g))
            .collect())
    }

    /// Server setup: W (rows × cols row-major, entries mod t) as the layout's plaintexts,
    /// block-major (block b, chunk c at b·chunks + c). W_{b,c} holds W[b·m_w + i][c·n_w + j]
    /// at Y^{i·n_w + n_w − 1 − j}.
    pub fn prepare(&self, params: &Params, w: &[u64]) -> Result<Vec<Plaintext>> {
        let lay = &self.lay;
        if w.len() != lay.rows * lay.cols {
            return Err(HeError::Shape(format!(
                "{} weights for a {}×{} matrix",
                w.len(),
                lay.rows,
                lay.cols
            )));
        }
        let t = params.t();
        (0..lay.blocks * lay.chunks)
            .into_par_iter()
            .map(|k| {
                let (b, c) = (k / lay.chunks, k % lay.chunks);
                let mut p = vec![0u64; lay.n];
                let cols = c * lay.chunk..((c + 1) * lay.chunk).min(lay.cols);
                for i in 0..lay.rows_in(b) {
                    let row = b * lay.per_block + i;
                    for (j, col) in cols.clone().enumerate() {
                        p[i * lay.chunk + lay.chunk - 1 - j] = w[row * lay.cols + col] % t;
                    }
                }
                Plaintext::from_coeffs(params, &p)
            })
            .collect()
    }

    /// Server: Σ_c W_{b,c}·Enc(X_c) − r per group and block, flooded as `flood` asks and
    /// switched down. `cts` are the client's uploads in [`CoeffPlan::pack`]'s order. Returns
    /// the responses, the server's share (count × rows, vector-major) and the weakest
    /// statistical-flooding exponent reached.
    pub fn server(
        &self,
        params: &Params,
        pk: &PublicKey,
        pts: &[Plaintext],
        cts: &[Ciphertext],
        flood: Flood,
    ) -> Result<(Vec<Vec<u8>>, Vec<u64>, f64)> {
        let lay = &self.lay;
        if cts.len() != self.in_cts() || pts.len() != self.plaintext_count() {
            return Err(HeError::Shape(format!(
                "{} ciphertexts and {} plaintexts for a plan of {} and {}",
                cts.len(),
                pts.len(),
                self.in_cts(),
                self.plaintext_count()
            )));
        }
        let t = params.t();
        type Part = (Vec<u8>, Vec<u64>, f64);
        let parts: Vec<Result<Part>> = (0..self.out_cts())
            .into_par_iter()
            .map(|k| {
                let (gi, b) = (k / lay.blocks, k % lay.blocks);
                let xs = &cts[gi * lay.chunks..(gi + 1) * lay.chunks];
                let ws = &pts[b * lay.chunks..(b + 1) * lay.chunks];
                let mut prod = params.mul_plain(&xs[0], &ws[0]);
                for (x, w) in xs.iter().zip(ws).skip(1) {
                    params.add_assign(&mut prod, &params.mul_plain(x, w));
                }
                let (fb, stat) = flood_for(params, &prod, flood)?;
                let pos = self.positions(k);
                let mut prg = Sampler::from_os();
                let mask: Vec<u64> = pos.iter().map(|_| prg.uniform(t)).collect();
                let r = params.finish_response_at(prod, pk, fb, &pos, &mask, self.log_q_out)?;
                Ok((r.to_bytes(), mask, stat))
            })
            .collect();
        let mut bytes = Vec::with_capacity(parts.len());
        let mut masks = Vec::with_capacity(parts.len());
        let mut stat = f64::INFINITY;
        for p in parts {
            let (b, m, s) = p?;
            bytes.push(b);
            masks.push(m);
            stat = stat.min(s);
        }
        Ok((bytes, self.gather(&masks), stat))
    }

    /// Client: its share (count × rows, vector-major) from the responses.
    pub fn client(&self, sk: &SecretKey, responses: &[Vec<u8>]) -> Result<Vec<u64>> {
        let params = sk.params();
        if responses.len() != self.out_cts() {
            return Err(HeError::Shape(format!(
                "{} responses for {}",
                responses.len(),
                self.out_cts()
            )));
        }
        let vals: Vec<Result<Vec<u64>>> = responses
            .par_iter()
            .enumerate()
            .map(|(k, bytes)| {
                let pos = self.positions(k);
                let r = SparseResponse::from_bytes(params, pos.len(), bytes)?;
                sk.decrypt_sparse(&r, &pos)
            })
            .collect();
        let vals = vals.into_iter().collect::<Result<Vec<_>>>()?;
        Ok(self.gather(&vals))
    }

    /// Per-response values (as [`CoeffPlan::positions`] lists them) into count × rows,
    /// vector-major.
    fn gather(&self, vals: &[Vec<u64>]) -> Vec<u64> {
        let lay = &self.lay;
        let mut out = vec![0u64; self.count * lay.rows];
        for (k, v) in vals.iter().enumerate() {
            let (gi, b) = (k / lay.blocks, k % lay.blocks);
            let rows_in = lay.rows_in(b);
            for (idx, &val) in v.iter().enumerate() {
                let (u, i) = (idx / rows_in, idx % rows_in);
                out[(gi * lay.group + u) * lay.rows + b * lay.per_block + i] = val;
            }
        }
        out
    }
}

/// The flooding of one product ciphertext: (bits of the uniform flood, statistical exponent).
/// Uniform noise on [−2^b, 2^b] hides a shift e within |e|/(2^(b+1) + 1) per coefficient; with
/// n coefficients whose noise is below 2^log_e (10 std), the exponent is
/// log2(2^(b+1) + 1) − log2 n − log_e. The kernel noise and the flood share Δ/4 (the rest of
/// Δ/2 is for the switch's rounding, [`response_bits`]).
fn flood_for(params: &Params, ct: &Ciphertext, flood: Flood) -> Result<(u32, f64)> {
    let n = params.n() as f64;
    let sigma = params.set().sigma;
    let var = 2f64.powf(2.0 * ct.est_noise_log2()) + n * (2.0 / 3.0) * sigma * sigma * 2.0;
    let log_e = (10.0 * var.sqrt()).log2();
    // The flood gets what the kernel noise's bound leaves of the room.
    let room = super::flood_room(
        params.log2_q() - (params.t() as f64).log2() - 2.0 - 0.1,
        log_e,
    )
    .floor();
    let stat_of = |b: f64| ((b + 1.0).exp2() + 1.0).log2() - n.log2() - log_e;
    match flood {
        Flood::Off => Ok((0, 0.0)),
        Flood::Statistical(s) | Flood::BestEffort(s) => {
            let want = (s as f64 + n.log2() + log_e - 1.0).ceil().max(0.0);
            let b = want.min(room).max(0.0);
            let stat = stat_of(b);
            if matches!(flood, Flood::Statistical(_)) && stat < s as f64 {
                return Err(HeError::NoiseBudget(format!(
                    "coefficient flooding reaches 2^-{stat:.1}, below the required 2^-{s}"
                )));
            }
            Ok((b as u32, stat))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On `n8192-t23`, secure W·X (client share + server share mod t) equals the plaintext
    /// product for one vector and for several groups with a partial last group, several
    /// blocks and chunks, with 40-bit flooding; hostile response bytes are typed errors.
    #[test]
    fn shares_sum_to_the_product_mod_t() {
        let params = Params::by_name("n8192-t23").unwrap();
        let t = params.t();
        let sk = SecretKey::generate(&params);
        let pk = sk.public_key();
        let mut prg = Sampler::from_seed(&[3; 32]);
        for (rows, cols, count) in [(10, 784, 1), (16, 25, 576), (100, 256, 1), (7, 400, 9)] {
            let plan = CoeffPlan::new(rows, cols, count, &params).unwrap();
            // Small signed weights (as a network's), inputs anywhere mod t.
            let w: Vec<u64> = (0..rows * cols)
                .map(|_| (prg.uniform(255) as i64 - 127).rem_euclid(t as i64) as u64)
                .collect();
            let x: Vec<u64> = (0..count * cols).map(|_| prg.uniform(t)).collect();
            let pts = plan.prepare(&params, &w).unwrap();
            let cts: Vec<Ciphertext> = plan
                .pack(&x)
                .unwrap()
                .iter()
                .map(|p| sk.encrypt_coeffs(p).unwrap())
                .collect();
            let (resp, server, stat) = plan
                .server(&params, &pk, &pts, &cts, Flood::Statistical(40))
                .unwrap();
            assert!(stat >= 40.0, "{stat}");
            let (up, down) = plan.wire_bytes(&params);
            assert_eq!(down, resp.iter().map(|r| r.len()).sum::<usize>());
            assert_eq!(up, cts.len() * upload_bytes(&params));
            let client = plan.client(&sk, &resp).unwrap();
            for u in 0..count {
                for r in 0..rows {
                    let want = (0..cols).fold(0u128, |a, j| {
                        a + w[r * cols + j] as u128 * x[u * cols + j] as u128
                    }) % t as u128;
                    let got = (client[u * rows + r] + server[u * rows + r]) % t;
                    assert_eq!(
                        got as u128, want,
                        "{rows}×{cols}×{count} vector {u} row {r}"
                    );
                }
            }
            let mut bad = resp.clone();
            bad[0].pop();
            assert!(matches!(
                plan.client(&sk, &bad),
                Err(HeError::WrongLength { .. })
            ));
            assert!(plan.client(&sk, &resp[1..]).is_err());
        }
    }

    /// The layout search fits the ring and prefers narrow chunks when a product has many
    /// vectors (im2col of a small-channel convolution) and whole columns for one vector.
    #[test]
    fn layouts_fit_the_ring() {
        let params = Params::by_name("n8192-t23").unwrap();
        for (rows, cols, count) in [(128, 784, 1), (16, 25, 576), (64, 4096, 1), (3, 9, 4096)] {
            let p = CoeffPlan::new(rows, cols, count, &params).unwrap();
            let l = &p.lay;
            assert!(l.group * l.per_block * l.chunk <= l.n, "{p:?}");
            assert!(p.groups() * l.group >= count);
        }
        assert!(CoeffPlan::new(0, 3, 1, &params).is_err());
    }
}
