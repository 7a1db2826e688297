//! `heloom.Context`, the keys, `heloom.Plaintext` and `heloom.Ciphertext` (with its operators).

use crate::convert::{self, Arg, Scalar, Values};
use crate::errors::{input_error, to_py};
use crate::evaluator::PyEvaluator;
use crate::ops::{self, Mode};
use crate::params::PyCkksParameters;
use crate::words::{each, words, words_wrap, CtW, CtxW, EkW, EncW, EvW, PkW, PtW, SkW, Words};
use heloom_ckks::{
    keygen, Ciphertext, CkksError, CkksParameters, Context, Decryptor, Encryptor, EvaluationKeys,
    Evaluator, Plaintext, PublicKey, SecretKey,
};
use heloom_math::automorphism::{galois_element_conjugate, galois_element_for_step};
use heloom_math::{Backend, BackendChoice};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Runs `f` without the GIL and turns its error into the Python exception.
pub(crate) fn nogil<T, F>(py: Python<'_>, f: F) -> PyResult<T>
where
    F: FnOnce() -> Result<T, CkksError> + Send,
    T: Send,
{
    py.detach(f).map_err(to_py)
}

/// What every object made from one `heloom.Context` shares.
pub struct Shared {
    pub(crate) ctx: CtxW,
    pub(crate) enc: EncW,
    /// An evaluator without keys (operators on ciphertexts no evaluator has touched yet).
    pub(crate) keyless: EvW,
    /// The evaluator the operators use when neither operand came from an evaluator: the last
    /// one made by `Context.evaluator`, or (until there is one) one with the evaluation keys of
    /// the last `Context.keygen`.
    default_ev: Mutex<(Option<EvW>, bool)>,
}

impl Shared {
    fn new(ctx: CtxW) -> Self {
        let (enc, keyless) = match &ctx {
            Words::W32(c) => (
                Words::W32(Encryptor::new(c)),
                Words::W32(Evaluator::without_keys(c)),
            ),
            Words::W64(c) => (
                Words::W64(Encryptor::new(c)),
                Words::W64(Evaluator::without_keys(c)),
            ),
        };
        Self {
            ctx,
            enc,
            keyless,
            default_ev: Mutex::new((None, false)),
        }
    }

    pub(crate) fn params(&self) -> &CkksParameters {
        each!(&self.ctx => |c| c.params())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, (Option<EvW>, bool)> {
        match self.default_ev.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    /// The default evaluator, if any.
    pub(crate) fn default_evaluator(&self) -> Option<EvW> {
        self.lock().0.clone()
    }

    /// Records `ev` as the default; `explicit` for `Context.evaluator`, which keygen's implicit
    /// default never replaces.
    pub(crate) fn set_default(&self, ev: EvW, explicit: bool) {
        let mut g = self.lock();
        if explicit || !g.1 {
            *g = (Some(ev), explicit);
        }
    }

    /// Builds an evaluator (with keys when given).
    pub(crate) fn evaluator(&self, keys: Option<&EkW>) -> Result<EvW, CkksError> {
        match keys {
            None => Ok(self.keyless.clone()),
            Some(k) => words_wrap!((&self.ctx, k) => |c, k| Evaluator::new(c, Arc::clone(k))),
        }
    }
}

/// The CKKS context: parameters and everything precomputed from them. Encrypts, decrypts,
/// encodes, decodes, generates keys and makes evaluators. Objects of contexts with equal
/// parameters can be mixed; objects of different parameters raise ParameterError.
#[pyclass(name = "Context", module = "heloom", frozen)]
pub struct PyContext {
    pub(crate) shared: Arc<Shared>,
}

impl PyContext {
    pub(crate) fn from_shared(shared: Arc<Shared>) -> Self {
        Self { shared }
    }
}

fn make_ciphertext(shared: &Arc<Shared>, ct: CtW, ev: Option<EvW>) -> PyCiphertext {
    PyCiphertext {
        ct,
        shared: Arc::clone(shared),
        ev,
    }
}

#[pymethods]
impl PyContext {
    /// Precomputes everything for ``params`` (NTT tables, RNS bases, key-switching
    /// converters, the encoder) on the fastest SIMD backend of this CPU, or on ``backend``
    /// (``"scalar"``, ``"avx2"``, ``"avx512"``, ``"avx512-ifma"``): an execution choice, so
    /// objects move freely between contexts of equal parameters on different backends.
    #[new]
    #[pyo3(signature = (params, backend=None))]
    fn new(py: Python<'_>, params: &PyCkksParameters, backend: Option<&str>) -> PyResult<Self> {
        let p = params.p.clone();
        let choice = match backend {
            None => BackendChoice::Auto,
            Some(name) => BackendChoice::Force(
                name.parse::<Backend>()
                    .map_err(|e| to_py(heloom_ckks::CkksError::from(e)))?,
            ),
        };
        let ctx = nogil(py, move || {
            Ok(if p.word_bits() == 32 {
                Words::W32(Context::<u32>::with_backend(p, choice)?)
            } else {
                Words::W64(Context::<u64>::with_backend(p, choice)?)
            })
        })?;
        Ok(Self {
            shared: Arc::new(Shared::new(ctx)),
        })
    }

    /// The SIMD backend the kernels of this context run on.
    #[getter]
    fn backend(&self) -> String {
        each!(&self.shared.ctx => |c| c.backend().to_string())
    }

    /// The parameters.
    #[getter]
    fn params(&self) -> PyCkksParameters {
        PyCkksParameters {
            p: self.shared.params().clone(),
        }
    }

    /// Word size in bits: 32 or 64.
    #[getter]
    fn word_bits(&self) -> u32 {
        self.shared.ctx.word_bits()
    }

    /// Slots of a fully packed ciphertext (N/2).
    #[getter]
    fn slots(&self) -> usize {
        self.shared.params().slots()
    }

    /// Generates a fresh key set: secret key, public key, and evaluation keys (relinearization,
    /// a Galois key per rotation step in ``rotations`` (negative = right), and conjugation
    /// when ``conjugate``). Until ``Context.evaluator`` is called, ciphertext operators use
    /// these evaluation keys.
    #[pyo3(signature = (rotations = None, conjugate = false))]
    fn keygen(
        &self,
        py: Python<'_>,
        rotations: Option<Vec<i64>>,
        conjugate: bool,
    ) -> PyResult<PyKeySet> {
        let steps = rotations.unwrap_or_default();
        let shared = &self.shared;
        let (sk, pk, ek) = nogil(py, || -> Result<(SkW, PkW, EkW), CkksError> {
            Ok(match &shared.ctx {
                Words::W32(c) => {
                    let k = keygen(c, &steps, conjugate)?;
                    (
                        Words::W32(k.secret_key),
                        Words::W32(k.public_key),
                        Words::W32(Arc::new(k.evaluation_keys)),
                    )
                }
                Words::W64(c) => {
                    let k = keygen(c, &steps, conjugate)?;
                    (
                        Words::W64(k.secret_key),
                        Words::W64(k.public_key),
                        Words::W64(Arc::new(k.evaluation_keys)),
                    )
                }
            })
        })?;
        let ev = shared.evaluator(Some(&ek)).map_err(to_py)?;
        shared.set_default(ev, false);
        Ok(PyKeySet {
            secret_key: Py::new(py, PySecretKey { sk })?,
            public_key: Py::new(py, PyPublicKey { pk })?,
            evaluation_keys: Py::new(
                py,
                PyEvaluationKeys {
                    ek,
                    n: shared.params().n(),
                },
            )?,
        })
    }

    /// Encrypts ``values`` (a 1-D array or list of real or complex numbers, at most N/2 of
    /// them; padded with zeros to a power of two) at the top level and the default scale.
    /// With a PublicKey: public-key encryption; with the SecretKey: symmetric encryption (the
    /// ciphertext is then compressible). ``values`` may also be a Plaintext (public key only).
    fn encrypt(
        &self,
        py: Python<'_>,
        values: &Bound<'_, PyAny>,
        key: &Bound<'_, PyAny>,
    ) -> PyResult<PyCiphertext> {
        let enc = &self.shared.enc;
        if let Ok(pt) = values.cast::<PyPlaintext>() {
            let pk = key.cast::<PyPublicKey>().map_err(|_| {
                PyTypeError::new_err(
                    "a Plaintext is encrypted with a PublicKey; pass values to encrypt with the SecretKey",
                )
            })?;
            let pt = &pt.get().pt;
            let pk = &pk.get().pk;
            let ct = nogil(
                py,
                || words_wrap!((enc, pt, pk) => |e, p, k| e.encrypt_plaintext(p, k)),
            )?;
            return Ok(make_ciphertext(&self.shared, ct, None));
        }
        let vals = convert::values(values)?.to_complex();
        let ct = if let Ok(pk) = key.cast::<PyPublicKey>() {
            let pk = &pk.get().pk;
            nogil(
                py,
                || words_wrap!((enc, pk) => |e, k| e.encrypt_complex(&vals, k)),
            )?
        } else if let Ok(sk) = key.cast::<PySecretKey>() {
            let sk = &sk.get().sk;
            nogil(
                py,
                || words_wrap!((enc, sk) => |e, k| e.encrypt_complex_symmetric(&vals, k)),
            )?
        } else {
            return Err(PyTypeError::new_err(format!(
                "key must be a PublicKey or a SecretKey, got {}",
                key.get_type().name()?
            )));
        };
        Ok(make_ciphertext(&self.shared, ct, None))
    }

    /// Decrypts and decodes: a numpy array of ``ciphertext.slots`` values, complex128, or
    /// float64 (the real parts) with ``real=True``.
    #[pyo3(signature = (ciphertext, secret_key, real = false))]
    fn decrypt(
        &self,
        py: Python<'_>,
        ciphertext: &PyCiphertext,
        secret_key: &PySecretKey,
        real: bool,
    ) -> PyResult<Py<PyAny>> {
        let ctx = &self.shared.ctx;
        let (ct, sk) = (&ciphertext.ct, &secret_key.sk);
        let v = nogil(
            py,
            || words!((ctx, ct, sk) => |c, x, k| Decryptor::new(c, k)?.decrypt_complex(x)),
        )?;
        Ok(convert::to_numpy(py, v, real))
    }

    /// Encodes ``values`` (1-D, real or complex) into a Plaintext at ``level`` (default: the
    /// top) and ``scale`` (default: the parameters' scale).
    #[pyo3(signature = (values, level = None, scale = None))]
    fn encode(
        &self,
        py: Python<'_>,
        values: &Bound<'_, PyAny>,
        level: Option<usize>,
        scale: Option<f64>,
    ) -> PyResult<PyPlaintext> {
        let vals = convert::values(values)?;
        let p = self.shared.params();
        let level = level.unwrap_or(p.max_level());
        let scale = scale.unwrap_or(p.scale());
        let ctx = &self.shared.ctx;
        let pt = nogil(py, || {
            words_wrap!((ctx) => |c| match &vals {
                Values::Real(v) => c.encode_at(v, level, scale),
                Values::Complex(v) => c.encode_complex_at(v, level, scale),
            })
        })?;
        Ok(PyPlaintext {
            pt,
            shared: Arc::clone(&self.shared),
        })
    }

    /// Decodes a Plaintext: a numpy array of ``plaintext.slots`` values, complex128, or
    /// float64 with ``real=True``.
    #[pyo3(signature = (plaintext, real = false))]
    fn decode(&self, py: Python<'_>, plaintext: &PyPlaintext, real: bool) -> PyResult<Py<PyAny>> {
        let ctx = &self.shared.ctx;
        let pt = &plaintext.pt;
        let v = nogil(py, || words!((ctx, pt) => |c, p| c.decode_complex(p)))?;
        Ok(convert::to_numpy(py, v, real))
    }

    /// An Evaluator with ``keys`` (the key set's ``evaluation_keys``), or without keys (no
    /// relinearization or rotations) when None, running every heavy op on at most ``threads``
    /// threads (at least 1, else InputError). It becomes the evaluator the ciphertext
    /// operators use for ciphertexts no evaluator has produced.
    #[pyo3(signature = (keys = None, threads = 1))]
    fn evaluator(&self, keys: Option<&PyEvaluationKeys>, threads: i64) -> PyResult<PyEvaluator> {
        let budget = crate::evaluator::thread_budget(threads)?;
        let mut ev = PyEvaluator::build(&self.shared, keys)?;
        if budget.get() != 1 {
            ev.ev = crate::evaluator::with_threads(&ev.ev, budget);
        }
        if keys.is_some() {
            self.shared.set_default(ev.ev.clone(), true);
        }
        Ok(ev)
    }

    /// The evaluator ciphertext operators fall back on (see ``Context.evaluator``), or None.
    #[getter]
    fn default_evaluator(&self) -> Option<PyEvaluator> {
        self.shared
            .default_evaluator()
            .map(|ev| PyEvaluator::from_parts(ev, Arc::clone(&self.shared), true))
    }

    fn __repr__(&self) -> String {
        let p = self.shared.params();
        format!(
            "Context(poly_degree={}, levels={}, word_bits={})",
            p.n(),
            p.max_level(),
            p.word_bits()
        )
    }
}

/// The secret key. Stays with the client: it cannot be pickled, its repr hides it, and its
/// bytes (``to_bytes``, for the client's own storage) are refused by every loader of a public
/// object.
#[pyclass(name = "SecretKey", module = "heloom", frozen)]
pub struct PySecretKey {
    pub(crate) sk: SkW,
}

#[pymethods]
impl PySecretKey {
    /// Word size in bits: 32 or 64.
    #[getter]
    fn word_bits(&self) -> u32 {
        self.sk.word_bits()
    }

    fn __repr__(&self) -> String {
        format!("SecretKey(<hidden>, word_bits={})", self.sk.word_bits())
    }

    /// Secret keys are never pickled.
    fn __reduce__(&self) -> PyResult<()> {
        Err(PyTypeError::new_err(
            "heloom.SecretKey cannot be pickled: the secret key never leaves the client",
        ))
    }

    /// The key in heloom's binary format, for the client's own storage only (2 bits per
    /// coefficient, checksummed). Never send these bytes: every loader of a public object
    /// refuses them.
    fn to_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        let v = each!(&self.sk => |k| k.to_bytes());
        PyBytes::new(py, &v)
    }

    /// Loads a secret key saved by ``to_bytes`` for ``ctx``'s parameters; bad bytes raise
    /// FormatError, keys of other parameters ParameterError.
    #[staticmethod]
    fn from_bytes(ctx: &PyContext, data: &[u8]) -> PyResult<PySecretKey> {
        let sk =
            words_wrap!((&ctx.shared.ctx) => |c| SecretKey::from_bytes(c, data)).map_err(to_py)?;
        Ok(PySecretKey { sk })
    }
}

/// The public key: anyone holding it can encrypt.
#[pyclass(name = "PublicKey", module = "heloom", frozen)]
pub struct PyPublicKey {
    pub(crate) pk: PkW,
}

#[pymethods]
impl PyPublicKey {
    /// Word size in bits: 32 or 64.
    #[getter]
    fn word_bits(&self) -> u32 {
        self.pk.word_bits()
    }

    fn __repr__(&self) -> String {
        format!("PublicKey(word_bits={})", self.pk.word_bits())
    }

    /// The key in heloom's binary format (its uniform half stored as a 32-byte seed).
    fn to_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        let v = each!(&self.pk => |k| k.to_bytes());
        PyBytes::new(py, &v)
    }

    /// Loads a public key made for ``ctx``'s parameters; bad bytes raise FormatError, keys of
    /// other parameters raise ParameterError.
    #[staticmethod]
    fn from_bytes(ctx: &PyContext, data: &[u8]) -> PyResult<PyPublicKey> {
        let pk =
            words_wrap!((&ctx.shared.ctx) => |c| PublicKey::from_bytes(c, data)).map_err(to_py)?;
        Ok(PyPublicKey { pk })
    }
}

/// Evaluation keys: the relinearization key and the Galois keys (rotations, conjugation).
/// What the server needs; give them to ``Context.evaluator``.
#[pyclass(name = "EvaluationKeys", module = "heloom", frozen)]
pub struct PyEvaluationKeys {
    pub(crate) ek: EkW,
    pub(crate) n: usize,
}

impl PyEvaluationKeys {
    fn elements(&self) -> Vec<u64> {
        each!(&self.ek => |k| k.galois_elements())
    }
}

#[pymethods]
impl PyEvaluationKeys {
    /// Word size in bits: 32 or 64.
    #[getter]
    fn word_bits(&self) -> u32 {
        self.ek.word_bits()
    }

    /// Whether the relinearization key is present.
    #[getter]
    fn has_relinearization(&self) -> bool {
        each!(&self.ek => |k| k.has_relin())
    }

    /// Rotation steps with a key, sorted, in ``(-slots/2, slots/2]`` (a step and the same step
    /// minus ``slots`` share one key).
    #[getter]
    fn rotations(&self) -> Vec<i64> {
        let slots = (self.n / 2) as i64;
        let by_elt: HashMap<u64, i64> = (0..slots)
            .map(|k| (galois_element_for_step(self.n, k), k))
            .collect();
        let mut v: Vec<i64> = self
            .elements()
            .iter()
            .filter_map(|g| by_elt.get(g))
            .map(|&k| if k > slots / 2 { k - slots } else { k })
            .collect();
        v.sort_unstable();
        v
    }

    /// Whether the conjugation key is present.
    #[getter]
    fn conjugate(&self) -> bool {
        self.elements().contains(&galois_element_conjugate(self.n))
    }

    /// Galois elements with a key.
    #[getter]
    fn galois_elements(&self) -> Vec<u64> {
        self.elements()
    }

    /// Size of the keys in memory, in bytes.
    #[getter]
    fn memory_bytes(&self) -> usize {
        each!(&self.ek => |k| k.memory_bytes())
    }

    fn __repr__(&self) -> String {
        format!(
            "EvaluationKeys(relinearization={}, rotations={:?}, conjugate={}, word_bits={})",
            if self.has_relinearization() {
                "True"
            } else {
                "False"
            },
            self.rotations(),
            if self.conjugate() { "True" } else { "False" },
            self.ek.word_bits()
        )
    }

    /// The keys in heloom's binary format (bit-packed, uniform halves as seeds).
    fn to_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        let v = py.detach(|| each!(&self.ek => |k| k.to_bytes()));
        PyBytes::new(py, &v)
    }

    /// Loads evaluation keys made for ``ctx``'s parameters; bad bytes raise FormatError.
    #[staticmethod]
    fn from_bytes(py: Python<'_>, ctx: &PyContext, data: &[u8]) -> PyResult<PyEvaluationKeys> {
        let n = ctx.shared.params().n();
        let ek = py
            .detach(|| -> Result<EkW, CkksError> {
                Ok(match &ctx.shared.ctx {
                    Words::W32(c) => Words::W32(Arc::new(EvaluationKeys::from_bytes(c, data)?)),
                    Words::W64(c) => Words::W64(Arc::new(EvaluationKeys::from_bytes(c, data)?)),
                })
            })
            .map_err(to_py)?;
        Ok(PyEvaluationKeys { ek, n })
    }
}

