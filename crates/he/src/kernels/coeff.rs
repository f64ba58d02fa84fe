//! Coefficient-encoded (Cheetah-style, `cheetah::hom_mat_mul`) matrix products over Z_{2^32} on BFV with t = 2^32
//! (`n8192-z2k32`): no rotations, no Galois keys.
//!
//! The products are W·X for a server matrix W (rows × cols) and a batch X of client vectors
//! (cols × count), split as Cheetah's `HomMatMul` splits them into blocks of m_w rows, n_w
//! columns and k_w vectors with m_w·n_w·k_w ≤ n ([`Layout`]). Chunk c of a group of k_w vectors
//! is the polynomial X_c(Y) = Σ_u Σ_{j<n_w} x_{u, c·n_w + j} Y^{u·m_w·n_w + j}; block b of W,
//! chunk c, is W_{b,c}(Y) = Σ_{i<m_w} Σ_{j<n_w} W_{b·m_w + i, c·n_w + j} Y^{i·n_w + n_w−1−j}.
//! In X_c·W_{b,c} the coefficient of Y^{u·m_w·n_w + i·n_w + n_w − 1} is exactly
//! Σ_j W_ij x_{u,j} over the chunk's columns mod 2^32, and no other product term reaches it; so
//! Σ_c X_c·W_{b,c}, summed homomorphically (free on the wire), holds the whole inner products.
//! A response carries m_w·k_w results for one ≈ 45 KB c1, an upload n_w·k_w inputs for one
//! ≈ 131 KB c0: [`Layout::batched`] picks the split with the fewest bytes (narrow chunks, so
//! that many results share a response).
//!
//! The server masks each product with a fresh uniform r at the result coefficients
//! (Enc(W x − r)), floods the noise (as much as Δ/4 leaves room for: see [`flood_bits`]) and
//! switches the modulus down (`Params::finish_response_at`, which computes and sends c0 only
//! at the result coefficients); the client's share is the decrypted coefficient, the
//! server's the mask's.
use crate::arith::Sampler;
use crate::bfv::{Ciphertext, Plaintext, PublicKey, SecretKey, SparseResponse};
use crate::params::Params;
use crate::HeError;
use rayon::prelude::*;

type Result<T, E = HeError> = std::result::Result<T, E>;

pub const T_BITS: u32 = 32;
const T_MASK: u64 = (1u64 << T_BITS) - 1;

/// Where the entries of W and of the input vectors sit in the plaintexts and results
/// (cheetah::hom_mat_mul split, see the module docs): `per_block` rows (m_w), `chunk` columns
/// (n_w) and `group` vectors (k_w) per product, `per_block · chunk · group ≤ n`.
///
/// A product term of vector u', row i', columns j (of W) and j' (of x) lands at
/// u'·m_w·n_w + i'·n_w + n_w − 1 + (j' − j) with |j' − j| < n_w: a result position only when
/// j' = j, u' = u and i' = i. The terms of the last vector and row reach at most
/// k_w·m_w·n_w + n_w − 2, so past n they wrap negacyclically below n_w − 1, the first result.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    pub rows: usize,
    pub cols: usize,
    /// Columns per chunk (n_w); the last chunk may be narrower.
    pub chunk: usize,
    /// Chunks per input vector, ⌈cols / chunk⌉: the ciphertexts uploaded per group.
    pub chunks: usize,
    /// Rows per block (m_w).
    pub per_block: usize,
    pub blocks: usize,
    pub n: usize,
    /// Input vectors per group (k_w).
    pub group: usize,
}

