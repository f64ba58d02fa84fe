//! The Rust reference against the Python reference's conformance vectors, the tokeniser against
//! the shipped samples, and the validation of broken model directories.
#![allow(clippy::unwrap_used, reason = "tests: a panic is the failure report")]
use secinfer_nn::{
    words_v1, ExactActivations, Model, ModelConfig, NnError, QuantizedModel, Reference,
};
use serde_json::Value;
use std::path::PathBuf;

fn model_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../models/imdb-relu-gru")
}

fn vectors() -> Value {
    serde_json::from_str(
        &std::fs::read_to_string(model_dir().join("fixedpoint-vectors.json")).unwrap(),
    )
    .unwrap()
}

fn tokens_of(v: &Value) -> Vec<Vec<u32>> {
    v["tokens"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            r.as_array()
                .unwrap()
                .iter()
                .map(|t| t.as_u64().unwrap() as u32)
                .collect()
        })
        .collect()
}

#[test]
fn rust_reference_equals_python_reference_on_shipped_vectors() {
    let model = Model::load(model_dir()).unwrap();
    let v = vectors();
    let tokens = tokens_of(&v);
    let presets = v["logits"].as_object().unwrap();
    assert!(presets.contains_key("fx20") && presets.contains_key("fx8"));
    for (preset, expected) in presets {
        let fp = *model.config.fixed_point_named(Some(preset)).unwrap();
        let q = QuantizedModel::new(&model, fp).unwrap();
        let mut r = Reference::new(&q, ExactActivations);
        for (i, toks) in tokens.iter().enumerate() {
            let logits = r.classify(toks);
            let want: Vec<i64> = expected[i]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_i64().unwrap())
                .collect();
            assert_eq!(logits, want, "preset {preset}, sample {i}");
        }
        let want_overflows = v["overflows"][preset].as_u64().unwrap();
        assert_eq!(r.counters.overflows, want_overflows, "preset {preset}");
    }
}

