//! `secinfer bench gates` and `secinfer bench gc`: garbled-circuit activations.
//!
//! `gates` is local: AND gates and AND depth of ReLU, sigmoid and tanh at each width, alone and
//! inside the shares-in/shares-out circuit of each share domain, beside CryptoGRU's figures, with
//! each activation's max ULP error against the exact f64 function (exhaustive up to 2^20 inputs).
//!
//! `gc` is two-party: N secret-shared values through one batched activation. The client
//! evaluates, the server garbles. Setup = OT-extension base OTs; offline = garbling, table and
//! mask-label transfer; online = the server's share labels, the client's COTs, evaluation. The
//! inputs come from a public seed so both processes can regenerate them, and the reconstructed
//! outputs are checked against the plaintext circuit after metering.
use crate::error::Error;
use crate::pair::{run_pair, NetArgs};
use crate::report::{BenchRecord, Reporter};
use clap::{Args, ValueEnum};
use secinfer_gc::activation::{eval_plain, max_ulp_error, ActSpec, Fixed, Func};
use secinfer_gc::shares::{share_circuit, ShareDomain, ShareEvaluator, ShareGarbler};
use secinfer_net::{DynChannel, Phase};
use secinfer_ot::{Block, OtExtReceiver, OtExtSender, Prg};
use std::time::Instant;

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum FnArg {
    /// max(x, 0).
    Relu,
    /// 1 / (1 + e^-x).
    Sigmoid,
    /// tanh(x).
    Tanh,
}

impl FnArg {
    fn func(self) -> Func {
        match self {
            FnArg::Relu => Func::Relu,
            FnArg::Sigmoid => Func::Sigmoid,
            FnArg::Tanh => Func::Tanh,
        }
    }
}

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum DomainArg {
    /// Shares mod 2^bits.
    Pow2,
    /// Shares mod the smallest prime above 2^bits (bits + 1 bits; the value is saturated to
    /// `bits` bits before the activation).
    Modp,
    /// CryptoGRU CG-2: shares mod the 20-bit prime 1048573, requantised (20, bits−4+12) →
    /// (bits, bits−4) → f → back to 19 bits.
    Cg2,
}

#[derive(Args, Debug)]
pub struct GatesArgs {
    /// Widths to tabulate.
    #[arg(long, value_delimiter = ',', default_values_t = vec![8u32, 12, 16, 20])]
    pub bits: Vec<u32>,
}

#[derive(Args, Debug)]
pub struct GcArgs {
    /// The activation.
    #[arg(long = "fn", value_enum, default_value_t = FnArg::Relu)]
    pub func: FnArg,
    /// Activation width (input format (bits, bits−4); sigmoid/tanh output (bits, bits−2)).
    #[arg(long, default_value_t = 8)]
    pub bits: u32,
    /// Number of secret-shared values.
    #[arg(long, default_value_t = 16384)]
    pub count: usize,
    /// Share domain.
    #[arg(long, value_enum, default_value_t = DomainArg::Pow2)]
    pub domain: DomainArg,
    #[command(flatten)]
    pub net: NetArgs,
}

/// The 20-bit prime of the CG-2 case (2^20 − 3).
const CG2_PRIME: u64 = 1_048_573;
const SEED: Block = Block(0x5ec1_f3e0_0000_0000_0000_0000_0000_0063);

fn is_prime(n: u64) -> bool {
    n >= 2
        && (2..)
            .take_while(|d| d * d <= n)
            .all(|d| !n.is_multiple_of(d))
}

fn prime_above(x: u64) -> u64 {
    (x + 1..).find(|&p| is_prime(p)).unwrap_or(x + 1)
}

impl DomainArg {
    fn name(self) -> &'static str {
        match self {
            DomainArg::Pow2 => "pow2",
            DomainArg::Modp => "modp",
            DomainArg::Cg2 => "cg2",
        }
    }
}

/// The share modulus as a reader writes it: `2^8`, or the prime itself.
fn modulus_name(d: ShareDomain) -> String {
    match d {
        ShareDomain::Pow2(b) => format!("2^{b}"),
        ShareDomain::ModP(p) => p.to_string(),
    }
}

/// The domain and spec of a case.
fn case(func: Func, bits: u32, domain: DomainArg) -> Result<(ShareDomain, ActSpec), Error> {
    let act = ActSpec::default_for(func, bits)?;
    let fx = |b, s| Fixed::new(b, s).map_err(secinfer_gc::GcError::from);
    Ok(match domain {
        DomainArg::Pow2 => (ShareDomain::Pow2(bits), act),
        DomainArg::Modp => {
            let p = prime_above(1 << bits);
            (
                ShareDomain::ModP(p),
                ActSpec {
                    input: fx(bits + 1, act.input.scale)?,
                    ..act
                },
            )
        }
        DomainArg::Cg2 => {
            let inp = fx(20, act.input.scale + 12)?;
            let out = fx(19, act.act_out.scale + 12)?;
            (
                ShareDomain::ModP(CG2_PRIME),
                ActSpec {
                    input: inp,
                    output: out,
                    ..act
                },
            )
        }
    })
}

/// CryptoGRU's figures (non-XOR gates), where the paper gives one.
fn paper(func: Func, bits: u32) -> serde_json::Value {
    match (func, bits) {
        (Func::Relu, 8) => 24.into(),
        (Func::Tanh, 8) => 95.into(),
        (Func::Relu, 12) => 30.into(),
        (Func::Tanh, 12) => "> 2000".into(),
        _ => serde_json::Value::Null,
    }
}

