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
        Builder {
            n_inputs: n_inputs as u32,
            gates: Vec::new(),
        }
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
        Circuit::new(self.n_inputs as usize, self.gates, outputs)
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
    /// Register-allocated schedule: wires live in `n_slots` reusable slots, so replaying a large
    /// circuit touches a small working set (the garbler's wires are `LANES` blocks each).
    sched: Vec<Op>,
    out_slots: Vec<Bit<u32>>,
    n_slots: usize,
}

#[derive(Clone, Copy, Debug)]
struct Op {
    gate: Gate,
    out: u32,
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
    pub fn build(
        n_inputs: usize,
        f: impl FnOnce(&mut Builder, &[Bit<u32>]) -> Vec<Bit<u32>>,
    ) -> Circuit {
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
        Circuit::new(n_in, gates, outputs)
    }

    fn new(n_inputs: usize, gates: Vec<Gate>, outputs: Vec<Bit<u32>>) -> Circuit {
        let ands = gates.iter().filter(|g| matches!(g, Gate::And(..))).count() as u64;
        // liveness: last gate reading each wire (outputs live to the end)
        let nw = n_inputs + gates.len();
        let mut last = vec![0usize; nw];
        let mut read = vec![false; nw];
        for (i, g) in gates.iter().enumerate() {
            match *g {
                Gate::Xor(a, b) | Gate::And(a, b) => {
                    last[a as usize] = i;
                    last[b as usize] = i;
                    read[a as usize] = true;
                    read[b as usize] = true;
                }
                Gate::Not(a) => {
                    last[a as usize] = i;
                    read[a as usize] = true;
                }
                Gate::Const(_) => {}
            }
        }
        let mut is_out = vec![false; nw];
        for o in &outputs {
            if let Bit::Wire(w) = o {
                is_out[*w as usize] = true;
            }
        }
        let mut slot = vec![u32::MAX; nw];
        let mut free: Vec<u32> = Vec::new();
        let mut n_slots = n_inputs as u32;
        for (w, s) in slot.iter_mut().enumerate().take(n_inputs) {
            *s = w as u32;
        }
        let mut sched = Vec::with_capacity(gates.len());
        for (i, g) in gates.iter().enumerate() {
            let r = |w: u32| slot[w as usize];
            let mapped = match *g {
                Gate::Xor(a, b) => Gate::Xor(r(a), r(b)),
                Gate::And(a, b) => Gate::And(r(a), r(b)),
                Gate::Not(a) => Gate::Not(r(a)),
                Gate::Const(v) => Gate::Const(v),
            };
            let mut release = |w: u32, free: &mut Vec<u32>| {
                let w = w as usize;
                if last[w] == i && !is_out[w] && slot[w] != u32::MAX {
                    free.push(slot[w]);
                    slot[w] = u32::MAX;
                }
            };
            match *g {
                Gate::Xor(a, b) | Gate::And(a, b) => {
                    release(a, &mut free);
                    if b != a {
                        release(b, &mut free);
                    }
                }
                Gate::Not(a) => release(a, &mut free),
                Gate::Const(_) => {}
            }
            let w = n_inputs + i;
            let out = if !read[w] && !is_out[w] {
                // dead value (pruned circuits have none); write to a scratch slot
                free.last().copied().unwrap_or_else(|| {
                    n_slots += 1;
                    free.push(n_slots - 1);
                    n_slots - 1
                })
            } else {
                free.pop().unwrap_or_else(|| {
                    n_slots += 1;
                    n_slots - 1
                })
            };
            if read[w] || is_out[w] {
                slot[w] = out;
            }
            sched.push(Op { gate: mapped, out });
        }
        let out_slots = outputs
            .iter()
            .map(|o| match o {
                Bit::Wire(w) => Bit::Wire(slot[*w as usize]),
                Bit::Const(v) => Bit::Const(*v),
            })
            .collect();
        Circuit {
            n_inputs,
            gates,
            outputs,
            ands,
            sched,
            out_slots,
            n_slots: n_slots as usize,
        }
    }

    /// Wire slots a replay needs (the most wires live at once, plus inputs).
    pub fn n_slots(&self) -> usize {
        self.n_slots
    }

    /// Replays the circuit into `b` on the given input wires. Panics if `inputs.len()` differs
    /// from `n_inputs` (a programming error, never peer-controlled).
    pub fn eval<B: Backend>(&self, b: &mut B, inputs: &[B::Wire]) -> Vec<Bit<B::Wire>> {
        assert_eq!(inputs.len(), self.n_inputs, "circuit input count");
        let fill = match inputs.first() {
            Some(x) => x.clone(),
            None => b.constant(false),
        };
        let mut w: Vec<B::Wire> = vec![fill; self.n_slots.max(1)];
        w[..inputs.len()].clone_from_slice(inputs);
        for op in &self.sched {
            let o = match op.gate {
                Gate::Xor(x, y) => {
                    b.xor_slots(&mut w, x as usize, y as usize, op.out as usize);
                    continue;
                }
                Gate::And(x, y) => {
                    b.and_slots(&mut w, x as usize, y as usize, op.out as usize);
                    continue;
                }
                Gate::Not(x) => b.not(&w[x as usize]),
                Gate::Const(v) => b.constant(v),
            };
            w[op.out as usize] = o;
        }
        self.out_slots
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
        Stats {
            ands: c.ands,
            xors: c.xors,
            nots: c.nots,
            and_depth: c.max_depth,
        }
    }
}
