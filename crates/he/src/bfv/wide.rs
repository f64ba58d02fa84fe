//! Three and four Q primes ("wide Q"): the paths that need Q as an integer (decryption's
//! rounding, the noise budget, the response's switch to 2^k) reach the one- and two-prime
//! code through the exact RNS rescale to Q' = q0·q1 ([`Params::rescale_to_two`]); everything
//! else (encryption, products, key switching) is per residue and takes any number of primes.
use super::*;

impl SecretKey {
    /// [`Self::noise_budget`] for three or more Q primes, without an integer Q: the noise
    /// e = phase − Δ·m is formed per residue; when its two-prime CRT value (centered mod
    /// q0·q1) agrees with every other residue it is e itself, else |e| ≥ q0·q1/2 and its
    /// magnitude is that of the exact rescale to q0·q1 times the dropped primes (relative
    /// error below 2^-60).
    pub(super) fn noise_budget_wide(&self, ct: &Ciphertext) -> f64 {
        let params = &self.params;
        let n = params.n();
        let qs = &params.0.set.q;
        let m = self.decrypt_poly(ct);
        let mut e = self.phase_residues(ct);
        for (i, &q) in qs.iter().enumerate() {
            let d = params.0.delta_mod_q[i];
            for (x, &mi) in e[i * n..(i + 1) * n].iter_mut().zip(&m) {
                *x = sub_mod(*x, mul_mod(mi % q, d, q), q);
            }
        }
        let q2 = params.0.q_big;
        let mut small = vec![None; n];
        for (k, s) in small.iter_mut().enumerate() {
            let v = center_big(crt(params, &e, k), q2);
            let fits = qs
                .iter()
                .enumerate()
                .skip(2)
                .all(|(i, &q)| v.rem_euclid(q as i128) as u64 == e[i * n + k]);
            if fits {
                *s = Some(v.unsigned_abs() as f64);
            }
        }
        let dropped: f64 = qs[2..].iter().map(|&q| q as f64).product();
        params.rescale_to_two(&mut e);
        let max = (0..n)
            .map(|k| {
                small[k].unwrap_or_else(|| {
                    center_big(crt(params, &e, k), q2).unsigned_abs() as f64 * dropped
                })
            })
            .fold(1.0f64, f64::max);
        params.log2_delta() - 1.0 - max.log2()
    }
}

