//! `ferret::spcot` — single-point COT from one GGM tree (as in Ferret, after Schoppmann et al.'s
//! puncturable PRF), semi-honest.
//!
//! The sender expands a random seed into a tree of depth `h` with the length-doubling PRG
//! `G(x) = (π_0(x) ⊕ x, π_1(x) ⊕ x)` (two fixed-key AES permutations, Davies–Meyer style: the
//! same PRG emp-ot and libOTe use for GGM trees). For each level `l` it sums the left children
//! (`K^l_0`) and the right children (`K^l_1`). The receiver, whose punctured point `α` has bits
//! `α_1 … α_h` (top level first), learns `K^l_{¬α_l}` for every level by a 1-of-2 OT and from these
//! rebuilds every leaf but `α`. The OTs are pooled random COTs whose random choice bit `r` simply
//! *defines* `α_l = ¬r`: no derandomisation message, so an SPCOT costs the sender `2h + 1` blocks
//! (the level sums masked with `tccr(K)` and `tccr(K ⊕ Δ)`, and `c = Δ ⊕ ⊕_i v_i`, from which the
//! receiver gets `w_α = v_α ⊕ Δ`) and the receiver nothing.
use secinfer_core::AesCipher;
use secinfer_core::Block;
use std::sync::OnceLock;

/// The two public PRG keys (any fixed constants; these are digits of e).
const GGM_KEYS: [u128; 2] = [
    0x2b7e_1516_28ae_d2a6_abf7_1588_09cf_4f3c,
    0xb7e1_5162_8aed_2a6a_bf71_5880_9cf4_f3c7,
];

fn ggm_prg() -> &'static [AesCipher; 2] {
    static P: OnceLock<[AesCipher; 2]> = OnceLock::new();
    P.get_or_init(|| GGM_KEYS.map(|k| AesCipher::new(Block(k))))
}

/// Parents expanded per batch (one pipelined AES call per key).
const BATCH: usize = 128;

/// Expands level `l − 1` (`buf[..np]`) into level `l` (`buf[..2·np]`) in place, from the end
/// backwards: children `[2a, 2b)` of parents `[a, b)` never land on a parent not yet read
/// (`2a ≥ a`), and the batch's own parents are copied out first.
fn expand_level(buf: &mut [Block], np: usize) {
    let [g0, g1] = ggm_prg();
    let mut p = [Block::ZERO; BATCH];
    let mut l = [Block::ZERO; BATCH];
    let mut r = [Block::ZERO; BATCH];
    let mut end = np;
    while end > 0 {
        let start = end.saturating_sub(BATCH);
        let c = end - start;
        p[..c].copy_from_slice(&buf[start..end]);
        l[..c].copy_from_slice(&p[..c]);
        r[..c].copy_from_slice(&p[..c]);
        g0.encrypt_many(&mut l[..c]);
        g1.encrypt_many(&mut r[..c]);
        for (j, ch) in buf[2 * start..2 * end].chunks_exact_mut(2).enumerate() {
            ch[0] = l[j] ^ p[j];
            ch[1] = r[j] ^ p[j];
        }
        end = start;
    }
}

/// XOR of the even (`[0]`) and odd (`[1]`) entries.
fn side_sums(level: &[Block]) -> [Block; 2] {
    let mut s = [Block::ZERO; 2];
    for pair in level.chunks_exact(2) {
        s[0] ^= pair[0];
        s[1] ^= pair[1];
    }
    s
}

/// Sender: expands `seed` into `leaves` (`2^h` blocks) and writes the level sums
/// `sums[l − 1] = [K^l_0, K^l_1]` for `l = 1..=h`.
pub(crate) fn ggm_send(seed: Block, leaves: &mut [Block], sums: &mut [[Block; 2]]) {
    let h = sums.len();
    debug_assert_eq!(leaves.len(), 1 << h);
    leaves[0] = seed;
    for (l, s) in sums.iter_mut().enumerate() {
        let np = 1usize << l;
        expand_level(leaves, np);
        *s = side_sums(&leaves[..2 * np]);
    }
}

/// Receiver: given `α`'s bits (top level first) and `got[l − 1] = K^l_{¬α_l}`, rebuilds every leaf
/// but `α` into `leaves` (`leaves[α]` is left zero) and returns `α`.
pub(crate) fn ggm_receive(alpha_bits: &[bool], got: &[Block], leaves: &mut [Block]) -> usize {
    let h = alpha_bits.len();
    debug_assert_eq!(leaves.len(), 1 << h);
    // The unknown node on the path is kept at zero; its (garbage) children are overwritten.
    leaves[0] = Block::ZERO;
    let mut path = 0usize;
    for (l, (&a, &k)) in alpha_bits.iter().zip(got).enumerate() {
        let np = 1usize << l;
        expand_level(leaves, np);
        let on_path = 2 * path + a as usize;
        let sib = on_path ^ 1;
        leaves[on_path] = Block::ZERO;
        leaves[sib] = Block::ZERO;
        // The sibling is the one node of its side the receiver cannot expand itself.
        let mut x = k;
        for node in leaves[sib & 1..2 * np].iter().step_by(2) {
            x ^= *node;
        }
        leaves[sib] = x;
        path = on_path;
    }
    path
}

#[cfg(test)]
mod tests {
    use super::*;
    use secinfer_core::Prg;

    #[test]
    fn receiver_rebuilds_every_leaf_but_alpha() {
        let mut prg = Prg::from_seed(Block(77));
        for h in [1usize, 2, 5, 9] {
            for _ in 0..8 {
                let seed = prg.next_block();
                let mut v = vec![Block::ZERO; 1 << h];
                let mut sums = vec![[Block::ZERO; 2]; h];
                ggm_send(seed, &mut v, &mut sums);
                let bits = prg.bits(h);
                let got: Vec<Block> = bits
                    .iter()
                    .zip(&sums)
                    .map(|(&a, s)| s[(!a) as usize])
                    .collect();
                let mut w = vec![Block::ONES; 1 << h];
                let alpha = ggm_receive(&bits, &got, &mut w);
                let want: usize = bits.iter().fold(0, |acc, &b| 2 * acc + b as usize);
                assert_eq!(alpha, want, "h {h}");
                for i in 0..1 << h {
                    if i == alpha {
                        assert_eq!(w[i], Block::ZERO);
                    } else {
                        assert_eq!(w[i], v[i], "h {h} leaf {i} (α {alpha})");
                    }
                }
                // Leaves are distinct (a broken PRG or expansion order would repeat them).
                let set: std::collections::HashSet<_> = v.iter().collect();
                assert_eq!(set.len(), 1 << h);
            }
        }
    }
}
