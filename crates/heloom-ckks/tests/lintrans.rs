//! Linear transforms (`circuits::lintrans`) against the plain sum `sum_i diag_i ⊙ rot(v, i)`.
//!
//! Bound: 64-bit words, scale 2^40, N = 2^13, inputs and diagonal values in [-1, 1]: every
//! output slot within 2^-20 of the plain result (up to 64 products summed, each with the
//! rounding noise of one plaintext multiply and one rotation).

mod common;

use common::secure_params;
use heloom_ckks::circuits::lintrans::{baby_steps, hoisted_baby_steps, rotate_values};
use heloom_ckks::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::sync::Arc;

const BOUND: f64 = 1.0 / (1u64 << 20) as f64;

fn random(rng: &mut ChaCha8Rng, n: usize) -> Vec<f64> {
    (0..n).map(|_| rng.gen_range(-1.0..1.0)).collect()
}

/// `sum_i diag_i[t] * v[(t + i) mod L]`.
fn plain(diags: &[Vec<f64>], v: &[f64]) -> Vec<f64> {
    let l = v.len();
    (0..l)
        .map(|t| {
            diags
                .iter()
                .enumerate()
                .map(|(i, d)| d[t] * v[(t + i) % l])
                .sum()
        })
        .collect()
}

struct Setup {
    ctx: Arc<Context<u64>>,
    keys: KeySet<u64>,
}

fn setup(steps: &[i64]) -> Setup {
    let ctx = Context::<u64>::new(secure_params(2)).expect("context");
    let keys = keygen(&ctx, steps, false).expect("keygen");
    Setup { ctx, keys }
}

fn encrypt(s: &Setup, v: &[f64]) -> Ciphertext<u64> {
    Encryptor::new(&s.ctx)
        .encrypt(v, &s.keys.public_key)
        .expect("encrypt")
}

/// Applies the transform to `ct` (encrypting `v`) on `threads` and checks it against the plain
/// sum; returns the result.
fn check(
    s: &Setup,
    t: &LinearTransform<u64>,
    diags: &[Vec<f64>],
    (ct, v): (&Ciphertext<u64>, &[f64]),
    threads: usize,
) -> Ciphertext<u64> {
    let ev = Evaluator::new(&s.ctx, Arc::new(s.keys.evaluation_keys.clone()))
        .expect("evaluator")
        .with_threads(Threads::new(threads));
    let dec = Decryptor::new(&s.ctx, &s.keys.secret_key).expect("decryptor");
    let out = t.apply_rescaled(&ev, ct).expect("apply");
    assert_eq!(out.level(), t.level() - 1);
    assert!((out.scale() / ct.scale() - 1.0).abs() < 1e-9);
    let got = dec.decrypt(&out).expect("decrypt");
    let want = plain(diags, v);
    let err = got
        .iter()
        .zip(&want)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f64::max);
    assert!(err < BOUND, "max error {err:e} > {BOUND:e}");
    out
}

#[test]
fn banded_transform_on_packed_slots() {
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let period = 64;
    // Diagonals 0..8 and 40..48 non-zero: the giant groups 1..5 and 6.. are skipped.
    let diags: Vec<Vec<f64>> = (0..period)
        .map(|i| {
            if i < 8 || (40..48).contains(&i) {
                random(&mut rng, period)
            } else {
                vec![0.0; period]
            }
        })
        .collect();
    let baby = baby_steps(period);
    assert_eq!(baby, 8);
    let probe = Context::<u64>::new(secure_params(2)).expect("context");
    let t = LinearTransform::new(
        &probe,
        period,
        period,
        baby,
        2,
        |i| diags[i].clone(),
        Threads::new(2),
    )
    .expect("transform");
    assert_eq!(t.nonzero_diagonals(), 16);
    assert_eq!(t.used_steps(), vec![1, 2, 3, 4, 5, 6, 7, 40]);
    assert_eq!((t.period(), t.level(), t.baby()), (period, 2, 8));
    // Keys for exactly the steps used, on a context the transform was not built on (equal
    // parameters).
    let s = setup(&t.used_steps());
    let v = random(&mut rng, period);
    let ct = encrypt(&s, &v);
    let one = check(&s, &t, &diags, (&ct, &v), 1);
    // The giant groups dealt out to three threads: exactly the same ciphertext.
    let three = check(&s, &t, &diags, (&ct, &v), 3);
    assert!(one.polys() == three.polys());
}

