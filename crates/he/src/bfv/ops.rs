//! Homomorphic operations on ciphertexts (the server's side): additions, plaintext products,
//! rotations with special-prime key switching and hoisting, masking, flooding and modulus
//! switching of the responses. Methods of [`Params`], which holds every precomputed table they
//! use.
use super::*;

impl Params {
    pub fn add(&self, a: &Ciphertext, b: &Ciphertext) -> Ciphertext {
        self.combine(a, b, false)
    }

    pub fn add_assign(&self, a: &mut Ciphertext, b: &Ciphertext) {
        self.combine_assign(a, b, false);
    }

    pub fn sub(&self, a: &Ciphertext, b: &Ciphertext) -> Ciphertext {
        self.combine(a, b, true)
    }

    /// `op(a, b)` into recycled buffers in one pass (no clone of `a` followed by a second
    /// pass); same words and variance as `combine_assign`.
    pub(super) fn combine(&self, a: &Ciphertext, b: &Ciphertext, sub: bool) -> Ciphertext {
        let n = self.n();
        let l = self.l();
        let op = if sub {
            crate::ks32::sub_mod_to
        } else {
            crate::ks32::add_mod_to
        };
        let mut c0 = take_dirty(l * n);
        let mut c1 = take_dirty(l * n);
        for (i, md) in self.0.qs.iter().enumerate() {
            let q = md.q;
            let r = i * n..(i + 1) * n;
            op(&mut c0[r.clone()], &a.c0[r.clone()], &b.c0[r.clone()], q);
            op(&mut c1[r.clone()], &a.c1[r.clone()], &b.c1[r.clone()], q);
        }
        Ciphertext {
            c0,
            c1,
            var: corr_sum(a.var, b.var),
        }
    }

    /// `a ← op(a, b)` coefficient-wise in every residue of both components (add or sub mod q);
    /// the noise variances add as if correlated.
    pub(super) fn combine_assign(&self, a: &mut Ciphertext, b: &Ciphertext, sub: bool) {
        let n = self.n();
        let op = if sub {
            crate::ks32::sub_assign_mod
        } else {
            crate::ks32::add_assign_mod
        };
        for (i, md) in self.0.qs.iter().enumerate() {
            let q = md.q;
            let r = i * n..(i + 1) * n;
            op(&mut a.c0[r.clone()], &b.c0[r.clone()], q);
            op(&mut a.c1[r.clone()], &b.c1[r.clone()], q);
        }
        a.var = corr_sum(a.var, b.var);
    }

    /// Adds Δ·m for a plaintext polynomial m (mod t) given in coefficient form.
    pub fn add_plain_poly(&self, a: &Ciphertext, m: &[u64], negate: bool) -> Ciphertext {
        let n = self.n();
        let mut r = a.clone();
        for (i, md) in self.0.qs.iter().enumerate() {
            let q = md.q;
            let d = self.0.delta_mod_q[i];
            let ds = crate::arith::shoup(d, q);
            let mut v: Vec<u64> = m
                .iter()
                .map(|&x| crate::arith::mul_shoup(x, d, ds, q))
                .collect();
            md.to_ntt(&mut v);
            for (x, &y) in r.c0[i * n..(i + 1) * n].iter_mut().zip(&v) {
                *x = if negate {
                    sub_mod(*x, y, q)
                } else {
                    add_mod(*x, y, q)
                };
            }
        }
        r
    }

    /// Plaintext × ciphertext (ScMult).
    pub fn mul_plain(&self, a: &Ciphertext, p: &Plaintext) -> Ciphertext {
        let n = self.n();
        // Every word is written by `mul_into`: no zeroing.
        let mut c0 = take_dirty(a.c0.len());
        let mut c1 = take_dirty(a.c1.len());
        for (i, md) in self.0.qs.iter().enumerate() {
            let r = i * n..(i + 1) * n;
            md.mul_into(&mut c0[r.clone()], &a.c0[r.clone()], &p.ntt[r.clone()]);
            md.mul_into(&mut c1[r.clone()], &a.c1[r.clone()], &p.ntt[r]);
        }
        let var = self.mul_plain_var(a.var, p);
        Ciphertext { c0, c1, var }
    }

    pub(super) fn mul_plain_var(&self, var: f64, p: &Plaintext) -> f64 {
        let t = self.t() as f64;
        let nn = self.n() as f64;
        let qmod_t = self.0.q_mod_t as f64;
        // The second term is the (Q mod t)·⌊m·p/t⌋ error of BFV's Δ rounding: with m uniform
        // mod t its variance is (Q mod t)²·n·E[p²]/12. For SIMD plaintexts E[p²] ≈ t²/12; for
        // coefficient-encoded small weights it is far smaller, which is what lets responses
        // carry 40-bit statistical flooding.
        let _ = t;
        var * nn * p.var + qmod_t * qmod_t * nn * p.var / 12.0
    }

