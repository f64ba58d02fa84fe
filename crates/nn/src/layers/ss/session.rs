//! One served session of family `ss` (`secinfer serve` / `secinfer infer` on a FastGRNN model):
//! the client's request in one frame (protocol id, the public shape it derived from the model
//! info, the math, the OT filler, the products, whether it asks for the logits), the server's
//! answer in one byte, then [`run_fastgrnn`]. The server follows the client's math, filler and
//! products (all are semi-honest secure; they trade bytes for rounds and work) and refuses the
//! logits unless allowed.
use super::fastgrnn::{run_fastgrnn, FastGrnnRun, FastGrnnShape, SsOptions};
use super::graph::{client_sequence, params_of};
use super::products::Products;
use crate::error::{NnError, Result};
use crate::model::{Format, Model};
use crate::reference::fastgrnn::FastGrnnParams;
use secinfer_net::Channel;
use secinfer_ss::math::Impl;
use secinfer_ss::{CotSource, FerretParams, Party};

/// The protocol id the client's request starts with.
pub const PROTOCOL: &[u8] = b"secinfer-ss/2";
/// The request's length: the id, six u32 of shape, five option bytes.
const REQUEST_LEN: usize = PROTOCOL.len() + 6 * 4 + 5;
const ACCEPTED: u8 = 0;
const LOGITS_REFUSED: u8 = 1;
const SHAPE_MISMATCH: u8 = 2;

/// What the client asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SsRequest {
    pub math: Impl,
    pub source: CotSource,
    pub products: Products,
    pub logits: bool,
}

fn shape_words(s: &FastGrnnShape) -> [u32; 6] {
    let w = |v: usize| u32::try_from(v).unwrap_or(u32::MAX);
    [
        w(s.input),
        w(s.hidden),
        w(s.steps),
        w(s.classes),
        s.head.bits,
        s.head.scale,
    ]
}

fn encode(shape: &FastGrnnShape, r: &SsRequest) -> Result<Vec<u8>> {
    let mut out = PROTOCOL.to_vec();
    for v in shape_words(shape) {
        out.extend_from_slice(&v.to_le_bytes());
    }
    let (tag, k) = match r.source {
        CotSource::Iknp => (0u8, 0u8),
        CotSource::SoftSpoken { k } => (1, u8::try_from(k).unwrap_or(0)),
        CotSource::Ferret(FerretParams::B13) => (2, 0),
        other => {
            return Err(NnError::Unsupported(format!(
                "family ss: the OT filler {other:?} has no request code"
            )))
        }
    };
    out.extend_from_slice(&[
        u8::from(r.math == Impl::Sirnn),
        tag,
        k,
        u8::from(r.logits),
        u8::from(r.products == Products::He),
    ]);
    Ok(out)
}

/// Parses a request from the peer (hostile bytes: the exact length, known codes only).
fn decode(b: &[u8]) -> Result<([u32; 6], SsRequest)> {
    let bad = |m: &str| NnError::Malformed(format!("family ss request: {m}"));
    if b.len() != REQUEST_LEN || !b.starts_with(PROTOCOL) {
        return Err(bad("not a secinfer-ss/2 request"));
    }
    let mut words = [0u32; 6];
    for (i, w) in words.iter_mut().enumerate() {
        let at = PROTOCOL.len() + 4 * i;
        let mut le = [0u8; 4];
        le.copy_from_slice(&b[at..at + 4]);
        *w = u32::from_le_bytes(le);
    }
    let o = &b[PROTOCOL.len() + 24..];
    let math = match o[0] {
        0 => Impl::Opaf,
        1 => Impl::Sirnn,
        _ => return Err(bad("unknown math")),
    };
    let source = match (o[1], u32::from(o[2])) {
        (0, 0) => CotSource::Iknp,
        (1, k) if (1..=secinfer_ot::SOFTSPOKEN_MAX_K).contains(&k) => CotSource::SoftSpoken { k },
        (2, 0) => CotSource::Ferret(FerretParams::B13),
        _ => return Err(bad("unknown OT filler")),
    };
    let logits = match o[3] {
        0 => false,
        1 => true,
        _ => return Err(bad("the logits flag is not 0 or 1")),
    };
    let products = match o[4] {
        0 => Products::Ot,
        1 => Products::He,
        _ => return Err(bad("unknown products")),
    };
    Ok((
        words,
        SsRequest {
            math,
            source,
            products,
            logits,
        },
    ))
}

/// The model owner's side: the quantized FastGRNN and its policy. Secret: no `Debug`.
pub struct SsServer {
    shape: FastGrnnShape,
    params: FastGrnnParams,
    allow_logits: bool,
}

impl SsServer {
    /// The server of `model` (a graph [`super::graph::shape_of`] accepts).
    pub fn new(model: &Model, allow_logits: bool) -> Result<SsServer> {
        let (shape, params) = params_of(model)?;
        Ok(SsServer {
            shape,
            params,
            allow_logits,
        })
    }

