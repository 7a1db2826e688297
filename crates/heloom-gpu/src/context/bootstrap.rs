//! CKKS bootstrapping on the GPU, every step device-resident: ModRaise (the level-0 limb to
//! coefficient form, then one forward NTT whose load spreads it, centred, to every prime, the
//! rescale kernel's spread mode), CoeffToSlot and SlotToCoeff with the diagonals uploaded once
//! ([`GpuPlaintext`], [`LinearTransform::apply_with`]), EvalMod as the CPU's very circuit
//! ([`Bootstrapper::eval_mod_on`], each relinearization's rescale merged into its mod-down),
//! baby-step rotations hoisted ([`GpuContext::apply_galois_many`]), and sparse-secret
//! encapsulation with the keys on the device. The host only sequences launches: nothing is
//! copied between host and device after setup, and the result is the CPU's word for word.

use super::*;
use heloom_ckks::circuits::{BootstrapTimes, Bootstrapper, LinearTransform, PlainOps};
use heloom_ckks::Plaintext;
use num_complex::Complex64;
use std::time::Instant;

/// A plaintext on the device: one polynomial in NTT form at `level`, with its scale.
pub struct GpuPlaintext<W: GpuWord> {
    data: GpuBuffer<W>,
    level: usize,
    scale: f64,
    slots: usize,
    fingerprint: u64,
}

impl<W: GpuWord> std::fmt::Debug for GpuPlaintext<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuPlaintext")
            .field("level", &self.level)
            .field("scale", &self.scale)
            .finish()
    }
}

impl<W: GpuWord> GpuPlaintext<W> {
    /// Level.
    pub fn level(&self) -> usize {
        self.level
    }
    /// Scale of the encoded values.
    pub fn scale(&self) -> f64 {
        self.scale
    }
    /// Bytes on the device.
    pub fn device_bytes(&self) -> usize {
        self.data.len() * W::BYTES
    }
}

impl<W: GpuWord> GpuContext<W> {
    /// Uploads an encoded plaintext (NTT form, as the CPU encoder makes them).
    pub fn upload_plaintext(&self, pt: &Plaintext<W>) -> Result<GpuPlaintext<W>> {
        if pt.poly().form() != Form::Ntt {
            return Err(GpuError::Invalid(
                "upload plaintexts in NTT form (as Context::encode_complex_at makes them)".into(),
            ));
        }
        Ok(GpuPlaintext {
            data: self.upload_polys(&[pt.poly()], pt.level())?,
            level: pt.level(),
            scale: pt.scale(),
            slots: pt.slots(),
            fingerprint: self.ctx.fingerprint(),
        })
    }

    fn check_plain(&self, ct: &GpuCiphertext<W>, pt: &GpuPlaintext<W>) -> Result<()> {
        self.check_ct(ct)?;
        if pt.fingerprint != self.ctx.fingerprint() {
            return Err(GpuError::Mismatch(
                "plaintext of other parameters than this GPU context".into(),
            ));
        }
        if pt.level < ct.level {
            return Err(GpuError::Invalid(format!(
                "the plaintext is at level {}, below the ciphertext's {}; encode it at the ciphertext's level",
                pt.level, ct.level
            )));
        }
        Ok(())
    }

    /// Kernel `name` (`hk_mul` or `hk_mul_add`) on each polynomial of `ct` and the plaintext's
    /// first `level + 1` limbs, into the polynomials of `out`.
    fn each_poly_times(
        &self,
        name: &str,
        out: &GpuBuffer<W>,
        ct: &GpuCiphertext<W>,
        pt: &GpuPlaintext<W>,
    ) -> Result<()> {
        let nl = ct.level + 1;
        let pw = nl * self.n;
        for p in 0..ct.size {
            self.elt(
                name,
                out.addr(p * pw),
                ct.data.addr(p * pw),
                pt.data.addr(0),
                nl,
                nl,
                self.q_layout[ct.level].addr(0),
            )?;
        }
        Ok(())
    }

