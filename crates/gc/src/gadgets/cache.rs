//! Circuits a model builds once and reuses in every session: its activation circuits with the
//! range of their outputs, and any other circuit under a key of the caller's. A cache is a value
//! its model owns (there is no process-wide cache), so two models never share or race on one.
use crate::activation::{ActSpec, Func};
use crate::circuit::Circuit;
use secinfer_core::Format;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// An activation circuit and the smallest and largest value it outputs over every input.
pub type ActEntry = (Arc<Circuit>, i64, i64);

/// A circuit under a caller's key: a name and the parameters it was built for.
pub type CircuitKey = (&'static str, Vec<u64>);

/// The circuits one model uses (activation circuits from 2^bits evaluations each, a language
/// model's log-probability circuit of millions of gates), built at most once per cache and
/// shareable between the model's concurrent sessions.
#[derive(Default)]
pub struct CircuitCache {
    acts: Mutex<HashMap<(Func, Format, Format), ActEntry>>,
    others: Mutex<HashMap<CircuitKey, Arc<Circuit>>>,
}

impl CircuitCache {
    /// The stand-alone circuit ([`ActSpec::simple`]) of `func` from `input` to `output`, and the
    /// smallest and largest value it outputs over every input (read as `output.bits`-bit
    /// two's complement), evaluated once per cache.
    pub fn activation(&self, func: Func, input: Format, output: Format) -> ActEntry {
        let key = (func, input, output);
        // A poisoned lock only costs the cache: the entry is rebuilt.
        if let Some(c) = self.acts.lock().ok().and_then(|m| m.get(&key).cloned()) {
            return c;
        }
        let spec = ActSpec::simple(func, input, output);
        let c = spec.circuit();
        let (mut min, mut max) = (i64::MAX, i64::MIN);
        for v in truth_table(&c, input.bits as usize) {
            let y = output.decode(v);
            min = min.min(y);
            max = max.max(y);
        }
        let e = (Arc::new(c), min, max);
        if let Ok(mut m) = self.acts.lock() {
            m.insert(key, e.clone());
        }
        e
    }

    /// The circuit cached under `key`, or `build()`'s, kept for the next caller.
    pub fn get_or_build(&self, key: CircuitKey, build: impl FnOnce() -> Circuit) -> Arc<Circuit> {
        if let Some(c) = self.others.lock().ok().and_then(|m| m.get(&key).cloned()) {
            return c;
        }
        let c = Arc::new(build());
        if let Ok(mut m) = self.others.lock() {
            m.insert(key, c.clone());
        }
        c
    }
}

/// A circuit's output word (output j = bit j, at most 64 outputs) at every input 0 .. 2^nb
/// (input i = bit i of the index), evaluated bit-sliced, 64 inputs per evaluation.
pub fn truth_table(c: &Circuit, nb: usize) -> Vec<u64> {
    let total = 1u64 << nb;
    let mut out = Vec::with_capacity(total as usize);
    let mut base = 0u64;
    while base < total {
        let ins: Vec<u64> = (0..nb)
            .map(|i| {
                (0..64u64)
                    .filter(|l| base + l < total && ((base + l) >> i) & 1 == 1)
                    .fold(0u64, |a, l| a | (1 << l))
            })
            .collect();
        let outs = c.eval_sliced(&ins);
        for l in 0..64u64.min(total - base) {
            out.push(
                outs.iter()
                    .enumerate()
                    .fold(0u64, |a, (j, w)| a | (((w >> l) & 1) << j)),
            );
        }
        base += 64;
    }
    out
}
