//! Garbling/evaluation throughput on one core and the 16384 × 8-bit ReLU end-to-end case.
//! `cargo run -p secinfer-gc --release --example speed`
use secinfer_gc::activation::{ActSpec, Func};
use secinfer_gc::garble::{Evaluator, Garbler, Scheme, SliceSource};
use secinfer_gc::shares::{evaluate_apply, garble_apply, share_circuit, ShareDomain};
use secinfer_net::simulate;
use secinfer_ot::{Block, OtExtReceiver, OtExtSender, Prg};
use std::time::Instant;

/// Nanoseconds this thread has been on a CPU (the machine is shared: wall time over-counts).
fn cpu_ns() -> f64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .next()
                .and_then(|v| v.parse::<f64>().ok())
        })
        .unwrap_or(f64::NAN)
}

/// Process CPU time (user + system, all threads, 10 ms ticks) in seconds.
fn process_cpu_s() -> f64 {
    let s = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let rest = s.rsplit(')').next().unwrap_or("");
    let f: Vec<f64> = rest
        .split_whitespace()
        .filter_map(|v| v.parse().ok())
        .collect();
    // fields after the command: state(0, not numeric, skipped by parse)... utime is the 14th field
    // field, i.e. index 10 among the numeric fields after `state`.
    (f.get(10).copied().unwrap_or(0.0) + f.get(11).copied().unwrap_or(0.0)) / 100.0
}

fn main() {
    let spec = ActSpec::default_for(Func::Tanh, 16).expect("default formats");
    let c = share_circuit(ShareDomain::Pow2(16), &spec).expect("circuit");
    let d = Block(Prg::new().next_block().0 | 1);
    for scheme in [Scheme::HalfGates, Scheme::ThreeHalves] {
        println!(
            "-- {} ({} bytes per 16-lane AND gate)",
            scheme.name(),
            scheme.table_bytes(16)
        );
        tables_speed(&c, d, scheme);
    }
    for _ in 0..3 {
        let n = 16384;
        let domain = ShareDomain::Pow2(8);
        let spec = ActSpec::default_for(Func::Relu, 8).expect("default formats");
        let ss: Vec<u64> = (0..n).map(|i| (i * 7) as u64 & 0xff).collect();
        let cs: Vec<u64> = (0..n).map(|i| (i * 13) as u64 & 0xff).collect();
        let run = simulate(
            move |ch| {
                let mut ot = OtExtReceiver::setup(ch, &mut Prg::new()).expect("ot");
                let t = Instant::now();
                let r = evaluate_apply(ch, &mut ot, domain, &spec, &cs).expect("eval");
                (r, t.elapsed().as_secs_f64())
            },
            move |ch| {
                let mut ot = OtExtSender::setup_with_delta(ch, &mut Prg::new(), d).expect("ot");
                let t = Instant::now();
                let r = garble_apply(ch, &mut ot, domain, &spec, &ss).expect("garble");
                (r, t.elapsed().as_secs_f64())
            },
        );
        let cc = run.client.cost;
        println!(
            "16384 x 8-bit ReLU (Z_2^8): client {:.1} ms, server {:.1} ms after OT setup; total wall {:.1} ms; offline {} B, online {} B; {} threads",
            run.client.output.1 * 1e3,
            run.server.output.1 * 1e3,
            run.wall_s * 1e3,
            cc.offline.bytes(),
            cc.online.bytes(),
            rayon::current_num_threads()
        );
        let sc = run.server.cost;
        println!(
            "   client offline {:.1} ms online {:.1} ms | server offline {:.1} ms online {:.1} ms",
            cc.offline.time_s * 1e3,
            cc.online.time_s * 1e3,
            sc.offline.time_s * 1e3,
            sc.online.time_s * 1e3
        );
    }

    // CPU cost of offline + online for 16384 8-bit ReLUs: 10 repetitions after one OT setup.
    let reps = 10;
    let n = 16384;
    let domain = ShareDomain::Pow2(8);
    let spec = ActSpec::default_for(Func::Relu, 8).expect("default formats");
    let ss: Vec<u64> = (0..n).map(|i| (i * 7) as u64 & 0xff).collect();
    let cs: Vec<u64> = (0..n).map(|i| (i * 13) as u64 & 0xff).collect();
    let run = simulate(
        move |ch| {
            let mut ot = OtExtReceiver::setup(ch, &mut Prg::new()).expect("ot");
            let (c0, t0) = (process_cpu_s(), Instant::now());
            for _ in 0..reps {
                evaluate_apply(ch, &mut ot, domain, &spec, &cs).expect("eval");
            }
            (process_cpu_s() - c0, t0.elapsed().as_secs_f64())
        },
        move |ch| {
            let mut ot = OtExtSender::setup_with_delta(ch, &mut Prg::new(), d).expect("ot");
            for _ in 0..reps {
                garble_apply(ch, &mut ot, domain, &spec, &ss).expect("garble");
            }
        },
    );
    let (cpu, wall) = run.client.output;
    println!(
        "16384 x 8-bit ReLU, offline+online, {reps} repetitions: {:.1} ms CPU (both parties, all threads) and {:.1} ms wall per repetition",
        cpu / reps as f64 * 1e3,
        wall / reps as f64 * 1e3
    );
}

