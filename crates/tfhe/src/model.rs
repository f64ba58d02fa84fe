//! Loading a SHE network from `she.json` (the layer list and formats) and a safetensors file
//! (per linear layer `NAME.sign` and `NAME.exp` as i8, `NAME.bias` as i64), as
//! `python/secinfer/she.py` exports them. Both files are hostile input: sizes are capped before
//! reading, tensor dtypes and shapes are checked, and [`Network::new`] validates the rest.
use std::path::Path;

use safetensors::{Dtype, SafeTensors};
use serde::Deserialize;

use crate::network::{ConvGeom, InputFormat, Layer, Network, Pow2Linear};
use crate::Error;

const MAX_JSON_BYTES: u64 = 1 << 20;
const MAX_WEIGHT_BYTES: u64 = 1 << 30;

/// The description file.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Description {
    pub format: String,
    pub version: u32,
    pub input: InputFormat,
    pub layers: Vec<LayerDesc>,
    /// Free-form facts from training (accuracy, dataset); not read by the evaluator.
    #[serde(default)]
    pub meta: serde_json::Value,
}

/// One layer as the description names it; weights come from the tensors named `name.*`.
#[derive(Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum LayerDesc {
    Dense {
        name: String,
        outputs: usize,
        offset: i32,
    },
    Conv2d {
        name: String,
        out_ch: usize,
        kernel: usize,
        stride: usize,
        padding: usize,
        offset: i32,
    },
    Requant {
        shift: u32,
        bits: u32,
        relu: bool,
    },
    Maxpool {
        kernel: usize,
        stride: usize,
        padding: usize,
    },
    Flatten,
}

pub const FORMAT: &str = "secinfer-she";
pub const VERSION: u32 = 1;

fn read_capped(path: &Path, cap: u64) -> Result<Vec<u8>, Error> {
    let io = |source| Error::Io {
        path: path.to_path_buf(),
        source,
    };
    let len = std::fs::metadata(path).map_err(io)?.len();
    if len > cap {
        return Err(Error::Format(format!(
            "{} is {len} bytes, more than the {cap} allowed",
            path.display()
        )));
    }
    std::fs::read(path).map_err(io)
}

