//! Blocks on pooled OTs, split into flights: each block is a few pure steps (the sender's
//! correlations or tables, the receiver's derandomisation, each party's output) around OTs the
//! caller takes from a [`PooledOtSender`] / [`PooledOtReceiver`], so a protocol can put the
//! messages of several blocks into one flight (CryptoGRU's online step does). The blocks:
//! * B2A of XOR-shared two's-complement words (or single bits: `blocks::b2a` runs these steps
//!   on `Ctx`'s OTs) into additive shares mod 2^k, one correlated OT per bit (cryptogru::b2a);
//! * multiplexers: additive shares of g·v for g given by XOR-shared bits and v additively shared,
//!   one correlated OT per bit of g and direction (cryptogru::products_by_mux; `blocks::mux`
//!   is its one-bit case on `Ctx`'s OTs);
//! * lookup tables: a public table read at an XOR-shared index, from a random 1-of-2^b OT made
//!   offline and derandomised online (cryptogru::gate_luts);
//! * carry leaves and carry shares: the carry out of the low F bits of a sum of two parties'
//!   values, as XOR-shared comparison leaves from random 1-of-2^m OTs (cryptogru::carry_leaves)
//!   and then as additive shares mod 2^L from one random 1-of-8 OT (cryptogru::carry_shares).
//!
//! Bit vectors are little-endian `bool`s; packed frames use `secinfer_ot`'s packing.
use crate::error::{invalid, Result, SsError};
use crate::ring::mask;
use secinfer_net::Channel;
use secinfer_ot::{pack_words, packed_len, unpack_words, Block, PooledOtReceiver, PooledOtSender};

/// Appends the low `w` bits of `v`, least significant first.
pub fn push_bits(out: &mut Vec<bool>, v: u64, w: usize) {
    out.extend((0..w).map(|i| (v >> i) & 1 == 1));
}

/// The word whose bit i is `bits[i]`.
pub fn word(bits: &[bool]) -> u64 {
    bits.iter()
        .enumerate()
        .fold(0u64, |a, (i, &b)| a | ((b as u64) << i))
}

/// Sets bit `i` of a packed buffer (which starts zeroed) to `v`.
pub fn set_bit(buf: &mut [u8], i: usize, v: bool) {
    buf[i / 8] |= (v as u8) << (i % 8);
}

/// Bit `i` of a packed buffer.
pub fn get_bit(buf: &[u8], i: usize) -> bool {
    (buf[i / 8] >> (i % 8)) & 1 == 1
}

/// Sums of `l` consecutive terms, each reduced by the mask `pm` (2^k − 1).
pub fn sum_chunks(terms: &[u64], l: usize, pm: u64) -> Vec<u64> {
    terms
        .chunks(l)
        .map(|t| t.iter().fold(0u64, |a, x| a.wrapping_add(*x)) & pm)
        .collect()
}

fn ring_mask(bits: usize) -> u64 {
    mask(bits.min(64) as u32)
}

// ---- B2A ----------------------------------------------------------------------------------
//
// The one B2A of the crate: `blocks::b2a` (single bits on `Ctx`'s OTs) and the words here (on
// a pooled OT the caller drives) both make their correlations and shares with these steps.

/// The weight of bit j of an l-bit word mod 2^k: 2^j; in two's complement (`signed`) the top
/// bit's is −2^(l−1).
fn b2a_weight(j: usize, l: usize, signed: bool, pm: u64) -> u64 {
    let x = 1u64 << j;
    if signed && j == l - 1 {
        x.wrapping_neg() & pm
    } else {
        x & pm
    }
}

fn check_b2a(n: usize, l: usize, k: usize) -> Result<()> {
    if l == 0 || l > 64 || k == 0 || k > 64 || !n.is_multiple_of(l) {
        return Err(invalid(format!(
            "b2a: {n} bits of {l}-bit words into Z_2^{k}"
        )));
    }
    Ok(())
}

