//! The secure GRU (HE + GC) against the plaintext fixed-point reference, bit for bit, on random
//! weights and inputs, for several sizes and all three CryptoGRU variants (in-memory channel).
#![allow(clippy::unwrap_used, reason = "tests: a panic is the failure report")]
use secinfer_net::flight::{Flight, Step};
use secinfer_net::simulate;
use secinfer_nn::layers::gru::circuits::final_circuit;
use secinfer_nn::layers::gru::CircuitCache;
use secinfer_nn::layers::gru::{
    client_session, client_session_garbling, client_session_with, random_model, server_session,
    CircuitActivations, ClientModel, ClientOptions, GruOutcome, OtFiller, Scheme, ServerModel,
    SessionReport, Variant, DEFAULT_GARBLING,
};
use secinfer_nn::{argmax, NnError, Reference};

fn run_case(e: usize, h: usize, c: usize, steps: usize, v: Variant, seed: u64, reveal: bool) {
    for s in [Scheme::HalfGates, Scheme::ThreeHalves] {
        run_case_with(e, h, c, steps, v, seed, reveal, s);
    }
}

#[allow(clippy::too_many_arguments)]
fn run_case_with(
    e: usize,
    h: usize,
    c: usize,
    steps: usize,
    v: Variant,
    seed: u64,
    reveal: bool,
    scheme: Scheme,
) -> (GruOutcome, SessionReport) {
    let opts = ClientOptions {
        reveal_logits: reveal,
        ..ClientOptions::default()
    };
    run_case_opts((e, h, c, steps), v, seed, opts, scheme)
}

fn run_case_opts(
    (e, h, c, steps): (usize, usize, usize, usize),
    v: Variant,
    seed: u64,
    opts: ClientOptions,
    scheme: Scheme,
) -> (GruOutcome, SessionReport) {
    let reveal = opts.reveal_logits;
    let (q, embed) = random_model(e, h, c, steps, v, seed).unwrap();
    let tokens: Vec<u32> = (0..steps as u32)
        .map(|i| (i * 7 + seed as u32 * 13) % 64)
        .collect();
    let mut r = Reference::new(&q, CircuitActivations::default());
    let want = r.classify(&tokens);
    let cm = ClientModel::new(q.config.clone(), &embed, v, steps).unwrap();
    let sm = ServerModel::new(q, v, steps).unwrap();
    let toks = tokens.clone();
    let run = simulate(
        move |ch| {
            let mut stages: Vec<(String, u64, u64)> = Vec::new();
            let out = client_session_garbling(
                ch,
                &cm,
                &toks,
                opts,
                OtFiller::default(),
                scheme,
                &mut |s, done, total| stages.push((s.to_string(), done, total)),
            );
            out.map(|o| (o, stages))
        },
        move |ch| server_session(ch, &sm),
    );
    let (out, stages) = run.client.output.unwrap();
    // Progress: the keys, then one report per step as its tables are garbled and evaluated.
    let steps_seen: Vec<u64> = stages
        .iter()
        .filter(|(s, _, total)| s == "garbled steps" && *total == steps as u64)
        .map(|(_, done, _)| *done)
        .collect();
    assert_eq!(steps_seen, (1..=steps as u64).collect::<Vec<_>>());
    assert_eq!(stages.first(), Some(&("keys".to_string(), 0, 2)));
    let srep = run.server.output.unwrap();
    if reveal {
        assert_eq!(
            out.logits.as_deref(),
            Some(&want[..]),
            "{v:?} {scheme:?} E{e} H{h} C{c} T{steps} seed {seed}"
        );
    }
    assert_eq!(
        out.class,
        argmax(&want),
        "{v:?} {scheme:?} E{e} H{h} C{c} T{steps} seed {seed}"
    );
    assert!(out.report.gc_bytes > 0 && out.report.he_bytes > 0);
    assert_eq!((out.report.garbling, srep.garbling), (scheme, scheme));
    // Both parties file every byte under the same heading (GC, HE, OT words).
    let split = |r: &SessionReport| (r.gc_bytes, r.he_bytes, r.mux_bytes);
    assert_eq!(split(&out.report), split(&srep), "byte headings");
    (out, srep)
}

