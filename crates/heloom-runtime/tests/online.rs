//! The online executor: concurrent jobs from two tenants (own keys) on two graphs decrypt
//! correctly, cancel and shutdown end every job exactly once, inputs that do not fit are
//! refused, and the scheduler holds nothing for finished jobs.

#[path = "../../heloom-ckks/tests/common/mod.rs"]
mod common;

use common::{insecure_deep_params, rand_vec, Setup};
use heloom_ckks::{Ciphertext, PolyBasis};
use heloom_runtime::cost::CostModel;
use heloom_runtime::graph::{
    exp_coefficients, exp_graph, polynomial_graph, ExpVariant, GraphBuilder, GraphError, TaskGraph,
};
use heloom_runtime::policy::policy_by_name;
use heloom_runtime::scheduler::{Footprint, Scheduler};
use heloom_runtime::{ContentionClass, OnlineConfig, OnlineExecutor, OnlineJob, OpKind};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Barrier, Mutex};
use std::time::Duration;

/// Largest error allowed on a decrypted result (N = 2^12, 40-bit scale, depth <= 4: the
/// noise is near 1e-7; values are at most e).
const BOUND: f64 = 1e-4;
/// How long a test waits for a job before it fails instead of hanging.
const WAIT: Duration = Duration::from_secs(120);

type Outcome = Result<Vec<Ciphertext<u64>>, GraphError>;

/// Every op costs `nq` ms on one thread and `nq / t` on `t`; no contention.
struct Toy(usize);

impl CostModel for Toy {
    fn op_ms(&self, op: OpKind, nq: usize, threads: usize) -> f64 {
        match op {
            OpKind::Add | OpKind::AddPlain => 0.01,
            _ => nq as f64 / threads.max(1) as f64,
        }
    }
    fn slowdown(&self, _class: ContentionClass, _busy: f64) -> f64 {
        1.0
    }
    fn task_overhead_ms(&self) -> f64 {
        0.01
    }
    fn capacity(&self) -> usize {
        self.0
    }
}

fn config(capacity: usize, policy: &str) -> OnlineConfig {
    let mut c = OnlineConfig::new(capacity, Arc::new(Toy(capacity)));
    c.policy = policy.to_string();
    c
}

const POLY: [f64; 5] = [0.5, -1.25, 0.0, 2.0, 0.125];

fn poly(x: f64) -> f64 {
    POLY.iter().rev().fold(0.0, |acc, c| acc * x + c)
}

fn maclaurin6(x: f64) -> f64 {
    exp_coefficients(6)
        .iter()
        .rev()
        .fold(0.0, |acc, c| acc * x + c)
}

/// The e^x job (paper's shape) and a degree-4 polynomial, for inputs at the top level.
fn graphs(t: &Setup<u64>) -> (Arc<TaskGraph>, Arc<TaskGraph>) {
    let m = t.ctx.params().moduli().to_vec();
    let (_, probe) = input(t, 0);
    let (level, scale) = (probe.level(), probe.scale());
    let e = exp_graph(ExpVariant::Paper, &m, level, scale).expect("exp graph");
    let p = polynomial_graph("poly", &m, level, scale, &POLY, PolyBasis::Power).expect("poly");
    (Arc::new(e), Arc::new(p))
}

fn tenant() -> Setup<u64> {
    Setup::new(insecure_deep_params(), &[], false)
}

/// Random inputs in [-1, 1) and their encryption under `t`'s key.
fn input(t: &Setup<u64>, seed: u64) -> (Vec<f64>, Arc<Ciphertext<u64>>) {
    let xs = rand_vec(seed, t.ctx.n() / 2);
    let ct = t.enc.encrypt(&xs, &t.keys.public_key).expect("encrypt");
    (xs, Arc::new(ct))
}

