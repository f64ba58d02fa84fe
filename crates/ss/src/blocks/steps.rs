//! SIRNN / CrypTFlow2 blocks as pure steps: each block's arithmetic as functions of this
//! party's shares, its correlations (Beaver bit triples, half triples, random 1-of-2^m leaf
//! OTs, correlated-OT outputs) and the peer's messages, with no channel and no [`Ctx`] IO.
//! The `Ctx` blocks in [`crate::blocks`] are these steps around `Ctx`'s OTs and openings, so a
//! protocol can also run them on correlations it holds itself, flight by flight.
//!
//! The blocks: AND on triples (and two ANDs sharing an operand, and ANDs of private bits on
//! half triples), the millionaires' comparison (CrypTFlow2: m-bit leaves on random 1-of-2^m
//! OTs, then a log-depth AND tree, [`MillTree`]), carries and wraps (the comparison of one
//! party's complement with the other's value), MSB and MSB-with-wrap, SIRNN's truncations
//! (truncate-reduce, arithmetic right shift, truncation of a value with a known MSB: a carry
//! or wrap, its B2A, then a local combination), zero and signed extension, digit
//! decomposition, SIRNN's lookup table (a 1-of-2^k OT on the rotated table), and products: of
//! shares (`mul_shared`, the cross terms one correlated OT per bit of each party's y share),
//! of private values, and with non-uniform bitwidths.
//!
//! Bits are bytes 0/1 (XOR shares); a flight of bits is packed little-endian, bit i at
//! position i % 8 of byte i / 8, with the padding past the last bit zero. Every peer message
//! is checked against its shape (`*_bytes`) before it is read: a wrong size or set padding
//! is [`SsError::Malformed`]; a local argument of the wrong length is `InvalidArgument`.
//!
//! [`Ctx`]: crate::Ctx
use std::borrow::Cow;

use super::pooled::{get_bit, push_bits, sum_chunks};
use crate::error::{invalid, Result, SsError};
use crate::ring::mask;

/// Left shift that yields 0 for shifts of 64 or more (2^64 ≡ 0 in every ring here).
#[inline]
pub(crate) fn shl(v: u64, s: u32) -> u64 {
    if s >= 64 {
        0
    } else {
        v << s
    }
}

fn malformed(what: &str, got: usize, want: usize) -> SsError {
    SsError::Malformed(format!("{what}: {got} bytes, expected {want}"))
}

// ---- Openings ------------------------------------------------------------------------------

/// Bytes of a flight of `n` opened bits.
pub fn opening_bytes(n: usize) -> usize {
    n.div_ceil(8)
}

/// Packs bits (bytes 0/1) into a flight, bit i at position i % 8 of byte i / 8.
pub fn pack_opening(bits: &[u8]) -> Vec<u8> {
    let mut out = vec![0u8; opening_bytes(bits.len())];
    for (o, c) in out.iter_mut().zip(bits.chunks(8)) {
        for (k, b) in c.iter().enumerate() {
            *o |= (b & 1) << k;
        }
    }
    out
}

/// The peer's `n` opened bits from its flight: a flight of the wrong size, or with bits set
/// past the end, is malformed.
pub fn unpack_opening(frame: &[u8], n: usize) -> Result<Vec<u8>> {
    if frame.len() != opening_bytes(n) {
        return Err(malformed("bit opening", frame.len(), opening_bytes(n)));
    }
    check_padding(frame, n)?;
    Ok((0..n).map(|i| get_bit(frame, i) as u8).collect())
}

fn check_padding(packed: &[u8], n: usize) -> Result<()> {
    let tail = n & 7;
    if tail != 0 {
        if let Some(last) = packed.last() {
            if last >> tail != 0 {
                return Err(SsError::Malformed(
                    "bit flight has bits set past its end".into(),
                ));
            }
        }
    }
    Ok(())
}

// ---- AND on Beaver bit triples -------------------------------------------------------------
//
// A triple is one byte of this party's XOR shares: a (bit 0), b (bit 1), b2 (bit 2), c = a·b
// (bit 3) and c2 = a·b2 (bit 4) of the shared values. A half triple (ANDs of private bits):
// bit 0 this party's known factor (P0's u, P1's v), bit 1 its share of u·v.

fn check_and(what: &str, n: usize, others: &[usize]) -> Result<()> {
    if others.iter().any(|&l| l != n) {
        return Err(invalid(format!("{what}: lengths {n} and {others:?}")));
    }
    Ok(())
}

/// This party's opening must hold `bits` bits (a local error otherwise), the peer's as many.
fn check_closing(what: &str, bits: usize, mine: &[u8], theirs: &[u8]) -> Result<()> {
    check_and(what, bits, &[mine.len()])?;
    if theirs.len() != mine.len() {
        return Err(SsError::Malformed(format!(
            "{what}: {} opened bits, expected {}",
            theirs.len(),
            mine.len()
        )));
    }
    Ok(())
}

/// AND, first step: this party's opening of x ⊕ a and y ⊕ b, interleaved (2j: d_j, 2j + 1:
/// e_j), one triple per AND.
pub fn and_open(x: &[u8], y: &[u8], t: &[u8]) -> Result<Vec<u8>> {
    check_and("AND", x.len(), &[y.len(), t.len()])?;
    let mut mine = vec![0u8; 2 * x.len()];
    for j in 0..x.len() {
        mine[2 * j] = (x[j] ^ t[j]) & 1;
        mine[2 * j + 1] = (y[j] ^ (t[j] >> 1)) & 1;
    }
    Ok(mine)
}

