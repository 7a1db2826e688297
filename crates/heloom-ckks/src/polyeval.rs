//! Polynomial evaluation with baby-step giant-step (Paterson-Stockmeyer as adapted to CKKS by
//! Bossuat et al., Eurocrypt 2021), in the power basis or the Chebyshev basis on an interval.
//!
//! Levels and scales are managed automatically: every partial result is produced directly at
//! the level and scale its consumer needs, by folding the scale correction into the integer
//! constants that multiply the baby-step powers. The result comes out at the input's scale.
//! Depth: at most `ceil(log2(degree + 1)) + 1` levels (exactly [`Evaluator::polynomial_depth`]),
//! plus one for a Chebyshev interval other than [-1, 1].

use crate::ciphertext::Ciphertext;
use crate::error::{CkksError, Result};
use crate::evaluator::{scaled_int, Evaluator};
use heloom_math::Word;

/// The operations polynomial evaluation is written against. [`Evaluator`] implements it on
/// ciphertexts; a task-graph builder (heloom-runtime) implements it on symbolic values to turn
/// the very same evaluation into a graph of HE tasks.
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
    /// [`Evaluator::drop_to_level`].
    fn drop_to_level(&self, a: &Self::Ct, level: usize) -> Result<Self::Ct>;
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
    fn drop_to_level(&self, a: &Self::Ct, level: usize) -> Result<Self::Ct> {
        Evaluator::drop_to_level(self, a, level)
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
/// with [`set_scale_by_rescale_with`]. The CPU evaluator and accelerators share this rule, so
/// their results agree word for word.
pub fn align_with<O: PolyOps>(ops: &O, a: &O::Ct, b: &O::Ct) -> Result<(O::Ct, O::Ct)> {
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
    let moved = set_scale_by_rescale_with(ops, hi, ops.level_of(lo), ops.scale_of(lo))?;
    Ok(if swapped {
        (lo.clone(), moved)
    } else {
        (moved, lo.clone())
    })
}

/// Moves `ct` to `level` (below its own) with scale `target` on any backend, by multiplying by
/// an integer constant one level above `level` and rescaling. Errors when that constant would
/// be too small to hit `target` within [`scale_tolerance`].
pub fn set_scale_by_rescale_with<O: PolyOps>(
    ops: &O,
    ct: &O::Ct,
    level: usize,
    target: f64,
) -> Result<O::Ct> {
    if level >= ops.level_of(ct) {
        return Err(CkksError::OutOfLevels(format!(
            "changing the scale needs one level above the target: ciphertext at level {}, target level {level}",
            ops.level_of(ct)
        )));
    }
    let moduli = ops.moduli();
    let c = ops.drop_to_level(ct, level + 1)?;
    let q = *moduli
        .get(level + 1)
        .ok_or_else(|| CkksError::OutOfLevels(format!("level {} does not exist", level + 1)))?
        as f64;
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

/// The basis the coefficients are given in.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum PolyBasis {
    /// `sum_k c_k x^k`.
    Power,
    /// `sum_k c_k T_k(y)` with `y = (2x - a - b) / (b - a)` mapping `[a, b]` to `[-1, 1]`.
    Chebyshev {
        /// Left end of the interval.
        a: f64,
        /// Right end of the interval.
        b: f64,
    },
}

/// Cached powers: `x^k` or `T_k`, each a ciphertext at its own level and scale.
struct Powers<C> {
    cts: Vec<Option<C>>,
    cheb: bool,
}

impl<C> Powers<C> {
    fn get(&self, k: usize) -> Result<&C> {
        self.cts
            .get(k)
            .and_then(|c| c.as_ref())
            .ok_or_else(|| CkksError::InvalidInput(format!("internal: power {k} not computed")))
    }
}

/// `(log2 baby, baby)`: baby steps up to `2^ceil(m/2)` for a degree of `m` bits.
fn split_sizes(degree: usize) -> (usize, usize) {
    let m = (usize::BITS - degree.leading_zeros()) as usize;
    let l = m.div_ceil(2).max(1);
    (l, 1usize << l)
}

fn trim(coeffs: &[f64]) -> &[f64] {
    let mut d = coeffs.len();
    while d > 1 && coeffs[d - 1] == 0.0 {
        d -= 1;
    }
    &coeffs[..d]
}

impl<W: Word> Evaluator<W> {
    /// Levels `evaluate_polynomial` consumes for a polynomial of `degree`.
    pub fn polynomial_depth(degree: usize, basis: PolyBasis) -> usize {
        let affine = match basis {
            PolyBasis::Chebyshev { a, b } => usize::from(!(a == -1.0 && b == 1.0)),
            PolyBasis::Power => 0,
        };
        match degree {
            0 => 0,
            1 => 1 + affine,
            d => {
                // Same recursion as `max_target`, on depths: power k sits ceil(log2 k) levels
                // below the input.
                let (_, baby) = split_sizes(d);
                let dep = |k: usize| (usize::BITS - (k - 1).leading_zeros()) as i64;
                fn rec(degree: usize, baby: usize, dep: &dyn Fn(usize) -> i64) -> i64 {
                    if degree < baby {
                        return (1..=degree).map(dep).max().unwrap_or(0) + 1;
                    }
                    let mut g = baby;
                    while g * 2 <= degree {
                        g *= 2;
                    }
                    (dep(g) + 1)
                        .max(rec(degree - g, baby, dep) + 1)
                        .max(rec(g - 1, baby, dep))
                }
                rec(d, baby, &dep) as usize + affine
            }
        }
    }

    /// Evaluates the polynomial with coefficients `coeffs` (lowest degree first) at every slot.
    /// The result has the input's scale and `level - polynomial_depth(degree)`.
    pub fn evaluate_polynomial(
        &self,
        ct: &Ciphertext<W>,
        coeffs: &[f64],
        basis: PolyBasis,
    ) -> Result<Ciphertext<W>> {
        evaluate_polynomial_with(self, ct, coeffs, basis)
    }
}

/// [`Evaluator::evaluate_polynomial`] on any [`PolyOps`]: with an evaluator it computes, with
/// a graph builder it records the same operations.
pub fn evaluate_polynomial_with<E: PolyOps>(
    e: &E,
    ct: &E::Ct,
    coeffs: &[f64],
    basis: PolyBasis,
) -> Result<E::Ct> {
    if coeffs.is_empty() {
        return Err(CkksError::InvalidInput(
            "a polynomial needs at least one coefficient".into(),
        ));
    }
    if let Some(c) = coeffs.iter().find(|c| !c.is_finite()) {
        return Err(CkksError::InvalidInput(format!(
            "polynomial coefficient {c} is not a finite number"
        )));
    }
    if e.size_of(ct) != 2 {
        return Err(CkksError::InvalidInput(
            "evaluate_polynomial takes a two-polynomial ciphertext; relinearize first".into(),
        ));
    }
    let coeffs = trim(coeffs);
    let degree = coeffs.len() - 1;
    let depth = Evaluator::<u64>::polynomial_depth(degree, basis);
    let level = e.level_of(ct);
    if depth > level {
        return Err(CkksError::OutOfLevels(format!(
            "a degree-{degree} polynomial needs {depth} levels but the ciphertext is at level {level}; use more levels or a lower degree"
        )));
    }
    let scale = e.scale_of(ct);
    if degree == 0 {
        let z = e.multiply_int(ct, 0)?;
        return e.add_const(&z, coeffs[0]);
    }
    // The variable: x itself, or the affine map to [-1, 1] for Chebyshev.
    let (x, cheb) = match basis {
        PolyBasis::Power => (ct.clone(), false),
        PolyBasis::Chebyshev { a, b } => {
            if !(a.is_finite() && b.is_finite() && b > a) {
                return Err(CkksError::InvalidInput(format!(
                    "Chebyshev interval [{a}, {b}] must be finite with a < b"
                )));
            }
            if a == -1.0 && b == 1.0 {
                (ct.clone(), true)
            } else {
                let m = e.multiply_const(ct, 2.0 / (b - a))?;
                let m = e.rescale(&m)?;
                let y = e.add_const(&m, -(a + b) / (b - a))?;
                // The rescale restores the scale up to the float rounding of s*q/q.
                (e.with_scale(y, scale)?, true)
            }
        }
    };
    if degree == 1 {
        let target = e.level_of(&x) - 1;
        return leaf(
            e,
            &Powers {
                cts: vec![None, Some(x)],
                cheb,
            },
            coeffs,
            target,
            scale,
        );
    }
    // Baby steps 1..=B, giant steps B, 2B, 4B, .. below the degree.
    let (_, baby) = split_sizes(degree);
    let mut powers = Powers {
        cts: vec![None; (degree.max(baby)) + 1],
        cheb,
    };
    powers.cts[1] = Some(x);
    for k in 2..=baby.min(degree.max(baby)) {
        compute_power(e, &mut powers, k)?;
    }
    let mut g = baby;
    while g * 2 <= degree {
        compute_power(e, &mut powers, g * 2)?;
        g *= 2;
    }
    let target = max_target(e, &powers, coeffs.len() - 1, baby)?;
    eval_rec(e, &powers, coeffs, baby, target, scale)
}

/// `x^k` or `T_k` from smaller powers: `k = a + b` with `a` the largest power of two below `k`
/// (depth `ceil(log2 k)`).
fn compute_power<E: PolyOps>(e: &E, p: &mut Powers<E::Ct>, k: usize) -> Result<()> {
    if p.cts[k].is_some() {
        return Ok(());
    }
    let a = if k.is_power_of_two() {
        k / 2
    } else {
        1 << (usize::BITS - 1 - k.leading_zeros())
    };
    let b = k - a;
    compute_power(e, p, a)?;
    compute_power(e, p, b)?;
    let (ta, tb) = (p.get(a)?, p.get(b)?);
    let prod = if a == b {
        e.square(ta)?
    } else {
        e.multiply(ta, tb)?
    };
    let mut prod = e.relinearize(&prod)?;
    if p.cheb {
        // T_{a+b} = 2 T_a T_b - T_{a-b}, the subtraction done before rescaling.
        prod = e.multiply_int(&prod, 2)?;
        let c = a - b;
        if c == 0 {
            prod = e.add_const(&prod, -1.0)?;
        } else {
            let tc = p.get(c)?;
            let tc = e.drop_to_level(tc, e.level_of(&prod))?;
            let k = (e.scale_of(&prod) / e.scale_of(&tc)).round();
            let tc = multiply_int_big(e, &tc, k)?;
            let tc = e.with_scale(tc, e.scale_of(&prod))?;
            prod = e.sub(&prod, &tc)?;
        }
    }
    p.cts[k] = Some(e.rescale(&prod)?);
    Ok(())
}

/// Multiplies by a large integer given as an f64 (exact for the integer it holds).
fn multiply_int_big<E: PolyOps>(e: &E, ct: &E::Ct, k: f64) -> Result<E::Ct> {
    let ki = scaled_int(k, 1.0)?;
    let out = e.multiply_const_exact(ct, ki)?;
    e.with_scale(out, e.scale_of(ct))
}

/// Highest target level the evaluation can land on (see module docs).
fn max_target<E: PolyOps>(e: &E, p: &Powers<E::Ct>, degree: usize, baby: usize) -> Result<usize> {
    fn rec<E: PolyOps>(e: &E, p: &Powers<E::Ct>, degree: usize, baby: usize) -> Result<i64> {
        if degree < baby {
            let mut t = i64::MAX;
            for k in 1..=degree {
                t = t.min(e.level_of(p.get(k)?) as i64 - 1);
            }
            return Ok(t);
        }
        let mut g = baby;
        while g * 2 <= degree {
            g *= 2;
        }
        let xg = e.level_of(p.get(g)?) as i64;
        let tq = rec(e, p, degree - g, baby)?;
        let tr = rec(e, p, g - 1, baby)?;
        Ok((xg - 1).min(tq - 1).min(tr))
    }
    let t = rec(e, p, degree, baby)?;
    if t < 0 {
        return Err(CkksError::OutOfLevels(format!(
            "not enough levels for a degree-{degree} polynomial from level {}",
            e.level_of(p.get(1)?)
        )));
    }
    Ok(t as usize)
}

fn eval_rec<E: PolyOps>(
    e: &E,
    p: &Powers<E::Ct>,
    coeffs: &[f64],
    baby: usize,
    target: usize,
    scale: f64,
) -> Result<E::Ct> {
    let degree = coeffs.len() - 1;
    if degree < baby {
        return leaf(e, p, coeffs, target, scale);
    }
    let mut g = baby;
    while g * 2 <= degree {
        g *= 2;
    }
    // p = q * X_g + r.
    let (qc, rc): (Vec<f64>, Vec<f64>) = if p.cheb {
        // T_k = 2 T_{k-g} T_g - T_{2g-k} for g <= k < 2g.
        let mut q = vec![0.0; degree - g + 1];
        let mut r = coeffs[..g].to_vec();
        q[0] = coeffs[g];
        for k in g + 1..=degree {
            q[k - g] = 2.0 * coeffs[k];
            r[2 * g - k] -= coeffs[k];
        }
        (q, r)
    } else {
        (coeffs[g..].to_vec(), coeffs[..g].to_vec())
    };
    let xg = p.get(g)?;
    let xg = e.drop_to_level(xg, target + 1)?;
    let q_next = e.moduli()[target + 1] as f64;
    let q_ct = eval_rec(
        e,
        p,
        trim(&qc),
        baby,
        target + 1,
        scale * q_next / e.scale_of(&xg),
    )?;
    let prod = e.multiply(&q_ct, &xg)?;
    let prod = e.relinearize(&prod)?;
    let prod = e.rescale(&prod)?;
    let prod = e.with_scale(prod, scale)?;
    let r_ct = eval_rec(e, p, trim(&rc), baby, target, scale)?;
    e.add(&prod, &r_ct)
}

/// `sum_k c_k P_k` for `k < baby`, landing exactly at (`target`, `scale`): each power is dropped
/// to `target + 1`, multiplied by `round(c_k * scale * q / s_k)` and the sum rescaled by
/// `q = q_{target+1}`.
fn leaf<E: PolyOps>(
    e: &E,
    p: &Powers<E::Ct>,
    coeffs: &[f64],
    target: usize,
    scale: f64,
) -> Result<E::Ct> {
    let q = e.moduli()[target + 1] as f64;
    let big = scale * q;
    let mut acc: Option<E::Ct> = None;
    for (k, &c) in coeffs.iter().enumerate().skip(1) {
        if c == 0.0 && !(acc.is_none() && k == coeffs.len() - 1) {
            continue;
        }
        let pk = e.drop_to_level(p.get(k)?, target + 1)?;
        let ki = scaled_int(c, big / e.scale_of(&pk))?;
        let t = e.multiply_const_exact(&pk, ki)?;
        let t = e.with_scale(t, big)?;
        acc = Some(match acc {
            None => t,
            Some(a) => e.add(&a, &t)?,
        });
    }
    let acc = match acc {
        Some(a) => a,
        None => {
            let p1 = e.drop_to_level(p.get(1)?, target + 1)?;
            let z = e.multiply_int(&p1, 0)?;
            e.with_scale(z, big)?
        }
    };
    let acc = e.add_const(&acc, coeffs[0])?;
    let out = e.rescale(&acc)?;
    e.with_scale(out, scale)
}