/// What ``Context.keygen`` returns: ``secret_key``, ``public_key``, ``evaluation_keys``.
#[pyclass(name = "KeySet", module = "heloom", frozen)]
pub struct PyKeySet {
    secret_key: Py<PySecretKey>,
    public_key: Py<PyPublicKey>,
    evaluation_keys: Py<PyEvaluationKeys>,
}

impl PyKeySet {
    /// The secret key's words (for client-side derivations such as bootstrapping's keys).
    pub(crate) fn secret_key_words(&self, py: Python<'_>) -> SkW {
        self.secret_key.bind(py).get().sk.clone()
    }
}

#[pymethods]
impl PyKeySet {
    /// The secret key (decryption; stays with the client).
    #[getter]
    fn secret_key(&self, py: Python<'_>) -> Py<PySecretKey> {
        self.secret_key.clone_ref(py)
    }

    /// The public key (encryption).
    #[getter]
    fn public_key(&self, py: Python<'_>) -> Py<PyPublicKey> {
        self.public_key.clone_ref(py)
    }

    /// The evaluation keys (relinearization, rotations, conjugation).
    #[getter]
    fn evaluation_keys(&self, py: Python<'_>) -> Py<PyEvaluationKeys> {
        self.evaluation_keys.clone_ref(py)
    }

