//! RNS polynomials: `limbs x N` words, 64-byte aligned, one limb per prime of an [`RnsBasis`],
//! in coefficient or NTT form.

use crate::backend::{Backend, BackendChoice};
use crate::eltwise::{BinOp, Eltwise};
use crate::error::{MathError, Result};
use crate::modulus::Modulus;
use crate::ntt::{AlignedVec, NttTable};
use crate::primes;
use crate::word::Word;
use heloom_pool::Threads;
use std::sync::Arc;

/// Representation of an RNS polynomial.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Form {
    /// Coefficients of `a(X)` modulo each prime.
    Coeff,
    /// Evaluations at the odd powers of `psi` (bit-reversed order), modulo each prime.
    Ntt,
}

impl Form {
    /// The representation's name, for messages.
    pub fn name(self) -> &'static str {
        match self {
            Form::Coeff => "coefficient",
            Form::Ntt => "NTT",
        }
    }
}

/// A polynomial in RNS form. Limb `i` holds the residues modulo the basis' prime `i`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RnsPoly<W: Word> {
    n: usize,
    limbs: usize,
    form: Form,
    fingerprint: u64,
    data: AlignedVec<W>,
}

impl<W: Word> RnsPoly<W> {
    /// The polynomial's buffer (for [`crate::BufferPool::recycle`]).
    pub(crate) fn into_buffer(self) -> AlignedVec<W> {
        self.data
    }

    /// Ring degree N.
    pub fn n(&self) -> usize {
        self.n
    }

    /// Number of limbs (primes).
    pub fn num_limbs(&self) -> usize {
        self.limbs
    }

    /// Current representation.
    pub fn form(&self) -> Form {
        self.form
    }

    /// Fingerprint of the basis this polynomial belongs to.
    pub fn fingerprint(&self) -> u64 {
        self.fingerprint
    }

    /// Sets the form tag without transforming. For kernels that transform limbs one at a time
    /// (through [`RnsBasis::ntt_tables`]) and then record the result.
    pub fn set_form(&mut self, form: Form) {
        self.form = form;
    }

    /// Mutable access to all limbs, limb-major. Writers must keep every value reduced.
    pub fn as_mut_slice(&mut self) -> &mut [W] {
        &mut self.data
    }

    /// Limb `i` (`i < num_limbs()`, else panics like slice indexing).
    pub fn limb(&self, i: usize) -> &[W] {
        &self.data[i * self.n..(i + 1) * self.n]
    }

    /// Mutable limb `i`. Writers must keep every value reduced modulo prime `i`.
    pub fn limb_mut(&mut self, i: usize) -> &mut [W] {
        &mut self.data[i * self.n..(i + 1) * self.n]
    }

    /// All limbs, limb-major.
    pub fn as_slice(&self) -> &[W] {
        &self.data
    }

    /// Iterator over limbs.
    pub fn limbs(&self) -> impl Iterator<Item = &[W]> {
        self.data.chunks_exact(self.n)
    }

    /// Mutable iterator over limbs.
    pub fn limbs_mut(&mut self) -> impl Iterator<Item = &mut [W]> {
        self.data.chunks_exact_mut(self.n)
    }
}

/// An RNS basis: the ring degree, a list of distinct NTT-friendly primes, their NTT tables and
/// the element-wise kernels, all on one backend.
#[derive(Clone, Debug)]
pub struct RnsBasis<W: Word> {
    n: usize,
    moduli: Vec<Modulus<W>>,
    ntt: Vec<Arc<NttTable<W>>>,
    elt: Eltwise<W>,
    fingerprint: u64,
}

fn fingerprint(n: usize, word_bits: u32, moduli: &[u64]) -> u64 {
    // FNV-1a over (N, word size, primes): cheap, stable across runs and platforms.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for v in std::iter::once(n as u64)
        .chain(std::iter::once(word_bits as u64))
        .chain(moduli.iter().copied())
    {
        for b in v.to_le_bytes() {
            h ^= b as u64;
            h = h.wrapping_mul(0x100_0000_01b3);
        }
    }
    h
}

impl<W: Word> RnsBasis<W> {
    /// Builds a basis on the fastest backend for these primes.
    pub fn new(n: usize, moduli: &[u64]) -> Result<Self> {
        Self::with_backend(n, moduli, BackendChoice::Auto)
    }

