//! AVX2 (256-bit registers): 8 lanes of 32 bits, 4 of 64.
//!
//! 64-bit lanes: conditional subtractions keep `x` where `x - m` is negative (sign-bit blend:
//! AVX2 has no unsigned 64-bit compare); 64-bit low products, missing in AVX2, are assembled
//! from `vpmuludq` (low halves) and `vpmulld` against the half-swapped constant (both cross
//! terms at once).

use core::arch::x86_64::*;

use super::{mem, prims, Prim32, Prim64};

/// The AVX2 instruction set.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Avx2;

/// `b` in lanes where `sel` is negative, else `a`.
#[inline]
#[target_feature(enable = "avx2")]
fn blend_neg(a: __m256i, b: __m256i, sel: __m256i) -> __m256i {
    _mm256_castpd_si256(_mm256_blendv_pd(
        _mm256_castsi256_pd(a),
        _mm256_castsi256_pd(b),
        _mm256_castsi256_pd(sel),
    ))
}

/// Returns `x` unchanged, hidden from the optimizer: LLVM otherwise recognizes the split
/// 64-bit products as `mul i64` and re-expands them with more `vpmuludq`, and loses the
/// known-zero high halves of broadcast constants.
#[inline]
#[target_feature(enable = "avx2")]
fn opaque(mut x: __m256i) -> __m256i {
    // SAFETY: an empty template that only names the register: no memory, stack or flags touched.
    unsafe {
        std::arch::asm!("/* {0} */", inout(ymm_reg) x, options(pure, nomem, nostack, preserves_flags));
    }
    x
}

/// `vpmuludq` (the 64-bit products of the low 32-bit halves), written as assembly: LLVM sees
/// the intrinsic as a 64-bit multiply of masked operands and, where it loses track of a
/// constant's zero high half (a mask hoisted out of the loop), multiplies it out with more
/// instructions (three `vpmuludq`, or a slow `vpmullq`).
#[inline]
#[target_feature(enable = "avx2")]
fn pmuludq(a: __m256i, b: __m256i) -> __m256i {
    let r: __m256i;
    // SAFETY: a register-only instruction of the enabled set: no memory, stack or flags touched.
    unsafe {
        core::arch::asm!(
            "vpmuludq {r}, {a}, {b}",
            r = lateout(ymm_reg) r,
            a = in(ymm_reg) a,
            b = in(ymm_reg) b,
            options(pure, nomem, nostack, preserves_flags)
        );
    }
    r
}

impl Prim32 for Avx2 {
    type V = __m256i;
    type Cnt = __m128i;
    const LANES: usize = 8;

    prims! { "avx2";
        fn zero() -> __m256i = _mm256_setzero_si256();
        fn splat(x: u32) -> __m256i = _mm256_set1_epi32(x as i32);
        fn count(n: u32) -> __m128i = _mm_set_epi64x(0, i64::from(n));
        fn add(a: __m256i, b: __m256i) -> __m256i = _mm256_add_epi32(a, b);
        fn sub(a: __m256i, b: __m256i) -> __m256i = _mm256_sub_epi32(a, b);
        fn min(a: __m256i, b: __m256i) -> __m256i = _mm256_min_epu32(a, b);
        fn mullo(a: __m256i, b: __m256i) -> __m256i = _mm256_mullo_epi32(a, b);
        fn mul_even(a: __m256i, b: __m256i) -> __m256i = pmuludq(a, b);
        fn odd_down(a: __m256i) -> __m256i = _mm256_srli_epi64::<32>(a);
        fn add64(a: __m256i, b: __m256i) -> __m256i = _mm256_add_epi64(a, b);
        fn srl64(a: __m256i, c: __m128i) -> __m256i = _mm256_srl_epi64(a, c);
        fn sll64(a: __m256i, c: __m128i) -> __m256i = _mm256_sll_epi64(a, c);
        fn blend_odd(even: __m256i, odd: __m256i) -> __m256i =
            _mm256_blend_epi32::<0b1010_1010>(even, odd);
        fn merge_hi(even: __m256i, odd: __m256i) -> __m256i =
            _mm256_blend_epi32::<0b1010_1010>(_mm256_srli_epi64::<32>(even), odd);
    }

