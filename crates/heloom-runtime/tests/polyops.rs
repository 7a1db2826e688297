//! Rotations and slot-wise plaintext products through [`PolyOps`]: on the CPU evaluator
//! directly and recorded into task graphs run on it, decrypted against the clear result.

#![allow(clippy::unwrap_used)]

#[path = "../../heloom-ckks/tests/common/mod.rs"]
mod common;

use common::{max_err, rand_vec, Setup};
use heloom_ckks::circuits::lintrans::rotate_values;
use heloom_ckks::*;
use heloom_runtime::graph::{GraphBuilder, NodeOp, TaskKind, Value};
use heloom_runtime::{ContentionClass, CostModel, OpKind, TaskGraph};

/// Largest slot error allowed after a rotation or a plaintext product and rescale at scale
/// 2^40 with N = 2^12 (the observed error is about 1e-9).
const BOUND: f64 = 1e-6;

const STEPS: [i64; 3] = [1, -3, 5];

fn setup() -> Setup<u64> {
    Setup::new(common::insecure_deep_params(), &STEPS, false)
}

fn decrypt(s: &Setup<u64>, ct: &Ciphertext<u64>) -> Vec<f64> {
    s.dec.decrypt(ct).unwrap()
}

/// `values` repeated with the encoder's period: padded with zeros to a power of two, then
/// tiled over `slots`.
fn tiled(values: &[f64], slots: usize) -> Vec<f64> {
    let p = values.len().next_power_of_two();
    (0..slots)
        .map(|i| values.get(i % p).copied().unwrap_or(0.0))
        .collect()
}

fn product(a: &[f64], b: &[f64]) -> Vec<f64> {
    a.iter().zip(b).map(|(x, y)| x * y).collect()
}

#[test]
fn rotate_and_rotate_many_on_the_cpu() {
    let s = setup();
    let slots = s.ctx.n() / 2;
    let xs = rand_vec(1, slots);
    let ct = s.enc.encrypt(&xs, &s.keys.public_key).unwrap();
    for step in STEPS {
        let r = PolyOps::rotate(&s.ev, &ct, step).unwrap();
        assert_eq!((r.level(), r.size()), (ct.level(), 2));
        let err = max_err(&decrypt(&s, &r), &rotate_values(&xs, step));
        assert!(err < BOUND, "rotate {step}: {err}");
    }
    // A step of a whole period needs no key and changes nothing.
    let same = PolyOps::rotate(&s.ev, &ct, slots as i64).unwrap();
    assert!(same.polys() == ct.polys());
    // The hoisted override and the per-step default agree on the values.
    let many = PolyOps::rotate_many(&s.ev, &ct, &STEPS).unwrap();
    assert_eq!(many.len(), STEPS.len());
    for (r, step) in many.iter().zip(STEPS) {
        let err = max_err(&decrypt(&s, r), &rotate_values(&xs, step));
        assert!(err < BOUND, "rotate_many {step}: {err}");
    }
    // A step without its Galois key.
    let e = PolyOps::rotate(&s.ev, &ct, 2).unwrap_err();
    assert!(
        matches!(
            e,
            CkksError::MissingKey {
                key: MissingKeyKind::Galois { .. },
                ..
            }
        ),
        "{e:?}"
    );
    assert!(PolyOps::rotate_many(&s.ev, &ct, &[1, 2]).is_err());
    // Three polynomials must be relinearized first.
    let sq = PolyOps::square(&s.ev, &ct).unwrap();
    assert!(matches!(
        PolyOps::rotate(&s.ev, &sq, 1),
        Err(CkksError::InvalidInput(_))
    ));
}

