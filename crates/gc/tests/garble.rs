//! Garbling: the hash, local garble/evaluate against the plaintext backend, and the two-party
//! protocols (real OT extension) against the plaintext circuit, including hostile peers.
use rand::{Rng, SeedableRng};
use secinfer_gc::activation::{ActSpec, Fixed, Func};
use secinfer_gc::backend::Bit;
use secinfer_gc::garble::{Scheme, TccrHash};
use secinfer_gc::protocol::{stream_evaluate, stream_garble, CircuitFn};
use secinfer_gc::shares::{
    evaluate_apply, expected, garble_apply, share_circuit, ShareDomain, ShareEvaluator,
    ShareGarbler,
};
use secinfer_gc::{Circuit, GcError};
use secinfer_net::{simulate, Channel, Meter};
use secinfer_ot::{fixed_key_aes, Block, Prg};
mod common;
use common::ot_pair;

fn delta() -> Block {
    let mut prg = Prg::new();
    Block(prg.next_block().0 | 1)
}

#[test]
fn batched_hash_is_the_ot_crates_tccr() {
    let h = TccrHash::new();
    let mut prg = Prg::from_seed(Block(42));
    let xs = prg.blocks(32);
    let ts = prg.blocks(32);
    let mut ys = xs.clone();
    h.hash(&ts, &mut ys);
    for i in 0..32 {
        assert_eq!(ys[i], fixed_key_aes().tccr(ts[i], xs[i]));
    }
}

/// Garbles 8 half-gates copies locally with random inputs and evaluates them; outputs must
/// equal the plain circuit's bit for bit ([`common::local_roundtrip`]).
fn local_roundtrip(c: &Circuit, seed: u64) {
    common::local_roundtrip::<8>(c, Scheme::HalfGates, seed);
}

#[test]
fn garbled_activation_circuits_equal_plaintext_bit_for_bit() {
    for bits in [8u32, 12] {
        for f in [Func::Relu, Func::Sigmoid, Func::Tanh] {
            local_roundtrip(
                &ActSpec::default_for(f, bits)
                    .expect("default formats")
                    .circuit(),
                bits as u64,
            );
        }
    }
    let p = 1_048_573;
    let cg2 = ActSpec {
        func: Func::Sigmoid,
        input: fx(20, 12),
        act_in: fx(8, 4),
        act_out: fx(8, 6),
        output: fx(19, 12),
    };
    local_roundtrip(
        &share_circuit(ShareDomain::ModP(p), &cg2).expect("circuit"),
        1,
    );
}

fn random_shares(domain: ShareDomain, xs: &[i64], seed: u64) -> (Vec<u64>, Vec<u64>) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let m = domain.modulus();
    xs.iter()
        .map(|&x| {
            let s = (rng.gen::<u64>() as u128 % m) as u64;
            let xe = domain.embed(x);
            let c = ((xe as u128 + m - s as u128) % m) as u64;
            (s, c)
        })
        .unzip()
}

/// Runs garble_apply / evaluate_apply on `xs` and checks the reconstructed outputs.
fn two_party_case(domain: ShareDomain, spec: ActSpec, xs: &[i64]) {
    let (ss, cs) = random_shares(domain, xs, 77);
    let d = delta();
    let (so, co) = ot_pair(d);
    let (ss2, cs2) = (ss.clone(), cs.clone());
    let run = simulate(
        move |ch| {
            let mut ot = co(ch);
            evaluate_apply(ch, &mut ot, domain, &spec, &cs2)
        },
        move |ch| {
            let mut ot = so(ch);
            garble_apply(ch, &mut ot, domain, &spec, &ss2)
        },
    );
    let c_new = run.client.output.expect("client");
    let s_new = run.server.output.expect("server");
    let act = spec.circuit();
    for i in 0..xs.len() {
        let y = domain.add(c_new[i], s_new[i]);
        assert_eq!(
            y,
            expected(domain, &spec, &act, ss[i], cs[i]),
            "{domain:?} {spec:?} x={}",
            xs[i]
        );
        // and the plaintext circuit gives the same with the server's mask removed
        let yv = domain.lift(y);
        let f = spec
            .func
            .eval(spec.input.to_f64(domain.lift(domain.add(ss[i], cs[i]))));
        let ulp = 1.0 / (1u64 << spec.output.scale) as f64;
        let bound = match spec.func {
            Func::Relu | Func::Identity => 0.5 * ulp,
            _ => 1.5 * ulp,
        };
        if spec.input == spec.act_in && spec.act_out == spec.output {
            let sat = (
                spec.output.min_int() as f64 * ulp,
                spec.output.max_int() as f64 * ulp,
            );
            let fc = f.clamp(sat.0, sat.1);
            assert!(
                (spec.output.to_f64(yv) - fc).abs() <= bound + 1e-12,
                "error vs f64 at x={}",
                xs[i]
            );
        }
        assert!(s_new[i] as u128 <= domain.modulus());
    }
}

