//! Task graphs and scheduling from Python: `heloom.GraphBuilder`, `heloom.Value`,
//! `heloom.TaskGraph`, the built-in graphs (`exp_graph`, `polynomial_graph`) and the
//! discrete-event simulation of the runtime's scheduler (`simulate`).
//!
//! Graphs hold the modulus chain only (no keys, no word size): a graph is recorded on symbolic
//! values and runs on any evaluator whose context has the same chain.

use crate::convert;
use crate::errors::{graph_to_py, input_error, profile_to_py, to_py, GraphError};
use crate::evaluator::{budget_of, poly_basis, thread_budget, with_threads, PyEvaluator};
use crate::objects::{PyCiphertext, PyContext};
use crate::ops::Pick;
use crate::words::{each, CtW, Words};
use heloom_ckks::{Ciphertext, CkksError, Evaluator, PolyOps};
use heloom_runtime::cost::CostModel;
use heloom_runtime::graph::{self as rg, ExpVariant};
use heloom_runtime::load::{default_window, poisson_arrivals};
use heloom_runtime::metrics::summarize;
use heloom_runtime::policy::{policy_by_name, POLICY_NAMES};
use heloom_runtime::profile::Profile;
use heloom_runtime::scheduler::Scheduler;
use heloom_runtime::workload::default_params;
use heloom_runtime::{RunSummary, TaskGraph};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// Distinguishes builders, so that a Value is only used with the builder that made it.
static NEXT_BUILDER: AtomicU64 = AtomicU64::new(1);

/// Records CKKS operations on symbolic values (``Value``) into a ``TaskGraph``, without keys
/// or ciphertexts: every level, scale and size is known while recording, so level and scale
/// errors are raised here (LevelError, ScaleError, InputError), as the evaluator would raise
/// them when running.
///
/// ``GraphBuilder(context, name="job")`` needs only the context's modulus chain. Record inputs
/// with ``input`` or ``input_like``, operations with the methods below, then call ``finish``
/// with the outputs: consecutive operations are fused into the paper's task kinds (a
/// multiplication with its relinearization and rescale is one task, a multiplication by a
/// constant with its rescale another, additions their own tasks). ``end_task`` forces a value
/// to end its task. After ``finish`` the builder cannot be used again (GraphError).
#[pyclass(name = "GraphBuilder", module = "heloom", frozen)]
pub struct PyGraphBuilder {
    id: u64,
    name: String,
    moduli: Vec<u64>,
    scale: f64,
    inner: Mutex<Option<rg::GraphBuilder>>,
}

/// A symbolic ciphertext recorded by a ``GraphBuilder``: what the ciphertext at that point of
/// the graph will look like (level, scale, size). Only usable with the builder that made it.
#[pyclass(name = "Value", module = "heloom", frozen)]
pub struct PyValue {
    builder: u64,
    v: rg::Value,
}

impl PyGraphBuilder {
    fn lock(&self) -> MutexGuard<'_, Option<rg::GraphBuilder>> {
        match self.inner.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    fn finished_err(&self) -> PyErr {
        GraphError::new_err(format!(
            "GraphBuilder '{}' is finished: finish() was called; start a new GraphBuilder",
            self.name
        ))
    }

    /// Runs `f` on the builder (if not finished) with the values unwrapped.
    fn with<T>(
        &self,
        values: &[&PyValue],
        f: impl FnOnce(&rg::GraphBuilder, &[rg::Value]) -> Result<T, CkksError>,
    ) -> PyResult<T> {
        let vals = self.check(values)?;
        let g = self.lock();
        let b = g.as_ref().ok_or_else(|| self.finished_err())?;
        f(b, &vals).map_err(to_py)
    }

    fn check(&self, values: &[&PyValue]) -> PyResult<Vec<rg::Value>> {
        values
            .iter()
            .map(|v| {
                if v.builder == self.id {
                    Ok(v.v)
                } else {
                    Err(GraphError::new_err(format!(
                        "a Value of another GraphBuilder cannot be used with GraphBuilder '{}'",
                        self.name
                    )))
                }
            })
            .collect()
    }

