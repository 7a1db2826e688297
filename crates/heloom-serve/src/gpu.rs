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
//! A GPU slower than a CPU slot (the recent mean times of both) takes a job only when the CPU
//! lanes would need longer than one of its jobs to clear what is running and queued
//! (`worth_pulling`): otherwise the last job of a burst would wait on the slow device.
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
    /// Recent mean wall time of a job on the GPU, ms (f64 bits; 0 before the first).
    mean_ms: AtomicU64,
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
                mean_ms: AtomicU64::new(0),
            }),
            None,
        ))
    }

    /// Recent mean wall time of a job here, ms; 0 before the first.
    pub fn mean_ms(&self) -> f64 {
        f64::from_bits(self.mean_ms.load(Ordering::Relaxed))
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
            (
                "heloom_gpu_job_seconds",
                "gauge",
                "Recent mean wall time of a job on the GPU (0 before the first).",
                self.mean_ms() / 1e3,
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
        if matches!(out, Ok(Some(_))) {
            update_mean(&self.mean_ms, started.elapsed().as_secs_f64() * 1e3);
        }
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

/// Folds `ms` into the recent mean held in `mean` (f64 bits, 0 before the first sample).
pub(crate) fn update_mean(mean: &AtomicU64, ms: f64) {
    let old = f64::from_bits(mean.load(Ordering::Relaxed));
    let new = if old <= 0.0 { ms } else { 0.8 * old + 0.2 * ms };
    mean.store(new.to_bits(), Ordering::Relaxed);
}

/// Whether a device whose jobs take `device_ms` should take the next job, when the CPU lanes
/// take `cpu_ms` a job with `slots` slots, `in_flight` jobs in them and `queued` waiting:
/// seed 001's rule, a device takes an item it would finish before the others would. A device
/// at least as fast as a CPU slot always does; a slower one only when the CPU lanes would
/// need longer than one of its jobs to clear what is running and queued (else it would turn
/// the last job of a burst into a straggler). Unknown times (no job measured yet) say yes.
pub(crate) fn worth_pulling(
    device_ms: f64,
    cpu_ms: f64,
    slots: usize,
    in_flight: usize,
    queued: u64,
) -> bool {
    if device_ms <= 0.0 || cpu_ms <= 0.0 || device_ms <= cpu_ms {
        return true;
    }
    let rounds = ((queued as f64 + in_flight as f64) / slots.max(1) as f64).ceil();
    device_ms <= rounds * cpu_ms
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slow_device_pulls_only_for_a_backlog() {
        // Unknown or faster: always.
        assert!(worth_pulling(0.0, 10.0, 2, 0, 1));
        assert!(worth_pulling(5.0, 0.0, 2, 0, 1));
        assert!(worth_pulling(5.0, 10.0, 2, 0, 1));
        // Three times slower than a CPU slot, two slots: one queued job at idle stays for the
        // CPU; with both slots busy and four queued (three rounds), the device helps.
        assert!(!worth_pulling(30.0, 10.0, 2, 0, 1));
        assert!(!worth_pulling(30.0, 10.0, 2, 2, 2));
        assert!(worth_pulling(30.0, 10.0, 2, 2, 4));
        let m = AtomicU64::new(0);
        update_mean(&m, 10.0);
        update_mean(&m, 20.0);
        assert!((f64::from_bits(m.load(Ordering::Relaxed)) - 12.0).abs() < 1e-12);
    }
}
