//! The GPU as a device of the server, beside the CPU lanes (seed 001's pull queue).
//!
//! Devices pull jobs from one queue: the CPU dispatcher takes the next job whenever the
//! executor has a free slot, and the GPU's own thread takes the next job whenever the GPU is
//! idle, through the same fair-queueing query ([`crate::State::start_next`]), so tenants share
//! the GPU as they share the cores, and a faster device simply pulls more. On the GPU a job's
//! whole task graph runs on heloom's CUDA backend (`heloom-gpu`: its evaluator implements the
//! runtime's `PolyOps`, so intermediates never leave the device), task after task, with
//! progress and cancellation between tasks; its outputs come back and go to the same finisher
//! as the CPU's. Every GPU operation is bit-exact with the CPU's, so a result's bytes (and its
//! content address) do not depend on which device ran the job.
//!
//! Key sets are uploaded to the GPU once and kept for the next jobs of the same key set (a few
//! at once, least recently used out). A job the GPU cannot run (an error of the device, a key
//! set too large for its memory) goes to the CPU lanes instead, and the error is counted.

use heloom_ckks::{Ciphertext, Context, EvaluationKeys};
use heloom_gpu::{Gpu, GpuContext, GpuEvaluator, GpuKind};
use heloom_runtime::TaskGraph;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Which GPU the server runs jobs on (`heloom serve --gpu`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum GpuChoice {
    /// None: jobs run on the CPU lanes only.
    #[default]
    Off,
    /// The first CUDA device when there is one (and NVRTC to compile the kernels); else none,
    /// with a line saying why.
    Auto,
    /// CUDA device number `n`; the server refuses to start without it.
    Cuda(usize),
    /// The kernels on the host emulator: tests of the GPU path on machines without a GPU
    /// (correct, and far slower than the CPU).
    Emulator,
}

impl std::str::FromStr for GpuChoice {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "off" | "none" => Ok(Self::Off),
            "auto" => Ok(Self::Auto),
            "emulator" => Ok(Self::Emulator),
            _ => s.parse::<usize>().map(Self::Cuda).map_err(|_| {
                format!("--gpu {s:?}: use auto, off, emulator or a CUDA device number (0, 1, ...)")
            }),
        }
    }
}

/// A key set: its tenant and object id.
type KeySetId = (String, String);

/// Key sets kept on the GPU at once.
const KEY_SETS: usize = 4;

/// A job's inputs and what to run them with, ready for the GPU.
pub(crate) struct GpuJob<'a> {
    pub tenant: &'a str,
    pub key_id: &'a str,
    pub ctx: &'a Arc<Context<u64>>,
    pub keys: &'a Arc<EvaluationKeys<u64>>,
    pub graph: &'a TaskGraph,
    pub inputs: &'a [Arc<Ciphertext<u64>>],
    /// The job's `result_level`: outputs above it are dropped to it on the device, so that
    /// only the limbs kept come back.
    pub result_level: Option<usize>,
}

/// The GPU device of a server: its handle, the uploaded parameters and key sets, counters.
pub(crate) struct GpuLane {
    gpu: Gpu,
    /// `gpu` (a CUDA device) or `gpu-emulator`.
    pub name: String,
    /// What it is, for logs and `/metrics`.
    pub description: String,
    contexts: Mutex<Vec<(u64, Arc<GpuContext<u64>>)>>,
    /// Key sets on the device by (tenant, key id), least recently used first.
    evaluators: Mutex<Vec<(KeySetId, Arc<GpuEvaluator<u64>>)>>,
    /// Jobs the GPU ran to their end.
    pub jobs: AtomicU64,
    /// Jobs the GPU could not run (they went to the CPU lanes).
    pub failures: AtomicU64,
    /// Nanoseconds the GPU has been busy with jobs.
    pub busy_ns: AtomicU64,
    /// Whether a job is on the GPU now.
    pub busy: AtomicBool,
}

