//! Products of a server matrix M with client vectors on Z_{2^l} shares (l ≤ 32) by
//! coefficient-encoded HE on masks: Cheetah's `HomMatMul` (Huang et al. 2022,
//! `secinfer_he::kernels::coeff`, t = 2^32) moved offline the way CryptoGRU feeds its products.
//!
//! Offline, the client draws a uniform mask ρ ∈ Z_{2^l}^cols for every vector the online
//! phase will multiply, uploads the masks encrypted (all of a job's masks batched into
//! `coeff::Layout::batched` groups), and the server answers Enc(M·ρ − r) with a fresh r
//! (flooded, ≥ 40 bits): the client's share of M·ρ is the decryption, the server's is r. Both
//! reduce mod 2^l, which 2^32 is a multiple of, so the shares of M·ρ mod 2^32 are shares mod
//! 2^l. Online, a product of M with a shared vector v = v_s + v_c costs one client flight of
//! l bits per entry and no answer: the client sends d = v_c − ρ (uniform: ρ pads it), the server
//! takes M·(v_s + d) + r, the client keeps its share of M·ρ; the two add to M·v mod 2^l.
//!
//! A product against a vector the client owns outright (FastGRNN's inputs) is the same with
//! v_s = 0: the client sends its sign-extended vector minus ρ.
use crate::error::{NnError, Result};
use rayon::prelude::*;
use secinfer_he::kernels::coeff::{self, client_share, server_product, Layout};
use secinfer_he::{Params, PublicKey, SecretKey, SeededCiphertext};
use secinfer_net::Channel;
use secinfer_ot::{pack_words, packed_len, unpack_words};
use secinfer_ss::ring::mask;
use secinfer_ss::{Ctx, SsError};

/// The BFV parameter set of the products: n = 8192, t = 2^32 (coefficient encoding).
pub const HE_PARAMS: &str = "n8192-z2k32";

/// How the products with the server's matrices are computed (`--products`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Products {
    /// SIRNN's OT products (`secinfer_ss::matmul`), all online.
    Ot,
    /// Cheetah's coefficient-encoded HE on masks offline, one masked flight online
    /// (this module).
    #[default]
    He,
}

impl Products {
    pub fn parse(s: &str) -> Option<Products> {
        match s {
            "ot" => Some(Products::Ot),
            "he" => Some(Products::He),
            _ => None,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Products::Ot => "ot",
            Products::He => "he",
        }
    }
}

/// One matrix's products: M is rows × cols, `count` vectors over Z_{2^bits}.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct MatJob {
    pub rows: usize,
    pub cols: usize,
    pub count: usize,
    pub bits: u32,
}

impl MatJob {
    fn layout(&self, params: &Params) -> Result<Layout> {
        Ok(Layout::batched(
            self.rows,
            self.cols,
            params.n(),
            self.count,
            coeff::upload_len(params),
            |k| coeff::response_bytes(params, k),
        )?)
    }
}

/// One party's offline result for one job: the client's masks (count × cols) and this party's
/// shares of M·ρ (count × rows), all mod 2^bits. Secret: no `Debug`.
pub(crate) struct Masked {
    job: MatJob,
    masks: Vec<u64>,
    shares: Vec<u64>,
}

impl Masked {
    /// The shape alone, for a dry run (which never reads masks or shares).
    pub(crate) fn dry(job: MatJob) -> Masked {
        Masked {
            job,
            masks: Vec::new(),
            shares: Vec::new(),
        }
    }
}

/// This party's key material: the client's secret key or the server's copy of its public key.
pub(crate) enum HeKeys {
    Client(SecretKey),
    Server(Params, PublicKey),
}

/// Setup: the client makes a fresh key pair and sends the public key; the server reads it
/// (an exact length, checked by the decoder).
pub(crate) fn setup<C: Channel>(ch: &mut C, client: bool) -> Result<HeKeys> {
    let params = Params::by_name(HE_PARAMS)?;
    if client {
        let sk = SecretKey::generate(&params);
        ch.send_frame_vec(sk.public_key().to_bytes())?;
        ch.flush()?;
        Ok(HeKeys::Client(sk))
    } else {
        let len = 32 + params.residue_bytes() * params.n() * params.set().q.len();
        let pk = PublicKey::from_bytes(&params, &ch.recv_bytes(len)?)?;
        Ok(HeKeys::Server(params, pk))
    }
}

/// Offline: the products on every job's masks. The server passes each job's matrix (signed,
/// row-major), the client empty slices. Uploads first, all of them, then the answers, so the
/// whole exchange is two flights.
pub(crate) fn offline<C: Channel>(
    ch: &mut C,
    keys: &HeKeys,
    jobs: &[(MatJob, &[i64])],
) -> Result<Vec<Masked>> {
    for (job, _) in jobs {
        if job.bits > coeff::T_BITS || job.bits == 0 || job.count == 0 {
            return Err(NnError::config(format!(
                "HE products work in at most {}-bit rings, with at least one vector: {job:?}",
                coeff::T_BITS
            )));
        }
    }
    match keys {
        HeKeys::Client(sk) => client_offline(ch, sk, jobs),
        HeKeys::Server(params, pk) => server_offline(ch, params, pk, jobs),
    }
}

