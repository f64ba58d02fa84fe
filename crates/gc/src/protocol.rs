//! Two-party garbled-circuit execution, batched over many copies of one circuit.
//!
//! The server garbles, the client evaluates (DESIGN.md §4). A circuit's first `g_in` inputs are
//! the garbler's, the next `e_in` the evaluator's; outputs are revealed to the evaluator only.
//!
//! **Offline / online split.** With shares in and shares out the circuit is input-independent, so:
//! * offline ([`garble_offline`] / [`evaluate_offline`]): the garbler picks fresh zero-labels for
//!   every input wire of every copy, garbles all copies (rayon, `LANES` copies per hash batch,
//!   or one for a batch of one copy: [`batch_lanes`]) and
//!   streams the tables in 64 KiB frames as they are produced, then the output decoding bits
//!   (the permute bits lsb(W0) of the output wires). The evaluator stores the tables as the
//!   frames they arrived in. Garbler inputs that do not depend on the online input (the output
//!   masks of [`crate::shares`]) can have their labels sent here too
//!   ([`GarbledBatch::send_inputs_early`]).
//! * online ([`garble_online`] / [`evaluate_online`]), two rounds: the evaluator gets its input
//!   labels by correlated OT whose Δ is the free-XOR offset (one COT per input bit: it learns
//!   m0 ⊕ c·Δ); the garbler then sends, in one flight, the active labels of its remaining input
//!   bits and the corrections W0 ⊕ m0; the evaluator evaluates and decodes.
//!
//! **Offline labels** ([`garble_offline_with`]): when the evaluator's inputs are known offline
//! (shares of masks), the garbler uses the sender's m0 of COTs under Δ as the evaluator's
//! zero-labels and the evaluator installs m0 ⊕ c·Δ ([`ReceivedBatch::set_evaluator_labels`]):
//! the online phase is one flight of garbler labels ([`garble_online_preset`] /
//! [`evaluate_online_preset`]). With [`Reveal::Garbler`] no decoding bits are sent: the garbler
//! keeps them, so each output is XOR-shared between its permute bit and the evaluator's label lsb
//! (or the evaluator returns the lsbs and the garbler decodes, [`GarbledBatch::decode`]).
//!
//! **Known garbler inputs** ([`BatchJob::g_known`]): a garbler that knows its inputs when it
//! garbles (online, step by step) folds them into the garbling: each of its input wires gets
//! the zero-label K ⊕ a·Δ with K a public label ([`crate::garble::public_labels`]), so the
//! evaluator's active label is K and no garbler label is ever sent ([`evaluate_known`]). The
//! tables then travel online; what is saved is 16 bytes per garbler input bit.
//!
//! The garbler keeps only input zero-labels between the phases; the evaluator keeps the tables
//! ([`Scheme::table_bytes`] per AND gate and `LANES` copies: 32 bytes per AND and copy with
//! half-gates, 24.625 with three-halves; a batch's scheme is [`BatchJob::scheme`] on the
//! garbler's side and the argument of [`evaluate_offline_scheme`] on the evaluator's). For circuits too big to store, [`stream_garble`] /
//! [`stream_evaluate`] run everything online with tables garbled, sent and evaluated in frames
//! (memory bounded on both sides).
use crate::backend::{wires, Backend, Bit};
use crate::circuit::Circuit;
use crate::garble::{
    public_labels, ChannelSink, ChannelSource, Evaluator, FrameSource, Garbler, Scheme, FRAME_BYTES,
};
use crate::GcError;
use rayon::prelude::*;
use secinfer_core::{Block, Prg};
use secinfer_net::Channel;

/// Circuit copies per hash batch (one wire of the garbler/evaluator backends).
pub const LANES: usize = 16;

/// The correlated-OT interfaces of `secinfer-core`, at the path this crate's callers used.
#[doc(hidden)]
pub use secinfer_core::{CotReceiver, CotSender};

/// Circuit copies garbled together in a batch of `n`: one for a circuit that runs once (its
/// tables are sent once, not padded to [`LANES`] copies), [`LANES`] otherwise. Both parties
/// derive it from `n`, so it never travels.
pub fn batch_lanes(n: usize) -> usize {
    if n == 1 {
        1
    } else {
        LANES
    }
}

/// Chunks of [`batch_lanes`] copies in a batch of `n`.
fn chunks(n: usize) -> usize {
    n.div_ceil(batch_lanes(n))
}

/// Bytes of garbled tables a batch of `n` copies of `circ` sends under `scheme` (whole chunks
/// of [`batch_lanes`] copies), or `None` on overflow: what the evaluator accepts, exactly.
pub fn batch_table_bytes(scheme: Scheme, circ: &Circuit, n: usize) -> Option<u64> {
    scheme.tables_bytes(circ.and_count(), chunks(n) as u64, batch_lanes(n))
}

/// Output wires that are real wires (constants need no decoding).
pub fn wire_outputs(c: &Circuit) -> usize {
    c.outputs
        .iter()
        .filter(|o| matches!(o, Bit::Wire(_)))
        .count()
}

/// Chunks per rayon task and tasks per wave: tasks reuse one garbler/evaluator across their
/// chunks; a wave (2 tasks per thread, ≤ 32 chunks and ≤ 4 MiB of tables each) is garbled in
/// parallel and sent before the next starts, so sending overlaps the peer's receiving and the
/// garbler's memory stays bounded.
fn task_split(circ: &Circuit, scheme: Scheme, n: usize) -> (usize, usize) {
    let nch = chunks(n);
    let threads = rayon::current_num_threads().max(1);
    let chunk_bytes = (circ.and_count() as usize * scheme.table_bytes(batch_lanes(n))).max(1);
    let cap = ((4 << 20) / chunk_bytes).max(1);
    let per_task = nch.div_ceil(threads * 16).clamp(1, cap.min(32));
    (per_task, threads * 2)
}

fn check_shape(c: &Circuit, g_in: usize, n: usize) -> Result<(), GcError> {
    if g_in > c.n_inputs {
        return Err(GcError::invalid("garbler inputs exceed circuit inputs"));
    }
    if n == 0 {
        return Err(GcError::invalid("empty batch"));
    }
    if (chunks(n) * batch_lanes(n)) as u64 > u32::MAX as u64 {
        return Err(GcError::invalid("batch too large"));
    }
    Ok(())
}

