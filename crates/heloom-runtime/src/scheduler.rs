//! The list scheduler both executors share (seed 000, Section 7.1): ready tasks ordered by job
//! (earlier jobs first), then by critical-path priority (longest single-thread path to the end
//! of the job's graph), each started with the threads its policy grants while the sum of the
//! running tasks' threads stays within the capacity.
//!
//! The scheduler holds no clock and runs nothing: an executor tells it when jobs arrive and
//! tasks finish, and asks it what to start.

use crate::cost::CostModel;
use crate::policy::{LoadView, Policy, ReadyTask, Variant};
use std::collections::BTreeSet;
use std::sync::Arc;

/// A task the scheduler wants started.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dispatch {
    /// Job.
    pub job: usize,
    /// Task index in the job's graph.
    pub task: usize,
    /// Threads granted.
    pub threads: usize,
}

#[derive(Clone, Debug)]
struct JobState {
    variant: usize,
    deps_left: Vec<usize>,
    tasks_left: usize,
}

/// Ready-queue key: job, then higher priority first, then task.
type Key = (usize, std::cmp::Reverse<u64>, usize);

/// The list scheduler.
pub struct Scheduler {
    policy: Box<dyn Policy>,
    variants: Vec<Variant>,
    capacity: usize,
    jobs: Vec<Option<JobState>>,
    ready: BTreeSet<Key>,
    busy: usize,
    running: usize,
    ready_nominal: usize,
    ready_work_ms: f64,
    backlog_ms: f64,
    jobs_in_system: usize,
}

impl Scheduler {
    /// A scheduler running `policy` over `capacity` threads; arriving jobs run one of
    /// `variants` (graphs computing the same function; the paper's policies take the first).
    pub fn new(
        policy: Box<dyn Policy>,
        model: &dyn CostModel,
        variants: Vec<Arc<crate::graph::TaskGraph>>,
        capacity: usize,
    ) -> Self {
        let variants = variants
            .into_iter()
            .map(|g| Variant::new(g, model))
            .collect();
        Self {
            policy,
            variants,
            capacity: capacity.max(1),
            jobs: Vec::new(),
            ready: BTreeSet::new(),
            busy: 0,
            running: 0,
            ready_nominal: 0,
            ready_work_ms: 0.0,
            backlog_ms: 0.0,
            jobs_in_system: 0,
        }
    }

    /// The policy's name.
    pub fn policy_name(&self) -> &'static str {
        self.policy.name()
    }

    /// The variants, with their costs.
    pub fn variants(&self) -> &[Variant] {
        &self.variants
    }

    /// Threads busy now.
    pub fn busy(&self) -> usize {
        self.busy
    }

    /// Capacity.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Jobs released and not finished.
    pub fn jobs_in_system(&self) -> usize {
        self.jobs_in_system
    }

    /// Whether nothing is ready or running.
    pub fn idle(&self) -> bool {
        self.ready.is_empty() && self.running == 0
    }

    /// Variant index job `job` runs (after its release).
    pub fn job_variant(&self, job: usize) -> Option<usize> {
        self.jobs
            .get(job)
            .and_then(|j| j.as_ref())
            .map(|j| j.variant)
    }

    fn view<'b>(&self, now_ms: f64, head: Option<&'b ReadyTask>) -> LoadView<'b> {
        LoadView {
            now_ms,
            capacity: self.capacity,
            busy: self.busy,
            running: self.running,
            head,
            ready_len: self.ready.len(),
            ready_nominal: self.ready_nominal,
            ready_work_ms: self.ready_work_ms,
            backlog_ms: self.backlog_ms,
            jobs_in_system: self.jobs_in_system,
        }
    }

    fn push_ready(&mut self, job: usize, task: usize, variant: usize) {
        let v = &self.variants[variant];
        let prio = (v.priority[task] * 1000.0).round().max(0.0) as u64;
        self.ready.insert((job, std::cmp::Reverse(prio), task));
        self.ready_nominal += v.graph.tasks()[task].kind.nominal_threads();
        self.ready_work_ms += v.cost1[task];
    }

    /// Job `job` arrives now: the policy picks its variant and its root tasks become ready.
    /// Returns the variant index.
    pub fn release(&mut self, job: usize, now_ms: f64) -> usize {
        let variant = {
            let view = self.view(now_ms, None);
            let v = self.policy.variant(&view, &self.variants);
            v.min(self.variants.len().saturating_sub(1))
        };
        if self.jobs.len() <= job {
            self.jobs.resize(job + 1, None);
        }
        let g = Arc::clone(&self.variants[variant].graph);
        let deps_left: Vec<usize> = g.tasks().iter().map(|t| t.deps.len()).collect();
        self.jobs[job] = Some(JobState {
            variant,
            deps_left,
            tasks_left: g.tasks().len(),
        });
        self.backlog_ms += self.variants[variant].work_ms;
        self.jobs_in_system += 1;
        for t in g.roots() {
            self.push_ready(job, t, variant);
        }
        variant
    }

    /// Task `task` of `job`, started with `threads`, finished. Returns whether the job is done.
    pub fn complete(&mut self, job: usize, task: usize, threads: usize) -> bool {
        self.busy = self.busy.saturating_sub(threads);
        self.running = self.running.saturating_sub(1);
        let Some(Some(state)) = self.jobs.get_mut(job) else {
            return false;
        };
        let variant = state.variant;
        let v = &self.variants[variant];
        self.backlog_ms = (self.backlog_ms - v.cost1[task]).max(0.0);
        state.tasks_left = state.tasks_left.saturating_sub(1);
        let mut newly = Vec::new();
        for &s in &v.graph.tasks()[task].succs {
            state.deps_left[s] = state.deps_left[s].saturating_sub(1);
            if state.deps_left[s] == 0 {
                newly.push(s);
            }
        }
        let done = state.tasks_left == 0;
        if done {
            self.jobs[job] = None;
            self.jobs_in_system = self.jobs_in_system.saturating_sub(1);
        }
        for s in newly {
            self.push_ready(job, s, variant);
        }
        done
    }

    /// Starts what the policy allows now, in list order; stops at the first task that has to
    /// wait (strict list scheduling, as in the paper).
    pub fn dispatch(&mut self, now_ms: f64) -> Vec<Dispatch> {
        let mut out = Vec::new();
        while let Some(&key) = self.ready.first() {
            let (job, _, task) = key;
            let Some(Some(state)) = self.jobs.get(job) else {
                self.ready.remove(&key);
                continue;
            };
            let variant = state.variant;
            let v = &self.variants[variant];
            let t = &v.graph.tasks()[task];
            let head = ReadyTask {
                job,
                task,
                kind: t.kind,
                nq: t.nq,
                cost1_ms: v.cost1[task],
            };
            let view = self.view(now_ms, Some(&head));
            let Some(threads) = self.policy.threads(&view, &self.variants[variant]) else {
                break;
            };
            let threads = threads.max(1);
            if self.busy + threads > self.capacity {
                break;
            }
            self.ready.remove(&key);
            self.ready_nominal = self.ready_nominal.saturating_sub(t.kind.nominal_threads());
            self.ready_work_ms = (self.ready_work_ms - v.cost1[task]).max(0.0);
            self.busy += threads;
            self.running += 1;
            out.push(Dispatch { job, task, threads });
        }
        out
    }
}
