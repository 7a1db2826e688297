//! Benchmarks behind `heloom bench`.

pub mod ntt;
pub mod plot;
pub mod timing;
