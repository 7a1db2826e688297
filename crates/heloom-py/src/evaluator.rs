//! `heloom.Evaluator`: homomorphic operations.

use crate::convert::{self, Arg, Numeric, Operand, Scalar};
use crate::errors::{input_error, to_py};
use crate::objects::{nogil, PyCiphertext, PyContext, PyEvaluationKeys, Shared};
use crate::ops::{self, Mode};
use crate::words::{each, words, words_wrap, CtW, EvW};
use heloom_ckks::{CkksError, Evaluator, PolyBasis, Threads};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use std::sync::Arc;

/// The closure that runs `Evaluator::$name(ct, $args..)` on either word size, for
/// [`PyEvaluator::unary`]; `method!(binary $name)` runs `Evaluator::$name(a, b)`, for
/// [`PyEvaluator::binary`].
macro_rules! method {
    (binary $name:ident) => {
        move |ev: &EvW, x: &CtW, y: &CtW| words_wrap!((ev, x, y) => |e, p, q| e.$name(p, q))
    };
    ($name:ident $(, $arg:expr)*) => {
        move |ev: &EvW, x: &CtW| words_wrap!((ev, x) => |e, c| e.$name(c $(, $arg)*))
    };
}

/// Homomorphic operations on ciphertexts, with (optionally) evaluation keys. Made by
/// ``Context.evaluator(keys)`` or ``Evaluator(context, keys)``.
///
/// Every method returns a new Ciphertext and leaves scale management explicit: ``multiply``
/// returns an unrelinearized (size 3) product at the product of the scales; call
/// ``relinearize`` and ``rescale``. (The Ciphertext operators do that for you.) Operands at
/// different levels are brought to the lower level; scales that differ are aligned when that
/// is exact, else ScaleError.
#[pyclass(name = "Evaluator", module = "heloom", frozen)]
pub struct PyEvaluator {
    pub(crate) ev: EvW,
    shared: Arc<Shared>,
    keyed: bool,
}

impl PyEvaluator {
    pub(crate) fn build(shared: &Arc<Shared>, keys: Option<&PyEvaluationKeys>) -> PyResult<Self> {
        let ev = shared.evaluator(keys.map(|k| &k.ek)).map_err(to_py)?;
        Ok(Self::from_parts(ev, Arc::clone(shared), keys.is_some()))
    }

    pub(crate) fn from_parts(ev: EvW, shared: Arc<Shared>, keyed: bool) -> Self {
        Self { ev, shared, keyed }
    }

    pub(crate) fn wrap(&self, ct: CtW) -> PyCiphertext {
        PyCiphertext::new(ct, &self.shared, self.keyed.then(|| self.ev.clone()))
    }

    /// Runs a unary operation without the GIL.
    fn unary(
        &self,
        py: Python<'_>,
        a: &PyCiphertext,
        f: impl FnOnce(&EvW, &CtW) -> Result<CtW, CkksError> + Send,
    ) -> PyResult<PyCiphertext> {
        let ev = &self.ev;
        let ct = &a.ct;
        let out = nogil(py, || f(ev, ct))?;
        Ok(self.wrap(out))
    }

