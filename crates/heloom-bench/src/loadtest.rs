//! `heloom loadtest`: the service's load generator and durability benchmark.
//!
//! Tenants of one `heloom serve` (spawned here in a temporary data directory, or one already
//! running) each upload their own key set and a few encrypted inputs, then submit e^x and
//! polynomial jobs at Poisson arrivals (seeded ChaCha) for a while; a pool of client threads
//! submits, long-polls (`wait`), fetches every result, decrypts it and checks it against the
//! same polynomial in f64. `/metrics` is sampled every 0.5 s. The report gives per-tenant
//! throughput, latency and queue wait, Jain's fairness index, and in durability mode (the
//! spawned server killed with SIGKILL every few seconds and restarted on the same data
//! directory, clients retrying with the same idempotency keys) what every accepted job became.
//!
//! Options in ([`LoadtestOptions`]), a serializable [`LoadtestReport`] out, [`render`] for the
//! table and [`save`] for JSON, text, CSV and SVG, like the other harnesses.

use crate::plot::{chart_builder, draw_legend, nth_colour, pe, svg_canvas};
use crate::report::save_json_and_text;
use crate::spawn::spawn_listening;
use crate::timing::Machine;
use anyhow::{anyhow, bail, Context as _, Result};
use heloom_ckks::{keygen, Context, Decryptor, Encryptor};
use heloom_runtime::graph::exp_coefficients;
use heloom_runtime::workload::default_params;
use heloom_serve::api::JobView;
use heloom_serve::client::{Client, ClientError, SubmitJob};
use heloom_serve::worker::Task;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;
use serde::Serialize;
use std::collections::{HashMap, VecDeque};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

/// The polynomial of `polynomial` jobs, lowest degree first (the demo's).
pub const POLY_COEFFICIENTS: [f64; 4] = [0.25, 0.5, -0.75, 0.125];

/// Degree of the Maclaurin polynomial the server evaluates for e^x.
pub const EXP_DEGREE: usize = 6;

/// Largest error allowed between a decrypted result and the same polynomial evaluated in f64
/// on the plaintext input (inputs in [-1, 1], 40-bit scale: the observed error is near 2^-25).
pub const ERROR_BOUND: f64 = 1.0 / (1u64 << 20) as f64;

/// Seconds between two `/metrics` samples.
pub const SAMPLE_PERIOD_S: f64 = 0.5;

/// The formula stated with the fairness indices.
pub const JAIN_FORMULA: &str = "J(x) = (sum x_i)^2 / (n * sum x_i^2), 1 = perfectly even, 1/n = \
one tenant gets everything; throughput: x_i = (jobs of tenant i completed within the arrival \
window) / (jobs tenant i submitted), i.e. its throughput over its offered rate; latency: x_i = \
tenant i's mean latency (submit to result fetched) over its completed jobs";

/// A job kind the load generator submits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum JobKind {
    /// e^x (degree-6 Maclaurin, the server's default graph shape).
    Exp,
    /// [`POLY_COEFFICIENTS`] in the power basis.
    Polynomial,
}

impl JobKind {
    /// The API's name of the kind.
    pub fn name(self) -> &'static str {
        match self {
            JobKind::Exp => "exp",
            JobKind::Polynomial => "polynomial",
        }
    }

    /// The coefficients, lowest degree first, the server evaluates for this kind.
    pub fn coefficients(self) -> Vec<f64> {
        match self {
            JobKind::Exp => exp_coefficients(EXP_DEGREE),
            JobKind::Polynomial => POLY_COEFFICIENTS.to_vec(),
        }
    }

    fn task(self) -> Task {
        match self {
            JobKind::Exp => Task::Exp { variant: None },
            JobKind::Polynomial => Task::Polynomial {
                coefficients: POLY_COEFFICIENTS.to_vec(),
            },
        }
    }
}

/// Parses a job mix such as `exp=0.7,polynomial=0.3` (weights need not add up to 1; they are
/// normalized).
pub fn parse_mix(s: &str) -> Result<Vec<(JobKind, f64)>> {
    let mut out: Vec<(JobKind, f64)> = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (name, w) = part
            .split_once('=')
            .ok_or_else(|| anyhow!("--mix {part:?}: write KIND=WEIGHT, e.g. exp=0.7"))?;
        let kind = match name.trim() {
            "exp" => JobKind::Exp,
            "polynomial" | "poly" => JobKind::Polynomial,
            other => bail!("--mix: unknown job kind {other:?}; use exp and polynomial"),
        };
        let w: f64 = w
            .trim()
            .parse()
            .map_err(|_| anyhow!("--mix {part:?}: the weight must be a number"))?;
        if !(w.is_finite() && w >= 0.0) {
            bail!("--mix {part:?}: the weight must be a finite number >= 0");
        }
        if out.iter().any(|(k, _)| *k == kind) {
            bail!("--mix: {} given twice", kind.name());
        }
        out.push((kind, w));
    }
    let total: f64 = out.iter().map(|p| p.1).sum();
    if total <= 0.0 {
        bail!("--mix {s:?}: give at least one kind with a positive weight");
    }
    Ok(out.into_iter().map(|(k, w)| (k, w / total)).collect())
}

/// Jain's fairness index of `xs` ([`JAIN_FORMULA`]); values that are not finite are left out,
/// and an empty or all-zero set counts as even (1).
pub fn jain_index(xs: &[f64]) -> f64 {
    let v: Vec<f64> = xs.iter().copied().filter(|x| x.is_finite()).collect();
    let sum: f64 = v.iter().sum();
    let sq: f64 = v.iter().map(|x| x * x).sum();
    if v.is_empty() || sq <= 0.0 {
        return 1.0;
    }
    sum * sum / (v.len() as f64 * sq)
}

/// The `p`-quantile (0..=1) of `xs` by nearest rank; NaN when empty.
pub fn percentile(xs: &[f64], p: f64) -> f64 {
    let mut v: Vec<f64> = xs.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let rank = (p.clamp(0.0, 1.0) * v.len() as f64).ceil() as usize;
    v[rank.clamp(1, v.len()) - 1]
}

/// Each tenant's arrival rate (jobs/s): tenant 0 submits `heavy` times the others' rate, and
/// together they submit `total`.
pub fn tenant_rates(total: f64, tenants: usize, heavy: f64) -> Vec<f64> {
    if tenants == 0 {
        return Vec::new();
    }
    let unit = total / ((tenants - 1) as f64 + heavy);
    (0..tenants)
        .map(|i| if i == 0 { heavy * unit } else { unit })
        .collect()
}

/// What one `/metrics` scrape says.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Scrape {
    /// `heloom_queue_depth` by tenant (tenants without queued or running jobs are absent).
    pub queue_depth: HashMap<String, f64>,
    /// `heloom_device_busy_threads`.
    pub busy_threads: f64,
    /// `heloom_device_threads`.
    pub threads: f64,
    /// `heloom_gpu_jobs_total` (summed over devices), when the server has a GPU.
    pub gpu_jobs: Option<f64>,
    /// `heloom_gpu_busy` (summed over devices), when the server has a GPU.
    pub gpu_busy: Option<f64>,
}

