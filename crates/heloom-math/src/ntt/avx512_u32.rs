//! AVX-512 negacyclic NTT for 32-bit words: 16 lanes per register (Nishi et al.: primes below
//! 2^32 double the SIMD lanes of the 64-bit path and halve its memory traffic).
//!
//! Structure (forward; the inverse mirrors it):
//! - Butterflies are Harvey's (2014) lazy Cooley-Tukey / Gentleman-Sande butterflies with Shoup
//!   twiddle products: `hi32(x * w')` from two `vpmuludq` (even and odd lanes), the low words
//!   from `vpmulld`. Conditional subtractions are `vpminud(x, x - b)`.
//! - For `q < 2^30` values live in Harvey's ranges (`[0, 4q)` forward, `[0, 2q)` inverse); for
//!   31-bit primes `4q` does not fit a word, so values stay below `2q` with one more conditional
//!   subtraction per butterfly (const generic `L4`).
//! - Layers with gap >= 32 run as radix-2^K passes (K <= 3 layers per memory pass, twiddles
//!   broadcast in registers), depth first: the top layers sweep the whole array, then each
//!   16 KiB block (L1-resident) runs all its remaining layers before the next block is touched.
//! - The last five layers (gaps 16, 8, 4, 2, 1) run on two registers (32 words) per chunk: gap 16
//!   is a plain register butterfly; before each smaller gap one `vpermt2d` pair regroups the 32
//!   words so the butterfly partners sit in the two registers, with per-lane twiddles loaded from
//!   the bit-reversed root table by broadcast loads. The final full reduction is folded into
//!   this pass.

use core::arch::x86_64::*;

use super::skeleton::Kernel;
use super::{AlignedVec, NttCore};

/// Words per register.
const LANES: usize = 16;
/// Layers done by the register-resident tail (gaps 16..1 on 32-word chunks).
const TAIL_LOG: u32 = 5;
/// log2 of the depth-first block (4096 words = 16 KiB, half the L1 data cache).
const BLOCK_LOG: u32 = 12;

/// Words of expanded tail twiddles per 32-word chunk: roots and companions (16 lanes each) of
/// tail layers 3, 2 and 1.
const TAIL_TW: usize = 6 * LANES;

/// Backend-specific twiddle tables: the per-lane twiddle vectors of tail layers 3, 2, 1 (gaps
/// 8, 4, 2), laid out chunk after chunk so that each is one aligned load.
#[derive(Debug)]
pub struct Tables {
    /// Forward roots: per chunk `[w3, w3', w2, w2', w1, w1']`, 16 lanes each.
    fwd: AlignedVec<u32>,
    /// Inverse roots, same layout.
    inv: AlignedVec<u32>,
}

impl Tables {
    /// Builds the tables from the core precomputation.
    pub(crate) fn new(core: &NttCore<u32>) -> Self {
        let expand = |w: &[u32], ws: &[u32]| {
            let n = core.n;
            let chunks = n / (2 * LANES);
            let mut out = AlignedVec::with_capacity(64, chunks * TAIL_TW);
            for c in 0..chunks {
                let s = c * 2 * LANES;
                for k in [3u32, 2, 1] {
                    // In tail layout k (see `swap`) lane l holds a pair of group l >> k.
                    let idx = |l: usize| (n >> (k + 1)) + (s >> (k + 1)) + (l >> k);
                    for l in 0..LANES {
                        out.push(w[idx(l)]);
                    }
                    for l in 0..LANES {
                        out.push(ws[idx(l)]);
                    }
                }
            }
            out
        };
        Self {
            fwd: expand(&core.roots, &core.roots_shoup),
            inv: expand(&core.inv_roots, &core.inv_roots_shoup),
        }
    }
}

/// Forward NTT in place.
pub(crate) fn forward(core: &NttCore<u32>, t: &Tables, a: &mut [u32]) {
    assert_eq!(a.len(), core.n, "NTT length");
    if core.n < 2 * LANES {
        // N = 16 is a single register: not worth a kernel.
        return super::scalar::forward(core, a);
    }
    // SAFETY: this backend is only selected after checking avx512f/dq/bw/vl on this CPU
    // (Backend::check at table construction); a.len() == N was asserted above.
    unsafe {
        if core.lazy4 {
            forward_impl::<true>(core, t, a)
        } else {
            forward_impl::<false>(core, t, a)
        }
    }
}

