//! `secinfer bench ot`: OT extension throughput between two parties.
//!
//! The client is the OT receiver, the server the sender (as in the garbled-circuit pipeline,
//! where the evaluating client receives its input labels). Setup (base OTs) is metered as the
//! `setup` phase, the extension as `offline`. OTs run in batches (see [`batch`]) so memory
//! stays bounded for any `--count`; a batch is one call (one message stream each way), so rounds
//! grow only with the number of batches. The choice bits and messages of a batch are drawn once,
//! before timing, and reused; a sample of every batch's results is checked at the end (the
//! server sends it back after metering stopped), so the figures come from a working protocol.
use crate::error::Error;
use crate::pair::{run_pair, NetArgs};
use crate::report::{BenchRecord, Reporter};
use clap::{Args, ValueEnum};
use secinfer_net::{Channel, DynChannel, Phase};
use secinfer_ot::{
    Block, CotSource, FerretCotReceiver, FerretCotSender, FerretParams, KkReceiver, KkSender,
    OtExtReceiver, OtExtSender, PooledOtReceiver, PooledOtSender, Prg, SoftSpokenReceiver,
    SoftSpokenSender,
};

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum OtKind {
    /// Correlated OT with a global Δ (m1 = m0 ⊕ Δ): IKNP without hashing.
    Cot,
    /// Random OT: two hashed keys per OT.
    Rot,
    /// Chosen-message 1-of-2 OT on 128-bit messages.
    Chosen,
    /// KK13 1-of-16 OT on 8-bit messages (the lookup tables of the math library).
    Kk,
    /// Ferret silent random COT (semi-honest; `--ferret-params`, default emp-ot's b13), IKNP
    /// bootstrapping in the setup phase; the count is rounded up to whole iterations.
    Ferret,
    /// SoftSpokenOT correlated OT (semi-honest) with `--k`-bit chunks: IKNP's correlation at
    /// 128/k bits per COT.
    Softspoken,
    /// Pooled 1-of-16 OT on 8-bit messages: IKNP fills the pool offline (4 COTs per OT), the
    /// online phase sends 4 derandomisation bits per OT plus the masked messages.
    PoolKk,
    /// Pooled correlated OT: IKNP fills the pool offline, the online phase sends 1 bit per OT.
    PoolCot,
}

/// The pool filler of the pooled kinds.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum PoolSource {
    /// IKNP OT extension: 16 bytes per COT.
    Iknp,
    /// Ferret silent OT (`--ferret-params`): well under a bit per COT, in whole iterations.
    Ferret,
    /// SoftSpokenOT with `--k`.
    Softspoken,
}

/// Published Ferret parameter sets (emp-ot's constants).
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum FerretSet {
    /// emp-ot's default: LPN k = 452,000, t = 1,280 noise bins of 2^13.
    B13,
    /// emp-ot's ferret_b12: LPN k = 238,000, t = 2,507 bins of 2^12.
    B12,
    /// emp-ot's ferret_b11: LPN k = 124,000, t = 4,971 bins of 2^11.
    B11,
}

impl FerretSet {
    fn params(self) -> FerretParams {
        match self {
            FerretSet::B13 => FerretParams::B13,
            FerretSet::B12 => FerretParams::B12,
            FerretSet::B11 => FerretParams::B11,
        }
    }
    fn name(self) -> &'static str {
        match self {
            FerretSet::B13 => "b13",
            FerretSet::B12 => "b12",
            FerretSet::B11 => "b11",
        }
    }
}

impl OtKind {
    fn name(self) -> &'static str {
        match self {
            OtKind::Cot => "cot",
            OtKind::Rot => "rot",
            OtKind::Chosen => "chosen",
            OtKind::Kk => "kk",
            OtKind::Ferret => "ferret",
            OtKind::Softspoken => "softspoken",
            OtKind::PoolKk => "pool-kk",
            OtKind::PoolCot => "pool-cot",
        }
    }
}

