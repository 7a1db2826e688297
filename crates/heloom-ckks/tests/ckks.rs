//! End-to-end CKKS tests on both word sizes: every operation against plain arithmetic within a
//! stated error bound.
//!
//! Bounds (max absolute error over all slots, inputs in [-1, 1]):
//! - 64-bit words, scale 2^40, N = 2^13: fresh encryption and one multiply + relinearize +
//!   rescale within 2^-25 (the bound); rotations within 2^-24. The noise grows like N
//!   (rounding errors times the secret, summed over N coefficients), so at N = 2^14 the same
//!   operations stay within 2^-24, and a degree-6 polynomial within 2^-20.
//! - 32-bit words, scale 2^28, N = 2^13: within 2^-12 for the same operations (the scale is
//!   2^12 times smaller, so is the precision); polynomials within 2^-9.

#![allow(clippy::unwrap_used)]

mod common;

use common::{max_err, rand_vec, secure_params, Bounded};
use heloom_ckks::*;
use heloom_math::Word;
use std::sync::Arc;

const STEPS: [i64; 5] = [1, -1, 3, 8, 100];

fn setup<W: Word>(params: CkksParameters, bound: f64) -> Bounded<W> {
    let mut steps = STEPS.to_vec();
    steps.extend([2, 4, 16, 32]);
    Bounded {
        setup: common::Setup::new(params, &steps, true),
        bound,
    }
}

fn p64_deep() -> CkksParameters {
    CkksParameters::new(1 << 14, 6, 40, 64).expect("params64 deep")
}

fn p32() -> CkksParameters {
    CkksParameters::new(1 << 13, 4, 28, 32).expect("params32")
}

fn check<W: Word>(s: &Bounded<W>, ct: &Ciphertext<W>, want: &[f64], bound: f64, what: &str) {
    let got = s.dec.decrypt(ct).expect("decrypt");
    let e = max_err(&got, want);
    assert!(
        e < bound,
        "{what}: max error {e:e} (2^{:.1}) over bound {bound:e} (2^{:.1})",
        e.log2(),
        bound.log2()
    );
}

