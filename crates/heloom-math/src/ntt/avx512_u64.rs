//! AVX-512F/DQ negacyclic NTT for 64-bit words (primes up to 61 bits), 8 lanes per vector.
//!
//! Structure (both directions):
//! - twiddle multiplication is Shoup's (Shoup 2007, Harvey 2014 Alg. 2) with the core's
//!   companions `s = floor(w * 2^64 / q)`: the quotient `floor(y * s / 2^64)` is estimated from
//!   three 32x32-bit products (`vpmuludq`, the low x low one dropped) and the remainder formed
//!   with two `vpmullq`; the estimate is at most 2 below Shoup's, so the product is in `[0, 4q)`;
//! - lazy ranges one step wider than Harvey's: forward values in `[0, 8q)` (`8q < 2^64`), the
//!   unmultiplied input reduced to `[0, 4q)` and the product left in `[0, 4q)`; inverse values
//!   in `[0, 4q)`. One conditional subtraction per butterfly;
//! - the passes, blocking and pass planning are the shared skeleton's ([`super::skeleton`]):
//!   radix-8 passes with eight vectors in registers; the butterflies a layer hands over advance
//!   step by step in lockstep (each one alone is a long dependency chain that would leave the
//!   out-of-order core idle);
//! - the three layers with distances 4, 2 and 1 run in registers on 16-element blocks, with
//!   permutes between layers and per-lane twiddle vectors; the forward output is reduced there,
//!   the inverse's `N^-1` is folded into its last layer.

use std::arch::x86_64::*;

use super::skeleton::Kernel;
use super::NttCore;

super::shoup64::kernel!(
    "avx512f,avx512dq",
    __m512i,
    lanes = 8,
    tail_log = 3,
    max_pass = 3,
    tail = fwd_last3,
    head = inv_first3,
    zero = _mm512_setzero_si512,
    add = _mm512_add_epi64,
    sub = _mm512_sub_epi64
);

/// A twiddle factor in every lane: `w`, its Shoup companion `s` and `s >> 32`.
#[derive(Clone, Copy)]
struct Tw {
    /// The root.
    w: __m512i,
    /// `floor(w * 2^64 / q)` (only its low 32 bits are read).
    s: __m512i,
    /// `s >> 32`.
    sh: __m512i,
}

/// Multiples of the modulus in every lane.
#[derive(Clone, Copy)]
struct Consts {
    /// The modulus.
    q: __m512i,
    /// Twice the modulus.
    q2: __m512i,
    /// Four times the modulus.
    q4: __m512i,
}

/// The constants for `core`'s modulus.
#[inline]
#[target_feature(enable = "avx512f,avx512dq")]
fn consts(core: &NttCore<u64>) -> Consts {
    let q = core.modulus.q();
    Consts {
        q: _mm512_set1_epi64(q as i64),
        q2: _mm512_set1_epi64((2 * q) as i64),
        q4: _mm512_set1_epi64((4 * q) as i64),
    }
}

/// Broadcasts the twiddle `w` with Shoup companion `s`.
#[inline]
#[target_feature(enable = "avx512f,avx512dq")]
fn tw_bcast(w: u64, s: u64) -> Tw {
    Tw {
        w: _mm512_set1_epi64(w as i64),
        s: _mm512_set1_epi64(s as i64),
        sh: _mm512_set1_epi64((s >> 32) as i64),
    }
}

/// A placeholder twiddle (all zero) for initializing arrays.
#[inline]
#[target_feature(enable = "avx512f,avx512dq")]
fn tw_zero() -> Tw {
    let z = _mm512_setzero_si512();
    Tw { w: z, s: z, sh: z }
}

/// Per-lane twiddles from vectors of roots and companions.
#[inline]
#[target_feature(enable = "avx512f,avx512dq")]
fn tw_lanes(w: __m512i, s: __m512i) -> Tw {
    Tw {
        w,
        s,
        sh: _mm512_srli_epi64::<32>(s),
    }
}