    /// Builds a basis on a chosen or forced backend.
    pub fn with_backend(n: usize, moduli: &[u64], choice: BackendChoice) -> Result<Self> {
        if moduli.is_empty() {
            return Err(MathError::ShapeMismatch(
                "an RNS basis needs at least one prime".into(),
            ));
        }
        for (i, q) in moduli.iter().enumerate() {
            if moduli[..i].contains(q) {
                return Err(MathError::ShapeMismatch(format!(
                    "prime {q} appears twice in the RNS basis; RNS primes must be distinct"
                )));
            }
        }
        primes::check_degree(n, crate::ntt::MIN_LOG_N, crate::ntt::MAX_LOG_N)?;
        let max_bits = moduli
            .iter()
            .map(|q| 64 - q.leading_zeros())
            .max()
            .unwrap_or(0);
        let backend = match choice.resolve(W::BITS, max_bits.min(W::MAX_PRIME_BITS)) {
            Ok(b) => b,
            Err(MathError::ModulusTooLarge {
                bits,
                max_bits,
                what,
                ..
            }) => {
                let q = moduli.iter().copied().max().unwrap_or(0);
                return Err(MathError::ModulusTooLarge {
                    q,
                    bits,
                    max_bits,
                    what,
                });
            }
            Err(e) => return Err(e),
        };
        // An automatic choice is made per prime: a prime small enough for IFMA gets it even
        // when a wider one in the basis does not (the element-wise kernels do the same).
        let per_prime = match choice {
            BackendChoice::Auto => BackendChoice::Auto,
            BackendChoice::Force(_) => BackendChoice::Force(backend),
        };
        let ntt = moduli
            .iter()
            .map(|&q| NttTable::with_backend(n, q, per_prime).map(Arc::new))
            .collect::<Result<Vec<_>>>()?;
        let moduli_w = ntt.iter().map(|t| *t.modulus()).collect();
        let elt = Eltwise::new(per_prime, max_bits)?;
        Ok(Self {
            n,
            moduli: moduli_w,
            ntt,
            elt,
            fingerprint: fingerprint(n, W::BITS, moduli),
        })
    }

    /// Ring degree N.
    pub fn n(&self) -> usize {
        self.n
    }

    /// Number of primes.
    pub fn len(&self) -> usize {
        self.moduli.len()
    }

    /// Always false (a basis has at least one prime).
    pub fn is_empty(&self) -> bool {
        self.moduli.is_empty()
    }

    /// The primes.
    pub fn moduli(&self) -> &[Modulus<W>] {
        &self.moduli
    }

    /// The NTT tables, one per prime.
    pub fn ntt_tables(&self) -> &[Arc<NttTable<W>>] {
        &self.ntt
    }

    /// The backend of this basis's widest primes; narrower primes may run on a faster one
    /// ([`Eltwise::backend_for`], [`NttTable::backend`]) when the choice was automatic.
    pub fn backend(&self) -> Backend {
        self.elt.backend()
    }

    /// The element-wise kernels.
    pub fn eltwise(&self) -> &Eltwise<W> {
        &self.elt
    }

    /// Fingerprint of (N, word size, primes).
    pub fn fingerprint(&self) -> u64 {
        self.fingerprint
    }

    /// The sub-basis made of the primes at `indices` (in that order), sharing this basis' NTT
    /// tables and backend. CKKS builds one per level (`q_0..q_l`, and `q_0..q_l` plus the special
    /// primes) from a single full basis.
    pub fn select(&self, indices: &[usize]) -> Result<RnsBasis<W>> {
        if indices.is_empty() {
            return Err(MathError::ShapeMismatch(
                "a sub-basis needs at least one prime".into(),
            ));
        }
        let mut moduli = Vec::with_capacity(indices.len());
        let mut ntt = Vec::with_capacity(indices.len());
        for (k, &i) in indices.iter().enumerate() {
            if i >= self.moduli.len() || indices[..k].contains(&i) {
                return Err(MathError::ShapeMismatch(format!(
                    "sub-basis index {i} is out of range or repeated (basis has {} primes)",
                    self.moduli.len()
                )));
            }
            moduli.push(self.moduli[i]);
            ntt.push(Arc::clone(&self.ntt[i]));
        }
        let values: Vec<u64> = moduli.iter().map(|m| m.value()).collect();
        Ok(Self {
            n: self.n,
            moduli,
            ntt,
            elt: self.elt,
            fingerprint: fingerprint(self.n, W::BITS, &values),
        })
    }

