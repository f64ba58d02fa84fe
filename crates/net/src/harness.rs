//! The two-party harness every protocol test and in-process benchmark uses: run the client and
//! server closures on the two ends of a channel and return both outputs and both costs.
use crate::channel::Channel;
use crate::error::Result;
use crate::mem::mem_pair;
use crate::meter::Cost;
use crate::shape::{shape_pair, Profile};
use crate::tcp::{tcp_loopback_pair, TcpOptions};
use std::str::FromStr;

/// Which transport an in-process run uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// In-memory queues.
    Mem,
    /// Real loopback TCP sockets, both ends in this process.
    Tcp,
}

impl FromStr for Transport {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "mem" => Ok(Transport::Mem),
            "tcp" => Ok(Transport::Tcp),
            other => Err(format!("unknown transport {other:?} (expected mem or tcp)")),
        }
    }
}

/// A boxed channel end, as handed to harness closures.
pub type DynChannel = Box<dyn Channel>;

/// One party's result from a harness run.
pub struct PartyRun<T> {
    pub output: T,
    pub cost: Cost,
}

/// Both parties' results.
pub struct TwoPartyRun<A, B> {
    pub client: PartyRun<A>,
    pub server: PartyRun<B>,
    /// Wall time of the whole run (both threads).
    pub wall_s: f64,
}

/// Makes a connected pair for `transport`, shaped by `profile`.
pub fn channel_pair(transport: Transport, profile: Profile) -> Result<(DynChannel, DynChannel)> {
    Ok(match (transport, profile.is_none()) {
        (Transport::Mem, true) => {
            let (a, b) = mem_pair();
            (Box::new(a), Box::new(b))
        }
        (Transport::Mem, false) => {
            let (a, b) = mem_pair();
            let (a, b) = shape_pair(a, b, profile);
            (Box::new(a), Box::new(b))
        }
        (Transport::Tcp, true) => {
            let (a, b) = tcp_loopback_pair(&TcpOptions::default())?;
            (Box::new(a), Box::new(b))
        }
        (Transport::Tcp, false) => {
            let (a, b) = tcp_loopback_pair(&TcpOptions::default())?;
            let (a, b) = shape_pair(a, b, profile);
            (Box::new(a), Box::new(b))
        }
    })
}

/// Runs `client` and `server` on two threads over a fresh pair and returns both results.
///
/// A panic in either closure is re-raised here after both threads have ended (the panicking
/// side's channel end is dropped, so the other side sees `Closed` rather than hanging).
pub fn run_two_party<A, B, FA, FB>(
    transport: Transport,
    profile: Profile,
    client: FA,
    server: FB,
) -> Result<TwoPartyRun<A, B>>
where
    A: Send,
    B: Send,
    FA: FnOnce(&mut DynChannel) -> A + Send,
    FB: FnOnce(&mut DynChannel) -> B + Send,
{
    let (mut c, mut s) = channel_pair(transport, profile)?;
    let start = std::time::Instant::now();
    let (cr, sr) = std::thread::scope(|scope| {
        let ch = scope.spawn(move || {
            let out = client(&mut c);
            let _ = c.flush();
            PartyRun {
                output: out,
                cost: c.cost(),
            }
        });
        let sh = scope.spawn(move || {
            let out = server(&mut s);
            let _ = s.flush();
            PartyRun {
                output: out,
                cost: s.cost(),
            }
        });
        (ch.join(), sh.join())
    });
    let wall_s = start.elapsed().as_secs_f64();
    let client = cr.unwrap_or_else(|p| std::panic::resume_unwind(p));
    let server = sr.unwrap_or_else(|p| std::panic::resume_unwind(p));
    Ok(TwoPartyRun {
        client,
        server,
        wall_s,
    })
}

/// Shorthand for the common test case: in-memory, unshaped.
pub fn simulate<A, B, FA, FB>(client: FA, server: FB) -> TwoPartyRun<A, B>
where
    A: Send,
    B: Send,
    FA: FnOnce(&mut DynChannel) -> A + Send,
    FB: FnOnce(&mut DynChannel) -> B + Send,
{
    match run_two_party(Transport::Mem, Profile::NONE, client, server) {
        Ok(r) => r,
        // An in-memory pair cannot fail to open.
        Err(e) => panic!("in-memory pair failed to open: {e}"),
    }
}
