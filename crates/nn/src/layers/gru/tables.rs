//! CryptoGRU's OT lookup tables: the carry leaves and carry shares of the projections' low
//! fraction bits, and the gate tables that read σ(r), σ(z) at an XOR-shared input. Each is a
//! random 1-of-N OT made offline from a pool, derandomised online by one flight each way.
use super::bits::{get_bit, ring_mask, set_bit, word};
use super::circuits::{put, StepLayout, LEAF_BITS};
use crate::error::{NnError, Result};
use secinfer_net::Channel;
use secinfer_ot::{pack_words, packed_len, unpack_words, Block, PooledOtReceiver, PooledOtSender};

/// Input-projection carries per element and step: gates r, z and the candidate's gi_n.
pub(super) const CARRIES: usize = 3;

// The input projections' carry leaves ([`LEAF_BITS`]) come from random 1-of-2^m OTs at the
// start of the online phase (the input projections are known then for every step), and a random
// 1-of-8 OT on the server's three leaf bits turns them into additive shares of the carry mod 2^L
// (cryptogru::carry_shares): four flights per session, none per step, and no carry left for the
// circuits. The hidden projections' leaves (`StepLayout::gh_leaves`) are made per step, once
// m(t) is known: two flights per step, three bits per party into circuit A.

/// Random 1-of-N OTs from a pool in calls of [`LEAF_CHUNK`] rows, each key cut by `keep` at
/// once (so a session holds a few bytes per key, not 16): the sender's every key, row-major.
pub(super) fn random_n_sender<C: Channel, T>(
    s: &mut PooledOtSender,
    ch: &mut C,
    n: usize,
    k: usize,
    keep: impl Fn(Block) -> T,
) -> Result<Vec<T>> {
    let mut keys = Vec::with_capacity(k * n);
    let mut done = 0;
    while done < k {
        let c = LEAF_CHUNK.min(k - done);
        let ks = s.take_random_n(ch, n, c).map_err(NnError::from)?;
        keys.extend(ks.into_iter().map(&keep));
        done += c;
    }
    Ok(keys)
}

/// [`random_n_sender`]'s receiver: each row's random choice and its key, cut by `keep`.
pub(super) fn random_n_receiver<C: Channel, T>(
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
        let (cs, ks) = r.take_random_n(ch, n, c).map_err(NnError::from)?;
        choices.extend(cs);
        keys.extend(ks.into_iter().map(&keep));
        done += c;
    }
    Ok((choices, keys))
}

/// The carry leaves' random 1-of-2^m OTs (cryptogru::carry_leaves), made offline from the
/// client → server pool: the client (sender) holds every key of each, the server (receiver) a
/// random choice r and K_r. Secret (no `Debug`).
pub(super) struct LeafKeys {
    /// The two low bits of each key (all a leaf's pads need): client, k × 2^m_hi keys then
    /// k × 2^m_lo keys, row-major; server, K_r per leaf, high leaves first.
    keys: Vec<u8>,
    /// Server: the random choices r, high leaves first (empty for the client).
    choices: Vec<u8>,
}

/// The input projections' carry OTs of a session (leaves and carry shares), made offline and
/// used once at the start of the online phase.
pub(super) struct InputCarryKeys {
    pub(super) leaf: LeafKeys,
    pub(super) carry: CarryKeys,
}

/// Leaves per `take_random_n` call: the hashed keys of a call (16 bytes each) are cut to their
/// two low bits at once, so a session holds 1 byte per key, not 16.
pub(super) const LEAF_CHUNK: usize = 2048;

