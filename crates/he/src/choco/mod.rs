//! CHOCO client-aided HE (van der Hagen & Lucia, ASPLOS '22): the server evaluates only linear
//! layers on BFV ciphertexts and returns them re-randomised; the client decrypts, applies the
//! nonlinear layers in the clear and re-encrypts, which refreshes the noise every layer.
//!
//! * [`pack`]: the rotational-redundancy packing `[x | x]` and the masked baseline.
//! * [`dense`]: the windowed-rotation Dense kernel.
//! * [`conv`]: the windowed Conv2d kernel, one rotation per kernel offset on `[x | x]`-packed
//!   channel groups; [`Kernel`] schedules either.
//! * [`RnsParams`]: exact integer results. A layer's accumulator `Σ W·x + b·2^F` must come back
//!   exactly, so the plaintext space is the product T of k SIMD primes t_i ≈ 2^20 (one BFV
//!   parameter set, key set and ciphertext per prime), with k the least such that
//!   T > 2·|accumulator| for every input the fixed-point format allows
//!   ([`accumulator_bound`]); the client CRT-combines the k decryptions into the centered
//!   integer, which never wrapped mod T.
//! * [`finish`]: what the server returns: no mask (the client is meant to see the result),
//!   noise flooded to ≥ 2^-40 statistical distance and c1 re-randomised with a fresh
//!   public-key encryption of zero, then switched to a small modulus. Nothing of the weights
//!   beyond the result itself reaches the client.
pub mod conv;
pub mod dense;
pub mod kernel;
pub mod pack;

pub use conv::{plain_conv, ConvPlan, ConvPrepared};
pub use dense::{conv_matrix, plain_matvec, DensePlan, Prepared};
pub use kernel::{Kernel, KernelWeights};
pub use pack::{
    baseline_masks, baseline_pack, pack, redundant_pack, unpack, windowed_rotate, windowed_steps,
    Packing, WindowMasks,
};

use crate::arith::{inv_mod, prime_below};
use crate::bfv::{Ciphertext, PublicKey, Response};
use crate::params::{Encoding, ParamSet, Params};
use crate::HeError;

/// Statistical-distance exponent every returned ciphertext's flooding reaches (DESIGN.md §2).
pub const FLOOD_STAT_BITS: u32 = 40;

/// Ring degree of the CHOCO parameter sets: n = 4096 has no room for 2^-40 flooding of a
/// product with a SIMD-encoded weight (docs/he-parameters.md), n = 8192 with Q ≈ 2^124 does.
pub const RING_DEGREE: usize = 8192;

/// Ring degree of the masked baseline. Its mask products spend a multiplicative level, so
/// 2^-40 flooding needs a wider Q than the redundant packing's two 62-bit primes: with a
/// 23-bit t (the widest plaintext prime) a Dense product's flood needs ≈ 2^128 of noise below
/// Δ/4. n = 8192 with three 56-bit Q primes and a 50-bit P (log2 QP < 218, the HE Standard's
/// bound) leaves ≈ 2^143, so the baseline keeps the redundant packing's ring and pays one
/// more Q residue per ciphertext coefficient.
pub const BASELINE_RING_DEGREE: usize = 8192;

/// Q primes of the masked baseline (see [`BASELINE_RING_DEGREE`]).
pub const BASELINE_Q_PRIMES: usize = 3;

/// The ring degree and number of Q primes a packing needs (their widths: [`q_prime_bits`]).
pub fn ring_for(packing: Packing) -> (usize, usize) {
    match packing {
        Packing::Redundant => (RING_DEGREE, 2),
        Packing::Baseline => (BASELINE_RING_DEGREE, BASELINE_Q_PRIMES),
    }
}

