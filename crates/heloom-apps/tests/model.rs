//! The MNIST loader and the model format.

use heloom_apps::cryptonets::CryptoNet;
use heloom_apps::mnist::{Mnist, PIXELS};

#[test]
fn mnist_test_set_loads() {
    let m = Mnist::load_default_test().expect("MNIST test set (crates/heloom-apps/data/mnist)");
    assert_eq!(m.len(), 10_000);
    assert_eq!(m.images.len(), 10_000 * PIXELS);
    // Known answers: the first test labels are 7, 2, 1, 0, 4.
    assert_eq!(&m.labels[..5], &[7, 2, 1, 0, 4]);
    let counts = (0..10).map(|d| m.labels.iter().filter(|&&l| l == d).count());
    assert!(counts.into_iter().all(|c| c > 800));
}

#[test]
fn mnist_ships_with_the_repository() {
    // A clone has only the repository: without HELOOM_MNIST the loader must use the shipped copy.
    if std::env::var_os("HELOOM_MNIST").is_none() {
        let dir = heloom_apps::mnist::default_dir().expect("shipped MNIST");
        assert!(dir.ends_with("heloom-apps/data/mnist"), "{}", dir.display());
        assert!(dir.join("t10k-images-idx3-ubyte.gz").is_file());
        assert!(
            dir.join("README.md").is_file(),
            "the licence note ships beside the data"
        );
    }
}

#[test]
fn weight_files_round_trip_and_bad_ones_are_refused() {
    let net = CryptoNet::random(3);
    let bytes = net.to_bytes();
    let back = CryptoNet::from_bytes(&bytes).expect("round trip");
    // f32 on disk: equal to within f32 rounding.
    for (a, b) in net.fc1_w.iter().zip(&back.fc1_w) {
        assert!((a - b).abs() <= 1e-7 * a.abs().max(1.0));
    }
    assert!(CryptoNet::from_bytes(&bytes[..bytes.len() - 1]).is_err());
    let mut bad = bytes.clone();
    bad[0] = b'X';
    assert!(CryptoNet::from_bytes(&bad).is_err());
    assert!(CryptoNet::input(&[0u8; 100]).is_err());
}
