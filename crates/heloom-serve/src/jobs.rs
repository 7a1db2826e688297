//! Job records: accepted once per idempotency key, run, finished exactly once.
//!
//! A job's life: `accepted` -> `running` -> `done` | `failed`, or `cancelled` before it ends.
//! Every transition is one SQLite transaction (WAL, full sync), so after `kill -9` a restart
//! finds each job in its last committed state; [`State::recover`] puts jobs that were running
//! back in the queue, and a result is recorded only by the first `finish` of a run.

use crate::{unix_now, unix_now_ms, Result, ServeError, State};
use rusqlite::{params, OptionalExtension, Row};

/// Where a job is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum JobState {
    /// Accepted, waiting in the queue.
    Accepted,
    /// Taken by a worker.
    Running,
    /// Finished with a result.
    Done,
    /// Finished with an error.
    Failed,
    /// Cancelled by its tenant before it finished.
    Cancelled,
}

impl JobState {
    /// The name stored in the database and shown by the API.
    pub fn name(self) -> &'static str {
        match self {
            JobState::Accepted => "accepted",
            JobState::Running => "running",
            JobState::Done => "done",
            JobState::Failed => "failed",
            JobState::Cancelled => "cancelled",
        }
    }

    /// The state named `s` (as [`JobState::name`] writes it), if any.
    pub fn from_name(s: &str) -> Option<Self> {
        Self::parse(s).ok()
    }

    fn parse(s: &str) -> rusqlite::Result<Self> {
        Ok(match s {
            "accepted" => JobState::Accepted,
            "running" => JobState::Running,
            "done" => JobState::Done,
            "failed" => JobState::Failed,
            "cancelled" => JobState::Cancelled,
            other => {
                return Err(rusqlite::Error::FromSqlConversionFailure(
                    0,
                    rusqlite::types::Type::Text,
                    format!("unknown job state {other:?}").into(),
                ))
            }
        })
    }

    /// Whether the job has ended (no further transition).
    pub fn is_final(self) -> bool {
        matches!(
            self,
            JobState::Done | JobState::Failed | JobState::Cancelled
        )
    }
}

/// What a client submits: the job's kind and a digest of its inputs (so that a retry with the
/// same idempotency key is recognised as the same job, and a different job reusing the key is
/// refused).
#[derive(Clone, Debug)]
pub struct NewJob<'a> {
    /// The client's idempotency key (1 to 128 printable ASCII characters).
    pub idempotency_key: &'a str,
    /// The kind of job (a task graph, a built-in application).
    pub kind: &'a str,
    /// A digest of the job's inputs.
    pub input_digest: &'a str,
    /// Higher runs first among a tenant's queued jobs.
    pub priority: i32,
    /// Unix time after which the result is of no use.
    pub deadline_unix: Option<i64>,
    /// What the job computes (the API's job description, JSON), kept so that a restart can
    /// run it again.
    pub spec: &'a str,
}

/// A job as stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobRecord {
    /// The job's id (unique across tenants, never reused).
    pub id: i64,
    /// Its tenant.
    pub tenant: String,
    /// The client's idempotency key.
    pub idempotency_key: String,
    /// The kind of job.
    pub kind: String,
    /// Where it is in its life.
    pub state: JobState,
    /// How many times a worker took it (more than one after a restart mid-run).
    pub attempts: i64,
    /// Where the result is stored, once done.
    pub result_ref: Option<String>,
    /// Why it failed.
    pub error: Option<String>,
    /// What it computes (JSON, as submitted).
    pub spec: String,
    /// Its priority among its tenant's jobs.
    pub priority: i32,
    /// Unix time after which its result is of no use.
    pub deadline_unix: Option<i64>,
    /// Unix time it was accepted, milliseconds.
    pub created_ms: i64,
    /// Unix time a worker last took it, milliseconds.
    pub started_ms: Option<i64>,
    /// Unix time it ended, milliseconds.
    pub finished_ms: Option<i64>,
}

const COLUMNS: &str = "id, tenant, idempotency_key, kind, state, attempts, result_ref, error, \
                       spec, priority, deadline_unix, created_ms, started_ms, finished_ms";

