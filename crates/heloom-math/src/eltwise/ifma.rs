//! AVX-512 IFMA element-wise kernels for 64-bit words and moduli below 2^50: a [`Lanes`] of its
//! own (the 52-bit multipliers need their own reductions), run by the shared skeleton.
//!
//! - pointwise `a * b`: Barrett reduction (Barrett 1986) of the 100-bit product
//!   `P = hi*2^52 + lo` with `c = floor(P / 2^s)`, `mu = floor(2^(52+s) / q)` (`s` the largest
//!   shift with `2^s < q`, so `mu < 2^52` and `c < 2^51`), `Qhat = madd52hi(c, mu)`,
//!   `r = lo - lo52(Qhat*q)` in `[0, 2.5q)`, then two conditional subtractions;
//! - by a scalar: HEXL-style 52-bit Shoup multiplication (`W' = floor(W*2^52/q)`), exact for
//!   `x < 2^52`; `mul_scalar_add` checks each vector and runs one with a larger word through
//!   the AVX-512 DQ Shoup product (exact below 2^63);
//! - `reduce` of arbitrary 64-bit words: the AVX-512 DQ kernel (52-bit multipliers cannot read
//!   a whole word);
//! - the key-switching step `mul_add2` is fused: each `x` word is loaded once.

use std::arch::x86_64::*;

use super::barrett64::Barrett64;
use super::skeleton::Lanes;
use crate::backend::IFMA_MAX_PRIME_BITS;
use crate::modulus::Modulus;
use crate::simd::avx512::Avx512;
use crate::simd::Shoup64;

/// `2^52 - 1`: IFMA multiplies the low 52 bits of each lane.
const MASK52: u64 = (1 << 52) - 1;

/// The IFMA backend: the constants of one modulus.
#[derive(Clone, Copy)]
pub(crate) struct Ops {
    /// `q`.
    q: __m512i,
    /// `2q`.
    q2: __m512i,
    /// `2^52 - q`: multiplying by it and keeping 52 bits subtracts a multiple of `q` mod 2^52.
    negq: __m512i,
    /// `2^52 - 1`.
    mask: __m512i,
    /// `!(2^52 - 1)`: the bits IFMA does not read.
    high: __m512i,
    /// Barrett constant `floor(2^(52+s) / q)`.
    mu: __m512i,
    /// Shift `s` (as a shift-count register).
    shr: __m128i,
    /// `52 - s`.
    shl: __m128i,
    /// The AVX-512 DQ constants (`reduce`, and wide inputs of `mul_scalar_add`).
    dq: Barrett64<Avx512>,
}

/// Broadcast constants of a multiplier `s`: IFMA's and the DQ fallback's.
#[derive(Clone, Copy)]
pub(crate) struct Scalar {
    /// `s`.
    w: __m512i,
    /// The 52-bit Shoup companion `floor(s 2^52 / q)`.
    wp: __m512i,
    /// The DQ fallback's.
    dq: Shoup64<Avx512>,
}

/// `v - m` if `v >= m`, else `v` (unsigned `min(v, v - m)`).
#[inline]
#[target_feature(enable = "avx512f")]
fn csub(v: __m512i, m: __m512i) -> __m512i {
    _mm512_min_epu64(v, _mm512_sub_epi64(v, m))
}

impl Ops {
    /// `x * y mod q` in `[0, 2.5q)` for reduced `x`, `y` (Barrett on the IFMA product, see the
    /// module docs).
    #[inline]
    #[target_feature(enable = "avx512f,avx512ifma")]
    fn mul_lazy(&self, x: __m512i, y: __m512i) -> __m512i {
        let z = _mm512_setzero_si512();
        let lo = _mm512_madd52lo_epu64(z, x, y);
        let hi = _mm512_madd52hi_epu64(z, x, y);
        // floor(P / 2^s) from the two 52-bit halves of P.
        let top = _mm512_or_si512(
            _mm512_sll_epi64(hi, self.shl),
            _mm512_srl_epi64(lo, self.shr),
        );
        let qhat = _mm512_madd52hi_epu64(z, top, self.mu);
        // P - qhat*q < 2.5q < 2^52, so its low 52 bits are the value itself.
        _mm512_and_si512(_mm512_madd52lo_epu64(lo, qhat, self.negq), self.mask)
    }

    /// `acc + x * s` as `lo52(acc + x s - Q q)` with the 52-bit Shoup quotient `Q` (at most one
    /// low for `x < 2^52`), so the result lies in `[0, acc + 2q)` (below 2^52 for `acc + 2q`).
    #[inline]
    #[target_feature(enable = "avx512f,avx512ifma")]
    fn mul_shoup_acc(&self, acc: __m512i, x: __m512i, s: &Scalar) -> __m512i {
        let qh = _mm512_madd52hi_epu64(_mm512_setzero_si512(), s.wp, x);
        let t = _mm512_madd52lo_epu64(_mm512_madd52lo_epu64(acc, s.w, x), qh, self.negq);
        _mm512_and_si512(t, self.mask)
    }
}

impl Lanes for Ops {
    type W = u64;
    type V = __m512i;
    type S = Scalar;
    /// `q`, the shift `s`, `mu` and the DQ fallback's scalars.
    type Scalars = (u64, u32, u64, <Barrett64<Avx512> as Lanes>::Scalars);
    /// `s`, its 52-bit and its 2^63-scaled Shoup companions.
    type Pre = (u64, u64, u64);
    const LANES: usize = 8;
    const FUSED_MUL_ADD2: bool = true;

    fn takes(m: &Modulus<u64>) -> bool {
        m.bits() <= IFMA_MAX_PRIME_BITS
    }

