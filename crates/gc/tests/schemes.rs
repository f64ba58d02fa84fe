//! Both AND-gate schemes (half-gates, three-halves) against the plaintext circuit: local
//! garble/evaluate on random and gadget/activation circuits in every lane, table mutations,
//! short and long table sources, and the batched two-party protocol with preset (COT) labels
//! and garbler-side decoding.
use rand::{Rng, SeedableRng};
use secinfer_gc::activation::{ActSpec, Fixed, Func};
use secinfer_gc::backend::{and, not, xor, Bit};
use secinfer_gc::garble::{Evaluator, Garbler, Scheme, SliceSource};
use secinfer_gc::protocol::{
    evaluate_known, evaluate_offline_scheme, evaluate_online_preset, garble_batches,
    garble_online_preset, pack_bits, recv_evaluate_known, unpack_bits, wire_outputs, BatchJob,
    Reveal, LANES,
};
use secinfer_gc::shares::{share_circuit, ShareDomain};
use secinfer_gc::{Circuit, GcError};
use secinfer_net::{simulate, Channel};
use secinfer_ot::{Block, Prg};
mod common;
use common::{delta, local_roundtrip, ot_pair};

const SCHEMES: [Scheme; 2] = [Scheme::HalfGates, Scheme::ThreeHalves];

/// A random circuit of `gates` gates over `n_in` inputs (AND, XOR, NOT, constants, a wire
/// combined with itself), every tenth wire an output.
fn random_circuit(n_in: usize, gates: usize, seed: u64) -> Circuit {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    Circuit::build(n_in, |b, x| {
        let mut w: Vec<Bit<u32>> = x.to_vec();
        for _ in 0..gates {
            let p = w[rng.gen_range(0..w.len())];
            let q = w[rng.gen_range(0..w.len())];
            let o = match rng.gen_range(0..10) {
                0..=4 => and(b, &p, &q),
                5..=7 => xor(b, &p, &q),
                8 => not(b, &p),
                _ => and(b, &p, &Bit::Const(rng.gen())),
            };
            w.push(o);
        }
        let mut outs: Vec<Bit<u32>> = w.iter().skip(n_in).step_by(10).copied().collect();
        outs.push(*w.last().expect("wires"));
        outs
    })
}

/// Random garbler and evaluator inputs for `n` copies (`n × g_in`, `n × e_in`, instance-major)
/// and the plaintext outputs they give.
fn random_batch(
    circ: &Circuit,
    g_in: usize,
    n: usize,
    seed: u64,
) -> (Vec<bool>, Vec<bool>, Vec<bool>) {
    let e_in = circ.n_inputs - g_in;
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let gi: Vec<bool> = (0..n * g_in).map(|_| rng.gen()).collect();
    let ei: Vec<bool> = (0..n * e_in).map(|_| rng.gen()).collect();
    let want = (0..n)
        .flat_map(|i| {
            let mut ins = gi[i * g_in..(i + 1) * g_in].to_vec();
            ins.extend_from_slice(&ei[i * e_in..(i + 1) * e_in]);
            circ.eval_plain(&ins)
        })
        .collect();
    (gi, ei, want)
}

#[test]
fn random_circuits_equal_plaintext_in_every_lane_for_both_schemes() {
    for seed in 0..12u64 {
        let c = random_circuit(6 + seed as usize % 5, 60 + 17 * seed as usize, seed);
        for s in SCHEMES {
            local_roundtrip::<1>(&c, s, seed);
            local_roundtrip::<3>(&c, s, seed + 100);
            local_roundtrip::<8>(&c, s, seed + 200);
            local_roundtrip::<16>(&c, s, seed + 300);
        }
    }
}

