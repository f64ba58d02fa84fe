//! CryptoGRU's OT lookup tables and carries, as the GRU session uses them: the blocks
//! themselves (random 1-of-N OTs, gate tables, carry leaves and carry shares) are
//! `secinfer_ss::blocks::pooled`'s; this module fixes how many the session takes and bundles
//! the input projections' keys.
use super::circuits::StepLayout;
pub(super) use secinfer_ss::blocks::pooled::{
    carry_derand, carry_shares, carry_tables, leaf_derand, leaf_outputs, leaf_tables, lut_derand,
    lut_outputs, lut_tables, CarryKeys, CarryLayout, LeafKeys, LutKeys,
};

// The session's circuits read the leaves the ss blocks make.
const _: () = assert!(secinfer_ss::blocks::pooled::LEAF_BITS == super::circuits::LEAF_BITS);

/// Input-projection carries per element and step: gates r, z and the candidate's gi_n.
pub(super) const CARRIES: usize = 3;

// The input projections' carry leaves (`LEAF_BITS`) come from random 1-of-2^m OTs at the
// start of the online phase (the input projections are known then for every step), and a random
// 1-of-8 OT on the server's three leaf bits turns them into additive shares of the carry mod 2^L
// (cryptogru::carry_shares): four flights per session, none per step, and no carry left for the
// circuits. The hidden projections' leaves (`StepLayout::gh_leaves`) are made per step, once
// m(t) is known: two flights per step, three bits per party into circuit A. The client holds
// the tables (OT sender on the client → server pool), the server the complemented low bits.

/// The input projections' carry OTs of a session (leaves and carry shares), made offline and
/// used once at the start of the online phase.
pub(super) struct InputCarryKeys {
    pub(super) leaf: LeafKeys,
    pub(super) carry: CarryKeys,
}

impl StepLayout {
    /// The widths of a projection's carry: out of the low F bits, shared mod 2^L.
    pub(super) fn carries(&self) -> CarryLayout {
        CarryLayout {
            f: self.f,
            l: self.l,
        }
    }
}
