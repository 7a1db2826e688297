//! `reduce`, `mul_scalar_add` and `sub_mul_scalar`: every backend bit-exact against scalar, and
//! scalar against u128 arithmetic, over NTT primes of many sizes, edge moduli, edge values and
//! odd lengths.

// Index loops mirror the textbook formulas being checked.
#![allow(clippy::needless_range_loop)]

mod common;

use heloom_math::{primes, Backend, BackendChoice, Eltwise, MathError, Modulus, Word};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;

const LENS: [usize; 15] = [0, 1, 3, 4, 5, 7, 8, 9, 15, 16, 17, 33, 100, 4096, 4099];

fn mulm(a: u64, b: u64, q: u64) -> u64 {
    ((a as u128 * b as u128) % q as u128) as u64
}

/// Words of every size below `2^limit_bits`, with the extremes mixed in.
fn wide<W: Word>(rng: &mut ChaCha20Rng, len: usize, q: u64, limit_bits: u32) -> Vec<W> {
    let max = if limit_bits >= 64 {
        u64::MAX
    } else {
        (1u64 << limit_bits) - 1
    };
    (0..len)
        .map(|i| {
            let v = match i % 9 {
                0 => max,
                1 => 0,
                2 => q - 1,
                3 => q,
                4 => 2 * q - 1,
                5 => rng.gen::<u64>() >> rng.gen_range(0..64),
                _ => rng.gen::<u64>(),
            };
            W::from_u64(v & max)
        })
        .collect()
}

fn check_backend<W: Word>(backend: Backend, q: u64, len: usize, seed: u64) {
    let (m, fast, slow) = common::fast_and_scalar::<W>(backend, q);
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let ctx = format!("backend={backend} q={q} len={len} word={}", W::BITS);

    // reduce: any word.
    let x = wide::<W>(&mut rng, len, q, W::BITS);
    let (mut f, mut s) = (vec![W::ZERO; len], vec![W::ZERO; len]);
    fast.reduce(&m, &mut f, &x).expect("f");
    slow.reduce(&m, &mut s, &x).expect("s");
    assert!(f == s, "reduce {ctx}");
    for (o, v) in s.iter().zip(&x) {
        assert_eq!(o.to_u64(), v.to_u64() % q, "reduce ref {ctx}");
    }
    let mut f2 = x.clone();
    fast.reduce_assign(&m, &mut f2).expect("f");
    assert!(f2 == s, "reduce_assign {ctx}");

    // mul_scalar_add: a below 2^(MAX_PRIME_BITS + 1).
    let a = wide::<W>(&mut rng, len, q, W::MAX_PRIME_BITS + 1);
    let acc = common::reduced::<W>(&mut rng, len, q, 7);
    for sc in [0, 1, q - 1, rng.gen_range(0..q)] {
        let (mut f, mut s) = (acc.clone(), acc.clone());
        fast.mul_scalar_add(&m, &mut f, &a, sc).expect("f");
        slow.mul_scalar_add(&m, &mut s, &a, sc).expect("s");
        assert!(f == s, "mul_scalar_add s={sc} {ctx}");
        for i in 0..len {
            let want = (acc[i].to_u64() + mulm(a[i].to_u64() % q, sc, q)) % q;
            assert_eq!(s[i].to_u64(), want, "mul_scalar_add ref {ctx}");
        }
        // And with `a` reduced (the common case), which IFMA runs fully vectorized.
        let ar = common::reduced::<W>(&mut rng, len, q, 7);
        let (mut f, mut s) = (acc.clone(), acc.clone());
        fast.mul_scalar_add(&m, &mut f, &ar, sc).expect("f");
        slow.mul_scalar_add(&m, &mut s, &ar, sc).expect("s");
        assert!(f == s, "mul_scalar_add reduced s={sc} {ctx}");

        // sub_mul_scalar: a, b reduced.
        let b = common::reduced::<W>(&mut rng, len, q, 7);
        let (mut f, mut s) = (acc.clone(), acc.clone());
        fast.sub_mul_scalar(&m, &mut f, &b, sc).expect("f");
        slow.sub_mul_scalar(&m, &mut s, &b, sc).expect("s");
        assert!(f == s, "sub_mul_scalar s={sc} {ctx}");
        for i in 0..len {
            let d = (acc[i].to_u64() + q - b[i].to_u64()) % q;
            assert_eq!(s[i].to_u64(), mulm(d, sc, q), "sub_mul_scalar ref {ctx}");
        }
    }
}

#[test]
fn new_kernels_match_scalar_on_every_backend() {
    let q64 = common::moduli::<u64>(&[20, 30, 36, 40, 45, 49, 50, 55, 59, 60, 61], 1 << 12, 2);
    let q32 = common::moduli::<u32>(&[17, 20, 25, 28, 29, 30, 31], 1 << 12, 2);
    common::each_backend(
        &q64,
        &q32,
        &LENS,
        check_backend::<u64>,
        check_backend::<u32>,
    );
}

