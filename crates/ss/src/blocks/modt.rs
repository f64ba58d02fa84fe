//! The nonlinear step of GAZELLE / GALA networks on additive shares mod an odd prime t (the HE
//! plaintext modulus) by OT instead of garbled circuits, in the style of SIRNN and Cheetah: the
//! wrap bit of x0 + x1 over t from one millionaires' comparison, the exact truncation on a
//! power-of-two ring (SIRNN's truncate-reduce), ReLU and max-pooling by comparisons and
//! multiplexers there, and the result back to shares mod t by a 1-of-2 OT whose messages are
//! mod t (after ReLU the value's MSB is 0, so its shares' wrap is the OR of their MSBs,
//! SIRNN's MSB-to-wrap; otherwise the wrap takes one more comparison).
//!
//! P0 (the server) holds s, P1 (the client) c, with s + c ≡ acc (mod t) and acc the signed
//! accumulator in (−t/2, t/2). The output is shares mod t of the value
//! [`ModtStep::reference`] defines, the same function as the garbled circuits of
//! `secinfer_gc::requant` (truncation by flooring, a two's complement wrap into `bits` bits,
//! the maximum of each window, then ReLU).
use super::{b2a, carry, millionaire, msb_share, mux, relu, sext, trunc_reduce};
use crate::ctx::Ctx;
use crate::error::{invalid, Result};
use crate::ring::{mask, msb};
use secinfer_net::Channel;

/// Widest prime modulus the step accepts: every intermediate ring stays within 64 bits.
pub const MAX_MODULUS_BITS: u32 = 40;

/// One nonlinear step on shares mod `t` (public).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ModtStep {
    /// The odd prime modulus of the shares.
    pub t: u64,
    /// Fraction bits dropped (floor division by 2^shift).
    pub shift: u32,
    /// Width of the result (two's complement wrap).
    pub bits: u32,
    /// ReLU after the window's maximum.
    pub relu: bool,
    /// Values per max-pool window (1: no pooling); the inputs are window-major.
    pub window: usize,
}

fn bit_len(v: u64) -> u32 {
    u64::BITS - v.leading_zeros()
}

impl ModtStep {
    /// The step's function on the signed accumulators of one window.
    pub fn reference(&self, accs: &[i64]) -> i64 {
        let sh = 64 - self.bits;
        let y = accs
            .iter()
            .map(|a| ((a >> self.shift) << sh) >> sh)
            .max()
            .unwrap_or(0);
        if self.relu {
            y.max(0)
        } else {
            y
        }
    }

    fn check(&self) -> Result<()> {
        let w = bit_len(self.t);
        if self.t < 3 || self.t.is_multiple_of(2) || w > MAX_MODULUS_BITS {
            return Err(invalid(format!(
                "modulus {} is not an odd number of 2 to {MAX_MODULUS_BITS} bits",
                self.t
            )));
        }
        if self.bits < 2
            || self.bits + 1 >= w
            || self.shift >= w
            || self.shift + self.bits > 64
            || self.window == 0
        {
            return Err(invalid(format!(
                "a step truncating by {} to {} bits over windows of {} does not fit {w}-bit shares",
                self.shift, self.bits, self.window
            )));
        }
        Ok(())
    }
}

/// Runs `step` on this party's shares `x` (mod t, window-major: `n · window` values); returns its
/// shares mod t of the `n` results. Rounds do not depend on `n`.
pub fn finish_modt<C: Channel>(
    ctx: &mut Ctx,
    ch: &mut C,
    step: &ModtStep,
    x: &[u64],
) -> Result<Vec<u64>> {
    step.check()?;
    if !x.len().is_multiple_of(step.window) {
        return Err(invalid("the inputs are not whole windows"));
    }
    if x.iter().any(|v| *v >= step.t) {
        return Err(invalid("a share is not reduced mod t"));
    }
    ctx.block("modt", |ctx| {
        let y = truncate(ctx, ch, step, x)?;
        let (y, ring) = pool(ctx, ch, step, y)?;
        if step.relu {
            let y = relu(ctx, ch, &y, ring)?;
            to_modt(ctx, ch, step.t, &y, ring, true)
        } else {
            to_modt(ctx, ch, step.t, &y, ring, false)
        }
    })
}