    fn scalars(m: &Modulus<u64>) -> Self::Scalars {
        let q = m.q();
        // Largest s with 2^s < q keeps mu below 2^52.
        let s = 63 - (q - 1).leading_zeros();
        let mu = ((1u128 << (52 + s)) / q as u128) as u64;
        (q, s, mu, Barrett64::<Avx512>::scalars(m))
    }

    fn pre(m: &Modulus<u64>, s: u64) -> (u64, u64, u64) {
        let wp = (((s as u128) << 52) / m.q() as u128) as u64;
        (s, wp, m.shoup(s) >> 1)
    }

    #[inline]
    #[target_feature(enable = "avx512f,avx512dq")]
    unsafe fn new((q, s, mu, dq): &Self::Scalars) -> Self {
        let (q, s, mu) = (*q, *s, *mu);
        Self {
            q: _mm512_set1_epi64(q as i64),
            q2: _mm512_set1_epi64((2 * q) as i64),
            negq: _mm512_set1_epi64(((1u64 << 52) - q) as i64),
            mask: _mm512_set1_epi64(MASK52 as i64),
            high: _mm512_set1_epi64(!MASK52 as i64),
            mu: _mm512_set1_epi64(mu as i64),
            shr: _mm_cvtsi64_si128(s as i64),
            shl: _mm_cvtsi64_si128(52 - s as i64),
            // SAFETY: avx512f/dq are enabled here.
            dq: unsafe { Barrett64::new(dq) },
        }
    }

    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn load(&self, p: *const u64) -> __m512i {
        // SAFETY: the caller guarantees 8 readable words at `p`.
        unsafe { _mm512_loadu_epi64(p as *const i64) }
    }

    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn store(&self, p: *mut u64, v: __m512i) {
        // SAFETY: the caller guarantees 8 writable words at `p`.
        unsafe { _mm512_storeu_epi64(p as *mut i64, v) }
    }

    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn add(&self, a: __m512i, b: __m512i) -> __m512i {
        csub(_mm512_add_epi64(a, b), self.q)
    }

    /// `a - b` wraps below zero exactly when `a < b`; then `a - b + q` is the smaller value.
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn sub(&self, a: __m512i, b: __m512i) -> __m512i {
        let d = _mm512_sub_epi64(a, b);
        _mm512_min_epu64(d, _mm512_add_epi64(d, self.q))
    }

    /// `q - x` for nonzero lanes, 0 stays 0.
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn neg(&self, a: __m512i) -> __m512i {
        _mm512_maskz_sub_epi64(_mm512_test_epi64_mask(a, a), self.q, a)
    }

    #[inline]
    #[target_feature(enable = "avx512f,avx512ifma")]
    unsafe fn mul(&self, a: __m512i, b: __m512i) -> __m512i {
        csub(csub(self.mul_lazy(a, b), self.q2), self.q)
    }

    /// `acc + p < q + 2.5q < 4q`: two conditional subtractions reduce it.
    #[inline]
    #[target_feature(enable = "avx512f,avx512ifma")]
    unsafe fn mul_add(&self, acc: __m512i, a: __m512i, b: __m512i) -> __m512i {
        let s = _mm512_add_epi64(acc, self.mul_lazy(a, b));
        csub(csub(s, self.q2), self.q)
    }

    #[inline]
    #[target_feature(enable = "avx512f,avx512dq")]
    unsafe fn reduce(&self, x: __m512i) -> __m512i {
        // SAFETY: avx512f/dq are enabled here.
        unsafe { self.dq.reduce(x) }
    }

    #[inline]
    #[target_feature(enable = "avx512f,avx512dq")]
    unsafe fn scalar(&self, (s, wp, ws63): (u64, u64, u64)) -> Scalar {
        Scalar {
            w: _mm512_set1_epi64(s as i64),
            wp: _mm512_set1_epi64(wp as i64),
            // SAFETY: avx512f/dq are enabled here.
            dq: unsafe { self.dq.scalar((s, ws63)) },
        }
    }

    /// 52-bit Shoup: `Q = madd52hi(W', x)`, `T = lo52(W*x) - lo52(Q*q)` in `[0, 2q)`.
    #[inline]
    #[target_feature(enable = "avx512f,avx512ifma")]
    unsafe fn mul_scalar(&self, x: __m512i, s: &Scalar) -> __m512i {
        csub(self.mul_shoup_acc(_mm512_setzero_si512(), x, s), self.q)
    }

    /// A vector with a word of 52 bits or more (IFMA reads only the low 52) takes the DQ
    /// Shoup product instead; both paths are inline, so the loop keeps its constants in
    /// registers.
    #[inline]
    #[target_feature(enable = "avx512f,avx512dq,avx512ifma")]
    unsafe fn mul_scalar_add(&self, acc: __m512i, x: __m512i, s: &Scalar) -> __m512i {
        if _mm512_test_epi64_mask(x, self.high) == 0 {
            // acc + [0, 2q) < 3q.
            csub(csub(self.mul_shoup_acc(acc, x, s), self.q2), self.q)
        } else {
            // SAFETY: avx512f/dq are enabled here.
            unsafe { self.dq.mul_scalar_add(acc, x, &s.dq) }
        }
    }

    /// Shoup on `a + q - b`, which lies in `(0, 2q)`, below 2^51.
    #[inline]
    #[target_feature(enable = "avx512f,avx512ifma")]
    unsafe fn sub_mul_scalar(&self, a: __m512i, b: __m512i, s: &Scalar) -> __m512i {
        let d = _mm512_sub_epi64(_mm512_add_epi64(a, self.q), b);
        csub(self.mul_shoup_acc(_mm512_setzero_si512(), d, s), self.q)
    }
}
