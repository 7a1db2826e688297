//! `heloom.Bootstrapper`: CKKS bootstrapping (`heloom_ckks::circuits::bootstrap`) for Python,
//! 64-bit words, full packing.

use crate::errors::{input_error, to_py};
use crate::evaluator::PyEvaluator;
use crate::objects::{nogil, PyCiphertext, PyContext, PyKeySet, Shared};
use crate::words::{each, CtW, Words};
use heloom_ckks::circuits::bootstrap::{
    preset, sparse_secret_keys, AutoBootstrap, BootstrapConfig, Bootstrapper,
};
use heloom_ckks::{Ciphertext, CkksError, Evaluator, SecretDistribution};
use pyo3::prelude::*;
use std::sync::{Arc, RwLock};

/// Refreshes ciphertexts: a ciphertext at level 0 comes back at ``output_level`` with the same
/// values (full packing: N/2 slots, or ``slots`` fewer: sparse packing). Built once per context (it encodes the homomorphic DFT's
/// transforms); then ``ctx.keygen(rotations=boot.rotations, conjugate=True)`` and
/// ``boot.set_keys(keys)`` (on the client: with a dense secret it derives the sparse-secret
/// encapsulation keys from the secret key; they are public, like the other evaluation keys).
///
/// With a preset (``CkksParameters.bootstrappable(16)`` or ``(15)``) the settings are the
/// preset's.
/// Otherwise the secret's Hamming weight (``hamming_weight`` of the parameters) or
/// ``sparse_weight`` (encapsulation under a sparse secret of that weight, for a dense secret)
/// chooses the interval ``K`` and the sine's degree; ``k``, ``degree``, ``cts_levels``,
/// ``stc_levels``, ``double_angle``, ``arcsine_degree`` (an odd degree, 0 for none: the arcsine
/// correction after the sine) and ``message_ratio_bits`` (0, or ``r`` to bring the message to
/// ``q_0 / 2^r`` before ModRaise; with a 60-bit ``q_0`` and the arcsine, as the N = 2^16 preset)
/// override them. ``fewer_keys=True`` trades time for memory: rotation keys for power-of-two
/// baby steps only (at N = 2^16, 15 keys instead of 27; the bootstrap about 6% slower).
/// ``compact_diagonals=True`` keeps every key and stores the transforms' diagonals with one word
/// per coefficient instead of one per prime, expanded at each use (at N = 2^16 about 3 GB less;
/// the same result, a little slower). ``slots``: sparse packing on that many slots (a power of two from
/// ``2^max(cts_levels, stc_levels)``): the raised ciphertext is projected onto their subring,
/// the transforms are smaller and one EvalMod serves both halves. ``threads``: for encoding the
/// transforms (default: every core; the bootstrap itself runs on its evaluator's budget).
#[pyclass(name = "Bootstrapper", module = "heloom", frozen)]
pub struct PyBootstrapper {
    shared: Arc<Shared>,
    boot: RwLock<Bootstrapper<u64>>,
    sparse_weight: Option<usize>,
}

fn unsupported() -> CkksError {
    CkksError::InvalidParameters(
        "bootstrapping runs on 64-bit words; build the parameters with word_bits=64".into(),
    )
}

impl PyBootstrapper {
    /// The evaluator (``evaluator`` or the context's default), the bootstrapper with its
    /// encapsulation keys checked, and ``ct``'s words: what a bootstrap runs on.
    fn ready(
        &self,
        evaluator: Option<&PyEvaluator>,
        ct: &PyCiphertext,
    ) -> PyResult<(Evaluator<u64>, Bootstrapper<u64>, Ciphertext<u64>)> {
        let ev = match evaluator {
            Some(e) => e.ev.clone(),
            None => self.shared.default_evaluator().ok_or_else(|| {
                input_error(
                    "no evaluator with keys: call Context.keygen(rotations=boot.rotations, conjugate=True) first, or pass evaluator=",
                )
            })?,
        };
        let boot = self.current();
        if self.sparse_weight.is_some() && !boot.has_sparse_keys() {
            return Err(input_error(
                "this Bootstrapper uses sparse-secret encapsulation: call set_keys(keys) first",
            ));
        }
        let (Words::W64(ev), CtW::W64(c)) = (ev, ct.ct.clone()) else {
            return Err(to_py(unsupported()));
        };
        Ok((ev, boot, c))
    }

