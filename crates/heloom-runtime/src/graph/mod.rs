//! HE task graphs.
//!
//! A graph is recorded as a DAG of single CKKS operations ([`NodeOp`]) on symbolic values that
//! carry their level, scale and size, so that every constant (and every cost) is known before
//! a ciphertext exists. The recording is done by [`GraphBuilder`], which implements
//! [`PolyOps`]: any polynomial the CKKS evaluator can evaluate becomes a graph by running the
//! evaluator's own algorithm on the builder ([`polynomial_graph`]).
//!
//! Operations are then fused into tasks, the unit the scheduler dispatches, the way seed 000
//! (Section 7.1) groups them: a chain `multiply -> relinearize -> rescale` is one task, as is
//! `multiply-plain -> rescale`; additions are their own tasks; cheap relabelling and level drops
//! ride along with the op that consumes them. The task kinds are the paper's four
//! ([`TaskKind`]).
//!
//! The e^x Maclaurin job of degree 6 (the paper's Fig. 3) is built in, in three variants that
//! compute the same function ([`ExpVariant`]): the paper's shape (every power, each scaled by
//! 1/k!, then summed), the evaluator's baby-step giant-step (depth 3) and a Horner split with
//! the fewest ciphertext multiplications. The `heloom` policy picks one per job from the load
//! (the paper's Fig. 2 idea: a different graph for the same function when resources differ).

use crate::cost::{CostModel, SplitCost};
use crate::ops::OpKind;
use heloom_ckks::{evaluate_polynomial_on, CkksError, PolyBasis, PolyOps};
use std::cell::RefCell;
use std::fmt;
use std::sync::Arc;

mod builders;
pub use builders::{exp_coefficients, exp_graph, polynomial_graph, ExpVariant};

/// Index of a node in its graph.
pub type NodeId = usize;

/// One CKKS operation in a graph.
#[derive(Clone, Debug, PartialEq)]
pub enum NodeOp {
    /// Input ciphertext number `i` of the job.
    Input(usize),
    /// `a + b` (levels aligned by dropping).
    Add(NodeId, NodeId),
    /// `a - b`.
    Sub(NodeId, NodeId),
    /// `a + c` in every slot.
    AddConst(NodeId, f64),
    /// `a * k`, small integer.
    MulInt(NodeId, i64),
    /// `a * k`, any integer; the scale is set by a following [`NodeOp::SetScale`].
    MulConstExact(NodeId, i128),
    /// `a * c` encoded at scale `q_l`.
    MulConst(NodeId, f64),
    /// `a * b` (three polynomials).
    Multiply(NodeId, NodeId),
    /// `a^2`.
    Square(NodeId),
    /// Relinearization.
    Relinearize(NodeId),
    /// Rescale by the last prime.
    Rescale(NodeId),
    /// Drop to a level.
    DropToLevel(NodeId, usize),
    /// Relabel the scale.
    SetScale(NodeId, f64),
    /// Slots rotated left by the step (right when negative): one key switch.
    Rotate(NodeId, i64),
    /// `a * p` slot-wise for the graph's plaintext vector `p` ([`TaskGraph::plain`]), encoded
    /// at scale `q_l`.
    MulPlain(NodeId, usize),
    /// `a` bootstrapped: the same values at the node's level, with `a`'s scale (run by a
    /// backend that bootstraps, such as `heloom_ckks::circuits::bootstrap::AutoBootstrap`).
    Bootstrap(NodeId),
}

impl NodeOp {
    /// Operand nodes.
    pub fn operands(&self) -> Vec<NodeId> {
        match *self {
            NodeOp::Input(_) => vec![],
            NodeOp::Add(a, b) | NodeOp::Sub(a, b) | NodeOp::Multiply(a, b) => vec![a, b],
            NodeOp::AddConst(a, _)
            | NodeOp::MulInt(a, _)
            | NodeOp::MulConstExact(a, _)
            | NodeOp::MulConst(a, _)
            | NodeOp::Square(a)
            | NodeOp::Relinearize(a)
            | NodeOp::Rescale(a)
            | NodeOp::DropToLevel(a, _)
            | NodeOp::SetScale(a, _)
            | NodeOp::Rotate(a, _)
            | NodeOp::MulPlain(a, _)
            | NodeOp::Bootstrap(a) => vec![a],
        }
    }

    /// Short name.
    pub fn name(&self) -> &'static str {
        match self {
            NodeOp::Input(_) => "input",
            NodeOp::Add(..) => "add",
            NodeOp::Sub(..) => "sub",
            NodeOp::AddConst(..) => "add-const",
            NodeOp::MulInt(..) => "mul-int",
            NodeOp::MulConstExact(..) => "mul-const",
            NodeOp::MulConst(..) => "mul-const",
            NodeOp::Multiply(..) => "mul",
            NodeOp::Square(..) => "square",
            NodeOp::Relinearize(..) => "relin",
            NodeOp::Rescale(..) => "rescale",
            NodeOp::DropToLevel(..) => "drop",
            NodeOp::SetScale(..) => "set-scale",
            NodeOp::Rotate(..) => "rotate",
            NodeOp::MulPlain(..) => "mul-plain",
            NodeOp::Bootstrap(..) => "bootstrap",
        }
    }

    fn is_unary(&self) -> bool {
        self.operands().len() == 1
    }

    /// Ops that cost one pass over the limbs at most and use no level.
    fn is_light(&self) -> bool {
        matches!(
            self,
            NodeOp::AddConst(..)
                | NodeOp::MulInt(..)
                | NodeOp::MulConstExact(..)
                | NodeOp::DropToLevel(..)
                | NodeOp::SetScale(..)
        )
    }
}

/// A node: an op and the level, scale and size of its result.
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    /// The operation.
    pub op: NodeOp,
    /// Level of the result.
    pub level: usize,
    /// Scale of the result.
    pub scale: f64,
    /// Polynomials in the result (2, or 3 after a multiplication).
    pub size: usize,
}

