//! AVX2 negacyclic NTT for 32-bit words: 8 lanes per register, twice the 64-bit AVX2 path
//! (Nishi et al.: primes below 2^32 in 32-bit words double the lanes and halve the traffic).
//!
//! Same structure as the AVX-512 kernels (`super::avx512_u32`):
//! - Harvey (2014) lazy butterflies with Shoup twiddle products (`hi32(x w')` from two
//!   `vpmuludq` on even/odd lanes merged by `vpblendd`, low words by `vpmulld`); conditional
//!   subtractions by `vpminud(x, x - b)`. For 31-bit primes (4q >= 2^32) values stay below 2q
//!   with one more conditional subtraction per butterfly (const generic `L4`).
//! - Layers with gap >= 16 as radix-4/8 passes with broadcast twiddles, depth first over
//!   16 KiB blocks.
//! - The last four layers (gaps 8, 4, 2, 1) on two registers (16 words) per chunk: gap 8 is a
//!   plain butterfly; between layers `vperm2i128` / `vpunpck{l,h}dq` (forward) or `vshufps`
//!   (inverse) regroup the words so partners share a lane, with per-lane twiddle patterns from
//!   broadcast loads. The final reduction is folded into this pass.

use core::arch::x86_64::*;

use super::skeleton::Kernel;
use super::NttCore;

/// Words per register.
const LANES: usize = 8;
/// Layers done by the register-resident tail (gaps 8..1 on 16-word chunks).
const TAIL_LOG: u32 = 4;
/// log2 of the depth-first block (4096 words = 16 KiB, half the L1 data cache).
const BLOCK_LOG: u32 = 12;

/// Backend-specific twiddle tables (the kernels read the core's bit-reversed tables directly).
#[derive(Debug)]
pub struct Tables {}

impl Tables {
    /// Builds the tables from the core precomputation.
    pub(crate) fn new(_core: &NttCore<u32>) -> Self {
        Self {}
    }
}

/// Forward NTT in place.
pub(crate) fn forward(core: &NttCore<u32>, t: &Tables, a: &mut [u32]) {
    assert_eq!(a.len(), core.n, "NTT length");
    // SAFETY: this backend is only selected after checking avx2 on this CPU
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
    // SAFETY: as in `forward`: the CPU features were checked when the table was built.
    unsafe {
        if core.lazy4 {
            inverse_impl::<true>(core, t, a)
        } else {
            inverse_impl::<false>(core, t, a)
        }
    }
}

super::shoup32::kernel!("avx2", __m256i, zero = _mm256_setzero_si256);

// ---------------------------------------------------------------------------------------------
// Vector arithmetic.
// ---------------------------------------------------------------------------------------------

/// Broadcast constants of one modulus.
#[derive(Clone, Copy)]
struct Consts {
    /// `q` in every lane.
    q: __m256i,
    /// `2q` in every lane.
    two_q: __m256i,
    /// The bound of the butterflies' inputs after one conditional subtraction: `2q` for Harvey's
    /// ranges, `q` for 31-bit primes.
    b1: __m256i,
}

impl Consts {
    /// Broadcasts the constants of `core`'s modulus.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn new<const L4: bool>(core: &NttCore<u32>) -> Self {
        let q = core.modulus.q();
        let two_q = core.modulus.two_q();
        Self {
            q: _mm256_set1_epi32(q as i32),
            two_q: _mm256_set1_epi32(two_q as i32),
            b1: _mm256_set1_epi32(if L4 { two_q } else { q } as i32),
        }
    }
}

/// `x - b` if `x >= b`, else `x` (unsigned; `x < 2b`): the wrapped difference is larger.
#[inline]
#[target_feature(enable = "avx2")]
fn csub(x: __m256i, b: __m256i) -> __m256i {
    _mm256_min_epu32(x, _mm256_sub_epi32(x, b))
}

/// Shoup's lazy product `x * w mod q` in `[0, 2q)` for any `x < 2^32` (Shoup; Harvey 2014
/// Alg. 2): `x * w - hi32(x * w') * q` computed in wrapping 32-bit lanes. `ws` holds `w'` and
/// `ws_odd` holds `w'` of the odd lanes in the even positions (equal to `ws` for broadcasts).
#[inline]
#[target_feature(enable = "avx2")]
fn mul_shoup(x: __m256i, w: __m256i, ws: __m256i, ws_odd: __m256i, q: __m256i) -> __m256i {
    let even = _mm256_mul_epu32(x, ws);
    let odd = _mm256_mul_epu32(_mm256_srli_epi64::<32>(x), ws_odd);
    let hi = _mm256_blend_epi32::<0b1010_1010>(_mm256_srli_epi64::<32>(even), odd);
    _mm256_sub_epi32(_mm256_mullo_epi32(x, w), _mm256_mullo_epi32(hi, q))
}