/// Inverse NTT in place.
pub(crate) fn inverse(core: &NttCore<u32>, t: &Tables, a: &mut [u32]) {
    assert_eq!(a.len(), core.n, "NTT length");
    if core.n < 2 * LANES {
        return super::scalar::inverse(core, a);
    }
    // SAFETY: as in `forward`: the CPU features were checked when the table was built.
    unsafe {
        if core.lazy4 {
            inverse_impl::<true>(core, t, a)
        } else {
            inverse_impl::<false>(core, t, a)
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Lane layouts of the register tail.
// ---------------------------------------------------------------------------------------------

/// Word index (within a 32-word chunk) held by register `r`, lane `l` in layout `k`: bit `k` of
/// the index is the register; the group bits above `k` are the low lane bits and the bits below
/// `k` the high lane bits. Layout `k` puts the partners of the gap-2^k butterflies in the same
/// lane of the two registers, and lane `l` needs the twiddle of group `l mod 2^(4-k)`: a
/// periodic pattern that one broadcast load (`vpbroadcastq`, `vbroadcasti32x4/x8`) produces with
/// no shuffle. Layout 4 is the natural order.
const fn layout_elem(k: u32, r: u32, l: u32) -> u32 {
    let low = l >> (4 - k);
    let group = l & ((1 << (4 - k)) - 1);
    (group << (k + 1)) | (r << k) | low
}

/// `vpermt2d` index (register bit 4) of word `e` in layout `k`.
const fn layout_pos(k: u32, e: u32) -> u32 {
    let r = (e >> k) & 1;
    let low = e & ((1 << k) - 1);
    let group = e >> (k + 1);
    r * 16 + ((low << (4 - k)) | group)
}

/// `vpermt2d` indices taking the pair in layout `from` to register `r` of layout `to`.
const fn perm_idx(from: u32, to: u32, r: u32) -> [u32; 16] {
    let mut out = [0u32; 16];
    let mut l = 0;
    while l < 16 {
        out[l] = layout_pos(from, layout_elem(to, r, l as u32));
        l += 1;
    }
    out
}

/// Forward tail: layout 0 back to the natural order, two registers.
static TO_NATURAL: [[u32; 16]; 2] = [perm_idx(0, 4, 0), perm_idx(0, 4, 1)];

/// Inverse tail: natural order to layout 0.
static TO_LAYOUT0: [[u32; 16]; 2] = [perm_idx(4, 0, 0), perm_idx(4, 0, 1)];

super::shoup32::kernel!(
    "avx512f,avx512dq,avx512bw,avx512vl",
    __m512i,
    zero = _mm512_setzero_si512
);

// ---------------------------------------------------------------------------------------------
// Vector arithmetic.
// ---------------------------------------------------------------------------------------------

/// Broadcast constants of one modulus.
#[derive(Clone, Copy)]
struct Consts {
    /// `q` in every lane.
    q: __m512i,
    /// `2q` in every lane.
    two_q: __m512i,
    /// The bound of the butterflies' inputs after one conditional subtraction: `2q` for Harvey's
    /// ranges, `q` for 31-bit primes.
    b1: __m512i,
}

impl Consts {
    /// Broadcasts the constants of `core`'s modulus.
    #[inline]
    #[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl")]
    fn new<const L4: bool>(core: &NttCore<u32>) -> Self {
        let q = core.modulus.q();
        let two_q = core.modulus.two_q();
        Self {
            q: _mm512_set1_epi32(q as i32),
            two_q: _mm512_set1_epi32(two_q as i32),
            b1: _mm512_set1_epi32(if L4 { two_q } else { q } as i32),
        }
    }
}

/// `x - b` if `x >= b`, else `x` (unsigned; `x < 2b`): the wrapped difference is larger.
#[inline]
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl")]
fn csub(x: __m512i, b: __m512i) -> __m512i {
    _mm512_min_epu32(x, _mm512_sub_epi32(x, b))
}

/// Shoup's lazy product `x * w mod q` in `[0, 2q)` for any `x < 2^32` (Shoup; Harvey 2014
/// Alg. 2): `x * w - hi32(x * w') * q` computed in wrapping 32-bit lanes. `ws` holds `w'` and
/// `ws_odd` holds `w'` of the odd lanes in the even positions (equal to `ws` for broadcasts).
#[inline]
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl")]
fn mul_shoup(x: __m512i, w: __m512i, ws: __m512i, ws_odd: __m512i, q: __m512i) -> __m512i {
    let even = _mm512_mul_epu32(x, ws);
    let odd = _mm512_mul_epu32(_mm512_srli_epi64::<32>(x), ws_odd);
    // Even lanes take the high word of their 64-bit product by a pair swap (one op instead of
    // shift + blend); odd lanes already hold theirs.
    let hi: __m512i;
    // SAFETY: register-only instruction of the enabled AVX-512F set.
    unsafe {
        core::arch::asm!("vpshufd {r}{{{k}}}, {e}, 0xb1", r = inout(zmm_reg) odd => hi, e = in(zmm_reg) even, k = in(kreg) 0x5555u16, options(pure, nomem, nostack));
    }
    _mm512_sub_epi32(_mm512_mullo_epi32(x, w), _mm512_mullo_epi32(hi, q))
}

/// A twiddle factor in vector form: value, Shoup companion, companion of the odd lanes.
#[derive(Clone, Copy)]
struct Tw {
    /// Root values.
    w: __m512i,
    /// Shoup companions.
    ws: __m512i,
    /// Shoup companions of the odd lanes, moved to the even positions.
    ws_odd: __m512i,
}

impl Tw {
    /// Broadcasts one twiddle.
    #[inline]
    #[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl")]
    fn splat(w: u32, ws: u32) -> Self {
        let ws = _mm512_set1_epi32(ws as i32);
        Self {
            w: _mm512_set1_epi32(w as i32),
            ws,
            ws_odd: ws,
        }
    }
}

/// Forward (Cooley-Tukey) butterfly `(x, y) -> (x + w y, x - w y)`. `L4`: inputs in `[0, 4q)`,
/// outputs in `[0, 4q)`; otherwise inputs and outputs in `[0, 2q)`.
#[inline]
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl")]
fn fwd_bf<const L4: bool>(x: &mut __m512i, y: &mut __m512i, t: &Tw, c: &Consts) {
    fwd_bf_r::<L4, true>(x, y, t, c)
}

/// [`fwd_bf`] with the reduction of `x` optional: `RED = false` needs `x < q` (the first layer,
/// whose inputs are reduced).
#[inline]
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl")]
fn fwd_bf_r<const L4: bool, const RED: bool>(x: &mut __m512i, y: &mut __m512i, t: &Tw, c: &Consts) {
    let u = if RED { csub(*x, c.b1) } else { *x };
    let mut v = mul_shoup(*y, t.w, t.ws, t.ws_odd, c.q);
    if !L4 {
        v = csub(v, c.q);
    }
    *x = _mm512_add_epi32(u, v);
    *y = _mm512_add_epi32(_mm512_sub_epi32(u, v), c.b1);
}

/// Inverse (Gentleman-Sande) butterfly `(x, y) -> (x + y, (x - y) w)`, inputs and outputs in
/// `[0, 2q)`.
#[inline]
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl")]
fn inv_bf<const L4: bool>(x: &mut __m512i, y: &mut __m512i, t: &Tw, c: &Consts) {
    let (u, v) = if L4 {
        (*x, *y)
    } else {
        (csub(*x, c.q), csub(*y, c.q))
    };
    let mut s = _mm512_add_epi32(u, v);
    if L4 {
        s = csub(s, c.two_q);
    }
    let d = _mm512_add_epi32(_mm512_sub_epi32(u, v), c.b1);
    *x = s;
    *y = mul_shoup(d, t.w, t.ws, t.ws_odd, c.q);
}

/// The last inverse layer with `N^-1` folded in: `(x, y) -> ((x + y) / N, (x - y) w / N)`,
/// inputs in `[0, 2q)`, outputs reduced.
#[inline]
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl")]
fn inv_top_bf<const L4: bool>(x: &mut __m512i, y: &mut __m512i, ni: &Tw, nw: &Tw, c: &Consts) {
    let (u, v) = if L4 {
        (*x, *y)
    } else {
        (csub(*x, c.q), csub(*y, c.q))
    };
    // L4: u + v < 4q < 2^32; otherwise both below q. Shoup accepts any word.
    let s = _mm512_add_epi32(u, v);
    let d = _mm512_add_epi32(_mm512_sub_epi32(u, v), c.b1);
    *x = csub(mul_shoup(s, ni.w, ni.ws, ni.ws_odd, c.q), c.q);
    *y = csub(mul_shoup(d, nw.w, nw.ws, nw.ws_odd, c.q), c.q);
}

/// Unaligned load of 16 words at `p`.
///
/// # Safety
/// `p..p+16` must be readable.
#[inline]
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl")]
unsafe fn load(p: *const u32) -> __m512i {
    // SAFETY: the caller guarantees 16 readable words.
    unsafe { _mm512_loadu_si512(p as *const __m512i) }
}

/// Unaligned store of 16 words at `p`.
///
/// # Safety
/// `p..p+16` must be writable.
#[inline]
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl")]
unsafe fn store(p: *mut u32, v: __m512i) {
    // SAFETY: the caller guarantees 16 writable words.
    unsafe { _mm512_storeu_si512(p as *mut __m512i, v) }
}

/// Loads a 16-entry index table.
#[inline]
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl")]
fn load_idx(t: &[u32; 16]) -> __m512i {
    // SAFETY: `t` holds exactly 16 words.
    unsafe { load(t.as_ptr()) }
}

/// Per-lane twiddles of the gap-1 layer (layout 0) for the chunk at word `s`: lane `l` gets
/// root `(n >> 1) + (s >> 1) + l`, one contiguous load; the odd-lane companions come from the
/// same table one word further.
///
/// # Safety
/// `w` and `ws` must hold `n` words and `s + 32 <= n`.
#[inline]
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl")]
unsafe fn lane_tw0(w: *const u32, ws: *const u32, n: usize, s: usize) -> Tw {
    let off = (n >> 1) + (s >> 1);
    // off + 16 <= n since s <= n - 32; the companion load skips its last word, which would be
    // entry off + 16 (past the table for the last chunk).
    // SAFETY: every read is within [off, off + 16) of tables holding n words.
    unsafe {
        Tw {
            w: load(w.add(off)),
            ws: load(ws.add(off)),
            ws_odd: _mm512_maskz_loadu_epi32(0x7fff, ws.add(off + 1) as *const i32),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Forward transform.
// ---------------------------------------------------------------------------------------------

/// Chunks interleaved by the tail: one chunk is a serial chain of five butterflies and their
/// shuffles, so independent chunks side by side hide the multiply and shuffle latencies.
const TAIL_CHUNKS: usize = 4;

/// Exchanges the register bit of a pair with lane bit `B` (3, 2: 128-bit blocks; 1: qwords of
/// a block; 0: words of a qword). Each output is one in-lane shuffle (`vshufi64x2`,
/// `vpunpck*qdq`, masked `vpshufd`), much cheaper on Zen 4 than a two-source `vpermt2d`.
/// Applying it twice is the identity.
#[inline]
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl")]
fn swap<const B: u32>(x: __m512i, y: __m512i) -> (__m512i, __m512i) {
    match B {
        3 => (
            _mm512_shuffle_i64x2::<0x44>(x, y),
            _mm512_shuffle_i64x2::<0xee>(x, y),
        ),
        // Blocks 1 and 3 of x take blocks 0 and 2 of y, blocks 0 and 2 of y take 1 and 3 of x.
        2 => (
            _mm512_mask_shuffle_i64x2::<0x80>(x, 0xcc, y, y),
            _mm512_mask_shuffle_i64x2::<0x31>(y, 0x33, x, x),
        ),
        1 => (_mm512_unpacklo_epi64(x, y), _mm512_unpackhi_epi64(x, y)),
        _ => (
            _mm512_mask_shuffle_epi32::<0xb1>(x, 0xaaaa, y),
            _mm512_mask_shuffle_epi32::<0xb1>(y, 0x5555, x),
        ),
    }
}

/// [`swap`] on every pair of `C` chunks.
#[inline]
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl")]
fn swap_all<const B: u32, const C: usize>(x: &mut [__m512i; C], y: &mut [__m512i; C]) {
    for (x, y) in x.iter_mut().zip(y.iter_mut()) {
        (*x, *y) = swap::<B>(*x, *y);
    }
}

/// Regroups the pairs with `vpermt2d` from one layout to the next.
#[inline]
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl")]
fn regroup<const C: usize>(x: &mut [__m512i; C], y: &mut [__m512i; C], p: &[__m512i; 2]) {
    for (x, y) in x.iter_mut().zip(y.iter_mut()) {
        (*x, *y) = (
            _mm512_permutex2var_epi32(*x, p[0], *y),
            _mm512_permutex2var_epi32(*x, p[1], *y),
        );
    }
}

/// One tail layer with gap `2^K` on `C` chunks starting at word `s0`, pairs already in layout
/// `K`. Twiddles: for `K >= 1` from the expanded table `tt` (chunk-major, [`TAIL_TW`] words per
/// chunk; adjacent lanes share a twiddle there, so the odd companions equal the even ones), for
/// `K = 0` from the root tables `tabs` directly.
///
/// # Safety
/// The root tables must hold `n` words, `tt` at least `(s0 / 32 + C) * TAIL_TW` words and
/// `s0 + 32 C <= n`.
#[inline]
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl")]
unsafe fn tail_layer<const L4: bool, const FWD: bool, const K: u32, const C: usize>(
    x: &mut [__m512i; C],
    y: &mut [__m512i; C],
    tt: *const u32,
    tabs: (*const u32, *const u32),
    n: usize,
    s0: usize,
    c: &Consts,
) {
    for (i, (x, y)) in x.iter_mut().zip(y.iter_mut()).enumerate() {
        let s = s0 + 32 * i;
        // SAFETY: s + 32 <= n and the table bounds, as the caller guarantees.
        let t = unsafe {
            if K == 0 {
                lane_tw0(tabs.0, tabs.1, n, s)
            } else {
                let p = tt.add((s >> 5) * TAIL_TW + (3 - K as usize) * 2 * LANES);
                let ws = load(p.add(LANES));
                Tw {
                    w: load(p),
                    ws,
                    ws_odd: ws,
                }
            }
        };
        if FWD {
            fwd_bf::<L4>(x, y, &t, c);
        } else {
            inv_bf::<L4>(x, y, &t, c);
        }
    }
}

/// The last five forward layers (gaps 16..1) on each 32-word chunk of `a[base..base+len]`, in
/// registers, followed by the full reduction to `[0, q)`.
#[inline]
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl")]
fn fwd_tail<const L4: bool>(
    core: &NttCore<u32>,
    t: &Tables,
    a: &mut [u32],
    base: usize,
    len: usize,
    c: &Consts,
) {
    if len.is_multiple_of(32 * TAIL_CHUNKS) {
        fwd_tail_c::<L4, TAIL_CHUNKS>(core, t, a, base, len, c)
    } else {
        fwd_tail_c::<L4, 1>(core, t, a, base, len, c)
    }
}

/// [`fwd_tail`] on `C` chunks at a time (`len` a multiple of `32 C`).
#[inline]
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl")]
fn fwd_tail_c<const L4: bool, const C: usize>(
    core: &NttCore<u32>,
    t: &Tables,
    a: &mut [u32],
    base: usize,
    len: usize,
    c: &Consts,
) {
    let n = core.n;
    assert!(
        base.is_multiple_of(32)
            && len.is_multiple_of(32 * C)
            && base + len <= a.len()
            && a.len() == n
            && t.fwd.len() == n / 32 * TAIL_TW
    );
    let back = [load_idx(&TO_NATURAL[0]), load_idx(&TO_NATURAL[1])];
    let tabs = (core.roots.as_ptr(), core.roots_shoup.as_ptr());
    let tt = t.fwd.as_ptr();
    let ptr = a.as_mut_ptr();
    for s0 in (base..base + len).step_by(32 * C) {
        let mut x = [_mm512_setzero_si512(); C];
        let mut y = [_mm512_setzero_si512(); C];
        for i in 0..C {
            let s = s0 + 32 * i;
            // SAFETY: s + 32 <= base + len <= a.len().
            (x[i], y[i]) = unsafe { (load(ptr.add(s)), load(ptr.add(s + 16))) };
            let g = (n >> 5) + (s >> 5);
            fwd_bf::<L4>(
                &mut x[i],
                &mut y[i],
                &Tw::splat(core.roots[g], core.roots_shoup[g]),
                c,
            );
        }
        // Natural layout -> layouts 3, 2, 1, 0 by one bit exchange each.
        // SAFETY: the root tables hold n words, the expanded table n / 32 chunks, and
        // s0 + 32 C <= base + len <= n.
        unsafe {
            swap_all::<3, C>(&mut x, &mut y);
            tail_layer::<L4, true, 3, C>(&mut x, &mut y, tt, tabs, n, s0, c);
            swap_all::<2, C>(&mut x, &mut y);
            tail_layer::<L4, true, 2, C>(&mut x, &mut y, tt, tabs, n, s0, c);
            swap_all::<1, C>(&mut x, &mut y);
            tail_layer::<L4, true, 1, C>(&mut x, &mut y, tt, tabs, n, s0, c);
            swap_all::<0, C>(&mut x, &mut y);
            tail_layer::<L4, true, 0, C>(&mut x, &mut y, tt, tabs, n, s0, c);
        }
        regroup(&mut x, &mut y, &back);
        for i in 0..C {
            let (mut u, mut v) = (x[i], y[i]);
            if L4 {
                u = csub(u, c.two_q);
                v = csub(v, c.two_q);
            }
            let s = s0 + 32 * i;
            // SAFETY: as for the loads.
            unsafe {
                store(ptr.add(s), csub(u, c.q));
                store(ptr.add(s + 16), csub(v, c.q));
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Inverse transform.
// ---------------------------------------------------------------------------------------------

/// The first five inverse layers (gaps 1..16) on each 32-word chunk of `a[base..base+len]`, in
/// registers; for N = 32 the gap-16 layer is the final one (`N^-1` folded in).
#[inline]
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl")]
fn inv_tail<const L4: bool>(
    core: &NttCore<u32>,
    t: &Tables,
    a: &mut [u32],
    base: usize,
    len: usize,
    c: &Consts,
) {
    if len.is_multiple_of(32 * TAIL_CHUNKS) {
        inv_tail_c::<L4, TAIL_CHUNKS>(core, t, a, base, len, c)
    } else {
        inv_tail_c::<L4, 1>(core, t, a, base, len, c)
    }
}

/// [`inv_tail`] on `C` chunks at a time (`len` a multiple of `32 C`).
#[inline]
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl")]
fn inv_tail_c<const L4: bool, const C: usize>(
    core: &NttCore<u32>,
    t: &Tables,
    a: &mut [u32],
    base: usize,
    len: usize,
    c: &Consts,
) {
    let n = core.n;
    assert!(
        base.is_multiple_of(32)
            && len.is_multiple_of(32 * C)
            && base + len <= a.len()
            && a.len() == n
            && t.inv.len() == n / 32 * TAIL_TW
    );
    let to0 = [load_idx(&TO_LAYOUT0[0]), load_idx(&TO_LAYOUT0[1])];
    let tabs = (core.inv_roots.as_ptr(), core.inv_roots_shoup.as_ptr());
    let tt = t.inv.as_ptr();
    let ni = Tw::splat(core.n_inv.0, core.n_inv.1);
    let nw = Tw::splat(core.n_inv_w.0, core.n_inv_w.1);
    let top = n == 32;
    let ptr = a.as_mut_ptr();
    for s0 in (base..base + len).step_by(32 * C) {
        let mut x = [_mm512_setzero_si512(); C];
        let mut y = [_mm512_setzero_si512(); C];
        for i in 0..C {
            let s = s0 + 32 * i;
            // SAFETY: s + 32 <= base + len <= a.len().
            (x[i], y[i]) = unsafe { (load(ptr.add(s)), load(ptr.add(s + 16))) };
        }
        regroup(&mut x, &mut y, &to0);
        // Layouts 0, 1, 2, 3 -> natural by one bit exchange each (the forward steps reversed).
        // SAFETY: the root tables hold n words, the expanded table n / 32 chunks, and
        // s0 + 32 C <= base + len <= n.
        unsafe {
            tail_layer::<L4, false, 0, C>(&mut x, &mut y, tt, tabs, n, s0, c);
            swap_all::<0, C>(&mut x, &mut y);
            tail_layer::<L4, false, 1, C>(&mut x, &mut y, tt, tabs, n, s0, c);
            swap_all::<1, C>(&mut x, &mut y);
            tail_layer::<L4, false, 2, C>(&mut x, &mut y, tt, tabs, n, s0, c);
            swap_all::<2, C>(&mut x, &mut y);
            tail_layer::<L4, false, 3, C>(&mut x, &mut y, tt, tabs, n, s0, c);
            swap_all::<3, C>(&mut x, &mut y);
        }
        for i in 0..C {
            let s = s0 + 32 * i;
            if top {
                inv_top_bf::<L4>(&mut x[i], &mut y[i], &ni, &nw, c);
            } else {
                let g = (n >> 5) + (s >> 5);
                let t = Tw::splat(core.inv_roots[g], core.inv_roots_shoup[g]);
                inv_bf::<L4>(&mut x[i], &mut y[i], &t, c);
            }
            // SAFETY: as for the loads.
            unsafe {
                store(ptr.add(s), x[i]);
                store(ptr.add(s + 16), y[i]);
            }
        }
    }
}
