//! The service's Prometheus metrics (`GET /metrics`, text exposition format 0.0.4).
//!
//! Counters and histograms are kept here as the server runs; gauges that the database or the
//! executor already know (queue depth per tenant, busy threads, key store) are read when
//! scraped and passed to [`Metrics::render`].

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;

/// Upper bounds of the job latency histogram, seconds.
const LATENCY_BUCKETS: [f64; 14] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0,
];

/// Upper bounds of the start latency histogram (request received to job in the executor),
/// seconds: fine, since the target at idle is 2 ms.
const START_BUCKETS: [f64; 12] = [
    0.0002, 0.0005, 0.001, 0.0015, 0.002, 0.003, 0.005, 0.01, 0.025, 0.1, 1.0, 10.0,
];

struct Histogram {
    bounds: &'static [f64],
    counts: Vec<u64>,
    count: u64,
    sum: f64,
}

impl Default for Histogram {
    fn default() -> Self {
        Self::with(&LATENCY_BUCKETS)
    }
}

impl Histogram {
    fn with(bounds: &'static [f64]) -> Self {
        Self {
            bounds,
            counts: vec![0; bounds.len()],
            count: 0,
            sum: 0.0,
        }
    }

    fn observe(&mut self, v: f64) {
        for (c, &b) in self.counts.iter_mut().zip(self.bounds.iter()) {
            if v <= b {
                *c += 1;
            }
        }
        self.count += 1;
        self.sum += v;
    }
}

#[derive(Default)]
struct Inner {
    requests: BTreeMap<(String, u16), u64>,
    submitted: BTreeMap<String, u64>,
    finished: BTreeMap<(String, &'static str), u64>,
    latency: BTreeMap<String, Histogram>,
    queue_wait: BTreeMap<String, Histogram>,
    /// Request received to job handed to the executor (jobs submitted since this start).
    start_latency: BTreeMap<String, Histogram>,
    rejected: BTreeMap<String, u64>,
    bytes_in: u64,
    bytes_out: u64,
}

/// The service's counters and histograms.
#[derive(Default)]
pub struct Metrics {
    inner: Mutex<Inner>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Metrics")
    }
}

/// Gauges read at scrape time.
#[derive(Clone, Debug, Default)]
pub struct Gauges {
    /// Queued (accepted, not started) jobs per tenant.
    pub queued: Vec<(String, u64)>,
    /// Running jobs per tenant.
    pub running: Vec<(String, u64)>,
    /// Threads the executor gives HE tasks.
    pub capacity: usize,
    /// Threads busy with HE tasks now.
    pub busy_threads: usize,
    /// Tasks run since start.
    pub tasks_run: u64,
    /// Key store: bytes held in memory.
    pub store_resident_bytes: u64,
    /// Key store: its budget.
    pub store_budget_bytes: u64,
    /// Key store: what it did (gets, hits, misses, evictions, bytes read and written).
    pub store: heloom_store::StoreStats,
    /// Result reads answered from the results kept in memory after their write.
    pub result_memory_reads: u64,
    /// Writes of result records (results that end together share one).
    pub result_writes: u64,
    /// Further exposition text, appended as it is (the Ray backend's per-node series).
    pub extra: String,
}

impl Metrics {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// One HTTP request answered on `route` with `status`.
    pub fn request(&self, route: &str, status: u16) {
        *self
            .lock()
            .requests
            .entry((route.to_string(), status))
            .or_default() += 1;
    }

    /// Request bytes received and response bytes sent.
    pub fn bytes(&self, received: u64, sent: u64) {
        let mut m = self.lock();
        m.bytes_in += received;
        m.bytes_out += sent;
    }

    /// A job accepted for `tenant`.
    pub fn submitted(&self, tenant: &str) {
        *self.lock().submitted.entry(tenant.to_string()).or_default() += 1;
    }

    /// A job refused by admission control or a quota.
    pub fn rejected(&self, tenant: &str) {
        *self.lock().rejected.entry(tenant.to_string()).or_default() += 1;
    }

    /// A job of `tenant` started after waiting `wait_s` in the queue.
    pub fn started(&self, tenant: &str, wait_s: f64) {
        self.lock()
            .queue_wait
            .entry(tenant.to_string())
            .or_default()
            .observe(wait_s);
    }

    /// A job submitted `latency_s` ago (request received) was handed to the executor.
    pub fn start_latency(&self, latency_s: f64) {
        self.lock()
            .start_latency
            .entry(String::new())
            .or_insert_with(|| Histogram::with(&START_BUCKETS))
            .observe(latency_s);
    }

    /// A job of `tenant` ended in `state` (`done`, `failed`, `cancelled`), `latency_s` after
    /// it was accepted.
    pub fn finished(&self, tenant: &str, state: &'static str, latency_s: f64) {
        let mut m = self.lock();
        *m.finished.entry((tenant.to_string(), state)).or_default() += 1;
        if state == "done" {
            m.latency
                .entry(tenant.to_string())
                .or_default()
                .observe(latency_s);
        }
    }

