//! KK13 1-of-N OT extension (Kolesnikov–Kumaresan, CRYPTO 2013), semi-honest, 2 ≤ N ≤ 256.
//!
//! The IKNP engine with 256 columns instead of 128: the receiver encodes each choice
//! `w ∈ [0, 256)` with the Walsh–Hadamard code `C(w)_i = ⟨w, i⟩ mod 2` (256 bits; any two
//! codewords differ in exactly 128 positions) and sends `u_i = t_i ⊕ G(k1_i) ⊕ C(w)_i` per column;
//! the sender, holding `k_{s_i}` for a random `s ∈ {0,1}^256`, gets rows `q_j = t_j ⊕ (C(w_j) ∧ s)`.
//! The key of candidate `x` is `K_x = H_j(q_j ⊕ (C(x) ∧ s))`, which equals the receiver's
//! `H_j(t_j)` for `x = w_j`; for `x ≠ w_j` the argument is offset by `(C(x) ⊕ C(w_j)) ∧ s`, which
//! covers 128 secret bits of `s`.
//!
//! The 256-bit row hash is `H_j(lo, hi) = tccr(τ_lo(j), lo) ⊕ tccr(τ_hi(j), hi)` with distinct
//! tweaks for the two halves (the per-position sum used by libOTe's KKRT encoding, with the
//! tweakable hash of Guo et al. in place of per-position keys). Each half is an independent TCCR
//! instance; the 128 secret offset bits are split 128/0, 0/128 or 64/64 between the halves
//! (Walsh–Hadamard structure), and the output of the sum is unpredictable as long as the offset of
//! either half is. Costs: 32 bytes of `u` per OT, then `N·bits` bits of masked messages.
use crate::base::{base_ot_receive, base_ot_send};
use crate::error::OtError;
use crate::ext::{tccr_inplace, tccr_tweaked, tweak, ExtReceiver, ExtSender};
use crate::pack::check_bits;
use crate::payload::{check_n_msgs, low_bits, recv_n_frames, send_n_frames};
use rayon::prelude::*;
use secinfer_core::Block;
use secinfer_core::Prg;
use secinfer_net::Channel;

/// Length of the Walsh–Hadamard code (columns of the extension matrix, base OTs).
pub const KK_CODE_BITS: usize = 256;
const DOMAIN_KK_LO: u64 = 0x1c4e_5000_0000_0101;
const DOMAIN_KK_HI: u64 = 0x1c4e_5000_0000_0102;

/// The Walsh–Hadamard codeword of `x` as (bits 0..128, bits 128..256).
pub(crate) fn codeword(x: u8) -> (Block, Block) {
    let mut lo = 0u128;
    let mut hi = 0u128;
    for i in 0..128u32 {
        lo |= (((x as u32 & i).count_ones() & 1) as u128) << i;
        hi |= (((x as u32 & (i + 128)).count_ones() & 1) as u128) << i;
    }
    (Block(lo), Block(hi))
}

fn check_n(n: usize) -> Result<(), OtError> {
    if (2..=256).contains(&n) {
        Ok(())
    } else {
        Err(OtError::arg(format!(
            "1-of-N OT needs 2 ≤ N ≤ 256, got {n}"
        )))
    }
}

/// Rows whose candidate keys are hashed in one batch (one rayon task).
const KEY_TASK_ROWS: usize = 32;

/// The keys of every candidate of every row: `out[j·n + x] = H_{first+j}(q_j ⊕ offs[x])`, where
/// `q` holds two blocks per row and `n = offs.len()`.
fn candidate_keys(q: &[Block], first: u64, offs: &[(Block, Block)], out: &mut [Block]) {
    let n = offs.len();
    out.par_chunks_mut(n * KEY_TASK_ROWS)
        .zip(q.par_chunks(2 * KEY_TASK_ROWS))
        .enumerate()
        .for_each_init(
            || {
                (
                    vec![Block::ZERO; 2 * n * KEY_TASK_ROWS],
                    vec![Block::ZERO; 2 * n * KEY_TASK_ROWS],
                )
            },
            |(buf, tw), (t, (o, q))| {
                let rows = q.len() / 2;
                let (buf, tw) = (&mut buf[..2 * n * rows], &mut tw[..2 * n * rows]);
                let base = first.wrapping_add((t * KEY_TASK_ROWS) as u64);
                for (r, ((b, tw), q)) in buf
                    .chunks_exact_mut(2 * n)
                    .zip(tw.chunks_exact_mut(2 * n))
                    .zip(q.chunks_exact(2))
                    .enumerate()
                {
                    let idx = base.wrapping_add(r as u64);
                    let (tlo, thi) = (tweak(DOMAIN_KK_LO, idx), tweak(DOMAIN_KK_HI, idx));
                    for ((pair, tp), (lo, hi)) in
                        b.chunks_exact_mut(2).zip(tw.chunks_exact_mut(2)).zip(offs)
                    {
                        pair[0] = q[0] ^ *lo;
                        pair[1] = q[1] ^ *hi;
                        tp[0] = tlo;
                        tp[1] = thi;
                    }
                }
                tccr_tweaked(buf, tw);
                for (o, pair) in o.iter_mut().zip(buf.chunks_exact(2)) {
                    *o = pair[0] ^ pair[1];
                }
            },
        );
}

