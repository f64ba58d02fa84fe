//! CryptoGRU's gate products by OT multiplexers: P = r·trunc(gh_n) and Q = z·(h − n) decomposed
//! into sender-first OTs whose correlations the server knows before the client's bits exist,
//! the client-sender cross terms, and the share corrections that re-base the client's products
//! on its offline circuit inputs (docs/gru-protocol.md, "Online flights").
use super::bits::ring_mask;
use super::circuits::{StepLayout, GHN_BITS, LEAF_BITS};
use super::tables::CARRIES;
use crate::error::{NnError, Result};
use secinfer_net::Channel;
#[cfg(test)]
use secinfer_ot::{PooledOtReceiver, PooledOtSender};
use secinfer_ss::blocks::pooled;

/// COTs a session draws from its pools: server-to-client (the client's circuit labels, then per
/// step the sender-first OTs of P and Q, the B2A of h' and the gate tables' 1-of-2^b OTs) and
/// client-to-server (the client's direction of both products: r·b and z·h_c).
pub(super) fn pool_sizes(
    lay: &StepLayout,
    steps: usize,
    h: usize,
    labels: usize,
) -> (usize, usize) {
    let luts = lay.lut.map_or(0, |b| 2 * b);
    let per_step_fwd = h * (p_early_len(lay) + q_early_len(lay) + lay.hw + luts);
    // The client → server pool also makes the random 1-of-2^m OTs of the input projections'
    // carry leaves (F COTs per carry; carries r, z, n per element and step), their carry shares'
    // 1-of-8 OTs (3 more per carry) and, with `gh_leaves`, the hidden projections' leaves (F per
    // carry, three per element and step).
    let gh = if lay.gh_leaves() { 3 * lay.f } else { 0 };
    let per_step_rev = h * (2 * lay.gb + CARRIES * (lay.f + LEAF_BITS) + gh);
    (labels + steps * per_step_fwd, steps * per_step_rev)
}

/// The gate-bit weights ω_j: 2^j, or −2^(gb−1) for a signed gate's top bit, mod 2^PW.
fn gate_weight(lay: &StepLayout, j: usize) -> u64 {
    let x = 1u64 << j;
    let w = if lay.g_signed && j == lay.gb - 1 {
        x.wrapping_neg()
    } else {
        x
    };
    w & ring_mask(lay.pw)
}

/// The weights τ_k of trunc(gh_n)'s bits κ, o, s: 1, −2^L, −2^L mod 2^PW.
pub(super) fn ghn_weights(lay: &StepLayout) -> [u64; GHN_BITS] {
    let pm = ring_mask(lay.pw);
    let t = (1u64 << lay.l).wrapping_neg() & pm;
    [1, t, t]
}

/// Sender-first OTs of a product g·(a + T) per element (P = r·trunc(gh_n), Q = z·(h − n)): g a
/// gate value (gb XOR-shared bits), T a word of `k` XOR-shared bits, a the server's own additive
/// part: gb OTs on the client's bits m_j of g, k on its bits m'_k of T, gb·k on the products
/// m_j·m'_k.
fn early_len(lay: &StepLayout, k: usize) -> usize {
    lay.gb + k + lay.gb * k
}

/// P's: T = κ − 2^L(o + s), the three bits circuit A outputs.
pub(super) fn p_early_len(lay: &StepLayout) -> usize {
    early_len(lay, GHN_BITS)
}

/// Q's: T = −n, the bo bits of y.
pub(super) fn q_early_len(lay: &StepLayout) -> usize {
    early_len(lay, lay.bo)
}

/// Client: its choices for a product's sender-first OTs, per element in `early_len` order.
pub(super) fn early_choices(
    lay: &StepLayout,
    g_bits: &[bool],
    t_bits: &[bool],
    k: usize,
) -> Vec<bool> {
    let gb = lay.gb;
    let mut out = Vec::with_capacity(g_bits.len() / gb.max(1) * early_len(lay, k));
    for (g, t) in g_bits.chunks(gb).zip(t_bits.chunks(k)) {
        out.extend_from_slice(g);
        out.extend_from_slice(t);
        for &m in g {
            out.extend(t.iter().map(|&mt| m & mt));
        }
    }
    out
}

