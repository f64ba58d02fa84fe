//! BFV core: keys, encryption, plaintexts in NTT form, ciphertext arithmetic, Galois
//! automorphisms with special-prime key switching, hoisting, flooding, modulus switching,
//! serialisation.
//!
//! Ciphertexts are `(c0, c1)` in NTT form modulo every prime of Q, with
//! `c0 + c1·s = Δ·m + e (mod Q)`, Δ = ⌊Q/t⌋.

use std::collections::HashMap;

use rayon::prelude::*;

use crate::arith::{add_mod, center, from_i64, mul_mod, neg_mod, sub_mod, Sampler};
use crate::params::{Encoding, Params};
use crate::HeError;

mod client;
#[cfg(test)]
mod kat;
mod ops;
mod sparse;
mod wide;
pub use sparse::SparseResponse;

// ---------------------------------------------------------------------------------------------
// Buffer pool: the hot paths (ScMult, key switching) allocate and free many 32–64 KiB vectors;
// recycling them per thread avoids the heap trimming and page faults that otherwise cost a
// fifth of a rotation.

thread_local! {
    static POOL: std::cell::RefCell<Vec<Vec<u64>>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// A per-thread list of spare buffers (this one for u64 words, `ks32`'s for u32).
pub(crate) type BufPool<T> = std::thread::LocalKey<std::cell::RefCell<Vec<Vec<T>>>>;

/// Buffers a thread's full pool passes on, for threads whose pools run dry. With two threads a
/// key switch's output components are taken on both threads but dropped on the caller's, so
/// without this the other thread's pool stays empty and it allocates (and zeroes) a fresh
/// 64 KiB output every rotation.
pub(crate) type SharedPool<T> = std::sync::Mutex<Vec<Vec<T>>>;

static SHARED: SharedPool<u64> = std::sync::Mutex::new(Vec::new());

/// Takes out of `pool` (else out of `shared`) a buffer with capacity ≥ `cap`, if one has it
/// (contents as left).
pub(crate) fn pool_pop<T>(
    pool: &'static BufPool<T>,
    shared: &SharedPool<T>,
    cap: usize,
) -> Option<Vec<T>> {
    let take = |p: &mut Vec<Vec<T>>| {
        p.iter()
            .position(|v| v.capacity() >= cap)
            .map(|i| p.swap_remove(i))
    };
    pool.with(|p| take(&mut p.borrow_mut())).or_else(|| {
        // A poisoned lock only means another thread panicked while pushing or popping a
        // spare buffer: the list is still a list of buffers.
        let mut g = shared.lock().unwrap_or_else(|e| e.into_inner());
        take(&mut g)
    })
}

/// Returns `v` to `pool`, which keeps at most 64 buffers (and none without capacity); beyond
/// that to `shared` (at most 64 more), else it is freed.
pub(crate) fn pool_push<T>(pool: &'static BufPool<T>, shared: &SharedPool<T>, v: Vec<T>) {
    if v.capacity() == 0 {
        return;
    }
    let rest = pool.with(|p| {
        let mut p = p.borrow_mut();
        if p.len() < 64 {
            p.push(v);
            None
        } else {
            Some(v)
        }
    });
    if let Some(v) = rest {
        let mut g = shared.lock().unwrap_or_else(|e| e.into_inner());
        if g.len() < 64 {
            g.push(v);
        }
    }
}

/// A zeroed buffer of `len` words, recycled when possible.
pub(crate) fn take_zeroed(len: usize) -> Vec<u64> {
    let v = pool_pop(&POOL, &SHARED, len);
    match v {
        Some(mut v) => {
            v.clear();
            v.resize(len, 0);
            v
        }
        None => vec![0u64; len],
    }
}

/// An empty buffer with capacity ≥ `cap`, recycled when possible (for callers that fill it).
pub(crate) fn take_empty(cap: usize) -> Vec<u64> {
    let v = pool_pop(&POOL, &SHARED, cap);
    match v {
        Some(mut v) => {
            v.clear();
            v
        }
        None => Vec::with_capacity(cap),
    }
}

/// A buffer of `len` words whose contents are unspecified (stale values of a recycled buffer):
/// for callers that overwrite every word, so steady state pays no memset.
pub(crate) fn take_dirty(len: usize) -> Vec<u64> {
    let v = pool_pop(&POOL, &SHARED, len);
    match v {
        Some(mut v) => {
            if v.len() >= len {
                v.truncate(len);
            } else {
                v.resize(len, 0);
            }
            v
        }
        None => vec![0u64; len],
    }
}

pub(crate) fn give_back(v: Vec<u64>) {
    pool_push(&POOL, &SHARED, v);
}

// ---------------------------------------------------------------------------------------------
// RNS polynomial helpers (flat Vec<u64>, residue i at [i*n, (i+1)*n)).

fn lift_signed(params: &Params, coeffs: &[i64]) -> Vec<u64> {
    let n = params.n();
    let mut out = vec![0u64; n * params.l()];
    for (i, m) in params.0.qs.iter().enumerate() {
        for (o, &c) in out[i * n..(i + 1) * n].iter_mut().zip(coeffs) {
            *o = from_i64(c, m.q);
        }
        m.to_ntt(&mut out[i * n..(i + 1) * n]);
    }
    out
}

fn crt(params: &Params, residues: &[u64], k: usize) -> u128 {
    let n = params.n();
    let q = &params.0.set.q;
    let x0 = residues[k];
    if q.len() == 1 {
        return x0 as u128;
    }
    let x1 = residues[n + k];
    let d = sub_mod(x1, x0 % q[1], q[1]);
    let h = mul_mod(d, params.0.q0_inv_mod_q1, q[1]);
    x0 as u128 + q[0] as u128 * h as u128
}

/// Centered i128 value of a CRT-reconstructed coefficient.
fn center_big(x: u128, q: u128) -> i128 {
    if x > q / 2 {
        -((q - x) as i128)
    } else {
        x as i128
    }
}

// ---------------------------------------------------------------------------------------------
// Keys

/// The client's secret key (ternary). Not `Debug`, not serialisable.
pub struct SecretKey {
    params: Params,
    pub(crate) coeffs: Vec<i64>,
    /// NTT form mod each Q prime, then mod P (length (L+1)·n).
    ntt_qp: Vec<u64>,
    /// −s in NTT form mod each Q prime (length L·n): encryption adds a·(−s) in the one
    /// multiply-accumulate pass.
    neg_ntt_q: Vec<u64>,
    /// s in NTT form mod the auxiliary prime (`Params::aux_ntt`), built on first use by
    /// response decryption.
    aux_ntt: std::sync::OnceLock<Vec<u64>>,
    /// Sign masks of s's negacyclic windows, built on first use by `decrypt_sparse`'s
    /// direct path (`SecretKey::window_masks`).
    pub(crate) window_masks: std::sync::OnceLock<Vec<i8>>,
}

impl SecretKey {
    /// Samples a uniform ternary secret from the OS CSPRNG.
    pub fn generate(params: &Params) -> SecretKey {
        let mut prg = Sampler::from_os();
        let coeffs: Vec<i64> = (0..params.n()).map(|_| prg.ternary()).collect();
        SecretKey::from_coeffs(params, coeffs)
    }

    fn from_coeffs(params: &Params, coeffs: Vec<i64>) -> SecretKey {
        let n = params.n();
        let mut ntt_qp = lift_signed(params, &coeffs);
        let mut sp: Vec<u64> = coeffs.iter().map(|&c| from_i64(c, params.0.pm.q)).collect();
        params.0.pm.to_ntt(&mut sp);
        ntt_qp.extend_from_slice(&sp);
        debug_assert_eq!(ntt_qp.len(), (params.l() + 1) * n);
        let neg_ntt_q = params
            .0
            .qs
            .iter()
            .zip(ntt_qp.chunks_exact(n))
            .flat_map(|(m, r)| r.iter().map(move |&v| neg_mod(v, m.q)))
            .collect();
        SecretKey {
            params: params.clone(),
            coeffs,
            ntt_qp,
            neg_ntt_q,
            aux_ntt: std::sync::OnceLock::new(),
            window_masks: std::sync::OnceLock::new(),
        }
    }

    pub fn params(&self) -> &Params {
        &self.params
    }

    fn ntt_q(&self) -> &[u64] {
        &self.ntt_qp[..self.params.l() * self.params.n()]
    }

    /// Secret key after the automorphism X -> X^g, as signed coefficients.
    fn automorph_coeffs(&self, g: usize) -> Vec<i64> {
        let n = self.params.n();
        let mut out = vec![0i64; n];
        for (i, &c) in self.coeffs.iter().enumerate() {
            let e = i * g % (2 * n);
            if e < n {
                out[e] = c;
            } else {
                out[e - n] = -c;
            }
        }
        out
    }

    /// Public key (an encryption of zero) used by the server to re-randomise responses.
    pub fn public_key(&self) -> PublicKey {
        let mut seed = [0u8; 32];
        Sampler::from_os().fill_bytes(&mut seed);
        let params = &self.params;
        let a = expand_uniform(params, &seed, params.l(), false);
        let mut prg = Sampler::from_os();
        let e: Vec<i64> = (0..params.n()).map(|_| prg.gaussian()).collect();
        let mut b = lift_signed(params, &e);
        sub_product(params, &mut b, &a, self.ntt_q(), params.l());
        PublicKey {
            seed,
            b,
            a,
            rb: params.residue_bytes(),
        }
    }

    /// Galois keys for the given Galois elements (see [`Params::galois_elt_rotate`]).
    pub fn galois_keys(&self, elements: &[usize]) -> GaloisKeys {
        let params = &self.params;
        let keys: HashMap<usize, GaloisKey> = elements
            .par_iter()
            .map(|&g| (g, GaloisKey::generate(self, g)))
            .collect();
        GaloisKeys {
            params: params.clone(),
            keys,
        }
    }

    /// Galois keys for left rotations by the given steps (and the row swap if asked).
    pub fn rotation_keys(&self, steps: &[usize], row_swap: bool) -> GaloisKeys {
        let mut els: Vec<usize> = steps
            .iter()
            .filter(|&&s| s % self.params.row_len() != 0)
            .map(|&s| self.params.galois_elt_rotate(s))
            .collect();
        if row_swap {
            els.push(self.params.galois_elt_row_swap());
        }
        els.sort_unstable();
        els.dedup();
        self.galois_keys(&els)
    }
}

/// Expands a 32-byte seed into a uniform polynomial in NTT form modulo `count` primes
/// (Q primes, then P when `with_p`).
fn expand_uniform(params: &Params, seed: &[u8; 32], count: usize, with_p: bool) -> Vec<u64> {
    let n = params.n();
    let mut prg = Sampler::from_seed(seed);
    let mut moduli: Vec<u64> = params.0.set.q[..count].to_vec();
    if with_p {
        moduli.push(params.0.pm.q);
    }
    let mut out = vec![0u64; n * moduli.len()];
    for (q, dst) in moduli.into_iter().zip(out.chunks_exact_mut(n)) {
        prg.fill_uniform(q, dst);
    }
    out
}

/// acc -= a ∘ s over `count` Q-residues (and P if a has more residues).
fn sub_product(params: &Params, acc: &mut [u64], a: &[u64], s: &[u64], residues: usize) {
    let n = params.n();
    let mut tmp = vec![0u64; n];
    for i in 0..residues {
        let m = if i < params.l() {
            &params.0.qs[i]
        } else {
            &params.0.pm
        };
        let q = m.q;
        let r = i * n..(i + 1) * n;
        tmp.iter_mut().for_each(|v| *v = 0);
        m.mul_accumulate(&mut tmp, &a[r.clone()], &s[r.clone()]);
        for (x, &y) in acc[r].iter_mut().zip(&tmp) {
            *x = sub_mod(*x, y, q);
        }
    }
}

/// Public key for re-randomisation: `b = −a·s + e`, `a` expanded from `seed`.
#[derive(Clone)]
pub struct PublicKey {
    seed: [u8; 32],
    b: Vec<u64>,
    a: Vec<u64>,
    /// Bytes per residue on the wire ([`Params::residue_bytes`]).
    rb: usize,
}

impl PublicKey {
    /// Serialises as seed ‖ b (the uniform half travels as its seed).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(32 + self.rb * self.b.len());
        out.extend_from_slice(&self.seed);
        write_residues(&mut out, &self.b, self.rb);
        out
    }
    pub fn from_bytes(params: &Params, bytes: &[u8]) -> Result<PublicKey, HeError> {
        let len = 32 + params.residue_bytes() * params.n() * params.l();
        if bytes.len() != len {
            return Err(HeError::WrongLength {
                expected: len,
                got: bytes.len(),
            });
        }
        let mut seed = [0u8; 32];
        seed.copy_from_slice(&bytes[..32]);
        let b = read_residues(params, &bytes[32..], params.l(), false)?;
        let a = expand_uniform(params, &seed, params.l(), false);
        Ok(PublicKey {
            seed,
            b,
            a,
            rb: params.residue_bytes(),
        })
    }
}

