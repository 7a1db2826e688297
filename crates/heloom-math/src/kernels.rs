//! Per-word dispatch from generic code to the backend kernels.
//!
//! Word size and backend are fixed when a table or basis is built; the layers above call these
//! hooks through generic code and never branch on either.

use std::fmt::Debug;

use crate::backend::Backend;
use crate::eltwise::{self, BinOp};
use crate::modulus::Modulus;
use crate::ntt::{self, NttCore};
use crate::word::Word;

/// Kernel hooks implemented for `u32` and `u64`. Not meant to be called directly: use
/// [`crate::ntt::NttTable`] and [`crate::eltwise::Eltwise`].
pub trait Kernels: Sized {
    /// Backend-specific NTT precomputation (twiddle layouts for the SIMD kernels).
    type NttAccel: Send + Sync + Debug;

    /// Builds the backend-specific NTT data. `backend` has been checked against the CPU.
    #[doc(hidden)]
    fn ntt_accel(core: &NttCore<Self>, backend: Backend) -> Self::NttAccel
    where
        Self: Word;

    /// Forward NTT in place; `a.len() == core.n()`.
    #[doc(hidden)]
    fn ntt_forward(core: &NttCore<Self>, accel: &Self::NttAccel, a: &mut [Self])
    where
        Self: Word;

    /// Inverse NTT in place; `a.len() == core.n()`.
    #[doc(hidden)]
    fn ntt_inverse(core: &NttCore<Self>, accel: &Self::NttAccel, a: &mut [Self])
    where
        Self: Word;

    /// `out = a op b` (or `out = out op b` when `a` is `None`), element-wise mod q.
    #[doc(hidden)]
    fn elt_binary(
        backend: Backend,
        op: BinOp,
        m: &Modulus<Self>,
        out: &mut [Self],
        a: Option<&[Self]>,
        b: &[Self],
    ) where
        Self: Word;

    /// `out = -a` (or `out = -out`).
    #[doc(hidden)]
    fn elt_neg(backend: Backend, m: &Modulus<Self>, out: &mut [Self], a: Option<&[Self]>)
    where
        Self: Word;

    /// `out = a * s` (or `out = out * s`) for a reduced scalar `s` (Shoup).
    #[doc(hidden)]
    fn elt_mul_scalar(
        backend: Backend,
        m: &Modulus<Self>,
        out: &mut [Self],
        a: Option<&[Self]>,
        s: Self,
    ) where
        Self: Word;

    /// `acc = acc + a * b`.
    #[doc(hidden)]
    fn elt_mul_add(backend: Backend, m: &Modulus<Self>, acc: &mut [Self], a: &[Self], b: &[Self])
    where
        Self: Word;

    /// `acc0 += x * b; acc1 += x * a` (the key-switching inner product: one digit against both
    /// halves of a key). Two passes by default; fused where a backend has a kernel.
    #[doc(hidden)]
    fn elt_mul_add2(
        backend: Backend,
        m: &Modulus<Self>,
        acc0: &mut [Self],
        acc1: &mut [Self],
        x: &[Self],
        b: &[Self],
        a: &[Self],
    ) where
        Self: Word,
    {
        Self::elt_mul_add(backend, m, acc0, x, b);
        Self::elt_mul_add(backend, m, acc1, x, a);
    }

    /// `out = a mod q` (or `out = out mod q`) for words of any value.
    #[doc(hidden)]
    fn elt_reduce(backend: Backend, m: &Modulus<Self>, out: &mut [Self], a: Option<&[Self]>)
    where
        Self: Word;

    /// `acc = acc + a * s` for a reduced scalar `s`, `a` below `2^(MAX_PRIME_BITS + 1)`.
    #[doc(hidden)]
    fn elt_mul_scalar_add(
        backend: Backend,
        m: &Modulus<Self>,
        acc: &mut [Self],
        a: &[Self],
        s: Self,
    ) where
        Self: Word;