#[test]
fn tokenizer_reproduces_the_vectors_tokens_from_the_sample_texts() {
    let model = Model::load(model_dir()).unwrap();
    let vocab = model.vocab.as_ref().unwrap();
    let samples = std::fs::read_to_string(model_dir().join("samples.jsonl")).unwrap();
    let texts: Vec<String> = samples
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["text"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    let expected = tokens_of(&vectors());
    assert_eq!(texts.len(), expected.len());
    for (t, e) in texts.iter().zip(&expected) {
        assert_eq!(&vocab.encode(t), e);
    }
}

#[test]
fn words_v1_follows_the_spec_example() {
    assert_eq!(
        words_v1("I didn't LIKE it.<br />Ten/10, café!"),
        ["i", "didn", "t", "like", "it", "ten", "10", "caf"]
    );
    assert_eq!(
        words_v1("a<BR>b<br/>c<br \t />d<bx>"),
        ["a", "b", "c", "d", "bx"]
    );
    assert_eq!(words_v1("<br"), ["br"]);
    assert!(words_v1("").is_empty());
}

fn config_json() -> Value {
    serde_json::from_str(&std::fs::read_to_string(model_dir().join("model.json")).unwrap()).unwrap()
}

fn parse_err(v: &Value) -> String {
    match ModelConfig::parse(&v.to_string()) {
        Err(e) => e.to_string(),
        Ok(_) => panic!("expected an error for {v}"),
    }
}

#[test]
fn broken_configs_are_rejected_with_the_field_named() {
    let mut v = config_json();
    v["version"] = 3.into();
    assert!(parse_err(&v).contains("version"));
    // Version 2 reads typed layers that start with an input layer.
    let mut v = config_json();
    v["version"] = 2.into();
    assert!(parse_err(&v).contains("layers[0] (embed): the first layer must be of type input"));
    let mut v = config_json();
    v["layers"][1]["activation"] = "gelu".into();
    assert!(parse_err(&v).contains("gru.activation"));
    let mut v = config_json();
    v["layers"][1]["input"] = 31.into();
    let e = parse_err(&v);
    assert!(e.contains("(gru)") && e.contains("input = 31"), "{e}");
    let mut v = config_json();
    v["fixed_point"]["bits"] = 40.into();
    assert!(parse_err(&v).contains("fixed_point.bits"));
    let mut v = config_json();
    v["fixed_point_variants"]["fx8"]["activations"]["sigmoid"]["input"]["frac_bits"] = 13.into();
    assert!(parse_err(&v).contains("fixed_point_variants.fx8.activations.sigmoid"));
    // A scale not below the bitwidth fails `Format::new`: the format's typed error, with the
    // object at fault, of kind BadModel.
    let mut v = config_json();
    v["fixed_point"]["frac_bits"] = 20.into();
    match ModelConfig::parse(&v.to_string()) {
        Err(e @ NnError::Format { .. }) => {
            assert_eq!(e.kind(), secinfer_nn::ErrorKind::BadModel);
            let NnError::Format { what, source } = e else {
                unreachable!()
            };
            assert_eq!(what, "fixed_point");
            assert_eq!(
                source,
                secinfer_core::FormatError::Scale {
                    bits: 20,
                    scale: 20
                }
            );
        }
        other => panic!("expected the format's error, got {other:?}"),
    }
    let mut v = config_json();
    v["vocab"]["file"] = "../secret".into();
    assert!(parse_err(&v).contains("vocab.file"));
    let mut v = config_json();
    v["labels"] = serde_json::json!(["only-one"]);
    assert!(parse_err(&v).contains("labels"));
    // Unknown top-level fields are ignored (forward compatibility).
    let mut v = config_json();
    v["future_field"] = 1.into();
    ModelConfig::parse(&v.to_string()).unwrap();
}

#[test]
fn weights_with_wrong_shape_name_the_tensor() {
    let dir = tempdir("wrong-shape");
    for f in ["model.json", "vocab.json"] {
        std::fs::copy(model_dir().join(f), dir.join(f)).unwrap();
    }
    let mut v = config_json();
    v["layers"][1]["hidden"] = 63.into();
    v["layers"][2]["input"] = 63.into();
    std::fs::write(dir.join("model.json"), v.to_string()).unwrap();
    std::fs::copy(
        model_dir().join("weights.safetensors"),
        dir.join("weights.safetensors"),
    )
    .unwrap();
    match Model::load(&dir) {
        Err(NnError::Tensor {
            file,
            tensor,
            problem,
        }) => {
            assert_eq!(file, "weights.safetensors");
            assert_eq!(tensor, "gru.weight_ih");
            assert!(problem.contains("shape"), "{problem}");
        }
        Err(e) => panic!("wrong error: {e}"),
        Ok(_) => panic!("a 63-wide GRU must not load 64-wide weights"),
    }
    std::fs::write(
        dir.join("weights.safetensors"),
        b"\xff\xff\xff\xff\xff\xff\xff\x7fgarbage",
    )
    .unwrap();
    let e = Model::load(&dir).err();
    assert!(matches!(e, Some(NnError::Safetensors { .. })), "{e:?}");
    assert_eq!(e.map(|e| e.kind()), Some(secinfer_nn::ErrorKind::BadModel));
    std::fs::remove_dir_all(&dir).unwrap();
}

fn tempdir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("secinfer-nn-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Weights beyond a format are reported by tensor name and count; the shipped model's own
/// format holds all of its weights.
#[test]
fn tensors_beyond_the_format_are_named() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../models/mnist-mlp");
    let m = secinfer_nn::Model::load(dir).unwrap();
    assert!(m.tensors.saturating(m.config.fixed_point.main).is_empty());
    // The same weights with a 1e30 and a −3e4 planted in fc2.weight and one 1e5 in fc3.bias.
    let mut map = std::collections::HashMap::new();
    for l in ["fc1", "fc2", "fc3"] {
        for part in ["weight", "bias"] {
            let t = m.tensors.get(l, part).unwrap();
            let mut data = t.data.clone();
            match (l, part) {
                ("fc2", "weight") => {
                    data[3] = 1e30;
                    data[7] = -3e4;
                }
                ("fc3", "bias") => data[0] = 1e5,
                _ => {}
            }
            let shape = t.shape.clone();
            map.insert(
                format!("{l}.{part}"),
                secinfer_nn::model::Tensor { shape, data },
            );
        }
    }
    let planted = secinfer_nn::Tensors::from_map(map, &m.config.graph).unwrap();
    let sat = planted.saturating(m.config.fixed_point.main);
    let want = vec![("fc2.weight".to_string(), 2), ("fc3.bias".to_string(), 1)];
    let (got, beyond) = (sat, want);
    assert_eq!(got, beyond);
}