struct GaloisKey {
    /// Permutations of NTT slots for X -> X^g, per Q prime then P (with their block-of-8
    /// check, see `ks32::GaloisPerms`).
    perms: crate::ks32::GaloisPerms,
    /// Key digits, each (L+1)·n in NTT form, pre-permuted by σ_g^{-1} so the hoisted inner
    /// product needs no per-digit permutation.
    b: Vec<Vec<u64>>,
    a: Vec<Vec<u64>>,
    /// The same digits as u32 residues for the 32-bit key switch (`ks32`); when that path
    /// is on, `b` and `a` above stay empty (every switch runs on these).
    b32: Vec<Vec<u32>>,
    a32: Vec<Vec<u32>>,
    /// Shoup constants ⌊k·2^32 / m⌋ of every residue of `b32` / `a32`.
    b32s: Vec<Vec<u32>>,
    a32s: Vec<Vec<u32>>,
    /// What travels: per digit the seed of `a` and the unpermuted `b`.
    wire: Vec<([u8; 32], Vec<u64>)>,
    /// `ks32` only: the key rearranged for lazy rotations in slot order (`None` when the
    /// automorphism is not a row rotation), built on first lazy use: 196,608 B more per key at
    /// `n4096` (half of what the u32 residues above take with their Shoup constants), which
    /// only keys used by lazy hoisted rotations pay.
    slot32: std::sync::OnceLock<Option<crate::ks32::SlotKey>>,
}

