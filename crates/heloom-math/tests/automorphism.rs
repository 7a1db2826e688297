//! Galois automorphisms: the NTT-form permutation agrees with the coefficient-form map through
//! the NTT, composition multiplies Galois elements, and the elements of rotations are right.

use heloom_math::automorphism::{
    automorphism_coeff, galois_element_conjugate, galois_element_for_step, NttPermutation,
};
use heloom_math::{primes, MathError, Modulus, NttTable, Word};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;

fn galois_elements(n: usize) -> Vec<u64> {
    let mut gs: Vec<u64> = [1i64, -1, 7, -7, 2, 0, n as i64 / 2 - 1]
        .iter()
        .map(|&s| galois_element_for_step(n, s))
        .collect();
    gs.push(galois_element_conjugate(n));
    gs.push(3);
    gs
}

fn check<W: Word>(n: usize, bits: u32) {
    let q = primes::ntt_primes::<W>(bits, n, 1).expect("prime")[0];
    let table = NttTable::<W>::new(n, q).expect("table");
    let m = Modulus::<W>::new(q).expect("m");
    let mut rng = ChaCha20Rng::seed_from_u64(n as u64 ^ q);
    let a: Vec<W> = (0..n).map(|_| W::from_u64(rng.gen_range(0..q))).collect();
    let mut a_ntt = a.clone();
    table.forward(&mut a_ntt).expect("ntt");
    for g in galois_elements(n) {
        // NTT(sigma_g(a)) == perm(NTT(a)).
        let mut b = vec![W::ZERO; n];
        automorphism_coeff(&m, g, &a, &mut b).expect("coeff");
        table.forward(&mut b).expect("ntt");
        let perm = NttPermutation::new(n, g).expect("perm");
        assert_eq!(perm.g(), g);
        assert_eq!(perm.n(), n);
        let mut c = vec![W::ZERO; n];
        perm.apply(&a_ntt, &mut c).expect("apply");
        assert!(b == c, "N = {n}, q = {q}, g = {g}");
        // A permutation.
        let mut seen = vec![false; n];
        for &i in perm.indices() {
            assert!(!seen[i as usize]);
            seen[i as usize] = true;
        }
    }
    // Composition: sigma_g2(sigma_g1(a)) == sigma_(g1 g2 mod 2N)(a), in both forms.
    let two_n = 2 * n as u64;
    for (g1, g2) in [
        (galois_element_for_step(n, 1), galois_element_for_step(n, 7)),
        (galois_element_for_step(n, 3), galois_element_conjugate(n)),
        (
            galois_element_for_step(n, -1),
            galois_element_for_step(n, 1),
        ),
    ] {
        let g12 = g1 * g2 % two_n;
        let (mut t, mut u, mut v) = (vec![W::ZERO; n], vec![W::ZERO; n], vec![W::ZERO; n]);
        automorphism_coeff(&m, g1, &a, &mut t).expect("g1");
        automorphism_coeff(&m, g2, &t, &mut u).expect("g2");
        automorphism_coeff(&m, g12, &a, &mut v).expect("g12");
        assert!(u == v, "coeff composition N = {n} g1 = {g1} g2 = {g2}");
        let p1 = NttPermutation::new(n, g1).expect("p");
        let p2 = NttPermutation::new(n, g2).expect("p");
        let p12 = NttPermutation::new(n, g12).expect("p");
        p1.apply(&a_ntt, &mut t).expect("g1");
        p2.apply(&t, &mut u).expect("g2");
        p12.apply(&a_ntt, &mut v).expect("g12");
        assert!(u == v, "NTT composition N = {n} g1 = {g1} g2 = {g2}");
    }
}

#[test]
fn ntt_permutation_matches_coefficient_automorphism() {
    for log_n in 4..=13 {
        let n = 1 << log_n;
        check::<u64>(n, 50);
        check::<u64>(n, 60);
        check::<u32>(n, 30);
    }
}

#[test]
fn galois_elements_for_steps() {
    let n = 1 << 10;
    let two_n = 2 * n as u64;
    assert_eq!(galois_element_for_step(n, 0), 1);
    assert_eq!(galois_element_for_step(n, 1), 5);
    assert_eq!(galois_element_for_step(n, 2), 25);
    assert_eq!(galois_element_conjugate(n), two_n - 1);
    for step in [1i64, 3, 7, 100, 511] {
        let g = galois_element_for_step(n, step);
        let gi = galois_element_for_step(n, -step);
        assert_eq!(g * gi % two_n, 1, "step {step}");
        // Steps are taken modulo N/2.
        assert_eq!(g, galois_element_for_step(n, step + n as i64 / 2));
        assert_eq!(gi, galois_element_for_step(n, -step - 3 * n as i64 / 2));
        assert_eq!(g % 2, 1);
        assert!(g < two_n);
    }
    // 5 has order exactly N/2.
    let mut seen = std::collections::HashSet::new();
    for s in 0..n as i64 / 2 {
        assert!(seen.insert(galois_element_for_step(n, s)));
    }
    // No panic on degenerate degrees.
    let _ = galois_element_for_step(0, 5);
    let _ = galois_element_for_step(1, -5);
    let _ = galois_element_conjugate(0);
}

/// Rotation semantics on X itself: sigma_g(X) = X^g, signed.
#[test]
fn coefficient_map_on_monomials() {
    let n = 16;
    let q = primes::ntt_primes::<u64>(30, n, 1).expect("p")[0];
    let m = Modulus::<u64>::new(q).expect("m");
    for g in [3u64, 5, 31, 17] {
        for i in 0..n {
            let mut a = vec![0u64; n];
            a[i] = 1;
            let mut b = vec![0u64; n];
            automorphism_coeff(&m, g, &a, &mut b).expect("coeff");
            let e = (i as u64 * g) % (2 * n as u64);
            let mut want = vec![0u64; n];
            if e < n as u64 {
                want[e as usize] = 1;
            } else {
                want[e as usize - n] = q - 1;
            }
            assert_eq!(b, want, "g = {g} i = {i}");
        }
    }
}

#[test]
fn automorphism_errors() {
    let n = 32;
    let q = primes::ntt_primes::<u64>(30, n, 1).expect("p")[0];
    let m = Modulus::<u64>::new(q).expect("m");
    let a = vec![0u64; n];
    let mut out = vec![0u64; n];
    for g in [0u64, 2, 64, 65, 1000] {
        assert!(matches!(
            automorphism_coeff(&m, g, &a, &mut out),
            Err(MathError::InvalidGaloisElement { .. })
        ));
        assert!(matches!(
            NttPermutation::new(n, g),
            Err(MathError::InvalidGaloisElement { .. })
        ));
    }
    let mut short = vec![0u64; n - 1];
    assert!(matches!(
        automorphism_coeff(&m, 5, &a, &mut short),
        Err(MathError::LengthMismatch { .. })
    ));
    assert!(matches!(
        automorphism_coeff(&m, 5, &a[..24], &mut out[..24]),
        Err(MathError::InvalidDegree { .. })
    ));
    assert!(matches!(
        NttPermutation::new(24, 5),
        Err(MathError::InvalidDegree { .. })
    ));
    let p = NttPermutation::new(n, 5).expect("p");
    assert!(matches!(
        p.apply(&a, &mut short),
        Err(MathError::LengthMismatch { .. })
    ));
    assert!(matches!(
        p.apply(&a[..n - 1], &mut out),
        Err(MathError::LengthMismatch { .. })
    ));
}
