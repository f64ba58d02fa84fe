//! A few coefficients of an inverse NTT, all in one residue class mod a power of two, without
//! the full transform: a decimated inverse transform.
//!
//! The server's sparse response (`Params::finish_response_at`) sends c0 only at the result
//! coefficients, and the coefficient layouts put those at j ≡ r (mod s) for a power of two s
//! (s = the matrix's column count for the GRU's hidden projections). With NTT slot e holding
//! X_e = x(ζ^e) (e odd, ζ a primitive 2n-th root), x_j = n⁻¹ Σ_e X_e ζ^(−e·j). For j = s·i + r,
//! ζ^(−e·j) = ζ^(−e·r)·ζ^(−s·(e·i mod M)) with M = 2n/s, so
//!
//! * Y_c = n⁻¹ Σ_{e ≡ c (mod M)} X_e·ζ^(−e·r) for the n/s odd classes c (one product per slot),
//! * x_{s·i+r} = Σ_c Y_c·ζ^(−s·(c·i mod M)) (n/s products per wanted coefficient),
//!
//! instead of the n/2·log2 n butterflies of the whole inverse transform. Exact: the results are
//! the residues `ModCtx::to_coeff` gives, fully reduced.
//!
//! Arithmetic: q < 2^62 odd, R = 2^64. The tables hold their constants times R² mod q, the
//! products are summed as plain 128-bit integers (one multiply per term, the overflows of the
//! 128-bit sum counted), and one two-word Montgomery reduction per sum divides R² back out.

use std::sync::{Arc, Mutex};

use crate::arith::{inv_mod, mul_mod};
use crate::params::ModCtx;

/// Most classes n/s the decimated path takes: each wanted coefficient costs n/s products.
const MAX_CLASSES: usize = 256;
/// Fewest classes a new table is built with: a block with one result has s = n, and a table
/// for that s would serve that one residue mod n only; with s ≤ n/32 it also serves the
/// layout's other blocks (at n + 32 products per coefficient, still well under the budget).
const MIN_CLASSES: usize = 32;
/// Most cached tables (each ≈ 12·n + 8·2n/s bytes per limb, ≈ 200 KiB at n = 8192, two limbs).
/// A GRU session needs one or two tables; past the bound the full transform runs instead.
const MAX_TABLES: usize = 8;

/// Whether the decimated transform for `count` coefficients with n/s = `classes` costs less
/// than the full inverse NTT (n/2·log2 n butterflies, each a modular product and two
/// additions): n + count·classes products, budgeted at 4n (`decimated_response_timing`).
fn worth_it(n: usize, classes: usize, count: usize) -> bool {
    classes <= MAX_CLASSES && count.saturating_mul(classes) <= 3 * n
}

/// Montgomery reduction mod an odd q < 2^62 with R = 2^64.
#[derive(Clone, Copy)]
struct Mont {
    q: u64,
    /// −q⁻¹ mod 2^64.
    neg_q_inv: u64,
}

impl Mont {
    fn new(q: u64) -> Mont {
        // Newton's iteration for q⁻¹ mod 2^64: q·q ≡ 1 (mod 8) for odd q, and each step doubles
        // the number of correct low bits (3 → 6 → 12 → 24 → 48 → 96).
        let mut inv = q;
        for _ in 0..5 {
            inv = inv.wrapping_mul(2u64.wrapping_sub(q.wrapping_mul(inv)));
        }
        Mont {
            q,
            neg_q_inv: inv.wrapping_neg(),
        }
    }

    /// v·R⁻¹ mod q, in [0, v/R + q): one Montgomery step (v < 2^127 − q·R).
    #[inline(always)]
    fn redc(self, v: u128) -> u128 {
        let m = (v as u64).wrapping_mul(self.neg_q_inv);
        (v + m as u128 * self.q as u128) >> 64
    }

    /// V·R⁻² mod q in [0, q) for V = carries·2^128 + sum (carries < 2^59): two Montgomery
    /// steps, the first on the low word only so that no third word is ever formed.
    #[inline(always)]
    fn reduce_sum(self, carries: u64, sum: u128) -> u64 {
        // (sum mod R + m·q)/R ≤ q, exact; V·R⁻¹ ≡ carries·R + ⌊sum/R⌋ + that (mod q).
        let low = self.redc(sum as u64 as u128);
        let v1 = ((carries as u128) << 64) + (sum >> 64) + low;
        // v1 < 2^124, so the second step gives less than v1/R + q ≤ carries + 1 + q: the
        // callers' sums carry at most a few thousand times, a few subtractions at most.
        let mut r = self.redc(v1) as u64;
        while r >= self.q {
            r -= self.q;
        }
        r
    }

