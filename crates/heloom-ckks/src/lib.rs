//! # heloom-ckks
//!
//! The RNS-CKKS scheme (Cheon, Kim, Kim, Song 2017; full-RNS variant of Cheon, Han, Kim, Kim,
//! Song 2018) on heloom's arithmetic layer, for 64-bit words and bit-reduced 32-bit words.
//!
//! - [`params`]: parameter sets, checked against the HE standard's [`security`] table.
//! - [`Context`]: everything precomputed from the parameters; encoding at any level and scale.
//! - [`keygen`] / [`KeyGenerator`]: secret, public, relinearization and Galois keys (seeded,
//!   compressible).
//! - [`Encryptor`] / [`Decryptor`]: public- and secret-key encryption, decryption.
//! - [`Evaluator`]: arithmetic, rescaling, rotations (hoisted), conjugation; hybrid key
//!   switching behind relinearization and rotations ([`Context::key_switch`]).
//! - [`polyops`]: the operations circuits are written against ([`PolyOps`]), shared by the CPU
//!   evaluator, the runtime's graph builder and the GPU; the scale-alignment rule.
//! - [`circuits`]: polynomial evaluation and linear transforms (baby-step giant-step).
//! - [`accel`]: constants accelerator backends need to match the CPU bit for bit.
//! - [`serialize`]: a versioned, checked binary format (bit-packed limbs, seeded halves) for
//!   parameters, keys (not the secret key), ciphertexts and plaintexts.
//!
//! Naming: a `_with` suffix always means "with a thread budget" (`key_switch_with`,
//! `mod_down_with`); a function generic over a [`PolyOps`] backend ends in `_on`
//! (`evaluate_polynomial_on`, `polyops::align_on`).
//!
//! ```
//! use heloom_ckks::*;
//! let params = CkksParameters::new(1 << 13, 2, 40, 64)?;
//! let ctx = Context::<u64>::new(params)?;
//! let keys = keygen(&ctx, &[1], false)?;
//! let enc = Encryptor::new(&ctx);
//! let dec = Decryptor::new(&ctx, &keys.secret_key)?;
//! let ev = Evaluator::new(&ctx, std::sync::Arc::new(keys.evaluation_keys))?;
//! let a = enc.encrypt(&[0.5, -0.25, 1.0], &keys.public_key)?;
//! let b = ev.multiply_relin_rescale(&a, &a)?;
//! let out = dec.decrypt(&b)?;
//! assert!((out[0] - 0.25).abs() < 1e-6 && (out[2] - 1.0).abs() < 1e-6);
//! # Ok::<(), CkksError>(())
//! ```

pub mod accel;
mod ciphertext;
pub mod circuits;
mod context;
mod encoder;
mod encrypt;
mod error;
mod evaluator;
mod keys;
mod keyswitch;
pub mod params;
pub mod polyops;
pub mod security;
pub mod serialize;
mod spill;

pub use ciphertext::{Ciphertext, Plaintext};
pub use circuits::{
    evaluate_polynomial_on, BootstrapConfig, Bootstrapper, LinearTransform, PolyBasis,
};
pub use context::Context;
pub use encoder::Encoder;
pub use encrypt::{Decryptor, Encryptor};
pub use error::{CkksError, MissingKeyKind, Result};
pub use evaluator::{Evaluator, DEFAULT_HOISTED_KEY_BUDGET};
pub use heloom_pool::Threads;
pub use keys::{
    keygen, EvaluationKeys, KeyGenerator, KeyRole, KeySet, PublicKey, SecretKey, SwitchingKey,
};
pub use keyswitch::Decomposed;
pub use num_complex::Complex64;
pub use params::{CkksParameters, ParametersBuilder, SecretDistribution};
pub use polyops::PolyOps;
pub use security::SecurityLevel;
