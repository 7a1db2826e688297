//! Measuring this machine's profile (`heloom profile`): time per op by `n_q` and threads,
//! slowdown under concurrent load, and the cost of starting a task.

use super::*;

/// What [`measure_host`] measures.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MeasureConfig {
    /// log2 of the ring degree.
    pub log_n: u32,
    /// Levels of the parameter set: `n_q` runs over `2 ..= levels + 1`.
    pub levels: usize,
    /// Scaling prime size in bits.
    pub scale_bits: u32,
    /// Size of the first prime `q_0` in bits.
    pub first_bits: u32,
    /// Word size, 32 or 64.
    pub word_bits: u32,
    /// Thread budgets `1 ..= max_threads` are measured.
    pub max_threads: usize,
    /// Timing samples per table entry (median reported).
    pub reps: usize,
}

impl Default for MeasureConfig {
    /// N = 2^14, 7 levels (`n_q` up to 8, like the paper), scale 2^40, `q_0` 50 bits, 64-bit
    /// words, every core, 5 samples.
    fn default() -> Self {
        Self {
            log_n: 14,
            levels: 7,
            scale_bits: 40,
            first_bits: 50,
            word_bits: 64,
            max_threads: heloom_pool::cores(),
            reps: 5,
        }
    }
}

/// Shortest timed sample: fast ops are repeated until a sample lasts this long.
pub(super) const MIN_SAMPLE_MS: f64 = 20.0;
/// Shortest contention run per (M, t) point and round.
pub(super) const MIN_CONTENTION_MS: f64 = 100.0;
/// Jobs in each calibration stream ([`crate::calibrate`]).
pub(super) const CALIBRATION_JOBS: usize = 24;
/// Jobs in the deep-backlog calibration stream.
pub(super) const CALIBRATION_BACKLOG_JOBS: usize = 96;
/// Round trips timed for the task overhead.
pub(super) const OVERHEAD_TRIPS: usize = 200;

/// The CPU model from `/proc/cpuinfo` (`unknown` where there is none).
pub fn host_machine() -> String {
    let model = heloom_math::backend::cpu_model();
    // A blank `model name` line is unknown too.
    if model.is_empty() {
        "unknown".to_string()
    } else {
        model
    }
}

pub(super) fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

pub(super) fn ms_since(t0: Instant) -> f64 {
    t0.elapsed().as_secs_f64() * 1e3
}

/// Measures this machine: every op at every `n_q` in `2 ..= levels + 1` and every thread
/// budget in `1 ..= max_threads` (median of `reps` samples taken in `reps` sweeps over the
/// whole grid, fast ops repeated within a sample to at least 20 ms), the contention curves of relinearization and rescale at the largest
/// `n_q` (M concurrent OS threads, each looping the op with `t` threads, for every power of two
/// `t` and `M` with `M t <= max_threads`, plus the largest such `M`; in `reps` rounds that each
/// measure `M = 1` and then the larger `M`, the median per-round ratio against `M = 1` merged
/// with [`merge_contention`]), and the task overhead (median round trip of a
/// closure to a parked thread through an mpsc channel and its reply).
///
/// The parameters are the builder's defaults for `log_n`, `levels`, `scale_bits`,
/// `first_bits` and `word_bits` (128-bit security; where that is impossible, as for tiny test
/// sizes, the check is opted out of and a note says so: timings do not depend on it).
///
/// `progress(done, total, label)` is called before each step and once at the end.
pub fn measure_host(
    cfg: &MeasureConfig,
    progress: &mut dyn FnMut(usize, usize, &str),
) -> Result<Profile, ProfileError> {
    if cfg.levels == 0 {
        return Err(ProfileError::Config(
            "levels must be at least 1 (n_q runs from 2 to levels + 1)".into(),
        ));
    }
    if cfg.reps == 0 || cfg.max_threads == 0 {
        return Err(ProfileError::Config(
            "reps and max_threads must be at least 1".into(),
        ));
    }
    if !(heloom_ckks::params::MIN_LOG_N..=heloom_ckks::params::MAX_LOG_N).contains(&cfg.log_n) {
        return Err(ProfileError::Config(format!(
            "log_n must be in {}..={}, got {}",
            heloom_ckks::params::MIN_LOG_N,
            heloom_ckks::params::MAX_LOG_N,
            cfg.log_n
        )));
    }
    match cfg.word_bits {
        64 => {
            let mut p = measure::<u64>(cfg, progress)?;
            // Real e^x streams need 4 levels (the executor runs 64-bit words).
            if cfg.levels >= 4 {
                let params = build_params(cfg, SecurityLevel::Bits128)
                    .or_else(|_| build_params(cfg, SecurityLevel::None))?;
                crate::calibrate::calibrate(
                    &mut p,
                    params,
                    CALIBRATION_JOBS,
                    CALIBRATION_BACKLOG_JOBS,
                    progress,
                )
                .map_err(|e| ProfileError::Config(format!("calibration: {e}")))?;
            } else {
                p.notes
                    .push("not calibrated with job streams (fewer than 4 levels)".into());
            }
            Ok(p)
        }
        32 => measure::<u32>(cfg, progress),
        w => Err(ProfileError::Config(format!(
            "word_bits must be 32 or 64, got {w}"
        ))),
    }
}