/// `y[i] * w[i] mod q` in `[0, 4q)` for any words `y[i]` (Shoup with an approximate quotient),
/// `K` products computed step by step in lockstep: the out-of-order window then always holds
/// independent work (each product alone is one long dependency chain).
///
/// `qhat = y1*s1 + (y1*s0 >> 32) + (y0*s1 >> 32)` drops `y0*s0 / 2^64 < 1` and two floors, so
/// it is at most 2 below Shoup's `floor(y*s/2^64)`, whose remainder is below `2q`: the result is
/// below `4q`. The middle products are shifted separately, so no sum can overflow.
#[inline]
#[target_feature(enable = "avx512f,avx512dq")]
fn mul_lazy<const K: usize>(y: [__m512i; K], tw: [Tw; K], c: Consts) -> [__m512i; K] {
    let q = c.q;
    let z = _mm512_setzero_si512();
    let (mut y1, mut qh, mut r) = ([z; K], [z; K], [z; K]);
    for i in 0..K {
        y1[i] = _mm512_srli_epi64::<32>(y[i]);
    }
    for i in 0..K {
        let hl = _mm512_srli_epi64::<32>(_mm512_mul_epu32(y1[i], tw[i].s));
        let lh = _mm512_srli_epi64::<32>(_mm512_mul_epu32(y[i], tw[i].sh));
        qh[i] = _mm512_add_epi64(hl, lh);
    }
    for i in 0..K {
        qh[i] = _mm512_add_epi64(qh[i], _mm512_mul_epu32(y1[i], tw[i].sh));
    }
    for i in 0..K {
        r[i] = _mm512_sub_epi64(
            _mm512_mullo_epi64(y[i], tw[i].w),
            _mm512_mullo_epi64(qh[i], q),
        );
    }
    r
}

/// `x - m` if `x >= m` else `x`, for `x < 2m` (unsigned min of `x` and the wrapped difference).
#[inline]
#[target_feature(enable = "avx512f,avx512dq")]
fn red(x: __m512i, m: __m512i) -> __m512i {
    _mm512_min_epu64(x, _mm512_sub_epi64(x, m))
}

/// `K` forward (Cooley-Tukey) butterflies after Harvey, in lockstep: inputs and outputs in
/// `[0, 8q)`; `x` is reduced to `[0, 4q)` and the product, in `[0, 4q)`, is used unreduced.
/// Returns `[x', y']` per butterfly.
#[inline]
#[target_feature(enable = "avx512f,avx512dq")]
fn fwd_bf<const K: usize>(
    x: [__m512i; K],
    y: [__m512i; K],
    tw: [Tw; K],
    c: Consts,
) -> [[__m512i; 2]; K] {
    let v = mul_lazy(y, tw, c);
    let mut out = [[_mm512_setzero_si512(); 2]; K];
    for i in 0..K {
        let u = red(x[i], c.q4);
        out[i] = [
            _mm512_add_epi64(u, v[i]),
            _mm512_sub_epi64(_mm512_add_epi64(u, c.q4), v[i]),
        ];
    }
    out
}

/// `K` inverse (Gentleman-Sande) butterflies after Harvey, in lockstep: inputs and outputs in
/// `[0, 4q)`; the sum is reduced from `[0, 8q)`, the product is used unreduced.
#[inline]
#[target_feature(enable = "avx512f,avx512dq")]
fn inv_bf<const K: usize>(
    x: [__m512i; K],
    y: [__m512i; K],
    tw: [Tw; K],
    c: Consts,
) -> [[__m512i; 2]; K] {
    let mut d = [_mm512_setzero_si512(); K];
    for i in 0..K {
        d[i] = _mm512_sub_epi64(_mm512_add_epi64(x[i], c.q4), y[i]);
    }
    let v = mul_lazy(d, tw, c);
    let mut out = [[_mm512_setzero_si512(); 2]; K];
    for i in 0..K {
        out[i] = [red(_mm512_add_epi64(x[i], y[i]), c.q4), v[i]];
    }
    out
}

/// Fully reduces a forward output from `[0, 8q)`.
#[inline]
#[target_feature(enable = "avx512f,avx512dq")]
fn reduce_out(x: __m512i, c: Consts) -> __m512i {
    red(red(red(x, c.q4), c.q2), c.q)
}

/// Unaligned load of 8 words at `p`.
///
/// # Safety
/// `p..p+8` must be readable.
#[inline]
#[target_feature(enable = "avx512f,avx512dq")]
unsafe fn ld(p: *const u64) -> __m512i {
    // SAFETY: the caller guarantees 8 readable words at `p`; the load is unaligned.
    unsafe { _mm512_loadu_si512(p.cast()) }
}

/// Unaligned store of 8 words at `p`.
///
/// # Safety
/// `p..p+8` must be writable.
#[inline]
#[target_feature(enable = "avx512f,avx512dq")]
unsafe fn st(p: *mut u64, v: __m512i) {
    // SAFETY: the caller guarantees 8 writable words at `p`; the store is unaligned.
    unsafe { _mm512_storeu_si512(p.cast(), v) }
}

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

