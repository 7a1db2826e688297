//! `heloom bench serve`: what the service costs over the runtime it drives.
//!
//! Two measurements on one machine, in one run:
//!
//! - **Throughput at saturation.** Rounds alternate `heloom schedule`'s real executor in this
//!   process (the same e^x jobs, all arriving at once, the `heloom` policy choosing among the
//!   three graph shapes) with the same number of e^x jobs submitted at once to a `heloom serve`
//!   spawned here (one tenant submitting them in batches of up to 1000, `POST /v1/jobs/batch`;
//!   HTTP, SQLite, segment files, the online executor). Each side's
//!   throughput is its steady completion rate: jobs finishing between the 10th and the 90th
//!   percentile of finish times, over that time span (the burst's ramp-up and drain left out).
//!   Each server job has an input of its own, uploaded before its round (outside the timing),
//!   so every result is new bytes that the server serializes, hashes, writes and syncs (equal
//!   results would be stored once); the input cache holds what fits, the rest is read and
//!   parsed again at the job's start. The in-process jobs take 16 ciphertexts in memory and
//!   keep their results there at level 0; the server jobs ask for their results at level 0
//!   too (`result_level`). Target: the server at >= 95% of the in-process rate.
//! - **CPU per job.** Each round also reads the CPU time (user and system, `/proc`) this
//!   process used during its in-process round (less its result check, which the server side
//!   has no counterpart of) and the server process used during its round, per job: the
//!   server's overhead in CPU time (HTTP, database, storage and the HE lanes together), a
//!   figure that other load on a shared machine moves much less than the rates. Both windows
//!   hold a ramp-up and a drain, so this ratio understates the steady-state gap a little.
//! - **CPU only.** The server runs with `--gpu off` (unless `--server-arg` names a `--gpu`):
//!   the in-process side has no GPU to compare with.
//! - **Warm-up.** A first round on each side is run and reported but not counted.
//! - **Two builds.** `--server-exe PATH` starts another build's `heloom` as the server (its
//!   token made by that binary, for its own schema) against the same in-process side and
//!   client: before/after comparisons in one session.
//! - **Start latency at idle.** Small jobs one at a time, each on a fresh input uploaded just
//!   before it, each after the previous one ended:
//!   the server's `heloom_job_start_latency_seconds` histogram (request received to job in
//!   the executor). Target: p99 <= 2 ms.
//!
//! Both sides use one cost model: the host profile is measured once (or loaded with
//! `--profile`) and written to the server's data directory, so the thread policy decides the
//! same way in and out of the server. Every server result is fetched and decrypted after the
//! timing and checked against the same polynomial in f64.

use crate::loadtest::{wait_ready, JobKind, Spawned, ERROR_BOUND};
use crate::report::save_json_and_text;
use crate::schedule::Setup;
use crate::timing::Machine;
use anyhow::{bail, Context as _, Result};
use heloom_ckks::{keygen, Context, Decryptor, Encryptor};
use heloom_runtime::profile::{measure_host, MeasureConfig, Profile};
use heloom_runtime::workload::default_params;
use heloom_serve::api::JobView;
use heloom_serve::client::{Client, JobsQuery, SubmitJob};
use heloom_serve::worker::Task;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The throughput target: server over in-process.
pub const TARGET_RATIO: f64 = 0.95;

/// The start latency target at idle, ms (p99).
pub const TARGET_START_P99_MS: f64 = 2.0;

/// What `heloom bench serve` runs.
#[derive(Clone, Debug)]
pub struct OverheadOptions {
    /// The `heloom` binary to spawn as the server.
    pub exe: PathBuf,
    /// log2 of the ring degree (below 14 the server gets `--allow-insecure`).
    pub log_n: u32,
    /// Jobs per round and side.
    pub jobs: usize,
    /// Rounds (each: in-process, then server).
    pub rounds: usize,
    /// Jobs of the idle start-latency measurement.
    pub idle_jobs: usize,
    /// Threads of both sides (default: every core).
    pub threads: Option<usize>,
    /// A stored profile (name or path) instead of measuring this machine.
    pub profile: Option<String>,
    /// Seed of the inputs.
    pub seed: u64,
    /// Further flags for the spawned server.
    pub server_args: Vec<String>,
}