/// Reads the gauges the load test plots from Prometheus text.
pub fn parse_metrics(text: &str) -> Scrape {
    let mut s = Scrape::default();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let Some((name, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let Ok(v) = value.trim().parse::<f64>() else {
            continue;
        };
        if let Some(labels) = name.strip_prefix("heloom_queue_depth{") {
            if let Some(t) = labels
                .strip_prefix("tenant=\"")
                .and_then(|r| r.split('"').next())
            {
                s.queue_depth.insert(t.to_string(), v);
            }
        } else if name == "heloom_device_busy_threads" {
            s.busy_threads = v;
        } else if name == "heloom_device_threads" {
            s.threads = v;
        } else if name.starts_with("heloom_gpu_jobs_total{") {
            *s.gpu_jobs.get_or_insert(0.0) += v;
        } else if name.starts_with("heloom_gpu_busy{") {
            *s.gpu_busy.get_or_insert(0.0) += v;
        }
    }
    s
}

/// Which server the load goes to.
#[derive(Clone, Debug)]
pub enum ServerTarget {
    /// A `heloom serve` already running at `url`, with its data directory `data` (tokens are
    /// created there).
    Running {
        /// Its URL, e.g. `http://127.0.0.1:8787`.
        url: String,
        /// Its `--data` directory.
        data: PathBuf,
    },
    /// `exe serve` started here on a fresh temporary data directory.
    Spawn {
        /// The `heloom` binary.
        exe: PathBuf,
        /// `--threads` (default: the server's, every core).
        threads: Option<usize>,
    },
}

/// What `heloom loadtest` runs.
#[derive(Clone, Debug)]
pub struct LoadtestOptions {
    /// The server.
    pub server: ServerTarget,
    /// Number of tenants.
    pub tenants: usize,
    /// Jobs per second offered by all tenants together.
    pub rate: f64,
    /// Seconds of arrivals (with `kills`: at least until the last kill).
    pub duration_s: f64,
    /// Tenant 0 submits this many times the rate of each other tenant.
    pub heavy: f64,
    /// Job kinds and their shares.
    pub mix: Vec<(JobKind, f64)>,
    /// log2 of the ring degree.
    pub log_n: u32,
    /// Durability mode: SIGKILL the spawned server every this many seconds on average
    /// (uniform within +-50%) and restart it on the same data directory.
    pub kill_every_s: Option<f64>,
    /// Stop killing after this many kills (arrivals go on until then).
    pub kills: Option<usize>,
    /// Seed of the arrivals, the job choices and the inputs.
    pub seed: u64,
    /// Client threads submitting and waiting ([`FETCHERS`] more fetch and check results).
    pub clients: usize,
    /// Distinct encrypted inputs each tenant uploads.
    pub inputs_per_tenant: usize,
    /// Jobs submitted in the first this many seconds run and are checked, but are left out
    /// of the latency and queue-wait figures (the server's cold start: contexts, key sets).
    pub warmup_s: f64,
    /// Give up on one job after this many seconds.
    pub job_timeout_s: f64,
    /// Fetch, decrypt and check the results only once every client thread is done, so the
    /// checking does not take cores from a server on the same machine during the run. A job's
    /// latency then ends when the client sees it done, not when it has the result.
    pub check_after: bool,
    /// Closed loop, for capacity: each client thread submits its next job as soon as it has
    /// seen its last one end, until the duration is over (the rate only picks the tenant of
    /// each job). Open loop (the default): Poisson arrivals at the rate, every arrival of the
    /// window submitted however long the server takes.
    pub closed_loop: bool,
    /// Cost profile of a spawned server's scheduler: `"measure"` (this machine, measured once
    /// before the run), a built-in name or a profile JSON file; written to its data directory
    /// as `profile.json`, so restarts keep it. `None`: the server's default (built-in).
    pub server_profile: Option<String>,
}

impl LoadtestOptions {
    /// The defaults of `heloom loadtest` against `server`.
    pub fn new(server: ServerTarget) -> Self {
        Self {
            server,
            tenants: 4,
            rate: 2.0,
            duration_s: 20.0,
            heavy: 1.0,
            mix: vec![(JobKind::Exp, 0.7), (JobKind::Polynomial, 0.3)],
            log_n: 13,
            kill_every_s: None,
            kills: None,
            seed: 1,
            clients: 256,
            inputs_per_tenant: 4,
            warmup_s: 0.0,
            job_timeout_s: 600.0,
            check_after: false,
            closed_loop: false,
            server_profile: None,
        }
    }

    /// Whether the server is killed and restarted during the run.
    pub fn durability(&self) -> bool {
        self.kill_every_s.is_some()
    }

    /// Refuses options that cannot run.
    pub fn check(&self) -> Result<()> {
        if self.tenants == 0 {
            bail!("--tenants must be at least 1");
        }
        if !(self.rate.is_finite() && self.rate > 0.0) {
            bail!("--rate must be a positive number of jobs per second");
        }
        if !(self.duration_s.is_finite() && self.duration_s > 0.0) {
            bail!("--duration must be a positive number of seconds");
        }
        if !(self.warmup_s.is_finite() && self.warmup_s >= 0.0 && self.warmup_s < self.duration_s) {
            bail!("--warmup must be at least 0 and shorter than --duration");
        }
        if !(self.heavy.is_finite() && self.heavy > 0.0) {
            bail!("--heavy must be a positive factor");
        }
        if !(12..=16).contains(&self.log_n) {
            bail!(
                "--log-n {}: the load test runs N = 2^12 .. 2^16",
                self.log_n
            );
        }
        if self.mix.is_empty() {
            bail!("--mix: give at least one job kind");
        }
        if self.clients == 0 || self.inputs_per_tenant == 0 {
            bail!("--clients and --inputs must be at least 1");
        }
        if let Some(k) = self.kill_every_s {
            if !(k.is_finite() && k > 0.0) {
                bail!("--kill-every must be a positive number of seconds");
            }
            if matches!(self.server, ServerTarget::Running { .. }) {
                bail!(
                    "--kill-every kills the server: it needs the server this run spawns (leave out --url)"
                );
            }
        }
        if self.kills.is_some() && self.kill_every_s.is_none() {
            bail!("--kills needs --kill-every");
        }
        if self.kills == Some(0) {
            bail!("--kills must be at least 1");
        }
        if self.server_profile.is_some() && matches!(self.server, ServerTarget::Running { .. }) {
            bail!(
                "--profile sets the cost profile of the server this run spawns; a running server \
                 keeps its own (its --profile)"
            );
        }
        Ok(())
    }

    /// Whether a spawned server needs `--allow-insecure` (below 128-bit security: N < 2^14
    /// with the load test's moduli).
    pub fn insecure(&self) -> bool {
        self.log_n < 14
    }
}

/// What happens while the test runs, for a progress display.
#[derive(Clone, Debug)]
pub enum Event {
    /// A setup step.
    Setup(String),
    /// A notable event (a kill, a restart).
    Note(String),
    /// The running counts, every [`SAMPLE_PERIOD_S`].
    Status(LiveStatus),
}

/// The running counts.
#[derive(Clone, Debug, Default, Serialize)]
pub struct LiveStatus {
    /// Seconds since the arrivals began.
    pub elapsed_s: f64,
    /// Jobs expected over the arrival window (rate x duration).
    pub expected: usize,
    /// Jobs handed to a client thread.
    pub submitted: usize,
    /// Jobs with a result fetched and checked.
    pub done: usize,
    /// 429 answers.
    pub refused: usize,
    /// Jobs whose decrypted result was wrong.
    pub wrong: usize,
    /// Jobs that failed (on the server or on the way).
    pub failed: usize,
    /// Kills so far.
    pub kills: usize,
    /// Sum of the sampled queue depths of this run's tenants.
    pub queued: f64,
    /// Sampled busy threads.
    pub busy_threads: f64,
    /// Whether the arrivals are over (draining).
    pub draining: bool,
}

/// One job as the load test saw it.
#[derive(Clone, Debug, Default, Serialize)]
pub struct JobRow {
    /// Tenant index.
    pub tenant: usize,
    /// Number of the job among its tenant's.
    pub seq: usize,
    /// `exp` or `polynomial`.
    pub kind: &'static str,
    /// The idempotency key sent with every try.
    pub idempotency_key: String,
    /// When the job was due, s since the start.
    pub scheduled_s: f64,
    /// When its first submission went out, s since the start.
    pub submitted_s: f64,
    /// Whether the server accepted it.
    pub accepted: bool,
    /// 429 answers to its submissions.
    pub refusals: u32,
    /// Submissions sent (retries included).
    pub submit_tries: u32,
    /// Distinct job ids the server returned for the idempotency key (one when all is well).
    pub job_ids: Vec<i64>,
    /// Final state (`done`, `failed`, ...; `refused` or `error` when never accepted).
    pub state: String,
    /// Runs the server counted.
    pub attempts: i64,
    /// Accepted, Unix ms (server clock).
    pub created_ms: Option<i64>,
    /// Last started, Unix ms.
    pub started_ms: Option<i64>,
    /// Ended, Unix ms.
    pub finished_ms: Option<i64>,
    /// When its result was fetched and checked, s since the start (with `check_after`: when
    /// the client saw the job done).
    pub fetched_s: Option<f64>,
    /// Submission to result fetched (with `check_after`: to the job seen done), ms.
    pub latency_ms: Option<f64>,
    /// Accepted to (last) started, ms.
    pub queue_wait_ms: Option<f64>,
    /// Largest |decrypted - expected| over the slots.
    pub max_error: Option<f64>,
    /// Whether the decrypted result is within [`ERROR_BOUND`].
    pub correct: Option<bool>,
    /// Connection errors ridden out (durability mode).
    pub reconnects: u32,
    /// What went wrong.
    pub error: Option<String>,
}

impl JobRow {
    fn done(&self) -> bool {
        self.state == "done" && self.fetched_s.is_some()
    }
}

/// One `/metrics` sample.
#[derive(Clone, Debug, Serialize)]
pub struct Sample {
    /// Seconds since the start.
    pub t_s: f64,
    /// Whether the server answered.
    pub up: bool,
    /// Queue depth of each tenant.
    pub queue_depth: Vec<f64>,
    /// Busy threads.
    pub busy_threads: f64,
    /// The executor's threads.
    pub threads: f64,
    /// Jobs the server's GPU has run since its start (servers with a GPU).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu_jobs: Option<f64>,
    /// Whether a job was on the GPU (servers with a GPU).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu_busy: Option<f64>,
}

/// Median, 99th percentile, mean and maximum of a set of times, ms.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Spread {
    /// Median.
    pub p50: f64,
    /// 99th percentile (nearest rank).
    pub p99: f64,
    /// Mean.
    pub mean: f64,
    /// Maximum.
    pub max: f64,
}

impl Spread {
    fn of(xs: &[f64]) -> Self {
        let v: Vec<f64> = xs.iter().copied().filter(|x| x.is_finite()).collect();
        let mean = if v.is_empty() {
            f64::NAN
        } else {
            v.iter().sum::<f64>() / v.len() as f64
        };
        Self {
            p50: percentile(&v, 0.5),
            p99: percentile(&v, 0.99),
            mean,
            max: v.iter().copied().fold(f64::NAN, f64::max),
        }
    }
}

/// One tenant's outcome.
#[derive(Clone, Debug, Serialize)]
pub struct TenantStats {
    /// Tenant name on the server.
    pub name: String,
    /// Offered rate, jobs/s.
    pub rate_jobs_s: f64,
    /// Jobs submitted (first tries).
    pub submitted: usize,
    /// Jobs the server accepted.
    pub accepted: usize,
    /// Jobs never accepted because of 429 answers.
    pub refused_jobs: usize,
    /// 429 answers in all (retries included).
    pub refusals: usize,
    /// Jobs done with their result fetched.
    pub done: usize,
    /// Jobs that failed on the server.
    pub failed: usize,
    /// Jobs lost on the way (connection errors, timeouts) in normal mode.
    pub errors: usize,
    /// Decrypted results outside the bound.
    pub wrong: usize,
    /// Jobs completed (result fetched) within the arrival window.
    pub done_in_window: usize,
    /// `done_in_window` over the window, jobs/s.
    pub throughput_jobs_s: f64,
    /// `done_in_window / submitted` (throughput over offered load).
    pub completion_ratio: f64,
    /// Submission to result fetched, ms, over done jobs.
    pub latency_ms: Spread,
    /// Accepted to started (server clock), ms, over done jobs.
    pub queue_wait_ms: Spread,
    /// Largest decryption error.
    pub max_error: f64,
}

/// All tenants together.
#[derive(Clone, Debug, Serialize)]
pub struct Overall {
    /// Jobs submitted.
    pub submitted: usize,
    /// Jobs accepted.
    pub accepted: usize,
    /// Jobs never accepted (429).
    pub refused_jobs: usize,
    /// 429 answers.
    pub refusals: usize,
    /// Jobs done.
    pub done: usize,
    /// Jobs failed on the server.
    pub failed: usize,
    /// Jobs lost on the way.
    pub errors: usize,
    /// Wrong results.
    pub wrong: usize,
    /// Jobs completed within the arrival window over the window, jobs/s.
    pub throughput_jobs_s: f64,
    /// All jobs done over the time to the last result, jobs/s.
    pub sustained_jobs_s: f64,
    /// Latency over every done job, ms.
    pub latency_ms: Spread,
    /// Queue wait over every done job, ms.
    pub queue_wait_ms: Spread,
    /// Longest delay between a job's arrival and its first submission (the client pool's
    /// lag), ms.
    pub max_submit_lag_ms: f64,
    /// Largest decryption error.
    pub max_error: f64,
    /// Mean busy threads over the samples while the server was up.
    pub mean_busy_threads: f64,
    /// Jobs the server's GPU ran during the run (its counter's growth between the first and
    /// the last sample; servers with a GPU).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu_jobs: Option<f64>,
}

/// Jain's fairness indices.
#[derive(Clone, Debug, Serialize)]
pub struct Fairness {
    /// The formula and what x is.
    pub formula: String,
    /// Over the tenants' completion ratios (throughput over offered rate).
    pub jain_throughput: f64,
    /// Over the tenants' mean latencies.
    pub jain_latency: f64,
}

/// What the kills did to the accepted jobs.
#[derive(Clone, Debug, Serialize)]
pub struct Durability {
    /// Mean seconds between kills.
    pub kill_every_s: f64,
    /// Kills done.
    pub kills: usize,
    /// When each kill happened, s since the start.
    pub kill_times_s: Vec<f64>,
    /// Kill to the restarted server's `/readyz` answering 200, ms, per kill.
    pub restart_ms: Vec<f64>,
    /// Median restart time, ms.
    pub restart_p50_ms: f64,
    /// Longest restart time, ms.
    pub restart_max_ms: f64,
    /// Jobs accepted.
    pub accepted: usize,
    /// Accepted jobs done once: one job id for the key (every retry), once in the server's
    /// list, result fetched and correct.
    pub completed_exactly_once: usize,
    /// Accepted jobs that never completed (or vanished from the server).
    pub lost: usize,
    /// Idempotency keys that mapped to more than one job id.
    pub duplicated: usize,
    /// Wrong results.
    pub wrong: usize,
    /// Jobs that failed on the server.
    pub failed: usize,
    /// Jobs the server ran more than once (a kill interrupted a run).
    pub rerun: usize,
    /// Submissions sent again with the same key after a connection error (each had to
    /// answer the same job id).
    pub resubmissions: usize,
    /// Jobs that rode out at least one connection error (submitting, waiting or fetching).
    pub jobs_with_connection_errors: usize,
    /// Jobs whose first submission got no answer and was sent again with the same key.
    pub submissions_retried: usize,
}

