//! The operations circuits are written against ([`PolyOps`]), implemented by the CPU
//! [`Evaluator`], the runtime's task-graph builder and the GPU evaluator, and the scale
//! alignment rule every backend shares ([`align_on`], [`set_scale_by_rescale_on`]), so
//! their results agree word for word.

use crate::ciphertext::{Ciphertext, Plaintext};
use crate::context::Context;
use crate::error::{CkksError, Result};
use crate::evaluator::Evaluator;
use heloom_math::Word;

/// The operations circuits are written against. [`Evaluator`] implements it on ciphertexts;
/// a task-graph builder (heloom-runtime) implements it on symbolic values to turn the very same
/// evaluation into a graph of HE tasks; the GPU evaluator (heloom-gpu) runs it on the device.
pub trait PolyOps {
    /// A ciphertext, or a handle standing for one.
    type Ct: Clone;
    /// The chain's primes `q_0 .. q_L`.
    fn moduli(&self) -> &[u64];
    /// Level of `ct`.
    fn level_of(&self, ct: &Self::Ct) -> usize;
    /// Scale of `ct`.
    fn scale_of(&self, ct: &Self::Ct) -> f64;
    /// Number of polynomials of `ct`.
    fn size_of(&self, ct: &Self::Ct) -> usize;
    /// `ct` relabelled with `scale` (no arithmetic).
    fn with_scale(&self, ct: Self::Ct, scale: f64) -> Result<Self::Ct>;
    /// `a + b` ([`Evaluator::add`]).
    fn add(&self, a: &Self::Ct, b: &Self::Ct) -> Result<Self::Ct>;
    /// `a - b` ([`Evaluator::sub`]).
    fn sub(&self, a: &Self::Ct, b: &Self::Ct) -> Result<Self::Ct>;
    /// `ct + c` ([`Evaluator::add_const`]).
    fn add_const(&self, ct: &Self::Ct, c: f64) -> Result<Self::Ct>;
    /// `ct * k`, small integer ([`Evaluator::multiply_int`]).
    fn multiply_int(&self, ct: &Self::Ct, k: i64) -> Result<Self::Ct>;
    /// `ct * k` for any integer, scale left unchanged for the caller to set.
    fn multiply_const_exact(&self, ct: &Self::Ct, k: i128) -> Result<Self::Ct>;
    /// `ct * c` at scale `q_l` ([`Evaluator::multiply_const`]).
    fn multiply_const(&self, ct: &Self::Ct, c: f64) -> Result<Self::Ct>;
    /// `a * b` ([`Evaluator::multiply`]).
    fn multiply(&self, a: &Self::Ct, b: &Self::Ct) -> Result<Self::Ct>;
    /// `a^2` ([`Evaluator::square`]).
    fn square(&self, a: &Self::Ct) -> Result<Self::Ct>;
    /// [`Evaluator::relinearize`].
    fn relinearize(&self, a: &Self::Ct) -> Result<Self::Ct>;
    /// [`Evaluator::rescale`].
    fn rescale(&self, a: &Self::Ct) -> Result<Self::Ct>;
    /// [`PolyOps::relinearize`] then [`PolyOps::rescale`]; the CPU evaluator can merge the
    /// rescale into the key switch's mod-down ([`Evaluator::with_merged_rescale`]).
    fn relinearize_rescale(&self, a: &Self::Ct) -> Result<Self::Ct> {
        let r = self.relinearize(a)?;
        self.rescale(&r)
    }
    /// Whether [`PolyOps::relinearize_rescale`] is one merged step: polynomial evaluation then
    /// does its linear steps (doubling, subtracting) before it rather than between the two
    /// (default: no; the CPU evaluator with [`Evaluator::with_merged_rescale`]).
    fn merges_rescale(&self) -> bool {
        false
    }
    /// [`Evaluator::drop_to_level`].
    fn drop_to_level(&self, a: &Self::Ct, level: usize) -> Result<Self::Ct>;
    /// `ct` with its slots rotated left by `step` (right when negative), with the backend's
    /// Galois key for the step ([`Evaluator::rotate`]); `ct` must have two polynomials. A step
    /// that is a multiple of the slot count returns `ct` unchanged.
    fn rotate(&self, ct: &Self::Ct, step: i64) -> Result<Self::Ct>;
    /// `ct` rotated by each of `steps`, in order. By default one [`PolyOps::rotate`] per step;
    /// the CPU evaluator shares one key-switching decomposition between them
    /// ([`Evaluator::rotate_many`]).
    fn rotate_many(&self, ct: &Self::Ct, steps: &[i64]) -> Result<Vec<Self::Ct>> {
        steps.iter().map(|&s| self.rotate(ct, s)).collect()
    }
    /// `acc += k * ct` with `ct` dropped to `level` and the product labelled `scale` (`acc =`
    /// that product when `None`): the terms of a polynomial's baby-step sums. By default the
    /// drop, the product and the sum one by one; the CPU evaluator fuses them into one pass
    /// with no copies, with the same words.
    fn multiply_int_accumulate(
        &self,
        acc: &mut Option<Self::Ct>,
        ct: &Self::Ct,
        level: usize,
        k: i128,
        scale: f64,
    ) -> Result<()> {
        let t = self.multiply_const_exact(&self.drop_to_level(ct, level)?, k)?;
        let t = self.with_scale(t, scale)?;
        *acc = Some(match acc.take() {
            None => t,
            Some(a) => self.add(&a, &t)?,
        });
        Ok(())
    }
    /// `ct * values` slot-wise, the values encoded at `ct`'s level with scale `q_level` (the
    /// prime a following rescale divides by, as [`PolyOps::multiply_const`]): the result has
    /// scale `scale * q_level`; rescale it to get `ct`'s scale back.
    ///
    /// The encoder's rules apply ([`Context::encode_at`]): `values` holds 1 to N/2 finite
    /// numbers; a length that is not a power of two is padded with zeros to the next one, `p`,
    /// and the plaintext repeats with period `p` over the N/2 slots (so a vector shorter than
    /// the ciphertext's slot count repeats across them). An empty or too long vector, a
    /// non-finite value or a ciphertext at level 0 is an error.
    fn multiply_plain_slots(&self, ct: &Self::Ct, values: &[f64]) -> Result<Self::Ct>;
    /// The level [`PolyOps::bootstrap`] leaves a ciphertext at, when this backend bootstraps
    /// (`None`, the default: it does not, and levels that run out are an error). Polynomial
    /// evaluation bootstraps its input first when its depth exceeds the input's level and fits
    /// this one.
    fn bootstrap_level(&self) -> Option<usize> {
        None
    }
    /// `ct` (two polynomials) bootstrapped: the same values at [`PolyOps::bootstrap_level`],
    /// with its scale. The default refuses.
    fn bootstrap(&self, ct: &Self::Ct) -> Result<Self::Ct> {
        let _ = ct;
        Err(CkksError::InvalidInput(
            "this backend does not bootstrap: evaluate with circuits::bootstrap::AutoBootstrap (an evaluator with a Bootstrapper and its keys), or record the graph with GraphBuilder::with_bootstrapping".into(),
        ))
    }
}