#[test]
fn multiply_plain_slots_on_the_cpu() {
    let s = setup();
    let slots = s.ctx.n() / 2;
    let xs = rand_vec(2, slots);
    let ct = s.enc.encrypt(&xs, &s.keys.public_key).unwrap();
    let q = s.ctx.params().moduli()[ct.level()] as f64;
    // Full length, a shorter power of two (repeats with period 4), and a length of 3
    // (padded with a zero to 4, then repeated).
    for values in [
        rand_vec(3, slots),
        vec![0.5, -2.0, 1.25, 3.0],
        vec![1.5, -0.75, 2.0],
    ] {
        let m = PolyOps::multiply_plain_slots(&s.ev, &ct, &values).unwrap();
        assert_eq!(m.level(), ct.level());
        assert!((m.scale() / (ct.scale() * q) - 1.0).abs() < 1e-12);
        let r = PolyOps::rescale(&s.ev, &m).unwrap();
        assert!((r.scale() / ct.scale() - 1.0).abs() < 1e-9);
        let want = product(&xs, &tiled(&values, slots));
        let err = max_err(&decrypt(&s, &r), &want);
        assert!(err < BOUND, "{} values: {err}", values.len());
    }
    // Bad lengths and values, and no level left to rescale.
    for bad in [vec![], vec![1.0; slots + 1], vec![f64::NAN]] {
        let e = PolyOps::multiply_plain_slots(&s.ev, &ct, &bad).unwrap_err();
        assert!(matches!(e, CkksError::InvalidInput(_)), "{e:?}");
    }
    let low = PolyOps::drop_to_level(&s.ev, &ct, 0).unwrap();
    assert!(matches!(
        PolyOps::multiply_plain_slots(&s.ev, &low, &[1.0]),
        Err(CkksError::OutOfLevels { .. })
    ));
}

/// `rot(x, 1) * v + rot(x, -3) * v` (sharing `v`), rescaled, and `rot(x, 5) * w` rescaled.
fn record<O: PolyOps>(ops: &O, x: &O::Ct, v: &[f64], w: &[f64]) -> Result<Vec<O::Ct>> {
    let r = ops.rotate_many(x, &[1, -3])?;
    let a = ops.multiply_plain_slots(&r[0], v)?;
    let b = ops.multiply_plain_slots(&r[1], v)?;
    let sum = ops.rescale(&ops.add(&a, &b)?)?;
    let c = ops.rotate(x, 5)?;
    let d = ops.rescale(&ops.multiply_plain_slots(&c, w)?)?;
    Ok(vec![sum, d])
}

fn graph(s: &Setup<u64>, ct: &Ciphertext<u64>, v: &[f64], w: &[f64]) -> TaskGraph {
    let b = GraphBuilder::new("rotate-mul-plain", s.ctx.params().moduli());
    let x = b.input(ct.level(), ct.scale()).unwrap();
    let outs = record(&b, &x, v, w).unwrap();
    b.finish(&outs).unwrap()
}

#[test]
fn graphs_with_rotations_and_plaintexts_compute_what_the_evaluator_does() {
    let s = setup();
    let slots = s.ctx.n() / 2;
    let xs = rand_vec(4, slots);
    let (v, w) = (rand_vec(5, slots), vec![2.0, -1.0]);
    let ct = s.enc.encrypt(&xs, &s.keys.public_key).unwrap();
    let g = graph(&s, &ct, &v, &w);
    // The shared vector is stored once.
    assert_eq!(g.plains().len(), 2);
    assert_eq!(g.plain(1), Some(&w[..]));
    let ops: Vec<&str> = g.nodes().iter().map(|n| n.op.name()).collect();
    assert_eq!(ops.iter().filter(|&&o| o == "rotate").count(), 3);
    assert_eq!(ops.iter().filter(|&&o| o == "mul-plain").count(), 3);
    assert!(g.to_string().contains("rotate mul-plain"), "{g}");
    let out = g.run(&s.ev, std::slice::from_ref(&ct)).unwrap();
    let direct = record(&s.ev, &ct, &v, &w).unwrap();
    for (a, b) in out.iter().zip(&direct) {
        assert!(a.polys() == b.polys(), "graph and evaluator differ");
        assert!((a.scale() / ct.scale() - 1.0).abs() < 1e-9);
    }
    let rv = |k| rotate_values(&xs, k);
    let want0: Vec<f64> = (0..slots).map(|i| (rv(1)[i] + rv(-3)[i]) * v[i]).collect();
    let want1 = product(&rv(5), &tiled(&w, slots));
    assert!(max_err(&decrypt(&s, &out[0]), &want0) < BOUND);
    assert!(max_err(&decrypt(&s, &out[1]), &want1) < BOUND);
}

