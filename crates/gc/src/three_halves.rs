//! Three-halves garbling of AND gates: Rosulek and Roy, "Three Halves Make a Whole? Beating the
//! Half-Gates Lower Bound for Garbled Circuits", CRYPTO 2021 (ePrint 2021/749), §5 ("slicing
//! and dicing"). 1.5κ + 5 bits per AND gate instead of half-gates' 2κ, with free-XOR and
//! point-and-permute unchanged, so it is a drop-in second scheme behind the same backends
//! ([`crate::garble::Scheme::ThreeHalves`]).
//!
//! **Slicing.** A label X is cut into halves (X_L, X_R) = (bits 64..127, bits 0..63); the colour
//! (permute) bit is lsb(X), in X_R, and Δ = (Δ_L, Δ_R) with lsb(Δ) = 1 as for half-gates. For an
//! AND gate with input wires a, b let Â, B̂ be their colour-0 labels (Â = A_0 ⊕ lsb(A_0)·Δ) and
//! ᾱ = 1 ⊕ lsb(A_0), β̄ = 1 ⊕ lsb(B_0) the colours of the labels meaning 1. The evaluator holds
//! A_i = Â ⊕ iΔ, B_j = B̂ ⊕ jΔ in row (i, j) (its colours) and computes three hashes,
//! H_A = H(t_A, A_i), H_B = H(t_B, B_j), H_AB = H(t_AB, A_i ⊕ B_j), each κ/2 bits plus one
//! control bit. Its output label is
//!
//! ```text
//! C_L = H_A ⊕ H_AB ⊕ i·G_0 ⊕ (i⊕j)·G_2 ⊕ R_ij,L·(A_i,L, A_i,R, B_j,L, B_j,R)
//! C_R = H_B ⊕ H_AB ⊕ j·G_1 ⊕ (i⊕j)·G_2 ⊕ R_ij,R·(A_i,L, A_i,R, B_j,L, B_j,R)
//! ```
//!
//! with the garbled gate's three half-ciphertexts G_0, G_1, G_2 (the matrix V_ij of the paper,
//! so the hash part is H(Â) ⊕ H(Â⊕B̂) resp. H(B̂) ⊕ H(Â⊕B̂) in every row) and a 2×4 binary matrix
//! R_ij of label halves.
//!
//! **Dicing.** R_ij = R_p,ij ⊕ d_0·S_1 ⊕ d_1·S_2 (the paper's public matrices R_p per row and
//! the randomising subspace spanned by S_1 = [ω | 1], S_2 = [1 | ω²], ω the 2×2 matrix of
//! multiplication by a generator of GF(4)). The control bits d = r ⊕ (i·ᾱ ⊕ (i⊕j)(ᾱ⊕β̄),
//! j·β̄ ⊕ (i⊕j)(ᾱ⊕β̄)) for fresh uniform r ∈ {0,1}² per gate are what the five table bits z
//! encrypt (same V structure, with one extra hash bit per hash): in each row the evaluator learns
//! a uniform d, independent of the permute bits. The garbler then solves the linear system
//! "evaluator's output in row (i, j) = C_0 ⊕ [i=ᾱ ∧ j=β̄]·Δ for all four rows" for C_0 and the
//! G's; the solution is linear in the halves of (Â, B̂, Δ) with coefficients depending only on
//! (ᾱ, β̄, r), so it is tabulated ([`GARBLE_MATS`], 16 matrices of 5×6 bits, checked against the
//! row equations by `tests::garbler_matrices_solve_every_row`).
//!
//! **Hash.** H(t, X) is the crate's tweakable circular correlation-robust hash
//! π(π(X) ⊕ t) ⊕ π(X) on fixed-key AES ([`crate::garble::TccrHash`], VAES via the ot crate),
//! truncated: the half is bits 0..63 of the output, the control bit bit 64 (disjoint from the
//! half). The paper proves security when H is a (tweakable) circular correlation-robust hash for
//! the linear correlations in Δ's halves that the scheme creates; fixed-key AES in this form is
//! the same heuristic instantiation the half-gates path uses. Tweaks: t = nonce ‖ copy ‖ (3g + k)
//! for AND gate g of a circuit copy and k ∈ {A, B, AB}: unique per hash position within a
//! session (gate indices are limited to 2^30 per copy so 3g + 2 < 2^32 stays in its field); the
//! garbler hashes both labels of a position (X and X ⊕ Δ) under the same tweak, as half-gates
//! does. r is drawn from the garbler's PRG (seeded from the OS per task), one block per gate for
//! all lanes.
//!
//! **Table layout** per AND gate of `L` lanes: G_0, G_1, G_2 of lane 0, lane 1, … as
//! little-endian u64 (24·L bytes), then the control bits, bit 5·l + k = z_k of lane l,
//! little-endian in ⌈5L/8⌉ bytes (padding bits zero): 394 bytes for 16 lanes, 24.625 bytes per
//! AND and copy against half-gates' 32.
use secinfer_core::Block;

