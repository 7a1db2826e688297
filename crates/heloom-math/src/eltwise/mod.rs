//! Element-wise modular kernels on word slices: add, sub, negate, pointwise multiply,
//! multiply-add and multiply by a scalar, for every backend.
//!
//! Inputs must be reduced (`[0, q)`); outputs are reduced.

pub(crate) mod avx2_u32;
pub(crate) mod avx2_u64;
pub(crate) mod avx512_u32;
pub(crate) mod avx512_u64;
pub(crate) mod ifma;
pub(crate) mod scalar;

use std::marker::PhantomData;

use crate::backend::{Backend, BackendChoice};
use crate::error::{MathError, Result};
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

/// Element-wise kernels for one word size on a backend checked against the CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Eltwise<W: Word> {
    backend: Backend,
    max_prime_bits: u32,
    _w: PhantomData<W>,
}

impl<W: Word> Eltwise<W> {
    /// Kernels for moduli of at most `max_prime_bits` bits on a chosen or forced backend.
    pub fn new(choice: BackendChoice, max_prime_bits: u32) -> Result<Self> {
        let backend = choice.resolve(W::BITS, max_prime_bits)?;
        Ok(Self {
            backend,
            max_prime_bits,
            _w: PhantomData,
        })
    }

    /// The backend in use.
    pub fn backend(&self) -> Backend {
        self.backend
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

    fn check_len(what: &'static str, expected: usize, got: usize) -> Result<()> {
        if expected != got {
            return Err(MathError::LengthMismatch {
                what,
                expected,
                got,
            });
        }
        Ok(())
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
            Self::check_len("element-wise operand a", out.len(), a.len())?;
        }
        Self::check_len("element-wise operand b", out.len(), b.len())?;
        W::elt_binary(self.backend, op, m, out, a, b);
        Ok(())
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
        Self::check_len("element-wise operand a", out.len(), a.len())?;
        W::elt_neg(self.backend, m, out, Some(a));
        Ok(())
    }

    /// `a = -a mod q`.
    pub fn neg_assign(&self, m: &Modulus<W>, a: &mut [W]) -> Result<()> {
        self.check_mod(m)?;
        W::elt_neg(self.backend, m, a, None);
        Ok(())
    }

    /// `out = a * s mod q` for a scalar `s` (any `u64`, reduced first), by Shoup multiplication.
    pub fn mul_scalar(&self, m: &Modulus<W>, out: &mut [W], a: &[W], s: u64) -> Result<()> {
        self.check_mod(m)?;
        Self::check_len("element-wise operand a", out.len(), a.len())?;
        W::elt_mul_scalar(self.backend, m, out, Some(a), m.reduce_u64(s));
        Ok(())
    }

    /// `a = a * s mod q`.
    pub fn mul_scalar_assign(&self, m: &Modulus<W>, a: &mut [W], s: u64) -> Result<()> {
        self.check_mod(m)?;
        W::elt_mul_scalar(self.backend, m, a, None, m.reduce_u64(s));
        Ok(())
    }

    /// `acc = acc + a * b mod q` (the inner step of key switching and plaintext products).
    pub fn mul_add(&self, m: &Modulus<W>, acc: &mut [W], a: &[W], b: &[W]) -> Result<()> {
        self.check_mod(m)?;
        Self::check_len("element-wise operand a", acc.len(), a.len())?;
        Self::check_len("element-wise operand b", acc.len(), b.len())?;
        W::elt_mul_add(self.backend, m, acc, a, b);
        Ok(())
    }
}
