//! HE task graphs as a device workload: the runtime's e^x jobs, each one task graph applied to one input
//! ciphertext, carried by the same [`Device`]s and balancers as AES items.
//!
//! A device runs a whole job: the ciphertext stays on the device from the job's input to its result, the
//! granularity a GPU wants too (one upload, one download). Inside the job, [`CpuPoolDevice`] runs every op on a
//! thread budget of heloom's shared pool (intra-op parallelism, as the runtime's executor does per task).
//!
//! Client and server share the process, as in the runtime: [`HeJobs`] holds the secret key only to check results
//! after a run ([`HeJobs::verify`]); devices see the evaluator and the ciphertexts.

use std::sync::Arc;

use heloom_ckks::{Ciphertext, Evaluator, Threads};
use heloom_runtime::profile::XEON_PHI;
use heloom_runtime::workload::{default_params, ExpWorkload, EXP_TOLERANCE};
use heloom_runtime::{ExpVariant, Profile, TaskGraph};

use crate::device::{Device, DeviceInfo, DeviceKind, Worker, Workload};
use crate::error::{DeviceError, Result};

/// The ciphertext type HE jobs take and produce (64-bit RNS limbs, as everywhere in the runtime).
pub type HeCiphertext = Ciphertext<u64>;

/// Distinct encrypted inputs at most; jobs reuse them round robin (encryption is set-up, not the measured work).
const MAX_DISTINCT_INPUTS: usize = 8;

/// Ring degrees accepted: 2^10 to 2^16, the range the runtime's default parameters were checked at (and `1 << log_n`
/// cannot overflow).
const LOG_N_RANGE: std::ops::RangeInclusive<u32> = 10..=16;

/// Reads a graph variant name: `paper-fig3` (or `paper`), `bsgs`, `horner`, or `mixed` (every variant in turn,
/// returned as `None`).
pub fn parse_variant(name: &str) -> Result<Option<ExpVariant>> {
    let n = name.trim().to_ascii_lowercase();
    if n == "mixed" {
        return Ok(None);
    }
    ExpVariant::ALL
        .iter()
        .copied()
        .find(|v| v.name() == n || (n == "paper" && *v == ExpVariant::Paper))
        .map(Some)
        .ok_or_else(|| {
            DeviceError::InvalidParameter(format!(
                "unknown e^x graph variant `{name}` (expected paper-fig3, bsgs, horner or mixed)"
            ))
        })
}

/// A stream of e^x jobs from the runtime: job `i` runs one task graph variant on its input ciphertext.
pub struct HeJobs {
    work: ExpWorkload<u64>,
    log_n: u32,
    /// Variant of each job, as an index into `ExpVariant::ALL` (the order of `ExpWorkload::variants`).
    job_variant: Vec<usize>,
    /// Estimated work of each variant, µs (see `weight` in the `Workload` impl).
    variant_weight: Vec<u64>,
}

impl HeJobs {
    /// `jobs` jobs of `variant` at ring degree `2^log_n` with the runtime's default parameters (8 limbs, 40-bit
    /// scale), keys and inputs drawn from `seed`. Inputs differ between jobs up to 8 jobs, then repeat.
    pub fn new(log_n: u32, jobs: usize, variant: ExpVariant, seed: u64) -> Result<Self> {
        Self::build(log_n, jobs, Some(variant), seed)
    }

    /// Like [`HeJobs::new`], with the variants taking turns (job `i` runs variant `i mod 3`), so jobs differ in
    /// weight as items of a real queue do.
    pub fn mixed(log_n: u32, jobs: usize, seed: u64) -> Result<Self> {
        Self::build(log_n, jobs, None, seed)
    }

