//! The worker: takes accepted jobs from the database, runs them through heloom-runtime's
//! online executor (seed 000's list scheduler with the `heloom` thread policy) and records
//! their results.
//!
//! - **Order.** [`State::start_next`] picks the next job fairly: among tenants with queued
//!   jobs, the one with the fewest jobs running (then the oldest waiting job), and within a
//!   tenant the highest priority, then the oldest. At most `max_in_flight` jobs are in the
//!   executor at once, plus express slots (half as many, at least one) that only a tenant
//!   running less than its fair share of the slots may take ([`State::start_next_below`]),
//!   so a light tenant's jobs beside a flooding one start at once. Inside the executor each tenant is a flow: tenants share the threads task by task
//!   (start-time fair queueing, `heloom_runtime::scheduler`), and within a tenant tasks run
//!   in job order, then critical-path order.
//! - **Keys.** Each job's evaluation keys come from a `heloom_store::Store` under the
//!   server's memory budget. A key set spills as the path of its stored object (the object
//!   file is the durable copy), so evicting one costs nothing and a later job loads it again.
//!   Keys of tenants not used lately are evicted first (the store's LRU order).
//! - **Results.** A finished job's outputs are written as one object (temporary file, sync,
//!   rename) before the job is marked done in the same database, so a crash between the two
//!   leaves the job queued to run again and never a `done` job without its result.

use crate::metrics::Metrics;
use crate::objects::{parse_ciphertexts, parse_keys, Contexts, KeySet};
use crate::{JobRecord, Result, ServeError, State};
use heloom_ckks::PolyBasis;
use heloom_ckks::{Ciphertext, Context, Evaluator};
use heloom_runtime::graph::GraphError;
use heloom_runtime::online::{OnlineConfig, OnlineExecutor, OnlineJob};
use heloom_runtime::{exp_graph, polynomial_graph, ExpVariant, TaskGraph};
use heloom_store::{Spill, Store, StoreConfig};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::time::Duration;

/// Threads storing results (each waits on disk syncs; more overlap those waits).
const FINISHERS: usize = 3;

/// Results stored together at most ([`Shared::gather`]), and their bytes.
const GROUP_JOBS: usize = 16;
const GROUP_BYTES: usize = 16 << 20;

/// How long a finished job's result may wait for others to be stored with it, at most.
const LINGER: Duration = Duration::from_millis(10);

/// What a job computes, as clients submit it (`POST /v1/jobs`).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobSpec {
    /// The tenant's key object (parameters and evaluation keys) the job runs with.
    pub key_id: String,
    /// The tenant's ciphertext objects, in the order of the task's inputs.
    pub inputs: Vec<String>,
    /// What to compute.
    pub task: Task,
    /// The highest level the result is kept at: ciphertexts above it are dropped to it (exact)
    /// before the result is stored, so it takes fewer bytes to store and to fetch. `0` keeps
    /// only the first prime `q0`: decryption then needs every slot value below `q0 / (2 *
    /// scale)` in magnitude. `None`: the result stays at the level the task leaves it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_level: Option<usize>,
}

/// What a job computes.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Task {
    /// e^x (degree-6 Maclaurin, seed 000's job) on one ciphertext, slot-wise.
    Exp {
        /// Graph shape: `paper-fig3`, `bsgs` or `horner` (default).
        #[serde(default)]
        variant: Option<String>,
    },
    /// A polynomial (coefficients lowest degree first) on one ciphertext, slot-wise.
    Polynomial {
        /// Coefficients, lowest degree first (at most 65: degree 64).
        coefficients: Vec<f64>,
    },
    /// A task graph the tenant uploaded (`heloom_runtime::TaskGraph`).
    Graph {
        /// The tenant's graph object.
        graph_id: String,
    },
    /// A plaintext `d x d` matrix times each input ciphertext, an encrypted `d`-vector packed
    /// in exactly `D` slots (`D` = `d` rounded up to a power of two;
    /// [`crate::apps::pack_vector`]): output `k` is `M x_k` in its first `d` slots, one level
    /// lower (generalized diagonals with baby-step giant-step; Galois keys for
    /// [`crate::apps::required_rotations`]).
    Matmul {
        /// The matrix, row by row (1 to [`crate::apps::MAX_MATMUL_SIDE`] rows of as many
        /// finite numbers).
        matrix: Vec<Vec<f64>>,
    },
    /// An encrypted `d x d` matrix times another (Jiang, Kim, Lauter, Song 2018): input 0 is
    /// `A`, input 1 is `B`, each packed row-major in exactly `D^2` slots (`D` = `d` rounded up
    /// to a power of two; [`crate::apps::pack_matrix`]); the output is `A B`
    /// ([`crate::apps::unpack_matrix`]), three levels lower (the relinearization key and
    /// Galois keys for [`crate::apps::required_rotations`]).
    MatmulEncrypted {
        /// The matrices' side `d` (1 to [`crate::apps::MAX_ENCRYPTED_MATMUL_SIDE`]).
        side: usize,
    },
    /// CryptoNets inference on MNIST with heloom's trained network (the logits of each image).
    Cryptonets {
        /// `batch`: 784 inputs, one per pixel, image `s` in slot `s` (five levels, the
        /// relinearization key); `single`: one input of 8192 slots per image (six levels,
        /// Galois keys for [`crate::apps::required_rotations`]).
        packing: heloom_apps::cryptonets::evaluate::Packing,
    },
}

impl Task {
    /// The job kind stored with the record.
    pub fn kind(&self) -> &'static str {
        match self {
            Task::Exp { .. } => "exp",
            Task::Polynomial { .. } => "polynomial",
            Task::Graph { .. } => "graph",
            Task::Matmul { .. } => "matmul",
            Task::MatmulEncrypted { .. } => "matmul_encrypted",
            Task::Cryptonets { .. } => "cryptonets",
        }
    }
}

/// A loaded key set as the key store holds it; it spills as the path of its object.
struct KeyEntry {
    set: KeySet,
    path: PathBuf,
}

impl Spill for KeyEntry {
    fn to_spill(&self) -> Vec<u8> {
        self.path.to_string_lossy().into_owned().into_bytes()
    }
    fn memory_bytes(&self) -> usize {
        self.set.keys.memory_bytes()
    }
}