    /// `ct * pt` (every polynomial times the plaintext's first `level + 1` limbs); the scales
    /// multiply.
    pub fn multiply_plain(
        &self,
        ct: &GpuCiphertext<W>,
        pt: &GpuPlaintext<W>,
    ) -> Result<GpuCiphertext<W>> {
        self.check_plain(ct, pt)?;
        let out = self.gpu.alloc::<W>(ct.size * (ct.level + 1) * self.n)?;
        self.each_poly_times("hk_mul", &out, ct, pt)?;
        Ok(GpuCiphertext {
            data: Arc::new(out),
            scale: ct.scale * pt.scale,
            slots: ct.slots.max(pt.slots),
            ..ct.clone()
        })
    }

    /// `acc += ct * pt` in one pass over `acc` when it is this product's level, size and scale
    /// and owns its buffer; else the product, added by [`Self::add`]'s rules.
    pub fn multiply_plain_accumulate(
        &self,
        acc: &mut Option<GpuCiphertext<W>>,
        ct: &GpuCiphertext<W>,
        pt: &GpuPlaintext<W>,
    ) -> Result<()> {
        self.check_plain(ct, pt)?;
        let fits = |a: &GpuCiphertext<W>| {
            a.level == ct.level
                && a.size == ct.size
                && a.fingerprint == ct.fingerprint
                && self.scales_match(a.scale, ct.scale * pt.scale)
        };
        if let Some(a) = acc.as_mut().filter(|a| fits(a)) {
            if let Some(buf) = Arc::get_mut(&mut a.data) {
                self.each_poly_times("hk_mul_add", buf, ct, pt)?;
                a.slots = a.slots.max(ct.slots).max(pt.slots);
                return Ok(());
            }
        }
        let t = self.multiply_plain(ct, pt)?;
        *acc = Some(match acc.take() {
            Some(a) => self.add(&a, &t)?,
            None => t,
        });
        Ok(())
    }

    /// `i` as an exact plaintext at `level` (the monomial `X^(N/2)`, the CPU's
    /// `Evaluator::multiply_by_i` factor), uploaded.
    pub fn i_plaintext(&self, level: usize) -> Result<GpuPlaintext<W>> {
        let basis = self.ctx.q_basis(level)?;
        let mut p = self
            .ctx
            .encoder()
            .encode_constant(Complex64::new(0.0, 1.0), 1.0, basis)?;
        basis.forward(&mut p)?;
        Ok(GpuPlaintext {
            data: self.upload_polys(&[&p], level)?,
            level,
            scale: 1.0,
            slots: 0,
            fingerprint: self.ctx.fingerprint(),
        })
    }

    /// `(c_0 + ks_0(c_1), ks_1(c_1))`: `ct` switched under `key` (no automorphism).
    pub fn switch_key(
        &self,
        ct: &GpuCiphertext<W>,
        key: &GpuSwitchingKey<W>,
    ) -> Result<GpuCiphertext<W>> {
        self.check_ct(ct)?;
        if ct.size != 2 {
            return Err(GpuError::Invalid(
                "key switching takes a two-polynomial ciphertext; relinearize first".into(),
            ));
        }
        let nl = ct.level + 1;
        let out = self.key_switch_raw(&ct.data, nl * self.n, ct.level, key, Some((&ct.data, 1)))?;
        Ok(self.derived(ct, out, 2, ct.level, ct.scale))
    }

    /// ModRaise's lift: a level-0 ciphertext's polynomials as centred integers modulo every
    /// prime up to `top` (one inverse NTT of the q_0 limb, one forward NTT that spreads it on
    /// load), labelled `scale`. It decrypts to `m + q_0 I`.
    pub fn raise_from_level_0(
        &self,
        low: &GpuCiphertext<W>,
        top: usize,
        scale: f64,
    ) -> Result<GpuCiphertext<W>> {
        self.check_ct(low)?;
        self.check_level(top)?;
        if low.level != 0 {
            return Err(GpuError::Invalid(format!(
                "ModRaise lifts level-0 ciphertexts; this one is at level {} (drop it first)",
                low.level
            )));
        }
        let (n, np) = (self.n, low.size);
        let coeff = self.gpu.alloc::<W>(np * n)?;
        let cs = span(&coeff, 0, n);
        self.inverse(
            span(&low.data, 0, n),
            cs,
            np as u32,
            1,
            0,
            self.q_layout[0].addr(0),
        )?;
        let out = self.spread_forward(cs, np, (top + 1, self.q_layout[top].addr(0)), 0, None)?;
        Ok(self.derived(low, out, np, top, scale))
    }
}