/// Largest error of `out` decrypted by `t` against `f` of the inputs.
fn error(t: &Setup<u64>, out: &Ciphertext<u64>, xs: &[f64], f: fn(f64) -> f64) -> f64 {
    let got = t.dec.decrypt(out).expect("decrypt");
    xs.iter()
        .zip(&got)
        .map(|(&x, &g)| (f(x) - g).abs())
        .fold(0.0, f64::max)
}

/// A job on `graph` for tenant `t` whose outcome goes to `tx` tagged with `tag`.
fn job(
    t: &Setup<u64>,
    graph: &Arc<TaskGraph>,
    ct: &Arc<Ciphertext<u64>>,
    tag: usize,
    tx: &mpsc::Sender<(usize, Outcome)>,
) -> OnlineJob<u64> {
    let tx = tx.clone();
    OnlineJob::new(
        Arc::clone(graph),
        t.ev.clone(),
        vec![Arc::clone(ct)],
        move |r| {
            let _ = tx.send((tag, r));
        },
    )
}

#[test]
fn the_executor_is_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<OnlineExecutor<u64>>();
    check::<OnlineExecutor<u32>>();
}

#[test]
fn concurrent_jobs_of_two_tenants_and_two_graphs_decrypt_correctly() {
    let tenants = [tenant(), tenant()];
    let (exp_g, poly_g) = graphs(&tenants[0]);
    let exec = OnlineExecutor::<u64>::start(config(2, "heloom")).expect("start");
    let (tx, rx) = mpsc::channel();
    const JOBS: usize = 12;
    // Job i: tenant i % 2, e^x when (i / 2) is even, the polynomial otherwise.
    let plan: Vec<(usize, bool)> = (0..JOBS).map(|i| (i % 2, (i / 2) % 2 == 0)).collect();
    let inputs: Vec<_> = (0..JOBS)
        .map(|i| input(&tenants[plan[i].0], 100 + i as u64))
        .collect();
    let calls: Arc<Vec<AtomicUsize>> = Arc::new((0..JOBS).map(|_| AtomicUsize::new(0)).collect());
    let last: Arc<Vec<AtomicUsize>> = Arc::new((0..JOBS).map(|_| AtomicUsize::new(0)).collect());
    let jobs: Vec<OnlineJob<u64>> = (0..JOBS)
        .map(|i| {
            let (t, is_exp) = plan[i];
            let g = if is_exp { &exp_g } else { &poly_g };
            let (calls, last) = (Arc::clone(&calls), Arc::clone(&last));
            job(&tenants[t], g, &inputs[i].1, i, &tx).with_progress(move |done, total| {
                calls[i].fetch_add(1, Ordering::SeqCst);
                assert!(done <= total);
                last[i].store(done, Ordering::SeqCst);
            })
        })
        .collect();
    // Three threads submit at once.
    let mut per_thread: Vec<Vec<OnlineJob<u64>>> = vec![Vec::new(), Vec::new(), Vec::new()];
    for (i, j) in jobs.into_iter().enumerate() {
        per_thread[i % 3].push(j);
    }
    let ids: Vec<u64> = std::thread::scope(|s| {
        let handles: Vec<_> = per_thread
            .into_iter()
            .map(|js| {
                let exec = &exec;
                s.spawn(move || {
                    js.into_iter()
                        .map(|j| exec.submit(j).expect("submit"))
                        .collect::<Vec<u64>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("submitter"))
            .collect()
    });
    let mut sorted = ids.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(sorted.len(), JOBS, "ids are unique: {ids:?}");

    let mut results: Vec<Option<Outcome>> = (0..JOBS).map(|_| None).collect();
    for _ in 0..JOBS {
        let (i, r) = rx.recv_timeout(WAIT).expect("a job ended");
        assert!(results[i].is_none(), "job {i} ended twice");
        results[i] = Some(r);
    }
    let mut tasks = 0u64;
    for (i, r) in results.into_iter().enumerate() {
        let (t, is_exp) = plan[i];
        let (g, f): (&Arc<TaskGraph>, fn(f64) -> f64) = if is_exp {
            (&exp_g, maclaurin6)
        } else {
            (&poly_g, poly)
        };
        let outs = r.expect("ended").expect("job ok");
        assert_eq!(outs.len(), 1);
        let err = error(&tenants[t], &outs[0], &inputs[i].0, f);
        assert!(err < BOUND, "job {i}: error {err}");
        // The other tenant's key does not decrypt it: each job ran under its own keys.
        let wrong = error(&tenants[1 - t], &outs[0], &inputs[i].0, f);
        assert!(wrong > 1.0, "job {i}: the other key decrypts it ({wrong})");
        let n = g.tasks().len();
        assert_eq!(calls[i].load(Ordering::SeqCst), n, "job {i} progress calls");
        assert_eq!(
            last[i].load(Ordering::SeqCst),
            n,
            "job {i} progress reaches total"
        );
        tasks += n as u64;
    }
    let s = exec.stats();
    assert_eq!(s.jobs_completed, JOBS as u64, "{s:?}");
    assert_eq!((s.jobs_failed, s.jobs_cancelled), (0, 0), "{s:?}");
    assert_eq!((s.jobs_queued, s.tasks_running, s.busy_threads), (0, 0, 0));
    assert_eq!(s.capacity, 2);
    assert_eq!(s.tasks_run, tasks);
    exec.shutdown();
}

/// A progress callback that, on the job's first task, tells the test and waits for it.
fn pause_after_first_task(
    started: mpsc::Sender<()>,
    gate: Arc<Barrier>,
) -> impl Fn(usize, usize) + Send + 'static {
    let started = Mutex::new(started);
    move |done, _| {
        if done == 1 {
            let _ = started.lock().map(|s| s.send(()));
            gate.wait();
        }
    }
}

#[test]
fn cancel_stops_a_running_and_a_queued_job_and_the_others_complete() {
    let t = tenant();
    let (exp_g, _) = graphs(&t);
    // One thread: jobs run one after the other, earlier first.
    let exec = OnlineExecutor::<u64>::start(config(1, "fixed-1")).expect("start");
    let (tx, rx) = mpsc::channel();
    let (started_tx, started) = mpsc::channel();
    let gate = Arc::new(Barrier::new(2));
    let inputs: Vec<_> = (0..4).map(|i| input(&t, 200 + i)).collect();
    let progress: Arc<Vec<AtomicUsize>> = Arc::new((0..4).map(|_| AtomicUsize::new(0)).collect());
    let mut ids = Vec::new();
    for (i, (_, ct)) in inputs.iter().enumerate() {
        let p = Arc::clone(&progress);
        let pause = pause_after_first_task(started_tx.clone(), Arc::clone(&gate));
        let j = job(&t, &exp_g, ct, i, &tx).with_progress(move |done, total| {
            p[i].fetch_add(1, Ordering::SeqCst);
            if i == 0 {
                pause(done, total);
            }
        });
        ids.push(exec.submit(j).expect("submit"));
    }
    // Job 0 has run a task and the scheduler waits in its callback: job 0 is running, jobs
    // 1..3 are released and waiting.
    started.recv_timeout(WAIT).expect("job 0 started");
    assert!(exec.cancel(ids[0]), "running job");
    assert!(exec.cancel(ids[3]), "queued job");
    assert!(
        exec.cancel(ids[3]),
        "still pending: cancelling again is harmless"
    );
    assert!(!exec.cancel(9_999), "unknown id");
    gate.wait();

    let mut ends: Vec<Vec<Outcome>> = (0..4).map(|_| Vec::new()).collect();
    for _ in 0..4 {
        let (i, r) = rx.recv_timeout(WAIT).expect("a job ended");
        ends[i].push(r);
    }
    for (i, e) in ends.iter_mut().enumerate() {
        assert_eq!(e.len(), 1, "job {i} ended once");
        match (i, e.pop().expect("one end")) {
            (0 | 3, Err(GraphError::Cancelled)) => {}
            (1 | 2, Ok(outs)) => {
                let err = error(&t, &outs[0], &inputs[i].0, maclaurin6);
                assert!(err < BOUND, "job {i}: error {err}");
            }
            (i, other) => panic!("job {i}: {:?}", other.map(|o| o.len())),
        }
    }
    assert_eq!(
        progress[0].load(Ordering::SeqCst),
        1,
        "job 0 ran no task after its cancel"
    );
    assert_eq!(progress[3].load(Ordering::SeqCst), 0, "job 3 never started");
    assert!(!exec.cancel(ids[0]), "finished");
    assert!(!exec.cancel(ids[1]), "finished");
    let s = exec.stats();
    assert_eq!(
        (s.jobs_completed, s.jobs_cancelled, s.jobs_failed),
        (2, 2, 0)
    );
    assert_eq!((s.jobs_queued, s.tasks_running, s.busy_threads), (0, 0, 0));
    // No ends after the fact.
    exec.shutdown();
    assert!(rx.try_recv().is_err());
}

#[test]
fn inputs_that_do_not_fit_are_refused_and_nothing_runs() {
    let t = tenant();
    let other = Setup::<u64>::new(
        heloom_ckks::CkksParameters::builder(1 << 12)
            .levels(5)
            .first_bits(50)
            .scale_bits(36)
            .security(heloom_ckks::SecurityLevel::None)
            .build()
            .expect("parameters"),
        &[],
        false,
    );
    let (exp_g, _) = graphs(&t);
    let exec = OnlineExecutor::<u64>::start(config(2, "heloom")).expect("start");
    let ended = Arc::new(AtomicUsize::new(0));
    let (_, ct) = input(&t, 1);
    let low = Arc::new(t.ev.drop_to_level(&ct, 4).expect("drop"));
    let submit = |inputs: Vec<Arc<Ciphertext<u64>>>, ev: &heloom_ckks::Evaluator<u64>| {
        let e = Arc::clone(&ended);
        let j = OnlineJob::new(Arc::clone(&exp_g), ev.clone(), inputs, move |_| {
            e.fetch_add(1, Ordering::SeqCst);
        });
        exec.submit(j).expect_err("refused").to_string()
    };
    let none = submit(vec![], &t.ev);
    assert!(none.contains("takes 1 input ciphertexts, got 0"), "{none}");
    let two = submit(vec![Arc::clone(&ct), Arc::clone(&ct)], &t.ev);
    assert!(two.contains("got 2"), "{two}");
    let level = submit(vec![low], &t.ev);
    assert!(level.contains("input 0 is at level 4"), "{level}");
    // A graph recorded for other parameters than the evaluator's.
    let foreign = submit(vec![Arc::clone(&ct)], &other.ev);
    assert!(foreign.contains("another modulus chain"), "{foreign}");
    let s = exec.stats();
    assert_eq!(
        (s.jobs_queued, s.tasks_run, s.jobs_completed, s.jobs_failed),
        (0, 0, 0, 0)
    );
    exec.shutdown();
    assert_eq!(ended.load(Ordering::SeqCst), 0, "refused jobs never end");

    // Unknown policies and a zero capacity are refused at start.
    let bad = OnlineExecutor::<u64>::start(config(2, "fastest")).expect_err("unknown policy");
    let msg = bad.to_string();
    assert!(
        msg.contains("'fastest'") && msg.contains("heloom") && msg.contains("fixed-1"),
        "{msg}"
    );
    assert!(OnlineExecutor::<u64>::start(config(0, "heloom")).is_err());
}

#[test]
fn shutdown_ends_every_pending_job_and_joins() {
    let t = tenant();
    let (exp_g, poly_g) = graphs(&t);
    let exec = OnlineExecutor::<u64>::start(config(2, "fixed-1")).expect("start");
    let (tx, rx) = mpsc::channel();
    let (started_tx, started) = mpsc::channel();
    let gate = Arc::new(Barrier::new(2));
    let inputs: Vec<_> = (0..5).map(|i| input(&t, 300 + i)).collect();
    for (i, (_, ct)) in inputs.iter().enumerate() {
        let g = if i % 2 == 0 { &exp_g } else { &poly_g };
        let mut j = job(&t, g, ct, i, &tx);
        if i == 0 {
            j = j.with_progress(pause_after_first_task(
                started_tx.clone(),
                Arc::clone(&gate),
            ));
        }
        exec.submit(j).expect("submit");
    }
    started.recv_timeout(WAIT).expect("job 0 started");
    // The scheduler waits in job 0's callback; release it once shutdown has been asked
    // (shutdown sends at once, then joins).
    let release = {
        let gate = Arc::clone(&gate);
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            gate.wait();
        })
    };
    exec.shutdown();
    release.join().expect("release");
    let mut ends = vec![0usize; 5];
    while let Ok((i, r)) = rx.try_recv() {
        ends[i] += 1;
        match r {
            Err(e) => assert!(
                matches!(e, GraphError::ShutDown) && e.is_cancellation(),
                "{e}"
            ),
            Ok(_) => panic!("job {i} finished although it was stopped"),
        }
    }
    assert_eq!(
        ends,
        vec![1; 5],
        "every job ended exactly once, before shutdown returned"
    );
}

