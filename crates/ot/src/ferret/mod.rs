//! `ferret` — semi-honest Ferret silent COT (Yang, Weng, Lan, Zhang, Wang, CCS 2020) as a filler
//! for the OT pool.
//!
//! One *iteration* turns `M = k + t·h` COTs (the reserve) into `n = t·2^h` fresh COTs under the
//! same `Δ`:
//!
//! 1. [`mpcot`]: regular-noise multi-point COT from `t` GGM-tree SPCOTs ([`spcot`]), each using
//!    `h` reserved COTs; the receiver's noise has one point per bin of `2^h`;
//! 2. [`lpn`]: primal-LPN expansion — every output XORs `D = 10` public pseudo-random entries of
//!    the reserved `k`-vector into the MPCOT output;
//! 3. bootstrapping: the first `M` outputs become the next iteration's reserve; `n − M` go to the
//!    caller.
//!
//! The first reserve comes from IKNP; with a `pre` parameter set (emp-ot's layout) IKNP makes the
//! small reserve of one pre-iteration whose output is the main reserve, which cuts the one-time
//! IKNP traffic ~11× for `ferret_b13`.
//!
//! Communication: one message per iteration, sender → receiver, of `t·(2h + 1)` blocks (the
//! receiver's SPCOT choices are the random bits of its reserved COTs, so it sends nothing). For
//! `ferret_b13` that is 552,960 bytes per 10,017,120 COTs: 0.44 bits per COT.
//!
//! **Security.** Semi-honest only: there is no SPCOT consistency check, which Ferret adds for
//! malicious security; secinfer's threat model is semi-honest (`docs/threat-model.md`). The LPN
//! parameter sets are emp-ot's published `ferret_b11/b12/b13` constants (emp-ot
//! `emp-ot/ferret/constants.h`, by the Ferret authors; b13 is emp-ot's default), offered there as
//! the 128-bit-security sets for primal LPN with regular noise and a `d = 10` local linear code;
//! their bit security rests on the Ferret paper's analysis (Gaussian elimination, low-weight
//! parity check and ISD attacks, with the regular-noise adjustment). We did not re-derive the
//! estimates; only these three sets are claimed secure, and [`FerretParams::check`] checks shape
//! only. The GGM PRG, the level-sum OTs (`tccr`, unique tweak per iteration and COT) and the
//! seeds are at κ = 128.
pub mod lpn;
pub mod mpcot;
pub mod spcot;

use crate::error::OtError;
use crate::iknp::{OtExtReceiver, OtExtSender};
use crate::pack::blocks_of;
use secinfer_core::Block;
use secinfer_core::Prg;
use secinfer_net::Channel;

/// Hash domain of the SPCOT level-sum OTs (the iteration and COT index fill the low 64 bits).
const DOMAIN_FERRET: u64 = 0x1c4e_5400_0000_0001;

/// One primal-LPN parameter set with regular noise: `n = t·2^log_bin` outputs from a `k`-vector
/// and `t` noise points.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LpnParams {
    /// Secret (reserved COT) length.
    pub k: usize,
    /// Noise weight: number of GGM trees / bins.
    pub t: usize,
    /// Tree depth `h`: each bin has `2^h` positions.
    pub log_bin: u32,
}

impl LpnParams {
    /// Outputs per iteration, `t·2^h`.
    pub const fn n(&self) -> usize {
        self.t << self.log_bin
    }
    /// COTs an iteration consumes, `k + t·h`.
    pub const fn reserve(&self) -> usize {
        self.k + self.t * self.log_bin as usize
    }
}

/// A Ferret parameter set: the main LPN parameters and an optional smaller pre-iteration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FerretParams {
    pub main: LpnParams,
    pub pre: Option<LpnParams>,
}

