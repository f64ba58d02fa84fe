//! `ntt32`: the negacyclic NTT modulo a prime q < 2^30, hand-written for AVX2 — the transform
//! behind every key switch of the `n4096` set (12 per rotation).
//!
//! **Why not tfhe-ntt here.** tfhe-ntt's 32-bit plan runs a radix-2 depth-first transform
//! that loads and stores every word once per layer; on this project's AVX2 machines (no
//! AVX-512) it took 6.7–7.0 µs per 4096-point transform (`secinfer bench he-ops`, row
//! "ntt_fwd (one prime)"), 12 of which were ≈ 75 % of a rotation. This module keeps eight
//! vectors in registers across three layers (radix-8 passes), so a 4096-point transform
//! touches memory four times instead of twelve, and does the last three layers on transposed
//! 8 × 8 blocks. Everything else — the root, the bit-reversed output order, the unnormalised
//! inverse, outputs reduced to [0, q) — is tfhe-ntt's `prime32::Plan` exactly: [`Ntt32::new`]
//! checks the two against each other on a pseudo-random vector and keeps tfhe-ntt's plan
//! wherever this one does not apply (q ≥ 2^30, n < 64, a CPU without AVX2) or disagrees.
//! tfhe-ntt stays the crate's NTT for 64-bit primes and the reference in the tests.
//!
//! **Arithmetic** (Harvey, "Faster arithmetic for number-theoretic transforms", 2014): Shoup
//! products w·y mod q up to one q (y any 32-bit word, w' = ⌊w·2^32/q⌋ precomputed), forward
//! Cooley–Tukey butterflies on values kept in [0, 4q) and inverse Gentleman–Sande butterflies
//! on [0, 2q); 4q < 2^32 is why q < 2^30. The forward transform evaluates at ψ^(2·brv(i)+1) in
//! slot i for the primitive 2n-th root ψ: layer L's group g multiplies by ψ^brv(2^L + g).

use tfhe_ntt::prime32::Plan as TfhePlan;

use crate::arith::{inv_mod, mul_mod, pow_mod};

/// Lanes of a 256-bit vector of u32 words.
const LANES: usize = 8;
/// Points of one transposed block of the last three layers (8 × 8).
const BLOCK: usize = LANES * LANES;
/// Twiddles per 64-point block of the block pass: 7 broadcast ones for its three vertical
/// layers, 56 lane-order ones for the last three (8 + 16 + 32), one word of padding.
const BLOCK_TW: usize = 64;

/// A 32-bit negacyclic NTT of one size and prime: this module's transform where it applies,
/// tfhe-ntt's otherwise. Both compute the same function.
pub(crate) struct Ntt32 {
    tfhe: TfhePlan,
    own: Option<Own>,
}

/// Twiddle tables of this module's transform.
struct Own {
    n: usize,
    q: u32,
    /// fw[k] = ψ^brv(k) for k in 1..n (fw[0] unused), fws its Shoup constants.
    fw: Vec<u32>,
    fws: Vec<u32>,
    /// iw[k] = ψ^−brv(k), iws its Shoup constants.
    iw: Vec<u32>,
    iws: Vec<u32>,
    /// Twiddles of the vertical passes (strides ≥ 64 words) in the order they run: forward
    /// from layer 0 down, inverse back up to layer 0.
    fwd_passes: Vec<PassTw>,
    inv_passes: Vec<PassTw>,
    /// Per 64-point block, the block pass's twiddles ([`BLOCK_TW`] words each), forward and
    /// inverse, with Shoup constants.
    fb: Vec<u32>,
    fbs: Vec<u32>,
    ib: Vec<u32>,
    ibs: Vec<u32>,
}

impl Ntt32 {
    /// The transform of size `n` modulo `q`, or `None` where tfhe-ntt has none (q not an
    /// NTT-friendly prime below 2^31).
    pub(crate) fn new(n: usize, q: u32) -> Option<Ntt32> {
        let tfhe = TfhePlan::try_new(n, q)?;
        let own = Own::new(&tfhe, n, q).filter(|own| own.agrees_with(&tfhe));
        Some(Ntt32 { tfhe, own })
    }

    /// Forward transform in place: coefficients (each < q) in standard order to NTT slots in
    /// bit-reversed order, each < q.
    pub(crate) fn fwd(&self, a: &mut [u32]) {
        match &self.own {
            Some(own) => own.fwd(a),
            None => self.tfhe.fwd(a),
        }
    }

