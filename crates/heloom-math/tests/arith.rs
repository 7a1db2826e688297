//! Modular arithmetic against u128 references, and every element-wise backend against scalar.

// Index loops mirror the textbook formulas being checked.
#![allow(clippy::needless_range_loop)]

mod common;

use heloom_math::{
    primes, Backend, BackendChoice, Eltwise, MathError, Modulus, Montgomery32, Word,
};
use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;

fn reference_mul(a: u64, b: u64, q: u64) -> u64 {
    ((a as u128 * b as u128) % q as u128) as u64
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn u64_ops_match_reference(q in 2u64..(1u64 << 61), a: u64, b: u64, hi: u64) {
        let m = Modulus::<u64>::new(q).expect("modulus");
        let (a, b) = (a % q, b % q);
        prop_assert_eq!(m.add(a, b), ((a as u128 + b as u128) % q as u128) as u64);
        prop_assert_eq!(m.sub(a, b), ((a as u128 + q as u128 - b as u128) % q as u128) as u64);
        prop_assert_eq!(m.neg(a), (q - a) % q);
        prop_assert_eq!(m.mul(a, b), reference_mul(a, b, q));
        prop_assert_eq!(m.reduce(hi), hi % q);
        prop_assert_eq!(m.reduce_wide(b, hi), ((((hi as u128) << 64) | b as u128) % q as u128) as u64);
        let ws = m.shoup(b);
        prop_assert_eq!(m.mul_shoup(hi, b, ws), reference_mul(hi % q, b, q));
        prop_assert!(m.mul_shoup_lazy(hi, b, ws) < 2 * q);
    }

    #[test]
    fn u32_ops_match_reference(q in 2u64..(1u64 << 31), a: u32, b: u32, hi: u32) {
        let m = Modulus::<u32>::new(q).expect("modulus");
        let q32 = q as u32;
        let (a, b) = (a % q32, b % q32);
        prop_assert_eq!(m.add(a, b) as u64, (a as u64 + b as u64) % q);
        prop_assert_eq!(m.sub(a, b) as u64, (a as u64 + q - b as u64) % q);
        prop_assert_eq!(m.mul(a, b) as u64, reference_mul(a as u64, b as u64, q));
        prop_assert_eq!(m.reduce(hi), hi % q32);
        prop_assert_eq!(m.reduce_wide(b, hi) as u64, (((hi as u64) << 32) | b as u64) % q);
        let ws = m.shoup(b);
        prop_assert_eq!(m.mul_shoup(hi, b, ws) as u64, reference_mul(hi as u64 % q, b as u64, q));
        if q % 2 == 1 {
            let mont = Montgomery32::new(&m).expect("odd");
            let (am, bm) = (mont.to_mont(a), mont.to_mont(b));
            prop_assert_eq!(mont.from_mont(mont.mul(am, bm)) as u64, reference_mul(a as u64, b as u64, q));
            // a * b * R^-1, checked through R = 2^32.
            prop_assert_eq!(reference_mul(mont.mul(a, b) as u64, (1u64 << 32) % q, q), reference_mul(a as u64, b as u64, q));
        }
    }
}

#[test]
fn pow_and_inverse() {
    let m = Modulus::<u64>::new(0x1fff_ffff_ffff_ffff).expect("m"); // 2^61 - 1, prime
    assert_eq!(m.pow(3, 0x1fff_ffff_ffff_fffe), 1); // Fermat
    let x = 123_456_789u64;
    let xi = m.inv(x).expect("inv");
    assert_eq!(m.mul(x, xi), 1);
    let m6 = Modulus::<u64>::new(6).expect("m");
    assert!(matches!(
        m6.inv(4),
        Err(MathError::NotInvertible { value: 4, q: 6 })
    ));
    assert!(matches!(
        Modulus::<u64>::new(1),
        Err(MathError::ModulusTooSmall { q: 1 })
    ));
    assert!(matches!(
        Modulus::<u32>::new(1 << 31),
        Err(MathError::ModulusTooLarge {
            bits: 32,
            max_bits: 31,
            ..
        })
    ));
    assert!(matches!(
        Modulus::<u64>::new(1 << 61),
        Err(MathError::ModulusTooLarge {
            bits: 62,
            max_bits: 61,
            ..
        })
    ));
    let even = Modulus::<u32>::new(1 << 20).expect("m");
    assert!(Montgomery32::new(&even).is_err());
    // Power-of-two moduli still reduce exactly (Barrett constant edge case).
    let p2 = Modulus::<u64>::new(1 << 40).expect("m");
    assert_eq!(p2.mul((1 << 40) - 1, (1 << 40) - 1), 1);
    assert_eq!(p2.reduce_wide(5, 7), 5);
}