    /// `a = (a - b) * s` for reduced `a`, `b` and a reduced scalar `s`.
    #[doc(hidden)]
    fn elt_sub_mul_scalar(backend: Backend, m: &Modulus<Self>, a: &mut [Self], b: &[Self], s: Self)
    where
        Self: Word;
}

/// Backend-specific NTT data for 64-bit words.
#[derive(Debug)]
#[doc(hidden)]
pub enum NttAccel64 {
    /// Portable path: uses the core tables directly.
    Scalar,
    /// AVX2 tables.
    Avx2(ntt::avx2_u64::Tables),
    /// AVX-512 DQ tables.
    Avx512(ntt::avx512_u64::Tables),
    /// AVX-512 IFMA tables.
    Ifma(ntt::ifma::Tables),
}

/// Backend-specific NTT data for 32-bit words.
#[derive(Debug)]
#[doc(hidden)]
pub enum NttAccel32 {
    /// Portable path.
    Scalar,
    /// AVX2 tables.
    Avx2(ntt::avx2_u32::Tables),
    /// AVX-512 tables.
    Avx512(ntt::avx512_u32::Tables),
}

impl Kernels for u64 {
    type NttAccel = NttAccel64;

    fn ntt_accel(core: &NttCore<u64>, backend: Backend) -> NttAccel64 {
        match backend {
            Backend::Scalar => NttAccel64::Scalar,
            Backend::Avx2 => NttAccel64::Avx2(ntt::avx2_u64::Tables::new(core)),
            Backend::Avx512 => NttAccel64::Avx512(ntt::avx512_u64::Tables::new(core)),
            Backend::Avx512Ifma => NttAccel64::Ifma(ntt::ifma::Tables::new(core)),
        }
    }

    fn ntt_forward(core: &NttCore<u64>, accel: &NttAccel64, a: &mut [u64]) {
        match accel {
            NttAccel64::Scalar => ntt::scalar::forward(core, a),
            NttAccel64::Avx2(t) => ntt::avx2_u64::forward(core, t, a),
            NttAccel64::Avx512(t) => ntt::avx512_u64::forward(core, t, a),
            NttAccel64::Ifma(t) => ntt::ifma::forward(core, t, a),
        }
    }

    fn ntt_inverse(core: &NttCore<u64>, accel: &NttAccel64, a: &mut [u64]) {
        match accel {
            NttAccel64::Scalar => ntt::scalar::inverse(core, a),
            NttAccel64::Avx2(t) => ntt::avx2_u64::inverse(core, t, a),
            NttAccel64::Avx512(t) => ntt::avx512_u64::inverse(core, t, a),
            NttAccel64::Ifma(t) => ntt::ifma::inverse(core, t, a),
        }
    }

    fn elt_binary(
        backend: Backend,
        op: BinOp,
        m: &Modulus<u64>,
        out: &mut [u64],
        a: Option<&[u64]>,
        b: &[u64],
    ) {
        match backend {
            Backend::Scalar => eltwise::scalar::binary(op, m, out, a, b),
            Backend::Avx2 => eltwise::avx2_u64::binary(op, m, out, a, b),
            Backend::Avx512 => eltwise::avx512_u64::binary(op, m, out, a, b),
            Backend::Avx512Ifma => eltwise::ifma::binary(op, m, out, a, b),
        }
    }

    fn elt_neg(backend: Backend, m: &Modulus<u64>, out: &mut [u64], a: Option<&[u64]>) {
        match backend {
            Backend::Scalar => eltwise::scalar::neg(m, out, a),
            Backend::Avx2 => eltwise::avx2_u64::neg(m, out, a),
            Backend::Avx512 => eltwise::avx512_u64::neg(m, out, a),
            Backend::Avx512Ifma => eltwise::ifma::neg(m, out, a),
        }
    }