/// Three-halves changes only the tables: same HE (but for the scheme's name in the handshake)
/// and multiplexer bytes, GC bytes lower by 32 − 25 bytes per AND gate of the single-copy
/// final circuit plus a multiple of 512 − 394 bytes (one 16-copy AND gate), and the same logits.
#[test]
fn three_halves_saves_exactly_the_table_bytes() {
    let (e, h, c, steps) = (6, 20, 3, 2);
    let (hg, _) = run_case_with(e, h, c, steps, Variant::Cg2, 7, true, Scheme::HalfGates);
    let (th, _) = run_case_with(e, h, c, steps, Variant::Cg2, 7, true, Scheme::ThreeHalves);
    assert_eq!(hg.logits, th.logits);
    // HE bytes include the handshake, which names the scheme.
    let names = (Scheme::ThreeHalves.name().len() - Scheme::HalfGates.name().len()) as u64;
    assert_eq!(hg.report.he_bytes + names, th.report.he_bytes);
    assert_eq!(hg.report.mux_bytes, th.report.mux_bytes);
    assert_eq!(hg.report.and_gates, th.report.and_gates);
    let saved = hg.report.gc_bytes - th.report.gc_bytes;
    // Per 16-lane gate 512 − 394 bytes in the step batches (⌈20/16⌉ = 2 chunks each); the
    // final circuit runs as one copy, garbled single-lane: 32 − 25 bytes per gate.
    let per_gate = (Scheme::HalfGates.table_bytes(16) - Scheme::ThreeHalves.table_bytes(16)) as u64;
    let per_one = (Scheme::HalfGates.table_bytes(1) - Scheme::ThreeHalves.table_bytes(1)) as u64;
    let (q, _) = random_model(e, h, c, steps, Variant::Cg2, 7).unwrap();
    let sm = ServerModel::new(q, Variant::Cg2, steps).unwrap();
    let fin = final_circuit(&sm.fp, c, true, 1, &CircuitCache::default()).and_count();
    assert!(saved > fin * per_one, "saved {saved}");
    assert_eq!((saved - fin * per_one) % per_gate, 0, "saved {saved}");
    assert_eq!(DEFAULT_GARBLING, Scheme::ThreeHalves);
}

/// CG-2's gates r and z from OT lookup tables with the hidden projections' carries from
/// per-step leaves (the default) or inside the garbled circuit (the client's
/// `gates_in_circuit`): the same logits, four online rounds per step more with tables and
/// leaves, fewer AND gates and fewer bytes; CG-1's 20-bit sigmoids never get tables.
#[test]
fn gate_tables_and_gate_circuits_give_the_same_logits() {
    let size = (6, 9, 3, 4);
    let opts = |g| ClientOptions {
        reveal_logits: true,
        gates_in_circuit: g,
        ..ClientOptions::default()
    };
    let (t, ts) = run_case_opts(size, Variant::Cg2, 12, opts(false), DEFAULT_GARBLING);
    let (g, gs) = run_case_opts(size, Variant::Cg2, 12, opts(true), DEFAULT_GARBLING);
    assert_eq!(t.logits, g.logits);
    assert!(t.report.gate_tables && ts.gate_tables);
    assert!(!g.report.gate_tables && !gs.gate_tables);
    assert_eq!(
        t.report.cost.online.rounds,
        g.report.cost.online.rounds + 4 * size.3 as u64
    );
    assert!(t.report.and_gates < g.report.and_gates);
    assert_eq!(t.report.and_per_element_step, ts.and_per_element_step);
    assert_eq!(g.report.and_per_element_step, gs.and_per_element_step);
    assert!(t.report.and_per_element_step < g.report.and_per_element_step);
    assert!(t.report.cost.total().bytes() < g.report.cost.total().bytes());
    let (x, xs) = run_case_opts(size, Variant::Cg1, 12, opts(false), DEFAULT_GARBLING);
    assert!(!x.report.gate_tables && !xs.gate_tables);
}

#[test]
fn secure_gru_equals_reference_bit_for_bit_all_variants() {
    for v in [
        Variant::Cg2,
        Variant::Cg1,
        Variant::Baseline,
        Variant::Cg2Tanh,
    ] {
        run_case(5, 4, 3, 3, v, 1, true);
        run_case(9, 7, 2, 2, v, 2, true);
        run_case(3, 5, 5, 2, v, 3, false);
    }
    // E = 700: the input projections' columns in 3 chunks (234 + 234 + 232, a narrower last
    // one), all 13 steps in one group, 2 rows per block (coeff::Layout::batched).
    run_case(700, 2, 2, 13, Variant::Cg2, 4, true);
    // H = 32, E = 64: both projections chunked (2 chunks of 32 columns, 3 blocks of 32 rows),
    // the hidden masks' 7 vectors in one group.
    run_case(64, 32, 2, 8, Variant::Cg2, 6, false);
}

