//! AVX-512 negacyclic NTT for 32-bit words: 16 lanes per register (Nishi et al.: primes below
//! 2^32 double the SIMD lanes of the 64-bit path and halve its memory traffic).
//!
//! Structure (forward; the inverse mirrors it; the butterflies and the tail's chunk loop are the
//! 32-bit family's, `super::shoup32`):
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

use super::shoup32::{fwd_bf, inv_bf, Tail32, Tw};
use super::skeleton::Kernel;
use super::{AlignedVec, NttCore};
use crate::simd::avx512::Avx512;
use crate::simd::Prim32;

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
            let mut out = AlignedVec::with_capacity(chunks * TAIL_TW);
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

super::shoup32::kernel!("avx512f,avx512dq,avx512bw,avx512vl", Avx512, __m512i);

/// Loads a 16-entry index table.
#[inline]
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl")]
fn load_idx(t: &[u32; 16]) -> __m512i {
    // SAFETY: `t` holds exactly 16 words.
    unsafe { Avx512::load(t.as_ptr()) }
}

/// Per-lane twiddles of the gap-1 layer (layout 0) for the chunk at word `s`: lane `l` gets
/// root `(n >> 1) + (s >> 1) + l`, one contiguous load; the odd-lane companions come from the
/// same table one word further.
///
/// # Safety
/// `w` and `ws` must hold `n` words and `s + 32 <= n`.
#[inline]
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl")]
unsafe fn lane_tw0(w: *const u32, ws: *const u32, n: usize, s: usize) -> Tw<Avx512> {
    let off = (n >> 1) + (s >> 1);
    // off + 16 <= n since s <= n - 32; the companion load skips its last word, which would be
    // entry off + 16 (past the table for the last chunk).
    // SAFETY: every read is within [off, off + 16) of tables holding n words.
    unsafe {
        Tw {
            w: Avx512::load(w.add(off)),
            ws: Avx512::load(ws.add(off)),
            ws_odd: _mm512_maskz_loadu_epi32(0x7fff, ws.add(off + 1) as *const i32),
        }
    }
}

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
    k: &Kern<'_, L4>,
    x: &mut [__m512i; C],
    y: &mut [__m512i; C],
    tt: &[u32],
    tabs: (&[u32], &[u32]),
    s0: usize,
) {
    let n = k.core.n;
    for (i, (x, y)) in x.iter_mut().zip(y.iter_mut()).enumerate() {
        let s = s0 + 32 * i;
        // SAFETY: s + 32 <= n and the table bounds, as the caller guarantees.
        unsafe {
            let t = if K == 0 {
                lane_tw0(tabs.0.as_ptr(), tabs.1.as_ptr(), n, s)
            } else {
                let p = tt
                    .as_ptr()
                    .add((s >> 5) * TAIL_TW + (3 - K as usize) * 2 * LANES);
                Tw::pairs(Avx512::load(p), Avx512::load(p.add(LANES)))
            };
            if FWD {
                fwd_bf::<Avx512, L4>(x, y, &t, &k.c);
            } else {
                inv_bf::<Avx512, L4>(x, y, &t, &k.c);
            }
        }
    }
}

/// The register tail: 32-word chunks, gaps 16 (the plain chunk butterfly) to 1, through the
/// layouts 3, 2, 1, 0 by one bit exchange each ([`swap`]) and one `vpermt2d` pair back.
impl Tail32<Avx512> for Tables {
    fn fits(&self, n: usize) -> bool {
        self.fwd.len() == n / 32 * TAIL_TW && self.inv.len() == n / 32 * TAIL_TW
    }

    #[inline]
    #[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl")]
    unsafe fn fwd_layers<const L4: bool, const C: usize>(
        &self,
        k: &Kern<'_, L4>,
        x: &mut [__m512i; C],
        y: &mut [__m512i; C],
        s0: usize,
    ) {
        let tabs = (&k.core.roots[..], &k.core.roots_shoup[..]);
        let tt = &self.fwd[..];
        // Natural layout -> layouts 3, 2, 1, 0 by one bit exchange each.
        // SAFETY: the root tables hold n words, the expanded table n / 32 chunks (`fits`), and
        // s0 + 32 C <= n (caller).
        unsafe {
            swap_all::<3, C>(x, y);
            tail_layer::<L4, true, 3, C>(k, x, y, tt, tabs, s0);
            swap_all::<2, C>(x, y);
            tail_layer::<L4, true, 2, C>(k, x, y, tt, tabs, s0);
            swap_all::<1, C>(x, y);
            tail_layer::<L4, true, 1, C>(k, x, y, tt, tabs, s0);
            swap_all::<0, C>(x, y);
            tail_layer::<L4, true, 0, C>(k, x, y, tt, tabs, s0);
        }
        let back = [load_idx(&TO_NATURAL[0]), load_idx(&TO_NATURAL[1])];
        regroup(x, y, &back);
    }

    #[inline]
    #[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl")]
    unsafe fn inv_layers<const L4: bool, const C: usize>(
        &self,
        k: &Kern<'_, L4>,
        x: &mut [__m512i; C],
        y: &mut [__m512i; C],
        s0: usize,
    ) {
        let tabs = (&k.core.inv_roots[..], &k.core.inv_roots_shoup[..]);
        let tt = &self.inv[..];
        let to0 = [load_idx(&TO_LAYOUT0[0]), load_idx(&TO_LAYOUT0[1])];
        regroup(x, y, &to0);
        // Layouts 0, 1, 2, 3 -> natural by one bit exchange each (the forward steps reversed).
        // SAFETY: as in `fwd_layers`.
        unsafe {
            tail_layer::<L4, false, 0, C>(k, x, y, tt, tabs, s0);
            swap_all::<0, C>(x, y);
            tail_layer::<L4, false, 1, C>(k, x, y, tt, tabs, s0);
            swap_all::<1, C>(x, y);
            tail_layer::<L4, false, 2, C>(k, x, y, tt, tabs, s0);
            swap_all::<2, C>(x, y);
            tail_layer::<L4, false, 3, C>(k, x, y, tt, tabs, s0);
            swap_all::<3, C>(x, y);
        }
    }
}