/// AND, last step: with d and e opened (this party's `mine`, the peer's `theirs`), the shares
/// c ⊕ d·b ⊕ e·a (⊕ d·e at P0) of x ∧ y.
pub fn and_close(mine: &[u8], theirs: &[u8], t: &[u8], p0: bool) -> Result<Vec<u8>> {
    let n = t.len();
    check_closing("AND", 2 * n, mine, theirs)?;
    let p0 = p0 as u8;
    Ok((0..n)
        .map(|j| {
            let (a, b, c) = (t[j] & 1, (t[j] >> 1) & 1, (t[j] >> 3) & 1);
            let d = mine[2 * j] ^ theirs[2 * j];
            let e = mine[2 * j + 1] ^ theirs[2 * j + 1];
            c ^ (d & b) ^ (e & a) ^ (p0 & d & e)
        })
        .collect())
}

/// Two ANDs sharing an operand, (x ∧ y, x ∧ z), on one triple each (its two b's): the
/// opening of x ⊕ a, y ⊕ b, z ⊕ b2 (3 bits per pair instead of 4).
pub fn and2_open(x: &[u8], y: &[u8], z: &[u8], t: &[u8]) -> Result<Vec<u8>> {
    check_and("AND", x.len(), &[y.len(), z.len(), t.len()])?;
    let mut mine = vec![0u8; 3 * x.len()];
    for j in 0..x.len() {
        mine[3 * j] = (x[j] ^ t[j]) & 1;
        mine[3 * j + 1] = (y[j] ^ (t[j] >> 1)) & 1;
        mine[3 * j + 2] = (z[j] ^ (t[j] >> 2)) & 1;
    }
    Ok(mine)
}

/// [`and2_open`]'s last step: the shares of (x ∧ y, x ∧ z).
pub fn and2_close(mine: &[u8], theirs: &[u8], t: &[u8], p0: bool) -> Result<(Vec<u8>, Vec<u8>)> {
    let n = t.len();
    check_closing("AND", 3 * n, mine, theirs)?;
    let p0 = p0 as u8;
    let mut oy = Vec::with_capacity(n);
    let mut oz = Vec::with_capacity(n);
    for (j, &w) in t.iter().enumerate() {
        let (a, b, b2, c, c2) = (
            w & 1,
            (w >> 1) & 1,
            (w >> 2) & 1,
            (w >> 3) & 1,
            (w >> 4) & 1,
        );
        let d = mine[3 * j] ^ theirs[3 * j];
        let e = mine[3 * j + 1] ^ theirs[3 * j + 1];
        let f = mine[3 * j + 2] ^ theirs[3 * j + 2];
        oy.push(c ^ (d & b) ^ (e & a) ^ (p0 & d & e));
        oz.push(c2 ^ (d & b2) ^ (f & a) ^ (p0 & d & f));
    }
    Ok((oy, oz))
}

/// AND of private bits (P0's p, P1's q) on half triples, first step: the opening p ⊕ u (P0)
/// or q ⊕ v (P1), a one-time pad since u and v are uniform and unknown to the peer.
pub fn and_private_open(mine: &[u8], t: &[u8]) -> Result<Vec<u8>> {
    check_and("private AND", mine.len(), &[t.len()])?;
    Ok(mine.iter().zip(t).map(|(b, t)| (b ^ t) & 1).collect())
}

/// [`and_private_open`]'s last step: p·q = d·e ⊕ e·u ⊕ d·v ⊕ u·v, P0 taking d·e ⊕ e·u and
/// P1 d·v, each with its share of u·v.
pub fn and_private_close(open: &[u8], theirs: &[u8], t: &[u8], p0: bool) -> Result<Vec<u8>> {
    check_closing("private AND", t.len(), open, theirs)?;
    Ok((0..t.len())
        .map(|j| {
            let (k, w) = (t[j] & 1, (t[j] >> 1) & 1);
            if p0 {
                (open[j] & theirs[j]) ^ (theirs[j] & k) ^ w
            } else {
                (theirs[j] & k) ^ w
            }
        })
        .collect())
}

// ---- The millionaires' leaves --------------------------------------------------------------

/// The digits of a millionaires' input, `md` bits each, least significant first: index
/// [j·n + i] is digit j of element i (q = ⌈bits / md⌉ digits).
pub fn mill_digits(v: &[u64], bits: u32, md: u32) -> Vec<u8> {
    let n = v.len();
    let q = bits.div_ceil(md.max(1)) as usize;
    let (m, dm) = (mask(bits), mask(md));
    let mut digits = vec![0u8; q * n];
    for j in 0..q {
        for (i, x) in v.iter().enumerate() {
            digits[j * n + i] = ((x & m).checked_shr(md * j as u32).unwrap_or(0) & dm) as u8;
        }
    }
    digits
}

/// One-bit leaves (ANDs on half triples): lt = ¬a ∧ b is one AND of the parties' own bits and
/// eq = ¬a ⊕ b is local, so each party's leaf operand is its bit, complemented at P0.
pub fn mill_bit_leaves(v: &[u64], bits: u32, p0: bool) -> Vec<u8> {
    let mut d = mill_digits(v, bits, 1);
    if p0 {
        d.iter_mut().for_each(|b| *b ^= 1);
    }
    d
}

/// A leaf result (bit 0: lt, bit 1: eq) split into the tree's lt and eq bits.
pub fn leaf_split(r: &[u8]) -> (Vec<u8>, Vec<u8>) {
    (
        r.iter().map(|x| x & 1).collect(),
        r.iter().map(|x| (x >> 1) & 1).collect(),
    )
}

