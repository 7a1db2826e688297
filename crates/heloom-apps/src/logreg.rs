//! Logistic-regression training on encrypted data: gradient descent over as many iterations
//! as asked for, on an encrypted data set, with the encrypted weights bootstrapped whenever
//! their levels run out ([`AutoBootstrap`]); the same arithmetic in the clear
//! ([`train_plain`]) is the reference. Issue 19's deep workload: each iteration uses
//! [`LEVELS_PER_ITERATION`] levels, so no leveled parameter set trains for long.
//!
//! Packing and update after Kim, Song, Kim, Lee, Cheon, "Logistic regression model training
//! based on the approximate homomorphic encryption" (BMC Medical Genomics 2018): the `n x d`
//! matrix of `z_i = y_i x_i` (labels `y_i` in {-1, 1}, feature 0 a constant 1 for the bias)
//! fills the `N/2` slots row by row; the weights sit in every row. One iteration is
//! `w += (alpha / n) sum_i sigma(-z_i . w) z_i` with the degree-3 least-squares sigmoid
//! [`SIGMOID3`] on [-8, 8]:
//!
//! 1. `Z * W`, rotate-and-sum over each row's `d` slots: `z_i . w` at each row's first slot
//!    (one level);
//! 2. a mask keeps those slots, rotations right by `1, 2, .., d/2` copy them over the row
//!    (one level);
//! 3. `(alpha / n) sigma(-t)` as a polynomial (two levels);
//! 4. times `Z`, rotate-and-sum over the rows (steps `d, 2d, ..`): the gradient step in every
//!    row (one level), added to `W`.

use crate::{AppError, Result};
use heloom_ckks::circuits::bootstrap::AutoBootstrap;
use heloom_ckks::{
    BootstrapConfig, Ciphertext, CkksParameters, PolyBasis, SecretDistribution, SecurityLevel,
};
use heloom_math::Word;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// `sigma(t) ~ 0.5 + 0.15012 t - 0.001593 t^3` on [-8, 8] (least squares; Kim et al. 2018).
pub const SIGMOID3: [f64; 4] = [0.5, 0.15012, 0.0, -0.001593];

/// Levels one iteration uses (see the module docs).
pub const LEVELS_PER_ITERATION: usize = 5;

/// An insecure N = 2^10 chain (tests and smoke runs) that leaves exactly one iteration's
/// levels after bootstrapping, with its bootstrapping settings: a secret of Hamming weight 16,
/// `q_0` of 50 bits, [`LEVELS_PER_ITERATION`] primes of 40 bits.
pub fn small_insecure_setting() -> Result<(CkksParameters, BootstrapConfig)> {
    let config = BootstrapConfig::for_hamming_weight(16);
    let params = CkksParameters::builder(1 << 10)
        .prime_bits(config.chain_bits(50, &[40; LEVELS_PER_ITERATION]))
        .special_bits(60)
        .security(SecurityLevel::None)
        .secret(SecretDistribution::FixedHamming(16))
        .build()?;
    Ok((params, config))
}

/// A training set: `z[i] = y[i] * x[i]`, feature 0 of every `x[i]` the constant 1.
#[derive(Clone, Debug)]
pub struct Dataset {
    /// Features, one row per sample.
    pub x: Vec<Vec<f64>>,
    /// Labels, -1 or 1.
    pub y: Vec<f64>,
}

impl Dataset {
    /// `n` samples of `d` features (the first the constant 1) in two overlapping Gaussian
    /// classes, every value in [-1, 1]: class `y` has mean `y * 0.3` (times a fixed pattern of
    /// signs) and deviation 0.3 in each feature, clipped.
    pub fn synthetic(n: usize, d: usize, seed: u64) -> Self {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let pattern: Vec<f64> = (0..d)
            .map(|j| if j % 3 == 1 { -1.0 } else { 1.0 })
            .collect();
        let mut x = Vec::with_capacity(n);
        let mut y = Vec::with_capacity(n);
        for i in 0..n {
            let label = if i % 2 == 0 { 1.0 } else { -1.0 };
            let mut row = vec![1.0];
            for p in &pattern[1..] {
                // Box-Muller: one standard normal.
                let (u1, u2): (f64, f64) = (rng.gen_range(1e-12..1.0), rng.gen_range(0.0..1.0));
                let g = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
                row.push((label * 0.3 * p + 0.3 * g).clamp(-1.0, 1.0));
            }
            x.push(row);
            y.push(label);
        }
        Self { x, y }
    }

