//! Thread policies: how many threads the task at the head of the ready queue gets, and which
//! graph variant an arriving job runs.
//!
//! The paper's four (seed 000, Section 7.3) are reproduced exactly: `fixed-1`, `fixed-half`
//! (`ceil(n_q/2)`), `fixed-full` (`n_q`) and `paper-dynamic` (its four conditions). Additions
//! always get one thread, as in the paper. `heloom` is ours; see [`HeloomPolicy`].

use crate::cost::{effective_threads, throughput_optimal_busy, CostModel, SplitCost};
use crate::graph::{TaskGraph, TaskKind};
use std::sync::Arc;

/// The task at the head of the ready queue.
#[derive(Clone, Debug, PartialEq)]
pub struct ReadyTask {
    /// Job.
    pub job: usize,
    /// Task index in the job's graph.
    pub task: usize,
    /// Kind.
    pub kind: TaskKind,
    /// Limbs of its main input.
    pub nq: usize,
    /// Single-thread cost, ms.
    pub cost1_ms: f64,
}

/// What a policy sees when it decides.
#[derive(Clone, Debug)]
pub struct LoadView<'a> {
    /// Now, ms from the start of the run.
    pub now_ms: f64,
    /// Threads available to HE tasks.
    pub capacity: usize,
    /// Threads of running tasks (`n_c`).
    pub busy: usize,
    /// Running tasks.
    pub running: usize,
    /// The head of the ready queue (absent when deciding a variant).
    pub head: Option<&'a ReadyTask>,
    /// Ready tasks including the head.
    pub ready_len: usize,
    /// Sum over ready tasks of the paper's nominal threads (1 for additions and
    /// multiply-plain, 2 for ciphertext products), including the head.
    pub ready_nominal: usize,
    /// Single-thread work of all ready tasks, ms.
    pub ready_work_ms: f64,
    /// Single-thread work of every task not yet finished in released jobs, ms.
    pub backlog_ms: f64,
    /// Jobs released and not finished.
    pub jobs_in_system: usize,
}

/// A graph variant as the scheduler holds it, with its precomputed costs.
#[derive(Clone, Debug)]
pub struct Variant {
    /// The graph.
    pub graph: Arc<TaskGraph>,
    /// Single-thread cost of each task, ms (with the start overhead).
    pub cost1: Vec<f64>,
    /// List-scheduling priority: longest single-thread path from each task to the end.
    pub priority: Vec<f64>,
    /// Total single-thread work, ms.
    pub work_ms: f64,
    /// Critical path with every task on its latency-best thread count, ms.
    pub cp_fast_ms: f64,
    /// Fraction of the work that is key switching.
    pub keyswitch_fraction: f64,
}

impl Variant {
    /// Precomputes costs of `graph` under `model`.
    pub fn new(graph: Arc<TaskGraph>, model: &dyn CostModel) -> Self {
        let n = graph.tasks().len();
        let overhead = model.task_overhead_ms();
        let split: Vec<SplitCost> = (0..n).map(|t| graph.task_cost(model, t, 1)).collect();
        let cost1: Vec<f64> = split.iter().map(|c| c.total() + overhead).collect();
        let priority = graph.remaining_path(&|t| cost1[t]);
        let work_ms = cost1.iter().sum();
        let ks: f64 = split.iter().map(|c| c.keyswitch_ms).sum();
        let all: f64 = split.iter().map(|c| c.total()).sum();
        let cp_fast_ms = graph.critical_path_ms(model, &|t| {
            let task = &graph.tasks()[t];
            latency_best_threads(model, &graph, t, task.nq.max(1) * 2, model.capacity())
        });
        Self {
            graph,
            cost1,
            priority,
            work_ms,
            cp_fast_ms,
            keyswitch_fraction: if all > 0.0 { ks / all } else { 0.0 },
        }
    }
}

/// Smallest thread count within 3% of the fastest time for task `t`, searching `1..=limit`
/// (and never more than `capacity`).
pub fn latency_best_threads(
    model: &dyn CostModel,
    graph: &TaskGraph,
    t: usize,
    limit: usize,
    capacity: usize,
) -> usize {
    let limit = limit.min(capacity).max(1);
    let times: Vec<f64> = (1..=limit)
        .map(|k| graph.task_cost(model, t, k).total())
        .collect();
    let best = times.iter().copied().fold(f64::INFINITY, f64::min);
    times
        .iter()
        .position(|&x| x <= best * 1.03)
        .map_or(1, |i| i + 1)
}