/// Bytes of one AND gate's table for `lanes` circuit copies.
pub const fn table_bytes(lanes: usize) -> usize {
    24 * lanes + (5 * lanes).div_ceil(8)
}

/// R_p,ij of the paper, per row (i, j) = (colour of A, colour of B), as 8 bits: bit c of the
/// low nibble is C_L's coefficient of input half c, bit 4 + c C_R's, with input halves
/// (A_L, A_R, B_L, B_R) = c = 0, 1, 2, 3.
const R_P: [u8; 4] = [
    0b0010_0100, // (0,0): C_L += B_L, C_R += A_R
    0b0000_0100, // (0,1): C_L += B_L
    0b0010_0000, // (1,0): C_R += A_R
    0b0000_0000, // (1,1)
];
/// S_1 = [ω | 1]: C_L += A_L ⊕ A_R ⊕ B_L, C_R += A_L ⊕ B_R.
const S_1: u8 = 0b1001_0111;
/// S_2 = [1 | ω²]: C_L += A_L ⊕ B_R, C_R += A_R ⊕ B_L ⊕ B_R.
const S_2: u8 = 0b1110_1001;

/// The evaluator's R_ij for row (i, j) and control bits (d_0, d_1), indexed by
/// i·8 + j·4 + d_0·2 + d_1.
const EVAL_MATS: [u8; 16] = {
    let mut t = [0u8; 16];
    let mut k = 0;
    while k < 16 {
        let (i, j, d0, d1) = ((k >> 3) & 1, (k >> 2) & 1, (k >> 1) & 1, k & 1);
        let mut m = R_P[2 * i + j];
        if d0 == 1 {
            m ^= S_1;
        }
        if d1 == 1 {
            m ^= S_2;
        }
        t[k] = m;
        k += 1;
    }
    t
};

/// The garbler's solution, indexed by ᾱ·8 + β̄·4 + r_0·2 + r_1: five rows (C_L, C_R, G_0, G_1,
/// G_2) of six bits each, bit c = coefficient of (Â_L, Â_R, B̂_L, B̂_R, Δ_L, Δ_R)[c], row k at
/// bits 6k..6k+5. Derived by Gaussian elimination over GF(2) from the four row equations (see
/// the module doc) and verified by `tests::garbler_matrices_solve_every_row`.
pub(crate) const GARBLE_MATS: [u32; 16] = [
    mat(["001010", "010001", "001010", "010001", "000000"]),
    mat(["101110", "001101", "001001", "010011", "000001"]),
    mat(["110010", "110101", "001011", "010010", "000010"]),
    mat(["010110", "101001", "001000", "010000", "000011"]),
    mat(["001000", "010000", "101111", "001110", "111010"]),
    mat(["101100", "001100", "101100", "001100", "111011"]),
    mat(["110000", "110100", "101110", "001101", "111000"]),
    mat(["010100", "101000", "101101", "001111", "111001"]),
    mat(["001000", "010000", "110001", "110111", "011101"]),
    mat(["101100", "001100", "110010", "110101", "011100"]),
    mat(["110000", "110100", "110000", "110100", "011111"]),
    mat(["010100", "101000", "110011", "110110", "011110"]),
    mat(["001000", "010000", "010100", "101000", "100111"]),
    mat(["101100", "001100", "010111", "101010", "100110"]),
    mat(["110000", "110100", "010101", "101011", "100101"]),
    mat(["010100", "101000", "010110", "101001", "100100"]),
];

