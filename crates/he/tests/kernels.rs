//! Linear kernels: shares sum to W·x (or the convolution) mod t, on plaintext slot vectors
//! and on real ciphertexts; operation counts equal GALA's Tables V and VII.

use rand_chacha::rand_core::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use secinfer_he::kernels::conv::reference;
use secinfer_he::kernels::{finish_outputs, Flood};
use secinfer_he::*;

fn rand_vec(rng: &mut ChaCha8Rng, n: usize, t: u64) -> Vec<u64> {
    (0..n).map(|_| rng.next_u64() % t).collect()
}

fn matvec_ref(w: &[Vec<u64>], x: &[u64], t: u64) -> Vec<u64> {
    w.iter()
        .map(|r| {
            (r.iter()
                .zip(x)
                .map(|(&a, &b)| a as u128 * b as u128 % t as u128)
                .sum::<u128>()
                % t as u128) as u64
        })
        .collect()
}

fn counts_matvec(method: MatVecMethod, rows: usize, cols: usize, slots: usize) -> OpCounts {
    let ev = CountingEvaluator::new(slots, 1);
    let plan = MatVecPlan::new(method, rows, cols, slots, 1).expect("plan");
    let w = vec![vec![0u64; cols]; rows];
    let pts = plan.prepare(&ev, &w).expect("prep");
    let inputs = vec![(); plan.col_chunks];
    plan.eval(&ev, &pts, &inputs).expect("eval");
    ev.counter().snapshot()
}

#[test]
fn table_v_counts_at_2048_slots() {
    // (n_o, n_i, GAZELLE (Perm, HstPerm, ScMult, Add), GALA (Perm, HstPerm, ScMult, Add)).
    let table = [
        (1, 2048, (11, 0, 1, 11), (0, 0, 1, 0)),
        (2, 1024, (10, 0, 1, 10), (0, 0, 1, 0)),
        (16, 128, (7, 0, 1, 7), (0, 0, 1, 0)),
    ];
    for (no, ni, gz, ga) in table {
        let c = counts_matvec(MatVecMethod::Gazelle, no, ni, 2048);
        assert_eq!(
            (c.perm, c.hst_perm, c.sc_mult, c.add),
            gz,
            "GAZELLE {no}x{ni}"
        );
        assert_eq!(c.dec_perm, 0);
        let c = counts_matvec(MatVecMethod::Gala, no, ni, 2048);
        assert_eq!((c.perm, c.hst_perm, c.sc_mult, c.add), ga, "GALA {no}x{ni}");
        assert_eq!(c.dec_perm, 0);
    }
    // Naive: n_o ScMult, n_o·log2(n_i) Perm and Add.
    let c = counts_matvec(MatVecMethod::Naive, 16, 128, 2048);
    assert_eq!((c.perm, c.sc_mult, c.add), (16 * 7, 16, 16 * 7));
    // GALA's Table II formulas beyond n_i·n_o = n: 128×2048 → g = 128 diagonals.
    let c = counts_matvec(MatVecMethod::Gala, 128, 2048, 2048);
    assert_eq!((c.perm, c.hst_perm, c.sc_mult, c.add), (127, 0, 128, 127));
    let c = counts_matvec(MatVecMethod::Gazelle, 128, 2048, 2048);
    assert_eq!(
        (c.perm, c.hst_perm, c.dec_perm, c.sc_mult, c.add),
        (4, 127, 1, 128, 127 + 4)
    );
}

fn counts_conv(
    method: ConvMethod,
    hw: usize,
    c: usize,
    k: usize,
    m: usize,
    slots: usize,
) -> OpCounts {
    let ev = CountingEvaluator::new(slots, 1);
    let plan = ConvPlan::new(method, hw, hw, c, m, k, slots, 1).expect("plan");
    let wts = vec![0u64; m * c * k * k];
    let pts = plan.prepare(&ev, &wts).expect("prep");
    let inputs = vec![(); plan.in_cts];
    plan.eval(&ev, &pts, &inputs).expect("eval");
    ev.counter().snapshot()
}

