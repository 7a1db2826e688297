//! AVX-512 IFMA negacyclic NTT for 64-bit words and primes below 2^50.
//!
//! Multiplication by a twiddle `W` is HEXL-style 52-bit Shoup multiplication on the IFMA units:
//! with `W' = floor(W * 2^52 / q)`, `Q = madd52hi(W', Y)` and `T = lo52(W*Y) - lo52(Q*q)` (the
//! subtraction done as `madd52lo(Q, 2^52 - q)` and a 52-bit mask), `T = W*Y mod q` in `[0, 2q)` for
//! any `Y < 2^52` (Shoup 2007, Harvey 2014 Alg. 2 with beta = 2^52). Since `4q < 2^52`, Harvey's
//! lazy ranges hold: forward values stay in `[0, 4q)` between layers, inverse values in `[0, 2q)`.
//!
//! Structure (both directions):
//! - Layers are fused three at a time (radix-8 passes keep 8 vectors in registers and load and
//!   store every word once per three layers), with radix-4/radix-2 passes for the leftovers.
//! - Layers whose butterfly groups are larger than [`BLOCK_LOG`] words run over the whole array;
//!   the rest run block by block so that each block of 2^11 words (16 KiB) stays in L1 while all
//!   of its remaining layers are applied (depth-first order).
//! - The three layers of distance 4, 2 and 1 run inside registers on pairs of 8-word blocks, with
//!   `vpermt2q` moving data between lane arrangements chosen so that every twiddle vector is a
//!   plain load, a 256-bit broadcast or a 128-bit broadcast of the bit-reversed root table.
//! - The forward transform folds its final reduction to `[0, q)` into that in-register pass; the
//!   inverse folds `N^-1` into its last layer (Longa-Naehrig 2016, Alg. 2).

use std::arch::x86_64::*;

use super::{AlignedVec, NttCore};

/// log2 of the block (in words) that the depth-first phase keeps in L1 (2^11 words = 16 KiB).
const BLOCK_LOG: u32 = 11;

/// `2^52 - 1`: IFMA multiplies the low 52 bits of each lane.
const MASK52: u64 = (1 << 52) - 1;

/// Backend-specific twiddle tables: 52-bit Shoup companions of the core's root tables.
#[derive(Debug)]
pub struct Tables {
    /// `floor(roots[k] * 2^52 / q)`, same (bit-reversed) order as `NttCore::roots`.
    fwd_shoup: AlignedVec<u64>,
    /// `floor(inv_roots[k] * 2^52 / q)`, same order as `NttCore::inv_roots`.
    inv_shoup: AlignedVec<u64>,
    /// 52-bit Shoup companion of `N^-1`.
    n_inv_shoup: u64,
    /// 52-bit Shoup companion of `N^-1 * psi^-bitrev(1)`.
    n_inv_w_shoup: u64,
}

/// `floor(w * 2^52 / q)` for `w < q`: the IFMA Shoup companion.
fn shoup52(w: u64, q: u64) -> u64 {
    (((w as u128) << 52) / q as u128) as u64
}

impl Tables {
    /// Builds the tables from the core precomputation.
    pub(crate) fn new(core: &NttCore<u64>) -> Self {
        let q = core.modulus.q();
        let companions = |v: &[u64]| -> AlignedVec<u64> {
            let mut out = AlignedVec::with_capacity(64, v.len());
            for &w in v {
                out.push(shoup52(w, q));
            }
            out
        };
        Self {
            fwd_shoup: companions(&core.roots),
            inv_shoup: companions(&core.inv_roots),
            n_inv_shoup: shoup52(core.n_inv.0, q),
            n_inv_w_shoup: shoup52(core.n_inv_w.0, q),
        }
    }
}

/// Forward NTT in place.
pub(crate) fn forward(core: &NttCore<u64>, t: &Tables, a: &mut [u64]) {
    assert_eq!(a.len(), core.n, "NTT length");
    // SAFETY: tables of this backend are only built after the CPU was checked for
    // avx512f/dq/bw/vl/ifma, and `a.len() == N` was asserted above.
    unsafe { forward_impl(core, t, a) }
}

/// Inverse NTT in place.
pub(crate) fn inverse(core: &NttCore<u64>, t: &Tables, a: &mut [u64]) {
    assert_eq!(a.len(), core.n, "NTT length");
    // SAFETY: as in `forward`: the CPU features were checked when the table was built and the
    // length was asserted.
    unsafe { inverse_impl(core, t, a) }
}