/// The paper's task kinds (Section 7.1), plus whatever else a traced graph holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TaskKind {
    /// Multiplication, relinearization and rescale.
    MulRelinRescale,
    /// Squaring, relinearization and rescale.
    SquareRelinRescale,
    /// Multiplication by a plaintext or constant, and rescale.
    MulPlainRescale,
    /// Additions (ciphertext or plaintext) and other cheap ops.
    Add,
    /// A bootstrap (with whatever light ops ride along).
    Bootstrap,
    /// Anything else (e.g. a lone relinearization).
    Other,
}

impl TaskKind {
    /// Kebab-case name.
    pub fn name(self) -> &'static str {
        match self {
            TaskKind::MulRelinRescale => "mul-relin-rescale",
            TaskKind::SquareRelinRescale => "square-relin-rescale",
            TaskKind::MulPlainRescale => "mul-plain-rescale",
            TaskKind::Add => "add",
            TaskKind::Bootstrap => "bootstrap",
            TaskKind::Other => "other",
        }
    }

    /// Whether the paper counts it as a multiplication task (given `n_t` threads; additions
    /// always get one).
    pub fn is_multiplication(self) -> bool {
        !matches!(self, TaskKind::Add)
    }

    /// Threads the paper's dynamic policy assumes another ready task of this kind will take
    /// (`n_r`): 2 for ciphertext-ciphertext multiplications, 1 otherwise.
    pub fn nominal_threads(self) -> usize {
        match self {
            TaskKind::MulRelinRescale
            | TaskKind::SquareRelinRescale
            | TaskKind::Bootstrap
            | TaskKind::Other => 2,
            TaskKind::MulPlainRescale | TaskKind::Add => 1,
        }
    }
}

impl fmt::Display for TaskKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A task: fused nodes, run in order on one thread budget.
#[derive(Clone, Debug, PartialEq)]
pub struct Task {
    /// Nodes in execution order.
    pub nodes: Vec<NodeId>,
    /// The node whose value the task produces.
    pub output: NodeId,
    /// Tasks whose outputs it reads.
    pub deps: Vec<usize>,
    /// Tasks that read its output.
    pub succs: Vec<usize>,
    /// Kind.
    pub kind: TaskKind,
    /// RNS limbs of its main input (level + 1): the `n_q` the paper's policies use.
    pub nq: usize,
}

/// Errors from building or running a graph.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GraphError {
    /// The CKKS layer refused an operation (levels, scales, keys, ...).
    #[error(transparent)]
    Ckks(#[from] CkksError),
    /// The graph is malformed or its inputs do not fit it.
    #[error("task graph: {0}")]
    Invalid(String),
    /// The job was cancelled before it finished (its remaining tasks never ran).
    #[error("job cancelled before it finished")]
    Cancelled,
    /// The executor has shut down: it accepts no job, and jobs it held unfinished end with
    /// this error.
    #[error("the executor has shut down; the job did not run to the end")]
    ShutDown,
    /// A bug inside heloom (e.g. a task panicked); the job failed, the executor goes on.
    #[error("internal error: {0}")]
    Internal(String),
}

impl GraphError {
    /// Whether the job was stopped rather than failed: [`GraphError::Cancelled`] or
    /// [`GraphError::ShutDown`].
    pub fn is_cancellation(&self) -> bool {
        matches!(self, GraphError::Cancelled | GraphError::ShutDown)
    }
}

/// Result alias.
pub type Result<T> = std::result::Result<T, GraphError>;

/// A DAG of HE tasks.
#[derive(Clone, Debug)]
pub struct TaskGraph {
    name: String,
    moduli: Vec<u64>,
    nodes: Vec<Node>,
    tasks: Vec<Task>,
    inputs: Vec<NodeId>,
    outputs: Vec<NodeId>,
    owner: Vec<Option<usize>>,
    plains: Vec<Arc<[f64]>>,
}

/// A symbolic ciphertext while recording: its node and what it will look like.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Value {
    /// Node producing it.
    pub node: NodeId,
    /// Level.
    pub level: usize,
    /// Scale.
    pub scale: f64,
    /// Polynomials.
    pub size: usize,
}

/// Records operations on symbolic values into a [`TaskGraph`].
#[derive(Debug)]
pub struct GraphBuilder {
    name: String,
    moduli: Vec<u64>,
    tolerance: f64,
    nodes: RefCell<Vec<Node>>,
    inputs: RefCell<Vec<NodeId>>,
    boundaries: RefCell<Vec<NodeId>>,
    plains: RefCell<Vec<Arc<[f64]>>>,
    /// Where a recorded bootstrap lands, when the graph may bootstrap.
    bootstrap_level: Option<usize>,
}

fn invalid<T>(msg: impl Into<String>) -> heloom_ckks::Result<T> {
    Err(CkksError::InvalidInput(msg.into()))
}

/// The error of an op that needs `needed` levels on a ciphertext at `level`.
fn out_of_levels(level: usize, needed: usize, hint: impl Into<String>) -> CkksError {
    CkksError::OutOfLevels {
        level,
        needed,
        hint: hint.into(),
    }
}

/// OutOfLevels with `hint` when `level` is 0 (the op needs one level to go down).
fn above_level_0(level: usize, hint: &str) -> heloom_ckks::Result<()> {
    if level == 0 {
        return Err(out_of_levels(0, 1, hint));
    }
    Ok(())
}

impl GraphBuilder {
    /// A builder for ciphertexts over the chain `moduli` (`q_0 .. q_L`, as in
    /// `CkksParameters::moduli`).
    pub fn new(name: impl Into<String>, moduli: &[u64]) -> Self {
        let qmin = moduli.iter().copied().min().unwrap_or(2).max(2) as f64;
        Self {
            name: name.into(),
            moduli: moduli.to_vec(),
            tolerance: 1.0 / qmin,
            nodes: RefCell::new(Vec::new()),
            inputs: RefCell::new(Vec::new()),
            boundaries: RefCell::new(Vec::new()),
            plains: RefCell::new(Vec::new()),
            bootstrap_level: None,
        }
    }