#[test]
fn table_vii_counts_at_2048_slots() {
    // Table VII lists "DecPerm" and "HstPerm" with each stand-alone Perm counted as one DecPerm
    // plus one HstPerm; OpCounts::table_vii_* apply that convention.
    // (H=W, C, K, M, GAZELLE (DecPerm, HstPerm, ScMult, Add), GALA (...)).
    let table = [
        (
            16,
            128,
            1,
            128,
            (1792, 1792, 2048, 2032),
            (112, 112, 2048, 2032),
        ),
        (
            16,
            128,
            3,
            128,
            (1808, 1920, 18432, 18416),
            (128, 240, 18432, 18416),
        ),
        (
            16,
            2048,
            5,
            64,
            (14592, 20480, 409600, 409592),
            (312, 6200, 409600, 409592),
        ),
    ];
    for (hw, c, k, m, gz, ga) in table {
        let r = counts_conv(ConvMethod::Gazelle, hw, c, k, m, 2048);
        assert_eq!(
            (
                r.table_vii_dec_perm(),
                r.table_vii_hst_perm(),
                r.sc_mult,
                r.add
            ),
            gz,
            "GAZELLE {hw}x{hw}@{c} {k}x{k}@{m}"
        );
        let r = counts_conv(ConvMethod::Gala, hw, c, k, m, 2048);
        assert_eq!(
            (
                r.table_vii_dec_perm(),
                r.table_vii_hst_perm(),
                r.sc_mult,
                r.add
            ),
            ga,
            "GALA {hw}x{hw}@{c} {k}x{k}@{m}"
        );
    }
    // 16×16@2048 with 1×1@512: ScMult (131072) and GAZELLE's HstPerm (114688) match the paper.
    // Its other cells do not follow from its own Table III formulas (which its three other rows
    // obey): Add = C_i·C_o·f²/c_n − C_o/c_n = 131008 (paper 130944); GAZELLE Perm =
    // C_i·C_o/c_n²·(c_n − 1) = 114688 with no input DecPerm for a 1×1 kernel, as in its 1×1@128
    // row (paper DecPerm 114944); GALA Perm = C_o/c_n·(c_n − 1) = 448 (paper DecPerm 2048,
    // HstPerm 1792). We assert the formulas.
    let r = counts_conv(ConvMethod::Gazelle, 16, 2048, 1, 512, 2048);
    assert_eq!(
        (
            r.table_vii_dec_perm(),
            r.table_vii_hst_perm(),
            r.sc_mult,
            r.add
        ),
        (114688, 114688, 131072, 131008)
    );
    let r = counts_conv(ConvMethod::Gala, 16, 2048, 1, 512, 2048);
    assert_eq!(
        (
            r.table_vii_dec_perm(),
            r.table_vii_hst_perm(),
            r.sc_mult,
            r.add
        ),
        (448, 448, 131072, 131008)
    );
}

#[test]
fn matvec_shares_on_plain_backend_many_shapes() {
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let t = 1032193u64; // any modulus works for the slot semantics
    let shapes = [
        (1, 2048),
        (2, 1024),
        (16, 128),
        (10, 100),
        (7, 3000),
        (33, 65),
        (128, 2048),
        (300, 17),
        (5000, 3),
        (64, 64),
    ];
    for (rows_slots, row_len) in [(1usize, 2048usize), (2, 2048), (2, 1024)] {
        for &(no, ni) in &shapes {
            for method in [
                MatVecMethod::Naive,
                MatVecMethod::Gazelle,
                MatVecMethod::Gala,
            ] {
                if method == MatVecMethod::Naive && no > 300 {
                    continue;
                }
                let ev = PlainEvaluator::new(row_len, rows_slots, t);
                let plan = MatVecPlan::new(method, no, ni, row_len, rows_slots).expect("plan");
                let w: Vec<Vec<u64>> = (0..no).map(|_| rand_vec(&mut rng, ni, t)).collect();
                let x = rand_vec(&mut rng, ni, t);
                let pts = plan.prepare(&ev, &w).expect("prep");
                let inputs = plan.pack_input(&x).expect("pack");
                let outs = plan.eval(&ev, &pts, &inputs).expect("eval");
                // Mask: client gets out − r, server keeps r.
                let masks: Vec<Vec<u64>> = outs
                    .iter()
                    .map(|o| rand_vec(&mut rng, o.len(), t))
                    .collect();
                let client: Vec<Vec<u64>> = outs
                    .iter()
                    .zip(&masks)
                    .map(|(o, r)| o.iter().zip(r).map(|(&a, &b)| (a + t - b) % t).collect())
                    .collect();
                let yc = plan.extract(&client, t).expect("extract");
                let ys = plan.extract(&masks, t).expect("extract");
                let y: Vec<u64> = yc.iter().zip(&ys).map(|(&a, &b)| (a + b) % t).collect();
                assert_eq!(
                    y,
                    matvec_ref(&w, &x, t),
                    "{method:?} {no}x{ni} on {rows_slots}x{row_len}"
                );
            }
        }
    }
}