    fn value(&self, v: rg::Value) -> PyValue {
        PyValue {
            builder: self.id,
            v,
        }
    }

    fn unary(
        &self,
        a: &PyValue,
        f: impl FnOnce(&rg::GraphBuilder, &rg::Value) -> Result<rg::Value, CkksError>,
    ) -> PyResult<PyValue> {
        let v = self.with(&[a], |b, v| f(b, &v[0]))?;
        Ok(self.value(v))
    }

    fn binary(
        &self,
        a: &PyValue,
        c: &PyValue,
        f: impl FnOnce(&rg::GraphBuilder, &rg::Value, &rg::Value) -> Result<rg::Value, CkksError>,
    ) -> PyResult<PyValue> {
        let v = self.with(&[a, c], |b, v| f(b, &v[0], &v[1]))?;
        Ok(self.value(v))
    }
}

/// A finite real constant, else InputError.
fn finite(c: f64, what: &str) -> PyResult<f64> {
    if c.is_finite() {
        Ok(c)
    } else {
        Err(input_error(format!("{what} must be finite, got {c}")))
    }
}

#[pymethods]
impl PyGraphBuilder {
    /// A builder for ciphertexts of ``context``'s parameters (only the modulus chain is used),
    /// recording a graph called ``name``.
    #[new]
    #[pyo3(signature = (context, name = "job"))]
    fn py_new(context: &PyContext, name: &str) -> Self {
        let p = context.shared.params();
        Self {
            id: NEXT_BUILDER.fetch_add(1, Ordering::Relaxed),
            name: name.to_string(),
            moduli: p.moduli().to_vec(),
            scale: p.scale(),
            inner: Mutex::new(Some(rg::GraphBuilder::new(name, p.moduli()))),
        }
    }

    /// The graph's name.
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    /// Whether ``finish`` was called (the builder is then unusable).
    #[getter]
    fn finished(&self) -> bool {
        self.lock().is_none()
    }

    /// The next job input: a fresh (size-2) ciphertext at ``level`` (default: the top level)
    /// with ``scale`` (default: the parameters' scale). ``TaskGraph.run`` takes the inputs in
    /// the order they were declared.
    #[pyo3(signature = (level = None, scale = None))]
    fn input(&self, level: Option<usize>, scale: Option<f64>) -> PyResult<PyValue> {
        let level = level.unwrap_or(self.moduli.len().saturating_sub(1));
        let scale = scale.unwrap_or(self.scale);
        let v = self.with(&[], |b, _| b.input(level, scale))?;
        Ok(self.value(v))
    }

    /// The next job input, at ``ciphertext``'s level and scale (its parameters must have this
    /// builder's modulus chain, else ParameterError).
    fn input_like(&self, ciphertext: &PyCiphertext) -> PyResult<PyValue> {
        if ciphertext.shared.params().moduli() != self.moduli.as_slice() {
            return Err(to_py(CkksError::ParameterMismatch(format!(
                "the ciphertext's parameters have another modulus chain than GraphBuilder '{}'",
                self.name
            ))));
        }
        let (level, scale) = ciphertext_shape(&ciphertext.ct);
        let v = self.with(&[], |b, _| b.input(level, scale))?;
        Ok(self.value(v))
    }

    /// ``a + b`` (levels aligned by dropping; scales that differ are aligned exactly when
    /// possible, recorded as explicit operations, else ScaleError).
    fn add(&self, a: &PyValue, b: &PyValue) -> PyResult<PyValue> {
        self.binary(a, b, PolyOps::add)
    }

    /// ``a - b`` (as ``add``).
    fn sub(&self, a: &PyValue, b: &PyValue) -> PyResult<PyValue> {
        self.binary(a, b, PolyOps::sub)
    }

