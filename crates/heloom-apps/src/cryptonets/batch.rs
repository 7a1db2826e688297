//! Batch packing (CryptoNets' own layout): image `s` of a batch lives in slot `s` of every
//! pixel ciphertext, so one pass over 784 ciphertexts classifies up to N/2 images at once.
//!
//! Client: one ciphertext per pixel (the padding row and column of the 29 x 29 input are zero
//! and need none). Server, five levels:
//! 1. convolution: 845 integer combinations of the pixels ([`super::linear::combine`]),
//!    rescale, add the bias;
//! 2. square: the tensor product only, neither relinearized (the next layer is linear in the
//!    third polynomial too) nor rescaled (the next layer's 100 outputs are rescaled instead
//!    of these 845);
//! 3. dense 845 -> 100 on the three-polynomial squares, two rescales, bias, relinearize (100
//!    relinearizations instead of 845);
//! 4. square, rescale;
//! 5. dense 100 -> 10, rescale, bias; the client decrypts the ten three-polynomial logits.
//!
//! Weights are encoded as integers at the scale of the prime the next rescale removes, so
//! every rescale returns the ciphertexts to the scale they had.

use super::linear::{combine, Columns, LazyWord};
use super::model::{CryptoNet, CLASSES, CONV_MAPS, CONV_OUT, FC1, HIDDEN, KERNEL, PADDED, STRIDE};
use crate::error::{AppError, Result};
use crate::mnist::{PIXELS, SIDE};
use heloom_ckks::{Ciphertext, Context, Decryptor, Encryptor, Evaluator, SecretKey, Threads};
use std::sync::Arc;
use std::time::Instant;

/// Multiplicative levels the network uses.
pub const LEVELS: usize = 5;

/// Server seconds spent in each stage of one batch (the client's times are reported apart).
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct BatchTimes {
    /// Server: convolution and its rescale.
    pub conv_s: f64,
    /// Server: first square (tensor products only).
    pub square1_s: f64,
    /// Server: dense 845 -> 100, two rescales, relinearize.
    pub dense1_s: f64,
    /// Server: second square and its rescale.
    pub square2_s: f64,
    /// Server: dense 100 -> 10 and its rescale.
    pub dense2_s: f64,
}

impl BatchTimes {
    /// Server time (everything between the client's encryption and decryption).
    pub fn server_s(&self) -> f64 {
        self.conv_s + self.square1_s + self.dense1_s + self.square2_s + self.dense2_s
    }

    /// Adds another batch's times, stage by stage.
    pub fn add(&mut self, o: &BatchTimes) {
        self.conv_s += o.conv_s;
        self.square1_s += o.square1_s;
        self.dense1_s += o.dense1_s;
        self.square2_s += o.square2_s;
        self.dense2_s += o.dense2_s;
    }
}

/// The network prepared for batch-packed encrypted inference.
pub struct BatchNet<W: LazyWord> {
    ctx: Arc<Context<W>>,
    ev: Evaluator<W>,
    conv: Columns,
    conv_b: Vec<f64>,
    fc1: Columns,
    fc1_b: Vec<f64>,
    fc2: Columns,
    fc2_b: Vec<f64>,
}

/// Input pixel `(r, c)` of the 28 x 28 image as a column of the convolution: the padded
/// row and column carry no ciphertext.
fn conv_columns(net: &CryptoNet) -> Columns {
    let mut cols = vec![Vec::new(); PIXELS];
    for m in 0..CONV_MAPS {
        for i in 0..CONV_OUT {
            for j in 0..CONV_OUT {
                let out = (m * CONV_OUT + i) * CONV_OUT + j;
                for ky in 0..KERNEL {
                    for kx in 0..KERNEL {
                        let (r, c) = (STRIDE * i + ky, STRIDE * j + kx);
                        if r < SIDE && c < SIDE {
                            let w = net.conv_w[(m * KERNEL + ky) * KERNEL + kx];
                            if w != 0.0 {
                                cols[r * SIDE + c].push((out, w));
                            }
                        }
                    }
                }
            }
        }
    }
    const { assert!(PADDED == SIDE + 1) };
    Columns { rows: HIDDEN, cols }
}

impl<W: LazyWord> BatchNet<W> {
    /// Prepares `net` for `ev` (which must hold a relinearization key and a context with at
    /// least [`LEVELS`] levels).
    pub fn new(net: &CryptoNet, ev: &Evaluator<W>) -> Result<Self> {
        let ctx = Arc::clone(ev.context());
        if ctx.max_level() < LEVELS {
            return Err(AppError::Invalid(format!(
                "CryptoNets needs {LEVELS} levels; these parameters have {}",
                ctx.max_level()
            )));
        }
        Ok(Self {
            ctx,
            ev: ev.clone(),
            conv: conv_columns(net),
            // One bias per map, repeated over the map's 13 x 13 outputs.
            conv_b: (0..HIDDEN)
                .map(|o| net.conv_b[o / (CONV_OUT * CONV_OUT)])
                .collect(),
            fc1: Columns::from_dense(&net.fc1_w, FC1, HIDDEN)?,
            fc1_b: net.fc1_b.clone(),
            fc2: Columns::from_dense(&net.fc2_w, CLASSES, FC1)?,
            fc2_b: net.fc2_b.clone(),
        })
    }

    /// Images a batch holds (one per slot).
    pub fn capacity(&self) -> usize {
        self.ctx.n() / 2
    }

