//! JKLS18's encrypted x encrypted matrix product as a task graph
//! (`heloom_apps::graphs::matmul_encrypted_graph`), run with `TaskGraph::run` on the CPU
//! evaluator, decrypted and checked against the f64 product and the eager
//! `jiang::JiangMultiplier`.
//!
//! Parameters: N = 2^10, the smallest ring (512 slots: `D^2` for `d <= 16`), test-only
//! security, a 40-bit `q_0` under three 30-bit scaling primes (the product's three levels).
//! Entries uniform in [-1, 1]. Bound: the largest absolute error over all entries is at most
//! 1e-3 (the entries of `A B` reach a few units; the scale 2^30 leaves about 2^-20 of fresh
//! noise per slot, which the masks, the `D`-term sums and the rescales grow by far less than
//! 2^10).

use heloom_apps::graphs::{self, MATMUL_ENCRYPTED_LEVELS};
use heloom_apps::matmul::{jiang, max_abs_error, padded, Matrix};
use heloom_apps::AppError;
use heloom_ckks::{
    keygen, CkksParameters, Context, Decryptor, Encryptor, Evaluator, SecurityLevel, Threads,
};
use heloom_runtime::graph::NodeOp;
use std::sync::Arc;

type R = Result<(), Box<dyn std::error::Error>>;

const BOUND: f64 = 1e-3;
/// Two sides that are not powers of two (padded to 4 and 8) and one that is.
const DIMS: [usize; 3] = [3, 4, 5];

fn params(n: usize) -> CkksParameters {
    CkksParameters::builder(n)
        .levels(3)
        .scale_bits(30)
        .first_bits(40)
        .security(SecurityLevel::None)
        .build()
        .expect("parameters")
}

fn invalid(e: AppError) -> String {
    match e {
        AppError::Invalid(m) => m,
        other => panic!("expected an invalid-input error, got {other}"),
    }
}

/// Key switches the eager `JiangMultiplier::multiply` does for side `d` (see jiang.rs): the
/// baby steps of A and B, `sigma`'s and `tau`'s giant steps, `A0' = rot(A0, -D)`, the baby
/// steps of A0, A0' and B0, `h - 1` rotations of each `rot(B0, D b)`, `h` relinearizations
/// and `h - 1` giant rotations.
fn eager_key_switches(d: usize) -> usize {
    let size = padded(d);
    let g = jiang::baby(d);
    let h = size / g;
    let mut sigma: Vec<i64> = (-(size as i64 - 1)..size as i64)
        .map(|l| l.div_euclid(g as i64))
        .filter(|&a| a != 0)
        .collect();
    sigma.dedup();
    (g - 1)
        + sigma.len()
        + (g - 1)
        + (h - 1)
        + usize::from(size > 1)
        + 3 * (g - 1)
        + g * (h - 1)
        + h
        + (h - 1)
}

/// Rotations and relinearizations of size-3 values in `graph`.
fn key_switches(graph: &heloom_runtime::TaskGraph) -> usize {
    let nodes = graph.nodes();
    nodes
        .iter()
        .filter(|n| match n.op {
            NodeOp::Rotate(..) => true,
            NodeOp::Relinearize(a) => nodes[a].size == 3,
            _ => false,
        })
        .count()
}

