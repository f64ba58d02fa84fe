//! 16384 × 8-bit ReLU, offline + online, repeated (for profiling).
use secinfer_gc::activation::{ActSpec, Func};
use secinfer_gc::shares::{evaluate_apply, garble_apply, ShareDomain};
use secinfer_net::simulate;
use secinfer_ot::{Block, OtExtReceiver, OtExtSender, Prg};
use std::time::Instant;
fn main() {
    let reps: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(20);
    let n = 16384;
    let domain = ShareDomain::Pow2(8);
    let spec = ActSpec::default_for(Func::Relu, 8).expect("default formats");
    let ss: Vec<u64> = (0..n).map(|i| (i * 7) as u64 & 0xff).collect();
    let cs: Vec<u64> = (0..n).map(|i| (i * 13) as u64 & 0xff).collect();
    let d = Block(Prg::new().next_block().0 | 1);
    let run = simulate(
        move |ch| {
            let mut ot = OtExtReceiver::setup(ch, &mut Prg::new()).expect("ot");
            let mut times = Vec::new();
            for _ in 0..reps {
                let t = Instant::now();
                evaluate_apply(ch, &mut ot, domain, &spec, &cs).expect("eval");
                times.push(t.elapsed().as_secs_f64() * 1e3);
            }
            times
        },
        move |ch| {
            let mut ot = OtExtSender::setup_with_delta(ch, &mut Prg::new(), d).expect("ot");
            for _ in 0..reps {
                garble_apply(ch, &mut ot, domain, &spec, &ss).expect("garble");
            }
        },
    );
    let mut t = run.client.output;
    t.sort_by(|a, b| a.total_cmp(b));
    println!(
        "offline+online per repetition (ms): min {:.1} median {:.1} max {:.1}",
        t[0],
        t[t.len() / 2],
        t[t.len() - 1]
    );
}