/// Milliseconds that tell the op kinds apart.
struct Unit;

impl CostModel for Unit {
    fn op_ms(&self, op: OpKind, nq: usize, _threads: usize) -> f64 {
        let per = match op {
            OpKind::Relin => 100.0,
            OpKind::MulPlain => 10.0,
            OpKind::Rescale => 1.0,
            _ => 0.0,
        };
        per * nq as f64
    }
    fn slowdown(&self, _class: ContentionClass, _busy: f64) -> f64 {
        1.0
    }
    fn task_overhead_ms(&self) -> f64 {
        0.0
    }
    fn capacity(&self) -> usize {
        1
    }
}

#[test]
fn rotations_cost_a_key_switch_and_plaintexts_a_plain_product() {
    let m = common::insecure_deep_params().moduli().to_vec();
    let top = m.len() - 1;
    let b = GraphBuilder::new("costs", &m);
    let x = b.input(top, 2f64.powi(40)).unwrap();
    let r = b.rotate(&x, 7).unwrap();
    b.end_task(&r);
    let p = b.multiply_plain_slots(&r, &[1.0, 2.0]).unwrap();
    let out = b.rescale(&p).unwrap();
    // Rotating by 0 records nothing.
    assert_eq!(b.rotate(&out, 0).unwrap(), out);
    let g = b.finish(&[out]).unwrap();
    assert!(matches!(g.nodes()[r.node].op, NodeOp::Rotate(_, 7)));
    assert!(matches!(g.nodes()[p.node].op, NodeOp::MulPlain(_, 0)));
    let kinds: Vec<TaskKind> = g.tasks().iter().map(|t| t.kind).collect();
    assert_eq!(kinds, [TaskKind::Other, TaskKind::MulPlainRescale]);
    let nq = (top + 1) as f64;
    assert_eq!(g.task_cost(&Unit, 0, 1).keyswitch_ms, 100.0 * nq);
    assert_eq!(g.task_cost(&Unit, 1, 1).total(), 11.0 * nq);
    // What the builder refuses: three polynomials, an empty or non-finite vector, level 0.
    let b = GraphBuilder::new("bad", &m);
    let x = b.input(top, 2f64.powi(40)).unwrap();
    let sq = b.square(&x).unwrap();
    assert!(matches!(b.rotate(&sq, 1), Err(CkksError::InvalidInput(_))));
    assert!(matches!(
        b.multiply_plain_slots(&x, &[]),
        Err(CkksError::InvalidInput(_))
    ));
    assert!(matches!(
        b.multiply_plain_slots(&x, &[f64::INFINITY]),
        Err(CkksError::InvalidInput(_))
    ));
    let low = b.drop_to_level(&x, 0).unwrap();
    assert!(matches!(
        b.multiply_plain_slots(&low, &[1.0]),
        Err(CkksError::OutOfLevels { .. })
    ));
}

