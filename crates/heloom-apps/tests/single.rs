//! Single-image (LoLa-style) encrypted CryptoNets against the f64 reference.

use heloom_apps::cryptonets::model::argmax;
use heloom_apps::cryptonets::single::{rotation_steps, SingleNet, LEVELS};
use heloom_apps::cryptonets::CryptoNet;
use heloom_apps::mnist::Mnist;
use heloom_ckks::{keygen, CkksParameters, Context, Decryptor, Evaluator, Threads};
use heloom_math::Word;
use std::sync::Arc;

fn check<W: Word>(word: u32) {
    let p = CkksParameters::builder(1 << 14)
        .word_bits(word)
        .levels(LEVELS + 1)
        .scale_bits(29)
        .first_bits(29)
        .build()
        .expect("params");
    let ctx = Context::<W>::new(p).expect("context");
    let keys = keygen(&ctx, &rotation_steps(), false).expect("keys");
    let ev = Evaluator::new(&ctx, Arc::new(keys.evaluation_keys.clone()))
        .expect("evaluator")
        .with_threads(Threads::new(heloom_pool::cores()));
    let net = CryptoNet::random(5);
    let single = SingleNet::new(&net, &ev).expect("net");
    let dec = Decryptor::new(&ctx, &keys.secret_key).expect("decryptor");
    let mnist = Mnist::load_default_test().expect("MNIST");
    for i in [0usize, 1] {
        let image = mnist.image(i).expect("image");
        let ct = single.encrypt(image, &keys.secret_key).expect("encrypt");
        let out = single.infer(&ct).expect("infer");
        let got = single.decrypt(&out, &dec).expect("decrypt");
        let want = net.logits(image).expect("plain");
        let scale = want.iter().fold(1.0f64, |a, v| a.max(v.abs()));
        for k in 0..10 {
            assert!(
                (got[k] - want[k]).abs() < 1e-3 * scale,
                "u{word} image {i} logit {k}: {} vs {}",
                got[k],
                want[k]
            );
        }
        assert_eq!(argmax(&got), argmax(&want));
    }
}

#[test]
fn single_image_matches_plaintext_u32() {
    check::<u32>(32);
}

#[test]
fn single_image_matches_plaintext_u64() {
    check::<u64>(64);
}