    fn __repr__(&self) -> String {
        let sk = self.secret_key.get();
        format!(
            "KeySet(secret_key={}, public_key={}, evaluation_keys={})",
            sk.__repr__(),
            self.public_key.get().__repr__(),
            self.evaluation_keys.get().__repr__()
        )
    }

    /// Secret keys are never pickled.
    fn __reduce__(&self) -> PyResult<()> {
        Err(PyTypeError::new_err(
            "heloom.KeySet cannot be pickled: it holds the secret key, which never leaves the client",
        ))
    }
}

/// An encoded message (NTT form) at a level and a scale. Made by ``Context.encode``.
#[pyclass(name = "Plaintext", module = "heloom", frozen)]
pub struct PyPlaintext {
    pub(crate) pt: PtW,
    pub(crate) shared: Arc<Shared>,
}

#[pymethods]
impl PyPlaintext {
    /// Level (number of primes above q_0).
    #[getter]
    fn level(&self) -> usize {
        each!(&self.pt => |p| p.level())
    }

    /// Scale the values were multiplied by.
    #[getter]
    fn scale(&self) -> f64 {
        each!(&self.pt => |p| p.scale())
    }

    /// Number of slots encoded (a power of two).
    #[getter]
    fn slots(&self) -> usize {
        each!(&self.pt => |p| p.slots())
    }

