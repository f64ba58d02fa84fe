//! Scalar modular arithmetic, primality, prime search and the RLWE samplers over the AES-CTR PRG.

use secinfer_core::{Block, Prg};

#[inline(always)]
pub(crate) fn add_mod(a: u64, b: u64, q: u64) -> u64 {
    let s = a + b;
    if s >= q {
        s - q
    } else {
        s
    }
}

#[inline(always)]
pub(crate) fn sub_mod(a: u64, b: u64, q: u64) -> u64 {
    if a >= b {
        a - b
    } else {
        a + q - b
    }
}

#[inline(always)]
pub(crate) fn mul_mod(a: u64, b: u64, q: u64) -> u64 {
    ((a as u128 * b as u128) % q as u128) as u64
}

/// Shoup precomputation for multiplying by a fixed w mod q: floor(w·2^64 / q).
#[inline(always)]
pub(crate) fn shoup(w: u64, q: u64) -> u64 {
    (((w as u128) << 64) / q as u128) as u64
}

/// a·w mod q with w' = shoup(w, q); a < q < 2^63.
#[inline(always)]
pub(crate) fn mul_shoup(a: u64, w: u64, w_shoup: u64, q: u64) -> u64 {
    let hi = ((a as u128 * w_shoup as u128) >> 64) as u64;
    let r = a.wrapping_mul(w).wrapping_sub(hi.wrapping_mul(q));
    if r >= q {
        r - q
    } else {
        r
    }
}

#[inline(always)]
pub(crate) fn neg_mod(a: u64, q: u64) -> u64 {
    if a == 0 {
        0
    } else {
        q - a
    }
}

pub(crate) fn pow_mod(mut b: u64, mut e: u64, q: u64) -> u64 {
    let mut r = 1u64 % q;
    b %= q;
    while e > 0 {
        if e & 1 == 1 {
            r = mul_mod(r, b, q);
        }
        b = mul_mod(b, b, q);
        e >>= 1;
    }
    r
}

/// Inverse modulo a prime q (Fermat).
pub(crate) fn inv_mod(a: u64, q: u64) -> u64 {
    pow_mod(a, q - 2, q)
}

/// Maps a signed value into [0, q).
#[inline(always)]
pub(crate) fn from_i64(v: i64, q: u64) -> u64 {
    if v >= 0 {
        let v = v as u64;
        if v < q {
            v
        } else {
            v % q
        }
    } else if ((-(v as i128)) as u128) < q as u128 {
        q - ((-(v as i128)) as u64)
    } else {
        let m = ((-(v as i128)) as u128 % q as u128) as u64;
        neg_mod(m, q)
    }
}

/// Centered representative of a in (-q/2, q/2].
#[inline(always)]
pub(crate) fn center(a: u64, q: u64) -> i64 {
    if a > q / 2 {
        -((q - a) as i64)
    } else {
        a as i64
    }
}

/// Deterministic Miller-Rabin for u64.
pub fn is_prime(n: u64) -> bool {
    if n < 2 {
        return false;
    }
    for p in [2u64, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37] {
        if n % p == 0 {
            return n == p;
        }
    }
    let mut d = n - 1;
    let mut s = 0;
    while d % 2 == 0 {
        d /= 2;
        s += 1;
    }
    'outer: for a in [2u64, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37] {
        let mut x = pow_mod(a, d, n);
        if x == 1 || x == n - 1 {
            continue;
        }
        for _ in 1..s {
            x = mul_mod(x, x, n);
            if x == n - 1 {
                continue 'outer;
            }
        }
        return false;
    }
    true
}

/// Largest prime p < 2^bits with p ≡ 1 (mod m), skipping those in `exclude`.
pub fn prime_below(bits: u32, m: u64, exclude: &[u64]) -> Option<u64> {
    let top = 1u64 << bits;
    let mut k = (top - 1) / m;
    while k > 0 {
        let p = k * m + 1;
        if p < top && is_prime(p) && !exclude.contains(&p) {
            return Some(p);
        }
        k -= 1;
    }
    None
}

/// AES blocks per refill of a [`Sampler`] (1 KiB of output: the bulk CTR path, VAES where
/// the CPU has it).
const SAMPLER_BLOCKS: usize = 64;