impl Layout {
    /// One vector, whole columns: ⌊n / cols⌋ rows per block.
    pub fn new(rows: usize, cols: usize, n: usize) -> Result<Layout> {
        Self::shaped(rows, cols, n, 1, 1)
    }
    /// `group` vectors per ciphertext and the columns in `chunks` chunks of equal width
    /// (the last one narrower).
    pub fn shaped(
        rows: usize,
        cols: usize,
        n: usize,
        group: usize,
        chunks: usize,
    ) -> Result<Layout> {
        if cols == 0 || rows == 0 || group == 0 || chunks == 0 || chunks > cols {
            return Err(HeError::Shape(format!(
                "matrix {rows}×{cols} in {chunks} column chunks, {group} vectors per group"
            )));
        }
        let chunk = cols.div_ceil(chunks);
        if chunk * group > n {
            return Err(HeError::Shape(format!(
                "matrix {rows}×{cols} ({group} vectors of {chunk} columns) does not fit ring degree {n}"
            )));
        }
        let per_block = (n / chunk / group).min(rows);
        Ok(Layout {
            rows,
            cols,
            chunk,
            chunks: cols.div_ceil(chunk),
            per_block,
            blocks: rows.div_ceil(per_block),
            n,
            group,
        })
    }
    /// The layout for `count` vectors known at once (all steps' input projections, all
    /// hidden masks) with the fewest bytes: uploads of `up` bytes per ciphertext, and
    /// `resp(k)` bytes for a response carrying k results. Every chunk count and group size is
    /// tried (cols · count candidates: microseconds).
    pub fn batched(
        rows: usize,
        cols: usize,
        n: usize,
        count: usize,
        up: usize,
        resp: impl Fn(usize) -> usize,
    ) -> Result<Layout> {
        let mut best = Self::new(rows, cols, n)?;
        let cost = |l: &Layout| l.groups(count) * l.group_bytes(up, &resp);
        let mut best_cost = cost(&best);
        for chunks in 1..=cols {
            // Chunk counts of the same width give the same layout (`shaped` normalises them).
            if chunks > 1 && cols.div_ceil(chunks) == cols.div_ceil(chunks - 1) {
                continue;
            }
            for g in 1..=count.min(n / cols.div_ceil(chunks)) {
                let l = Self::shaped(rows, cols, n, g, chunks)?;
                let c = cost(&l);
                if c < best_cost {
                    (best, best_cost) = (l, c);
                }
            }
        }
        Ok(best)
    }
    /// Groups (of `group` vectors) that `count` vectors fill.
    pub fn groups(&self, count: usize) -> usize {
        count.div_ceil(self.group)
    }
    /// Bytes of one group: its uploads and its blocks' responses.
    pub fn group_bytes(&self, up: usize, resp: impl Fn(usize) -> usize) -> usize {
        self.chunks * up
            + (0..self.blocks)
                .map(|b| resp(self.group * self.rows_in(b)))
                .sum::<usize>()
    }
    /// The input polynomials of up to `group` vectors, one per column chunk.
    pub fn input_polys(&self, xs: &[&[u64]]) -> Vec<Vec<u64>> {
        (0..self.chunks)
            .map(|c| {
                let mut p = vec![0u64; self.n];
                let cols = c * self.chunk..((c + 1) * self.chunk).min(self.cols);
                for (u, x) in xs.iter().enumerate().take(self.group) {
                    let o = u * self.per_block * self.chunk;
                    let part = &x[cols.start.min(x.len())..cols.end.min(x.len())];
                    p[o..o + part.len()].copy_from_slice(part);
                }
                p
            })
            .collect()
    }
    /// The weight plaintexts (signed weights, row-major), block-major: block b, chunk c at
    /// index b·chunks + c.
    pub fn weight_plaintexts(&self, params: &Params, w: &[i64]) -> Result<Vec<Plaintext>> {
        if w.len() != self.rows * self.cols {
            return Err(HeError::Shape(format!(
                "{} weights for a {}×{} matrix",
                w.len(),
                self.rows,
                self.cols
            )));
        }
        // Independent NTTs per plaintext: spread them over the rayon pool.
        (0..self.blocks * self.chunks)
            .into_par_iter()
            .map(|k| {
                let p = self.weight_coeffs(w, k / self.chunks, k % self.chunks);
                Plaintext::from_coeffs(params, &p)
            })
            .collect()
    }
    /// The coefficients of W_{b,c} (mod 2^32) for row-major signed weights of the right size.
    fn weight_coeffs(&self, w: &[i64], b: usize, c: usize) -> Vec<u64> {
        let mut p = vec![0u64; self.n];
        let cols = c * self.chunk..((c + 1) * self.chunk).min(self.cols);
        for i in 0..self.rows_in(b) {
            let row = b * self.per_block + i;
            for (j, col) in cols.clone().enumerate() {
                p[i * self.chunk + self.chunk - 1 - j] = (w[row * self.cols + col] as u64) & T_MASK;
            }
        }
        p
    }
    /// Rows held by block `b`.
    pub fn rows_in(&self, b: usize) -> usize {
        self.per_block.min(self.rows - b * self.per_block)
    }
    /// Coefficient index of the result of input `u`, row `i` of a block.
    pub fn pos(&self, u: usize, i: usize) -> usize {
        (u * self.per_block + i) * self.chunk + self.chunk - 1
    }
    /// The result coefficients of block `b`, input-major.
    pub fn positions(&self, b: usize) -> Vec<usize> {
        (0..self.group)
            .flat_map(|u| (0..self.rows_in(b)).map(move |i| self.pos(u, i)))
            .collect()
    }
    /// Reads the results out of the block polynomials: `group × rows`, input-major.
    pub fn extract(&self, polys: &[Vec<u64>]) -> Vec<u64> {
        (0..self.group)
            .flat_map(|u| (0..self.rows).map(move |r| (u, r)))
            .map(|(u, r)| polys[r / self.per_block][self.pos(u, r % self.per_block)] & T_MASK)
            .collect()
    }
    /// The same order from per-block values listed as `positions(b)` lists them (value
    /// (u, i) of block b at index u·rows_in(b) + i).
    pub fn gather(&self, vals: &[Vec<u64>]) -> Vec<u64> {
        (0..self.group)
            .flat_map(|u| (0..self.rows).map(move |r| (u, r)))
            .map(|(u, r)| {
                let b = r / self.per_block;
                vals[b][u * self.rows_in(b) + r % self.per_block]
            })
            .collect()
    }
}