/// One round: the same number of jobs on each side.
#[derive(Clone, Debug, Serialize)]
pub struct Round {
    /// `heloom schedule` in this process, jobs/s.
    pub schedule_jobs_per_s: f64,
    /// Graph shapes the `heloom` policy chose in process, with counts.
    pub schedule_variants: BTreeMap<String, usize>,
    /// `heloom serve`, jobs/s (server-side finish times).
    pub server_jobs_per_s: f64,
    /// Server over in-process.
    pub ratio: f64,
    /// Server: first submission to the last job seen done by the client, s.
    pub server_wall_s: f64,
    /// CPU time per job of this process during its round (the in-process side), ms, less
    /// the result check after the run.
    pub schedule_cpu_ms_per_job: f64,
    /// CPU time per job of the server process during its round (HTTP, database, storage and
    /// HE lanes together), ms.
    pub server_cpu_ms_per_job: f64,
    /// The same by [`thread_group`] (Linux; threads that ended during the round are missing).
    pub server_threads_ms_per_job: BTreeMap<String, f64>,
    /// CPU ms per job of the in-process executor's scheduler thread (this one), less the
    /// check: the counterpart of the server's "executor scheduler" group.
    pub schedule_scheduler_ms_per_job: f64,
}

/// The idle start-latency measurement.
#[derive(Clone, Debug, Serialize)]
pub struct Idle {
    /// Jobs measured.
    pub jobs: u64,
    /// Histogram: (upper bound in ms, jobs at or below it).
    pub buckets_ms: Vec<(f64, u64)>,
    /// Median, ms: the upper bound of the bucket that holds it.
    pub p50_ms: f64,
    /// 99th percentile, ms: the upper bound of the bucket that holds it.
    pub p99_ms: f64,
    /// Mean, ms.
    pub mean_ms: f64,
    /// Client-side submit to done seen, ms (median), for scale.
    pub round_trip_p50_ms: f64,
    /// The same, 99th percentile.
    pub round_trip_p99_ms: f64,
    /// p99 <= [`TARGET_START_P99_MS`].
    pub met: bool,
}

/// What `heloom bench serve` reports.
#[derive(Clone, Debug, Serialize)]
pub struct OverheadReport {
    /// Where it ran.
    pub machine: Machine,
    /// log2 N.
    pub log_n: u32,
    /// Threads of each side.
    pub threads: usize,
    /// The cost model both sides used.
    pub profile: String,
    /// Jobs per round and side.
    pub jobs: usize,
    /// Further flags the server was started with.
    pub server_args: Vec<String>,
    /// The warm-up round (both sides, before the timed rounds; not counted): first-use
    /// costs such as fresh memory and the first pricing of each graph shape.
    pub warmup: Option<Round>,
    /// The timed rounds.
    pub rounds: Vec<Round>,
    /// Median of the rounds' ratios.
    pub median_ratio: f64,
    /// Median over rounds of server CPU per job over in-process CPU per job: where the
    /// overhead is, less disturbed by other load on the machine than the rates (which move by
    /// several percent from round to round on a shared VM).
    pub median_cpu_ratio: f64,
    /// Median ratio >= [`TARGET_RATIO`].
    pub throughput_met: bool,
    /// Idle start latency.
    pub idle: Idle,
    /// Server results decrypted and checked.
    pub checked: usize,
    /// Of those, within [`ERROR_BOUND`].
    pub correct: usize,
    /// Largest decryption error seen.
    pub max_error: f64,
    /// Seconds the whole run took.
    pub seconds: f64,
    /// Results the server stored per write of result records over its rounds (the warm-up
    /// included): results that end together share one write and one commit. `None` from a
    /// server without the metric (an older `--server-exe`).
    #[serde(default)]
    pub results_per_write: Option<f64>,
}

/// Steady completion rate: jobs finishing between the 10th and 90th percentile finish times
/// over that span, jobs/s.
pub fn steady_rate(finish_ms: &mut [f64]) -> f64 {
    finish_ms.sort_by(f64::total_cmp);
    let n = finish_ms.len();
    if n < 3 {
        return 0.0;
    }
    let (a, b) = (
        (n as f64 * 0.1) as usize,
        ((n as f64 * 0.9) as usize).min(n - 1),
    );
    let span = finish_ms[b] - finish_ms[a];
    if b <= a || span <= 0.0 {
        return 0.0;
    }
    (b - a) as f64 / (span / 1e3)
}

/// The histogram `heloom_job_start_latency_seconds` in a `/metrics` text: (le seconds, count).
pub fn start_buckets(metrics: &str) -> Vec<(f64, u64)> {
    let mut out = Vec::new();
    for line in metrics.lines() {
        let Some(rest) = line.strip_prefix("heloom_job_start_latency_seconds_bucket{le=\"") else {
            continue;
        };
        let Some((le, count)) = rest.split_once("\"} ") else {
            continue;
        };
        let le = if le == "+Inf" {
            f64::INFINITY
        } else {
            match le.parse::<f64>() {
                Ok(v) => v,
                Err(_) => continue,
            }
        };
        if let Ok(c) = count.trim().parse::<u64>() {
            out.push((le, c));
        }
    }
    out
}

