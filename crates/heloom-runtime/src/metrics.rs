//! Metrics of a scheduling run: latency percentiles, makespan, throughput, utilisation and
//! scheduler overhead, plus text, JSON and CSV renderings.
//!
//! Definitions follow seed paper 000 (Section 7, Table 6, Figs. 4-7):
//!
//! - **Measured window**: the jobs whose id lies in `run.window.0 ..= run.window.1` (0-based;
//!   the paper measures jobs 301..1900 of 2300). Jobs outside the window warm the system up
//!   or drain it and are left out of every latency statistic.
//! - **Latency** of a job: arrival to finish ([`JobRecord::latency_ms`]).
//! - **Makespan**: from the earliest start of a measured job to the latest finish of a
//!   measured job.
//! - **Percentiles** use the nearest-rank definition (see [`percentile`]).
//! - **Utilisation** integrates `threads x duration` of every task exactly (no sampling) and
//!   divides by `capacity x interval length`.
//!
//! Nothing here panics on an empty record or an empty window: the affected statistics are 0.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::record::{JobRecord, RunRecord, TaskRecord};

/// The summary of one run (one policy at one mean gap on one executor).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunSummary {
    /// Policy name.
    pub policy: String,
    /// Mean gap between arrivals (ms).
    pub gap_ms: f64,
    /// Executor (`"real"` or `"simulated:<profile>"`).
    pub executor: String,
    /// Threads available to HE tasks.
    pub capacity: usize,
    /// Jobs in the whole run.
    pub jobs: usize,
    /// Measured window: job ids `window.0 ..= window.1`.
    pub window: (usize, usize),
    /// Jobs of the run whose id lies in the window.
    pub measured: usize,
    /// First measured arrival to last measured finish (ms): seed 000's "first job start to last
    /// job end", where a job's start is its arrival time `T_i` (Section 7.2). Measuring from
    /// the first task start instead would reward a policy for making the first measured job
    /// wait. 0 with no measured job.
    pub makespan_ms: f64,
    /// Median latency of the measured jobs (nearest rank, ms).
    pub p50_ms: f64,
    /// 95th-percentile latency of the measured jobs (nearest rank, ms).
    pub p95_ms: f64,
    /// 99th-percentile latency of the measured jobs (nearest rank, ms).
    pub p99_ms: f64,
    /// Largest latency of the measured jobs (ms).
    pub max_ms: f64,
    /// Mean latency of the measured jobs (ms).
    pub mean_ms: f64,
    /// Measured jobs per second of makespan; 0 when the makespan is 0.
    pub throughput_jobs_per_s: f64,
    /// Mean busy threads over the makespan interval as a fraction of `capacity`, counting
    /// every task (measured or not) that ran in that interval; 0 when the makespan or the
    /// capacity is 0. Not clamped: an oversubscribed run reads above 1.
    pub utilisation: f64,
    /// Tasks in the whole run.
    pub tasks: usize,
    /// Mean task duration, start to end, over every task (ms).
    pub mean_task_ms: f64,
    /// Mean CPU time the scheduler spent per task (ms), copied from the record.
    pub sched_overhead_ms: f64,
    /// `sched_overhead_ms / mean_task_ms * 100`; 0 when there is no task time.
    pub sched_overhead_pct: f64,
    /// Mean of `start_ms - dispatch_ms` over every task (ms).
    pub dispatch_latency_ms: f64,
    /// `(correct, checked)` over every job whose result was checked; `None` when no job was.
    pub correct: Option<(usize, usize)>,
}

/// Nearest-rank percentile of an ascending slice: the smallest value such that at least
/// `p` percent of the values are at most it, i.e. `sorted[ceil(p / 100 * n) - 1]`, with the
/// rank clamped to `1..=n` (so `p <= 0` gives the minimum and `p >= 100` the maximum).
/// Returns 0 for an empty slice. `p` is in percent (`99.0` for p99); the slice must already
/// be sorted ascending.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    let n = sorted.len();
    if n == 0 {
        return 0.0;
    }
    let rank = (p / 100.0 * n as f64).ceil();
    // NaN and negative ranks land on the first element, huge ranks on the last.
    let rank = if rank.is_nan() || rank < 1.0 {
        1
    } else if rank >= n as f64 {
        n
    } else {
        rank as usize
    };
    sorted[rank - 1]
}

