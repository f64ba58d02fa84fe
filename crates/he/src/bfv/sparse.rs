//! Sparse responses: c0 only at the coefficients the client reads, all of c1, switched to
//! 2^k (the Cheetah-style coefficient matvec needs one c0 coefficient per inner product,
//! so the rest of c0 is neither computed, flooded nor sent).
//!
//! Wire form (`SparseResponse::to_bytes`): one byte k, then the kept c0 values in the order
//! of the caller's positions and the n values of c1, each k bits, packed little-endian
//! (bit j of the stream is bit j mod 8 of byte j / 8), zero padding to a byte. Both sides
//! derive the positions from the public layout, so they are not sent.

use super::{
    center_big, center_pow2, crt, give_back, take_dirty, Ciphertext, PublicKey, SecretKey,
};
use crate::arith::{
    add_mod, center, from_i64, mul_shoup, shoup, small_mod, sub_mod, Rns2, Sampler,
};
use crate::params::Params;
use crate::HeError;

/// A modulus-switched response that keeps c0 only at chosen coefficients.
pub struct SparseResponse {
    pub(crate) log_q: u32,
    pub(crate) c0: Vec<u64>,
    pub(crate) c1: Vec<u64>,
}

impl SparseResponse {
    pub fn log_q(&self) -> u32 {
        self.log_q
    }
    /// Number of c0 coefficients carried.
    pub fn kept(&self) -> usize {
        self.c0.len()
    }
    /// Wire size for `kept` c0 values at modulus 2^log_q.
    pub fn wire_len(params: &Params, kept: usize, log_q: u32) -> usize {
        1 + ((kept + params.n()) * log_q as usize).div_ceil(8)
    }
    pub fn to_bytes(&self) -> Vec<u8> {
        let total = self.c0.len() + self.c1.len();
        let mut out = Vec::with_capacity(1 + (total * self.log_q as usize).div_ceil(8));
        out.push(self.log_q as u8);
        pack_pair(&self.c0, &self.c1, self.log_q, &mut out);
        out
    }
    /// Parses a response with `kept` c0 values. Hostile bytes: the modulus must be one the
    /// client decrypts exactly (`max_response_bits`), the length exact, padding bits zero.
    pub fn from_bytes(params: &Params, kept: usize, bytes: &[u8]) -> Result<Self, HeError> {
        let Some((&k, rest)) = bytes.split_first() else {
            return Err(HeError::WrongLength {
                expected: 1,
                got: 0,
            });
        };
        let log_q = k as u32;
        let max = super::max_response_bits(params);
        if log_q == 0 || log_q > max {
            return Err(HeError::BadHeader(format!(
                "response modulus 2^{log_q} outside 2^1..=2^{max}"
            )));
        }
        if kept > params.n() {
            return Err(HeError::Shape(format!(
                "{kept} kept coefficients > n = {}",
                params.n()
            )));
        }
        let expected = Self::wire_len(params, kept, log_q);
        if bytes.len() != expected {
            return Err(HeError::WrongLength {
                expected,
                got: bytes.len(),
            });
        }
        // Straight into c0 and c1 (no split_off copy of c1).
        let (c0, c1) = unpack_fast(rest, kept + params.n(), log_q, kept)?;
        Ok(SparseResponse { log_q, c0, c1 })
    }
}

fast_dispatch! {
    /// `pack_into` of a's values then b's.
    fn pack_pair(a: &[u64], b: &[u64], bits: u32, out: &mut Vec<u8>) -> () {
        pack_into(a.iter().chain(b).copied(), bits, out)
    }
}

/// Packs k-bit values (each < 2^k, k ≤ 62) little-endian, 8 bytes per store.
#[inline(always)]
pub(crate) fn pack_into(vals: impl Iterator<Item = u64>, bits: u32, out: &mut Vec<u8>) {
    let mut acc: u128 = 0;
    let mut nb = 0u32;
    for v in vals {
        debug_assert!(bits == 64 || v >> bits == 0);
        // nb < 64 and bits ≤ 62 before the shift: the accumulator never overflows.
        acc |= (v as u128) << nb;
        nb += bits;
        if nb >= 64 {
            out.extend_from_slice(&(acc as u64).to_le_bytes());
            acc >>= 64;
            nb -= 64;
        }
    }
    let tail = nb.div_ceil(8) as usize;
    out.extend_from_slice(&(acc as u64).to_le_bytes()[..tail]);
}

/// Inverse of `pack_into` for exactly `count` values: the length must be ⌈count·k/8⌉ and
/// the padding bits zero (`BadHeader` otherwise), so one value has one encoding.
#[cfg(test)]
pub(crate) fn unpack(bytes: &[u8], count: usize, bits: u32) -> Result<Vec<u64>, HeError> {
    unpack_fast(bytes, count, bits, count).map(|(v, _)| v)
}

type Split = (Vec<u64>, Vec<u64>);

fast_dispatch! {
    /// `unpack`, the first `split` values (≤ count) in the first vector, the rest in the second.
    fn unpack_fast(bytes: &[u8], count: usize, bits: u32, split: usize) -> Result<Split, HeError> {
        unpack_body(bytes, count, bits, split)
    }
}

