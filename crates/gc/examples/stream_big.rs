//! Streams one large circuit (R rounds of a 32-bit multiply-accumulate, ~1000 AND gates each)
//! between two threads: tables are garbled, sent in 64 KiB frames and evaluated as they arrive,
//! so neither party holds the circuit or its tables. Prints AND gates, time, bytes and peak RSS.
//! `cargo run -p secinfer-gc --release --example stream_big -- 10000`
use secinfer_gc::backend::Bit;
use secinfer_gc::gadgets::{add, mul_lo};
use secinfer_gc::protocol::{stream_evaluate, stream_garble, CircuitFn};
use secinfer_gc::Backend;
use secinfer_net::simulate;
use secinfer_ot::{Block, OtExtReceiver, OtExtSender, Prg};
use std::time::Instant;

struct Mac(usize);
impl CircuitFn for Mac {
    fn run<B: Backend>(
        &self,
        b: &mut B,
        g: &[Bit<B::Wire>],
        e: &[Bit<B::Wire>],
    ) -> Vec<Bit<B::Wire>> {
        let mut acc = g.to_vec();
        for _ in 0..self.0 {
            let p = mul_lo(b, &acc, e);
            acc = add(b, &p, g);
        }
        acc
    }
}

fn peak_rss_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        })
        .unwrap_or(f64::NAN)
        / 1024.0
}

fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(10_000);
    let (x, y) = (0x1234_5678u32, 0x9abc_def1u32);
    let gi: Vec<bool> = (0..32).map(|i| (x >> i) & 1 == 1).collect();
    let ei: Vec<bool> = (0..32).map(|i| (y >> i) & 1 == 1).collect();
    let mut c = secinfer_gc::Counter::new();
    let w: Vec<Bit<u32>> = (0..32).map(|_| Bit::Wire(0)).collect();
    Mac(rounds).run(&mut c, &w, &w);
    let d = Block(Prg::new().next_block().0 | 1);
    let t = Instant::now();
    let f = Mac(rounds);
    let run = simulate(
        |ch| {
            let mut ot = OtExtReceiver::setup(ch, &mut Prg::new()).expect("ot");
            stream_evaluate(ch, &mut ot, &f, 32, &ei).expect("evaluate")
        },
        |ch| {
            let mut ot = OtExtSender::setup_with_delta(ch, &mut Prg::new(), d).expect("ot");
            stream_garble(ch, &mut ot, &f, &gi, 32).expect("garble")
        },
    );
    let dt = t.elapsed().as_secs_f64();
    let got = run
        .client
        .output
        .iter()
        .enumerate()
        .fold(0u32, |a, (i, &b)| a | ((b as u32) << i));
    let mut acc = x;
    for _ in 0..rounds {
        acc = acc.wrapping_mul(y).wrapping_add(x);
    }
    assert_eq!(got, acc, "streamed result");
    let bytes = run.client.cost.total().bytes();
    println!(
        "{} AND gates streamed in {:.2} s ({:.1} M AND/s end to end), {:.1} MB on the wire ({:.2} B/AND), peak RSS {:.0} MB, result correct",
        c.ands,
        dt,
        c.ands as f64 / dt / 1e6,
        bytes as f64 / 1e6,
        bytes as f64 / c.ands as f64,
        peak_rss_mb()
    );
}
