//! The gate-counting backend: AND and XOR/NOT counts and the AND depth of every wire.
use crate::backend::Backend;

/// Counts gates; a wire is its AND depth (XOR and NOT are free in free-XOR garbling, so they
/// add no depth).
#[derive(Default, Debug, Clone)]
pub struct Counter {
    pub ands: u64,
    pub xors: u64,
    pub nots: u64,
    /// Largest AND depth of any wire produced so far.
    pub max_depth: u32,
}

impl Counter {
    pub fn new() -> Self {
        Self::default()
    }
    /// A fresh input wire (depth 0).
    pub fn input(&mut self) -> u32 {
        0
    }
}

impl Backend for Counter {
    type Wire = u32;
    fn xor(&mut self, a: &u32, b: &u32) -> u32 {
        self.xors += 1;
        (*a).max(*b)
    }
    fn and(&mut self, a: &u32, b: &u32) -> u32 {
        self.ands += 1;
        let d = (*a).max(*b) + 1;
        self.max_depth = self.max_depth.max(d);
        d
    }
    fn not(&mut self, a: &u32) -> u32 {
        self.nots += 1;
        *a
    }
    fn constant(&mut self, _v: bool) -> u32 {
        0
    }
}