/// B2A, sender (the party holding bits a): the OT correlations w_j·(1 − 2a_j). Additive shares
/// mod 2^k of l-bit words given by their XOR-shared bits (l per word), sign-extended into
/// Z_{2^k}: per bit with weight w, w·(a ⊕ b) = w·a + b·w·(1 − 2a), the second term one
/// additively correlated OT with this party as sender and the other's bit b as choice.
pub fn b2a_deltas(bits: &[bool], l: usize, k: usize) -> Result<Vec<u64>> {
    deltas_of(bits, l, k, true)
}

/// B2A, sender: its word shares Σ_j (w_j·a_j − x_j), x_j its OT outputs.
pub fn b2a_sender(bits: &[bool], x: &[u64], l: usize, k: usize) -> Result<Vec<u64>> {
    sender_of(bits, x, l, k, true)
}

/// B2A, receiver: its word shares, the sums of its OT outputs (l per word; the same for
/// unsigned words and single bits).
pub fn b2a_receiver(terms: &[u64], l: usize, k: usize) -> Result<Vec<u64>> {
    check_b2a(terms.len(), l, k)?;
    Ok(sum_chunks(terms, l, ring_mask(k)))
}

/// [`b2a_deltas`] of single bits (unsigned: each is 0 or 1 in Z_{2^k}).
pub fn b2a_bit_deltas(bits: &[bool], k: usize) -> Result<Vec<u64>> {
    deltas_of(bits, 1, k, false)
}

/// [`b2a_sender`] of single bits; the receiver's step is [`b2a_receiver`] with l = 1.
pub fn b2a_bit_sender(bits: &[bool], x: &[u64], k: usize) -> Result<Vec<u64>> {
    sender_of(bits, x, 1, k, false)
}

fn deltas_of(bits: &[bool], l: usize, k: usize, signed: bool) -> Result<Vec<u64>> {
    check_b2a(bits.len(), l, k)?;
    let pm = ring_mask(k);
    Ok(bits
        .iter()
        .enumerate()
        .map(|(i, &a)| {
            let w = b2a_weight(i % l, l, signed, pm);
            if a {
                w.wrapping_neg() & pm
            } else {
                w
            }
        })
        .collect())
}

fn sender_of(bits: &[bool], x: &[u64], l: usize, k: usize, signed: bool) -> Result<Vec<u64>> {
    check_b2a(bits.len(), l, k)?;
    if x.len() != bits.len() {
        return Err(invalid(format!(
            "b2a: {} OT outputs for {} bits",
            x.len(),
            bits.len()
        )));
    }
    let pm = ring_mask(k);
    let terms: Vec<u64> = bits
        .iter()
        .enumerate()
        .zip(x)
        .map(|((i, &a), x)| {
            if a {
                b2a_weight(i % l, l, signed, pm)
            } else {
                0
            }
            .wrapping_sub(*x)
        })
        .collect();
    Ok(sum_chunks(&terms, l, pm))
}

/// The OT endpoint of one party of a block: the sender's (`Ok`) or the receiver's (`Err`).
pub type OtSide<'a> = std::result::Result<&'a mut PooledOtSender, &'a mut PooledOtReceiver>;

/// B2A as one sub-protocol: this party's additive shares mod 2^k of the words whose XOR shares
/// are `bits`. `early` uses the sender-first OT (one flight: the sender's correlations before
/// the receiver's choices), else the split OT (choices, then answers).
pub fn b2a<C: Channel>(
    ot: OtSide<'_>,
    ch: &mut C,
    bits: &[bool],
    l: usize,
    k: usize,
    early: bool,
) -> Result<Vec<u64>> {
    check_b2a(bits.len(), l, k)?;
    match ot {
        Ok(s) => {
            let deltas = b2a_deltas(bits, l, k)?;
            let x = if early {
                let p = s.send_correlated_early(ch, &deltas, k as u32)?;
                ch.flush()?;
                s.finish_early(ch, p)?
            } else {
                let p = s.recv_choices(ch, bits.len())?;
                let x = s.send_correlated_answer(ch, p, &deltas, k as u32)?;
                ch.flush()?;
                x
            };
            b2a_sender(bits, &x, l, k)
        }
        Err(r) => {
            let t = if early {
                let p = r.recv_correlated_early(ch, bits.len(), k as u32)?;
                let t = r.finish_early(ch, p, bits)?;
                ch.flush()?;
                t
            } else {
                let p = r.send_choices(ch, bits)?;
                ch.flush()?;
                r.recv_correlated_answer(ch, p, k as u32)?
            };
            b2a_receiver(&t, l, k)
        }
    }
}

