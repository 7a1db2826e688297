//! Host <-> device transfers: ciphertexts, switching keys and polynomials, checked against
//! the context's parameters.

use super::*;

impl<W: GpuWord> GpuContext<W> {
    /// Uploads a ciphertext of this context.
    pub fn upload(&self, ct: &Ciphertext<W>) -> Result<GpuCiphertext<W>> {
        if ct.fingerprint() != self.ctx.fingerprint() {
            return Err(GpuError::Mismatch(
                "the ciphertext was made for other parameters than this GPU context".into(),
            ));
        }
        let mut words = Vec::with_capacity(ct.size() * (ct.level() + 1) * self.n);
        for p in ct.polys() {
            words.extend_from_slice(p.as_slice());
        }
        Ok(GpuCiphertext {
            data: Arc::new(self.gpu.upload(&words)?),
            size: ct.size(),
            level: ct.level(),
            scale: ct.scale(),
            slots: ct.slots(),
            fingerprint: ct.fingerprint(),
        })
    }

    /// Downloads a ciphertext (waits for the work that computes it).
    pub fn download(&self, ct: &GpuCiphertext<W>) -> Result<Ciphertext<W>> {
        let words = self.gpu.download(&ct.data)?;
        let basis = self.ctx.q_basis(ct.level)?;
        let limb_words = (ct.level + 1) * self.n;
        let polys = words
            .chunks_exact(limb_words)
            .map(|w| {
                let limbs: Vec<&[W]> = w.chunks_exact(self.n).collect();
                basis.poly_from_limbs(&limbs, Form::Ntt)
            })
            .collect::<std::result::Result<Vec<RnsPoly<W>>, _>>()?;
        Ok(self
            .ctx
            .ciphertext_from_polys(polys, ct.level, ct.scale, ct.slots)?)
    }

    /// Uploads a switching key (relinearization or Galois) of this context.
    pub fn upload_key(&self, key: &SwitchingKey<W>) -> Result<GpuSwitchingKey<W>> {
        if key.fingerprint() != self.ctx.fingerprint() {
            return Err(GpuError::Mismatch(
                "the switching key was made for other parameters than this GPU context".into(),
            ));
        }
        let mut words = Vec::new();
        for j in 0..key.dnum() {
            let (b, a) = key
                .digit(j)
                .ok_or_else(|| GpuError::Mismatch("switching key digit missing".into()))?;
            words.extend_from_slice(b.as_slice());
            words.extend_from_slice(a.as_slice());
        }
        let expect = key.dnum() * 2 * (self.num_q + self.alpha) * self.n;
        if words.len() != expect || key.dnum() != self.ctx.params().dnum() {
            return Err(GpuError::Mismatch(
                "switching key has the wrong shape for these parameters".into(),
            ));
        }
        Ok(GpuSwitchingKey {
            data: self.gpu.upload(&words)?,
            dnum: key.dnum(),
            fingerprint: key.fingerprint(),
        })
    }

    /// Uploads `polys` polynomials over `q_0..q_level` (NTT or coefficient form alike) as one
    /// buffer, for the raw NTT entry points.
    pub fn upload_polys(&self, polys: &[&RnsPoly<W>], level: usize) -> Result<GpuBuffer<W>> {
        self.check_level(level)?;
        let basis = self.ctx.q_basis(level)?;
        let mut words = Vec::new();
        for p in polys {
            if !basis.owns(p) {
                return Err(GpuError::Mismatch(format!(
                    "polynomial is not over q_0..q_{level} of this context"
                )));
            }
            words.extend_from_slice(p.as_slice());
        }
        self.gpu.upload(&words)
    }

    pub(super) fn check_polys(&self, buf: &GpuBuffer<W>, level: usize) -> Result<u32> {
        self.check_level(level)?;
        let per = (level + 1) * self.n;
        if buf.is_empty() || !buf.len().is_multiple_of(per) {
            return Err(GpuError::Mismatch(format!(
                "buffer of {} words is not a whole number of polynomials at level {level}",
                buf.len()
            )));
        }
        Ok((buf.len() / per) as u32)
    }
}
