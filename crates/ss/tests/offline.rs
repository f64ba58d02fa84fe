//! The offline/online split: a dry run counts exactly what the online phase consumes, the pools
//! filled from it are used up with nothing refilled online, and the online traffic stays within
//! the budget.
#![allow(clippy::unwrap_used)]
mod common;
use common::*;
use secinfer_net::{simulate, Channel, Phase};
use secinfer_ss::math::{self, Impl};
use secinfer_ss::ring::Fixed;
use secinfer_ss::ulp::{inputs, MathFn};
use secinfer_ss::{plan_for, plan_for_elementwise, Ctx, Party, Plan};

struct Split {
    plan: Plan,
    consumed: Plan,
    left: Option<Plan>,
    online_bytes: u64,
    offline_bytes: u64,
    online_rounds: u64,
}

/// Dry run, then setup → preprocess (offline) → the function (online), as `bench math` does.
fn split_run(f: MathFn, imp: Impl, inp: Fixed, out: Fixed, n: usize) -> (Split, Split) {
    let xs = inputs(f, inp, n);
    let mut rng = Rng(0x0ff1);
    let (ss, cs) = split(&xs, inp.bits, &mut rng);
    let side = |party: Party, ch: &mut secinfer_net::DynChannel, mine: &[u64]| {
        let plan = plan_for(party, |c, dry| {
            math::evaluate(c, dry, f, imp, &vec![0; mine.len()], inp, out)
        })
        .unwrap();
        let mut ctx = Ctx::setup(party, ch).unwrap();
        ch.set_phase(Phase::Offline);
        ctx.preprocess(ch, plan).unwrap();
        ch.set_phase(Phase::Online);
        math::evaluate(&mut ctx, ch, f, imp, mine, inp, out).unwrap();
        ch.flush().unwrap();
        let c = ch.cost();
        Split {
            plan,
            consumed: ctx.consumed(),
            left: ctx.pool_available(),
            online_bytes: c.online.bytes(),
            offline_bytes: c.offline.bytes(),
            online_rounds: c.online.rounds,
        }
    };
    let r = simulate(
        |ch| side(Party::Client, ch, &cs),
        |ch| side(Party::Server, ch, &ss),
    );
    (r.client.output, r.server.output)
}

fn cases() -> Vec<(MathFn, Impl)> {
    let mut v = Vec::new();
    for f in [MathFn::ExpNeg, MathFn::Sigmoid, MathFn::Tanh, MathFn::Relu] {
        for imp in [Impl::Opaf, Impl::Sirnn] {
            v.push((f, imp));
        }
    }
    v.push((MathFn::Exp, Impl::Opaf));
    v
}

#[test]
fn dry_run_counts_exactly_what_online_consumes() {
    for (f, imp) in cases() {
        let (inp, out) = math::default_formats(f);
        let (c, s) = split_run(f, imp, inp, out, 300);
        let name = format!("{} {}", imp.name(), f.name());
        assert_eq!(c.plan, s.plan, "{name}: the parties' dry runs disagree");
        assert_eq!(c.consumed, c.plan, "{name}: client consumed ≠ plan");
        assert_eq!(s.consumed, s.plan, "{name}: server consumed ≠ plan");
        let zero = Plan::default();
        assert_eq!(c.left, Some(zero), "{name}: client pool not used up");
        assert_eq!(s.left, Some(zero), "{name}: server pool not used up");
        assert!(c.offline_bytes > 0, "{name}: nothing precomputed");
    }
}

/// With the pools filled offline, OPAF sigmoid's online traffic is at most 1 KB per element
/// (the budget) and below SIRNN's; every OPAF function consumes fewer OTs than SIRNN's.
#[test]
fn online_budget_and_opaf_below_sirnn() {
    let n = 512;
    for f in [MathFn::ExpNeg, MathFn::Sigmoid, MathFn::Tanh] {
        let (inp, out) = math::default_formats(f);
        let (o, _) = split_run(f, Impl::Opaf, inp, out, n);
        let (s, _) = split_run(f, Impl::Sirnn, inp, out, n);
        let per = |x: &Split| x.online_bytes as f64 / n as f64;
        eprintln!(
            "{}: online B/elem opaf {:.0} sirnn {:.0}; COTs opaf {:?} sirnn {:?}; rounds {} vs {}",
            f.name(),
            per(&o),
            per(&s),
            o.plan,
            s.plan,
            o.online_rounds,
            s.online_rounds
        );
        assert!(per(&o) < per(&s), "{}: OPAF online bytes", f.name());
        let tot = |p: &Plan| p.cots_from_p0 + p.cots_from_p1;
        assert!(tot(&o.plan) < tot(&s.plan), "{}: OPAF OTs", f.name());
        if f == MathFn::Sigmoid {
            assert!(per(&o) <= 1024.0, "sigmoid online {} B/elem", per(&o));
        }
    }
}

/// `bench math` sizes the offline phase from dry runs of 1 and 2 elements: for every function
/// and both parties that is exactly the full dry run's plan.
#[test]
fn elementwise_plan_equals_the_full_dry_run() {
    for (f, imp) in cases() {
        let (inp, out) = math::default_formats(f);
        for party in [Party::Client, Party::Server] {
            for n in [3usize, 300, 1000] {
                let zeros = vec![0u64; n];
                let full = plan_for(party, |c, dry| {
                    math::evaluate(c, dry, f, imp, &zeros, inp, out)
                })
                .unwrap();
                let quick = plan_for_elementwise(party, n, |c, dry, m| {
                    math::evaluate(c, dry, f, imp, &zeros[..m], inp, out)
                })
                .unwrap();
                assert_eq!(quick, full, "{} {} {party:?} n {n}", imp.name(), f.name());
            }
        }
    }
}
