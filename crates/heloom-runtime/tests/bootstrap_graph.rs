//! Automatic bootstrapping in task graphs: a builder made with
//! [`GraphBuilder::with_bootstrapping`] records a bootstrap wherever a multiplication meets an
//! operand at level 0 and before a polynomial deeper than its input's levels; the graph
//! survives its binary format, runs on an `AutoBootstrap` and decrypts to the clear result,
//! and is refused with a reason by a backend that does not bootstrap; with sparse packing too.
//!
//! Setting: N = 2^10 (insecure, for speed), Hamming weight 16, two computation levels. Bound:
//! a bootstrap comes back within 2^-20 of its input at these settings (heloom-ckks' bootstrap
//! tests measure 2^-24 to 2^-26); x^32 multiplies its input's error by up to 32 (measured
//! 2^-21.8 with two bootstraps, the cubic polynomial 2^-26.2), so 2^-16 on values of magnitude
//! <= 1.9 leaves room for other draws.

#![allow(clippy::unwrap_used)]

use heloom_ckks::circuits::bootstrap::{AutoBootstrap, BootstrapConfig, Bootstrapper};
use heloom_ckks::*;
use heloom_runtime::graph::{GraphBuilder, NodeOp, TaskKind};
use heloom_runtime::TaskGraph;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::sync::Arc;

const H: usize = 16;
const BOUND: f64 = 1.0 / 65536.0;

struct Setup {
    ctx: Arc<Context<u64>>,
    keys: KeySet<u64>,
    auto: AutoBootstrap<u64>,
}

fn setup() -> Setup {
    setup_slots(None)
}

/// [`setup`], bootstrapping `slots` slots (sparse packing) when given.
fn setup_slots(slots: Option<usize>) -> Setup {
    let config = BootstrapConfig::for_hamming_weight(H);
    let params = CkksParameters::builder(1 << 10)
        .prime_bits(config.chain_bits(50, &[40, 40]))
        .special_bits(60)
        .security(SecurityLevel::None)
        .secret(SecretDistribution::FixedHamming(H))
        .build()
        .unwrap();
    let ctx = Context::new(params).unwrap();
    let n = slots.unwrap_or(ctx.n() / 2);
    let boot = Bootstrapper::with_slots(&ctx, config, n, Threads::new(2)).unwrap();
    assert_eq!(boot.output_level(), 2);
    let keys = keygen(&ctx, &boot.rotation_steps(), true).unwrap();
    let ev = Evaluator::new(&ctx, Arc::new(keys.evaluation_keys.clone()))
        .unwrap()
        .with_threads(Threads::new(2));
    Setup {
        ctx,
        keys,
        auto: AutoBootstrap::new(ev, boot),
    }
}

fn bootstraps(g: &TaskGraph) -> usize {
    g.nodes()
        .iter()
        .filter(|n| matches!(n.op, NodeOp::Bootstrap(_)))
        .count()
}

#[test]
fn graphs_bootstrap_when_their_levels_run_out() {
    let s = setup();
    let top = s.auto.max_levels();
    let scale = s.ctx.params().scale();
    let slots = s.ctx.n() / 2;
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let z: Vec<f64> = (0..slots).map(|_| rng.gen_range(-1.0..1.0)).collect();

    // x^32 by five squarings from level 2: bootstraps before the third and the fifth.
    let b = GraphBuilder::new("x^32", s.ctx.params().moduli())
        .with_bootstrapping(top)
        .unwrap();
    let x = b.input(top, scale).unwrap();
    let mut v = x;
    for _ in 0..5 {
        v = b.mul_relin_rescale(&v, &v).unwrap();
    }
    let g = b.finish(&[v]).unwrap();
    assert_eq!(bootstraps(&g), 2);
    let boot_tasks = g
        .tasks()
        .iter()
        .filter(|t| t.kind == TaskKind::Bootstrap)
        .count();
    assert_eq!(boot_tasks, 2, "each bootstrap is a task of its own");

    // The binary format keeps them.
    let back = TaskGraph::from_bytes(&g.to_bytes()).unwrap();
    assert_eq!(back.nodes(), g.nodes());

    let ct = Encryptor::new(&s.ctx)
        .encrypt(&z, &s.keys.public_key)
        .unwrap();
    let ct = s.auto.evaluator().drop_to_level(&ct, top).unwrap();
    let out = back.run(&s.auto, std::slice::from_ref(&ct)).unwrap();
    assert_eq!(s.auto.bootstraps(), 2);
    let dec = Decryptor::new(&s.ctx, &s.keys.secret_key).unwrap();
    let got = dec.decrypt(&out[0]).unwrap();
    let err = got
        .iter()
        .zip(&z)
        .map(|(g, w)| (g - w.powi(32)).abs())
        .fold(0.0, f64::max);
    eprintln!("x^32 with 2 bootstraps: max error 2^{:.1}", err.log2());
    assert!(err < BOUND, "max error {err:e}");

    // A backend that does not bootstrap refuses the node with the reason.
    let e = back.run(s.auto.evaluator(), &[ct]).unwrap_err();
    assert!(e.to_string().contains("does not bootstrap"), "{e}");
}

