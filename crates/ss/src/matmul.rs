//! Products of a server-private matrix with client-private vectors over Z_{2^bits} by vector
//! OT (SIRNN's OT-based matrix multiplication with non-uniform bitwidths, Rathee et al. 2021 §4).
//!
//! For a P0 (server) matrix M (rows × cols) and a batch of P1 (client) vectors v_u whose
//! entries are `v_bits`-bit integers, M·v_u = Σ_j Σ_b 2^b·bit_b(v_uj)·M_{·j} (the top bit
//! weighs −2^b when the entries are signed). Each (u, j, b) is one chosen-choice random OT on
//! P1's bit: both keys seed a PRG at P0, which sends one correction vector of `rows` values;
//! P1 expands its key and corrects when its bit is 1. Only the low `bits − b` bits of a term
//! shifted by b survive mod 2^bits, so the correction of bit b carries `bits − b` bits per
//! row: one OT carries a whole column, and the wire cost is rows·Σ_b (bits − b) bits per entry
//! of v rather than one OT per product. Two flights: P1's derandomisation bits, P0's
//! corrections.
use crate::ctx::Ctx;
use crate::error::{invalid, Result, SsError};
use crate::ring::{check_bits, mask};
use rand_core::RngCore;
use rayon::prelude::*;
use secinfer_core::{Block, Prg};
use secinfer_net::Channel;
use secinfer_ot::{pack_words, unpack_words};

/// The shape of one batched product: M is `rows × cols`, the batch holds `count` vectors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MatDims {
    pub rows: usize,
    pub cols: usize,
    pub count: usize,
}

/// Values per correction frame (frames stay well under the channels' size limits).
const FRAME_VALUES: usize = 1 << 17;

fn expand(key: &Block, n: usize, bits: u32) -> Vec<u64> {
    let mut prg = Prg::from_seed(*key);
    let m = mask(bits);
    (0..n).map(|_| prg.next_u64() & m).collect()
}

/// Shares (count × rows, row-major per vector) of M·v_u mod 2^bits. P0 passes M (`rows ×
/// cols` ring elements, row-major) and an empty `v`; P1 passes the `count × cols` entries of
/// its vectors (each below 2^v_bits; with `signed`, two's complement in v_bits bits) and an
/// empty `m`.
#[allow(clippy::too_many_arguments)]
pub fn matvec_private<C: Channel>(
    ctx: &mut Ctx,
    ch: &mut C,
    m: &[u64],
    v: &[u64],
    dims: MatDims,
    v_bits: u32,
    signed: bool,
    bits: u32,
) -> Result<Vec<u64>> {
    check_bits(bits)?;
    check_bits(v_bits)?;
    if v_bits > bits {
        return Err(invalid("matvec_private: v_bits must not exceed bits"));
    }
    let MatDims { rows, cols, count } = dims;
    let cells = count
        .checked_mul(cols)
        .and_then(|c| c.checked_mul(v_bits as usize))
        .ok_or_else(|| invalid("matvec_private: size overflows"))?;
    if ctx.is_p0() {
        if m.len() != rows * cols {
            return Err(invalid("matvec_private: M must have rows × cols entries"));
        }
    } else if v.len() != count * cols {
        return Err(invalid("matvec_private: v must have count × cols entries"));
    } else if v.iter().any(|x| x & !mask(v_bits) != 0) {
        return Err(invalid("matvec_private: an entry of v exceeds v_bits"));
    }
    ctx.block("matvec", |ctx| {
        if ctx.is_p0() {
            sender(ctx, ch, m, dims, cells, v_bits, signed, bits)
        } else {
            receiver(ctx, ch, v, dims, v_bits, bits)
        }
    })
}

