//! The 128-bit [`Block`]: OT messages, garbled-circuit labels, PRG output.
use crate::aes::AesCipher;
use bytemuck::{Pod, Zeroable};
use rand_core::{OsRng, RngCore};
use std::ops::{BitAnd, BitAndAssign, BitXor, BitXorAssign, Not};
use std::sync::OnceLock;

/// 128 bits. Layout is a little-endian `u128`, so slices of blocks go on the wire as-is.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash, Pod, Zeroable)]
#[repr(transparent)]
pub struct Block(pub u128);

impl Block {
    pub const ZERO: Block = Block(0);
    pub const ONES: Block = Block(u128::MAX);

    #[inline]
    pub fn lsb(self) -> bool {
        self.0 & 1 == 1
    }
    /// `self` if `bit`, else zero: a branch-free select.
    #[inline]
    pub fn and_bit(self, bit: bool) -> Block {
        Block(self.0 & (bit as u128).wrapping_neg())
    }
    #[inline]
    pub fn to_bytes(self) -> [u8; 16] {
        self.0.to_le_bytes()
    }
    #[inline]
    pub fn from_bytes(b: [u8; 16]) -> Block {
        Block(u128::from_le_bytes(b))
    }
    /// Low 64 bits.
    #[inline]
    pub fn low_u64(self) -> u64 {
        self.0 as u64
    }
    /// Doubling in GF(2^128) modulo x^128 + x^7 + x^2 + x + 1 (used to derive tweaks).
    #[inline]
    pub fn gf_double(self) -> Block {
        let carry = self.0 >> 127;
        Block((self.0 << 1) ^ (carry * 0x87))
    }
}

impl Block {
    /// 32 bits of a pseudorandom function of the value under a key drawn once per process from
    /// the OS: equal blocks have equal fingerprints within a run, and a fingerprint tells
    /// nothing about the value (a truncated hash of a low-entropy secret could be inverted by
    /// trying candidates; a keyed one cannot without the key, which never leaves the process).
    pub fn fingerprint(self) -> u32 {
        static KEY: OnceLock<AesCipher> = OnceLock::new();
        let cipher = KEY.get_or_init(|| {
            let mut k = [0u8; 16];
            OsRng.fill_bytes(&mut k);
            AesCipher::new(Block::from_bytes(k))
        });
        cipher.encrypt(self).0 as u32
    }
}

// Debug prints only a fingerprint: blocks are often secret (labels, Δ, keys, seeds), and test
// failures still need something to compare.
impl std::fmt::Debug for Block {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Block(#{:08x})", self.fingerprint())
    }
}

impl From<u128> for Block {
    fn from(v: u128) -> Self {
        Block(v)
    }
}
impl From<Block> for u128 {
    fn from(b: Block) -> Self {
        b.0
    }
}

impl BitXor for Block {
    type Output = Block;
    #[inline]
    fn bitxor(self, rhs: Block) -> Block {
        Block(self.0 ^ rhs.0)
    }
}
impl BitXorAssign for Block {
    #[inline]
    fn bitxor_assign(&mut self, rhs: Block) {
        self.0 ^= rhs.0;
    }
}
impl BitAnd for Block {
    type Output = Block;
    #[inline]
    fn bitand(self, rhs: Block) -> Block {
        Block(self.0 & rhs.0)
    }
}
impl BitAndAssign for Block {
    #[inline]
    fn bitand_assign(&mut self, rhs: Block) {
        self.0 &= rhs.0;
    }
}
impl Not for Block {
    type Output = Block;
    #[inline]
    fn not(self) -> Block {
        Block(!self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_prints_a_fingerprint_not_the_value() {
        let secret = Block(0x0123_4567_89ab_cdef_fedc_ba98_7654_3210);
        let shown = format!("{secret:?}");
        // Neither the whole value nor any 8-hex-digit piece of it appears.
        let hex = format!("{:032x}", secret.0);
        for i in 0..=hex.len() - 8 {
            assert!(
                !shown.contains(&hex[i..i + 8]),
                "{shown} leaks {}",
                &hex[i..i + 8]
            );
        }
        assert!(shown.len() < 20, "{shown}");
        // Stable within a process, and distinct values almost surely differ.
        assert_eq!(shown, format!("{:?}", Block(secret.0)));
        assert_ne!(secret.fingerprint(), Block(secret.0 ^ 1).fingerprint());
    }
}
