//! Transposition of 128×128 bit matrices: the inner loop of OT extension.
//!
//! Row `i` of the input is a `u128` whose bit `k` is entry `(i, k)`; after the call row `k` holds
//! bit `i` = old entry `(i, k)`. Eklundh's recursive block swap: 7 levels, each swapping the
//! off-diagonal `j×j` sub-blocks of every `2j×2j` block with shifts and masks — safe Rust on
//! `u128` words, which the compiler lowers to pairs of 64-bit operations.

#[inline(always)]
fn level<const J: usize>(a: &mut [u128; 128], mask: u128) {
    let mut k = 0;
    while k < 128 {
        for i in k..k + J {
            let t = ((a[i] >> J) ^ a[i + J]) & mask;
            a[i] ^= t << J;
            a[i + J] ^= t;
        }
        k += 2 * J;
    }
}

/// In-place transpose of a 128×128 bit matrix.
pub fn transpose128(a: &mut [u128; 128]) {
    level::<64>(a, 0x0000_0000_0000_0000_FFFF_FFFF_FFFF_FFFF);
    level::<32>(a, 0x0000_0000_FFFF_FFFF_0000_0000_FFFF_FFFF);
    level::<16>(a, 0x0000_FFFF_0000_FFFF_0000_FFFF_0000_FFFF);
    level::<8>(a, 0x00FF_00FF_00FF_00FF_00FF_00FF_00FF_00FF);
    level::<4>(a, 0x0F0F_0F0F_0F0F_0F0F_0F0F_0F0F_0F0F_0F0F);
    level::<2>(a, 0x3333_3333_3333_3333_3333_3333_3333_3333);
    level::<1>(a, 0x5555_5555_5555_5555_5555_5555_5555_5555);
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn transpose_matches_naive() {
        let mut prg = crate::Prg::from_seed(crate::Block(3));
        let mut a = [0u128; 128];
        for r in a.iter_mut() {
            *r = prg.next_block().0;
        }
        let orig = a;
        transpose128(&mut a);
        for i in 0..128 {
            for k in 0..128 {
                assert_eq!((orig[i] >> k) & 1, (a[k] >> i) & 1, "entry ({i},{k})");
            }
        }
        transpose128(&mut a);
        assert_eq!(a, orig);
    }
}
