//! Low-latency packing of one image (LoLa, Brutzkus, Gilad-Bachrach and Elisha 2019): the
//! whole image in one ciphertext, layers as rotations and plaintext products.
//!
//! Slots (N/2 = 8192) are 32 blocks of 256. The client encrypts the convolution's input in
//! im2col form: block `k` (kernel position `ky * 5 + kx`, 25 blocks) holds at `i * 13 + j` the
//! pixel under that kernel position for output `(i, j)`. The server, six levels:
//! 1. per map `m`: the product with a plaintext holding `w[m][k]` in block `k`, then a
//!    rotate-and-sum over the 32 blocks (5 rotations): every block holds map `m`'s outputs;
//! 2. a plaintext mask keeps map `m` in block `m` only; the five are added, with the bias;
//! 3. square;
//! 4. dense 845 -> 100 as a 128 x 2048 Halevi-Shoup product (Halevi and Shoup 2014): the input
//!    made 2048-periodic (2 rotations), 128 generalized diagonals with baby-step giant-step
//!    ([`LinearTransform`]: 15 hoisted baby rotations, 7 giant), a rotate-and-sum over the 16 row blocks (4
//!    rotations); slot `s` then holds output `s mod 128`;
//! 5. square;
//! 6. dense 100 -> 10 the same way as 16 x 128 (3 baby, 3 giant, 3 summing rotations).
//!
//! Every plaintext factor is encoded once, at the scale of the prime the next rescale
//! removes. Columns of padding and of unused slots are zero in the dense matrices, so
//! whatever those slots hold never reaches an output.

use super::model::{CryptoNet, CLASSES, CONV_MAPS, CONV_OUT, FC1, HIDDEN, KERNEL, PADDED, STRIDE};
use crate::error::{AppError, Result};
use heloom_ckks::{
    Ciphertext, Context, Decryptor, Encryptor, Evaluator, LinearTransform, Plaintext, SecretKey,
    Threads,
};
use heloom_math::Word;
use std::sync::Arc;

/// Multiplicative levels the single-image network uses.
pub const LEVELS: usize = 6;
/// Slots per block.
pub(crate) const BLOCK: usize = 256;
/// Blocks the convolution's kernel positions use.
pub(crate) const KPOS: usize = KERNEL * KERNEL;
/// Outputs per map.
pub(crate) const MAP: usize = CONV_OUT * CONV_OUT;
/// The first dense layer as a `D1_ROWS x D1_COLS` matrix.
pub(crate) const D1_ROWS: usize = 128;
pub(crate) const D1_COLS: usize = 2048;
pub(crate) const D1_BABY: usize = 16;
/// The second dense layer as a `D2_ROWS x D1_ROWS` matrix.
pub(crate) const D2_ROWS: usize = 16;
pub(crate) const D2_BABY: usize = 4;

/// The network prepared for one image per ciphertext.
pub struct SingleNet<W: Word> {
    ctx: Arc<Context<W>>,
    ev: Evaluator<W>,
    slots: usize,
    conv: Vec<Plaintext<W>>,
    masks: Vec<Plaintext<W>>,
    conv_bias: Vec<f64>,
    d1: LinearTransform<W>,
    d1_bias: Vec<f64>,
    d2: LinearTransform<W>,
    d2_bias: Vec<f64>,
    level0: usize,
}

/// Rotation steps the network needs Galois keys for.
pub fn rotation_steps() -> Vec<i64> {
    let mut s: Vec<i64> = Vec::new();
    let mut b = BLOCK;
    while b < 32 * BLOCK {
        s.push(b as i64); // conv block sums; 2048 and 4096 also make the input 2048-periodic
        b *= 2;
    }
    s.extend((1..D1_BABY).map(|b| b as i64));
    s.extend((1..D1_ROWS / D1_BABY).map(|j| (j * D1_BABY) as i64));
    let mut r = D1_ROWS;
    while r < D1_COLS {
        s.push(r as i64);
        r *= 2;
    }
    s.extend((1..D2_ROWS / D2_BABY).map(|j| (j * D2_BABY) as i64));
    let mut r = D2_ROWS;
    while r < D1_ROWS {
        s.push(r as i64);
        r *= 2;
    }
    s.sort_unstable();
    s.dedup();
    s
}

