//! The public two-party entry point of the math functions: both parties over the net crate's
//! harness, the client's outputs against the plaintext functions, and both parties' meters.
#![allow(clippy::unwrap_used)]
use secinfer_net::simulate;
use secinfer_ss::math::Impl;
use secinfer_ss::session::{run_math, MathJob};
use secinfer_ss::ulp::{inputs, MathFn};
use secinfer_ss::{CotSource, ErrorKind, Party};

fn both(job: MathJob, n: usize) -> (secinfer_ss::session::MathRun, Vec<u64>) {
    let xs = inputs(job.func, job.input, n);
    let xr = &xs;
    let r = simulate(
        move |ch| run_math(Party::Client, ch, &job, Some(xr), xr.len()).unwrap(),
        move |ch| run_math(Party::Server, ch, &job, None, xr.len()).unwrap(),
    );
    let (c, s) = (r.client.output, r.server.output);
    // Only the client learns the outputs; both meters saw the same function traffic.
    assert!(s.outputs.is_none());
    assert_eq!(c.cost.online.bytes(), s.cost.online.bytes());
    assert_eq!(c.cost.offline.bytes(), s.cost.offline.bytes());
    assert!(c.cost.online.rounds > 0);
    assert_eq!(c.blocks, s.blocks);
    (c, xs)
}

#[test]
fn math_functions_match_the_plaintext_functions() {
    // (function, implementation, max ULP the papers' formats allow).
    for (f, imp, bound) in [
        (MathFn::Sigmoid, Impl::Opaf, 3.0),
        (MathFn::Tanh, Impl::Opaf, 3.0),
        (MathFn::Exp, Impl::Opaf, 3.0),
        (MathFn::Relu, Impl::Opaf, 0.0),
        (MathFn::Sigmoid, Impl::Sirnn, 2.0),
    ] {
        let job = MathJob::with_default_formats(f, imp, CotSource::SoftSpoken { k: 4 });
        let (run, xs) = both(job, 700);
        let st = run.ulp(&job, &xs).unwrap();
        assert_eq!(run.outputs.as_ref().map(Vec::len), Some(xs.len()));
        assert!(st.max <= bound, "{f:?} {imp:?}: max ulp {}", st.max);
        assert!(run.block_stats.values().map(|b| b.calls).sum::<u64>() > 0);
    }
}

#[test]
fn a_client_without_its_inputs_is_refused() {
    let job = MathJob::with_default_formats(MathFn::Relu, Impl::Opaf, CotSource::Iknp);
    let r = simulate(
        move |ch| run_math(Party::Client, ch, &job, Some(&[1, 2]), 3).err(),
        move |ch| run_math(Party::Server, ch, &job, None, 3).err(),
    );
    let e = r.client.output.expect("wrong input count");
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    // The server then finds the client gone.
    let e = r.server.output.expect("peer gone");
    assert_eq!(e.kind(), ErrorKind::PeerClosed, "{e}");
}