/// Server: the correlations of a product's sender-first OTs and its local part, per element.
/// With g = Λ + Σ_j m_j·α_j (α_j = ω_j(1 − 2λ_j), Λ = Σ_j ω_j·λ_j: λ its permute bits, m the
/// client's bits) and T = Λ_T + Σ_k m'_k·β_k likewise (weights `wt`),
/// g·(a + T) = Λ(a + Λ_T) + Σ_j m_j·α_j(a + Λ_T) + Σ_k m'_k·Λβ_k + Σ_{j,k} m_j m'_k·α_jβ_k:
/// every term the client's bit times a value this party knows before the client's bits exist.
/// P: T = κ − 2^L(o + s) (weights 1, −2^L, −2^L), a = its share of gh_n ≫ F. Q: h − n is exact
/// ([`StepLayout::for_step`]), so Q = z·(h_S + h_C) − z·n mod 2^PW: T = −n (weights −ν, ν those
/// of y's bits in n), a = h_S = m(t); z·h_C is the client-sender OT of [`p_client_weights`].
pub(super) fn early_server(
    lay: &StepLayout,
    wt: &[u64],
    g_bits: &[bool],
    t_bits: &[bool],
    a: &[u64],
) -> (Vec<u64>, Vec<u64>) {
    let (gb, k, pm) = (lay.gb, wt.len(), ring_mask(lay.pw));
    let sign = |w: u64, b: bool| if b { w.wrapping_neg() & pm } else { w };
    let mut corr = Vec::with_capacity(a.len() * early_len(lay, k));
    let mut local = Vec::with_capacity(a.len());
    for ((g, t), &a) in g_bits.chunks(gb).zip(t_bits.chunks(k)).zip(a) {
        let big_l = (0..gb).fold(0u64, |s, j| {
            s.wrapping_add(if g[j] { gate_weight(lay, j) } else { 0 })
        });
        let big_lt = (0..k).fold(0u64, |s, x| s.wrapping_add(if t[x] { wt[x] } else { 0 }));
        let alpha: Vec<u64> = (0..gb).map(|j| sign(gate_weight(lay, j), g[j])).collect();
        let beta: Vec<u64> = (0..k).map(|x| sign(wt[x], t[x])).collect();
        let at = a.wrapping_add(big_lt);
        corr.extend(alpha.iter().map(|al| al.wrapping_mul(at) & pm));
        corr.extend(beta.iter().map(|be| be.wrapping_mul(big_l) & pm));
        for al in &alpha {
            corr.extend(beta.iter().map(|be| al.wrapping_mul(*be) & pm));
        }
        local.push(big_l.wrapping_mul(at) & pm);
    }
    (corr, local)
}

/// The weights −ν_k of y's bits in T = −n (Q's second factor), mod 2^PW.
pub(super) fn q_weights(lay: &StepLayout, nu: &[u64]) -> Vec<u64> {
    let pm = ring_mask(lay.pw);
    nu.iter().map(|v| v.wrapping_neg() & pm).collect()
}

/// Client: a multiplexer cross term g·b for its own word b (r·b with b = gc ≫ F its share of
/// trunc(gh_n); z·h_C with h_C its share of h), as the OT sender (the server chooses with its
/// permute bits of g): weights ω_j·b, correlations (1 − 2m_j)·ω_j·b.
pub(super) fn p_client_weights(lay: &StepLayout, b: &[u64]) -> Vec<u64> {
    let pm = ring_mask(lay.pw);
    let mut w = Vec::with_capacity(b.len() * lay.gb);
    for &bi in b {
        w.extend((0..lay.gb).map(|j| gate_weight(lay, j).wrapping_mul(bi) & pm));
    }
    w
}

/// One party's OT endpoints for the multiplexers: the session's IKNP pair (server sends) and
/// a second pair in the other direction (client sends).
#[cfg(test)]
pub(super) enum MuxOt<'a> {
    Server(&'a mut PooledOtSender, &'a mut PooledOtReceiver),
    Client(&'a mut PooledOtReceiver, &'a mut PooledOtSender),
}