/// The garbler's state between the offline and online phases: the input zero-labels (secret;
/// not `Debug`).
pub struct GarbledBatch {
    delta: Block,
    g_in: usize,
    e_in: usize,
    n: usize,
    /// Per chunk, per kept input wire (`stride` of them: all, or only the garbler's for a
    /// preset batch), `lanes` zero-labels.
    labels: Vec<Block>,
    /// Copies per chunk ([`batch_lanes`]).
    lanes: usize,
    stride: usize,
    /// Garbler input wires whose labels were already sent (input-independent values).
    early: std::ops::Range<usize>,
    /// The evaluator's input labels came from offline COTs ([`garble_offline_with`]).
    preset: bool,
    /// The garbler's inputs were folded into the garbling ([`BatchJob::g_known`]): its
    /// active labels are the public ones and nothing is sent for them.
    known: bool,
    /// Output decoding bits kept by the garbler (`Reveal::Garbler`), instance-major.
    decode: Vec<bool>,
    reveal: Reveal,
}

impl GarbledBatch {
    pub fn len(&self) -> usize {
        self.n
    }
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }
    fn zero(&self, i: usize, w: usize) -> Block {
        let (c, l) = (i / self.lanes, i % self.lanes);
        self.labels[(c * self.stride + w) * self.lanes + l]
    }

    /// The active labels of the garbler's late (not early-sent) inputs, instance-major, as the
    /// frame that carries them (blocks little-endian, as `send_pod` would lay them out): built
    /// in place, so the channel moves it instead of copying (the GRU's online labels are
    /// ≈ 14 MB, on the online critical path).
    fn active_late(&self, g_inputs: &[bool]) -> Vec<u8> {
        let d = self.delta;
        let late: Vec<usize> = (0..self.g_in).filter(|w| !self.early.contains(w)).collect();
        let mut mine: Vec<u8> = Vec::with_capacity(16 * self.n * late.len());
        for i in 0..self.n {
            for &w in &late {
                let b = self.zero(i, w) ^ d.and_bit(g_inputs[i * self.g_in + w]);
                mine.extend_from_slice(&b.to_bytes());
            }
        }
        mine
    }

    /// Decodes the permute bits an evaluator returned for a `Reveal::Garbler` batch
    /// (`n × (wire outputs)` bits, instance-major) into the outputs (`n × n_outputs`; constant
    /// outputs are filled in from the circuit).
    pub fn decode(&self, circ: &Circuit, lsbs: &[bool]) -> Result<Vec<bool>, GcError> {
        let wo = wire_outputs(circ);
        if self.reveal != Reveal::Garbler
            || lsbs.len() != self.n * wo
            || self.decode.len() != lsbs.len()
        {
            return Err(GcError::invalid("output permute bits for garbler decoding"));
        }
        Ok(decode_outputs(circ, self.n, &self.decode, lsbs))
    }

    /// Sends, before the online phase, the active labels of garbler input wires `wires` (a range
    /// inside `0..g_in`) for every copy: for garbler inputs that do not depend on the online
    /// input, such as fresh output masks. `bits` is `n × wires.len()`, instance-major. The
    /// online phase then sends only the other garbler wires.
    pub fn send_inputs_early<C: Channel>(
        &mut self,
        ch: &mut C,
        wires: std::ops::Range<usize>,
        bits: &[bool],
    ) -> Result<(), GcError> {
        let k = wires.len();
        if wires.end > self.g_in || bits.len() != self.n * k || !self.early.is_empty() || self.known
        {
            return Err(GcError::invalid("early garbler inputs"));
        }
        let d = self.delta;
        let lab: Vec<Block> = (0..self.n * k)
            .map(|j| self.zero(j / k, wires.start + j % k) ^ d.and_bit(bits[j]))
            .collect();
        ch.send_pod(&lab)?;
        self.early = wires;
        Ok(())
    }
}

/// Packs bools little-endian into bytes.
pub fn pack_bits(bits: &[bool]) -> Vec<u8> {
    let mut v = vec![0u8; bits.len().div_ceil(8)];
    for (i, &b) in bits.iter().enumerate() {
        v[i / 8] |= (b as u8) << (i % 8);
    }
    v
}

/// Unpacks `n` bits.
pub fn unpack_bits(bytes: &[u8], n: usize) -> Vec<bool> {
    (0..n).map(|i| (bytes[i / 8] >> (i % 8)) & 1 == 1).collect()
}

/// Offline: garbles `n` copies of `circ` under `delta` (lsb must be 1) and streams the tables and
/// output decoding bits to the evaluator.
pub fn garble_offline<C: Channel>(
    ch: &mut C,
    circ: &Circuit,
    g_in: usize,
    n: usize,
    delta: Block,
) -> Result<GarbledBatch, GcError> {
    garble_offline_with(ch, circ, g_in, n, delta, None, Reveal::Evaluator)
}

/// Who learns a batch's outputs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reveal {
    /// The decoding bits are sent with the tables; the evaluator decodes.
    Evaluator,
    /// The garbler keeps the decoding bits; the evaluator returns the permute bits of the output
    /// labels ([`evaluate_online_preset`]) and the garbler decodes them
    /// ([`GarbledBatch::decode`]). The evaluator learns nothing about the outputs (the permute
    /// bits are uniform to it), so outputs can be the garbler's next share of a value.
    Garbler,
}

/// Offline garbling with the evaluator's input zero-labels given: `e_zero` (`n × e_in`,
/// instance-major) are the sender's messages m0_j of correlated OTs whose Δ is `delta` and whose
/// choice bits are the evaluator's inputs. The evaluator already holds m0_j ⊕ c_j·Δ, the active
/// label ([`ReceivedBatch::set_evaluator_labels`]): no correction and no OT online, so an
/// evaluator input costs one COT (16 bytes with IKNP, offline) instead of a COT, a 16-byte
/// correction and an online round. This needs evaluator inputs that are known offline, e.g.
/// shares of masks (Delphi-style preprocessing).
pub fn garble_offline_with<C: Channel>(
    ch: &mut C,
    circ: &Circuit,
    g_in: usize,
    n: usize,
    delta: Block,
    e_zero: Option<&[Block]>,
    reveal: Reveal,
) -> Result<GarbledBatch, GcError> {
    let job = BatchJob {
        circ,
        g_in,
        n,
        e_zero,
        reveal,
        scheme: Scheme::HalfGates,
        g_known: None,
    };
    let mut out = garble_batches(ch, std::slice::from_ref(&job), delta)?;
    Ok(out.remove(0))
}

/// One batch for [`garble_batches`]: the arguments of [`garble_offline_with`] and the
/// AND-gate scheme (the evaluator must pass the same one to [`evaluate_offline_scheme`]).
#[derive(Clone, Copy)]
pub struct BatchJob<'a> {
    pub circ: &'a Circuit,
    pub g_in: usize,
    pub n: usize,
    pub e_zero: Option<&'a [Block]>,
    pub reveal: Reveal,
    pub scheme: Scheme,
    /// The garbler's inputs (`n × g_in` bits, instance-major) when it knows them as it garbles:
    /// each wire's zero-label is then K ⊕ a·Δ with K its public label
    /// ([`crate::garble::public_labels`]), so the evaluator already holds the active label K
    /// and the garbler sends no label (16 bytes per input bit saved). The evaluator runs such
    /// a batch with [`evaluate_known`]. `None`: random zero-labels, the active labels sent
    /// later ([`garble_online_preset`]).
    pub g_known: Option<&'a [bool]>,
}