/// A tensor's data as i64 after checking dtype and shape.
fn tensor(
    st: &SafeTensors<'_>,
    name: &str,
    dtype: Dtype,
    shape: &[usize],
) -> Result<Vec<i64>, Error> {
    let bad = |reason: String| Error::Tensor {
        name: name.to_string(),
        reason,
    };
    let t = st.tensor(name)?;
    if t.dtype() != dtype || t.shape() != shape {
        return Err(bad(format!(
            "is {:?} {:?}, expected {dtype:?} {shape:?}",
            t.dtype(),
            t.shape()
        )));
    }
    let data = t.data();
    Ok(match dtype {
        Dtype::I8 => data.iter().map(|b| i64::from(*b as i8)).collect(),
        Dtype::I64 => data
            .chunks_exact(8)
            .map(|c| i64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
            .collect(),
        other => return Err(bad(format!("unsupported dtype {other:?}"))),
    })
}

/// Reads a linear layer's weights; `dims` is the weight tensor shape ([out, fan_in] or
/// [out, in_ch, k, k]).
fn linear(
    st: &SafeTensors<'_>,
    name: &str,
    dims: &[usize],
    offset: i32,
) -> Result<Pow2Linear, Error> {
    let narrow = |v: Vec<i64>, what: &str| -> Result<Vec<i8>, Error> {
        v.into_iter()
            .map(|x| {
                i8::try_from(x).map_err(|_| Error::Tensor {
                    name: format!("{name}.{what}"),
                    reason: format!("{x} out of i8"),
                })
            })
            .collect()
    };
    let outputs = dims[0];
    let fan_in = dims[1..].iter().product();
    Ok(Pow2Linear {
        name: name.to_string(),
        outputs,
        fan_in,
        sign: narrow(
            tensor(st, &format!("{name}.sign"), Dtype::I8, dims)?,
            "sign",
        )?,
        exp: narrow(tensor(st, &format!("{name}.exp"), Dtype::I8, dims)?, "exp")?,
        bias: tensor(st, &format!("{name}.bias"), Dtype::I64, &[outputs])?,
        offset,
    })
}

/// Builds a network from a parsed description and the raw safetensors bytes.
pub fn from_parts(desc: &Description, weights: &[u8]) -> Result<Network, Error> {
    if desc.format != FORMAT || desc.version != VERSION {
        return Err(Error::Format(format!(
            "format {:?} version {}, expected {FORMAT:?} {VERSION}",
            desc.format, desc.version
        )));
    }
    let st = SafeTensors::deserialize(weights)?;
    // Channels and flat sizes follow the layers; Network::new re-checks every shape.
    let mut ch = desc.input.shape.c;
    let mut flat = desc.input.shape.len();
    let mut layers = Vec::with_capacity(desc.layers.len());
    for l in &desc.layers {
        layers.push(match l {
            LayerDesc::Dense {
                name,
                outputs,
                offset,
            } => {
                let lin = linear(&st, name, &[*outputs, flat], *offset)?;
                (ch, flat) = (*outputs, *outputs);
                Layer::Dense(lin)
            }
            LayerDesc::Conv2d {
                name,
                out_ch,
                kernel,
                stride,
                padding,
                offset,
            } => {
                let lin = linear(&st, name, &[*out_ch, ch, *kernel, *kernel], *offset)?;
                let g = ConvGeom {
                    in_ch: ch,
                    out_ch: *out_ch,
                    kernel: *kernel,
                    stride: *stride,
                    padding: *padding,
                };
                ch = *out_ch;
                // The flat size after a conv is only known from the shapes: recompute below.
                flat = 0;
                Layer::Conv2d(lin, g)
            }
            LayerDesc::Requant { shift, bits, relu } => Layer::Requant {
                shift: *shift,
                bits: *bits,
                relu: *relu,
            },
            LayerDesc::Maxpool {
                kernel,
                stride,
                padding,
            } => {
                flat = 0;
                Layer::MaxPool {
                    kernel: *kernel,
                    stride: *stride,
                    padding: *padding,
                }
            }
            LayerDesc::Flatten => Layer::Flatten,
        });
        if flat == 0 {
            // Validate the prefix to learn the current shape (cheap: no weights are copied).
            let net = Network::new(desc.input, layers.clone())?;
            let s = net.shapes().last().copied().unwrap_or(desc.input.shape);
            (ch, flat) = (s.c, s.len());
        }
    }
    Network::new(desc.input, layers)
}

/// Loads `DIR/she.json` and `DIR/weights.safetensors`.
pub fn load(dir: &Path) -> Result<(Network, Description), Error> {
    let desc_path = dir.join("she.json");
    let desc: Description = serde_json::from_slice(&read_capped(&desc_path, MAX_JSON_BYTES)?)?;
    let weights = read_capped(&dir.join("weights.safetensors"), MAX_WEIGHT_BYTES)?;
    let net = from_parts(&desc, &weights)?;
    Ok((net, desc))
}

/// Labelled test samples (`x`: i64 [n, input_len], `y`: i64 [n]) from a safetensors file.
pub fn load_samples(path: &Path, input_len: usize) -> Result<(Vec<Vec<i64>>, Vec<i64>), Error> {
    let bytes = read_capped(path, MAX_WEIGHT_BYTES)?;
    let st = SafeTensors::deserialize(&bytes)?;
    let n = st.tensor("y")?.shape().first().copied().unwrap_or(0);
    let y = tensor(&st, "y", Dtype::I64, &[n])?;
    let x = tensor(&st, "x", Dtype::I64, &[n, input_len])?;
    Ok((x.chunks(input_len.max(1)).map(<[i64]>::to_vec).collect(), y))
}