/// A Galois key's 32-bit residues for a chosen set of digits: (b, a, b Shoup, a Shoup).
type Key32<'k> = (
    Vec<&'k [u32]>,
    Vec<&'k [u32]>,
    Vec<&'k [u32]>,
    Vec<&'k [u32]>,
);

impl GaloisKey {
    /// The 32-bit key residues of the digits `idx` (all digits when `None`).
    fn key32(&self, idx: Option<&[usize]>) -> Key32<'_> {
        let all: Vec<usize> = (0..self.b32.len()).collect();
        let idx = idx.unwrap_or(&all);
        fn pick<'a>(v: &'a [Vec<u32>], idx: &[usize]) -> Vec<&'a [u32]> {
            idx.iter().map(|&i| v[i].as_slice()).collect()
        }
        (
            pick(&self.b32, idx),
            pick(&self.a32, idx),
            pick(&self.b32s, idx),
            pick(&self.a32s, idx),
        )
    }

    /// Rebuilds the server-side form (expanded, pre-permuted) from seeds and b.
    fn from_wire(params: &Params, g: usize, wire: Vec<([u8; 32], Vec<u64>)>) -> GaloisKey {
        let n = params.n();
        let l = params.l();
        let mods = params.ext_mods();
        let perms = crate::ks32::GaloisPerms::new(mods.iter().map(|m| m.galois_perm(g)).collect());
        let mut b_all = Vec::new();
        let mut a_all = Vec::new();
        for (seed, b) in &wire {
            let a = expand_uniform(params, seed, l, true);
            let mut bp = vec![0u64; (l + 1) * n];
            let mut ap = vec![0u64; (l + 1) * n];
            for (k, perm) in perms.iter().enumerate() {
                let off = k * n;
                for (i, &pi) in perm.iter().enumerate() {
                    bp[off + pi as usize] = b[off + i];
                    ap[off + pi as usize] = a[off + i];
                }
            }
            // Fold n^{-1} mod P into the P residue: the inverse NTT of the key inner product
            // mod P (in `mod_down`) then needs no normalisation pass.
            let pm = &params.0.pm;
            let ninv = crate::arith::inv_mod(n as u64 % pm.q, pm.q);
            let ninv_s = crate::arith::shoup(ninv, pm.q);
            for v in bp[l * n..].iter_mut().chain(ap[l * n..].iter_mut()) {
                *v = crate::arith::mul_shoup(*v, ninv, ninv_s, pm.q);
            }
            b_all.push(bp);
            a_all.push(ap);
        }
        let (mut b32, mut a32, mut b32s, mut a32s) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        if params.0.ks32.is_some() {
            // Every residue is below 2^31 here, so the narrowing is exact.
            let narrow = |v: &[u64]| -> (Vec<u32>, Vec<u32>) {
                let x: Vec<u32> = v.iter().map(|&e| e as u32).collect();
                let xs = x
                    .iter()
                    .enumerate()
                    .map(|(idx, &e)| crate::ks32::shoup32(e, mods[idx / n].q as u32))
                    .collect();
                (x, xs)
            };
            for (bp, ap) in b_all.drain(..).zip(a_all.drain(..)) {
                let (x, xs) = narrow(&bp);
                b32.push(x);
                b32s.push(xs);
                let (x, xs) = narrow(&ap);
                a32.push(x);
                a32s.push(xs);
            }
        }
        GaloisKey {
            perms,
            b: b_all,
            a: a_all,
            b32,
            a32,
            b32s,
            a32s,
            wire,
            slot32: std::sync::OnceLock::new(),
        }
    }

    fn generate(sk: &SecretKey, g: usize) -> GaloisKey {
        let params = &sk.params;
        let n = params.n();
        let l = params.l();
        let w = params.0.set.ks_digit_bits;
        let sg = sk.automorph_coeffs(g);
        let mut prg = Sampler::from_os();
        let mods = params.ext_mods();
        let mut wire = Vec::new();
        for (qi, &dcount) in params.digits_per_prime().iter().enumerate() {
            for j in 0..dcount {
                let mut seed = [0u8; 32];
                prg.fill_bytes(&mut seed);
                let a = expand_uniform(params, &seed, l, true);
                let e: Vec<i64> = (0..n).map(|_| prg.gaussian()).collect();
                let mut b = vec![0u64; (l + 1) * n];
                for (k, m) in mods.iter().enumerate() {
                    let r = k * n..(k + 1) * n;
                    for (o, &c) in b[r.clone()].iter_mut().zip(&e) {
                        *o = from_i64(c, m.q);
                    }
                    if k == qi {
                        // + P · 2^{wj} · σ_g(s) on the q_i residue only (gadget of the RNS digit).
                        let f = mul_mod(
                            params.0.p_mod_q[qi],
                            pow2_mod(w as u64 * j as u64, m.q),
                            m.q,
                        );
                        for (o, &c) in b[r.clone()].iter_mut().zip(&sg) {
                            *o = add_mod(*o, mul_mod(from_i64(c, m.q), f, m.q), m.q);
                        }
                    }
                    m.to_ntt(&mut b[r]);
                }
                sub_product(params, &mut b, &a, &sk.ntt_qp, l + 1);
                wire.push((seed, b));
            }
        }
        GaloisKey::from_wire(params, g, wire)
    }
}

