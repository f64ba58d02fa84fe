//! The plaintext backend: one bool per wire. It runs the very circuit the encrypted backend
//! runs, so its outputs fix what a decryption must give.
use crate::backend::Backend;

/// Evaluates a circuit in the clear.
#[derive(Default, Debug, Clone, Copy)]
pub struct Plain;

impl Backend for Plain {
    type Wire = bool;
    fn xor(&mut self, a: &bool, b: &bool) -> bool {
        a ^ b
    }
    fn and(&mut self, a: &bool, b: &bool) -> bool {
        a & b
    }
    fn or(&mut self, a: &bool, b: &bool) -> bool {
        a | b
    }
    fn not(&mut self, a: &bool) -> bool {
        !a
    }
    fn mux(&mut self, s: &bool, t: &bool, f: &bool) -> bool {
        if *s {
            *t
        } else {
            *f
        }
    }
    fn constant(&mut self, v: bool) -> bool {
        v
    }
    fn fork(&self) -> Self {
        Plain
    }
    fn absorb(&mut self, _other: Self) {}
}