    /// Word size in bits: 32 or 64.
    #[getter]
    fn word_bits(&self) -> u32 {
        self.pt.word_bits()
    }

    /// The context it was made with.
    #[getter]
    fn context(&self) -> PyContext {
        PyContext::from_shared(Arc::clone(&self.shared))
    }

    fn __repr__(&self) -> String {
        format!(
            "Plaintext(level={}, scale=2^{:.2}, slots={}, word_bits={})",
            self.level(),
            self.scale().log2(),
            self.slots(),
            self.word_bits()
        )
    }

    /// The plaintext in heloom's binary format.
    fn to_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        let v = each!(&self.pt => |p| p.to_bytes());
        PyBytes::new(py, &v)
    }

    /// Loads a plaintext made for ``ctx``'s parameters; bad bytes raise FormatError.
    #[staticmethod]
    fn from_bytes(ctx: &PyContext, data: &[u8]) -> PyResult<PyPlaintext> {
        let pt =
            words_wrap!((&ctx.shared.ctx) => |c| Plaintext::from_bytes(c, data)).map_err(to_py)?;
        Ok(PyPlaintext {
            pt,
            shared: Arc::clone(&ctx.shared),
        })
    }
}

/// A CKKS ciphertext at a level and a scale. Made by ``Context.encrypt`` and the Evaluator.
///
/// Operators ``+ - *`` (and their reflected forms, unary ``-``, ``/`` by a number) take a
/// Ciphertext, a Plaintext, a number or a 1-D array, and manage the scale for you: ``ct * ct``
/// relinearizes and rescales, ``ct * float`` and ``ct * array`` rescale, ``ct * int`` is exact
/// and keeps the level. Adding or subtracting two ciphertexts at one level whose scales differ
/// (a product and a fresh ciphertext, say) aligns them at the cost of one level, where
/// ``Evaluator.add`` raises ScaleError. Operators use the evaluator that produced an operand,
/// else the context's default evaluator (see ``Context.evaluator``).
#[pyclass(name = "Ciphertext", module = "heloom", frozen)]
pub struct PyCiphertext {
    pub(crate) ct: CtW,
    pub(crate) shared: Arc<Shared>,
    /// The evaluator (with keys) that produced it, used by the operators.
    pub(crate) ev: Option<EvW>,
}