    /// ``a + c`` in every slot for a real constant ``c`` (exact, no level used).
    fn add_const(&self, a: &PyValue, c: f64) -> PyResult<PyValue> {
        let c = finite(c, "the constant")?;
        self.unary(a, |g, x| g.add_const(x, c))
    }

    /// ``a + c`` for a real constant ``c``: the paper's plaintext addition (the same as
    /// ``add_const``).
    fn add_plain(&self, a: &PyValue, c: f64) -> PyResult<PyValue> {
        self.add_const(a, c)
    }

    /// ``a * k`` for an integer ``k`` (exact, no level used, scale unchanged).
    fn multiply_int(&self, a: &PyValue, k: i64) -> PyResult<PyValue> {
        self.unary(a, |g, x| g.multiply_int(x, k))
    }

    /// ``a * c`` for a real constant ``c`` encoded at the scale of ``a``'s last prime, not
    /// rescaled (``rescale`` afterwards restores ``a``'s scale). LevelError at level 0.
    fn multiply_const(&self, a: &PyValue, c: f64) -> PyResult<PyValue> {
        let c = finite(c, "the constant")?;
        self.unary(a, |g, x| g.multiply_const(x, c))
    }

    /// ``a * values`` slot-wise for real ``values`` (1 to N/2 of them; a shorter vector is
    /// padded with zeros to a power of two and repeats with that period over the slots),
    /// encoded at the scale of ``a``'s last prime, not rescaled. LevelError at level 0;
    /// InputError for an empty or non-finite vector (a too long one when the graph runs).
    fn multiply_plain_slots(&self, a: &PyValue, values: &Bound<'_, PyAny>) -> PyResult<PyValue> {
        let values = convert::reals(values, "plaintext slot values")?;
        self.unary(a, |g, x| g.multiply_plain_slots(x, &values))
    }

    /// Slots rotated left by ``step`` (right when negative); ``a`` must be size 2 (running it
    /// needs the Galois key of the step, ``keygen(rotations=[...])``).
    fn rotate(&self, a: &PyValue, step: i64) -> PyResult<PyValue> {
        self.unary(a, |g, x| g.rotate(x, step))
    }

    /// ``a * b``: size 3, at the product of the scales (both operands must be size 2).
    fn multiply(&self, a: &PyValue, b: &PyValue) -> PyResult<PyValue> {
        self.binary(a, b, |g, x, y| g.multiply(x, y))
    }

    /// ``a * a``: size 3, scale squared.
    fn square(&self, a: &PyValue) -> PyResult<PyValue> {
        self.unary(a, |g, x| g.square(x))
    }

    /// Relinearization back to size 2 (running it needs the relinearization key).
    fn relinearize(&self, a: &PyValue) -> PyResult<PyValue> {
        self.unary(a, |g, x| g.relinearize(x))
    }

    /// Rescale by the last prime: one level down (LevelError at level 0).
    fn rescale(&self, a: &PyValue) -> PyResult<PyValue> {
        self.unary(a, |g, x| g.rescale(x))
    }

    /// Drops to ``level`` (at most ``a.level``, else LevelError; exact, scale unchanged).
    fn drop_to_level(&self, a: &PyValue, level: usize) -> PyResult<PyValue> {
        self.unary(a, |g, x| g.drop_to_level(x, level))
    }

    /// ``a * b`` relinearized and rescaled: the paper's multiplication task (a squaring when
    /// ``a`` and ``b`` are the same value).
    fn mul_relin_rescale(&self, a: &PyValue, b: &PyValue) -> PyResult<PyValue> {
        self.binary(a, b, |g, x, y| g.mul_relin_rescale(x, y))
    }

    /// ``a * a`` relinearized and rescaled: the paper's squaring task (the same as
    /// ``mul_relin_rescale(a, a)``).
    fn square_relin_rescale(&self, a: &PyValue) -> PyResult<PyValue> {
        self.unary(a, |g, x| g.mul_relin_rescale(x, x))
    }

