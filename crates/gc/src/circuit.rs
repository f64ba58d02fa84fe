//! A recorded circuit: [`Builder`] is a backend whose wires are indices; the resulting
//! [`Circuit`] replays into any backend (plaintext, counter, garbler, evaluator). Gadgets can also
//! run directly on a backend without recording (that is how very large circuits stream).
use crate::backend::{Backend, Bit};
use crate::counter::Counter;

/// One gate; its output wire is `n_inputs + position`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Gate {
    Xor(u32, u32),
    And(u32, u32),
    Not(u32),
    Const(bool),
}

/// Records gates. Wires `0..n_inputs` are the inputs.
#[derive(Debug)]
pub struct Builder {
    n_inputs: u32,
    gates: Vec<Gate>,
}

impl Builder {
    pub fn new(n_inputs: usize) -> Self {
        Builder { n_inputs: n_inputs as u32, gates: Vec::new() }
    }
    /// The input wires as bits.
    pub fn inputs(&self) -> Vec<Bit<u32>> {
        (0..self.n_inputs).map(Bit::Wire).collect()
    }
    fn push(&mut self, g: Gate) -> u32 {
        self.gates.push(g);
        self.n_inputs + self.gates.len() as u32 - 1
    }
    pub fn finish(self, outputs: Vec<Bit<u32>>) -> Circuit {
        let ands = self.gates.iter().filter(|g| matches!(g, Gate::And(..))).count() as u64;
        Circuit { n_inputs: self.n_inputs as usize, gates: self.gates, outputs, ands }
    }
}

impl Backend for Builder {
    type Wire = u32;
    fn xor(&mut self, a: &u32, b: &u32) -> u32 {
        self.push(Gate::Xor(*a, *b))
    }
    fn and(&mut self, a: &u32, b: &u32) -> u32 {
        self.push(Gate::And(*a, *b))
    }
    fn not(&mut self, a: &u32) -> u32 {
        self.push(Gate::Not(*a))
    }
    fn constant(&mut self, v: bool) -> u32 {
        self.push(Gate::Const(v))
    }
}

/// A recorded boolean circuit. Outputs may be public constants.
#[derive(Clone, Debug)]
pub struct Circuit {
    pub n_inputs: usize,
    pub gates: Vec<Gate>,
    pub outputs: Vec<Bit<u32>>,
    ands: u64,
}

/// Gate statistics of a circuit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Stats {
    pub ands: u64,
    pub xors: u64,
    pub nots: u64,
    pub and_depth: u32,
}

impl Circuit {
    /// Records `f` applied to `n_inputs` fresh input wires.
    pub fn build(n_inputs: usize, f: impl FnOnce(&mut Builder, &[Bit<u32>]) -> Vec<Bit<u32>>) -> Circuit {
        let mut b = Builder::new(n_inputs);
        let ins = b.inputs();
        let outs = f(&mut b, &ins);
        b.finish(outs).pruned()
    }

    pub fn n_outputs(&self) -> usize {
        self.outputs.len()
    }
    pub fn and_count(&self) -> u64 {
        self.ands
    }

    /// Removes gates no output depends on (renumbering wires).
    pub fn pruned(self) -> Circuit {
        let n_in = self.n_inputs;
        let mut live = vec![false; n_in + self.gates.len()];
        for o in &self.outputs {
            if let Bit::Wire(w) = o {
                live[*w as usize] = true;
            }
        }
        for (i, g) in self.gates.iter().enumerate().rev() {
            if !live[n_in + i] {
                continue;
            }
            match *g {
                Gate::Xor(a, b) | Gate::And(a, b) => {
                    live[a as usize] = true;
                    live[b as usize] = true;
                }
                Gate::Not(a) => live[a as usize] = true,
                Gate::Const(_) => {}
            }
        }
        let mut map = vec![u32::MAX; n_in + self.gates.len()];
        for (i, m) in map.iter_mut().enumerate().take(n_in) {
            *m = i as u32;
        }
        let mut gates = Vec::new();
        for (i, g) in self.gates.iter().enumerate() {
            if !live[n_in + i] {
                continue;
            }
            let r = |w: u32| map[w as usize];
            let ng = match *g {
                Gate::Xor(a, b) => Gate::Xor(r(a), r(b)),
                Gate::And(a, b) => Gate::And(r(a), r(b)),
                Gate::Not(a) => Gate::Not(r(a)),
                Gate::Const(v) => Gate::Const(v),
            };
            map[n_in + i] = (n_in + gates.len()) as u32;
            gates.push(ng);
        }
        let outputs = self
            .outputs
            .iter()
            .map(|o| match o {
                Bit::Wire(w) => Bit::Wire(map[*w as usize]),
                Bit::Const(v) => Bit::Const(*v),
            })
            .collect();
        let ands = gates.iter().filter(|g| matches!(g, Gate::And(..))).count() as u64;
        Circuit { n_inputs: n_in, gates, outputs, ands }
    }

    /// Replays the circuit into `b` on the given input wires. Panics if `inputs.len()` differs
    /// from `n_inputs` (a programming error, never peer-controlled).
    pub fn eval<B: Backend>(&self, b: &mut B, inputs: &[B::Wire]) -> Vec<Bit<B::Wire>> {
        assert_eq!(inputs.len(), self.n_inputs, "circuit input count");
        let mut w: Vec<B::Wire> = Vec::with_capacity(self.n_inputs + self.gates.len());
        w.extend_from_slice(inputs);
        for g in &self.gates {
            let o = match *g {
                Gate::Xor(x, y) => b.xor(&w[x as usize], &w[y as usize]),
                Gate::And(x, y) => b.and(&w[x as usize], &w[y as usize]),
                Gate::Not(x) => b.not(&w[x as usize]),
                Gate::Const(v) => b.constant(v),
            };
            w.push(o);
        }
        self.outputs
            .iter()
            .map(|o| match o {
                Bit::Wire(i) => Bit::Wire(w[*i as usize].clone()),
                Bit::Const(v) => Bit::Const(*v),
            })
            .collect()
    }

    /// Plaintext evaluation on bools.
    pub fn eval_plain(&self, inputs: &[bool]) -> Vec<bool> {
        let mut p = crate::plain::Plain;
        self.eval(&mut p, inputs)
            .into_iter()
            .map(|o| match o {
                Bit::Wire(v) | Bit::Const(v) => v,
            })
            .collect()
    }

    /// Bit-sliced plaintext evaluation: 64 instances per word.
    pub fn eval_sliced(&self, inputs: &[u64]) -> Vec<u64> {
        let mut p = crate::plain::BitSliced;
        self.eval(&mut p, inputs)
            .into_iter()
            .map(|o| match o {
                Bit::Wire(v) => v,
                Bit::Const(v) => {
                    if v {
                        u64::MAX
                    } else {
                        0
                    }
                }
            })
            .collect()
    }

    /// AND/XOR/NOT counts and AND depth (by replaying into the [`Counter`]).
    pub fn stats(&self) -> Stats {
        let mut c = Counter::new();
        let ins = vec![0u32; self.n_inputs];
        self.eval(&mut c, &ins);
        Stats { ands: c.ands, xors: c.xors, nots: c.nots, and_depth: c.max_depth }
    }
}
