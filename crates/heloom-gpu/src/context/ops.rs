//! CKKS operations on device-resident ciphertexts (the same rules as the CPU evaluator, word
//! for word), and [`GpuEvaluator`] with the evaluation keys.

use super::*;

impl<W: GpuWord> GpuContext<W> {
    pub(super) fn check_ct(&self, ct: &GpuCiphertext<W>) -> Result<()> {
        if ct.fingerprint != self.ctx.fingerprint() {
            return Err(GpuError::Mismatch(
                "ciphertext of other parameters than this GPU context".into(),
            ));
        }
        if !ct.data.gpu().same_device(&self.gpu) {
            return Err(GpuError::Mismatch("ciphertext lives on another GPU".into()));
        }
        self.check_level(ct.level)
    }

    pub(super) fn scales_match(&self, a: f64, b: f64) -> bool {
        heloom_ckks::polyops::scales_match(self.ctx.params().moduli(), a, b)
    }

    pub(super) fn combine(
        &self,
        a: &GpuCiphertext<W>,
        b: &GpuCiphertext<W>,
        sub: bool,
    ) -> Result<GpuCiphertext<W>> {
        self.check_ct(a)?;
        self.check_ct(b)?;
        let (a, b) = if a.level == b.level && self.scales_match(a.scale, b.scale) {
            (a.clone(), b.clone())
        } else {
            self.align(a, b)?
        };
        let nl = a.level + 1;
        let pw = nl * self.n;
        let common = a.size.min(b.size);
        let size = a.size.max(b.size);
        let mut out = self.gpu.alloc::<W>(size * pw)?;
        self.elt(
            if sub { "hk_sub" } else { "hk_add" },
            out.addr(0),
            a.data.addr(0),
            b.data.addr(0),
            common * nl,
            nl,
            self.q_layout[a.level].addr(0),
        )?;
        // Polynomials only one operand has: copied (negated when subtracted).
        for p in common..size {
            if a.size > p {
                self.gpu.copy(&mut out, p * pw, &a.data, p * pw, pw)?;
            } else if sub {
                let pack = self.limb_pack(a.level, |_, m| (m.value() - 1) as i128)?;
                self.scalar_mul_raw(out.addr(p * pw), b.data.addr(p * pw), nl, a.level, &pack)?;
            } else {
                self.gpu.copy(&mut out, p * pw, &b.data, p * pw, pw)?;
            }
        }
        Ok(GpuCiphertext {
            data: Arc::new(out),
            size,
            level: a.level,
            scale: a.scale,
            slots: a.slots.max(b.slots),
            fingerprint: a.fingerprint,
        })
    }

    /// Brings two ciphertexts to one level and one scale by the CPU evaluator's rule
    /// ([`heloom_ckks::polyops::align_on`]), so results agree word for word.
    pub fn align(
        &self,
        a: &GpuCiphertext<W>,
        b: &GpuCiphertext<W>,
    ) -> Result<(GpuCiphertext<W>, GpuCiphertext<W>)> {
        self.check_ct(a)?;
        self.check_ct(b)?;
        Ok(heloom_ckks::polyops::align_on(self, a, b)?)
    }

    /// Moves `ct` to `level` (below its own) with scale `target`: an integer multiple one level
    /// above, then a rescale ([`heloom_ckks::polyops::set_scale_by_rescale_on`]).
    pub fn set_scale_by_rescale(
        &self,
        ct: &GpuCiphertext<W>,
        level: usize,
        target: f64,
    ) -> Result<GpuCiphertext<W>> {
        Ok(heloom_ckks::polyops::set_scale_by_rescale_on(
            self, ct, level, target,
        )?)
    }

    /// Per-limb constants at `level`: `f(i, q_i)` reduced modulo `q_i`, with Shoup companions.
    pub(super) fn limb_pack(
        &self,
        level: usize,
        f: impl Fn(usize, &Modulus<W>) -> i128,
    ) -> Result<ScalarPack> {
        let mods = self.ctx.q_basis(level)?.moduli();
        if mods.len() > MAX_SCALAR_LIMBS {
            return Err(GpuError::Invalid(format!(
                "{} limbs; the GPU's constant kernels take at most {MAX_SCALAR_LIMBS}",
                mods.len()
            )));
        }
        let mut pack = ScalarPack { v: [0; 128] };
        for (i, m) in mods.iter().enumerate() {
            let r = f(i, m).rem_euclid(m.value() as i128) as u64;
            let w = W::from_u64(r);
            pack.v[2 * i] = r;
            pack.v[2 * i + 1] = m.shoup(w).to_u64();
        }
        Ok(pack)
    }

