//! RNS polynomials: ring products through the NTT against schoolbook products, and bad input.

// Index loops mirror the textbook formulas being checked.
#![allow(clippy::needless_range_loop)]

use heloom_math::{primes, Backend, BackendChoice, Form, MathError, RnsBasis, Word};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;

fn schoolbook(a: &[i64], b: &[i64], q: u64) -> Vec<u64> {
    let n = a.len();
    let mut c = vec![0i128; n];
    for i in 0..n {
        for j in 0..n {
            let p = a[i] as i128 * b[j] as i128;
            if i + j < n {
                c[i + j] += p;
            } else {
                c[i + j - n] -= p;
            }
        }
    }
    c.iter().map(|v| v.rem_euclid(q as i128) as u64).collect()
}

fn check_ring<W: Word>(bits: u32, limbs: usize, backend: Backend) {
    let n = 256;
    let moduli = primes::ntt_primes::<W>(bits, n, limbs).expect("primes");
    let basis =
        RnsBasis::<W>::with_backend(n, &moduli, BackendChoice::Force(backend)).expect("basis");
    assert_eq!(basis.backend(), backend);
    let mut rng = ChaCha20Rng::seed_from_u64(bits as u64);
    let a: Vec<i64> = (0..n).map(|_| rng.gen_range(-1000..1000)).collect();
    let b: Vec<i64> = (0..n)
        .map(|_| rng.gen_range(-(1 << 30)..(1 << 30)))
        .collect();
    let c0: Vec<i64> = (0..n).map(|_| rng.gen_range(-5..5)).collect();
    let (mut pa, mut pb, mut pc) = (
        basis.poly_from_signed(&a).expect("a"),
        basis.poly_from_signed(&b).expect("b"),
        basis.poly_from_signed(&c0).expect("c"),
    );
    basis.forward(&mut pa).expect("fwd");
    basis.forward(&mut pb).expect("fwd");
    basis.forward(&mut pc).expect("fwd");
    // acc = c + a*b, then subtract c, add c, negate twice, scale by 3 and back by 3^-1 is not
    // integral, so check scale by 3 against 3x the schoolbook product.
    let mut acc = pc.clone();
    basis.mul_add(&mut acc, &pa, &pb).expect("mul_add");
    basis.sub_assign(&mut acc, &pc).expect("sub");
    let mut prod = basis.mul(&pa, &pb).expect("mul");
    assert_eq!(acc, prod);
    basis.neg_assign(&mut acc).expect("neg");
    basis.add_assign(&mut acc, &prod).expect("add");
    assert!(acc.as_slice().iter().all(|&x| x == W::ZERO));
    basis.mul_scalar_assign(&mut prod, 3).expect("scalar");
    let mut pa2 = pa.clone();
    basis.mul_assign(&mut pa2, &pb).expect("mul_assign");
    basis.inverse(&mut prod).expect("inv");
    basis.inverse(&mut pa2).expect("inv");
    for (i, m) in basis.moduli().iter().enumerate() {
        let want = schoolbook(&a, &b, m.value());
        let got: Vec<u64> = pa2.limb(i).iter().map(|x| x.to_u64()).collect();
        assert_eq!(got, want, "limb {i} backend {backend}");
        let got3: Vec<u64> = prod.limb(i).iter().map(|x| x.to_u64()).collect();
        let want3: Vec<u64> = want
            .iter()
            .map(|&v| (v as u128 * 3 % m.value() as u128) as u64)
            .collect();
        assert_eq!(got3, want3, "limb {i} backend {backend}");
    }
}

#[test]
fn ring_products_match_schoolbook_on_every_backend() {
    for backend in Backend::available() {
        for (bits, limbs) in [(50u32, 3usize), (61, 2), (36, 4)] {
            if backend.check(64, bits).is_ok() {
                check_ring::<u64>(bits, limbs, backend);
            }
        }
        for (bits, limbs) in [(30u32, 4usize), (31, 3), (25, 2)] {
            if backend.check(32, bits).is_ok() {
                check_ring::<u32>(bits, limbs, backend);
            }
        }
    }
}

/// A basis of 60-bit and 45-bit primes on the automatic choice: the 45-bit limbs get IFMA
/// where the CPU has it (the 60-bit ones cannot), and every result equals the scalar basis's.
#[test]
fn mixed_width_basis_dispatches_per_prime_and_matches_scalar() {
    let n = 256;
    let mut moduli = primes::ntt_primes::<u64>(60, n, 2).expect("primes");
    moduli.extend(primes::ntt_primes::<u64>(45, n, 2).expect("primes"));
    let auto = RnsBasis::<u64>::new(n, &moduli).expect("auto basis");
    let scalar = RnsBasis::<u64>::with_backend(n, &moduli, BackendChoice::Force(Backend::Scalar))
        .expect("scalar basis");
    let ifma = Backend::Avx512Ifma.is_available() && std::env::var("HELOOM_BACKEND").is_err();
    for (t, m) in auto.ntt_tables().iter().zip(auto.moduli()) {
        let narrow = m.bits() <= heloom_math::IFMA_MAX_PRIME_BITS;
        assert_eq!(
            t.backend() == Backend::Avx512Ifma,
            ifma && narrow,
            "{} bits",
            m.bits()
        );
        assert_eq!(auto.eltwise().backend_for(m), t.backend());
    }
    let mut rng = ChaCha20Rng::seed_from_u64(7);
    let a: Vec<i64> = (0..n)
        .map(|_| rng.gen_range(-(1 << 40)..(1 << 40)))
        .collect();
    let b: Vec<i64> = (0..n).map(|_| rng.gen_range(-1000..1000)).collect();
    let run = |basis: &RnsBasis<u64>| {
        let mut pa = basis.poly_from_signed(&a).expect("a");
        let mut pb = basis.poly_from_signed(&b).expect("b");
        basis.forward(&mut pa).expect("fwd");
        basis.forward(&mut pb).expect("fwd");
        let mut acc = basis.mul(&pa, &pb).expect("mul");
        basis.mul_add(&mut acc, &pa, &pa).expect("mul_add");
        basis.mul_scalar_assign(&mut acc, 12345).expect("scalar");
        basis.inverse(&mut acc).expect("inv");
        acc.as_slice()
            .iter()
            .map(|x| x.to_u64())
            .collect::<Vec<u64>>()
    };
    let got = run(&auto);
    assert_eq!(got, run(&scalar));
    for (i, m) in auto.moduli().iter().enumerate() {
        let q = m.value();
        let ab = schoolbook(&a, &b, q);
        let aa = schoolbook(&a, &a, q);
        let want: Vec<u64> = ab
            .iter()
            .zip(&aa)
            .map(|(&x, &y)| ((x as u128 + y as u128) * 12345 % q as u128) as u64)
            .collect();
        assert_eq!(&got[i * n..(i + 1) * n], &want[..], "limb {i}");
    }
}

