//! Thread budgets: every operation of an evaluator built `with_threads(t)` returns exactly the
//! ciphertext of the one-thread evaluator (same polynomials, same serialized bytes), for
//! budgets 1, 2, 3, 4 and 7 and both word sizes, at every level (so that key switching sees
//! even, odd and single digit counts), and the results decrypt correctly.

#![allow(clippy::unwrap_used)]

mod common;

use common::{rand_vec, Bounded};
use heloom_ckks::*;
use heloom_math::Word;

const BUDGETS: [usize; 5] = [1, 2, 3, 4, 7];
const STEPS: [i64; 3] = [1, -3, 5];

/// A pool larger than this machine's core count, so that budgets 3, 4 and 7 really split into
/// that many chunks. Must run before anything touches the pool.
fn init() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        if std::env::var_os("HELOOM_THREADS").is_none() {
            std::env::set_var("HELOOM_THREADS", "8");
        }
    });
}

fn setup<W: Word>(params: CkksParameters, bound: f64) -> Bounded<W> {
    Bounded {
        setup: common::Setup::new(params, &STEPS, true),
        bound,
    }
}

fn same<W: Word>(got: &Ciphertext<W>, want: &Ciphertext<W>, what: &str) {
    assert_eq!(got.level(), want.level(), "{what}: level");
    assert_eq!(got.scale(), want.scale(), "{what}: scale");
    assert_eq!(got.polys(), want.polys(), "{what}: polynomials");
    assert_eq!(got.to_bytes(), want.to_bytes(), "{what}: bytes");
}

fn close<W: Word>(s: &Bounded<W>, ct: &Ciphertext<W>, want: &[f64], bound: f64, what: &str) {
    let got = s.dec.decrypt(ct).unwrap();
    let err = got
        .iter()
        .zip(want)
        .map(|(g, w)| (g - w).abs())
        .fold(0.0, f64::max);
    assert!(err <= bound, "{what}: error {err:e} above {bound:e}");
}

/// Rotation of `x` left by `step` slots.
fn rotated(x: &[f64], step: i64) -> Vec<f64> {
    let n = x.len() as i64;
    (0..n)
        .map(|i| x[(i + step).rem_euclid(n) as usize])
        .collect()
}

/// Runs every operation at `level` with each budget and compares with the one-thread results.
fn check_level<W: Word>(s: &Bounded<W>, level: usize) {
    let slots = s.ctx.params().slots();
    let x = rand_vec(1 + level as u64, slots);
    let y = rand_vec(100 + level as u64, slots);
    let a = s.enc.encrypt(&x, &s.keys.public_key).unwrap();
    let b = s.enc.encrypt(&y, &s.keys.public_key).unwrap();
    let a = s.ev.drop_to_level(&a, level).unwrap();
    let b = s.ev.drop_to_level(&b, level).unwrap();
    let pt = s.ctx.encode_at(&y, level, a.scale()).unwrap();
    let xy: Vec<f64> = x.iter().zip(&y).map(|(p, q)| p * q).collect();
    let xx: Vec<f64> = x.iter().map(|p| p * p).collect();
    let xpy: Vec<f64> = x.iter().zip(&y).map(|(p, q)| p + q).collect();
    let xmy: Vec<f64> = x.iter().zip(&y).map(|(p, q)| p - q).collect();

    let one = &s.ev;
    let mul1 = one.multiply(&a, &b).unwrap();
    let sq1 = one.square(&a).unwrap();
    let mp1 = one.multiply_plain(&a, &pt).unwrap();
    let relin1 = one.relinearize(&mul1).unwrap();
    let add1 = one.add(&a, &b).unwrap();
    let sub1 = one.sub(&a, &b).unwrap();
    let neg1 = one.negate(&a).unwrap();
    let addc1 = one.add_const(&a, 0.375).unwrap();
    let rot1: Vec<Ciphertext<W>> = STEPS.iter().map(|&k| one.rotate(&a, k).unwrap()).collect();
    let many1 = one.rotate_many(&a, &[0, 1, -3, 5]).unwrap();
    let conj1 = one.conjugate(&a).unwrap();
    let tops = (level > 0).then(|| {
        (
            one.rescale(&relin1).unwrap(),
            one.multiply_relin_rescale(&a, &b).unwrap(),
            one.multiply_values(&a, &y).unwrap(),
            one.multiply_const(&a, -0.8125).unwrap(),
        )
    });

    for t in BUDGETS {
        let ev = s.ev.with_threads(Threads::new(t));
        assert_eq!(ev.threads(), Threads::new(t));
        let what = |op: &str| format!("{op}, level {level}, budget {t}, {}-bit", W::BITS);
        let m = ev.multiply(&a, &b).unwrap();
        same(&m, &mul1, &what("multiply"));
        same(&ev.square(&a).unwrap(), &sq1, &what("square"));
        let mp = ev.multiply_plain(&a, &pt).unwrap();
        same(&mp, &mp1, &what("multiply_plain"));
        let r = ev.relinearize(&m).unwrap();
        same(&r, &relin1, &what("relinearize"));
        same(&ev.add(&a, &b).unwrap(), &add1, &what("add"));
        same(&ev.sub(&a, &b).unwrap(), &sub1, &what("sub"));
        same(&ev.negate(&a).unwrap(), &neg1, &what("negate"));
        same(
            &ev.add_const(&a, 0.375).unwrap(),
            &addc1,
            &what("add_const"),
        );
        for (&k, want) in STEPS.iter().zip(&rot1) {
            let got = ev.rotate(&a, k).unwrap();
            same(&got, want, &what(&format!("rotate {k}")));
            close(s, &got, &rotated(&x, k), s.bound, &what("rotate decrypts"));
        }
        let many = ev.rotate_many(&a, &[0, 1, -3, 5]).unwrap();
        for ((got, want), k) in many.iter().zip(&many1).zip([0, 1, -3, 5]) {
            same(got, want, &what(&format!("rotate_many {k}")));
            close(
                s,
                got,
                &rotated(&x, k),
                s.bound,
                &what("rotate_many decrypts"),
            );
        }
        let cj = ev.conjugate(&a).unwrap();
        same(&cj, &conj1, &what("conjugate"));
        close(s, &cj, &x, s.bound, &what("conjugate decrypts"));
        close(s, &ev.add(&a, &b).unwrap(), &xpy, s.bound, &what("add"));
        close(s, &ev.sub(&a, &b).unwrap(), &xmy, s.bound, &what("sub"));
        if let Some((rs1, mrr1, mv1, mc1)) = &tops {
            // Products at scale^2 only fit in the modulus above level 0.
            close(s, &r, &xy, s.bound, &what("relinearize decrypts"));
            close(
                s,
                &ev.square(&a).unwrap(),
                &xx,
                s.bound,
                &what("square decrypts"),
            );
            close(s, &mp, &xy, s.bound, &what("multiply_plain decrypts"));
            let rs = ev.rescale(&r).unwrap();
            same(&rs, rs1, &what("rescale"));
            close(s, &rs, &xy, s.bound, &what("rescale decrypts"));
            let mrr = ev.multiply_relin_rescale(&a, &b).unwrap();
            same(&mrr, mrr1, &what("multiply_relin_rescale"));
            close(
                s,
                &mrr,
                &xy,
                s.bound,
                &what("multiply_relin_rescale decrypts"),
            );
            let mv = ev.multiply_values(&a, &y).unwrap();
            same(&mv, mv1, &what("multiply_values"));
            same(
                &ev.multiply_const(&a, -0.8125).unwrap(),
                mc1,
                &what("multiply_const"),
            );
        }
    }
}

