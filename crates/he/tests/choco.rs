//! CHOCO packing and kernels: packing round trips, windowed rotations equal the plaintext
//! rotation within the window, the Dense/Conv2d kernels equal the integer matvec (on slot
//! vectors and on real ciphertexts, exactly through the plaintext-prime CRT), and returned
//! ciphertexts are re-randomised.

use rand_chacha::rand_core::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use secinfer_he::choco::ConvPlan;
use secinfer_he::choco::*;
use secinfer_he::*;

fn rand_signed(rng: &mut ChaCha8Rng, n: usize, bits: u32) -> Vec<i64> {
    let half = 1i64 << (bits - 1);
    (0..n)
        .map(|_| (rng.next_u64() % (2 * half as u64)) as i64 - half)
        .collect()
}

fn rotate_window(x: &[u64], k: usize, w: usize) -> Vec<u64> {
    let mut p = x.to_vec();
    p.resize(w, 0);
    (0..w).map(|j| p[(j + k) % w]).collect()
}

#[test]
fn packing_round_trips_and_rejects_bad_windows() {
    let x: Vec<u64> = (1..=100).collect();
    let r = redundant_pack(&x, 128, 512).expect("pack");
    assert_eq!(unpack(&r, 100).expect("unpack"), x);
    assert_eq!(&r[128..228], &x[..], "second copy");
    assert!(r[100..128].iter().chain(&r[256..]).all(|&v| v == 0));
    let b = baseline_pack(&x, 128, 512).expect("pack");
    assert_eq!(unpack(&b, 100).expect("unpack"), x);
    assert!(b[100..].iter().all(|&v| v == 0));
    // A window narrower than x, not a power of two, or a redundant pair beyond the slots.
    assert!(matches!(
        redundant_pack(&x, 64, 512),
        Err(HeError::Shape(_))
    ));
    assert!(matches!(
        baseline_pack(&x, 100, 512),
        Err(HeError::Shape(_))
    ));
    assert!(matches!(
        redundant_pack(&x, 512, 512),
        Err(HeError::Shape(_))
    ));
    assert!(baseline_pack(&x, 512, 512).is_ok());
    assert!(matches!(
        unpack(&b[..10], 100),
        Err(HeError::WrongLength { .. })
    ));
}

#[test]
fn windowed_rotation_equals_plain_rotation_in_window() {
    let t = 65537;
    let (row_len, w) = (256, 64);
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let x: Vec<u64> = (0..w).map(|_| rng.next_u64() % t).collect();
    for packing in [Packing::Redundant, Packing::Baseline] {
        let ev = PlainEvaluator::new(row_len, 2, t);
        let ct = pack(&x, w, 2 * row_len, packing).expect("pack");
        for k in [1, 7, 31, 63] {
            let masks = WindowMasks::new(&ev, w, k).expect("masks");
            let r = windowed_rotate(&ev, &ct, k, w, packing, Some(&masks)).expect("rot");
            assert_eq!(&r[..w], &rotate_window(&x, k, w)[..], "{packing:?} k={k}");
        }
        let rots = ev.counter().snapshot().perm;
        let want = if packing == Packing::Redundant { 4 } else { 8 };
        assert_eq!(
            rots, want,
            "{packing:?}: HE rotations for 4 windowed rotations"
        );
    }
    // The baseline without its masks is an error, not a wrong rotation.
    let ev = PlainEvaluator::new(row_len, 2, t);
    let ct = baseline_pack(&x, w, 2 * row_len).expect("pack");
    assert!(windowed_rotate(&ev, &ct, 3, w, Packing::Baseline, None).is_err());
}

