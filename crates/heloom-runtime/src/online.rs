//! The online executor: a long-running service for HE task graphs that arrive at any time,
//! each job with its own graph, its own evaluator (its tenant's evaluation keys) and inputs.
//!
//! The machinery is [`crate::exec`]'s: one scheduler thread drives the list [`Scheduler`]
//! (earlier job first, then critical-path priority, threads from the policy, the sum of running
//! budgets within the capacity) and `capacity` lane threads run tasks, each with the budget its
//! policy granted, the extra threads coming from the shared pool. What differs:
//!
//! - jobs are submitted, cancelled and shut down from any thread; everything reaches the
//!   scheduler thread as a message on one channel, so it sleeps in `recv` when idle and owns
//!   the scheduler and every job's values without locking them;
//! - each job's graph is registered with the scheduler as a variant while the job lives
//!   ([`Scheduler::add_variant`]), so nothing grows with the number of jobs run;
//! - a task's error or panic fails its job only; `done` and `progress` (user code) run on the
//!   scheduler thread with no lock held, and a panic in them is caught too.
//!
//! Job ids increase with submission and the scheduler runs earlier jobs first. Jobs naming a
//! flow ([`OnlineJob::flow`], a service's tenant) share the threads fairly between flows
//! instead, task by task (start-time fair queueing, see [`crate::scheduler`]): a tenant that
//! floods the executor delays another tenant's job by at most the tasks already running, not
//! by its whole backlog.

use crate::cost::CostModel;
use crate::graph::{GraphError, NodeId, TaskGraph};
use crate::policy::{policy_by_name, POLICY_NAMES};
use crate::scheduler::Scheduler;
use heloom_ckks::{Ciphertext, Evaluator, Threads};
use heloom_math::Word;
use std::any::Any;
use std::collections::HashMap;
use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{mpsc, Arc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::Instant;

/// Configuration of an [`OnlineExecutor`].
#[derive(Clone)]
pub struct OnlineConfig {
    /// Threads for HE tasks (at least 1): the lane threads, and the most threads that compute
    /// at once.
    pub capacity: usize,
    /// Thread policy, one of [`POLICY_NAMES`] (`"heloom"` with [`OnlineConfig::new`]).
    pub policy: String,
    /// Cost model behind the policy and the task priorities.
    pub model: Arc<dyn CostModel>,
    /// Most threads the tasks of one flow ([`OnlineJob::flow`]) hold at once: a per-tenant
    /// thread quota (`None`: no cap; jobs without a flow are never capped).
    pub flow_threads: Option<usize>,
}

impl OnlineConfig {
    /// `capacity` threads under the `heloom` policy.
    pub fn new(capacity: usize, model: Arc<dyn CostModel>) -> Self {
        Self {
            capacity,
            policy: "heloom".to_string(),
            model,
            flow_threads: None,
        }
    }
}

impl fmt::Debug for OnlineConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OnlineConfig")
            .field("capacity", &self.capacity)
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

/// How a job ends: its outputs in `graph.outputs()` order, or its error.
pub type JobResult<W> = Result<Vec<Ciphertext<W>>, GraphError>;

/// A job's `done` callback.
pub type DoneFn<W> = Box<dyn FnOnce(JobResult<W>) + Send>;

/// A job's `progress` callback: (tasks done, tasks total).
pub type ProgressFn = Box<dyn Fn(usize, usize) + Send>;

/// One job for an [`OnlineExecutor`].
pub struct OnlineJob<W: Word> {
    /// The graph to run.
    pub graph: Arc<TaskGraph>,
    /// The evaluator its tasks run on (the tenant's evaluation keys); each task gets a copy
    /// with its thread budget.
    pub evaluator: Evaluator<W>,
    /// Input ciphertexts, in the graph's input order.
    pub inputs: Vec<Arc<Ciphertext<W>>>,
    /// Called with (tasks done, tasks total) on the scheduler thread after each task; keep it
    /// short, it delays scheduling.
    pub progress: Option<ProgressFn>,
    /// Fair-queueing flow (a tenant): flows share the threads fairly, task by task; jobs
    /// without one share one flow, in submission order.
    pub flow: Option<String>,
    /// Called exactly once, on the scheduler thread: the outputs in `graph.outputs()` order,
    /// or the job's error ([`GraphError::Cancelled`] or [`GraphError::ShutDown`] when it was
    /// stopped). Not called when `submit` refuses the job.
    pub done: DoneFn<W>,
}

impl<W: Word> OnlineJob<W> {
    /// A job without a progress callback.
    pub fn new(
        graph: Arc<TaskGraph>,
        evaluator: Evaluator<W>,
        inputs: Vec<Arc<Ciphertext<W>>>,
        done: impl FnOnce(JobResult<W>) + Send + 'static,
    ) -> Self {
        Self {
            graph,
            evaluator,
            inputs,
            progress: None,
            flow: None,
            done: Box::new(done),
        }
    }

    /// The same job with a progress callback.
    pub fn with_progress(mut self, progress: impl Fn(usize, usize) + Send + 'static) -> Self {
        self.progress = Some(Box::new(progress));
        self
    }

    /// The same job in fair-queueing flow `flow` (e.g. its tenant).
    pub fn in_flow(mut self, flow: impl Into<String>) -> Self {
        self.flow = Some(flow.into());
        self
    }
}

/// A snapshot of an [`OnlineExecutor`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OnlineStats {
    /// Jobs accepted and not finished (waiting or running).
    pub jobs_queued: usize,
    /// Tasks running on lanes.
    pub tasks_running: usize,
    /// Threads granted to running tasks.
    pub busy_threads: usize,
    /// Capacity, threads.
    pub capacity: usize,
    /// Jobs that ended with their outputs.
    pub jobs_completed: u64,
    /// Jobs that ended with an error other than a cancellation.
    pub jobs_failed: u64,
    /// Jobs cancelled, or stopped by a shutdown.
    pub jobs_cancelled: u64,
    /// Tasks that ran to the end (successfully or not).
    pub tasks_run: u64,
}