#[test]
fn mismatched_client_is_refused_with_a_typed_error() {
    let (q, embed) = random_model(4, 3, 2, 2, Variant::Cg2, 5).unwrap();
    // The client believes the model runs 3 steps: the architecture hashes differ.
    let cm = ClientModel::new(q.config.clone(), &embed, Variant::Cg2, 3).unwrap();
    let sm = ServerModel::new(q, Variant::Cg2, 2).unwrap();
    let run = simulate(
        move |ch| {
            client_session(
                ch,
                &cm,
                &[1, 2, 3],
                ClientOptions::default(),
                &mut |_, _, _| {},
            )
        },
        move |ch| server_session(ch, &sm),
    );
    let (c, s) = (
        run.client.output.err().unwrap(),
        run.server.output.err().unwrap(),
    );
    assert!(matches!(c, NnError::Refused(_)), "{c}");
    assert!(matches!(s, NnError::Refused(_)), "{s}");
    assert!(s.to_string().contains("steps mismatch"), "{s}");
    assert_eq!(c.kind(), secinfer_nn::ErrorKind::Refused);
}

/// The same session with its OT pools filled by IKNP, Ferret silent OT or SoftSpokenOT with
/// other k than the default (SoftSpokenOT, k = 5): still bit for bit (one Ferret case: an
/// iteration is 10^7 COTs).
#[test]
fn secure_gru_with_other_pool_fillers_is_bit_exact() {
    for filler in [
        OtFiller::Iknp,
        OtFiller::Ferret,
        OtFiller::SoftSpoken { k: 2 },
        OtFiller::SoftSpoken { k: 4 },
    ] {
        let (q, embed) = random_model(6, 5, 3, 3, Variant::Cg2, 9).unwrap();
        let tokens = [3u32, 17, 40];
        let want = Reference::new(&q, CircuitActivations::default()).classify(&tokens);
        let cm = ClientModel::new(q.config.clone(), &embed, Variant::Cg2, 3).unwrap();
        let sm = ServerModel::new(q, Variant::Cg2, 3).unwrap();
        let run = simulate(
            move |ch| {
                client_session_with(
                    ch,
                    &cm,
                    &tokens,
                    ClientOptions {
                        reveal_logits: true,
                        ..ClientOptions::default()
                    },
                    filler,
                    &mut |_, _, _| {},
                )
            },
            move |ch| server_session(ch, &sm),
        );
        run.server.output.unwrap();
        let out = run.client.output.unwrap();
        assert_eq!(out.logits.as_deref(), Some(&want[..]), "{}", filler.name());
    }
}

/// Filler names round-trip through the handshake's parser; bad ones are refused; the default
/// is SoftSpokenOT with k = 5 (`secinfer-gru/8`; k = 4 from `/5`).
#[test]
fn ot_filler_names_parse() {
    assert_eq!(OtFiller::default(), OtFiller::SoftSpoken { k: 5 });
    assert_eq!(OtFiller::default().name(), "softspoken-k5");
    for f in [
        OtFiller::Iknp,
        OtFiller::Ferret,
        OtFiller::SoftSpoken { k: 1 },
        OtFiller::SoftSpoken { k: 8 },
    ] {
        assert_eq!(f.name().parse::<OtFiller>(), Ok(f));
    }
    assert_eq!(
        "softspoken".parse::<OtFiller>(),
        Ok(OtFiller::SoftSpoken { k: 2 })
    );
    for bad in [
        "softspoken-k0",
        "softspoken-k9",
        "softspoken-kx",
        "silent",
        "",
    ] {
        assert!(bad.parse::<OtFiller>().is_err(), "{bad}");
    }
}

/// Hidden states driven to the extremes of their proven range (StepLayout::for_step narrows h,
/// h − n and h' to 16 bits for CG-2 and 15 for Baseline): the candidate's pre-activation is
/// ±64 (saturated), so n swings between its minimum and maximum, and the update gate is ≈ 0,
/// 1/2 or ≈ 1 per element. Still bit for bit (narrowing hw by one bit fails this test).
#[test]
fn extreme_hidden_states_stay_bit_exact() {
    for v in [Variant::Cg2, Variant::Baseline, Variant::Cg2Tanh] {
        let (e, h, steps) = (4usize, 3usize, 10usize);
        let (mut q, embed) = random_model(e, h, 2, steps, v, 11).unwrap();
        let big = 16i64 << 12;
        for i in 0..h {
            for j in 0..e {
                q.w_ih[(2 * h + i) * e + j] = if (i + j) % 2 == 0 { big } else { -big };
                q.w_ih[(h + i) * e + j] = 0;
            }
            for j in 0..h {
                q.w_hh[(h + i) * h + j] = 0;
            }
            q.b_ih[h + i] = [-(32i64 << 12), 0, 32 << 12][i % 3];
            q.b_hh[h + i] = 0;
        }
        let tokens: Vec<u32> = (0..steps as u32).map(|i| (i * 29 + 5) % 64).collect();
        let want = Reference::new(&q, CircuitActivations::default()).classify(&tokens);
        let cm = ClientModel::new(q.config.clone(), &embed, v, steps).unwrap();
        let sm = ServerModel::new(q, v, steps).unwrap();
        let toks = tokens.clone();
        let run = simulate(
            move |ch| {
                client_session(
                    ch,
                    &cm,
                    &toks,
                    ClientOptions {
                        reveal_logits: true,
                        ..ClientOptions::default()
                    },
                    &mut |_, _, _| {},
                )
            },
            move |ch| server_session(ch, &sm),
        );
        run.server.output.unwrap();
        let out = run.client.output.unwrap();
        assert_eq!(out.logits.as_deref(), Some(&want[..]), "{v:?}");
    }
}