#[test]
fn dense_transform_on_all_slots_with_a_lower_input_level() {
    let mut rng = ChaCha8Rng::seed_from_u64(2);
    let s0 = Context::<u64>::new(secure_params(2)).expect("context");
    let period = s0.params().slots();
    // 12 dense diagonals over all N/2 slots, baby 4: giant steps 4 and 8.
    let count = 12;
    let diags: Vec<Vec<f64>> = (0..count).map(|_| random(&mut rng, period)).collect();
    let t = LinearTransform::new(
        &s0,
        period,
        count,
        4,
        1,
        |i| diags[i].clone(),
        Threads::single(),
    )
    .expect("transform");
    assert_eq!(t.used_steps(), vec![1, 2, 3, 4, 8]);
    let s = setup(&t.used_steps());
    // A fresh ciphertext (level 2) is dropped to the transform's level 1 first.
    let v = random(&mut rng, period);
    let mut padded = diags.clone();
    padded.resize(period, vec![0.0; period]);
    check(&s, &t, &padded, (&encrypt(&s, &v), &v), 2);
}

#[test]
fn zero_transform_and_bad_inputs() {
    let ctx = Context::<u64>::new(secure_params(2)).expect("context");
    let zero = LinearTransform::new(&ctx, 16, 16, 4, 2, |_| vec![0.0; 16], Threads::single())
        .expect("zero");
    assert_eq!((zero.nonzero_diagonals(), zero.used_steps().len()), (0, 0));
    let s = setup(&[]);
    let ev = Evaluator::new(&s.ctx, Arc::new(s.keys.evaluation_keys.clone())).expect("ev");
    let enc = Encryptor::new(&s.ctx);
    let dec = Decryptor::new(&s.ctx, &s.keys.secret_key).expect("decryptor");
    let ct = enc
        .encrypt(&[0.5; 16], &s.keys.public_key)
        .expect("encrypt");
    let out = zero.apply_rescaled(&ev, &ct).expect("zero apply");
    assert!(dec
        .decrypt(&out)
        .expect("decrypt")
        .iter()
        .all(|x| x.abs() < BOUND));

    let ok = |i: usize| vec![i as f64 / 16.0; 16];
    // The error of a transform that must be refused.
    let refused = |period, count, baby, level, diagonal: &dyn Fn(usize) -> Vec<f64>| {
        match LinearTransform::new(
            &ctx,
            period,
            count,
            baby,
            level,
            diagonal,
            Threads::single(),
        ) {
            Err(e) => e.to_string(),
            Ok(_) => panic!("accepted"),
        }
    };
    assert!(refused(12, 12, 4, 2, &ok).contains("power-of-two"));
    assert!(refused(16, 17, 4, 2, &ok).contains("at most 16"));
    assert!(refused(16, 16, 0, 2, &ok).contains("baby-step"));
    assert!(refused(16, 16, 4, 0, &ok).contains("level 0"));
    assert!(refused(16, 16, 4, 3, &ok).contains("level 3"));
    assert!(refused(16, 4, 2, 2, &|_| vec![1.0; 8]).contains("8 values"));
    assert!(refused(16, 4, 2, 2, &|_| vec![f64::NAN; 16]).contains("finite"));

    // Inputs: wrong slot count, a level below the transform's, missing keys.
    let t = LinearTransform::new(&ctx, 16, 16, 4, 1, ok, Threads::single()).expect("t");
    let wide = enc
        .encrypt(&[0.5; 32], &s.keys.public_key)
        .expect("encrypt");
    let msg = t.apply(&ev, &wide).err().map(|e| e.to_string());
    assert!(msg.is_some_and(|m| m.contains("32 slots")));
    let low = ev
        .rescale(&ev.multiply_const(&ct, 1.0).expect("m"))
        .expect("r");
    let high = LinearTransform::new(&ctx, 16, 16, 4, 2, ok, Threads::single()).expect("t");
    assert!(matches!(
        high.apply(&ev, &low),
        Err(CkksError::OutOfLevels { .. })
    ));
    assert!(t.apply(&ev, &ct).is_err(), "no Galois keys: must fail");
    // The values helper rotates left.
    assert_eq!(rotate_values(&[1.0, 2.0, 3.0], 1), vec![2.0, 3.0, 1.0]);
    assert_eq!(rotate_values(&[1.0, 2.0, 3.0], -1), vec![3.0, 1.0, 2.0]);
}

