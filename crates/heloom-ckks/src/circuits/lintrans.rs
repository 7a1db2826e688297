//! Linear transforms of the slots by generalized diagonals (Halevi-Shoup 2014, "Algorithms in
//! HElib", Sec. 4.3) with baby-step giant-step and hoisted baby steps (Halevi-Shoup 2018,
//! "Faster homomorphic linear transformations in HElib", Sec. 4.1-4.2).
//!
//! For an input of rotation period `L` (the ciphertext's slot count) and diagonals `diag_i`
//! (length `L`),
//!
//! ```text
//! T(v) = sum_i diag_i ⊙ rot(v, i)                                        (HS14, eq. 4.3)
//!      = sum_a rot( sum_{b < g} rot(diag_{g a + b}, -g a) ⊙ rot(v, b), g a )
//! ```
//!
//! (HS18, Sec. 4.1: `rot` commutes with `⊙`). The `g - 1` baby rotations `rot(v, b)` share one
//! key-switching decomposition of `v` ([`Evaluator::rotate_many`]); each giant rotation acts on
//! an inner sum. The diagonals are pre-rotated by `-g a` in the clear and encoded once at scale
//! `q_level`, the prime the following rescale divides by, so the transform keeps the input's
//! scale and uses one level. All-zero diagonals are skipped, with their rotations.
//!
//! A matrix-vector product (`diag_i[t] = M[t][(t + i) mod L]`) and the dense layers of
//! CryptoNets are both such transforms.

use super::accumulate;
use crate::ciphertext::{Ciphertext, Plaintext};
use crate::context::Context;
use crate::encoder::{reduce_u128, reduce_u64};
use crate::error::{CkksError, Result};
use crate::evaluator::Evaluator;
use crate::polyops::PolyOps;
use heloom_math::{Form, Modulus, Word};
use heloom_pool::Threads;
use num_complex::Complex64;
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;

/// The giant-step groups as rotation amounts: `(G, [(B, rot(diag_{G + B}, -G))])` for the
/// diagonal at offset `G + B` (dense transforms: `G = g a`, `B = b`), non-zero diagonals only,
/// each diagonal encoded (for the CPU path) and, for real transforms, as its values (for
/// [`PolyOps`] backends, which encode their own).
type Groups<W> = Vec<(i64, GroupTerms<W>)>;

/// One giant-step group's `(B, diagonal, values)` terms.
type GroupTerms<W> = Vec<(i64, Diag<W>, Option<Arc<[f64]>>)>;

/// An encoded diagonal: in NTT form, ready to multiply, or compact
/// ([`LinearTransform::with_compact_diagonals`]): its `N` integer coefficients, one word each
/// instead of one per prime, expanded (reduced and transformed) at each use.
#[derive(Clone, Debug)]
enum Diag<W: Word> {
    Ntt(Plaintext<W>),
    Compact(Arc<CompactDiag<W>>),
}

/// A diagonal's signed coefficients with what its plaintext needs.
#[derive(Debug)]
struct CompactDiag<W: Word> {
    ctx: Arc<Context<W>>,
    coeffs: Coeffs,
    /// The largest `|coefficient|`: below a prime, a limb is one conditional add.
    max_abs: u128,
    level: usize,
    scale: f64,
    slots: usize,
}

/// Signed coefficients: one word each when they fit 63 bits, else two.
#[derive(Debug)]
enum Coeffs {
    Small(Box<[i64]>),
    Large(Box<[i128]>),
}

impl Coeffs {
    fn bytes(&self) -> usize {
        match self {
            Coeffs::Small(c) => c.len() * 8,
            Coeffs::Large(c) => c.len() * 16,
        }
    }
}

impl Coeffs {
    /// The coefficients modulo `m` into `out`.
    fn reduce_into<W: Word>(&self, m: &Modulus<W>, out: &mut [W], max_abs: u128) {
        let q = m.value();
        match self {
            // |c| < q: one conditional add (vectorizes).
            Coeffs::Small(v) if max_abs < u128::from(q) => {
                for (o, &c) in out.iter_mut().zip(v.iter()) {
                    *o = W::from_u64((c + ((c >> 63) & q as i64)) as u64);
                }
            }
            Coeffs::Small(v) => {
                for (o, &c) in out.iter_mut().zip(v.iter()) {
                    let r = reduce_u64(m, c.unsigned_abs());
                    *o = if c < 0 { m.neg(r) } else { r };
                }
            }
            Coeffs::Large(v) => {
                for (o, &c) in out.iter_mut().zip(v.iter()) {
                    let r = reduce_u128(m, c.unsigned_abs());
                    *o = if c < 0 { m.neg(r) } else { r };
                }
            }
        }
    }
}