/// Shares mod 2^bits of wrap_bits(acc ≫ shift) from shares mod t of acc.
fn truncate<C: Channel>(ctx: &mut Ctx, ch: &mut C, s: &ModtStep, x: &[u64]) -> Result<Vec<u64>> {
    let p0 = ctx.is_p0();
    let (t, h) = (s.t, (s.t - 1) / 2);
    let w = bit_len(t);
    // u = acc + h ∈ [0, t) is s' + c − t·[s' + c ≥ t] with s' = s + h; the wrap is the
    // comparison [t − 1 − s' < c].
    let own: Vec<u64> = if p0 {
        x.iter().map(|v| (v + h) % t).collect()
    } else {
        x.to_vec()
    };
    let cmp: Vec<u64> = if p0 {
        own.iter().map(|v| t - 1 - v).collect()
    } else {
        own.clone()
    };
    let wrap = millionaire(ctx, ch, &cmp, w)?;
    let f = s.shift;
    // ⌊acc / 2^F⌋ = ⌊(u + K) / 2^F⌋ − (h_hi + 1) with K = 2^F − h_lo ∈ (0, 2^F] (u + K ≥ 0);
    // modulo 2^bits only v mod 2^(F + bits) matters, so that is the ring of v.
    let ring = f + s.bits;
    let m = mask(ring);
    let (h_hi, h_lo) = (h >> f, h & mask(f));
    let k = if f == 0 { 0 } else { (1u64 << f) - h_lo };
    let wa = b2a(ctx, ch, &wrap, ring)?;
    let v: Vec<u64> = own
        .iter()
        .zip(&wa)
        .map(|(o, a)| {
            let base = if p0 { o.wrapping_add(k) } else { *o };
            base.wrapping_sub(a.wrapping_mul(t)) & m
        })
        .collect();
    let mb = mask(s.bits);
    if f == 0 {
        return Ok(v
            .iter()
            .map(|a| if p0 { a.wrapping_sub(h) & mb } else { a & mb })
            .collect());
    }
    let q = trunc_reduce(ctx, ch, &v, ring, f)?;
    Ok(q.iter()
        .map(|a| {
            if p0 {
                a.wrapping_sub(h_hi + 1) & mb
            } else {
                a & mb
            }
        })
        .collect())
}

/// The maximum of each window (a balanced tournament, one comparison and one multiplexer per
/// level) on signed `bits`-bit values; returns the maxima and their ring (`bits + 1` bits when
/// there are windows, so that differences do not overflow).
fn pool<C: Channel>(
    ctx: &mut Ctx,
    ch: &mut C,
    s: &ModtStep,
    y: Vec<u64>,
) -> Result<(Vec<u64>, u32)> {
    if s.window == 1 {
        return Ok((y, s.bits));
    }
    let ring = s.bits + 1;
    let m = mask(ring);
    let n = y.len() / s.window;
    let ext = sext(ctx, ch, &y, s.bits, ring)?;
    let mut cols: Vec<Vec<u64>> = (0..s.window)
        .map(|j| (0..n).map(|i| ext[i * s.window + j]).collect())
        .collect();
    while cols.len() > 1 {
        let pairs = cols.len() / 2;
        let mut diff = Vec::with_capacity(pairs * n);
        for p in 0..pairs {
            let (a, b) = (&cols[2 * p], &cols[2 * p + 1]);
            diff.extend(a.iter().zip(b).map(|(x, z)| x.wrapping_sub(*z) & m));
        }
        // [a < b] = msb(a − b); max = a + [a < b]·(b − a).
        let lt = msb_share(ctx, ch, &diff, ring)?;
        let back: Vec<u64> = diff.iter().map(|d| d.wrapping_neg() & m).collect();
        let sel = mux(ctx, ch, &lt, &back, ring)?;
        let mut next = Vec::with_capacity(cols.len().div_ceil(2));
        for p in 0..pairs {
            let a = &cols[2 * p];
            let g = &sel[p * n..(p + 1) * n];
            next.push(
                a.iter()
                    .zip(g)
                    .map(|(x, z)| x.wrapping_add(*z) & m)
                    .collect(),
            );
        }
        if !cols.len().is_multiple_of(2) {
            next.push(cols.pop().unwrap_or_default());
        }
        cols = next;
    }
    Ok((cols.pop().unwrap_or_default(), ring))
}