#[test]
fn polynomials_bootstrap_an_input_with_too_few_levels() {
    let s = setup();
    let top = s.auto.max_levels();
    let scale = s.ctx.params().scale();
    let slots = s.ctx.n() / 2;
    let mut rng = ChaCha8Rng::seed_from_u64(6);
    let z: Vec<f64> = (0..slots).map(|_| rng.gen_range(-1.0..1.0)).collect();
    // 1 + x/2 + x^2/4 + x^3/8: depth 2, from an input at level 0.
    let coeffs = [1.0, 0.5, 0.25, 0.125];
    let want: Vec<f64> = z
        .iter()
        .map(|x| coeffs.iter().rev().fold(0.0, |acc, c| acc * x + c))
        .collect();

    // Without bootstrapping the builder refuses; with it the graph bootstraps first.
    let plain = GraphBuilder::new("p", s.ctx.params().moduli());
    let x = plain.input(0, scale).unwrap();
    let e = evaluate_polynomial_on(&plain, &x, &coeffs, PolyBasis::Power).unwrap_err();
    assert!(matches!(e, CkksError::OutOfLevels { .. }), "{e}");
    let b = GraphBuilder::new("p", s.ctx.params().moduli())
        .with_bootstrapping(top)
        .unwrap();
    let x = b.input(0, scale).unwrap();
    let y = evaluate_polynomial_on(&b, &x, &coeffs, PolyBasis::Power).unwrap();
    let g = b.finish(&[y]).unwrap();
    assert_eq!(bootstraps(&g), 1);
    assert!(matches!(g.nodes()[1].op, NodeOp::Bootstrap(0)));

    let ct = Encryptor::new(&s.ctx)
        .encrypt(&z, &s.keys.public_key)
        .unwrap();
    let low = s.auto.evaluator().drop_to_level(&ct, 0).unwrap();
    let dec = Decryptor::new(&s.ctx, &s.keys.secret_key).unwrap();
    let check = |out: &Ciphertext<u64>, what: &str| {
        let got = dec.decrypt(out).unwrap();
        let err = got
            .iter()
            .zip(&want)
            .map(|(g, w)| (g - w).abs())
            .fold(0.0, f64::max);
        eprintln!("{what}: max error 2^{:.1}", err.log2());
        assert!(err < BOUND, "{what}: max error {err:e}");
    };
    check(
        &g.run(&s.auto, std::slice::from_ref(&low)).unwrap()[0],
        "graph",
    );
    // The same automatic bootstrap on the backend directly.
    let direct = evaluate_polynomial_on(&s.auto, &low, &coeffs, PolyBasis::Power).unwrap();
    check(&direct, "AutoBootstrap");
    assert_eq!(s.auto.bootstraps(), 2);

    let e = GraphBuilder::new("p", s.ctx.params().moduli())
        .with_bootstrapping(0)
        .unwrap_err();
    assert!(e.to_string().contains("level from 1"), "{e}");
}

/// Sparse packing in a graph: the x^32 graph on 64 values with a 64-slot bootstrapper, the
/// bootstraps keeping the slot count, within the same bound.
#[test]
fn graphs_bootstrap_sparse_packing() {
    let n = 64;
    let s = setup_slots(Some(n));
    let top = s.auto.max_levels();
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let z: Vec<f64> = (0..n).map(|_| rng.gen_range(-1.0..1.0)).collect();
    let b = GraphBuilder::new("x^32", s.ctx.params().moduli())
        .with_bootstrapping(top)
        .unwrap();
    let x = b.input(top, s.ctx.params().scale()).unwrap();
    let mut v = x;
    for _ in 0..5 {
        v = b.mul_relin_rescale(&v, &v).unwrap();
    }
    let g = b.finish(&[v]).unwrap();
    assert_eq!(bootstraps(&g), 2);
    let ct = Encryptor::new(&s.ctx)
        .encrypt(&z, &s.keys.public_key)
        .unwrap();
    assert_eq!(ct.slots(), n);
    let ct = s.auto.evaluator().drop_to_level(&ct, top).unwrap();
    let out = g.run(&s.auto, &[ct]).unwrap();
    assert_eq!(s.auto.bootstraps(), 2);
    assert_eq!(out[0].slots(), n);
    let got = Decryptor::new(&s.ctx, &s.keys.secret_key)
        .unwrap()
        .decrypt(&out[0])
        .unwrap();
    let err = got
        .iter()
        .zip(&z)
        .map(|(g, w)| (g - w.powi(32)).abs())
        .fold(0.0, f64::max);
    eprintln!(
        "x^32 on {n} slots with 2 bootstraps: max error 2^{:.1}",
        err.log2()
    );
    assert!(err < BOUND, "max error {err:e}");
}