/// Shares of g·v mod 2^PW for a gate value g given by its XOR-shared bits (`gb` per element) and
/// v additively shared mod 2^PW (cryptogru::products_by_mux). Per bit j of g the product
/// (c0 ⊕ c1)·w with w = ±2^j·v (−2^(gb−1) for a sign bit), w = w0 + w1, is
/// c_i·w_i + c_{1−i}·(1 − 2c_i)·w_i summed over the parties i; the cross term is one additively
/// correlated OT with party i as sender (correlation (1 − 2c_i)·w_i) and the other party's
/// bit as choice. Exact mod 2^PW; the next circuit does the reference's truncation on the sum.
/// This party's weights w_i, one per gate bit.
#[cfg(test)]
pub(super) fn mux_weights(lay: &StepLayout, v: &[u64]) -> Vec<u64> {
    let (gb, pm) = (lay.gb, ring_mask(lay.pw));
    let mut w = Vec::with_capacity(v.len() * gb);
    for &vi in v {
        for j in 0..gb {
            let x = if lay.g_signed && j == gb - 1 {
                vi.wrapping_neg()
            } else {
                vi
            };
            w.push(x.wrapping_shl(j as u32) & pm);
        }
    }
    w
}

/// This party's correlations (1 − 2c_i)·w_i as the OT sender, mod 2^PW.
pub(super) fn mux_deltas(lay: &StepLayout, w: &[u64], gbits: &[bool]) -> Vec<u64> {
    pooled::mux_deltas(w, gbits, lay.pw)
}

/// This party's product shares mod 2^PW, gb gate bits per product: c_i·w_i + (received cross
/// term) − (its pad as sender).
pub(super) fn mux_combine(
    lay: &StepLayout,
    w: &[u64],
    gbits: &[bool],
    received: &[u64],
    pad: &[u64],
) -> Result<Vec<u64>> {
    Ok(pooled::mux_combine(
        w, gbits, received, pad, lay.gb, lay.pw,
    )?)
}

/// The multiplexer as one sub-protocol (tests), in the session's flight order: the server's
/// choices, then the client's choices, the server's answer, the client's answer.
#[cfg(test)]
pub(super) fn gate_product<C: Channel>(
    ot: MuxOt<'_>,
    ch: &mut C,
    lay: &StepLayout,
    gbits: &[bool],
    v: &[u64],
) -> Result<Vec<u64>> {
    if gbits.len() != v.len() * lay.gb {
        return Err(NnError::Protocol("gate product: bit count".into()));
    }
    let pw = lay.pw as u32;
    let w = mux_weights(lay, v);
    let deltas = mux_deltas(lay, &w, gbits);
    match ot {
        MuxOt::Server(s, r) => {
            let pr = r.send_choices(ch, gbits).map_err(NnError::from)?;
            ch.flush().map_err(NnError::from)?;
            let pf = s.recv_choices(ch, gbits.len()).map_err(NnError::from)?;
            let x = s
                .send_correlated_answer(ch, pf, &deltas, pw)
                .map_err(NnError::from)?;
            ch.flush().map_err(NnError::from)?;
            let y = r
                .recv_correlated_answer(ch, pr, pw)
                .map_err(NnError::from)?;
            mux_combine(lay, &w, gbits, &y, &x)
        }
        MuxOt::Client(r, s) => {
            let pr = s.recv_choices(ch, gbits.len()).map_err(NnError::from)?;
            let pf = r.send_choices(ch, gbits).map_err(NnError::from)?;
            ch.flush().map_err(NnError::from)?;
            let y = r
                .recv_correlated_answer(ch, pf, pw)
                .map_err(NnError::from)?;
            let x = s
                .send_correlated_answer(ch, pr, &deltas, pw)
                .map_err(NnError::from)?;
            ch.flush().map_err(NnError::from)?;
            mux_combine(lay, &w, gbits, &y, &x)
        }
    }
}

/// Client: sends its product shares re-based on the offline-chosen circuit inputs π
/// (the server adds them to its shares), so that its circuit labels could come from offline COTs.
pub(super) fn send_delta<C: Channel>(
    ch: &mut C,
    shares: &[u64],
    pis: impl Iterator<Item = u64>,
    pm: u64,
) -> Result<()> {
    let d: Vec<u32> = shares
        .iter()
        .zip(pis)
        .map(|(s, p)| (s.wrapping_sub(p) & pm) as u32)
        .collect();
    // Not flushed: it closes a flight together with other messages.
    ch.send_pod(&d).map_err(NnError::from)
}

/// Server: its product shares plus the client's corrections.
pub(super) fn recv_delta<C: Channel>(ch: &mut C, shares: &[u64], pm: u64) -> Result<Vec<u64>> {
    let d: Vec<u32> = ch.recv_pod(shares.len()).map_err(NnError::from)?;
    Ok(shares
        .iter()
        .zip(&d)
        .map(|(s, d)| s.wrapping_add(*d as u64) & pm)
        .collect())
}