#[derive(Args, Debug)]
pub struct OtArgs {
    /// Number of OTs.
    #[arg(long, default_value_t = 10_000_000)]
    pub count: usize,
    /// Which OT.
    #[arg(long, value_enum, default_value_t = OtKind::Cot)]
    pub kind: OtKind,
    /// What fills the pool of `--kind pool-cot|pool-kk`.
    #[arg(long, value_enum, default_value_t = PoolSource::Iknp)]
    pub pool_source: PoolSource,
    /// Ferret parameter set (`--kind ferret`, `--pool-source ferret`).
    #[arg(long, value_enum, default_value_t = FerretSet::B13)]
    pub ferret_params: FerretSet,
    /// SoftSpokenOT bits per chunk, 1..=8 (`--kind softspoken`, `--pool-source softspoken`):
    /// 16/k bytes per COT for CPU growing like 2^k/k. The default is the secure GRU sessions'
    /// (`infer --ot softspoken-k5`); k = 2 (8 B per COT) measured fastest at the lan profile.
    #[arg(long, default_value_t = super::SOFTSPOKEN_K)]
    pub k: u32,
    #[command(flatten)]
    pub net: NetArgs,
}

/// OTs per call for COT/ROT: their traffic flows one way, so more calls add no rounds, and
/// 16 MiB output buffers keep first-touch page faults low (2^22 measured ~25% more CPU here).
const BATCH_ONE_WAY: usize = 1 << 20;
/// OTs per call for chosen and KK13, two rounds per call: bigger calls, fewer rounds.
const BATCH_TWO_WAY: usize = 1 << 22;
/// KK13 parameters of `--kind kk`.
const KK_N: usize = 16;
const KK_BITS: u32 = 8;
/// Results of the first OTs of every batch that the check compares.
const SAMPLE: usize = 64;
/// Seed of the (public, bench-only) choices and messages, so both processes can regenerate them.
const SEED: Block = Block(0x5ec1_f3e0_0000_0000_0000_0000_0000_0042);

fn batch(kind: OtKind) -> usize {
    match kind {
        OtKind::Cot | OtKind::Rot | OtKind::PoolCot | OtKind::Softspoken => BATCH_ONE_WAY,
        OtKind::Chosen | OtKind::Kk | OtKind::PoolKk => BATCH_TWO_WAY,
        // One Ferret iteration per "batch" (the count is rounded up to whole iterations).
        OtKind::Ferret => usize::MAX,
    }
}

fn batches(kind: OtKind, count: usize) -> impl Iterator<Item = usize> {
    let b = batch(kind);
    (0..count.div_ceil(b)).map(move |i| b.min(count - i * b))
}

fn split(b: Block) -> [u64; 2] {
    [b.0 as u64, (b.0 >> 64) as u64]
}

/// Bench inputs, identical in both parties.
struct Inputs {
    choices: Vec<bool>,
    kk_choices: Vec<u8>,
    msgs: Vec<[Block; 2]>,
    kk_msgs: Vec<u64>,
}

fn inputs(kind: OtKind, count: usize) -> Inputs {
    let n = match kind {
        OtKind::Ferret => 0,
        _ => batch(kind).min(count),
    };
    let mut prg = Prg::from_seed(SEED);
    let choices = prg.bits(n);
    let (mut msgs, mut kk_choices, mut kk_msgs) = (Vec::new(), Vec::new(), Vec::new());
    match kind {
        OtKind::Chosen => {
            msgs = (0..n)
                .map(|_| [prg.next_block(), prg.next_block()])
                .collect()
        }
        OtKind::Kk | OtKind::PoolKk => {
            kk_choices = (0..n).map(|_| prg.below(KK_N as u64) as u8).collect();
            kk_msgs = (0..n * KK_N)
                .map(|_| prg.next_block().low_u64() & ((1 << KK_BITS) - 1))
                .collect();
        }
        _ => {}
    }
    Inputs {
        choices,
        kk_choices,
        msgs,
        kk_msgs,
    }
}