impl FerretParams {
    /// emp-ot `ferret_b13` (its default): n = 10,485,760, k = 452,000, t = 1,280, h = 13;
    /// pre: n = 470,016, k = 32,768, t = 918, h = 9. 128-bit security (see the module docs).
    pub const B13: FerretParams = FerretParams {
        main: LpnParams {
            k: 452_000,
            t: 1_280,
            log_bin: 13,
        },
        pre: Some(LpnParams {
            k: 32_768,
            t: 918,
            log_bin: 9,
        }),
    };
    /// emp-ot `ferret_b12`: n = 10,268,672, k = 238,000, t = 2,507, h = 12;
    /// pre: n = 268,800, k = 17,384, t = 1,050, h = 8.
    pub const B12: FerretParams = FerretParams {
        main: LpnParams {
            k: 238_000,
            t: 2_507,
            log_bin: 12,
        },
        pre: Some(LpnParams {
            k: 17_384,
            t: 1_050,
            log_bin: 8,
        }),
    };
    /// emp-ot `ferret_b11`: n = 10,180,608, k = 124,000, t = 4,971, h = 11;
    /// pre: n = 178,944, k = 17,384, t = 699, h = 8.
    pub const B11: FerretParams = FerretParams {
        main: LpnParams {
            k: 124_000,
            t: 4_971,
            log_bin: 11,
        },
        pre: Some(LpnParams {
            k: 17_384,
            t: 699,
            log_bin: 8,
        }),
    };

    /// COTs each main iteration hands to the caller, `n − (k + t·h)`.
    pub const fn per_iteration(&self) -> usize {
        self.main.n() - self.main.reserve()
    }

    /// COTs IKNP must make once: the reserve of the first iteration.
    pub const fn initial_cots(&self) -> usize {
        match self.pre {
            Some(p) => p.reserve(),
            None => self.main.reserve(),
        }
    }

    /// Checks the shape (not the security: only the named sets are claimed secure). Each set
    /// must produce more than it reserves, trees at most 2^24 leaves, `k < 2^32`, and a pre set
    /// must produce the main reserve.
    pub fn check(&self) -> Result<(), OtError> {
        let one = |p: &LpnParams| -> Result<(), OtError> {
            if p.k == 0 || p.t == 0 || !(1..=24).contains(&p.log_bin) || p.k >= 1 << 32 {
                return Err(OtError::arg(format!(
                    "Ferret parameters out of range: {p:?}"
                )));
            }
            let n =
                p.t.checked_shl(p.log_bin)
                    .filter(|&n| n >> p.log_bin == p.t);
            match n {
                Some(n) if n > p.reserve() && n < 1 << 40 => Ok(()),
                _ => Err(OtError::arg(format!(
                    "Ferret parameters {p:?} do not produce more COTs than they reserve"
                ))),
            }
        };
        one(&self.main)?;
        if let Some(pre) = &self.pre {
            one(pre)?;
            if pre.n() < self.main.reserve() {
                return Err(OtError::arg(
                    "Ferret pre-iteration produces fewer COTs than the main reserve",
                ));
            }
        }
        Ok(())
    }
}

/// The unique tweak of COT `j` of iteration `iter` (iterations < 2^32, `j < t·h < 2^32`).
fn ferret_tweak(iter: u64, j: usize) -> Block {
    Block(((DOMAIN_FERRET as u128) << 64) | ((iter as u128 & 0xffff_ffff) << 32) | j as u128)
}

/// Moves the first `m` entries of `v[start..]` out (into `to`), keeping the rest in some order
/// that both parties share: the tail fills the hole when it is long enough (no big memmove).
fn take_front<T: Copy>(v: &mut Vec<T>, start: usize, m: usize, to: &mut Vec<T>) {
    to.clear();
    to.extend_from_slice(&v[start..start + m]);
    let len = v.len();
    if len - start >= 2 * m {
        v.copy_within(len - m..len, start);
        v.truncate(len - m);
    } else {
        v.drain(start..start + m);
    }
}

