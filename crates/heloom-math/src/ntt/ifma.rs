//! PLACEHOLDER (being written): NTT kernels for this backend. Delegates to scalar for now.

use super::NttCore;

/// Backend-specific twiddle tables.
#[derive(Debug)]
pub struct Tables {}

impl Tables {
    /// Builds the tables from the core precomputation.
    pub(crate) fn new(_core: &NttCore<u64>) -> Self {
        Self {}
    }
}

/// Forward NTT in place.
pub(crate) fn forward(core: &NttCore<u64>, _t: &Tables, a: &mut [u64]) {
    super::scalar::forward(core, a)
}

/// Inverse NTT in place.
pub(crate) fn inverse(core: &NttCore<u64>, _t: &Tables, a: &mut [u64]) {
    super::scalar::inverse(core, a)
}
