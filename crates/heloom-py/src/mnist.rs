//! `heloom.mnist`: CryptoNets on encrypted held-out MNIST images, from Python.

use std::path::PathBuf;

use heloom_apps::cryptonets::evaluate::{evaluate, EvalConfig, Packing};
use heloom_apps::cryptonets::CryptoNet;
use heloom_apps::AppError;
use pyo3::exceptions::PyOSError;
use pyo3::prelude::*;

use crate::errors::{input_error, to_py, FormatError, HeloomError};

fn app_to_py(e: AppError) -> PyErr {
    match e {
        AppError::Invalid(m) => input_error(m),
        AppError::Format(m) => FormatError::new_err(m),
        AppError::Data(m) => PyOSError::new_err(m),
        AppError::Io(e) => PyOSError::new_err(e.to_string()),
        AppError::Ckks(e) => to_py(e),
        other => HeloomError::new_err(other.to_string()),
    }
}

/// Classifies ``images`` held-out MNIST test images (test images 5000 on, never used in
/// training) with heloom's CryptoNets: the client encrypts them (one image per slot with
/// ``packing="batch"``, one image per ciphertext with ``"single"``), the server runs the network on the ciphertexts, the client decrypts;
/// the same network in f64 gives the reference. ``word_bits``: 32 (bit-reduced) or 64;
/// ``threads``: a thread budget (default every core); ``weights``: a weight file instead of
/// the network trained in the repository; ``progress(message)`` hears each step.
///
/// Returns a dict: ``plain_accuracy``, ``encrypted_accuracy``, ``agreement``, ``images``,
/// ``seconds`` (server), ``images_per_s``, ``batch_latency_s``, ``encrypt_s``,
/// ``decrypt_s``, ``stages`` (per layer), ``max_logit_error``, ``peak_memory_bytes``, the
/// parameters and the CPU. Runs without the GIL.
#[pyfunction]
#[pyo3(signature = (*, images = 2000, packing = "batch", word_bits = 32, threads = None, weights = None, progress = None),
text_signature = "(*, images=2000, packing='batch', word_bits=32, threads=None, weights=None, progress=None)")]
pub fn mnist<'py>(
    py: Python<'py>,
    images: i64,
    packing: &str,
    word_bits: u32,
    threads: Option<i64>,
    weights: Option<PathBuf>,
    progress: Option<Py<PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let packing: Packing = packing.parse().map_err(app_to_py)?;
    if images < 1 {
        return Err(input_error(format!(
            "images must be at least 1, got {images}"
        )));
    }
    let threads = match threads {
        Some(t) if t < 1 => {
            return Err(input_error(format!("threads must be at least 1, got {t}")))
        }
        Some(t) => t as usize,
        None => heloom_pool::cores(),
    };
    let net = match &weights {
        Some(p) => CryptoNet::from_bytes(
            &std::fs::read(p).map_err(|e| PyOSError::new_err(format!("{}: {e}", p.display())))?,
        ),
        None => CryptoNet::embedded(),
    }
    .map_err(app_to_py)?;
    let cfg = EvalConfig {
        images: images as usize,
        packing,
        threads,
    };
    let mut error: Option<PyErr> = None;
    let report = py.detach(|| {
        let mut say = |msg: &str| {
            if let (Some(cb), None) = (&progress, &error) {
                if let Err(e) = Python::attach(|py| cb.call1(py, (msg,)).map(drop)) {
                    error = Some(e);
                }
            }
        };
        match word_bits {
            32 => evaluate::<u32>(&net, &cfg, &mut say),
            64 => evaluate::<u64>(&net, &cfg, &mut say),
            w => Err(AppError::Invalid(format!(
                "word_bits must be 32 or 64, not {w}"
            ))),
        }
    });
    if let Some(e) = error {
        return Err(e);
    }
    let report = report.map_err(app_to_py)?;
    crate::offload::to_python(py, &report)
}