#[inline(always)]
fn unpack_body(bytes: &[u8], count: usize, bits: u32, split: usize) -> Result<Split, HeError> {
    if bits == 0 || bits > 62 {
        return Err(HeError::BadHeader(format!("{bits}-bit packing")));
    }
    let expected = (count * bits as usize).div_ceil(8);
    if bytes.len() != expected {
        return Err(HeError::WrongLength {
            expected,
            got: bytes.len(),
        });
    }
    let split = split.min(count);
    let mask = (1u64 << bits) - 1;
    if bits <= 56 {
        // Each value from one unaligned 8-byte window (its ≤ 56 bits plus a shift < 8 fit),
        // independent of the others: no carried bit accumulator. Windows that would pass the
        // end read zero-padded copies.
        let len = bytes.len();
        let safe = if len >= 8 {
            count.min((len - 8) * 8 / bits as usize + 1)
        } else {
            0
        };
        let get = |i: usize| -> u64 {
            let pos = i * bits as usize;
            let b = pos / 8;
            let w = if i < safe {
                let mut w = [0u8; 8];
                w.copy_from_slice(&bytes[b..b + 8]);
                u64::from_le_bytes(w)
            } else {
                let mut w = [0u8; 8];
                let end = len.min(b + 8);
                w[..end - b].copy_from_slice(&bytes[b..end]);
                u64::from_le_bytes(w)
            };
            (w >> (pos % 8)) & mask
        };
        let first: Vec<u64> = (0..split).map(get).collect();
        let second: Vec<u64> = (split..count).map(get).collect();
        // The bits past count·bits in the last byte must be zero (the length is exact).
        let used = (count * bits as usize) % 8;
        if used != 0 && bytes[len - 1] >> used != 0 {
            return Err(HeError::BadHeader("non-zero padding bits".into()));
        }
        return Ok((first, second));
    }
    let mut first = Vec::with_capacity(split);
    let mut second = Vec::with_capacity(count - split);
    let mut acc: u128 = 0;
    let mut nb = 0u32;
    let mut at = 0usize;
    for (out, len) in [(&mut first, split), (&mut second, count - split)] {
        for _ in 0..len {
            if nb < bits {
                // Enough bytes remain: the length check guarantees count·bits bits.
                let take = (bytes.len() - at).min(8);
                let mut w = [0u8; 8];
                w[..take].copy_from_slice(&bytes[at..at + take]);
                acc |= (u64::from_le_bytes(w) as u128) << nb;
                nb += 8 * take as u32;
                at += take;
            }
            out.push(acc as u64 & mask);
            acc >>= bits;
            nb -= bits;
        }
    }
    if acc != 0 || bytes[at..].iter().any(|&b| b != 0) {
        return Err(HeError::BadHeader("non-zero padding bits".into()));
    }
    Ok((first, second))
}

impl Params {
    /// Server: the sparse form of [`Params::finish_response`]. Adds a fresh public-key
    /// encryption of zero (ternary u, c1 error e2 centered binomial), floods c0 at
    /// `positions` with e1 = U[−2^flood_bits, 2^flood_bits] + centered binomial, subtracts
    /// Δ·mask[j] at positions[j], and switches to 2^log_q_out. Only the kept c0 coefficients
    /// are flooded: the others never leave the server. Sampling uses `Sampler` (AES-128-CTR
    /// keyed from the OS), with exactly the distributions of `finish_response`.
    pub fn finish_response_at(
        &self,
        ct: Ciphertext,
        pk: &PublicKey,
        flood_bits: u32,
        positions: &[usize],
        mask: &[u64],
        log_q_out: u32,
    ) -> Result<SparseResponse, HeError> {
        let draws = Sampler::from_os;
        self.finish_response_at_with(ct, pk, flood_bits, positions, mask, log_q_out, draws, true)
    }

