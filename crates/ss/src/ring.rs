//! Arithmetic in Z_{2^l} (l ≤ 64), fixed-point encodings, and the share types.
use crate::error::{invalid, Result};

/// Bit mask of the low `bits` bits (`bits` in 1..=64).
#[inline]
pub fn mask(bits: u32) -> u64 {
    if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    }
}

/// Reads `v` (an element of Z_{2^bits}) as a two's-complement signed integer.
#[inline]
pub fn to_signed(v: u64, bits: u32) -> i64 {
    let v = v & mask(bits);
    if bits >= 64 {
        v as i64
    } else if v >> (bits - 1) & 1 == 1 {
        (v as i64).wrapping_sub(1i64 << bits)
    } else {
        v as i64
    }
}

/// Maps a signed integer into Z_{2^bits}.
#[inline]
pub fn from_signed(v: i64, bits: u32) -> u64 {
    (v as u64) & mask(bits)
}

/// Most significant bit of `v` in Z_{2^bits}.
#[inline]
pub fn msb(v: u64, bits: u32) -> u8 {
    ((v >> (bits - 1)) & 1) as u8
}

/// Encodes a real as fixed point (round to nearest) in Z_{2^bits} at `scale`.
pub fn encode(x: f64, bits: u32, scale: u32) -> u64 {
    from_signed((x * (scale as f64).exp2()).round() as i64, bits)
}

/// Decodes a fixed-point ring element as a real.
pub fn decode(v: u64, bits: u32, scale: u32) -> f64 {
    to_signed(v, bits) as f64 / (scale as f64).exp2()
}

/// Checks a bitwidth argument.
pub fn check_bits(bits: u32) -> Result<()> {
    if bits == 0 || bits > 64 {
        return Err(invalid(format!("bitwidth {bits} outside 1..=64")));
    }
    Ok(())
}

/// The fixed-point format of a tensor (x ≈ X / 2^scale in Z_{2^bits}): `secinfer-core`'s
/// validated [`Format`].
pub use secinfer_core::Format;
/// The name this crate's format had before it moved to `secinfer-core`.
#[doc(hidden)]
pub use secinfer_core::Format as Fixed;

/// A valid format from constants, checked at compile time where used in a `const` item (an
/// invalid one fails the build).
pub(crate) const fn const_format(bits: u32, scale: u32) -> Format {
    match Format::new(bits, scale) {
        Ok(f) => f,
        Err(_) => panic!("invalid constant fixed-point format"),
    }
}

/// One party's additive share of a vector over Z_{2^bits}, with its fixed-point scale.
///
/// No `Debug`: it is secret.
#[derive(Clone)]
pub struct Share {
    pub bits: u32,
    pub scale: u32,
    pub v: Vec<u64>,
}

impl Share {
    pub fn new(v: Vec<u64>, bits: u32, scale: u32) -> Self {
        let m = mask(bits);
        Share {
            bits,
            scale,
            v: v.into_iter().map(|x| x & m).collect(),
        }
    }
    pub fn len(&self) -> usize {
        self.v.len()
    }
    pub fn is_empty(&self) -> bool {
        self.v.is_empty()
    }
    /// The share's format, or an error when its bitwidth and scale are not a valid [`Format`].
    pub fn fixed(&self) -> Result<Format> {
        Ok(Format::new(self.bits, self.scale)?)
    }
    fn same(&self, o: &Share) -> Result<()> {
        if self.bits != o.bits || self.scale != o.scale || self.v.len() != o.v.len() {
            return Err(invalid("shares differ in bitwidth, scale or length"));
        }
        Ok(())
    }
    /// Local addition.
    pub fn add(&self, o: &Share) -> Result<Share> {
        self.same(o)?;
        let m = mask(self.bits);
        let v = self
            .v
            .iter()
            .zip(&o.v)
            .map(|(a, b)| a.wrapping_add(*b) & m)
            .collect();
        Ok(Share { v, ..*self })
    }
    /// Local subtraction.
    pub fn sub(&self, o: &Share) -> Result<Share> {
        self.same(o)?;
        let m = mask(self.bits);
        let v = self
            .v
            .iter()
            .zip(&o.v)
            .map(|(a, b)| a.wrapping_sub(*b) & m)
            .collect();
        Ok(Share { v, ..*self })
    }
    /// Local negation.
    pub fn neg(&self) -> Share {
        let m = mask(self.bits);
        Share {
            v: self.v.iter().map(|a| a.wrapping_neg() & m).collect(),
            ..*self
        }
    }
    /// Adds a public ring constant (only party P0 adds it, so the sum gains it once).
    pub fn add_const(&self, c: u64, is_p0: bool) -> Share {
        let m = mask(self.bits);
        if !is_p0 {
            return self.clone();
        }
        Share {
            v: self.v.iter().map(|a| a.wrapping_add(c) & m).collect(),
            ..*self
        }
    }
    /// Multiplies by a public integer (no rescaling).
    pub fn mul_const(&self, c: u64) -> Share {
        let m = mask(self.bits);
        Share {
            v: self.v.iter().map(|a| a.wrapping_mul(c) & m).collect(),
            ..*self
        }
    }
    /// Reduces to a smaller ring (free: the low bits of shares share the low bits).
    pub fn reduce(&self, bits: u32) -> Result<Share> {
        check_bits(bits)?;
        if bits > self.bits {
            return Err(invalid(
                "reduce cannot widen a ring; use an extension protocol",
            ));
        }
        Ok(Share::new(self.v.clone(), bits, self.scale))
    }
}

/// Splits plaintext ring elements into two additive shares (the dealer-free way a party shares
/// its own input: it keeps `x - r` and sends `r`).
pub fn share_local(x: &[u64], bits: u32, prg: &mut secinfer_core::Prg) -> (Vec<u64>, Vec<u64>) {
    use rand_core::RngCore;
    let m = mask(bits);
    let r: Vec<u64> = (0..x.len()).map(|_| prg.next_u64() & m).collect();
    let x0 = x
        .iter()
        .zip(&r)
        .map(|(a, b)| a.wrapping_sub(*b) & m)
        .collect();
    (x0, r)
}
