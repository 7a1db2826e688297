//! Logistic-regression training on encrypted data with bootstrapping between iterations, at
//! an insecure N = 2^10 chain (5 levels left after bootstrapping: one iteration per
//! bootstrap), checked against the same gradient descent in the clear.

use heloom_apps::logreg::{
    rotation_steps, small_insecure_setting, train_encrypted, train_plain, Dataset,
    LEVELS_PER_ITERATION,
};
use heloom_ckks::circuits::bootstrap::AutoBootstrap;
use heloom_ckks::*;
use std::sync::Arc;

#[test]
fn encrypted_training_bootstraps_between_iterations_and_matches_the_clear() {
    // q_0, 5 computation levels, SlotToCoeff, EvalMod, CoeffToSlot.
    let (params, config) = small_insecure_setting().expect("parameters");
    let ctx = Context::<u64>::new(params).expect("context");
    let boot = Bootstrapper::new(&ctx, config, Threads::new(2)).expect("ok");
    assert_eq!(boot.output_level(), LEVELS_PER_ITERATION);
    let (n, d) = (64, 8);
    let data = Dataset::synthetic(n, d, 3);
    data.check(ctx.n() / 2).expect("the shape fits");
    let mut steps = boot.rotation_steps();
    steps.extend(rotation_steps(n, d));
    steps.sort_unstable();
    steps.dedup();
    let keys = keygen(&ctx, &steps, true).expect("keys");
    let ev = Evaluator::new(&ctx, Arc::new(keys.evaluation_keys.clone()))
        .expect("ok")
        .with_threads(Threads::new(2));
    let enc = Encryptor::new(&ctx);
    let level = boot.output_level();
    let z = ev
        .drop_to_level(
            &enc.encrypt(&data.packed(), &keys.public_key).expect("ok"),
            level,
        )
        .expect("ok");
    let w0 = ev
        .drop_to_level(
            &enc.encrypt(&vec![0.0; n * d], &keys.public_key)
                .expect("ok"),
            level,
        )
        .expect("ok");
    let auto = AutoBootstrap::new(ev, boot);
    let (iterations, alpha) = (3, 2.0);
    let (w, stats) = train_encrypted(&auto, &z, &w0, n, d, iterations, alpha, &|_| {}).expect("ok");
    // One iteration per bootstrap: none before the first, one before each later one.
    assert_eq!(stats.bootstraps, vec![0, 1, 1]);
    assert_eq!(auto.bootstraps(), 2);
    let want = train_plain(&data, iterations, alpha);
    let last = &want[iterations - 1];
    let got = Decryptor::new(&ctx, &keys.secret_key)
        .expect("ok")
        .decrypt(&w)
        .expect("ok");
    // Every row holds the weights.
    let err = got
        .chunks(d)
        .flat_map(|row| row.iter().zip(last).map(|(g, w)| (g - w).abs()))
        .fold(0.0, f64::max);
    eprintln!(
        "weights {last:?}, max error 2^{:.1}, accuracy {:.3}",
        err.log2(),
        data.accuracy(last)
    );
    assert!(err < 2f64.powi(-12), "max error {err:e}");
    // Training did something: the weights moved and classify most samples right.
    assert!(last.iter().any(|w| w.abs() > 0.05), "{last:?}");
    assert!(
        data.accuracy(last) >= 0.8,
        "accuracy {}",
        data.accuracy(last)
    );
}

#[test]
fn training_refuses_a_shape_that_does_not_fill_the_slots() {
    let data = Dataset::synthetic(48, 8, 1);
    let err = data.check(512).expect_err("refused").to_string();
    assert!(err.contains("powers of two"), "{err}");
    let mut bad = Dataset::synthetic(64, 8, 1);
    bad.x[3][2] = 1.5;
    let err = bad.check(512).expect_err("refused").to_string();
    assert!(err.contains("[-1, 1]"), "{err}");
}
