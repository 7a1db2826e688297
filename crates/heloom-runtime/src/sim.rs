//! Discrete-event simulation of a scheduling run, driven by a cost model.
//!
//! Each running task holds its remaining work in "alone" milliseconds (its cost on its threads
//! with the machine otherwise idle, plus the start overhead). While `B` threads are busy in
//! total, it progresses at rate `1 / s(B)`, where `s` is the task's mix of the profile's
//! contention curves (seed 000, Tables 4-5); rates are recomputed at every event, so a task
//! slows down when others start and speeds up when they finish. A calibrated profile also slows
//! every task while a backlog of jobs is in the system ([`CostModel::backlog_slowdown`]).

use crate::cost::{CostModel, SplitCost};
use crate::record::{record_dispatch, JobRecord, RunRecord, TaskRecord};
use crate::scheduler::Scheduler;

struct Running {
    job: usize,
    task: usize,
    threads: usize,
    remaining: f64,
    split: SplitCost,
    record: usize,
}

/// Simulates `sched` over jobs arriving at `arrivals` (ms). `progress(done, total)` is called
/// as jobs finish.
pub fn simulate(
    sched: &mut Scheduler,
    model: &dyn CostModel,
    arrivals: &[f64],
    gap_ms: f64,
    window: (usize, usize),
    executor: &str,
    progress: &mut dyn FnMut(usize, usize),
) -> RunRecord {
    let (jobs, tasks, overhead) = run(sched, model, arrivals, None, progress);
    RunRecord {
        policy: sched.policy_name().to_string(),
        gap_ms,
        executor: executor.to_string(),
        capacity: sched.capacity(),
        window,
        jobs,
        tasks,
        sched_overhead_ms: overhead,
        check_ms: 0.0,
    }
}

/// [`simulate`] with each job in a fair-queueing flow (a tenant of a service,
/// [`Scheduler::release_in`]): job `i` arrives at `arrivals[i].0` ms in flow `arrivals[i].1`.
/// The record's window is every job.
pub fn simulate_flows(
    sched: &mut Scheduler,
    model: &dyn CostModel,
    arrivals: &[(f64, u64)],
    progress: &mut dyn FnMut(usize, usize),
) -> RunRecord {
    let at: Vec<f64> = arrivals.iter().map(|a| a.0).collect();
    let flows: Vec<u64> = arrivals.iter().map(|a| a.1).collect();
    let (jobs, tasks, overhead) = run(sched, model, &at, Some(&flows), progress);
    let n = at.len();
    let span = at.last().copied().unwrap_or(0.0) - at.first().copied().unwrap_or(0.0);
    RunRecord {
        policy: sched.policy_name().to_string(),
        gap_ms: if n > 1 { span / (n - 1) as f64 } else { 0.0 },
        executor: "sim".to_string(),
        capacity: sched.capacity(),
        window: (0, n.saturating_sub(1)),
        jobs,
        tasks,
        sched_overhead_ms: overhead,
        check_ms: 0.0,
    }
}

/// The event loop: job and task records, and the mean decision time (ms).
fn run(
    sched: &mut Scheduler,
    model: &dyn CostModel,
    arrivals: &[f64],
    flows: Option<&[u64]>,
    progress: &mut dyn FnMut(usize, usize),
) -> (Vec<JobRecord>, Vec<TaskRecord>, f64) {
    let n = arrivals.len();
    let mut jobs = JobRecord::pending(arrivals);
    let mut tasks: Vec<TaskRecord> = Vec::new();
    let mut running: Vec<Running> = Vec::new();
    let mut next = 0usize;
    let mut now = 0.0f64;
    let mut finished = 0usize;
    let overhead = model.task_overhead_ms();
    let mut decision_ns: u128 = 0;
    let mut decisions = 0usize;
    while finished < n {
        // Rates at the current load.
        let busy: usize = running.iter().map(|r| r.threads).sum();
        let backlog = model.backlog_slowdown(sched.jobs_in_system() as f64);
        let rates: Vec<f64> = running
            .iter()
            .map(|r| {
                1.0 / (backlog * r.split.slowdown_for(model, busy as f64, r.threads)).max(1e-9)
            })
            .collect();
        let next_done = running
            .iter()
            .zip(&rates)
            .map(|(r, k)| r.remaining / k)
            .fold(f64::INFINITY, f64::min);
        let next_arrival = arrivals.get(next).map_or(f64::INFINITY, |&a| a - now);
        let dt = next_done.min(next_arrival).max(0.0);
        if !dt.is_finite() {
            break; // nothing can happen: the scheduler refuses to start anything
        }
        for (r, k) in running.iter_mut().zip(&rates) {
            r.remaining -= dt * k;
        }
        now += dt;
        // Completions (everything within a microsecond of done).
        let mut i = 0;
        while i < running.len() {
            if running[i].remaining <= 1e-6 {
                let r = running.swap_remove(i);
                tasks[r.record].end_ms = now;
                if sched.complete(r.job, r.task, r.threads) {
                    jobs[r.job].finish_ms = now;
                    finished += 1;
                    progress(finished, n);
                }
            } else {
                i += 1;
            }
        }
        // Arrivals.
        while next < n && arrivals[next] <= now + 1e-9 {
            let v = match flows.and_then(|f| f.get(next)) {
                Some(&flow) => sched.release_in(next, flow, now),
                None => sched.release(next, now),
            };
            jobs[next].variant = sched.variants()[v].graph.name().to_string();
            next += 1;
        }
        let t0 = std::time::Instant::now();
        let starts = sched.dispatch(now);
        decision_ns += t0.elapsed().as_nanos();
        decisions += starts.len();
        for d in starts {
            let Some(v) = sched.job_variant(d.job) else {
                continue;
            };
            let graph = &sched.variants()[v].graph;
            let split = graph.task_cost(model, d.task, d.threads);
            let task = &graph.tasks()[d.task];
            let record = record_dispatch(&mut jobs, &mut tasks, &d, task, now, now, now);
            running.push(Running {
                job: d.job,
                task: d.task,
                threads: d.threads,
                remaining: split.total() + overhead,
                split,
                record,
            });
        }
    }
    let overhead_ms = if decisions > 0 {
        decision_ns as f64 / decisions as f64 / 1e6
    } else {
        0.0
    };
    (jobs, tasks, overhead_ms)
}
