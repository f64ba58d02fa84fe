//! A whole two-party run of one OPAF/SIRNN math function: the public entry point the CLI's
//! `bench math`, the runtime and the Python bindings share.
//!
//! The client owns the inputs and secret-shares them (not metered as the function); the
//! parties set up the COT pools (setup: base OTs of both directions), precompute the
//! correlations a dry run says the function consumes (offline), run it on the shares (online),
//! and then the client learns the outputs. Each party calls [`run_math`] with its own
//! [`Party`] over its end of the channel.
use crate::ctx::{BlockStat, Ctx, Party};
use crate::error::{invalid, Result};
use crate::math::{self, Impl};
use crate::reveal::{reveal, share_input, RevealTo};
use crate::ring::Format;
use crate::ulp::{ulp_stats, MathFn, UlpStats};
use secinfer_net::{Channel, Cost, Phase};
use secinfer_ot::CotSource;
use std::collections::BTreeMap;
use std::time::Instant;

/// What to compute: the function, its implementation, the formats and the COT-pool filler.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MathJob {
    pub func: MathFn,
    pub imp: Impl,
    pub input: Format,
    pub output: Format,
    pub source: CotSource,
}

impl MathJob {
    /// The job with the papers' formats for `func` ([`math::default_formats`]), filled by
    /// `source`.
    pub fn with_default_formats(func: MathFn, imp: Impl, source: CotSource) -> MathJob {
        let (input, output) = math::default_formats(func);
        MathJob {
            func,
            imp,
            input,
            output,
            source,
        }
    }
}

/// One party's account of its run.
pub struct MathRun {
    /// Wall time of each phase on this party's clock (seconds).
    pub setup_s: f64,
    pub offline_s: f64,
    pub online_s: f64,
    /// This party's meter when the function ended (both directions; the reveal of the outputs
    /// that follows is not counted).
    pub cost: Cost,
    /// The outputs as integers of the output format's ring: the client's only.
    pub outputs: Option<Vec<u64>>,
    /// Calls per building block.
    pub blocks: BTreeMap<&'static str, u64>,
    /// Cost per building block as this party saw it (see [`Ctx::stats`]).
    pub block_stats: BTreeMap<&'static str, BlockStat>,
}

impl MathRun {
    /// The client's ULP error of its outputs against the exact real function on `xs`.
    pub fn ulp(&self, job: &MathJob, xs: &[u64]) -> Result<UlpStats> {
        let out = self
            .outputs
            .as_ref()
            .ok_or_else(|| invalid("only the client learns the outputs"))?;
        if out.len() != xs.len() {
            return Err(invalid("one output per input is needed"));
        }
        Ok(ulp_stats(job.func, xs, job.input, out, job.output))
    }
}

/// One byte each way (charged to the running phase, offline where the runs call it), so the
/// online clocks start together and neither party's online time includes waiting for the tail
/// of the other's offline work.
pub fn barrier<C: Channel>(party: Party, ch: &mut C) -> Result<()> {
    if party == Party::Server {
        ch.send_pod(&[1u8])?;
        ch.recv_pod::<u8>(1)?;
    } else {
        ch.recv_pod::<u8>(1)?;
        ch.send_pod(&[1u8])?;
    }
    ch.flush()?;
    Ok(())
}

/// Runs `job` on `n` elements as `party` over `ch`. The client passes its inputs `xs` (ring
/// elements of the input format, `n` of them); the server passes `None`. Both parties must pass
/// the same job and `n`.
pub fn run_math<C: Channel>(
    party: Party,
    ch: &mut C,
    job: &MathJob,
    xs: Option<&[u64]>,
    n: usize,
) -> Result<MathRun> {
    let (f, imp, inp, out) = (job.func, job.imp, job.input, job.output);
    if party == Party::Client && xs.map(<[u64]>::len) != Some(n) {
        return Err(invalid("the client passes its n inputs"));
    }
    let t0 = Instant::now();
    let mut ctx = Ctx::setup_with(party, ch, job.source)?;
    let setup_s = t0.elapsed().as_secs_f64();
    // Input sharing (not part of the measured function).
    let own_inputs = if party == Party::Client { xs } else { None };
    let mine = share_input(&mut ctx, ch, Party::Client, own_inputs, n, inp.bits)?;
    // Offline: the correlations the function will consume, counted by dry runs on this party's
    // side (OT counts do not depend on the data, so both parties agree without a message), then
    // precomputed. Element-wise: dry runs of 1 and 2 elements size it.
    let zeros = vec![0u64; n];
    let plan = crate::plan_for_elementwise(party, n, |c, dry, m| {
        math::evaluate(c, dry, f, imp, &zeros[..m], inp, out)
    })?;
    ch.set_phase(Phase::Offline);
    let t_off = Instant::now();
    ctx.preprocess(ch, plan)?;
    barrier(party, ch)?;
    let offline_s = t_off.elapsed().as_secs_f64();
    ch.set_phase(Phase::Online);
    let t1 = Instant::now();
    let y = math::evaluate(&mut ctx, ch, f, imp, &mine, inp, out)?;
    ch.flush()?;
    let online_s = t1.elapsed().as_secs_f64();
    let cost = ch.cost();
    // Output to the client (after the measurement).
    let outputs = reveal(&mut ctx, ch, &y, out.bits, RevealTo::Only(Party::Client))?;
    Ok(MathRun {
        setup_s,
        offline_s,
        online_s,
        cost,
        outputs,
        blocks: std::mem::take(&mut ctx.counts),
        block_stats: std::mem::take(&mut ctx.stats),
    })
}