/// [`GARBLE_MATS`] as word masks (all ones where a coefficient is 1), row-major: entry
/// 6k + c is row k's coefficient of basis half c. Expanded once so a lane's five rows are 30
/// AND/XOR on words, without bit extraction.
const GARBLE_MASKS: [[u64; 30]; 16] = {
    let mut t = [[0u64; 30]; 16];
    let mut m = 0;
    while m < 16 {
        let mut k = 0;
        while k < 30 {
            if (GARBLE_MATS[m] >> k) & 1 == 1 {
                t[m][k] = u64::MAX;
            }
            k += 1;
        }
        m += 1;
    }
    t
};

/// [`EVAL_MATS`] as word masks: entry 4h + c is C_h's coefficient of input half c.
const EVAL_MASKS: [[u64; 8]; 16] = {
    let mut t = [[0u64; 8]; 16];
    let mut m = 0;
    while m < 16 {
        let mut k = 0;
        while k < 8 {
            if (EVAL_MATS[m] >> k) & 1 == 1 {
                t[m][k] = u64::MAX;
            }
            k += 1;
        }
        m += 1;
    }
    t
};

/// Rows written as in the derivation (leftmost character = coefficient of Â_L).
const fn mat(rows: [&str; 5]) -> u32 {
    let mut m = 0u32;
    let mut k = 0;
    while k < 5 {
        let b = rows[k].as_bytes();
        let mut c = 0;
        while c < 6 {
            if b[c] == b'1' {
                m |= 1 << (6 * k + c);
            }
            c += 1;
        }
        k += 1;
    }
    m
}

#[inline(always)]
fn hi(x: Block) -> u64 {
    (x.0 >> 64) as u64
}
#[inline(always)]
fn lo(x: Block) -> u64 {
    x.0 as u64
}
#[inline(always)]
fn join(l: u64, r: u64) -> Block {
    Block(((l as u128) << 64) | r as u128)
}
/// All ones if `b`, else zero.
#[inline(always)]
fn mask(b: u32) -> u64 {
    (b as u64 & 1).wrapping_neg()
}
/// The κ/2-bit half of a hash output.
#[inline(always)]
fn hh(x: Block) -> u64 {
    x.0 as u64
}
/// The control bit of a hash output (bit 64: not part of the half).
#[inline(always)]
fn hf(x: Block) -> u32 {
    ((x.0 >> 64) & 1) as u32
}

/// Hash inputs of one gate for the garbler, lane `l` of `L`: positions (A, A⊕Δ, B, B⊕Δ,
/// Â⊕B̂, Â⊕B̂⊕Δ) at `x[k·L + l]`, colour-0 labels first. Returns (Â, B̂).
#[inline(always)]
pub(crate) fn garble_inputs<const L: usize>(
    a0: Block,
    b0: Block,
    d: Block,
    l: usize,
    x: &mut [Block],
) -> (Block, Block) {
    let ah = a0 ^ d.and_bit(a0.lsb());
    let bh = b0 ^ d.and_bit(b0.lsb());
    x[l] = ah;
    x[L + l] = ah ^ d;
    x[2 * L + l] = bh;
    x[3 * L + l] = bh ^ d;
    x[4 * L + l] = ah ^ bh;
    x[5 * L + l] = ah ^ bh ^ d;
    (ah, bh)
}