    /// a·b·R⁻¹ mod q, fully reduced (a, b < q).
    fn mul(self, a: u64, b: u64) -> u64 {
        let r = self.redc(a as u128 * b as u128) as u64;
        if r >= self.q {
            r - self.q
        } else {
            r
        }
    }
}

/// One limb's tables for the coefficients ≡ r (mod s).
struct LimbTables {
    mont: Mont,
    /// NTT slot indices grouped by class: slots with e ≡ 2k + 1 (mod M) at [k·s, (k + 1)·s).
    order: Vec<u32>,
    /// n⁻¹·ζ^(−e·r)·R² mod q for the slot at the same place of `order`.
    twist: Vec<u64>,
    /// ζ^(−s·k)·R² mod q for k < M.
    roots: Vec<u64>,
}

/// The decimated inverse transform for the coefficients ≡ r (mod s), every limb of Q.
pub(crate) struct Decimated {
    s: usize,
    r: usize,
    limbs: Vec<LimbTables>,
}

impl Decimated {
    fn build(qs: &[ModCtx], n: usize, s: usize, r: usize) -> Option<Decimated> {
        let limbs = qs
            .iter()
            .map(|md| LimbTables::build(md, n, s, r))
            .collect::<Option<Vec<_>>>()?;
        Some(Decimated { s, r, limbs })
    }

    /// a[p] ← the coefficient p of the inverse NTT of `a` (limb `limb`, NTT order, any u64
    /// values: the products stay below q·2^64) for each p in `positions`, all ≡ r (mod s) (as `Cache::tables_for` chose); the
    /// other entries of `a` are left as they were (NTT values). Returns false, touching
    /// nothing, on a position outside the class or the ring, or a wrong limb or length.
    pub(crate) fn coeffs_at(&self, limb: usize, a: &mut [u64], positions: &[usize]) -> bool {
        let Some(t) = self.limbs.get(limb) else {
            return false;
        };
        if a.len() != t.order.len()
            || positions
                .iter()
                .any(|&p| p >= a.len() || p % self.s != self.r)
        {
            return false;
        }
        let mut y = vec![0u64; t.order.len() / self.s];
        class_sums(t.mont, &t.order, &t.twist, a, self.s, &mut y);
        // Every class sum is taken before the first write into `a`.
        for &p in positions {
            a[p] = coefficient(t.mont, &y, &t.roots, p / self.s);
        }
        true
    }
}

impl LimbTables {
    fn build(md: &ModCtx, n: usize, s: usize, r: usize) -> Option<LimbTables> {
        let q = md.q;
        let two_n = 2 * n;
        let m_classes = two_n / s;
        if q % 2 == 0 || md.exp_of_idx.len() != n || !s.is_power_of_two() || s > n || r >= s {
            return None;
        }
        let mont = Mont::new(q);
        let r1 = ((1u128 << 64) % q as u128) as u64;
        let r2 = mul_mod(r1, r1, q);
        // powers[k] = ζ^(−k)·R²: each step a Montgomery product with ζ⁻¹·R.
        let step = mul_mod(inv_mod(md.root, q), r1, q);
        let mut powers = Vec::with_capacity(two_n);
        let mut p = r2;
        for _ in 0..two_n {
            powers.push(p);
            p = mont.mul(p, step);
        }
        let n_inv_r = mul_mod(inv_mod(n as u64 % q, q), r1, q);
        let classes = n / s;
        let mut fill = vec![0usize; classes];
        let mut order = vec![0u32; n];
        let mut twist = vec![0u64; n];
        for (idx, &e) in md.exp_of_idx.iter().enumerate() {
            let e = e as usize;
            if e % 2 == 0 || e >= two_n {
                return None;
            }
            let k = (e % m_classes) / 2;
            let at = k * s + fill[k];
            // Each odd class mod M holds exactly s of the n odd exponents below 2n.
            if fill[k] >= s {
                return None;
            }
            fill[k] += 1;
            order[at] = idx as u32;
            twist[at] = mont.mul(powers[(e * r) % two_n], n_inv_r);
        }
        let roots = (0..m_classes).map(|k| powers[(s * k) % two_n]).collect();
        Some(LimbTables {
            mont,
            order,
            twist,
            roots,
        })
    }
}

