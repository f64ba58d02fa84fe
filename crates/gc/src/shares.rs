//! Shares in, shares out (GAZELLE style) for both share domains of DESIGN.md §4.
//!
//! Inputs are additive shares of n values: the server (garbler) holds `s`, the client (evaluator)
//! `c`, with x = s + c mod p ([`ShareDomain::ModP`]) or mod 2^l ([`ShareDomain::Pow2`]). One
//! circuit per value adds the shares (reducing mod p), lifts to a signed word, applies the
//! [`ActSpec`], and adds the server's fresh uniform mask r; the client learns only
//! y = f(x) + r, the server keeps −r. Batched over n (one round trip online, rounds independent
//! of n).
//!
//! Circuit for `ModP(p)`, w = bit length of p, h = (p−1)/2:
//! * the server feeds s' = (s + h) mod p (a local shift of its own share, free), so
//!   u = (s' + c) mod p = (x + h) mod p and X = u − h ∈ [−h, h] is x's signed lift
//!   (mod-p addition: ~3w ANDs; subtracting the constant h: < w);
//! * after f, y (signed, `output.bits`) becomes y' = y + 2^(ob−1) ∈ [0, 2^ob) by flipping its
//!   top bit (free); the server feeds r̃ = (r − 2^(ob−1)) mod p, and z = (y' + r̃) mod p =
//!   (y + r) mod p (~3w ANDs). Needs 2^ob ≤ p.
//!
//! For `Pow2(l)`: X = s + c mod 2^l (l−1 ANDs), z = sext(y) + r mod 2^l (l−1 ANDs).
use crate::activation::{mask, ActSpec};
use crate::backend::{not, Word};
use crate::circuit::Circuit;
use crate::gadgets::{add, bit_len, constant_word, mod_add, sext, sub, zext};
use crate::protocol::{
    evaluate_offline, evaluate_online, garble_offline, garble_online, CotReceiver, CotSender,
    GarbledBatch, ReceivedBatch,
};
use crate::GcError;
use secinfer_core::{Block, Prg};
use secinfer_net::{Channel, Phase};

/// Which ring the shares live in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ShareDomain {
    /// Z_p, p an odd prime (the BFV plaintext modulus), p < 2^62.
    ModP(u64),
    /// Z_{2^l}, 2 ≤ l ≤ 62.
    Pow2(u32),
}

impl ShareDomain {
    /// Bits of a share (and of the signed lifted value).
    pub fn width(&self) -> usize {
        match *self {
            ShareDomain::ModP(p) => bit_len(p),
            ShareDomain::Pow2(l) => l as usize,
        }
    }
    /// The modulus (2^l for Pow2).
    pub fn modulus(&self) -> u128 {
        match *self {
            ShareDomain::ModP(p) => p as u128,
            ShareDomain::Pow2(l) => 1u128 << l,
        }
    }
    fn reduce(&self, v: i128) -> u64 {
        let m = self.modulus() as i128;
        (((v % m) + m) % m) as u64
    }
    /// The signed value a share pair stands for.
    pub fn lift(&self, x: u64) -> i64 {
        match *self {
            ShareDomain::ModP(p) => {
                if x > (p - 1) / 2 {
                    x as i64 - p as i64
                } else {
                    x as i64
                }
            }
            ShareDomain::Pow2(l) => crate::activation::sign_extend(x, l),
        }
    }
    /// x mod the modulus for a signed x.
    pub fn embed(&self, x: i64) -> u64 {
        self.reduce(x as i128)
    }
    /// (a + b) mod the modulus.
    pub fn add(&self, a: u64, b: u64) -> u64 {
        self.reduce(a as i128 + b as i128)
    }
    /// Checks the modulus alone: an odd p below 2^62, or 2 ≤ l ≤ 62.
    pub fn check_modulus(&self) -> Result<(), GcError> {
        match *self {
            ShareDomain::ModP(p) if p < 3 || p % 2 == 0 || p >= 1 << 62 => Err(GcError::invalid(
                format!("modulus {p} must be an odd prime below 2^62"),
            )),
            ShareDomain::Pow2(l) if !(2..=62).contains(&l) => {
                Err(GcError::invalid(format!("share width {l} not in 2..=62")))
            }
            _ => Ok(()),
        }
    }

    /// Checks the domain and that `spec` fits it.
    pub fn check(&self, spec: &ActSpec) -> Result<(), GcError> {
        spec.check()?;
        self.check_modulus()?;
        let w = self.width();
        match *self {
            ShareDomain::ModP(p) => {
                if (1u64 << spec.output.bits) > p {
                    return Err(GcError::invalid(
                        "output format too wide for the modulus (need 2^bits ≤ p)",
                    ));
                }
            }
            ShareDomain::Pow2(_) => {
                if spec.output.bits as usize > w {
                    return Err(GcError::invalid("output format wider than the share ring"));
                }
            }
        }
        if spec.input.bits as usize != w {
            return Err(GcError::invalid(format!(
                "input format has {} bits, shares have {w}",
                spec.input.bits
            )));
        }
        Ok(())
    }
}

