//! Input sharing and output reveal.
use crate::ctx::{Ctx, Party};
use crate::error::{Result, SsError};
use crate::ring::{check_bits, mask};
use secinfer_net::Channel;

/// Who learns a revealed value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RevealTo {
    Both,
    Only(Party),
}

fn check_range(v: &[u64], bits: u32) -> Result<()> {
    let m = mask(bits);
    if v.iter().any(|x| x & !m != 0) {
        return Err(SsError::Malformed(format!(
            "peer share exceeds {bits} bits"
        )));
    }
    Ok(())
}

/// Reveals shares mod 2^bits. Returns `Some(values)` to each party that learns them.
pub fn reveal<C: Channel>(
    ctx: &mut Ctx,
    ch: &mut C,
    x: &[u64],
    bits: u32,
    to: RevealTo,
) -> Result<Option<Vec<u64>>> {
    check_bits(bits)?;
    let m = mask(bits);
    let mine: Vec<u64> = x.iter().map(|a| a & m).collect();
    let (send, recv) = match to {
        RevealTo::Both => (true, true),
        RevealTo::Only(p) => (p != ctx.party, p == ctx.party),
    };
    // Both-way reveal: P0 sends first, so the exchange is one round trip on a blocking channel.
    let mut other = None;
    if ctx.is_p0() {
        if send {
            ch.send_pod(&mine)?;
        }
        if recv {
            other = Some(ch.recv_pod::<u64>(x.len())?);
        }
    } else {
        if recv {
            other = Some(ch.recv_pod::<u64>(x.len())?);
        }
        if send {
            ch.send_pod(&mine)?;
        }
    }
    ch.flush()?;
    match other {
        None => Ok(None),
        Some(o) => {
            check_range(&o, bits)?;
            Ok(Some(
                mine.iter()
                    .zip(&o)
                    .map(|(a, b)| a.wrapping_add(*b) & m)
                    .collect(),
            ))
        }
    }
}

/// The owner of plaintext ring values secret-shares them: it keeps x − r and sends r. The other
/// party passes `None` and the element count.
pub fn share_input<C: Channel>(
    ctx: &mut Ctx,
    ch: &mut C,
    owner: Party,
    x: Option<&[u64]>,
    n: usize,
    bits: u32,
) -> Result<Vec<u64>> {
    check_bits(bits)?;
    let m = mask(bits);
    if ctx.party == owner {
        let x =
            x.ok_or_else(|| SsError::InvalidArgument("the owner must pass its input".into()))?;
        if x.len() != n {
            return Err(SsError::InvalidArgument(
                "input length differs from n".into(),
            ));
        }
        let r = ctx.rand_u64s(n, bits);
        ch.send_pod(&r)?;
        ch.flush()?;
        Ok(x.iter()
            .zip(&r)
            .map(|(a, b)| a.wrapping_sub(*b) & m)
            .collect())
    } else {
        let r: Vec<u64> = ch.recv_pod(n)?;
        check_range(&r, bits)?;
        Ok(r)
    }
}
