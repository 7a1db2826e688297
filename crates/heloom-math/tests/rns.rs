//! Fast base conversion against an exact multiprecision reference, on every backend.

// Index loops mirror the textbook formulas being checked.
#![allow(clippy::needless_range_loop)]

use heloom_math::{
    primes, Backend, BackendChoice, BasisConverter, Eltwise, MathError, Modulus, Word,
};
use num_bigint::BigUint;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;

fn rem_small(a: &BigUint, m: u64) -> u64 {
    (a % m).try_into().expect("residue below m fits a u64")
}

fn mulm(a: u64, b: u64, q: u64) -> u64 {
    ((a as u128 * b as u128) % q as u128) as u64
}

fn invm(a: u64, q: u64) -> u64 {
    let (mut r0, mut r1) = (q as i128, a as i128);
    let (mut t0, mut t1) = (0i128, 1i128);
    while r1 != 0 {
        let k = r0 / r1;
        (r0, r1) = (r1, r0 - k * r1);
        (t0, t1) = (t1, t0 - k * t1);
    }
    assert_eq!(r0, 1);
    t0.rem_euclid(q as i128) as u64
}

fn product(qs: &[u64]) -> BigUint {
    qs.iter().fold(BigUint::from(1u32), |acc, &q| acc * q)
}

/// Uniform enough below `bound` for a test: 64 extra random bits, reduced.
fn random_below(rng: &mut ChaCha20Rng, bound: &BigUint) -> BigUint {
    let bytes = (bound.bits() as usize).div_ceil(8) + 8;
    let raw: Vec<u8> = (0..bytes).map(|_| rng.gen()).collect();
    BigUint::from_bytes_le(&raw) % bound
}

/// Converts `count` random `x < Q` on `backend` and checks every output exactly.
fn check<W: Word>(backend: Backend, from: &[u64], to: &[u64], count: usize, seed: u64) {
    let bits = from
        .iter()
        .chain(to)
        .map(|q| 64 - q.leading_zeros())
        .max()
        .expect("primes");
    let Ok(elt) = Eltwise::<W>::new(BackendChoice::Force(backend), bits) else {
        return;
    };
    let fm: Vec<Modulus<W>> = from.iter().map(|&q| Modulus::new(q).expect("m")).collect();
    let tm: Vec<Modulus<W>> = to.iter().map(|&q| Modulus::new(q).expect("m")).collect();
    let conv = BasisConverter::new(&fm, &tm, elt).expect("converter");
    assert_eq!((conv.from_len(), conv.to_len()), (from.len(), to.len()));
    let k = from.len();
    let big_q = product(from);
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    // The first values are the extremes 0, 1, Q - 1.
    let xs: Vec<BigUint> = (0..count)
        .map(|i| match i {
            0 => BigUint::from(0u32),
            1 => BigUint::from(1u32),
            2 => &big_q - 1u32,
            _ => random_below(&mut rng, &big_q),
        })
        .collect();
    let input: Vec<Vec<W>> = from
        .iter()
        .map(|&q| xs.iter().map(|x| W::from_u64(rem_small(x, q))).collect())
        .collect();
    // Garbage in the outputs: convert overwrites them.
    let mut output: Vec<Vec<W>> = to
        .iter()
        .map(|&p| vec![W::from_u64(p - 1); count])
        .collect();
    let in_refs: Vec<&[W]> = input.iter().map(Vec::as_slice).collect();
    let mut out_refs: Vec<&mut [W]> = output.iter_mut().map(Vec::as_mut_slice).collect();
    conv.convert(&in_refs, &mut out_refs).expect("convert");

    let qhat: Vec<BigUint> = (0..k)
        .map(|i| {
            let others: Vec<u64> = (0..k).filter(|&l| l != i).map(|l| from[l]).collect();
            product(&others)
        })
        .collect();
    let qhat_inv: Vec<u64> = (0..k)
        .map(|i| invm(rem_small(&qhat[i], from[i]), from[i]))
        .collect();
    for (c, x) in xs.iter().enumerate() {
        // Exact X = sum_i [x_i qhat_i^-1]_{q_i} qhat_i.
        let mut sum = BigUint::from(0u32);
        for i in 0..k {
            let t = mulm(input[i][c].to_u64(), qhat_inv[i], from[i]);
            sum += &qhat[i] * t;
        }
        // X = x + u Q with 0 <= u < k.
        let d = &sum - x;
        let u = (0..k as u64)
            .find(|&u| &big_q * u == d)
            .unwrap_or_else(|| panic!("X - x is not u*Q with u < k (k = {k}, x #{c})"));
        for (j, &p) in to.iter().enumerate() {
            assert_eq!(
                output[j][c].to_u64(),
                rem_small(&sum, p),
                "backend={backend} k={k} p={p} x #{c} (u = {u})"
            );
        }
    }

    // Centered variant: exactly the representative of x in [-Q/2, Q/2), mod each p.
    let mut centered: Vec<Vec<W>> = to.iter().map(|_| vec![W::ZERO; count]).collect();
    let mut out_refs: Vec<&mut [W]> = centered.iter_mut().map(Vec::as_mut_slice).collect();
    conv.convert_centered(&in_refs, &mut out_refs)
        .expect("convert_centered");
    let half = &big_q >> 1u32;
    for (c, x) in xs.iter().enumerate() {
        let negative = *x >= half;
        for (j, &p) in to.iter().enumerate() {
            let want = if negative {
                // x - Q mod p = -(Q - x) mod p
                let r = rem_small(&(&big_q - x), p);
                (p - r) % p
            } else {
                rem_small(x, p)
            };
            assert_eq!(
                centered[j][c].to_u64(),
                want,
                "centered: backend={backend} k={k} p={p} x #{c}"
            );
        }
    }
}