pub(super) fn build_params(
    cfg: &MeasureConfig,
    security: SecurityLevel,
) -> Result<CkksParameters, CkksError> {
    CkksParameters::builder(1 << cfg.log_n)
        .word_bits(cfg.word_bits)
        .levels(cfg.levels)
        .scale_bits(cfg.scale_bits)
        .first_bits(cfg.first_bits)
        .security(security)
        .build()
}

/// The inputs every op is timed on, at one level.
pub(super) struct Inputs<W: Word> {
    a: Ciphertext<W>,
    b: Ciphertext<W>,
    three: Ciphertext<W>,
}

pub(super) fn run_op<W: Word>(
    ev: &Evaluator<W>,
    op: OpKind,
    x: &Inputs<W>,
) -> Result<(), CkksError> {
    let out = match op {
        OpKind::AddPlain => ev.add_const(&x.a, 0.5)?,
        OpKind::Add => ev.add(&x.a, &x.b)?,
        OpKind::MulPlain => ev.multiply_const(&x.a, 0.5)?,
        OpKind::Mul => ev.multiply(&x.a, &x.b)?,
        OpKind::Square => ev.square(&x.a)?,
        OpKind::Relin => ev.relinearize(&x.three)?,
        OpKind::Rescale => ev.rescale(&x.a)?,
    };
    drop(std::hint::black_box(out));
    Ok(())
}

/// Repetitions of `op` that make one sample last at least [`MIN_SAMPLE_MS`], from the time
/// of one (warm-up) call.
pub(super) fn calibrate<W: Word>(
    ev: &Evaluator<W>,
    op: OpKind,
    x: &Inputs<W>,
) -> Result<usize, CkksError> {
    let t0 = Instant::now();
    run_op(ev, op, x)?;
    let once = ms_since(t0).max(1e-4);
    Ok(((MIN_SAMPLE_MS / once).ceil() as usize).clamp(1, 100_000))
}

/// One sample: the mean time of `iters` back-to-back calls, in ms.
pub(super) fn sample<W: Word>(
    ev: &Evaluator<W>,
    op: OpKind,
    x: &Inputs<W>,
    iters: usize,
) -> Result<f64, CkksError> {
    let t0 = Instant::now();
    for _ in 0..iters {
        run_op(ev, op, x)?;
    }
    Ok(ms_since(t0) / iters as f64)
}

/// Start line for concurrent measuring threads: each arrives after its warm-up call and waits
/// until the main thread opens the gate (to run) or aborts (to return at once).
#[derive(Default)]
pub(super) struct Gate {
    state: Mutex<(usize, Option<bool>)>,
    cv: Condvar,
}