/// The leaf OTs' layout: a random 1-of-2^m OT per leaf (2 ≤ m ≤ 4), made offline. P0 keeps
/// the 2-bit masks of all 2^m keys (mask x at bits 2x..2x + 2 of one word), P1 its random
/// choice r (bits 0..8) and the 2-bit mask of K_r (bits 8..10).
fn check_leaf(m: u32, k: usize, t: &[u32], digits: &[u8]) -> Result<()> {
    check_leaf_digits(m, digits)?;
    if t.len() != k || digits.len() != k {
        return Err(invalid(format!(
            "leaves: {} OTs for {} digits",
            t.len(),
            digits.len()
        )));
    }
    Ok(())
}

/// The leaf width 2 ≤ m ≤ 4 and every digit below 2^m: what a party can check before any
/// traffic.
pub(crate) fn check_leaf_digits(m: u32, digits: &[u8]) -> Result<()> {
    if !(2..=4).contains(&m) {
        return Err(invalid("leaf OTs need 2 ≤ m ≤ 4"));
    }
    if digits.iter().any(|d| *d as usize >= 1 << m) {
        return Err(invalid("leaf digit out of range"));
    }
    Ok(())
}

/// Bytes of P1's leaf query for `k` leaves of `m` bits.
pub fn leaf_query_bytes(k: usize, m: u32) -> usize {
    (k * m as usize).div_ceil(8)
}

/// Bytes of P0's leaf answer: one word of 2^m 2-bit fields per leaf (whole bytes).
pub fn leaf_answer_bytes(k: usize, m: u32) -> usize {
    k * (2usize << m) / 8
}

/// Leaves, P1's query: d = b ⊕ r (m bits per leaf, packed LSB first) from its digits b and
/// its OTs' random choices.
pub fn leaf_query(t: &[u32], digits: &[u8], m: u32) -> Result<Vec<u8>> {
    let k = digits.len();
    check_leaf(m, k, t, digits)?;
    let mu = m as usize;
    let mut packed = vec![0u8; leaf_query_bytes(k, m)];
    for j in 0..k {
        let dj = (digits[j] as u32 ^ t[j]) & ((1u32 << m) - 1);
        let bit = j * mu;
        let v = dj << (bit % 8);
        packed[bit / 8] |= v as u8;
        if v >> 8 != 0 {
            packed[bit / 8 + 1] |= (v >> 8) as u8;
        }
    }
    Ok(packed)
}

/// Words of P0's share bits for `k` leaves (two bits per leaf, 32 leaves a word).
pub fn leaf_share_words(k: usize) -> usize {
    k.div_ceil(32)
}

/// Leaves, P0's answer to P1's `query`: y_x = msg_x ⊕ K_{x ⊕ d} for every x (2 bits each),
/// msg_x = ([a < x] ⊕ s_l, [a = x] ⊕ s_e), a its digits and (s_l, s_e) its random shares,
/// bits 2j and 2j + 1 of `shares` (see [`leaf_share_words`]). Returns the answer and its
/// shares of (lt, eq) as bits 0 and 1 per leaf. No hashing online.
pub fn leaf_answer(
    t: &[u32],
    digits: &[u8],
    m: u32,
    query: &[u8],
    shares: &[u64],
) -> Result<(Vec<u8>, Vec<u8>)> {
    let k = digits.len();
    check_leaf(m, k, t, digits)?;
    if shares.len() != leaf_share_words(k) {
        return Err(invalid("leaves: share words"));
    }
    if query.len() != leaf_query_bytes(k, m) {
        return Err(malformed("leaf query", query.len(), leaf_query_bytes(k, m)));
    }
    check_padding(query, k * m as usize)?;
    let (mu, nd) = (m as usize, 1usize << m);
    // Each answer is one word of 2^m 2-bit fields (8, 16 or 32 bits: whole bytes, little-endian,
    // the order `pack_opening` would give).
    let per = 2 * nd / 8;
    let full = u32::MAX >> (32 - 2 * nd);
    let even = 0x5555_5555u32 & full;
    let dm = nd as u32 - 1;
    let mut y = Vec::with_capacity(per * k);
    let mut out = Vec::with_capacity(k);
    let mut sw = 0u64;
    for j in 0..k {
        if j % 32 == 0 {
            sw = shares[j / 32];
        }
        let (sl, se) = ((sw & 1) as u32, ((sw >> 1) & 1) as u32);
        sw >>= 2;
        let bit = j * mu;
        let lo = query[bit / 8] as u32;
        let hi = query.get(bit / 8 + 1).copied().unwrap_or(0) as u32;
        let dj = ((lo | hi << 8) >> (bit % 8)) & dm;
        // K_{x ⊕ d} at field x: swap field groups along every set bit of d (public).
        let mut key = t[j] & full;
        for (b, mk) in [0x3333_3333u32, 0x0f0f_0f0f, 0x00ff_00ff, 0x0000_ffff]
            .into_iter()
            .enumerate()
            .take(mu)
        {
            if (dj >> b) & 1 == 1 {
                let sh = 2 << b;
                key = ((key & mk) << sh) | ((key >> sh) & mk);
            }
        }
        let a = digits[j] as u32;
        // lt_x = [a < x] in the even bits of fields x > a, eq_x = [a = x] in field a's odd bit,
        // then P0's share bits on every field.
        let lt = even & !(((1u64 << (2 * (a + 1))) - 1) as u32);
        let eq = 2u32 << (2 * a);
        let sh = (even * sl) | ((even << 1) * se);
        let w = (lt ^ eq ^ sh ^ key) & full;
        y.extend_from_slice(&w.to_le_bytes()[..per]);
        out.push((sl | se << 1) as u8);
    }
    Ok((y, out))
}

