//! AVX-512 IFMA negacyclic NTT for 64-bit words and primes below 2^50.
//!
//! Multiplication by a twiddle `W` is HEXL-style 52-bit Shoup multiplication on the IFMA units:
//! with `W' = floor(W * 2^52 / q)`, `Q = madd52hi(W', Y)` and `T = lo52(W*Y) - lo52(Q*q)` (the
//! subtraction done as `madd52lo(Q, 2^52 - q)` and a 52-bit mask), `T = W*Y mod q` in `[0, 2q)` for
//! any `Y < 2^52` (Shoup 2007, Harvey 2014 Alg. 2 with beta = 2^52). Since `4q < 2^52`, Harvey's
//! lazy ranges hold: forward values stay in `[0, 4q)` between layers, inverse values in `[0, 2q)`.
//!
//! Structure (both directions):
//! - The passes, blocking and pass planning are the shared skeleton's ([`super::skeleton`]):
//!   radix-8 passes keep 8 vectors in registers and load and store every word once per three
//!   layers; the layers of each 2^11-word (16 KiB) block run while it sits in L1.
//! - The three layers of distance 4, 2 and 1 run inside registers on pairs of 8-word blocks, with
//!   `vpermt2q` moving data between lane arrangements chosen so that every twiddle vector is a
//!   plain load, a 256-bit broadcast or a 128-bit broadcast of the bit-reversed root table.
//! - The forward transform folds its final reduction to `[0, q)` into that in-register pass; the
//!   inverse folds `N^-1` into its last layer (Longa-Naehrig 2016, Alg. 2).

use std::arch::x86_64::*;

use super::skeleton::{self, Kernel};
use super::{AlignedVec, NttCore};

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
            let mut out = AlignedVec::with_capacity(v.len());
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
    unsafe { transform::<true>(core, t, a) }
}

/// Inverse NTT in place.
pub(crate) fn inverse(core: &NttCore<u64>, t: &Tables, a: &mut [u64]) {
    assert_eq!(a.len(), core.n, "NTT length");
    // SAFETY: as in `forward`: the CPU features were checked when the table was built and the
    // length was asserted.
    unsafe { transform::<false>(core, t, a) }
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
/// `[0, q)` (`FWD`), or through the inverse distance-1, 2, 4 layers.
#[inline]
#[target_feature(enable = "avx512f,avx512ifma")]
fn pair<const FWD: bool>(
    x: &mut __m512i,
    y: &mut __m512i,
    t: &[(__m512i, __m512i); 3],
    p: &[Perm; 4],
    c: Consts,
) {
    for l in 0..3 {
        p[l].apply(x, y);
        if FWD {
            ct(x, y, t[l].0, t[l].1, c);
        } else {
            gs(x, y, t[2 - l].0, t[2 - l].1, c);
        }
    }
    if FWD {
        // Fold the final reduction [0, 4q) -> [0, q) into this pass.
        *x = csub(csub(*x, c.q2), c.q);
        *y = csub(csub(*y, c.q2), c.q);
    }
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
    let run =
        |x: &mut __m512i, y: &mut __m512i, t: &[(__m512i, __m512i); 3]| pair::<FWD>(x, y, t, &p, c);
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

/// Full forward (`FWD`) or inverse transform through the shared skeleton.
///
/// # Safety
/// CPU has avx512f/dq/bw/vl/ifma; `a.len() == core.n`.
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx512ifma")]
unsafe fn transform<const FWD: bool>(core: &NttCore<u64>, t: &Tables, a: &mut [u64]) {
    let k = Kern::new(core, t);
    // SAFETY: the features are enabled here (caller) and `a` holds the N words.
    unsafe {
        if FWD {
            skeleton::forward(&k, a.as_mut_ptr())
        } else {
            skeleton::inverse(&k, a.as_mut_ptr())
        }
    }
}

/// The IFMA butterflies and tail for one table.
struct Kern<'a> {
    /// The table.
    core: &'a NttCore<u64>,
    /// The 52-bit Shoup companions.
    t: &'a Tables,
    /// Constants of the modulus.
    c: Consts,
    /// `N^-1` and its companion (last inverse layer, sum branch).
    ni: (__m512i, __m512i),
    /// `N^-1 psi^-bitrev(1)` and its companion (last inverse layer, difference branch).
    nw: (__m512i, __m512i),
}

impl<'a> Kern<'a> {
    /// Broadcasts the constants of `core`.
    #[inline]
    #[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx512ifma")]
    fn new(core: &'a NttCore<u64>, t: &'a Tables) -> Self {
        let b = |x: u64| _mm512_set1_epi64(x as i64);
        Self {
            core,
            t,
            c: Consts::new(core.modulus.q()),
            ni: (b(core.n_inv.0), b(t.n_inv_shoup)),
            nw: (b(core.n_inv_w.0), b(t.n_inv_w_shoup)),
        }
    }
}

impl Kernel for Kern<'_> {
    type W = u64;
    type V = __m512i;
    type Tw = (__m512i, __m512i);
    const LANES: usize = 8;
    const TAIL_LOG: u32 = 3;
    const BLOCK_LOG: u32 = 11;
    const MAX_PASS: u32 = 3;
    const WIDE: bool = false;

    skeleton::plumbing!(
        "avx512f,avx512dq,avx512bw,avx512vl,avx512ifma",
        u64,
        __m512i,
        zero = <crate::simd::avx512::Avx512 as crate::simd::Prim64>::zero,
        load = ld,
        store = st
    );

    #[inline]
    #[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx512ifma")]
    unsafe fn tw<const FWD: bool>(&self, idx: usize) -> (__m512i, __m512i) {
        let b = |x: u64| _mm512_set1_epi64(x as i64);
        if FWD {
            (b(self.core.roots[idx]), b(self.t.fwd_shoup[idx]))
        } else {
            (b(self.core.inv_roots[idx]), b(self.t.inv_shoup[idx]))
        }
    }

    #[inline]
    #[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx512ifma")]
    unsafe fn bfs<const FWD: bool, const M: usize>(
        &self,
        mut x: [__m512i; M],
        mut y: [__m512i; M],
        t: [(__m512i, __m512i); M],
        edge: bool,
    ) -> ([__m512i; M], [__m512i; M]) {
        for i in 0..M {
            if FWD {
                ct(&mut x[i], &mut y[i], t[i].0, t[i].1, self.c);
            } else if edge {
                gs_last(&mut x[i], &mut y[i], self.ni, self.nw, self.c);
            } else {
                gs(&mut x[i], &mut y[i], t[i].0, t[i].1, self.c);
            }
        }
        (x, y)
    }

    #[inline]
    #[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx512ifma")]
    unsafe fn tail<const FWD: bool>(&self, a: *mut u64, base: usize, len: usize) {
        let (n, c) = (self.core.n, self.core);
        let (w, wp) = if FWD {
            (c.roots.as_ptr(), self.t.fwd_shoup.as_ptr())
        } else {
            (c.inv_roots.as_ptr(), self.t.inv_shoup.as_ptr())
        };
        // SAFETY: forwarded from the caller: `a[base..base+len]` lies in the N words, `len` is a
        // multiple of 16, and the tables hold N entries.
        unsafe { small_layers::<FWD>(a.add(base), len, n / 8 + base / 8, w, wp, self.c) }
    }
}