    /// Samples.
    pub fn samples(&self) -> usize {
        self.x.len()
    }

    /// Features per sample (with the bias's 1).
    pub fn features(&self) -> usize {
        self.x.first().map_or(0, Vec::len)
    }

    /// `z_i = y_i x_i` row by row: the slots of the encrypted data set.
    pub fn packed(&self) -> Vec<f64> {
        self.x
            .iter()
            .zip(&self.y)
            .flat_map(|(row, &y)| row.iter().map(move |v| y * v))
            .collect()
    }

    /// Share of samples the weights `w` classify right (`sign(x . w) == y`).
    pub fn accuracy(&self, w: &[f64]) -> f64 {
        let right = self
            .x
            .iter()
            .zip(&self.y)
            .filter(|(row, &y)| dot(row, w) * y > 0.0)
            .count();
        right as f64 / self.samples().max(1) as f64
    }

    /// Checks the shape encrypted training needs: `n * d` equal to `slots`, `d` a power of two.
    pub fn check(&self, slots: usize) -> Result<()> {
        let (n, d) = (self.samples(), self.features());
        if d < 2 || !d.is_power_of_two() || !n.is_power_of_two() || n * d != slots {
            return Err(AppError::Invalid(format!(
                "encrypted training packs n x d = {n} x {d} values into the {slots} slots: n and d must be powers of two (d >= 2) with n * d = {slots}"
            )));
        }
        if self.x.iter().any(|r| r.len() != d) || self.y.iter().any(|&y| y != 1.0 && y != -1.0) {
            return Err(AppError::Invalid(
                "every sample needs the same number of features and a label of -1 or 1".into(),
            ));
        }
        if let Some(v) = self
            .x
            .iter()
            .flatten()
            .find(|v| v.is_nan() || v.abs() > 1.0)
        {
            return Err(AppError::Invalid(format!(
                "feature value {v} is outside [-1, 1]: scale the data first (the sigmoid's approximation holds on [-8, 8])"
            )));
        }
        Ok(())
    }
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// `(alpha / n) sigma(-t)` with [`SIGMOID3`]: the coefficients step 3 evaluates.
pub fn step_polynomial(alpha: f64, n: usize) -> [f64; 4] {
    let k = alpha / n as f64;
    [
        k * SIGMOID3[0],
        -k * SIGMOID3[1],
        k * SIGMOID3[2],
        -k * SIGMOID3[3],
    ]
}

/// The weights after each of `iterations` steps of the same gradient descent, in the clear
/// (starting from zero weights).
pub fn train_plain(data: &Dataset, iterations: usize, alpha: f64) -> Vec<Vec<f64>> {
    let (n, d) = (data.samples(), data.features());
    let c = step_polynomial(alpha, n);
    let mut w = vec![0.0; d];
    let mut out = Vec::with_capacity(iterations);
    for _ in 0..iterations {
        let mut grad = vec![0.0; d];
        for (row, &y) in data.x.iter().zip(&data.y) {
            let t = y * dot(row, &w);
            let g = c[0] + c[1] * t + c[2] * t * t + c[3] * t * t * t;
            for (gj, v) in grad.iter_mut().zip(row) {
                *gj += g * y * v;
            }
        }
        for (wj, gj) in w.iter_mut().zip(&grad) {
            *wj += gj;
        }
        out.push(w.clone());
    }
    out
}

/// Rotation steps encrypted training uses for `d` features and `n` samples (besides
/// bootstrapping's): `1, 2, .., d/2`, their negatives, and `d, 2d, 4d, .., (n/2) d`.
pub fn rotation_steps(n: usize, d: usize) -> Vec<i64> {
    let mut s = Vec::new();
    let mut k = 1;
    while k < d {
        s.push(k as i64);
        s.push(-(k as i64));
        k *= 2;
    }
    let mut k = d;
    while k < n * d {
        s.push(k as i64);
        k *= 2;
    }
    s
}

/// What [`train_encrypted`] did.
#[derive(Clone, Debug, Default)]
pub struct TrainStats {
    /// Bootstraps before each iteration (0 or 1).
    pub bootstraps: Vec<usize>,
    /// Wall time of each iteration (its bootstrap included), s.
    pub seconds: Vec<f64>,
}

/// `iterations` steps of encrypted gradient descent from the encrypted weights `w` (every row
/// the same `d` values: zeros to start) on the encrypted data set `z` ([`Dataset::packed`], at
/// a level at least `w`'s and [`LEVELS_PER_ITERATION`]), `n` samples of `d` features; `w` is
/// bootstrapped by `auto` before an iteration whenever it holds fewer levels than one uses.
/// The evaluator needs the relinearization key and the Galois keys of [`rotation_steps`].
pub fn train_encrypted<W: Word>(
    auto: &AutoBootstrap<W>,
    z: &Ciphertext<W>,
    w: &Ciphertext<W>,
    n: usize,
    d: usize,
    iterations: usize,
    alpha: f64,
    progress: &dyn Fn(usize),
) -> Result<(Ciphertext<W>, TrainStats)> {
    let ev = auto.evaluator();
    let slots = z.slots();
    if n * d != slots || !d.is_power_of_two() || d < 2 || !n.is_power_of_two() {
        return Err(AppError::Invalid(format!(
            "the data set holds {slots} slots; n x d = {n} x {d} must fill them, both powers of two"
        )));
    }
    if z.level() < LEVELS_PER_ITERATION {
        return Err(AppError::Invalid(format!(
            "the encrypted data set is at level {}; an iteration uses {LEVELS_PER_ITERATION}: encrypt it at the level bootstrapping gives ({})",
            z.level(),
            auto.max_levels()
        )));
    }
    let mask: Vec<f64> = (0..slots).map(|t| f64::from(t % d == 0)).collect();
    let poly = step_polynomial(alpha, n);
    let mut w = w.clone();
    let mut stats = TrainStats::default();
    for it in 0..iterations {
        let t = std::time::Instant::now();
        let before = auto.bootstraps();
        w = auto.ensure_levels(&w, LEVELS_PER_ITERATION)?;
        stats.bootstraps.push(auto.bootstraps() - before);
        // 1. z_i . w at each row's first slot.
        let p = ev.rescale(&ev.relinearize(&ev.multiply(z, &w)?)?)?;
        let s = ev.rotate_and_sum(&p, d)?;
        // 2. Masked and copied over the row.
        let mut r = ev.rescale(&ev.multiply_values(&s, &mask)?)?;
        let mut k = 1;
        while k < d {
            let moved = ev.rotate(&r, -(k as i64))?;
            ev.add_assign(&mut r, &moved)?;
            k *= 2;
        }
        // 3. (alpha / n) sigma(-z_i . w) in every slot of row i.
        let g = auto.evaluate_polynomial(&r, &poly, PolyBasis::Power)?;
        // 4. Times z_i, summed over the rows: the step in every row.
        let u = ev.rescale(&ev.relinearize(&ev.multiply(&g, z)?)?)?;
        let mut c = u;
        let mut k = d;
        while k < slots {
            let moved = ev.rotate(&c, k as i64)?;
            ev.add_assign(&mut c, &moved)?;
            k *= 2;
        }
        w = ev.add(&w, &c)?;
        stats.seconds.push(t.elapsed().as_secs_f64());
        progress(it + 1);
    }
    Ok((w, stats))
}
