//! One SHE session over a secinfer-net [`Channel`] (the served path's Noise channel in
//! `secinfer serve` / `secinfer infer`): the client uploads its seeded shortint server key once,
//! then for each sample its encrypted input digits; the server evaluates the network on the PBS
//! path with no interaction and returns the encrypted output digits.
//!
//! Wire format (every frame length-checked before use):
//! 1. client → server: `MAGIC`, samples (u32 LE), key length (u64 LE);
//! 2. client → server: the key in frames of at most [`KEY_CHUNK`] bytes (tfhe-rs safe
//!    serialisation, checked against the parameter set on arrival);
//! 3. server → client: the key's expansion time (f64 LE);
//! 4. per sample: the input ciphertexts, one frame each; the server answers with its
//!    evaluation time (f64 LE) and the output ciphertexts, one frame each.
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use bincode::Options;
use secinfer_net::Channel;
use tfhe::conformance::ParameterSetConformant;
use tfhe::core_crypto::commons::math::random::{CompressionSeed, Seed};
use tfhe::shortint::atomic_pattern::compressed::CompressedAtomicPatternServerKey;
use tfhe::shortint::ciphertext::MaxDegree;
use tfhe::shortint::parameters::{AtomicPatternParameters, CiphertextConformanceParams};
use tfhe::shortint::server_key::{
    CompressedModulusSwitchConfiguration, ShortintCompressedBootstrappingKey,
};
use tfhe::shortint::{Ciphertext, ClientKey, CompressedCiphertext, CompressedServerKey};

use crate::pbs::{generate_pbs_client_keys, PbsEncrypted, PbsInfo, PbsNetwork, PBS_PARAMETERS};
use crate::Error;

pub const MAGIC: &[u8; 8] = b"SHEPBS01";
/// Largest seeded server key the server accepts (the default parameter set's is ≈ 40 MB).
pub const MAX_KEY_BYTES: u64 = 256 << 20;
pub const KEY_CHUNK: usize = 8 << 20;
/// Largest serialised ciphertext either side accepts.
const MAX_CT_BYTES: usize = 64 << 10;
pub const MAX_SAMPLES: u32 = 10_000;

fn key_params() -> (AtomicPatternParameters, MaxDegree) {
    let p = PBS_PARAMETERS;
    (
        p.into(),
        MaxDegree::from_msg_carry_modulus(p.message_modulus, p.carry_modulus),
    )
}

fn ct_params() -> CiphertextConformanceParams {
    PBS_PARAMETERS.to_shortint_conformance_param()
}

/// tfhe-rs's own encoding (bincode, fixed-width integers), refused beyond `limit` bytes.
fn codec(limit: u64) -> impl Options {
    bincode::DefaultOptions::new()
        .with_fixint_encoding()
        .allow_trailing_bytes()
        .with_limit(limit)
}

fn ser<T: serde::Serialize>(v: &T, limit: u64) -> Result<Vec<u8>, Error> {
    Ok(codec(limit).serialize(v)?)
}

/// Peer bytes: decoded within `limit` (bincode refuses any length that would exceed it before
/// allocating), then checked against the parameter set so that no dimension or modulus can
/// reach a tfhe-rs assertion.
fn de<T>(bytes: &[u8], limit: u64, params: &T::ParameterSet) -> Result<T, Error>
where
    T: serde::de::DeserializeOwned + ParameterSetConformant,
{
    let v: T = codec(limit).deserialize(bytes)?;
    if v.is_conformant(params) {
        Ok(v)
    } else {
        Err(Error::Peer(
            "a key or ciphertext of another parameter set".into(),
        ))
    }
}

/// Whether a seed starts its pseudo-random table at the first index, as every honest encoding
/// does. tfhe-rs expands a seeded key or ciphertext from the index the bytes carry without
/// checking it: a byte index past an AES block indexes out of bounds (found by the fuzz target
/// `she_input`), so a peer's seeds are checked before any expansion.
fn seed_at_start(seed: CompressionSeed) -> bool {
    seed.inner.first_index == CompressionSeed::from(Seed(0)).inner.first_index
}