fn sample_inputs(bits: u32, exhaustive: bool) -> Vec<i64> {
    let lo = -(1i64 << (bits - 1));
    let hi = (1i64 << (bits - 1)) - 1;
    if exhaustive {
        (lo..=hi).collect()
    } else {
        let mut rng = rand::rngs::StdRng::seed_from_u64(bits as u64);
        let mut v: Vec<i64> = vec![lo, lo + 1, -1, 0, 1, hi - 1, hi];
        v.extend((0..300).map(|_| rng.gen_range(lo..=hi)));
        v
    }
}

#[test]
fn shares_in_shares_out_pow2_all_functions() {
    for f in [Func::Relu, Func::Sigmoid, Func::Tanh] {
        two_party_case(
            ShareDomain::Pow2(8),
            ActSpec::default_for(f, 8).expect("default formats"),
            &sample_inputs(8, true),
        );
        two_party_case(
            ShareDomain::Pow2(16),
            ActSpec::default_for(f, 16).expect("default formats"),
            &sample_inputs(16, false),
        );
    }
}

#[test]
fn shares_in_shares_out_mod_p() {
    // a 9-bit prime: every 9-bit lifted value, 8-bit outputs
    let p = 257;
    for f in [Func::Relu, Func::Sigmoid, Func::Tanh] {
        let spec = ActSpec {
            func: f,
            input: fx(9, 4),
            act_in: fx(8, 4),
            act_out: ActSpec::default_for(f, 8).expect("default formats").output,
            output: ActSpec::default_for(f, 8).expect("default formats").output,
        };
        let xs: Vec<i64> = (-128..=128).collect();
        two_party_case(ShareDomain::ModP(p), spec, &xs);
    }
    // CG-2: 20-bit prime shares → 8-bit sigmoid / ReLU → back to 19 bits
    let p = 1_048_573;
    for f in [Func::Relu, Func::Sigmoid] {
        let spec = ActSpec {
            func: f,
            input: fx(20, 12),
            act_in: fx(8, 4),
            act_out: ActSpec::default_for(f, 8).expect("default formats").output,
            output: fx(19, 12),
        };
        let mut xs = sample_inputs(20, false);
        xs.retain(|&x| x.unsigned_abs() <= (p - 1) / 2);
        two_party_case(ShareDomain::ModP(p), spec, &xs);
    }
}

#[test]
fn corrupted_table_gives_wrong_result_not_panic() {
    let domain = ShareDomain::Pow2(8);
    let spec = ActSpec::default_for(Func::Tanh, 8).expect("default formats");
    let xs: Vec<i64> = (-128..128).collect();
    let (ss, cs) = random_shares(domain, &xs, 1);
    let d = delta();
    let (so, co) = ot_pair(d);
    let n = xs.len();
    let run = simulate(
        move |ch| {
            let mut ot = co(ch);
            let mut e = ShareEvaluator::offline(ch, domain, &spec, n)?;
            for i in 0..64 {
                e.corrupt_table(i * 97, (i * 13) as u32);
            }
            e.online(ch, &mut ot, &cs)
        },
        move |ch| {
            let mut ot = so(ch);
            let g = ShareGarbler::offline(ch, d, domain, &spec, n)?;
            g.online(ch, &mut ot, &ss)
        },
    );
    let c_new = run
        .client
        .output
        .expect("a corrupted table is not detectable: the result is wrong");
    let s_new = run.server.output.expect("server");
    let (ss, cs) = random_shares(domain, &xs, 1);
    let act = spec.circuit();
    let wrong = (0..n)
        .filter(|&i| domain.add(c_new[i], s_new[i]) != expected(domain, &spec, &act, ss[i], cs[i]))
        .count();
    assert!(wrong > 0, "corruption must change some output");
}

