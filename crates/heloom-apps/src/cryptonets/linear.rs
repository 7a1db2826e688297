//! Linear layers over ciphertexts: every output is an exact integer combination
//! `sum_t k_jt * c_t` of the inputs (all at one level, size and scale), computed limb by limb.
//!
//! With one image per slot (batch packing), a dense or convolution layer multiplies each input
//! ciphertext by a scalar, so a layer is a modular matrix product: weights (outputs x inputs)
//! times the inputs' words. It runs cache-blocked: a work item is one polynomial, one limb and
//! one block of coefficients; inside it each input block (in L1) is multiplied into the
//! accumulators of the outputs that use it (in L2), with the vectorised Shoup multiply-add of
//! heloom-math. Work items are spread over the thread budget.

use crate::error::{AppError, Result};
use heloom_ckks::{Ciphertext, Context, Threads};
use heloom_math::{Form, Modulus, RnsPoly, Word};

/// Words a lazy multiply-add accepts: residues below 2^32, accumulated unreduced in u64.
pub trait LazyWord: Word {
    /// `acc[c] += x[c] * k` for `x[c] < 2^32`, `k < 2^32`, without reduction.
    fn mac(acc: &mut [u64], x: &[Self], k: u64);
}

#[multiversion::multiversion(targets("x86_64+avx512f+avx512bw+avx512dq+avx512vl", "x86_64+avx2"))]
fn mac_u32(acc: &mut [u64], x: &[u32], k: u64) {
    for (a, &v) in acc.iter_mut().zip(x) {
        *a = a.wrapping_add(u64::from(v) * k);
    }
}

#[multiversion::multiversion(targets("x86_64+avx512f+avx512bw+avx512dq+avx512vl", "x86_64+avx2"))]
fn mac_u64(acc: &mut [u64], x: &[u64], k: u64) {
    // Both factors below 2^32: a 32 x 32 -> 64-bit product (vpmuludq), no 64-bit multiply.
    for (a, &v) in acc.iter_mut().zip(x) {
        *a = a.wrapping_add((v & 0xffff_ffff) * (k & 0xffff_ffff));
    }
}

impl LazyWord for u32 {
    fn mac(acc: &mut [u64], x: &[u32], k: u64) {
        mac_u32(acc, x, k);
    }
}

impl LazyWord for u64 {
    fn mac(acc: &mut [u64], x: &[u64], k: u64) {
        mac_u64(acc, x, k);
    }
}

/// A 64-bit accumulator reduced modulo `m`.
fn reduce_acc<W: Word>(m: &Modulus<W>, a: u64) -> W {
    if W::BITS == 64 {
        m.reduce(W::from_u64(a))
    } else {
        m.reduce_wide(W::from_u64(a & 0xffff_ffff), W::from_u64(a >> 32))
    }
}

