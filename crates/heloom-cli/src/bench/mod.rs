//! Benchmarks behind `heloom bench`.

pub mod ckks;
pub mod cryptonets;
pub mod formats;
pub mod gpu;
pub mod matmul;
pub mod ntt;
pub mod plot;
pub(crate) mod progress;
pub mod target;
pub mod timing;
