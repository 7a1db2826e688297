//! CryptoNets (Gilad-Bachrach et al. 2016) on MNIST: a 5x5 convolution with stride 2 and 5
//! maps on the image padded to 29x29, a square, a dense layer 845 -> 100, a square, a dense
//! layer 100 -> 10. Squares are the only non-linearity, so the whole network is a polynomial
//! CKKS evaluates exactly (up to its noise).

pub mod batch;
pub mod evaluate;
pub mod linear;
pub mod model;
pub mod single;
#[cfg(target_arch = "x86_64")]
mod tile_avx512;
pub mod words;

pub use model::{CryptoNet, CLASSES, CONV_MAPS, CONV_OUT, FC1, HIDDEN, KERNEL, PADDED, STRIDE};
