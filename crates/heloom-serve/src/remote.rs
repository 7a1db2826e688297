//! Jobs on a Ray cluster: `heloom serve --ray ADDRESS`.
//!
//! The server stays the front: the same API, job records, tenants, admission control,
//! durability and idempotency. Only execution moves: instead of the in-process online
//! executor, each job goes to a *node server* (`heloom serve` started by a Ray actor on each
//! Ray node, with that node's CPUs) over heloom's own HTTP API.
//!
//! - **The bridge.** [`RemoteBackend::start`] spawns `python -m heloom.ray_nodes` (the
//!   Python package's Ray bridge, `pip install heloom[ray]`). It connects to the cluster,
//!   starts one actor pinned to each alive node, and reports each node server (URL, token,
//!   threads) as one JSON line on stdout, and later joins and leaves. It exits, stopping its
//!   actors, when its stdin closes (this process stopped or died).
//! - **Placement** ([`place`]): a job's predicted cost is its task graph's work under the
//!   server's cost model; it goes to the node where it would end first: the least
//!   outstanding predicted work per thread, plus the time to upload the job's key set where
//!   the node lacks it (at the measured upload bandwidth).
//! - **Keys** go to a node once and stay there (the node's store is content-addressed, so
//!   the key set keeps its id); inputs are uploaded with each job.
//! - **Exactly once.** A job is submitted to its node with the idempotency key
//!   `front-<job id>`, and its result comes back to this server, which stores it and records
//!   the job's end as for a local job (once per run). A node that disappears has its jobs
//!   placed again on the others.

use crate::client::{Client, ClientError, SubmitJob};
use crate::objects::{parse_ciphertexts, Contexts};
use crate::worker::{Finished, JobSpec, Outcome, Task};
use crate::{JobRecord, State};
use heloom_runtime::{CostModel, TaskGraph};
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// Node batches the front keeps in flight per node (see [`RemoteBackend::capacity`]).
const NODE_PIPELINE: usize = 2;

/// How `heloom serve --ray` reaches the cluster.
#[derive(Clone, Debug)]
pub struct RayConfig {
    /// The Ray cluster's address (what `ray.init(address=...)` takes: `HOST:PORT`, `auto`).
    pub address: String,
    /// The Python that runs the bridge (with `heloom[ray]` installed).
    pub python: PathBuf,
    /// The `heloom` binary the node servers run; it must exist at this path on every node.
    pub heloom_bin: PathBuf,
    /// Seconds between the bridge's looks at the cluster's nodes.
    pub poll_s: f64,
    /// How long to wait for the bridge's first round of node servers.
    pub startup_timeout: Duration,
    /// Node servers on this machine instead of a Ray cluster (`--local-nodes`): the bridge is
    /// `heloom_bin serve nodes`, no Python or Ray needed.
    pub local: Option<LocalNodes>,
    /// How long a node server may take for a request other than a key set upload (inputs
    /// and results included; `--node-timeout`). One that does not answer in time has its jobs placed
    /// elsewhere and leaves placement; it is asked again every 2 s and
    /// comes back once it answers.
    pub node_timeout: Duration,
}

/// How often a node server that stopped answering (while its node did not leave) is asked
/// again.
const NODE_PROBE_PERIOD: Duration = Duration::from_secs(2);

/// Default of [`RayConfig::node_timeout`].
const NODE_TIMEOUT: Duration = Duration::from_secs(20);

/// Node servers on this machine (`heloom serve --local-nodes N`).
#[derive(Clone, Debug)]
pub struct LocalNodes {
    /// How many.
    pub nodes: usize,
    /// Threads of each.
    pub threads: usize,
    /// Pin each to its own cores (`taskset`).
    pub pin: bool,
}

impl RayConfig {
    /// The cluster at `address`, node servers running `heloom_bin`; the bridge runs on
    /// `$HELOOM_PYTHON`, else `python3` from the PATH.
    pub fn new(address: &str, heloom_bin: PathBuf) -> Self {
        Self {
            address: address.to_string(),
            python: std::env::var_os("HELOOM_PYTHON")
                .map_or_else(|| PathBuf::from("python3"), PathBuf::from),
            heloom_bin,
            poll_s: 2.0,
            startup_timeout: Duration::from_secs(180),
            local: None,
            node_timeout: NODE_TIMEOUT,
        }
    }

    /// `local.nodes` node servers on this machine, run by `heloom_bin` (no Ray).
    pub fn local(local: LocalNodes, heloom_bin: PathBuf) -> Self {
        Self {
            address: "local".to_string(),
            python: heloom_bin.clone(),
            heloom_bin,
            poll_s: 1.0,
            startup_timeout: Duration::from_secs(120),
            local: Some(local),
            node_timeout: NODE_TIMEOUT,
        }
    }
}

/// What can go wrong starting the Ray backend.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RayError {
    /// The bridge's Python could not be started.
    #[error(
        "cannot run {python} for the Ray bridge: {source}; install Python with the heloom \
         package and Ray (`pip install heloom[ray]`), then pass that Python with --ray-python \
         PATH or HELOOM_PYTHON"
    )]
    Spawn {
        /// The Python tried.
        python: PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
    /// The bridge stopped, or did not get ready in time, before any job could run.
    #[error(
        "the Ray bridge ({python} -m heloom.ray_nodes) did not start: {message}; it needs the \
         heloom package with Ray in that Python (`pip install heloom[ray]`; another Python with \
         --ray-python PATH or HELOOM_PYTHON) and a running Ray cluster at the --ray address"
    )]
    Bridge {
        /// The Python that ran it.
        python: PathBuf,
        /// What it said.
        message: String,
    },
}

/// One node as [`place`] sees it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NodeLoad {
    /// Predicted work of the jobs placed there and not ended, ms (one thread).
    pub outstanding_ms: f64,
    /// Threads of its node server.
    pub threads: usize,
    /// Whether it already has the job's key set.
    pub has_key: bool,
}

/// Where a job of predicted work `cost_ms` (one thread) with a key set of `key_bytes` goes:
/// the node where it would end first, that is the least `(outstanding_ms + cost_ms) /
/// threads`, plus `key_bytes / upload_bytes_per_s` where the node lacks the key set. Ties go
/// to the first such node; `None` without nodes.
pub fn place(
    nodes: &[NodeLoad],
    cost_ms: f64,
    key_bytes: u64,
    upload_bytes_per_s: f64,
) -> Option<usize> {
    let upload_ms = key_bytes as f64 / upload_bytes_per_s.max(1.0) * 1e3;
    nodes
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let run = (n.outstanding_ms.max(0.0) + cost_ms.max(0.0)) / n.threads.max(1) as f64;
            (i, run + if n.has_key { 0.0 } else { upload_ms })
        })
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(i, _)| i)
}

/// Upload bandwidth assumed before the first key upload is measured, bytes per second.
const DEFAULT_UPLOAD_BPS: f64 = 200e6;
/// Predicted work of a job whose graph cannot be built here, ms.
const DEFAULT_COST_MS: f64 = 1000.0;
/// Times a job is placed again after its node was lost before it fails.
const MAX_PLACEMENTS: usize = 8;
/// The slowest key set upload to a node that is not taken for a node that stopped answering:
/// an upload of `b` bytes may take `node_timeout + b / KEY_UPLOAD_MIN_BPS`.
const KEY_UPLOAD_MIN_BPS: f64 = 5e6;

