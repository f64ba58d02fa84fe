//! Transposition of 128×128 bit matrices: the inner loop of OT extension.
//!
//! Row `i` of the input is a `u128` whose bit `k` is entry `(i, k)`; after the call row `k` holds
//! bit `i` = old entry `(i, k)`. Eklundh's recursive block swap: 7 levels, each swapping the
//! off-diagonal `j×j` sub-blocks of every `2j×2j` block with shifts and masks — safe Rust on
//! `u128` words, which the compiler lowers to pairs of 64-bit operations.

/// One level `J ≤ 32` of the swap: with these masks no bit crosses a 64-bit lane, so the two
/// lanes of a row are independent and the loop compiles to SSE2 vector operations.
#[inline(always)]
fn level<const J: u32>(a: &mut [[u64; 2]; 128], mask: u64) {
    let j = J as usize;
    let mut k = 0;
    while k < 128 {
        for i in k..k + j {
            let (x, y) = (a[i], a[i + j]);
            let t0 = ((x[0] >> J) ^ y[0]) & mask;
            let t1 = ((x[1] >> J) ^ y[1]) & mask;
            a[i] = [x[0] ^ (t0 << J), x[1] ^ (t1 << J)];
            a[i + j] = [y[0] ^ t0, y[1] ^ t1];
        }
        k += 2 * j;
    }
}

/// In-place transpose of a 128×128 bit matrix held as 64-bit lanes (`a[i] = [low, high]` of row
/// `i`).
pub fn transpose128_lanes(a: &mut [[u64; 2]; 128]) {
    // J = 64: swap the high lane of row i with the low lane of row i + 64.
    for i in 0..64 {
        let t = a[i][1];
        a[i][1] = a[i + 64][0];
        a[i + 64][0] = t;
    }
    level::<32>(a, 0x0000_0000_FFFF_FFFF);
    level::<16>(a, 0x0000_FFFF_0000_FFFF);
    level::<8>(a, 0x00FF_00FF_00FF_00FF);
    level::<4>(a, 0x0F0F_0F0F_0F0F_0F0F);
    level::<2>(a, 0x3333_3333_3333_3333);
    level::<1>(a, 0x5555_5555_5555_5555);
}

/// In-place transpose of a 128×128 bit matrix.
pub fn transpose128(a: &mut [u128; 128]) {
    let mut l = [[0u64; 2]; 128];
    for (l, x) in l.iter_mut().zip(a.iter()) {
        *l = [*x as u64, (*x >> 64) as u64];
    }
    transpose128_lanes(&mut l);
    for (x, l) in a.iter_mut().zip(l.iter()) {
        *x = l[0] as u128 | (l[1] as u128) << 64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    #[allow(clippy::needless_range_loop)]
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