fn seeds_at_start(key: &CompressedServerKey) -> bool {
    let CompressedAtomicPatternServerKey::Standard(k) = &key.compressed_ap_server_key else {
        return false;
    };
    let ShortintCompressedBootstrappingKey::Classic {
        bsk,
        modulus_switch_noise_reduction_key,
    } = k.bootstrapping_key()
    else {
        return false;
    };
    // The drift technique's key carries seeded ciphertexts of its own; the session's parameter
    // set does not use it.
    !matches!(
        modulus_switch_noise_reduction_key,
        CompressedModulusSwitchConfiguration::DriftTechniqueNoiseReduction(_)
    ) && seed_at_start(k.key_switching_key().compression_seed())
        && seed_at_start(bsk.compression_seed())
}

fn unusable_seed() -> Error {
    Error::Peer("a seed that does not start at the first index".into())
}

fn f64_frame(ch: &mut impl Channel) -> Result<f64, Error> {
    let f = ch.recv_frame_limited(8)?;
    let b: [u8; 8] = f
        .as_slice()
        .try_into()
        .map_err(|_| Error::Peer(format!("a time frame of {} bytes", f.len())))?;
    let v = f64::from_le_bytes(b);
    if v.is_finite() && v >= 0.0 {
        Ok(v)
    } else {
        Err(Error::Peer(format!("time {v}")))
    }
}

/// What the server did in one session.
#[derive(Clone, Debug, Default)]
pub struct ServerReport {
    pub key_bytes: u64,
    pub expand_s: f64,
    pub samples: u32,
    pub eval_s: f64,
    pub pbs: u64,
}

/// Serves one session. `progress(done, total)` is called every few seconds of an evaluation.
pub fn serve_session(
    ch: &mut impl Channel,
    pbs: &PbsNetwork,
    progress: &(dyn Fn(u32, u64, u64) + Sync),
) -> Result<ServerReport, Error> {
    let hello = ch.recv_frame_limited(HELLO_LEN)?;
    let (samples, key_len) = decode_hello(&hello)?;
    if samples == 0 || samples > MAX_SAMPLES || key_len == 0 || key_len > MAX_KEY_BYTES {
        return Err(Error::Peer(format!(
            "{samples} samples (1..={MAX_SAMPLES}), a key of {key_len} bytes (≤ {MAX_KEY_BYTES})"
        )));
    }
    // The buffer grows as the key's chunks arrive: an announced length alone, up to
    // MAX_KEY_BYTES, costs the server nothing.
    let mut key = Vec::new();
    while (key.len() as u64) < key_len {
        let want = (key_len - key.len() as u64).min(KEY_CHUNK as u64) as usize;
        let f = ch.recv_frame_limited(want)?;
        if f.is_empty() {
            return Err(Error::Peer("an empty key frame".into()));
        }
        key.extend_from_slice(&f);
    }
    let t = Instant::now();
    let csk: CompressedServerKey = de(&key, key_len, &key_params())?;
    drop(key);
    if !seeds_at_start(&csk) {
        return Err(unusable_seed());
    }
    let sk = csk.decompress();
    drop(csk);
    let expand_s = t.elapsed().as_secs_f64();
    ch.send_frame(&expand_s.to_le_bytes())?;
    ch.flush()?;
    let mut report = ServerReport {
        key_bytes: key_len,
        expand_s,
        samples,
        ..ServerReport::default()
    };
    let total = pbs.count().pbs;
    for k in 0..samples {
        let mut cts = Vec::with_capacity(pbs.input_ciphertexts());
        for _ in 0..pbs.input_ciphertexts() {
            let f = ch.recv_frame_limited(MAX_CT_BYTES)?;
            cts.push(decode_input(&f)?.decompress());
        }
        let mut b = PbsEncrypted::new(&sk)?;
        let counter = b.progress();
        let t = Instant::now();
        let stop = AtomicBool::new(false);
        let out = std::thread::scope(|s| {
            let stop = &stop;
            s.spawn(move || {
                let mut last = Instant::now();
                while !stop.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(100));
                    if last.elapsed() >= Duration::from_secs(5) {
                        progress(k, counter.load(Ordering::Relaxed), total);
                        last = Instant::now();
                    }
                }
            });
            let r = pbs.evaluate_encrypted(&mut b, &cts);
            stop.store(true, Ordering::Relaxed);
            r
        })?;
        let eval_s = t.elapsed().as_secs_f64();
        report.eval_s += eval_s;
        report.pbs += b.bootstraps();
        ch.send_frame(&eval_s.to_le_bytes())?;
        for c in &out {
            ch.send_frame(&ser(c, MAX_CT_BYTES as u64)?)?;
        }
        ch.flush()?;
    }
    Ok(report)
}

