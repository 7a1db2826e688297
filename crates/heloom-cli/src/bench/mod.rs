//! Benchmarks behind `heloom bench`.

pub mod ntt;
pub mod timing;
