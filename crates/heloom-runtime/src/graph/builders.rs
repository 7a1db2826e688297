//! Graphs built in: any polynomial of the CKKS evaluator, and the e^x Maclaurin job of seed
//! 000's Fig. 3 in its three variants.

use super::*;

/// Any polynomial of the CKKS evaluator as a task graph: `coeffs` (lowest degree first) in
/// `basis`, on one input ciphertext at `level` with `scale`. Running the graph gives exactly
/// what `Evaluator::evaluate_polynomial` gives.
pub fn polynomial_graph(
    name: &str,
    moduli: &[u64],
    level: usize,
    scale: f64,
    coeffs: &[f64],
    basis: PolyBasis,
) -> Result<TaskGraph> {
    let b = GraphBuilder::new(name, moduli);
    let x = b.input(level, scale)?;
    let y = evaluate_polynomial_on(&b, &x, coeffs, basis)?;
    b.finish(&[y])
}

/// The three built-in shapes of the e^x job.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ExpVariant {
    /// Seed 000's Fig. 3: x^2 .. x^6 by repeated multiplication (5 ciphertext products),
    /// each power scaled by 1/k! in its own multiply-plain task, then a tree of additions.
    Paper,
    /// The evaluator's baby-step giant-step (4 products, depth 3: the shortest path).
    Bsgs,
    /// `(1 + x + x^2/2) + x^3 (1/6 + x/24 + x^2/120 + x^3/720)`: 3 products, the least work.
    Horner,
}

impl ExpVariant {
    /// All variants.
    pub const ALL: [ExpVariant; 3] = [ExpVariant::Paper, ExpVariant::Bsgs, ExpVariant::Horner];

    /// Name.
    pub fn name(self) -> &'static str {
        match self {
            ExpVariant::Paper => "paper-fig3",
            ExpVariant::Bsgs => "bsgs",
            ExpVariant::Horner => "horner",
        }
    }

    /// Levels the variant consumes.
    pub fn depth(self) -> usize {
        match self {
            ExpVariant::Paper | ExpVariant::Horner => 4,
            ExpVariant::Bsgs => 3,
        }
    }
}

/// Maclaurin coefficients 1/k! of e^x up to `degree`.
pub fn exp_coefficients(degree: usize) -> Vec<f64> {
    let mut c = Vec::with_capacity(degree + 1);
    let mut f = 1.0;
    for k in 0..=degree {
        if k > 0 {
            f *= k as f64;
        }
        c.push(1.0 / f);
    }
    c
}

/// The degree-6 e^x job on one input at `level` with `scale`, in `variant`'s shape. The result
/// has the input's scale, `variant.depth()` levels lower.
pub fn exp_graph(
    variant: ExpVariant,
    moduli: &[u64],
    level: usize,
    scale: f64,
) -> Result<TaskGraph> {
    let c = exp_coefficients(6);
    if level < variant.depth() {
        let hint = format!(
            "the e^x job ({}) needs {} levels; the input is at level {level}",
            variant.name(),
            variant.depth()
        );
        return Err(GraphError::Ckks(out_of_levels(
            level,
            variant.depth(),
            hint,
        )));
    }
    if variant == ExpVariant::Bsgs {
        return polynomial_graph(variant.name(), moduli, level, scale, &c, PolyBasis::Power);
    }
    let b = GraphBuilder::new(variant.name(), moduli);
    let x = b.input(level, scale)?;
    let x2 = b.mul_relin_rescale(&x, &x)?;
    let x3 = b.mul_relin_rescale(&x2, &x)?;
    let out = match variant {
        ExpVariant::Paper => {
            let x4 = b.mul_relin_rescale(&x2, &x2)?;
            let x5 = b.mul_relin_rescale(&x4, &x)?;
            let x6 = b.mul_relin_rescale(&x3, &x3)?;
            for p in [&x2, &x3, &x4, &x5, &x6] {
                b.end_task(p);
            }
            let target = level - 4;
            let powers = [x, x2, x3, x4, x5, x6];
            // Each term x^k / k! lands at (target, scale) in its own task.
            let mut terms = Vec::with_capacity(6);
            for (k, p) in powers.iter().enumerate() {
                let mut cs = vec![0.0; k + 2];
                cs[k + 1] = c[k + 1];
                let mut ps = vec![None; k + 2];
                ps[k + 1] = Some(*p);
                terms.push(term(&b, &ps, &cs, target, scale)?);
            }
            let s12 = b.add(&terms[0], &terms[1])?;
            let s34 = b.add(&terms[2], &terms[3])?;
            let s56 = b.add(&terms[4], &terms[5])?;
            let s14 = b.add(&s12, &s34)?;
            let s = b.add(&s14, &s56)?;
            b.add_const(&s, c[0])?
        }
        ExpVariant::Horner | ExpVariant::Bsgs => {
            // q(x) = c3 + c4 x + c5 x^2 + c6 x^3 at level - 3, with the scale that makes
            // q * x^3 land on `scale` after its rescale; r(x) = c0 + c1 x + c2 x^2.
            let target = level - 4;
            let x3d = b.drop_to_level(&x3, target + 1)?;
            let q_next = b.moduli()[target + 1] as f64;
            let q_scale = scale * q_next / x3d.scale;
            let ps = [None, Some(x), Some(x2), Some(x3)];
            let q = b.linear_combination(&ps, &[c[3], c[4], c[5], c[6]], target + 1, q_scale)?;
            let prod = b.multiply(&q, &x3d)?;
            let prod = b.relinearize(&prod)?;
            let prod = b.rescale(&prod)?;
            let prod = b.with_scale(prod, scale)?;
            let r = b.linear_combination(&ps[..3], &[c[0], c[1], c[2]], target, scale)?;
            b.add(&prod, &r)?
        }
    };
    b.finish(&[out])
}

/// `c_k x^k` alone at (`level`, `scale`): multiply-plain and rescale in one task (the constant
/// `coeffs[0]` is zero here).
fn term(
    b: &GraphBuilder,
    powers: &[Option<Value>],
    coeffs: &[f64],
    level: usize,
    scale: f64,
) -> heloom_ckks::Result<Value> {
    let k = coeffs.len() - 1;
    let Some(Some(p)) = powers.get(k) else {
        return invalid("missing power");
    };
    let q = b.moduli()[level + 1] as f64;
    let pk = b.drop_to_level(p, level + 1)?;
    let ki = (coeffs[k] * scale * q / pk.scale).round();
    let t = b.multiply_const_exact(&pk, ki as i128)?;
    let t = b.with_scale(t, scale * q)?;
    let r = b.rescale(&t)?;
    b.with_scale(r, scale)
}