    pub(super) fn scalar_mul_raw(
        &self,
        out: u64,
        input: u64,
        limbs: usize,
        level: usize,
        pack: &ScalarPack,
    ) -> Result<()> {
        let count = (limbs as u64) << self.log_n;
        let block = self.gpu.block(256);
        let args = [
            out,
            input,
            limbs as u64,
            (level + 1) as u64,
            self.q_layout[level].addr(0),
            self.pt.addr(0),
            self.log_n as u64,
        ];
        self.flat("hk_scalar_mul", count, block, &args, Some(pack))
    }

    /// `ct * k` for any integer `k` (reduced modulo each prime); the scale is unchanged (the
    /// caller relabels it).
    pub fn multiply_const_exact(&self, ct: &GpuCiphertext<W>, k: i128) -> Result<GpuCiphertext<W>> {
        self.check_ct(ct)?;
        let pack = self.limb_pack(ct.level, |_, _| k)?;
        let out = self.gpu.alloc::<W>(ct.data.len())?;
        self.scalar_mul_raw(
            out.addr(0),
            ct.data.addr(0),
            ct.size * (ct.level + 1),
            ct.level,
            &pack,
        )?;
        Ok(GpuCiphertext {
            data: Arc::new(out),
            ..ct.clone()
        })
    }

    /// `ct * k` for a small integer: exact, no level used, scale unchanged.
    pub fn multiply_int(&self, ct: &GpuCiphertext<W>, k: i64) -> Result<GpuCiphertext<W>> {
        self.multiply_const_exact(ct, k as i128)
    }

    /// `ct * c` for a real constant encoded at scale `q_level` (so that a rescale restores the
    /// scale exactly), as the CPU evaluator's `multiply_const`.
    pub fn multiply_const(&self, ct: &GpuCiphertext<W>, c: f64) -> Result<GpuCiphertext<W>> {
        self.check_ct(ct)?;
        if ct.level == 0 {
            return Err(GpuError::Ckks(heloom_ckks::CkksError::OutOfLevels {
                level: 0,
                needed: 1,
                hint: "multiplying by a non-integer constant needs a level to rescale; the ciphertext is at level 0".into(),
            }));
        }
        let s = self.ctx.params().moduli()[ct.level] as f64;
        let k = scaled_int(c, s)?;
        let mut out = self.multiply_const_exact(ct, k)?;
        out.scale = ct.scale * s;
        Ok(out)
    }

    /// `ct * values` slot-wise, as the CPU's `PolyOps::multiply_plain_slots`: the values are
    /// encoded on the host by the CPU encoder at `ct`'s level with scale `q_level`
    /// ([`heloom_ckks::polyops::encode_plain_slots`]), uploaded, and each polynomial is
    /// multiplied by them on the device. The result's scale is `scale * q_level`.
    pub fn multiply_plain_slots(
        &self,
        ct: &GpuCiphertext<W>,
        values: &[f64],
    ) -> Result<GpuCiphertext<W>> {
        self.check_ct(ct)?;
        let pt = heloom_ckks::polyops::encode_plain_slots(&self.ctx, values, ct.level)?;
        self.multiply_plain(ct, &self.upload_plaintext(&pt)?)
    }

    /// `ct + c` in every slot (a real constant at the ciphertext's scale).
    pub fn add_const(&self, ct: &GpuCiphertext<W>, c: f64) -> Result<GpuCiphertext<W>> {
        self.check_ct(ct)?;
        let k = scaled_int(c, ct.scale)?;
        let pack = self.limb_pack(ct.level, |_, _| k)?;
        let nl = ct.level + 1;
        let out = self.gpu.alloc::<W>(ct.data.len())?;
        let count = ((ct.size * nl) as u64) << self.log_n;
        let block = self.gpu.block(256);
        let args = [
            out.addr(0),
            ct.data.addr(0),
            (ct.size * nl) as u64,
            nl as u64,
            nl as u64,
            self.q_layout[ct.level].addr(0),
            self.pt.addr(0),
            self.log_n as u64,
        ];
        self.flat("hk_scalar_add", count, block, &args, Some(&pack))?;
        Ok(GpuCiphertext {
            data: Arc::new(out),
            ..ct.clone()
        })
    }

    /// `-ct`.
    pub fn negate(&self, ct: &GpuCiphertext<W>) -> Result<GpuCiphertext<W>> {
        self.multiply_const_exact(ct, -1)
    }

    /// `a^2` (three polynomials): the tensor product of `a` with itself, equal word for word
    /// to the CPU's squaring (`2 a0 a1 = a0 a1 + a1 a0` modulo each prime).
    pub fn square(&self, a: &GpuCiphertext<W>) -> Result<GpuCiphertext<W>> {
        self.multiply(a, a)
    }