    /// Inverse transform in place, without the factor n^−1 (as tfhe-ntt's `inv`).
    pub(crate) fn inv(&self, a: &mut [u32]) {
        match &self.own {
            Some(own) => own.inv(a),
            None => self.tfhe.inv(a),
        }
    }

    /// tfhe-ntt's plan for the same transform (the comparison row of `bench he-ops`).
    #[cfg(feature = "bench")]
    pub(crate) fn tfhe(&self) -> &TfhePlan {
        &self.tfhe
    }

    /// Whether this module's transform runs (rather than tfhe-ntt's).
    #[cfg(test)]
    pub(crate) fn is_own(&self) -> bool {
        self.own.is_some()
    }
}

fn bit_reverse(k: usize, bits: u32) -> usize {
    k.reverse_bits() >> (usize::BITS - bits)
}

fn shoup(w: u32, q: u32) -> u32 {
    (((w as u64) << 32) / q as u64) as u32
}

/// w·y mod q up to one q: a value in [0, 2q) (y < 2^32, w < q, ws = shoup(w, q)).
#[inline(always)]
fn mul_lazy(y: u32, w: u32, ws: u32, q: u32) -> u32 {
    let hi = ((y as u64 * ws as u64) >> 32) as u32;
    y.wrapping_mul(w).wrapping_sub(hi.wrapping_mul(q))
}

impl Own {
    fn new(tfhe: &TfhePlan, n: usize, q: u32) -> Option<Own> {
        if q >= 1 << 30 || n < BLOCK || !n.is_power_of_two() || !has_avx2() {
            return None;
        }
        let log_n = n.trailing_zeros();
        // tfhe-ntt's root: slot 0 of the transform of X is ψ^(2·brv(0)+1) = ψ.
        let mut x = vec![0u32; n];
        x[1] = 1;
        tfhe.fwd(&mut x);
        let psi = x[0] as u64;
        let qq = q as u64;
        let psi_inv = inv_mod(psi, qq);
        let mut fw = vec![0u32; n];
        let mut iw = vec![0u32; n];
        for k in 1..n {
            let e = bit_reverse(k, log_n) as u64;
            fw[k] = pow_mod(psi, e, qq) as u32;
            iw[k] = pow_mod(psi_inv, e, qq) as u32;
        }
        let fws = fw.iter().map(|&w| shoup(w, q)).collect();
        let iws = iw.iter().map(|&w| shoup(w, q)).collect();
        let with_shoup = |w: Vec<u32>| {
            let ws = w.iter().map(|&x| shoup(x, q)).collect();
            (w, ws)
        };
        let (fb, fbs) = with_shoup(block_twiddles(&fw, log_n));
        let (ib, ibs) = with_shoup(block_twiddles(&iw, log_n));
        let (fwd_passes, mut inv_passes): (Vec<_>, Vec<_>) = vertical_passes(log_n)
            .into_iter()
            .map(|(layer, depth)| {
                (
                    PassTw::new(&fw, layer, depth, q),
                    PassTw::new(&iw, layer, depth, q),
                )
            })
            .unzip();
        inv_passes.reverse();
        debug_assert_eq!(mul_mod(psi, psi_inv, qq), 1);
        Some(Own {
            n,
            q,
            fw,
            fws,
            iw,
            iws,
            fwd_passes,
            inv_passes,
            fb,
            fbs,
            ib,
            ibs,
        })
    }

    /// Both directions equal tfhe-ntt's on a pseudo-random vector (they are linear maps, and
    /// a wrong root or order shows on any vector with high probability).
    fn agrees_with(&self, tfhe: &TfhePlan) -> bool {
        let q = self.q as u64;
        let x: Vec<u32> = (0..self.n as u64)
            .map(|i| ((i.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 17) % q) as u32)
            .collect();
        let (mut a, mut b) = (x.clone(), x.clone());
        self.fwd(&mut a);
        tfhe.fwd(&mut b);
        let fwd_ok = a == b;
        let (mut a, mut b) = (x.clone(), x);
        self.inv(&mut a);
        tfhe.inv(&mut b);
        fwd_ok && a == b
    }

    fn fwd(&self, a: &mut [u32]) {
        self.transform(a, true);
    }