/// The upper bound (ms) of the bucket holding quantile `q` of cumulative buckets `b`.
pub fn bucket_quantile_ms(b: &[(f64, u64)], q: f64) -> f64 {
    let total = b.last().map_or(0, |x| x.1);
    if total == 0 {
        return f64::NAN;
    }
    let want = (q * total as f64).ceil() as u64;
    b.iter()
        .find(|(_, c)| *c >= want)
        .map_or(f64::INFINITY, |(le, _)| le * 1e3)
}

/// Nearest-rank percentile, `p` in 0..=100.
fn percentile(xs: &[f64], p: f64) -> f64 {
    crate::loadtest::percentile(xs, p / 100.0)
}

/// Runs the benchmark; `note` hears what it is doing.
pub fn run(opts: &OverheadOptions, note: &dyn Fn(&str)) -> Result<OverheadReport> {
    if opts.jobs < 20 || opts.rounds == 0 || opts.idle_jobs == 0 {
        bail!("--jobs must be at least 20, --rounds and --idle-jobs at least 1");
    }
    let t0 = Instant::now();
    let machine = Machine::now();
    let threads = opts.threads.unwrap_or_else(heloom_pool::cores).max(1);
    if threads != heloom_pool::cores() {
        // `heloom schedule` runs on every core; a smaller server would not be comparable.
        bail!(
            "--threads must equal this machine's cores ({}) for an apples-to-apples comparison \
             with `heloom schedule`, which runs on every core",
            heloom_pool::cores()
        );
    }
    let (profile_name, profile) = match &opts.profile {
        Some(p) => (
            p.clone(),
            Profile::load(p).with_context(|| format!("loading profile {p}"))?,
        ),
        None => {
            note("measuring this machine's cost profile (used by both sides)");
            let cfg = MeasureConfig {
                log_n: opts.log_n,
                reps: 3,
                ..MeasureConfig::default()
            };
            (
                "measured host".into(),
                measure_host(&cfg, &mut |_, _, _| {})?,
            )
        }
    };
    note("keys and inputs for the in-process side");
    let setup = Setup::real(profile.clone(), opts.log_n)?;

    // The server, on a fresh data directory holding the same profile.
    let data = std::env::temp_dir().join(format!(
        "heloom-bench-serve-{}-{}",
        std::process::id(),
        crate::loadtest::unix_ms()
    ));
    std::fs::create_dir_all(&data).with_context(|| format!("creating {}", data.display()))?;
    profile
        .save(&data.join("profile.json"))
        .context("writing the profile for the server")?;
    // Through the server's own binary: its schema (a build compared with --server-exe may
    // read an older one than this binary writes).
    let token = server_token(&opts.exe, &data)?;
    let insecure = opts.log_n < 14;
    note(&format!(
        "starting {} serve on {}",
        opts.exe.display(),
        data.display()
    ));
    // The comparison is with the CPU in one process: a GPU the server would pull jobs onto
    // stays out unless the flags ask for it (older builds, without --gpu, have none to use).
    let mut server_args = opts.server_args.clone();
    if !server_args.iter().any(|a| a.starts_with("--gpu")) && has_gpu_flag(&opts.exe) {
        server_args.extend(["--gpu".to_string(), "off".to_string()]);
    }
    let mut server =
        Spawned::start_with(&opts.exe, &data, Some(threads), insecure, 0, &server_args)?;
    let out = measure(opts, &setup, &server.url(), server.pid(), &token, note).map(|mut r| {
        r.threads = threads;
        r.profile = profile_name;
        r
    });
    let log = server.last_log();
    server.kill();
    match out {
        Ok(mut r) => {
            let _ = std::fs::remove_dir_all(&data);
            r.machine = machine.finish();
            r.seconds = t0.elapsed().as_secs_f64();
            Ok(r)
        }
        Err(e) => Err(e.context(format!(
            "the server's data directory is kept: {}; its last log lines:\n{log}",
            data.display()
        ))),
    }
}