/// The shares-in/shares-out circuit: inputs [s' or s (w), r̃ or r (w)] (server) then [c (w)]
/// (client); outputs z (w bits).
pub fn share_circuit(domain: ShareDomain, spec: &ActSpec) -> Result<Circuit, GcError> {
    domain.check(spec)?;
    let w = domain.width();
    let ob = spec.output.bits as usize;
    Ok(Circuit::build(3 * w, |b, ins| {
        let (s, r, c) = (&ins[..w], &ins[w..2 * w], &ins[2 * w..]);
        match domain {
            ShareDomain::ModP(p) => {
                let h = (p - 1) / 2;
                let u = mod_add(b, s, c, p);
                let x = sub(b, &u, &constant_word(h, w));
                let mut y: Word<u32> = sext(&spec.apply(b, &x), ob);
                y[ob - 1] = not(b, &y[ob - 1]);
                mod_add(b, &zext(&y, w), r, p)
            }
            ShareDomain::Pow2(_) => {
                let x = add(b, s, c);
                let y = sext(&spec.apply(b, &x), w);
                add(b, &y, r)
            }
        }
    }))
}

fn push_bits(out: &mut Vec<bool>, v: u64, w: usize) {
    out.extend((0..w).map(|i| (v >> i) & 1 == 1));
}

/// The server's side between offline and online.
pub struct ShareGarbler {
    domain: ShareDomain,

    batch: GarbledBatch,
    masks: Vec<u64>,
    and_per_value: u64,
}

impl ShareGarbler {
    /// Offline: garbles `n` copies and streams the tables (charged to [`Phase::Offline`]).
    pub fn offline<C: Channel>(
        ch: &mut C,
        delta: Block,
        domain: ShareDomain,
        spec: &ActSpec,
        n: usize,
    ) -> Result<Self, GcError> {
        let circ = share_circuit(domain, spec)?;
        Self::offline_circuit(ch, delta, domain, &circ, spec.output.bits, n)
    }

    /// [`ShareGarbler::offline`] for another circuit of the same interface as
    /// [`share_circuit`]: inputs [s' (w), r̃ (w), c (w)], output (y + r) with y signed on
    /// `out_bits` bits (e.g. [`crate::requant::truncation_circuit`]).
    pub fn offline_circuit<C: Channel>(
        ch: &mut C,
        delta: Block,
        domain: ShareDomain,
        circ: &Circuit,
        out_bits: u32,
        n: usize,
    ) -> Result<Self, GcError> {
        ch.set_phase(Phase::Offline);
        let w = domain.width();
        if circ.n_inputs != 3 * w || out_bits as usize > w || out_bits == 0 {
            return Err(GcError::invalid("not a shares-in/shares-out circuit"));
        }
        let mut batch = garble_offline(ch, circ, 2 * w, n, delta)?;
        let mut prg = Prg::new();
        let masks: Vec<u64> = (0..n)
            .map(|_| match domain {
                ShareDomain::ModP(p) => prg.below(p),
                ShareDomain::Pow2(l) => prg.next_block().low_u64() & mask(l),
            })
            .collect();
        // The masks do not depend on the input: their labels go offline.
        let mut bits = Vec::with_capacity(n * w);
        for &r in &masks {
            let r_in = match domain {
                ShareDomain::ModP(p) => {
                    let half = 1u64 << (out_bits - 1);
                    domain.add(r, p - (half % p))
                }
                ShareDomain::Pow2(_) => r,
            };
            push_bits(&mut bits, r_in, w);
        }
        batch.send_inputs_early(ch, w..2 * w, &bits)?;
        ch.flush()?;
        Ok(ShareGarbler {
            domain,
            batch,
            masks,
            and_per_value: circ.and_count(),
        })
    }

    pub fn and_gates_per_value(&self) -> u64 {
        self.and_per_value
    }

    /// Online: feeds the server's shares; returns its new shares (−r).
    pub fn online<C: Channel, S: CotSender<C>>(
        self,
        ch: &mut C,
        ot: &mut S,
        server_shares: &[u64],
    ) -> Result<Vec<u64>, GcError>
    where
        GcError: From<S::Error>,
    {
        ch.set_phase(Phase::Online);
        let n = self.masks.len();
        if server_shares.len() != n {
            return Err(GcError::invalid(format!(
                "{} shares for a batch of {n}",
                server_shares.len()
            )));
        }
        let w = self.domain.width();
        let m = self.domain.modulus();
        let mut bits = Vec::with_capacity(n * 2 * w);
        for (&s, &r) in server_shares.iter().zip(&self.masks) {
            if s as u128 >= m {
                return Err(GcError::invalid("server share out of range"));
            }
            let s_in = match self.domain {
                ShareDomain::ModP(p) => self.domain.add(s, (p - 1) / 2),
                ShareDomain::Pow2(_) => s,
            };
            push_bits(&mut bits, s_in, w);
            let _ = r; // sent offline
            push_bits(&mut bits, 0, w);
        }
        garble_online(ch, ot, &self.batch, &bits)?;
        Ok(self
            .masks
            .iter()
            .map(|&r| self.domain.embed(-(r as i64)))
            .collect())
    }
}