/// Bits of the Q primes and of P for `q_primes` Q primes at ring degree `n`: 62 each while
/// log2 QP stays within the HE Standard's 128-bit bound (docs/he-parameters.md); else P of
/// [`MIN_P_BITS`] bits and the Q primes as wide as the rest of the bound allows.
pub fn q_prime_bits(n: usize, q_primes: usize) -> Result<(u32, u32), HeError> {
    let max = crate::params::he_standard_max_log_qp(n).ok_or(HeError::InvalidParams(format!(
        "no HE Standard entry for n = {n}"
    )))? as u32;
    let l = q_primes as u32;
    if 62 * (l + 1) <= max {
        return Ok((62, 62));
    }
    let q_bits = ((max - MIN_P_BITS) / l).min(62);
    Ok((q_bits, (max - l * q_bits).min(62)))
}

/// The narrowest special prime P a wide-Q set takes. Key switching splits each Q residue into
/// 31-bit digits, so its error after the division by P is ≈ √(digits·n/3)·2^31·σ/P: below 1 for
/// P ≥ 2^50 at n ≤ 16384, far under the division's own rounding (≈ √n).
const MIN_P_BITS: u32 = 50;

/// Bits of each plaintext prime when an accumulator needs several.
const T_BITS: u32 = 20;

/// The widest single plaintext prime the small-plaintext profile uses. A layer whose
/// accumulator fits one prime of at most this many bits gets one BFV parameter set, so one
/// ciphertext per window up and down instead of k. Each bit of t costs about two bits of the
/// flooding room (Δ = Q/t shrinks and the SIMD-encoded weights' norm grows with t); at
/// n = 8192 with two 62-bit Q primes 2^-40 flooding of a 784 → 128 Dense product needs
/// 2^98.2 of noise with a 23-bit t, where Δ/4 leaves 2^98.9, and a 24-bit t has no room
/// (`tests/choco.rs::single_prime_profile_floods_40_bits`).
pub const MAX_SINGLE_T_BITS: u32 = 23;

/// The plaintext primes t_1 … t_k and their BFV parameter sets (n = 8192, Q two 62-bit primes
/// ≡ 1 mod 2n·t_i, so Q ≡ 1 mod t_i; P a 62-bit prime; log2 QP ≈ 186 ≤ 218; the masked
/// baseline: three 56-bit Q primes and a 50-bit P, [`ring_for`]).
#[derive(Clone, Debug)]
pub struct RnsParams {
    sets: Vec<Params>,
}

impl RnsParams {
    /// `primes` plaintext primes (1 to 4) at n = [`RING_DEGREE`].
    pub fn new(primes: usize) -> Result<RnsParams, HeError> {
        Self::with_ring(primes, RING_DEGREE, 2)
    }

    /// `primes` 20-bit plaintext primes (1 to 4) at ring degree `n` with `q_primes` Q primes
    /// ([`q_prime_bits`]).
    pub fn with_ring(primes: usize, n: usize, q_primes: usize) -> Result<RnsParams, HeError> {
        Self::with_prime_bits(primes, T_BITS, n, q_primes)
    }