/// The client (receiver): returns its sample of every batch.
fn client(
    kind: OtKind,
    ferret: FerretParams,
    source: CotSource,
    ss_k: u32,
    count: usize,
    inp: &Inputs,
    ch: &mut DynChannel,
) -> Result<Vec<[u64; 2]>, Error> {
    let mut prg = Prg::new();
    let mut sample = Vec::new();
    match kind {
        OtKind::Ferret => {
            let mut r = FerretCotReceiver::setup(ch, &mut prg, ferret)?;
            ch.set_phase(Phase::Offline);
            let (mut w, mut b) = (Vec::new(), Vec::new());
            let mut made = 0;
            while made < count {
                w.clear();
                b.clear();
                made += r.extend(ch, &mut w, &mut b)?;
                for (x, &bit) in w.iter().zip(&b).take(SAMPLE) {
                    sample.push(split(*x));
                    sample.push([bit as u64, 0]);
                }
            }
        }
        OtKind::PoolKk | OtKind::PoolCot => {
            let mut r = PooledOtReceiver::setup_with_source(ch, &mut prg, source)?;
            ch.set_phase(Phase::Offline);
            let per = if let OtKind::PoolKk = kind { 4 } else { 1 };
            r.fill(ch, count * per)?;
            // Barrier: the sender finishes its fill first and would otherwise charge its wait
            // for the receiver's fill to the online phase.
            ch.send_pod::<u8>(&[1])?;
            ch.flush()?;
            ch.set_phase(Phase::Online);
            for n in batches(kind, count) {
                if let OtKind::PoolKk = kind {
                    let got = r.recv_u64(ch, KK_N, &inp.kk_choices[..n], KK_BITS)?;
                    sample.extend(got.iter().take(SAMPLE).map(|&v| [v, 0]));
                } else {
                    let got = r.recv_cot(ch, &inp.choices[..n])?;
                    sample.extend(got.iter().take(SAMPLE).map(|&b| split(b)));
                }
            }
        }
        OtKind::Softspoken => {
            let mut r = SoftSpokenReceiver::setup(ch, &mut prg, ss_k)?;
            ch.set_phase(Phase::Offline);
            let mut buf = vec![Block::ZERO; batch(kind).min(count)];
            for n in batches(kind, count) {
                r.recv_cot_into(ch, &inp.choices[..n], &mut buf[..n])?;
                sample.extend(buf.iter().take(SAMPLE).map(|&b| split(b)));
            }
        }
        OtKind::Kk => {
            let mut r = KkReceiver::setup(ch, &mut prg)?;
            ch.set_phase(Phase::Offline);
            for n in batches(kind, count) {
                let got = r.recv_u64(ch, KK_N, &inp.kk_choices[..n], KK_BITS)?;
                sample.extend(got.iter().take(SAMPLE).map(|&v| [v, 0]));
            }
        }
        _ => {
            let mut r = OtExtReceiver::setup(ch, &mut prg)?;
            ch.set_phase(Phase::Offline);
            let mut buf = vec![Block::ZERO; batch(kind).min(count)];
            for n in batches(kind, count) {
                let c = &inp.choices[..n];
                match kind {
                    OtKind::Cot => {
                        r.recv_cot_into(ch, c, &mut buf[..n])?;
                        sample.extend(buf.iter().take(SAMPLE).map(|&b| split(b)));
                    }
                    OtKind::Rot => {
                        r.recv_rot_into(ch, c, &mut buf[..n])?;
                        sample.extend(buf.iter().take(SAMPLE).map(|&b| split(b)));
                    }
                    _ => {
                        sample.extend(r.recv_chosen(ch, c)?.iter().take(SAMPLE).map(|&b| split(b)))
                    }
                }
            }
        }
    }
    Ok(sample)
}