    fn build(log_n: u32, jobs: usize, variant: Option<ExpVariant>, seed: u64) -> Result<Self> {
        if !LOG_N_RANGE.contains(&log_n) {
            return Err(DeviceError::InvalidParameter(format!(
                "log_n {log_n} is outside {}..={} for HE jobs",
                LOG_N_RANGE.start(),
                LOG_N_RANGE.end()
            )));
        }
        if jobs == 0 {
            return Err(DeviceError::InvalidParameter(
                "an HE workload needs at least one job".into(),
            ));
        }
        let params = default_params(log_n)
            .map_err(|e| he_error(format!("parameters for log_n {log_n}: {e}")))?;
        let work = ExpWorkload::<u64>::new(params, jobs.min(MAX_DISTINCT_INPUTS), seed)
            .map_err(|e| he_error(format!("setting up the e^x workload: {e}")))?;
        let job_variant = match variant {
            Some(v) => {
                let i = variant_index(v)?;
                vec![i; jobs]
            }
            None => (0..jobs).map(|j| j % ExpVariant::ALL.len()).collect(),
        };
        // Seed 000's Xeon Phi tables price every op; only the ratios between jobs matter to a balancer, and they
        // hold across machines far better than absolute times.
        let profile = Profile::builtin(XEON_PHI)
            .ok_or_else(|| he_error(format!("built-in profile {XEON_PHI} missing")))?;
        let n_ratio = (1u64 << log_n) as f64 / profile.n as f64;
        let variant_weight = work
            .variants()
            .iter()
            .map(|g| ((g.work_ms(&profile) * 1e3 * n_ratio).round() as u64).max(1))
            .collect();
        Ok(HeJobs {
            work,
            log_n,
            job_variant,
            variant_weight,
        })
    }

    /// Ring degree exponent: `N = 2^log_n`.
    pub fn log_n(&self) -> u32 {
        self.log_n
    }

    /// The runtime's workload underneath (context, evaluator, inputs, graph variants).
    pub fn workload(&self) -> &ExpWorkload<u64> {
        &self.work
    }

    /// Graph variant of job `job`, or `None` past the last job.
    pub fn variant(&self, job: usize) -> Option<ExpVariant> {
        self.job_variant
            .get(job)
            .and_then(|&i| ExpVariant::ALL.get(i).copied())
    }

    /// Task graph of job `job`, or `None` past the last job.
    pub fn graph(&self, job: usize) -> Option<&Arc<TaskGraph>> {
        self.job_variant
            .get(job)
            .and_then(|&i| self.work.variants().get(i))
    }

    /// Input ciphertext of job `job`, or `None` past the last job.
    pub fn input(&self, job: usize) -> Option<&Arc<HeCiphertext>> {
        (job < self.len()).then(|| self.work.input(job))
    }

    /// Largest error of job `job`'s decrypted result `out` against e^x's degree-6 polynomial of its input.
    pub fn error(&self, job: usize, out: &HeCiphertext) -> Result<f64> {
        if job >= self.len() {
            return Err(DeviceError::InvalidParameter(format!(
                "no job {job}: the workload has {} jobs",
                self.len()
            )));
        }
        self.work
            .error(job, out)
            .map_err(|e| he_error(format!("job {job}: cannot decrypt its result: {e}")))
    }

    /// Decrypts every output (output `i` is job `i`'s) and checks its error against the runtime's
    /// [`EXP_TOLERANCE`]; returns the largest error, or names the first job that fails.
    pub fn verify(&self, outputs: &[HeCiphertext]) -> Result<f64> {
        if outputs.len() != self.len() {
            return Err(DeviceError::InvalidParameter(format!(
                "{} outputs for {} HE jobs",
                outputs.len(),
                self.len()
            )));
        }
        let mut worst = 0.0f64;
        for (job, out) in outputs.iter().enumerate() {
            let err = self.error(job, out)?;
            // A NaN error (garbage decryption) fails too.
            if err.is_nan() || err > EXP_TOLERANCE {
                let variant = self.variant(job).map_or("?", ExpVariant::name);
                return Err(he_error(format!(
                    "job {job} ({variant}) decrypts with error {err:.3e}, above the tolerance {EXP_TOLERANCE:.0e}"
                )));
            }
            worst = worst.max(err);
        }
        Ok(worst)
    }
}

impl Workload for HeJobs {
    type Output = HeCiphertext;

    fn len(&self) -> usize {
        self.job_variant.len()
    }

    /// Estimated single-thread work of the job's graph in µs: seed 000's Xeon Phi op tables scaled linearly to
    /// this ring degree (at least 1).
    fn weight(&self, i: usize) -> u64 {
        self.job_variant
            .get(i)
            .and_then(|&v| self.variant_weight.get(v))
            .copied()
            .unwrap_or(1)
    }
}

fn variant_index(v: ExpVariant) -> Result<usize> {
    ExpVariant::ALL
        .iter()
        .position(|&w| w == v)
        .ok_or_else(|| he_error(format!("variant {} has no graph", v.name())))
}

fn he_error(what: String) -> DeviceError {
    DeviceError::He(what)
}

/// A share of heloom's CPU worker pool: runs one HE job at a time, every op of its graph split over `threads`
/// threads of the shared pool.
pub struct CpuPoolDevice {
    info: DeviceInfo,
    threads: usize,
}