    /// Lets the graph bootstrap, to `level` (the bootstrapper's output level): polynomial
    /// evaluation then bootstraps its input when its levels run out, and so does every
    /// multiplication (ciphertext, constant or plaintext) of an operand at level 0. Each
    /// bootstrap is a [`NodeOp::Bootstrap`] node in a task of its own; run such a graph on a
    /// backend that bootstraps (`heloom_ckks::circuits::bootstrap::AutoBootstrap`).
    pub fn with_bootstrapping(mut self, level: usize) -> heloom_ckks::Result<Self> {
        self.check_bootstrap_level(level)?;
        self.bootstrap_level = Some(level);
        Ok(self)
    }

    /// A bootstrap lands above level 0 and within the chain.
    fn check_bootstrap_level(&self, level: usize) -> heloom_ckks::Result<()> {
        if level == 0 || level >= self.moduli.len() {
            return invalid(format!(
                "a bootstrap must land on a level from 1 to the chain's top level {}; got {level}",
                self.moduli.len().saturating_sub(1)
            ));
        }
        Ok(())
    }

    /// Records `ct` bootstrapped to `level` (its own task), whether or not the builder
    /// bootstraps on its own ([`Self::with_bootstrapping`]); the graph reader replays these.
    pub fn bootstrap_to(&self, ct: &Value, level: usize) -> heloom_ckks::Result<Value> {
        if ct.size != 2 {
            return invalid("bootstrap takes a two-polynomial ciphertext; relinearize first");
        }
        self.check_bootstrap_level(level)?;
        let v = self.push(NodeOp::Bootstrap(ct.node), level, ct.scale, 2);
        self.end_task(&v);
        Ok(v)
    }

    /// `v`, bootstrapped first when it sits at level 0 and the builder bootstraps.
    fn refreshed(&self, v: &Value) -> heloom_ckks::Result<Value> {
        match self.bootstrap_level {
            Some(level) if v.level == 0 => {
                let v = if v.size == 3 {
                    self.relinearize(v)?
                } else {
                    *v
                };
                self.bootstrap_to(&v, level)
            }
            _ => Ok(*v),
        }
    }

    /// Plaintext vectors recorded so far (ids `0..count`).
    pub fn num_plains(&self) -> usize {
        self.plains.borrow().len()
    }

    /// The id of the plaintext vector `values`: an equal one recorded before (bit for bit)
    /// is shared, so ids are numbered in order of first use.
    fn plain_id(&self, values: &[f64]) -> usize {
        let mut plains = self.plains.borrow_mut();
        let same = |p: &Arc<[f64]>| {
            p.len() == values.len()
                && p.iter()
                    .zip(values)
                    .all(|(a, b)| a.to_bits() == b.to_bits())
        };
        if let Some(i) = plains.iter().position(same) {
            return i;
        }
        plains.push(Arc::from(values));
        plains.len() - 1
    }

    /// Inputs recorded so far.
    pub fn num_inputs(&self) -> usize {
        self.inputs.borrow().len()
    }

    /// Makes `v` the output of its own task: it will not be fused into its consumer.
    pub fn end_task(&self, v: &Value) {
        self.boundaries.borrow_mut().push(v.node);
    }

    fn push(&self, op: NodeOp, level: usize, scale: f64, size: usize) -> Value {
        let mut nodes = self.nodes.borrow_mut();
        nodes.push(Node {
            op,
            level,
            scale,
            size,
        });
        Value {
            node: nodes.len() - 1,
            level,
            scale,
            size,
        }
    }

    /// `op`, a product of `ct` by a plaintext factor encoded at scale `q_level` (level >= 1).
    fn push_at_q_level(&self, op: NodeOp, ct: &Value) -> Value {
        let s = self.moduli[ct.level] as f64;
        self.push(op, ct.level, ct.scale * s, ct.size)
    }

    /// The next job input: a two-polynomial ciphertext at `level` with `scale`.
    pub fn input(&self, level: usize, scale: f64) -> heloom_ckks::Result<Value> {
        if level >= self.moduli.len() {
            return invalid(format!(
                "input level {level} is beyond the chain's top level {}",
                self.moduli.len().saturating_sub(1)
            ));
        }
        if !(scale.is_finite() && scale > 0.0) {
            return invalid(format!("input scale {scale} must be positive"));
        }
        let i = self.inputs.borrow().len();
        let v = self.push(NodeOp::Input(i), level, scale, 2);
        self.inputs.borrow_mut().push(v.node);
        Ok(v)
    }

    fn scales_match(&self, a: f64, b: f64) -> bool {
        ((a - b) / a.max(b)).abs() <= self.tolerance
    }

    fn combine(&self, a: &Value, b: &Value, sub: bool) -> heloom_ckks::Result<Value> {
        let (a, b) = if self.scales_match(a.scale, b.scale) {
            (*a, *b)
        } else {
            // As Evaluator::align: the higher operand is moved to the lower one's level and
            // scale by an integer multiple and a rescale, recorded explicitly so that its
            // cost shows.
            let (hi, lo, swapped) = if a.level >= b.level {
                (*a, *b, false)
            } else {
                (*b, *a, true)
            };
            if hi.level == lo.level {
                return Err(CkksError::ScaleMismatch(format!(
                    "operands at level {} have scales 2^{:.4} and 2^{:.4}",
                    hi.level,
                    a.scale.log2(),
                    b.scale.log2()
                )));
            }
            let c = self.drop_to_level(&hi, lo.level + 1)?;
            let q = self.moduli[lo.level + 1] as f64;
            let k = (lo.scale * q / c.scale).round();
            if k.is_nan() || k < 1.0 || k * self.tolerance < 0.5 || k >= 2f64.powi(62) {
                return Err(CkksError::ScaleMismatch(format!(
                    "cannot move scale 2^{:.3} to 2^{:.3} with one rescale",
                    c.scale.log2(),
                    lo.scale.log2()
                )));
            }
            let m = self.multiply_const_exact(&c, k as i128)?;
            let m = self.with_scale(m, c.scale * k)?;
            let r = self.rescale(&m)?;
            let r = self.with_scale(r, lo.scale)?;
            if swapped {
                (lo, r)
            } else {
                (r, lo)
            }
        };
        let op = if sub {
            NodeOp::Sub(a.node, b.node)
        } else {
            NodeOp::Add(a.node, b.node)
        };
        Ok(self.push(op, a.level.min(b.level), a.scale, a.size.max(b.size)))
    }