/// Leaves, P1's result from P0's `answer`: y_b ⊕ K_r = msg_b, its shares of (lt, eq) as bits
/// 0 and 1 per leaf.
pub fn leaf_result(t: &[u32], digits: &[u8], m: u32, answer: &[u8]) -> Result<Vec<u8>> {
    let k = digits.len();
    check_leaf(m, k, t, digits)?;
    if answer.len() != leaf_answer_bytes(k, m) {
        return Err(malformed(
            "leaf answer",
            answer.len(),
            leaf_answer_bytes(k, m),
        ));
    }
    let per = (2usize << m) / 8;
    Ok((0..k)
        .map(|j| {
            let mut wb = [0u8; 4];
            wb[..per].copy_from_slice(&answer[j * per..(j + 1) * per]);
            let w = u32::from_le_bytes(wb);
            let v = (w >> (2 * digits[j] as u32)) & 3;
            (v ^ ((t[j] >> 8) & 3)) as u8
        })
        .collect())
}

/// Leaves on a 1-of-2^m OT without preprocessing (the test dealer's path), P0's rows: per leaf
/// the 2^m messages ([a < x] ⊕ r_l) | ([a = x] ⊕ r_e) << 1, with r its random bits (2 per
/// leaf); also returns its shares of (lt, eq) as bits 0 and 1.
pub fn leaf_rows(digits: &[u8], m: u32, r: &[u8]) -> Result<(Vec<u64>, Vec<u8>)> {
    let nd = 1usize << m;
    if r.len() != 2 * digits.len() || digits.iter().any(|d| *d as usize >= nd) {
        return Err(invalid("leaf rows: random bits or digit out of range"));
    }
    let mut msgs = vec![0u64; digits.len() * nd];
    for (j, &a) in digits.iter().enumerate() {
        let (rl, re) = (r[2 * j], r[2 * j + 1]);
        for (t, slot) in msgs[j * nd..(j + 1) * nd].iter_mut().enumerate() {
            let l = ((a < t as u8) as u8) ^ rl;
            let e = ((a == t as u8) as u8) ^ re;
            *slot = (l | (e << 1)) as u64;
        }
    }
    Ok((
        msgs,
        (0..digits.len())
            .map(|j| r[2 * j] | r[2 * j + 1] << 1)
            .collect(),
    ))
}

// ---- The millionaires' AND tree ------------------------------------------------------------

/// One level of the AND tree: shares of eq_hi ∧ lt_lo (x ∧ y) and, below the last level,
/// eq_hi ∧ eq_lo (x ∧ w), for every pair of adjacent parts.
pub struct AndLevel {
    pub x: Vec<u8>,
    pub y: Vec<u8>,
    /// `None` at the last level (only lt is needed).
    pub w: Option<Vec<u8>>,
}

/// The millionaires' AND tree over q parts of n comparisons (CrypTFlow2): (lt, eq) of a high
/// and a low part combine to lt = lt_hi ⊕ (eq_hi ∧ lt_lo), eq = eq_hi ∧ eq_lo, so ⌈log2 q⌉
/// levels of ANDs give [a < b]. A state machine: [`MillTree::level`] gives the ANDs a level
/// needs, [`MillTree::absorb`] takes their shares. Secret (no `Debug`).
pub struct MillTree {
    n: usize,
    cnt: usize,
    lt: Vec<u8>,
    eq: Vec<u8>,
}

impl MillTree {
    /// The tree over leaves `lt`, `eq` (index [j·n + i]: part j, least significant first, of
    /// comparison i).
    pub fn new(n: usize, lt: Vec<u8>, eq: Vec<u8>) -> Result<Self> {
        if n == 0 || lt.len() != eq.len() || lt.is_empty() || !lt.len().is_multiple_of(n) {
            return Err(invalid(format!(
                "millionaires' tree: {} lt and {} eq leaves for {n} comparisons",
                lt.len(),
                eq.len()
            )));
        }
        Ok(MillTree {
            n,
            cnt: lt.len() / n,
            lt,
            eq,
        })
    }

    /// The ANDs of the next level, `None` when the comparison is done.
    pub fn level(&self) -> Option<AndLevel> {
        if self.cnt <= 1 {
            return None;
        }
        let (n, pairs) = (self.n, self.cnt / 2);
        let last = self.cnt == 2;
        let mut x = Vec::with_capacity(pairs * n);
        let mut y = Vec::with_capacity(pairs * n);
        let mut w = Vec::with_capacity(if last { 0 } else { pairs * n });
        for p in 0..pairs {
            let (lo, hi) = (2 * p, 2 * p + 1);
            x.extend_from_slice(&self.eq[hi * n..(hi + 1) * n]);
            y.extend_from_slice(&self.lt[lo * n..(lo + 1) * n]);
            if !last {
                w.extend_from_slice(&self.eq[lo * n..(lo + 1) * n]);
            }
        }
        Some(AndLevel {
            x,
            y,
            w: (!last).then_some(w),
        })
    }

    /// Takes the level's AND shares: `zl` of x ∧ y and `ze` of x ∧ w (empty at the last level).
    pub fn absorb(&mut self, zl: &[u8], ze: &[u8]) -> Result<()> {
        let (n, cnt) = (self.n, self.cnt);
        let pairs = cnt / 2;
        let last = cnt == 2;
        if cnt <= 1 || zl.len() != pairs * n || ze.len() != if last { 0 } else { pairs * n } {
            return Err(invalid(
                "millionaires' tree: AND shares of the wrong length",
            ));
        }
        let newcnt = cnt.div_ceil(2);
        let mut nlt = vec![0u8; newcnt * n];
        let mut neq = vec![0u8; newcnt * n];
        for p in 0..pairs {
            let hi = 2 * p + 1;
            for i in 0..n {
                nlt[p * n + i] = self.lt[hi * n + i] ^ zl[p * n + i];
                if !last {
                    neq[p * n + i] = ze[p * n + i];
                }
            }
        }
        if cnt % 2 == 1 {
            let k = cnt - 1;
            nlt[pairs * n..].copy_from_slice(&self.lt[k * n..(k + 1) * n]);
            neq[pairs * n..].copy_from_slice(&self.eq[k * n..(k + 1) * n]);
        }
        self.lt = nlt;
        self.eq = neq;
        self.cnt = newcnt;
        Ok(())
    }

