//! Linear kernels ending in Z_t shares: matrix–vector (naive row method, GAZELLE hybrid,
//! GALA row-encoding-share-RaS) and convolution (GAZELLE output rotation, GALA kernel
//! grouping). Each kernel is written once against [`Evaluator`], so the same code runs on
//! real ciphertexts, on plaintext slot vectors, and on the operation counter.
//!
//! Slot model: a ciphertext has `rows` rows of `row_len` slots (BFV: 2 × n/2); rotations move
//! all rows left together. GALA's paper model (2048 slots in one cyclic row) is `rows = 1,
//! row_len = 2048` on the counting backend.

pub mod coeff;
pub mod coeff_prime;
pub mod conv;
pub mod gala;
pub mod gazelle;
pub mod naive;

use rayon::prelude::*;

use crate::arith::Sampler;
use crate::bfv::{encode_simd, Ciphertext, PublicKey, Response};
use crate::eval::Evaluator;
use crate::params::Params;
use crate::HeError;

pub use conv::{ConvMethod, ConvPlan};

/// Matrix–vector method.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MatVecMethod {
    Naive,
    Gazelle,
    Gala,
}

impl std::str::FromStr for MatVecMethod {
    type Err = HeError;
    fn from_str(s: &str) -> Result<Self, HeError> {
        match s {
            "naive" => Ok(MatVecMethod::Naive),
            "gazelle" => Ok(MatVecMethod::Gazelle),
            "gala" => Ok(MatVecMethod::Gala),
            _ => Err(HeError::Shape(format!("unknown matvec method {s}"))),
        }
    }
}

/// Layout of an n_o × n_i matrix–vector product (shapes only; public).
///
/// The input x is zero-padded to B = next_pow2(n_i) (at most `row_len`; wider inputs are cut
/// into ⌈n_i / B⌉ column chunks, one ciphertext each) and replicated in every B-slot block.
/// GAZELLE and GALA give each of the nb = slots/B blocks g consecutive rows (g a power of two),
/// so one output ciphertext carries nb·g rows; more rows use more output ciphertexts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MatVecPlan {
    pub method: MatVecMethod,
    pub rows: usize,
    pub cols: usize,
    pub row_len: usize,
    pub slot_rows: usize,
    /// Block size B (power of two, divides row_len).
    pub block: usize,
    /// Number of input ciphertexts (column chunks).
    pub col_chunks: usize,
    /// Rows per block g (GAZELLE/GALA).
    pub g: usize,
    /// Output ciphertexts.
    pub out_cts: usize,
    /// Whether the input rotations are hoisted lazily ([`Hoisting::Auto`] unless set).
    pub hoisting: Hoisting,
}

/// Lazy key switching ("double hoisting") of a kernel's input rotations: chosen by the cost
/// model of each kernel, or forced either way (both paths give the same shares; forcing one
/// measures it or tests its noise).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Hoisting {
    /// Lazy when the cost model says it is cheaper.
    #[default]
    Auto,
    /// Always lazy (rotations kept in the Q·P basis).
    Lazy,
    /// Never lazy (each rotation divided by P at once).
    Eager,
}

impl MatVecPlan {
    /// The same plan with input hoisting forced or left to the cost model.
    pub fn with_hoisting(mut self, hoisting: Hoisting) -> Self {
        self.hoisting = hoisting;
        self
    }

    pub fn new(
        method: MatVecMethod,
        rows: usize,
        cols: usize,
        row_len: usize,
        slot_rows: usize,
    ) -> Result<Self, HeError> {
        if rows == 0 || cols == 0 || !row_len.is_power_of_two() || slot_rows == 0 {
            return Err(HeError::Shape(format!(
                "matvec {rows}x{cols} on {slot_rows}x{row_len} slots"
            )));
        }
        let block = cols.next_power_of_two().min(row_len);
        let col_chunks = cols.div_ceil(block);
        let nb = slot_rows * row_len / block;
        let (g, out_cts) = match method {
            MatVecMethod::Naive => (1, rows),
            _ => {
                if rows <= nb * block {
                    (rows.div_ceil(nb).next_power_of_two(), 1)
                } else {
                    (block, rows.div_ceil(nb * block))
                }
            }
        };
        Ok(MatVecPlan {
            method,
            rows,
            cols,
            row_len,
            slot_rows,
            block,
            col_chunks,
            g,
            out_cts,
            hoisting: Hoisting::Auto,
        })
    }