/// Checks what [`PolyOps::multiply_plain_slots`] can check without the ring degree: at least
/// one value, all finite, and a level to rescale.
pub fn check_plain_slots(values: &[f64], level: usize) -> Result<()> {
    if values.is_empty() {
        return Err(CkksError::InvalidInput(
            "multiplying by a plaintext needs at least one slot value".into(),
        ));
    }
    if let Some(x) = values.iter().find(|x| !x.is_finite()) {
        return Err(CkksError::InvalidInput(format!(
            "plaintext slot value {x} is not finite: CKKS encodes finite numbers only"
        )));
    }
    if level == 0 {
        return Err(CkksError::OutOfLevels {
            level: 0,
            needed: 1,
            hint: "multiplying by a plaintext vector needs a level to rescale; the ciphertext is at level 0".into(),
        });
    }
    Ok(())
}

/// The plaintext [`PolyOps::multiply_plain_slots`] multiplies by: `values` encoded (NTT form) at
/// `level` with scale `q_level`. Every backend encodes with this, so they agree word for word.
pub fn encode_plain_slots<W: Word>(
    ctx: &Context<W>,
    values: &[f64],
    level: usize,
) -> Result<Plaintext<W>> {
    check_plain_slots(values, level)?;
    let q = *ctx
        .params()
        .moduli()
        .get(level)
        .ok_or_else(|| CkksError::OutOfLevels {
            level: ctx.max_level(),
            needed: level,
            hint: format!("level {level} does not exist"),
        })?;
    ctx.encode_at(values, level, q as f64)
}