    /// The shares of [a < b] once every level is absorbed.
    pub fn result(mut self) -> Result<Vec<u8>> {
        if self.cnt != 1 {
            return Err(invalid("millionaires' tree: levels left"));
        }
        self.lt.truncate(self.n);
        Ok(self.lt)
    }
}

// ---- Carries, truncate-reduce and arithmetic right shift -----------------------------------

/// A carry's millionaires' input: [x0 + x1 ≥ 2^bits] = [2^bits − 1 − x0 < x1], so P0 compares
/// the complement of its low `bits` bits and P1 its own.
pub fn carry_input(x: &[u64], bits: u32, p0: bool) -> Vec<u64> {
    let m = mask(bits);
    x.iter()
        .map(|a| if p0 { m - (a & m) } else { a & m })
        .collect()
}

/// Carries at several widths in one comparison: the inputs of each width one after the other
/// (zero-padded to the widest, which is the comparison's width).
pub fn carries_input(x: &[u64], widths: &[u32], p0: bool) -> Vec<u64> {
    widths.iter().flat_map(|&w| carry_input(x, w, p0)).collect()
}

/// Truncate-reduce (SIRNN), last step: ⌊x / 2^t⌋ mod 2^(bits − t) = (x0 >> t) + (x1 >> t) +
/// carry of the low t bits, `ca` this party's arithmetic share of that carry mod 2^(bits − t).
pub fn trunc_reduce_output(x: &[u64], ca: &[u64], bits: u32, t: u32) -> Result<Vec<u64>> {
    if t == 0 || t >= bits || bits > 64 || ca.len() != x.len() {
        return Err(invalid(
            "trunc_reduce: 0 < t < bits ≤ 64 and one carry per value",
        ));
    }
    let (mb, mo) = (mask(bits), mask(bits - t));
    Ok(x.iter()
        .zip(ca)
        .map(|(a, c)| ((a & mb) >> t).wrapping_add(*c) & mo)
        .collect())
}

/// Arithmetic right shift (SIRNN), first step: P0 biases its share by 2^(bits − 1), so the
/// biased value is x + 2^(bits − 1) as an unsigned number and its shift is exact.
pub fn ars_bias(x: &[u64], bits: u32, p0: bool) -> Vec<u64> {
    add_public(x, shl(1, bits.clamp(1, 64) - 1), bits, p0)
}

/// Arithmetic right shift, last step: with `a` this party's shares mod 2^bits of the carry of
/// the low t bits (first n) and of the wrap of the biased value `y` (next n),
/// (y0 >> t) + (y1 >> t) + carry − 2^(bits − t)·wrap, unbiased by 2^(bits − 1 − t) at P0.
pub fn ars_output(y: &[u64], a: &[u64], bits: u32, t: u32, p0: bool) -> Result<Vec<u64>> {
    let n = y.len();
    if t == 0 || t >= bits || bits > 64 || a.len() != 2 * n {
        return Err(invalid(
            "ars: 0 < t < bits ≤ 64 and a carry and a wrap per value",
        ));
    }
    let mb = mask(bits);
    let bias = 1u64 << (bits - 1);
    Ok((0..n)
        .map(|i| {
            let mut r = (y[i] >> t).wrapping_add(a[i]);
            r = r.wrapping_sub(shl(a[n + i], bits - t));
            if p0 {
                r = r.wrapping_sub(bias >> t);
            }
            r & mb
        })
        .collect())
}

/// Truncation of a value whose MSB is known to be 0 (SIRNN), first step: without `exact`, P0
/// adds 2^t so the result, which drops the carry of the low bits, is ⌊x/2^t⌋ or one more and
/// never below zero.
pub fn trunc_msb0_bias(x: &[u64], bits: u32, t: u32, exact: bool, p0: bool) -> Cow<'_, [u64]> {
    if exact || !p0 {
        return Cow::Borrowed(x);
    }
    let mb = mask(bits);
    Cow::Owned(x.iter().map(|a| a.wrapping_add(shl(1, t)) & mb).collect())
}

/// The carry an exact truncation needs, as a carry's operand and width: of the low t bits, or
/// (`carry_bits` < t) of their top `carry_bits` bits only, which makes the result
/// ⌊(x − ε)/2^t⌋ with 0 ≤ ε < 2^(t − carry_bits).
pub fn trunc_carry_operand(x: &[u64], t: u32, carry_bits: u32) -> (Cow<'_, [u64]>, u32) {
    if carry_bits >= t {
        (Cow::Borrowed(x), t)
    } else {
        let a = t - carry_bits;
        (
            Cow::Owned(x.iter().map(|v| (v & mask(t)) >> a).collect()),
            carry_bits,
        )
    }
}

/// Truncation, the correlations of its one COT batch with P0 sending: this party's MSBs (for
/// the wrap m0 ∨ m1 = m0 + m1 − m0·m1) and, when exact, its carry shares (for their B2A,
/// c0 + c1 − 2·c0·c1); each party's choice bits are the same bits.
pub fn trunc_msb0_deltas(x: &[u64], bits: u32, carry: Option<&[u8]>) -> Vec<u64> {
    let mut d: Vec<u64> = msbs(x, bits).into_iter().map(u64::from).collect();
    if let Some(c) = carry {
        d.extend(c.iter().map(|b| (*b & 1) as u64));
    }
    d
}