    /// The exposition text.
    pub fn render(&self, g: &Gauges) -> String {
        let m = self.lock();
        let mut out = String::new();
        head(
            &mut out,
            "heloom_http_requests_total",
            "counter",
            "HTTP requests by route and status.",
        );
        for ((route, status), n) in &m.requests {
            let _ = writeln!(
                out,
                "heloom_http_requests_total{{route=\"{route}\",status=\"{status}\"}} {n}"
            );
        }
        head(
            &mut out,
            "heloom_bytes_received_total",
            "counter",
            "Request body bytes received.",
        );
        let _ = writeln!(out, "heloom_bytes_received_total {}", m.bytes_in);
        head(
            &mut out,
            "heloom_bytes_sent_total",
            "counter",
            "Response body bytes sent.",
        );
        let _ = writeln!(out, "heloom_bytes_sent_total {}", m.bytes_out);
        counter_by_tenant(
            &mut out,
            "heloom_jobs_submitted_total",
            "Jobs accepted.",
            &m.submitted,
        );
        counter_by_tenant(
            &mut out,
            "heloom_jobs_rejected_total",
            "Jobs refused by admission control or a quota.",
            &m.rejected,
        );
        head(
            &mut out,
            "heloom_jobs_finished_total",
            "counter",
            "Jobs ended, by state.",
        );
        for ((tenant, state), n) in &m.finished {
            let _ = writeln!(
                out,
                "heloom_jobs_finished_total{{tenant=\"{tenant}\",state=\"{state}\"}} {n}"
            );
        }
        gauge_by_tenant(
            &mut out,
            "heloom_queue_depth",
            "Jobs accepted and not started.",
            &g.queued,
        );
        gauge_by_tenant(&mut out, "heloom_jobs_running", "Jobs running.", &g.running);
        histogram(
            &mut out,
            "heloom_job_latency_seconds",
            "Seconds from acceptance to a result, per tenant.",
            &m.latency,
        );
        histogram(
            &mut out,
            "heloom_job_queue_wait_seconds",
            "Seconds from acceptance to start, per tenant.",
            &m.queue_wait,
        );
        if let Some(h) = m.start_latency.get("") {
            head(
                &mut out,
                "heloom_job_start_latency_seconds",
                "histogram",
                "Seconds from a submission's request to its job in the executor (all tenants).",
            );
            for (c, b) in h.counts.iter().zip(h.bounds.iter()) {
                let _ = writeln!(
                    out,
                    "heloom_job_start_latency_seconds_bucket{{le=\"{b}\"}} {c}"
                );
            }
            let _ = writeln!(
                out,
                "heloom_job_start_latency_seconds_bucket{{le=\"+Inf\"}} {}\n\
                 heloom_job_start_latency_seconds_sum {}\n\
                 heloom_job_start_latency_seconds_count {}",
                h.count, h.sum, h.count
            );
        }
        let util = if g.capacity == 0 {
            0.0
        } else {
            g.busy_threads as f64 / g.capacity as f64
        };
        for (name, help, v) in [
            (
                "heloom_device_threads",
                "CPU threads the executor gives HE tasks.",
                g.capacity as f64,
            ),
            (
                "heloom_device_busy_threads",
                "CPU threads busy with HE tasks now.",
                g.busy_threads as f64,
            ),
            (
                "heloom_device_utilisation",
                "Busy threads over capacity (0..1).",
                util,
            ),
            (
                "heloom_key_store_resident_bytes",
                "Key store: bytes in memory.",
                g.store_resident_bytes as f64,
            ),
            (
                "heloom_key_store_budget_bytes",
                "Key store: memory budget.",
                g.store_budget_bytes as f64,
            ),
        ] {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {v}");
        }
        for (name, help, v) in [
            ("heloom_tasks_run_total", "HE tasks run.", g.tasks_run),
            (
                "heloom_key_store_gets_total",
                "Key store: gets.",
                g.store.gets,
            ),
            (
                "heloom_key_store_hits_total",
                "Key store: gets served from memory.",
                g.store.hits,
            ),
            (
                "heloom_key_store_misses_total",
                "Key store: gets that loaded keys from disk.",
                g.store.misses,
            ),
            (
                "heloom_key_store_evictions_total",
                "Key store: keys dropped from memory (spills).",
                g.store.evictions,
            ),
            (
                "heloom_result_memory_reads_total",
                "Results read from memory, kept there after their write (not from the disk).",
                g.result_memory_reads,
            ),
            (
                "heloom_result_writes_total",
                "Writes of result records to disk; results that end together share one write and one commit.",
                g.result_writes,
            ),
        ] {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} counter\n{name} {v}"
            );
        }
        out.push_str(&g.extra);
        out
    }
}

fn head(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

fn counter_by_tenant(out: &mut String, name: &str, help: &str, m: &BTreeMap<String, u64>) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
    for (tenant, n) in m {
        let _ = writeln!(out, "{name}{{tenant=\"{tenant}\"}} {n}");
    }
}

fn gauge_by_tenant(out: &mut String, name: &str, help: &str, v: &[(String, u64)]) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge");
    for (tenant, n) in v {
        let _ = writeln!(out, "{name}{{tenant=\"{tenant}\"}} {n}");
    }
}

fn histogram(out: &mut String, name: &str, help: &str, m: &BTreeMap<String, Histogram>) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
    for (tenant, h) in m {
        for (c, b) in h.counts.iter().zip(h.bounds.iter()) {
            let _ = writeln!(out, "{name}_bucket{{tenant=\"{tenant}\",le=\"{b}\"}} {c}");
        }
        let _ = writeln!(
            out,
            "{name}_bucket{{tenant=\"{tenant}\",le=\"+Inf\"}} {}",
            h.count
        );
        let _ = writeln!(out, "{name}_sum{{tenant=\"{tenant}\"}} {}", h.sum);
        let _ = writeln!(out, "{name}_count{{tenant=\"{tenant}\"}} {}", h.count);
    }
}