/// The RLWE samplers (uniform mod q, ternary, centered binomial, flooding) over
/// `secinfer-core`'s AES-CTR [`Prg`], the workspace's one PRG: fresh randomness from the OS
/// CSPRNG ([`Sampler::from_os`]) and the public expansion of a ciphertext's or key's seed
/// ([`Sampler::from_seed`]). Both 64-bit halves of every block are used, and small samples
/// share a word, because the response path draws ≈ 2n words per ciphertext. Not `Debug`: it
/// holds a key.
pub(crate) struct Sampler {
    prg: Prg,
    buf: [u64; 2 * SAMPLER_BLOCKS],
    pos: usize,
    /// Unused random bits for the 2-bit ternary sampler (`nbits` of them, low first).
    bits: u64,
    nbits: u32,
}

impl Sampler {
    fn with(prg: Prg) -> Self {
        Sampler {
            prg,
            buf: [0; 2 * SAMPLER_BLOCKS],
            pos: 2 * SAMPLER_BLOCKS,
            bits: 0,
            nbits: 0,
        }
    }
    /// Keyed from the OS CSPRNG.
    pub(crate) fn from_os() -> Self {
        Self::with(Prg::new())
    }
    /// The public expansion of a 32-byte wire seed (the seeds stay 32 bytes so every message
    /// keeps its size): the AES key is the XOR of its two halves, so each bit of a uniform
    /// seed counts.
    pub(crate) fn from_seed(seed: &[u8; 32]) -> Self {
        let mut lo = [0u8; 16];
        let mut hi = [0u8; 16];
        lo.copy_from_slice(&seed[..16]);
        hi.copy_from_slice(&seed[16..]);
        Self::with(Prg::from_seed(
            Block::from_bytes(lo) ^ Block::from_bytes(hi),
        ))
    }
    /// A generator with a chosen key: tests replay one response's draws along two paths.
    #[cfg(test)]
    pub(crate) fn from_key(key: [u8; 16]) -> Self {
        Self::with(Prg::from_seed(Block::from_bytes(key)))
    }
    fn refill(&mut self) {
        let mut blocks = [Block::ZERO; SAMPLER_BLOCKS];
        self.prg.fill_blocks(&mut blocks);
        for (i, b) in blocks.iter().enumerate() {
            self.buf[2 * i] = b.0 as u64;
            self.buf[2 * i + 1] = (b.0 >> 64) as u64;
        }
        self.pos = 0;
    }
    #[inline]
    pub(crate) fn next_u64(&mut self) -> u64 {
        if self.pos == 2 * SAMPLER_BLOCKS {
            self.refill();
        }
        let v = self.buf[self.pos];
        self.pos += 1;
        v
    }
    pub(crate) fn fill_bytes(&mut self, out: &mut [u8]) {
        for chunk in out.chunks_mut(8) {
            let w = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&w[..chunk.len()]);
        }
    }
    /// `out.len()` words: exactly what as many [`Sampler::next_u64`] calls give, leaving the
    /// same state, but whole refills go straight from the PRG into `out`.
    pub(crate) fn fill_u64(&mut self, out: &mut [u64]) {
        let buffered = (2 * SAMPLER_BLOCKS - self.pos).min(out.len());
        out[..buffered].copy_from_slice(&self.buf[self.pos..self.pos + buffered]);
        self.pos += buffered;
        let mut rest = &mut out[buffered..];
        while rest.len() >= 2 * SAMPLER_BLOCKS {
            let (head, tail) = rest.split_at_mut(2 * SAMPLER_BLOCKS);
            let mut blocks = [Block::ZERO; SAMPLER_BLOCKS];
            self.prg.fill_blocks(&mut blocks);
            for (w, b) in head.chunks_exact_mut(2).zip(&blocks) {
                w[0] = b.0 as u64;
                w[1] = (b.0 >> 64) as u64;
            }
            rest = tail;
        }
        for o in rest {
            *o = self.next_u64();
        }
    }
    /// `out.len()` draws of [`Sampler::uniform`]`(q)`: the same values and the same state
    /// after. Each round draws exactly as many words as values are missing (a word yields at
    /// most one), so no word is taken that the scalar sampler would not take, and the
    /// rejections are a branch-free compaction instead of unpredictable branches.
    pub(crate) fn fill_uniform(&mut self, q: u64, out: &mut [u64]) {
        const CHUNK: usize = 256;
        let bits = 64 - (q - 1).leading_zeros();
        let mask = if bits == 64 {
            u64::MAX
        } else {
            (1u64 << bits) - 1
        };
        let mut words = [0u64; CHUNK];
        let mut filled = 0;
        while filled < out.len() {
            let want = (out.len() - filled).min(CHUNK);
            self.fill_u64(&mut words[..want]);
            filled = compact_below(&words[..want], mask, q, out, filled);
        }
    }
    /// `out.len()` draws of [`Sampler::gaussian`] (the same values and state after), the
    /// binomial's popcounts compiled for POPCNT where the CPU has it.
    pub(crate) fn fill_error(&mut self, out: &mut [i8]) {
        const CHUNK: usize = 256;
        let mut words = [0u64; CHUNK];
        for dst in out.chunks_mut(CHUNK) {
            self.fill_u64(&mut words[..dst.len()]);
            binomial21(&words[..dst.len()], dst);
        }
    }
    /// Uniform in [0, q) by rejection sampling.
    pub(crate) fn uniform(&mut self, q: u64) -> u64 {
        let bits = 64 - (q - 1).leading_zeros();
        let mask = if bits == 64 {
            u64::MAX
        } else {
            (1u64 << bits) - 1
        };
        loop {
            let v = self.next_u64() & mask;
            if v < q {
                return v;
            }
        }
    }
    /// Uniform on the 2b + 1 integers of [-b, b] (b < 2^126): draws of the smallest
    /// power-of-two range ≥ 2b + 1, rejected when ≥ 2b + 1, so exactly uniform (acceptance
    /// > 1/2 per 128-bit draw).
    pub(crate) fn uniform_i128(&mut self, b: u128) -> i128 {
        let range = 2 * b + 1;
        let bits = 128 - (range - 1).leading_zeros();
        let mask = if bits == 128 {
            u128::MAX
        } else {
            (1u128 << bits) - 1
        };
        loop {
            let v = (((self.next_u64() as u128) << 64) | self.next_u64() as u128) & mask;
            if v < range {
                return v as i128 - b as i128;
            }
        }
    }
    /// Uniform ternary in {-1, 0, 1}: 2 random bits per try, the pattern 3 rejected (so
    /// each value has probability exactly 1/3), 32 tries per word.
    #[inline]
    pub(crate) fn ternary(&mut self) -> i64 {
        loop {
            if self.nbits == 0 {
                self.bits = self.next_u64();
                self.nbits = 64;
            }
            let v = self.bits & 3;
            self.bits >>= 2;
            self.nbits -= 2;
            if v < 3 {
                return v as i64 - 1;
            }
        }
    }
    /// `out.len()` draws of [`Sampler::ternary`]: exactly the values, and the state after,
    /// that as many calls give, but whole words without a branch per try: a word's 32 2-bit
    /// fields are written in order and the write position steps past those < 3 (the scalar
    /// sampler's 25 % rejections were unpredictable branches).
    pub(crate) fn fill_ternary(&mut self, out: &mut [i8]) {
        let mut i = 0;
        // Bits left from an earlier call: the scalar path until a word is used up.
        while i < out.len() && self.nbits > 0 {
            out[i] = self.ternary() as i8;
            i += 1;
        }
        // A fresh word yields at most 32 values: whole words while they all fit.
        while out.len() - i >= 32 {
            let w = self.next_u64();
            let dst = &mut out[i..i + 32];
            let mut c = 0usize;
            for j in 0..32 {
                let v = (w >> (2 * j)) & 3;
                dst[c] = v as i8 - 1;
                c += usize::from(v != 3);
            }
            i += c;
        }
        // The tail through the scalar path (it starts a fresh word and keeps what is left).
        for o in &mut out[i..] {
            *o = self.ternary() as i8;
        }
    }
    /// Error sample: centered binomial with k = 21 (popcount of 21 random bits minus another
    /// 21), standard deviation √(21/2) ≈ 3.24 ≥ σ = 3.2 of the HE Standard, bounded by 21
    /// (parameter sets with another σ are rejected by their validation).
    #[inline]
    pub(crate) fn gaussian(&mut self) -> i64 {
        binomial21_word(self.next_u64()) as i64
    }
}

