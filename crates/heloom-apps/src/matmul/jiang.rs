//! An encrypted `d x d` matrix times an encrypted `d x d` matrix (Jiang, Kim, Lauter, Song
//! 2018, "Secure Outsourced Matrix Computation and Application to Neural Networks", JKLS18).
//!
//! Each matrix is packed row-major in one ciphertext of `D^2` slots (entry `(i, j)` in slot
//! `D i + j`, `d` padded to `D`, see the [module docs](super)), so rotations wrap at `D^2` as
//! the paper assumes (`n = d^2`). With `rot(x, r)[t] = x[t + r mod D^2]`, JKLS18 Section 3.2:
//!
//! - `sigma(A)[i][j] = A[i][i + j]`: `sigma(A) = sum_{-D < l < D} u_l ⊙ rot(A, l)`, where
//!   `u_l[D i + j] = 1` iff `((i + j) mod D) - j = l` (2D - 1 diagonals, Step 1-1);
//! - `tau(B)[i][j] = B[i + j][j]`: `tau(B) = sum_{0 <= k < D} v_k ⊙ rot(B, D k)`, where
//!   `v_k[D i + j] = 1` iff `j = k` (D diagonals, Step 1-2);
//! - the column shift `phi^k(A) = m_k ⊙ rot(A, k) + m'_k ⊙ rot(A, k - D)`, `m_k` selecting
//!   the columns `j < D - k` and `m'_k = 1 - m_k`; the row shift `psi^k(B) = rot(B, D k)`;
//! - `A B = sum_{0 <= k < D} phi^k(sigma(A)) ⊙ psi^k(tau(B))` (eq. (3), Algorithm 2).
//!
//! Rotations, with one split `g` (a power of two near `sqrt(D)`, `h = D / g`) so that every
//! stage shares the same `O(sqrt D)` Galois keys:
//!
//! - `sigma` and `tau` by baby-step giant-step as in JKLS18 Section 4.1 (`rot` commutes with
//!   `⊙`): the baby rotations `rot(A, b)`, `rot(B, D b)` (`b < g`) are hoisted, the masks
//!   are pre-rotated by the giant step in the clear.
//! - Steps 2-3 by baby-step giant-step over `k = g a + b` (`a < h`, `b < g`). With
//!   `A0 = sigma(A)`, `A0' = rot(A0, -D)`, `B0 = tau(B)`, `rot(x, k) = rot(rot(x, b), g a)` and
//!   `rot(A0, k - D) = rot(rot(A0', b), g a)`, so moving `rot(., g a)` out of each term:
//!
//!   ```text
//!   phi^k(A0) ⊙ psi^k(B0) = rot( [ rot(m_k, -g a) ⊙ rot(A0, b) + rot(m'_k, -g a) ⊙ rot(A0', b) ]
//!                                ⊙ rot(rot(B0, D b), (D - 1) g a),  g a )
//!   A B = sum_{a < h} rot( sum_{b < g} [..] ⊙ [..],  g a )
//!   ```
//!
//!   The `2 g` rotations of `A0`, `A0'` and the `D` rotations of `B0` (per baby `b`, all
//!   giants of `rot(B0, D b)` hoisted: [`Evaluator::rotate_many`]) feed `h` inner sums, each
//!   relinearized and rotated once by `g a`: about `D + 4 sqrt(D)` key switches for steps 2-3
//!   where computing every `phi^k`, `psi^k` (JKLS18 Table 3) takes `3 D`.
//!
//! Levels (JKLS18: depth 3): `sigma`/`tau` use one (masks at scale `q_L`, rescaled), the
//! shift masks one (`q_{L-1}`) and the product one. The last two rescales are deferred: the
//! masked `A0` terms stay at scale `Delta q_{L-1}` and multiply the rotations of `B0`
//! unrescaled; the inner sums are relinearized (the giant rotations need two polynomials),
//! rotated, summed, and rescaled twice at the end ([`JiangMultiplier::finish`]). The `k = 0`
//! term `A0 ⊙ B0` is brought to the same scale by the exact integer factor `q_{L-1}`.

use super::{
    accumulate, baby_steps, canonical, check_keys, check_packing, padded, rotated, Matrix,
};
use crate::error::{AppError, Result};
use heloom_ckks::{Ciphertext, Context, Evaluator, Plaintext, Threads};
use heloom_math::Word;
use std::sync::Arc;

/// Levels the product uses.
pub const LEVELS: usize = 3;