/// The client's side between offline and online.
pub struct ShareEvaluator {
    domain: ShareDomain,
    circ: Circuit,
    batch: ReceivedBatch,
    n: usize,
}

impl ShareEvaluator {
    /// Offline: receives the tables of `n` copies (charged to [`Phase::Offline`]).
    pub fn offline<C: Channel>(
        ch: &mut C,
        domain: ShareDomain,
        spec: &ActSpec,
        n: usize,
    ) -> Result<Self, GcError> {
        let circ = share_circuit(domain, spec)?;
        Self::offline_circuit(ch, domain, circ, n)
    }

    /// [`ShareEvaluator::offline`] for the circuit the garbler passed to
    /// [`ShareGarbler::offline_circuit`].
    pub fn offline_circuit<C: Channel>(
        ch: &mut C,
        domain: ShareDomain,
        circ: Circuit,
        n: usize,
    ) -> Result<Self, GcError> {
        ch.set_phase(Phase::Offline);
        let w = domain.width();
        if circ.n_inputs != 3 * w {
            return Err(GcError::invalid("not a shares-in/shares-out circuit"));
        }
        let mut batch = evaluate_offline(ch, &circ, 2 * w, n)?;
        batch.recv_inputs_early(ch, w..2 * w)?;
        Ok(ShareEvaluator {
            domain,
            circ,
            batch,
            n,
        })
    }

    /// Test hook: corrupts one stored table bit.
    pub fn corrupt_table(&mut self, index: usize, bit: u32) {
        self.batch.corrupt_table(index, bit);
    }

    /// Online: returns the client's new shares y = f(x) + r.
    pub fn online<C: Channel, R: CotReceiver<C>>(
        self,
        ch: &mut C,
        ot: &mut R,
        client_shares: &[u64],
    ) -> Result<Vec<u64>, GcError>
    where
        GcError: From<R::Error>,
    {
        ch.set_phase(Phase::Online);
        if client_shares.len() != self.n {
            return Err(GcError::invalid(format!(
                "{} shares for a batch of {}",
                client_shares.len(),
                self.n
            )));
        }
        let (w, m) = (self.domain.width(), self.domain.modulus());
        evaluate_on_shares(ch, ot, &self.circ, &self.batch, client_shares, w, m)
    }
}

/// The evaluator's online step of a shares-in/shares-out batch: `shares` (each below `modulus`)
/// as `w`-bit inputs, the evaluation, and the `w`-bit outputs as integers.
pub(crate) fn evaluate_on_shares<C: Channel, R: CotReceiver<C>>(
    ch: &mut C,
    ot: &mut R,
    circ: &Circuit,
    batch: &ReceivedBatch,
    shares: &[u64],
    w: usize,
    modulus: u128,
) -> Result<Vec<u64>, GcError>
where
    GcError: From<R::Error>,
{
    let mut bits = Vec::with_capacity(shares.len() * w);
    for &c in shares {
        if c as u128 >= modulus {
            return Err(GcError::invalid("client share out of range"));
        }
        push_bits(&mut bits, c, w);
    }
    let out = evaluate_online(ch, ot, circ, batch, &bits)?;
    Ok(out
        .chunks(w)
        .map(|o| {
            o.iter()
                .enumerate()
                .fold(0u64, |a, (i, &b)| a | ((b as u64) << i))
        })
        .collect())
}

/// Server side of one batched activation: offline garbling then online inputs. Returns the
/// server's new shares (−r mod the modulus).
pub fn garble_apply<C: Channel, S: CotSender<C>>(
    ch: &mut C,
    ot: &mut S,
    domain: ShareDomain,
    spec: &ActSpec,
    server_shares: &[u64],
) -> Result<Vec<u64>, GcError>
where
    GcError: From<S::Error>,
{
    let g = ShareGarbler::offline(ch, ot.delta(), domain, spec, server_shares.len())?;
    g.online(ch, ot, server_shares)
}

/// Client side of one batched activation. Returns the client's new shares (f(x) + r).
pub fn evaluate_apply<C: Channel, R: CotReceiver<C>>(
    ch: &mut C,
    ot: &mut R,
    domain: ShareDomain,
    spec: &ActSpec,
    client_shares: &[u64],
) -> Result<Vec<u64>, GcError>
where
    GcError: From<R::Error>,
{
    let e = ShareEvaluator::offline(ch, domain, spec, client_shares.len())?;
    e.online(ch, ot, client_shares)
}

/// What the pair of new shares should reconstruct to: the plaintext circuit `act` (from
/// [`ActSpec::circuit`]) applied to the value x = s + c, embedded in the domain.
pub fn expected(domain: ShareDomain, spec: &ActSpec, act: &Circuit, s: u64, c: u64) -> u64 {
    let x = domain.lift(domain.add(s, c));
    domain.embed(crate::activation::eval_plain(act, spec, x))
}
