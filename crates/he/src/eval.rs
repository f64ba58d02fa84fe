//! The evaluator abstraction the kernels are written against, with three backends:
//! real BFV ciphertexts ([`HeEvaluator`]), plaintext slot vectors mod t ([`PlainEvaluator`],
//! same slot semantics, for fast checks), and a free operation counter ([`CountingEvaluator`],
//! for the paper's tables at any slot count). All backends count operations identically.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::bfv::{Ciphertext, Decomposed, ExtCiphertext, GaloisKeys, Plaintext};
use crate::params::Params;
use crate::HeError;

/// Operation counts in GALA's vocabulary.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OpCounts {
    /// Rotations of a ciphertext not sharing a decomposition (each includes its own DecPerm).
    pub perm: u64,
    /// Hoisted rotations (sharing a DecPerm).
    pub hst_perm: u64,
    /// Decompositions done for hoisting.
    pub dec_perm: u64,
    pub sc_mult: u64,
    pub add: u64,
}

impl OpCounts {
    /// GALA's Table VII reports DecPerm and HstPerm including the stand-alone Perms
    /// (each Perm is one DecPerm plus one rotation).
    pub fn table_vii_dec_perm(&self) -> u64 {
        self.dec_perm + self.perm
    }
    pub fn table_vii_hst_perm(&self) -> u64 {
        self.hst_perm + self.perm
    }
}

#[derive(Default)]
pub struct Counter {
    perm: AtomicU64,
    hst_perm: AtomicU64,
    dec_perm: AtomicU64,
    sc_mult: AtomicU64,
    add: AtomicU64,
}

impl Counter {
    pub fn snapshot(&self) -> OpCounts {
        OpCounts {
            perm: self.perm.load(Ordering::Relaxed),
            hst_perm: self.hst_perm.load(Ordering::Relaxed),
            dec_perm: self.dec_perm.load(Ordering::Relaxed),
            sc_mult: self.sc_mult.load(Ordering::Relaxed),
            add: self.add.load(Ordering::Relaxed),
        }
    }
    pub fn reset(&self) {
        for a in [
            &self.perm,
            &self.hst_perm,
            &self.dec_perm,
            &self.sc_mult,
            &self.add,
        ] {
            a.store(0, Ordering::Relaxed);
        }
    }
    fn inc(a: &AtomicU64) {
        a.fetch_add(1, Ordering::Relaxed);
    }
}

/// Backend for the linear kernels. Slots form `rows()` rows of `row_len()`; a rotation by
/// `step` moves every row left by `step` (slot j receives slot j+step, cyclically per row).
pub trait Evaluator: Sync {
    type Ct: Clone + Send + Sync;
    type Pt: Send + Sync;
    type Hoisted: Send + Sync;

    fn row_len(&self) -> usize;
    fn rows(&self) -> usize;
    fn slots(&self) -> usize {
        self.row_len() * self.rows()
    }
    fn t(&self) -> u64;
    fn counter(&self) -> &Counter;

    /// Encodes slot values as a plaintext operand (server setup; not counted). The closure is
    /// only called by backends that need the values.
    fn encode<F: FnOnce() -> Vec<u64>>(&self, f: F) -> Result<Self::Pt, HeError>;
    fn sc_mult(&self, ct: &Self::Ct, pt: &Self::Pt) -> Self::Ct;
    fn add_assign(&self, acc: &mut Self::Ct, b: &Self::Ct);
    fn rotate(&self, ct: &Self::Ct, step: usize) -> Result<Self::Ct, HeError>;
    fn decompose(&self, ct: &Self::Ct) -> Self::Hoisted;
    fn rotate_hoisted(&self, h: &Self::Hoisted, step: usize) -> Result<Self::Ct, HeError>;

    fn add(&self, a: &Self::Ct, b: &Self::Ct) -> Self::Ct {
        let mut r = a.clone();
        self.add_assign(&mut r, b);
        r
    }