#[test]
fn windowed_rotation_on_ciphertexts() {
    let rns = RnsParams::new(1).expect("params");
    let p = &rns.sets()[0];
    let sk = SecretKey::generate(p);
    let w = 1024;
    let mut rng = ChaCha8Rng::seed_from_u64(2);
    let x: Vec<u64> = (0..1000).map(|_| rng.next_u64() % p.t()).collect();
    let k = 37;
    for packing in [Packing::Redundant, Packing::Baseline] {
        let keys = sk.rotation_keys(&windowed_steps(packing, w, k, p.row_len()), false);
        let ev = HeEvaluator::new(p, &keys);
        let ct = sk
            .encrypt(&pack(&x, w, p.slots(), packing).expect("pack"))
            .expect("enc");
        let masks = WindowMasks::new(&ev, w, k).expect("masks");
        let r = windowed_rotate(&ev, &ct, k, w, packing, Some(&masks)).expect("rot");
        let d = sk.decrypt(&r).expect("dec");
        assert_eq!(&d[..w], &rotate_window(&x, k, w)[..], "{packing:?}");
    }
}

/// W·x mod t on slot vectors for several shapes: rows below the window (rotate-and-sum),
/// rows above it (several output windows), inputs wider than a window (several inputs).
#[test]
fn dense_kernel_equals_matvec_on_slot_vectors() {
    let t = 65537u64;
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    for &(rows, cols) in &[(10, 100), (128, 128), (100, 30), (7, 300), (40, 1)] {
        for packing in [Packing::Redundant, Packing::Baseline] {
            let (row_len, slot_rows) = (256, 2);
            let plan = DensePlan::new(rows, cols, packing, row_len, slot_rows).expect("plan");
            let ev = PlainEvaluator::new(row_len, slot_rows, t);
            let w = rand_signed(&mut rng, rows * cols, 16);
            let x = rand_signed(&mut rng, cols, 16);
            let prep = plan.prepare(&ev, &w).expect("prepare");
            let xs: Vec<u64> = x.iter().map(|v| v.rem_euclid(t as i64) as u64).collect();
            let outs = plan
                .eval(&ev, &prep, &plan.pack_input(&xs).expect("pack"))
                .expect("eval");
            let y = plan.extract(&outs).expect("extract");
            let want: Vec<u64> = plain_matvec(&w, &x, rows)
                .iter()
                .map(|v| v.rem_euclid(t as i128) as u64)
                .collect();
            assert_eq!(y, want, "{rows}x{cols} {packing:?} {plan:?}");
        }
    }
}

#[test]
fn redundant_packing_needs_fewer_rotations_and_products() {
    let counts = |packing| {
        let plan = DensePlan::new(128, 784, packing, 4096, 2).expect("plan");
        let ev = CountingEvaluator::new(4096, 2);
        // A dense matrix: every diagonal is nonzero, none is skipped.
        let prep = plan.prepare(&ev, &vec![1; 128 * 784]).expect("prep");
        plan.eval(&ev, &prep, &vec![(); plan.col_chunks])
            .expect("eval");
        (ev.counter().snapshot(), plan.rotation_steps().len())
    };
    let (r, rk) = counts(Packing::Redundant);
    let (b, bk) = counts(Packing::Baseline);
    let rot = |c: OpCounts| c.perm + c.hst_perm;
    // Redundant: 15 hoisted baby steps, 7 giant steps, 3 rotate-and-sum rotations.
    assert_eq!((r.hst_perm, r.perm, r.sc_mult), (15, 7 + 3, 128));
    // Baseline: two rotations and two mask products per diagonal beyond the first.
    assert_eq!((rot(b), b.sc_mult), (2 * 127 + 3, 128 + 2 * 127));
    assert!(rk < bk, "Galois keys: {rk} vs {bk}");
}