    fn current(&self) -> Bootstrapper<u64> {
        match self.boot.read() {
            Ok(b) => b.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }
}

#[pymethods]
impl PyBootstrapper {
    #[new]
    #[pyo3(signature = (
        context, *, sparse_weight = None, k = None, degree = None, cts_levels = None,
        stc_levels = None, double_angle = None, arcsine_degree = None,
        message_ratio_bits = None, fewer_keys = false, compact_diagonals = false, slots = None,
        threads = None
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        context: &PyContext,
        sparse_weight: Option<usize>,
        k: Option<f64>,
        degree: Option<usize>,
        cts_levels: Option<usize>,
        stc_levels: Option<usize>,
        double_angle: Option<u32>,
        arcsine_degree: Option<usize>,
        message_ratio_bits: Option<u32>,
        fewer_keys: bool,
        compact_diagonals: bool,
        slots: Option<usize>,
        threads: Option<i64>,
    ) -> PyResult<Self> {
        let shared = Arc::clone(&context.shared);
        let Words::W64(ctx) = &shared.ctx else {
            return Err(to_py(unsupported()));
        };
        let params = ctx.params();
        let known = [16, 15]
            .into_iter()
            .filter_map(|n| preset(n).ok())
            .find(|p| &p.params == params);
        let (mut config, sparse_weight) = match (&known, params.secret_distribution()) {
            (Some(p), _) => (p.config, Some(sparse_weight.unwrap_or(p.sparse_weight))),
            (None, SecretDistribution::FixedHamming(h)) => (
                BootstrapConfig::for_hamming_weight(sparse_weight.unwrap_or(h)),
                sparse_weight,
            ),
            (None, SecretDistribution::Ternary) => {
                let h = sparse_weight.ok_or_else(|| {
                    input_error(
                        "a dense ternary secret needs sparse-secret encapsulation: pass sparse_weight (32 is the preset's)",
                    )
                })?;
                (BootstrapConfig::for_hamming_weight(h), Some(h))
            }
        };
        if let Some(k) = k {
            config.k = k;
        }
        if let Some(r) = double_angle {
            config.double_angle = r;
            config.degree = BootstrapConfig::degree_for(config.k, r);
        }
        if let Some(d) = degree {
            config.degree = d;
        }
        if let Some(c) = cts_levels {
            config.cts_levels = c;
        }
        if let Some(c) = stc_levels {
            config.stc_levels = c;
        }
        if let Some(d) = arcsine_degree {
            config.arcsine_degree = d;
        }
        if let Some(r) = message_ratio_bits {
            config.message_ratio_bits = r;
        }
        config.fewer_keys = fewer_keys;
        config.compact_diagonals = compact_diagonals;
        let budget = match threads {
            Some(t) => crate::evaluator::thread_budget(t)?,
            None => heloom_ckks::Threads::new(heloom_pool::cores()),
        };
        let slots = slots.unwrap_or(ctx.n() / 2);
        let ctx = Arc::clone(ctx);
        let boot = nogil(py, move || {
            Bootstrapper::with_slots(&ctx, config, slots, budget)
        })?;
        Ok(Self {
            shared,
            boot: RwLock::new(boot),
            sparse_weight,
        })
    }

    /// Rotation steps whose Galois keys bootstrapping needs (pass them to ``Context.keygen``
    /// with ``conjugate=True``).
    #[getter]
    fn rotations(&self) -> Vec<i64> {
        self.current().rotation_steps()
    }

    /// The level a bootstrapped ciphertext comes out at.
    #[getter]
    fn output_level(&self) -> usize {
        self.current().output_level()
    }