/// One rayon task's share of a batch: chunks `c0..c1` with their own label PRG.
struct GarbleTask {
    job: usize,
    c0: usize,
    c1: usize,
    seed: Block,
}

/// A task's output: its tables already cut into wire frames, its input zero-labels and the
/// output permute bits.
type TaskOut = (Vec<Vec<u8>>, Vec<Block>, Vec<bool>);

/// [`garble_task`] at the batch's lane count.
fn garble_task_any(
    job: &BatchJob<'_>,
    nonce: u64,
    delta: Block,
    t: &GarbleTask,
) -> Result<TaskOut, GcError> {
    if batch_lanes(job.n) == 1 {
        garble_task::<1>(job, nonce, delta, t)
    } else {
        garble_task::<LANES>(job, nonce, delta, t)
    }
}

fn garble_task<const L: usize>(
    job: &BatchJob<'_>,
    nonce: u64,
    delta: Block,
    t: &GarbleTask,
) -> Result<TaskOut, GcError> {
    let (circ, g_in, n) = (job.circ, job.g_in, job.n);
    let n_in = circ.n_inputs;
    let e_in = n_in - g_in;
    let (c0, c1) = (t.c0, t.c1);
    // Tables go out as wire frames of at most FRAME_BYTES (whole gates), copied while still in
    // cache; the garbler's own buffer stays one frame long.
    let mut g = Garbler::<L, FrameSink>::with_sink(
        delta,
        nonce,
        (c0 * L) as u32,
        Prg::from_seed(t.seed),
        Some(FrameSink(Vec::new())),
    )?
    .with_scheme(job.scheme);
    g.tables
        .reserve_exact(FRAME_BYTES + job.scheme.table_bytes(L));
    let stride = stride(job);
    let mut flat = Vec::with_capacity((c1 - c0) * stride * L);
    let mut dec = Vec::with_capacity((c1 - c0) * L * circ.n_outputs());
    for c in c0..c1 {
        g.set_instances(nonce, (c * L) as u32)?;
        let mut ins: Vec<[Block; L]> = match job.g_known {
            Some(bits) => {
                // Copies past n (padding) encode 0; the evaluator ignores their outputs.
                let real = n.saturating_sub(c * L).min(L);
                (0..g_in)
                    .map(|w| {
                        let mut lanes = public_labels::<L>(nonce, (c * L) as u32, w as u32);
                        for (l, lab) in lanes.iter_mut().enumerate().take(real) {
                            *lab ^= delta.and_bit(bits[(c * L + l) * g_in + w]);
                        }
                        lanes
                    })
                    .collect()
            }
            None => (0..g_in).map(|_| g.input()).collect(),
        };
        match job.e_zero {
            Some(z) => {
                // The COTs' m0 are the zero-labels; copies past n (the last chunk's padding)
                // get random ones.
                let real = n.saturating_sub(c * L).min(L);
                for w in 0..e_in {
                    let mut lanes = if real < L {
                        g.input()
                    } else {
                        [Block::ZERO; L]
                    };
                    for (l, lab) in lanes.iter_mut().enumerate().take(real) {
                        *lab = z[(c * L + l) * e_in + w];
                    }
                    ins.push(lanes);
                }
            }
            None => ins.extend((0..e_in).map(|_| g.input())),
        }
        let outs = circ.eval(&mut g, &ins);
        for l in 0..L {
            for o in &outs {
                if let Bit::Wire(w) = o {
                    dec.push(w[l].lsb());
                }
            }
        }
        flat.extend(ins[..stride].iter().flat_map(|w| w.iter().copied()));
    }
    g.finish()?;
    let frames = g.into_sink().map(|s| s.0).unwrap_or_default();
    Ok((frames, flat, dec))
}

/// Input wires whose zero-labels a batch keeps per chunk: all of them, or only the garbler's
/// when the evaluator's came from offline COTs (they are never needed again: the evaluator
/// already holds its active labels).
fn stride(job: &BatchJob<'_>) -> usize {
    if job.e_zero.is_some() {
        job.g_in
    } else {
        job.circ.n_inputs
    }
}

/// Collects a task's tables as wire frames (on the worker, so the sending thread only moves
/// them).
struct FrameSink(Vec<Vec<u8>>);
impl crate::garble::TableSink for FrameSink {
    fn put(&mut self, bytes: &[u8]) -> Result<(), GcError> {
        self.0.push(bytes.to_vec());
        Ok(())
    }
}