/// The client's measurements: key generation and upload once, then per sample.
#[derive(Clone, Debug, Default)]
pub struct ClientReport {
    pub keygen_s: f64,
    pub key_bytes: u64,
    /// Key upload until the server has expanded it (includes `server_expand_s`).
    pub key_upload_s: f64,
    pub server_expand_s: f64,
    pub samples: Vec<SampleReport>,
}

#[derive(Clone, Debug, Default)]
pub struct SampleReport {
    pub output: Vec<i64>,
    pub encrypt_s: f64,
    pub upload_bytes: u64,
    /// Upload, evaluation and download as the client waits for them.
    pub wait_s: f64,
    pub server_eval_s: f64,
    pub download_bytes: u64,
    pub decrypt_s: f64,
}

/// A client's keys: the secret key, and the seeded server key encoded as it is uploaded.
/// Kept apart from a session so that keys made once can serve several (a server then sees the
/// same server key each time, which links those sessions).
pub struct ClientKeys {
    ck: ClientKey,
    key: Vec<u8>,
    keygen_s: f64,
}

impl std::fmt::Debug for ClientKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientKeys")
            .field("server_key_bytes", &self.key.len())
            .finish_non_exhaustive()
    }
}

impl ClientKeys {
    /// Fresh keys of the session's parameter set.
    pub fn generate() -> Result<Self, Error> {
        let t = Instant::now();
        let (ck, csk) = generate_pbs_client_keys();
        let mut keys = Self::from_keys(ck, &csk)?;
        keys.keygen_s = t.elapsed().as_secs_f64();
        Ok(keys)
    }

    /// Keys made elsewhere. A server key of another parameter set is sent as it is and
    /// refused by the server.
    pub fn from_keys(ck: ClientKey, csk: &CompressedServerKey) -> Result<Self, Error> {
        Ok(Self {
            ck,
            key: ser(csk, MAX_KEY_BYTES)?,
            keygen_s: 0.0,
        })
    }

    /// Bytes of the encoded server key.
    pub fn server_key_bytes(&self) -> usize {
        self.key.len()
    }
}

/// The client's first frame: [`MAGIC`], samples (u32 LE), key length (u64 LE).
pub fn encode_hello(samples: u32, key_len: u64) -> Vec<u8> {
    let mut hello = MAGIC.to_vec();
    hello.extend_from_slice(&samples.to_le_bytes());
    hello.extend_from_slice(&key_len.to_le_bytes());
    hello
}

const HELLO_LEN: usize = 20;

/// The server's reading of [`encode_hello`]: samples and key length, each in its range.
pub fn decode_hello(hello: &[u8]) -> Result<(u32, u64), Error> {
    let fields = hello
        .strip_prefix(MAGIC.as_slice())
        .filter(|rest| rest.len() == HELLO_LEN - MAGIC.len())
        .map(|rest| rest.split_at(4));
    let Some((s, k)) = fields else {
        return Err(Error::Peer("not a SHE PBS session".into()));
    };
    let samples = u32::from_le_bytes(s.try_into().unwrap_or_default());
    let key_len = u64::from_le_bytes(k.try_into().unwrap_or_default());
    if samples == 0 || samples > MAX_SAMPLES || key_len == 0 || key_len > MAX_KEY_BYTES {
        return Err(Error::Peer(format!(
            "{samples} samples (1..={MAX_SAMPLES}), a key of {key_len} bytes (≤ {MAX_KEY_BYTES})"
        )));
    }
    Ok((samples, key_len))
}

