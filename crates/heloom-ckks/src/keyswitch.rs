//! Hybrid key switching (Han-Ki 2020; RNS form of Gentry-Halevi-Smart 2012): split the input
//! into `dnum` digits of `alpha` primes, raise each digit to `Q_l P` (mod-up, a fast base
//! conversion), take the inner product with the switching key, and divide by `P` (mod-down).
//!
//! The mod-up result can be reused for many Galois keys ("hoisting", Halevi-Shoup 2018): an
//! automorphism in NTT form is a permutation and commutes with the digit decomposition.

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

impl<W: Word> Context<W> {
    /// Primes `lo..hi` of `q_0..q_level` that make up digit `j`.
    fn digit_range(&self, level: usize, j: usize) -> (usize, usize) {
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

    /// Writes digit `j` of `dc` (coefficient form at `level`) raised to every other prime of
    /// `Q_l P` into those limbs of `ext` (coefficient form; the digit's own limbs untouched).
    fn raise_digit(
        &self,
        dc: &RnsPoly<W>,
        ext: &mut RnsPoly<W>,
        level: usize,
        j: usize,
        threads: Threads,
    ) -> Result<()> {
        let (lo, hi) = self.digit_range(level, j);
        let inputs: Vec<&[W]> = (lo..hi).map(|i| dc.limb(i)).collect();
        let mut outs: Vec<&mut [W]> = ext
            .as_mut_slice()
            .chunks_exact_mut(self.n())
            .enumerate()
            .filter(|(k, _)| *k < lo || *k >= hi)
            .map(|(_, s)| s)
            .collect();
        self.modup(level, j)
            .convert_centered_with(&inputs, &mut outs, threads)?;
        Ok(())
    }

    /// Mod-up: the digits of `d` (NTT form over `q_0..q_level`) raised to `Q_l P`.
    pub fn decompose(&self, d: &RnsPoly<W>, level: usize) -> Result<Decomposed<W>> {
        self.decompose_with(d, level, Threads::single())
    }

    /// [`Self::decompose`] with a thread budget: digits run concurrently, each split over
    /// coefficients (base conversion) and limbs (NTT) with its share of the budget. The result
    /// does not depend on the budget.
    pub fn decompose_with(
        &self,
        d: &RnsPoly<W>,
        level: usize,
        threads: Threads,
    ) -> Result<Decomposed<W>> {
        let q = self.q_basis(level)?;
        if !q.owns(d) || d.form() != Form::Ntt {
            return Err(CkksError::ParameterMismatch(format!(
                "key switching input is not an NTT-form polynomial at level {level}"
            )));
        }
        let threads = threads.effective();
        let qp = self.qp_basis(level)?;
        let tables = qp.ntt_tables();
        let mut dc = d.clone();
        q.inverse_with(&mut dc, threads)?;
        let num = (level + 1).div_ceil(self.params().alpha());
        let digits = threads.map(num, |j| -> Result<RnsPoly<W>> {
            let t = threads.share(num, j);
            let (lo, hi) = self.digit_range(level, j);
            let mut ext = qp.zero(Form::Ntt);
            self.raise_digit(&dc, &mut ext, level, j, t)?;
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
        let mut acc0 = qp.zero(Form::Ntt);
        let mut acc1 = qp.zero(Form::Ntt);
        let mut limbs: Vec<(&mut [W], &mut [W])> = acc0.limbs_mut().zip(acc1.limbs_mut()).collect();
        threads.try_for_each_init(
            &mut limbs,
            || match perm {
                Some(_) => vec![W::ZERO; n],
                None => Vec::new(),
            },
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

    /// [`Self::mod_down`] with a thread budget: the inverse NTTs of the `P` limbs, the base
    /// conversion (over coefficient ranges) and the per-limb NTT and subtraction are each split.
    pub fn mod_down_with(
        &self,
        mut x: RnsPoly<W>,
        level: usize,
        threads: Threads,
    ) -> Result<RnsPoly<W>> {
        let qp = self.qp_basis(level)?;
        let q = self.q_basis(level)?;
        if !qp.owns(&x) || x.form() != Form::Ntt {
            return Err(CkksError::ParameterMismatch(format!(
                "mod-down input is not an NTT-form polynomial over Q_{level} P"
            )));
        }
        let n = self.n();
        let tables = qp.ntt_tables();
        // The P limbs (the last alpha of Q_l P) in coefficient form.
        let mut pc = x.as_slice()[(level + 1) * n..].to_vec();
        threads.try_for_each_chunk_mut(&mut pc, n, |i, v| tables[level + 1 + i].inverse(v))?;
        let mut conv = vec![W::ZERO; n * (level + 1)];
        {
            let inputs: Vec<&[W]> = pc.chunks_exact(n).collect();
            let mut outs: Vec<&mut [W]> = conv.chunks_exact_mut(n).collect();
            self.moddown(level)
                .convert_centered_with(&inputs, &mut outs, threads)?;
        }
        let elt = qp.eltwise();
        let moduli = qp.moduli();
        let mut limbs: Vec<(&mut [W], &mut [W])> = conv
            .chunks_exact_mut(n)
            .zip(x.as_mut_slice().chunks_exact_mut(n))
            .collect();
        threads.try_for_each_mut(&mut limbs, |i, (c, xi)| -> Result<()> {
            tables[i].forward(c)?;
            elt.sub_mul_scalar(&moduli[i], xi, c, self.p_inv(i))?;
            Ok(())
        })?;
        drop(limbs);
        Ok(q.truncate(x)?)
    }

    /// Adds digit `j` of `d` times digit `j` of `key` to the sums in `acc`: raises the digit
    /// into `acc.ext`, then per limb of `Q_l P` an NTT (for raised limbs) and the fused
    /// multiply-add with both key halves.
    #[allow(clippy::too_many_arguments)]
    fn switch_digit(
        &self,
        d: &RnsPoly<W>,
        dc: &RnsPoly<W>,
        level: usize,
        j: usize,
        key: &SwitchingKey<W>,
        acc: &mut DigitAcc<W>,
        threads: Threads,
    ) -> Result<()> {
        let qp = self.qp_basis(level)?;
        self.raise_digit(dc, &mut acc.ext, level, j, threads)?;
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
    /// groups given more than one thread, split each digit over coefficients and limbs; the
    /// two mod-downs run side by side.
    pub fn key_switch_with(
        &self,
        d: &RnsPoly<W>,
        level: usize,
        key: &SwitchingKey<W>,
        threads: Threads,
    ) -> Result<(RnsPoly<W>, RnsPoly<W>)> {
        self.check_fingerprint(key.fingerprint, "switching key")?;
        let q = self.q_basis(level)?;
        if !q.owns(d) || d.form() != Form::Ntt {
            return Err(CkksError::ParameterMismatch(format!(
                "key switching input is not an NTT-form polynomial at level {level}"
            )));
        }
        if key.b.len() != self.params().dnum() || key.a.len() != key.b.len() {
            return Err(CkksError::ParameterMismatch(
                "switching key has the wrong number of digits".into(),
            ));
        }
        let threads = threads.effective();
        let qp = self.qp_basis(level)?;
        let mut dc = d.clone();
        q.inverse_with(&mut dc, threads)?;
        let digits = (level + 1).div_ceil(self.params().alpha());
        let groups = threads.chunks_for(digits);
        let mut accs: Vec<DigitAcc<W>> = (0..groups)
            .map(|_| DigitAcc {
                ext: qp.zero(Form::Ntt),
                acc0: qp.zero(Form::Ntt),
                acc1: qp.zero(Form::Ntt),
            })
            .collect();
        // Whole rounds: group g takes digits g * per .. (g + 1) * per.
        let per = if groups > 1 { digits / groups } else { 0 };
        if per > 0 {
            threads.try_for_each_mut(&mut accs, |g, acc| {
                let t = threads.share(groups, g);
                (g * per..(g + 1) * per)
                    .try_for_each(|j| self.switch_digit(d, &dc, level, j, key, acc, t))
            })?;
        }
        let Some((main, rest)) = accs.split_first_mut() else {
            return Err(CkksError::InvalidInput(
                "internal: key switching has no digit group".into(),
            ));
        };
        for j in groups * per..digits {
            self.switch_digit(d, &dc, level, j, key, main, threads)?;
        }
        if !rest.is_empty() {
            let rest: &[DigitAcc<W>] = rest;
            let (elt, moduli, limbs) = (qp.eltwise(), qp.moduli(), qp.len());
            let mut sums: Vec<&mut [W]> =
                main.acc0.limbs_mut().chain(main.acc1.limbs_mut()).collect();
            threads.try_for_each_mut(&mut sums, |i, x| -> Result<()> {
                let k = i % limbs;
                for r in rest {
                    let y = if i < limbs { &r.acc0 } else { &r.acc1 };
                    elt.add_assign(&moduli[k], x, y.limb(k))?;
                }
                Ok(())
            })?;
        }
        accs.truncate(1);
        let DigitAcc { acc0, acc1, .. } = accs.pop().ok_or_else(|| {
            CkksError::InvalidInput("internal: key switching has no digit group".into())
        })?;
        let (c0, c1) = threads.join(
            |t| self.mod_down_with(acc0, level, t),
            |t| self.mod_down_with(acc1, level, t),
        );
        Ok((c0?, c1?))
    }
}