// ---- Multiplexers -------------------------------------------------------------------------
//
// The one multiplexer of the crate: `blocks::mux` (one selector bit per product, on `Ctx`'s
// OTs) and the weighted products here both run these two steps around their OTs.

/// The multiplexer's correlations (1 − 2c)·w mod 2^`ring` for this party's weights w and its
/// XOR shares c of the selector bits, as the OT sender. Shares of g·v for g = Σ_j ω_j (c0 ⊕ c1)_j
/// and v = v0 + v1: per bit with party weights w_i = ω_j·v_i,
/// (c0 ⊕ c1)·w_i = c_i·w_i + c_{1−i}·(1 − 2c_i)·w_i, the cross term one correlated OT with
/// party i sending and the other choosing with its bit.
pub fn mux_deltas(w: &[u64], bits: &[bool], ring: usize) -> Vec<u64> {
    let pm = ring_mask(ring);
    w.iter()
        .zip(bits)
        .map(|(x, &c)| if c { x.wrapping_neg() & pm } else { *x })
        .collect()
}

/// This party's product shares, `per` selector bits per product: Σ c·w + (received cross term)
/// − (its pad as sender), mod 2^`ring`.
pub fn mux_combine(
    w: &[u64],
    bits: &[bool],
    received: &[u64],
    pad: &[u64],
    per: usize,
    ring: usize,
) -> Result<Vec<u64>> {
    if per == 0
        || !w.len().is_multiple_of(per)
        || bits.len() != w.len()
        || received.len() != w.len()
        || pad.len() != w.len()
    {
        return Err(invalid(format!(
            "multiplexer: {} weights, {} bits, {} received, {} pads ({per} per product)",
            w.len(),
            bits.len(),
            received.len(),
            pad.len()
        )));
    }
    let terms: Vec<u64> = w
        .iter()
        .zip(bits)
        .zip(received.iter().zip(pad))
        .map(|((x, &c), (y, p))| {
            let cross = y.wrapping_sub(*p);
            if c {
                x.wrapping_add(cross)
            } else {
                cross
            }
        })
        .collect();
    Ok(sum_chunks(&terms, per, ring_mask(ring)))
}

// ---- Random 1-of-N OTs --------------------------------------------------------------------

/// Rows per `take_random_n` call: the hashed keys of a call (16 bytes each) are cut at once, so
/// a protocol holds a few bytes per key, not 16.
pub const LEAF_CHUNK: usize = 2048;

/// `k` random 1-of-`n` OTs from a pool in calls of [`LEAF_CHUNK`] rows, each key cut by `keep`
/// at once: the sender's every key, row-major.
pub fn random_n_sender<C: Channel, T>(
    s: &mut PooledOtSender,
    ch: &mut C,
    n: usize,
    k: usize,
    keep: impl Fn(Block) -> T,
) -> Result<Vec<T>> {
    let mut keys = Vec::with_capacity(k.saturating_mul(n));
    let mut done = 0;
    while done < k {
        let c = LEAF_CHUNK.min(k - done);
        let ks = s.take_random_n(ch, n, c)?;
        keys.extend(ks.into_iter().map(&keep));
        done += c;
    }
    Ok(keys)
}

