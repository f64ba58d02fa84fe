//! Shares in, shares out over Z_p for circuits that read `k` shared values and output one: a
//! max-pool window fused with the truncation before it ([`crate::requant::window_circuit`]),
//! or, with k = 1, the truncation alone. The layout generalises [`crate::shares`]'s: the server
//! feeds s'_0 .. s'_{k−1} (its shares shifted by (p−1)/2) and its masked output offset r̃, the
//! client c_0 .. c_{k−1}; the client learns y + r, the server keeps −r. The masks' labels go
//! offline, so one online round trip serves the whole batch.
use crate::circuit::Circuit;
use crate::gadgets::bit_len;
use crate::protocol::{
    evaluate_offline, garble_offline, garble_online, CotReceiver, CotSender, GarbledBatch,
    ReceivedBatch,
};
use crate::GcError;
use secinfer_core::{Block, Prg};
use secinfer_net::{Channel, Phase};

fn push_bits(out: &mut Vec<bool>, v: u64, w: usize) {
    out.extend((0..w).map(|i| (v >> i) & 1 == 1));
}

fn check_circuit(circ: &Circuit, p: u64, k: usize) -> Result<usize, GcError> {
    let w = bit_len(p);
    if k == 0 || circ.n_inputs != (2 * k + 1) * w {
        return Err(GcError::invalid("not a k-to-one shares circuit"));
    }
    Ok(w)
}

/// The server's side of one batch between offline and online. Secret (the masks): no `Debug`.
pub struct WindowGarbler {
    p: u64,
    k: usize,
    batch: GarbledBatch,
    masks: Vec<u64>,
}

impl WindowGarbler {
    /// Offline: garbles `n` copies of `circ` (k shares in, one out, the output signed on
    /// `out_bits` bits) and sends the tables and the labels of fresh uniform masks.
    pub fn offline<C: Channel>(
        ch: &mut C,
        delta: Block,
        p: u64,
        circ: &Circuit,
        k: usize,
        out_bits: u32,
        n: usize,
    ) -> Result<Self, GcError> {
        ch.set_phase(Phase::Offline);
        let w = check_circuit(circ, p, k)?;
        if out_bits == 0 || out_bits as usize >= w {
            return Err(GcError::invalid("output width does not fit the shares"));
        }
        let mut batch = garble_offline(ch, circ, (k + 1) * w, n, delta)?;
        let mut prg = Prg::new();
        let masks: Vec<u64> = (0..n).map(|_| prg.below(p)).collect();
        let half = 1u64 << (out_bits - 1);
        let mut bits = Vec::with_capacity(n * w);
        for &r in &masks {
            push_bits(&mut bits, (r + p - half % p) % p, w);
        }
        batch.send_inputs_early(ch, k * w..(k + 1) * w, &bits)?;
        ch.flush()?;
        Ok(WindowGarbler { p, k, batch, masks })
    }

    /// Online: feeds the server's shares (`n × k`, window-major); returns its new shares (−r).
    pub fn online<C: Channel, S: CotSender<C>>(
        self,
        ch: &mut C,
        ot: &mut S,
        shares: &[u64],
    ) -> Result<Vec<u64>, GcError>
    where
        GcError: From<S::Error>,
    {
        ch.set_phase(Phase::Online);
        let (p, k, n) = (self.p, self.k, self.masks.len());
        if shares.len() != n * k {
            return Err(GcError::invalid(format!(
                "{} shares for a batch of {n} windows of {k}",
                shares.len()
            )));
        }
        let w = bit_len(p);
        let mut bits = Vec::with_capacity(n * (k + 1) * w);
        for win in shares.chunks_exact(k) {
            for &s in win {
                if s >= p {
                    return Err(GcError::invalid("server share out of range"));
                }
                push_bits(&mut bits, (s + (p - 1) / 2) % p, w);
            }
            // The mask's wires were sent offline; these bits are ignored.
            push_bits(&mut bits, 0, w);
        }
        garble_online(ch, ot, &self.batch, &bits)?;
        Ok(self.masks.iter().map(|&r| (p - r) % p).collect())
    }
}

/// The client's side of one batch between offline and online.
pub struct WindowEvaluator {
    p: u64,
    k: usize,
    n: usize,
    circ: Circuit,
    batch: ReceivedBatch,
}

