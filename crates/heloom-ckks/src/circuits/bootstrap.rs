//! CKKS bootstrapping (Cheon, Han, Kim, Kim, Song, "Bootstrapping for approximate homomorphic
//! encryption", Eurocrypt 2018; CHKKS18 below): a ciphertext at level 0 comes back at a
//! higher level holding the same values.
//!
//! With `t(X) = c_0 + c_1 s` over the integers, decryption at level 0 is `m = t mod q_0`. The
//! steps, for full packing (`N/2` slots):
//!
//! 1. **ModRaise**: the level-0 polynomials, read as centred integers, are put in the whole
//!    chain. The ciphertext then decrypts to `t = m + q_0 I`, with `I` a small integer
//!    polynomial (`|I| <~ sqrt((h+1)/12)` per coefficient for a secret of Hamming weight `h`).
//!    Its scale is set to `q_0`, so its slots are `U_0 y` with `y = (t_lo + i t_hi) / q_0`,
//!    where `U_0[j][k] = zeta^(5^j k)` is the decoding matrix on the complex coefficient vector
//!    (CKKS17 Sec. 3.3; the encoder's slot convention).
//! 2. **CoeffToSlot**: `U_0^-1 = (2/N) U_0^H` (the canonical embedding of a real polynomial is
//!    inverted by its conjugate transpose), so one transform by `(1/N) U_0^H` gives `y / 2`, and
//!    a conjugation splits it: `Re y = a + conj(a)`, `Im y = i (conj(a) - a)`. The slots now
//!    hold the coefficients `t_k / q_0 = I_k + m_k / q_0` (CHKKS18 Sec. 4.1).
//! 3. **EvalMod**: `(1/2pi) sin(2 pi x)` is `x - I` up to `O((m/q_0)^3)`, so a Chebyshev
//!    approximation of it on `[-K, K]` (`K` bounding `|I|`) leaves `m_k / q_0` (CHKKS18 Sec.
//!    4.2; Chebyshev interpolation as in Chen, Chillotti, Song, Eurocrypt 2019). The scale is
//!    still `q_0`, so setting it to the input's scale `Delta` makes the slots `m_k / Delta`.
//! 4. **SlotToCoeff**: `w = re + i im` and one transform by `U_0` gives back the slots.
//!
//! Each transform uses one level (dense diagonals, baby-step giant-step with hoisted baby
//! rotations, [`LinearTransform`]); EvalMod uses the polynomial's depth. The EvalMod levels
//! want primes near `q_0` (the scale there is `q_0`), CoeffToSlot a large prime (its diagonals
//! are `zeta / N`), SlotToCoeff one near `Delta`.

use crate::ciphertext::Ciphertext;
use crate::circuits::lintrans::{baby_steps, LinearTransform};
use crate::circuits::polynomial::PolyBasis;
use crate::context::Context;
use crate::error::{CkksError, Result};
use crate::evaluator::Evaluator;
use heloom_math::{Form, Word};
use heloom_pool::Threads;
use num_complex::Complex64;
use std::f64::consts::PI;
use std::sync::Arc;

/// Settings of a [`Bootstrapper`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BootstrapConfig {
    /// Half-width `K` of the interval EvalMod approximates on: it must bound `|I|`, whose
    /// coefficients are sums of `h + 1` uniform terms (`h` the secret's Hamming weight).
    pub k: f64,
    /// Degree of the Chebyshev approximation of `sin(2 pi x) / (2 pi)` on `[-K, K]`.
    pub degree: usize,
}

impl BootstrapConfig {
    /// Settings for a secret of Hamming weight `h`: `K` at 6 standard deviations of `I`'s
    /// coefficients (at least 4), and a degree that resolves the sine's `2K` periods.
    pub fn for_hamming_weight(h: usize) -> Self {
        let sigma = ((h as f64 + 1.0) / 12.0).sqrt();
        let k = (6.0 * sigma).ceil().max(4.0);
        // About 2 pi K / 2 nodes per period pair plus a margin for the accuracy wanted.
        let degree = ((2.0 * PI * k * 1.3) as usize + 40).next_power_of_two() - 1;
        Self { k, degree }
    }
}

/// Bootstraps full-packing ciphertexts of one parameter set (see the module docs).
#[derive(Clone, Debug)]
pub struct Bootstrapper<W: Word> {
    ctx: Arc<Context<W>>,
    config: BootstrapConfig,
    /// CoeffToSlot: `(1/N) U_0^H`, at the top level.
    cts: LinearTransform<W>,
    /// SlotToCoeff: `U_0`, at the level EvalMod leaves.
    stc: LinearTransform<W>,
    /// EvalMod's Chebyshev coefficients on `[-K, K]`.
    coeffs: Vec<f64>,
}

/// The rows `5^j mod 2N` of `U_0`, once.
fn rows(n: usize) -> Vec<u64> {
    let two_n = 2 * n as u64;
    let mut g = 1u64;
    (0..n / 2)
        .map(|_| {
            let r = g;
            g = g * 5 % two_n;
            r
        })
        .collect()
}

