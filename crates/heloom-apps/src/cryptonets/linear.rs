//! Linear layers over ciphertexts: every output is an exact integer combination
//! `sum_t k_jt * c_t` of the inputs (all at one level, size and scale), computed limb by limb.
//!
//! With one image per slot (batch packing), a dense or convolution layer multiplies each input
//! ciphertext by a scalar, so a layer is a modular matrix product: weights (outputs x inputs)
//! times the inputs' words. It runs as a register-tiled GEMM: rows that use the same inputs
//! (5 consecutive dense outputs; the 5 maps of one convolution position) form a tile, and a
//! tile's 5 x 32 accumulators stay in vector registers while its inputs stream past, each
//! input word loaded once per 5 products. Products of residues below 2^31 are summed
//! unreduced in 64 bits and folded back below 2^61.1 every few dozen terms with one 32 x 32
//! multiply; only the final sum is reduced modulo the prime. Work items (polynomial, limb,
//! block of coefficients) are spread over the thread budget.

use crate::error::{AppError, Result};
use heloom_ckks::{Ciphertext, Context, Threads};
use heloom_math::{Form, Modulus, RnsPoly, Word};

/// Rows of a tile (the convolution has 5 maps; dense layers are cut into tiles of 5 rows).
pub const TILE_ROWS: usize = 5;
/// Coefficients of a tile: 4 AVX-512 vectors of 64-bit accumulators per row.
pub const TILE_WORDS: usize = 32;

/// One tile's accumulators.
pub type TileAcc = [[u64; TILE_WORDS]; TILE_ROWS];

/// Words the tiled kernel accepts: residues below 2^31, multiplied 32 x 32 -> 64 bits.
pub trait LazyWord: Word {
    /// `acc[r][w] = sum_i x_i[w] * ks[i][r]` with `x_i = panel[cols[i] * TILE_WORDS..][..
    /// TILE_WORDS]` (words below 2^32), folded every `fold` terms (see [`fold_terms`]) with
    /// `c = 2^32 mod q`; the result is congruent modulo `q` and below 2^64.
    fn tile(panel: &[Self], cols: &[u32], ks: &[[u32; TILE_ROWS]], fold: usize, c: u64) -> TileAcc;
}

/// Whether the AVX-512 tile kernel can run (checked once; `HELOOM_BACKEND=scalar` or `avx2`
/// keeps the portable kernel, as for heloom-math's kernels).
fn avx512() -> bool {
    static OK: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *OK.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        {
            let forced = std::env::var("HELOOM_BACKEND")
                .is_ok_and(|b| matches!(b.trim(), "scalar" | "avx2"));
            !forced && std::is_x86_feature_detected!("avx512f")
        }
        #[cfg(not(target_arch = "x86_64"))]
        false
    })
}

impl LazyWord for u32 {
    fn tile(panel: &[u32], cols: &[u32], ks: &[[u32; TILE_ROWS]], fold: usize, c: u64) -> TileAcc {
        #[cfg(target_arch = "x86_64")]
        if avx512() {
            // SAFETY: AVX-512F was detected at run time.
            return unsafe { super::tile_avx512::tile_u32(panel, cols, ks, fold, c) };
        }
        tile_portable(panel, cols, ks, fold, c)
    }
}

impl LazyWord for u64 {
    fn tile(panel: &[u64], cols: &[u32], ks: &[[u32; TILE_ROWS]], fold: usize, c: u64) -> TileAcc {
        #[cfg(target_arch = "x86_64")]
        if avx512() {
            // SAFETY: AVX-512F was detected at run time.
            return unsafe { super::tile_avx512::tile_u64(panel, cols, ks, fold, c) };
        }
        tile_portable(panel, cols, ks, fold, c)
    }
}