    /// `finish_response_at` drawing from `draws()`, with c0 by the decimated inverse transform
    /// where it is cheaper (`decimated`) or always by the full one: tests compare the two.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn finish_response_at_with(
        &self,
        mut ct: Ciphertext,
        pk: &PublicKey,
        flood_bits: u32,
        positions: &[usize],
        mask: &[u64],
        log_q_out: u32,
        draws: impl FnOnce() -> Sampler,
        decimated: bool,
    ) -> Result<SparseResponse, HeError> {
        let n = self.n();
        if log_q_out == 0 || log_q_out > super::max_response_bits(self) {
            return Err(HeError::NoiseBudget(format!(
                "response modulus 2^{log_q_out} unsupported"
            )));
        }
        if positions.len() != mask.len() || positions.iter().any(|&p| p >= n) {
            return Err(HeError::Shape(format!(
                "{} positions (all < {n}) with {} mask values",
                positions.len(),
                mask.len()
            )));
        }
        if flood_bits >= 125 {
            return Err(HeError::NoiseBudget(format!("flood of 2^{flood_bits}")));
        }
        let qs = &self.0.set.q;
        let rns = if qs.len() == 2 {
            Rns2::new(qs[0], qs[1], log_q_out)
        } else {
            None
        };
        let Some(rns) = rns else {
            // Other moduli: the dense path, then keep the positions.
            let mut full = vec![0u64; n];
            for (&p, &m) in positions.iter().zip(mask) {
                full[p] = m;
            }
            let r = self.finish_response(&ct, pk, flood_bits, Some(&full), log_q_out)?;
            return Ok(SparseResponse {
                log_q: log_q_out,
                c0: positions.iter().map(|&p| r.c0[p]).collect(),
                c1: r.c1.clone(),
            });
        };
        let mut prg = draws();
        // u ternary, lifted straight to residues (q − 1, 0, 1): no signed reduction.
        let mut un = take_dirty(2 * n);
        sample_ternary2(&mut prg, &mut un, qs[0], qs[1]);
        // Only c0 at `positions` is read below. When they share a residue mod a power of two
        // s (the hidden projections' result coefficients, s = H), a decimated inverse
        // transform computes just those from the NTT slots: n + (n/s)·|positions| products
        // instead of a full inverse NTT. The rest of c0 stays in NTT form, unread.
        let tables = if decimated {
            self.0.decimated.tables_for(&self.0.qs, n, positions)
        } else {
            None
        };
        // The product ciphertext is ours: re-randomise it in place (no copy).
        let (c0, c1) = (&mut ct.c0, &mut ct.c1);
        for (i, md) in self.0.qs.iter().enumerate() {
            let r = i * n..(i + 1) * n;
            md.to_ntt(&mut un[r.clone()]);
            md.mul_accumulate(&mut c0[r.clone()], &un[r.clone()], &pk.b[r.clone()]);
            md.mul_accumulate(&mut c1[r.clone()], &un[r.clone()], &pk.a[r.clone()]);
            let done = tables
                .as_ref()
                .is_some_and(|t| t.coeffs_at(i, &mut c0[r.clone()], positions));
            if !done {
                md.to_coeff(&mut c0[r.clone()]);
            }
            md.to_coeff(&mut c1[r]);
        }
        give_back(un);
        let (q0, q1) = (rns.q(0), rns.q(1));
        let out1 = switch_c1(&mut prg, &rns, c1, n);
        let flood = if flood_bits > 0 {
            1u128 << flood_bits
        } else {
            0
        };
        let t = self.t();
        let dq = &self.0.delta_mod_q;
        let ds = [shoup(dq[0], q0), shoup(dq[1], q1)];
        let out0: Vec<u64> = positions
            .iter()
            .zip(mask)
            .map(|(&p, &m)| {
                let e1 = prg.uniform_i128(flood) + prg.gaussian() as i128;
                // m < t < q_i in practice (the caller's masks): skip the divisions then.
                let mt = if m < t { m } else { m % t };
                let x: [u64; 2] = std::array::from_fn(|i| {
                    let q = rns.q(i);
                    let y = add_mod(c0[i * n + p], rns.reduce_i128(e1, i), q);
                    let mq = if mt < q { mt } else { mt % q };
                    sub_mod(y, mul_shoup(mq, dq[i], ds[i], q), q)
                });
                rns.switch(x[0], x[1])
            })
            .collect();
        Ok(SparseResponse {
            log_q: log_q_out,
            c0: out0,
            c1: out1,
        })
    }
}

fast_dispatch! {
    /// u ← ternary, lifted to the residues (q0 − 1, 0, 1) and (q1 − 1, 0, 1): the first half
    /// of `un` mod q0, the second mod q1, one draw per coefficient.
    fn sample_ternary2(prg: &mut Sampler, un: &mut [u64], q0: u64, q1: u64) -> () {
        let (u0, u1) = un.split_at_mut(un.len() / 2);
        let mut t = vec![0i8; u0.len()];
        prg.fill_ternary(&mut t);
        for ((a, b), &t) in u0.iter_mut().zip(u1.iter_mut()).zip(&t) {
            *a = small_mod(t as i64, q0);
            *b = small_mod(t as i64, q1);
        }
    }
}

fast_dispatch! {
    /// c1 + e2 (one centered-binomial draw per coefficient, in coefficient order) switched to
    /// 2^k, from the residues c1[..n] mod q0 and c1[n..2n] mod q1.
    fn switch_c1(prg: &mut Sampler, rns: &Rns2, c1: &[u64], n: usize) -> Vec<u64> {
        let (q0, q1) = (rns.q(0), rns.q(1));
        // A plain loop (not `map().collect()`, whose `fold` is not inlined here and so would
        // run without the features above).
        // The draws first (same order), so the switch loop has no generator state in it.
        let mut e = vec![0i8; n];
        for e in e.iter_mut() {
            *e = prg.gaussian() as i8;
        }
        let mut out = vec![0u64; n];
        for (((o, &y0), &y1), &e) in out.iter_mut().zip(&c1[..n]).zip(&c1[n..2 * n]).zip(&e) {
            let e = e as i64;
            *o = rns.switch(
                add_mod(y0, small_mod(e, q0), q0),
                add_mod(y1, small_mod(e, q1), q1),
            );
        }
        out
    }
}