fn check_eltwise_backend<W: Word>(backend: Backend, q: u64, len: usize, seed: u64) {
    let (m, fast, slow) = common::fast_and_scalar::<W>(backend, q);
    let bits = m.bits();
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let a = common::reduced::<W>(&mut rng, len, q, 5);
    let b = common::reduced::<W>(&mut rng, len, q, 5);
    let s = rng.gen::<u64>();
    let ctx = format!("backend={backend} bits={bits} len={len}");
    type Op<W> = fn(&Eltwise<W>, &Modulus<W>, &mut [W], &[W], &[W]) -> heloom_math::Result<()>;
    let ops: [(&str, Op<W>); 4] = [
        ("add", Eltwise::add),
        ("sub", Eltwise::sub),
        ("mul", Eltwise::mul),
        ("mul_add", |e, m, o, a, b| e.mul_add(m, o, a, b)),
    ];
    for (name, op) in ops {
        let (mut x, mut y) = (b.clone(), b.clone());
        op(&fast, &m, &mut x, &a, &b).expect("fast");
        op(&slow, &m, &mut y, &a, &b).expect("slow");
        assert!(x == y, "{name} {ctx}");
    }
    // In-place forms.
    let (mut x, mut y) = (a.clone(), a.clone());
    fast.add_assign(&m, &mut x, &b).expect("f");
    slow.add_assign(&m, &mut y, &b).expect("s");
    assert!(x == y, "add_assign {ctx}");
    fast.sub_assign(&m, &mut x, &b).expect("f");
    slow.sub_assign(&m, &mut y, &b).expect("s");
    assert!(x == y && x == a, "sub_assign {ctx}");
    fast.mul_assign(&m, &mut x, &b).expect("f");
    slow.mul_assign(&m, &mut y, &b).expect("s");
    assert!(x == y, "mul_assign {ctx}");
    fast.neg_assign(&m, &mut x).expect("f");
    slow.neg_assign(&m, &mut y).expect("s");
    assert!(x == y, "neg_assign {ctx}");
    fast.mul_scalar_assign(&m, &mut x, s).expect("f");
    slow.mul_scalar_assign(&m, &mut y, s).expect("s");
    assert!(x == y, "mul_scalar_assign {ctx}");
    let (mut x, mut y) = (vec![W::ZERO; len], vec![W::ZERO; len]);
    fast.neg(&m, &mut x, &a).expect("f");
    slow.neg(&m, &mut y, &a).expect("s");
    assert!(x == y, "neg {ctx}");
    fast.mul_scalar(&m, &mut x, &a, s).expect("f");
    slow.mul_scalar(&m, &mut y, &a, s).expect("s");
    assert!(x == y, "mul_scalar {ctx}");
    // And the scalar path against u128 arithmetic.
    for i in 0..len {
        let (ai, bi) = (a[i].to_u64(), b[i].to_u64());
        assert_eq!(y[i].to_u64(), reference_mul(ai, s % q, q));
        let mut z = vec![W::ZERO; 1];
        slow.mul(&m, &mut z, &a[i..i + 1], &b[i..i + 1]).expect("s");
        assert_eq!(z[0].to_u64(), reference_mul(ai, bi, q));
    }
}

#[test]
fn eltwise_backends_match_scalar() {
    let lens = [0usize, 1, 3, 4, 5, 7, 8, 9, 15, 16, 17, 33, 4096, 4099];
    let q64 = common::moduli::<u64>(&[20, 30, 40, 49, 50, 55, 61], 16, 1);
    let q32 = common::moduli::<u32>(&[20, 25, 29, 30, 31], 16, 1);
    common::each_backend(
        &q64,
        &q32,
        &lens,
        check_eltwise_backend::<u64>,
        check_eltwise_backend::<u32>,
    );
}

#[test]
fn eltwise_bad_input() {
    let q = primes::ntt_primes::<u64>(40, 16, 1).expect("p")[0];
    let m = Modulus::<u64>::new(q).expect("m");
    let e = Eltwise::<u64>::new(BackendChoice::Auto, 40).expect("e");
    let mut out = vec![0u64; 8];
    assert!(matches!(
        e.add(&m, &mut out, &[0; 8], &[0; 7]),
        Err(MathError::LengthMismatch { .. })
    ));
    assert!(matches!(
        e.mul(&m, &mut out, &[0; 9], &[0; 8]),
        Err(MathError::LengthMismatch { .. })
    ));
    let big = Modulus::<u64>::new(primes::ntt_primes::<u64>(50, 16, 1).expect("p")[0]).expect("m");
    assert!(matches!(
        e.add_assign(&big, &mut out, &[0; 8]),
        Err(MathError::ModulusTooLarge { .. })
    ));
}
