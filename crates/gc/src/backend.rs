//! The [`Backend`] trait every circuit is written against, and [`Bit`]: a backend wire or a
//! public constant. Gadgets work on `Bit`s so constants fold away (an AND with a public constant
//! costs nothing) in every backend alike, and the gate counts the counter reports are the gates
//! the garbler really garbles.

/// What a circuit can do with wires. `Wire` is a bool for the plaintext backend, a depth for the
/// counter, a zero-label for the garbler, an active label for the evaluator (each of the last two
/// for `L` independent circuit copies at once).
///
/// Inputs and outputs are role-specific (the garbler chooses zero-labels, the evaluator receives
/// active labels), so they are inherent methods of each backend, not part of this trait.
pub trait Backend {
    type Wire: Clone;
    fn xor(&mut self, a: &Self::Wire, b: &Self::Wire) -> Self::Wire;
    fn and(&mut self, a: &Self::Wire, b: &Self::Wire) -> Self::Wire;
    fn not(&mut self, a: &Self::Wire) -> Self::Wire;
    /// A wire carrying a public constant (only needed when a constant must become a real wire,
    /// e.g. a circuit output; gadgets otherwise keep constants as [`Bit::Const`]).
    fn constant(&mut self, v: bool) -> Self::Wire;
    /// `w[out] = w[x] ⊕ w[y]` on the slots of a circuit replay ([`crate::Circuit::eval`]). The
    /// label backends override it to XOR lane by lane in place: a by-value wire of 16 labels
    /// (256 bytes) cost memcpy calls per XOR gate in the replay loop.
    #[inline]
    fn xor_slots(&mut self, w: &mut [Self::Wire], x: usize, y: usize, out: usize) {
        let o = self.xor(&w[x], &w[y]);
        w[out] = o;
    }
    /// `w[out] = w[x] ∧ w[y]` on the slots of a circuit replay (label backends write the
    /// output lane by lane, for the same reason as [`Backend::xor_slots`]).
    #[inline]
    fn and_slots(&mut self, w: &mut [Self::Wire], x: usize, y: usize, out: usize) {
        let o = self.and(&w[x], &w[y]);
        w[out] = o;
    }
}

/// A wire or a public constant.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Bit<W> {
    Const(bool),
    Wire(W),
}

/// A little-endian word of bits (bit 0 first). Signed words are two's complement.
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

/// x ⊕ y (free).
#[inline]
pub fn xor<B: Backend>(b: &mut B, x: &Bit<B::Wire>, y: &Bit<B::Wire>) -> Bit<B::Wire> {
    match (x, y) {
        (Bit::Const(u), Bit::Const(v)) => Bit::Const(u ^ v),
        (Bit::Const(false), w) | (w, Bit::Const(false)) => w.clone(),
        (Bit::Const(true), Bit::Wire(w)) | (Bit::Wire(w), Bit::Const(true)) => Bit::Wire(b.not(w)),
        (Bit::Wire(u), Bit::Wire(v)) => Bit::Wire(b.xor(u, v)),
    }
}

/// x ∧ y (one AND gate unless an operand is constant).
#[inline]
pub fn and<B: Backend>(b: &mut B, x: &Bit<B::Wire>, y: &Bit<B::Wire>) -> Bit<B::Wire> {
    match (x, y) {
        (Bit::Const(false), _) | (_, Bit::Const(false)) => Bit::Const(false),
        (Bit::Const(true), w) | (w, Bit::Const(true)) => w.clone(),
        (Bit::Wire(u), Bit::Wire(v)) => Bit::Wire(b.and(u, v)),
    }
}

/// ¬x (free).
#[inline]
pub fn not<B: Backend>(b: &mut B, x: &Bit<B::Wire>) -> Bit<B::Wire> {
    match x {
        Bit::Const(v) => Bit::Const(!v),
        Bit::Wire(w) => Bit::Wire(b.not(w)),
    }
}

/// x ∨ y = ¬(¬x ∧ ¬y) (one AND).
#[inline]
pub fn or<B: Backend>(b: &mut B, x: &Bit<B::Wire>, y: &Bit<B::Wire>) -> Bit<B::Wire> {
    let nx = not(b, x);
    let ny = not(b, y);
    let a = and(b, &nx, &ny);
    not(b, &a)
}

/// s ? y : x (one AND).
#[inline]
pub fn mux<B: Backend>(
    b: &mut B,
    s: &Bit<B::Wire>,
    x: &Bit<B::Wire>,
    y: &Bit<B::Wire>,
) -> Bit<B::Wire> {
    if let (Bit::Const(u), Bit::Const(v)) = (x, y) {
        return match (u, v) {
            (false, false) => Bit::Const(false),
            (true, true) => Bit::Const(true),
            (false, true) => s.clone(),
            (true, false) => not(b, s),
        };
    }
    let d = xor(b, x, y);
    let t = and(b, s, &d);
    xor(b, x, &t)
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