/// Whether a job id lies in the run's measured window.
fn in_window(run: &RunRecord, id: usize) -> bool {
    id >= run.window.0 && id <= run.window.1
}

/// The jobs of the measured window.
fn window_jobs(run: &RunRecord) -> impl Iterator<Item = &JobRecord> {
    run.jobs.iter().filter(move |j| in_window(run, j.id))
}

/// Thread-milliseconds that `task` spends inside `[lo, hi)`.
fn busy_in(task: &TaskRecord, lo: f64, hi: f64) -> f64 {
    let overlap = task.end_ms.min(hi) - task.start_ms.max(lo);
    if overlap > 0.0 {
        overlap * task.threads as f64
    } else {
        0.0
    }
}

/// Mean of an iterator of values; 0 when it is empty.
fn mean(values: impl Iterator<Item = f64>) -> f64 {
    let (sum, n) = values.fold((0.0, 0usize), |(s, n), v| (s + v, n + 1));
    if n == 0 {
        0.0
    } else {
        sum / n as f64
    }
}

/// Summarises one run (see the module documentation for the definitions).
pub fn summarize(run: &RunRecord) -> RunSummary {
    let mut latencies: Vec<f64> = window_jobs(run).map(JobRecord::latency_ms).collect();
    latencies.sort_by(f64::total_cmp);
    let measured = latencies.len();

    let (first_arrival, last_finish) = window_jobs(run)
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), j| {
            (a.min(j.arrival_ms), b.max(j.finish_ms))
        });
    let makespan_ms = if measured > 0 && last_finish > first_arrival {
        last_finish - first_arrival
    } else {
        0.0
    };

    let throughput_jobs_per_s = if makespan_ms > 0.0 {
        measured as f64 / (makespan_ms / 1000.0)
    } else {
        0.0
    };

    let utilisation = if makespan_ms > 0.0 && run.capacity > 0 {
        let busy: f64 = run
            .tasks
            .iter()
            .map(|t| busy_in(t, first_arrival, last_finish))
            .sum();
        busy / (run.capacity as f64 * makespan_ms)
    } else {
        0.0
    };

    let mean_task_ms = mean(run.tasks.iter().map(|t| t.end_ms - t.start_ms));
    let sched_overhead_pct = if mean_task_ms > 0.0 {
        run.sched_overhead_ms / mean_task_ms * 100.0
    } else {
        0.0
    };
    let dispatch_latency_ms = mean(run.tasks.iter().map(|t| t.start_ms - t.dispatch_ms));

    let (ok, checked) = run
        .jobs
        .iter()
        .filter_map(|j| j.correct)
        .fold((0, 0), |(ok, n), c| (ok + usize::from(c), n + 1));
    let correct = (checked > 0).then_some((ok, checked));

    RunSummary {
        policy: run.policy.clone(),
        gap_ms: run.gap_ms,
        executor: run.executor.clone(),
        capacity: run.capacity,
        jobs: run.jobs.len(),
        window: run.window,
        measured,
        makespan_ms,
        p50_ms: percentile(&latencies, 50.0),
        p95_ms: percentile(&latencies, 95.0),
        p99_ms: percentile(&latencies, 99.0),
        max_ms: latencies.last().copied().unwrap_or(0.0),
        mean_ms: mean(latencies.iter().copied()),
        throughput_jobs_per_s,
        utilisation,
        tasks: run.tasks.len(),
        mean_task_ms,
        sched_overhead_ms: run.sched_overhead_ms,
        sched_overhead_pct,
        dispatch_latency_ms,
        correct,
    }
}

/// Busy fraction over the whole run: `bins` equal bins from 0 to the latest task end, each
/// given as `(bin start ms, mean busy threads in the bin / capacity)`. Computed exactly from
/// every task's `[start_ms, end_ms)` interval times its threads, not sampled. Returns an
/// empty vector when `bins` is 0 or no task has positive length; every fraction is 0 when
/// the capacity is 0.
pub fn utilisation(run: &RunRecord, bins: usize) -> Vec<(f64, f64)> {
    let end = run.tasks.iter().map(|t| t.end_ms).fold(0.0, f64::max);
    if bins == 0 || end <= 0.0 || !end.is_finite() {
        return Vec::new();
    }
    let width = end / bins as f64;
    let mut busy = vec![0.0; bins];
    for t in &run.tasks {
        if t.end_ms <= t.start_ms {
            continue;
        }
        // Bins the task can touch; `busy_in` clips the ends exactly.
        let first = ((t.start_ms.max(0.0) / width).floor() as usize).min(bins - 1);
        let last = ((t.end_ms / width).ceil() as usize).clamp(first + 1, bins);
        for (b, slot) in busy.iter_mut().enumerate().take(last).skip(first) {
            let lo = b as f64 * width;
            *slot += busy_in(t, lo, lo + width);
        }
    }
    let denom = run.capacity as f64 * width;
    busy.into_iter()
        .enumerate()
        .map(|(b, v)| {
            let frac = if run.capacity > 0 { v / denom } else { 0.0 };
            (b as f64 * width, frac)
        })
        .collect()
}