impl CpuPoolDevice {
    /// A `cpu-pool` device whose jobs each get a budget of `threads` pool threads (more than
    /// [`heloom_pool::cores`] is allowed but gains nothing).
    pub fn new(threads: usize) -> Result<Self> {
        let engine = || {
            format!(
                "heloom CKKS on {threads} of {} pool threads per job",
                heloom_pool::cores()
            )
        };
        Ok(CpuPoolDevice {
            info: DeviceInfo::on_threads(DeviceKind::CpuPool, threads, 1, engine)?,
            threads,
        })
    }

    /// Renames the device (to tell two devices of one kind apart in a run).
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.info.name = name.into();
        self
    }

    /// Thread budget of each job.
    pub fn threads(&self) -> usize {
        self.threads
    }
}

struct CpuPoolWorker<'w> {
    work: &'w HeJobs,
    ev: Evaluator<u64>,
    name: &'w str,
}

impl Worker<HeCiphertext> for CpuPoolWorker<'_> {
    fn run(&mut self, item: usize) -> Result<HeCiphertext> {
        let fail = |what: String| he_error(format!("device `{}`, job {item}: {what}", self.name));
        let (Some(graph), Some(input)) = (self.work.graph(item), self.work.input(item)) else {
            return Err(DeviceError::InvalidParameter(format!(
                "no job {item}: the workload has {} jobs",
                self.work.len()
            )));
        };
        let out = graph
            .run(&self.ev, std::slice::from_ref(input.as_ref()))
            .map_err(|e| fail(format!("graph {}: {e}", graph.name())))?
            .into_iter()
            .next()
            .ok_or_else(|| fail(format!("graph {} has no output", graph.name())))?;
        // Only the lowest limb is needed to decrypt: the result leaves the device small, as the executor's does.
        self.ev
            .drop_to_level(&out, 0)
            .map_err(|e| fail(format!("dropping the result to level 0: {e}")))
    }
}

impl Device<HeJobs> for CpuPoolDevice {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn open<'w>(&'w self, work: &'w HeJobs) -> Result<Vec<Box<dyn Worker<HeCiphertext> + 'w>>> {
        let ev = work
            .workload()
            .evaluator()
            .with_threads(Threads::new(self.threads));
        Ok(vec![Box::new(CpuPoolWorker {
            work,
            ev,
            name: &self.info.name,
        })])
    }
}

/// Explains why HE jobs cannot run on the `gpu` device here: what heloom's CUDA backend found
/// missing (driver, device or NVRTC), with what to do instead.
pub fn gpu_unavailable() -> DeviceError {
    match crate::he_gpu::GpuHeDevice::cuda(0) {
        Err(e) => e,
        Ok(d) => DeviceError::Unavailable {
            device: "gpu".into(),
            reason: format!("{} is available", d.gpu().info().name),
            hint: "nothing is missing: open it with --devices gpu (or cpu-pool for the CPU)".into(),
        },
    }
}

/// Opens HE devices from a list such as `cpu-pool:1,gpu` (`cpu:t` means `cpu-pool:t`); `gpu` is the first CUDA
/// device, with a clear error where there is none; AES-only kinds are refused.
pub fn open_he_devices(specs: &[crate::spec::DeviceSpec]) -> Result<Vec<Box<dyn Device<HeJobs>>>> {
    let default = crate::spec::default_workers(specs, DeviceKind::CpuPool);
    // `cpu` means a pool share here; name them all `cpu-pool:t` (numbering repeats).
    let specs: Vec<crate::spec::DeviceSpec> = specs
        .iter()
        .map(|s| match s.kind {
            DeviceKind::Cpu => crate::spec::DeviceSpec {
                kind: DeviceKind::CpuPool,
                workers: Some(s.workers.unwrap_or(default)),
            },
            _ => crate::spec::DeviceSpec {
                kind: s.kind,
                workers: Some(s.workers.unwrap_or(default)),
            },
        })
        .collect();
    let names = crate::spec::device_names(&specs);
    let mut out: Vec<Box<dyn Device<HeJobs>>> = Vec::new();
    for (s, name) in specs.iter().zip(names) {
        let t = s.workers.unwrap_or(default);
        match s.kind {
            DeviceKind::Cpu | DeviceKind::CpuPool => {
                out.push(Box::new(CpuPoolDevice::new(t)?.with_name(name)));
            }
            DeviceKind::Gpu => {
                out.push(Box::new(crate::he_gpu::GpuHeDevice::cuda(0)?.with_name(name)));
            }
            DeviceKind::Soft | DeviceKind::Kernel => {
                return Err(DeviceError::BadSpec {
                    spec: s.kind.name().into(),
                    reason: "soft and kernel are AES engines; HE jobs run on cpu-pool (and, with the CUDA backend, gpu)"
                        .into(),
                })
            }
        }
    }
    Ok(out)
}