    /// Keeps the first `self.len()` limbs of `p` and re-tags it as a polynomial of this basis.
    ///
    /// The caller guarantees that this basis' primes are the first primes of `p`'s basis (the
    /// CKKS level bases are built that way); only the ring degree and limb count are checked.
    pub fn truncate(&self, mut p: RnsPoly<W>) -> Result<RnsPoly<W>> {
        self.check_truncation(&p)?;
        p.limbs = self.moduli.len();
        p.data.truncate(self.n * p.limbs);
        p.fingerprint = self.fingerprint;
        Ok(p)
    }

    /// [`Self::truncate`] of a borrowed polynomial: copies only the limbs this basis keeps (a
    /// clone then a truncation would copy every limb and keep the whole allocation).
    pub fn truncated(&self, p: &RnsPoly<W>) -> Result<RnsPoly<W>> {
        self.check_truncation(p)?;
        Ok(RnsPoly {
            n: p.n,
            limbs: self.moduli.len(),
            form: p.form,
            fingerprint: self.fingerprint,
            data: AlignedVec::from_slice(&p.data[..self.n * self.moduli.len()]),
        })
    }

    fn check_truncation(&self, p: &RnsPoly<W>) -> Result<()> {
        if p.n != self.n || p.limbs < self.moduli.len() {
            return Err(MathError::ShapeMismatch(format!(
                "cannot truncate a polynomial with N = {} and {} limbs to a basis with N = {} and {} limbs",
                p.n,
                p.limbs,
                self.n,
                self.moduli.len()
            )));
        }
        Ok(())
    }

    /// Builds a polynomial of this basis from limbs taken (copied) from other polynomials:
    /// `limbs[i]` must hold `N` words reduced modulo this basis' prime `i`. Values are checked.
    pub fn poly_from_limbs(&self, limbs: &[&[W]], form: Form) -> Result<RnsPoly<W>> {
        if limbs.len() != self.moduli.len() {
            return Err(MathError::LengthMismatch {
                what: "limbs for an RNS polynomial",
                expected: self.moduli.len(),
                got: limbs.len(),
            });
        }
        let mut p = self.zero(form);
        for (i, ((dst, src), m)) in p
            .data
            .chunks_exact_mut(self.n)
            .zip(limbs)
            .zip(&self.moduli)
            .enumerate()
        {
            if src.len() != self.n {
                return Err(MathError::LengthMismatch {
                    what: "limb length",
                    expected: self.n,
                    got: src.len(),
                });
            }
            if let Some(j) = src.iter().position(|&v| v >= m.q()) {
                return Err(MathError::ValueOutOfRange {
                    value: src[j].to_u64(),
                    index: i * self.n + j,
                    q: m.value(),
                });
            }
            dst.copy_from_slice(src);
        }
        Ok(p)
    }

    /// Whether `p` belongs to this basis (same ring degree, limb count and primes).
    pub fn owns(&self, p: &RnsPoly<W>) -> bool {
        p.fingerprint == self.fingerprint && p.n == self.n && p.limbs == self.moduli.len()
    }

    /// A polynomial of this basis in `data` (exactly `N x len()` words, as
    /// [`crate::BufferPool::take`] gives them).
    pub(crate) fn poly_in(&self, data: AlignedVec<W>, form: Form) -> RnsPoly<W> {
        debug_assert_eq!(data.len(), self.n * self.moduli.len());
        RnsPoly {
            n: self.n,
            limbs: self.moduli.len(),
            form,
            fingerprint: self.fingerprint,
            data,
        }
    }

    /// The zero polynomial in the given form.
    pub fn zero(&self, form: Form) -> RnsPoly<W> {
        let len = self.n * self.moduli.len();
        let mut data = AlignedVec::with_capacity(len);
        data.resize(len, W::ZERO);
        self.poly_in(data, form)
    }