/// [`random_n_sender`]'s receiver: each row's random choice and its key, cut by `keep`.
pub fn random_n_receiver<C: Channel, T>(
    r: &mut PooledOtReceiver,
    ch: &mut C,
    n: usize,
    k: usize,
    keep: impl Fn(Block) -> T,
) -> Result<(Vec<u8>, Vec<T>)> {
    let (mut choices, mut keys) = (Vec::with_capacity(k), Vec::with_capacity(k));
    let mut done = 0;
    while done < k {
        let c = LEAF_CHUNK.min(k - done);
        let (cs, ks) = r.take_random_n(ch, n, c)?;
        choices.extend(cs);
        keys.extend(ks.into_iter().map(&keep));
        done += c;
    }
    Ok((choices, keys))
}

// ---- Lookup tables ------------------------------------------------------------------------

/// A batch of lookup tables' random 1-of-2^b OTs, made offline (cryptogru::gate_luts): the
/// table holder (sender) keeps every key of each, the reader a random choice and its key, each
/// cut to 16 bits (an entry has at most 16 bits). Secret (no `Debug`).
pub struct LutKeys {
    keys: Vec<u16>,
    /// Reader: the random choices (empty for the table holder).
    choices: Vec<u8>,
}

/// Widest entry of a lookup table (bits): the OT pads are kept at 16 bits.
pub const LUT_MAX_ENTRY: usize = 16;

impl LutKeys {
    /// The table holder's keys for `k` tables of 2^`nb` entries.
    pub fn holder<C: Channel>(
        s: &mut PooledOtSender,
        ch: &mut C,
        nb: usize,
        k: usize,
    ) -> Result<Self> {
        Ok(LutKeys {
            keys: random_n_sender(s, ch, 1 << nb, k, |b| b.0 as u16)?,
            choices: Vec::new(),
        })
    }
    /// The reader's choices and keys for the same tables.
    pub fn reader<C: Channel>(
        r: &mut PooledOtReceiver,
        ch: &mut C,
        nb: usize,
        k: usize,
    ) -> Result<Self> {
        let (choices, keys) = random_n_receiver(r, ch, 1 << nb, k, |b| b.0 as u16)?;
        Ok(LutKeys { keys, choices })
    }
}

/// Reader, online (first flight): d = x ⊕ c per table (`nb` bits), x its XOR share of the index,
/// c the OT's random choice; tables `first .. first + count` of the batch.
pub fn lut_derand(keys: &LutKeys, first: usize, x: &[bool], nb: usize) -> Result<Vec<bool>> {
    let k = x.len() / nb.max(1);
    if nb == 0 || x.len() != k * nb || keys.choices.len() < first + k {
        return Err(invalid("lookup tables: OT count"));
    }
    let mut out = Vec::with_capacity(x.len());
    for (u, xb) in x.chunks(nb).enumerate() {
        push_bits(&mut out, word(xb) ^ keys.choices[first + u] as u64, nb);
    }
    Ok(out)
}

/// Holder, online (second flight): per table, entry j of 2^b is T[a ⊕ j] ⊕ ω padded with the
/// low `gb` bits of K_{j ⊕ d}, packed at `gb` bits; a its XOR share of the index, ω its share of
/// the output (drawn by the caller), d the reader's derandomisation.
pub fn lut_tables(
    table: &[u64],
    keys: &LutKeys,
    first: usize,
    a: &[bool],
    omega: &[u64],
    d: &[bool],
    gb: usize,
) -> Result<Vec<u8>> {
    let n = table.len();
    let nb = n.trailing_zeros() as usize;
    let k = omega.len();
    if !n.is_power_of_two()
        || nb == 0
        || gb == 0
        || gb > LUT_MAX_ENTRY
        || a.len() != k * nb
        || d.len() != k * nb
        || keys.keys.len() < (first + k) * n
    {
        return Err(invalid("lookup tables: table count"));
    }
    let gm = ring_mask(gb);
    let mut entries = vec![0u64; k * n];
    {
        use rayon::prelude::*;
        entries.par_chunks_mut(n).enumerate().for_each(|(u, row)| {
            let au = word(&a[u * nb..(u + 1) * nb]) as usize;
            let du = word(&d[u * nb..(u + 1) * nb]) as usize;
            let kr = &keys.keys[(first + u) * n..(first + u + 1) * n];
            for (j, e) in row.iter_mut().enumerate() {
                *e = (table[au ^ j] ^ omega[u] ^ kr[j ^ du] as u64) & gm;
            }
        });
    }
    Ok(pack_words(&entries, gb as u32)?)
}