    /// Variance added by one key switch (digits uniform in [0, 2^w), divided by P, plus the
    /// rounding of the division).
    pub(super) fn ks_var(&self) -> f64 {
        let n = self.n() as f64;
        let w = self.0.set.ks_digit_bits as f64;
        let sigma = self.0.set.sigma;
        let p = self.0.pm.q as f64;
        let d = self.ks_digits() as f64;
        d * n * (2f64.powf(2.0 * w) / 3.0) * sigma * sigma / (p * p) + (1.0 + n * 2.0 / 3.0) / 12.0
    }

    /// Variance added by a plain 32-bit key switch, whose digits are whole limbs taken
    /// centered (uniform in (−q_i/2, q_i/2]: E[d²] = q_i²/12), plus the rounding of the
    /// division by P.
    pub(super) fn ks_var_limbs(&self) -> f64 {
        self.ks_product_var_limbs() + (1.0 + self.n() as f64 * 2.0 / 3.0) / 12.0
    }

    /// The digit × key-error part of [`Self::ks_var_limbs`].
    pub(super) fn ks_product_var_limbs(&self) -> f64 {
        let n = self.n() as f64;
        let sigma = self.0.set.sigma;
        let p = self.0.pm.q as f64;
        let dsq: f64 = self
            .0
            .set
            .q
            .iter()
            .map(|&q| (q as f64) * (q as f64) / 12.0)
            .sum();
        n * dsq * sigma * sigma / (p * p)
    }

    /// The digit × key-error part of [`Self::ks_var`] (after the division by P), without the
    /// rounding of the division: what a lazy rotation carries before its deferred mod-down.
    pub(super) fn ks_product_var(&self) -> f64 {
        let n = self.n() as f64;
        let w = self.0.set.ks_digit_bits as f64;
        let sigma = self.0.set.sigma;
        let p = self.0.pm.q as f64;
        let d = self.ks_digits() as f64;
        d * n * (2f64.powf(2.0 * w) / 3.0) * sigma * sigma / (p * p)
    }

    /// DecPerm: decompose c1 into base-2^w digits of each RNS residue and NTT them mod Q·P.
    pub fn decompose(&self, a: &Ciphertext) -> Decomposed {
        let mut c0 = take_zeroed(a.c0.len());
        c0.copy_from_slice(&a.c0);
        let (digits, digits32) = if self.0.ks32.is_some() {
            (Vec::new(), crate::ks32::decompose(self, &a.c1, false))
        } else {
            (self.decompose_digits(&a.c1), Vec::new())
        };
        Decomposed {
            c0,
            digits,
            digits32,
            var: a.var,
            c0_p: std::sync::OnceLock::new(),
            slot32: std::sync::OnceLock::new(),
        }
    }

    /// Indices of the keys of each limb's lowest digit (gadget P on q_i): with a whole
    /// centered limb as the digit, these are the keys a plain 32-bit rotation needs.
    pub(super) fn limb_key_indices(&self) -> Vec<usize> {
        let mut at = 0;
        self.digits_per_prime()
            .iter()
            .map(|&d| {
                let i = at;
                at += d;
                i
            })
            .collect()
    }

    /// The key-switching digits of c1 (NTT form mod Q), each (L+1)·n in NTT form mod Q·P.
    pub(super) fn decompose_digits(&self, c1: &[u64]) -> Vec<Vec<u64>> {
        let n = self.n();
        let l = self.l();
        let w = self.0.set.ks_digit_bits;
        let mask = (1u64 << w) - 1;
        let mods = self.ext_mods();
        let mut digits = Vec::with_capacity(self.ks_digits());
        let mut coef = take_zeroed(n);
        for (i, &dc) in self.digits_per_prime().iter().enumerate() {
            coef.copy_from_slice(&c1[i * n..(i + 1) * n]);
            self.0.qs[i].to_coeff(&mut coef);
            let first = digits.len();
            for j in 0..dc {
                let sh = w as usize * j;
                // Every slot is written below (or derived from c1), so no zeroing is needed.
                let mut d = take_empty((l + 1) * n);
                for (k, m) in mods.iter().enumerate() {
                    // Digit 0 modulo its own prime q_i is derived below from c1 (saves an NTT).
                    if j == 0 && k == i && dc > 1 {
                        d.extend_from_slice(&c1[i * n..(i + 1) * n]);
                        continue;
                    }
                    let start = d.len();
                    // Digits are < 2^w ≤ 2^62 and every modulus exceeds 2^w only when w is
                    // small; reduce when needed.
                    if w < 64 - m.q.leading_zeros() - 1 {
                        d.extend(coef.iter().map(|&c| (c >> sh) & mask));
                    } else {
                        d.extend(coef.iter().map(|&c| {
                            let v = (c >> sh) & mask;
                            if v >= m.q {
                                v % m.q
                            } else {
                                v
                            }
                        }));
                    }
                    m.to_ntt(&mut d[start..]);
                }
                digits.push(d);
            }
            if dc > 1 {
                // NTT_{q_i}(d_0) = c1 − Σ_{j≥1} 2^{wj} NTT_{q_i}(d_j) (c1 copied in above).
                let q = self.0.qs[i].q;
                let r = i * n..(i + 1) * n;
                let (d0, rest) = digits[first..].split_at_mut(1);
                let d0 = &mut d0[0][r.clone()];
                for (j, dj) in rest.iter().enumerate() {
                    let f = pow2_mod(w as u64 * (j + 1) as u64, q);
                    let fs = crate::arith::shoup(f, q);
                    for (o, &v) in d0.iter_mut().zip(&dj[r.clone()]) {
                        *o = sub_mod(*o, crate::arith::mul_shoup(v, f, fs, q), q);
                    }
                }
            }
        }
        give_back(coef);
        digits
    }

