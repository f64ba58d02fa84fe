//! Coefficient-encoded (Cheetah-style) matrix–vector products over Z_{2^32} on BFV with
//! t = 2^32 (`n8192-z2k32`): no rotations, no Galois keys.
//!
//! The client encrypts x as X(Y) = Σ_j x_j Y^j. A block of k = ⌊n / m⌋ rows of W (m columns)
//! is the plaintext W_b(Y) = Σ_{i<k} Σ_j W_{bk+i, j} Y^{i·m + m−1−j}. In the product, the
//! coefficient of Y^{i·m + m−1} is exactly Σ_j W_ij x_j mod 2^32; every other product term lands
//! at an exponent that is not ≡ m−1 (mod m) or, past n, wraps negacyclically below
//! k·m + m − 1 − n < m − 1: it never touches a result coefficient.
//!
//! The server masks each product with a fresh uniform r at the result coefficients
//! (Enc(W x − r)), floods the noise (as much as Δ/4 leaves room for: see [`flood_bits`]) and
//! switches the modulus down (`Params::finish_response_at`, which computes and sends c0 only
//! at the result coefficients); the client's share is the decrypted coefficient, the
//! server's the mask's.
use crate::error::{NnError, Result};
use rayon::prelude::*;
use secinfer_he::{Ciphertext, Params, Plaintext, PublicKey, SecretKey, SparseResponse};

pub const T_BITS: u32 = 32;
const T_MASK: u64 = (1u64 << T_BITS) - 1;

fn he(e: secinfer_he::HeError) -> NnError {
    NnError::Crypto(format!("HE: {e}"))
}

/// Where the rows of an m-column matrix sit in the plaintexts and results.
///
/// With `group` = g > 1 one ciphertext carries g input vectors at stride k·m
/// (X = Σ_u Σ_j x_{u,j} Y^{u·k·m + j}) and the result (u, i) of a block sits at
/// u·k·m + i·m + m − 1: a product term of input u' and row i' lands at u'·k·m + i'·m + m − 1 +
/// (j' − j) with |j' − j| < m, which is a result position only when j' = j, u' = u, i' = i;
/// past n it wraps below m − 1 as long as g·k·m ≤ n. So a block answers g·k inner products.
#[derive(Clone, Copy, Debug)]
pub struct Layout {
    pub rows: usize,
    pub cols: usize,
    pub per_block: usize,
    pub blocks: usize,
    pub n: usize,
    pub group: usize,
}

