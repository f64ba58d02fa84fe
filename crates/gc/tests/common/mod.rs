//! Helpers shared by the gc crate's integration tests.
use secinfer_ot::{Block, OtExtReceiver, OtExtSender, Prg};

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
