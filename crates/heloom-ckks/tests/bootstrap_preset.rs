//! The 128-bit bootstrapping preset at N = 2^16 (`circuits::bootstrap::preset`): a dense
//! ternary secret with sparse-secret encapsulation, full packing, 9 levels left. About a minute
//! and 12 GB on 2 cores (keys 5.2 GB), so it is the only test in its binary.
//!
//! Bound: measured 27.5 bits worst and 29.4 mean over the 32,768 slots (the message
//! at q_0 / 2^4 with the arcsine correction); the test asks for 25 bits worst (2^-25), leaving
//! room for other inputs and draws of the keys.

#![allow(clippy::unwrap_used)]

use heloom_ckks::circuits::bootstrap::{preset, sparse_secret_keys, Bootstrapper};
use heloom_ckks::*;
use num_complex::Complex64;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::sync::Arc;

#[test]
fn the_n16_preset_bootstraps_a_dense_secret_to_25_bits_with_9_levels_left() {
    let e = preset(14).unwrap_err();
    assert!(e.to_string().contains("2^15"), "{e}");

    let p = preset(16).unwrap();
    assert_eq!(p.params.security(), SecurityLevel::Bits128);
    assert_eq!(p.params.secret_distribution(), SecretDistribution::Ternary);
    assert!(p.params.log_qp() <= 1747.0, "log QP {}", p.params.log_qp());
    let ctx = Context::<u64>::new(p.params.clone()).unwrap();
    let threads = Threads::new(heloom_pool::cores());
    let boot = Bootstrapper::new(&ctx, p.config, threads).unwrap();
    assert_eq!(boot.output_level(), p.levels_left);
    let KeySet {
        secret_key,
        public_key,
        evaluation_keys,
    } = keygen(&ctx, &boot.rotation_steps(), true).unwrap();
    let sparse = sparse_secret_keys(&ctx, &secret_key, p.sparse_weight).unwrap();
    let boot = boot.with_sparse_keys(Arc::new(sparse)).unwrap();
    let ev = Evaluator::new(&ctx, Arc::new(evaluation_keys))
        .unwrap()
        .with_threads(threads);

    let slots = ctx.n() / 2;
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let z: Vec<Complex64> = (0..slots)
        .map(|_| Complex64::new(rng.gen_range(-1.0..1.0), rng.gen_range(-1.0..1.0)))
        .collect();
    let ct = Encryptor::new(&ctx)
        .encrypt_complex(&z, &public_key)
        .unwrap();
    let ct = ev.drop_to_level(&ct, 0).unwrap();
    let out = boot.bootstrap(&ev, &ct).unwrap();
    assert_eq!(out.level(), 9);
    assert_eq!(out.scale(), ct.scale());
    let dec = Decryptor::new(&ctx, &secret_key).unwrap();
    let err = dec
        .decrypt_complex(&out)
        .unwrap()
        .iter()
        .zip(&z)
        .map(|(g, w)| (g - w).norm())
        .fold(0.0, f64::max);
    eprintln!("N = 2^16 preset: max error 2^{:.1}", err.log2());
    assert!(err < 2f64.powi(-25), "max error {err:e}");
}
