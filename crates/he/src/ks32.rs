//! Key switching on 32-bit RNS limbs (the `n4096` set: Q = q0·q1 and P, all primes in
//! (2^29, 2^30)), with every transform on tfhe-ntt's 32-bit plans.
//!
//! Two decompositions of c1 share one key set (keys for base-2^w digits of each limb):
//!
//! * a plain rotation takes each limb of c1 as one digit, *centered* in (−q_i/2, q_i/2]
//!   (which halves its magnitude and so the key-switching noise), with the keys of the
//!   weight-2^0 digits. That is 12 NTTs of 4096 points: per Q limb one inverse NTT (the
//!   digit's own limb *is* c1's limb in NTT form, so it needs no transform) and one forward NTT
//!   to each of the L other moduli (2 + 4 at L = 2); then the division by P of both components,
//!   one inverse NTT mod P and one forward NTT per Q prime (2 × (1 + 2));
//! * hoisting takes the base-2^w digits of each limb (w = 15 at `n4096`: 4 digits), whose
//!   key-switching error is negligible next to the rounding of the division by P — needed
//!   where a plaintext multiplies the rotated ciphertext.
//!
//! Because all moduli lie in one octave (2^(b−1), 2^b) (b = 30 at `n4096`), lifting a
//! centered residue from one modulus to another needs no reduction: v ≤ q/2 < 2^(b−1) < q'
//! stays as is, and v > q/2 maps to v − q + q' ∈ (q' − q/2, q') ⊂ [0, q'). Both lifts are one
//! compare and one add.
//!
//! Buffers are `u32` and recycled per thread (`take32` / `give32`), so a rotation does no
//! heap allocation once warm.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, RwLock};

use rayon::prelude::*;

use crate::bfv::{pool_pop, pool_push, SharedPool};

static SHARED32: SharedPool<u32> = Mutex::new(Vec::new());
use crate::params::Params;

mod tasks;
pub(crate) use tasks::rotate_limbs;

