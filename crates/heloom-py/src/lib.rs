//! # heloom-py
//!
//! Python bindings of heloom's RNS-CKKS scheme, built with PyO3 (stable ABI, Python >= 3.10)
//! into the extension module `heloom._heloom`; the `heloom` package re-exports it.
//!
//! Every heloom object is generic over its word size (`u32` or `u64`); each Python class wraps
//! a `words::Words` enum over both instantiations, so Python sees the word size only as the
//! `word_bits` parameter. Heavy calls release the GIL. Values go in and out as numpy arrays.
//! Evaluators carry a thread budget; task graphs and the scheduling simulator of
//! `heloom-runtime` are exposed by `graph`; bulk AES over several devices and the device
//! layer's comparisons (`heloom-devices`) by `offload`; encrypted CryptoNets inference on MNIST
//! (`heloom-apps`) by `mnist`.

mod bootstrap;
mod convert;
mod errors;
mod evaluator;
mod graph;
mod mnist;
mod objects;
mod offload;
mod ops;
mod params;
mod words;

use pyo3::prelude::*;

// Ciphertexts and key-switching buffers are multi-megabyte and short-lived; mimalloc reuses
// their pages instead of faulting fresh ones in on every operation.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// heloom: RNS-CKKS homomorphic encryption (Rust) for Python.
#[pymodule]
fn _heloom(m: &Bound<'_, PyModule>) -> PyResult<()> {
    heloom_pool::retain_freed_memory();
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<params::PyCkksParameters>()?;
    m.add_class::<objects::PyContext>()?;
    m.add_class::<objects::PySecretKey>()?;
    m.add_class::<objects::PyPublicKey>()?;
    m.add_class::<objects::PyEvaluationKeys>()?;
    m.add_class::<objects::PyKeySet>()?;
    m.add_class::<objects::PyPlaintext>()?;
    m.add_class::<objects::PyCiphertext>()?;
    m.add_class::<evaluator::PyEvaluator>()?;
    m.add_class::<bootstrap::PyBootstrapper>()?;
    graph::register(m)?;
    offload::register(m)?;
    m.add_function(wrap_pyfunction!(mnist::mnist, m)?)?;
    m.add_function(wrap_pyfunction!(objects::upgrade_v1, m)?)?;
    errors::register(m)?;
    Ok(())
}