#[test]
fn gadget_and_activation_circuits_equal_plaintext_for_both_schemes() {
    let mut circuits = Vec::new();
    for bits in [8u32, 12] {
        for f in [Func::Relu, Func::Sigmoid, Func::Tanh] {
            circuits.push(
                ActSpec::default_for(f, bits)
                    .expect("default formats")
                    .circuit(),
            );
        }
    }
    let cg2 = ActSpec {
        func: Func::Sigmoid,
        input: fx(20, 12),
        act_in: fx(8, 4),
        act_out: fx(8, 6),
        output: fx(19, 12),
    };
    circuits.push(share_circuit(ShareDomain::ModP(1_048_573), &cg2).expect("circuit"));
    circuits.push(
        share_circuit(
            ShareDomain::Pow2(12),
            &ActSpec::default_for(Func::Tanh, 12).expect("default formats"),
        )
        .expect("circuit"),
    );
    circuits.push(Circuit::build(32, |b, x| {
        let words: Vec<Vec<Bit<u32>>> = x.chunks(8).map(|c| c.to_vec()).collect();
        let (i, m) = secinfer_gc::gadgets::argmax(b, &words);
        let mut out = i;
        out.extend(m);
        out.extend(secinfer_gc::gadgets::mul_lo(b, &words[0], &words[3]));
        out
    }));
    for (k, c) in circuits.iter().enumerate() {
        let mut bytes = [0usize; 2];
        for (s, b) in SCHEMES.iter().zip(bytes.iter_mut()) {
            *b = local_roundtrip::<16>(c, *s, k as u64);
        }
        // 394 against 512 bytes per 16-lane AND gate.
        assert_eq!(bytes[1] * 512, bytes[0] * 394, "circuit {k}");
    }
}

/// Flipping any single bit of a one-AND circuit's table makes some input combination decode to
/// a label that is neither of the output wire's two labels (every table bit is used in some
/// row), for both schemes and every lane.
#[test]
fn every_table_bit_matters() {
    const L: usize = 16;
    let c = Circuit::build(2, |b, x| vec![and(b, &x[0], &x[1])]);
    for s in SCHEMES {
        let mut prg = Prg::from_seed(Block(77));
        let d = delta(&mut prg);
        let mut g = Garbler::<L>::new(d, 3, 0, Prg::from_seed(Block(5)))
            .expect("garbler")
            .with_scheme(s);
        let zeros: Vec<[Block; L]> = (0..2).map(|_| g.input()).collect();
        let out0 = match c.eval(&mut g, &zeros)[0] {
            Bit::Wire(w) => w,
            Bit::Const(_) => panic!("wire"),
        };
        let tables = std::mem::take(&mut g.tables);
        let eval = |t: &[u8], va: bool, vb: bool| -> [Block; L] {
            let mut ev = Evaluator::<L, _>::new(3, 0, SliceSource::new(t))
                .expect("evaluator")
                .with_scheme(s);
            let ins: Vec<[Block; L]> = vec![
                std::array::from_fn(|l| zeros[0][l] ^ d.and_bit(va)),
                std::array::from_fn(|l| zeros[1][l] ^ d.and_bit(vb)),
            ];
            let o = c.eval(&mut ev, &ins);
            ev.finish().expect("evaluate");
            match o[0] {
                Bit::Wire(w) => w,
                Bit::Const(_) => panic!("wire"),
            }
        };
        for (va, vb) in [(false, false), (false, true), (true, false), (true, true)] {
            let o = eval(&tables, va, vb);
            for l in 0..L {
                assert_eq!(o[l], out0[l] ^ d.and_bit(va && vb), "{s:?} untouched");
            }
        }
        for bit in 0..tables.len() * 8 {
            let mut t = tables.clone();
            t[bit / 8] ^= 1 << (bit % 8);
            let broken = [(false, false), (false, true), (true, false), (true, true)]
                .iter()
                .any(|&(va, vb)| {
                    let o = eval(&t, va, vb);
                    (0..L).any(|l| o[l] != out0[l] && o[l] != out0[l] ^ d)
                });
            assert!(broken, "{s:?}: flipping table bit {bit} went unnoticed");
        }
    }
}

/// A source one byte short is a typed error from `finish` (garbage labels, no panic); one byte
/// long leaves bytes unread.
#[test]
fn short_and_long_sources_are_typed_errors_not_panics() {
    const L: usize = 16;
    let c = random_circuit(8, 120, 9);
    for s in SCHEMES {
        let mut prg = Prg::from_seed(Block(9));
        let d = delta(&mut prg);
        let mut g = Garbler::<L>::new(d, 1, 0, Prg::from_seed(Block(6)))
            .expect("garbler")
            .with_scheme(s);
        let zeros: Vec<[Block; L]> = (0..c.n_inputs).map(|_| g.input()).collect();
        c.eval(&mut g, &zeros);
        let mut tables = std::mem::take(&mut g.tables);
        tables.push(0);
        for cut in [0usize, 2, tables.len() / 2] {
            let t = &tables[..tables.len() - 1 - cut.min(tables.len() - 1)];
            let mut ev = Evaluator::<L, _>::new(1, 0, SliceSource::new(t))
                .expect("evaluator")
                .with_scheme(s);
            let short = cut > 0;
            c.eval(&mut ev, &zeros);
            let r = ev.finish();
            if short {
                assert!(
                    matches!(r, Err(GcError::Truncated { .. })),
                    "{s:?} cut {cut}"
                );
            } else {
                assert!(r.is_ok());
            }
        }
        let mut ev = Evaluator::<L, _>::new(1, 0, SliceSource::new(&tables))
            .expect("evaluator")
            .with_scheme(s);
        c.eval(&mut ev, &zeros);
        ev.finish().expect("long source");
        assert_eq!(
            ev.into_source().remaining(),
            1,
            "{s:?}: the extra byte is left"
        );
    }
}