fn record(r: &Row<'_>) -> rusqlite::Result<JobRecord> {
    Ok(JobRecord {
        id: r.get(0)?,
        tenant: r.get(1)?,
        idempotency_key: r.get(2)?,
        kind: r.get(3)?,
        state: JobState::parse(&r.get::<_, String>(4)?)?,
        attempts: r.get(5)?,
        result_ref: r.get(6)?,
        error: r.get(7)?,
        spec: r.get(8)?,
        priority: r.get(9)?,
        deadline_unix: r.get(10)?,
        created_ms: r.get(11)?,
        started_ms: r.get(12)?,
        finished_ms: r.get(13)?,
    })
}

/// The job `id` (any tenant: for the service's own use inside a transaction).
fn by_id(c: &rusqlite::Connection, id: i64) -> rusqlite::Result<JobRecord> {
    c.prepare_cached(&format!("SELECT {COLUMNS} FROM jobs WHERE id = ?1"))?
        .query_row(params![id], record)
}

impl State {
    /// Accepts `job` for `tenant`, or returns the job already accepted under the same
    /// idempotency key (`false`: not new). Errors: a bad key, or the key already used for a
    /// different job ([`ServeError::IdempotencyConflict`]).
    pub fn submit_job(&self, tenant: &str, job: &NewJob<'_>) -> Result<(JobRecord, bool)> {
        let mut out = self.submit_jobs(tenant, std::slice::from_ref(job), |_| {})?;
        out.pop()
            .ok_or_else(|| ServeError::InvalidRequest("no job to submit".into()))
    }