/// Broadcast constants of one modulus.
#[derive(Clone, Copy)]
struct Consts {
    /// `q`.
    q: __m512i,
    /// `2q`.
    q2: __m512i,
    /// `2^52 - q`: multiplying by it and keeping 52 bits subtracts `Q*q` modulo 2^52.
    negq: __m512i,
    /// `2^52 - 1`.
    mask: __m512i,
}

impl Consts {
    /// Broadcasts the constants of `q`.
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn new(q: u64) -> Self {
        Self {
            q: _mm512_set1_epi64(q as i64),
            q2: _mm512_set1_epi64((2 * q) as i64),
            negq: _mm512_set1_epi64(((1u64 << 52) - q) as i64),
            mask: _mm512_set1_epi64(MASK52 as i64),
        }
    }
}

/// `y * w mod q` in `[0, 2q)` for `y < 2^52`, `w < q`, `wp = floor(w * 2^52 / q)`: 52-bit Shoup
/// multiplication (`Q = madd52hi(wp, y)`, `T = lo52(w*y) - lo52(Q*q)`).
#[inline]
#[target_feature(enable = "avx512f,avx512ifma")]
fn mul_shoup_lazy(y: __m512i, w: __m512i, wp: __m512i, c: Consts) -> __m512i {
    let z = _mm512_setzero_si512();
    let qh = _mm512_madd52hi_epu64(z, wp, y);
    let t = _mm512_madd52lo_epu64(z, w, y);
    // lo52(w*y) + lo52(Q*(2^52 - q)) equals T modulo 2^52, and T < 2q < 2^52.
    let t = _mm512_madd52lo_epu64(t, qh, c.negq);
    _mm512_and_si512(t, c.mask)
}

/// `v - m` if `v >= m`, else `v` (unsigned `min(v, v - m)`).
#[inline]
#[target_feature(enable = "avx512f")]
fn csub(v: __m512i, m: __m512i) -> __m512i {
    _mm512_min_epu64(v, _mm512_sub_epi64(v, m))
}

/// Harvey's lazy Cooley-Tukey butterfly: inputs in `[0, 4q)`, outputs
/// `(x + w*y, x - w*y + 2q)` in `[0, 4q)` with `x` first brought into `[0, 2q)`.
#[inline]
#[target_feature(enable = "avx512f,avx512ifma")]
fn ct(x: &mut __m512i, y: &mut __m512i, w: __m512i, wp: __m512i, c: Consts) {
    let u = csub(*x, c.q2);
    let t = mul_shoup_lazy(*y, w, wp, c);
    *x = _mm512_add_epi64(u, t);
    *y = _mm512_sub_epi64(_mm512_add_epi64(u, c.q2), t);
}

/// Harvey's lazy Gentleman-Sande butterfly: inputs in `[0, 2q)`, outputs
/// `(x + y, (x - y + 2q) * w)` in `[0, 2q)`.
#[inline]
#[target_feature(enable = "avx512f,avx512ifma")]
fn gs(x: &mut __m512i, y: &mut __m512i, w: __m512i, wp: __m512i, c: Consts) {
    let s = csub(_mm512_add_epi64(*x, *y), c.q2);
    let d = _mm512_sub_epi64(_mm512_add_epi64(*x, c.q2), *y);
    *x = s;
    *y = mul_shoup_lazy(d, w, wp, c);
}

/// The last inverse butterfly with `N^-1` folded in: `((x + y) * N^-1, (x - y) * N^-1 * w)`,
/// fully reduced. Inputs in `[0, 2q)`, so both multiplicands are below `4q < 2^52`.
#[inline]
#[target_feature(enable = "avx512f,avx512ifma")]
fn gs_last(
    x: &mut __m512i,
    y: &mut __m512i,
    ni: (__m512i, __m512i),
    nw: (__m512i, __m512i),
    c: Consts,
) {
    let s = _mm512_add_epi64(*x, *y);
    let d = _mm512_sub_epi64(_mm512_add_epi64(*x, c.q2), *y);
    *x = csub(mul_shoup_lazy(s, ni.0, ni.1, c), c.q);
    *y = csub(mul_shoup_lazy(d, nw.0, nw.1, c), c.q);
}

/// Unaligned load of 8 words.
///
/// # Safety
/// `p..p+8` must be readable.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn ld(p: *const u64) -> __m512i {
    // SAFETY: the caller guarantees 8 readable words at `p`; loadu has no alignment requirement.
    unsafe { _mm512_loadu_epi64(p as *const i64) }
}