#[test]
fn hoisted_baby_steps_weigh_a_giant_rotation_as_two_baby_ones() {
    // (b - 1) + 2 ceil(n / b): n = 63 gives 8 (7 + 2 * 8 = 23, against 3 + 32 at b = 4
    // and a tie with b = 16, broken to the smaller b); n = 15 ties 4 and 8; n = 31 gives 8.
    assert_eq!(hoisted_baby_steps(63), 8);
    assert_eq!(hoisted_baby_steps(31), 8);
    assert_eq!(hoisted_baby_steps(15), 4);
    assert_eq!(hoisted_baby_steps(3), 2);
    assert_eq!(hoisted_baby_steps(1), 1);
    assert_eq!(hoisted_baby_steps(0), 1);
    assert_eq!(hoisted_baby_steps(1023), 32);
}

/// `apply_with` (the schedule other backends run, here on the CPU evaluator with its own
/// plaintexts) is `apply` word for word: a dense transform, and a sparse complex one in Horner
/// form, with hoisted and with power-of-two baby steps.
#[test]
fn apply_with_is_apply_word_for_word() {
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let ctx = Context::<u64>::new(secure_params(2)).expect("context");
    let period = 64;
    let diags: Vec<Vec<f64>> = (0..period).map(|_| random(&mut rng, period)).collect();
    let dense = LinearTransform::new(
        &ctx,
        period,
        period,
        8,
        2,
        |i| diags[i].clone(),
        Threads::new(2),
    )
    .expect("dense");
    // Offsets around 0 in both directions and one far one: Horner chains both ways.
    let offsets: Vec<usize> = (0..6).chain(52..64).chain([30]).collect();
    let sparse = |lean: bool| {
        LinearTransform::new_sparse_complex(
            &ctx,
            period,
            &offsets,
            2,
            |o| {
                (0..period)
                    .map(|t| num_complex::Complex64::new((o + t) as f64 / 97.0, -(t as f64) / 89.0))
                    .collect()
            },
            Threads::new(2),
        )
        .expect("sparse")
        .with_fewer_keys(lean)
    };
    let transforms = [dense, sparse(false), sparse(true)];
    let mut steps: Vec<i64> = transforms.iter().flat_map(|t| t.used_steps()).collect();
    steps.sort_unstable();
    steps.dedup();
    let s = setup(&steps);
    let ev = Evaluator::new(&s.ctx, Arc::new(s.keys.evaluation_keys.clone()))
        .expect("evaluator")
        .with_threads(Threads::new(2));
    let ct = encrypt(&s, &random(&mut rng, period));
    for t in &transforms {
        let pts: Vec<Plaintext<u64>> = t
            .plaintexts()
            .expect("plaintexts")
            .into_iter()
            .map(|p| p.into_owned())
            .collect();
        let want = t.apply(&ev, &ct).expect("apply");
        let got = t.apply_with(&ev, &ct, &pts).expect("apply_with");
        assert!(got.polys() == want.polys(), "apply_with differs from apply");
        assert_eq!((got.level(), got.scale()), (want.level(), want.scale()));
        let e = t
            .apply_with(&ev, &ct, &pts[1..])
            .expect_err("a diagonal short");
        assert!(e.to_string().contains("diagonals"), "{e}");
    }
}