fn basic_ops<W: Word>(s: &Bounded<W>) {
    let n = s.ctx.params().slots();
    let x = rand_vec(1, n);
    let y = rand_vec(2, n);
    let a = s.enc.encrypt(&x, &s.keys.public_key).unwrap();
    let b = s.enc.encrypt_symmetric(&y, &s.keys.secret_key).unwrap();
    assert_eq!(a.level(), s.ctx.max_level());
    assert_eq!(a.size(), 2);
    check(s, &a, &x, s.bound, "public-key encryption");
    check(s, &b, &y, s.bound, "secret-key encryption");

    let sum: Vec<f64> = x.iter().zip(&y).map(|(a, b)| a + b).collect();
    let diff: Vec<f64> = x.iter().zip(&y).map(|(a, b)| a - b).collect();
    let prod: Vec<f64> = x.iter().zip(&y).map(|(a, b)| a * b).collect();
    let neg: Vec<f64> = x.iter().map(|a| -a).collect();
    check(s, &s.ev.add(&a, &b).unwrap(), &sum, s.bound, "add");
    check(s, &s.ev.sub(&a, &b).unwrap(), &diff, s.bound, "sub");
    check(s, &s.ev.negate(&a).unwrap(), &neg, s.bound, "negate");
    check(
        s,
        &s.ev.add_values(&a, &y).unwrap(),
        &sum,
        s.bound,
        "add values",
    );
    check(
        s,
        &s.ev.sub_values(&a, &y).unwrap(),
        &diff,
        s.bound,
        "sub values",
    );
    let pt = s.ctx.encode_at(&y, a.level(), a.scale()).unwrap();
    check(
        s,
        &s.ev.add_plain(&a, &pt).unwrap(),
        &sum,
        s.bound,
        "add plain",
    );
    let plus: Vec<f64> = x.iter().map(|a| a + 0.75).collect();
    check(
        s,
        &s.ev.add_const(&a, 0.75).unwrap(),
        &plus,
        s.bound,
        "add const",
    );

    // multiply + relinearize + rescale
    let m = s.ev.multiply(&a, &b).unwrap();
    assert_eq!(m.size(), 3);
    let r = s.ev.relinearize(&m).unwrap();
    assert_eq!(r.size(), 2);
    let rs = s.ev.rescale(&r).unwrap();
    assert_eq!(rs.level(), a.level() - 1);
    check(s, &rs, &prod, s.bound, "multiply + relinearize + rescale");
    // three-polynomial decryption works too
    check(s, &m, &prod, s.bound, "degree-2 ciphertext");
    // relinearization and rescale merged into one mod-down by q_l P: same level and scale,
    // the same values (one rounding instead of two); a 2-polynomial input is only rescaled.
    let merged = s.ev.relinearize_rescale(&m).unwrap();
    assert_eq!((merged.level(), merged.size()), (rs.level(), 2));
    assert_eq!(merged.scale(), rs.scale());
    check(s, &merged, &prod, s.bound, "merged relinearize + rescale");
    let only = s.ev.relinearize_rescale(&r).unwrap();
    assert_eq!(only.polys(), rs.polys());

    let sq: Vec<f64> = x.iter().map(|a| a * a).collect();
    let q =
        s.ev.rescale(&s.ev.relinearize(&s.ev.square(&a).unwrap()).unwrap())
            .unwrap();
    check(s, &q, &sq, s.bound, "square");

    let mp =
        s.ev.rescale(&s.ev.multiply_values(&a, &y).unwrap())
            .unwrap();
    check(s, &mp, &prod, s.bound, "multiply values");
    assert!(s.ev.scales_match(mp.scale(), a.scale()), "scale restored");
    let mc =
        s.ev.rescale(&s.ev.multiply_const(&a, -0.3).unwrap())
            .unwrap();
    let want: Vec<f64> = x.iter().map(|a| -0.3 * a).collect();
    check(s, &mc, &want, s.bound, "multiply const");
    let mi = s.ev.multiply_int(&a, -3).unwrap();
    let want: Vec<f64> = x.iter().map(|a| -3.0 * a).collect();
    check(s, &mi, &want, 4.0 * s.bound, "multiply int");
    assert_eq!(mi.level(), a.level());

    // levels: dropping is exact, mixing levels aligns.
    let d = s.ev.drop_level(&a).unwrap();
    assert_eq!(d.level(), a.level() - 1);
    check(s, &d, &x, s.bound, "drop level");
    // rs (level L-1, scale ~ s^2/q) + a (level L, scale s): aligned by the evaluator.
    let mix = s.ev.add(&rs, &a).unwrap();
    let want: Vec<f64> = prod.iter().zip(&x).map(|(p, a)| p + a).collect();
    check(
        s,
        &mix,
        &want,
        2.0 * s.bound,
        "add across levels and scales",
    );
}

