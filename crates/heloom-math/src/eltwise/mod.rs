//! Element-wise modular kernels on word slices: add, sub, negate, pointwise multiply,
//! multiply-add, multiply by a scalar, reduction of arbitrary words, and the scalar
//! multiply-accumulate / subtract-multiply steps of RNS base conversion and rescaling, for every
//! backend.
//!
//! Inputs must be reduced (`[0, q)`) unless a kernel says otherwise ([`Eltwise::reduce`],
//! [`Eltwise::mul_scalar_add`]); outputs are always reduced, and every backend returns exactly
//! the scalar kernels' words.

mod barrett32;
mod barrett64;
mod ifma;
pub(crate) mod scalar;
mod skeleton;
pub(crate) mod x86;

use std::marker::PhantomData;

use crate::backend::{Backend, BackendChoice, IFMA_MAX_PRIME_BITS};
use crate::error::{check_len, MathError, Result};
use crate::modulus::Modulus;
use crate::word::Word;

/// A binary element-wise operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinOp {
    /// `a + b mod q`.
    Add,
    /// `a - b mod q`.
    Sub,
    /// `a * b mod q`.
    Mul,
}

/// One element-wise operation on borrowed operands: what [`Eltwise`] hands to a backend.
///
/// `a: None` means "in place": the output slice is also the left operand. Scalars are reduced.
/// Not meant to be built directly: use [`Eltwise`].
#[doc(hidden)]
#[derive(Debug)]
pub enum Job<'a, W> {
    /// `out = a op b`.
    Binary {
        /// The operation.
        op: BinOp,
        /// Output (and left operand when `a` is `None`).
        out: &'a mut [W],
        /// Left operand.
        a: Option<&'a [W]>,
        /// Right operand.
        b: &'a [W],
    },
    /// `out = -a`.
    Neg {
        /// Output (and operand when `a` is `None`).
        out: &'a mut [W],
        /// Operand.
        a: Option<&'a [W]>,
    },
    /// `out = a * s` (Shoup).
    MulScalar {
        /// Output (and operand when `a` is `None`).
        out: &'a mut [W],
        /// Operand.
        a: Option<&'a [W]>,
        /// The reduced scalar.
        s: W,
    },
    /// `acc = acc + a * b`.
    MulAdd {
        /// Accumulator.
        acc: &'a mut [W],
        /// Left factor.
        a: &'a [W],
        /// Right factor.
        b: &'a [W],
    },
    /// `acc0 = acc0 + x * b`, `acc1 = acc1 + x * a`.
    MulAdd2 {
        /// First accumulator.
        acc0: &'a mut [W],
        /// Second accumulator.
        acc1: &'a mut [W],
        /// The shared factor.
        x: &'a [W],
        /// Factor of `acc0`.
        b: &'a [W],
        /// Factor of `acc1`.
        a: &'a [W],
    },
    /// `out = a mod q` for words of any value.
    Reduce {
        /// Output (and operand when `a` is `None`).
        out: &'a mut [W],
        /// Operand.
        a: Option<&'a [W]>,
    },
    /// `acc = acc + a * s` (Shoup; `a` below `2^(W::MAX_PRIME_BITS + 1)`).
    MulScalarAdd {
        /// Accumulator.
        acc: &'a mut [W],
        /// Operand.
        a: &'a [W],
        /// The reduced scalar.
        s: W,
    },
    /// `a = (a - b) * s`.
    SubMulScalar {
        /// Operand and output.
        a: &'a mut [W],
        /// Subtrahend.
        b: &'a [W],
        /// The reduced scalar.
        s: W,
    },
}