/// The centered binomial sample (k = 21) of one random word: popcount of its low 21 bits
/// minus that of the next 21.
#[inline(always)]
fn binomial21_word(v: u64) -> i8 {
    (v & 0x1F_FFFF).count_ones() as i8 - ((v >> 21) & 0x1F_FFFF).count_ones() as i8
}

fast_dispatch! {
    /// out[i] ← the binomial sample of words[i].
    fn binomial21(words: &[u64], out: &mut [i8]) {
        for (o, &w) in out.iter_mut().zip(words) {
            *o = binomial21_word(w);
        }
    }
}

fast_dispatch! {
    /// Writes the masked words that are below `q` to `out` from position `filled` on and
    /// returns the new fill; callers pass at most `out.len() − filled` words.
    fn compact_below(words: &[u64], mask: u64, q: u64, out: &mut [u64], filled: usize) -> usize {
        let mut c = filled;
        for &w in words {
            let v = w & mask;
            // c < out.len() here: each earlier word advanced c by at most one.
            out[c] = v;
            c += usize::from(v < q);
        }
        c
    }
}

/// Two-prime RNS constants for the response path: Garner reconstruction, the exact
/// rounding switch to 2^k and reductions of signed noise, all with u64 Shoup products
/// (the u128 `%` and the f64-guided 256-bit division they replace were ≈ 15 % of a GRU
/// session's CPU). Every routine is checked against the u128 reference formulas in tests.
#[derive(Clone, Debug)]
pub(crate) struct Rns2 {
    q0: u64,
    q1: u64,
    q0_inv: u64,
    q0_inv_s: u64,
    qb: u128,
    half: u128,
    k: u32,
    /// floor(2^k · 2^64 / q1): Shoup constant of the multiplier 2^k (< q1).
    pow_k_s: u64,
    /// 2^64 mod q_i and its Shoup constant (reduction of the high word of a u128).
    r64: [u64; 2],
    r64_s: [u64; 2],
    /// shoup(1, q_i): reduction of a whole u64 by one Shoup product.
    one_s: [u64; 2],
}

