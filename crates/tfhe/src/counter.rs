//! The counting backend: gates by kind, bootstraps, and the bootstrap depth of every wire,
//! plus SHE's operation counts (Table 4's CCAdd, PCShift, CCCom).
use serde::Serialize;

use crate::backend::{Backend, Op};

/// Tallies of one circuit run. A wire is its bootstrap depth: every two-input gate and the mux
/// bootstrap once on the critical path (the mux's two bootstraps run side by side); NOT is free.
#[derive(Default, Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Counter {
    pub xor: u64,
    pub and: u64,
    pub or: u64,
    pub mux: u64,
    /// Largest bootstrap depth of any wire produced so far.
    pub depth: u32,
    pub cc_add: u64,
    pub pc_shift: u64,
    pub cc_com: u64,
    pub cc_mult: u64,
}

impl Counter {
    pub fn new() -> Self {
        Self::default()
    }
    /// Gate operations (SHE's HGOPs): every bootstrapped gate, the mux counted once.
    pub fn gates(&self) -> u64 {
        self.xor + self.and + self.or + self.mux
    }
    /// Programmable bootstraps the encrypted backend runs (a tfhe-rs mux is two).
    pub fn pbs(&self) -> u64 {
        self.xor + self.and + self.or + 2 * self.mux
    }
    fn gate(&mut self, d: u32) -> u32 {
        let d = d + 1;
        self.depth = self.depth.max(d);
        d
    }
}

impl Backend for Counter {
    type Wire = u32;
    fn xor(&mut self, a: &u32, b: &u32) -> u32 {
        self.xor += 1;
        self.gate((*a).max(*b))
    }
    fn and(&mut self, a: &u32, b: &u32) -> u32 {
        self.and += 1;
        self.gate((*a).max(*b))
    }
    fn or(&mut self, a: &u32, b: &u32) -> u32 {
        self.or += 1;
        self.gate((*a).max(*b))
    }
    fn not(&mut self, a: &u32) -> u32 {
        *a
    }
    fn mux(&mut self, s: &u32, t: &u32, f: &u32) -> u32 {
        self.mux += 1;
        self.gate((*s).max(*t).max(*f))
    }
    fn constant(&mut self, _v: bool) -> u32 {
        0
    }
    /// A fork starts from zero tallies so [`Backend::absorb`] can add without double counting.
    fn fork(&self) -> Self {
        Counter::default()
    }
    fn absorb(&mut self, o: Self) {
        self.xor += o.xor;
        self.and += o.and;
        self.or += o.or;
        self.mux += o.mux;
        self.depth = self.depth.max(o.depth);
        self.cc_add += o.cc_add;
        self.pc_shift += o.pc_shift;
        self.cc_com += o.cc_com;
        self.cc_mult += o.cc_mult;
    }
    fn note(&mut self, op: Op, times: u64) {
        match op {
            Op::CcAdd => self.cc_add += times,
            Op::PcShift => self.pc_shift += times,
            Op::CcCom => self.cc_com += times,
            Op::CcMult => self.cc_mult += times,
        }
    }
}