/// A new bearer token for tenant `bench` in `data`, from `exe serve token create`.
fn server_token(exe: &Path, data: &Path) -> Result<String> {
    let out = std::process::Command::new(exe)
        .args(["serve", "token", "create", "--tenant", "bench", "--data"])
        .arg(data)
        .output()
        .with_context(|| format!("running {} serve token create", exe.display()))?;
    if !out.status.success() {
        bail!(
            "{} serve token create failed: {}",
            exe.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let token = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if token.is_empty() || token.contains(char::is_whitespace) {
        bail!("{} serve token create printed no token", exe.display());
    }
    Ok(token)
}

/// Whether `exe serve` takes `--gpu` (builds before the GPU joined the server do not).
fn has_gpu_flag(exe: &Path) -> bool {
    std::process::Command::new(exe)
        .args(["serve", "--help"])
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("--gpu"))
}

/// CPU seconds (user and system) process `pid` has used (`self`: this one).
fn process_cpu_s(pid: &str) -> Option<f64> {
    crate::loadtest::proc_stat_cpu_s(pid, 14)
}

/// The server's threads in groups by what they do (their names; `/proc` shows the first 15
/// characters).
pub fn thread_group(comm: &str) -> &'static str {
    const GROUPS: [(&str, &str); 7] = [
        ("heloom-online-l", "HE lanes"),
        ("heloom-pool-", "HE lanes"),
        ("heloom-online-s", "executor scheduler"),
        ("heloom-serve-fi", "storing results"),
        ("heloom-serve-di", "starting jobs"),
        ("heloom-serve-io", "HTTP"),
        ("heloom-serve-ch", "log checkpoints"),
    ];
    GROUPS
        .iter()
        .find(|(prefix, _)| comm.starts_with(prefix))
        .map_or("other", |&(_, g)| g)
}

/// CPU seconds (user + system) of process `pid`'s live threads by [`thread_group`] (Linux;
/// empty elsewhere).
fn thread_groups_cpu_s(pid: u32) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return out;
    };
    for t in tasks.flatten() {
        let tid = t.file_name().to_string_lossy().to_string();
        let Ok(comm) = std::fs::read_to_string(t.path().join("comm")) else {
            continue;
        };
        if let Some(s) = crate::loadtest::proc_stat_cpu_s(&format!("{pid}/task/{tid}"), 14) {
            *out.entry(thread_group(comm.trim()).to_string())
                .or_insert(0.0) += s;
        }
    }
    out
}

/// CPU ms per job by thread group between two readings.
fn groups_ms_per_job(
    before: &BTreeMap<String, f64>,
    after: &BTreeMap<String, f64>,
    jobs: usize,
) -> BTreeMap<String, f64> {
    after
        .iter()
        .map(|(g, &a)| {
            let b = before.get(g).copied().unwrap_or(0.0);
            (g.clone(), (a - b).max(0.0) * 1e3 / jobs.max(1) as f64)
        })
        .collect()
}

/// CPU ms per job between two readings (NaN where `/proc` is missing).
fn cpu_ms_per_job(before: Option<f64>, after: Option<f64>, jobs: usize) -> f64 {
    match (before, after) {
        (Some(b), Some(a)) if jobs > 0 => (a - b) * 1e3 / jobs as f64,
        _ => f64::NAN,
    }
}