    /// HstPerm: the automorphism X -> X^g applied to a decomposed ciphertext.
    pub fn automorph_hoisted(
        &self,
        h: &Decomposed,
        g: usize,
        keys: &GaloisKeys,
    ) -> Result<Ciphertext, HeError> {
        let key = keys.keys.get(&g).ok_or(HeError::MissingGaloisKey(g))?;
        if self.0.ks32.is_some() {
            let (kb, ka, kbs, kas) = key.key32(None);
            let (c0, c1) = crate::ks32::switch_permute(
                self,
                &h.c0,
                &h.digits32,
                &kb,
                &ka,
                &kbs,
                &kas,
                &key.perms,
            );
            return Ok(Ciphertext {
                c0,
                c1,
                var: h.var + self.ks_var(),
            });
        }
        Ok(self.switch_permute(&h.c0, &h.digits, h.var, key))
    }

    /// Key inner product of the digits, mod-down, then σ_g as an NTT-slot permutation, plus
    /// σ_g(c0).
    pub(super) fn switch_permute(
        &self,
        c0_in: &[u64],
        digits: &[Vec<u64>],
        var: f64,
        key: &GaloisKey,
    ) -> Ciphertext {
        let n = self.n();
        let l = self.l();
        let (mut acc0, mut acc1) = self.key_inner_product(digits, key);
        // Divide by P (mod down), still unpermuted; then apply σ_g as an NTT-slot permutation.
        let d0 = self.mod_down(&mut acc0);
        let d1 = self.mod_down(&mut acc1);
        let mut c0 = take_zeroed(l * n);
        let mut c1 = take_zeroed(l * n);
        for (i, md) in self.0.qs.iter().enumerate() {
            let q = md.q;
            let off = i * n;
            let perm = &key.perms[i];
            let (c0o, c1o) = (&mut c0[off..off + n], &mut c1[off..off + n]);
            let (c0i, d0i, d1i) = (&c0_in[off..off + n], &d0[off..off + n], &d1[off..off + n]);
            for ((o0, o1), &pi) in c0o.iter_mut().zip(c1o.iter_mut()).zip(perm.iter()) {
                let pi = pi as usize;
                *o0 = add_mod(c0i[pi], d0i[pi], q);
                *o1 = d1i[pi];
            }
        }
        give_back(acc0);
        give_back(acc1);
        give_back(d0);
        give_back(d1);
        Ciphertext {
            c0,
            c1,
            var: var + self.ks_var(),
        }
    }

    /// Σ_j d_j · (b_j, a_j) mod Q·P, in NTT form (unpermuted).
    pub(super) fn key_inner_product(
        &self,
        digits: &[Vec<u64>],
        key: &GaloisKey,
    ) -> (Vec<u64>, Vec<u64>) {
        let n = self.n();
        let l = self.l();
        let mods = self.ext_mods();
        let mut acc0 = take_zeroed((l + 1) * n);
        let mut acc1 = take_zeroed((l + 1) * n);
        for (j, d) in digits.iter().enumerate() {
            for (k, m) in mods.iter().enumerate() {
                let r = k * n..(k + 1) * n;
                m.mul_accumulate(&mut acc0[r.clone()], &d[r.clone()], &key.b[j][r.clone()]);
                m.mul_accumulate(&mut acc1[r.clone()], &d[r.clone()], &key.a[j][r]);
            }
        }
        (acc0, acc1)
    }