impl PyCiphertext {
    pub(crate) fn new(ct: CtW, shared: &Arc<Shared>, ev: Option<EvW>) -> Self {
        make_ciphertext(shared, ct, ev)
    }

    /// The evaluator for an operator: this one's, else `other`'s, else the context default,
    /// else one without keys (not remembered on the result).
    fn op_evaluator(&self, other: Option<&PyCiphertext>) -> (EvW, bool) {
        if let Some(e) = self.ev.as_ref().or(other.and_then(|o| o.ev.as_ref())) {
            return (e.clone(), true);
        }
        if let Some(e) = self.shared.default_evaluator() {
            return (e, true);
        }
        (self.shared.keyless.clone(), false)
    }

    fn binary(
        &self,
        py: Python<'_>,
        other: &Bound<'_, PyAny>,
        f: impl FnOnce(&EvW, &CtW, &convert::Operand<'_>) -> Result<CtW, CkksError> + Send,
    ) -> PyResult<Py<PyAny>> {
        let arg = Arg::parse(other)?;
        let Some(operand) = arg.operand() else {
            return Ok(py.NotImplemented());
        };
        let other_ct = match &arg {
            Arg::Ct(c) => Some(c.get()),
            _ => None,
        };
        let (ev, keep) = self.op_evaluator(other_ct);
        let ct = &self.ct;
        let out = nogil(py, || f(&ev, ct, &operand))?;
        let res = make_ciphertext(&self.shared, out, keep.then_some(ev));
        Ok(Py::new(py, res)?.into_any())
    }

    fn level_of(&self) -> usize {
        each!(&self.ct => |c| c.level())
    }

    fn scale_of(&self) -> f64 {
        each!(&self.ct => |c| c.scale())
    }
}

#[pymethods]
impl PyCiphertext {
    /// ``None``: numpy defers to the Ciphertext operators (``array * ct`` is ``ct * array``,
    /// not an object array of per-element products).
    #[classattr]
    fn __array_ufunc__(py: Python<'_>) -> Py<PyAny> {
        py.None()
    }