/// Refuses a call on an instance that failed earlier (its reserve and iteration counter may be
/// out of step with the peer's).
fn check_usable(poisoned: bool) -> Result<(), OtError> {
    if poisoned {
        return Err(OtError::arg(
            "this Ferret instance failed earlier and is out of step with its peer",
        ));
    }
    Ok(())
}

/// Marks the instance unusable if an iteration failed.
fn poison_on_err<T>(poisoned: &mut bool, r: Result<T, OtError>) -> Result<T, OtError> {
    if r.is_err() {
        *poisoned = true;
    }
    r
}

/// Refuses an iteration number the tweaks cannot hold.
fn check_iter(iter: u64) -> Result<(), OtError> {
    if iter >= 1 << 32 {
        // The tweaks hold 32 bits of iteration number; 2^32 iterations are ~4·10^16 COTs.
        return Err(OtError::arg("Ferret iteration counter exhausted"));
    }
    Ok(())
}

/// The Ferret sender (holds `Δ` and the reserve `K`). Not `Debug` (secret state).
pub struct FerretCotSender {
    params: FerretParams,
    delta: Block,
    reserve: Vec<Block>,
    prg: Prg,
    iter: u64,
    poisoned: bool,
}

impl FerretCotSender {
    /// IKNP base OTs with a random `Δ`, the initial reserve by IKNP and the pre-iteration.
    pub fn setup<C: Channel>(
        ch: &mut C,
        prg: &mut Prg,
        params: FerretParams,
    ) -> Result<Self, OtError> {
        params.check()?;
        let ext = OtExtSender::setup(ch, prg)?;
        Self::from_iknp(ch, ext, prg, params)
    }

    /// As [`setup`](Self::setup) with a caller-chosen non-zero `Δ`.
    pub fn setup_with_delta<C: Channel>(
        ch: &mut C,
        prg: &mut Prg,
        params: FerretParams,
        delta: Block,
    ) -> Result<Self, OtError> {
        params.check()?;
        let ext = OtExtSender::setup_with_delta(ch, prg, delta)?;
        Self::from_iknp(ch, ext, prg, params)
    }

    /// Bootstraps from a set-up IKNP sender (its `Δ` is kept).
    pub fn from_iknp<C: Channel>(
        ch: &mut C,
        mut ext: OtExtSender,
        prg: &mut Prg,
        params: FerretParams,
    ) -> Result<Self, OtError> {
        params.check()?;
        let first = params.pre.unwrap_or(params.main);
        let reserve = ext.send_cot(ch, first.reserve())?;
        let mut s = FerretCotSender {
            params,
            delta: ext.delta(),
            reserve,
            prg: Prg::from_seed(prg.next_block()),
            iter: 0,
            poisoned: false,
        };
        if let Some(pre) = params.pre {
            let mut out = Vec::new();
            s.iterate(ch, &pre, &mut out, false)?;
            // The pre-iteration's output is the main reserve; the few extra COTs are dropped.
            out.truncate(params.main.reserve());
            s.reserve = out;
        }
        Ok(s)
    }

    pub fn delta(&self) -> Block {
        self.delta
    }

    pub fn params(&self) -> FerretParams {
        self.params
    }

    /// One main iteration: appends `params().per_iteration()` COT keys to `out`.
    pub fn extend<C: Channel>(
        &mut self,
        ch: &mut C,
        out: &mut Vec<Block>,
    ) -> Result<usize, OtError> {
        check_usable(self.poisoned)?;
        let main = self.params.main;
        let r = self.iterate(ch, &main, out, true);
        poison_on_err(&mut self.poisoned, r)
    }

    /// IO-free main iteration: appends `params().per_iteration()` COT keys to `out` and returns
    /// their count with the message for the receiver's [`FerretCotReceiver::extend_step`].
    /// [`extend`](Self::extend) is this step with the message sent before the LPN encoding.
    pub fn extend_step(&mut self, out: &mut Vec<Block>) -> Result<(usize, Vec<Block>), OtError> {
        check_usable(self.poisoned)?;
        let main = self.params.main;
        let r = self.begin_iteration(&main, out).map(|(start, msg)| {
            let n = self.finish_iteration(&main, out, start, true);
            (n, msg)
        });
        poison_on_err(&mut self.poisoned, r)
    }

