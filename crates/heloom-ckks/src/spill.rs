//! [`Spill`] for the CKKS objects a server keeps: ciphertexts, plaintexts, public keys,
//! switching keys and evaluation keys can live in a [`heloom_store::Store`] with a memory
//! budget and spill to disk in the checked binary format of [`crate::serialize`].
//!
//! `memory_bytes` is the real in-memory size of the coefficients (limbs x N x word bytes,
//! summed over the polynomials, both halves of keys included even when stored as a seed);
//! struct overhead is negligible next to that. The loader is the type's `from_bytes` with the
//! context, which checks the parameters' fingerprint, for example:
//!
//! ```
//! use heloom_ckks::*;
//! use heloom_store::{Store, StoreConfig};
//! use std::sync::Arc;
//! # fn main() -> std::result::Result<(), Box<dyn std::error::Error>> {
//! let ctx = Context::<u64>::new(CkksParameters::new(1 << 13, 2, 40, 64)?)?;
//! let loader_ctx = Arc::clone(&ctx);
//! let store: Store<Ciphertext<u64>> = Store::new(StoreConfig::default(), move |b: &[u8]| {
//!     Ciphertext::from_bytes(&loader_ctx, b).map_err(|e| e.to_string())
//! })?;
//! # drop(store);
//! # Ok(())
//! # }
//! ```

use crate::ciphertext::{Ciphertext, Plaintext};
use crate::keys::{EvaluationKeys, PublicKey, SwitchingKey};
use heloom_math::{RnsPoly, Word};
use heloom_store::Spill;

/// Bytes of the coefficients of `polys`.
fn poly_bytes<'a, W: Word>(polys: impl IntoIterator<Item = &'a RnsPoly<W>>) -> usize {
    polys
        .into_iter()
        .map(|p| p.as_slice().len() * (W::BITS as usize / 8))
        .sum()
}

impl<W: Word> Spill for Ciphertext<W> {
    fn to_spill(&self) -> Vec<u8> {
        self.to_bytes()
    }
    fn memory_bytes(&self) -> usize {
        poly_bytes(&self.polys)
    }
}

impl<W: Word> Spill for Plaintext<W> {
    fn to_spill(&self) -> Vec<u8> {
        self.to_bytes()
    }
    fn memory_bytes(&self) -> usize {
        poly_bytes([&self.poly])
    }
}

impl<W: Word> Spill for PublicKey<W> {
    fn to_spill(&self) -> Vec<u8> {
        self.to_bytes()
    }
    fn memory_bytes(&self) -> usize {
        poly_bytes([&self.b, &self.a])
    }
}

impl<W: Word> Spill for SwitchingKey<W> {
    fn to_spill(&self) -> Vec<u8> {
        self.to_bytes()
    }
    fn memory_bytes(&self) -> usize {
        poly_bytes(self.b.iter().chain(&self.a))
    }
}

impl<W: Word> Spill for EvaluationKeys<W> {
    fn to_spill(&self) -> Vec<u8> {
        self.to_bytes()
    }
    fn memory_bytes(&self) -> usize {
        EvaluationKeys::memory_bytes(self)
    }
}
