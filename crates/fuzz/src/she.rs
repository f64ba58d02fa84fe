//! The SHE (TFHE) session's decoders (crate feature `tfhe`), each against a hostile peer:
//!
//! - `she_key_upload`: the server reading the client's hello and its seeded server key (the
//!   chunk stream, tfhe-rs's bincode within the announced length, the parameter-set
//!   conformance check). A full key of the session's parameter set is 30 MB and its expansion
//!   takes seconds, so the seeds stop short of one: the honest client's upload of a key made at
//!   a toy parameter set (decoded whole, then refused by the conformance check) and the honest
//!   upload of a real key cut to its first [`CUT_KEY`] bytes (refused by bincode at the cut).
//! - `she_input`: the server's decoder of one input ciphertext and its expansion, on the
//!   honest client's ciphertexts. A whole sample evaluates the network (seconds of
//!   bootstrapping), so this decoder runs alone.
//! - `she_reply`: the client reading the server's reply (the key's expansion time, then per
//!   sample the evaluation time and the output ciphertexts, decoded, checked and decrypted),
//!   from a recorded honest session. Its keys are made once per process.
use crate::{against_frames, join_frames, split_frames, Frames, Scripted};
use secinfer_tfhe::session::{self, ClientKeys, ClientReport, ServerReport};
use secinfer_tfhe::{
    Error, InputFormat, Layer, Network, PbsNetwork, Pow2Linear, Shape, PBS_PARAMETERS,
};
use std::sync::OnceLock;
use tfhe::shortint::parameters::{DecompositionLevelCount, LweDimension, PolynomialSize};
use tfhe::shortint::{ClientKey, CompressedServerKey};

/// Bytes of the real server key the cut seed keeps: the encoding's header and the start of
/// the key-switching key.
pub const CUT_KEY: usize = 4096;

/// The client's sample in every session here (two 3-bit values).
const SAMPLE: [i64; 2] = [5, 2];

/// One dense layer, 2 inputs of 3 bits to 1 output: the decoders do not depend on the
/// network's size, and its few bootstraps keep the recorded honest session short.
pub fn network() -> Option<&'static PbsNetwork> {
    static N: OnceLock<Option<PbsNetwork>> = OnceLock::new();
    N.get_or_init(|| {
        let input = InputFormat {
            shape: Shape::flat(SAMPLE.len()),
            bits: 3,
            signed: false,
        };
        let dense = Layer::Dense(Pow2Linear {
            name: "fc".into(),
            outputs: 1,
            fan_in: SAMPLE.len(),
            sign: vec![1, -1],
            exp: vec![1, 0],
            bias: vec![3],
            offset: 0,
        });
        PbsNetwork::new(&Network::new(input, vec![dense]).ok()?).ok()
    })
    .as_ref()
}

/// The client's keys at the session's parameter set, made once per process (seconds).
fn keys() -> Option<&'static ClientKeys> {
    static K: OnceLock<Option<ClientKeys>> = OnceLock::new();
    K.get_or_init(|| ClientKeys::generate().ok()).as_ref()
}

/// Keys of a toy parameter set (dimensions far below any security level): its server key has
/// every field of a real one at 35 KB, and the server refuses it for its parameters.
fn toy_keys() -> Option<ClientKeys> {
    let mut p = PBS_PARAMETERS;
    p.lwe_dimension = LweDimension(8);
    p.polynomial_size = PolynomialSize(256);
    p.ks_level = DecompositionLevelCount(1);
    let ck = ClientKey::new(p);
    let csk = CompressedServerKey::new(&ck);
    ClientKeys::from_keys(ck, &csk).ok()
}

fn serve(ch: &mut Scripted) -> Option<Result<ServerReport, Error>> {
    Some(session::serve_session(ch, network()?, &|_, _, _| {}))
}

fn client(ch: &mut Scripted, keys: &ClientKeys) -> Option<Result<ClientReport, Error>> {
    let info = network()?.info();
    Some(session::client_session_with(
        ch,
        info,
        &[SAMPLE.to_vec()],
        keys,
    ))
}