    /// ``a * c`` for a real constant ``c``, rescaled, keeping ``a``'s scale: the paper's
    /// multiply-plain task (one level used).
    fn mul_plain_rescale(&self, a: &PyValue, c: f64) -> PyResult<PyValue> {
        let c = finite(c, "the constant")?;
        self.unary(a, |g, x| g.mul_plain_rescale(x, c))
    }

    /// Makes ``v`` the output of its own task: it is not fused into the task that reads it.
    fn end_task(&self, v: &PyValue) -> PyResult<()> {
        self.with(&[v], |b, vals| {
            b.end_task(&vals[0]);
            Ok(())
        })
    }

    /// Fuses the recorded operations into tasks and returns the TaskGraph whose results are
    /// ``outputs`` (at least one, else GraphError). The builder cannot be used afterwards.
    fn finish(&self, outputs: Vec<PyRef<'_, PyValue>>) -> PyResult<PyTaskGraph> {
        let refs: Vec<&PyValue> = outputs.iter().map(|v| &**v).collect();
        let outs = self.check(&refs)?;
        let b = self.lock().take().ok_or_else(|| self.finished_err())?;
        let g = b.finish(&outs).map_err(graph_to_py)?;
        Ok(PyTaskGraph::new(g, self.moduli.clone()))
    }

    fn __repr__(&self) -> String {
        format!(
            "GraphBuilder(name={:?}, levels={}, finished={})",
            self.name,
            self.moduli.len().saturating_sub(1),
            if self.finished() { "True" } else { "False" }
        )
    }
}

#[pymethods]
impl PyValue {
    /// Level of the ciphertext this value stands for.
    #[getter]
    fn level(&self) -> usize {
        self.v.level
    }

    /// Its scale.
    #[getter]
    fn scale(&self) -> f64 {
        self.v.scale
    }

    /// Its number of polynomials: 2, or 3 after a multiplication before relinearization.
    #[getter]
    fn size(&self) -> usize {
        self.v.size
    }

    fn __repr__(&self) -> String {
        format!(
            "Value(level={}, scale=2^{:.2}, size={})",
            self.v.level,
            self.v.scale.log2(),
            self.v.size
        )
    }
}

fn ciphertext_shape(ct: &CtW) -> (usize, f64) {
    match ct {
        Words::W32(c) => (c.level(), c.scale()),
        Words::W64(c) => (c.level(), c.scale()),
    }
}

/// A DAG of HE tasks (fused CKKS operations) computing a job's outputs from its inputs. Made
/// by ``GraphBuilder.finish``, ``heloom.exp_graph`` or ``heloom.polynomial_graph``.
///
/// ``len(graph)`` is the number of tasks; ``str(graph)`` lists them. ``run`` executes it with
/// an evaluator of a context with the same modulus chain (any word size whose chain it is);
/// ``work_ms`` prices it with a cost profile.
#[pyclass(name = "TaskGraph", module = "heloom", frozen)]
pub struct PyTaskGraph {
    g: Arc<TaskGraph>,
    moduli: Vec<u64>,
}

impl PyTaskGraph {
    fn new(g: TaskGraph, moduli: Vec<u64>) -> Self {
        Self {
            g: Arc::new(g),
            moduli,
        }
    }
}

/// The inputs of `ev`'s word size, cloned.
fn pick_inputs<W: Pick>(inputs: &[CtW]) -> Result<Vec<Ciphertext<W>>, CkksError> {
    inputs.iter().map(|c| W::ct(c).cloned()).collect()
}

fn run_gen<W: Pick>(
    g: &TaskGraph,
    ev: &Evaluator<W>,
    inputs: &[CtW],
) -> Result<Vec<CtW>, rg::GraphError>
where
    CtW: From<Ciphertext<W>>,
{
    let ins = pick_inputs::<W>(inputs)?;
    Ok(g.run(ev, &ins)?.into_iter().map(CtW::from).collect())
}

#[pymethods]
impl PyTaskGraph {
    /// The graph in heloom's binary format (checksummed; what a client sends a server).
    fn to_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, pyo3::types::PyBytes> {
        pyo3::types::PyBytes::new(py, &self.g.to_bytes())
    }