impl Params {
    /// The end of [`Params::finish_response_flooded`] for three or more Q primes: flooding,
    /// the fresh c1 noise and the mask are added per residue mod every q_i (the whole
    /// ciphertext mod Q is flooded, as with two primes); then the exact rescale to
    /// Q' = q0·q1 and the two-prime switch to 2^log_q_out. Both are public functions of the
    /// flooded ciphertext, so they keep its statistical distance. `c0`, `c1` are in
    /// coefficient form.
    pub(super) fn finish_wide(
        &self,
        mut c0: Vec<u64>,
        mut c1: Vec<u64>,
        prg: &mut crate::arith::Sampler,
        (flood, shift): (u128, u32),
        mask_poly: Option<&[u64]>,
        log_q_out: u32,
    ) -> Result<Response, HeError> {
        let n = self.n();
        // The flood must stay below Q/4 (f64 suffices: Q/4 is no power of two's neighbour).
        let log_flood = (flood as f64).log2() + shift as f64;
        if flood > 0 && log_flood >= self.log2_q() - 2.0 {
            return Err(HeError::NoiseBudget(format!(
                "flood of 2^{log_flood:.1} against Q = 2^{:.1}",
                self.log2_q()
            )));
        }
        let qs = &self.0.set.q;
        let pows: Vec<u64> = qs
            .iter()
            .map(|&q| crate::arith::pow_mod(2, shift as u64, q))
            .collect();
        let low_mask = if shift == 64 {
            u64::MAX
        } else {
            (1u64 << shift) - 1
        };
        let dq = &self.0.delta_mod_q;
        for k in 0..n {
            // e = a·2^shift + b + (the fresh encryption's Gaussian); with shift = 0, a is
            // uniform on [−flood, flood] as in the one- and two-prime paths.
            let a = if shift == 0 {
                prg.uniform_i128(flood)
            } else {
                loop {
                    let a = prg.uniform_i128(flood);
                    if a < flood as i128 {
                        break a;
                    }
                }
            };
            let b = if shift == 0 {
                0
            } else {
                prg.next_u64() & low_mask
            };
            let g = prg.gaussian() as i128;
            let e2 = prg.gaussian() as i128;
            let mt = mask_poly.map(|m| m[k] % self.t());
            for (i, (&q, &pow)) in qs.iter().zip(&pows).enumerate() {
                let e1 = add_mod(
                    mul_mod(a.rem_euclid(q as i128) as u64, pow, q),
                    ((b as i128 + g).rem_euclid(q as i128)) as u64,
                    q,
                );
                let x = &mut c0[i * n + k];
                *x = add_mod(*x, e1, q);
                if let Some(mt) = mt {
                    *x = sub_mod(*x, mul_mod(mt % q, dq[i], q), q);
                }
                let y = &mut c1[i * n + k];
                *y = add_mod(*y, e2.rem_euclid(q as i128) as u64, q);
            }
        }
        self.rescale_to_two(&mut c0);
        self.rescale_to_two(&mut c1);
        let qb = self.0.q_big;
        let qr = 1u128 << log_q_out;
        let (out0, out1) = match crate::arith::Rns2::new(qs[0], qs[1], log_q_out) {
            Some(rns) => (0..n)
                .map(|k| (rns.switch(c0[k], c0[n + k]), rns.switch(c1[k], c1[n + k])))
                .unzip(),
            None => (0..n)
                .map(|k| {
                    let x0 = switch(crt(self, &c0, k), qr, qb) as u64;
                    (x0, switch(crt(self, &c1, k), qr, qb) as u64)
                })
                .unzip(),
        };
        Ok(Response {
            log_q: log_q_out,
            c0: out0,
            c1: out1,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::{Encoding, ParamSet};

    /// A flood past 2^126 (a·2^shift + b) has the amplitude it is asked for: an encryption of
    /// zero answered with a 2^144 flood at Q ≈ 2^168 decrypts to zero with response noise
    /// uniform on ±2^144·2^k/Q = ±2^(k−24) (k the response modulus), against a few tens of
    /// rounding noise without the flood.
    #[test]
    fn shifted_flood_has_its_amplitude() {
        let n = 8192usize;
        let two_n = 2 * n as u64;
        let t = crate::arith::prime_below(20, two_n, &[]).expect("t");
        let mut q = Vec::new();
        for _ in 0..3 {
            q.push(crate::arith::prime_below(56, two_n * t, &q).expect("q"));
        }
        let p = crate::arith::prime_below(50, two_n, &q).expect("p");
        let params = Params::new(ParamSet {
            name: "wide-test".into(),
            n,
            t,
            encoding: Encoding::Simd,
            q,
            p,
            sigma: 3.2,
            ks_digit_bits: 31,
        })
        .expect("set");
        let sk = SecretKey::generate(&params);
        let pk = sk.public_key();
        let ct = sk.encrypt(&[]).expect("enc");
        let k = 40u32;
        let noise = |r: &Response| -> Vec<i64> {
            // c0 + c1·s mod 2^k, centered (negacyclic product over the integers).
            let m = (1i128 << k) - 1;
            let c1: Vec<i128> = r.c1.iter().map(|&c| center_pow2(c, k) as i128).collect();
            (0..n)
                .map(|i| {
                    let mut acc = r.c0[i] as i128;
                    for (j, &s) in sk.coeffs.iter().enumerate() {
                        if s != 0 {
                            let (idx, sign) = if j <= i { (i - j, 1) } else { (n + i - j, -1) };
                            acc += sign * s as i128 * c1[idx];
                        }
                    }
                    center_pow2((acc & m) as u64, k)
                })
                .collect()
        };
        let (flood, shift) = (1u128 << 119, 25u32);
        let r = params
            .finish_response_flooded_wide(&ct, &pk, flood, shift, None, k)
            .expect("flooded");
        assert!(sk
            .decrypt_response_poly(&r)
            .expect("dec")
            .iter()
            .all(|&v| v == 0));
        let e = noise(&r);
        let amp = 2f64.powf(119.0 + 25.0 + k as f64 - params.log2_q());
        let max = e.iter().map(|v| v.unsigned_abs()).max().unwrap_or(0) as f64;
        let mean = e.iter().map(|v| v.unsigned_abs() as f64).sum::<f64>() / n as f64;
        assert!(
            max > 0.95 * amp && max < amp + 200.0,
            "max {max}, amplitude {amp}"
        );
        assert!((mean / (amp / 2.0) - 1.0).abs() < 0.05, "mean {mean}");
        let r0 = params
            .finish_response_flooded_wide(&ct, &pk, 0, 0, None, k)
            .expect("unflooded");
        let max0 = noise(&r0)
            .iter()
            .map(|v| v.unsigned_abs())
            .max()
            .unwrap_or(0);
        assert!((max0 as f64) < amp / 16.0, "rounding noise {max0}");
        // Shifts beyond 64 are refused, and any shift with two primes.
        assert!(matches!(
            params.finish_response_flooded_wide(&ct, &pk, 1, 65, None, k),
            Err(HeError::NoiseBudget(_))
        ));
        let p2 = Params::by_name("n8192").expect("n8192");
        let sk2 = SecretKey::generate(&p2);
        let ct2 = sk2.encrypt(&[]).expect("enc");
        assert!(matches!(
            p2.finish_response_flooded_wide(&ct2, &sk2.public_key(), 1, 1, None, k),
            Err(HeError::NoiseBudget(_))
        ));
    }
}
