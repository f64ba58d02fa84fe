//! IKNP/ALSZ 1-of-2 OT extension (semi-honest): correlated, random, chosen-message and
//! additively correlated OTs from 128 base OTs.
//!
//! Roles: the extension *receiver* is the base-OT *sender* (it knows both seeds of each of the
//! 128 columns); the extension *sender* is the base-OT receiver with choice bits `Δ` (bit `i` of
//! `Δ` picks the seed of column `i`). After the transpose the sender holds `q_j` and the receiver
//! `t_j = q_j ⊕ c_j·Δ`: that pair *is* a correlated OT, so COT needs no hash. Every other flavour
//! hashes with `tccr(tweak(domain, idx), ·)`, where `idx` is a per-instance counter that both
//! parties advance by the number of OTs of each call, so no (tweak, input) pair repeats.
//!
//! Messages: each call costs one frame of `u` per [`CHUNK_ROWS`](crate::ext::CHUNK_ROWS) rows from receiver to sender
//! (16 bytes per OT), then, for the chosen and additive flavours, one frame per chunk back. The
//! sender reads every `u` before it answers, so the two directions never block on each other
//! (bounded socket buffers cannot deadlock); the price is that the sender of a chosen or additive
//! call keeps `q_j` (16 bytes per OT, the size of its input) until it answers. Scratch beyond the
//! inputs and outputs is one chunk. Callers with 10^8 OTs split them into calls of a few million
//! (`secinfer bench ot` uses 2^22), which costs two rounds per call for these flavours and
//! nothing extra for COT/ROT, whose traffic only flows from receiver to sender. An error leaves the two column PRGs out of step, so
//! the instance refuses further calls.
use crate::base::{base_ot_receive, base_ot_send};
use crate::error::OtError;
use crate::ext::{pack_choices, ExtReceiver, ExtSender, CHUNK_ROWS};
use crate::pack::check_bits;
use crate::payload::{
    check_fits, hash_pairs_in, hash_rows_in, low_bits, recv_chosen_frames, recv_chosen_u64_frames,
    recv_correlated_frames, send_chosen_frames, send_chosen_u64_frames, send_correlated_frames,
};
use secinfer_core::Block;
use secinfer_core::Prg;
use secinfer_net::Channel;

/// Hash domain of 1-of-2 OTs (random, chosen, additive).
const DOMAIN_IKNP: u64 = 0x1c4e_5000_0000_0001;

const POISONED: &str = "this OT extension instance failed earlier and is out of step with its peer";

/// An IO-free step covers one chunk of the extension (one frame on the wire).
fn check_step_rows(n: usize) -> Result<(), OtError> {
    if n > CHUNK_ROWS {
        return Err(OtError::arg(format!(
            "an OT extension step takes at most {CHUNK_ROWS} rows, not {n}"
        )));
    }
    Ok(())
}

