//! Targets for the decoders inside the protocols, each driven alone so that a run reaches
//! 10^6 executions in minutes rather than hours: the OT extensions (IKNP, SoftSpokenOT,
//! Ferret; each side against a hostile peer), the garbled-table stream of both AND-gate schemes,
//! BFV Galois keys, and each family's handshake read on its own (the server's hello, the
//! client's reply). The whole-session targets in the crate root still reach these decoders in
//! context; these reach them a thousand times faster.
use crate::{against_frames, split_frames, Frames};
use secinfer_gc::protocol::{garble_batches, recv_evaluate_known, BatchJob, Reveal};
use secinfer_gc::{garble::Scheme, Circuit};
use secinfer_he::{GaloisKeys, Params, SecretKey};
use secinfer_net::{simulate, Channel, DynChannel, Recording};
use secinfer_ot::{
    Block, FerretCotReceiver, FerretCotSender, FerretParams, LpnParams, OtExtReceiver, OtExtSender,
    Prg, SoftSpokenReceiver, SoftSpokenSender,
};
use std::sync::OnceLock;

/// COTs each OT target asks for after set-up.
const OT_COUNT: usize = 300;
/// SoftSpokenOT's k in the targets (the served default).
const SOFTSPOKEN_K: u32 = 4;
/// A small Ferret shape (one 2^6-leaf tree per noisy bit): the decoders are those of the
/// published sets, at a size where one execution takes milliseconds. Not a secure parameter
/// set; nothing but the fuzz targets uses it.
const FERRET_SMALL: FerretParams = FerretParams {
    main: LpnParams {
        k: 300,
        t: 16,
        log_bin: 6,
    },
    pre: None,
};

fn choices() -> Vec<bool> {
    (0..OT_COUNT).map(|i| i % 3 == 1).collect()
}

fn frames_of(d: &[u8]) -> Frames {
    split_frames(d).into_iter().map(<[u8]>::to_vec).collect()
}

/// Runs an honest pair and returns the frames each side received: (client's, server's).
fn honest_frames<A, B>(
    client: impl FnOnce(&mut Recording<&mut DynChannel>) -> Option<A> + Send,
    server: impl FnOnce(&mut Recording<&mut DynChannel>) -> Option<B> + Send,
) -> Option<(Frames, Frames)>
where
    A: Send,
    B: Send,
{
    let run = simulate(
        |ch| {
            let mut r = Recording::new(ch);
            client(&mut r).map(|_| r.into_frames())
        },
        |ch| {
            let mut r = Recording::new(ch);
            server(&mut r).map(|_| r.into_frames())
        },
    );
    Some((run.client.output?, run.server.output?))
}

/// The OT extension a target runs.
#[derive(Clone, Copy)]
enum OtKind {
    Iknp,
    SoftSpoken,
    Ferret,
}

/// Fixed base-OT seeds: the extension's messages are fuzzed from a set-up state (the base
/// OTs' own decoder is the `base_ot` target), so an execution costs the extension alone.
fn base_pairs() -> Vec<[Block; 2]> {
    let mut prg = Prg::from_seed(Block(0xba5e));
    (0..128)
        .map(|_| [prg.next_block(), prg.next_block()])
        .collect()
}

const OT_DELTA: Block = Block(0x1357_9bdf_0246_8ace_fdb9_7531_eca8_6421);

/// The sender's half of [`base_pairs`]: key `i` is pair `i`'s entry for bit `i` of Δ.
fn base_keys() -> Vec<Block> {
    base_pairs()
        .iter()
        .enumerate()
        .map(|(i, p)| p[((OT_DELTA.0 >> i) & 1) as usize])
        .collect()
}

fn ot_receive<C: Channel>(ch: &mut C, kind: OtKind) -> Option<()> {
    match kind {
        OtKind::Iknp => {
            let mut r = OtExtReceiver::from_base_ots(&base_pairs()).ok()?;
            r.recv_cot(ch, &choices()).ok()?;
            r.recv_chosen_u64(ch, &choices(), 20).ok()?;
        }
        OtKind::SoftSpoken => {
            let mut r = SoftSpokenReceiver::from_base_ots(ch, &base_pairs(), SOFTSPOKEN_K).ok()?;
            r.recv_cot(ch, &choices()).ok()?;
        }
        OtKind::Ferret => {
            let ext = OtExtReceiver::from_base_ots(&base_pairs()).ok()?;
            let mut prg = Prg::from_seed(Block(5));
            let mut r = FerretCotReceiver::from_iknp(ch, ext, &mut prg, FERRET_SMALL).ok()?;
            let (mut w, mut b) = (Vec::new(), Vec::new());
            r.extend(ch, &mut w, &mut b).ok()?;
        }
    }
    Some(())
}

