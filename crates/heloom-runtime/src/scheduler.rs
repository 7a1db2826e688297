//! The list scheduler both executors share (seed 000, Section 7.1): ready tasks ordered by job
//! (earlier jobs first), then by critical-path priority (longest single-thread path to the end
//! of the job's graph), each started with the threads its policy grants while the sum of the
//! running tasks' threads stays within the capacity.
//!
//! Jobs may belong to flows (a service's tenants, [`Scheduler::release_variant_in`]). Between
//! flows the next task comes from the flow that has received the least service, by start-time
//! fair queueing (Goyal, Vin and Cheng, SIGCOMM 1996) at task granularity: a flow's tag is the
//! virtual time at which its next task starts, a started task advances its flow's tag by the
//! task's single-thread cost, and a flow that had nothing ready joins at the current virtual
//! time, so it neither waits behind another flow's backlog nor banks credit while idle. Within
//! a flow the list order above holds. With one flow (every batch run) this is the plain list
//! scheduler. A cap on the threads of each named flow ([`Scheduler::set_flow_thread_cap`], a
//! service's per-tenant thread quota) skips a flow at its cap until its tasks give threads back.
//!
//! The scheduler holds no clock and runs nothing: an executor tells it when jobs arrive and
//! tasks finish, and asks it what to start.
//!
//! A batch run fixes its variants at construction and the policy picks one per job
//! ([`Scheduler::release`]). An online run registers each job's own graph
//! ([`Scheduler::add_variant`], cached by `Arc` identity) and releases the job on it
//! ([`Scheduler::release_variant`]); such a variant is dropped when no job holds it any more,
//! and finished or aborted jobs leave no state behind, so a scheduler that lives for millions
//! of jobs stays as large as what is in flight.

use crate::cost::CostModel;
use crate::policy::{LoadView, Policy, ReadyTask, Variant};
use std::collections::{BTreeSet, HashMap};
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
    /// Single-thread work of its unfinished tasks, ms (its share of the backlog).
    backlog_left_ms: f64,
    /// Its flow.
    flow: u64,
}

/// The flow jobs belong to unless released with [`Scheduler::release_variant_in`].
pub const DEFAULT_FLOW: u64 = 0;

/// A flow's ready tasks and its fair-queueing tags (virtual time: single-thread ms).
#[derive(Default)]
struct Flow {
    ready: BTreeSet<Key>,
    /// Start tag of its next task; its key in `Scheduler::order` while it has ready tasks.
    tag: f64,
    /// Finish tag of its last started task.
    finish: f64,
    /// Its jobs in the system.
    jobs: usize,
}

/// Running tasks of a job: its flow and how many (kept past the job's end or abort until
/// they have all given their threads back).
#[derive(Clone, Copy)]
struct Running {
    flow: u64,
    tasks: usize,
}

/// Ready-queue key: job, then higher priority first, then task.
type Key = (usize, std::cmp::Reverse<u64>, usize);

/// A variant registered with [`Scheduler::add_variant`], with who holds it.
struct Added {
    variant: Variant,
    /// `add_variant` calls not yet taken over by a `release_variant`.
    claims: usize,
    /// Released jobs running it.
    jobs: usize,
}

/// Variant `index` of a scheduler's fixed and added variants.
fn lookup<'a>(
    fixed: &'a [Variant],
    added: &'a [Option<Added>],
    index: usize,
) -> Option<&'a Variant> {
    match index.checked_sub(fixed.len()) {
        None => fixed.get(index),
        Some(slot) => added.get(slot).and_then(Option::as_ref).map(|a| &a.variant),
    }
}

/// How much state the scheduler holds now: everything is bounded by the jobs in flight.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Footprint {
    /// Jobs released and neither finished nor aborted.
    pub jobs: usize,
    /// Ready tasks.
    pub ready: usize,
    /// Variants from [`Scheduler::add_variant`] still held.
    pub added_variants: usize,
    /// Slots of the added-variant table, free ones included (its high-water mark).
    pub variant_slots: usize,
    /// Entries of the graph cache behind [`Scheduler::add_variant`].
    pub cached_graphs: usize,
    /// Flows with jobs in the system or ready tasks.
    pub flows: usize,
}

