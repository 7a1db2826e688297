//! Samplers for secrets, errors and uniform polynomials. All randomness comes from a
//! cryptographically secure generator: the OS for [`fresh_seed`], callers' [`CryptoRng`]s, and
//! ChaCha20 (RFC 8439 core, via `rand_chacha`) for polynomials expanded from a seed.
//!
//! - [`ternary`], [`ternary_hamming`]: secrets in `{-1, 0, 1}` (dense, or with an exact Hamming
//!   weight as in sparse-secret CKKS, Cheon-Han-Kim-Kim-Song 2018).
//! - [`gaussian`], [`DiscreteGaussian`]: discrete Gaussian errors by a cumulative distribution
//!   table scanned in full for every sample.
//! - [`uniform_from_seed`]: uniform residues expanded from a 32-byte seed, so keys and
//!   ciphertexts can store the seed instead of the polynomial.

use rand::rngs::OsRng;
use rand::{CryptoRng, RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;

use crate::error::{MathError, Result};
use crate::poly::{Form, RnsBasis, RnsPoly};
use crate::word::Word;

/// A 32-byte seed for ChaCha20.
pub type Seed = [u8; 32];

/// Default width of the error distribution (the HE standard's 3.2, Albrecht et al. 2018).
pub const DEFAULT_SIGMA: f64 = 3.2;

/// Tail cut of the discrete Gaussian, in standard deviations.
pub const TAIL_CUT: f64 = 6.0;

/// Largest `sigma` [`DiscreteGaussian`] accepts: the table has `2 * floor(6 sigma)` entries and
/// every sample scans all of them.
pub const MAX_SIGMA: u32 = 256;

/// A fresh seed from the operating system's generator.
///
/// # Panics
/// If the OS generator fails (it does not on supported platforms); continuing with a weak seed
/// would be worse.
pub fn fresh_seed() -> Seed {
    let mut s = [0u8; 32];
    OsRng.fill_bytes(&mut s);
    s
}

/// A uniform integer in `[0, bound)` by rejection on the smallest covering power of two
/// (unbiased). `bound >= 1`.
fn uniform_below<R: RngCore>(rng: &mut R, bound: u64) -> u64 {
    let mask = u64::MAX >> (bound.max(2) - 1).leading_zeros();
    loop {
        let v = rng.next_u64() & mask;
        if v < bound {
            return v;
        }
    }
}

/// `n` coefficients uniform in `{-1, 0, 1}`: bytes below 255 = 3 * 85 are taken mod 3, the
/// byte 255 is rejected, so there is no bias.
pub fn ternary<R: RngCore + CryptoRng>(rng: &mut R, n: usize) -> Vec<i8> {
    let mut out = Vec::with_capacity(n);
    let mut buf = [0u8; 64];
    while out.len() < n {
        rng.fill_bytes(&mut buf);
        for &b in &buf {
            if out.len() == n {
                break;
            }
            if b < 255 {
                out.push((b % 3) as i8 - 1);
            }
        }
    }
    out
}

/// `n` coefficients in `{-1, 0, 1}` with exactly `h` nonzero: the positions are a uniform
/// `h`-subset (partial Fisher-Yates shuffle, unbiased indices), each sign uniform.
///
/// Errors with [`MathError::InvalidHammingWeight`] unless `1 <= h <= n`.
pub fn ternary_hamming<R: RngCore + CryptoRng>(rng: &mut R, n: usize, h: usize) -> Result<Vec<i8>> {
    if h == 0 || h > n {
        return Err(MathError::InvalidHammingWeight { h, n });
    }
    let mut idx: Vec<usize> = (0..n).collect();
    let mut out = vec![0i8; n];
    for t in 0..h {
        let j = t + uniform_below(rng, (n - t) as u64) as usize;
        idx.swap(t, j);
        out[idx[t]] = if rng.next_u32() & 1 == 1 { 1 } else { -1 };
    }
    Ok(out)
}

/// A discrete Gaussian over the integers, `P(x) ~ exp(-x^2 / (2 sigma^2))` for
/// `|x| <= floor(6 sigma)` and 0 beyond, sampled from a cumulative distribution table (CDT) of
/// 64-bit probabilities.
///
/// Each sample draws one 64-bit word `u` and counts the table entries `<= u` over the whole
/// table, with no data-dependent branch or early exit. The table is built in `f64` from both
/// tails inwards (each entry is a small tail mass, or `2^64` minus one), so every probability is
/// within about `2^-50` relative of the ideal truncated distribution.
#[derive(Clone, Debug, PartialEq)]
pub struct DiscreteGaussian {
    sigma: f64,
    bound: i64,
    /// `cdt[i] = 2^64 P(X <= i - bound)` for `i` in `[0, 2 bound)`.
    cdt: Vec<u64>,
}

impl DiscreteGaussian {
    /// Builds the table. Errors with [`MathError::InvalidSigma`] unless `sigma` is finite and in
    /// `(0, MAX_SIGMA]`.
    pub fn new(sigma: f64) -> Result<Self> {
        if !(sigma.is_finite() && sigma > 0.0 && sigma <= f64::from(MAX_SIGMA)) {
            return Err(MathError::InvalidSigma {
                sigma: format!("{sigma}"),
                max: MAX_SIGMA,
            });
        }
        let bound = (TAIL_CUT * sigma).floor() as i64;
        let weight = |x: i64| (-((x * x) as f64) / (2.0 * sigma * sigma)).exp();
        let total: f64 = (-bound..=bound).map(weight).sum();
        // low[s] = 2^64 P(X <= s - bound) for s - bound < 0, summed from the tail (exact to
        // f64's relative precision; all below 2^63).
        let scale = 2f64.powi(64) / total;
        let mut low = Vec::with_capacity(bound as usize);
        let mut acc = 0.0;
        for x in -bound..0 {
            acc += weight(x);
            low.push((acc * scale) as u64);
        }
        // Upper half by symmetry: P(X <= t) = 1 - P(X <= -t - 1) for t >= 0.
        let mut cdt = low.clone();
        for t in 0..bound {
            cdt.push(0u64.wrapping_sub(low[(bound - 1 - t) as usize]));
        }
        Ok(Self { sigma, bound, cdt })
    }

    /// The width `sigma`.
    pub fn sigma(&self) -> f64 {
        self.sigma
    }

    /// The tail cut `floor(6 sigma)`: every sample has `|x| <= bound`.
    pub fn bound(&self) -> i64 {
        self.bound
    }

    /// One sample.
    #[inline]
    pub fn sample<R: RngCore + CryptoRng>(&self, rng: &mut R) -> i64 {
        let u = rng.next_u64();
        let idx = self
            .cdt
            .iter()
            .fold(0i64, |n, &c| n + i64::from(u8::from(u >= c)));
        idx - self.bound
    }

    /// `n` samples.
    pub fn sample_vec<R: RngCore + CryptoRng>(&self, rng: &mut R, n: usize) -> Vec<i64> {
        (0..n).map(|_| self.sample(rng)).collect()
    }
}

/// `n` discrete Gaussian samples of width `sigma` (callers use [`DEFAULT_SIGMA`]), tail cut at
/// 6 sigma; see [`DiscreteGaussian`].
///
/// # Panics
/// If `sigma` is not finite and in `(0, MAX_SIGMA]` (an error distribution cannot be silently
/// replaced); validate it first with [`DiscreteGaussian::new`], which returns an error instead.
pub fn gaussian<R: RngCore + CryptoRng>(rng: &mut R, n: usize, sigma: f64) -> Vec<i64> {
    match DiscreteGaussian::new(sigma) {
        Ok(g) => g.sample_vec(rng, n),
        Err(e) => panic!("{e}"),
    }
}

/// Fills `out` with uniform residues modulo `q` from `rng`, by rejection on `bits(q)`-bit words
/// (no modular bias): 32-bit draws for primes below 2^32, 64-bit draws otherwise, so the values
/// depend on `q` and the stream only, not on the word size.
fn fill_uniform<W: Word, R: RngCore>(rng: &mut R, q: u64, out: &mut [W]) {
    let bits = 64 - q.leading_zeros();
    let mask = u64::MAX >> (64 - bits);
    if bits <= 32 {
        for o in out.iter_mut() {
            *o = loop {
                let v = u64::from(rng.next_u32()) & mask;
                if v < q {
                    break W::from_u64(v);
                }
            };
        }
    } else {
        for o in out.iter_mut() {
            *o = loop {
                let v = rng.next_u64() & mask;
                if v < q {
                    break W::from_u64(v);
                }
            };
        }
    }
}

/// Uniform residues mod each prime of `basis`, written into every limb of `p` (treated as
/// already in NTT form: a uniform polynomial is uniform in either form), expanded
/// deterministically from `seed` with ChaCha20 (`rand_chacha::ChaCha20Rng::from_seed`), with
/// rejection sampling (no modular bias).
///
/// Domain separation: limb `i` is the stream `ChaCha20Rng::from_seed(seed)` with
/// `set_stream(q_i)`, so it depends only on `(seed, q_i)`: expanding the same seed over a
/// sub-basis (fewer primes, any order) gives identical limbs for the primes in common, and the
/// result does not depend on the word size either. Keys and ciphertexts therefore store only
/// the seed. `p` is tagged [`Form::Ntt`].
///
/// Errors with [`MathError::ShapeMismatch`] when `p` does not belong to `basis`.
pub fn uniform_from_seed<W: Word>(
    seed: &Seed,
    basis: &RnsBasis<W>,
    p: &mut RnsPoly<W>,
) -> Result<()> {
    basis.check_owns("uniform_from_seed", p)?;
    for (limb, m) in p.limbs_mut().zip(basis.moduli()) {
        let mut rng = ChaCha20Rng::from_seed(*seed);
        rng.set_stream(m.value());
        fill_uniform(&mut rng, m.value(), limb);
    }
    p.set_form(Form::Ntt);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every table step is the ideal truncated probability to about 2^-50 relative, tails
    /// included.
    #[test]
    fn cdt_matches_ideal_probabilities() {
        for sigma in [DEFAULT_SIGMA, 0.7, 1.0, 10.5, 100.0] {
            let g = DiscreteGaussian::new(sigma).expect("sigma");
            let b = g.bound;
            assert_eq!(g.cdt.len(), 2 * b as usize);
            let w = |x: i64| (-((x * x) as f64) / (2.0 * sigma * sigma)).exp();
            let total: f64 = (-b..=b).map(w).sum();
            let two64 = 2f64.powi(64);
            let mut prev = 0u64;
            for (i, &c) in g.cdt.iter().chain([&0u64]).enumerate() {
                // P(X = i - b) * 2^64, the last one against 2^64.
                let step = c.wrapping_sub(prev) as f64;
                let ideal = w(i as i64 - b) / total * two64;
                assert!(
                    (step - ideal).abs() <= ideal * 1e-12 + 4096.0,
                    "sigma {sigma} x = {}: {step} vs {ideal}",
                    i as i64 - b
                );
                assert!(i == g.cdt.len() || c > prev || i == 0, "monotone");
                prev = c;
            }
        }
    }
}