/// Twiddles for 2 groups of 4 lanes from `roots[k], roots[k+1]`.
///
/// # Safety
/// `k + 2 <= roots.len()`, `k + 2 <= s.len()`.
#[inline]
#[target_feature(enable = "avx512f,avx512dq")]
unsafe fn tw_expand2(roots: &[u64], s: &[u64], k: usize, e: __m512i) -> Tw {
    // SAFETY: the caller guarantees two readable words at index k of both tables.
    let (w, sv) = unsafe {
        (
            _mm_loadu_si128(roots.as_ptr().add(k).cast()),
            _mm_loadu_si128(s.as_ptr().add(k).cast()),
        )
    };
    tw_lanes(
        _mm512_permutexvar_epi64(e, _mm512_castsi128_si512(w)),
        _mm512_permutexvar_epi64(e, _mm512_castsi128_si512(sv)),
    )
}

/// Twiddles for 4 groups of 2 lanes from `roots[k..k+4]`.
///
/// # Safety
/// `k + 4 <= roots.len()`, `k + 4 <= s.len()`.
#[inline]
#[target_feature(enable = "avx512f,avx512dq")]
unsafe fn tw_expand4(roots: &[u64], s: &[u64], k: usize, e: __m512i) -> Tw {
    // SAFETY: the caller guarantees four readable words at index k of both tables.
    let (w, sv) = unsafe {
        (
            _mm256_loadu_si256(roots.as_ptr().add(k).cast()),
            _mm256_loadu_si256(s.as_ptr().add(k).cast()),
        )
    };
    tw_lanes(
        _mm512_permutexvar_epi64(e, _mm512_castsi256_si512(w)),
        _mm512_permutexvar_epi64(e, _mm512_castsi256_si512(sv)),
    )
}

/// Twiddles for 8 groups of 1 lane from `roots[k..k+8]`.
///
/// # Safety
/// `k + 8 <= roots.len()`, `k + 8 <= s.len()`.
#[inline]
#[target_feature(enable = "avx512f,avx512dq")]
unsafe fn tw_load8(roots: &[u64], s: &[u64], k: usize) -> Tw {
    // SAFETY: the caller guarantees eight readable words at index k of both tables.
    unsafe { tw_lanes(ld(roots.as_ptr().add(k)), ld(s.as_ptr().add(k))) }
}

/// The last three forward layers (distances 4, 2, 1) in registers on `K` 16-element blocks at
/// `a`, plus the final reduction to `[0, q)`; the blocks go through each step in lockstep.
///
/// # Safety
/// avx512f/dq available; `a` is element `k` of the transform's `n` words, `k + 16K <= n`,
/// `k % 16 == 0`.
#[inline]
#[target_feature(enable = "avx512f,avx512dq")]
unsafe fn fwd_last3_blocks<const K: usize>(core: &NttCore<u64>, c: Consts, a: *mut u64, k: usize) {
    let n = core.n;
    let (roots, s) = (&core.roots[..], &core.roots_shoup[..]);
    let (e2, e4) = (idx(EXPAND2), idx(EXPAND4));
    let z = _mm512_setzero_si512();
    let (mut x, mut y) = ([z; K], [z; K]);
    let (mut t4, mut t2, mut t1) = ([tw_zero(); K], [tw_zero(); K], [tw_zero(); K]);
    // SAFETY: k + 16K <= n words at `a - k`; the twiddle indices n/8 + (k + 16K)/8,
    // n/4 + (k + 16K)/4 and n/2 + (k + 16K)/2 are at most n, the table length.
    unsafe {
        for i in 0..K {
            let p = a.add(16 * i);
            let (va, vb) = (ld(p), ld(p.add(8)));
            // [a0..a3, a8..a11] and [a4..a7, a12..a15]: distance-4 pairs.
            x[i] = _mm512_shuffle_i64x2::<0b01_00_01_00>(va, vb);
            y[i] = _mm512_shuffle_i64x2::<0b11_10_11_10>(va, vb);
            let b = k + 16 * i;
            t4[i] = tw_expand2(roots, s, n / 8 + b / 8, e2);
            t2[i] = tw_expand4(roots, s, n / 4 + b / 4, e4);
            t1[i] = tw_load8(roots, s, n / 2 + b / 2);
        }
    }
    let xy = fwd_bf(x, y, t4, c);
    let lo = idx([0, 1, 8, 9, 4, 5, 12, 13]);
    let hi = idx([2, 3, 10, 11, 6, 7, 14, 15]);
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
    let out_lo = idx([0, 8, 1, 9, 2, 10, 3, 11]);
    let out_hi = idx([4, 12, 5, 13, 6, 14, 7, 15]);
    for (i, [x3, y3]) in xy.into_iter().enumerate() {
        let (x3, y3) = (reduce_out(x3, c), reduce_out(y3, c));
        // SAFETY: as above.
        unsafe {
            let p = a.add(16 * i);
            st(p, _mm512_permutex2var_epi64(x3, out_lo, y3));
            st(p.add(8), _mm512_permutex2var_epi64(x3, out_hi, y3));
        }
    }
}

