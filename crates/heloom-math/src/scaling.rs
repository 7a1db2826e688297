//! RNS scaling: exact division of an RNS polynomial by some of its primes, without leaving RNS.
//!
//! - [`Rescaler`]: divide-and-round by the last prime, `x -> round(x / q_l)` from
//!   `q_0..q_l` to `q_0..q_{l-1}`. This is CKKS rescaling (Cheon-Han-Kim-Kim-Song 2018, "A
//!   full RNS variant of approximate HE", Sec. 3.3): with `r = [x + floor(q_l/2)]_{q_l}`,
//!   `(x + floor(q_l/2) - r) / q_l = floor((x + floor(q_l/2)) / q_l)`, computed per limb as
//!   `(x_i - (r - floor(q_l/2))) * q_l^-1 mod q_i`. It is exact for every `x`.
//! - [`ModDown`]: `x -> (x - [x]_P) / P` from `Q P` to `Q` with the centered residue `[x]_P`
//!   (Gentry-Halevi-Smart 2012; Han-Ki 2020, Alg. 2), the last step of hybrid key switching.
//!   It rounds `x / P` to the nearest integer; the base conversion of `[x]_P` is exact except
//!   with negligible probability ([`BasisConverter::convert_centered`]).
//!
//! Both take and return NTT-form polynomials (the form ciphertexts live in) and split their
//! work over a thread budget; the result does not depend on the budget.
//!
//! ```
//! use heloom_math::{primes, Form, RnsBasis, Rescaler, Threads};
//! let qs = primes::ntt_primes::<u64>(40, 16, 3)?;
//! let basis = RnsBasis::<u64>::new(16, &qs)?;
//! let rescaler = Rescaler::new(&basis)?;
//! // x = 3 q_2 + 2 (every coefficient): round(x / q_2) = 3.
//! let x = (3 * qs[2] as u128 + 2) as u128;
//! let words: Vec<u64> = qs.iter().flat_map(|&q| vec![(x % q as u128) as u64; 16]).collect();
//! let mut p = basis.poly_from_words(&words, Form::Coeff)?;
//! basis.forward(&mut p)?;
//! let mut out = rescaler.divide_round(&[p], Threads::single())?.remove(0);
//! rescaler.to_basis().inverse(&mut out)?;
//! assert!(out.limbs().all(|limb| limb.iter().all(|&v| v == 3)));
//! # Ok::<(), heloom_math::MathError>(())
//! ```

use crate::error::{MathError, Result};
use crate::modulus::Modulus;
use crate::poly::{Form, RnsBasis, RnsPoly};
use crate::pool::BufferPool;
use crate::rns::BasisConverter;
use crate::word::Word;
use heloom_pool::Threads;

/// Checks that every polynomial belongs to `basis` and is in NTT form.
fn check_inputs<W: Word>(
    op: &'static str,
    basis: &RnsBasis<W>,
    polys: &[&RnsPoly<W>],
) -> Result<()> {
    for p in polys {
        basis.check_owns(op, p)?;
        if p.form() != Form::Ntt {
            return Err(MathError::FormMismatch {
                op,
                expected: Form::Ntt.name(),
                got: p.form().name(),
            });
        }
    }
    Ok(())
}

/// The product of `values` modulo `m`, exact.
fn product_mod<W: Word>(m: &Modulus<W>, values: impl Iterator<Item = u64>) -> W {
    values.fold(W::ONE, |acc, v| m.mul(acc, m.reduce_u64(v)))
}

/// Divide-and-round by the last prime of a basis (see the module docs): CKKS rescaling.
#[derive(Clone, Debug)]
pub struct Rescaler<W: Word> {
    from: RnsBasis<W>,
    to: RnsBasis<W>,
    /// `q_l^-1 mod q_i` for `i < l`.
    inv_last: Vec<u64>,
    /// Scratch limbs, recycled.
    pool: BufferPool<W>,
}