    /// Plan for a BFV parameter set (2 rows of n/2 slots).
    pub fn for_params(
        method: MatVecMethod,
        rows: usize,
        cols: usize,
        params: &Params,
    ) -> Result<Self, HeError> {
        MatVecPlan::new(method, rows, cols, params.row_len(), 2)
    }

    fn slots(&self) -> usize {
        self.row_len * self.slot_rows
    }
    fn blocks(&self) -> usize {
        self.slots() / self.block
    }

    /// Rotation steps whose Galois keys the server needs.
    pub fn rotation_steps(&self) -> Vec<usize> {
        let mut v = Vec::new();
        match self.method {
            MatVecMethod::Naive => {
                let mut s = self.block / 2;
                while s >= 1 {
                    v.push(s);
                    s /= 2;
                }
            }
            MatVecMethod::Gazelle => {
                v.extend(1..self.g);
                let mut s = self.block / 2;
                while s >= self.g {
                    v.push(s);
                    s /= 2;
                }
            }
            MatVecMethod::Gala => v.extend(1..self.g),
        }
        v.sort_unstable();
        v.dedup();
        v
    }

    /// Client packing: one slot vector per input ciphertext.
    pub fn pack_input(&self, x: &[u64]) -> Result<Vec<Vec<u64>>, HeError> {
        if x.len() != self.cols {
            return Err(HeError::Shape(format!(
                "input has {} values, plan wants {}",
                x.len(),
                self.cols
            )));
        }
        Ok((0..self.col_chunks)
            .map(|c| {
                (0..self.slots())
                    .map(|s| {
                        let col = c * self.block + (s % self.row_len) % self.block;
                        if col < self.cols {
                            x[col]
                        } else {
                            0
                        }
                    })
                    .collect()
            })
            .collect())
    }

    /// Row of the output carried by block `u`, in-block row `i` of output ciphertext `gi`.
    fn out_row(&self, gi: usize, u: usize, i: usize) -> usize {
        gi * self.blocks() * self.g + u * self.g + i
    }

    /// Turns the output slot vectors (the client's decryptions, or the server's masks) into
    /// that party's share of W·x: slot extraction, plus GALA's plaintext rotate-and-sum.
    pub fn extract(&self, outs: &[Vec<u64>], t: u64) -> Result<Vec<u64>, HeError> {
        if outs.len() != self.out_cts || outs.iter().any(|o| o.len() != self.slots()) {
            return Err(HeError::Shape(
                "output vectors do not match the plan".into(),
            ));
        }
        let mut y = vec![0u64; self.rows];
        match self.method {
            MatVecMethod::Naive => {
                for (i, o) in outs.iter().enumerate() {
                    y[i] = o[0] % t;
                }
            }
            MatVecMethod::Gazelle | MatVecMethod::Gala => {
                let b = self.block;
                let g = self.g;
                for (gi, o) in outs.iter().enumerate() {
                    for u in 0..self.blocks() {
                        for i in 0..g {
                            let row = self.out_row(gi, u, i);
                            if row >= self.rows {
                                continue;
                            }
                            y[row] = if self.method == MatVecMethod::Gazelle {
                                o[u * b + i] % t
                            } else {
                                let mut acc = 0u64;
                                let mut d = 0;
                                while d < b {
                                    acc = crate::arith::add_mod(acc, o[u * b + i + d] % t, t);
                                    d += g;
                                }
                                acc
                            };
                        }
                    }
                }
            }
        }
        Ok(y)
    }

