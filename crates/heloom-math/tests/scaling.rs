//! RNS scaling (rescale and mod-down) against an exact big-integer reference, on every backend,
//! both word sizes, mixed prime sizes and several thread budgets.

use heloom_math::{
    primes, Backend, BackendChoice, Form, MathError, ModDown, Rescaler, RnsBasis, RnsPoly, Threads,
    Word,
};
use num_bigint::BigUint;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;

const N: usize = 32;

fn product(qs: &[u64]) -> BigUint {
    qs.iter().fold(BigUint::from(1u32), |acc, &q| acc * q)
}

fn rem(x: &BigUint, q: u64) -> u64 {
    (x % q).try_into().expect("residue below q fits a u64")
}

/// Uniform enough below `bound` for a test: 64 extra random bits, reduced.
fn random_below(rng: &mut ChaCha20Rng, bound: &BigUint) -> BigUint {
    let bytes = (bound.bits() as usize).div_ceil(8) + 8;
    let raw: Vec<u8> = (0..bytes).map(|_| rng.gen()).collect();
    BigUint::from_bytes_le(&raw) % bound
}

/// `N` values per polynomial below `bound`: the first polynomial starts with the extremes and
/// the values around every multiple-plus-half of `divisor` that `extra` lists.
fn values(rng: &mut ChaCha20Rng, bound: &BigUint, extra: &[BigUint], poly: usize) -> Vec<BigUint> {
    let mut out = Vec::with_capacity(N);
    if poly == 0 {
        out.push(BigUint::from(0u32));
        out.push(BigUint::from(1u32));
        out.push(bound - 1u32);
        out.extend(extra.iter().filter(|x| *x < bound).cloned());
    }
    while out.len() < N {
        out.push(random_below(rng, bound));
    }
    out.truncate(N);
    out
}

/// An NTT-form polynomial of `basis` holding `xs` (each reduced modulo every prime).
fn encode<W: Word>(basis: &RnsBasis<W>, qs: &[u64], xs: &[BigUint]) -> RnsPoly<W> {
    let words: Vec<u64> = qs
        .iter()
        .flat_map(|&q| xs.iter().map(move |x| rem(x, q)))
        .collect();
    let mut p = basis
        .poly_from_words(&words, Form::Coeff)
        .expect("values are reduced");
    basis.forward(&mut p).expect("forward NTT");
    p
}

/// The coefficients of an NTT-form polynomial of `basis`, limb by limb.
fn decode<W: Word>(basis: &RnsBasis<W>, p: &RnsPoly<W>) -> Vec<Vec<u64>> {
    let mut p = p.clone();
    basis.inverse(&mut p).expect("inverse NTT");
    p.limbs()
        .map(|l| l.iter().map(|v| v.to_u64()).collect())
        .collect()
}

fn basis<W: Word>(backend: Backend, qs: &[u64]) -> Option<RnsBasis<W>> {
    RnsBasis::<W>::with_backend(N, qs, BackendChoice::Force(backend)).ok()
}

/// `round(x / q_l)` for 1..=3 polynomials and budgets 1..=3, exactly; returns whether the
/// backend could run these primes.
fn check_rescale<W: Word>(backend: Backend, qs: &[u64], seed: u64) -> bool {
    let Some(from) = basis::<W>(backend, qs) else {
        return false;
    };
    let rescaler = Rescaler::new(&from).expect("rescaler");
    let l = qs.len() - 1;
    let ql = qs[l];
    let half = ql / 2;
    assert_eq!(rescaler.to_basis().moduli().len(), l);
    let big_q = product(qs);
    // Just below, at and just above the rounding boundary k q_l + q_l/2.
    let k = BigUint::from(12345u32);
    let boundary = &k * ql + half;
    let extra = vec![boundary.clone() - 1u32, boundary.clone(), boundary + 1u32];
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    for np in 1..=3 {
        let xs: Vec<Vec<BigUint>> = (0..np)
            .map(|p| values(&mut rng, &big_q, &extra, p))
            .collect();
        let polys: Vec<RnsPoly<W>> = xs.iter().map(|x| encode(&from, qs, x)).collect();
        for t in 1..=3 {
            let out = rescaler
                .divide_round(&polys, Threads::new(t))
                .expect("divide_round");
            assert_eq!(out.len(), np);
            for (p, x) in out.iter().zip(&xs) {
                assert!(rescaler.to_basis().owns(p) && p.form() == Form::Ntt);
                let got = decode(rescaler.to_basis(), p);
                for (c, x) in x.iter().enumerate() {
                    let want = (x + half) / ql;
                    for (i, &q) in qs[..l].iter().enumerate() {
                        assert_eq!(
                            got[i][c],
                            rem(&want, q),
                            "rescale backend={backend} primes={qs:?} np={np} t={t} coeff {c} (x = {x})"
                        );
                    }
                }
            }
        }
    }
    true
}

