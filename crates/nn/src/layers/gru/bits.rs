//! Bit and ring helpers the GRU session's blocks share: words from bits and back, sign
//! extension, and the ring Z_{2^32} the HE layer shares values in.
use secinfer_ot::Prg;

pub(super) fn bits_of(out: &mut Vec<bool>, v: u64, w: usize) {
    out.extend((0..w).map(|i| (v >> i) & 1 == 1));
}

pub(super) fn word(bits: &[bool]) -> u64 {
    bits.iter()
        .enumerate()
        .fold(0u64, |a, (i, &b)| a | ((b as u64) << i))
}

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
    if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    }
}

#[cfg(test)]
pub(super) fn bit_vec(v: u64, w: usize) -> Vec<bool> {
    (0..w).map(|i| (v >> i) & 1 == 1).collect()
}

/// Sums of `l` consecutive terms mod `pm` + 1 (per word, per element).
pub(super) fn sum_chunks(terms: &[u64], l: usize, pm: u64) -> Vec<u64> {
    terms
        .chunks(l)
        .map(|t| t.iter().fold(0u64, |a, x| a.wrapping_add(*x)) & pm)
        .collect()
}

/// Per copy, the bits `range` of each copy's outputs (`per` outputs per copy).
pub(super) fn pick(out: &[bool], per: usize, range: std::ops::Range<usize>) -> Vec<bool> {
    out.chunks(per)
        .flat_map(|o| o[range.clone()].to_vec())
        .collect()
}

pub(super) fn set_bit(buf: &mut [u8], i: usize, v: bool) {
    buf[i / 8] |= (v as u8) << (i % 8);
}

pub(super) fn get_bit(buf: &[u8], i: usize) -> bool {
    (buf[i / 8] >> (i % 8)) & 1 == 1
}

/// Fresh uniform values mod 2^32.
pub(super) fn uniform(prg: &mut Prg, len: usize) -> Vec<u64> {
    (0..len)
        .map(|_| prg.next_block().low_u64() & RING)
        .collect()
}