#[test]
fn conv_shares_on_plain_backend_many_shapes() {
    let mut rng = ChaCha8Rng::seed_from_u64(12);
    let t = 1032193u64;
    // (H, W, C, K, M)
    let shapes: [(usize, usize, usize, usize, usize); 7] = [
        (4, 4, 8, 3, 8),
        (5, 7, 3, 3, 4),
        (6, 6, 5, 5, 3),
        (8, 8, 16, 1, 24),
        (3, 3, 2, 5, 2),
        (16, 16, 4, 3, 9),
        (1, 9, 3, 3, 2),
    ];
    for (slot_rows, row_len) in [(1usize, 256usize), (2, 256), (2, 512)] {
        for &(h, w, c, k, m) in &shapes {
            if (h * w).next_power_of_two() > row_len {
                continue;
            }
            // Every channel block the row holds, and at most two wider blocks.
            for (method, groups) in [
                (ConvMethod::Gazelle, usize::MAX),
                (ConvMethod::Gala, usize::MAX),
                (ConvMethod::Gazelle, 2),
                (ConvMethod::Gala, 2),
            ] {
                let ev = PlainEvaluator::new(row_len, slot_rows, t);
                let plan = ConvPlan::new(method, h, w, c, m, k, row_len, slot_rows)
                    .expect("plan")
                    .with_max_groups(groups);
                let x = rand_vec(&mut rng, h * w * c, t);
                let wts = rand_vec(&mut rng, m * c * k * k, t);
                let pts = plan.prepare(&ev, &wts).expect("prep");
                let outs = plan
                    .eval(&ev, &pts, &plan.pack_input(&x).expect("pack"))
                    .expect("eval");
                let masks: Vec<Vec<u64>> = outs
                    .iter()
                    .map(|o| rand_vec(&mut rng, o.len(), t))
                    .collect();
                let client: Vec<Vec<u64>> = outs
                    .iter()
                    .zip(&masks)
                    .map(|(o, r)| o.iter().zip(r).map(|(&a, &b)| (a + t - b) % t).collect())
                    .collect();
                let yc = plan.extract(&client, t).expect("x");
                let ys = plan.extract(&masks, t).expect("x");
                let y: Vec<u64> = yc.iter().zip(&ys).map(|(&a, &b)| (a + b) % t).collect();
                assert_eq!(
                    y,
                    reference(h, w, c, m, k, &x, &wts, t),
                    "{method:?} {h}x{w}x{c} k{k} m{m} on {slot_rows}x{row_len}, {groups} groups"
                );
            }
        }
    }
}

/// The variance tracker that sizes the flooding must not under-estimate: the measured largest
/// noise coefficient stays below the 10σ bound used by `finish_outputs`.
fn check_estimate(p: &Params, sk: &SecretKey, outs: &[Ciphertext], what: &str) {
    for c in outs {
        let actual = p.set().log2_delta_half() - sk.noise_budget(c);
        let bound = c.est_noise_log2() + 10f64.log2();
        eprintln!(
            "{what}: measured max noise 2^{actual:.1}, estimated std 2^{:.1}, bound 2^{bound:.1}",
            c.est_noise_log2()
        );
        assert!(
            actual <= bound,
            "{what}: noise 2^{actual:.1} above the flooding bound 2^{bound:.1}"
        );
    }
}