impl Gate {
    fn lock(&self) -> MutexGuard<'_, (usize, Option<bool>)> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Counts this thread in and waits for the gate; `true` to run, `false` on abort.
    fn arrive_and_wait(&self) -> bool {
        let mut g = self.lock();
        g.0 += 1;
        self.cv.notify_all();
        loop {
            if let Some(go) = g.1 {
                return go;
            }
            g = self.cv.wait(g).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Waits until `m` threads have arrived.
    fn wait_for(&self, m: usize) {
        let mut g = self.lock();
        while g.0 < m {
            g = self.cv.wait(g).unwrap_or_else(|e| e.into_inner());
        }
    }

    fn open(&self, go: bool) {
        self.lock().1 = Some(go);
        self.cv.notify_all();
    }
}

/// Mean latency of `op` while `m` OS threads run it at once with `t` threads each, every
/// thread looping `iters` times after one warm-up call (all start together at a [`Gate`]).
pub(super) fn concurrent_latency<W: Word>(
    ev: &Evaluator<W>,
    op: OpKind,
    x: &Inputs<W>,
    m: usize,
    t: usize,
    iters: usize,
) -> Result<f64, ProfileError> {
    let ev = ev.with_threads(Threads::new(t));
    let gate = Gate::default();
    let results: Vec<Result<Vec<f64>, ProfileError>> = std::thread::scope(|s| {
        let mut handles = Vec::with_capacity(m);
        for i in 0..m {
            let (ev, gate) = (&ev, &gate);
            let h = std::thread::Builder::new()
                .name(format!("heloom-profile-{i}"))
                .spawn_scoped(s, move || -> Result<Vec<f64>, ProfileError> {
                    // A panic here must not keep the main thread waiting for this arrival.
                    let warm = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        run_op(ev, op, x)
                    }))
                    .unwrap_or_else(|_| {
                        Err(CkksError::InvalidInput(
                            "the operation panicked while measuring".into(),
                        ))
                    });
                    if !gate.arrive_and_wait() {
                        return Ok(Vec::new());
                    }
                    warm?;
                    let mut lat = Vec::with_capacity(iters);
                    for _ in 0..iters {
                        let t0 = Instant::now();
                        run_op(ev, op, x)?;
                        lat.push(ms_since(t0));
                    }
                    Ok(lat)
                });
            match h {
                Ok(h) => handles.push(h),
                Err(e) => {
                    // Release the started threads without measuring (the scope joins them).
                    gate.open(false);
                    return vec![Err(ProfileError::Thread(format!(
                        "cannot start measuring thread {i} of {m}: {e}"
                    )))];
                }
            }
        }
        gate.wait_for(m);
        gate.open(true);
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(ProfileError::Thread("a measuring thread panicked".into()))
                })
            })
            .collect()
    });
    let mut all = Vec::new();
    for r in results {
        all.extend(r?);
    }
    if all.is_empty() {
        return Err(ProfileError::Thread("no latency was recorded".into()));
    }
    Ok(all.iter().sum::<f64>() / all.len() as f64)
}

/// Median round trip (ms) of handing a closure to a parked thread through an mpsc channel and
/// getting its reply: what the executor pays to start a task.
pub(super) fn task_overhead_ms() -> Result<f64, ProfileError> {
    type Job = Box<dyn FnOnce() -> u64 + Send>;
    let (job_tx, job_rx) = mpsc::channel::<Job>();
    let (done_tx, done_rx) = mpsc::channel::<u64>();
    let worker = std::thread::Builder::new()
        .name("heloom-profile-worker".into())
        .spawn(move || {
            while let Ok(job) = job_rx.recv() {
                if done_tx.send(job()).is_err() {
                    break;
                }
            }
        })
        .map_err(|e| ProfileError::Thread(format!("cannot start the overhead worker: {e}")))?;
    let mut trips = Vec::with_capacity(OVERHEAD_TRIPS);
    for i in 0..OVERHEAD_TRIPS as u64 {
        // Let the worker park first, as an idle executor worker would be.
        std::thread::sleep(std::time::Duration::from_micros(300));
        let t0 = Instant::now();
        job_tx
            .send(Box::new(move || std::hint::black_box(i + 1)))
            .map_err(|_| ProfileError::Thread("the overhead worker stopped".into()))?;
        done_rx
            .recv()
            .map_err(|_| ProfileError::Thread("the overhead worker stopped".into()))?;
        trips.push(ms_since(t0));
    }
    drop(job_tx);
    worker
        .join()
        .map_err(|_| ProfileError::Thread("the overhead worker panicked".into()))?;
    Ok(median(&mut trips))
}

/// `(M, t)` contention points: `t` powers of two, `M` powers of two and the largest `M` with
/// `M t <= max_threads`.
pub(super) fn contention_grid(max_threads: usize) -> Vec<(usize, Vec<usize>)> {
    let mut out = Vec::new();
    let mut t = 1;
    while t <= max_threads {
        let top = max_threads / t;
        let mut ms: Vec<usize> = std::iter::successors(Some(1usize), |m| m.checked_mul(2))
            .take_while(|&m| m <= top)
            .collect();
        if ms.last() != Some(&top) {
            ms.push(top);
        }
        out.push((t, ms));
        t *= 2;
    }
    out
}

