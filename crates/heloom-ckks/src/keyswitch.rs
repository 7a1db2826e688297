//! Hybrid key switching (Han-Ki 2020; RNS form of Gentry-Halevi-Smart 2012): split the input
//! into `dnum` digits of `alpha` primes, raise each digit to `Q_l P` (mod-up, a fast base
//! conversion), take the inner product with the switching key, and divide by `P` (mod-down).
//!
//! The mod-up result can be reused for many Galois keys ("hoisting", Halevi-Shoup 2018): an
//! automorphism in NTT form is a permutation and commutes with the digit decomposition.
//!
//! The `_with` variants take a thread budget: digits run concurrently with their own sums
//! (added up at the end; modular addition is exact, so results do not depend on the budget),
//! and each step also splits over limbs (NTTs, inner product, mod-down) and coefficient
//! ranges (base conversions).

use crate::context::Context;
use crate::error::{CkksError, Result};
use crate::keys::SwitchingKey;
use heloom_math::automorphism::NttPermutation;
use heloom_math::{Form, RnsPoly, Word};
use heloom_pool::Threads;

/// The mod-up digits of one polynomial at one level: NTT form over `q_0..q_l, P`.
#[derive(Clone, Debug)]
pub struct Decomposed<W: Word> {
    pub(crate) digits: Vec<RnsPoly<W>>,
    pub(crate) level: usize,
}

impl<W: Word> Decomposed<W> {
    /// Level of the decomposed polynomial.
    pub fn level(&self) -> usize {
        self.level
    }
    /// Number of digits.
    pub fn len(&self) -> usize {
        self.digits.len()
    }
    /// Whether there are no digits (never, for a valid decomposition).
    pub fn is_empty(&self) -> bool {
        self.digits.is_empty()
    }
}

/// The working set of one group of key-switching digits: the raised digit being processed and
/// the two inner-product sums over `Q_l P`.
struct DigitAcc<W: Word> {
    ext: RnsPoly<W>,
    acc0: RnsPoly<W>,
    acc1: RnsPoly<W>,
}

/// One limb's share of a digit: limb index, raised limb, and the two sums' limbs.
type LimbWork<'a, W> = (usize, &'a mut [W], &'a mut [W], &'a mut [W]);

/// What key switching does to each half of its result on the thread that mod-downs it (adding
/// the ciphertext's other polynomial, say), so that no extra pass over the pool is needed.
pub(crate) type Finish<'a, W> =
    Box<dyn FnOnce(RnsPoly<W>, Threads) -> Result<RnsPoly<W>> + Send + 'a>;

impl<W: Word> Context<W> {
    /// Primes `lo..hi` of `q_0..q_level` that make up digit `j`.
    pub(crate) fn digit_range(&self, level: usize, j: usize) -> (usize, usize) {
        let alpha = self.params().alpha();
        (j * alpha, ((j + 1) * alpha).min(level + 1))
    }

    /// Index in a switching key (stored over `Q_L P`) of limb `k` of `Q_l P`.
    fn key_limb(&self, level: usize, k: usize) -> usize {
        if k <= level {
            k
        } else {
            self.max_level() + 1 + (k - level - 1)
        }
    }

    /// Mod-up of digit `j` of `d` (NTT form at `level`) into `ext` (over `Q_l P`): the digit's
    /// own limbs get its coefficient form (the digit's NTT form is `d` itself, so they are free
    /// as scratch), every other limb the digit raised to that prime, in coefficient form.
    fn raise_digit(
        &self,
        d: &RnsPoly<W>,
        ext: &mut RnsPoly<W>,
        level: usize,
        j: usize,
        threads: Threads,
    ) -> Result<()> {
        let (lo, hi) = self.digit_range(level, j);
        let n = self.n();
        let tables = self.qp_basis(level)?.ntt_tables();
        let own = &mut ext.as_mut_slice()[lo * n..hi * n];
        own.copy_from_slice(&d.as_slice()[lo * n..hi * n]);
        threads.try_for_each_chunk_mut(own, n, |i, v| tables[lo + i].inverse(v))?;
        let mut inputs: Vec<&[W]> = Vec::with_capacity(hi - lo);
        let mut outs: Vec<&mut [W]> = Vec::with_capacity(tables.len());
        for (k, limb) in ext.as_mut_slice().chunks_exact_mut(n).enumerate() {
            if k >= lo && k < hi {
                inputs.push(limb);
            } else {
                outs.push(limb);
            }
        }
        self.modup(level, j)
            .convert_centered_with(&inputs, &mut outs, threads)?;
        Ok(())
    }