/// Reader, online: its XOR shares of the entries (`gb` bits per table), entry x of its table
/// unpadded with K_c. A frame of the wrong size is [`SsError::Malformed`].
pub fn lut_outputs(
    keys: &LutKeys,
    first: usize,
    x: &[bool],
    nb: usize,
    gb: usize,
    tables: &[u8],
) -> Result<Vec<bool>> {
    let n = 1usize << nb;
    let k = x.len() / nb.max(1);
    if nb == 0 || x.len() != k * nb || keys.keys.len() < first + k || keys.choices.len() < first + k
    {
        return Err(invalid("lookup tables: OT count"));
    }
    if tables.len() != packed_len(k * n, gb as u32) {
        return Err(SsError::Malformed(format!(
            "lookup tables: frame of {} bytes, expected {}",
            tables.len(),
            packed_len(k * n, gb as u32)
        )));
    }
    let mut out = Vec::with_capacity(k * gb);
    for (u, xb) in x.chunks(nb).enumerate() {
        let off = (u * n + word(xb) as usize) * gb;
        let v = (0..gb).fold(0u64, |acc, i| acc | (get_bit(tables, off + i) as u64) << i);
        push_bits(&mut out, v ^ keys.keys[first + u] as u64, gb);
    }
    Ok(out)
}

// ---- Carry leaves and carry shares --------------------------------------------------------

/// Leaf bits per carry and party: XOR shares of [s'_hi < c_hi], [s'_hi = c_hi] and
/// [s'_lo < c_lo], where s' = 2^F − 1 − (one party's low F bits), c the other's, each split
/// into a high and a low digit. The carry out of the low F bits, [s + c ≥ 2^F] = [s' < c], is
/// lt_hi ⊕ (eq_hi ∧ lt_lo).
pub const LEAF_BITS: usize = 3;

/// Entries of a carry-share table: one per value of the three leaf bits.
pub const CARRY_TABLE: usize = 1 << LEAF_BITS;

/// Carries per group of the leaves' table frame: a group's high tables are 8 × 2^m_hi 2-bit
/// fields (2^(m_hi + 1) whole bytes), its low tables 8 × 2^m_lo bits (2^m_lo bytes).
pub const LEAF_GROUP: usize = 8;

/// The widths of a carry: the carry out of the low `f` bits (1 ≤ f ≤ 32), its additive shares
/// mod 2^`l` (1 ≤ l ≤ 32).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CarryLayout {
    pub f: usize,
    pub l: usize,
}

impl CarryLayout {
    /// Digit widths (high, low) of the leaves: F = m_hi + m_lo, m_lo = ⌊F/2⌋.
    pub fn leaf_digits(self) -> (usize, usize) {
        (self.f - self.f / 2, self.f / 2)
    }
    /// The digits of a party's low bits: the complemented s' = 2^F − 1 − (v mod 2^F) for the
    /// party that holds the complement (`complement`), else v mod 2^F.
    pub fn digits_of(self, v: u64, complement: bool) -> (u64, u64) {
        let (_, ml) = self.leaf_digits();
        let lo = ring_mask(self.f);
        let x = if complement { lo - (v & lo) } else { v & lo };
        (x >> ml, x & ring_mask(ml))
    }
    /// Bytes of the table frame for `k` carries (the last group zero-padded).
    pub fn leaf_table_bytes(self, k: usize) -> usize {
        let (mh, ml) = self.leaf_digits();
        k.div_ceil(LEAF_GROUP) * (2 * (1 << mh) + (1 << ml))
    }
    /// Bytes of the carry-share tables for `k` carries: 8 entries of L bits each.
    pub fn carry_table_bytes(self, k: usize) -> usize {
        packed_len(k * CARRY_TABLE, self.l as u32)
    }
}