/// Garbling and evaluation throughput of `scheme` on the tanh share circuit and a 32-bit
/// multiplier (one core, CPU time).
fn tables_speed(c: &secinfer_gc::Circuit, d: Block, scheme: Scheme) {
    let reps = 3000;
    // one chunk's tables buffer reused (as the protocol streams them out), garbled `reps` times
    let mut g = Garbler::<16>::new(d, 1, 0, Prg::from_seed(Block(1)))
        .expect("g")
        .with_scheme(scheme);
    let ins: Vec<[Block; 16]> = (0..c.n_inputs).map(|_| g.input()).collect();
    g.tables
        .reserve(c.and_count() as usize * scheme.table_bytes(16));
    let t = Instant::now();
    let cpu = cpu_ns();
    for _ in 0..reps {
        g.tables.clear();
        c.eval(&mut g, &ins);
    }
    let dt = t.elapsed().as_secs_f64();
    let dc = (cpu_ns() - cpu) / 1e9;
    let ands = c.and_count() as f64 * 16.0 * reps as f64;
    println!("garble 16-bit tanh share circuit: {} ANDs/circuit ({} XOR), {:.1} M AND/s wall, {:.1} M AND/s per CPU-second", c.and_count(), c.stats().xors, ands / dt / 1e6, ands / dc / 1e6);
    let tables = std::mem::take(&mut g.tables);
    let t = Instant::now();
    let cpu = cpu_ns();
    for _ in 0..reps {
        let mut e = Evaluator::<16, _>::new(1, 0, SliceSource::new(&tables))
            .expect("e")
            .with_scheme(scheme);
        c.eval(&mut e, &ins);
    }
    let dt = t.elapsed().as_secs_f64();
    let dc = (cpu_ns() - cpu) / 1e9;
    println!(
        "evaluate: {:.1} M AND/s wall, {:.1} M AND/s per CPU-second",
        ands / dt / 1e6,
        ands / dc / 1e6
    );
    // an AND-dominated circuit: 32-bit multiplier
    let m = secinfer_gc::Circuit::build(64, |b, x| {
        secinfer_gc::gadgets::mul_lo(b, &x[..32], &x[32..])
    });
    let ins: Vec<[Block; 16]> = (0..64).map(|_| g.input()).collect();
    g.tables
        .reserve(m.and_count() as usize * scheme.table_bytes(16));
    let reps = 1000;
    let t = Instant::now();
    let cpu = cpu_ns();
    for _ in 0..reps {
        g.tables.clear();
        m.eval(&mut g, &ins);
    }
    let dt = t.elapsed().as_secs_f64();
    let dc = (cpu_ns() - cpu) / 1e9;
    let ands = m.and_count() as f64 * 16.0 * reps as f64;
    println!("garble 32-bit multiplier: {} ANDs ({} XOR), {:.1} M AND/s wall, {:.1} M AND/s per CPU-second", m.and_count(), m.stats().xors, ands / dt / 1e6, ands / dc / 1e6);
}
