//! Errors of the CKKS layer. Every message says what is wrong and what to do.

use heloom_math::MathError;
use thiserror::Error;

/// Result type of the CKKS layer.
pub type Result<T> = std::result::Result<T, CkksError>;

/// What can go wrong in the CKKS layer.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum CkksError {
    /// Parameters that cannot work (sizes, prime counts, word size).
    #[error("invalid CKKS parameters: {0}")]
    InvalidParameters(String),

    /// Parameters below the requested security level (HE standard, ternary secret).
    #[error(
        "insecure CKKS parameters: log2(QP) = {log_qp:.1} bits exceeds the {max_log_qp} bits allowed for N = {n} at {security}-bit security (HE standard, ternary secret); use fewer levels, smaller primes or a larger poly_degree, or opt out explicitly with security = none"
    )]
    Insecure {
        /// Ring degree.
        n: usize,
        /// Total modulus size of the key-switching basis in bits.
        log_qp: f64,
        /// The largest allowed size.
        max_log_qp: u32,
        /// Requested security in bits.
        security: u32,
    },

    /// Objects built for different parameters (or different keys) were combined.
    #[error("parameter mismatch: {0}")]
    ParameterMismatch(String),

    /// Operands at levels or scales that cannot be aligned exactly.
    #[error("scale mismatch: {0}")]
    ScaleMismatch(String),

    /// The operation needs more levels than the ciphertext has left.
    #[error("out of levels: {hint}")]
    OutOfLevels {
        /// The level there is (of the ciphertext or plaintext, or the highest of the
        /// parameters when a level that does not exist was asked for).
        level: usize,
        /// The level the operation needs.
        needed: usize,
        /// What was asked and what to do.
        hint: String,
    },

    /// A key needed by the operation was not generated.
    #[error("missing key: {hint}")]
    MissingKey {
        /// Which key.
        key: MissingKeyKind,
        /// What was asked and how to get the key.
        hint: String,
    },

    /// An input value or argument that cannot be used (NaN, too many slots, too large).
    #[error("invalid input: {0}")]
    InvalidInput(String),

    /// An accelerator backend (the GPU) failed or refused an operation; the message says which
    /// and why.
    #[error("accelerator backend: {0}")]
    Backend(String),

    /// Bytes that are not a valid heloom object.
    #[error("format error: {0}")]
    Format(String),

    /// An error from the arithmetic layer.
    #[error(transparent)]
    Math(#[from] MathError),
}

/// The key an operation needed ([`CkksError::MissingKey`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum MissingKeyKind {
    /// No evaluation keys at all (an evaluator built without keys).
    EvaluationKeys,
    /// The relinearization key.
    Relinearization,
    /// The Galois key of this element (a rotation step or the conjugation).
    Galois {
        /// The Galois element `g` (`5^step mod 2N`, or `2N - 1` for the conjugation).
        element: u64,
    },
}