fn ot_send<C: Channel>(ch: &mut C, kind: OtKind) -> Option<()> {
    match kind {
        OtKind::Iknp => {
            let mut s = OtExtSender::from_base_ots(OT_DELTA, &base_keys()).ok()?;
            s.send_cot(ch, OT_COUNT).ok()?;
            let m: Vec<[u64; 2]> = (0..OT_COUNT as u64)
                .map(|i| [i, (i * 7) & 0xf_ffff])
                .collect();
            s.send_chosen_u64(ch, &m, 20).ok()?;
        }
        OtKind::SoftSpoken => {
            let mut s =
                SoftSpokenSender::from_base_ots(ch, OT_DELTA, &base_keys(), SOFTSPOKEN_K).ok()?;
            s.send_cot(ch, OT_COUNT).ok()?;
        }
        OtKind::Ferret => {
            let ext = OtExtSender::from_base_ots(OT_DELTA, &base_keys()).ok()?;
            let mut prg = Prg::from_seed(Block(6));
            let mut s = FerretCotSender::from_iknp(ch, ext, &mut prg, FERRET_SMALL).ok()?;
            s.extend(ch, &mut Vec::new()).ok()?;
        }
    }
    Some(())
}

/// Frames an honest OT run gave (receiver's, sender's), kept for the seeds.
fn ot_frames(kind: OtKind) -> Option<(Frames, Frames)> {
    honest_frames(|ch| ot_receive(ch, kind), |ch| ot_send(ch, kind))
}

pub fn ot_iknp_receiver(d: &[u8]) {
    run(d, |ch| ot_receive(ch, OtKind::Iknp));
}
pub fn ot_iknp_sender(d: &[u8]) {
    run(d, |ch| ot_send(ch, OtKind::Iknp));
}
pub fn ot_softspoken_receiver(d: &[u8]) {
    run(d, |ch| ot_receive(ch, OtKind::SoftSpoken));
}
pub fn ot_softspoken_sender(d: &[u8]) {
    run(d, |ch| ot_send(ch, OtKind::SoftSpoken));
}
pub fn ot_ferret_receiver(d: &[u8]) {
    run(d, |ch| ot_receive(ch, OtKind::Ferret));
}
pub fn ot_ferret_sender(d: &[u8]) {
    run(d, |ch| ot_send(ch, OtKind::Ferret));
}

/// Runs a party against the frames in `d`; `Some` when it completed.
fn run(d: &[u8], party: impl FnOnce(&mut crate::Scripted) -> Option<()>) -> Option<()> {
    against_frames(frames_of(d), party)
}

/// The garbled-table targets' circuit: an 8-bit adder of a garbler word and an evaluator word,
/// 70 copies (more than one 16-lane chunk, so the table stream spans several chunks).
const GC_BITS: usize = 8;
const GC_COPIES: usize = 70;

fn adder() -> &'static Circuit {
    static C: OnceLock<Circuit> = OnceLock::new();
    C.get_or_init(|| {
        Circuit::build(2 * GC_BITS, |b, ins| {
            secinfer_gc::gadgets::add(b, &ins[..GC_BITS], &ins[GC_BITS..])
        })
    })
}

/// The evaluator's labels: any blocks do for the decoder (they are never checked against Δ).
fn evaluator_labels() -> Vec<Block> {
    (0..GC_COPIES * GC_BITS)
        .map(|i| Block(0x9e37_79b9_7f4a_7c15 * (i as u128 + 1)))
        .collect()
}

fn evaluate_tables<C: Channel>(ch: &mut C, scheme: Scheme) -> Option<()> {
    let labels = evaluator_labels();
    recv_evaluate_known(
        ch,
        adder(),
        GC_BITS,
        GC_COPIES,
        Reveal::Evaluator,
        scheme,
        &labels,
    )
    .ok()
    .map(|_| ())
}