/// How long a key set upload of `bytes` may take.
fn key_upload_timeout(node_timeout: Duration, bytes: u64) -> Duration {
    node_timeout + Duration::from_secs_f64(bytes as f64 / KEY_UPLOAD_MIN_BPS)
}
/// How long a job waits for a node to appear before going back to the queue.
const NO_NODE_WAIT: Duration = Duration::from_secs(20);

/// A node server announced by the bridge.
struct Node {
    /// The Ray node id.
    id: String,
    /// Requests of the front's `node_timeout` (inputs, submission, waits, results, cancels,
    /// deletions, listings), so that a node that stops answering is noticed in seconds. Key
    /// set uploads get more time by their size ([`key_upload_timeout`]).
    control: Client,
    /// Where its server is, to look again once it stops answering.
    url: String,
    token: String,
    threads: usize,
    /// Cleared when the bridge says the node left, or its server stopped answering.
    up: AtomicBool,
    /// Key set ids it holds.
    keys: Mutex<HashSet<String>>,
    /// Held while a key set is uploaded to it (each goes once).
    key_upload: Mutex<()>,
    /// The job inputs and graphs it stores for the front, and what its jobs in flight use
    /// (see [`Held`]).
    held: Mutex<Held>,
}

/// Why an object did not reach a node.
enum SendFail {
    /// Reading it here failed (deleted, damaged): the job fails.
    Read(String),
    /// The upload failed.
    Upload(ClientError),
}

/// What [`object_ids`] calls an input.
const INPUT: &str = "input ciphertext";

/// The stored objects a job reads besides its key set, each with what it is: its inputs, then
/// a graph job's graph.
fn object_ids(spec: &JobSpec) -> impl Iterator<Item = (&String, &'static str)> {
    let graph = match &spec.task {
        Task::Graph { graph_id } => Some((graph_id, "graph")),
        _ => None,
    };
    spec.inputs.iter().map(|id| (id, INPUT)).chain(graph)
}

/// The error of a job whose input or graph is gone.
fn not_stored(what: &str, id: &str) -> String {
    format!("{what} {id} is not stored (deleted?)")
}

/// Most predicted job costs the front remembers (see `RemoteBackend::cost_cache`).
const COST_CACHE: usize = 4096;

/// Most job inputs and graphs the front leaves on a node for later jobs (see [`Held`]).
const NODE_OBJECT_CACHE: usize = 4096;

/// What the front knows a node server stores besides key sets. Job inputs and graphs it sent
/// (content-addressed, so the same ids there) stay for later jobs that use them, up to
/// [`NODE_OBJECT_CACHE`], the oldest unused deleted first; a job's result is deleted there
/// once the front has it, unless another job in flight there computes the same bytes (equal
/// signatures: key set, inputs, task). Nothing a job in flight uses is deleted, so the
/// node's store stays bounded however long the cluster runs.
#[derive(Default)]
struct Held {
    /// Ids stored there, oldest first (a set for lookups beside it).
    order: VecDeque<String>,
    ids: HashSet<String>,
    /// Jobs in flight per input or graph id they read.
    in_use: HashMap<String, usize>,
    /// Jobs in flight per signature.
    sigs: HashMap<u64, usize>,
}

/// A job's signature: jobs with equal ones (key set, so parameters; inputs; task; result
/// level) compute equal result bytes (one object on a node) and have equal predicted work.
fn signature(spec: &JobSpec) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    spec.key_id.hash(&mut h);
    spec.inputs.hash(&mut h);
    // Another level is another result: counted apart, or the first one's object would stay
    // on the node when the two jobs' claims end.
    spec.result_level.hash(&mut h);
    serde_json::to_string(&spec.task)
        .unwrap_or_default()
        .hash(&mut h);
    h.finish()
}

impl Held {
    /// Tracks again the inputs and graphs a node lists (`listed`: newest first, as
    /// `GET /v1/objects` pages them), oldest first; ids already tracked stay where they are.
    fn track_listed(&mut self, listed: &[crate::ObjectInfo]) {
        use crate::ObjectKind;
        for o in listed
            .iter()
            .rev()
            .filter(|o| matches!(o.kind, ObjectKind::Ciphertext | ObjectKind::Graph))
        {
            if self.ids.insert(o.id.clone()) {
                self.order.push_back(o.id.clone());
            }
        }
    }

    fn take(map: &mut HashMap<String, usize>, id: &str) {
        if let Some(n) = map.get_mut(id) {
            *n -= 1;
            if *n == 0 {
                map.remove(id);
            }
        }
    }
}

impl Node {
    /// Marks `ids` and `sig` in use by a job about to run here (nothing it reads is deleted
    /// until [`Node::release`]).
    fn claim(&self, ids: &[&String], sig: u64) {
        let mut h = lock(&self.held);
        for id in ids {
            *h.in_use.entry((*id).clone()).or_default() += 1;
        }
        *h.sigs.entry(sig).or_default() += 1;
    }

    /// Sends the object stored here as `id` (its bytes from `load`, read only when needed)
    /// unless the node holds it; its id there, and whether it was sent. The caller has claimed
    /// `id`.
    fn send_object(
        &self,
        id: &str,
        load: impl FnOnce() -> Result<Vec<u8>, String>,
    ) -> Result<(String, bool), SendFail> {
        if lock(&self.held).ids.contains(id) {
            return Ok((id.to_string(), false));
        }
        let data = load().map_err(SendFail::Read)?;
        let info = self.control.upload(data).map_err(SendFail::Upload)?;
        if info.id == id {
            let mut h = lock(&self.held);
            if h.ids.insert(info.id.clone()) {
                h.order.push_back(info.id.clone());
            }
        }
        Ok((info.id, true))
    }

    /// Ends a job's claim; once the front has its result (`got`: the job there and its result
    /// object), deletes the job's record there and the result too unless another job in
    /// flight computes the same bytes (one request for both), and the oldest unused inputs
    /// beyond [`NODE_OBJECT_CACHE`]. Deletions of objects happen under the lock, so no job
    /// claims an object while it goes. Objects deleted.
    fn release(&self, ids: &[&String], sig: u64, got: Option<&(i64, String)>) -> u64 {
        let mut h = lock(&self.held);
        for id in ids {
            Held::take(&mut h.in_use, id);
        }
        let mut deleted = 0;
        let last = match h.sigs.get_mut(&sig) {
            Some(n) => {
                *n -= 1;
                *n == 0
            }
            None => true,
        };
        let mut job_left = None;
        if last {
            h.sigs.remove(&sig);
        }
        if let Some((job, _)) = got {
            // Best effort: a node that does not answer is handled by the next job's try (and
            // its records are scratch).
            if last {
                if self.control.delete_job_with_result(*job).is_ok() {
                    deleted += 1;
                }
            } else {
                job_left = Some(*job);
            }
        }
        let mut kept = VecDeque::new();
        while h.ids.len() > NODE_OBJECT_CACHE {
            let Some(id) = h.order.pop_front() else { break };
            if h.in_use.contains_key(&id) {
                kept.push_back(id);
                continue;
            }
            h.ids.remove(&id);
            if self.control.delete_object(&id).is_ok() {
                deleted += 1;
            }
        }
        while let Some(id) = kept.pop_back() {
            h.order.push_front(id);
        }
        drop(h);
        // Only its record: outside the lock.
        if let Some(job) = job_left {
            let _ = self.control.delete_job(job);
        }
        deleted
    }

