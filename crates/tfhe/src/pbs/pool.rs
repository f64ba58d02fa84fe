//! Max-pooling on base-4 digits (SHE's max-pool, a comparison and a multiplexer per pair, with
//! lookups in place of gates).
//!
//! - A window's max is separable: the max over its rows of each row's max. The row maxima are
//!   computed once per input row and output column and shared by the windows that overlap
//!   vertically, so a 3×3 window at stride 1 costs about 4 pairwise maxima, not 8.
//! - `u ≥ v` is a comparison chain from the lowest digit up, one lookup for the lowest digit and
//!   two for every other (a three-way digit comparison, then folding it into the state): a digit
//!   pair and the state are five bits, one more than a bootstrap reads.
//! - The top digit of `max(u, v)` is the max of the top digits (one lookup, shared with the
//!   comparison by many-LUT when both are single bits); every lower digit is selected by two
//!   lookups (`s ? u_j : 0` and `s ? 0 : v_j`) and their sum refreshed by a third, so each
//!   output digit is fresh (noise level 1) and may be packed with another by the next step.
use super::{digits_for, lut, lut2, pack, par_map, Item, PbsBackend, Pool, Shape, BASE};

/// Pools `acts` (one digit vector per value of `inp`, CHW order) to `out`'s shape.
pub(super) fn run<B: PbsBackend + Sync>(
    b: &mut B,
    p: &Pool,
    inp: Shape,
    out: Shape,
    acts: &[Vec<Item<B::Ct>>],
) -> Vec<Vec<Item<B::Ct>>> {
    let digits = digits_for(p.bits);
    // Input positions of window `o` along one axis of length n (padding skipped).
    let window = |o: usize, n: usize| -> Vec<usize> {
        (0..p.kernel)
            .filter_map(|k| (o * p.stride + k).checked_sub(p.padding))
            .filter(|i| *i < n)
            .collect()
    };
    // Row maxima of every (channel, input row, output column) a window reads.
    let rows: Vec<(usize, usize, usize)> = (0..inp.c)
        .flat_map(|c| (0..inp.h).map(move |iy| (c, iy)))
        .filter(|(_, iy)| (0..out.h).any(|oy| window(oy, inp.h).contains(iy)))
        .flat_map(|(c, iy)| (0..out.w).map(move |ox| (c, iy, ox)))
        .collect();
    let row_max = par_map(b, rows.len(), |b, r| {
        let (c, iy, ox) = rows[r];
        let taps: Vec<&[Item<B::Ct>]> = window(ox, inp.w)
            .into_iter()
            .map(|ix| acts[(c * inp.h + iy) * inp.w + ix].as_slice())
            .collect();
        max_all(b, taps, digits)
    });
    let index = |c: usize, iy: usize, ox: usize| rows.binary_search(&(c, iy, ox)).ok();
    par_map(b, out.len(), |b, o| {
        let (c, oy, ox) = (o / (out.h * out.w), (o / out.w) % out.h, o % out.w);
        let taps: Vec<&[Item<B::Ct>]> = window(oy, inp.h)
            .into_iter()
            .filter_map(|iy| index(c, iy, ox))
            .map(|r| row_max[r].as_slice())
            .collect();
        max_all(b, taps, digits)
    })
}

/// The max of several values by a balanced tree of pairwise maxima.
fn max_all<B: PbsBackend>(
    b: &mut B,
    values: Vec<&[Item<B::Ct>]>,
    digits: usize,
) -> Vec<Item<B::Ct>> {
    let mut level: Vec<Vec<Item<B::Ct>>> = match values.as_slice() {
        // A window always holds a position (padding < kernel); an empty one would be a bug
        // upstream, recorded as a violation with a zero value so the circuit stays well formed.
        [] => {
            b.violation();
            return (0..digits).map(|_| super::trivial(b, 0)).collect();
        }
        [one] => return one.to_vec(),
        _ => values
            .chunks(2)
            .map(|pair| match pair {
                [u, v] => max2(b, u, v),
                _ => pair.concat(),
            })
            .collect(),
    };
    while level.len() > 1 {
        let mut next = Vec::with_capacity(level.len().div_ceil(2));
        let mut it = level.into_iter();
        while let Some(u) = it.next() {
            next.push(match it.next() {
                Some(v) => max2(b, &u, &v),
                None => u,
            });
        }
        level = next;
    }
    level.pop().unwrap_or_default()
}

/// `max(u, v)` of two unsigned values of the same digit count (canonical, fresh digits).
fn max2<B: PbsBackend>(b: &mut B, u: &[Item<B::Ct>], v: &[Item<B::Ct>]) -> Vec<Item<B::Ct>> {
    let n = u.len().min(v.len());
    if n == 0 {
        return Vec::new();
    }
    let top = n - 1;
    let hi = |x: u64| (x % BASE).max(x / BASE);
    if top == 0 {
        // One digit: the max of the pair is the answer, no comparison needed.
        let pair = pack(b, &u[0], &v[0]);
        return vec![lut(b, &pair, u[0].max.max(v[0].max), hi)];
    }
    let ge = |x: u64| u64::from(x % BASE >= x / BASE);
    // Three-way digit comparison: 0 below, 1 equal, 2 above.
    let cmp = |x: u64| match (x % BASE).cmp(&(x / BASE)) {
        std::cmp::Ordering::Less => 0,
        std::cmp::Ordering::Equal => 1,
        std::cmp::Ordering::Greater => 2,
    };
    let fold = |x: u64| {
        let (c, s) = (x % BASE, x / BASE);
        u64::from(c == 2 || (c == 1 && s == 1))
    };
    let mut state = None;
    let mut top_digit = None;
    for j in 0..n {
        let pair = pack(b, &u[j], &v[j]);
        let small = pair.max < super::SPACE / 2;
        let out_max = u[j].max.max(v[j].max);
        let c = match (j == top, &state) {
            (_, None) => lut(b, &pair, 1, ge),
            (true, Some(_)) if small => {
                let (c, m) = lut2(b, &pair, (2, &cmp), (out_max, &hi));
                top_digit = Some(m);
                c
            }
            (_, Some(_)) => lut(b, &pair, 2, cmp),
        };
        state = Some(match state {
            None => c,
            Some(s) => {
                let q = pack(b, &c, &s);
                lut(b, &q, 1, fold)
            }
        });
    }
    let Some(s) = state else {
        return Vec::new();
    };
    let top_digit = match top_digit {
        Some(m) => m,
        None => {
            let pair = pack(b, &u[top], &v[top]);
            let out_max = u[top].max.max(v[top].max);
            lut(b, &pair, out_max, hi)
        }
    };
    let mut out: Vec<Item<B::Ct>> = (0..top)
        .map(|j| {
            let pu = pack(b, &u[j], &s);
            let pv = pack(b, &v[j], &s);
            let a = lut(
                b,
                &pu,
                u[j].max,
                |x| if x / BASE == 1 { x % BASE } else { 0 },
            );
            let c = lut(
                b,
                &pv,
                v[j].max,
                |x| if x / BASE == 1 { 0 } else { x % BASE },
            );
            let max = u[j].max.max(v[j].max);
            // One of the two is zero, so the sum is the selected digit.
            let sum = Item {
                ct: b.add(&a.ct, &c.ct),
                max,
                noise: a.noise + c.noise,
            };
            lut(b, &sum, max, |x| x)
        })
        .collect();
    out.push(top_digit);
    out
}