fn measure(
    opts: &OverheadOptions,
    setup: &Setup,
    url: &str,
    server_pid: u32,
    token: &str,
    note: &dyn Fn(&str),
) -> Result<OverheadReport> {
    wait_ready(url, Duration::from_secs(60))?;
    let params = default_params(opts.log_n)?;
    let ctx = Context::<u64>::new(params)?;
    let client = Client::new(url, token)?;
    note("keys and inputs for the server side");
    let keys = keygen(&ctx, &[], false)?;
    let key = client.upload_keys(ctx.params(), &keys.evaluation_keys)?;
    let enc = Encryptor::new(&ctx);
    let dec = Decryptor::new(&ctx, &keys.secret_key)?;
    let mut rng = ChaCha20Rng::seed_from_u64(opts.seed);
    let slots = ctx.params().slots();
    // Every server job has an input of its own, so no two results are the same bytes (a
    // repeated result would skip its write: content addressing). Inputs are uploaded before
    // each round, outside its timing.
    let mut inputs: Vec<(String, Vec<f64>)> = Vec::new();
    let mut upload = |inputs: &mut Vec<(String, Vec<f64>)>, n: usize| -> Result<()> {
        for _ in 0..n {
            let x: Vec<f64> = (0..slots).map(|_| rng.gen_range(-1.0..1.0)).collect();
            let obj = client.upload_ciphertext(&enc.encrypt(&x, &keys.public_key)?)?;
            inputs.push((obj.id, x));
        }
        Ok(())
    };
    // The result at level 0, as the in-process side keeps it (what decryption needs).
    let job = |inputs: &[(String, Vec<f64>)], tag: &str, i: usize| {
        let mut j = SubmitJob::new(
            &format!("{tag}-{i}"),
            &key.id,
            vec![inputs[i].0.clone()],
            Task::Exp { variant: None },
        );
        j.result_level = Some(0);
        j
    };
    // One warm-up job: the server loads the key set and prices the graph once.
    upload(&mut inputs, 1)?;
    let w = client.submit(&job(&inputs, "warmup", 0))?;
    client.wait(w.id, Duration::from_secs(60))?;

    let mut rounds = Vec::new();
    let mut warmup = None;
    let mut all_ids: Vec<(i64, usize)> = Vec::new();
    // Round 0 warms both sides up and is not counted: in the first round the in-process side
    // ran about a quarter slower than in later ones (fresh memory, first graph pricing),
    // which flattered the server's ratio.
    for r in 0..=opts.rounds {
        let name = if r == 0 {
            "warm-up round".to_string()
        } else {
            format!("round {r}/{}", opts.rounds)
        };
        note(&format!(
            "{name}: {} jobs in process (heloom schedule)",
            opts.jobs
        ));
        let cpu0 = process_cpu_s("self");
        // This thread runs the in-process executor's scheduler loop (and then the check).
        let sched0 = process_cpu_s("thread-self");
        let run = setup.run("heloom", 0.01, opts.jobs, opts.seed + r as u64)?;
        let schedule_scheduler = cpu_ms_per_job(
            sched0,
            process_cpu_s("thread-self").map(|c| c - run.record.check_ms / 1e3),
            opts.jobs,
        );
        // Less the result check after the run (decryption on one thread: its wall time is
        // its CPU time), which is not scheduled work and has no counterpart on the server.
        let check_s = run.record.check_ms / 1e3;
        let schedule_cpu =
            cpu_ms_per_job(cpu0, process_cpu_s("self").map(|c| c - check_s), opts.jobs);
        let mut finish: Vec<f64> = run.record.jobs.iter().map(|j| j.finish_ms).collect();
        let schedule = steady_rate(&mut finish);
        let mut variants = BTreeMap::new();
        for j in &run.record.jobs {
            *variants.entry(j.variant.clone()).or_insert(0) += 1;
        }
        if run.record.jobs.iter().any(|j| j.correct == Some(false)) {
            bail!("an in-process job decrypted wrong");
        }
        note(&format!("{name}: uploading {} inputs", opts.jobs));
        let first = inputs.len();
        upload(&mut inputs, opts.jobs)?;
        note(&format!("{name}: {} jobs through heloom serve", opts.jobs));
        let start = Instant::now();
        let server_cpu0 = process_cpu_s(&server_pid.to_string());
        let groups0 = thread_groups_cpu_s(server_pid);
        let tag = format!("r{r}");
        // One tenant submitting a burst: batches of up to 1000 jobs (one request and one
        // commit each), as a client with many jobs would.
        let mut ids = Vec::with_capacity(opts.jobs);
        let all: Vec<usize> = (first..inputs.len()).collect();
        for chunk in all.chunks(heloom_serve::api::MAX_BATCH_JOBS) {
            let batch: Vec<SubmitJob> = chunk.iter().map(|&i| job(&inputs, &tag, i)).collect();
            for (v, &i) in client.submit_batch(&batch)?.iter().zip(chunk) {
                ids.push((v.id, i));
            }
        }
        // Jobs of one tenant start in submission order: the last one ends (about) last.
        let mut pending: Vec<i64> = ids.iter().map(|p| p.0).collect();
        let mut finish = Vec::with_capacity(opts.jobs);
        while let Some(&last) = pending.last() {
            let v = client.wait(last, Duration::from_secs(120))?;
            if v.finished_ms.is_none() && v.state != "failed" && v.state != "cancelled" {
                continue;
            }
            let by_id = round_jobs(&client, pending.iter().copied().min().unwrap_or(0))?;
            pending.retain(|id| match by_id.get(id) {
                Some(j) if j.state == "done" => {
                    finish.push(j.finished_ms.unwrap_or(0) as f64);
                    false
                }
                _ => true,
            });
            if let Some(bad) = pending
                .iter()
                .filter_map(|id| by_id.get(id))
                .find(|j| j.state == "failed" || j.state == "cancelled")
            {
                bail!("server job {} ended {}: {:?}", bad.id, bad.state, bad.error);
            }
        }
        let wall = start.elapsed().as_secs_f64();
        let server_cpu = cpu_ms_per_job(
            server_cpu0,
            process_cpu_s(&server_pid.to_string()),
            opts.jobs,
        );
        let server_threads =
            groups_ms_per_job(&groups0, &thread_groups_cpu_s(server_pid), opts.jobs);
        let server = steady_rate(&mut finish);
        let round = Round {
            schedule_jobs_per_s: schedule,
            schedule_variants: variants,
            server_jobs_per_s: server,
            ratio: if schedule > 0.0 {
                server / schedule
            } else {
                0.0
            },
            server_wall_s: wall,
            schedule_cpu_ms_per_job: schedule_cpu,
            server_cpu_ms_per_job: server_cpu,
            server_threads_ms_per_job: server_threads,
            schedule_scheduler_ms_per_job: schedule_scheduler,
        };
        if r == 0 {
            warmup = Some(round);
        } else {
            rounds.push(round);
        }
        all_ids.extend(ids);
    }

    note(&format!("{} jobs one at a time at idle", opts.idle_jobs));
    let before_text = client_metrics(url)?;
    let before = start_buckets(&before_text);
    let results_per_write = counter(&before_text, "heloom_result_writes_total")
        .filter(|&w| w > 0.0)
        .map(|w| ((opts.rounds + 1) * opts.jobs) as f64 / w);
    let mut trips = Vec::with_capacity(opts.idle_jobs);
    let mut idle_inputs = Vec::with_capacity(opts.idle_jobs);
    for i in 0..opts.idle_jobs {
        // A fresh input per job, uploaded just before it (a client's usual order).
        let x: Vec<f64> = (0..slots).map(|_| rng.gen_range(-1.0..1.0)).collect();
        let obj = client.upload_ciphertext(&enc.encrypt(&x, &keys.public_key)?)?;
        std::thread::sleep(Duration::from_millis(10));
        let t = Instant::now();
        let v = client.submit(&SubmitJob::new(
            &format!("idle-{i}"),
            &key.id,
            vec![obj.id],
            Task::Exp { variant: None },
        ))?;
        let v = client.wait(v.id, Duration::from_secs(60))?;
        if v.state != "done" {
            bail!("idle job {} ended {}: {:?}", v.id, v.state, v.error);
        }
        trips.push(t.elapsed().as_secs_f64() * 1e3);
        idle_inputs.push((v.id, x));
    }
    let after_text = client_metrics(url)?;
    let after = start_buckets(&after_text);
    let buckets: Vec<(f64, u64)> = after
        .iter()
        .map(|&(le, c)| {
            let was = before.iter().find(|b| b.0 == le).map_or(0, |b| b.1);
            (le, c.saturating_sub(was))
        })
        .collect();
    let jobs = buckets.last().map_or(0, |b| b.1);
    let (p50, p99) = (
        bucket_quantile_ms(&buckets, 0.5),
        bucket_quantile_ms(&buckets, 0.99),
    );
    let sum = |m: &str| -> f64 {
        m.lines()
            .find_map(|l| l.strip_prefix("heloom_job_start_latency_seconds_sum "))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0.0)
    };
    let mean_ms = (sum(&after_text) - sum(&before_text)) / jobs.max(1) as f64 * 1e3;
    let idle = Idle {
        jobs,
        buckets_ms: buckets.iter().map(|&(le, c)| (le * 1e3, c)).collect(),
        p50_ms: p50,
        p99_ms: p99,
        mean_ms,
        round_trip_p50_ms: percentile(&trips, 50.0),
        round_trip_p99_ms: percentile(&trips, 99.0),
        met: p99 <= TARGET_START_P99_MS,
    };

    note(&format!(
        "fetching and checking {} results",
        all_ids.len() + idle_inputs.len()
    ));
    let coeffs = JobKind::Exp.coefficients();
    let (mut checked, mut correct, mut max_error) = (0, 0, 0.0f64);
    let expected = all_ids
        .iter()
        .map(|&(id, i)| (id, &inputs[i].1))
        .chain(idle_inputs.iter().map(|(id, x)| (*id, x)));
    for (id, x) in expected {
        let cts = client.result(id, &ctx)?;
        let ct = cts.first().context("a result holds no ciphertext")?;
        let got = dec.decrypt(ct)?;
        let err = got
            .iter()
            .zip(x)
            .map(|(g, &v)| (g - coeffs.iter().rev().fold(0.0, |a, k| a * v + k)).abs())
            .fold(0.0, f64::max);
        checked += 1;
        if err <= ERROR_BOUND {
            correct += 1;
        }
        max_error = max_error.max(err);
    }
    let ratios: Vec<f64> = rounds.iter().map(|r| r.ratio).collect();
    let median_ratio = percentile(&ratios, 50.0);
    let cpu_ratios: Vec<f64> = rounds
        .iter()
        .map(|r| r.server_cpu_ms_per_job / r.schedule_cpu_ms_per_job)
        .filter(|x| x.is_finite())
        .collect();
    let median_cpu_ratio = if cpu_ratios.is_empty() {
        f64::NAN
    } else {
        percentile(&cpu_ratios, 50.0)
    };
    Ok(OverheadReport {
        machine: Machine::now(),
        log_n: opts.log_n,
        threads: 0,
        profile: String::new(),
        jobs: opts.jobs,
        server_args: opts.server_args.clone(),
        warmup,
        rounds,
        median_ratio,
        median_cpu_ratio,
        throughput_met: median_ratio >= TARGET_RATIO,
        idle,
        checked,
        correct,
        max_error,
        seconds: 0.0,
        results_per_write,
    })
}