fast_dispatch! {
    /// o[i] ← the centered lift of c[i] (mod 2^k) into Z_q.
    pub(super) fn lift_pow2(o: &mut [u64], c: &[u64], k: u32, q: u64) -> () {
        let half = (1u64 << k) >> 1;
        if half <= q {
            // A value c ≥ 2^(k−1) stands for c − 2^k ∈ [−q, 0): one addition of q, as a
            // wrapping add of q − 2^k (the same words `from_i64` gives, without its branches).
            let off = q.wrapping_sub(1u64 << k);
            for (o, &c) in o.iter_mut().zip(c) {
                *o = if c >= half { c.wrapping_add(off) } else { c };
            }
        } else {
            for (o, &c) in o.iter_mut().zip(c) {
                *o = from_i64(center_pow2(c, k), q);
            }
        }
    }
}

/// Largest number of kept coefficients for which `decrypt_sparse` computes c1·s directly at
/// each position (n ternary-weighted additions each, ≈ 0.75 µs at n = 8192 with AVX2) rather
/// than by a lift, two NTTs and a product over the whole ring (≈ 135 µs): the two cost the
/// same near 170 positions (`response_path_timing`). The GRU's hidden-projection responses
/// keep 58, its input-projection ones 810.
const DIRECT_MAX_KEPT: usize = 160;

/// Low bits of each centered c1 value in `window_products`' split.
const SPLIT: u32 = 21;
/// Coefficients per partial sum there: with |lo| < 2^21 and |hi| ≤ 2^(k − 22) ≤ 2^22 (k ≤ 44),
/// 256 ternary-weighted terms stay below 2^30 in i32.
const CHUNK: usize = 256;
/// Largest response modulus (bits) the direct path takes.
const DIRECT_MAX_BITS: u32 = 44;

fast_dispatch! {
    /// out[j] ← (c·s)[positions[j]] over the integers, c = hi·2^21 + lo the centered c1
    /// (k ≤ 44 bits) split into i32 halves, from the window of s (`SecretKey::window_masks`):
    /// the coefficient of c[i] in position p is F[n − 1 − p + i] ∈ {−1, 0, 1}. Partial sums
    /// over CHUNK coefficients are exact in i32 (8 lanes per AVX2 op), their total in i64;
    /// each chunk of c serves every position from L1.
    fn window_products(lo: &[i32], hi: &[i32], f: &[i8], positions: &[usize], out: &mut Vec<i64>) -> () {
        let n = lo.len();
        let mut acc = vec![0i64; positions.len()];
        for s0 in (0..n).step_by(CHUNK) {
            let e = (s0 + CHUNK).min(n);
            let (l, h) = (&lo[s0..e], &hi[s0..e]);
            for (a, &p) in acc.iter_mut().zip(positions) {
                let w = n - 1 - p + s0;
                let (mut x, mut y) = (0i32, 0i32);
                for ((&vl, &vh), &fw) in l.iter().zip(h).zip(&f[w..w + l.len()]) {
                    x = x.wrapping_add(vl.wrapping_mul(fw as i32));
                    y = y.wrapping_add(vh.wrapping_mul(fw as i32));
                }
                *a += ((y as i64) << SPLIT) + x as i64;
            }
        }
        out.extend_from_slice(&acc);
    }
}

fast_dispatch! {
    /// The centered values of c mod 2^k, split as c = hi·2^21 + lo with 0 ≤ lo < 2^21.
    fn center_split(lo: &mut [i32], hi: &mut [i32], c: &[u64], k: u32) -> () {
        for ((l, h), &c) in lo.iter_mut().zip(hi.iter_mut()).zip(c) {
            let v = center_pow2(c, k);
            *l = (v & ((1 << SPLIT) - 1)) as i32;
            *h = (v >> SPLIT) as i32;
        }
    }
}

impl SecretKey {
    /// s's negacyclic window: with E[x] = −s[x] for x < n and s[x − n] for n ≤ x < 2n, and
    /// F[y] = E[2n − 1 − y] (2n bytes), (c·s)[p] = Σ_i c[i]·F[n − 1 − p + i].
    fn window_masks(&self) -> &[i8] {
        self.window_masks.get_or_init(|| {
            let n = self.params.n();
            (0..2 * n)
                .map(|y| {
                    let x = 2 * n - 1 - y;
                    let f = if x < n {
                        -self.coeffs[x]
                    } else {
                        self.coeffs[x - n]
                    };
                    f as i8
                })
                .collect()
        })
    }

    /// Client: decrypts a sparse response at its positions (mod t, in the order given).
    ///
    /// c1·s is needed exactly over the integers; |c1·s| ≤ n·2^(k−1), so when n·2^k < q0 one
    /// prime suffices (2 NTTs instead of 4 and no CRT); otherwise every Q prime and CRT.
    pub fn decrypt_sparse(
        &self,
        r: &SparseResponse,
        positions: &[usize],
    ) -> Result<Vec<u64>, HeError> {
        let direct = positions.len() <= DIRECT_MAX_KEPT;
        self.decrypt_sparse_with(r, positions, direct)
    }

