//! Activation circuits: exhaustive ULP error against the exact f64 function, gate budgets.
use secinfer_gc::activation::{eval_plain, max_ulp_error, reference, ActSpec, Fixed, Func};

#[test]
fn relu_is_exact_and_sigmoid_tanh_within_one_ulp_exhaustively() {
    for bits in [8u32, 12, 16] {
        for f in [Func::Relu, Func::Sigmoid, Func::Tanh] {
            let spec = ActSpec::default_for(f, bits).expect("default formats");
            let (ulp, n, exhaustive) = max_ulp_error(&spec);
            assert!(exhaustive && n == 1 << bits);
            let bound = if f == Func::Relu { 0 } else { 1 };
            assert!(ulp <= bound, "{f:?} {bits} bits: {ulp} ULP");
        }
    }
}

#[test]
fn other_formats_fit_too() {
    for (f, i, o) in [
        (Func::Sigmoid, fx(8, 5), fx(8, 7)),
        (Func::Tanh, fx(8, 5), fx(8, 7)),
        (Func::Tanh, fx(10, 6), fx(9, 8)),
    ] {
        let spec = ActSpec::simple(f, i, o);
        let (ulp, _, _) = max_ulp_error(&spec);
        assert!(ulp <= 1, "{f:?} {i:?}→{o:?}: {ulp}");
    }
}

#[test]
fn requantization_rounds_and_saturates_exactly() {
    for (i, o) in [
        (fx(12, 8), fx(8, 4)),
        (fx(8, 4), fx(12, 8)),
        (fx(10, 2), fx(6, 3)),
    ] {
        let spec = ActSpec::simple(Func::Identity, i, o);
        let c = spec.circuit();
        for x in i.min_int()..=i.max_int() {
            assert_eq!(
                eval_plain(&c, &spec, x),
                reference(Func::Identity, i, o, x),
                "{i:?}→{o:?} x={x}"
            );
        }
    }
}

#[test]
fn cg2_pipeline_matches_stagewise_reference() {
    // 20-bit input → 8-bit sigmoid → 20-bit output: sampled every 7th input.
    let spec = ActSpec {
        func: Func::Relu,
        input: fx(20, 12),
        act_in: fx(8, 4),
        act_out: fx(8, 4),
        output: fx(20, 12),
    };
    let c = spec.circuit();
    for x in (spec.input.min_int()..=spec.input.max_int()).step_by(7) {
        assert_eq!(eval_plain(&c, &spec, x), spec.reference(x), "x={x}");
    }
}

#[test]
fn eight_bit_gate_budgets() {
    // the paper: 8-bit ReLU 24 and 8-bit tanh 95 non-XOR gates (with share handling)
    let ands = |f| {
        ActSpec::default_for(f, 8)
            .expect("default formats")
            .circuit()
            .and_count()
    };
    assert_eq!(ands(Func::Relu), 7);
    // 8-bit inputs are fitted exactly (`EXACT_FIT_BITS`), which costs more than a 1-ULP fit
    // (≤ 60 each); still within the paper's 95 for its 8-bit tanh.
    assert!(ands(Func::Sigmoid) <= 95, "sigmoid {}", ands(Func::Sigmoid));
    assert!(ands(Func::Tanh) <= 95, "tanh {}", ands(Func::Tanh));
}

/// A format the test knows to be valid.
fn fx(bits: u32, scale: u32) -> Fixed {
    Fixed::new(bits, scale).expect("valid format")
}
