//! Errors of the GPU backend.

use thiserror::Error;

/// Everything the GPU backend can refuse or fail with.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum GpuError {
    /// No usable CUDA driver or device: the message says what is missing and what to do.
    #[error("no GPU available: {0}")]
    Unavailable(String),
    /// NVRTC (the runtime CUDA compiler) could not be loaded.
    #[error("NVRTC not found: {0}")]
    NvrtcMissing(String),
    /// A kernel did not compile; the NVRTC log says where.
    #[error("kernel compilation failed for {arch}:\n{log}")]
    Compile {
        /// Target architecture (for example `compute_90`).
        arch: String,
        /// NVRTC's log.
        log: String,
    },
    /// A CUDA driver call failed.
    #[error("CUDA driver error in {what}: {msg}")]
    Driver {
        /// What was being done.
        what: &'static str,
        /// The driver's message.
        msg: String,
    },
    /// The kernel emulator refused a launch.
    #[error("kernel emulator: {0}")]
    Emulator(String),
    /// Operands that do not fit together (levels, sizes, contexts, keys).
    #[error("mismatch: {0}")]
    Mismatch(String),
    /// A request the backend cannot serve (missing key, no levels left, unsupported shape).
    #[error("invalid request: {0}")]
    Invalid(String),
    /// An error of the CKKS layer.
    #[error(transparent)]
    Ckks(#[from] heloom_ckks::CkksError),
    /// An error of the arithmetic layer.
    #[error(transparent)]
    Math(#[from] heloom_math::MathError),
}

/// Result with [`GpuError`].
pub type Result<T> = std::result::Result<T, GpuError>;