/// The tenant's jobs with ids from `min_id` up, page by page (newest first).
fn round_jobs(client: &Client, min_id: i64) -> Result<BTreeMap<i64, JobView>> {
    let mut out = BTreeMap::new();
    let mut q = JobsQuery {
        limit: Some(10_000),
        ..JobsQuery::default()
    };
    loop {
        let page = client.jobs_page(&q)?;
        let done = page.jobs.last().is_none_or(|j| j.id <= min_id);
        out.extend(
            page.jobs
                .into_iter()
                .filter(|j| j.id >= min_id)
                .map(|j| (j.id, j)),
        );
        match page.next_before {
            Some(b) if !done => q.before = Some(b),
            _ => return Ok(out),
        }
    }
}

/// The value of the counter `name` in a `/metrics` text.
fn counter(metrics: &str, name: &str) -> Option<f64> {
    metrics.lines().find_map(|l| {
        l.strip_prefix(name)
            .and_then(|rest| rest.strip_prefix(' '))
            .and_then(|v| v.trim().parse().ok())
    })
}

fn client_metrics(url: &str) -> Result<String> {
    let (code, body) = crate::loadtest::http_get(url, "/metrics", Duration::from_secs(10))?;
    if code != 200 {
        bail!("GET /metrics answered {code}");
    }
    Ok(body)
}

