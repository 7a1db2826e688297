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
//! - layers are fused in pairs (radix-4 passes over two vector columns, eight vectors in
//!   registers), breadth-first while a group is larger than an L1-sized block, then depth-first
//!   per block; independent butterflies advance step by step in lockstep (each one alone is a
//!   long dependency chain that would leave the out-of-order core idle);
//! - the two layers with distances 2 and 1 run in registers on 8-element blocks, with
//!   permutes between layers and per-lane twiddle vectors; the forward output is reduced there,
//!   the inverse's `N^-1` is folded into its last layer.

use std::arch::x86_64::*;

use super::NttCore;

/// Elements per depth-first block: 16 KiB of data, half of Zen 4's / Intel's 32-48 KiB L1D.
const BLOCK: usize = 2048;

/// Backend-specific tables: none beyond the core's; the kernels read the roots and their
/// 2^64-scaled Shoup companions directly (see [`mul_lazy`]).
#[derive(Debug)]
pub struct Tables {}

impl Tables {
    /// Builds the tables from the core precomputation.
    pub(crate) fn new(_core: &NttCore<u64>) -> Self {
        Self {}
    }
}

/// Forward NTT in place.
pub(crate) fn forward(core: &NttCore<u64>, _t: &Tables, a: &mut [u64]) {
    // SAFETY: the table was built for the Avx512 backend, which is only selected after the CPU
    // was checked for avx512f/dq/bw/vl; `a.len() == core.n()` is checked by the caller.
    unsafe { forward_impl(core, a) }
}

/// Inverse NTT in place.
pub(crate) fn inverse(core: &NttCore<u64>, _t: &Tables, a: &mut [u64]) {
    // SAFETY: as in `forward`: the CPU has avx2 and `a.len() == core.n()`.
    unsafe { inverse_impl(core, a) }
}

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

/// Forward layer `l` (`2^l` groups, distance `n >> (l+1) >= 4`) on `a[off..off+len]`.
///
/// # Safety
/// avx512f/dq available; `off + len <= n = a.len()`, both multiples of the group size.
#[target_feature(enable = "avx2")]
unsafe fn fwd_radix2(core: &NttCore<u64>, a: *mut u64, l: usize, off: usize, len: usize) {
    let c = consts(core);
    let fs = &core.roots_shoup[..];
    let n = core.n;
    let m = 1usize << l;
    let g = n >> (l + 1);
    for grp in off / (2 * g)..(off + len) / (2 * g) {
        let tw = tw_bcast(core.roots[m + grp], fs[m + grp]);
        let base = grp * 2 * g;
        for j in (0..g).step_by(4) {
            // SAFETY: base + j + g + 4 <= (grp + 1) * 2g <= off + len <= n words of `a`.
            unsafe {
                let px = a.add(base + j);
                let py = a.add(base + j + g);
                let [[x, y]] = fwd_bf([ld(px)], [ld(py)], [tw], c);
                st(px, x);
                st(py, y);
            }
        }
    }
}

