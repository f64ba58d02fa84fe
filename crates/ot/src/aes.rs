//! AES-128 (AES-NI through the `aes` crate): the CTR-mode [`Prg`] and the fixed-key
//! permutation behind the correlation-robust hashes.
use crate::block::Block;
use aes::cipher::{generic_array::GenericArray, BlockEncrypt, KeyInit};
use aes::Aes128;
use rand_core::{CryptoRng, OsRng, RngCore};
use std::sync::OnceLock;

/// Blocks buffered per PRG refill.
const BATCH: usize = 8;
/// Blocks handed to the cipher per call: a multiple of AES-NI's 8-way pipeline, large enough
/// that the per-call dispatch is amortised, small enough to stay in L1.
const CALL: usize = 64;

/// An AES-128 key schedule that works on [`Block`]s.
#[derive(Clone)]
pub struct AesCipher(Aes128);

impl AesCipher {
    pub fn new(key: Block) -> Self {
        AesCipher(Aes128::new(&GenericArray::from(key.to_bytes())))
    }

    #[inline]
    pub fn encrypt(&self, b: Block) -> Block {
        let mut g = GenericArray::from(b.to_bytes());
        self.0.encrypt_block(&mut g);
        Block::from_bytes(g.into())
    }

    /// Encrypts every block in place (64 per cipher call, 8-way pipelined).
    pub fn encrypt_many(&self, blocks: &mut [Block]) {
        let mut buf = [GenericArray::from([0u8; 16]); CALL];
        for chunk in blocks.chunks_mut(CALL) {
            for (g, b) in buf.iter_mut().zip(chunk.iter()) {
                *g = GenericArray::from(b.to_bytes());
            }
            self.0.encrypt_blocks(&mut buf[..chunk.len()]);
            for (g, b) in buf.iter().zip(chunk.iter_mut()) {
                *b = Block::from_bytes((*g).into());
            }
        }
    }

    /// Counter mode: `out[j] = E(start + j)`; returns the next counter.
    pub fn ctr_fill(&self, start: u128, out: &mut [Block]) -> u128 {
        let mut buf = [GenericArray::from([0u8; 16]); CALL];
        let mut ctr = start;
        for chunk in out.chunks_mut(CALL) {
            for g in buf.iter_mut().take(chunk.len()) {
                *g = GenericArray::from(ctr.to_le_bytes());
                ctr = ctr.wrapping_add(1);
            }
            self.0.encrypt_blocks(&mut buf[..chunk.len()]);
            for (g, b) in buf.iter().zip(chunk.iter_mut()) {
                *b = Block::from_bytes((*g).into());
            }
        }
        ctr
    }
}

/// AES-128 in counter mode: the fast PRG that expands OS-CSPRNG seeds.
///
/// Not `Debug` and not `Clone`: it holds a secret key, and cloning a PRG repeats its stream.
pub struct Prg {
    cipher: AesCipher,
    counter: u128,
    buf: [Block; BATCH],
    used: usize,
}

impl Prg {
    /// A PRG seeded from the operating system's CSPRNG.
    pub fn new() -> Self {
        let mut seed = [0u8; 16];
        OsRng.fill_bytes(&mut seed);
        Prg::from_seed(Block::from_bytes(seed))
    }

    /// A PRG expanding `seed` (deterministic: for protocol-derived seeds and tests).
    pub fn from_seed(seed: Block) -> Self {
        Prg {
            cipher: AesCipher::new(seed),
            counter: 0,
            buf: [Block::ZERO; BATCH],
            used: BATCH,
        }
    }

    /// Fills `out` with pseudorandom blocks (bulk path: no per-block buffering).
    pub fn fill_blocks(&mut self, out: &mut [Block]) {
        self.counter = self.cipher.ctr_fill(self.counter, out);
    }

    /// `n` pseudorandom blocks.
    pub fn blocks(&mut self, n: usize) -> Vec<Block> {
        let mut v = vec![Block::ZERO; n];
        self.fill_blocks(&mut v);
        v
    }

    #[inline]
    pub fn next_block(&mut self) -> Block {
        if self.used == BATCH {
            let mut buf = [Block::ZERO; BATCH];
            self.fill_blocks(&mut buf);
            self.buf = buf;
            self.used = 0;
        }
        let b = self.buf[self.used];
        self.used += 1;
        b
    }

    /// `n` uniformly random bits.
    pub fn bits(&mut self, n: usize) -> Vec<bool> {
        let mut out = Vec::with_capacity(n);
        while out.len() < n {
            let b = self.next_block().0;
            let take = (n - out.len()).min(128);
            out.extend((0..take).map(|i| (b >> i) & 1 == 1));
        }
        out
    }

    /// Uniform value in `[0, bound)` by rejection sampling (no modulo bias).
    pub fn below(&mut self, bound: u64) -> u64 {
        assert!(bound > 0, "Prg::below needs a positive bound");
        let zone = u64::MAX - (u64::MAX % bound + 1) % bound;
        loop {
            let v = self.next_u64();
            if v <= zone {
                return v % bound;
            }
        }
    }
}

impl Default for Prg {
    fn default() -> Self {
        Prg::new()
    }
}

impl RngCore for Prg {
    fn next_u32(&mut self) -> u32 {
        self.next_block().0 as u32
    }
    fn next_u64(&mut self) -> u64 {
        self.next_block().0 as u64
    }
    fn fill_bytes(&mut self, dest: &mut [u8]) {
        for chunk in dest.chunks_mut(16) {
            let b = self.next_block().to_bytes();
            chunk.copy_from_slice(&b[..chunk.len()]);
        }
    }
    fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), rand_core::Error> {
        self.fill_bytes(dest);
        Ok(())
    }
}

impl CryptoRng for Prg {}

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
        // CTR output is the cipher on consecutive counters, across refills and bulk calls.
        let mut p = Prg::from_seed(Block(5));
        let mut v = vec![Block::ZERO; 100];
        p.fill_blocks(&mut v);
        let w = p.next_block();
        let c = AesCipher::new(Block(5));
        for (j, x) in v.iter().enumerate() {
            assert_eq!(*x, c.encrypt(Block(j as u128)));
        }
        assert_eq!(w, c.encrypt(Block(100)));
    }
}
