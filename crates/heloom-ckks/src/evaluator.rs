//! Homomorphic operations on ciphertexts.
//!
//! Levels and scales: operands at different levels are brought to the lower one (dropping
//! primes is exact). Operands whose scales differ are aligned when that can be done without
//! losing precision: the one at the higher level is multiplied by the integer
//! `round(target * q / scale)` and rescaled by `q`, which lands on the other's level with a
//! scale equal up to `2^-(log q + 1)` relative (below CKKS noise). Otherwise a
//! [`CkksError::ScaleMismatch`] says what to do.

use crate::ciphertext::{Ciphertext, Plaintext};
use crate::context::Context;
use crate::error::{CkksError, Result};
use crate::keys::{EvaluationKeys, SwitchingKey};
use crate::keyswitch::Finish;
use heloom_math::automorphism::{
    galois_element_conjugate, galois_element_for_step, NttPermutation,
};
use heloom_math::{Form, Modulus, RnsBasis, RnsPoly, Word};
use heloom_pool::Threads;
use num_complex::Complex64;
use std::sync::Arc;

/// Reduces a signed 128-bit integer modulo `m`.
pub(crate) fn reduce_i128<W: Word>(m: &Modulus<W>, v: i128) -> u64 {
    v.rem_euclid(m.value() as i128) as u64
}

/// Adds the constant `c` (the same residue at every NTT point) to every limb.
fn add_const_limbs<W: Word>(
    basis: &RnsBasis<W>,
    p: &mut RnsPoly<W>,
    c: i128,
    threads: Threads,
) -> Result<()> {
    for_each_limb(threads, std::slice::from_mut(p), |_, i, limb| {
        let m = &basis.moduli()[i];
        let r = W::from_u64(reduce_i128(m, c));
        for x in limb {
            *x = m.add(*x, r);
        }
        Ok(())
    })
}

/// Calls `f(p, i, limb)` for limb `i` of every polynomial `p` of `polys` (all with the same
/// limb count), split over the (polynomial, limb) pairs with the budget.
fn for_each_limb<W, F>(threads: Threads, polys: &mut [RnsPoly<W>], f: F) -> Result<()>
where
    W: Word,
    F: Fn(usize, usize, &mut [W]) -> Result<()> + Sync,
{
    let Some(first) = polys.first() else {
        return Ok(());
    };
    let (n, limbs) = (first.n(), first.num_limbs());
    if polys.iter().any(|p| p.num_limbs() != limbs) {
        return Err(CkksError::ParameterMismatch(
            "polynomials of one ciphertext have different limb counts (corrupted?)".into(),
        ));
    }
    if threads.chunks_for(polys.len() * limbs) <= 1 {
        for (p, poly) in polys.iter_mut().enumerate() {
            for (i, limb) in poly.limbs_mut().enumerate() {
                f(p, i, limb)?;
            }
        }
        return Ok(());
    }
    let mut items: Vec<&mut [W]> = polys
        .iter_mut()
        .flat_map(|p| p.as_mut_slice().chunks_exact_mut(n))
        .collect();
    threads.try_for_each_mut(&mut items, |k, limb| f(k / limbs, k % limbs, limb))
}

/// `values` zero-padded to `slots` entries (a shorter vector would otherwise be encoded with
/// fewer slots, i.e. repeated across the ciphertext's slots).
fn pad<T: Copy + Default>(values: &[T], slots: usize) -> std::borrow::Cow<'_, [T]> {
    if values.len() >= slots {
        std::borrow::Cow::Borrowed(values)
    } else {
        let mut v = values.to_vec();
        v.resize(slots, T::default());
        std::borrow::Cow::Owned(v)
    }
}

/// Evaluates operations with (optionally) a set of evaluation keys.
#[derive(Debug, Clone)]
pub struct Evaluator<W: Word> {
    ctx: Arc<Context<W>>,
    keys: Option<Arc<EvaluationKeys<W>>>,
    threads: Threads,
    /// Galois keys permuted by the inverse automorphism, for hoisted rotations (built on first
    /// use, shared by the evaluator's clones).
    hoisted: Arc<HoistedKeys<W>>,
}

/// `sigma_g^-1(k)` for the Galois keys a hoisted rotation used: `sum_j sigma_g(d_j) k_j =
/// sigma_g(sum_j d_j sigma_g^-1(k_j))` exactly (NTT-form products are pointwise), so a hoisted
/// step permutes its two sums instead of every limb of every digit (Halevi-Shoup 2018, sec. 5
/// permute the key once instead of the digits per step).
type HoistedKeys<W> = std::sync::RwLock<std::collections::HashMap<u64, Arc<SwitchingKey<W>>>>;

