//! Balancers: how items of one queue reach the devices' workers (seed 001 and heloom's own).
//!
//! Every balancer hands each item to exactly one worker; [`Balancer::run`] checks that after the run and refuses
//! the results otherwise. Outputs come back in item order whatever the order of completion.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

use serde::Serialize;

use crate::cost::{CostBook, CostCurve, TRUSTED_CHUNKS};
use crate::device::{Device, Worker, Workload};
use crate::error::{DeviceError, Result};

/// A way of sharing one queue of items among devices.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum Method {
    /// Everything on one device (index into the device list).
    Single(usize),
    /// Fixed equal split: item i goes to device i mod D (the paper's round robin).
    RoundRobin,
    /// A dispatcher thread watches every worker and hands the next item to an idle one (the paper's polling).
    Polling,
    /// Workers pull the next items from one shared queue when free (the paper's proposal; a claim takes at least
    /// 256 bytes' worth of items so the shared counter stays cheap).
    Pull,
    /// Pull with per-device cost curves learned online, size-aware ends of the queue, guided chunk sizes and an
    /// end-game that makes all devices finish together.
    Heloom,
}

/// What one run did.
#[derive(Clone, Debug, Serialize)]
pub struct RunReport {
    /// Method name (`cpu:1`, `round-robin`, `polling`, `pull`, `heloom`).
    pub method: String,
    /// From the start signal to the last worker's finish, in milliseconds.
    pub ms: f64,
    /// Items each device processed (the paper's Table 3).
    pub items_per_device: Vec<usize>,
    /// Input weight (bytes for AES) each device processed.
    pub weight_per_device: Vec<u64>,
    /// Time each device's workers spent inside items, summed over its workers, in ms.
    pub busy_ms_per_device: Vec<f64>,
    /// When each device's last worker finished, in ms from the start.
    pub finish_ms_per_device: Vec<f64>,
    /// Queue claims made (items or chunks taken from the shared queue).
    pub claims: u64,
    /// Device index that produced each item.
    #[serde(skip)]
    pub producer: Vec<u16>,
}

/// Outputs in item order plus the report.
pub struct Outcome<O> {
    /// One output per item, in item order.
    pub outputs: Vec<O>,
    /// What happened.
    pub report: RunReport,
}

impl Method {
    /// Name as printed in tables and JSON; `Single` takes the device's name.
    pub fn name(&self, device_names: &[String]) -> String {
        match self {
            Method::Single(d) => device_names
                .get(*d)
                .cloned()
                .unwrap_or_else(|| format!("device {d}")),
            Method::RoundRobin => "round-robin".into(),
            Method::Polling => "polling".into(),
            Method::Pull => "pull".into(),
            Method::Heloom => "heloom".into(),
        }
    }

    /// Parses `round-robin`, `polling`, `pull` or `heloom`.
    pub fn parse(s: &str) -> Result<Method> {
        match s.trim().to_ascii_lowercase().as_str() {
            "round-robin" | "roundrobin" | "rr" => Ok(Method::RoundRobin),
            "polling" => Ok(Method::Polling),
            "pull" => Ok(Method::Pull),
            "heloom" => Ok(Method::Heloom),
            other => Err(DeviceError::InvalidParameter(format!(
                "unknown balancer `{other}`; choose round-robin, polling, pull or heloom"
            ))),
        }
    }

    /// The combined methods, in table order.
    pub const COMBINED: [Method; 4] = [
        Method::RoundRobin,
        Method::Polling,
        Method::Pull,
        Method::Heloom,
    ];
}

/// A device's worker together with the workload's lifetime.
type BoxedWorker<'w, O> = Box<dyn Worker<O> + 'w>;

/// Where a worker leaves its result for the coordinating thread.
type ResultSlot<O> = Mutex<Option<Result<WorkerOut<O>>>>;

/// Smallest chunk heloom claims, in predicted time. Chunks shrink towards it only at the end of a run, where a
/// smaller last chunk means the devices finish closer together.
const GRAIN_MIN_NS: f64 = 2_000.0;
/// Weight (bytes for AES) a `pull` claim takes at least: 256 bytes are about 20 ns of AES-NI work, as much as
/// one contended claim costs.
const PULL_CLAIM_WEIGHT: u64 = 256;

/// An atomic alone on its cache line (two 64-byte lines, as adjacent-line prefetch pairs them), so that
/// workers hammering it do not also invalidate the flags next to it.
#[repr(align(128))]
struct Padded<T>(T);