    fn elt_mul_scalar(
        backend: Backend,
        m: &Modulus<u64>,
        out: &mut [u64],
        a: Option<&[u64]>,
        s: u64,
    ) {
        match backend {
            Backend::Scalar => eltwise::scalar::mul_scalar(m, out, a, s),
            Backend::Avx2 => eltwise::avx2_u64::mul_scalar(m, out, a, s),
            Backend::Avx512 => eltwise::avx512_u64::mul_scalar(m, out, a, s),
            Backend::Avx512Ifma => eltwise::ifma::mul_scalar(m, out, a, s),
        }
    }

    fn elt_mul_add2(
        backend: Backend,
        m: &Modulus<u64>,
        acc0: &mut [u64],
        acc1: &mut [u64],
        x: &[u64],
        b: &[u64],
        a: &[u64],
    ) {
        match backend {
            Backend::Avx512Ifma => eltwise::ifma::mul_add2(m, acc0, acc1, x, b, a),
            _ => {
                Self::elt_mul_add(backend, m, acc0, x, b);
                Self::elt_mul_add(backend, m, acc1, x, a);
            }
        }
    }

    fn elt_mul_add(backend: Backend, m: &Modulus<u64>, acc: &mut [u64], a: &[u64], b: &[u64]) {
        match backend {
            Backend::Scalar => eltwise::scalar::mul_add(m, acc, a, b),
            Backend::Avx2 => eltwise::avx2_u64::mul_add(m, acc, a, b),
            Backend::Avx512 => eltwise::avx512_u64::mul_add(m, acc, a, b),
            Backend::Avx512Ifma => eltwise::ifma::mul_add(m, acc, a, b),
        }
    }

    fn elt_reduce(backend: Backend, m: &Modulus<u64>, out: &mut [u64], a: Option<&[u64]>) {
        match backend {
            Backend::Scalar => eltwise::scalar::reduce(m, out, a),
            Backend::Avx2 => eltwise::avx2_u64::reduce(m, out, a),
            Backend::Avx512 => eltwise::avx512_u64::reduce(m, out, a),
            Backend::Avx512Ifma => eltwise::ifma::reduce(m, out, a),
        }
    }

    fn elt_mul_scalar_add(backend: Backend, m: &Modulus<u64>, acc: &mut [u64], a: &[u64], s: u64) {
        match backend {
            Backend::Scalar => eltwise::scalar::mul_scalar_add(m, acc, a, s),
            Backend::Avx2 => eltwise::avx2_u64::mul_scalar_add(m, acc, a, s),
            Backend::Avx512 => eltwise::avx512_u64::mul_scalar_add(m, acc, a, s),
            Backend::Avx512Ifma => eltwise::ifma::mul_scalar_add(m, acc, a, s),
        }
    }

    fn elt_sub_mul_scalar(backend: Backend, m: &Modulus<u64>, a: &mut [u64], b: &[u64], s: u64) {
        match backend {
            Backend::Scalar => eltwise::scalar::sub_mul_scalar(m, a, b, s),
            Backend::Avx2 => eltwise::avx2_u64::sub_mul_scalar(m, a, b, s),
            Backend::Avx512 => eltwise::avx512_u64::sub_mul_scalar(m, a, b, s),
            Backend::Avx512Ifma => eltwise::ifma::sub_mul_scalar(m, a, b, s),
        }
    }
}

impl Kernels for u32 {
    type NttAccel = NttAccel32;

    fn ntt_accel(core: &NttCore<u32>, backend: Backend) -> NttAccel32 {
        match backend {
            Backend::Avx2 => NttAccel32::Avx2(ntt::avx2_u32::Tables::new(core)),
            Backend::Avx512 => NttAccel32::Avx512(ntt::avx512_u32::Tables::new(core)),
            // IFMA is refused for 32-bit words by Backend::check.
            Backend::Scalar | Backend::Avx512Ifma => NttAccel32::Scalar,
        }
    }

    fn ntt_forward(core: &NttCore<u32>, accel: &NttAccel32, a: &mut [u32]) {
        match accel {
            NttAccel32::Scalar => ntt::scalar::forward(core, a),
            NttAccel32::Avx2(t) => ntt::avx2_u32::forward(core, t, a),
            NttAccel32::Avx512(t) => ntt::avx512_u32::forward(core, t, a),
        }
    }