fn frames_of(d: &[u8]) -> Frames {
    split_frames(d).into_iter().map(<[u8]>::to_vec).collect()
}

pub fn she_key_upload(d: &[u8]) {
    against_frames(frames_of(d), serve);
}

pub fn she_input(d: &[u8]) {
    if let Ok(c) = session::decode_input(d) {
        let _ = c.decompress();
    }
}

pub fn she_reply(d: &[u8]) {
    if let Some(k) = keys() {
        client(&mut Scripted::forgetful(frames_of(d)), k);
    }
}

/// One honest session of one sample between the client with [`keys`] and the server: the
/// frames each side received (server's, client's).
pub fn honest_frames() -> Option<&'static (Frames, Frames)> {
    static F: OnceLock<Option<(Frames, Frames)>> = OnceLock::new();
    F.get_or_init(|| {
        let (net, k) = (network()?, keys()?);
        let run = secinfer_net::simulate(
            |ch| {
                let mut r = secinfer_net::Recording::new(ch);
                let info = net.info();
                let out = session::client_session_with(&mut r, info, &[SAMPLE.to_vec()], k);
                out.ok().map(|_| r.into_frames())
            },
            |ch| {
                let mut r = secinfer_net::Recording::new(ch);
                let out = session::serve_session(&mut r, net, &|_, _, _| {});
                out.ok().map(|_| r.into_frames())
            },
        );
        Some((run.server.output?, run.client.output?))
    })
    .as_ref()
}

/// What the honest client sends with `keys` before it waits for the server: hello and key.
fn upload(keys: &ClientKeys) -> Option<Frames> {
    let mut ch = Scripted::new(vec![]);
    ch.keep = usize::MAX;
    client(&mut ch, keys)?.err()?;
    Some(ch.sent)
}

/// The honest upload of the real key cut to [`CUT_KEY`] bytes, its hello announcing the cut
/// length.
fn cut_upload() -> Option<Frames> {
    let (server, _) = honest_frames()?;
    let (hello, key) = (server.first()?, server.get(1)?);
    let (samples, _) = session::decode_hello(hello).ok()?;
    let cut = key.get(..CUT_KEY)?.to_vec();
    Some(vec![session::encode_hello(samples, CUT_KEY as u64), cut])
}

/// Seeds of this module's targets, made by the honest code; `None` for a name it does not own.
pub fn seeds(target: &str) -> Option<Vec<Vec<u8>>> {
    let seeds = match target {
        "she_key_upload" => [upload(&toy_keys()?), cut_upload()]
            .into_iter()
            .flatten()
            .map(|f| join_frames(&f))
            .collect(),
        "she_input" => {
            let (server, _) = honest_frames()?;
            let n = network()?.input_ciphertexts();
            server[server.len().checked_sub(n)?..].to_vec()
        }
        "she_reply" => vec![join_frames(&honest_frames()?.1)],
        _ => return None,
    };
    Some(seeds)
}

/// How each seed of `target` ends when its party runs it: `Ok(())` where the honest transcript
/// completes (with the reference's output on the client), the typed error otherwise.
pub fn seed_outcomes(target: &str) -> Option<Vec<Result<(), Error>>> {
    let seeds = seeds(target)?;
    let outcomes = seeds.iter().map(|d| -> Option<Result<(), Error>> {
        Some(match target {
            "she_key_upload" => against_frames(frames_of(d), serve)?.map(|_| ()),
            "she_input" => session::decode_input(d).map(|_| ()),
            _ => {
                let report = client(&mut Scripted::forgetful(frames_of(d)), keys()?)?;
                let want = network()?.network().reference(&SAMPLE).ok()?;
                report.and_then(|r| {
                    let got: Vec<_> = r.samples.iter().map(|s| &s.output).collect();
                    if got == [&want] {
                        Ok(())
                    } else {
                        Err(Error::Peer(format!("outputs {got:?}, reference {want:?}")))
                    }
                })
            }
        })
    });
    outcomes.collect()
}