impl<W: Word> Rescaler<W> {
    /// Precomputes the division by the last prime of `from` (at least two primes); the result
    /// lives in the sub-basis of the other primes, which shares `from`'s tables.
    pub fn new(from: &RnsBasis<W>) -> Result<Self> {
        let k = from.len();
        if k < 2 {
            return Err(MathError::ShapeMismatch(
                "dividing by the last prime needs a basis of at least two primes (a ciphertext at level 0 has none left to divide by)".into(),
            ));
        }
        let indices: Vec<usize> = (0..k - 1).collect();
        let to = from.select(&indices)?;
        let mods = from.moduli();
        let ql = mods[k - 1].value();
        let inv_last = mods[..k - 1]
            .iter()
            .map(|m| m.inv(m.reduce_u64(ql)).map(|x| x.to_u64()))
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            from: from.clone(),
            to,
            inv_last,
            pool: BufferPool::new(),
        })
    }

    /// The basis `q_0..q_l` of the inputs.
    pub fn from_basis(&self) -> &RnsBasis<W> {
        &self.from
    }

    /// The basis `q_0..q_{l-1}` of the outputs.
    pub fn to_basis(&self) -> &RnsBasis<W> {
        &self.to
    }

    /// `q_l^-1 mod q_i` for `i < l` (for accelerator backends that reproduce this division).
    pub fn inv_last(&self) -> &[u64] {
        &self.inv_last
    }

    /// `round(x / q_l)` of every polynomial (NTT form in and out), rounding halves up.
    ///
    /// With a budget of `t` threads and `np` polynomials, whole polynomials go to threads when
    /// one count divides the other; otherwise the last limbs are prepared first and every
    /// (polynomial, limb) pair is a work item.
    pub fn divide_round(&self, polys: &[RnsPoly<W>], threads: Threads) -> Result<Vec<RnsPoly<W>>> {
        let refs: Vec<&RnsPoly<W>> = polys.iter().collect();
        check_inputs("divide-and-round by the last prime", &self.from, &refs)?;
        let l = self.from.len() - 1;
        let n = self.from.n();
        let threads = threads.effective();
        let tables = self.from.ntt_tables();
        let mods = self.from.moduli();
        let elt = self.from.eltwise();
        let ql = mods[l];
        let half = ql.value() >> 1;
        // The last limb in coefficient form plus floor(q_l/2) (in place: it is dropped after).
        let prepare = |p: &RnsPoly<W>| -> Result<RnsPoly<W>> {
            let mut p = p.clone();
            let last = p.limb_mut(l);
            tables[l].inverse(last)?;
            let hw = W::from_u64(half);
            for x in last.iter_mut() {
                *x = ql.add(*x, hw);
            }
            Ok(p)
        };
        // Limb i < l: subtract r - floor(q_l/2) reduced mod q_i, then multiply by q_l^-1.
        let limb = |t: &mut [W], i: usize, x: &mut [W], last: &[W]| -> Result<()> {
            let m = &mods[i];
            elt.reduce(m, t, last)?;
            let h = m.reduce_u64(half);
            for v in t.iter_mut() {
                *v = m.sub(*v, h);
            }
            tables[i].forward(t)?;
            elt.sub_mul_scalar(m, x, t, self.inv_last[i])
        };
        let np = polys.len();
        let c = threads.get();
        let out = if np.is_multiple_of(c) || c.is_multiple_of(np) {
            // Whole polynomials per thread (or an even share of threads per polynomial): one
            // pass, no hand-over between threads.
            threads
                .map(np, |p| -> Result<RnsPoly<W>> {
                    let t = threads.share(np, p);
                    let mut poly = prepare(&polys[p])?;
                    let (low, last) = poly.as_mut_slice().split_at_mut(l * n);
                    let last: &[W] = last;
                    if t.get() == 1 {
                        let mut tmp = self.pool.scratch(n);
                        for (i, x) in low.chunks_exact_mut(n).enumerate() {
                            limb(&mut tmp, i, x, last)?;
                        }
                    } else {
                        let mut items: Vec<&mut [W]> = low.chunks_exact_mut(n).collect();
                        t.try_for_each_init(
                            &mut items,
                            || self.pool.scratch(n),
                            |tmp, i, x| limb(tmp, i, x, last),
                        )?;
                    }
                    Ok(poly)
                })
                .into_iter()
                .collect::<Result<Vec<_>>>()?
        } else {
            let mut out = threads
                .map(np, |p| prepare(&polys[p]))
                .into_iter()
                .collect::<Result<Vec<_>>>()?;
            let mut lasts: Vec<&[W]> = Vec::with_capacity(np);
            let mut items: Vec<&mut [W]> = Vec::with_capacity(np * l);
            for poly in &mut out {
                let (low, last) = poly.as_mut_slice().split_at_mut(l * n);
                lasts.push(last);
                items.extend(low.chunks_exact_mut(n));
            }
            threads.try_for_each_init(
                &mut items,
                || self.pool.scratch(n),
                |tmp, k, x| limb(tmp, k % l, x, lasts[k / l]),
            )?;
            drop(items);
            out
        };
        out.into_iter().map(|p| self.to.truncate(p)).collect()
    }
}