/// One linear transform by baby-step giant-step: per giant step (canonical step), the baby
/// steps and their pre-rotated diagonal masks (plaintexts, slot values, ...).
pub(crate) type Groups<P> = Vec<(i64, Vec<(usize, P)>)>;

/// [`Groups`] of encoded plaintexts.
type Transform<W> = Groups<Plaintext<W>>;

/// Which of the product's masks: `sigma`'s, `tau`'s, or a column shift's `m_k` / `m'_k`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MaskKind {
    /// A diagonal `u_l` of `sigma`, pre-rotated by its giant step.
    Sigma,
    /// A diagonal `v_k` of `tau`, pre-rotated by its giant step.
    Tau,
    /// `rot(m_k, -g a)`: the columns `j < D - k`.
    Shift,
    /// `rot(m'_k, -g a)`: the columns `j >= D - k`.
    ShiftWrap,
}

impl MaskKind {
    /// How many levels below the input the mask is multiplied in: `sigma` and `tau` at the
    /// input level, the shift masks one below (after `sigma`'s rescale).
    pub(crate) fn levels_below_input(self) -> usize {
        match self {
            MaskKind::Sigma | MaskKind::Tau => 0,
            MaskKind::Shift | MaskKind::ShiftWrap => 1,
        }
    }
}

/// One mask before encoding: its kind, its giant step (`sigma`, `tau`; `k` for the shift
/// masks), its baby step (0 for the shift masks) and its `D^2` slot values (or, once
/// encoded, its plaintext).
pub(crate) type Mask<P> = (MaskKind, i64, usize, P);

/// The masks grouped as the product uses them.
#[derive(Clone, Debug)]
pub(crate) struct Masks<P> {
    /// `sigma`'s diagonals by giant step.
    pub(crate) sigma: Groups<P>,
    /// `tau`'s diagonals by giant step.
    pub(crate) tau: Groups<P>,
    /// `(rot(m_k, -g a), rot(m'_k, -g a))` for `k = g a + b = 1 .. D-1`, index `k - 1`.
    pub(crate) shifts: Vec<(P, P)>,
}

/// A ciphertext and its baby-step rotations, in order of the step.
type Babies<W> = Vec<Ciphertext<W>>;

/// Precomputed plaintext masks of JKLS18's product for one dimension and input level: data
/// independent, built once like the keys.
#[derive(Clone, Debug)]
pub struct JiangMultiplier<W: Word> {
    d: usize,
    size: usize,
    baby: usize,
    level: usize,
    sigma: Transform<W>,
    tau: Transform<W>,
    /// `(rot(m_k, -g a), rot(m'_k, -g a))` for `k = g a + b = 1 .. D-1` at `level - 1`,
    /// index `k - 1`.
    shifts: Vec<(Plaintext<W>, Plaintext<W>)>,
}

/// The baby-step count `g` for dimension `d` (padded to `D`): a power of two near `sqrt(D)`.
pub fn baby(d: usize) -> usize {
    baby_steps(padded(d))
}

/// The giant steps of `sigma`: `g a` for `-D/g <= a < D/g`, `a != 0` (signed).
fn giants_a(size: usize, g: usize) -> impl Iterator<Item = i64> {
    let h = (size / g) as i64;
    (-h..h).filter(|&a| a != 0).map(move |a| a * g as i64)
}

/// The rotation steps JKLS18's product of `d x d` matrices needs Galois keys for, in `0..D^2`:
/// the baby steps `1 .. g-1` and `D b` (`b < g`), the giant steps `g a` (`sigma`, both signs,
/// and steps 2-3), `D g a` (`tau`) and `(D - 1) g a` (steps 2-3), and `-D` (for `A0'`).
pub fn rotation_steps(d: usize) -> Vec<i64> {
    let size = padded(d);
    let period = size * size;
    let g = baby(d);
    let h = size / g;
    let mut steps: Vec<i64> = (1..g as i64)
        .chain(giants_a(size, g))
        .chain((1..g).map(|b| (size * b) as i64))
        .chain((1..h).map(|a| (size * g * a) as i64))
        .chain((1..h).map(|a| ((size - 1) * g * a) as i64))
        .chain(std::iter::once(-(size as i64)))
        .map(|s| canonical(s, period))
        .filter(|&s| s != 0)
        .collect();
    steps.sort_unstable();
    steps.dedup();
    steps
}