    /// (x_Q − [x_P]) · P^{-1} mod each q_i; x is (L+1)·n in NTT form. Returns L·n NTT form.
    pub(super) fn mod_down(&self, x: &mut [u64]) -> Vec<u64> {
        let n = self.n();
        let l = self.l();
        let pm = &self.0.pm;
        let p = pm.q;
        let half = p / 2;
        // The P residue carries a factor n^{-1} (folded into the Galois keys' P residues, and
        // zero or linear images of those in every ExtCiphertext), so the unnormalised inverse
        // NTT yields the coefficients.
        pm.inv_raw(&mut x[l * n..(l + 1) * n]);
        let (xq, xp) = x.split_at(l * n);
        let xp = &xp[..n];
        let mut out = take_zeroed(l * n);
        for (i, md) in self.0.qs.iter().enumerate() {
            let q = md.q;
            let r = i * n..(i + 1) * n;
            let o = &mut out[r.clone()];
            if q > half {
                // Centered lift of [x]_P into [0, q) when q > P/2: v or v − P + q (in
                // wrapping arithmetic when P > q; the sum lies in [0, q) either way).
                let lift = q.wrapping_sub(p);
                for (oi, &v) in o.iter_mut().zip(xp.iter()) {
                    *oi = if v > half { v.wrapping_add(lift) } else { v };
                }
            } else {
                // A Q prime below P/2 (wide-Q sets with a large P): reduce the centered value.
                for (oi, &v) in o.iter_mut().zip(xp.iter()) {
                    *oi = if v > half {
                        (q - (p - v) % q) % q
                    } else {
                        v % q
                    };
                }
            }
            md.to_ntt(o);
            let pinv = self.0.p_inv_mod_q[i];
            let pinv_s = crate::arith::shoup(pinv, q);
            for (oi, &xi) in o.iter_mut().zip(&xq[r]) {
                *oi = crate::arith::mul_shoup(sub_mod(xi, *oi, q), pinv, pinv_s, q);
            }
        }
        out
    }

    /// Perm: automorphism X -> X^g with key switching (decompose + one hoisted automorphism).
    pub fn automorph(
        &self,
        a: &Ciphertext,
        g: usize,
        keys: &GaloisKeys,
    ) -> Result<Ciphertext, HeError> {
        let key = keys.keys.get(&g).ok_or(HeError::MissingGaloisKey(g))?;
        if self.0.ks32.is_some() {
            let (kb, ka, kbs, kas) = key.key32(Some(&self.limb_key_indices()));
            let (c0, c1) =
                crate::ks32::rotate_limbs(self, &a.c0, &a.c1, &kb, &ka, &kbs, &kas, &key.perms);
            return Ok(Ciphertext {
                c0,
                c1,
                var: a.var + self.ks_var_limbs(),
            });
        }
        let digits = self.decompose_digits(&a.c1);
        let r = self.switch_permute(&a.c0, &digits, a.var, key);
        for d in digits {
            give_back(d);
        }
        Ok(r)
    }

    /// Left rotation of both rows by `step` slots.
    pub fn rotate(
        &self,
        a: &Ciphertext,
        step: usize,
        keys: &GaloisKeys,
    ) -> Result<Ciphertext, HeError> {
        if step % self.row_len() == 0 {
            return Ok(a.clone());
        }
        self.automorph(a, self.galois_elt_rotate(step), keys)
    }

    /// Left rotation by `step` of a decomposed ciphertext (HstPerm).
    pub fn rotate_hoisted(
        &self,
        h: &Decomposed,
        step: usize,
        keys: &GaloisKeys,
    ) -> Result<Ciphertext, HeError> {
        if step % self.row_len() == 0 {
            return Ok(Ciphertext {
                c0: h.c0.clone(),
                c1: self.recompose_c1(h),
                var: h.var,
            });
        }
        self.automorph_hoisted(h, self.galois_elt_rotate(step), keys)
    }