    /// `a * b`, relinearized and rescaled (the paper's first task kind).
    pub fn mul_relin_rescale(&self, a: &Value, b: &Value) -> heloom_ckks::Result<Value> {
        let m = if a.node == b.node {
            self.square(a)?
        } else {
            self.multiply(a, b)?
        };
        let r = self.relinearize(&m)?;
        self.rescale(&r)
    }

    /// `a * c` for a real constant, rescaled; the result keeps `a`'s scale.
    pub fn mul_plain_rescale(&self, a: &Value, c: f64) -> heloom_ckks::Result<Value> {
        let m = self.multiply_const(a, c)?;
        let r = self.rescale(&m)?;
        self.with_scale(r, a.scale)
    }

    /// `sum_k coeffs[k] * powers[k]` landing exactly at (`level`, `scale`): each power dropped
    /// to `level + 1`, multiplied by the integer `round(c_k * scale * q / s_k)`, summed and
    /// rescaled once (the leaf of baby-step giant-step). `coeffs[0]` is added as a constant;
    /// `powers[0]` is ignored.
    pub fn linear_combination(
        &self,
        powers: &[Option<Value>],
        coeffs: &[f64],
        level: usize,
        scale: f64,
    ) -> heloom_ckks::Result<Value> {
        let q = *self
            .moduli
            .get(level + 1)
            .ok_or_else(|| out_of_levels(level, level + 1, format!("no level above {level}")))?
            as f64;
        let big = scale * q;
        let mut acc: Option<Value> = None;
        for (k, &c) in coeffs.iter().enumerate().skip(1) {
            if c == 0.0 {
                continue;
            }
            let Some(Some(p)) = powers.get(k) else {
                return invalid(format!("power {k} missing for a linear combination"));
            };
            let pk = self.drop_to_level(p, level + 1)?;
            let ki = (c * big / pk.scale).round();
            if !ki.is_finite() || ki.abs() >= 2f64.powi(120) {
                return invalid(format!(
                    "coefficient {c} too large for scale 2^{}",
                    big.log2()
                ));
            }
            let t = self.multiply_const_exact(&pk, ki as i128)?;
            let t = self.with_scale(t, big)?;
            acc = Some(match acc {
                None => t,
                Some(a) => self.add(&a, &t)?,
            });
        }
        let Some(acc) = acc else {
            return invalid("a linear combination needs a non-zero coefficient of degree >= 1");
        };
        let acc = self.add_const(&acc, coeffs.first().copied().unwrap_or(0.0))?;
        let out = self.rescale(&acc)?;
        self.with_scale(out, scale)
    }

    /// Fuses the recorded nodes into tasks. `outputs` are the job's results.
    pub fn finish(self, outputs: &[Value]) -> Result<TaskGraph> {
        let nodes = self.nodes.into_inner();
        let inputs = self.inputs.into_inner();
        let boundaries = self.boundaries.into_inner();
        let plains = self.plains.into_inner();
        if outputs.is_empty() {
            return Err(GraphError::Invalid(
                "a graph needs at least one output".into(),
            ));
        }
        let n = nodes.len();
        let mut consumers: Vec<Vec<NodeId>> = vec![Vec::new(); n];
        for (i, node) in nodes.iter().enumerate() {
            for o in node.op.operands() {
                if o >= i {
                    return Err(GraphError::Invalid(format!(
                        "node {i} reads node {o}, recorded after it"
                    )));
                }
                if !consumers[o].contains(&i) {
                    consumers[o].push(i);
                }
            }
        }
        let is_output = |v: NodeId| outputs.iter().any(|o| o.node == v) || boundaries.contains(&v);
        // light_chain(v): v and its single-use unary ancestors are all light ops.
        let mut light_chain = vec![false; n];
        for (i, node) in nodes.iter().enumerate() {
            light_chain[i] = node.op.is_light()
                && node.op.operands().iter().all(|&o| {
                    matches!(nodes[o].op, NodeOp::Input(_))
                        || consumers[o].len() > 1
                        || light_chain[o]
                });
        }
        // Reverse topological sweep: a node joins its only consumer's task when that
        // consumer is unary (a chain) or when it is a light chain or a level drop.
        let mut owner: Vec<Option<usize>> = vec![None; n];
        let mut roots: Vec<NodeId> = Vec::new();
        for v in (0..n).rev() {
            if matches!(nodes[v].op, NodeOp::Input(_)) {
                continue;
            }
            if consumers[v].is_empty() && !is_output(v) {
                continue; // dead code
            }
            let fuse = match consumers[v].as_slice() {
                [u] if !is_output(v) => {
                    owner[*u].is_some()
                        && (nodes[*u].op.is_unary()
                            || light_chain[v]
                            || matches!(nodes[v].op, NodeOp::DropToLevel(..)))
                }
                _ => false,
            };
            if fuse {
                owner[v] = owner[consumers[v][0]];
            } else {
                owner[v] = Some(roots.len());
                roots.push(v);
            }
        }
        // Number tasks in topological order of their roots.
        let count = roots.len();
        let mut order: Vec<usize> = (0..count).collect();
        order.sort_by_key(|&t| roots[t]);
        let mut renum = vec![0usize; count];
        for (new, &old) in order.iter().enumerate() {
            renum[old] = new;
        }
        for o in owner.iter_mut().flatten() {
            *o = renum[*o];
        }
        let mut tasks: Vec<Task> = order
            .iter()
            .map(|&old| Task {
                nodes: Vec::new(),
                output: roots[old],
                deps: Vec::new(),
                succs: Vec::new(),
                kind: TaskKind::Other,
                nq: 1,
            })
            .collect();
        for (v, o) in owner.iter().enumerate() {
            if let Some(t) = o {
                tasks[*t].nodes.push(v);
            }
        }
        for t in 0..count {
            let mut deps = Vec::new();
            for &v in &tasks[t].nodes {
                for o in nodes[v].op.operands() {
                    if let Some(d) = owner[o] {
                        if d != t && !deps.contains(&d) {
                            if tasks[d].output != o {
                                return Err(GraphError::Invalid(format!(
                                    "task {t} reads an inner node of task {d}"
                                )));
                            }
                            deps.push(d);
                        }
                    }
                }
            }
            deps.sort_unstable();
            for &d in &deps {
                tasks[d].succs.push(t);
            }
            tasks[t].deps = deps;
            let (kind, nq) = classify(&nodes, &tasks[t].nodes);
            tasks[t].kind = kind;
            tasks[t].nq = nq;
        }
        Ok(TaskGraph {
            name: self.name,
            moduli: self.moduli,
            nodes,
            tasks,
            inputs,
            outputs: outputs.iter().map(|o| o.node).collect(),
            owner,
            plains,
        })
    }
}