    /// The same ciphertext with its scale relabelled (no arithmetic; shares the buffer).
    pub fn with_scale(&self, ct: &GpuCiphertext<W>, scale: f64) -> Result<GpuCiphertext<W>> {
        if !(scale.is_finite() && scale > 0.0) {
            return Err(GpuError::Invalid(format!("invalid scale {scale}")));
        }
        Ok(GpuCiphertext {
            scale,
            ..ct.clone()
        })
    }

    /// `a + b`; levels and scales are aligned as the CPU evaluator aligns them.
    pub fn add(&self, a: &GpuCiphertext<W>, b: &GpuCiphertext<W>) -> Result<GpuCiphertext<W>> {
        self.combine(a, b, false)
    }

    /// `a - b`; levels and scales are aligned as the CPU evaluator aligns them.
    pub fn sub(&self, a: &GpuCiphertext<W>, b: &GpuCiphertext<W>) -> Result<GpuCiphertext<W>> {
        self.combine(a, b, true)
    }

    /// Drops `ct` to `level` (exact: the top limbs are discarded).
    pub fn drop_to_level(&self, ct: &GpuCiphertext<W>, level: usize) -> Result<GpuCiphertext<W>> {
        self.check_ct(ct)?;
        if level > ct.level {
            return Err(GpuError::Invalid(format!(
                "cannot raise a ciphertext from level {} to {level}",
                ct.level
            )));
        }
        if level == ct.level {
            return Ok(ct.clone());
        }
        let (src_w, dst_w) = ((ct.level + 1) * self.n, (level + 1) * self.n);
        let mut out = self.gpu.alloc::<W>(ct.size * dst_w)?;
        for p in 0..ct.size {
            self.gpu
                .copy(&mut out, p * dst_w, &ct.data, p * src_w, dst_w)?;
        }
        Ok(GpuCiphertext {
            data: Arc::new(out),
            size: ct.size,
            level,
            scale: ct.scale,
            slots: ct.slots,
            fingerprint: ct.fingerprint,
        })
    }

    /// `a * b` without relinearization: three polynomials (tensor product in one kernel).
    /// Levels are aligned by dropping, as on the CPU; the scales multiply.
    pub fn multiply(&self, a: &GpuCiphertext<W>, b: &GpuCiphertext<W>) -> Result<GpuCiphertext<W>> {
        self.check_ct(a)?;
        self.check_ct(b)?;
        if a.size != 2 || b.size != 2 {
            return Err(GpuError::Invalid(
                "multiply takes two-polynomial ciphertexts; relinearize first".into(),
            ));
        }
        let level = a.level.min(b.level);
        let (a, b) = (self.drop_to_level(a, level)?, self.drop_to_level(b, level)?);
        let (a, b) = (&a, &b);
        let nl = a.level + 1;
        let out = self.gpu.alloc::<W>(3 * nl * self.n)?;
        let count = (nl as u64) << self.log_n;
        let block = self.gpu.block(256);
        let args = [
            out.addr(0),
            a.data.addr(0),
            b.data.addr(0),
            nl as u64,
            self.q_layout[a.level].addr(0),
            self.pt.addr(0),
            self.log_n as u64,
        ];
        self.flat("hk_tensor", count, block, &args, None)?;
        Ok(GpuCiphertext {
            data: Arc::new(out),
            size: 3,
            level: a.level,
            scale: a.scale * b.scale,
            slots: a.slots.max(b.slots),
            fingerprint: a.fingerprint,
        })
    }

    /// Rescale (fused): the inverse NTT of the last limbs, then one forward NTT whose first
    /// phase spreads the centered last limb to every other prime on load and whose last phase
    /// subtracts and scales by `q_l^-1` on store. Bit-exact with `Evaluator::rescale`.
    pub fn rescale(&self, ct: &GpuCiphertext<W>) -> Result<GpuCiphertext<W>> {
        self.check_ct(ct)?;
        let l = ct.level;
        if l == 0 {
            return Err(GpuError::Invalid(
                "cannot rescale at level 0: no prime left to divide by".into(),
            ));
        }
        let (n, np) = (self.n, ct.size);
        let in_stride = (l + 1) * n;
        // The last limbs in coefficient form, one per polynomial.
        let mut last = self.gpu.alloc::<W>(np * n)?;
        for p in 0..np {
            self.gpu
                .copy(&mut last, p * n, &ct.data, p * in_stride + l * n, n)?;
        }
        let ls = span(&last, 0, n);
        self.inverse(ls, ls, np as u32, 1, 0, self.single_layout[l].addr(0))?;
        let out = self.spread_forward(
            ls,
            np,
            (l, self.q_layout[l].addr(0)),
            l as u32,
            Some(SubScale {
                orig: span(&ct.data, 0, in_stride),
                scal: self.rescale_scal[l].addr(0),
                addend: Span { addr: 0, stride: 0 },
                addend_np: 0,
            }),
        )?;
        Ok(self.derived(
            ct,
            out,
            np,
            l - 1,
            ct.scale / self.ctx.params().moduli()[l] as f64,
        ))
    }