    // Lazy key switching ("double hoisting"): rotations left in the extended Q·P basis, whose
    // division by P is deferred to one `mod_down_ext` per sum. Counted like their eager
    // counterparts (a lazy HstPerm is a HstPerm, a lazy ScMult a ScMult).

    /// Ciphertext in the extended basis (BFV: an `ExtCiphertext`; simulations: the same value).
    type Ext: Send + Sync;
    /// Number of primes in Q (for the kernels' eager-vs-lazy cost model).
    fn num_q(&self) -> usize {
        1
    }
    /// Cost of one division by P in product passes (one residue, one component), when the
    /// backend knows it better than the kernels' generic formula (see `kernels::lazy_pays`).
    fn mod_down_passes(&self) -> Option<f64> {
        None
    }
    /// P·ct in the extended basis (not counted: no key switching).
    fn lift_ext(&self, ct: &Self::Ct) -> Self::Ext;
    /// Lazy HstPerm.
    fn rotate_hoisted_ext(&self, h: &Self::Hoisted, step: usize) -> Result<Self::Ext, HeError>;
    /// Lazy Perm (own decomposition, no mod-down).
    fn rotate_ext(&self, ct: &Self::Ct, step: usize) -> Result<Self::Ext, HeError>;
    /// ScMult in the extended basis.
    fn sc_mult_ext(&self, x: &Self::Ext, pt: &Self::Pt) -> Self::Ext;
    fn ext_add_assign(&self, acc: &mut Self::Ext, b: &Self::Ext);
    /// The deferred division by P (not counted: it completes the rotations already counted).
    fn mod_down_ext(&self, x: Self::Ext) -> Self::Ct;
}

// ---------------------------------------------------------------------------------------------

/// Real BFV backend.
pub struct HeEvaluator<'a> {
    pub params: &'a Params,
    pub keys: &'a GaloisKeys,
    counter: Counter,
}

impl<'a> HeEvaluator<'a> {
    pub fn new(params: &'a Params, keys: &'a GaloisKeys) -> Self {
        HeEvaluator {
            params,
            keys,
            counter: Counter::default(),
        }
    }
}