#[test]
fn graph_product_matches_plaintext_and_eager() -> R {
    let ctx = Context::<u64>::new(params(1 << 10))?;
    let mut steps: Vec<i64> = DIMS
        .iter()
        .map(|&d| graphs::matmul_encrypted_rotations(d))
        .collect::<Result<Vec<_>, _>>()?
        .concat();
    steps.sort_unstable();
    steps.dedup();
    let keys = keygen(&ctx, &steps, false)?;
    let ev = Evaluator::new(&ctx, Arc::new(keys.evaluation_keys.clone()))?;
    let enc = Encryptor::new(&ctx);
    let dec = Decryptor::new(&ctx, &keys.secret_key)?;
    let top = ctx.max_level();
    assert_eq!(top, MATMUL_ENCRYPTED_LEVELS);
    for d in DIMS {
        let (a, b) = (
            Matrix::random(d, 40 + d as u64),
            Matrix::random(d, 80 + d as u64),
        );
        let ca = enc.encrypt_symmetric(&jiang::pack_matrix(&a)?, &keys.secret_key)?;
        let cb = enc.encrypt_symmetric(&jiang::pack_matrix(&b)?, &keys.secret_key)?;
        assert_eq!(ca.slots(), padded(d) * padded(d));
        let g = graphs::matmul_encrypted_graph(d, ctx.params().moduli(), top, ca.scale())?;
        assert_eq!(g.num_inputs(), 2);
        assert_eq!(g.outputs().len(), 1);
        assert_eq!(
            graphs::required_rotations(&g),
            graphs::matmul_encrypted_rotations(d)?
        );
        assert!(graphs::needs_relinearization(&g));
        assert_eq!(key_switches(&g), eager_key_switches(d), "d = {d}");
        let out = g.run(&ev, &[ca.clone(), cb.clone()])?;
        assert_eq!(out.len(), 1);
        let c = &out[0];
        assert_eq!(c.level(), top - MATMUL_ENCRYPTED_LEVELS);
        assert_eq!(c.size(), 2);
        let got = jiang::unpack_matrix(&dec.decrypt(c)?, d)?;
        let want = a.mul(&b)?;
        let err = max_abs_error(got.data(), want.data());
        eprintln!("d = {d}: graph A B error {err:.2e}");
        assert!(err <= BOUND, "d = {d}: error {err}");
        // The eager product: the same operations, so the same ciphertext.
        let jm = jiang::JiangMultiplier::new(&ctx, d, top, Threads::single())?;
        let eager = jm.multiply(&ev, &ca, &cb)?;
        assert_eq!(c.level(), eager.level());
        assert!(((c.scale() - eager.scale()) / eager.scale()).abs() < 1e-12);
        let eager_m = jiang::unpack_matrix(&dec.decrypt(&eager)?, d)?;
        let diff = max_abs_error(got.data(), eager_m.data());
        assert!(diff <= BOUND, "d = {d}: graph and eager differ by {diff}");
        assert_eq!(
            c.to_bytes(),
            eager.to_bytes(),
            "d = {d}: graph and eager ciphertexts differ"
        );
    }
    Ok(())
}

#[test]
fn rotations_and_key_switches_match_the_eager_product() -> R {
    // N = 2^12: 2048 slots, room for d up to 32 (graphs only, no keys).
    let p = params(1 << 12);
    let moduli = p.moduli();
    for d in (1..=20).chain([31, 32]) {
        let g = graphs::matmul_encrypted_graph(d, moduli, 3, 2f64.powi(30))?;
        let steps = graphs::matmul_encrypted_rotations(d)?;
        assert_eq!(graphs::required_rotations(&g), steps, "d = {d}");
        assert_eq!(steps, jiang::rotation_steps(d));
        let period = (padded(d) * padded(d)) as i64;
        assert!(steps.iter().all(|&s| s > 0 && s < period), "d = {d}");
        assert_eq!(key_switches(&g), eager_key_switches(d), "d = {d}");
        let out = &g.nodes()[g.outputs()[0]];
        assert_eq!(out.level, 0, "d = {d}");
    }
    Ok(())
}

#[test]
fn bad_arguments_are_refused() -> R {
    let p = params(1 << 10);
    let moduli = p.moduli();
    let top = moduli.len() - 1;
    // d = 0.
    let e = invalid(graphs::matmul_encrypted_graph(0, moduli, top, 1e9).expect_err("d = 0"));
    assert!(e.contains("d >= 1"), "{e}");
    assert!(graphs::matmul_encrypted_rotations(0).is_err());
    // Too few levels, a level beyond the chain.
    let e = invalid(graphs::matmul_encrypted_graph(4, moduli, 2, 1e9).expect_err("level 2"));
    assert!(e.contains("3 levels") && e.contains("level 2"), "{e}");
    assert!(graphs::matmul_encrypted_graph(4, moduli, top + 1, 1e9).is_err());
    assert!(graphs::matmul_encrypted_graph(4, &[], 3, 1e9).is_err());
    // D^2 above the 512 slots of N = 2^10: d = 17 pads to 32 (1024 slots); d = 16 fits.
    let e = invalid(graphs::matmul_encrypted_graph(17, moduli, top, 1e9).expect_err("d = 17"));
    assert!(e.contains("1024 slots") && e.contains("d <= 16"), "{e}");
    assert!(graphs::matmul_encrypted_graph(16, moduli, top, 1e9).is_ok());
    // Sides no supported ring packs.
    let e = invalid(graphs::matmul_encrypted_rotations(1000).expect_err("d = 1000"));
    assert!(e.contains("d <= 256"), "{e}");
    // A bad scale is the builder's error.
    assert!(graphs::matmul_encrypted_graph(4, moduli, top, 0.0).is_err());
    Ok(())
}