    /// Errors unless `d` is an NTT-form polynomial at `level`.
    fn check_switch_input(&self, d: &RnsPoly<W>, level: usize) -> Result<()> {
        if !self.q_basis(level)?.owns(d) || d.form() != Form::Ntt {
            return Err(CkksError::ParameterMismatch(format!(
                "key switching input is not an NTT-form polynomial at level {level}"
            )));
        }
        Ok(())
    }

    /// Mod-up: the digits of `d` (NTT form over `q_0..q_level`) raised to `Q_l P`.
    pub fn decompose(&self, d: &RnsPoly<W>, level: usize) -> Result<Decomposed<W>> {
        self.decompose_with(d, level, Threads::single())
    }

    /// [`Self::decompose`] with a thread budget: digits run concurrently, each split over
    /// limbs (NTTs) and coefficients (base conversion) with its share of the budget. The
    /// result does not depend on the budget.
    pub fn decompose_with(
        &self,
        d: &RnsPoly<W>,
        level: usize,
        threads: Threads,
    ) -> Result<Decomposed<W>> {
        self.check_switch_input(d, level)?;
        let threads = threads.effective();
        let qp = self.qp_basis(level)?;
        let tables = qp.ntt_tables();
        let num = (level + 1).div_ceil(self.params().alpha());
        let digits = threads.map(num, |j| -> Result<RnsPoly<W>> {
            let t = threads.share(num, j);
            let (lo, hi) = self.digit_range(level, j);
            // Every word of `ext` is written (raised limbs by the base conversion, own limbs
            // copied), so a recycled buffer need not be zeroed first.
            let mut ext = self.pool().for_overwrite(qp, Form::Ntt);
            self.raise_digit(d, &mut ext, level, j, t)?;
            t.try_for_each_chunk_mut(ext.as_mut_slice(), self.n(), |k, limb| -> Result<()> {
                if k >= lo && k < hi {
                    limb.copy_from_slice(d.limb(k));
                } else {
                    tables[k].forward(limb)?;
                }
                Ok(())
            })?;
            Ok(ext)
        });
        let digits = digits.into_iter().collect::<Result<Vec<_>>>()?;
        Ok(Decomposed { digits, level })
    }

    /// Inner product of the digits (each permuted by `perm` when given) with a switching key:
    /// two polynomials over `Q_l P` in NTT form.
    pub fn key_inner_product(
        &self,
        dec: &Decomposed<W>,
        key: &SwitchingKey<W>,
        perm: Option<&NttPermutation>,
    ) -> Result<(RnsPoly<W>, RnsPoly<W>)> {
        self.key_inner_product_with(dec, key, perm, Threads::single())
    }