    /// `decrypt_sparse`, computing c1·s at the positions directly (`direct`, when the
    /// modulus allows it) or by NTTs; both are exact, so the results are identical.
    fn decrypt_sparse_with(
        &self,
        r: &SparseResponse,
        positions: &[usize],
        direct: bool,
    ) -> Result<Vec<u64>, HeError> {
        let params = &self.params;
        let n = params.n();
        if positions.len() != r.c0.len() || positions.iter().any(|&p| p >= n) || r.c1.len() != n {
            return Err(HeError::Shape(format!(
                "{} positions for {} kept coefficients",
                positions.len(),
                r.c0.len()
            )));
        }
        let k = r.log_q;
        let qs = &params.0.qs;
        let limbs = if ((n as u128) << k) < qs[0].q as u128 {
            1
        } else {
            params.l().min(2)
        };
        let t = params.t();
        let kmask = (1u128 << k) - 1;
        // (c0 + c1·s) mod 2^k (two's complement masking), then round(x·t / 2^k).
        let finish = |c0: u64, prod: i128| -> u64 {
            let x = ((c0 as i128 + prod) as u128) & kmask;
            (((x * t as u128 + (1u128 << (k - 1))) >> k) % t as u128) as u64
        };
        // One prime suffices means |c1·s| ≤ n·2^(k−1) < q0/2 < 2^62: the direct sums are
        // exact in i64.
        if direct && limbs == 1 && k <= DIRECT_MAX_BITS {
            let (mut lo, mut hi) = (vec![0i32; n], vec![0i32; n]);
            center_split(&mut lo, &mut hi, &r.c1, k);
            let mut prods = Vec::with_capacity(positions.len());
            window_products(&lo, &hi, self.window_masks(), positions, &mut prods);
            return Ok(r
                .c0
                .iter()
                .zip(&prods)
                .map(|(&c0, &p)| finish(c0, p as i128))
                .collect());
        }
        let mut c1 = take_dirty(n * limbs);
        for (i, md) in qs.iter().take(limbs).enumerate() {
            let q = md.q;
            let ci = &mut c1[i * n..(i + 1) * n];
            lift_pow2(ci, &r.c1, k, q);
            md.to_ntt(ci);
            md.mul_to_coeff(ci, &self.ntt_qp[i * n..(i + 1) * n]);
        }
        let qb = params.0.q_big;
        let out = positions
            .iter()
            .zip(&r.c0)
            .map(|(&p, &c0)| {
                let prod = if limbs == 1 {
                    center(c1[p], qs[0].q) as i128
                } else {
                    center_big(crt(params, &c1, p), qb)
                };
                finish(c0, prod)
            })
            .collect();
        give_back(c1);
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bfv::Plaintext;

    fn setup() -> (Params, SecretKey, PublicKey) {
        let params = Params::by_name("n8192-z2k32").expect("params");
        let sk = SecretKey::generate(&params);
        let pk = sk.public_key();
        (params, sk, pk)
    }

    /// Coefficient p of the negacyclic product a·b mod 2^32.
    fn negacyclic_at(a: &[u64], b: &[u64], p: usize) -> u64 {
        let n = a.len();
        let mut acc = 0u64;
        for (i, &ai) in a.iter().enumerate() {
            let (j, neg) = if i <= p {
                (p - i, false)
            } else {
                (n + p - i, true)
            };
            let v = ai.wrapping_mul(b[j]);
            acc = if neg {
                acc.wrapping_sub(v)
            } else {
                acc.wrapping_add(v)
            };
        }
        acc & 0xffff_ffff
    }

    /// End to end: the sparse response of a product decrypts to (a·w − mask) mod 2^32 at
    /// every kept position (first, last, scattered), through the wire form, at the GRU's
    /// modulus (one-prime client path) and at 2^62 (two primes and CRT).
    #[test]
    fn sparse_response_decrypts_the_masked_product() {
        let (params, sk, pk) = setup();
        let n = params.n();
        let mut s = 99u64;
        let mut next = || {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            s >> 20
        };
        let a: Vec<u64> = (0..n).map(|_| next() & 0xffff_ffff).collect();
        // Small signed weights (as the GRU's), stored mod 2^32.
        let w: Vec<u64> = (0..n)
            .map(|i| {
                if i % 7 == 0 {
                    ((next() % 255) as i64 - 127) as u64 & 0xffff_ffff
                } else {
                    0
                }
            })
            .collect();
        let ct = sk.encrypt_coeffs(&a).expect("encrypt");
        let pt = Plaintext::from_coeffs(&params, &w).expect("plaintext");
        let positions: Vec<usize> = vec![0, 1, 99, 4095, 4096, 8000, n - 1];
        let mask: Vec<u64> = positions.iter().map(|_| next() & 0xffff_ffff).collect();
        for k in [44u32, 62] {
            let prod = params.mul_plain(&ct, &pt);
            let r = params
                .finish_response_at(prod, &pk, 80, &positions, &mask, k)
                .expect("finish");
            let bytes = r.to_bytes();
            assert_eq!(
                bytes.len(),
                SparseResponse::wire_len(&params, positions.len(), k)
            );
            let r = SparseResponse::from_bytes(&params, positions.len(), &bytes).expect("parse");
            let got = sk.decrypt_sparse(&r, &positions).expect("decrypt");
            for (j, &p) in positions.iter().enumerate() {
                let want = negacyclic_at(&a, &w, p).wrapping_sub(mask[j]) & 0xffff_ffff;
                assert_eq!(got[j], want, "k {k} position {p}");
            }
        }
    }

    /// The client's sparse decryption equals the dense `decrypt_response_poly` on the same
    /// response (both the one-prime and the two-prime path).
    #[test]
    fn sparse_decryption_matches_dense() {
        let (params, sk, pk) = setup();
        let n = params.n();
        let m: Vec<u64> = (0..n as u64)
            .map(|i| i.wrapping_mul(2654435761) & 0xffff_ffff)
            .collect();
        let ct = sk.encrypt_coeffs(&m).expect("encrypt");
        let positions: Vec<usize> = (0..n).step_by(97).chain([n - 1]).collect();
        for k in [40u32, 44, 62] {
            let dense = params
                .finish_response(&ct, &pk, 60, None, k)
                .expect("dense");
            let want = sk.decrypt_response_poly(&dense).expect("dense decrypt");
            let sparse = SparseResponse {
                log_q: k,
                c0: positions.iter().map(|&p| dense.c0[p]).collect(),
                c1: dense.c1.clone(),
            };
            let got = sk
                .decrypt_sparse(&sparse, &positions)
                .expect("sparse decrypt");
            let want: Vec<u64> = positions.iter().map(|&p| want[p]).collect();
            assert_eq!(got, want, "k {k}");
            assert_eq!(got, positions.iter().map(|&p| m[p]).collect::<Vec<_>>());
        }
    }

    /// The direct c1·s path of `decrypt_sparse` equals the NTT path (both exact) on random
    /// and extreme c1 (all 2^(k−1), the most negative centered value, all 2^(k−1) − 1, zero),
    /// with a random secret and with all-ones and all-minus-ones secrets (the largest
    /// partial sums), at first, last, repeated and scattered positions, for k up to the
    /// direct path's bound and past it (where it falls back).
    #[test]
    fn direct_sparse_decryption_matches_ntt_path() {
        let params = Params::by_name("n8192-z2k32").expect("params");
        let n = params.n();
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let keys = [
            SecretKey::generate(&params),
            SecretKey::from_coeffs(&params, vec![1; n]),
            SecretKey::from_coeffs(&params, vec![-1; n]),
            SecretKey::from_coeffs(&params, (0..n).map(|i| [1, -1, 0][i % 3]).collect()),
        ];
        let positions: Vec<usize> = [0, 1, 255, 256, 257, 4095, n - 2, n - 1, 1, 0]
            .into_iter()
            .chain((0..40).map(|i| (i * 2_654_435_761usize) % n))
            .collect();
        for k in [1u32, 2, 21, 22, 23, 43, 44, 45, 48] {
            let m = (1u64 << k) - 1;
            let c1s: [Vec<u64>; 5] = [
                (0..n).map(|_| next() & m).collect(),
                vec![1u64 << (k - 1); n],
                vec![(1u64 << (k - 1)) - 1; n],
                vec![0; n],
                (0..n)
                    .map(|i| if i % 2 == 0 { 1u64 << (k - 1) } else { m >> 1 })
                    .collect(),
            ];
            for sk in &keys {
                for c1 in &c1s {
                    let r = SparseResponse {
                        log_q: k,
                        c0: positions.iter().map(|_| next() & m).collect(),
                        c1: c1.clone(),
                    };
                    let want = sk.decrypt_sparse_with(&r, &positions, false).expect("ntt");
                    let got = sk
                        .decrypt_sparse_with(&r, &positions, true)
                        .expect("direct");
                    assert_eq!(got, want, "k {k}");
                    assert_eq!(sk.decrypt_sparse(&r, &positions).expect("auto"), want);
                }
            }
        }
    }

    /// The decimated c0 gives bit-identical responses (same draws: same AES key along both
    /// paths) to the full inverse NTT: the GRU's hidden-projection layouts (H = 128, 64), parts
    /// of them, one position, other classes mod 64 and 128, and layouts where the fallback
    /// must run (input projections at stride 10 and 100, scattered positions), at k = 44 and 58
    /// (k = 62 leaves the two-prime path: `Rns2` needs 2^k < q1).
    #[test]
    fn decimated_response_is_bit_identical() {
        let (params, sk, pk) = setup();
        let n = params.n();
        let mut s = 0x1234_5678u64;
        let mut next = move || {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            s >> 11
        };
        let a: Vec<u64> = (0..n).map(|_| next() & 0xffff_ffff).collect();
        let w: Vec<u64> = (0..n).map(|_| next() & 0xffff_ffff).collect();
        let ct = sk.encrypt_coeffs(&a).expect("encrypt");
        let pt = Plaintext::from_coeffs(&params, &w).expect("plaintext");
        let at = |m: usize, r: usize, rows: usize| -> Vec<usize> {
            (0..rows).map(|i| i * m + r).collect()
        };
        let fast: Vec<Vec<usize>> = vec![
            at(128, 127, 58),
            at(128, 127, 64),
            at(64, 63, 128),
            at(64, 63, 37),
            at(128, 0, 64),
            at(128, 5, 13),
            at(64, 17, 100),
            (0..20)
                .map(|_| (next() as usize % 64) * 128 + 127)
                .collect(),
            vec![128 * 9 + 127],
        ];
        let slow: Vec<Vec<usize>> = vec![
            at(10, 9, 810),
            at(100, 99, 81),
            (0..58).map(|_| next() as usize % n).collect(),
        ];
        for (positions, decimated) in fast
            .iter()
            .map(|p| (p, true))
            .chain(slow.iter().map(|p| (p, false)))
        {
            let takes = params
                .0
                .decimated
                .tables_for(&params.0.qs, n, positions)
                .is_some();
            assert_eq!(takes, decimated, "{positions:?}");
            let mask: Vec<u64> = positions.iter().map(|_| next() & 0xffff_ffff).collect();
            for k in [44u32, 58] {
                let key = [next() as u8; 16];
                let run = |dec: bool| {
                    params
                        .finish_response_at_with(
                            params.mul_plain(&ct, &pt),
                            &pk,
                            80,
                            positions,
                            &mask,
                            k,
                            || Sampler::from_key(key),
                            dec,
                        )
                        .expect("finish")
                };
                let (got, want) = (run(true), run(false));
                assert_eq!(got.c0, want.c0, "k {k} {positions:?}");
                assert_eq!(got.c1, want.c1, "k {k}");
                assert_eq!(got.to_bytes(), want.to_bytes());
                let dec = sk.decrypt_sparse(&got, positions).expect("decrypt");
                for (j, &p) in positions.iter().enumerate() {
                    let want = negacyclic_at(&a, &w, p).wrapping_sub(mask[j]) & 0xffff_ffff;
                    assert_eq!(dec[j], want, "k {k} position {p}");
                }
            }
        }
    }

    /// Hostile or inconsistent input gives typed errors, never a panic.
    #[test]
    fn sparse_rejects_bad_input() {
        let (params, sk, pk) = setup();
        let n = params.n();
        let ct = sk.encrypt_coeffs(&[1, 2, 3]).expect("encrypt");
        let pos = [3usize, 5];
        let good = params
            .finish_response_at(params.add(&ct, &ct), &pk, 40, &pos, &[0, 0], 44)
            .expect("finish")
            .to_bytes();
        assert!(SparseResponse::from_bytes(&params, 2, &good).is_ok());
        assert!(SparseResponse::from_bytes(&params, 2, &[]).is_err());
        assert!(SparseResponse::from_bytes(&params, 2, &good[..good.len() - 1]).is_err());
        assert!(SparseResponse::from_bytes(&params, 3, &good).is_err());
        assert!(SparseResponse::from_bytes(&params, n + 1, &good).is_err());
        for k in [0u8, 63, 255] {
            let mut b = good.clone();
            b[0] = k;
            assert!(SparseResponse::from_bytes(&params, 2, &b).is_err(), "{k}");
        }
        // (2 + n)·44 bits end on a byte boundary; 43 bits leave 4 padding bits to poison.
        let r = params
            .finish_response_at(params.add(&ct, &ct), &pk, 40, &pos, &[0, 0], 43)
            .expect("finish");
        let mut b = r.to_bytes();
        assert!(SparseResponse::from_bytes(&params, 2, &b).is_ok());
        *b.last_mut().expect("non-empty") |= 0x80;
        assert!(matches!(
            SparseResponse::from_bytes(&params, 2, &b),
            Err(HeError::BadHeader(_))
        ));
        let r = SparseResponse::from_bytes(&params, 2, &good).expect("parse");
        assert!(sk.decrypt_sparse(&r, &[3]).is_err());
        assert!(sk.decrypt_sparse(&r, &[3, n]).is_err());
        for (p, m, k) in [
            (&[3usize, n][..], &[0u64, 0][..], 44u32),
            (&[3, 5], &[0], 44),
            (&[3, 5], &[0, 0], 0),
            (&[3, 5], &[0, 0], 63),
        ] {
            assert!(params
                .finish_response_at(params.add(&ct, &ct), &pk, 40, p, m, k)
                .is_err());
        }
        assert!(params
            .finish_response_at(params.add(&ct, &ct), &pk, 125, &pos, &[0, 0], 44)
            .is_err());
    }

    /// unpack inverts pack_into at every width and at the edges (all ones, a last value
    /// ending mid-byte), and refuses a wrong length or width.
    #[test]
    fn unpack_inverts_pack() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for bits in [1u32, 7, 8, 13, 32, 43, 44, 55, 56, 57, 62] {
            let m = (1u64 << bits) - 1;
            for count in [0usize, 1, 2, 5, 7, 8, 9, 37, 8250] {
                let vals: Vec<u64> = (0..count)
                    .map(|i| {
                        x = x
                            .wrapping_mul(6364136223846793005)
                            .wrapping_add(1442695040888963407);
                        if i % 5 == 0 {
                            m
                        } else {
                            (x >> 7) & m
                        }
                    })
                    .collect();
                let mut out = Vec::new();
                pack_into(vals.iter().copied(), bits, &mut out);
                assert_eq!(out.len(), (count * bits as usize).div_ceil(8));
                assert_eq!(unpack(&out, count, bits).ok(), Some(vals.clone()), "{bits}");
                for split in [0, count / 3, count, count + 1] {
                    let (a, b) = unpack_fast(&out, count, bits, split).expect("split");
                    assert_eq!([a, b].concat(), vals, "{bits} {split}");
                }
                if !out.is_empty() {
                    assert!(unpack(&out[1..], count, bits).is_err());
                }
                if (count * bits as usize) % 8 != 0 {
                    let mut bad = out.clone();
                    *bad.last_mut().expect("non-empty") |= 0x80;
                    assert!(
                        matches!(unpack(&bad, count, bits), Err(HeError::BadHeader(_))),
                        "{bits} {count}"
                    );
                }
                out.push(0);
                assert!(unpack(&out, count, bits).is_err());
            }
        }
        assert!(unpack(&[], 0, 0).is_err() && unpack(&[], 0, 63).is_err());
    }
}