    mem!(
        "avx2",
        u32,
        __m256i,
        _mm256_loadu_si256,
        _mm256_storeu_si256
    );
}

impl Prim64 for Avx2 {
    type V = __m256i;
    type Cnt = __m128i;
    const LANES: usize = 4;

    prims! { "avx2";
        // Hidden from the optimizer (see `opaque`).
        fn zero() -> __m256i = _mm256_setzero_si256();
        fn splat(x: u64) -> __m256i = opaque(_mm256_set1_epi64x(x as i64));
        fn count(n: u32) -> __m128i = _mm_set_epi64x(0, i64::from(n));
        fn add(a: __m256i, b: __m256i) -> __m256i = _mm256_add_epi64(a, b);
        fn sub(a: __m256i, b: __m256i) -> __m256i = _mm256_sub_epi64(a, b);
        fn or(a: __m256i, b: __m256i) -> __m256i = _mm256_or_si256(a, b);
        fn mul32(a: __m256i, b: __m256i) -> __m256i = pmuludq(a, b);
        fn shr32(a: __m256i) -> __m256i = _mm256_srli_epi64::<32>(a);
        fn shr31(a: __m256i) -> __m256i = _mm256_srli_epi64::<31>(a);
        fn shl32(a: __m256i) -> __m256i = _mm256_slli_epi64::<32>(a);
        fn srl(a: __m256i, c: __m128i) -> __m256i = _mm256_srl_epi64(a, c);
        fn sll(a: __m256i, c: __m128i) -> __m256i = _mm256_sll_epi64(a, c);
        fn join(hi: __m256i, lo: __m256i) -> __m256i = _mm256_blend_epi32::<0b0101_0101>(hi, lo);
        fn swap_halves(a: __m256i) -> __m256i = _mm256_shuffle_epi32::<0b10_11_00_01>(a);
        // Keeps `x` where `x - m` is negative.
        fn red(x: __m256i, m: __m256i) -> __m256i = {
            let d = _mm256_sub_epi64(x, m);
            blend_neg(d, x, d)
        };
        // `a - b` is negative when `a < b`; then `a - b + q`.
        fn sub_mod(a: __m256i, b: __m256i, q: __m256i) -> __m256i = {
            let d = _mm256_sub_epi64(a, b);
            blend_neg(d, _mm256_add_epi64(d, q), d)
        };
        // `q - x` where `x != 0`, else 0.
        fn neg_mod(x: __m256i, q: __m256i) -> __m256i = _mm256_andnot_si256(
            _mm256_cmpeq_epi64(x, _mm256_setzero_si256()),
            _mm256_sub_epi64(q, x),
        );
    }

    /// `x0*w0` plus the cross terms `(x0*w1 + x1*w0) mod 2^32` shifted up, both from one
    /// `vpmulld`.
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn mullo(x: __m256i, w: __m256i, wsw: __m256i) -> __m256i {
        let d = opaque(_mm256_mullo_epi32(x, wsw));
        let cross = _mm256_blend_epi32::<0b1010_1010>(
            _mm256_setzero_si256(),
            _mm256_add_epi32(d, _mm256_slli_epi64::<32>(d)),
        );
        _mm256_add_epi64(pmuludq(x, w), cross)
    }

    /// Both products' cross terms from one `vpmulld` each, folded in one step:
    /// `(y0*w1 + y1*w0 - x0*v1 - x1*v0) mod 2^32`, shifted up onto the low products' difference.
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn mullo_diff(
        y: __m256i,
        w: __m256i,
        wsw: __m256i,
        x: __m256i,
        v: __m256i,
        vsw: __m256i,
    ) -> __m256i {
        let d = _mm256_sub_epi32(
            opaque(_mm256_mullo_epi32(y, wsw)),
            opaque(_mm256_mullo_epi32(x, vsw)),
        );
        let r = _mm256_sub_epi64(pmuludq(y, w), pmuludq(x, v));
        let cross = _mm256_blend_epi32::<0b1010_1010>(
            _mm256_setzero_si256(),
            _mm256_add_epi32(d, _mm256_slli_epi64::<32>(d)),
        );
        _mm256_add_epi64(r, cross)
    }

    mem!(
        "avx2",
        u64,
        __m256i,
        _mm256_loadu_si256,
        _mm256_storeu_si256
    );
}