/// Unaligned store of 8 words.
///
/// # Safety
/// `p..p+8` must be writable.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn st(p: *mut u64, v: __m512i) {
    // SAFETY: the caller guarantees 8 writable words at `p`; storeu has no alignment requirement.
    unsafe { _mm512_storeu_epi64(p as *mut i64, v) }
}

/// Broadcast of one word.
///
/// # Safety
/// `p` must be readable.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn bc(p: *const u64) -> __m512i {
    // SAFETY: the caller guarantees `p` is readable.
    _mm512_set1_epi64(unsafe { p.read() } as i64)
}

/// Twiddle and companion broadcast from index `k` of the two tables.
///
/// # Safety
/// `k` must be in bounds of both tables.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn tw(w: *const u64, wp: *const u64, k: usize) -> (__m512i, __m512i) {
    // SAFETY: the caller guarantees `k` is in bounds of both tables.
    unsafe { (bc(w.add(k)), bc(wp.add(k))) }
}

// Lane arrangements of 16 words (two 8-word blocks b = 0, 1 with elements e = e2 e1 e0) over two
// registers r = 0, 1 and lanes l = l2 l1 l0. The butterfly bit of each layer is the register bit,
// and the other bits are placed so that the twiddle of lane l sits at a contiguous table offset:
// - NAT (memory order): r = b, l = e.
// - A4 (distance 4, twiddle index b): r = e2, l = (e1, e0, b) -> 128-bit broadcast of 2 roots.
// - A2 (distance 2, index 2b + e2): r = e1, l = (e0, b, e2) -> 256-bit broadcast of 4 roots.
// - A1 (distance 1, index 4b + 2e2 + e1): r = e0, l = (b, e2, e1) -> plain load of 8 roots.

/// Memory order.
const NAT: u8 = 0;
/// Arrangement for the distance-4 layer.
const A4: u8 = 1;
/// Arrangement for the distance-2 layer.
const A2: u8 = 2;
/// Arrangement for the distance-1 layer.
const A1: u8 = 3;

/// The element (`8b + e`) that arrangement `arr` keeps in register `r`, lane `l`.
const fn elem(arr: u8, r: usize, l: usize) -> usize {
    let (l2, l1, l0) = (l >> 2, (l >> 1) & 1, l & 1);
    match arr {
        NAT => 8 * r + l,
        A4 => 8 * l0 + 4 * r + 2 * l2 + l1,
        A2 => 8 * l1 + 4 * l0 + 2 * r + l2,
        _ => 8 * l2 + 4 * l1 + 2 * l0 + r,
    }
}

/// `vpermt2q` indices that build register `r_to` of arrangement `to` from the two registers of
/// arrangement `from`.
const fn perm(from: u8, to: u8, r_to: usize) -> [i64; 8] {
    let mut idx = [0i64; 8];
    let mut l = 0;
    while l < 8 {
        let e = elem(to, r_to, l);
        let mut r = 0;
        while r < 2 {
            let mut s = 0;
            while s < 8 {
                if elem(from, r, s) == e {
                    idx[l] = (8 * r + s) as i64;
                }
                s += 1;
            }
            r += 1;
        }
        l += 1;
    }
    idx
}

/// Index vectors of one arrangement change, for both destination registers.
const fn perm_pair(from: u8, to: u8) -> [[i64; 8]; 2] {
    [perm(from, to, 0), perm(from, to, 1)]
}

/// Forward order: NAT -> A4 -> A2 -> A1 -> NAT.
const FWD_PERMS: [[[i64; 8]; 2]; 4] = [
    perm_pair(NAT, A4),
    perm_pair(A4, A2),
    perm_pair(A2, A1),
    perm_pair(A1, NAT),
];
/// Inverse order: NAT -> A1 -> A2 -> A4 -> NAT.
const INV_PERMS: [[[i64; 8]; 2]; 4] = [
    perm_pair(NAT, A1),
    perm_pair(A1, A2),
    perm_pair(A2, A4),
    perm_pair(A4, NAT),
];

/// A loaded pair of permutation index vectors.
#[derive(Clone, Copy)]
struct Perm(__m512i, __m512i);

impl Perm {
    /// Loads the index vectors.
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn new(p: &[[i64; 8]; 2]) -> Self {
        let v = |a: &[i64; 8]| _mm512_setr_epi64(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7]);
        Self(v(&p[0]), v(&p[1]))
    }

    /// Applies the arrangement change to the register pair.
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn apply(self, x: &mut __m512i, y: &mut __m512i) {
        let nx = _mm512_permutex2var_epi64(*x, self.0, *y);
        let ny = _mm512_permutex2var_epi64(*x, self.1, *y);
        *x = nx;
        *y = ny;
    }
}