    /// Runs one iteration with `p` on the current reserve (which must hold `p.reserve()`) and
    /// appends its `n` outputs to `out`; with `bootstrap` it then moves `main.reserve()` of them
    /// into the reserve (the pre-iteration's caller takes the reserve itself). Returns the COTs
    /// left in `out`.
    fn iterate<C: Channel>(
        &mut self,
        ch: &mut C,
        p: &LpnParams,
        out: &mut Vec<Block>,
        bootstrap: bool,
    ) -> Result<usize, OtError> {
        let (start, msg) = self.begin_iteration(p, out)?;
        ch.send_pod(&msg)?;
        ch.flush()?;
        Ok(self.finish_iteration(p, out, start, bootstrap))
    }

    /// The iteration's MPCOT, which makes the message: returns where its outputs start in `out`.
    fn begin_iteration(
        &mut self,
        p: &LpnParams,
        out: &mut Vec<Block>,
    ) -> Result<(usize, Vec<Block>), OtError> {
        let h = p.log_bin as usize;
        debug_assert_eq!(self.reserve.len(), p.reserve());
        check_iter(self.iter)?;
        let start = out.len();
        out.resize(start + p.n(), Block::ZERO);
        let seeds = self.prg.blocks(p.t);
        let mut msg = vec![Block::ZERO; p.t * mpcot::msg_blocks_per_tree(h)];
        let iter = self.iter;
        mpcot::mpcot_send(
            h,
            self.delta,
            &self.reserve[p.k..],
            &seeds,
            &mut out[start..],
            &mut msg,
            |j| ferret_tweak(iter, j),
        );
        Ok((start, msg))
    }

    /// The iteration's LPN encoding, after its message is out.
    fn finish_iteration(
        &mut self,
        p: &LpnParams,
        out: &mut Vec<Block>,
        start: usize,
        bootstrap: bool,
    ) -> usize {
        lpn::lpn_encode_send(&self.reserve[..p.k], &mut out[start..]);
        self.iter += 1;
        if !bootstrap {
            return p.n();
        }
        let m = self.params.main.reserve();
        take_front(out, start, m, &mut self.reserve);
        p.n() - m
    }
}

/// The Ferret receiver (holds the reserve `(r, M)`). Not `Debug` (secret state).
pub struct FerretCotReceiver {
    params: FerretParams,
    reserve: Vec<Block>,
    reserve_bits: Vec<bool>,
    iter: u64,
    poisoned: bool,
}

impl FerretCotReceiver {
    /// IKNP base OTs, the initial reserve by IKNP (random choice bits) and the pre-iteration.
    pub fn setup<C: Channel>(
        ch: &mut C,
        prg: &mut Prg,
        params: FerretParams,
    ) -> Result<Self, OtError> {
        params.check()?;
        let ext = OtExtReceiver::setup(ch, prg)?;
        Self::from_iknp(ch, ext, prg, params)
    }

    /// Bootstraps from a set-up IKNP receiver; `prg` draws the initial choice bits.
    pub fn from_iknp<C: Channel>(
        ch: &mut C,
        mut ext: OtExtReceiver,
        prg: &mut Prg,
        params: FerretParams,
    ) -> Result<Self, OtError> {
        params.check()?;
        let first = params.pre.unwrap_or(params.main);
        let bits = prg.bits(first.reserve());
        let reserve = ext.recv_cot(ch, &bits)?;
        let mut r = FerretCotReceiver {
            params,
            reserve,
            reserve_bits: bits,
            iter: 0,
            poisoned: false,
        };
        if let Some(pre) = params.pre {
            let (mut out, mut ob) = (Vec::new(), Vec::new());
            r.iterate(ch, &pre, &mut out, &mut ob, false)?;
            out.truncate(params.main.reserve());
            ob.truncate(params.main.reserve());
            r.reserve = out;
            r.reserve_bits = ob;
        }
        Ok(r)
    }