    /// [`Self::submit_job`] for several jobs in one transaction (one disk flush): every job
    /// is accepted, or none (an invalid or conflicting idempotency key stops them all). A key
    /// given twice with the same job is one job. `committed` sees the jobs once they are
    /// committed, before the flush that makes them durable (this returns after it).
    pub fn submit_jobs(
        &self,
        tenant: &str,
        jobs: &[NewJob<'_>],
        committed: impl FnOnce(&[(JobRecord, bool)]),
    ) -> Result<Vec<(JobRecord, bool)>> {
        for job in jobs {
            let key = job.idempotency_key;
            if key.is_empty() || key.len() > 128 || !key.bytes().all(|b| b.is_ascii_graphic()) {
                return Err(ServeError::InvalidRequest(format!(
                    "idempotency key {key:?}: use 1 to 128 printable ASCII characters"
                )));
            }
        }
        let out = self.with_conn_flushed(
            |c| {
                let tx = crate::Tx::begin(c)?;
                let mut out = Vec::with_capacity(jobs.len());
                for job in jobs {
                    let key = job.idempotency_key;
                    let existing: Option<(JobRecord, String)> = tx
                        .prepare_cached(&format!(
                            "SELECT {COLUMNS}, input_digest FROM jobs
                             WHERE tenant = ?1 AND idempotency_key = ?2"
                        ))?
                        .query_row(params![tenant, key], |r| Ok((record(r)?, r.get(14)?)))
                        .optional()?;
                    if let Some((rec, digest)) = existing {
                        if rec.kind != job.kind || digest != job.input_digest {
                            // Dropping the transaction undoes the jobs inserted before.
                            return Ok(Err((key.to_string(), rec.id)));
                        }
                        // Accepted before (or earlier in this call): the same job, not a new one.
                        out.push((rec, false));
                        continue;
                    }
                    tx.prepare_cached(
                        "INSERT INTO jobs (tenant, idempotency_key, kind, input_digest, priority,
                                       deadline_unix, state, created_unix, spec, created_ms)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'accepted', ?7, ?8, ?9)",
                    )?
                    .execute(params![
                        tenant,
                        key,
                        job.kind,
                        job.input_digest,
                        job.priority,
                        job.deadline_unix,
                        unix_now(),
                        job.spec,
                        unix_now_ms()
                    ])?;
                    out.push((by_id(&tx, tx.last_insert_rowid())?, true));
                }
                tx.commit()?;
                Ok(Ok(out))
            },
            |out| {
                if let Ok(jobs) = out {
                    committed(jobs);
                }
            },
        )?;
        out.map_err(|(key, job)| ServeError::IdempotencyConflict { key, job })
    }

    /// The tenant's job `id`; `None` when it does not exist or belongs to another tenant (the
    /// API answers both with 404).
    pub fn job(&self, tenant: &str, id: i64) -> Result<Option<JobRecord>> {
        self.with_conn(|c| {
            c.prepare_cached(&format!(
                "SELECT {COLUMNS} FROM jobs WHERE id = ?1 AND tenant = ?2"
            ))?
            .query_row(params![id, tenant], record)
            .optional()
        })
    }

    /// The tenant's job accepted under `idempotency_key`, if any.
    pub fn job_by_key(&self, tenant: &str, idempotency_key: &str) -> Result<Option<JobRecord>> {
        self.with_conn(|c| {
            c.prepare_cached(&format!(
                "SELECT {COLUMNS} FROM jobs WHERE tenant = ?1 AND idempotency_key = ?2"
            ))?
            .query_row(params![tenant, idempotency_key], record)
            .optional()
        })
    }

    /// The tenant's jobs, newest first.
    pub fn jobs(&self, tenant: &str) -> Result<Vec<JobRecord>> {
        self.jobs_page(tenant, None, None, usize::MAX)
    }

    /// One page of a tenant's jobs, newest first: only those in `state` when given, only
    /// those with an id below `before` when given, at most `limit`. The next page starts
    /// `before` the last id of this one (ids only grow, so pages never repeat or skip a job).
    pub fn jobs_page(
        &self,
        tenant: &str,
        state: Option<JobState>,
        before: Option<i64>,
        limit: usize,
    ) -> Result<Vec<JobRecord>> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let before = before.unwrap_or(i64::MAX);
        self.with_conn(|c| match state {
            Some(s) => {
                // The state as a literal (one of five names), so that the partial index of
                // that state, where there is one, serves the query.
                let mut st = c.prepare_cached(&format!(
                    "SELECT {COLUMNS} FROM jobs WHERE tenant = ?1 AND state = '{}' AND id < ?2 \
                     ORDER BY id DESC LIMIT ?3",
                    s.name()
                ))?;
                let rows = st.query_map(params![tenant, before, limit], record)?;
                rows.collect()
            }
            None => {
                let mut st = c.prepare_cached(&format!(
                    "SELECT {COLUMNS} FROM jobs WHERE tenant = ?1 AND id < ?2 \
                     ORDER BY id DESC LIMIT ?3"
                ))?;
                let rows = st.query_map(params![tenant, before, limit], record)?;
                rows.collect()
            }
        })
    }

    /// Takes the next queued job for a worker, fairly across tenants: among tenants with
    /// queued jobs the one with the fewest jobs running (then the one whose oldest queued job
    /// is oldest), and that tenant's highest-priority, then oldest, job. It becomes `running`
    /// with one more attempt.
    pub fn start_next(&self) -> Result<Option<JobRecord>> {
        self.start_next_among(i64::MAX)
    }

    /// [`Self::start_next`] among the tenants with no job running only: `None` when every
    /// tenant with queued jobs has one running.
    pub fn start_next_idle_tenant(&self) -> Result<Option<JobRecord>> {
        self.start_next_below(1)
    }

    /// [`Self::start_next`] among the tenants running fewer than `running` jobs only: `None`
    /// when every tenant with queued jobs runs that many or more. The worker's express slots:
    /// a tenant running less than its fair share of the slots starts at once even when a
    /// flooding tenant holds every regular slot.
    pub fn start_next_below(&self, running: usize) -> Result<Option<JobRecord>> {
        self.start_next_among(i64::try_from(running).unwrap_or(i64::MAX))
    }

    fn start_next_among(&self, below: i64) -> Result<Option<JobRecord>> {
        self.with_conn_unsynced(|c| {
            // Marking a job running need not survive a power cut: a job found accepted after
            // one starts again, as `recover` makes running ones do. So this commit skips the
            // fsync (WAL with synchronous NORMAL still survives the process being killed),
            // saving a disk flush on every job's way to the executor.
            Self::take_next(c, below)
        })
    }

    fn take_next(c: &rusqlite::Connection, below: i64) -> rusqlite::Result<Option<JobRecord>> {
        // One statement (its own transaction): the tenant with the fewest jobs running, then
        // the oldest queued job (per tenant, a small table, index lookups only); that tenant's
        // highest-priority, then oldest, job becomes running and its row is returned.
        c.prepare_cached(&format!(
            "UPDATE jobs SET state = 'running', attempts = attempts + 1, started_ms = ?2
             WHERE id = (
                 SELECT j.id FROM jobs j
                 WHERE j.state = 'accepted' AND j.tenant = (
                     SELECT name FROM (
                         SELECT t.name,
                                (SELECT MIN(id) FROM jobs q
                                 WHERE q.tenant = t.name AND q.state = 'accepted') AS oldest,
                                (SELECT COUNT(*) FROM jobs r
                                 WHERE r.tenant = t.name AND r.state = 'running') AS running
                         FROM tenants t)
                     WHERE oldest IS NOT NULL AND running < ?1
                     ORDER BY running, oldest LIMIT 1)
                 ORDER BY j.priority DESC, j.id LIMIT 1)
             RETURNING {COLUMNS}"
        ))?
        .query_row(params![below, unix_now_ms()], record)
        .optional()
    }

    /// Jobs queued (accepted, not started): the tenant's, or every tenant's with `None`.
    /// Counted on an index (admission control asks on every submission).
    pub fn queued_jobs(&self, tenant: Option<&str>) -> Result<u64> {
        self.with_conn(|c| {
            let n: i64 = match tenant {
                Some(t) => c
                    .prepare_cached(
                        "SELECT COUNT(*) FROM jobs WHERE tenant = ?1 AND state = 'accepted'",
                    )?
                    .query_row([t], |r| r.get(0))?,
                None => c
                    .prepare_cached(
                        "SELECT COALESCE(SUM((SELECT COUNT(*) FROM jobs j
                                              WHERE j.tenant = t.name AND j.state = 'accepted')), 0)
                         FROM tenants t",
                    )?
                    .query_row([], |r| r.get(0))?,
            };
            Ok(n.max(0) as u64)
        })
    }

    /// Queued and running jobs of every tenant, zeros included (a gauge that drops to 0 is
    /// shown as 0, not dropped from `/metrics`). Index lookups per tenant.
    pub fn queue_depths(&self) -> Result<Vec<(String, u64, u64)>> {
        self.with_conn(|c| {
            let mut st = c.prepare_cached(
                "SELECT t.name,
                        (SELECT COUNT(*) FROM jobs j WHERE j.tenant = t.name AND j.state = 'accepted'),
                        (SELECT COUNT(*) FROM jobs j WHERE j.tenant = t.name AND j.state = 'running')
                 FROM tenants t ORDER BY t.name",
            )?;
            let rows = st.query_map([], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, i64>(1)?.max(0) as u64,
                    r.get::<_, i64>(2)?.max(0) as u64,
                ))
            })?;
            rows.collect()
        })
    }

    /// Records the end of a running job: its result (`Ok`) or its error. Returns whether this
    /// call ended it (`false` when it was not running: cancelled meanwhile, or already ended).
    pub fn finish_job(&self, id: i64, outcome: std::result::Result<&str, &str>) -> Result<bool> {
        // Like the start, the end need not survive a power cut: a job found running after one
        // runs again and stores the same (content-addressed, deterministic) result. A killed
        // process loses nothing (WAL).
        let n = self.with_conn_unsynced(|c| match outcome {
            Ok(result_ref) => c
                .prepare_cached(
                    "UPDATE jobs SET state = 'done', result_ref = ?2, finished_ms = ?3
                 WHERE id = ?1 AND state = 'running'",
                )?
                .execute(params![id, result_ref, unix_now_ms()]),
            Err(message) => c
                .prepare_cached(
                    "UPDATE jobs SET state = 'failed', error = ?2, finished_ms = ?3
                 WHERE id = ?1 AND state = 'running'",
                )?
                .execute(params![id, message, unix_now_ms()]),
        })?;
        Ok(n > 0)
    }

    /// Cancels the tenant's job unless it has ended; returns whether it was cancelled now.
    /// Another tenant's job is left alone and answered like a missing one (`false`).
    pub fn cancel_job(&self, tenant: &str, id: i64) -> Result<bool> {
        let n = self.with_conn(|c| {
            c.prepare_cached(
                "UPDATE jobs SET state = 'cancelled', finished_ms = ?3
                 WHERE id = ?1 AND tenant = ?2 AND state IN ('accepted', 'running')",
            )?
            .execute(params![id, tenant, unix_now_ms()])
        })?;
        Ok(n > 0)
    }

    /// Deletes the record of the tenant's ended job (done, failed or cancelled): `None` when
    /// there is no such job (or it is another tenant's), `Some(false)` when it has not ended
    /// (it is left alone), `Some(true)` when deleted. Its idempotency key is free again; its
    /// result object stays (an object of its own), flushed to disk first if it may not be
    /// yet: once the job is gone, nothing could compute a torn result again.
    pub fn delete_job(&self, tenant: &str, id: i64) -> Result<Option<bool>> {
        let result: Option<String> = self.with_conn_unsynced(|c| {
            c.prepare_cached("SELECT result_ref FROM jobs WHERE id = ?1 AND tenant = ?2")?
                .query_row(params![id, tenant], |r| r.get(0))
                .optional()
                .map(Option::flatten)
        })?;
        if let Some(r) = result {
            if let Some((_, Some(loc))) = self.object_location(tenant, &r)? {
                self.segments.make_durable(loc.segment)?;
            }
        }
        Ok(self.delete_ended_job(tenant, id)?.answer())
    }

    /// [`Self::delete_job`] and the job's result object with it, for a client that has the
    /// result and keeps neither (one request instead of two). The object goes even if another
    /// job names it, as with [`Self::delete_object`]; not flushed first, since it is deleted.
    /// Returns `None` for no such job, `Some(false)` for a job not ended (nothing deleted).
    pub fn delete_job_and_result(&self, tenant: &str, id: i64) -> Result<Option<bool>> {
        let gone = self.delete_ended_job(tenant, id)?;
        if let Removal::Deleted(Some(r)) = &gone {
            self.delete_object(tenant, r)?;
        }
        Ok(gone.answer())
    }

    /// Deletes the tenant's job record if it has ended.
    fn delete_ended_job(&self, tenant: &str, id: i64) -> Result<Removal> {
        self.with_conn(|c| {
            let tx = crate::Tx::begin(c)?;
            let row: Option<(String, Option<String>)> = tx
                .prepare_cached("SELECT state, result_ref FROM jobs WHERE id = ?1 AND tenant = ?2")?
                .query_row(params![id, tenant], |r| Ok((r.get(0)?, r.get(1)?)))
                .optional()?;
            let out = match row {
                None => Removal::Missing,
                Some((state, _)) if state == "accepted" || state == "running" => Removal::NotEnded,
                Some((_, result)) => {
                    tx.prepare_cached("DELETE FROM jobs WHERE id = ?1 AND tenant = ?2")?
                        .execute(params![id, tenant])?;
                    Removal::Deleted(result)
                }
            };
            tx.commit()?;
            Ok(out)
        })
    }

    /// After a restart: jobs left `running` by the previous process go back to the queue (they
    /// run again; their results were never recorded). Returns how many.
    pub fn recover(&self) -> Result<usize> {
        self.with_conn(|c| {
            c.execute(
                // Not started any more: a view of it must not show the dead run's start.
                "UPDATE jobs SET state = 'accepted', started_ms = NULL WHERE state = 'running'",
                [],
            )
        })
    }
}

/// What deleting a job record found ([`State::delete_job`]).
enum Removal {
    /// No such job of the tenant.
    Missing,
    /// Accepted or running: left alone.
    NotEnded,
    /// Deleted; its result object's id, if it had one.
    Deleted(Option<String>),
}

impl Removal {
    /// The API's answer: `None` missing, `Some(false)` not ended, `Some(true)` deleted.
    fn answer(&self) -> Option<bool> {
        match self {
            Removal::Missing => None,
            Removal::NotEnded => Some(false),
            Removal::Deleted(_) => Some(true),
        }
    }
}