    /// A polynomial from limb-major values (`len() * N` of them), each reduced modulo its prime.
    pub fn poly_from_words(&self, values: &[u64], form: Form) -> Result<RnsPoly<W>> {
        let mut p = self.zero(form);
        if values.len() != p.data.len() {
            return Err(MathError::LengthMismatch {
                what: "RNS polynomial values (limbs x N)",
                expected: p.data.len(),
                got: values.len(),
            });
        }
        for (i, (limb, vals)) in p
            .data
            .chunks_exact_mut(self.n)
            .zip(values.chunks_exact(self.n))
            .enumerate()
        {
            let q = self.moduli[i].value();
            for (j, (o, &v)) in limb.iter_mut().zip(vals).enumerate() {
                if v >= q {
                    return Err(MathError::ValueOutOfRange {
                        value: v,
                        index: i * self.n + j,
                        q,
                    });
                }
                *o = W::from_u64(v);
            }
        }
        Ok(p)
    }

    /// A coefficient-form polynomial from signed integer coefficients (`N` of them), reduced
    /// modulo every prime.
    pub fn poly_from_signed(&self, coeffs: &[i64]) -> Result<RnsPoly<W>> {
        let mut p = self.zero(Form::Coeff);
        if coeffs.len() != self.n {
            return Err(MathError::LengthMismatch {
                what: "signed coefficients",
                expected: self.n,
                got: coeffs.len(),
            });
        }
        for (limb, m) in p.data.chunks_exact_mut(self.n).zip(&self.moduli) {
            for (o, &c) in limb.iter_mut().zip(coeffs) {
                *o = m.reduce_i64(c);
            }
        }
        Ok(p)
    }

    /// [`Self::owns`] as a result: a [`MathError::ShapeMismatch`] naming the operation `op` when
    /// `p` does not belong to this basis.
    pub fn check_owns(&self, op: &str, p: &RnsPoly<W>) -> Result<()> {
        if self.owns(p) {
            return Ok(());
        }
        Err(MathError::ShapeMismatch(format!(
            "{op}: the polynomial (N = {}, {} limbs, basis {:016x}) does not belong to the basis \
             it is used with (N = {}, {} primes, basis {:016x}); use the basis it was built on",
            p.n,
            p.limbs,
            p.fingerprint,
            self.n,
            self.moduli.len(),
            self.fingerprint
        )))
    }

    fn check(&self, p: &RnsPoly<W>) -> Result<()> {
        self.check_owns("polynomial arithmetic", p)
    }

    fn check_form(op: &'static str, p: &RnsPoly<W>, expected: Form) -> Result<()> {
        if p.form != expected {
            return Err(MathError::FormMismatch {
                op,
                expected: expected.name(),
                got: p.form.name(),
            });
        }
        Ok(())
    }

    fn check_pair(&self, op: &'static str, a: &RnsPoly<W>, b: &RnsPoly<W>) -> Result<()> {
        self.check(a)?;
        self.check(b)?;
        if a.form != b.form {
            return Err(MathError::FormMismatch {
                op,
                expected: a.form.name(),
                got: b.form.name(),
            });
        }
        Ok(())
    }

    threaded! {
        /// Forward NTT of every limb; the polynomial must be in coefficient form.
        fn forward(&self, p: &mut RnsPoly<W>) -> Result<()>;
        /// [`Self::forward`] split over limbs with a thread budget (same result for any budget).
        fn forward_with(.., threads) {
            self.transform(p, threads, true)
        }

        /// Inverse NTT of every limb; the polynomial must be in NTT form.
        fn inverse(&self, p: &mut RnsPoly<W>) -> Result<()>;
        /// [`Self::inverse`] split over limbs with a thread budget (same result for any budget).
        fn inverse_with(.., threads) {
            self.transform(p, threads, false)
        }
    }

    /// The forward (`fwd`) or inverse NTT of every limb, after checking the form.
    fn transform(&self, p: &mut RnsPoly<W>, threads: Threads, fwd: bool) -> Result<()> {
        self.check(p)?;
        let (op, from, to) = if fwd {
            ("forward NTT", Form::Coeff, Form::Ntt)
        } else {
            ("inverse NTT", Form::Ntt, Form::Coeff)
        };
        Self::check_form(op, p, from)?;
        let ntt = &self.ntt;
        threads.try_for_each_chunk_mut(&mut p.data, self.n, |i, limb| {
            if fwd {
                ntt[i].forward(limb)
            } else {
                ntt[i].inverse(limb)
            }
        })?;
        p.form = to;
        Ok(())
    }

