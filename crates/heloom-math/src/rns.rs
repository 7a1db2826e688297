//! Fast RNS base conversion (Bajard-Eynard-Hasan-Zucca 2016; Halevi-Polyakov-Shoup 2019, Sec. 2.2),
//! the mod-up and mod-down step of hybrid key switching.
//!
//! For `x` given by its residues `x_i = x mod q_i` over `Q = q_0 ... q_{k-1}`, the conversion to
//! primes `p_j` computes
//!
//! `y_j = sum_i [x_i * qhat_i^-1]_{q_i} * qhat_i  mod p_j`,   `qhat_i = Q / q_i`,
//!
//! which equals `x + u Q (mod p_j)` for some `0 <= u < k`: each summand is below `Q`, and the sum
//! is `x` modulo `Q`. The `u Q` overflow is not corrected ("approximate" conversion); key
//! switching absorbs it in its noise.
//!
//! ```
//! use heloom_math::{primes, BackendChoice, BasisConverter, Eltwise, Modulus};
//! let qs = primes::ntt_primes::<u64>(40, 1 << 10, 3)?;
//! let m: Vec<Modulus<u64>> = qs.iter().map(|&q| Modulus::new(q)).collect::<Result<_, _>>()?;
//! let conv = BasisConverter::new(&m[..2], &m[2..], Eltwise::new(BackendChoice::Auto, 40)?)?;
//! // x = 5 in RNS over q_0 q_1, converted to q_2: 5 + u Q mod q_2 with u in {0, 1}.
//! let (x0, x1) = (vec![5u64; 8], vec![5u64; 8]);
//! let mut y = vec![0u64; 8];
//! conv.convert(&[&x0, &x1], &mut [&mut y])?;
//! let big_q = (qs[0] as u128 * qs[1] as u128 % qs[2] as u128) as u64;
//! assert!(y[0] == 5 || y[0] == (5 + big_q) % qs[2]);
//! # Ok::<(), heloom_math::MathError>(())
//! ```

use crate::eltwise::Eltwise;
use crate::error::{check_len, MathError, Result};
use crate::modulus::Modulus;
use crate::word::Word;
use heloom_pool::Threads;

/// Words per block: each block of the source limbs is scaled into a scratch buffer once and then
/// accumulated into every target while it is still in cache (`k * BLOCK` words of scratch), and
/// each kernel call is long enough to hide its setup (a 128-bit division for the Shoup constant).
const BLOCK: usize = 4096;

/// Precomputed approximate base conversion from the primes `q_0..q_{k-1}` to the primes
/// `p_0..p_{m-1}` (see the module docs), running on the element-wise kernels it was built with.
#[derive(Clone, Debug)]
pub struct BasisConverter<W: Word> {
    from: Vec<Modulus<W>>,
    to: Vec<Modulus<W>>,
    /// `qhat_i^-1 mod q_i`.
    qhat_inv: Vec<u64>,
    /// `qhat_i mod p_j` at `[j * k + i]`.
    qhat_mod_p: Vec<u64>,
    neg_q_mod_p: Vec<u64>,
    inv_q: Vec<f64>,
    elt: Eltwise<W>,
}