fn guarded<T>(poisoned: &mut bool, f: impl FnOnce() -> Result<T, OtError>) -> Result<T, OtError> {
    if *poisoned {
        return Err(OtError::arg(
            "this KK13 instance failed earlier and is out of step with its peer",
        ));
    }
    let r = f();
    if r.is_err() {
        *poisoned = true;
    }
    r
}

fn advance(counter: &mut u64, n: usize) -> Result<u64, OtError> {
    let first = *counter;
    *counter = u64::try_from(n)
        .ok()
        .and_then(|n| first.checked_add(n))
        .ok_or_else(|| OtError::arg("OT index counter overflow"))?;
    Ok(first)
}

/// The KK13 sender (holds `s`). Not `Debug` (secret state).
pub struct KkSender {
    s: (Block, Block),
    ext: ExtSender,
    counter: u64,
    poisoned: bool,
}

impl KkSender {
    /// Runs 256 base OTs as base-OT receiver with random choice bits `s`.
    pub fn setup<C: Channel>(ch: &mut C, prg: &mut Prg) -> Result<Self, OtError> {
        let s = (prg.next_block(), prg.next_block());
        let bits: Vec<bool> = (0..256)
            .map(|i| {
                if i < 128 {
                    (s.0 .0 >> i) & 1 == 1
                } else {
                    (s.1 .0 >> (i - 128)) & 1 == 1
                }
            })
            .collect();
        let keys = base_ot_receive(ch, &bits, prg)?;
        Ok(KkSender {
            s,
            ext: ExtSender::new(&keys, &bits),
            counter: 0,
            poisoned: false,
        })
    }

    fn offsets(&self, n: usize) -> Vec<(Block, Block)> {
        (0..n)
            .map(|x| {
                let (lo, hi) = codeword(x as u8);
                (lo & self.s.0, hi & self.s.1)
            })
            .collect()
    }

    fn extend_all<C: Channel>(
        &mut self,
        ch: &mut C,
        count: usize,
    ) -> Result<(u64, Vec<Block>), OtError> {
        let first = advance(&mut self.counter, count)?;
        let mut q = vec![Block::ZERO; 2 * count];
        self.ext.run(ch, count, Some(&mut q), |_, _| Ok(()))?;
        Ok((first, q))
    }

    /// Random 1-of-N: returns `count × n` keys, row-major; the receiver gets key `choices[j]` of
    /// row `j`.
    pub fn send_random<C: Channel>(
        &mut self,
        ch: &mut C,
        n: usize,
        count: usize,
    ) -> Result<Vec<Block>, OtError> {
        check_n(n)?;
        let total = count
            .checked_mul(n)
            .ok_or_else(|| OtError::arg("count × N overflows"))?;
        let offs = self.offsets(n);
        let mut out = vec![Block::ZERO; total];
        let ext = &mut self.ext;
        let counter = &mut self.counter;
        guarded(&mut self.poisoned, || {
            let first = advance(counter, count)?;
            ext.run(ch, count, None, |start, rows| {
                let len = rows.len() / 2;
                candidate_keys(
                    rows,
                    first.wrapping_add(start as u64),
                    &offs,
                    &mut out[start * n..(start + len) * n],
                );
                Ok(())
            })
        })?;
        Ok(out)
    }

    /// Chosen 1-of-N on `bits`-bit values: `msgs` is `count × n`, row-major, each `< 2^bits`;
    /// the receiver learns `msgs[j·n + choices[j]]`.
    pub fn send_u64<C: Channel>(
        &mut self,
        ch: &mut C,
        n: usize,
        msgs: &[u64],
        bits: u32,
    ) -> Result<(), OtError> {
        check_n(n)?;
        check_bits(bits)?;
        check_n_msgs(n, msgs, bits)?;
        let count = msgs.len() / n;
        let offs = self.offsets(n);
        let mut poisoned = self.poisoned;
        let r = guarded(&mut poisoned, || {
            let (first, q) = self.extend_all(ch, count)?;
            send_n_frames(ch, n, msgs, bits, |row0, keys| {
                // Each row of `q` is two blocks (256 columns).
                let qf = &q[2 * row0..2 * (row0 + keys.len() / n)];
                candidate_keys(qf, first.wrapping_add(row0 as u64), &offs, keys);
            })?;
            ch.flush()?;
            Ok(())
        });
        self.poisoned = poisoned;
        r
    }
}