    /// Runs an operation with a mixed second operand without the GIL.
    fn mixed(
        &self,
        a: &PyCiphertext,
        b: &Bound<'_, PyAny>,
        what: &str,
        f: impl FnOnce(&EvW, &CtW, &Operand<'_>) -> Result<CtW, CkksError> + Send,
    ) -> PyResult<PyCiphertext> {
        let arg = Arg::parse(b)?;
        let Some(operand) = arg.operand() else {
            let why = match &arg {
                Arg::Other(w) => w.clone(),
                _ => String::new(),
            };
            return Err(PyTypeError::new_err(format!("{what}: {why}")));
        };
        self.unary(b.py(), a, |ev, ct| f(ev, ct, &operand))
    }

    /// Runs an operation on two ciphertexts without the GIL.
    fn binary(
        &self,
        py: Python<'_>,
        a: &PyCiphertext,
        b: &PyCiphertext,
        f: impl FnOnce(&EvW, &CtW, &CtW) -> Result<CtW, CkksError> + Send,
    ) -> PyResult<PyCiphertext> {
        self.unary(py, a, |ev, x| f(ev, x, &b.ct))
    }
}

/// A thread budget from Python: at least 1, else InputError.
pub(crate) fn thread_budget(threads: i64) -> PyResult<Threads> {
    match usize::try_from(threads) {
        Ok(n) if n >= 1 => Ok(Threads::new(n)),
        _ => Err(input_error(format!(
            "threads must be at least 1, got {threads}"
        ))),
    }
}

pub(crate) fn poly_basis(basis: &str, interval: Option<(f64, f64)>) -> PyResult<PolyBasis> {
    match basis.to_ascii_lowercase().as_str() {
        "power" | "monomial" => match interval {
            None => Ok(PolyBasis::Power),
            Some(_) => Err(input_error(
                "interval only applies to basis=\"chebyshev\"; the power basis evaluates at x itself",
            )),
        },
        "chebyshev" => {
            let (a, b) = interval.unwrap_or((-1.0, 1.0));
            Ok(PolyBasis::Chebyshev { a, b })
        }
        other => Err(input_error(format!(
            "basis must be \"power\" or \"chebyshev\", got {other:?}"
        ))),
    }
}

#[pymethods]
impl PyEvaluator {
    /// An evaluator for ``context`` with ``keys`` (or without keys); the same as
    /// ``context.evaluator(keys)``. ``threads`` is the budget of every heavy operation it runs
    /// (split over at most that many threads of heloom's shared pool; at least 1, else
    /// InputError). Results are bit-identical whatever the budget.
    #[new]
    #[pyo3(signature = (context, keys = None, threads = 1))]
    fn py_new(
        context: &PyContext,
        keys: Option<&PyEvaluationKeys>,
        threads: i64,
    ) -> PyResult<Self> {
        let budget = thread_budget(threads)?;
        let mut ev = Self::build(&context.shared, keys)?;
        if budget.get() != 1 {
            ev.ev = with_threads(&ev.ev, budget);
        }
        if keys.is_some() {
            context.shared.set_default(ev.ev.clone(), true);
        }
        Ok(ev)
    }

    /// Whether it holds evaluation keys (needed by relinearize, rotations, conjugate).
    #[getter]
    fn has_keys(&self) -> bool {
        self.keyed
    }

    /// The context.
    #[getter]
    fn context(&self) -> PyContext {
        PyContext::from_shared(Arc::clone(&self.shared))
    }

    /// Thread budget of every heavy operation (1 unless set by ``threads=`` or
    /// ``with_threads``).
    #[getter]
    fn threads(&self) -> usize {
        budget_of(&self.ev).get()
    }

    /// The same evaluator (same context and keys, shared) with a budget of ``threads``
    /// threads (at least 1, else InputError; more than ``heloom.cores()`` gains nothing).
    /// Results are bit-identical whatever the budget.
    fn with_threads(&self, threads: i64) -> PyResult<PyEvaluator> {
        let budget = thread_budget(threads)?;
        Ok(Self::from_parts(
            with_threads(&self.ev, budget),
            Arc::clone(&self.shared),
            self.keyed,
        ))
    }

    /// ``a + b``: ``b`` a Ciphertext, a Plaintext, a number (int, float, complex) or a 1-D
    /// array (encoded at ``a``'s level and scale).
    fn add(&self, a: &PyCiphertext, b: &Bound<'_, PyAny>) -> PyResult<PyCiphertext> {
        self.mixed(a, b, "add", |ev, x, y| {
            ops::add(ev, x, y, false, Mode::Explicit)
        })
    }

    /// ``a - b``: ``b`` a Ciphertext, a Plaintext, a number or a 1-D array.
    fn sub(&self, a: &PyCiphertext, b: &Bound<'_, PyAny>) -> PyResult<PyCiphertext> {
        self.mixed(a, b, "sub", |ev, x, y| {
            ops::add(ev, x, y, true, Mode::Explicit)
        })
    }