fast_dispatch! {
    /// y[k] ← Σ a[order[j]]·twist[j] over the k-th run of s entries, reduced (÷ R²) mod q.
    fn class_sums(mont: Mont, order: &[u32], twist: &[u64], a: &[u64], s: usize, y: &mut [u64]) -> () {
        for ((y, idx), tw) in y.iter_mut().zip(order.chunks_exact(s)).zip(twist.chunks_exact(s)) {
            // Two independent sums (even and odd terms): half the add-with-carry chain each.
            let mut sums = [(0u128, 0u64); 2];
            let pairs = idx.chunks_exact(2).zip(tw.chunks_exact(2));
            for (i2, w2) in pairs {
                for ((sum, carries), (&i, &w)) in sums.iter_mut().zip(i2.iter().zip(w2)) {
                    let (v, c) = sum.overflowing_add(a[i as usize] as u128 * w as u128);
                    *sum = v;
                    *carries += c as u64;
                }
            }
            if s % 2 == 1 {
                let (v, c) = sums[0].0.overflowing_add(a[idx[s - 1] as usize] as u128 * tw[s - 1] as u128);
                sums[0] = (v, sums[0].1 + c as u64);
            }
            let (v, c) = sums[0].0.overflowing_add(sums[1].0);
            *y = mont.reduce_sum(sums[0].1 + sums[1].1 + c as u64, v);
        }
    }
}

fast_dispatch! {
    /// Σ_k y[k]·ζ^(−s·((2k + 1)·i mod M)) reduced mod q: coefficient s·i + r.
    fn coefficient(mont: Mont, y: &[u64], roots: &[u64], i: usize) -> u64 {
        let mask = roots.len() - 1;
        let (mut sum, mut carries) = (0u128, 0u64);
        let mut k = i & mask;
        for &yv in y {
            let (v, c) = sum.overflowing_add(yv as u128 * roots[k] as u128);
            sum = v;
            carries += c as u64;
            k = (k + 2 * i) & mask;
        }
        mont.reduce_sum(carries, sum)
    }
}

/// The decimated tables built so far, shared by every thread using the parameters.
#[derive(Default)]
pub(crate) struct Cache(Mutex<Vec<Arc<Decimated>>>);

