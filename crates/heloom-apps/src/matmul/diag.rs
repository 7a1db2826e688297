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
//! (HS18, Section 4.1: `rot` commutes with `⊙`). The `g - 1` baby rotations `rot(v, b)` share
//! one key-switching decomposition of `v` ([`Evaluator::rotate_many`]); each of the `D/g - 1`
//! giant rotations acts on an inner sum. The diagonals are rotated by `-g a` in the clear and
//! encoded once ([`DiagonalMatrix::encode`]) at scale `q_level`, the prime the final rescale
//! divides by, so the product keeps the vector's scale and uses one level. All-zero diagonals
//! (banded or padded matrices) are skipped, with their rotations.
//!
//! The vector is packed in `D` slots ([`pack_vector`]): the encoder repeats it over the
//! `N/2` slots, so every rotation wraps at `D`.

use super::{accumulate, baby_steps, check_keys, check_packing, padded, rotated, Matrix};
use crate::error::{AppError, Result};
use heloom_ckks::{Ciphertext, Context, Evaluator, Plaintext, Threads};
use heloom_math::Word;
use std::sync::Arc;

/// The giant-step groups of one matrix: `(a, [(b, rot(diag_{g a + b}, -g a))])`, non-zero
/// diagonals only.
type Groups<W> = Vec<(usize, Vec<(usize, Plaintext<W>)>)>;