    /// `primes` plaintext primes (1 to 4) of at most `t_bits` bits (20 to
    /// [`MAX_SINGLE_T_BITS`]) at ring degree `n` with `q_primes` Q primes (1 to 4, of the
    /// widths [`q_prime_bits`] gives).
    pub fn with_prime_bits(
        primes: usize,
        t_bits: u32,
        n: usize,
        q_primes: usize,
    ) -> Result<RnsParams, HeError> {
        if !(1..=4).contains(&primes)
            || !(1..=crate::params::MAX_Q_PRIMES).contains(&q_primes)
            || !(T_BITS..=MAX_SINGLE_T_BITS).contains(&t_bits)
        {
            return Err(HeError::InvalidParams(format!(
                "{primes} plaintext primes of {t_bits} bits (1 to 4 of {T_BITS} to \
                 {MAX_SINGLE_T_BITS} bits supported), {q_primes} Q primes"
            )));
        }
        let two_n = 2 * n as u64;
        let (q_bits, p_bits) = q_prime_bits(n, q_primes)?;
        let mut ts: Vec<u64> = Vec::new();
        let mut sets = Vec::with_capacity(primes);
        for i in 0..primes {
            let t = prime_below(t_bits, two_n, &ts).ok_or(HeError::NoPrime)?;
            ts.push(t);
            let mut q: Vec<u64> = Vec::with_capacity(q_primes);
            for _ in 0..q_primes {
                q.push(prime_below(q_bits, two_n * t, &q).ok_or(HeError::NoPrime)?);
            }
            let p = prime_below(p_bits, two_n, &q).ok_or(HeError::NoPrime)?;
            // The 20-bit sets keep their historical names (and so their session hashes).
            let name = if t_bits == T_BITS {
                format!("choco-n{n}-t{i}")
            } else {
                format!("choco-n{n}-t{t_bits}b{i}")
            };
            sets.push(Params::new(ParamSet {
                name,
                n,
                t,
                encoding: Encoding::Simd,
                q,
                p,
                sigma: 3.2,
                ks_digit_bits: 31,
            })?);
        }
        Ok(RnsParams { sets })
    }

    /// The fewest primes whose product exceeds `2·max_abs` (so a centered result is exact).
    pub fn for_bound(max_abs: u128) -> Result<RnsParams, HeError> {
        Self::for_packing(max_abs, Packing::Redundant)
    }

    /// [`RnsParams::for_bound`] on the ring `packing` needs ([`ring_for`]). An accumulator that
    /// fits one prime of at most [`MAX_SINGLE_T_BITS`] bits gets that one prime, the narrowest
    /// that holds it (the small-plaintext profile: one ciphertext per window instead of k);
    /// wider ones get k 20-bit primes.
    pub fn for_packing(max_abs: u128, packing: Packing) -> Result<RnsParams, HeError> {
        Self::for_ring(max_abs, ring_for(packing))
    }

    /// [`RnsParams::for_packing`] on a given ring: (degree, Q primes). Only for measuring a
    /// packing on another ring than the one [`ring_for`] gives it (whether its flooding fits
    /// there is checked when the server answers).
    pub fn for_ring(max_abs: u128, (n, q): (usize, usize)) -> Result<RnsParams, HeError> {
        let need = (2.0 * max_abs as f64 + 1.0).log2();
        // A prime below 2^b is above 2^(b − 0.01) for these b and moduli (checked below).
        let single = ((need + 0.01).ceil() as u32).max(T_BITS);
        if single <= MAX_SINGLE_T_BITS {
            let r = RnsParams::with_prime_bits(1, single, n, q)?;
            if r.modulus_log2() > need {
                return Ok(r);
            }
            if single < MAX_SINGLE_T_BITS {
                return RnsParams::with_prime_bits(1, single + 1, n, q);
            }
        }
        let k = (need / (T_BITS as f64 - 0.01)).ceil().max(1.0) as usize;
        let r = RnsParams::with_ring(k, n, q)?;
        if r.modulus_log2() <= need {
            return RnsParams::with_ring(k + 1, n, q);
        }
        Ok(r)
    }

    /// Ring degree of every set.
    pub fn ring_degree(&self) -> usize {
        self.sets[0].n()
    }

    pub fn sets(&self) -> &[Params] {
        &self.sets
    }

    pub fn primes(&self) -> Vec<u64> {
        self.sets.iter().map(Params::t).collect()
    }

    /// log2 T.
    pub fn modulus_log2(&self) -> f64 {
        self.sets.iter().map(|p| (p.t() as f64).log2()).sum()
    }

    /// Signed integers → their residues, one vector per prime.
    pub fn residues(&self, x: &[i64]) -> Vec<Vec<u64>> {
        self.sets
            .iter()
            .map(|p| {
                x.iter()
                    .map(|v| v.rem_euclid(p.t() as i64) as u64)
                    .collect()
            })
            .collect()
    }

