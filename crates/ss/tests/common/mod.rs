#![allow(dead_code, clippy::unwrap_used)]
use secinfer_net::{simulate, Channel, Cost, DynChannel};
use secinfer_ss::ring::mask;
use secinfer_ss::{Ctx, Party};

/// A context for `party`: real OT extension by default; the insecure dealer only with the
/// `test-dealer` feature.
pub fn ctx(party: Party, ch: &mut DynChannel) -> Ctx {
    try_ctx(party, ch).expect("setup")
}

/// A party's context on any channel: the dealer's under `test-dealer`, else real OT setup.
pub fn try_ctx<C: Channel>(party: Party, ch: &mut C) -> secinfer_ss::Result<Ctx> {
    #[cfg(feature = "test-dealer")]
    {
        let _ = ch;
        Ok(Ctx::insecure_dealer(party))
    }
    #[cfg(not(feature = "test-dealer"))]
    {
        Ctx::setup(party, ch)
    }
}

pub struct Both<T> {
    pub client: T,
    pub server: T,
    pub client_cost: Cost,
    pub server_cost: Cost,
}

/// Runs `f` as both parties (setup first, then the online phase).
pub fn run2<T: Send>(f: impl Fn(&mut Ctx, &mut DynChannel) -> T + Sync) -> Both<T> {
    run2_on(ctx, f)
}

/// [`run2`] on real OT extension whatever the features: for blocks the dealer cannot serve
/// (vector OTs).
pub fn run2_real<T: Send>(f: impl Fn(&mut Ctx, &mut DynChannel) -> T + Sync) -> Both<T> {
    run2_on(|party, ch| Ctx::setup(party, ch).expect("setup"), f)
}

fn run2_on<T: Send>(
    make: fn(Party, &mut DynChannel) -> Ctx,
    f: impl Fn(&mut Ctx, &mut DynChannel) -> T + Sync,
) -> Both<T> {
    let fr = &f;
    let r = simulate(
        move |ch| {
            let mut c = make(Party::Client, ch);
            ch.set_phase(secinfer_net::Phase::Online);
            fr(&mut c, ch)
        },
        move |ch| {
            let mut c = make(Party::Server, ch);
            ch.set_phase(secinfer_net::Phase::Online);
            fr(&mut c, ch)
        },
    );
    Both {
        client: r.client.output,
        server: r.server.output,
        client_cost: r.client.cost,
        server_cost: r.server.cost,
    }
}

/// Deterministic xorshift for test inputs.
pub struct Rng(pub u64);
impl Rng {
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    pub fn bits(&mut self, bits: u32) -> u64 {
        self.next() & mask(bits)
    }
}

/// Splits x into (server share, client share).
pub fn split(x: &[u64], bits: u32, rng: &mut Rng) -> (Vec<u64>, Vec<u64>) {
    let m = mask(bits);
    let c: Vec<u64> = x.iter().map(|_| rng.bits(bits)).collect();
    let s = x
        .iter()
        .zip(&c)
        .map(|(a, b)| a.wrapping_sub(*b) & m)
        .collect();
    (s, c)
}

pub fn mine<'a, T>(ctx: &Ctx, server: &'a [T], client: &'a [T]) -> &'a [T] {
    if ctx.is_p0() {
        server
    } else {
        client
    }
}

pub fn add_shares(a: &[u64], b: &[u64], bits: u32) -> Vec<u64> {
    let m = mask(bits);
    a.iter()
        .zip(b)
        .map(|(x, y)| x.wrapping_add(*y) & m)
        .collect()
}
pub fn xor_shares(a: &[u8], b: &[u8]) -> Vec<u8> {
    a.iter().zip(b).map(|(x, y)| x ^ y).collect()
}