    /// Loads a graph written by ``to_bytes``; every node is replayed and checked, and bad
    /// bytes raise FormatError.
    #[staticmethod]
    fn from_bytes(data: &[u8]) -> PyResult<PyTaskGraph> {
        let g = TaskGraph::from_bytes(data).map_err(graph_to_py)?;
        let moduli = g.moduli().to_vec();
        Ok(PyTaskGraph::new(g, moduli))
    }

    /// The graph's name (the variant for the built-in e^x graphs).
    #[getter]
    fn name(&self) -> &str {
        self.g.name()
    }

    /// Number of input ciphertexts ``run`` takes.
    #[getter]
    fn num_inputs(&self) -> usize {
        self.g.num_inputs()
    }

    /// The tasks in topological order, each a dict: ``index``, ``kind`` (one of
    /// ``"mul-relin-rescale"``, ``"square-relin-rescale"``, ``"mul-plain-rescale"``,
    /// ``"add"``, ``"other"``), ``nq`` (RNS limbs of its main input), ``deps`` (indices of the
    /// tasks it reads) and ``ops`` (the fused operations, in order).
    #[getter]
    fn tasks<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let nodes = self.g.nodes();
        let list = PyList::empty(py);
        for (i, t) in self.g.tasks().iter().enumerate() {
            let d = PyDict::new(py);
            d.set_item("index", i)?;
            d.set_item("kind", t.kind.name())?;
            d.set_item("nq", t.nq)?;
            d.set_item("deps", t.deps.clone())?;
            let ops: Vec<&str> = t.nodes.iter().map(|&v| nodes[v].op.name()).collect();
            d.set_item("ops", ops)?;
            list.append(d)?;
        }
        Ok(list)
    }

    /// Runs the graph on ``inputs`` (as many ciphertexts as ``num_inputs``, at the levels and
    /// scales the graph was built for, else GraphError) with ``evaluator``, one task after
    /// another, each on ``threads`` threads (default: the evaluator's budget). Returns the
    /// outputs in the order given to ``finish``. The evaluator's context must have the
    /// graph's modulus chain (else ParameterError); multiplication tasks need its
    /// relinearization key. Runs without the GIL.
    #[pyo3(signature = (evaluator, inputs, threads = None))]
    fn run(
        &self,
        py: Python<'_>,
        evaluator: &PyEvaluator,
        inputs: Vec<PyRef<'_, PyCiphertext>>,
        threads: Option<i64>,
    ) -> PyResult<Vec<PyCiphertext>> {
        let ev_moduli = evaluator_moduli(evaluator);
        if ev_moduli != self.moduli {
            return Err(to_py(CkksError::ParameterMismatch(format!(
                "task graph '{}' was built for a chain of {} primes ({}); the evaluator's \
                 context ({}-bit words) has {} primes ({}): build the graph from the \
                 evaluator's context",
                self.g.name(),
                self.moduli.len(),
                describe_chain(&self.moduli),
                evaluator.ev.word_bits(),
                ev_moduli.len(),
                describe_chain(&ev_moduli),
            ))));
        }
        let budget = match threads {
            Some(t) => thread_budget(t)?,
            None => budget_of(&evaluator.ev),
        };
        let ev = with_threads(&evaluator.ev, budget);
        let ins: Vec<CtW> = inputs.iter().map(|c| c.ct.clone()).collect();
        let g = &self.g;
        let outs = py
            .detach(|| match &ev {
                Words::W32(e) => run_gen::<u32>(g, e, &ins),
                Words::W64(e) => run_gen::<u64>(g, e, &ins),
            })
            .map_err(graph_to_py)?;
        Ok(outs.into_iter().map(|c| evaluator.wrap(c)).collect())
    }

    /// Total single-thread work of the graph in milliseconds under the cost ``profile`` (a
    /// built-in name from ``heloom.profile_names()`` or a profile JSON file written by
    /// ``heloom profile``), task start overheads included. Ops are priced by their RNS limb
    /// count at the profile's ring degree. Unknown profiles raise InputError.
    #[pyo3(signature = (profile = "xeon-phi-7230f"))]
    fn work_ms(&self, py: Python<'_>, profile: &str) -> PyResult<f64> {
        let g = &self.g;
        py.detach(|| {
            let p = Profile::load(profile)?;
            Ok(g.work_ms(&p as &dyn CostModel))
        })
        .map_err(profile_to_py)
    }

    fn __len__(&self) -> usize {
        self.g.tasks().len()
    }

    fn __str__(&self) -> String {
        self.g.to_string()
    }

    fn __repr__(&self) -> String {
        format!(
            "TaskGraph(name={:?}, tasks={}, inputs={})",
            self.g.name(),
            self.g.tasks().len(),
            self.g.num_inputs()
        )
    }
}

