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
//! - layers are fused three at a time (radix-8 passes, eight vectors in registers), breadth-first
//!   while a group is larger than an L1-sized block, then depth-first per block; independent
//!   butterflies advance step by step in lockstep (each one alone is a long dependency chain
//!   that would leave the out-of-order core idle);
//! - the three layers with distances 4, 2 and 1 run in registers on 16-element blocks, with
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
    // SAFETY: as in `forward`: the CPU has avx512f/dq and `a.len() == core.n()`.
    unsafe { inverse_impl(core, a) }
}

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
fn mul_lazy<const K: usize>(y: [__m512i; K], tw: [Tw; K], q: __m512i) -> [__m512i; K] {
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
    let v = mul_lazy(y, tw, c.q);
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
    let v = mul_lazy(d, tw, c.q);
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

/// Forward layer `l` (`2^l` groups, distance `n >> (l+1) >= 8`) on `a[off..off+len]`.
///
/// # Safety
/// avx512f/dq available; `off + len <= n = a.len()`, both multiples of the group size.
#[target_feature(enable = "avx512f,avx512dq")]
unsafe fn fwd_radix2(core: &NttCore<u64>, a: *mut u64, l: usize, off: usize, len: usize) {
    let c = consts(core);
    let fs = &core.roots_shoup[..];
    let n = core.n;
    let m = 1usize << l;
    let g = n >> (l + 1);
    for grp in off / (2 * g)..(off + len) / (2 * g) {
        let tw = tw_bcast(core.roots[m + grp], fs[m + grp]);
        let base = grp * 2 * g;
        for j in (0..g).step_by(8) {
            // SAFETY: base + j + g + 8 <= (grp + 1) * 2g <= off + len <= n words of `a`.
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
/// at least 8.
///
/// # Safety
/// As [`fwd_radix2`].
#[target_feature(enable = "avx512f,avx512dq")]
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
        for j in (0..h).step_by(8) {
            // SAFETY: base + j + 3h + 8 <= base + 2g <= off + len <= n words of `a`.
            unsafe {
                let p0 = a.add(base + j);
                let p1 = p0.add(h);
                let p2 = p0.add(2 * h);
                let p3 = p0.add(3 * h);
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

/// Forward layers `l`, `l+1`, `l+2` fused (radix 8, eight vectors in registers) on
/// `a[off..off+len]`; distance of layer `l+2` at least 8.
///
/// # Safety
/// As [`fwd_radix2`].
#[target_feature(enable = "avx512f,avx512dq")]
unsafe fn fwd_radix8(core: &NttCore<u64>, a: *mut u64, l: usize, off: usize, len: usize) {
    let c = consts(core);
    let fs = &core.roots_shoup[..];
    let n = core.n;
    let m = 1usize << l;
    let g = n >> (l + 1);
    let e = g / 4;
    let tw = |k: usize| tw_bcast(core.roots[k], fs[k]);
    for grp in off / (2 * g)..(off + len) / (2 * g) {
        let t1 = tw(m + grp);
        let t2 = [tw(2 * m + 2 * grp), tw(2 * m + 2 * grp + 1)];
        let k3 = 4 * m + 4 * grp;
        let t3 = [tw(k3), tw(k3 + 1), tw(k3 + 2), tw(k3 + 3)];
        let base = grp * 2 * g;
        for j in (0..e).step_by(8) {
            // SAFETY: base + j + 7e + 8 <= base + 2g <= off + len <= n words of `a`.
            unsafe {
                let p = a.add(base + j);
                let mut x = [_mm512_setzero_si512(); 8];
                for (k, xk) in x.iter_mut().enumerate() {
                    *xk = ld(p.add(k * e));
                }
                let [[a0, a4], [a1, a5], [a2, a6], [a3, a7]] = fwd_bf(
                    [x[0], x[1], x[2], x[3]],
                    [x[4], x[5], x[6], x[7]],
                    [t1; 4],
                    c,
                );
                let [[a0, a2], [a1, a3], [a4, a6], [a5, a7]] = fwd_bf(
                    [a0, a1, a4, a5],
                    [a2, a3, a6, a7],
                    [t2[0], t2[0], t2[1], t2[1]],
                    c,
                );
                let [[a0, a1], [a2, a3], [a4, a5], [a6, a7]] =
                    fwd_bf([a0, a2, a4, a6], [a1, a3, a5, a7], t3, c);
                x = [a0, a1, a2, a3, a4, a5, a6, a7];
                for (k, xk) in x.iter().enumerate() {
                    st(p.add(k * e), *xk);
                }
            }
        }
    }
}

/// Inverse layers `il`, `il+1`, `il+2` fused (radix 8) on `a[off..off+len]`; distance of
/// layer `il` at least 8.
///
/// # Safety
/// As [`fwd_radix2`].
#[target_feature(enable = "avx512f,avx512dq")]
unsafe fn inv_radix8(core: &NttCore<u64>, a: *mut u64, il: usize, off: usize, len: usize) {
    let c = consts(core);
    let is = &core.inv_roots_shoup[..];
    let h = core.n >> (il + 1);
    let g = 1usize << il;
    let tw = |k: usize| tw_bcast(core.inv_roots[k], is[k]);
    for grp in off / (8 * g)..(off + len) / (8 * g) {
        let k1 = h + 4 * grp;
        let t1 = [tw(k1), tw(k1 + 1), tw(k1 + 2), tw(k1 + 3)];
        let t2 = [tw(h / 2 + 2 * grp), tw(h / 2 + 2 * grp + 1)];
        let t3 = tw(h / 4 + grp);
        let base = grp * 8 * g;
        for j in (0..g).step_by(8) {
            // SAFETY: base + j + 7g + 8 <= base + 8g <= off + len <= n.
            unsafe {
                let p = a.add(base + j);
                let mut x = [_mm512_setzero_si512(); 8];
                for (k, xk) in x.iter_mut().enumerate() {
                    *xk = ld(p.add(k * g));
                }
                let [[a0, a1], [a2, a3], [a4, a5], [a6, a7]] =
                    inv_bf([x[0], x[2], x[4], x[6]], [x[1], x[3], x[5], x[7]], t1, c);
                let [[a0, a2], [a1, a3], [a4, a6], [a5, a7]] = inv_bf(
                    [a0, a1, a4, a5],
                    [a2, a3, a6, a7],
                    [t2[0], t2[0], t2[1], t2[1]],
                    c,
                );
                let [[a0, a4], [a1, a5], [a2, a6], [a3, a7]] =
                    inv_bf([a0, a1, a2, a3], [a4, a5, a6, a7], [t3; 4], c);
                x = [a0, a1, a2, a3, a4, a5, a6, a7];
                for (k, xk) in x.iter().enumerate() {
                    st(p.add(k * g), *xk);
                }
            }
        }
    }
}

/// Forward layers `from..to` on `a[off..off+len]`, fused three (or two) at a time.
///
/// # Safety
/// As [`fwd_radix2`]; layer `to - 1` has distance at least 8.
#[target_feature(enable = "avx512f,avx512dq")]
unsafe fn fwd_layers(
    core: &NttCore<u64>,
    a: *mut u64,
    from: usize,
    to: usize,
    off: usize,
    len: usize,
) {
    let mut l = from;
    while l < to {
        let r = fused_count(to - l);
        // SAFETY: forwarded from the caller; layers l..l+r end at `to`.
        unsafe {
            match r {
                3 => fwd_radix8(core, a, l, off, len),
                2 => fwd_radix4(core, a, l, off, len),
                _ => fwd_radix2(core, a, l, off, len),
            }
        }
        l += r;
    }
}

/// Inverse layers `from..to` on `a[off..off+len]`, fused three (or two) at a time.
///
/// # Safety
/// As [`fwd_radix2`]; layer `from` has distance at least 8.
#[target_feature(enable = "avx512f,avx512dq")]
unsafe fn inv_layers(
    core: &NttCore<u64>,
    a: *mut u64,
    from: usize,
    to: usize,
    off: usize,
    len: usize,
) {
    let mut il = from;
    while il < to {
        let r = fused_count(to - il);
        // SAFETY: forwarded from the caller; layers il..il+r end at `to`.
        unsafe {
            match r {
                3 => inv_radix8(core, a, il, off, len),
                2 => inv_radix4(core, a, il, off, len),
                _ => inv_radix2(core, a, il, off, len),
            }
        }
        il += r;
    }
}

/// How many of `left` remaining layers the next pass fuses: 3, but 2+2 rather than 3+1.
fn fused_count(left: usize) -> usize {
    match left {
        0..=2 => left,
        4 => 2,
        _ => 3,
    }
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

/// Forward transform.
///
/// # Safety
/// avx512f/dq available; `a.len() == core.n`.
#[target_feature(enable = "avx512f,avx512dq")]
unsafe fn forward_impl(core: &NttCore<u64>, a: &mut [u64]) {
    let n = core.n;
    debug_assert_eq!(a.len(), n);
    let p = a.as_mut_ptr();
    // Layers with distance >= 8 are vector-against-vector; the last 3 are in registers.
    let vec_layers = core.log_n as usize - 3;
    // Layers whose groups (n >> l words) exceed a block run breadth-first, the rest per block.
    let mut l_block = 0;
    while l_block < vec_layers && (n >> l_block) > BLOCK {
        l_block += 1;
    }
    // SAFETY (all calls below): the CPU has avx512f/dq (caller), and every range lies in `a`
    // with offsets and lengths that are multiples of the current group size.
    // SAFETY: see above.
    unsafe { fwd_layers(core, p, 0, l_block, 0, n) };
    let bs = n.min(BLOCK);
    for off in (0..n).step_by(bs) {
        // SAFETY: see above.
        unsafe { fwd_layers(core, p, l_block, vec_layers, off, bs) };
        // SAFETY: see above.
        unsafe { fwd_last3(core, p, off, bs) };
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

/// Inverse layer `il` (`n >> (il+1)` groups, distance `2^il >= 8`) on `a[off..off+len]`.
///
/// # Safety
/// As [`fwd_radix2`].
#[target_feature(enable = "avx512f,avx512dq")]
unsafe fn inv_radix2(core: &NttCore<u64>, a: *mut u64, il: usize, off: usize, len: usize) {
    let c = consts(core);
    let is = &core.inv_roots_shoup[..];
    let h = core.n >> (il + 1);
    let g = 1usize << il;
    for grp in off / (2 * g)..(off + len) / (2 * g) {
        let tw = tw_bcast(core.inv_roots[h + grp], is[h + grp]);
        let base = grp * 2 * g;
        for j in (0..g).step_by(8) {
            // SAFETY: base + j + g + 8 <= (grp + 1) * 2g <= off + len <= n.
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
#[target_feature(enable = "avx512f,avx512dq")]
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
        for j in (0..g).step_by(8) {
            // SAFETY: base + j + 3g + 8 <= base + 4g <= off + len <= n.
            unsafe {
                let p0 = a.add(base + j);
                let p1 = p0.add(g);
                let p2 = p0.add(2 * g);
                let p3 = p0.add(3 * g);
                let [[x0, x1], [x2, x3]] =
                    inv_bf([ld(p0), ld(p2)], [ld(p1), ld(p3)], [twa, twb], c);
                let [[x0, x2], [x1, x3]] = inv_bf([x0, x1], [x2, x3], [twc, twc], c);
                st(p0, x0);
                st(p1, x1);
                st(p2, x2);
                st(p3, x3);
            }
        }
    }
}

/// The last inverse layer (one group) with `N^-1` folded in; output reduced.
///
/// # Safety
/// avx512f/dq available; `a` has `n` words.
#[target_feature(enable = "avx512f,avx512dq")]
unsafe fn inv_last(core: &NttCore<u64>, a: *mut u64) {
    let c = consts(core);
    let half = core.n / 2;
    let ni = tw_bcast(core.n_inv.0, core.n_inv.1);
    let nw = tw_bcast(core.n_inv_w.0, core.n_inv_w.1);
    for j in (0..half).step_by(8) {
        // SAFETY: j + half + 8 <= n.
        unsafe {
            let px = a.add(j);
            let py = a.add(j + half);
            // Inputs in [0, 4q): the sum and the shifted difference stay below 8q, and the
            // products of any word are in [0, 4q).
            let (u, v) = (ld(px), ld(py));
            let s = _mm512_add_epi64(u, v);
            let d = _mm512_sub_epi64(_mm512_add_epi64(u, c.q4), v);
            let [ps, pd] = mul_lazy([s, d], [ni, nw], c.q);
            st(px, red(red(ps, c.q2), c.q));
            st(py, red(red(pd, c.q2), c.q));
        }
    }
}

/// Inverse transform.
///
/// # Safety
/// avx512f/dq available; `a.len() == core.n`.
#[target_feature(enable = "avx512f,avx512dq")]
unsafe fn inverse_impl(core: &NttCore<u64>, a: &mut [u64]) {
    let n = core.n;
    debug_assert_eq!(a.len(), n);
    let p = a.as_mut_ptr();
    let log_n = core.log_n as usize;
    // Layers 3..log_n-1 are vector-against-vector; the last (one group) folds in N^-1.
    let last = log_n - 1;
    let bs = n.min(BLOCK);
    // Layers whose groups (2^(il+1) words) fit in a block run depth-first.
    let mut il_block = 3;
    while il_block < last && (2usize << il_block) <= bs {
        il_block += 1;
    }
    // SAFETY (all calls below): the CPU has avx512f/dq (caller), and every range lies in `a`
    // with offsets and lengths that are multiples of the current group size.
    for off in (0..n).step_by(bs) {
        // SAFETY: see above.
        unsafe { inv_first3(core, p, off, bs) };
        // SAFETY: see above.
        unsafe { inv_layers(core, p, 3, il_block, off, bs) };
    }
    // SAFETY: see above.
    unsafe { inv_layers(core, p, il_block, last, 0, n) };
    // SAFETY: see above.
    unsafe { inv_last(core, p) };
}
