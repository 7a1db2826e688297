//! The deep test parameters, shared by the tests (through `common`) and by the fuzz seeds of
//! task graphs (`fuzz/src/graph.rs` includes this file with `#[path]`).

use heloom_ckks::{CkksParameters, SecurityLevel};

/// N = 2^12, a 50-bit `q_0` under five 40-bit scaling primes, 64-bit words, no security
/// check: small and fast, and deep enough for the e^x graphs.
pub fn insecure_deep_params() -> CkksParameters {
    CkksParameters::builder(1 << 12)
        .levels(5)
        .first_bits(50)
        .scale_bits(40)
        .security(SecurityLevel::None)
        .build()
        .expect("parameters")
}
