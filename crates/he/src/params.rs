//! Validated BFV parameter sets and the precomputed NTT context.

use std::collections::HashMap;
use std::sync::Arc;

use tfhe_ntt::prime64::Plan;

use crate::arith::{inv_mod, is_prime, mul_mod, pow_mod, prime_below};
use crate::HeError;

/// How plaintexts are laid out in the polynomial.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Encoding {
    /// t prime, t ≡ 1 (mod 2n): n SIMD slots arranged as 2 rows × n/2 columns.
    Simd,
    /// t arbitrary (e.g. 2^l): values are polynomial coefficients (Z_{2^l} pipeline).
    Coefficient,
}

/// Largest log2(Q·P) allowed by the HE Standard (ternary secret, σ = 3.2, 128-bit classical).
pub fn he_standard_max_log_qp(n: usize) -> Option<f64> {
    match n {
        1024 => Some(27.0),
        2048 => Some(54.0),
        4096 => Some(109.0),
        8192 => Some(218.0),
        16384 => Some(438.0),
        32768 => Some(881.0),
        _ => None,
    }
}

/// A BFV parameter set, unvalidated. Build a usable [`Params`] with [`Params::new`].
#[derive(Clone, Debug, PartialEq)]
pub struct ParamSet {
    pub name: String,
    /// Ring degree (power of two).
    pub n: usize,
    /// Plaintext modulus.
    pub t: u64,
    pub encoding: Encoding,
    /// Ciphertext modulus Q as a product of 1 or 2 NTT primes (each < 2^62).
    pub q: Vec<u64>,
    /// Special key-switching prime P (NTT prime < 2^62).
    pub p: u64,
    /// Error standard deviation.
    pub sigma: f64,
    /// Key-switching digit size w (bits): each residue mod q_i is split into base-2^w digits.
    pub ks_digit_bits: u32,
}

impl ParamSet {
    /// The named sets. See docs/he-parameters.md.
    /// - `n4096`: n = 4096, t ≈ 2^20 (SIMD), Q one 62-bit prime, P a 47-bit prime; log2 QP < 109.
    /// - `n8192`: n = 8192, t ≈ 2^20 (SIMD), Q two 62-bit primes, P a 62-bit prime; log2 QP < 186.
    /// - `n8192-z2k32`: n = 8192, t = 2^32 (coefficient encoding), same Q, P as `n8192`.
    pub fn by_name(name: &str) -> Result<ParamSet, HeError> {
        match name {
            "n4096" => {
                let n = 4096usize;
                let t = simd_t(20, 16384)?;
                let q0 = prime_below(62, 2 * n as u64 * t, &[]).ok_or(HeError::NoPrime)?;
                let p = prime_below(47, 2 * n as u64, &[q0]).ok_or(HeError::NoPrime)?;
                Ok(ParamSet {
                    name: name.into(),
                    n,
                    t,
                    encoding: Encoding::Simd,
                    q: vec![q0],
                    p,
                    sigma: 3.2,
                    ks_digit_bits: 31,
                })
            }
            "n8192" | "n8192-z2k32" => {
                let n = 8192usize;
                let (t, enc, m) = if name == "n8192" {
                    let t = simd_t(20, 16384)?;
                    (t, Encoding::Simd, 2 * n as u64 * t)
                } else {
                    (1u64 << 32, Encoding::Coefficient, 1u64 << 32)
                };
                let q0 = prime_below(62, m, &[]).ok_or(HeError::NoPrime)?;
                let q1 = prime_below(62, m, &[q0]).ok_or(HeError::NoPrime)?;
                let p = prime_below(62, 2 * n as u64, &[q0, q1]).ok_or(HeError::NoPrime)?;
                Ok(ParamSet {
                    name: name.into(),
                    n,
                    t,
                    encoding: enc,
                    q: vec![q0, q1],
                    p,
                    sigma: 3.2,
                    ks_digit_bits: 31,
                })
            }
            _ => Err(HeError::UnknownParamSet(name.to_string())),
        }
    }

