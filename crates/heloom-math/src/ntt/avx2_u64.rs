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

use super::shoup64::{fwd_bf, inv_bf, tail_blocks};
use super::skeleton::Kernel;
use super::NttCore;
use crate::simd::avx2::Avx2;
use crate::simd::Prim64;

super::shoup64::kernel!(
    "avx2",
    Avx2,
    __m256i,
    lanes = 4,
    tail_log = 2,
    max_pass = 2,
    tail = fwd_last2,
    head = inv_first2,
    zero = _mm256_setzero_si256
);

/// Twiddles for 2 groups of 2 lanes from `roots[k], roots[k+1]`.
///
/// # Safety
/// `k + 2 <= roots.len()`, `k + 2 <= s.len()`.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn tw_expand2(roots: &[u64], s: &[u64], k: usize) -> Tw {
    // SAFETY: the caller guarantees two readable words at index k of both tables.
    unsafe {
        let (w, sv) = (
            _mm_loadu_si128(roots.as_ptr().add(k).cast()),
            _mm_loadu_si128(s.as_ptr().add(k).cast()),
        );
        Tw::lanes(
            _mm256_permute4x64_epi64::<0b01_01_00_00>(_mm256_castsi128_si256(w)),
            _mm256_permute4x64_epi64::<0b01_01_00_00>(_mm256_castsi128_si256(sv)),
        )
    }
}

/// Twiddles for 4 groups of 1 lane from `roots[k..k+4]`.
///
/// # Safety
/// `k + 4 <= roots.len()`, `k + 4 <= s.len()`.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn tw_load4(roots: &[u64], s: &[u64], k: usize) -> Tw {
    // SAFETY: the caller guarantees four readable words at index k of both tables.
    unsafe {
        Tw::lanes(
            Avx2::load(roots.as_ptr().add(k)),
            Avx2::load(s.as_ptr().add(k)),
        )
    }
}

/// The last two forward layers (distances 2, 1) in registers on `K` 8-element blocks at `a`,
/// plus the final reduction to `[0, q)`; the blocks go through each step in lockstep.
///
/// # Safety
/// avx2 available; `a` is element `k` of the transform's `n` words, `k + 8K <= n`, `k % 8 == 0`.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn fwd_last2_blocks<const K: usize>(core: &NttCore<u64>, c: &Consts, a: *mut u64, k: usize) {
    let n = core.n;
    let (roots, s) = (&core.roots[..], &core.roots_shoup[..]);
    // SAFETY: k + 8K <= n words at `a - k`; the twiddle indices n/4 + (k + 8K)/4 and
    // n/2 + (k + 8K)/2 are at most n, the table length.
    unsafe {
        let z = _mm256_setzero_si256();
        let (mut x, mut y, mut tw2, mut tw1) = ([z; K], [z; K], [Tw::zero(); K], [Tw::zero(); K]);
        for i in 0..K {
            let p = a.add(8 * i);
            let (va, vb) = (Avx2::load(p), Avx2::load(p.add(4)));
            // [a0,a1,a4,a5] and [a2,a3,a6,a7]: distance-2 pairs.
            x[i] = _mm256_permute2x128_si256::<0x20>(va, vb);
            y[i] = _mm256_permute2x128_si256::<0x31>(va, vb);
            tw2[i] = tw_expand2(roots, s, n / 4 + k / 4 + 2 * i);
            tw1[i] = tw_load4(roots, s, n / 2 + k / 2 + 4 * i);
        }
        let xy = fwd_bf(x, y, tw2, c);
        for i in 0..K {
            // Even and odd elements: distance-1 pairs.
            x[i] = _mm256_unpacklo_epi64(xy[i][0], xy[i][1]);
            y[i] = _mm256_unpackhi_epi64(xy[i][0], xy[i][1]);
        }
        let xy = fwd_bf(x, y, tw1, c);
        for (i, [x3, y3]) in xy.into_iter().enumerate() {
            let (x3, y3) = (c.reduce8(x3), c.reduce8(y3));
            let lo = _mm256_unpacklo_epi64(x3, y3);
            let hi = _mm256_unpackhi_epi64(x3, y3);
            let p = a.add(8 * i);
            Avx2::store(p, _mm256_permute2x128_si256::<0x20>(lo, hi));
            Avx2::store(p.add(4), _mm256_permute2x128_si256::<0x31>(lo, hi));
        }
    }
}

