//! AVX2 negacyclic NTT for 64-bit words (primes up to 61 bits), 4 lanes per vector.
//!
//! Structure (both directions):
//! - twiddle multiplication is Shoup's (Shoup 2007, Harvey 2014 Alg. 2) with the core's
//!   companions `s = floor(w * 2^64 / q)`: the quotient `floor(y * s / 2^64)` is estimated from
//!   three 32x32-bit products (`vpmuludq`, the low x low one dropped), at most 2 below Shoup's,
//!   so the product is in `[0, 4q)`. AVX2 has no 64-bit low product: `y*w - qhat*q mod 2^64` is
//!   assembled from two `vpmuludq` (low halves) and two `vpmulld` against half-swapped copies of
//!   `w` and `q` (both cross terms of a product at once);
//! - lazy ranges one step wider than Harvey's: forward values in `[0, 8q)` (`8q < 2^64`), the
//!   unmultiplied input reduced to `[0, 4q)` and the product left in `[0, 4q)`; inverse values
//!   in `[0, 4q)`. One conditional subtraction per butterfly, a sign-bit blend (AVX2 has no
//!   unsigned 64-bit compare; `4q < 2^63` makes the sign decide);
//! - the passes, blocking and pass planning are the shared skeleton's ([`super::skeleton`]):
//!   layers fused in pairs (radix-4 passes over two vector columns, eight vectors in registers:
//!   a twiddle takes four); the butterflies a layer hands over advance step by step in lockstep
//!   (each one alone is a long dependency chain that would leave the out-of-order core idle);
//! - the two layers with distances 2 and 1 run in registers on 8-element blocks, with
//!   permutes between layers and per-lane twiddle vectors; the forward output is reduced there,
//!   the inverse's `N^-1` is folded into its last layer.

use std::arch::x86_64::*;

use super::skeleton::Kernel;
use super::NttCore;

super::shoup64::kernel!(
    "avx2",
    __m256i,
    lanes = 4,
    tail_log = 2,
    max_pass = 2,
    tail = fwd_last2,
    head = inv_first2,
    zero = _mm256_setzero_si256,
    add = _mm256_add_epi64,
    sub = _mm256_sub_epi64
);

/// A twiddle factor in every lane: `w`, `w` with its 32-bit halves swapped, its Shoup
/// companion `s` and `s >> 32`.
#[derive(Clone, Copy)]
struct Tw {
    /// The root.
    w: __m256i,
    /// The root with its 32-bit halves swapped (cross terms of the low product).
    wsw: __m256i,
    /// `floor(w * 2^64 / q)` (only its low 32 bits are read).
    s: __m256i,
    /// `s >> 32`.
    sh: __m256i,
}

/// Multiples of the modulus in every lane.
#[derive(Clone, Copy)]
struct Consts {
    /// The modulus.
    q: __m256i,
    /// Twice the modulus.
    q2: __m256i,
    /// Four times the modulus.
    q4: __m256i,
    /// The modulus with its 32-bit halves swapped.
    qsw: __m256i,
}

/// The constants for `core`'s modulus.
#[inline]
#[target_feature(enable = "avx2")]
fn consts(core: &NttCore<u64>) -> Consts {
    let q = core.modulus.q();
    Consts {
        q: splat(q as i64),
        q2: splat((2 * q) as i64),
        q4: splat((4 * q) as i64),
        qsw: splat(q.rotate_left(32) as i64),
    }
}

/// Broadcasts the twiddle `w` with Shoup companion `s`.
#[inline]
#[target_feature(enable = "avx2")]
fn tw_bcast(w: u64, s: u64) -> Tw {
    Tw {
        w: splat(w as i64),
        wsw: splat(w.rotate_left(32) as i64),
        s: splat(s as i64),
        sh: splat((s >> 32) as i64),
    }
}

/// A placeholder twiddle (all zero) for initializing arrays.
#[inline]
#[target_feature(enable = "avx2")]
fn tw_zero() -> Tw {
    let z = _mm256_setzero_si256();
    Tw {
        w: z,
        wsw: z,
        s: z,
        sh: z,
    }
}

/// Per-lane twiddles from vectors of roots and companions.
#[inline]
#[target_feature(enable = "avx2")]
fn tw_lanes(w: __m256i, s: __m256i) -> Tw {
    Tw {
        w,
        wsw: _mm256_shuffle_epi32::<0b10_11_00_01>(w),
        s,
        sh: _mm256_srli_epi64::<32>(s),
    }
}

/// `x` in every lane, hidden from the optimizer (see [`opaque`]): LLVM loses the known-zero
/// high halves of broadcast constants and multiplies them out with extra `vpmuludq`.
#[inline]
#[target_feature(enable = "avx2")]
fn splat(x: i64) -> __m256i {
    opaque(_mm256_set1_epi64x(x))
}