impl<W: Word> Diag<W> {
    /// The NTT-form plaintext: borrowed, or expanded on `threads`.
    fn get(&self, threads: Threads) -> Result<Cow<'_, Plaintext<W>>> {
        match self {
            Diag::Ntt(pt) => Ok(Cow::Borrowed(pt)),
            Diag::Compact(c) => {
                let basis = c.ctx.q_basis(c.level)?;
                // A recycled buffer, each limb reduced and transformed while in cache.
                let mut poly = c.ctx.pool().for_overwrite(basis, Form::Ntt);
                let (mods, tables) = (basis.moduli(), basis.ntt_tables());
                threads.try_for_each_chunk_mut(
                    poly.as_mut_slice(),
                    basis.n(),
                    |i, limb| -> Result<()> {
                        c.coeffs.reduce_into(&mods[i], limb, c.max_abs);
                        Ok(tables[i].forward(limb)?)
                    },
                )?;
                Ok(Cow::Owned(Plaintext {
                    poly,
                    level: c.level,
                    scale: c.scale,
                    slots: c.slots,
                    fingerprint: c.ctx.fingerprint(),
                }))
            }
        }
    }

    /// Hands an expanded plaintext's buffer back to its context's pool.
    fn done(&self, pt: Cow<'_, Plaintext<W>>) {
        if let (Diag::Compact(c), Cow::Owned(p)) = (self, pt) {
            c.ctx.pool().recycle(p.poly);
        }
    }

    fn bytes(&self) -> usize {
        match self {
            Diag::Ntt(pt) => pt.poly().as_slice().len() * (W::BITS as usize / 8),
            Diag::Compact(c) => c.coeffs.bytes(),
        }
    }
}

/// `a^-1 mod m` for coprime `a` and `m` (extended Euclid).
fn inverse_mod(a: u128, m: u128) -> Option<u128> {
    let (mut r0, mut r1) = (a as i128 % m as i128, m as i128);
    let (mut s0, mut s1) = (1i128, 0i128);
    while r1 != 0 {
        let q = r0 / r1;
        (r0, r1) = (r1, r0 - q * r1);
        (s0, s1) = (s1, s0 - q * s1);
    }
    (r0 == 1).then(|| s0.rem_euclid(m as i128) as u128)
}

/// The signed coefficients of `pt`, read from its first three limbs (two by the CRT, the third
/// to confirm), or `None` where they do not fit (or `pt` has fewer limbs).
fn compact_coefficients<W: Word>(
    ctx: &Context<W>,
    pt: &Plaintext<W>,
) -> Result<Option<(Coeffs, u128)>> {
    if pt.level < 2 {
        return Ok(None);
    }
    let b3 = ctx.q_basis(2)?;
    let mut p = b3.zero(Form::Ntt);
    for i in 0..3 {
        p.limb_mut(i).copy_from_slice(pt.poly.limb(i));
    }
    b3.inverse(&mut p)?;
    let m = b3.moduli();
    let (q0, q1, q2) = (
        m[0].value() as u128,
        m[1].value() as u128,
        m[2].value() as u128,
    );
    let Some(q0_inv) = inverse_mod(q0, q1) else {
        return Ok(None);
    };
    let (big, half) = (q0 * q1, (q0 * q1) / 2);
    let mut out = Vec::with_capacity(ctx.n());
    for k in 0..ctx.n() {
        let (r0, r1, r2) = (
            p.limb(0)[k].to_u64() as u128,
            p.limb(1)[k].to_u64() as u128,
            p.limb(2)[k].to_u64() as u128,
        );
        // x = r0 + q0 t, t = (r1 - r0) q0^-1 mod q1; below q0 q1 < 2^124.
        let t = ((r1 + q1 - r0 % q1) % q1) * q0_inv % q1;
        let x = r0 + q0 * t;
        let v: i128 = if x > half {
            x as i128 - big as i128
        } else {
            x as i128
        };
        if (v.rem_euclid(q2 as i128)) as u128 != r2 {
            return Ok(None);
        }
        out.push(v);
    }
    let max_abs = out.iter().map(|v| v.unsigned_abs()).max().unwrap_or(0);
    let coeffs = match out
        .iter()
        .map(|&v| i64::try_from(v))
        .collect::<std::result::Result<Vec<i64>, _>>()
    {
        Ok(small) => Coeffs::Small(small.into_boxed_slice()),
        Err(_) => Coeffs::Large(out.into_boxed_slice()),
    };
    Ok(Some((coeffs, max_abs)))
}

/// The indices of the groups by centred giant step (Horner form).
type ByGiant = BTreeMap<i64, Vec<usize>>;

/// A [`PolyOps`] backend that multiplies by plaintexts it holds in its own form (the GPU keeps
/// a transform's diagonals on the device): what [`LinearTransform::apply_with`] needs.
pub trait PlainOps: PolyOps {
    /// A plaintext as the backend holds it.
    type Pt;
    /// `acc += ct * pt`, or `acc = ct * pt` when `acc` is `None`, the product labelled
    /// `scale(ct) * scale(pt)` (as [`Evaluator::multiply_plain_accumulate`]).
    fn multiply_plain_accumulate(
        &self,
        acc: &mut Option<Self::Ct>,
        ct: &Self::Ct,
        pt: &Self::Pt,
    ) -> Result<()>;
}