/// The outcome of a load test.
#[derive(Clone, Debug, Serialize)]
pub struct LoadtestReport {
    /// This machine (CPU model, cores, load averages at the start and the end: the client
    /// and the server share it).
    pub machine: Machine,
    /// The server's URL.
    pub url: String,
    /// Whether this run spawned the server.
    pub spawned: bool,
    /// The executor's threads (from `/metrics`).
    pub server_threads: f64,
    /// log2 of the ring degree.
    pub log_n: u32,
    /// Whether the parameters are below 128-bit security (spawned with `--allow-insecure`).
    pub insecure: bool,
    /// Tenants.
    pub tenants: usize,
    /// Offered jobs/s in all.
    pub rate_jobs_s: f64,
    /// Tenant 0's rate over each other tenant's.
    pub heavy: f64,
    /// Job kinds and shares.
    pub mix: Vec<(JobKind, f64)>,
    /// Seconds at the start left out of the latency and queue-wait figures.
    pub warmup_s: f64,
    /// Seconds asked for.
    pub duration_s: f64,
    /// Seed.
    pub seed: u64,
    /// Client threads.
    pub clients: usize,
    /// Results were fetched and checked after the run (`--check-after`).
    pub check_after: bool,
    /// Inputs per tenant.
    pub inputs_per_tenant: usize,
    /// Seconds of setup (keys, inputs, uploads).
    pub setup_s: f64,
    /// CPU seconds this process (the clients) used, setup included.
    pub client_cpu_s: f64,
    /// CPU seconds the spawned server processes used, setup included (Linux; `None` for a
    /// running server).
    pub server_cpu_s: Option<f64>,
    /// Unix ms of the start (time 0 of every `_s` field; the `_ms` job times are Unix ms).
    pub start_unix_ms: i64,
    /// The arrival window, s.
    pub window_s: f64,
    /// Start to the last result fetched, s.
    pub makespan_s: f64,
    /// The bound on the decryption error.
    pub error_bound: f64,
    /// Per tenant.
    pub per_tenant: Vec<TenantStats>,
    /// All tenants.
    pub overall: Overall,
    /// Fairness.
    pub fairness: Fairness,
    /// Durability mode's outcome.
    pub durability: Option<Durability>,
    /// Whether every check passed (no wrong, failed, lost or duplicated job).
    pub ok: bool,
    /// What did not pass.
    pub problems: Vec<String>,
    /// Every job (in `jobs.csv`, not in the JSON).
    #[serde(skip)]
    pub jobs: Vec<JobRow>,
    /// Every `/metrics` sample (in `metrics.csv`, not in the JSON).
    #[serde(skip)]
    pub samples: Vec<Sample>,
}

// ---------------------------------------------------------------------------------------------
// Talking to the server without a token.

/// `host:port` of an `http://` URL.
fn authority(url: &str) -> Result<String> {
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| anyhow!("{url}: the load test talks plain http:// (loopback)"))?;
    Ok(rest.split('/').next().unwrap_or(rest).to_string())
}

/// `GET path` over HTTP/1.0 (so the body is never chunked): status and body.
pub(crate) fn http_get(url: &str, path: &str, timeout: Duration) -> Result<(u16, String)> {
    use std::net::ToSocketAddrs;
    let auth = authority(url)?;
    let addr = auth
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| anyhow!("{auth}: no address"))?;
    let mut s = std::net::TcpStream::connect_timeout(&addr, timeout)?;
    s.set_read_timeout(Some(timeout))?;
    s.set_write_timeout(Some(timeout))?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: {auth}\r\n\r\n")?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf)?;
    let text = String::from_utf8_lossy(&buf);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| anyhow!("{url}{path}: not an HTTP answer"))?;
    Ok((status, body.to_string()))
}

// ---------------------------------------------------------------------------------------------
// The spawned server.

/// A `heloom serve` process of this run.
pub(crate) struct Spawned {
    exe: PathBuf,
    data: PathBuf,
    threads: Option<usize>,
    insecure: bool,
    /// Further `heloom serve` flags.
    extra: Vec<String>,
    child: Child,
    port: u16,
    log: Arc<Mutex<VecDeque<String>>>,
}

impl Spawned {
    /// Starts `exe serve` on `data` at `port` (0: any free one) and waits until it listens.
    pub(crate) fn start(
        exe: &Path,
        data: &Path,
        threads: Option<usize>,
        insecure: bool,
        port: u16,
    ) -> Result<Self> {
        Self::start_with(exe, data, threads, insecure, port, &[])
    }

    /// [`Spawned::start`] with further `heloom serve` flags.
    pub(crate) fn start_with(
        exe: &Path,
        data: &Path,
        threads: Option<usize>,
        insecure: bool,
        port: u16,
        extra: &[String],
    ) -> Result<Self> {
        let log = Arc::new(Mutex::new(VecDeque::new()));
        let (child, port) = start_process(exe, data, threads, insecure, port, extra, &log)?;
        Ok(Self {
            exe: exe.to_path_buf(),
            data: data.to_path_buf(),
            threads,
            insecure,
            extra: extra.to_vec(),
            child,
            port,
            log,
        })
    }