    /// Key switching of `d` (one polynomial, NTT form, `level + 1` limbs, at word offset
    /// `d_off` of `d_buf`) under `key`: returns the two polynomials `(c0, c1)` (one buffer),
    /// with `addend`'s first `addend_np` polynomials added to them. Mod-up of all digits,
    /// one NTT over every raised limb, one inner-product pass over all digits, and a mod-down
    /// whose forward NTT subtracts, scales by `P^-1` and adds on store.
    pub(super) fn key_switch_raw(
        &self,
        d_buf: &GpuBuffer<W>,
        d_off: usize,
        level: usize,
        key: &GpuSwitchingKey<W>,
        addend: Option<(&GpuBuffer<W>, usize)>,
    ) -> Result<GpuBuffer<W>> {
        let ext = self.mod_up(d_buf, d_off, level)?;
        self.key_switch_ext(d_buf, d_off, &ext, level, key, addend)
    }

    /// Limbs of [`Self::mod_up`]'s output: every digit's raised limbs, its own excluded.
    pub(super) fn ext_limbs(&self, level: usize) -> usize {
        let nq = level + 1;
        nq.div_ceil(self.alpha) * (nq + self.alpha) - nq
    }

    /// Key switching's mod-up of `d` (one NTT-form polynomial, `level + 1` limbs at word
    /// offset `d_off` of `d_buf`): each digit raised to the other primes of `Q_l P`, in NTT
    /// form, stored compactly ([`Self::ext_limbs`] limbs). Hoisted rotations share it.
    pub(super) fn mod_up(
        &self,
        d_buf: &GpuBuffer<W>,
        d_off: usize,
        level: usize,
    ) -> Result<GpuBuffer<W>> {
        let n = self.n;
        let nq = level + 1;
        let ndig = nq.div_ceil(self.alpha);
        // 1. The input in coefficient form (every digit's own limbs).
        let coeff = self.gpu.alloc::<W>(nq * n)?;
        let qlp = self.q_layout[level].addr(0);
        self.inverse(
            span(d_buf, d_off, nq * n),
            span(&coeff, 0, nq * n),
            1,
            nq as u32,
            0,
            qlp,
        )?;
        // 2. Mod-up: each digit raised to the other primes of Q_l P, stored compactly.
        let ext_limbs = self.ext_limbs(level);
        let ext = self.gpu.alloc::<W>(ext_limbs * n)?;
        let mut off = 0;
        for j in 0..ndig {
            let (lo, _) = self.ctx.accel().digit_primes(level, j);
            let c = &self.modup[level][j];
            self.convert(c, span(&coeff, lo * n, 0), span(&ext, off * n, 0), 1)?;
            off += c.m;
        }
        drop(coeff);
        // 3. One forward NTT over every raised limb.
        let es = span(&ext, 0, ext_limbs * n);
        self.forward(&Fwd {
            src: es,
            work: es,
            dst: es,
            npoly: 1,
            nl: ext_limbs as u32,
            limb0: 0,
            lp: self.ext_layout[level].addr(0),
            spread: None,
            subscale: None,
        })?;
        Ok(ext)
    }

    /// Key switching after [`Self::mod_up`]: the inner product of `d` (its digits' own limbs,
    /// at `d_off` of `d_buf`) and its raised limbs `ext` with `key`, then the mod-down, plus
    /// `addend`'s first polynomials.
    pub(super) fn key_switch_ext(
        &self,
        d_buf: &GpuBuffer<W>,
        d_off: usize,
        ext: &GpuBuffer<W>,
        level: usize,
        key: &GpuSwitchingKey<W>,
        addend: Option<(&GpuBuffer<W>, usize)>,
    ) -> Result<GpuBuffer<W>> {
        let mut acc = self.key_inner(d_buf, d_off, ext, level, key)?;
        self.mod_down(&mut acc, level, addend)
    }