/// log2 of the response modulus: t, 2 bits of slack for the rounding, 10 std of the switch's
/// rounding noise, 2 bits of margin (as in the he crate's `finish_outputs`).
/// The statistical-distance exponent every response's flooding must reach (DESIGN.md §2).
pub const MIN_FLOOD_STAT_BITS: f64 = 40.0;

pub fn response_bits(params: &Params) -> u32 {
    let n = params.n() as f64;
    let round_bound = 10.0 * ((1.0 + n * 2.0 / 3.0) / 12.0).sqrt();
    (T_BITS as f64 + 2.0 + round_bound.log2() + 2.0).ceil() as u32
}

/// Flooding noise bits for a product ciphertext: as large as keeps flood + noise ≤ Δ/4.3; and
/// the statistical distance exponent reached (flood − log2 n − log2 of 10 std of the noise).
pub fn flood_bits(params: &Params, ct: &Ciphertext) -> (u32, f64) {
    let n = params.n() as f64;
    let sigma = params.set().sigma;
    let var = 2f64.powf(2.0 * ct.est_noise_log2()) + n * (2.0 / 3.0) * sigma * sigma * 2.0;
    let log_e = (10.0 * var.sqrt()).log2();
    let log_delta = params.log2_q() - T_BITS as f64;
    let bits = super::flood_room(log_delta - 2.0 - 0.1, log_e)
        .floor()
        .max(0.0);
    (bits as u32, bits - n.log2() - log_e)
}

/// Server: Σ_c W_{b,c}·Enc(X_c) − r for each block b, flooded and switched. `cts` are one
/// group's chunk ciphertexts (`lay.chunks` of them), `pts` the layout's weight plaintexts.
/// Returns the serialised responses and the server's share (the masks at the result
/// coefficients, one per row and vector), plus the weakest statistical-flooding exponent.
///
/// Each block's response carries c0 only at the block's result coefficients
/// (`Params::finish_response_at`): the rest of c0 is neither computed past the NTT, masked,
/// flooded nor sent, and masks are drawn only where they are used.
pub fn server_product(
    params: &Params,
    pk: &PublicKey,
    lay: &Layout,
    pts: &[Plaintext],
    cts: &[Ciphertext],
) -> Result<(Vec<Vec<u8>>, Vec<u64>, f64)> {
    if cts.len() != lay.chunks || pts.len() != lay.blocks * lay.chunks {
        return Err(HeError::Shape(format!(
            "{} ciphertexts and {} plaintexts for {} chunks of {} blocks",
            cts.len(),
            pts.len(),
            lay.chunks,
            lay.blocks
        )));
    }
    let log_q = response_bits(params);
    type Part = (Vec<u8>, Vec<u64>, f64);
    let res: Vec<Result<Part>> = pts
        .par_chunks(lay.chunks)
        .enumerate()
        .map(|(b, pts)| {
            let mut prod = params.mul_plain(&cts[0], &pts[0]);
            for (ct, pt) in cts.iter().zip(pts).skip(1) {
                params.add_assign(&mut prod, &params.mul_plain(ct, pt));
            }
            let (fb, stat) = flood_bits(params, &prod);
            let pos = lay.positions(b);
            let mut prg = Sampler::from_os();
            let mask: Vec<u64> = pos.iter().map(|_| prg.next_u64() & T_MASK).collect();
            let r = params.finish_response_at(prod, pk, fb, &pos, &mask, log_q)?;
            Ok((r.to_bytes(), mask, stat))
        })
        .collect();
    let mut bytes = Vec::with_capacity(lay.blocks);
    let mut masks = Vec::with_capacity(lay.blocks);
    let mut stat = f64::INFINITY;
    for r in res {
        let (b, m, s) = r?;
        bytes.push(b);
        masks.push(m);
        stat = stat.min(s);
    }
    // DESIGN.md §2: a response whose noise is not flooded to ≥ 40-bit statistical distance
    // could leak the weights; refuse to send it rather than report it afterwards.
    if stat < MIN_FLOOD_STAT_BITS {
        return Err(HeError::NoiseBudget(format!(
            "noise flooding reaches only 2^-{stat:.1} statistical distance (need 2^-{MIN_FLOOD_STAT_BITS}); \
             the model's weights are too large for this parameter set"
        )));
    }
    Ok((bytes, lay.gather(&masks), stat))
}