    /// The slot count it bootstraps: ``N/2`` (full packing) or fewer (sparse packing).
    #[getter]
    fn slots(&self) -> usize {
        self.current().slots()
    }

    /// Levels bootstrapping uses (CoeffToSlot, EvalMod, SlotToCoeff).
    #[getter]
    fn depth(&self) -> usize {
        self.current().config().depth()
    }

    /// The sparse secret's Hamming weight when ModRaise runs under encapsulation, else None.
    #[getter]
    fn sparse_weight(&self) -> Option<usize> {
        self.sparse_weight
    }

    /// Attaches what bootstrapping needs from ``keys`` (a KeySet of this context, made with
    /// ``rotations`` and ``conjugate=True``): with encapsulation, the switching keys to and
    /// from a fresh sparse secret, derived from its secret key here on the client.
    fn set_keys(&self, py: Python<'_>, keys: &PyKeySet) -> PyResult<()> {
        let Some(h) = self.sparse_weight else {
            return Ok(());
        };
        let sk = keys.secret_key_words(py);
        let (Words::W64(ctx), Words::W64(sk)) = (&self.shared.ctx, sk) else {
            return Err(to_py(unsupported()));
        };
        let ctx = Arc::clone(ctx);
        let sparse = nogil(py, move || sparse_secret_keys(&ctx, &sk, h))?;
        let keyed = self
            .current()
            .with_sparse_keys(Arc::new(sparse))
            .map_err(to_py)?;
        match self.boot.write() {
            Ok(mut b) => *b = keyed,
            Err(p) => *p.into_inner() = keyed,
        }
        Ok(())
    }

    /// Bootstraps ``ct`` (``slots`` slots, two polynomials, any level) with ``evaluator`` (it
    /// needs the relinearization, conjugation and ``rotations`` keys; default: the context's
    /// default evaluator, that of the last ``keygen``): the same values at ``output_level``,
    /// with ``ct``'s scale.
    #[pyo3(signature = (ct, evaluator = None))]
    fn bootstrap(
        &self,
        py: Python<'_>,
        ct: &PyCiphertext,
        evaluator: Option<&PyEvaluator>,
    ) -> PyResult<PyCiphertext> {
        let (ev, boot, c) = self.ready(evaluator, ct)?;
        let out = nogil(py, move || boot.bootstrap(&ev, &c))?;
        Ok(PyCiphertext::new(CtW::W64(out), &self.shared, None))
    }

    /// ``ct`` itself when it holds at least ``levels`` levels, else ``ct`` bootstrapped (as
    /// ``bootstrap``): call it before each step of a computation that outlasts the levels.
    /// Asking for more than ``output_level`` is an error that says to split the step.
    #[pyo3(signature = (ct, levels, evaluator = None))]
    fn ensure_levels(
        &self,
        py: Python<'_>,
        ct: Py<PyCiphertext>,
        levels: usize,
        evaluator: Option<&PyEvaluator>,
    ) -> PyResult<Py<PyCiphertext>> {
        if each!(&ct.borrow(py).ct => |c| c.level()) >= levels {
            return Ok(ct);
        }
        let (ev, boot, c) = self.ready(evaluator, &ct.borrow(py))?;
        let out = nogil(py, move || {
            AutoBootstrap::new(ev, boot).ensure_levels(&c, levels)
        })?;
        Py::new(py, PyCiphertext::new(CtW::W64(out), &self.shared, None))
    }

    fn __repr__(&self) -> String {
        let b = self.current();
        let c = b.config();
        format!(
            "Bootstrapper(K={}, degree={}, levels={} (CoeffToSlot {}, EvalMod {}, SlotToCoeff {}), output_level={}, slots={}, sparse_weight={:?}, fewer_keys={}, compact_diagonals={})",
            c.k,
            c.degree,
            c.depth(),
            c.cts_levels,
            c.eval_mod_depth(),
            c.stc_levels,
            b.output_level(),
            b.slots(),
            self.sparse_weight,
            if c.fewer_keys { "True" } else { "False" },
            if c.compact_diagonals { "True" } else { "False" }
        )
    }
}