/// A twiddle factor in vector form: value, Shoup companion, companion of the odd lanes.
#[derive(Clone, Copy)]
struct Tw {
    /// Root values.
    w: __m256i,
    /// Shoup companions.
    ws: __m256i,
    /// Shoup companions of the odd lanes, moved to the even positions.
    ws_odd: __m256i,
}

impl Tw {
    /// Broadcasts one twiddle.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn splat(w: u32, ws: u32) -> Self {
        let ws = _mm256_set1_epi32(ws as i32);
        Self {
            w: _mm256_set1_epi32(w as i32),
            ws,
            ws_odd: ws,
        }
    }

    /// Per-lane twiddles from vectors of values and companions.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn lanes(w: __m256i, ws: __m256i) -> Self {
        Self {
            w,
            ws,
            ws_odd: _mm256_srli_epi64::<32>(ws),
        }
    }
}

/// Forward (Cooley-Tukey) butterfly `(x, y) -> (x + w y, x - w y)`. `L4`: inputs in `[0, 4q)`,
/// outputs in `[0, 4q)`; otherwise inputs and outputs in `[0, 2q)`.
#[inline]
#[target_feature(enable = "avx2")]
fn fwd_bf<const L4: bool>(x: &mut __m256i, y: &mut __m256i, t: &Tw, c: &Consts) {
    fwd_bf_r::<L4, true>(x, y, t, c)
}

/// [`fwd_bf`] with the reduction of `x` optional: `RED = false` needs `x < q` (the first layer,
/// whose inputs are reduced).
#[inline]
#[target_feature(enable = "avx2")]
fn fwd_bf_r<const L4: bool, const RED: bool>(x: &mut __m256i, y: &mut __m256i, t: &Tw, c: &Consts) {
    let u = if RED { csub(*x, c.b1) } else { *x };
    let mut v = mul_shoup(*y, t.w, t.ws, t.ws_odd, c.q);
    if !L4 {
        v = csub(v, c.q);
    }
    *x = _mm256_add_epi32(u, v);
    *y = _mm256_add_epi32(_mm256_sub_epi32(u, v), c.b1);
}

/// Inverse (Gentleman-Sande) butterfly `(x, y) -> (x + y, (x - y) w)`, inputs and outputs in
/// `[0, 2q)`.
#[inline]
#[target_feature(enable = "avx2")]
fn inv_bf<const L4: bool>(x: &mut __m256i, y: &mut __m256i, t: &Tw, c: &Consts) {
    let (u, v) = if L4 {
        (*x, *y)
    } else {
        (csub(*x, c.q), csub(*y, c.q))
    };
    let mut s = _mm256_add_epi32(u, v);
    if L4 {
        s = csub(s, c.two_q);
    }
    let d = _mm256_add_epi32(_mm256_sub_epi32(u, v), c.b1);
    *x = s;
    *y = mul_shoup(d, t.w, t.ws, t.ws_odd, c.q);
}

/// The last inverse layer with `N^-1` folded in: `(x, y) -> ((x + y) / N, (x - y) w / N)`,
/// inputs in `[0, 2q)`, outputs reduced.
#[inline]
#[target_feature(enable = "avx2")]
fn inv_top_bf<const L4: bool>(x: &mut __m256i, y: &mut __m256i, ni: &Tw, nw: &Tw, c: &Consts) {
    let (u, v) = if L4 {
        (*x, *y)
    } else {
        (csub(*x, c.q), csub(*y, c.q))
    };
    // L4: u + v < 4q < 2^32; otherwise both below q. Shoup accepts any word.
    let s = _mm256_add_epi32(u, v);
    let d = _mm256_add_epi32(_mm256_sub_epi32(u, v), c.b1);
    *x = csub(mul_shoup(s, ni.w, ni.ws, ni.ws_odd, c.q), c.q);
    *y = csub(mul_shoup(d, nw.w, nw.ws, nw.ws_odd, c.q), c.q);
}