/// `correct/checked`, or `-` when nothing was checked.
fn correct_cell(c: Option<(usize, usize)>) -> String {
    match c {
        Some((ok, n)) => format!("{ok}/{n}"),
        None => "-".to_string(),
    }
}

/// An aligned plain-text table of summaries, one row per run: policy, gap, executor,
/// makespan (s), p50/p95/p99/max latency (ms), utilisation (%), scheduler overhead (% of the
/// mean task) and correctness (`ok/checked`, `-` when unchecked). Text columns are
/// left-aligned, numbers right-aligned; ends with a newline.
pub fn summary_table(runs: &[RunSummary]) -> String {
    let header = [
        "policy",
        "gap ms",
        "executor",
        "makespan s",
        "p50 ms",
        "p95 ms",
        "p99 ms",
        "max ms",
        "util %",
        "sched %",
        "correct",
    ];
    // Columns 0 and 2 hold text; the rest numbers.
    let left = |c: usize| c == 0 || c == 2;
    let rows: Vec<Vec<String>> = runs
        .iter()
        .map(|s| {
            vec![
                s.policy.clone(),
                format!("{}", s.gap_ms),
                s.executor.clone(),
                format!("{:.2}", s.makespan_ms / 1000.0),
                format!("{:.1}", s.p50_ms),
                format!("{:.1}", s.p95_ms),
                format!("{:.1}", s.p99_ms),
                format!("{:.1}", s.max_ms),
                format!("{:.1}", s.utilisation * 100.0),
                format!("{:.2}", s.sched_overhead_pct),
                correct_cell(s.correct),
            ]
        })
        .collect();
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let mut line = |cells: &[String]| {
        let mut l = String::new();
        for (c, (cell, w)) in cells.iter().zip(&widths).enumerate() {
            if c > 0 {
                l.push_str("  ");
            }
            // Writing to a String cannot fail.
            let _ = if left(c) {
                write!(l, "{cell:<w$}")
            } else {
                write!(l, "{cell:>w$}")
            };
        }
        out.push_str(l.trim_end());
        out.push('\n');
    };
    line(&header.map(String::from));
    let rule: Vec<String> = widths.iter().map(|&w| "-".repeat(w)).collect();
    line(&rule);
    for row in &rows {
        line(row);
    }
    out
}

/// A JSON comparison of runs: `{"runs": [summary, ...]}` where each summary carries every
/// [`RunSummary`] field (`window` and `correct` as two-element arrays, `correct` null when
/// unchecked), with the fields of `extra` merged into the top-level object. `extra` may be
/// an object (its keys are added; a `"runs"` key in it is ignored), `null` (nothing added),
/// or any other value (added under `"extra"`).
pub fn compare_json(runs: &[RunSummary], extra: serde_json::Value) -> serde_json::Value {
    let list: Vec<serde_json::Value> = runs
        .iter()
        .map(|s| serde_json::to_value(s).unwrap_or(serde_json::Value::Null))
        .collect();
    let mut top = serde_json::Map::new();
    match extra {
        serde_json::Value::Object(map) => {
            for (k, v) in map {
                if k != "runs" {
                    top.insert(k, v);
                }
            }
        }
        serde_json::Value::Null => {}
        other => {
            top.insert("extra".to_string(), other);
        }
    }
    top.insert("runs".to_string(), serde_json::Value::Array(list));
    serde_json::Value::Object(top)
}