    fn inv(&self, a: &mut [u32]) {
        self.transform(a, false);
    }

    fn transform(&self, a: &mut [u32], forward: bool) {
        assert_eq!(a.len(), self.n, "NTT input of the wrong size");
        #[cfg(target_arch = "x86_64")]
        {
            // SAFETY: `Own::new` only succeeds when the CPU has AVX2 (the requirement of
            // these `target_feature` functions) and n ≥ 64 is a power of two; the length is
            // checked above; see `avx2` for their memory accesses.
            #[allow(unsafe_code)]
            unsafe {
                if forward {
                    avx2::fwd(self, a)
                } else {
                    avx2::inv(self, a)
                }
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        if forward {
            self.fwd_scalar(a)
        } else {
            self.inv_scalar(a)
        }
    }

    /// The forward transform layer by layer (the reference the AVX2 passes are tested
    /// against; also the path off x86-64).
    #[cfg_attr(target_arch = "x86_64", allow(dead_code))]
    fn fwd_scalar(&self, a: &mut [u32]) {
        let (q, two_q) = (self.q, 2 * self.q);
        let mut t = self.n;
        let mut m = 1;
        while m < self.n {
            t >>= 1;
            for g in 0..m {
                let (w, ws) = (self.fw[m + g], self.fws[m + g]);
                let (lo, hi) = a[2 * g * t..2 * (g + 1) * t].split_at_mut(t);
                for (x, y) in lo.iter_mut().zip(hi) {
                    let xr = (*x).min(x.wrapping_sub(two_q));
                    let v = mul_lazy(*y, w, ws, q);
                    *x = xr + v;
                    *y = xr + two_q - v;
                }
            }
            m <<= 1;
        }
        for x in a.iter_mut() {
            let r = (*x).min(x.wrapping_sub(two_q));
            *x = r.min(r.wrapping_sub(q));
        }
    }

    /// The inverse transform layer by layer (reference; path off x86-64).
    #[cfg_attr(target_arch = "x86_64", allow(dead_code))]
    fn inv_scalar(&self, a: &mut [u32]) {
        let (q, two_q) = (self.q, 2 * self.q);
        let mut t = 1;
        let mut m = self.n >> 1;
        while m >= 1 {
            for g in 0..m {
                let (w, ws) = (self.iw[m + g], self.iws[m + g]);
                let (lo, hi) = a[2 * g * t..2 * (g + 1) * t].split_at_mut(t);
                for (u, v) in lo.iter_mut().zip(hi) {
                    let s = *u + *v;
                    let d = *u + two_q - *v;
                    *u = s.min(s.wrapping_sub(two_q));
                    *v = mul_lazy(d, w, ws, q);
                }
            }
            t <<= 1;
            m >>= 1;
        }
        for x in a.iter_mut() {
            *x = (*x).min(x.wrapping_sub(q));
        }
    }
}

/// The vertical passes (first layer, depth) before the block pass, forward order: the
/// log2(n) − 6 layers whose strides are ≥ 64 words, a shallower pass first when they are not a
/// multiple of three.
fn vertical_passes(log_n: u32) -> Vec<(u32, u32)> {
    let vertical = log_n - 6;
    let first = vertical % 3;
    let mut out = Vec::new();
    if first != 0 {
        out.push((0, first));
    }
    out.extend((first..vertical).step_by(3).map(|l| (l, 3)));
    out
}

/// Twiddles of the groups of layer `layer` .. `layer + depth − 1` that a vertical pass (or the
/// block pass's first half) applies to one block of group `g`: layer L's ψ^brv(2^L + g), then
/// the two of layer L + 1, then the four of layer L + 2 (as far as `depth` goes).
fn group_twiddles(w: &[u32], layer: u32, depth: u32, g: usize) -> impl Iterator<Item = u32> + '_ {
    (0..depth).flat_map(move |d| {
        let base = (1usize << (layer + d)) + (g << d);
        (0..1usize << d).map(move |i| w[base + i])
    })
}

/// Per-group twiddles of one vertical pass, contiguous so a pass reads them in order.
struct PassTw {
    layer: u32,
    depth: u32,
    w: Vec<u32>,
    ws: Vec<u32>,
}

impl PassTw {
    fn new(w: &[u32], layer: u32, depth: u32, q: u32) -> PassTw {
        let w: Vec<u32> = (0..1usize << layer)
            .flat_map(|g| group_twiddles(w, layer, depth, g))
            .collect();
        let ws = w.iter().map(|&x| shoup(x, q)).collect();
        PassTw {
            layer,
            depth,
            w,
            ws,
        }
    }
}

/// The block pass's twiddles ([`BLOCK_TW`] per 64-point block b): the 7 of layers
/// log2(n) − 6 .. log2(n) − 4 for group b, then the last three layers' in lane order (lane r =
/// the block's 8-point row r, a group of layer log2(n) − 3): 8 for stride 4, 2 × 8 for stride 2,
/// 4 × 8 for stride 1.
fn block_twiddles(w: &[u32], log_n: u32) -> Vec<u32> {
    let n = w.len();
    let l = log_n as usize - 3;
    let mut out = Vec::with_capacity(n / BLOCK * BLOCK_TW);
    for b in 0..n / BLOCK {
        out.extend(group_twiddles(w, log_n - 6, 3, b));
        out.push(0);
        let row = |r: usize| b * LANES + r;
        for d in 0..3 {
            for s in 0..1usize << d {
                out.extend((0..LANES).map(|r| w[(1 << (l + d)) + (row(r) << d) + s]));
            }
        }
    }
    out
}

fn has_avx2() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::is_x86_feature_detected!("avx2")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)]
mod avx2 {
    //! The AVX2 passes. Every function requires AVX2 (its `target_feature`); memory is read
    //! and written only through `ptr::add` offsets below `n` that the loop bounds establish
    //! (each says how).

