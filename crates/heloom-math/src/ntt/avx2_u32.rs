//! AVX2 negacyclic NTT for 32-bit words: 8 lanes per register, twice the 64-bit AVX2 path
//! (Nishi et al.: primes below 2^32 in 32-bit words double the lanes and halve the traffic).
//!
//! Same structure as the AVX-512 kernels (`super::avx512_u32`); the butterflies and the tail's
//! chunk loop are the 32-bit family's (`super::shoup32`):
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

use super::shoup32::{fwd_bf, inv_bf, Tail32, Tw};
use super::skeleton::Kernel;
use super::NttCore;
use crate::simd::avx2::Avx2;
use crate::simd::Prim32;

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

super::shoup32::kernel!("avx2", Avx2, __m256i);

/// Chunks interleaved by the tail: one chunk is a serial chain of butterflies and shuffles, so
/// independent chunks side by side hide the multiply latencies.
const TAIL_CHUNKS: usize = 2;

/// Per-lane twiddles of the tail layer `K` (`K <= 2`) for the chunk at word `s`, in the lane
/// layouts of the tail: the roots of layer `K` from `off = (n >> (K+1)) + (s >> (K+1))`, lane
/// `l` getting entry `l >> 2` (K = 2), `2 (l >> 2) + (l & 1)` (K = 1) or `l` (K = 0).
///
/// # Safety
/// `w` and `ws` must hold `n` words and `s + 16 <= n`.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn lane_tw<const K: u32>(w: *const u32, ws: *const u32, n: usize, s: usize) -> Tw<Avx2> {
    let off = (n >> (K + 1)) + (s >> (K + 1));
    // The pattern has 2^(3-K) entries and off + 2^(3-K) <= n >> K since s <= n - 16.
    // SAFETY: every read below is within [off, off + 2^(3-K)) and within n words.
    unsafe {
        let (w, ws) = (w.add(off), ws.add(off));
        match K {
            // [w0 x4, w1 x4]: equal neighbours, so the odd companions equal `ws`.
            2 => Tw::pairs(
                _mm256_set_m128i(_mm_set1_epi32(*w.add(1) as i32), _mm_set1_epi32(*w as i32)),
                _mm256_set_m128i(
                    _mm_set1_epi32(*ws.add(1) as i32),
                    _mm_set1_epi32(*ws as i32),
                ),
            ),
            // [w0 w1 w0 w1 w2 w3 w2 w3]: 64-bit pairs spread by one vpermq.
            1 => Tw::lanes(
                _mm256_permute4x64_epi64::<0b0101_0000>(_mm256_castsi128_si256(_mm_loadu_si128(
                    w as *const __m128i,
                ))),
                _mm256_permute4x64_epi64::<0b0101_0000>(_mm256_castsi128_si256(_mm_loadu_si128(
                    ws as *const __m128i,
                ))),
            ),
            _ => Tw::lanes(Avx2::load(w), Avx2::load(ws)),
        }
    }
}

/// Butterflies of one tail layer on `C` chunks from word `s0`, with per-lane twiddles of layer
/// `K` from the tables `tabs` (values, companions).
///
/// # Safety
/// The tables must hold `n` words and `s0 + 16 C <= n`.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn tail_bfs<const L4: bool, const FWD: bool, const K: u32, const C: usize>(
    k: &Kern<'_, L4>,
    x: &mut [__m256i; C],
    y: &mut [__m256i; C],
    tabs: (&[u32], &[u32]),
    s0: usize,
) {
    let n = k.core.n;
    for (i, (x, y)) in x.iter_mut().zip(y.iter_mut()).enumerate() {
        // SAFETY: s0 + 16 i + 16 <= n, as the caller guarantees.
        unsafe {
            let t = lane_tw::<K>(tabs.0.as_ptr(), tabs.1.as_ptr(), n, s0 + 16 * i);
            if FWD {
                fwd_bf::<Avx2, L4>(x, y, &t, &k.c);
            } else {
                inv_bf::<Avx2, L4>(x, y, &t, &k.c);
            }
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

/// `vperm2i128`: the low 128-bit halves of `x` and `y`, then the high halves.
#[inline]
#[target_feature(enable = "avx2")]
fn halves(x: __m256i, y: __m256i) -> (__m256i, __m256i) {
    (
        _mm256_permute2x128_si256::<0x20>(x, y),
        _mm256_permute2x128_si256::<0x31>(x, y),
    )
}

/// `vpunpck{l,h}dq`: the interleaved low and high words of each 128-bit half.
#[inline]
#[target_feature(enable = "avx2")]
fn unpack(x: __m256i, y: __m256i) -> (__m256i, __m256i) {
    (_mm256_unpacklo_epi32(x, y), _mm256_unpackhi_epi32(x, y))
}

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

/// The register tail: 16-word chunks, gaps 8 (the plain chunk butterfly) to 1. Word
/// `e = b3 b2 b1 b0` of a chunk moves through these lane layouts (register bit; lane bits high
/// to low), forward: natural (b3; b2 b1 b0) -> `vperm2i128` -> (b2; b3 b1 b0) ->
/// `vpunpck{l,h}dq` -> (b1; b3 b0 b2) -> `vpunpck{l,h}dq` -> (b0; b3 b2 b1) -> unpack +
/// `vperm2i128` -> natural; the inverse goes back through them by `vshufps` and `vperm2i128`.
impl Tail32<Avx2> for Tables {
    fn fits(&self, _n: usize) -> bool {
        true
    }

    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn fwd_layers<const L4: bool, const C: usize>(
        &self,
        k: &Kern<'_, L4>,
        x: &mut [__m256i; C],
        y: &mut [__m256i; C],
        s0: usize,
    ) {
        let tabs = (&k.core.roots[..], &k.core.roots_shoup[..]);
        regroup(x, y, |x, y| halves(x, y));
        // SAFETY: (tail_bfs) the root tables hold n words and s0 + 16 C <= n (caller).
        unsafe {
            tail_bfs::<L4, true, 2, C>(k, x, y, tabs, s0);
            regroup(x, y, |x, y| unpack(x, y));
            tail_bfs::<L4, true, 1, C>(k, x, y, tabs, s0);
            regroup(x, y, |x, y| unpack(x, y));
            tail_bfs::<L4, true, 0, C>(k, x, y, tabs, s0);
        }
        regroup(x, y, |x, y| {
            let (lo, hi) = unpack(x, y);
            halves(lo, hi)
        });
    }

    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn inv_layers<const L4: bool, const C: usize>(
        &self,
        k: &Kern<'_, L4>,
        x: &mut [__m256i; C],
        y: &mut [__m256i; C],
        s0: usize,
    ) {
        let tabs = (&k.core.inv_roots[..], &k.core.inv_roots_shoup[..]);
        regroup(x, y, |u, v| {
            let (x, y) = halves(u, v);
            shuf_even_odd(x, y)
        });
        // SAFETY: (tail_bfs) the root tables hold n words and s0 + 16 C <= n (caller).
        unsafe {
            tail_bfs::<L4, false, 0, C>(k, x, y, tabs, s0);
            regroup(x, y, |x, y| shuf_even_odd(x, y));
            tail_bfs::<L4, false, 1, C>(k, x, y, tabs, s0);
            regroup(x, y, |x, y| shuf_even_odd(x, y));
            tail_bfs::<L4, false, 2, C>(k, x, y, tabs, s0);
        }
        regroup(x, y, |x, y| halves(x, y));
    }
}