/// The honest garbler's frames for one batch of the adder.
fn table_frames(scheme: Scheme) -> Option<Frames> {
    let (client, _) = honest_frames(
        |ch| evaluate_tables(ch, scheme),
        |ch| {
            let mut prg = Prg::new();
            let delta = Block(prg.next_block().0 | 1);
            let e_zero: Vec<Block> = (0..GC_COPIES * GC_BITS).map(|_| prg.next_block()).collect();
            let known: Vec<bool> = (0..GC_COPIES * GC_BITS).map(|i| i % 5 == 2).collect();
            let job = BatchJob {
                circ: adder(),
                g_in: GC_BITS,
                n: GC_COPIES,
                e_zero: Some(&e_zero),
                reveal: Reveal::Evaluator,
                scheme,
                g_known: Some(&known),
            };
            garble_batches(ch, &[job], delta).ok()?;
            ch.flush().ok()
        },
    )?;
    Some(client)
}

pub fn gc_tables_half_gates(d: &[u8]) {
    run(d, |ch| evaluate_tables(ch, Scheme::HalfGates));
}
pub fn gc_tables_three_halves(d: &[u8]) {
    run(d, |ch| evaluate_tables(ch, Scheme::ThreeHalves));
}

/// The Galois-key target's parameters: the smallest set (the decoder is the same for every set,
/// and a 4096-slot key decodes four times faster than GALA's 8192).
fn galois_params() -> Option<&'static Params> {
    static P: OnceLock<Option<Params>> = OnceLock::new();
    P.get_or_init(|| Params::by_name("n4096").ok()).as_ref()
}

pub fn he_galois_keys(d: &[u8]) {
    if let Some(p) = galois_params() {
        let _ = GaloisKeys::from_bytes(p, d);
    }
}

fn galois_seed() -> Vec<Vec<u8>> {
    galois_params().map_or_else(Vec::new, |p| {
        vec![SecretKey::generate(p).rotation_keys(&[1], false).to_bytes()]
    })
}

/// Seeds of this module's targets; `None` for a name it does not own.
pub fn seeds(target: &str) -> Option<Vec<Vec<u8>>> {
    let join = |f: Option<Frames>| f.map_or_else(Vec::new, |f| vec![crate::join_frames(&f)]);
    let ot =
        |kind, receiver: bool| join(ot_frames(kind).map(|(r, s)| if receiver { r } else { s }));
    Some(match target {
        "ot_iknp_receiver" => ot(OtKind::Iknp, true),
        "ot_iknp_sender" => ot(OtKind::Iknp, false),
        "ot_softspoken_receiver" => ot(OtKind::SoftSpoken, true),
        "ot_softspoken_sender" => ot(OtKind::SoftSpoken, false),
        "ot_ferret_receiver" => ot(OtKind::Ferret, true),
        "ot_ferret_sender" => ot(OtKind::Ferret, false),
        "gc_tables_half_gates" => join(table_frames(Scheme::HalfGates)),
        "gc_tables_three_halves" => join(table_frames(Scheme::ThreeHalves)),
        "he_galois_keys" => galois_seed(),
        _ => return None,
    })
}

/// Whether the party of `target` completes on its unmutated seed: the seeds must be honest
/// transcripts, or every mutant would stop at the first check. `None` for a target this
/// module does not own or that has no seed.
pub fn seed_completes(target: &str) -> Option<bool> {
    let seed = seeds(target)?.into_iter().next()?;
    let party: fn(&mut crate::Scripted) -> Option<()> = match target {
        "ot_iknp_receiver" => |ch| ot_receive(ch, OtKind::Iknp),
        "ot_iknp_sender" => |ch| ot_send(ch, OtKind::Iknp),
        "ot_softspoken_receiver" => |ch| ot_receive(ch, OtKind::SoftSpoken),
        "ot_softspoken_sender" => |ch| ot_send(ch, OtKind::SoftSpoken),
        "ot_ferret_receiver" => |ch| ot_receive(ch, OtKind::Ferret),
        "ot_ferret_sender" => |ch| ot_send(ch, OtKind::Ferret),
        "gc_tables_half_gates" => |ch| evaluate_tables(ch, Scheme::HalfGates),
        "gc_tables_three_halves" => |ch| evaluate_tables(ch, Scheme::ThreeHalves),
        "he_galois_keys" => {
            return Some(galois_params().is_some_and(|p| GaloisKeys::from_bytes(p, &seed).is_ok()))
        }
        _ => return None,
    };
    Some(run(&seed, party).is_some())
}