impl<T> std::ops::Deref for Padded<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}
/// Largest chunk, so a device slowed by outside load is noticed within a few milliseconds.
const GRAIN_MAX_NS: f64 = 2_000_000.0;
/// Polling slot states.
const SLOT_EMPTY: usize = 0;
const SLOT_STOP: usize = usize::MAX;

/// A balancer with its learned state (heloom's cost curves persist across runs) and its worker threads.
pub struct Balancer {
    method: Method,
    book: CostBook,
    pin: bool,
    pool: Option<rayon::ThreadPool>,
}

struct Shared {
    go: AtomicBool,
    ready: AtomicUsize,
    abort: AtomicBool,
    t0: OnceLock<Instant>,
    next: Padded<AtomicUsize>,
    range: Padded<AtomicU64>,
    claims: AtomicU64,
    slots: Vec<AtomicUsize>,
    busy_until: Vec<Padded<AtomicU64>>,
    /// heloom: each worker's current chunk as (next, end) positions in the sorted order; others steal its tail.
    ranges: Vec<Padded<AtomicU64>>,
    /// heloom: when each worker's current chunk started (ns from the start) and its first position, so thieves
    /// can judge an owner by its observed pace, not only by its curve.
    chunk_start: Vec<Padded<AtomicU64>>,
    chunk_first: Vec<AtomicUsize>,
    alive: Vec<Padded<AtomicBool>>,
    active: AtomicUsize,
    /// Each heloom worker's curve as last published (workers of one device learn separately).
    curves: Vec<Padded<Mutex<CostCurve>>>,
}

struct WorkerOut<O> {
    outputs: Vec<(u32, O)>,
    claims: u64,
    finish_ns: u64,
    busy_ns: u64,
}

/// Static facts about the run every worker reads.
struct Plan<'a, W: Workload> {
    work: &'a W,
    method: Method,
    n: usize,
    /// Device of each worker.
    device_of: Vec<usize>,
    /// Round robin: the items of each worker.
    lists: Vec<Vec<u32>>,
    /// heloom: items sorted by weight, and prefix sums of their weights.
    order: Vec<u32>,
    prefix: Vec<u64>,
}

fn pack(lo: usize, hi: usize) -> u64 {
    ((lo as u64) << 32) | hi as u64
}

fn unpack(v: u64) -> (usize, usize) {
    ((v >> 32) as usize, (v & 0xffff_ffff) as usize)
}

impl Balancer {
    /// A balancer using `method`.
    pub fn new(method: Method) -> Self {
        Balancer {
            method,
            book: CostBook::default(),
            pin: true,
            pool: None,
        }
    }

    /// Whether workers are pinned to cores when there are no more workers than cores (default: yes).
    pub fn pin(mut self, pin: bool) -> Self {
        self.pin = pin;
        self
    }

    /// The method.
    pub fn method(&self) -> Method {
        self.method
    }

    /// The balancer's worker threads, at least `n` of them (every worker waits for the start signal, so each
    /// needs a thread of its own).
    fn pool(&mut self, n: usize) -> Result<&rayon::ThreadPool> {
        if self
            .pool
            .as_ref()
            .is_none_or(|p| p.current_num_threads() < n)
        {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(n)
                .thread_name(|i| format!("heloom-device-{i}"))
                .build()
                .map_err(|e| DeviceError::Io {
                    context: "starting the device worker threads".into(),
                    source: std::io::Error::other(e.to_string()),
                })?;
            self.pool = Some(pool);
        }
        self.pool
            .as_ref()
            .ok_or_else(|| DeviceError::InvalidParameter("no worker threads".into()))
    }

    /// The cost curves learned so far.
    pub fn book(&self) -> &CostBook {
        &self.book
    }