    use super::{Own, PassTw, BLOCK, BLOCK_TW, LANES};
    use std::arch::x86_64::*;

    /// y·w mod q up to one q, lane by lane (see `mul_lazy`); `ws_odd` holds the odd lanes'
    /// Shoup constants in the even positions (for a broadcast twiddle, `ws` itself).
    #[inline(always)]
    unsafe fn mul_lazy(
        y: __m256i,
        w: __m256i,
        ws: __m256i,
        ws_odd: __m256i,
        q: __m256i,
    ) -> __m256i {
        let even = _mm256_mul_epu32(y, ws);
        let odd = _mm256_mul_epu32(_mm256_srli_epi64::<32>(y), ws_odd);
        let hi = _mm256_blend_epi32::<0b1010_1010>(_mm256_srli_epi64::<32>(even), odd);
        _mm256_sub_epi32(_mm256_mullo_epi32(y, w), _mm256_mullo_epi32(hi, q))
    }

    /// min(x, x − c): x − c where x ≥ c, else x.
    #[inline(always)]
    unsafe fn reduce(x: __m256i, c: __m256i) -> __m256i {
        _mm256_min_epu32(x, _mm256_sub_epi32(x, c))
    }

    #[derive(Clone, Copy)]
    struct Tw {
        w: __m256i,
        ws: __m256i,
        ws_odd: __m256i,
    }

    #[inline(always)]
    unsafe fn broadcast(w: u32, ws: u32) -> Tw {
        let ws = _mm256_set1_epi32(ws as i32);
        Tw {
            w: _mm256_set1_epi32(w as i32),
            ws,
            ws_odd: ws,
        }
    }

    /// Eight per-lane twiddles at `w[0..8]`, `ws[0..8]` (both at least 8 long: callers slice).
    #[inline(always)]
    unsafe fn lanes(w: &[u32], ws: &[u32]) -> Tw {
        debug_assert!(w.len() >= LANES && ws.len() >= LANES);
        let ws = _mm256_loadu_si256(ws.as_ptr() as *const __m256i);
        Tw {
            w: _mm256_loadu_si256(w.as_ptr() as *const __m256i),
            ws,
            ws_odd: _mm256_srli_epi64::<32>(ws),
        }
    }

    #[derive(Clone, Copy)]
    struct Q {
        q: __m256i,
        two_q: __m256i,
    }

    /// Forward (Cooley–Tukey) butterfly: x, y in [0, 4q) → x + wy, x − wy, in [0, 4q).
    #[inline(always)]
    unsafe fn fwd_bf(x: &mut __m256i, y: &mut __m256i, t: Tw, c: Q) {
        let xr = reduce(*x, c.two_q);
        let v = mul_lazy(*y, t.w, t.ws, t.ws_odd, c.q);
        *x = _mm256_add_epi32(xr, v);
        *y = _mm256_sub_epi32(_mm256_add_epi32(xr, c.two_q), v);
    }

