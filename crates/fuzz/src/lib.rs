//! # secinfer-fuzz
//!
//! One fuzz target for every decoder of peer or disk bytes, each a `fn(&[u8])` that must
//! return (any error is fine) and never panic or allocate past the frame limit:
//!
//! | target | decoder |
//! |---|---|
//! | `plain_frames` | TCP frame stream (length prefix, limit) |
//! | `noise_records` | Noise record stream (lengths, AEAD) |
//! | `greeting` | the server's greeting and refusal text |
//! | `handshake_and_server_session` | the server side of a GRU session: handshake JSON, OT messages, BFV public key and uploads, share corrections |
//! | `client_session` | the client side: handshake reply, OT messages, garbled tables and labels, HE responses |
//! | `he_public_key`, `he_ciphertext`, `he_seeded_ciphertext`, `he_response` | BFV decoders |
//! | `base_ot` | base OT messages (receiver side) |
//! | `model_json`, `weights`, `vocab` | model files |
//! | `gru_hello`, `gru_reply` | the GRU handshake alone: the server reading a hello, the client reading a reply |
//! | `ot_{iknp,softspoken,ferret}_{receiver,sender}` | each OT extension, each side against a hostile peer ([`protocols`]) |
//! | `gc_tables_half_gates`, `gc_tables_three_halves` | the garbled-table stream of each AND-gate scheme |
//! | `he_galois_keys` | BFV Galois keys (GALA's and CHOCO's rotations) |
//! | `hegc_hello`, `hegc_reply`, `choco_hello`, `ss_request` | the other families' openings: GALA's handshake both ways, CHOCO's hello, OPAF's request ([`families`]) |
//! | `she_key_upload`, `she_input`, `she_reply` | the SHE (TFHE) session: the server reading the hello and the seeded server key, the server's input ciphertext decoder, the client reading the reply (`she`, crate feature `tfhe`) |
//!
//! The same functions run under libFuzzer (`fuzz/`, nightly, `cargo fuzz run <target>`) and
//! under [`mutate_and_run`], a seeded mutation loop on stable Rust that CI runs for a bounded
//! number of executions (`tests/bounded.rs`) and `fuzz-stable` runs for longer.
use secinfer_he::{Ciphertext, Params, PublicKey, Response, SeededCiphertext};
use secinfer_net::{Channel, Meter, NetError, Recording, DEFAULT_MAX_FRAME};
use secinfer_nn::layers::gru::{
    client_session, random_model, server_session_with, ClientModel, ClientOptions, ServerModel,
    ServerPolicy, Variant,
};
use secinfer_nn::{ModelConfig, Tensors, Vocab};
use std::sync::OnceLock;

pub mod families;
pub mod peak;
pub mod protocols;
#[cfg(feature = "tfhe")]
pub mod she;
pub use families::{choco_hello, hegc_hello, hegc_reply, ss_request};
pub use protocols::{
    gc_tables_half_gates, gc_tables_three_halves, he_galois_keys, ot_ferret_receiver,
    ot_ferret_sender, ot_iknp_receiver, ot_iknp_sender, ot_softspoken_receiver,
    ot_softspoken_sender,
};

/// The HE parameter set the GRU sessions use.
const HE_PARAMS: &str = "n8192-z2k32";