thread_local! {
    static POOL32: std::cell::RefCell<Vec<Vec<u32>>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// A buffer of `len` u32 words (contents unspecified unless `zero`), recycled when possible.
pub(crate) fn take32(len: usize, zero: bool) -> Vec<u32> {
    let v = pool_pop(&POOL32, &SHARED32, len);
    match v {
        Some(mut v) => {
            if zero {
                v.clear();
                v.resize(len, 0);
            } else {
                // Every caller overwrites the whole buffer; only the length matters.
                v.resize(len, 0);
                v.truncate(len);
            }
            v
        }
        None => vec![0u32; len],
    }
}

pub(crate) fn give32(v: Vec<u32>) {
    pool_push(&POOL32, &SHARED32, v);
}

/// Extra words of a buffer taken with `take32a`: room to start a 64-byte-aligned window.
const ALIGN_PAD: usize = 16;

/// A buffer holding a 64-byte-aligned window of `n` words (`win` / `win_mut`). tfhe-ntt's
/// AVX2 transforms run ≈ 4 % faster on 32-byte-aligned data than on the 16-byte alignment
/// the allocator gives.
fn take32a(n: usize) -> Vec<u32> {
    take32(n + ALIGN_PAD, false)
}

/// Offset of the first 64-byte-aligned word of `v` (the same for the life of the buffer).
fn align_off(v: &[u32]) -> usize {
    (v.as_ptr() as usize / 4).wrapping_neg() % ALIGN_PAD
}

fn win(v: &[u32], n: usize) -> &[u32] {
    let o = align_off(v);
    &v[o..o + n]
}

fn win_mut(v: &mut [u32], n: usize) -> &mut [u32] {
    let o = align_off(v);
    &mut v[o..o + n]
}

fast_dispatch! {
    /// x ← x·w mod q (x < q < 2^31), w given with its Shoup constant.
    pub(crate) fn scale(x: &mut [u32], w: u32, ws: u32, q: u32) {
        for v in x.iter_mut() {
            *v = mul_shoup32(*v, w, ws, q);
        }
    }
}

/// a ← Σ_j d_j[r] ∘ k_j[r] mod q for one block `r` (`a.len()` = `r.len()`), left in [0, 2q)
/// (callers finish the reduction, often fused with what they do next); inlined into the
/// AVX2-compiled callers. With q < 2^30 each lazy Shoup product is in [0, 2q) and the sum of
/// two in [0, 4q) still fits a u32, so each term costs one conditional subtraction (of 2q)
/// instead of two.
#[inline(always)]
fn dot_block_lazy<'d>(
    a: &mut [u32],
    d: &[&'d [u32]],
    k: &[&'d [u32]],
    ks: &[&'d [u32]],
    r: std::ops::Range<usize>,
    q: u32,
) {
    let q2 = 2 * q;
    let len = a.len();
    let cut = |v: &[&'d [u32]], j: usize, o: usize| -> &'d [u32] { &v[j][o..o + len] };
    let (ds, ko) = (r.start, r.start);
    // Digits two at a time (one load and store of the accumulator and three conditional
    // subtractions per pair instead of two and four); an odd last digit alone.
    let mut j = 0;
    while j < d.len() {
        let (d0, k0, s0) = (cut(d, j, ds), cut(k, j, ko), cut(ks, j, ko));
        if j + 1 < d.len() {
            let (d1, k1, s1) = (cut(d, j + 1, ds), cut(k, j + 1, ko), cut(ks, j + 1, ko));
            let pairs = d0.iter().zip(k0).zip(s0).zip(d1.iter().zip(k1).zip(s1));
            for (o, (((&x0, &w0), &v0), ((&x1, &w1), &v1))) in a.iter_mut().zip(pairs) {
                let t = mul_shoup32_lazy(x0, w0, v0, q) + mul_shoup32_lazy(x1, w1, v1, q);
                let t = t.min(t.wrapping_sub(q2));
                *o = if j == 0 {
                    t
                } else {
                    let s = *o + t;
                    s.min(s.wrapping_sub(q2))
                };
            }
            j += 2;
        } else {
            for (((o, &x), &w), &v) in a.iter_mut().zip(d0).zip(k0).zip(s0) {
                let t = mul_shoup32_lazy(x, w, v, q);
                *o = if j == 0 {
                    t
                } else {
                    let s = *o + t;
                    s.min(s.wrapping_sub(q2))
                };
            }
            j += 1;
        }
    }
}

fast_dispatch! {
    /// acc ← Σ_j d_j ∘ k_j (+ add) mod q, each key residue k with its Shoup constant ks (add:
    /// u64-stored residues < q, e.g. P·c0, so that the automorphism's gather after it is a
    /// plain one). Blocks of 256 keep the accumulator in L1 while the digits stream past.
    fn dot(acc: &mut [u32], d: &[&[u32]], k: &[&[u32]], ks: &[&[u32]], add: Option<&[u64]>, q: u32) {
        const B: usize = 256;
        for (c, a) in acc.chunks_mut(B).enumerate() {
            let r = c * B..c * B + a.len();
            dot_block_lazy(a, d, k, ks, r.clone(), q);
            match add {
                // x ∈ [0, 2q) plus y < q: below 3q < 2^32; two conditional subtractions.
                Some(c) => {
                    for (x, &y) in a.iter_mut().zip(&c[r]) {
                        let s = *x + y as u32;
                        let s = s.min(s.wrapping_sub(2 * q));
                        *x = s.min(s.wrapping_sub(q));
                    }
                }
                None => {
                    for x in a.iter_mut() {
                        *x = (*x).min(x.wrapping_sub(q));
                    }
                }
            }
        }
    }
}

fast_dispatch! {
    /// out ← src read as centered mod its modulus (v > half means v − modulus) and lifted to
    /// another modulus by adding `shift` = target − source (see the module note: no
    /// reduction needed when both lie in one octave).
    fn lift(out: &mut [u32], src: &[u32], half: u32, shift: u32) {
        for (o, &v) in out.iter_mut().zip(src) {
            *o = if v > half { v.wrapping_add(shift) } else { v };
        }
    }
}

fast_dispatch! {
    /// out ← (src >> sh) & mask.
    fn extract(out: &mut [u32], src: &[u32], sh: u32, mask: u32) {
        for (o, &v) in out.iter_mut().zip(src) {
            *o = (v >> sh) & mask;
        }
    }
}

fast_dispatch! {
    /// (o1, o2) ← `lift` of src to two moduli in one pass (shifts `s1`, `s2`).
    fn lift2(o1: &mut [u32], o2: &mut [u32], src: &[u32], half: u32, s1: u32, s2: u32) {
        for ((a, b), &v) in o1.iter_mut().zip(o2.iter_mut()).zip(src) {
            let big = v > half;
            *a = if big { v.wrapping_add(s1) } else { v };
            *b = if big { v.wrapping_add(s2) } else { v };
        }
    }
}

fast_dispatch! {
    /// a ← a − b·w mod q.
    fn sub_mul(a: &mut [u32], b: &[u32], w: u32, ws: u32, q: u32) {
        for (o, &v) in a.iter_mut().zip(b) {
            let x = mul_shoup32(v, w, ws, q);
            let s = o.wrapping_sub(x);
            *o = s.min(s.wrapping_add(q));
        }
    }
}

/// a·b mod q for u64-stored residues a, b < q, q < 2^31 of bit length `bits` (b), so
/// 2^(b−1) < q < 2^b; mu = ⌊2^(2b)/q⌋ < 2^(b+1). Barrett with 32×32-bit products only (one
/// `vpmuludq` each under AVX2): x = a·b < 2^(2b), y = ⌊x/2^(b−1)⌋ < 2^(b+1) ≤ 2^32,
/// q̂ = ⌊y·mu/2^(b+1)⌋ > x/q − 3 (y and mu each lose < 1, and x/2^(b−1), 2^(2b)/q are both
/// below 2^(b+1)), so r = x − q̂·q < 3q and two conditional subtractions finish it. Inlined
/// into the AVX2 loops that call it.
#[inline(always)]
fn barrett_mul31(a: u64, b: u64, q: u64, mu: u64, bits: u32) -> u64 {
    let x = (a as u32 as u64) * (b as u32 as u64);
    let qh = (((x >> (bits - 1)) as u32 as u64) * (mu as u32 as u64)) >> (bits + 1);
    let mut r = x.wrapping_sub((qh as u32 as u64) * q);
    if r >= 2 * q {
        r -= 2 * q;
    }
    if r >= q {
        r - q
    } else {
        r
    }
}

fast_dispatch! {
    /// acc ← acc + a·b mod q on u64-stored residues, q < 2^31 of bit length `bits`,
    /// mu = ⌊2^(2·bits)/q⌋ (the product by `barrett_mul31`).
    pub(crate) fn mul_acc_small(acc: &mut [u64], a: &[u64], b: &[u64], q: u64, mu: u64, bits: u32) {
        for ((o, &x), &y) in acc.iter_mut().zip(a).zip(b) {
            let s = *o + barrett_mul31(x, y, q, mu, bits);
            *o = if s >= q { s - q } else { s };
        }
    }
}

fast_dispatch! {
    /// a ← a + b mod q (u64 residues, q < 2^63).
    pub(crate) fn add_assign_mod(a: &mut [u64], b: &[u64], q: u64) {
        for (x, &y) in a.iter_mut().zip(b) {
            let s = *x + y;
            *x = if s >= q { s - q } else { s };
        }
    }
}

fast_dispatch! {
    /// a ← a − b mod q (u64 residues, q < 2^63).
    pub(crate) fn sub_assign_mod(a: &mut [u64], b: &[u64], q: u64) {
        for (x, &y) in a.iter_mut().zip(b) {
            let d = x.wrapping_sub(y);
            *x = if *x >= y { d } else { d.wrapping_add(q) };
        }
    }
}

fast_dispatch! {
    /// o ← a + b mod q (u64 residues, q < 2^63).
    pub(crate) fn add_mod_to(o: &mut [u64], a: &[u64], b: &[u64], q: u64) {
        for ((o, &x), &y) in o.iter_mut().zip(a).zip(b) {
            let s = x + y;
            *o = if s >= q { s - q } else { s };
        }
    }
}

fast_dispatch! {
    /// o ← a − b mod q (u64 residues, q < 2^63).
    pub(crate) fn sub_mod_to(o: &mut [u64], a: &[u64], b: &[u64], q: u64) {
        for ((o, &x), &y) in o.iter_mut().zip(a).zip(b) {
            let d = x.wrapping_sub(y);
            *o = if x >= y { d } else { d.wrapping_add(q) };
        }
    }
}

fast_dispatch! {
    /// out ← a·b mod q on u64-stored residues (the product by `barrett_mul31`).
    pub(crate) fn mul_small(out: &mut [u64], a: &[u64], b: &[u64], q: u64, mu: u64, bits: u32) {
        for ((o, &x), &y) in out.iter_mut().zip(a).zip(b) {
            *o = barrett_mul31(x, y, q, mu, bits);
        }
    }
}

fast_dispatch! {
    /// a ← a·b mod q on u64-stored residues, q < 2^31 of bit length `bits`.
    pub(crate) fn mul_small_assign(a: &mut [u64], b: &[u64], q: u64, mu: u64, bits: u32) {
        for (x, &y) in a.iter_mut().zip(b) {
            *x = barrett_mul31(*x, y, q, mu, bits);
        }
    }
}

/// `rayon::join` when the pool has more than one thread; otherwise both halves inline. (A
/// join from outside a one-thread pool would hand the work to that thread and sleep on it:
/// two context switches, ≈ 10–20 µs, a fifth of a rotation.)
fn join<A: FnOnce() -> RA + Send, B: FnOnce() -> RB + Send, RA: Send, RB: Send>(
    a: A,
    b: B,
) -> (RA, RB) {
    if rayon::current_num_threads() > 1 {
        rayon::join(a, b)
    } else {
        (a(), b())
    }
}

/// Per-parameter constants of the 32-bit key switch.
pub(crate) struct Ks32 {
    /// Q primes then P.
    pub(crate) m: Vec<u32>,
    /// (P^{-1} mod q_i, its Shoup constant ⌊P^{-1}·2^32 / q_i⌋).
    pub(crate) p_inv: Vec<(u32, u32)>,
    /// (n^{-1} mod q_i, Shoup constant): the inverse NTT's normalisation.
    pub(crate) n_inv: Vec<(u32, u32)>,
    /// Slot order per modulus (Q primes then P): `slot[k][s]` is the NTT index of the
    /// evaluation point ζ^(±3^e) for s = h·n/2 + e (h = 0: +, h = 1: −). A rotation of the
    /// rows by r (X → X^(3^r)) maps the value at point x to the one at x^(3^r), i.e. it is a
    /// cyclic shift by r within each half in this order (see `switch_shift_ext`).
    pub(crate) slot: Vec<Vec<u32>>,
    /// Inverse of `slot` per modulus: the slot index of each NTT index.
    pub(crate) slot_inv: Vec<Vec<u32>>,
}

impl Ks32 {
    /// The constants when the set qualifies: every modulus in one octave (2^(b−1), 2^b)
    /// (the reduction-free lifts), b ≤ 30 (the lazy reductions), with a 32-bit plan.
    pub(crate) fn new(
        n: usize,
        q: &[u64],
        p: u64,
        w: u32,
        digits_per_prime: &[usize],
        have_plans: bool,
    ) -> Option<Ks32> {
        let bits = |m: u64| 64 - m.leading_zeros();
        let b = bits(p);
        // b ≤ 30: the lazy sums of `dot_block_lazy` (< 4q) must fit a u32.
        if !have_plans || b > 30 || !q.iter().all(|&m| bits(m) == b) {
            return None;
        }
        // Base-2^w digits must stay below every modulus (w < b) unless each limb is one digit.
        if digits_per_prime.contains(&0) || (digits_per_prime.iter().any(|&d| d > 1) && w >= b) {
            return None;
        }
        let mut m: Vec<u32> = q.iter().map(|&v| v as u32).collect();
        m.push(p as u32);
        let p_inv = q
            .iter()
            .map(|&qi| {
                let w = crate::arith::inv_mod(p % qi, qi) as u32;
                (w, shoup32(w, qi as u32))
            })
            .collect();
        let n_inv = q
            .iter()
            .map(|&qi| {
                let w = crate::arith::inv_mod(n as u64 % qi, qi) as u32;
                (w, shoup32(w, qi as u32))
            })
            .collect();
        Some(Ks32 {
            m,
            p_inv,
            n_inv,
            slot: Vec::new(),
            slot_inv: Vec::new(),
        })
    }

    /// Fills `slot` / `slot_inv` from each modulus' table of root exponents at NTT indices
    /// (`idx_of_exp[e]`: the NTT index holding the value at ζ^e, e odd < 2n).
    pub(crate) fn set_slot_maps(&mut self, idx_of_exp: &[&[u32]]) {
        self.slot = idx_of_exp
            .iter()
            .map(|ie| {
                let two_n = ie.len() as u64;
                let half = ie.len() / 4;
                let mut s = Vec::with_capacity(2 * half);
                for h in 0..2 {
                    let mut e = 1u64;
                    for _ in 0..half {
                        let x = if h == 0 { e } else { two_n - e };
                        s.push(ie[x as usize]);
                        e = e * 3 % two_n;
                    }
                }
                s
            })
            .collect();
        self.slot_inv = self
            .slot
            .iter()
            .map(|s| {
                let mut inv = vec![0u32; s.len()];
                for (j, &i) in s.iter().enumerate() {
                    inv[i as usize] = j as u32;
                }
                inv
            })
            .collect();
    }
}

/// ⌊w·2^32 / q⌋ for w < q < 2^31.
#[inline(always)]
pub(crate) fn shoup32(w: u32, q: u32) -> u32 {
    (((w as u64) << 32) / q as u64) as u32
}

/// x·w mod q with ws = shoup32(w, q); x < 2^32, q < 2^31.
#[inline(always)]
fn mul_shoup32(x: u32, w: u32, ws: u32, q: u32) -> u32 {
    let r = mul_shoup32_lazy(x, w, ws, q);
    r.min(r.wrapping_sub(q))
}

/// x·w mod q up to one q: a value in [0, 2q) congruent to x·w (ws = shoup32(w, q); x < 2^32,
/// w < q < 2^31).
#[inline(always)]
fn mul_shoup32_lazy(x: u32, w: u32, ws: u32, q: u32) -> u32 {
    let hi = ((x as u64 * ws as u64) >> 32) as u32;
    x.wrapping_mul(w).wrapping_sub(hi.wrapping_mul(q))
}

fn plan(params: &Params, k: usize) -> &crate::ntt32::Ntt32 {
    let l = params.l();
    let md = if k < l { &params.0.qs[k] } else { &params.0.pm };
    // `Ks32::new` only succeeds when every modulus has a 32-bit plan.
    md.plan32
        .as_ref()
        .expect("ks32 is only enabled when every modulus has a 32-bit plan")
}

fn ks(params: &Params) -> &Ks32 {
    params
        .0
        .ks32
        .as_ref()
        .expect("ks32 paths are only taken when the set qualifies")
}

/// Key-switching digits of c1 (NTT form mod Q, u64 storage), each (L+1)·n u32 residues in
/// NTT form mod Q·P. `limbs`: one centered digit per Q limb (what a plain rotation uses: the
/// fewest NTTs); otherwise the set's base-2^w digits of each limb (what hoisting uses: more
/// NTTs once, but digits < 2^w make the key-switching error negligible next to the rounding
/// of the division by P, which matters when a plaintext multiplies the rotated ciphertext).
/// Limbs are independent, so they run in parallel when rayon has threads.
pub(crate) fn decompose(params: &Params, c1: &[u64], limbs: bool) -> Vec<Vec<u32>> {
    let l = params.l();
    let per: Vec<Vec<Vec<u32>>> = if l == 2 {
        let (a, b) = join(
            || limb_digits(params, c1, 0, limbs),
            || limb_digits(params, c1, 1, limbs),
        );
        vec![a, b]
    } else if rayon::current_num_threads() > 1 {
        (0..l)
            .into_par_iter()
            .map(|i| limb_digits(params, c1, i, limbs))
            .collect()
    } else {
        (0..l).map(|i| limb_digits(params, c1, i, limbs)).collect()
    };
    per.into_iter().flatten().collect()
}

/// Digits of limb i: one centered digit (`limbs`) or the base-2^w digits.
fn limb_digits(params: &Params, c1: &[u64], i: usize, limbs: bool) -> Vec<Vec<u32>> {
    let n = params.n();
    let l = params.l();
    let m = &ks(params).m;
    let w = params.0.set.ks_digit_bits;
    let dc = if limbs {
        1
    } else {
        ((32 - m[i].leading_zeros()) as usize).div_ceil(w as usize)
    };
    let mut own = take32(n, false);
    for (o, &v) in own.iter_mut().zip(&c1[i * n..(i + 1) * n]) {
        *o = v as u32;
    }
    let mut coef = take32(n, false);
    coef.copy_from_slice(&own);
    plan(params, i).inv(&mut coef);
    let (ni, nis) = ks(params).n_inv[i];
    scale(&mut coef, ni, nis, m[i]);
    let qi = m[i];
    let mut out = Vec::with_capacity(dc);
    if dc == 1 {
        // Centered residue: v ≤ q_i/2 stays, v > q_i/2 stands for v − q_i.
        let half = qi / 2;
        let mut d = take32((l + 1) * n, false);
        d[i * n..(i + 1) * n].copy_from_slice(&own);
        for (k, &mk) in m.iter().enumerate() {
            if k == i {
                continue;
            }
            let dk = &mut d[k * n..(k + 1) * n];
            lift(dk, &coef, half, mk.wrapping_sub(qi));
            plan(params, k).fwd(dk);
        }
        out.push(d);
    } else {
        // Base-2^w digits (w < b, so every digit is below every modulus: no reduction).
        let mask = (1u32 << w) - 1;
        for j in 0..dc {
            let sh = w * j as u32;
            let mut d = take32((l + 1) * n, false);
            for (k, _) in m.iter().enumerate() {
                // Digit 0 mod its own prime is derived below from c1 (saves an NTT).
                if j == 0 && k == i {
                    continue;
                }
                let dk = &mut d[k * n..(k + 1) * n];
                extract(dk, &coef, sh, mask);
                plan(params, k).fwd(dk);
            }
            out.push(d);
        }
        // NTT_{q_i}(d_0) = c1 − Σ_{j≥1} 2^{wj}·NTT_{q_i}(d_j).
        let r = i * n..(i + 1) * n;
        let (d0, rest) = out.split_at_mut(1);
        let d0 = &mut d0[0][r.clone()];
        d0.copy_from_slice(&own);
        for (j, dj) in rest.iter().enumerate() {
            let f = crate::arith::pow_mod(2, w as u64 * (j + 1) as u64, qi as u64) as u32;
            sub_mul(d0, &dj[r.clone()], f, shoup32(f, qi), qi);
        }
    }
    give32(coef);
    give32(own);
    out
}

/// Σ_j 2^{wj}·d_j mod q_i over the Q residues: c1 back from its base-2^w digits (or the
/// limb digits) in NTT form.
pub(crate) fn recompose(params: &Params, digits: &[Vec<u32>]) -> Vec<u64> {
    let n = params.n();
    let l = params.l();
    let m = &ks(params).m;
    let w = params.0.set.ks_digit_bits;
    let per = digits.len() / l;
    let mut c1 = vec![0u64; l * n];
    for i in 0..l {
        let qi = m[i];
        for j in 0..per {
            let f = crate::arith::pow_mod(2, w as u64 * j as u64, qi as u64) as u32;
            let fs = shoup32(f, qi);
            let d = &digits[i * per + j][i * n..(i + 1) * n];
            for (o, &v) in c1[i * n..(i + 1) * n].iter_mut().zip(d) {
                let s = *o as u32 + mul_shoup32(v, f, fs, qi);
                *o = s.min(s.wrapping_sub(qi)) as u64;
            }
        }
    }
    c1
}

/// Σ_j d_j ∘ key_j (+ `add` on the Q residues) over every residue of Q·P (NTT form,
/// unpermuted), into a fresh buffer. `key` holds each digit's key residues, `key_s` their
/// Shoup constants; `add` has L·n u64-stored residues.
fn inner(
    params: &Params,
    digits: &[Vec<u32>],
    key: &[&[u32]],
    key_s: &[&[u32]],
    add: Option<&[u64]>,
) -> Vec<u32> {
    let n = params.n();
    let l = params.l();
    let m = &ks(params).m;
    let mut acc = take32((l + 1) * n, false);
    for (k, &mk) in m.iter().enumerate() {
        let r = k * n..(k + 1) * n;
        let d: Vec<&[u32]> = digits.iter().map(|d| &d[r.clone()]).collect();
        let kk: Vec<&[u32]> = key.iter().map(|v| &v[r.clone()]).collect();
        let kks: Vec<&[u32]> = key_s.iter().map(|v| &v[r.clone()]).collect();
        let add = add.filter(|_| k < l).map(|c| &c[r.clone()]);
        dot(&mut acc[r.clone()], &d, &kk, &kks, add, mk);
    }
    acc
}

/// A Galois automorphism's slot permutations, one per modulus of Q·P (out[j] = in[perm[j]]),
/// with whether every one of them maps each aligned block of 8 slots onto one aligned block of
/// 8 (checked once, when the key is built). In tfhe-ntt's NTT order that holds for every
/// Galois element tried so far; when it does, [`gather_perm`] moves 8 words with one load and
/// one in-register permutation instead of 8 indexed loads.
pub(crate) struct GaloisPerms {
    maps: Vec<Vec<u32>>,
    block8: bool,
}

impl GaloisPerms {
    pub(crate) fn new(maps: Vec<Vec<u32>>) -> GaloisPerms {
        let block8 = maps.iter().all(|m| is_block8(m));
        GaloisPerms { maps, block8 }
    }

    /// Whether every permutation has the block-of-8 property (see [`is_block8`]).
    pub(crate) fn block8(&self) -> bool {
        self.block8
    }
}

impl std::ops::Deref for GaloisPerms {
    type Target = [Vec<u32>];
    fn deref(&self) -> &[Vec<u32>] {
        &self.maps
    }
}

/// Whether `perm` (a permutation of 0..n, n a power of two ≥ 8) sends each aligned block of 8
/// outputs to one aligned block of 8 inputs: perm[8b + j] & !7 is the same for all j < 8.
/// Being a permutation, it then maps the block's 8 slots bijectively onto that block.
pub(crate) fn is_block8(perm: &[u32]) -> bool {
    perm.len() >= 8
        && perm.len().is_power_of_two()
        && perm
            .chunks_exact(8)
            .all(|c| c.iter().all(|&p| p & !7 == c[0] & !7))
}

/// o[j] = a[perm[j]] (as u64): per block of 8 one load and one AVX2 lane permutation when
/// `block8` (the caller's [`GaloisPerms::block8`] for this `perm`) and the CPU has AVX2, the
/// scalar gather otherwise. Both give the same words.
fn gather_perm(o: &mut [u64], a: &[u32], perm: &[u32], block8: bool) {
    #[cfg(target_arch = "x86_64")]
    if block8 && std::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU supports AVX2 (checked on the line above), the only requirement
        // of this `target_feature(enable = "avx2")` function; its memory accesses are
        // bounds-checked (see there).
        #[allow(unsafe_code)]
        unsafe {
            gather_block8_avx2(o, a, perm)
        };
        return;
    }
    gather_plain(o, a, perm)
}

/// [`gather_perm`]'s AVX2 body. `perm` must have the block-of-8 property ([`is_block8`]) for
/// the result to be the gather's; whatever `perm` holds, every access stays in bounds.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[allow(unsafe_code)]
unsafe fn gather_block8_avx2(o: &mut [u64], a: &[u32], perm: &[u32]) {
    use std::arch::x86_64::*;
    let n = a.len();
    assert!(n >= 8 && n.is_power_of_two() && o.len() == n && perm.len() == n);
    for (ob, pb) in o.chunks_exact_mut(8).zip(perm.chunks_exact(8)) {
        // Masked by n − 1 and rounded down to a multiple of 8: s + 8 ≤ n.
        let s = (pb[0] as usize & (n - 1)) & !7;
        let src = &a[s..s + 8];
        // SAFETY: `src` and `pb` are 8 u32 words (32 bytes) each and `ob` is 8 u64 words (64
        // bytes), so the unaligned 256-bit loads and the two 256-bit stores stay inside them.
        // `_mm256_permutevar8x32_epi32` uses only the low 3 bits of each index, i.e.
        // perm[8b + j] mod 8, the offset within the source block.
        unsafe {
            let x = _mm256_loadu_si256(src.as_ptr() as *const __m256i);
            let idx = _mm256_loadu_si256(pb.as_ptr() as *const __m256i);
            let y = _mm256_permutevar8x32_epi32(x, idx);
            let lo = _mm256_cvtepu32_epi64(_mm256_castsi256_si128(y));
            let hi = _mm256_cvtepu32_epi64(_mm256_extracti128_si256::<1>(y));
            _mm256_storeu_si256(ob.as_mut_ptr() as *mut __m256i, lo);
            _mm256_storeu_si256(ob.as_mut_ptr().add(4) as *mut __m256i, hi);
        }
    }
}

fast_dispatch! {
    /// o[j] = a[perm[j]]. Indices are masked by n − 1 (a no-op: perm holds indices < n) so
    /// the compiler can drop the bounds checks and use vector gathers.
    fn gather_plain(o: &mut [u64], a: &[u32], perm: &[u32]) {
        let mask = a.len() - 1;
        let a = &a[..=mask];
        for (oi, &pj) in o.iter_mut().zip(perm) {
            *oi = a[pj as usize & mask] as u64;
        }
    }
}

/// One output component of an eager key switch over precomputed digits (hoisting): see
/// [`component`].
fn finish_component(
    params: &Params,
    digits: &[Vec<u32>],
    key: &[&[u32]],
    key_s: &[&[u32]],
    perms: &GaloisPerms,
    c0: Option<&[u64]>,
    out: &mut [u64],
) {
    let n = params.n();
    let with_res = |k: usize, f: &mut dyn FnMut(&Residues<'_>)| {
        f(&digits.iter().map(|d| &d[k * n..(k + 1) * n]).collect());
    };
    component(params, &with_res, key, key_s, perms, c0, out);
}

/// Eager key switch + automorphism: (σ_g(c0) + KS_b, KS_a), both components in parallel.
pub(crate) fn switch_permute(
    params: &Params,
    c0: &[u64],
    digits: &[Vec<u32>],
    key_b: &[&[u32]],
    key_a: &[&[u32]],
    key_bs: &[&[u32]],
    key_as: &[&[u32]],
    perms: &GaloisPerms,
) -> (Vec<u64>, Vec<u64>) {
    let n = params.n();
    let l = params.l();
    // Every word of both outputs is written by the gathers: no zeroing.
    let mut o0 = crate::bfv::take_dirty(l * n);
    let mut o1 = crate::bfv::take_dirty(l * n);
    join(
        || finish_component(params, digits, key_b, key_bs, perms, Some(c0), &mut o0),
        || finish_component(params, digits, key_a, key_as, perms, None, &mut o1),
    );
    (o0, o1)
}

/// Lazy key switch: the key inner product permuted by σ_g, left in the Q·P basis (u64
/// storage, (L+1)·n per component), with σ_g(P·c0) added on the Q residues.
pub(crate) fn switch_permute_ext(
    params: &Params,
    c0_p: &[u64],
    digits: &[Vec<u32>],
    key_b: &[&[u32]],
    key_a: &[&[u32]],
    key_bs: &[&[u32]],
    key_as: &[&[u32]],
    perms: &GaloisPerms,
) -> (Vec<u64>, Vec<u64>) {
    let n = params.n();
    let l = params.l();
    let one = |key: &[&[u32]], key_s: &[&[u32]], add: Option<&[u64]>| -> Vec<u64> {
        // P·c0 is added before σ_g (σ_g(x) + σ_g(y) = σ_g(x + y)), in the inner product's
        // last pass: the gathers then move one stream instead of two.
        let acc = inner(params, digits, key, key_s, add);
        let mut out = crate::bfv::take_dirty((l + 1) * n);
        for (k, perm) in perms.iter().enumerate().take(l + 1) {
            let r = k * n..(k + 1) * n;
            gather_perm(&mut out[r.clone()], &acc[r], perm, perms.block8());
        }
        give32(acc);
        out
    };
    join(
        || one(key_b, key_bs, Some(c0_p)),
        || one(key_a, key_as, None),
    )
}

/// −q^−1 mod 2^32 (q odd): the Montgomery constant of [`dot_shift`].
pub(crate) fn mont_neg_inv(q: u32) -> u32 {
    // Newton's iteration doubles the correct low bits: q·q ≡ 1 mod 8 gives 3, then 6, 12, 24, 48.
    let mut x = q;
    for _ in 0..4 {
        x = x.wrapping_mul(2u32.wrapping_sub(q.wrapping_mul(x)));
    }
    x.wrapping_neg()
}

/// Digits per Montgomery reduction: a sum of G products below q^2 must stay below q·2^32 for
/// the reduction to land in [0, 2q), i.e. G·q < 2^32.
fn redc_group_size(q: u32) -> usize {
    if q < 1 << 30 {
        4
    } else {
        2
    }
}

/// out[j] ← Σ_i x_i[xo + j]·w_i[wo + j]·2^−32 (+ add[wo + j]) mod q, widened to u64, for
/// j < out.len(): one contiguous segment of a slot-order lazy rotation (x: the keys, stored
/// already shifted and in Montgomery form, i.e. times 2^32 mod q, so the result is the plain
/// key product; w: the digits, and P·c0, read at the rotation's offset). Per output word the
/// products of up to four digits are summed in 64 bits and reduced once (Montgomery), with no
/// Shoup constants to read: on AVX2 (q < 2^30, at most 4 digits) 8 words per step by
/// intrinsics, elsewhere and for the last words the same arithmetic word by word.
fn dot_shift(
    out: &mut [u64],
    x: &[&[u32]],
    w: &[&[u32]],
    add: Option<&[u32]>,
    xo: usize,
    wo: usize,
    q: u32,
    qn: u32,
) {
    #[allow(unused_mut)]
    let mut done = 0;
    #[cfg(target_arch = "x86_64")]
    if q < 1 << 30 && w.len() <= 4 && std::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU supports AVX2 (checked on the line above), the only requirement of
        // this `target_feature` function; it checks its slices' lengths before reading.
        #[allow(unsafe_code)]
        {
            done = unsafe { dot_shift_avx2(out, x, w, add, xo, wo, q, qn) };
        }
    }
    dot_shift_words(&mut out[done..], x, w, add, xo + done, wo + done, q, qn);
}

/// [`dot_shift`] by AVX2 on the first ⌊len/8⌋·8 words (q < 2^30, at most 4 digits: one
/// reduction per word); returns how many words it did.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[allow(unsafe_code)]
unsafe fn dot_shift_avx2(
    out: &mut [u64],
    x: &[&[u32]],
    w: &[&[u32]],
    add: Option<&[u32]>,
    xo: usize,
    wo: usize,
    q: u32,
    qn: u32,
) -> usize {
    use std::arch::x86_64::*;
    let len = out.len() & !7;
    assert!(x.len() == w.len() && w.len() <= 4 && q < 1 << 30);
    assert!(x.iter().all(|k| k.len() >= xo + len) && w.iter().all(|d| d.len() >= wo + len));
    assert!(add.is_none_or(|c| c.len() >= wo + len));
    let q64 = _mm256_set1_epi64x(q as i64);
    let qn64 = _mm256_set1_epi64x(qn as i64);
    let q32 = _mm256_set1_epi32(q as i32);
    let op = out.as_mut_ptr();
    for j in (0..len).step_by(8) {
        // SAFETY (all loads and stores below): j + 8 ≤ len, and every slice was checked to
        // hold its offset plus len words; `out` holds len u64 words.
        let (mut even, mut odd) = (_mm256_setzero_si256(), _mm256_setzero_si256());
        for (k, d) in x.iter().zip(w) {
            let (kv, dv) = unsafe {
                (
                    _mm256_loadu_si256(k.as_ptr().add(xo + j) as *const __m256i),
                    _mm256_loadu_si256(d.as_ptr().add(wo + j) as *const __m256i),
                )
            };
            // Products below 2^60, at most four: the 64-bit sums stay below q·2^32.
            even = _mm256_add_epi64(even, _mm256_mul_epu32(kv, dv));
            let (ko, d_odd) = (_mm256_srli_epi64::<32>(kv), _mm256_srli_epi64::<32>(dv));
            odd = _mm256_add_epi64(odd, _mm256_mul_epu32(ko, d_odd));
        }
        // Montgomery: (t + (t·qn mod 2^32)·q) / 2^32 ∈ [0, 2q); the odd lanes' results are
        // already in the high halves.
        let te = _mm256_add_epi64(even, _mm256_mul_epu32(_mm256_mul_epu32(even, qn64), q64));
        let to = _mm256_add_epi64(odd, _mm256_mul_epu32(_mm256_mul_epu32(odd, qn64), q64));
        let r = _mm256_blend_epi32::<0b1010_1010>(_mm256_srli_epi64::<32>(te), to);
        let mut r = _mm256_min_epu32(r, _mm256_sub_epi32(r, q32));
        if let Some(c) = add {
            let cv = unsafe { _mm256_loadu_si256(c.as_ptr().add(wo + j) as *const __m256i) };
            let s = _mm256_add_epi32(r, cv);
            r = _mm256_min_epu32(s, _mm256_sub_epi32(s, q32));
        }
        unsafe {
            let lo = _mm256_cvtepu32_epi64(_mm256_castsi256_si128(r));
            let hi = _mm256_cvtepu32_epi64(_mm256_extracti128_si256::<1>(r));
            _mm256_storeu_si256(op.add(j) as *mut __m256i, lo);
            _mm256_storeu_si256(op.add(j + 4) as *mut __m256i, hi);
        }
    }
    len
}

fast_dispatch! {
    /// [`dot_shift`] word by word, for any q < 2^31 and digit count (reductions per group of
    /// [`redc_group_size`] digits, partial results kept in [0, q)).
    fn dot_shift_words(
        out: &mut [u64],
        x: &[&[u32]],
        w: &[&[u32]],
        add: Option<&[u32]>,
        xo: usize,
        wo: usize,
        q: u32,
        qn: u32,
    ) {
        let g = redc_group_size(q);
        for (j, o) in out.iter_mut().enumerate() {
            let mut acc = 0u32;
            for (kc, dc) in x.chunks(g).zip(w.chunks(g)) {
                let t: u64 = kc
                    .iter()
                    .zip(dc)
                    .map(|(k, d)| k[xo + j] as u64 * d[wo + j] as u64)
                    .sum();
                let m = (t as u32).wrapping_mul(qn);
                let r = ((t + m as u64 * q as u64) >> 32) as u32;
                let s = acc + r.min(r.wrapping_sub(q));
                acc = s.min(s.wrapping_sub(q));
            }
            if let Some(c) = add {
                let s = acc + c[wo + j];
                acc = s.min(s.wrapping_sub(q));
            }
            *o = acc as u64;
        }
    }
}

/// A Galois key for a row rotation by `r` slots, rearranged for [`switch_shift_ext`]: per
/// digit and residue, K'[s] = key[π(s ⊕ r)] (π: `Ks32::slot`, s ⊕ r: s shifted by r within
/// its half), i.e. the key in slot order already shifted, and in Montgomery form (times 2^32
/// mod its modulus) for [`dot_shift`]'s reductions. No Shoup constants: each rotation streams
/// only the key words.
pub(crate) struct SlotKey {
    pub(crate) r: usize,
    pub(crate) b: Vec<Vec<u32>>,
    pub(crate) a: Vec<Vec<u32>>,
}

/// A hoisted ciphertext's digits in slot order, and P·c0 (mod Q, L residues) in slot order:
/// made once per hoisted ciphertext and shared by all its lazy rotations.
pub(crate) struct SlotDigits {
    pub(crate) d: Vec<Vec<u32>>,
    pub(crate) c0_p: Vec<u32>,
}

impl SlotDigits {
    /// From NTT-order digits ((L+1)·n each) and c0 (L·n, u64 storage, NTT order). Each slot-order
    /// word is gathered once (c0's multiplied by P in the same pass).
    pub(crate) fn new(params: &Params, digits: &[Vec<u32>], c0: &[u64]) -> SlotDigits {
        let n = params.n();
        let l = params.l();
        let ks = ks(params);
        let m = &ks.m;
        let mut d = Vec::new();
        for x in digits {
            let mut o = take32(x.len(), false);
            for k in 0..m.len() {
                let r = k * n..(k + 1) * n;
                gather32(&mut o[r.clone()], &x[r], &ks.slot[k]);
            }
            d.push(o);
        }
        let mut c = take32(l * n, false);
        let p = m[l];
        for (i, &qi) in m.iter().enumerate().take(l) {
            let r = i * n..(i + 1) * n;
            let pq = p % qi;
            gather_scale(
                &mut c[r.clone()],
                &c0[r],
                &ks.slot[i],
                pq,
                shoup32(pq, qi),
                qi,
            );
        }
        SlotDigits { d, c0_p: c }
    }
}

fast_dispatch! {
    /// o[j] ← x[idx[j]].
    fn gather32(o: &mut [u32], x: &[u32], idx: &[u32]) {
        let mask = x.len() - 1;
        let x = &x[..=mask];
        for (o, &i) in o.iter_mut().zip(idx) {
            *o = x[i as usize & mask];
        }
    }
}

fast_dispatch! {
    /// o[j] ← x[idx[j]]·w mod q (u64-stored residues x < q < 2^31; ws = shoup32(w, q)).
    fn gather_scale(o: &mut [u32], x: &[u64], idx: &[u32], w: u32, ws: u32, q: u32) {
        let mask = x.len() - 1;
        let x = &x[..=mask];
        for (o, &i) in o.iter_mut().zip(idx) {
            *o = mul_shoup32(x[i as usize & mask] as u32, w, ws, q);
        }
    }
}

impl Drop for SlotDigits {
    fn drop(&mut self) {
        for v in self.d.drain(..) {
            give32(v);
        }
        give32(std::mem::take(&mut self.c0_p));
    }
}

/// The slot-order form of a Galois key whose automorphism is a row rotation (`perms`: its
/// NTT-index permutations, out[j] = in[perm[j]]; key residues pre-permuted as stored), or
/// `None` when the permutation is not a shift within the halves in slot order (e.g. the row
/// swap), which then keeps the gather path. Built once per key (on first lazy use).
pub(crate) fn slot_key(
    params: &Params,
    perms: &GaloisPerms,
    b: &[&[u32]],
    a: &[&[u32]],
) -> Option<SlotKey> {
    let n = params.n();
    let half = n / 2;
    let ks = ks(params);
    let (slot, slot_inv) = (&ks.slot, &ks.slot_inv);
    if slot.len() != perms.len() {
        return None;
    }
    // r from modulus 0, slot 0; then every index of every modulus must agree.
    let r = slot_inv[0][perms[0][slot[0][0] as usize] as usize] as usize;
    if r >= half {
        return None;
    }
    for (k, perm) in perms.iter().enumerate() {
        for s in 0..n {
            let (h, e) = (s / half, s % half);
            let t = h * half + (e + r) % half;
            if perm[slot[k][s] as usize] != slot[k][t] {
                return None;
            }
        }
    }
    // K'[s] = key[perm[π(s)]] (= key[π(s ⊕ r)]), times 2^32 mod the residue's modulus.
    let re = |v: &[&[u32]]| -> Vec<Vec<u32>> {
        v.iter()
            .map(|x| {
                let mut o = vec![0u32; x.len()];
                for (k, perm) in perms.iter().enumerate() {
                    let off = k * n;
                    let q = ks.m[k];
                    let r = ((1u64 << 32) % q as u64) as u32;
                    let rs = shoup32(r, q);
                    for (s, &j) in slot[k].iter().enumerate() {
                        o[off + s] = mul_shoup32(x[off + perm[j as usize] as usize], r, rs, q);
                    }
                }
                o
            })
            .collect()
    };
    Some(SlotKey {
        r,
        b: re(b),
        a: re(a),
    })
}

fast_dispatch! {
    /// o[j] = a[perm[j]] (u64 words).
    fn gather64(o: &mut [u64], a: &[u64], perm: &[u32]) {
        let mask = a.len() - 1;
        let a = &a[..=mask];
        for (oi, &pj) in o.iter_mut().zip(perm) {
            *oi = a[pj as usize & mask];
        }
    }
}

/// Reorders u64 residues (every residue of n words, `to_slot`: NTT order → slot order, else
/// back) into a fresh buffer.
pub(crate) fn reorder64(params: &Params, x: &[u64], to_slot: bool) -> Vec<u64> {
    let mut o = crate::bfv::take_dirty(x.len());
    reorder64_into(params, x, &mut o, to_slot);
    o
}

/// [`reorder64`] into `o` (same length as x).
pub(crate) fn reorder64_into(params: &Params, x: &[u64], o: &mut [u64], to_slot: bool) {
    let n = params.n();
    let ks = ks(params);
    let maps = if to_slot { &ks.slot } else { &ks.slot_inv };
    for (k, (oc, xc)) in o.chunks_mut(n).zip(x.chunks(n)).enumerate() {
        gather64(oc, xc, &maps[k]);
    }
}

/// Lazy hoisted rotation by a [`SlotKey`]'s r slots with everything in slot order (the
/// automorphism permutes evaluation points; ordered by powers of the generator 3 it is a cyclic
/// shift by r within each half, so σ_g costs no gather: the digits are read at an offset, two
/// contiguous segments per half). `digits` and `c0_p` (P·c0 mod Q, L residues) are in slot
/// order ([`to_slot32`], once per hoisted ciphertext); the result, Σ_j σ_g(d_j)·key_j +
/// σ_g(P·c0) over Q·P, is in slot order too (u64 storage, (L+1)·n per component) and goes back
/// to NTT order once per sum, before its mod-down. This is "double hoisting" (Bossuat, Mouchet,
/// Troncoso-Pastoriza, Hubaux, Eurocrypt 2021: the mod-down deferred to the sum of rotations)
/// with the automorphism turned into index arithmetic by the slot order.
pub(crate) fn switch_shift_ext(
    params: &Params,
    h: &SlotDigits,
    key: &SlotKey,
) -> (Vec<u64>, Vec<u64>) {
    let n = params.n();
    let l = params.l();
    let half = n / 2;
    let r = key.r;
    let m = &ks(params).m;
    let one = |kk: &[Vec<u32>], add: Option<&[u32]>| -> Vec<u64> {
        let mut out = crate::bfv::take_dirty((l + 1) * n);
        for (k, &mk) in m.iter().enumerate() {
            let base = k * n;
            fn cut(v: &[Vec<u32>], r: std::ops::Range<usize>) -> Vec<&[u32]> {
                v.iter().map(|v| &v[r.clone()]).collect()
            }
            let rr = base..base + n;
            let (d, key) = (cut(&h.d, rr.clone()), cut(kk, rr));
            let add = add.filter(|_| k < l).map(|c| &c[base..base + n]);
            let o = &mut out[base..base + n];
            let qn = mont_neg_inv(mk);
            for hh in 0..2 {
                let hb = hh * half;
                // Slots e < half − r read e + r; the last r read e + r − half.
                let (o1, o2) = o[hb..hb + half].split_at_mut(half - r);
                dot_shift(o1, &key, &d, add, hb, hb + r, mk, qn);
                dot_shift(o2, &key, &d, add, hb + half - r, hb, mk, qn);
            }
        }
        out
    };
    join(|| one(&key.b, Some(&h.c0_p)), || one(&key.a, None))
}

fast_dispatch! {
    /// o[j] ← x[idx[j]] narrowed to u32 (u64-stored residues < 2^32), or x[j] without `idx`.
    fn narrow_from(o: &mut [u32], x: &[u64], idx: Option<&[u32]>) {
        match idx {
            Some(idx) => {
                let mask = x.len() - 1;
                let x = &x[..=mask];
                for (o, &i) in o.iter_mut().zip(idx) {
                    *o = x[i as usize & mask] as u32;
                }
            }
            None => {
                for (o, &v) in o.iter_mut().zip(x) {
                    *o = v as u32;
                }
            }
        }
    }
}

fast_dispatch! {
    /// o[j] ← (x[idx[j]] + q − lp[j])·w mod q (x[j] without `idx`): the last step of a division
    /// by P, reading a slot-order residue through the inverse slot map (no separate reorder).
    fn sub_scale_from(o: &mut [u64], x: &[u64], idx: Option<&[u32]>, lp: &[u32], w: u32, ws: u32, q: u32) {
        match idx {
            Some(idx) => {
                let mask = x.len() - 1;
                let x = &x[..=mask];
                for ((o, &i), &y) in o.iter_mut().zip(idx).zip(lp) {
                    *o = mul_shoup32(x[i as usize & mask] as u32 + (q - y), w, ws, q) as u64;
                }
            }
            None => {
                for ((o, &v), &y) in o.iter_mut().zip(x).zip(lp) {
                    *o = mul_shoup32(v as u32 + (q - y), w, ws, q) as u64;
                }
            }
        }
    }
}

/// Division by P of one lazy component ((L+1)·n u64-stored residues in NTT order, or in slot
/// order when `slot`; its P residue carries n^{-1} like the Galois keys'), on the 32-bit plans:
/// (x_Q − [x]_P)·P^{-1} with [x]_P centered, the same values as `Params::mod_down` (its
/// 64-bit counterpart) word for word. A slot-order input goes back to NTT order inside the
/// first and last passes (reads through the inverse slot map).
pub(crate) fn mod_down(params: &Params, x: &[u64], slot: bool) -> Vec<u64> {
    let n = params.n();
    let l = params.l();
    let ks = ks(params);
    let p = ks.m[l];
    let idx = |k: usize| slot.then(|| ks.slot_inv[k].as_slice());
    let mut accp_buf = take32a(n);
    let accp = win_mut(&mut accp_buf, n);
    narrow_from(accp, &x[l * n..(l + 1) * n], idx(l));
    plan(params, l).inv(accp);
    let mut out = crate::bfv::take_dirty(l * n);
    let mut lp_buf = take32a(n);
    for (i, o) in out.chunks_mut(n).enumerate() {
        let qi = ks.m[i];
        let lp = win_mut(&mut lp_buf, n);
        lift(lp, accp, p / 2, qi.wrapping_sub(p));
        plan(params, i).fwd(lp);
        let (w, ws) = ks.p_inv[i];
        sub_scale_from(o, &x[i * n..(i + 1) * n], idx(i), lp, w, ws, qi);
    }
    give32(lp_buf);
    give32(accp_buf);
    out
}

/// [`mod_down`] of both components of a lazy ciphertext, in parallel when rayon has threads.
pub(crate) fn mod_down_pair(
    params: &Params,
    c0: &[u64],
    c1: &[u64],
    slot: bool,
) -> (Vec<u64>, Vec<u64>) {
    join(|| mod_down(params, c0, slot), || mod_down(params, c1, slot))
}

fast_dispatch! {
    /// out ← the centered value of (src·w mod q) lifted by `shift` (see `lift`): the inverse
    /// NTT's normalisation by n^{-1} fused into the lift to another modulus (one pass instead
    /// of two).
    fn scale_lift(out: &mut [u32], src: &[u32], w: u32, ws: u32, q: u32, shift: u32) {
        let half = q / 2;
        for (o, &v) in out.iter_mut().zip(src) {
            let x = mul_shoup32(v, w, ws, q);
            *o = if x > half { x.wrapping_add(shift) } else { x };
        }
    }
}

fast_dispatch! {
    /// o ← c1 (u64-stored residues < 2^32) as u32, written to two buffers at once (the digit's
    /// own residue and the inverse NTT's input).
    fn narrow2(o1: &mut [u32], o2: &mut [u32], c: &[u64]) {
        for ((a, b), &v) in o1.iter_mut().zip(o2.iter_mut()).zip(c) {
            *a = v as u32;
            *b = v as u32;
        }
    }
}

fast_dispatch! {
    /// a ← (Σ_j d_j ∘ k_j − lp)·w (+ c) mod q: the key inner product of one Q residue fused
    /// with the division by P (and the addition of c0, which the gather then permutes with
    /// it), block by block while the block is in L1. q < 2^30: the lazy sum x ∈ [0, 2q) plus
    /// q − lp ∈ (0, q] stays below 3q < 2^32, a valid input of the Shoup product, so the
    /// subtraction needs no reduction.
    fn dot_sub_scale(
        a: &mut [u32],
        d: &[&[u32]],
        k: &[&[u32]],
        ks: &[&[u32]],
        lp: &[u32],
        c: Option<&[u64]>,
        w: u32,
        ws: u32,
        q: u32,
    ) {
        const B: usize = 256;
        for (blk, a) in a.chunks_mut(B).enumerate() {
            let r = blk * B..blk * B + a.len();
            dot_block_lazy(a, d, k, ks, r.clone(), q);
            for (x, &y) in a.iter_mut().zip(&lp[r.clone()]) {
                *x = mul_shoup32(*x + (q - y), w, ws, q);
            }
            if let Some(c) = c {
                for (x, &y) in a.iter_mut().zip(&c[r]) {
                    let s = *x + y as u32;
                    *x = s.min(s.wrapping_sub(q));
                }
            }
        }
    }
}

fast_dispatch! {
    /// (o1, o2) ← the centered value of (src·w mod q) lifted by `shift1`, `shift2`: the
    /// inverse NTT's normalisation and the lifts to both other moduli of a two-limb set in one
    /// pass.
    fn scale_lift2(
        o1: &mut [u32],
        o2: &mut [u32],
        src: &[u32],
        w: u32,
        ws: u32,
        q: u32,
        shift1: u32,
        shift2: u32,
    ) {
        let half = q / 2;
        for ((a, b), &v) in o1.iter_mut().zip(o2.iter_mut()).zip(src) {
            let x = mul_shoup32(v, w, ws, q);
            let big = x > half;
            *a = if big { x.wrapping_add(shift1) } else { x };
            *b = if big { x.wrapping_add(shift2) } else { x };
        }
    }
}

/// One residue k of every key-switching digit, as slices.
type Residues<'a> = Vec<&'a [u32]>;

/// `with_res(k, f)` calls f with residue k of every digit (waiting for them if another thread
/// is producing them).
type WithResidues<'r> = dyn Fn(usize, &mut dyn FnMut(&Residues<'_>)) + 'r;

