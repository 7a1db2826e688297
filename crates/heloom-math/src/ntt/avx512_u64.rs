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

use super::shoup64::{fwd_bf, inv_bf, tail_blocks};
use super::skeleton::Kernel;
use super::NttCore;
use crate::simd::avx512::Avx512;
use crate::simd::Prim64;

super::shoup64::kernel!(
    "avx512f,avx512dq",
    Avx512,
    __m512i,
    lanes = 8,
    tail_log = 3,
    max_pass = 3,
    tail = fwd_last3,
    head = inv_first3,
    zero = _mm512_setzero_si512
);

/// Lane patterns for expanding 2 and 4 consecutive twiddles to 8 lanes.
const EXPAND2: [i64; 8] = [0, 0, 0, 0, 1, 1, 1, 1];
/// See [`EXPAND2`].
const EXPAND4: [i64; 8] = [0, 0, 1, 1, 2, 2, 3, 3];

/// Builds a vector from lane indices.
#[inline]
#[target_feature(enable = "avx512f,avx512dq")]
fn idx(v: [i64; 8]) -> __m512i {
    _mm512_set_epi64(v[7], v[6], v[5], v[4], v[3], v[2], v[1], v[0])
}

/// Twiddles for `8 / C` lanes per group from the `C` roots `roots[k..k+C]` (`C` = 2 or 4),
/// spread by the lane pattern `e`.
///
/// # Safety
/// `k + C <= roots.len()`, `k + C <= s.len()`.
#[inline]
#[target_feature(enable = "avx512f,avx512dq")]
unsafe fn tw_expand<const C: u32>(roots: &[u64], s: &[u64], k: usize, e: __m512i) -> Tw {
    let mask = ((1u32 << C) - 1) as u8;
    // SAFETY: the caller guarantees `C` readable words at index k of both tables; the masked
    // load reads no other word.
    unsafe {
        let w = _mm512_maskz_loadu_epi64(mask, roots.as_ptr().add(k).cast());
        let sv = _mm512_maskz_loadu_epi64(mask, s.as_ptr().add(k).cast());
        Tw::lanes(
            _mm512_permutexvar_epi64(e, w),
            _mm512_permutexvar_epi64(e, sv),
        )
    }
}

/// Twiddles for 8 groups of 1 lane from `roots[k..k+8]`.
///
/// # Safety
/// `k + 8 <= roots.len()`, `k + 8 <= s.len()`.
#[inline]
#[target_feature(enable = "avx512f,avx512dq")]
unsafe fn tw_load8(roots: &[u64], s: &[u64], k: usize) -> Tw {
    // SAFETY: the caller guarantees eight readable words at index k of both tables.
    unsafe {
        Tw::lanes(
            Avx512::load(roots.as_ptr().add(k)),
            Avx512::load(s.as_ptr().add(k)),
        )
    }
}

/// The last three forward layers (distances 4, 2, 1) in registers on `K` 16-element blocks at
/// `a`, plus the final reduction to `[0, q)`; the blocks go through each step in lockstep.
///
/// # Safety
/// avx512f/dq available; `a` is element `k` of the transform's `n` words, `k + 16K <= n`,
/// `k % 16 == 0`.
#[inline]
#[target_feature(enable = "avx512f,avx512dq")]
unsafe fn fwd_last3_blocks<const K: usize>(core: &NttCore<u64>, c: &Consts, a: *mut u64, k: usize) {
    let n = core.n;
    let (roots, s) = (&core.roots[..], &core.roots_shoup[..]);
    let (e2, e4) = (idx(EXPAND2), idx(EXPAND4));
    let lo = idx([0, 1, 8, 9, 4, 5, 12, 13]);
    let hi = idx([2, 3, 10, 11, 6, 7, 14, 15]);
    let out_lo = idx([0, 8, 1, 9, 2, 10, 3, 11]);
    let out_hi = idx([4, 12, 5, 13, 6, 14, 7, 15]);
    // SAFETY: avx512f/dq are enabled here; k + 16K <= n words at `a - k`; the twiddle indices
    // n/8 + (k + 16K)/8, n/4 + (k + 16K)/4 and n/2 + (k + 16K)/2 are at most n, the table
    // length.
    unsafe {
        let (z, tz) = (_mm512_setzero_si512(), Tw::zero());
        let (mut x, mut y) = ([z; K], [z; K]);
        let (mut t4, mut t2, mut t1) = ([tz; K], [tz; K], [tz; K]);
        for i in 0..K {
            let p = a.add(16 * i);
            let (va, vb) = (Avx512::load(p), Avx512::load(p.add(8)));
            // [a0..a3, a8..a11] and [a4..a7, a12..a15]: distance-4 pairs.
            x[i] = _mm512_shuffle_i64x2::<0b01_00_01_00>(va, vb);
            y[i] = _mm512_shuffle_i64x2::<0b11_10_11_10>(va, vb);
            let b = k + 16 * i;
            t4[i] = tw_expand::<2>(roots, s, n / 8 + b / 8, e2);
            t2[i] = tw_expand::<4>(roots, s, n / 4 + b / 4, e4);
            t1[i] = tw_load8(roots, s, n / 2 + b / 2);
        }
        let xy = fwd_bf(x, y, t4, c);
        for i in 0..K {
            // [a0,a1,a4,a5,a8,a9,a12,a13] and [a2,a3,a6,a7,...]: distance-2 pairs.
            x[i] = _mm512_permutex2var_epi64(xy[i][0], lo, xy[i][1]);
            y[i] = _mm512_permutex2var_epi64(xy[i][0], hi, xy[i][1]);
        }
        let xy = fwd_bf(x, y, t2, c);
        for i in 0..K {
            // Even and odd elements: distance-1 pairs.
            x[i] = _mm512_unpacklo_epi64(xy[i][0], xy[i][1]);
            y[i] = _mm512_unpackhi_epi64(xy[i][0], xy[i][1]);
        }
        let xy = fwd_bf(x, y, t1, c);
        for (i, [x3, y3]) in xy.into_iter().enumerate() {
            let (x3, y3) = (c.reduce8(x3), c.reduce8(y3));
            let p = a.add(16 * i);
            Avx512::store(p, _mm512_permutex2var_epi64(x3, out_lo, y3));
            Avx512::store(p.add(8), _mm512_permutex2var_epi64(x3, out_hi, y3));
        }
    }
}