/// Every mask of the product of `d x d` matrices (`d >= 1`), as slot values: `sigma`'s
/// `2D - 1` diagonals and `tau`'s `D`, each pre-rotated by its giant step, in increasing
/// giant step, then the shift masks `m_k`, `m'_k` for `k = 1 .. D-1` (see the module docs).
/// Shared by [`JiangMultiplier`] (which encodes them) and the task graph
/// ([`crate::graphs::matmul_encrypted_graph`], which multiplies by the values).
pub(crate) fn masks(d: usize) -> Vec<Mask<Vec<f64>>> {
    let size = padded(d);
    let period = size * size;
    let g = baby(d);
    let cell = |t: usize| (t / size, t % size);
    let mut jobs: Vec<Mask<Vec<f64>>> = Vec::new();
    // sigma: u_l[D i + j] = 1 iff ((i + j) mod D) - j = l; l = g a + b.
    for l in -(size as i64 - 1)..size as i64 {
        let u: Vec<f64> = (0..period)
            .map(|t| {
                let (i, j) = cell(t);
                f64::from(u8::from(((i + j) % size) as i64 - j as i64 == l))
            })
            .collect();
        let (a, b) = (l.div_euclid(g as i64), l.rem_euclid(g as i64) as usize);
        let giant = a * g as i64;
        jobs.push((MaskKind::Sigma, giant, b, rotated(&u, -giant)));
    }
    // tau: v_k[D i + j] = 1 iff j = k; offset D k with k = g a + b.
    for k in 0..size {
        let v: Vec<f64> = (0..period)
            .map(|t| f64::from(u8::from(cell(t).1 == k)))
            .collect();
        let giant = (size * g * (k / g)) as i64;
        jobs.push((MaskKind::Tau, giant, k % g, rotated(&v, -giant)));
    }
    // phi^k: m_k selects the columns j < D - k, m'_k the others; both rotated by -g a for
    // k = g a + b.
    for k in 1..size {
        let m: Vec<f64> = (0..period)
            .map(|t| f64::from(u8::from(cell(t).1 < size - k)))
            .collect();
        let m2: Vec<f64> = m.iter().map(|x| 1.0 - x).collect();
        let giant = -((g * (k / g)) as i64);
        jobs.push((MaskKind::Shift, k as i64, 0, rotated(&m, giant)));
        jobs.push((MaskKind::ShiftWrap, k as i64, 0, rotated(&m2, giant)));
    }
    jobs
}

/// The masks of [`masks`] (values or encoded, in that order) grouped for the product:
/// `sigma` and `tau` by canonical giant step (in `0..period`), the shift masks in pairs.
pub(crate) fn group_masks<P>(
    period: usize,
    jobs: impl IntoIterator<Item = Mask<P>>,
) -> Result<Masks<P>> {
    let mut sigma: Groups<P> = Vec::new();
    let mut tau: Groups<P> = Vec::new();
    let mut shifts = Vec::new();
    let mut pending: Option<P> = None;
    for (kind, giant, b, p) in jobs {
        let group = |t: &mut Groups<P>, p| {
            let step = canonical(giant, period);
            match t.last_mut() {
                Some((s, terms)) if *s == step => terms.push((b, p)),
                _ => t.push((step, vec![(b, p)])),
            }
        };
        match kind {
            MaskKind::Sigma => group(&mut sigma, p),
            MaskKind::Tau => group(&mut tau, p),
            MaskKind::Shift => pending = Some(p),
            MaskKind::ShiftWrap => {
                let m = pending.take().ok_or_else(|| {
                    AppError::Invalid("internal: shift masks out of order".into())
                })?;
                shifts.push((m, p));
            }
        }
    }
    Ok(Masks { sigma, tau, shifts })
}

/// The `D^2` values to encrypt for square `m`: row-major, padded with zeros to `D x D`.
pub fn pack_matrix(m: &Matrix) -> Result<Vec<f64>> {
    let d = m.side("the matrix")?;
    let size = padded(d);
    Ok((0..size * size)
        .map(|t| m.get(t / size, t % size))
        .collect())
}

/// The `d x d` product from the decrypted `D^2` slots.
pub fn unpack_matrix(slots: &[f64], d: usize) -> Result<Matrix> {
    let size = padded(d);
    if slots.len() < size * size {
        return Err(AppError::Invalid(format!(
            "{} decrypted slots cannot hold a {d} x {d} matrix packed in {size} x {size}",
            slots.len()
        )));
    }
    let data = (0..d * d).map(|t| slots[(t / d) * size + t % d]).collect();
    Matrix::new(d, d, data)
}