/// Polynomial evaluation (powers, products, rescales, constants) at the top level.
fn check_polynomials<W: Word>(s: &Bounded<W>, bound: f64) {
    let slots = s.ctx.params().slots();
    let x = rand_vec(7, slots);
    let a = s.enc.encrypt(&x, &s.keys.public_key).unwrap();
    let power = [0.5, -1.25, 0.75, 0.0, 0.3125, -0.1];
    let cheb = [0.1, 0.9, -0.2, 0.05];
    let interval = PolyBasis::Chebyshev { a: -2.0, b: 2.0 };
    let want_power: Vec<f64> = x
        .iter()
        .map(|&v| power.iter().rev().fold(0.0, |acc, &c| acc * v + c))
        .collect();
    let p1 =
        s.ev.evaluate_polynomial(&a, &power, PolyBasis::Power)
            .unwrap();
    let c1 = s.ev.evaluate_polynomial(&a, &cheb, interval).unwrap();
    for t in BUDGETS {
        let ev = s.ev.with_threads(Threads::new(t));
        let what = |op: &str| format!("{op}, budget {t}, {}-bit", W::BITS);
        let p = ev
            .evaluate_polynomial(&a, &power, PolyBasis::Power)
            .unwrap();
        same(&p, &p1, &what("evaluate_polynomial (power)"));
        close(
            s,
            &p,
            &want_power,
            bound,
            &what("evaluate_polynomial decrypts"),
        );
        let c = ev.evaluate_polynomial(&a, &cheb, interval).unwrap();
        same(&c, &c1, &what("evaluate_polynomial (Chebyshev)"));
    }
}

/// N = 2^12 parameters without a security bound: `levels` rescalings at `2^scale_bits` on
/// `word_bits`-bit words.
fn insecure(word_bits: u32, levels: usize, scale_bits: u32) -> ParametersBuilder {
    CkksParameters::builder(1 << 12)
        .word_bits(word_bits)
        .levels(levels)
        .scale_bits(scale_bits)
        .security(SecurityLevel::None)
}

fn check_all<W: Word>(s: &Bounded<W>, poly_bound: f64) {
    for level in (0..=s.ctx.max_level()).rev() {
        check_level(s, level);
    }
    check_polynomials(s, poly_bound);
}

#[test]
fn budgets_are_bit_identical_64bit() {
    init();
    if std::env::var("HELOOM_THREADS").as_deref() == Ok("8") {
        // The budgets really split that many ways, whatever this machine's core count.
        assert_eq!(Threads::new(7).chunks_for(1000), 7);
    }
    // Default decomposition: the digit count changes with the level.
    let p = common::insecure_deep_params();
    check_all(&setup::<u64>(p, 2f64.powi(-22)), 2f64.powi(-18));
}

#[test]
fn budgets_are_bit_identical_64bit_odd_digits() {
    init();
    // Three digits of two primes at the top: rounds of digits plus a left-over digit.
    let p = insecure(64, 5, 40)
        .first_bits(50)
        .special_count(2)
        .build()
        .unwrap();
    assert_eq!(p.dnum(), 3);
    check_all(&setup::<u64>(p, 2f64.powi(-22)), 2f64.powi(-18));
}

#[test]
fn budgets_are_bit_identical_32bit() {
    init();
    let p = insecure(32, 4, 28).build().unwrap();
    check_all(&setup::<u32>(p, 2f64.powi(-10)), 2f64.powi(-7));
}

#[test]
fn budgets_are_bit_identical_32bit_one_prime_digits() {
    init();
    // One special prime: a digit per ciphertext prime (SEAL's shape), single-prime mod-up.
    let p = insecure(32, 3, 28).special_count(1).build().unwrap();
    check_all(&setup::<u32>(p, 2f64.powi(-10)), 2f64.powi(-7));
}