/// Returns `x` unchanged, hidden from the optimizer: LLVM otherwise recognizes the split
/// 64-bit products below as `mul i64` and re-expands them with more `vpmuludq`.
#[inline]
#[target_feature(enable = "avx2")]
fn opaque(mut x: __m256i) -> __m256i {
    // SAFETY: an empty template that only names the register: no memory, stack or flags touched.
    unsafe {
        std::arch::asm!("/* {0} */", inout(ymm_reg) x, options(pure, nomem, nostack, preserves_flags));
    }
    x
}

/// `y[i] * w[i] mod q` in `[0, 4q)` for any words `y[i]` (Shoup with an approximate quotient),
/// `K` products computed step by step in lockstep: the out-of-order window then always holds
/// independent work (each product alone is one long dependency chain).
///
/// `qhat = y1*s1 + (y1*s0 >> 32) + (y0*s1 >> 32)` drops `y0*s0 / 2^64 < 1` and two floors, so
/// it is at most 2 below Shoup's `floor(y*s/2^64)`, whose remainder is below `2q`: the result is
/// below `4q`. The middle products are shifted separately, so no sum can overflow.
///
/// The low 64 bits of `y*w - qhat*q` are the 32x32 low products plus the cross terms
/// `(y0*w1 + y1*w0 - qhat0*q1 - qhat1*q0) mod 2^32` shifted up; `vpmulld` against the swapped
/// halves yields both cross terms of a product in the two 32-bit halves of a lane.
#[inline]
#[target_feature(enable = "avx2")]
fn mul_lazy<const K: usize>(y: [__m256i; K], tw: [Tw; K], c: Consts) -> [__m256i; K] {
    let z = _mm256_setzero_si256();
    let (mut y1, mut qh, mut d, mut r) = ([z; K], [z; K], [z; K], [z; K]);
    for i in 0..K {
        y1[i] = _mm256_srli_epi64::<32>(y[i]);
    }
    for i in 0..K {
        let hl = _mm256_srli_epi64::<32>(_mm256_mul_epu32(y1[i], tw[i].s));
        let lh = _mm256_srli_epi64::<32>(_mm256_mul_epu32(y[i], tw[i].sh));
        qh[i] = _mm256_add_epi64(hl, lh);
    }
    for i in 0..K {
        qh[i] = _mm256_add_epi64(qh[i], _mm256_mul_epu32(y1[i], tw[i].sh));
    }
    for i in 0..K {
        d[i] = _mm256_sub_epi32(
            opaque(_mm256_mullo_epi32(y[i], tw[i].wsw)),
            opaque(_mm256_mullo_epi32(qh[i], c.qsw)),
        );
        r[i] = _mm256_sub_epi64(
            _mm256_mul_epu32(y[i], tw[i].w),
            _mm256_mul_epu32(qh[i], c.q),
        );
    }
    for i in 0..K {
        let cross = _mm256_blend_epi32::<0b1010_1010>(
            z,
            _mm256_add_epi32(d[i], _mm256_slli_epi64::<32>(d[i])),
        );
        r[i] = _mm256_add_epi64(r[i], cross);
    }
    r
}

/// `x - m` if `x >= m` else `x`, for `m <= 2^63` and `x < min(2m, m + 2^63)`: keeps `x` where
/// `x - m` is negative.
#[inline]
#[target_feature(enable = "avx2")]
fn red(x: __m256i, m: __m256i) -> __m256i {
    let d = _mm256_sub_epi64(x, m);
    _mm256_castpd_si256(_mm256_blendv_pd(
        _mm256_castsi256_pd(d),
        _mm256_castsi256_pd(x),
        _mm256_castsi256_pd(d),
    ))
}

/// `K` forward (Cooley-Tukey) butterflies after Harvey, in lockstep: inputs and outputs in
/// `[0, 8q)`; `x` is reduced to `[0, 4q)` and the product, in `[0, 4q)`, is used unreduced.
/// Returns `[x', y']` per butterfly.
#[inline]
#[target_feature(enable = "avx2")]
fn fwd_bf<const K: usize>(
    x: [__m256i; K],
    y: [__m256i; K],
    tw: [Tw; K],
    c: Consts,
) -> [[__m256i; 2]; K] {
    let v = mul_lazy(y, tw, c);
    let mut out = [[_mm256_setzero_si256(); 2]; K];
    for i in 0..K {
        let u = red(x[i], c.q4);
        out[i] = [
            _mm256_add_epi64(u, v[i]),
            _mm256_sub_epi64(_mm256_add_epi64(u, c.q4), v[i]),
        ];
    }
    out
}

