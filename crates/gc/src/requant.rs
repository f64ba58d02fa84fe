//! Truncation of a linear layer's Z_p accumulator on shares, the nonlinear half of GAZELLE /
//! GALA networks: the server holds s, the client c, with s + c ≡ acc (mod p), acc the signed
//! accumulator Σ W·x (+ b·2^F, which the server folds into its share). The circuit lifts acc to
//! a signed word, shifts it right by F with floor (free: the low wires are dropped), keeps the
//! low `bits` bits (the wrap into the main format: free), optionally applies ReLU, and
//! re-shares the result mod p ([`crate::shares`]'s masking).
//!
//! The final layer instead runs [`argmax_circuit`]: the same truncation of every logit, then a
//! comparator tree; the client learns the class (and the logits only when the server reveals
//! them).
use crate::backend::{not, Word};
use crate::circuit::Circuit;
use crate::gadgets::{
    argmax, bit_len, constant_word, lt_signed, mod_add, mux_word, relu, sext, sub, zext,
};
use crate::shares::ShareDomain;
use crate::GcError;

/// The truncation the circuit applies to the signed accumulator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Truncation {
    /// Fraction bits dropped (floor division by 2^shift).
    pub shift: u32,
    /// Width of the result (two's complement wrap).
    pub bits: u32,
    /// ReLU after the wrap.
    pub relu: bool,
}

impl Truncation {
    /// The value the circuit computes for a signed accumulator: `wrap_bits(acc ≫ shift)`,
    /// then ReLU if asked.
    pub fn reference(&self, acc: i64) -> i64 {
        let sh = 64 - self.bits;
        let y = ((acc >> self.shift) << sh) >> sh;
        if self.relu {
            y.max(0)
        } else {
            y
        }
    }

    fn check(&self, p: u64) -> Result<(), GcError> {
        let w = bit_len(p) as u32;
        if self.bits < 2 || self.bits >= w || self.shift >= w {
            return Err(GcError::invalid(format!(
                "truncation by {} to {} bits does not fit {w}-bit shares",
                self.shift, self.bits
            )));
        }
        Ok(())
    }

    /// The signed accumulator of a share pair, truncated (inside a circuit).
    fn apply<B: crate::Backend>(
        &self,
        b: &mut B,
        s_shifted: &[crate::Bit<B::Wire>],
        c: &[crate::Bit<B::Wire>],
        p: u64,
    ) -> Word<B::Wire> {
        let w = bit_len(p);
        // s' = s + h (mod p) makes u = acc + h, and acc = u − h in [−h, h] as w-bit signed.
        let u = mod_add(b, s_shifted, c, p);
        let x = sub(b, &u, &constant_word((p - 1) / 2, w));
        let need = self.shift as usize + self.bits as usize;
        let x = if need > w { sext(&x, need) } else { x };
        let y = x[self.shift as usize..need].to_vec();
        if self.relu {
            relu(b, &y)
        } else {
            y
        }
    }
}

/// The shares-in/shares-out truncation circuit over Z_p: inputs [s' (w), r̃ (w)] (server) then
/// [c (w)] (client), with s' = (s + (p−1)/2) mod p and r̃ = (r − 2^(bits−1)) mod p; output
/// (y + r) mod p (w bits). Drives [`crate::shares::ShareGarbler::offline_circuit`].
pub fn truncation_circuit(p: u64, tr: &Truncation) -> Result<Circuit, GcError> {
    ShareDomain::ModP(p).check_modulus()?;
    tr.check(p)?;
    let w = bit_len(p);
    let ob = tr.bits as usize;
    Ok(Circuit::build(3 * w, |b, ins| {
        let (s, r, c) = (&ins[..w], &ins[w..2 * w], &ins[2 * w..]);
        let mut y = tr.apply(b, s, c, p);
        y[ob - 1] = not(b, &y[ob - 1]);
        mod_add(b, &zext(&y, w), r, p)
    }))
}

