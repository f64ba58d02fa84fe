//! `ferret::mpcot` — multi-point COT with *regular* noise: `t` independent SPCOTs, one per bin of
//! `2^h` positions, so the noise vector `e` has exactly one 1 per bin (Ferret's regular-LPN
//! variant). Semi-honest: no consistency check (the malicious version's check is what Ferret adds
//! for active security; our threat model is semi-honest, docs/threat-model.md).
//!
//! Sender output `v` (`t·2^h` blocks); receiver output `w = v ⊕ e·Δ` and the positions of `e`.
//! One message, sender → receiver: `t·(2h + 1)` blocks.
use super::spcot::{ggm_receive, ggm_send};
use crate::ext::tccr_tweaked;
use rayon::prelude::*;
use secinfer_core::Block;

/// Blocks the sender sends per tree of depth `h`.
pub(crate) fn msg_blocks_per_tree(h: usize) -> usize {
    2 * h + 1
}

/// Sender. `cots` holds the sender's `t·h` COT keys (tree `i`, level `l` at `i·h + l`),
/// `seeds` one random seed per tree; writes `v` into `out` and the message into `msg`.
/// `tw(j)` is the unique tweak of COT `j`.
pub(crate) fn mpcot_send(
    h: usize,
    delta: Block,
    cots: &[Block],
    seeds: &[Block],
    out: &mut [Block],
    msg: &mut [Block],
    tw: impl Fn(usize) -> Block + Sync,
) {
    let mb = msg_blocks_per_tree(h);
    out.par_chunks_mut(1 << h)
        .zip(msg.par_chunks_mut(mb))
        .zip(cots.par_chunks(h).zip(seeds.par_iter()))
        .enumerate()
        .for_each(|(i, ((v, m), (k, &seed)))| {
            let mut sums = [[Block::ZERO; 2]; 32];
            let sums = &mut sums[..h];
            ggm_send(seed, v, sums);
            // 1-of-2 OT of the level sums from the random COT (K, K ⊕ Δ).
            let mut hk = [Block::ZERO; 64];
            let mut tws = [Block::ZERO; 64];
            for (l, &kl) in k.iter().enumerate() {
                hk[2 * l] = kl;
                hk[2 * l + 1] = kl ^ delta;
                tws[2 * l] = tw(i * h + l);
                tws[2 * l + 1] = tws[2 * l];
            }
            tccr_tweaked(&mut hk[..2 * h], &tws[..2 * h]);
            for (l, s) in sums.iter().enumerate() {
                m[2 * l] = s[0] ^ hk[2 * l];
                m[2 * l + 1] = s[1] ^ hk[2 * l + 1];
            }
            m[2 * h] = v.iter().fold(delta, |a, b| a ^ *b);
        });
}

/// Receiver. `cots`/`bits` are its `t·h` COTs (`M = K ⊕ r·Δ`, `r`); the point of tree `i` has
/// bits `α_l = ¬r_{i·h + l}`. Writes `w` into `out` and returns the `t` points (within their bins).
pub(crate) fn mpcot_receive(
    h: usize,
    cots: &[Block],
    bits: &[bool],
    msg: &[Block],
    out: &mut [Block],
    tw: impl Fn(usize) -> Block + Sync,
) -> Vec<usize> {
    let mb = msg_blocks_per_tree(h);
    let mut alphas = vec![0usize; out.len() >> h];
    out.par_chunks_mut(1 << h)
        .zip(msg.par_chunks(mb))
        .zip(cots.par_chunks(h).zip(bits.par_chunks(h)))
        .zip(alphas.par_iter_mut())
        .enumerate()
        .for_each(|(i, (((w, m), (k, r)), alpha))| {
            let mut hk = [Block::ZERO; 32];
            let mut tws = [Block::ZERO; 32];
            hk[..h].copy_from_slice(k);
            for (l, t) in tws[..h].iter_mut().enumerate() {
                *t = tw(i * h + l);
            }
            tccr_tweaked(&mut hk[..h], &tws[..h]);
            let mut got = [Block::ZERO; 32];
            let mut abits = [false; 32];
            for l in 0..h {
                // OT with choice r gives K^l_r; the sibling side is r, so α_l = ¬r.
                got[l] = m[2 * l + r[l] as usize] ^ hk[l];
                abits[l] = !r[l];
            }
            let a = ggm_receive(&abits[..h], &got[..h], w);
            // c ⊕ (all other leaves) = Δ ⊕ v_α.
            w[a] = w.iter().fold(m[2 * h], |acc, b| acc ^ *b);
            *alpha = a;
        });
    alphas
}

#[cfg(test)]
mod timing {
    use super::*;
    use secinfer_core::Prg;

    /// `cargo test --release -p secinfer-ot --lib mpcot_timing -- --ignored --nocapture`
    #[test]
    #[ignore]
    fn mpcot_timing() {
        let (t, h) = (1280usize, 13usize);
        let mut prg = Prg::from_seed(Block(3));
        let delta = prg.next_block();
        let cots = prg.blocks(t * h);
        let bits = prg.bits(t * h);
        let seeds = prg.blocks(t);
        let mut v = vec![Block::ZERO; t << h];
        let mut w = vec![Block::ZERO; t << h];
        let mut msg = vec![Block::ZERO; t * msg_blocks_per_tree(h)];
        let mut best = [f64::INFINITY; 2];
        for _ in 0..5 {
            let s = std::time::Instant::now();
            mpcot_send(h, delta, &cots, &seeds, &mut v, &mut msg, |j| {
                Block(j as u128)
            });
            best[0] = best[0].min(s.elapsed().as_secs_f64());
            let s = std::time::Instant::now();
            mpcot_receive(h, &cots, &bits, &msg, &mut w, |j| Block(j as u128));
            best[1] = best[1].min(s.elapsed().as_secs_f64());
        }
        eprintln!(
            "mpcot t {t} h {h}: send {:.3} s, receive {:.3} s",
            best[0], best[1]
        );
    }
}
