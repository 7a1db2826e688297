//! CKKS objects in a `heloom_store::Store` with a budget that forces spills: ciphertexts come
//! back bit-identical and decrypt to the encrypted values; keys and plaintexts round-trip;
//! `memory_bytes` is the coefficient size.

// A failing unwrap is a failing test.
#![allow(clippy::unwrap_used)]

use heloom_ckks::*;
use heloom_math::Word;
use heloom_store::{Spill, Store, StoreConfig};
use std::sync::Arc;

/// Fresh encryptions at scale 2^40 (2^28 on 32-bit words) decrypt within this of the values.
const BOUND_64: f64 = 1e-6;
const BOUND_32: f64 = 1e-3;

/// Tiny insecure ring: the test is about storage, not security.
fn params(word_bits: u32) -> CkksParameters {
    CkksParameters::builder(1 << 11)
        .word_bits(word_bits)
        .levels(2)
        .security(SecurityLevel::None)
        .build()
        .unwrap()
}

/// A store that keeps at most `budget` bytes in memory and reloads what it spilled with `load`.
fn spilling_store<T: Spill>(
    budget: u64,
    load: impl Fn(&[u8]) -> Result<T> + Send + Sync + 'static,
) -> Store<T> {
    let config = StoreConfig {
        budget_bytes: Some(budget),
        ..StoreConfig::default()
    };
    Store::new(config, move |b: &[u8]| load(b).map_err(|e| e.to_string())).unwrap()
}

fn values(i: usize, n: usize) -> Vec<f64> {
    (0..n)
        .map(|j| ((i * 131 + j * 17) % 1000) as f64 / 500.0 - 1.0)
        .collect()
}

fn ciphertexts_survive_spills<W: Word>(word_bits: u32, bound: f64) {
    let ctx = Context::<W>::new(params(word_bits)).unwrap();
    let keys = keygen(&ctx, &[], false).unwrap();
    let enc = Encryptor::new(&ctx);
    let dec = Decryptor::new(&ctx, &keys.secret_key).unwrap();
    let ev = Evaluator::new(&ctx, Arc::new(keys.evaluation_keys.clone())).unwrap();
    let slots = ctx.params().slots();
    let n = ctx.params().n();

    let count = 6;
    let mut originals = Vec::new();
    for i in 0..count {
        let ct = enc.encrypt(&values(i, slots), &keys.public_key).unwrap();
        // Levels 2 limbs + q_0: 3 limbs, 2 polynomials.
        assert_eq!(ct.memory_bytes(), 2 * 3 * n * (W::BITS as usize / 8));
        originals.push(ct);
    }
    // A ciphertext after a multiplication (3 polynomials, one level down) spills too.
    let sq = ev.multiply(&originals[0], &originals[0]).unwrap();
    assert_eq!(sq.memory_bytes(), 3 * 3 * n * (W::BITS as usize / 8));
    let sq = ev.rescale(&ev.relinearize(&sq).unwrap()).unwrap();
    assert_eq!(sq.memory_bytes(), 2 * 2 * n * (W::BITS as usize / 8));

    let one = originals[0].memory_bytes() as u64;
    let config = StoreConfig {
        budget_bytes: Some(2 * one + one / 2),
        ..StoreConfig::default()
    };
    let loader_ctx = Arc::clone(&ctx);
    let store: Store<Ciphertext<W>> = Store::new(config, move |b: &[u8]| {
        Ciphertext::from_bytes(&loader_ctx, b).map_err(|e| e.to_string())
    })
    .unwrap();
    for (i, ct) in originals.iter().enumerate() {
        store.insert(i as u64, ct.clone()).unwrap();
    }
    store.insert(100, sq.clone()).unwrap();
    store.flush().unwrap();
    assert!(store.stats().evictions >= 4, "{:?}", store.stats());
    assert!(store.resident_bytes() <= 2 * one + one / 2);

    let order: Vec<u64> = (0..count as u64).rev().chain([100]).collect();
    store.set_access_order(&order);
    for &k in &order {
        let got = store.get(k).unwrap();
        if k == 100 {
            assert_eq!(got.to_bytes(), sq.to_bytes());
            let want: Vec<f64> = values(0, slots).iter().map(|v| v * v).collect();
            let out = dec.decrypt(&got).unwrap();
            let err = out
                .iter()
                .zip(&want)
                .map(|(a, b)| (a - b).abs())
                .fold(0.0, f64::max);
            assert!(err < 10.0 * bound, "square: error {err}");
            continue;
        }
        let i = k as usize;
        assert_eq!(got.to_bytes(), originals[i].to_bytes(), "ciphertext {i}");
        let out = dec.decrypt(&got).unwrap();
        let err = out
            .iter()
            .zip(&values(i, slots))
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f64::max);
        assert!(err < bound, "ciphertext {i}: error {err} >= {bound}");
    }
    let st = store.stats();
    assert_eq!(st.gets, order.len() as u64);
    assert!(st.bytes_read > 0 && st.bytes_written > 0, "{st:?}");
}

