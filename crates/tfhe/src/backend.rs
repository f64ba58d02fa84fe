//! The [`Backend`] trait every SHE circuit is written against, [`Bit`] (a backend wire or a
//! public constant) and the gate helpers that fold constants away.
//!
//! In TFHE every two-input gate is one bootstrapped gate (XOR costs as much as AND; only NOT is
//! free), so unlike garbling there is no free XOR: the helpers fold every gate with a public
//! operand, and the counts the counting backend reports are the bootstraps the encrypted backend
//! really runs.

/// A SHE-level homomorphic operation, counted as in SHE's tables (Table 4: CCAdd, PCShift,
/// CCCom, CCMult).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// An addition of two ciphertext integers (one adder of the tree, a bias add).
    CcAdd,
    /// A product of a ciphertext by a public power of two (a re-wiring shift: no gate).
    PcShift,
    /// A comparison of a ciphertext with zero or with another ciphertext (ReLU, max-pool).
    CcCom,
    /// A product of two ciphertext integers (the LSTM's element-wise products).
    CcMult,
}

/// What a circuit can do with wires. `Wire` is a bool for the plaintext backend, a bootstrap
/// depth for the counter, a tfhe-rs boolean ciphertext for the encrypted backend.
///
/// Layers evaluate their outputs in parallel: [`Backend::fork`] gives each worker its own
/// backend and [`Backend::absorb`] folds its tallies back.
pub trait Backend: Send + Sized {
    type Wire: Clone + Send + Sync;
    fn xor(&mut self, a: &Self::Wire, b: &Self::Wire) -> Self::Wire;
    fn and(&mut self, a: &Self::Wire, b: &Self::Wire) -> Self::Wire;
    fn or(&mut self, a: &Self::Wire, b: &Self::Wire) -> Self::Wire;
    /// Free in TFHE (a negation of the LWE ciphertext).
    fn not(&mut self, a: &Self::Wire) -> Self::Wire;
    /// `s ? t : f`; tfhe-rs runs it as two bootstraps in parallel and one key switch.
    fn mux(&mut self, s: &Self::Wire, t: &Self::Wire, f: &Self::Wire) -> Self::Wire;
    /// A wire carrying a public constant (only where a constant must become a real wire: an
    /// output; gadgets otherwise keep constants as [`Bit::Const`]).
    fn constant(&mut self, v: bool) -> Self::Wire;
    /// A backend for another worker thread over the same keys.
    fn fork(&self) -> Self;
    /// Folds a forked backend's tallies back into this one.
    fn absorb(&mut self, other: Self);
    /// Records a SHE-level operation (only the counter keeps them).
    fn note(&mut self, _op: Op, _times: u64) {}
}

/// A wire or a public constant.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Bit<W> {
    Const(bool),
    Wire(W),
}

/// A little-endian two's-complement word (bit 0 first, the last bit is the sign).
pub type Word<W> = Vec<Bit<W>>;

impl<W> Bit<W> {
    pub const ZERO: Bit<W> = Bit::Const(false);
    pub const ONE: Bit<W> = Bit::Const(true);
    pub fn as_const(&self) -> Option<bool> {
        match self {
            Bit::Const(v) => Some(*v),
            Bit::Wire(_) => None,
        }
    }
}

/// ¬x (free).
pub fn not<B: Backend>(b: &mut B, x: &Bit<B::Wire>) -> Bit<B::Wire> {
    match x {
        Bit::Const(v) => Bit::Const(!v),
        Bit::Wire(w) => Bit::Wire(b.not(w)),
    }
}

/// x ⊕ y (one gate unless an operand is public).
pub fn xor<B: Backend>(b: &mut B, x: &Bit<B::Wire>, y: &Bit<B::Wire>) -> Bit<B::Wire> {
    match (x, y) {
        (Bit::Const(u), Bit::Const(v)) => Bit::Const(u ^ v),
        (Bit::Const(false), w) | (w, Bit::Const(false)) => w.clone(),
        (Bit::Const(true), w) | (w, Bit::Const(true)) => not(b, w),
        (Bit::Wire(u), Bit::Wire(v)) => Bit::Wire(b.xor(u, v)),
    }
}

/// x ∧ y (one gate unless an operand is public).
pub fn and<B: Backend>(b: &mut B, x: &Bit<B::Wire>, y: &Bit<B::Wire>) -> Bit<B::Wire> {
    match (x, y) {
        (Bit::Const(false), _) | (_, Bit::Const(false)) => Bit::Const(false),
        (Bit::Const(true), w) | (w, Bit::Const(true)) => w.clone(),
        (Bit::Wire(u), Bit::Wire(v)) => Bit::Wire(b.and(u, v)),
    }
}

/// x ∨ y (one gate unless an operand is public).
pub fn or<B: Backend>(b: &mut B, x: &Bit<B::Wire>, y: &Bit<B::Wire>) -> Bit<B::Wire> {
    match (x, y) {
        (Bit::Const(true), _) | (_, Bit::Const(true)) => Bit::Const(true),
        (Bit::Const(false), w) | (w, Bit::Const(false)) => w.clone(),
        (Bit::Wire(u), Bit::Wire(v)) => Bit::Wire(b.or(u, v)),
    }
}

/// s ? t : f, folded to one cheaper gate (or none) when an operand is public.
pub fn mux<B: Backend>(
    b: &mut B,
    s: &Bit<B::Wire>,
    t: &Bit<B::Wire>,
    f: &Bit<B::Wire>,
) -> Bit<B::Wire> {
    match (s, t, f) {
        (Bit::Const(true), _, _) => t.clone(),
        (Bit::Const(false), _, _) => f.clone(),
        (_, Bit::Const(u), Bit::Const(v)) if u == v => Bit::Const(*u),
        (_, Bit::Const(true), Bit::Const(false)) => s.clone(),
        (_, Bit::Const(false), Bit::Const(true)) => not(b, s),
        (_, Bit::Const(false), _) => {
            let ns = not(b, s);
            and(b, &ns, f)
        }
        (_, Bit::Const(true), _) => or(b, s, f),
        (_, _, Bit::Const(false)) => and(b, s, t),
        (_, _, Bit::Const(true)) => {
            let ns = not(b, s);
            or(b, &ns, t)
        }
        (Bit::Wire(s), Bit::Wire(t), Bit::Wire(f)) => Bit::Wire(b.mux(s, t, f)),
    }
}

/// Makes a real wire out of a bit (constants through [`Backend::constant`]).
pub fn materialize<B: Backend>(b: &mut B, x: &Bit<B::Wire>) -> B::Wire {
    match x {
        Bit::Const(v) => b.constant(*v),
        Bit::Wire(w) => w.clone(),
    }
}

/// Wraps backend wires as bits.
pub fn wires<W: Clone>(ws: &[W]) -> Word<W> {
    ws.iter().cloned().map(Bit::Wire).collect()
}