impl LeafKeys {
    pub(super) fn client<C: Channel>(
        s: &mut PooledOtSender,
        ch: &mut C,
        lay: &StepLayout,
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
    pub(super) fn server<C: Channel>(
        r: &mut PooledOtReceiver,
        ch: &mut C,
        lay: &StepLayout,
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

pub(super) fn low_two_bits(b: Block) -> u8 {
    (b.0 & 3) as u8
}

/// The carry shares' random 1-of-8 OTs (cryptogru::carry_shares), made offline from the
/// client → server pool like the leaves': the client holds the 8 keys of each carry, the server
/// a random choice r and K_r, each key cut to its low 32 bits (a pad needs L ≤ 30). Secret (no
/// `Debug`).
pub(super) struct CarryKeys {
    keys: Vec<u32>,
    /// Server: the random choices (empty for the client).
    choices: Vec<u8>,
}

/// Entries of a carry-share table: one per value of the server's three leaf bits.
pub(super) const CARRY_TABLE: usize = 1 << LEAF_BITS;

impl CarryKeys {
    pub(super) fn client<C: Channel>(s: &mut PooledOtSender, ch: &mut C, k: usize) -> Result<Self> {
        Ok(CarryKeys {
            keys: random_n_sender(s, ch, CARRY_TABLE, k, |b| b.0 as u32)?,
            choices: Vec::new(),
        })
    }
    pub(super) fn server<C: Channel>(
        r: &mut PooledOtReceiver,
        ch: &mut C,
        k: usize,
    ) -> Result<Self> {
        let (choices, keys) = random_n_receiver(r, ch, CARRY_TABLE, k, |b| b.0 as u32)?;
        Ok(CarryKeys { keys, choices })
    }
}

/// The gate tables' random 1-of-2^b OTs (cryptogru::gate_luts), made offline from the
/// server → client pool: the server (sender) holds every key of each, the client a random
/// choice and its key, each cut to 16 bits (a pad needs gb ≤ 16). Two per element and step (r,
/// z), table u = (t·2 + gate)·H + i. Secret (no `Debug`).
pub(super) struct LutKeys {
    keys: Vec<u16>,
    /// Client: the random choices (empty for the server).
    choices: Vec<u8>,
}

impl LutKeys {
    pub(super) fn server<C: Channel>(
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
    pub(super) fn client<C: Channel>(
        r: &mut PooledOtReceiver,
        ch: &mut C,
        nb: usize,
        k: usize,
    ) -> Result<Self> {
        let (choices, keys) = random_n_receiver(r, ch, 1 << nb, k, |b| b.0 as u16)?;
        Ok(LutKeys { keys, choices })
    }
}

/// Client, online (cryptogru::gate_luts, first flight): d = x ⊕ c per table (b bits), x its XOR
/// share of the saturated sigmoid input (circuit A's output), c the OT's random choice; tables
/// `first..first + count` of the session's.
pub(super) fn lut_derand(keys: &LutKeys, first: usize, x: &[bool], nb: usize) -> Result<Vec<bool>> {
    let k = x.len() / nb.max(1);
    if nb == 0 || x.len() != k * nb || keys.choices.len() < first + k {
        return Err(NnError::Protocol("gate tables: OT count".into()));
    }
    let mut out = Vec::with_capacity(x.len());
    for (u, xb) in x.chunks(nb).enumerate() {
        put(&mut out, word(xb) ^ keys.choices[first + u] as u64, nb);
    }
    Ok(out)
}

/// Server, online (second flight): per table, entry j of 2^b is σ(a ⊕ j) ⊕ ω padded with the low
/// gb bits of K_{j ⊕ d}, packed at gb bits; a its XOR share of the sigmoid input (its permute
/// bits of A's output), ω its share of the gate value (drawn offline).
pub(super) fn lut_tables(
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
        || a.len() != k * nb
        || d.len() != k * nb
        || keys.keys.len() < (first + k) * n
    {
        return Err(NnError::Protocol("gate tables: table count".into()));
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
    pack_words(&entries, gb as u32).map_err(NnError::from)
}

/// Client, online: its XOR shares of the gate values (gb bits per table), entry x of its table
/// unpadded with K_c.
pub(super) fn lut_outputs(
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
        return Err(NnError::Protocol("gate tables: OT count".into()));
    }
    if tables.len() != packed_len(k * n, gb as u32) {
        return Err(NnError::Protocol("gate tables: frame size".into()));
    }
    let mut out = Vec::with_capacity(k * gb);
    for (u, xb) in x.chunks(nb).enumerate() {
        let off = (u * n + word(xb) as usize) * gb;
        let v = (0..gb).fold(0u64, |acc, i| acc | (get_bit(tables, off + i) as u64) << i);
        put(&mut out, v ^ keys.keys[first + u] as u64, gb);
    }
    Ok(out)
}

/// A carry's three leaf bits as a table index: lt_hi, eq_hi, lt_lo from bit 0 up.
pub(super) fn leaf_index(x: &[bool; LEAF_BITS]) -> usize {
    x.iter()
        .enumerate()
        .fold(0, |a, (i, &b)| a | (b as usize) << i)
}

/// The carry lt_hi ⊕ (eq_hi ∧ lt_lo) of the leaf bits given as a table index.
pub(super) fn carry_of_index(x: usize) -> u64 {
    ((x & 1) ^ ((x >> 1) & (x >> 2) & 1)) as u64
}

/// Server, online (cryptogru::carry_shares, first flight): d = x ⊕ r per carry (3 bits), x its
/// XOR shares of the carry's leaf bits.
pub(super) fn carry_derand(keys: &CarryKeys, leaves: &[[bool; LEAF_BITS]]) -> Result<Vec<bool>> {
    if keys.choices.len() != leaves.len() {
        return Err(NnError::Protocol("carry shares: OT count".into()));
    }
    let mut out = Vec::with_capacity(leaves.len() * LEAF_BITS);
    for (x, &r) in leaves.iter().zip(&keys.choices) {
        put(&mut out, (leaf_index(x) ^ r as usize) as u64, LEAF_BITS);
    }
    Ok(out)
}

/// Bytes of the client's carry-share tables for `k` carries: 8 entries of L bits each.
pub(super) fn carry_table_bytes(lay: &StepLayout, k: usize) -> usize {
    packed_len(k * CARRY_TABLE, lay.l as u32)
}

/// Client, online (second flight): per carry, entry x of 8 is (carry(x ⊕ τ) + v) mod 2^L
/// padded with the low L bits of K_{x ⊕ d}; τ its leaf shares, v its mask (its own share of the
/// carry is −v).
pub(super) fn carry_tables(
    lay: &StepLayout,
    keys: &CarryKeys,
    tau: &[[bool; LEAF_BITS]],
    v: &[u64],
    d: &[bool],
) -> Result<Vec<u8>> {
    let k = tau.len();
    if v.len() != k || d.len() != k * LEAF_BITS || keys.keys.len() != k * CARRY_TABLE {
        return Err(NnError::Protocol("carry shares: table count".into()));
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
    pack_words(&entries, lay.l as u32).map_err(NnError::from)
}

/// Server, online: its additive shares (mod 2^L) of each carry, carry + v, read from the
/// client's tables at its own leaf bits.
pub(super) fn carry_shares(
    lay: &StepLayout,
    keys: &CarryKeys,
    leaves: &[[bool; LEAF_BITS]],
    tables: &[u8],
) -> Result<Vec<u64>> {
    let k = leaves.len();
    if keys.keys.len() != k {
        return Err(NnError::Protocol("carry shares: key count".into()));
    }
    let entries = unpack_words(tables, k * CARRY_TABLE, lay.l as u32).map_err(NnError::from)?;
    let pm = ring_mask(lay.l);
    Ok(leaves
        .iter()
        .zip(&keys.keys)
        .enumerate()
        .map(|(j, (x, &key))| (entries[j * CARRY_TABLE + leaf_index(x)] ^ key as u64) & pm)
        .collect())
}

/// The digits of the server's complemented low bits s' = 2^F − 1 − (s mod 2^F): the carry of
/// s + c out of F bits is [s' < c].
pub(super) fn leaf_digits_of(lay: &StepLayout, v: u64, server: bool) -> (u64, u64) {
    let (_, ml) = lay.leaf_digits();
    let lo = ring_mask(lay.f);
    let x = if server { lo - (v & lo) } else { v & lo };
    (x >> ml, x & ring_mask(ml))
}

/// Server, online (cryptogru::carry_leaves, first flight): d = s'_digit ⊕ r for every leaf
/// (m bits each, high leaves then low ones) from its low bits `s` of each carry's gi share.
pub(super) fn leaf_derand(lay: &StepLayout, keys: &LeafKeys, s: &[u64]) -> Result<Vec<bool>> {
    let (mh, ml) = lay.leaf_digits();
    let k = s.len();
    if keys.choices.len() != 2 * k {
        return Err(NnError::Protocol("carry leaves: OT count".into()));
    }
    let mut out = Vec::with_capacity(k * lay.f);
    for (part, m) in [(0usize, mh), (1, ml)] {
        for (j, &v) in s.iter().enumerate() {
            let (hi, lo) = leaf_digits_of(lay, v, true);
            let digit = if part == 0 { hi } else { lo };
            put(&mut out, digit ^ keys.choices[part * k + j] as u64, m);
        }
    }
    Ok(out)
}

/// Carries per group of the leaves' table frame: a group's high tables are 8 × 2^m_hi 2-bit
/// fields (2^(m_hi + 1) whole bytes), its low tables 8 × 2^m_lo bits (2^m_lo bytes).
pub(super) const LEAF_GROUP: usize = 8;

/// Bytes of the client's table frame for `k` carries (the last group zero-padded).
pub(super) fn leaf_table_bytes(lay: &StepLayout, k: usize) -> usize {
    let (mh, ml) = lay.leaf_digits();
    k.div_ceil(LEAF_GROUP) * (2 * (1 << mh) + (1 << ml))
}

/// Client, online (second flight): for every carry the high leaf's table (2^m_hi entries of
/// ([x < c_hi] ⊕ τ_lt, [x = c_hi] ⊕ τ_eq), 2 bits) and the low leaf's (2^m_lo entries of
/// [x < c_lo] ⊕ τ_lo, 1 bit), entry x padded with the low bits of K_{x ⊕ d}; groups of
/// [`LEAF_GROUP`] carries ([their high tables][their low tables]) built in parallel. `c` are its
/// low bits of each gi share, `tau` its output shares (its circuit inputs, drawn offline).
pub(super) fn leaf_tables(
    lay: &StepLayout,
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
        return Err(NnError::Protocol("carry leaves: table count".into()));
    }
    let gbytes = 2 * nh + nl;
    let mut out = vec![0u8; leaf_table_bytes(lay, k)];
    out.par_chunks_mut(gbytes).enumerate().for_each(|(g, buf)| {
        let (hi_buf, lo_buf) = buf.split_at_mut(2 * nh);
        for u in 0..LEAF_GROUP.min(k - g * LEAF_GROUP) {
            let j = g * LEAF_GROUP + u;
            let (hi, lo) = leaf_digits_of(lay, c[j], false);
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

/// Server, online: its XOR shares of each carry's leaf bits, read from the client's tables at
/// its own digits (entry s' padded with K_r, d = s' ⊕ r).
pub(super) fn leaf_outputs(
    lay: &StepLayout,
    keys: &LeafKeys,
    s: &[u64],
    tables: &[u8],
) -> Result<Vec<[bool; LEAF_BITS]>> {
    let (mh, ml) = lay.leaf_digits();
    let (nh, nl) = (1usize << mh, 1usize << ml);
    let k = s.len();
    if tables.len() != leaf_table_bytes(lay, k) || keys.keys.len() != 2 * k {
        return Err(NnError::Protocol("carry leaves: table size".into()));
    }
    let gbytes = 2 * nh + nl;
    Ok(s.iter()
        .enumerate()
        .map(|(j, &v)| {
            let (hi, lo) = leaf_digits_of(lay, v, true);
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

#[cfg(test)]
mod leaf_tests {
    use super::*;
    use crate::layers::gru::bits::RING;
    use crate::layers::gru::products::test_layouts;
    use secinfer_gc::protocol::{pack_bits, unpack_bits};
    use secinfer_net::simulate;
    use secinfer_ot::Prg;

    /// The carry leaves and carry shares over real pooled OTs against plaintext: lt_hi ⊕ (eq_hi ∧
    /// lt_lo) from both parties' leaf shares, and the sum mod 2^L of both parties' carry shares,
    /// equal [s + c ≥ 2^F] for every pair of low parts at F = 4 and 5 (odd: digits 3 and 2) and
    /// for random and extreme shares at F = 12 and 16 (L = 20, and 1 and 30 for the packing).
    #[test]
    fn carry_leaves_and_shares_equal_the_carry() {
        for (f, l) in [(4usize, 20usize), (5, 1), (12, 20), (16, 30)] {
            let lay = StepLayout {
                f,
                l,
                ..test_layouts(16).next().unwrap()
            };
            let lo = ring_mask(f);
            let (mut ss, mut cs) = (Vec::new(), Vec::new());
            if f <= 5 {
                for a in 0..=lo {
                    for b in 0..=lo {
                        // high bits above F must not matter
                        ss.push(a | (0xabc << f));
                        cs.push(b | (0x5 << f));
                    }
                }
            } else {
                let mut prg = Prg::from_seed(Block(0x1eaf + f as u128));
                for (a, b) in [(0, 0), (lo, 0), (0, lo), (lo, lo), (1, lo), (lo, 1)] {
                    ss.push(a);
                    cs.push(b);
                }
                for _ in 0..3000 {
                    ss.push(prg.next_block().low_u64() & RING);
                    cs.push(prg.next_block().low_u64() & RING);
                }
            }
            let k = ss.len();
            let mut prg = Prg::from_seed(Block(0x7a0 + f as u128));
            let tau: Vec<[bool; LEAF_BITS]> = (0..k)
                .map(|_| {
                    let t = prg.next_block().low_u64();
                    [t & 1 == 1, t & 2 == 2, t & 4 == 4]
                })
                .collect();
            let v: Vec<u64> = (0..k)
                .map(|_| prg.next_block().low_u64() & ring_mask(l))
                .collect();
            let (cs2, tau2, ss2, v2) = (cs.clone(), tau.clone(), ss.clone(), v.clone());
            let cots = k * (f + LEAF_BITS);
            let run = simulate(
                move |ch| {
                    let mut s =
                        PooledOtSender::setup(ch, &mut Prg::new()).map_err(NnError::from)?;
                    s.fill(ch, cots).map_err(NnError::from)?;
                    let keys = LeafKeys::client(&mut s, ch, &lay, k)?;
                    let ckeys = CarryKeys::client(&mut s, ch, k)?;
                    let d = unpack_bits(
                        &ch.recv_pod::<u8>((k * f).div_ceil(8))
                            .map_err(NnError::from)?,
                        k * f,
                    );
                    let t = leaf_tables(&lay, &keys, &cs2, &tau2, &d)?;
                    ch.send_pod(&t).map_err(NnError::from)?;
                    ch.flush().map_err(NnError::from)?;
                    let n = k * LEAF_BITS;
                    let d =
                        unpack_bits(&ch.recv_pod::<u8>(n.div_ceil(8)).map_err(NnError::from)?, n);
                    let t = carry_tables(&lay, &ckeys, &tau2, &v2, &d)?;
                    ch.send_pod(&t).map_err(NnError::from)?;
                    ch.flush().map_err(NnError::from)?;
                    Ok::<(), NnError>(())
                },
                move |ch| {
                    let mut r =
                        PooledOtReceiver::setup(ch, &mut Prg::new()).map_err(NnError::from)?;
                    r.fill(ch, cots).map_err(NnError::from)?;
                    let keys = LeafKeys::server(&mut r, ch, &lay, k)?;
                    let ckeys = CarryKeys::server(&mut r, ch, k)?;
                    ch.send_pod(&pack_bits(&leaf_derand(&lay, &keys, &ss2)?))
                        .map_err(NnError::from)?;
                    ch.flush().map_err(NnError::from)?;
                    let t: Vec<u8> = ch
                        .recv_pod(leaf_table_bytes(&lay, k))
                        .map_err(NnError::from)?;
                    let leaves = leaf_outputs(&lay, &keys, &ss2, &t)?;
                    ch.send_pod(&pack_bits(&carry_derand(&ckeys, &leaves)?))
                        .map_err(NnError::from)?;
                    ch.flush().map_err(NnError::from)?;
                    let t: Vec<u8> = ch
                        .recv_pod(carry_table_bytes(&lay, k))
                        .map_err(NnError::from)?;
                    let shares = carry_shares(&lay, &ckeys, &leaves, &t)?;
                    Ok::<_, NnError>((leaves, shares))
                },
            );
            run.client.output.unwrap_or_else(|e| panic!("client: {e}"));
            let (out, shares) = run.server.output.unwrap_or_else(|e| panic!("server: {e}"));
            for j in 0..k {
                let b: Vec<bool> = (0..LEAF_BITS).map(|x| out[j][x] ^ tau[j][x]).collect();
                let carry = b[0] ^ (b[1] & b[2]);
                let want = (ss[j] & lo) + (cs[j] & lo) > lo;
                assert_eq!(carry, want, "F {f}: s {:#x} c {:#x}", ss[j], cs[j]);
                let sum = shares[j].wrapping_sub(v[j]) & ring_mask(l);
                assert_eq!(
                    sum, want as u64,
                    "F {f} L {l}: carry share of s {:#x} c {:#x}",
                    ss[j], cs[j]
                );
            }
        }
    }

    /// A short, long or padded carry-share table frame is a typed error, not a panic.
    #[test]
    fn carry_shares_refuse_bad_tables() {
        let lay = test_layouts(16).next().unwrap();
        let k = 5;
        let keys = CarryKeys {
            keys: vec![0; k],
            choices: vec![0; k],
        };
        let leaves = vec![[false; LEAF_BITS]; k];
        let n = carry_table_bytes(&lay, k);
        assert!(carry_shares(&lay, &keys, &leaves, &vec![0; n]).is_ok());
        for bad in [vec![0u8; n - 1], vec![0u8; n + 1]] {
            assert!(carry_shares(&lay, &keys, &leaves, &bad).is_err());
        }
        if !(k * CARRY_TABLE * lay.l).is_multiple_of(8) {
            let mut t = vec![0u8; n];
            t[n - 1] = 0x80;
            assert!(carry_shares(&lay, &keys, &leaves, &t).is_err());
        }
        let short = CarryKeys {
            keys: vec![0; k - 1],
            choices: vec![0; k - 1],
        };
        assert!(carry_shares(&lay, &short, &leaves, &vec![0; n]).is_err());
        assert!(carry_derand(&short, &leaves).is_err());
    }
}

#[cfg(test)]
mod lut_tests {
    use super::*;
    use secinfer_gc::protocol::{pack_bits, unpack_bits};
    use secinfer_net::simulate;
    use secinfer_ot::Prg;

    /// The gate tables over real pooled OTs against plaintext: for random tables, masks and
    /// XOR-shared inputs (every input value at b = 3, random ones at b = 8), the client's share
    /// ⊕ the server's ω is the table entry at the reconstructed input, for two calls on
    /// consecutive key ranges (as two steps take them).
    #[test]
    fn gate_tables_read_the_entry_at_the_shared_input() {
        for (nb, gb, k) in [(3usize, 7usize, 64usize), (8, 7, 300), (8, 13, 50)] {
            let mut prg = Prg::from_seed(Block(0x7ab + nb as u128));
            let n = 1usize << nb;
            let table: Vec<u64> = (0..n)
                .map(|_| prg.next_block().low_u64() & ring_mask(gb))
                .collect();
            let mut draw = |bits: usize| -> Vec<u64> {
                (0..2 * k)
                    .map(|_| prg.next_block().low_u64() & ring_mask(bits))
                    .collect()
            };
            let (xs, a, omega) = (draw(nb), draw(nb), draw(gb));
            let xs: Vec<u64> = if nb == 3 {
                (0..2 * k).map(|u| (u % n) as u64).collect()
            } else {
                xs
            };
            let bits = |v: &[u64]| -> Vec<bool> {
                let mut out = Vec::new();
                for &w in v {
                    put(&mut out, w, nb);
                }
                out
            };
            // The client's share b = x ⊕ a.
            let b: Vec<u64> = xs.iter().zip(&a).map(|(x, a)| x ^ a).collect();
            let (a_bits, b_bits) = (bits(&a), bits(&b));
            let (t2, o2) = (table.clone(), omega.clone());
            let run = simulate(
                move |ch| {
                    let mut r =
                        PooledOtReceiver::setup(ch, &mut Prg::new()).map_err(NnError::from)?;
                    r.fill(ch, 2 * k * nb).map_err(NnError::from)?;
                    let keys = LutKeys::client(&mut r, ch, nb, 2 * k)?;
                    let mut out = Vec::new();
                    for call in 0..2 {
                        let x = &b_bits[call * k * nb..(call + 1) * k * nb];
                        let d = lut_derand(&keys, call * k, x, nb)?;
                        ch.send_pod(&pack_bits(&d)).map_err(NnError::from)?;
                        ch.flush().map_err(NnError::from)?;
                        let t: Vec<u8> = ch
                            .recv_pod(packed_len(k * n, gb as u32))
                            .map_err(NnError::from)?;
                        // one byte short is refused
                        assert!(lut_outputs(&keys, call * k, x, nb, gb, &t[1..]).is_err());
                        out.extend(lut_outputs(&keys, call * k, x, nb, gb, &t)?);
                    }
                    Ok::<_, NnError>(out)
                },
                move |ch| {
                    let mut s =
                        PooledOtSender::setup(ch, &mut Prg::new()).map_err(NnError::from)?;
                    s.fill(ch, 2 * k * nb).map_err(NnError::from)?;
                    let keys = LutKeys::server(&mut s, ch, nb, 2 * k)?;
                    for call in 0..2 {
                        let d = unpack_bits(
                            &ch.recv_pod::<u8>((k * nb).div_ceil(8))
                                .map_err(NnError::from)?,
                            k * nb,
                        );
                        let a = &a_bits[call * k * nb..(call + 1) * k * nb];
                        let om = &o2[call * k..(call + 1) * k];
                        // a derandomisation of the wrong length, or keys for too few tables,
                        // are refused
                        assert!(lut_tables(&t2, &keys, call * k, a, om, &d[1..], gb).is_err());
                        assert!(lut_tables(&t2, &keys, 2 * k, a, om, &d, gb).is_err());
                        let t = lut_tables(&t2, &keys, call * k, a, om, &d, gb)?;
                        ch.send_pod(&t).map_err(NnError::from)?;
                        ch.flush().map_err(NnError::from)?;
                    }
                    Ok::<(), NnError>(())
                },
            );
            run.server.output.unwrap_or_else(|e| panic!("server: {e}"));
            let out = run.client.output.unwrap_or_else(|e| panic!("client: {e}"));
            for u in 0..2 * k {
                let share = word(&out[u * gb..(u + 1) * gb]);
                assert_eq!(
                    share ^ omega[u],
                    table[xs[u] as usize],
                    "b {nb} gb {gb} table {u} input {}",
                    xs[u]
                );
            }
        }
    }
}