    /// Key switching's inner product: `d`'s digits (their own limbs at `d_off` of `d_buf`, the
    /// raised ones in `ext`) times `key`, both halves over `Q_l P` in one buffer.
    fn key_inner(
        &self,
        d_buf: &GpuBuffer<W>,
        d_off: usize,
        ext: &GpuBuffer<W>,
        level: usize,
        key: &GpuSwitchingKey<W>,
    ) -> Result<GpuBuffer<W>> {
        if key.fingerprint != self.ctx.fingerprint() {
            return Err(GpuError::Mismatch(
                "switching key of other parameters than this GPU context".into(),
            ));
        }
        let n = self.n;
        let nq = level + 1;
        let nqp = nq + self.alpha;
        let ndig = nq.div_ceil(self.alpha);
        // 4. Inner product with the key, all digits per coefficient.
        let acc = self.gpu.alloc::<W>(2 * nqp * n)?;
        let count = (nqp as u64) << self.log_n;
        let block = self.gpu.block(256);
        let args = [
            d_buf.addr(d_off),
            ext.addr(0),
            key.data.addr(0),
            acc.addr(0),
            nqp as u64,
            nq as u64,
            self.alpha as u64,
            ndig as u64,
            (self.num_q + self.alpha) as u64,
            self.num_q as u64,
            self.qp_layout[level].addr(0),
            self.pt.addr(0),
            self.log_n as u64,
        ];
        self.flat("hk_key_inner", count, block, &args, None)?;
        Ok(acc)
    }

    /// The rescale merged into the mod-down (as the CPU's `Evaluator::with_merged_rescale`):
    /// `(P c + acc) / (q_l P)` for both halves, `c` the two polynomials at `c_off` of `c_buf`
    /// (NTT form at `level`), rounded once: `acc`'s `Q` limbs get `P c` added, its `q_l` and
    /// `P` limbs go to coefficient form and convert to `q_0 .. q_(l-1)`, and the forward NTT
    /// subtracts and scales on store. The result is over `Q_(l-1)`.
    fn mod_down_rescale(
        &self,
        acc: &mut GpuBuffer<W>,
        level: usize,
        c_buf: &GpuBuffer<W>,
        c_off: usize,
    ) -> Result<GpuBuffer<W>> {
        let Some(Some((conv_consts, scal))) = self.moddown_rs.get(level) else {
            return Err(GpuError::Invalid(
                "cannot rescale at level 0: no prime left to divide by".into(),
            ));
        };
        let n = self.n;
        let nq = level + 1;
        let nqp = nq + self.alpha;
        let pack = self.limb_pack(level, |i, _| i128::from(self.p_mod_q[i]))?;
        let pc = self.gpu.alloc::<W>(2 * nq * n)?;
        self.scalar_mul_raw(pc.addr(0), c_buf.addr(c_off), 2 * nq, level, &pack)?;
        for h in 0..2 {
            let a = acc.addr(h * nqp * n);
            self.elt(
                "hk_add",
                a,
                a,
                pc.addr(h * nq * n),
                nq,
                nq,
                self.q_layout[level].addr(0),
            )?;
        }
        drop(pc);
        // q_l directly precedes P in Q_l P: both divided out at once.
        self.divide_out(acc, level, level, (conv_consts, scal.addr(0)), None)
    }

    /// Relinearization with the rescale merged into its mod-down (one rounding): a
    /// three-polynomial ciphertext at level `l` to two polynomials at `l - 1`, the scale
    /// divided by `q_l`. Word for word the CPU's merged `relinearize_rescale`.
    pub fn relinearize_rescale(
        &self,
        ct: &GpuCiphertext<W>,
        key: &GpuSwitchingKey<W>,
    ) -> Result<GpuCiphertext<W>> {
        self.check_three(ct)?;
        let l = ct.level;
        if l == 0 {
            return Err(GpuError::Invalid(
                "cannot rescale at level 0: no prime left to divide by".into(),
            ));
        }
        let nl = (l + 1) * self.n;
        let ext = self.mod_up(&ct.data, 2 * nl, l)?;
        let mut acc = self.key_inner(&ct.data, 2 * nl, &ext, l, key)?;
        drop(ext);
        let out = self.mod_down_rescale(&mut acc, l, &ct.data, 0)?;
        Ok(self.derived(
            ct,
            out,
            2,
            l - 1,
            ct.scale / self.ctx.params().moduli()[l] as f64,
        ))
    }

    /// `(x - [x]_P) / P` for two polynomials over `Q_l P` (NTT form) in `acc`; returns them over
    /// `Q_l`, plus `addend`'s first polynomials.
    pub(super) fn mod_down(
        &self,
        acc: &mut GpuBuffer<W>,
        level: usize,
        addend: Option<(&GpuBuffer<W>, usize)>,
    ) -> Result<GpuBuffer<W>> {
        let scal = self.pinv_scal.addr(0);
        self.divide_out(acc, level, level + 1, (&self.moddown[level], scal), addend)
    }

