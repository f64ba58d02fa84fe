//! The SS math library on SoftSpokenOT-filled pools: the outputs of IKNP-filled pools (up to the
//! probabilistic rounding),
//! the pools used up exactly, and the offline bytes of the fills cut by about k.
#![allow(clippy::unwrap_used)]
mod common;
use common::*;
use secinfer_net::{simulate, Channel, Phase};
use secinfer_ss::math::{self, Impl};
use secinfer_ss::ulp::{inputs, MathFn};
use secinfer_ss::{plan_for, CotSource, Ctx, Party, Plan};

/// Sigmoid (OPAF) on `n` inputs with the pools filled by `source`: the revealed outputs, the
/// client's offline and setup bytes, and what is left in the client's pools.
fn sigmoid_with(source: CotSource, n: usize) -> (Vec<u64>, u64, u64, Option<Plan>) {
    let f = MathFn::Sigmoid;
    let (inp, out) = math::default_formats(f);
    let xs = inputs(f, inp, n);
    let mut rng = Rng(0x550f);
    let (ss, cs) = split(&xs, inp.bits, &mut rng);
    let side = |party: Party, ch: &mut secinfer_net::DynChannel, mine: &[u64]| {
        let plan = plan_for(party, |c, dry| {
            math::evaluate(c, dry, f, Impl::Opaf, &vec![0; mine.len()], inp, out)
        })
        .unwrap();
        let mut ctx = Ctx::setup_with(party, ch, source).unwrap();
        ch.set_phase(Phase::Offline);
        ctx.preprocess(ch, plan).unwrap();
        ch.set_phase(Phase::Online);
        let y = math::evaluate(&mut ctx, ch, f, Impl::Opaf, mine, inp, out).unwrap();
        ch.flush().unwrap();
        let c = ch.cost();
        (y, c.offline.bytes(), c.setup.bytes(), ctx.pool_available())
    };
    let r = simulate(
        |ch| side(Party::Client, ch, &cs),
        |ch| side(Party::Server, ch, &ss),
    );
    let (yc, off, setup, left) = r.client.output;
    let (ys, ..) = r.server.output;
    (add_shares(&yc, &ys, out.bits), off, setup, left)
}

#[test]
fn sigmoid_on_softspoken_pools_matches_iknp_and_sends_less() {
    let n = 1000;
    let (y_iknp, off_iknp, setup_iknp, _) = sigmoid_with(CotSource::Iknp, n);
    for k in [1u32, 2, 4, 8] {
        let (y, off, setup, left) = sigmoid_with(CotSource::SoftSpoken { k }, n);
        // Truncations round probabilistically, so two honest runs may differ by an ULP or so;
        // a broken correlation would give garbage.
        assert_eq!(y.len(), y_iknp.len());
        let worst = y
            .iter()
            .zip(&y_iknp)
            .map(|(a, b)| a.abs_diff(*b))
            .max()
            .unwrap();
        assert!(
            worst <= 2,
            "k {k}: outputs {worst} ULP from the IKNP-filled run"
        );
        assert_eq!(left, Some(Plan::default()), "k {k}: pools not used up");
        // Both directions' fills shrink by k (the derandomisation-free offline traffic is all
        // COT fills, padded to 128 rows per call).
        let slack = 2 * 16 * 128 * 8; // a few padded 128-row blocks per fill
        assert!(
            off * u64::from(k) <= off_iknp + slack * u64::from(k),
            "k {k}: offline {off} vs IKNP {off_iknp}"
        );
        if k == 1 {
            assert_eq!(off, off_iknp, "k = 1 offline bytes differ from IKNP");
        }
        // One set of public-key base OTs, as with IKNP: setup grows only by the GGM message
        // and the 128 setup COTs' correction bits.
        assert!(
            setup < setup_iknp + 8192,
            "k {k}: setup {setup} vs {setup_iknp}"
        );
    }
}