/// Kind and main-input limb count of a task.
fn classify(nodes: &[Node], members: &[NodeId]) -> (TaskKind, usize) {
    let has = |f: &dyn Fn(&NodeOp) -> bool| members.iter().any(|&v| f(&nodes[v].op));
    let nq_of = |v: NodeId| {
        nodes[v]
            .op
            .operands()
            .iter()
            .map(|&o| nodes[o].level + 1)
            .max()
            .unwrap_or(nodes[v].level + 1)
    };
    let first_heavy = members.iter().copied().find(|&v| {
        matches!(
            nodes[v].op,
            NodeOp::Multiply(..)
                | NodeOp::Square(..)
                | NodeOp::MulConst(..)
                | NodeOp::MulConstExact(..)
                | NodeOp::MulPlain(..)
                | NodeOp::Relinearize(..)
                | NodeOp::Rotate(..)
                | NodeOp::Rescale(..)
        )
    });
    let nq = first_heavy
        .or_else(|| members.first().copied())
        .map_or(1, nq_of);
    // A rotation is a key switch, as a relinearization is.
    let relin = has(&|o| matches!(o, NodeOp::Relinearize(..) | NodeOp::Rotate(..)));
    let kind = if has(&|o| matches!(o, NodeOp::Bootstrap(..))) {
        TaskKind::Bootstrap
    } else if has(&|o| matches!(o, NodeOp::Multiply(..))) && relin {
        TaskKind::MulRelinRescale
    } else if has(&|o| matches!(o, NodeOp::Square(..))) && relin {
        TaskKind::SquareRelinRescale
    } else if has(&|o| matches!(o, NodeOp::Rescale(..)))
        && has(&|o| {
            matches!(
                o,
                NodeOp::MulConst(..) | NodeOp::MulConstExact(..) | NodeOp::MulPlain(..)
            )
        })
        && !relin
    {
        TaskKind::MulPlainRescale
    } else if members.iter().all(|&v| {
        nodes[v].op.is_light() || matches!(nodes[v].op, NodeOp::Add(..) | NodeOp::Sub(..))
    }) {
        TaskKind::Add
    } else {
        TaskKind::Other
    };
    (kind, nq)
}