/// [`garble_offline_with`] for several batches at once, on the wire exactly as the same calls
/// one after the other (per batch: nonce, table frames, decoding bits if revealed), but
/// pipelined: every batch's tasks are garbled on the rayon pool in order, at most a few tasks
/// ahead of the sender, while this thread sends finished tasks' frames. With one call per
/// batch the pool idled during each batch's sends and each batch paid a fork-join. Offline
/// for input-independent batches; online, batch by batch, for batches whose garbler inputs are
/// folded in ([`BatchJob::g_known`]; the evaluator receives either kind with
/// [`evaluate_offline_scheme`]).
pub fn garble_batches<C: Channel>(
    ch: &mut C,
    jobs: &[BatchJob<'_>],
    delta: Block,
) -> Result<Vec<GarbledBatch>, GcError> {
    if !delta.lsb() {
        return Err(GcError::invalid("free-XOR offset needs lsb(Δ) = 1"));
    }
    let mut prg = Prg::new();
    let mut nonces = Vec::with_capacity(jobs.len());
    let mut tasks: Vec<GarbleTask> = Vec::new();
    // First task of each job, and one past its last.
    let mut bounds = Vec::with_capacity(jobs.len() + 1);
    for (j, job) in jobs.iter().enumerate() {
        let (circ, g_in, n) = (job.circ, job.g_in, job.n);
        check_shape(circ, g_in, n)?;
        if let Some(z) = job.e_zero {
            if z.len() != n * (circ.n_inputs - g_in) {
                return Err(GcError::invalid(
                    "evaluator zero-labels: one per input bit per copy",
                ));
            }
        }
        if job.g_known.is_some_and(|b| b.len() != n * g_in) {
            return Err(GcError::invalid(
                "known garbler inputs: one per input bit per copy",
            ));
        }
        nonces.push(prg.next_block().low_u64());
        bounds.push(tasks.len());
        let nch = chunks(n);
        let (per_task, _) = task_split(circ, job.scheme, n);
        for c0 in (0..nch).step_by(per_task) {
            tasks.push(GarbleTask {
                job: j,
                c0,
                c1: (c0 + per_task).min(nch),
                seed: prg.next_block(),
            });
        }
    }
    bounds.push(tasks.len());
    let mut out: Vec<GarbledBatch> = Vec::with_capacity(jobs.len());
    let mut batch = |j: usize, labels: Vec<Block>, mut decode: Vec<bool>, ch: &mut C| {
        let job = &jobs[j];
        let wo = wire_outputs(job.circ);
        // decode bits of the real copies only (instance-major)
        decode.truncate(job.n * wo);
        let kept = if job.reveal == Reveal::Evaluator {
            ch.send_pod(&pack_bits(&decode))?;
            Vec::new()
        } else {
            decode
        };
        out.push(GarbledBatch {
            delta,
            g_in: job.g_in,
            e_in: job.circ.n_inputs - job.g_in,
            n: job.n,
            labels,
            lanes: batch_lanes(job.n),
            stride: stride(job),
            early: 0..0,
            preset: job.e_zero.is_some(),
            known: job.g_known.is_some(),
            decode: kept,
            reveal: job.reveal,
        });
        Ok::<(), GcError>(())
    };
    // Sends task `i`'s frames, opening and closing its batch on the way.
    let mut labels = Vec::new();
    let mut decode = Vec::new();
    let mut emit = |i: usize, r: TaskOut, ch: &mut C| -> Result<(), GcError> {
        let j = tasks[i].job;
        if i == bounds[j] {
            ch.send_pod(&[nonces[j]])?;
        }
        let (frames, l, d) = r;
        for f in frames {
            ch.send_frame_vec(f)?;
        }
        labels.extend(l);
        decode.extend(d);
        if i + 1 == bounds[j + 1] {
            batch(
                j,
                std::mem::take(&mut labels),
                std::mem::take(&mut decode),
                ch,
            )?;
        }
        Ok(())
    };
    // Workers garble tasks in order, at most `window` ahead of this thread, which sends the
    // finished tasks' frames in order meanwhile. Workers never wait on the sender (the result
    // queue is unbounded; the window bounds it), so the pool stays free for the peer when both
    // parties share it; a panicking task becomes an error.
    let window = 2 * rayon::current_num_threads().max(1);
    let ntasks = tasks.len();
    let (tx, rx) = std::sync::mpsc::channel::<(usize, Result<TaskOut, GcError>)>();
    let (tasks, nonces_r) = (&tasks, &nonces);
    rayon::in_place_scope(|s| {
        let mut spawned = 0;
        let mut pending: std::collections::BTreeMap<usize, TaskOut> = Default::default();
        for want in 0..ntasks {
            while spawned < ntasks && spawned < want + window {
                let (i, tx) = (spawned, tx.clone());
                s.spawn(move |_| {
                    let t = &tasks[i];
                    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        garble_task_any(&jobs[t.job], nonces_r[t.job], delta, t)
                    }))
                    .unwrap_or_else(|_| Err(GcError::invalid("garbling task panicked")));
                    let _ = tx.send((i, r));
                });
                spawned += 1;
            }
            let r = loop {
                if let Some(r) = pending.remove(&want) {
                    break r;
                }
                let (i, r) = rx
                    .recv()
                    .map_err(|_| GcError::invalid("garbling results lost"))?;
                pending.insert(i, r?);
            };
            emit(want, r, ch)?;
        }
        Ok::<(), GcError>(())
    })?;
    ch.flush()?;
    Ok(out)
}

/// The evaluator's state between the phases: the tables and decoding bits.
pub struct ReceivedBatch {
    nonce: u64,
    scheme: Scheme,
    g_in: usize,
    n: usize,
    /// The table frames as received (whole gates each) and their byte offsets.
    frames: Vec<Vec<u8>>,
    starts: Vec<u64>,
    decode: Vec<bool>,
    early: std::ops::Range<usize>,
    early_labels: Vec<Block>,
    /// Active labels of the evaluator's inputs from offline COTs (secret): a range of a
    /// buffer that may hold other batches' labels too (one COT call serves all of a session's
    /// batches; sharing it saves a copy of every label).
    e_labels: Option<(std::sync::Arc<Vec<Block>>, std::ops::Range<usize>)>,
    reveal: Reveal,
}

impl ReceivedBatch {
    /// Installs the evaluator's active input labels (`n × e_in`, instance-major): the receiver's
    /// outputs m0_j ⊕ c_j·Δ of the correlated OTs whose m0_j the garbler passed to
    /// [`garble_offline_with`].
    pub fn set_evaluator_labels(
        &mut self,
        circ: &Circuit,
        labels: Vec<Block>,
    ) -> Result<(), GcError> {
        let len = labels.len();
        self.set_evaluator_labels_shared(circ, std::sync::Arc::new(labels), 0..len)
    }

    /// [`ReceivedBatch::set_evaluator_labels`] from `labels[range]` of a buffer shared with
    /// other batches (no copy).
    pub fn set_evaluator_labels_shared(
        &mut self,
        circ: &Circuit,
        labels: std::sync::Arc<Vec<Block>>,
        range: std::ops::Range<usize>,
    ) -> Result<(), GcError> {
        if range.end > labels.len()
            || range.start > range.end
            || range.len() != self.n * (circ.n_inputs - self.g_in)
            || self.e_labels.is_some()
        {
            return Err(GcError::invalid(
                "evaluator labels: one per input bit per copy, once",
            ));
        }
        self.e_labels = Some((labels, range));
        Ok(())
    }

    /// Receives the labels the garbler sent with [`GarbledBatch::send_inputs_early`].
    pub fn recv_inputs_early<C: Channel>(
        &mut self,
        ch: &mut C,
        wires: std::ops::Range<usize>,
    ) -> Result<(), GcError> {
        if wires.end > self.g_in || !self.early.is_empty() {
            return Err(GcError::invalid("early garbler inputs"));
        }
        self.early_labels = ch.recv_pod(self.n * wires.len())?;
        self.early = wires;
        Ok(())
    }

    /// Bytes of garbled tables held.
    pub fn table_bytes(&self) -> usize {
        self.frames.iter().map(|f| f.len()).sum()
    }
    /// Test hook: flips one bit of one stored table block (for corruption tests).
    pub fn corrupt_table(&mut self, index: usize, bit: u32) {
        let total: usize = self.frames.iter().map(|f| f.len()).sum();
        if total > 0 {
            let mut byte = (index * 16 + (bit as usize % 128) / 8) % total;
            for f in self.frames.iter_mut() {
                if byte < f.len() {
                    f[byte] ^= 1 << (bit % 8);
                    break;
                }
                byte -= f.len();
            }
        }
    }
}