/// The last three forward layers on `a[off..off+len]`, two blocks at a time where possible.
///
/// # Safety
/// avx512f/dq available; `off + len <= n = a.len()`, both multiples of 16.
#[target_feature(enable = "avx512f,avx512dq")]
unsafe fn fwd_last3(core: &NttCore<u64>, c: &Consts, a: *mut u64, off: usize, len: usize) {
    tail_blocks(off, len, |k, wide| {
        // SAFETY: the CPU has avx512f/dq (caller); k + 32 (wide) or k + 16 <= off + len <= n,
        // k % 16 == 0.
        unsafe {
            if wide {
                fwd_last3_blocks::<2>(core, c, a.add(k), k)
            } else {
                fwd_last3_blocks::<1>(core, c, a.add(k), k)
            }
        }
    });
}

/// The first three inverse layers (distances 1, 2, 4) in registers on `K` 16-element blocks at
/// `a`, in lockstep.
///
/// # Safety
/// As [`fwd_last3_blocks`].
#[inline]
#[target_feature(enable = "avx512f,avx512dq")]
unsafe fn inv_first3_blocks<const K: usize>(
    core: &NttCore<u64>,
    c: &Consts,
    a: *mut u64,
    k: usize,
) {
    let n = core.n;
    let (roots, s) = (&core.inv_roots[..], &core.inv_roots_shoup[..]);
    let (e2, e4) = (idx(EXPAND2), idx(EXPAND4));
    let evens = idx([0, 2, 4, 6, 8, 10, 12, 14]);
    let odds = idx([1, 3, 5, 7, 9, 11, 13, 15]);
    let lo = idx([0, 1, 8, 9, 4, 5, 12, 13]);
    let hi = idx([2, 3, 10, 11, 6, 7, 14, 15]);
    // SAFETY: as in `fwd_last3_blocks`.
    unsafe {
        let (z, tz) = (_mm512_setzero_si512(), Tw::zero());
        let (mut x, mut y) = ([z; K], [z; K]);
        let (mut t4, mut t2, mut t1) = ([tz; K], [tz; K], [tz; K]);
        for i in 0..K {
            let p = a.add(16 * i);
            let (va, vb) = (Avx512::load(p), Avx512::load(p.add(8)));
            x[i] = _mm512_permutex2var_epi64(va, evens, vb);
            y[i] = _mm512_permutex2var_epi64(va, odds, vb);
            let b = k + 16 * i;
            t1[i] = tw_load8(roots, s, n / 2 + b / 2);
            t2[i] = tw_expand::<4>(roots, s, n / 4 + b / 4, e4);
            t4[i] = tw_expand::<2>(roots, s, n / 8 + b / 8, e2);
        }
        let xy = inv_bf(x, y, t1, c);
        for i in 0..K {
            // [a0,a1,a4,a5,...] and [a2,a3,a6,a7,...].
            x[i] = _mm512_unpacklo_epi64(xy[i][0], xy[i][1]);
            y[i] = _mm512_unpackhi_epi64(xy[i][0], xy[i][1]);
        }
        let xy = inv_bf(x, y, t2, c);
        for i in 0..K {
            // [a0..a3, a8..a11] and [a4..a7, a12..a15].
            x[i] = _mm512_permutex2var_epi64(xy[i][0], lo, xy[i][1]);
            y[i] = _mm512_permutex2var_epi64(xy[i][0], hi, xy[i][1]);
        }
        let xy = inv_bf(x, y, t4, c);
        for (i, [x1, y1]) in xy.into_iter().enumerate() {
            let p = a.add(16 * i);
            Avx512::store(p, _mm512_shuffle_i64x2::<0b01_00_01_00>(x1, y1));
            Avx512::store(p.add(8), _mm512_shuffle_i64x2::<0b11_10_11_10>(x1, y1));
        }
    }
}

/// The first three inverse layers on `a[off..off+len]`, two blocks at a time where possible.
///
/// # Safety
/// avx512f/dq available; `off + len <= n = a.len()`, both multiples of 16.
#[target_feature(enable = "avx512f,avx512dq")]
unsafe fn inv_first3(core: &NttCore<u64>, c: &Consts, a: *mut u64, off: usize, len: usize) {
    tail_blocks(off, len, |k, wide| {
        // SAFETY: the CPU has avx512f/dq (caller); k + 32 (wide) or k + 16 <= off + len <= n,
        // k % 16 == 0.
        unsafe {
            if wide {
                inv_first3_blocks::<2>(core, c, a.add(k), k)
            } else {
                inv_first3_blocks::<1>(core, c, a.add(k), k)
            }
        }
    });
}