impl<W: Word> PlainOps for Evaluator<W> {
    type Pt = Plaintext<W>;
    fn multiply_plain_accumulate(
        &self,
        acc: &mut Option<Ciphertext<W>>,
        ct: &Ciphertext<W>,
        pt: &Plaintext<W>,
    ) -> Result<()> {
        Evaluator::multiply_plain_accumulate(self, acc, ct, pt)
    }
}

/// The baby-step count for `n` consecutive diagonals: the power of two nearest `sqrt(n)` from
/// below (`1` for `n <= 2`), which balances baby and giant rotations.
pub fn baby_steps(n: usize) -> usize {
    let n = n.max(1);
    let log = usize::BITS - 1 - n.leading_zeros();
    1usize << (log / 2)
}

/// The baby-step count for `n` consecutive diagonals when the baby rotations are hoisted:
/// the power of two `b` minimising `(b - 1) + 2 ceil(n / b)`, a hoisted baby rotation costing
/// about half a giant one (no decomposition of its own), ties to the smaller `b` (fewer
/// keys). For the 63 diagonals of five merged DFT stages it is 8 (7 + 8 rotations): measured
/// at N = 2^16, 6.2 s per bootstrap against 7.9 s with [`baby_steps`]' 4 (3 + 16).
pub fn hoisted_baby_steps(n: usize) -> usize {
    let n = n.max(1);
    let cost = |b: usize| (b - 1) + 2 * n.div_ceil(b);
    let mut best = 1;
    let mut b = 2;
    while b <= n {
        if cost(b) < cost(best) {
            best = b;
        }
        b *= 2;
    }
    best
}