    /// Inverse (Gentleman–Sande) butterfly: u, v in [0, 2q) → u + v, (u − v)·w, in [0, 2q).
    #[inline(always)]
    unsafe fn inv_bf(u: &mut __m256i, v: &mut __m256i, t: Tw, c: Q) {
        let s = _mm256_add_epi32(*u, *v);
        let d = _mm256_sub_epi32(_mm256_add_epi32(*u, c.two_q), *v);
        *u = reduce(s, c.two_q);
        *v = mul_lazy(d, t.w, t.ws, t.ws_odd, c.q);
    }

    /// 8 × 8 transpose of u32 lanes: out[k] lane r = in[r] lane k.
    #[inline(always)]
    unsafe fn transpose(r: &mut [__m256i; 8]) {
        let t0 = _mm256_unpacklo_epi32(r[0], r[1]);
        let t1 = _mm256_unpackhi_epi32(r[0], r[1]);
        let t2 = _mm256_unpacklo_epi32(r[2], r[3]);
        let t3 = _mm256_unpackhi_epi32(r[2], r[3]);
        let t4 = _mm256_unpacklo_epi32(r[4], r[5]);
        let t5 = _mm256_unpackhi_epi32(r[4], r[5]);
        let t6 = _mm256_unpacklo_epi32(r[6], r[7]);
        let t7 = _mm256_unpackhi_epi32(r[6], r[7]);
        let u0 = _mm256_unpacklo_epi64(t0, t2);
        let u1 = _mm256_unpackhi_epi64(t0, t2);
        let u2 = _mm256_unpacklo_epi64(t1, t3);
        let u3 = _mm256_unpackhi_epi64(t1, t3);
        let u4 = _mm256_unpacklo_epi64(t4, t6);
        let u5 = _mm256_unpackhi_epi64(t4, t6);
        let u6 = _mm256_unpacklo_epi64(t5, t7);
        let u7 = _mm256_unpackhi_epi64(t5, t7);
        r[0] = _mm256_permute2x128_si256::<0x20>(u0, u4);
        r[1] = _mm256_permute2x128_si256::<0x20>(u1, u5);
        r[2] = _mm256_permute2x128_si256::<0x20>(u2, u6);
        r[3] = _mm256_permute2x128_si256::<0x20>(u3, u7);
        r[4] = _mm256_permute2x128_si256::<0x31>(u0, u4);
        r[5] = _mm256_permute2x128_si256::<0x31>(u1, u5);
        r[6] = _mm256_permute2x128_si256::<0x31>(u2, u6);
        r[7] = _mm256_permute2x128_si256::<0x31>(u3, u7);
    }

    fn consts(own: &Own) -> Q {
        // SAFETY: `_mm256_set1_epi32` only needs AVX, implied by the callers' AVX2.
        unsafe {
            Q {
                q: _mm256_set1_epi32(own.q as i32),
                two_q: _mm256_set1_epi32(2 * own.q as i32),
            }
        }
    }

    /// Loads `K` vectors at p, p + s, …, p + (K − 1)·s.
    #[inline(always)]
    unsafe fn load<const K: usize>(p: *const u32, s: usize) -> [__m256i; K] {
        std::array::from_fn(|k| unsafe { _mm256_loadu_si256(p.add(k * s) as *const __m256i) })
    }

    #[inline(always)]
    unsafe fn store<const K: usize>(p: *mut u32, s: usize, v: &[__m256i; K]) {
        for (k, x) in v.iter().enumerate() {
            unsafe { _mm256_storeu_si256(p.add(k * s) as *mut __m256i, *x) };
        }
    }

    /// Forward layers on 8 vectors: (k, k + 4) by t[0]; (0, 2), (1, 3) by t[1] and (4, 6),
    /// (5, 7) by t[2]; (2i, 2i + 1) by t[3 + i].
    #[inline(always)]
    unsafe fn fwd8(v: &mut [__m256i; 8], t: &[Tw; 7], c: Q) {
        let [v0, v1, v2, v3, v4, v5, v6, v7] = v;
        unsafe {
            fwd_bf(v0, v4, t[0], c);
            fwd_bf(v1, v5, t[0], c);
            fwd_bf(v2, v6, t[0], c);
            fwd_bf(v3, v7, t[0], c);
            fwd_bf(v0, v2, t[1], c);
            fwd_bf(v1, v3, t[1], c);
            fwd_bf(v4, v6, t[2], c);
            fwd_bf(v5, v7, t[2], c);
            fwd_bf(v0, v1, t[3], c);
            fwd_bf(v2, v3, t[4], c);
            fwd_bf(v4, v5, t[5], c);
            fwd_bf(v6, v7, t[6], c);
        }
    }