fn rotations<W: Word>(s: &Bounded<W>) {
    let n = s.ctx.params().slots();
    let x = rand_vec(3, n);
    let a = s.enc.encrypt(&x, &s.keys.public_key).unwrap();
    let rot = |k: i64| -> Vec<f64> {
        (0..n)
            .map(|i| x[((i as i64 + k).rem_euclid(n as i64)) as usize])
            .collect()
    };
    for &k in &STEPS {
        let r = s.ev.rotate(&a, k).unwrap();
        check(s, &r, &rot(k), 2.0 * s.bound, &format!("rotate {k}"));
    }
    let many = s.ev.rotate_many(&a, &STEPS).unwrap();
    for (&k, r) in STEPS.iter().zip(&many) {
        check(s, r, &rot(k), 2.0 * s.bound, &format!("hoisted rotate {k}"));
    }
    // Hoisting permutes the two inner-product sums with a pre-permuted key; that is exactly
    // the textbook form that permutes every digit: the switched c_1 is identical word for word.
    let dec = s.ctx.decompose(&a.polys()[1], a.level()).unwrap();
    let keys = s.ev.evaluation_keys().unwrap();
    for (&k, r) in STEPS.iter().zip(&many) {
        let g = heloom_math::automorphism::galois_element_for_step(s.ctx.n(), k);
        if g == 1 {
            continue;
        }
        let perm = s.ctx.permutation(g).unwrap();
        let key = keys.galois_key(g).unwrap();
        let (_, a1) = s.ctx.key_inner_product(&dec, key, Some(&perm)).unwrap();
        let c1 = s.ctx.mod_down(a1, a.level()).unwrap();
        assert!(
            c1 == r.polys()[1],
            "hoisted rotate {k}: c_1 differs from the textbook form"
        );
    }
    // With no budget for pre-permuted keys the digits are permuted instead: the same words.
    let lean =
        s.ev.with_hoisted_key_budget(0)
            .rotate_many(&a, &STEPS)
            .unwrap();
    for ((&k, r), l) in STEPS.iter().zip(&many).zip(&lean) {
        assert!(
            r.polys() == l.polys(),
            "hoisted rotate {k}: digits permuted differ from the pre-permuted key"
        );
    }
    // rotation of a rescaled ciphertext (lower level)
    let lower =
        s.ev.rescale(&s.ev.multiply_const(&a, 1.0).unwrap())
            .unwrap();
    check(
        s,
        &s.ev.rotate(&lower, 1).unwrap(),
        &rot(1),
        2.0 * s.bound,
        "rotate at lower level",
    );
    // conjugation of complex values
    let z: Vec<Complex64> = x
        .iter()
        .zip(rand_vec(4, n))
        .map(|(&re, im)| Complex64::new(re, im))
        .collect();
    let c = s.enc.encrypt_complex(&z, &s.keys.public_key).unwrap();
    let cj = s.dec.decrypt_complex(&s.ev.conjugate(&c).unwrap()).unwrap();
    let e = z
        .iter()
        .zip(&cj)
        .map(|(a, b)| (a.conj() - b).norm())
        .fold(0.0, f64::max);
    assert!(e < 2.0 * s.bound, "conjugate error {e:e}");
    // rotate-and-sum over 32 slots
    let rs = s.ev.rotate_and_sum(&a, 32).unwrap();
    let want: Vec<f64> = (0..n)
        .map(|i| (0..32).map(|j| x[(i + j) % n]).sum())
        .collect();
    check(s, &rs, &want, 64.0 * s.bound, "rotate and sum");
    // a step without a key is a clear error
    match s.ev.rotate(&a, 5) {
        Err(CkksError::MissingKey {
            key: MissingKeyKind::Galois { element },
            hint,
        }) => {
            assert_eq!(
                element,
                heloom_math::automorphism::galois_element_for_step(s.ctx.n(), 5)
            );
            assert!(hint.contains("rotation step 5"), "{hint}")
        }
        other => panic!("expected MissingKey, got {other:?}"),
    }
}

fn sparse<W: Word>(s: &Bounded<W>) {
    let x = rand_vec(5, 64);
    let a = s.enc.encrypt(&x, &s.keys.public_key).unwrap();
    assert_eq!(a.slots(), 64);
    let got = s.dec.decrypt(&a).unwrap();
    assert_eq!(got.len(), 64);
    check(s, &a, &x, s.bound, "sparse encryption");
    let r = s.ev.rotate(&a, 3).unwrap();
    let want: Vec<f64> = (0..64).map(|i| x[(i + 3) % 64]).collect();
    check(s, &r, &want, 2.0 * s.bound, "sparse rotation");
    // 50 values are padded to 64 slots
    let y = rand_vec(6, 50);
    let b = s.enc.encrypt(&y, &s.keys.public_key).unwrap();
    assert_eq!(b.slots(), 64);
    check(s, &b, &y, s.bound, "padded encryption");
}