/// Full protocol on ciphertexts: client encrypts (seeded), server runs the kernel, masks,
/// floods, mod-switches; client decrypts; shares sum to the plaintext result.
fn he_matvec(
    p: &Params,
    sk: &SecretKey,
    pk: &PublicKey,
    method: MatVecMethod,
    no: usize,
    ni: usize,
    rng: &mut ChaCha8Rng,
    flood: Flood,
    hoisting: Hoisting,
) -> f64 {
    let t = p.t();
    let plan = MatVecPlan::for_params(method, no, ni, p)
        .expect("plan")
        .with_hoisting(hoisting);
    let keys = sk.rotation_keys(&plan.rotation_steps(), false);
    let ev = HeEvaluator::new(p, &keys);
    let w: Vec<Vec<u64>> = (0..no).map(|_| rand_vec(rng, ni, t)).collect();
    let x = rand_vec(rng, ni, t);
    let pts = plan.prepare(&ev, &w).expect("prep");
    let inputs: Vec<Ciphertext> = plan
        .pack_input(&x)
        .expect("pack")
        .iter()
        .map(|v| {
            let bytes = sk.encrypt_seeded(v).expect("enc").to_bytes();
            SeededCiphertext::from_bytes(p, &bytes)
                .expect("parse")
                .expand(p)
        })
        .collect();
    let outs = plan.eval(&ev, &pts, &inputs).expect("eval");
    let budget = outs
        .iter()
        .map(|c| sk.noise_budget(c))
        .fold(f64::INFINITY, f64::min);
    check_estimate(p, sk, &outs, &format!("{method:?} {no}x{ni}"));
    let res = finish_outputs(p, pk, &outs, flood).expect("finish");
    let dec: Vec<Vec<u64>> = res
        .responses
        .iter()
        .map(|r| {
            sk.decrypt_response(&Response::from_bytes(p, &r.to_bytes()).expect("parse"))
                .expect("dec")
        })
        .collect();
    let yc = plan.extract(&dec, t).expect("x");
    let ys = plan.extract(&res.masks, t).expect("x");
    let y: Vec<u64> = yc.iter().zip(&ys).map(|(&a, &b)| (a + b) % t).collect();
    assert_eq!(
        y,
        matvec_ref(&w, &x, t),
        "{method:?} {no}x{ni} {}",
        p.set().name
    );
    budget
}

#[test]
fn matvec_shares_on_ciphertexts() {
    let mut rng = ChaCha8Rng::seed_from_u64(13);
    let p = Params::by_name("n4096").expect("p");
    let sk = SecretKey::generate(&p);
    let pk = sk.public_key();
    for (no, ni) in [
        (1, 2048),
        (2, 1024),
        (16, 128),
        (10, 100),
        (33, 65),
        (128, 2048),
    ] {
        for method in [
            MatVecMethod::Naive,
            MatVecMethod::Gazelle,
            MatVecMethod::Gala,
        ] {
            if method == MatVecMethod::Naive && no > 16 {
                continue;
            }
            let b = he_matvec(
                &p,
                &sk,
                &pk,
                method,
                no,
                ni,
                &mut rng,
                Flood::BestEffort(40),
                Hoisting::Auto,
            );
            eprintln!("n4096 {method:?} {no}x{ni}: noise budget left after kernel {b:.1} bits");
            assert!(b > 1.0);
        }
    }
    // n8192 with 40-bit statistical flooding, including inputs wider than a slot row.
    let p = Params::by_name("n8192").expect("p");
    let sk = SecretKey::generate(&p);
    let pk = sk.public_key();
    for (no, ni) in [(16, 128), (3, 5000), (7, 3000)] {
        for method in [MatVecMethod::Gazelle, MatVecMethod::Gala] {
            let b = he_matvec(
                &p,
                &sk,
                &pk,
                method,
                no,
                ni,
                &mut rng,
                Flood::Statistical(40),
                Hoisting::Auto,
            );
            eprintln!("n8192 {method:?} {no}x{ni}: noise budget left after kernel {b:.1} bits");
        }
    }
}