    /// The inverse of [`fwd8`]'s layers (times 8), in reverse order.
    #[inline(always)]
    unsafe fn inv8(v: &mut [__m256i; 8], t: &[Tw; 7], c: Q) {
        let [v0, v1, v2, v3, v4, v5, v6, v7] = v;
        unsafe {
            inv_bf(v0, v1, t[3], c);
            inv_bf(v2, v3, t[4], c);
            inv_bf(v4, v5, t[5], c);
            inv_bf(v6, v7, t[6], c);
            inv_bf(v0, v2, t[1], c);
            inv_bf(v1, v3, t[1], c);
            inv_bf(v4, v6, t[2], c);
            inv_bf(v5, v7, t[2], c);
            inv_bf(v0, v4, t[0], c);
            inv_bf(v1, v5, t[0], c);
            inv_bf(v2, v6, t[0], c);
            inv_bf(v3, v7, t[0], c);
        }
    }

    /// Forward layers on 4 vectors: (0, 2), (1, 3) by t[0]; (0, 1) by t[1], (2, 3) by t[2].
    #[inline(always)]
    unsafe fn fwd4(v: &mut [__m256i; 4], t: &[Tw; 3], c: Q) {
        let [v0, v1, v2, v3] = v;
        unsafe {
            fwd_bf(v0, v2, t[0], c);
            fwd_bf(v1, v3, t[0], c);
            fwd_bf(v0, v1, t[1], c);
            fwd_bf(v2, v3, t[2], c);
        }
    }

    /// The inverse of [`fwd4`]'s layers (times 4).
    #[inline(always)]
    unsafe fn inv4(v: &mut [__m256i; 4], t: &[Tw; 3], c: Q) {
        let [v0, v1, v2, v3] = v;
        unsafe {
            inv_bf(v0, v1, t[1], c);
            inv_bf(v2, v3, t[2], c);
            inv_bf(v0, v2, t[0], c);
            inv_bf(v1, v3, t[0], c);
        }
    }

