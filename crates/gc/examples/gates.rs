//! Prints AND gates, AND depth and exhaustive max ULP error of the activation circuits.
//! `cargo run -p secinfer-gc --release --example gates [bits...]`
use secinfer_gc::activation::{max_ulp_error, pwl_params, ActSpec, Func};

fn main() {
    let widths: Vec<u32> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let widths = if widths.is_empty() {
        vec![8, 12, 16]
    } else {
        widths
    };
    for bits in widths {
        for f in [Func::Relu, Func::Sigmoid, Func::Tanh] {
            let t = std::time::Instant::now();
            let spec = ActSpec::default_for(f, bits).expect("default formats");
            let c = spec.circuit();
            let st = c.stats();
            let t_build = t.elapsed().as_secs_f64();
            let (ulp, n, ex) = max_ulp_error(&spec);
            let extra = if matches!(f, Func::Sigmoid | Func::Tanh) {
                let p = pwl_params(f, spec.act_in, spec.act_out);
                format!("k={} sh={} sym={}", p.k, p.sh, p.sym)
            } else {
                String::new()
            };
            println!(
                "{:8} {:2} bits: ands {:6} depth {:3}  max_ulp {} over {} ({}), build {:.2}s {}",
                f.name(),
                bits,
                st.ands,
                st.and_depth,
                ulp,
                n,
                if ex { "exhaustive" } else { "sampled" },
                t_build,
                extra
            );
        }
    }
}