/// The twiddles of one pair of blocks for the distance 4, 2, 1 layers (first twiddle index `kk`
/// at distance 4, so `2kk` at distance 2 and `4kk` at distance 1).
///
/// # Safety
/// `4kk + 8` must be in bounds of both tables.
#[inline]
#[target_feature(enable = "avx512f,avx512dq")]
unsafe fn small_twiddles(w: *const u64, wp: *const u64, kk: usize) -> [(__m512i, __m512i); 3] {
    // SAFETY: the caller guarantees indices up to 4kk + 8 are in bounds; kk + 2 <= 2kk + 4 <= 4kk + 8.
    unsafe {
        let b2 = |p: *const u64| _mm512_broadcast_i64x2(_mm_loadu_si128(p as *const __m128i));
        let b4 = |p: *const u64| _mm512_broadcast_i64x4(_mm256_loadu_si256(p as *const __m256i));
        [
            (b2(w.add(kk)), b2(wp.add(kk))),
            (b4(w.add(2 * kk)), b4(wp.add(2 * kk))),
            (ld(w.add(4 * kk)), ld(wp.add(4 * kk))),
        ]
    }
}

/// One pair of 8-word blocks through the forward distance-4, 2, 1 layers, then reduced to
/// `[0, q)`.
#[inline]
#[target_feature(enable = "avx512f,avx512ifma")]
fn fwd_pair(
    x: &mut __m512i,
    y: &mut __m512i,
    t: &[(__m512i, __m512i); 3],
    p: &[Perm; 4],
    c: Consts,
) {
    p[0].apply(x, y);
    ct(x, y, t[0].0, t[0].1, c);
    p[1].apply(x, y);
    ct(x, y, t[1].0, t[1].1, c);
    p[2].apply(x, y);
    ct(x, y, t[2].0, t[2].1, c);
    // Fold the final reduction [0, 4q) -> [0, q) into this pass.
    *x = csub(csub(*x, c.q2), c.q);
    *y = csub(csub(*y, c.q2), c.q);
    p[3].apply(x, y);
}

/// One pair of 8-word blocks through the inverse distance-1, 2, 4 layers.
#[inline]
#[target_feature(enable = "avx512f,avx512ifma")]
fn inv_pair(
    x: &mut __m512i,
    y: &mut __m512i,
    t: &[(__m512i, __m512i); 3],
    p: &[Perm; 4],
    c: Consts,
) {
    p[0].apply(x, y);
    gs(x, y, t[2].0, t[2].1, c);
    p[1].apply(x, y);
    gs(x, y, t[1].0, t[1].1, c);
    p[2].apply(x, y);
    gs(x, y, t[0].0, t[0].1, c);
    p[3].apply(x, y);
}

/// The in-register distance 4, 2, 1 layers over `len` words (a multiple of 16) at `a`, two
/// pairs of blocks per step for instruction-level parallelism. `k0 = N/8 + (offset of a)/8` is the
/// distance-4 twiddle index of the first block.
///
/// # Safety
/// `a..a+len` writable; twiddle tables of length N covering the indices used.
#[inline]
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx512ifma")]
unsafe fn small_layers<const FWD: bool>(
    a: *mut u64,
    len: usize,
    k0: usize,
    w: *const u64,
    wp: *const u64,
    c: Consts,
) {
    let perms = if FWD { &FWD_PERMS } else { &INV_PERMS };
    let p = [
        Perm::new(&perms[0]),
        Perm::new(&perms[1]),
        Perm::new(&perms[2]),
        Perm::new(&perms[3]),
    ];
    let run = |x: &mut __m512i, y: &mut __m512i, t: &[(__m512i, __m512i); 3]| {
        if FWD {
            fwd_pair(x, y, t, &p, c)
        } else {
            inv_pair(x, y, t, &p, c)
        }
    };
    let pairs = len / 16;
    let mut pair = 0;
    while pair + 2 <= pairs {
        // SAFETY: pair + 2 <= len/16 keeps the 32 words in `a..a+len`; the block indices
        // k0 + 2*pair .. k0 + 2*pair + 3 are below N/4, so 4*(k0 + 2*pair + 2) + 8 <= N.
        unsafe {
            let base = a.add(16 * pair);
            let ta = small_twiddles(w, wp, k0 + 2 * pair);
            let tb = small_twiddles(w, wp, k0 + 2 * pair + 2);
            let (mut x0, mut y0) = (ld(base), ld(base.add(8)));
            let (mut x1, mut y1) = (ld(base.add(16)), ld(base.add(24)));
            run(&mut x0, &mut y0, &ta);
            run(&mut x1, &mut y1, &tb);
            st(base, x0);
            st(base.add(8), y0);
            st(base.add(16), x1);
            st(base.add(24), y1);
        }
        pair += 2;
    }
    if pair < pairs {
        // SAFETY: as above for the single remaining pair.
        unsafe {
            let base = a.add(16 * pair);
            let t = small_twiddles(w, wp, k0 + 2 * pair);
            let (mut x, mut y) = (ld(base), ld(base.add(8)));
            run(&mut x, &mut y, &t);
            st(base, x);
            st(base.add(8), y);
        }
    }
}