    /// The forward transform: the vertical passes, then the block pass.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn fwd(own: &Own, a: &mut [u32]) {
        let c = consts(own);
        for pass in &own.fwd_passes {
            unsafe { vertical::<true>(pass, a, c, false) };
        }
        unsafe { fwd_blocks(own, a, c) };
    }

    /// The inverse transform: the block pass, then the vertical passes back to layer 0, the
    /// last of which reduces to [0, q).
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn inv(own: &Own, a: &mut [u32]) {
        let c = consts(own);
        unsafe { inv_blocks(own, a, c, own.inv_passes.is_empty()) };
        let count = own.inv_passes.len();
        for (i, pass) in own.inv_passes.iter().enumerate() {
            unsafe { vertical::<false>(pass, a, c, i + 1 == count) };
        }
    }

    /// One vertical pass, forward or inverse: layers `layer .. layer + depth` (strides ≥ 64
    /// words). Group g of `layer` spans words [2tg, 2t(g + 1)); a block is 2^depth vectors at
    /// offsets k·s inside it (s = t / 2^(depth − 1)), closed under the pass's butterflies.
    /// `last` reduces the outputs to [0, q) (the inverse's final pass).
    #[target_feature(enable = "avx2")]
    unsafe fn vertical<const FORWARD: bool>(pass: &PassTw, a: &mut [u32], c: Q, last: bool) {
        let t = a.len() >> (pass.layer + 1);
        let s = t >> (pass.depth - 1);
        let per_group = (1usize << pass.depth) - 1;
        let p = a.as_mut_ptr();
        let groups = pass
            .w
            .chunks_exact(per_group)
            .zip(pass.ws.chunks_exact(per_group));
        // 2^layer groups of 2t words: base + 2t ≤ n for every group below.
        assert_eq!(groups.len() * 2 * t, a.len(), "pass built for another size");
        let fin = |v: &mut [__m256i]| {
            if last {
                for x in v.iter_mut() {
                    *x = unsafe { reduce(*x, c.q) };
                }
            }
        };
        for (g, (w, ws)) in groups.enumerate() {
            let base = g * 2 * t;
            let tw = |i: usize| unsafe { broadcast(w[i], ws[i]) };
            match pass.depth {
                3 => {
                    let tws: [Tw; 7] = std::array::from_fn(tw);
                    for j in (0..s).step_by(LANES) {
                        // base + j + 7s + 8 ≤ base + 8s = base + 2t.
                        let q = unsafe { p.add(base + j) };
                        let mut v: [__m256i; 8] = unsafe { load(q, s) };
                        if FORWARD {
                            unsafe { fwd8(&mut v, &tws, c) };
                        } else {
                            unsafe { inv8(&mut v, &tws, c) };
                        }
                        fin(&mut v);
                        unsafe { store(q, s, &v) };
                    }
                }
                2 => {
                    let tws: [Tw; 3] = std::array::from_fn(tw);
                    for j in (0..s).step_by(LANES) {
                        // base + j + 3s + 8 ≤ base + 4s = base + 2t.
                        let q = unsafe { p.add(base + j) };
                        let mut v: [__m256i; 4] = unsafe { load(q, s) };
                        if FORWARD {
                            unsafe { fwd4(&mut v, &tws, c) };
                        } else {
                            unsafe { inv4(&mut v, &tws, c) };
                        }
                        fin(&mut v);
                        unsafe { store(q, s, &v) };
                    }
                }
                _ => {
                    let w0 = tw(0);
                    for j in (0..s).step_by(LANES) {
                        // base + j + s + 8 ≤ base + 2s = base + 2t.
                        let q = unsafe { p.add(base + j) };
                        let mut v: [__m256i; 2] = unsafe { load(q, s) };
                        let [v0, v1] = &mut v;
                        if FORWARD {
                            unsafe { fwd_bf(v0, v1, w0, c) };
                        } else {
                            unsafe { inv_bf(v0, v1, w0, c) };
                        }
                        fin(&mut v);
                        unsafe { store(q, s, &v) };
                    }
                }
            }
        }
    }

    /// One 64-point block's twiddles ([`BLOCK_TW`] words, see `block_twiddles`): the 7
    /// broadcast ones of its vertical layers and the 7 lane vectors of the last three.
    #[inline(always)]
    unsafe fn block_tw(w: &[u32], ws: &[u32]) -> ([Tw; 7], [Tw; 7]) {
        let vertical = std::array::from_fn(|i| unsafe { broadcast(w[i], ws[i]) });
        let lanes = std::array::from_fn(|i| {
            let o = LANES * (i + 1);
            unsafe { lanes(&w[o..o + LANES], &ws[o..o + LANES]) }
        });
        (vertical, lanes)
    }

    /// The last six forward layers, 64 points at a time: the block's 8 vectors through three
    /// vertical layers (strides 32, 16, 8 words), then transposed so that vector k holds point
    /// k of the block's eight 8-point rows (each row a group of the stride-4 layer) for the
    /// last three, reduced to [0, q) and transposed back.
    #[target_feature(enable = "avx2")]
    unsafe fn fwd_blocks(own: &Own, a: &mut [u32], c: Q) {
        let tables = own
            .fb
            .chunks_exact(BLOCK_TW)
            .zip(own.fbs.chunks_exact(BLOCK_TW));
        for (blk, (w, ws)) in a.chunks_exact_mut(BLOCK).zip(tables) {
            // `blk` is 64 words: 8 vectors at stride 8.
            let mut v: [__m256i; 8] = unsafe { load(blk.as_ptr(), LANES) };
            let (vertical, lanes) = unsafe { block_tw(w, ws) };
            unsafe {
                fwd8(&mut v, &vertical, c);
                transpose(&mut v);
                fwd8(&mut v, &lanes, c);
            }
            for x in v.iter_mut() {
                *x = unsafe { reduce(reduce(*x, c.two_q), c.q) };
            }
            unsafe {
                transpose(&mut v);
                store(blk.as_mut_ptr(), LANES, &v);
            }
        }
    }

    /// The inverse of [`fwd_blocks`] (times 64); `last` reduces the outputs to [0, q).
    #[target_feature(enable = "avx2")]
    unsafe fn inv_blocks(own: &Own, a: &mut [u32], c: Q, last: bool) {
        let tables = own
            .ib
            .chunks_exact(BLOCK_TW)
            .zip(own.ibs.chunks_exact(BLOCK_TW));
        for (blk, (w, ws)) in a.chunks_exact_mut(BLOCK).zip(tables) {
            let mut v: [__m256i; 8] = unsafe { load(blk.as_ptr(), LANES) };
            let (vertical, lanes) = unsafe { block_tw(w, ws) };
            unsafe {
                transpose(&mut v);
                inv8(&mut v, &lanes, c);
                transpose(&mut v);
                inv8(&mut v, &vertical, c);
            }
            if last {
                for x in v.iter_mut() {
                    *x = unsafe { reduce(*x, c.q) };
                }
            }
            unsafe { store(blk.as_mut_ptr(), LANES, &v) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn primes_below_2_30(n: usize, count: usize) -> Vec<u32> {
        let step = 2 * n as u64;
        let mut q = (1u64 << 30) - (1u64 << 30) % step + 1;
        let mut out = Vec::new();
        while out.len() < count {
            q -= step;
            if crate::arith::is_prime(q) {
                out.push(q as u32);
            }
        }
        out
    }

    fn random_vec(n: usize, q: u32, seed: u64) -> Vec<u32> {
        let mut s = seed;
        (0..n)
            .map(|_| {
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((s >> 33) % q as u64) as u32
            })
            .collect()
    }

    /// This module's transforms (AVX2 passes and the layer-by-layer reference) equal
    /// tfhe-ntt's, word for word, at every size from 64 to 16384 and on several primes, and
    /// on the edge inputs (all zero, all q − 1).
    #[test]
    fn equals_tfhe_ntt_at_every_size() {
        for log_n in 6..=14 {
            let n = 1usize << log_n;
            for q in primes_below_2_30(n, 3) {
                let ntt = Ntt32::new(n, q).expect("NTT-friendly prime");
                assert!(
                    !has_avx2() || ntt.is_own(),
                    "n = {n}, q = {q}: own transform off"
                );
                let Some(own) = &ntt.own else { continue };
                let mut inputs = vec![vec![0; n], vec![q - 1; n]];
                inputs.extend((0..3).map(|s| random_vec(n, q, s)));
                for x in inputs {
                    let mut want = x.clone();
                    ntt.tfhe.fwd(&mut want);
                    let (mut got, mut reference) = (x.clone(), x.clone());
                    ntt.fwd(&mut got);
                    own.fwd_scalar(&mut reference);
                    assert_eq!(got, want, "fwd, n = {n}, q = {q}");
                    assert_eq!(reference, want, "fwd reference, n = {n}, q = {q}");
                    let mut want = x.clone();
                    ntt.tfhe.inv(&mut want);
                    let (mut got, mut reference) = (x.clone(), x);
                    ntt.inv(&mut got);
                    own.inv_scalar(&mut reference);
                    assert_eq!(got, want, "inv, n = {n}, q = {q}");
                    assert_eq!(reference, want, "inv reference, n = {n}, q = {q}");
                }
            }
        }
    }

    /// inv(fwd(x)) = n·x mod q, and the forward transform is evaluation at the odd powers of
    /// ψ (checked directly for one slot against a plain polynomial evaluation).
    #[test]
    fn round_trip_and_evaluation() {
        let n = 4096;
        let q = primes_below_2_30(n, 1)[0];
        let ntt = Ntt32::new(n, q).expect("NTT-friendly prime");
        let x = random_vec(n, q, 7);
        let mut y = x.clone();
        ntt.fwd(&mut y);
        let mut one = vec![0u32; n];
        one[1] = 1;
        ntt.fwd(&mut one);
        let (psi, qq) = (one[0] as u64, q as u64);
        // Slot 1 is x(ψ^(2·brv(1)+1)) = x(ψ^(n+1)) = x(−ψ).
        let point = qq - psi;
        let mut eval = 0u64;
        for &c in x.iter().rev() {
            eval = (mul_mod(eval, point, qq) + c as u64) % qq;
        }
        assert_eq!(y[1] as u64, eval);
        ntt.inv(&mut y);
        for (a, b) in y.iter().zip(&x) {
            assert_eq!(*a as u64, mul_mod(*b as u64, n as u64, qq));
        }
    }
}
