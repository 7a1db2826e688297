//! Ciphertexts and plaintexts: RNS polynomials in NTT form at a level, with their scale.

use heloom_math::{RnsPoly, Word};

/// An encoded message: one polynomial (NTT form) over `q_0 .. q_level`.
#[derive(Clone, Debug)]
pub struct Plaintext<W: Word> {
    pub(crate) poly: RnsPoly<W>,
    pub(crate) level: usize,
    pub(crate) scale: f64,
    pub(crate) slots: usize,
    pub(crate) fingerprint: u64,
}

impl<W: Word> Plaintext<W> {
    /// Level (number of primes above `q_0`).
    pub fn level(&self) -> usize {
        self.level
    }
    /// Scale the values were multiplied by.
    pub fn scale(&self) -> f64 {
        self.scale
    }
    /// Number of slots encoded.
    pub fn slots(&self) -> usize {
        self.slots
    }
    /// The polynomial (NTT form).
    pub fn poly(&self) -> &RnsPoly<W> {
        &self.poly
    }
    /// Fingerprint of the parameters it was made for.
    pub fn fingerprint(&self) -> u64 {
        self.fingerprint
    }
}

/// A CKKS ciphertext: `size` polynomials (2 after relinearization, 3 after a multiply) in NTT
/// form over `q_0 .. q_level`, decrypting to `sum_i c_i s^i`.
#[derive(Clone, Debug)]
pub struct Ciphertext<W: Word> {
    pub(crate) polys: Vec<RnsPoly<W>>,
    pub(crate) level: usize,
    pub(crate) scale: f64,
    pub(crate) slots: usize,
    pub(crate) fingerprint: u64,
    /// Seed of `c_1` when it is still the uniform polynomial of a symmetric encryption, so the
    /// ciphertext can be stored with the seed instead of `c_1`.
    pub(crate) seed: Option<heloom_math::sampler::Seed>,
}

impl<W: Word> Ciphertext<W> {
    /// Level (rescalings left).
    pub fn level(&self) -> usize {
        self.level
    }
    /// Scale of the encrypted values.
    pub fn scale(&self) -> f64 {
        self.scale
    }
    /// Number of polynomials (2, or 3 before relinearization).
    pub fn size(&self) -> usize {
        self.polys.len()
    }
    /// Number of slots in use.
    pub fn slots(&self) -> usize {
        self.slots
    }
    /// The polynomials (NTT form).
    pub fn polys(&self) -> &[RnsPoly<W>] {
        &self.polys
    }
    /// Fingerprint of the parameters it was made for.
    pub fn fingerprint(&self) -> u64 {
        self.fingerprint
    }
    /// Whether `c_1` can be stored as a seed (fresh symmetric encryption).
    pub fn is_seeded(&self) -> bool {
        self.seed.is_some()
    }
    /// A ciphertext with other polynomials and the same level, scale, slots and parameters
    /// (for operations that keep those, like relinearization and rotations).
    pub(crate) fn with_polys(&self, polys: Vec<RnsPoly<W>>) -> Self {
        Self {
            polys,
            level: self.level,
            scale: self.scale,
            slots: self.slots,
            fingerprint: self.fingerprint,
            seed: None,
        }
    }

    /// Overrides the recorded scale (the caller takes responsibility, as in SEAL's `scale()`
    /// setter): use after multiplying by a constant chosen to hit a target scale.
    pub fn set_scale(&mut self, scale: f64) {
        self.scale = scale;
    }
}
