//! The client's online work per ciphertext: seeded encryption and the decryption of
//! modulus-switched responses. In client-aided HE (CHOCO) these two are the client's whole
//! cost, so they run on pooled buffers, one pass per residue and no 128-bit division:
//!
//! * encryption forms Δ·m + e mod each Q prime in one pass, transforms it, and adds a·(−s)
//!   with `a` expanded from the seed straight into a recycled buffer (−s in NTT form is kept
//!   with the key, so no temporary product and no subtraction pass);
//! * response decryption multiplies c1 by s and by n⁻¹ in one pass before the raw inverse
//!   transform, and rounds to t in u64 where the response modulus allows it;
//! * the error is the workspace's centered binomial of 21 + 21 bits (σ = √10.5 ≈ 3.24,
//!   `Sampler::gaussian`), drawn in bulk: the same values the scalar sampler gives.

use super::{
    center_big, check_coeffs_range, crt, decode_simd_owned, encode_simd, give_back,
    sparse::lift_pow2, take_dirty, Response, SecretKey, SeededCiphertext,
};
use crate::arith::{add_mod, from_i64, mul_shoup, shoup, small_mod, Sampler};
use crate::HeError;

impl SecretKey {
    /// Encrypts a coefficient polynomial m (mod t; fewer than n coefficients are
    /// zero-padded); `a` is expanded from a fresh seed.
    pub fn encrypt_poly_seeded(&self, m: &[u64]) -> Result<SeededCiphertext, HeError> {
        check_coeffs_range(&self.params, m)?;
        Ok(self.encrypt_in_range(m))
    }

    /// Encrypts SIMD slot values (mod t).
    pub fn encrypt_seeded(&self, slots: &[u64]) -> Result<SeededCiphertext, HeError> {
        let m = encode_simd(&self.params, slots)?;
        let ct = self.encrypt_in_range(&m);
        give_back(m);
        Ok(ct)
    }

    /// c0 = Δ·m + e − a·s (NTT form mod each Q prime), a expanded from a fresh OS-seeded
    /// seed exactly as the server's `expand_uniform` expands it. `m`: at most n coefficients,
    /// each below t.
    fn encrypt_in_range(&self, m: &[u64]) -> SeededCiphertext {
        let params = &self.params;
        let n = params.n();
        let mut prg = Sampler::from_os();
        let mut seed = [0u8; 32];
        prg.fill_bytes(&mut seed);
        let mut e = vec![0i8; n];
        prg.fill_error(&mut e);
        // Every word is written below (recycled uploads cost no page faults or memset).
        let mut c0 = take_dirty(n * params.l());
        let mut a = take_dirty(n);
        let mut uniform = Sampler::from_seed(&seed);
        for (i, (md, ci)) in params.0.qs.iter().zip(c0.chunks_exact_mut(n)).enumerate() {
            let q = md.q;
            let d = params.0.delta_mod_q[i];
            scaled_plus_error(ci, m, &e, d, shoup(d, q), q);
            md.to_ntt(ci);
            uniform.fill_uniform(q, &mut a);
            md.mul_accumulate(ci, &a, &self.neg_ntt_q[i * n..(i + 1) * n]);
        }
        give_back(a);
        SeededCiphertext {
            seed,
            c0,
            rb: params.residue_bytes(),
        }
    }

    /// Decrypts a modulus-switched server response to SIMD slots.
    pub fn decrypt_response(&self, r: &Response) -> Result<Vec<u64>, HeError> {
        let m = self.decrypt_response_poly(r)?;
        decode_simd_owned(&self.params, m)
    }

