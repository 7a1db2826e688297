//! Typed errors of the device layer.

use thiserror::Error;

/// Everything the device layer can refuse or detect.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum DeviceError {
    /// The device cannot be used on this machine (no kernel support, no GPU, no AES-NI, ...).
    #[error("device `{device}` is not available here: {reason}. {hint}")]
    Unavailable {
        /// Device name as the user spelled it.
        device: String,
        /// What is missing.
        reason: String,
        /// What to do about it.
        hint: String,
    },
    /// A device specification string could not be parsed.
    #[error("bad device specification `{spec}`: {reason} (expected a comma-separated list of cpu[:threads], soft[:threads], kernel[:threads], gpu, or cpu-pool[:threads] for HE jobs)")]
    BadSpec {
        /// The offending specification.
        spec: String,
        /// Why it was refused.
        reason: String,
    },
    /// Invalid workload or balancer parameters.
    #[error("invalid parameter: {0}")]
    InvalidParameter(String),
    /// A cipher operation failed on a device.
    #[error("device `{device}` failed on item {item}: {what}")]
    Crypto {
        /// Device name.
        device: String,
        /// Item index in the workload.
        item: usize,
        /// What went wrong.
        what: String,
    },
    /// A balancer handed out an item twice or never; this is a bug in the balancer, never silent.
    #[error("balancer `{method}` {what} item {item} (of {items}); results refused")]
    Accounting {
        /// Balancer name.
        method: String,
        /// "lost" or "duplicated".
        what: &'static str,
        /// The item.
        item: usize,
        /// Number of items in the workload.
        items: usize,
    },
    /// A device's output does not match the reference engine.
    #[error("output of item {item} from device `{device}` does not match the reference ({what})")]
    Mismatch {
        /// Device that produced it.
        device: String,
        /// Item index.
        item: usize,
        /// Details.
        what: String,
    },
    /// A worker thread panicked.
    #[error("a worker of device `{0}` panicked; results refused")]
    WorkerPanicked(String),
    /// An HE operation failed.
    #[error("HE job failed: {0}")]
    He(String),
    /// An I/O or system call failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

/// Result alias of the device layer.
pub type Result<T> = std::result::Result<T, DeviceError>;