/// Column of conv output `h` (map-major) in the dense layer's 2048-slot input.
pub(crate) fn slot_of_hidden(h: usize) -> usize {
    (h / MAP) * BLOCK + h % MAP
}

/// A dense layer's bias `b` in every slot `s` where its output `s % rows` lands (0 for the
/// padding rows beyond `b`).
fn tiled_bias(b: &[f64], rows: usize, slots: usize) -> Vec<f64> {
    (0..slots)
        .map(|s| b.get(s % rows).copied().unwrap_or(0.0))
        .collect()
}

/// The Halevi-Shoup product by a `rows x cols` matrix (`m(r, c)`, zero outside) for an input
/// of period `cols` over all `slots`, with outputs folded afterwards by a sum over row blocks:
/// `rows` diagonals `d_i[s] = m(s mod rows, (s mod cols + i) mod cols)`, encoded at `level`.
fn dense<W: Word>(
    ctx: &Arc<Context<W>>,
    (rows, cols, baby): (usize, usize, usize),
    level: usize,
    m: impl Fn(usize, usize) -> f64,
) -> Result<LinearTransform<W>> {
    let slots = ctx.n() / 2;
    let diagonal = |i: usize| {
        (0..slots)
            .map(|s| m(s % rows, (s % cols + i) % cols))
            .collect()
    };
    Ok(LinearTransform::new(
        ctx,
        slots,
        rows,
        baby,
        level,
        diagonal,
        Threads::single(),
    )?)
}

impl<W: Word> SingleNet<W> {
    /// Prepares `net` for `ev`, whose keys must include [`rotation_steps`] and a
    /// relinearization key, on parameters with at least [`LEVELS`] levels and 8192 slots.
    pub fn new(net: &CryptoNet, ev: &Evaluator<W>) -> Result<Self> {
        let ctx = Arc::clone(ev.context());
        let slots = ctx.n() / 2;
        if ctx.max_level() < LEVELS || slots < 32 * BLOCK {
            return Err(AppError::Invalid(format!(
                "single-image CryptoNets needs {LEVELS} levels and N = 2^14 (8192 slots); these parameters have {} levels and {slots} slots",
                ctx.max_level()
            )));
        }
        let top = ctx.max_level();
        let q = |l: usize| ctx.params().moduli()[l] as f64;
        let enc = |v: &[f64], l: usize| -> Result<Plaintext<W>> { Ok(ctx.encode_at(v, l, q(l))?) };
        // Level top: convolution weights per map, block k = kernel position.
        let conv = (0..CONV_MAPS)
            .map(|m| {
                let mut v = vec![0.0; slots];
                for k in 0..KPOS {
                    v[k * BLOCK..k * BLOCK + MAP].fill(net.conv_w[m * KPOS + k]);
                }
                enc(&v, top)
            })
            .collect::<Result<Vec<_>>>()?;
        // Level top - 1: map m kept in block m.
        let masks = (0..CONV_MAPS)
            .map(|m| {
                let mut v = vec![0.0; slots];
                v[m * BLOCK..m * BLOCK + MAP].fill(1.0);
                enc(&v, top - 1)
            })
            .collect::<Result<Vec<_>>>()?;
        let mut conv_bias = vec![0.0; slots];
        for m in 0..CONV_MAPS {
            conv_bias[m * BLOCK..m * BLOCK + MAP].fill(net.conv_b[m]);
        }
        // Level top - 3: dense 845 -> 100 (after mask and square).
        let mut col_of = vec![usize::MAX; D1_COLS];
        for h in 0..HIDDEN {
            col_of[slot_of_hidden(h)] = h;
        }
        let d1 = dense(&ctx, (D1_ROWS, D1_COLS, D1_BABY), top - 3, |r, c| {
            if r < FC1 && col_of[c] != usize::MAX {
                net.fc1_w[r * HIDDEN + col_of[c]]
            } else {
                0.0
            }
        })?;
        let d1_bias = tiled_bias(&net.fc1_b, D1_ROWS, slots);
        // Level top - 5: dense 100 -> 10.
        let d2 = dense(&ctx, (D2_ROWS, D1_ROWS, D2_BABY), top - 5, |r, c| {
            if r < CLASSES && c < FC1 {
                net.fc2_w[r * FC1 + c]
            } else {
                0.0
            }
        })?;
        let d2_bias = tiled_bias(&net.fc2_b, D2_ROWS, slots);
        Ok(Self {
            ctx,
            ev: ev.clone(),
            slots,
            conv,
            masks,
            conv_bias,
            d1,
            d1_bias,
            d2,
            d2_bias,
            level0: top,
        })
    }