/// Offline: receives the nonce, exactly the expected number of table bytes, and the decoding
/// bits. A short stream gives [`GcError::Truncated`]; an oversized one [`GcError::Malformed`].
pub fn evaluate_offline<C: Channel>(
    ch: &mut C,
    circ: &Circuit,
    g_in: usize,
    n: usize,
) -> Result<ReceivedBatch, GcError> {
    evaluate_offline_with(ch, circ, g_in, n, Reveal::Evaluator)
}

/// [`evaluate_offline`] for a batch garbled with [`garble_offline_with`]: with
/// `Reveal::Garbler` no decoding bits are expected.
pub fn evaluate_offline_with<C: Channel>(
    ch: &mut C,
    circ: &Circuit,
    g_in: usize,
    n: usize,
    reveal: Reveal,
) -> Result<ReceivedBatch, GcError> {
    evaluate_offline_scheme(ch, circ, g_in, n, reveal, Scheme::HalfGates)
}

/// The next frame of a batch's tables, `got` of `expected` bytes in: whole gates of `gate`
/// bytes, at most [`FRAME_BYTES`], never past `expected`; a peer that hangs up early is
/// [`GcError::Truncated`], a bad frame [`GcError::Malformed`].
fn recv_table_frame<C: Channel>(
    ch: &mut C,
    gate: usize,
    got: u64,
    expected: u64,
) -> Result<Vec<u8>, GcError> {
    let f = match ch.recv_frame() {
        Ok(f) => f,
        Err(secinfer_net::NetError::Closed) => return Err(GcError::Truncated { expected, got }),
        Err(e) => return Err(e.into()),
    };
    if f.is_empty()
        || f.len() % gate != 0
        || f.len() > FRAME_BYTES
        || got + f.len() as u64 > expected
    {
        return Err(GcError::Malformed(format!(
            "table frame of {} bytes after {got} of {expected} bytes",
            f.len()
        )));
    }
    Ok(f)
}

/// The decoding bits that follow a `Reveal::Evaluator` batch's tables (none for
/// `Reveal::Garbler`).
fn recv_decode_bits<C: Channel>(
    ch: &mut C,
    circ: &Circuit,
    n: usize,
    reveal: Reveal,
    expected: u64,
) -> Result<Vec<bool>, GcError> {
    if reveal == Reveal::Garbler {
        return Ok(Vec::new());
    }
    let nd = n * wire_outputs(circ);
    match ch.recv_pod::<u8>(nd.div_ceil(8)) {
        Ok(b) => Ok(unpack_bits(&b, nd)),
        Err(secinfer_net::NetError::Closed) => Err(GcError::Truncated {
            expected,
            got: expected,
        }),
        Err(e) => Err(e.into()),
    }
}

/// [`evaluate_offline_with`] for a batch whose AND gates were garbled by `scheme`
/// ([`BatchJob::scheme`]): exactly [`Scheme::tables_bytes`] bytes of tables are accepted, in
/// frames of whole gates of at most [`FRAME_BYTES`].
pub fn evaluate_offline_scheme<C: Channel>(
    ch: &mut C,
    circ: &Circuit,
    g_in: usize,
    n: usize,
    reveal: Reveal,
    scheme: Scheme,
) -> Result<ReceivedBatch, GcError> {
    check_shape(circ, g_in, n)?;
    let nonce = ch.recv_pod::<u64>(1)?[0];
    let gate = scheme.table_bytes(batch_lanes(n));
    let expected = batch_table_bytes(scheme, circ, n)
        .ok_or_else(|| GcError::invalid("table size overflows"))?;
    let mut frames: Vec<Vec<u8>> = Vec::new();
    let mut starts: Vec<u64> = Vec::new();
    let mut got: u64 = 0;
    while got < expected {
        let f = recv_table_frame(ch, gate, got, expected)?;
        starts.push(got);
        got += f.len() as u64;
        frames.push(f);
    }
    let decode = recv_decode_bits(ch, circ, n, reveal, expected)?;
    Ok(ReceivedBatch {
        nonce,
        scheme,
        g_in,
        n,
        frames,
        starts,
        decode,
        early: 0..0,
        early_labels: Vec::new(),
        e_labels: None,
        reveal,
    })
}

/// Online, garbler: sends the labels of its inputs (`n × g_in` bits, instance-major) and the COT
/// corrections for the evaluator's inputs.
pub fn garble_online<C: Channel, S: CotSender<C>>(
    ch: &mut C,
    ot: &mut S,
    batch: &GarbledBatch,
    g_inputs: &[bool],
) -> Result<(), GcError>
where
    GcError: From<S::Error>,
{
    if g_inputs.len() != batch.n * batch.g_in {
        return Err(GcError::invalid("garbler input count"));
    }
    if ot.delta() != batch.delta {
        return Err(GcError::invalid(
            "the COT Δ must be the free-XOR offset of the garbled batch",
        ));
    }
    if batch.preset || batch.known {
        return Err(GcError::invalid(
            "this batch's evaluator labels came from offline COTs: use garble_online_preset",
        ));
    }
    let mine = batch.active_late(g_inputs);
    // COT first (the evaluator speaks first in it), then our labels and the corrections in one
    // flight: two rounds online.
    let ne = batch.n * batch.e_in;
    let corr: Vec<Block> = if ne > 0 {
        let m0 = ot.send_cot(ch, ne)?;
        if m0.len() != ne {
            return Err(GcError::invalid("the COT returned the wrong count"));
        }
        (0..ne)
            .map(|k| batch.zero(k / batch.e_in, batch.g_in + k % batch.e_in) ^ m0[k])
            .collect()
    } else {
        Vec::new()
    };
    if !mine.is_empty() {
        ch.send_frame_vec(mine)?;
    }
    if !corr.is_empty() {
        ch.send_pod(&corr)?;
    }
    ch.flush()?;
    Ok(())
}

/// Online, evaluator: gets its input labels (COT), evaluates every copy and decodes the outputs
/// (`n × n_outputs` bits, instance-major).
pub fn evaluate_online<C: Channel, R: CotReceiver<C>>(
    ch: &mut C,
    ot: &mut R,
    circ: &Circuit,
    batch: &ReceivedBatch,
    e_inputs: &[bool],
) -> Result<Vec<bool>, GcError>
where
    GcError: From<R::Error>,
{
    let (n, g_in) = (batch.n, batch.g_in);
    let e_in = circ.n_inputs - g_in;
    if e_inputs.len() != n * e_in || batch.e_labels.is_some() || batch.reveal != Reveal::Evaluator {
        return Err(GcError::invalid("evaluator input count"));
    }
    let mc = if n * e_in > 0 {
        ot.recv_cot(ch, e_inputs)?
    } else {
        Vec::new()
    };
    let g_labels = recv_garbler_labels(ch, batch)?;
    let e_labels: Vec<Block> = if n * e_in > 0 {
        if mc.len() != n * e_in {
            return Err(GcError::invalid("the COT returned the wrong count"));
        }
        let corr: Vec<Block> = ch.recv_pod(n * e_in)?;
        mc.iter().zip(&corr).map(|(a, b)| *a ^ *b).collect()
    } else {
        Vec::new()
    };
    evaluate_labels(circ, batch, &g_labels, &e_labels)
}

