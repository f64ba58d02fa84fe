//! The fuzz seeds are what they claim (honest transcripts its party completes), the mutator
//! mutates, the loop catches panics, and the regressions the targets found stay fixed. The
//! bounded run of every target, with its allocation count, is tests/bounded.rs.
#![allow(clippy::unwrap_used, reason = "tests: a panic is the failure report")]

#[test]
fn the_session_seeds_are_honest_sessions() {
    // The session targets start from recorded honest frames: if recording broke, their
    // mutants would only ever exercise the first check.
    let (server, client) = secinfer_fuzz::honest_session_frames().unwrap();
    assert!(server.len() > 10 && client.len() > 10);
    let hs: serde_json::Value = serde_json::from_slice(&server[0]).unwrap();
    assert_eq!(hs["protocol"], secinfer_nn::layers::gru::PROTOCOL);
    assert_eq!(secinfer_fuzz::session_seeds_complete(), Some((true, true)));
}

#[test]
fn every_protocol_seed_is_an_honest_transcript_its_party_completes() {
    let mut owned = 0;
    for &(name, _) in secinfer_fuzz::TARGETS {
        if let Some(done) = secinfer_fuzz::protocols::seed_completes(name) {
            assert!(done, "{name}: its party fails on the unmutated seed");
            owned += 1;
        }
    }
    assert_eq!(owned, 9);
}

#[test]
fn the_other_families_openings_have_honest_seeds() {
    for name in ["hegc_hello", "hegc_reply", "choco_hello", "ss_request"] {
        let seeds = secinfer_fuzz::seeds(name);
        assert!(seeds.len() == 1 && !seeds[0].is_empty(), "{name}");
    }
    // GALA's server accepts the recorded hello: its reply (the reply target's seed) says ok.
    let reply: serde_json::Value =
        serde_json::from_slice(&secinfer_fuzz::seeds("hegc_reply")[0]).unwrap();
    assert_eq!(reply["ok"], true, "{reply}");
}

#[test]
fn the_mutator_changes_inputs_and_the_loop_catches_panics() {
    let mut rng = secinfer_fuzz::Rng::new(1);
    let base = vec![0u8; 64];
    let changed = (0..100)
        .filter(|_| {
            let mut d = base.clone();
            secinfer_fuzz::mutate(&mut rng, &mut d);
            d != base
        })
        .count();
    assert!(changed > 80, "{changed}");
    std::panic::set_hook(Box::new(|_| {}));
    let rep = secinfer_fuzz::mutate_and_run(|d| assert!(d.len() < 70), &[base], 200, 3);
    let _ = std::panic::take_hook();
    assert!(rep.panic_count > 0 && rep.panic_count < 200);
}

#[cfg(feature = "tfhe")]
#[test]
fn the_she_seeds_are_honest_transcripts_that_complete_or_stop_where_stated() {
    use secinfer_fuzz::she::seed_outcomes;
    use secinfer_tfhe::Error;
    // The recorded session completes on both sides: the server against the client's frames,
    // the client (same keys) against the server's, decrypting the reference's output.
    let (server, client) = secinfer_fuzz::she::honest_frames().unwrap();
    let pbs = secinfer_fuzz::she::network().unwrap();
    let (samples, key_len) = secinfer_tfhe::session::decode_hello(&server[0]).unwrap();
    let chunks = key_len.div_ceil(secinfer_tfhe::session::KEY_CHUNK as u64) as usize;
    assert_eq!(samples, 1);
    assert_eq!(
        server.len(),
        1 + chunks + pbs.input_ciphertexts(),
        "hello, key, inputs"
    );
    assert_eq!(
        client.len(),
        2 + pbs.output_ciphertexts(),
        "two times, outputs"
    );
    let reply = seed_outcomes("she_reply").unwrap();
    assert!(matches!(reply[..], [Ok(())]), "{reply:?}");
    let inputs = seed_outcomes("she_input").unwrap();
    assert_eq!(inputs.len(), pbs.input_ciphertexts());
    assert!(inputs.iter().all(Result::is_ok), "{inputs:?}");
    // The key uploads stop where the module says: the toy key is decoded whole and refused by
    // the conformance check, the cut real key is refused by bincode at the cut.
    let uploads = seed_outcomes("she_key_upload").unwrap();
    assert!(
        matches!(&uploads[..], [Err(Error::Peer(m)), Err(Error::Serialize(_))] if m.contains("parameter set")),
        "{uploads:?}"
    );
}

#[cfg(feature = "tfhe")]
#[test]
fn a_seeded_input_whose_seed_starts_past_an_aes_block_is_refused_not_expanded() {
    // Found by the she_input target: an honest input ciphertext whose seed's byte index was
    // mutated to 128. tfhe-rs's expansion indexed out of bounds on it; the session's decoder
    // now refuses it with a typed error before any expansion.
    let hex = "d983bd25d7d1a727010800000000000000000000c872f968adfb66c3b8232c36bc4031ae00000000000000000000000000000000800000000000000000000000000000000000000000000000400000000000000003000000000000000400000000000000040000000000000000000000000000000100000000000000";
    let bytes: Vec<u8> = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect();
    let r = secinfer_tfhe::session::decode_input(&bytes);
    assert!(
        matches!(&r, Err(secinfer_tfhe::Error::Peer(m)) if m.contains("first index")),
        "{:?}",
        r.err()
    );
    secinfer_fuzz::she::she_input(&bytes);
}