    /// Divides both halves of `acc` (over `Q_l P`, NTT form) by the product of its primes
    /// after the first `keep`, rounded: those limbs to coefficient form in place, converted
    /// by `by.0` to the first `keep` primes, and a forward NTT that subtracts, scales by the
    /// pairs at `by.1` and adds `addend`'s first polynomials on store. The mod-down (`keep`
    /// the `l + 1` primes of `Q_l`) and the merged mod-down and rescale (`keep` `l`).
    fn divide_out(
        &self,
        acc: &mut GpuBuffer<W>,
        level: usize,
        keep: usize,
        by: (&ConvConsts, u64),
        addend: Option<(&GpuBuffer<W>, usize)>,
    ) -> Result<GpuBuffer<W>> {
        let n = self.n;
        let nqp = level + 1 + self.alpha;
        let accs = span(acc, 0, nqp * n);
        let qplp = self.qp_layout[level].addr(0);
        self.inverse(accs, accs, 2, (nqp - keep) as u32, keep as u32, qplp)?;
        let conv = self.gpu.alloc::<W>(2 * keep * n)?;
        let cs = span(&conv, 0, keep * n);
        self.convert(by.0, span(acc, keep * n, nqp * n), cs, 2)?;
        let out = self.gpu.alloc::<W>(2 * keep * n)?;
        let (add_span, add_np) = match addend {
            Some((b, np)) => (span(b, 0, keep * n), np as u32),
            None => (Span { addr: 0, stride: 0 }, 0),
        };
        self.forward(&Fwd {
            src: cs,
            work: cs,
            dst: span(&out, 0, keep * n),
            npoly: 2,
            nl: keep as u32,
            limb0: 0,
            lp: self.q_layout[keep - 1].addr(0),
            spread: None,
            subscale: Some(SubScale {
                orig: accs,
                scal: by.1,
                addend: add_span,
                addend_np: add_np,
            }),
        })?;
        Ok(out)
    }

    /// Key switching of one polynomial (for tests against `Context::key_switch`): `d` holds one
    /// NTT-form polynomial at `level`; returns `(c0, c1)` as one buffer of two polynomials.
    pub fn key_switch(
        &self,
        d: &GpuBuffer<W>,
        level: usize,
        key: &GpuSwitchingKey<W>,
    ) -> Result<GpuBuffer<W>> {
        let np = self.check_polys(d, level)?;
        if np != 1 {
            return Err(GpuError::Mismatch(
                "key switching takes one polynomial".into(),
            ));
        }
        self.key_switch_raw(d, 0, level, key, None)
    }

    /// A ciphertext of this context with three polynomials (what relinearization takes).
    fn check_three(&self, ct: &GpuCiphertext<W>) -> Result<()> {
        self.check_ct(ct)?;
        if ct.size != 3 {
            return Err(GpuError::Invalid(format!(
                "relinearize takes a three-polynomial ciphertext, got {}",
                ct.size
            )));
        }
        Ok(())
    }

    /// Relinearizes a three-polynomial ciphertext with the relinearization key.
    pub fn relinearize(
        &self,
        ct: &GpuCiphertext<W>,
        key: &GpuSwitchingKey<W>,
    ) -> Result<GpuCiphertext<W>> {
        self.check_three(ct)?;
        let nl = (ct.level + 1) * self.n;
        let out = self.key_switch_raw(&ct.data, 2 * nl, ct.level, key, Some((&ct.data, 2)))?;
        Ok(self.derived(ct, out, 2, ct.level, ct.scale))
    }

    /// Applies `X -> X^g` with the Galois key for `g`: permute both polynomials (NTT form),
    /// switch the permuted `c1`, add the permuted `c0` on the mod-down's store.
    pub fn apply_galois(
        &self,
        ct: &GpuCiphertext<W>,
        g: u64,
        key: &GpuSwitchingKey<W>,
    ) -> Result<GpuCiphertext<W>> {
        self.check_ct(ct)?;
        if ct.size != 2 {
            return Err(GpuError::Invalid(
                "rotations take a two-polynomial ciphertext; relinearize first".into(),
            ));
        }
        let perm = self.permutation(g)?;
        let nl = ct.level + 1;
        let permuted = self.permuted(&ct.data, 2 * nl, &perm)?;
        let out =
            self.key_switch_raw(&permuted, nl * self.n, ct.level, key, Some((&permuted, 1)))?;
        Ok(self.derived(ct, out, 2, ct.level, ct.scale))
    }

    /// The first `limbs` limbs of `src` (NTT form) permuted by `perm` (an automorphism).
    fn permuted(
        &self,
        src: &GpuBuffer<W>,
        limbs: usize,
        perm: &GpuBuffer<u32>,
    ) -> Result<GpuBuffer<W>> {
        let out = self.gpu.alloc::<W>(limbs * self.n)?;
        let count = (limbs as u64) << self.log_n;
        let block = self.gpu.block(256);
        let args = [
            out.addr(0),
            src.addr(0),
            perm.addr(0),
            limbs as u64,
            self.log_n as u64,
        ];
        self.flat("hk_permute", count, block, &args, None)?;
        Ok(out)
    }