/// A target: its name and the function.
pub type Target = (&'static str, fn(&[u8]));

/// Every target.
pub const TARGETS: &[Target] = &[
    ("plain_frames", plain_frames),
    ("noise_records", noise_records),
    ("greeting", greeting),
    ("handshake_and_server_session", handshake_and_server_session),
    ("client_session", client_session_target),
    ("he_public_key", he_public_key),
    ("he_ciphertext", he_ciphertext),
    ("he_seeded_ciphertext", he_seeded_ciphertext),
    ("he_response", he_response),
    ("base_ot", base_ot),
    ("gru_hello", gru_hello),
    ("gru_reply", gru_reply),
    ("model_json", model_json),
    ("weights", weights),
    ("vocab", vocab),
    ("ot_iknp_receiver", ot_iknp_receiver),
    ("ot_iknp_sender", ot_iknp_sender),
    ("ot_softspoken_receiver", ot_softspoken_receiver),
    ("ot_softspoken_sender", ot_softspoken_sender),
    ("ot_ferret_receiver", ot_ferret_receiver),
    ("ot_ferret_sender", ot_ferret_sender),
    ("gc_tables_half_gates", gc_tables_half_gates),
    ("gc_tables_three_halves", gc_tables_three_halves),
    ("he_galois_keys", he_galois_keys),
    ("hegc_hello", hegc_hello),
    ("hegc_reply", hegc_reply),
    ("choco_hello", choco_hello),
    ("ss_request", ss_request),
    #[cfg(feature = "tfhe")]
    ("she_key_upload", she::she_key_upload),
    #[cfg(feature = "tfhe")]
    ("she_input", she::she_input),
    #[cfg(feature = "tfhe")]
    ("she_reply", she::she_reply),
];

/// The frame limit the stream targets decode with: smaller than the channel's, so that an
/// allocation sized by an announced length (rather than by the limit) shows in a run.
pub const STREAM_FRAME_LIMIT: usize = 1 << 20;

pub fn plain_frames(d: &[u8]) {
    let _ = secinfer_net::fuzzing::decode_plain_stream(d, STREAM_FRAME_LIMIT);
}

pub fn noise_records(d: &[u8]) {
    if let Ok(mut p) = secinfer_net::fuzzing::NoiseRecordPair::new() {
        let _ = p.open(d, STREAM_FRAME_LIMIT);
    }
}

pub fn greeting(d: &[u8]) {
    let _ = secinfer_net::fuzzing::decode_greeting_bytes(d);
}

fn he_params() -> Option<&'static Params> {
    static P: OnceLock<Option<Params>> = OnceLock::new();
    P.get_or_init(|| Params::by_name(HE_PARAMS).ok()).as_ref()
}

pub fn he_public_key(d: &[u8]) {
    if let Some(p) = he_params() {
        let _ = PublicKey::from_bytes(p, d);
    }
}
pub fn he_ciphertext(d: &[u8]) {
    if let Some(p) = he_params() {
        let _ = Ciphertext::from_bytes(p, d);
    }
}
pub fn he_seeded_ciphertext(d: &[u8]) {
    if let Some(p) = he_params() {
        let _ = SeededCiphertext::from_bytes(p, d);
    }
}
pub fn he_response(d: &[u8]) {
    if let Some(p) = he_params() {
        let _ = Response::from_bytes(p, d);
    }
}

/// Splits fuzz bytes into frames: `u32` little-endian length (cut to what remains), bytes.
pub fn split_frames(mut d: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    while d.len() >= 4 {
        let n = (u32::from_le_bytes([d[0], d[1], d[2], d[3]]) as usize).min(d.len() - 4);
        out.push(&d[4..4 + n]);
        d = &d[4 + n..];
    }
    out
}

/// The inverse of [`split_frames`] (for seeds).
pub fn join_frames(frames: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    for f in frames {
        out.extend_from_slice(&(f.len() as u32).to_le_bytes());
        out.extend_from_slice(f);
    }
    out
}

/// A hostile peer as a channel: each receive takes the next scripted frame, then the channel
/// reads as closed; sends are metered and dropped. No thread, and the honest party's sends
/// never fail, so a replayed honest transcript runs to its end.
pub struct Scripted {
    frames: std::collections::VecDeque<Vec<u8>>,
    /// What the honest party sent (kept for making seeds).
    pub sent: Vec<Vec<u8>>,
    keep: usize,
    meter: Meter,
}

impl Scripted {
    pub fn new(frames: Vec<Vec<u8>>) -> Scripted {
        Scripted {
            frames: frames.into(),
            sent: Vec::new(),
            keep: MAX_KEPT_SENDS,
            meter: Meter::default(),
        }
    }

    /// A script that keeps none of the honest party's sends: for parties whose sends are large
    /// (SHE's server key upload), where copying them would dominate an execution.
    pub fn forgetful(frames: Vec<Vec<u8>>) -> Scripted {
        Scripted {
            keep: 0,
            ..Scripted::new(frames)
        }
    }
}

impl Channel for Scripted {
    fn send_frame(&mut self, f: &[u8]) -> secinfer_net::Result<()> {
        self.meter.record_send(f.len());
        if self.sent.len() < self.keep {
            self.sent.push(f.to_vec());
        }
        Ok(())
    }
    fn recv_frame(&mut self) -> secinfer_net::Result<Vec<u8>> {
        let f = self.frames.pop_front().ok_or(NetError::Closed)?;
        if f.len() > DEFAULT_MAX_FRAME {
            return Err(NetError::FrameTooLarge {
                len: f.len(),
                max: DEFAULT_MAX_FRAME,
            });
        }
        self.meter.record_recv(f.len());
        Ok(f)
    }
    fn flush(&mut self) -> secinfer_net::Result<()> {
        Ok(())
    }
    fn meter(&self) -> &Meter {
        &self.meter
    }
    fn meter_mut(&mut self) -> &mut Meter {
        &mut self.meter
    }
    fn max_frame(&self) -> usize {
        DEFAULT_MAX_FRAME
    }
}