/// Truncation, last step: (x0 >> t) + (x1 >> t) − 2^(bits − t)·wrap (+ the carry when
/// exact), with `prod` this party's shares of the COT products δ_P0·c_P1.
pub fn trunc_msb0_output(
    x: &[u64],
    deltas: &[u64],
    prod: &[u64],
    bits: u32,
    t: u32,
    exact: bool,
) -> Result<Vec<u64>> {
    let n = x.len();
    let want = if exact { 2 * n } else { n };
    if t == 0 || t >= bits || bits > 64 || deltas.len() != want || prod.len() != want {
        return Err(invalid(
            "trunc: 0 < t < bits ≤ 64 and one product per correlation",
        ));
    }
    let mb = mask(bits);
    Ok((0..n)
        .map(|i| {
            let w = deltas[i].wrapping_sub(prod[i]); // m0 ∨ m1
            let mut y = ((x[i] & mb) >> t).wrapping_sub(shl(w, bits - t));
            if exact {
                // The carry's B2A.
                y = y.wrapping_add(deltas[n + i].wrapping_sub(prod[n + i].wrapping_mul(2)));
            }
            y & mb
        })
        .collect())
}

// ---- MSB, wraps, extensions and digits -----------------------------------------------------

/// Shares of the public constant `c` added to shares mod 2^bits: P0 adds it (biasing a signed
/// value to a known range, or unbiasing the result), P1's shares are only reduced.
pub fn add_public(x: &[u64], c: u64, bits: u32, p0: bool) -> Vec<u64> {
    let m = mask(bits);
    x.iter()
        .map(|a| if p0 { a.wrapping_add(c) & m } else { a & m })
        .collect()
}

/// Operands of the AND of the parties' private bits b0·b1 on shared-AND gates: P0 passes
/// (b, 0), P1 (0, b), so the XOR-shared operands are b0 and b1.
pub fn private_and_operands(b: &[u8], p0: bool) -> (Vec<u8>, Vec<u8>) {
    let zero = vec![0u8; b.len()];
    if p0 {
        (b.to_vec(), zero)
    } else {
        (zero, b.to_vec())
    }
}

/// This party's MSBs of its shares mod 2^bits.
pub fn msbs(x: &[u64], bits: u32) -> Vec<u8> {
    let top = bits.clamp(1, 64) - 1;
    x.iter().map(|a| ((a >> top) & 1) as u8).collect()
}

/// MSB, last step: msb(x0) ⊕ msb(x1) ⊕ carry of the low bits − 1, `c` this party's share of
/// that carry.
pub fn msb_output(x: &[u64], c: &[u8], bits: u32) -> Result<Vec<u8>> {
    if c.len() != x.len() || !(1..=64).contains(&bits) {
        return Err(invalid("msb: one carry per value"));
    }
    Ok(msbs(x, bits).iter().zip(c).map(|(m, c)| m ^ c).collect())
}

/// MSB and wrap together, the AND's operands: c ∧ (m0 ⊕ m1) and m0 ∧ m1 in one batch, `c`
/// this party's share of the carry of the low bits − 1.
pub fn msb_wrap_and_operands(x: &[u64], c: &[u8], bits: u32, p0: bool) -> (Vec<u8>, Vec<u8>) {
    let mine = msbs(x, bits);
    let (a, b) = private_and_operands(&mine, p0);
    ([c, &a[..]].concat(), [&mine[..], &b[..]].concat())
}

/// MSB and wrap, last step: the MSB m0 ⊕ m1 ⊕ c and the wrap m0·m1 ⊕ c·(m0 ⊕ m1), from the
/// AND's shares `z` of [`msb_wrap_and_operands`].
pub fn msb_wrap_output(x: &[u64], c: &[u8], z: &[u8], bits: u32) -> Result<(Vec<u8>, Vec<u8>)> {
    let n = x.len();
    if c.len() != n || z.len() != 2 * n || !(2..=64).contains(&bits) {
        return Err(invalid("msb_and_wrap: one carry and two ANDs per value"));
    }
    let ms = msb_output(x, c, bits)?;
    Ok((ms, (0..n).map(|i| z[i] ^ z[n + i]).collect()))
}

/// Extension from Z_{2^from} to Z_{2^to}, last step: (x mod 2^from) − 2^from·wrap, `wa` this
/// party's arithmetic share (mod 2^to) of the wrap of x's shares at `from` bits (for to < from,
/// the value reduced mod 2^to). A signed extension biases first and unbiases after
/// ([`add_public`]).
pub fn ext_output(x: &[u64], wa: &[u64], from: u32, to: u32) -> Result<Vec<u64>> {
    if wa.len() != x.len() || !(1..=64).contains(&from) || !(1..=64).contains(&to) {
        return Err(invalid(
            "extension: one wrap per value and widths of 1 to 64 bits",
        ));
    }
    let (mf, mt) = (mask(from), mask(to));
    Ok(x.iter()
        .zip(wa)
        .map(|(a, w)| (a & mf).wrapping_sub(shl(*w, from)) & mt)
        .collect())
}

/// Digit decomposition (SIRNN) of x ∈ Z_{2^bits} into q = ⌈bits / d⌉ digits of d bits: the
/// widths k·d (0 < k < q) whose carries it needs.
pub fn digit_carry_widths(bits: u32, d: u32) -> Vec<u32> {
    (1..bits.div_ceil(d.max(1))).map(|k| k * d).collect()
}

