//! The CKKS context: parameters plus everything precomputed from them (RNS bases per level, NTT
//! tables, base converters for key switching, rescaling constants, the encoder).

use crate::ciphertext::{Ciphertext, Plaintext};
use crate::encoder::Encoder;
use crate::error::{CkksError, Result};
use crate::params::CkksParameters;
use heloom_math::automorphism::NttPermutation;
use heloom_math::rns::BasisConverter;
use heloom_math::scaling::{ModDown, Rescaler};
use heloom_math::{Backend, BackendChoice, BufferPool, Form, Modulus, RnsBasis, RnsPoly, Word};
use num_complex::Complex64;
use std::collections::HashMap;
use std::sync::{Arc, RwLock};

/// Parameters and precomputations for one word size. Cheap to share (`Arc`); every key,
/// ciphertext and plaintext made with it carries its parameter fingerprint.
#[derive(Debug)]
pub struct Context<W: Word> {
    params: CkksParameters,
    full: RnsBasis<W>,
    q: Vec<RnsBasis<W>>,
    qp: Vec<RnsBasis<W>>,
    encoder: Encoder,
    pub(crate) modup: Vec<Vec<BasisConverter<W>>>,
    /// Mod-down from `Q_l P` to `Q_l`, per level `l`.
    pub(crate) moddown: Vec<ModDown<W>>,
    /// Mod-down by `q_l P` from `Q_l P` (index `l - 1`, for `l >= 1`): key switching and the
    /// rescale that follows it in one division ([`Self::moddown_rescale`]).
    pub(crate) moddown_rescale: Vec<ModDown<W>>,
    p_mod_q: Vec<u64>,
    /// Division by `q_l`, per level `l >= 1` (at index `l - 1`).
    pub(crate) rescalers: Vec<Rescaler<W>>,
    perms: RwLock<HashMap<u64, Arc<NttPermutation>>>,
    /// Recycled scratch polynomials of key switching (raised digits, inner-product sums).
    pool: BufferPool<W>,
}

impl<W: Word> Context<W> {
    /// Precomputes everything for `params` on the fastest SIMD backend this CPU has for their
    /// primes. Errors when `params.word_bits()` differs from `W`.
    pub fn new(params: CkksParameters) -> Result<Arc<Self>> {
        Self::with_backend(params, BackendChoice::Auto)
    }

    /// [`Self::new`] on a chosen SIMD backend: an execution choice, not part of the parameters
    /// (objects move freely between contexts of equal parameters on different backends).
    /// Errors when the backend cannot run here or cannot run these primes.
    pub fn with_backend(params: CkksParameters, backend: BackendChoice) -> Result<Arc<Self>> {
        // Large polynomials are freed and reallocated all the time: keep freed memory mapped
        // (mimalloc, which holds every polynomial buffer, and glibc for the rest).
        heloom_pool::retain_freed_memory();
        if params.word_bits() != W::BITS {
            return Err(CkksError::InvalidParameters(format!(
                "parameters are for {}-bit words but the context was built for {}-bit words",
                params.word_bits(),
                W::BITS
            )));
        }
        let n = params.n();
        let big_l = params.max_level();
        let alpha = params.alpha();
        let all: Vec<u64> = params.qp_moduli().collect();
        let full = RnsBasis::<W>::with_backend(n, &all, backend)?;
        let num_q = big_l + 1;
        let special_idx: Vec<usize> = (num_q..num_q + alpha).collect();
        let mut q = Vec::with_capacity(num_q);
        let mut qp = Vec::with_capacity(num_q);
        for l in 0..num_q {
            let idx: Vec<usize> = (0..=l).collect();
            q.push(full.select(&idx)?);
            let idx: Vec<usize> = (0..=l).chain(special_idx.iter().copied()).collect();
            qp.push(full.select(&idx)?);
        }
        let elt = *full.eltwise();
        let mods = full.moduli();
        let p_mods: Vec<Modulus<W>> = mods[num_q..].to_vec();
        let mut modup = Vec::with_capacity(num_q);
        for l in 0..num_q {
            let digits = (l + 1).div_ceil(alpha);
            let mut per = Vec::with_capacity(digits);
            for j in 0..digits {
                let lo = j * alpha;
                let hi = ((j + 1) * alpha).min(l + 1);
                let from: Vec<Modulus<W>> = mods[lo..hi].to_vec();
                let to: Vec<Modulus<W>> = (0..=l)
                    .filter(|&i| i < lo || i >= hi)
                    .map(|i| mods[i])
                    .chain(p_mods.iter().copied())
                    .collect();
                per.push(BasisConverter::new(&from, &to, elt)?);
            }
            modup.push(per);
        }
        let moddown = qp
            .iter()
            .map(|b| ModDown::new(b, alpha))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        // q_l directly precedes the special primes in Q_l P, so "the last alpha + 1 primes"
        // are q_l and P.
        let moddown_rescale = qp[1..]
            .iter()
            .map(|b| ModDown::new(b, alpha + 1))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        let rescalers = q[1..]
            .iter()
            .map(Rescaler::new)
            .collect::<std::result::Result<Vec<_>, _>>()?;
        let p_mod_q = mods[..num_q]
            .iter()
            .map(|m| {
                p_mods
                    .iter()
                    .fold(W::ONE, |acc, p| m.mul(acc, m.reduce_u64(p.value())))
                    .to_u64()
            })
            .collect();
        let encoder = Encoder::new(n)?;
        Ok(Arc::new(Self {
            params,
            full,
            q,
            qp,
            encoder,
            modup,
            moddown,
            moddown_rescale,
            p_mod_q,
            rescalers,
            perms: RwLock::new(HashMap::new()),
            pool: BufferPool::new(),
        }))
    }

