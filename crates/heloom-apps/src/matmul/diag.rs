//! A plaintext `d x d` matrix times an encrypted `d`-vector by generalized diagonals
//! (Halevi-Shoup 2014, "Algorithms in HElib", Section 4.3), with baby-step giant-step and
//! hoisted baby steps (Halevi-Shoup 2018, "Faster homomorphic linear transformations in
//! HElib", Sections 4.1-4.2).
//!
//! With `D` the padded size (see the [module docs](super)) and `M` padded with zeros, the
//! `i`-th generalized diagonal is `diag_i[t] = M[t][(t + i) mod D]`, and
//!
//! ```text
//! M v = sum_{i < D} diag_i ⊙ rot(v, i)                                   (HS14, eq. 4.3)
//!     = sum_{a < D/g} rot( sum_{b < g} rot(diag_{g a + b}, -g a) ⊙ rot(v, b), g a )
//! ```
//!
//! (HS18, Section 4.1: `rot` commutes with `⊙`): a linear transform of the slots, computed by
//! [`LinearTransform`] (hoisted baby steps, pre-rotated diagonals encoded once at scale
//! `q_level`, one level, all-zero diagonals of banded or padded matrices skipped).
//!
//! The vector is packed in `D` slots ([`pack_vector`]): the encoder repeats it over the
//! `N/2` slots, so every rotation wraps at `D`.

use super::{baby_steps, check_keys, check_packing, padded, Matrix};
use crate::error::{AppError, Result};
use heloom_ckks::{Ciphertext, Context, Evaluator, LinearTransform, Threads};
use heloom_math::Word;
use std::sync::Arc;

/// A plaintext square matrix encoded as its pre-rotated generalized diagonals, ready to
/// multiply encrypted vectors at one level.
#[derive(Clone, Debug)]
pub struct DiagonalMatrix<W: Word> {
    d: usize,
    transform: LinearTransform<W>,
}

/// The baby-step count `g` and giant-step count `D / g` for dimension `d` (padded to `D`).
pub fn bsgs(d: usize) -> (usize, usize) {
    let size = padded(d);
    let g = baby_steps(size);
    (g, size / g)
}

/// The rotation steps the product of a `d x d` matrix needs Galois keys for: the baby steps
/// `1 .. g-1` and the giant steps `g, 2g, .., D - g` (a matrix with all-zero diagonals uses a
/// subset).
pub fn rotation_steps(d: usize) -> Vec<i64> {
    let (g, h) = bsgs(d);
    (1..g)
        .map(|b| b as i64)
        .chain((1..h).map(|a| (g * a) as i64))
        .collect()
}

/// The `D` values to encrypt for vector `v` of length `d`: `v` padded with zeros.
pub fn pack_vector(v: &[f64], d: usize) -> Result<Vec<f64>> {
    if v.len() != d {
        return Err(AppError::Invalid(format!(
            "the vector has {} entries; a {d} x {d} matrix needs {d}",
            v.len()
        )));
    }
    if let Some(i) = v.iter().position(|x| !x.is_finite()) {
        return Err(AppError::Invalid(format!(
            "vector entry {i} is {}, not a finite number",
            v[i]
        )));
    }
    let mut out = v.to_vec();
    out.resize(padded(d), 0.0);
    Ok(out)
}

/// The product's `d` entries from the decrypted slots.
pub fn unpack_vector(slots: &[f64], d: usize) -> Result<Vec<f64>> {
    slots.get(..d).map(<[f64]>::to_vec).ok_or_else(|| {
        AppError::Invalid(format!(
            "{} decrypted slots cannot hold a vector of {d} entries",
            slots.len()
        ))
    })
}

impl<W: Word> DiagonalMatrix<W> {
    /// Encodes square `matrix` for vectors at `level` (at least 1: the product uses one),
    /// splitting the encodings over `threads`. Refuses a non-square matrix and one whose
    /// padded size exceeds the `N/2` slots.
    pub fn encode(
        ctx: &Arc<Context<W>>,
        matrix: &Matrix,
        level: usize,
        threads: Threads,
    ) -> Result<Self> {
        let d = matrix.side("the plaintext matrix")?;
        let size = padded(d);
        let slots = ctx.params().slots();
        if size > slots {
            return Err(AppError::Invalid(format!(
                "a {d} x {d} matrix packs its vector in {size} slots (d padded to a power of \
                 two); these parameters have {slots} (N/2): use a larger N or a smaller matrix"
            )));
        }
        if level == 0 || level > ctx.max_level() {
            return Err(AppError::Invalid(format!(
                "the matrix-vector product uses one level; vectors at level {level} cannot be \
                 used (levels 1..={} can)",
                ctx.max_level()
            )));
        }
        let (g, _) = bsgs(d);
        // diag_i[t] = M[t][(t + i) mod D].
        let diagonal = |i: usize| (0..size).map(|t| matrix.get(t, (t + i) % size)).collect();
        let transform = LinearTransform::new(ctx, size, size, g, level, diagonal, threads)?;
        Ok(Self { d, transform })
    }

    /// The matrix side `d`.
    pub fn d(&self) -> usize {
        self.d
    }

    /// The packed size `D` (the vector's slot count).
    pub fn size(&self) -> usize {
        self.transform.period()
    }

    /// The level the diagonals are encoded at (vectors above it are dropped to it).
    pub fn level(&self) -> usize {
        self.transform.level()
    }

    /// Number of non-zero diagonals (plaintext multiplications per product).
    pub fn nonzero_diagonals(&self) -> usize {
        self.transform.nonzero_diagonals()
    }

    /// The rotation steps this matrix's product uses (a subset of [`rotation_steps`]).
    pub fn used_steps(&self) -> Vec<i64> {
        self.transform.used_steps()
    }

    /// The linear transform behind the product.
    pub fn transform(&self) -> &LinearTransform<W> {
        &self.transform
    }

    /// `M v` before the rescale: every rotation and plaintext product, at the matrix's level,
    /// with scale `scale(v) * q_level` (follow with [`Evaluator::rescale`], or use
    /// [`Self::multiply_rescaled`]). `v` must pack `D` slots ([`pack_vector`]) and sit at or
    /// above the matrix's level; `ev` needs the Galois keys of [`Self::used_steps`].
    pub fn multiply(&self, ev: &Evaluator<W>, v: &Ciphertext<W>) -> Result<Ciphertext<W>> {
        check_packing(
            v,
            self.size(),
            "the vector ciphertext",
            "encrypt the D values of diag::pack_vector",
        )?;
        if v.level() < self.level() {
            return Err(AppError::Invalid(format!(
                "the vector is at level {}, below the level {} the matrix was encoded at; \
                 encode the matrix at the vector's level",
                v.level(),
                self.level()
            )));
        }
        check_keys(
            ev,
            &self.used_steps(),
            false,
            "the matrix-vector product",
            "diag::rotation_steps(d)",
        )?;
        Ok(self.transform.apply(ev, v)?)
    }

    /// `M v`, rescaled: one level below the matrix's level, with `v`'s scale.
    pub fn multiply_rescaled(&self, ev: &Evaluator<W>, v: &Ciphertext<W>) -> Result<Ciphertext<W>> {
        let p = self.multiply(ev, v)?;
        Ok(ev.rescale(&p)?)
    }
}