impl std::fmt::Debug for GpuLane {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuLane")
            .field("name", &self.name)
            .field("jobs", &self.jobs.load(Ordering::Relaxed))
            .finish()
    }
}

impl GpuLane {
    /// Opens the GPU `choice` names: `Ok(None)` for [`GpuChoice::Off`] and for
    /// [`GpuChoice::Auto`] without a usable GPU (the reason in the `String` of the pair);
    /// an error for a named CUDA device that cannot be opened.
    pub fn open(choice: GpuChoice) -> std::result::Result<(Option<Self>, Option<String>), String> {
        let gpu = match choice {
            GpuChoice::Off => return Ok((None, None)),
            GpuChoice::Emulator => Gpu::emulator(),
            GpuChoice::Auto => match Gpu::cuda(0) {
                Ok(g) => g,
                Err(e) => return Ok((None, Some(e.to_string()))),
            },
            GpuChoice::Cuda(n) => Gpu::cuda(n).map_err(|e| {
                format!(
                    "--gpu {n}: {e}; run without --gpu (or --gpu off) to use the CPU only, or \
                     --gpu auto to use a GPU only where there is one"
                )
            })?,
        };
        let i = gpu.info();
        let (name, description) = match i.kind {
            GpuKind::Cuda => (
                "gpu".to_string(),
                format!(
                    "{} (compute {}.{}, {})",
                    i.name, i.compute_capability.0, i.compute_capability.1, i.arch
                ),
            ),
            GpuKind::Emulator => (
                "gpu-emulator".to_string(),
                "heloom's CUDA kernels on the host emulator".to_string(),
            ),
        };
        Ok((
            Some(Self {
                gpu,
                name,
                description,
                contexts: Mutex::new(Vec::new()),
                evaluators: Mutex::new(Vec::new()),
                jobs: AtomicU64::new(0),
                failures: AtomicU64::new(0),
                busy_ns: AtomicU64::new(0),
                busy: AtomicBool::new(false),
            }),
            None,
        ))
    }

    /// Says on stderr that jobs also run here.
    pub fn announce(&self) {
        eprintln!(
            "heloom serve: jobs also run on the {} ({}), pulled from the same queue as the CPU \
             lanes",
            self.name, self.description
        );
    }

    /// The GPU's series for `/metrics`.
    pub fn metrics_text(&self) -> String {
        let d = &self.name;
        let mut out = String::new();
        for (name, kind, help, v) in [
            (
                "heloom_gpu_jobs_total",
                "counter",
                "Jobs the GPU ran to their end.",
                self.jobs.load(Ordering::Relaxed) as f64,
            ),
            (
                "heloom_gpu_failures_total",
                "counter",
                "Jobs the GPU could not run (they ran on the CPU lanes instead).",
                self.failures.load(Ordering::Relaxed) as f64,
            ),
            (
                "heloom_gpu_busy_seconds_total",
                "counter",
                "Seconds the GPU spent on jobs.",
                self.busy_ns.load(Ordering::Relaxed) as f64 / 1e9,
            ),
            (
                "heloom_gpu_busy",
                "gauge",
                "1 while a job is on the GPU.",
                u8::from(self.busy.load(Ordering::Relaxed)) as f64,
            ),
        ] {
            out.push_str(&format!(
                "# HELP {name} {help}\n# TYPE {name} {kind}\n{name}{{device=\"{d}\"}} {v}\n"
            ));
        }
        out
    }

