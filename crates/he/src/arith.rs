//! Scalar modular arithmetic, primality, prime search and the PRG used for sampling.

use rand_chacha::rand_core::{RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;

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

/// ChaCha20 PRG; seeded either from the OS CSPRNG or from a 32-byte public seed.
pub(crate) struct Prg(ChaCha20Rng);

impl Prg {
    pub(crate) fn from_seed(seed: [u8; 32]) -> Self {
        Prg(ChaCha20Rng::from_seed(seed))
    }
    pub(crate) fn from_os() -> Self {
        let mut seed = [0u8; 32];
        rand_core::OsRng.fill_bytes(&mut seed);
        Prg(ChaCha20Rng::from_seed(seed))
    }
    pub(crate) fn fill_bytes(&mut self, b: &mut [u8]) {
        self.0.fill_bytes(b)
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
            let v = self.0.next_u64() & mask;
            if v < q {
                return v;
            }
        }
    }
    /// Uniform in [-b, b] (b < 2^126), returned as i128.
    pub(crate) fn uniform_i128(&mut self, b: u128) -> i128 {
        let range = 2 * b + 1;
        let bits = 128 - (range - 1).leading_zeros();
        let mask = if bits == 128 {
            u128::MAX
        } else {
            (1u128 << bits) - 1
        };
        loop {
            let v = (((self.0.next_u64() as u128) << 64) | self.0.next_u64() as u128) & mask;
            if v < range {
                return v as i128 - b as i128;
            }
        }
    }
    /// Ternary in {-1, 0, 1}, uniform.
    pub(crate) fn ternary(&mut self) -> i64 {
        loop {
            let v = self.0.next_u64() & 3;
            if v < 3 {
                return v as i64 - 1;
            }
        }
    }
    /// Error sample: centered binomial with k = 21 (popcount of 21 random bits minus another
    /// 21), standard deviation √(21/2) ≈ 3.24 ≥ σ = 3.2 of the HE Standard, bounded by 21.
    /// The `_sigma` argument documents the target; sets with σ ≠ 3.2 are rejected by validation.
    pub(crate) fn gaussian(&mut self, _sigma: f64) -> i64 {
        let v = self.0.next_u64();
        let a = (v & 0x1F_FFFF).count_ones() as i64;
        let b = ((v >> 21) & 0x1F_FFFF).count_ones() as i64;
        a - b
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
}