/// The batched protocol as the GRU session runs it (COT labels for the evaluator, garbler-side
/// decoding of the permute bits, two batches pipelined) for both schemes, against plaintext;
/// the metered table bytes are the scheme's.
#[test]
fn preset_batches_with_garbler_decoding_equal_plaintext_for_both_schemes() {
    let circ = random_circuit(24, 400, 4);
    let g_in = 10;
    let e_in = circ.n_inputs - g_in;
    let n = 37;
    let (gi, ei, want) = random_batch(&circ, g_in, n, 8);
    let wo = wire_outputs(&circ);
    let mut table_bytes = Vec::new();
    for s in SCHEMES {
        let mut prg = Prg::new();
        let d = delta(&mut prg);
        let (so, co) = ot_pair(d);
        let (c1, c2) = (circ.clone(), circ.clone());
        let (gi2, ei2) = (gi.clone(), ei.clone());
        let run = simulate(
            move |ch| {
                let mut ot = co(ch);
                let mut both = ei2.clone();
                both.extend_from_slice(&ei2);
                let labels = ot.recv_cot(ch, &both)?;
                let before = ch.meter().snapshot().total().bytes_received;
                let mut b1 = evaluate_offline_scheme(ch, &c1, g_in, n, Reveal::Garbler, s)?;
                let mut b2 = evaluate_offline_scheme(ch, &c1, g_in, n, Reveal::Garbler, s)?;
                let tb = ch.meter().snapshot().total().bytes_received - before;
                let all = std::sync::Arc::new(labels);
                let half = all.len() / 2;
                b1.set_evaluator_labels_shared(&c1, all.clone(), 0..half)?;
                b2.set_evaluator_labels_shared(&c1, all.clone(), half..2 * half)?;
                let mut outs = evaluate_online_preset(ch, &c1, &b1)?;
                outs.extend(evaluate_online_preset(ch, &c1, &b2)?);
                ch.send_pod(&pack_bits(&outs))?;
                ch.flush()?;
                Ok::<_, GcError>((outs, tb))
            },
            move |ch| {
                let mut ot = so(ch);
                let m0 = ot.send_cot(ch, 2 * n * e_in)?;
                let job = |k: usize| BatchJob {
                    circ: &c2,
                    g_in,
                    n,
                    e_zero: Some(&m0[k * n * e_in..(k + 1) * n * e_in]),
                    reveal: Reveal::Garbler,
                    scheme: s,
                    g_known: None,
                };
                let b = garble_batches(ch, &[job(0), job(1)], d)?;
                garble_online_preset(ch, &b[0], &gi2)?;
                garble_online_preset(ch, &b[1], &gi2)?;
                let p: Vec<u8> = ch.recv_pod((2 * n * wo).div_ceil(8))?;
                let bits = unpack_bits(&p, 2 * n * wo);
                let mut out = b[0].decode(&c2, &bits[..n * wo])?;
                out.extend(b[1].decode(&c2, &bits[n * wo..])?);
                Ok::<_, GcError>(out)
            },
        );
        let (perm, tb) = run.client.output.expect("evaluator");
        let got = run.server.output.expect("garbler");
        let mut want2 = want.clone();
        want2.extend_from_slice(&want);
        assert_eq!(got, want2, "{s:?}");
        assert_ne!(
            perm, want2,
            "{s:?}: the evaluator's permute bits alone are not the outputs"
        );
        table_bytes.push(tb);
        let chunks = n.div_ceil(LANES) as u64;
        let expect = 2 * s
            .tables_bytes(circ.and_count(), chunks, LANES)
            .expect("size");
        assert!(
            tb >= expect && tb < expect + 4096,
            "{s:?}: {tb} vs {expect}"
        );
    }
    assert!(table_bytes[1] < table_bytes[0] * 4 / 5, "{table_bytes:?}");
}