/// The server (sender): returns what the client's sample must equal (COT: `[Δ, q_j...]`).
fn server(
    kind: OtKind,
    ferret: FerretParams,
    source: CotSource,
    ss_k: u32,
    count: usize,
    inp: &Inputs,
    ch: &mut DynChannel,
) -> Result<Vec<[u64; 2]>, Error> {
    let mut prg = Prg::new();
    let mut sample = Vec::new();
    match kind {
        OtKind::Ferret => {
            let mut s = FerretCotSender::setup(ch, &mut prg, ferret)?;
            ch.set_phase(Phase::Offline);
            sample.push(split(s.delta()));
            let mut v = Vec::new();
            let mut made = 0;
            while made < count {
                v.clear();
                made += s.extend(ch, &mut v)?;
                sample.extend(v.iter().take(SAMPLE).map(|&b| split(b)));
            }
        }
        OtKind::PoolKk | OtKind::PoolCot => {
            let mut s = PooledOtSender::setup_with_source(ch, &mut prg, source)?;
            ch.set_phase(Phase::Offline);
            sample.push(split(s.delta()));
            let per = if let OtKind::PoolKk = kind { 4 } else { 1 };
            s.fill(ch, count * per)?;
            ch.recv_pod::<u8>(1)?;
            ch.set_phase(Phase::Online);
            for n in batches(kind, count) {
                if let OtKind::PoolKk = kind {
                    s.send_u64(ch, KK_N, &inp.kk_msgs[..n * KK_N], KK_BITS)?;
                } else {
                    let q = s.send_cot(ch, n)?;
                    sample.extend(q.iter().take(SAMPLE).map(|&b| split(b)));
                }
            }
        }
        OtKind::Softspoken => {
            let mut s = SoftSpokenSender::setup(ch, &mut prg, ss_k)?;
            ch.set_phase(Phase::Offline);
            sample.push(split(s.delta()));
            let mut buf = vec![Block::ZERO; batch(kind).min(count)];
            for n in batches(kind, count) {
                s.send_cot_into(ch, &mut buf[..n])?;
                sample.extend(buf.iter().take(SAMPLE).map(|&b| split(b)));
            }
        }
        OtKind::Kk => {
            let mut s = KkSender::setup(ch, &mut prg)?;
            ch.set_phase(Phase::Offline);
            for n in batches(kind, count) {
                s.send_u64(ch, KK_N, &inp.kk_msgs[..n * KK_N], KK_BITS)?;
            }
        }
        _ => {
            let mut s = OtExtSender::setup(ch, &mut prg)?;
            ch.set_phase(Phase::Offline);
            sample.push(split(s.delta()));
            let mut buf = vec![Block::ZERO; batch(kind).min(count)];
            let mut pairs = vec![
                [Block::ZERO; 2];
                if let OtKind::Rot = kind {
                    batch(kind).min(count)
                } else {
                    0
                }
            ];
            for n in batches(kind, count) {
                match kind {
                    OtKind::Cot => {
                        s.send_cot_into(ch, &mut buf[..n])?;
                        sample.extend(buf.iter().take(SAMPLE).map(|&b| split(b)));
                    }
                    OtKind::Rot => {
                        s.send_rot_into(ch, &mut pairs[..n])?;
                        sample.extend(
                            pairs
                                .iter()
                                .take(SAMPLE)
                                .flat_map(|k| [split(k[0]), split(k[1])]),
                        );
                    }
                    _ => s.send_chosen(ch, &inp.msgs[..n])?,
                }
            }
        }
    }
    Ok(sample)
}

/// Checks the client's sample against the server's (or the public messages).
fn check(
    kind: OtKind,
    count: usize,
    inp: &Inputs,
    got: &[[u64; 2]],
    sent: &[[u64; 2]],
) -> Result<(), Error> {
    let join = |v: [u64; 2]| Block(v[0] as u128 | (v[1] as u128) << 64);
    if let OtKind::Ferret = kind {
        // Client: (w_j, r_j) pairs; server: Δ, then v_j. Every sampled j: w = v ⊕ r·Δ.
        let delta = join(*sent.first().ok_or_else(|| Error::msg("no Δ"))?);
        if got.len() != 2 * (sent.len() - 1) || got.is_empty() {
            return Err(Error::msg("bench ot ferret: samples differ in length"));
        }
        for (j, (w, v)) in got.chunks_exact(2).zip(&sent[1..]).enumerate() {
            if join(w[0]) != join(*v) ^ delta.and_bit(w[1][0] == 1) {
                return Err(Error::msg(format!("bench ot ferret: COT {j} is wrong")));
            }
        }
        return Ok(());
    }
    let mut k = 0;
    for n in batches(kind, count) {
        for j in 0..SAMPLE.min(n) {
            let g = *got
                .get(k)
                .ok_or_else(|| Error::msg("client sample too short"))?;
            let c = inp.choices[j];
            let ok = match kind {
                OtKind::Cot | OtKind::PoolCot | OtKind::Softspoken => {
                    let delta = join(sent[0]);
                    join(g) == join(sent[1 + k]) ^ delta.and_bit(c)
                }
                OtKind::Rot => join(g) == join(sent[1 + 2 * k + c as usize]),
                OtKind::Chosen => join(g) == inp.msgs[j][c as usize],
                OtKind::Kk | OtKind::PoolKk => {
                    g[0] == inp.kk_msgs[j * KK_N + inp.kk_choices[j] as usize]
                }
                OtKind::Ferret => unreachable!("checked above"),
            };
            if !ok {
                return Err(Error::msg(format!(
                    "bench ot {}: OT {j} of a batch is wrong",
                    kind.name()
                )));
            }
            k += 1;
        }
    }
    Ok(())
}

