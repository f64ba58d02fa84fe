//! Known image-network architectures with random weights (`secinfer bench net --arch`): the
//! networks of GALA's Tables IX–XI at the sizes this build runs (MNIST 28×28, CIFAR 32×32×3).
use super::{random_mlp, random_model};
use crate::error::{NnError, Result};
use crate::model::Model;
use serde_json::{json, Value};

/// The architectures [`random_arch`] builds.
pub const ARCHS: &[&str] = &["mlp", "cnn", "alexnet", "vgg", "resnet18"];

struct Net {
    layers: Vec<Value>,
    /// Current channels and image side.
    c: usize,
    hw: usize,
    n: usize,
}

impl Net {
    fn new(c: usize, hw: usize) -> Net {
        Net {
            layers: vec![json!({"type": "input", "name": "input", "dtype": "fixed",
                                "shape": [c, hw, hw]})],
            c,
            hw,
            n: 0,
        }
    }
    fn name(&mut self, what: &str) -> String {
        self.n += 1;
        format!("{what}{}", self.n)
    }
    fn conv(&mut self, out: usize, k: usize, s: usize, p: usize) -> &mut Self {
        let name = self.name("conv");
        self.layers.push(
            json!({"type": "conv2d", "name": name, "in_channels": self.c,
            "out_channels": out, "kernel": [k, k], "stride": [s, s], "padding": [p, p]}),
        );
        self.c = out;
        self.hw = (self.hw + 2 * p - k) / s + 1;
        self
    }
    fn relu(&mut self) -> String {
        let name = self.name("relu");
        self.layers.push(json!({"type": "relu", "name": name}));
        name
    }
    fn pool(&mut self, kind: &str, k: usize, s: usize) -> &mut Self {
        let name = self.name("pool");
        self.layers
            .push(json!({"type": kind, "name": name, "kernel": [k, k], "stride": [s, s]}));
        self.hw = (self.hw - k) / s + 1;
        self
    }
    fn add(&mut self, other: &str) {
        let name = self.name("add");
        self.layers
            .push(json!({"type": "add", "name": name, "other": other}));
    }
    /// Flatten, then dense layers of `sizes` with ReLU between, then the argmax.
    fn head(mut self, sizes: &[usize]) -> Vec<Value> {
        self.layers
            .push(json!({"type": "flatten", "name": "flatten"}));
        let mut i = self.c * self.hw * self.hw;
        for (k, o) in sizes.iter().enumerate() {
            let name = self.name("fc");
            self.layers
                .push(json!({"type": "dense", "name": name, "input": i, "output": o}));
            if k + 1 < sizes.len() {
                self.relu();
            }
            i = *o;
        }
        self.layers.push(json!({"type": "argmax", "name": "class"}));
        self.layers
    }
}

/// MiniONN's MNIST network (the shipped `mnist-cnn`'s architecture).
fn mnist_cnn() -> Vec<Value> {
    let mut n = Net::new(1, 28);
    n.conv(16, 5, 1, 0).relu();
    n.pool("maxpool2d", 2, 2).conv(16, 5, 1, 0).relu();
    n.pool("maxpool2d", 2, 2);
    n.head(&[100, 10])
}

/// AlexNet's five convolutions and three max-pools, for 32×32×3 inputs.
fn alexnet() -> Vec<Value> {
    let mut n = Net::new(3, 32);
    n.conv(64, 5, 1, 2).relu();
    n.pool("maxpool2d", 3, 2).conv(192, 5, 1, 2).relu();
    n.pool("maxpool2d", 3, 2).conv(384, 3, 1, 1).relu();
    n.conv(256, 3, 1, 1).relu();
    n.conv(256, 3, 1, 1).relu();
    n.pool("maxpool2d", 3, 2);
    n.head(&[10])
}

/// VGG-16's thirteen 3×3 convolutions and five max-pools, for 32×32×3 inputs.
fn vgg16() -> Vec<Value> {
    let mut n = Net::new(3, 32);
    for stage in [
        &[64, 64][..],
        &[128, 128],
        &[256, 256, 256],
        &[512, 512, 512],
        &[512, 512, 512],
    ] {
        for &c in stage {
            n.conv(c, 3, 1, 1).relu();
        }
        n.pool("maxpool2d", 2, 2);
    }
    n.head(&[10])
}

/// ResNet-18 for 32×32×3 inputs: a 3×3 stem and four stages of two basic blocks. A block whose
/// shape is kept adds its input back (Add on shares); the three blocks that halve the image and
/// widen the channels run without their 1×1 projection shortcut, which a sequential model.json
/// cannot express.
fn resnet18() -> Vec<Value> {
    let mut n = Net::new(3, 32);
    n.conv(64, 3, 1, 1);
    let mut skip = n.relu();
    for (k, c) in [64, 128, 256, 512].into_iter().enumerate() {
        for b in 0..2 {
            let down = k > 0 && b == 0;
            n.conv(c, 3, if down { 2 } else { 1 }, 1).relu();
            n.conv(c, 3, 1, 1);
            if !down {
                n.add(&skip);
            }
            skip = n.relu();
        }
    }
    n.pool("avgpool2d", 4, 4);
    n.head(&[10])
}

/// A known architecture with random weights from a public seed, in the main format
/// `(bits, frac)`.
pub fn random_arch(name: &str, bits: u32, frac: u32, seed: u64) -> Result<Model> {
    let layers = match name {
        "mlp" => return random_mlp(&[784, 128, 128, 10], bits, frac, seed),
        "cnn" | "mnist-cnn" => mnist_cnn(),
        "alexnet" => alexnet(),
        "vgg" => vgg16(),
        "resnet18" => resnet18(),
        o => {
            return Err(NnError::Input(format!(
                "unknown architecture {o:?} (known: {})",
                ARCHS.join(", ")
            )))
        }
    };
    random_model(layers, 10, bits, frac, seed)
}