    /// The server's process id.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    pub(crate) fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// SIGKILL, then a new process on the same data directory and port.
    fn kill_and_restart(&mut self) -> Result<()> {
        self.kill();
        // A port freed by SIGKILL can be taken again at once (std sets SO_REUSEADDR), but a
        // try can still lose a race: retry for a few seconds.
        let mut last = None;
        for _ in 0..50 {
            match start_process(
                &self.exe,
                &self.data,
                self.threads,
                self.insecure,
                self.port,
                &self.extra,
                &self.log,
            ) {
                Ok((child, _)) => {
                    self.child = child;
                    return Ok(());
                }
                Err(e) => last = Some(e),
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Err(last.unwrap_or_else(|| anyhow!("restarting the server failed")))
    }

    pub(crate) fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    pub(crate) fn last_log(&self) -> String {
        let log = self.log.lock().unwrap_or_else(|p| p.into_inner());
        log.iter().cloned().collect::<Vec<_>>().join("\n")
    }
}

/// Spawns the server and reads its stderr until it names its address; the rest of its log is
/// kept (last lines) by a thread so that it never blocks on a full pipe.
fn start_process(
    exe: &Path,
    data: &Path,
    threads: Option<usize>,
    insecure: bool,
    port: u16,
    extra: &[String],
    log: &Arc<Mutex<VecDeque<String>>>,
) -> Result<(Child, u16)> {
    let mut cmd = Command::new(exe);
    cmd.args(["serve", "--listen", &format!("127.0.0.1:{port}"), "--data"])
        .arg(data)
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    if let Some(t) = threads {
        cmd.args(["--threads", &t.to_string()]);
    }
    if insecure {
        cmd.arg("--allow-insecure");
    }
    cmd.args(extra);
    let sink = Arc::clone(log);
    let mut server = spawn_listening(&mut cmd, move |line| push_log(&sink, line))?;
    match server.port() {
        Some(p) => Ok((server.child, p)),
        None => {
            let _ = server.child.kill();
            let _ = server.child.wait();
            bail!(
                "{} serve printed an address without a port: {}",
                exe.display(),
                server.url
            )
        }
    }
}

fn push_log(log: &Mutex<VecDeque<String>>, line: &str) {
    let mut l = log.lock().unwrap_or_else(|p| p.into_inner());
    if l.len() >= 40 {
        l.pop_front();
    }
    l.push_back(line.to_string());
}

/// Waits until `/readyz` answers 200 (at most `limit`).
pub(crate) fn wait_ready(url: &str, limit: Duration) -> Result<()> {
    let t = Instant::now();
    loop {
        if let Ok((200, _)) = http_get(url, "/readyz", Duration::from_secs(1)) {
            return Ok(());
        }
        if t.elapsed() > limit {
            bail!("the server at {url} was not ready within {:?}", limit);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

// ---------------------------------------------------------------------------------------------
// Tenants and jobs.

/// One tenant's keys, inputs and client.
struct Tenant {
    name: String,
    client: Client,
    key_id: String,
    /// Uploaded input id and its plaintext values.
    inputs: Vec<(String, Vec<f64>)>,
    dec: Decryptor<u64>,
    rate: f64,
}

/// A job due at `at_s`.
struct Planned {
    tenant: usize,
    seq: usize,
    at_s: f64,
    kind: JobKind,
    input: usize,
}

/// A done job on its way to a fetcher.
struct ToFetch {
    row: JobRow,
    id: i64,
    kind: JobKind,
    input: usize,
    deadline: Instant,
    /// When the client saw the job done, s since the start.
    done_seen_s: f64,
}

/// How a job's wait ended.
enum Waited {
    /// Done: on to a fetcher.
    Done(ToFetch),
    /// Any other end (refused, failed, lost): its final row.
    Ended(JobRow),
}

/// Threads that fetch, decrypt and check results.
pub const FETCHERS: usize = 4;

/// Done jobs waiting for a fetcher, one queue per tenant. The fetchers stand in for each
/// tenant's own client machine: a free fetcher serves the tenant with the fewest fetches under
/// way (then the job seen done first), so one tenant's flood of results never queues another
/// tenant's result behind it, as it could not between separate clients.
struct FetchQueue {
    state: Mutex<FetchState>,
    ready: std::sync::Condvar,
}

struct FetchState {
    queued: Vec<VecDeque<ToFetch>>,
    busy: Vec<usize>,
    closed: bool,
}

impl FetchQueue {
    fn new(tenants: usize) -> Self {
        Self {
            state: Mutex::new(FetchState {
                queued: (0..tenants).map(|_| VecDeque::new()).collect(),
                busy: vec![0; tenants],
                closed: false,
            }),
            ready: std::sync::Condvar::new(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, FetchState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn push(&self, f: ToFetch) {
        let mut s = self.lock();
        let t = f.row.tenant.min(s.queued.len().saturating_sub(1));
        s.queued[t].push_back(f);
        drop(s);
        self.ready.notify_one();
    }

    /// No more jobs come: the fetchers drain the queues and end.
    fn close(&self) {
        self.lock().closed = true;
        self.ready.notify_all();
    }

    /// The next job to fetch (the tenant's fetch counted as under way until
    /// [`Self::finished`]), or `None` once closed and drained.
    fn take(&self) -> Option<ToFetch> {
        let mut s = self.lock();
        loop {
            let pick = (0..s.queued.len())
                .filter(|&t| !s.queued[t].is_empty())
                .min_by(|&a, &b| {
                    let (fa, fb) = (&s.queued[a][0], &s.queued[b][0]);
                    s.busy[a]
                        .cmp(&s.busy[b])
                        .then(fa.done_seen_s.total_cmp(&fb.done_seen_s))
                });
            if let Some(t) = pick {
                s.busy[t] += 1;
                return s.queued[t].pop_front();
            }
            if s.closed {
                return None;
            }
            s = self.ready.wait(s).unwrap_or_else(|p| p.into_inner());
        }
    }

    fn finished(&self, tenant: usize) {
        let mut s = self.lock();
        if let Some(b) = s.busy.get_mut(tenant) {
            *b = b.saturating_sub(1);
        }
    }
}

/// What the threads share while the test runs.
struct Shared<'a> {
    opts: &'a LoadtestOptions,
    tenants: &'a [Tenant],
    ctx: &'a Arc<Context<u64>>,
    run_id: String,
    t0: Instant,
    t0_unix_ms: i64,
    durable: bool,
    rows: Mutex<Vec<JobRow>>,
    submitted: AtomicUsize,
    /// Planned jobs a client thread has finished with (closed loop: the jobs in flight are
    /// `submitted - settled`).
    settled: AtomicUsize,
    done: AtomicUsize,
    refused: AtomicUsize,
    wrong: AtomicUsize,
    failed: AtomicUsize,
    kills: AtomicUsize,
    arrivals_over: AtomicBool,
    pool_over: AtomicBool,
    /// Every client thread has ended (the fetchers may start with `check_after`).
    clients_over: AtomicBool,
    /// [`LoadtestOptions::check_after`].
    check_after: bool,
    /// The server could not be restarted: stop arrivals and retries.
    abort: AtomicBool,
    /// Seconds at which the last kill's restart was ready (with `kills`).
    kills_done_at: Mutex<Option<f64>>,
    resubmissions: AtomicUsize,
}

impl Shared<'_> {
    fn now_s(&self) -> f64 {
        self.t0.elapsed().as_secs_f64()
    }

    /// When the arrivals end, once known.
    fn window_end(&self) -> Option<f64> {
        match self.opts.kills {
            Some(_) => self
                .kills_done_at
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .map(|t| t.max(self.opts.duration_s)),
            None => Some(self.opts.duration_s),
        }
    }

    /// Whether an error is worth riding out: a broken or refused connection while the server
    /// restarts (durability mode only).
    fn retryable(&self, e: &ClientError) -> bool {
        // An answer cut off by the kill can also arrive as one that does not decode.
        self.durable
            && !self.abort.load(Ordering::SeqCst)
            && matches!(e, ClientError::Transport { .. } | ClientError::Decode(_))
    }

    fn backoff(attempt: u32) -> Duration {
        Duration::from_millis((50u64 << attempt.min(5)).min(1000))
    }

    /// Submits with the job's key until the server answers (retrying 429s and, in durability
    /// mode, connection errors); `Ok(None)` when it was refused for good.
    fn submit(
        &self,
        t: &Tenant,
        sj: &SubmitJob,
        row: &mut JobRow,
        deadline: Instant,
    ) -> std::result::Result<Option<JobView>, String> {
        let mut tries = 0u32;
        loop {
            row.submit_tries += 1;
            match t.client.submit(sj) {
                Ok(v) => return Ok(Some(v)),
                Err(ClientError::Api {
                    status: 429,
                    retry_after_s,
                    ..
                }) => {
                    row.refusals += 1;
                    self.refused.fetch_add(1, Ordering::Relaxed);
                    if !self.durable {
                        return Ok(None);
                    }
                    // Honour Retry-After (capped so a test never stalls for long).
                    let wait = Duration::from_secs(retry_after_s.unwrap_or(1).clamp(1, 30));
                    if Instant::now() + wait > deadline {
                        return Ok(None);
                    }
                    std::thread::sleep(wait);
                }
                Err(e) if self.retryable(&e) && Instant::now() < deadline => {
                    row.reconnects += 1;
                    std::thread::sleep(Self::backoff(tries));
                    tries += 1;
                }
                Err(e) => return Err(e.to_string()),
            }
        }
    }

    /// Records one more job id answered for the row's key.
    fn note_id(row: &mut JobRow, id: i64) {
        if !row.job_ids.contains(&id) {
            row.job_ids.push(id);
        }
    }

    /// Submits one job and waits for its end.
    fn run_job(&self, p: &Planned) -> Waited {
        let t = &self.tenants[p.tenant];
        let key = format!("lt-{}-t{}-{}", self.run_id, p.tenant, p.seq);
        let mut row = JobRow {
            tenant: p.tenant,
            seq: p.seq,
            kind: p.kind.name(),
            idempotency_key: key.clone(),
            scheduled_s: p.at_s,
            submitted_s: self.now_s(),
            accepted: false,
            refusals: 0,
            submit_tries: 0,
            job_ids: Vec::new(),
            state: "error".into(),
            attempts: 0,
            created_ms: None,
            started_ms: None,
            finished_ms: None,
            fetched_s: None,
            latency_ms: None,
            queue_wait_ms: None,
            max_error: None,
            correct: None,
            reconnects: 0,
            error: None,
        };
        let deadline = Instant::now() + Duration::from_secs_f64(self.opts.job_timeout_s);
        let (input_id, _) = &t.inputs[p.input];
        let sj = SubmitJob::new(&key, &t.key_id, vec![input_id.clone()], p.kind.task());
        let view = match self.submit(t, &sj, &mut row, deadline) {
            Ok(Some(v)) => v,
            Ok(None) => {
                row.state = "refused".into();
                return Waited::Ended(row);
            }
            Err(e) => {
                row.error = Some(format!("submitting: {e}"));
                self.failed.fetch_add(1, Ordering::Relaxed);
                return Waited::Ended(row);
            }
        };
        row.accepted = true;
        let id = view.id;
        Self::note_id(&mut row, id);
        // Wait for the end; after a broken connection, submit the same key again (it must
        // answer the same job) once the server is back, then wait on.
        let mut tries = 0u32;
        let end = loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                row.error = Some(format!(
                    "job {id} did not end within {} s",
                    self.opts.job_timeout_s
                ));
                break None;
            }
            match t.client.wait(id, left.min(Duration::from_secs(30))) {
                Ok(v) => break Some(v),
                Err(ClientError::Timeout { .. }) => {}
                Err(e) if self.retryable(&e) => {
                    row.reconnects += 1;
                    std::thread::sleep(Self::backoff(tries));
                    tries += 1;
                    match self.submit(t, &sj, &mut row, deadline) {
                        Ok(Some(v)) => {
                            self.resubmissions.fetch_add(1, Ordering::Relaxed);
                            Self::note_id(&mut row, v.id);
                        }
                        Ok(None) => {}
                        Err(e) => {
                            row.error = Some(format!("submitting again: {e}"));
                            break None;
                        }
                    }
                }
                Err(e) => {
                    row.error = Some(format!("waiting: {e}"));
                    break None;
                }
            }
        };
        let Some(v) = end else {
            self.failed.fetch_add(1, Ordering::Relaxed);
            return Waited::Ended(row);
        };
        row.state = v.state.clone();
        row.attempts = v.attempts;
        row.created_ms = Some(v.created_ms);
        row.started_ms = v.started_ms;
        row.finished_ms = v.finished_ms;
        row.queue_wait_ms = v.started_ms.map(|s| (s - v.created_ms) as f64);
        if v.state != "done" {
            row.error = Some(format!(
                "job {id} ended {}: {}",
                v.state,
                v.error.unwrap_or_default()
            ));
            self.failed.fetch_add(1, Ordering::Relaxed);
            return Waited::Ended(row);
        }
        Waited::Done(ToFetch {
            row,
            id,
            kind: p.kind,
            input: p.input,
            deadline,
            done_seen_s: self.now_s(),
        })
    }

    /// Fetches a done job's result, decrypts and checks it (on one of a few fetcher threads,
    /// so that the large buffers of results and decryptions reuse a few threads' memory
    /// instead of faulting in fresh pages on each of hundreds of waiting threads).
    fn fetch(&self, f: ToFetch) -> JobRow {
        let ToFetch {
            mut row,
            id,
            kind,
            input,
            deadline,
            done_seen_s,
        } = f;
        let t = &self.tenants[row.tenant];
        let x = &t.inputs[input].1;
        let mut tries = 0u32;
        let cts = loop {
            match t.client.result(id, self.ctx) {
                Ok(c) => break Ok(c),
                Err(e) if self.retryable(&e) && Instant::now() < deadline => {
                    row.reconnects += 1;
                    std::thread::sleep(Self::backoff(tries));
                    tries += 1;
                }
                Err(e) => break Err(e),
            }
        };
        // Checked after the run, a job's end is when the client saw it done (fetching and
        // checking waited for the run to end); else when its result was in hand.
        let fetched = if self.check_after {
            done_seen_s
        } else {
            self.now_s()
        };
        let checked = cts
            .map_err(|e| e.to_string())
            .and_then(|cts| {
                let ct = cts
                    .first()
                    .ok_or_else(|| "the result holds no ciphertext".to_string())?;
                t.dec.decrypt(ct).map_err(|e| e.to_string())
            })
            .map(|got| {
                let c = kind.coefficients();
                got.iter()
                    .zip(x)
                    .map(|(g, &v)| (g - c.iter().rev().fold(0.0, |a, k| a * v + k)).abs())
                    .fold(0.0, f64::max)
            });
        match checked {
            Ok(err) => {
                row.fetched_s = Some(fetched);
                row.latency_ms = Some((fetched - row.submitted_s) * 1e3);
                row.max_error = Some(err);
                let ok = err <= ERROR_BOUND;
                row.correct = Some(ok);
                self.done.fetch_add(1, Ordering::Relaxed);
                if !ok {
                    self.wrong.fetch_add(1, Ordering::Relaxed);
                }
            }
            Err(e) => {
                row.error = Some(format!("fetching or decrypting the result: {e}"));
                self.failed.fetch_add(1, Ordering::Relaxed);
            }
        }
        row
    }

    /// Hands out the jobs at their arrival times until the window closes.
    fn schedule(&self, tx: mpsc::Sender<Planned>) {
        let mut rngs: Vec<ChaCha20Rng> = (0..self.tenants.len())
            .map(|i| ChaCha20Rng::seed_from_u64(self.opts.seed.wrapping_mul(1000) + i as u64))
            .collect();
        let gap = |rng: &mut ChaCha20Rng, rate: f64| -> f64 {
            let u: f64 = rng.gen_range(0.0..1.0);
            -(1.0 - u).ln() / rate
        };
        let mut next: Vec<f64> = rngs
            .iter_mut()
            .zip(self.tenants)
            .map(|(r, t)| gap(r, t.rate))
            .collect();
        let mut seqs = vec![0usize; self.tenants.len()];
        'outer: loop {
            let (i, mut at) = next
                .iter()
                .copied()
                .enumerate()
                .min_by(|a, b| a.1.total_cmp(&b.1))
                .unwrap_or((0, f64::INFINITY));
            let virtual_at = at;
            if self.opts.closed_loop {
                // The next job goes out as soon as a client thread is free, until the window
                // ends; the Poisson times only choose its tenant.
                loop {
                    let end = self.window_end().unwrap_or(self.opts.duration_s);
                    if self.abort.load(Ordering::SeqCst) || self.now_s() >= end {
                        break 'outer;
                    }
                    let in_flight =
                        self.submitted.load(Ordering::SeqCst) - self.settled.load(Ordering::SeqCst);
                    if in_flight < self.opts.clients {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(1));
                }
                at = self.now_s();
            } else {
                loop {
                    if self.abort.load(Ordering::SeqCst)
                        || self.window_end().is_some_and(|end| at >= end)
                    {
                        break 'outer;
                    }
                    let now = self.now_s();
                    if now >= at {
                        break;
                    }
                    std::thread::sleep(Duration::from_secs_f64((at - now).min(0.1)));
                }
            }
            let rng = &mut rngs[i];
            let mut pick: f64 = rng.gen_range(0.0..1.0);
            let mut kind = self.opts.mix[0].0;
            for &(k, w) in &self.opts.mix {
                kind = k;
                if pick < w {
                    break;
                }
                pick -= w;
            }
            let input = rng.gen_range(0..self.tenants[i].inputs.len());
            self.submitted.fetch_add(1, Ordering::Relaxed);
            if tx
                .send(Planned {
                    tenant: i,
                    seq: seqs[i],
                    at_s: at,
                    kind,
                    input,
                })
                .is_err()
            {
                break;
            }
            seqs[i] += 1;
            next[i] = virtual_at + gap(rng, self.tenants[i].rate);
        }
        self.arrivals_over.store(true, Ordering::SeqCst);
    }

    /// Kills the server every `every` s (+-50%) and restarts it, until the arrivals end or
    /// the kills asked for are done.
    fn killer(
        &self,
        server: &Mutex<Spawned>,
        every: f64,
        restarts: &Mutex<Vec<(f64, f64)>>,
        observe: &(dyn Fn(Event) + Sync),
    ) -> Result<()> {
        let mut rng = ChaCha20Rng::seed_from_u64(self.opts.seed ^ 0x6b11);
        loop {
            let gap = every * rng.gen_range(0.5..1.5);
            let at = Instant::now() + Duration::from_secs_f64(gap);
            while Instant::now() < at {
                if self.arrivals_over.load(Ordering::SeqCst) {
                    return Ok(());
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            if self.arrivals_over.load(Ordering::SeqCst) {
                return Ok(());
            }
            let killed_at = self.now_s();
            let t = Instant::now();
            let url = {
                let mut s = server.lock().unwrap_or_else(|p| p.into_inner());
                s.kill_and_restart()?;
                s.url()
            };
            wait_ready(&url, Duration::from_secs(60))?;
            let ms = t.elapsed().as_secs_f64() * 1e3;
            restarts
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push((killed_at, ms));
            let n = self.kills.fetch_add(1, Ordering::SeqCst) + 1;
            observe(Event::Note(format!(
                "kill {n} at {killed_at:.1} s: SIGKILL, restarted and ready in {ms:.0} ms"
            )));
            if self.opts.kills.is_some_and(|k| n >= k) {
                *self.kills_done_at.lock().unwrap_or_else(|p| p.into_inner()) = Some(self.now_s());
                return Ok(());
            }
        }
    }

    /// Scrapes `/metrics` every [`SAMPLE_PERIOD_S`] until the pool is done.
    fn sampler(
        &self,
        url: &str,
        samples: &Mutex<Vec<Sample>>,
        expected: usize,
        observe: &(dyn Fn(Event) + Sync),
    ) {
        let mut k = 0u64;
        while !self.pool_over.load(Ordering::SeqCst) {
            let t_s = self.now_s();
            let sample = match http_get(url, "/metrics", Duration::from_millis(400)) {
                Ok((200, body)) => {
                    let m = parse_metrics(&body);
                    Sample {
                        t_s,
                        up: true,
                        queue_depth: self
                            .tenants
                            .iter()
                            .map(|t| m.queue_depth.get(&t.name).copied().unwrap_or(0.0))
                            .collect(),
                        busy_threads: m.busy_threads,
                        threads: m.threads,
                        gpu_jobs: m.gpu_jobs,
                        gpu_busy: m.gpu_busy,
                    }
                }
                _ => Sample {
                    t_s,
                    up: false,
                    queue_depth: vec![f64::NAN; self.tenants.len()],
                    busy_threads: f64::NAN,
                    threads: f64::NAN,
                    gpu_jobs: None,
                    gpu_busy: None,
                },
            };
            observe(Event::Status(LiveStatus {
                elapsed_s: t_s,
                expected,
                submitted: self.submitted.load(Ordering::Relaxed),
                done: self.done.load(Ordering::Relaxed),
                refused: self.refused.load(Ordering::Relaxed),
                wrong: self.wrong.load(Ordering::Relaxed),
                failed: self.failed.load(Ordering::Relaxed),
                kills: self.kills.load(Ordering::Relaxed),
                queued: sample.queue_depth.iter().filter(|v| v.is_finite()).sum(),
                busy_threads: sample.busy_threads,
                draining: self.arrivals_over.load(Ordering::Relaxed),
            }));
            samples
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(sample);
            k += 1;
            let next = self.t0 + Duration::from_secs_f64(k as f64 * SAMPLE_PERIOD_S);
            while Instant::now() < next && !self.pool_over.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
}

/// A name for this run: Unix ms and process id, so that idempotency keys never repeat across
/// runs against one server.
fn run_id() -> String {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    format!("{ms:x}{:x}", std::process::id())
}

pub(crate) fn unix_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Makes the tenants' tokens in `data`, then their keys and inputs, uploaded to `url`.
fn make_tenants(
    opts: &LoadtestOptions,
    ctx: &Arc<Context<u64>>,
    url: &str,
    tokens: &[(String, String)],
    observe: &(dyn Fn(Event) + Sync),
) -> Result<Vec<Tenant>> {
    let rates = tenant_rates(opts.rate, opts.tenants, opts.heavy);
    let enc = Encryptor::new(ctx);
    let slots = ctx.params().slots();
    let mut out = Vec::with_capacity(tokens.len());
    for (i, (name, token)) in tokens.iter().enumerate() {
        observe(Event::Setup(format!(
            "tenant {name}: keys (N = 2^{}) and {} encrypted inputs",
            opts.log_n, opts.inputs_per_tenant
        )));
        let client = Client::new(url, token)?;
        let keys = keygen(ctx, &[], false)?;
        let key = client
            .upload_keys(ctx.params(), &keys.evaluation_keys)
            .with_context(|| format!("uploading tenant {name}'s key set"))?;
        let mut rng = ChaCha20Rng::seed_from_u64(opts.seed.wrapping_mul(7919) + i as u64);
        let mut inputs = Vec::with_capacity(opts.inputs_per_tenant);
        for _ in 0..opts.inputs_per_tenant {
            let x: Vec<f64> = (0..slots).map(|_| rng.gen_range(-1.0..1.0)).collect();
            let ct = enc.encrypt(&x, &keys.public_key)?;
            let obj = client
                .upload_ciphertext(&ct)
                .with_context(|| format!("uploading an input of tenant {name}"))?;
            inputs.push((obj.id, x));
        }
        out.push(Tenant {
            name: name.clone(),
            client,
            key_id: key.id,
            inputs,
            dec: Decryptor::new(ctx, &keys.secret_key)?,
            rate: rates[i],
        });
    }
    Ok(out)
}

/// Runs the load test; `observe` hears of the setup, kills and running counts (from several
/// threads).
pub fn run(opts: &LoadtestOptions, observe: &(dyn Fn(Event) + Sync)) -> Result<LoadtestReport> {
    opts.check()?;
    let client_cpu = cpu_time::ProcessTime::now();
    let children_at_start = children_cpu_s().unwrap_or(0.0);
    let setup_t = Instant::now();
    let run_id = run_id();
    let params = default_params(opts.log_n)?;
    let ctx = Context::<u64>::new(params)?;
    // Tokens first: the spawned server opens the same database after us.
    let (data, names): (PathBuf, Vec<String>) = match &opts.server {
        ServerTarget::Running { data, .. } => (
            data.clone(),
            (0..opts.tenants).map(|i| format!("loadtest-{i}")).collect(),
        ),
        ServerTarget::Spawn { .. } => (
            std::env::temp_dir().join(format!("heloom-loadtest-{run_id}")),
            (0..opts.tenants).map(|i| format!("tenant-{i}")).collect(),
        ),
    };
    let tokens: Vec<(String, String)> = {
        let state = heloom_serve::State::open(&data)
            .with_context(|| format!("opening the service's state in {}", data.display()))?;
        names
            .iter()
            .map(|n| Ok((n.clone(), state.create_token(n)?)))
            .collect::<Result<_>>()?
    };
    let server = match &opts.server {
        ServerTarget::Spawn { exe, threads } => {
            if let Some(p) = &opts.server_profile {
                let profile = if p == "measure" {
                    observe(Event::Setup(
                        "measuring this machine's cost profile for the server".into(),
                    ));
                    crate::profile::measure_default()?
                } else {
                    heloom_runtime::Profile::load(p)?
                };
                let own = data.join("profile.json");
                profile
                    .save(&own)
                    .with_context(|| format!("saving the profile to {}", own.display()))?;
            }
            observe(Event::Setup(format!(
                "starting {} serve on {}{}",
                exe.display(),
                data.display(),
                if opts.insecure() {
                    " with --allow-insecure (N < 2^14 is below 128-bit security)"
                } else {
                    ""
                }
            )));
            Some(Mutex::new(Spawned::start(
                exe,
                &data,
                *threads,
                opts.insecure(),
                0,
            )?))
        }
        ServerTarget::Running { .. } => None,
    };
    let url = match (&server, &opts.server) {
        (Some(s), _) => s.lock().unwrap_or_else(|p| p.into_inner()).url(),
        (None, ServerTarget::Running { url, .. }) => url.trim_end_matches('/').to_string(),
        (None, ServerTarget::Spawn { .. }) => bail!("the server did not start"),
    };
    let outcome = (|| -> Result<LoadtestReport> {
        wait_ready(&url, Duration::from_secs(60))?;
        let tenants = make_tenants(opts, &ctx, &url, &tokens, observe)?;
        let setup_s = setup_t.elapsed().as_secs_f64();
        execute(
            opts,
            &ctx,
            &tenants,
            &url,
            server.as_ref(),
            run_id.clone(),
            setup_s,
            observe,
        )
    })();
    let mut outcome = outcome;
    if let Some(s) = &server {
        let mut s = s.lock().unwrap_or_else(|p| p.into_inner());
        let log = s.last_log();
        s.kill();
        if let Ok(r) = &mut outcome {
            r.server_cpu_s = children_cpu_s().map(|end| end - children_at_start);
        }
        match &outcome {
            // The data directory is kept when something went wrong (to look at).
            Ok(r) if r.ok => {
                let _ = std::fs::remove_dir_all(&data);
            }
            Ok(_) => observe(Event::Note(format!(
                "the server's data directory is kept: {}",
                data.display()
            ))),
            Err(_) => observe(Event::Note(format!(
                "the server's data directory is kept: {}; its last log lines:\n{log}",
                data.display()
            ))),
        }
    }
    if let Ok(r) = &mut outcome {
        r.client_cpu_s = client_cpu.elapsed().as_secs_f64();
    }
    outcome
}

/// CPU seconds of this process's children that have been waited for (`cutime` + `cstime`).
fn children_cpu_s() -> Option<f64> {
    proc_stat_cpu_s("self", 16)
}

/// CPU seconds in fields `first` and `first + 1` of `/proc/<pid>/stat` (Linux; clock ticks of
/// 1/100 s): 14 for the process's own user + system time, 16 for its waited-for children's.
/// `None` elsewhere.
pub(crate) fn proc_stat_cpu_s(pid: &str, first: usize) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces) start with field 3, `state`.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let at = first.checked_sub(3)?;
    let ticks = fields.get(at)?.parse::<f64>().ok()? + fields.get(at + 1)?.parse::<f64>().ok()?;
    Some(ticks / 100.0)
}

/// The measured part: arrivals, pool, sampler, killer; then the final checks and the report.
#[allow(clippy::too_many_arguments)]
fn execute(
    opts: &LoadtestOptions,
    ctx: &Arc<Context<u64>>,
    tenants: &[Tenant],
    url: &str,
    server: Option<&Mutex<Spawned>>,
    run_id: String,
    setup_s: f64,
    observe: &(dyn Fn(Event) + Sync),
) -> Result<LoadtestReport> {
    let shared = Shared {
        opts,
        tenants,
        ctx,
        run_id,
        t0: Instant::now(),
        t0_unix_ms: unix_ms(),
        durable: opts.durability(),
        rows: Mutex::new(Vec::new()),
        submitted: AtomicUsize::new(0),
        settled: AtomicUsize::new(0),
        done: AtomicUsize::new(0),
        refused: AtomicUsize::new(0),
        wrong: AtomicUsize::new(0),
        failed: AtomicUsize::new(0),
        kills: AtomicUsize::new(0),
        arrivals_over: AtomicBool::new(false),
        pool_over: AtomicBool::new(false),
        clients_over: AtomicBool::new(false),
        check_after: opts.check_after,
        abort: AtomicBool::new(false),
        kills_done_at: Mutex::new(None),
        resubmissions: AtomicUsize::new(0),
    };
    let machine = Machine::now();
    let expected = (opts.rate * opts.duration_s).round() as usize;
    let samples = Mutex::new(Vec::new());
    let restarts = Mutex::new(Vec::new());
    let (tx, rx) = mpsc::channel::<Planned>();
    let rx = Mutex::new(rx);
    let fetch_queue = FetchQueue::new(tenants.len());
    let check_after = opts.check_after;
    let killer_result = std::thread::scope(|s| -> Result<()> {
        let sh = &shared;
        let fq = &fetch_queue;
        let fetchers: Vec<_> = (0..FETCHERS)
            .map(|_| {
                s.spawn(move || {
                    while check_after && !sh.clients_over.load(Ordering::SeqCst) {
                        std::thread::sleep(Duration::from_millis(20));
                    }
                    while let Some(f) = fq.take() {
                        let tenant = f.row.tenant;
                        let row = sh.fetch(f);
                        fq.finished(tenant);
                        sh.rows.lock().unwrap_or_else(|p| p.into_inner()).push(row);
                    }
                })
            })
            .collect();
        let pool: Vec<_> = (0..opts.clients)
            .map(|_| {
                let rx = &rx;
                s.spawn(move || loop {
                    let next = rx.lock().unwrap_or_else(|p| p.into_inner()).recv();
                    let Ok(p) = next else { break };
                    let waited = sh.run_job(&p);
                    sh.settled.fetch_add(1, Ordering::SeqCst);
                    match waited {
                        Waited::Done(f) => fq.push(f),
                        Waited::Ended(row) => {
                            sh.rows.lock().unwrap_or_else(|p| p.into_inner()).push(row)
                        }
                    }
                })
            })
            .collect();
        let samples = &samples;
        s.spawn(move || sh.sampler(url, samples, expected, observe));
        let killer = match (opts.kill_every_s, server) {
            (Some(every), Some(srv)) => {
                let restarts = &restarts;
                Some(s.spawn(move || {
                    let r = sh.killer(srv, every, restarts, observe);
                    if r.is_err() {
                        // Without a server nothing can finish: end the arrivals and retries.
                        sh.abort.store(true, Ordering::SeqCst);
                    }
                    r
                }))
            }
            _ => None,
        };
        shared.schedule(tx);
        observe(Event::Note(format!(
            "arrivals over at {:.1} s; waiting for the jobs in flight",
            shared.now_s()
        )));
        let killed = killer
            .map(|k| {
                k.join()
                    .unwrap_or_else(|_| Err(anyhow!("the killer thread panicked")))
            })
            .unwrap_or(Ok(()));
        for h in pool {
            if h.join().is_err() {
                shared.failed.fetch_add(1, Ordering::Relaxed);
            }
        }
        fetch_queue.close();
        shared.clients_over.store(true, Ordering::SeqCst);
        if check_after {
            observe(Event::Note(format!(
                "clients done at {:.1} s; fetching and checking the results",
                shared.now_s()
            )));
        }
        for h in fetchers {
            if h.join().is_err() {
                shared.failed.fetch_add(1, Ordering::Relaxed);
            }
        }
        shared.pool_over.store(true, Ordering::SeqCst);
        killed
    });
    killer_result?;
    let window_s = shared
        .window_end()
        .unwrap_or(opts.duration_s)
        .max(opts.duration_s);
    let mut rows = shared.rows.into_inner().unwrap_or_else(|p| p.into_inner());
    rows.sort_by_key(|a| (a.tenant, a.seq));
    // What the server says at the end: each accepted job's state, and each key's jobs.
    let listed = server_view(tenants, &shared.run_id)?;
    let samples = samples.into_inner().unwrap_or_else(|p| p.into_inner());
    let restarts = restarts.into_inner().unwrap_or_else(|p| p.into_inner());
    Ok(build_report(
        machine.finish(),
        opts,
        url,
        (setup_s, shared.t0_unix_ms),
        window_s,
        shared.resubmissions.load(Ordering::Relaxed),
        rows,
        samples,
        restarts,
        &listed,
        tenants,
    ))
}

/// The server's jobs of this run per (tenant, idempotency key): ids and final states.
type Listed = HashMap<(usize, String), Vec<(i64, String)>>;

fn server_view(tenants: &[Tenant], run_id: &str) -> Result<Listed> {
    let prefix = format!("lt-{run_id}-");
    let mut out: Listed = HashMap::new();
    for (i, t) in tenants.iter().enumerate() {
        let jobs = t
            .client
            .all_jobs(None)
            .with_context(|| format!("listing tenant {}'s jobs", t.name))?;
        for j in jobs
            .into_iter()
            .filter(|j| j.idempotency_key.starts_with(&prefix))
        {
            out.entry((i, j.idempotency_key))
                .or_default()
                .push((j.id, j.state));
        }
    }
    Ok(out)
}

#[allow(clippy::too_many_arguments)]
fn build_report(
    machine: Machine,
    opts: &LoadtestOptions,
    url: &str,
    (setup_s, start_unix_ms): (f64, i64),
    window_s: f64,
    resubmissions: usize,
    rows: Vec<JobRow>,
    samples: Vec<Sample>,
    restarts: Vec<(f64, f64)>,
    listed: &Listed,
    tenants: &[Tenant],
) -> LoadtestReport {
    let makespan_s = rows
        .iter()
        .filter_map(|r| r.fetched_s)
        .fold(window_s, f64::max);
    let stats = |rs: &[&JobRow], name: String, rate: f64| -> TenantStats {
        let done: Vec<&&JobRow> = rs.iter().filter(|r| r.done()).collect();
        let in_window = done
            .iter()
            .filter(|r| r.fetched_s.is_some_and(|f| f <= window_s))
            .count();
        let warm = || done.iter().filter(|r| r.submitted_s >= opts.warmup_s);
        let lat: Vec<f64> = warm().filter_map(|r| r.latency_ms).collect();
        let wait: Vec<f64> = warm().filter_map(|r| r.queue_wait_ms).collect();
        let submitted = rs.len();
        TenantStats {
            name,
            rate_jobs_s: rate,
            submitted,
            accepted: rs.iter().filter(|r| r.accepted).count(),
            refused_jobs: rs.iter().filter(|r| r.state == "refused").count(),
            refusals: rs.iter().map(|r| r.refusals as usize).sum(),
            done: done.len(),
            failed: rs
                .iter()
                .filter(|r| matches!(r.state.as_str(), "failed" | "cancelled"))
                .count(),
            errors: rs
                .iter()
                .filter(|r| {
                    r.error.is_some() && !matches!(r.state.as_str(), "failed" | "cancelled")
                })
                .count(),
            wrong: rs.iter().filter(|r| r.correct == Some(false)).count(),
            done_in_window: in_window,
            throughput_jobs_s: in_window as f64 / window_s,
            completion_ratio: if submitted == 0 {
                f64::NAN
            } else {
                in_window as f64 / submitted as f64
            },
            latency_ms: Spread::of(&lat),
            queue_wait_ms: Spread::of(&wait),
            max_error: rs.iter().filter_map(|r| r.max_error).fold(0.0, f64::max),
        }
    };
    let per_tenant: Vec<TenantStats> = tenants
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let rs: Vec<&JobRow> = rows.iter().filter(|r| r.tenant == i).collect();
            stats(&rs, t.name.clone(), t.rate)
        })
        .collect();
    let all: Vec<&JobRow> = rows.iter().collect();
    let tot = stats(&all, "all".into(), opts.rate);
    let up: Vec<f64> = samples
        .iter()
        .filter(|s| s.up)
        .map(|s| s.busy_threads)
        .collect();
    let overall = Overall {
        submitted: tot.submitted,
        accepted: tot.accepted,
        refused_jobs: tot.refused_jobs,
        refusals: tot.refusals,
        done: tot.done,
        failed: tot.failed,
        errors: tot.errors,
        wrong: tot.wrong,
        throughput_jobs_s: tot.throughput_jobs_s,
        sustained_jobs_s: tot.done as f64 / makespan_s,
        latency_ms: tot.latency_ms,
        queue_wait_ms: tot.queue_wait_ms,
        max_submit_lag_ms: rows
            .iter()
            .map(|r| (r.submitted_s - r.scheduled_s) * 1e3)
            .fold(0.0, f64::max),
        max_error: tot.max_error,
        mean_busy_threads: if up.is_empty() {
            f64::NAN
        } else {
            up.iter().sum::<f64>() / up.len() as f64
        },
        // The counter's growth, sample to sample (a restarted server counts from 0 again).
        gpu_jobs: {
            let g: Vec<f64> = samples.iter().filter_map(|s| s.gpu_jobs).collect();
            (!g.is_empty()).then(|| {
                g.windows(2)
                    .map(|w| if w[1] >= w[0] { w[1] - w[0] } else { w[1] })
                    .sum()
            })
        },
    };
    let fairness = Fairness {
        formula: JAIN_FORMULA.into(),
        jain_throughput: jain_index(
            &per_tenant
                .iter()
                .map(|t| t.completion_ratio)
                .collect::<Vec<_>>(),
        ),
        jain_latency: jain_index(
            &per_tenant
                .iter()
                .map(|t| t.latency_ms.mean)
                .collect::<Vec<_>>(),
        ),
    };
    // Every accepted job against the server's list: one id per key, present once, done.
    let mut once = 0;
    let mut lost = 0;
    let mut duplicated = 0;
    for r in rows.iter().filter(|r| r.accepted) {
        let on_server = listed
            .get(&(r.tenant, r.idempotency_key.clone()))
            .cloned()
            .unwrap_or_default();
        let mut ids: Vec<i64> = r.job_ids.clone();
        ids.extend(on_server.iter().map(|j| j.0));
        ids.sort_unstable();
        ids.dedup();
        if ids.len() > 1 {
            duplicated += 1;
        }
        let server_done = on_server.iter().any(|j| j.1 == "done");
        let finished_badly = matches!(r.state.as_str(), "failed" | "cancelled");
        if !server_done && !finished_badly {
            lost += 1;
        }
        if ids.len() == 1 && on_server.len() == 1 && server_done && r.correct == Some(true) {
            once += 1;
        }
    }
    let rerun = rows.iter().filter(|r| r.attempts > 1).count();
    let durability = opts.kill_every_s.map(|every| {
        let ms: Vec<f64> = restarts.iter().map(|r| r.1).collect();
        Durability {
            kill_every_s: every,
            kills: restarts.len(),
            kill_times_s: restarts.iter().map(|r| r.0).collect(),
            restart_p50_ms: percentile(&ms, 0.5),
            restart_max_ms: ms.iter().copied().fold(f64::NAN, f64::max),
            restart_ms: ms,
            accepted: overall.accepted,
            completed_exactly_once: once,
            lost,
            duplicated,
            wrong: overall.wrong,
            failed: overall.failed,
            rerun,
            resubmissions,
            jobs_with_connection_errors: rows.iter().filter(|r| r.reconnects > 0).count(),
            submissions_retried: rows
                .iter()
                .filter(|r| r.submit_tries > 1 + r.refusals)
                .count(),
        }
    });
    let mut problems = Vec::new();
    if overall.wrong > 0 {
        problems.push(format!(
            "{} decrypted results outside the bound",
            overall.wrong
        ));
    }
    if overall.failed > 0 {
        problems.push(format!("{} jobs failed on the server", overall.failed));
    }
    if overall.errors > 0 {
        let first = rows
            .iter()
            .find_map(|r| r.error.clone())
            .unwrap_or_default();
        problems.push(format!(
            "{} jobs were lost on the way (first: {first})",
            overall.errors
        ));
    }
    if lost > 0 {
        problems.push(format!("{lost} accepted jobs never completed"));
    }
    if duplicated > 0 {
        problems.push(format!(
            "{duplicated} idempotency keys mapped to more than one job"
        ));
    }
    if let Some(k) = opts.kills {
        let done = durability.as_ref().map_or(0, |d| d.kills);
        if done < k {
            problems.push(format!("only {done} of the {k} kills asked for happened"));
        }
    }
    LoadtestReport {
        machine,
        url: url.to_string(),
        spawned: matches!(opts.server, ServerTarget::Spawn { .. }),
        server_threads: samples
            .iter()
            .filter(|s| s.up)
            .map(|s| s.threads)
            .fold(0.0, f64::max),
        log_n: opts.log_n,
        insecure: opts.insecure(),
        tenants: opts.tenants,
        rate_jobs_s: opts.rate,
        heavy: opts.heavy,
        mix: opts.mix.clone(),
        warmup_s: opts.warmup_s,
        duration_s: opts.duration_s,
        seed: opts.seed,
        clients: opts.clients,
        check_after: opts.check_after,
        inputs_per_tenant: opts.inputs_per_tenant,
        setup_s,
        client_cpu_s: 0.0,
        server_cpu_s: None,
        start_unix_ms,
        window_s,
        makespan_s,
        error_bound: ERROR_BOUND,
        per_tenant,
        overall,
        fairness,
        durability,
        ok: problems.is_empty(),
        problems,
        jobs: rows,
        samples,
    }
}

// ---------------------------------------------------------------------------------------------
// Output.

fn log2_or_zero(x: f64) -> String {
    if x > 0.0 && x.is_finite() {
        format!("2^{:.1}", x.log2())
    } else {
        "0".into()
    }
}

/// The report as text: configuration, per-tenant table, fairness, correctness, durability.
pub fn render(r: &LoadtestReport) -> String {
    let mut s = String::new();
    let mix = r
        .mix
        .iter()
        .map(|(k, w)| format!("{} {:.2}", k.name(), w))
        .collect::<Vec<_>>()
        .join(" / ");
    s.push_str(&format!(
        "heloom loadtest: {} tenants, {:.2} jobs/s offered (tenant 0 x{}), {:.1} s window, mix {mix}, \
         N = 2^{}{}\n",
        r.tenants,
        r.rate_jobs_s,
        r.heavy,
        r.window_s,
        r.log_n,
        if r.insecure {
            " (below 128-bit security: server run with --allow-insecure)"
        } else {
            ""
        }
    ));
    let load = |l: Option<[f64; 3]>| l.map_or_else(|| "?".into(), |l| format!("{:.2}", l[0]));
    s.push_str(&format!(
        "server {} ({}), {} executor threads; client: {} threads; CPU {} ({} cores, load average \
         {} at the start, {} at the end); setup {:.1} s, last result at {:.1} s\n\n",
        r.url,
        if r.spawned { "spawned" } else { "running" },
        r.server_threads,
        r.clients,
        r.machine.model,
        r.machine.cores,
        load(r.machine.load_average_start),
        load(r.machine.load_average_end),
        r.setup_s,
        r.makespan_s
    ));
    s.push_str(&format!(
        "{:<12} {:>6} {:>5} {:>5} {:>5} {:>4} {:>5} {:>6} {:>6} {:>8} {:>8} {:>8} {:>8}\n",
        "tenant",
        "rate/s",
        "sub",
        "refus",
        "done",
        "fail",
        "wrong",
        "thr/s",
        "d/sub",
        "p50 ms",
        "p99 ms",
        "p50 wait",
        "p99 wait"
    ));
    let line = |t: &TenantStats| {
        format!(
            "{:<12} {:>6.2} {:>5} {:>5} {:>5} {:>4} {:>5} {:>6.2} {:>6.2} {:>8.0} {:>8.0} {:>8.0} {:>8.0}\n",
            t.name,
            t.rate_jobs_s,
            t.submitted,
            t.refused_jobs,
            t.done,
            t.failed + t.errors,
            t.wrong,
            t.throughput_jobs_s,
            t.completion_ratio,
            t.latency_ms.p50,
            t.latency_ms.p99,
            t.queue_wait_ms.p50,
            t.queue_wait_ms.p99
        )
    };
    for t in &r.per_tenant {
        s.push_str(&line(t));
    }
    let o = &r.overall;
    s.push_str(&format!(
        "{:<12} {:>6.2} {:>5} {:>5} {:>5} {:>4} {:>5} {:>6.2} {:>6} {:>8.0} {:>8.0} {:>8.0} {:>8.0}\n",
        "all",
        r.rate_jobs_s,
        o.submitted,
        o.refused_jobs,
        o.done,
        o.failed + o.errors,
        o.wrong,
        o.throughput_jobs_s,
        "",
        o.latency_ms.p50,
        o.latency_ms.p99,
        o.queue_wait_ms.p50,
        o.queue_wait_ms.p99
    ));
    s.push_str(&format!(
        "\nthr/s: jobs completed within the window / window; d/sub: completed within the window / \
         submitted; latency: submit to result fetched (before decryption); wait: accepted to \
         started (server clock); latency and wait over jobs submitted after the first {:.1} s \
         (--warmup).\nthroughput {:.2} jobs/s in the window, {:.2} jobs/s to the last \
         result; {} refusals (429); mean busy threads {:.2}; longest client-pool lag {:.0} ms; CPU \
         seconds: clients {:.1}, server {}\n",
        r.warmup_s,
        o.throughput_jobs_s,
        o.sustained_jobs_s,
        o.refusals,
        o.mean_busy_threads,
        o.max_submit_lag_ms,
        r.client_cpu_s,
        r.server_cpu_s
            .map_or_else(|| "?".to_string(), |c| format!("{c:.1}"))
    ));
    if let Some(g) = o.gpu_jobs {
        s.push_str(&format!(
            "on the server's GPU: {g:.0} jobs ({:.1}% of the {} done; the rest on its CPU lanes)\n",
            100.0 * g / o.done.max(1) as f64,
            o.done
        ));
    }
    s.push_str(&format!(
        "Jain's fairness index: throughput {:.3}, mean latency {:.3}\n  {}\n",
        r.fairness.jain_throughput, r.fairness.jain_latency, r.fairness.formula
    ));
    s.push_str(&format!(
        "correctness: {} results decrypted, {} wrong; largest |decrypted - p(x)| {} (bound {}; p = the \
         job's polynomial in f64: e^x's degree-{EXP_DEGREE} Maclaurin polynomial, or {:?})\n",
        o.done,
        o.wrong,
        log2_or_zero(o.max_error),
        log2_or_zero(r.error_bound),
        POLY_COEFFICIENTS
    ));
    if let Some(d) = &r.durability {
        s.push_str(&format!(
            "durability: {} kills (SIGKILL every {:.1} s +-50%, restart on the same data), restart \
             (kill to ready) p50 {:.0} ms, max {:.0} ms\n  accepted {}, completed exactly once {}, \
             lost {}, duplicated {}, wrong {}, failed {}\n  jobs that met a connection error {}: \
             submissions sent again with the same key {}, waits broken and the key submitted \
             again {} (the same job id each time: duplicated above); jobs run again after a kill \
             {}\n",
            d.kills,
            d.kill_every_s,
            d.restart_p50_ms,
            d.restart_max_ms,
            d.accepted,
            d.completed_exactly_once,
            d.lost,
            d.duplicated,
            d.wrong,
            d.failed,
            d.jobs_with_connection_errors,
            d.submissions_retried,
            d.resubmissions,
            d.rerun
        ));
    }
    if r.ok {
        s.push_str("outcome: every check passed\n");
    } else {
        s.push_str(&format!("outcome: FAILED: {}\n", r.problems.join("; ")));
    }
    s
}

fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or_else(String::new, |x| x.to_string())
}

/// Per-job rows as CSV.
pub fn jobs_csv(r: &LoadtestReport) -> String {
    let mut s = String::from(
        "tenant,seq,kind,idempotency_key,scheduled_s,submitted_s,accepted,refusals,submit_tries,\
         job_ids,state,attempts,created_ms,started_ms,finished_ms,fetched_s,latency_ms,\
         queue_wait_ms,max_error,correct,reconnects,error\n",
    );
    for j in &r.jobs {
        s.push_str(&format!(
            "{},{},{},{},{:.3},{:.3},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},\"{}\"\n",
            j.tenant,
            j.seq,
            j.kind,
            j.idempotency_key,
            j.scheduled_s,
            j.submitted_s,
            j.accepted,
            j.refusals,
            j.submit_tries,
            j.job_ids
                .iter()
                .map(|i| i.to_string())
                .collect::<Vec<_>>()
                .join(" "),
            j.state,
            j.attempts,
            opt(j.created_ms),
            opt(j.started_ms),
            opt(j.finished_ms),
            opt(j.fetched_s.map(|v| format!("{v:.3}"))),
            opt(j.latency_ms.map(|v| format!("{v:.1}"))),
            opt(j.queue_wait_ms),
            opt(j.max_error.map(|v| format!("{v:.3e}"))),
            opt(j.correct),
            j.reconnects,
            j.error.clone().unwrap_or_default().replace('"', "'")
        ));
    }
    s
}

/// `/metrics` samples as CSV.
pub fn metrics_csv(r: &LoadtestReport) -> String {
    let mut s = String::from("t_s,up,busy_threads,threads");
    for t in &r.per_tenant {
        s.push_str(&format!(",queue_{}", t.name));
    }
    s.push('\n');
    for m in &r.samples {
        s.push_str(&format!(
            "{:.2},{},{},{}",
            m.t_s, m.up, m.busy_threads, m.threads
        ));
        for q in &m.queue_depth {
            s.push_str(&format!(",{q}"));
        }
        s.push('\n');
    }
    s
}

/// Writes `loadtest.json`, `loadtest.txt`, `jobs.csv`, `metrics.csv` and the plots
/// (`latency.svg`, `queue.svg`, `busy.svg`) into `dir`; returns their paths.
pub fn save(r: &LoadtestReport, dir: &Path) -> Result<Vec<PathBuf>> {
    let mut out = save_json_and_text(r, &render(r), dir, "loadtest")?;
    for (name, text) in [("jobs.csv", jobs_csv(r)), ("metrics.csv", metrics_csv(r))] {
        let p = dir.join(name);
        std::fs::write(&p, text).with_context(|| format!("writing {}", p.display()))?;
        out.push(p);
    }
    let p = dir.join("latency.svg");
    latency_plot(r, &p)?;
    out.push(p);
    let p = dir.join("queue.svg");
    queue_plot(r, &p)?;
    out.push(p);
    let p = dir.join("busy.svg");
    busy_plot(r, &p)?;
    out.push(p);
    Ok(out)
}

/// Tenant colours (matplotlib's tab10, legible on white); past them, plotters' palette.
const TENANT_COLOURS: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

fn tenant_colour(i: usize) -> RGBColor {
    nth_colour(&TENANT_COLOURS, i, 0)
}

/// A title suffix naming the run and the machine.
fn plot_subtitle(r: &LoadtestReport) -> String {
    format!(
        "{} tenants, {:.2} jobs/s, N = 2^{}{} ({})",
        r.tenants,
        r.rate_jobs_s,
        r.log_n,
        r.durability
            .as_ref()
            .map_or_else(String::new, |d| format!(", {} kills", d.kills)),
        r.machine.model
    )
}

/// Draws a vertical dashed grey line at every kill.
fn draw_kills<DB: DrawingBackend>(
    chart: &mut ChartContext<'_, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>,
    r: &LoadtestReport,
    ymax: f64,
) -> Result<()> {
    let Some(d) = &r.durability else {
        return Ok(());
    };
    let grey = RGBColor(150, 150, 150);
    for (i, &t) in d.kill_times_s.iter().enumerate() {
        let s = chart
            .draw_series(DashedLineSeries::new(
                vec![(t, 0.0), (t, ymax)],
                4,
                4,
                grey.stroke_width(1),
            ))
            .map_err(pe)?;
        if i == 0 {
            s.label("kill -9").legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], grey.stroke_width(1))
            });
        }
    }
    Ok(())
}