#[test]
fn dropping_the_executor_from_a_callback_does_not_deadlock() {
    let t = tenant();
    let (_, poly_g) = graphs(&t);
    let exec = OnlineExecutor::<u64>::start(config(1, "heloom")).expect("start");
    let slot: Arc<Mutex<Option<OnlineExecutor<u64>>>> = Arc::new(Mutex::new(None));
    let (tx, rx) = mpsc::channel();
    let (_, ct) = input(&t, 7);
    let first = {
        let slot = Arc::clone(&slot);
        let tx = tx.clone();
        OnlineJob::new(
            Arc::clone(&poly_g),
            t.ev.clone(),
            vec![Arc::clone(&ct)],
            move |r| {
                // The last owner goes away on the scheduler thread itself.
                let owned = slot.lock().expect("slot").take();
                drop(owned);
                let _ = tx.send((0, r));
            },
        )
    };
    let second = job(&t, &poly_g, &ct, 1, &tx);
    exec.submit(first).expect("submit");
    exec.submit(second).expect("submit");
    *slot.lock().expect("slot") = Some(exec);
    let mut got = Vec::new();
    for _ in 0..2 {
        got.push(rx.recv_timeout(WAIT).expect("ended"));
    }
    got.sort_by_key(|(i, _)| *i);
    assert!(got[0].1.is_ok());
    // The second job was stopped by the drop, or had finished already.
    assert!(matches!(&got[1].1, Ok(_) | Err(GraphError::ShutDown)));
}