    /// [`Self::key_inner_product`] split over the limbs of `Q_l P` with a thread budget.
    pub fn key_inner_product_with(
        &self,
        dec: &Decomposed<W>,
        key: &SwitchingKey<W>,
        perm: Option<&NttPermutation>,
        threads: Threads,
    ) -> Result<(RnsPoly<W>, RnsPoly<W>)> {
        self.check_fingerprint(key.fingerprint, "switching key")?;
        let level = dec.level;
        let qp = self.qp_basis(level)?;
        if key.b.len() != self.params().dnum()
            || key.a.len() != key.b.len()
            || dec.digits.len() > key.b.len()
        {
            return Err(CkksError::ParameterMismatch(
                "switching key has the wrong number of digits".into(),
            ));
        }
        let n = self.n();
        let elt = qp.eltwise();
        let moduli = qp.moduli();
        let mut acc0 = self.pool().zero(qp, Form::Ntt);
        let mut acc1 = self.pool().zero(qp, Form::Ntt);
        let mut limbs: Vec<(&mut [W], &mut [W])> = acc0.limbs_mut().zip(acc1.limbs_mut()).collect();
        threads.try_for_each_init(
            &mut limbs,
            || self.pool().scratch(if perm.is_some() { n } else { 0 }),
            |tmp, k, (o0, o1)| -> Result<()> {
                let kk = self.key_limb(level, k);
                for ((dj, bj), aj) in dec.digits.iter().zip(&key.b).zip(&key.a) {
                    let src: &[W] = match perm {
                        Some(p) => {
                            p.apply(dj.limb(k), tmp)?;
                            tmp
                        }
                        None => dj.limb(k),
                    };
                    elt.mul_add2(&moduli[k], o0, o1, src, bj.limb(kk), aj.limb(kk))?;
                }
                Ok(())
            },
        )?;
        drop(limbs);
        Ok((acc0, acc1))
    }

    /// Mod-down: `(x - [x]_P) / P` from `Q_l P` to `Q_l` (NTT form in and out).
    pub fn mod_down(&self, x: RnsPoly<W>, level: usize) -> Result<RnsPoly<W>> {
        self.mod_down_with(x, level, Threads::single())
    }

    /// [`Self::mod_down`] with a thread budget ([`heloom_math::ModDown::apply`]).
    pub fn mod_down_with(
        &self,
        x: RnsPoly<W>,
        level: usize,
        threads: Threads,
    ) -> Result<RnsPoly<W>> {
        let op = self.moddown(level)?;
        if !op.from_basis().owns(&x) || x.form() != Form::Ntt {
            return Err(CkksError::ParameterMismatch(format!(
                "mod-down input is not an NTT-form polynomial over Q_{level} P"
            )));
        }
        Ok(op.apply(x, threads)?)
    }

    /// Adds digit `j` of `d` times digit `j` of `key` to the sums in `acc`: mod-up of the digit
    /// into `acc.ext`, then per limb of `Q_l P` an NTT (for raised limbs) and the fused
    /// multiply-add with both key halves.
    fn switch_digit(
        &self,
        d: &RnsPoly<W>,
        level: usize,
        j: usize,
        key: &SwitchingKey<W>,
        acc: &mut DigitAcc<W>,
        threads: Threads,
    ) -> Result<()> {
        let qp = self.qp_basis(level)?;
        self.raise_digit(d, &mut acc.ext, level, j, threads)?;
        let (lo, hi) = self.digit_range(level, j);
        let own = |k: usize| k >= lo && k < hi;
        let (bj, aj) = (&key.b[j], &key.a[j]);
        let (tables, moduli, elt) = (qp.ntt_tables(), qp.moduli(), qp.eltwise());
        let limb = |k: usize, e: &mut [W], o0: &mut [W], o1: &mut [W]| -> Result<()> {
            let kk = self.key_limb(level, k);
            let src: &[W] = if own(k) {
                d.limb(k)
            } else {
                tables[k].forward(e)?;
                e
            };
            elt.mul_add2(&moduli[k], o0, o1, src, bj.limb(kk), aj.limb(kk))?;
            Ok(())
        };
        let DigitAcc { ext, acc0, acc1 } = acc;
        let items = ext
            .limbs_mut()
            .zip(acc0.limbs_mut())
            .zip(acc1.limbs_mut())
            .enumerate()
            .map(|(k, ((e, o0), o1))| (k, e, o0, o1));
        let chunks = threads.chunks_for(qp.len());
        if chunks <= 1 {
            for (k, e, o0, o1) in items {
                limb(k, e, o0, o1)?;
            }
            return Ok(());
        }
        // Only raised limbs need an NTT: deal them out first, round-robin, so that every
        // thread gets the same number of NTTs (contiguous chunks would not).
        let mut order: Vec<LimbWork<'_, W>> = items.collect();
        order.sort_by_key(|w| own(w.0));
        let mut work: Vec<Vec<LimbWork<'_, W>>> = (0..chunks)
            .map(|_| Vec::with_capacity(qp.len().div_ceil(chunks)))
            .collect();
        for (i, w) in order.into_iter().enumerate() {
            work[i % chunks].push(w);
        }
        threads.try_for_each_mut(&mut work, |_, part| {
            part.iter_mut()
                .try_for_each(|(k, e, o0, o1)| limb(*k, e, o0, o1))
        })
    }

