//! Batch-packed encrypted CryptoNets inference against the f64 reference, both word sizes.

use heloom_apps::cryptonets::batch::{BatchNet, BatchTimes};
use heloom_apps::cryptonets::linear::LazyWord;
use heloom_apps::cryptonets::model::argmax;
use heloom_apps::cryptonets::CryptoNet;
use heloom_apps::mnist::Mnist;
use heloom_ckks::{
    keygen, CkksParameters, Context, Decryptor, Evaluator, KeySet, SecurityLevel, Threads,
};
use std::sync::Arc;

/// A context at N = 2^11 for `word`-bit words with `levels` levels of `scale`-bit primes (the
/// first one bit wider), keys without rotations, and an evaluator holding them.
fn setup<W: LazyWord>(
    word: u32,
    levels: usize,
    scale: u32,
) -> (Arc<Context<W>>, KeySet<W>, Evaluator<W>) {
    let p = CkksParameters::builder(1 << 11)
        .word_bits(word)
        .levels(levels)
        .scale_bits(scale)
        .first_bits(scale + 1)
        .security(SecurityLevel::None)
        .build()
        .expect("params");
    let ctx = Context::<W>::new(p).expect("context");
    let keys = keygen(&ctx, &[], false).expect("keys");
    let ev = Evaluator::new(&ctx, Arc::new(keys.evaluation_keys.clone())).expect("evaluator");
    (ctx, keys, ev)
}

fn check<W: LazyWord>(word: u32, scale: u32, bound: f64) {
    let (ctx, keys, ev) = setup::<W>(word, 6, scale);
    let net = CryptoNet::random(11);
    let batch = BatchNet::new(&net, &ev).expect("net");
    let mnist = Mnist::load_default_test().expect("MNIST");
    let count = 40;
    let images: Vec<&[u8]> = (0..count).map(|i| mnist.image(i).expect("image")).collect();
    let t = Threads::new(heloom_pool::cores());
    let cts = batch
        .encrypt(&images, &keys.secret_key, t)
        .expect("encrypt");
    let mut times = BatchTimes::default();
    let logits = batch.infer(cts, t, &mut times).expect("infer");
    let dec = Decryptor::new(&ctx, &keys.secret_key).expect("decryptor");
    let got = batch.decrypt(&logits, &dec, count).expect("decrypt");
    let mut worst: f64 = 0.0;
    for (i, g) in got.iter().enumerate() {
        let want = net.logits(images[i]).expect("plain");
        let scale = want.iter().fold(1.0f64, |a, v| a.max(v.abs()));
        for k in 0..10 {
            worst = worst.max((g[k] - want[k]).abs() / scale);
        }
        if (g[argmax(&want)] - g[argmax(g)]).abs() > bound * scale * 4.0 {
            assert_eq!(argmax(g), argmax(&want), "image {i}: class differs");
        }
    }
    assert!(
        worst < bound,
        "u{word}: worst relative logit error {worst:e} (bound {bound:e})"
    );
    assert!(times.server_s() > 0.0);
}

#[test]
fn batch_inference_matches_plaintext_u64() {
    check::<u64>(64, 29, 1e-4);
}

/// 40-bit primes are above the lazy kernel's 2^31 limit: the layers take the reduced
/// multiply-add path.
#[test]
fn batch_inference_matches_plaintext_u64_wide_primes() {
    check::<u64>(64, 40, 1e-4);
}

#[test]
fn batch_inference_matches_plaintext_u32() {
    check::<u32>(32, 29, 1e-4);
}

#[test]
fn bad_batches_are_refused() {
    let (_, _, ev) = setup::<u64>(64, 3, 29);
    let e = BatchNet::new(&CryptoNet::random(1), &ev)
        .err()
        .expect("too few levels");
    assert!(e.to_string().contains("levels"), "{e}");
}