/// Forward layers `l` and `l+1` fused (radix 4) on `a[off..off+len]`; distance of layer `l+1`
/// at least 4.
///
/// # Safety
/// As [`fwd_radix2`].
#[target_feature(enable = "avx2")]
unsafe fn fwd_radix4(core: &NttCore<u64>, a: *mut u64, l: usize, off: usize, len: usize) {
    let c = consts(core);
    let fs = &core.roots_shoup[..];
    let n = core.n;
    let m = 1usize << l;
    let g = n >> (l + 1);
    let h = g / 2;
    for grp in off / (2 * g)..(off + len) / (2 * g) {
        let tw1 = tw_bcast(core.roots[m + grp], fs[m + grp]);
        let k2 = 2 * m + 2 * grp;
        let tw2a = tw_bcast(core.roots[k2], fs[k2]);
        let tw2b = tw_bcast(core.roots[k2 + 1], fs[k2 + 1]);
        let base = grp * 2 * g;
        if h >= 8 {
            // Two vector columns at once: four independent butterflies per step.
            for j in (0..h).step_by(8) {
                // SAFETY: base + j + 3h + 8 <= base + 2g <= off + len <= n words of `a`.
                unsafe {
                    let p = a.add(base + j);
                    let q = p.add(4);
                    let (h2, h3) = (2 * h, 3 * h);
                    let [[a0, a2], [a1, a3], [b0, b2], [b1, b3]] = fwd_bf(
                        [ld(p), ld(p.add(h)), ld(q), ld(q.add(h))],
                        [ld(p.add(h2)), ld(p.add(h3)), ld(q.add(h2)), ld(q.add(h3))],
                        [tw1; 4],
                        c,
                    );
                    let [[a0, a1], [a2, a3], [b0, b1], [b2, b3]] = fwd_bf(
                        [a0, a2, b0, b2],
                        [a1, a3, b1, b3],
                        [tw2a, tw2b, tw2a, tw2b],
                        c,
                    );
                    for (k, (va, vb)) in [(a0, b0), (a1, b1), (a2, b2), (a3, b3)]
                        .into_iter()
                        .enumerate()
                    {
                        st(p.add(k * h), va);
                        st(q.add(k * h), vb);
                    }
                }
            }
        } else {
            // SAFETY: h == 4: base + 3h + 4 == base + 2g <= off + len <= n words of `a`.
            unsafe {
                let p0 = a.add(base);
                let (p1, p2, p3) = (p0.add(h), p0.add(2 * h), p0.add(3 * h));
                let [[x0, x2], [x1, x3]] =
                    fwd_bf([ld(p0), ld(p1)], [ld(p2), ld(p3)], [tw1, tw1], c);
                let [[x0, x1], [x2, x3]] = fwd_bf([x0, x2], [x1, x3], [tw2a, tw2b], c);
                st(p0, x0);
                st(p1, x1);
                st(p2, x2);
                st(p3, x3);
            }
        }
    }
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

/// Forward transform.
///
/// # Safety
/// avx512f/dq available; `a.len() == core.n`.
#[target_feature(enable = "avx2")]
unsafe fn forward_impl(core: &NttCore<u64>, a: &mut [u64]) {
    let n = core.n;
    debug_assert_eq!(a.len(), n);
    let p = a.as_mut_ptr();
    // Layers with distance >= 4 are vector-against-vector; the last 2 are in registers.
    let vec_layers = core.log_n as usize - 2;
    let mut l = 0;
    // SAFETY (all calls below): the CPU has avx512f/dq (caller), and every range lies in `a`
    // with offsets and lengths that are multiples of the current group size.
    while l < vec_layers && (n >> l) > BLOCK {
        if l + 1 < vec_layers {
            // SAFETY: see above.
            unsafe { fwd_radix4(core, p, l, 0, n) };
            l += 2;
        } else {
            // SAFETY: see above.
            unsafe { fwd_radix2(core, p, l, 0, n) };
            l += 1;
        }
    }
    let bs = n.min(BLOCK);
    for off in (0..n).step_by(bs) {
        let mut k = l;
        while k < vec_layers {
            if k + 1 < vec_layers {
                // SAFETY: see above.
                unsafe { fwd_radix4(core, p, k, off, bs) };
                k += 2;
            } else {
                // SAFETY: see above.
                unsafe { fwd_radix2(core, p, k, off, bs) };
                k += 1;
            }
        }
        // SAFETY: see above.
        unsafe { fwd_last2(core, p, off, bs) };
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

/// Inverse layer `il` (`n >> (il+1)` groups, distance `2^il >= 4`) on `a[off..off+len]`.
///
/// # Safety
/// As [`fwd_radix2`].
#[target_feature(enable = "avx2")]
unsafe fn inv_radix2(core: &NttCore<u64>, a: *mut u64, il: usize, off: usize, len: usize) {
    let c = consts(core);
    let is = &core.inv_roots_shoup[..];
    let h = core.n >> (il + 1);
    let g = 1usize << il;
    for grp in off / (2 * g)..(off + len) / (2 * g) {
        let tw = tw_bcast(core.inv_roots[h + grp], is[h + grp]);
        let base = grp * 2 * g;
        for j in (0..g).step_by(4) {
            // SAFETY: base + j + g + 4 <= (grp + 1) * 2g <= off + len <= n.
            unsafe {
                let px = a.add(base + j);
                let py = a.add(base + j + g);
                let [[x, y]] = inv_bf([ld(px)], [ld(py)], [tw], c);
                st(px, x);
                st(py, y);
            }
        }
    }
}

/// Inverse layers `il` and `il+1` fused (radix 4) on `a[off..off+len]`.
///
/// # Safety
/// As [`fwd_radix2`].
#[target_feature(enable = "avx2")]
unsafe fn inv_radix4(core: &NttCore<u64>, a: *mut u64, il: usize, off: usize, len: usize) {
    let c = consts(core);
    let is = &core.inv_roots_shoup[..];
    let h = core.n >> (il + 1);
    let g = 1usize << il;
    for grp in off / (4 * g)..(off + len) / (4 * g) {
        let ka = h + 2 * grp;
        let twa = tw_bcast(core.inv_roots[ka], is[ka]);
        let twb = tw_bcast(core.inv_roots[ka + 1], is[ka + 1]);
        let twc = tw_bcast(core.inv_roots[h / 2 + grp], is[h / 2 + grp]);
        let base = grp * 4 * g;
        // Two vector columns at once when they exist: four independent butterflies per step.
        let cols = if g >= 8 { 2 } else { 1 };
        for j in (0..g).step_by(4 * cols) {
            // SAFETY: base + j + 3g + 4 * cols <= base + 4g <= off + len <= n.
            unsafe {
                let p = a.add(base + j);
                if cols == 2 {
                    let q = p.add(4);
                    let (g2, g3) = (2 * g, 3 * g);
                    let [[a0, a1], [a2, a3], [b0, b1], [b2, b3]] = inv_bf(
                        [ld(p), ld(p.add(g2)), ld(q), ld(q.add(g2))],
                        [ld(p.add(g)), ld(p.add(g3)), ld(q.add(g)), ld(q.add(g3))],
                        [twa, twb, twa, twb],
                        c,
                    );
                    let [[a0, a2], [a1, a3], [b0, b2], [b1, b3]] =
                        inv_bf([a0, a1, b0, b1], [a2, a3, b2, b3], [twc; 4], c);
                    for (k, (va, vb)) in [(a0, b0), (a1, b1), (a2, b2), (a3, b3)]
                        .into_iter()
                        .enumerate()
                    {
                        st(p.add(k * g), va);
                        st(q.add(k * g), vb);
                    }
                } else {
                    let (p1, p2, p3) = (p.add(g), p.add(2 * g), p.add(3 * g));
                    let [[x0, x1], [x2, x3]] =
                        inv_bf([ld(p), ld(p2)], [ld(p1), ld(p3)], [twa, twb], c);
                    let [[x0, x2], [x1, x3]] = inv_bf([x0, x1], [x2, x3], [twc, twc], c);
                    st(p, x0);
                    st(p1, x1);
                    st(p2, x2);
                    st(p3, x3);
                }
            }
        }
    }
}

/// The last inverse layer (one group) with `N^-1` folded in; output reduced.
///
/// # Safety
/// avx512f/dq available; `a` has `n` words.
#[target_feature(enable = "avx2")]
unsafe fn inv_last(core: &NttCore<u64>, a: *mut u64) {
    let c = consts(core);
    let half = core.n / 2;
    let ni = tw_bcast(core.n_inv.0, core.n_inv.1);
    let nw = tw_bcast(core.n_inv_w.0, core.n_inv_w.1);
    for j in (0..half).step_by(4) {
        // SAFETY: j + half + 4 <= n.
        unsafe {
            let px = a.add(j);
            let py = a.add(j + half);
            // Inputs in [0, 4q): the sum and the shifted difference stay below 8q, and the
            // products of any word are in [0, 4q).
            let (u, v) = (ld(px), ld(py));
            let s = _mm256_add_epi64(u, v);
            let d = _mm256_sub_epi64(_mm256_add_epi64(u, c.q4), v);
            let [ps, pd] = mul_lazy([s, d], [ni, nw], c);
            st(px, red(red(ps, c.q2), c.q));
            st(py, red(red(pd, c.q2), c.q));
        }
    }
}

/// Inverse transform.
///
/// # Safety
/// avx512f/dq available; `a.len() == core.n`.
#[target_feature(enable = "avx2")]
unsafe fn inverse_impl(core: &NttCore<u64>, a: &mut [u64]) {
    let n = core.n;
    debug_assert_eq!(a.len(), n);
    let p = a.as_mut_ptr();
    let log_n = core.log_n as usize;
    // Layers 2..log_n-1 are vector-against-vector; the last (one group) folds in N^-1.
    let last = log_n - 1;
    let bs = n.min(BLOCK);
    // Layers whose groups (2^(il+1) words) fit in a block run depth-first.
    let mut il_block = 2;
    while il_block < last && (2usize << il_block) <= bs {
        il_block += 1;
    }
    // SAFETY (all calls below): the CPU has avx512f/dq (caller), and every range lies in `a`
    // with offsets and lengths that are multiples of the current group size.
    for off in (0..n).step_by(bs) {
        // SAFETY: see above.
        unsafe { inv_first2(core, p, off, bs) };
        let mut il = 2;
        while il < il_block {
            if il + 1 < il_block {
                // SAFETY: see above.
                unsafe { inv_radix4(core, p, il, off, bs) };
                il += 2;
            } else {
                // SAFETY: see above.
                unsafe { inv_radix2(core, p, il, off, bs) };
                il += 1;
            }
        }
    }
    let mut il = il_block;
    while il < last {
        if il + 1 < last {
            // SAFETY: see above.
            unsafe { inv_radix4(core, p, il, 0, n) };
            il += 2;
        } else {
            // SAFETY: see above.
            unsafe { inv_radix2(core, p, il, 0, n) };
            il += 1;
        }
    }
    // SAFETY: see above.
    unsafe { inv_last(core, p) };
}