    /// Lazy HstPerm: the rotation by `step` of a decomposed ciphertext, left in the Q·P basis
    /// (scaled by P) without the division by P. Sums of such rotations need a single
    /// [`Params::mod_down_ext`] at the end ("double hoisting"), so each extra rotation costs only
    /// the key inner product and a permutation.
    pub fn rotate_hoisted_ext(
        &self,
        h: &Decomposed,
        step: usize,
        keys: &GaloisKeys,
    ) -> Result<ExtCiphertext, HeError> {
        let n = self.n();
        let l = self.l();
        if step % self.row_len() == 0 {
            // P·ct in the Q·P basis.
            let c1 = self.recompose_c1(h);
            let mut c0 = vec![0u64; (l + 1) * n];
            let mut e1 = vec![0u64; (l + 1) * n];
            for (i, md) in self.0.qs.iter().enumerate() {
                let (q, pq) = (md.q, self.0.p_mod_q[i]);
                let ps = crate::arith::shoup(pq, q);
                for k in i * n..(i + 1) * n {
                    c0[k] = crate::arith::mul_shoup(h.c0[k], pq, ps, q);
                    e1[k] = crate::arith::mul_shoup(c1[k], pq, ps, q);
                }
            }
            return Ok(ExtCiphertext {
                c0,
                c1: e1,
                var: h.var,
                slot: false,
            });
        }
        let g = self.galois_elt_rotate(step);
        let key = keys.keys.get(&g).ok_or(HeError::MissingGaloisKey(g))?;
        if self.0.ks32.is_some() {
            let (kb, ka, kbs, kas) = key.key32(None);
            let sk = key
                .slot32
                .get_or_init(|| crate::ks32::slot_key(self, &key.perms, &kb, &ka));
            // Slot order (no gather) where the automorphism is a shift there, else NTT order.
            let ((c0, c1), slot) = match sk {
                Some(sk) => {
                    let hs = h
                        .slot32
                        .get_or_init(|| crate::ks32::SlotDigits::new(self, &h.digits32, &h.c0));
                    (crate::ks32::switch_shift_ext(self, hs, sk), true)
                }
                None => {
                    let c0_p = h.c0_p.get_or_init(|| self.times_p(&h.c0));
                    let parts = crate::ks32::switch_permute_ext(
                        self,
                        c0_p,
                        &h.digits32,
                        &kb,
                        &ka,
                        &kbs,
                        &kas,
                        &key.perms,
                    );
                    (parts, false)
                }
            };
            return Ok(ExtCiphertext {
                c0,
                c1,
                var: h.var + self.ks_product_var(),
                slot,
            });
        }
        let c0_p = h.c0_p.get_or_init(|| self.times_p(&h.c0));
        Ok(self.switch_permute_ext(c0_p, &h.digits, h.var, key))
    }

    /// P·x mod Q for an L·n polynomial.
    pub(super) fn times_p(&self, x: &[u64]) -> Vec<u64> {
        let n = self.n();
        let mut out = take_zeroed(x.len());
        for (i, md) in self.0.qs.iter().enumerate() {
            let (q, pq) = (md.q, self.0.p_mod_q[i]);
            let ps = crate::arith::shoup(pq, q);
            for (o, &v) in out[i * n..(i + 1) * n]
                .iter_mut()
                .zip(&x[i * n..(i + 1) * n])
            {
                *o = crate::arith::mul_shoup(v, pq, ps, q);
            }
        }
        out
    }

    /// Lazy key switch: key inner product and σ_g, σ_g(P·c0) added (`c0_p` = P·c0 mod Q), no
    /// division by P.
    pub(super) fn switch_permute_ext(
        &self,
        c0_p: &[u64],
        digits: &[Vec<u64>],
        var: f64,
        key: &GaloisKey,
    ) -> ExtCiphertext {
        let n = self.n();
        let l = self.l();
        let mods = self.ext_mods();
        let (acc0, acc1) = self.key_inner_product(digits, key);
        let mut c0 = take_zeroed((l + 1) * n);
        let mut c1 = take_zeroed((l + 1) * n);
        for (k, m) in mods.iter().enumerate() {
            let off = k * n;
            let perm = &key.perms[k];
            if k < l {
                let q = m.q;
                for (idx, &pi) in perm.iter().enumerate() {
                    let pi = off + pi as usize;
                    c0[off + idx] = add_mod(acc0[pi], c0_p[pi], q);
                    c1[off + idx] = acc1[pi];
                }
            } else {
                for (idx, &pi) in perm.iter().enumerate() {
                    c0[off + idx] = acc0[off + pi as usize];
                    c1[off + idx] = acc1[off + pi as usize];
                }
            }
        }
        give_back(acc0);
        give_back(acc1);
        ExtCiphertext {
            c0,
            c1,
            var: var + self.ks_product_var(),
            slot: false,
        }
    }

    /// P·ct in the Q·P basis (the unrotated term of a lazy rotate-and-sum).
    pub fn lift_ext(&self, a: &Ciphertext) -> ExtCiphertext {
        let n = self.n();
        let l = self.l();
        let mut c0 = take_zeroed((l + 1) * n);
        let mut c1 = take_zeroed((l + 1) * n);
        for (i, md) in self.0.qs.iter().enumerate() {
            let (q, pq) = (md.q, self.0.p_mod_q[i]);
            let ps = crate::arith::shoup(pq, q);
            for k in i * n..(i + 1) * n {
                c0[k] = crate::arith::mul_shoup(a.c0[k], pq, ps, q);
                c1[k] = crate::arith::mul_shoup(a.c1[k], pq, ps, q);
            }
        }
        ExtCiphertext {
            c0,
            c1,
            var: a.var,
            slot: false,
        }
    }

