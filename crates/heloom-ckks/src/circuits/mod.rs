//! Circuits: algorithms built from the scheme's operations, above the evaluator (Lattigo's
//! `circuits/ckks`).
//!
//! - [`polynomial`]: polynomial evaluation (baby-step giant-step, power and Chebyshev bases),
//!   written against [`crate::PolyOps`] so the runtime and the GPU run the very same circuit.
//! - [`lintrans`]: linear transforms of the slots by generalized diagonals (baby-step
//!   giant-step, hoisted), behind encrypted matrix products and CryptoNets' dense layers.
//! - [`bootstrap`]: CKKS bootstrapping (ModRaise, CoeffToSlot, EvalMod, SlotToCoeff).

pub mod bootstrap;
pub mod lintrans;
pub mod polynomial;

pub use bootstrap::{
    preset as bootstrap_preset, sparse_secret_keys, BootstrapConfig, BootstrapPreset,
    BootstrapTimes, Bootstrapper, SparseKeys,
};
pub use lintrans::{LinearTransform, PlainOps};
pub use polynomial::{evaluate_polynomial_on, PolyBasis};

use crate::ciphertext::Ciphertext;
use crate::error::Result;
use crate::evaluator::Evaluator;
use heloom_math::Word;

/// `acc + x` in place, where an empty `acc` becomes `x`: the running sum of a circuit whose
/// first term is not known in advance.
pub fn accumulate<W: Word>(
    ev: &Evaluator<W>,
    acc: &mut Option<Ciphertext<W>>,
    x: Ciphertext<W>,
) -> Result<()> {
    match acc.as_mut() {
        Some(y) => ev.add_assign(y, &x)?,
        None => *acc = Some(x),
    }
    Ok(())
}