pub(super) fn measure<W: Word>(
    cfg: &MeasureConfig,
    progress: &mut dyn FnMut(usize, usize, &str),
) -> Result<Profile, ProfileError> {
    let max_nq = cfg.levels + 1;
    let nqs: Vec<usize> = (2..=max_nq).collect();
    let threads: Vec<usize> = (1..=cfg.max_threads).collect();
    let grid = contention_grid(cfg.max_threads);
    let grid_points: usize = grid.iter().map(|(_, ms)| ms.len()).sum();
    let cells_len = nqs.len() * threads.len() * OpKind::ALL.len();
    let total = 1 + cells_len * (1 + cfg.reps) + 2 * grid_points * cfg.reps + 1;
    let mut done = 0;
    let mut step = |label: &str, done: &mut usize| {
        progress(*done, total, label);
        *done += 1;
    };

    step("keys", &mut done);
    let mut notes = Vec::new();
    let params = match build_params(cfg, SecurityLevel::Bits128) {
        Ok(p) => p,
        Err(CkksError::Insecure { .. }) => {
            notes.push(
                "parameters below 128-bit security (security check opted out: timing only)"
                    .to_string(),
            );
            build_params(cfg, SecurityLevel::None)?
        }
        Err(e) => return Err(e.into()),
    };
    let bits: Vec<String> = params
        .moduli()
        .iter()
        .chain(params.special_moduli())
        .map(|q| format!("{:.0}", (*q as f64).log2()))
        .collect();
    notes.insert(
        0,
        format!(
            "heloom CKKS on this host: N = 2^{}, {}-bit words, {} ciphertext primes + {} special (bits {}), dnum = {}, backend {}; wall-clock median of {} samples per entry, one per sweep over the grid (fast ops repeated to >= {MIN_SAMPLE_MS} ms per sample)",
            cfg.log_n,
            cfg.word_bits,
            params.moduli().len(),
            params.special_moduli().len(),
            bits.join(","),
            params.dnum(),
            params.auto_backend(),
            cfg.reps
        ),
    );
    notes.push("ops: add-plain = add_const, add = add, mul-plain = multiply_const (no rescale), mul = multiply (2 x 2 polys), square = square, relin = relinearize (3 polys), rescale = rescale (2 polys); inputs at level n_q - 1 by drop_to_level; thread budget via Evaluator::with_threads".to_string());
    let ctx = Context::<W>::new(params)?;
    let mut kg = KeyGenerator::new(&ctx)?;
    let pk = kg.public_key()?;
    let eval_keys = kg.evaluation_keys(&[], false)?;
    let ev = Evaluator::new(&ctx, Arc::new(eval_keys))?;
    let enc = Encryptor::new(&ctx);
    let slots = ctx.params().slots();
    let xs: Vec<f64> = (0..slots)
        .map(|i| (i as f64 / slots as f64) - 0.5)
        .collect();
    let ys: Vec<f64> = xs.iter().map(|v| 0.25 - v).collect();
    let top_a = enc.encrypt(&xs, &pk)?;
    let top_b = enc.encrypt(&ys, &pk)?;

    let mut inputs = Vec::with_capacity(nqs.len());
    for &nq in &nqs {
        let a = ev.drop_to_level(&top_a, nq - 1)?;
        let b = ev.drop_to_level(&top_b, nq - 1)?;
        let three = ev.multiply(&a, &b)?;
        inputs.push(Inputs { a, b, three });
    }
    let evs: Vec<Evaluator<W>> = threads
        .iter()
        .map(|&t| ev.with_threads(Threads::new(t)))
        .collect();

    // Every (op, n_q, threads) cell: calibrate once, then `reps` sweeps over all cells, so that
    // the samples of one cell are spread over the whole run and the median rejects bursts of
    // outside load.
    struct Cell {
        op: OpKind,
        i: usize,
        j: usize,
        iters: usize,
        samples: Vec<f64>,
    }
    let mut cells = Vec::with_capacity(cells_len);
    for op in OpKind::ALL {
        for (i, nq) in nqs.iter().enumerate() {
            for (j, t) in threads.iter().enumerate() {
                step(&format!("calibrating {op} n_q={nq} t={t}"), &mut done);
                cells.push(Cell {
                    op,
                    i,
                    j,
                    iters: calibrate(&evs[j], op, &inputs[i])?,
                    samples: Vec::with_capacity(cfg.reps),
                });
            }
        }
    }
    for r in 0..cfg.reps {
        for c in &mut cells {
            step(
                &format!(
                    "sample {}/{}: {} n_q={} t={}",
                    r + 1,
                    cfg.reps,
                    c.op,
                    nqs[c.i],
                    threads[c.j]
                ),
                &mut done,
            );
            c.samples
                .push(sample(&evs[c.j], c.op, &inputs[c.i], c.iters)?);
        }
    }
    let mut ops = BTreeMap::new();
    for op in OpKind::ALL {
        ops.insert(
            op,
            OpTable {
                nq: nqs.clone(),
                threads: threads.clone(),
                ms: vec![vec![0.0; threads.len()]; nqs.len()],
            },
        );
    }
    for mut c in cells {
        if let Some(t) = ops.get_mut(&c.op) {
            t.ms[c.i][c.j] = median(&mut c.samples);
        }
    }

    let top = &inputs[inputs.len() - 1];
    let mut contention = BTreeMap::new();
    for (op, class) in [
        (OpKind::Relin, ContentionClass::KeySwitch),
        (OpKind::Rescale, ContentionClass::Other),
    ] {
        let mut rows = Vec::new();
        for (t, ms) in &grid {
            let single = ops
                .get(&op)
                .and_then(|tb| tb.ms.last().and_then(|r| r.get(t - 1)).copied())
                .unwrap_or(1.0)
                .max(1e-3);
            let iters = ((MIN_CONTENTION_MS / single).ceil() as usize).clamp(3, 2000);
            // `reps` rounds, each measuring the reference (M = 1) and then every M > 1, so that
            // a burst of outside load hits a reference and its loaded runs alike; the slowdown
            // of each M is the median of its per-round ratios.
            let mut ratios: Vec<Vec<f64>> = vec![Vec::with_capacity(cfg.reps); ms.len()];
            for r in 0..cfg.reps {
                let mut reference = f64::NAN;
                for (k, &m) in ms.iter().enumerate() {
                    step(
                        &format!("{op} contention round {}/{}: M={m} t={t}", r + 1, cfg.reps),
                        &mut done,
                    );
                    let lat = concurrent_latency(&ev, op, top, m, *t, iters)?;
                    if k == 0 {
                        reference = lat;
                    }
                    ratios[k].push(lat / reference);
                }
            }
            let row: Vec<(usize, f64)> = ms
                .iter()
                .zip(&mut ratios)
                .map(|(&m, v)| (m, median(v)))
                .collect();
            rows.push((*t, row));
        }
        contention.insert(class, merge_contention(&rows));
    }
    notes.push(format!(
        "contention: relin (key-switch) and rescale (other) at n_q = {max_nq}; M OS threads start together, each loops the op with t threads; (M, t) over t = powers of two, M = powers of two and the largest M with M t <= {}; reference M = 1 per t, measured in each of {} rounds together with the loaded runs, slowdown = median over rounds of latency / reference (>= {MIN_CONTENTION_MS} ms per run); points at the same busy = M t averaged over t",
        cfg.max_threads, cfg.reps
    ));

    step("task overhead", &mut done);
    let task_overhead_ms = task_overhead_ms()?;
    notes.push(format!(
        "task_overhead_ms: median of {OVERHEAD_TRIPS} round trips of a boxed closure to a parked thread through std::sync::mpsc and its reply"
    ));
    notes.push(format!(
        "capacity: heloom_pool::cores() = {}",
        heloom_pool::cores()
    ));
    progress(total, total, "done");

    Ok(Profile {
        name: "host".to_string(),
        machine: host_machine(),
        n: 1 << cfg.log_n,
        word_bits: cfg.word_bits,
        max_nq,
        capacity: heloom_pool::cores(),
        ops,
        contention,
        task_overhead_ms,
        job_factor: 1.0,
        thread_factors: Vec::new(),
        backlog_factors: Vec::new(),
        contention_by_threads: BTreeMap::new(),
        notes,
    })
}