/// A channel that flips one bit of the `target`-th frame it receives.
struct Flip<C: Channel> {
    inner: C,
    seen: usize,
    target: usize,
}
impl<C: Channel> Channel for Flip<C> {
    fn send_frame(&mut self, f: &[u8]) -> secinfer_net::Result<()> {
        self.inner.send_frame(f)
    }
    fn recv_frame(&mut self) -> secinfer_net::Result<Vec<u8>> {
        let mut f = self.inner.recv_frame()?;
        if self.seen == self.target && !f.is_empty() {
            let i = f.len() / 2;
            f[i] ^= 0x10;
        }
        self.seen += 1;
        Ok(f)
    }
    fn flush(&mut self) -> secinfer_net::Result<()> {
        self.inner.flush()
    }
    fn meter(&self) -> &Meter {
        self.inner.meter()
    }
    fn meter_mut(&mut self) -> &mut Meter {
        self.inner.meter_mut()
    }
    fn max_frame(&self) -> usize {
        self.inner.max_frame()
    }
}

struct AddTree;
impl CircuitFn for AddTree {
    fn run<B: secinfer_gc::Backend>(
        &self,
        b: &mut B,
        g: &[Bit<B::Wire>],
        e: &[Bit<B::Wire>],
    ) -> Vec<Bit<B::Wire>> {
        let mut acc = secinfer_gc::gadgets::mul_lo(b, &g[..16], &e[..16]);
        for _ in 0..40 {
            acc = secinfer_gc::gadgets::mul_lo(b, &acc, &e[..16]);
        }
        acc
    }
}

fn stream_case(
    flip_frame: Option<usize>,
    truncate: bool,
) -> (Result<Vec<bool>, GcError>, u64, u64) {
    let d = delta();
    let (so, co) = ot_pair(d);
    let (x, y) = (0x1234u64, 0x0f0fu64);
    let gi: Vec<bool> = (0..16).map(|i| (x >> i) & 1 == 1).collect();
    let ei: Vec<bool> = (0..16).map(|i| (y >> i) & 1 == 1).collect();
    let run = simulate(
        move |ch| {
            let mut ot = co(ch);
            match flip_frame {
                Some(t) => {
                    let mut fl = Flip {
                        inner: ch,
                        seen: 0,
                        target: t,
                    };
                    stream_evaluate(&mut fl, &mut ot, &AddTree, 16, &ei)
                }
                None => stream_evaluate(ch, &mut ot, &AddTree, 16, &ei),
            }
        },
        move |ch| {
            let mut ot = so(ch);
            if truncate {
                // send the prologue and one frame of tables, then hang up
                let _ = ch.send_pod(&[5u64]);
                let _ = ch.send_pod(&vec![Block::ZERO; 16]);
                let m0 = ot.send_cot(ch, 16).expect("cot");
                let _ = ch.send_pod(&m0);
                // Whole gates (3 × 16 lanes × 32 bytes): a frame of partial gates is Malformed.
                let _ = ch.send_pod(&vec![Block::ZERO; 96]);
                let _ = ch.flush();
                return Ok(());
            }
            stream_garble(ch, &mut ot, &AddTree, &gi, 16)
        },
    );
    let mut acc = x.wrapping_mul(y) & 0xffff;
    for _ in 0..40 {
        acc = acc.wrapping_mul(y) & 0xffff;
    }
    let _ = run.server.output;
    (run.client.output, acc, 0)
}

#[test]
fn streamed_circuit_matches_plaintext() {
    let (r, want, _) = stream_case(None, false);
    let bits = r.expect("stream");
    let got = bits
        .iter()
        .enumerate()
        .fold(0u64, |a, (i, &b)| a | ((b as u64) << i));
    assert_eq!(got, want);
}

#[test]
fn corrupted_label_or_table_from_peer_gives_error_or_wrong_result() {
    // frames the evaluator receives after OT setup: nonce, garbler labels, COT..., corrections,
    // tables...: flip each of the first few frames in turn; never a panic.
    let (_, want, _) = stream_case(None, false);
    let mut wrong_or_err = 0;
    for t in 0..12 {
        let (r, _, _) = stream_case(Some(t), false);
        match r {
            Ok(bits) => {
                let got = bits
                    .iter()
                    .enumerate()
                    .fold(0u64, |a, (i, &b)| a | ((b as u64) << i));
                if got != want {
                    wrong_or_err += 1;
                }
            }
            Err(_) => wrong_or_err += 1,
        }
    }
    assert!(wrong_or_err >= 4, "corruptions must show: {wrong_or_err}");
}

