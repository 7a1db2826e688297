//! Graph execution with intermediate values in a spilling store gives bit-identical results.

#![allow(clippy::unwrap_used)]

#[path = "../../heloom-ckks/tests/common/mod.rs"]
mod common;

use heloom_ckks::*;
use heloom_runtime::graph::{exp_graph, ExpVariant};
use heloom_store::{Spill, Store, StoreConfig};
use std::sync::Arc;

#[test]
fn a_graph_run_with_a_tiny_budget_is_bit_identical_and_spills() {
    let ctx = Context::<u64>::new(common::insecure_deep_params()).unwrap();
    let keys = keygen(&ctx, &[], false).unwrap();
    let ev = common::evaluator(&ctx, &keys);
    let xs: Vec<f64> = (0..ctx.n() / 2)
        .map(|i| -1.0 + 2.0 * i as f64 / ctx.n() as f64)
        .collect();
    let ct = Encryptor::new(&ctx).encrypt(&xs, &keys.public_key).unwrap();
    let moduli = ctx.params().moduli().to_vec();
    for variant in [ExpVariant::Paper, ExpVariant::Bsgs] {
        let g = exp_graph(variant, &moduli, ct.level(), ct.scale()).unwrap();
        let plain = g.run(&ev, std::slice::from_ref(&ct)).unwrap();

        // Budget: one fresh ciphertext, so nearly every intermediate value spills.
        let c = Arc::clone(&ctx);
        let store: Store<Ciphertext<u64>> = Store::new(
            StoreConfig {
                budget_bytes: Some(ct.memory_bytes() as u64),
                ..StoreConfig::default()
            },
            move |b: &[u8]| Ciphertext::from_bytes(&c, b).map_err(|e| e.to_string()),
        )
        .unwrap();
        let stored = g
            .run_with_store(&ev, std::slice::from_ref(&ct), &store)
            .unwrap();
        assert_eq!(plain.len(), stored.len());
        for (a, b) in plain.iter().zip(&stored) {
            assert_eq!(a.to_bytes(), b.to_bytes(), "{variant:?}");
        }
        store.flush().unwrap();
        let st = store.stats();
        assert!(
            st.bytes_written > 0 && st.evictions > 0,
            "{variant:?}: {st:?}"
        );
        assert_eq!(st.gets as usize, g.store_access_order().len());
        assert!(
            store.is_empty(),
            "every value is discarded after its last use"
        );
    }
}