    /// Hoisted automorphisms (Halevi-Shoup 2018, 4.2): one mod-up of `c_1` for all of `keys`
    /// (`(g, key)` pairs; `None` for the identity), then per element the raised digits and
    /// `c_0` permuted in NTT form, the inner product and the mod-down. An automorphism commutes
    /// with the raising up to the base conversion's small multiple of `Q`, so each result is
    /// as valid as [`Self::apply_galois`]'s (not word for word the same).
    pub fn apply_galois_many(
        &self,
        ct: &GpuCiphertext<W>,
        keys: &[(u64, Option<&GpuSwitchingKey<W>>)],
    ) -> Result<Vec<GpuCiphertext<W>>> {
        self.check_ct(ct)?;
        if ct.size != 2 {
            return Err(GpuError::Invalid(
                "rotations take a two-polynomial ciphertext; relinearize first".into(),
            ));
        }
        let nl = ct.level + 1;
        let pw = nl * self.n;
        let ext = if keys.iter().any(|(_, k)| k.is_some()) {
            Some(self.mod_up(&ct.data, pw, ct.level)?)
        } else {
            None
        };
        let ext_limbs = self.ext_limbs(ct.level);
        let mut out = Vec::with_capacity(keys.len());
        for &(g, key) in keys {
            let (Some(key), Some(ext)) = (key, ext.as_ref()) else {
                out.push(ct.clone());
                continue;
            };
            let perm = self.permutation(g)?;
            let permuted = self.permuted(&ct.data, 2 * nl, &perm)?;
            let pext = self.permuted(ext, ext_limbs, &perm)?;
            let ks =
                self.key_switch_ext(&permuted, pw, &pext, ct.level, key, Some((&permuted, 1)))?;
            out.push(self.derived(ct, ks, 2, ct.level, ct.scale));
        }
        Ok(out)
    }

    /// The seed-003 baseline: rescale with one thread block per polynomial, NTTs in global
    /// memory, emulated 64-bit products (64-bit words only).
    pub fn rescale_naive(&self, ct: &GpuCiphertext<W>) -> Result<GpuCiphertext<W>> {
        self.check_ct(ct)?;
        if W::BITS != 64 {
            return Err(GpuError::Invalid(
                "the naive baseline exists for 64-bit words only".into(),
            ));
        }
        let l = ct.level;
        if l == 0 {
            return Err(GpuError::Invalid("cannot rescale at level 0".into()));
        }
        let n = self.n;
        let out = self.gpu.alloc::<W>(ct.size * l * n)?;
        let scratch = self.gpu.alloc::<W>(ct.size * 2 * n)?;
        let args = [
            ct.data.addr(0),
            out.addr(0),
            scratch.addr(0),
            (l + 1) as u64,
            self.q_layout[l].addr(0),
            self.roots.addr(0),
            self.iroots.addr(0),
            self.pt.addr(0),
            self.log_n as u64,
            self.rescale_scal[l].addr(0),
        ];
        self.gpu.launch(
            "hk_naive_rescale_u64",
            (ct.size as u32, 1),
            self.gpu.block(1024),
            0,
            &args,
            None,
        )?;
        drop(scratch);
        Ok(self.derived(
            ct,
            out,
            ct.size,
            l - 1,
            ct.scale / self.ctx.params().moduli()[l] as f64,
        ))
    }
}

/// Evaluation keys on the GPU, with the operations that need them. Cheap to clone: the keys
/// are shared.
#[derive(Clone)]
pub struct GpuEvaluator<W: GpuWord> {
    ctx: Arc<GpuContext<W>>,
    relin: Option<Arc<GpuSwitchingKey<W>>>,
    galois: Arc<HashMap<u64, GpuSwitchingKey<W>>>,
    /// Whether `PolyOps::relinearize_rescale` merges the rescale into the mod-down.
    merged: bool,
}

impl<W: GpuWord> std::fmt::Debug for GpuEvaluator<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuEvaluator")
            .field("relin", &self.relin.is_some())
            .field("galois", &self.galois.len())
            .finish()
    }
}

impl<W: GpuWord> GpuEvaluator<W> {
    /// Uploads the relinearization key and every Galois key of `keys`.
    pub fn new(ctx: &Arc<GpuContext<W>>, keys: &EvaluationKeys<W>) -> Result<Self> {
        let relin = if keys.has_relin() {
            Some(Arc::new(ctx.upload_key(keys.relin_key()?)?))
        } else {
            None
        };
        let mut galois = HashMap::new();
        for g in keys.galois_elements() {
            if let Some(k) = keys.galois_key(g) {
                galois.insert(g, ctx.upload_key(k)?);
            }
        }
        Ok(Self {
            ctx: Arc::clone(ctx),
            relin,
            galois: Arc::new(galois),
            merged: false,
        })
    }