/// The last two forward layers on `a[off..off+len]`, four blocks at a time where possible.
///
/// # Safety
/// avx2 available; `off + len <= n = a.len()`, both multiples of 16.
#[target_feature(enable = "avx2")]
unsafe fn fwd_last2(core: &NttCore<u64>, c: &Consts, a: *mut u64, off: usize, len: usize) {
    tail_blocks(off, len, |k, wide| {
        // SAFETY: the CPU has avx2 (caller); k + 32 (wide) or k + 16 <= off + len <= n and k is
        // a multiple of 8.
        unsafe {
            if wide {
                fwd_last2_blocks::<4>(core, c, a.add(k), k)
            } else {
                fwd_last2_blocks::<2>(core, c, a.add(k), k)
            }
        }
    });
}

/// The first two inverse layers (distances 1, 2) in registers on `K` 8-element blocks at `a`,
/// in lockstep.
///
/// # Safety
/// As [`fwd_last2_blocks`].
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn inv_first2_blocks<const K: usize>(
    core: &NttCore<u64>,
    c: &Consts,
    a: *mut u64,
    k: usize,
) {
    let n = core.n;
    let (roots, s) = (&core.inv_roots[..], &core.inv_roots_shoup[..]);
    // SAFETY: as in `fwd_last2_blocks`.
    unsafe {
        let z = _mm256_setzero_si256();
        let (mut x, mut y, mut tw2, mut tw1) = ([z; K], [z; K], [Tw::zero(); K], [Tw::zero(); K]);
        for i in 0..K {
            let p = a.add(8 * i);
            let (va, vb) = (Avx2::load(p), Avx2::load(p.add(4)));
            let lo = _mm256_permute2x128_si256::<0x20>(va, vb);
            let hi = _mm256_permute2x128_si256::<0x31>(va, vb);
            // Even and odd elements: distance-1 pairs.
            x[i] = _mm256_unpacklo_epi64(lo, hi);
            y[i] = _mm256_unpackhi_epi64(lo, hi);
            tw1[i] = tw_load4(roots, s, n / 2 + k / 2 + 4 * i);
            tw2[i] = tw_expand2(roots, s, n / 4 + k / 4 + 2 * i);
        }
        let xy = inv_bf(x, y, tw1, c);
        for i in 0..K {
            // [a0,a1,a4,a5] and [a2,a3,a6,a7]: distance-2 pairs.
            x[i] = _mm256_unpacklo_epi64(xy[i][0], xy[i][1]);
            y[i] = _mm256_unpackhi_epi64(xy[i][0], xy[i][1]);
        }
        let xy = inv_bf(x, y, tw2, c);
        for (i, [x2, y2]) in xy.into_iter().enumerate() {
            let p = a.add(8 * i);
            Avx2::store(p, _mm256_permute2x128_si256::<0x20>(x2, y2));
            Avx2::store(p.add(4), _mm256_permute2x128_si256::<0x31>(x2, y2));
        }
    }
}

/// The first two inverse layers on `a[off..off+len]`, four blocks at a time where possible.
///
/// # Safety
/// avx2 available; `off + len <= n = a.len()`, both multiples of 16.
#[target_feature(enable = "avx2")]
unsafe fn inv_first2(core: &NttCore<u64>, c: &Consts, a: *mut u64, off: usize, len: usize) {
    tail_blocks(off, len, |k, wide| {
        // SAFETY: as in `fwd_last2`.
        unsafe {
            if wide {
                inv_first2_blocks::<4>(core, c, a.add(k), k)
            } else {
                inv_first2_blocks::<2>(core, c, a.add(k), k)
            }
        }
    });
}