#[test]
fn truncated_table_stream_gives_typed_error() {
    let (r, _, _) = stream_case(None, true);
    match r {
        Err(GcError::Truncated { .. }) => {}
        Err(e) => panic!("expected Truncated, got {e}"),
        Ok(_) => panic!("a truncated stream must not produce a result"),
    }
    // batched offline phase: garbler hangs up halfway through the tables
    let spec = ActSpec::default_for(Func::Sigmoid, 8).expect("default formats");
    let domain = ShareDomain::Pow2(8);
    let run = simulate(
        move |ch| ShareEvaluator::offline(ch, domain, &spec, 64).map(|_| ()),
        move |ch| {
            let _ = ch.send_pod(&[1u64]);
            // Whole gates (3 × 16 lanes × 32 bytes): a frame of partial gates is Malformed.
            let _ = ch.send_pod(&vec![Block::ZERO; 96]);
            let _ = ch.flush();
        },
    );
    assert!(
        matches!(run.client.output, Err(GcError::Truncated { .. })),
        "offline truncation"
    );
}

#[test]
fn frame_source_reads_across_uneven_frames_from_any_offset() {
    use secinfer_gc::garble::{FrameSource, TableSource};
    let bytes: Vec<u8> = (0..1600u32).map(|i| (i * 7 + i / 256) as u8).collect();
    // Frames of whole blocks (half-gates) and of odd byte counts (three-halves gates).
    let sizes = [112usize, 16, 480, 394, 598];
    let mut frames = Vec::new();
    let mut starts = Vec::new();
    let mut at = 0;
    for s in sizes {
        starts.push(at as u64);
        frames.push(bytes[at..at + s].to_vec());
        at += s;
    }
    for start in [0usize, 3, 48, 112, 127, 128, 129, 607, 608, 1001, 1599] {
        let mut src = FrameSource::at(&frames, &starts, start as u64);
        let mut out = vec![0u8; 1600 - start];
        src.fill(&mut out).expect("fill");
        assert_eq!(out, bytes[start..].to_vec(), "start {start}");
        let mut more = [0u8; 1];
        assert!(matches!(
            src.fill(&mut more),
            Err(GcError::Truncated { .. })
        ));
    }
}

#[test]
fn invalid_parameters_are_typed_errors() {
    let relu8 = ActSpec::default_for(Func::Relu, 8).expect("default formats");
    assert!(matches!(
        share_circuit(ShareDomain::Pow2(12), &relu8),
        Err(GcError::InvalidArgument(_))
    ));
    assert!(matches!(
        share_circuit(ShareDomain::ModP(256), &relu8),
        Err(GcError::InvalidArgument(_))
    ));
    // 2^8 > 251: an 8-bit output does not fit a mask mod 251
    let spec = ActSpec {
        input: fx(8, 4),
        ..relu8
    };
    assert!(matches!(
        share_circuit(ShareDomain::ModP(251), &spec),
        Err(GcError::InvalidArgument(_))
    ));
    let d = delta();
    let (so, co) = ot_pair(d);
    let run = simulate(
        move |ch| {
            let mut ot = co(ch);
            evaluate_apply(ch, &mut ot, ShareDomain::Pow2(8), &relu8, &[300])
        },
        move |ch| {
            let mut ot = so(ch);
            garble_apply(ch, &mut ot, ShareDomain::Pow2(8), &relu8, &[1])
        },
    );
    assert!(
        matches!(run.client.output, Err(GcError::InvalidArgument(_))),
        "share ≥ 2^8 refused"
    );
}