    /// Names accepted by [`ParamSet::by_name`].
    pub fn names() -> &'static [&'static str] {
        &["n4096", "n8192", "n8192-z2k32"]
    }

    /// Same set with another key-switching digit size.
    pub fn with_digit_bits(mut self, w: u32) -> Self {
        self.ks_digit_bits = w;
        self
    }

    pub fn log2_q(&self) -> f64 {
        self.q.iter().map(|&q| (q as f64).log2()).sum()
    }
    pub fn log2_qp(&self) -> f64 {
        self.log2_q() + (self.p as f64).log2()
    }
    /// Fresh-noise headroom log2(Q / (2t)) in bits.
    pub fn log2_delta_half(&self) -> f64 {
        self.log2_q() - (self.t as f64).log2() - 1.0
    }

    /// Checks every invariant the arithmetic relies on, including 128-bit security.
    pub fn validate(&self) -> Result<(), HeError> {
        let bad = |m: &str| Err(HeError::InvalidParams(format!("{}: {m}", self.name)));
        if !self.n.is_power_of_two() || self.n < 1024 {
            return bad("n must be a power of two ≥ 1024");
        }
        if self.q.is_empty() || self.q.len() > 2 {
            return bad("Q must have 1 or 2 primes");
        }
        let two_n = 2 * self.n as u64;
        let mut all = self.q.clone();
        all.push(self.p);
        for (i, &m) in all.iter().enumerate() {
            if m >= (1u64 << 62) || !is_prime(m) || m % two_n != 1 {
                return bad("moduli must be primes < 2^62, ≡ 1 mod 2n");
            }
            if all[..i].contains(&m) {
                return bad("moduli must be distinct");
            }
        }
        if self.t < 2 {
            return bad("t must be ≥ 2");
        }
        match self.encoding {
            Encoding::Simd => {
                if !is_prime(self.t) || self.t % two_n != 1 || self.t >= (1 << 62) {
                    return bad("SIMD needs a prime t ≡ 1 mod 2n");
                }
            }
            Encoding::Coefficient => {
                if self.t > (1u64 << 40) {
                    return bad("coefficient-encoding t must be ≤ 2^40");
                }
            }
        }
        if self.q.iter().any(|&q| q <= self.t) {
            return bad("each q_i must exceed t");
        }
        if !(1..=62).contains(&self.ks_digit_bits) {
            return bad("digit size must be in 1..=62 bits");
        }
        if (self.sigma - 3.2).abs() > 1e-9 {
            return bad(
                "sigma must be 3.2 (the error sampler is a centered binomial with σ ≈ 3.24)",
            );
        }
        let max = he_standard_max_log_qp(self.n).ok_or(HeError::InvalidParams(format!(
            "{}: no HE Standard entry for n={}",
            self.name, self.n
        )))?;
        if self.log2_qp() > max {
            return Err(HeError::InsecureParams {
                log_qp: self.log2_qp(),
                max,
            });
        }
        if self.log2_delta_half() < 10.0 {
            return bad("Q/t leaves no noise budget");
        }
        Ok(())
    }
}

fn simd_t(bits: u32, m: u64) -> Result<u64, HeError> {
    prime_below(bits, m, &[]).ok_or(HeError::NoPrime)
}

/// Per-modulus NTT data: plan plus the root-exponent tables that turn Galois automorphisms
/// into permutations of NTT slots.
pub(crate) struct ModCtx {
    pub(crate) q: u64,
    pub(crate) plan: Plan,
    /// exponent e (odd, < 2n) of the root at each NTT index: value index i = poly(ζ^e).
    pub(crate) exp_of_idx: Vec<u32>,
    /// inverse of exp_of_idx (entries for even exponents unused).
    pub(crate) idx_of_exp: Vec<u32>,
}

impl ModCtx {
    fn new(n: usize, q: u64) -> Result<ModCtx, HeError> {
        let plan = Plan::try_new(n, q).ok_or(HeError::InvalidParams(format!(
            "no negacyclic NTT of size {n} mod {q}"
        )))?;
        let mut x = vec![0u64; n];
        x[1] = 1;
        plan.fwd(&mut x);
        let zeta = x[0];
        let two_n = 2 * n;
        let mut map: HashMap<u64, u32> = HashMap::with_capacity(n);
        let z2 = mul_mod(zeta, zeta, q);
        let mut v = zeta;
        for k in (1..two_n).step_by(2) {
            map.insert(v, k as u32);
            v = mul_mod(v, z2, q);
        }
        let mut exp_of_idx = vec![0u32; n];
        let mut idx_of_exp = vec![0u32; two_n];
        for (i, r) in x.iter().enumerate() {
            let e = *map
                .get(r)
                .ok_or(HeError::InvalidParams("NTT root map".into()))?;
            exp_of_idx[i] = e;
            idx_of_exp[e as usize] = i as u32;
        }
        Ok(ModCtx {
            q,
            plan,
            exp_of_idx,
            idx_of_exp,
        })
    }

    /// Permutation of NTT slots for the automorphism X -> X^g: out[i] = in[perm[i]].
    pub(crate) fn galois_perm(&self, g: usize) -> Vec<u32> {
        let two_n = 2 * self.exp_of_idx.len();
        self.exp_of_idx
            .iter()
            .map(|&e| self.idx_of_exp[(e as usize * g) % two_n])
            .collect()
    }

    pub(crate) fn to_ntt(&self, a: &mut [u64]) {
        self.plan.fwd(a);
    }
    pub(crate) fn to_coeff(&self, a: &mut [u64]) {
        self.plan.inv(a);
        self.plan.normalize(a);
    }
}