/// A thread policy.
pub trait Policy: Send {
    /// Name, as on the command line.
    fn name(&self) -> &'static str;
    /// Threads for the head of the ready queue, or `None` to wait for a task to finish. The
    /// scheduler never starts a task that does not fit in the free threads.
    fn threads(&mut self, view: &LoadView<'_>, variant: &Variant) -> Option<usize>;
    /// Index of the graph variant an arriving job runs (default: the first, the paper's).
    fn variant(&mut self, _view: &LoadView<'_>, _variants: &[Variant]) -> usize {
        0
    }
    /// A job arrives running `variant`, chosen by its submitter (online execution, where
    /// every job brings its own graph); lets a policy track the load as
    /// [`Policy::variant`] does for jobs it places itself. Default: nothing.
    fn arrival(&mut self, _view: &LoadView<'_>, _variant: &Variant) {}
}

/// The policies by name.
pub const POLICY_NAMES: [&str; 5] = [
    "fixed-1",
    "fixed-half",
    "fixed-full",
    "paper-dynamic",
    "heloom",
];

/// Builds a policy by name (one of [`POLICY_NAMES`]).
pub fn policy_by_name(name: &str, model: Arc<dyn CostModel>) -> Option<Box<dyn Policy>> {
    Some(match name {
        "fixed-1" => Box::new(Fixed::One),
        "fixed-half" => Box::new(Fixed::Half),
        "fixed-full" => Box::new(Fixed::Full),
        "paper-dynamic" => Box::new(PaperDynamic),
        "heloom" => Box::new(HeloomPolicy::new(model)),
        _ => return None,
    })
}

fn fits(view: &LoadView<'_>, t: usize) -> Option<usize> {
    (view.busy + t <= view.capacity).then_some(t)
}

/// The paper's naive policies: a fixed thread count per multiplication task.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fixed {
    /// One thread.
    One,
    /// `ceil(n_q / 2)`.
    Half,
    /// `n_q`.
    Full,
}

impl Policy for Fixed {
    fn name(&self) -> &'static str {
        match self {
            Fixed::One => "fixed-1",
            Fixed::Half => "fixed-half",
            Fixed::Full => "fixed-full",
        }
    }

    fn threads(&mut self, view: &LoadView<'_>, _variant: &Variant) -> Option<usize> {
        let head = view.head?;
        let t = if head.kind.is_multiplication() {
            match self {
                Fixed::One => 1,
                Fixed::Half => head.nq.div_ceil(2),
                Fixed::Full => head.nq,
            }
        } else {
            1
        };
        // A machine with fewer threads than n_q runs the task on all of them.
        fits(view, t.clamp(1, view.capacity))
    }
}

/// The paper's dynamic policy (Section 7.3.2), exactly: with `n_c` threads busy, `r` other
/// ready tasks and `n_r` their nominal threads, the first condition that holds decides.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PaperDynamic;

impl Policy for PaperDynamic {
    fn name(&self) -> &'static str {
        "paper-dynamic"
    }

    fn threads(&mut self, view: &LoadView<'_>, _variant: &Variant) -> Option<usize> {
        let head = view.head?;
        let cap = view.capacity;
        let nc = view.busy;
        if !head.kind.is_multiplication() {
            return fits(view, 1);
        }
        let nq = head.nq;
        let r = view.ready_len.saturating_sub(1);
        let nr = view
            .ready_nominal
            .saturating_sub(head.kind.nominal_threads());
        let t = if nc + nq + nr <= cap {
            nq
        } else if nc + nq.div_ceil(2) + r <= cap {
            nq.div_ceil(2)
        } else if nc + 2 + r <= cap {
            2
        } else if nc < cap {
            1
        } else {
            return None;
        };
        fits(view, t.min(cap))
    }
}

/// heloom's policy: the paper's dynamic idea with the two estimates it lacked (Section 8 names
/// them: task start overhead and ciphertext level) and the graph rewrite of its Section 5.
///
/// - **Costs are level-aware and measured**: every decision uses the cost model's
///   `T(op, n_q, threads)` for the task's actual ops and levels, plus the measured start
///   overhead.
/// - **A throughput ceiling**: the busy-thread count is capped at `B*`, the count that
///   maximises `B / slowdown(B)` on the profile's contention curves (Tables 4-5: about 64 of
///   the Xeon Phi's threads; all cores on a machine without that contention).
/// - **Threads from the queue**: when the arrival rate leaves room (estimated utilisation at
///   most 55%) and the free threads cover this task at its latency-best count plus every other
///   ready task's nominal need, the task gets its latency-best count. Otherwise it gets, within
///   its work-weighted share of the free threads, the count with the least time x threads
///   unless a larger one is 10% faster for at most 15% more thread-time (which lands on the
///   divisors of `n_q` of the paper's Table 2).
/// - **Graph variant from the load**: an arriving job gets the variant with the shortest
///   estimated completion when the machine has room (critical path), and the one with the
///   least work when the backlog or the arrival rate would otherwise build a queue.
#[derive(Clone)]
pub struct HeloomPolicy {
    model: Arc<dyn CostModel>,
    /// `B*` by key-switching share (in twentieths): jobs of different graphs contend
    /// differently.
    ceilings: Vec<(u32, usize)>,
    last_arrival: Option<f64>,
    mean_gap: Option<f64>,
    /// Smoothed work of arriving jobs, ms (online arrivals).
    mean_work: Option<f64>,
    utilisation_estimate: Option<f64>,
}

impl HeloomPolicy {
    /// The policy for a cost model.
    pub fn new(model: Arc<dyn CostModel>) -> Self {
        Self {
            model,
            ceilings: Vec::new(),
            last_arrival: None,
            mean_gap: None,
            mean_work: None,
            utilisation_estimate: None,
        }
    }