/// Online, garbler, for a batch whose evaluator labels came from offline COTs
/// ([`garble_offline_with`] with `e_zero`): one flight, the active labels of its late inputs
/// (`g_inputs`: `n × g_in` bits, instance-major; early wires are ignored).
pub fn garble_online_preset<C: Channel>(
    ch: &mut C,
    batch: &GarbledBatch,
    g_inputs: &[bool],
) -> Result<(), GcError> {
    if g_inputs.len() != batch.n * batch.g_in || !batch.preset {
        return Err(GcError::invalid("garbler input count"));
    }
    if batch.known {
        return Err(GcError::invalid(
            "this batch's garbler inputs were folded into its garbling: no labels to send",
        ));
    }
    let mine = batch.active_late(g_inputs);
    if !mine.is_empty() {
        ch.send_frame_vec(mine)?;
    }
    ch.flush()?;
    Ok(())
}

/// Online, evaluator, matching [`garble_online_preset`]: receives the garbler's labels and
/// evaluates. Returns the decoded outputs (`Reveal::Evaluator`, `n × n_outputs`) or the permute
/// bits of the wire outputs for the garbler to decode (`Reveal::Garbler`, `n × wire outputs`).
pub fn evaluate_online_preset<C: Channel>(
    ch: &mut C,
    circ: &Circuit,
    batch: &ReceivedBatch,
) -> Result<Vec<bool>, GcError> {
    let Some((e_buf, e_range)) = batch.e_labels.as_ref() else {
        return Err(GcError::invalid("no preset evaluator labels"));
    };
    let g_labels = recv_garbler_labels(ch, batch)?;
    evaluate_labels(circ, batch, &g_labels, &e_buf[e_range.clone()])
}

/// Evaluator, for a batch garbled with its garbler inputs known ([`BatchJob::g_known`]) and
/// preset evaluator labels: evaluates at once, the garbler's active labels being the public
/// ones; nothing is read from the channel. Returns what [`evaluate_online_preset`] returns.
pub fn evaluate_known(circ: &Circuit, batch: &ReceivedBatch) -> Result<Vec<bool>, GcError> {
    let Some((e_buf, e_range)) = batch.e_labels.as_ref() else {
        return Err(GcError::invalid("no preset evaluator labels"));
    };
    let g_labels = known_labels(batch.nonce, batch.n, batch.g_in);
    evaluate_labels(circ, batch, &g_labels, &e_buf[e_range.clone()])
}

/// The garbler's late labels (one flight) merged with its early ones: `n × g_in`.
fn recv_garbler_labels<C: Channel>(
    ch: &mut C,
    batch: &ReceivedBatch,
) -> Result<Vec<Block>, GcError> {
    let (n, g_in) = (batch.n, batch.g_in);
    let late: Vec<usize> = (0..g_in).filter(|w| !batch.early.contains(w)).collect();
    // The frame is read in place (no intermediate `recv_pod` copy): its length is checked
    // first, so a short or long frame from the peer is an error, never a panic.
    let late_bytes: Vec<u8> = if n * late.len() > 0 {
        let expected = 16 * n * late.len();
        let f = ch.recv_frame()?;
        if f.len() != expected {
            return Err(secinfer_net::NetError::UnexpectedLength {
                expected,
                got: f.len(),
            }
            .into());
        }
        f
    } else {
        Vec::new()
    };
    let mut late_labels = late_bytes
        .chunks_exact(16)
        .map(|c| Block(bytemuck::pod_read_unaligned::<u128>(c)));
    let ek = batch.early.len();
    let mut g_labels = vec![Block::ZERO; n * g_in];
    for i in 0..n {
        for &w in &late {
            // The length check above guarantees one block per late label.
            g_labels[i * g_in + w] = late_labels.next().unwrap_or(Block::ZERO);
        }
        for j in 0..ek {
            g_labels[i * g_in + batch.early.start + j] = batch.early_labels[i * ek + j];
        }
    }
    Ok(g_labels)
}

/// Evaluates copies `c0 * L ..` (chunks `c0..c1`, copies past `n` skipped) from their
/// active input labels (`n × g_in` and `n × e_in`, instance-major) with tables from `src`;
/// returns the permute bits of the wire outputs, instance-major.
#[allow(
    clippy::too_many_arguments,
    reason = "one task's coordinates; a struct would only rename them"
)]
fn evaluate_task<const L: usize, Src: crate::garble::TableSource>(
    circ: &Circuit,
    nonce: u64,
    scheme: Scheme,
    src: Src,
    (c0, c1): (usize, usize),
    n: usize,
    g_labels: &[Block],
    e_labels: &[Block],
) -> Result<Vec<bool>, GcError> {
    let g_in = g_labels.len() / n.max(1);
    let e_in = circ.n_inputs - g_in;
    let mut ev = Evaluator::<L, _>::new(nonce, (c0 * L) as u32, src)?.with_scheme(scheme);
    let mut bits = Vec::with_capacity((c1 - c0) * L * wire_outputs(circ));
    let mut ins = vec![[Block::ZERO; L]; circ.n_inputs];
    for c in c0..c1 {
        ev.set_instances(nonce, (c * L) as u32)?;
        #[allow(clippy::needless_range_loop)]
        for l in 0..L {
            let i = c * L + l;
            for w in 0..g_in {
                ins[w][l] = if i < n {
                    g_labels[i * g_in + w]
                } else {
                    Block::ZERO
                };
            }
            for w in 0..e_in {
                ins[g_in + w][l] = if i < n {
                    e_labels[i * e_in + w]
                } else {
                    Block::ZERO
                };
            }
        }
        let outs = circ.eval(&mut ev, &ins);
        for l in 0..L {
            if c * L + l >= n {
                break;
            }
            for o in &outs {
                if let Bit::Wire(w) = o {
                    bits.push(w[l].lsb());
                }
            }
        }
    }
    ev.finish()?;
    Ok(bits)
}

/// [`evaluate_task`] at the batch's lane count.
#[allow(
    clippy::too_many_arguments,
    reason = "one task's coordinates; a struct would only rename them"
)]
fn evaluate_task_any<Src: crate::garble::TableSource>(
    circ: &Circuit,
    nonce: u64,
    scheme: Scheme,
    src: Src,
    range: (usize, usize),
    n: usize,
    g_labels: &[Block],
    e_labels: &[Block],
) -> Result<Vec<bool>, GcError> {
    if batch_lanes(n) == 1 {
        evaluate_task::<1, _>(circ, nonce, scheme, src, range, n, g_labels, e_labels)
    } else {
        evaluate_task::<LANES, _>(circ, nonce, scheme, src, range, n, g_labels, e_labels)
    }
}

