//! AES-128 (AES-NI through the `aes` crate, VAES by hand where the CPU has it): the cipher
//! [`AesCipher`] on [`Block`]s and the CTR-mode [`Prg`], the one PRG of the workspace.
use crate::block::Block;
use aes::cipher::{generic_array::GenericArray, BlockEncrypt, KeyInit};
use aes::Aes128;
use rand_core::{CryptoRng, OsRng, RngCore};

/// Blocks buffered per PRG refill.
const BATCH: usize = 8;
/// Blocks handed to the cipher per call by the bulk paths here and in the hashes of `secinfer-ot`: a multiple of AES-NI's 8-way pipeline, large enough
/// that the per-call dispatch is amortised, small enough to stay in L1.
pub const AES_CALL_BLOCKS: usize = 64;
const CALL: usize = AES_CALL_BLOCKS;

/// An AES-128 key schedule that works on [`Block`]s.
///
/// Bulk encryption ([`AesCipher::encrypt_many`], [`AesCipher::ctr_fill`]) runs two blocks per
/// instruction with VAES when the CPU has it (`vaes::encrypt`); the `aes` crate's AES-NI path
/// (one block per instruction, 8-way pipelined) otherwise and for single blocks.
#[derive(Clone)]
pub struct AesCipher {
    aes: Aes128,
    /// The round keys for the VAES path, when the CPU has VAES, AES-NI and AVX2.
    #[cfg(all(target_arch = "x86_64", secinfer_vaes))]
    wide: Option<[Block; 11]>,
}

impl AesCipher {
    pub fn new(key: Block) -> Self {
        AesCipher {
            aes: Aes128::new(&GenericArray::from(key.to_bytes())),
            #[cfg(all(target_arch = "x86_64", secinfer_vaes))]
            wide: vaes::round_keys(key),
        }
    }

    #[inline]
    pub fn encrypt(&self, b: Block) -> Block {
        let mut g = GenericArray::from(b.to_bytes());
        self.aes.encrypt_block(&mut g);
        Block::from_bytes(g.into())
    }

    /// Encrypts every block in place (VAES: 16 blocks in flight; else 64 per `aes` call,
    /// 8-way pipelined).
    pub fn encrypt_many(&self, blocks: &mut [Block]) {
        #[cfg(all(target_arch = "x86_64", secinfer_vaes))]
        if let Some(rk) = &self.wide {
            vaes::encrypt(rk, blocks);
            return;
        }
        self.encrypt_many_aesni(blocks);
    }

    /// The `aes` crate's path of [`AesCipher::encrypt_many`] (also the reference of the tests).
    fn encrypt_many_aesni(&self, blocks: &mut [Block]) {
        let mut buf = [GenericArray::from([0u8; 16]); CALL];
        for chunk in blocks.chunks_mut(CALL) {
            for (g, b) in buf.iter_mut().zip(chunk.iter()) {
                *g = GenericArray::from(b.to_bytes());
            }
            self.aes.encrypt_blocks(&mut buf[..chunk.len()]);
            for (g, b) in buf.iter().zip(chunk.iter_mut()) {
                *b = Block::from_bytes((*g).into());
            }
        }
    }