impl WindowEvaluator {
    /// Offline: receives the tables and mask labels of the garbler's [`WindowGarbler::offline`].
    pub fn offline<C: Channel>(
        ch: &mut C,
        p: u64,
        circ: Circuit,
        k: usize,
        n: usize,
    ) -> Result<Self, GcError> {
        ch.set_phase(Phase::Offline);
        let w = check_circuit(&circ, p, k)?;
        let mut batch = evaluate_offline(ch, &circ, (k + 1) * w, n)?;
        batch.recv_inputs_early(ch, k * w..(k + 1) * w)?;
        Ok(WindowEvaluator {
            p,
            k,
            n,
            circ,
            batch,
        })
    }

    /// Online: feeds the client's shares (`n × k`, window-major); returns y + r per window.
    pub fn online<C: Channel, R: CotReceiver<C>>(
        self,
        ch: &mut C,
        ot: &mut R,
        shares: &[u64],
    ) -> Result<Vec<u64>, GcError>
    where
        GcError: From<R::Error>,
    {
        ch.set_phase(Phase::Online);
        let (p, k, n) = (self.p, self.k, self.n);
        if shares.len() != n * k {
            return Err(GcError::invalid(format!(
                "{} shares for a batch of {n} windows of {k}",
                shares.len()
            )));
        }
        crate::shares::evaluate_on_shares(
            ch,
            ot,
            &self.circ,
            &self.batch,
            shares,
            bit_len(p),
            p as u128,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::requant::{window_circuit, Truncation};
    use secinfer_net::mem_pair;
    use secinfer_ot::{OtExtReceiver, OtExtSender};

    const P: u64 = 1_032_193;

    #[test]
    fn pooled_shares_reconstruct_to_the_window_maximum() {
        let tr = Truncation {
            shift: 4,
            bits: 10,
            relu: true,
        };
        let (k, n) = (4, 37);
        let mut prg = Prg::new();
        let accs: Vec<i64> = (0..n * k)
            .map(|_| prg.below(1 << 15) as i64 - (1 << 14))
            .collect();
        let s: Vec<u64> = (0..n * k).map(|_| prg.below(P)).collect();
        let c: Vec<u64> = accs
            .iter()
            .zip(&s)
            .map(|(a, s)| ((a.rem_euclid(P as i64) as u64) + P - s) % P)
            .collect();
        let (mut a, mut b) = mem_pair();
        let srv = std::thread::spawn(move || {
            let mut prg = Prg::new();
            let delta = Block(prg.next_block().0 | 1);
            let mut ot = OtExtSender::setup_with_delta(&mut b, &mut prg, delta).unwrap();
            let circ = window_circuit(P, &tr, k).unwrap();
            let g = WindowGarbler::offline(&mut b, delta, P, &circ, k, tr.bits, n).unwrap();
            g.online(&mut b, &mut ot, &s).unwrap()
        });
        let mut ot = OtExtReceiver::setup(&mut a, &mut Prg::new()).unwrap();
        let circ = window_circuit(P, &tr, k).unwrap();
        let e = WindowEvaluator::offline(&mut a, P, circ, k, n).unwrap();
        let mine = e.online(&mut a, &mut ot, &c).unwrap();
        let theirs = srv.join().unwrap();
        for i in 0..n {
            let y = (mine[i] + theirs[i]) % P;
            let y = if y > P / 2 {
                y as i64 - P as i64
            } else {
                y as i64
            };
            let want = accs[i * k..(i + 1) * k]
                .iter()
                .map(|a| tr.reference(*a))
                .max()
                .unwrap();
            assert_eq!(y, want, "window {i}");
        }
    }

    #[test]
    fn wrong_share_counts_and_circuits_are_refused() {
        let tr = Truncation {
            shift: 4,
            bits: 10,
            relu: false,
        };
        let circ = window_circuit(P, &tr, 2).unwrap();
        let (mut a, _b) = mem_pair();
        let e = WindowGarbler::offline(&mut a, Block(1), P, &circ, 3, tr.bits, 1);
        assert!(matches!(e, Err(GcError::InvalidArgument(_))));
    }
}
