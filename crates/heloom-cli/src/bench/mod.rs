//! Benchmarks behind `heloom bench`.

pub mod ckks;
pub mod gpu;
pub mod ntt;
pub mod plot;
pub mod timing;
