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
            let fits = qs.iter().enumerate().skip(2).all(|(i, &q)| {
                v.rem_euclid(q as i128) as u64 == e[i * n + k]
            });
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
        flood: u128,
        mask_poly: Option<&[u64]>,
        log_q_out: u32,
    ) -> Result<Response, HeError> {
        let n = self.n();
        // Δ/4 ≈ Q/(4t) > 2^(log2 Q − 2 − log2 t); the flood must stay below Q/4.
        if flood > 0 && (flood as f64).log2() >= self.log2_q() - 2.0 {
            return Err(HeError::NoiseBudget(format!(
                "flood of 2^{:.1} against Q = 2^{:.1}",
                (flood as f64).log2(),
                self.log2_q()
            )));
        }
        let qs = &self.0.set.q;
        let dq = &self.0.delta_mod_q;
        for k in 0..n {
            let e1 = prg.uniform_i128(flood) + prg.gaussian() as i128;
            let e2 = prg.gaussian() as i128;
            let mt = mask_poly.map(|m| m[k] % self.t());
            for (i, &q) in qs.iter().enumerate() {
                let x = &mut c0[i * n + k];
                *x = add_mod(*x, e1.rem_euclid(q as i128) as u64, q);
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