    /// Server setup: encodes W (rows × cols, values mod t) into the method's plaintexts.
    pub fn prepare<E: Evaluator>(&self, ev: &E, w: &[Vec<u64>]) -> Result<Vec<E::Pt>, HeError> {
        if w.len() != self.rows || w.iter().any(|r| r.len() != self.cols) {
            return Err(HeError::Shape(
                "weight matrix does not match the plan".into(),
            ));
        }
        if ev.row_len() != self.row_len || ev.rows() != self.slot_rows {
            return Err(HeError::Shape(
                "evaluator slot layout does not match the plan".into(),
            ));
        }
        match self.method {
            MatVecMethod::Naive => naive::prepare(ev, self, w),
            MatVecMethod::Gazelle => gazelle::prepare(ev, self, w),
            MatVecMethod::Gala => gala::prepare(ev, self, w),
        }
    }

    /// Runs the kernel (the counted part): returns the output ciphertexts (before masking).
    pub fn eval<E: Evaluator>(
        &self,
        ev: &E,
        pts: &[E::Pt],
        inputs: &[E::Ct],
    ) -> Result<Vec<E::Ct>, HeError> {
        if inputs.len() != self.col_chunks {
            return Err(HeError::Shape(format!(
                "{} input ciphertexts, plan wants {}",
                inputs.len(),
                self.col_chunks
            )));
        }
        match self.method {
            MatVecMethod::Naive => naive::matvec(ev, self, pts, inputs),
            MatVecMethod::Gazelle => gazelle::matvec(ev, self, pts, inputs),
            MatVecMethod::Gala => gala::matvec(ev, self, pts, inputs),
        }
    }
}

/// Sums products into an optional accumulator.
/// Slot value of plaintext (output ct gi, column chunk c, diagonal t) at slot q.
pub(crate) type WeightLayout = fn(&MatVecPlan, &[Vec<u64>], usize, usize, usize, usize) -> u64;

/// Encodes the plaintexts of a diagonal-style kernel (GAZELLE's hybrid diagonals, GALA's row
/// encoding): `out_cts × col_chunks × g` plaintexts, slot `q` of plaintext (gi, c, t) holding
/// `weight(plan, w, gi, c, t, q)`. The kernels differ only in that layout function.
pub(crate) fn prepare_diagonals<E: Evaluator>(
    ev: &E,
    plan: &MatVecPlan,
    w: &[Vec<u64>],
    weight: WeightLayout,
) -> Result<Vec<E::Pt>, HeError> {
    let slots = plan.row_len * plan.slot_rows;
    let (cc, g) = (plan.col_chunks, plan.g);
    (0..plan.out_cts * cc * g)
        .into_par_iter()
        .map(|idx| {
            let (gi, c, t) = (idx / (cc * g), (idx / g) % cc, idx % g);
            ev.encode(|| (0..slots).map(|q| weight(plan, w, gi, c, t, q)).collect())
        })
        .collect()
}

pub(crate) fn acc_add<E: Evaluator>(ev: &E, acc: &mut Option<E::Ct>, x: E::Ct) {
    match acc {
        None => *acc = Some(x),
        Some(a) => ev.add_assign(a, &x),
    }
}

pub(crate) fn take<C>(acc: Option<C>) -> Result<C, HeError> {
    acc.ok_or(HeError::Shape("empty sum".into()))
}

/// [`acc_add`] in the extended Q·P basis.
pub(crate) fn acc_add_ext<E: Evaluator>(ev: &E, acc: &mut Option<E::Ext>, x: E::Ext) {
    match acc {
        None => *acc = Some(x),
        Some(a) => ev.ext_add_assign(a, &x),
    }
}