/// Client: decrypts the block responses into its share (one per row).
pub fn client_share(sk: &SecretKey, lay: &Layout, responses: &[Vec<u8>]) -> Result<Vec<u64>> {
    let params = sk.params();
    if responses.len() != lay.blocks {
        return Err(HeError::Shape(format!(
            "{} responses for {} blocks",
            responses.len(),
            lay.blocks
        )));
    }
    let vals: Vec<Result<Vec<u64>>> = responses
        .par_iter()
        .enumerate()
        .map(|(blk, b)| {
            let pos = lay.positions(blk);
            let r = SparseResponse::from_bytes(params, pos.len(), b)?;
            sk.decrypt_sparse(&r, &pos)
        })
        .collect();
    let vals = vals.into_iter().collect::<Result<Vec<_>>>()?;
    Ok(lay.gather(&vals).into_iter().map(|v| v & T_MASK).collect())
}

/// Wire size of the trimmed response of block `b`: c0 only at the block's result
/// coefficients (the client needs no other c0 coefficient), all of c1.
pub fn response_len(params: &Params, lay: &Layout, b: usize) -> usize {
    response_bytes(params, lay.group * lay.rows_in(b))
}

/// Wire size of a response carrying `results` c0 values (and all of c1).
pub fn response_bytes(params: &Params, results: usize) -> usize {
    SparseResponse::wire_len(params, results, response_bits(params))
}

/// Wire size of one seeded upload.
pub fn upload_len(params: &Params) -> usize {
    4 + 32 + 8 * params.n() * params.set().q.len()
}

/// W·x + b·2^F mod 2^32 for the server's own share x (plain integers).
pub fn plain_affine(w: &[i64], x: &[u64], bias: &[i64], frac: u32) -> Vec<u64> {
    let cols = x.len();
    w.chunks_exact(cols)
        .zip(bias)
        .map(|(row, &b)| {
            let mut acc = (b as u64).wrapping_shl(frac);
            for (&wij, &xj) in row.iter().zip(x) {
                acc = acc.wrapping_add((wij as u64).wrapping_mul(xj));
            }
            acc & T_MASK
        })
        .collect()
}

/// x mod 2^32 of signed values.
pub fn to_ring(x: &[i64]) -> Vec<u64> {
    x.iter().map(|&v| (v as u64) & T_MASK).collect()
}

#[cfg(test)]
mod tests {
    use super::{Layout, T_MASK};
    use crate::arith::Sampler;

    const UP: usize = 131_108;
    fn resp(k: usize) -> usize {
        1 + ((k + 8192) * 44).div_ceil(8)
    }

    /// a·b in Z_{2^32}[Y]/(Y^n + 1), schoolbook.
    fn negacyclic(a: &[u64], b: &[u64]) -> Vec<u64> {
        let n = a.len();
        let mut out = vec![0u64; n];
        for (i, &x) in a.iter().enumerate().filter(|(_, &x)| x != 0) {
            for (j, &y) in b.iter().enumerate().filter(|(_, &y)| y != 0) {
                let t = x.wrapping_mul(y);
                let k = i + j;
                if k < n {
                    out[k] = out[k].wrapping_add(t);
                } else {
                    out[k - n] = out[k - n].wrapping_sub(t);
                }
            }
        }
        out.iter().map(|v| v & T_MASK).collect()
    }