/// The server's decoder of one input ciphertext frame (seeded, checked against the parameter
/// set).
pub fn decode_input(frame: &[u8]) -> Result<CompressedCiphertext, Error> {
    let c: CompressedCiphertext = de(frame, MAX_CT_BYTES as u64, &ct_params())?;
    if seed_at_start(c.ct.compression_seed()) {
        Ok(c)
    } else {
        Err(unusable_seed())
    }
}

/// The client's decoder of one output ciphertext frame (checked against the parameter set).
pub fn decode_output(frame: &[u8]) -> Result<Ciphertext, Error> {
    de(frame, MAX_CT_BYTES as u64, &ct_params())
}

/// Runs a session as the client with fresh keys: see [`client_session_with`].
pub fn client_session(
    ch: &mut impl Channel,
    info: &PbsInfo,
    samples: &[Vec<i64>],
) -> Result<ClientReport, Error> {
    info.validate()?;
    check_samples(info, samples)?;
    client_session_with(ch, info, samples, &ClientKeys::generate()?)
}

fn check_samples(info: &PbsInfo, samples: &[Vec<i64>]) -> Result<(), Error> {
    if samples.is_empty() || samples.len() > MAX_SAMPLES as usize {
        return Err(Error::Format(format!(
            "{} samples (1..={MAX_SAMPLES})",
            samples.len()
        )));
    }
    for x in samples {
        info.input_values(x)?;
    }
    Ok(())
}

/// Runs a session as the client with `keys`: the server key uploaded once, then every sample.
pub fn client_session_with(
    ch: &mut impl Channel,
    info: &PbsInfo,
    samples: &[Vec<i64>],
    keys: &ClientKeys,
) -> Result<ClientReport, Error> {
    info.validate()?;
    check_samples(info, samples)?;
    let key = &keys.key;
    let mut report = ClientReport {
        keygen_s: keys.keygen_s,
        key_bytes: key.len() as u64,
        ..ClientReport::default()
    };
    let t = Instant::now();
    ch.send_frame(&encode_hello(samples.len() as u32, key.len() as u64))?;
    for c in key.chunks(KEY_CHUNK) {
        ch.send_frame(c)?;
    }
    ch.flush()?;
    report.server_expand_s = f64_frame(ch)?;
    report.key_upload_s = t.elapsed().as_secs_f64();
    for x in samples {
        report.samples.push(client_sample(ch, info, &keys.ck, x)?);
    }
    Ok(report)
}

fn client_sample(
    ch: &mut impl Channel,
    info: &PbsInfo,
    ck: &ClientKey,
    x: &[i64],
) -> Result<SampleReport, Error> {
    let t = Instant::now();
    let cts = info.encrypt_input_compressed(ck, x)?;
    let frames = cts
        .iter()
        .map(|c| ser(c, MAX_CT_BYTES as u64))
        .collect::<Result<Vec<_>, _>>()?;
    let mut r = SampleReport {
        encrypt_s: t.elapsed().as_secs_f64(),
        upload_bytes: frames.iter().map(|f| f.len() as u64).sum(),
        ..SampleReport::default()
    };
    let t = Instant::now();
    for f in frames {
        ch.send_frame_vec(f)?;
    }
    ch.flush()?;
    r.server_eval_s = f64_frame(ch)?;
    let mut out = Vec::with_capacity(info.output_ciphertexts());
    for _ in 0..info.output_ciphertexts() {
        let f = ch.recv_frame_limited(MAX_CT_BYTES)?;
        r.download_bytes += f.len() as u64;
        out.push(decode_output(&f)?);
    }
    r.wait_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    r.output = info.decrypt_output(ck, &out)?;
    r.decrypt_s = t.elapsed().as_secs_f64();
    Ok(r)
}
