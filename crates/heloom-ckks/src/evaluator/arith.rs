//! Additions and subtractions: ciphertexts, plaintexts, vectors and constants.

use super::*;

impl<W: Word> Evaluator<W> {
    pub(super) fn combine(
        &self,
        a: &Ciphertext<W>,
        b: &Ciphertext<W>,
        sub: bool,
    ) -> Result<Ciphertext<W>> {
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

    /// `a += b` in place: no copy of `a` when both share a level and a scale and `b` has no
    /// more polynomials (sums of many terms), otherwise as [`Self::add`].
    pub fn add_assign(&self, a: &mut Ciphertext<W>, b: &Ciphertext<W>) -> Result<()> {
        if a.level != b.level
            || !self.scales_match(a.scale, b.scale)
            || a.polys.len() < b.polys.len()
        {
            *a = self.add(a, b)?;
            return Ok(());
        }
        self.check(a)?;
        self.check(b)?;
        let basis = self.ctx.q_basis(a.level)?;
        let (elt, mods) = (basis.eltwise(), basis.moduli());
        for_each_limb(self.threads, &mut a.polys[..b.polys.len()], |p, i, x| {
            Ok(elt.add_assign(&mods[i], x, b.polys[p].limb(i))?)
        })?;
        a.slots = a.slots.max(b.slots);
        a.seed = None;
        Ok(())
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

    pub(super) fn plain_at(&self, pt: &Plaintext<W>, level: usize) -> Result<RnsPoly<W>> {
        self.check_plain_level(pt, level)?;
        Ok(self.ctx.q_basis(level)?.truncated(&pt.poly)?)
    }

    /// Checks that `pt` belongs to this context and reaches `level`.
    fn check_plain_level(&self, pt: &Plaintext<W>, level: usize) -> Result<()> {
        self.ctx.check_fingerprint(pt.fingerprint, "plaintext")?;
        if pt.level < level {
            return Err(CkksError::OutOfLevels {
                level: pt.level,
                needed: level,
                hint: format!(
                    "plaintext at level {} is below the ciphertext's level {level}",
                    pt.level
                ),
            });
        }
        Ok(())
    }

    /// [`Self::check_plain_level`], and that its first `level + 1` limbs are the plaintext at
    /// `level` in NTT form (read in place: no truncated copy needed).
    pub(super) fn check_plain_at(&self, pt: &Plaintext<W>, level: usize) -> Result<()> {
        self.check_plain_level(pt, level)?;
        if pt.poly.form() != Form::Ntt || pt.poly.num_limbs() <= level {
            return Err(CkksError::ParameterMismatch(format!(
                "the plaintext has {} limbs in {:?} form; level {level} needs {} in NTT form (corrupted?)",
                pt.poly.num_limbs(),
                pt.poly.form(),
                level + 1
            )));
        }
        Ok(())
    }

    /// `ct + pt` (scales must match; the plaintext is dropped to the ciphertext's level).
    pub fn add_plain(&self, ct: &Ciphertext<W>, pt: &Plaintext<W>) -> Result<Ciphertext<W>> {
        self.add_sub_plain(ct, pt, false)
    }

    /// `ct - pt`.
    pub fn sub_plain(&self, ct: &Ciphertext<W>, pt: &Plaintext<W>) -> Result<Ciphertext<W>> {
        self.add_sub_plain(ct, pt, true)
    }

    pub(super) fn add_sub_plain(
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
            let r = const_residues(basis, c.re, ct.scale)?;
            add_const_limbs(basis, &mut out.polys[0], &r, self.threads)?;
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
        let r = const_residues(basis, c, ct.scale)?;
        ct.seed = None;
        add_const_limbs(basis, &mut ct.polys[0], &r, self.threads)?;
        Ok(())
    }

    // ----- multiplicative -----
}