/// Mod-down from `Q P` to `Q` (see the module docs): the division by the special primes that
/// ends hybrid key switching.
#[derive(Clone, Debug)]
pub struct ModDown<W: Word> {
    from: RnsBasis<W>,
    to: RnsBasis<W>,
    /// Fast base conversion from the `P` primes to the `Q` primes.
    conv: BasisConverter<W>,
    /// `P^-1 mod q_i`.
    p_inv: Vec<u64>,
    /// Scratch (the `P` limbs, the converted limbs), recycled.
    pool: BufferPool<W>,
}

impl<W: Word> ModDown<W> {
    /// Precomputes the division of polynomials over `from = q_0..q_{k-1}, p_0..p_{m-1}` by
    /// `P = p_0 ... p_{m-1}` (the last `num_p` primes, at least one, and at least one `q`).
    pub fn new(from: &RnsBasis<W>, num_p: usize) -> Result<Self> {
        let total = from.len();
        if num_p == 0 || num_p >= total {
            return Err(MathError::ShapeMismatch(format!(
                "mod-down needs at least one special prime and one prime to keep; asked to divide by {num_p} of {total} primes"
            )));
        }
        let k = total - num_p;
        let indices: Vec<usize> = (0..k).collect();
        let to = from.select(&indices)?;
        let mods = from.moduli();
        let conv = BasisConverter::new(&mods[k..], &mods[..k], *from.eltwise())?;
        let p_inv = mods[..k]
            .iter()
            .map(|m| {
                let p = product_mod(m, mods[k..].iter().map(|p| p.value()));
                m.inv(p).map(|x| x.to_u64())
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            from: from.clone(),
            to,
            conv,
            p_inv,
            pool: BufferPool::new(),
        })
    }

    /// The basis `Q P` of the inputs.
    pub fn from_basis(&self) -> &RnsBasis<W> {
        &self.from
    }

    /// The basis `Q` of the outputs.
    pub fn to_basis(&self) -> &RnsBasis<W> {
        &self.to
    }

    /// The base converter from the `P` primes to the `Q` primes.
    pub fn converter(&self) -> &BasisConverter<W> {
        &self.conv
    }

    /// `P^-1 mod q_i` for every kept prime.
    pub fn p_inv(&self) -> &[u64] {
        &self.p_inv
    }

    /// `(x - [x]_P) / P` (NTT form in and out), consuming `x`: the inverse NTTs of the `P`
    /// limbs, the base conversion (over coefficient ranges) and the per-limb NTT and
    /// subtraction are each split over `threads`.
    pub fn apply(&self, mut x: RnsPoly<W>, threads: Threads) -> Result<RnsPoly<W>> {
        check_inputs("mod-down", &self.from, &[&x])?;
        let n = self.from.n();
        let k = self.to.len();
        let tables = self.from.ntt_tables();
        // The P limbs in coefficient form.
        let mut pc = self.pool.scratch(x.as_slice().len() - k * n);
        pc.copy_from_slice(&x.as_slice()[k * n..]);
        threads.try_for_each_chunk_mut(&mut pc, n, |i, v| tables[k + i].inverse(v))?;
        let mut conv = self.pool.scratch(n * k);
        {
            let inputs: Vec<&[W]> = pc.chunks_exact(n).collect();
            let mut outs: Vec<&mut [W]> = conv.chunks_exact_mut(n).collect();
            self.conv
                .convert_centered_with(&inputs, &mut outs, threads)?;
        }
        let elt = self.from.eltwise();
        let moduli = self.from.moduli();
        let mut limbs: Vec<(&mut [W], &mut [W])> = conv
            .chunks_exact_mut(n)
            .zip(x.as_mut_slice().chunks_exact_mut(n))
            .collect();
        threads.try_for_each_mut(&mut limbs, |i, (c, xi)| -> Result<()> {
            tables[i].forward(c)?;
            elt.sub_mul_scalar(&moduli[i], xi, c, self.p_inv[i])
        })?;
        drop(limbs);
        self.to.truncate(x)
    }
}