    pub fn shape(&self) -> &FastGrnnShape {
        &self.shape
    }
}

/// The server's account of one session.
pub struct ServedRun {
    pub request: SsRequest,
    pub run: FastGrnnRun,
}

/// Serves one session on `ch`: reads the request, answers, runs the model.
pub fn server_session<C: Channel>(ch: &mut C, server: &SsServer) -> Result<ServedRun> {
    server_session_with(ch, server, server.allow_logits)
}

/// [`server_session`] under the session's own logits policy (the driver's `ServerPolicy`).
pub fn server_session_with<C: Channel>(
    ch: &mut C,
    server: &SsServer,
    allow_logits: bool,
) -> Result<ServedRun> {
    let frame = ch.recv_frame_limited(REQUEST_LEN)?;
    let (shape, request) = decode(&frame)?;
    let refuse = |ch: &mut C, code: u8, e: NnError| -> Result<ServedRun> {
        ch.send_frame(&[code])?;
        ch.flush()?;
        Err(e)
    };
    if shape != shape_words(&server.shape) {
        let e = NnError::Refused("the client's model info has another shape".into());
        return refuse(ch, SHAPE_MISMATCH, e);
    }
    if request.logits && !allow_logits {
        let e = NnError::Refused("the client asked for the logits; not allowed".into());
        return refuse(ch, LOGITS_REFUSED, e);
    }
    ch.send_frame(&[ACCEPTED])?;
    ch.flush()?;
    let opts = SsOptions {
        math: request.math,
        source: request.source,
        products: request.products,
        logits: request.logits,
    };
    let run = run_fastgrnn(
        Party::Server,
        ch,
        &server.shape,
        &opts,
        Some(&server.params),
        None,
    )?;
    Ok(ServedRun { request, run })
}

/// The client's side of one session on `ch`: `x` is its sequence in the main format `main`
/// (steps × features), `shape` what it derived from the model info.
pub fn client_session<C: Channel>(
    ch: &mut C,
    shape: &FastGrnnShape,
    request: &SsRequest,
    x: &[i64],
    main: Format,
) -> Result<FastGrnnRun> {
    let xs = client_sequence(x, main);
    ch.send_frame(&encode(shape, request)?)?;
    ch.flush()?;
    let answer = ch.recv_frame_limited(1)?;
    match answer.first() {
        Some(&ACCEPTED) if answer.len() == 1 => {}
        Some(&LOGITS_REFUSED) => {
            return Err(NnError::Refused(
                "the server does not reveal logits (serve --allow-logits)".into(),
            ))
        }
        Some(&SHAPE_MISMATCH) => {
            return Err(NnError::Refused(
                "the server's model has another shape than the model info".into(),
            ))
        }
        _ => return Err(NnError::Malformed("family ss: bad answer".into())),
    }
    let opts = SsOptions {
        math: request.math,
        source: request.source,
        products: request.products,
        logits: request.logits,
    };
    run_fastgrnn(Party::Client, ch, shape, &opts, None, Some(&xs))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::error::ErrorKind;

    fn shape() -> FastGrnnShape {
        FastGrnnShape {
            input: 28,
            hidden: 64,
            steps: 28,
            classes: 10,
            weight_scale: 8,
            head: crate::reference::fastgrnn::HEAD_FORMAT,
        }
    }

    /// Every request round-trips; truncated, overlong, unknown-code and wrong-id requests are
    /// typed `Malformed` errors.
    #[test]
    fn requests_round_trip_and_bad_ones_are_refused() {
        let sh = shape();
        for (math, source, products, logits) in [
            (
                Impl::Opaf,
                CotSource::SoftSpoken { k: 5 },
                Products::He,
                false,
            ),
            (Impl::Sirnn, CotSource::Iknp, Products::Ot, true),
            (
                Impl::Opaf,
                CotSource::Ferret(FerretParams::B13),
                Products::He,
                true,
            ),
        ] {
            let r = SsRequest {
                math,
                source,
                products,
                logits,
            };
            let (w, got) = decode(&encode(&sh, &r).unwrap()).unwrap();
            assert_eq!((w, got), (shape_words(&sh), r));
        }
        let good = encode(
            &sh,
            &SsRequest {
                math: Impl::Opaf,
                source: CotSource::Iknp,
                products: Products::Ot,
                logits: false,
            },
        )
        .unwrap();
        let n = good.len();
        let mut bad: Vec<Vec<u8>> = vec![good[..n - 1].to_vec(), [&good[..], &[0]].concat()];
        for (at, v) in [
            (0, b'X'),
            (n - 5, 2),
            (n - 4, 3),
            (n - 3, 1),
            (n - 2, 2),
            (n - 1, 2),
        ] {
            let mut b = good.clone();
            b[at] = v;
            bad.push(b);
        }
        let mut soft = good.clone();
        soft[n - 4] = 1;
        soft[n - 3] = 9;
        bad.push(soft);
        for b in bad {
            assert_eq!(decode(&b).err().unwrap().kind(), ErrorKind::Malformed);
        }
    }
}