#[test]
fn forced_hoisting_gives_the_same_shares() {
    // Both key-switching paths of the hoisted input rotations, forced, on shapes where the cost
    // model picks each of them: the shares still sum to W·x.
    let mut rng = ChaCha8Rng::seed_from_u64(21);
    let p = Params::by_name("n4096").expect("p");
    let sk = SecretKey::generate(&p);
    let pk = sk.public_key();
    for hoisting in [Hoisting::Lazy, Hoisting::Eager] {
        for (no, ni) in [(16, 128), (128, 2048)] {
            for method in [MatVecMethod::Gazelle, MatVecMethod::Gala] {
                let b = he_matvec(
                    &p,
                    &sk,
                    &pk,
                    method,
                    no,
                    ni,
                    &mut rng,
                    Flood::BestEffort(40),
                    hoisting,
                );
                assert!(b > 1.0, "{hoisting:?} {method:?} {no}x{ni}: budget {b:.1}");
            }
        }
    }
}

fn he_conv(
    p: &Params,
    sk: &SecretKey,
    pk: &PublicKey,
    method: ConvMethod,
    (h, w, c, k, m): (usize, usize, usize, usize, usize),
    rng: &mut ChaCha8Rng,
) -> f64 {
    let t = p.t();
    let plan = ConvPlan::new(method, h, w, c, m, k, p.row_len(), 2).expect("plan");
    let keys = sk.rotation_keys(&plan.rotation_steps(), false);
    let ev = HeEvaluator::new(p, &keys);
    let x = rand_vec(rng, h * w * c, t);
    let wts = rand_vec(rng, m * c * k * k, t);
    let pts = plan.prepare(&ev, &wts).expect("prep");
    let inputs: Vec<Ciphertext> = plan
        .pack_input(&x)
        .expect("pack")
        .iter()
        .map(|v| sk.encrypt(v).expect("enc"))
        .collect();
    let outs = plan.eval(&ev, &pts, &inputs).expect("eval");
    let budget = outs
        .iter()
        .map(|c| sk.noise_budget(c))
        .fold(f64::INFINITY, f64::min);
    check_estimate(p, sk, &outs, &format!("{method:?} conv"));
    let res = finish_outputs(p, pk, &outs, Flood::BestEffort(40)).expect("finish");
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
        "{method:?} {h}x{w}x{c} k{k} m{m}"
    );
    budget
}

#[test]
fn conv_shares_on_ciphertexts() {
    let mut rng = ChaCha8Rng::seed_from_u64(14);
    let p = Params::by_name("n4096").expect("p");
    let sk = SecretKey::generate(&p);
    let pk = sk.public_key();
    for shape in [
        (16, 16, 16, 1, 16),
        (16, 16, 16, 3, 16),
        (8, 8, 8, 5, 4),
        (5, 7, 3, 3, 4),
        (10, 10, 20, 3, 9),
    ] {
        for method in [ConvMethod::Gazelle, ConvMethod::Gala] {
            let b = he_conv(&p, &sk, &pk, method, shape, &mut rng);
            eprintln!(
                "n4096 {method:?} conv {shape:?}: noise budget left after kernel {b:.1} bits"
            );
            assert!(b > 2.0);
        }
    }
}

#[test]
fn one_call_matvec_api() {
    let mut rng = ChaCha8Rng::seed_from_u64(15);
    let p = Params::by_name("n4096").expect("p");
    let t = p.t();
    let sk = SecretKey::generate(&p);
    let pk = sk.public_key();
    let (no, ni) = (20, 300);
    for method in [MatVecMethod::Gazelle, MatVecMethod::Gala] {
        let plan = MatVecPlan::for_params(method, no, ni, &p).expect("plan");
        let keys = sk.rotation_keys(&plan.rotation_steps(), false);
        let w: Vec<Vec<u64>> = (0..no).map(|_| rand_vec(&mut rng, ni, t)).collect();
        let x = rand_vec(&mut rng, ni, t);
        let inputs: Vec<Ciphertext> = plan
            .pack_input(&x)
            .expect("pack")
            .iter()
            .map(|v| sk.encrypt(v).expect("enc"))
            .collect();
        let (resp, ys) = secinfer_he::kernels::server_matvec(
            &p,
            &keys,
            &pk,
            method,
            &w,
            &inputs,
            Flood::BestEffort(40),
        )
        .expect("server");
        let yc =
            secinfer_he::kernels::client_matvec_share(&sk, method, no, ni, &resp).expect("client");
        let y: Vec<u64> = yc.iter().zip(&ys).map(|(&a, &b)| (a + b) % t).collect();
        assert_eq!(y, matvec_ref(&w, &x, t));
    }
}