#[test]
fn ciphertexts_survive_spills_64() {
    ciphertexts_survive_spills::<u64>(64, BOUND_64);
}

#[test]
fn ciphertexts_survive_spills_32() {
    ciphertexts_survive_spills::<u32>(32, BOUND_32);
}

#[test]
fn keys_and_plaintexts_round_trip_through_a_store() {
    let ctx = Context::<u64>::new(params(64)).unwrap();
    let keys = keygen(&ctx, &[1], false).unwrap();
    let relin = keys.evaluation_keys.relin_key().unwrap().clone();
    let limbs_qp = ctx.params().moduli().len() + ctx.params().special_moduli().len();
    let n = ctx.params().n();
    assert_eq!(relin.memory_bytes(), 2 * relin.dnum() * limbs_qp * n * 8);
    assert_eq!(keys.public_key.memory_bytes(), 2 * limbs_qp * n * 8);
    assert_eq!(
        Spill::memory_bytes(&keys.evaluation_keys),
        keys.evaluation_keys.memory_bytes()
    );

    // Switching keys: budget for one, so the other spills.
    let c = Arc::clone(&ctx);
    let store: Store<SwitchingKey<u64>> =
        spilling_store(relin.memory_bytes() as u64 + 1, move |b| {
            SwitchingKey::from_bytes(&c, b)
        });
    let g = keys.evaluation_keys.galois_elements()[0];
    let galois = keys.evaluation_keys.galois_key(g).unwrap().clone();
    store.insert(0, relin.clone()).unwrap();
    store.insert(g, galois.clone()).unwrap();
    store.flush().unwrap();
    assert_eq!(store.stats().evictions, 1);
    assert_eq!(store.get(0).unwrap().to_bytes(), relin.to_bytes());
    assert_eq!(store.get(g).unwrap().to_bytes(), galois.to_bytes());

    // Plaintexts.
    let c = Arc::clone(&ctx);
    let pts: Store<Plaintext<u64>> = spilling_store(1, move |b| Plaintext::from_bytes(&c, b));
    let pt = ctx.encode(&values(3, 16)).unwrap();
    assert_eq!(pt.memory_bytes(), 3 * n * 8);
    pts.insert(7, pt.clone()).unwrap();
    pts.flush().unwrap();
    assert!(!pts.is_resident(7));
    assert_eq!(pts.get(7).unwrap().to_bytes(), pt.to_bytes());
}

#[test]
fn a_loader_for_other_parameters_is_a_load_error() {
    let ctx = Context::<u64>::new(params(64)).unwrap();
    let other = Context::<u64>::new(
        CkksParameters::builder(1 << 11)
            .levels(1)
            .security(SecurityLevel::None)
            .build()
            .unwrap(),
    )
    .unwrap();
    let keys = keygen(&ctx, &[], false).unwrap();
    let ct = Encryptor::new(&ctx)
        .encrypt(&[0.5], &keys.public_key)
        .unwrap();
    let store: Store<Ciphertext<u64>> =
        spilling_store(1, move |b| Ciphertext::from_bytes(&other, b));
    store.insert(1, ct).unwrap();
    store.flush().unwrap();
    let err = store.get(1).unwrap_err();
    assert!(
        matches!(err, heloom_store::StoreError::Load { key: 1, .. }),
        "{err}"
    );
}