#[test]
fn a_task_error_fails_its_job_only() {
    // A graph that needs relinearization keys, run by an evaluator without them.
    let t = tenant();
    let (exp_g, poly_g) = graphs(&t);
    let keyless = heloom_ckks::Evaluator::without_keys(&t.ctx);
    let exec = OnlineExecutor::<u64>::start(config(2, "heloom")).expect("start");
    let (tx, rx) = mpsc::channel();
    let (xs, ct) = input(&t, 9);
    let mut bad = job(&t, &exp_g, &ct, 0, &tx);
    bad.evaluator = keyless;
    exec.submit(bad).expect("submit");
    exec.submit(job(&t, &poly_g, &ct, 1, &tx)).expect("submit");
    let mut ends: Vec<Option<Outcome>> = vec![None, None];
    for _ in 0..2 {
        let (i, r) = rx.recv_timeout(WAIT).expect("ended");
        ends[i] = Some(r);
    }
    let e = ends[0].take().expect("job 0").expect_err("no keys");
    assert!(!e.is_cancellation(), "{e}");
    let outs = ends[1].take().expect("job 1").expect("job 1 ok");
    assert!(error(&t, &outs[0], &xs, poly) < BOUND);
    let s = exec.stats();
    assert_eq!((s.jobs_completed, s.jobs_failed, s.busy_threads), (1, 1, 0));
    exec.shutdown();
}