impl<W: Word> JiangMultiplier<W> {
    /// Encodes the masks for `d x d` matrices encrypted at `level` (at least [`LEVELS`]),
    /// splitting the encodings over `threads`. Refuses `D^2` above the `N/2` slots.
    pub fn new(ctx: &Arc<Context<W>>, d: usize, level: usize, threads: Threads) -> Result<Self> {
        if d == 0 {
            return Err(AppError::Invalid(
                "matrices need at least one row and column".into(),
            ));
        }
        let size = padded(d);
        let period = size * size;
        let slots = ctx.params().slots();
        if period > slots {
            return Err(AppError::Invalid(format!(
                "a {d} x {d} matrix packs in {size}^2 = {period} slots (d padded to a power of \
                 two), but these parameters have {slots} (N/2): use a larger N or d <= {}",
                1usize << (slots.trailing_zeros() / 2)
            )));
        }
        if level < LEVELS || level > ctx.max_level() {
            return Err(AppError::Invalid(format!(
                "the encrypted matrix product uses {LEVELS} levels; inputs at level {level} \
                 cannot be used (levels {LEVELS}..={} can)",
                ctx.max_level()
            )));
        }
        let jobs = masks(d);
        let moduli = ctx.params().moduli();
        let encoded = threads.map(jobs.len(), |n| {
            let (kind, _, _, ref values) = jobs[n];
            // Transforms at the input level, shift masks one below (after sigma/tau's rescale);
            // each at the scale of the prime the next rescale divides by.
            let lv = level - kind.levels_below_input();
            ctx.encode_at(values, lv, moduli[lv] as f64)
        });
        let encoded = encoded
            .into_iter()
            .collect::<std::result::Result<Vec<_>, _>>()?;
        let grouped = group_masks(
            period,
            jobs.into_iter()
                .zip(encoded)
                .map(|((kind, giant, b, _), pt)| (kind, giant, b, pt)),
        )?;
        let Masks { sigma, tau, shifts } = grouped;
        Ok(Self {
            d,
            size,
            baby: baby(d),
            level,
            sigma,
            tau,
            shifts,
        })
    }

    /// The matrix side `d`.
    pub fn d(&self) -> usize {
        self.d
    }

    /// The packed side `D` (ciphertexts hold `D^2` slots).
    pub fn size(&self) -> usize {
        self.size
    }

    /// The input level (inputs above it are dropped to it).
    pub fn level(&self) -> usize {
        self.level
    }

    /// Number of plaintext masks held.
    pub fn masks(&self) -> usize {
        let t = |x: &Transform<W>| x.iter().map(|(_, v)| v.len()).sum::<usize>();
        t(&self.sigma) + t(&self.tau) + 2 * self.shifts.len()
    }

    fn input(&self, ev: &Evaluator<W>, ct: &Ciphertext<W>, what: &str) -> Result<Ciphertext<W>> {
        check_packing(
            ct,
            self.size * self.size,
            what,
            "encrypt the D^2 values of jiang::pack_matrix",
        )?;
        if ct.size() != 2 {
            return Err(AppError::Invalid(format!(
                "{what} has {} polynomials; relinearize it first",
                ct.size()
            )));
        }
        match ct.level().cmp(&self.level) {
            std::cmp::Ordering::Less => Err(AppError::Invalid(format!(
                "{what} is at level {}, below the level {} the multiplier was built for; build \
                 it for level {} (the product needs {LEVELS})",
                ct.level(),
                self.level,
                ct.level()
            ))),
            std::cmp::Ordering::Equal => Ok(ct.clone()),
            std::cmp::Ordering::Greater => Ok(ev.drop_to_level(ct, self.level)?),
        }
    }

    /// `sum_giant rot(sum_b mask ⊙ babies[b], giant)`, unrescaled.
    fn transform(
        ev: &Evaluator<W>,
        t: &Transform<W>,
        babies: &[Ciphertext<W>],
    ) -> Result<Ciphertext<W>> {
        let mut acc: Option<Ciphertext<W>> = None;
        for (giant, terms) in t {
            let mut inner: Option<Ciphertext<W>> = None;
            for (b, pt) in terms {
                let x = babies.get(*b).ok_or_else(|| {
                    AppError::Invalid(format!("internal: baby step {b} not computed"))
                })?;
                let p = ev.multiply_plain(x, pt)?;
                accumulate(ev, &mut inner, p)?;
            }
            let Some(mut inner) = inner else { continue };
            if *giant != 0 {
                inner = ev.rotate(&inner, *giant)?;
            }
            accumulate(ev, &mut acc, inner)?;
        }
        acc.ok_or_else(|| AppError::Invalid("internal: empty linear transform".into()))
    }

