//! Test set-ups shared by heloom-ckks' tests and by the tests of the crates built on it (they
//! include this file with `#[path]`).

// Each test file compiles this module on its own and uses only part of it.
#![allow(dead_code)]

use heloom_ckks::{
    keygen, CkksParameters, Context, Decryptor, Encryptor, Evaluator, KeySet, SecurityLevel,
};
use heloom_math::Word;
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

/// N = 2^12, a 50-bit `q_0` under five 40-bit scaling primes, 64-bit words, no security
/// check: small and fast, and deep enough for the e^x graphs.
pub fn insecure_deep_params() -> CkksParameters {
    CkksParameters::builder(1 << 12)
        .levels(5)
        .first_bits(50)
        .scale_bits(40)
        .security(SecurityLevel::None)
        .build()
        .expect("parameters")
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