    /// The parameters.
    pub fn params(&self) -> &CkksParameters {
        &self.params
    }
    /// The SIMD backend the kernels run on.
    pub fn backend(&self) -> Backend {
        self.full.backend()
    }
    /// Ring degree N.
    pub fn n(&self) -> usize {
        self.params.n()
    }
    /// Top level `L`.
    pub fn max_level(&self) -> usize {
        self.params.max_level()
    }
    /// Parameter fingerprint.
    pub fn fingerprint(&self) -> u64 {
        self.params.fingerprint()
    }
    /// The basis `q_0 .. q_L, p_0 .. p_{alpha-1}`.
    pub fn full_basis(&self) -> &RnsBasis<W> {
        &self.full
    }
    /// The basis `q_0 .. q_level`.
    pub fn q_basis(&self, level: usize) -> Result<&RnsBasis<W>> {
        self.q.get(level).ok_or_else(|| self.level_error(level))
    }
    /// The basis `q_0 .. q_level, p_0 .. p_{alpha-1}`.
    pub fn qp_basis(&self, level: usize) -> Result<&RnsBasis<W>> {
        self.qp.get(level).ok_or_else(|| self.level_error(level))
    }
    /// The pool key switching takes its scratch polynomials from.
    pub(crate) fn pool(&self) -> &BufferPool<W> {
        &self.pool
    }
    /// Bytes of scratch buffers kept for reuse by key switching and rescaling.
    pub fn scratch_bytes(&self) -> usize {
        self.pool.free_bytes()
    }
    /// The encoder.
    pub fn encoder(&self) -> &Encoder {
        &self.encoder
    }
    pub(crate) fn modup(&self, level: usize, digit: usize) -> &BasisConverter<W> {
        &self.modup[level][digit]
    }
    pub(crate) fn moddown(&self, level: usize) -> Result<&ModDown<W>> {
        self.moddown
            .get(level)
            .ok_or_else(|| self.level_error(level))
    }
    /// Division by `q_level P` from `Q_level P` to `Q_(level-1)` (`level >= 1`).
    pub(crate) fn moddown_rescale(&self, level: usize) -> Result<&ModDown<W>> {
        self.moddown_rescale
            .get(Self::below(level)?)
            .ok_or_else(|| self.level_error(level))
    }
    /// `level - 1`, the index of a division by `q_level`; an error at level 0.
    fn below(level: usize) -> Result<usize> {
        level.checked_sub(1).ok_or_else(|| CkksError::OutOfLevels {
            level: 0,
            needed: 1,
            hint: "cannot rescale at level 0: no prime left to divide by; use more levels".into(),
        })
    }
    pub(crate) fn p_mod_q(&self, i: usize) -> u64 {
        self.p_mod_q[i]
    }
    /// Division by `q_level` (for `level >= 1`).
    pub(crate) fn rescaler(&self, level: usize) -> Result<&Rescaler<W>> {
        self.rescalers
            .get(Self::below(level)?)
            .ok_or_else(|| self.level_error(level))
    }