/// Most jobs drawn one point each in `latency.svg`; beyond it each tenant's p50 and p99 per
/// time bucket are drawn instead (a point per job made the file megabytes and the picture a
/// smear).
pub const LATENCY_POINTS_MAX: usize = 2000;

/// Time buckets of the p50 / p99 lines of a large run's `latency.svg`.
const LATENCY_BUCKETS: usize = 120;

/// Per-bucket p50 and p99 (s) of `points` (submitted s, latency s) over `0..xmax`: (bucket
/// middle, p50, p99) for each bucket with jobs.
fn latency_quantiles(points: &[(f64, f64)], xmax: f64) -> Vec<(f64, f64, f64)> {
    let width = xmax / LATENCY_BUCKETS as f64;
    let mut buckets: Vec<Vec<f64>> = vec![Vec::new(); LATENCY_BUCKETS];
    for &(t, l) in points {
        let b = ((t / width) as usize).min(LATENCY_BUCKETS - 1);
        buckets[b].push(l);
    }
    buckets
        .into_iter()
        .enumerate()
        .filter(|(_, v)| !v.is_empty())
        .map(|(b, mut v)| {
            v.sort_by(f64::total_cmp);
            let q = |p: f64| v[((p * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1];
            ((b as f64 + 0.5) * width, q(0.5), q(0.99))
        })
        .collect()
}

/// Latency (s) of done jobs against their submission time, one colour per tenant: a point per
/// job, or for runs of more than [`LATENCY_POINTS_MAX`] jobs each tenant's p99 (solid) and p50
/// (thin) per time bucket.
pub fn latency_plot(r: &LoadtestReport, path: &Path) -> Result<()> {
    let xmax = r.makespan_s.max(1.0);
    let done = r.jobs.iter().filter(|j| j.latency_ms.is_some()).count();
    let points_per_job = done <= LATENCY_POINTS_MAX;
    let per_tenant: Vec<Vec<(f64, f64)>> = (0..r.per_tenant.len())
        .map(|i| {
            r.jobs
                .iter()
                .filter(|j| j.tenant == i)
                .filter_map(|j| j.latency_ms.map(|l| (j.submitted_s, l / 1e3)))
                .collect()
        })
        .collect();
    let lines: Vec<Vec<(f64, f64, f64)>> = if points_per_job {
        Vec::new()
    } else {
        per_tenant
            .iter()
            .map(|p| latency_quantiles(p, xmax))
            .collect()
    };
    let ymax = if points_per_job {
        per_tenant.iter().flatten().map(|p| p.1).fold(0.0, f64::max)
    } else {
        lines.iter().flatten().map(|q| q.2).fold(0.0, f64::max)
    };
    let ymax = if ymax > 0.0 { ymax * 1.3 } else { 1.0 };
    let root = svg_canvas(path, (1100, 650))?;
    let title = if points_per_job {
        format!("Latency per job, {}", plot_subtitle(r))
    } else {
        format!(
            "Latency p99 (thick) and p50 (thin) per {:.2} s, {}",
            xmax / LATENCY_BUCKETS as f64,
            plot_subtitle(r)
        )
    };
    let mut chart = chart_builder(&root, title, 20, 15, (45, 60))
        .build_cartesian_2d(0.0..xmax, 0.0..ymax)
        .map_err(pe)?;
    chart
        .configure_mesh()
        .x_desc("submitted at (s since the start)")
        .y_desc("latency, submit to result (s)")
        .draw()
        .map_err(pe)?;
    draw_kills(&mut chart, r, ymax)?;
    for (i, t) in r.per_tenant.iter().enumerate() {
        let colour = tenant_colour(i);
        if points_per_job {
            chart
                .draw_series(
                    per_tenant[i]
                        .iter()
                        .map(|&p| Circle::new(p, 3, colour.mix(0.8).filled())),
                )
                .map_err(pe)?
                .label(t.name.clone())
                .legend(move |(x, y)| Circle::new((x + 9, y), 4, colour.filled()));
        } else {
            chart
                .draw_series(LineSeries::new(
                    lines[i].iter().map(|q| (q.0, q.2)),
                    colour.stroke_width(2),
                ))
                .map_err(pe)?
                .label(t.name.clone())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], colour.stroke_width(2))
                });
            chart
                .draw_series(LineSeries::new(
                    lines[i].iter().map(|q| (q.0, q.1)),
                    colour.mix(0.7).stroke_width(1),
                ))
                .map_err(pe)?;
        }
    }
    draw_legend(&mut chart, SeriesLabelPosition::UpperLeft)?;
    root.present().map_err(pe)?;
    Ok(())
}