    /// Lazy Perm: rotation by `step` with key switching but without the division by P.
    pub fn rotate_ext(
        &self,
        a: &Ciphertext,
        step: usize,
        keys: &GaloisKeys,
    ) -> Result<ExtCiphertext, HeError> {
        if step % self.row_len() == 0 {
            return Ok(self.lift_ext(a));
        }
        let g = self.galois_elt_rotate(step);
        let key = keys.keys.get(&g).ok_or(HeError::MissingGaloisKey(g))?;
        if self.0.ks32.is_some() {
            let digits = crate::ks32::decompose(self, &a.c1, true);
            let (kb, ka, kbs, kas) = key.key32(Some(&self.limb_key_indices()));
            let c0_p = self.times_p(&a.c0);
            let (c0, c1) = crate::ks32::switch_permute_ext(
                self, &c0_p, &digits, &kb, &ka, &kbs, &kas, &key.perms,
            );
            give_back(c0_p);
            for d in digits {
                crate::ks32::give32(d);
            }
            return Ok(ExtCiphertext {
                c0,
                c1,
                var: a.var + self.ks_product_var_limbs(),
                slot: false,
            });
        }
        let digits = self.decompose_digits(&a.c1);
        let c0_p = self.times_p(&a.c0);
        let r = self.switch_permute_ext(&c0_p, &digits, a.var, key);
        give_back(c0_p);
        for d in digits {
            give_back(d);
        }
        Ok(r)
    }

    /// Plaintext × lazy ciphertext in the Q·P basis (ScMult before the deferred mod-down: the
    /// key-switching error is multiplied by the plaintext *before* the division by P, so the
    /// product carries less noise than ScMult after an eager key switch).
    pub fn mul_plain_ext(&self, a: &ExtCiphertext, p: &Plaintext) -> ExtCiphertext {
        let n = self.n();
        let l = self.l();
        // Every word is written by `mul_into`: no zeroing.
        let mut c0 = take_dirty(a.c0.len());
        let mut c1 = take_dirty(a.c1.len());
        // A slot-order ciphertext is multiplied by the plaintext in slot order (element-wise
        // products do not care about the order, as long as both share it).
        let (pq, pp) = if a.slot {
            p.slot_qp(self).split_at(l * n)
        } else {
            (&p.ntt[..], p.ntt_p(self))
        };
        for (i, md) in self.0.qs.iter().enumerate() {
            let r = i * n..(i + 1) * n;
            md.mul_into(&mut c0[r.clone()], &a.c0[r.clone()], &pq[r.clone()]);
            md.mul_into(&mut c1[r.clone()], &a.c1[r.clone()], &pq[r]);
        }
        let r = l * n..(l + 1) * n;
        let pm = &self.0.pm;
        pm.mul_into(&mut c0[r.clone()], &a.c0[r.clone()], pp);
        pm.mul_into(&mut c1[r.clone()], &a.c1[r], pp);
        ExtCiphertext {
            c0,
            c1,
            var: self.mul_plain_var(a.var, p),
            slot: a.slot,
        }
    }

    /// Adds two lazy (Q·P-basis) ciphertexts.
    pub fn ext_add_assign(&self, a: &mut ExtCiphertext, b: &ExtCiphertext) {
        let n = self.n();
        // Mixed orders: the sum takes slot order (a sum that gets one slot-order term usually
        // gets more), so at most one conversion per sum before its mod-down.
        if b.slot && !a.slot {
            self.reorder_ext(a, true);
        }
        let converted;
        let b = if a.slot && !b.slot {
            converted = ExtCiphertext {
                c0: crate::ks32::reorder64(self, &b.c0, true),
                c1: crate::ks32::reorder64(self, &b.c1, true),
                var: b.var,
                slot: true,
            };
            &converted
        } else {
            b
        };
        let mods = self.ext_mods();
        for (k, m) in mods.iter().enumerate() {
            let r = k * n..(k + 1) * n;
            crate::ks32::add_assign_mod(&mut a.c0[r.clone()], &b.c0[r.clone()], m.q);
            crate::ks32::add_assign_mod(&mut a.c1[r.clone()], &b.c1[r], m.q);
        }
        a.var = corr_sum(a.var, b.var);
    }

    /// Divides a lazy ciphertext by P: back to an ordinary ciphertext mod Q.
    pub fn mod_down_ext(&self, mut a: ExtCiphertext) -> Ciphertext {
        if self.0.ks32.is_some() {
            // 32-bit plans, both components in parallel; a slot-order input is read through
            // the inverse slot map (no separate reorder).
            let (c0, c1) = crate::ks32::mod_down_pair(self, &a.c0, &a.c1, a.slot);
            return Ciphertext {
                c0,
                c1,
                var: a.var + self.ks_var(),
            };
        }
        if a.slot {
            self.reorder_ext(&mut a, false);
        }
        let c0 = self.mod_down(&mut a.c0);
        let c1 = self.mod_down(&mut a.c1);
        Ciphertext {
            c0,
            c1,
            var: a.var + self.ks_var(),
        }
    }