/// How the worker is set up.
#[derive(Clone)]
pub struct WorkerConfig {
    /// The cost model the scheduler and its thread policy use.
    pub model: Arc<dyn heloom_runtime::CostModel>,
    /// Threads for HE tasks.
    pub threads: usize,
    /// Jobs in the executor at once (0: threads + 1, or threads / 2 + 1 with a memory budget).
    pub max_in_flight: usize,
    /// Most threads one tenant's tasks hold at once (`None`: no cap).
    pub tenant_threads: Option<usize>,
    /// Memory budget of the key store, bytes (`None`: unlimited).
    pub memory_budget: Option<u64>,
    /// Accept parameters below 128-bit security (tests only).
    pub allow_insecure: bool,
    /// Run jobs on the node servers of a Ray cluster instead of in this process.
    pub ray: Option<crate::remote::RayConfig>,
    /// The GPU that pulls jobs beside the CPU lanes ([`crate::gpu`]); ignored with `ray`.
    pub gpu: crate::gpu::GpuChoice,
}

/// Progress of the jobs in flight.
#[derive(Default)]
struct Live {
    progress: HashMap<i64, (usize, usize)>,
    exec_ids: HashMap<i64, u64>,
    /// Jobs on the GPU, with the flag that cancels them between tasks.
    on_gpu: HashMap<i64, Arc<AtomicBool>>,
}

pub(crate) struct Shared {
    state: Arc<State>,
    contexts: Arc<Contexts>,
    keys: Store<KeyEntry>,
    /// Taken (and shut down) when the worker stops.
    exec: Mutex<Option<OnlineExecutor<u64>>>,
    live: Mutex<Live>,
    in_flight: AtomicUsize,
    max_in_flight: usize,
    /// Jobs the executor has finished whose slot was released before the finisher stored
    /// their result (`release_slot`); `forget` does not release those again.
    released: Mutex<std::collections::HashSet<i64>>,
    wake: (Mutex<bool>, Condvar),
    stop: AtomicBool,
    metrics: Arc<Metrics>,
    allow_insecure: bool,
    /// The process's memory budget (`--memory-budget`), bytes.
    memory_budget: Option<u64>,
    /// The most memory one key set load has taken (its file and its parse), bytes: room
    /// kept free for the next load.
    largest_load: AtomicU64,
    /// Recent mean of a job's run time (start to end), ms, as f64 bits; 0 before the first.
    service_ms: AtomicU64,
    /// Waiters of jobs, woken as their job ends (the API's wait endpoint).
    pub(crate) ended: crate::waiters::Waiters,
    /// When the submission request of each job accepted since this start (and not started
    /// yet) arrived: the start latency metric.
    received: Mutex<HashMap<i64, std::time::Instant>>,
    /// Uploaded ciphertexts as parsed at upload, for the jobs that use them.
    pub(crate) inputs: crate::inputs::InputCache,
    /// With `--ray`: where jobs run instead of the executor.
    remote: Option<Arc<crate::remote::RemoteBackend>>,
    /// Jobs started and not yet ended, per tenant.
    running: Mutex<HashMap<String, usize>>,
    /// The GPU pulling jobs beside the CPU lanes, and what wakes it.
    gpu: std::sync::OnceLock<Arc<crate::gpu::GpuLane>>,
    gpu_wake: (Mutex<bool>, Condvar),
    /// Recent mean wall time of a job in the executor, ms (f64 bits; 0 before the first): what
    /// the GPU's thread weighs its own against before it takes a job.
    cpu_ms: AtomicU64,
    /// Whether the express slots' query ([`State::start_next_below`]) may find a job: set
    /// when jobs are accepted or a tenant drops below its fair share of the slots beside other
    /// tenants, cleared when the query finds none. Without it, one tenant keeping every slot
    /// busy cost two empty queries per job (at each job's end and at its result's storage).
    express_dirty: AtomicBool,
}

/// The running worker; dropping it stops the dispatcher (jobs in flight are left `running`
/// in the database and run again after a restart).
pub struct Worker {
    shared: Arc<Shared>,
    dispatcher: Option<std::thread::JoinHandle<()>>,
    gpu_thread: Option<std::thread::JoinHandle<()>>,
    finishers: Vec<std::thread::JoinHandle<()>>,
}

impl std::fmt::Debug for Worker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker")
            .field("in_flight", &self.shared.in_flight.load(Ordering::Relaxed))
            .finish()
    }
}

/// How a job left the executor (or a Ray node).
pub(crate) enum Outcome {
    /// Its outputs, serialized, with their content address when it is known already (a
    /// node server's result: the node hashed the bytes, the front checked their checksums).
    Done(Vec<u8>, Option<String>),
    /// Its outputs, serialized by the finisher (not on the executor's scheduler thread).
    Computed(Vec<heloom_ckks::Ciphertext<u64>>),
    /// It failed (or could not start): why.
    Failed(String),
    /// The server stopped under it: left as it is in the database, to run again.
    Interrupted,
}

/// A job's outcome on its way to the finisher thread.
pub(crate) type Finished = (JobRecord, u64, Outcome);

/// The bytes an outcome holds (what a group of results keeps in memory).
fn outcome_bytes(out: &Outcome) -> usize {
    match out {
        Outcome::Done(b, _) => b.len(),
        Outcome::Computed(cts) => cts.iter().map(|c| c.memory_bytes()).sum(),
        Outcome::Failed(_) | Outcome::Interrupted => 0,
    }
}

/// What a job needs to run ([`Shared::prepare`]), on the CPU or the GPU.
struct Prepared {
    spec: JobSpec,
    /// Held until the job ends (the key store keeps what is held).
    entry: Arc<KeyEntry>,
    keys: KeySet,
    ctx: Arc<Context<u64>>,
    /// The parameters' fingerprint.
    fp: u64,
    inputs: Vec<Arc<Ciphertext<u64>>>,
    graph: Arc<TaskGraph>,
}

