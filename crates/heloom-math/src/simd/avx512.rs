//! AVX-512 F/DQ/BW/VL (512-bit registers): 16 lanes of 32 bits, 8 of 64. Conditional
//! subtractions are unsigned minima (`vpminud`, `vpminuq`); 64-bit low products are `vpmullq`.

use core::arch::x86_64::*;

use super::{mem, prims, Prim32, Prim64};

/// The AVX-512 F/DQ/BW/VL instruction set.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Avx512;

/// `vpmuludq` (the 64-bit products of the low 32-bit halves), written as assembly: LLVM sees
/// the intrinsic as a 64-bit multiply of masked operands and, where it loses track of a
/// constant's zero high half (a mask hoisted out of the loop), multiplies it out with more
/// instructions (three `vpmuludq`, or a slow `vpmullq`).
#[inline]
#[target_feature(enable = "avx512f")]
fn pmuludq(a: __m512i, b: __m512i) -> __m512i {
    let r: __m512i;
    // SAFETY: a register-only instruction of the enabled set: no memory, stack or flags touched.
    unsafe {
        core::arch::asm!(
            "vpmuludq {r}, {a}, {b}",
            r = lateout(zmm_reg) r,
            a = in(zmm_reg) a,
            b = in(zmm_reg) b,
            options(pure, nomem, nostack, preserves_flags)
        );
    }
    r
}

impl Prim32 for Avx512 {
    type V = __m512i;
    type Cnt = __m128i;
    const LANES: usize = 16;

    prims! { "avx512f,avx512dq,avx512bw,avx512vl";
        fn zero() -> __m512i = _mm512_setzero_si512();
        fn splat(x: u32) -> __m512i = _mm512_set1_epi32(x as i32);
        fn count(n: u32) -> __m128i = _mm_set_epi64x(0, i64::from(n));
        fn add(a: __m512i, b: __m512i) -> __m512i = _mm512_add_epi32(a, b);
        fn sub(a: __m512i, b: __m512i) -> __m512i = _mm512_sub_epi32(a, b);
        fn min(a: __m512i, b: __m512i) -> __m512i = _mm512_min_epu32(a, b);
        fn mullo(a: __m512i, b: __m512i) -> __m512i = _mm512_mullo_epi32(a, b);
        fn mul_even(a: __m512i, b: __m512i) -> __m512i = pmuludq(a, b);
        fn odd_down(a: __m512i) -> __m512i = _mm512_srli_epi64::<32>(a);
        fn add64(a: __m512i, b: __m512i) -> __m512i = _mm512_add_epi64(a, b);
        fn srl64(a: __m512i, c: __m128i) -> __m512i = _mm512_srl_epi64(a, c);
        fn sll64(a: __m512i, c: __m128i) -> __m512i = _mm512_sll_epi64(a, c);
        fn blend_odd(even: __m512i, odd: __m512i) -> __m512i =
            _mm512_mask_blend_epi32(0xAAAA, even, odd);
    }

    /// Even lanes take the high word of their 64-bit product by a masked pair swap, odd lanes
    /// already hold theirs: one `vpshufd`, written as assembly so that LLVM does not turn it
    /// back into shift + blend.
    #[inline]
    #[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl")]
    unsafe fn merge_hi(even: __m512i, odd: __m512i) -> __m512i {
        let hi: __m512i;
        // SAFETY: a register-only instruction of the enabled AVX-512F set.
        unsafe {
            core::arch::asm!(
                "vpshufd {r}{{{k}}}, {e}, 0xb1",
                r = inout(zmm_reg) odd => hi,
                e = in(zmm_reg) even,
                k = in(kreg) 0x5555u16,
                options(pure, nomem, nostack)
            );
        }
        hi
    }

    mem!(
        "avx512f,avx512dq,avx512bw,avx512vl",
        u32,
        __m512i,
        _mm512_loadu_si512,
        _mm512_storeu_si512
    );
}

impl Prim64 for Avx512 {
    type V = __m512i;
    type Cnt = __m128i;
    const LANES: usize = 8;

    prims! { "avx512f,avx512dq";
        fn zero() -> __m512i = _mm512_setzero_si512();
        fn splat(x: u64) -> __m512i = _mm512_set1_epi64(x as i64);
        fn count(n: u32) -> __m128i = _mm_set_epi64x(0, i64::from(n));
        fn add(a: __m512i, b: __m512i) -> __m512i = _mm512_add_epi64(a, b);
        fn sub(a: __m512i, b: __m512i) -> __m512i = _mm512_sub_epi64(a, b);
        fn or(a: __m512i, b: __m512i) -> __m512i = _mm512_or_si512(a, b);
        fn mul32(a: __m512i, b: __m512i) -> __m512i = pmuludq(a, b);
        fn shr32(a: __m512i) -> __m512i = _mm512_srli_epi64::<32>(a);
        fn shr31(a: __m512i) -> __m512i = _mm512_srli_epi64::<31>(a);
        fn shl32(a: __m512i) -> __m512i = _mm512_slli_epi64::<32>(a);
        fn srl(a: __m512i, c: __m128i) -> __m512i = _mm512_srl_epi64(a, c);
        fn sll(a: __m512i, c: __m128i) -> __m512i = _mm512_sll_epi64(a, c);
        fn join(hi: __m512i, lo: __m512i) -> __m512i = _mm512_mask_blend_epi32(0x5555, hi, lo);
        fn swap_halves(a: __m512i) -> __m512i = _mm512_shuffle_epi32::<_MM_PERM_CDAB>(a);
        // `vpmullq` twice (the half-swapped operands are not needed).
        fn mullo_diff(
            y: __m512i,
            w: __m512i,
            _wsw: __m512i,
            x: __m512i,
            v: __m512i,
            _vsw: __m512i
        ) -> __m512i = _mm512_sub_epi64(_mm512_mullo_epi64(y, w), _mm512_mullo_epi64(x, v));
        // `vpmullq`: the half-swapped `wsw` is not needed.
        fn mullo(x: __m512i, w: __m512i, _wsw: __m512i) -> __m512i = _mm512_mullo_epi64(x, w);
        // Unsigned min of `x` and the wrapped difference.
        fn red(x: __m512i, m: __m512i) -> __m512i = _mm512_min_epu64(x, _mm512_sub_epi64(x, m));
        // `a - b` wraps when `a < b`; adding `q` brings it back, and the min picks it.
        fn sub_mod(a: __m512i, b: __m512i, q: __m512i) -> __m512i = {
            let d = _mm512_sub_epi64(a, b);
            _mm512_min_epu64(d, _mm512_add_epi64(d, q))
        };
        // `q - x` where `x != 0`, else 0.
        fn neg_mod(x: __m512i, q: __m512i) -> __m512i =
            _mm512_maskz_sub_epi64(_mm512_test_epi64_mask(x, x), q, x);
    }

    mem!(
        "avx512f,avx512dq",
        u64,
        __m512i,
        _mm512_loadu_si512,
        _mm512_storeu_si512
    );
}
