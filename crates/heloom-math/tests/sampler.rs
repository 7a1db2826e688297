//! Sampler statistics (fixed-seed ChaCha20, so the bounds are deterministic) and the seeded
//! uniform expansion's determinism and domain separation.

use heloom_math::sampler::{
    fresh_seed, gaussian, ternary, ternary_hamming, uniform_from_seed, DiscreteGaussian,
    DEFAULT_SIGMA, MAX_SIGMA,
};
use heloom_math::{primes, Form, MathError, RnsBasis, RnsPoly, Word};
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

fn rng(seed: u64) -> ChaCha20Rng {
    ChaCha20Rng::seed_from_u64(seed)
}

#[test]
fn ternary_is_uniform() {
    let n = 300_000;
    let v = ternary(&mut rng(1), n);
    assert_eq!(v.len(), n);
    let mut counts = [0usize; 3];
    for &x in &v {
        assert!((-1..=1).contains(&x));
        counts[(x + 1) as usize] += 1;
    }
    // Chi-square with 2 degrees of freedom: 13.8 is the 0.1% quantile.
    let e = n as f64 / 3.0;
    let chi2: f64 = counts.iter().map(|&c| (c as f64 - e).powi(2) / e).sum();
    assert!(chi2 < 13.8, "chi2 = {chi2}, counts {counts:?}");
    // Odd lengths and different seeds.
    assert_eq!(ternary(&mut rng(2), 17).len(), 17);
    assert!(ternary(&mut rng(2), 0).is_empty());
    assert_ne!(ternary(&mut rng(3), 64), ternary(&mut rng(4), 64));
}

#[test]
fn ternary_hamming_weight_is_exact() {
    let mut r = rng(5);
    for (n, h) in [
        (1usize, 1usize),
        (16, 1),
        (16, 16),
        (1 << 12, 64),
        (1 << 15, 192),
    ] {
        let v = ternary_hamming(&mut r, n, h).expect("ok");
        assert_eq!(v.len(), n);
        assert_eq!(v.iter().filter(|&&x| x != 0).count(), h);
        assert!(v.iter().all(|&x| (-1..=1).contains(&x)));
    }
    // Positions and signs: over many draws every position is hit about equally often and the
    // signs balance.
    let (n, h, trials) = (64usize, 8usize, 20_000usize);
    let mut hits = vec![0usize; n];
    let mut plus = 0usize;
    for _ in 0..trials {
        for (i, &x) in ternary_hamming(&mut r, n, h)
            .expect("ok")
            .iter()
            .enumerate()
        {
            if x != 0 {
                hits[i] += 1;
                plus += usize::from(x == 1);
            }
        }
    }
    let e = (trials * h) as f64 / n as f64;
    let chi2: f64 = hits.iter().map(|&c| (c as f64 - e).powi(2) / e).sum();
    // 63 degrees of freedom: 103 is the 0.1% quantile.
    assert!(chi2 < 103.0, "position chi2 = {chi2}");
    let total = (trials * h) as f64;
    assert!((plus as f64 / total - 0.5).abs() < 0.01, "plus fraction");
    assert!(matches!(
        ternary_hamming(&mut r, 16, 0),
        Err(MathError::InvalidHammingWeight { h: 0, n: 16 })
    ));
    assert!(matches!(
        ternary_hamming(&mut r, 16, 17),
        Err(MathError::InvalidHammingWeight { h: 17, n: 16 })
    ));
}

#[test]
fn gaussian_moments_and_tail() {
    for sigma in [DEFAULT_SIGMA, 1.0, 8.0, 19.2] {
        let n = 1 << 18;
        let v = gaussian(&mut rng(7), n, sigma);
        assert_eq!(v.len(), n);
        let mean = v.iter().sum::<i64>() as f64 / n as f64;
        let var = v.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / n as f64;
        let bound = (6.0 * sigma).floor() as i64;
        // The mean's standard error is sigma / 512.
        assert!(
            mean.abs() < 5.0 * sigma / 512.0,
            "sigma {sigma}: mean {mean}"
        );
        assert!(
            (var / (sigma * sigma) - 1.0).abs() < 0.05,
            "sigma {sigma}: variance {var}"
        );
        assert!(v.iter().all(|x| x.abs() <= bound), "tail cut");
        // Symmetric: as many positive as negative samples (within 5 standard errors).
        let pos = v.iter().filter(|&&x| x > 0).count() as f64;
        let neg = v.iter().filter(|&&x| x < 0).count() as f64;
        assert!(
            (pos - neg).abs() < 5.0 * (pos + neg).sqrt(),
            "sigma {sigma}: {pos} vs {neg}"
        );
    }
    // The default width hits its extremes in the table: the probabilities near the cut are
    // tiny but not zero, and P(0) matches the ideal density.
    let g = DiscreteGaussian::new(DEFAULT_SIGMA).expect("g");
    assert_eq!(g.bound(), 19);
    assert_eq!(g.sigma(), DEFAULT_SIGMA);
    let n = 1 << 20;
    let zeros = g
        .sample_vec(&mut rng(9), n)
        .iter()
        .filter(|&&x| x == 0)
        .count() as f64;
    let s = DEFAULT_SIGMA;
    let total: f64 = (-19i64..=19)
        .map(|x| (-((x * x) as f64) / (2.0 * s * s)).exp())
        .sum();
    let p0 = 1.0 / total;
    let se = (n as f64 * p0 * (1.0 - p0)).sqrt();
    assert!((zeros - n as f64 * p0).abs() < 5.0 * se, "P(0)");
}