/// A key's residues and their Shoup constants, per digit.
type KeyPair<'a> = (&'a [&'a [u32]], &'a [&'a [u32]]);

/// One output component of an eager key switch, with the digits' residues obtained through
/// `with_res(k, f)` (which may wait until another thread has produced them): the key inner
/// product mod P first (so the division by P can start), its inverse NTT, then per Q prime
/// the lift and forward NTT of [x]_P, the inner product mod q_i fused with the subtraction
/// and the product by P^{-1}, and σ_g as a slot gather (+ σ_g(c0)). Writes all L·n residues
/// of `out`.
fn component(
    params: &Params,
    with_res: &WithResidues<'_>,
    key: &[&[u32]],
    key_s: &[&[u32]],
    perms: &GaloisPerms,
    c0: Option<&[u64]>,
    out: &mut [u64],
) {
    let n = params.n();
    let l = params.l();
    let ks = ks(params);
    let p = ks.m[l];
    fn slice<'a>(v: &[&'a [u32]], k: usize, n: usize) -> Residues<'a> {
        v.iter().map(|x| &x[k * n..(k + 1) * n]).collect()
    }
    let mut accp_buf = take32a(n);
    let accp = win_mut(&mut accp_buf, n);
    with_res(l, &mut |d| {
        dot(accp, d, &slice(key, l, n), &slice(key_s, l, n), None, p);
    });
    // The key's P residue carries n^{-1} mod P, so the raw inverse NTT gives coefficients.
    plan(params, l).inv(accp);
    // [x]_P lifted to every Q prime (one pass for the two limbs of `n4096`).
    let mut lps: Vec<Vec<u32>> = (0..l).map(|_| take32a(n)).collect();
    if let [l0, l1] = &mut lps[..] {
        let (s0, s1) = (ks.m[0].wrapping_sub(p), ks.m[1].wrapping_sub(p));
        lift2(win_mut(l0, n), win_mut(l1, n), accp, p / 2, s0, s1);
    } else {
        for (lp, &qi) in lps.iter_mut().zip(&ks.m) {
            lift(win_mut(lp, n), accp, p / 2, qi.wrapping_sub(p));
        }
    }
    let mut a = take32(n, false);
    for (i, mut lp_buf) in lps.into_iter().enumerate() {
        let qi = ks.m[i];
        let lp = win_mut(&mut lp_buf, n);
        plan(params, i).fwd(lp);
        let (w, ws) = ks.p_inv[i];
        let ci = c0.map(|c| &c[i * n..(i + 1) * n]);
        with_res(i, &mut |d| {
            let (kk, kks) = (slice(key, i, n), slice(key_s, i, n));
            dot_sub_scale(&mut a, d, &kk, &kks, lp, ci, w, ws, qi);
        });
        // σ_g(a) where a already holds c0's residue: one gather of u32 words.
        gather_perm(&mut out[i * n..(i + 1) * n], &a, &perms[i], perms.block8());
        give32(lp_buf);
    }
    give32(a);
    give32(accp_buf);
}

#[cfg(test)]
mod tests;