#[test]
fn zero_diagonals_are_skipped_and_the_product_stays_exact() {
    // A band of 7 diagonals (row r reads columns 4⌊r/4⌋ .. +3, the batched kNN's distance
    // layout) in a 512 × 512 matrix: 7 products where a dense matrix takes 512, and the
    // giant steps whose diagonals are all zero rotate nothing.
    let n = 512;
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let vals = rand_signed(&mut rng, n * 4, 12);
    let mut w = vec![0i64; n * n];
    for r in 0..n {
        for f in 0..4 {
            w[r * n + r / 4 * 4 + f] = vals[r * 4 + f];
        }
    }
    let t = 65537;
    let plan = DensePlan::new(n, n, Packing::Redundant, 4096, 2).expect("plan");
    let ev = PlainEvaluator::new(4096, 2, t);
    let x = rand_signed(&mut rng, n, 12);
    let xs: Vec<u64> = x.iter().map(|v| v.rem_euclid(t as i64) as u64).collect();
    let prep = plan.prepare(&ev, &w).expect("prepare");
    let outs = plan
        .eval(&ev, &prep, &plan.pack_input(&xs).expect("pack"))
        .expect("eval");
    let want: Vec<u64> = plain_matvec(&w, &x, n)
        .iter()
        .map(|v| v.rem_euclid(t as i128) as u64)
        .collect();
    assert_eq!(plan.extract(&outs).expect("extract"), want);
    let ev = CountingEvaluator::new(4096, 2);
    let prep = plan.prepare(&ev, &w).expect("prepare");
    plan.eval(&ev, &prep, &[()]).expect("eval");
    let c = ev.counter().snapshot();
    // Diagonals 0..3 and n−3..n−1; with B = 32 baby steps, giant steps 0 and 15 only.
    assert_eq!((c.sc_mult, c.perm), (7, 1));
    // The same band as a public support: one hoisted rotation per used diagonal, Galois keys
    // for those six steps only, the same product; weights off the band are refused.
    let banded = plan
        .clone()
        .with_support(vec![1, 2, 3, n - 3, n - 2, n - 1])
        .expect("support");
    assert_eq!(banded.rotation_steps(), vec![1, 2, 3, n - 3, n - 2, n - 1]);
    let pev = PlainEvaluator::new(4096, 2, t);
    let prep = banded.prepare(&pev, &w).expect("prepare");
    let outs = banded
        .eval(&pev, &prep, &banded.pack_input(&xs).expect("pack"))
        .expect("eval");
    assert_eq!(banded.extract(&outs).expect("extract"), want);
    let ev = CountingEvaluator::new(4096, 2);
    let prep = banded.prepare(&ev, &w).expect("prepare");
    banded.eval(&ev, &prep, &[()]).expect("eval");
    let c = ev.counter().snapshot();
    assert_eq!((c.sc_mult, c.perm, c.hst_perm), (7, 0, 6));
    let mut off = w.clone();
    off[5] = 1; // row 0, column 5: diagonal 5
    assert!(matches!(banded.prepare(&pev, &off), Err(HeError::Shape(_))));
    assert!(plan.clone().with_support(vec![n]).is_err());
    // An all-zero matrix still answers (zeros) through its first diagonal.
    let ev = PlainEvaluator::new(4096, 2, t);
    let prep = plan.prepare(&ev, &vec![0; n * n]).expect("prepare");
    let z = plan
        .eval(&ev, &prep, &plan.pack_input(&xs).expect("pack"))
        .expect("eval");
    assert!(plan.extract(&z).expect("extract").iter().all(|v| *v == 0));
}

#[test]
fn conv_matrix_equals_direct_convolution() {
    let mut rng = ChaCha8Rng::seed_from_u64(4);
    let (c, h, w, co, kh, kw) = (2, 7, 6, 3, 3, 2);
    for (stride, pad) in [([1, 1], [0, 0]), ([2, 1], [1, 1])] {
        let k = rand_signed(&mut rng, co * c * kh * kw, 8);
        let x = rand_signed(&mut rng, c * h * w, 8);
        let (m, [oh, ow]) = conv_matrix(&k, [c, h, w], co, [kh, kw], stride, pad).expect("conv");
        let y = plain_matvec(&m, &x, co * oh * ow);
        // Two independent constructions: the Toeplitz matrix and the direct loop.
        assert_eq!(y, plain_conv(&k, &x, [c, h, w], co, [kh, kw], stride, pad));
    }
    assert!(conv_matrix(&[0; 5], [1, 4, 4], 1, [2, 2], [1, 1], [0, 0]).is_err());
}