/// Garbler inputs known at garbling time ([`BatchJob::g_known`]) are folded into the garbling:
/// the evaluator, holding only public labels for them, computes the plaintext outputs (both
/// reveal modes, both schemes, evaluated as the tables arrive or once stored), and the wire
/// carries the nonces, the tables and the decoding
/// bits, not one garbler label. A known-input length mismatch is refused, and so is sending
/// labels for such a batch.
#[test]
fn known_garbler_inputs_are_folded_into_the_garbling_for_both_schemes() {
    let circ = random_circuit(20, 300, 11);
    let g_in = 9;
    let e_in = circ.n_inputs - g_in;
    let n = 21;
    let (gi, ei, want) = random_batch(&circ, g_in, n, 12);
    let wo = wire_outputs(&circ);
    for s in SCHEMES {
        let d = delta(&mut Prg::new());
        let (so, co) = ot_pair(d);
        let (c1, c2) = (circ.clone(), circ.clone());
        let (gi2, ei2) = (gi.clone(), ei.clone());
        let run = simulate(
            move |ch| {
                let mut ot = co(ch);
                let mut both = ei2.clone();
                both.extend_from_slice(&ei2);
                let labels = std::sync::Arc::new(ot.recv_cot(ch, &both)?);
                let before = ch.meter().snapshot().total().bytes_received;
                let half = labels.len() / 2;
                // The first batch evaluated as its tables arrive, the second once stored.
                let perm =
                    recv_evaluate_known(ch, &c1, g_in, n, Reveal::Garbler, s, &labels[..half])?;
                let mut b2 = evaluate_offline_scheme(ch, &c1, g_in, n, Reveal::Evaluator, s)?;
                let got = ch.meter().snapshot().total().bytes_received - before;
                b2.set_evaluator_labels_shared(&c1, labels.clone(), half..2 * half)?;
                let outs = evaluate_known(&c1, &b2)?;
                ch.send_pod(&pack_bits(&perm))?;
                ch.flush()?;
                Ok::<_, GcError>((outs, got))
            },
            move |ch| {
                let mut ot = so(ch);
                let m0 = ot.send_cot(ch, 2 * n * e_in)?;
                let job = |k: usize, reveal, g_known| BatchJob {
                    circ: &c2,
                    g_in,
                    n,
                    e_zero: Some(&m0[k * n * e_in..(k + 1) * n * e_in]),
                    reveal,
                    scheme: s,
                    g_known,
                };
                // Refused before anything is sent.
                let refused =
                    garble_batches(ch, &[job(0, Reveal::Garbler, Some(&gi2[1..]))], d).is_err();
                let b = garble_batches(
                    ch,
                    &[
                        job(0, Reveal::Garbler, Some(&gi2)),
                        job(1, Reveal::Evaluator, Some(&gi2)),
                    ],
                    d,
                )?;
                let labels_refused = garble_online_preset(ch, &b[0], &gi2).is_err();
                let p: Vec<u8> = ch.recv_pod((n * wo).div_ceil(8))?;
                let out = b[0].decode(&c2, &unpack_bits(&p, n * wo))?;
                Ok::<_, GcError>((out, refused, labels_refused))
            },
        );
        let (outs, got) = run.client.output.expect("evaluator");
        let (decoded, refused, labels_refused) = run.server.output.expect("garbler");
        assert_eq!(outs, want, "{s:?}: evaluator-revealed outputs");
        assert_eq!(decoded, want, "{s:?}: garbler-decoded outputs");
        assert!(refused && labels_refused, "{s:?}");
        let tables = s
            .tables_bytes(circ.and_count(), n.div_ceil(LANES) as u64, LANES)
            .expect("size");
        // Per batch a nonce and its tables, then the second batch's decoding bits; framing
        // aside (a few bytes per frame), nothing else: one garbler label would be 16 more per
        // copy.
        let payload = 2 * (8 + tables) + (n * wo).div_ceil(8) as u64;
        assert!(
            got >= payload && got < payload + 64,
            "{s:?}: {got} vs {payload}"
        );
    }
}