    /// Level: rescalings left.
    #[getter]
    fn level(&self) -> usize {
        self.level_of()
    }

    /// Scale of the encrypted values.
    #[getter]
    fn scale(&self) -> f64 {
        self.scale_of()
    }

    /// Number of polynomials: 2, or 3 after a multiplication before relinearization.
    #[getter]
    fn size(&self) -> usize {
        each!(&self.ct => |c| c.size())
    }

    /// Number of slots in use (a power of two; decryption returns this many values).
    #[getter]
    fn slots(&self) -> usize {
        each!(&self.ct => |c| c.slots())
    }

    /// Word size in bits: 32 or 64.
    #[getter]
    fn word_bits(&self) -> u32 {
        self.ct.word_bits()
    }

    /// Whether it is a fresh symmetric encryption (stored at half size).
    #[getter]
    fn is_seeded(&self) -> bool {
        each!(&self.ct => |c| c.is_seeded())
    }

    /// The context it was made with.
    #[getter]
    fn context(&self) -> PyContext {
        PyContext::from_shared(Arc::clone(&self.shared))
    }

    /// A copy whose recorded scale is ``scale`` (the caller takes responsibility, as with
    /// SEAL's scale setter): for after multiplying by a constant chosen to hit a target scale.
    fn with_scale(&self, scale: f64) -> PyResult<PyCiphertext> {
        if !(scale.is_finite() && scale > 0.0) {
            return Err(input_error(format!(
                "scale must be a finite positive number, got {scale}"
            )));
        }
        let mut ct = self.ct.clone();
        each!(&mut ct => |c| c.set_scale(scale));
        Ok(make_ciphertext(&self.shared, ct, self.ev.clone()))
    }