/// The step layouts the product tests sweep: unsigned 7-bit, signed 8-bit and unsigned
/// 13-bit gates (product rings of 27, 27 and 32 bits) at L = 20, F = 12 and hidden width `hw`.
#[cfg(test)]
pub(super) fn test_layouts(hw: usize) -> impl Iterator<Item = StepLayout> {
    [(7, 27, false), (8, 27, true), (13, 32, false)]
        .into_iter()
        .map(move |(gb, pw, g_signed)| StepLayout {
            acc: 32,
            l: 20,
            f: 12,
            pw,
            gb,
            g_signed,
            bo: 8,
            hw,
            lut: None,
            state_exact: true,
        })
}

/// A decomposed product (P or Q) for one element with every OT replaced by its definition
/// (tests): the sender-first OTs `(corr, client choices, server's local part)` give the client
/// c·δ + ρ and the server −ρ; the client-sender multiplexer `(weights, client's gate bits,
/// server's gate bits)` gives the server x + c·δ and the client its `mux_combine` part.
/// Returns the client's and the server's shares mod 2^PW.
#[cfg(test)]
pub(super) fn ideal_decomposed_product(
    lay: &StepLayout,
    (corr, choices, local): (&[u64], &[bool], u64),
    (w, cli_bits, srv_bits): (&[u64], &[bool], &[bool]),
    rnd: &mut dyn FnMut(u64) -> u64,
) -> (u64, u64) {
    let pm = ring_mask(lay.pw);
    let (mut cs, mut ss) = (0u64, local);
    for (d, &c) in corr.iter().zip(choices) {
        let r = rnd(pm);
        cs = cs.wrapping_add(if c { *d } else { 0 }).wrapping_add(r);
        ss = ss.wrapping_sub(r);
    }
    let del = mux_deltas(lay, w, cli_bits);
    let x: Vec<u64> = w.iter().map(|_| rnd(pm)).collect();
    let recv: Vec<u64> = x
        .iter()
        .zip(&del)
        .zip(srv_bits)
        .map(|((x, d), &c)| x.wrapping_add(if c { *d } else { 0 }) & pm)
        .collect();
    let zero = vec![0u64; w.len()];
    cs = cs.wrapping_add(mux_combine(lay, w, cli_bits, &zero, &x).expect("mux")[0]);
    ss = ss.wrapping_add(pooled::sum_chunks(&recv, lay.gb, pm)[0]);
    (cs & pm, ss & pm)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layers::gru::bits::{bit_vec, sign_extend};
    use secinfer_net::simulate;
    use secinfer_ot::{Block, Prg};

    /// `gate_product` against plaintext: g (unsigned, or signed with its top bit weighing
    /// −2^(gb−1)) times v mod 2^PW, from XOR shares of g's bits and additive shares of v,
    /// including the extremes of both.
    #[test]
    fn gate_product_equals_plaintext_mod_2_pw() {
        for lay in test_layouts(20) {
            let StepLayout {
                gb, pw, g_signed, ..
            } = lay;
            let pm = ring_mask(pw);
            let mut prg = Prg::from_seed(Block(0x5eed_0000 + gb as u128));
            let n = 300;
            let mut gs: Vec<u64> = (0..n)
                .map(|_| prg.next_block().low_u64() & ring_mask(gb))
                .collect();
            let mut vs: Vec<u64> = (0..n).map(|_| prg.next_block().low_u64() & pm).collect();
            gs[0] = ring_mask(gb);
            gs[1] = 1 << (gb - 1);
            vs[0] = pm;
            vs[1] = 1 << (pw - 1);
            let lam: Vec<u64> = (0..n)
                .map(|_| prg.next_block().low_u64() & ring_mask(gb))
                .collect();
            let beta: Vec<u64> = (0..n).map(|_| prg.next_block().low_u64() & pm).collect();
            let bits =
                |x: &[u64]| -> Vec<bool> { x.iter().flat_map(|&v| bit_vec(v, gb)).collect() };
            let g_srv: Vec<u64> = gs.iter().zip(&lam).map(|(g, l)| g ^ l).collect();
            let v_srv: Vec<u64> = vs
                .iter()
                .zip(&beta)
                .map(|(v, b)| v.wrapping_add(*b) & pm)
                .collect();
            let v_cli: Vec<u64> = beta.iter().map(|b| b.wrapping_neg() & pm).collect();
            let (bc, bs) = (bits(&lam), bits(&g_srv));
            let run = simulate(
                move |ch| {
                    let mut r =
                        PooledOtReceiver::setup(ch, &mut Prg::new()).map_err(NnError::from)?;
                    let mut s =
                        PooledOtSender::setup(ch, &mut Prg::new()).map_err(NnError::from)?;
                    gate_product(MuxOt::Client(&mut r, &mut s), ch, &lay, &bc, &v_cli)
                },
                move |ch| {
                    let mut s =
                        PooledOtSender::setup(ch, &mut Prg::new()).map_err(NnError::from)?;
                    let mut r =
                        PooledOtReceiver::setup(ch, &mut Prg::new()).map_err(NnError::from)?;
                    gate_product(MuxOt::Server(&mut s, &mut r), ch, &lay, &bs, &v_srv)
                },
            );
            let pc = run.client.output.unwrap_or_else(|e| panic!("client: {e}"));
            let ps = run.server.output.unwrap_or_else(|e| panic!("server: {e}"));
            for i in 0..n {
                let g = if g_signed {
                    sign_extend(gs[i], gb)
                } else {
                    gs[i] as i64
                };
                let want = (g as i128 * vs[i] as i128) as u64 & pm;
                assert_eq!(
                    pc[i].wrapping_add(ps[i]) & pm,
                    want,
                    "g {g} v {} ({gb}, {pw})",
                    vs[i]
                );
            }
        }
    }
}

