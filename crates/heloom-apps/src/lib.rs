//! heloom's applications: encrypted inference (CryptoNets on MNIST) and encrypted matrix
//! products, built on the CKKS evaluator.

pub mod cryptonets;
pub mod error;
pub mod matmul;
pub mod mnist;

pub use error::{AppError, Result};