/// Step-line segments of sampled `(t, v)` points (each value held until the next sample),
/// split where the server was down (NaN values).
fn segments(pts: impl Iterator<Item = (f64, f64)>) -> Vec<Vec<(f64, f64)>> {
    let mut out: Vec<Vec<(f64, f64)>> = vec![Vec::new()];
    for (t, v) in pts {
        if v.is_finite() {
            if let Some(last) = out.last_mut() {
                if let Some(&(_, prev)) = last.last() {
                    last.push((t, prev));
                }
                last.push((t, v));
            }
        } else if out.last().is_some_and(|l| !l.is_empty()) {
            out.push(Vec::new());
        }
    }
    out.retain(|s| !s.is_empty());
    out
}

/// Draws labelled series made of segments.
fn draw_segmented<DB: DrawingBackend>(
    chart: &mut ChartContext<'_, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>,
    label: &str,
    colour: RGBColor,
    segs: &[Vec<(f64, f64)>],
) -> Result<()> {
    for (k, seg) in segs.iter().enumerate() {
        let s = chart
            .draw_series(LineSeries::new(seg.iter().copied(), colour.stroke_width(2)))
            .map_err(pe)?;
        if k == 0 {
            s.label(label.to_string()).legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], colour.stroke_width(2))
            });
        }
    }
    Ok(())
}

