//! Thousands of randomised kernel runs on real ciphertexts at the largest Table V shapes
//! (and the largest convolution that runs quickly here): no decryption failure, and the
//! minimum noise budget left after each kernel is reported. Scale with HE_NOISE_RUNS.

use rand_chacha::rand_core::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use secinfer_he::kernels::conv::reference;
use secinfer_he::kernels::{finish_outputs, Flood};
use secinfer_he::*;

fn rand_vec(rng: &mut ChaCha8Rng, n: usize, t: u64) -> Vec<u64> {
    (0..n).map(|_| rng.next_u64() % t).collect()
}

fn runs(default: usize) -> usize {
    std::env::var("HE_NOISE_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[test]
fn matvec_thousands_of_runs_no_failure() {
    let p = Params::by_name("n4096").expect("p");
    let t = p.t();
    let sk = SecretKey::generate(&p);
    let pk = sk.public_key();
    let mut rng = ChaCha8Rng::seed_from_u64(21);
    let mut total = 0;
    for (method, no, ni, count) in [
        (MatVecMethod::Gazelle, 1, 2048, runs(600)),
        (MatVecMethod::Gazelle, 16, 128, runs(600)),
        (MatVecMethod::Gala, 1, 2048, runs(1000)),
        (MatVecMethod::Gala, 16, 128, runs(1000)),
        (MatVecMethod::Naive, 1, 2048, runs(300)),
    ] {
        let plan = MatVecPlan::for_params(method, no, ni, &p).expect("plan");
        let keys = sk.rotation_keys(&plan.rotation_steps(), false);
        let ev = HeEvaluator::new(&p, &keys);
        let mut min_budget = f64::INFINITY;
        for _ in 0..count {
            let w: Vec<Vec<u64>> = (0..no).map(|_| rand_vec(&mut rng, ni, t)).collect();
            let x = rand_vec(&mut rng, ni, t);
            let pts = plan.prepare(&ev, &w).expect("prep");
            let inputs: Vec<Ciphertext> = plan
                .pack_input(&x)
                .expect("pack")
                .iter()
                .map(|v| sk.encrypt(v).expect("enc"))
                .collect();
            let outs = plan.eval(&ev, &pts, &inputs).expect("eval");
            for o in &outs {
                min_budget = min_budget.min(sk.noise_budget(o));
            }
            let res = finish_outputs(&p, &pk, &outs, Flood::BestEffort(40)).expect("finish");
            let dec: Vec<Vec<u64>> = res
                .responses
                .iter()
                .map(|r| sk.decrypt_response(r).expect("dec"))
                .collect();
            let yc = plan.extract(&dec, t).expect("x");
            let ys = plan.extract(&res.masks, t).expect("x");
            for (i, row) in w.iter().enumerate() {
                let y = (row
                    .iter()
                    .zip(&x)
                    .map(|(&a, &b)| a as u128 * b as u128 % t as u128)
                    .sum::<u128>()
                    % t as u128) as u64;
                assert_eq!(
                    (yc[i] + ys[i]) % t,
                    y,
                    "decryption failure: {method:?} {no}x{ni}"
                );
            }
            total += 1;
        }
        eprintln!("n4096 {method:?} {no}x{ni}: {count} runs, no failure, min noise budget left after kernel {min_budget:.1} bits");
        assert!(min_budget > 0.0);
    }
    assert!(total >= 3500 || std::env::var("HE_NOISE_RUNS").is_ok());
}

#[test]
fn conv_hundreds_of_runs_no_failure() {
    let p = Params::by_name("n4096").expect("p");
    let t = p.t();
    let sk = SecretKey::generate(&p);
    let pk = sk.public_key();
    let mut rng = ChaCha8Rng::seed_from_u64(22);
    for (method, (h, w, c, k, m), count) in [
        (ConvMethod::Gazelle, (16, 16, 16, 3, 16), runs(100)),
        (ConvMethod::Gala, (16, 16, 16, 3, 16), runs(100)),
        (ConvMethod::Gala, (8, 8, 16, 5, 16), runs(60)),
    ] {
        let plan = ConvPlan::new(method, h, w, c, m, k, p.row_len(), 2).expect("plan");
        let keys = sk.rotation_keys(&plan.rotation_steps(), false);
        let ev = HeEvaluator::new(&p, &keys);
        let mut min_budget = f64::INFINITY;
        for _ in 0..count {
            let x = rand_vec(&mut rng, h * w * c, t);
            let wts = rand_vec(&mut rng, m * c * k * k, t);
            let pts = plan.prepare(&ev, &wts).expect("prep");
            let inputs: Vec<Ciphertext> = plan
                .pack_input(&x)
                .expect("pack")
                .iter()
                .map(|v| sk.encrypt(v).expect("enc"))
                .collect();
            let outs = plan.eval(&ev, &pts, &inputs).expect("eval");
            for o in &outs {
                min_budget = min_budget.min(sk.noise_budget(o));
            }
            let res = finish_outputs(&p, &pk, &outs, Flood::BestEffort(40)).expect("finish");
            let dec: Vec<Vec<u64>> = res
                .responses
                .iter()
                .map(|r| sk.decrypt_response(r).expect("dec"))
                .collect();
            let yc = plan.extract(&dec, t).expect("x");
            let ys = plan.extract(&res.masks, t).expect("x");
            let y: Vec<u64> = yc.iter().zip(&ys).map(|(&a, &b)| (a + b) % t).collect();
            assert_eq!(
                y,
                reference(h, w, c, m, k, &x, &wts, t),
                "decryption failure: {method:?}"
            );
        }
        eprintln!("n4096 {method:?} conv {h}x{w}x{c} k{k} m{m}: {count} runs, no failure, min noise budget left after kernel {min_budget:.1} bits");
        assert!(min_budget > 0.0);
    }
}