/// The list scheduler.
pub struct Scheduler {
    policy: Box<dyn Policy>,
    variants: Vec<Variant>,
    /// Variants added at run time; index `variants.len() + slot`.
    added: Vec<Option<Added>>,
    free_slots: Vec<usize>,
    /// Added variants by graph identity (the address of the `Arc`'s graph, which the held
    /// entry keeps alive and so unique).
    by_graph: HashMap<usize, usize>,
    capacity: usize,
    jobs: HashMap<usize, JobState>,
    flows: HashMap<u64, Flow>,
    /// Flows with ready tasks, by (start tag bits, flow): the first one serves next.
    order: BTreeSet<(u64, u64)>,
    /// Virtual time: the start tag of the last task started.
    vtime: f64,
    /// Most threads the tasks of one named flow hold at once (`None`: no cap).
    flow_cap: Option<usize>,
    /// Threads held by each flow's running tasks (flows holding none are absent).
    flow_busy: HashMap<u64, usize>,
    /// Running tasks by job.
    running_jobs: HashMap<usize, Running>,
    ready_len: usize,
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
            added: Vec::new(),
            free_slots: Vec::new(),
            by_graph: HashMap::new(),
            capacity: capacity.max(1),
            jobs: HashMap::new(),
            flows: HashMap::new(),
            order: BTreeSet::new(),
            vtime: 0.0,
            flow_cap: None,
            flow_busy: HashMap::new(),
            running_jobs: HashMap::new(),
            ready_len: 0,
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

    /// The variants given to [`Self::new`], with their costs (the ones the policy picks
    /// from; [`Self::variant`] also finds the added ones).
    pub fn variants(&self) -> &[Variant] {
        &self.variants
    }

    /// Variant `index`: one given to [`Self::new`] or one added and still held.
    pub fn variant(&self, index: usize) -> Option<&Variant> {
        lookup(&self.variants, &self.added, index)
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
        self.ready_len == 0 && self.running == 0
    }

    /// Variant index job `job` runs (after its release).
    pub fn job_variant(&self, job: usize) -> Option<usize> {
        self.jobs.get(&job).map(|j| j.variant)
    }

    /// What the scheduler holds now (for checks that it does not grow with the jobs run).
    pub fn footprint(&self) -> Footprint {
        Footprint {
            jobs: self.jobs.len(),
            ready: self.ready_len,
            added_variants: self.added.iter().flatten().count(),
            variant_slots: self.added.len(),
            flows: self.flows.len(),
            cached_graphs: self.by_graph.len(),
        }
    }

    /// Registers `graph` as a variant, priced by `model`, and returns its index. The same
    /// graph (by `Arc` identity) while still held gets the same index, priced once.
    ///
    /// Each call is a claim on the variant that the next [`Self::release_variant`] on it
    /// takes over; the released job then holds it until it finishes or is aborted. The
    /// variant is dropped (and its index reused) once nothing holds it, so every call should
    /// be followed by one release.
    pub fn add_variant(
        &mut self,
        graph: Arc<crate::graph::TaskGraph>,
        model: &dyn CostModel,
    ) -> usize {
        let base = self.variants.len();
        let key = Arc::as_ptr(&graph).addr();
        if let Some(&slot) = self.by_graph.get(&key) {
            if let Some(Some(a)) = self.added.get_mut(slot) {
                a.claims += 1;
                return base + slot;
            }
        }
        let entry = Added {
            variant: Variant::new(graph, model),
            claims: 1,
            jobs: 0,
        };
        let slot = match self.free_slots.pop() {
            Some(slot) => {
                self.added[slot] = Some(entry);
                slot
            }
            None => {
                self.added.push(Some(entry));
                self.added.len() - 1
            }
        };
        self.by_graph.insert(key, slot);
        base + slot
    }

    /// Job `job` arrives now and runs variant `variant` (the policy does not choose; it is told,
    /// [`Policy::arrival`]): its root
    /// tasks become ready. Returns false, and releases nothing, when no such variant is held.
    /// A graph without tasks releases nothing either: the job is done at once.
    pub fn release_variant(&mut self, job: usize, variant: usize, now_ms: f64) -> bool {
        self.release_variant_in(job, variant, DEFAULT_FLOW, now_ms)
    }