#[test]
fn two_party_batch_outputs_equal_plaintext_bit_for_bit() {
    use secinfer_gc::protocol::{evaluate_offline, evaluate_online, garble_offline, garble_online};
    // garbler: two 8-bit words; evaluator: two 8-bit words; outputs: argmax index, max, product,
    // and a constant bit
    let circ = Circuit::build(32, |b, x| {
        let words: Vec<Vec<Bit<u32>>> = x.chunks(8).map(|c| c.to_vec()).collect();
        let (i, m) = secinfer_gc::gadgets::argmax(b, &words);
        let p = secinfer_gc::gadgets::mul_lo(b, &words[0], &words[3]);
        let mut out = i;
        out.extend(m);
        out.extend(p);
        out.push(Bit::Const(true));
        out
    });
    let n = 37;
    let mut rng = rand::rngs::StdRng::seed_from_u64(21);
    let gi: Vec<bool> = (0..n * 16).map(|_| rng.gen()).collect();
    let ei: Vec<bool> = (0..n * 16).map(|_| rng.gen()).collect();
    let d = delta();
    let (so, co) = ot_pair(d);
    let (c1, c2) = (circ.clone(), circ.clone());
    let (gi2, ei2) = (gi.clone(), ei.clone());
    let run = simulate(
        move |ch| {
            let mut ot = co(ch);
            let b = evaluate_offline(ch, &c1, 16, n)?;
            evaluate_online(ch, &mut ot, &c1, &b, &ei2)
        },
        move |ch| {
            let mut ot = so(ch);
            let b = garble_offline(ch, &c2, 16, n, d)?;
            garble_online(ch, &mut ot, &b, &gi2)
        },
    );
    run.server.output.expect("garbler");
    let got = run.client.output.expect("evaluator");
    let no = circ.n_outputs();
    for i in 0..n {
        let mut ins = gi[i * 16..(i + 1) * 16].to_vec();
        ins.extend_from_slice(&ei[i * 16..(i + 1) * 16]);
        assert_eq!(
            &got[i * no..(i + 1) * no],
            &circ.eval_plain(&ins)[..],
            "instance {i}"
        );
    }
}

/// Offline-COT evaluator labels (`garble_offline_with` + `set_evaluator_labels`) with outputs
/// revealed to the garbler and, separately, to the evaluator: both equal the plaintext circuit,
/// and the evaluator's returned permute bits alone do not decode (it holds no decoding bits).
#[test]
fn preset_evaluator_labels_and_garbler_decoding_equal_plaintext() {
    use secinfer_gc::protocol::{
        evaluate_offline_with, evaluate_online_preset, garble_offline_with, garble_online_preset,
        pack_bits, unpack_bits, wire_outputs, Reveal,
    };
    let circ = Circuit::build(32, |b, x| {
        let words: Vec<Vec<Bit<u32>>> = x.chunks(8).map(|c| c.to_vec()).collect();
        let s = secinfer_gc::gadgets::add(b, &words[0], &words[2]);
        let mut out = secinfer_gc::gadgets::mul_lo(b, &s, &words[3]);
        out.extend(secinfer_gc::gadgets::sub(b, &words[1], &words[3]));
        out.push(Bit::Const(true));
        out
    });
    let n = 41;
    let mut rng = rand::rngs::StdRng::seed_from_u64(33);
    let gi: Vec<bool> = (0..n * 16).map(|_| rng.gen()).collect();
    let ei: Vec<bool> = (0..n * 16).map(|_| rng.gen()).collect();
    let no = circ.n_outputs();
    let wo = wire_outputs(&circ);
    let want: Vec<bool> = (0..n)
        .flat_map(|i| {
            let mut ins = gi[i * 16..(i + 1) * 16].to_vec();
            ins.extend_from_slice(&ei[i * 16..(i + 1) * 16]);
            circ.eval_plain(&ins)
        })
        .collect();
    // `pad` > 0: the labels are a range of a larger shared buffer (as the GRU session passes
    // them), after `pad` COTs that belong to something else.
    for (reveal, pad) in [
        (Reveal::Garbler, 0),
        (Reveal::Evaluator, 0),
        (Reveal::Garbler, 5),
        (Reveal::Evaluator, 7),
    ] {
        let d = delta();
        let (so, co) = ot_pair(d);
        let (c1, c2) = (circ.clone(), circ.clone());
        let (gi2, mut ei2) = (gi.clone(), vec![false; pad]);
        ei2.extend_from_slice(&ei);
        let run = simulate(
            move |ch| {
                let mut ot = co(ch);
                let labels = ot.recv_cot(ch, &ei2)?;
                let mut b = evaluate_offline_with(ch, &c1, 16, n, reveal)?;
                if pad == 0 {
                    b.set_evaluator_labels(&c1, labels)?;
                } else {
                    let all = std::sync::Arc::new(labels);
                    let len = all.len();
                    // Wrong lengths and ranges past the buffer are refused.
                    for bad in [pad - 1..len, pad..len - 1, pad + 1..len + 1] {
                        assert!(b
                            .set_evaluator_labels_shared(&c1, all.clone(), bad)
                            .is_err());
                    }
                    b.set_evaluator_labels_shared(&c1, all.clone(), pad..len)?;
                    // Once only.
                    assert!(b
                        .set_evaluator_labels_shared(&c1, all.clone(), pad..len)
                        .is_err());
                }
                let out = evaluate_online_preset(ch, &c1, &b)?;
                if reveal == Reveal::Garbler {
                    ch.send_pod(&pack_bits(&out))?;
                    ch.flush()?;
                }
                Ok::<_, GcError>(out)
            },
            move |ch| {
                let mut ot = so(ch);
                let m0 = ot.send_cot(ch, pad + n * 16)?;
                let b = garble_offline_with(ch, &c2, 16, n, d, Some(&m0[pad..]), reveal)?;
                garble_online_preset(ch, &b, &gi2)?;
                if reveal == Reveal::Garbler {
                    let p: Vec<u8> = ch.recv_pod((n * wo).div_ceil(8))?;
                    b.decode(&c2, &unpack_bits(&p, n * wo)).map(Some)
                } else {
                    Ok(None)
                }
            },
        );
        let got_e = run.client.output.expect("evaluator");
        let got_g = run.server.output.expect("garbler");
        match reveal {
            Reveal::Garbler => {
                assert_eq!(got_g.as_deref(), Some(&want[..]));
                assert_eq!(got_e.len(), n * wo);
                // The permute bits are not the outputs (they are masked by the garbler's
                // decoding bits): with 41 × 17 wire outputs they differ somewhere.
                let wires_only: Vec<bool> = (0..n)
                    .flat_map(|i| want[i * no..i * no + wo].to_vec())
                    .collect();
                assert_ne!(got_e, wires_only);
            }
            Reveal::Evaluator => assert_eq!(got_e, want),
        }
    }
}