    fn ntt_inverse(core: &NttCore<u32>, accel: &NttAccel32, a: &mut [u32]) {
        match accel {
            NttAccel32::Scalar => ntt::scalar::inverse(core, a),
            NttAccel32::Avx2(t) => ntt::avx2_u32::inverse(core, t, a),
            NttAccel32::Avx512(t) => ntt::avx512_u32::inverse(core, t, a),
        }
    }

    fn elt_binary(
        backend: Backend,
        op: BinOp,
        m: &Modulus<u32>,
        out: &mut [u32],
        a: Option<&[u32]>,
        b: &[u32],
    ) {
        match backend {
            Backend::Avx2 => eltwise::avx2_u32::binary(op, m, out, a, b),
            Backend::Avx512 => eltwise::avx512_u32::binary(op, m, out, a, b),
            Backend::Scalar | Backend::Avx512Ifma => eltwise::scalar::binary(op, m, out, a, b),
        }
    }

    fn elt_neg(backend: Backend, m: &Modulus<u32>, out: &mut [u32], a: Option<&[u32]>) {
        match backend {
            Backend::Avx2 => eltwise::avx2_u32::neg(m, out, a),
            Backend::Avx512 => eltwise::avx512_u32::neg(m, out, a),
            Backend::Scalar | Backend::Avx512Ifma => eltwise::scalar::neg(m, out, a),
        }
    }

    fn elt_mul_scalar(
        backend: Backend,
        m: &Modulus<u32>,
        out: &mut [u32],
        a: Option<&[u32]>,
        s: u32,
    ) {
        match backend {
            Backend::Avx2 => eltwise::avx2_u32::mul_scalar(m, out, a, s),
            Backend::Avx512 => eltwise::avx512_u32::mul_scalar(m, out, a, s),
            Backend::Scalar | Backend::Avx512Ifma => eltwise::scalar::mul_scalar(m, out, a, s),
        }
    }

    fn elt_mul_add(backend: Backend, m: &Modulus<u32>, acc: &mut [u32], a: &[u32], b: &[u32]) {
        match backend {
            Backend::Avx2 => eltwise::avx2_u32::mul_add(m, acc, a, b),
            Backend::Avx512 => eltwise::avx512_u32::mul_add(m, acc, a, b),
            Backend::Scalar | Backend::Avx512Ifma => eltwise::scalar::mul_add(m, acc, a, b),
        }
    }

    fn elt_reduce(backend: Backend, m: &Modulus<u32>, out: &mut [u32], a: Option<&[u32]>) {
        match backend {
            Backend::Avx2 => eltwise::avx2_u32::reduce(m, out, a),
            Backend::Avx512 => eltwise::avx512_u32::reduce(m, out, a),
            Backend::Scalar | Backend::Avx512Ifma => eltwise::scalar::reduce(m, out, a),
        }
    }

    fn elt_mul_scalar_add(backend: Backend, m: &Modulus<u32>, acc: &mut [u32], a: &[u32], s: u32) {
        match backend {
            Backend::Avx2 => eltwise::avx2_u32::mul_scalar_add(m, acc, a, s),
            Backend::Avx512 => eltwise::avx512_u32::mul_scalar_add(m, acc, a, s),
            Backend::Scalar | Backend::Avx512Ifma => eltwise::scalar::mul_scalar_add(m, acc, a, s),
        }
    }

    fn elt_sub_mul_scalar(backend: Backend, m: &Modulus<u32>, a: &mut [u32], b: &[u32], s: u32) {
        match backend {
            Backend::Avx2 => eltwise::avx2_u32::sub_mul_scalar(m, a, b, s),
            Backend::Avx512 => eltwise::avx512_u32::sub_mul_scalar(m, a, b, s),
            Backend::Scalar | Backend::Avx512Ifma => eltwise::scalar::sub_mul_scalar(m, a, b, s),
        }
    }
}