    /// This evaluator (its keys shared) with [`heloom_ckks::PolyOps::relinearize_rescale`]
    /// merged into one mod-down ([`Self::relinearize_rescale`]) or not (the default: a
    /// relinearization, then a rescale, word for word the CPU's default evaluator).
    pub fn with_merged_rescale(&self, on: bool) -> Self {
        Self {
            merged: on,
            ..self.clone()
        }
    }

    /// Whether [`Self::with_merged_rescale`] is on.
    pub fn merged_rescale(&self) -> bool {
        self.merged
    }

    /// Relinearizes a three-polynomial ciphertext and rescales it in one mod-down by `q_l P`
    /// ([`GpuContext::relinearize_rescale`]).
    pub fn relinearize_rescale(&self, ct: &GpuCiphertext<W>) -> Result<GpuCiphertext<W>> {
        self.ctx.relinearize_rescale(ct, self.relin_key()?)
    }

    /// The GPU context.
    pub fn context(&self) -> &Arc<GpuContext<W>> {
        &self.ctx
    }

    /// Bytes of keys on the device.
    pub fn key_bytes(&self) -> usize {
        self.relin.as_ref().map_or(0, |k| k.device_bytes())
            + self
                .galois
                .values()
                .map(|k| k.device_bytes())
                .sum::<usize>()
    }

    pub(super) fn relin_key(&self) -> Result<&GpuSwitchingKey<W>> {
        self.relin.as_deref().ok_or_else(|| {
            GpuError::Invalid("no relinearization key; generate the key set with one".into())
        })
    }

    /// Relinearizes a three-polynomial ciphertext.
    pub fn relinearize(&self, ct: &GpuCiphertext<W>) -> Result<GpuCiphertext<W>> {
        self.ctx.relinearize(ct, self.relin_key()?)
    }

    /// `a * b`, relinearized.
    pub fn multiply_relin(
        &self,
        a: &GpuCiphertext<W>,
        b: &GpuCiphertext<W>,
    ) -> Result<GpuCiphertext<W>> {
        let key = self.relin_key()?;
        let m = self.ctx.multiply(a, b)?;
        self.ctx.relinearize(&m, key)
    }

    /// `a * b`, relinearized and rescaled.
    pub fn multiply_relin_rescale(
        &self,
        a: &GpuCiphertext<W>,
        b: &GpuCiphertext<W>,
    ) -> Result<GpuCiphertext<W>> {
        let r = self.multiply_relin(a, b)?;
        self.ctx.rescale(&r)
    }

    /// Complex conjugation of every slot, with the conjugation key (Galois element `2N - 1`).
    pub fn conjugate(&self, ct: &GpuCiphertext<W>) -> Result<GpuCiphertext<W>> {
        let g = heloom_math::automorphism::galois_element_conjugate(self.ctx.n());
        let key = self.galois.get(&g).ok_or_else(|| {
            GpuError::Ckks(heloom_ckks::CkksError::MissingKey {
                key: heloom_ckks::MissingKeyKind::Galois { element: g },
                hint: "no conjugation key; generate the key set with one".into(),
            })
        })?;
        self.ctx.apply_galois(ct, g, key)
    }

    /// Rotations of `ct` by every step of `steps` (in that order), hoisted: one mod-up shared
    /// by all of them ([`GpuContext::apply_galois_many`]).
    pub fn rotate_many(
        &self,
        ct: &GpuCiphertext<W>,
        steps: &[i64],
    ) -> Result<Vec<GpuCiphertext<W>>> {
        let mut keys = Vec::with_capacity(steps.len());
        for &step in steps {
            let g = galois_element_for_step(self.ctx.n(), step);
            keys.push((
                g,
                if g == 1 {
                    None
                } else {
                    Some(self.galois_key(g, step)?)
                },
            ));
        }
        self.ctx.apply_galois_many(ct, &keys)
    }

    fn galois_key(&self, g: u64, step: i64) -> Result<&GpuSwitchingKey<W>> {
        self.galois.get(&g).ok_or_else(|| {
            GpuError::Ckks(heloom_ckks::CkksError::MissingKey {
                key: heloom_ckks::MissingKeyKind::Galois { element: g },
                hint: format!(
                    "no Galois key for rotation step {step} (element {g}); generate keys with it"
                ),
            })
        })
    }

    /// Rotates the slots left by `step` (right when negative).
    pub fn rotate(&self, ct: &GpuCiphertext<W>, step: i64) -> Result<GpuCiphertext<W>> {
        let g = galois_element_for_step(self.ctx.n(), step);
        if g == 1 {
            return self.ctx.drop_to_level(ct, ct.level);
        }
        let key = self.galois_key(g, step)?;
        self.ctx.apply_galois(ct, g, key)
    }
}