/// The garbler's half of one lane: from the six hashes `h` (as laid out by [`garble_inputs`]),
/// the colour-0 labels, Δ and the random bits `r` (bits 0, 1), returns the output zero-label
/// and writes the three half-ciphertexts; returns the five control bits in bits 0..4.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(crate) fn garble_lane<const L: usize>(
    h: &[Block],
    l: usize,
    a0: Block,
    b0: Block,
    ah: Block,
    bh: Block,
    d: Block,
    r: u32,
    g: &mut [u64; 3],
) -> (Block, u32) {
    // Colours of the labels meaning 1.
    let abar = 1 ^ a0.lsb() as u32;
    let bbar = 1 ^ b0.lsb() as u32;
    let (r0, r1) = (r & 1, (r >> 1) & 1);
    let m = &GARBLE_MASKS[((abar << 3) | (bbar << 2) | (r0 << 1) | r1) as usize];
    let basis = [hi(ah), lo(ah), hi(bh), lo(bh), hi(d), lo(d)];
    let row = |k: usize| -> u64 {
        let mut v = 0u64;
        for c in 0..6 {
            v ^= basis[c] & m[6 * k + c];
        }
        v
    };
    let (ha0, ha1, hb0, hb1, hab0, hab1) = (
        h[l],
        h[L + l],
        h[2 * L + l],
        h[3 * L + l],
        h[4 * L + l],
        h[5 * L + l],
    );
    let cl = hh(ha0) ^ hh(hab0) ^ row(0);
    let cr = hh(hb0) ^ hh(hab0) ^ row(1);
    g[0] = hh(ha0) ^ hh(ha1) ^ row(2);
    g[1] = hh(hb0) ^ hh(hb1) ^ row(3);
    g[2] = hh(hab0) ^ hh(hab1) ^ row(4);
    let z0 = r0 ^ hf(ha0) ^ hf(hab0);
    let z1 = r1 ^ hf(hb0) ^ hf(hab0);
    let z2 = abar ^ hf(ha0) ^ hf(ha1);
    let z3 = bbar ^ hf(hb0) ^ hf(hb1);
    let z4 = abar ^ bbar ^ hf(hab0) ^ hf(hab1);
    (
        join(cl, cr),
        z0 | (z1 << 1) | (z2 << 2) | (z3 << 3) | (z4 << 4),
    )
}

/// The evaluator's half of one lane: from the active labels `a`, `b`, their three hashes
/// (H(A), H(B), H(A⊕B)), the half-ciphertexts and the five control bits `z`, the output label.
#[inline(always)]
pub(crate) fn eval_lane(
    a: Block,
    b: Block,
    ha: Block,
    hb: Block,
    hab: Block,
    g: [u64; 3],
    z: u32,
) -> Block {
    let i = a.lsb() as u32;
    let j = b.lsb() as u32;
    let ij = i ^ j;
    let z4 = (z >> 4) & 1;
    let d0 = (z & 1) ^ (i & (z >> 2)) ^ (ij & z4) ^ hf(ha) ^ hf(hab);
    let d1 = ((z >> 1) & 1) ^ (j & (z >> 3)) ^ (ij & z4) ^ hf(hb) ^ hf(hab);
    let rm = &EVAL_MASKS[((i << 3) | (j << 2) | ((d0 & 1) << 1) | (d1 & 1)) as usize];
    let ins = [hi(a), lo(a), hi(b), lo(b)];
    let mut cl = hh(ha) ^ hh(hab) ^ (g[0] & mask(i)) ^ (g[2] & mask(ij));
    let mut cr = hh(hb) ^ hh(hab) ^ (g[1] & mask(j)) ^ (g[2] & mask(ij));
    for c in 0..4 {
        cl ^= ins[c] & rm[c];
        cr ^= ins[c] & rm[4 + c];
    }
    join(cl, cr)
}

/// Appends one gate's table: the lanes' half-ciphertexts `g` (3 per lane, lane-major) and
/// control bits `ctrl` (bit 5l + k = z_k of lane l), as laid out in the module doc.
#[inline(always)]
pub(crate) fn put_gate<const L: usize>(out: &mut Vec<u8>, g: &[u64], ctrl: u128) {
    // Little-endian words (the workspace refuses big-endian targets).
    out.extend_from_slice(bytemuck::cast_slice::<u64, u8>(&g[..3 * L]));
    out.extend_from_slice(&ctrl.to_le_bytes()[..(5 * L).div_ceil(8)]);
}

