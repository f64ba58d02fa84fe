//! Bit-level packing of `bits`-bit values (1 ≤ bits ≤ 64) on the wire: value `i` occupies bits
//! `[i·bits, (i+1)·bits)` of a little-endian bit string of `ceil(n·bits / 8)` bytes.
use crate::error::OtError;
use secinfer_core::Block;
use secinfer_net::NetError;

/// A peer's message of exactly `n` blocks, as blocks (the bytes need no alignment); any other
/// length is refused before allocating.
pub(crate) fn blocks_of(bytes: &[u8], n: usize) -> Result<Vec<Block>, OtError> {
    if bytes.len() != 16 * n {
        return Err(NetError::UnexpectedLength {
            expected: 16 * n,
            got: bytes.len(),
        }
        .into());
    }
    Ok(bytes
        .chunks_exact(16)
        .map(|b| {
            let mut a = [0u8; 16];
            a.copy_from_slice(b);
            Block::from_bytes(a)
        })
        .collect())
}

/// `2^bits − 1` (all ones for 64).
#[inline]
pub(crate) fn mask(bits: u32) -> u64 {
    if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    }
}

pub(crate) fn check_bits(bits: u32) -> Result<(), OtError> {
    if (1..=64).contains(&bits) {
        Ok(())
    } else {
        Err(OtError::arg(format!("bit width {bits} is outside 1..=64")))
    }
}

/// Bytes that `n` packed `bits`-bit values take.
#[inline]
pub fn packed_len(n: usize, bits: u32) -> usize {
    // n·bits fits: n is bounded by memory, bits ≤ 64.
    (n.saturating_mul(bits as usize)).div_ceil(8)
}

/// Appends the low `bits` bits of every value to `out` (values must already be masked).
pub(crate) fn pack_into(vals: impl Iterator<Item = u64>, bits: u32, out: &mut Vec<u8>) {
    let mut acc: u128 = 0;
    let mut nacc: u32 = 0;
    for v in vals {
        acc |= (v as u128) << nacc;
        nacc += bits;
        if nacc >= 64 {
            out.extend_from_slice(&(acc as u64).to_le_bytes());
            acc >>= 64;
            nacc -= 64;
        }
    }
    let tail = nacc.div_ceil(8) as usize;
    out.extend_from_slice(&(acc as u64).to_le_bytes()[..tail]);
}

/// The values packed at `bits` bits each (the wire format of this module). A value that does
/// not fit in `bits` bits is an error.
pub fn pack_words(vals: &[u64], bits: u32) -> Result<Vec<u8>, OtError> {
    check_bits(bits)?;
    let m = mask(bits);
    if vals.iter().any(|&v| v & !m != 0) {
        return Err(OtError::arg(format!("a value does not fit in {bits} bits")));
    }
    let mut out = Vec::with_capacity(packed_len(vals.len(), bits));
    pack_into(vals.iter().copied(), bits, &mut out);
    Ok(out)
}

/// `n` values of `bits` bits from a frame of exactly [`packed_len`]`(n, bits)` bytes whose
/// padding bits are zero (a peer's frame: anything else is an error).
pub fn unpack_words(bytes: &[u8], n: usize, bits: u32) -> Result<Vec<u64>, OtError> {
    check_bits(bits)?;
    if bytes.len() != packed_len(n, bits) {
        return Err(OtError::malformed(format!(
            "packed frame of {} bytes, expected {}",
            bytes.len(),
            packed_len(n, bits)
        )));
    }
    let used = n * bits as usize;
    if !used.is_multiple_of(8) && bytes.last().is_some_and(|&b| b >> (used % 8) != 0) {
        return Err(OtError::malformed("packed frame has padding bits set"));
    }
    let mut u = Unpacker::new(bytes, bits);
    Ok((0..n).map(|_| u.next_value()).collect())
}

/// A reader of packed values from a frame whose length the caller has checked.
pub(crate) struct Unpacker<'a> {
    bytes: &'a [u8],
    pos: usize,
    acc: u128,
    nacc: u32,
    bits: u32,
    mask: u64,
}

impl<'a> Unpacker<'a> {
    pub(crate) fn new(bytes: &'a [u8], bits: u32) -> Self {
        Unpacker {
            bytes,
            pos: 0,
            acc: 0,
            nacc: 0,
            bits,
            mask: mask(bits),
        }
    }
    /// The next value; zero past the end (callers check the frame length first).
    #[inline]
    pub(crate) fn next_value(&mut self) -> u64 {
        while self.nacc < self.bits {
            if self.pos + 8 <= self.bytes.len() && self.nacc <= 64 {
                let mut w = [0u8; 8];
                w.copy_from_slice(&self.bytes[self.pos..self.pos + 8]);
                self.acc |= (u64::from_le_bytes(w) as u128) << self.nacc;
                self.pos += 8;
                self.nacc += 64;
            } else if let Some(&b) = self.bytes.get(self.pos) {
                self.acc |= (b as u128) << self.nacc;
                self.pos += 1;
                self.nacc += 8;
            } else {
                self.nacc = self.bits;
            }
        }
        let v = (self.acc as u64) & self.mask;
        self.acc >>= self.bits;
        self.nacc -= self.bits;
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn pack_roundtrip_all_widths() {
        let mut prg = crate::Prg::from_seed(crate::Block(7));
        for bits in 1..=64u32 {
            for n in [0usize, 1, 7, 64, 333] {
                let vals: Vec<u64> = (0..n)
                    .map(|_| rand_core::RngCore::next_u64(&mut prg) & mask(bits))
                    .collect();
                let mut buf = Vec::new();
                pack_into(vals.iter().copied(), bits, &mut buf);
                assert_eq!(buf.len(), packed_len(n, bits));
                let mut u = Unpacker::new(&buf, bits);
                let back: Vec<u64> = (0..n).map(|_| u.next_value()).collect();
                assert_eq!(back, vals, "bits {bits} n {n}");
                assert_eq!(pack_words(&vals, bits).unwrap(), buf);
                assert_eq!(unpack_words(&buf, n, bits).unwrap(), vals);
                // one byte short or long, or a padding bit set, is refused
                if !buf.is_empty() {
                    assert!(unpack_words(&buf[1..], n, bits).is_err());
                }
                let mut long = buf.clone();
                long.push(0);
                assert!(unpack_words(&long, n, bits).is_err());
                if !(n * bits as usize).is_multiple_of(8) {
                    let mut bad = buf.clone();
                    *bad.last_mut().unwrap() |= 0x80;
                    assert!(unpack_words(&bad, n, bits).is_err());
                }
            }
        }
    }
}