#[test]
fn crt_reconstructs_centered_integers() {
    let rns = RnsParams::new(3).expect("params");
    let big: i128 = rns.primes().iter().map(|&t| t as i128).product();
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let mut xs: Vec<i128> = vec![0, 1, -1, big / 2, -(big / 2) + 1];
    xs.extend((0..100).map(|_| (rng.next_u64() as i128 % big) - big / 2 + 1));
    let res: Vec<Vec<u64>> = rns
        .primes()
        .iter()
        .map(|&t| xs.iter().map(|v| v.rem_euclid(t as i128) as u64).collect())
        .collect();
    assert_eq!(rns.reconstruct(&res).expect("crt"), xs);
    assert!(rns.reconstruct(&res[..2]).is_err());
    let mut bad = res.clone();
    bad[1][0] = rns.primes()[1];
    assert!(matches!(
        rns.reconstruct(&bad),
        Err(HeError::OutOfRange { .. })
    ));
    // The public bound picks enough primes: 784 columns of 20-bit values need 3.
    let b = accumulator_bound(784, 20, 12);
    let r = RnsParams::for_bound(b).expect("params");
    assert_eq!(r.sets().len(), 3);
    assert!(r.modulus_log2() > ((2 * b + 1) as f64).log2());
}

/// One prime's Dense kernel on real ciphertexts: fresh keys, the encrypted input `x`
/// (residues), the kernel's output ciphertexts.
fn dense_on_ciphertexts(
    p: &Params,
    plan: &DensePlan,
    w: &[i64],
    x: &[u64],
) -> (SecretKey, PublicKey, Vec<Ciphertext>) {
    let sk = SecretKey::generate(p);
    let pk = sk.public_key();
    let keys = sk.rotation_keys(&plan.rotation_steps(), false);
    let ev = HeEvaluator::new(p, &keys);
    let prep = plan.prepare(&ev, w).expect("prepare");
    let cts: Vec<Ciphertext> = plan
        .pack_input(x)
        .expect("pack")
        .iter()
        .map(|v| sk.encrypt(v).expect("enc"))
        .collect();
    let res = plan.eval(&ev, &prep, &cts).expect("eval");
    (sk, pk, res)
}