/// Runs [`OnlineJob`]s as they arrive. `Send + Sync`: share it (e.g. in an `Arc`) between
/// the threads that submit. Dropping it, or [`OnlineExecutor::shutdown`], stops every job
/// left (their `done` gets [`GraphError::ShutDown`] once their running tasks end) and joins
/// the threads.
pub struct OnlineExecutor<W: Word> {
    shared: Arc<Mutex<Registry<W>>>,
    thread: Option<JoinHandle<()>>,
}

impl<W: Word> fmt::Debug for OnlineExecutor<W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OnlineExecutor")
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

/// What submitters and the scheduler thread share.
struct Registry<W: Word> {
    /// To the scheduler thread; `None` once shut down.
    tx: Option<mpsc::Sender<Msg<W>>>,
    next_id: u64,
    /// Jobs accepted and not finished, with whether a cancel was asked.
    live: HashMap<u64, bool>,
    /// Counters and the last published load (`jobs_queued` is `live.len()`).
    stats: OnlineStats,
}

fn lock<W: Word>(m: &Mutex<Registry<W>>) -> MutexGuard<'_, Registry<W>> {
    // No user code runs under this lock, so poisoning means nothing is half-updated.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

enum Msg<W: Word> {
    Submit(u64, OnlineJob<W>),
    Cancel(u64),
    Finished(Finished<W>),
    Shutdown,
}

/// A task handed to a lane.
struct LaneTask<W: Word> {
    job: usize,
    task: usize,
    threads: usize,
    graph: Arc<TaskGraph>,
    evaluator: Evaluator<W>,
    operands: Vec<(NodeId, Arc<Ciphertext<W>>)>,
}

/// A lane's report of a task.
struct Finished<W: Word> {
    lane: usize,
    job: usize,
    task: usize,
    threads: usize,
    out: Result<Ciphertext<W>, GraphError>,
}