#[test]
fn a_panicking_callback_does_not_stop_the_executor() {
    let t = tenant();
    let (_, poly_g) = graphs(&t);
    let exec = OnlineExecutor::<u64>::start(config(1, "heloom")).expect("start");
    let (tx, rx) = mpsc::channel();
    let (xs, ct) = input(&t, 11);
    let loud = OnlineJob::new(
        Arc::clone(&poly_g),
        t.ev.clone(),
        vec![Arc::clone(&ct)],
        |_| panic!("done callback panics"),
    )
    .with_progress(|_, _| panic!("progress callback panics"));
    exec.submit(loud).expect("submit");
    exec.submit(job(&t, &poly_g, &ct, 1, &tx)).expect("submit");
    let (_, r) = rx.recv_timeout(WAIT).expect("ended");
    let outs = r.expect("ok");
    assert!(error(&t, &outs[0], &xs, poly) < BOUND);
    assert_eq!(exec.stats().jobs_completed, 2);
    exec.shutdown();
}

/// `mul -> relin -> rescale` of the input by itself: one task.
fn one_product_graph() -> TaskGraph {
    use heloom_ckks::PolyOps;
    let m = insecure_deep_params().moduli().to_vec();
    let b = GraphBuilder::new("one", &m);
    let x = b.input(5, 2f64.powi(40)).expect("input");
    let sq = b.multiply(&x, &x).expect("mul");
    let r = b.relinearize(&sq).expect("relin");
    let y = b.rescale(&r).expect("rescale");
    let z = b.add(&y, &y).expect("add");
    b.finish(&[z]).expect("graph")
}