#[cfg(test)]
mod p_tests {
    use super::*;
    use crate::layers::gru::bits::{bit_vec, sign_extend, RING};
    use secinfer_ot::{Block, Prg};

    /// P = r·trunc(gh_n) from the decomposition a + b + κ − 2^L(o + s) against plaintext: the
    /// server's correlations and local part, the client's choices and r·b weights, with every
    /// OT replaced by its definition (u − s = c·δ). Random and extreme shares, including sums
    /// that wrap L bits and negative words; unsigned and signed gates.
    #[test]
    fn product_decomposition_equals_plaintext_mod_2_pw() {
        for lay in test_layouts(16) {
            let StepLayout {
                gb, pw, g_signed, ..
            } = lay;
            let (l, f, pm) = (lay.l, lay.f, ring_mask(pw));
            let mut prg = Prg::from_seed(Block(0x9d0c + gb as u128));
            let mut rnd = |m: u64| prg.next_block().low_u64() & m;
            for it in 0..400 {
                let (gs, gc) = match it {
                    0 => (RING, RING),
                    1 => (0, 0),
                    2 => (0x7fff_f000, 0x0000_1000),
                    _ => (rnd(RING), rnd(RING)),
                };
                let g = match it {
                    0 => ring_mask(gb),
                    1 => 1 << (gb - 1),
                    _ => rnd(ring_mask(gb)),
                };
                // plaintext: trunc(gh_n) sign-extended, times the gate value
                let v = ((gs.wrapping_add(gc) & RING) >> f) & ring_mask(l);
                let gv = if g_signed {
                    sign_extend(g, gb)
                } else {
                    g as i64
                };
                let want = (gv as i128 * sign_extend(v, l) as i128) as u64 & pm;
                // circuit A's outputs κ, o, s
                let kappa = ((gs & ring_mask(f)) + (gc & ring_mask(f))) >> f;
                let (a, b) = ((gs >> f) & ring_mask(l), (gc >> f) & ring_mask(l));
                let sum = a + b + kappa;
                let t = [kappa == 1, sum >> l == 1, (sum >> (l - 1)) & 1 == 1];
                // XOR shares: the server's are its permute bits
                let lam = rnd(ring_mask(gb));
                let lam_t: Vec<bool> = (0..GHN_BITS).map(|_| rnd(1) == 1).collect();
                let r_srv = bit_vec(lam, gb);
                let r_cli = bit_vec(g ^ lam, gb);
                let t_cli: Vec<bool> = t.iter().zip(&lam_t).map(|(x, y)| x ^ y).collect();
                let (corr, local) = early_server(&lay, &ghn_weights(&lay), &r_srv, &lam_t, &[a]);
                let ch = early_choices(&lay, &r_cli, &t_cli, GHN_BITS);
                assert_eq!(corr.len(), p_early_len(&lay));
                assert_eq!(ch.len(), corr.len());
                let w = p_client_weights(&lay, &[b]);
                let (pc, ps) = ideal_decomposed_product(
                    &lay,
                    (&corr, &ch, local[0]),
                    (&w, &r_cli, &r_srv),
                    &mut rnd,
                );
                assert_eq!(
                    pc.wrapping_add(ps) & pm,
                    want,
                    "gs {gs:#x} gc {gc:#x} g {g} ({gb}, {pw}, {g_signed})"
                );
            }
        }
    }
}