impl<W: Word> OnlineExecutor<W> {
    /// Starts the scheduler thread and `config.capacity` lanes.
    pub fn start(config: OnlineConfig) -> Result<Self, GraphError> {
        let capacity = config.capacity;
        if capacity == 0 {
            return Err(GraphError::Invalid(
                "an online executor needs a capacity of at least 1 thread".into(),
            ));
        }
        let policy =
            policy_by_name(&config.policy, Arc::clone(&config.model)).ok_or_else(|| {
                GraphError::Invalid(format!(
                    "unknown policy '{}'; the policies are {}",
                    config.policy,
                    POLICY_NAMES.join(", ")
                ))
            })?;
        let mut sched = Scheduler::new(policy, config.model.as_ref(), Vec::new(), capacity);
        sched.set_flow_thread_cap(config.flow_threads);
        let (tx, rx) = mpsc::channel::<Msg<W>>();
        let mut lanes = Vec::with_capacity(capacity);
        let mut handles = Vec::with_capacity(capacity);
        for lane in 0..capacity {
            let (lane_tx, lane_rx) = mpsc::channel::<LaneTask<W>>();
            let report = tx.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("heloom-online-lane-{lane}"))
                .spawn(move || lane_loop(lane, lane_rx, report));
            match spawned {
                Ok(h) => {
                    lanes.push(lane_tx);
                    handles.push(h);
                }
                Err(e) => {
                    drop(lanes);
                    for h in handles {
                        let _ = h.join();
                    }
                    return Err(GraphError::Internal(format!(
                        "cannot start lane thread {lane}: {e}"
                    )));
                }
            }
        }
        let shared = Arc::new(Mutex::new(Registry {
            tx: Some(tx),
            next_id: 1,
            live: HashMap::new(),
            stats: OnlineStats {
                capacity,
                ..OnlineStats::default()
            },
        }));
        let core = Core {
            sched,
            model: config.model,
            shared: Arc::clone(&shared),
            lanes,
            handles,
            free: (0..capacity).rev().collect(),
            jobs: HashMap::new(),
            ids: HashMap::new(),
            flows: HashMap::new(),
            next_flow: crate::scheduler::DEFAULT_FLOW + 1,
            next_job: 0,
            t0: Instant::now(),
            stopping: false,
            tasks_run: 0,
            calls: Vec::new(),
        };
        let thread = std::thread::Builder::new()
            .name("heloom-online-scheduler".into())
            .spawn(move || core.run(rx))
            // The unstarted closure is dropped with the lane senders: the lanes end.
            .map_err(|e| GraphError::Internal(format!("cannot start the scheduler thread: {e}")))?;
        Ok(Self {
            shared,
            thread: Some(thread),
        })
    }

    /// Accepts a job and returns its id (ids increase with submission). The inputs are
    /// checked against the graph first (count, level, scale, size), and the graph and inputs
    /// against the evaluator's parameters; a job that does not fit, or one submitted after
    /// shutdown, is refused with the error and dropped without its `done` being called.
    pub fn submit(&self, job: OnlineJob<W>) -> Result<u64, GraphError> {
        validate(&job)?;
        let refused = {
            let mut reg = lock(&self.shared);
            let id = reg.next_id;
            let msg = Msg::Submit(id, job);
            // Sent under the lock, so ids reach the scheduler thread in order and before any
            // cancel or shutdown that follows.
            let sent = match reg.tx.as_ref() {
                Some(tx) => tx.send(msg),
                None => Err(mpsc::SendError(msg)),
            };
            match sent {
                Ok(()) => {
                    reg.next_id += 1;
                    reg.live.insert(id, false);
                    return Ok(id);
                }
                Err(mpsc::SendError(msg)) => msg,
            }
        };
        // The job's closures are user code: dropped with the lock released.
        drop(refused);
        Err(GraphError::ShutDown)
    }

    /// Cancels job `id`, waiting or running: its tasks not yet started never start, and its
    /// `done` gets [`GraphError::Cancelled`] once its running tasks end. Returns false if the
    /// job is unknown or has finished.
    pub fn cancel(&self, id: u64) -> bool {
        let mut reg = lock(&self.shared);
        let Registry { tx, live, .. } = &mut *reg;
        let Some(asked) = live.get_mut(&id) else {
            return false;
        };
        if !*asked {
            *asked = true;
            if let Some(tx) = tx {
                // If the scheduler thread is gone, the flag alone makes the job end cancelled.
                let _ = tx.send(Msg::Cancel(id));
            }
        }
        true
    }

    /// Load and counters now.
    pub fn stats(&self) -> OnlineStats {
        let reg = lock(&self.shared);
        OnlineStats {
            jobs_queued: reg.live.len(),
            ..reg.stats
        }
    }

    /// Stops every job left (each `done` gets [`GraphError::ShutDown`], after the job's
    /// running tasks end) and joins the threads.
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        if let Some(tx) = lock(&self.shared).tx.take() {
            let _ = tx.send(Msg::Shutdown);
        }
        if let Some(h) = self.thread.take() {
            // Dropped from a callback on the scheduler thread itself: it ends on its own
            // after the shutdown message; joining would deadlock.
            if h.thread().id() != std::thread::current().id() {
                let _ = h.join();
            }
        }
    }
}