fn polynomials<W: Word>(s: &Bounded<W>, bound: f64) {
    let n = s.ctx.params().slots();
    let x = rand_vec(7, n);
    let a = s.enc.encrypt(&x, &s.keys.public_key).unwrap();
    // e^x, degree 6 (Maclaurin), power basis
    let coeffs = [
        1.0,
        1.0,
        0.5,
        1.0 / 6.0,
        1.0 / 24.0,
        1.0 / 120.0,
        1.0 / 720.0,
    ];
    let r =
        s.ev.evaluate_polynomial(&a, &coeffs, PolyBasis::Power)
            .unwrap();
    let want: Vec<f64> = x
        .iter()
        .map(|&v| coeffs.iter().rev().fold(0.0, |acc, c| acc * v + c))
        .collect();
    assert_eq!(
        r.level(),
        a.level() - Evaluator::<W>::polynomial_depth(6, PolyBasis::Power)
    );
    assert!(s.ev.scales_match(r.scale(), a.scale()));
    check(s, &r, &want, bound, "e^x degree 6");
    // The same with the rescales merged into the key switches: the same level and scale.
    let merged = s.ev.with_merged_rescale(true);
    assert!(merged.merged_rescale() && !s.ev.merged_rescale());
    let rm = merged
        .evaluate_polynomial(&a, &coeffs, PolyBasis::Power)
        .unwrap();
    assert_eq!(rm.level(), r.level());
    assert!(s.ev.scales_match(rm.scale(), r.scale()));
    check(s, &rm, &want, bound, "e^x degree 6, merged rescales");
    // degree 3, odd
    let c3 = [0.0, 1.5, 0.0, -0.5];
    let r = s.ev.evaluate_polynomial(&a, &c3, PolyBasis::Power).unwrap();
    let want: Vec<f64> = x.iter().map(|&v| 1.5 * v - 0.5 * v * v * v).collect();
    check(s, &r, &want, bound, "degree 3");
    // Chebyshev on [-1, 1]: T_0..T_5 combination
    let cc = [0.1, -0.4, 0.3, 0.2, -0.1, 0.05];
    let r =
        s.ev.evaluate_polynomial(&a, &cc, PolyBasis::Chebyshev { a: -1.0, b: 1.0 })
            .unwrap();
    let want: Vec<f64> = x
        .iter()
        .map(|&v| {
            let mut t = vec![1.0, v];
            for k in 2..cc.len() {
                t.push(2.0 * v * t[k - 1] - t[k - 2]);
            }
            cc.iter().zip(&t).map(|(c, t)| c * t).sum()
        })
        .collect();
    check(s, &r, &want, bound, "Chebyshev degree 5");
    let rm = merged
        .evaluate_polynomial(&a, &cc, PolyBasis::Chebyshev { a: -1.0, b: 1.0 })
        .unwrap();
    check(s, &rm, &want, bound, "Chebyshev degree 5, merged rescales");
    // Chebyshev on [-2, 2] (affine map first): x/2 mapped, degree 2
    let cc = [0.0, 0.0, 1.0];
    let r =
        s.ev.evaluate_polynomial(&a, &cc, PolyBasis::Chebyshev { a: -2.0, b: 2.0 })
            .unwrap();
    let want: Vec<f64> = x.iter().map(|&v| 2.0 * (v / 2.0).powi(2) - 1.0).collect();
    check(s, &r, &want, bound, "Chebyshev on [-2, 2]");
    // constant and linear
    let r =
        s.ev.evaluate_polynomial(&a, &[0.25], PolyBasis::Power)
            .unwrap();
    check(s, &r, &vec![0.25; n], bound, "constant polynomial");
    let r =
        s.ev.evaluate_polynomial(&a, &[0.25, -2.0], PolyBasis::Power)
            .unwrap();
    let want: Vec<f64> = x.iter().map(|&v| 0.25 - 2.0 * v).collect();
    check(s, &r, &want, bound, "linear polynomial");
    // too deep: clear error
    let deep = vec![0.1; 1 << (s.ctx.max_level() + 1)];
    match s.ev.evaluate_polynomial(&a, &deep, PolyBasis::Power) {
        Err(CkksError::OutOfLevels { level, needed, .. }) => {
            assert_eq!(level, a.level());
            assert!(needed > level);
        }
        other => panic!("expected OutOfLevels, got {other:?}"),
    }
}