fn pow2_mod(e: u64, q: u64) -> u64 {
    crate::arith::pow_mod(2, e, q)
}

/// Galois (rotation) keys, held by the server.
pub struct GaloisKeys {
    params: Params,
    keys: HashMap<usize, GaloisKey>,
}

impl GaloisKeys {
    pub fn elements(&self) -> Vec<usize> {
        let mut v: Vec<usize> = self.keys.keys().copied().collect();
        v.sort_unstable();
        v
    }
    /// Size of the keys in bytes as the client uploads them (`to_bytes`).
    pub fn upload_bytes(&self) -> usize {
        let n = self.params.n();
        let l = self.params.l();
        let rb = self.params.residue_bytes();
        8 + self.keys.len() * (8 + self.params.ks_digits() * (32 + rb * n * (l + 1)))
    }

    /// Wire form: "GKS1", count, then per key g and per digit seed ‖ b (a is re-expanded).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.upload_bytes());
        out.extend_from_slice(b"GKS1");
        out.extend_from_slice(&(self.keys.len() as u32).to_le_bytes());
        for g in self.elements() {
            let k = &self.keys[&g];
            out.extend_from_slice(&(g as u64).to_le_bytes());
            for (seed, b) in &k.wire {
                out.extend_from_slice(seed);
                write_residues(&mut out, b, self.params.residue_bytes());
            }
        }
        out
    }

    /// Parses keys, checking the header, the count, each Galois element (odd, < 2n, distinct),
    /// the total length and every residue's range.
    pub fn from_bytes(params: &Params, bytes: &[u8]) -> Result<GaloisKeys, HeError> {
        let n = params.n();
        let l = params.l();
        let digit_len = 32 + params.residue_bytes() * n * (l + 1);
        let per_key = 8 + params.ks_digits() * digit_len;
        if bytes.len() < 8 || &bytes[..4] != b"GKS1" {
            return Err(HeError::BadHeader("expected GKS1".into()));
        }
        let mut c = [0u8; 4];
        c.copy_from_slice(&bytes[4..8]);
        let count = u32::from_le_bytes(c) as usize;
        let expected = count
            .checked_mul(per_key)
            .and_then(|v| v.checked_add(8))
            .ok_or(HeError::BadHeader("count".into()))?;
        if bytes.len() != expected {
            return Err(HeError::WrongLength {
                expected,
                got: bytes.len(),
            });
        }
        let mut keys = HashMap::new();
        for kb in bytes[8..].chunks_exact(per_key) {
            let mut gb = [0u8; 8];
            gb.copy_from_slice(&kb[..8]);
            let g = u64::from_le_bytes(gb) as usize;
            if g % 2 == 0 || g >= 2 * n || keys.contains_key(&g) {
                return Err(HeError::BadHeader(format!("bad Galois element {g}")));
            }
            let mut wire = Vec::new();
            for db in kb[8..].chunks_exact(digit_len) {
                let mut seed = [0u8; 32];
                seed.copy_from_slice(&db[..32]);
                wire.push((seed, read_residues(params, &db[32..], l, true)?));
            }
            keys.insert(g, GaloisKey::from_wire(params, g, wire));
        }
        Ok(GaloisKeys {
            params: params.clone(),
            keys,
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Plaintexts

/// A plaintext prepared for plaintext × ciphertext products: NTT form mod each Q prime.
#[derive(Clone)]
pub struct Plaintext {
    pub(crate) ntt: Vec<u64>,
    /// Mean square of the centered coefficients (noise-growth estimate).
    pub(crate) var: f64,
    /// NTT form mod P, built on first use by a product in the extended Q·P basis
    /// ([`Params::mul_plain_ext`]).
    ntt_p: std::sync::OnceLock<Vec<u64>>,
    /// `ks32` only: the NTT form mod Q·P in slot order, built on first use by a product with a
    /// lazy ciphertext in slot order.
    slot: std::sync::OnceLock<Vec<u64>>,
}

impl Plaintext {
    /// Plaintext whose SIMD slots hold `slots` (mod t; fewer than n values are zero-padded).
    pub fn from_slots(params: &Params, slots: &[u64]) -> Result<Plaintext, HeError> {
        let m = encode_simd(params, slots)?;
        Ok(Plaintext::from_poly(params, &m))
    }
    /// Plaintext from coefficients mod t (coefficient encoding).
    pub fn from_coeffs(params: &Params, coeffs: &[u64]) -> Result<Plaintext, HeError> {
        let m = check_coeffs(params, coeffs)?;
        Ok(Plaintext::from_poly(params, &m))
    }
    fn from_poly(params: &Params, m: &[u64]) -> Plaintext {
        let t = params.t();
        let c: Vec<i64> = m.iter().map(|&x| center(x, t)).collect();
        let var = c.iter().map(|&x| (x as f64) * (x as f64)).sum::<f64>() / c.len() as f64;
        Plaintext {
            ntt: lift_signed(params, &c),
            var,
            ntt_p: std::sync::OnceLock::new(),
            slot: std::sync::OnceLock::new(),
        }
    }

    /// NTT form mod P (coefficients are centered mod t, |c| < t/2 < q_0/2, so the centered
    /// inverse NTT mod q_0 recovers them exactly).
    fn ntt_p(&self, params: &Params) -> &[u64] {
        self.ntt_p.get_or_init(|| {
            let n = params.n();
            let q0 = &params.0.qs[0];
            let pm = &params.0.pm;
            let mut x = self.ntt[..n].to_vec();
            q0.to_coeff(&mut x);
            for v in x.iter_mut() {
                *v = from_i64(center(*v, q0.q), pm.q);
            }
            pm.to_ntt(&mut x);
            x
        })
    }

    /// NTT form mod Q·P in slot order (see `ExtCiphertext::slot`).
    fn slot_qp(&self, params: &Params) -> &[u64] {
        self.slot.get_or_init(|| {
            let mut x = self.ntt.clone();
            x.extend_from_slice(self.ntt_p(params));
            let mut o = vec![0u64; x.len()];
            crate::ks32::reorder64_into(params, &x, &mut o, true);
            o
        })
    }
}

/// Checks a coefficient polynomial mod t: at most n coefficients (the rest are zero), each
/// below t.
fn check_coeffs_range(params: &Params, coeffs: &[u64]) -> Result<(), HeError> {
    let n = params.n();
    if coeffs.len() > n {
        return Err(HeError::WrongLength {
            expected: n,
            got: coeffs.len(),
        });
    }
    match coeffs.iter().position(|&c| c >= params.t()) {
        Some(i) => Err(HeError::OutOfRange {
            index: i,
            value: coeffs[i],
            modulus: params.t(),
        }),
        None => Ok(()),
    }
}

/// [`check_coeffs_range`], then the polynomial zero-padded to n coefficients.
fn check_coeffs(params: &Params, coeffs: &[u64]) -> Result<Vec<u64>, HeError> {
    check_coeffs_range(params, coeffs)?;
    let mut m = vec![0u64; params.n()];
    m[..coeffs.len()].copy_from_slice(coeffs);
    Ok(m)
}

/// SIMD encode: slot values (2 rows × n/2, row-major) → coefficient polynomial mod t.
pub fn encode_simd(params: &Params, slots: &[u64]) -> Result<Vec<u64>, HeError> {
    let tm = params.0.tm.as_ref().ok_or(HeError::NotSimd)?;
    let n = params.n();
    if slots.len() > n {
        return Err(HeError::WrongLength {
            expected: n,
            got: slots.len(),
        });
    }
    let mut v = take_zeroed(n);
    for (s, &x) in slots.iter().enumerate() {
        if x >= tm.q {
            return Err(HeError::OutOfRange {
                index: s,
                value: x,
                modulus: tm.q,
            });
        }
        v[params.0.slot_idx[s] as usize] = x;
    }
    tm.to_coeff(&mut v);
    Ok(v)
}

/// SIMD decode: coefficient polynomial mod t → n slot values.
pub fn decode_simd(params: &Params, coeffs: &[u64]) -> Result<Vec<u64>, HeError> {
    decode_simd_owned(params, coeffs.to_vec())
}

/// [`decode_simd`] on a buffer it may overwrite (and recycles).
pub(crate) fn decode_simd_owned(params: &Params, mut v: Vec<u64>) -> Result<Vec<u64>, HeError> {
    let tm = params.0.tm.as_ref().ok_or(HeError::NotSimd)?;
    if v.len() != params.n() {
        return Err(HeError::WrongLength {
            expected: params.n(),
            got: v.len(),
        });
    }
    tm.to_ntt(&mut v);
    let out = params.0.slot_idx.iter().map(|&i| v[i as usize]).collect();
    give_back(v);
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// Ciphertexts

/// A BFV ciphertext in NTT form mod Q, with a heuristic noise-variance estimate.
#[derive(Clone)]
pub struct Ciphertext {
    pub(crate) c0: Vec<u64>,
    pub(crate) c1: Vec<u64>,
    /// Estimated variance of each noise coefficient (used to size the flooding noise).
    pub(crate) var: f64,
}

impl Drop for Ciphertext {
    fn drop(&mut self) {
        give_back(std::mem::take(&mut self.c0));
        give_back(std::mem::take(&mut self.c1));
    }
}

impl Drop for SeededCiphertext {
    fn drop(&mut self) {
        give_back(std::mem::take(&mut self.c0));
    }
}

impl Drop for Decomposed {
    fn drop(&mut self) {
        give_back(std::mem::take(&mut self.c0));
        for d in self.digits.drain(..) {
            give_back(d);
        }
        for d in self.digits32.drain(..) {
            crate::ks32::give32(d);
        }
        if let Some(v) = self.c0_p.take() {
            give_back(v);
        }
    }
}

/// What the client uploads: `c0` plus the 32-byte seed of `c1` (half the bytes).
pub struct SeededCiphertext {
    seed: [u8; 32],
    c0: Vec<u64>,
    /// Bytes per residue on the wire ([`Params::residue_bytes`]).
    rb: usize,
}

impl SecretKey {
    /// Encrypts slot values and expands the seed (local use, tests).
    pub fn encrypt(&self, slots: &[u64]) -> Result<Ciphertext, HeError> {
        Ok(self.encrypt_seeded(slots)?.expand(&self.params))
    }

    /// Encrypts coefficients (coefficient encoding).
    pub fn encrypt_coeffs(&self, m: &[u64]) -> Result<Ciphertext, HeError> {
        Ok(self.encrypt_poly_seeded(m)?.expand(&self.params))
    }

    /// c0 + c1·s in coefficient form, CRT-reconstructed.
    fn phase(&self, ct: &Ciphertext) -> Vec<u128> {
        let params = &self.params;
        let n = params.n();
        let x = self.phase_residues(ct);
        (0..n).map(|k| crt(params, &x, k)).collect()
    }

    /// c0 + c1·s in coefficient form, per Q prime.
    fn phase_residues(&self, ct: &Ciphertext) -> Vec<u64> {
        let params = &self.params;
        let n = params.n();
        let mut x = ct.c0.clone();
        for (i, md) in params.0.qs.iter().enumerate() {
            let r = i * n..(i + 1) * n;
            let s = &self.ntt_qp[r.clone()];
            md.mul_accumulate(&mut x[r.clone()], &ct.c1[r.clone()], s);
            md.to_coeff(&mut x[r]);
        }
        x
    }

    /// Decrypts to the coefficient polynomial mod t.
    pub fn decrypt_poly(&self, ct: &Ciphertext) -> Vec<u64> {
        let params = &self.params;
        let t = params.t();
        let qb = params.0.q_big;
        let n = params.n();
        let mut x = self.phase_residues(ct);
        // Three or more primes: the exact rescale to Q' = q0·q1 first, then the generic
        // two-prime rounding. round(t·x/Q) and round(t·x'/Q') differ by at most t/(2·Q') ≈
        // 2^-100 before rounding, so they agree except for a phase within that of a rounding
        // boundary, i.e. noise at Δ/2, where decryption has failed either way.
        params.rescale_to_two(&mut x);
        let q = &params.0.set.q;
        let fast = q.len() == 2
            && qb < (1u128 << 62)
            && q.iter().all(|&m| m < (1u64 << 31))
            && t < q[1].min(1u64 << 31);
        if !fast {
            return (0..n)
                .map(|k| {
                    let xk = crt(params, &x, k);
                    (crate::arith::mul_div_round(xk, t, qb) % t as u128) as u64
                })
                .collect();
        }
        // Q = q0·q1 < 2^62, q_i < 2^31, t < q1 (n4096), all in u64: Garner's x = x0 + q0·h
        // with h = (x1 − x0)·q0^{-1} mod q1 (a Shoup product); h·t = a·q1 + b (a from an f64
        // estimate of h·t/q1 < 2^51, corrected exactly); then
        // x·t + ⌊Q/2⌋ = a·Q + r with r = q0·b + x0·t + ⌊Q/2⌋ < 1.5·Q + q0·t < 2^64, so
        // v = ⌊(x·t + ⌊Q/2⌋)/Q⌋ (what `mul_div_round` computes) = a + ⌊r/Q⌋, ⌊r/Q⌋ ≤ 2.
        // v ≤ t since x < Q, so v mod t is one compare. No 128-bit arithmetic.
        let (q0, q1) = (q[0], q[1]);
        let qs = qb as u64;
        let w = params.0.q0_inv_mod_q1;
        let ws = crate::arith::shoup(w, q1);
        let inv_q1 = 1.0 / q1 as f64;
        let half = qs / 2;
        (0..n)
            .map(|k| {
                let (x0, x1) = (x[k], x[n + k]);
                let x0r = if x0 >= q1 { x0 % q1 } else { x0 };
                let d = sub_mod(x1, x0r, q1);
                let h = crate::arith::mul_shoup(d, w, ws, q1);
                let ht = h * t;
                // (Signed conversions: single instructions on x86-64; ht < 2^51.)
                let mut a = ((ht as i64) as f64 * inv_q1) as i64 as u64;
                let mut p = a * q1;
                while p > ht {
                    a -= 1;
                    p -= q1;
                }
                while ht - p >= q1 {
                    a += 1;
                    p += q1;
                }
                let b = ht - p;
                let mut r = q0 * b + x0 * t + half;
                let mut v = a;
                while r >= qs {
                    r -= qs;
                    v += 1;
                }
                if v == t {
                    0
                } else {
                    v
                }
            })
            .collect()
    }

    /// Decrypts to SIMD slot values.
    pub fn decrypt(&self, ct: &Ciphertext) -> Result<Vec<u64>, HeError> {
        decode_simd(&self.params, &self.decrypt_poly(ct))
    }

    /// Remaining noise budget in bits: log2(Δ/2) − log2(max |e|). Needs the secret key
    /// (test and diagnostics helper). Negative means decryption fails.
    pub fn noise_budget(&self, ct: &Ciphertext) -> f64 {
        let params = &self.params;
        if params.l() > 2 {
            return self.noise_budget_wide(ct);
        }
        let qb = params.0.q_big;
        let delta = params.0.delta;
        let m = self.decrypt_poly(ct);
        let phase = self.phase(ct);
        let mut max = 0u128;
        for (x, mi) in phase.into_iter().zip(m) {
            let dm = delta * mi as u128 % qb;
            let e = center_big((x + qb - dm) % qb, qb);
            max = max.max(e.unsigned_abs());
        }
        let half_delta = (delta / 2) as f64;
        half_delta.log2() - (max.max(1) as f64).log2()
    }
}

#[inline]
fn center_pow2(c: u64, k: u32) -> i64 {
    let q = 1i64 << k;
    let c = c as i64;
    if c >= q / 2 {
        c - q
    } else {
        c
    }
}

impl SeededCiphertext {
    /// Expands the seed into the full ciphertext (server side).
    pub fn expand(&self, params: &Params) -> Ciphertext {
        Ciphertext {
            c0: self.c0.clone(),
            c1: expand_uniform(params, &self.seed, params.l(), false),
            var: params.0.set.sigma * params.0.set.sigma,
        }
    }
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(4 + 32 + self.rb * self.c0.len());
        out.extend_from_slice(b"SCT1");
        out.extend_from_slice(&self.seed);
        write_residues(&mut out, &self.c0, self.rb);
        out
    }
    pub fn from_bytes(params: &Params, bytes: &[u8]) -> Result<SeededCiphertext, HeError> {
        let len = 4 + 32 + params.residue_bytes() * params.n() * params.l();
        if bytes.len() != len {
            return Err(HeError::WrongLength {
                expected: len,
                got: bytes.len(),
            });
        }
        if &bytes[..4] != b"SCT1" {
            return Err(HeError::BadHeader("expected SCT1".into()));
        }
        let mut seed = [0u8; 32];
        seed.copy_from_slice(&bytes[4..36]);
        let c0 = read_residues(params, &bytes[36..], params.l(), false)?;
        Ok(SeededCiphertext {
            seed,
            c0,
            rb: params.residue_bytes(),
        })
    }
}

/// Residues as `rb`-byte little-endian words (4 when every modulus is below 2^32, else 8).
fn write_residues(out: &mut Vec<u8>, v: &[u64], rb: usize) {
    let start = out.len();
    out.resize(start + rb * v.len(), 0);
    let dst = &mut out[start..];
    // Fixed widths as their own loops: a copy of a constant size is a plain store.
    match rb {
        8 => {
            for (o, &x) in dst.chunks_exact_mut(8).zip(v) {
                o.copy_from_slice(&x.to_le_bytes());
            }
        }
        4 => {
            for (o, &x) in dst.chunks_exact_mut(4).zip(v) {
                o.copy_from_slice(&(x as u32).to_le_bytes());
            }
        }
        _ => {
            for (o, &x) in dst.chunks_exact_mut(rb).zip(v) {
                o.copy_from_slice(&x.to_le_bytes()[..rb]);
            }
        }
    }
}

fn read_residues(
    params: &Params,
    bytes: &[u8],
    l: usize,
    with_p: bool,
) -> Result<Vec<u64>, HeError> {
    read_residues_w(params, bytes, l, with_p, params.residue_bytes())
}

fn read_residues_w(
    params: &Params,
    bytes: &[u8],
    l: usize,
    with_p: bool,
    rb: usize,
) -> Result<Vec<u64>, HeError> {
    let n = params.n();
    let count = l + usize::from(with_p);
    if bytes.len() != rb * n * count {
        return Err(HeError::WrongLength {
            expected: rb * n * count,
            got: bytes.len(),
        });
    }
    let mut out = Vec::with_capacity(n * count);
    for (idx, ch) in bytes.chunks_exact(rb).enumerate() {
        let mut b = [0u8; 8];
        b[..rb].copy_from_slice(ch);
        let v = u64::from_le_bytes(b);
        let r = idx / n;
        let q = if r < l {
            params.0.qs[r].q
        } else {
            params.0.pm.q
        };
        if v >= q {
            return Err(HeError::OutOfRange {
                index: idx,
                value: v,
                modulus: q,
            });
        }
        out.push(v);
    }
    Ok(out)
}

impl Ciphertext {
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(4 + 16 * self.c0.len());
        out.extend_from_slice(b"CTX1");
        write_residues(&mut out, &self.c0, 8);
        write_residues(&mut out, &self.c1, 8);
        out
    }
    /// Parses a full ciphertext, checking the length and that every residue is < its prime.
    pub fn from_bytes(params: &Params, bytes: &[u8]) -> Result<Ciphertext, HeError> {
        let half = 8 * params.n() * params.l();
        if bytes.len() != 4 + 2 * half {
            return Err(HeError::WrongLength {
                expected: 4 + 2 * half,
                got: bytes.len(),
            });
        }
        if &bytes[..4] != b"CTX1" {
            return Err(HeError::BadHeader("expected CTX1".into()));
        }
        let c0 = read_residues_w(params, &bytes[4..4 + half], params.l(), false, 8)?;
        let c1 = read_residues_w(params, &bytes[4 + half..], params.l(), false, 8)?;
        Ok(Ciphertext {
            c0,
            c1,
            var: params.0.set.sigma * params.0.set.sigma,
        })
    }
    /// Estimated noise standard deviation (bits), from the variance tracker.
    pub fn est_noise_log2(&self) -> f64 {
        0.5 * self.var.max(1.0).log2()
    }
}

/// Hoisting state: the key-switching digits of c1, in NTT form mod Q·P (a "DecPerm").
pub struct Decomposed {
    c0: Vec<u64>,
    digits: Vec<Vec<u64>>,
    /// The digits as u32 residues when the 32-bit key switch is on (`digits` is then empty).
    digits32: Vec<Vec<u32>>,
    var: f64,
    /// P·c0 mod Q, made by the first lazy rotation and shared by the others.
    c0_p: std::sync::OnceLock<Vec<u64>>,
    /// `ks32` only: the digits and P·c0 (u32) in slot order, made by the first lazy rotation
    /// in slot order (`ks32::switch_shift_ext`) and shared by the others.
    slot32: std::sync::OnceLock<crate::ks32::SlotDigits>,
}

/// A ciphertext in the extended Q·P basis, encrypting P·m (lazy key switching, see
/// [`Params::rotate_hoisted_ext`]). Its P residue carries the factor n^{-1} mod P that the
/// Galois keys fold in (see `mod_down`).
pub struct ExtCiphertext {
    c0: Vec<u64>,
    c1: Vec<u64>,
    var: f64,
    /// Residues in slot order (`ks32::Ks32::slot`) instead of NTT order: what lazy hoisted
    /// rotations in slot order produce; element-wise operations keep it, `mod_down_ext` goes
    /// back to NTT order first.
    slot: bool,
}

impl Drop for ExtCiphertext {
    fn drop(&mut self) {
        give_back(std::mem::take(&mut self.c0));
        give_back(std::mem::take(&mut self.c1));
    }
}

/// A modulus-switched response: coefficients mod 2^log_q, packed tightly on the wire.
pub struct Response {
    pub(crate) log_q: u32,
    pub(crate) c0: Vec<u64>,
    pub(crate) c1: Vec<u64>,
}

impl Response {
    pub fn log_q(&self) -> u32 {
        self.log_q
    }
    /// Wire size in bytes.
    pub fn byte_len(&self) -> usize {
        5 + (2 * self.c0.len() * self.log_q as usize).div_ceil(8)
    }
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.byte_len());
        out.extend_from_slice(b"RSP");
        out.push(self.log_q as u8);
        out.push(0);
        let mut acc: u128 = 0;
        let mut nb = 0u32;
        for &v in self.c0.iter().chain(&self.c1) {
            acc |= (v as u128) << nb;
            nb += self.log_q;
            while nb >= 8 {
                out.push(acc as u8);
                acc >>= 8;
                nb -= 8;
            }
        }
        if nb > 0 {
            out.push(acc as u8);
        }
        out
    }
    pub fn from_bytes(params: &Params, bytes: &[u8]) -> Result<Response, HeError> {
        if bytes.len() < 5 || &bytes[..3] != b"RSP" || bytes[4] != 0 {
            return Err(HeError::BadHeader("expected RSP".into()));
        }
        let log_q = bytes[3] as u32;
        let n = params.n();
        let max = max_response_bits(params);
        if log_q == 0 || log_q > max {
            return Err(HeError::BadHeader(format!(
                "response modulus 2^{log_q} > 2^{max}"
            )));
        }
        let expected = 5 + (2 * n * log_q as usize).div_ceil(8);
        if bytes.len() != expected {
            return Err(HeError::WrongLength {
                expected,
                got: bytes.len(),
            });
        }
        let body = &bytes[5..];
        let total = 2 * n * log_q as usize;
        if total % 8 != 0 && body.last().is_some_and(|&b| b >> (total % 8) != 0) {
            return Err(HeError::BadHeader("non-zero padding bits".into()));
        }
        let mut c0 = vec![0u64; n];
        let mut c1 = vec![0u64; n];
        unpack_fields(body, log_q, 0, &mut c0);
        unpack_fields(body, log_q, n, &mut c1);
        Ok(Response { log_q, c0, c1 })
    }
}