/// Chebyshev interpolation coefficients of `f` on `[a, b]` at `degree + 1` Chebyshev nodes
/// (`sum_k c_k T_k(y)`, `y` the point mapped to `[-1, 1]`).
pub fn chebyshev_coefficients(f: impl Fn(f64) -> f64, a: f64, b: f64, degree: usize) -> Vec<f64> {
    let n = degree + 1;
    let fx: Vec<f64> = (0..n)
        .map(|j| {
            let y = (PI * (j as f64 + 0.5) / n as f64).cos();
            f(0.5 * (b - a) * y + 0.5 * (b + a))
        })
        .collect();
    (0..n)
        .map(|k| {
            let s: f64 = fx
                .iter()
                .enumerate()
                .map(|(j, v)| v * (PI * k as f64 * (j as f64 + 0.5) / n as f64).cos())
                .sum();
            let c = 2.0 * s / n as f64;
            if k == 0 {
                c / 2.0
            } else {
                c
            }
        })
        .collect()
}

impl<W: Word> Bootstrapper<W> {
    /// Precomputes the transforms and EvalMod's polynomial for `ctx` (encodings split over
    /// `threads`). The chain must have `2 + depth` levels above the output level, `depth` being
    /// EvalMod's ([`Evaluator::polynomial_depth`] of `config.degree`).
    pub fn new(ctx: &Arc<Context<W>>, config: BootstrapConfig, threads: Threads) -> Result<Self> {
        if !(config.k.is_finite() && config.k >= 1.0) || config.degree < 3 {
            return Err(CkksError::InvalidInput(format!(
                "bootstrapping needs K >= 1 and a degree >= 3; got K = {}, degree {}",
                config.k, config.degree
            )));
        }
        let top = ctx.max_level();
        let basis = PolyBasis::Chebyshev {
            a: -config.k,
            b: config.k,
        };
        let depth = Evaluator::<W>::polynomial_depth(config.degree, basis);
        if top < depth + 2 {
            return Err(CkksError::OutOfLevels {
                level: top,
                needed: depth + 2,
                hint: format!(
                    "bootstrapping uses {} levels here (CoeffToSlot 1, EvalMod {depth}, SlotToCoeff 1) and the chain has {top}; use a bootstrappable parameter set with more levels",
                    depth + 2
                ),
            });
        }
        let n = ctx.n();
        let slots = n / 2;
        let g = rows(n);
        let entry = |j: usize, k: usize| -> Complex64 {
            let e = g[j] * k as u64 % (2 * n as u64);
            Complex64::from_polar(1.0, PI * e as f64 / n as f64)
        };
        let baby = baby_steps(slots);
        // diag_i[t] = M[t][(t + i) mod L]; CoeffToSlot's M[t][k] = conj(U_0[k][t]) / N.
        let inv_n = 1.0 / n as f64;
        let cts = LinearTransform::new_complex(
            ctx,
            slots,
            slots,
            baby,
            top,
            |i| {
                (0..slots)
                    .map(|t| entry((t + i) % slots, t).conj() * inv_n)
                    .collect()
            },
            threads,
        )?;
        let stc = LinearTransform::new_complex(
            ctx,
            slots,
            slots,
            baby,
            top - 1 - depth,
            |i| (0..slots).map(|t| entry(t, (t + i) % slots)).collect(),
            threads,
        )?;
        let coeffs = chebyshev_coefficients(
            |x| (2.0 * PI * x).sin() / (2.0 * PI),
            -config.k,
            config.k,
            config.degree,
        );
        Ok(Self {
            ctx: Arc::clone(ctx),
            config,
            cts,
            stc,
            coeffs,
        })
    }

    /// The settings.
    pub fn config(&self) -> BootstrapConfig {
        self.config
    }

    /// The level a bootstrapped ciphertext comes out at.
    pub fn output_level(&self) -> usize {
        self.stc.level() - 1
    }

    /// The rotation steps whose Galois keys bootstrapping needs (conjugation too: generate the
    /// key set with `conjugate = true`).
    pub fn rotation_steps(&self) -> Vec<i64> {
        let mut s = self.cts.used_steps();
        s.extend(self.stc.used_steps());
        s.sort_unstable();
        s.dedup();
        s
    }

    /// ModRaise: `ct` (dropped to level 0) with its polynomials lifted, as centred integers,
    /// to the whole chain, and its scale set to `q_0`. It decrypts to `m + q_0 I`.
    pub fn mod_raise(&self, ev: &Evaluator<W>, ct: &Ciphertext<W>) -> Result<Ciphertext<W>> {
        let low = ev.drop_to_level(ct, 0)?;
        if low.size() != 2 {
            return Err(CkksError::InvalidInput(format!(
                "bootstrapping takes a ciphertext of 2 polynomials; this one has {} (relinearize it first)",
                low.size()
            )));
        }
        let b0 = self.ctx.q_basis(0)?;
        let top = self.ctx.max_level();
        let bl = self.ctx.q_basis(top)?;
        let q0 = self.ctx.params().moduli()[0];
        let half = q0 / 2;
        let mut polys = Vec::with_capacity(2);
        for p in low.polys() {
            let mut c = p.clone();
            if c.form() == Form::Ntt {
                b0.inverse(&mut c)?;
            }
            let signed: Vec<i64> = c
                .limb(0)
                .iter()
                .map(|w| {
                    let v = w.to_u64();
                    if v > half {
                        -((q0 - v) as i64)
                    } else {
                        v as i64
                    }
                })
                .collect();
            let mut lifted = bl.poly_from_signed(&signed)?;
            bl.forward(&mut lifted)?;
            polys.push(lifted);
        }
        self.ctx
            .ciphertext_from_polys(polys, top, q0 as f64, low.slots())
    }