/// Residues of a 60-bit prime fed to a 40-bit prime's kernels (the base-conversion case).
#[test]
fn mul_scalar_add_takes_residues_of_a_larger_prime() {
    let big = primes::ntt_primes::<u64>(60, 1 << 12, 1).expect("p")[0];
    let small = primes::ntt_primes::<u64>(40, 1 << 12, 1).expect("p")[0];
    let m = Modulus::<u64>::new(small).expect("m");
    let mut rng = ChaCha20Rng::seed_from_u64(7);
    let a: Vec<u64> = (0..1027).map(|_| rng.gen_range(0..big)).collect();
    let acc: Vec<u64> = (0..1027).map(|_| rng.gen_range(0..small)).collect();
    let s = rng.gen_range(0..small);
    for backend in Backend::available() {
        let Ok(e) = Eltwise::<u64>::new(BackendChoice::Force(backend), 40) else {
            continue;
        };
        let mut out = acc.clone();
        e.mul_scalar_add(&m, &mut out, &a, s).expect("msa");
        for i in 0..a.len() {
            assert_eq!(out[i], (acc[i] + mulm(a[i] % small, s, small)) % small);
        }
        let mut r = vec![0; a.len()];
        e.reduce(&m, &mut r, &a).expect("reduce");
        assert!(r.iter().zip(&a).all(|(&r, &a)| r == a % small));
    }
}

#[test]
fn bad_input() {
    let q = primes::ntt_primes::<u64>(40, 16, 1).expect("p")[0];
    let m = Modulus::<u64>::new(q).expect("m");
    let e = Eltwise::<u64>::new(BackendChoice::Auto, 40).expect("e");
    assert_eq!(e.max_prime_bits(), 40);
    let mut acc = vec![0u64; 8];
    assert!(matches!(
        e.mul_scalar_add(&m, &mut acc, &[0; 8], q),
        Err(MathError::ScalarNotReduced { .. })
    ));
    assert!(matches!(
        e.sub_mul_scalar(&m, &mut acc, &[0; 8], q + 5),
        Err(MathError::ScalarNotReduced { .. })
    ));
    assert!(matches!(
        e.mul_scalar_add(&m, &mut acc, &[0; 7], 1),
        Err(MathError::LengthMismatch { .. })
    ));
    assert!(matches!(
        e.sub_mul_scalar(&m, &mut acc, &[0; 9], 1),
        Err(MathError::LengthMismatch { .. })
    ));
    assert!(matches!(
        e.reduce(&m, &mut acc, &[0; 9]),
        Err(MathError::LengthMismatch { .. })
    ));
    let big = Modulus::<u64>::new(primes::ntt_primes::<u64>(50, 16, 1).expect("p")[0]).expect("m");
    assert!(matches!(
        e.reduce_assign(&big, &mut acc),
        Err(MathError::ModulusTooLarge { .. })
    ));
}

/// Random moduli of every bit size (not only primes): the Barrett and Shoup error bounds hold
/// for any modulus.
#[test]
fn every_modulus_size() {
    let mut rng = ChaCha20Rng::seed_from_u64(99);
    for backend in Backend::available() {
        for bits in 2..=61u32 {
            let q = (1u64 << (bits - 1)) | rng.gen_range(0..(1u64 << (bits - 1)));
            if backend.check(64, bits).is_ok() {
                check_backend::<u64>(backend, q, 37, q);
            }
            if bits <= 31 && backend.check(32, bits).is_ok() {
                check_backend::<u32>(backend, q, 37, q);
            }
        }
    }
}

#[test]
fn mul_add2_equals_two_mul_adds_on_every_backend() {
    fn run<W: Word>(bits: &[u32]) {
        for &b in bits {
            let q = primes::ntt_primes::<W>(b, 16, 1).expect("prime")[0];
            let m = Modulus::<W>::new(q).expect("modulus");
            for backend in Backend::available() {
                let Ok(elt) = Eltwise::<W>::new(BackendChoice::Force(backend), b) else {
                    continue;
                };
                for (i, &len) in LENS.iter().enumerate() {
                    let mut rng = ChaCha20Rng::seed_from_u64(7 + i as u64);
                    let x = common::reduced::<W>(&mut rng, len, q, 7);
                    let kb = common::reduced::<W>(&mut rng, len, q, 7);
                    let ka = common::reduced::<W>(&mut rng, len, q, 7);
                    let acc0 = common::reduced::<W>(&mut rng, len, q, 7);
                    let acc1 = common::reduced::<W>(&mut rng, len, q, 7);
                    let (mut f0, mut f1) = (acc0.clone(), acc1.clone());
                    elt.mul_add2(&m, &mut f0, &mut f1, &x, &kb, &ka)
                        .expect("mul_add2");
                    for k in 0..len {
                        let want0 = (acc0[k].to_u64() + mulm(x[k].to_u64(), kb[k].to_u64(), q)) % q;
                        let want1 = (acc1[k].to_u64() + mulm(x[k].to_u64(), ka[k].to_u64(), q)) % q;
                        assert_eq!(f0[k].to_u64(), want0, "{backend} q={q} len={len} k={k}");
                        assert_eq!(f1[k].to_u64(), want1, "{backend} q={q} len={len} k={k}");
                    }
                }
                let mut short = vec![W::ZERO; 3];
                let mut acc = vec![W::ZERO; 4];
                let v = vec![W::ZERO; 4];
                assert!(elt.mul_add2(&m, &mut acc, &mut short, &v, &v, &v).is_err());
            }
        }
    }
    run::<u64>(&[30, 45, 50, 55, 61]);
    run::<u32>(&[20, 28, 31]);
}