/// What an HE comparison runs.
#[derive(Clone, Debug)]
pub struct HeCompareConfig {
    /// log2 of the ring degree.
    pub log_n: u32,
    /// Jobs per run.
    pub jobs: usize,
    /// Graph variant of every job; `None` mixes all three.
    pub variant: Option<ExpVariant>,
    /// Timed repetitions.
    pub reps: usize,
    /// Combined methods besides every single device.
    pub methods: Vec<crate::balance::Method>,
    /// Input seed.
    pub seed: u64,
}

impl Default for HeCompareConfig {
    fn default() -> Self {
        HeCompareConfig {
            log_n: 13,
            jobs: 24,
            variant: None,
            reps: 3,
            methods: crate::balance::Method::COMBINED.to_vec(),
            seed: 1,
        }
    }
}

/// One method on the HE job stream.
#[derive(Clone, Debug, serde::Serialize)]
pub struct HeRunRow {
    /// Device name or balancer name.
    pub method: String,
    /// Whether this is a single device.
    pub single: bool,
    /// log2 N.
    pub log_n: u32,
    /// Jobs per run.
    pub jobs: usize,
    /// Best time over the repetitions, ms.
    pub ms: f64,
    /// Every repetition, ms.
    pub ms_reps: Vec<f64>,
    /// Ideal combined time 1 / Σ 1/T_d, ms.
    pub ideal_ms: f64,
    /// ideal / measured.
    pub efficiency: f64,
    /// Jobs per second.
    pub jobs_per_s: f64,
    /// Mean jobs each device ran.
    pub items_per_device: std::collections::BTreeMap<String, f64>,
    /// Largest decryption error over every job of every run.
    pub max_error: f64,
}

/// Runs the HE job stream on every device alone and under every combined balancer; every result is decrypted
/// and checked against e^x.
pub fn compare_he(
    devices: &[&dyn Device<HeJobs>],
    cfg: &HeCompareConfig,
    progress: &mut dyn FnMut(&str, usize, usize),
) -> Result<Vec<HeRunRow>> {
    if devices.is_empty() || cfg.jobs == 0 || cfg.reps == 0 {
        return Err(DeviceError::InvalidParameter(
            "HE compare needs devices, jobs and reps above zero".into(),
        ));
    }
    let jobs = match cfg.variant {
        Some(v) => HeJobs::new(cfg.log_n, cfg.jobs, v, cfg.seed)?,
        None => HeJobs::mixed(cfg.log_n, cfg.jobs, cfg.seed)?,
    };
    let names: Vec<String> = devices.iter().map(|d| d.info().name.clone()).collect();
    let methods = crate::compare::methods_for(devices.len(), &cfg.methods);
    let mut balancers: Vec<crate::balance::Balancer> = methods
        .iter()
        .map(|&m| crate::balance::Balancer::new(m).pin(false))
        .collect();
    let max_err = std::sync::Mutex::new(0.0f64);
    let verify = |out: &crate::balance::Outcome<HeCiphertext>| {
        let e = jobs.verify(&out.outputs)?;
        if let Ok(mut m) = max_err.lock() {
            *m = m.max(e);
        }
        Ok(())
    };
    let total = methods.len() * (cfg.reps + 1);
    let mut done = 0;
    let stats = crate::compare::run_methods(
        devices,
        &jobs,
        &mut balancers,
        cfg.reps,
        &verify,
        &mut |m| {
            done += 1;
            progress(m, done, total);
        },
    )?;
    let ideal = crate::compare::ideal_ms(&stats);
    let max_error = max_err.lock().map(|m| *m).unwrap_or(f64::NAN);
    Ok(stats
        .iter()
        .map(|st| HeRunRow {
            method: st.name.clone(),
            single: st.single,
            log_n: cfg.log_n,
            jobs: cfg.jobs,
            ms: st.best_ms(),
            ms_reps: st.ms.clone(),
            ideal_ms: ideal,
            efficiency: ideal / st.best_ms(),
            jobs_per_s: cfg.jobs as f64 / (st.best_ms() / 1e3),
            items_per_device: names
                .iter()
                .cloned()
                .zip(st.items.iter().copied())
                .collect(),
            max_error,
        })
        .collect())
}
