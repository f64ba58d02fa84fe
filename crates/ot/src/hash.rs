//! Fixed-key AES and the correlation-robust hashes built on it (Guo–Katz–Wang–Yu, S&P 2020);
//! the cipher itself is `secinfer_core::AesCipher`.
use secinfer_core::{AesCipher, Block};
use std::sync::OnceLock;

/// Blocks handed to the cipher per call (a multiple of AES-NI's 8-way pipeline, L1-sized).
const CALL: usize = secinfer_core::AES_CALL_BLOCKS;

/// A fixed-key AES permutation π and the hashes built from it (Guo–Katz–Wang–Yu, S&P 2020).
pub struct FixedKeyAes(AesCipher);

/// The fixed key: any public constant works; these are the first digits of π.
const FIXED_KEY: u128 = 0x243f6a88_85a308d3_13198a2e_03707344;

/// The process-wide fixed-key AES instance.
pub fn fixed_key_aes() -> &'static FixedKeyAes {
    static FK: OnceLock<FixedKeyAes> = OnceLock::new();
    FK.get_or_init(|| FixedKeyAes(AesCipher::new(Block(FIXED_KEY))))
}

/// σ(x) = (x_hi ⊕ x_lo) ‖ x_hi: the linear orthomorphism that makes π(σ(x)) ⊕ σ(x) correlation robust.
#[inline]
fn sigma(x: Block) -> Block {
    let hi = x.0 >> 64;
    let lo = x.0 & (u64::MAX as u128);
    Block(((hi ^ lo) << 64) | hi)
}

impl FixedKeyAes {
    /// π(x).
    #[inline]
    pub fn permute(&self, x: Block) -> Block {
        self.0.encrypt(x)
    }

    /// π applied to every block in place (AES-NI pipelined, 8 blocks at a time).
    #[inline]
    pub fn permute_many(&self, xs: &mut [Block]) {
        self.0.encrypt_many(xs);
    }

    /// Circular correlation-robust hash H(x) = π(σ(x)) ⊕ σ(x).
    #[inline]
    pub fn cr_hash(&self, x: Block) -> Block {
        let s = sigma(x);
        self.0.encrypt(s) ^ s
    }

    /// In-place [`FixedKeyAes::cr_hash`] of many blocks (no allocation).
    pub fn cr_hash_many(&self, xs: &mut [Block]) {
        let mut sig = [Block::ZERO; CALL];
        for chunk in xs.chunks_mut(CALL) {
            for (x, s) in chunk.iter_mut().zip(sig.iter_mut()) {
                *x = sigma(*x);
                *s = *x;
            }
            self.0.encrypt_many(chunk);
            for (x, s) in chunk.iter_mut().zip(sig.iter()) {
                *x ^= *s;
            }
        }
    }

    /// Tweakable circular correlation-robust hash H(i, x) = π(π(x) ⊕ i) ⊕ π(x), as used by
    /// half-gates garbling and OT extension (the tweak is the gate or OT index).
    #[inline]
    pub fn tccr(&self, tweak: Block, x: Block) -> Block {
        let px = self.0.encrypt(x);
        self.0.encrypt(px ^ tweak) ^ px
    }

    /// In-place [`FixedKeyAes::tccr`] of `xs[j]` with tweak `tweaks[j]`; lengths must match.
    /// No allocation: 64 blocks at a time through the pipelined cipher.
    pub fn tccr_many(&self, tweaks: &[Block], xs: &mut [Block]) {
        assert_eq!(tweaks.len(), xs.len(), "tccr_many: one tweak per block");
        let mut px = [Block::ZERO; CALL];
        for (chunk, tw) in xs.chunks_mut(CALL).zip(tweaks.chunks(CALL)) {
            self.0.encrypt_many(chunk);
            for ((x, p), t) in chunk.iter_mut().zip(px.iter_mut()).zip(tw) {
                *p = *x;
                *x ^= *t;
            }
            self.0.encrypt_many(chunk);
            for (x, p) in chunk.iter_mut().zip(px.iter()) {
                *x ^= *p;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use secinfer_core::Prg;

    #[test]
    fn batched_hashes_match_single_ones() {
        let fk = fixed_key_aes();
        let mut prg = Prg::from_seed(Block(9));
        let xs = prg.blocks(200);
        let tw = prg.blocks(200);
        let mut a = xs.clone();
        fk.tccr_many(&tw, &mut a);
        let mut b = xs.clone();
        fk.cr_hash_many(&mut b);
        for j in 0..200 {
            assert_eq!(a[j], fk.tccr(tw[j], xs[j]));
            assert_eq!(b[j], fk.cr_hash(xs[j]));
        }
    }
}