/// Three forward layers of distances `g`, `g/2`, `g/4` (`g >= 32`) over `len` words at `a` (a
/// multiple of `2g`); `k0` is the twiddle index of the first group at distance `g`.
///
/// # Safety
/// `a..a+len` writable; indices `4(k0 + len/(2g))` within the tables.
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx512ifma")]
unsafe fn fwd_r8(
    a: *mut u64,
    len: usize,
    g: usize,
    k0: usize,
    w: *const u64,
    wp: *const u64,
    c: Consts,
) {
    let d = g / 4;
    for i in 0..len / (2 * g) {
        // SAFETY: group i spans a[2gi .. 2g(i+1)] within len; twiddle indices below 4(k0+i+1).
        unsafe {
            let kk = k0 + i;
            let t1 = tw(w, wp, kk);
            let (t2a, t2b) = (tw(w, wp, 2 * kk), tw(w, wp, 2 * kk + 1));
            let t3 = [
                tw(w, wp, 4 * kk),
                tw(w, wp, 4 * kk + 1),
                tw(w, wp, 4 * kk + 2),
                tw(w, wp, 4 * kk + 3),
            ];
            let base = a.add(2 * g * i);
            let mut j = 0;
            while j < d {
                let p = base.add(j);
                let mut x = [
                    ld(p),
                    ld(p.add(d)),
                    ld(p.add(2 * d)),
                    ld(p.add(3 * d)),
                    ld(p.add(4 * d)),
                    ld(p.add(5 * d)),
                    ld(p.add(6 * d)),
                    ld(p.add(7 * d)),
                ];
                let [x0, x1, x2, x3, x4, x5, x6, x7] = &mut x;
                ct(x0, x4, t1.0, t1.1, c);
                ct(x1, x5, t1.0, t1.1, c);
                ct(x2, x6, t1.0, t1.1, c);
                ct(x3, x7, t1.0, t1.1, c);
                ct(x0, x2, t2a.0, t2a.1, c);
                ct(x1, x3, t2a.0, t2a.1, c);
                ct(x4, x6, t2b.0, t2b.1, c);
                ct(x5, x7, t2b.0, t2b.1, c);
                ct(x0, x1, t3[0].0, t3[0].1, c);
                ct(x2, x3, t3[1].0, t3[1].1, c);
                ct(x4, x5, t3[2].0, t3[2].1, c);
                ct(x6, x7, t3[3].0, t3[3].1, c);
                for (r, v) in x.iter().enumerate() {
                    st(p.add(r * d), *v);
                }
                j += 8;
            }
        }
    }
}

/// Two forward layers of distances `g`, `g/2` (`g >= 16`); otherwise as [`fwd_r8`].
///
/// # Safety
/// As [`fwd_r8`] with indices below `2(k0 + len/(2g))`.
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx512ifma")]
unsafe fn fwd_r4(
    a: *mut u64,
    len: usize,
    g: usize,
    k0: usize,
    w: *const u64,
    wp: *const u64,
    c: Consts,
) {
    let d = g / 2;
    for i in 0..len / (2 * g) {
        // SAFETY: group i spans a[2gi .. 2g(i+1)] within len; twiddle indices below 2(k0+i+1).
        unsafe {
            let kk = k0 + i;
            let t1 = tw(w, wp, kk);
            let (t2a, t2b) = (tw(w, wp, 2 * kk), tw(w, wp, 2 * kk + 1));
            let base = a.add(2 * g * i);
            let mut j = 0;
            while j < d {
                let p = base.add(j);
                let mut x = [ld(p), ld(p.add(d)), ld(p.add(2 * d)), ld(p.add(3 * d))];
                let [x0, x1, x2, x3] = &mut x;
                ct(x0, x2, t1.0, t1.1, c);
                ct(x1, x3, t1.0, t1.1, c);
                ct(x0, x1, t2a.0, t2a.1, c);
                ct(x2, x3, t2b.0, t2b.1, c);
                for (r, v) in x.iter().enumerate() {
                    st(p.add(r * d), *v);
                }
                j += 8;
            }
        }
    }
}