    /// [`Self::release_variant`] for a job of flow `flow` (a tenant): flows share the threads
    /// by start-time fair queueing (see the module documentation).
    pub fn release_variant_in(
        &mut self,
        job: usize,
        variant: usize,
        flow: u64,
        now_ms: f64,
    ) -> bool {
        let Some(v) = self.variant(variant).cloned() else {
            return false;
        };
        // The policy does not choose the graph, but it sees the arrival (its load estimate).
        let view = self.view(now_ms, None);
        self.policy.arrival(&view, &v);
        let g = Arc::clone(&v.graph);
        if let Some(a) = self.added_mut(variant) {
            a.claims = a.claims.saturating_sub(1);
            a.jobs += 1;
        }
        if g.tasks().is_empty() {
            self.unhold(variant);
            return true;
        }
        self.start_job(job, variant, &g, flow);
        true
    }

    /// Drops job `job`: its ready tasks never start and it no longer counts as in the
    /// system. Tasks of it already dispatched still give their threads back through
    /// [`Self::complete`] (which then returns false). Returns false if the job is unknown or
    /// already finished.
    pub fn abort(&mut self, job: usize) -> bool {
        let Some(state) = self.jobs.remove(&job) else {
            return false;
        };
        let from = (job, std::cmp::Reverse(u64::MAX), 0);
        let to = (job, std::cmp::Reverse(0), usize::MAX);
        let keys: Vec<Key> = self
            .flows
            .get(&state.flow)
            .map(|f| f.ready.range(from..=to).copied().collect())
            .unwrap_or_default();
        if let Some(v) = self.variant(state.variant) {
            let (mut nominal, mut work) = (0, 0.0);
            for &(_, _, task) in &keys {
                nominal += v.graph.tasks()[task].kind.nominal_threads();
                work += v.cost1[task];
            }
            self.ready_nominal = self.ready_nominal.saturating_sub(nominal);
            self.ready_work_ms = (self.ready_work_ms - work).max(0.0);
        }
        // Every task not yet finished, running ones included, leaves the backlog.
        self.backlog_ms = (self.backlog_ms - state.backlog_left_ms).max(0.0);
        for k in &keys {
            self.unready(state.flow, k);
        }
        self.flow_job_left(state.flow);
        self.jobs_in_system = self.jobs_in_system.saturating_sub(1);
        self.unhold(state.variant);
        true
    }

    fn added_mut(&mut self, variant: usize) -> Option<&mut Added> {
        let slot = variant.checked_sub(self.variants.len())?;
        self.added.get_mut(slot).and_then(Option::as_mut)
    }

    /// A job holding added variant `variant` is gone: drops the variant if nothing else
    /// holds it.
    fn unhold(&mut self, variant: usize) {
        let Some(a) = self.added_mut(variant) else {
            return;
        };
        a.jobs = a.jobs.saturating_sub(1);
        if a.jobs > 0 || a.claims > 0 {
            return;
        }
        let slot = variant - self.variants.len();
        if let Some(a) = self.added[slot].take() {
            self.by_graph.remove(&Arc::as_ptr(&a.variant.graph).addr());
        }
        self.free_slots.push(slot);
    }