    /// Residues (one vector per prime, equal lengths) → the centered integers in (−T/2, T/2].
    pub fn reconstruct(&self, res: &[Vec<u64>]) -> Result<Vec<i128>, HeError> {
        if res.len() != self.sets.len() {
            return Err(HeError::WrongLength {
                expected: self.sets.len(),
                got: res.len(),
            });
        }
        let len = res[0].len();
        let ts = self.primes();
        if let Some(r) = res.iter().find(|r| r.len() != len) {
            return Err(HeError::WrongLength {
                expected: len,
                got: r.len(),
            });
        }
        let big: u128 = ts.iter().map(|&t| t as u128).product();
        // CRT basis: e_i = M_i·(M_i^{-1} mod t_i), M_i = T / t_i; T < 2^80 keeps every product
        // below 2^128 when each factor is reduced first.
        let basis: Vec<u128> = ts
            .iter()
            .map(|&t| {
                let mi = big / t as u128;
                mi * inv_mod((mi % t as u128) as u64, t) as u128
            })
            .collect();
        (0..len)
            .map(|j| {
                let mut x = 0u128;
                for ((r, &e), &t) in res.iter().zip(&basis).zip(&ts) {
                    if r[j] >= t {
                        return Err(HeError::OutOfRange {
                            index: j,
                            value: r[j],
                            modulus: t,
                        });
                    }
                    x = (x + mul_mod_u128(r[j] as u128, e, big)) % big;
                }
                Ok(if x > big / 2 {
                    x as i128 - big as i128
                } else {
                    x as i128
                })
            })
            .collect()
    }
}

/// a·b mod m for a < 2^26, b < m < 2^100 without overflow (double-and-add on the small factor).
fn mul_mod_u128(a: u128, b: u128, m: u128) -> u128 {
    let (mut acc, mut a, mut b) = (0u128, a, b % m);
    while a > 0 {
        if a & 1 == 1 {
            acc = (acc + b) % m;
        }
        b = (b << 1) % m;
        a >>= 1;
    }
    acc
}

/// The largest |Σ_j W_ij·x_j + b_i·2^frac| a `cols`-column layer can reach when weights,
/// inputs and biases are `bits`-bit two's-complement integers: cols·2^{2(bits−1)} +
/// 2^{bits−1+frac}. Public (format and shape only), so the number of primes reveals nothing.
pub fn accumulator_bound(cols: usize, bits: u32, frac: u32) -> u128 {
    accumulator_bound_for_inputs(cols, bits, frac, 1u128 << (bits - 1))
}

/// [`accumulator_bound`] when the layer's inputs are publicly known to satisfy
/// |x| ≤ `x_max` (a model's stated input range, which the client applies before encrypting):
/// cols·2^{bits−1}·x_max + 2^{bits−1+frac}. A client that broke the range would only wrap its
/// own result modulo T, a function of the accumulator it is shown anyway.
pub fn accumulator_bound_for_inputs(cols: usize, bits: u32, frac: u32, x_max: u128) -> u128 {
    let half = 1u128 << (bits - 1);
    cols as u128 * half * x_max.min(half) + (half << frac)
}

/// log2 of the response modulus: t, 2 bits of slack, 10 std of the switch's rounding noise,
/// 2 bits of margin.
pub fn response_log_q(params: &Params) -> u32 {
    let n = params.n() as f64;
    let round_bound = 10.0 * ((1.0 + n * 2.0 / 3.0) / 12.0).sqrt();
    ((params.t() as f64).log2() + 2.0 + round_bound.log2() + 2.0).ceil() as u32
}