    /// Decrypts a modulus-switched server response to its coefficient polynomial mod t.
    pub fn decrypt_response_poly(&self, r: &Response) -> Result<Vec<u64>, HeError> {
        let params = &self.params;
        let n = params.n();
        if r.c0.len() != n || r.c1.len() != n {
            return Err(HeError::WrongLength {
                expected: n,
                got: r.c0.len().min(r.c1.len()),
            });
        }
        let k = r.log_q;
        let qr = 1u64 << k;
        let t = params.t();
        let u64_rounding = k + (64 - t.leading_zeros()) < 64;
        if params.0.qs[0].plan32.is_none() && u64_rounding {
            if let Some(aux) = params.aux_ntt().filter(|a| (n as u128) << k < a.p as u128) {
                // c1·s exactly on the auxiliary prime (|c1·s| ≤ n·2^(k−1) < p/2).
                let s = self.aux_ntt.get_or_init(|| {
                    let mut s: Vec<u64> = self.coeffs.iter().map(|&c| from_i64(c, aux.p)).collect();
                    aux.plan.fwd(&mut s);
                    s
                });
                let mut c = take_dirty(n);
                lift_pow2(&mut c, &r.c1, k, aux.p);
                aux.plan.fwd(&mut c);
                aux.plan.mul_assign_normalize(&mut c, s);
                aux.plan.inv(&mut c);
                round_u64(&mut c, &r.c0, aux.p, k, t);
                return Ok(c);
            }
        }
        // c1·s exactly over the integers, computed mod Q (|c1·s| ≤ n·qr/2 < Q/2 by
        // `max_response_bits`) and CRT-combined when Q has two primes. When n·qr is below the
        // first prime the product is already exact modulo that prime alone: half the
        // transforms and no CRT, the same integers.
        // Two primes always suffice: n·2^k/2 ≤ 2^(log2 n + 61) < q0·q1/2.
        let one = (n as u128) << k < params.0.set.q[0] as u128;
        let primes = if one { 1 } else { params.l().min(2) };
        let mut c1 = take_dirty(n * primes);
        for (i, (md, ci)) in params.0.qs.iter().zip(c1.chunks_exact_mut(n)).enumerate() {
            if i == primes {
                break;
            }
            lift_pow2(ci, &r.c1, k, md.q);
            md.to_ntt(ci);
            md.mul_to_coeff(ci, &self.ntt_qp[i * n..(i + 1) * n]);
        }
        let q0 = params.0.set.q[0];
        if one && u64_rounding {
            round_u64(&mut c1[..n], &r.c0, q0, k, t);
            c1.truncate(n);
            return Ok(c1);
        }
        let qb = params.0.q_big;
        let out = (0..n)
            .map(|i| {
                let prod = if one {
                    center_big(c1[i] as u128, q0 as u128)
                } else {
                    center_big(crt(params, &c1, i), qb)
                };
                let x = (r.c0[i] as i128 + prod).rem_euclid(qr as i128) as u128;
                (crate::arith::mul_div_round(x, t, qr as u128) % t as u128) as u64
            })
            .collect();
        give_back(c1);
        Ok(out)
    }
}

fast_dispatch! {
    /// out[j] ← Δ·m[j] + e[j] mod q, m zero-padded to `out.len()` (m[j] < t < q, |e[j]| ≤ 21).
    fn scaled_plus_error(out: &mut [u64], m: &[u64], e: &[i8], d: u64, ds: u64, q: u64) {
        let (head, tail) = out.split_at_mut(m.len());
        let (eh, et) = e.split_at(m.len());
        for ((o, &mi), &ei) in head.iter_mut().zip(m).zip(eh) {
            *o = add_mod(mul_shoup(mi, d, ds, q), small_mod(ei as i64, q), q);
        }
        for (o, &ei) in tail.iter_mut().zip(et) {
            *o = small_mod(ei as i64, q);
        }
    }
}

fast_dispatch! {
    /// x[i] ← round(t·((c0[i] + centered x[i]) mod 2^k) / 2^k) mod t, where x holds c1·s mod
    /// a prime q0 (|c1·s| < q0/2 < 2^61) and c0 < 2^k: the sum fits an i64, its reduction mod 2^k is
    /// a mask, and with k + log2 t < 64 the rounding is exact in u64. The rounded value is at
    /// most t (x < 2^k), so the reduction mod t is one compare.
    fn round_u64(x: &mut [u64], c0: &[u64], q0: u64, k: u32, t: u64) {
        let half = q0 / 2;
        let mask = (1u64 << k) - 1;
        let round = (1u64 << k) >> 1;
        for (v, &c) in x.iter_mut().zip(c0) {
            // The centered product as a two's-complement word.
            let prod = if *v > half { v.wrapping_sub(q0) } else { *v };
            let y = c.wrapping_add(prod) & mask;
            let r = (y * t + round) >> k;
            *v = if r == t { 0 } else { r };
        }
    }
}