/// `K` inverse (Gentleman-Sande) butterflies after Harvey, in lockstep: inputs and outputs in
/// `[0, 4q)`; the sum is reduced from `[0, 8q)`, the product is used unreduced.
#[inline]
#[target_feature(enable = "avx2")]
fn inv_bf<const K: usize>(
    x: [__m256i; K],
    y: [__m256i; K],
    tw: [Tw; K],
    c: Consts,
) -> [[__m256i; 2]; K] {
    let mut d = [_mm256_setzero_si256(); K];
    for i in 0..K {
        d[i] = _mm256_sub_epi64(_mm256_add_epi64(x[i], c.q4), y[i]);
    }
    let v = mul_lazy(d, tw, c);
    let mut out = [[_mm256_setzero_si256(); 2]; K];
    for i in 0..K {
        out[i] = [red(_mm256_add_epi64(x[i], y[i]), c.q4), v[i]];
    }
    out
}

/// Fully reduces a forward output from `[0, 8q)`.
#[inline]
#[target_feature(enable = "avx2")]
fn reduce_out(x: __m256i, c: Consts) -> __m256i {
    red(red(red(x, c.q4), c.q2), c.q)
}

/// Unaligned load of 4 words at `p`.
///
/// # Safety
/// `p..p+4` must be readable.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn ld(p: *const u64) -> __m256i {
    // SAFETY: the caller guarantees 4 readable words at `p`; the load is unaligned.
    unsafe { _mm256_loadu_si256(p.cast()) }
}

/// Unaligned store of 4 words at `p`.
///
/// # Safety
/// `p..p+4` must be writable.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn st(p: *mut u64, v: __m256i) {
    // SAFETY: the caller guarantees 4 writable words at `p`; the store is unaligned.
    unsafe { _mm256_storeu_si256(p.cast(), v) }
}

/// Twiddles for 2 groups of 2 lanes from `roots[k], roots[k+1]`.
///
/// # Safety
/// `k + 2 <= roots.len()`, `k + 2 <= s.len()`.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn tw_expand2(roots: &[u64], s: &[u64], k: usize) -> Tw {
    // SAFETY: the caller guarantees two readable words at index k of both tables.
    let (w, sv) = unsafe {
        (
            _mm_loadu_si128(roots.as_ptr().add(k).cast()),
            _mm_loadu_si128(s.as_ptr().add(k).cast()),
        )
    };
    tw_lanes(
        _mm256_permute4x64_epi64::<0b01_01_00_00>(_mm256_castsi128_si256(w)),
        _mm256_permute4x64_epi64::<0b01_01_00_00>(_mm256_castsi128_si256(sv)),
    )
}

/// Twiddles for 4 groups of 1 lane from `roots[k..k+4]`.
///
/// # Safety
/// `k + 4 <= roots.len()`, `k + 4 <= s.len()`.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn tw_load4(roots: &[u64], s: &[u64], k: usize) -> Tw {
    // SAFETY: the caller guarantees four readable words at index k of both tables.
    unsafe { tw_lanes(ld(roots.as_ptr().add(k)), ld(s.as_ptr().add(k))) }
}

/// The last two forward layers (distances 2, 1) in registers on `K` 8-element blocks at `a`,
/// plus the final reduction to `[0, q)`; the blocks go through each step in lockstep.
///
/// # Safety
/// avx2 available; `a` is element `k` of the transform's `n` words, `k + 8K <= n`, `k % 8 == 0`.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn fwd_last2_blocks<const K: usize>(core: &NttCore<u64>, c: Consts, a: *mut u64, k: usize) {
    let n = core.n;
    let (roots, s) = (&core.roots[..], &core.roots_shoup[..]);
    let z = _mm256_setzero_si256();
    let (mut x, mut y, mut tw2, mut tw1) = ([z; K], [z; K], [tw_zero(); K], [tw_zero(); K]);
    // SAFETY: k + 8K <= n words at `a - k`; the twiddle indices n/4 + (k + 8K)/4 and
    // n/2 + (k + 8K)/2 are at most n, the table length.
    unsafe {
        for i in 0..K {
            let p = a.add(8 * i);
            let (va, vb) = (ld(p), ld(p.add(4)));
            // [a0,a1,a4,a5] and [a2,a3,a6,a7]: distance-2 pairs.
            x[i] = _mm256_permute2x128_si256::<0x20>(va, vb);
            y[i] = _mm256_permute2x128_si256::<0x31>(va, vb);
            tw2[i] = tw_expand2(roots, s, n / 4 + k / 4 + 2 * i);
            tw1[i] = tw_load4(roots, s, n / 2 + k / 2 + 4 * i);
        }
    }
    let xy = fwd_bf(x, y, tw2, c);
    for i in 0..K {
        // Even and odd elements: distance-1 pairs.
        x[i] = _mm256_unpacklo_epi64(xy[i][0], xy[i][1]);
        y[i] = _mm256_unpackhi_epi64(xy[i][0], xy[i][1]);
    }
    let xy = fwd_bf(x, y, tw1, c);
    for (i, [x3, y3]) in xy.into_iter().enumerate() {
        let (x3, y3) = (reduce_out(x3, c), reduce_out(y3, c));
        let lo = _mm256_unpacklo_epi64(x3, y3);
        let hi = _mm256_unpackhi_epi64(x3, y3);
        // SAFETY: as above.
        unsafe {
            let p = a.add(8 * i);
            st(p, _mm256_permute2x128_si256::<0x20>(lo, hi));
            st(p.add(4), _mm256_permute2x128_si256::<0x31>(lo, hi));
        }
    }
}