#[test]
fn gaussian_rejects_bad_sigma() {
    for s in [
        0.0,
        -1.0,
        f64::NAN,
        f64::INFINITY,
        f64::from(MAX_SIGMA) + 1.0,
    ] {
        assert!(matches!(
            DiscreteGaussian::new(s),
            Err(MathError::InvalidSigma { .. })
        ));
    }
    // A tiny sigma is the point mass at 0.
    let g = DiscreteGaussian::new(0.1).expect("g");
    assert!(g.sample_vec(&mut rng(1), 100).iter().all(|&x| x == 0));
}

#[test]
fn fresh_seeds_differ() {
    assert_ne!(fresh_seed(), fresh_seed());
}

/// A fresh polynomial of `basis` sampled from `seed`.
fn sampled<W: Word>(seed: &[u8; 32], basis: &RnsBasis<W>) -> RnsPoly<W> {
    let mut p = basis.zero(Form::Ntt);
    uniform_from_seed(seed, basis, &mut p).expect("sample");
    p
}

fn check_uniform<W: Word>(bits: u32) {
    let n = 1 << 12;
    let qs = primes::ntt_primes::<W>(bits, n, 4).expect("primes");
    let basis = RnsBasis::<W>::new(n, &qs).expect("basis");
    let seed = [7u8; 32];
    // Starts in coefficient form: the sampler sets the form it writes.
    let mut a = basis.zero(Form::Coeff);
    uniform_from_seed(&seed, &basis, &mut a).expect("a");
    assert_eq!(a.form(), Form::Ntt);
    assert_eq!(a, sampled(&seed, &basis), "deterministic");
    let mut other = [7u8; 32];
    other[31] ^= 1;
    let c = sampled(&other, &basis);
    for i in 0..qs.len() {
        let same = a
            .limb(i)
            .iter()
            .zip(c.limb(i))
            .filter(|(x, y)| x == y)
            .count();
        assert!(same < 8, "different seeds collide in {same} places");
    }
    // Limbs are independent streams: no two limbs share their first words.
    assert_ne!(a.limb(0)[..8], a.limb(1)[..8]);
    // Sub-basis (a subset in another order) gives the same limbs for the common primes.
    let sub = basis.select(&[2, 0]).expect("select");
    let s = sampled(&seed, &sub);
    assert_eq!(s.limb(0), a.limb(2));
    assert_eq!(s.limb(1), a.limb(0));
    let fresh = RnsBasis::<W>::new(n, &qs[1..2]).expect("basis");
    let f = sampled(&seed, &fresh);
    assert_eq!(f.limb(0), a.limb(1));
    // Range and mean.
    for (i, &q) in qs.iter().enumerate() {
        let limb = a.limb(i);
        assert!(limb.iter().all(|x| x.to_u64() < q));
        let mean = limb.iter().map(|x| x.to_u64() as f64).sum::<f64>() / n as f64;
        // Standard error of the mean: q / sqrt(12 n) = q / 222.
        assert!(
            (mean / q as f64 - 0.5).abs() < 5.0 / 222.0,
            "mean {mean} for q = {q}"
        );
    }
    // Wrong shape.
    let small = RnsBasis::<W>::new(n, &qs[..2]).expect("basis");
    let mut wrong = small.zero(Form::Ntt);
    assert!(matches!(
        uniform_from_seed(&seed, &basis, &mut wrong),
        Err(MathError::ShapeMismatch(_))
    ));
}

#[test]
fn uniform_from_seed_u64_and_u32() {
    check_uniform::<u64>(60);
    check_uniform::<u64>(40);
    check_uniform::<u64>(30);
    check_uniform::<u32>(31);
    check_uniform::<u32>(25);
}

/// The stream depends on the prime only, not on the word size.
#[test]
fn uniform_from_seed_is_word_independent() {
    let n = 1 << 10;
    let qs = primes::ntt_primes::<u32>(30, n, 2).expect("primes");
    let b64 = RnsBasis::<u64>::new(n, &qs).expect("b");
    let b32 = RnsBasis::<u32>::new(n, &qs).expect("b");
    let seed = [3u8; 32];
    let (p64, p32) = (sampled(&seed, &b64), sampled(&seed, &b32));
    let w: Vec<u64> = p32.as_slice().iter().map(|&x| u64::from(x)).collect();
    assert_eq!(p64.as_slice(), &w[..]);
}