fn evaluator_moduli(ev: &PyEvaluator) -> Vec<u64> {
    each!(&ev.ev => |e| e.context().params().moduli().to_vec())
}

fn describe_chain(m: &[u64]) -> String {
    match m.first() {
        Some(q0) => format!("q_0 = {q0}, {} bits", 64 - q0.leading_zeros()),
        None => "empty".into(),
    }
}

fn exp_variant(name: &str) -> PyResult<ExpVariant> {
    ExpVariant::ALL
        .iter()
        .copied()
        .find(|v| v.name().eq_ignore_ascii_case(name))
        .ok_or_else(|| {
            let names: Vec<&str> = ExpVariant::ALL.iter().map(|v| v.name()).collect();
            input_error(format!(
                "unknown e^x variant {name:?}; choose one of {}",
                names.join(", ")
            ))
        })
}

/// The built-in degree-6 e^x Maclaurin job (``sum x^k / k!`` for k <= 6) as a task graph on
/// one input at ``level`` (default: the top) with ``scale`` (default: the parameters'
/// scale). ``variant``: ``"paper-fig3"`` (seed 000's Fig. 3: every power, each scaled by 1/k!
/// in its own task, then a tree of additions; 4 levels), ``"bsgs"`` (the evaluator's
/// baby-step giant-step; 3 levels) or ``"horner"`` (the fewest products; 4 levels). The
/// result has the input's scale. Too few levels raise LevelError, unknown variants
/// InputError.
#[pyfunction]
#[pyo3(signature = (context, variant = "paper-fig3", level = None, scale = None))]
pub fn exp_graph(
    context: &PyContext,
    variant: &str,
    level: Option<usize>,
    scale: Option<f64>,
) -> PyResult<PyTaskGraph> {
    let v = exp_variant(variant)?;
    let p = context.shared.params();
    let moduli = p.moduli().to_vec();
    let level = level.unwrap_or(p.max_level());
    let scale = scale.unwrap_or(p.scale());
    check_input(&moduli, level, scale)?;
    let g = rg::exp_graph(v, &moduli, level, scale).map_err(graph_to_py)?;
    Ok(PyTaskGraph::new(g, moduli))
}

/// Level and scale of a graph input, checked (as `GraphBuilder::input` does) before a
/// built-in graph indexes the chain with them.
fn check_input(moduli: &[u64], level: usize, scale: f64) -> PyResult<()> {
    if level >= moduli.len() {
        return Err(input_error(format!(
            "input level {level} is beyond the chain's top level {}",
            moduli.len().saturating_sub(1)
        )));
    }
    if !(scale.is_finite() && scale > 0.0) {
        return Err(input_error(format!("input scale {scale} must be positive")));
    }
    Ok(())
}