/// One forward layer of distance `g` (`g >= 8`); otherwise as [`fwd_r8`].
///
/// # Safety
/// As [`fwd_r8`] with indices below `k0 + len/(2g)`.
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx512ifma")]
unsafe fn fwd_r2(
    a: *mut u64,
    len: usize,
    g: usize,
    k0: usize,
    w: *const u64,
    wp: *const u64,
    c: Consts,
) {
    for i in 0..len / (2 * g) {
        // SAFETY: group i spans a[2gi .. 2g(i+1)] within len; twiddle index k0 + i in the table.
        unsafe {
            let t1 = tw(w, wp, k0 + i);
            let base = a.add(2 * g * i);
            let mut j = 0;
            while j < g {
                let p = base.add(j);
                let (mut x0, mut x1) = (ld(p), ld(p.add(g)));
                ct(&mut x0, &mut x1, t1.0, t1.1, c);
                st(p, x0);
                st(p.add(g), x1);
                j += 8;
            }
        }
    }
}

/// Broadcast `(N^-1, companion)` and `(N^-1 * psi^-bitrev(1), companion)` for the last inverse
/// layer.
#[derive(Clone, Copy)]
struct NInv {
    /// `N^-1` and its 52-bit Shoup companion.
    ni: (__m512i, __m512i),
    /// `N^-1 * psi^-bitrev(1)` and its 52-bit Shoup companion.
    nw: (__m512i, __m512i),
}

/// The coarsest butterfly of an inverse pass: table twiddle `t`, or with `LAST` the transform's
/// last layer with `N^-1` folded in.
#[inline]
#[target_feature(enable = "avx512f,avx512ifma")]
fn gs_top<const LAST: bool>(
    x: &mut __m512i,
    y: &mut __m512i,
    t: (__m512i, __m512i),
    l: &NInv,
    c: Consts,
) {
    if LAST {
        gs_last(x, y, l.ni, l.nw, c)
    } else {
        gs(x, y, t.0, t.1, c)
    }
}

/// Three inverse layers of distances `g`, `2g`, `4g` (`g >= 8`) over `len` words at `a` (a
/// multiple of `8g`); `k0` is the twiddle index of the first unit at distance `4g`. With
/// `LAST` the distance-`4g` layer is the transform's last (`8g = N`).
///
/// # Safety
/// `a..a+len` writable; indices `4(k0 + len/(8g))` within the tables.
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx512ifma")]
unsafe fn inv_r8<const LAST: bool>(
    a: *mut u64,
    len: usize,
    g: usize,
    k0: usize,
    w: *const u64,
    wp: *const u64,
    l: &NInv,
    c: Consts,
) {
    for u in 0..len / (8 * g) {
        // SAFETY: unit u spans a[8gu .. 8g(u+1)] within len; twiddle indices below 4(k0+u+1).
        unsafe {
            let kk = k0 + u;
            let t3 = tw(w, wp, kk);
            let (t2a, t2b) = (tw(w, wp, 2 * kk), tw(w, wp, 2 * kk + 1));
            let t1 = [
                tw(w, wp, 4 * kk),
                tw(w, wp, 4 * kk + 1),
                tw(w, wp, 4 * kk + 2),
                tw(w, wp, 4 * kk + 3),
            ];
            let base = a.add(8 * g * u);
            let mut j = 0;
            while j < g {
                let p = base.add(j);
                let mut x = [
                    ld(p),
                    ld(p.add(g)),
                    ld(p.add(2 * g)),
                    ld(p.add(3 * g)),
                    ld(p.add(4 * g)),
                    ld(p.add(5 * g)),
                    ld(p.add(6 * g)),
                    ld(p.add(7 * g)),
                ];
                let [x0, x1, x2, x3, x4, x5, x6, x7] = &mut x;
                gs(x0, x1, t1[0].0, t1[0].1, c);
                gs(x2, x3, t1[1].0, t1[1].1, c);
                gs(x4, x5, t1[2].0, t1[2].1, c);
                gs(x6, x7, t1[3].0, t1[3].1, c);
                gs(x0, x2, t2a.0, t2a.1, c);
                gs(x1, x3, t2a.0, t2a.1, c);
                gs(x4, x6, t2b.0, t2b.1, c);
                gs(x5, x7, t2b.0, t2b.1, c);
                gs_top::<LAST>(x0, x4, t3, l, c);
                gs_top::<LAST>(x1, x5, t3, l, c);
                gs_top::<LAST>(x2, x6, t3, l, c);
                gs_top::<LAST>(x3, x7, t3, l, c);
                for (r, v) in x.iter().enumerate() {
                    st(p.add(r * g), *v);
                }
                j += 8;
            }
        }
    }
}

