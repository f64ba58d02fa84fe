//! A model graph `input [T, n] → fastgrnn → dense (→ argmax)` as family `ss` runs it: the
//! public shape both parties derive from model.json, the server's quantized parameters from the
//! graph reference's own quantization (so a secure run and `GraphReference` compute the same
//! integers), and the client's input in the cell's format.
use super::fastgrnn::FastGrnnShape;
use crate::error::{NnError, Result};
use crate::model::{Format, LayerKind, Model, ModelConfig, Shape};
use crate::reference::fastgrnn::{
    check_head_format, rescale, FastGrnnParams, Head, ACT_BITS, ACT_SCALE, GRAPH_WEIGHT_SCALE,
};
use crate::reference::QuantizedGraph;

/// Whether the graph holds a fastgrnn layer (the models family `ss` serves).
pub fn is_fastgrnn_graph(config: &ModelConfig) -> bool {
    config
        .graph
        .layers
        .iter()
        .any(|l| matches!(l.kind, LayerKind::FastGrnn { .. }))
}

fn unsupported(msg: impl Into<String>) -> NnError {
    NnError::Unsupported(format!("family ss: {}", msg.into()))
}

/// The public shape of a `input [T, n] → fastgrnn (last state) → dense → argmax` graph in its
/// main format (which must meet the head's rule, [`check_head_format`]); anything else is
/// refused, naming the layer.
pub fn shape_of(config: &ModelConfig) -> Result<FastGrnnShape> {
    let layers = &config.graph.layers;
    let kinds: Vec<&LayerKind> = layers.iter().map(|l| &l.kind).collect();
    let (steps, dim) = match kinds.first() {
        Some(LayerKind::Input {
            shape: Shape::Seq {
                steps: Some(t),
                dim,
            },
            ..
        }) => (*t, *dim),
        _ => {
            return Err(unsupported(
                "the graph must start with an input of [steps, features]",
            ))
        }
    };
    let (input, hidden) = match kinds.get(1) {
        Some(LayerKind::FastGrnn {
            input,
            hidden,
            sequences: false,
            ..
        }) if *input == dim => (*input, *hidden),
        _ => {
            return Err(unsupported(format!(
                "layer {:?} must be a fastgrnn on {dim} features returning its last state",
                layers.get(1).map_or("", |l| l.name.as_str())
            )))
        }
    };
    let classes = match kinds.get(2) {
        Some(LayerKind::Dense { input, output }) if *input == hidden => *output,
        _ => {
            return Err(unsupported(format!(
                "layer {:?} must be a dense layer on the {hidden} states",
                layers.get(2).map_or("", |l| l.name.as_str())
            )))
        }
    };
    match kinds.get(3..) {
        Some([]) | Some([LayerKind::Argmax]) => {}
        _ => {
            return Err(unsupported(
                "only an argmax may follow the dense layer (FastGRNN → Dense → argmax)",
            ))
        }
    }
    let head = config.fixed_point.main;
    check_head_format(head)?;
    Ok(FastGrnnShape {
        input,
        hidden,
        steps,
        classes,
        weight_scale: GRAPH_WEIGHT_SCALE,
        head,
    })
}

/// The server's parameters of a graph [`shape_of`] accepts: the cell as the graph reference
/// quantizes it and the dense layer in the main format as its head.
pub fn params_of(model: &Model) -> Result<(FastGrnnShape, FastGrnnParams)> {
    let shape = shape_of(&model.config)?;
    let q = QuantizedGraph::new(model, model.config.fixed_point)?;
    let cell = q
        .fastgrnn(1)
        .ok_or_else(|| unsupported("layer 1 has no fastgrnn parameters"))?;
    let (w, b) = q
        .affine(2)
        .ok_or_else(|| unsupported("layer 2 has no dense parameters"))?;
    let p = FastGrnnParams {
        head: Head {
            classes: shape.classes,
            w: w.to_vec(),
            b: b.to_vec(),
            format: shape.head,
        },
        ..cell.clone()
    };
    p.validate()?;
    Ok((shape, p))
}

/// The client's main-format sequence in the cell's format, as the graph reference converts it:
/// rescaled to scale 9 and clamped to 16 bits.
pub fn client_sequence(x: &[i64], main: Format) -> Vec<i64> {
    let lim = 1i64 << (ACT_BITS - 1);
    x.iter()
        .map(|v| rescale(*v, main.scale, ACT_SCALE).clamp(-lim, lim - 1))
        .collect()
}