impl Cache {
    /// Tables serving all of `positions` when the decimated transform is cheaper than the full
    /// one for them (largest s first, a cached table when one serves), else None.
    pub(crate) fn tables_for(
        &self,
        qs: &[ModCtx],
        n: usize,
        positions: &[usize],
    ) -> Option<Arc<Decimated>> {
        let &first = positions.first()?;
        if !n.is_power_of_two() || positions.iter().any(|&p| p >= n) {
            return None;
        }
        // The largest power of two s ≤ n with every position ≡ first (mod s).
        let log_s = positions
            .iter()
            .map(|&p| (p ^ first).trailing_zeros())
            .min()
            .unwrap_or(u32::MAX)
            .min(n.trailing_zeros());
        let s_all = 1usize << log_s;
        let count = positions.len();
        // A poisoned lock only means another thread panicked mid-build: use the full transform.
        let mut cache = self.0.lock().ok()?;
        let cached = cache
            .iter()
            .filter(|d| d.s <= s_all && first % d.s == d.r && worth_it(n, n / d.s, count))
            .max_by_key(|d| d.s);
        if let Some(d) = cached {
            return Some(Arc::clone(d));
        }
        let s = s_all.min(n / MIN_CLASSES).max(1);
        if !worth_it(n, n / s, count) || cache.len() >= MAX_TABLES {
            return None;
        }
        let d = Arc::new(Decimated::build(qs, n, s, first % s)?);
        cache.push(Arc::clone(&d));
        Some(d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::Params;

    fn xorshift(seed: u64) -> impl FnMut() -> u64 {
        let mut x = seed;
        move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        }
    }

    /// The Montgomery helpers against u128 `%`, at the edges of their ranges.
    #[test]
    fn reduce_sum_matches_remainder() {
        let params = Params::by_name("n8192-z2k32").expect("params");
        let mut next = xorshift(7);
        for md in &params.0.qs {
            let q = md.q;
            let mont = Mont::new(q);
            assert_eq!(q.wrapping_mul(mont.neg_q_inv), u64::MAX);
            let r2 = {
                let r1 = ((1u128 << 64) % q as u128) as u64;
                mul_mod(r1, r1, q)
            };
            let r2_inv = inv_mod(r2, q);
            for (carries, sum) in [
                (0u64, 0u128),
                (0, u128::MAX),
                (1 << 13, u128::MAX),
                (1 << 13, 0),
                (next() >> 50, (next() as u128) << 64 | next() as u128),
            ] {
                let big = (carries as u128 % q as u128, sum % q as u128);
                // V mod q with V = carries·2^128 + sum.
                let two128 = mul_mod(
                    ((1u128 << 64) % q as u128) as u64,
                    ((1u128 << 64) % q as u128) as u64,
                    q,
                );
                let v = (mul_mod(big.0 as u64, two128, q) as u128 + big.1) % q as u128;
                assert_eq!(
                    mont.reduce_sum(carries, sum),
                    mul_mod(v as u64, r2_inv, q),
                    "q {q} carries {carries} sum {sum}"
                );
            }
        }
    }

    /// The decimated coefficients equal the full inverse NTT's, both limbs, for s = 1 … n
    /// (incl. 64 and 128, every r of some, all or some of the class's coefficients, in any
    /// order and repeated), on random and extreme (0, q − 1) NTT values; positions outside
    /// the class are refused without touching anything.
    #[test]
    fn decimated_matches_full_inverse() {
        let params = Params::by_name("n8192-z2k32").expect("params");
        let n = params.n();
        let mut next = xorshift(0x9e37_79b9_7f4a_7c15);
        for s in [1usize, 2, 32, 64, 128, 256, 1024, n] {
            let rs: Vec<usize> = if s <= 2 {
                (0..s).collect()
            } else {
                vec![0, 1, s / 2, s - 1, next() as usize % s]
            };
            for r in rs {
                let d = Decimated::build(&params.0.qs, n, s, r).expect("tables");
                for (limb, md) in params.0.qs.iter().enumerate() {
                    let q = md.q;
                    for kind in 0..3 {
                        let ntt: Vec<u64> = (0..n)
                            .map(|_| match kind {
                                0 => next() % q,
                                1 => q - 1,
                                _ => 0,
                            })
                            .collect();
                        let mut full = ntt.clone();
                        md.to_coeff(&mut full);
                        let rows = n / s;
                        // (At s = 1 all n coefficients would cost n² products: 64 of them.)
                        let all: Vec<usize> = (0..rows.min(64 * s)).map(|i| s * i + r).collect();
                        let some: Vec<usize> = (0..rows.min(7))
                            .map(|_| s * (next() as usize % rows) + r)
                            .chain([r, s * (rows - 1) + r])
                            .collect();
                        for pos in [&all[..], &some[..]] {
                            let mut a = ntt.clone();
                            assert!(d.coeffs_at(limb, &mut a, pos));
                            for &p in pos {
                                assert_eq!(a[p], full[p], "s {s} r {r} limb {limb} p {p}");
                            }
                            // Only the positions were written.
                            let mut written = vec![false; n];
                            pos.iter().for_each(|&p| written[p] = true);
                            assert!((0..n).all(|j| written[j] || a[j] == ntt[j]));
                        }
                        if s > 1 {
                            let mut a = ntt.clone();
                            let off = (r + 1) % s;
                            assert!(!d.coeffs_at(limb, &mut a, &[r, off]));
                            assert!(!d.coeffs_at(limb, &mut a, &[n + r]));
                            assert_eq!(a, ntt);
                        }
                    }
                }
                assert!(!d.coeffs_at(2, &mut vec![0; n], &[r]));
                assert!(!d.coeffs_at(0, &mut vec![0; n - 1], &[r]));
            }
        }
    }

    /// `tables_for`: the GRU's hidden-projection shapes take the decimated path with the
    /// largest s; input-projection shapes (stride 10, 100) and random position sets fall back;
    /// a cached table serves any position set it covers; the cache stays bounded.
    #[test]
    fn table_choice() {
        let params = Params::by_name("n8192-z2k32").expect("params");
        let n = params.n();
        let qs = &params.0.qs;
        let cache = Cache::default();
        let at =
            |m: usize, rows: usize| -> Vec<usize> { (0..rows).map(|i| i * m + m - 1).collect() };
        let d = cache.tables_for(qs, n, &at(128, 58)).expect("H = 128");
        assert_eq!((d.s, d.r), (128, 127));
        let d = cache.tables_for(qs, n, &at(64, 128)).expect("H = 64");
        assert_eq!((d.s, d.r), (64, 63));
        // One position of the H = 128 layout: the cached s = 128 table serves it.
        let d = cache
            .tables_for(qs, n, &[128 * 40 + 127])
            .expect("one position");
        assert_eq!((d.s, d.r), (128, 127));
        for m in [10usize, 100] {
            assert!(cache.tables_for(qs, n, &at(m, n / m)).is_none(), "m {m}");
            assert!(cache.tables_for(qs, n, &at(m, 81)).is_none(), "m {m}");
        }
        // Too many coefficients for the class count: 256 classes, 97 rows > 3n/256.
        assert!(cache.tables_for(qs, n, &at(32, 97)).is_none());
        assert!(cache.tables_for(qs, n, &at(32, 96)).is_some());
        assert!(cache.tables_for(qs, n, &[]).is_none());
        assert!(cache.tables_for(qs, n, &[5, n]).is_none());
        // Random position sets: whenever a table comes back it covers every position.
        let mut next = xorshift(3);
        for round in 0..200 {
            let count = 1 + next() as usize % 100;
            let stride = 1usize << (next() % 9);
            let r = next() as usize % stride;
            let mut pos: Vec<usize> = (0..count)
                .map(|_| (next() as usize % (n / stride)) * stride + r)
                .collect();
            if round % 2 == 0 {
                // One stray position breaks the class: the largest s shrinks.
                pos.push(next() as usize % n);
            }
            let s_all = 1usize
                << pos
                    .iter()
                    .map(|&p| (p ^ pos[0]).trailing_zeros())
                    .min()
                    .unwrap_or(64)
                    .min(13);
            match cache.tables_for(qs, n, &pos) {
                Some(d) => {
                    assert!(pos.iter().all(|&p| p % d.s == d.r));
                    assert!(worth_it(n, n / d.s, pos.len()));
                }
                None => assert!(
                    !worth_it(n, n / s_all.min(n / MIN_CLASSES), pos.len())
                        || cache.0.lock().expect("lock").len() >= MAX_TABLES
                ),
            }
            assert!(cache.0.lock().expect("lock").len() <= MAX_TABLES);
        }
    }
}

#[cfg(test)]
mod timing {
    use super::*;
    use crate::params::Params;
    use std::time::Instant;

