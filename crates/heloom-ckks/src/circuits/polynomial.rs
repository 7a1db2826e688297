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
use crate::polyops::PolyOps;
use heloom_math::Word;

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
        evaluate_polynomial_on(self, ct, coeffs, basis)
    }
}

/// [`Evaluator::evaluate_polynomial`] on any [`PolyOps`]: with an evaluator it computes, with
/// a graph builder it records the same operations. A backend that bootstraps
/// ([`PolyOps::bootstrap_level`]) bootstraps the input first when it holds fewer levels than
/// the polynomial's depth.
pub fn evaluate_polynomial_on<E: PolyOps>(
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
    // Automatic bootstrapping: a backend that bootstraps refreshes an input with too few levels
    // for the polynomial (when a refreshed one has enough).
    let refreshed;
    let ct = if depth > e.level_of(ct) && e.bootstrap_level().is_some_and(|l| l >= depth) {
        refreshed = e.bootstrap(ct)?;
        &refreshed
    } else {
        ct
    };
    let level = e.level_of(ct);
    if depth > level {
        return Err(CkksError::OutOfLevels {
            level,
            needed: depth,
            hint: format!(
                "a degree-{degree} polynomial needs {depth} levels but the ciphertext is at level {level}; use more levels or a lower degree"
            ),
        });
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
    let mut prod = if a == b {
        e.square(ta)?
    } else {
        e.multiply(ta, tb)?
    };
    // With a merged relinearize-and-rescale the linear steps below run on the unrelinearized
    // product (relinearization is linear); otherwise between the two, as task graphs record.
    let merged = e.merges_rescale();
    if !merged {
        prod = e.relinearize(&prod)?;
    }
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
    p.cts[k] = Some(if merged {
        e.relinearize_rescale(&prod)?
    } else {
        e.rescale(&prod)?
    });
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
        let level = e.level_of(p.get(1)?);
        return Err(CkksError::OutOfLevels {
            level,
            needed: level + t.unsigned_abs() as usize,
            hint: format!("not enough levels for a degree-{degree} polynomial from level {level}"),
        });
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
    let prod = e.relinearize_rescale(&prod)?;
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
        let pk = p.get(k)?;
        let ki = scaled_int(c, big / e.scale_of(pk))?;
        e.multiply_int_accumulate(&mut acc, pk, target + 1, ki, big)?;
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