/// Quotes a CSV field when it holds a comma, a quote or a line break (RFC 4180).
fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// One CSV row per job: `id,arrival_ms,start_ms,finish_ms,latency_ms,variant,correct,in_window`
/// (`correct` is `true`, `false` or empty when unchecked; `in_window` is `true`/`false`).
pub fn jobs_csv(run: &RunRecord) -> String {
    let mut out =
        String::from("id,arrival_ms,start_ms,finish_ms,latency_ms,variant,correct,in_window\n");
    for j in &run.jobs {
        let correct = j.correct.map(|c| c.to_string()).unwrap_or_default();
        let _ = writeln!(
            out,
            "{},{},{},{},{},{},{},{}",
            j.id,
            j.arrival_ms,
            j.start_ms,
            j.finish_ms,
            j.latency_ms(),
            csv_field(&j.variant),
            correct,
            in_window(run, j.id)
        );
    }
    out
}

/// One CSV row per task:
/// `job,task,kind,nq,threads,dispatch_ms,start_ms,end_ms,duration_ms,dispatch_latency_ms,in_window`
/// (`duration_ms = end - start`, `dispatch_latency_ms = start - dispatch`, `in_window` says
/// whether the task's job is measured).
pub fn tasks_csv(run: &RunRecord) -> String {
    let mut out = String::from(
        "job,task,kind,nq,threads,dispatch_ms,start_ms,end_ms,duration_ms,dispatch_latency_ms,in_window\n",
    );
    for t in &run.tasks {
        let _ = writeln!(
            out,
            "{},{},{},{},{},{},{},{},{},{},{}",
            t.job,
            t.task,
            csv_field(&t.kind),
            t.nq,
            t.threads,
            t.dispatch_ms,
            t.start_ms,
            t.end_ms,
            t.end_ms - t.start_ms,
            t.start_ms - t.dispatch_ms,
            in_window(run, t.job)
        );
    }
    out
}