/// Server: re-randomises a result ciphertext for the client, unmasked. Floods its noise to
/// ≥ 2^-`stat_bits` statistical distance (a [`HeError::NoiseBudget`] error when Δ/4 leaves no
/// room), re-randomises c1 with a fresh public-key encryption of zero and switches to
/// 2^[`response_log_q`]. Returns the response and the statistical exponent reached.
pub fn finish(
    params: &Params,
    pk: &PublicKey,
    ct: &Ciphertext,
    stat_bits: u32,
) -> Result<(Response, f64), HeError> {
    let n = params.n() as f64;
    let sigma = params.set().sigma;
    // Kernel noise plus the zero-encryption's u·e + e2·s.
    let var = ct.var + n * (2.0 / 3.0) * sigma * sigma * 2.0;
    let log_e = (10.0 * var.sqrt()).log2();
    // The exact amplitude, not the next power of two: a wide plaintext prime's room lies
    // within a bit of its need.
    let want = stat_bits as f64 + n.log2() + log_e;
    // The flood shares Δ/4 with the kernel's noise bound.
    let room = crate::kernels::flood_room(
        params.log2_q() - (params.t() as f64).log2() - 2.0 - 0.1,
        log_e,
    );
    if want > room {
        return Err(HeError::NoiseBudget(format!(
            "flooding to 2^-{stat_bits} needs 2^{want:.2} of noise; beside the kernel's noise, Δ/4 leaves 2^{room:.1}"
        )));
    }
    // The 10^-6 bit absorbs f64's rounding, so the amplitude is at least 2^want. With two Q
    // primes the room keeps 2^want below 2^123; with three (the masked baseline) it can pass
    // 2^126, and the amplitude is then flood·2^shift with flood ≈ 2^120.
    let log_flood = want + 1e-6;
    let shift = if log_flood < 125.0 {
        0
    } else {
        (log_flood - 120.0).ceil() as u32
    };
    let flood = 2f64.powf(log_flood - shift as f64) as u128 + u128::from(shift > 0);
    let resp =
        params.finish_response_flooded_wide(ct, pk, flood, shift, None, response_log_q(params))?;
    Ok((
        resp,
        (flood as f64).log2() + shift as f64 - n.log2() - log_e,
    ))
}

/// Server: adds the plaintext slot vector `v` (values mod t) to a ciphertext.
pub fn add_plain(params: &Params, ct: &Ciphertext, v: &[u64]) -> Result<Ciphertext, HeError> {
    let m = crate::bfv::encode_simd(params, v)?;
    Ok(params.add_plain_poly(ct, &m, false))
}

/// Server: adds the bias slot vector `bias` (values mod t) and, in every slot that is not one
/// of the layer's outputs (`is_output` false), a fresh uniform value mod t from the OS-seeded
/// PRG. The Dense kernel's rotate-and-sum leaves partial inner products (sums over subsets of a
/// row) in the other slots, and the redundant copy holds more; uniform values there leave the
/// client the outputs and nothing else. Adding a plaintext costs no noise.
pub fn add_plain_hiding(
    params: &Params,
    ct: &Ciphertext,
    bias: &[u64],
    is_output: &[bool],
) -> Result<Ciphertext, HeError> {
    if bias.len() != is_output.len() {
        return Err(HeError::WrongLength {
            expected: is_output.len(),
            got: bias.len(),
        });
    }
    let t = params.t();
    let mask = u64::MAX >> (t - 1).leading_zeros();
    let mut prg = secinfer_core::Prg::new();
    let mut words: Vec<u64> = Vec::new();
    let mut next = move || loop {
        if words.is_empty() {
            words = prg
                .blocks(64)
                .iter()
                .flat_map(|b| [b.0 as u64, (b.0 >> 64) as u64])
                .collect();
        }
        let v = words.pop().unwrap_or(0) & mask;
        if v < t {
            return v;
        }
    };
    let v: Vec<u64> = bias
        .iter()
        .zip(is_output)
        .map(|(&b, &o)| if o { b } else { next() })
        .collect();
    add_plain(params, ct, &v)
}