/// The N bytes of `src` from `at` on, zero past the end (a field's word near the stream's end).
#[inline(always)]
fn load_bytes<const N: usize>(src: &[u8], at: usize) -> [u8; N] {
    let mut b = [0u8; N];
    match src.get(at..at + N) {
        Some(w) => b.copy_from_slice(w),
        None => {
            let rest = src.get(at..).unwrap_or(&[]);
            b[..rest.len()].copy_from_slice(rest);
        }
    }
    b
}

fast_dispatch! {
    /// out[j] ← field `first + j` of a little-endian stream of `bits`-bit fields (bits ≤ 62;
    /// bit i of the stream is bit i mod 8 of byte i / 8), one unaligned load per field: a
    /// field at bit offset b lies in bits (b mod 8) .. (b mod 8) + bits of the word at byte
    /// b / 8, within 64 bits while bits ≤ 56.
    fn unpack_fields(src: &[u8], bits: u32, first: usize, out: &mut [u64]) {
        let mask = (1u64 << bits) - 1;
        let w = bits as usize;
        if bits <= 56 {
            for (j, o) in out.iter_mut().enumerate() {
                let b = (first + j) * w;
                *o = (u64::from_le_bytes(load_bytes(src, b >> 3)) >> (b & 7)) & mask;
            }
        } else {
            for (j, o) in out.iter_mut().enumerate() {
                let b = (first + j) * w;
                *o = (u128::from_le_bytes(load_bytes(src, b >> 3)) >> (b & 7)) as u64 & mask;
            }
        }
    }
}