    /// Switches `d` (NTT form at `level`) under `key`: returns `(c0, c1)` with
    /// `c0 + c1 s ~= d s'`. Digit by digit, so only one raised digit is alive at a time.
    pub fn key_switch(
        &self,
        d: &RnsPoly<W>,
        level: usize,
        key: &SwitchingKey<W>,
    ) -> Result<(RnsPoly<W>, RnsPoly<W>)> {
        self.key_switch_with(d, level, key, Threads::single())
    }

    /// [`Self::key_switch`] with a thread budget `t`. Digits are dealt to up to `t` groups that
    /// run concurrently, each with its own raised digit and sums (so at most `t` raised digits
    /// are alive); the sums are added at the end, which is exact modular arithmetic, so the
    /// result is bit-identical to the sequential one. Digits left over from whole rounds, and
    /// groups given more than one thread, split each digit over limbs and coefficients; the
    /// two mod-downs run side by side.
    pub fn key_switch_with(
        &self,
        d: &RnsPoly<W>,
        level: usize,
        key: &SwitchingKey<W>,
        threads: Threads,
    ) -> Result<(RnsPoly<W>, RnsPoly<W>)> {
        self.key_switch_finish(
            d,
            level,
            key,
            threads,
            Box::new(|x, _| Ok(x)),
            Box::new(|x, _| Ok(x)),
        )
    }

    /// [`Self::key_switch_with`], then `finish0` / `finish1` on each half, each on the thread
    /// (and with the share of the budget) that computed it.
    pub(crate) fn key_switch_finish(
        &self,
        d: &RnsPoly<W>,
        level: usize,
        key: &SwitchingKey<W>,
        threads: Threads,
        finish0: Finish<'_, W>,
        finish1: Finish<'_, W>,
    ) -> Result<(RnsPoly<W>, RnsPoly<W>)> {
        self.key_switch_inner(d, level, key, threads, finish0, finish1, None)
    }

    /// `(c0 + ks_0(d), c1 + ks_1(d))` divided by `q_level` and rounded, in one mod-down by
    /// `q_level P` (the rescale that follows a relinearization, merged into its mod-down:
    /// `(P c_i + ks_i) / (P q_level)`). Saves the rescale's NTTs of every limb and rounds
    /// once instead of twice. `c0`, `c1`: NTT form at `level`; the results are at
    /// `level - 1`.
    pub(crate) fn key_switch_rescale(
        &self,
        d: &RnsPoly<W>,
        level: usize,
        key: &SwitchingKey<W>,
        threads: Threads,
        c0: &RnsPoly<W>,
        c1: &RnsPoly<W>,
    ) -> Result<(RnsPoly<W>, RnsPoly<W>)> {
        let basis = self.q_basis(level)?;
        for c in [c0, c1] {
            if !basis.owns(c) || c.form() != Form::Ntt {
                return Err(CkksError::ParameterMismatch(format!(
                    "the polynomials added before the merged rescale are not in NTT form at level {level}"
                )));
            }
        }
        self.moddown_rescale(level)?;
        self.key_switch_inner(
            d,
            level,
            key,
            threads,
            Box::new(|x, _| Ok(x)),
            Box::new(|x, _| Ok(x)),
            Some([c0, c1]),
        )
    }

