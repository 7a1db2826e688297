//! The AVX-512 tile kernels of [`super::linear`]: 5 rows x 32 coefficients of 64-bit
//! accumulators in 20 `zmm` registers, one `vpmuludq` + `vpaddq` per 8 products, each input
//! vector loaded once for the tile's 5 rows.

use core::arch::x86_64::*;

use super::linear::{TileAcc, TILE_ROWS, TILE_WORDS};

/// 8 coefficients from 64-bit words (`vpmuludq` reads only their low halves).
#[inline]
#[target_feature(enable = "avx512f")]
fn load8_u64(x: &[u64], at: usize) -> __m512i {
    let s = &x[at..at + 8];
    // SAFETY: `s` holds exactly 8 u64 = 64 bytes, the unaligned 512-bit load's extent.
    unsafe { _mm512_loadu_si512(s.as_ptr().cast()) }
}

/// `acc[r][j] += v[j] * k[r]` for every row and vector (`vpmuludq`: the low 32 bits of each
/// 64-bit lane of `v[j]`).
#[inline]
#[target_feature(enable = "avx512f")]
fn mac<const N: usize>(
    acc: &mut [[__m512i; N]; TILE_ROWS],
    v: &[__m512i; N],
    k: &[u32; TILE_ROWS],
) {
    for r in 0..TILE_ROWS {
        let kr = _mm512_set1_epi64(i64::from(k[r]));
        for j in 0..N {
            acc[r][j] = _mm512_add_epi64(acc[r][j], _mm512_mul_epu32(v[j], kr));
        }
    }
}

/// Folds every accumulator `a -> (a mod 2^32) + (a >> 32) c` (`cv`: `c` in every lane), which
/// keeps it congruent modulo q for `c = 2^32 mod q`.
#[inline]
#[target_feature(enable = "avx512f")]
fn fold_acc<const N: usize>(acc: &mut [[__m512i; N]; TILE_ROWS], cv: __m512i) {
    let lo32 = _mm512_set1_epi64(0xffff_ffff);
    for row in acc.iter_mut() {
        for a in row.iter_mut() {
            let hi = _mm512_srli_epi64::<32>(*a);
            *a = _mm512_add_epi64(_mm512_and_si512(*a, lo32), _mm512_mul_epu32(hi, cv));
        }
    }
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
            for (cx, ck) in cols.chunks(fold.max(1)).zip(ks.chunks(fold.max(1))) {
                for (&t, k) in cx.iter().zip(ck) {
                    let x = &panel[t as usize * TILE_WORDS..(t as usize + 1) * TILE_WORDS];
                    let v: [__m512i; V] = core::array::from_fn(|j| $load(x, 8 * j));
                    mac(&mut acc, &v, k);
                }
                fold_acc(&mut acc, cv);
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

kernel!(tile_u64, u64, load8_u64);

/// The 32-bit kernel reads 16 words per load: `vpmuludq` multiplies the even words in place
/// and the odd ones after a 32-bit shift, so no zero-extension is needed (half the loads and
/// no shuffles of the 64-bit-word kernel); the accumulators hold even and odd words apart and
/// are interleaved back on the way out.
#[target_feature(enable = "avx512f")]
pub(super) fn tile_u32(
    panel: &[u32],
    cols: &[u32],
    ks: &[[u32; TILE_ROWS]],
    fold: usize,
    c: u64,
) -> TileAcc {
    const V: usize = TILE_WORDS / 16;
    // acc[r][2j] = even words of vector j, acc[r][2j + 1] = its odd words.
    let mut acc = [[_mm512_setzero_si512(); 2 * V]; TILE_ROWS];
    let cv = _mm512_set1_epi64(c as i64);
    for (cx, ck) in cols.chunks(fold.max(1)).zip(ks.chunks(fold.max(1))) {
        for (&t, k) in cx.iter().zip(ck) {
            let x = &panel[t as usize * TILE_WORDS..(t as usize + 1) * TILE_WORDS];
            let v: [__m512i; 2 * V] = core::array::from_fn(|j| {
                let s = &x[16 * (j / 2)..16 * (j / 2) + 16];
                // SAFETY: `s` holds exactly 16 u32 = 64 bytes, the unaligned load's extent.
                let w = unsafe { _mm512_loadu_si512(s.as_ptr().cast()) };
                if j % 2 == 0 {
                    w
                } else {
                    _mm512_srli_epi64::<32>(w)
                }
            });
            mac(&mut acc, &v, k);
        }
        fold_acc(&mut acc, cv);
    }
    let mut out: TileAcc = [[0; TILE_WORDS]; TILE_ROWS];
    for (o, a) in out.iter_mut().zip(&acc) {
        for j in 0..V {
            let (mut even, mut odd) = ([0u64; 8], [0u64; 8]);
            // SAFETY: `even` and `odd` are exactly 8 u64 = 64 bytes, the stores' extent.
            unsafe {
                _mm512_storeu_si512(even.as_mut_ptr().cast(), a[2 * j]);
                _mm512_storeu_si512(odd.as_mut_ptr().cast(), a[2 * j + 1]);
            }
            for l in 0..8 {
                o[16 * j + 2 * l] = even[l];
                o[16 * j + 2 * l + 1] = odd[l];
            }
        }
    }
    out
}