/// The evaluator reads the garbler's online labels in place: a frame one block short or long
/// (hostile or broken garbler) is a typed error, not a panic or a wrong evaluation.
#[test]
fn preset_online_labels_of_the_wrong_length_are_refused() {
    use secinfer_gc::protocol::{
        evaluate_offline_with, evaluate_online_preset, garble_offline_with, Reveal,
    };
    let circ = Circuit::build(8, |b, x| secinfer_gc::gadgets::add(b, &x[..4], &x[4..]));
    let n = 3;
    for delta_blocks in [-1i64, 1] {
        let d = delta();
        let (so, co) = ot_pair(d);
        let (c1, c2) = (circ.clone(), circ.clone());
        let run = simulate(
            move |ch| {
                let mut ot = co(ch);
                let labels = ot.recv_cot(ch, &[true; 12])?;
                let mut b = evaluate_offline_with(ch, &c1, 4, n, Reveal::Evaluator)?;
                b.set_evaluator_labels(&c1, labels)?;
                evaluate_online_preset(ch, &c1, &b)
            },
            move |ch| {
                let mut ot = so(ch);
                let m0 = ot.send_cot(ch, n * 4)?;
                let _b = garble_offline_with(ch, &c2, 4, n, d, Some(&m0), Reveal::Evaluator)?;
                let blocks = (n as i64 * 4 + delta_blocks) as usize;
                ch.send_pod(&vec![Block::ZERO; blocks])?;
                ch.flush()?;
                Ok::<_, GcError>(())
            },
        );
        assert!(run.client.output.is_err(), "{delta_blocks}");
    }
}

/// The replay's slot-level gates (`Backend::and_slots`, `xor_slots`) in every aliasing case: a
/// wire ANDed or XORed with itself and outputs reusing an input's slot (a long chain frees
/// slots as it goes), garbled and evaluated against plaintext.
#[test]
fn replay_with_aliased_slots_equals_plaintext() {
    use secinfer_gc::backend::{and, xor};
    let c = Circuit::build(6, |b, x| {
        let sq = and(b, &x[0], &x[0]);
        let zz = xor(b, &x[1], &x[1]);
        let mut acc = and(b, &x[2], &x[3]);
        for i in 0..12 {
            acc = and(b, &acc, &x[i % 6]);
            acc = xor(b, &acc, &x[(i + 1) % 6]);
            acc = and(b, &acc, &acc);
        }
        vec![sq, zz, acc]
    });
    for seed in 0..4 {
        local_roundtrip(&c, seed);
    }
}

/// A format the test knows to be valid.
fn fx(bits: u32, scale: u32) -> Fixed {
    Fixed::new(bits, scale).expect("valid format")
}