impl<'a, W> Job<'a, W> {
    /// The same job on the words from index `k` on (every operand's suffix).
    pub(crate) fn skip(self, k: usize) -> Self {
        let opt = |a: Option<&'a [W]>| a.map(|a| &a[k..]);
        match self {
            Job::Binary { op, out, a, b } => Job::Binary {
                op,
                out: &mut out[k..],
                a: opt(a),
                b: &b[k..],
            },
            Job::Neg { out, a } => Job::Neg {
                out: &mut out[k..],
                a: opt(a),
            },
            Job::MulScalar { out, a, s } => Job::MulScalar {
                out: &mut out[k..],
                a: opt(a),
                s,
            },
            Job::MulAdd { acc, a, b } => Job::MulAdd {
                acc: &mut acc[k..],
                a: &a[k..],
                b: &b[k..],
            },
            Job::MulAdd2 {
                acc0,
                acc1,
                x,
                b,
                a,
            } => Job::MulAdd2 {
                acc0: &mut acc0[k..],
                acc1: &mut acc1[k..],
                x: &x[k..],
                b: &b[k..],
                a: &a[k..],
            },
            Job::Reduce { out, a } => Job::Reduce {
                out: &mut out[k..],
                a: opt(a),
            },
            Job::MulScalarAdd { acc, a, s } => Job::MulScalarAdd {
                acc: &mut acc[k..],
                a: &a[k..],
                s,
            },
            Job::SubMulScalar { a, b, s } => Job::SubMulScalar {
                a: &mut a[k..],
                b: &b[k..],
                s,
            },
        }
    }

    /// The number of words every operand holds (the shortest, so that no kernel reads past
    /// any of them; [`Eltwise`] has checked they are equal).
    pub(crate) fn len(&self) -> usize {
        let opt = |a: &Option<&[W]>| a.map_or(usize::MAX, <[W]>::len);
        match self {
            Job::Binary { out, a, b, .. } => out.len().min(opt(a)).min(b.len()),
            Job::Neg { out, a } | Job::Reduce { out, a } | Job::MulScalar { out, a, .. } => {
                out.len().min(opt(a))
            }
            Job::MulAdd { acc, a, b } => acc.len().min(a.len()).min(b.len()),
            Job::MulAdd2 {
                acc0,
                acc1,
                x,
                b,
                a,
            } => acc0
                .len()
                .min(acc1.len())
                .min(x.len())
                .min(b.len())
                .min(a.len()),
            Job::MulScalarAdd { acc, a, .. } => acc.len().min(a.len()),
            Job::SubMulScalar { a, b, .. } => a.len().min(b.len()),
        }
    }
}

/// Element-wise kernels for one word size on a backend checked against the CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Eltwise<W: Word> {
    backend: Backend,
    /// The backend for moduli of at most [`IFMA_MAX_PRIME_BITS`] bits: faster than `backend`
    /// when the widest prime rules IFMA out but the CPU has it (auto choice only).
    narrow: Backend,
    max_prime_bits: u32,
    _w: PhantomData<W>,
}

impl<W: Word> Eltwise<W> {
    /// Kernels for moduli of at most `max_prime_bits` bits on a chosen or forced backend.
    pub fn new(choice: BackendChoice, max_prime_bits: u32) -> Result<Self> {
        let backend = choice.resolve(W::BITS, max_prime_bits)?;
        // Per-prime dispatch: a chain of 60-bit and 45-bit primes runs its 45-bit limbs on
        // IFMA (about 2.5x faster there) and only the wide ones on AVX-512 DQ.
        let narrow = match choice {
            BackendChoice::Auto => {
                Backend::best(W::BITS, max_prime_bits.min(IFMA_MAX_PRIME_BITS)).unwrap_or(backend)
            }
            BackendChoice::Force(_) => backend,
        };
        Ok(Self {
            backend,
            narrow,
            max_prime_bits,
            _w: PhantomData,
        })
    }

    /// The backend in use.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// The backend that runs the kernels for modulus `m`: [`Self::backend`], or a faster one
    /// for primes of at most [`IFMA_MAX_PRIME_BITS`] bits when the backend was chosen
    /// automatically.
    pub fn backend_for(&self, m: &Modulus<W>) -> Backend {
        if m.bits() <= IFMA_MAX_PRIME_BITS {
            self.narrow
        } else {
            self.backend
        }
    }

    /// Largest modulus size in bits these kernels accept.
    pub fn max_prime_bits(&self) -> u32 {
        self.max_prime_bits
    }

    fn check_mod(&self, m: &Modulus<W>) -> Result<()> {
        if m.bits() > self.max_prime_bits {
            return Err(MathError::ModulusTooLarge {
                q: m.value(),
                bits: m.bits(),
                max_bits: self.max_prime_bits,
                what: format!("these {} kernels", self.backend),
            });
        }
        Ok(())
    }

