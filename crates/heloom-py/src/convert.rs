//! Python values in and out: numbers, 1-D numpy arrays (or anything `numpy.asarray` takes),
//! and the operands of the evaluator's methods and the ciphertext's operators.

use crate::errors::input_error;
use crate::objects::{PyCiphertext, PyPlaintext};
use crate::words::{CtW, PtW};
use heloom_ckks::Complex64;
use numpy::{PyArray1, PyReadonlyArray1};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyComplex, PyFloat, PyInt};

/// Slot values: real or complex.
#[derive(Clone, Debug)]
pub enum Values {
    /// Real values (float64; ints and bools are converted).
    Real(Vec<f64>),
    /// Complex values (complex128).
    Complex(Vec<Complex64>),
}

impl Values {
    /// The values as complex numbers.
    pub fn to_complex(&self) -> Vec<Complex64> {
        match self {
            Values::Real(v) => v.iter().map(|&x| Complex64::new(x, 0.0)).collect(),
            Values::Complex(v) => v.clone(),
        }
    }
}

/// A scalar: integer (exact), real or complex.
#[derive(Clone, Copy, Debug)]
pub enum Scalar {
    /// An integer that fits in 64 bits.
    Int(i64),
    /// A real number (also integers too large for 64 bits).
    Real(f64),
    /// A complex number.
    Complex(Complex64),
}

impl Scalar {
    /// As a complex number.
    pub fn to_complex(self) -> Complex64 {
        match self {
            Scalar::Int(k) => Complex64::new(k as f64, 0.0),
            Scalar::Real(x) => Complex64::new(x, 0.0),
            Scalar::Complex(c) => c,
        }
    }
}

/// What a Python object is, as a numeric operand.
pub enum Numeric {
    /// A number.
    Scalar(Scalar),
    /// A 1-D array of numbers.
    Values(Values),
    /// Not numbers (a string, an object array, ...): the reason.
    Other(String),
}

fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "?".into())
}

/// Classifies `obj` as a number or a 1-D array of numbers. Arrays of another dimension, and
/// sequences numpy cannot turn into an array, raise `InputError`.
pub fn numeric(obj: &Bound<'_, PyAny>) -> PyResult<Numeric> {
    // Python numbers first (bool is an int).
    if obj.is_instance_of::<PyBool>() || obj.is_instance_of::<PyInt>() {
        return Ok(Numeric::Scalar(match obj.extract::<i64>() {
            Ok(k) => Scalar::Int(k),
            Err(_) => Scalar::Real(obj.extract::<f64>()?),
        }));
    }
    if obj.is_instance_of::<PyFloat>() {
        return Ok(Numeric::Scalar(Scalar::Real(obj.extract::<f64>()?)));
    }
    if obj.is_instance_of::<PyComplex>() {
        return Ok(Numeric::Scalar(Scalar::Complex(
            obj.extract::<Complex64>()?,
        )));
    }
    if obj.is_instance_of::<pyo3::types::PyString>() || obj.is_instance_of::<pyo3::types::PyBytes>()
    {
        return Ok(Numeric::Other(format!(
            "expected numbers, got {}",
            type_name(obj)
        )));
    }
    let py = obj.py();
    let np = py.import("numpy")?;
    let arr = match np.call_method1("asarray", (obj,)) {
        Ok(a) => a,
        Err(e) => {
            return Err(input_error(format!(
                "cannot convert {} to an array of numbers: {}",
                type_name(obj),
                e.value(py)
            )))
        }
    };
    let ndim: usize = arr.getattr("ndim")?.extract()?;
    let kind: String = arr.getattr("dtype")?.getattr("kind")?.extract()?;
    let numeric_kind = matches!(kind.as_str(), "b" | "i" | "u" | "f" | "c");
    if !numeric_kind {
        return Ok(Numeric::Other(format!(
            "expected numbers, got {} with dtype {}",
            type_name(obj),
            arr.getattr("dtype")?.str()?
        )));
    }
    match ndim {
        0 => {
            let item = arr.call_method0("item")?;
            Ok(Numeric::Scalar(match kind.as_str() {
                "b" | "i" | "u" => match item.extract::<i64>() {
                    Ok(k) => Scalar::Int(k),
                    Err(_) => Scalar::Real(item.extract::<f64>()?),
                },
                "f" => Scalar::Real(item.extract::<f64>()?),
                _ => Scalar::Complex(item.extract::<Complex64>()?),
            }))
        }
        1 => {
            if kind == "c" {
                let a = np.call_method1("ascontiguousarray", (arr, "complex128"))?;
                let a: PyReadonlyArray1<'_, Complex64> = a.extract()?;
                Ok(Numeric::Values(Values::Complex(a.as_slice()?.to_vec())))
            } else {
                let a = np.call_method1("ascontiguousarray", (arr, "float64"))?;
                let a: PyReadonlyArray1<'_, f64> = a.extract()?;
                Ok(Numeric::Values(Values::Real(a.as_slice()?.to_vec())))
            }
        }
        d => {
            let shape = arr.getattr("shape")?.str()?.to_string();
            Err(input_error(format!(
                "values must be a 1-D array (one value per slot), got a {d}-D array of shape {shape}; flatten it first (e.g. numpy.ravel)"
            )))
        }
    }
}