impl<W: GpuWord> PlainOps for GpuEvaluator<W> {
    type Pt = GpuPlaintext<W>;
    fn multiply_plain_accumulate(
        &self,
        acc: &mut Option<GpuCiphertext<W>>,
        ct: &GpuCiphertext<W>,
        pt: &GpuPlaintext<W>,
    ) -> heloom_ckks::Result<()> {
        self.context()
            .multiply_plain_accumulate(acc, ct, pt)
            .map_err(crate::polyops::to_ckks)
    }
}

/// A [`Bootstrapper`] on the GPU: its transforms' diagonals and sparse-secret keys uploaded
/// once; [`Self::bootstrap`] runs ModRaise, CoeffToSlot, EvalMod and SlotToCoeff on
/// device-resident ciphertexts with a [`GpuEvaluator`] holding the bootstrapper's keys
/// (relinearization, conjugation, [`Bootstrapper::rotation_steps`]). Full and sparse packing.
pub struct GpuBootstrapper<W: GpuWord> {
    boot: Bootstrapper<W>,
    ctx: Arc<GpuContext<W>>,
    cts: Vec<Vec<GpuPlaintext<W>>>,
    stc: Vec<Vec<GpuPlaintext<W>>>,
    /// `(to_sparse, from_sparse)`.
    sparse: Option<(GpuSwitchingKey<W>, GpuSwitchingKey<W>)>,
    /// `i` at the levels [`Self::bootstrap`] multiplies by it.
    i_at: HashMap<usize, GpuPlaintext<W>>,
}

impl<W: GpuWord> std::fmt::Debug for GpuBootstrapper<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuBootstrapper")
            .field("slots", &self.boot.slots())
            .field("device_bytes", &self.device_bytes())
            .finish()
    }
}

fn upload_transforms<W: GpuWord>(
    ctx: &GpuContext<W>,
    ts: &[LinearTransform<W>],
) -> Result<Vec<Vec<GpuPlaintext<W>>>> {
    ts.iter()
        .map(|t| {
            t.plaintexts()?
                .iter()
                .map(|p| ctx.upload_plaintext(p))
                .collect()
        })
        .collect()
}

impl<W: GpuWord> GpuBootstrapper<W> {
    /// Uploads `boot`'s transforms (and sparse-secret keys, when set) to `ctx`'s GPU.
    pub fn new(ctx: &Arc<GpuContext<W>>, boot: &Bootstrapper<W>) -> Result<Self> {
        if boot.context().fingerprint() != ctx.ctx.fingerprint() {
            return Err(GpuError::Mismatch(
                "the bootstrapper was built for other parameters than this GPU context".into(),
            ));
        }
        let cts = upload_transforms(ctx, boot.coeffs_to_slots_transforms())?;
        let stc = upload_transforms(ctx, boot.slots_to_coeffs_transforms())?;
        let sparse = match boot.sparse_keys() {
            Some(k) => Some((
                ctx.upload_key(&k.to_sparse)?,
                ctx.upload_key(&k.from_sparse)?,
            )),
            None => None,
        };
        // CoeffToSlot's output level and EvalMod's: where the halves meet i.
        let top = ctx.ctx.max_level();
        let cts_out = top - boot.coeffs_to_slots_transforms().len();
        let stc_in = boot.output_level() + boot.slots_to_coeffs_transforms().len();
        let mut i_at = HashMap::new();
        for l in [cts_out, stc_in] {
            i_at.insert(l, ctx.i_plaintext(l)?);
        }
        Ok(Self {
            boot: boot.clone(),
            ctx: Arc::clone(ctx),
            cts,
            stc,
            sparse,
            i_at,
        })
    }

    /// The CPU bootstrapper this one runs.
    pub fn bootstrapper(&self) -> &Bootstrapper<W> {
        &self.boot
    }

    /// Bytes of diagonals, keys and constants on the device (the evaluator's keys not counted).
    pub fn device_bytes(&self) -> usize {
        let pts: usize = self
            .cts
            .iter()
            .chain(&self.stc)
            .flatten()
            .chain(self.i_at.values())
            .map(GpuPlaintext::device_bytes)
            .sum();
        let keys = self
            .sparse
            .as_ref()
            .map_or(0, |(a, b)| a.device_bytes() + b.device_bytes());
        pts + keys
    }