impl Rns2 {
    /// None when the fast path's preconditions fail (the caller keeps the u128 path):
    /// q1 < q0 < 2·q1 < 2^64 (so x0 mod q1 is one conditional subtraction), both below 2^63
    /// (Shoup), 1 ≤ k and 2^k < q1 (the Shoup quotient of h·2^k), Q < 2^125 (no overflow in
    /// the rounding numerator r1·q0 + x0·2^k + Q/2 < 2Q + 2^(63+k)).
    pub(crate) fn new(q0: u64, q1: u64, k: u32) -> Option<Rns2> {
        if !(q1 < q0 && q0 / 2 < q1 && q0 < (1 << 63) && (1..63).contains(&k) && (1u64 << k) < q1) {
            return None;
        }
        let qb = q0 as u128 * q1 as u128;
        if qb >= 1u128 << 125 {
            return None;
        }
        let q0_inv = inv_mod(q0 % q1, q1);
        let r64 = [
            ((1u128 << 64) % q0 as u128) as u64,
            ((1u128 << 64) % q1 as u128) as u64,
        ];
        Some(Rns2 {
            q0,
            q1,
            q0_inv,
            q0_inv_s: shoup(q0_inv, q1),
            qb,
            half: qb / 2,
            k,
            pow_k_s: shoup(1u64 << k, q1),
            r64,
            r64_s: [shoup(r64[0], q0), shoup(r64[1], q1)],
            one_s: [shoup(1, q0), shoup(1, q1)],
        })
    }
    pub(crate) fn q(&self, i: usize) -> u64 {
        if i == 0 {
            self.q0
        } else {
            self.q1
        }
    }
    /// round(x · 2^k / Q) mod 2^k for x ∈ [0, Q) given as residues (x0 < q0, x1 < q1),
    /// rounding half up exactly like `mul_div_round(x, 2^k, Q)`.
    ///
    /// Garner: x = x0 + q0·h, h = (x1 − x0)·q0⁻¹ mod q1. Then with h·2^k = qt·q1 + r1,
    /// x·2^k = qt·Q + (r1·q0 + x0·2^k), so the result is qt + ⌊(r1·q0 + x0·2^k + ⌊Q/2⌋)/Q⌋
    /// and that last quotient is 0, 1 or 2 (a compare each).
    #[inline]
    pub(crate) fn switch(&self, x0: u64, x1: u64) -> u64 {
        let x0r = if x0 >= self.q1 { x0 - self.q1 } else { x0 };
        let h = mul_shoup(
            sub_mod(x1, x0r, self.q1),
            self.q0_inv,
            self.q0_inv_s,
            self.q1,
        );
        // Shoup quotient of h·2^k by q1: off by at most one. The remainder is < 2·q1 < 2^64,
        // so wrapping u64 arithmetic gives it exactly; 2^k enters as a multiplier (k < 63),
        // not as a variable u128 shift (which compiles to branches or cmovs on k ≥ 64).
        let pow_k = 1u64 << self.k;
        let est = ((h as u128 * self.pow_k_s as u128) >> 64) as u64;
        let mut r = h
            .wrapping_mul(pow_k)
            .wrapping_sub(est.wrapping_mul(self.q1));
        let mut qt = est;
        if r >= self.q1 {
            r -= self.q1;
            qt += 1;
        }
        let num = r as u128 * self.q0 as u128 + x0 as u128 * pow_k as u128 + self.half;
        let c = u64::from(num >= self.qb) + u64::from(num >= 2 * self.qb);
        (qt + c) & ((1u64 << self.k) - 1)
    }
    /// e mod q_i for a signed e with |e| < 2^127.
    ///
    /// No division: a Shoup product a·w mod q (w < q < 2^63, w' = shoup(w, q)) is exact for
    /// every a < 2^64, not only a < q: ⌊a·w'/2^64⌋ is ⌊a·w/q⌋ or one less (the truncation of
    /// w' costs less than a/2^64 < 1), so a·w − ⌊a·w'/2^64⌋·q ∈ [0, 2q) before the final
    /// subtraction. Hence hi·2^64 mod q with w = 2^64 mod q, and lo mod q with w = 1.
    #[inline]
    pub(crate) fn reduce_i128(&self, e: i128, i: usize) -> u64 {
        let q = self.q(i);
        let a = e.unsigned_abs();
        let hi = (a >> 64) as u64;
        let lo = mul_shoup(a as u64, 1, self.one_s[i], q);
        let m = add_mod(mul_shoup(hi, self.r64[i], self.r64_s[i], q), lo, q);
        neg_mod_if(m, q, e < 0)
    }
}