    /// Counter mode: `out[j] = E(start + j)`; returns the next counter.
    pub fn ctr_fill(&self, start: u128, out: &mut [Block]) -> u128 {
        #[cfg(all(target_arch = "x86_64", secinfer_vaes))]
        if let Some(rk) = &self.wide {
            let end = start.wrapping_add(out.len() as u128);
            // Counters made in registers while the low 64 bits do not wrap (always, for the
            // PRGs here: they start at 0); otherwise written out, then encrypted in place.
            if (start as u64).checked_add(out.len() as u64).is_some() {
                vaes::ctr(rk, start, out);
            } else {
                let mut ctr = start;
                for b in out.iter_mut() {
                    *b = Block(ctr);
                    ctr = ctr.wrapping_add(1);
                }
                vaes::encrypt(rk, out);
            }
            return end;
        }
        let mut buf = [GenericArray::from([0u8; 16]); CALL];
        let mut ctr = start;
        for chunk in out.chunks_mut(CALL) {
            for g in buf.iter_mut().take(chunk.len()) {
                *g = GenericArray::from(ctr.to_le_bytes());
                ctr = ctr.wrapping_add(1);
            }
            self.aes.encrypt_blocks(&mut buf[..chunk.len()]);
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

    /// The blocks [`fill_blocks`](Self::fill_blocks) would give after skipping `offset` blocks,
    /// without moving the stream (random access for parallel consumers; pair with
    /// [`skip`](Self::skip) once every part is read).
    pub fn fill_blocks_at(&self, offset: u64, out: &mut [Block]) {
        debug_assert_eq!(self.used, BATCH, "a bulk PRG never buffers single blocks");
        self.cipher
            .ctr_fill(self.counter.wrapping_add(offset as u128), out);
    }

    /// Moves the stream on by `n` blocks (see [`fill_blocks_at`](Self::fill_blocks_at)).
    pub fn skip(&mut self, n: u64) {
        self.counter = self.counter.wrapping_add(n as u128);
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

/// AES-128 encryption with VAES (x86-64): two blocks per `vaesenc` on 256-bit registers, 16
/// blocks in flight so the AES units stay busy (latency 4, two per cycle on Zen 3). The `aes`
/// crate (0.8) uses 128-bit AES-NI only, which caps the fixed-key hashes of the garbler, the
/// evaluator and the OT extensions at half the CPU's AES throughput. Compiled with Rust ≥ 1.89
/// only (`secinfer_vaes`, set by build.rs: the `vaes` feature and intrinsics are stable since).
#[cfg(all(target_arch = "x86_64", secinfer_vaes))]
#[allow(unsafe_code)]
mod vaes {
    use super::Block;
    use std::arch::x86_64::*;

    /// The expanded key, if the CPU can run [`encrypt`].
    pub(super) fn round_keys(key: Block) -> Option<[Block; 11]> {
        if std::is_x86_feature_detected!("aes")
            && std::is_x86_feature_detected!("avx2")
            && std::is_x86_feature_detected!("vaes")
        {
            // SAFETY: the CPU has AES-NI (checked above), the only feature `expand` enables.
            Some(unsafe { expand(key) })
        } else {
            None
        }
    }

    #[inline(always)]
    fn to_m128(b: Block) -> __m128i {
        // SAFETY: `Block` is `repr(transparent)` over u128 and `__m128i` is 16 plain bytes; the
        // little-endian u128 is the byte order `aes` loads keys and blocks in.
        unsafe { std::mem::transmute::<u128, __m128i>(b.0) }
    }

    #[inline(always)]
    fn from_m128(x: __m128i) -> Block {
        // SAFETY: as in `to_m128`: both are 16 plain bytes.
        Block(unsafe { std::mem::transmute::<__m128i, u128>(x) })
    }

    /// The AES-128 key schedule (FIPS-197 §5.2) by AESKEYGENASSIST.
    #[target_feature(enable = "aes")]
    unsafe fn expand(key: Block) -> [Block; 11] {
        macro_rules! next {
            ($k:expr, $rcon:literal) => {{
                let k = $k;
                let t = _mm_shuffle_epi32::<0xff>(_mm_aeskeygenassist_si128::<$rcon>(k));
                let k = _mm_xor_si128(k, _mm_slli_si128::<4>(k));
                let k = _mm_xor_si128(k, _mm_slli_si128::<4>(k));
                let k = _mm_xor_si128(k, _mm_slli_si128::<4>(k));
                _mm_xor_si128(k, t)
            }};
        }
        let k0 = to_m128(key);
        let k1 = next!(k0, 0x01);
        let k2 = next!(k1, 0x02);
        let k3 = next!(k2, 0x04);
        let k4 = next!(k3, 0x08);
        let k5 = next!(k4, 0x10);
        let k6 = next!(k5, 0x20);
        let k7 = next!(k6, 0x40);
        let k8 = next!(k7, 0x80);
        let k9 = next!(k8, 0x1b);
        let k10 = next!(k9, 0x36);
        [k0, k1, k2, k3, k4, k5, k6, k7, k8, k9, k10].map(from_m128)
    }

    /// Encrypts `blocks` in place under the round keys `rk` (from [`round_keys`]).
    pub(super) fn encrypt(rk: &[Block; 11], blocks: &mut [Block]) {
        // SAFETY: `rk` exists only if `round_keys` found AES-NI, AVX2 and VAES on this CPU,
        // which are exactly the features `encrypt_wide` is compiled for.
        unsafe { encrypt_wide(rk, blocks) }
    }

    /// `out[j] = E(start + j)`; the low 64 bits of `start + out.len()` must not wrap (the
    /// counters are added in 64-bit lanes, with the high half fixed).
    pub(super) fn ctr(rk: &[Block; 11], start: u128, out: &mut [Block]) {
        debug_assert!((start as u64).checked_add(out.len() as u64).is_some());
        // SAFETY: as for `encrypt`.
        unsafe { ctr_wide(rk, start, out) }
    }

    #[target_feature(enable = "aes,avx2,vaes")]
    unsafe fn ctr_wide(rk: &[Block; 11], start: u128, out: &mut [Block]) {
        let mut k1 = [_mm_setzero_si128(); 11];
        let mut k2 = [_mm256_setzero_si256(); 11];
        for i in 0..11 {
            k1[i] = to_m128(rk[i]);
            k2[i] = _mm256_broadcastsi128_si256(k1[i]);
        }
        let lo = start as u64 as i64;
        let hi = (start >> 64) as u64 as i64;
        // Lane 0 holds counter c (low qword c_lo, high qword hi), lane 1 holds c + 1.
        let mut c = _mm256_set_epi64x(hi, lo.wrapping_add(1), hi, lo);
        let two = _mm256_set_epi64x(0, 2, 0, 2);
        let sixteen = _mm256_set_epi64x(0, 16, 0, 16);
        let total = out.len();
        let mut chunks = out.chunks_exact_mut(16);
        for ch in &mut chunks {
            let p = ch.as_mut_ptr() as *mut __m256i;
            let mut x = [_mm256_setzero_si256(); 8];
            let mut ci = c;
            for x in x.iter_mut() {
                *x = _mm256_xor_si256(ci, k2[0]);
                ci = _mm256_add_epi64(ci, two);
            }
            c = _mm256_add_epi64(c, sixteen);
            for k in &k2[1..10] {
                for x in x.iter_mut() {
                    *x = _mm256_aesenc_epi128(*x, *k);
                }
            }
            for (i, x) in x.iter().enumerate() {
                // SAFETY: `ch` holds 16 blocks = 8 × 32 bytes; unaligned stores.
                unsafe { _mm256_storeu_si256(p.add(i), _mm256_aesenclast_epi128(*x, k2[10])) };
            }
        }
        let rest = chunks.into_remainder();
        let done = total - rest.len();
        for (j, b) in rest.iter_mut().enumerate() {
            let ctr = start.wrapping_add((done + j) as u128);
            let mut x = _mm_xor_si128(to_m128(Block(ctr)), k1[0]);
            for k in &k1[1..10] {
                x = _mm_aesenc_si128(x, *k);
            }
            *b = from_m128(_mm_aesenclast_si128(x, k1[10]));
        }
    }

    #[target_feature(enable = "aes,avx2,vaes")]
    unsafe fn encrypt_wide(rk: &[Block; 11], blocks: &mut [Block]) {
        // Plain loops, not `array::map`: a closure does not inherit this function's target
        // features, so its intrinsics would become calls (per 64-block hash, that showed).
        let mut k1 = [_mm_setzero_si128(); 11];
        let mut k2 = [_mm256_setzero_si256(); 11];
        for i in 0..11 {
            k1[i] = to_m128(rk[i]);
            k2[i] = _mm256_broadcastsi128_si256(k1[i]);
        }
        let mut chunks = blocks.chunks_exact_mut(16);
        for c in &mut chunks {
            let p = c.as_mut_ptr() as *mut __m256i;
            let mut x = [_mm256_setzero_si256(); 8];
            for (i, x) in x.iter_mut().enumerate() {
                // SAFETY: `c` holds 16 blocks = 8 × 32 bytes; unaligned loads.
                *x = _mm256_xor_si256(unsafe { _mm256_loadu_si256(p.add(i)) }, k2[0]);
            }
            for k in &k2[1..10] {
                for x in x.iter_mut() {
                    *x = _mm256_aesenc_epi128(*x, *k);
                }
            }
            for (i, x) in x.iter().enumerate() {
                // SAFETY: as for the loads.
                unsafe { _mm256_storeu_si256(p.add(i), _mm256_aesenclast_epi128(*x, k2[10])) };
            }
        }
        for b in chunks.into_remainder() {
            let mut x = _mm_xor_si128(to_m128(*b), k1[0]);
            for k in &k1[1..10] {
                x = _mm_aesenc_si128(x, *k);
            }
            *b = from_m128(_mm_aesenclast_si128(x, k1[10]));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ctr_output_is_the_cipher_on_consecutive_counters() {
        // Across refills and bulk calls.
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
    #[test]
    fn bulk_paths_equal_the_aes_crate() {
        // The VAES path (when this CPU has it) against the `aes` crate, every tail length.
        let mut prg = Prg::from_seed(Block(7));
        for len in (0..70).chain([127, 128, 129, 1000]) {
            let c = AesCipher::new(prg.next_block());
            let xs = prg.blocks(len);
            let mut wide = xs.clone();
            c.encrypt_many(&mut wide);
            let mut narrow = xs.clone();
            c.encrypt_many_aesni(&mut narrow);
            assert_eq!(wide, narrow, "len {len}");
            for (x, w) in xs.iter().zip(&wide) {
                assert_eq!(c.encrypt(*x), *w);
            }
            // Random, small, low half about to wrap (the written-out path), high half set,
            // and the top of the u128 range.
            for start in [
                prg.next_block().0,
                5,
                u64::MAX as u128 - 3,
                (9u128 << 64) + 11,
                u128::MAX - 2,
            ] {
                let mut ctr = vec![Block::ZERO; len];
                assert_eq!(c.ctr_fill(start, &mut ctr), start.wrapping_add(len as u128));
                for (j, x) in ctr.iter().enumerate() {
                    assert_eq!(
                        *x,
                        c.encrypt(Block(start.wrapping_add(j as u128))),
                        "{start}"
                    );
                }
            }
        }
    }

    #[test]
    fn fips_197_appendix_b_vector() {
        // FIPS-197 Appendix B (key 2b7e1516..., plaintext 3243f6a8...), bytes in Block order.
        let key = Block::from_bytes([
            0x2b, 0x7e, 0x15, 0x16, 0x28, 0xae, 0xd2, 0xa6, 0xab, 0xf7, 0x15, 0x88, 0x09, 0xcf,
            0x4f, 0x3c,
        ]);
        let pt = Block::from_bytes([
            0x32, 0x43, 0xf6, 0xa8, 0x88, 0x5a, 0x30, 0x8d, 0x31, 0x31, 0x98, 0xa2, 0xe0, 0x37,
            0x07, 0x34,
        ]);
        let ct = Block::from_bytes([
            0x39, 0x25, 0x84, 0x1d, 0x02, 0xdc, 0x09, 0xfb, 0xdc, 0x11, 0x85, 0x97, 0x19, 0x6a,
            0x0b, 0x32,
        ]);
        let c = AesCipher::new(key);
        let mut v = vec![pt; 33];
        c.encrypt_many(&mut v);
        assert!(v.iter().all(|x| *x == ct));
        assert_eq!(c.encrypt(pt), ct);
    }
}