    fn check_scalar(m: &Modulus<W>, s: u64) -> Result<W> {
        if s >= m.value() {
            return Err(MathError::ScalarNotReduced {
                value: s,
                q: m.value(),
            });
        }
        Ok(W::from_u64(s))
    }

    fn binary(
        &self,
        op: BinOp,
        m: &Modulus<W>,
        out: &mut [W],
        a: Option<&[W]>,
        b: &[W],
    ) -> Result<()> {
        self.check_mod(m)?;
        if let Some(a) = a {
            check_len("element-wise operand a", out.len(), a.len())?;
        }
        check_len("element-wise operand b", out.len(), b.len())?;
        W::elt(self.backend_for(m), m, Job::Binary { op, out, a, b });
        Ok(())
    }

    /// `a = a op b mod q`.
    pub(crate) fn assign(&self, op: BinOp, m: &Modulus<W>, a: &mut [W], b: &[W]) -> Result<()> {
        self.binary(op, m, a, None, b)
    }

    /// `out = a + b mod q`.
    pub fn add(&self, m: &Modulus<W>, out: &mut [W], a: &[W], b: &[W]) -> Result<()> {
        self.binary(BinOp::Add, m, out, Some(a), b)
    }

    /// `a = a + b mod q`.
    pub fn add_assign(&self, m: &Modulus<W>, a: &mut [W], b: &[W]) -> Result<()> {
        self.binary(BinOp::Add, m, a, None, b)
    }

    /// `out = a - b mod q`.
    pub fn sub(&self, m: &Modulus<W>, out: &mut [W], a: &[W], b: &[W]) -> Result<()> {
        self.binary(BinOp::Sub, m, out, Some(a), b)
    }

    /// `a = a - b mod q`.
    pub fn sub_assign(&self, m: &Modulus<W>, a: &mut [W], b: &[W]) -> Result<()> {
        self.binary(BinOp::Sub, m, a, None, b)
    }

    /// `out = a * b mod q` (pointwise).
    pub fn mul(&self, m: &Modulus<W>, out: &mut [W], a: &[W], b: &[W]) -> Result<()> {
        self.binary(BinOp::Mul, m, out, Some(a), b)
    }

    /// `a = a * b mod q` (pointwise).
    pub fn mul_assign(&self, m: &Modulus<W>, a: &mut [W], b: &[W]) -> Result<()> {
        self.binary(BinOp::Mul, m, a, None, b)
    }

    /// `out = -a mod q`.
    pub fn neg(&self, m: &Modulus<W>, out: &mut [W], a: &[W]) -> Result<()> {
        self.check_mod(m)?;
        check_len("element-wise operand a", out.len(), a.len())?;
        W::elt(self.backend_for(m), m, Job::Neg { out, a: Some(a) });
        Ok(())
    }

    /// `a = -a mod q`.
    pub fn neg_assign(&self, m: &Modulus<W>, a: &mut [W]) -> Result<()> {
        self.check_mod(m)?;
        W::elt(self.backend_for(m), m, Job::Neg { out: a, a: None });
        Ok(())
    }

    /// `out = a * s mod q` for a scalar `s` (any `u64`, reduced first), by Shoup multiplication.
    pub fn mul_scalar(&self, m: &Modulus<W>, out: &mut [W], a: &[W], s: u64) -> Result<()> {
        self.check_mod(m)?;
        check_len("element-wise operand a", out.len(), a.len())?;
        let s = m.reduce_u64(s);
        W::elt(
            self.backend_for(m),
            m,
            Job::MulScalar { out, a: Some(a), s },
        );
        Ok(())
    }

    /// `a = a * s mod q`.
    pub fn mul_scalar_assign(&self, m: &Modulus<W>, a: &mut [W], s: u64) -> Result<()> {
        self.check_mod(m)?;
        let s = m.reduce_u64(s);
        W::elt(
            self.backend_for(m),
            m,
            Job::MulScalar { out: a, a: None, s },
        );
        Ok(())
    }

