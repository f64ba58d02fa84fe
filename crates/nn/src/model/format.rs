//! Fixed-point formats of docs/model-format.md: the main format every tensor is in and the
//! narrower formats an activation reads and writes. A format is `secinfer-core`'s validated
//! [`Format`] (bits, scale), re-exported here so `nn::model::Format` keeps naming it.
pub use secinfer_core::Format;

/// A format for a `const` item: [`Format::new`], whose error becomes a compile-time failure
/// when the item is evaluated (a runtime panic if called with out-of-range values elsewhere,
/// so it is kept to constants and tests).
pub const fn const_format(bits: u32, scale: u32) -> Format {
    match Format::new(bits, scale) {
        Ok(f) => f,
        Err(_) => panic!("fixed-point format out of range"),
    }
}

/// Input and output formats of one activation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
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