impl PolyOps for GraphBuilder {
    type Ct = Value;
    fn moduli(&self) -> &[u64] {
        &self.moduli
    }
    fn level_of(&self, ct: &Value) -> usize {
        ct.level
    }
    fn scale_of(&self, ct: &Value) -> f64 {
        ct.scale
    }
    fn size_of(&self, ct: &Value) -> usize {
        ct.size
    }
    fn with_scale(&self, ct: Value, scale: f64) -> heloom_ckks::Result<Value> {
        Ok(self.push(NodeOp::SetScale(ct.node, scale), ct.level, scale, ct.size))
    }
    fn add(&self, a: &Value, b: &Value) -> heloom_ckks::Result<Value> {
        self.combine(a, b, false)
    }
    fn sub(&self, a: &Value, b: &Value) -> heloom_ckks::Result<Value> {
        self.combine(a, b, true)
    }
    fn add_const(&self, ct: &Value, c: f64) -> heloom_ckks::Result<Value> {
        Ok(self.push(NodeOp::AddConst(ct.node, c), ct.level, ct.scale, ct.size))
    }
    fn multiply_int(&self, ct: &Value, k: i64) -> heloom_ckks::Result<Value> {
        Ok(self.push(NodeOp::MulInt(ct.node, k), ct.level, ct.scale, ct.size))
    }
    fn multiply_const_exact(&self, ct: &Value, k: i128) -> heloom_ckks::Result<Value> {
        Ok(self.push(
            NodeOp::MulConstExact(ct.node, k),
            ct.level,
            ct.scale,
            ct.size,
        ))
    }
    fn multiply_const(&self, ct: &Value, c: f64) -> heloom_ckks::Result<Value> {
        let ct = &self.refreshed(ct)?;
        above_level_0(
            ct.level,
            "multiplying by a non-integer constant needs a level to rescale",
        )?;
        Ok(self.push_at_q_level(NodeOp::MulConst(ct.node, c), ct))
    }
    fn multiply(&self, a: &Value, b: &Value) -> heloom_ckks::Result<Value> {
        if a.size != 2 || b.size != 2 {
            return invalid("multiply takes two-polynomial ciphertexts; relinearize first");
        }
        let (a, b) = (&self.refreshed(a)?, &self.refreshed(b)?);
        Ok(self.push(
            NodeOp::Multiply(a.node, b.node),
            a.level.min(b.level),
            a.scale * b.scale,
            3,
        ))
    }
    fn square(&self, a: &Value) -> heloom_ckks::Result<Value> {
        if a.size != 2 {
            return invalid("square takes a two-polynomial ciphertext; relinearize first");
        }
        let a = &self.refreshed(a)?;
        Ok(self.push(NodeOp::Square(a.node), a.level, a.scale * a.scale, 3))
    }
    fn relinearize(&self, a: &Value) -> heloom_ckks::Result<Value> {
        Ok(self.push(NodeOp::Relinearize(a.node), a.level, a.scale, 2))
    }
    fn rescale(&self, a: &Value) -> heloom_ckks::Result<Value> {
        above_level_0(a.level, "cannot rescale at level 0")?;
        let q = self.moduli[a.level] as f64;
        Ok(self.push(NodeOp::Rescale(a.node), a.level - 1, a.scale / q, a.size))
    }
    fn drop_to_level(&self, a: &Value, level: usize) -> heloom_ckks::Result<Value> {
        if level > a.level {
            let hint = format!(
                "cannot raise a ciphertext from level {} to {level}",
                a.level
            );
            return Err(out_of_levels(a.level, level, hint));
        }
        if level == a.level {
            return Ok(*a);
        }
        Ok(self.push(NodeOp::DropToLevel(a.node, level), level, a.scale, a.size))
    }
    fn rotate(&self, ct: &Value, step: i64) -> heloom_ckks::Result<Value> {
        if ct.size != 2 {
            return invalid("rotate takes a two-polynomial ciphertext; relinearize first");
        }
        if step == 0 {
            return Ok(*ct);
        }
        Ok(self.push(NodeOp::Rotate(ct.node, step), ct.level, ct.scale, 2))
    }
    fn multiply_plain_slots(&self, ct: &Value, values: &[f64]) -> heloom_ckks::Result<Value> {
        let ct = &self.refreshed(ct)?;
        heloom_ckks::polyops::check_plain_slots(values, ct.level)?;
        let id = self.plain_id(values);
        Ok(self.push_at_q_level(NodeOp::MulPlain(ct.node, id), ct))
    }
    fn bootstrap_level(&self) -> Option<usize> {
        self.bootstrap_level
    }
    fn bootstrap(&self, ct: &Value) -> heloom_ckks::Result<Value> {
        match self.bootstrap_level {
            Some(level) => self.bootstrap_to(ct, level),
            None => invalid(
                "this graph builder does not bootstrap: build it with GraphBuilder::with_bootstrapping(level)",
            ),
        }
    }
}

fn missing(t: usize, o: NodeId) -> GraphError {
    GraphError::Invalid(format!("task {t}: operand node {o} is not available"))
}

/// Key switches a [`NodeOp::Bootstrap`] is priced at, each at the chain's top level: about what
/// a full-slot bootstrap runs (CoeffToSlot and SlotToCoeff rotations, EvalMod's
/// relinearizations), most of them near the top. An estimate for scheduling, not a measurement.
pub const BOOTSTRAP_KEY_SWITCHES: f64 = 120.0;

/// Cost-model op of a node, its limb count and how many of it the node costs, if anything
/// (`top_nq`: the chain's limb count, where a bootstrap runs).
fn node_cost(nodes: &[Node], v: NodeId, top_nq: usize) -> Option<(OpKind, usize, f64)> {
    let node = &nodes[v];
    let in_nq = |o: NodeId| nodes[o].level + 1;
    if let NodeOp::Bootstrap(_) = node.op {
        return Some((OpKind::Relin, top_nq, BOOTSTRAP_KEY_SWITCHES));
    }
    let one = |(op, nq): (OpKind, usize)| Some((op, nq, 1.0));
    one(match node.op {
        NodeOp::Input(_) | NodeOp::SetScale(..) => return None,
        NodeOp::Add(a, b) | NodeOp::Sub(a, b) => (OpKind::Add, in_nq(a).min(in_nq(b))),
        NodeOp::AddConst(a, _) | NodeOp::MulInt(a, _) => (OpKind::AddPlain, in_nq(a)),
        NodeOp::DropToLevel(_, l) => (OpKind::AddPlain, l + 1),
        NodeOp::MulConstExact(a, _) | NodeOp::MulConst(a, _) | NodeOp::MulPlain(a, _) => {
            (OpKind::MulPlain, in_nq(a))
        }
        // One key switch plus a permutation of the limbs.
        NodeOp::Rotate(a, _) => (OpKind::Relin, in_nq(a)),
        NodeOp::Multiply(a, b) => (OpKind::Mul, in_nq(a).min(in_nq(b))),
        NodeOp::Square(a) => (OpKind::Square, in_nq(a)),
        NodeOp::Relinearize(a) if nodes[a].size == 3 => (OpKind::Relin, in_nq(a)),
        NodeOp::Relinearize(_) => return None,
        NodeOp::Rescale(a) => (OpKind::Rescale, in_nq(a)),
        NodeOp::Bootstrap(_) => return None,
    })
}

impl TaskGraph {
    /// The modulus chain `q_0 .. q_L` it was recorded for.
    pub fn moduli(&self) -> &[u64] {
        &self.moduli
    }

    /// Name (the variant for built-in jobs).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Nodes in recording order.
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// The plaintext vectors [`NodeOp::MulPlain`] nodes multiply by, indexed by their id.
    pub fn plains(&self) -> &[Arc<[f64]>] {
        &self.plains
    }

    /// Plaintext vector `id`, if the graph has it.
    pub fn plain(&self, id: usize) -> Option<&[f64]> {
        self.plains.get(id).map(|p| &p[..])
    }

    /// Tasks in topological order.
    pub fn tasks(&self) -> &[Task] {
        &self.tasks
    }