    pub fn params(&self) -> FerretParams {
        self.params
    }

    /// One main iteration: appends `params().per_iteration()` COTs (`M_j` to `out`, `r_j` to
    /// `bits`).
    pub fn extend<C: Channel>(
        &mut self,
        ch: &mut C,
        out: &mut Vec<Block>,
        bits: &mut Vec<bool>,
    ) -> Result<usize, OtError> {
        let main = self.check_extend(out, bits)?;
        let r = self.iterate(ch, &main, out, bits, true);
        poison_on_err(&mut self.poisoned, r)
    }

    /// The main iteration's parameters, once the instance is usable and `out` and `bits` agree.
    fn check_extend(&self, out: &[Block], bits: &[bool]) -> Result<LpnParams, OtError> {
        check_usable(self.poisoned)?;
        if out.len() != bits.len() {
            return Err(OtError::arg("Ferret extend: one bit per COT"));
        }
        Ok(self.params.main)
    }

    /// IO-free main iteration: absorbs the message of the sender's
    /// [`FerretCotSender::extend_step`] (its length is checked against the public parameters)
    /// and appends `params().per_iteration()` COTs (`M_j` to `out`, `r_j` to `bits`).
    pub fn extend_step(
        &mut self,
        msg: &[u8],
        out: &mut Vec<Block>,
        bits: &mut Vec<bool>,
    ) -> Result<usize, OtError> {
        let main = self.check_extend(out, bits)?;
        let n = main.t * mpcot::msg_blocks_per_tree(main.log_bin as usize);
        let r = blocks_of(msg, n).and_then(|msg| self.absorb(&main, &msg, out, bits, true));
        poison_on_err(&mut self.poisoned, r)
    }

    fn iterate<C: Channel>(
        &mut self,
        ch: &mut C,
        p: &LpnParams,
        out: &mut Vec<Block>,
        bits: &mut Vec<bool>,
        bootstrap: bool,
    ) -> Result<usize, OtError> {
        // The frame length is fixed by the public parameters: checked before allocation.
        let msg = ch.recv_pod::<Block>(p.t * mpcot::msg_blocks_per_tree(p.log_bin as usize))?;
        self.absorb(p, &msg, out, bits, bootstrap)
    }

    /// The iteration on the sender's message: MPCOT, then the LPN encoding.
    fn absorb(
        &mut self,
        p: &LpnParams,
        msg: &[Block],
        out: &mut Vec<Block>,
        bits: &mut Vec<bool>,
        bootstrap: bool,
    ) -> Result<usize, OtError> {
        let h = p.log_bin as usize;
        debug_assert_eq!(self.reserve.len(), p.reserve());
        check_iter(self.iter)?;
        let start = out.len();
        out.resize(start + p.n(), Block::ZERO);
        bits.resize(start + p.n(), false);
        let iter = self.iter;
        let alphas = mpcot::mpcot_receive(
            h,
            &self.reserve[p.k..],
            &self.reserve_bits[p.k..],
            msg,
            &mut out[start..],
            |j| ferret_tweak(iter, j),
        );
        for (i, a) in alphas.iter().enumerate() {
            bits[start + (i << h) + a] = true;
        }
        lpn::lpn_encode_receive(
            &self.reserve[..p.k],
            &self.reserve_bits[..p.k],
            &mut out[start..],
            &mut bits[start..],
        );
        self.iter += 1;
        if !bootstrap {
            return Ok(p.n());
        }
        let m = self.params.main.reserve();
        take_front(out, start, m, &mut self.reserve);
        take_front(bits, start, m, &mut self.reserve_bits);
        Ok(p.n() - m)
    }
}
