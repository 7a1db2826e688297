//! heloom's applications: encrypted inference (CryptoNets on MNIST), encrypted matrix
//! products, private genome search (longest match against a PBWT) and logistic-regression
//! training with bootstrapping between iterations ([`logreg`]), built on the CKKS
//! evaluator; [`graphs`] records them as heloom-runtime task graphs (the jobs of `heloom serve`).

pub mod cryptonets;
pub mod error;
pub mod genome;
pub mod graphs;
pub mod logreg;
pub mod matmul;
pub mod mnist;

pub use error::{AppError, Result};