/// `v` rotated left by `r` with wrap-around: `out[t] = v[(t + r) mod len]`.
pub fn rotate_values(v: &[f64], r: i64) -> Vec<f64> {
    rotate_any(v, r)
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

fn rotate_any<T: Copy>(v: &[T], r: i64) -> Vec<T> {
    let n = v.len();
    if n == 0 {
        return Vec::new();
    }
    let r = r.rem_euclid(n as i64) as usize;
    (0..n).map(|t| v[(t + r) % n]).collect()
}

/// A linear transform encoded as its pre-rotated generalized diagonals, ready to apply to
/// ciphertexts of `period` slots at one level (see the module docs).
#[derive(Clone, Debug)]
pub struct LinearTransform<W: Word> {
    period: usize,
    baby: usize,
    level: usize,
    groups: Groups<W>,
    /// Whether the giant steps run in Horner form (sparse transforms), in units of the baby
    /// span `g` = [`Self::baby`]: `sum_(a > 0) rot(I_a, a g) = rot(.. rot(rot(I_max, g) +
    /// I_(max-1), g) .., g)` and likewise with `-g` for `a < 0`: two Galois keys instead of
    /// one per group.
    horner: bool,
    /// Baby steps from power-of-two keys, one rotation after another
    /// ([`Self::with_fewer_keys`]).
    fewer_keys: bool,
}

impl<W: Word> LinearTransform<W> {
    /// Encodes the transform with `count` diagonals, `diagonal(i)` giving the `period` values
    /// of diagonal `i` (all-zero ones are skipped), for inputs at `level` (at least 1: the
    /// transform uses one), with `baby` baby steps ([`baby_steps`] of `count` balances the
    /// rotations). The encodings are split over `threads`.
    pub fn new(
        ctx: &Arc<Context<W>>,
        period: usize,
        count: usize,
        baby: usize,
        level: usize,
        diagonal: impl Fn(usize) -> Vec<f64>,
        threads: Threads,
    ) -> Result<Self> {
        Self::build(ctx, period, count, baby, level, threads, |i| {
            let d = diagonal(i);
            let c = d.iter().map(|&x| Complex64::new(x, 0.0)).collect();
            (c, Some(d))
        })
    }

    /// [`Self::new`] with complex diagonals (the homomorphic DFT of bootstrapping). Such a
    /// transform runs on the CPU evaluator ([`Self::apply`]) and on backends that hold its
    /// encoded diagonals ([`Self::apply_with`], the GPU); [`Self::apply_on`] refuses it.
    pub fn new_complex(
        ctx: &Arc<Context<W>>,
        period: usize,
        count: usize,
        baby: usize,
        level: usize,
        diagonal: impl Fn(usize) -> Vec<Complex64>,
        threads: Threads,
    ) -> Result<Self> {
        Self::build(ctx, period, count, baby, level, threads, |i| {
            (diagonal(i), None)
        })
    }

    fn build(
        ctx: &Arc<Context<W>>,
        period: usize,
        count: usize,
        baby: usize,
        level: usize,
        threads: Threads,
        diagonal: impl Fn(usize) -> (Vec<Complex64>, Option<Vec<f64>>),
    ) -> Result<Self> {
        Self::check_shape(ctx, period, count, baby, level)?;
        let offsets: Vec<(usize, i64, i64)> = (0..count)
            .map(|i| (i, ((i / baby) * baby) as i64, (i % baby) as i64))
            .collect();
        let groups = Self::encode_groups(ctx, period, level, threads, &offsets, diagonal)?;
        Ok(Self {
            period,
            baby,
            level,
            groups,
            horner: false,
            fewer_keys: false,
        })
    }

    /// A transform with complex diagonals at the given `offsets` only (each in `0..period`;
    /// the homomorphic DFT's butterfly stages have a few, `stride` apart), for inputs at
    /// `level`. Baby-step giant-step over the offsets as multiples of their stride, taken in
    /// `(-period/2, period/2]` so that a stage's `+h` and `-h` share their rotations;
    /// [`hoisted_baby_steps`] of the offsets' span baby steps. Runs where
    /// [`Self::new_complex`] runs.
    pub fn new_sparse_complex(
        ctx: &Arc<Context<W>>,
        period: usize,
        offsets: &[usize],
        level: usize,
        diagonal: impl Fn(usize) -> Vec<Complex64>,
        threads: Threads,
    ) -> Result<Self> {
        Self::check_shape(ctx, period, offsets.len(), 1, level)?;
        if let Some(o) = offsets.iter().find(|&&o| o >= period) {
            return Err(CkksError::InvalidInput(format!(
                "diagonal offset {o} for inputs of {period} slots; offsets lie in 0..{period}"
            )));
        }
        let half = (period / 2) as i64;
        let centred = |o: usize| -> i64 {
            let o = o as i64;
            if o > half {
                o - period as i64
            } else {
                o
            }
        };
        let stride = offsets
            .iter()
            .map(|&o| centred(o).unsigned_abs() as usize)
            .filter(|&o| o > 0)
            .fold(0, gcd)
            .max(1);
        let (lo, hi) = offsets
            .iter()
            .map(|&o| centred(o) / stride as i64)
            .fold((0i64, 0i64), |(a, b), k| (a.min(k), b.max(k)));
        let baby = hoisted_baby_steps((hi - lo + 1) as usize) as i64;
        let split: Vec<(usize, i64, i64)> = offsets
            .iter()
            .map(|&o| {
                let k = centred(o) / stride as i64;
                let (a, b) = (k.div_euclid(baby), k.rem_euclid(baby));
                (o, a * baby * stride as i64, b * stride as i64)
            })
            .collect();
        let groups =
            Self::encode_groups(ctx, period, level, threads, &split, |o| (diagonal(o), None))?;
        Ok(Self {
            period,
            baby: baby as usize * stride,
            level,
            groups,
            horner: true,
            fewer_keys: false,
        })
    }

    fn check_shape(
        ctx: &Arc<Context<W>>,
        period: usize,
        count: usize,
        baby: usize,
        level: usize,
    ) -> Result<()> {
        let slots = ctx.params().slots();
        if period == 0 || period > slots || !period.is_power_of_two() {
            return Err(CkksError::InvalidInput(format!(
                "a linear transform acts on a power-of-two number of slots up to N/2 = {slots}; got {period}"
            )));
        }
        if count > period {
            return Err(CkksError::InvalidInput(format!(
                "{count} diagonals for inputs of {period} slots; there are at most {period}"
            )));
        }
        if baby == 0 {
            return Err(CkksError::InvalidInput(
                "the baby-step count must be at least 1".into(),
            ));
        }
        if level == 0 || level > ctx.max_level() {
            return Err(CkksError::OutOfLevels {
                level,
                needed: 1,
                hint: format!(
                    "a linear transform uses one level; inputs at level {level} cannot be used (levels 1..={} can)",
                    ctx.max_level()
                ),
            });
        }
        Ok(())
    }

    /// Encodes the diagonals at `(offset, giant, baby)` (`offset = giant + baby` modulo
    /// `period`), each pre-rotated by `-giant` for its giant step (HS18, 4.1), grouped by
    /// giant step in the order given; all-zero diagonals are skipped.
    fn encode_groups(
        ctx: &Arc<Context<W>>,
        period: usize,
        level: usize,
        threads: Threads,
        split: &[(usize, i64, i64)],
        diagonal: impl Fn(usize) -> (Vec<Complex64>, Option<Vec<f64>>),
    ) -> Result<Groups<W>> {
        type Job = (i64, i64, Vec<Complex64>, Option<Vec<f64>>);
        let mut jobs: Vec<Job> = Vec::new();
        for &(i, giant, baby) in split {
            let (diag, real) = diagonal(i);
            if diag.len() != period {
                return Err(CkksError::InvalidInput(format!(
                    "diagonal {i} has {} values; inputs of {period} slots need {period}",
                    diag.len()
                )));
            }
            if let Some(x) = diag
                .iter()
                .find(|x| !(x.re.is_finite() && x.im.is_finite()))
            {
                return Err(CkksError::InvalidInput(format!(
                    "diagonal {i} holds {x}, not a finite number"
                )));
            }
            if diag.iter().any(|x| x.re != 0.0 || x.im != 0.0) {
                jobs.push((
                    giant,
                    baby,
                    rotate_any(&diag, -giant),
                    real.map(|d| rotate_any(&d, -giant)),
                ));
            }
        }
        jobs.sort_by_key(|j| (j.0, j.1));
        let scale = ctx.params().moduli()[level] as f64;
        let encoded = threads.map(jobs.len(), |k| {
            ctx.encode_complex_at(&jobs[k].2, level, scale)
        });
        let mut groups: Groups<W> = Vec::new();
        for ((a, b, _, values), pt) in jobs.into_iter().zip(encoded) {
            let term = (b, Diag::Ntt(pt?), values.map(Arc::from));
            match groups.last_mut() {
                Some((last, terms)) if *last == a => terms.push(term),
                _ => groups.push((a, vec![term])),
            }
        }
        Ok(groups)
    }

    /// The input's slot count (the rotation period).
    pub fn period(&self) -> usize {
        self.period
    }

    /// The level the diagonals are encoded at (inputs above it are dropped to it).
    pub fn level(&self) -> usize {
        self.level
    }

    /// The baby-step span `g`: the baby-step count, times the offsets' stride for
    /// [`Self::new_sparse_complex`].
    pub fn baby(&self) -> usize {
        self.baby
    }

    /// Number of non-zero diagonals (plaintext multiplications per application).
    pub fn nonzero_diagonals(&self) -> usize {
        self.groups.iter().map(|(_, t)| t.len()).sum()
    }

    /// The transform with its baby steps taken from Galois keys for power-of-two steps only
    /// (`on`): baby step `b` is `rot(rot(v, b - low), low)`, `low` the lowest set bit of `b`,
    /// one rotation after another instead of all hoisted from one decomposition. About
    /// `log2` as many baby-step keys as baby steps, each baby rotation a full key switch.
    /// Results equal the hoisted ones up to the extra rotations' noise.
    pub fn with_fewer_keys(mut self, on: bool) -> Self {
        self.fewer_keys = on;
        self
    }

    /// The baby-step rotations of `v`, in the order of `babies`: hoisted from one
    /// decomposition, or with [`Self::with_fewer_keys`] chained from power-of-two steps.
    fn baby_rotated<O: PolyOps>(&self, ev: &O, v: &O::Ct, babies: &[i64]) -> Result<Vec<O::Ct>> {
        if !self.fewer_keys || babies.iter().any(|&b| b < 0) {
            return ev.rotate_many(v, babies);
        }
        let mut done: BTreeMap<i64, O::Ct> = BTreeMap::new();
        for &b in babies {
            // Each step's chain of lower parts, lowest first.
            let mut chain = vec![b];
            let mut x = b;
            while x != 0 && !done.contains_key(&x) {
                x -= x & -x;
                chain.push(x);
            }
            for w in chain.windows(2).rev() {
                let (hi, lo) = (w[0], w[1]);
                if done.contains_key(&hi) {
                    continue;
                }
                let from = if lo == 0 { v } else { &done[&lo] };
                let r = ev.rotate(from, hi - lo)?;
                done.insert(hi, r);
            }
        }
        babies
            .iter()
            .map(|b| {
                done.get(b).cloned().ok_or_else(|| {
                    CkksError::InvalidInput(format!("internal: baby step {b} not computed"))
                })
            })
            .collect()
    }

    /// Bytes held by the encoded diagonals.
    pub fn memory_bytes(&self) -> usize {
        self.groups
            .iter()
            .flat_map(|(_, t)| t.iter())
            .map(|(_, d, _)| d.bytes())
            .sum()
    }

    /// In Horner form, when some group needs a rotation: the giant-step unit and the groups by
    /// giant step taken in `(-period/2, period/2]` (a step that is a multiple of the period
    /// rotates nothing).
    fn horner_groups(&self) -> Option<(i64, ByGiant)> {
        if !self.horner {
            return None;
        }
        let p = self.period as i64;
        let mut m = ByGiant::new();
        for (i, (a, _)) in self.groups.iter().enumerate() {
            let mut c = a.rem_euclid(p);
            if c > p / 2 {
                c -= p;
            }
            m.entry(c).or_default().push(i);
        }
        m.keys().any(|&a| a != 0).then_some((self.baby as i64, m))
    }

    /// The Horner form's sum: two chains over the giant steps `by_giant`, away from zero: for
    /// `a > 0`, `acc = rot(acc, g) + I_a` from the highest `a` down and one last rotation by
    /// `g`; for `a < 0` the same with `-g`; then the groups at 0. As many rotations as one per
    /// group, with two keys. `inner(acc, i)` adds group `i`'s inner sum to `acc`.
    fn horner_sum<O: PolyOps>(
        &self,
        ops: &O,
        g: i64,
        by_giant: &ByGiant,
        inner: impl Fn(&mut Option<O::Ct>, usize) -> Result<()>,
    ) -> Result<Option<O::Ct>> {
        let add = |total: &mut Option<O::Ct>, x: O::Ct| -> Result<()> {
            *total = Some(match total.take() {
                Some(y) => ops.add(&y, &x)?,
                None => x,
            });
            Ok(())
        };
        let mut total = None;
        for (sign, unit) in [(1i64, g), (-1, -g)] {
            let far = by_giant.keys().map(|a| a * sign).max().unwrap_or(0);
            let mut acc = None;
            let mut a = far;
            while a > 0 {
                if let Some(x) = acc.take() {
                    acc = Some(ops.rotate(&x, unit)?);
                }
                for &i in by_giant.get(&(a * sign)).into_iter().flatten() {
                    inner(&mut acc, i)?;
                }
                a -= g;
            }
            if let Some(x) = acc {
                add(&mut total, ops.rotate(&x, unit)?)?;
            }
        }
        let mut zero = None;
        for &i in by_giant.get(&0).into_iter().flatten() {
            inner(&mut zero, i)?;
        }
        if let Some(z) = zero {
            add(&mut total, z)?;
        }
        Ok(total)
    }

    /// The rotation steps an application uses (Galois keys needed): the baby steps of the
    /// non-zero diagonals, then the giant steps of the non-empty groups (in Horner form `g`
    /// and `-g`, for the directions some group rotates in).
    pub fn used_steps(&self) -> Vec<i64> {
        let mut babies: Vec<i64> = self
            .groups
            .iter()
            .flat_map(|(_, t)| t.iter().map(|(b, _, _)| *b))
            .filter(|&b| b != 0)
            .collect();
        babies.sort_unstable();
        babies.dedup();
        if self.fewer_keys && babies.iter().all(|&b| b > 0) {
            // The lowest set bits of the steps (see Self::baby_rotated).
            babies = babies.iter().map(|&b| b & -b).collect();
            babies.sort_unstable();
            babies.dedup();
        }
        let giants: Vec<i64> = match self.horner_groups() {
            Some((g, keys)) => [
                (g, keys.keys().any(|&a| a > 0)),
                (-g, keys.keys().any(|&a| a < 0)),
            ]
            .into_iter()
            .filter_map(|(s, used)| used.then_some(s))
            .collect(),
            None => self
                .groups
                .iter()
                .filter(|(a, _)| *a != 0)
                .map(|(a, _)| *a)
                .collect(),
        };
        babies.into_iter().chain(giants).collect()
    }

    /// `T(v)` before the rescale, at the transform's level with scale `scale(v) * q_level`
    /// (follow with [`Evaluator::rescale`], or use [`Self::apply_rescaled`]). `v` must hold
    /// `period` slots and sit at or above the transform's level; `ev` needs the Galois keys of
    /// [`Self::used_steps`]. The giant-step groups are dealt out to `ev`'s threads.
    pub fn apply(&self, ev: &Evaluator<W>, v: &Ciphertext<W>) -> Result<Ciphertext<W>> {
        if v.slots() != self.period {
            return Err(CkksError::InvalidInput(format!(
                "the input holds {} slots; this transform rotates with period {} (encrypt exactly {} values)",
                v.slots(),
                self.period,
                self.period
            )));
        }
        self.check_input_level(v.level())?;
        let v: Cow<'_, Ciphertext<W>> = if v.level() > self.level {
            Cow::Owned(ev.drop_to_level(v, self.level)?)
        } else {
            Cow::Borrowed(v)
        };
        if self.groups.is_empty() {
            // The zero transform: a zero ciphertext with the scale a product would have.
            return ev.multiply_const(v.as_ref(), 0.0);
        }
        // Baby steps rot(v, b), hoisted: one decomposition of v for all of them.
        let babies = self.baby_rotations();
        let rotated = self.baby_rotated(ev, v.as_ref(), &babies)?;
        let baby = |b: i64| -> Result<&Ciphertext<W>> {
            if b == 0 {
                return Ok(v.as_ref());
            }
            babies
                .iter()
                .position(|&s| s == b)
                .map(|i| &rotated[i])
                .ok_or_else(|| {
                    CkksError::InvalidInput(format!("internal: baby step {b} not computed"))
                })
        };
        if let Some((g, by_giant)) = self.horner_groups() {
            // Each inner sum and rotation uses every thread (limb by limb).
            let total = self.horner_sum(ev, g, &by_giant, |acc, i| {
                for (b, d, _) in &self.groups[i].1 {
                    let pt = d.get(ev.threads())?;
                    ev.multiply_plain_accumulate(acc, baby(*b)?, &pt)?;
                    d.done(pt);
                }
                Ok(())
            })?;
            return total
                .ok_or_else(|| CkksError::InvalidInput("internal: empty linear transform".into()));
        }
        // Giant steps: independent groups, dealt out to the threads, partial sums added.
        let threads = ev.threads().effective();
        let n = self.groups.len();
        let parts = threads.get().min(n);
        let partial = threads.map(parts, |c| -> Result<Option<Ciphertext<W>>> {
            let e = ev.with_threads(threads.share(parts, c));
            let mut acc: Option<Ciphertext<W>> = None;
            for (a, terms) in &self.groups[c * n / parts..(c + 1) * n / parts] {
                // Inner sum: sum_b rot(diag_{g a + b}, -g a) ⊙ rot(v, b).
                let mut inner: Option<Ciphertext<W>> = None;
                for (b, d, _) in terms {
                    let pt = d.get(e.threads())?;
                    e.multiply_plain_accumulate(&mut inner, baby(*b)?, &pt)?;
                    d.done(pt);
                }
                let Some(mut inner) = inner else { continue };
                if *a != 0 {
                    inner = e.rotate(&inner, *a)?;
                }
                accumulate(&e, &mut acc, inner)?;
            }
            Ok(acc)
        });
        let mut acc: Option<Ciphertext<W>> = None;
        for p in partial {
            if let Some(p) = p? {
                accumulate(ev, &mut acc, p)?;
            }
        }
        acc.ok_or_else(|| CkksError::InvalidInput("internal: empty linear transform".into()))
    }

    /// The non-zero baby steps an application rotates by, in increasing order.
    fn baby_rotations(&self) -> Vec<i64> {
        let mut b: Vec<i64> = self
            .groups
            .iter()
            .flat_map(|(_, t)| t.iter().map(|(b, _, _)| *b))
            .filter(|&b| b != 0)
            .collect();
        b.sort_unstable();
        b.dedup();
        b
    }

    /// Refuses an input below the level the diagonals are encoded at.
    fn check_input_level(&self, level: usize) -> Result<()> {
        if level < self.level {
            return Err(CkksError::OutOfLevels {
                level,
                needed: self.level,
                hint: format!(
                    "the input is at level {level}, below the level {} the transform was encoded at; encode it at the input's level",
                    self.level
                ),
            });
        }
        Ok(())
    }

    /// The encoded diagonals (compact ones expanded), in the order [`Self::apply_with`] takes
    /// a backend's copies of them.
    pub fn plaintexts(&self) -> Result<Vec<Cow<'_, Plaintext<W>>>> {
        self.groups
            .iter()
            .flat_map(|(_, t)| t.iter().map(|(_, d, _)| d.get(Threads::single())))
            .collect()
    }

    /// Number of encoded diagonals (of [`Self::plaintexts`]).
    pub fn diagonal_count(&self) -> usize {
        self.groups.iter().map(|(_, t)| t.len()).sum()
    }

    /// Stores each diagonal compactly: its `N` signed coefficients, one word each, instead of
    /// one word per prime in NTT form (26 at the top of the N = 2^16 bootstrapping chain), and
    /// expands it (reduction modulo every prime, forward NTT) at each application. Memory for
    /// time: at N = 2^16 bootstrapping's transforms shrink from about 3 GB to 0.1 GB for one
    /// extra NTT per diagonal and prime in each application. A diagonal whose coefficients do
    /// not fit 63 bits (or one at level 0 or 1) stays in NTT form. The results are the same
    /// words.
    pub fn with_compact_diagonals(mut self, ctx: &Arc<Context<W>>) -> Result<Self> {
        for (_, terms) in &mut self.groups {
            for (_, d, _) in terms.iter_mut() {
                let Diag::Ntt(pt) = &*d else { continue };
                if let Some((coeffs, max_abs)) = compact_coefficients(ctx, pt)? {
                    *d = Diag::Compact(Arc::new(CompactDiag {
                        ctx: Arc::clone(ctx),
                        coeffs,
                        max_abs,
                        level: pt.level,
                        scale: pt.scale,
                        slots: pt.slots,
                    }));
                }
            }
        }
        Ok(self)
    }

    /// Whether every diagonal is stored compactly ([`Self::with_compact_diagonals`]).
    pub fn compact(&self) -> bool {
        self.groups
            .iter()
            .flat_map(|(_, t)| t.iter())
            .all(|(_, d, _)| matches!(d, Diag::Compact(_)))
    }

    /// `T(v)` before the rescale on a [`PlainOps`] backend that holds the diagonals itself:
    /// `pts` are its copies of [`Self::plaintexts`], in that order. The schedule of
    /// [`Self::apply`] (hoisted or power-of-two baby steps, Horner giant steps for sparse
    /// transforms), one step after another: a backend such as the GPU parallelizes inside
    /// each operation. `v` must sit at or above the transform's level.
    pub fn apply_with<O: PlainOps>(&self, ops: &O, v: &O::Ct, pts: &[O::Pt]) -> Result<O::Ct> {
        if pts.len() != self.diagonal_count() {
            return Err(CkksError::InvalidInput(format!(
                "the backend holds {} diagonals; this transform has {}",
                pts.len(),
                self.diagonal_count()
            )));
        }
        self.check_input_level(ops.level_of(v))?;
        let v = ops.drop_to_level(v, self.level)?;
        if self.groups.is_empty() {
            return ops.multiply_const(&v, 0.0);
        }
        let babies = self.baby_rotations();
        let rotated = self.baby_rotated(ops, &v, &babies)?;
        let baby = |b: i64| -> &O::Ct {
            match babies.iter().position(|&s| s == b) {
                Some(i) => &rotated[i],
                None => &v,
            }
        };
        let add = |acc: &mut Option<O::Ct>, x: O::Ct| -> Result<()> {
            *acc = Some(match acc.take() {
                Some(y) => ops.add(&y, &x)?,
                None => x,
            });
            Ok(())
        };
        // Each group's terms with the index of its first diagonal in `pts`.
        let mut first = Vec::with_capacity(self.groups.len());
        let mut k = 0;
        for (_, terms) in &self.groups {
            first.push(k);
            k += terms.len();
        }
        let inner_sum = |acc: &mut Option<O::Ct>, g: usize| -> Result<()> {
            for (j, (b, _, _)) in self.groups[g].1.iter().enumerate() {
                ops.multiply_plain_accumulate(acc, baby(*b), &pts[first[g] + j])?;
            }
            Ok(())
        };
        let mut total: Option<O::Ct> = None;
        if let Some((g, by_giant)) = self.horner_groups() {
            total = self.horner_sum(ops, g, &by_giant, inner_sum)?;
        } else {
            for (i, (a, _)) in self.groups.iter().enumerate() {
                let mut inner = None;
                inner_sum(&mut inner, i)?;
                let Some(mut inner) = inner else { continue };
                if *a != 0 {
                    inner = ops.rotate(&inner, *a)?;
                }
                add(&mut total, inner)?;
            }
        }
        total.ok_or_else(|| CkksError::InvalidInput("internal: empty linear transform".into()))
    }

    /// `T(v)` before the rescale on any [`PolyOps`] backend: a task-graph builder (the
    /// transform becomes HE tasks), the GPU, or the CPU evaluator. The same schedule as
    /// [`Self::apply`] (hoisted baby steps through [`PolyOps::rotate_many`], one inner sum and
    /// giant rotation per group, the diagonals through [`PolyOps::multiply_plain_slots`] at
    /// scale `q_level`), on one thread of `ops`; the result is word for word the one
    /// [`Self::apply`] gives. `v` must hold [`Self::period`] slots (a backend that does not
    /// track slot counts cannot check it) and sit at or above the transform's level.
    pub fn apply_on<O: PolyOps>(&self, ops: &O, v: &O::Ct) -> Result<O::Ct> {
        self.check_input_level(ops.level_of(v))?;
        let v = ops.drop_to_level(v, self.level)?;
        if self.groups.is_empty() {
            return ops.multiply_const(&v, 0.0);
        }
        let babies = self.baby_rotations();
        let rotated = ops.rotate_many(&v, &babies)?;
        let add = |acc: Option<O::Ct>, x: O::Ct| -> Result<Option<O::Ct>> {
            Ok(Some(match acc {
                Some(y) => ops.add(&y, &x)?,
                None => x,
            }))
        };
        let mut acc = None;
        for (a, terms) in &self.groups {
            let mut inner = None;
            for (b, _, values) in terms {
                let values = values.as_ref().ok_or_else(|| {
                    CkksError::InvalidInput(
                        "a transform with complex diagonals runs on the CPU evaluator only (LinearTransform::apply)".into(),
                    )
                })?;
                let x = match babies.iter().position(|&s| s == *b) {
                    Some(i) => &rotated[i],
                    None => &v,
                };
                inner = add(inner, ops.multiply_plain_slots(x, values)?)?;
            }
            let Some(mut inner) = inner else { continue };
            if *a != 0 {
                inner = ops.rotate(&inner, *a)?;
            }
            acc = add(acc, inner)?;
        }
        acc.ok_or_else(|| CkksError::InvalidInput("internal: empty linear transform".into()))
    }

    /// `T(v)`, rescaled: one level below the transform's level, with `v`'s scale.
    pub fn apply_rescaled(&self, ev: &Evaluator<W>, v: &Ciphertext<W>) -> Result<Ciphertext<W>> {
        let p = self.apply(ev, v)?;
        ev.rescale(&p)
    }
}
