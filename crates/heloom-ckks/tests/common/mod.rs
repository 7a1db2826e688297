//! Test set-ups shared by heloom-ckks' tests and by the tests of the crates built on it (they
//! include this file with `#[path]`).

// Each test file compiles this module on its own and uses only part of it.
#![allow(dead_code, unused_imports)]

// Kept apart so that the fuzz seeds can include it without the rest (and its dependencies).
mod params;
pub use params::insecure_deep_params;

use heloom_ckks::{keygen, CkksParameters, Context, Decryptor, Encryptor, Evaluator, KeySet};
use heloom_math::Word;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::sync::Arc;

/// A context with its keys, an encryptor, a decryptor and an evaluator holding the keys.
pub struct Setup<W: Word> {
    pub ctx: Arc<Context<W>>,
    pub keys: KeySet<W>,
    pub enc: Encryptor<W>,
    pub dec: Decryptor<W>,
    pub ev: Evaluator<W>,
}

impl<W: Word> Setup<W> {
    /// Everything for `params`, with Galois keys for `steps` (and for conjugation when
    /// `conjugate`).
    pub fn new(params: CkksParameters, steps: &[i64], conjugate: bool) -> Self {
        let ctx = Context::<W>::new(params).expect("context");
        let keys = keygen(&ctx, steps, conjugate).expect("keygen");
        let enc = Encryptor::new(&ctx);
        let dec = Decryptor::new(&ctx, &keys.secret_key).expect("decryptor");
        let ev = evaluator(&ctx, &keys);
        Setup {
            ctx,
            keys,
            enc,
            dec,
            ev,
        }
    }
}

/// An evaluator holding (a copy of) `keys`' evaluation keys.
pub fn evaluator<W: Word>(ctx: &Arc<Context<W>>, keys: &KeySet<W>) -> Evaluator<W> {
    Evaluator::new(ctx, Arc::new(keys.evaluation_keys.clone())).expect("evaluator")
}

/// N = 2^13 at 128-bit security, 64-bit words: a 45-bit `q_0` under `levels` 40-bit scaling
/// primes.
pub fn secure_params(levels: usize) -> CkksParameters {
    CkksParameters::builder(1 << 13)
        .levels(levels)
        .first_bits(45)
        .scale_bits(40)
        .build()
        .expect("parameters")
}

/// `n` values uniform in `[-1, 1)`, the same for the same `seed`.
pub fn rand_vec(seed: u64, n: usize) -> Vec<f64> {
    let mut r = ChaCha8Rng::seed_from_u64(seed);
    (0..n).map(|_| r.gen_range(-1.0..1.0)).collect()
}

/// The largest `|got[i] - want[i]|` over `want` (`got` may hold more values).
pub fn max_err(got: &[f64], want: &[f64]) -> f64 {
    assert!(got.len() >= want.len(), "{} < {}", got.len(), want.len());
    want.iter()
        .zip(got)
        .map(|(w, g)| (w - g).abs())
        .fold(0.0, f64::max)
}

/// A [`Setup`] with the largest error its tests allow after a multiplication.
pub struct Bounded<W: Word> {
    pub setup: Setup<W>,
    pub bound: f64,
}

impl<W: Word> std::ops::Deref for Bounded<W> {
    type Target = Setup<W>;

    fn deref(&self) -> &Setup<W> {
        &self.setup
    }
}
