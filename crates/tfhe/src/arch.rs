//! The architectures SHE reports (Table 3), with seeded random power-of-two weights for gate
//! counting: the MNIST network (C-B-A-P-C-P-F-B-A-F, CryptoNets' topology), the scikit-learn
//! digits MLP 64-128-128-10, and the Penn Treebank ReLU-LSTM (one layer of 300 units, 25 steps).
//! Counts depend on the weights only through pruned (zero) weights and shift amounts, so random
//! dense weights give the unpruned network's cost.
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;

use crate::backend::{Backend, Bit, Word};
use crate::counter::Counter;
use crate::int;
use crate::network::{par_map, ConvGeom, InputFormat, Layer, Network, Pow2Linear, Shape};
use crate::Error;

/// Activation and input width (SHE quantises inputs and activations to 5 bits).
pub const ACT_BITS: u32 = 5;

/// Random weights: signs ±1, exponents in [-7, -1] (|w| ≤ 1/2), entering the accumulator with
/// 3 fraction bits (shifts -4..2).
pub fn random_linear(
    rng: &mut ChaCha20Rng,
    name: &str,
    outputs: usize,
    fan_in: usize,
) -> Pow2Linear {
    let n = outputs * fan_in;
    Pow2Linear {
        name: name.to_string(),
        outputs,
        fan_in,
        sign: (0..n)
            .map(|_| if rng.gen::<bool>() { 1 } else { -1 })
            .collect(),
        exp: (0..n).map(|_| rng.gen_range(-7..=-1)).collect(),
        bias: (0..outputs).map(|_| rng.gen_range(-64..=64)).collect(),
        offset: 3,
    }
}

fn relu_requant() -> Layer {
    Layer::Requant {
        shift: 3,
        bits: ACT_BITS,
        relu: true,
    }
}

/// SHE's MNIST network (Table 3, CryptoNets' layers before their collapse): conv 5×5 stride 2
/// to 5×13×13, BatchNorm (folded into the conv), ReLU, max-pool 3×3 stride 1, conv 5×5 stride 2
/// to 50×5×5, max-pool 3×3 stride 1, dense 1250→100, BatchNorm (folded), ReLU, dense 100→10.
/// The conv before the second pool has no activation; its sums are requantised to signed 5-bit
/// values before pooling (a rescale, no comparison).
pub fn she_mnist(seed: u64) -> Result<Network, Error> {
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let input = InputFormat {
        shape: Shape { c: 1, h: 28, w: 28 },
        bits: ACT_BITS,
        signed: false,
    };
    let c1 = ConvGeom {
        in_ch: 1,
        out_ch: 5,
        kernel: 5,
        stride: 2,
        padding: 1,
    };
    let c2 = ConvGeom {
        in_ch: 5,
        out_ch: 50,
        kernel: 5,
        stride: 2,
        padding: 0,
    };
    Network::new(
        input,
        vec![
            Layer::Conv2d(random_linear(&mut rng, "conv1", 5, 25), c1),
            relu_requant(),
            Layer::MaxPool {
                kernel: 3,
                stride: 1,
                padding: 1,
            },
            Layer::Conv2d(random_linear(&mut rng, "conv2", 50, 125), c2),
            Layer::Requant {
                shift: 3,
                bits: ACT_BITS,
                relu: false,
            },
            Layer::MaxPool {
                kernel: 3,
                stride: 1,
                padding: 1,
            },
            Layer::Flatten,
            Layer::Dense(random_linear(&mut rng, "fc1", 100, 1250)),
            relu_requant(),
            Layer::Dense(random_linear(&mut rng, "fc2", 10, 100)),
        ],
    )
}

/// The digits MLP 64-128-128-10 (the network Concrete ML runs on scikit-learn's 8×8 digits)
/// with random dense weights: the unpruned cost of the trained model's architecture.
pub fn digits_mlp_random(seed: u64) -> Result<Network, Error> {
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let input = InputFormat {
        shape: Shape::flat(64),
        bits: ACT_BITS,
        signed: false,
    };
    Network::new(
        input,
        vec![
            Layer::Dense(random_linear(&mut rng, "fc1", 128, 64)),
            relu_requant(),
            Layer::Dense(random_linear(&mut rng, "fc2", 128, 128)),
            relu_requant(),
            Layer::Dense(random_linear(&mut rng, "fc3", 10, 128)),
        ],
    )
}

/// One step of SHE's ReLU-LSTM (every gate activation a ReLU, after the LSTM of its ref. [23]):
/// z = W·[x; h] + b for the four gates, i, f, o, g = ReLU to 5 bits, c' = (f·c + i·g) / 2^5
/// saturated to `C_BITS` signed bits, h' = ReLU(o · ReLU(c') / 2^5) to 5 bits.
pub struct LstmCell {
    pub units: usize,
    pub inputs: usize,
    /// 4·units outputs over inputs + units (gate order i, f, o, g).
    pub gates: Pow2Linear,
}