/// The portable kernel (what non-AVX-512 machines run), for tests against the dispatched one.
pub fn tile_portable<W: LazyWord>(
    panel: &[W],
    cols: &[u32],
    ks: &[[u32; TILE_ROWS]],
    fold: usize,
    c: u64,
) -> TileAcc {
    let mut acc: TileAcc = [[0; TILE_WORDS]; TILE_ROWS];
    for (chunk_x, chunk_k) in cols.chunks(fold.max(1)).zip(ks.chunks(fold.max(1))) {
        for (&t, k) in chunk_x.iter().zip(chunk_k) {
            let x = &panel[t as usize * TILE_WORDS..(t as usize + 1) * TILE_WORDS];
            for (r, row) in acc.iter_mut().enumerate() {
                for (a, v) in row.iter_mut().zip(x) {
                    *a = a.wrapping_add((v.to_u64() & 0xffff_ffff) * u64::from(k[r]));
                }
            }
        }
        for a in acc.iter_mut().flatten() {
            *a = (*a & 0xffff_ffff) + (*a >> 32) * c;
        }
    }
    acc
}

/// A 64-bit accumulator reduced modulo `m`.
fn reduce_acc<W: Word>(m: &Modulus<W>, a: u64) -> W {
    if W::BITS == 64 {
        m.reduce(W::from_u64(a))
    } else {
        m.reduce_wide(W::from_u64(a & 0xffff_ffff), W::from_u64(a >> 32))
    }
}

/// Products of residues below `q` the tiled kernel may add between two folds without
/// overflowing 64 bits (a fold leaves at most `2^32 - 1 + (2^32 - 1) c`, `c = 2^32 mod q`), or
/// 0 when `q` does not fit the lazy path (2^31 and above).
pub fn fold_terms(q: u64) -> usize {
    if !(2..1 << 31).contains(&q) {
        return 0;
    }
    let c = ((1u128 << 32) % q as u128) as u64;
    let after_fold = (u32::MAX as u128) * (1 + c as u128);
    let sq = (q - 1) as u128 * (q - 1) as u128;
    ((u64::MAX as u128 - after_fold) / sq.max(1)).min(1 << 20) as usize
}

/// Weights in column form: for each input `t`, the outputs `j` using it and their weight.
#[derive(Clone, Debug)]
pub struct Columns {
    /// Number of outputs.
    pub rows: usize,
    /// `cols[t]`: `(j, w_jt)` for every nonzero weight of input `t`.
    pub cols: Vec<Vec<(usize, f64)>>,
}

impl Columns {
    /// From a dense row-major matrix (`rows x cols`), skipping zeros.
    pub fn from_dense(w: &[f64], rows: usize, cols: usize) -> Result<Self> {
        if w.len() != rows * cols {
            return Err(AppError::Invalid(format!(
                "{} weights for a {rows} x {cols} layer",
                w.len()
            )));
        }
        let mut out = vec![Vec::new(); cols];
        for j in 0..rows {
            for (t, c) in out.iter_mut().enumerate() {
                let v = w[j * cols + t];
                if v != 0.0 {
                    c.push((j, v));
                }
            }
        }
        Ok(Self { rows, cols: out })
    }
}

/// Rows grouped into tiles: rows with the same inputs are put side by side (sorted by their
/// input list), then cut into tiles of up to [`TILE_ROWS`]; a tile's inputs are the union of
/// its rows' (a missing weight is a zero).
struct Tiles {
    /// Per tile: its rows and its inputs.
    tiles: Vec<(Vec<usize>, Vec<u32>)>,
}

impl Tiles {
    fn new(w: &Columns) -> Self {
        let mut inputs: Vec<Vec<usize>> = vec![Vec::new(); w.rows];
        for (t, col) in w.cols.iter().enumerate() {
            for &(j, _) in col {
                if j < w.rows {
                    inputs[j].push(t);
                }
            }
        }
        let mut order: Vec<usize> = (0..w.rows).collect();
        order.sort_by(|&a, &b| inputs[a].cmp(&inputs[b]).then(a.cmp(&b)));
        let tiles = order
            .chunks(TILE_ROWS)
            .map(|rows| {
                let mut cols: Vec<u32> = rows
                    .iter()
                    .flat_map(|&j| inputs[j].iter().map(|&t| t as u32))
                    .collect();
                cols.sort_unstable();
                cols.dedup();
                (rows.to_vec(), cols)
            })
            .collect();
        Self { tiles }
    }
}

