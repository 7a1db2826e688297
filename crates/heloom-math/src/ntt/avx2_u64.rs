//! AVX2 negacyclic NTT for 64-bit words (primes up to 61 bits), 4 lanes per vector.
//!
//! Structure (both directions):
//! - the butterflies are the 64-bit family's ([`super::shoup64`]: Shoup products with an
//!   approximate quotient, values in `[0, 8q)` / `[0, 4q)`). AVX2 has no 64-bit low product:
//!   `y*w - qhat*q mod 2^64` is assembled from two `vpmuludq` (low halves) and two `vpmulld`
//!   against half-swapped copies of `w` and `q` (both cross terms of a product at once); the
//!   conditional subtraction is a sign-bit blend (no unsigned 64-bit compare; `4q < 2^63` makes
//!   the sign decide);
//! - the passes, blocking and pass planning are the shared skeleton's ([`super::skeleton`]):
//!   layers fused in pairs (radix-4 passes over two vector columns, eight vectors in registers:
//!   a twiddle takes four); the butterflies a layer hands over advance step by step in lockstep
//!   (each one alone is a long dependency chain that would leave the out-of-order core idle);
//! - the two layers with distances 2 and 1 run in registers on 8-element blocks, with
//!   permutes between layers and per-lane twiddle vectors; the forward output is reduced there,
//!   the inverse's `N^-1` is folded into its last layer.

use std::arch::x86_64::*;

use super::shoup64::Tail64;
use super::skeleton::Kernel;
use super::NttCore;
use crate::simd::avx2::Avx2;
use crate::simd::{prims, Prim64};

super::shoup64::kernel!("avx2", Avx2, __m256i);

type V = __m256i;

prims! { safe "avx2";
    /// `[a0,a1,b0,b1]` and `[a2,a3,b2,b3]`: the 128-bit halves regrouped.
    fn halves(a: V, b: V) -> (V, V) =
        (_mm256_permute2x128_si256::<0x20>(a, b), _mm256_permute2x128_si256::<0x31>(a, b));
    /// `[a0,b0,a2,b2]` and `[a1,b1,a3,b3]`: the even and the odd elements paired.
    fn unpack(a: V, b: V) -> (V, V) = (_mm256_unpacklo_epi64(a, b), _mm256_unpackhi_epi64(a, b));
}

/// Blocks of 8 words: distance-2 pairs are the 128-bit halves of the two registers, distance-1
/// pairs the even and odd elements.
impl Tail64 for Avx2 {
    const LAYERS: usize = 2;

    prims! { "avx2";
        fn spread(w: *const u64, count: usize) -> V = if count == 2 {
            // SAFETY: two readable words at `w` (caller).
            let w = unsafe { _mm_loadu_si128(w.cast()) };
            _mm256_permute4x64_epi64::<0b01_01_00_00>(_mm256_castsi128_si256(w))
        } else {
            // SAFETY: four readable words at `w` (caller).
            unsafe { Avx2::load(w) }
        };
        fn fwd_split(a: V, b: V) -> (V, V) = halves(a, b);
        fn fwd_next(_l: usize, x: V, y: V) -> (V, V) = unpack(x, y);
        fn fwd_join(x: V, y: V) -> (V, V) = { let (lo, hi) = unpack(x, y); halves(lo, hi) };
        fn inv_split(a: V, b: V) -> (V, V) = { let (lo, hi) = halves(a, b); unpack(lo, hi) };
        fn inv_next(_l: usize, x: V, y: V) -> (V, V) = unpack(x, y);
        fn inv_join(x: V, y: V) -> (V, V) = halves(x, y);
    }
}