    /// ``-a``.
    fn negate(&self, py: Python<'_>, a: &PyCiphertext) -> PyResult<PyCiphertext> {
        self.unary(py, a, method!(negate))
    }

    /// ``a + p`` for a Plaintext ``p`` (its scale must match ``a``'s) or a 1-D array (encoded
    /// at ``a``'s level and scale).
    fn add_plain(&self, a: &PyCiphertext, p: &Bound<'_, PyAny>) -> PyResult<PyCiphertext> {
        plain_only(p, "add_plain")?;
        self.mixed(a, p, "add_plain", |ev, x, y| {
            ops::add(ev, x, y, false, Mode::Explicit)
        })
    }

    /// ``a - p`` for a Plaintext or a 1-D array.
    fn sub_plain(&self, a: &PyCiphertext, p: &Bound<'_, PyAny>) -> PyResult<PyCiphertext> {
        plain_only(p, "sub_plain")?;
        self.mixed(a, p, "sub_plain", |ev, x, y| {
            ops::add(ev, x, y, true, Mode::Explicit)
        })
    }

    /// ``a + c`` in every slot, for a number ``c`` (real or complex). Exact: no level used.
    fn add_const(&self, a: &PyCiphertext, c: &Bound<'_, PyAny>) -> PyResult<PyCiphertext> {
        let s = Operand::Scalar(convert::scalar(c)?);
        self.unary(c.py(), a, |ev, x| {
            ops::add(ev, x, &s, false, Mode::Explicit)
        })
    }

    /// ``a * b`` for ciphertexts: a size-3 ciphertext at the product of the scales (call
    /// ``relinearize`` then ``rescale``). Levels are aligned by dropping.
    fn multiply(
        &self,
        py: Python<'_>,
        a: &PyCiphertext,
        b: &PyCiphertext,
    ) -> PyResult<PyCiphertext> {
        self.binary(py, a, b, method!(binary multiply))
    }

    /// ``a * b`` relinearized and rescaled (what ``a * b`` on ciphertexts does).
    fn multiply_relin_rescale(
        &self,
        py: Python<'_>,
        a: &PyCiphertext,
        b: &PyCiphertext,
    ) -> PyResult<PyCiphertext> {
        self.binary(py, a, b, method!(binary multiply_relin_rescale))
    }

    /// ``a * a``: size 3, scale squared (cheaper than ``multiply(a, a)``).
    fn square(&self, py: Python<'_>, a: &PyCiphertext) -> PyResult<PyCiphertext> {
        self.unary(py, a, method!(square))
    }

    /// Relinearizes a size-3 ciphertext back to size 2 (needs the relinearization key).
    fn relinearize(&self, py: Python<'_>, a: &PyCiphertext) -> PyResult<PyCiphertext> {
        self.unary(py, a, method!(relinearize))
    }

    /// Divides by the last prime and drops it: one level down, scale divided by that prime.
    fn rescale(&self, py: Python<'_>, a: &PyCiphertext) -> PyResult<PyCiphertext> {
        self.unary(py, a, method!(rescale))
    }

    /// ``relinearize`` then ``rescale`` in one step: the rescale merged into the key switch's
    /// mod-down (one division by ``q_l P``, one rounding, two NTT passes fewer). One level down,
    /// scale divided by the last prime; a size-2 ciphertext is only rescaled.
    fn relinearize_rescale(&self, py: Python<'_>, a: &PyCiphertext) -> PyResult<PyCiphertext> {
        self.unary(py, a, method!(relinearize_rescale))
    }

    /// Drops one level (exact; the scale is unchanged).
    fn drop_level(&self, py: Python<'_>, a: &PyCiphertext) -> PyResult<PyCiphertext> {
        self.unary(py, a, method!(drop_level))
    }

    /// Drops to ``level`` (at most ``a.level``; exact, scale unchanged).
    fn drop_to_level(
        &self,
        py: Python<'_>,
        a: &PyCiphertext,
        level: usize,
    ) -> PyResult<PyCiphertext> {
        self.unary(py, a, method!(drop_to_level, level))
    }