fn client_offline<C: Channel>(
    ch: &mut C,
    sk: &SecretKey,
    jobs: &[(MatJob, &[i64])],
) -> Result<Vec<Masked>> {
    let params = sk.params();
    let mut prg = secinfer_core::Prg::new();
    let mut out = Vec::with_capacity(jobs.len());
    let mut lays = Vec::with_capacity(jobs.len());
    for (job, _) in jobs {
        let lay = job.layout(params)?;
        let m = mask(job.bits);
        let masks: Vec<u64> = (0..job.count * job.cols)
            .map(|_| prg.next_block().low_u64() & m)
            .collect();
        let polys: Vec<Vec<u64>> = masks
            .chunks(job.cols * lay.group)
            .flat_map(|g| {
                let refs: Vec<&[u64]> = g.chunks(job.cols).collect();
                lay.input_polys(&refs)
            })
            .collect();
        // Independent encryptions: spread them over the pool.
        let uploads: Vec<Vec<u8>> = polys
            .par_iter()
            .map(|p| sk.encrypt_poly_seeded(p).map(|c| c.to_bytes()))
            .collect::<std::result::Result<_, _>>()?;
        for u in uploads {
            ch.send_frame_vec(u)?;
        }
        lays.push(lay);
        out.push(Masked {
            job: *job,
            masks,
            shares: Vec::new(),
        });
    }
    ch.flush()?;
    for (lay, o) in lays.iter().zip(&mut out) {
        let job = o.job;
        let mut shares = Vec::with_capacity(lay.groups(job.count) * lay.group * job.rows);
        for _ in 0..lay.groups(job.count) {
            let r: Vec<Vec<u8>> = (0..lay.blocks)
                .map(|b| ch.recv_bytes(coeff::response_len(params, lay, b)))
                .collect::<std::result::Result<_, _>>()?;
            shares.extend(client_share(sk, lay, &r)?);
        }
        // The last group's unused vectors decrypt to noise-free garbage: drop them.
        shares.truncate(job.count * job.rows);
        let m = mask(job.bits);
        o.shares = shares.into_iter().map(|v| v & m).collect();
    }
    Ok(out)
}

fn server_offline<C: Channel>(
    ch: &mut C,
    params: &Params,
    pk: &PublicKey,
    jobs: &[(MatJob, &[i64])],
) -> Result<Vec<Masked>> {
    let up = coeff::upload_len(params);
    let mut work = Vec::with_capacity(jobs.len());
    for (job, _) in jobs {
        let lay = job.layout(params)?;
        let groups: Vec<Vec<Vec<u8>>> = (0..lay.groups(job.count))
            .map(|_| (0..lay.chunks).map(|_| ch.recv_bytes(up)).collect())
            .collect::<std::result::Result<_, _>>()?;
        work.push((lay, groups));
    }
    let mut out = Vec::with_capacity(jobs.len());
    for ((job, w), (lay, groups)) in jobs.iter().zip(work) {
        let pts = lay.weight_plaintexts(params, w)?;
        let mut shares = Vec::with_capacity(groups.len() * lay.group * job.rows);
        for g in groups {
            let cts = g
                .iter()
                .map(|b| SeededCiphertext::from_bytes(params, b).map(|c| c.expand(params)))
                .collect::<std::result::Result<Vec<_>, _>>()?;
            let (resp, r, _stat) = server_product(params, pk, &lay, &pts, &cts)?;
            for b in resp {
                ch.send_frame_vec(b)?;
            }
            shares.extend(r);
        }
        shares.truncate(job.count * job.rows);
        let m = mask(job.bits);
        out.push(Masked {
            job: *job,
            masks: Vec::new(),
            shares: shares.into_iter().map(|v| v & m).collect(),
        });
    }
    ch.flush()?;
    Ok(out)
}