    /// Runs `work` over `devices`; outputs come back in item order, each item processed exactly once.
    pub fn run<W: Workload>(
        &mut self,
        devices: &[&dyn Device<W>],
        work: &W,
    ) -> Result<Outcome<W::Output>> {
        let n = work.len();
        let names: Vec<String> = devices.iter().map(|d| d.info().name.clone()).collect();
        let method_name = self.method.name(&names);
        if devices.is_empty() {
            return Err(DeviceError::InvalidParameter("no devices to run on".into()));
        }
        if n >= u32::MAX as usize {
            return Err(DeviceError::InvalidParameter(format!(
                "{n} items; at most {} per run",
                u32::MAX - 1
            )));
        }
        if let Method::Single(d) = self.method {
            if d >= devices.len() {
                return Err(DeviceError::InvalidParameter(format!(
                    "device {d} of {}",
                    devices.len()
                )));
            }
        }
        let mut workers: Vec<(usize, BoxedWorker<'_, W::Output>)> = Vec::new();
        // Each worker's seat: its place among all devices' workers, so a device sits on the same cores whether
        // it runs alone or with the others (a comparison under outside load would be skewed otherwise).
        let mut seats: Vec<usize> = Vec::new();
        let mut seat = 0;
        for (d, dev) in devices.iter().enumerate() {
            let skip = matches!(self.method, Method::Single(s) if s != d);
            if skip {
                seat += dev.info().workers;
                continue;
            }
            for w in dev.open(work)? {
                workers.push((d, w));
                seats.push(seat);
                seat += 1;
            }
        }
        let all_seats = seat.max(workers.len());
        if workers.is_empty() {
            return Err(DeviceError::InvalidParameter(
                "the devices opened no workers".into(),
            ));
        }
        let plan = self.plan(work, &workers, devices.len());
        let nw = workers.len();
        let shared = Shared {
            go: AtomicBool::new(false),
            ready: AtomicUsize::new(0),
            abort: AtomicBool::new(false),
            t0: OnceLock::new(),
            next: Padded(AtomicUsize::new(0)),
            range: Padded(AtomicU64::new(pack(0, n))),
            claims: AtomicU64::new(0),
            slots: (0..nw).map(|_| AtomicUsize::new(SLOT_EMPTY)).collect(),
            busy_until: (0..nw).map(|_| Padded(AtomicU64::new(0))).collect(),
            ranges: (0..nw).map(|_| Padded(AtomicU64::new(0))).collect(),
            chunk_start: (0..nw).map(|_| Padded(AtomicU64::new(0))).collect(),
            chunk_first: (0..nw).map(|_| AtomicUsize::new(0)).collect(),
            alive: (0..nw).map(|_| Padded(AtomicBool::new(true))).collect(),
            active: AtomicUsize::new(nw),
            curves: plan
                .device_of
                .iter()
                .map(|&d| Padded(Mutex::new(self.book.curve(&names[d]))))
                .collect(),
        };
        let cores = heloom_pool::cores();
        let core_ids = core_affinity::get_core_ids().unwrap_or_default();
        let pin = self.pin && all_seats <= cores && core_ids.len() >= all_seats;
        let method = self.method;
        let pool = self.pool(nw)?;
        let slots_out: Vec<ResultSlot<W::Output>> = (0..nw).map(|_| Mutex::new(None)).collect();
        // Workers run on this balancer's long-lived threads (their allocator heaps and caches stay warm from run
        // to run, as a device's queue would); this thread coordinates and, for polling, dispatches.
        pool.in_place_scope(|s| {
            for (wi, (d, worker)) in workers.into_iter().enumerate() {
                let core = if pin {
                    core_ids.get(seats[wi]).copied()
                } else {
                    None
                };
                let (shared, plan, slot) = (&shared, &plan, &slots_out[wi]);
                let name = &names[d];
                s.spawn(move |_| {
                    if let Some(c) = core {
                        core_affinity::set_for_current(c);
                    }
                    let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        worker_main(wi, worker, shared, plan)
                    }))
                    .unwrap_or_else(|_| Err(DeviceError::WorkerPanicked(name.clone())));
                    if out.is_err() {
                        // Count as ready too, so a failure before the start cannot leave the others waiting.
                        shared.abort.store(true, Ordering::Release);
                    }
                    if let Ok(mut g) = slot.lock() {
                        *g = Some(out);
                    }
                });
            }
            while shared.ready.load(Ordering::Acquire) < nw && !shared.abort.load(Ordering::Acquire)
            {
                std::thread::yield_now();
            }
            let _ = shared.t0.set(Instant::now());
            shared.go.store(true, Ordering::Release);
            if method == Method::Polling {
                dispatch(&shared, n);
            }
        });
        let results: Vec<Result<WorkerOut<W::Output>>> = slots_out
            .into_iter()
            .map(|m| {
                m.into_inner()
                    .ok()
                    .flatten()
                    .unwrap_or_else(|| Err(DeviceError::WorkerPanicked("a worker".into())))
            })
            .collect();
        // Collect, refusing anything but exactly-once delivery.
        let mut slots: Vec<Option<W::Output>> = (0..n).map(|_| None).collect();
        let mut producer = vec![u16::MAX; n];
        let nd = devices.len();
        let mut report = RunReport {
            method: method_name.clone(),
            ms: 0.0,
            items_per_device: vec![0; nd],
            weight_per_device: vec![0; nd],
            busy_ms_per_device: vec![0.0; nd],
            finish_ms_per_device: vec![0.0; nd],
            claims: shared.claims.load(Ordering::Relaxed),

            producer: Vec::new(),
        };
        let mut first_err = None;
        for (wi, r) in results.into_iter().enumerate() {
            let d = plan.device_of[wi];
            let out = match r {
                Ok(o) => o,
                Err(e) => {
                    first_err.get_or_insert(e);
                    continue;
                }
            };
            let fin = out.finish_ns as f64 / 1e6;
            report.finish_ms_per_device[d] = report.finish_ms_per_device[d].max(fin);
            report.busy_ms_per_device[d] += out.busy_ns as f64 / 1e6;
            report.ms = report.ms.max(fin);
            report.claims += out.claims;
            for (i, o) in out.outputs {
                let i = i as usize;
                if i >= n || slots[i].is_some() {
                    return Err(DeviceError::Accounting {
                        method: method_name,
                        what: "duplicated",
                        item: i,
                        items: n,
                    });
                }
                slots[i] = Some(o);
                producer[i] = d as u16;
                report.items_per_device[d] += 1;
                report.weight_per_device[d] += work.weight(i);
            }
        }
        if let Some(e) = first_err {
            return Err(e);
        }
        let mut outputs = Vec::with_capacity(n);
        for (i, o) in slots.into_iter().enumerate() {
            match o {
                Some(o) => outputs.push(o),
                None => {
                    return Err(DeviceError::Accounting {
                        method: method_name,
                        what: "lost",
                        item: i,
                        items: n,
                    })
                }
            }
        }
        report.producer = producer;
        if self.method == Method::Heloom {
            // Each device keeps the curve of its first worker.
            for (d, name) in names.iter().enumerate() {
                if let Some(w) = plan.device_of.iter().position(|&x| x == d) {
                    if let Ok(c) = shared.curves[w].lock() {
                        self.book.set(name, c.clone());
                    }
                }
            }
        }
        Ok(Outcome { outputs, report })
    }

    fn plan<'a, W: Workload, O>(
        &self,
        work: &'a W,
        workers: &[(usize, O)],
        nd: usize,
    ) -> Plan<'a, W> {
        let n = work.len();
        let device_of: Vec<usize> = workers.iter().map(|(d, _)| *d).collect();
        let mut lists = Vec::new();
        if self.method == Method::RoundRobin {
            // Item i to device i mod D; within a device, its items dealt to its workers in turn.
            lists = vec![Vec::new(); workers.len()];
            let mut per_dev: Vec<Vec<usize>> = vec![Vec::new(); nd];
            for (wi, &d) in device_of.iter().enumerate() {
                per_dev[d].push(wi);
            }
            let mut turn = vec![0usize; nd];
            for i in 0..n {
                let d = i % nd;
                let ws = &per_dev[d];
                if ws.is_empty() {
                    continue;
                }
                lists[ws[turn[d] % ws.len()]].push(i as u32);
                turn[d] += 1;
            }
        }
        let (mut order, mut prefix) = (Vec::new(), Vec::new());
        if self.method == Method::Heloom {
            order = (0..n as u32).collect();
            order.sort_by_key(|&i| work.weight(i as usize));
            prefix = Vec::with_capacity(n + 1);
            prefix.push(0);
            for &i in &order {
                prefix.push(prefix[prefix.len() - 1] + work.weight(i as usize));
            }
        }
        Plan {
            work,
            method: self.method,
            n,
            device_of,
            lists,
            order,
            prefix,
        }
    }
}