/// The whole server step on real ciphertexts with worst-case 20-bit operands: exact
/// accumulators (bias·2^F included) through the CRT, flooding at ≥ 40 bits, and two runs on
/// one input give different bytes and the same result.
#[test]
fn dense_on_ciphertexts_is_exact_and_rerandomised() {
    let (rows, cols, bits, frac) = (20usize, 200usize, 20u32, 12u32);
    let rns = RnsParams::for_bound(accumulator_bound(cols, bits, frac)).expect("params");
    let mut rng = ChaCha8Rng::seed_from_u64(6);
    let mut w = rand_signed(&mut rng, rows * cols, bits);
    let mut x = rand_signed(&mut rng, cols, bits);
    // One row at the extreme of the bound.
    w[..cols].iter_mut().for_each(|v| *v = -(1 << (bits - 1)));
    x.iter_mut()
        .take(cols / 2)
        .for_each(|v| *v = -(1 << (bits - 1)));
    let bias = rand_signed(&mut rng, rows, bits);
    let mut want = plain_matvec(&w, &x, rows);
    for (y, b) in want.iter_mut().zip(&bias) {
        *y += (*b as i128) << frac;
    }
    assert!(want[0] > 1i128 << 40, "the extreme row really is large");
    let plan =
        DensePlan::new(rows, cols, Packing::Redundant, rns.sets()[0].row_len(), 2).expect("plan");
    let xr = rns.residues(&x);
    let bias_f: Vec<i64> = bias.iter().map(|b| b << frac).collect();
    let br = rns.residues(&bias_f);
    // Per prime: one key set, one encrypted input, one kernel run, finished twice.
    let mut outs = [Vec::new(), Vec::new()];
    let mut bytes = [Vec::new(), Vec::new()];
    for (i, p) in rns.sets().iter().enumerate() {
        let (sk, pk, res) = dense_on_ciphertexts(p, &plan, &w, &xr[i]);
        let bl = plan.output_layout(&br[i]).expect("layout");
        let hide = Kernel::Dense(plan.clone()).output_slots().expect("slots");
        let mut full = Vec::new();
        for run in 0..2 {
            let mut dec = Vec::new();
            for (o, (ct, b)) in res.iter().zip(&bl).enumerate() {
                let ct = choco::add_plain_hiding(p, ct, b, &hide[o]).expect("bias");
                let (r, stat) = finish(p, &pk, &ct, FLOOD_STAT_BITS).expect("finish");
                assert!(stat >= FLOOD_STAT_BITS as f64, "flooding reached 2^-{stat}");
                bytes[run].push(r.to_bytes());
                dec.push(sk.decrypt_response(&r).expect("dec"));
            }
            outs[run].push(plan.extract(&dec).expect("extract"));
            full.push(dec);
        }
        // Every slot but the outputs is fresh uniform noise: the rotate-and-sum's partial
        // sums never reach the client.
        for ((a, b), h) in full[0].iter().zip(&full[1]).zip(&hide) {
            let fresh = a
                .iter()
                .zip(b)
                .zip(h)
                .filter(|((x, y), o)| !**o && x != y)
                .count();
            let hidden = h.iter().filter(|o| !**o).count();
            assert!(
                fresh > hidden * 99 / 100,
                "{fresh} of {hidden} hidden slots fresh"
            );
        }
    }
    for o in &outs {
        assert_eq!(rns.reconstruct(o).expect("crt"), want);
    }
    let runs = bytes;
    assert_ne!(
        runs[0], runs[1],
        "responses are fresh randomness, not a function of the input"
    );
}

/// Slot-vector run of a conv plan: reduces the signed kernel and input mod t, evaluates, and
/// reads the outputs back as centered integers.
fn conv_on_slots(plan: &ConvPlan, k: &[i64], x: &[i64], t: u64) -> (Vec<i128>, OpCounts) {
    let ev = PlainEvaluator::new(plan.row_len, plan.slots / plan.row_len, t);
    let red = |v: &[i64]| -> Vec<u64> { v.iter().map(|a| a.rem_euclid(t as i64) as u64).collect() };
    let prep = plan.prepare(&ev, k).expect("prepare");
    let cts = plan.pack_input(&red(x)).expect("pack");
    let outs = plan.eval(&ev, &prep, &cts).expect("eval");
    let y = plan.extract(&outs).expect("extract");
    let centered = y
        .iter()
        .map(|&v| {
            if v > t / 2 {
                v as i128 - t as i128
            } else {
                v as i128
            }
        })
        .collect();
    (centered, ev.counter().snapshot())
}

