//! Validated BFV parameter sets and the precomputed NTT context.

use std::collections::HashMap;
use std::sync::Arc;

use crate::ntt32::Ntt32;
use tfhe_ntt::prime64::Plan;

use crate::arith::{inv_mod, is_prime, mul_mod, pow_mod, prime_below, sub_mod};
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

/// Most Q primes a parameter set may have. One and two primes take the exact u128 paths;
/// three and four (wide Q, e.g. the masked CHOCO baseline's flooding room) reach them through
/// an exact RNS rescale to the first two primes ([`Params::rescale_to_two`]).
pub const MAX_Q_PRIMES: usize = 4;

/// A BFV parameter set, unvalidated. Build a usable [`Params`] with [`Params::new`].
#[derive(Clone, Debug, PartialEq)]
pub struct ParamSet {
    pub name: String,
    /// Ring degree (power of two).
    pub n: usize,
    /// Plaintext modulus.
    pub t: u64,
    pub encoding: Encoding,
    /// Ciphertext modulus Q as a product of 1 to [`MAX_Q_PRIMES`] NTT primes (each < 2^62).
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
    /// - `n4096`: n = 4096, t = 557057 ≈ 2^19.09 (SIMD), Q two 30-bit primes with q0·q1 ≡ 1 (mod t), P a
    ///   30-bit prime; log2 QP ≈ 90 < 109. Every modulus is below 2^30, so NTTs and key
    ///   switching run on tfhe-ntt's 32-bit plans, on their faster path for primes below 2^30
    ///   (≈ 6.2 against ≈ 7.5 µs per 4096-point transform here; 3–4× faster than the 64-bit
    ///   plans), and one key-switching digit per Q prime (RNS digits) keeps a rotation at 12
    ///   NTTs. The price is ≈ 2 bits of Q, i.e. of every kernel's noise budget, against the
    ///   former 31-bit primes, which the smaller t (formerly 1032193 ≈ 2^19.98) mostly gives
    ///   back: budgets within ≈ 0.6 bit of the 31-bit set's (docs/he-parameters.md).
    /// - `n8192`: n = 8192, t ≈ 2^20 (SIMD), Q two 62-bit primes, P a 62-bit prime; log2 QP < 186.
    /// - `n8192-z2k32`: n = 8192, t = 2^32 (coefficient encoding), same Q, P as `n8192`.
    /// - `n8192-t25`: `n8192` with t ≈ 2^25 (SIMD): room for the accumulators of image
    ///   networks' dense and conv layers (|Σ W·x| < 2^24 for 12-bit activations and weights over
    ///   hundreds of terms) while GALA's and GAZELLE's matvecs still flood their responses to
    ///   40 statistical bits (at t ≈ 2^27 they reach only 38.3).
    /// - `n8192-t23`: `n8192` with t ≈ 2^23 (SIMD). A ScMult's noise grows with t and Δ = Q/t
    ///   shrinks with it, so two bits less of t give ≈ 4 bits more of flooding: GALA's
    ///   convolutions, which flood only 37–39 bits at t ≈ 2^25, reach 40 here. Accumulators must
    ///   stay below 2^22, which a network's interval bound (stated input range, ReLU'd hidden
    ///   values) shows for the MNIST models.
    pub fn by_name(name: &str) -> Result<ParamSet, HeError> {
        match name {
            "n4096" => {
                let n = 4096usize;
                // t = 17·2^15 + 1 ≈ 2^19.09 (prime, ≡ 1 mod 2^15: SIMD up to n = 2^14) rather
                // than the largest such prime below 2^20 (1032193): with 30-bit primes Q has
                // ≈ 2 bits less than with 31-bit ones, and the noise after a ScMult grows with
                // t while Δ = Q/t shrinks with it, so each bit less of t gives back ≈ 2 bits of
                // budget. This t keeps every kernel within ≈ 0.6 bit of the 31-bit set's budget
                // (docs/he-parameters.md, "Noise budget").
                let t = 17 * (1u64 << 15) + 1;
                // All three moduli below 2^30 (tfhe-ntt's faster 32-bit path) and above 2^29
                // (one octave: `ks32` lifts centered residues between them without reduction).
                let (q0, q1) = q_pair_one_mod_t(30, 2 * n as u64, t)?;
                let p = prime_below(30, 2 * n as u64, &[q0, q1]).ok_or(HeError::NoPrime)?;
                Ok(ParamSet {
                    name: name.into(),
                    n,
                    t,
                    encoding: Encoding::Simd,
                    q: vec![q0, q1],
                    p,
                    sigma: 3.2,
                    // Hoisting decomposes each 30-bit limb into two 15-bit digits (the
                    // key-switching error then stays far below the rounding of the division
                    // by P, so rotate-then-multiply keeps its budget); a plain rotation uses
                    // the keys of the low digits only, with the whole limb as its digit.
                    ks_digit_bits: 15,
                })
            }
            "n8192" | "n8192-z2k32" | "n8192-t25" | "n8192-t23" => {
                let n = 8192usize;
                let (t, enc, m) = if name != "n8192-z2k32" {
                    let bits = match name {
                        "n8192" => 20,
                        "n8192-t23" => 23,
                        _ => 25,
                    };
                    let t = simd_t(bits, 16384)?;
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
        &["n4096", "n8192", "n8192-z2k32", "n8192-t25", "n8192-t23"]
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
        if self.q.is_empty() || self.q.len() > MAX_Q_PRIMES {
            return bad("Q must have 1 to 4 primes");
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
        if self.q.len() > 2 && (self.q[0] <= self.q[1] || self.q[0] / 2 >= self.q[1]) {
            // The rescale keeps q0, q1 and ends in the two-prime switch of `arith::Rns2`,
            // which needs q1 < q0 < 2·q1.
            return bad("with 3 or more Q primes, q1 < q0 < 2·q1");
        }
        if self.encoding == Encoding::Simd
            && self
                .q
                .iter()
                .fold(1u64, |acc, &q| mul_mod(acc, q % self.t, self.t))
                != 1
        {
            // Q mod t multiplies the ScMult rounding error; every set keeps it at 1.
            return bad("SIMD sets need Q ≡ 1 (mod t)");
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

/// The Barrett constants of `ks32::mul_acc_small` for a modulus q < 2^31 of bit length b:
/// (⌊2^(2b) / q⌋, b).
fn barrett_mu(q: u64) -> (u64, u32) {
    let b = 64 - q.leading_zeros();
    ((1u64 << (2 * b)) / q, b)
}

fn simd_t(bits: u32, m: u64) -> Result<u64, HeError> {
    prime_below(bits, m, &[]).ok_or(HeError::NoPrime)
}

/// Two distinct primes q0, q1 < 2^bits, both ≡ 1 (mod m), above 2^(bits-1), with
/// q0·q1 ≡ 1 (mod t), maximising q0·q1. Primes this small cannot each be ≡ 1 (mod m·t)
/// (m·t > 2^bits), but the *product* being ≡ 1 (mod t) is what BFV needs: the ScMult
/// rounding term is (Q mod t)·⌊m·p/t⌋, so Q mod t = 1 keeps it as small as one 62-bit
/// prime ≡ 1 (mod t) did. For each candidate q0 the class of q1 mod m·t is fixed by CRT;
/// since m·t > 2^bits there is at most one candidate q1 per q0.
fn q_pair_one_mod_t(bits: u32, m: u64, t: u64) -> Result<(u64, u64), HeError> {
    let top = 1u64 << bits;
    let low = 1u64 << (bits - 1);
    let mt = m as u128 * t as u128;
    // m^{-1} mod t (t prime, m < t or coprime).
    let m_inv_t = crate::arith::inv_mod(m % t, t);
    let mut best: Option<(u128, u64, u64)> = None;
    let mut k = (top - 1) / m;
    // Scan q0 downwards; stop once even q0·(2^bits) cannot beat the best product.
    while k > 0 && k * m + 1 > low {
        let q0 = k * m + 1;
        k -= 1;
        if let Some((prod, _, _)) = best {
            if (q0 as u128) * (top as u128) <= prod {
                break;
            }
        }
        if !is_prime(q0) {
            continue;
        }
        // q1 ≡ 1 (mod m), q1 ≡ q0^{-1} (mod t).
        let inv = crate::arith::inv_mod(q0 % t, t);
        let h = mul_mod((inv + t - 1) % t, m_inv_t, t);
        let q1 = 1u128 + m as u128 * h as u128;
        debug_assert!(q1 < mt);
        if q1 >= top as u128 || q1 <= low as u128 || q1 as u64 == q0 || !is_prime(q1 as u64) {
            continue;
        }
        let q1 = q1 as u64;
        let prod = q0 as u128 * q1 as u128;
        if best.is_none_or(|(b, _, _)| prod > b) {
            best = Some((prod, q0.max(q1), q0.min(q1)));
        }
    }
    best.map(|(_, a, b)| (a, b)).ok_or(HeError::NoPrime)
}

/// Per-modulus NTT data: plan plus the root-exponent tables that turn Galois automorphisms
/// into permutations of NTT slots.
pub(crate) struct ModCtx {
    pub(crate) q: u64,
    /// ζ, the primitive 2n-th root of the transform: NTT slot i holds poly(ζ^exp_of_idx[i]).
    pub(crate) root: u64,
    /// 64-bit plan: element-wise products on u64 residues (any modulus).
    pub(crate) plan: Plan,
    /// 32-bit transform for moduli below 2^31 (`ntt32`: hand-written AVX2 below 2^30,
    /// tfhe-ntt's 32-bit plan otherwise; ≈ 3× and more faster than the 64-bit plan). It
    /// computes the same transform as `plan` (same root, same bit-reversed order: checked in
    /// `ModCtx::new`), so residues from either mix freely.
    pub(crate) plan32: Option<Ntt32>,
    /// exponent e (odd, < 2n) of the root at each NTT index: value index i = poly(ζ^e).
    pub(crate) exp_of_idx: Vec<u32>,
    /// inverse of exp_of_idx (entries for even exponents unused).
    pub(crate) idx_of_exp: Vec<u32>,
    /// (n^{-1} mod q, its 32-bit Shoup constant) for `to_coeff` on the 32-bit plan (0 without
    /// one): tfhe-ntt's `normalize` falls back to a scalar division-based loop for primes
    /// whose Barrett constant fails its single-reduction test (q0 of `n4096`: ≈ 7 µs against
    /// ≈ 0.5 µs here).
    n_inv32: (u32, u32),
}

thread_local! {
    /// u32 scratch for running the 32-bit plan on u64-stored residues.
    static SCRATCH32: std::cell::RefCell<Vec<u32>> = const { std::cell::RefCell::new(Vec::new()) };
}

impl ModCtx {
    fn new(n: usize, q: u64) -> Result<ModCtx, HeError> {
        let plan = Plan::try_new(n, q).ok_or(HeError::InvalidParams(format!(
            "no negacyclic NTT of size {n} mod {q}"
        )))?;
        let plan32 = if q < (1u64 << 31) {
            Ntt32::new(n, q as u32)
        } else {
            None
        };
        let mut x = vec![0u64; n];
        x[1] = 1;
        plan.fwd(&mut x);
        if let Some(p32) = &plan32 {
            // The two plans must agree, or residues transformed by one and multiplied with
            // keys or plaintexts transformed by the other would be garbage.
            let mut y = vec![0u32; n];
            y[1] = 1;
            p32.fwd(&mut y);
            if y.iter().zip(&x).any(|(&a, &b)| a as u64 != b) {
                return Err(HeError::InvalidParams(format!(
                    "32- and 64-bit NTT plans disagree mod {q}"
                )));
            }
        }
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
        let n_inv32 = if plan32.is_some() {
            let w = crate::arith::inv_mod(n as u64 % q, q) as u32;
            (w, crate::ks32::shoup32(w, q as u32))
        } else {
            (0, 0)
        };
        Ok(ModCtx {
            q,
            root: zeta,
            plan,
            plan32,
            n_inv32,
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

    /// Runs `f` on `a` narrowed to u32 (moduli < 2^31 only), writing the result back.
    fn via32(a: &mut [u64], f: impl FnOnce(&mut [u32])) {
        SCRATCH32.with(|s| {
            let mut s = s.borrow_mut();
            s.clear();
            s.extend(a.iter().map(|&v| v as u32));
            f(&mut s);
            for (o, &v) in a.iter_mut().zip(s.iter()) {
                *o = v as u64;
            }
        });
    }

    pub(crate) fn to_ntt(&self, a: &mut [u64]) {
        match &self.plan32 {
            Some(p) => Self::via32(a, |x| p.fwd(x)),
            None => self.plan.fwd(a),
        }
    }
    /// Inverse NTT without the multiplication by n^{-1}.
    pub(crate) fn inv_raw(&self, a: &mut [u64]) {
        match &self.plan32 {
            Some(p) => Self::via32(a, |x| p.inv(x)),
            None => self.plan.inv(a),
        }
    }
    /// acc ← acc + a ∘ b (NTT-slot products). Moduli below 2^31 use a Barrett product in
    /// u64 lanes (4× faster than the 64-bit plan's generic product for such small primes).
    pub(crate) fn mul_accumulate(&self, acc: &mut [u64], a: &[u64], b: &[u64]) {
        if self.plan32.is_some() {
            let (mu, bits) = barrett_mu(self.q);
            crate::ks32::mul_acc_small(acc, a, b, self.q, mu, bits);
        } else {
            self.plan.mul_accumulate(acc, a, b);
        }
    }

    /// out ← a ∘ b (overwrites every word of `out`).
    pub(crate) fn mul_into(&self, out: &mut [u64], a: &[u64], b: &[u64]) {
        if self.plan32.is_some() {
            let (mu, bits) = barrett_mu(self.q);
            crate::ks32::mul_small(out, a, b, self.q, mu, bits);
        } else {
            out.iter_mut().for_each(|v| *v = 0);
            self.plan.mul_accumulate(out, a, b);
        }
    }

    /// a ← the coefficient form of a ∘ b (both in NTT form). On the 64-bit plan the product
    /// and the multiplication by n⁻¹ are one in-place pass before the raw inverse transform.
    pub(crate) fn mul_to_coeff(&self, a: &mut [u64], b: &[u64]) {
        if self.plan32.is_some() {
            let (mu, bits) = barrett_mu(self.q);
            crate::ks32::mul_small_assign(a, b, self.q, mu, bits);
            self.to_coeff(a);
        } else {
            self.plan.mul_assign_normalize(a, b);
            self.plan.inv(a);
        }
    }

    pub(crate) fn to_coeff(&self, a: &mut [u64]) {
        match &self.plan32 {
            Some(p) => {
                let (w, ws) = self.n_inv32;
                Self::via32(a, |x| {
                    p.inv(x);
                    crate::ks32::scale(x, w, ws, self.q as u32);
                })
            }
            None => {
                self.plan.inv(a);
                self.plan.normalize(a);
            }
        }
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
    /// Q as u128 and floor(Q/t) as u128 for one or two primes. With three or more they are
    /// those of the first two primes (Q' = q0·q1 and ⌊Q'/t⌋): every path that needs Q as an
    /// integer first rescales exactly to Q' ([`Params::rescale_to_two`]).
    pub(crate) q_big: u128,
    pub(crate) delta: u128,
    /// Q mod t (the factor of BFV's ScMult rounding error), for any number of primes.
    pub(crate) q_mod_t: u64,
    /// For each prime index j ≥ 2, q_j⁻¹ mod q_i for i < j (the exact rescale dropping q_j).
    pub(crate) rescale_inv: Vec<Vec<u64>>,
    /// For CRT (2 primes): q0^{-1} mod q1.
    pub(crate) q0_inv_mod_q1: u64,
    /// P^{-1} mod q_i.
    pub(crate) p_inv_mod_q: Vec<u64>,
    /// P mod q_i.
    pub(crate) p_mod_q: Vec<u64>,
    /// 32-bit RNS key switching, when every modulus lies in one octave (2^(b−1), 2^b), b ≤ 31.
    pub(crate) ks32: Option<crate::ks32::Ks32>,
    /// Tables of the decimated inverse transform (`finish_response_at`'s c0), built on first
    /// use per residue class.
    pub(crate) decimated: crate::decimated::Cache,
    /// The auxiliary transform of response decryption (`Params::aux_ntt`), built on first use.
    pub(crate) aux: std::sync::OnceLock<Option<AuxNtt>>,
}

/// Bits of the auxiliary prime: tfhe-ntt runs a prime below 2^50.4 on AVX-512 IFMA where the
/// CPU has it, ≈ 2.5× faster than a 62-bit Q prime's transform (elsewhere on the same path
/// as the Q primes, so never slower).
const AUX_BITS: u32 = 50;

/// A negacyclic NTT on a prime p < 2^50, p ≡ 1 (mod 2n), for exact products of polynomials
/// whose product coefficients stay below p/2 in absolute value: a response's c1·s, with c1
/// centered mod 2^k and s ternary, when n·2^k < p.
pub(crate) struct AuxNtt {
    pub(crate) p: u64,
    pub(crate) plan: Plan,
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
    /// The ciphertext primes followed by the special prime P: the moduli of key switching's
    /// extended basis.
    pub(crate) fn ext_mods(&self) -> Vec<&ModCtx> {
        self.0
            .qs
            .iter()
            .chain(std::iter::once(&self.0.pm))
            .collect()
    }

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
        let two = &set.q[..set.q.len().min(2)];
        let q_big: u128 = two.iter().map(|&q| q as u128).product();
        let delta = q_big / set.t as u128;
        let q_mod_t = set
            .q
            .iter()
            .fold(1 % set.t, |acc, &q| mul_mod(acc, q % set.t, set.t));
        // Δ = (Q − (Q mod t))/t, so Δ ≡ −(Q mod t)·t⁻¹ (mod q_i): no integer Q needed, for
        // any number of primes.
        let delta_mod_q = set
            .q
            .iter()
            .map(|&q| {
                let r = mul_mod(q_mod_t % q, inv_mod(set.t % q, q), q);
                (q - r) % q
            })
            .collect();
        let rescale_inv = (0..set.q.len())
            .map(|j| {
                if j < 2 {
                    Vec::new()
                } else {
                    set.q[..j]
                        .iter()
                        .map(|&qi| inv_mod(set.q[j] % qi, qi))
                        .collect()
                }
            })
            .collect();
        let q0_inv_mod_q1 = if set.q.len() >= 2 {
            inv_mod(set.q[0] % set.q[1], set.q[1])
        } else {
            0
        };
        let p_inv_mod_q = set.q.iter().map(|&q| inv_mod(set.p % q, q)).collect();
        let p_mod_q = set.q.iter().map(|&q| set.p % q).collect();
        let w = set.ks_digit_bits as usize;
        let dpp: Vec<usize> = set
            .q
            .iter()
            .map(|&q| ((64 - q.leading_zeros()) as usize).div_ceil(w))
            .collect();
        let have_plans = qs.iter().all(|m| m.plan32.is_some()) && pm.plan32.is_some();
        let ks32 = crate::ks32::Ks32::new(n, &set.q, set.p, set.ks_digit_bits, &dpp, have_plans)
            .map(|mut k| {
                let ie: Vec<&[u32]> = qs
                    .iter()
                    .chain(std::iter::once(&pm))
                    .map(|m| m.idx_of_exp.as_slice())
                    .collect();
                k.set_slot_maps(&ie);
                k
            });
        Ok(Params(Arc::new(ParamsInner {
            set,
            qs,
            pm,
            tm,
            slot_idx,
            delta_mod_q,
            q_big,
            delta,
            q_mod_t,
            rescale_inv,
            q0_inv_mod_q1,
            p_inv_mod_q,
            p_mod_q,
            ks32,
            decimated: crate::decimated::Cache::default(),
            aux: std::sync::OnceLock::new(),
        })))
    }

    /// The auxiliary transform ([`AuxNtt`]); `None` when the degree has no such prime.
    pub(crate) fn aux_ntt(&self) -> Option<&AuxNtt> {
        self.0
            .aux
            .get_or_init(|| {
                let n = self.n();
                let p = prime_below(AUX_BITS, 2 * n as u64, &[])?;
                Plan::try_new(n, p).map(|plan| AuxNtt { p, plan })
            })
            .as_ref()
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
    /// Bytes per RNS residue in the compact wire forms (`SeededCiphertext`, `PublicKey`,
    /// `GaloisKeys`): 4 when every modulus is below 2^32 (`n4096`), else 8. The full
    /// `Ciphertext::to_bytes` form always uses 8.
    pub fn residue_bytes(&self) -> usize {
        let all = self.0.set.q.iter().chain(std::iter::once(&self.0.set.p));
        if all.into_iter().all(|&m| m < (1u64 << 32)) {
            4
        } else {
            8
        }
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

    /// log2 Δ, Δ = ⌊Q/t⌋ (from the exact u128 Δ for one or two primes).
    pub(crate) fn log2_delta(&self) -> f64 {
        if self.l() <= 2 {
            (self.0.delta as f64).log2()
        } else {
            self.log2_q() - (self.t() as f64).log2()
        }
    }

    /// Exact BFV modulus switch from Q to Q' = q0·q1 of `x`, `l` residues in coefficient form
    /// (residue i at [i·n, (i+1)·n)): for j = l−1 down to 2,
    /// x ← (x − [x]_{q_j})·q_j⁻¹ with [x]_{q_j} centered, i.e. x ← round(x / q_j) exactly, and
    /// residue j dropped. Leaves the first 2·n words (nothing to do for one or two primes).
    /// A ciphertext's phase c0 + c1·s then changes by at most (1 + ‖s‖₁)/2 per dropped prime
    /// besides the scaling, and a plaintext's Δ·m becomes Δ'·m up to t/2 (Q ≡ 1 mod t).
    pub(crate) fn rescale_to_two(&self, x: &mut Vec<u64>) {
        let n = self.n();
        let qs = &self.0.set.q;
        for j in (2..qs.len()).rev() {
            let qj = qs[j];
            let half = qj / 2;
            let (lo, top) = x.split_at_mut(j * n);
            let top = &top[..n];
            for (i, &qi) in qs[..j].iter().enumerate() {
                let inv = self.0.rescale_inv[j][i];
                let inv_s = crate::arith::shoup(inv, qi);
                for (o, &r) in lo[i * n..(i + 1) * n].iter_mut().zip(top) {
                    // [x]_{q_j} centered, as a residue mod q_i.
                    let rm = if r > half {
                        (qi - (qj - r) % qi) % qi
                    } else {
                        r % qi
                    };
                    *o = crate::arith::mul_shoup(sub_mod(*o, rm, qi), inv, inv_s, qi);
                }
            }
            x.truncate(j * n);
        }
    }
}