    /// Deletes a done job's record there and its result (best effort, one request), after the
    /// node answered but could not give the result (gone or damaged there). Otherwise the next
    /// try, resubmitted under the same idempotency key, would find the same job done with the
    /// same unreadable result, and a later job computing the same bytes would be answered
    /// with it.
    fn drop_job_and_result(&self, job: i64) {
        let _ = self.control.delete_job_with_result(job);
    }

    /// Forgets what the node stores (after it lost a job: it may have lost its store).
    fn forget(&self) {
        let mut h = lock(&self.held);
        h.ids.clear();
        h.order.clear();
    }

    /// Learns again what a node that lost a job but still answers holds (its store need not
    /// be lost): its inputs and graphs are tracked again, so they are neither sent twice nor
    /// left there untracked (never deleted).
    fn relearn(&self) {
        if let Ok(listed) = self.control.all_objects() {
            lock(&self.held).track_listed(&listed);
            // Key sets are content-addressed too: the ones there need no upload.
            lock(&self.keys).extend(
                listed
                    .iter()
                    .filter(|o| o.kind == crate::ObjectKind::Keys)
                    .map(|o| o.id.clone()),
            );
        }
    }
}

/// Counters per Ray node id (kept after the node leaves).
#[derive(Clone, Debug, Default)]
struct NodeStats {
    threads: usize,
    up: bool,
    jobs: u64,
    key_uploads: u64,
    key_upload_bytes: u64,
    objects_sent: u64,
    objects_reused: u64,
    objects_deleted: u64,
}

#[derive(Default)]
struct Inner {
    /// Nodes jobs may be placed on, with their outstanding predicted work (ms).
    nodes: Vec<(Arc<Node>, f64)>,
    stats: BTreeMap<String, NodeStats>,
    bridge_up: bool,
    ready: bool,
    /// Why the bridge stopped, or its last error.
    note: Option<String>,
    /// Node servers that stopped answering while their node did not leave: asked again every
    /// [`NODE_PROBE_PERIOD`], back in placement once they answer.
    suspects: Vec<Arc<Node>>,
}

/// A job running on a node.
#[derive(Default)]
struct Live {
    node: Option<(Arc<Node>, i64)>,
    progress: Option<(usize, usize)>,
    cancelled: bool,
}

/// The bridge process.
struct Bridge {
    child: Child,
    stdin: Option<ChildStdin>,
}

/// What became of one try on one node.
enum Try {
    /// The job's outputs, and their id on the node (the SHA-256 it computed of them).
    Done(Vec<u8>, Option<String>),
    /// The job itself failed (its node is fine): why.
    Failed(String),
    /// The node failed under it: place it again.
    NodeLost(String),
    /// The server is stopping.
    Stopped,
}

/// What a job needs, read from the front's state once.
struct Prepared {
    spec: JobSpec,
    key_path: PathBuf,
    key_bytes: u64,
    fp: u64,
    /// The tenant whose inputs and graph these are (read when a node needs them).
    tenant: String,
    /// [`signature`] of the job.
    sig: u64,
    cost_ms: f64,
}

