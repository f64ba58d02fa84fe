//! [`Format`]: the one fixed-point format of the workspace (DESIGN.md §4): a real x is the
//! `bits`-bit two's-complement integer X with x ≈ X / 2^scale.
use crate::error::FormatError;

/// The widest ring a share lives in (Z_{2^64}).
pub const MAX_BITS: u32 = 64;

/// A signed fixed-point format: `bits`-bit two's-complement integers X meaning X / 2^`scale`.
///
/// The fields are readable everywhere, but a value is made only by [`Format::new`], which checks
/// `1 ≤ bits ≤ 64` and `scale < bits` (`#[non_exhaustive]` keeps struct literals out of other
/// crates), so every method below may assume those ranges.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Format {
    /// Ring bitwidth l (shares live in Z_{2^l}).
    pub bits: u32,
    /// Fractional bits s.
    pub scale: u32,
}

impl Format {
    /// The format `bits`/`scale`, or [`FormatError`] when `bits` is not in `1..=64` or `scale`
    /// is not below `bits`.
    pub const fn new(bits: u32, scale: u32) -> Result<Format, FormatError> {
        if bits == 0 || bits > MAX_BITS {
            return Err(FormatError::Bits { bits });
        }
        if scale >= bits {
            return Err(FormatError::Scale { bits, scale });
        }
        Ok(Format { bits, scale })
    }

    /// `2^bits − 1`: the ring's reduction mask.
    pub const fn mask(self) -> u64 {
        if self.bits == 64 {
            u64::MAX
        } else {
            (1u64 << self.bits) - 1
        }
    }
    /// The smallest integer, −2^(bits−1).
    pub const fn min_int(self) -> i64 {
        if self.bits == 64 {
            i64::MIN
        } else {
            -(1i64 << (self.bits - 1))
        }
    }
    /// The largest integer, 2^(bits−1) − 1.
    pub const fn max_int(self) -> i64 {
        if self.bits == 64 {
            i64::MAX
        } else {
            (1i64 << (self.bits - 1)) - 1
        }
    }
    /// 2^scale as a float: X / `unit()` is the real value.
    pub fn unit(self) -> f64 {
        (self.scale as f64).exp2()
    }
    /// The real value of the integer `x`.
    pub fn to_f64(self, x: i64) -> f64 {
        x as f64 / self.unit()
    }
    /// round(v · 2^scale), ties up, saturated to the format; NaN gives 0.
    pub fn quantize(self, v: f64) -> i64 {
        self.quantize_checked(v).0
    }
    /// [`Format::quantize`] and whether the value was not representable: saturated, or NaN
    /// (which has no nearest value and gives 0), so a caller counting saturations counts it.
    pub fn quantize_checked(self, v: f64) -> (i64, bool) {
        let x = (v * self.unit() + 0.5).floor();
        if x.is_nan() {
            return (0, true);
        }
        let q = x.clamp(self.min_int() as f64, self.max_int() as f64);
        (q as i64, q != x)
    }
    /// `x` clamped to the format's range.
    pub fn clamp(self, x: i64) -> i64 {
        x.clamp(self.min_int(), self.max_int())
    }
    /// Two's-complement bit pattern of `x` on `bits` bits (a ring element).
    pub const fn encode(self, x: i64) -> u64 {
        (x as u64) & self.mask()
    }
    /// The ring element `v` (its low `bits` bits) read as a signed integer.
    pub const fn decode(self, v: u64) -> i64 {
        let sh = 64 - self.bits;
        ((v << sh) as i64) >> sh
    }
    /// `x` reduced to `bits` bits, two's complement (wraps, unlike [`Format::clamp`]).
    pub const fn wrap(self, x: i64) -> i64 {
        self.decode(x as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constructor_checks_ranges() {
        assert!(matches!(
            Format::new(0, 0),
            Err(FormatError::Bits { bits: 0 })
        ));
        assert!(matches!(
            Format::new(65, 3),
            Err(FormatError::Bits { bits: 65 })
        ));
        assert!(matches!(
            Format::new(16, 16),
            Err(FormatError::Scale {
                bits: 16,
                scale: 16
            })
        ));
        let f = Format::new(64, 63).expect("valid");
        assert_eq!((f.bits, f.scale), (64, 63));
        assert_eq!(
            (f.min_int(), f.max_int(), f.mask()),
            (i64::MIN, i64::MAX, u64::MAX)
        );
    }

    #[test]
    fn quantize_encode_decode_round_trip() {
        let f = Format::new(12, 8).expect("valid");
        assert_eq!((f.min_int(), f.max_int()), (-2048, 2047));
        assert_eq!(f.quantize(1.5), 384);
        assert_eq!(f.quantize(-0.001953125), 0); // −0.5 ULP rounds half up
        assert_eq!(f.quantize_checked(100.0), (2047, true));
        assert_eq!(f.quantize_checked(-100.0), (-2048, true));
        assert_eq!(f.quantize(f64::NAN), 0);
        assert_eq!(f.quantize_checked(f64::NAN), (0, true));
        assert_eq!(f.quantize_checked(f64::INFINITY), (2047, true));
        assert_eq!(f.quantize_checked(7.99609375), (2047, false)); // the largest value, exact
        for x in [-2048i64, -1, 0, 1, 2047] {
            assert_eq!(f.decode(f.encode(x)), x);
            assert!(f.encode(x) <= f.mask());
        }
        assert_eq!(f.wrap(2048), -2048);
        assert_eq!(f.clamp(5000), 2047);
        assert_eq!(f.to_f64(384), 1.5);
    }

    /// `wrap` is two's-complement reduction and `clamp` saturation, against their integer
    /// definitions ((x − min) mod 2^bits + min; min(max(x, min), max)) at every width 1..=63
    /// for values around and far outside the range.
    #[test]
    fn wrap_and_clamp_match_their_definitions() {
        for bits in 1..=63u32 {
            let f = Format::new(bits, 0).expect("valid");
            let (lo, hi) = (f.min_int() as i128, f.max_int() as i128);
            let m = 1i128 << bits;
            for x in [
                0i64,
                1,
                -1,
                f.max_int(),
                f.min_int(),
                f.max_int().wrapping_add(1),
                f.min_int().wrapping_sub(1),
                i64::MAX,
                i64::MIN,
                0x1234_5678_9abc_def0,
            ] {
                let xi = x as i128;
                let want = (xi - lo).rem_euclid(m) + lo;
                assert_eq!(f.wrap(x) as i128, want, "wrap {x} at {bits} bits");
                assert_eq!(f.clamp(x) as i128, xi.clamp(lo, hi), "clamp {x} at {bits}");
                assert!(f.wrap(x) >= f.min_int() && f.wrap(x) <= f.max_int());
            }
        }
    }
}
