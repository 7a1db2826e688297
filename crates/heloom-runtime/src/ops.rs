//! The HE operations a cost model prices: seed 000's Table 1 rows.

use serde::{Deserialize, Serialize};
use std::fmt;

/// One homomorphic operation as priced by a [`crate::profile::Profile`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OpKind {
    /// Ciphertext plus plaintext or constant (also constant multiples by small integers,
    /// level drops and other single-pass limb-wise updates).
    AddPlain,
    /// Ciphertext plus ciphertext.
    Add,
    /// Ciphertext times plaintext or constant.
    MulPlain,
    /// Ciphertext times ciphertext (tensor product, 3 polynomials out).
    Mul,
    /// Ciphertext squared.
    Square,
    /// Relinearization (key switching of the third polynomial).
    Relin,
    /// Rescale by the last prime.
    Rescale,
}

impl OpKind {
    /// Every operation, in Table 1's order.
    pub const ALL: [OpKind; 7] = [
        OpKind::AddPlain,
        OpKind::Add,
        OpKind::MulPlain,
        OpKind::Mul,
        OpKind::Square,
        OpKind::Relin,
        OpKind::Rescale,
    ];

    /// Kebab-case name, as in profiles and command lines.
    pub fn name(self) -> &'static str {
        match self {
            OpKind::AddPlain => "add-plain",
            OpKind::Add => "add",
            OpKind::MulPlain => "mul-plain",
            OpKind::Mul => "mul",
            OpKind::Square => "square",
            OpKind::Relin => "relin",
            OpKind::Rescale => "rescale",
        }
    }

    /// Whether this op is bound by memory bandwidth rather than arithmetic, which decides
    /// which contention curve of a profile applies: key switching has its own (Table 4), every
    /// other op follows rescale's (Table 5).
    pub fn contention_class(self) -> ContentionClass {
        match self {
            OpKind::Relin => ContentionClass::KeySwitch,
            _ => ContentionClass::Other,
        }
    }
}

impl fmt::Display for OpKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Which slowdown-under-load curve of a profile an op follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ContentionClass {
    /// Relinearization and rotations (seed 000, Table 4).
    KeySwitch,
    /// Everything else (seed 000, Table 5, measured on rescale).
    Other,
}
