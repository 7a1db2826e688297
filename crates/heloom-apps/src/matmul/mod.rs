//! Matrix products on CKKS ciphertexts.
//!
//! - [`diag`]: a plaintext `d x d` matrix times an encrypted `d`-vector (Halevi-Shoup 2014,
//!   "Algorithms in HElib", Section 4.3: the matrix as its generalized diagonals), with
//!   baby-step giant-step (Halevi-Shoup 2018, "Faster homomorphic linear transformations in
//!   HElib", Section 4) and hoisted baby-step rotations. One level.
//! - [`jiang`]: an encrypted `d x d` matrix times an encrypted `d x d` matrix (Jiang, Kim,
//!   Lauter, Song 2018, "Secure Outsourced Matrix Computation and Application to Neural
//!   Networks", Algorithm 2): the linear transforms `sigma` and `tau`, then `d` column/row
//!   shifts `phi^k`, `psi^k`, products and sums. Three levels.
//!
//! # Packing
//!
//! Both algorithms need rotations that wrap around at the size of the packed object, not at
//! the `N/2` slots of the ring. A ciphertext encrypting `s < N/2` values (a power of two) is a
//! *sparse* packing: its `N/2` slots hold the `s` values repeated `N / (2 s)` times, so a
//! rotation by `k` of the whole slot vector is a cyclic rotation by `k mod s` of the packed
//! values. This is the "replicate to fill the `N/2` slots" trick, done by the encoder for free.
//!
//! A dimension `d` that is not a power of two is padded with zeros to `D`, the next power of two
//! (zero rows and columns change no entry of the product): a vector is packed in `D` slots, a
//! matrix row-major in `D^2` slots (entry `(i, j)` in slot `D i + j`). Hence `D <= N/2` for
//! [`diag`] and `D^2 <= N/2` for [`jiang`]; larger sizes are refused.
//!
//! Rotation steps are given in `0..s` (a step `-k` is the step `s - k`), so a caller
//! generates Galois keys for exactly the steps [`diag::rotation_steps`] or
//! [`jiang::rotation_steps`] list; a missing key is reported with the steps to generate.

pub mod diag;
pub mod jiang;

use crate::error::{AppError, Result};
pub(crate) use heloom_ckks::circuits::accumulate;
pub(crate) use heloom_ckks::circuits::lintrans::{baby_steps, rotate_values as rotated};
use heloom_ckks::{Ciphertext, Evaluator};
use heloom_math::automorphism::galois_element_for_step;
use heloom_math::Word;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;

/// A dense real matrix, row-major.
#[derive(Clone, Debug, PartialEq)]
pub struct Matrix {
    rows: usize,
    cols: usize,
    data: Vec<f64>,
}

impl Matrix {
    /// A `rows x cols` matrix from its entries, row by row; refuses a length other than
    /// `rows * cols` and non-finite entries.
    pub fn new(rows: usize, cols: usize, data: Vec<f64>) -> Result<Self> {
        if rows == 0 || cols == 0 {
            return Err(AppError::Invalid(format!(
                "a matrix needs at least one row and one column, got {rows} x {cols}"
            )));
        }
        if rows.checked_mul(cols) != Some(data.len()) {
            return Err(AppError::Invalid(format!(
                "a {rows} x {cols} matrix has {} entries, got {}",
                rows.saturating_mul(cols),
                data.len()
            )));
        }
        if let Some(i) = data.iter().position(|x| !x.is_finite()) {
            return Err(AppError::Invalid(format!(
                "matrix entry ({}, {}) is {}, not a finite number",
                i / cols,
                i % cols,
                data[i]
            )));
        }
        Ok(Self { rows, cols, data })
    }

    /// A matrix from its rows; refuses rows of different lengths.
    pub fn from_rows(rows: &[Vec<f64>]) -> Result<Self> {
        let cols = rows.first().map_or(0, Vec::len);
        if let Some(i) = rows.iter().position(|r| r.len() != cols) {
            return Err(AppError::Invalid(format!(
                "row {i} has {} entries, row 0 has {cols}: rows must have equal lengths",
                rows[i].len()
            )));
        }
        Self::new(rows.len(), cols, rows.concat())
    }

    /// A `d x d` matrix of entries uniform in `[-1, 1]`, reproducible from `seed`.
    pub fn random(d: usize, seed: u64) -> Self {
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        let data = (0..d * d).map(|_| rng.gen_range(-1.0..=1.0)).collect();
        Self {
            rows: d,
            cols: d,
            data,
        }
    }

    /// Number of rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Number of columns.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// The entries, row-major.
    pub fn data(&self) -> &[f64] {
        &self.data
    }

    /// Entry `(i, j)` (zero outside the matrix: the padding of the packings).
    pub fn get(&self, i: usize, j: usize) -> f64 {
        if i < self.rows && j < self.cols {
            self.data[i * self.cols + j]
        } else {
            0.0
        }
    }

    /// The side `d` of a square matrix; refuses a non-square one, naming `what` it is.
    pub fn side(&self, what: &str) -> Result<usize> {
        if self.rows != self.cols {
            return Err(AppError::Invalid(format!(
                "{what} is {} x {}; these matrix products take square d x d matrices (pad it \
                 with zeros to a square)",
                self.rows, self.cols
            )));
        }
        Ok(self.rows)
    }

