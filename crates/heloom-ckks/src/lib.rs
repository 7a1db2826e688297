//! # heloom-ckks
//!
//! The RNS-CKKS scheme (Cheon, Kim, Kim, Song 2017; full-RNS variant of Cheon, Han, Kim, Kim,
//! Song 2018) on heloom's arithmetic layer, for 64-bit words and bit-reduced 32-bit words.

pub mod encoder;
pub mod error;

pub use encoder::Encoder;
pub use error::{CkksError, Result};
pub use num_complex::Complex64;