/// A 1-D array of numbers (anything else raises `InputError`).
pub fn values(obj: &Bound<'_, PyAny>) -> PyResult<Values> {
    match numeric(obj)? {
        Numeric::Values(v) => Ok(v),
        Numeric::Scalar(_) => Err(input_error(
            "values must be a 1-D array (one value per slot), got a single number; wrap it in a list",
        )),
        Numeric::Other(why) => Err(input_error(why)),
    }
}

/// A number (anything else raises `InputError`).
pub fn scalar(obj: &Bound<'_, PyAny>) -> PyResult<Scalar> {
    match numeric(obj)? {
        Numeric::Scalar(s) => Ok(s),
        Numeric::Values(_) => Err(input_error(
            "expected a single number, got an array; use the *_plain or *_values method for slot-wise values",
        )),
        Numeric::Other(why) => Err(input_error(why)),
    }
}

/// Real coefficients (polynomial evaluation).
pub fn reals(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<f64>> {
    match values(obj)? {
        Values::Real(v) => Ok(v),
        Values::Complex(v) => {
            if v.iter().all(|c| c.im == 0.0) {
                Ok(v.iter().map(|c| c.re).collect())
            } else {
                Err(input_error(format!("{what} must be real numbers")))
            }
        }
    }
}

/// Decoded slots as a numpy array: complex128, or float64 (real parts) when `real`.
pub fn to_numpy(py: Python<'_>, v: Vec<Complex64>, real: bool) -> Py<PyAny> {
    if real {
        let re: Vec<f64> = v.iter().map(|c| c.re).collect();
        PyArray1::from_vec(py, re).into_any().unbind()
    } else {
        PyArray1::from_vec(py, v).into_any().unbind()
    }
}

/// The second operand of an evaluator method or a ciphertext operator, as Python objects.
pub enum Arg<'py> {
    /// A ciphertext.
    Ct(Bound<'py, PyCiphertext>),
    /// A plaintext.
    Pt(Bound<'py, PyPlaintext>),
    /// A number.
    Scalar(Scalar),
    /// Slot values.
    Values(Values),
    /// Something else (operators answer `NotImplemented`): the reason.
    Other(String),
}

/// The operand borrowed for a computation without the GIL (`Send`).
pub enum Operand<'a> {
    /// A ciphertext.
    Ct(&'a CtW),
    /// A plaintext.
    Pt(&'a PtW),
    /// A number.
    Scalar(Scalar),
    /// Slot values.
    Values(&'a Values),
}

impl<'py> Arg<'py> {
    /// Classifies a Python object.
    pub fn parse(obj: &Bound<'py, PyAny>) -> PyResult<Self> {
        if let Ok(c) = obj.cast::<PyCiphertext>() {
            return Ok(Arg::Ct(c.clone()));
        }
        if let Ok(p) = obj.cast::<PyPlaintext>() {
            return Ok(Arg::Pt(p.clone()));
        }
        Ok(match numeric(obj)? {
            Numeric::Scalar(s) => Arg::Scalar(s),
            Numeric::Values(v) => Arg::Values(v),
            Numeric::Other(why) => Arg::Other(why),
        })
    }

    /// The borrowed operand, or `None` for [`Arg::Other`].
    pub fn operand(&self) -> Option<Operand<'_>> {
        Some(match self {
            Arg::Ct(c) => Operand::Ct(&c.get().ct),
            Arg::Pt(p) => Operand::Pt(&p.get().pt),
            Arg::Scalar(s) => Operand::Scalar(*s),
            Arg::Values(v) => Operand::Values(v),
            Arg::Other(_) => return None,
        })
    }
}