impl Evaluator for HeEvaluator<'_> {
    type Ct = Ciphertext;
    type Pt = Plaintext;
    type Hoisted = Decomposed;

    fn row_len(&self) -> usize {
        self.params.row_len()
    }
    fn rows(&self) -> usize {
        2
    }
    fn t(&self) -> u64 {
        self.params.t()
    }
    fn counter(&self) -> &Counter {
        &self.counter
    }
    fn encode<F: FnOnce() -> Vec<u64>>(&self, f: F) -> Result<Plaintext, HeError> {
        Plaintext::from_slots(self.params, &f())
    }
    fn sc_mult(&self, ct: &Ciphertext, pt: &Plaintext) -> Ciphertext {
        Counter::inc(&self.counter.sc_mult);
        self.params.mul_plain(ct, pt)
    }
    fn add_assign(&self, acc: &mut Ciphertext, b: &Ciphertext) {
        Counter::inc(&self.counter.add);
        self.params.add_assign(acc, b)
    }
    fn rotate(&self, ct: &Ciphertext, step: usize) -> Result<Ciphertext, HeError> {
        Counter::inc(&self.counter.perm);
        self.params.rotate(ct, step, self.keys)
    }
    fn decompose(&self, ct: &Ciphertext) -> Decomposed {
        Counter::inc(&self.counter.dec_perm);
        self.params.decompose(ct)
    }
    fn rotate_hoisted(&self, h: &Decomposed, step: usize) -> Result<Ciphertext, HeError> {
        Counter::inc(&self.counter.hst_perm);
        self.params.rotate_hoisted(h, step, self.keys)
    }

    type Ext = ExtCiphertext;
    fn num_q(&self) -> usize {
        self.params.num_q()
    }
    fn mod_down_passes(&self) -> Option<f64> {
        // 32-bit key switching (n4096, `ntt32` transforms): a division by P is 6 NTTs of
        // 4.6–5.0 µs plus its element-wise passes (narrowing, lifts, the P⁻¹ scaling), ≈ 35–40
        // µs, against ≈ 2.85 µs for a product pass (a ScMult, 4 passes, 11.2–11.5 µs): ≈ 13
        // passes (`bench he-ops --params n4096`, one thread, session 6).
        self.params.0.ks32.as_ref().map(|_| 13.0)
    }
    fn lift_ext(&self, ct: &Ciphertext) -> ExtCiphertext {
        self.params.lift_ext(ct)
    }
    fn rotate_hoisted_ext(&self, h: &Decomposed, step: usize) -> Result<ExtCiphertext, HeError> {
        Counter::inc(&self.counter.hst_perm);
        self.params.rotate_hoisted_ext(h, step, self.keys)
    }
    fn rotate_ext(&self, ct: &Ciphertext, step: usize) -> Result<ExtCiphertext, HeError> {
        Counter::inc(&self.counter.perm);
        self.params.rotate_ext(ct, step, self.keys)
    }
    fn sc_mult_ext(&self, x: &ExtCiphertext, pt: &Plaintext) -> ExtCiphertext {
        Counter::inc(&self.counter.sc_mult);
        self.params.mul_plain_ext(x, pt)
    }
    fn ext_add_assign(&self, acc: &mut ExtCiphertext, b: &ExtCiphertext) {
        Counter::inc(&self.counter.add);
        self.params.ext_add_assign(acc, b)
    }
    fn mod_down_ext(&self, x: ExtCiphertext) -> Ciphertext {
        self.params.mod_down_ext(x)
    }
}

// ---------------------------------------------------------------------------------------------

/// Plaintext simulation: a "ciphertext" is its slot vector mod t.
pub struct PlainEvaluator {
    row_len: usize,
    rows: usize,
    t: u64,
    counter: Counter,
}

impl PlainEvaluator {
    pub fn new(row_len: usize, rows: usize, t: u64) -> Self {
        PlainEvaluator {
            row_len,
            rows,
            t,
            counter: Counter::default(),
        }
    }
}

impl Evaluator for PlainEvaluator {
    type Ct = Vec<u64>;
    type Pt = Vec<u64>;
    type Hoisted = Vec<u64>;

    fn row_len(&self) -> usize {
        self.row_len
    }
    fn rows(&self) -> usize {
        self.rows
    }
    fn t(&self) -> u64 {
        self.t
    }
    fn counter(&self) -> &Counter {
        &self.counter
    }
    fn encode<F: FnOnce() -> Vec<u64>>(&self, f: F) -> Result<Vec<u64>, HeError> {
        let mut v = f();
        v.resize(self.slots(), 0);
        Ok(v)
    }
    fn sc_mult(&self, ct: &Vec<u64>, pt: &Vec<u64>) -> Vec<u64> {
        Counter::inc(&self.counter.sc_mult);
        let t = self.t as u128;
        ct.iter()
            .zip(pt)
            .map(|(&a, &b)| (a as u128 * b as u128 % t) as u64)
            .collect()
    }
    fn add_assign(&self, acc: &mut Vec<u64>, b: &Vec<u64>) {
        Counter::inc(&self.counter.add);
        for (x, &y) in acc.iter_mut().zip(b) {
            *x = crate::arith::add_mod(*x, y, self.t);
        }
    }
    fn rotate(&self, ct: &Vec<u64>, step: usize) -> Result<Vec<u64>, HeError> {
        Counter::inc(&self.counter.perm);
        Ok(rotate_rows(ct, step, self.row_len))
    }
    fn decompose(&self, ct: &Vec<u64>) -> Vec<u64> {
        Counter::inc(&self.counter.dec_perm);
        ct.clone()
    }
    fn rotate_hoisted(&self, h: &Vec<u64>, step: usize) -> Result<Vec<u64>, HeError> {
        Counter::inc(&self.counter.hst_perm);
        Ok(rotate_rows(h, step, self.row_len))
    }