    /// EvalMod: `(1/2pi) sin(2 pi x)` in every slot, for slots in `[-K, K]`.
    pub fn eval_mod(&self, ev: &Evaluator<W>, ct: &Ciphertext<W>) -> Result<Ciphertext<W>> {
        ev.evaluate_polynomial(
            ct,
            &self.coeffs,
            PolyBasis::Chebyshev {
                a: -self.config.k,
                b: self.config.k,
            },
        )
    }

    /// CoeffToSlot on a raised ciphertext: `(Re y, Im y)`, the coefficients of `t / q_0`.
    pub fn coeffs_to_slots(
        &self,
        ev: &Evaluator<W>,
        raised: &Ciphertext<W>,
    ) -> Result<(Ciphertext<W>, Ciphertext<W>)> {
        let a = self.cts.apply_rescaled(ev, raised)?;
        let ac = ev.conjugate(&a)?;
        let re = ev.add(&a, &ac)?;
        let im = ev.multiply_by_i(&ev.sub(&ac, &a)?)?;
        Ok((re, im))
    }

    /// SlotToCoeff: the slots of `U_0 (re + i im)`.
    pub fn slots_to_coeffs(
        &self,
        ev: &Evaluator<W>,
        re: &Ciphertext<W>,
        im: &Ciphertext<W>,
    ) -> Result<Ciphertext<W>> {
        let w = ev.add(re, &ev.multiply_by_i(im)?)?;
        self.stc.apply_rescaled(ev, &w)
    }

    /// Bootstraps `ct` (full packing, `N/2` slots, 2 polynomials, any level): the same values
    /// at [`Self::output_level`], with `ct`'s scale. `ev` needs the relinearization key, the
    /// conjugation key and the Galois keys of [`Self::rotation_steps`].
    pub fn bootstrap(&self, ev: &Evaluator<W>, ct: &Ciphertext<W>) -> Result<Ciphertext<W>> {
        let slots = self.ctx.n() / 2;
        if ct.slots() != slots {
            return Err(CkksError::InvalidInput(format!(
                "this bootstrapping handles full packing ({slots} slots); the ciphertext holds {} (sparse packing is not supported yet: encrypt {slots} values, padding with zeros)",
                ct.slots()
            )));
        }
        let scale = ct.scale();
        let raised = self.mod_raise(ev, ct)?;
        let (re, im) = self.coeffs_to_slots(ev, &raised)?;
        let mut re = self.eval_mod(ev, &re)?;
        let mut im = self.eval_mod(ev, &im)?;
        // The slots hold m_k / q_0 at scale q_0: at scale Delta they are m_k / Delta.
        re.set_scale(scale);
        im.set_scale(scale);
        self.slots_to_coeffs(ev, &re, &im)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The decoding matrix entry `U_0[j][k] = zeta^(5^j k mod 2N)`, `zeta = exp(i pi / N)`.
    fn u0(n: usize, j: usize, k: usize) -> Complex64 {
        let two_n = 2 * n as u64;
        let mut g = 1u64;
        for _ in 0..j {
            g = g * 5 % two_n;
        }
        let e = g * k as u64 % two_n;
        Complex64::from_polar(1.0, PI * e as f64 / n as f64)
    }

    #[test]
    fn chebyshev_interpolation_reproduces_a_polynomial() {
        // 1 + 2x + 3x^2 on [-2, 2] at degree 2 is exact: T-basis evaluation matches.
        let f = |x: f64| 1.0 + 2.0 * x + 3.0 * x * x;
        let c = chebyshev_coefficients(f, -2.0, 2.0, 2);
        for &x in &[-2.0, -0.7, 0.0, 1.3, 2.0] {
            let y: f64 = x / 2.0;
            let v = c[0] + c[1] * y + c[2] * (2.0 * y * y - 1.0);
            assert!((v - f(x)).abs() < 1e-12, "{x}: {v} vs {}", f(x));
        }
    }

    #[test]
    fn the_decoding_matrix_is_unitary_up_to_n_over_2() {
        let n = 32;
        for a in 0..n / 2 {
            for b in 0..n / 2 {
                let s: Complex64 = (0..n / 2).map(|j| u0(n, j, a).conj() * u0(n, j, b)).sum();
                let want = if a == b { n as f64 / 2.0 } else { 0.0 };
                assert!(
                    (s - Complex64::new(want, 0.0)).norm() < 1e-9,
                    "{a},{b}: {s}"
                );
            }
        }
    }
}