    fn ceiling(&mut self, ks_fraction: f64) -> usize {
        let bucket = (ks_fraction.clamp(0.0, 1.0) * 20.0).round() as u32;
        if let Some(&(_, c)) = self.ceilings.iter().find(|(b, _)| *b == bucket) {
            return c;
        }
        let c = throughput_optimal_busy(self.model.as_ref(), f64::from(bucket) / 20.0);
        self.ceilings.push((bucket, c));
        c
    }

    /// Updates the smoothed gap between arrivals at `now_ms`.
    fn note_arrival(&mut self, now_ms: f64) {
        if let Some(last) = self.last_arrival {
            let gap = (now_ms - last).max(0.0);
            self.mean_gap = Some(match self.mean_gap {
                None => gap,
                Some(m) => 0.9 * m + 0.1 * gap,
            });
        }
        self.last_arrival = Some(now_ms);
    }

    /// Effective parallel capacity at the ceiling, in single-thread equivalents.
    fn effective_capacity(&mut self, ks_fraction: f64) -> f64 {
        let b = self.ceiling(ks_fraction);
        effective_threads(self.model.as_ref(), ks_fraction, b)
    }
}

impl Policy for HeloomPolicy {
    fn name(&self) -> &'static str {
        "heloom"
    }

    fn threads(&mut self, view: &LoadView<'_>, variant: &Variant) -> Option<usize> {
        let head = view.head?;
        let ceiling = self.ceiling(variant.keyswitch_fraction).min(view.capacity);
        let free = ceiling.saturating_sub(view.busy);
        if free == 0 {
            return None;
        }
        if !head.kind.is_multiplication() {
            return Some(1);
        }
        let model = self.model.as_ref();
        let graph = &variant.graph;
        // Share the free threads among the ready tasks, weighted by their work: the head's
        // share of the ready work, at least one thread.
        let share = if view.ready_len <= 1 || view.ready_work_ms <= 0.0 {
            free
        } else {
            let w = head.cost1_ms / view.ready_work_ms;
            ((free as f64 * w).floor() as usize).clamp(1, free)
        };
        let want = latency_best_threads(model, graph, head.task, head.nq * 2, view.capacity);
        let others = view
            .ready_nominal
            .saturating_sub(head.kind.nominal_threads());
        let light = self.utilisation_estimate.is_none_or(|rho| rho <= 0.55);
        if light && free >= want + others {
            // Room for this task at its fastest and for every other ready task: latency.
            return Some(want.min(free));
        }
        // Scarce threads: among 1..=share, the count with the best time x threads (work
        // efficiency), unless a larger count is at least 10% faster for at most 15% more
        // thread-time.
        let time =
            |k: usize| graph.task_cost(model, head.task, k).total() + model.task_overhead_ms();
        let mut best = 1;
        for k in 2..=share.max(1) {
            let (tk, tb) = (time(k), time(best));
            let more_work = (tk * k as f64) / (tb * best as f64);
            if tk <= tb * 0.9 && more_work <= 1.15 || tk * k as f64 <= tb * best as f64 {
                best = k;
            }
        }
        Some(best.min(free))
    }

    fn variant(&mut self, view: &LoadView<'_>, variants: &[Variant]) -> usize {
        if variants.len() <= 1 {
            return 0;
        }
        // Arrival rate, smoothed.
        self.note_arrival(view.now_ms);
        let ks = variants[0].keyswitch_fraction;
        let x = self.effective_capacity(ks);
        let least_work = (0..variants.len())
            .min_by(|&a, &b| variants[a].work_ms.total_cmp(&variants[b].work_ms))
            .unwrap_or(0);
        let fastest = (0..variants.len())
            .min_by(|&a, &b| variants[a].cp_fast_ms.total_cmp(&variants[b].cp_fast_ms))
            .unwrap_or(0);
        // Utilisation if every job ran the fast variant, and the wait the backlog implies.
        let rho = self
            .mean_gap
            .map_or(0.0, |g| variants[fastest].work_ms / (x * g.max(1e-9)));
        self.utilisation_estimate = self.mean_gap.map(|g| {
            let mean_work: f64 =
                variants.iter().map(|v| v.work_ms).sum::<f64>() / variants.len() as f64;
            mean_work / (x * g.max(1e-9))
        });
        let wait = view.backlog_ms / x;
        if rho > 0.6 || wait > 0.5 * variants[fastest].cp_fast_ms {
            least_work
        } else {
            fastest
        }
    }

    fn arrival(&mut self, view: &LoadView<'_>, variant: &Variant) {
        // The same utilisation estimate as for jobs the policy places, from the work of the
        // jobs that actually arrive.
        self.note_arrival(view.now_ms);
        let work = match self.mean_work {
            None => variant.work_ms,
            Some(m) => 0.9 * m + 0.1 * variant.work_ms,
        };
        self.mean_work = Some(work);
        let x = self.effective_capacity(variant.keyswitch_fraction);
        self.utilisation_estimate = self.mean_gap.map(|g| work / (x * g.max(1e-9)));
    }
}
