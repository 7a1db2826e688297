//! Python exceptions: one class per kind of [`CkksError`] (and of the device layer's
//! [`DeviceError`]), all below `heloom.HeloomError`. Messages pass through unchanged.

use heloom_ckks::CkksError;
use heloom_devices::DeviceError;
use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyTuple, PyType};

create_exception!(
    heloom,
    HeloomError,
    PyException,
    "Base class of every error heloom raises."
);
create_exception!(
    heloom,
    ParameterError,
    HeloomError,
    "Invalid or insecure parameters, or objects made for different parameters (or keys) combined."
);
create_exception!(
    heloom,
    FormatError,
    HeloomError,
    "Bytes that are not a valid heloom object (raised by deserialization)."
);
create_exception!(
    heloom,
    ScaleError,
    HeloomError,
    "Operands whose scales cannot be aligned exactly."
);
create_exception!(
    heloom,
    LevelError,
    HeloomError,
    "The operation needs more levels than the ciphertext has left."
);
create_exception!(
    heloom,
    MissingKeyError,
    HeloomError,
    "A relinearization or Galois (rotation/conjugation) key needed by the operation was not generated."
);

create_exception!(
    heloom,
    GraphError,
    HeloomError,
    "A task graph that cannot be built or run: a GraphBuilder used after finish, a Value of \
     another builder, a graph without outputs, or job inputs that do not fit the graph (their \
     number, level or scale)."
);

create_exception!(
    heloom,
    DeviceUnavailableError,
    HeloomError,
    "A device this machine or this build of heloom cannot use (no GPU driver, no kernel crypto \
     API, ...); the message says what is missing and which devices to use instead \
     (``heloom.offload_devices()`` lists what is available)."
);
create_exception!(
    heloom,
    CryptoError,
    HeloomError,
    "An AES operation failed on an item: for decryption, a wrong key or IV, or a corrupted or \
     tampered ciphertext (a GCM tag or CBC padding that does not check). The message names \
     the item."
);

const INPUT_ERROR_DOC: &str =
    "An input value or argument that cannot be used: NaN or infinite values, too many values for \
     the slots, a wrong array shape or type, a constant too large for the scale. Also a \
     ValueError.";

static INPUT_ERROR: PyOnceLock<Py<PyType>> = PyOnceLock::new();

/// `heloom.InputError(HeloomError, ValueError)`: made with `type()` because it has two bases.
pub fn input_error_type(py: Python<'_>) -> PyResult<&Bound<'_, PyType>> {
    INPUT_ERROR
        .get_or_try_init(py, || {
            let bases = PyTuple::new(
                py,
                [
                    py.get_type::<HeloomError>().into_any(),
                    py.get_type::<PyValueError>().into_any(),
                ],
            )?;
            let dict = PyDict::new(py);
            dict.set_item("__module__", "heloom")?;
            dict.set_item("__doc__", INPUT_ERROR_DOC)?;
            let ty = py
                .get_type::<PyType>()
                .call1(("InputError", bases, dict))?
                .cast_into::<PyType>()?;
            Ok::<_, PyErr>(ty.unbind())
        })
        .map(|t| t.bind(py))
}

/// An `InputError` with `msg`.
pub fn input_error(msg: impl Into<String>) -> PyErr {
    let msg = msg.into();
    Python::attach(|py| match input_error_type(py) {
        Ok(ty) => PyErr::from_type(ty.clone(), msg),
        Err(e) => e,
    })
}

/// The Python exception for a heloom error.
pub fn to_py(e: CkksError) -> PyErr {
    let msg = e.to_string();
    match e {
        CkksError::InvalidParameters(_)
        | CkksError::Insecure { .. }
        | CkksError::ParameterMismatch(_) => ParameterError::new_err(msg),
        CkksError::ScaleMismatch(_) => ScaleError::new_err(msg),
        CkksError::OutOfLevels { .. } => LevelError::new_err(msg),
        CkksError::MissingKey { .. } => MissingKeyError::new_err(msg),
        CkksError::InvalidInput(_) => input_error(msg),
        CkksError::Format(_) => FormatError::new_err(msg),
        // The arithmetic layer's errors, and any kind added to heloom-ckks later.
        #[allow(unreachable_patterns)]
        _ => HeloomError::new_err(msg),
    }
}

/// The Python exception for a task-graph error: the CKKS layer's errors map as [`to_py`],
/// malformed graphs and inputs that do not fit to `GraphError`.
pub fn graph_to_py(e: heloom_runtime::graph::GraphError) -> PyErr {
    match e {
        heloom_runtime::graph::GraphError::Ckks(c) => to_py(c),
        other => GraphError::new_err(other.to_string()),
    }
}

/// The Python exception for a cost-profile error: unknown names and unusable profile files
/// are InputError, files that cannot be read OSError.
pub fn profile_to_py(e: heloom_runtime::profile::ProfileError) -> PyErr {
    match e {
        heloom_runtime::profile::ProfileError::Io { .. } => {
            pyo3::exceptions::PyOSError::new_err(e.to_string())
        }
        other => input_error(other.to_string()),
    }
}

/// The Python exception for a device-layer error: bad device lists and parameters are
/// InputError (a ValueError), missing devices DeviceUnavailableError, failed AES operations
/// CryptoError, system calls OSError, HE jobs as [`to_py`] would raise them; a balancer or
/// device that misbehaves is a HeloomError.
pub fn device_to_py(e: DeviceError) -> PyErr {
    let msg = e.to_string();
    match e {
        DeviceError::BadSpec { .. } | DeviceError::InvalidParameter(_) => input_error(msg),
        // The hints are written for the command line; say it the way Python callers do.
        DeviceError::Unavailable { .. } => {
            DeviceUnavailableError::new_err(msg.replace("--devices ", "devices="))
        }
        DeviceError::Crypto { .. } => CryptoError::new_err(msg),
        DeviceError::Io { .. } => pyo3::exceptions::PyOSError::new_err(msg),
        _ => HeloomError::new_err(msg),
    }
}

/// Registers the exception classes on the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("HeloomError", py.get_type::<HeloomError>())?;
    m.add("ParameterError", py.get_type::<ParameterError>())?;
    m.add("FormatError", py.get_type::<FormatError>())?;
    m.add("ScaleError", py.get_type::<ScaleError>())?;
    m.add("LevelError", py.get_type::<LevelError>())?;
    m.add("MissingKeyError", py.get_type::<MissingKeyError>())?;
    m.add("InputError", input_error_type(py)?)?;
    m.add("GraphError", py.get_type::<GraphError>())?;
    m.add(
        "DeviceUnavailableError",
        py.get_type::<DeviceUnavailableError>(),
    )?;
    m.add("CryptoError", py.get_type::<CryptoError>())?;
    Ok(())
}