/// A max-pool window over `k` accumulators on shares, fused with their truncation: inputs
/// [s'_0 .. s'_{k−1} (w each), r̃ (w)] (server, shifted as in [`truncation_circuit`]) then
/// [c_0 .. c_{k−1}] (client); output (max_j wrap(acc_j ≫ F) + r) mod p, with ReLU after the
/// maximum when `tr.relu` (ReLU is monotone, so one ReLU of the maximum equals the maximum of
/// the ReLUs and costs one instead of k). With k = 1 it computes [`truncation_circuit`]'s
/// function. Drives [`crate::window::WindowGarbler`].
pub fn window_circuit(p: u64, tr: &Truncation, k: usize) -> Result<Circuit, GcError> {
    ShareDomain::ModP(p).check_modulus()?;
    tr.check(p)?;
    if k == 0 {
        return Err(GcError::invalid("a window of no values"));
    }
    let w = bit_len(p);
    let ob = tr.bits as usize;
    let plain = Truncation { relu: false, ..*tr };
    Ok(Circuit::build((2 * k + 1) * w, |b, ins| {
        let (s, rest) = ins.split_at(k * w);
        let (r, c) = rest.split_at(w);
        let mut ys: Vec<Word<u32>> = (0..k)
            .map(|j| plain.apply(b, &s[j * w..(j + 1) * w], &c[j * w..(j + 1) * w], p))
            .collect();
        // A balanced tournament: depth ⌈log2 k⌉ comparators.
        while ys.len() > 1 {
            let mut next = Vec::with_capacity(ys.len().div_ceil(2));
            let mut it = ys.into_iter();
            while let Some(a) = it.next() {
                match it.next() {
                    None => next.push(a),
                    Some(bb) => {
                        let lt = lt_signed(b, &a, &bb);
                        next.push(mux_word(b, &lt, &a, &bb));
                    }
                }
            }
            ys = next;
        }
        let mut y = ys.pop().unwrap_or_default();
        if tr.relu {
            y = relu(b, &y);
        }
        y[ob - 1] = not(b, &y[ob - 1]);
        mod_add(b, &zext(&y, w), r, p)
    }))
}

/// The argmax of `n` truncated logits on shares: inputs [s'_0 .. s'_{n−1}] (server, w bits
/// each, shifted as in [`truncation_circuit`]) then [c_0 .. c_{n−1}] (client); outputs the
/// index (⌈log2 n⌉ bits, lowest index on ties), then, when `logits`, the n truncated logits
/// (`tr.bits` bits each) in the clear for the evaluator.
pub fn argmax_circuit(p: u64, n: usize, tr: &Truncation, logits: bool) -> Result<Circuit, GcError> {
    ShareDomain::ModP(p).check_modulus()?;
    tr.check(p)?;
    if n == 0 {
        return Err(GcError::invalid("argmax of no values"));
    }
    let w = bit_len(p);
    Ok(Circuit::build(2 * n * w, |b, ins| {
        let (s, c) = ins.split_at(n * w);
        let ys: Vec<Word<u32>> = (0..n)
            .map(|i| tr.apply(b, &s[i * w..(i + 1) * w], &c[i * w..(i + 1) * w], p))
            .collect();
        let (mut idx, _) = argmax(b, &ys);
        if logits {
            for y in &ys {
                idx.extend(y.iter().cloned());
            }
        }
        idx
    }))
}

