//! The indices of the k largest signed words inside a circuit: a language model's next-word
//! candidates (CryptoGRU's final circuit), k tournaments of [`argmax`](super::argmax).
use super::{argmax, constant_word, mux_word, sext};
use crate::backend::{and, not, Backend, Bit, Word};

type W<B> = <B as Backend>::Wire;

/// The indices of the k largest signed words, largest first, the lowest index first among
/// equals: k tournaments, each after the previous winner's value is replaced by one below every
/// input. The words are sign-extended by one bit so that this "taken" value, −2^L, is strictly
/// below any L-bit input and a taken index never wins again. Per round: the tournament, an
/// equality test of the winner's index against each constant index (⌈log2 n⌉ − 1 ANDs) and a
/// multiplexer per word. `k` is at most the number of words.
pub fn top_k_indices<B: Backend>(b: &mut B, xs: &[Word<W<B>>], k: usize) -> Vec<Word<W<B>>> {
    let w = xs.first().map_or(0, Vec::len) + 1;
    let taken = constant_word(1 << (w - 1), w);
    let mut cur: Vec<Word<W<B>>> = xs.iter().map(|x| sext(x, w)).collect();
    let mut out = Vec::with_capacity(k);
    for round in 0..k {
        let (idx, _) = argmax(b, &cur);
        if round + 1 < k {
            for (j, v) in cur.iter_mut().enumerate() {
                let hit = eq_const(b, &idx, j as u64);
                *v = mux_word(b, &hit, v, &taken);
            }
        }
        out.push(idx);
    }
    out
}

/// Whether the word x equals the constant c (x as wide as c needs).
pub fn eq_const<B: Backend>(b: &mut B, x: &[Bit<W<B>>], c: u64) -> Bit<W<B>> {
    let mut acc = Bit::Const(true);
    for (i, xi) in x.iter().enumerate() {
        let lit = if (c >> i) & 1 == 1 {
            xi.clone()
        } else {
            not(b, xi)
        };
        acc = and(b, &acc, &lit);
    }
    acc
}