/// The report as a table.
pub fn render(r: &OverheadReport) -> String {
    let mut s = format!(
        "heloom bench serve: {} ({} cores), N = 2^{}, {} e^x jobs per side and round, \
         {} threads, profile: {}\n\n",
        r.machine.model, r.machine.cores, r.log_n, r.jobs, r.threads, r.profile
    );
    if !r.server_args.is_empty() {
        s.push_str(&format!("server flags: {}\n\n", r.server_args.join(" ")));
    }
    s.push_str(
        "round  schedule jobs/s  server jobs/s  server/schedule  CPU ms/job (sched, server)  \
         policy's graph shapes\n",
    );
    let warmup = r.warmup.iter().map(|x| ("warm", x));
    let numbered: Vec<(String, &Round)> = warmup
        .map(|(n, x)| (n.to_string(), x))
        .chain(
            r.rounds
                .iter()
                .enumerate()
                .map(|(i, x)| ((i + 1).to_string(), x)),
        )
        .collect();
    for (label, x) in numbered {
        let shapes: Vec<String> = x
            .schedule_variants
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        s.push_str(&format!(
            "{:>5}  {:>15.1}  {:>13.1}  {:>15.3}  {:>12.2}, {:>12.2}  {}\n",
            label,
            x.schedule_jobs_per_s,
            x.server_jobs_per_s,
            x.ratio,
            x.schedule_cpu_ms_per_job,
            x.server_cpu_ms_per_job,
            shapes.join(", ")
        ));
    }
    s.push_str(&format!(
        "(the warm-up round is not counted)\n\
         median server/schedule: {:.3} (target >= {TARGET_RATIO}): {}\n\
         median CPU per job, server over in process: {:.3} (the server's overhead in CPU time)\n\n",
        r.median_ratio,
        if r.throughput_met { "met" } else { "NOT met" },
        r.median_cpu_ratio
    ));
    let groups = thread_medians(&r.rounds);
    if !groups.is_empty() {
        let total: f64 = groups.iter().map(|(_, ms)| ms).sum();
        let parts: Vec<String> = groups
            .iter()
            .map(|(g, ms)| format!("{g} {ms:.3} ({:.1}%)", 100.0 * ms / total.max(1e-9)))
            .collect();
        let sched: Vec<f64> = r
            .rounds
            .iter()
            .map(|x| x.schedule_scheduler_ms_per_job)
            .collect();
        s.push_str(&format!(
            "server CPU per job by thread, ms (median over rounds): {}\n\
             in process, its executor's scheduler thread: {:.3} ms per job\n",
            parts.join(", "),
            percentile(&sched, 50.0)
        ));
        if let Some(g) = r.results_per_write {
            s.push_str(&format!(
                "server results stored per write (and per commit): {g:.2}\n"
            ));
        }
        s.push('\n');
    }
    s.push_str(&format!(
        "start latency at idle (request received to job in the executor), {} jobs:\n  \
         p50 <= {:.2} ms, p99 <= {:.2} ms (bucket bounds; target p99 <= {TARGET_START_P99_MS} \
         ms): {}; mean {:.3} ms\n  client submit-to-done round trip: p50 {:.2} ms, p99 {:.2} ms\n  buckets \
         (ms: jobs at or below): {}\n\n",
        r.idle.jobs,
        r.idle.p50_ms,
        r.idle.p99_ms,
        if r.idle.met { "met" } else { "NOT met" },
        r.idle.mean_ms,
        r.idle.round_trip_p50_ms,
        r.idle.round_trip_p99_ms,
        r.idle
            .buckets_ms
            .iter()
            .map(|(le, c)| format!("{le}: {c}"))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    s.push_str(&format!(
        "server results checked: {} of {} within {:.1e} (max error {:.2e}); {:.0} s\n",
        r.correct, r.checked, ERROR_BOUND, r.max_error, r.seconds
    ));
    s
}

/// Per thread group, the median over `rounds` of the server's CPU ms per job, largest first.
pub fn thread_medians(rounds: &[Round]) -> Vec<(String, f64)> {
    let mut groups: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for r in rounds {
        for (g, &ms) in &r.server_threads_ms_per_job {
            groups.entry(g).or_default().push(ms);
        }
    }
    let mut out: Vec<(String, f64)> = groups
        .into_iter()
        .map(|(g, v)| (g.to_string(), percentile(&v, 50.0)))
        .collect();
    out.sort_by(|a, b| b.1.total_cmp(&a.1));
    out
}

/// Writes `serve-overhead.json` and `.txt` into `dir`.
pub fn save(r: &OverheadReport, dir: &Path) -> Result<Vec<PathBuf>> {
    save_json_and_text(r, &render(r), dir, "serve-overhead")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steady_rate_leaves_out_ramp_and_drain() {
        // 100 jobs finishing 10 ms apart: 100 jobs/s, whatever the first and last do.
        let mut f: Vec<f64> = (0..100).map(|i| i as f64 * 10.0).collect();
        f[0] = -5000.0;
        f[99] = 1e6;
        let r = steady_rate(&mut f);
        assert!((r - 100.0).abs() < 1e-9, "{r}");
        assert_eq!(steady_rate(&mut [1.0, 2.0]), 0.0);
    }

    #[test]
    fn threads_are_grouped_by_name_and_medians_sorted() {
        assert_eq!(thread_group("heloom-online-l"), "HE lanes");
        assert_eq!(thread_group("heloom-pool-3"), "HE lanes");
        assert_eq!(thread_group("heloom-serve-fi"), "storing results");
        assert_eq!(thread_group("heloom-serve-di"), "starting jobs");
        assert_eq!(thread_group("heloom-online-s"), "executor scheduler");
        assert_eq!(thread_group("heloom-serve-io"), "HTTP");
        assert_eq!(thread_group("heloom-serve-ch"), "log checkpoints");
        assert_eq!(thread_group("heloom"), "other");
        let before = BTreeMap::from([("HE lanes".to_string(), 1.0)]);
        let after = BTreeMap::from([("HE lanes".to_string(), 5.0), ("HTTP".to_string(), 0.2)]);
        let per_job = groups_ms_per_job(&before, &after, 400);
        assert_eq!(per_job["HE lanes"], 10.0);
        assert!((per_job["HTTP"] - 0.5).abs() < 1e-12);
        let round = |lanes: f64, http: f64| Round {
            schedule_jobs_per_s: 1.0,
            schedule_variants: BTreeMap::new(),
            server_jobs_per_s: 1.0,
            ratio: 1.0,
            server_wall_s: 1.0,
            schedule_cpu_ms_per_job: 1.0,
            server_cpu_ms_per_job: 1.0,
            schedule_scheduler_ms_per_job: 0.1,
            server_threads_ms_per_job: BTreeMap::from([
                ("HE lanes".to_string(), lanes),
                ("HTTP".to_string(), http),
            ]),
        };
        let m = thread_medians(&[round(9.0, 0.1), round(11.0, 0.3), round(10.0, 0.2)]);
        assert_eq!(
            m,
            vec![("HE lanes".to_string(), 10.0), ("HTTP".to_string(), 0.2)]
        );
    }

    #[test]
    fn bucket_quantiles_read_the_prometheus_histogram() {
        let text = "# HELP x\nheloom_job_start_latency_seconds_bucket{le=\"0.0005\"} 10\n\
                    heloom_job_start_latency_seconds_bucket{le=\"0.001\"} 90\n\
                    heloom_job_start_latency_seconds_bucket{le=\"0.002\"} 99\n\
                    heloom_job_start_latency_seconds_bucket{le=\"0.005\"} 100\n\
                    heloom_job_start_latency_seconds_bucket{le=\"+Inf\"} 100\n";
        let b = start_buckets(text);
        assert_eq!(b.len(), 5);
        assert_eq!(bucket_quantile_ms(&b, 0.5), 1.0);
        assert_eq!(bucket_quantile_ms(&b, 0.99), 2.0);
        assert_eq!(bucket_quantile_ms(&b, 1.0), 5.0);
        assert!(bucket_quantile_ms(&[], 0.5).is_nan());
    }
}
