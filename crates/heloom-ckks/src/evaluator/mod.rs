//! Homomorphic operations on ciphertexts.
//!
//! Levels and scales: operands at different levels are brought to the lower one (dropping
//! primes is exact). Operands whose scales differ are aligned when that can be done without
//! losing precision: the one at the higher level is multiplied by the integer
//! `round(target * q / scale)` and rescaled by `q`, which lands on the other's level with a
//! scale equal up to `2^-(log q + 1)` relative (below CKKS noise). Otherwise a
//! [`CkksError::ScaleMismatch`] says what to do.
//!
//! The operations are split by kind: levels, scales and rescaling here; `arith.rs`
//! (additions), `multiply.rs` (multiplications, relinearization), `rotate.rs` (Galois
//! automorphisms, hoisting).

use crate::ciphertext::{Ciphertext, Plaintext};
use crate::context::Context;
use crate::error::{CkksError, MissingKeyKind, Result};
use crate::keys::{EvaluationKeys, SwitchingKey};
use crate::keyswitch::Finish;
use heloom_math::automorphism::{
    galois_element_conjugate, galois_element_for_step, NttPermutation,
};
use heloom_math::{Form, Modulus, RnsBasis, RnsPoly, Word};
use heloom_pool::Threads;
use num_complex::Complex64;
use std::sync::Arc;

mod arith;
mod multiply;
mod rotate;

/// Reduces a signed 128-bit integer modulo `m`.
pub(crate) fn reduce_i128<W: Word>(m: &Modulus<W>, v: i128) -> u64 {
    v.rem_euclid(m.value() as i128) as u64
}

/// Residues of `round(c * scale)` modulo each prime of `basis`. Up to `2^120` the integer is
/// exact; above (the scale of a product of two ciphertexts at scale 2^60, as in bootstrapping's
/// EvalMod) it is `round(c * scale / 2^e) * 2^e`, off by less than `2^-100` of its value,
/// far below the rounding `c * scale` already carries as an f64.
fn const_residues<W: Word>(basis: &RnsBasis<W>, c: f64, scale: f64) -> Result<Vec<u64>> {
    let v = (c * scale).round();
    if !v.is_finite() {
        return Err(CkksError::InvalidInput(format!(
            "constant {c} at scale 2^{:.1} is not a finite number",
            scale.log2()
        )));
    }
    if v.abs() < 2f64.powi(120) {
        let k = v as i128;
        return Ok(basis.moduli().iter().map(|m| reduce_i128(m, k)).collect());
    }
    let e = (v.abs().log2().floor() as i32 - 100).max(0);
    let mant = (v / 2f64.powi(e)).round() as i128;
    Ok(basis
        .moduli()
        .iter()
        .map(|m| {
            let p2 = m.pow(W::from_u64(2), e as u64);
            m.mul(W::from_u64(reduce_i128(m, mant)), p2).to_u64()
        })
        .collect())
}

/// Adds the constant with residues `r` (one per prime; the same at every NTT point) to every
/// limb.
fn add_const_limbs<W: Word>(
    basis: &RnsBasis<W>,
    p: &mut RnsPoly<W>,
    r: &[u64],
    threads: Threads,
) -> Result<()> {
    for_each_limb(threads, std::slice::from_mut(p), |_, i, limb| {
        let m = &basis.moduli()[i];
        let r = W::from_u64(r[i]);
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
    /// Bytes [`Self::hoisted`] may hold; a key beyond it is used as is, its digits permuted.
    hoisted_budget: usize,
    /// Whether [`PolyOps::relinearize_rescale`] merges the rescale into the key switch
    /// ([`Self::with_merged_rescale`]).
    merged_rescale: bool,
}

/// The default of [`Evaluator::with_hoisted_key_budget`]: 256 MiB, every key of a parameter
/// set up to N = 2^15 with a few dozen rotations, two keys at N = 2^16 (whose bootstrapping
/// keys alone are 3.9 GB: a copy of each would add 2.7 GB for a few percent of speed).
pub const DEFAULT_HOISTED_KEY_BUDGET: usize = 256 << 20;

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
            hoisted_budget: DEFAULT_HOISTED_KEY_BUDGET,
            merged_rescale: false,
        })
    }

    /// An evaluator without keys: everything but relinearization and rotations.
    pub fn without_keys(ctx: &Arc<Context<W>>) -> Self {
        Self {
            ctx: Arc::clone(ctx),
            keys: None,
            threads: Threads::single(),
            hoisted: Arc::default(),
            hoisted_budget: DEFAULT_HOISTED_KEY_BUDGET,
            merged_rescale: false,
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
            hoisted_budget: self.hoisted_budget,
            merged_rescale: self.merged_rescale,
        }
    }

    /// The same evaluator with [`crate::PolyOps::relinearize_rescale`] (polynomial evaluation's
    /// products) merged into one key switch ([`Self::relinearize_rescale`]) when `on`, or run
    /// as [`Self::relinearize`] then [`Self::rescale`] (the default, word for word what a
    /// task graph of the same polynomial computes on any backend). Merged is faster and
    /// rounds once; bootstrapping's EvalMod uses it.
    pub fn with_merged_rescale(&self, on: bool) -> Self {
        Self {
            merged_rescale: on,
            ..self.clone()
        }
    }

    /// The same evaluator with `bytes` for Galois keys permuted once for hoisted rotations
    /// (default [`DEFAULT_HOISTED_KEY_BUDGET`]): such a key saves permuting every digit of
    /// each hoisted rotation (about 5% of a rotation) for a copy of the key. Keys beyond the
    /// budget are used as they are. Results are the same either way. The new evaluator starts
    /// with an empty set of permuted keys (shared by its own clones).
    pub fn with_hoisted_key_budget(&self, bytes: usize) -> Self {
        Self {
            hoisted_budget: bytes,
            hoisted: Arc::default(),
            ..self.clone()
        }
    }

    /// Whether polynomial evaluation merges its rescales into the key switches
    /// ([`Self::with_merged_rescale`]).
    pub fn merged_rescale(&self) -> bool {
        self.merged_rescale
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
        self.keys.as_deref().ok_or_else(|| CkksError::MissingKey {
            key: MissingKeyKind::EvaluationKeys,
            hint:
                "this evaluator has no evaluation keys; build it with the key set's evaluation_keys"
                    .into(),
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
            return Err(CkksError::OutOfLevels {
                level: ct.level,
                needed: level,
                hint: format!(
                    "cannot raise a ciphertext from level {} to {level}; levels only go down",
                    ct.level
                ),
            });
        }
        let basis = self.ctx.q_basis(level)?;
        let polys = ct
            .polys
            .iter()
            .map(|p| basis.truncated(p))
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
            return Err(CkksError::OutOfLevels {
                level: 0,
                needed: 1,
                hint: "ciphertext is already at level 0".into(),
            });
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
    /// [`crate::polyops::align_on`]).
    pub fn align(
        &self,
        a: &Ciphertext<W>,
        b: &Ciphertext<W>,
    ) -> Result<(Ciphertext<W>, Ciphertext<W>)> {
        self.check(a)?;
        self.check(b)?;
        crate::polyops::align_on(self, a, b)
    }

    /// Moves `ct` to `level` (below its own) with scale `target`, by multiplying by an integer
    /// constant one level above `level` and rescaling (see
    /// [`crate::polyops::set_scale_by_rescale_on`]).
    pub fn set_scale_by_rescale(
        &self,
        ct: &Ciphertext<W>,
        level: usize,
        target: f64,
    ) -> Result<Ciphertext<W>> {
        crate::polyops::set_scale_by_rescale_on(self, ct, level, target)
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
