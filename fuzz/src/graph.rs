//! Fuzz body of `TaskGraph::from_bytes` (heloom-runtime), with its seeds. Kept apart from
//! `lib.rs` because heloom-ckks' tests compile `lib.rs` and cannot depend on the runtime;
//! heloom-runtime's test `tests/graph_bytes.rs` compiles this file and runs the body.

use heloom_ckks::{CkksParameters, PolyBasis};
use heloom_runtime::graph::{exp_graph, polynomial_graph, ExpVariant};
use heloom_runtime::TaskGraph;

/// `data` with its last 8 bytes replaced by the XXH3-64 of the rest (see `lib.rs`).
fn resealed(data: &[u8]) -> Vec<u8> {
    let mut b = data.to_vec();
    if b.len() >= 8 {
        let end = b.len() - 8;
        let sum = xxhash_rust::xxh3::xxh3_64(&b[..end]);
        b[end..].copy_from_slice(&sum.to_le_bytes());
    }
    b
}

/// Loads `data` as given and resealed; a loaded graph must write, reload and write the same
/// bytes again.
pub fn task_graph(data: &[u8]) {
    for d in [data.to_vec(), resealed(data)] {
        if let Ok(g) = TaskGraph::from_bytes(&d) {
            let once = g.to_bytes();
            let again = match TaskGraph::from_bytes(&once) {
                Ok(h) => h.to_bytes(),
                Err(e) => panic!("a loaded graph failed to reload after to_bytes: {e}"),
            };
            assert!(again == once, "to_bytes is not stable after a round trip");
        }
    }
}

// The parameters heloom-ckks' e^x graph tests run on.
#[path = "../../crates/heloom-ckks/tests/common/params.rs"]
mod ckks_params;

/// The parameters of the seed graphs: N = 2^12, a 6-prime chain, scale 2^40 (heloom-ckks'
/// deep test parameters).
pub fn seed_params() -> CkksParameters {
    ckks_params::insecure_deep_params()
}

/// The seed graphs: the three e^x graphs and a Chebyshev polynomial on [`seed_params`]' chain.
pub fn seed_graphs() -> Vec<TaskGraph> {
    let m = seed_params().moduli().to_vec();
    let scale = 2f64.powi(40);
    let mut out: Vec<TaskGraph> = ExpVariant::ALL
        .iter()
        .map(|&v| exp_graph(v, &m, 5, scale).expect("an e^x seed graph"))
        .collect();
    out.push(
        polynomial_graph(
            "chebyshev",
            &m,
            5,
            scale,
            &[0.5, -1.25, 0.0, 0.75, 0.125],
            PolyBasis::Chebyshev { a: -1.0, b: 1.0 },
        )
        .expect("a polynomial seed graph"),
    );
    out
}

/// The seed corpus: [`seed_graphs`] as bytes.
pub fn graph_seeds() -> Vec<Vec<u8>> {
    seed_graphs().iter().map(TaskGraph::to_bytes).collect()
}
