//! Errors of the applications.

use thiserror::Error;

/// What an application can refuse or fail with.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum AppError {
    /// A data file is missing or unreadable; the message names it and says where data is looked for.
    #[error("data: {0}")]
    Data(String),
    /// A model or data file that is not what it claims to be.
    #[error("format: {0}")]
    Format(String),
    /// Bad arguments (sizes, counts, packing).
    #[error("invalid input: {0}")]
    Invalid(String),
    /// An error of the CKKS layer.
    #[error(transparent)]
    Ckks(#[from] heloom_ckks::CkksError),
    /// An error of the arithmetic layer.
    #[error(transparent)]
    Math(#[from] heloom_math::MathError),
    /// A protocol message that is malformed, truncated, of the wrong kind, or made for other
    /// parameters or keys (the genome search's client and server).
    #[error("protocol: {0}")]
    Protocol(String),
    /// A task graph could not be recorded (levels, scales, sizes).
    #[error(transparent)]
    Graph(#[from] heloom_runtime::graph::GraphError),
    /// An I/O error.
    #[error("I/O: {0}")]
    Io(#[from] std::io::Error),
}

/// Result with [`AppError`].
pub type Result<T> = std::result::Result<T, AppError>;