impl<W: Word> Evaluator<W> {
    /// An evaluator with relinearization/Galois keys.
    pub fn new(ctx: &Arc<Context<W>>, keys: Arc<EvaluationKeys<W>>) -> Result<Self> {
        ctx.check_fingerprint(keys.fingerprint, "evaluation key set")?;
        Ok(Self {
            ctx: Arc::clone(ctx),
            keys: Some(keys),
            threads: Threads::single(),
            hoisted: Arc::default(),
        })
    }

    /// An evaluator without keys: everything but relinearization and rotations.
    pub fn without_keys(ctx: &Arc<Context<W>>) -> Self {
        Self {
            ctx: Arc::clone(ctx),
            keys: None,
            threads: Threads::single(),
            hoisted: Arc::default(),
        }
    }

    /// The same evaluator with a thread budget: every heavy operation it runs is split over at
    /// most `threads` threads of the shared pool ([`heloom_pool`]). Results are bit-identical
    /// whatever the budget. Cheap: the context and keys are shared.
    pub fn with_threads(&self, threads: Threads) -> Self {
        Self {
            ctx: Arc::clone(&self.ctx),
            keys: self.keys.clone(),
            threads,
            hoisted: Arc::clone(&self.hoisted),
        }
    }

    /// This evaluator's thread budget (one thread unless set with [`Self::with_threads`]).
    pub fn threads(&self) -> Threads {
        self.threads
    }

    /// The context.
    pub fn context(&self) -> &Arc<Context<W>> {
        &self.ctx
    }

    /// The evaluation keys (public material: relinearization and Galois keys), if any; an
    /// accelerator uploads these to compute beside this evaluator.
    pub fn evaluation_keys(&self) -> Option<&Arc<EvaluationKeys<W>>> {
        self.keys.as_ref()
    }

    fn keys(&self) -> Result<&EvaluationKeys<W>> {
        self.keys.as_deref().ok_or_else(|| {
            CkksError::MissingKey(
                "this evaluator has no evaluation keys; build it with the key set's evaluation_keys"
                    .into(),
            )
        })
    }

    fn check(&self, ct: &Ciphertext<W>) -> Result<()> {
        self.ctx.check_fingerprint(ct.fingerprint, "ciphertext")?;
        let basis = self.ctx.q_basis(ct.level)?;
        if ct.polys.len() < 2 {
            return Err(CkksError::ParameterMismatch(
                "a ciphertext needs at least two polynomials (corrupted?)".into(),
            ));
        }
        for p in &ct.polys {
            if !basis.owns(p) || p.form() != Form::Ntt {
                return Err(CkksError::ParameterMismatch(format!(
                    "ciphertext polynomials do not match its level {} (corrupted ciphertext?)",
                    ct.level
                )));
            }
        }
        Ok(())
    }

    /// Relative tolerance under which two scales count as equal: half an ulp of the smallest
    /// prime, far below the noise of any CKKS ciphertext.
    pub fn scale_tolerance(&self) -> f64 {
        crate::polyops::scale_tolerance(self.ctx.params().moduli())
    }

    /// Whether two scales are equal within [`Self::scale_tolerance`].
    pub fn scales_match(&self, a: f64, b: f64) -> bool {
        crate::polyops::scales_match(self.ctx.params().moduli(), a, b)
    }

    // ----- levels -----

    /// Drops `ct` to `level` (exact: the dropped primes are discarded).
    pub fn drop_to_level(&self, ct: &Ciphertext<W>, level: usize) -> Result<Ciphertext<W>> {
        self.check(ct)?;
        if level > ct.level {
            return Err(CkksError::OutOfLevels(format!(
                "cannot raise a ciphertext from level {} to {level}; levels only go down",
                ct.level
            )));
        }
        let basis = self.ctx.q_basis(level)?;
        let polys = ct
            .polys
            .iter()
            .map(|p| basis.truncate(p.clone()))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        Ok(Ciphertext {
            polys,
            level,
            scale: ct.scale,
            slots: ct.slots,
            fingerprint: ct.fingerprint,
            seed: if level == ct.level { ct.seed } else { None },
        })
    }

    /// Drops one level.
    pub fn drop_level(&self, ct: &Ciphertext<W>) -> Result<Ciphertext<W>> {
        if ct.level == 0 {
            return Err(CkksError::OutOfLevels(
                "ciphertext is already at level 0".into(),
            ));
        }
        self.drop_to_level(ct, ct.level - 1)
    }

    /// Rescales: divides by the last prime `q_l` with rounding and drops it; the scale is
    /// divided by `q_l` ([`heloom_math::Rescaler`]).
    pub fn rescale(&self, ct: &Ciphertext<W>) -> Result<Ciphertext<W>> {
        self.check(ct)?;
        let l = ct.level;
        let rescaler = self.ctx.rescaler(l)?;
        let ql = rescaler.from_basis().moduli()[l];
        let out = rescaler.divide_round(&ct.polys, self.threads)?;
        Ok(Ciphertext {
            polys: out,
            level: l - 1,
            scale: ct.scale / ql.value() as f64,
            slots: ct.slots,
            fingerprint: ct.fingerprint,
            seed: None,
        })
    }