    /// `ct` and its rotations by `unit * b` for `b = 1 .. g-1` (hoisted), in order of `b`.
    fn with_babies(&self, ev: &Evaluator<W>, ct: Ciphertext<W>, unit: usize) -> Result<Babies<W>> {
        let steps: Vec<i64> = (1..self.baby).map(|b| (unit * b) as i64).collect();
        let mut out = Vec::with_capacity(self.baby);
        let rest = ev.rotate_many(&ct, &steps)?;
        out.push(ct);
        out.extend(rest);
        Ok(out)
    }

    /// `A B` before the final rescales: `sigma`, `tau` (rescaled), every shift and product,
    /// summed and relinearized; at level `L - 1` with scale `scale(A) scale(B) q_{L-1}` (`L`
    /// the multiplier's level). Follow with [`Self::finish`], or use [`Self::multiply`].
    /// Needs the relinearization key and the Galois keys of [`rotation_steps`].
    pub fn product(
        &self,
        ev: &Evaluator<W>,
        a: &Ciphertext<W>,
        b: &Ciphertext<W>,
    ) -> Result<Ciphertext<W>> {
        let a = self.input(ev, a, "matrix A's ciphertext")?;
        let b = self.input(ev, b, "matrix B's ciphertext")?;
        check_keys(
            ev,
            &rotation_steps(self.d),
            true,
            "the encrypted matrix product",
            "jiang::rotation_steps(d)",
        )?;
        let (size, g) = (self.size, self.baby);
        let h = size / g;
        let threads = ev.threads().effective();
        // Step 1 (JKLS18 Algorithm 2, lines 1-2): A0 = sigma(A), B0 = tau(B), one level; the
        // two transforms are independent, so they run side by side on halves of the budget.
        let (a0, b0) = threads.join(
            |t| self.linear(&ev.with_threads(t), a, &self.sigma, 1),
            |t| self.linear(&ev.with_threads(t), b, &self.tau, size),
        );
        let (a0, b0) = (a0?, b0?);
        // Baby steps: rot(A0, b), rot(A0', b) with A0' = rot(A0, -D), and rot(B0, D b).
        let (a_side, b_babies) = threads.join(
            move |t| -> Result<(Babies<W>, Babies<W>)> {
                let e = ev.with_threads(t);
                let a0p = e.rotate(&a0, canonical(-(size as i64), size * size))?;
                Ok((self.with_babies(&e, a0, 1)?, self.with_babies(&e, a0p, 1)?))
            },
            move |t| self.with_babies(&ev.with_threads(t), b0, size),
        );
        let ((a_babies, ap_babies), b_babies) = (a_side?, b_babies?);
        // Inner sums S_a = sum_b [..] ⊙ rot(rot(B0, D b), (D - 1) g a), the baby steps dealt
        // out to the threads (each keeps partial sums for every a).
        let parts = threads.get().min(g);
        let partials = threads.map(parts, |c| -> Result<Vec<Option<Ciphertext<W>>>> {
            let e = ev.with_threads(threads.share(parts, c));
            let mut sums: Vec<Option<Ciphertext<W>>> = vec![None; h];
            for bb in c * g / parts..(c + 1) * g / parts {
                let terms = self.baby_terms(&e, &a_babies, &ap_babies, &b_babies, bb)?;
                for (sum, t) in sums.iter_mut().zip(terms) {
                    accumulate(&e, sum, t)?;
                }
            }
            Ok(sums)
        });
        let mut sums: Vec<Option<Ciphertext<W>>> = vec![None; h];
        for p in partials {
            for (sum, t) in sums.iter_mut().zip(p?) {
                if let Some(t) = t {
                    accumulate(ev, sum, t)?;
                }
            }
        }
        // Giant steps: relinearize each S_a, rotate it by g a, sum; dealt out to the threads.
        let parts = threads.get().min(h);
        let giants = threads.map(parts, |c| -> Result<Option<Ciphertext<W>>> {
            let e = ev.with_threads(threads.share(parts, c));
            let mut acc: Option<Ciphertext<W>> = None;
            for (a, s) in sums
                .iter()
                .enumerate()
                .take((c + 1) * h / parts)
                .skip(c * h / parts)
            {
                let Some(s) = s else { continue };
                let mut x = e.relinearize(s)?;
                if a > 0 {
                    x = e.rotate(&x, (g * a) as i64)?;
                }
                accumulate(&e, &mut acc, x)?;
            }
            Ok(acc)
        });
        let mut acc: Option<Ciphertext<W>> = None;
        for x in giants {
            if let Some(x) = x? {
                accumulate(ev, &mut acc, x)?;
            }
        }
        acc.ok_or_else(|| AppError::Invalid("internal: no product terms".into()))
    }