    /// ``a * p`` slot-wise, not rescaled. ``p`` a Plaintext (the scales multiply) or a 1-D
    /// array (encoded at the scale of ``a``'s last prime, so ``rescale`` afterwards restores
    /// ``a``'s scale).
    fn multiply_plain(&self, a: &PyCiphertext, p: &Bound<'_, PyAny>) -> PyResult<PyCiphertext> {
        plain_only(p, "multiply_plain")?;
        self.mixed(a, p, "multiply_plain", |ev, x, y| {
            ops::mul(ev, x, y, Mode::Explicit)
        })
    }

    /// ``a * values`` slot-wise for a 1-D array, encoded at the scale of ``a``'s last prime
    /// (``rescale`` afterwards restores ``a``'s scale). Not rescaled.
    fn multiply_values(
        &self,
        a: &PyCiphertext,
        values: &Bound<'_, PyAny>,
    ) -> PyResult<PyCiphertext> {
        let v = convert::values(values)?;
        let v = Operand::Values(&v);
        self.unary(values.py(), a, |ev, x| ops::mul(ev, x, &v, Mode::Explicit))
    }

    /// ``a * c`` for a number ``c`` (real or complex), encoded at the scale of ``a``'s last
    /// prime: ``rescale`` afterwards restores ``a``'s scale. Not rescaled.
    fn multiply_const(&self, a: &PyCiphertext, c: &Bound<'_, PyAny>) -> PyResult<PyCiphertext> {
        let s = convert::scalar(c)?;
        let s = match s {
            Scalar::Int(k) => Scalar::Real(k as f64),
            s => s,
        };
        self.unary(c.py(), a, move |ev, x| {
            ops::mul_const(ev, x, s, Mode::Explicit)
        })
    }

    /// ``a * k`` for an integer ``k``: exact, no level used, scale unchanged.
    fn multiply_int(&self, py: Python<'_>, a: &PyCiphertext, k: i64) -> PyResult<PyCiphertext> {
        self.unary(py, a, method!(multiply_int, k))
    }

    /// Rotates the slots left by ``step`` (right when negative). Needs the Galois key for
    /// ``step`` (``keygen(rotations=[...])``), else MissingKeyError.
    fn rotate(&self, py: Python<'_>, a: &PyCiphertext, step: i64) -> PyResult<PyCiphertext> {
        self.unary(py, a, method!(rotate, step))
    }

    /// Hoisted rotations: one decomposition shared by every step. Returns a list of
    /// ciphertexts in the order of ``steps``.
    fn rotate_many(
        &self,
        py: Python<'_>,
        a: &PyCiphertext,
        steps: Vec<i64>,
    ) -> PyResult<Vec<PyCiphertext>> {
        let ev = &self.ev;
        let ct = &a.ct;
        let outs: Vec<CtW> = nogil(py, || {
            words!((ev, ct) => |e, c| Ok(e
                .rotate_many(c, &steps)?
                .into_iter()
                .map(CtW::from)
                .collect()))
        })?;
        Ok(outs.into_iter().map(|c| self.wrap(c)).collect())
    }

    /// Conjugates every slot (needs ``keygen(conjugate=True)``).
    fn conjugate(&self, py: Python<'_>, a: &PyCiphertext) -> PyResult<PyCiphertext> {
        self.unary(py, a, method!(conjugate))
    }

    /// Sum of ``n`` consecutive slots in every slot: slot ``i`` gets
    /// ``x[i] + ... + x[i+n-1]`` (indices mod slots). ``n`` a power of two; needs rotation
    /// keys for 1, 2, 4, ..., n/2 (see ``Evaluator.rotate_and_sum_steps``).
    fn rotate_and_sum(&self, py: Python<'_>, a: &PyCiphertext, n: usize) -> PyResult<PyCiphertext> {
        self.unary(py, a, method!(rotate_and_sum, n))
    }

    /// The rotation steps ``rotate_and_sum(_, n)`` needs keys for.
    #[staticmethod]
    fn rotate_and_sum_steps(n: usize) -> Vec<i64> {
        Evaluator::<u64>::rotate_and_sum_steps(n)
    }