/// The outputs from the wire outputs' permute bits (`n × wire outputs`, instance-major): the
/// permute bits themselves (`Reveal::Garbler`), or decoded with constants filled in
/// (`Reveal::Evaluator`, `n × n_outputs`).
fn finish_outputs(
    circ: &Circuit,
    n: usize,
    reveal: Reveal,
    decode: &[bool],
    lsbs: Vec<bool>,
) -> Vec<bool> {
    match reveal {
        Reveal::Garbler => lsbs,
        Reveal::Evaluator => decode_outputs(circ, n, decode, &lsbs),
    }
}

/// Outputs `n × n_outputs` from the wire outputs' permute bits and their decoding bits (both
/// `n × wire outputs`, instance-major), constants filled in from the circuit.
fn decode_outputs(circ: &Circuit, n: usize, decode: &[bool], lsbs: &[bool]) -> Vec<bool> {
    let wo = wire_outputs(circ);
    let mut out = Vec::with_capacity(n * circ.n_outputs());
    for i in 0..n {
        let mut k = i * wo;
        for o in &circ.outputs {
            out.push(match o {
                Bit::Const(v) => *v,
                Bit::Wire(_) => {
                    k += 1;
                    lsbs[k - 1] ^ decode[k - 1]
                }
            });
        }
    }
    out
}

/// Evaluates every copy from its active input labels; decodes (`Reveal::Evaluator`) or returns
/// the wire outputs' permute bits (`Reveal::Garbler`).
fn evaluate_labels(
    circ: &Circuit,
    batch: &ReceivedBatch,
    g_labels: &[Block],
    e_labels: &[Block],
) -> Result<Vec<bool>, GcError> {
    let n = batch.n;
    let per_chunk = circ.and_count() as usize * batch.scheme.table_bytes(batch_lanes(n));
    let nch = chunks(n);
    let (per_task, _) = task_split(circ, batch.scheme, n);
    let results: Vec<Result<Vec<bool>, GcError>> = (0..nch)
        .step_by(per_task)
        .collect::<Vec<_>>()
        .into_par_iter()
        .map(|c0| {
            let src = FrameSource::at(&batch.frames, &batch.starts, (c0 * per_chunk) as u64);
            let c1 = (c0 + per_task).min(nch);
            evaluate_task_any(
                circ,
                batch.nonce,
                batch.scheme,
                src,
                (c0, c1),
                n,
                g_labels,
                e_labels,
            )
        })
        .collect();
    let mut lsbs = Vec::with_capacity(n * wire_outputs(circ));
    for r in results {
        lsbs.extend(r?);
    }
    Ok(finish_outputs(circ, n, batch.reveal, &batch.decode, lsbs))
}

/// The public active labels of a batch's garbler inputs (`n × g_in`, instance-major).
fn known_labels(nonce: u64, n: usize, g_in: usize) -> Vec<Block> {
    if batch_lanes(n) == 1 {
        known_labels_at::<1>(nonce, n, g_in)
    } else {
        known_labels_at::<LANES>(nonce, n, g_in)
    }
}

fn known_labels_at<const L: usize>(nonce: u64, n: usize, g_in: usize) -> Vec<Block> {
    let mut g_labels = vec![Block::ZERO; n * g_in];
    for c in 0..n.div_ceil(L) {
        for w in 0..g_in {
            let lanes = public_labels::<L>(nonce, (c * L) as u32, w as u32);
            for (l, k) in lanes.into_iter().enumerate() {
                let i = c * L + l;
                if i < n {
                    g_labels[i * g_in + w] = k;
                }
            }
        }
    }
    g_labels
}

/// Evaluator, online, for a batch garbled now with its garbler inputs known
/// ([`BatchJob::g_known`]) and this party's labels from offline COTs (`e_labels`, `n × e_in`):
/// receives the nonce and the tables and evaluates them **as they arrive**, each rayon task
/// starting once its chunks' tables are in, so evaluation overlaps the garbler's work and the
/// transfer; then the decoding bits (`Reveal::Evaluator`). Returns what
/// [`evaluate_online_preset`] returns. Exactly [`Scheme::tables_bytes`] bytes of tables are
/// accepted, in frames of whole gates of at most [`FRAME_BYTES`]; anything else is an error,
/// never a panic, and memory is bounded by the circuit, not by the peer.
#[allow(
    clippy::too_many_arguments,
    reason = "the batch's shape, as evaluate_offline_scheme takes it, and the labels"
)]
pub fn recv_evaluate_known<C: Channel>(
    ch: &mut C,
    circ: &Circuit,
    g_in: usize,
    n: usize,
    reveal: Reveal,
    scheme: Scheme,
    e_labels: &[Block],
) -> Result<Vec<bool>, GcError> {
    check_shape(circ, g_in, n)?;
    if e_labels.len() != n * (circ.n_inputs - g_in) {
        return Err(GcError::invalid(
            "evaluator labels: one per input bit per copy",
        ));
    }
    let nonce = ch.recv_pod::<u64>(1)?[0];
    let gate = scheme.table_bytes(batch_lanes(n));
    let expected = batch_table_bytes(scheme, circ, n)
        .ok_or_else(|| GcError::invalid("table size overflows"))?;
    let per_chunk = circ.and_count() * gate as u64;
    let g_labels = known_labels(nonce, n, g_in);
    let nch = chunks(n);
    let (per_task, _) = task_split(circ, scheme, n);
    let ranges: Vec<(usize, usize)> = (0..nch)
        .step_by(per_task)
        .map(|c0| (c0, (c0 + per_task).min(nch)))
        .collect();
    let (tx, rx) = std::sync::mpsc::channel::<(usize, Result<Vec<bool>, GcError>)>();
    let (g_labels, ranges_r) = (&g_labels, &ranges);
    let received: Result<(), GcError> = rayon::in_place_scope(|s| {
        let mut got: u64 = 0;
        let mut task = 0;
        let mut buf: Vec<u8> = Vec::new();
        while got < expected {
            let f = recv_table_frame(ch, gate, got, expected)?;
            let len = f.len() as u64;
            let mut rest: &[u8] = &f;
            // Cut the frame at task boundaries; a full task goes to the pool with its bytes.
            while !rest.is_empty() {
                let (c0, c1) = ranges_r[task];
                let want = ((c1 - c0) as u64 * per_chunk) as usize;
                if buf.capacity() == 0 {
                    buf.reserve_exact(want);
                }
                let take = (want - buf.len()).min(rest.len());
                buf.extend_from_slice(&rest[..take]);
                rest = &rest[take..];
                if buf.len() == want {
                    let (bytes, tx, k) = (std::mem::take(&mut buf), tx.clone(), task);
                    s.spawn(move |_| {
                        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                            let src = crate::garble::SliceSource::new(&bytes);
                            evaluate_task_any(
                                circ,
                                nonce,
                                scheme,
                                src,
                                (c0, c1),
                                n,
                                g_labels,
                                e_labels,
                            )
                        }))
                        .unwrap_or_else(|_| Err(GcError::invalid("evaluation task panicked")));
                        let _ = tx.send((k, r));
                    });
                    task += 1;
                }
            }
            got += len;
        }
        Ok(())
    });
    drop(tx);
    received?;
    let mut parts: Vec<Option<Vec<bool>>> = vec![None; ranges.len()];
    for (k, r) in rx {
        parts[k] = Some(r?);
    }
    let mut lsbs = Vec::with_capacity(n * wire_outputs(circ));
    for p in parts {
        lsbs.extend(p.ok_or_else(|| GcError::invalid("evaluation results lost"))?);
    }
    let decode = recv_decode_bits(ch, circ, n, reveal, expected)?;
    Ok(finish_outputs(circ, n, reveal, &decode, lsbs))
}