    /// `a = a op b` limb by limb (same form; NTT form for products).
    fn assign_with(
        &self,
        op: BinOp,
        a: &mut RnsPoly<W>,
        b: &RnsPoly<W>,
        threads: Threads,
    ) -> Result<()> {
        let name = match op {
            BinOp::Add => "add",
            BinOp::Sub => "sub",
            BinOp::Mul => "multiply",
        };
        self.check_pair(name, a, b)?;
        if op == BinOp::Mul {
            Self::check_form(name, a, Form::Ntt)?;
        }
        threads.try_for_each_chunk_mut(&mut a.data, self.n, |i, x| {
            self.elt.assign(op, &self.moduli[i], x, b.limb(i))
        })
    }

    threaded! {
        /// `a += b` limb by limb (same form).
        fn add_assign(&self, a: &mut RnsPoly<W>, b: &RnsPoly<W>) -> Result<()>;
        /// [`Self::add_assign`] split over limbs with a thread budget.
        fn add_assign_with(.., threads) {
            self.assign_with(BinOp::Add, a, b, threads)
        }

        /// `a -= b` limb by limb (same form).
        fn sub_assign(&self, a: &mut RnsPoly<W>, b: &RnsPoly<W>) -> Result<()>;
        /// [`Self::sub_assign`] split over limbs with a thread budget.
        fn sub_assign_with(.., threads) {
            self.assign_with(BinOp::Sub, a, b, threads)
        }

        /// `a = -a`.
        fn neg_assign(&self, a: &mut RnsPoly<W>) -> Result<()>;
        /// [`Self::neg_assign`] split over limbs with a thread budget.
        fn neg_assign_with(.., threads) {
            self.check(a)?;
            threads.try_for_each_chunk_mut(&mut a.data, self.n, |i, x| {
                self.elt.neg_assign(&self.moduli[i], x)
            })
        }

        /// `out = a * b` (ring product); both in NTT form.
        fn mul(&self, a: &RnsPoly<W>, b: &RnsPoly<W>) -> Result<RnsPoly<W>>;
        /// [`Self::mul`] split over limbs with a thread budget.
        fn mul_with(.., threads) {
            self.check_pair("multiply", a, b)?;
            Self::check_form("multiply", a, Form::Ntt)?;
            let mut out = self.zero(Form::Ntt);
            threads.try_for_each_chunk_mut(&mut out.data, self.n, |i, o| {
                self.elt.mul(&self.moduli[i], o, a.limb(i), b.limb(i))
            })?;
            Ok(out)
        }

        /// `a *= b` (ring product); both in NTT form.
        fn mul_assign(&self, a: &mut RnsPoly<W>, b: &RnsPoly<W>) -> Result<()>;
        /// [`Self::mul_assign`] split over limbs with a thread budget.
        fn mul_assign_with(.., threads) {
            self.assign_with(BinOp::Mul, a, b, threads)
        }

        /// `acc += a * b` (ring product); all in NTT form.
        fn mul_add(&self, acc: &mut RnsPoly<W>, a: &RnsPoly<W>, b: &RnsPoly<W>) -> Result<()>;
        /// [`Self::mul_add`] split over limbs with a thread budget.
        fn mul_add_with(.., threads) {
            self.check_pair("multiply-add", a, b)?;
            self.check_pair("multiply-add", acc, a)?;
            Self::check_form("multiply-add", a, Form::Ntt)?;
            threads.try_for_each_chunk_mut(&mut acc.data, self.n, |i, o| {
                self.elt.mul_add(&self.moduli[i], o, a.limb(i), b.limb(i))
            })
        }

        /// `a *= s` for an integer scalar (reduced modulo each prime).
        fn mul_scalar_assign(&self, a: &mut RnsPoly<W>, s: u64) -> Result<()>;
        /// [`Self::mul_scalar_assign`] split over limbs with a thread budget.
        fn mul_scalar_assign_with(.., threads) {
            self.check(a)?;
            threads.try_for_each_chunk_mut(&mut a.data, self.n, |i, x| {
                self.elt.mul_scalar_assign(&self.moduli[i], x, s)
            })
        }
    }
}