/// Marks an instance unusable after a failed call (its PRGs may be out of step with the peer's).
fn guarded<T>(poisoned: &mut bool, f: impl FnOnce() -> Result<T, OtError>) -> Result<T, OtError> {
    if *poisoned {
        return Err(OtError::arg(POISONED));
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

/// `out[2j] = H(idx_j, q_j)`, `out[2j+1] = H(idx_j, q_j ⊕ Δ)` for `idx_j = first + j`.
fn hash_pairs(q: &[Block], delta: Block, first: u64, out: &mut [Block]) {
    hash_pairs_in(DOMAIN_IKNP, q, delta, first, out);
}

/// `xs[j] = H(first + j, xs[j])`.
fn hash_rows(xs: &mut [Block], first: u64) {
    hash_rows_in(DOMAIN_IKNP, xs, first);
}

/// The IKNP sender: holds the global `Δ`. Deliberately not `Debug` (secret state).
pub struct OtExtSender {
    delta: Block,
    ext: ExtSender,
    counter: u64,
    poisoned: bool,
}

impl OtExtSender {
    /// Runs the 128 base OTs (as base-OT receiver) with a random `Δ`.
    pub fn setup<C: Channel>(ch: &mut C, prg: &mut Prg) -> Result<Self, OtError> {
        let delta = prg.next_block();
        Self::setup_with_delta(ch, prg, delta)
    }

    /// Runs the base OTs with a caller-chosen `Δ` (garbling needs `lsb(Δ) = 1`). `Δ = 0` is
    /// refused: it would hand the receiver both messages.
    pub fn setup_with_delta<C: Channel>(
        ch: &mut C,
        prg: &mut Prg,
        delta: Block,
    ) -> Result<Self, OtError> {
        if delta == Block::ZERO {
            return Err(OtError::arg("Δ must be non-zero"));
        }
        let s: Vec<bool> = (0..128).map(|i| (delta.0 >> i) & 1 == 1).collect();
        let keys = base_ot_receive(ch, &s, prg)?;
        Ok(OtExtSender {
            delta,
            ext: ExtSender::new(&keys, &s),
            counter: 0,
            poisoned: false,
        })
    }

    /// A sender on base OTs made elsewhere, e.g. by an OT extension already running the other
    /// way (bootstrapping the second direction of a session costs 128 chosen OTs instead of
    /// 128 public-key base OTs): `keys[i]` is the seed the peer's pair `i` gives for bit `i` of
    /// `delta`, as [`base_ot_receive`] with those choices would return. The peer builds its
    /// receiver on the pairs with [`OtExtReceiver::from_base_ots`]. `Δ = 0` and a count other
    /// than 128 are refused.
    pub fn from_base_ots(delta: Block, keys: &[Block]) -> Result<Self, OtError> {
        if delta == Block::ZERO {
            return Err(OtError::arg("Δ must be non-zero"));
        }
        if keys.len() != 128 {
            return Err(OtError::arg("IKNP needs exactly 128 base OTs"));
        }
        let s: Vec<bool> = (0..128).map(|i| (delta.0 >> i) & 1 == 1).collect();
        Ok(OtExtSender {
            delta,
            ext: ExtSender::new(keys, &s),
            counter: 0,
            poisoned: false,
        })
    }

    /// The global correlation `Δ`.
    pub fn delta(&self) -> Block {
        self.delta
    }

    /// IO-free correlated OT on at most [`CHUNK_ROWS`] rows: absorbs the message of the
    /// receiver's [`OtExtReceiver::cot_step`] for `out.len()` OTs and writes `m0_j` into `out`.
    /// The channel calls ([`send_cot_into`](Self::send_cot_into)) are this step in a loop.
    pub fn cot_step(&mut self, msg: &[u8], out: &mut [Block]) -> Result<(), OtError> {
        check_step_rows(out.len())?;
        let ext = &mut self.ext;
        let counter = &mut self.counter;
        guarded(&mut self.poisoned, || {
            advance(counter, out.len())?;
            ext.decode_chunk(msg, out.len(), out)
        })
    }

    /// Correlated OT into a caller's buffer: `out[j] = m0_j`; the receiver gets `m0_j ⊕ c_j·Δ`.
    pub fn send_cot_into<C: Channel>(
        &mut self,
        ch: &mut C,
        out: &mut [Block],
    ) -> Result<(), OtError> {
        let ext = &mut self.ext;
        let counter = &mut self.counter;
        guarded(&mut self.poisoned, || {
            advance(counter, out.len())?;
            ext.run(ch, out.len(), Some(out), |_, _| Ok(()))
        })
    }

    /// Correlated OT: returns `m0_j`; the receiver gets `m0_j ⊕ (c_j · Δ)`.
    pub fn send_cot<C: Channel>(&mut self, ch: &mut C, n: usize) -> Result<Vec<Block>, OtError> {
        let mut out = vec![Block::ZERO; n];
        self.send_cot_into(ch, &mut out)?;
        Ok(out)
    }

    /// Random OT: returns `(k0_j, k1_j)`; the receiver gets `k_{c_j}`.
    pub fn send_rot<C: Channel>(
        &mut self,
        ch: &mut C,
        n: usize,
    ) -> Result<Vec<[Block; 2]>, OtError> {
        let mut out = vec![[Block::ZERO; 2]; n];
        self.send_rot_into(ch, &mut out)?;
        Ok(out)
    }

    /// Random OT into a caller's buffer (`out.len()` OTs; no allocation per call).
    pub fn send_rot_into<C: Channel>(
        &mut self,
        ch: &mut C,
        out: &mut [[Block; 2]],
    ) -> Result<(), OtError> {
        let n = out.len();
        let delta = self.delta;
        let ext = &mut self.ext;
        let counter = &mut self.counter;
        guarded(&mut self.poisoned, || {
            let first = advance(counter, n)?;
            let flat: &mut [Block] = bytemuck::cast_slice_mut(out);
            ext.run(ch, n, None, |start, rows| {
                hash_pairs(
                    rows,
                    delta,
                    first.wrapping_add(start as u64),
                    &mut flat[2 * start..2 * (start + rows.len())],
                );
                Ok(())
            })
        })
    }

    /// Runs the extension and keeps every `q_j` (the chosen flavours answer after reading all of
    /// `u`). Returns the first OT index.
    fn extend_all<C: Channel>(
        &mut self,
        ch: &mut C,
        n: usize,
    ) -> Result<(u64, Vec<Block>), OtError> {
        let first = advance(&mut self.counter, n)?;
        let mut q = vec![Block::ZERO; n];
        self.ext.run(ch, n, Some(&mut q), |_, _| Ok(()))?;
        Ok((first, q))
    }

    /// Chosen-message OT on 128-bit messages: the receiver learns `msgs[j][c_j]`.
    pub fn send_chosen<C: Channel>(
        &mut self,
        ch: &mut C,
        msgs: &[[Block; 2]],
    ) -> Result<(), OtError> {
        let delta = self.delta;
        let mut poisoned = self.poisoned;
        let r = guarded(&mut poisoned, || {
            let (first, q) = self.extend_all(ch, msgs.len())?;
            send_chosen_frames(ch, &q, first, msgs, |k, i, y| hash_pairs(k, delta, i, y))?;
            ch.flush()?;
            Ok(())
        });
        self.poisoned = poisoned;
        r
    }

    /// Chosen-message OT on `bits`-bit messages (each `< 2^bits`), packed to `bits` on the wire.
    pub fn send_chosen_u64<C: Channel>(
        &mut self,
        ch: &mut C,
        msgs: &[[u64; 2]],
        bits: u32,
    ) -> Result<(), OtError> {
        check_bits(bits)?;
        check_fits(bytemuck::cast_slice(msgs), bits)?;
        let delta = self.delta;
        let mut poisoned = self.poisoned;
        let r = guarded(&mut poisoned, || {
            let (first, q) = self.extend_all(ch, msgs.len())?;
            send_chosen_u64_frames(ch, &q, first, msgs, bits, |k, i, y| {
                hash_pairs(k, delta, i, y)
            })?;
            ch.flush()?;
            Ok(())
        });
        self.poisoned = poisoned;
        r
    }

    /// Additively correlated OT over `Z_{2^bits}`: returns `x_j` (uniform); the receiver gets
    /// `x_j + c_j·deltas[j] mod 2^bits` (deltas are reduced mod `2^bits`). The sender sends
    /// `y_j = x_j + delta_j − H(q_j ⊕ Δ)` with `x_j = H(q_j)`, one packed `bits`-bit word per OT.
    pub fn send_correlated_u64<C: Channel>(
        &mut self,
        ch: &mut C,
        deltas: &[u64],
        bits: u32,
    ) -> Result<Vec<u64>, OtError> {
        check_bits(bits)?;
        let delta = self.delta;
        let mut poisoned = self.poisoned;
        let r = guarded(&mut poisoned, || {
            let (first, q) = self.extend_all(ch, deltas.len())?;
            let xs = send_correlated_frames(ch, &q, first, deltas, bits, |k, i, y| {
                hash_pairs(k, delta, i, y)
            })?;
            ch.flush()?;
            Ok(xs)
        });
        self.poisoned = poisoned;
        r
    }
}

/// The IKNP receiver: holds both seeds of every column. Not `Debug` (secret state).
pub struct OtExtReceiver {
    ext: ExtReceiver,
    counter: u64,
    poisoned: bool,
}

impl OtExtReceiver {
    /// Runs the 128 base OTs as base-OT sender.
    pub fn setup<C: Channel>(ch: &mut C, prg: &mut Prg) -> Result<Self, OtError> {
        let keys = base_ot_send(ch, 128, prg)?;
        Ok(OtExtReceiver {
            ext: ExtReceiver::new(&keys),
            counter: 0,
            poisoned: false,
        })
    }

    /// A receiver on base OTs made elsewhere (the 128 seed pairs this party sent); pairs with
    /// [`OtExtSender::from_base_ots`] at the peer. A count other than 128 is refused.
    pub fn from_base_ots(keys: &[[Block; 2]]) -> Result<Self, OtError> {
        if keys.len() != 128 {
            return Err(OtError::arg("IKNP needs exactly 128 base OTs"));
        }
        Ok(OtExtReceiver {
            ext: ExtReceiver::new(keys),
            counter: 0,
            poisoned: false,
        })
    }

    /// IO-free correlated OT on at most [`CHUNK_ROWS`] choices: writes `m0_j ⊕ c_j·Δ` into
    /// `out` and returns the message (16 bytes per OT) for the sender's
    /// [`OtExtSender::cot_step`].
    pub fn cot_step(&mut self, choices: &[bool], out: &mut [Block]) -> Result<&[u8], OtError> {
        if out.len() != choices.len() {
            return Err(OtError::arg("cot_step: one output block per choice"));
        }
        check_step_rows(choices.len())?;
        if self.poisoned {
            return Err(OtError::arg(POISONED));
        }
        if let Err(e) = advance(&mut self.counter, choices.len()) {
            self.poisoned = true;
            return Err(e);
        }
        let len = choices.len();
        self.ext.encode_chunk(len, |nb, code| {
            code.resize(nb, Block::ZERO);
            pack_choices(choices, code);
        });
        self.ext.chunk_rows(len, out);
        Ok(bytemuck::cast_slice(self.ext.last_message(len)))
    }

    /// Correlated OT into a caller's buffer: `out[j] = m0_j ⊕ c_j·Δ`.
    pub fn recv_cot_into<C: Channel>(
        &mut self,
        ch: &mut C,
        choices: &[bool],
        out: &mut [Block],
    ) -> Result<(), OtError> {
        if out.len() != choices.len() {
            return Err(OtError::arg("recv_cot_into: one output block per choice"));
        }
        let ext = &mut self.ext;
        let counter = &mut self.counter;
        guarded(&mut self.poisoned, || {
            advance(counter, choices.len())?;
            ext.run(
                ch,
                choices.len(),
                Some(out),
                |start, len, nb, code| {
                    code.resize(nb, Block::ZERO);
                    pack_choices(&choices[start..start + len], code);
                },
                |_, _| Ok(()),
            )?;
            ch.flush()?;
            Ok(())
        })
    }

    /// Correlated OT: returns `m0_j ⊕ (c_j · Δ)`.
    pub fn recv_cot<C: Channel>(
        &mut self,
        ch: &mut C,
        choices: &[bool],
    ) -> Result<Vec<Block>, OtError> {
        let mut out = vec![Block::ZERO; choices.len()];
        self.recv_cot_into(ch, choices, &mut out)?;
        Ok(out)
    }

    /// Runs the extension on `choices` and returns the first index and `H(idx_j, t_j)`.
    fn extend_hashed<C: Channel>(
        &mut self,
        ch: &mut C,
        choices: &[bool],
    ) -> Result<(u64, Vec<Block>), OtError> {
        let mut out = vec![Block::ZERO; choices.len()];
        let first = self.extend_hashed_into(ch, choices, &mut out)?;
        Ok((first, out))
    }

    fn extend_hashed_into<C: Channel>(
        &mut self,
        ch: &mut C,
        choices: &[bool],
        out: &mut [Block],
    ) -> Result<u64, OtError> {
        let first = advance(&mut self.counter, choices.len())?;
        self.ext.run(
            ch,
            choices.len(),
            Some(out),
            |start, len, nb, code| {
                code.resize(nb, Block::ZERO);
                pack_choices(&choices[start..start + len], code);
            },
            |start, rows| {
                // Hash each chunk while it is still in cache.
                hash_rows(rows, first.wrapping_add(start as u64));
                Ok(())
            },
        )?;
        ch.flush()?;
        Ok(first)
    }

    /// Random OT: returns `k_{c_j}`.
    pub fn recv_rot<C: Channel>(
        &mut self,
        ch: &mut C,
        choices: &[bool],
    ) -> Result<Vec<Block>, OtError> {
        let mut out = vec![Block::ZERO; choices.len()];
        self.recv_rot_into(ch, choices, &mut out)?;
        Ok(out)
    }

    /// Random OT into a caller's buffer (one block per choice; no allocation per call).
    pub fn recv_rot_into<C: Channel>(
        &mut self,
        ch: &mut C,
        choices: &[bool],
        out: &mut [Block],
    ) -> Result<(), OtError> {
        if out.len() != choices.len() {
            return Err(OtError::arg("recv_rot_into: one output block per choice"));
        }
        let mut poisoned = self.poisoned;
        let r = guarded(&mut poisoned, || {
            self.extend_hashed_into(ch, choices, out).map(|_| ())
        });
        self.poisoned = poisoned;
        r
    }

    /// Chosen-message OT on 128-bit messages: returns `msgs[j][c_j]`.
    pub fn recv_chosen<C: Channel>(
        &mut self,
        ch: &mut C,
        choices: &[bool],
    ) -> Result<Vec<Block>, OtError> {
        let mut poisoned = self.poisoned;
        let r = guarded(&mut poisoned, || {
            let (_, mut out) = self.extend_hashed(ch, choices)?;
            recv_chosen_frames(ch, &mut out, choices)?;
            Ok(out)
        });
        self.poisoned = poisoned;
        r
    }

    /// Chosen-message OT on `bits`-bit messages: returns `msgs[j][c_j]`.
    pub fn recv_chosen_u64<C: Channel>(
        &mut self,
        ch: &mut C,
        choices: &[bool],
        bits: u32,
    ) -> Result<Vec<u64>, OtError> {
        check_bits(bits)?;
        let mut poisoned = self.poisoned;
        let r = guarded(&mut poisoned, || {
            let (_, hashed) = self.extend_hashed(ch, choices)?;
            let mut out = low_bits(&hashed, bits);
            drop(hashed);
            recv_chosen_u64_frames(ch, &mut out, choices, bits)?;
            Ok(out)
        });
        self.poisoned = poisoned;
        r
    }

    /// Additively correlated OT over `Z_{2^bits}`: returns `x_j + c_j·delta_j mod 2^bits`.
    pub fn recv_correlated_u64<C: Channel>(
        &mut self,
        ch: &mut C,
        choices: &[bool],
        bits: u32,
    ) -> Result<Vec<u64>, OtError> {
        check_bits(bits)?;
        let mut poisoned = self.poisoned;
        let r = guarded(&mut poisoned, || {
            let (_, hashed) = self.extend_hashed(ch, choices)?;
            let out = low_bits(&hashed, bits);
            drop(hashed);
            recv_correlated_frames(ch, out, choices, bits)
        });
        self.poisoned = poisoned;
        r
    }
}
/// The garbled-circuit protocols' view of this extension.
impl<C: Channel> secinfer_core::CotSender<C> for OtExtSender {
    type Error = OtError;
    fn delta(&self) -> Block {
        OtExtSender::delta(self)
    }
    fn send_cot(&mut self, ch: &mut C, n: usize) -> Result<Vec<Block>, OtError> {
        OtExtSender::send_cot(self, ch, n)
    }
}

impl<C: Channel> secinfer_core::CotReceiver<C> for OtExtReceiver {
    type Error = OtError;
    fn recv_cot(&mut self, ch: &mut C, choices: &[bool]) -> Result<Vec<Block>, OtError> {
        OtExtReceiver::recv_cot(self, ch, choices)
    }
}
