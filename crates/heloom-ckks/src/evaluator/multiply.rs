//! Multiplications (by integers, constants, vectors, plaintexts and ciphertexts) and
//! relinearization.

use super::*;

impl<W: Word> Evaluator<W> {
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

    pub(super) fn multiply_int_raw(&self, ct: &Ciphertext<W>, k: i128) -> Result<Ciphertext<W>> {
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

    /// `ct * i` in every slot, exactly and without a level: the product with the monomial
    /// `X^(N/2)` (`zeta^(5^j N/2) = i` at every slot point; CKKS17 Sec. 3.3), which only moves
    /// and negates coefficients. The scale is unchanged.
    pub fn multiply_by_i(&self, ct: &Ciphertext<W>) -> Result<Ciphertext<W>> {
        self.check(ct)?;
        let basis = self.ctx.q_basis(ct.level)?;
        let mut p = self
            .ctx
            .encoder()
            .encode_constant(Complex64::new(0.0, 1.0), 1.0, basis)?;
        basis.forward_with(&mut p, self.threads)?;
        let mut out = ct.clone();
        out.seed = None;
        self.mul_polys_by(basis, &mut out.polys, &p)?;
        Ok(out)
    }

    /// `x *= p` for every polynomial `x` of `polys` (NTT form, all over `basis`).
    pub(super) fn mul_polys_by(
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
    pub(super) fn mult_scale(&self, level: usize) -> Result<f64> {
        if level == 0 {
            return Err(CkksError::OutOfLevels {
                level: 0,
                needed: 1,
                hint: "multiplying by a non-integer constant or vector needs a level to rescale; the ciphertext is at level 0 (use multiply_int for integers)".into(),
            });
        }
        Ok(self.ctx.params().moduli()[level] as f64)
    }

    /// `ct * pt` (slot-wise); the result's scale is the product of the scales.
    pub fn multiply_plain(&self, ct: &Ciphertext<W>, pt: &Plaintext<W>) -> Result<Ciphertext<W>> {
        self.check(ct)?;
        let level = ct.level.min(pt.level);
        let mut c = self.drop_to_level(ct, level)?;
        self.check_plain_at(pt, level)?;
        let basis = self.ctx.q_basis(level)?;
        // The plaintext's first limbs are its truncation: read them in place.
        let (elt, mods) = (basis.eltwise(), basis.moduli());
        for_each_limb(self.threads, &mut c.polys, |_, i, x| {
            Ok(elt.mul_assign(&mods[i], x, pt.poly.limb(i))?)
        })?;
        c.scale *= pt.scale;
        c.slots = c.slots.max(pt.slots);
        c.seed = None;
        Ok(c)
    }

    /// `acc += k * ct` with `ct` dropped to `level` (reading only its first limbs) and the
    /// product labelled `scale`; `acc = k * ct` at `level` when it is `None`. One pass, no
    /// copies, the same words as the drop, a multiplication by `k` and [`Self::add`]
    /// one by one (which it falls back to when `acc` is not at `level` with `scale` and
    /// `ct`'s size).
    pub fn multiply_int_accumulate(
        &self,
        acc: &mut Option<Ciphertext<W>>,
        ct: &Ciphertext<W>,
        level: usize,
        k: i128,
        scale: f64,
    ) -> Result<()> {
        let fused = acc.as_ref().is_some_and(|a| {
            a.level == level
                && ct.level >= level
                && a.polys.len() == ct.polys.len()
                && self.scales_match(a.scale, scale)
        });
        let Some(a) = acc.as_mut().filter(|_| fused) else {
            let mut t = self.multiply_const_exact(&self.drop_to_level(ct, level)?, k)?;
            t.scale = scale;
            match acc.as_mut() {
                Some(a) => self.add_assign(a, &t)?,
                None => *acc = Some(t),
            }
            return Ok(());
        };
        self.check(ct)?;
        self.check(a)?;
        let basis = self.ctx.q_basis(level)?;
        let (elt, mods) = (basis.eltwise(), basis.moduli());
        for_each_limb(self.threads, &mut a.polys, |p, i, x| {
            let m = &mods[i];
            Ok(elt.mul_scalar_add(m, x, ct.polys[p].limb(i), reduce_i128(m, k))?)
        })?;
        a.slots = a.slots.max(ct.slots);
        a.seed = None;
        Ok(())
    }

    /// `acc += ct * pt` (`acc = ct * pt` when it is `None`) in one pass over the limbs, with
    /// no temporaries: the inner sums of linear transforms (HS18's baby-step sums). The
    /// product is at `ct`'s level, which `pt` must reach; an `acc` already there must have
    /// `ct.scale * pt.scale` and as many polynomials as `ct` (otherwise the product is
    /// formed and added as by [`Self::add`]).
    pub fn multiply_plain_accumulate(
        &self,
        acc: &mut Option<Ciphertext<W>>,
        ct: &Ciphertext<W>,
        pt: &Plaintext<W>,
    ) -> Result<()> {
        let fused = match acc.as_ref() {
            Some(a) => {
                a.level == ct.level
                    && pt.level >= ct.level
                    && a.polys.len() == ct.polys.len()
                    && self.scales_match(a.scale, ct.scale * pt.scale)
            }
            None => false,
        };
        let Some(a) = acc.as_mut().filter(|_| fused) else {
            let t = self.multiply_plain(ct, pt)?;
            match acc.as_mut() {
                Some(a) => self.add_assign(a, &t)?,
                None => *acc = Some(t),
            }
            return Ok(());
        };
        self.check(ct)?;
        self.check(a)?;
        self.check_plain_at(pt, ct.level)?;
        let basis = self.ctx.q_basis(ct.level)?;
        let (elt, mods) = (basis.eltwise(), basis.moduli());
        for_each_limb(self.threads, &mut a.polys, |p, i, x| {
            Ok(elt.mul_add(&mods[i], x, ct.polys[p].limb(i), pt.poly.limb(i))?)
        })?;
        a.slots = a.slots.max(ct.slots).max(pt.slots);
        a.seed = None;
        Ok(())
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

    /// [`Self::relinearize`] then [`Self::rescale`] in one step: the key switch's mod-down
    /// divides by `q_level P` at once (`(P (c0, c1) + ks(c2)) / (q_level P)`), which saves
    /// the rescale's inverse NTT and the NTTs of every remaining limb, and rounds once. A
    /// ciphertext of 2 polynomials is only rescaled. The result is one level down with the
    /// scale divided by `q_level`, as the two steps give.
    pub fn relinearize_rescale(&self, ct: &Ciphertext<W>) -> Result<Ciphertext<W>> {
        self.check(ct)?;
        match ct.polys.len() {
            2 => return self.rescale(ct),
            3 => {}
            k => {
                return Err(CkksError::InvalidInput(format!(
                    "relinearize handles ciphertexts of size 2 or 3, got {k}"
                )))
            }
        }
        let key = self.keys()?.relin_key()?;
        let l = ct.level;
        let ql = self.ctx.q_basis(l)?.moduli()[l].value() as f64;
        let (c0, c1) = self.ctx.key_switch_rescale(
            &ct.polys[2],
            l,
            key,
            self.threads,
            &ct.polys[0],
            &ct.polys[1],
        )?;
        Ok(Ciphertext {
            polys: vec![c0, c1],
            level: l - 1,
            scale: ct.scale / ql,
            slots: ct.slots,
            fingerprint: ct.fingerprint,
            seed: None,
        })
    }

    /// `x += perm(c)` limb by limb (NTT form), with one scratch limb per thread.
    pub(super) fn add_permuted(
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
        let (n, pool) = (basis.n(), self.ctx.pool());
        let mut limbs: Vec<&mut [W]> = x.limbs_mut().collect();
        threads.try_for_each_init(
            &mut limbs,
            || pool.scratch(n),
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
}