    /// The plaintext product `self * other` (the reference the encrypted products are checked
    /// against).
    pub fn mul(&self, other: &Matrix) -> Result<Matrix> {
        if self.cols != other.rows {
            return Err(AppError::Invalid(format!(
                "cannot multiply a {} x {} matrix by a {} x {} one",
                self.rows, self.cols, other.rows, other.cols
            )));
        }
        let mut data = vec![0.0; self.rows * other.cols];
        for i in 0..self.rows {
            for k in 0..self.cols {
                let a = self.data[i * self.cols + k];
                let row = &other.data[k * other.cols..(k + 1) * other.cols];
                for (c, b) in data[i * other.cols..(i + 1) * other.cols]
                    .iter_mut()
                    .zip(row)
                {
                    *c += a * b;
                }
            }
        }
        Ok(Matrix {
            rows: self.rows,
            cols: other.cols,
            data,
        })
    }

    /// The plaintext product `self * v`.
    pub fn mul_vec(&self, v: &[f64]) -> Result<Vec<f64>> {
        if v.len() != self.cols {
            return Err(AppError::Invalid(format!(
                "cannot multiply a {} x {} matrix by a vector of length {}",
                self.rows,
                self.cols,
                v.len()
            )));
        }
        Ok(self
            .data
            .chunks_exact(self.cols)
            .map(|row| row.iter().zip(v).map(|(a, b)| a * b).sum())
            .collect())
    }
}

/// The packed size of dimension `d`: the next power of two.
pub fn padded(d: usize) -> usize {
    d.max(1).next_power_of_two()
}

/// Largest absolute difference between two equally long slices (infinite when the lengths
/// differ).
pub fn max_abs_error(got: &[f64], want: &[f64]) -> f64 {
    if got.len() != want.len() {
        return f64::INFINITY;
    }
    got.iter()
        .zip(want)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f64::max)
}

/// Step `s` (any sign) as the equivalent step in `0..period` (rotations wrap at `period`).
pub(crate) fn canonical(step: i64, period: usize) -> i64 {
    step.rem_euclid(period as i64)
}

/// Checks that `ev` has a relinearization key (when `relin`) and a Galois key for every step
/// of `steps`; the error lists every missing step and where the full list comes from.
pub(crate) fn check_keys<W: Word>(
    ev: &Evaluator<W>,
    steps: &[i64],
    relin: bool,
    algo: &str,
    steps_fn: &str,
) -> Result<()> {
    let keys = ev.evaluation_keys().ok_or_else(|| {
        AppError::Invalid(format!(
            "{algo} needs evaluation keys (Galois keys for the steps {steps_fn} lists); the \
             evaluator has none"
        ))
    })?;
    if relin && !keys.has_relin() {
        return Err(AppError::Invalid(format!(
            "{algo} needs a relinearization key; the evaluation keys have none"
        )));
    }
    let n = ev.context().n();
    let missing: Vec<i64> = steps
        .iter()
        .copied()
        .filter(|&s| {
            let g = galois_element_for_step(n, s);
            g != 1 && keys.galois_key(g).is_none()
        })
        .collect();
    if !missing.is_empty() {
        return Err(AppError::Invalid(format!(
            "{algo} is missing Galois keys for rotation steps {missing:?}; generate keys for all \
             of {steps:?} (the list {steps_fn} returns)"
        )));
    }
    Ok(())
}

/// Checks that `ct` packs `period` values (a sparse packing whose rotations wrap at `period`).
pub(crate) fn check_packing<W: Word>(
    ct: &Ciphertext<W>,
    period: usize,
    what: &str,
    how: &str,
) -> Result<()> {
    if ct.slots() != period {
        return Err(AppError::Invalid(format!(
            "{what} holds {} slots; it must pack exactly {period} values so that rotations wrap \
             at {period} ({how})",
            ct.slots()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_and_rotations() {
        assert_eq!(baby_steps(1), 1);
        assert_eq!(baby_steps(2), 1);
        assert_eq!(baby_steps(4), 2);
        assert_eq!(baby_steps(16), 4);
        assert_eq!(baby_steps(32), 4);
        assert_eq!(baby_steps(64), 8);
        assert_eq!(canonical(-3, 16), 13);
        assert_eq!(rotated(&[1.0, 2.0, 3.0, 4.0], 1), vec![2.0, 3.0, 4.0, 1.0]);
        assert_eq!(rotated(&[1.0, 2.0, 3.0, 4.0], -1), vec![4.0, 1.0, 2.0, 3.0]);
        assert_eq!(padded(5), 8);
        assert_eq!(padded(16), 16);
    }

    #[test]
    fn matrices() -> Result<()> {
        let a = Matrix::from_rows(&[vec![1.0, 2.0], vec![3.0, 4.0]])?;
        let b = Matrix::new(2, 2, vec![0.0, 1.0, 1.0, 0.0])?;
        assert_eq!(a.mul(&b)?.data(), &[2.0, 1.0, 4.0, 3.0]);
        assert_eq!(a.mul_vec(&[1.0, 1.0])?, vec![3.0, 7.0]);
        assert!(Matrix::from_rows(&[vec![1.0], vec![1.0, 2.0]]).is_err());
        assert!(Matrix::new(2, 3, vec![0.0; 5]).is_err());
        assert!(Matrix::new(1, 1, vec![f64::NAN]).is_err());
        assert!(Matrix::new(2, 3, vec![0.0; 6])?.side("A").is_err());
        Ok(())
    }
}