/// Sends a scripted channel keeps: enough for the first flights' seeds, bounded for long runs.
const MAX_KEPT_SENDS: usize = 4;

/// Runs `party` against `frames` from a hostile peer ([`Scripted`]).
pub(crate) fn against_frames<T>(frames: Vec<Vec<u8>>, party: impl FnOnce(&mut Scripted) -> T) -> T {
    party(&mut Scripted::new(frames))
}

/// The small model every session target runs: E = 4, H = 4, C = 2, T = 2, CG-2.
pub const SESSION_SHAPE: (usize, usize, usize, usize) = (4, 4, 2, 2);

/// The server's and the client's prepared model for the session targets.
pub fn session_models() -> Option<&'static (ServerModel, ClientModel)> {
    static M: OnceLock<Option<(ServerModel, ClientModel)>> = OnceLock::new();
    M.get_or_init(|| {
        let (e, h, c, t) = SESSION_SHAPE;
        let (q, embed) = random_model(e, h, c, t, Variant::Cg2, 7).ok()?;
        let cm = ClientModel::new(q.config.clone(), &embed, Variant::Cg2, t).ok()?;
        let sm = ServerModel::new(q, Variant::Cg2, t).ok()?;
        Some((sm, cm))
    })
    .as_ref()
}

/// Tokens of the client in the session targets.
pub fn session_tokens() -> Vec<u32> {
    vec![3; SESSION_SHAPE.3]
}

pub fn handshake_and_server_session(d: &[u8]) {
    let Some((sm, _)) = session_models() else {
        return;
    };
    let frames = split_frames(d).into_iter().map(<[u8]>::to_vec).collect();
    let policy = ServerPolicy { allow_logits: true };
    let _ = against_frames(frames, |ch| server_session_with(ch, sm, policy));
}

pub fn client_session_target(d: &[u8]) {
    let Some((_, cm)) = session_models() else {
        return;
    };
    let frames = split_frames(d).into_iter().map(<[u8]>::to_vec).collect();
    let tokens = session_tokens();
    let _ = against_frames(frames, |ch| {
        client_session(ch, cm, &tokens, ClientOptions::default(), &mut |_, _, _| {})
    });
}

/// The server reads one hello (the whole input) and nothing more: the handshake decoder alone,
/// at handshake speed.
pub fn gru_hello(d: &[u8]) {
    let Some((sm, _)) = session_models() else {
        return;
    };
    let policy = ServerPolicy { allow_logits: true };
    let _ = against_frames(vec![d.to_vec()], |ch| server_session_with(ch, sm, policy));
}

/// The client sends its hello and reads one reply (the whole input).
pub fn gru_reply(d: &[u8]) {
    let Some((_, cm)) = session_models() else {
        return;
    };
    let tokens = session_tokens();
    let _ = against_frames(vec![d.to_vec()], |ch| {
        client_session(ch, cm, &tokens, ClientOptions::default(), &mut |_, _, _| {})
    });
}

pub fn base_ot(d: &[u8]) {
    let frames = split_frames(d).into_iter().map(<[u8]>::to_vec).collect();
    let choices: Vec<bool> = (0..128).map(|i| i % 3 == 0).collect();
    let _ = against_frames(frames, |ch| {
        let mut prg = secinfer_ot::Prg::new();
        secinfer_ot::base_ot_receive(ch, &choices, &mut prg)
    });
}

/// The shipped model's configuration, against which weights and vocabularies are decoded.
fn shipped_config() -> Option<&'static ModelConfig> {
    static C: OnceLock<Option<ModelConfig>> = OnceLock::new();
    C.get_or_init(|| {
        let text = std::fs::read_to_string(shipped_model_dir().join("model.json")).ok()?;
        ModelConfig::parse(&text).ok()
    })
    .as_ref()
}

/// The shipped IMDB model's directory (the source of the model-file seeds).
pub fn shipped_model_dir() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../models/imdb-relu-gru")
}

pub fn model_json(d: &[u8]) {
    let _ = ModelConfig::parse(&String::from_utf8_lossy(d));
}

pub fn weights(d: &[u8]) {
    if let Some(c) = shipped_config() {
        let _ = Tensors::parse(d, &c.graph);
    }
}