/// Digit decomposition, last step: digit k = (x0 >> kd) + (x1 >> kd) + carry_kd mod
/// 2^min(d, bits − kd), `ca` this party's shares mod 2^d of the carries at
/// [`digit_carry_widths`] (width by width). Returns each digit's shares and width.
pub fn digit_output(x: &[u64], ca: &[u64], bits: u32, d: u32) -> Result<Vec<(Vec<u64>, u32)>> {
    let n = x.len();
    let q = bits.div_ceil(d.max(1));
    if d == 0 || d > bits || bits > 64 || ca.len() != (q as usize - 1) * n {
        return Err(invalid(
            "digit decomposition: one carry per value and inner digit",
        ));
    }
    Ok((0..q)
        .map(|k| {
            let w = d.min(bits - k * d);
            let v = x
                .iter()
                .enumerate()
                .map(|(i, a)| {
                    let base = (a & mask(bits)) >> (k * d);
                    let c = if k == 0 {
                        0
                    } else {
                        ca[(k as usize - 1) * n + i]
                    };
                    base.wrapping_add(c) & mask(w)
                })
                .collect();
            (v, w)
        })
        .collect())
}

/// Product with non-uniform bitwidths (SIRNN §4) of x ∈ Z_{2^bx}, y ∈ Z_{2^by} with MSBs
/// known to be 0, last step: x·y = (x0 + x1)(y0 + y1) − 2^by·wy·x − 2^bx·wx·y mod 2^bits
/// (the term 2^(bx+by)·wx·wy vanishes as bits ≤ bx + by), `base` this party's share of the
/// first product and `mx` its shares of wy·x (first n) and wx·y (next n).
pub fn nonuniform_output(
    base: &[u64],
    mx: &[u64],
    bx: u32,
    by: u32,
    bits: u32,
) -> Result<Vec<u64>> {
    let n = base.len();
    if mx.len() != 2 * n || bits > bx + by || bits > 64 {
        return Err(invalid(
            "mul_nonuniform: two products per value, bits ≤ bx + by",
        ));
    }
    let m = mask(bits);
    Ok((0..n)
        .map(|i| {
            base[i]
                .wrapping_sub(shl(mx[i], by))
                .wrapping_sub(shl(mx[n + i], bx))
                & m
        })
        .collect())
}

/// Wrap of a value whose MSB is known to be 0 (SIRNN's MSB-to-wrap), last step: wrap = m0 ∨ m1
/// = m0 + m1 − m0·m1 mod 2^to, with `m` this party's MSBs (its COT correlations as P0 and
/// choice bits as P1) and `prod` its share of m0·m1.
pub fn msb0_wrap_output(m: &[u8], prod: &[u64], to: u32) -> Result<Vec<u64>> {
    if prod.len() != m.len() || !(1..=64).contains(&to) {
        return Err(invalid("wrap: one product per MSB"));
    }
    Ok(m.iter()
        .zip(prod)
        .map(|(a, p)| (*a as u64).wrapping_sub(*p) & mask(to))
        .collect())
}

/// Product of P0's a (any ring element) and P1's b < 2^b_bits, P0's correlations: a·2^j mod
/// 2^bits for each bit j of b.
pub fn private_product_deltas(a: &[u64], b_bits: u32, bits: u32) -> Vec<u64> {
    let m = mask(bits);
    a.iter()
        .flat_map(|a| (0..b_bits).map(move |j| shl(*a, j) & m))
        .collect()
}

/// [`private_product_deltas`]' choices at P1: the bits of b.
pub fn private_product_choices(b: &[u64], b_bits: u32) -> Vec<bool> {
    let mut c = Vec::with_capacity(b.len() * b_bits as usize);
    for &v in b {
        push_bits(&mut c, v, b_bits as usize);
    }
    c
}

/// Product of private values, last step: the sum mod 2^bits of this party's `b_bits` COT
/// product shares per element.
pub fn private_product_output(r: &[u64], n: usize, b_bits: u32, bits: u32) -> Result<Vec<u64>> {
    let k = b_bits as usize;
    if k == 0 || r.len() != n * k || !(1..=64).contains(&bits) {
        return Err(invalid("private product: b_bits products per value"));
    }
    Ok(sum_chunks(r, k, mask(bits)))
}

// ---- Lookup tables on a 1-of-2^k OT --------------------------------------------------------

/// How a batch of public tables read at one shared index goes over the 1-of-2^k OT (SIRNN's
/// LUT: P0 rotates each table by its index share and masks it with its output share): entries
/// packed side by side in one OT row per element when they fit in 64 bits, else one row per
/// table and element.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LutLayout {
    /// Index bits (1 ≤ k ≤ 8): 2^k entries per table.
    pub k: u32,
    /// Whether every table rides one row.
    pub packed: bool,
    /// OT rows per element.
    pub rows: usize,
    /// Bits of an OT message.
    pub wire_bits: u32,
}

impl LutLayout {
    /// The layout of tables of 2^k entries with entries of `bits[q]` bits.
    pub fn new(k: u32, bits: &[u32]) -> Result<Self> {
        if !(1..=8).contains(&k) || bits.is_empty() || bits.iter().any(|b| !(1..=64).contains(b)) {
            return Err(invalid("lut: 1 ≤ k ≤ 8, at least one table, 1 ≤ bits ≤ 64"));
        }
        let total: u64 = bits.iter().map(|b| *b as u64).sum();
        let packed = total <= 64;
        Ok(LutLayout {
            k,
            packed,
            rows: if packed { 1 } else { bits.len() },
            wire_bits: if packed {
                total as u32
            } else {
                bits.iter().copied().max().unwrap_or(1)
            },
        })
    }

    /// Entries per table (the OT's N).
    pub fn entries(&self) -> usize {
        1 << self.k
    }
}