fn bad_inputs<W: Word>(s: &Bounded<W>) {
    let n = s.ctx.params().slots();
    assert!(matches!(
        s.enc.encrypt(&vec![0.0; n + 1], &s.keys.public_key),
        Err(CkksError::InvalidInput(_))
    ));
    assert!(matches!(
        s.enc.encrypt(&[], &s.keys.public_key),
        Err(CkksError::InvalidInput(_))
    ));
    assert!(s.enc.encrypt(&[f64::NAN], &s.keys.public_key).is_err());
    let a = s.enc.encrypt(&[0.5], &s.keys.public_key).unwrap();
    let mut low = a.clone();
    while low.level() > 0 {
        low = s.ev.drop_level(&low).unwrap();
    }
    assert!(matches!(
        s.ev.rescale(&low),
        Err(CkksError::OutOfLevels {
            level: 0,
            needed: 1,
            ..
        })
    ));
    assert!(matches!(
        s.ev.drop_level(&low),
        Err(CkksError::OutOfLevels { .. })
    ));
    assert!(s.ev.multiply_const(&low, 0.5).is_err());
    // relinearization without keys
    let bare = Evaluator::without_keys(&s.ctx);
    let m = bare.multiply(&a, &a).unwrap();
    assert!(matches!(
        bare.relinearize(&m),
        Err(CkksError::MissingKey { .. })
    ));
    // multiply of an unrelinearized ciphertext
    assert!(s.ev.multiply(&m, &a).is_err());
    // same-level different scales cannot be aligned
    let mut odd = a.clone();
    odd.set_scale(a.scale() * 1.5);
    assert!(matches!(
        s.ev.add(&a, &odd),
        Err(CkksError::ScaleMismatch(_))
    ));
}

fn foreign<W: Word>(s: &Bounded<W>, other: CkksParameters) {
    // objects of other parameters (or other keys) are refused
    let ctx2 = Context::<W>::new(other).unwrap();
    let keys2 = keygen(&ctx2, &[], false).unwrap();
    let enc2 = Encryptor::new(&ctx2);
    let b = enc2.encrypt(&[0.5], &keys2.public_key).unwrap();
    let a = s.enc.encrypt(&[0.5], &s.keys.public_key).unwrap();
    assert!(matches!(
        s.ev.add(&a, &b),
        Err(CkksError::ParameterMismatch(_))
    ));
    assert!(s.dec.decrypt(&b).is_err());
    assert!(s.enc.encrypt(&[0.5], &keys2.public_key).is_err());
    assert!(Decryptor::new(&s.ctx, &keys2.secret_key).is_err());
}

#[test]
fn ckks_64bit_all_operations() {
    let s = setup::<u64>(secure_params(3), 2f64.powi(-25));
    basic_ops(&s);
    rotations(&s);
    sparse(&s);
    bad_inputs(&s);
    let deep = setup::<u64>(p64_deep(), 2f64.powi(-24));
    basic_ops(&deep);
    polynomials(&deep, 2f64.powi(-20));
    foreign(&s, CkksParameters::new(1 << 13, 2, 40, 64).unwrap());
}