/// The cell's outputs (h, c), one word per unit.
pub type State<W> = (Vec<Word<W>>, Vec<Word<W>>);

/// Width of the LSTM cell state.
pub const C_BITS: u32 = 8;
const PRODUCT_SHIFT: u32 = 5;

impl LstmCell {
    pub fn random(seed: u64, units: usize, inputs: usize) -> Self {
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        Self {
            units,
            inputs,
            gates: random_linear(&mut rng, "lstm", 4 * units, inputs + units),
        }
    }

    /// One time step on a backend: x (5-bit signed), h (5-bit ReLU outputs), c (`C_BITS` signed).
    pub fn step<B: Backend + Sync>(
        &self,
        b: &mut B,
        x: &[Word<B::Wire>],
        h: &[Word<B::Wire>],
        c: &[Word<B::Wire>],
    ) -> State<B::Wire> {
        let xh: Vec<Word<B::Wire>> = x.iter().chain(h).cloned().collect();
        let g = &self.gates;
        let fan = g.fan_in;
        let acts = par_map(b, 4 * self.units, |b, o| {
            let mut carries = 0;
            let mut terms = Vec::with_capacity(fan);
            let row = o * fan..(o + 1) * fan;
            for ((xi, s), e) in xh.iter().zip(&g.sign[row.clone()]).zip(&g.exp[row]) {
                if *s != 0 {
                    let (t, k) = int::pow2_term(b, xi, i32::from(*e) + g.offset, *s < 0);
                    carries += k;
                    terms.push(t);
                }
            }
            terms.sort_by_key(Vec::len);
            let (sum, _) = int::adder_tree(b, terms);
            let z = int::add_const(b, &sum, g.bias[o] + carries);
            int::requantize(b, &z, 3, ACT_BITS as usize, true)
        });
        let units = self.units;
        let next = par_map(b, units, |b, u| {
            let [ig, fg, og, gg] = [0, 1, 2, 3].map(|k| &acts[k * units + u]);
            let fc = int::mul(b, fg, &c[u]);
            let ig_g = int::mul(b, ig, gg);
            let s = int::add(b, &fc, &ig_g);
            let cn = int::requantize(b, &s, PRODUCT_SHIFT, C_BITS as usize, false);
            let rc = int::relu(b, &cn);
            let oh = int::mul(b, og, &rc);
            (
                int::requantize(b, &oh, PRODUCT_SHIFT, ACT_BITS as usize, true),
                cn,
            )
        });
        next.into_iter().unzip()
    }

    /// Counts `steps` time steps of the cell on fresh encrypted inputs each step (as the
    /// client's embedded tokens arrive), with h and c carried between steps.
    pub fn count(&self, steps: usize) -> Counter {
        let mut b = Counter::new();
        let word = |w: u32| -> Word<u32> { (0..w).map(|_| Bit::Wire(0)).collect() };
        let mut h: Vec<Word<u32>> = (0..self.units).map(|_| vec![Bit::ZERO]).collect();
        let mut c: Vec<Word<u32>> = (0..self.units).map(|_| vec![Bit::ZERO]).collect();
        for _ in 0..steps {
            let x: Vec<Word<u32>> = (0..self.inputs).map(|_| word(ACT_BITS)).collect();
            (h, c) = self.step(&mut b, &x, &h, &c);
        }
        b
    }
}

/// The i64 reference of [`LstmCell::step`].
pub fn lstm_reference(cell: &LstmCell, x: &[i64], h: &[i64], c: &[i64]) -> (Vec<i64>, Vec<i64>) {
    use crate::network::{requant_value, shift_value};
    let xh: Vec<i64> = x.iter().chain(h).copied().collect();
    let g = &cell.gates;
    let act = |o: usize| {
        let mut acc = g.bias[o];
        for (i, v) in xh.iter().enumerate() {
            let j = o * g.fan_in + i;
            acc += i64::from(g.sign[j]) * shift_value(*v, i32::from(g.exp[j]) + g.offset);
        }
        requant_value(acc, 3, ACT_BITS, true)
    };
    let (mut h2, mut c2) = (Vec::new(), Vec::new());
    for (u, cu) in c.iter().enumerate().take(cell.units) {
        let [i, f, o, gg] = [0, 1, 2, 3].map(|k| act(k * cell.units + u));
        let cn = requant_value(f * cu + i * gg, PRODUCT_SHIFT, C_BITS, false);
        h2.push(requant_value(o * cn.max(0), PRODUCT_SHIFT, ACT_BITS, true));
        c2.push(cn);
    }
    (h2, c2)
}
