//! Real execution of a scheduling run on the host, with real ciphertexts.
//!
//! One scheduler thread (the caller) releases jobs at their arrival times, asks the
//! [`Scheduler`] what to start and hands each task to a lane: a thread that runs the task's
//! ops with its thread budget, the extra threads coming from the shared pool
//! ([`heloom_pool`]). The scheduler keeps the sum of running budgets within the capacity, so
//! lanes plus pool helpers never compute on more threads than that. Every job's result is
//! decrypted and checked after the run.

use crate::graph::{GraphError, NodeId, TaskGraph};
use crate::record::{record_dispatch, JobRecord, RunRecord, TaskRecord};
use crate::scheduler::Scheduler;
use crate::workload::{ExpWorkload, EXP_TOLERANCE};
use heloom_ckks::{Ciphertext, Threads};
use heloom_math::Word;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

struct LaneJob<W: Word> {
    job: usize,
    task: usize,
    threads: usize,
    graph: Arc<TaskGraph>,
    operands: Vec<(NodeId, Arc<Ciphertext<W>>)>,
    is_final: bool,
    record: usize,
}

struct Done<W: Word> {
    lane: usize,
    job: usize,
    task: usize,
    threads: usize,
    record: usize,
    start: Instant,
    end: Instant,
    out: Result<Ciphertext<W>, GraphError>,
}

/// Per-job values while the job runs: its graph and the task outputs a later task still
/// needs.
struct JobValues<W: Word> {
    graph: Arc<TaskGraph>,
    values: Vec<Option<Arc<Ciphertext<W>>>>,
    uses_left: Vec<usize>,
}