#[test]
fn running_needs_the_keys_and_a_fitting_vector() {
    let s = setup();
    let slots = s.ctx.n() / 2;
    let ct = s.enc.encrypt(&[0.5; 8], &s.keys.public_key).unwrap();
    let run = |f: &dyn Fn(&GraphBuilder, Value) -> Value| {
        let b = GraphBuilder::new("one", s.ctx.params().moduli());
        let x = b.input(ct.level(), ct.scale()).unwrap();
        let y = f(&b, x);
        b.finish(&[y])
            .unwrap()
            .run(&s.ev, std::slice::from_ref(&ct))
    };
    // No Galois key for step 2.
    let e = run(&|b, x| b.rotate(&x, 2).unwrap()).unwrap_err();
    assert!(e.to_string().contains("Galois key"), "{e}");
    // A vector longer than the slots is refused when run (the builder knows no N).
    let e = run(&|b, x| b.multiply_plain_slots(&x, &vec![1.0; slots + 1]).unwrap()).unwrap_err();
    assert!(e.to_string().contains("do not fit"), "{e}");
}

/// A baby-step giant-step linear transform written once ([`LinearTransform::apply_on`]) runs on
/// the CPU evaluator and as a task graph, word for word what the CPU fast path computes.
#[test]
fn linear_transforms_run_on_any_backend() {
    use heloom_ckks::circuits::lintrans::{baby_steps, LinearTransform};
    // Six diagonals, two baby steps: baby rotation 1, giant rotations 2 and 4.
    let (count, baby) = (6, baby_steps(6));
    assert_eq!(baby, 2);
    let s = Setup::<u64>::new(common::insecure_deep_params(), &[1, 2, 4], false);
    let slots = s.ctx.n() / 2;
    let diag = |i: usize| -> Vec<f64> {
        if i == 3 {
            // An all-zero diagonal is skipped, with its rotations.
            return vec![0.0; slots];
        }
        rand_vec(10 + i as u64, slots)
    };
    let xs = rand_vec(9, slots);
    let ct = s.enc.encrypt(&xs, &s.keys.public_key).unwrap();
    let lt = LinearTransform::new(
        &s.ctx,
        slots,
        count,
        baby,
        ct.level(),
        diag,
        Threads::single(),
    )
    .unwrap();
    assert_eq!(lt.used_steps(), vec![1, 2, 4]);
    let direct = lt.apply(&s.ev, &ct).unwrap();
    let generic = lt.apply_on(&s.ev, &ct).unwrap();
    assert!(
        generic.polys() == direct.polys(),
        "apply_on differs from apply"
    );
    // Recorded into a task graph: rotations, plaintext products, additions.
    let b = GraphBuilder::new("lintrans", s.ctx.params().moduli());
    let x = b.input(ct.level(), ct.scale()).unwrap();
    let y = lt.apply_on(&b, &x).unwrap();
    let g = b.finish(&[y]).unwrap();
    let names: Vec<&str> = g.nodes().iter().map(|n| n.op.name()).collect();
    assert_eq!(names.iter().filter(|&&o| o == "mul-plain").count(), 5);
    assert_eq!(names.iter().filter(|&&o| o == "rotate").count(), 3);
    let out = g.run(&s.ev, std::slice::from_ref(&ct)).unwrap();
    assert!(out[0].polys() == direct.polys(), "graph differs from apply");
    // T(v)[t] = sum_i diag_i[t] v[(t + i) mod L], after the rescale.
    let want: Vec<f64> = (0..slots)
        .map(|t| (0..count).map(|i| diag(i)[t] * xs[(t + i) % slots]).sum())
        .collect();
    let got = decrypt(&s, &s.ev.rescale(&out[0]).unwrap());
    let err = max_err(&got, &want);
    assert!(err < BOUND, "linear transform error {err}");
    // An input below the transform's level is refused on every backend.
    let low = s.ev.drop_to_level(&ct, ct.level() - 1).unwrap();
    let lt_top = |e: CkksError| matches!(e, CkksError::OutOfLevels { .. });
    assert!(lt_top(lt.apply_on(&s.ev, &low).unwrap_err()));
    let b = GraphBuilder::new("lintrans-low", s.ctx.params().moduli());
    let xl = b.input(low.level(), low.scale()).unwrap();
    assert!(lt_top(lt.apply_on(&b, &xl).unwrap_err()));
}