    /// Client side: one ciphertext per pixel, image `s` in slot `s` (symmetric encryption
    /// with the client's secret key).
    pub fn encrypt(
        &self,
        images: &[&[u8]],
        sk: &SecretKey<W>,
        threads: Threads,
    ) -> Result<Vec<Ciphertext<W>>> {
        if images.is_empty() || images.len() > self.capacity() {
            return Err(AppError::Invalid(format!(
                "a batch holds 1 to {} images, got {}",
                self.capacity(),
                images.len()
            )));
        }
        if let Some(bad) = images.iter().position(|im| im.len() != PIXELS) {
            return Err(AppError::Invalid(format!(
                "image {bad} has {} pixels, not {PIXELS}",
                images[bad].len()
            )));
        }
        let enc = Encryptor::new(&self.ctx);
        threads
            .map(PIXELS, |px| {
                let v: Vec<f64> = images.iter().map(|im| im[px] as f64 / 255.0).collect();
                enc.encrypt_symmetric(&v, sk).map_err(AppError::from)
            })
            .into_iter()
            .collect()
    }

    /// The evaluator for one ciphertext of a parallel map over many (the map already uses the
    /// budget; splitting each op again only adds hand-offs).
    fn one(&self) -> Evaluator<W> {
        self.ev.with_threads(Threads::single())
    }

    fn rescale_all(&self, cts: Vec<Ciphertext<W>>, threads: Threads) -> Result<Vec<Ciphertext<W>>> {
        let ev = &self.one();
        threads
            .map(cts.len(), |i| ev.rescale(&cts[i]).map_err(AppError::from))
            .into_iter()
            .collect()
    }

    /// One linear layer: combine, `rescales` rescales (the first removes the prime the
    /// weights were scaled with; a second one the scale a skipped rescale left), bias added in
    /// place. The inputs are consumed and freed as soon as the combination is done, so the
    /// next allocations reuse their memory.
    fn linear(
        &self,
        inputs: Vec<Ciphertext<W>>,
        w: &Columns,
        bias: &[f64],
        rescales: usize,
        threads: Threads,
    ) -> Result<Vec<Ciphertext<W>>> {
        let level = inputs
            .first()
            .map(|c| c.level())
            .ok_or_else(|| AppError::Invalid("no inputs".into()))?;
        if bias.len() != w.rows {
            return Err(AppError::Invalid(format!(
                "{} outputs for {} biases",
                w.rows,
                bias.len()
            )));
        }
        let q = self.ctx.params().moduli()[level] as f64;
        let refs: Vec<&Ciphertext<W>> = inputs.iter().collect();
        let mut out = combine(&self.ctx, &refs, w, q, threads)?;
        drop(refs);
        drop(inputs);
        for _ in 0..rescales {
            out = self.rescale_all(out, threads)?;
        }
        let ev = &self.one();
        threads.try_for_each_mut(&mut out, |i, ct| -> Result<()> {
            ev.add_const_assign(ct, bias[i]).map_err(AppError::from)
        })?;
        Ok(out)
    }

    fn squares(&self, cts: &[Ciphertext<W>], threads: Threads) -> Result<Vec<Ciphertext<W>>> {
        let ev = &self.one();
        threads
            .map(cts.len(), |i| ev.square(&cts[i]).map_err(AppError::from))
            .into_iter()
            .collect()
    }

    /// Server side: the ten logit ciphertexts (three polynomials each) of the batch. The
    /// pixel ciphertexts are consumed: each layer frees its inputs once they are combined.
    pub fn infer(
        &self,
        pixels: Vec<Ciphertext<W>>,
        threads: Threads,
        times: &mut BatchTimes,
    ) -> Result<Vec<Ciphertext<W>>> {
        if pixels.len() != PIXELS {
            return Err(AppError::Invalid(format!(
                "a batch is {PIXELS} pixel ciphertexts, got {}",
                pixels.len()
            )));
        }
        let t = Instant::now();
        // Each intermediate is dropped as soon as the next exists, so freed memory is reused.
        let conv = self.linear(pixels, &self.conv, &self.conv_b, 1, threads)?;
        times.conv_s = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let sq = self.squares(&conv, threads)?;
        drop(conv);
        times.square1_s = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let d3 = self.linear(sq, &self.fc1, &self.fc1_b, 2, threads)?;
        let ev = &self.one();
        let d: Vec<Ciphertext<W>> = threads
            .map(d3.len(), |i| ev.relinearize(&d3[i]).map_err(AppError::from))
            .into_iter()
            .collect::<Result<_>>()?;
        drop(d3);
        times.dense1_s = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let sq = self.squares(&d, threads)?;
        drop(d);
        let d = self.rescale_all(sq, threads)?;
        times.square2_s = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let out = self.linear(d, &self.fc2, &self.fc2_b, 1, threads)?;
        times.dense2_s = t.elapsed().as_secs_f64();
        Ok(out)
    }

    /// Client side: the logits of the first `count` images.
    pub fn decrypt(
        &self,
        logits: &[Ciphertext<W>],
        dec: &Decryptor<W>,
        count: usize,
    ) -> Result<Vec<[f64; CLASSES]>> {
        if logits.len() != CLASSES {
            return Err(AppError::Invalid(format!(
                "{} logit ciphertexts, expected {CLASSES}",
                logits.len()
            )));
        }
        let vals = logits
            .iter()
            .map(|c| dec.decrypt(c).map_err(AppError::from))
            .collect::<Result<Vec<_>>>()?;
        Ok((0..count.min(self.capacity()))
            .map(|s| std::array::from_fn(|k| vals[k][s]))
            .collect())
    }
}