/// `(x - [x]_P) / P` with `[x]_P` centered, exactly. The centered conversion finds the
/// overflow by rounding `sum_i y_i / p_i` in floating point, so when `x mod P` is within
/// `P / 2^40` of `P / 2` (probability about `2^-39` for a random `x`) either neighbour is
/// accepted; values at `P / 2^30` from the boundary must come out exact.
fn check_mod_down<W: Word>(backend: Backend, qs: &[u64], ps: &[u64], seed: u64) -> bool {
    let all: Vec<u64> = qs.iter().chain(ps).copied().collect();
    let Some(from) = basis::<W>(backend, &all) else {
        return false;
    };
    let op = ModDown::new(&from, ps.len()).expect("mod-down");
    assert_eq!(op.to_basis().moduli().len(), qs.len());
    let big_p = product(ps);
    let half_p = &big_p / 2u32;
    let bound = product(&all);
    let k = BigUint::from(777u32);
    let boundary = &k * &big_p + &half_p;
    let extra = vec![
        boundary.clone() - 2u32,
        boundary.clone() + 2u32,
        boundary.clone() - (&big_p >> 30),
        boundary.clone() + (&big_p >> 30),
        &k * &big_p,
        &k * &big_p + 1u32,
        &k * &big_p - 1u32,
    ];
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    for p in 0..2 {
        let xs = values(&mut rng, &bound, &extra, p);
        let poly = encode(&from, &all, &xs);
        for t in [1, 2, 3] {
            let out = op.apply(poly.clone(), Threads::new(t)).expect("mod-down");
            assert!(op.to_basis().owns(&out) && out.form() == Form::Ntt);
            let got = decode(op.to_basis(), &out);
            for (c, x) in xs.iter().enumerate() {
                let r = x % &big_p;
                // x - centered(r) = x - r (+ P when r is above P/2), divisible by P.
                let down = (x - &r) / &big_p;
                let want = if r > half_p { down + 1u32 } else { down };
                let near_half = if r > half_p {
                    &r - &half_p
                } else {
                    &half_p - &r
                };
                for (i, &q) in qs.iter().enumerate() {
                    let w = rem(&want, q);
                    let g = got[i][c];
                    let ok = g == w
                        || ((&near_half << 40u32) <= big_p
                            && (g == (w + 1) % q || (g + 1) % q == w));
                    assert!(
                        ok,
                        "mod-down backend={backend} Q={qs:?} P={ps:?} t={t} coeff {c}: got {g}, want {w} (x = {x})"
                    );
                }
            }
        }
    }
    true
}

fn ntt_primes<W: Word>(bits: u32, count: usize) -> Vec<u64> {
    primes::ntt_primes::<W>(bits, N, count).expect("primes")
}

/// Prime lists `q_0..q_l` mixing sizes: equal sizes, a last prime larger and smaller than the
/// rest (the last limb is reduced modulo smaller and larger primes).
fn rescale_cases<W: Word>(sizes: &[(u32, u32)]) -> Vec<Vec<u64>> {
    let mut out = Vec::new();
    for &(low_bits, last_bits) in sizes {
        let pool = ntt_primes::<W>(low_bits.max(last_bits), 8);
        let (low, last) = if low_bits == last_bits {
            (pool[..7].to_vec(), pool[7])
        } else {
            (
                ntt_primes::<W>(low_bits, 7),
                ntt_primes::<W>(last_bits, 1)[0],
            )
        };
        for k in [1usize, 2, 6] {
            let mut qs = low[..k].to_vec();
            qs.push(last);
            out.push(qs);
        }
    }
    out
}

