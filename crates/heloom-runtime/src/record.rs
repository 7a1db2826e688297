//! What one scheduling run records: every job and every task, with times in milliseconds from
//! the start of the run. Both executors (real and simulated) produce the same records, and
//! [`crate::metrics`] turns them into latency percentiles, makespan and utilisation.

use crate::graph::Task;
use crate::scheduler::Dispatch;
use serde::{Deserialize, Serialize};

/// One job: a task graph bound to its inputs, arriving at `arrival_ms`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JobRecord {
    /// Job number, from 0 in arrival order.
    pub id: usize,
    /// Arrival (release) time.
    pub arrival_ms: f64,
    /// When its first task started.
    pub start_ms: f64,
    /// When its last task finished.
    pub finish_ms: f64,
    /// Name of the graph variant the policy chose for it.
    pub variant: String,
    /// Whether its decrypted result was checked and correct (`None` in a simulation).
    pub correct: Option<bool>,
}

impl JobRecord {
    /// Records for jobs arriving at `arrivals` (ms), not yet started: ids in arrival order,
    /// times to be filled in by an executor.
    pub fn pending(arrivals: &[f64]) -> Vec<JobRecord> {
        arrivals
            .iter()
            .enumerate()
            .map(|(id, &a)| JobRecord {
                id,
                arrival_ms: a,
                start_ms: f64::NAN,
                finish_ms: f64::NAN,
                variant: String::new(),
                correct: None,
            })
            .collect()
    }

    /// Latency: arrival to finish.
    pub fn latency_ms(&self) -> f64 {
        self.finish_ms - self.arrival_ms
    }
}

/// One task execution.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TaskRecord {
    /// The job it belongs to.
    pub job: usize,
    /// Task index within the job's graph.
    pub task: usize,
    /// Kind label (e.g. `mul-relin-rescale`).
    pub kind: String,
    /// RNS limbs of its main input (level + 1).
    pub nq: usize,
    /// Threads it was given.
    pub threads: usize,
    /// When the scheduler dispatched it.
    pub dispatch_ms: f64,
    /// When it started computing.
    pub start_ms: f64,
    /// When it finished.
    pub end_ms: f64,
}

/// Records the dispatch `d` of `task` at `now_ms`: its job starts now if this is its first
/// task, and a record dispatched at `dispatch_ms` and started at `start_ms` (`NaN` until
/// known) is appended to `tasks`. Returns the record's index. Both executors record this way.
pub(crate) fn record_dispatch(
    jobs: &mut [JobRecord],
    tasks: &mut Vec<TaskRecord>,
    d: &Dispatch,
    task: &Task,
    now_ms: f64,
    dispatch_ms: f64,
    start_ms: f64,
) -> usize {
    if jobs[d.job].start_ms.is_nan() {
        jobs[d.job].start_ms = now_ms;
    }
    tasks.push(TaskRecord {
        job: d.job,
        task: d.task,
        kind: task.kind.name().to_string(),
        nq: task.nq,
        threads: d.threads,
        dispatch_ms,
        start_ms,
        end_ms: f64::NAN,
    });
    tasks.len() - 1
}

/// Everything one run of one policy at one mean gap produced.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    /// Policy name (`fixed-1`, `fixed-half`, `fixed-full`, `paper-dynamic`, `heloom`).
    pub policy: String,
    /// Mean gap between arrivals.
    pub gap_ms: f64,
    /// `"real"` or `"simulated:<profile>"`.
    pub executor: String,
    /// Threads available to HE tasks.
    pub capacity: usize,
    /// Measured window: jobs `window.0 ..= window.1` (0-based ids).
    pub window: (usize, usize),
    /// Every job, by id.
    pub jobs: Vec<JobRecord>,
    /// Every task, in start order.
    pub tasks: Vec<TaskRecord>,
    /// Mean time the scheduler itself spent per task deciding: releasing jobs (variant
    /// choice), completion bookkeeping and dispatch decisions (policy calls, ready queue).
    /// Handing a task to its thread is not included: it shows as the task's dispatch latency
    /// (`start_ms - dispatch_ms`).
    pub sched_overhead_ms: f64,
    /// Wall time of checking every result after the run (decryption on one thread, real
    /// executor only; 0 when simulated), ms: not part of the scheduled work.
    #[serde(default)]
    pub check_ms: f64,
}