fn low_two_bits(b: Block) -> u8 {
    (b.0 & 3) as u8
}

/// The carry leaves' random 1-of-2^m OTs, made offline: the table holder (sender) keeps every
/// key of each, the complement holder (receiver) a random choice r and K_r. Secret (no `Debug`).
pub struct LeafKeys {
    /// The two low bits of each key (all a leaf's pads need): holder, k × 2^m_hi keys then
    /// k × 2^m_lo keys, row-major; receiver, K_r per leaf, high leaves first.
    keys: Vec<u8>,
    /// Receiver: the random choices r, high leaves first (empty for the holder).
    choices: Vec<u8>,
}

impl LeafKeys {
    /// The table holder's keys for `k` carries.
    pub fn holder<C: Channel>(
        s: &mut PooledOtSender,
        ch: &mut C,
        lay: CarryLayout,
        k: usize,
    ) -> Result<Self> {
        let (mh, ml) = lay.leaf_digits();
        let mut keys = random_n_sender(s, ch, 1 << mh, k, low_two_bits)?;
        keys.extend(random_n_sender(s, ch, 1 << ml, k, low_two_bits)?);
        Ok(LeafKeys {
            keys,
            choices: Vec::new(),
        })
    }
    /// The complement holder's choices and keys for the same carries.
    pub fn chooser<C: Channel>(
        r: &mut PooledOtReceiver,
        ch: &mut C,
        lay: CarryLayout,
        k: usize,
    ) -> Result<Self> {
        let (mh, ml) = lay.leaf_digits();
        let (mut choices, mut keys) = random_n_receiver(r, ch, 1 << mh, k, low_two_bits)?;
        let (cs, ks) = random_n_receiver(r, ch, 1 << ml, k, low_two_bits)?;
        choices.extend(cs);
        keys.extend(ks);
        Ok(LeafKeys { keys, choices })
    }
}

/// The carry shares' random 1-of-8 OTs, made offline like the leaves': the table holder keeps
/// the 8 keys of each carry, the other party a random choice r and K_r, each key cut to its low
/// 32 bits (a pad needs L ≤ 32). Secret (no `Debug`).
pub struct CarryKeys {
    keys: Vec<u32>,
    /// Chooser: the random choices (empty for the holder).
    choices: Vec<u8>,
}

impl CarryKeys {
    /// The table holder's keys for `k` carries.
    pub fn holder<C: Channel>(s: &mut PooledOtSender, ch: &mut C, k: usize) -> Result<Self> {
        Ok(CarryKeys {
            keys: random_n_sender(s, ch, CARRY_TABLE, k, |b| b.0 as u32)?,
            choices: Vec::new(),
        })
    }
    /// The chooser's choices and keys for the same carries.
    pub fn chooser<C: Channel>(r: &mut PooledOtReceiver, ch: &mut C, k: usize) -> Result<Self> {
        let (choices, keys) = random_n_receiver(r, ch, CARRY_TABLE, k, |b| b.0 as u32)?;
        Ok(CarryKeys { keys, choices })
    }
}

/// A carry's three leaf bits as a table index: lt_hi, eq_hi, lt_lo from bit 0 up.
pub fn leaf_index(x: &[bool; LEAF_BITS]) -> usize {
    x.iter()
        .enumerate()
        .fold(0, |a, (i, &b)| a | (b as usize) << i)
}

/// The carry lt_hi ⊕ (eq_hi ∧ lt_lo) of the leaf bits given as a table index.
pub fn carry_of_index(x: usize) -> u64 {
    ((x & 1) ^ ((x >> 1) & (x >> 2) & 1)) as u64
}