    type Ext = Vec<u64>;
    fn lift_ext(&self, ct: &Vec<u64>) -> Vec<u64> {
        ct.clone()
    }
    fn rotate_hoisted_ext(&self, h: &Vec<u64>, step: usize) -> Result<Vec<u64>, HeError> {
        self.rotate_hoisted(h, step)
    }
    fn rotate_ext(&self, ct: &Vec<u64>, step: usize) -> Result<Vec<u64>, HeError> {
        self.rotate(ct, step)
    }
    fn sc_mult_ext(&self, x: &Vec<u64>, pt: &Vec<u64>) -> Vec<u64> {
        self.sc_mult(x, pt)
    }
    fn ext_add_assign(&self, acc: &mut Vec<u64>, b: &Vec<u64>) {
        self.add_assign(acc, b)
    }
    fn mod_down_ext(&self, x: Vec<u64>) -> Vec<u64> {
        x
    }
}

/// Left rotation of each row of a slot vector.
pub fn rotate_rows(v: &[u64], step: usize, row_len: usize) -> Vec<u64> {
    let mut out = vec![0u64; v.len()];
    for (r, row) in v.chunks(row_len).enumerate() {
        for j in 0..row_len {
            out[r * row_len + j] = row[(j + step) % row_len];
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------

/// Counts operations only (ciphertexts are unit values): GALA's tables at 2048 slots, or any
/// shape too large to run.
pub struct CountingEvaluator {
    row_len: usize,
    rows: usize,
    t: u64,
    counter: Counter,
}

impl CountingEvaluator {
    pub fn new(row_len: usize, rows: usize) -> Self {
        CountingEvaluator {
            row_len,
            rows,
            t: 65537,
            counter: Counter::default(),
        }
    }
}

impl Evaluator for CountingEvaluator {
    type Ct = ();
    type Pt = ();
    type Hoisted = ();

    fn row_len(&self) -> usize {
        self.row_len
    }
    fn rows(&self) -> usize {
        self.rows
    }
    fn t(&self) -> u64 {
        self.t
    }
    fn counter(&self) -> &Counter {
        &self.counter
    }
    fn encode<F: FnOnce() -> Vec<u64>>(&self, _f: F) -> Result<(), HeError> {
        Ok(())
    }
    fn sc_mult(&self, _ct: &(), _pt: &()) {
        Counter::inc(&self.counter.sc_mult);
    }
    fn add_assign(&self, _acc: &mut (), _b: &()) {
        Counter::inc(&self.counter.add);
    }
    fn rotate(&self, _ct: &(), _step: usize) -> Result<(), HeError> {
        Counter::inc(&self.counter.perm);
        Ok(())
    }
    fn decompose(&self, _ct: &()) {
        Counter::inc(&self.counter.dec_perm);
    }
    fn rotate_hoisted(&self, _h: &(), _step: usize) -> Result<(), HeError> {
        Counter::inc(&self.counter.hst_perm);
        Ok(())
    }

    type Ext = ();
    fn lift_ext(&self, _ct: &()) {}
    fn rotate_hoisted_ext(&self, h: &(), step: usize) -> Result<(), HeError> {
        self.rotate_hoisted(h, step)
    }
    fn rotate_ext(&self, ct: &(), step: usize) -> Result<(), HeError> {
        self.rotate(ct, step)
    }
    fn sc_mult_ext(&self, x: &(), pt: &()) {
        self.sc_mult(x, pt)
    }
    fn ext_add_assign(&self, acc: &mut (), b: &()) {
        self.add_assign(acc, b)
    }
    fn mod_down_ext(&self, _x: ()) {}
}