impl Layout {
    pub fn new(rows: usize, cols: usize, n: usize) -> Result<Layout> {
        Self::grouped(rows, cols, n, 1)
    }
    fn grouped(rows: usize, cols: usize, n: usize, group: usize) -> Result<Layout> {
        if cols == 0 || rows == 0 || group == 0 || cols * group > n {
            return Err(NnError::Input(format!(
                "matrix {rows}×{cols} does not fit ring degree {n}"
            )));
        }
        let per_block = (n / cols / group).min(rows);
        Ok(Layout {
            rows,
            cols,
            per_block,
            blocks: rows.div_ceil(per_block),
            n,
            group,
        })
    }
    /// The layout for `count` independent inputs (all steps' input projections) with the
    /// fewest bytes: uploads of `up` bytes per ciphertext and responses of about `resp` bytes
    /// per block.
    pub fn batched(
        rows: usize,
        cols: usize,
        n: usize,
        count: usize,
        up: usize,
        resp: usize,
    ) -> Result<Layout> {
        let mut best = Self::new(rows, cols, n)?;
        let cost = |l: &Layout| count.div_ceil(l.group) * (up + l.blocks * resp);
        for g in 2..=count.min(n / cols) {
            let l = Self::grouped(rows, cols, n, g)?;
            if cost(&l) < cost(&best) {
                best = l;
            }
        }
        Ok(best)
    }
    /// The input polynomial of x (values mod 2^32).
    pub fn input_poly(&self, x: &[u64]) -> Vec<u64> {
        self.input_poly_group(&[x])
    }
    /// The input polynomial of up to `group` vectors.
    pub fn input_poly_group(&self, xs: &[&[u64]]) -> Vec<u64> {
        let mut p = vec![0u64; self.n];
        for (u, x) in xs.iter().enumerate().take(self.group) {
            let o = u * self.per_block * self.cols;
            p[o..o + x.len()].copy_from_slice(x);
        }
        p
    }
    /// The weight plaintexts (signed weights, row-major).
    pub fn weight_plaintexts(&self, params: &Params, w: &[i64]) -> Result<Vec<Plaintext>> {
        // Independent NTTs per block: spread them over the rayon pool.
        (0..self.blocks)
            .into_par_iter()
            .map(|b| {
                let mut p = vec![0u64; self.n];
                for i in 0..self.per_block {
                    let row = b * self.per_block + i;
                    if row >= self.rows {
                        break;
                    }
                    for j in 0..self.cols {
                        p[i * self.cols + self.cols - 1 - j] =
                            (w[row * self.cols + j] as u64) & T_MASK;
                    }
                }
                Plaintext::from_coeffs(params, &p).map_err(he)
            })
            .collect()
    }
    /// Rows held by block `b`.
    pub fn rows_in(&self, b: usize) -> usize {
        self.per_block.min(self.rows - b * self.per_block)
    }
    /// Coefficient index of the result of input `u`, row `i` of a block.
    pub fn pos(&self, u: usize, i: usize) -> usize {
        (u * self.per_block + i) * self.cols + self.cols - 1
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

/// Flooding noise bits for a product ciphertext: as large as keeps flood + noise ≤ Δ/4; and
/// the statistical distance exponent reached (flood − log2 n − log2 of 10 std of the noise).
pub fn flood_bits(params: &Params, ct: &Ciphertext) -> (u32, f64) {
    let n = params.n() as f64;
    let sigma = params.set().sigma;
    let var = 2f64.powf(2.0 * ct.est_noise_log2()) + n * (2.0 / 3.0) * sigma * sigma * 2.0;
    let log_e = (10.0 * var.sqrt()).log2();
    let log_delta = params.log2_q() - T_BITS as f64;
    let bits = (log_delta - 2.0 - 0.1).floor();
    (bits as u32, bits - n.log2() - log_e)
}

/// Server: W·Enc(x) − r for each block, flooded and switched. Returns the serialised responses
/// and the server's share (the masks at the result coefficients, one per row), plus the weakest
/// statistical-flooding exponent.
///
/// Each block's response carries c0 only at the block's result coefficients
/// (`Params::finish_response_at`): the rest of c0 is neither computed past the NTT, masked,
/// flooded nor sent, and masks are drawn only where they are used.
pub fn server_product(
    params: &Params,
    pk: &PublicKey,
    lay: &Layout,
    pts: &[Plaintext],
    ct: &Ciphertext,
) -> Result<(Vec<Vec<u8>>, Vec<u64>, f64)> {
    let log_q = response_bits(params);
    type Part = (Vec<u8>, Vec<u64>, f64);
    let res: Vec<Result<Part>> = pts
        .par_iter()
        .enumerate()
        .map(|(b, pt)| {
            let prod = params.mul_plain(ct, pt);
            let (fb, stat) = flood_bits(params, &prod);
            let pos = lay.positions(b);
            let mut prg = secinfer_ot::Prg::new();
            let mask: Vec<u64> = pos
                .iter()
                .map(|_| prg.next_block().low_u64() & T_MASK)
                .collect();
            let r = params
                .finish_response_at(prod, pk, fb, &pos, &mask, log_q)
                .map_err(he)?;
            Ok((r.to_bytes(), mask, stat))
        })
        .collect();
    let mut bytes = Vec::with_capacity(pts.len());
    let mut masks = Vec::with_capacity(pts.len());
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
        return Err(NnError::Crypto(format!(
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
        return Err(NnError::Protocol(format!(
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
            let r = SparseResponse::from_bytes(params, pos.len(), b).map_err(he)?;
            sk.decrypt_sparse(&r, &pos).map_err(he)
        })
        .collect();
    let vals = vals.into_iter().collect::<Result<Vec<_>>>()?;
    Ok(lay.gather(&vals).into_iter().map(|v| v & T_MASK).collect())
}

/// Wire size of the trimmed response of block `b`: c0 only at the block's result
/// coefficients (the client needs no other c0 coefficient), all of c1.
pub fn response_len(params: &Params, lay: &Layout, b: usize) -> usize {
    SparseResponse::wire_len(params, lay.group * lay.rows_in(b), response_bits(params))
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
    use super::Layout;

    #[test]
    fn batched_layout_groups_inputs_when_it_saves_bytes() {
        let (up, resp) = (131_108, 45_100);
        // The secure_gru test's E = 700 case: 11 products per block, 5 inputs per upload.
        let l = Layout::batched(6, 700, 8192, 13, up, resp).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((l.group, l.per_block, l.blocks), (5, 2, 3));
        assert!(l.group * l.per_block * l.cols <= l.n);
        // GRU(100, 64, 30): 72 responses and 3 uploads instead of 90 and 30.
        let l = Layout::batched(192, 100, 8192, 30, up, resp).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(30usize.div_ceil(l.group) * l.blocks, 72);
        // Within a block the result positions are distinct and inside the ring.
        let mut p = l.positions(0);
        let k = p.len();
        p.sort_unstable();
        p.dedup();
        assert!(p.len() == k && p.iter().all(|&x| x < l.n));
    }

    /// `gather` (values listed as `positions(b)` lists them) reads the same results as
    /// `extract` (full block polynomials), for grouped and ungrouped layouts with a short
    /// last block.
    #[test]
    fn gather_matches_extract() {
        for l in [
            Layout::new(200, 100, 8192).unwrap_or_else(|e| panic!("{e}")),
            Layout::batched(6, 700, 8192, 13, 131_108, 45_100).unwrap_or_else(|e| panic!("{e}")),
            Layout::batched(384, 10, 8192, 30, 131_108, 45_100).unwrap_or_else(|e| panic!("{e}")),
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
