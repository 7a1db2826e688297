//! AVX-512F/DQ negacyclic NTT for 64-bit words (primes up to 61 bits), 8 lanes per vector.
//!
//! Structure (both directions):
//! - the butterflies are the 64-bit family's ([`super::shoup64`]: Shoup products with an
//!   approximate quotient, values in `[0, 8q)` / `[0, 4q)`), the remainder formed with two
//!   `vpmullq`;
//! - the passes, blocking and pass planning are the shared skeleton's ([`super::skeleton`]):
//!   radix-8 passes with eight vectors in registers; the butterflies a layer hands over advance
//!   step by step in lockstep (each one alone is a long dependency chain that would leave the
//!   out-of-order core idle);
//! - the three layers with distances 4, 2 and 1 run in registers on 16-element blocks, with
//!   permutes between layers and per-lane twiddle vectors; the forward output is reduced there,
//!   the inverse's `N^-1` is folded into its last layer.

use std::arch::x86_64::*;

use super::shoup64::Tail64;
use super::skeleton::Kernel;
use super::NttCore;
use crate::simd::avx512::Avx512;
use crate::simd::{prims, Prim64};

super::shoup64::kernel!("avx512f,avx512dq", Avx512, __m512i);

type V = __m512i;

prims! { safe "avx512f";
    /// Builds a vector from lane indices.
    fn idx(v: [i64; 8]) -> V = _mm512_set_epi64(v[7], v[6], v[5], v[4], v[3], v[2], v[1], v[0]);
    /// The lanes `lo` and `hi` of the sixteen of `x` (0..8) and `y` (8..16).
    fn pick(x: V, y: V, lo: [i64; 8], hi: [i64; 8]) -> (V, V) =
        (_mm512_permutex2var_epi64(x, idx(lo), y), _mm512_permutex2var_epi64(x, idx(hi), y));
    /// `[a0..a3, b0..b3]` and `[a4..a7, b4..b7]`: the 256-bit halves regrouped.
    fn halves(a: V, b: V) -> (V, V) = (
        _mm512_shuffle_i64x2::<0b01_00_01_00>(a, b),
        _mm512_shuffle_i64x2::<0b11_10_11_10>(a, b),
    );
    /// The even and the odd elements of `a` and `b` paired.
    fn unpack(a: V, b: V) -> (V, V) = (_mm512_unpacklo_epi64(a, b), _mm512_unpackhi_epi64(a, b));
}

/// Distance-2 pairs `[a0,a1,a4,a5,a8,a9,a12,a13]`, `[a2,a3,a6,a7,...]` from distance-4 ones
/// (and back).
const QUADS: ([i64; 8], [i64; 8]) = ([0, 1, 8, 9, 4, 5, 12, 13], [2, 3, 10, 11, 6, 7, 14, 15]);

/// Blocks of 16 words: distance-4 pairs are the 256-bit halves of the two registers, then
/// distance-2 pairs by two-register permutes, distance-1 pairs the even and odd elements.
impl Tail64 for Avx512 {
    const LAYERS: usize = 3;

    prims! { "avx512f,avx512dq";
        fn spread(w: *const u64, count: usize) -> V = match count {
            2 => {
                // SAFETY: two readable words at `w` (caller); the masked load reads no other.
                let v = unsafe { _mm512_maskz_loadu_epi64(0b11, w.cast()) };
                _mm512_permutexvar_epi64(idx([0, 0, 0, 0, 1, 1, 1, 1]), v)
            }
            4 => {
                // SAFETY: four readable words at `w` (caller); the masked load reads no other.
                let v = unsafe { _mm512_maskz_loadu_epi64(0b1111, w.cast()) };
                _mm512_permutexvar_epi64(idx([0, 0, 1, 1, 2, 2, 3, 3]), v)
            }
            // SAFETY: eight readable words at `w` (caller).
            _ => unsafe { Avx512::load(w) },
        };
        fn fwd_split(a: V, b: V) -> (V, V) = halves(a, b);
        fn fwd_next(l: usize, x: V, y: V) -> (V, V) =
            if l == 0 { pick(x, y, QUADS.0, QUADS.1) } else { unpack(x, y) };
        fn fwd_join(x: V, y: V) -> (V, V) =
            pick(x, y, [0, 8, 1, 9, 2, 10, 3, 11], [4, 12, 5, 13, 6, 14, 7, 15]);
        fn inv_split(a: V, b: V) -> (V, V) =
            pick(a, b, [0, 2, 4, 6, 8, 10, 12, 14], [1, 3, 5, 7, 9, 11, 13, 15]);
        fn inv_next(l: usize, x: V, y: V) -> (V, V) =
            if l == 0 { unpack(x, y) } else { pick(x, y, QUADS.0, QUADS.1) };
        fn inv_join(x: V, y: V) -> (V, V) = halves(x, y);
    }
}