/// Runs everything dispatchable to the end, in dispatch order; counts the jobs finished.
fn drive(s: &mut Scheduler, finished: &mut usize) {
    loop {
        let ds = s.dispatch(0.0);
        if ds.is_empty() {
            break;
        }
        for d in ds {
            if s.complete(d.job, d.task, d.threads) {
                *finished += 1;
            }
        }
    }
}

fn scheduler(capacity: usize) -> (Scheduler, Toy) {
    let toy = Toy(capacity);
    let p = policy_by_name("fixed-1", Arc::new(Toy(capacity))).expect("policy");
    (Scheduler::new(p, &toy, Vec::new(), capacity), toy)
}

#[test]
fn ten_thousand_jobs_on_distinct_graphs_leave_the_scheduler_empty() {
    let (mut s, toy) = scheduler(4);
    let base = one_product_graph();
    let tasks = base.tasks().len();
    assert_eq!(tasks, 2);
    let mut in_flight: std::collections::VecDeque<usize> = Default::default();
    let mut finished = 0;
    let mut peak_slots = 0;
    for job in 0..10_000 {
        // A fresh graph Arc for every job; every third job shares the previous one's.
        let g = Arc::new(base.clone());
        let v = s.add_variant(Arc::clone(&g), &toy);
        assert!(s.release_variant(job, v, job as f64));
        in_flight.push_back(job);
        if job % 3 == 0 {
            let w = s.add_variant(g, &toy);
            assert_eq!(w, v, "same graph, same variant");
            assert!(s.release_variant(1_000_000 + job, w, job as f64));
        }
        // Up to 8 jobs in flight at once.
        if in_flight.len() >= 8 {
            drive(&mut s, &mut finished);
            in_flight.clear();
        }
        peak_slots = peak_slots.max(s.footprint().variant_slots);
    }
    drive(&mut s, &mut finished);
    assert_eq!(finished, 10_000 + 3_334);
    assert_eq!(
        s.footprint(),
        Footprint {
            jobs: 0,
            ready: 0,
            added_variants: 0,
            variant_slots: s.footprint().variant_slots,
            cached_graphs: 0,
            flows: 0,
        }
    );
    assert!(peak_slots <= 8, "slots are reused: {peak_slots}");
    assert_eq!((s.busy(), s.jobs_in_system()), (0, 0));
    assert!(s.idle());
}