impl Worker {
    /// Starts the worker on `state`: jobs left running by a previous process are queued again
    /// first.
    pub fn start(
        state: Arc<State>,
        contexts: Arc<Contexts>,
        metrics: Arc<Metrics>,
        config: &WorkerConfig,
    ) -> Result<Self> {
        state.recover()?;
        let remote = match &config.ray {
            Some(ray) => Some(crate::remote::RemoteBackend::start(
                Arc::clone(&state),
                Arc::clone(&contexts),
                Arc::clone(&config.model),
                config.allow_insecure,
                ray,
            )?),
            None => None,
        };
        let threads = config.threads.max(1);
        // The GPU pulls jobs here only; with Ray, the node servers use their own. A GPU named
        // by number (or the emulator) is opened now, so a missing one stops the start; `auto`
        // opens it on the GPU's thread (compiling the kernels takes seconds), the CPU lanes
        // serving meanwhile.
        let gpu_choice = if remote.is_some() {
            crate::gpu::GpuChoice::Off
        } else {
            config.gpu
        };
        let gpu = std::sync::OnceLock::new();
        if !matches!(
            gpu_choice,
            crate::gpu::GpuChoice::Off | crate::gpu::GpuChoice::Auto
        ) {
            let (lane, _) = crate::gpu::GpuLane::open(gpu_choice).map_err(ServeError::Gpu)?;
            if let Some(l) = lane {
                l.announce();
                let _ = gpu.set(Arc::new(l));
            }
        }
        let exec = OnlineExecutor::start(OnlineConfig {
            capacity: threads,
            policy: "heloom".into(),
            model: Arc::clone(&config.model),
            flow_threads: config.tenant_threads,
        })
        .map_err(|e| ServeError::InvalidRequest(format!("starting the executor: {e}")))?;
        let loader_contexts = Arc::clone(&contexts);
        let allow = config.allow_insecure;
        let keys = Store::new(
            StoreConfig {
                budget_bytes: config.memory_budget,
                dir: config.memory_budget.map(|_| state.dir().join("spill")),
                io_threads: 2,
                prefetch_depth: 0,
            },
            move |b: &[u8]| {
                let path = PathBuf::from(String::from_utf8_lossy(b).into_owned());
                let data = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
                let set = parse_keys(&data, &loader_contexts, allow).map_err(|e| e.to_string())?;
                Ok(KeyEntry { set, path })
            },
        )
        .map_err(|e| ServeError::InvalidRequest(format!("key store: {e}")))?;
        // Key sets of running jobs stay (and count): evicting one frees nothing until the job
        // ends.
        keys.set_prefer_unheld(true);
        if let Some(budget) = config.memory_budget {
            // Keys start with what the process leaves now; the dispatcher resizes it as the
            // rest of the process grows and shrinks (govern_memory).
            let _ = keys.set_budget_bytes(budget.saturating_sub(resident_bytes()).max(budget / 8));
        }
        let ended = crate::waiters::Waiters::default();
        let received = Mutex::new(HashMap::new());
        // Parsed inputs: a sixteenth of the memory (at most 1 GiB; 64 MiB where the OS does
        // not say), or of the memory budget (at most 64 MiB). Jobs queued behind a burst of
        // uploads then still find their inputs parsed; a miss reads and parses the file.
        let inputs = crate::inputs::InputCache::new(config.memory_budget.map_or_else(
            || heloom_pool::total_memory_bytes().map_or(64 << 20, |m| (m / 16).min(1 << 30)),
            |b| (b / 16).min(64 << 20),
        ) as usize);
        let shared = Arc::new(Shared {
            state,
            contexts,
            keys,
            exec: Mutex::new(Some(exec)),
            live: Mutex::new(Live::default()),
            in_flight: AtomicUsize::new(0),
            released: Mutex::new(std::collections::HashSet::new()),
            max_in_flight: if config.max_in_flight == 0 {
                default_in_flight(threads, config.memory_budget.is_some())
            } else {
                config.max_in_flight
            },
            wake: (Mutex::new(false), Condvar::new()),
            stop: AtomicBool::new(false),
            metrics,
            allow_insecure: config.allow_insecure,
            service_ms: AtomicU64::new(0),
            memory_budget: config.memory_budget,
            largest_load: AtomicU64::new(0),
            ended,
            received,
            inputs,
            remote,
            running: Mutex::new(HashMap::new()),
            express_dirty: AtomicBool::new(true),
            gpu,
            gpu_wake: (Mutex::new(false), Condvar::new()),
            cpu_ms: AtomicU64::new(0),
        });
        let (tx, rx) = mpsc::channel::<Finished>();
        let s = Arc::clone(&shared);
        let dispatcher = std::thread::Builder::new()
            .name("heloom-serve-dispatch".into())
            .spawn({
                let tx = tx.clone();
                move || s.dispatch_loop(tx)
            })
            .map_err(|e| ServeError::InvalidRequest(format!("starting the worker: {e}")))?;
        let gpu_thread = if shared.gpu.get().is_some() || gpu_choice == crate::gpu::GpuChoice::Auto
        {
            let s = Arc::clone(&shared);
            Some(
                std::thread::Builder::new()
                    .name("heloom-serve-gpu".into())
                    .spawn(move || {
                        let lane = match s.gpu.get() {
                            Some(l) => Arc::clone(l),
                            None => match crate::gpu::GpuLane::open(gpu_choice) {
                                Ok((Some(l), _)) => {
                                    l.announce();
                                    Arc::clone(s.gpu.get_or_init(|| Arc::new(l)))
                                }
                                Ok((None, why)) => {
                                    eprintln!(
                                        "heloom serve: no GPU ({}); jobs run on the CPU",
                                        why.unwrap_or_else(|| "none asked for".into())
                                    );
                                    return;
                                }
                                Err(e) => {
                                    eprintln!("heloom serve: {e}; jobs run on the CPU");
                                    return;
                                }
                            },
                        };
                        s.gpu_loop(&lane, tx)
                    })
                    .map_err(|e| {
                        ServeError::InvalidRequest(format!("starting the GPU's thread: {e}"))
                    })?,
            )
        } else {
            drop(tx);
            None
        };
        // Several finishers: storing a result waits on the disk twice (the file's sync and
        // its directory's), so one thread would leave the cores idle behind its syncs.
        let rx = Arc::new(Mutex::new(rx));
        let mut finishers = Vec::with_capacity(FINISHERS);
        for _ in 0..FINISHERS {
            let s = Arc::clone(&shared);
            let rx = Arc::clone(&rx);
            finishers.push(
                std::thread::Builder::new()
                    .name("heloom-serve-finish".into())
                    .spawn(move || s.finish_loop(&rx))
                    .map_err(|e| ServeError::InvalidRequest(format!("starting the worker: {e}")))?,
            );
        }
        Ok(Self {
            shared,
            dispatcher: Some(dispatcher),
            gpu_thread,
            finishers,
        })
    }

    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        self.shared.notify();
        if let Some(h) = self.dispatcher.take() {
            let _ = h.join();
        }
        // Its job in progress stops between two tasks and stays `running`, like the
        // executor's; the thread's end closes its way to the finishers.
        if let Some(h) = self.gpu_thread.take() {
            let _ = h.join();
        }
        if let Some(r) = &self.shared.remote {
            r.shutdown();
        }
        // Jobs still in the executor end with a shut-down error, which the finisher leaves
        // unrecorded: they stay `running` in the database and run again after a restart.
        let exec = self.shared.exec().take();
        if let Some(x) = exec {
            x.shutdown();
        }
        for h in self.finishers.drain(..) {
            let _ = h.join();
        }
    }
}