    /// Puts a lazy ciphertext's residues in slot order (`to_slot`) or back in NTT order.
    pub(super) fn reorder_ext(&self, a: &mut ExtCiphertext, to_slot: bool) {
        for c in [&mut a.c0, &mut a.c1] {
            let o = crate::ks32::reorder64(self, c, to_slot);
            give_back(std::mem::replace(c, o));
        }
        a.slot = to_slot;
    }

    pub(super) fn recompose_c1(&self, h: &Decomposed) -> Vec<u64> {
        if self.0.ks32.is_some() {
            return crate::ks32::recompose(self, &h.digits32);
        }
        // Σ_j 2^{wj} d_j over the Q residues (NTT form is linear).
        let n = self.n();
        let l = self.l();
        let w = self.0.set.ks_digit_bits as u64;
        let mut c1 = vec![0u64; l * n];
        let mut j0 = 0;
        for (i, &dc) in self.digits_per_prime().iter().enumerate() {
            let q = self.0.qs[i].q;
            for j in 0..dc {
                let f = pow2_mod(w * j as u64, q);
                let d = &h.digits[j0 + j];
                for (o, &v) in c1[i * n..(i + 1) * n]
                    .iter_mut()
                    .zip(&d[i * n..(i + 1) * n])
                {
                    *o = add_mod(*o, mul_mod(v, f, q), q);
                }
            }
            j0 += dc;
        }
        c1
    }

    /// Noise flooding: adds a fresh public-key encryption of zero whose c0 noise is uniform in
    /// [−2^flood_bits, 2^flood_bits] (drowning the weight-dependent noise) and whose `u·a`
    /// part re-randomises c1, then subtracts Δ·mask (mask given as a coefficient polynomial)
    /// and switches to the modulus 2^log_q_out. Returns the compact response.
    pub fn finish_response(
        &self,
        ct: &Ciphertext,
        pk: &PublicKey,
        flood_bits: u32,
        mask_poly: Option<&[u64]>,
        log_q_out: u32,
    ) -> Result<Response, HeError> {
        // Amplitudes stay below 2^126 (u128 samples), also with three or four Q primes: a
        // 2^-40 flood of any kernel here needs less (the widest, the masked CHOCO baseline's
        // 784 → 128 product with a 23-bit t, ≈ 2^128 of noise in all, i.e. a flood
        // of ≈ 2^115 after the n-fold union bound; `tests/choco.rs`).
        if flood_bits >= 126 {
            return Err(HeError::NoiseBudget(format!("flood of 2^{flood_bits}")));
        }
        let flood = if flood_bits > 0 {
            1u128 << flood_bits
        } else {
            0
        };
        self.finish_response_flooded(ct, pk, flood, mask_poly, log_q_out)
    }

    /// [`Params::finish_response`] with the flooding noise uniform on the integers of
    /// [−`flood`, `flood`] for any amplitude, not only a power of two: a kernel whose noise
    /// room lies between two powers of two uses all of it.
    pub fn finish_response_flooded(
        &self,
        ct: &Ciphertext,
        pk: &PublicKey,
        flood: u128,
        mask_poly: Option<&[u64]>,
        log_q_out: u32,
    ) -> Result<Response, HeError> {
        self.finish_response_flooded_wide(ct, pk, flood, 0, mask_poly, log_q_out)
    }