#[test]
fn rescale_matches_exact_reference() {
    for backend in Backend::available() {
        let mut ran = 0;
        for (i, qs) in rescale_cases::<u64>(&[(60, 60), (40, 61), (50, 36), (49, 49), (30, 30)])
            .iter()
            .enumerate()
        {
            ran += usize::from(check_rescale::<u64>(backend, qs, i as u64));
        }
        for (i, qs) in rescale_cases::<u32>(&[(31, 31), (28, 30), (30, 25), (20, 20)])
            .iter()
            .enumerate()
        {
            ran += usize::from(check_rescale::<u32>(backend, qs, 100 + i as u64));
        }
        assert!(ran >= 6, "backend {backend} ran only {ran} rescale cases");
    }
}

#[test]
fn mod_down_matches_exact_reference() {
    for backend in Backend::available() {
        let mut ran = 0;
        for (q_bits, p_bits) in [(60, 61), (50, 50), (40, 60), (36, 45)] {
            let pool = ntt_primes::<u64>(q_bits.max(p_bits), 10);
            let (qs, ps) = if q_bits == p_bits {
                (pool[..6].to_vec(), pool[6..9].to_vec())
            } else {
                (ntt_primes::<u64>(q_bits, 6), ntt_primes::<u64>(p_bits, 3))
            };
            for (k, m) in [(1, 1), (3, 2), (6, 3), (2, 3)] {
                ran += usize::from(check_mod_down::<u64>(
                    backend,
                    &qs[..k],
                    &ps[..m],
                    (k * 10 + m) as u64,
                ));
            }
        }
        for (q_bits, p_bits) in [(31, 31), (28, 30), (25, 20)] {
            let pool = ntt_primes::<u32>(q_bits.max(p_bits), 8);
            let (qs, ps) = if q_bits == p_bits {
                (pool[..5].to_vec(), pool[5..8].to_vec())
            } else {
                (ntt_primes::<u32>(q_bits, 5), ntt_primes::<u32>(p_bits, 3))
            };
            for (k, m) in [(1, 1), (4, 2), (5, 3)] {
                ran += usize::from(check_mod_down::<u32>(
                    backend,
                    &qs[..k],
                    &ps[..m],
                    (k * 10 + m) as u64,
                ));
            }
        }
        assert!(ran >= 6, "backend {backend} ran only {ran} mod-down cases");
    }
}

#[test]
fn scaling_errors() {
    let qs = ntt_primes::<u64>(40, 4);
    let one = RnsBasis::<u64>::new(N, &qs[..1]).expect("basis");
    assert!(matches!(
        Rescaler::new(&one),
        Err(MathError::ShapeMismatch(_))
    ));
    let full = RnsBasis::<u64>::new(N, &qs).expect("basis");
    for num_p in [0, 4, 5] {
        assert!(matches!(
            ModDown::new(&full, num_p),
            Err(MathError::ShapeMismatch(_))
        ));
    }
    let rescaler = Rescaler::new(&full).expect("rescaler");
    let op = ModDown::new(&full, 2).expect("mod-down");
    assert_eq!((op.to_basis().len(), op.p_inv().len()), (2, 2));
    assert_eq!(rescaler.inv_last().len(), 3);
    // Coefficient form is refused: both work on NTT-form ciphertext polynomials.
    let coeff = full.zero(Form::Coeff);
    assert!(matches!(
        rescaler.divide_round(std::slice::from_ref(&coeff), Threads::single()),
        Err(MathError::FormMismatch { .. })
    ));
    assert!(matches!(
        op.apply(coeff, Threads::single()),
        Err(MathError::FormMismatch { .. })
    ));
    // A polynomial of another basis is refused.
    let other = one.zero(Form::Ntt);
    assert!(matches!(
        rescaler.divide_round(std::slice::from_ref(&other), Threads::single()),
        Err(MathError::ShapeMismatch(_))
    ));
    assert!(matches!(
        op.apply(other, Threads::single()),
        Err(MathError::ShapeMismatch(_))
    ));
    // No polynomials: nothing to do.
    assert!(rescaler
        .divide_round(&[], Threads::new(2))
        .expect("empty")
        .is_empty());
}