/// A circuit generated on the fly (not recorded), for [`stream_garble`]/[`stream_evaluate`].
pub trait CircuitFn: Sync {
    fn run<B: Backend>(
        &self,
        b: &mut B,
        g: &[Bit<B::Wire>],
        e: &[Bit<B::Wire>],
    ) -> Vec<Bit<B::Wire>>;
}

impl CircuitFn for (Circuit, usize) {
    fn run<B: Backend>(
        &self,
        b: &mut B,
        g: &[Bit<B::Wire>],
        e: &[Bit<B::Wire>],
    ) -> Vec<Bit<B::Wire>> {
        let ins: Vec<B::Wire> = g
            .iter()
            .chain(e)
            .map(|x| crate::backend::materialize(b, x))
            .collect();
        self.0.eval(b, &ins)
    }
}

/// Streaming garbler for one large circuit: input labels first, then the tables are garbled and
/// sent in 64 KiB frames as they are produced (memory is bounded by the wires the circuit holds,
/// not by its size), then the output decoding bits.
pub fn stream_garble<C: Channel, S: CotSender<C>, F: CircuitFn>(
    ch: &mut C,
    ot: &mut S,
    f: &F,
    g_inputs: &[bool],
    e_in: usize,
) -> Result<(), GcError>
where
    GcError: From<S::Error>,
{
    let delta = ot.delta();
    let mut prg = Prg::new();
    let nonce = prg.next_block().low_u64();
    ch.send_pod(&[nonce])?;
    let gz: Vec<Block> = prg.blocks(g_inputs.len());
    let ez: Vec<Block> = prg.blocks(e_in);
    let mine: Vec<Block> = gz
        .iter()
        .zip(g_inputs)
        .map(|(z, &b)| *z ^ delta.and_bit(b))
        .collect();
    if !mine.is_empty() {
        ch.send_pod(&mine)?;
    }
    if e_in > 0 {
        let m0 = ot.send_cot(ch, e_in)?;
        if m0.len() != e_in {
            return Err(GcError::invalid("the COT returned the wrong count"));
        }
        let corr: Vec<Block> = ez.iter().zip(&m0).map(|(a, b)| *a ^ *b).collect();
        ch.send_pod(&corr)?;
    }
    let decode = {
        let mut g = Garbler::<1, ChannelSink<'_, C>>::with_sink(
            delta,
            nonce,
            0,
            Prg::from_seed(prg.next_block()),
            Some(ChannelSink(ch)),
        )?;
        let gw: Vec<Bit<[Block; 1]>> = wires(&gz.iter().map(|z| [*z]).collect::<Vec<_>>());
        let ew: Vec<Bit<[Block; 1]>> = wires(&ez.iter().map(|z| [*z]).collect::<Vec<_>>());
        let outs = f.run(&mut g, &gw, &ew);
        g.finish()?;
        outs.iter()
            .filter_map(|o| {
                if let Bit::Wire(w) = o {
                    Some(w[0].lsb())
                } else {
                    None
                }
            })
            .collect::<Vec<bool>>()
    };
    // An empty frame ends the table stream, then the decoding bits.
    ch.send_pod::<u8>(&[])?;
    ch.send_pod(&pack_bits(&decode))?;
    ch.flush()?;
    Ok(())
}

/// Streaming evaluator matching [`stream_garble`].
pub fn stream_evaluate<C: Channel, R: CotReceiver<C>, F: CircuitFn>(
    ch: &mut C,
    ot: &mut R,
    f: &F,
    g_in: usize,
    e_inputs: &[bool],
) -> Result<Vec<bool>, GcError>
where
    GcError: From<R::Error>,
{
    let nonce = ch.recv_pod::<u64>(1)?[0];
    let g_labels: Vec<Block> = if g_in > 0 {
        ch.recv_pod(g_in)?
    } else {
        Vec::new()
    };
    let e_labels: Vec<Block> = if !e_inputs.is_empty() {
        let mc = ot.recv_cot(ch, e_inputs)?;
        let corr: Vec<Block> = ch.recv_pod(e_inputs.len())?;
        if mc.len() != corr.len() {
            return Err(GcError::invalid("the COT returned the wrong count"));
        }
        mc.iter().zip(&corr).map(|(a, b)| *a ^ *b).collect()
    } else {
        Vec::new()
    };
    let outs: Vec<Bit<[Block; 1]>> = {
        let mut ev = Evaluator::<1, _>::new(nonce, 0, ChannelSource::new(ch))?;
        let gw = wires(&g_labels.iter().map(|z| [*z]).collect::<Vec<_>>());
        let ew = wires(&e_labels.iter().map(|z| [*z]).collect::<Vec<_>>());
        let outs = f.run(&mut ev, &gw, &ew);
        ev.finish()?;
        outs
    };
    // the end-of-tables marker
    let end: Vec<u8> = ch.recv_pod_upto(0)?;
    debug_assert!(end.is_empty());
    let wo = outs.iter().filter(|o| matches!(o, Bit::Wire(_))).count();
    let bytes = ch.recv_pod::<u8>(wo.div_ceil(8))?;
    let dec = unpack_bits(&bytes, wo);
    let mut k = 0;
    Ok(outs
        .iter()
        .map(|o| match o {
            Bit::Const(v) => *v,
            Bit::Wire(w) => {
                k += 1;
                w[0].lsb() ^ dec[k - 1]
            }
        })
        .collect())
}