/// The last three forward layers on `a[off..off+len]`, two blocks at a time where possible.
///
/// # Safety
/// avx512f/dq available; `off + len <= n = a.len()`, both multiples of 16.
#[target_feature(enable = "avx512f,avx512dq")]
unsafe fn fwd_last3(core: &NttCore<u64>, a: *mut u64, off: usize, len: usize) {
    let c = consts(core);
    let mut k = off;
    while k + 32 <= off + len {
        // SAFETY: the CPU has avx512f/dq (caller); k + 32 <= off + len <= n, k % 16 == 0.
        unsafe { fwd_last3_blocks::<2>(core, c, a.add(k), k) };
        k += 32;
    }
    if k < off + len {
        // SAFETY: as above, with k + 16 == off + len.
        unsafe { fwd_last3_blocks::<1>(core, c, a.add(k), k) };
    }
}

/// The first three inverse layers (distances 1, 2, 4) in registers on `K` 16-element blocks at
/// `a`, in lockstep.
///
/// # Safety
/// As [`fwd_last3_blocks`].
#[inline]
#[target_feature(enable = "avx512f,avx512dq")]
unsafe fn inv_first3_blocks<const K: usize>(core: &NttCore<u64>, c: Consts, a: *mut u64, k: usize) {
    let n = core.n;
    let (roots, s) = (&core.inv_roots[..], &core.inv_roots_shoup[..]);
    let (e2, e4) = (idx(EXPAND2), idx(EXPAND4));
    let evens = idx([0, 2, 4, 6, 8, 10, 12, 14]);
    let odds = idx([1, 3, 5, 7, 9, 11, 13, 15]);
    let z = _mm512_setzero_si512();
    let (mut x, mut y) = ([z; K], [z; K]);
    let (mut t4, mut t2, mut t1) = ([tw_zero(); K], [tw_zero(); K], [tw_zero(); K]);
    // SAFETY: as in `fwd_last3_blocks`.
    unsafe {
        for i in 0..K {
            let p = a.add(16 * i);
            let (va, vb) = (ld(p), ld(p.add(8)));
            x[i] = _mm512_permutex2var_epi64(va, evens, vb);
            y[i] = _mm512_permutex2var_epi64(va, odds, vb);
            let b = k + 16 * i;
            t1[i] = tw_load8(roots, s, n / 2 + b / 2);
            t2[i] = tw_expand4(roots, s, n / 4 + b / 4, e4);
            t4[i] = tw_expand2(roots, s, n / 8 + b / 8, e2);
        }
    }
    let xy = inv_bf(x, y, t1, c);
    for i in 0..K {
        // [a0,a1,a4,a5,...] and [a2,a3,a6,a7,...].
        x[i] = _mm512_unpacklo_epi64(xy[i][0], xy[i][1]);
        y[i] = _mm512_unpackhi_epi64(xy[i][0], xy[i][1]);
    }
    let xy = inv_bf(x, y, t2, c);
    let lo = idx([0, 1, 8, 9, 4, 5, 12, 13]);
    let hi = idx([2, 3, 10, 11, 6, 7, 14, 15]);
    for i in 0..K {
        // [a0..a3, a8..a11] and [a4..a7, a12..a15].
        x[i] = _mm512_permutex2var_epi64(xy[i][0], lo, xy[i][1]);
        y[i] = _mm512_permutex2var_epi64(xy[i][0], hi, xy[i][1]);
    }
    let xy = inv_bf(x, y, t4, c);
    for (i, [x1, y1]) in xy.into_iter().enumerate() {
        // SAFETY: as above.
        unsafe {
            let p = a.add(16 * i);
            st(p, _mm512_shuffle_i64x2::<0b01_00_01_00>(x1, y1));
            st(p.add(8), _mm512_shuffle_i64x2::<0b11_10_11_10>(x1, y1));
        }
    }
}

/// The first three inverse layers on `a[off..off+len]`, two blocks at a time where possible.
///
/// # Safety
/// avx512f/dq available; `off + len <= n = a.len()`, both multiples of 16.
#[target_feature(enable = "avx512f,avx512dq")]
unsafe fn inv_first3(core: &NttCore<u64>, a: *mut u64, off: usize, len: usize) {
    let c = consts(core);
    let mut k = off;
    while k + 32 <= off + len {
        // SAFETY: the CPU has avx512f/dq (caller); k + 32 <= off + len <= n, k % 16 == 0.
        unsafe { inv_first3_blocks::<2>(core, c, a.add(k), k) };
        k += 32;
    }
    if k < off + len {
        // SAFETY: as above, with k + 16 == off + len.
        unsafe { inv_first3_blocks::<1>(core, c, a.add(k), k) };
    }
}