/// Cost model for lazy key switching ("double hoisting"), in units of one pointwise
/// product pass over one prime (an NTT of size n ≈ 3 such passes on AVX2, measured):
/// a mod-down of a ciphertext is 2 inverse NTTs mod P and 2·L forward NTTs plus a few passes;
/// a ScMult is 2·L passes, 2·(L + 1) in the Q·P basis.
/// Eager hoisting does `eager_mod_downs` mod-downs; the lazy variant `lazy_mod_downs`; both
/// do `sc_mults` ScMults (lazy ones in the larger basis). True when lazy is cheaper. Only the
/// input hoisting is chosen this way; lazy *output* rotations (several rotated ciphertexts
/// summed into one output) always pay and are used whenever an output sums two or more.
pub(crate) fn lazy_pays(
    hoisting: Hoisting,
    l: usize,
    mod_down_passes: Option<f64>,
    eager_mod_downs: usize,
    lazy_mod_downs: usize,
    sc_mults: usize,
) -> bool {
    match hoisting {
        Hoisting::Lazy => return true,
        Hoisting::Eager => return false,
        Hoisting::Auto => {}
    }
    let l = l as f64;
    let md = mod_down_passes.unwrap_or(3.0 * 2.0 * (1.0 + l) + 4.0 * l);
    let eager = eager_mod_downs as f64 * md + sc_mults as f64 * 2.0 * l;
    let lazy = lazy_mod_downs as f64 * md + sc_mults as f64 * 2.0 * (l + 1.0);
    lazy < eager
}

// ---------------------------------------------------------------------------------------------
// Masking, flooding and modulus switching of the outputs (server), and decryption (client).

/// How the server re-randomises what it returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flood {
    /// Flooding noise giving statistical distance ≤ 2^-s over all n coefficients; error if
    /// the parameter set has no room for it.
    Statistical(u32),
    /// As much flooding as the noise budget allows, up to 2^-s (reports what was reached, which
    /// is negative when the flood is smaller than the kernel-noise bound); never fails.
    BestEffort(u32),
    /// No flooding (still re-randomises c1 with a public-key encryption of zero).
    Off,
}

/// log2 of what a noise bound of 2^log_e leaves of a room of 2^log_room (−∞ when nothing).
pub(crate) fn flood_room(log_room: f64, log_e: f64) -> f64 {
    if log_e < log_room {
        (log_room.exp2() - log_e.exp2()).log2()
    } else {
        f64::NEG_INFINITY
    }
}

/// What the server returns and keeps.
pub struct ServerResult {
    pub responses: Vec<Response>,
    /// The server's mask slot vectors (its share before extraction).
    pub masks: Vec<Vec<u64>>,
    /// Statistical-distance exponent the flooding reached (−log2 of the bound), 0 if none.
    pub flood_stat_bits: f64,
    /// Response modulus exponent.
    pub log_q_out: u32,
}