    fn times_i(&self, ct: &GpuCiphertext<W>) -> Result<GpuCiphertext<W>> {
        let pt = self.i_at.get(&ct.level).ok_or_else(|| {
            GpuError::Invalid(format!(
                "internal: no i constant at level {} on the device",
                ct.level
            ))
        })?;
        let mut out = self.ctx.multiply_plain(ct, pt)?;
        out.scale = ct.scale;
        out.slots = ct.slots;
        Ok(out)
    }

    fn check_ev(&self, ev: &GpuEvaluator<W>) -> Result<()> {
        if !Arc::ptr_eq(ev.context(), &self.ctx) {
            return Err(GpuError::Mismatch(
                "the evaluator belongs to another GPU context than the bootstrapper".into(),
            ));
        }
        Ok(())
    }

    /// ModRaise on the device: [`Bootstrapper::mod_raise`]'s steps (message factor,
    /// encapsulation under the sparse secret and back), the lift by
    /// [`GpuContext::raise_from_level_0`].
    pub fn mod_raise(
        &self,
        ev: &GpuEvaluator<W>,
        ct: &GpuCiphertext<W>,
    ) -> Result<GpuCiphertext<W>> {
        self.check_ev(ev)?;
        let ctx = &self.ctx;
        let mut low = ctx.drop_to_level(ct, 0)?;
        if low.size != 2 {
            return Err(GpuError::Invalid(format!(
                "bootstrapping takes a ciphertext of 2 polynomials; this one has {} (relinearize it first)",
                low.size
            )));
        }
        self.boot.check_raise_scale(low.scale)?;
        let factor = self.boot.message_factor();
        if factor > 1 {
            low = ctx.multiply_const_exact(&low, i128::from(factor))?;
        }
        if let Some((to, _)) = &self.sparse {
            low = ctx.switch_key(&low, to)?;
        }
        let raised = ctx.raise_from_level_0(&low, ctx.ctx.max_level(), self.boot.eval_scale())?;
        match &self.sparse {
            Some((_, from)) => ctx.switch_key(&raised, from),
            None => Ok(raised),
        }
    }

    fn transform(
        &self,
        ev: &GpuEvaluator<W>,
        t: &LinearTransform<W>,
        pts: &[GpuPlaintext<W>],
        v: &GpuCiphertext<W>,
    ) -> Result<GpuCiphertext<W>> {
        let p = t.apply_with(ev, v, pts).map_err(GpuError::Ckks)?;
        self.ctx.rescale(&p)
    }

    fn eval_mod_real(
        &self,
        ev: &GpuEvaluator<W>,
        ct: &GpuCiphertext<W>,
    ) -> Result<GpuCiphertext<W>> {
        // Each product's rescale merged into its relinearization's mod-down, as on the CPU.
        let merged = ev.with_merged_rescale(true);
        let m = self.boot.eval_mod_on(&merged, ct).map_err(GpuError::Ckks)?;
        self.ctx.add(&m, &ev.conjugate(&m)?)
    }

    /// Bootstraps `ct` on the device: the values at [`Bootstrapper::output_level`] with `ct`'s
    /// scale, word for word [`Bootstrapper::bootstrap`] on the CPU (the same circuit with the
    /// same hoisted rotations and merged rescales).
    pub fn bootstrap(
        &self,
        ev: &GpuEvaluator<W>,
        ct: &GpuCiphertext<W>,
    ) -> Result<GpuCiphertext<W>> {
        Ok(self.bootstrap_timed(ev, ct, false)?.0)
    }