/// OTs are ordered by bit first: index b·(count·cols) + u·cols + j.
#[allow(clippy::too_many_arguments)]
fn sender<C: Channel>(
    ctx: &mut Ctx,
    ch: &mut C,
    m: &[u64],
    dims: MatDims,
    cells: usize,
    v_bits: u32,
    signed: bool,
    bits: u32,
) -> Result<Vec<u64>> {
    let MatDims { rows, cols, count } = dims;
    let keys = ctx.rot_send(ch, cells)?;
    if ctx.is_dry_run() {
        return Ok(vec![0; count * rows]);
    }
    let per_bit = count * cols;
    let mut out = vec![0u64; count * rows];
    let mb = mask(bits);
    let chunk = (FRAME_VALUES / rows.max(1)).max(1);
    for b in 0..v_bits {
        let w = bits - b;
        let mw = mask(w);
        let neg = signed && b == v_bits - 1;
        let kb = &keys[b as usize * per_bit..(b as usize + 1) * per_bit];
        for (ci, kc) in kb.chunks(chunk).enumerate() {
            // (own share x, correction y − x − δ) per OT of the chunk
            let parts: Vec<(Vec<u64>, Vec<u64>)> = kc
                .par_iter()
                .enumerate()
                .map(|(t, k)| {
                    let j = (ci * chunk + t) % cols;
                    let x = expand(&k[0], rows, w);
                    let y = expand(&k[1], rows, w);
                    let corr = (0..rows)
                        .map(|i| {
                            let d = m[i * cols + j] & mw;
                            let d = if neg { d.wrapping_neg() } else { d };
                            y[i].wrapping_sub(x[i]).wrapping_sub(d) & mw
                        })
                        .collect();
                    (x, corr)
                })
                .collect();
            let mut flat = Vec::with_capacity(kc.len() * rows);
            for (t, (x, corr)) in parts.into_iter().enumerate() {
                let u = (ci * chunk + t) / cols;
                let o = &mut out[u * rows..(u + 1) * rows];
                for (oi, xi) in o.iter_mut().zip(&x) {
                    *oi = oi.wrapping_sub(xi << b) & mb;
                }
                flat.extend(corr);
            }
            let frame = pack_words(&flat, w)?;
            ctx.metered_io(ch, |ch| Ok(ch.send_frame(&frame)?))?;
        }
    }
    ctx.metered_io(ch, |ch| Ok(ch.flush()?))?;
    Ok(out)
}

fn receiver<C: Channel>(
    ctx: &mut Ctx,
    ch: &mut C,
    v: &[u64],
    dims: MatDims,
    v_bits: u32,
    bits: u32,
) -> Result<Vec<u64>> {
    let MatDims { rows, count, .. } = dims;
    let per_bit = v.len();
    let choices: Vec<bool> = (0..v_bits)
        .flat_map(|b| v.iter().map(move |x| (x >> b) & 1 == 1))
        .collect();
    let keys = ctx.rot_recv(ch, &choices)?;
    if ctx.is_dry_run() {
        return Ok(vec![0; count * rows]);
    }
    let cols = dims.cols;
    let mut out = vec![0u64; count * rows];
    let mb = mask(bits);
    let chunk = (FRAME_VALUES / rows.max(1)).max(1);
    for b in 0..v_bits {
        let w = bits - b;
        let mw = mask(w);
        let base = b as usize * per_bit;
        for start in (0..per_bit).step_by(chunk) {
            let len = chunk.min(per_bit - start);
            let frame = ctx.metered_io(ch, |ch| Ok(ch.recv_frame()?))?;
            let corr = unpack_words(&frame, len * rows, w).map_err(SsError::from)?;
            let got: Vec<Vec<u64>> = (0..len)
                .into_par_iter()
                .map(|t| {
                    let k = base + start + t;
                    let z = expand(&keys[k], rows, w);
                    if choices[k] {
                        let c = &corr[t * rows..(t + 1) * rows];
                        z.iter()
                            .zip(c)
                            .map(|(a, c)| a.wrapping_sub(*c) & mw)
                            .collect()
                    } else {
                        z
                    }
                })
                .collect();
            for (t, z) in got.into_iter().enumerate() {
                let u = (start + t) / cols;
                let o = &mut out[u * rows..(u + 1) * rows];
                for (oi, zi) in o.iter_mut().zip(&z) {
                    *oi = oi.wrapping_add(zi << b) & mb;
                }
            }
        }
    }
    Ok(out)
}