/// The windowed conv kernel equals the direct convolution for both packings over shapes that
/// exercise groups, lanes, padding, stride, partial groups and several output ciphertexts.
#[test]
fn conv_kernel_equals_direct_convolution_on_slot_vectors() {
    let t = 65537u64;
    let mut rng = ChaCha8Rng::seed_from_u64(9);
    // (c, h, w, co, k, stride, padding, row_len)
    let shapes = [
        (1, 28, 28, 16, 5, 1, 0, 4096),
        (16, 12, 12, 16, 5, 1, 0, 4096),
        (3, 7, 6, 5, 3, 1, 1, 256),
        (5, 6, 6, 9, 3, 2, 1, 512),
        (2, 4, 4, 3, 4, 1, 0, 64),
    ];
    for (c, h, w, co, kk, s, p, row_len) in shapes {
        for packing in [Packing::Redundant, Packing::Baseline] {
            let plan = ConvPlan::new([c, h, w], co, [kk, kk], [s, s], [p, p], packing, row_len, 2)
                .expect("plan");
            let k = rand_signed(&mut rng, co * c * kk * kk, 5);
            let x = rand_signed(&mut rng, c * h * w, 5);
            let want = plain_conv(&k, &x, [c, h, w], co, [kk, kk], [s, s], [p, p]);
            assert!(want.iter().all(|v| v.abs() < (t / 2) as i128));
            let (got, ops) = conv_on_slots(&plan, &k, &x, t);
            assert_eq!(
                got, want,
                "{packing:?} {c}x{h}x{w} -> {co}, k{kk} s{s} p{p}"
            );
            assert_eq!(
                plan.extract(&vec![vec![0; plan.slots]; plan.out_cts])
                    .unwrap()
                    .len(),
                want.len()
            );
            // Redundant: K − 1 hoisted offset rotations per input, G − 1 shift rotations per
            // output ciphertext; nothing else.
            if packing == Packing::Redundant {
                assert_eq!(ops.hst_perm as usize, plan.in_cts * (kk * kk - 1));
                assert_eq!(ops.perm as usize, plan.out_cts * (plan.group - 1));
            }
        }
    }
    // MNIST conv2 at n = 8192: 16 channels of 12×12 in groups of 8, two lanes, one output.
    let plan = ConvPlan::new(
        [16, 12, 12],
        16,
        [5, 5],
        [1, 1],
        [0, 0],
        Packing::Redundant,
        4096,
        2,
    )
    .expect("plan");
    assert_eq!(
        (plan.group, plan.lanes, plan.in_cts, plan.out_cts),
        (8, 2, 2, 1)
    );
    // A window that cannot fit a row is a typed error.
    assert!(matches!(
        ConvPlan::new(
            [1, 40, 40],
            1,
            [3, 3],
            [1, 1],
            [0, 0],
            Packing::Redundant,
            1024,
            2
        ),
        Err(HeError::Shape(_))
    ));
}

/// Outside its outputs, what the client decrypts is zero: no partial sums of the weights.
#[test]
fn conv_kernel_returns_only_outputs() {
    let t = 65537u64;
    let mut rng = ChaCha8Rng::seed_from_u64(10);
    let plan = ConvPlan::new(
        [3, 7, 6],
        5,
        [3, 3],
        [2, 1],
        [1, 1],
        Packing::Redundant,
        256,
        2,
    )
    .expect("plan");
    let ev = PlainEvaluator::new(256, 2, t);
    let k: Vec<i64> = rand_signed(&mut rng, 5 * 3 * 9, 5);
    let x: Vec<u64> = (0..3 * 7 * 6).map(|_| 1 + rng.next_u64() % 100).collect();
    let prep = plan.prepare(&ev, &k).expect("prepare");
    let outs = plan
        .eval(&ev, &prep, &plan.pack_input(&x).unwrap())
        .unwrap();
    let marked = plan.output_layout(&vec![1; plan.outputs()]).unwrap();
    for (o, m) in outs.iter().zip(&marked) {
        for (v, is_out) in o.iter().zip(m) {
            assert!(*is_out == 1 || *v == 0, "a non-output slot holds {v}");
        }
    }
}

