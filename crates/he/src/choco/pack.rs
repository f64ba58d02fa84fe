//! CHOCO's rotational-redundancy packing (van der Hagen & Lucia, "Client-Optimized Algorithms
//! and Acceleration for Encrypted Compute Offloading", ASPLOS '22) beside the plain baseline.
//!
//! A window of width w (a power of two) holds a vector x of at most w values, cyclically.
//! * **Redundant**: the client packs the window twice, `[x | x]` over 2w slots. A left
//!   rotation of the whole row by k < w then leaves `x` rotated cyclically *within the window*
//!   in slots `[0, w)`: one HE rotation, no masking. Chains of rotations compose as long as the
//!   total shift stays below w, since every slot read lies in `[0, 2w)`.
//! * **Baseline**: the window is packed once, `[x]` over w slots. A windowed rotation by k is
//!   `mask_lo ⊙ rot(x, k) + mask_hi ⊙ rot(x, k − w)`: two HE rotations and two plaintext
//!   products, which also spend one multiplicative level of noise per rotation.
use crate::eval::Evaluator;
use crate::HeError;

/// How the client packs a window.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Packing {
    /// `[x | x]`: windowed rotations are single HE rotations.
    Redundant,
    /// `[x]`: windowed rotations need two rotations and two masks.
    Baseline,
}

impl Packing {
    /// Slots one window occupies.
    pub fn footprint(self, window: usize) -> usize {
        match self {
            Packing::Redundant => 2 * window,
            Packing::Baseline => window,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Packing::Redundant => "redundant",
            Packing::Baseline => "baseline",
        }
    }
}

impl std::str::FromStr for Packing {
    type Err = HeError;
    fn from_str(s: &str) -> Result<Self, HeError> {
        match s {
            "redundant" => Ok(Packing::Redundant),
            "baseline" => Ok(Packing::Baseline),
            _ => Err(HeError::Shape(format!(
                "unknown packing {s:?} (redundant or baseline)"
            ))),
        }
    }
}

fn check_window(len: usize, window: usize, packing: Packing, slots: usize) -> Result<(), HeError> {
    if !window.is_power_of_two() || len > window || packing.footprint(window) > slots {
        return Err(HeError::Shape(format!(
            "{len} values in a {} window of width {window} on {slots} slots",
            packing.name()
        )));
    }
    Ok(())
}

/// `[x | x]`: x zero-padded to the window width `window`, twice, then zeros up to `slots`.
pub fn redundant_pack(x: &[u64], window: usize, slots: usize) -> Result<Vec<u64>, HeError> {
    pack(x, window, slots, Packing::Redundant)
}

/// `[x]`: x zero-padded to the window width, then zeros up to `slots`.
pub fn baseline_pack(x: &[u64], window: usize, slots: usize) -> Result<Vec<u64>, HeError> {
    pack(x, window, slots, Packing::Baseline)
}

/// Packs `x` into one window at the start of a slot vector of `slots` slots.
pub fn pack(x: &[u64], window: usize, slots: usize, packing: Packing) -> Result<Vec<u64>, HeError> {
    check_window(x.len(), window, packing, slots)?;
    let mut v = vec![0u64; slots];
    v[..x.len()].copy_from_slice(x);
    if packing == Packing::Redundant {
        v[window..window + x.len()].copy_from_slice(x);
    }
    Ok(v)
}

/// The window's `len` values read back from a packed (or computed) slot vector: the first copy.
pub fn unpack(v: &[u64], len: usize) -> Result<Vec<u64>, HeError> {
    v.get(..len)
        .map(<[u64]>::to_vec)
        .ok_or(HeError::WrongLength {
            expected: len,
            got: v.len(),
        })
}

/// The masks of a baseline windowed rotation by `k` (0 < k < w): `lo` keeps slots `[0, w − k)`
/// of `rot(x, k)`, `hi` keeps slots `[w − k, w)` of `rot(x, k − w)`.
pub fn baseline_masks(window: usize, k: usize, slots: usize) -> (Vec<u64>, Vec<u64>) {
    let mut lo = vec![0u64; slots];
    let mut hi = vec![0u64; slots];
    lo[..window - k].iter_mut().for_each(|v| *v = 1);
    hi[window - k..window].iter_mut().for_each(|v| *v = 1);
    (lo, hi)
}

/// Rotation steps a windowed rotation by `k` needs keys for.
pub fn windowed_steps(packing: Packing, window: usize, k: usize, row_len: usize) -> Vec<usize> {
    match (packing, k % window) {
        (_, 0) => Vec::new(),
        (Packing::Redundant, k) => vec![k],
        (Packing::Baseline, k) => vec![k, row_len - window + k],
    }
}

/// Encoded masks of a baseline windowed rotation (server setup).
pub struct WindowMasks<P> {
    lo: P,
    hi: P,
}

impl<P> WindowMasks<P> {
    pub fn new<E: Evaluator<Pt = P>>(ev: &E, window: usize, k: usize) -> Result<Self, HeError> {
        let (lo, hi) = baseline_masks(window, k, ev.slots());
        Ok(WindowMasks {
            lo: ev.encode(|| lo)?,
            hi: ev.encode(|| hi)?,
        })
    }
}

/// Rotates the window of `ct` left by `k` (cyclically within the window of width `window`):
/// one HE rotation for redundant packing; for the baseline, two rotations and two products
/// with `masks` (required then).
pub fn windowed_rotate<E: Evaluator>(
    ev: &E,
    ct: &E::Ct,
    k: usize,
    window: usize,
    packing: Packing,
    masks: Option<&WindowMasks<E::Pt>>,
) -> Result<E::Ct, HeError> {
    let k = k % window;
    if k == 0 {
        return Ok(ct.clone());
    }
    match packing {
        Packing::Redundant => ev.rotate(ct, k),
        Packing::Baseline => {
            let m = masks.ok_or(HeError::Shape(
                "a baseline windowed rotation needs its masks".into(),
            ))?;
            let a = ev.sc_mult(&ev.rotate(ct, k)?, &m.lo);
            let b = ev.sc_mult(&ev.rotate(ct, ev.row_len() - window + k)?, &m.hi);
            Ok(ev.add(&a, &b))
        }
    }
}