/// The KK13 receiver (holds both seeds of all 256 columns). Not `Debug` (secret state).
pub struct KkReceiver {
    ext: ExtReceiver,
    counter: u64,
    poisoned: bool,
}

impl KkReceiver {
    /// Runs 256 base OTs as base-OT sender.
    pub fn setup<C: Channel>(ch: &mut C, prg: &mut Prg) -> Result<Self, OtError> {
        let keys = base_ot_send(ch, KK_CODE_BITS, prg)?;
        Ok(KkReceiver {
            ext: ExtReceiver::new(&keys),
            counter: 0,
            poisoned: false,
        })
    }

    /// Runs the extension and returns `H_j(t_j)` per row.
    fn extend_hashed<C: Channel>(
        &mut self,
        ch: &mut C,
        choices: &[u8],
    ) -> Result<Vec<Block>, OtError> {
        let first = advance(&mut self.counter, choices.len())?;
        let mut out = vec![Block::ZERO; choices.len()];
        self.ext.run(
            ch,
            choices.len(),
            None,
            |start, len, nb, code| {
                // Column i of the code matrix is the XOR of the choice-bit columns of i's bits.
                let mut wbits = vec![Block::ZERO; 8 * nb];
                for (b, c) in choices[start..start + len].chunks(128).enumerate() {
                    for (k, &w) in c.iter().enumerate() {
                        for bit in 0..8 {
                            wbits[bit * nb + b].0 |= (((w >> bit) & 1) as u128) << k;
                        }
                    }
                }
                code.resize(KK_CODE_BITS * nb, Block::ZERO);
                for i in 1..KK_CODE_BITS {
                    let prev = i & (i - 1);
                    let bit = i.trailing_zeros() as usize;
                    for b in 0..nb {
                        code[i * nb + b] = code[prev * nb + b] ^ wbits[bit * nb + b];
                    }
                }
            },
            |start, rows| {
                // Hash the chunk's rows in place, then fold each row's two halves.
                rows.par_chunks_mut(2 * 1024)
                    .enumerate()
                    .for_each(|(c, h)| {
                        let base = first.wrapping_add((start + c * 1024) as u64);
                        tccr_inplace(h, |k| {
                            tweak(
                                if k % 2 == 0 {
                                    DOMAIN_KK_LO
                                } else {
                                    DOMAIN_KK_HI
                                },
                                base.wrapping_add((k / 2) as u64),
                            )
                        });
                    });
                for (o, pair) in out[start..start + rows.len() / 2]
                    .iter_mut()
                    .zip(rows.chunks_exact(2))
                {
                    *o = pair[0] ^ pair[1];
                }
                Ok(())
            },
        )?;
        ch.flush()?;
        Ok(out)
    }

    fn check_choices(n: usize, choices: &[u8]) -> Result<(), OtError> {
        check_n(n)?;
        if let Some(w) = choices.iter().find(|&&w| w as usize >= n) {
            return Err(OtError::arg(format!("choice {w} is not below N = {n}")));
        }
        Ok(())
    }

    /// Random 1-of-N: returns key `choices[j]` of row `j`.
    pub fn recv_random<C: Channel>(
        &mut self,
        ch: &mut C,
        n: usize,
        choices: &[u8],
    ) -> Result<Vec<Block>, OtError> {
        Self::check_choices(n, choices)?;
        let mut poisoned = self.poisoned;
        let r = guarded(&mut poisoned, || self.extend_hashed(ch, choices));
        self.poisoned = poisoned;
        r
    }

    /// Chosen 1-of-N on `bits`-bit values: returns `msgs[j·n + choices[j]]`.
    pub fn recv_u64<C: Channel>(
        &mut self,
        ch: &mut C,
        n: usize,
        choices: &[u8],
        bits: u32,
    ) -> Result<Vec<u64>, OtError> {
        Self::check_choices(n, choices)?;
        check_bits(bits)?;
        let mut poisoned = self.poisoned;
        let r = guarded(&mut poisoned, || {
            let hashed = self.extend_hashed(ch, choices)?;
            let mut out = low_bits(&hashed, bits);
            drop(hashed);
            recv_n_frames(ch, n, &mut out, choices, bits)?;
            Ok(out)
        });
        self.poisoned = poisoned;
        r
    }
}
