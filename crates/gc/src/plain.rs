//! Plaintext backends: [`Plain`] (one bool per wire) and [`BitSliced`] (64 independent
//! instances per `u64` wire, for exhaustive error scans of whole input ranges).
use crate::backend::Backend;

/// Evaluates a circuit in the clear.
#[derive(Default, Debug)]
pub struct Plain;

impl Backend for Plain {
    type Wire = bool;
    fn xor(&mut self, a: &bool, b: &bool) -> bool {
        a ^ b
    }
    fn and(&mut self, a: &bool, b: &bool) -> bool {
        a & b
    }
    fn not(&mut self, a: &bool) -> bool {
        !a
    }
    fn constant(&mut self, v: bool) -> bool {
        v
    }
}

/// 64 plaintext instances per wire (bit j of every wire belongs to instance j).
#[derive(Default, Debug)]
pub struct BitSliced;

impl Backend for BitSliced {
    type Wire = u64;
    fn xor(&mut self, a: &u64, b: &u64) -> u64 {
        a ^ b
    }
    fn and(&mut self, a: &u64, b: &u64) -> u64 {
        a & b
    }
    fn not(&mut self, a: &u64) -> u64 {
        !a
    }
    fn constant(&mut self, v: bool) -> u64 {
        if v {
            u64::MAX
        } else {
            0
        }
    }
}