/// a, or q − a (0 stays 0) when `neg`.
#[inline(always)]
pub(crate) fn neg_mod_if(a: u64, q: u64, neg: bool) -> u64 {
    if neg {
        neg_mod(a, q)
    } else {
        a
    }
}

/// A small signed value (|v| < q) mod q without division.
#[inline(always)]
pub(crate) fn small_mod(v: i64, q: u64) -> u64 {
    if v >= 0 {
        v as u64
    } else {
        q - v.unsigned_abs()
    }
}

/// x·m as a 256-bit (hi, lo) pair; x < 2^128, m < 2^64.
fn mul_wide(x: u128, m: u64) -> (u128, u128) {
    let xl = x as u64 as u128;
    let xh = x >> 64;
    let p0 = xl * m as u128;
    let p1 = xh * m as u128;
    let lo = p0.wrapping_add(p1 << 64);
    let carry = u128::from(lo < p0);
    (((p1 >> 64) + carry), lo)
}

fn add_wide((h, l): (u128, u128), y: u128) -> (u128, u128) {
    let lo = l.wrapping_add(y);
    (h + u128::from(lo < l), lo)
}

fn sub_wide((h, l): (u128, u128), y: u128) -> (u128, u128) {
    let lo = l.wrapping_sub(y);
    (h - u128::from(l < y), lo)
}

/// round(x · m / d) for x, d < 2^127, m < 2^64, when the result is below 2^64: an f64
/// estimate corrected exactly with 256-bit products (falls back to long division otherwise).
pub(crate) fn mul_div_round(x: u128, m: u64, d: u128) -> u128 {
    let num = add_wide(mul_wide(x, m), d / 2);
    if num.0 == 0 {
        return num.1 / d;
    }
    let est = (x as f64) * (m as f64) / (d as f64);
    if est < 1.8e19 {
        let mut v = est as u64;
        let mut p = mul_wide(d, v);
        // Bring p = v·d to the largest multiple of d not above num (the estimate is off by
        // at most a few units).
        let mut guard = 0;
        while p > num && guard < 64 {
            v -= 1;
            p = sub_wide(p, d);
            guard += 1;
        }
        while add_wide(p, d) <= num && guard < 128 {
            v += 1;
            p = add_wide(p, d);
            guard += 1;
        }
        if guard < 128 {
            return v as u128;
        }
    }
    div_256_by_128(num.0, num.1, d)
}

