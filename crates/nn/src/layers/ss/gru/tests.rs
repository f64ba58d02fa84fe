#![allow(clippy::unwrap_used)]
use super::*;
use crate::model::format::const_format;
use crate::reference::{argmax, SmoothActivations};
use secinfer_net::simulate;
use secinfer_ss::ring::to_signed;

const MAIN: Format = const_format(20, 12);

fn shape(candidate: Candidate) -> GruShape {
    GruShape {
        input: 5,
        hidden: 8,
        steps: 4,
        classes: 3,
        main: MAIN,
        candidate,
    }
}

fn input(sh: &GruShape, seed: u64) -> Vec<i64> {
    let mut s = seed | 1;
    (0..sh.steps * sh.input)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s % (1 << 13)) as i64 - (1 << 12)
        })
        .collect()
}

fn open(a: &[u64], b: &[u64], bits: u32) -> Vec<i64> {
    a.iter()
        .zip(b)
        .map(|(x, y)| to_signed(x.wrapping_add(*y) & mask(bits), bits))
        .collect()
}

/// The secure GRU on ss equals the reference step by step: from the opened previous state, gh
/// bit for bit; r and z within 4 ULP of the exact sigmoid (OPAF's largest stated bound); n bit
/// for bit from the opened r (ReLU) or within 4 ULP of tanh; the next state bit for bit from the
/// opened z and n; the logits bit for bit from the last state. Both candidates, both maths.
#[test]
fn secure_gru_steps_equal_the_reference() {
    for (cand, imp) in [
        (Candidate::Relu, Impl::Opaf),
        (Candidate::Relu, Impl::Sirnn),
        (Candidate::Tanh, Impl::Opaf),
    ] {
        let sh = shape(cand);
        let m = random_gru(sh, 0x5eed).unwrap();
        let x = input(&sh, 0xabc);
        let (_, _, counters) = m.reference(&x);
        assert_eq!(counters.overflows, 0, "the test model must stay in range");
        let xs: Vec<u64> = x.iter().map(|v| from_signed(*v, MAIN.bits)).collect();
        let run = |party: Party| {
            let (m, xs) = (&m, &xs);
            move |ch: &mut secinfer_net::DynChannel| {
                let mut ctx = Ctx::setup(party, ch).unwrap();
                let mut tr = GruTrace::default();
                let (model, x): (_, &[u64]) = match party {
                    Party::Server => (Some(m), &[]),
                    Party::Client => (None, xs),
                };
                let lg = gru_online(&mut ctx, ch, &sh, imp, model, x, Some(&mut tr)).unwrap();
                (lg, tr)
            }
        };
        let r = simulate(run(Party::Client), run(Party::Server));
        let ((lc, tc), (ls, ts)) = (r.client.output, r.server.output);
        let l = MAIN.bits + MAIN.scale;
        let hid = sh.hidden;
        let af = m.fp().sigmoid_format();
        let mut cnt = Counters::default();
        let mut a = Arith {
            main: MAIN,
            acts: &ExactActivations,
            counters: &mut cnt,
        };
        let mut h = vec![0i64; hid];
        let mut worst = 0f64;
        for t in 0..sh.steps {
            let gi = a.linear(&m.w_ih, &m.b_ih, &x[t * sh.input..(t + 1) * sh.input]);
            let gh = a.linear(&m.w_hh, &m.b_hh, &h);
            assert_eq!(
                open(&tc.gh[t], &ts.gh[t], l),
                gh,
                "{cand:?} {imp:?} step {t}: gh"
            );
            let rz = open(&tc.rz[t], &ts.rz[t], MAIN.bits);
            for i in 0..2 * hid {
                let want = ExactActivations.sigmoid(a.wrap(gi[i] + gh[i]), af);
                worst = worst.max((rz[i] - want).abs() as f64);
            }
            let n = open(&tc.n[t], &ts.n[t], l);
            for i in 0..hid {
                let rh = a.wrap((rz[i] * gh[2 * hid + i]) >> MAIN.scale);
                let an = a.wrap(gi[2 * hid + i] + rh);
                match cand {
                    Candidate::Relu => assert_eq!(n[i], an.max(0), "step {t}: n"),
                    Candidate::Tanh => {
                        let want = ExactActivations.tanh(an, af);
                        worst = worst.max((n[i] - want).abs() as f64);
                    }
                }
            }
            let next = open(&tc.h[t], &ts.h[t], l);
            for i in 0..hid {
                let d = a.wrap(h[i] - n[i]);
                let zd = a.wrap((rz[hid + i] * d) >> MAIN.scale);
                assert_eq!(next[i], a.wrap(n[i] + zd), "{cand:?} {imp:?} step {t}: h");
            }
            h = next;
        }
        assert!(worst <= 4.0, "{cand:?} {imp:?}: {worst} ULP");
        assert!(h.iter().any(|v| *v != 0), "vacuous: the state stayed zero");
        assert_eq!(open(&lc, &ls, MAIN.bits), a.linear(&m.w_fc, &m.b_fc, &h));
        assert_eq!(a.counters.overflows, 0);
    }
}

/// A whole run (pools sized by the dry run, argmax on shares) gives the client the reference's
/// class, and the server nothing.
#[test]
fn whole_gru_run_gives_the_reference_class() {
    let sh = shape(Candidate::Relu);
    let m = random_gru(sh, 0x77).unwrap();
    let x = input(&sh, 0x99);
    let (_, want, _) = m.reference(&x);
    let mut sorted = want.clone();
    sorted.sort_unstable();
    let margin = sorted[sh.classes - 1] - sorted[sh.classes - 2];
    assert!(margin > 64, "margin {margin}: take another seed");
    let (mr, xr) = (&m, &x);
    let src = CotSource::Iknp;
    let r = simulate(
        move |ch| run_gru(Party::Client, ch, &sh, Impl::Opaf, src, None, Some(xr)).unwrap(),
        move |ch| run_gru(Party::Server, ch, &sh, Impl::Opaf, src, Some(mr), None).unwrap(),
    );
    assert_eq!(r.client.output.class, Some(argmax(&want)));
    assert!(r.server.output.class.is_none());
}