/// Two inverse layers of distances `g`, `2g`; otherwise as [`inv_r8`].
///
/// # Safety
/// As [`inv_r8`] with indices below `2(k0 + len/(4g))`.
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx512ifma")]
unsafe fn inv_r4<const LAST: bool>(
    a: *mut u64,
    len: usize,
    g: usize,
    k0: usize,
    w: *const u64,
    wp: *const u64,
    l: &NInv,
    c: Consts,
) {
    for u in 0..len / (4 * g) {
        // SAFETY: unit u spans a[4gu .. 4g(u+1)] within len; twiddle indices below 2(k0+u+1).
        unsafe {
            let kk = k0 + u;
            let t2 = tw(w, wp, kk);
            let (t1a, t1b) = (tw(w, wp, 2 * kk), tw(w, wp, 2 * kk + 1));
            let base = a.add(4 * g * u);
            let mut j = 0;
            while j < g {
                let p = base.add(j);
                let mut x = [ld(p), ld(p.add(g)), ld(p.add(2 * g)), ld(p.add(3 * g))];
                let [x0, x1, x2, x3] = &mut x;
                gs(x0, x1, t1a.0, t1a.1, c);
                gs(x2, x3, t1b.0, t1b.1, c);
                gs_top::<LAST>(x0, x2, t2, l, c);
                gs_top::<LAST>(x1, x3, t2, l, c);
                for (r, v) in x.iter().enumerate() {
                    st(p.add(r * g), *v);
                }
                j += 8;
            }
        }
    }
}

/// One inverse layer of distance `g`; otherwise as [`inv_r8`].
///
/// # Safety
/// As [`inv_r8`] with indices below `k0 + len/(2g)`.
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx512ifma")]
unsafe fn inv_r2<const LAST: bool>(
    a: *mut u64,
    len: usize,
    g: usize,
    k0: usize,
    w: *const u64,
    wp: *const u64,
    l: &NInv,
    c: Consts,
) {
    for u in 0..len / (2 * g) {
        // SAFETY: unit u spans a[2gu .. 2g(u+1)] within len; twiddle index k0 + u in the table.
        unsafe {
            let t1 = tw(w, wp, k0 + u);
            let base = a.add(2 * g * u);
            let mut j = 0;
            while j < g {
                let p = base.add(j);
                let (mut x0, mut x1) = (ld(p), ld(p.add(g)));
                gs_top::<LAST>(&mut x0, &mut x1, t1, l, c);
                st(p, x0);
                st(p.add(g), x1);
                j += 8;
            }
        }
    }
}

/// How many layers the next fused pass takes out of `left`: radix-8 where possible, two
/// radix-4 passes instead of radix-8 + radix-2 for four layers.
fn pass_layers(left: u32) -> u32 {
    match left {
        0..=2 => left,
        4 => 2,
        _ => 3,
    }
}

/// Forward layers of distances `g`, `g/2`, ... (`count` layers, all distances >= 8) over
/// `len` words at `a`, whose first group at distance `g` has twiddle index `k0`.
///
/// # Safety
/// `a..a+len` writable with `len` a multiple of `2g`; tables cover the indices.
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx512ifma")]
unsafe fn fwd_layers(
    a: *mut u64,
    len: usize,
    mut g: usize,
    mut k0: usize,
    mut count: u32,
    tabs: (*const u64, *const u64),
    c: Consts,
) {
    let (w, wp) = tabs;
    while count > 0 {
        let r = pass_layers(count);
        // SAFETY: forwarded from the caller; each pass needs distances >= 8 * 2^(r-1), which holds
        // because the smallest distance of the pass, g / 2^(r-1), is at least 8.
        unsafe {
            match r {
                3 => fwd_r8(a, len, g, k0, w, wp, c),
                2 => fwd_r4(a, len, g, k0, w, wp, c),
                _ => fwd_r2(a, len, g, k0, w, wp, c),
            }
        }
        g >>= r;
        k0 <<= r;
        count -= r;
    }
}