    /// [`Self::key_switch_finish`]; with `fused`, [`Self::key_switch_rescale`]'s division.
    #[allow(clippy::too_many_arguments)]
    fn key_switch_inner(
        &self,
        d: &RnsPoly<W>,
        level: usize,
        key: &SwitchingKey<W>,
        threads: Threads,
        finish0: Finish<'_, W>,
        finish1: Finish<'_, W>,
        fused: Option<[&RnsPoly<W>; 2]>,
    ) -> Result<(RnsPoly<W>, RnsPoly<W>)> {
        self.check_fingerprint(key.fingerprint, "switching key")?;
        self.check_switch_input(d, level)?;
        if key.b.len() != self.params().dnum() || key.a.len() != key.b.len() {
            return Err(CkksError::ParameterMismatch(
                "switching key has the wrong number of digits".into(),
            ));
        }
        let threads = threads.effective();
        let qp = self.qp_basis(level)?;
        let digits = (level + 1).div_ceil(self.params().alpha());
        let groups = threads.chunks_for(digits);
        let pool = self.pool();
        let new_acc = || DigitAcc {
            // Rewritten whole by every digit's `raise_digit`.
            ext: pool.for_overwrite(qp, Form::Ntt),
            acc0: pool.zero(qp, Form::Ntt),
            acc1: pool.zero(qp, Form::Ntt),
        };
        // Whole rounds: group g takes digits g * per .. (g + 1) * per, with working memory
        // allocated (and zeroed) on the group's own thread.
        let per = if groups > 1 { digits / groups } else { 0 };
        let mut accs: Vec<DigitAcc<W>> = if per > 0 {
            threads
                .map(groups, |g| -> Result<DigitAcc<W>> {
                    let t = threads.share(groups, g);
                    let mut acc = new_acc();
                    for j in g * per..(g + 1) * per {
                        self.switch_digit(d, level, j, key, &mut acc, t)?;
                    }
                    Ok(acc)
                })
                .into_iter()
                .collect::<Result<_>>()?
        } else {
            vec![new_acc()]
        };
        // Digits left over: one at a time, each split over the whole budget.
        if let Some(main) = accs.first_mut() {
            for j in groups * per..digits {
                self.switch_digit(d, level, j, key, main, threads)?;
            }
        }
        let (sums0, sums1): (Vec<_>, Vec<_>) = accs
            .into_iter()
            .map(|a| {
                pool.recycle(a.ext);
                (a.acc0, a.acc1)
            })
            .unzip();
        // Each half: the groups' sums added up, then mod-down, then the caller's finish.
        let half =
            |sums: Vec<RnsPoly<W>>, finish: Finish<'_, W>, add: Option<&RnsPoly<W>>, t: Threads| {
                let mut sums = sums.into_iter();
                let mut x = sums.next().ok_or_else(|| {
                    CkksError::InvalidInput("internal: key switching has no digit group".into())
                })?;
                for y in sums {
                    qp.add_assign_with(&mut x, &y, t)?;
                    pool.recycle(y);
                }
                let Some(c) = add else {
                    return finish(self.mod_down_with(x, level, t)?, t);
                };
                // x + P c over Q_l (P c vanishes modulo the special primes), then / (q_l P).
                let (elt, mods, n) = (qp.eltwise(), qp.moduli(), self.n());
                let q_limbs = &mut x.as_mut_slice()[..(level + 1) * n];
                t.try_for_each_chunk_mut(q_limbs, n, |i, xi| -> Result<()> {
                    Ok(elt.mul_scalar_add(&mods[i], xi, c.limb(i), self.p_mod_q(i))?)
                })?;
                finish(self.moddown_rescale(level)?.apply(x, t)?, t)
            };
        let (a0, a1) = match fused {
            Some([c0, c1]) => (Some(c0), Some(c1)),
            None => (None, None),
        };
        let (c0, c1) = threads.join(
            |t| half(sums0, finish0, a0, t),
            |t| half(sums1, finish1, a1, t),
        );
        Ok((c0?, c1?))
    }
}