/// The streaming evaluator cuts the garbler's frames at its own task boundaries: with another
/// thread count than the garbler's its tasks are smaller than the garbler's and a 64 KiB frame
/// straddles two of them; the outputs still equal plaintext.
#[test]
fn streamed_evaluation_cuts_frames_at_its_own_task_boundaries() {
    let circ = random_circuit(16, 300, 21);
    let g_in = 7;
    let e_in = circ.n_inputs - g_in;
    let n = 40 * LANES - 3;
    let (gi, ei, want) = random_batch(&circ, g_in, n, 22);
    let chunk = circ.and_count() as usize * Scheme::ThreeHalves.table_bytes(LANES);
    assert!(
        chunk < 65536 && 65536 % chunk != 0,
        "a frame must straddle chunks: {chunk}"
    );
    let d = delta(&mut Prg::new());
    let (so, co) = ot_pair(d);
    let (c1, c2) = (circ.clone(), circ.clone());
    let s = Scheme::ThreeHalves;
    let run = simulate(
        move |ch| {
            let mut ot = co(ch);
            let labels = ot.recv_cot(ch, &ei)?;
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(7)
                .build()
                .expect("pool");
            pool.install(|| recv_evaluate_known(ch, &c1, g_in, n, Reveal::Evaluator, s, &labels))
        },
        move |ch| {
            let mut ot = so(ch);
            let m0 = ot.send_cot(ch, n * e_in)?;
            let job = BatchJob {
                circ: &c2,
                g_in,
                n,
                e_zero: Some(&m0),
                reveal: Reveal::Evaluator,
                scheme: s,
                g_known: Some(&gi),
            };
            garble_batches(ch, &[job], d).map(|_| ())
        },
    );
    run.server.output.expect("garbler");
    assert_eq!(run.client.output.expect("evaluator"), want);
}

/// An evaluator expecting the other scheme, or a garbler stream cut short or padded, is a typed
/// error on the evaluator's side (sizes disagree), never a panic.
#[test]
fn mismatched_schemes_and_bad_streams_are_typed_errors() {
    let circ = random_circuit(12, 150, 2);
    let n = 20;
    for (gs, es, how) in [
        (Scheme::ThreeHalves, Scheme::HalfGates, 0),
        (Scheme::HalfGates, Scheme::ThreeHalves, 0),
        (Scheme::ThreeHalves, Scheme::ThreeHalves, 1),
        (Scheme::ThreeHalves, Scheme::ThreeHalves, 2),
    ] {
        for streamed in [false, true] {
            let (c1, c2) = (circ.clone(), circ.clone());
            let run = simulate(
                move |ch| {
                    if streamed {
                        let labels = vec![Block::ZERO; n * (c1.n_inputs - 6)];
                        recv_evaluate_known(ch, &c1, 6, n, Reveal::Evaluator, es, &labels)
                            .map(|_| ())
                    } else {
                        evaluate_offline_scheme(ch, &c1, 6, n, Reveal::Evaluator, es).map(|_| ())
                    }
                },
                move |ch| {
                    let d = Block(Prg::new().next_block().0 | 1);
                    match how {
                        0 => {
                            let job = BatchJob {
                                circ: &c2,
                                g_in: 6,
                                n,
                                e_zero: None,
                                reveal: Reveal::Evaluator,
                                scheme: gs,
                                g_known: None,
                            };
                            let _ = garble_batches(ch, &[job], d);
                        }
                        // A frame that is not whole gates, then hang up.
                        1 => {
                            let _ = ch.send_pod(&[1u64]);
                            let _ = ch.send_frame(&[0u8; 395]);
                        }
                        // Whole gates, then hang up early.
                        _ => {
                            let _ = ch.send_pod(&[1u64]);
                            let _ = ch.send_frame(&[0u8; 394 * 3]);
                        }
                    }
                    let _ = ch.flush();
                },
            );
            match (how, run.client.output) {
                (2, Err(GcError::Truncated { .. })) => {}
                (0 | 1, Err(GcError::Malformed(_) | GcError::Truncated { .. })) => {}
                (_, r) => panic!("{gs:?}/{es:?}/{how}/{streamed}: {r:?}"),
            }
        }
    }
}