    /// Number of job inputs.
    pub fn num_inputs(&self) -> usize {
        self.inputs.len()
    }

    /// Input nodes, in input order.
    pub fn input_nodes(&self) -> &[NodeId] {
        &self.inputs
    }

    /// Output nodes.
    pub fn outputs(&self) -> &[NodeId] {
        &self.outputs
    }

    /// Tasks without dependencies.
    pub fn roots(&self) -> Vec<usize> {
        (0..self.tasks.len())
            .filter(|&t| self.tasks[t].deps.is_empty())
            .collect()
    }

    /// Count of tasks of each kind, for display.
    pub fn kind_counts(&self) -> Vec<(TaskKind, usize)> {
        let mut out: Vec<(TaskKind, usize)> = Vec::new();
        for t in &self.tasks {
            match out.iter_mut().find(|(k, _)| *k == t.kind) {
                Some((_, c)) => *c += 1,
                None => out.push((t.kind, 1)),
            }
        }
        out
    }

    /// Cost of task `t` on `threads` threads, alone, split by contention class (without
    /// the per-task start overhead).
    pub fn task_cost(&self, model: &dyn CostModel, t: usize, threads: usize) -> SplitCost {
        let mut c = SplitCost::default();
        for &v in &self.tasks[t].nodes {
            if let Some((op, nq, count)) = node_cost(&self.nodes, v, self.moduli.len()) {
                c.add(op.contention_class(), count * model.op_ms(op, nq, threads));
            }
        }
        c
    }

    /// Total single-thread work of the graph, ms.
    pub fn work_ms(&self, model: &dyn CostModel) -> f64 {
        (0..self.tasks.len())
            .map(|t| self.task_cost(model, t, 1).total() + model.task_overhead_ms())
            .sum()
    }

    /// Longest path from each task to the end, including the task itself, with each task
    /// costed by `cost(t)` (the list scheduler's priority, seed 000 Section 7.1).
    pub fn remaining_path(&self, cost: &dyn Fn(usize) -> f64) -> Vec<f64> {
        let mut rem = vec![0.0; self.tasks.len()];
        for t in (0..self.tasks.len()).rev() {
            let tail = self.tasks[t]
                .succs
                .iter()
                .map(|&s| rem[s])
                .fold(0.0, f64::max);
            rem[t] = cost(t) + tail;
        }
        rem
    }

    /// Critical path with every task on `threads(t)` threads, ms (incl. start overhead).
    pub fn critical_path_ms(&self, model: &dyn CostModel, threads: &dyn Fn(usize) -> usize) -> f64 {
        self.remaining_path(&|t| {
            self.task_cost(model, t, threads(t)).total() + model.task_overhead_ms()
        })
        .into_iter()
        .fold(0.0, f64::max)
    }

    /// Whether node `v`'s value is read by a task other than its own or is an output.
    fn task_of(&self, v: NodeId) -> Option<usize> {
        self.owner.get(v).copied().flatten()
    }

    /// Runs task `t` with `ev` (its thread budget applies to every op). `fetch(node)` returns
    /// the value of an operand computed outside the task: a job input or another task's
    /// output.
    pub fn run_task<O: PolyOps>(
        &self,
        t: usize,
        ev: &O,
        fetch: &dyn Fn(NodeId) -> Option<Arc<O::Ct>>,
    ) -> Result<O::Ct> {
        let task = self
            .tasks
            .get(t)
            .ok_or_else(|| GraphError::Invalid(format!("no task {t}")))?;
        // Values computed inside the task, with how many later nodes of the task still read
        // them (a value read for the last time by a relabel is moved, not copied).
        let mut local: Vec<(NodeId, Option<O::Ct>, usize)> = Vec::with_capacity(task.nodes.len());
        for (pos, &v) in task.nodes.iter().enumerate() {
            let uses = task.nodes[pos + 1..]
                .iter()
                .filter(|&&u| self.nodes[u].op.operands().contains(&v))
                .count();
            let out = match self.nodes[v].op {
                NodeOp::SetScale(a, s) => {
                    let c = match local.iter_mut().find(|(id, _, _)| *id == a) {
                        Some((_, slot, left)) => {
                            *left = left.saturating_sub(1);
                            if *left == 0 && a != task.output {
                                slot.take()
                            } else {
                                slot.clone()
                            }
                        }
                        None => fetch(a).map(Arc::unwrap_or_clone),
                    }
                    .ok_or_else(|| missing(t, a))?;
                    ev.with_scale(c, s)?
                }
                _ => {
                    let ops = self.nodes[v].op.operands();
                    let mut shared: Vec<Arc<O::Ct>> = Vec::new();
                    for &o in &ops {
                        if !local.iter().any(|(id, _, _)| *id == o) {
                            shared.push(fetch(o).ok_or_else(|| missing(t, o))?);
                        }
                    }
                    let mut args: Vec<&O::Ct> = Vec::with_capacity(ops.len());
                    let mut si = 0;
                    for &o in &ops {
                        match local.iter().find(|(id, _, _)| *id == o) {
                            Some((_, Some(c), _)) => args.push(c),
                            Some((_, None, _)) => return Err(missing(t, o)),
                            None => {
                                args.push(&shared[si]);
                                si += 1;
                            }
                        }
                    }
                    let out = self.eval_node(v, ev, &args)?;
                    for &o in &ops {
                        if let Some((_, slot, left)) = local.iter_mut().find(|(id, _, _)| *id == o)
                        {
                            *left = left.saturating_sub(1);
                            if *left == 0 && o != task.output {
                                *slot = None;
                            }
                        }
                    }
                    out
                }
            };
            local.push((v, Some(out), uses));
        }
        local
            .into_iter()
            .find(|(id, _, _)| *id == task.output)
            .and_then(|(_, c, _)| c)
            .ok_or_else(|| GraphError::Invalid(format!("task {t} produced no output")))
    }