/// ``Evaluator.evaluate_polynomial`` as a task graph on one input at ``level`` (default: the
/// top) with ``scale`` (default: the parameters' scale): running it gives exactly (bit for
/// bit) what ``evaluate_polynomial(x, coeffs, basis, interval)`` gives. ``coeffs`` are real,
/// lowest degree first; ``basis`` ``"power"`` or ``"chebyshev"`` (``interval`` default
/// ``(-1, 1)``, Chebyshev only).
#[pyfunction]
#[pyo3(signature = (context, coeffs, basis = "power", interval = None, level = None, scale = None))]
pub fn polynomial_graph(
    context: &PyContext,
    coeffs: &Bound<'_, PyAny>,
    basis: &str,
    interval: Option<(f64, f64)>,
    level: Option<usize>,
    scale: Option<f64>,
) -> PyResult<PyTaskGraph> {
    let coeffs = convert::reals(coeffs, "polynomial coefficients")?;
    let basis = poly_basis(basis, interval)?;
    let p = context.shared.params();
    let moduli = p.moduli().to_vec();
    let level = level.unwrap_or(p.max_level());
    let scale = scale.unwrap_or(p.scale());
    check_input(&moduli, level, scale)?;
    let g = rg::polynomial_graph("polynomial", &moduli, level, scale, &coeffs, basis)
        .map_err(graph_to_py)?;
    Ok(PyTaskGraph::new(g, moduli))
}

/// Number of cores heloom's thread pool uses (``HELOOM_THREADS`` when set): the most threads
/// a budget can use at once.
#[pyfunction]
pub fn cores() -> usize {
    heloom_pool::cores()
}

/// Names of the built-in cost profiles (for ``simulate`` and ``TaskGraph.work_ms``).
#[pyfunction]
pub fn profile_names() -> Vec<&'static str> {
    Profile::builtin_names().to_vec()
}

/// What a simulation failed on (turned into a Python exception with the GIL held).
enum SimError {
    Profile(heloom_runtime::profile::ProfileError),
    Graph(rg::GraphError),
    Ckks(CkksError),
}

fn sim_to_py(e: SimError) -> PyErr {
    match e {
        SimError::Profile(e) => profile_to_py(e),
        SimError::Graph(e) => graph_to_py(e),
        SimError::Ckks(e) => to_py(e),
    }
}

/// The three e^x graphs of the runtime's workload (N = 2^14, 7 levels, 40-bit scale), as
/// `heloom schedule` builds them.
fn workload_graphs() -> Result<Vec<Arc<TaskGraph>>, SimError> {
    let params = default_params(14).map_err(SimError::Ckks)?;
    let moduli = params.moduli().to_vec();
    let level = moduli.len() - 1;
    ExpVariant::ALL
        .iter()
        .map(|&v| {
            rg::exp_graph(v, &moduli, level, params.scale())
                .map(Arc::new)
                .map_err(SimError::Graph)
        })
        .collect()
}

fn summary_dict<'py>(py: Python<'py>, s: &RunSummary) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("policy", &s.policy)?;
    d.set_item("gap_ms", s.gap_ms)?;
    d.set_item("executor", &s.executor)?;
    d.set_item("capacity", s.capacity)?;
    d.set_item("jobs", s.jobs)?;
    d.set_item("window", s.window)?;
    d.set_item("measured", s.measured)?;
    d.set_item("makespan_ms", s.makespan_ms)?;
    d.set_item("p50_ms", s.p50_ms)?;
    d.set_item("p95_ms", s.p95_ms)?;
    d.set_item("p99_ms", s.p99_ms)?;
    d.set_item("max_ms", s.max_ms)?;
    d.set_item("mean_ms", s.mean_ms)?;
    d.set_item("throughput_jobs_per_s", s.throughput_jobs_per_s)?;
    d.set_item("utilisation", s.utilisation)?;
    d.set_item("tasks", s.tasks)?;
    d.set_item("mean_task_ms", s.mean_task_ms)?;
    d.set_item("sched_overhead_ms", s.sched_overhead_ms)?;
    d.set_item("sched_overhead_pct", s.sched_overhead_pct)?;
    d.set_item("dispatch_latency_ms", s.dispatch_latency_ms)?;
    d.set_item("correct", s.correct)?;
    Ok(d)
}

