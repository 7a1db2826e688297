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

impl<W: Word> Context<W> {
    /// Writes digit `j` of `dc` (coefficient form at `level`) raised to every other prime of
    /// `Q_l P` into those limbs of `ext` (coefficient form; the digit's own limbs untouched).
    fn raise_digit(
        &self,
        dc: &RnsPoly<W>,
        ext: &mut RnsPoly<W>,
        level: usize,
        j: usize,
    ) -> Result<()> {
        let alpha = self.params().alpha();
        let (lo, hi) = (j * alpha, ((j + 1) * alpha).min(level + 1));
        let inputs: Vec<&[W]> = (lo..hi).map(|i| dc.limb(i)).collect();
        let mut outs: Vec<&mut [W]> = ext
            .as_mut_slice()
            .chunks_exact_mut(self.n())
            .enumerate()
            .filter(|(k, _)| *k < lo || *k >= hi)
            .map(|(_, s)| s)
            .collect();
        self.modup(level, j).convert_centered(&inputs, &mut outs)?;
        Ok(())
    }

    /// Mod-up: the digits of `d` (NTT form over `q_0..q_level`) raised to `Q_l P`.
    pub fn decompose(&self, d: &RnsPoly<W>, level: usize) -> Result<Decomposed<W>> {
        let q = self.q_basis(level)?;
        if !q.owns(d) || d.form() != Form::Ntt {
            return Err(CkksError::ParameterMismatch(format!(
                "key switching input is not an NTT-form polynomial at level {level}"
            )));
        }
        let qp = self.qp_basis(level)?;
        let alpha = self.params().alpha();
        let mut dc = d.clone();
        q.inverse(&mut dc)?;
        let num = (level + 1).div_ceil(alpha);
        let mut digits = Vec::with_capacity(num);
        for j in 0..num {
            let lo = j * alpha;
            let hi = ((j + 1) * alpha).min(level + 1);
            let mut ext = qp.zero(Form::Ntt);
            self.raise_digit(&dc, &mut ext, level, j)?;
            let tables = qp.ntt_tables();
            for (k, t) in tables.iter().enumerate() {
                if k >= lo && k < hi {
                    ext.limb_mut(k).copy_from_slice(d.limb(k));
                } else {
                    t.forward(ext.limb_mut(k))?;
                }
            }
            digits.push(ext);
        }
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
        self.check_fingerprint(key.fingerprint, "switching key")?;
        let level = dec.level;
        let qp = self.qp_basis(level)?;
        let num_q = self.max_level() + 1;
        if key.b.len() != self.params().dnum() || key.a.len() != key.b.len() {
            return Err(CkksError::ParameterMismatch(
                "switching key has the wrong number of digits".into(),
            ));
        }
        let n = self.n();
        let elt = qp.eltwise();
        let mut acc0 = qp.zero(Form::Ntt);
        let mut acc1 = qp.zero(Form::Ntt);
        let mut tmp = vec![W::ZERO; n];
        for (j, dj) in dec.digits.iter().enumerate() {
            let (bj, aj) = (&key.b[j], &key.a[j]);
            for (k, m) in qp.moduli().iter().enumerate() {
                let kk = if k <= level {
                    k
                } else {
                    num_q + (k - level - 1)
                };
                let src: &[W] = match perm {
                    Some(p) => {
                        p.apply(dj.limb(k), &mut tmp)?;
                        &tmp
                    }
                    None => dj.limb(k),
                };
                elt.mul_add2(
                    m,
                    acc0.limb_mut(k),
                    acc1.limb_mut(k),
                    src,
                    bj.limb(kk),
                    aj.limb(kk),
                )?;
            }
        }
        Ok((acc0, acc1))
    }

    /// Mod-down: `(x - [x]_P) / P` from `Q_l P` to `Q_l` (NTT form in and out).
    pub fn mod_down(&self, mut x: RnsPoly<W>, level: usize) -> Result<RnsPoly<W>> {
        let qp = self.qp_basis(level)?;
        let q = self.q_basis(level)?;
        let n = self.n();
        let alpha = self.params().alpha();
        let tables = qp.ntt_tables();
        let mut pc: Vec<Vec<W>> = Vec::with_capacity(alpha);
        for (k, t) in tables.iter().enumerate().skip(level + 1).take(alpha) {
            let mut v = x.limb(k).to_vec();
            t.inverse(&mut v)?;
            pc.push(v);
        }
        let mut conv = vec![W::ZERO; n * (level + 1)];
        {
            let inputs: Vec<&[W]> = pc.iter().map(|v| v.as_slice()).collect();
            let mut outs: Vec<&mut [W]> = conv.chunks_exact_mut(n).collect();
            self.moddown(level).convert_centered(&inputs, &mut outs)?;
        }
        let elt = qp.eltwise();
        for (i, c) in conv.chunks_exact_mut(n).enumerate() {
            tables[i].forward(c)?;
            elt.sub_mul_scalar(&qp.moduli()[i], x.limb_mut(i), c, self.p_inv(i))?;
        }
        Ok(q.truncate(x)?)
    }

    /// Switches `d` (NTT form at `level`) under `key`: returns `(c0, c1)` with
    /// `c0 + c1 s ~= d s'`. Digit by digit, so only one raised digit is alive at a time.
    pub fn key_switch(
        &self,
        d: &RnsPoly<W>,
        level: usize,
        key: &SwitchingKey<W>,
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
        let qp = self.qp_basis(level)?;
        let alpha = self.params().alpha();
        let num_q = self.max_level() + 1;
        let elt = qp.eltwise();
        let tables = qp.ntt_tables();
        let mut dc = d.clone();
        q.inverse(&mut dc)?;
        let mut ext = qp.zero(Form::Ntt);
        let mut acc0 = qp.zero(Form::Ntt);
        let mut acc1 = qp.zero(Form::Ntt);
        for j in 0..(level + 1).div_ceil(alpha) {
            let lo = j * alpha;
            let hi = ((j + 1) * alpha).min(level + 1);
            self.raise_digit(&dc, &mut ext, level, j)?;
            let (bj, aj) = (&key.b[j], &key.a[j]);
            for (k, (m, t)) in qp.moduli().iter().zip(tables).enumerate() {
                let kk = if k <= level {
                    k
                } else {
                    num_q + (k - level - 1)
                };
                let src: &[W] = if k >= lo && k < hi {
                    d.limb(k)
                } else {
                    t.forward(ext.limb_mut(k))?;
                    ext.limb(k)
                };
                elt.mul_add2(
                    m,
                    acc0.limb_mut(k),
                    acc1.limb_mut(k),
                    src,
                    bj.limb(kk),
                    aj.limb(kk),
                )?;
            }
        }
        Ok((self.mod_down(acc0, level)?, self.mod_down(acc1, level)?))
    }
}