pub fn vocab(d: &[u8]) {
    if let Some(c) = shipped_config() {
        if let Some(vc) = &c.vocab {
            if let Ok(a) = c.gru() {
                let _ = Vocab::parse(&String::from_utf8_lossy(d), vc, a.vocab);
            }
        }
    }
}

/// Frames as one party received them.
pub type Frames = Vec<Vec<u8>>;

/// Frames each side of an honest session received: (server's, client's). Seeds for the
/// session targets.
pub fn honest_session_frames() -> Option<(Frames, Frames)> {
    let (sm, cm) = session_models()?;
    let tokens = session_tokens();
    let run = secinfer_net::simulate(
        |ch| {
            let mut r = Recording::new(ch);
            let out = client_session(
                &mut r,
                cm,
                &tokens,
                ClientOptions::default(),
                &mut |_, _, _| {},
            );
            out.ok().map(|_| r.into_frames())
        },
        |ch| {
            let mut r = Recording::new(ch);
            let policy = ServerPolicy { allow_logits: true };
            server_session_with(&mut r, sm, policy)
                .ok()
                .map(|_| r.into_frames())
        },
    );
    Some((run.server.output?, run.client.output?))
}

/// Whether each side of the GRU session completes against the other side's recorded frames
/// (server, client): the session seeds then reach every decoder of the session.
pub fn session_seeds_complete() -> Option<(bool, bool)> {
    let (sm, cm) = session_models()?;
    let (server_frames, client_frames) = honest_session_frames()?;
    let policy = ServerPolicy { allow_logits: true };
    let server = against_frames(server_frames, |ch| server_session_with(ch, sm, policy)).is_ok();
    let tokens = session_tokens();
    let client = against_frames(client_frames, |ch| {
        client_session(ch, cm, &tokens, ClientOptions::default(), &mut |_, _, _| {})
    })
    .is_ok();
    Some((server, client))
}

/// Seeds for `target`: valid encodings made by the honest code, so that mutations reach past
/// the first checks.
pub fn seeds(target: &str) -> Vec<Vec<u8>> {
    let read = |f: &str| std::fs::read(shipped_model_dir().join(f)).unwrap_or_default();
    match target {
        "plain_frames" => vec![join_frames(&[b"hello".to_vec(), vec![0u8; 300]]), vec![]],
        "noise_records" => secinfer_net::fuzzing::NoiseRecordPair::new()
            .and_then(|mut p| p.seal(&[b"hello", &[1u8; 70_000]]))
            .map_or_else(|_| vec![], |s| vec![s]),
        "greeting" => vec![
            secinfer_net::encode_greeting(None, true),
            secinfer_net::encode_greeting(Some("busy \x1b[31m"), false),
        ],
        "handshake_and_server_session" => honest_session_frames()
            .map(|(s, _)| vec![join_frames(&s)])
            .unwrap_or_default(),
        "client_session" => honest_session_frames()
            .map(|(_, c)| vec![join_frames(&c)])
            .unwrap_or_default(),
        "he_public_key" | "he_ciphertext" | "he_seeded_ciphertext" | "he_response" => {
            he_seeds(target)
        }
        "gru_hello" => honest_session_frames()
            .and_then(|(s, _)| s.into_iter().next())
            .map_or_else(Vec::new, |f| vec![f]),
        "gru_reply" => honest_session_frames()
            .and_then(|(_, c)| c.into_iter().next())
            .map_or_else(Vec::new, |f| vec![f]),
        "base_ot" => vec![join_frames(&[vec![9u8; 32], vec![1u8; 128 * 32]])],
        "model_json" => vec![read("model.json")],
        "weights" => vec![read("weights.safetensors")],
        "vocab" => vec![read("vocab.json")],
        other => protocols::seeds(other)
            .or_else(|| families::seeds(other))
            .or_else(|| she_seeds(other))
            .unwrap_or_default(),
    }
}

#[cfg(feature = "tfhe")]
fn she_seeds(target: &str) -> Option<Vec<Vec<u8>>> {
    she::seeds(target)
}
#[cfg(not(feature = "tfhe"))]
fn she_seeds(_: &str) -> Option<Vec<Vec<u8>>> {
    None
}

fn he_seeds(target: &str) -> Vec<Vec<u8>> {
    let Some(p) = he_params() else {
        return vec![];
    };
    let sk = secinfer_he::SecretKey::generate(p);
    let seeded = sk.encrypt_poly_seeded(&[1u64, 2, 3, 4]);
    match (target, seeded) {
        ("he_public_key", _) => vec![sk.public_key().to_bytes()],
        ("he_seeded_ciphertext", Ok(ct)) => vec![ct.to_bytes()],
        // A response has a ciphertext's shape at a smaller modulus: its mutants start there.
        ("he_ciphertext" | "he_response", Ok(ct)) => vec![ct.expand(p).to_bytes()],
        _ => vec![],
    }
}

