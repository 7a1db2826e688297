//! Per-word dispatch from generic code to the backend kernels.
//!
//! Word size and backend are fixed when a table or basis is built; the layers above call these
//! hooks through generic code and never branch on either.

use std::fmt::Debug;

use crate::backend::Backend;
use crate::eltwise::{self, Job};
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

    /// Runs one element-wise job on `backend` (checked against the CPU).
    #[doc(hidden)]
    fn elt(backend: Backend, m: &Modulus<Self>, job: Job<'_, Self>)
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

    fn elt(backend: Backend, m: &Modulus<u64>, job: Job<'_, u64>) {
        match backend {
            Backend::Scalar => eltwise::scalar::run(m, job),
            Backend::Avx2 => eltwise::x86::avx2_u64(m, job),
            Backend::Avx512 => eltwise::x86::avx512_u64(m, job),
            Backend::Avx512Ifma => eltwise::x86::ifma(m, job),
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

    fn elt(backend: Backend, m: &Modulus<u32>, job: Job<'_, u32>) {
        match backend {
            Backend::Avx2 => eltwise::x86::avx2_u32(m, job),
            Backend::Avx512 => eltwise::x86::avx512_u32(m, job),
            // IFMA is refused for 32-bit words by Backend::check.
            Backend::Scalar | Backend::Avx512Ifma => eltwise::scalar::run(m, job),
        }
    }
}