    /// One linear transform (`sigma` with `unit = 1`, `tau` with `unit = D`), rescaled.
    fn linear(
        &self,
        ev: &Evaluator<W>,
        ct: Ciphertext<W>,
        t: &Transform<W>,
        unit: usize,
    ) -> Result<Ciphertext<W>> {
        let babies = self.with_babies(ev, ct, unit)?;
        Ok(ev.rescale(&Self::transform(ev, t, &babies)?)?)
    }

    /// For baby step `bb`, the terms of every inner sum `S_a` (`a < h`), unrelinearized, at
    /// scale `scale(A0) scale(B0) q_{L-1}`:
    /// `[rot(m_k, -g a) ⊙ rot(A0, bb) + rot(m'_k, -g a) ⊙ rot(A0', bb)] ⊙ rot(B0, D k - g a)`.
    fn baby_terms(
        &self,
        ev: &Evaluator<W>,
        a_babies: &[Ciphertext<W>],
        ap_babies: &[Ciphertext<W>],
        b_babies: &[Ciphertext<W>],
        bb: usize,
    ) -> Result<Vec<Ciphertext<W>>> {
        let (size, g) = (self.size, self.baby);
        let h = size / g;
        let missing = || AppError::Invalid(format!("internal: baby step {bb} not computed"));
        let ab = a_babies.get(bb).ok_or_else(missing)?;
        let apb = ap_babies.get(bb).ok_or_else(missing)?;
        let bb0 = b_babies.get(bb).ok_or_else(missing)?;
        // rot(B0, D k - g a) = rot(rot(B0, D bb), (D - 1) g a) for 1 <= a < h, hoisted.
        let steps: Vec<i64> = (1..h).map(|a| ((size - 1) * g * a) as i64).collect();
        let brots = ev.rotate_many(bb0, &steps)?;
        let mut out = Vec::with_capacity(h);
        for a in 0..h {
            let k = g * a + bb;
            let lhs = if k == 0 {
                // phi^0(A0) = A0, times the exact integer q_{L-1}: the masked terms' scale.
                ev.multiply_const(ab, 1.0)?
            } else {
                let (m, m2) = &self.shifts[k - 1];
                let x = ev.multiply_plain(ab, m)?;
                let y = ev.multiply_plain(apb, m2)?;
                ev.add(&x, &y)?
            };
            let rhs = if a == 0 { bb0 } else { &brots[a - 1] };
            out.push(ev.multiply(&lhs, rhs)?);
        }
        Ok(out)
    }

    /// The two deferred rescales (shift masks, then the product): level `L - 3`, scale
    /// `scale(A) scale(B) / q_{L-2}`.
    pub fn finish(&self, ev: &Evaluator<W>, ct: &Ciphertext<W>) -> Result<Ciphertext<W>> {
        let once = ev.rescale(ct)?;
        Ok(ev.rescale(&once)?)
    }

    /// `A B`: [`Self::product`] then [`Self::finish`].
    pub fn multiply(
        &self,
        ev: &Evaluator<W>,
        a: &Ciphertext<W>,
        b: &Ciphertext<W>,
    ) -> Result<Ciphertext<W>> {
        let p = self.product(ev, a, b)?;
        self.finish(ev, &p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_cover_every_rotation() {
        for d in [1, 2, 3, 4, 8, 16, 64] {
            let steps = rotation_steps(d);
            let size = padded(d);
            let g = baby(d);
            assert!(steps.iter().all(|&s| s > 0 && s < (size * size) as i64));
            // 2 (g - 1) babies, 4 h giants and -D at most.
            assert!(
                steps.len() <= 2 * g + 4 * size / g + 1,
                "d = {d}: {steps:?}"
            );
        }
        // -D = -g h is also sigma's most negative giant step.
        assert_eq!(rotation_steps(64).len(), 7 + 15 + 7 + 7 + 7);
    }
}