/// A small, seeded PRNG (xorshift64*) for the mutation loop.
pub struct Rng(u64);
impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed | 1)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next_u64() % n as u64) as usize
        }
    }
}

/// Applies one to four random mutations (bit flips, interesting bytes and lengths, cuts,
/// duplicated and deleted spans) to `d`.
pub fn mutate(rng: &mut Rng, d: &mut Vec<u8>) {
    const LENS: [u32; 7] = [0, 1, 0x7f, 0xffff, 0x0100_0000, 0x7fff_ffff, u32::MAX];
    for _ in 0..1 + rng.below(4) {
        let n = d.len();
        match rng.below(6) {
            0 if n > 0 => {
                let i = rng.below(n);
                d[i] ^= 1 << rng.below(8);
            }
            1 if n > 0 => {
                let i = rng.below(n);
                d[i] = [0u8, 0xff, 0x7f, 0x80, 0x1b][rng.below(5)];
            }
            2 if n >= 4 => {
                let i = rng.below(n - 3);
                let v = LENS[rng.below(LENS.len())].to_le_bytes();
                d[i..i + 4].copy_from_slice(&v);
            }
            3 => d.truncate(rng.below(n + 1)),
            4 if n > 0 => {
                let a = rng.below(n);
                let b = (a + 1 + rng.below(64)).min(n);
                let span = d[a..b].to_vec();
                let at = rng.below(n + 1);
                d.splice(at..at, span);
            }
            _ if n > 0 => {
                let a = rng.below(n);
                let b = (a + 1 + rng.below(64)).min(n);
                d.drain(a..b);
            }
            _ => d.push(rng.next_u64() as u8),
        }
    }
}

/// What a bounded run found.
#[derive(Clone, Debug, Default)]
pub struct RunReport {
    pub executions: u64,
    /// Inputs whose run panicked (the first few kept, with their execution index).
    pub panics: Vec<(u64, Vec<u8>)>,
    pub panic_count: u64,
    /// The largest single allocation any execution made, and that execution's index (a
    /// rerun with the same seed and `index + 1` executions ends on it). 0 unless
    /// [`peak::PeakAllocator`] is the global allocator.
    pub largest_allocation: usize,
    pub largest_at: u64,
}

/// Runs `f` on `iterations` inputs: each seed as is, then mutants of random seeds (an empty
/// input if there are none). Panics are caught and reported, not propagated; each execution's
/// largest allocation is counted ([`peak`]).
pub fn mutate_and_run(f: fn(&[u8]), seeds: &[Vec<u8>], iterations: u64, seed: u64) -> RunReport {
    mutate_and_run_until(f, seeds, iterations, seed, None)
}

/// [`mutate_and_run`], stopping early once `deadline` has passed (checked between executions).
pub fn mutate_and_run_until(
    f: fn(&[u8]),
    seeds: &[Vec<u8>],
    iterations: u64,
    seed: u64,
    deadline: Option<std::time::Instant>,
) -> RunReport {
    let mut rng = Rng::new(seed);
    let mut rep = RunReport::default();
    let empty = vec![Vec::new()];
    let pool = if seeds.is_empty() { &empty } else { seeds };
    for i in 0..iterations {
        if deadline.is_some_and(|t| std::time::Instant::now() >= t) {
            break;
        }
        let mut d = pool[rng.below(pool.len())].clone();
        if i >= pool.len() as u64 {
            mutate(&mut rng, &mut d);
        }
        peak::start();
        let r = std::panic::catch_unwind(|| f(&d));
        let largest = peak::stop();
        if largest > rep.largest_allocation {
            rep.largest_allocation = largest;
            rep.largest_at = i;
        }
        rep.executions += 1;
        if r.is_err() {
            rep.panic_count += 1;
            if rep.panics.len() < 4 {
                rep.panics.push((i, d));
            }
        }
    }
    rep
}

/// The largest frame any decoder may allocate for.
pub const ALLOCATION_LIMIT: usize = DEFAULT_MAX_FRAME;

/// The largest single allocation `target` may make: the limit its decoder is bounded by, the
/// channel's frame limit unless the target decodes with a smaller one of its own.
pub fn allocation_limit(target: &str) -> usize {
    match target {
        "plain_frames" | "noise_records" => STREAM_FRAME_LIMIT,
        _ => ALLOCATION_LIMIT,
    }
}
