//! ULP machinery: the exact real functions (f64) and errors in units of the output's last place.
use crate::ring::{to_signed, Fixed};

/// The math functions of this crate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MathFn {
    Exp,
    ExpNeg,
    Sigmoid,
    Tanh,
    Relu,
}

impl MathFn {
    pub fn name(self) -> &'static str {
        match self {
            MathFn::Exp => "exp",
            MathFn::ExpNeg => "exp_neg",
            MathFn::Sigmoid => "sigmoid",
            MathFn::Tanh => "tanh",
            MathFn::Relu => "relu",
        }
    }
    pub fn parse(s: &str) -> Option<MathFn> {
        Some(match s {
            "exp" => MathFn::Exp,
            "exp_neg" => MathFn::ExpNeg,
            "sigmoid" => MathFn::Sigmoid,
            "tanh" => MathFn::Tanh,
            "relu" => MathFn::Relu,
            _ => return None,
        })
    }
    /// The exact real function.
    pub fn eval(self, x: f64) -> f64 {
        match self {
            MathFn::Exp | MathFn::ExpNeg => x.exp(),
            MathFn::Sigmoid => 1.0 / (1.0 + (-x).exp()),
            MathFn::Tanh => x.tanh(),
            MathFn::Relu => x.max(0.0),
        }
    }
    /// Whether a fixed-point input (signed integer at `inp`) is in the function's domain.
    pub fn in_domain(self, xi: i64) -> bool {
        match self {
            MathFn::ExpNeg => xi < 0,
            _ => true,
        }
    }
}

/// |out − f(x)·2^s_out| in ULPs, with `out` read as a signed ring element of `outf` and x the
/// exact real value of the fixed-point input.
pub fn ulp_error(f: MathFn, x_ring: u64, inp: Fixed, out_ring: u64, outf: Fixed) -> f64 {
    let x = to_signed(x_ring, inp.bits) as f64 / (inp.scale as f64).exp2();
    let o = to_signed(out_ring, outf.bits) as f64;
    (o - f.eval(x) * (outf.scale as f64).exp2()).abs()
}

/// Max and mean ULP error over a batch.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct UlpStats {
    pub max: f64,
    pub mean: f64,
    /// Input (ring element) at which the max occurred.
    pub argmax: u64,
    pub count: usize,
}

pub fn ulp_stats(f: MathFn, xs: &[u64], inp: Fixed, outs: &[u64], outf: Fixed) -> UlpStats {
    let mut st = UlpStats::default();
    let mut sum = 0.0;
    for (x, o) in xs.iter().zip(outs) {
        let e = ulp_error(f, *x, inp, *o, outf);
        sum += e;
        if e > st.max {
            st.max = e;
            st.argmax = *x;
        }
    }
    st.count = xs.len().min(outs.len());
    st.mean = if st.count > 0 {
        sum / st.count as f64
    } else {
        0.0
    };
    st
}

/// The inputs of a run: every element of the domain when `n` is at least its size (exhaustive),
/// otherwise `n` evenly spaced points over it (deterministic, covers min, max and 0's neighbours).
pub fn inputs(f: MathFn, inp: Fixed, n: usize) -> Vec<u64> {
    let lo: i64 = -(1i64 << (inp.bits - 1));
    let hi: i64 = if f == MathFn::ExpNeg {
        -1
    } else {
        (1i64 << (inp.bits - 1)) - 1
    };
    let size = (hi - lo + 1) as u128;
    let m = crate::ring::mask(inp.bits);
    if n as u128 >= size {
        return (lo..=hi).map(|v| (v as u64) & m).collect();
    }
    (0..n)
        .map(|i| {
            let v = if n == 1 {
                lo
            } else {
                lo + ((size - 1) * i as u128 / (n as u128 - 1)) as i64
            };
            (v as u64) & m
        })
        .collect()
}
