//! CryptoGRU's boolean-to-arithmetic conversion of the garbled circuits' XOR-shared outputs into
//! additive shares, by one correlated OT per bit.
use super::bits::{ring_mask, sum_chunks};
use crate::error::{NnError, Result};
#[cfg(test)]
use secinfer_net::Channel;
#[cfg(test)]
use secinfer_ot::{PooledOtReceiver, PooledOtSender};

/// B2A (cryptogru::b2a): additive shares mod 2^k of L-bit two's-complement words given by their
/// XOR-shared bits (L per word), sign-extended into Z_{2^k}. Per bit with weight w (2^j, or
/// −2^(L−1) for the sign), w·(a ⊕ b) = w·a + b·w·(1 − 2a), the second term one additively
/// correlated OT with the server (bit a) as sender and the client's bit b as choice.
/// The bit weights mod 2^k.
fn b2a_weight(j: usize, l: usize, pm: u64) -> u64 {
    let x = 1u64 << j;
    if j == l - 1 {
        x.wrapping_neg() & pm
    } else {
        x & pm
    }
}

fn check_b2a(bits: &[bool], l: usize) -> Result<()> {
    if l == 0 || !bits.len().is_multiple_of(l) {
        return Err(NnError::Protocol("b2a: bit count".into()));
    }
    Ok(())
}

/// Server: the OT correlations w_j·(1 − 2a_j).
pub(super) fn b2a_deltas(bits: &[bool], l: usize, k: usize) -> Result<Vec<u64>> {
    check_b2a(bits, l)?;
    let pm = ring_mask(k);
    Ok(bits
        .iter()
        .enumerate()
        .map(|(i, &a)| {
            let w = b2a_weight(i % l, l, pm);
            if a {
                w.wrapping_neg() & pm
            } else {
                w
            }
        })
        .collect())
}

/// Server: its word shares Σ_j (w_j·a_j − x_j), x_j its OT outputs.
pub(super) fn b2a_server(bits: &[bool], x: &[u64], l: usize, k: usize) -> Result<Vec<u64>> {
    check_b2a(bits, l)?;
    if x.len() != bits.len() {
        return Err(NnError::Protocol("b2a: OT count".into()));
    }
    let pm = ring_mask(k);
    let terms: Vec<u64> = bits
        .iter()
        .enumerate()
        .zip(x)
        .map(|((i, &a), x)| if a { b2a_weight(i % l, l, pm) } else { 0 }.wrapping_sub(*x))
        .collect();
    Ok(sum_chunks(&terms, l, pm))
}

/// Client: its word shares, the sums of its OT outputs.
pub(super) fn b2a_client(terms: &[u64], l: usize, k: usize) -> Result<Vec<u64>> {
    if l == 0 || !terms.len().is_multiple_of(l) {
        return Err(NnError::Protocol("b2a: OT count".into()));
    }
    Ok(sum_chunks(terms, l, ring_mask(k)))
}

/// [`b2a`] pieces run as one sub-protocol (tests): `early` uses the sender-first OT (the
/// session's B2A of h'), else the split pooled OT (the session's B2As of trunc(gh_n) and h − n).
#[cfg(test)]
pub(super) fn b2a<C: Channel>(
    ot: std::result::Result<&mut PooledOtSender, &mut PooledOtReceiver>,
    ch: &mut C,
    bits: &[bool],
    l: usize,
    k: usize,
    early: bool,
) -> Result<Vec<u64>> {
    check_b2a(bits, l)?;
    match ot {
        Ok(s) => {
            let deltas = b2a_deltas(bits, l, k)?;
            let x = if early {
                let p = s
                    .send_correlated_early(ch, &deltas, k as u32)
                    .map_err(NnError::from)?;
                ch.flush().map_err(NnError::from)?;
                s.finish_early(ch, p).map_err(NnError::from)?
            } else {
                let p = s.recv_choices(ch, bits.len()).map_err(NnError::from)?;
                let x = s
                    .send_correlated_answer(ch, p, &deltas, k as u32)
                    .map_err(NnError::from)?;
                ch.flush().map_err(NnError::from)?;
                x
            };
            b2a_server(bits, &x, l, k)
        }
        Err(r) => {
            let t = if early {
                let p = r
                    .recv_correlated_early(ch, bits.len(), k as u32)
                    .map_err(NnError::from)?;
                let t = r.finish_early(ch, p, bits).map_err(NnError::from)?;
                ch.flush().map_err(NnError::from)?;
                t
            } else {
                let p = r.send_choices(ch, bits).map_err(NnError::from)?;
                ch.flush().map_err(NnError::from)?;
                r.recv_correlated_answer(ch, p, k as u32)
                    .map_err(NnError::from)?
            };
            b2a_client(&t, l, k)
        }
    }
}

#[cfg(test)]
mod b2a_tests {
    use super::*;
    use crate::layers::gru::bits::{bit_vec, sign_extend};
    use secinfer_net::simulate;
    use secinfer_ot::{Block, Prg};

    /// `b2a` against plaintext: random and extreme L-bit words from XOR shares to additive
    /// shares of their sign extension mod 2^k.
    #[test]
    fn b2a_equals_sign_extension_mod_2_k() {
        for (l, k, early) in [
            (20usize, 27usize, false),
            (20, 32, false),
            (8, 8, false),
            (1, 5, false),
            (20, 27, true),
            (16, 32, true),
            (8, 8, true),
            (1, 5, true),
        ] {
            let mut prg = Prg::from_seed(Block(0xb2a0 + (l * 100 + k) as u128));
            let n = 200;
            let mut xs: Vec<u64> = (0..n)
                .map(|_| prg.next_block().low_u64() & ring_mask(l))
                .collect();
            xs[0] = ring_mask(l);
            xs[1] = 1 << (l - 1);
            xs[2] = 0;
            let a: Vec<u64> = (0..n)
                .map(|_| prg.next_block().low_u64() & ring_mask(l))
                .collect();
            let bits = |v: &[u64]| -> Vec<bool> { v.iter().flat_map(|&x| bit_vec(x, l)).collect() };
            let srv = bits(&a);
            let cli = bits(&xs.iter().zip(&a).map(|(x, a)| x ^ a).collect::<Vec<_>>());
            let run = simulate(
                move |ch| {
                    let mut r =
                        PooledOtReceiver::setup(ch, &mut Prg::new()).map_err(NnError::from)?;
                    b2a(Err(&mut r), ch, &cli, l, k, early)
                },
                move |ch| {
                    let mut s =
                        PooledOtSender::setup(ch, &mut Prg::new()).map_err(NnError::from)?;
                    b2a(Ok(&mut s), ch, &srv, l, k, early)
                },
            );
            let c = run.client.output.unwrap_or_else(|e| panic!("client: {e}"));
            let s = run.server.output.unwrap_or_else(|e| panic!("server: {e}"));
            for i in 0..n {
                let want = (sign_extend(xs[i], l) as u64) & ring_mask(k);
                assert_eq!(
                    c[i].wrapping_add(s[i]) & ring_mask(k),
                    want,
                    "x {} ({l}, {k}, early {early})",
                    xs[i]
                );
            }
        }
    }
}