#[test]
fn abort_drops_ready_tasks_and_running_ones_give_their_threads_back() {
    let (mut s, toy) = scheduler(1);
    let g = Arc::new(one_product_graph());
    let a = s.add_variant(Arc::clone(&g), &toy);
    assert!(s.release_variant(0, a, 0.0));
    let b = s.add_variant(Arc::clone(&g), &toy);
    assert!(s.release_variant(1, b, 0.0));
    let ds = s.dispatch(0.0);
    assert_eq!(ds.len(), 1);
    assert_eq!((ds[0].job, ds[0].task), (0, 0));
    // Job 0 runs, job 1 waits: abort both.
    assert!(s.abort(0));
    assert!(s.abort(1));
    assert!(!s.abort(1), "already gone");
    assert_eq!(s.footprint().ready, 0);
    assert_eq!(s.busy(), 1, "job 0's task still runs");
    assert!(
        !s.complete(0, 0, ds[0].threads),
        "an aborted job never completes"
    );
    assert_eq!(s.busy(), 0);
    let f = s.footprint();
    assert_eq!((f.jobs, f.added_variants, f.cached_graphs), (0, 0, 0));
    assert!(s.idle());
    assert!(s.dispatch(0.0).is_empty());
    // An unknown variant releases nothing.
    assert!(!s.release_variant(2, 17, 0.0));
    assert_eq!(s.jobs_in_system(), 0);
}

/// Runs one task at a time (capacity 1) to the end; returns each job's finishing position
/// (in tasks run).
fn finish_order(s: &mut Scheduler) -> std::collections::HashMap<usize, usize> {
    let mut at = std::collections::HashMap::new();
    let mut step = 0;
    loop {
        let ds = s.dispatch(0.0);
        if ds.is_empty() {
            break;
        }
        for d in ds {
            step += 1;
            if s.complete(d.job, d.task, d.threads) {
                at.insert(d.job, step);
            }
        }
    }
    at
}

#[test]
fn flows_share_the_threads_task_by_task() {
    // Flow 1 floods: 20 jobs of 2 tasks, released before flow 2's one job.
    let g = Arc::new(one_product_graph());
    let (mut s, toy) = scheduler(1);
    for job in 0..20 {
        let v = s.add_variant(Arc::clone(&g), &toy);
        assert!(s.release_variant_in(job, v, 1, 0.0));
    }
    let v = s.add_variant(Arc::clone(&g), &toy);
    assert!(s.release_variant_in(100, v, 2, 0.0));
    assert_eq!(s.footprint().flows, 2);
    let at = finish_order(&mut s);
    // Task by task, flows alternate: flow 2's two tasks run 2nd/4th at the latest (the first
    // flooding task had the earlier tag), so its job ends by task 4 of 42.
    assert!(at[&100] <= 4, "flow 2's job ended at task {}", at[&100]);
    // Within flow 1 the list order holds: its jobs end in release order.
    let mut ends: Vec<usize> = (0..20).map(|j| at[&j]).collect();
    let sorted = {
        let mut e = ends.clone();
        e.sort_unstable();
        e
    };
    assert_eq!(ends, sorted);
    ends.dedup();
    assert_eq!(ends.len(), 20);
    assert_eq!(at.len(), 21);
    assert_eq!(
        s.footprint().flows,
        0,
        "finished flows leave nothing behind"
    );

    // In one flow (the default), the same late job waits for the whole backlog.
    let (mut s, toy) = scheduler(1);
    for job in 0..20 {
        let v = s.add_variant(Arc::clone(&g), &toy);
        assert!(s.release_variant(job, v, 0.0));
    }
    let v = s.add_variant(Arc::clone(&g), &toy);
    assert!(s.release_variant(100, v, 0.0));
    let at = finish_order(&mut s);
    assert_eq!(at[&100], 42);
}