/// The last two forward layers on `a[off..off+len]`, four blocks at a time where possible.
///
/// # Safety
/// avx2 available; `off + len <= n = a.len()`, both multiples of 16.
#[target_feature(enable = "avx2")]
unsafe fn fwd_last2(core: &NttCore<u64>, a: *mut u64, off: usize, len: usize) {
    let c = consts(core);
    let mut k = off;
    while k + 32 <= off + len {
        // SAFETY: the CPU has avx2 (caller); k + 32 <= off + len <= n and k is a multiple of 8.
        unsafe { fwd_last2_blocks::<4>(core, c, a.add(k), k) };
        k += 32;
    }
    while k < off + len {
        // SAFETY: as above, with k + 16 <= off + len (both are multiples of 16).
        unsafe { fwd_last2_blocks::<2>(core, c, a.add(k), k) };
        k += 16;
    }
}

/// The first two inverse layers (distances 1, 2) in registers on `K` 8-element blocks at `a`,
/// in lockstep.
///
/// # Safety
/// As [`fwd_last2_blocks`].
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn inv_first2_blocks<const K: usize>(core: &NttCore<u64>, c: Consts, a: *mut u64, k: usize) {
    let n = core.n;
    let (roots, s) = (&core.inv_roots[..], &core.inv_roots_shoup[..]);
    let z = _mm256_setzero_si256();
    let (mut x, mut y, mut tw2, mut tw1) = ([z; K], [z; K], [tw_zero(); K], [tw_zero(); K]);
    // SAFETY: as in `fwd_last2_blocks`.
    unsafe {
        for i in 0..K {
            let p = a.add(8 * i);
            let (va, vb) = (ld(p), ld(p.add(4)));
            let lo = _mm256_permute2x128_si256::<0x20>(va, vb);
            let hi = _mm256_permute2x128_si256::<0x31>(va, vb);
            // Even and odd elements: distance-1 pairs.
            x[i] = _mm256_unpacklo_epi64(lo, hi);
            y[i] = _mm256_unpackhi_epi64(lo, hi);
            tw1[i] = tw_load4(roots, s, n / 2 + k / 2 + 4 * i);
            tw2[i] = tw_expand2(roots, s, n / 4 + k / 4 + 2 * i);
        }
    }
    let xy = inv_bf(x, y, tw1, c);
    for i in 0..K {
        // [a0,a1,a4,a5] and [a2,a3,a6,a7]: distance-2 pairs.
        x[i] = _mm256_unpacklo_epi64(xy[i][0], xy[i][1]);
        y[i] = _mm256_unpackhi_epi64(xy[i][0], xy[i][1]);
    }
    let xy = inv_bf(x, y, tw2, c);
    for (i, [x2, y2]) in xy.into_iter().enumerate() {
        // SAFETY: as above.
        unsafe {
            let p = a.add(8 * i);
            st(p, _mm256_permute2x128_si256::<0x20>(x2, y2));
            st(p.add(4), _mm256_permute2x128_si256::<0x31>(x2, y2));
        }
    }
}

/// The first two inverse layers on `a[off..off+len]`, four blocks at a time where possible.
///
/// # Safety
/// avx2 available; `off + len <= n = a.len()`, both multiples of 16.
#[target_feature(enable = "avx2")]
unsafe fn inv_first2(core: &NttCore<u64>, a: *mut u64, off: usize, len: usize) {
    let c = consts(core);
    let mut k = off;
    while k + 32 <= off + len {
        // SAFETY: the CPU has avx2 (caller); k + 32 <= off + len <= n and k is a multiple of 8.
        unsafe { inv_first2_blocks::<4>(core, c, a.add(k), k) };
        k += 32;
    }
    while k < off + len {
        // SAFETY: as above, with k + 16 <= off + len (both are multiples of 16).
        unsafe { inv_first2_blocks::<2>(core, c, a.add(k), k) };
        k += 16;
    }
}