/// The conv kernel on real ciphertexts with 20-bit operands, exact through the CRT and flooded
/// to 2^-40 with both packings: the redundant one on two Q primes, the masked baseline on the
/// three its mask level needs.
#[test]
fn conv_on_ciphertexts_is_exact_and_flooded() {
    let (c, h, w, co, kk) = (3usize, 8usize, 8usize, 4usize, 3usize);
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let k = rand_signed(&mut rng, co * c * kk * kk, 20);
    let x = rand_signed(&mut rng, c * h * w, 20);
    let want = plain_conv(&k, &x, [c, h, w], co, [kk, kk], [1, 1], [1, 1]);
    for packing in [Packing::Redundant, Packing::Baseline] {
        let rns = RnsParams::for_packing(accumulator_bound(c * kk * kk, 20, 12), packing)
            .expect("params");
        let p0 = &rns.sets()[0];
        let plan = ConvPlan::new(
            [c, h, w],
            co,
            [kk, kk],
            [1, 1],
            [1, 1],
            packing,
            p0.row_len(),
            2,
        )
        .expect("plan");
        let xr = rns.residues(&x);
        let mut rows = Vec::new();
        for (i, p) in rns.sets().iter().enumerate() {
            let sk = SecretKey::generate(p);
            let pk = sk.public_key();
            let keys = sk.rotation_keys(&plan.rotation_steps(), false);
            let ev = HeEvaluator::new(p, &keys);
            let prep = plan.prepare(&ev, &k).expect("prepare");
            let cts: Vec<Ciphertext> = plan
                .pack_input(&xr[i])
                .expect("pack")
                .iter()
                .map(|v| sk.encrypt(v).expect("enc"))
                .collect();
            let mut dec = Vec::new();
            assert_eq!((p.n(), p.num_q()), ring_for(packing));
            for ct in plan.eval(&ev, &prep, &cts).expect("eval") {
                let (r, stat) = finish(p, &pk, &ct, FLOOD_STAT_BITS).expect("finish");
                assert!(stat >= FLOOD_STAT_BITS as f64, "{packing:?}: 2^-{stat}");
                dec.push(sk.decrypt_response(&r).expect("dec"));
            }
            rows.push(plan.extract(&dec).expect("extract"));
        }
        assert_eq!(rns.reconstruct(&rows).expect("crt"), want, "{packing:?}");
    }
}

/// On the redundant packing's two Q primes the baseline's mask level leaves no room to flood:
/// a typed refusal, never an under-flooded answer.
#[test]
fn baseline_on_two_q_primes_refuses_to_underflood() {
    let rns = RnsParams::new(1).expect("params");
    let p = &rns.sets()[0];
    let plan = ConvPlan::new(
        [2, 6, 6],
        2,
        [3, 3],
        [1, 1],
        [0, 0],
        Packing::Baseline,
        p.row_len(),
        2,
    )
    .expect("plan");
    let sk = SecretKey::generate(p);
    let keys = sk.rotation_keys(&plan.rotation_steps(), false);
    let ev = HeEvaluator::new(p, &keys);
    let mut rng = ChaCha8Rng::seed_from_u64(12);
    let k: Vec<i64> = rand_signed(&mut rng, 2 * 2 * 9, 20);
    let prep = plan.prepare(&ev, &k).expect("prepare");
    let x: Vec<u64> = (0..72).map(|_| rng.next_u64() % p.t()).collect();
    let cts: Vec<Ciphertext> = plan
        .pack_input(&x)
        .unwrap()
        .iter()
        .map(|v| sk.encrypt(v).expect("enc"))
        .collect();
    let out = plan.eval(&ev, &prep, &cts).expect("eval");
    assert!(matches!(
        finish(p, &sk.public_key(), &out[0], FLOOD_STAT_BITS),
        Err(HeError::NoiseBudget(_))
    ));
}