/// The whole session, setup and offline included (handshake, HE keys, base OTs, pool fills,
/// HE products, label transfers), driven as typed flights with no channel between the parties
/// (`secinfer_net::flight`): logits equal the reference's bit for bit for every variant, and
/// a client flight cut one byte short is refused as malformed with the server's stepper left
/// where it was, so the honest flight then finishes the session (or, where the read has no
/// fixed length, refused by the session's own decoding with the malformed kind).
#[test]
fn whole_session_as_flights_equals_the_reference_bit_for_bit() {
    use secinfer_net::flight::{drive, Stepper};
    use secinfer_net::NetError;
    use secinfer_nn::ErrorKind;
    let setup = |v: Variant, seed: u64| {
        let (q, embed) = random_model(5, 4, 3, 3, v, seed).unwrap();
        let tokens: Vec<u32> = (0..3u32).map(|i| (i * 7 + seed as u32 * 13) % 64).collect();
        let want = Reference::new(&q, CircuitActivations::default()).classify(&tokens);
        let cm = ClientModel::new(q.config.clone(), &embed, v, 3).unwrap();
        let sm = ServerModel::new(q, v, 3).unwrap();
        (cm, sm, tokens, want)
    };
    let opts = ClientOptions {
        reveal_logits: true,
        ..ClientOptions::default()
    };
    for v in [Variant::Cg2, Variant::Cg1, Variant::Baseline] {
        let (cm, sm, tokens, want) = setup(v, 11);
        let d = drive(
            move |ch| client_session(ch, &cm, &tokens, opts, &mut |_, _, _| {}),
            move |ch| server_session(ch, &sm),
        )
        .unwrap();
        assert_eq!(d.a.unwrap().logits.as_deref(), Some(&want[..]), "{v:?}");
        d.b.unwrap();
    }
    // A client flight cut one byte short, at several points of the session.
    let (mut refused, mut failed) = (0, 0);
    for cut_at in [1usize, 2, 4, 6, 9] {
        let (cm, sm, tokens, want) = setup(Variant::Cg2, 12);
        let (mut sc, mut fc) =
            Stepper::start(move |ch| client_session(ch, &cm, &tokens, opts, &mut |_, _, _| {}))
                .unwrap();
        let (mut ss, mut fs) = Stepper::start(move |ch| server_session(ch, &sm)).unwrap();
        let (mut out_c, mut out_s) = (None, None);
        let mut round = 0;
        loop {
            let to_s = fc.take_flight(&mut out_c);
            let to_c = fs.take_flight(&mut out_s);
            if out_c.is_some() && out_s.is_some() {
                break;
            }
            let speaks = to_s.frames().iter().any(|f| !f.is_empty());
            if speaks {
                round += 1;
            }
            if round == cut_at && out_s.is_none() && speaks {
                let mut cut = to_s.frames().to_vec();
                let i = cut.iter().position(|f| !f.is_empty()).unwrap();
                cut[i].pop();
                match ss.absorb(Flight::new(cut)) {
                    // Refused by the flight's shape: the stepper waits where it was.
                    Err(e) => {
                        assert!(matches!(e, NetError::Malformed(_)), "{e}");
                        refused += 1;
                    }
                    // A read of unchecked length: the session's own decoding refuses it.
                    Ok(Step::Done { output, .. }) => {
                        let e = output.unwrap_err();
                        assert_eq!(e.kind(), ErrorKind::Malformed, "round {round}: {e}");
                        failed += 1;
                        break;
                    }
                    Ok(Step::Send(f)) => panic!("round {round}: a cut flight was taken: {f:?}"),
                }
            }
            if out_c.is_none() {
                fc = sc.absorb(to_c).unwrap();
            }
            if out_s.is_none() {
                fs = ss.absorb(to_s).unwrap();
            }
        }
        if let Some(server) = out_s {
            assert_eq!(out_c.unwrap().unwrap().logits.as_deref(), Some(&want[..]));
            server.unwrap();
        }
    }
    assert_eq!(refused + failed, 5, "{refused} refused, {failed} failed");
}