    /// The device's tables for `ctx`'s parameters (uploaded once).
    fn context(&self, ctx: &Arc<Context<u64>>) -> Result<Arc<GpuContext<u64>>, String> {
        let fp = ctx.fingerprint();
        let mut c = self.contexts.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, g)) = c.iter().find(|(f, _)| *f == fp) {
            return Ok(Arc::clone(g));
        }
        let g = GpuContext::new(&self.gpu, ctx)
            .map_err(|e| format!("uploading the parameters' tables to the GPU: {e}"))?;
        if c.len() >= KEY_SETS {
            c.remove(0);
        }
        c.push((fp, Arc::clone(&g)));
        Ok(g)
    }

    /// The job's key set on the device (uploaded at its first job, then kept).
    fn evaluator(&self, job: &GpuJob<'_>) -> Result<Arc<GpuEvaluator<u64>>, String> {
        let key = (job.tenant.to_string(), job.key_id.to_string());
        {
            let mut e = self.evaluators.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(i) = e.iter().position(|(k, _)| *k == key) {
                let hit = e.remove(i);
                let ev = Arc::clone(&hit.1);
                e.push(hit);
                return Ok(ev);
            }
            // Room first: the device's memory holds a few key sets, not every tenant's.
            while e.len() >= KEY_SETS {
                e.remove(0);
            }
        }
        let g = self.context(job.ctx)?;
        let ev = Arc::new(
            GpuEvaluator::new(&g, job.keys)
                .map_err(|e| format!("uploading the key set to the GPU: {e}"))?,
        );
        let mut e = self.evaluators.lock().unwrap_or_else(|p| p.into_inner());
        e.push((key, Arc::clone(&ev)));
        Ok(ev)
    }

    /// Runs `job`'s graph on the GPU, task after task: `progress(done, total)` after each,
    /// stopping (with `Ok(None)`) once `cancelled()` says so. The outputs come back to host
    /// memory at their level.
    pub fn run(
        &self,
        job: &GpuJob<'_>,
        progress: &dyn Fn(usize, usize),
        cancelled: &dyn Fn() -> bool,
    ) -> Result<Option<Vec<Ciphertext<u64>>>, String> {
        let started = std::time::Instant::now();
        self.busy.store(true, Ordering::Relaxed);
        let out = self.run_graph(job, progress, cancelled);
        self.busy.store(false, Ordering::Relaxed);
        self.busy_ns
            .fetch_add(started.elapsed().as_nanos() as u64, Ordering::Relaxed);
        match &out {
            Ok(Some(_)) => self.jobs.fetch_add(1, Ordering::Relaxed),
            Ok(None) => 0,
            Err(_) => self.failures.fetch_add(1, Ordering::Relaxed),
        };
        out
    }

    fn run_graph(
        &self,
        job: &GpuJob<'_>,
        progress: &dyn Fn(usize, usize),
        cancelled: &dyn Fn() -> bool,
    ) -> Result<Option<Vec<Ciphertext<u64>>>, String> {
        let ev = self.evaluator(job)?;
        let g = ev.context();
        let graph = job.graph;
        graph
            .check_inputs(job.inputs.iter().map(|c| (c.level(), c.scale())))
            .map_err(|e| e.to_string())?;
        let mut values: Vec<Option<Arc<heloom_gpu::GpuCiphertext<u64>>>> =
            vec![None; graph.nodes().len()];
        for (node, ct) in graph.input_nodes().iter().zip(job.inputs) {
            values[*node] =
                Some(Arc::new(g.upload(ct).map_err(|e| {
                    format!("uploading an input to the GPU: {e}")
                })?));
        }
        let total = graph.tasks().len();
        for t in 0..total {
            if cancelled() {
                return Ok(None);
            }
            let out = graph
                .run_task(t, ev.as_ref(), &|o| values[o].clone())
                .map_err(|e| format!("graph {}: {e}", graph.name()))?;
            values[graph.tasks()[t].output] = Some(Arc::new(out));
            progress(t + 1, total);
        }
        graph
            .outputs()
            .iter()
            .map(|&o| {
                let v = values[o].as_ref().ok_or_else(|| {
                    format!("graph {}: output node {o} not computed", graph.name())
                })?;
                match job.result_level.filter(|&l| l < v.level()) {
                    Some(l) => g.drop_to_level(v, l).and_then(|low| g.download(&low)),
                    None => g.download(v),
                }
                .map_err(|e| format!("downloading a result from the GPU: {e}"))
            })
            .collect::<Result<Vec<_>, String>>()
            .map(Some)
    }
}