#[test]
fn poly_storage_is_aligned() {
    let n = 1 << 10;
    let moduli = primes::ntt_primes::<u32>(30, n, 3).expect("p");
    let basis = RnsBasis::<u32>::new(n, &moduli).expect("basis");
    let p = basis.zero(Form::Ntt);
    for i in 0..3 {
        assert_eq!(p.limb(i).as_ptr() as usize % 64, 0);
    }
}

#[test]
fn poly_bad_input() {
    let n = 64;
    let moduli = primes::ntt_primes::<u64>(40, n, 2).expect("p");
    let basis = RnsBasis::<u64>::new(n, &moduli).expect("basis");
    let other =
        RnsBasis::<u64>::new(n, &primes::ntt_primes::<u64>(41, n, 2).expect("p")).expect("b");
    let mut a = basis.zero(Form::Coeff);
    let b = other.zero(Form::Coeff);
    assert!(matches!(
        basis.add_assign(&mut a, &b),
        Err(MathError::ShapeMismatch(_))
    ));
    let c = basis.zero(Form::Ntt);
    assert!(matches!(
        basis.add_assign(&mut a, &c),
        Err(MathError::FormMismatch { .. })
    ));
    assert!(matches!(
        basis.mul(&a, &a),
        Err(MathError::FormMismatch { .. })
    ));
    assert!(matches!(
        basis.inverse(&mut a),
        Err(MathError::FormMismatch { .. })
    ));
    assert!(matches!(
        basis.poly_from_signed(&[1, 2, 3]),
        Err(MathError::LengthMismatch { .. })
    ));
    let mut vals = vec![0u64; 2 * n];
    vals[n + 3] = moduli[1];
    assert!(
        matches!(basis.poly_from_words(&vals, Form::Coeff), Err(MathError::ValueOutOfRange { index, .. }) if index == n + 3)
    );
    assert!(matches!(
        RnsBasis::<u64>::new(n, &[]),
        Err(MathError::ShapeMismatch(_))
    ));
    assert!(matches!(
        RnsBasis::<u64>::new(n, &[moduli[0], moduli[0]]),
        Err(MathError::ShapeMismatch(_))
    ));
    assert!(matches!(
        RnsBasis::<u64>::new(100, &moduli),
        Err(MathError::InvalidDegree { .. })
    ));
    let q55 = primes::ntt_primes::<u64>(55, n, 1).expect("p");
    let r = RnsBasis::<u64>::with_backend(n, &q55, BackendChoice::Force(Backend::Avx512Ifma));
    assert!(
        matches!(
            r,
            Err(MathError::ModulusTooLarge { bits: 55, .. })
                | Err(MathError::BackendUnavailable { .. })
        ),
        "{r:?}"
    );
}

#[test]
fn truncated_copies_only_the_kept_limbs() {
    let n = 64;
    let moduli = primes::ntt_primes::<u64>(50, n, 4).expect("primes");
    let full = RnsBasis::<u64>::new(n, &moduli).expect("basis");
    let low = full.select(&[0, 1]).expect("sub-basis");
    let values: Vec<i64> = (0..n as i64).map(|i| i * 37 - 1000).collect();
    let p = full.poly_from_signed(&values).expect("poly");
    let t = low.truncated(&p).expect("truncated");
    let same = low.truncate(p.clone()).expect("truncate");
    assert_eq!(t, same);
    assert_eq!(t.num_limbs(), 2);
    assert_eq!(t.as_slice(), &p.as_slice()[..2 * n]);
    assert_eq!(t.fingerprint(), low.fingerprint());
    // The original is untouched; a larger basis or another ring is refused.
    assert_eq!(p.num_limbs(), 4);
    assert!(matches!(
        full.truncated(&t),
        Err(MathError::ShapeMismatch(_))
    ));
    let other = RnsBasis::<u64>::new(
        2 * n,
        &primes::ntt_primes::<u64>(50, 2 * n, 2).expect("primes"),
    )
    .expect("basis");
    assert!(matches!(
        other.truncated(&t),
        Err(MathError::ShapeMismatch(_))
    ));
}