fn ntt_primes<W: Word>(bits: u32, count: usize) -> Vec<u64> {
    primes::ntt_primes::<W>(bits, 16, count).expect("primes")
}

/// Source and target prime sets: (from, to), disjoint.
fn cases<W: Word>(sizes: &[(u32, u32)]) -> Vec<(Vec<u64>, Vec<u64>)> {
    let mut out = Vec::new();
    for &(from_bits, to_bits) in sizes {
        let both = ntt_primes::<W>(from_bits.max(to_bits), 12);
        let (from_all, to_all) = if from_bits == to_bits {
            (both[..6].to_vec(), both[6..].to_vec())
        } else {
            (ntt_primes::<W>(from_bits, 6), ntt_primes::<W>(to_bits, 6))
        };
        for k in [1usize, 2, 5, 6] {
            out.push((from_all[..k].to_vec(), to_all[..3].to_vec()));
        }
    }
    out
}

/// Every backend, every case, at lengths below, at and beyond one vector and the block size.
fn check_cases<W: Word>(sizes: &[(u32, u32)]) {
    let cases = cases::<W>(sizes);
    for backend in Backend::available() {
        for (i, (from, to)) in cases.iter().enumerate() {
            for count in [1, 7, 300, 4099] {
                check::<W>(backend, from, to, count, i as u64 * 31 + count as u64);
            }
        }
    }
}

#[test]
fn convert_matches_exact_reference_u64() {
    check_cases::<u64>(&[(60, 60), (61, 40), (36, 59), (50, 49), (45, 45), (30, 50)]);
}

#[test]
fn convert_matches_exact_reference_u32() {
    check_cases::<u32>(&[(31, 31), (31, 28), (25, 30), (20, 20)]);
}

/// Lengths beyond the internal block size, with a ragged last block.
#[test]
fn convert_long_inputs() {
    let from = ntt_primes::<u64>(55, 5);
    let to = ntt_primes::<u64>(44, 4);
    let from32 = ntt_primes::<u32>(30, 3);
    let to32 = ntt_primes::<u32>(29, 2);
    for backend in Backend::available() {
        check::<u64>(backend, &from, &to, 3 * 4096 + 13, 5);
        check::<u32>(backend, &from32, &to32, 2 * 4096 + 9, 6);
    }
}

#[test]
fn converter_errors() {
    let qs = ntt_primes::<u64>(40, 4);
    let m: Vec<Modulus<u64>> = qs.iter().map(|&q| Modulus::new(q).expect("m")).collect();
    let elt = Eltwise::<u64>::new(BackendChoice::Auto, 40).expect("e");
    assert!(matches!(
        BasisConverter::new(&m[..2], &m[1..3], elt),
        Err(MathError::DuplicatePrime { .. })
    ));
    assert!(matches!(
        BasisConverter::new(&[m[0], m[0]], &m[2..3], elt),
        Err(MathError::DuplicatePrime { .. })
    ));
    assert!(matches!(
        BasisConverter::new(&m[..2], &[m[2], m[2]], elt),
        Err(MathError::DuplicatePrime { .. })
    ));
    assert!(matches!(
        BasisConverter::new(&[], &m[2..3], elt),
        Err(MathError::ShapeMismatch(_))
    ));
    assert!(matches!(
        BasisConverter::new(&m[..2], &[], elt),
        Err(MathError::ShapeMismatch(_))
    ));
    let big = Modulus::<u64>::new(ntt_primes::<u64>(50, 1)[0]).expect("m");
    assert!(matches!(
        BasisConverter::new(&m[..2], &[big], elt),
        Err(MathError::ModulusTooLarge { .. })
    ));
    // Not coprime: 6 and 9 share 3.
    let (six, nine) = (Modulus::new(6).expect("m"), Modulus::new(9).expect("m"));
    assert!(matches!(
        BasisConverter::new(&[six, nine], &m[..1], elt),
        Err(MathError::NotInvertible { .. })
    ));

    let conv = BasisConverter::new(&m[..2], &m[2..4], elt).expect("c");
    let x = vec![0u64; 16];
    let short = vec![0u64; 15];
    let (mut y0, mut y1) = (vec![0u64; 16], vec![0u64; 16]);
    assert!(matches!(
        conv.convert(&[&x], &mut [&mut y0, &mut y1]),
        Err(MathError::LengthMismatch { .. })
    ));
    assert!(matches!(
        conv.convert(&[&x, &x], &mut [&mut y0]),
        Err(MathError::LengthMismatch { .. })
    ));
    assert!(matches!(
        conv.convert(&[&x, &short], &mut [&mut y0, &mut y1]),
        Err(MathError::LengthMismatch { .. })
    ));
    let mut y2 = vec![0u64; 17];
    assert!(matches!(
        conv.convert(&[&x, &x], &mut [&mut y0, &mut y2]),
        Err(MathError::LengthMismatch { .. })
    ));
    conv.convert(&[&x, &x], &mut [&mut y0, &mut y1])
        .expect("ok");
    // Empty limbs are fine.
    let (mut e0, mut e1) = (Vec::<u64>::new(), Vec::<u64>::new());
    conv.convert(&[&[], &[]], &mut [&mut e0, &mut e1])
        .expect("empty");
    assert!(y0.iter().chain(&y1).all(|&v| v == 0));
}