/// Bits of the index [`argmax_circuit`] outputs for `n` values.
pub fn argmax_index_bits(n: usize) -> usize {
    bit_len(n.saturating_sub(1) as u64).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::activation::sign_extend;
    use secinfer_core::Prg;

    const P: u64 = 1_032_193;

    fn bits_of(v: u64, w: usize) -> Vec<bool> {
        (0..w).map(|i| (v >> i) & 1 == 1).collect()
    }
    fn word(bits: &[bool]) -> u64 {
        bits.iter()
            .enumerate()
            .fold(0, |a, (i, &b)| a | ((b as u64) << i))
    }

    #[test]
    fn truncation_circuit_matches_reference_on_random_shares() {
        let mut prg = Prg::new();
        let w = bit_len(P);
        let h = (P - 1) / 2;
        let d = ShareDomain::ModP(P);
        for tr in [
            Truncation {
                shift: 6,
                bits: 12,
                relu: true,
            },
            Truncation {
                shift: 7,
                bits: 14,
                relu: false,
            },
            Truncation {
                shift: 12,
                bits: 10,
                relu: true,
            },
        ] {
            let c = truncation_circuit(P, &tr).unwrap();
            for k in 0..400 {
                // Edges of the range first, then random accumulators.
                let acc: i64 = match k {
                    0 => h as i64,
                    1 => -(h as i64),
                    2 => 0,
                    _ => d.lift(prg.below(P)),
                };
                let s = prg.below(P);
                let cc = d.add(d.embed(acc), P - s);
                let r = prg.below(P);
                let half = 1u64 << (tr.bits - 1);
                let mut inp = bits_of(d.add(s, h), w);
                inp.extend(bits_of(d.add(r, P - half % P), w));
                inp.extend(bits_of(cc, w));
                let z = word(&c.eval_plain(&inp));
                let y = d.lift(d.add(z, P - r));
                assert_eq!(y, tr.reference(acc), "acc {acc} {tr:?}");
            }
        }
    }

    #[test]
    fn argmax_circuit_finds_the_lowest_maximal_index() {
        let mut prg = Prg::new();
        let w = bit_len(P);
        let d = ShareDomain::ModP(P);
        let tr = Truncation {
            shift: 4,
            bits: 10,
            relu: false,
        };
        let n = 10;
        let c = argmax_circuit(P, n, &tr, true).unwrap();
        let ib = argmax_index_bits(n);
        for k in 0..200 {
            let accs: Vec<i64> = (0..n)
                .map(|i| {
                    if k % 3 == 0 && i % 4 == 1 {
                        5000 // ties
                    } else {
                        (prg.below(1 << 16) as i64) - (1 << 15)
                    }
                })
                .collect();
            let ss: Vec<u64> = (0..n).map(|_| prg.below(P)).collect();
            let mut inp = Vec::new();
            for s in &ss {
                inp.extend(bits_of(d.add(*s, (P - 1) / 2), w));
            }
            for (a, s) in accs.iter().zip(&ss) {
                inp.extend(bits_of(d.add(d.embed(*a), P - s), w));
            }
            let out = c.eval_plain(&inp);
            let ys: Vec<i64> = accs.iter().map(|a| tr.reference(*a)).collect();
            let best = ys
                .iter()
                .enumerate()
                .fold(0, |bi, (i, y)| if *y > ys[bi] { i } else { bi });
            assert_eq!(word(&out[..ib]) as usize, best);
            for (i, y) in ys.iter().enumerate() {
                let got = sign_extend(word(&out[ib + i * 10..ib + (i + 1) * 10]), 10);
                assert_eq!(got, *y);
            }
        }
        assert!(argmax_circuit(P, 0, &tr, false).is_err());
        let wide = Truncation {
            shift: 4,
            bits: 21,
            relu: false,
        };
        assert!(truncation_circuit(P, &wide).is_err());
    }

    #[test]
    fn window_circuit_is_the_maximum_of_truncations() {
        let mut prg = Prg::new();
        let w = bit_len(P);
        let h = (P - 1) / 2;
        let d = ShareDomain::ModP(P);
        for (k, relu) in [(1, true), (4, true), (4, false), (3, true), (9, false)] {
            let tr = Truncation {
                shift: 5,
                bits: 11,
                relu,
            };
            let c = window_circuit(P, &tr, k).unwrap();
            for round in 0..120 {
                let accs: Vec<i64> = (0..k)
                    .map(|j| match (round, j) {
                        (0, _) => h as i64,
                        (1, _) => -(h as i64),
                        (2, 0) => 7 << 5,
                        (2, _) => 7 << 5, // ties
                        _ => d.lift(prg.below(P)),
                    })
                    .collect();
                let ss: Vec<u64> = (0..k).map(|_| prg.below(P)).collect();
                let r = prg.below(P);
                let mut inp = Vec::new();
                for s in &ss {
                    inp.extend(bits_of(d.add(*s, h), w));
                }
                inp.extend(bits_of(d.add(r, P - (1u64 << (tr.bits - 1))), w));
                for (a, s) in accs.iter().zip(&ss) {
                    inp.extend(bits_of(d.add(d.embed(*a), P - s), w));
                }
                let z = word(&c.eval_plain(&inp));
                let want = accs.iter().map(|a| tr.reference(*a)).max().unwrap();
                assert_eq!(d.lift(d.add(z, P - r)), want, "{accs:?} {tr:?}");
            }
        }
        assert!(window_circuit(
            P,
            &Truncation {
                shift: 5,
                bits: 11,
                relu: true
            },
            0
        )
        .is_err());
    }
}