    /// Builds a ciphertext at `level` from polynomials computed elsewhere (an accelerator),
    /// checking that they are NTT-form polynomials over `q_0 .. q_level` of these parameters.
    pub fn ciphertext_from_polys(
        &self,
        polys: Vec<RnsPoly<W>>,
        level: usize,
        scale: f64,
        slots: usize,
    ) -> Result<Ciphertext<W>> {
        let basis = self.q_basis(level)?;
        if polys.len() < 2 || polys.len() > 3 {
            return Err(CkksError::InvalidInput(format!(
                "a ciphertext has 2 or 3 polynomials, got {}",
                polys.len()
            )));
        }
        if polys
            .iter()
            .any(|p| !basis.owns(p) || p.form() != Form::Ntt)
        {
            return Err(CkksError::ParameterMismatch(format!(
                "polynomials are not NTT-form polynomials at level {level} of these parameters"
            )));
        }
        if !(scale.is_finite() && scale > 0.0) || slots == 0 || slots > self.n() / 2 {
            return Err(CkksError::InvalidInput(format!(
                "invalid scale {scale} or slot count {slots} (1..={})",
                self.n() / 2
            )));
        }
        Ok(Ciphertext {
            polys,
            level,
            scale,
            slots,
            fingerprint: self.fingerprint(),
            seed: None,
        })
    }

    pub(crate) fn level_error(&self, level: usize) -> CkksError {
        CkksError::OutOfLevels {
            level: self.max_level(),
            needed: level,
            hint: format!(
                "level {level} does not exist; these parameters have levels 0..={}",
                self.max_level()
            ),
        }
    }

    /// The NTT-form permutation of the automorphism `X -> X^g` (cached).
    pub fn permutation(&self, g: u64) -> Result<Arc<NttPermutation>> {
        if let Ok(map) = self.perms.read() {
            if let Some(p) = map.get(&g) {
                return Ok(Arc::clone(p));
            }
        }
        let p = Arc::new(NttPermutation::new(self.n(), g)?);
        if let Ok(mut map) = self.perms.write() {
            map.insert(g, Arc::clone(&p));
        }
        Ok(p)
    }

    fn check_slots(&self, len: usize) -> Result<usize> {
        let max = self.params.slots();
        if len == 0 || len > max {
            return Err(CkksError::InvalidInput(format!(
                "{len} values do not fit: a ciphertext holds 1 to {max} slots (N/2)"
            )));
        }
        Ok(len.next_power_of_two())
    }

    /// Encodes complex values (padded with zeros to a power of two of slots) at `level` and
    /// `scale` into an NTT-form plaintext.
    pub fn encode_complex_at(
        &self,
        values: &[Complex64],
        level: usize,
        scale: f64,
    ) -> Result<Plaintext<W>> {
        let slots = self.check_slots(values.len())?;
        let basis = self.q_basis(level)?;
        let mut padded;
        let vals = if values.len() == slots {
            values
        } else {
            padded = values.to_vec();
            padded.resize(slots, Complex64::new(0.0, 0.0));
            &padded
        };
        let mut poly = self.encoder.encode(vals, scale, basis)?;
        basis.forward(&mut poly)?;
        Ok(Plaintext {
            poly,
            level,
            scale,
            slots,
            fingerprint: self.fingerprint(),
        })
    }

    /// Encodes real values at `level` and `scale`.
    pub fn encode_at(&self, values: &[f64], level: usize, scale: f64) -> Result<Plaintext<W>> {
        let c: Vec<Complex64> = values.iter().map(|&v| Complex64::new(v, 0.0)).collect();
        self.encode_complex_at(&c, level, scale)
    }

    /// Encodes real values at the top level and the default scale.
    pub fn encode(&self, values: &[f64]) -> Result<Plaintext<W>> {
        self.encode_at(values, self.max_level(), self.params.scale())
    }

    /// Decodes a plaintext to `slots` complex values.
    pub fn decode_complex(&self, pt: &Plaintext<W>) -> Result<Vec<Complex64>> {
        self.check_fingerprint(pt.fingerprint, "plaintext")?;
        let basis = self.q_basis(pt.level)?;
        let mut p = pt.poly.clone();
        basis.inverse(&mut p)?;
        self.encoder.decode(&p, basis, pt.slots, pt.scale)
    }

    /// Decodes a plaintext to its real parts.
    pub fn decode(&self, pt: &Plaintext<W>) -> Result<Vec<f64>> {
        Ok(self.decode_complex(pt)?.iter().map(|c| c.re).collect())
    }

    pub(crate) fn check_fingerprint(&self, fp: u64, what: &str) -> Result<()> {
        if fp != self.fingerprint() {
            return Err(CkksError::ParameterMismatch(format!(
                "this {what} was made for other parameters (fingerprint {fp:016x}, context {:016x}); use the context it was created with",
                self.fingerprint()
            )));
        }
        Ok(())
    }
}