#[test]
fn ckks_32bit_all_operations() {
    let s = setup::<u32>(p32(), 2f64.powi(-12));
    basic_ops(&s);
    rotations(&s);
    sparse(&s);
    polynomials(&s, 2f64.powi(-9));
    bad_inputs(&s);
    foreign(
        &s,
        CkksParameters::builder(1 << 13)
            .word_bits(32)
            .levels(2)
            .scale_bits(28)
            .build()
            .unwrap(),
    );
}

#[test]
fn ckks_64bit_ifma_and_avx512_agree() {
    // Same parameters on two backends: decrypted values agree within the noise bound.
    let p = CkksParameters::builder(1 << 13)
        .levels(2)
        .scale_bits(40)
        .build()
        .unwrap();
    let s = setup::<u64>(p, 2f64.powi(-25));
    let x = rand_vec(9, 4096);
    let a = s.enc.encrypt(&x, &s.keys.public_key).unwrap();
    let m = s.ev.multiply_relin_rescale(&a, &a).unwrap();
    let want: Vec<f64> = x.iter().map(|v| v * v).collect();
    check(&s, &m, &want, s.bound, "multiply on the default backend");
}

#[test]
fn parameters_security_and_summary() {
    // 128-bit default refuses a too-large modulus for N = 2^12.
    match CkksParameters::builder(1 << 12)
        .levels(6)
        .scale_bits(40)
        .build()
    {
        Err(CkksError::Insecure { n, max_log_qp, .. }) => {
            assert_eq!(n, 4096);
            assert_eq!(max_log_qp, 109);
        }
        other => panic!("expected Insecure, got {other:?}"),
    }
    // ... unless the caller opts out explicitly.
    let p = CkksParameters::builder(1 << 12)
        .levels(6)
        .scale_bits(40)
        .security(SecurityLevel::None)
        .build()
        .unwrap();
    assert!(p.estimated_security().is_none());
    assert!(format!("{p}").contains("INSECURE"));
    // 192 and 256 bits are stricter.
    assert!(CkksParameters::builder(1 << 14)
        .levels(7)
        .scale_bits(40)
        .security(SecurityLevel::Bits256)
        .build()
        .is_err());
    // The anchor set: N = 2^14, 8 ciphertext primes + specials, within 438 bits.
    let p = CkksParameters::new(1 << 14, 7, 40, 64).unwrap();
    assert!(p.log_qp() <= 438.0);
    assert_eq!(p.moduli().len(), 8);
    assert_eq!(p.slots(), 8192);
    assert!(p.dnum() >= 1 && p.alpha() * p.dnum() >= 8);
    let text = format!("{p}");
    for needle in ["16384", "8192", "log Q", "log QP", "128-bit", "64-bit"] {
        assert!(text.contains(needle), "summary lacks {needle}:\n{text}");
    }
    // Explicit prime sizes.
    let p = CkksParameters::builder(1 << 14)
        .prime_bits(vec![60, 40, 40, 60])
        .scale_bits(40)
        .build()
        .unwrap();
    assert_eq!(p.moduli().len(), 4);
    assert_eq!((p.moduli()[0] as f64).log2().ceil() as u32, 60);
    // Given dnum.
    let p = CkksParameters::builder(1 << 15)
        .levels(11)
        .dnum(3)
        .build()
        .unwrap();
    assert_eq!(p.dnum(), 3);
    assert_eq!(p.alpha(), 4);
    // Bad inputs.
    assert!(CkksParameters::new(1000, 2, 40, 64).is_err());
    assert!(CkksParameters::new(1 << 9, 1, 30, 64).is_err());
    assert!(CkksParameters::new(1 << 18, 1, 30, 64).is_err());
    assert!(CkksParameters::new(1 << 14, 2, 40, 48).is_err());
    match CkksParameters::new(1 << 14, 2, 40, 32) {
        Err(CkksError::InvalidParameters(m)) => assert!(m.contains("32-bit"), "{m}"),
        other => panic!("expected InvalidParameters, got {other:?}"),
    }
    assert!(CkksParameters::builder(1 << 14)
        .levels(3)
        .dnum(9)
        .build()
        .is_err());
    // Sparse secrets need the explicit opt-out.
    assert!(CkksParameters::builder(1 << 14)
        .secret(SecretDistribution::FixedHamming(64))
        .build()
        .is_err());
    let p = CkksParameters::builder(1 << 13)
        .levels(2)
        .secret(SecretDistribution::FixedHamming(64))
        .security(SecurityLevel::None)
        .build()
        .unwrap();
    let s = setup::<u64>(p, 2f64.powi(-25));
    let x = rand_vec(11, 16);
    let a = s.enc.encrypt(&x, &s.keys.public_key).unwrap();
    check(
        &s,
        &s.ev.multiply_relin_rescale(&a, &a).unwrap(),
        &x.iter().map(|v| v * v).collect::<Vec<_>>(),
        s.bound,
        "Hamming-weight secret",
    );
    // Word size mismatch between parameters and context.
    assert!(Context::<u32>::new(CkksParameters::new(1 << 13, 2, 40, 64).unwrap()).is_err());
}