#[cfg(test)]
mod timing {
    use super::*;
    use crate::bfv::{Plaintext, Response};
    use std::time::Instant;

    /// Manual timers for the response path (not a check): `cargo test --release -p
    /// secinfer-he --lib response_path_timing -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn response_path_timing() {
        let params = Params::by_name("n8192-z2k32").expect("params");
        let sk = SecretKey::generate(&params);
        let pk = sk.public_key();
        let n = params.n();
        let ct = sk.encrypt_coeffs(&vec![7u64; n]).expect("enc");
        let pt = Plaintext::from_coeffs(&params, &vec![3u64; n]).expect("pt");
        let pos: Vec<usize> = (0..64).map(|i| i * 128 + 127).collect();
        let mask = vec![5u64; pos.len()];
        let reps = 200;
        let time = |label: &str, f: &mut dyn FnMut()| {
            let t = Instant::now();
            for _ in 0..reps {
                f();
            }
            eprintln!(
                "{label}: {:.1} µs",
                t.elapsed().as_secs_f64() * 1e6 / reps as f64
            );
        };
        let md = &params.0.qs[0];
        let mut x = vec![1u64; n];
        time("NTT fwd (one 62-bit prime)", &mut || md.to_ntt(&mut x));
        time("NTT inv (one 62-bit prime)", &mut || md.to_coeff(&mut x));
        time("mul_plain", &mut || drop(params.mul_plain(&ct, &pt)));
        let mut bytes = Vec::new();
        time("mul_plain + finish_response_at + to_bytes", &mut || {
            let r = params
                .finish_response_at(params.mul_plain(&ct, &pt), &pk, 80, &pos, &mask, 44)
                .expect("finish");
            bytes = r.to_bytes();
        });
        time("dense finish_response", &mut || {
            let p = params.mul_plain(&ct, &pt);
            drop(
                params
                    .finish_response(&p, &pk, 80, Some(&vec![5u64; n]), 44)
                    .expect("f"),
            );
        });
        for kept in [2usize, 32, 58, 96, 128] {
            let pk_ = &pk;
            let p2: Vec<usize> = (0..kept).map(|i| i * (n / kept)).collect();
            let m2 = vec![5u64; kept];
            let r = params
                .finish_response_at(params.mul_plain(&ct, &pt), pk_, 80, &p2, &m2, 44)
                .expect("finish");
            for direct in [false, true] {
                time(
                    &format!("decrypt_sparse kept {kept} direct {direct}"),
                    &mut || {
                        drop(sk.decrypt_sparse_with(&r, &p2, direct).expect("dec"));
                    },
                );
            }
        }
        time("from_bytes + decrypt_sparse", &mut || {
            let r = SparseResponse::from_bytes(&params, pos.len(), &bytes).expect("parse");
            drop(sk.decrypt_sparse(&r, &pos).expect("dec"));
        });
        let r = params
            .finish_response_at(params.mul_plain(&ct, &pt), &pk, 80, &pos, &mask, 44)
            .expect("finish");
        let dense = Response {
            log_q: 44,
            c0: {
                let mut c = vec![0u64; n];
                for (&p, &v) in pos.iter().zip(&r.c0) {
                    c[p] = v;
                }
                c
            },
            c1: r.c1.clone(),
        };
        time("decrypt_response_poly", &mut || {
            drop(sk.decrypt_response_poly(&dense).expect("dec"))
        });
    }
}