/// One CSV row per summary, every [`RunSummary`] field in declaration order; `window` is
/// split into `window_first,window_last` and `correct` into `correct_ok,correct_checked`
/// (both empty when unchecked).
pub fn summary_csv(runs: &[RunSummary]) -> String {
    let mut out = String::from(
        "policy,gap_ms,executor,capacity,jobs,window_first,window_last,measured,makespan_ms,\
         p50_ms,p95_ms,p99_ms,max_ms,mean_ms,throughput_jobs_per_s,utilisation,tasks,\
         mean_task_ms,sched_overhead_ms,sched_overhead_pct,dispatch_latency_ms,correct_ok,\
         correct_checked\n",
    );
    for s in runs {
        let (ok, checked) = match s.correct {
            Some((ok, n)) => (ok.to_string(), n.to_string()),
            None => (String::new(), String::new()),
        };
        let _ = writeln!(
            out,
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
            csv_field(&s.policy),
            s.gap_ms,
            csv_field(&s.executor),
            s.capacity,
            s.jobs,
            s.window.0,
            s.window.1,
            s.measured,
            s.makespan_ms,
            s.p50_ms,
            s.p95_ms,
            s.p99_ms,
            s.max_ms,
            s.mean_ms,
            s.throughput_jobs_per_s,
            s.utilisation,
            s.tasks,
            s.mean_task_ms,
            s.sched_overhead_ms,
            s.sched_overhead_pct,
            s.dispatch_latency_ms,
            ok,
            checked
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(id: usize, arrival: f64, start: f64, finish: f64, correct: Option<bool>) -> JobRecord {
        JobRecord {
            id,
            arrival_ms: arrival,
            start_ms: start,
            finish_ms: finish,
            variant: "plain".to_string(),
            correct,
        }
    }

    fn task(job: usize, threads: usize, dispatch: f64, start: f64, end: f64) -> TaskRecord {
        TaskRecord {
            job,
            task: 0,
            kind: "mul-relin-rescale".to_string(),
            nq: 8,
            threads,
            dispatch_ms: dispatch,
            start_ms: start,
            end_ms: end,
        }
    }

    fn run(jobs: Vec<JobRecord>, tasks: Vec<TaskRecord>, window: (usize, usize)) -> RunRecord {
        RunRecord {
            policy: "fixed-half".to_string(),
            gap_ms: 80.0,
            executor: "simulated:phi".to_string(),
            capacity: 4,
            window,
            jobs,
            tasks,
            sched_overhead_ms: 0.5,
            check_ms: 0.0,
        }
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<f64> = (1..=10).map(|x| x as f64 * 10.0).collect();
        assert_eq!(percentile(&v, 50.0), 50.0);
        assert_eq!(percentile(&v, 95.0), 100.0);
        assert_eq!(percentile(&v, 90.0), 90.0);
        assert_eq!(percentile(&v, 91.0), 100.0);
        assert_eq!(percentile(&v, 10.0), 10.0);
        assert_eq!(percentile(&v, 0.0), 10.0);
        assert_eq!(percentile(&v, 100.0), 100.0);
        assert_eq!(percentile(&v, 250.0), 100.0);
        assert_eq!(percentile(&v, f64::NAN), 10.0);
        assert_eq!(percentile(&[], 50.0), 0.0);
        assert_eq!(percentile(&[7.0], 99.0), 7.0);
        // 100 values 1..=100: p99 is the 99th.
        let h: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&h, 99.0), 99.0);
        assert_eq!(percentile(&h, 50.0), 50.0);
    }

    #[test]
    fn summary_of_a_window() {
        // Five jobs; window 1..=3. Latencies: 10, 30, 20 in the window; 1000 outside.
        let jobs = vec![
            job(0, 0.0, 0.0, 1000.0, None),
            job(1, 100.0, 105.0, 110.0, Some(true)),
            job(2, 200.0, 210.0, 230.0, Some(false)),
            job(3, 300.0, 301.0, 320.0, Some(true)),
            job(4, 400.0, 400.0, 1400.0, None),
        ];
        // Capacity 4 over the makespan 100..320 (first measured arrival to last finish, 220 ms):
        // a 2-thread task over 105..320, plus a 1-thread task over 100..150, all inside.
        let tasks = vec![
            task(1, 2, 100.0, 105.0, 320.0),
            task(2, 1, 90.0, 100.0, 150.0),
        ];
        let s = summarize(&run(jobs, tasks, (1, 3)));
        assert_eq!(s.jobs, 5);
        assert_eq!(s.measured, 3);
        assert!(close(s.makespan_ms, 220.0));
        assert_eq!(s.p50_ms, 20.0);
        assert_eq!(s.p95_ms, 30.0);
        assert_eq!(s.p99_ms, 30.0);
        assert_eq!(s.max_ms, 30.0);
        assert!(close(s.mean_ms, 20.0));
        assert!(close(s.throughput_jobs_per_s, 3.0 / 0.220));
        assert!(close(s.utilisation, (2.0 * 215.0 + 50.0) / (4.0 * 220.0)));
        assert_eq!(s.tasks, 2);
        assert!(close(s.mean_task_ms, (215.0 + 50.0) / 2.0));
        assert!(close(s.sched_overhead_pct, 0.5 / 132.5 * 100.0));
        assert!(close(s.dispatch_latency_ms, (5.0 + 10.0) / 2.0));
        assert_eq!(s.correct, Some((2, 3)));
        assert_eq!(s.window, (1, 3));
    }

    #[test]
    fn empty_record_and_empty_window_give_zeros() {
        let s = summarize(&run(Vec::new(), Vec::new(), (300, 1899)));
        assert_eq!(s.measured, 0);
        assert_eq!(s.makespan_ms, 0.0);
        assert_eq!(s.p99_ms, 0.0);
        assert_eq!(s.max_ms, 0.0);
        assert_eq!(s.mean_ms, 0.0);
        assert_eq!(s.throughput_jobs_per_s, 0.0);
        assert_eq!(s.utilisation, 0.0);
        assert_eq!(s.mean_task_ms, 0.0);
        assert_eq!(s.sched_overhead_pct, 0.0);
        assert_eq!(s.dispatch_latency_ms, 0.0);
        assert_eq!(s.correct, None);

        // Jobs present but none in the window.
        let r = run(
            vec![job(0, 0.0, 1.0, 5.0, None)],
            vec![task(0, 1, 0.0, 1.0, 5.0)],
            (10, 20),
        );
        let s = summarize(&r);
        assert_eq!(s.jobs, 1);
        assert_eq!(s.measured, 0);
        assert_eq!(s.makespan_ms, 0.0);
        assert_eq!(s.utilisation, 0.0);
        assert!(close(s.mean_task_ms, 4.0));
        assert!(utilisation(&run(Vec::new(), Vec::new(), (0, 0)), 10).is_empty());
        assert!(utilisation(&r, 0).is_empty());
        assert!(summary_table(&[]).contains("policy"));
    }

    #[test]
    fn utilisation_of_two_overlapping_tasks() {
        // 2 threads over 0-10 ms and 1 thread over 5-15 ms on 4 threads.
        let r = run(
            Vec::new(),
            vec![task(0, 2, 0.0, 0.0, 10.0), task(0, 1, 5.0, 5.0, 15.0)],
            (0, 0),
        );
        let u = utilisation(&r, 3);
        assert_eq!(u.len(), 3);
        let expect = [(0.0, 0.5), (5.0, 0.75), (10.0, 0.25)];
        for ((t, f), (et, ef)) in u.iter().zip(expect) {
            assert!(close(*t, et), "bin start {t} != {et}");
            assert!(close(*f, ef), "fraction {f} != {ef}");
        }
        // Bins that split tasks unevenly: 2 bins of 7.5 ms.
        // Bin 0 [0, 7.5): 2 x 7.5 + 1 x 2.5 = 17.5 -> 17.5 / 30. Bin 1: 2 x 2.5 + 7.5 = 12.5.
        let u = utilisation(&r, 2);
        assert!(close(u[0].1, 17.5 / 30.0));
        assert!(close(u[1].1, 12.5 / 30.0));
        // Total busy thread-time is conserved whatever the bin count.
        for bins in [1, 4, 7, 100] {
            let u = utilisation(&r, bins);
            let w = 15.0 / bins as f64;
            let total: f64 = u.iter().map(|(_, f)| f * 4.0 * w).sum();
            assert!((total - 30.0).abs() < 1e-9, "bins {bins}: {total}");
        }
    }

    #[test]
    fn table_json_and_csv() {
        let jobs = vec![
            job(0, 0.0, 0.0, 10.0, Some(true)),
            job(1, 5.0, 10.0, 25.0, None),
        ];
        let tasks = vec![task(0, 2, 0.0, 0.0, 10.0), task(1, 1, 9.0, 10.0, 25.0)];
        let mut r = run(jobs, tasks, (0, 1));
        r.jobs[1].variant = "early,rescale".to_string();
        let s = summarize(&r);

        let table = summary_table(&[s.clone(), s.clone()]);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 4);
        assert!(lines[0].starts_with("policy"));
        assert!(lines[2].starts_with("fixed-half"));
        assert!(lines[2].contains("simulated:phi"));
        assert!(lines[2].contains("1/1"));
        // Aligned: every row has the header's width.
        assert_eq!(lines[2].len(), lines[1].len());

        let j = compare_json(
            std::slice::from_ref(&s),
            serde_json::json!({"machine": "test", "runs": "ignored"}),
        );
        assert_eq!(j["machine"], "test");
        let runs = j["runs"].as_array().map(Vec::len);
        assert_eq!(runs, Some(1));
        assert_eq!(j["runs"][0]["policy"], "fixed-half");
        assert_eq!(j["runs"][0]["makespan_ms"], 25.0);
        assert_eq!(j["runs"][0]["p99_ms"], 20.0);
        assert_eq!(j["runs"][0]["correct"], serde_json::json!([1, 1]));
        let back: Result<RunSummary, _> = serde_json::from_value(j["runs"][0].clone());
        assert_eq!(back.ok(), Some(s.clone()));
        assert_eq!(compare_json(&[], serde_json::json!(3))["extra"], 3);

        let csv = jobs_csv(&r);
        let rows: Vec<&str> = csv.lines().collect();
        assert_eq!(
            rows[0],
            "id,arrival_ms,start_ms,finish_ms,latency_ms,variant,correct,in_window"
        );
        assert_eq!(rows[1], "0,0,0,10,10,plain,true,true");
        assert_eq!(rows[2], "1,5,10,25,20,\"early,rescale\",,true");

        let csv = tasks_csv(&r);
        let rows: Vec<&str> = csv.lines().collect();
        assert_eq!(rows.len(), 3);
        assert_eq!(rows[2], "1,0,mul-relin-rescale,8,1,9,10,25,15,1,true");

        let csv = summary_csv(&[s]);
        let rows: Vec<&str> = csv.lines().collect();
        assert_eq!(rows.len(), 2);
        let header = rows[0].split(',').count();
        assert_eq!(header, 23);
        assert_eq!(rows[1].split(',').count(), header);
        assert!(rows[1].starts_with("fixed-half,80,simulated:phi,4,2,0,1,2,25,"));
        assert!(rows[1].ends_with(",1,1"));
    }
}