/// The small-plaintext profile: an 8-bit layer of fan-in 784 whose inputs lie in [0, 2^5]
/// (the quantised MNIST MLP's first layer) needs one plaintext prime, the widest the profile
/// allows, and a full 784 → 128 product on it is flooded to ≥ 2^-40 with the result exact.
#[test]
fn single_prime_profile_floods_40_bits() {
    let (cols, bits, frac) = (784usize, 8u32, 5u32);
    let bound = accumulator_bound_for_inputs(cols, bits, frac, 1 << frac);
    let rns = RnsParams::for_bound(bound).expect("params");
    assert_eq!(rns.sets().len(), 1, "an 8-bit layer fits one prime");
    assert!(rns.modulus_log2() > (2.0 * bound as f64 + 1.0).log2());
    assert!(rns.modulus_log2() <= MAX_SINGLE_T_BITS as f64);
    assert_eq!(
        RnsParams::for_bound(accumulator_bound(cols, 12, frac))
            .expect("params")
            .sets()
            .len(),
        2,
        "a 12-bit layer keeps two 20-bit primes"
    );
    assert!(matches!(
        RnsParams::with_prime_bits(1, MAX_SINGLE_T_BITS + 1, RING_DEGREE, 2),
        Err(HeError::InvalidParams(_))
    ));
    extreme_q8_layer_exact_and_flooded(&rns, Packing::Redundant, 11);
}

/// The masked baseline's hardest case on its own parameters ([`ring_for`]): a full 784 → 128
/// product with the widest plaintext prime (23 bits, the quantised MLP's first layer), two
/// rotations and two mask products per diagonal, flooded to ≥ 2^-40 with the result exact,
/// on three Q primes within the HE Standard's bound.
#[test]
fn baseline_floods_40_bits_on_three_q_primes() {
    let bound = accumulator_bound_for_inputs(784, 8, 5, 1 << 5);
    let rns = RnsParams::for_packing(bound, Packing::Baseline).expect("params");
    let p = &rns.sets()[0];
    assert_eq!((p.n(), p.num_q()), (BASELINE_RING_DEGREE, 3));
    assert_eq!((p.t() as f64).log2().ceil() as u32, MAX_SINGLE_T_BITS);
    assert!(p.set().log2_qp() <= 218.0, "{}", p.set().log2_qp());
    extreme_q8_layer_exact_and_flooded(&rns, Packing::Baseline, 13);
}

/// A 784 → 128 product of 8-bit weights on inputs in [0, 2^5] (the quantised MNIST MLP's first
/// layer) on the one-prime `rns`, with one row at the extreme of the accumulator bound: exact
/// after decryption, every response flooded to ≥ 2^-40.
fn extreme_q8_layer_exact_and_flooded(rns: &RnsParams, packing: Packing, seed: u64) {
    let (rows, cols, bits, frac) = (128usize, 784usize, 8u32, 5u32);
    let bound = accumulator_bound_for_inputs(cols, bits, frac, 1 << frac);
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut w = rand_signed(&mut rng, rows * cols, bits);
    let mut x: Vec<i64> = (0..cols).map(|_| (rng.next_u64() % 33) as i64).collect();
    // One row at the extreme of the bound.
    w[..cols].iter_mut().for_each(|v| *v = -(1 << (bits - 1)));
    x[..cols / 2].iter_mut().for_each(|v| *v = 1 << frac);
    let want = plain_matvec(&w, &x, rows);
    assert!(
        want[0].unsigned_abs() > bound / 2,
        "the extreme row really is large"
    );
    let p = &rns.sets()[0];
    let plan = DensePlan::new(rows, cols, packing, p.row_len(), 2).expect("plan");
    let (sk, pk, res) = dense_on_ciphertexts(p, &plan, &w, &rns.residues(&x)[0]);
    let mut dec = Vec::new();
    for ct in &res {
        let (r, stat) = finish(p, &pk, ct, FLOOD_STAT_BITS).expect("finish");
        assert!(
            stat >= FLOOD_STAT_BITS as f64,
            "{packing:?}: flooding reached 2^-{stat}"
        );
        dec.push(sk.decrypt_response(&r).expect("dec"));
    }
    let got = rns
        .reconstruct(&[plan.extract(&dec).expect("extract")])
        .expect("crt");
    assert_eq!(got, want, "{packing:?}");
}