    /// Brings two ciphertexts to one level and one scale (see the module docs and
    /// [`crate::polyops::align_with`]).
    pub fn align(
        &self,
        a: &Ciphertext<W>,
        b: &Ciphertext<W>,
    ) -> Result<(Ciphertext<W>, Ciphertext<W>)> {
        self.check(a)?;
        self.check(b)?;
        crate::polyops::align_with(self, a, b)
    }

    /// Moves `ct` to `level` (below its own) with scale `target`, by multiplying by an integer
    /// constant one level above `level` and rescaling (see
    /// [`crate::polyops::set_scale_by_rescale_with`]).
    pub fn set_scale_by_rescale(
        &self,
        ct: &Ciphertext<W>,
        level: usize,
        target: f64,
    ) -> Result<Ciphertext<W>> {
        crate::polyops::set_scale_by_rescale_with(self, ct, level, target)
    }

    // ----- additive -----

    /// `ct` at `level`: borrowed when already there, else dropped (a copy).
    fn at_level<'a>(
        &self,
        ct: &'a Ciphertext<W>,
        level: usize,
    ) -> Result<std::borrow::Cow<'a, Ciphertext<W>>> {
        if ct.level == level {
            self.check(ct)?;
            Ok(std::borrow::Cow::Borrowed(ct))
        } else {
            Ok(std::borrow::Cow::Owned(self.drop_to_level(ct, level)?))
        }
    }

    fn combine(&self, a: &Ciphertext<W>, b: &Ciphertext<W>, sub: bool) -> Result<Ciphertext<W>> {
        // Fast path: same level and scale, nothing to align (no copies beyond the result).
        let aligned;
        let (a, b) = if a.level == b.level && self.scales_match(a.scale, b.scale) {
            self.check(a)?;
            self.check(b)?;
            (a, b)
        } else {
            aligned = self.align(a, b)?;
            (&aligned.0, &aligned.1)
        };
        let basis = self.ctx.q_basis(a.level)?;
        let mut polys = a.polys.clone();
        let common = polys.len().min(b.polys.len());
        let (elt, mods) = (basis.eltwise(), basis.moduli());
        for_each_limb(self.threads, &mut polys[..common], |p, i, x| {
            let y = b.polys[p].limb(i);
            if sub {
                elt.sub_assign(&mods[i], x, y)?;
            } else {
                elt.add_assign(&mods[i], x, y)?;
            }
            Ok(())
        })?;
        for y in &b.polys[common..] {
            let mut y = y.clone();
            if sub {
                basis.neg_assign_with(&mut y, self.threads)?;
            }
            polys.push(y);
        }
        Ok(Ciphertext {
            polys,
            level: a.level,
            scale: a.scale,
            slots: a.slots.max(b.slots),
            fingerprint: a.fingerprint,
            seed: None,
        })
    }

    /// `a + b`.
    pub fn add(&self, a: &Ciphertext<W>, b: &Ciphertext<W>) -> Result<Ciphertext<W>> {
        self.combine(a, b, false)
    }

    /// `a - b`.
    pub fn sub(&self, a: &Ciphertext<W>, b: &Ciphertext<W>) -> Result<Ciphertext<W>> {
        self.combine(a, b, true)
    }

    /// `-a`.
    pub fn negate(&self, a: &Ciphertext<W>) -> Result<Ciphertext<W>> {
        self.check(a)?;
        let basis = self.ctx.q_basis(a.level)?;
        let mut c = a.clone();
        for_each_limb(self.threads, &mut c.polys, |_, i, x| {
            Ok(basis.eltwise().neg_assign(&basis.moduli()[i], x)?)
        })?;
        c.seed = None;
        Ok(c)
    }

    fn plain_at(&self, pt: &Plaintext<W>, level: usize) -> Result<RnsPoly<W>> {
        self.ctx.check_fingerprint(pt.fingerprint, "plaintext")?;
        if pt.level < level {
            return Err(CkksError::OutOfLevels(format!(
                "plaintext at level {} is below the ciphertext's level {level}",
                pt.level
            )));
        }
        Ok(self.ctx.q_basis(level)?.truncate(pt.poly.clone())?)
    }

    /// `ct + pt` (scales must match; the plaintext is dropped to the ciphertext's level).
    pub fn add_plain(&self, ct: &Ciphertext<W>, pt: &Plaintext<W>) -> Result<Ciphertext<W>> {
        self.add_sub_plain(ct, pt, false)
    }

    /// `ct - pt`.
    pub fn sub_plain(&self, ct: &Ciphertext<W>, pt: &Plaintext<W>) -> Result<Ciphertext<W>> {
        self.add_sub_plain(ct, pt, true)
    }

    fn add_sub_plain(
        &self,
        ct: &Ciphertext<W>,
        pt: &Plaintext<W>,
        sub: bool,
    ) -> Result<Ciphertext<W>> {
        self.check(ct)?;
        if !self.scales_match(ct.scale, pt.scale) {
            return Err(CkksError::ScaleMismatch(format!(
                "ciphertext scale 2^{:.4} differs from plaintext scale 2^{:.4}; encode the plaintext at the ciphertext's scale",
                ct.scale.log2(),
                pt.scale.log2()
            )));
        }
        let level = ct.level.min(pt.level);
        let mut c = self.drop_to_level(ct, level)?;
        let p = self.plain_at(pt, level)?;
        let basis = self.ctx.q_basis(level)?;
        if sub {
            basis.sub_assign_with(&mut c.polys[0], &p, self.threads)?;
        } else {
            basis.add_assign_with(&mut c.polys[0], &p, self.threads)?;
        }
        c.slots = c.slots.max(pt.slots);
        c.seed = None;
        Ok(c)
    }

    /// `ct + values` (encoded at the ciphertext's level and scale; fewer values than the
    /// ciphertext's slots are zero-padded).
    pub fn add_values(&self, ct: &Ciphertext<W>, values: &[f64]) -> Result<Ciphertext<W>> {
        self.check(ct)?;
        let pt = self
            .ctx
            .encode_at(&pad(values, ct.slots), ct.level, ct.scale)?;
        self.add_plain(ct, &pt)
    }

    /// `ct - values`.
    pub fn sub_values(&self, ct: &Ciphertext<W>, values: &[f64]) -> Result<Ciphertext<W>> {
        self.check(ct)?;
        let pt = self
            .ctx
            .encode_at(&pad(values, ct.slots), ct.level, ct.scale)?;
        self.sub_plain(ct, &pt)
    }

    /// `ct + c` in every slot (complex constants allowed).
    pub fn add_const_complex(&self, ct: &Ciphertext<W>, c: Complex64) -> Result<Ciphertext<W>> {
        self.check(ct)?;
        let basis = self.ctx.q_basis(ct.level)?;
        let mut out = ct.clone();
        out.seed = None;
        if c.im == 0.0 {
            let v = scaled_int(c.re, ct.scale)?;
            add_const_limbs(basis, &mut out.polys[0], v, self.threads)?;
        } else {
            let mut p = self.ctx.encoder().encode_constant(c, ct.scale, basis)?;
            basis.forward_with(&mut p, self.threads)?;
            basis.add_assign_with(&mut out.polys[0], &p, self.threads)?;
        }
        Ok(out)
    }

    /// `ct + c` in every slot.
    pub fn add_const(&self, ct: &Ciphertext<W>, c: f64) -> Result<Ciphertext<W>> {
        self.add_const_complex(ct, Complex64::new(c, 0.0))
    }

    /// `ct += c` in every slot, in place (no new ciphertext: layers of hundreds of
    /// ciphertexts add their biases without allocating).
    pub fn add_const_assign(&self, ct: &mut Ciphertext<W>, c: f64) -> Result<()> {
        self.check(ct)?;
        let basis = self.ctx.q_basis(ct.level)?;
        let v = scaled_int(c, ct.scale)?;
        ct.seed = None;
        add_const_limbs(basis, &mut ct.polys[0], v, self.threads)?;
        Ok(())
    }

    // ----- multiplicative -----

    /// `ct * k` for an integer `k`: exact, no level used, scale unchanged.
    pub fn multiply_int(&self, ct: &Ciphertext<W>, k: i64) -> Result<Ciphertext<W>> {
        self.check(ct)?;
        self.multiply_int_raw(ct, k as i128)
    }

    /// `ct * k` for any integer `k` (reduced modulo each prime); the scale is left to the
    /// caller.
    pub(crate) fn multiply_const_exact(
        &self,
        ct: &Ciphertext<W>,
        k: i128,
    ) -> Result<Ciphertext<W>> {
        self.check(ct)?;
        self.multiply_int_raw(ct, k)
    }

    fn multiply_int_raw(&self, ct: &Ciphertext<W>, k: i128) -> Result<Ciphertext<W>> {
        let basis = self.ctx.q_basis(ct.level)?;
        let mut out = ct.clone();
        out.seed = None;
        for_each_limb(self.threads, &mut out.polys, |_, i, x| {
            let m = &basis.moduli()[i];
            Ok(basis.eltwise().mul_scalar_assign(m, x, reduce_i128(m, k))?)
        })?;
        Ok(out)
    }

    /// `ct * c` for a real constant, encoded at scale `q_l` (the prime the next rescale
    /// removes), so that `rescale` afterwards restores the ciphertext's scale exactly.
    pub fn multiply_const(&self, ct: &Ciphertext<W>, c: f64) -> Result<Ciphertext<W>> {
        self.multiply_const_complex(ct, Complex64::new(c, 0.0))
    }

    /// `ct * c` for a complex constant (see [`Self::multiply_const`]).
    pub fn multiply_const_complex(
        &self,
        ct: &Ciphertext<W>,
        c: Complex64,
    ) -> Result<Ciphertext<W>> {
        self.check(ct)?;
        let s = self.mult_scale(ct.level)?;
        if c.im == 0.0 {
            let k = scaled_int(c.re, s)?;
            let mut out = self.multiply_int_raw(ct, k)?;
            out.scale = ct.scale * s;
            return Ok(out);
        }
        let basis = self.ctx.q_basis(ct.level)?;
        let mut p = self.ctx.encoder().encode_constant(c, s, basis)?;
        basis.forward_with(&mut p, self.threads)?;
        let mut out = ct.clone();
        out.seed = None;
        self.mul_polys_by(basis, &mut out.polys, &p)?;
        out.scale = ct.scale * s;
        Ok(out)
    }

    /// `x *= p` for every polynomial `x` of `polys` (NTT form, all over `basis`).
    fn mul_polys_by(
        &self,
        basis: &RnsBasis<W>,
        polys: &mut [RnsPoly<W>],
        p: &RnsPoly<W>,
    ) -> Result<()> {
        if !basis.owns(p) || polys.iter().any(|x| !basis.owns(x)) {
            return Err(CkksError::ParameterMismatch(
                "plaintext factor does not match the ciphertext's level".into(),
            ));
        }
        for_each_limb(self.threads, polys, |_, i, x| {
            Ok(basis
                .eltwise()
                .mul_assign(&basis.moduli()[i], x, p.limb(i))?)
        })
    }

    /// The scale plaintext factors get at `level`: `q_level`, so a rescale restores the
    /// ciphertext's scale exactly.
    fn mult_scale(&self, level: usize) -> Result<f64> {
        if level == 0 {
            return Err(CkksError::OutOfLevels(
                "multiplying by a non-integer constant or vector needs a level to rescale; the ciphertext is at level 0 (use multiply_int for integers)".into(),
            ));
        }
        Ok(self.ctx.params().moduli()[level] as f64)
    }

    /// `ct * pt` (slot-wise); the result's scale is the product of the scales.
    pub fn multiply_plain(&self, ct: &Ciphertext<W>, pt: &Plaintext<W>) -> Result<Ciphertext<W>> {
        self.check(ct)?;
        let level = ct.level.min(pt.level);
        let mut c = self.drop_to_level(ct, level)?;
        let p = self.plain_at(pt, level)?;
        let basis = self.ctx.q_basis(level)?;
        self.mul_polys_by(basis, &mut c.polys, &p)?;
        c.scale *= pt.scale;
        c.slots = c.slots.max(pt.slots);
        c.seed = None;
        Ok(c)
    }

    /// `ct * values` (slot-wise), the values encoded at scale `q_l` so that a rescale restores
    /// the ciphertext's scale.
    pub fn multiply_values(&self, ct: &Ciphertext<W>, values: &[f64]) -> Result<Ciphertext<W>> {
        self.check(ct)?;
        let s = self.mult_scale(ct.level)?;
        let pt = self.ctx.encode_at(&pad(values, ct.slots), ct.level, s)?;
        self.multiply_plain(ct, &pt)
    }

    /// `ct * values` for complex values.
    pub fn multiply_values_complex(
        &self,
        ct: &Ciphertext<W>,
        values: &[Complex64],
    ) -> Result<Ciphertext<W>> {
        self.check(ct)?;
        let s = self.mult_scale(ct.level)?;
        let pt = self
            .ctx
            .encode_complex_at(&pad(values, ct.slots), ct.level, s)?;
        self.multiply_plain(ct, &pt)
    }

    /// `a * b`: a three-polynomial ciphertext (relinearize next). Levels are aligned by
    /// dropping; the scales multiply.
    pub fn multiply(&self, a: &Ciphertext<W>, b: &Ciphertext<W>) -> Result<Ciphertext<W>> {
        self.check(a)?;
        self.check(b)?;
        if a.polys.len() != 2 || b.polys.len() != 2 {
            return Err(CkksError::InvalidInput(
                "multiply takes two-polynomial ciphertexts; relinearize first".into(),
            ));
        }
        let level = a.level.min(b.level);
        let a = self.at_level(a, level)?;
        let b = self.at_level(b, level)?;
        let basis = self.ctx.q_basis(level)?;
        let (elt, mods) = (basis.eltwise(), basis.moduli());
        let (a0, a1, b0, b1) = (&a.polys[0], &a.polys[1], &b.polys[0], &b.polys[1]);
        let mut polys = (0..3).map(|_| basis.zero(Form::Ntt)).collect::<Vec<_>>();
        // d0 = a0 b0, d1 = a0 b1 + a1 b0, d2 = a1 b1, over (polynomial, limb) pairs.
        for_each_limb(self.threads, &mut polys, |p, i, o| {
            let m = &mods[i];
            match p {
                0 => elt.mul(m, o, a0.limb(i), b0.limb(i))?,
                1 => {
                    elt.mul(m, o, a0.limb(i), b1.limb(i))?;
                    elt.mul_add(m, o, a1.limb(i), b0.limb(i))?;
                }
                _ => elt.mul(m, o, a1.limb(i), b1.limb(i))?,
            }
            Ok(())
        })?;
        Ok(Ciphertext {
            polys,
            level,
            scale: a.scale * b.scale,
            slots: a.slots.max(b.slots),
            fingerprint: a.fingerprint,
            seed: None,
        })
    }

    /// `a^2` (three polynomials, one product fewer than `multiply(a, a)`).
    pub fn square(&self, a: &Ciphertext<W>) -> Result<Ciphertext<W>> {
        self.check(a)?;
        if a.polys.len() != 2 {
            return Err(CkksError::InvalidInput(
                "square takes a two-polynomial ciphertext; relinearize first".into(),
            ));
        }
        let basis = self.ctx.q_basis(a.level)?;
        let (elt, mods) = (basis.eltwise(), basis.moduli());
        let (a0, a1) = (&a.polys[0], &a.polys[1]);
        let mut polys = (0..3).map(|_| basis.zero(Form::Ntt)).collect::<Vec<_>>();
        // d0 = a0^2, d1 = 2 a0 a1, d2 = a1^2.
        for_each_limb(self.threads, &mut polys, |p, i, o| {
            let m = &mods[i];
            match p {
                0 => elt.mul(m, o, a0.limb(i), a0.limb(i))?,
                1 => {
                    elt.mul(m, o, a0.limb(i), a1.limb(i))?;
                    elt.mul_scalar_assign(m, o, 2)?;
                }
                _ => elt.mul(m, o, a1.limb(i), a1.limb(i))?,
            }
            Ok(())
        })?;
        Ok(Ciphertext {
            polys,
            level: a.level,
            scale: a.scale * a.scale,
            slots: a.slots,
            fingerprint: a.fingerprint,
            seed: None,
        })
    }

    /// Relinearizes a three-polynomial ciphertext back to two (two-polynomial ones are
    /// returned unchanged).
    pub fn relinearize(&self, ct: &Ciphertext<W>) -> Result<Ciphertext<W>> {
        self.check(ct)?;
        match ct.polys.len() {
            2 => return Ok(ct.clone()),
            3 => {}
            k => {
                return Err(CkksError::InvalidInput(format!(
                    "relinearize handles ciphertexts of size 2 or 3, got {k}"
                )))
            }
        }
        let key = self.keys()?.relin_key()?;
        let basis = self.ctx.q_basis(ct.level)?;
        // (c0, c1) + key switch of c2; each sum made where its half is mod-downed.
        let add = |i: usize| -> Finish<'_, W> {
            let c = &ct.polys[i];
            Box::new(move |mut k, t| {
                basis.add_assign_with(&mut k, c, t)?;
                Ok(k)
            })
        };
        let (c0, c1) = self.ctx.key_switch_finish(
            &ct.polys[2],
            ct.level,
            key,
            self.threads,
            add(0),
            add(1),
        )?;
        Ok(ct.with_polys(vec![c0, c1]))
    }

    /// `x += perm(c)` limb by limb (NTT form), with one scratch limb per thread.
    fn add_permuted(
        &self,
        basis: &RnsBasis<W>,
        x: &mut RnsPoly<W>,
        c: &RnsPoly<W>,
        perm: &NttPermutation,
        threads: Threads,
    ) -> Result<()> {
        if !basis.owns(x) || !basis.owns(c) {
            return Err(CkksError::ParameterMismatch(
                "internal: key-switched polynomial at the wrong level".into(),
            ));
        }
        let n = basis.n();
        let mut limbs: Vec<&mut [W]> = x.limbs_mut().collect();
        threads.try_for_each_init(
            &mut limbs,
            || vec![W::ZERO; n],
            |tmp, i, xi| -> Result<()> {
                perm.apply(c.limb(i), tmp)?;
                basis.eltwise().add_assign(&basis.moduli()[i], xi, tmp)?;
                Ok(())
            },
        )
    }

    /// `a * b`, relinearized and rescaled: what `*` does in Python.
    pub fn multiply_relin_rescale(
        &self,
        a: &Ciphertext<W>,
        b: &Ciphertext<W>,
    ) -> Result<Ciphertext<W>> {
        let m = self.multiply(a, b)?;
        let r = self.relinearize(&m)?;
        self.rescale(&r)
    }

    // ----- rotations -----

    fn galois_key(&self, g: u64, what: &str) -> Result<&SwitchingKey<W>> {
        self.keys()?.galois_key(g).ok_or_else(|| {
            CkksError::MissingKey(format!(
                "no Galois key for {what} (element {g}); generate keys with it (e.g. keygen(rotations=[...]) or conjugate=True)"
            ))
        })
    }

    /// The Galois key of `g` permuted by `sigma_g^-1` (see [`HoistedKeys`]), built once.
    fn hoisted_key(&self, g: u64, key: &SwitchingKey<W>) -> Result<Arc<SwitchingKey<W>>> {
        if let Ok(map) = self.hoisted.read() {
            if let Some(k) = map.get(&g) {
                return Ok(Arc::clone(k));
            }
        }
        let n = self.ctx.n() as u64;
        let inv = self.ctx.permutation(galois_inverse(g, n))?;
        let permute = |polys: &[RnsPoly<W>]| -> Result<Vec<RnsPoly<W>>> {
            polys
                .iter()
                .map(|p| {
                    let mut out = p.clone();
                    for (o, a) in out.limbs_mut().zip(p.limbs()) {
                        inv.apply(a, o)?;
                    }
                    Ok(out)
                })
                .collect()
        };
        let k = Arc::new(SwitchingKey {
            b: permute(&key.b)?,
            a: permute(&key.a)?,
            seeds: Vec::new(),
            role: key.role,
            fingerprint: key.fingerprint,
        });
        if let Ok(mut map) = self.hoisted.write() {
            map.insert(g, Arc::clone(&k));
        }
        Ok(k)
    }

    fn apply_galois(
        &self,
        ct: &Ciphertext<W>,
        g: u64,
        key: &SwitchingKey<W>,
        dec: &crate::keyswitch::Decomposed<W>,
        threads: Threads,
    ) -> Result<Ciphertext<W>> {
        let perm = self.ctx.permutation(g)?;
        let hk = self.hoisted_key(g, key)?;
        let (s0, s1) = self.ctx.key_inner_product_with(dec, &hk, None, threads)?;
        // sigma_g of both sums, limb by limb.
        let (mut a0, mut a1) = (s0.clone(), s1.clone());
        {
            let mut limbs: Vec<(&mut [W], &[W])> = a0
                .limbs_mut()
                .chain(a1.limbs_mut())
                .zip(s0.limbs().chain(s1.limbs()))
                .collect();
            threads.try_for_each_mut(&mut limbs, |_, (o, a)| -> Result<()> {
                Ok(perm.apply(a, o)?)
            })?;
        }
        drop((s0, s1));
        let basis = self.ctx.q_basis(ct.level)?;
        let (c0, c1) = threads.join(
            |t| -> Result<RnsPoly<W>> {
                let mut k0 = self.ctx.mod_down_with(a0, ct.level, t)?;
                self.add_permuted(basis, &mut k0, &ct.polys[0], &perm, t)?;
                Ok(k0)
            },
            |t| self.ctx.mod_down_with(a1, ct.level, t),
        );
        Ok(ct.with_polys(vec![c0?, c1?]))
    }

    fn check_two(&self, ct: &Ciphertext<W>, op: &str) -> Result<()> {
        self.check(ct)?;
        if ct.polys.len() != 2 {
            return Err(CkksError::InvalidInput(format!(
                "{op} takes a two-polynomial ciphertext; relinearize first"
            )));
        }
        Ok(())
    }

    /// `X -> X^g` on one ciphertext: permute both polynomials (NTT form), then switch the
    /// permuted `c_1` back to `s` with the Galois key.
    fn galois_single(
        &self,
        ct: &Ciphertext<W>,
        g: u64,
        key: &SwitchingKey<W>,
    ) -> Result<Ciphertext<W>> {
        let perm = self.ctx.permutation(g)?;
        let basis = self.ctx.q_basis(ct.level)?;
        let mut p = (0..2).map(|_| basis.zero(Form::Ntt)).collect::<Vec<_>>();
        for_each_limb(self.threads, &mut p, |j, i, o| {
            Ok(perm.apply(ct.polys[j].limb(i), o)?)
        })?;
        // perm(c0) is added to the switched half on the thread that mod-downs it.
        let c0 = &p[0];
        let (c0, c1) = self.ctx.key_switch_finish(
            &p[1],
            ct.level,
            key,
            self.threads,
            Box::new(move |mut k0, t| {
                basis.add_assign_with(&mut k0, c0, t)?;
                Ok(k0)
            }),
            Box::new(|k1, _| Ok(k1)),
        )?;
        Ok(ct.with_polys(vec![c0, c1]))
    }

    /// Rotates the slots left by `step` (right when negative).
    pub fn rotate(&self, ct: &Ciphertext<W>, step: i64) -> Result<Ciphertext<W>> {
        self.check_two(ct, "rotate")?;
        let n = self.ctx.n();
        let g = galois_element_for_step(n, step);
        if g == 1 {
            return Ok(ct.clone());
        }
        let key = self.galois_key(g, &format!("rotation step {step}"))?;
        self.galois_single(ct, g, key)
    }

    /// Conjugates every slot.
    pub fn conjugate(&self, ct: &Ciphertext<W>) -> Result<Ciphertext<W>> {
        self.check_two(ct, "conjugate")?;
        let g = galois_element_conjugate(self.ctx.n());
        let key = self.galois_key(g, "conjugation")?;
        self.galois_single(ct, g, key)
    }

    /// Hoisted rotations: one decomposition of `c_1`, then one inner product per step
    /// (Halevi-Shoup 2018). Returns the rotations in the order of `steps`.
    pub fn rotate_many(&self, ct: &Ciphertext<W>, steps: &[i64]) -> Result<Vec<Ciphertext<W>>> {
        self.check_two(ct, "rotate")?;
        let n = self.ctx.n();
        let mut keys = Vec::with_capacity(steps.len());
        for &s in steps {
            let g = galois_element_for_step(n, s);
            let key = if g == 1 {
                None
            } else {
                Some(self.galois_key(g, &format!("rotation step {s}"))?)
            };
            keys.push((g, key));
        }
        let need = keys.iter().any(|(_, k)| k.is_some());
        let dec = if need {
            Some(
                self.ctx
                    .decompose_with(&ct.polys[1], ct.level, self.threads)?,
            )
        } else {
            None
        };
        let one = |i: usize, t: Threads| match (keys[i], &dec) {
            ((g, Some(k)), Some(d)) => self.apply_galois(ct, g, k, d, t),
            _ => Ok(ct.clone()),
        };
        // Whole rounds of steps one per thread (no hand-over inside a step); the steps left
        // over one at a time, each split over the whole budget.
        let threads = self.threads.effective();
        let c = threads.get();
        let par = if c > 1 { keys.len() / c * c } else { 0 };
        let mut out = threads.map(par, |i| one(i, Threads::single()));
        out.extend((par..keys.len()).map(|i| one(i, threads)));
        out.into_iter().collect()
    }

    /// Sum of `n` consecutive slots in every slot: slot `i` gets `x_i + .. + x_{i+n-1}`
    /// (indices mod slots). `n` must be a power of two; needs keys for steps 1, 2, 4, .., n/2.
    pub fn rotate_and_sum(&self, ct: &Ciphertext<W>, n: usize) -> Result<Ciphertext<W>> {
        self.check_two(ct, "rotate_and_sum")?;
        if n == 0 || !n.is_power_of_two() || n > self.ctx.params().slots() {
            return Err(CkksError::InvalidInput(format!(
                "rotate_and_sum needs a power-of-two count up to {}, got {n}",
                self.ctx.params().slots()
            )));
        }
        let mut acc = ct.clone();
        let mut k = 1usize;
        while k < n {
            let r = self.rotate(&acc, k as i64)?;
            acc = self.add(&acc, &r)?;
            k <<= 1;
        }
        Ok(acc)
    }

    /// Rotation steps `rotate_and_sum(_, n)` needs keys for.
    pub fn rotate_and_sum_steps(n: usize) -> Vec<i64> {
        let mut v = Vec::new();
        let mut k = 1usize;
        while k < n {
            v.push(k as i64);
            k <<= 1;
        }
        v
    }
}

/// `g^-1 mod 2n` for an odd `g` (the units mod 2n have order dividing n, so `g^(n-1)`).
fn galois_inverse(g: u64, n: u64) -> u64 {
    let m = 2 * n as u128;
    let (mut base, mut e, mut acc) = (g as u128 % m, n - 1, 1u128);
    while e > 0 {
        if e & 1 == 1 {
            acc = acc * base % m;
        }
        base = base * base % m;
        e >>= 1;
    }
    acc as u64
}

/// `round(c * scale)` as an exact integer, with a clear error when it cannot be represented.
pub(crate) fn scaled_int(c: f64, scale: f64) -> Result<i128> {
    let v = (c * scale).round();
    if !v.is_finite() || v.abs() >= 2f64.powi(120) {
        return Err(CkksError::InvalidInput(format!(
            "constant {c} at scale 2^{:.1} does not fit (|c * scale| must be below 2^120); use a smaller constant",
            scale.log2()
        )));
    }
    Ok(v as i128)
}
