//! The committed CryptoNets weights: they load, reach the accuracy the training script
//! measured on the held-out images, and keep every activation within the recorded bounds.

use heloom_apps::cryptonets::model::argmax;
use heloom_apps::cryptonets::CryptoNet;
use heloom_apps::mnist::{Mnist, HELD_OUT};
use serde_json::Value;

/// The training script's metadata, committed beside the weights.
const META: &str = include_str!("../data/cryptonets.json");

fn number(v: &Value, path: &[&str]) -> f64 {
    let mut at = v;
    for key in path {
        at = &at[*key];
    }
    at.as_f64()
        .unwrap_or_else(|| panic!("cryptonets.json: {} is not a number", path.join(".")))
}

#[test]
fn embedded_weights_classify_the_held_out_images() {
    let meta: Value = serde_json::from_str(META).expect("cryptonets.json parses");
    let net = CryptoNet::embedded().expect("the embedded weights load");
    // The file round-trips: what is embedded is exactly f32 weights.
    assert_eq!(
        CryptoNet::from_bytes(&net.to_bytes()).expect("round trip"),
        net
    );

    let mnist = Mnist::load_default_test().expect("MNIST test set (crates/heloom-apps/data/mnist)");
    let mut correct = 0usize;
    // max |value| of the convolution outputs, the dense-1 outputs and the logits.
    let mut maxima = [0.0f64; 3];
    for i in HELD_OUT {
        let image = mnist.image(i).expect("a held-out image");
        let layers = net.forward(image).expect("forward");
        for (m, layer) in maxima.iter_mut().zip(&layers) {
            *m = layer.iter().fold(*m, |a, v| a.max(v.abs()));
        }
        if argmax(&layers[2]) == mnist.labels[i] as usize {
            correct += 1;
        }
    }
    let accuracy = correct as f64 / HELD_OUT.len() as f64;
    let python = number(&meta, &["held_out_accuracy"]);
    println!("held-out accuracy {accuracy:.4} (Python: {python:.4}), maxima {maxima:?}");

    assert!(accuracy >= 0.97, "held-out accuracy {accuracy} < 0.97");
    assert!(
        (accuracy - python).abs() <= 0.002,
        "Rust accuracy {accuracy} differs from the training script's {python}"
    );
    for (m, key) in maxima.iter().zip(["conv", "fc1", "logits"]) {
        let bound = number(&meta, &["activation_bounds", key]);
        let seen = number(&meta, &["activation_max_held_out", key]);
        assert!(*m <= bound, "max |{key}| = {m} is above the bound {bound}");
        assert!(
            (m - seen).abs() <= 1e-6 * seen,
            "max |{key}| = {m}, the training script measured {seen}"
        );
    }
}