    fn __repr__(&self) -> String {
        format!(
            "Ciphertext(level={}, scale=2^{:.2}, size={}, slots={}, word_bits={})",
            self.level_of(),
            self.scale_of().log2(),
            self.size(),
            self.slots(),
            self.word_bits()
        )
    }

    /// ``self + other``.
    fn __add__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        self.binary(py, other, |ev, a, b| {
            ops::add(ev, a, b, false, Mode::Operator)
        })
    }

    /// ``other + self``.
    fn __radd__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        self.binary(py, other, |ev, a, b| {
            ops::add(ev, a, b, false, Mode::Operator)
        })
    }

    /// ``self - other``.
    fn __sub__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        self.binary(py, other, |ev, a, b| {
            ops::add(ev, a, b, true, Mode::Operator)
        })
    }

    /// ``other - self``.
    fn __rsub__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        self.binary(py, other, ops::rsub)
    }

    /// ``self * other``: relinearized and rescaled (integers: exact, no rescale).
    fn __mul__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        self.binary(py, other, |ev, a, b| ops::mul(ev, a, b, Mode::Operator))
    }

    /// ``other * self``.
    fn __rmul__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        self.binary(py, other, |ev, a, b| ops::mul(ev, a, b, Mode::Operator))
    }

    /// ``self / c`` for a nonzero number ``c``: multiplication by ``1/c``, rescaled.
    fn __truediv__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let s = match convert::numeric(other)? {
            convert::Numeric::Scalar(s) => s.to_complex(),
            _ => return Ok(py.NotImplemented()),
        };
        if s.norm() == 0.0 {
            return Err(pyo3::exceptions::PyZeroDivisionError::new_err(
                "division of a ciphertext by zero",
            ));
        }
        let inv = s.inv();
        let sc = if inv.im == 0.0 {
            Scalar::Real(inv.re)
        } else {
            Scalar::Complex(inv)
        };
        let (ev, keep) = self.op_evaluator(None);
        let ct = &self.ct;
        let out = nogil(py, || ops::mul_const(&ev, ct, sc, Mode::Operator))?;
        let res = make_ciphertext(&self.shared, out, keep.then_some(ev));
        Ok(Py::new(py, res)?.into_any())
    }

    /// ``-self``.
    fn __neg__(&self, py: Python<'_>) -> PyResult<PyCiphertext> {
        let (ev, keep) = self.op_evaluator(None);
        let ct = &self.ct;
        let out = nogil(py, || words_wrap!((&ev, ct) => |e, c| e.negate(c)))?;
        Ok(make_ciphertext(&self.shared, out, keep.then_some(ev)))
    }

    /// ``+self`` (the same ciphertext).
    fn __pos__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    /// The ciphertext in heloom's binary format: versioned, checked on load, limbs bit-packed
    /// at their primes' sizes, and ``c_1`` stored as a 32-byte seed for a fresh secret-key
    /// encryption (half the size).
    fn to_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        let v = each!(&self.ct => |c| c.to_bytes());
        PyBytes::new(py, &v)
    }

    /// Loads a ciphertext made for ``ctx``'s parameters. Malformed bytes raise FormatError
    /// (with what is wrong); a ciphertext of other parameters raises ParameterError.
    #[staticmethod]
    fn from_bytes(ctx: &PyContext, data: &[u8]) -> PyResult<PyCiphertext> {
        let ct =
            words_wrap!((&ctx.shared.ctx) => |c| Ciphertext::from_bytes(c, data)).map_err(to_py)?;
        Ok(PyCiphertext::new(ct, &ctx.shared, None))
    }
}

/// Converts an object written by heloom's format version 1 (no checksum) to version 2.
///
/// Parameters need no context; every other kind needs the ``Context`` of the parameters it
/// was made for. Every field is re-validated, but version 1 carries no checksum, so convert
/// only bytes from a source you trust and keep the version-2 bytes this returns. Bytes that
/// are not version 1 raise FormatError.
#[pyfunction]
#[pyo3(signature = (data, ctx=None))]
pub fn upgrade_v1<'py>(
    py: Python<'py>,
    data: &[u8],
    ctx: Option<&PyContext>,
) -> PyResult<Bound<'py, PyBytes>> {
    use heloom_ckks::serialize;
    let out = match ctx {
        None => serialize::upgrade_v1_params(data),
        Some(c) => match &c.shared.ctx {
            Words::W32(c) => serialize::upgrade_v1(c, data),
            Words::W64(c) => serialize::upgrade_v1(c, data),
        },
    }
    .map_err(to_py)?;
    Ok(PyBytes::new(py, &out))
}