/// Largest response modulus exponent the client's exact decryption supports.
pub fn max_response_bits(params: &Params) -> u32 {
    // |c1·s| ≤ n·2^k/2 must stay below Q/2 for the exact product in `decrypt_response_poly`,
    // which uses at most the first two primes; 62 bits is the most `switch_u64` and the
    // packing handle.
    let log_q: f64 = params
        .0
        .set
        .q
        .iter()
        .take(2)
        .map(|&q| (q as f64).log2())
        .sum();
    ((log_q - (params.n() as f64).log2() - 2.0).floor() as u32).min(62)
}

/// Variance bound of a sum whose terms may be fully correlated (a rotate-and-sum adds a
/// ciphertext to its own automorphism: coefficients fixed by the automorphisms add coherently),
/// i.e. standard deviations add.
fn corr_sum(v1: f64, v2: f64) -> f64 {
    let s = v1.sqrt() + v2.sqrt();
    s * s
}

fn add_signed(x: u128, e: i128, q: u128) -> u128 {
    if e >= 0 {
        (x + e as u128) % q
    } else {
        let m = e.unsigned_abs() % q;
        (x + q - m) % q
    }
}

/// round(x · 2^k / q) mod 2^k for x < q < 2^62, k ≤ 62: f64 estimate, exact correction.
fn switch_u64(x: u64, q: u64, k: u32, ratio: f64) -> u64 {
    let num = ((x as u128) << k) + (q as u128 >> 1);
    let mut v = (x as f64 * ratio) as u128;
    // Correct the estimate so that v = floor(num / q).
    while v * q as u128 > num {
        v -= 1;
    }
    while (v + 1) * q as u128 <= num {
        v += 1;
    }
    (v & ((1u128 << k) - 1)) as u64
}

/// round(x · qr / Q) mod qr, qr a power of two ≤ 2^62.
fn switch(x: u128, qr: u128, q: u128) -> u128 {
    let v = crate::arith::mul_div_round(x, qr as u64, q);
    v % qr
}

/// Encoding helpers exposed for kernels and callers.
pub fn encoding(params: &Params) -> Encoding {
    params.0.set.encoding
}

#[allow(dead_code)]
fn _neg(a: u64, q: u64) -> u64 {
    neg_mod(a, q)
}

#[cfg(test)]
mod tests;