/// Masks each output ciphertext with a fresh uniform r (Enc(v − r)), floods, switches to a
/// small power-of-two modulus. The masks are the server's share (before `plan.extract`).
pub fn finish_outputs(
    params: &Params,
    pk: &PublicKey,
    outs: &[Ciphertext],
    flood: Flood,
) -> Result<ServerResult, HeError> {
    let n = params.n() as f64;
    let t = params.t();
    let log_t = (t as f64).log2();
    // Rounding noise of the final switch: 10 std of τ0 + τ1·s.
    let round_bound = 10.0 * ((1.0 + n * 2.0 / 3.0) / 12.0).sqrt();
    let log_q_out = (log_t + 2.0 + round_bound.log2() + 2.0).ceil() as u32;
    // Decryption needs the whole noise below Δ/2. The response modulus leaves the final switch's
    // rounding below Δ/16 (the 2 + 2 bits of margin in `log_q_out`), so the kernel's noise and
    // the flooding may take 2^-0.5·Δ/2 ≈ 0.71·Δ/2: with the rounding, 0.83·Δ/2 at most.
    let log_room = params.log2_delta() - 1.5;
    #[allow(clippy::type_complexity)]
    let results: Vec<Result<(Response, Vec<u64>, f64), HeError>> = outs
        .par_iter()
        .map(|ct| {
            let sigma = params.0.set.sigma;
            // Kernel noise plus the public-key zero-encryption noise u·e + e2·s.
            let var = ct.var + n * (2.0 / 3.0) * sigma * sigma * 2.0;
            let log_e = (10.0 * var.sqrt()).log2();
            // Uniform flooding on the integers of [−B, B] hides a shift by e within statistical
            // distance |e|/(2B + 1) per coefficient, so n coefficients whose noise is below
            // 2^log_e sit within n·2^log_e/(2B + 1): the `stat` below is −log2 of that.
            let (amplitude, stat) = match flood {
                Flood::Off => (0u128, 0.0),
                Flood::Statistical(s) | Flood::BestEffort(s) => {
                    // 0.01 bit above the target, so float rounding cannot land below it.
                    let want = s as f64 + n.log2() + log_e - 1.0 + 0.01;
                    // The flood gets what the kernel noise's bound leaves of the room: with a
                    // kernel near its budget, a flood filling the whole room fails decryption.
                    let room = flood_room(log_room, log_e);
                    let log_b = want.min(room).max(0.0);
                    if matches!(flood, Flood::Statistical(_)) && log_b < log_e {
                        return Err(HeError::NoiseBudget(format!(
                            "no room for flooding: kernel noise bound 2^{log_e:.1}, room 2^{log_room:.1}"
                        )));
                    }
                    // Rounded up to an integer where it fits, down where the room binds.
                    let b = if want <= room {
                        log_b.exp2().ceil()
                    } else if room < 0.0 {
                        0.0
                    } else {
                        log_b.exp2().floor()
                    };
                    let stat = (2.0 * b + 1.0).log2() - n.log2() - log_e;
                    if matches!(flood, Flood::Statistical(_)) && stat < s as f64 {
                        return Err(HeError::NoiseBudget(format!(
                            "flooding reaches 2^-{stat:.1}, below the required 2^-{s}; use a larger parameter set"
                        )));
                    }
                    (b as u128, stat)
                }
            };
            let mut prg = Sampler::from_os();
            let mask: Vec<u64> = (0..params.n()).map(|_| prg.uniform(t)).collect();
            let mask_poly = encode_simd(params, &mask)?;
            let resp = params.finish_response_flooded(ct, pk, amplitude, Some(&mask_poly), log_q_out)?;
            Ok((resp, mask, stat))
        })
        .collect();
    let mut responses = Vec::new();
    let mut masks = Vec::new();
    let mut stat_min = f64::INFINITY;
    for r in results {
        let (resp, mask, stat) = r?;
        responses.push(resp);
        masks.push(mask);
        stat_min = stat_min.min(stat);
    }
    Ok(ServerResult {
        responses,
        masks,
        flood_stat_bits: if stat_min.is_finite() { stat_min } else { 0.0 },
        log_q_out,
    })
}

/// Server side of an encrypted matrix–vector product in one call: encodes `w` (rows × cols,
/// values mod t; for repeated use call [`MatVecPlan::prepare`] once and [`MatVecPlan::eval`]),
/// runs the kernel on the client's packed inputs (from [`MatVecPlan::pack_input`]), masks,
/// floods and mod-switches. Returns the responses for the client and the server's share of W·x.
pub fn server_matvec(
    params: &Params,
    keys: &crate::bfv::GaloisKeys,
    pk: &PublicKey,
    method: MatVecMethod,
    w: &[Vec<u64>],
    inputs: &[Ciphertext],
    flood: Flood,
) -> Result<(Vec<Response>, Vec<u64>), HeError> {
    let rows = w.len();
    let cols = w.first().map_or(0, |r| r.len());
    let plan = MatVecPlan::for_params(method, rows, cols, params)?;
    let ev = crate::eval::HeEvaluator::new(params, keys);
    let pts = plan.prepare(&ev, w)?;
    let outs = plan.eval(&ev, &pts, inputs)?;
    let res = finish_outputs(params, pk, &outs, flood)?;
    let share = plan.extract(&res.masks, params.t())?;
    Ok((res.responses, share))
}

/// Client side: decrypts the responses into the client's share of W·x (client share + server
/// share ≡ W·x mod t).
pub fn client_matvec_share(
    sk: &crate::bfv::SecretKey,
    method: MatVecMethod,
    rows: usize,
    cols: usize,
    responses: &[Response],
) -> Result<Vec<u64>, HeError> {
    let params = sk.params();
    let plan = MatVecPlan::for_params(method, rows, cols, params)?;
    let dec = responses
        .iter()
        .map(|r| sk.decrypt_response(r))
        .collect::<Result<Vec<_>, _>>()?;
    plan.extract(&dec, params.t())
}