/// Jobs on node servers of a Ray cluster (see the module docs).
pub(crate) struct RemoteBackend {
    state: Arc<State>,
    contexts: Arc<Contexts>,
    model: Arc<dyn CostModel>,
    allow_insecure: bool,
    inner: Mutex<Inner>,
    /// Signalled when nodes join or the bridge changes state.
    changed: Condvar,
    live: Mutex<HashMap<i64, Live>>,
    bridge: Mutex<Option<Bridge>>,
    stop: AtomicBool,
    /// Measured key upload bandwidth, bytes per second (f64 bits).
    upload_bps: AtomicU64,
    /// Jobs placed again after their node was lost.
    replaced: AtomicU64,
    /// Recent run time per job kind, ms: the cost of jobs whose graph is not built here.
    kind_ms: Mutex<HashMap<String, f64>>,
    /// Predicted work per job [`signature`], so that a job like an
    /// earlier one is placed without reading and parsing its input again.
    cost_cache: Mutex<HashMap<u64, f64>>,
    /// [`RayConfig::node_timeout`].
    node_timeout: Duration,
    /// Node servers taken back into placement after they stopped answering.
    returned: AtomicU64,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl RemoteBackend {
    /// Spawns the bridge and waits for its first round of node servers.
    pub(crate) fn start(
        state: Arc<State>,
        contexts: Arc<Contexts>,
        model: Arc<dyn CostModel>,
        allow_insecure: bool,
        config: &RayConfig,
    ) -> Result<Arc<Self>, RayError> {
        let mut cmd = match &config.local {
            Some(l) => {
                let mut c = Command::new(&config.heloom_bin);
                c.args(["serve", "nodes", "--nodes", &l.nodes.to_string()])
                    .args(["--threads", &l.threads.to_string()]);
                if l.pin {
                    c.arg("--pin");
                }
                c
            }
            None => {
                let mut c = Command::new(&config.python);
                c.args(["-m", "heloom.ray_nodes", "--address", &config.address])
                    .arg("--heloom-bin")
                    .arg(&config.heloom_bin)
                    .args(["--poll", &format!("{}", config.poll_s.max(0.1))]);
                c
            }
        };
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if allow_insecure {
            cmd.arg("--allow-insecure");
        }
        let mut child = cmd.spawn().map_err(|source| RayError::Spawn {
            python: config.python.clone(),
            source,
        })?;
        let stdin = child.stdin.take();
        let stdout = child.stdout.take();
        let stderr = child.stderr.take();
        let me = Arc::new(Self {
            state,
            contexts,
            model,
            allow_insecure,
            inner: Mutex::new(Inner {
                bridge_up: true,
                ..Inner::default()
            }),
            changed: Condvar::new(),
            live: Mutex::new(HashMap::new()),
            bridge: Mutex::new(Some(Bridge { child, stdin })),
            stop: AtomicBool::new(false),
            upload_bps: AtomicU64::new(DEFAULT_UPLOAD_BPS.to_bits()),
            replaced: AtomicU64::new(0),
            kind_ms: Mutex::new(HashMap::new()),
            cost_cache: Mutex::new(HashMap::new()),
            node_timeout: config.node_timeout.max(Duration::from_secs(3)),
            returned: AtomicU64::new(0),
        });
        let tail = Arc::new(Mutex::new(VecDeque::<String>::new()));
        if let Some(err) = stderr {
            let tail = Arc::clone(&tail);
            let source = if config.local.is_some() {
                "nodes"
            } else {
                "ray"
            };
            let spawned = std::thread::Builder::new()
                .name("heloom-ray-log".into())
                .spawn(move || {
                    for line in BufReader::new(err).lines().map_while(|l| l.ok()) {
                        eprintln!("heloom serve: {source}: {line}");
                        let mut t = lock(&tail);
                        t.push_back(line);
                        if t.len() > 20 {
                            t.pop_front();
                        }
                    }
                });
            if let Err(e) = spawned {
                eprintln!("heloom serve: ray: cannot forward the bridge's log: {e}");
            }
        }
        let bridge_failed = |message: String| RayError::Bridge {
            python: config.python.clone(),
            message,
        };
        let Some(out) = stdout else {
            return Err(bridge_failed("its stdout is not readable".into()));
        };
        let reader = Arc::clone(&me);
        std::thread::Builder::new()
            .name("heloom-ray-bridge".into())
            .spawn(move || reader.read_bridge(out))
            .map_err(|e| bridge_failed(format!("cannot read it: {e}")))?;
        let prober = Arc::clone(&me);
        std::thread::Builder::new()
            .name("heloom-ray-probe".into())
            .spawn(move || prober.probe_loop())
            .map_err(|e| bridge_failed(format!("cannot start the node prober: {e}")))?;
        // Wait for the first round of joins (or the bridge's end).
        let deadline = Instant::now() + config.startup_timeout;
        let mut inner = lock(&me.inner);
        while !inner.ready && inner.bridge_up && Instant::now() < deadline {
            let left = deadline.saturating_duration_since(Instant::now());
            inner = me
                .changed
                .wait_timeout(inner, left.min(Duration::from_millis(200)))
                .map(|(g, _)| g)
                .unwrap_or_else(|p| p.into_inner().0);
        }
        let (ready, up, note) = (inner.ready, inner.bridge_up, inner.note.clone());
        drop(inner);
        if !ready {
            // Give the log thread a moment to collect the bridge's last words.
            std::thread::sleep(Duration::from_millis(200));
            let said = lock(&tail).iter().cloned().collect::<Vec<_>>().join(" | ");
            me.shutdown();
            let why = match (note, up) {
                (Some(n), _) => return Err(bridge_failed(n)),
                (None, false) => "it exited".to_string(),
                (None, true) => format!(
                    "no answer within {} s",
                    config.startup_timeout.as_secs_f64()
                ),
            };
            return Err(bridge_failed(if said.is_empty() {
                why
            } else {
                format!("{why} (it said: {said})")
            }));
        }
        Ok(me)
    }

    /// Reads the bridge's protocol lines until it exits.
    fn read_bridge(self: Arc<Self>, out: std::process::ChildStdout) {
        for line in BufReader::new(out).lines().map_while(|l| l.ok()) {
            let Ok(v) = serde_json::from_str::<serde_json::Value>(&line) else {
                continue;
            };
            let field = |k: &str| v[k].as_str().unwrap_or_default().to_string();
            match v["event"].as_str() {
                Some("join") => self.join(
                    &field("node_id"),
                    &field("url"),
                    &field("token"),
                    v["threads"].as_u64().unwrap_or(1) as usize,
                ),
                Some("leave") => {
                    let id = field("node_id");
                    eprintln!(
                        "heloom serve: ray node {id} left ({}); its jobs go to other nodes",
                        field("reason")
                    );
                    self.remove_node(&id, None);
                }
                Some("ready") => {
                    lock(&self.inner).ready = true;
                    self.changed.notify_all();
                }
                Some("error") => {
                    lock(&self.inner).note = Some(field("message"));
                }
                _ => {}
            }
        }
        // The bridge is gone: no node can be reached or supervised any more.
        let status = lock(&self.bridge)
            .as_mut()
            .and_then(|b| b.child.wait().ok())
            .map_or_else(|| "stopped".to_string(), |s| s.to_string());
        {
            let mut inner = lock(&self.inner);
            inner.bridge_up = false;
            inner.suspects.clear();
            for (n, _) in inner.nodes.drain(..) {
                n.up.store(false, Ordering::SeqCst);
            }
            for s in inner.stats.values_mut() {
                s.up = false;
            }
            if inner.note.is_none() {
                inner.note = Some(format!("the Ray bridge exited ({status})"));
            }
        }
        self.changed.notify_all();
        // Before the first round of nodes the start fails with the bridge's own words.
        if !self.stop.load(Ordering::SeqCst) && lock(&self.inner).ready {
            eprintln!(
                "heloom serve: the Ray bridge exited ({status}): no node runs jobs now; accepted \
                 jobs stay queued and /readyz answers 503 until the server is restarted"
            );
        }
    }

    /// A node server joined (or a node's server was restarted: a new one, without keys).
    fn join(&self, id: &str, url: &str, token: &str, threads: usize) {
        let Some(node) = self.node(id, url, token, threads) else {
            return;
        };
        self.add_node(node);
        eprintln!("heloom serve: ray node {id}: {threads} threads, node server {url}");
        // The dispatcher sees the new capacity at its next look (within 0.5 s).
        self.changed.notify_all();
    }

    /// A node server's handle, or `None` (said why) when its address is unusable.
    fn node(&self, id: &str, url: &str, token: &str, threads: usize) -> Option<Arc<Node>> {
        let control = match Client::with_timeout(url, token, self.node_timeout) {
            Ok(c) => c,
            Err(e) => {
                eprintln!("heloom serve: ray node {id} at {url} is not usable: {e}");
                return None;
            }
        };
        Some(Arc::new(Node {
            id: id.to_string(),
            control,
            url: url.to_string(),
            token: token.to_string(),
            threads: threads.max(1),
            up: AtomicBool::new(true),
            keys: Mutex::new(HashSet::new()),
            key_upload: Mutex::new(()),
            held: Mutex::new(Held::default()),
        }))
    }

    /// Puts `node` in placement, in place of any server under its id.
    fn add_node(&self, node: Arc<Node>) {
        let mut inner = lock(&self.inner);
        for (n, _) in inner.nodes.iter().filter(|(n, _)| n.id == node.id) {
            n.up.store(false, Ordering::SeqCst);
        }
        inner.nodes.retain(|(n, _)| n.id != node.id);
        inner.suspects.retain(|n| n.id != node.id);
        let s = inner.stats.entry(node.id.clone()).or_default();
        s.threads = node.threads;
        s.up = true;
        inner.nodes.push((node, 0.0));
    }

    /// Asks the node servers that stopped answering again, every [`NODE_PROBE_PERIOD`], until
    /// the server stops: one that answers comes back into placement as a new handle that
    /// learns what it still stores (key sets, inputs), so nothing is uploaded twice.
    fn probe_loop(self: Arc<Self>) {
        while !self.stop.load(Ordering::SeqCst) {
            {
                let inner = lock(&self.inner);
                let _ = self
                    .changed
                    .wait_timeout(inner, NODE_PROBE_PERIOD)
                    .unwrap_or_else(|p| p.into_inner());
            }
            let suspects = lock(&self.inner).suspects.clone();
            for old in suspects {
                if self.stop.load(Ordering::SeqCst) {
                    return;
                }
                if old.control.version().is_err() {
                    continue;
                }
                let Some(node) = self.node(&old.id, &old.url, &old.token, old.threads) else {
                    continue;
                };
                node.relearn();
                {
                    let inner = lock(&self.inner);
                    // Left meanwhile (the bridge said so), or replaced by a new server.
                    if !inner.suspects.iter().any(|n| Arc::ptr_eq(n, &old)) {
                        continue;
                    }
                }
                self.add_node(node);
                self.returned.fetch_add(1, Ordering::Relaxed);
                eprintln!(
                    "heloom serve: ray node {} answers again; jobs go to it again",
                    old.id
                );
                self.changed.notify_all();
            }
        }
    }

    /// Takes a node out of placement (`which`: that server only, else any under this id).
    /// A server taken out because it stopped answering (`which` given) is asked again
    /// ([`Self::probe_loop`]); a node that left (`None`) is forgotten. Returns whether a
    /// server was in placement.
    fn remove_node(&self, id: &str, which: Option<&Arc<Node>>) -> bool {
        let mut inner = lock(&self.inner);
        let mut removed = Vec::new();
        inner.nodes.retain(|(n, _)| {
            let hit = n.id == id && which.is_none_or(|w| Arc::ptr_eq(w, n));
            if hit {
                n.up.store(false, Ordering::SeqCst);
                removed.push(Arc::clone(n));
            }
            !hit
        });
        let was_placed = !removed.is_empty();
        match which {
            Some(_) if inner.bridge_up => inner.suspects.extend(removed),
            Some(_) => {}
            None => inner.suspects.retain(|n| n.id != id),
        }
        let still = inner.nodes.iter().any(|(n, _)| n.id == id);
        if let Some(s) = inner.stats.get_mut(id) {
            s.up = still;
        }
        was_placed
    }

    /// Jobs that may be in flight: per node, twice what its server runs at once (threads + 1,
    /// its default). The second half waits in the node's queue with its input uploaded, so
    /// each job's round trips (upload, submit, result) overlap another's compute instead of
    /// idling the node: with threads / 2 + 1, a 4-thread node on a 16-core host ran 80 jobs/s
    /// where the in-process server runs about twice that. Jobs still wait in the front's fair
    /// queue, at most one node batch behind.
    pub(crate) fn capacity(&self) -> usize {
        lock(&self.inner)
            .nodes
            .iter()
            .map(|(n, _)| NODE_PIPELINE * (n.threads + 1))
            .sum()
    }

    /// `Ok` when jobs can run: the bridge runs and at least one node server is up.
    pub(crate) fn ready(&self) -> std::result::Result<(), String> {
        let inner = lock(&self.inner);
        if !inner.bridge_up {
            return Err(inner
                .note
                .clone()
                .unwrap_or_else(|| "the Ray bridge exited".into()));
        }
        if inner.nodes.is_empty() {
            return Err("no Ray node runs a heloom node server yet".into());
        }
        Ok(())
    }

    /// Progress of a job on its node: tasks done and total.
    pub(crate) fn progress(&self, id: i64) -> Option<(usize, usize)> {
        lock(&self.live).get(&id).and_then(|l| l.progress)
    }

    /// Cancels a job on its node (its record was already marked cancelled).
    pub(crate) fn cancel(&self, id: i64) {
        let target = {
            let mut live = lock(&self.live);
            let Some(l) = live.get_mut(&id) else { return };
            l.cancelled = true;
            l.node.clone()
        };
        if let Some((node, node_job)) = target {
            // The caller may be on the async runtime: the blocking client runs elsewhere.
            let _ = std::thread::Builder::new()
                .name("heloom-ray-cancel".into())
                .spawn(move || {
                    if let Err(e) = node.control.cancel(node_job) {
                        eprintln!(
                            "heloom serve: cancelling job {id} on ray node {}: {e}",
                            node.id
                        );
                    }
                });
        }
    }

    /// Stops: jobs in flight are left `running` (they run again after a restart), the
    /// bridge is told to stop its node servers (its stdin closes) and reaped.
    pub(crate) fn shutdown(&self) {
        self.stop.store(true, Ordering::SeqCst);
        self.changed.notify_all();
        let Some(mut b) = lock(&self.bridge).take() else {
            return;
        };
        drop(b.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(15);
        while Instant::now() < deadline {
            if matches!(b.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = b.child.kill();
        let _ = b.child.wait();
    }

    /// Runs `rec` on a node, on a thread of its own; its end goes to `tx`.
    pub(crate) fn launch(
        self: &Arc<Self>,
        rec: JobRecord,
        tx: mpsc::Sender<Finished>,
    ) -> std::result::Result<(), String> {
        let me = Arc::clone(self);
        std::thread::Builder::new()
            .name(format!("heloom-ray-job-{}", rec.id))
            .spawn(move || me.run_job(rec, tx))
            .map(|_| ())
            .map_err(|e| format!("starting the job's thread: {e}"))
    }

    fn run_job(self: Arc<Self>, rec: JobRecord, tx: mpsc::Sender<Finished>) {
        lock(&self.live).insert(rec.id, Live::default());
        let (fp, outcome) = match self.prepare(&rec) {
            Ok(p) => (p.fp, self.run_prepared(&rec, &p)),
            Err(msg) => (0, Outcome::Failed(msg)),
        };
        lock(&self.live).remove(&rec.id);
        if let Outcome::Interrupted = outcome {
            if !self.stop.load(Ordering::SeqCst) {
                // No node to run it: back to the queue, for when nodes come.
                if let Err(e) = self.state.requeue_job(rec.id) {
                    eprintln!(
                        "heloom serve: putting job {} back in the queue: {e}",
                        rec.id
                    );
                }
            }
        }
        let _ = tx.send((rec, fp, outcome));
    }

    /// Places the job, runs it, places it again while its nodes are lost.
    fn run_prepared(&self, rec: &JobRecord, p: &Prepared) -> Outcome {
        let started = Instant::now();
        for _ in 0..MAX_PLACEMENTS {
            let Some(node) = self.choose(p) else {
                return Outcome::Interrupted;
            };
            let attempt = self.run_on(&node, rec, p);
            self.release(&node, p.cost_ms);
            match attempt {
                Try::Done(bytes, id) => {
                    let ms = started.elapsed().as_secs_f64() * 1e3;
                    let mut k = lock(&self.kind_ms);
                    let e = k.entry(rec.kind.clone()).or_insert(ms);
                    *e = 0.8 * *e + 0.2 * ms;
                    return Outcome::Done(bytes, id);
                }
                Try::Failed(msg) => return Outcome::Failed(msg),
                Try::Stopped => return Outcome::Interrupted,
                Try::NodeLost(msg) => {
                    // An input it was thought to hold may be what was missing.
                    node.forget();
                    if self.stop.load(Ordering::SeqCst) {
                        return Outcome::Interrupted;
                    }
                    if lock(&self.live).get(&rec.id).is_some_and(|l| l.cancelled) {
                        return Outcome::Failed("cancelled".into());
                    }
                    eprintln!(
                        "heloom serve: job {} lost ray node {}: {msg}; placing it again",
                        rec.id, node.id
                    );
                    if !node.up.load(Ordering::SeqCst) {
                        self.remove_node(&node.id, Some(&node));
                    } else if node.control.version().is_err() {
                        if self.remove_node(&node.id, Some(&node)) {
                            eprintln!(
                                "heloom serve: ray node {} does not answer; no jobs go to it \
                                 until it does (asked every {} s)",
                                node.id,
                                NODE_PROBE_PERIOD.as_secs()
                            );
                        }
                    } else {
                        node.relearn();
                    }
                    self.replaced.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        Outcome::Failed(format!(
            "its node was lost {MAX_PLACEMENTS} times; submit it again"
        ))
    }

    /// The node for a job (waiting a while for one when there is none), its predicted work
    /// added to the node's.
    fn choose(&self, p: &Prepared) -> Option<Arc<Node>> {
        let deadline = Instant::now() + NO_NODE_WAIT;
        let bps = f64::from_bits(self.upload_bps.load(Ordering::Relaxed));
        let key_id = &p.spec.key_id;
        let mut inner = lock(&self.inner);
        loop {
            if self.stop.load(Ordering::SeqCst) {
                return None;
            }
            let loads: Vec<NodeLoad> = inner
                .nodes
                .iter()
                .map(|(n, out)| NodeLoad {
                    outstanding_ms: *out,
                    threads: n.threads,
                    has_key: lock(&n.keys).contains(key_id),
                })
                .collect();
            if let Some(i) = place(&loads, p.cost_ms, p.key_bytes, bps) {
                let (node, out) = &mut inner.nodes[i];
                *out += p.cost_ms;
                let node = Arc::clone(node);
                if let Some(s) = inner.stats.get_mut(&node.id) {
                    s.jobs += 1;
                }
                return Some(node);
            }
            if !inner.bridge_up || Instant::now() >= deadline {
                return None;
            }
            inner = self
                .changed
                .wait_timeout(inner, Duration::from_millis(500))
                .map(|(g, _)| g)
                .unwrap_or_else(|p| p.into_inner().0);
        }
    }

    fn release(&self, node: &Arc<Node>, cost_ms: f64) {
        let mut inner = lock(&self.inner);
        if let Some((_, out)) = inner.nodes.iter_mut().find(|(n, _)| Arc::ptr_eq(n, node)) {
            *out = (*out - cost_ms).max(0.0);
        }
    }

    /// Reads what the job needs and predicts its work.
    fn prepare(&self, rec: &JobRecord) -> std::result::Result<Prepared, String> {
        let spec: JobSpec = serde_json::from_str(&rec.spec)
            .map_err(|e| format!("the stored job description is unreadable: {e}"))?;
        let key = self
            .state
            .object(&rec.tenant, &spec.key_id)
            .map_err(|e| e.to_string())?
            .filter(|o| o.kind == crate::ObjectKind::Keys)
            .ok_or_else(|| format!("key set {} is not stored (deleted?)", spec.key_id))?;
        let fp = u64::from_str_radix(&key.parameters, 16)
            .map_err(|e| format!("key set {}: bad parameter fingerprint: {e}", key.id))?;
        // Inputs and graph are read when a node lacks them; here only their records.
        for (id, what) in object_ids(&spec) {
            self.state
                .object(&rec.tenant, id)
                .map_err(|e| e.to_string())?
                .ok_or_else(|| not_stored(what, id))?;
        }
        let sig = signature(&spec);
        let cached = lock(&self.cost_cache).get(&sig).copied();
        let cost_ms = match cached {
            Some(c) => c,
            None => {
                let work = self.graph_work_ms(rec, &spec, fp);
                if let Some(w) = work {
                    let mut cache = lock(&self.cost_cache);
                    if cache.len() >= COST_CACHE {
                        cache.clear();
                    }
                    cache.insert(sig, w);
                }
                work.or_else(|| lock(&self.kind_ms).get(&rec.kind).copied())
                    .unwrap_or(DEFAULT_COST_MS)
            }
        };
        Ok(Prepared {
            key_path: self.state.object_path(&rec.tenant, &key.id),
            key_bytes: key.bytes,
            fp,
            tenant: rec.tenant.clone(),
            sig,
            cost_ms,
            spec,
        })
    }

    /// Reads the tenant's object `id` (an input or a graph) for a node.
    fn read_for_node(&self, tenant: &str, id: &str, what: &str) -> Result<Vec<u8>, String> {
        self.state
            .read_object(tenant, id)
            .map_err(|e| e.to_string())?
            .ok_or_else(|| not_stored(what, id))
    }

    /// The job's task graph's work under the server's cost model, ms (one thread); `None`
    /// where the graph cannot be built here (the node reports the job's errors).
    fn graph_work_ms(&self, rec: &JobRecord, spec: &JobSpec, fp: u64) -> Option<f64> {
        let graph = if let Task::Graph { graph_id } = &spec.task {
            let data = self.state.read_object(&rec.tenant, graph_id).ok()??;
            TaskGraph::from_bytes(&data).ok()?
        } else {
            let ctx = self
                .state
                .context_for(&rec.tenant, fp, &self.contexts, self.allow_insecure)
                .ok()?;
            let [input_id] = &spec.inputs[..] else {
                return None;
            };
            let input = self.state.read_object(&rec.tenant, input_id).ok()??;
            let ct = parse_ciphertexts(&input, &ctx).ok()?.into_iter().next()?;
            let moduli = ctx.params().moduli().to_vec();
            crate::worker::slotwise_graph(&spec.task, &moduli, ct.level(), ct.scale())?.ok()?
        };
        Some(graph.work_ms(self.model.as_ref()))
    }

    /// One try of the job on `node`.
    fn run_on(&self, node: &Arc<Node>, rec: &JobRecord, p: &Prepared) -> Try {
        let lost = |what: &str, e: ClientError| -> Try {
            match &e {
                ClientError::Api {
                    status, message, ..
                } if *status < 500 && *status != 429 && *status != 408 && *status != 404 => {
                    Try::Failed(format!("{what}: {message}"))
                }
                _ => Try::NodeLost(format!("{what}: {e}")),
            }
        };
        // The key set, once per node.
        let key_id = &p.spec.key_id;
        if !lock(&node.keys).contains(key_id) {
            let _one = lock(&node.key_upload);
            if !lock(&node.keys).contains(key_id) {
                let t = Instant::now();
                let timeout = key_upload_timeout(self.node_timeout, p.key_bytes);
                let uploaded = Client::with_timeout(&node.url, &node.token, timeout)
                    .and_then(|c| c.upload_file(&p.key_path));
                match uploaded {
                    Ok(info) if &info.id == key_id => {
                        let s = t.elapsed().as_secs_f64().max(1e-6);
                        let bps = p.key_bytes as f64 / s;
                        let old = f64::from_bits(self.upload_bps.load(Ordering::Relaxed));
                        self.upload_bps
                            .store((0.5 * old + 0.5 * bps).to_bits(), Ordering::Relaxed);
                        lock(&node.keys).insert(key_id.clone());
                        let mut inner = lock(&self.inner);
                        if let Some(st) = inner.stats.get_mut(&node.id) {
                            st.key_uploads += 1;
                            st.key_upload_bytes += p.key_bytes;
                        }
                    }
                    Ok(info) => {
                        return Try::Failed(format!(
                            "the node stored key set {key_id} as {}: the stored file changed",
                            info.id
                        ))
                    }
                    Err(e) => return lost("uploading the key set", e),
                }
            }
        }
        // What this try reads on the node, claimed so that nothing of it is deleted there
        // meanwhile; released with the job's result deleted there once it is here.
        let ids: Vec<&String> = object_ids(&p.spec).map(|(id, _)| id).collect();
        let sig = p.sig;
        node.claim(&ids, sig);
        let mut got = None;
        let attempt = self.run_claimed(node, rec, p, &lost, &mut got);
        let done = matches!(attempt, Try::Done(..));
        let deleted = node.release(&ids, sig, got.as_ref().filter(|_| done));
        if let Some(st) = lock(&self.inner).stats.get_mut(&node.id) {
            st.objects_deleted += deleted;
        }
        attempt
    }

    /// [`Self::run_on`] past the key set: inputs, submission, the wait, the result (its id
    /// on the node and its job there into `got`, once the result is here).
    fn run_claimed(
        &self,
        node: &Arc<Node>,
        rec: &JobRecord,
        p: &Prepared,
        lost: &dyn Fn(&str, ClientError) -> Try,
        got: &mut Option<(i64, String)>,
    ) -> Try {
        let key_id = &p.spec.key_id;
        // The inputs' ids there (the graph goes too; the task names it).
        let mut inputs = Vec::with_capacity(p.spec.inputs.len());
        let (mut sent, mut reused) = (0, 0);
        for (id, what) in object_ids(&p.spec) {
            let load = || self.read_for_node(&p.tenant, id, what);
            match node.send_object(id, load) {
                Ok((there, fresh)) => {
                    if what == INPUT {
                        inputs.push(there);
                    }
                    if fresh {
                        sent += 1;
                    } else {
                        reused += 1;
                    }
                }
                Err(SendFail::Read(msg)) => return Try::Failed(msg),
                Err(SendFail::Upload(e)) => {
                    let step = if what == INPUT {
                        "uploading an input"
                    } else {
                        "uploading the graph"
                    };
                    return lost(step, e);
                }
            }
        }
        if let Some(st) = lock(&self.inner).stats.get_mut(&node.id) {
            st.objects_sent += sent;
            st.objects_reused += reused;
        }
        let mut job = SubmitJob::new(
            &format!("front-{}", rec.id),
            key_id,
            inputs,
            p.spec.task.clone(),
        );
        job.priority = rec.priority;
        job.result_level = p.spec.result_level;
        let view = match node.control.submit(&job) {
            Ok(v) => v,
            Err(e) => return lost("submitting", e),
        };
        let cancel_now = {
            let mut live = lock(&self.live);
            let l = live.entry(rec.id).or_default();
            l.node = Some((Arc::clone(node), view.id));
            l.cancelled
        };
        if cancel_now {
            let _ = node.control.cancel(view.id);
        }
        let mut errors = 0;
        loop {
            if self.stop.load(Ordering::SeqCst) {
                return Try::Stopped;
            }
            if !node.up.load(Ordering::SeqCst) {
                return Try::NodeLost("the node left".into());
            }
            let id = rec.id;
            let on_update = |v: &crate::api::JobView| {
                if let Some(pr) = &v.progress {
                    if let Some(l) = lock(&self.live).get_mut(&id) {
                        l.progress = Some((pr.tasks_done, pr.tasks_total));
                    }
                }
            };
            // The result itself, waited for (one request where a wait and a fetch were two).
            match node.control.result_wait(view.id, Duration::from_secs(2)) {
                Ok(Some((b, there))) => {
                    // The node hashed these bytes for their id; their own checksums catch
                    // damage on the way, so the front need not hash them again (SHA-256 was
                    // about an eighth of the front's CPU).
                    return match crate::objects::check_result_checksums(&b) {
                        Ok(()) => {
                            // Its record there goes when the claim ends (`Node::release`).
                            *got = Some((view.id, there.clone()));
                            Try::Done(b, Some(there))
                        }
                        Err(e) => {
                            node.drop_job_and_result(view.id);
                            Try::NodeLost(format!("fetching the result: {e}"))
                        }
                    };
                }
                Ok(None) => {
                    errors = 0;
                    // Still running: its progress, for a long job's waiters.
                    if let Ok(v) = node.control.job(view.id) {
                        on_update(&v);
                    }
                }
                Err(ClientError::Api { status: 409, .. }) => {
                    // Ended without a result: failed or cancelled there.
                    return match node.control.job(view.id) {
                        Ok(v) if v.state == "failed" => {
                            let _ = node.control.delete_job(v.id);
                            Try::Failed(v.error.unwrap_or_else(|| "failed".into()))
                        }
                        Ok(_) if lock(&self.live).get(&id).is_some_and(|l| l.cancelled) => {
                            Try::Failed("cancelled".into())
                        }
                        Ok(_) => Try::NodeLost("the node cancelled it".into()),
                        Err(e) => lost("waiting", e),
                    };
                }
                Err(e @ ClientError::Api { .. }) => {
                    // The node answered but could not give the result (gone or damaged).
                    node.drop_job_and_result(view.id);
                    return lost("fetching the result", e);
                }
                Err(e) => {
                    errors += 1;
                    if errors >= 3 {
                        return lost("waiting", e);
                    }
                    std::thread::sleep(Duration::from_millis(300));
                }
            }
        }
    }

    /// The backend's series for `/metrics`.
    pub(crate) fn metrics_text(&self) -> String {
        use std::fmt::Write as _;
        let inner = lock(&self.inner);
        let mut out = String::new();
        let gauge = |out: &mut String, name: &str, help: &str, v: f64| {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {v}");
        };
        gauge(
            &mut out,
            "heloom_ray_bridge_up",
            "1 while the Ray bridge runs.",
            f64::from(u8::from(inner.bridge_up)),
        );
        gauge(
            &mut out,
            "heloom_ray_nodes",
            "Ray nodes whose node servers take jobs.",
            inner.nodes.len() as f64,
        );
        gauge(
            &mut out,
            "heloom_ray_key_upload_bytes_per_second",
            "Measured key set upload bandwidth to the nodes.",
            f64::from_bits(self.upload_bps.load(Ordering::Relaxed)),
        );
        let _ = writeln!(
            out,
            "# HELP heloom_ray_jobs_replaced_total Jobs placed again after their node was lost.\n\
             # TYPE heloom_ray_jobs_replaced_total counter\nheloom_ray_jobs_replaced_total {}",
            self.replaced.load(Ordering::Relaxed)
        );
        let _ = writeln!(
            out,
            "# HELP heloom_ray_nodes_returned_total Node servers taken back into placement after \
             they stopped answering for a while.\n\
             # TYPE heloom_ray_nodes_returned_total counter\nheloom_ray_nodes_returned_total {}",
            self.returned.load(Ordering::Relaxed)
        );
        let outstanding: HashMap<&str, f64> = inner
            .nodes
            .iter()
            .map(|(n, o)| (n.id.as_str(), *o))
            .collect();
        type Series = (
            &'static str,
            &'static str,
            &'static str,
            fn(&NodeStats) -> f64,
        );
        let series: [Series; 8] = [
            (
                "heloom_ray_node_up",
                "gauge",
                "1 while the node's server takes jobs.",
                |s| f64::from(u8::from(s.up)),
            ),
            (
                "heloom_ray_node_threads",
                "gauge",
                "Threads of the node's server.",
                |s| s.threads as f64,
            ),
            (
                "heloom_ray_node_jobs_total",
                "counter",
                "Jobs placed on the node (a job placed again counts again).",
                |s| s.jobs as f64,
            ),
            (
                "heloom_ray_key_uploads_total",
                "counter",
                "Key sets uploaded to the node (each once per node server).",
                |s| s.key_uploads as f64,
            ),
            (
                "heloom_ray_key_upload_bytes_total",
                "counter",
                "Key set bytes uploaded to the node.",
                |s| s.key_upload_bytes as f64,
            ),
            (
                "heloom_ray_node_objects_sent_total",
                "counter",
                "Job inputs and graphs uploaded to the node.",
                |s| s.objects_sent as f64,
            ),
            (
                "heloom_ray_node_objects_reused_total",
                "counter",
                "Job inputs and graphs the node already held (not uploaded again).",
                |s| s.objects_reused as f64,
            ),
            (
                "heloom_ray_node_objects_deleted_total",
                "counter",
                "Results (once here) and unused inputs beyond the cache deleted on the node.",
                |s| s.objects_deleted as f64,
            ),
        ];
        for (name, kind, help, f) in series {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
            for (id, s) in &inner.stats {
                let _ = writeln!(out, "{name}{{node=\"{id}\"}} {}", f(s));
            }
        }
        let _ = writeln!(
            out,
            "# HELP heloom_ray_node_outstanding_ms Predicted work placed on the node and not \
             ended, ms.\n# TYPE heloom_ray_node_outstanding_ms gauge"
        );
        for id in inner.stats.keys() {
            let o = outstanding.get(id.as_str()).copied().unwrap_or(0.0);
            let _ = writeln!(out, "heloom_ray_node_outstanding_ms{{node=\"{id}\"}} {o}");
        }
        out
    }
}

impl Drop for RemoteBackend {
    fn drop(&mut self) {
        self.shutdown();
    }
}

impl State {
    /// Puts a running job back in the queue (its try ended without an outcome: no node could
    /// take it). Returns whether it was running.
    pub(crate) fn requeue_job(&self, id: i64) -> crate::Result<bool> {
        let n = self.with_conn(|c| {
            c.execute(
                "UPDATE jobs SET state = 'accepted', started_ms = NULL WHERE id = ?1 AND state = 'running'",
                rusqlite::params![id],
            )
        })?;
        Ok(n > 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jobs_differing_only_in_result_level_have_different_signatures() {
        let spec = |level: Option<usize>| JobSpec {
            key_id: "k".into(),
            inputs: vec!["a".into()],
            task: Task::Exp { variant: None },
            result_level: level,
        };
        assert_eq!(signature(&spec(Some(1))), signature(&spec(Some(1))));
        assert_ne!(signature(&spec(None)), signature(&spec(Some(0))));
        assert_ne!(signature(&spec(Some(0))), signature(&spec(Some(1))));
    }

    fn n(outstanding_ms: f64, threads: usize, has_key: bool) -> NodeLoad {
        NodeLoad {
            outstanding_ms,
            threads,
            has_key,
        }
    }

    #[test]
    fn a_listed_store_is_tracked_again_oldest_first() {
        let info = |id: &str, kind: crate::ObjectKind| crate::ObjectInfo {
            id: id.to_string(),
            kind,
            bytes: 1,
            parameters: String::new(),
            info: serde_json::Value::Null,
            created_unix: 0,
        };
        let mut h = Held::default();
        h.ids.insert("b".into());
        h.order.push_back("b".into());
        // Newest first, as the node lists them; keys and results are not inputs.
        let listed = [
            info("c", crate::ObjectKind::Graph),
            info("r", crate::ObjectKind::Result),
            info("b", crate::ObjectKind::Ciphertext),
            info("k", crate::ObjectKind::Keys),
            info("a", crate::ObjectKind::Ciphertext),
        ];
        h.track_listed(&listed);
        assert_eq!(Vec::from(h.order.clone()), vec!["b", "a", "c"]);
        assert_eq!(h.ids.len(), 3);
    }

    #[test]
    fn key_uploads_get_time_by_their_size() {
        let t = Duration::from_secs(20);
        assert_eq!(key_upload_timeout(t, 0), t);
        // A gigabyte key set: 200 s more at the slowest rate taken for a live node.
        assert_eq!(
            key_upload_timeout(t, 1_000_000_000),
            Duration::from_secs(220)
        );
    }

    #[test]
    fn no_nodes_no_place() {
        assert_eq!(place(&[], 10.0, 0, 1e9), None);
    }

    #[test]
    fn least_work_per_thread_wins() {
        // 400 / 4 = 100 beats 300 / 2 = 150 and 120 / 1 = 120 (plus the job's 40 / threads).
        let nodes = [n(300.0, 2, true), n(400.0, 4, true), n(120.0, 1, true)];
        assert_eq!(place(&nodes, 40.0, 1 << 20, 1e9), Some(1));
        // Idle nodes: the job ends first on the widest one.
        let idle = [n(0.0, 1, true), n(0.0, 4, true), n(0.0, 2, true)];
        assert_eq!(place(&idle, 100.0, 0, 1e9), Some(1));
    }

    #[test]
    fn ties_go_to_the_first_node() {
        let nodes = [n(50.0, 2, true), n(50.0, 2, true), n(50.0, 2, true)];
        assert_eq!(place(&nodes, 10.0, 0, 1e9), Some(0));
    }

    #[test]
    fn a_missing_key_costs_its_upload() {
        // 100 MB at 100 MB/s is 1000 ms: a node with the key and 800 ms of work queued
        // (the job ends at 810 ms) beats an idle one without it (1010 ms).
        let nodes = [n(0.0, 1, false), n(800.0, 1, true)];
        assert_eq!(place(&nodes, 10.0, 100_000_000, 100e6), Some(1));
        // At 1 GB/s the upload is 100 ms: the idle node wins (110 ms against 810 ms).
        assert_eq!(place(&nodes, 10.0, 100_000_000, 1e9), Some(0));
        // Every node lacks the key: least work wins.
        let cold = [n(30.0, 1, false), n(20.0, 1, false)];
        assert_eq!(place(&cold, 10.0, 100_000_000, 100e6), Some(1));
    }

    #[test]
    fn filling_idle_nodes_round_robins() {
        // Placing equal jobs one by one spreads them over equal nodes.
        let mut nodes = vec![n(0.0, 2, true); 4];
        let mut got = Vec::new();
        for _ in 0..8 {
            let i = place(&nodes, 100.0, 0, 1e9).unwrap_or(usize::MAX);
            nodes[i].outstanding_ms += 100.0;
            got.push(i);
        }
        assert_eq!(got, vec![0, 1, 2, 3, 0, 1, 2, 3]);
    }

    #[test]
    fn bad_numbers_are_clamped() {
        // Zero threads counts as one; negative work as none; zero bandwidth as 1 B/s.
        let nodes = [n(-5.0, 0, true), n(10.0, 1, true)];
        assert_eq!(place(&nodes, 1.0, 0, 0.0), Some(0));
        let nodes = [n(0.0, 1, false), n(10.0, 1, true)];
        assert_eq!(place(&nodes, 1.0, 10, 0.0), Some(1));
    }
}