/// Chooser, online (first flight of the leaves): d = s'_digit ⊕ r for every leaf (m bits each,
/// high leaves then low ones) from its low bits `s` of each carry's addend.
pub fn leaf_derand(lay: CarryLayout, keys: &LeafKeys, s: &[u64]) -> Result<Vec<bool>> {
    let (mh, ml) = lay.leaf_digits();
    let k = s.len();
    if keys.choices.len() != 2 * k {
        return Err(invalid("carry leaves: OT count"));
    }
    let mut out = Vec::with_capacity(k * lay.f);
    for (part, m) in [(0usize, mh), (1, ml)] {
        for (j, &v) in s.iter().enumerate() {
            let (hi, lo) = lay.digits_of(v, true);
            let digit = if part == 0 { hi } else { lo };
            push_bits(&mut out, digit ^ keys.choices[part * k + j] as u64, m);
        }
    }
    Ok(out)
}

/// Holder, online (second flight): for every carry the high leaf's table (2^m_hi entries of
/// ([x < c_hi] ⊕ τ_lt, [x = c_hi] ⊕ τ_eq), 2 bits) and the low leaf's (2^m_lo entries of
/// [x < c_lo] ⊕ τ_lo, 1 bit), entry x padded with the low bits of K_{x ⊕ d}; groups of
/// [`LEAF_GROUP`] carries ([their high tables][their low tables]) built in parallel. `c` are its
/// low bits of each addend, `tau` its output shares (drawn by the caller).
pub fn leaf_tables(
    lay: CarryLayout,
    keys: &LeafKeys,
    c: &[u64],
    tau: &[[bool; LEAF_BITS]],
    d: &[bool],
) -> Result<Vec<u8>> {
    use rayon::prelude::*;
    let (mh, ml) = lay.leaf_digits();
    let (nh, nl) = (1usize << mh, 1usize << ml);
    let k = c.len();
    if tau.len() != k || d.len() != k * lay.f || keys.keys.len() != k * (nh + nl) {
        return Err(invalid("carry leaves: table count"));
    }
    let gbytes = 2 * nh + nl;
    let mut out = vec![0u8; lay.leaf_table_bytes(k)];
    out.par_chunks_mut(gbytes).enumerate().for_each(|(g, buf)| {
        let (hi_buf, lo_buf) = buf.split_at_mut(2 * nh);
        for u in 0..LEAF_GROUP.min(k - g * LEAF_GROUP) {
            let j = g * LEAF_GROUP + u;
            let (hi, lo) = lay.digits_of(c[j], false);
            let t = tau[j];
            let dh = word(&d[j * mh..(j + 1) * mh]) as usize;
            let dl = word(&d[k * mh + j * ml..k * mh + (j + 1) * ml]) as usize;
            let row = &keys.keys[j * nh..(j + 1) * nh];
            for x in 0..nh {
                let pad = row[x ^ dh];
                let b = 2 * (u * nh + x);
                set_bit(hi_buf, b, ((x as u64) < hi) ^ t[0] ^ (pad & 1 == 1));
                set_bit(hi_buf, b + 1, (x as u64 == hi) ^ t[1] ^ (pad & 2 == 2));
            }
            let row = &keys.keys[k * nh + j * nl..k * nh + (j + 1) * nl];
            for x in 0..nl {
                let v = ((x as u64) < lo) ^ t[2] ^ (row[x ^ dl] & 1 == 1);
                set_bit(lo_buf, u * nl + x, v);
            }
        }
    });
    Ok(out)
}