/// Simulates a stream of ``jobs`` e^x jobs (the runtime's workload: N = 2^14, 8 RNS limbs,
/// the three graph variants) arriving as a Poisson process with mean gap ``gap_ms``
/// (reproducible from ``seed``), list-scheduled under the thread ``policy`` (one of
/// ``heloom.POLICIES``) on the machine described by the cost ``profile`` (a built-in name or
/// a profile JSON file), with the discrete-event simulator of ``heloom schedule --simulate``.
///
/// Returns the run's summary as a dict: ``policy``, ``gap_ms``, ``executor``, ``capacity``,
/// ``jobs``, ``window`` (the measured job ids, first and last: the paper's jobs 301..1900 of
/// 2,300, scaled), ``measured``, ``makespan_ms``, ``p50_ms``, ``p95_ms``, ``p99_ms``,
/// ``max_ms``, ``mean_ms`` (latencies of the measured jobs), ``throughput_jobs_per_s``,
/// ``utilisation``, ``tasks``, ``mean_task_ms``, ``sched_overhead_ms``,
/// ``sched_overhead_pct``, ``dispatch_latency_ms`` and ``correct`` (None: nothing is
/// decrypted in a simulation). Unknown policies or profiles and non-positive ``gap_ms`` or
/// ``jobs`` raise InputError. Runs without the GIL.
#[pyfunction]
#[pyo3(signature = (policy = "heloom", gap_ms = 60.0, jobs = 2300, profile = "xeon-phi-7230f", seed = 1))]
pub fn simulate<'py>(
    py: Python<'py>,
    policy: &str,
    gap_ms: f64,
    jobs: i64,
    profile: &str,
    seed: u64,
) -> PyResult<Bound<'py, PyDict>> {
    if !POLICY_NAMES.contains(&policy) {
        return Err(input_error(format!(
            "unknown policy {policy:?}; choose one of {}",
            POLICY_NAMES.join(", ")
        )));
    }
    if !(gap_ms.is_finite() && gap_ms > 0.0) {
        return Err(input_error(format!(
            "gap_ms must be a finite positive number, got {gap_ms}"
        )));
    }
    let jobs = match usize::try_from(jobs) {
        Ok(n) if n >= 1 => n,
        _ => return Err(input_error(format!("jobs must be at least 1, got {jobs}"))),
    };
    let summary = py
        .detach(|| -> Result<RunSummary, SimError> {
            let prof = Profile::load(profile).map_err(SimError::Profile)?;
            let label = format!("simulated:{}", prof.name);
            let capacity = prof.capacity;
            let model: Arc<dyn CostModel> = Arc::new(prof);
            let graphs = workload_graphs()?;
            let p = policy_by_name(policy, Arc::clone(&model)).ok_or_else(|| {
                SimError::Graph(rg::GraphError::Invalid(format!("unknown policy {policy}")))
            })?;
            let mut sched = Scheduler::new(p, model.as_ref(), graphs, capacity);
            let arrivals = poisson_arrivals(jobs, gap_ms, seed);
            let window = default_window(jobs);
            let record = heloom_runtime::sim::simulate(
                &mut sched,
                model.as_ref(),
                &arrivals,
                gap_ms,
                window,
                &label,
                &mut |_, _| {},
            );
            Ok(summarize(&record))
        })
        .map_err(sim_to_py)?;
    summary_dict(py, &summary)
}

/// Registers the classes, functions and constants.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add_class::<PyGraphBuilder>()?;
    m.add_class::<PyValue>()?;
    m.add_class::<PyTaskGraph>()?;
    m.add_function(wrap_pyfunction!(exp_graph, m)?)?;
    m.add_function(wrap_pyfunction!(polynomial_graph, m)?)?;
    m.add_function(wrap_pyfunction!(simulate, m)?)?;
    m.add_function(wrap_pyfunction!(cores, m)?)?;
    m.add_function(wrap_pyfunction!(profile_names, m)?)?;
    m.add("POLICIES", PyTuple::new(py, POLICY_NAMES)?)?;
    Ok(())
}