fn div_256_by_128(hi: u128, lo: u128, d: u128) -> u128 {
    if hi == 0 {
        return lo / d;
    }
    // remainder r < d < 2^127 so 2r+1 fits.
    let mut r = hi % d;
    let mut q: u128 = 0;
    for i in (0..128).rev() {
        r = (r << 1) | ((lo >> i) & 1);
        q <<= 1;
        if r >= d {
            r -= d;
            q |= 1;
        }
    }
    q
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn primes_and_division() {
        assert!(is_prime(65537));
        assert!(!is_prime(65535));
        assert!(is_prime((1u64 << 61) - 1));
        let p = prime_below(20, 16384, &[]).expect("prime");
        assert_eq!(p % 16384, 1);
        assert!(is_prime(p));
        let x: u128 = (1u128 << 119) + 12345;
        let d: u128 = (1u128 << 118) + 7;
        let r = mul_div_round(x, 1 << 20, d);
        let approx = (x as f64) * (1u64 << 20) as f64 / d as f64;
        assert!((r as f64 - approx).abs() < 2.0);
        assert_eq!(mul_div_round(10, 3, 4), 8); // 7.5 -> 8
        assert_eq!(mul_div_round(9, 1, 4), 2); // 2.25 -> 2
                                               // Wide path against the long division, around rounding boundaries.
        let q: u128 = 4611685476199956481u128 * 4611685290174005249u128;
        let mut s = 12345u128;
        for _ in 0..2000 {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407)
                % q;
            for m in [1032193u64, 1 << 32, 1 << 33, 3] {
                let num = add_wide(mul_wide(s, m), q / 2);
                assert_eq!(mul_div_round(s, m, q), div_256_by_128(num.0, num.1, q));
            }
        }
    }
    /// The two n8192 prime pairs the response path runs on.
    const PAIRS: [(u64, u64); 2] = [
        (4611685941117976577, 4611685692009873409),
        (4611685476199956481, 4611685290174005249),
    ];

    fn lcg(s: &mut u64) -> u64 {
        *s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        *s ^ (*s >> 29)
    }

    /// Reference: CRT with u128 `%`, then the existing `mul_div_round` and `% 2^k`.
    fn switch_ref(x0: u64, x1: u64, q0: u64, q1: u64, k: u32) -> u64 {
        let qb = q0 as u128 * q1 as u128;
        let inv = inv_mod(q0 % q1, q1);
        let h = mul_mod(sub_mod(x1, x0 % q1, q1), inv, q1);
        let x = x0 as u128 + q0 as u128 * h as u128;
        assert!(x < qb);
        (mul_div_round(x, 1u64 << k, qb) % (1u128 << k)) as u64
    }

    #[test]
    fn rns2_switch_matches_u128_reference() {
        let mut s = 7u64;
        for (q0, q1) in PAIRS {
            for k in [1u32, 20, 32, 44, 47, 58] {
                let r = Rns2::new(q0, q1, k).expect("fast path applies");
                let edges = [0, 1, q1 - 1, q1, q0 - 1];
                for &x0 in &edges {
                    for &x1 in &edges[..3] {
                        assert_eq!(
                            r.switch(x0, x1),
                            switch_ref(x0, x1, q0, q1, k),
                            "{x0} {x1} {k}"
                        );
                    }
                }
                for _ in 0..20_000 {
                    let (x0, x1) = (lcg(&mut s) % q0, lcg(&mut s) % q1);
                    assert_eq!(r.switch(x0, x1), switch_ref(x0, x1, q0, q1, k));
                }
                // Near rounding boundaries: x = ⌈(j + 1/2)·Q / 2^k⌉ + δ for random j.
                let qb = q0 as u128 * q1 as u128;
                for _ in 0..2_000 {
                    let j = (lcg(&mut s) as u128) & ((1u128 << k) - 1);
                    // (2j + 1)·Q / 2^(k+1), from the 256-bit product.
                    let (h, l) = mul_wide(qb, (2 * j + 1) as u64);
                    let base = (h << (127 - k)) | (l >> (k + 1));
                    for d in [-1i128, 0, 1] {
                        let x = (base as i128 + d).clamp(0, qb as i128 - 1) as u128;
                        let (x0, x1) = ((x % q0 as u128) as u64, (x % q1 as u128) as u64);
                        assert_eq!(r.switch(x0, x1), switch_ref(x0, x1, q0, q1, k), "x {x}");
                    }
                }
            }
            // Preconditions: refused where the fast path would be wrong.
            assert!(Rns2::new(q1, q0, 44).is_none());
            assert!(Rns2::new(q0, q1, 0).is_none());
            assert!(Rns2::new(q0, q1, 63).is_none());
            assert!(Rns2::new(q0, q0 / 2 - 1, 44).is_none());
        }
    }

    #[test]
    fn reduce_i128_and_small_mod_match_rem_euclid() {
        let (q0, q1) = PAIRS[0];
        let r = Rns2::new(q0, q1, 44).expect("fast path");
        let mut s = 3u64;
        let mut vals: Vec<i128> = vec![
            0,
            1,
            -1,
            q0 as i128,
            -(q0 as i128),
            q0 as i128 - 1,
            (1i128 << 126) - 1,
            -(1i128 << 126),
            i128::MAX,
            -i128::MAX,
            u64::MAX as i128,
            -(u64::MAX as i128),
            (u64::MAX as i128) << 64 | u64::MAX as i128 >> 1,
            ((q1 as i128) << 64) | (2 * q0) as i128,
            -(((q0 as i128) << 64) | (3 * q1) as i128),
        ];
        for _ in 0..5_000 {
            let v = ((lcg(&mut s) as i128) << 64 | lcg(&mut s) as i128) >> (lcg(&mut s) % 100);
            vals.push(v);
        }
        for v in vals {
            for i in 0..2 {
                let q = r.q(i);
                assert_eq!(r.reduce_i128(v, i), v.rem_euclid(q as i128) as u64, "{v}");
            }
        }
        for v in [-21i64, -1, 0, 1, 21, (q1 - 1) as i64, -((q1 - 1) as i64)] {
            assert_eq!(small_mod(v, q1), from_i64(v, q1));
        }
    }

    /// `fill_ternary` gives exactly the values and leaves exactly the state of as many
    /// `ternary` calls, from every starting state (0..40 earlier draws leave 0..62 bits) and
    /// for lengths around the 32-per-word boundary.
    #[test]
    fn fill_ternary_matches_scalar_draws() {
        let new = |k: u8| Sampler::from_key([k; 16]);
        for k in 0..3u8 {
            for pre in [0usize, 1, 5, 23, 24, 31, 40] {
                for len in [0usize, 1, 31, 32, 33, 63, 64, 100, 1000, 8192] {
                    let (mut a, mut b) = (new(k), new(k));
                    for _ in 0..pre {
                        assert_eq!(a.ternary(), b.ternary());
                    }
                    let mut got = vec![7i8; len];
                    a.fill_ternary(&mut got);
                    let want: Vec<i8> = (0..len).map(|_| b.ternary() as i8).collect();
                    assert_eq!(got, want, "key {k} pre {pre} len {len}");
                    assert_eq!((a.bits, a.nbits), (b.bits, b.nbits));
                    for _ in 0..70 {
                        assert_eq!(a.ternary(), b.ternary());
                    }
                    assert_eq!(a.next_u64(), b.next_u64());
                }
            }
        }
    }

    /// The bulk samplers (`fill_u64`, `fill_uniform`, `fill_error`) give exactly the values
    /// and leave exactly the state of as many scalar draws, from starting states inside and at
    /// the end of a refill, for moduli with many and with almost no rejections, and lengths
    /// around the refill size.
    #[test]
    fn bulk_samplers_match_scalar_draws() {
        let new = |k: u8| Sampler::from_key([k; 16]);
        let q62 = prime_below(62, 1 << 14, &[]).expect("prime");
        for k in 0..2u8 {
            for pre in [0usize, 1, 127, 128, 129] {
                for len in [0usize, 1, 127, 128, 129, 300, 8192] {
                    let start = |s: &mut Sampler| {
                        for _ in 0..pre {
                            s.next_u64();
                        }
                    };
                    let (mut a, mut b) = (new(k), new(k));
                    start(&mut a);
                    start(&mut b);
                    let mut got = vec![0u64; len];
                    a.fill_u64(&mut got);
                    let want: Vec<u64> = (0..len).map(|_| b.next_u64()).collect();
                    assert_eq!(got, want, "words: key {k} pre {pre} len {len}");
                    assert_eq!(a.next_u64(), b.next_u64());
                    for q in [q62, (1 << 40) + 1, 3, 1 << 20] {
                        a.fill_uniform(q, &mut got);
                        let want: Vec<u64> = (0..len).map(|_| b.uniform(q)).collect();
                        assert_eq!(got, want, "uniform {q}: key {k} pre {pre} len {len}");
                        assert_eq!(a.next_u64(), b.next_u64());
                    }
                    let mut e = vec![0i8; len];
                    a.fill_error(&mut e);
                    let want: Vec<i8> = (0..len).map(|_| b.gaussian() as i8).collect();
                    assert_eq!(e, want, "error: key {k} pre {pre} len {len}");
                    assert_eq!(a.next_u64(), b.next_u64());
                }
            }
        }
    }

    /// The AES-CTR sampler's ternary, binomial and flooding distributions: ranges, mean and
    /// variance within 6 standard errors of the exact values, every value hit.
    #[test]
    fn sampler_distributions() {
        let mut p = Sampler::from_os();
        let n = 200_000f64;
        let stats = |xs: &[f64]| {
            let m = xs.iter().sum::<f64>() / xs.len() as f64;
            let v = xs.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / xs.len() as f64;
            (m, v)
        };
        // Ternary: P = 1/3 each, mean 0, variance 2/3.
        let t: Vec<f64> = (0..n as usize).map(|_| p.ternary() as f64).collect();
        assert!(t.iter().all(|&x| x == -1.0 || x == 0.0 || x == 1.0));
        for c in [-1.0, 0.0, 1.0] {
            let f = t.iter().filter(|&&x| x == c).count() as f64 / n;
            assert!(
                (f - 1.0 / 3.0).abs() < 6.0 * (2.0 / 9.0 / n).sqrt(),
                "{c}: {f}"
            );
        }
        let (m, v) = stats(&t);
        assert!(m.abs() < 6.0 * (2.0 / 3.0 / n).sqrt() && (v - 2.0 / 3.0).abs() < 0.01);
        // Centered binomial k = 21: |x| ≤ 21, mean 0, variance 10.5.
        let g: Vec<f64> = (0..n as usize).map(|_| p.gaussian() as f64).collect();
        assert!(g.iter().all(|x| x.abs() <= 21.0));
        let (m, v) = stats(&g);
        assert!(
            m.abs() < 6.0 * (10.5 / n).sqrt() && (v - 10.5).abs() < 0.25,
            "{m} {v}"
        );
        // Flooding U[−B, B]: bounds reached for small B, exact moments for B = 2^88.
        for b in [0u128, 1, 2, 5] {
            let mut seen = vec![false; 2 * b as usize + 1];
            for _ in 0..1_000 {
                let x = p.uniform_i128(b);
                assert!(x.unsigned_abs() <= b);
                seen[(x + b as i128) as usize] = true;
            }
            assert!(seen.iter().all(|&x| x), "B = {b}");
        }
        let b = 1u128 << 88;
        let u: Vec<f64> = (0..n as usize)
            .map(|_| {
                let x = p.uniform_i128(b);
                assert!(x.unsigned_abs() <= b);
                x as f64 / b as f64
            })
            .collect();
        let (m, v) = stats(&u);
        // Scaled to [−1, 1]: mean 0 (sd 1/√(3n)), variance 1/3.
        assert!(
            m.abs() < 6.0 / (3.0 * n).sqrt() && (v - 1.0 / 3.0).abs() < 0.01,
            "{m} {v}"
        );
        // A wire seed expands the same way every time, and every byte of it counts.
        let seed = [9u8; 32];
        let draw = |s: &[u8; 32]| {
            let mut x = Sampler::from_seed(s);
            (0..300).map(|_| x.next_u64()).collect::<Vec<_>>()
        };
        assert_eq!(draw(&seed), draw(&seed));
        for i in [0, 15, 16, 31] {
            let mut other = seed;
            other[i] ^= 1;
            assert_ne!(draw(&seed), draw(&other), "byte {i}");
        }
        // Two generators from the OS never agree.
        let mut q = Sampler::from_os();
        assert_ne!(
            (0..4).map(|_| p.next_u64()).collect::<Vec<_>>(),
            (0..4).map(|_| q.next_u64()).collect::<Vec<_>>()
        );
    }
}