/// Coefficients per work item: a multiple of [`TILE_WORDS`] whose packed panel (every input's
/// words of the block) stays within about half of a 1 MiB L2.
fn block_words(inputs: usize, word_bytes: usize) -> usize {
    let fit = (512 << 10) / (inputs.max(1) * word_bytes);
    (fit / TILE_WORDS).clamp(1, 16) * TILE_WORDS
}

/// `out_j = sum_t round(w_jt * mult) * inputs[t]` for every output `j`, exactly (modulo each
/// prime), at scale `inputs' scale * mult`; rescale afterwards to divide `mult` out (pass
/// `mult = q_level` for the usual one-level product). Inputs: ciphertexts at one level, size
/// and scale, one per column of `w`.
pub fn combine<W: LazyWord>(
    ctx: &Context<W>,
    inputs: &[&Ciphertext<W>],
    w: &Columns,
    mult: f64,
    threads: Threads,
) -> Result<Vec<Ciphertext<W>>> {
    let first = inputs
        .first()
        .ok_or_else(|| AppError::Invalid("a linear layer needs inputs".into()))?;
    if inputs.len() != w.cols.len() {
        return Err(AppError::Invalid(format!(
            "{} inputs for a layer of {} columns",
            inputs.len(),
            w.cols.len()
        )));
    }
    let (level, size, scale) = (first.level(), first.size(), first.scale());
    if inputs
        .iter()
        .any(|c| c.level() != level || c.size() != size || c.scale() != scale)
    {
        return Err(AppError::Invalid(
            "a linear layer's inputs must share level, size and scale".into(),
        ));
    }
    let basis = ctx.q_basis(level)?;
    let (mods, elt) = (basis.moduli(), basis.eltwise());
    let n = ctx.n();
    let nl = level + 1;
    // Integer weights, dense per row over the inputs (zeros where absent).
    let mut kint: Vec<Vec<i128>> = vec![vec![0; w.cols.len()]; w.rows];
    for (t, col) in w.cols.iter().enumerate() {
        for &(j, v) in col {
            let k = (v * mult).round();
            if !k.is_finite() || k.abs() >= 2f64.powi(100) || j >= w.rows {
                return Err(AppError::Invalid(format!(
                    "weight {v} (row {j}) cannot be encoded at multiplier 2^{:.1}",
                    mult.log2()
                )));
            }
            kint[j][t] = k as i128;
        }
    }
    let tiles = Tiles::new(w);
    // Per limb and tile: the weights' residues, one [u32; TILE_ROWS] per input of the tile.
    let lazy_block = block_words(inputs.len(), W::BITS as usize / 8);
    let lazy = mods.iter().all(|m| fold_terms(m.value()) > 0) && n.is_multiple_of(lazy_block);
    let ks: Vec<Vec<Vec<[u32; TILE_ROWS]>>> = if lazy {
        mods.iter()
            .map(|m| {
                let q = m.value() as i128;
                tiles
                    .tiles
                    .iter()
                    .map(|(rows, cols)| {
                        cols.iter()
                            .map(|&t| {
                                std::array::from_fn(|r| {
                                    rows.get(r)
                                        .map_or(0, |&j| kint[j][t as usize].rem_euclid(q) as u32)
                                })
                            })
                            .collect()
                    })
                    .collect()
            })
            .collect()
    } else {
        Vec::new()
    };
    // Primes of 31 bits and more (no lazy path): per limb and input, the residues of its
    // weights.
    let reduced: Vec<Vec<Vec<(usize, u64)>>> = if lazy {
        Vec::new()
    } else {
        mods.iter()
            .map(|m| {
                let q = m.value() as i128;
                w.cols
                    .iter()
                    .enumerate()
                    .map(|(t, col)| {
                        col.iter()
                            .map(|&(j, _)| (j, kint[j][t].rem_euclid(q) as u64))
                            .filter(|&(_, k)| k != 0)
                            .collect()
                    })
                    .collect()
            })
            .collect()
    };
    // The outputs, written in place: work item (poly p, limb i, block b) owns block b of limb
    // i of polynomial p of every output.
    let mut outs: Vec<Vec<RnsPoly<W>>> = (0..w.rows)
        .map(|_| (0..size).map(|_| basis.zero(Form::Ntt)).collect())
        .collect();
    let block = if lazy { lazy_block } else { 1024.min(n) };
    let blocks = n.div_ceil(block);
    let mut items: Vec<Vec<&mut [W]>> = (0..size * nl * blocks)
        .map(|_| Vec::with_capacity(w.rows))
        .collect();
    for polys in outs.iter_mut() {
        for (p, poly) in polys.iter_mut().enumerate() {
            for (i, limb) in poly.limbs_mut().enumerate() {
                for (b, chunk) in limb.chunks_mut(block).enumerate() {
                    items[(p * nl + i) * blocks + b].push(chunk);
                }
            }
        }
    }
    threads.try_for_each_mut(&mut items, |item, rows| -> Result<()> {
        let (p, rest) = (item / (nl * blocks), item % (nl * blocks));
        let (i, b) = (rest / blocks, rest % blocks);
        let (lo, hi) = (b * block, ((b + 1) * block).min(n));
        let m = &mods[i];
        if !lazy {
            // Primes of 31 bits and more: one reduced multiply-add per weight.
            for (t, col) in reduced[i].iter().enumerate() {
                let x = &inputs[t].polys()[p].limb(i)[lo..hi];
                for &(j, k) in col {
                    elt.mul_scalar_add(m, rows[j], x, k)?;
                }
            }
            return Ok(());
        }
        let q = m.value();
        let fold = fold_terms(q);
        let c = (1u64 << 32) % q;
        // The inputs' words of this block, packed into one contiguous panel, 32 words of
        // every input per chunk: the kernel then streams it instead of touching hundreds of
        // ciphertexts whose limbs sit at the same offsets of large allocations (cache-set
        // conflicts), and each input's block is copied in one sequential run.
        let len = hi - lo;
        let chunk = inputs.len() * TILE_WORDS;
        let mut panel = vec![W::ZERO; chunk * len.div_ceil(TILE_WORDS)];
        for (t, ct) in inputs.iter().enumerate() {
            let src = &ct.polys()[p].limb(i)[lo..hi];
            for (k, part) in src.chunks_exact(TILE_WORDS).enumerate() {
                let at = k * chunk + t * TILE_WORDS;
                panel[at..at + TILE_WORDS].copy_from_slice(part);
            }
        }
        for (k, part) in panel.chunks_exact(chunk).enumerate() {
            let off = k * TILE_WORDS;
            for ((trows, tcols), tks) in tiles.tiles.iter().zip(&ks[i]) {
                let acc = W::tile(part, tcols, tks, fold, c);
                for (&j, a) in trows.iter().zip(&acc) {
                    for (o, &v) in rows[j][off..off + TILE_WORDS].iter_mut().zip(a) {
                        *o = reduce_acc(m, v);
                    }
                }
            }
        }
        Ok(())
    })?;
    drop(items);
    outs.into_iter()
        .map(|polys| Ok(ctx.ciphertext_from_polys(polys, level, scale * mult, first.slots())?))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folds_never_overflow() {
        for q in [
            (1u64 << 29) - 3,
            536_813_569,
            (1 << 30) - 35,
            (1 << 31) - 1,
            97,
        ] {
            let t = fold_terms(q);
            assert!(t >= 2, "{q}");
            // The largest value a fold leaves plus `t` products of residues fits 64 bits.
            let c = (1u128 << 32) % q as u128;
            let worst = (u32::MAX as u128) * (1 + c) + t as u128 * ((q - 1) as u128).pow(2);
            assert!(worst <= u64::MAX as u128, "{q}: {t}");
        }
        assert_eq!(fold_terms(1 << 31), 0);
        assert_eq!(fold_terms(1), 0);
        // 2^32 mod (2^29 - 3) = 24: a fold leaves under 2^36.7, so 64 products still fit.
        assert_eq!(fold_terms((1 << 29) - 3), 64);
    }

    /// The tiled kernel against a plain sum mod q, for both words, with long sums (many
    /// folds) of residues at the top of the range.
    #[test]
    fn tile_sums_are_exact() {
        for q in [(1u64 << 29) - 3, (1 << 31) - 1, 1_073_741_789] {
            let terms = 845;
            let mut s = 0x9e37_79b9_7f4a_7c15u64;
            let mut next = |m: u64| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                // Half the draws at q - 1 (the worst case), half uniform.
                if s & 1 == 0 {
                    m - 1
                } else {
                    (s >> 1) % m
                }
            };
            let x64: Vec<Vec<u64>> = (0..terms)
                .map(|_| (0..TILE_WORDS + 8).map(|_| next(q)).collect())
                .collect();
            let ks: Vec<[u32; TILE_ROWS]> = (0..terms)
                .map(|_| std::array::from_fn(|_| next(q) as u32))
                .collect();
            let (fold, c) = (fold_terms(q), (1u64 << 32) % q);
            // Panel rows in reverse order of the terms: the kernel follows `cols`.
            let off = 8;
            let cols: Vec<u32> = (0..terms as u32).rev().collect();
            let mut p64 = vec![0u64; terms * TILE_WORDS];
            for (t, x) in x64.iter().enumerate() {
                let at = (terms - 1 - t) * TILE_WORDS;
                p64[at..at + TILE_WORDS].copy_from_slice(&x[off..off + TILE_WORDS]);
            }
            let p32: Vec<u32> = p64.iter().map(|&v| v as u32).collect();
            let a = u64::tile(&p64, &cols, &ks, fold, c);
            let b = u32::tile(&p32, &cols, &ks, fold, c);
            // The dispatched (AVX-512 where present) kernels equal the portable one exactly.
            assert_eq!(a, tile_portable(&p64, &cols, &ks, fold, c));
            assert_eq!(b, tile_portable(&p32, &cols, &ks, fold, c));
            for r in 0..TILE_ROWS {
                for w in 0..TILE_WORDS {
                    let want = (0..terms).fold(0u128, |acc, t| {
                        (acc + x64[t][off + w] as u128 * ks[t][r] as u128) % q as u128
                    }) as u64;
                    assert_eq!(a[r][w] % q, want, "u64 q={q} r={r} w={w}");
                    assert_eq!(b[r][w] % q, want, "u32 q={q} r={r} w={w}");
                }
            }
        }
    }

    #[test]
    fn tiles_group_rows_with_the_same_inputs() {
        // Rows 0, 2, 4 use inputs {0, 1}; rows 1, 3 use {2}: two tiles.
        let cols = vec![
            vec![(0, 1.0), (2, 1.0), (4, 1.0)],
            vec![(0, 1.0), (2, 1.0), (4, 1.0)],
            vec![(1, 1.0), (3, 1.0)],
        ];
        let t = Tiles::new(&Columns { rows: 5, cols });
        assert_eq!(t.tiles, vec![(vec![0, 2, 4, 1, 3], vec![0, 1, 2])]);
        let t = Tiles::new(&Columns {
            rows: 7,
            cols: vec![(0..7).map(|j| (j, 1.0)).collect()],
        });
        assert_eq!(
            t.tiles,
            vec![(vec![0, 1, 2, 3, 4], vec![0]), (vec![5, 6], vec![0])]
        );
    }
}