impl Shared {
    fn exec(&self) -> std::sync::MutexGuard<'_, Option<OnlineExecutor<u64>>> {
        self.exec.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Job `id` was accepted from a request that arrived at `at`: wakes the dispatcher.
    pub(crate) fn accepted(&self, id: i64, at: std::time::Instant) {
        {
            let mut r = self.received.lock().unwrap_or_else(|p| p.into_inner());
            // Bounded: entries leave as jobs start or end; a runaway map is dropped whole.
            if r.len() >= 1 << 20 {
                r.clear();
            }
            r.insert(id, at);
        }
        self.express_dirty.store(true, Ordering::SeqCst);
        self.notify();
    }

    /// A job of `tenant` started.
    fn tenant_started(&self, tenant: &str) {
        let mut r = self.running.lock().unwrap_or_else(|p| p.into_inner());
        *r.entry(tenant.to_string()).or_insert(0) += 1;
    }

    /// A job of `tenant` ended (or left the executor to run again later): a tenant now
    /// running less than its fair share of the slots beside other tenants may have queued jobs
    /// for an express slot. (Alone, it is below its share only when a regular slot is free.)
    fn tenant_ended(&self, tenant: &str) {
        let mut r = self.running.lock().unwrap_or_else(|p| p.into_inner());
        let left = match r.get_mut(tenant) {
            Some(n) if *n > 1 => {
                *n -= 1;
                *n
            }
            _ => 0,
        };
        if left == 0 {
            r.remove(tenant);
            self.express_dirty.store(true, Ordering::SeqCst);
        } else if r.len() >= 2 && left < fair_share(self.slots(), r.len()) {
            self.express_dirty.store(true, Ordering::SeqCst);
        }
    }

    /// The GPU's thread: whenever the GPU is idle it takes the next job from the queue, the
    /// same query as the dispatcher's (seed 001's pull model: a faster device pulls more).
    fn gpu_loop(self: Arc<Self>, lane: &crate::gpu::GpuLane, tx: mpsc::Sender<Finished>) {
        while !self.stop.load(Ordering::SeqCst) {
            // Results not yet stored are bounded as for the CPU lanes.
            let next = if self.finishing() <= 2 * self.max_in_flight + 2 && self.gpu_worth(lane) {
                self.state.start_next()
            } else {
                Ok(None)
            };
            match next {
                Ok(Some(rec)) => {
                    self.run_on_gpu(lane, rec, &tx);
                    continue;
                }
                Ok(None) => {}
                Err(e) => eprintln!("heloom serve: taking the next job for the GPU: {e}"),
            }
            sleep_until_woken(&self.gpu_wake);
        }
    }

    /// Whether the GPU should take the next job now ([`crate::gpu::worth_pulling`]).
    fn gpu_worth(&self, lane: &crate::gpu::GpuLane) -> bool {
        let (gpu, cpu) = (
            lane.mean_ms(),
            f64::from_bits(self.cpu_ms.load(Ordering::Relaxed)),
        );
        // The rule's own first case, here first so that a GPU at least as fast as the CPU
        // never pays for the count query.
        if gpu <= 0.0 || cpu <= 0.0 || gpu <= cpu {
            return true;
        }
        let queued = self.state.queued_jobs(None).unwrap_or(u64::MAX);
        crate::gpu::worth_pulling(
            gpu,
            cpu,
            self.max_in_flight,
            self.in_flight.load(Ordering::SeqCst),
            queued,
        )
    }