    /// Brings two ciphertexts to one level and one scale; returns the pair.
    fn align(
        &self,
        py: Python<'_>,
        a: &PyCiphertext,
        b: &PyCiphertext,
    ) -> PyResult<(PyCiphertext, PyCiphertext)> {
        let (ev, x, y) = (&self.ev, &a.ct, &b.ct);
        let (p, q) = nogil(py, || {
            words!((ev, x, y) => |e, p, q| {
                let (p, q) = e.align(p, q)?;
                Ok((CtW::from(p), CtW::from(q)))
            })
        })?;
        Ok((self.wrap(p), self.wrap(q)))
    }

    /// Evaluates the polynomial with real ``coeffs`` (lowest degree first) at every slot
    /// (baby-step giant-step). ``basis``: ``"power"`` (``sum c_k x^k``) or ``"chebyshev"``
    /// (``sum c_k T_k(y)`` with ``y`` the affine map of ``interval``, default ``(-1, 1)``, to
    /// ``[-1, 1]``). The result has ``a``'s scale and ``polynomial_depth`` fewer levels.
    #[pyo3(signature = (a, coeffs, basis = "power", interval = None))]
    fn evaluate_polynomial(
        &self,
        py: Python<'_>,
        a: &PyCiphertext,
        coeffs: &Bound<'_, PyAny>,
        basis: &str,
        interval: Option<(f64, f64)>,
    ) -> PyResult<PyCiphertext> {
        let coeffs = convert::reals(coeffs, "polynomial coefficients")?;
        let basis = poly_basis(basis, interval)?;
        self.unary(py, a, method!(evaluate_polynomial, &coeffs, basis))
    }

    /// Levels ``evaluate_polynomial`` consumes for a polynomial of ``degree`` in ``basis``.
    #[staticmethod]
    #[pyo3(signature = (degree, basis = "power", interval = None))]
    fn polynomial_depth(
        degree: usize,
        basis: &str,
        interval: Option<(f64, f64)>,
    ) -> PyResult<usize> {
        Ok(Evaluator::<u64>::polynomial_depth(
            degree,
            poly_basis(basis, interval)?,
        ))
    }

    /// Whether two scales are equal within the tolerance ``add``/``sub`` accept.
    fn scales_match(&self, a: f64, b: f64) -> bool {
        each!(&self.ev => |e| e.scales_match(a, b))
    }

    fn __repr__(&self) -> String {
        format!(
            "Evaluator(keys={}, threads={}, word_bits={})",
            if self.keyed { "True" } else { "False" },
            self.threads(),
            self.ev.word_bits()
        )
    }
}

/// `ev` with a thread budget.
pub(crate) fn with_threads(ev: &EvW, budget: Threads) -> EvW {
    match ev {
        crate::words::Words::W32(e) => crate::words::Words::W32(e.with_threads(budget)),
        crate::words::Words::W64(e) => crate::words::Words::W64(e.with_threads(budget)),
    }
}

/// `ev`'s thread budget.
pub(crate) fn budget_of(ev: &EvW) -> Threads {
    each!(ev => |e| e.threads())
}

/// `*_plain` methods take a Plaintext or values, not a ciphertext or a number.
fn plain_only(p: &Bound<'_, PyAny>, what: &str) -> PyResult<()> {
    if p.cast::<PyCiphertext>().is_ok() {
        return Err(PyTypeError::new_err(format!(
            "{what} takes a Plaintext or a 1-D array; for two ciphertexts use {}",
            what.trim_end_matches("_plain")
        )));
    }
    if p.cast::<crate::objects::PyPlaintext>().is_ok() {
        return Ok(());
    }
    match convert::numeric(p)? {
        Numeric::Values(_) => Ok(()),
        Numeric::Scalar(_) => Err(input_error(format!(
            "{what} takes a Plaintext or a 1-D array, got a single number; use {} for constants",
            if what.starts_with("multiply") {
                "multiply_const"
            } else {
                "add_const"
            }
        ))),
        Numeric::Other(why) => Err(PyTypeError::new_err(format!("{what}: {why}"))),
    }
}