/// A plaintext square matrix encoded as its pre-rotated generalized diagonals, ready to
/// multiply encrypted vectors at one level.
#[derive(Clone, Debug)]
pub struct DiagonalMatrix<W: Word> {
    d: usize,
    size: usize,
    baby: usize,
    level: usize,
    groups: Groups<W>,
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
        let (g, h) = bsgs(d);
        // diag_i[t] = M[t][(t + i) mod D], rotated by -g a for its giant step (HS18, 4.1).
        let mut jobs: Vec<(usize, usize, Vec<f64>)> = Vec::new();
        for a in 0..h {
            for b in 0..g {
                let i = g * a + b;
                let diag: Vec<f64> = (0..size).map(|t| matrix.get(t, (t + i) % size)).collect();
                if diag.iter().any(|&x| x != 0.0) {
                    jobs.push((a, b, rotated(&diag, -((g * a) as i64))));
                }
            }
        }
        let scale = ctx.params().moduli()[level] as f64;
        let encoded = threads.map(jobs.len(), |k| ctx.encode_at(&jobs[k].2, level, scale));
        let mut groups: Groups<W> = Vec::new();
        for ((a, b, _), pt) in jobs.iter().zip(encoded) {
            let pt = pt?;
            match groups.last_mut() {
                Some((last, terms)) if last == a => terms.push((*b, pt)),
                _ => groups.push((*a, vec![(*b, pt)])),
            }
        }
        Ok(Self {
            d,
            size,
            baby: g,
            level,
            groups,
        })
    }

    /// The matrix side `d`.
    pub fn d(&self) -> usize {
        self.d
    }

    /// The packed size `D` (the vector's slot count).
    pub fn size(&self) -> usize {
        self.size
    }

    /// The level the diagonals are encoded at (vectors above it are dropped to it).
    pub fn level(&self) -> usize {
        self.level
    }

    /// Number of non-zero diagonals (plaintext multiplications per product).
    pub fn nonzero_diagonals(&self) -> usize {
        self.groups.iter().map(|(_, t)| t.len()).sum()
    }

    /// The rotation steps this matrix's product uses (a subset of [`rotation_steps`]).
    pub fn used_steps(&self) -> Vec<i64> {
        let mut babies: Vec<usize> = self
            .groups
            .iter()
            .flat_map(|(_, t)| t.iter().map(|(b, _)| *b))
            .filter(|&b| b > 0)
            .collect();
        babies.sort_unstable();
        babies.dedup();
        babies
            .into_iter()
            .chain(
                self.groups
                    .iter()
                    .filter(|(a, _)| *a > 0)
                    .map(|(a, _)| a * self.baby),
            )
            .map(|s| s as i64)
            .collect()
    }

    /// `M v` before the rescale: every rotation and plaintext product, at the matrix's level,
    /// with scale `scale(v) * q_level` (follow with [`Evaluator::rescale`], or use
    /// [`Self::multiply_rescaled`]). `v` must pack `D` slots ([`pack_vector`]) and sit at or
    /// above the matrix's level; `ev` needs the Galois keys of [`Self::used_steps`].
    pub fn multiply(&self, ev: &Evaluator<W>, v: &Ciphertext<W>) -> Result<Ciphertext<W>> {
        check_packing(
            v,
            self.size,
            "the vector ciphertext",
            "encrypt the D values of diag::pack_vector",
        )?;
        if v.level() < self.level {
            return Err(AppError::Invalid(format!(
                "the vector is at level {}, below the level {} the matrix was encoded at; \
                 encode the matrix at the vector's level",
                v.level(),
                self.level
            )));
        }
        let steps = self.used_steps();
        check_keys(
            ev,
            &steps,
            false,
            "the matrix-vector product",
            "diag::rotation_steps(d)",
        )?;
        let v: std::borrow::Cow<'_, Ciphertext<W>> = if v.level() > self.level {
            std::borrow::Cow::Owned(ev.drop_to_level(v, self.level)?)
        } else {
            std::borrow::Cow::Borrowed(v)
        };
        if self.groups.is_empty() {
            // The zero matrix: a zero ciphertext with the scale a product would have.
            return Ok(ev.multiply_const(v.as_ref(), 0.0)?);
        }
        // Baby steps rot(v, b), hoisted: one decomposition of v for all of them.
        let babies: Vec<i64> = steps
            .iter()
            .copied()
            .filter(|&s| (s as usize) < self.baby)
            .collect();
        let rotated = ev.rotate_many(v.as_ref(), &babies)?;
        let baby = |b: usize| -> Result<&Ciphertext<W>> {
            if b == 0 {
                return Ok(v.as_ref());
            }
            babies
                .iter()
                .position(|&s| s as usize == b)
                .map(|i| &rotated[i])
                .ok_or_else(|| AppError::Invalid(format!("internal: baby step {b} not computed")))
        };
        // Giant steps: independent groups, dealt out to the threads, partial sums added.
        let threads = ev.threads().effective();
        let n = self.groups.len();
        let parts = threads.get().min(n);
        let partial = threads.map(parts, |c| -> Result<Option<Ciphertext<W>>> {
            let e = ev.with_threads(threads.share(parts, c));
            let mut acc: Option<Ciphertext<W>> = None;
            for (a, terms) in &self.groups[c * n / parts..(c + 1) * n / parts] {
                // Inner sum: sum_b rot(diag_{g a + b}, -g a) ⊙ rot(v, b).
                let mut inner: Option<Ciphertext<W>> = None;
                for (b, pt) in terms {
                    let t = e.multiply_plain(baby(*b)?, pt)?;
                    accumulate(&e, &mut inner, t)?;
                }
                let Some(mut inner) = inner else { continue };
                if *a > 0 {
                    inner = e.rotate(&inner, (a * self.baby) as i64)?;
                }
                accumulate(&e, &mut acc, inner)?;
            }
            Ok(acc)
        });
        let mut acc: Option<Ciphertext<W>> = None;
        for p in partial {
            if let Some(p) = p? {
                accumulate(ev, &mut acc, p)?;
            }
        }
        acc.ok_or_else(|| AppError::Invalid("internal: empty matrix product".into()))
    }

    /// `M v`, rescaled: one level below the matrix's level, with `v`'s scale.
    pub fn multiply_rescaled(&self, ev: &Evaluator<W>, v: &Ciphertext<W>) -> Result<Ciphertext<W>> {
        let p = self.multiply(ev, v)?;
        Ok(ev.rescale(&p)?)
    }
}