    /// Manual timer for `worth_it`'s budget (not a check): `cargo test --release -p
    /// secinfer-he --lib decimated_response_timing -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn decimated_response_timing() {
        let params = Params::by_name("n8192-z2k32").expect("params");
        let n = params.n();
        let md = &params.0.qs[0];
        let ntt: Vec<u64> = (0..n as u64).map(|i| (i * 0x9e37_79b9) % md.q).collect();
        let reps = 300;
        let time = |label: &str, f: &mut dyn FnMut(&mut [u64])| {
            let mut a = ntt.clone();
            let t = Instant::now();
            for _ in 0..reps {
                a.copy_from_slice(&ntt);
                f(&mut a);
            }
            eprintln!(
                "{label}: {:.1} µs",
                t.elapsed().as_secs_f64() * 1e6 / reps as f64
            );
        };
        time("copy + to_coeff (one 62-bit prime)", &mut |a| {
            md.to_coeff(a)
        });
        for (s, rows) in [
            (128usize, 58usize),
            (128, 64),
            (64, 64),
            (64, 128),
            (32, 96),
            (32, 256),
        ] {
            let d = Decimated::build(&params.0.qs, n, s, s - 1).expect("tables");
            let pos: Vec<usize> = (0..rows).map(|i| i * s + s - 1).collect();
            time(
                &format!("copy + decimated s {s}, {rows} coefficients"),
                &mut |a| {
                    assert!(d.coeffs_at(0, a, &pos));
                },
            );
        }
        let t = Instant::now();
        let d = Decimated::build(&params.0.qs, n, 128, 127).expect("tables");
        eprintln!(
            "build (s 128, both limbs): {:.1} µs",
            t.elapsed().as_secs_f64() * 1e6
        );
        drop(d);
    }
}