impl<W: Word> PolyOps for Evaluator<W> {
    type Ct = Ciphertext<W>;
    fn moduli(&self) -> &[u64] {
        self.context().params().moduli()
    }
    fn level_of(&self, ct: &Self::Ct) -> usize {
        ct.level()
    }
    fn scale_of(&self, ct: &Self::Ct) -> f64 {
        ct.scale()
    }
    fn size_of(&self, ct: &Self::Ct) -> usize {
        ct.size()
    }
    fn with_scale(&self, mut ct: Self::Ct, scale: f64) -> Result<Self::Ct> {
        ct.set_scale(scale);
        Ok(ct)
    }
    fn add(&self, a: &Self::Ct, b: &Self::Ct) -> Result<Self::Ct> {
        Evaluator::add(self, a, b)
    }
    fn sub(&self, a: &Self::Ct, b: &Self::Ct) -> Result<Self::Ct> {
        Evaluator::sub(self, a, b)
    }
    fn add_const(&self, ct: &Self::Ct, c: f64) -> Result<Self::Ct> {
        Evaluator::add_const(self, ct, c)
    }
    fn multiply_int(&self, ct: &Self::Ct, k: i64) -> Result<Self::Ct> {
        Evaluator::multiply_int(self, ct, k)
    }
    fn multiply_const_exact(&self, ct: &Self::Ct, k: i128) -> Result<Self::Ct> {
        Evaluator::multiply_const_exact(self, ct, k)
    }
    fn multiply_const(&self, ct: &Self::Ct, c: f64) -> Result<Self::Ct> {
        Evaluator::multiply_const(self, ct, c)
    }
    fn multiply(&self, a: &Self::Ct, b: &Self::Ct) -> Result<Self::Ct> {
        Evaluator::multiply(self, a, b)
    }
    fn square(&self, a: &Self::Ct) -> Result<Self::Ct> {
        Evaluator::square(self, a)
    }
    fn relinearize(&self, a: &Self::Ct) -> Result<Self::Ct> {
        Evaluator::relinearize(self, a)
    }
    fn rescale(&self, a: &Self::Ct) -> Result<Self::Ct> {
        Evaluator::rescale(self, a)
    }
    fn relinearize_rescale(&self, a: &Self::Ct) -> Result<Self::Ct> {
        if self.merged_rescale() {
            return Evaluator::relinearize_rescale(self, a);
        }
        let r = Evaluator::relinearize(self, a)?;
        Evaluator::rescale(self, &r)
    }
    fn merges_rescale(&self) -> bool {
        self.merged_rescale()
    }
    fn drop_to_level(&self, a: &Self::Ct, level: usize) -> Result<Self::Ct> {
        Evaluator::drop_to_level(self, a, level)
    }
    fn rotate(&self, ct: &Self::Ct, step: i64) -> Result<Self::Ct> {
        Evaluator::rotate(self, ct, step)
    }
    fn rotate_many(&self, ct: &Self::Ct, steps: &[i64]) -> Result<Vec<Self::Ct>> {
        Evaluator::rotate_many(self, ct, steps)
    }
    fn multiply_plain_slots(&self, ct: &Self::Ct, values: &[f64]) -> Result<Self::Ct> {
        let pt = encode_plain_slots(self.context(), values, ct.level())?;
        Evaluator::multiply_plain(self, ct, &pt)
    }
    fn multiply_int_accumulate(
        &self,
        acc: &mut Option<Self::Ct>,
        ct: &Self::Ct,
        level: usize,
        k: i128,
        scale: f64,
    ) -> Result<()> {
        Evaluator::multiply_int_accumulate(self, acc, ct, level, k, scale)
    }
}