impl<W: Word> BasisConverter<W> {
    /// `from`: source primes `q_0..q_{k-1}`; `to`: target primes `p_0..p_{m-1}` (disjoint from
    /// `from`).
    ///
    /// All constants are computed exactly in modular arithmetic. Errors: an empty list
    /// ([`MathError::ShapeMismatch`]); a prime repeated within or across the lists
    /// ([`MathError::DuplicatePrime`]); a prime larger than `elt` accepts
    /// ([`MathError::ModulusTooLarge`]); source moduli that are not pairwise coprime
    /// ([`MathError::NotInvertible`]).
    pub fn new(from: &[Modulus<W>], to: &[Modulus<W>], elt: Eltwise<W>) -> Result<Self> {
        if from.is_empty() || to.is_empty() {
            return Err(MathError::ShapeMismatch(format!(
                "a base conversion needs at least one source and one target prime (got {} and {})",
                from.len(),
                to.len()
            )));
        }
        for (i, m) in from.iter().enumerate() {
            if from[..i].contains(m) {
                return Err(MathError::DuplicatePrime {
                    q: m.value(),
                    what: "the source primes",
                });
            }
        }
        for (j, p) in to.iter().enumerate() {
            if to[..j].contains(p) {
                return Err(MathError::DuplicatePrime {
                    q: p.value(),
                    what: "the target primes",
                });
            }
            if from.contains(p) {
                return Err(MathError::DuplicatePrime {
                    q: p.value(),
                    what: "both the source and the target primes",
                });
            }
        }
        if let Some(m) = from
            .iter()
            .chain(to)
            .find(|m| m.bits() > elt.max_prime_bits())
        {
            return Err(MathError::ModulusTooLarge {
                q: m.value(),
                bits: m.bits(),
                max_bits: elt.max_prime_bits(),
                what: format!("the {} kernels of this base conversion", elt.backend()),
            });
        }
        // prod_{l != i} q_l mod t, exactly.
        let qhat_mod = |i: usize, t: &Modulus<W>| -> W {
            from.iter()
                .enumerate()
                .filter(|&(l, _)| l != i)
                .fold(t.reduce(W::ONE), |acc, (_, q)| {
                    t.mul(acc, t.reduce_u64(q.value()))
                })
        };
        let qhat_inv = from
            .iter()
            .enumerate()
            .map(|(i, q)| q.inv(qhat_mod(i, q)).map(W::to_u64))
            .collect::<Result<Vec<_>>>()?;
        let qhat_mod_p = to
            .iter()
            .flat_map(|p| (0..from.len()).map(move |i| (i, p)))
            .map(|(i, p)| qhat_mod(i, p).to_u64())
            .collect();
        // -Q mod p_j and 1/q_i for the centered (exact) variant.
        let neg_q_mod_p = to
            .iter()
            .map(|p| {
                let qm = from.iter().fold(p.reduce(W::ONE), |acc, q| {
                    p.mul(acc, p.reduce_u64(q.value()))
                });
                p.neg(qm).to_u64()
            })
            .collect();
        let inv_q = from.iter().map(|q| 1.0 / q.value() as f64).collect();
        Ok(Self {
            from: from.to_vec(),
            to: to.to_vec(),
            qhat_inv,
            qhat_mod_p,
            neg_q_mod_p,
            inv_q,
            elt,
        })
    }

    threaded! {
        /// Coefficient-form residues `x mod q_i` (`input[i]`, each N words, reduced) ->
        /// `y_j = sum_i [x_i * qhat_i^{-1}]_{q_i} * qhat_i mod p_j`, where `qhat_i = Q/q_i`. The
        /// result equals `x + u*Q (mod p_j)` with `0 <= u < k` (no correction of the Q-overflow).
        ///
        /// `output[j]` (N words) is overwritten with reduced residues modulo `p_j`. With one source
        /// prime this is a plain reduction (`u = 0`). Errors ([`MathError::LengthMismatch`]): `input`
        /// not `from_len()` slices, `output` not `to_len()` slices, or slices of different lengths.
        fn convert(&self, input: &[&[W]], output: &mut [&mut [W]]) -> Result<()>;
        /// [`Self::convert`] split over coefficient ranges with a thread budget: every coefficient
        /// is computed on its own, so the result is the same for any budget.
        fn convert_with(.., threads) {
            let n = self.check_shapes(input, output)?;
            split_coeffs(input, output, n, threads, |x, y| self.convert_range(x, y))
        }
    }

    /// [`Self::convert`] on slices already checked to have the right counts and one length.
    fn convert_range(&self, input: &[&[W]], output: &mut [&mut [W]]) -> Result<()> {
        let k = self.from.len();
        let n = input[0].len();
        if k == 1 {
            // qhat_0 = 1: y_j = x mod p_j.
            for (y, p) in output.iter_mut().zip(&self.to) {
                self.elt.reduce(p, y, input[0])?;
            }
            return Ok(());
        }
        let stride = BLOCK.min(n);
        let mut scratch = crate::ntt::AlignedVec::<W>::zeroed(k * stride);
        let mut start = 0;
        while start < n {
            let end = (start + BLOCK).min(n);
            let len = end - start;
            // t_i = [x_i * qhat_i^-1]_{q_i}, reduced modulo q_i (which may exceed p_j: the
            // accumulation accepts any value below 2^(MAX_PRIME_BITS + 1)).
            for (((t, x), q), &c) in scratch
                .chunks_exact_mut(stride)
                .zip(input)
                .zip(&self.from)
                .zip(&self.qhat_inv)
            {
                self.elt.mul_scalar(q, &mut t[..len], &x[start..end], c)?;
            }
            for ((y, p), consts) in output
                .iter_mut()
                .zip(&self.to)
                .zip(self.qhat_mod_p.chunks_exact(k))
            {
                let y = &mut y[start..end];
                y.fill(W::ZERO);
                for (t, &c) in scratch.chunks_exact(stride).zip(consts) {
                    self.elt.mul_scalar_add(p, y, &t[..len], c)?;
                }
            }
            start = end;
        }
        Ok(())
    }