    /// Client side: the image in im2col form, one ciphertext.
    pub fn encrypt(&self, image: &[u8], sk: &SecretKey<W>) -> Result<Ciphertext<W>> {
        let v = im2col(image, self.slots)?;
        Ok(Encryptor::new(&self.ctx).encrypt_symmetric(&v, sk)?)
    }

    /// Sum of `ct` rotated by `step, 2 step, 4 step, ...` below `until`.
    fn fold(&self, mut ct: Ciphertext<W>, step: usize, until: usize) -> Result<Ciphertext<W>> {
        let mut s = step;
        while s < until {
            let r = self.ev.rotate(&ct, s as i64)?;
            ct = self.ev.add(&ct, &r)?;
            s *= 2;
        }
        Ok(ct)
    }

    /// Server side: the logits' ciphertext (logit `c` in slot `c`).
    pub fn infer(&self, ct: &Ciphertext<W>) -> Result<Ciphertext<W>> {
        if ct.level() != self.level0 {
            return Err(AppError::Invalid(format!(
                "the image ciphertext is at level {}, expected a fresh one at {}",
                ct.level(),
                self.level0
            )));
        }
        let ev = &self.ev;
        // 1-2: convolution per map, folded over the 32 blocks, masked into block m.
        let mut h: Option<Ciphertext<W>> = None;
        for m in 0..CONV_MAPS {
            let c = ev.rescale(&ev.multiply_plain(ct, &self.conv[m])?)?;
            let c = self.fold(c, BLOCK, 32 * BLOCK)?;
            let c = ev.multiply_plain(&c, &self.masks[m])?;
            h = Some(match h {
                None => c,
                Some(acc) => ev.add(&acc, &c)?,
            });
        }
        let h = h.ok_or_else(|| AppError::Invalid("no maps".into()))?;
        let h = ev.add_values(&ev.rescale(&h)?, &self.conv_bias)?;
        // 3: square.
        let h = ev.rescale(&ev.relinearize(&ev.square(&h)?)?)?;
        // 4: dense 845 -> 100: 2048-periodic input, diagonals, fold the 16 row blocks.
        let h = self.fold(h, D1_COLS, self.slots)?;
        let d = self.d1.apply_rescaled(ev, &h)?;
        let d = self.fold(d, D1_ROWS, D1_COLS)?;
        let d = ev.add_values(&d, &self.d1_bias)?;
        // 5: square.
        let d = ev.rescale(&ev.relinearize(&ev.square(&d)?)?)?;
        // 6: dense 100 -> 10 on the 128-periodic input.
        let z = self.d2.apply_rescaled(ev, &d)?;
        let z = self.fold(z, D2_ROWS, D1_ROWS)?;
        Ok(ev.add_values(&z, &self.d2_bias)?)
    }

    /// Client side: the ten logits.
    pub fn decrypt(&self, ct: &Ciphertext<W>, dec: &Decryptor<W>) -> Result<[f64; CLASSES]> {
        let v = dec.decrypt(ct)?;
        if v.len() < CLASSES {
            return Err(AppError::Invalid("too few slots".into()));
        }
        Ok(std::array::from_fn(|c| v[c]))
    }
}

/// The image in im2col form in `slots` values: block `ky * 5 + kx` holds at `i * 13 + j` the
/// pixel under that kernel position for output `(i, j)` (the rest zero).
pub(crate) fn im2col(image: &[u8], slots: usize) -> Result<Vec<f64>> {
    let x = CryptoNet::input(image)?;
    let mut v = vec![0.0; slots];
    for ky in 0..KERNEL {
        for kx in 0..KERNEL {
            let k = ky * KERNEL + kx;
            for i in 0..CONV_OUT {
                for j in 0..CONV_OUT {
                    v[k * BLOCK + i * CONV_OUT + j] =
                        x[(STRIDE * i + ky) * PADDED + STRIDE * j + kx];
                }
            }
        }
    }
    Ok(v)
}