/// Relative tolerance under which two scales count as equal for a chain of `moduli`: half an
/// ulp of the smallest prime, far below the noise of any CKKS ciphertext.
pub fn scale_tolerance(moduli: &[u64]) -> f64 {
    1.0 / moduli.iter().copied().min().unwrap_or(2) as f64
}

/// Whether two scales are equal within [`scale_tolerance`].
pub fn scales_match(moduli: &[u64], a: f64, b: f64) -> bool {
    ((a - b) / a.max(b)).abs() <= scale_tolerance(moduli)
}

/// Brings two ciphertexts to one level and one scale on any backend: equal scales drop to the
/// lower level; otherwise the one at the higher level is moved to the other's level and scale
/// with [`set_scale_by_rescale_on`]. The CPU evaluator and accelerators share this rule, so
/// their results agree word for word.
pub fn align_on<O: PolyOps>(ops: &O, a: &O::Ct, b: &O::Ct) -> Result<(O::Ct, O::Ct)> {
    let (sa, sb) = (ops.scale_of(a), ops.scale_of(b));
    let (la, lb) = (ops.level_of(a), ops.level_of(b));
    if scales_match(ops.moduli(), sa, sb) {
        let l = la.min(lb);
        return Ok((ops.drop_to_level(a, l)?, ops.drop_to_level(b, l)?));
    }
    let (hi, lo, swapped) = if la >= lb {
        (a, b, false)
    } else {
        (b, a, true)
    };
    if la == lb {
        return Err(CkksError::ScaleMismatch(format!(
            "operands at level {la} have scales 2^{:.4} and 2^{:.4}; bring them to one scale first (rescale the larger one, or multiply by a constant and rescale)",
            sa.log2(),
            sb.log2()
        )));
    }
    let moved = set_scale_by_rescale_on(ops, hi, ops.level_of(lo), ops.scale_of(lo))?;
    Ok(if swapped {
        (lo.clone(), moved)
    } else {
        (moved, lo.clone())
    })
}

/// Moves `ct` to `level` (below its own) with scale `target` on any backend, by multiplying by
/// an integer constant one level above `level` and rescaling. Errors when that constant would
/// be too small to hit `target` within [`scale_tolerance`].
pub fn set_scale_by_rescale_on<O: PolyOps>(
    ops: &O,
    ct: &O::Ct,
    level: usize,
    target: f64,
) -> Result<O::Ct> {
    if level >= ops.level_of(ct) {
        return Err(CkksError::OutOfLevels {
            level: ops.level_of(ct),
            needed: level + 1,
            hint: format!(
                "changing the scale needs one level above the target: ciphertext at level {}, target level {level}",
                ops.level_of(ct)
            ),
        });
    }
    let moduli = ops.moduli();
    let c = ops.drop_to_level(ct, level + 1)?;
    let q = *moduli
        .get(level + 1)
        .ok_or_else(|| CkksError::OutOfLevels {
            level: moduli.len().saturating_sub(1),
            needed: level + 1,
            hint: format!("level {} does not exist", level + 1),
        })? as f64;
    let scale = ops.scale_of(&c);
    let k = (target * q / scale).round();
    if k.is_nan() || k < 1.0 || k * scale_tolerance(moduli) < 0.5 || k >= 2f64.powi(62) {
        return Err(CkksError::ScaleMismatch(format!(
            "cannot move scale 2^{:.3} to 2^{:.3} exactly with one rescale (factor {k}); align scales explicitly",
            scale.log2(),
            target.log2()
        )));
    }
    let c = ops.multiply_const_exact(&c, k as i128)?;
    let c = ops.with_scale(c, scale * k)?;
    let r = ops.rescale(&c)?;
    ops.with_scale(r, target)
}