    /// [`Params::finish_response_flooded`] with an amplitude of `flood`·2^`shift` for
    /// three or more Q primes, whose flooding room can lie above what a u128 sample holds:
    /// the noise is a·2^shift + b, a uniform on [−flood, flood), b on [0, 2^shift), i.e.
    /// uniform on the integers of [−flood·2^shift, flood·2^shift). `shift` is at most 64
    /// (amplitudes to 2^190, beyond any Q/4 here) and 0 with one or two primes.
    pub fn finish_response_flooded_wide(
        &self,
        ct: &Ciphertext,
        pk: &PublicKey,
        flood: u128,
        shift: u32,
        mask_poly: Option<&[u64]>,
        log_q_out: u32,
    ) -> Result<Response, HeError> {
        let n = self.n();
        if shift > 64 || (shift > 0 && self.l() <= 2) || flood >= 1u128 << 126 {
            return Err(HeError::NoiseBudget(format!(
                "flood of {flood}·2^{shift} unsupported"
            )));
        }
        if log_q_out == 0 || log_q_out > max_response_bits(self) {
            return Err(HeError::NoiseBudget(format!(
                "response modulus 2^{log_q_out} unsupported"
            )));
        }
        // Fresh randomness from the OS through the AES-CTR sampler.
        let mut prg = crate::arith::Sampler::from_os();
        let u: Vec<i64> = (0..n).map(|_| prg.ternary()).collect();
        let un = lift_signed(self, &u);
        let mut c0 = ct.c0.clone();
        let mut c1 = ct.c1.clone();
        for (i, md) in self.0.qs.iter().enumerate() {
            let r = i * n..(i + 1) * n;
            md.mul_accumulate(&mut c0[r.clone()], &un[r.clone()], &pk.b[r.clone()]);
            md.mul_accumulate(&mut c1[r.clone()], &un[r.clone()], &pk.a[r.clone()]);
            md.to_coeff(&mut c0[r.clone()]);
            md.to_coeff(&mut c1[r]);
        }
        if self.l() > 2 {
            return self.finish_wide(c0, c1, &mut prg, (flood, shift), mask_poly, log_q_out);
        }
        let qb = self.0.q_big;
        if flood >= qb / 4 {
            return Err(HeError::NoiseBudget(format!(
                "flood of 2^{:.1} against Q = 2^{:.1}",
                (flood as f64).log2(),
                (qb as f64).log2()
            )));
        }
        let delta = self.0.delta;
        let t = self.t() as u128;
        let mut out0 = Vec::with_capacity(n);
        let mut out1 = Vec::with_capacity(n);
        let qr = 1u128 << log_q_out;
        let qs = &self.0.set.q;
        if qb < (1u128 << 62) {
            // Q below 2^62 (one prime, or two 31-bit primes CRT-combined per coefficient):
            // everything in u64 with Shoup products and an f64-estimated, exactly corrected
            // rounding division.
            let q = qb as u64;
            let d = delta as u64;
            let ds = crate::arith::shoup(d, q);
            let ratio = qr as f64 / q as f64;
            for k in 0..n {
                let e1 = prg.uniform_i128(flood) + prg.gaussian() as i128;
                let e2 = prg.gaussian();
                let (y0, y1) = (crt(self, &c0, k) as u64, crt(self, &c1, k) as u64);
                let mut x0 = add_mod(y0, (e1.rem_euclid(q as i128)) as u64, q);
                if let Some(m) = mask_poly {
                    x0 = sub_mod(x0, crate::arith::mul_shoup(m[k] % self.t(), d, ds, q), q);
                }
                let x1 = add_mod(y1, from_i64(e2, q), q);
                out0.push(switch_u64(x0, q, log_q_out, ratio));
                out1.push(switch_u64(x1, q, log_q_out, ratio));
            }
        } else if let Some(rns) = (qs.len() == 2)
            .then(|| crate::arith::Rns2::new(qs[0], qs[1], log_q_out))
            .flatten()
        {
            // Two primes (n8192 sets): per-limb residues and the division-free switch of
            // `arith::Rns2` (bit-exact with the u128 branch below; see its tests).
            let dq = &self.0.delta_mod_q;
            let ds = [
                crate::arith::shoup(dq[0], qs[0]),
                crate::arith::shoup(dq[1], qs[1]),
            ];
            for k in 0..n {
                let e1 = prg.uniform_i128(flood) + prg.gaussian() as i128;
                let e2 = prg.gaussian();
                let mt = mask_poly.map(|m| m[k] % self.t());
                let x0: [u64; 2] = std::array::from_fn(|i| {
                    let q = qs[i];
                    let y = add_mod(c0[i * n + k], rns.reduce_i128(e1, i), q);
                    match mt {
                        Some(mt) => sub_mod(y, crate::arith::mul_shoup(mt % q, dq[i], ds[i], q), q),
                        None => y,
                    }
                });
                let x1: [u64; 2] =
                    std::array::from_fn(|i| add_mod(c1[i * n + k], from_i64(e2, qs[i]), qs[i]));
                out0.push(rns.switch(x0[0], x0[1]));
                out1.push(rns.switch(x1[0], x1[1]));
            }
        } else {
            for k in 0..n {
                let e1 = prg.uniform_i128(flood) + prg.gaussian() as i128;
                let e2 = prg.gaussian() as i128;
                let mut x0 = crt(self, &c0, k);
                let mut x1 = crt(self, &c1, k);
                x0 = add_signed(x0, e1, qb);
                if let Some(m) = mask_poly {
                    let dm = delta * (m[k] as u128 % t) % qb;
                    x0 = (x0 + qb - dm) % qb;
                }
                x1 = add_signed(x1, e2, qb);
                out0.push(switch(x0, qr, qb) as u64);
                out1.push(switch(x1, qr, qb) as u64);
            }
        }
        Ok(Response {
            log_q: log_q_out,
            c0: out0,
            c1: out1,
        })
    }
}