pub fn run_gates(args: GatesArgs, out: &mut Reporter) -> Result<(), Error> {
    for &bits in &args.bits {
        if !(4..=20).contains(&bits) {
            return Err(Error::msg("--bits must be within 4..=20"));
        }
        for func in [Func::Relu, Func::Sigmoid, Func::Tanh] {
            let t = Instant::now();
            let act = ActSpec::default_for(func, bits)?;
            let (ulp, checked, exhaustive) = max_ulp_error(&act);
            let mut variants: Vec<(&str, Option<ShareDomain>, ActSpec)> =
                vec![("activation only", None, act)];
            for d in [DomainArg::Pow2, DomainArg::Modp] {
                let (dom, spec) = case(func, bits, d)?;
                variants.push((
                    if d == DomainArg::Pow2 {
                        "shares mod 2^bits"
                    } else {
                        "shares mod p"
                    },
                    Some(dom),
                    spec,
                ));
            }
            if bits == 8 && func != Func::Tanh {
                let (dom, spec) = case(func, bits, DomainArg::Cg2)?;
                variants.push(("CG-2: mod p(20 bit) -> 8 bit -> 19 bit", Some(dom), spec));
            }
            for (name, dom, spec) in variants {
                let c = match dom {
                    None => spec.circuit(),
                    Some(d) => share_circuit(d, &spec)?,
                };
                let st = c.stats();
                let mut rec = BenchRecord::local("gates", t.elapsed().as_secs_f64())
                    .param("fn", func.name())
                    .param("bits", bits)
                    .param("variant", name)
                    .param(
                        "in_fmt",
                        format!("({},{})", act.input.bits, act.input.scale),
                    )
                    .param(
                        "out_fmt",
                        format!("({},{})", act.output.bits, act.output.scale),
                    );
                if let Some(ShareDomain::ModP(p)) = dom {
                    rec = rec.param("p", p);
                }
                out.emit(
                    rec.field("and_gates", st.ands)
                        .field("and_depth", st.and_depth)
                        .field("xor_gates", st.xors + st.nots)
                        .field("paper_non_xor", paper(func, bits))
                        .field("max_ulp", ulp)
                        .field("inputs_checked", checked)
                        .field("exhaustive", exhaustive),
                );
            }
        }
    }
    Ok(())
}

/// Public bench inputs: the value shares of both parties.
fn inputs(domain: ShareDomain, n: usize) -> (Vec<u64>, Vec<u64>) {
    let mut prg = Prg::from_seed(SEED);
    let m = domain.modulus() as u64;
    let s: Vec<u64> = (0..n).map(|_| prg.below(m)).collect();
    let c: Vec<u64> = (0..n).map(|_| prg.below(m)).collect();
    (s, c)
}

pub fn run_gc(args: GcArgs, out: &mut Reporter) -> Result<(), Error> {
    let func = args.func.func();
    if !(4..=20).contains(&args.bits) {
        return Err(Error::msg("--bits must be within 4..=20"));
    }
    if args.count == 0 {
        return Err(Error::msg("--count must be positive"));
    }
    let (domain, spec) = case(func, args.bits, args.domain)?;
    let circ = share_circuit(domain, &spec)?;
    let n = args.count;
    let (ss, cs) = inputs(domain, n);
    let (ss2, cs2) = (ss.clone(), cs.clone());
    let r = run_pair(
        &args.net,
        move |ch: &mut DynChannel| -> Result<Vec<u64>, Error> {
            let mut ot = OtExtReceiver::setup(ch, &mut Prg::new())?;
            ch.set_phase(Phase::Offline);
            let e = ShareEvaluator::offline(ch, domain, &spec, n)?;
            ch.set_phase(Phase::Online);
            Ok(e.online(ch, &mut ot, &cs2)?)
        },
        move |ch: &mut DynChannel| -> Result<Vec<u64>, Error> {
            let mut prg = Prg::new();
            let delta = Block(prg.next_block().0 | 1);
            let mut ot = OtExtSender::setup_with_delta(ch, &mut prg, delta)?;
            ch.set_phase(Phase::Offline);
            let g = ShareGarbler::offline(ch, delta, domain, &spec, n)?;
            ch.set_phase(Phase::Online);
            Ok(g.online(ch, &mut ot, &ss2)?)
        },
    )?;
    // check every output against the plaintext circuit (after metering)
    let act = spec.circuit();
    for i in 0..n {
        let x = domain.lift(domain.add(ss[i], cs[i]));
        let want = domain.embed(eval_plain(&act, &spec, x));
        if domain.add(r.client[i], r.server[i]) != want {
            return Err(Error::msg(format!(
                "bench gc: value {i} reconstructs wrongly"
            )));
        }
    }
    let (ulp, _, _) = max_ulp_error(&ActSpec::simple(func, spec.act_in, spec.act_out));
    let st = circ.stats();
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let ands = st.ands * n as u64;
    let rec = BenchRecord::from_costs("gc", r.wall_s, &r.client_cost, &r.server_cost)
        .param("fn", func.name())
        .param("bits", args.bits)
        .param("count", n)
        .param("domain", args.domain.name())
        .param("modulus", modulus_name(domain))
        .param("net", args.net.net_name())
        .param("profile", args.net.profile.name)
        .param("threads", threads);
    let offline_bytes = r.client_cost.offline.bytes();
    let end_to_end = r
        .client_cost
        .offline
        .time_s
        .max(r.server_cost.offline.time_s)
        + r.client_cost.online.time_s.max(r.server_cost.online.time_s);
    out.emit(
        rec.field("and_gates", ands)
            .field("and_per_value", st.ands)
            .field("and_depth", st.and_depth)
            .field("bytes_per_and", offline_bytes as f64 / ands.max(1) as f64)
            .field("table_bytes_per_and", 32)
            .field("max_ulp", ulp)
            .field("offline_online_s", end_to_end)
            .field("per_second", n as f64 / end_to_end),
    );
    Ok(())
}