/// Lookup tables, P0's OT messages for elements `e0 ..` (as many whole elements as `out`
/// holds, `rows · 2^k` words each): row (i, q) holds at t the entry `entry(i, (t + a_i) mod
/// 2^k, q) − r_q[i]`, a_i its index share and `rs[q]` its output shares (so P1, choosing t =
/// its share, reads T[a] − r). `entry` may fold P0's per-element data into the table.
pub fn lut_rows(
    lay: LutLayout,
    idx: &[u64],
    bits: &[u32],
    rs: &[Vec<u64>],
    e0: usize,
    out: &mut [u64],
    entry: impl Fn(usize, usize, usize) -> u64 + Sync,
) -> Result<()> {
    use rayon::prelude::*;
    let nn = lay.entries();
    let per_elem = lay.rows * nn;
    let count = out.len() / per_elem;
    if bits.len() != rs.len()
        || out.len() != count * per_elem
        || e0 + count > idx.len()
        || rs.iter().any(|r| r.len() != idx.len())
    {
        return Err(invalid(
            "lut: rows, output shares or elements of the wrong length",
        ));
    }
    let km = mask(lay.k);
    out.par_chunks_mut(per_elem)
        .enumerate()
        .for_each(|(di, o)| {
            let i = e0 + di;
            let i0 = idx[i] & km;
            let j = |t: usize| ((t as u64).wrapping_add(i0) & km) as usize;
            if lay.packed {
                for (t, w) in o.iter_mut().enumerate() {
                    let mut v = 0u64;
                    let mut off = 0u32;
                    for (q, (b, r)) in bits.iter().zip(rs).enumerate() {
                        v |= shl(entry(i, j(t), q).wrapping_sub(r[i]) & mask(*b), off);
                        off += b;
                    }
                    *w = v;
                }
            } else {
                for (q, (b, r)) in bits.iter().zip(rs).enumerate() {
                    for (t, w) in o[q * nn..(q + 1) * nn].iter_mut().enumerate() {
                        *w = entry(i, j(t), q).wrapping_sub(r[i]) & mask(*b);
                    }
                }
            }
        });
    Ok(())
}

/// Lookup tables, P1's choices: its index share, once per OT row.
pub fn lut_choices(lay: LutLayout, idx: &[u64]) -> Vec<u8> {
    let km = mask(lay.k);
    idx.iter()
        .flat_map(|a| std::iter::repeat_n((a & km) as u8, lay.rows))
        .collect()
}

/// Lookup tables, P1's shares of every table's entry from its OT outputs (one per row).
pub fn lut_read(lay: LutLayout, bits: &[u32], got: &[u64]) -> Result<Vec<Vec<u64>>> {
    if !got.len().is_multiple_of(lay.rows) || (!lay.packed && bits.len() != lay.rows) {
        return Err(invalid("lut: OT outputs of the wrong length"));
    }
    let n = got.len() / lay.rows;
    let mut out = Vec::with_capacity(bits.len());
    let mut off = 0u32;
    for (q, b) in bits.iter().enumerate() {
        if lay.packed {
            out.push(got.iter().map(|g| (g >> off) & mask(*b)).collect());
            off += b;
        } else {
            out.push((0..n).map(|i| got[i * lay.rows + q] & mask(*b)).collect());
        }
    }
    Ok(out)
}

// ---- Cross terms of a product of shares ----------------------------------------------------

/// Product x·(y0 + y1) of shares (`mul_shared` when y's shares span the ring, SIRNN's products
/// when they are below 2^y_bits as integers), first step: this party's correlations x·2^j as
/// OT sender and its bits of y as chooser, `y_bits` per element, both ways at once.
pub fn cross_deltas(x: &[u64], y: &[u64], bits: u32, y_bits: u32) -> Result<(Vec<u64>, Vec<bool>)> {
    check_cross(x.len(), y.len(), bits, y_bits)?;
    let k = y_bits as usize;
    let (m, my) = (mask(bits), mask(y_bits));
    let mut deltas = Vec::with_capacity(x.len() * k);
    let mut choices = Vec::with_capacity(x.len() * k);
    for (a, b) in x.iter().zip(y) {
        for j in 0..k {
            deltas.push(shl(*a, j as u32) & m);
            choices.push(((b & my) >> j) & 1 == 1);
        }
    }
    Ok((deltas, choices))
}

/// Cross terms, last step: x_i·y_i + Σ_j (received_j − pad_j) mod 2^bits, the received term
/// the peer's x·2^j chosen by this party's bit and the pad this party's own OT output as
/// sender (so the two cross terms x0·y1 and x1·y0 are split between the parties).
pub fn cross_combine(
    x: &[u64],
    y: &[u64],
    received: &[u64],
    pad: &[u64],
    bits: u32,
    y_bits: u32,
) -> Result<Vec<u64>> {
    check_cross(x.len(), y.len(), bits, y_bits)?;
    let k = y_bits as usize;
    if received.len() != x.len() * k || pad.len() != received.len() {
        return Err(invalid(format!(
            "cross terms: {} received and {} pads for {} values of {k} bits",
            received.len(),
            pad.len(),
            x.len()
        )));
    }
    let (m, my) = (mask(bits), mask(y_bits));
    Ok((0..x.len())
        .map(|i| {
            let s = received[i * k..(i + 1) * k]
                .iter()
                .zip(&pad[i * k..(i + 1) * k])
                .fold(0u64, |s, (r, p)| s.wrapping_add(r.wrapping_sub(*p)));
            s.wrapping_add(x[i].wrapping_mul(y[i] & my)) & m
        })
        .collect())
}

fn check_cross(nx: usize, ny: usize, bits: u32, y_bits: u32) -> Result<()> {
    if nx != ny || !(1..=64).contains(&bits) || !(1..=64).contains(&y_bits) {
        return Err(invalid(format!(
            "cross terms: {nx} x and {ny} y values, rings of {bits} and {y_bits} bits"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