/// Queue depth of each tenant over time (from `/metrics`).
pub fn queue_plot(r: &LoadtestReport, path: &Path) -> Result<()> {
    let xmax = r.samples.last().map_or(1.0, |s| s.t_s).max(1.0);
    let ymax = r
        .samples
        .iter()
        .flat_map(|s| s.queue_depth.iter().copied())
        .filter(|v| v.is_finite())
        .fold(0.0, f64::max);
    let ymax = (ymax * 1.3).max(1.0);
    let root = svg_canvas(path, (1100, 650))?;
    let mut chart = chart_builder(
        &root,
        format!("Queue depth per tenant, {}", plot_subtitle(r)),
        20,
        15,
        (45, 60),
    )
    .build_cartesian_2d(0.0..xmax, 0.0..ymax)
    .map_err(pe)?;
    chart
        .configure_mesh()
        .x_desc("time (s since the start)")
        .y_desc("jobs queued (heloom_queue_depth)")
        .draw()
        .map_err(pe)?;
    draw_kills(&mut chart, r, ymax)?;
    for (i, t) in r.per_tenant.iter().enumerate() {
        let segs = segments(
            r.samples
                .iter()
                .map(|s| (s.t_s, s.queue_depth.get(i).copied().unwrap_or(f64::NAN))),
        );
        draw_segmented(&mut chart, &t.name, tenant_colour(i), &segs)?;
    }
    draw_legend(&mut chart, SeriesLabelPosition::UpperLeft)?;
    root.present().map_err(pe)?;
    Ok(())
}