#[cfg(test)]
mod q_tests {
    use super::*;
    use crate::layers::gru::bits::{bit_vec, neg, sign_extend, RING};
    use secinfer_ot::{Block, Prg};

    /// Q = z·(h − n) from the decomposition against plaintext: the server's correlations and
    /// local part, the client's choices and z·h_C weights, every OT replaced by its definition.
    /// h in [−2^(hw−1), 2^(hw−1)) shared mod 2^32 as the session shares it (m = h + ρ, −ρ),
    /// n = sext(y)·2^shift for a bo-bit y, XOR shares with random permute bits; unsigned and
    /// signed gates, extremes of h, y and z included.
    #[test]
    fn q_decomposition_equals_plaintext_mod_2_pw() {
        for lay in test_layouts(16) {
            let StepLayout {
                gb,
                pw,
                g_signed,
                bo,
                hw,
                ..
            } = lay;
            let pm = ring_mask(pw);
            for shift in [0u32, 4, 8] {
                // ν as `StepLayout::candidate_weights` makes them for this shift
                let nu: Vec<u64> = (0..bo)
                    .map(|k| {
                        let w = 1u64 << (k as u32 + shift);
                        if k + 1 == bo {
                            w.wrapping_neg() & pm
                        } else {
                            w & pm
                        }
                    })
                    .collect();
                let mut prg = Prg::from_seed(Block(0x0e0c + (gb * 10) as u128 + shift as u128));
                let mut rnd = |m: u64| prg.next_block().low_u64() & m;
                for it in 0..400 {
                    let hv: i64 = match it {
                        0 => (1 << (hw - 1)) - 1,
                        1 => -(1 << (hw - 1)),
                        2 => 0,
                        _ => sign_extend(rnd(ring_mask(hw)), hw),
                    };
                    let y = match it {
                        0 => ring_mask(bo),
                        1 => 1 << (bo - 1),
                        2 => (1 << (bo - 1)) - 1,
                        _ => rnd(ring_mask(bo)),
                    };
                    let g = match it {
                        0 => ring_mask(gb),
                        1 => 1 << (gb - 1),
                        _ => rnd(ring_mask(gb)),
                    };
                    let gv = if g_signed {
                        sign_extend(g, gb)
                    } else {
                        g as i64
                    };
                    let n = sign_extend(y, bo) << shift;
                    let want = (gv as i128 * (hv - n) as i128) as u64 & pm;
                    // the session's shares of h: m = h + ρ (server), −ρ (client), mod 2^32
                    let rho = rnd(RING);
                    let h_s = (hv as u64).wrapping_add(rho) & RING & pm;
                    let h_c = neg(rho) & pm;
                    let lam = rnd(ring_mask(gb));
                    let sig = rnd(ring_mask(bo));
                    let (z_srv, z_cli) = (bit_vec(lam, gb), bit_vec(g ^ lam, gb));
                    let (y_srv, y_cli) = (bit_vec(sig, bo), bit_vec(y ^ sig, bo));
                    let (corr, local) =
                        early_server(&lay, &q_weights(&lay, &nu), &z_srv, &y_srv, &[h_s]);
                    let ch = early_choices(&lay, &z_cli, &y_cli, bo);
                    assert_eq!(corr.len(), q_early_len(&lay));
                    assert_eq!(ch.len(), corr.len());
                    let w = p_client_weights(&lay, &[h_c]);
                    let (qc, qs) = ideal_decomposed_product(
                        &lay,
                        (&corr, &ch, local[0]),
                        (&w, &z_cli, &z_srv),
                        &mut rnd,
                    );
                    assert_eq!(
                        qc.wrapping_add(qs) & pm,
                        want,
                        "h {hv} y {y} g {g} shift {shift} ({gb}, {pw}, {g_signed})"
                    );
                }
            }
        }
    }
}