impl<W: Word> Drop for OnlineExecutor<W> {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Checks a job before it is accepted.
fn validate<W: Word>(job: &OnlineJob<W>) -> Result<(), GraphError> {
    let g = &job.graph;
    g.check_inputs(job.inputs.iter().map(|c| (c.level(), c.scale())))?;
    let ctx = job.evaluator.context();
    if g.moduli() != ctx.params().moduli() {
        return Err(GraphError::Invalid(format!(
            "graph '{}' was recorded for another modulus chain than the evaluator's parameters",
            g.name()
        )));
    }
    for (i, (c, &node)) in job.inputs.iter().zip(g.input_nodes()).enumerate() {
        if c.fingerprint() != ctx.fingerprint() {
            return Err(GraphError::Invalid(format!(
                "input {i} was encrypted under other parameters than the evaluator's"
            )));
        }
        let want = g.nodes().get(node).map_or(2, |n| n.size);
        if c.size() != want {
            return Err(GraphError::Invalid(format!(
                "input {i} has {} polynomials; graph '{}' takes {want}",
                c.size(),
                g.name()
            )));
        }
    }
    Ok(())
}

/// A lane: runs the tasks it is handed, one at a time, and reports each.
fn lane_loop<W: Word>(lane: usize, rx: mpsc::Receiver<LaneTask<W>>, report: mpsc::Sender<Msg<W>>) {
    for t in rx {
        let out = guarded(
            || format!("task {} of graph '{}'", t.task, t.graph.name()),
            || {
                let ev = t.evaluator.with_threads(Threads::new(t.threads));
                let fetch = |node: NodeId| {
                    t.operands
                        .iter()
                        .find(|(id, _)| *id == node)
                        .map(|(_, c)| Arc::clone(c))
                };
                t.graph.run_task(t.task, &ev, &fetch)
            },
        );
        let msg = Msg::Finished(Finished {
            lane,
            job: t.job,
            task: t.task,
            threads: t.threads,
            out,
        });
        // Operands go before the report, so the scheduler thread may hold the last copy.
        drop(t);
        if report.send(msg).is_err() {
            break;
        }
    }
}

/// Runs `f`, turning a panic into [`GraphError::Internal`] naming `what`.
fn guarded<T>(
    what: impl FnOnce() -> String,
    f: impl FnOnce() -> Result<T, GraphError>,
) -> Result<T, GraphError> {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|p| {
        Err(GraphError::Internal(format!(
            "{} panicked: {}",
            what(),
            panic_message(p.as_ref())
        )))
    })
}