/// Reads one gate's table (`tab.len() == table_bytes(L)`) into half-ciphertexts `g` (3 per
/// lane) and returns the control bits.
#[inline(always)]
pub(crate) fn get_gate<const L: usize>(tab: &[u8], g: &mut [u64]) -> u128 {
    bytemuck::cast_slice_mut::<u64, u8>(&mut g[..3 * L]).copy_from_slice(&tab[..24 * L]);
    let mut c = [0u8; 16];
    let n = (5 * L).div_ceil(8);
    c[..n].copy_from_slice(&tab[24 * L..24 * L + n]);
    u128::from_le_bytes(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Symbolic check of the tabulated garbler solution: for every (ᾱ, β̄, r) and every row
    /// (i, j) the evaluator's label-linear part (G's by V_ij, R_ij on its active labels) equals
    /// the garbler's C_0 plus [i=ᾱ ∧ j=β̄]·Δ, as linear forms in the six halves. (The hash parts
    /// cancel by construction of V_ij; the end-to-end tests cover them.) Flipping any bit of
    /// any matrix makes some row fail.
    #[test]
    fn garbler_matrices_solve_every_row() {
        let check = |mats: &[u32; 16]| -> bool {
            for k in 0..16u32 {
                let (ab, bb, r0, r1) = ((k >> 3) & 1, (k >> 2) & 1, (k >> 1) & 1, k & 1);
                let m = mats[k as usize];
                let row = |q: u32| (m >> (6 * q)) & 63;
                for i in 0..2u32 {
                    for j in 0..2u32 {
                        let t = (i == ab && j == bb) as u32;
                        let ij = i ^ j;
                        let d0 = r0 ^ (i & ab) ^ (ij & (ab ^ bb));
                        let d1 = r1 ^ (j & bb) ^ (ij & (ab ^ bb));
                        let rm = EVAL_MATS[((i << 3) | (j << 2) | (d0 << 1) | d1) as usize] as u32;
                        // Active label halves as 6-bit linear forms: A_i = Â ⊕ iΔ, B_j = B̂ ⊕ jΔ.
                        let ins = [1 | (i << 4), 2 | (i << 5), 4 | (j << 4), 8 | (j << 5)];
                        for h in 0..2u32 {
                            let mut lhs = row(h) ^ if t == 1 { 16 << h } else { 0 };
                            let mut rhs = 0u32;
                            if h == 0 && i == 1 {
                                rhs ^= row(2);
                            }
                            if h == 1 && j == 1 {
                                rhs ^= row(3);
                            }
                            if ij == 1 {
                                rhs ^= row(4);
                            }
                            for (c, f) in ins.iter().enumerate() {
                                if (rm >> (4 * h + c as u32)) & 1 == 1 {
                                    rhs ^= f;
                                }
                            }
                            lhs ^= rhs;
                            if lhs != 0 {
                                return false;
                            }
                        }
                    }
                }
            }
            true
        };
        assert!(check(&GARBLE_MATS));
        for k in 0..16 {
            for bit in 0..30 {
                let mut m = GARBLE_MATS;
                m[k] ^= 1 << bit;
                assert!(!check(&m), "matrix {k} bit {bit} is not pinned by the rows");
            }
        }
    }

    #[test]
    fn control_bits_pack_and_unpack_for_every_lane_count() {
        fn case<const L: usize>() {
            let g: Vec<u64> = (0..3 * L as u64).map(|v| v * 0x9e37_79b9 + 1).collect();
            let mut ctrl = 0u128;
            for l in 0..L {
                ctrl |= (((l as u128) * 7 + 3) & 31) << (5 * l);
            }
            let mut t = Vec::new();
            put_gate::<L>(&mut t, &g, ctrl);
            assert_eq!(t.len(), table_bytes(L));
            let mut back = vec![0u64; 3 * L];
            assert_eq!(get_gate::<L>(&t, &mut back), ctrl);
            assert_eq!(back, g);
        }
        case::<1>();
        case::<3>();
        case::<8>();
        case::<16>();
        assert_eq!(table_bytes(16), 394);
    }
}
