//! The AVX-512 tile kernel of [`super::linear`]: 5 rows x 32 coefficients of 64-bit
//! accumulators in 20 `zmm` registers, one `vpmuludq` + `vpaddq` per 8 products, each input
//! vector loaded once for the tile's 5 rows.

use core::arch::x86_64::*;

use super::linear::{TileAcc, TILE_ROWS, TILE_WORDS};

/// 8 coefficients widened to 64-bit lanes, from 32-bit words.
#[inline]
#[target_feature(enable = "avx512f")]
fn load8_u32(x: &[u32], at: usize) -> __m512i {
    let s = &x[at..at + 8];
    // SAFETY: `s` holds exactly 8 u32 = 32 bytes, the unaligned 256-bit load's extent.
    let v = unsafe { _mm256_loadu_si256(s.as_ptr().cast()) };
    _mm512_cvtepu32_epi64(v)
}

/// 8 coefficients from 64-bit words (`vpmuludq` reads only their low halves).
#[inline]
#[target_feature(enable = "avx512f")]
fn load8_u64(x: &[u64], at: usize) -> __m512i {
    let s = &x[at..at + 8];
    // SAFETY: `s` holds exactly 8 u64 = 64 bytes, the unaligned 512-bit load's extent.
    unsafe { _mm512_loadu_si512(s.as_ptr().cast()) }
}

macro_rules! kernel {
    ($name:ident, $word:ty, $load:ident) => {
        /// `acc[r][w] = sum_i panel[cols[i]][w] * ks[i][r]` folded every `fold` terms by
        /// `a -> (a mod 2^32) + (a >> 32) c` (congruent modulo q, `c = 2^32 mod q`).
        #[target_feature(enable = "avx512f")]
        pub(super) fn $name(
            panel: &[$word],
            cols: &[u32],
            ks: &[[u32; TILE_ROWS]],
            fold: usize,
            c: u64,
        ) -> TileAcc {
            const V: usize = TILE_WORDS / 8;
            let mut acc = [[_mm512_setzero_si512(); V]; TILE_ROWS];
            let cv = _mm512_set1_epi64(c as i64);
            let lo32 = _mm512_set1_epi64(0xffff_ffff);
            for (cx, ck) in cols.chunks(fold.max(1)).zip(ks.chunks(fold.max(1))) {
                for (&t, k) in cx.iter().zip(ck) {
                    let x = &panel[t as usize * TILE_WORDS..(t as usize + 1) * TILE_WORDS];
                    let v: [__m512i; V] = core::array::from_fn(|j| $load(x, 8 * j));
                    for r in 0..TILE_ROWS {
                        let kr = _mm512_set1_epi64(i64::from(k[r]));
                        for j in 0..V {
                            acc[r][j] = _mm512_add_epi64(acc[r][j], _mm512_mul_epu32(v[j], kr));
                        }
                    }
                }
                for row in acc.iter_mut() {
                    for a in row.iter_mut() {
                        let hi = _mm512_srli_epi64::<32>(*a);
                        *a = _mm512_add_epi64(_mm512_and_si512(*a, lo32), _mm512_mul_epu32(hi, cv));
                    }
                }
            }
            let mut out: TileAcc = [[0; TILE_WORDS]; TILE_ROWS];
            for (o, a) in out.iter_mut().zip(&acc) {
                for (j, v) in a.iter().enumerate() {
                    let s = &mut o[8 * j..8 * j + 8];
                    // SAFETY: `s` is exactly 8 u64 = 64 bytes, the unaligned store's extent.
                    unsafe { _mm512_storeu_si512(s.as_mut_ptr().cast(), *v) };
                }
            }
            out
        }
    };
}

kernel!(tile_u32, u32, load8_u32);
kernel!(tile_u64, u64, load8_u64);