    fn view<'b>(&self, now_ms: f64, head: Option<&'b ReadyTask>) -> LoadView<'b> {
        LoadView {
            now_ms,
            capacity: self.capacity,
            busy: self.busy,
            running: self.running,
            head,
            ready_len: self.ready_len,
            ready_nominal: self.ready_nominal,
            ready_work_ms: self.ready_work_ms,
            backlog_ms: self.backlog_ms,
            jobs_in_system: self.jobs_in_system,
        }
    }

    fn push_ready(&mut self, job: usize, task: usize, variant: usize, flow: u64) {
        let Some(v) = self.variant(variant) else {
            return;
        };
        let prio = (v.priority[task] * 1000.0).round().max(0.0) as u64;
        let (nominal, work) = (v.graph.tasks()[task].kind.nominal_threads(), v.cost1[task]);
        let vtime = self.vtime;
        let f = self.flows.entry(flow).or_default();
        let joins = f.ready.is_empty();
        if !f.ready.insert((job, std::cmp::Reverse(prio), task)) {
            return;
        }
        if joins {
            // SFQ: a flow with nothing queued starts at the current virtual time.
            f.tag = f.finish.max(vtime);
            self.order.insert((f.tag.to_bits(), flow));
        }
        self.ready_len += 1;
        self.ready_nominal += nominal;
        self.ready_work_ms += work;
    }

    /// Takes `key` off flow `flow`'s ready tasks (not charging the flow).
    fn unready(&mut self, flow: u64, key: &Key) {
        let Some(f) = self.flows.get_mut(&flow) else {
            return;
        };
        if !f.ready.remove(key) {
            return;
        }
        self.ready_len = self.ready_len.saturating_sub(1);
        if f.ready.is_empty() {
            self.order.remove(&(f.tag.to_bits(), flow));
            if f.jobs == 0 {
                self.flows.remove(&flow);
            }
        }
    }

    /// A task of flow `flow` costing `cost_ms` starts: the virtual time moves to the flow's
    /// tag and the flow's next task is tagged after this one's service.
    fn charge(&mut self, flow: u64, cost_ms: f64) {
        let Some(f) = self.flows.get_mut(&flow) else {
            return;
        };
        let queued = self.order.remove(&(f.tag.to_bits(), flow));
        self.vtime = self.vtime.max(f.tag);
        f.finish = f.tag + cost_ms.max(0.0);
        f.tag = f.finish.max(self.vtime);
        if queued {
            self.order.insert((f.tag.to_bits(), flow));
        }
    }

    /// A job of flow `flow` left the system.
    fn flow_job_left(&mut self, flow: u64) {
        if let Some(f) = self.flows.get_mut(&flow) {
            f.jobs = f.jobs.saturating_sub(1);
            if f.jobs == 0 && f.ready.is_empty() {
                self.flows.remove(&flow);
            }
        }
    }

    /// Job state, backlog and root tasks of a job released on `variant` (graph `g`).
    fn start_job(&mut self, job: usize, variant: usize, g: &crate::graph::TaskGraph, flow: u64) {
        let deps_left: Vec<usize> = g.tasks().iter().map(|t| t.deps.len()).collect();
        let work_ms = self.variant(variant).map_or(0.0, |v| v.work_ms);
        let state = JobState {
            variant,
            deps_left,
            tasks_left: g.tasks().len(),
            backlog_left_ms: work_ms,
            flow,
        };
        // A live job released again is replaced (as before); its added variant is let go.
        if let Some(old) = self.jobs.insert(job, state) {
            self.unhold(old.variant);
            self.flow_job_left(old.flow);
        }
        self.flows.entry(flow).or_default().jobs += 1;
        self.backlog_ms += work_ms;
        self.jobs_in_system += 1;
        for t in g.roots() {
            self.push_ready(job, t, variant, flow);
        }
    }

    /// Job `job` arrives now: the policy picks its variant and its root tasks become ready.
    /// Returns the variant index.
    pub fn release(&mut self, job: usize, now_ms: f64) -> usize {
        self.release_in(job, DEFAULT_FLOW, now_ms)
    }

    /// [`Self::release`] for a job of flow `flow` (a tenant; see
    /// [`Self::release_variant_in`]).
    pub fn release_in(&mut self, job: usize, flow: u64, now_ms: f64) -> usize {
        let variant = {
            let view = self.view(now_ms, None);
            let v = self.policy.variant(&view, &self.variants);
            v.min(self.variants.len().saturating_sub(1))
        };
        let g = Arc::clone(&self.variants[variant].graph);
        self.start_job(job, variant, &g, flow);
        variant
    }

    /// Caps the threads the running tasks of each flow other than [`DEFAULT_FLOW`] hold at
    /// once (a per-tenant thread quota); `None` lifts the cap. A flow at its cap is passed
    /// over (the next flow in fair order runs) until its tasks give threads back; a task is
    /// granted at most what its flow has left.
    pub fn set_flow_thread_cap(&mut self, cap: Option<usize>) {
        self.flow_cap = cap.map(|c| c.max(1));
    }

    /// Threads flow `flow` may still take, if capped.
    fn flow_room(&self, flow: u64) -> Option<usize> {
        let cap = self.flow_cap.filter(|_| flow != DEFAULT_FLOW)?;
        Some(cap.saturating_sub(self.flow_busy.get(&flow).copied().unwrap_or(0)))
    }

    /// Task `task` of `job`, started with `threads`, finished. Returns whether the job is done.
    pub fn complete(&mut self, job: usize, task: usize, threads: usize) -> bool {
        self.busy = self.busy.saturating_sub(threads);
        self.running = self.running.saturating_sub(1);
        if let Some(r) = self.running_jobs.get_mut(&job) {
            r.tasks = r.tasks.saturating_sub(1);
            let flow = r.flow;
            if r.tasks == 0 {
                self.running_jobs.remove(&job);
            }
            if let Some(b) = self.flow_busy.get_mut(&flow) {
                *b = b.saturating_sub(threads);
                if *b == 0 {
                    self.flow_busy.remove(&flow);
                }
            }
        }
        let Some((variant, flow)) = self.jobs.get(&job).map(|s| (s.variant, s.flow)) else {
            return false;
        };
        let Some(v) = self.variant(variant) else {
            return false;
        };
        let (graph, cost) = (Arc::clone(&v.graph), v.cost1[task]);
        self.backlog_ms = (self.backlog_ms - cost).max(0.0);
        let Some(state) = self.jobs.get_mut(&job) else {
            return false;
        };
        state.backlog_left_ms -= cost;
        state.tasks_left = state.tasks_left.saturating_sub(1);
        let mut newly = Vec::new();
        for &s in &graph.tasks()[task].succs {
            state.deps_left[s] = state.deps_left[s].saturating_sub(1);
            if state.deps_left[s] == 0 {
                newly.push(s);
            }
        }
        let done = state.tasks_left == 0;
        if done {
            self.jobs.remove(&job);
            self.jobs_in_system = self.jobs_in_system.saturating_sub(1);
            self.unhold(variant);
            self.flow_job_left(flow);
        }
        for s in newly {
            self.push_ready(job, s, variant, flow);
        }
        done
    }

    /// Starts what the policy allows now, in list order; stops at the first task that has to
    /// wait (strict list scheduling, as in the paper).
    pub fn dispatch(&mut self, now_ms: f64) -> Vec<Dispatch> {
        let mut out = Vec::new();
        // The first flow in fair order with threads left under its cap serves next.
        while let Some(&entry) = self
            .order
            .iter()
            .find(|(_, f)| self.flow_room(*f).is_none_or(|room| room > 0))
        {
            let flow = entry.1;
            let Some(&key) = self.flows.get(&flow).and_then(|f| f.ready.first()) else {
                // Not reachable (a flow leaves `order` with its last ready task); kept safe.
                self.order.remove(&entry);
                continue;
            };
            let (job, _, task) = key;
            let Some(variant) = self.jobs.get(&job).map(|s| s.variant) else {
                self.unready(flow, &key);
                continue;
            };
            let Some(v) = lookup(&self.variants, &self.added, variant) else {
                self.unready(flow, &key);
                continue;
            };
            let t = &v.graph.tasks()[task];
            let head = ReadyTask {
                job,
                task,
                kind: t.kind,
                nq: t.nq,
                cost1_ms: v.cost1[task],
            };
            let view = self.view(now_ms, Some(&head));
            let Some(threads) = self.policy.threads(&view, v) else {
                break;
            };
            let mut threads = threads.max(1);
            if let Some(room) = self.flow_room(flow) {
                threads = threads.min(room.max(1));
            }
            if self.busy + threads > self.capacity {
                break;
            }
            self.running_jobs
                .entry(job)
                .or_insert(Running { flow, tasks: 0 })
                .tasks += 1;
            *self.flow_busy.entry(flow).or_insert(0) += threads;
            let (nominal, cost) = (t.kind.nominal_threads(), v.cost1[task]);
            self.charge(flow, cost);
            self.unready(flow, &key);
            self.ready_nominal = self.ready_nominal.saturating_sub(nominal);
            self.ready_work_ms = (self.ready_work_ms - cost).max(0.0);
            self.busy += threads;
            self.running += 1;
            out.push(Dispatch { job, task, threads });
        }
        out
    }
}