    fn eval_node<O: PolyOps>(&self, v: NodeId, ev: &O, args: &[&O::Ct]) -> Result<O::Ct> {
        let node = &self.nodes[v];
        let arg = |i: usize| {
            args.get(i)
                .copied()
                .ok_or_else(|| GraphError::Invalid(format!("node {v}: operand {i} missing")))
        };
        let out = match node.op {
            NodeOp::Input(i) => {
                return Err(GraphError::Invalid(format!(
                    "input {i} is not computed by a task"
                )))
            }
            NodeOp::Add(..) => ev.add(arg(0)?, arg(1)?)?,
            NodeOp::Sub(..) => ev.sub(arg(0)?, arg(1)?)?,
            NodeOp::AddConst(_, c) => ev.add_const(arg(0)?, c)?,
            NodeOp::MulInt(_, k) => ev.multiply_int(arg(0)?, k)?,
            NodeOp::MulConstExact(_, k) => ev.multiply_const_exact(arg(0)?, k)?,
            NodeOp::MulConst(_, c) => ev.multiply_const(arg(0)?, c)?,
            NodeOp::Multiply(..) => ev.multiply(arg(0)?, arg(1)?)?,
            NodeOp::Square(_) => ev.square(arg(0)?)?,
            NodeOp::Relinearize(_) => ev.relinearize(arg(0)?)?,
            NodeOp::Rescale(_) => ev.rescale(arg(0)?)?,
            NodeOp::DropToLevel(_, l) => ev.drop_to_level(arg(0)?, l)?,
            NodeOp::SetScale(_, s) => ev.with_scale(arg(0)?.clone(), s)?,
            NodeOp::Rotate(_, step) => ev.rotate(arg(0)?, step)?,
            NodeOp::MulPlain(_, id) => {
                let p = self.plain(id).ok_or_else(|| {
                    GraphError::Invalid(format!("node {v}: plaintext {id} does not exist"))
                })?;
                ev.multiply_plain_slots(arg(0)?, p)?
            }
            NodeOp::Bootstrap(_) => {
                if ev.bootstrap_level() != Some(node.level) {
                    return Err(GraphError::Invalid(format!(
                        "node {v} bootstraps to level {}, but this backend {}; run the graph on an AutoBootstrap whose bootstrapper lands there",
                        node.level,
                        match ev.bootstrap_level() {
                            Some(l) => format!("bootstraps to level {l}"),
                            None => "does not bootstrap".into(),
                        }
                    )));
                }
                ev.bootstrap(arg(0)?)?
            }
        };
        let (level, size) = (ev.level_of(&out), ev.size_of(&out));
        if level != node.level || size != node.size {
            return Err(GraphError::Invalid(format!(
                "node {v} ({}) came out at level {} size {}, the graph expected level {} size {}",
                node.op.name(),
                level,
                size,
                node.level,
                node.size
            )));
        }
        Ok(out)
    }

    /// Runs the whole graph on `inputs`, one task after another, each on `ev`'s budget.
    ///
    /// `ev` is any [`PolyOps`] backend: the CPU [`heloom_ckks::Evaluator`] or an accelerator's (the GPU
    /// evaluator of heloom-gpu), which then keeps every intermediate on its device.
    pub fn run<O: PolyOps>(&self, ev: &O, inputs: &[O::Ct]) -> Result<Vec<O::Ct>> {
        self.check_inputs(inputs.iter().map(|c| (ev.level_of(c), ev.scale_of(c))))?;
        let mut values: Vec<Option<Arc<O::Ct>>> = vec![None; self.nodes.len()];
        for (i, &node) in self.inputs.iter().enumerate() {
            values[node] = Some(Arc::new(inputs[i].clone()));
        }
        for t in 0..self.tasks.len() {
            let out = self.run_task(t, ev, &|o| values[o].clone())?;
            values[self.tasks[t].output] = Some(Arc::new(out));
        }
        self.outputs
            .iter()
            .map(|&o| {
                values[o]
                    .clone()
                    .map(Arc::unwrap_or_clone)
                    .ok_or_else(|| GraphError::Invalid(format!("output node {o} not computed")))
            })
            .collect()
    }

    /// Checks job inputs (level, scale) against what the graph was recorded for.
    pub fn check_inputs(&self, inputs: impl ExactSizeIterator<Item = (usize, f64)>) -> Result<()> {
        if inputs.len() != self.inputs.len() {
            return Err(GraphError::Invalid(format!(
                "graph '{}' takes {} input ciphertexts, got {}",
                self.name,
                self.inputs.len(),
                inputs.len()
            )));
        }
        for (i, ((level, scale), &node)) in inputs.zip(&self.inputs).enumerate() {
            let want = &self.nodes[node];
            let rel = ((scale - want.scale) / want.scale).abs();
            if level != want.level || rel > 1e-9 {
                return Err(GraphError::Invalid(format!(
                    "input {i} is at level {level} with scale 2^{:.3}; graph '{}' was built for level {} and scale 2^{:.3}",
                    scale.log2(),
                    self.name,
                    want.level,
                    want.scale.log2()
                )));
            }
        }
        Ok(())
    }

    /// The node an output or operand lives in, as (task, is that task's output).
    pub fn locate(&self, v: NodeId) -> Option<(usize, bool)> {
        self.task_of(v).map(|t| (t, self.tasks[t].output == v))
    }
}

impl fmt::Display for TaskGraph {
    /// One line per task: index, kind, n_q, dependencies and the ops it fuses.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "graph '{}': {} tasks", self.name, self.tasks.len())?;
        for (i, t) in self.tasks.iter().enumerate() {
            let ops: Vec<&str> = t.nodes.iter().map(|&v| self.nodes[v].op.name()).collect();
            writeln!(
                f,
                "  task {i:>2} {:<22} n_q {:>2}  deps {:?}  [{}]",
                t.kind.name(),
                t.nq,
                t.deps,
                ops.join(" ")
            )?;
        }
        Ok(())
    }
}
