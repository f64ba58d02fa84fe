//! One driver for every family: CHOCO's network and OPAF's FastGRNN run through the same
//! `ServerSession` / `ClientSession` as the GRU, picked by the plan; the client's class equals
//! the plaintext fixed-point reference's, both sides meter the same bytes on the channel, the
//! server's report is the family's own, and the logits policy is the session's.
#![allow(clippy::unwrap_used, reason = "tests: a panic is the failure report")]
use secinfer_net::simulate;
use secinfer_nn::info::ModelInfo;
use secinfer_nn::layers::gru::{ClientOptions, ServerPolicy};
use secinfer_nn::plan::{Family, PlanOptions};
use secinfer_nn::runtime::{
    ClientInput, ClientSession, Detail, RunOptions, ServedDetail, ServerOptions, ServerSession,
};
use secinfer_nn::{argmax, ErrorKind, ExactActivations, GraphReference, Input, Model};
use std::path::PathBuf;

fn model_dir(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../models")
        .join(name)
}

/// The first shipped sample of `m` in the main format, and the reference's class.
fn first_sample(name: &str, m: &Model) -> (Vec<i64>, usize) {
    let main = m.config.fixed_point.main;
    let text = std::fs::read_to_string(model_dir(name).join("samples.jsonl")).unwrap();
    let j: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    let x: Vec<i64> = j["input"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| main.quantize(v.as_f64().unwrap()))
        .collect();
    let q = secinfer_nn::QuantizedGraph::new(m, m.config.fixed_point).unwrap();
    let outs = GraphReference::new(&q, ExactActivations)
        .run(Input::Fixed(&x))
        .unwrap();
    // Both graphs end in an argmax.
    let class = outs.last().unwrap()[0] as usize;
    assert_eq!(class, argmax(&outs[outs.len() - 2]));
    (x, class)
}

/// Prepares both sides of `name` under `family` (the plan's choice when `None`).
fn sessions(name: &str, family: Option<Family>) -> (Model, ServerSession, ClientSession) {
    let m = Model::load(model_dir(name)).unwrap();
    let opts = ServerOptions {
        plan: PlanOptions { family },
        ..ServerOptions::default()
    };
    let server = ServerSession::prepare(&m, &opts).unwrap();
    let info = ModelInfo::load(model_dir(name)).unwrap();
    let client = ClientSession::prepare(&info, &opts).unwrap();
    (m, server, client)
}

#[test]
fn choco_runs_through_the_driver_and_equals_the_reference() {
    let (m, server, client) = sessions("mnist-mlp", Some(Family::Choco));
    assert_eq!(
        (server.family(), client.family()),
        (Family::Choco, Family::Choco)
    );
    let (x, want) = first_sample("mnist-mlp", &m);
    let run = RunOptions {
        threads: Some(1),
        ..RunOptions::default()
    };
    let r = simulate(
        |ch| client.run(ch, ClientInput::Fixed(&x), &run, &mut |_, _, _| {}),
        |ch| server.serve_one(ch, ServerPolicy::default(), &|_| {}),
    );
    let (o, s) = (r.client.output.unwrap(), r.server.output.unwrap());
    assert_eq!(o.class, want);
    let Detail::Choco(c) = &o.detail else {
        panic!("not a CHOCO outcome")
    };
    assert_eq!(c.class, Some(want));
    let ServedDetail::Choco(sc) = &s.detail else {
        panic!("not a CHOCO report")
    };
    assert!(sc.flood_stat_bits >= 40.0);
    assert_eq!(sc.ciphertexts_in, c.cost.ciphertexts_up);
    let (ct, st) = (o.report.cost.total(), s.report.cost.total());
    assert_eq!(
        (ct.bytes_sent, ct.bytes_received),
        (st.bytes_received, st.bytes_sent)
    );
    assert!(
        s.to_string()
            .contains("revealed every intermediate activation"),
        "{s}"
    );
}

#[test]
fn the_plan_sends_a_fastgrnn_to_family_ss_and_the_policy_is_the_sessions() {
    let (m, server, client) = sessions("mnist-fastgrnn", None);
    assert_eq!((server.family(), client.family()), (Family::Ss, Family::Ss));
    let (x, want) = first_sample("mnist-fastgrnn", &m);
    let asks = |logits: bool| RunOptions {
        protocol: ClientOptions {
            reveal_logits: logits,
            ..ClientOptions::default()
        },
        ..RunOptions::default()
    };
    let run = asks(false);
    let r = simulate(
        |ch| client.run(ch, ClientInput::Fixed(&x), &run, &mut |_, _, _| {}),
        |ch| server.serve_one(ch, ServerPolicy::default(), &|_| {}),
    );
    let (o, s) = (r.client.output.unwrap(), r.server.output.unwrap());
    assert_eq!(o.class, want);
    assert!(o.logits.is_none() && !s.report.logits_revealed);
    assert!(matches!(o.detail, Detail::Ss(_)));
    let (ct, st) = (o.report.cost.total(), s.report.cost.total());
    assert_eq!(
        (ct.bytes_sent, ct.bytes_received),
        (st.bytes_received, st.bytes_sent)
    );
    let line = s.to_string();
    assert!(
        line.starts_with("math opaf, ") && line.ends_with("revealed class"),
        "{line}"
    );
    // The same prepared server refuses the logits under one policy and shows them under another.
    let run = asks(true);
    let r = simulate(
        |ch| client.run(ch, ClientInput::Fixed(&x), &run, &mut |_, _, _| {}),
        |ch| server.serve_one(ch, ServerPolicy::default(), &|_| {}),
    );
    assert_eq!(r.client.output.err().unwrap().kind(), ErrorKind::Refused);
    assert_eq!(r.server.output.err().unwrap().kind(), ErrorKind::Refused);
    let r = simulate(
        |ch| client.run(ch, ClientInput::Fixed(&x), &run, &mut |_, _, _| {}),
        |ch| server.serve_one(ch, ServerPolicy { allow_logits: true }, &|_| {}),
    );
    let (o, s) = (r.client.output.unwrap(), r.server.output.unwrap());
    assert_eq!(o.logits.map(|l| argmax(&l)), Some(want));
    assert!(s.to_string().ends_with("revealed class and logits"), "{s}");
}
