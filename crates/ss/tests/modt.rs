//! The nonlinear step on shares mod a prime t (`blocks::modt`) against its plaintext function,
//! two parties over real OT extension, on random shares and the extremes of both the shares
//! (0, t − 1) and the accumulators (0, ±1, values near ±t/2).
#![allow(clippy::unwrap_used)]
mod common;
use common::{run2, Rng};
use secinfer_ss::blocks::modt::{finish_modt, ModtStep};

/// n8192-t23's plaintext modulus (the hegc networks' shares).
const T: u64 = 8_380_417;

fn lift(v: u64, t: u64) -> i64 {
    if v > t / 2 {
        v as i64 - t as i64
    } else {
        v as i64
    }
}

/// Accumulators: extremes first, then random over the whole signed range.
fn accs(t: u64, n: usize, rng: &mut Rng) -> Vec<i64> {
    let h = ((t - 1) / 2) as i64;
    let mut v = vec![
        0,
        1,
        -1,
        h,
        -h,
        h - 1,
        -h + 1,
        64,
        -64,
        63,
        -65,
        1 << 14,
        -(1 << 14),
    ];
    while v.len() < n {
        let r = rng.next();
        v.push(match r % 4 {
            // Near ±t/2.
            0 => h - (r >> 8) as i64 % 256,
            1 => -h + (r >> 8) as i64 % 256,
            // Small values (no wrap into the format).
            2 => ((r >> 8) % (1 << 16)) as i64 - (1 << 15),
            _ => lift((r >> 8) % t, t),
        });
    }
    v.truncate(n);
    v
}

/// Server and client shares of `a` mod t, with the server's share 0, t − 1 or random.
fn share(a: &[i64], t: u64, rng: &mut Rng) -> (Vec<u64>, Vec<u64>) {
    a.iter()
        .enumerate()
        .map(|(i, x)| {
            let s = match i % 5 {
                0 => 0,
                1 => t - 1,
                _ => rng.next() % t,
            };
            let v = x.rem_euclid(t as i64) as u64;
            (s, (v + t - s) % t)
        })
        .unzip()
}

fn check(step: ModtStep, n: usize, seed: u64) {
    let mut rng = Rng(seed);
    let a = accs(step.t, n * step.window, &mut rng);
    let (s, c) = share(&a, step.t, &mut rng);
    let r = run2(|ctx, ch| {
        let mine = if ctx.is_p0() { &s } else { &c };
        finish_modt(ctx, ch, &step, mine).unwrap()
    });
    assert_eq!(r.client.len(), n);
    for i in 0..n {
        let got = lift((r.client[i] + r.server[i]) % step.t, step.t);
        let win = &a[i * step.window..(i + 1) * step.window];
        assert_eq!(got, step.reference(win), "{step:?} window {win:?}");
    }
}

#[test]
fn truncation_relu_and_pooling_equal_the_plaintext_function() {
    for (shift, bits, relu, window) in [
        (12, 16, true, 1),
        (12, 16, false, 1),
        (0, 16, true, 1),
        (8, 8, true, 1),
        (5, 11, false, 4),
        (12, 16, true, 4),
        (6, 10, true, 9),
        (3, 20, false, 3),
    ] {
        let step = ModtStep {
            t: T,
            shift,
            bits,
            relu,
            window,
        };
        check(step, 600, 7 + shift as u64 * 31 + window as u64);
    }
    // A small prime: every share pair of a few accumulators.
    let t = 1021;
    let step = ModtStep {
        t,
        shift: 2,
        bits: 6,
        relu: true,
        window: 1,
    };
    let a: Vec<i64> = (-510..=510).collect();
    for s0 in [0, 1, 510, 511, 1020] {
        let s: Vec<u64> = vec![s0; a.len()];
        let c: Vec<u64> = a
            .iter()
            .map(|x| (x.rem_euclid(t as i64) as u64 + t - s0) % t)
            .collect();
        let r = run2(|ctx, ch| {
            let mine = if ctx.is_p0() { &s } else { &c };
            finish_modt(ctx, ch, &step, mine).unwrap()
        });
        for (i, x) in a.iter().enumerate() {
            let got = lift((r.client[i] + r.server[i]) % t, t);
            assert_eq!(got, step.reference(&[*x]), "acc {x} s {s0}");
        }
    }
}

#[test]
fn bad_steps_and_unreduced_shares_are_refused() {
    let ok = ModtStep {
        t: T,
        shift: 12,
        bits: 16,
        relu: true,
        window: 1,
    };
    for bad in [
        ModtStep { t: 1 << 20, ..ok },
        ModtStep { bits: 22, ..ok },
        ModtStep { shift: 23, ..ok },
        ModtStep { window: 0, ..ok },
    ] {
        let r = run2(|ctx, ch| finish_modt(ctx, ch, &bad, &[1, 2]).map(|_| ()));
        assert!(r.client.is_err() && r.server.is_err(), "{bad:?}");
    }
    let r = run2(|ctx, ch| finish_modt(ctx, ch, &ok, &[T]).map(|_| ()));
    assert_eq!(
        r.client.unwrap_err().kind(),
        secinfer_core::ErrorKind::InvalidArgument
    );
    let r =
        run2(|ctx, ch| finish_modt(ctx, ch, &ModtStep { window: 4, ..ok }, &[1; 6]).map(|_| ()));
    assert!(r.server.is_err());
}