/// Products of residues below `q` an accumulator holding a value below `q` can take before
/// 64 bits overflow (at most 256), or 0 when `q` does not fit the lazy path (above 2^31).
fn lazy_terms(q: u64) -> usize {
    if q >= 1 << 31 {
        return 0;
    }
    let sq = (q - 1) as u128 * (q - 1) as u128;
    (((u64::MAX as u128 - q as u128) / sq.max(1)) as usize).min(256)
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

/// Coefficients per work item: the outputs' accumulators (`rows` blocks) should stay in L2
/// (about 256 KiB of them) while each input block streams through L1: 512 words for the
/// 100-output dense layer, 64 for the 845-output convolution.
fn block_words(rows: usize, word_bytes: usize) -> usize {
    let fit = ((256 << 10) / (rows.max(1) * word_bytes)).clamp(64, 1024);
    // The largest power of two not above the fit.
    1 << (usize::BITS - 1 - fit.leading_zeros())
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
    // Integer weights and their residues, per limb in the column layout.
    let mut kint: Vec<Vec<(usize, i128)>> = Vec::with_capacity(w.cols.len());
    for col in &w.cols {
        let mut c = Vec::with_capacity(col.len());
        for &(j, v) in col {
            let k = (v * mult).round();
            if !k.is_finite() || k.abs() >= 2f64.powi(100) || j >= w.rows {
                return Err(AppError::Invalid(format!(
                    "weight {v} (row {j}) cannot be encoded at multiplier 2^{:.1}",
                    mult.log2()
                )));
            }
            c.push((j, k as i128));
        }
        kint.push(c);
    }
    let residues: Vec<Vec<Vec<(usize, u64)>>> = mods
        .iter()
        .map(|m| {
            let q = m.value() as i128;
            kint.iter()
                .map(|c| {
                    c.iter()
                        .map(|&(j, k)| (j, k.rem_euclid(q) as u64))
                        .collect()
                })
                .collect()
        })
        .collect();
    // The outputs, accumulated in place: work item (poly p, limb i, block b) owns block b of
    // limb i of polynomial p of every output.
    let mut outs: Vec<Vec<RnsPoly<W>>> = (0..w.rows)
        .map(|_| (0..size).map(|_| basis.zero(Form::Ntt)).collect())
        .collect();
    // Few outputs (dense layers): input-major, accumulators in L2. Many outputs with few
    // inputs each (the convolution): output-major with long blocks, so each kernel call is
    // long enough to amortise its setup.
    let row_major = w.rows > 256;
    let block = if row_major {
        1024
    } else {
        block_words(w.rows, W::BITS as usize / 8)
    };
    let rows_form: Vec<Vec<Vec<(usize, u64)>>> = if row_major {
        residues
            .iter()
            .map(|cols| {
                let mut r = vec![Vec::new(); w.rows];
                for (t, col) in cols.iter().enumerate() {
                    for &(j, k) in col {
                        r[j].push((t, k));
                    }
                }
                r
            })
            .collect()
    } else {
        Vec::new()
    };
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
        let terms = lazy_terms(m.value());
        if row_major {
            let mut acc = vec![0u64; hi - lo];
            for (j, row) in rows_form[i].iter().enumerate() {
                if terms >= 2 {
                    acc.fill(0);
                    for (c, &(t, k)) in row.iter().enumerate() {
                        W::mac(&mut acc, &inputs[t].polys()[p].limb(i)[lo..hi], k);
                        if (c + 1) % (terms - 1) == 0 {
                            for a in acc.iter_mut() {
                                *a = reduce_acc(m, *a).to_u64();
                            }
                        }
                    }
                    for (o, &v) in rows[j].iter_mut().zip(&acc) {
                        *o = reduce_acc(m, v);
                    }
                } else {
                    for &(t, k) in row {
                        if k != 0 {
                            let x = &inputs[t].polys()[p].limb(i)[lo..hi];
                            elt.mul_scalar_add(m, rows[j], x, k)?;
                        }
                    }
                }
            }
            return Ok(());
        }
        if terms >= 2 {
            // Lazy: products summed unreduced in 64 bits, reduced every `terms` inputs (each
            // input adds at most one product to each output).
            let len = hi - lo;
            let mut acc = vec![0u64; rows.len() * len];
            let mut pending = 0;
            for (t, col) in residues[i].iter().enumerate() {
                let x = &inputs[t].polys()[p].limb(i)[lo..hi];
                for &(j, k) in col {
                    W::mac(&mut acc[j * len..(j + 1) * len], x, k);
                }
                pending += 1;
                if pending == terms - 1 {
                    for a in acc.iter_mut() {
                        *a = reduce_acc(m, *a).to_u64();
                    }
                    pending = 0;
                }
            }
            for (row, a) in rows.iter_mut().zip(acc.chunks_exact(len)) {
                for (o, &v) in row.iter_mut().zip(a) {
                    *o = reduce_acc(m, v);
                }
            }
            return Ok(());
        }
        for (t, col) in residues[i].iter().enumerate() {
            let x = &inputs[t].polys()[p].limb(i)[lo..hi];
            for &(j, k) in col {
                if k != 0 {
                    elt.mul_scalar_add(m, rows[j], x, k)?;
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
    fn lazy_sums_never_overflow() {
        for q in [(1u64 << 29) - 3, (1 << 30) - 35, (1 << 31) - 1, 97] {
            let t = lazy_terms(q);
            assert!(t >= 2, "{q}");
            // A reduced value plus `t` products of residues stays below 2^64.
            let worst = (q - 1) as u128 + t as u128 * ((q - 1) as u128 * (q - 1) as u128);
            assert!(worst <= u64::MAX as u128, "{q}: {t}");
        }
        assert_eq!(lazy_terms(1 << 31), 0);
        assert_eq!(lazy_terms((1 << 29) - 3), 64);
    }

    #[test]
    fn lazy_multiply_add_is_exact() {
        let x32: Vec<u32> = (0..1000)
            .map(|i| (i * 2_654_435_761u64 % (1 << 31)) as u32)
            .collect();
        let x64: Vec<u64> = x32.iter().map(|&v| v as u64).collect();
        let k = (1u64 << 31) - 5;
        let (mut a, mut b) = (vec![7u64; 1000], vec![7u64; 1000]);
        u32::mac(&mut a, &x32, k);
        u64::mac(&mut b, &x64, k);
        for (i, (&u, &v)) in a.iter().zip(&b).enumerate() {
            assert_eq!(u, 7 + x64[i] * k);
            assert_eq!(v, u);
        }
    }
}