pub(crate) struct ParamsInner {
    pub(crate) set: ParamSet,
    pub(crate) qs: Vec<ModCtx>,
    pub(crate) pm: ModCtx,
    /// Context for t (SIMD only).
    pub(crate) tm: Option<ModCtx>,
    /// SIMD: NTT-mod-t index of each slot (row-major, 2 rows × n/2).
    pub(crate) slot_idx: Vec<u32>,
    /// floor(Q / t) reduced mod each q_i.
    pub(crate) delta_mod_q: Vec<u64>,
    /// Q as u128 and floor(Q/t) as u128.
    pub(crate) q_big: u128,
    pub(crate) delta: u128,
    /// For CRT (2 primes): q0^{-1} mod q1.
    pub(crate) q0_inv_mod_q1: u64,
    /// P^{-1} mod q_i.
    pub(crate) p_inv_mod_q: Vec<u64>,
    /// P mod q_i.
    pub(crate) p_mod_q: Vec<u64>,
}

/// Validated parameters with their precomputed NTT context. Cheap to clone (Arc).
#[derive(Clone)]
pub struct Params(pub(crate) Arc<ParamsInner>);

impl std::fmt::Debug for Params {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Params({:?})", self.0.set)
    }
}

impl Params {
    pub fn new(set: ParamSet) -> Result<Params, HeError> {
        set.validate()?;
        let n = set.n;
        let qs = set
            .q
            .iter()
            .map(|&q| ModCtx::new(n, q))
            .collect::<Result<Vec<_>, _>>()?;
        let pm = ModCtx::new(n, set.p)?;
        let (tm, slot_idx) = if set.encoding == Encoding::Simd {
            let tm = ModCtx::new(n, set.t)?;
            let two_n = 2 * n;
            let half = n / 2;
            let mut slot_idx = vec![0u32; n];
            let mut g = 1usize;
            for j in 0..half {
                slot_idx[j] = tm.idx_of_exp[g];
                slot_idx[half + j] = tm.idx_of_exp[two_n - g];
                g = g * 3 % two_n;
            }
            (Some(tm), slot_idx)
        } else {
            (None, Vec::new())
        };
        let q_big: u128 = set.q.iter().map(|&q| q as u128).product();
        let delta = q_big / set.t as u128;
        let delta_mod_q = set.q.iter().map(|&q| (delta % q as u128) as u64).collect();
        let q0_inv_mod_q1 = if set.q.len() == 2 {
            inv_mod(set.q[0] % set.q[1], set.q[1])
        } else {
            0
        };
        let p_inv_mod_q = set.q.iter().map(|&q| inv_mod(set.p % q, q)).collect();
        let p_mod_q = set.q.iter().map(|&q| set.p % q).collect();
        Ok(Params(Arc::new(ParamsInner {
            set,
            qs,
            pm,
            tm,
            slot_idx,
            delta_mod_q,
            q_big,
            delta,
            q0_inv_mod_q1,
            p_inv_mod_q,
            p_mod_q,
        })))
    }

    /// `Params::new(ParamSet::by_name(name)?)`.
    pub fn by_name(name: &str) -> Result<Params, HeError> {
        Params::new(ParamSet::by_name(name)?)
    }

    pub fn set(&self) -> &ParamSet {
        &self.0.set
    }
    pub fn n(&self) -> usize {
        self.0.set.n
    }
    pub fn t(&self) -> u64 {
        self.0.set.t
    }
    /// Number of SIMD slots (n) for SIMD sets.
    pub fn slots(&self) -> usize {
        self.0.set.n
    }
    /// Length of a rotation row (n/2).
    pub fn row_len(&self) -> usize {
        self.0.set.n / 2
    }
    pub fn num_q(&self) -> usize {
        self.0.set.q.len()
    }
    pub(crate) fn l(&self) -> usize {
        self.0.set.q.len()
    }
    /// Number of key-switching digits.
    pub fn ks_digits(&self) -> usize {
        self.digits_per_prime().iter().sum()
    }
    pub(crate) fn digits_per_prime(&self) -> Vec<usize> {
        let w = self.0.set.ks_digit_bits;
        self.0
            .set
            .q
            .iter()
            .map(|&q| ((64 - q.leading_zeros()) as usize).div_ceil(w as usize))
            .collect()
    }
    /// Galois element for a left rotation of each row by `step` (0 ≤ step < n/2).
    pub fn galois_elt_rotate(&self, step: usize) -> usize {
        let two_n = 2 * self.n();
        pow_mod(3, (step % self.row_len()) as u64, two_n as u64) as usize
    }
    /// Galois element swapping the two rows.
    pub fn galois_elt_row_swap(&self) -> usize {
        2 * self.n() - 1
    }
    pub fn log2_q(&self) -> f64 {
        self.0.set.log2_q()
    }
}