/// Busy threads over time, with the executor's thread count.
pub fn busy_plot(r: &LoadtestReport, path: &Path) -> Result<()> {
    let xmax = r.samples.last().map_or(1.0, |s| s.t_s).max(1.0);
    let ymax = r
        .samples
        .iter()
        .flat_map(|s| [s.busy_threads, s.threads])
        .filter(|v| v.is_finite())
        .fold(0.0, f64::max);
    let ymax = (ymax * 1.3).max(1.0);
    let root = svg_canvas(path, (1100, 650))?;
    let mut chart = chart_builder(
        &root,
        format!("Busy threads, {}", plot_subtitle(r)),
        20,
        15,
        (45, 60),
    )
    .build_cartesian_2d(0.0..xmax, 0.0..ymax)
    .map_err(pe)?;
    chart
        .configure_mesh()
        .x_desc("time (s since the start)")
        .y_desc("threads (heloom_device_busy_threads)")
        .draw()
        .map_err(pe)?;
    draw_kills(&mut chart, r, ymax)?;
    let busy = segments(r.samples.iter().map(|s| (s.t_s, s.busy_threads)));
    draw_segmented(&mut chart, "busy threads", RGBColor(214, 39, 40), &busy)?;
    let threads = segments(r.samples.iter().map(|s| (s.t_s, s.threads)));
    draw_segmented(
        &mut chart,
        "executor threads",
        RGBColor(31, 119, 180),
        &threads,
    )?;
    if r.samples.iter().any(|s| s.gpu_busy.is_some()) {
        let gpu = segments(
            r.samples
                .iter()
                .map(|s| (s.t_s, s.gpu_busy.unwrap_or(f64::NAN))),
        );
        draw_segmented(
            &mut chart,
            "GPU busy (jobs on it)",
            RGBColor(44, 160, 44),
            &gpu,
        )?;
    }
    draw_legend(&mut chart, SeriesLabelPosition::UpperRight)?;
    root.present().map_err(pe)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn to_fetch(tenant: usize, seq: usize, done_seen_s: f64) -> ToFetch {
        ToFetch {
            row: JobRow {
                tenant,
                seq,
                ..JobRow::default()
            },
            id: seq as i64,
            kind: JobKind::Exp,
            input: 0,
            deadline: Instant::now(),
            done_seen_s,
        }
    }

    #[test]
    fn a_free_fetcher_serves_the_tenant_with_the_fewest_fetches_under_way() {
        let q = FetchQueue::new(2);
        // Tenant 0 floods the queue before tenant 1's one result arrives.
        for k in 0..5 {
            q.push(to_fetch(0, k, k as f64));
        }
        q.push(to_fetch(1, 0, 10.0));
        let first = q.take().map(|f| (f.row.tenant, f.row.seq));
        assert_eq!(
            first,
            Some((0, 0)),
            "the earliest result first when none is under way"
        );
        // Tenant 0 has a fetch under way: tenant 1's result goes next, not tenant 0's second.
        let second = q.take().map(|f| (f.row.tenant, f.row.seq));
        assert_eq!(second, Some((1, 0)));
        q.finished(0);
        q.finished(1);
        let rest: Vec<usize> = std::iter::from_fn(|| {
            q.close();
            q.take().map(|f| f.row.seq)
        })
        .collect();
        assert_eq!(
            rest,
            vec![1, 2, 3, 4],
            "then tenant 0's in order, until drained"
        );
    }

    #[test]
    fn latency_quantiles_per_bucket() {
        // Bucket 0 (t < 1 s with 120 s over 120 buckets): 1..=100 ms; bucket 60: one job.
        let mut pts: Vec<(f64, f64)> = (1..=100).map(|k| (0.5, k as f64 / 1e3)).collect();
        pts.push((60.2, 0.25));
        let q = latency_quantiles(&pts, 120.0);
        assert_eq!(q.len(), 2);
        assert_eq!(q[0], (0.5, 0.05, 0.099));
        assert_eq!(q[1], (60.5, 0.25, 0.25));
    }
}