    /// Σ_c X_c·W_{b,c} in plaintext (what the server computes under encryption) read at the
    /// result positions equals W·x mod 2^32 for every vector of the group, for layouts with
    /// one and several chunks (widths dividing the columns and not), several blocks, groups
    /// full and partial, the largest values at both ends of the ring. A result position off
    /// by one, or a chunk's columns reversed, fails it.
    #[test]
    fn chunked_products_equal_the_matrix_product() {
        let mut prg = Sampler::from_seed(&[7; 32]);
        let n = 128;
        for (rows, cols, group, chunks) in [
            (5, 7, 1, 1),
            (5, 7, 3, 1),
            (9, 10, 2, 3),
            (9, 10, 4, 4),
            (20, 12, 3, 12),
            (3, 30, 2, 7),
            (40, 6, 5, 2),
        ] {
            let l = Layout::shaped(rows, cols, n, group, chunks).unwrap_or_else(|e| panic!("{e}"));
            assert!(l.group * l.per_block * l.chunk <= n, "{l:?}");
            let w: Vec<i64> = (0..rows * cols)
                .map(|k| match k % 5 {
                    0 => i32::MIN as i64,
                    1 => i32::MAX as i64,
                    _ => (prg.next_u64() as i64) >> 40,
                })
                .collect();
            for used in [group, group.div_ceil(2)] {
                let xs: Vec<Vec<u64>> = (0..used)
                    .map(|_| (0..cols).map(|_| prg.next_u64() & T_MASK).collect())
                    .collect();
                let refs: Vec<&[u64]> = xs.iter().map(|x| x.as_slice()).collect();
                let polys = l.input_polys(&refs);
                assert_eq!(polys.len(), l.chunks);
                let blocks: Vec<Vec<u64>> = (0..l.blocks)
                    .map(|b| {
                        (0..l.chunks).fold(vec![0u64; n], |acc, c| {
                            let p = negacyclic(&polys[c], &l.weight_coeffs(&w, b, c));
                            acc.iter()
                                .zip(p)
                                .map(|(a, p)| a.wrapping_add(p) & T_MASK)
                                .collect()
                        })
                    })
                    .collect();
                let got = l.extract(&blocks);
                for (u, x) in xs.iter().enumerate() {
                    for r in 0..rows {
                        let want = (0..cols).fold(0u64, |a, j| {
                            a.wrapping_add((w[r * cols + j] as u64).wrapping_mul(x[j]))
                        }) & T_MASK;
                        assert_eq!(got[u * rows + r], want, "{l:?} vector {u} row {r}");
                    }
                }
            }
        }
    }

    #[test]
    fn batched_layout_splits_columns_when_it_saves_bytes() {
        // GRU(100, 64, 30)'s input projections: 6 chunks of 17 columns, 16 rows per block,
        // all 30 vectors in one group: 6 uploads and 12 responses instead of 3 and 72 with
        // whole columns (the best unsplit layout), 1.36 MB instead of 3.63 MB.
        let l = Layout::batched(192, 100, 8192, 30, UP, resp).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            (l.chunk, l.chunks, l.per_block, l.blocks, l.group),
            (17, 6, 16, 12, 30)
        );
        assert_eq!(l.groups(30) * l.group_bytes(UP, resp), 1_359_012);
        let whole = (1..=30)
            .map(|g| Layout::shaped(192, 100, 8192, g, 1).unwrap_or_else(|e| panic!("{e}")))
            .min_by_key(|l| l.groups(30) * l.group_bytes(UP, resp))
            .unwrap_or_else(|| panic!("no layout"));
        assert_eq!(whole.groups(30) * whole.blocks, 72);
        assert!(whole.groups(30) * whole.group_bytes(UP, resp) > 3_600_000);
        // Within a block the result positions are distinct and inside the ring.
        let mut p = l.positions(0);
        let k = p.len();
        p.sort_unstable();
        p.dedup();
        assert!(p.len() == k && p.iter().all(|&x| x < l.n));
        // Shapes that cannot fit are typed errors.
        assert!(Layout::shaped(4, 10, 8, 1, 1).is_err());
        assert!(Layout::shaped(4, 10, 8192, 1, 11).is_err());
    }

    /// `gather` (values listed as `positions(b)` lists them) reads the same results as
    /// `extract` (full block polynomials), for grouped and ungrouped layouts with a short
    /// last block.
    #[test]
    fn gather_matches_extract() {
        for l in [
            Layout::new(200, 100, 8192).unwrap_or_else(|e| panic!("{e}")),
            Layout::batched(6, 700, 8192, 13, UP, resp).unwrap_or_else(|e| panic!("{e}")),
            Layout::batched(384, 10, 8192, 30, UP, resp).unwrap_or_else(|e| panic!("{e}")),
            Layout::shaped(190, 64, 8192, 7, 5).unwrap_or_else(|e| panic!("{e}")),
        ] {
            let polys: Vec<Vec<u64>> = (0..l.blocks)
                .map(|b| (0..l.n as u64).map(|i| (b as u64) << 20 | i).collect())
                .collect();
            let vals: Vec<Vec<u64>> = (0..l.blocks)
                .map(|b| l.positions(b).iter().map(|&p| polys[b][p]).collect())
                .collect();
            assert_eq!(l.gather(&vals), l.extract(&polys), "{l:?}");
            assert_eq!(l.gather(&vals).len(), l.group * l.rows);
        }
    }
}
