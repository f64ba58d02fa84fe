//! The OT extensions' IO-free steps: driven against each other with no channel, they give the
//! COT relation `t_j = q_j ⊕ c_j·Δ`; they give what the channel calls give on the same seeds
//! (those calls are the steps in a loop); a malformed message is a typed error that leaves the
//! instance refusing further steps.
use secinfer_net::simulate;
use secinfer_ot::ErrorKind;
use secinfer_ot::*;

const DELTA: Block = Block(0x0f1e_2d3c_4b5a_6978_8796_a5b4_c3d2_e1f0);

/// Base OTs made in the clear (the steps start after them): the receiver's 128 pairs and the
/// keys the bits of `DELTA` choose.
fn base_ots(seed: u128) -> (Vec<[Block; 2]>, Vec<Block>) {
    let mut prg = Prg::from_seed(Block(seed));
    let pairs: Vec<[Block; 2]> = (0..128)
        .map(|_| [prg.next_block(), prg.next_block()])
        .collect();
    let keys = (0..128)
        .map(|i| pairs[i][((DELTA.0 >> i) & 1) as usize])
        .collect();
    (pairs, keys)
}

fn assert_cot(q: &[Block], t: &[Block], choices: &[bool], delta: Block) {
    assert_eq!(q.len(), t.len());
    for (j, ((q, t), &c)) in q.iter().zip(t).zip(choices).enumerate() {
        let want = if c { *q ^ delta } else { *q };
        assert_eq!(*t, want, "COT {j}");
    }
}

#[test]
fn iknp_steps_without_a_channel_are_cots_and_equal_the_channel_calls() {
    let n = CHUNK_ROWS + 1000;
    let choices = Prg::from_seed(Block(3)).bits(n);
    // Steps: one chunk at a time, the message handed over by hand.
    let (pairs, keys) = base_ots(1);
    let mut r = OtExtReceiver::from_base_ots(&pairs).unwrap();
    let mut s = OtExtSender::from_base_ots(DELTA, &keys).unwrap();
    let (mut t, mut q) = (vec![Block::ZERO; n], vec![Block::ZERO; n]);
    for ((c, t), q) in choices
        .chunks(CHUNK_ROWS)
        .zip(t.chunks_mut(CHUNK_ROWS))
        .zip(q.chunks_mut(CHUNK_ROWS))
    {
        let msg = r.cot_step(c, t).unwrap().to_vec();
        assert_eq!(msg.len(), 16 * 128 * c.len().div_ceil(128));
        s.cot_step(&msg, q).unwrap();
    }
    assert_cot(&q, &t, &choices, DELTA);
    // The channel calls on the same base OTs give the same COTs.
    let ch_choices = choices.clone();
    let run = simulate(
        move |ch| {
            let (pairs, _) = base_ots(1);
            let mut r = OtExtReceiver::from_base_ots(&pairs).unwrap();
            r.recv_cot(ch, &ch_choices).unwrap()
        },
        move |ch| {
            let (_, keys) = base_ots(1);
            let mut s = OtExtSender::from_base_ots(DELTA, &keys).unwrap();
            s.send_cot(ch, n).unwrap()
        },
    );
    assert_eq!(run.client.output, t);
    assert_eq!(run.server.output, q);
}

#[test]
fn iknp_step_refuses_a_wrong_length_and_then_any_step() {
    let (pairs, keys) = base_ots(2);
    let mut r = OtExtReceiver::from_base_ots(&pairs).unwrap();
    let mut s = OtExtSender::from_base_ots(DELTA, &keys).unwrap();
    let choices = Prg::from_seed(Block(4)).bits(300);
    let mut t = vec![Block::ZERO; 300];
    let msg = r.cot_step(&choices, &mut t).unwrap().to_vec();
    let mut q = vec![Block::ZERO; 300];
    for bad in [&msg[..msg.len() - 1], &[][..]] {
        let mut s = OtExtSender::from_base_ots(DELTA, &keys).unwrap();
        let e = s.cot_step(bad, &mut q).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Malformed, "{e}");
    }
    let e = s.cot_step(&msg[16..], &mut q).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Malformed, "{e}");
    // Out of step with its peer now: refused, even with the honest message.
    let e = s.cot_step(&msg, &mut q).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    // A step is at most one chunk, and one output per choice.
    let big = vec![false; CHUNK_ROWS + 1];
    let mut out = vec![Block::ZERO; CHUNK_ROWS + 1];
    let e = r.cot_step(&big, &mut out).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    let e = r.cot_step(&choices, &mut out[..5]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
}