#[test]
fn short_vectors_are_zero_padded() {
    let p = CkksParameters::new(1 << 13, 2, 40, 64).unwrap();
    let s = setup::<u64>(p, 2f64.powi(-25));
    let x = rand_vec(12, 64);
    let a = s.enc.encrypt(&x, &s.keys.public_key).unwrap();
    let mut want = x.clone();
    want[0] += 1.0;
    want[1] += 2.0;
    check(
        &s,
        &s.ev.add_values(&a, &[1.0, 2.0]).unwrap(),
        &want,
        s.bound,
        "add short",
    );
    let m =
        s.ev.rescale(&s.ev.multiply_values(&a, &[2.0]).unwrap())
            .unwrap();
    let mut want = vec![0.0; 64];
    want[0] = 2.0 * x[0];
    check(&s, &m, &want, s.bound, "multiply short");
}

/// The backend is a context's choice: contexts of the same parameters on every backend this
/// CPU runs compute the same ciphertexts, word for word (modular arithmetic is exact), and
/// objects move between them.
#[test]
fn every_backend_computes_the_same_ciphertexts() {
    let p = CkksParameters::builder(1 << 12)
        .levels(2)
        .scale_bits(30)
        .security(SecurityLevel::None)
        .build()
        .unwrap();
    let base = Context::<u64>::with_backend(
        p.clone(),
        heloom_math::BackendChoice::Force(heloom_math::Backend::Scalar),
    )
    .unwrap();
    assert_eq!(base.backend(), heloom_math::Backend::Scalar);
    assert_eq!(
        Context::<u64>::new(p.clone()).unwrap().backend(),
        p.auto_backend()
    );
    let keys = keygen(&base, &[1], true).unwrap();
    let ek = Arc::new(keys.evaluation_keys.clone());
    let x = rand_vec(21, 2048);
    let ct = Encryptor::new(&base).encrypt(&x, &keys.public_key).unwrap();
    let run = |ctx: &Arc<Context<u64>>| {
        let ev = Evaluator::new(ctx, Arc::clone(&ek)).unwrap();
        let ct = Ciphertext::from_bytes(ctx, &ct.to_bytes()).unwrap();
        let m = ev.multiply_relin_rescale(&ct, &ct).unwrap();
        ev.rotate(&m, 1).unwrap().to_bytes()
    };
    let want = run(&base);
    for b in heloom_math::Backend::available() {
        let ctx =
            Context::<u64>::with_backend(p.clone(), heloom_math::BackendChoice::Force(b)).unwrap();
        assert_eq!(ctx.backend(), b);
        assert_eq!(run(&ctx), want, "backend {b}");
    }
}