fn panic_message(p: &(dyn Any + Send)) -> &str {
    p.downcast_ref::<&str>()
        .copied()
        .or_else(|| p.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("no message")
}

/// A job on the scheduler thread.
struct JobRun<W: Word> {
    id: u64,
    graph: Arc<TaskGraph>,
    evaluator: Evaluator<W>,
    /// Job inputs and task outputs a later task (or the result) still needs.
    values: Vec<Option<Arc<Ciphertext<W>>>>,
    /// Per task: successors that have not run yet (`usize::MAX`: a graph output, kept).
    uses_left: Vec<usize>,
    progress: Option<ProgressFn>,
    done: DoneFn<W>,
    /// Its named flow, once counted in `Core::flows`.
    flow: Option<String>,
    tasks_done: usize,
    /// Tasks on lanes.
    running: usize,
    /// Why the job stops (failed, cancelled, shut down): no task starts any more, and it ends
    /// with this error once `running` is 0.
    stop: Option<GraphError>,
}

/// Most messages the scheduler thread handles before it dispatches.
const MAX_BATCH: usize = 256;

/// A `done` call waiting for the end of a batch.
type DoneCall<W> = (DoneFn<W>, JobResult<W>);

/// The scheduler thread's state.
struct Core<W: Word> {
    sched: Scheduler,
    model: Arc<dyn CostModel>,
    shared: Arc<Mutex<Registry<W>>>,
    lanes: Vec<mpsc::Sender<LaneTask<W>>>,
    handles: Vec<JoinHandle<()>>,
    free: Vec<usize>,
    /// By scheduler job index (dense, in submission order).
    jobs: HashMap<usize, JobRun<W>>,
    /// Job id to scheduler job index.
    ids: HashMap<u64, usize>,
    /// Scheduler flow ids of the named flows with live jobs, with their job counts.
    flows: HashMap<String, (u64, usize)>,
    next_flow: u64,
    next_job: usize,
    t0: Instant,
    stopping: bool,
    tasks_run: u64,
    /// `done` calls waiting for the end of the current batch of messages.
    calls: Vec<DoneCall<W>>,
}

impl<W: Word> Core<W> {
    fn run(mut self, rx: mpsc::Receiver<Msg<W>>) {
        // Lanes hold senders too, so `recv` only fails if everything else is gone.
        while let Ok(first) = rx.recv() {
            self.handle(first);
            // Bounded, so a flood of submissions cannot hold back dispatching.
            for _ in 1..MAX_BATCH {
                let Ok(m) = rx.try_recv() else {
                    break;
                };
                self.handle(m);
            }
            self.dispatch();
            self.publish();
            // Tasks are started and the stats are current before user code runs.
            for (done, result) in self.calls.drain(..) {
                let _ = guarded(
                    || "a job's done callback".to_string(),
                    || {
                        done(result);
                        Ok(())
                    },
                );
            }
            if self.stopping && self.jobs.is_empty() {
                break;
            }
        }
        // Lanes end when their channel closes; none has a task (no job is left).
        self.lanes.clear();
        for h in self.handles.drain(..) {
            let _ = h.join();
        }
    }

    fn now_ms(&self) -> f64 {
        self.t0.elapsed().as_secs_f64() * 1e3
    }

    fn handle(&mut self, msg: Msg<W>) {
        match msg {
            Msg::Submit(id, job) => self.admit(id, job),
            Msg::Cancel(id) => {
                if let Some(&j) = self.ids.get(&id) {
                    self.stop_job(j, GraphError::Cancelled);
                }
            }
            Msg::Finished(f) => self.finished(f),
            Msg::Shutdown => {
                self.stopping = true;
                let all: Vec<usize> = self.jobs.keys().copied().collect();
                for j in all {
                    self.stop_job(j, GraphError::ShutDown);
                }
            }
        }
    }

    fn admit(&mut self, id: u64, job: OnlineJob<W>) {
        let OnlineJob {
            graph,
            evaluator,
            inputs,
            progress,
            flow,
            done,
        } = job;
        let j = self.next_job;
        self.next_job += 1;
        let mut values: Vec<Option<Arc<Ciphertext<W>>>> = vec![None; graph.nodes().len()];
        for (&node, input) in graph.input_nodes().iter().zip(inputs) {
            if let Some(slot) = values.get_mut(node) {
                *slot = Some(input);
            }
        }
        let mut uses_left: Vec<usize> = graph.tasks().iter().map(|t| t.succs.len()).collect();
        for &o in graph.outputs() {
            if let Some((t, true)) = graph.locate(o) {
                uses_left[t] = usize::MAX;
            }
        }
        let run = JobRun {
            id,
            graph: Arc::clone(&graph),
            evaluator,
            values,
            uses_left,
            progress,
            done,
            flow: None,
            tasks_done: 0,
            running: 0,
            stop: None,
        };
        self.jobs.insert(j, run);
        self.ids.insert(id, j);
        if self.stopping {
            // Not reachable (submit sends before shutdown does), but never run one then.
            self.stop_job(j, GraphError::ShutDown);
            return;
        }
        if graph.tasks().is_empty() {
            let result = self.outputs(j);
            self.finish(j, result);
            return;
        }
        let v = self.sched.add_variant(graph, self.model.as_ref());
        let now = self.now_ms();
        let flow = match flow {
            None => crate::scheduler::DEFAULT_FLOW,
            Some(name) => {
                let next = &mut self.next_flow;
                let entry = self.flows.entry(name.clone()).or_insert_with(|| {
                    *next += 1;
                    (*next - 1, 0)
                });
                entry.1 += 1;
                let id = entry.0;
                if let Some(run) = self.jobs.get_mut(&j) {
                    run.flow = Some(name);
                }
                id
            }
        };
        if !self.sched.release_variant_in(j, v, flow, now) {
            let e = GraphError::Internal("the scheduler lost a variant it had just added".into());
            self.finish(j, Err(e));
        }
    }

    /// Stops job `j` with `why` (unless it is stopping already): its ready tasks are dropped,
    /// and it ends once its running tasks do.
    fn stop_job(&mut self, j: usize, why: GraphError) {
        let Some(run) = self.jobs.get_mut(&j) else {
            return;
        };
        if run.stop.is_none() {
            run.stop = Some(why);
            self.sched.abort(j);
        }
        if run.running == 0 {
            let e = run.stop.take().unwrap_or(GraphError::Cancelled);
            self.finish(j, Err(e));
        }
    }

    fn finished(&mut self, f: Finished<W>) {
        self.free.push(f.lane);
        self.tasks_run += 1;
        let job_done = self.sched.complete(f.job, f.task, f.threads);
        let Some(run) = self.jobs.get_mut(&f.job) else {
            return;
        };
        run.running = run.running.saturating_sub(1);
        if run.stop.is_some() {
            if run.running == 0 {
                self.stop_job(f.job, GraphError::Cancelled);
            }
            return;
        }
        let out = match f.out {
            Ok(c) => c,
            Err(e) => {
                self.stop_job(f.job, e);
                return;
            }
        };
        let graph = Arc::clone(&run.graph);
        let Some(t) = graph.tasks().get(f.task) else {
            let e = GraphError::Internal(format!("no task {} in the job's graph", f.task));
            self.stop_job(f.job, e);
            return;
        };
        run.values[t.output] = Some(Arc::new(out));
        for &d in &t.deps {
            if run.uses_left[d] == usize::MAX {
                continue;
            }
            run.uses_left[d] = run.uses_left[d].saturating_sub(1);
            if run.uses_left[d] == 0 {
                run.values[graph.tasks()[d].output] = None;
            }
        }
        run.tasks_done += 1;
        if let Some(p) = &run.progress {
            let (n, total) = (run.tasks_done, graph.tasks().len());
            let _ = guarded(
                || "a job's progress callback".to_string(),
                || {
                    p(n, total);
                    Ok(())
                },
            );
        }
        if job_done {
            let result = self.outputs(f.job);
            self.finish(f.job, result);
        }
    }

    /// Job `j`'s outputs, in the graph's order; its values are released.
    fn outputs(&mut self, j: usize) -> JobResult<W> {
        let Some(run) = self.jobs.get_mut(&j) else {
            return Err(GraphError::Internal(format!("job {j} vanished")));
        };
        let shared = run
            .graph
            .outputs()
            .iter()
            .map(|&o| {
                run.values.get(o).cloned().flatten().ok_or_else(|| {
                    GraphError::Internal(format!("output node {o} was not computed"))
                })
            })
            .collect::<Result<Vec<_>, _>>();
        // Dropped first, so each output is moved out rather than copied.
        run.values = Vec::new();
        Ok(shared?.into_iter().map(Arc::unwrap_or_clone).collect())
    }

    /// Ends job `j` with `result`: counted, its `done` queued for the end of the batch.
    fn finish(&mut self, j: usize, result: JobResult<W>) {
        let Some(run) = self.jobs.remove(&j) else {
            return;
        };
        self.ids.remove(&run.id);
        if let Some(name) = &run.flow {
            if let Some(entry) = self.flows.get_mut(name) {
                entry.1 = entry.1.saturating_sub(1);
                if entry.1 == 0 {
                    self.flows.remove(name);
                }
            }
        }
        let busy = self.sched.busy();
        let running = self.lanes.len().saturating_sub(self.free.len());
        let mut reg = lock(&self.shared);
        // A cancel that returned true promises a cancelled ending, even if the job got to
        // the end before the message arrived.
        let result = match reg.live.remove(&run.id) {
            Some(true) => Err(GraphError::Cancelled),
            _ => result,
        };
        match &result {
            Ok(_) => reg.stats.jobs_completed += 1,
            Err(e) if e.is_cancellation() => reg.stats.jobs_cancelled += 1,
            Err(_) => reg.stats.jobs_failed += 1,
        }
        reg.stats.busy_threads = busy;
        reg.stats.tasks_running = running;
        reg.stats.tasks_run = self.tasks_run;
        drop(reg);
        self.calls.push((run.done, result));
    }

    /// Starts what the scheduler allows now.
    fn dispatch(&mut self) {
        let now = self.now_ms();
        let mut failed: Vec<(usize, GraphError)> = Vec::new();
        for d in self.sched.dispatch(now) {
            let Some(run) = self.jobs.get_mut(&d.job) else {
                self.sched.complete(d.job, d.task, d.threads);
                continue;
            };
            let Some(task) = run.graph.tasks().get(d.task) else {
                self.sched.complete(d.job, d.task, d.threads);
                failed.push((d.job, GraphError::Internal(format!("no task {}", d.task))));
                continue;
            };
            let mut operands: Vec<(NodeId, Arc<Ciphertext<W>>)> = Vec::new();
            for &node in &task.nodes {
                for o in run.graph.nodes()[node].op.operands() {
                    if let Some(Some(c)) = run.values.get(o) {
                        if !operands.iter().any(|(id, _)| *id == o) {
                            operands.push((o, Arc::clone(c)));
                        }
                    }
                }
            }
            // Running budgets sum to at most the capacity, one lane each: one is free.
            let Some(lane) = self.free.pop() else {
                self.sched.complete(d.job, d.task, d.threads);
                let e = GraphError::Internal(
                    "no free lane: the scheduler exceeded its capacity".into(),
                );
                failed.push((d.job, e));
                continue;
            };
            let msg = LaneTask {
                job: d.job,
                task: d.task,
                threads: d.threads,
                graph: Arc::clone(&run.graph),
                evaluator: run.evaluator.clone(),
                operands,
            };
            if self.lanes[lane].send(msg).is_err() {
                self.sched.complete(d.job, d.task, d.threads);
                failed.push((d.job, GraphError::Internal(format!("lane {lane} stopped"))));
                continue;
            }
            run.running += 1;
        }
        for (j, e) in failed {
            self.stop_job(j, e);
        }
    }

    /// Publishes the load for [`OnlineExecutor::stats`].
    fn publish(&self) {
        let running = self.lanes.len().saturating_sub(self.free.len());
        let mut reg = lock(&self.shared);
        reg.stats.busy_threads = self.sched.busy();
        reg.stats.tasks_running = running;
        reg.stats.tasks_run = self.tasks_run;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_becomes_an_internal_error() {
        let r: Result<(), GraphError> = guarded(|| "task 3".into(), || panic!("boom"));
        let msg = r.err().map(|e| e.to_string()).unwrap_or_default();
        assert_eq!(msg, "internal error: task 3 panicked: boom");
        let r: Result<u8, GraphError> = guarded(|| "x".into(), || Ok(7));
        assert_eq!(r.ok(), Some(7));
    }
}