#[test]
fn softspoken_steps_without_a_channel_are_cots_for_every_k() {
    for k in [1u32, 2, 4, 5, 8] {
        let (pairs, keys) = base_ots(10 + k as u128);
        let (mut r, setup) = SoftSpokenReceiver::setup_message(&pairs, k).unwrap();
        let mut s =
            SoftSpokenSender::from_setup_message(DELTA, &keys, k, bytemuck_bytes(&setup)).unwrap();
        for n in [1usize, 128, 5000] {
            let choices = Prg::from_seed(Block(n as u128)).bits(n);
            let mut t = vec![Block::ZERO; n];
            let msg = r.cot_step(&choices, &mut t).unwrap().to_vec();
            assert_eq!(
                msg.len(),
                16 * 128usize.div_ceil(k as usize) * n.div_ceil(128)
            );
            let mut q = vec![Block::ZERO; n];
            s.cot_step(&msg, &mut q).unwrap();
            assert_cot(&q, &t, &choices, DELTA);
        }
    }
}

#[test]
fn softspoken_steps_refuse_wrong_lengths_with_typed_errors() {
    let (pairs, keys) = base_ots(20);
    let (mut r, setup) = SoftSpokenReceiver::setup_message(&pairs, 4).unwrap();
    let bytes = bytemuck_bytes(&setup);
    let e = SoftSpokenSender::from_setup_message(DELTA, &keys, 4, &bytes[..bytes.len() - 16])
        .err()
        .expect("a short setup message is refused");
    assert_eq!(e.kind(), ErrorKind::Malformed);
    let mut s = SoftSpokenSender::from_setup_message(DELTA, &keys, 4, bytes).unwrap();
    let choices = Prg::from_seed(Block(5)).bits(700);
    let mut t = vec![Block::ZERO; 700];
    let msg = r.cot_step(&choices, &mut t).unwrap().to_vec();
    let mut q = vec![Block::ZERO; 700];
    let e = s.cot_step(&msg[1..], &mut q).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Malformed);
    let e = s.cot_step(&msg, &mut q).unwrap_err();
    assert_eq!(
        e.kind(),
        ErrorKind::InvalidArgument,
        "poisoned after a bad message"
    );
}

#[test]
fn ferret_steps_without_a_channel_are_cots() {
    // Test-only shape (not secure: only the published sets are).
    let params = FerretParams {
        main: LpnParams {
            k: 300,
            t: 16,
            log_bin: 6,
        },
        pre: None,
    };
    // The set-up bootstraps from IKNP over a channel; the iterations then run as steps.
    let run = simulate(
        move |ch| FerretCotReceiver::setup(ch, &mut Prg::new(), params).unwrap(),
        move |ch| FerretCotSender::setup_with_delta(ch, &mut Prg::new(), params, DELTA).unwrap(),
    );
    let (mut r, mut s) = (run.client.output, run.server.output);
    let (mut v, mut w, mut bits) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..3 {
        let (n, msg) = s.extend_step(&mut v).unwrap();
        assert_eq!(n, params.per_iteration());
        let got = r
            .extend_step(bytemuck_bytes(&msg), &mut w, &mut bits)
            .unwrap();
        assert_eq!(got, n);
    }
    assert_eq!(v.len(), 3 * params.per_iteration());
    assert_cot(&v, &w, &bits, DELTA);
    // A short message is refused before any allocation, and the receiver stops.
    let (_, msg) = s.extend_step(&mut v).unwrap();
    let bytes = bytemuck_bytes(&msg);
    let e = r
        .extend_step(&bytes[..bytes.len() - 16], &mut w, &mut bits)
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Malformed);
    let e = r.extend_step(bytes, &mut w, &mut bits).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
}

fn bytemuck_bytes(b: &[Block]) -> &[u8] {
    bytemuck::cast_slice(b)
}