    /// Bookkeeping of a job some device took from the queue: its tenant's running count, its
    /// queue wait; when its submission arrived (for the start latency), or why it cannot start
    /// (its deadline passed).
    fn begin(&self, rec: &JobRecord) -> std::result::Result<Option<std::time::Instant>, String> {
        self.tenant_started(&rec.tenant);
        if rec.deadline_unix.is_some_and(|d| d < crate::unix_now()) {
            return Err("its deadline passed before it could start".into());
        }
        let wait = (crate::unix_now_ms() - rec.created_ms).max(0) as f64 / 1e3;
        self.metrics.started(&rec.tenant, wait);
        Ok(self
            .received
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&rec.id))
    }

    /// Runs a job the GPU took; one it cannot run goes to the CPU lanes.
    fn run_on_gpu(
        self: &Arc<Self>,
        lane: &crate::gpu::GpuLane,
        rec: JobRecord,
        tx: &mpsc::Sender<Finished>,
    ) {
        // Its end is not an executor slot's: the finisher must not free one for it.
        let ends = |me: &Self, id: i64| {
            me.released
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(id);
        };
        match self.begin(&rec) {
            Ok(received) => {
                if let Some(at) = received {
                    self.metrics.start_latency(at.elapsed().as_secs_f64());
                }
            }
            Err(msg) => {
                ends(self, rec.id);
                let _ = tx.send((rec, 0, Outcome::Failed(msg)));
                return;
            }
        }
        let p = match self.prepare(&rec) {
            Ok(p) => p,
            Err(msg) => {
                ends(self, rec.id);
                let _ = tx.send((rec, 0, Outcome::Failed(msg)));
                return;
            }
        };
        let id = rec.id;
        let cancel = Arc::new(AtomicBool::new(false));
        self.live
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .on_gpu
            .insert(id, Arc::clone(&cancel));
        let job = crate::gpu::GpuJob {
            tenant: &rec.tenant,
            key_id: &p.spec.key_id,
            ctx: &p.ctx,
            keys: &p.keys.keys,
            graph: &p.graph,
            inputs: &p.inputs,
            result_level: p.spec.result_level,
        };
        let progress = |done: usize, total: usize| {
            self.live
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .progress
                .insert(id, (done, total));
        };
        let stopped = || cancel.load(Ordering::SeqCst) || self.stop.load(Ordering::SeqCst);
        let ran = lane.run(&job, &progress, &stopped);
        self.live
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .on_gpu
            .remove(&id);
        let outcome = match ran {
            Ok(Some(cts)) => match lower(&p.ctx, cts, p.spec.result_level) {
                Ok(cts) => Outcome::Computed(cts),
                Err(e) => Outcome::Failed(e.to_string()),
            },
            // Cancelled: the record says so already; stopping: it runs again after a restart.
            Ok(None) if self.stop.load(Ordering::SeqCst) => Outcome::Interrupted,
            Ok(None) => Outcome::Failed("cancelled".into()),
            Err(msg) => {
                eprintln!(
                    "heloom serve: job {id} on the {}: {msg}; it runs on the CPU instead",
                    lane.name
                );
                self.in_flight.fetch_add(1, Ordering::SeqCst);
                let fp = p.fp;
                if let Err(msg) = self.submit(rec.clone(), p, tx.clone()) {
                    let _ = tx.send((rec, fp, Outcome::Failed(msg)));
                }
                return;
            }
        };
        ends(self, id);
        let _ = tx.send((rec, p.fp, outcome));
    }

    /// Wakes the dispatcher and the GPU's thread (a job was accepted or one ended).
    pub(crate) fn notify(&self) {
        for (lock, cv) in [&self.wake, &self.gpu_wake] {
            *lock.lock().unwrap_or_else(|p| p.into_inner()) = true;
            cv.notify_all();
        }
    }

    /// Progress of a job in flight: tasks done and total.
    pub(crate) fn progress(&self, id: i64) -> Option<(usize, usize)> {
        if let Some(r) = &self.remote {
            return r.progress(id);
        }
        self.live
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .progress
            .get(&id)
            .copied()
    }

    /// Stops a running job's tasks (its record was already marked cancelled).
    pub(crate) fn cancel(&self, id: i64) {
        if let Some(r) = &self.remote {
            return r.cancel(id);
        }
        let exec_id = {
            let live = self.live.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(flag) = live.on_gpu.get(&id) {
                flag.store(true, Ordering::SeqCst);
            }
            live.exec_ids.get(&id).copied()
        };
        if let Some(e) = exec_id {
            if let Some(x) = self.exec().as_ref() {
                x.cancel(e);
            }
        }
    }

    /// Predicted seconds until a job accepted now would end, with `queued` jobs (of every
    /// tenant) waiting: the queue drains `max_in_flight` jobs at a time at the recent mean
    /// run time. `None` before any job has run (no basis for a prediction).
    pub(crate) fn predicted_completion_s(&self, queued: u64) -> Option<f64> {
        let mean = f64::from_bits(self.service_ms.load(Ordering::Relaxed)) / 1e3;
        if mean <= 0.0 {
            return None;
        }
        let ahead = queued as f64 + self.in_flight.load(Ordering::Relaxed) as f64;
        Some((ahead / self.slots().max(1) as f64).floor() * mean + mean)
    }

    /// Executor and key-store gauges for `/metrics`.
    pub(crate) fn gauges(&self) -> crate::metrics::Gauges {
        let st = self.exec().as_ref().map(|x| x.stats()).unwrap_or_default();
        crate::metrics::Gauges {
            capacity: st.capacity,
            busy_threads: st.busy_threads,
            tasks_run: st.tasks_run,
            store_resident_bytes: self.keys.resident_bytes(),
            store_budget_bytes: self.keys.budget_bytes().unwrap_or(0),
            store: self.keys.stats(),
            result_memory_reads: self.state.result_memory_reads(),
            result_writes: self.state.result_writes(),
            extra: self
                .remote
                .as_ref()
                .map(|r| r.metrics_text())
                .or_else(|| self.gpu.get().map(|g| g.metrics_text()))
                .unwrap_or_default(),
            ..Default::default()
        }
    }

    /// Sizes the key store to what the rest of the process leaves of the memory budget: the
    /// budget is the whole server's (jobs' working memory, contexts, loads in progress, the
    /// allocator's retained pages), and keys get the remainder, at least an eighth of it.
    /// Linux only (the resident size comes from /proc); elsewhere keys get the whole budget.
    fn govern_memory(&self) {
        let Some(budget) = self.memory_budget else {
            return;
        };
        let rss = resident_bytes();
        if rss == 0 {
            return;
        }
        let others = rss.saturating_sub(self.keys.resident_bytes());
        // Room for the next key set load (its file bytes and its parse) stays free too.
        let load = self.largest_load.load(Ordering::Relaxed);
        let want = budget.saturating_sub(others + load).max(budget / 8);
        let now = self.keys.budget_bytes().unwrap_or(budget);
        // Small moves are noise: change it when it is off by more than 5% of the budget.
        if want.abs_diff(now) > budget / 20 {
            let _ = self.keys.set_budget_bytes(want);
        }
    }

    fn dispatch_loop(self: Arc<Self>, tx: mpsc::Sender<Finished>) {
        while !self.stop.load(Ordering::SeqCst) {
            self.govern_memory();
            let in_flight = self.in_flight.load(Ordering::SeqCst);
            let max_in_flight = self.slots();
            // Results not yet stored are bounded too (each holds its outputs in memory).
            let backlog_ok = self.finishing() <= 2 * max_in_flight + 2;
            let express_room = in_flight < max_in_flight + express_slots(max_in_flight);
            if express_room && max_in_flight > 0 && backlog_ok {
                let next = if in_flight < max_in_flight {
                    self.state.start_next()
                } else if self.express_dirty.swap(false, Ordering::SeqCst) {
                    let share = self.fair_slots(max_in_flight);
                    let next = self.state.start_next_below(share);
                    if !matches!(next, Ok(None)) {
                        // Found one (or failed): another idle tenant may be waiting too.
                        self.express_dirty.store(true, Ordering::SeqCst);
                    }
                    next
                } else {
                    Ok(None)
                };
                match next {
                    Ok(Some(rec)) => {
                        self.in_flight.fetch_add(1, Ordering::SeqCst);
                        let received = match self.begin(&rec) {
                            Ok(r) => r,
                            Err(msg) => {
                                let _ = tx.send((rec, 0, Outcome::Failed(msg)));
                                continue;
                            }
                        };
                        match self.start_job(rec.clone(), tx.clone()) {
                            Ok(()) => {
                                if let Some(at) = received {
                                    self.metrics.start_latency(at.elapsed().as_secs_f64());
                                }
                            }
                            Err(msg) => {
                                let _ = tx.send((rec, 0, Outcome::Failed(msg)));
                            }
                        }
                        continue;
                    }
                    Ok(None) => {}
                    Err(e) => eprintln!("heloom serve: taking the next job: {e}"),
                }
            }
            sleep_until_woken(&self.wake);
        }
    }

    /// A tenant's fair share of `slots` regular slots: the slots over the tenants running
    /// jobs, rounded up (a tenant with nothing running is always below it).
    fn fair_slots(&self, slots: usize) -> usize {
        let tenants = self.running.lock().unwrap_or_else(|p| p.into_inner()).len();
        fair_share(slots, tenants)
    }

    /// Jobs that may be in flight: `max_in_flight`, or with `--ray` what the node servers
    /// take (none while no node is up: jobs stay queued).
    fn slots(&self) -> usize {
        self.remote
            .as_ref()
            .map_or(self.max_in_flight, |r| r.capacity())
    }

    /// Whether jobs can run now (`/readyz`); with `--ray`, why not.
    pub(crate) fn ready(&self) -> std::result::Result<(), String> {
        self.remote.as_ref().map_or(Ok(()), |r| r.ready())
    }

    /// Starts a job: on a Ray node with `--ray`, else in the executor.
    fn start_job(
        self: &Arc<Self>,
        rec: JobRecord,
        tx: mpsc::Sender<Finished>,
    ) -> std::result::Result<(), String> {
        match &self.remote {
            Some(r) => r.launch(rec, tx),
            None => self.launch(rec, tx),
        }
    }

    /// Loads what the job needs and hands it to the executor.
    fn launch(
        self: &Arc<Self>,
        rec: JobRecord,
        tx: mpsc::Sender<Finished>,
    ) -> std::result::Result<(), String> {
        let p = self.prepare(&rec)?;
        self.submit(rec, p, tx)
    }

    /// What a job needs to run: its key set, inputs and graph.
    fn prepare(&self, rec: &JobRecord) -> std::result::Result<Prepared, String> {
        let spec: JobSpec = serde_json::from_str(&rec.spec)
            .map_err(|e| format!("the stored job description is unreadable: {e}"))?;
        // The job holds its key entry until it ends, so the key store (preferring values
        // nobody holds) keeps it and counts it in the budget meanwhile.
        let entry = self.key_set(&rec.tenant, &spec.key_id)?;
        let keys = entry.set.clone();
        let ctx = Arc::clone(&keys.ctx);
        let fp = ctx.params().fingerprint();
        let mut inputs = Vec::with_capacity(spec.inputs.len());
        for id in &spec.inputs {
            // Parsed at upload (and still stored: a deleted object leaves the cache too).
            if let Some(ct) = self
                .inputs
                .get(&rec.tenant, id)
                .filter(|c| c.fingerprint() == ctx.fingerprint())
            {
                inputs.push(ct);
                continue;
            }
            let data = self
                .state
                .read_object(&rec.tenant, id)
                .map_err(|e| e.to_string())?
                .ok_or_else(|| format!("input ciphertext {id} is not stored (deleted?)"))?;
            let mut cts = parse_ciphertexts(&data, &ctx).map_err(|e| e.to_string())?;
            if cts.len() != 1 {
                return Err(format!("input {id} is not one ciphertext"));
            }
            inputs.extend(cts.drain(..).map(Arc::new));
        }
        let graph = self.graph(rec, &spec, &inputs)?;
        Ok(Prepared {
            spec,
            entry,
            keys,
            ctx,
            fp,
            inputs,
            graph,
        })
    }

    /// Hands a prepared job to the executor.
    fn submit(
        self: &Arc<Self>,
        rec: JobRecord,
        p: Prepared,
        tx: mpsc::Sender<Finished>,
    ) -> std::result::Result<(), String> {
        let Prepared {
            spec,
            entry,
            keys,
            ctx,
            fp,
            inputs,
            graph,
        } = p;
        let evaluator = Evaluator::new(&ctx, Arc::clone(&keys.keys)).map_err(|e| e.to_string())?;
        let submitted = std::time::Instant::now();
        let me = Arc::clone(self);
        let id = rec.id;
        let done_rec = rec.clone();
        let progress_shared = Arc::clone(self);
        let result_level = spec.result_level;
        let job = OnlineJob {
            graph,
            evaluator,
            inputs,
            flow: Some(rec.tenant.clone()),
            progress: Some(Box::new(move |done, total| {
                progress_shared
                    .live
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .progress
                    .insert(id, (done, total));
            })),
            done: Box::new(move |out| {
                let outcome = match out.and_then(|cts| lower(&ctx, cts, result_level)) {
                    Ok(cts) => Outcome::Computed(cts),
                    Err(GraphError::ShutDown) => Outcome::Interrupted,
                    Err(e) => Outcome::Failed(e.to_string()),
                };
                if matches!(outcome, Outcome::Computed(_)) {
                    let ms = submitted.elapsed().as_secs_f64() * 1e3;
                    crate::gpu::update_mean(&me.cpu_ms, ms);
                }
                // The executor is done with it: its slot goes to the next job now, while the
                // finisher stores the result (file and database syncs).
                me.release_slot(id);
                let _ = tx.send((done_rec, fp, outcome));
                drop(entry);
                drop(me);
            }),
        };
        let exec_id = self
            .exec()
            .as_ref()
            .ok_or_else(|| "the server is stopping".to_string())?
            .submit(job)
            .map_err(|e| e.to_string())?;
        self.live
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .exec_ids
            .insert(id, exec_id);
        Ok(())
    }

    /// The job's task graph.
    fn graph(
        &self,
        rec: &JobRecord,
        spec: &JobSpec,
        inputs: &[Arc<heloom_ckks::Ciphertext<u64>>],
    ) -> std::result::Result<Arc<TaskGraph>, String> {
        match &spec.task {
            Task::Exp { .. } | Task::Polynomial { .. } => {
                if inputs.len() != 1 {
                    return Err(format!(
                        "a {} job takes exactly one input ciphertext, {} given",
                        spec.task.kind(),
                        inputs.len()
                    ));
                }
                // From the graph cache, like the applications: equal jobs share one graph,
                // priced once.
                self.app_graph(rec, spec, inputs)
            }
            Task::Graph { graph_id } => {
                let data = self
                    .state
                    .read_object(&rec.tenant, graph_id)
                    .map_err(|e| e.to_string())?
                    .ok_or_else(|| format!("graph {graph_id} is not stored (deleted?)"))?;
                TaskGraph::from_bytes(&data)
                    .map(Arc::new)
                    .map_err(|e| e.to_string())
            }
            Task::Matmul { .. } | Task::MatmulEncrypted { .. } | Task::Cryptonets { .. } => {
                self.app_graph(rec, spec, inputs)
            }
        }
    }

    /// A built-in job's graph (cached), after checking the inputs and the key set.
    fn app_graph(
        &self,
        rec: &JobRecord,
        spec: &JobSpec,
        inputs: &[Arc<heloom_ckks::Ciphertext<u64>>],
    ) -> std::result::Result<Arc<TaskGraph>, String> {
        let entry = self.key_set(&rec.tenant, &spec.key_id)?;
        let (ctx, keys) = (&entry.set.ctx, &entry.set.keys);
        let facts = crate::apps::KeyFacts {
            n: ctx.n(),
            relin: keys.has_relin(),
            galois: keys.galois_elements(),
        };
        let inputs: Vec<crate::apps::InputFacts> = inputs
            .iter()
            .map(|c| crate::apps::InputFacts {
                level: c.level(),
                scale: c.scale(),
                slots: c.slots(),
            })
            .collect();
        let msg = |e: ServeError| match e {
            ServeError::InvalidRequest(m) => m,
            other => other.to_string(),
        };
        crate::apps::check(&spec.task, &facts, &inputs).map_err(msg)?;
        crate::apps::graph(&spec.task, ctx.params().moduli(), &inputs)
            .map_err(msg)?
            .ok_or_else(|| format!("{} jobs have no built-in graph", spec.task.kind()))
    }

    /// The tenant's key set `key_id`, from the key store (loaded from its object when absent).
    fn key_set(&self, tenant: &str, key_id: &str) -> std::result::Result<Arc<KeyEntry>, String> {
        let store_key = store_key(tenant, key_id);
        if self.keys.contains(store_key) {
            return self.keys.get(store_key).map_err(|e| e.to_string());
        }
        let info = self
            .state
            .object(tenant, key_id)
            .map_err(|e| e.to_string())?
            .filter(|o| o.kind == crate::ObjectKind::Keys)
            .ok_or_else(|| format!("key set {key_id} is not stored (deleted?)"))?;
        let path = self.state.object_path(tenant, &info.id);
        let data = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let set = parse_keys(&data, &self.contexts, self.allow_insecure)
            .map_err(|e| format!("stored key set {key_id}: {e}"))?;
        let load = data.len() as u64 + set.keys.memory_bytes() as u64;
        self.largest_load.fetch_max(load, Ordering::Relaxed);
        drop(data);
        self.keys
            .insert(store_key, KeyEntry { set, path })
            .map_err(|e| e.to_string())?;
        self.keys.get(store_key).map_err(|e| e.to_string())
    }

    fn finish_loop(self: Arc<Self>, rx: &Mutex<mpsc::Receiver<Finished>>) {
        loop {
            // The lock is held only while a group is gathered, not while it is stored.
            let group = self.gather(&rx.lock().unwrap_or_else(|p| p.into_inner()));
            if group.is_empty() {
                return;
            }
            self.finish_group(group);
        }
    }

    /// The next results to store together: the first to arrive, whatever else is ready, and,
    /// while every result gathered belongs to a tenant with other jobs running (a client
    /// keeping several jobs in flight waits on throughput, not on one job), those arriving
    /// within [`LINGER`] (at most half a job's recent run time). A group shares one write of
    /// its records and one commit: under load that is a third less CPU per stored result.
    /// A tenant with one job running has its result stored at once. Empty once the executor
    /// and every other sender are gone.
    fn gather(&self, rx: &mpsc::Receiver<Finished>) -> Vec<Finished> {
        let Ok(first) = rx.recv() else {
            return Vec::new();
        };
        let run_ms = f64::from_bits(self.service_ms.load(Ordering::Relaxed));
        let linger = LINGER.min(Duration::from_secs_f64((run_ms / 2e3).max(0.0)));
        let until = std::time::Instant::now() + linger;
        // At most the jobs in flight: the dispatcher holds new starts back once more than
        // twice that many results wait here.
        let most = self.slots().clamp(1, GROUP_JOBS);
        let mut bytes = outcome_bytes(&first.2);
        let mut group = vec![first];
        while group.len() < most && bytes < GROUP_BYTES {
            let next = match rx.try_recv() {
                Ok(f) => Some(f),
                Err(mpsc::TryRecvError::Disconnected) => None,
                Err(mpsc::TryRecvError::Empty) => {
                    let now = std::time::Instant::now();
                    if now >= until || !group.iter().all(|f| self.may_wait(f)) {
                        None
                    } else {
                        rx.recv_timeout(until - now).ok()
                    }
                }
            };
            let Some(f) = next else { break };
            bytes += outcome_bytes(&f.2);
            group.push(f);
        }
        group
    }

    /// Whether a finished job's result may wait for others to be stored with it: it is a
    /// result, and its tenant has other jobs running.
    fn may_wait(&self, f: &Finished) -> bool {
        matches!(f.2, Outcome::Computed(_) | Outcome::Done(..))
            && self
                .running
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get(&f.0.tenant)
                .is_some_and(|&n| n > 1)
    }

    /// Stores a group's results (one write, one commit) and records every job's end.
    fn finish_group(&self, group: Vec<Finished>) {
        let mut recs = Vec::with_capacity(group.len());
        let mut items = Vec::with_capacity(group.len());
        let mut others = Vec::new();
        for (rec, fp, out) in group {
            let (data, known) = match out {
                Outcome::Computed(cts) => {
                    // One output (the usual case) is its own serialization: no second copy.
                    let mut bytes = cts.first().map(|c| c.to_bytes()).unwrap_or_default();
                    for c in cts.iter().skip(1) {
                        bytes.extend_from_slice(&c.to_bytes());
                    }
                    (bytes, None)
                }
                Outcome::Done(bytes, known) => (bytes, known),
                other => {
                    others.push((rec, other));
                    continue;
                }
            };
            items.push(crate::objects::NewResult {
                job: Some(rec.id),
                tenant: rec.tenant.clone(),
                data,
                parameters: fp,
                known,
            });
            recs.push(rec);
        }
        match self.state.store_results(items) {
            Ok(stored) => {
                for (rec, (info, now)) in recs.into_iter().zip(stored) {
                    self.ended_with(&rec, Ok(info.id), Ok(now));
                }
            }
            Err(e) => {
                let msg = format!("storing the result: {e}");
                for rec in recs {
                    let r = self.state.finish_job(rec.id, Err(&msg));
                    self.ended_with(&rec, Err(msg.clone()), r);
                }
            }
        }
        for (rec, out) in others {
            match out {
                Outcome::Failed(msg) => {
                    let r = self.state.finish_job(rec.id, Err(&msg));
                    self.ended_with(&rec, Err(msg), r);
                }
                _ => {
                    // Interrupted: left as it is in the database, to run again.
                    self.forget(rec.id);
                    self.tenant_ended(&rec.tenant);
                }
            }
        }
    }

    /// The bookkeeping of a job's end: metrics, its live state, its waiters, the dispatcher.
    fn ended_with(
        &self,
        rec: &JobRecord,
        outcome: std::result::Result<String, String>,
        recorded: Result<bool>,
    ) {
        let state = match (&outcome, recorded) {
            (_, Ok(false)) => "cancelled",
            (Ok(_), Ok(true)) => "done",
            (Err(_), Ok(true)) => "failed",
            (_, Err(e)) => {
                eprintln!("heloom serve: recording the end of job {}: {e}", rec.id);
                "failed"
            }
        };
        let now = crate::unix_now_ms();
        let latency = (now - rec.created_ms).max(0) as f64 / 1e3;
        if state == "done" {
            let run = (now - rec.started_ms.unwrap_or(now)).max(0) as f64;
            crate::gpu::update_mean(&self.service_ms, run);
        }
        self.metrics.finished(&rec.tenant, state, latency);
        self.forget(rec.id);
        self.tenant_ended(&rec.tenant);
        self.ended.notify(rec.id);
        self.notify();
    }

    /// The job left the executor: drop its live state and free its slot.
    /// Job `id` left the executor: its slot is free for the next job (once).
    fn release_slot(&self, id: i64) {
        let first = self
            .released
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id);
        if first {
            self.in_flight.fetch_sub(1, Ordering::SeqCst);
            self.notify();
        }
    }

    /// Results waiting for the finisher whose slots were released.
    fn finishing(&self) -> usize {
        self.released
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .len()
    }

    fn forget(&self, id: i64) {
        {
            let mut live = self.live.lock().unwrap_or_else(|p| p.into_inner());
            live.progress.remove(&id);
            live.exec_ids.remove(&id);
        }
        self.received
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&id);
        let released = self
            .released
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&id);
        if !released {
            self.in_flight.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

/// Waits until `wake` is set (or half a second passes), then clears it.
fn sleep_until_woken(wake: &(Mutex<bool>, Condvar)) {
    let (lock, cv) = wake;
    let mut woken = lock.lock().unwrap_or_else(|p| p.into_inner());
    if !*woken {
        woken = cv
            .wait_timeout(woken, Duration::from_millis(500))
            .map(|(g, _)| g)
            .unwrap_or_else(|p| p.into_inner().0);
    }
    *woken = false;
}

/// `cts` dropped to at most `level` (exact; the job's `result_level`).
fn lower(
    ctx: &Arc<Context<u64>>,
    cts: Vec<Ciphertext<u64>>,
    level: Option<usize>,
) -> std::result::Result<Vec<Ciphertext<u64>>, GraphError> {
    let Some(level) = level else { return Ok(cts) };
    let ev = heloom_ckks::Evaluator::without_keys(ctx);
    cts.into_iter()
        .map(|c| {
            if c.level() > level {
                Ok(ev.drop_to_level(&c, level)?)
            } else {
                Ok(c)
            }
        })
        .collect()
}

/// The graph of a slot-wise job (e^x, polynomial) on one input at `level` and `scale`;
/// `None` for the other kinds.
pub(crate) fn slotwise_graph(
    task: &Task,
    moduli: &[u64],
    level: usize,
    scale: f64,
) -> Option<std::result::Result<TaskGraph, String>> {
    let graph = match task {
        Task::Exp { variant } => {
            let name = variant.as_deref().unwrap_or("horner");
            let Some(v) = exp_variant(name) else {
                return Some(Err(format!(
                    "e^x variant {name:?}: use horner, bsgs or paper-fig3"
                )));
            };
            exp_graph(v, moduli, level, scale)
        }
        Task::Polynomial { coefficients } => polynomial_graph(
            "polynomial",
            moduli,
            level,
            scale,
            coefficients,
            PolyBasis::Power,
        ),
        _ => return None,
    };
    Some(graph.map_err(|e| e.to_string()))
}

/// Jobs in the executor at once by default: enough that every thread has a task while a
/// finished job's slot is refilled (threads + 1), or under a memory budget, where each job of
/// another tenant holds its key set, threads / 2 + 1.
fn default_in_flight(threads: usize, memory_budget: bool) -> usize {
    if memory_budget {
        threads / 2 + 1
    } else {
        threads + 1
    }
}

/// Express slots beyond `slots` regular ones: half as many, at least one. Only a tenant
/// running less than its fair share of the regular slots ([`fair_share`]) takes one, so a light
/// tenant's jobs start at once beside a flooding tenant, while the jobs in the executor stay
/// bounded (each holds its key set in memory).
fn express_slots(slots: usize) -> usize {
    (slots / 2).max(1)
}

/// A tenant's fair share of `slots` slots among `tenants` running jobs, rounded up; at least 1.
fn fair_share(slots: usize, tenants: usize) -> usize {
    slots.div_ceil(tenants.max(1)).max(1)
}

/// This process's resident memory (VmRSS), bytes; 0 where unknown.
fn resident_bytes() -> u64 {
    heloom_pool::proc_status_bytes(None, "VmRSS").unwrap_or(0)
}

/// The e^x graph shape named `name` (`horner`, `bsgs`, `paper-fig3`).
pub fn exp_variant(name: &str) -> Option<ExpVariant> {
    ExpVariant::ALL.into_iter().find(|v| v.name() == name)
}

/// The key store's key for a tenant's key set.
fn store_key(tenant: &str, key_id: &str) -> u64 {
    let d = Sha256::digest(format!("{tenant}/{key_id}").as_bytes());
    let mut b = [0u8; 8];
    b.copy_from_slice(&d[..8]);
    u64::from_le_bytes(b)
}
