//! Bit and ring helpers the GRU session's steps share: words from bits and back (the pooled
//! blocks' own, `secinfer_ss::blocks::pooled`), sign extension, and the ring Z_{2^32} the HE
//! layer shares values in.
use secinfer_ot::Prg;
pub(super) use secinfer_ss::blocks::pooled::{sum_chunks, word};

pub(super) fn sign_extend(v: u64, bits: usize) -> i64 {
    let sh = 64 - bits;
    ((v << sh) as i64) >> sh
}

/// Shares live mod 2^32 (the HE plaintext modulus).
pub(super) const RING: u64 = 0xffff_ffff;

pub(super) fn neg(v: u64) -> u64 {
    v.wrapping_neg() & RING
}

pub(super) fn ring_mask(bits: usize) -> u64 {
    secinfer_ss::ring::mask(bits.min(64) as u32)
}

#[cfg(test)]
pub(super) fn bit_vec(v: u64, w: usize) -> Vec<bool> {
    (0..w).map(|i| (v >> i) & 1 == 1).collect()
}

/// Per copy, the bits `range` of each copy's outputs (`per` outputs per copy).
pub(super) fn pick(out: &[bool], per: usize, range: std::ops::Range<usize>) -> Vec<bool> {
    out.chunks(per)
        .flat_map(|o| o[range.clone()].to_vec())
        .collect()
}

/// Fresh uniform values mod 2^32.
pub(super) fn uniform(prg: &mut Prg, len: usize) -> Vec<u64> {
    (0..len)
        .map(|_| prg.next_block().low_u64() & RING)
        .collect()
}