    /// `acc = acc + a * b mod q` (the inner step of key switching and plaintext products).
    pub fn mul_add(&self, m: &Modulus<W>, acc: &mut [W], a: &[W], b: &[W]) -> Result<()> {
        self.check_mod(m)?;
        check_len("element-wise operand a", acc.len(), a.len())?;
        check_len("element-wise operand b", acc.len(), b.len())?;
        W::elt(self.backend_for(m), m, Job::MulAdd { acc, a, b });
        Ok(())
    }

    /// `acc0 = acc0 + x * b`, `acc1 = acc1 + x * a` (mod q): one digit of the key-switching
    /// inner product against both halves of a key, in one pass where the backend fuses it
    /// (IFMA). All inputs reduced.
    pub fn mul_add2(
        &self,
        m: &Modulus<W>,
        acc0: &mut [W],
        acc1: &mut [W],
        x: &[W],
        b: &[W],
        a: &[W],
    ) -> Result<()> {
        self.check_mod(m)?;
        for (what, len) in [
            ("element-wise accumulator acc1", acc1.len()),
            ("element-wise operand x", x.len()),
            ("element-wise operand b", b.len()),
            ("element-wise operand a", a.len()),
        ] {
            check_len(what, acc0.len(), len)?;
        }
        W::elt(
            self.backend_for(m),
            m,
            Job::MulAdd2 {
                acc0,
                acc1,
                x,
                b,
                a,
            },
        );
        Ok(())
    }

    /// `out = a mod q` for words `a` of any value (the full `u64` / `u32` range), e.g. residues
    /// of a 60-bit prime brought into a 40-bit prime's range. Output reduced.
    pub fn reduce(&self, m: &Modulus<W>, out: &mut [W], a: &[W]) -> Result<()> {
        self.check_mod(m)?;
        check_len("element-wise operand a", out.len(), a.len())?;
        W::elt(self.backend_for(m), m, Job::Reduce { out, a: Some(a) });
        Ok(())
    }

    /// `a = a mod q` for words of any value. Output reduced.
    pub fn reduce_assign(&self, m: &Modulus<W>, a: &mut [W]) -> Result<()> {
        self.check_mod(m)?;
        W::elt(self.backend_for(m), m, Job::Reduce { out: a, a: None });
        Ok(())
    }

    /// `acc = acc + a * s mod q` (Shoup multiplication by the constant `s`): the inner step of
    /// RNS base conversion.
    ///
    /// Input ranges: `acc` reduced; `s < q` (else [`MathError::ScalarNotReduced`]); `a[k]` any
    /// value below `2^(W::MAX_PRIME_BITS + 1)`, i.e. below `2^62` for `u64` and any `u32`, so
    /// `a` may hold residues modulo a different (larger) prime or lazy values in `[0, 2q)`. On
    /// the IFMA backend, whose multipliers read 52 bits, an 8-word block with a value of 2^52
    /// or more takes the AVX-512 DQ Shoup product instead (exact, about 1.5x slower); residues
    /// of IFMA-sized primes (below 2^50) never do. Output reduced.
    pub fn mul_scalar_add(&self, m: &Modulus<W>, acc: &mut [W], a: &[W], s: u64) -> Result<()> {
        self.check_mod(m)?;
        check_len("element-wise operand a", acc.len(), a.len())?;
        let s = Self::check_scalar(m, s)?;
        W::elt(self.backend_for(m), m, Job::MulScalarAdd { acc, a, s });
        Ok(())
    }

    /// `a = (a - b) * s mod q`: the rescale step `(c_i - c_l) * q_l^-1`.
    ///
    /// Input ranges: `a`, `b` reduced; `s < q` (else [`MathError::ScalarNotReduced`]). Output
    /// reduced.
    pub fn sub_mul_scalar(&self, m: &Modulus<W>, a: &mut [W], b: &[W], s: u64) -> Result<()> {
        self.check_mod(m)?;
        check_len("element-wise operand b", a.len(), b.len())?;
        let s = Self::check_scalar(m, s)?;
        W::elt(self.backend_for(m), m, Job::SubMulScalar { a, b, s });
        Ok(())
    }
}