    threaded! {
        /// Exact conversion of the centered representative: for `x` in `[-Q/2, Q/2)` given by its
        /// residues, outputs `x mod p_j`. The overflow `u` of [`Self::convert`] is removed by
        /// computing `v = round(sum_i y_i / q_i)` in floating point (Halevi-Polyakov-Shoup 2019,
        /// Sec. 2.3): with `k` small the sum is far from a half-integer except with negligible
        /// probability, and an off-by-one there only adds `±Q`-sized error in that coefficient's
        /// rounding, i.e. a rounding error of one unit after division by `Q`.
        ///
        /// Used by mod-down (division by `P`) and mod-up in key switching and encryption: the
        /// plain conversion's overflow has mean `k/2`, which after division by `P` adds a biased
        /// term `(k/2) * s` to the noise; the centered one removes it.
        fn convert_centered(&self, input: &[&[W]], output: &mut [&mut [W]]) -> Result<()>;
        /// [`Self::convert_centered`] split over coefficient ranges with a thread budget (same
        /// result for any budget: each coefficient's rounding only looks at that coefficient).
        fn convert_centered_with(.., threads) {
            let n = self.check_shapes(input, output)?;
            split_coeffs(input, output, n, threads, |x, y| {
                self.convert_centered_range(x, y)
            })
        }
    }

    /// [`Self::convert_centered`] on slices already checked.
    fn convert_centered_range(&self, input: &[&[W]], output: &mut [&mut [W]]) -> Result<()> {
        let k = self.from.len();
        let n = input[0].len();
        if k == 1 {
            return self.convert_centered_one(input[0], output);
        }
        let stride = BLOCK.min(n);
        let mut scratch = crate::ntt::AlignedVec::<W>::zeroed(k * stride);
        let mut v = vec![W::ZERO; stride];
        let mut acc = vec![0f64; stride];
        let mut start = 0;
        while start < n {
            let end = (start + BLOCK).min(n);
            let len = end - start;
            acc[..len].fill(0.0);
            for (((t, x), q), (&c, &iq)) in scratch
                .chunks_exact_mut(stride)
                .zip(input)
                .zip(&self.from)
                .zip(self.qhat_inv.iter().zip(&self.inv_q))
            {
                let t = &mut t[..len];
                if k == 1 {
                    t.copy_from_slice(&x[start..end]);
                } else {
                    self.elt.mul_scalar(q, t, &x[start..end], c)?;
                }
                for (a, &y) in acc[..len].iter_mut().zip(t.iter()) {
                    *a += y.to_u64() as f64 * iq;
                }
            }
            for (o, &a) in v[..len].iter_mut().zip(&acc[..len]) {
                *o = W::from_u64(a.round() as u64);
            }
            for (((y, p), consts), &nq) in output
                .iter_mut()
                .zip(&self.to)
                .zip(self.qhat_mod_p.chunks_exact(k))
                .zip(&self.neg_q_mod_p)
            {
                let y = &mut y[start..end];
                if k == 1 {
                    self.elt.reduce(p, y, &scratch[..len])?;
                } else {
                    y.fill(W::ZERO);
                    for (t, &c) in scratch.chunks_exact(stride).zip(consts) {
                        self.elt.mul_scalar_add(p, y, &t[..len], c)?;
                    }
                }
                self.elt.mul_scalar_add(p, y, &v[..len], nq)?;
            }
            start = end;
        }
        Ok(())
    }