/// Unaligned load of 8 words at `p`.
///
/// # Safety
/// `p..p+8` must be readable.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn load(p: *const u32) -> __m256i {
    // SAFETY: the caller guarantees 8 readable words.
    unsafe { _mm256_loadu_si256(p as *const __m256i) }
}

/// Unaligned store of 8 words at `p`.
///
/// # Safety
/// `p..p+8` must be writable.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn store(p: *mut u32, v: __m256i) {
    // SAFETY: the caller guarantees 8 writable words.
    unsafe { _mm256_storeu_si256(p as *mut __m256i, v) }
}

/// Per-lane twiddles of the tail layer `K` (`K <= 2`) for the chunk at word `s`, in the lane
/// layouts of [`fwd_tail`] / [`inv_tail`]: the roots of layer `K` from
/// `off = (n >> (K+1)) + (s >> (K+1))`, lane `l` getting entry `l >> 2` (K = 2),
/// `2 (l >> 2) + (l & 1)` (K = 1) or `l` (K = 0).
///
/// # Safety
/// `w` and `ws` must hold `n` words and `s + 16 <= n`.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn lane_tw<const K: u32>(w: *const u32, ws: *const u32, n: usize, s: usize) -> Tw {
    let off = (n >> (K + 1)) + (s >> (K + 1));
    // The pattern has 2^(3-K) entries and off + 2^(3-K) <= n >> K since s <= n - 16.
    // SAFETY: every read below is within [off, off + 2^(3-K)) and within n words.
    unsafe {
        let (w, ws) = (w.add(off), ws.add(off));
        match K {
            2 => {
                // [w0 x4, w1 x4]: equal neighbours, so the odd companions equal `ws`.
                let vw =
                    _mm256_set_m128i(_mm_set1_epi32(*w.add(1) as i32), _mm_set1_epi32(*w as i32));
                let vs = _mm256_set_m128i(
                    _mm_set1_epi32(*ws.add(1) as i32),
                    _mm_set1_epi32(*ws as i32),
                );
                Tw {
                    w: vw,
                    ws: vs,
                    ws_odd: vs,
                }
            }
            1 => {
                // [w0 w1 w0 w1 w2 w3 w2 w3]: 64-bit pairs spread by one vpermq.
                let vw = _mm256_permute4x64_epi64::<0b0101_0000>(_mm256_castsi128_si256(
                    _mm_loadu_si128(w as *const __m128i),
                ));
                let vs = _mm256_permute4x64_epi64::<0b0101_0000>(_mm256_castsi128_si256(
                    _mm_loadu_si128(ws as *const __m128i),
                ));
                Tw::lanes(vw, vs)
            }
            _ => Tw::lanes(load(w), load(ws)),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Forward transform.
// ---------------------------------------------------------------------------------------------

/// Chunks interleaved by the tail: one chunk is a serial chain of butterflies and shuffles, so
/// independent chunks side by side hide the multiply latencies.
const TAIL_CHUNKS: usize = 2;

/// Butterflies of one tail layer on `C` chunks from word `s0`, with per-lane twiddles of layer `K`.
///
/// # Safety
/// The tables must hold `n` words and `s0 + 16 C <= n`.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn tail_bfs<const L4: bool, const FWD: bool, const K: u32, const C: usize>(
    x: &mut [__m256i; C],
    y: &mut [__m256i; C],
    tabs: (*const u32, *const u32),
    n: usize,
    s0: usize,
    c: &Consts,
) {
    for (i, (x, y)) in x.iter_mut().zip(y.iter_mut()).enumerate() {
        // SAFETY: s0 + 16 i + 16 <= n, as the caller guarantees.
        let t = unsafe { lane_tw::<K>(tabs.0, tabs.1, n, s0 + 16 * i) };
        if FWD {
            fwd_bf::<L4>(x, y, &t, c);
        } else {
            inv_bf::<L4>(x, y, &t, c);
        }
    }
}

/// Applies a two-register regrouping to every chunk.
#[inline]
#[target_feature(enable = "avx2")]
fn regroup<const C: usize>(
    x: &mut [__m256i; C],
    y: &mut [__m256i; C],
    f: impl Fn(__m256i, __m256i) -> (__m256i, __m256i),
) {
    for (x, y) in x.iter_mut().zip(y.iter_mut()) {
        (*x, *y) = f(*x, *y);
    }
}

/// The last four forward layers (gaps 8..1) on each 16-word chunk of `a[base..base+len]`, in
/// registers, followed by the full reduction to `[0, q)`.
///
/// Word `e = b3 b2 b1 b0` of a chunk moves through these lane layouts (register bit; lane bits
/// high to low): natural (b3; b2 b1 b0) -> `vperm2i128` -> (b2; b3 b1 b0) -> `vpunpck{l,h}dq`
/// -> (b1; b3 b0 b2) -> `vpunpck{l,h}dq` -> (b0; b3 b2 b1) -> unpack + `vperm2i128` -> natural.
#[inline]
#[target_feature(enable = "avx2")]
fn fwd_tail<const L4: bool>(
    core: &NttCore<u32>,
    _t: &Tables,
    a: &mut [u32],
    base: usize,
    len: usize,
    c: &Consts,
) {
    if len.is_multiple_of(16 * TAIL_CHUNKS) {
        fwd_tail_c::<L4, TAIL_CHUNKS>(core, a, base, len, c)
    } else {
        fwd_tail_c::<L4, 1>(core, a, base, len, c)
    }
}

/// [`fwd_tail`] on `C` chunks at a time (`len` a multiple of `16 C`).
#[inline]
#[target_feature(enable = "avx2")]
fn fwd_tail_c<const L4: bool, const C: usize>(
    core: &NttCore<u32>,
    a: &mut [u32],
    base: usize,
    len: usize,
    c: &Consts,
) {
    let n = core.n;
    assert!(
        base.is_multiple_of(16)
            && len.is_multiple_of(16 * C)
            && base + len <= a.len()
            && a.len() == n
    );
    let tabs = (core.roots.as_ptr(), core.roots_shoup.as_ptr());
    let ptr = a.as_mut_ptr();
    for s0 in (base..base + len).step_by(16 * C) {
        let mut x = [_mm256_setzero_si256(); C];
        let mut y = [_mm256_setzero_si256(); C];
        for i in 0..C {
            let s = s0 + 16 * i;
            // SAFETY: s + 16 <= base + len <= a.len().
            (x[i], y[i]) = unsafe { (load(ptr.add(s)), load(ptr.add(s + 8))) };
            let g = (n >> 4) + (s >> 4);
            fwd_bf::<L4>(
                &mut x[i],
                &mut y[i],
                &Tw::splat(core.roots[g], core.roots_shoup[g]),
                c,
            );
        }
        regroup(&mut x, &mut y, |x, y| {
            (
                _mm256_permute2x128_si256::<0x20>(x, y),
                _mm256_permute2x128_si256::<0x31>(x, y),
            )
        });
        // SAFETY: (tail_bfs) the root tables hold n words and s0 + 16 C <= base + len <= n.
        unsafe { tail_bfs::<L4, true, 2, C>(&mut x, &mut y, tabs, n, s0, c) };
        regroup(&mut x, &mut y, |x, y| {
            (_mm256_unpacklo_epi32(x, y), _mm256_unpackhi_epi32(x, y))
        });
        // SAFETY: as above.
        unsafe { tail_bfs::<L4, true, 1, C>(&mut x, &mut y, tabs, n, s0, c) };
        regroup(&mut x, &mut y, |x, y| {
            (_mm256_unpacklo_epi32(x, y), _mm256_unpackhi_epi32(x, y))
        });
        // SAFETY: as above.
        unsafe { tail_bfs::<L4, true, 0, C>(&mut x, &mut y, tabs, n, s0, c) };
        for i in 0..C {
            let lo = _mm256_unpacklo_epi32(x[i], y[i]);
            let hi = _mm256_unpackhi_epi32(x[i], y[i]);
            let (mut u, mut v) = (
                _mm256_permute2x128_si256::<0x20>(lo, hi),
                _mm256_permute2x128_si256::<0x31>(lo, hi),
            );
            if L4 {
                u = csub(u, c.two_q);
                v = csub(v, c.two_q);
            }
            let s = s0 + 16 * i;
            // SAFETY: as for the loads.
            unsafe {
                store(ptr.add(s), csub(u, c.q));
                store(ptr.add(s + 8), csub(v, c.q));
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Inverse transform.
// ---------------------------------------------------------------------------------------------

/// `vshufps` taking the even (`0x88`) or odd (`0xdd`) words of each 128-bit half pair.
#[inline]
#[target_feature(enable = "avx2")]
fn shuf_even_odd(x: __m256i, y: __m256i) -> (__m256i, __m256i) {
    let (xf, yf) = (_mm256_castsi256_ps(x), _mm256_castsi256_ps(y));
    (
        _mm256_castps_si256(_mm256_shuffle_ps::<0x88>(xf, yf)),
        _mm256_castps_si256(_mm256_shuffle_ps::<0xdd>(xf, yf)),
    )
}

/// The first four inverse layers (gaps 1..8) on each 16-word chunk of `a[base..base+len]`, in
/// registers, through the forward tail's layouts in reverse (natural -> (b0; b3 b2 b1) ->
/// (b1; b3 b0 b2) -> (b2; b3 b1 b0) -> natural, by `vperm2i128` and `vshufps`); for N = 16 the
/// gap-8 layer is the final one (`N^-1` folded in).
#[inline]
#[target_feature(enable = "avx2")]
fn inv_tail<const L4: bool>(
    core: &NttCore<u32>,
    _t: &Tables,
    a: &mut [u32],
    base: usize,
    len: usize,
    c: &Consts,
) {
    if len.is_multiple_of(16 * TAIL_CHUNKS) {
        inv_tail_c::<L4, TAIL_CHUNKS>(core, a, base, len, c)
    } else {
        inv_tail_c::<L4, 1>(core, a, base, len, c)
    }
}

/// [`inv_tail`] on `C` chunks at a time (`len` a multiple of `16 C`).
#[inline]
#[target_feature(enable = "avx2")]
fn inv_tail_c<const L4: bool, const C: usize>(
    core: &NttCore<u32>,
    a: &mut [u32],
    base: usize,
    len: usize,
    c: &Consts,
) {
    let n = core.n;
    assert!(
        base.is_multiple_of(16)
            && len.is_multiple_of(16 * C)
            && base + len <= a.len()
            && a.len() == n
    );
    let tabs = (core.inv_roots.as_ptr(), core.inv_roots_shoup.as_ptr());
    let ni = Tw::splat(core.n_inv.0, core.n_inv.1);
    let nw = Tw::splat(core.n_inv_w.0, core.n_inv_w.1);
    let top = n == 16;
    let ptr = a.as_mut_ptr();
    for s0 in (base..base + len).step_by(16 * C) {
        let mut x = [_mm256_setzero_si256(); C];
        let mut y = [_mm256_setzero_si256(); C];
        for i in 0..C {
            let s = s0 + 16 * i;
            // SAFETY: s + 16 <= base + len <= a.len().
            let (u, v) = unsafe { (load(ptr.add(s)), load(ptr.add(s + 8))) };
            (x[i], y[i]) = shuf_even_odd(
                _mm256_permute2x128_si256::<0x20>(u, v),
                _mm256_permute2x128_si256::<0x31>(u, v),
            );
        }
        // SAFETY: (tail_bfs) the root tables hold n words and s0 + 16 C <= base + len <= n.
        unsafe { tail_bfs::<L4, false, 0, C>(&mut x, &mut y, tabs, n, s0, c) };
        regroup(&mut x, &mut y, |x, y| shuf_even_odd(x, y));
        // SAFETY: as above.
        unsafe { tail_bfs::<L4, false, 1, C>(&mut x, &mut y, tabs, n, s0, c) };
        regroup(&mut x, &mut y, |x, y| shuf_even_odd(x, y));
        // SAFETY: as above.
        unsafe { tail_bfs::<L4, false, 2, C>(&mut x, &mut y, tabs, n, s0, c) };
        regroup(&mut x, &mut y, |x, y| {
            (
                _mm256_permute2x128_si256::<0x20>(x, y),
                _mm256_permute2x128_si256::<0x31>(x, y),
            )
        });
        for i in 0..C {
            let s = s0 + 16 * i;
            if top {
                inv_top_bf::<L4>(&mut x[i], &mut y[i], &ni, &nw, c);
            } else {
                let g = (n >> 4) + (s >> 4);
                let t = Tw::splat(core.inv_roots[g], core.inv_roots_shoup[g]);
                inv_bf::<L4>(&mut x[i], &mut y[i], &t, c);
            }
            // SAFETY: as for the loads.
            unsafe {
                store(ptr.add(s), x[i]);
                store(ptr.add(s + 8), y[i]);
            }
        }
    }
}