/// Inverse layers of distances `g`, `2g`, ... (`count` layers, `g >= 8`) over `len` words at `a`
/// starting at word `off` of an `n`-word transform.
///
/// # Safety
/// `a..a+len` writable with `len` a multiple of `g * 2^count`; tables cover the indices.
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx512ifma")]
unsafe fn inv_layers(
    a: *mut u64,
    len: usize,
    off: usize,
    n: usize,
    mut g: usize,
    mut count: u32,
    tabs: (*const u64, *const u64),
    l: &NInv,
    c: Consts,
) {
    let (w, wp) = tabs;
    while count > 0 {
        let r = pass_layers(count);
        let unit = g << r;
        let k0 = n / unit + off / unit;
        // SAFETY: forwarded from the caller; g >= 8 for every pass.
        unsafe {
            match r {
                3 if unit == n => inv_r8::<true>(a, len, g, k0, w, wp, l, c),
                3 => inv_r8::<false>(a, len, g, k0, w, wp, l, c),
                2 if unit == n => inv_r4::<true>(a, len, g, k0, w, wp, l, c),
                2 => inv_r4::<false>(a, len, g, k0, w, wp, l, c),
                1 if unit == n => inv_r2::<true>(a, len, g, k0, w, wp, l, c),
                _ => inv_r2::<false>(a, len, g, k0, w, wp, l, c),
            }
        }
        g = unit;
        count -= r;
    }
}

/// Forward transform: layers with groups larger than a block over the whole array, then each
/// block's remaining layers while it sits in L1.
///
/// # Safety
/// CPU has avx512f/dq/bw/vl/ifma; `a.len() == core.n`.
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx512ifma")]
unsafe fn forward_impl(core: &NttCore<u64>, t: &Tables, a: &mut [u64]) {
    let n = core.n;
    let log_n = core.log_n;
    let c = Consts::new(core.modulus.q());
    let tabs = (core.roots.as_ptr(), t.fwd_shoup.as_ptr());
    let lb = BLOCK_LOG.min(log_n);
    let block = 1usize << lb;
    let p = a.as_mut_ptr();
    // SAFETY: p..p+n is `a`; every pass stays inside the range it is given, and twiddle indices
    // stay below N (the tables' length) because a group at distance g has index < N/(2g) * 2.
    unsafe {
        fwd_layers(p, n, n / 2, 1, log_n - lb, tabs, c);
        for s in (0..n).step_by(block) {
            let blk = p.add(s);
            fwd_layers(
                blk,
                block,
                block / 2,
                n / block + s / block,
                lb - 3,
                tabs,
                c,
            );
            small_layers::<true>(blk, block, n / 8 + s / 8, tabs.0, tabs.1, c);
        }
    }
}

/// Inverse transform: each block's first layers while it sits in L1, then the layers with
/// groups larger than a block over the whole array, `N^-1` folded into the last layer.
///
/// # Safety
/// CPU has avx512f/dq/bw/vl/ifma; `a.len() == core.n`.
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx512ifma")]
unsafe fn inverse_impl(core: &NttCore<u64>, t: &Tables, a: &mut [u64]) {
    let n = core.n;
    let log_n = core.log_n;
    let c = Consts::new(core.modulus.q());
    let tabs = (core.inv_roots.as_ptr(), t.inv_shoup.as_ptr());
    let last = NInv {
        ni: (
            _mm512_set1_epi64(core.n_inv.0 as i64),
            _mm512_set1_epi64(t.n_inv_shoup as i64),
        ),
        nw: (
            _mm512_set1_epi64(core.n_inv_w.0 as i64),
            _mm512_set1_epi64(t.n_inv_w_shoup as i64),
        ),
    };
    let lb = BLOCK_LOG.min(log_n);
    let block = 1usize << lb;
    let p = a.as_mut_ptr();
    // SAFETY: as in `forward_impl`.
    unsafe {
        for s in (0..n).step_by(block) {
            let blk = p.add(s);
            small_layers::<false>(blk, block, n / 8 + s / 8, tabs.0, tabs.1, c);
            inv_layers(blk, block, s, n, 8, lb - 3, tabs, &last, c);
        }
        inv_layers(p, n, 0, n, block, log_n - lb, tabs, &last, c);
    }
}