    /// [`Self::convert_centered`] from a single prime `q` (hybrid key switching with one prime
    /// per digit, SEAL's shape). The centered value is `((x + h) mod q) - h` with `h = q/2`, so
    /// each target gets `((x + h) mod q) mod p - (h mod p)`: three SIMD passes, no
    /// multiplications beyond the Barrett reduction.
    fn convert_centered_one(&self, x: &[W], output: &mut [&mut [W]]) -> Result<()> {
        let q = &self.from[0];
        let h = q.value() >> 1;
        let mut shifted = vec![W::from_u64(h); x.len()];
        self.elt.add_assign(q, &mut shifted, x)?;
        let mut hv = vec![W::ZERO; x.len()];
        for (y, p) in output.iter_mut().zip(&self.to) {
            self.elt.reduce(p, y, &shifted)?;
            hv.fill(p.reduce_u64(h));
            self.elt.sub_assign(p, y, &hv)?;
        }
        Ok(())
    }

    /// Checks limb counts and lengths; returns the common length `N`.
    fn check_shapes(&self, input: &[&[W]], output: &[&mut [W]]) -> Result<usize> {
        if input.len() != self.from.len() {
            return Err(MathError::LengthMismatch {
                what: "base conversion input limbs",
                expected: self.from.len(),
                got: input.len(),
            });
        }
        if output.len() != self.to.len() {
            return Err(MathError::LengthMismatch {
                what: "base conversion output limbs",
                expected: self.to.len(),
                got: output.len(),
            });
        }
        let n = input[0].len();
        for len in input.iter().map(|x| x.len()) {
            check_len("base conversion input limb length", n, len)?;
        }
        for len in output.iter().map(|y| y.len()) {
            check_len("base conversion output limb length", n, len)?;
        }
        Ok(n)
    }

    /// Number of source primes `k`.
    pub fn from_len(&self) -> usize {
        self.from.len()
    }

    /// Number of target primes `m`.
    pub fn to_len(&self) -> usize {
        self.to.len()
    }

    /// The source primes.
    pub fn from_moduli(&self) -> &[Modulus<W>] {
        &self.from
    }

    /// The target primes.
    pub fn to_moduli(&self) -> &[Modulus<W>] {
        &self.to
    }

    /// `qhat_i^-1 mod q_i` for each source prime (for accelerator backends).
    pub fn qhat_inv(&self) -> &[u64] {
        &self.qhat_inv
    }

    /// `qhat_i mod p_j` at index `j * from_len() + i`.
    pub fn qhat_mod_p(&self) -> &[u64] {
        &self.qhat_mod_p
    }

    /// `-Q mod p_j` for each target prime (the centered correction).
    pub fn neg_q_mod_p(&self) -> &[u64] {
        &self.neg_q_mod_p
    }

    /// `1.0 / q_i` as `f64`, in the order the centered conversion adds them up.
    pub fn inv_q(&self) -> &[f64] {
        &self.inv_q
    }

    /// The element-wise kernels in use.
    pub fn eltwise(&self) -> &Eltwise<W> {
        &self.elt
    }
}

/// Coefficient ranges a conversion is split into are multiples of this many words, so SIMD
/// kernels see whole vectors and threads do not share cache lines of an output limb.
const SPLIT_ALIGN: usize = 64;

/// Runs `f` on contiguous coefficient ranges of every input and output limb (all of length `n`),
/// at most one range per thread of the budget.
fn split_coeffs<W, F>(
    input: &[&[W]],
    output: &mut [&mut [W]],
    n: usize,
    threads: Threads,
    f: F,
) -> Result<()>
where
    W: Word,
    F: Fn(&[&[W]], &mut [&mut [W]]) -> Result<()> + Sync,
{
    let chunks = threads.chunks_for(n.div_ceil(SPLIT_ALIGN));
    if chunks <= 1 || n == 0 {
        return f(input, output);
    }
    let per = n.div_ceil(chunks).next_multiple_of(SPLIT_ALIGN);
    let mut parts: Vec<Vec<&mut [W]>> = (0..n.div_ceil(per))
        .map(|_| Vec::with_capacity(output.len()))
        .collect();
    for y in output.iter_mut() {
        for (part, range) in parts.iter_mut().zip(y.chunks_mut(per)) {
            part.push(range);
        }
    }
    threads.try_for_each_mut(&mut parts, |c, outs| {
        let (start, end) = (c * per, ((c + 1) * per).min(n));
        let ins: Vec<&[W]> = input.iter().map(|x| &x[start..end]).collect();
        f(&ins, outs)
    })
}