/// Chooser, online: its XOR shares of each carry's leaf bits, read from the holder's tables at
/// its own digits (entry s' padded with K_r, d = s' ⊕ r). A frame of the wrong size is
/// [`SsError::Malformed`].
pub fn leaf_outputs(
    lay: CarryLayout,
    keys: &LeafKeys,
    s: &[u64],
    tables: &[u8],
) -> Result<Vec<[bool; LEAF_BITS]>> {
    let (mh, ml) = lay.leaf_digits();
    let (nh, nl) = (1usize << mh, 1usize << ml);
    let k = s.len();
    if keys.keys.len() != 2 * k {
        return Err(invalid("carry leaves: key count"));
    }
    if tables.len() != lay.leaf_table_bytes(k) {
        return Err(SsError::Malformed(format!(
            "carry leaves: frame of {} bytes, expected {}",
            tables.len(),
            lay.leaf_table_bytes(k)
        )));
    }
    let gbytes = 2 * nh + nl;
    Ok(s.iter()
        .enumerate()
        .map(|(j, &v)| {
            let (hi, lo) = lay.digits_of(v, true);
            let (kh, kl) = (keys.keys[j], keys.keys[k + j]);
            let (g, u) = (j / LEAF_GROUP, j % LEAF_GROUP);
            let buf = &tables[g * gbytes..(g + 1) * gbytes];
            let b = 2 * (u * nh + hi as usize);
            [
                get_bit(buf, b) ^ (kh & 1 == 1),
                get_bit(buf, b + 1) ^ (kh & 2 == 2),
                get_bit(&buf[2 * nh..], u * nl + lo as usize) ^ (kl & 1 == 1),
            ]
        })
        .collect())
}

/// Chooser, online (first flight of the carry shares): d = x ⊕ r per carry (3 bits), x its XOR
/// shares of the carry's leaf bits.
pub fn carry_derand(keys: &CarryKeys, leaves: &[[bool; LEAF_BITS]]) -> Result<Vec<bool>> {
    if keys.choices.len() != leaves.len() {
        return Err(invalid("carry shares: OT count"));
    }
    let mut out = Vec::with_capacity(leaves.len() * LEAF_BITS);
    for (x, &r) in leaves.iter().zip(&keys.choices) {
        push_bits(&mut out, (leaf_index(x) ^ r as usize) as u64, LEAF_BITS);
    }
    Ok(out)
}

/// Holder, online (second flight): per carry, entry x of 8 is (carry(x ⊕ τ) + v) mod 2^L
/// padded with the low L bits of K_{x ⊕ d}; τ its leaf shares, v its mask (its own share of the
/// carry is −v).
pub fn carry_tables(
    lay: CarryLayout,
    keys: &CarryKeys,
    tau: &[[bool; LEAF_BITS]],
    v: &[u64],
    d: &[bool],
) -> Result<Vec<u8>> {
    let k = tau.len();
    if v.len() != k || d.len() != k * LEAF_BITS || keys.keys.len() != k * CARRY_TABLE {
        return Err(invalid("carry shares: table count"));
    }
    let pm = ring_mask(lay.l);
    let mut entries = Vec::with_capacity(k * CARRY_TABLE);
    for j in 0..k {
        let t = leaf_index(&tau[j]);
        let dj = word(&d[j * LEAF_BITS..(j + 1) * LEAF_BITS]) as usize;
        let row = &keys.keys[j * CARRY_TABLE..(j + 1) * CARRY_TABLE];
        entries.extend(
            (0..CARRY_TABLE)
                .map(|x| (carry_of_index(x ^ t).wrapping_add(v[j]) ^ row[x ^ dj] as u64) & pm),
        );
    }
    Ok(pack_words(&entries, lay.l as u32)?)
}

/// Chooser, online: its additive shares (mod 2^L) of each carry, carry + v, read from the
/// holder's tables at its own leaf bits. A frame of the wrong size, or with bits set in its
/// padding, is malformed.
pub fn carry_shares(
    lay: CarryLayout,
    keys: &CarryKeys,
    leaves: &[[bool; LEAF_BITS]],
    tables: &[u8],
) -> Result<Vec<u64>> {
    let k = leaves.len();
    if keys.keys.len() != k {
        return Err(invalid("carry shares: key count"));
    }
    let entries = unpack_words(tables, k * CARRY_TABLE, lay.l as u32)?;
    let pm = ring_mask(lay.l);
    Ok(leaves
        .iter()
        .zip(&keys.keys)
        .enumerate()
        .map(|(j, (x, &key))| (entries[j * CARRY_TABLE + leaf_index(x)] ^ key as u64) & pm)
        .collect())
}

#[cfg(test)]
mod tests;