/// Runs the workload's e^x jobs arriving at `arrivals` (ms) under `sched`, for real.
/// `progress(done, total)` is called as jobs finish.
pub fn execute<W: Word>(
    sched: &mut Scheduler,
    workload: &ExpWorkload<W>,
    arrivals: &[f64],
    gap_ms: f64,
    window: (usize, usize),
    progress: &mut dyn FnMut(usize, usize),
) -> Result<RunRecord, GraphError> {
    let n = arrivals.len();
    let lanes = sched.capacity();
    let mut jobs = JobRecord::pending(arrivals);
    let mut tasks: Vec<TaskRecord> = Vec::new();
    let mut results: Vec<Option<Ciphertext<W>>> = (0..n).map(|_| None).collect();
    let mut state: Vec<Option<JobValues<W>>> = (0..n).map(|_| None).collect();
    let mut first_error: Option<GraphError> = None;
    let mut sched_time = Duration::ZERO;

    std::thread::scope(|scope| {
        let (done_tx, done_rx) = mpsc::channel::<Done<W>>();
        let mut lane_tx: Vec<mpsc::Sender<LaneJob<W>>> = Vec::with_capacity(lanes);
        for lane in 0..lanes {
            let (tx, rx) = mpsc::channel::<LaneJob<W>>();
            lane_tx.push(tx);
            let done_tx = done_tx.clone();
            let base = workload.evaluator().clone();
            scope.spawn(move || {
                for j in rx {
                    let start = Instant::now();
                    let ev = base.with_threads(Threads::new(j.threads));
                    let fetch = |node: NodeId| {
                        j.operands
                            .iter()
                            .find(|(id, _)| *id == node)
                            .map(|(_, c)| Arc::clone(c))
                    };
                    let mut out = j.graph.run_task(j.task, &ev, &fetch);
                    if j.is_final {
                        // Keep only what decryption needs: the lowest limb.
                        out = out.and_then(|c| Ok(ev.drop_to_level(&c, 0)?));
                    }
                    let end = Instant::now();
                    let msg = Done {
                        lane,
                        job: j.job,
                        task: j.task,
                        threads: j.threads,
                        record: j.record,
                        start,
                        end,
                        out,
                    };
                    if done_tx.send(msg).is_err() {
                        break;
                    }
                }
            });
        }
        drop(done_tx);

        let t0 = Instant::now();
        let ms = |t: Instant| t.duration_since(t0).as_secs_f64() * 1e3;
        let mut free_lanes: Vec<usize> = (0..lanes).rev().collect();
        let mut next = 0usize;
        let mut finished = 0usize;
        while finished < n && first_error.is_none() {
            let now = ms(Instant::now());
            while next < n && arrivals[next] <= now {
                let d0 = Instant::now();
                let v = sched.release(next, now);
                sched_time += d0.elapsed();
                let g = &sched.variants()[v].graph;
                jobs[next].variant = g.name().to_string();
                let mut values: Vec<Option<Arc<Ciphertext<W>>>> = vec![None; g.nodes().len()];
                if let Some(&input) = g.input_nodes().first() {
                    values[input] = Some(Arc::clone(workload.input(next)));
                }
                state[next] = Some(JobValues {
                    graph: Arc::clone(g),
                    values,
                    uses_left: g.tasks().iter().map(|t| t.succs.len()).collect(),
                });
                next += 1;
            }
            let d0 = Instant::now();
            let starts = sched.dispatch(now);
            sched_time += d0.elapsed();
            for d in starts {
                let (Some(v), Some(js)) = (sched.job_variant(d.job), state[d.job].as_ref()) else {
                    continue;
                };
                let graph = Arc::clone(&sched.variants()[v].graph);
                let task = &graph.tasks()[d.task];
                let mut operands = Vec::new();
                for &node in &task.nodes {
                    for o in graph.nodes()[node].op.operands() {
                        if let Some(c) = &js.values[o] {
                            if !operands.iter().any(|(id, _)| *id == o) {
                                operands.push((o, Arc::clone(c)));
                            }
                        }
                    }
                }
                let Some(lane) = free_lanes.pop() else {
                    first_error = Some(GraphError::Invalid(
                        "no free lane: the scheduler exceeded its capacity".into(),
                    ));
                    break;
                };
                let dispatch_ms = ms(Instant::now());
                let record =
                    record_dispatch(&mut jobs, &mut tasks, &d, task, now, dispatch_ms, f64::NAN);
                let is_final = task.succs.is_empty();
                let msg = LaneJob {
                    job: d.job,
                    task: d.task,
                    threads: d.threads,
                    graph,
                    operands,
                    is_final,
                    record,
                };
                if lane_tx[lane].send(msg).is_err() {
                    first_error = Some(GraphError::Invalid("a lane thread stopped".into()));
                }
            }
            // Wait for a completion, or until the next arrival.
            let wait = arrivals
                .get(next)
                .map(|&a| Duration::from_secs_f64(((a - ms(Instant::now())) / 1e3).max(0.0)));
            let msg = match wait {
                Some(w) if w.is_zero() => continue,
                Some(w) => match done_rx.recv_timeout(w) {
                    Ok(m) => m,
                    Err(mpsc::RecvTimeoutError::Timeout) => continue,
                    Err(mpsc::RecvTimeoutError::Disconnected) => break,
                },
                None => match done_rx.recv() {
                    Ok(m) => m,
                    Err(_) => break,
                },
            };
            let mut pending = vec![msg];
            while let Ok(m) = done_rx.try_recv() {
                pending.push(m);
            }
            for m in pending {
                free_lanes.push(m.lane);
                tasks[m.record].start_ms = ms(m.start);
                tasks[m.record].end_ms = ms(m.end);
                let out = match m.out {
                    Ok(c) => c,
                    Err(e) => {
                        first_error.get_or_insert(e);
                        continue;
                    }
                };
                let d0 = Instant::now();
                let job_done = sched.complete(m.job, m.task, m.threads);
                sched_time += d0.elapsed();
                handle(&mut state, &mut results, m.job, m.task, out, job_done);
                if job_done {
                    jobs[m.job].finish_ms = ms(m.end);
                    finished += 1;
                    progress(finished, n);
                }
            }
        }
        drop(lane_tx);
    });
    if let Some(e) = first_error {
        return Err(e);
    }
    // Check every result (client side).
    let check = Instant::now();
    for (j, r) in results.iter().enumerate() {
        if let Some(c) = r {
            let err = workload.error(j, c)?;
            jobs[j].correct = Some(err <= EXP_TOLERANCE);
        }
    }
    let count = tasks.len().max(1);
    Ok(RunRecord {
        policy: sched.policy_name().to_string(),
        gap_ms,
        executor: "real".to_string(),
        capacity: sched.capacity(),
        window,
        jobs,
        tasks,
        sched_overhead_ms: sched_time.as_secs_f64() * 1e3 / count as f64,
        check_ms: check.elapsed().as_secs_f64() * 1e3,
    })
}

/// Stores a finished task's output where later tasks (or the result list) need it, and drops
/// the outputs no task will read again.
fn handle<W: Word>(
    state: &mut [Option<JobValues<W>>],
    results: &mut [Option<Ciphertext<W>>],
    job: usize,
    task: usize,
    out: Ciphertext<W>,
    job_done: bool,
) {
    if job_done {
        results[job] = Some(out);
        state[job] = None;
        return;
    }
    let Some(js) = state[job].as_mut() else {
        return;
    };
    let graph = Arc::clone(&js.graph);
    let t = &graph.tasks()[task];
    js.values[t.output] = Some(Arc::new(out));
    for &d in &t.deps {
        js.uses_left[d] = js.uses_left[d].saturating_sub(1);
        if js.uses_left[d] == 0 {
            js.values[graph.tasks()[d].output] = None;
        }
    }
}