    /// [`Self::bootstrap`] with each phase's wall time; `sync` waits for the GPU at each
    /// phase's end (accurate phases; without it the launches overlap the host's sequencing
    /// and only the total, once synchronized, is exact).
    pub fn bootstrap_timed(
        &self,
        ev: &GpuEvaluator<W>,
        ct: &GpuCiphertext<W>,
        sync: bool,
    ) -> Result<(GpuCiphertext<W>, BootstrapTimes)> {
        self.check_ev(ev)?;
        let slots = self.boot.slots();
        if ct.slots != slots {
            return Err(GpuError::Invalid(format!(
                "this bootstrapper handles ciphertexts of {slots} slots; this one holds {} (make one with Bootstrapper::with_slots for that count)",
                ct.slots
            )));
        }
        let gpu = self.ctx.gpu();
        let lap = |t: &mut Instant| -> Result<f64> {
            if sync {
                gpu.synchronize()?;
            }
            let s = t.elapsed().as_secs_f64();
            *t = Instant::now();
            Ok(s)
        };
        let scale = ct.scale;
        let mut times = BootstrapTimes::default();
        let mut t = Instant::now();
        let raised = self.mod_raise(ev, ct)?;
        times.mod_raise_s = lap(&mut t)?;
        let full = self.ctx.n() / 2;
        let out = if slots < full {
            self.bootstrap_sparse(ev, raised, scale, &mut times, &mut t, &lap)?
        } else {
            let mut a = raised;
            for (tr, pts) in self.boot.coeffs_to_slots_transforms().iter().zip(&self.cts) {
                a = self.transform(ev, tr, pts, &a)?;
            }
            let ac = ev.conjugate(&a)?;
            let re = self.ctx.add(&a, &ac)?;
            let im = self.times_i(&self.ctx.sub(&ac, &a)?)?;
            times.coeffs_to_slots_s = lap(&mut t)?;
            let mut re = self.eval_mod_real(ev, &re)?;
            let mut im = self.eval_mod_real(ev, &im)?;
            re.scale = scale;
            im.scale = scale;
            times.eval_mod_s = lap(&mut t)?;
            let mut w = self.ctx.add(&re, &self.times_i(&im)?)?;
            for (tr, pts) in self.boot.slots_to_coeffs_transforms().iter().zip(&self.stc) {
                w = self.transform(ev, tr, pts, &w)?;
            }
            w
        };
        gpu.synchronize()?;
        times.slots_to_coeffs_s = t.elapsed().as_secs_f64();
        Ok((out, times))
    }

    /// Sparse packing, as the CPU's: the subring projection, CoeffToSlot with the halves packed
    /// into `2n` slots, one EvalMod, SlotToCoeff on the halves recombined. Leaves the
    /// SlotToCoeff lap to the caller.
    fn bootstrap_sparse(
        &self,
        ev: &GpuEvaluator<W>,
        mut a: GpuCiphertext<W>,
        scale: f64,
        times: &mut BootstrapTimes,
        t: &mut Instant,
        lap: &dyn Fn(&mut Instant) -> Result<f64>,
    ) -> Result<GpuCiphertext<W>> {
        let ctx = &self.ctx;
        let n = self.boot.slots();
        let full = ctx.n() / 2;
        a.slots = full;
        let mut step = n;
        while step < full {
            let r = ev.rotate(&a, step as i64)?;
            a = ctx.add(&a, &r)?;
            step *= 2;
        }
        a.slots = n;
        let cts = self.boot.coeffs_to_slots_transforms();
        for (g, (tr, pts)) in cts.iter().zip(&self.cts).enumerate() {
            if g + 1 == cts.len() {
                // The last level writes the lower half of 2n slots only.
                a.slots = 2 * n;
            }
            a = self.transform(ev, tr, pts, &a)?;
        }
        let ac = ev.conjugate(&a)?;
        let re = ctx.add(&a, &ac)?;
        let im = self.times_i(&ctx.sub(&ac, &a)?)?;
        let back = -(n as i64);
        let w = ctx.add(&re, &ev.rotate(&im, back)?)?;
        times.coeffs_to_slots_s = lap(t)?;
        let mut w = self.eval_mod_real(ev, &w)?;
        w.scale = scale;
        times.eval_mod_s = lap(t)?;
        w = ctx.add(&w, &self.times_i(&ev.rotate(&w, back)?)?)?;
        for (g, (tr, pts)) in self
            .boot
            .slots_to_coeffs_transforms()
            .iter()
            .zip(&self.stc)
            .enumerate()
        {
            w = self.transform(ev, tr, pts, &w)?;
            if g == 0 {
                w = ctx.add(&w, &ev.rotate(&w, back)?)?;
                w.slots = n;
            }
        }
        Ok(w)
    }
}