pub fn run(args: OtArgs, out: &mut Reporter) -> Result<(), Error> {
    let (kind, count) = (args.kind, args.count);
    let ferret = args.ferret_params.params();
    let source = match args.pool_source {
        PoolSource::Iknp => CotSource::Iknp,
        PoolSource::Ferret => CotSource::Ferret(ferret),
        PoolSource::Softspoken => CotSource::SoftSpoken { k: args.k },
    };
    let ss_k = args.k;
    if (matches!(kind, OtKind::Softspoken) || matches!(args.pool_source, PoolSource::Softspoken))
        && !(1..=secinfer_ot::SOFTSPOKEN_MAX_K).contains(&ss_k)
    {
        return Err(Error::msg(format!(
            "--k must be in 1..={}, got {ss_k}",
            secinfer_ot::SOFTSPOKEN_MAX_K
        )));
    }
    if count == 0 {
        return Err(Error::msg("--count must be positive"));
    }
    let inp = inputs(kind, count);
    let r = run_pair(
        &args.net,
        |ch| client(kind, ferret, source, ss_k, count, &inp, ch),
        |ch| server(kind, ferret, source, ss_k, count, &inp, ch),
    )?;
    check(kind, count, &inp, &r.client, &r.server)?;
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let mut rec = BenchRecord::from_costs("ot", r.wall_s, &r.client_cost, &r.server_cost)
        .param("kind", kind.name())
        .param("net", args.net.net_name())
        .param("profile", args.net.profile.name)
        .param("threads", threads)
        .param(
            "batch",
            match kind {
                OtKind::Ferret => ferret.per_iteration(),
                _ => batch(kind).min(count),
            },
        );
    if let OtKind::Kk | OtKind::PoolKk = kind {
        rec = rec.param("n", KK_N).param("bits", KK_BITS);
    }
    if let OtKind::PoolKk | OtKind::PoolCot = kind {
        rec = rec.param(
            "pool_source",
            match args.pool_source {
                PoolSource::Iknp => "iknp",
                PoolSource::Ferret => "ferret",
                PoolSource::Softspoken => "softspoken",
            },
        );
    }
    if matches!(kind, OtKind::Softspoken) || matches!(args.pool_source, PoolSource::Softspoken) {
        rec = rec.param("k", ss_k);
    }
    // Ferret makes whole iterations: the figures are per COT actually made.
    let count = match kind {
        OtKind::Ferret => {
            let per = ferret.per_iteration();
            rec = rec
                .param("ferret_params", args.ferret_params.name())
                .param("lpn_n", ferret.main.n())
                .param("lpn_k", ferret.main.k)
                .param("lpn_t", ferret.main.t)
                .param("lpn_log_bin", ferret.main.log_bin);
            count.div_ceil(per) * per
        }
        _ => count,
    };
    let offline_s = r
        .client_cost
        .offline
        .time_s
        .max(r.server_cost.offline.time_s);
    let offline_bytes = r.client_cost.offline.bytes_sent + r.server_cost.offline.bytes_sent;
    let online_bytes = r.client_cost.online.bytes_sent + r.server_cost.online.bytes_sent;
    let bytes_total = rec.bytes_total;
    let rec = rec
        .field(
            "offline_bits_per_item",
            8.0 * offline_bytes as f64 / count as f64,
        )
        .field("online_bytes_per_item", online_bytes as f64 / count as f64)
        .field("count", count)
        .field("per_second", count as f64 / r.wall_s)
        .field("per_second_offline", count as f64 / offline_s)
        .field("bytes_per_item", bytes_total as f64 / count as f64);
    out.emit(rec);
    Ok(())
}