#[test]
fn an_idle_flow_banks_no_credit() {
    // Flow 2 ran alone for a while, then flow 1 joins: flow 1 is not starved while flow 2's
    // earlier service is "paid back", and flow 2 is not pushed behind flow 1's whole backlog.
    let g = Arc::new(one_product_graph());
    let (mut s, toy) = scheduler(1);
    for job in 0..10 {
        let v = s.add_variant(Arc::clone(&g), &toy);
        assert!(s.release_variant_in(job, v, 2, 0.0));
    }
    let _ = finish_order(&mut s);
    for job in 10..20 {
        let v = s.add_variant(Arc::clone(&g), &toy);
        assert!(s.release_variant_in(job, v, 1, 0.0));
    }
    let v = s.add_variant(Arc::clone(&g), &toy);
    assert!(s.release_variant_in(100, v, 2, 0.0));
    let at = finish_order(&mut s);
    assert!(
        at[&100] <= 4,
        "flow 2's late job ended at task {}",
        at[&100]
    );
    assert!(at[&10] <= 4, "flow 1's first job ended at task {}", at[&10]);
}

#[test]
fn aborting_a_flows_job_drops_its_ready_tasks() {
    let g = Arc::new(one_product_graph());
    let (mut s, toy) = scheduler(1);
    for job in 0..3 {
        let v = s.add_variant(Arc::clone(&g), &toy);
        assert!(s.release_variant_in(job, v, 7, 0.0));
    }
    assert!(s.abort(1));
    assert_eq!(s.footprint().ready, 2);
    let at = finish_order(&mut s);
    assert_eq!(at.len(), 2);
    assert!(!at.contains_key(&1));
    let f = s.footprint();
    assert_eq!((f.jobs, f.ready, f.added_variants, f.flows), (0, 0, 0, 0));
}

#[test]
fn a_flow_thread_cap_passes_a_capped_flow_over() {
    // Capacity 3, flows capped at 1 thread each: flow 1 floods, yet holds 1 thread at most,
    // and flow 2's task starts beside it at once.
    let g = Arc::new(one_product_graph());
    let (mut s, toy) = scheduler(3);
    s.set_flow_thread_cap(Some(1));
    for job in 0..5 {
        let v = s.add_variant(Arc::clone(&g), &toy);
        assert!(s.release_variant_in(job, v, 1, 0.0));
    }
    let v = s.add_variant(Arc::clone(&g), &toy);
    assert!(s.release_variant_in(10, v, 2, 0.0));
    let ds = s.dispatch(0.0);
    let jobs: Vec<usize> = ds.iter().map(|d| d.job).collect();
    assert_eq!(
        jobs,
        vec![0, 10],
        "one task per flow, the third thread idle"
    );
    assert_eq!(s.busy(), 2);
    // Flow 1's task ends: its next one starts; flow 2 still holds its thread.
    assert!(!s.complete(0, 0, 1));
    let ds = s.dispatch(0.0);
    assert_eq!(ds.len(), 1);
    assert_eq!(ds[0].job, 0);
    // Without the cap, the idle thread goes to flow 1.
    s.set_flow_thread_cap(None);
    let ds = s.dispatch(0.0);
    assert_eq!(ds.len(), 1);
    assert_eq!(ds[0].job, 1);
    let mut finished = 0;
    for d in ds {
        s.complete(d.job, d.task, d.threads);
    }
    drive(&mut s, &mut finished);
}
