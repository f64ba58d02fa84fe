//! Helpers shared by the gc crate's integration tests.
#![allow(
    dead_code,
    reason = "each test crate uses its own subset of the helpers"
)]
use rand::{Rng, SeedableRng};
use secinfer_gc::backend::Bit;
use secinfer_gc::garble::{Evaluator, Garbler, Scheme, SliceSource};
use secinfer_gc::Circuit;
use secinfer_ot::{Block, OtExtReceiver, OtExtSender, Prg};

/// A free-XOR offset (lsb 1, as point-and-permute needs) from `prg`.
pub fn delta(prg: &mut Prg) -> Block {
    Block(prg.next_block().0 | 1)
}

/// Set-up closures for an OT-extension pair whose sender uses the free-XOR offset `d` as its Δ
/// (the garbler's labels then come straight from the COTs), for `secinfer_net::simulate`.
pub fn ot_pair(
    d: Block,
) -> (
    impl FnOnce(&mut secinfer_net::DynChannel) -> OtExtSender,
    impl FnOnce(&mut secinfer_net::DynChannel) -> OtExtReceiver,
) {
    (
        move |ch| OtExtSender::setup_with_delta(ch, &mut Prg::new(), d).expect("ot setup"),
        |ch| OtExtReceiver::setup(ch, &mut Prg::new()).expect("ot setup"),
    )
}

/// Garbles `L` copies with `scheme`, evaluates them on random inputs and compares every lane's
/// outputs (and the label: one of the two) with the plaintext circuit. Returns the table bytes.
pub fn local_roundtrip<const L: usize>(c: &Circuit, scheme: Scheme, seed: u64) -> usize {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut prg = Prg::from_seed(Block(seed as u128 + 1));
    let d = delta(&mut prg);
    let mut g = Garbler::<L>::new(d, seed, 5, Prg::from_seed(prg.next_block()))
        .expect("garbler")
        .with_scheme(scheme);
    let zeros: Vec<[Block; L]> = (0..c.n_inputs).map(|_| g.input()).collect();
    let outs0 = c.eval(&mut g, &zeros);
    g.finish().expect("garble");
    let tables = std::mem::take(&mut g.tables);
    assert_eq!(
        tables.len(),
        c.and_count() as usize * scheme.table_bytes(L),
        "{scheme:?} table size"
    );
    let vals: Vec<[bool; L]> = (0..c.n_inputs)
        .map(|_| std::array::from_fn(|_| rng.gen()))
        .collect();
    let active: Vec<[Block; L]> = zeros
        .iter()
        .zip(&vals)
        .map(|(z, v)| std::array::from_fn(|l| z[l] ^ d.and_bit(v[l])))
        .collect();
    let mut ev = Evaluator::<L, _>::new(seed, 5, SliceSource::new(&tables))
        .expect("evaluator")
        .with_scheme(scheme);
    let outs1 = c.eval(&mut ev, &active);
    ev.finish().expect("evaluate");
    assert_eq!(ev.into_source().remaining(), 0, "every table consumed");
    for l in 0..L {
        let plain = c.eval_plain(&vals.iter().map(|v| v[l]).collect::<Vec<_>>());
        for (k, (o0, o1)) in outs0.iter().zip(&outs1).enumerate() {
            let got = match (o0, o1) {
                (Bit::Wire(z), Bit::Wire(a)) => {
                    assert!(
                        a[l] == z[l] || a[l] == z[l] ^ d,
                        "{scheme:?} lane {l} output {k}: label is one of the two"
                    );
                    // Outputs are XOR-shared by permute bits: lsb(W0) ⊕ lsb(active) = value.
                    assert_eq!(a[l].lsb() ^ z[l].lsb(), a[l] != z[l]);
                    a[l] != z[l]
                }
                (Bit::Const(v), Bit::Const(_)) => *v,
                _ => panic!("shape"),
            };
            assert_eq!(got, plain[k], "{scheme:?} lane {l} output {k}");
        }
    }
    tables.len()
}