/// Online: shares (k × rows) of M·v for the job's vectors `at..at + k`, v shared as `own`
/// (k × cols, this party's share mod 2^bits; empty at a server whose share is zero). The
/// server passes M (rows × cols, mod 2^bits, row-major), the client an empty slice. One client
/// flight; a dry run sends nothing and returns zeros.
pub(crate) fn masked_product<C: Channel>(
    ctx: &mut Ctx,
    ch: &mut C,
    he: &Masked,
    m: &[u64],
    own: &[u64],
    at: usize,
    k: usize,
) -> secinfer_ss::Result<Vec<u64>> {
    let MatJob {
        rows, cols, bits, ..
    } = he.job;
    if ctx.is_dry_run() {
        return Ok(vec![0; k * rows]);
    }
    let bad = |s: &str| SsError::InvalidArgument(format!("masked product: {s}"));
    if at + k > he.job.count {
        return Err(bad("more vectors than the offline phase prepared"));
    }
    let mb = mask(bits);
    let shares = he.shares[at * rows..(at + k) * rows].to_vec();
    let p0 = ctx.is_p0();
    ctx.outside_block(ch, "he_matvec", |ch| {
        if !p0 {
            if own.len() != k * cols {
                return Err(bad("the client's vectors have the wrong size"));
            }
            let d: Vec<u64> = own
                .iter()
                .zip(&he.masks[at * cols..(at + k) * cols])
                .map(|(v, r)| v.wrapping_sub(*r) & mb)
                .collect();
            ch.send_frame_vec(pack_words(&d, bits)?)?;
            return Ok(shares);
        }
        if m.len() != rows * cols || !(own.is_empty() || own.len() == k * cols) {
            return Err(bad("the server's matrix or share has the wrong size"));
        }
        let d = unpack_words(&ch.recv_bytes(packed_len(k * cols, bits))?, k * cols, bits)?;
        Ok((0..k * rows)
            .map(|o| {
                let (u, i) = (o / rows, o % rows);
                let row = &m[i * cols..(i + 1) * cols];
                let v = &d[u * cols..(u + 1) * cols];
                let acc = row.iter().enumerate().fold(shares[o], |a, (j, &mij)| {
                    let s = own.get(u * cols + j).copied().unwrap_or(0);
                    a.wrapping_add(mij.wrapping_mul(v[j].wrapping_add(s)))
                });
                acc & mb
            })
            .collect())
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use secinfer_net::simulate;
    use secinfer_ss::ring::from_signed;
    use secinfer_ss::Party;

    fn xorshift(seed: u64) -> impl FnMut() -> u64 {
        let mut s = seed | 1;
        move || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        }
    }

    /// The shares of every masked product add up to M·(v_client + v_server) mod 2^bits, for
    /// rings of 25, 27 and 32 bits, several vectors per job taken one and two at a time, signed
    /// weights at both ends of 16 bits; asking for a vector the offline phase did not prepare is
    /// a typed error, and a dry run sends nothing.
    #[test]
    fn masked_products_equal_the_matrix_product() {
        let mut r = xorshift(0x2024);
        for (rows, cols, count, bits) in [(7, 5, 4, 25), (12, 12, 2, 32), (3, 20, 2, 27)] {
            let mb = mask(bits);
            let w: Vec<i64> = (0..rows * cols)
                .map(|k| match k % 7 {
                    0 => -(1 << 15),
                    1 => (1 << 15) - 1,
                    _ => (r() % (1 << 16)) as i64 - (1 << 15),
                })
                .collect();
            let vc: Vec<u64> = (0..count * cols).map(|_| r() & mb).collect();
            let vs: Vec<u64> = (0..count * cols).map(|_| r() & mb).collect();
            let job = MatJob {
                rows,
                cols,
                count,
                bits,
            };
            let run = |party: Party| {
                let (w, v) = match party {
                    Party::Server => (&w[..], &vs),
                    Party::Client => (&[][..], &vc),
                };
                move |ch: &mut secinfer_net::DynChannel| {
                    let mut ctx = Ctx::setup(party, ch).unwrap();
                    let keys = setup(ch, party == Party::Client).unwrap();
                    let done = offline(ch, &keys, &[(job, w)]).unwrap();
                    let m: Vec<u64> = w.iter().map(|a| from_signed(*a, bits)).collect();
                    let mut out = Vec::new();
                    let mut at = 0;
                    while at < count {
                        let k = if at == 0 { 1 } else { (count - at).min(2) };
                        let own = &v[at * cols..(at + k) * cols];
                        out.extend(masked_product(&mut ctx, ch, &done[0], &m, own, at, k).unwrap());
                        at += k;
                    }
                    let e = masked_product(&mut ctx, ch, &done[0], &m, &v[..cols], count, 1);
                    assert_eq!(
                        e.err().unwrap().kind(),
                        secinfer_ss::ErrorKind::InvalidArgument
                    );
                    out
                }
            };
            let res = simulate(run(Party::Client), run(Party::Server));
            for u in 0..count {
                for i in 0..rows {
                    let want = (0..cols).fold(0u64, |a, j| {
                        let v = vc[u * cols + j].wrapping_add(vs[u * cols + j]);
                        a.wrapping_add((w[i * cols + j] as u64).wrapping_mul(v))
                    }) & mb;
                    let o = u * rows + i;
                    let got = res.client.output[o].wrapping_add(res.server.output[o]) & mb;
                    assert_eq!(got, want, "{job:?} vector {u} row {i}");
                }
            }
        }
        let mut ctx = Ctx::dry_run(Party::Client);
        let mut ch = secinfer_ss::DryChannel::new();
        let job = MatJob {
            rows: 3,
            cols: 2,
            count: 1,
            bits: 25,
        };
        let z = masked_product(&mut ctx, &mut ch, &Masked::dry(job), &[], &[1, 2], 0, 1).unwrap();
        assert_eq!(z, vec![0; 3]);
        assert_eq!(ch.meter().snapshot().total().bytes(), 0);
    }
}
