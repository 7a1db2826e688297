//! Task graphs: fusion into the paper's task kinds, and every graph computes what the
//! evaluator computes.

#![allow(clippy::unwrap_used)]

#[path = "../../heloom-ckks/tests/common/mod.rs"]
mod common;

use common::Setup;
use heloom_ckks::*;
use heloom_runtime::graph::{exp_coefficients, exp_graph, polynomial_graph, ExpVariant, TaskKind};

fn setup() -> Setup<u64> {
    Setup::new(common::insecure_deep_params(), &[], false)
}

fn inputs(n: usize) -> Vec<f64> {
    (0..n)
        .map(|i| -1.0 + 2.0 * (i as f64 + 0.5) / n as f64)
        .collect()
}

fn maclaurin6(x: f64) -> f64 {
    exp_coefficients(6)
        .iter()
        .rev()
        .fold(0.0, |acc, c| acc * x + c)
}

#[test]
fn exp_variants_compute_the_maclaurin_polynomial() {
    let s = setup();
    let enc = Encryptor::new(&s.ctx);
    let dec = Decryptor::new(&s.ctx, &s.keys.secret_key).unwrap();
    let xs = inputs(s.ctx.n() / 2);
    let ct = enc.encrypt(&xs, &s.keys.public_key).unwrap();
    let moduli = s.ctx.params().moduli().to_vec();
    for v in ExpVariant::ALL {
        let g = exp_graph(v, &moduli, ct.level(), ct.scale()).unwrap();
        for budget in [1, 2] {
            let out = g
                .run(
                    &s.ev.with_threads(Threads::new(budget)),
                    std::slice::from_ref(&ct),
                )
                .unwrap();
            assert_eq!(out.len(), 1);
            let y = &out[0];
            assert_eq!(y.level(), ct.level() - v.depth(), "{}", v.name());
            assert!((y.scale() / ct.scale() - 1.0).abs() < 1e-9, "{}", v.name());
            let got = dec.decrypt(y).unwrap();
            let err = xs
                .iter()
                .zip(&got)
                .map(|(x, g)| (maclaurin6(*x) - g).abs())
                .fold(0.0, f64::max);
            assert!(err < 1e-5, "{}: max error {err}", v.name());
        }
    }
}

#[test]
fn paper_graph_has_the_papers_task_kinds() {
    let s = setup();
    let moduli = s.ctx.params().moduli().to_vec();
    let g = exp_graph(ExpVariant::Paper, &moduli, 5, 2f64.powi(40)).unwrap();
    println!("{g}");
    let count = |k: TaskKind| g.tasks().iter().filter(|t| t.kind == k).count();
    assert_eq!(count(TaskKind::SquareRelinRescale), 3, "x^2, x^4, x^6");
    assert_eq!(count(TaskKind::MulRelinRescale), 2, "x^3, x^5");
    assert_eq!(count(TaskKind::MulPlainRescale), 6, "x^k / k!");
    assert_eq!(count(TaskKind::Add), 5);
    assert_eq!(g.tasks().len(), 16);
    // x^2 is first, at the input's level: n_q = 6.
    assert_eq!(g.tasks()[0].kind, TaskKind::SquareRelinRescale);
    assert_eq!(g.tasks()[0].nq, 6);
    // Dependencies point backwards and successors mirror them.
    for (i, t) in g.tasks().iter().enumerate() {
        for &d in &t.deps {
            assert!(d < i);
            assert!(g.tasks()[d].succs.contains(&i));
        }
    }
    let h = exp_graph(ExpVariant::Horner, &moduli, 5, 2f64.powi(40)).unwrap();
    let products = |g: &heloom_runtime::TaskGraph| {
        g.tasks()
            .iter()
            .filter(|t| {
                matches!(
                    t.kind,
                    TaskKind::MulRelinRescale | TaskKind::SquareRelinRescale
                )
            })
            .count()
    };
    assert_eq!(products(&g), 5);
    assert_eq!(products(&h), 3);
    let b = exp_graph(ExpVariant::Bsgs, &moduli, 5, 2f64.powi(40)).unwrap();
    assert_eq!(products(&b), 4);
    println!("{h}{b}");
}

#[test]
fn polynomial_graph_matches_the_evaluator_bit_for_bit() {
    let s = setup();
    let enc = Encryptor::new(&s.ctx);
    let xs = inputs(s.ctx.n() / 2);
    let ct = enc.encrypt(&xs, &s.keys.public_key).unwrap();
    let moduli = s.ctx.params().moduli().to_vec();
    let cases: Vec<(Vec<f64>, PolyBasis)> = vec![
        (vec![0.5, -1.25, 0.0, 2.0, 0.125], PolyBasis::Power),
        (exp_coefficients(7), PolyBasis::Power),
        (
            vec![0.1, 0.2, -0.3, 0.4, 0.5, -0.6],
            PolyBasis::Chebyshev { a: -2.0, b: 3.0 },
        ),
        (
            vec![1.0, 0.5, 0.25],
            PolyBasis::Chebyshev { a: -1.0, b: 1.0 },
        ),
    ];
    for (coeffs, basis) in cases {
        let direct = s.ev.evaluate_polynomial(&ct, &coeffs, basis).unwrap();
        let g = polynomial_graph("p", &moduli, ct.level(), ct.scale(), &coeffs, basis).unwrap();
        let via = g.run(&s.ev, std::slice::from_ref(&ct)).unwrap();
        assert_eq!(via[0].level(), direct.level());
        assert_eq!(via[0].scale(), direct.scale());
        assert_eq!(via[0].polys(), direct.polys(), "{coeffs:?} {basis:?}");
    }
}

#[test]
fn mismatched_inputs_are_refused() {
    let s = setup();
    let enc = Encryptor::new(&s.ctx);
    let ct = enc.encrypt(&[0.5], &s.keys.public_key).unwrap();
    let moduli = s.ctx.params().moduli().to_vec();
    let g = exp_graph(ExpVariant::Paper, &moduli, 5, ct.scale()).unwrap();
    let low = s.ev.drop_to_level(&ct, 4).unwrap();
    let err = g.run(&s.ev, &[low]).unwrap_err().to_string();
    assert!(err.contains("level 4"), "{err}");
    assert!(g.run(&s.ev, &[]).is_err());
    assert!(exp_graph(ExpVariant::Paper, &moduli, 3, ct.scale()).is_err());
}