#[test]
fn scheme_names_parse_and_sizes_are_the_papers() {
    for s in SCHEMES {
        assert_eq!(Scheme::parse(s.name()).expect("parse"), s);
    }
    assert!(Scheme::parse("quarter-gates").is_err());
    assert_eq!(Scheme::default(), Scheme::HalfGates);
    // 2κ resp. 1.5κ + 5 bits per AND gate and copy (16 copies: 80 control bits, no padding).
    assert_eq!(Scheme::HalfGates.table_bytes(16) * 8, 16 * 256);
    assert_eq!(Scheme::ThreeHalves.table_bytes(16) * 8, 16 * (192 + 5));
    assert_eq!(Scheme::ThreeHalves.table_bytes(1), 25);
}

/// A format the test knows to be valid.
fn fx(bits: u32, scale: u32) -> Fixed {
    Fixed::new(bits, scale).expect("valid format")
}

/// A batch of one copy is garbled single-lane: its evaluator gets the plaintext outputs (as
/// the tables arrive, and from stored tables with the garbler decoding), and the wire carries
/// exactly one copy's tables (a nonce, `and_count` gates of `Scheme::table_bytes(1)` bytes and
/// the decoding bits; framing aside), not `LANES` padded copies.
#[test]
fn single_copy_batches_send_one_copys_tables_and_equal_plaintext() {
    let circ = random_circuit(24, 2000, 31);
    let g_in = 10;
    let e_in = circ.n_inputs - g_in;
    let wo = wire_outputs(&circ);
    assert_eq!(secinfer_gc::protocol::batch_lanes(1), 1);
    assert_eq!(secinfer_gc::protocol::batch_lanes(2), LANES);
    for (s, seed) in SCHEMES.into_iter().zip([32u64, 33]) {
        let one = secinfer_gc::protocol::batch_table_bytes(s, &circ, 1).expect("size");
        assert_eq!(one, circ.and_count() * s.table_bytes(1) as u64, "{s:?}");
        let padded = s.tables_bytes(circ.and_count(), 1, LANES).expect("size");
        assert!(one * 12 < padded, "{s:?}: {one} vs {padded}");
        let (gi, ei, want) = random_batch(&circ, g_in, 1, seed);
        let d = delta(&mut Prg::new());
        let (so, co) = ot_pair(d);
        let (c1, c2) = (circ.clone(), circ.clone());
        let gi2 = gi.clone();
        let run = simulate(
            move |ch| {
                let mut ot = co(ch);
                let mut both = ei.clone();
                both.extend_from_slice(&ei);
                let labels = std::sync::Arc::new(ot.recv_cot(ch, &both)?);
                let before = ch.meter().snapshot().total().bytes_received;
                let streamed =
                    recv_evaluate_known(ch, &c1, g_in, 1, Reveal::Evaluator, s, &labels[..e_in])?;
                let got = ch.meter().snapshot().total().bytes_received - before;
                let mut b2 = evaluate_offline_scheme(ch, &c1, g_in, 1, Reveal::Garbler, s)?;
                b2.set_evaluator_labels_shared(&c1, labels.clone(), e_in..2 * e_in)?;
                let perm = evaluate_online_preset(ch, &c1, &b2)?;
                ch.send_pod(&pack_bits(&perm))?;
                ch.flush()?;
                Ok::<_, GcError>((streamed, got))
            },
            move |ch| {
                let mut ot = so(ch);
                let m0 = ot.send_cot(ch, 2 * e_in)?;
                let job = |k: usize, reveal, g_known| BatchJob {
                    circ: &c2,
                    g_in,
                    n: 1,
                    e_zero: Some(&m0[k * e_in..(k + 1) * e_in]),
                    reveal,
                    scheme: s,
                    g_known,
                };
                garble_batches(ch, &[job(0, Reveal::Evaluator, Some(&gi2))], d)?;
                let b = garble_batches(ch, &[job(1, Reveal::Garbler, None)], d)?;
                garble_online_preset(ch, &b[0], &gi2)?;
                let p: Vec<u8> = ch.recv_pod(wo.div_ceil(8))?;
                b[0].decode(&c2, &unpack_bits(&p, wo))
            },
        );
        let (streamed, got) = run.client.output.expect("evaluator");
        let decoded = run.server.output.expect("garbler");
        assert_eq!(streamed, want, "{s:?}: evaluator-revealed outputs");
        assert_eq!(decoded, want, "{s:?}: garbler-decoded outputs");
        let payload = 8 + one + wo.div_ceil(8) as u64;
        assert!(
            got >= payload && got < payload + 64,
            "{s:?}: {got} vs {payload}"
        );
    }
}