fn worker_main<W: Workload>(
    wi: usize,
    mut worker: Box<dyn Worker<W::Output> + '_>,
    shared: &Shared,
    plan: &Plan<'_, W>,
) -> Result<WorkerOut<W::Output>> {
    // Room for every item this worker could take, reserved before the clock starts.
    let cap = if plan.method == Method::RoundRobin {
        plan.lists[wi].len()
    } else {
        plan.n
    };
    let mut outputs = Vec::with_capacity(cap);
    shared.ready.fetch_add(1, Ordering::AcqRel);
    let mut spins = 0u32;
    while !shared.go.load(Ordering::Acquire) {
        spins += 1;
        if spins < 10_000 {
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
    }
    let t0 = shared.t0.get().copied().unwrap_or_else(Instant::now);
    let mut out = WorkerOut {
        outputs: std::mem::take(&mut outputs),
        claims: 0,
        finish_ns: 0,
        busy_ns: 0,
    };
    let mut idle_ns = 0u64;
    match plan.method {
        Method::Single(_) | Method::Pull => loop {
            // The paper's proposal: take the next items whenever free. A claim is one atomic on a
            // cache line every worker writes; it costs as much as encrypting a few 8-byte items, so
            // a claim takes as many items as make up PULL_CLAIM_WEIGHT (one item for anything larger).
            if shared.abort.load(Ordering::Relaxed) {
                break;
            }
            let i = shared.next.load(Ordering::Relaxed);
            if i >= plan.n {
                break;
            }
            let k = (PULL_CLAIM_WEIGHT / plan.work.weight(i).max(1)).max(1) as usize;
            let i = shared.next.0.fetch_add(k, Ordering::Relaxed);
            if i >= plan.n {
                break;
            }
            out.claims += 1;
            for j in i..(i + k).min(plan.n) {
                out.outputs.push((j as u32, worker.run(j)?));
            }
        },
        Method::RoundRobin => {
            for &i in &plan.lists[wi] {
                if shared.abort.load(Ordering::Relaxed) {
                    break;
                }
                out.outputs.push((i, worker.run(i as usize)?));
            }
        }
        Method::Polling => {
            let slot = &shared.slots[wi];
            loop {
                let v = slot.load(Ordering::Acquire);
                if v == SLOT_EMPTY {
                    let wait = Instant::now();
                    let mut spins = 0u32;
                    // Spin, yielding the core now and then so the dispatcher can run where cores are short.
                    while slot.load(Ordering::Acquire) == SLOT_EMPTY {
                        spins += 1;
                        if spins.is_multiple_of(256) {
                            std::thread::yield_now();
                        } else {
                            std::hint::spin_loop();
                        }
                    }
                    idle_ns += wait.elapsed().as_nanos() as u64;
                    continue;
                }
                if v == SLOT_STOP {
                    break;
                }
                let r = worker.run(v - 1);
                match r {
                    Ok(o) => out.outputs.push(((v - 1) as u32, o)),
                    Err(e) => {
                        slot.store(SLOT_STOP, Ordering::Release);
                        return Err(e);
                    }
                }
                slot.store(SLOT_EMPTY, Ordering::Release);
            }
        }
        Method::Heloom => heloom_loop(wi, worker.as_mut(), shared, plan, t0, &mut out)?,
    }
    let fin = t0.elapsed().as_nanos() as u64;
    out.finish_ns = fin;
    out.busy_ns = fin.saturating_sub(idle_ns);
    Ok(out)
}

/// The paper's polling dispatcher: a loop that watches every worker's slot and fills empty ones.
fn dispatch(shared: &Shared, n: usize) {
    while !shared.go.load(Ordering::Acquire) {
        std::thread::yield_now();
    }
    let mut next = 0;
    loop {
        if shared.abort.load(Ordering::Relaxed) {
            break;
        }
        let mut busy = false;
        let mut gave = false;
        for slot in &shared.slots {
            match slot.load(Ordering::Acquire) {
                SLOT_EMPTY if next < n => {
                    slot.store(next + 1, Ordering::Release);
                    shared.claims.fetch_add(1, Ordering::Relaxed);
                    next += 1;
                    busy = true;
                    gave = true;
                }
                SLOT_EMPTY | SLOT_STOP => {}
                _ => busy = true,
            }
        }
        if next >= n && !busy {
            break;
        }
        if !gave {
            std::thread::yield_now();
        }
    }
    for slot in &shared.slots {
        slot.store(SLOT_STOP, Ordering::Release);
    }
}

/// Predicted time (ns) for one worker with `curve` to do `items` items of total weight `weight` alone.
fn total_ns(curve: &CostCurve, items: usize, weight: u64) -> Option<f64> {
    if items == 0 {
        return Some(0.0);
    }
    curve
        .predict(weight / items as u64)
        .map(|per| per * items as f64)
}

/// Largest k >= 1 whose predicted cost, for the k items at the chosen end of the sorted queue, fits `target_ns`.
fn chunk_for<W: Workload>(
    curve: &CostCurve,
    plan: &Plan<'_, W>,
    lo: usize,
    hi: usize,
    small: bool,
    target_ns: f64,
) -> usize {
    let cost = |k: usize| {
        let w = if small {
            plan.prefix[lo + k] - plan.prefix[lo]
        } else {
            plan.prefix[hi] - plan.prefix[hi - k]
        };
        total_ns(curve, k, w).unwrap_or(f64::INFINITY)
    };
    let (mut a, mut b) = (1usize, hi - lo);
    if cost(b) <= target_ns {
        return b;
    }
    // Equal weights (the paper's workloads): no search needed.
    if plan.work.weight(plan.order[lo] as usize) == plan.work.weight(plan.order[hi - 1] as usize) {
        let per = cost(1);
        return if per > 0.0 && per.is_finite() {
            ((target_ns / per) as usize).clamp(1, b)
        } else {
            1
        };
    }
    // Costs grow with k: binary search for the last k that fits.
    while a < b {
        let mid = (a + b).div_ceil(2);
        if cost(mid) <= target_ns {
            a = mid;
        } else {
            b = mid - 1;
        }
    }
    a.max(1)
}

/// A victim that has run this long past its predicted finish is treated as stalled (preempted by another
/// process, for instance) and may be robbed even by a slower device.
const STALL_NS: f64 = 100_000.0;

/// Shortest and longest wait of a thief between looks at the other workers' chunks.
const STEAL_RECHECK_MIN_NS: f64 = 1_000.0;
const STEAL_RECHECK_MAX_NS: f64 = 100_000.0;

/// What a worker with an empty queue can do.
enum Steal {
    /// It took positions a..b of the sorted order from another worker.
    Got(usize, usize),
    /// Others still hold items, but taking them would not end the run sooner (yet); look again after this
    /// many ns.
    Wait(f64),
    /// Nothing is left anywhere.
    Done,
}

/// Looks at every other worker's chunk and takes the back half of the one that will take longest, when this
/// worker would finish that half before its owner finishes the whole (or the owner has stalled).
fn steal<W: Workload>(
    wi: usize,
    shared: &Shared,
    plan: &Plan<'_, W>,
    local: &CostCurve,
    t0: Instant,
) -> Steal {
    let now = t0.elapsed().as_nanos() as f64;
    let mut best: Option<(usize, u64, f64)> = None;
    let mut left = false;
    for v in (0..plan.device_of.len()).filter(|&v| v != wi) {
        let cur = shared.ranges[v].load(Ordering::Acquire);
        let (c, e) = unpack(cur);
        if c >= e {
            continue;
        }
        left = true;
        let by_curve = shared.curves[v]
            .lock()
            .ok()
            .and_then(|g| total_ns(&g, e - c, plan.prefix[e] - plan.prefix[c]))
            .unwrap_or(f64::INFINITY);
        // The owner's pace in this chunk so far: a curve extrapolated from other sizes can be far off, what the
        // owner actually did cannot. Items taken but not finished count as not done.
        let started = shared.chunk_start[v].load(Ordering::Relaxed) as f64;
        let first = shared.chunk_first[v].load(Ordering::Relaxed);
        let elapsed = (now - started).max(0.0);
        let by_pace = if c > first {
            elapsed / (c - first) as f64 * (e - c) as f64
        } else {
            elapsed
        };
        let theirs = by_curve.max(by_pace);
        if best.is_none_or(|(_, _, t)| theirs > t) {
            best = Some((v, cur, theirs));
        }
    }
    let Some((v, cur, theirs)) = best else {
        return if left {
            Steal::Wait(STEAL_RECHECK_MIN_NS)
        } else {
            Steal::Done
        };
    };
    // Looking again too often would keep pulling the owner's range line out of its cache: wait a quarter of
    // the time the owner still needs.
    let recheck = (theirs / 4.0).clamp(STEAL_RECHECK_MIN_NS, STEAL_RECHECK_MAX_NS);
    let (c, e) = unpack(cur);
    let m = (e - c).div_ceil(2);
    let mine = total_ns(local, m, plan.prefix[e] - plan.prefix[e - m]);
    let stalled = now > shared.busy_until[v].load(Ordering::Relaxed) as f64 + STALL_NS;
    let worth = match mine {
        Some(t) => t < theirs || stalled,
        None => stalled,
    };
    if !worth {
        return Steal::Wait(recheck);
    }
    match shared.ranges[v].compare_exchange(
        cur,
        pack(c, e - m),
        Ordering::AcqRel,
        Ordering::Acquire,
    ) {
        Ok(_) => Steal::Got(e - m, e),
        Err(_) => Steal::Wait(STEAL_RECHECK_MIN_NS),
    }
}

/// Runs positions a..b of the sorted order as this worker's chunk: published so others can steal its tail,
/// taken from the front a few items at a time, timed, and learned from.
#[allow(clippy::too_many_arguments)]
fn run_chunk<W: Workload>(
    wi: usize,
    worker: &mut (dyn Worker<W::Output> + '_),
    shared: &Shared,
    plan: &Plan<'_, W>,
    t0: Instant,
    local: &mut CostCurve,
    a: usize,
    b: usize,
    out: &mut WorkerOut<W::Output>,
) -> Result<()> {
    let range = &shared.ranges[wi];
    shared.chunk_first[wi].store(a, Ordering::Relaxed);
    shared.chunk_start[wi].store(t0.elapsed().as_nanos() as u64, Ordering::Relaxed);
    range.store(pack(a, b), Ordering::Release);
    let (mut done, mut weight) = (0usize, 0u64);
    let start = Instant::now();
    loop {
        let cur = range.load(Ordering::Acquire);
        let (c, e) = unpack(cur);
        if c >= e {
            break;
        }
        // Take as many items as make up PULL_CLAIM_WEIGHT, so the range's atomic stays a small cost.
        let g = ((PULL_CLAIM_WEIGHT / plan.work.weight(plan.order[c] as usize).max(1)).max(1)
            as usize)
            .min(e - c);
        if range
            .compare_exchange(cur, pack(c + g, e), Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            continue;
        }
        for p in c..c + g {
            let i = plan.order[p];
            out.outputs.push((i, worker.run(i as usize)?));
        }
        done += g;
        weight += plan.prefix[c + g] - plan.prefix[c];
    }
    if done > 0 {
        local.observe(done, weight, start.elapsed().as_nanos() as f64);
        if let Ok(mut g) = shared.curves[wi].lock() {
            g.clone_from(local);
        }
    }
    shared.busy_until[wi].store(t0.elapsed().as_nanos() as u64, Ordering::Relaxed);
    Ok(())
}

/// What one device's curve predicts for the queue as it stands; read under its lock, no copies of curves.
#[derive(Clone, Copy, Default)]
struct View {
    /// ns for one item at the small and the large end.
    small: Option<f64>,
    large: Option<f64>,
    /// ns to do every remaining item alone.
    all: Option<f64>,
}

/// heloom's pull: guided chunks sized by learned costs, each device at the end of the size-sorted queue it is
/// relatively best at, an end-game in which a worker stops when the others would finish everything before
/// it finishes one more item, and, once the queue is empty, stealing the tail of a chunk that would otherwise
/// finish last (a device preempted by another process, or simply slower).
fn heloom_loop<W: Workload>(
    wi: usize,
    worker: &mut (dyn Worker<W::Output> + '_),
    shared: &Shared,
    plan: &Plan<'_, W>,
    t0: Instant,
    out: &mut WorkerOut<W::Output>,
) -> Result<()> {
    let nw = plan.device_of.len();
    let mut probe = 1usize;
    // This worker's own curve lives here; others read the copy it publishes after every chunk.
    let mut local = shared.curves[wi]
        .lock()
        .map(|c| c.clone())
        .unwrap_or_default();
    let mut views = vec![View::default(); nw];
    let mut ratios: Vec<f64> = Vec::with_capacity(nw);
    loop {
        if shared.abort.load(Ordering::Relaxed) {
            break;
        }
        let cur = shared.range.load(Ordering::Acquire);
        let (lo, hi) = unpack(cur);
        if lo >= hi {
            // The queue is empty: take the tail of another worker's chunk when that ends the run sooner.
            match steal(wi, shared, plan, &local, t0) {
                Steal::Got(a, b) => {
                    out.claims += 1;
                    run_chunk(wi, worker, shared, plan, t0, &mut local, a, b, out)?;
                }
                Steal::Wait(ns) => {
                    // Spin on the clock, not on shared memory, so the owners' lines stay in their caches.
                    let until = Instant::now() + std::time::Duration::from_nanos(ns as u64);
                    while Instant::now() < until {
                        std::hint::spin_loop();
                    }
                }
                Steal::Done => break,
            }
            continue;
        }
        let now = t0.elapsed().as_nanos() as f64;
        let (w_lo, w_hi) = (
            plan.work.weight(plan.order[lo] as usize),
            plan.work.weight(plan.order[hi - 1] as usize),
        );
        let (rem_n, rem_w) = (hi - lo, plan.prefix[hi] - plan.prefix[lo]);
        let view_of = |c: &CostCurve| View {
            small: c.predict(w_lo),
            large: c.predict(w_hi),
            all: total_ns(c, rem_n, rem_w),
        };
        for (o, v) in views.iter_mut().enumerate() {
            if o == wi {
                *v = view_of(&local);
            } else if shared.alive[o].load(Ordering::Relaxed) {
                if let Ok(c) = shared.curves[o].lock() {
                    *v = view_of(&c);
                }
            }
        }
        // Size-aware end: a device whose small items cost least relative to its large ones takes the small end.
        let ratio = |v: &View| match (v.small, v.large) {
            (Some(a), Some(b)) if b > 0.0 => Some(a / b),
            _ => None,
        };
        let mut small = true;
        if let (Some(r), true) = (ratio(&views[wi]), w_lo != w_hi) {
            ratios.clear();
            ratios.extend(
                (0..nw)
                    .filter(|&o| o != wi && shared.alive[o].load(Ordering::Relaxed))
                    .filter_map(|o| ratio(&views[o])),
            );
            if !ratios.is_empty() {
                ratios.push(r);
                ratios.sort_by(f64::total_cmp);
                small = r <= ratios[(ratios.len() - 1) / 2];
            }
        }
        let mine = views[wi];
        let item = if small { mine.small } else { mine.large };
        let k = match (item, mine.all) {
            (Some(item_ns), Some(my_all)) if my_all > 0.0 => {
                // Rates in "whole remaining queue per ns"; backlog as a fraction of the queue.
                let (mut rate_others, mut backlog_others) = (0.0, 0.0);
                for o in (0..nw).filter(|&o| o != wi && shared.alive[o].load(Ordering::Relaxed)) {
                    if let Some(t) = views[o].all.filter(|&t| t > 0.0) {
                        rate_others += 1.0 / t;
                        let until = shared.busy_until[o].load(Ordering::Relaxed) as f64;
                        backlog_others += (until - now).max(0.0) / t;
                    }
                }
                let t_all = (1.0 + backlog_others) / (rate_others + 1.0 / my_all);
                let t_others = if rate_others > 0.0 {
                    (1.0 + backlog_others) / rate_others
                } else {
                    f64::INFINITY
                };
                // An estimate resting on fewer than TRUSTED_CHUNKS chunks is checked with one item instead:
                // a stall during a single early chunk must not shut a device out of every later run.
                let trusted = local.chunks_at(if small { w_lo } else { w_hi }) >= TRUSTED_CHUNKS;
                if item_ns > t_others && !trusted {
                    1
                } else {
                    if item_ns > t_others
                        && shared
                            .active
                            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |a| {
                                (a > 1).then(|| a - 1)
                            })
                            .is_ok()
                    {
                        // End-game: the others finish everything before this worker would finish one more item.
                        shared.alive[wi].store(false, Ordering::Release);
                        return Ok(());
                    }
                    // Guided self-scheduling: half of what this worker will still do, so chunks shrink
                    // geometrically and the last ones are small enough for everyone to finish together.
                    let target = (t_all / 2.0)
                        .clamp(GRAIN_MIN_NS, GRAIN_MAX_NS)
                        .min(t_all.max(item_ns));
                    chunk_for(&local, plan, lo, hi, small, target)
                }
            }
            _ => {
                // Nothing learned yet: probe with 1, 2, 4, ... items.
                let k = probe;
                probe *= 2;
                k
            }
        };
        let k = k.min(hi - lo);
        let (new, items) = if small {
            (pack(lo + k, hi), lo..lo + k)
        } else {
            (pack(lo, hi - k), hi - k..hi)
        };
        if shared
            .range
            .compare_exchange(cur, new, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            continue;
        }
        out.claims += 1;
        let predicted = item.map_or(0.0, |p| p * k as f64);
        shared.busy_until[wi].store((now + predicted) as u64, Ordering::Relaxed);
        run_chunk(
            wi,
            worker,
            shared,
            plan,
            t0,
            &mut local,
            items.start,
            items.end,
            out,
        )?;
    }
    // Leaving with the queue empty: no longer counts as active.
    shared.alive[wi].store(false, Ordering::Release);
    shared.active.fetch_sub(1, Ordering::AcqRel);
    Ok(())
}
