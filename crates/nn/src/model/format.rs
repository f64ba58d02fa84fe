//! Fixed-point formats of docs/model-format.md: the main format every tensor is in and the
//! narrower formats an activation reads and writes.
/// A two's-complement fixed-point format: `bits`-bit integers X meaning X / 2^frac.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Format {
    pub bits: u32,
    pub frac: u32,
}

impl Format {
    pub fn lo(self) -> i64 {
        -(1i64 << (self.bits - 1))
    }
    pub fn hi(self) -> i64 {
        (1i64 << (self.bits - 1)) - 1
    }
    /// Round to nearest (ties up), saturating; returns the value and whether it saturated.
    pub fn quantize(self, v: f64) -> (i64, bool) {
        let x = (v * (1u64 << self.frac) as f64 + 0.5).floor();
        let q = x.clamp(self.lo() as f64, self.hi() as f64);
        (q as i64, q != x)
    }
    /// Two's-complement reduction to `bits` bits.
    pub fn wrap(self, x: i64) -> i64 {
        let m = (1i64 << self.bits) - 1;
        (x.wrapping_sub(self.lo()) & m) + self.lo()
    }
    pub fn clamp(self, x: i64) -> i64 {
        x.clamp(self.lo(), self.hi())
    }
}

/// Input and output formats of one activation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ActFormat {
    pub input: Format,
    pub output: Format,
}

/// A model's fixed-point configuration: the main format and optional activation formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FixedPointConfig {
    pub main: Format,
    pub sigmoid: Option<ActFormat>,
    pub candidate: Option<ActFormat>,
}

impl FixedPointConfig {
    pub fn sigmoid_format(&self) -> ActFormat {
        self.sigmoid.unwrap_or(ActFormat {
            input: self.main,
            output: self.main,
        })
    }
    pub fn candidate_format(&self) -> ActFormat {
        self.candidate.unwrap_or(ActFormat {
            input: self.main,
            output: self.main,
        })
    }
}