/// Shares mod t of signed `ring`-bit values shared mod 2^ring: z = y + 2^(ring−1) is unsigned,
/// z0 + z1 − 2^ring·[z0 + z1 ≥ 2^ring] over the integers, and the wrap's term is moved into
/// Z_t by a 1-of-2 OT of two messages mod t from P0 (which also keeps the random pad).
/// With `msb0` the values lie in [0, 2^(ring−1)): their shares then wrap exactly when either
/// share's MSB is set (SIRNN's MSB-to-wrap), so no comparison is needed.
fn to_modt<C: Channel>(
    ctx: &mut Ctx,
    ch: &mut C,
    t: u64,
    y: &[u64],
    ring: u32,
    msb0: bool,
) -> Result<Vec<u64>> {
    let p0 = ctx.is_p0();
    let m = mask(ring);
    if msb0 {
        let own: Vec<u64> = y.iter().map(|a| a & m).collect();
        let bits: Vec<u8> = own.iter().map(|a| msb(*a, ring)).collect();
        return wrap_into_modt(ctx, ch, t, &own, &bits, ring, |a, b| a | b == 1);
    }
    let half = 1u64 << (ring - 1);
    let z: Vec<u64> = y
        .iter()
        .map(|a| if p0 { a.wrapping_add(half) & m } else { a & m })
        .collect();
    let wz = carry(ctx, ch, &z, ring)?;
    let own: Vec<u64> = if p0 {
        z.iter().map(|a| (a % t + t - half % t) % t).collect()
    } else {
        z
    };
    wrap_into_modt(ctx, ch, t, &own, &wz, ring, |a, b| a ^ b == 1)
}

/// One 1-of-2 OT per value moving the term −2^ring·wrap into Z_t, the wrap being
/// `wrap_of(P0's bit, P1's bit)`: P0 sends pad + term for both of P1's choices and keeps
/// `own − pad`; P1 adds what it receives to its own share. Returns shares mod t of
/// own0 + own1 − 2^ring·wrap.
fn wrap_into_modt<C: Channel>(
    ctx: &mut Ctx,
    ch: &mut C,
    t: u64,
    own: &[u64],
    bits: &[u8],
    ring: u32,
    wrap_of: fn(u8, u8) -> bool,
) -> Result<Vec<u64>> {
    let w = bit_len(t);
    let big = (1u64 << ring) % t;
    ctx.block("modt_ot", |ctx| {
        if ctx.is_p0() {
            let pads: Vec<u64> = (0..own.len()).map(|_| ctx.prg.below(t)).collect();
            let mut msgs = Vec::with_capacity(2 * own.len());
            for (r, b) in pads.iter().zip(bits) {
                for j in 0..2u8 {
                    let term = if wrap_of(b & 1, j) { t - big } else { 0 };
                    msgs.push((r + term) % t);
                }
            }
            ctx.kk_send(ch, 2, &msgs, w)?;
            Ok(own
                .iter()
                .zip(&pads)
                .map(|(a, r)| (a % t + t - r) % t)
                .collect())
        } else {
            let got = ctx.kk_recv(ch, 2, bits, w)?;
            got.iter()
                .zip(own)
                .map(|(g, a)| {
                    if *g >= t {
                        return Err(crate::error::SsError::Malformed(
                            "an OT message is not reduced mod t".into(),
                        ));
                    }
                    Ok((g + a % t) % t)
                })
                .collect()
        }
    })
}
