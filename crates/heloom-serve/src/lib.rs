//! heloom's multi-tenant service (`heloom serve`).
//!
//! - [`server`]: the process: HTTP/1.1 and HTTP/2 on one loopback port ([`api`], reference in
//!   `docs/serve-api.md`, spec in `openapi.yaml`), over the [`worker`], which runs jobs
//!   through heloom-runtime's online executor with the `heloom` thread policy.
//! - [`State`]: the durable state in one data directory: job records, tenants and bearer
//!   tokens in an embedded SQLite database (write-ahead log, full sync: a committed change
//!   survives `kill -9` and power loss), and the tenants' objects (key sets, ciphertexts,
//!   graphs: [`objects`]) as files beside it, job results as checksummed records in
//!   append-only segment files (checked after a crash). Loaded key sets are held in a
//!   `heloom-store` under the server's memory budget.
//! - [`client`]: a blocking Rust client; [`metrics`]: Prometheus metrics; [`apps`]: the
//!   built-in applications (matrix products, CryptoNets) as jobs, and what clients need for them.
//! - [`RayConfig`] (`heloom serve --ray ADDRESS`): the same server as the front, with jobs run
//!   by heloom node servers on every node of a Ray cluster, placed by the cost model
//!   ([`place`]).
//!
//! Tokens: 256 random bits from the operating system's CSPRNG, shown once as `hlm_` + 64 hex
//! digits, stored only as their SHA-256 (a leaked database yields no usable token), compared
//! in constant time.
//!
//! Jobs ([`State::submit_job`], [`State::start_next`], [`State::finish_job`], ...): accepted
//! once per idempotency key and tenant, visible to their tenant only, run in priority order,
//! ended once per run, put back in the queue by [`State::recover`] after a crash.
//!
//! ```
//! # fn main() -> Result<(), heloom_serve::ServeError> {
//! let dir = std::env::temp_dir().join(format!("heloom-serve-doc-{}", std::process::id()));
//! let state = heloom_serve::State::open(&dir)?;
//! let token = state.create_token("alice")?;
//! assert_eq!(state.authenticate(&token)?.as_deref(), Some("alice"));
//! assert_eq!(state.authenticate("hlm_not-a-token")?, None);
//! # std::fs::remove_dir_all(&dir).ok();
//! # Ok(())
//! # }
//! ```

pub mod api;
pub mod apps;
pub mod client;
pub mod gpu;
mod inputs;
mod jobs;
pub mod metrics;
pub mod objects;
mod remote;
mod segments;
pub mod server;
mod waiters;
pub mod worker;

pub use client::{Client, ClientError, JobsPage, JobsQuery, ObjectsPage};
pub use jobs::{JobRecord, JobState, NewJob};
pub use objects::{NewResult, ObjectInfo, ObjectKind};
pub use remote::{place, LocalNodes, NodeLoad, RayConfig, RayError};
pub use server::{Server, ServerConfig, TlsFiles};

use rand::RngCore;
use rusqlite::{params, Connection, OptionalExtension};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::sync::{Condvar, Mutex};
use subtle::ConstantTimeEq;

/// What can go wrong with the service's state.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// The data directory cannot be created or used.
    #[error("data directory {path}: {source}; pass a writable directory with --data")]
    DataDir {
        /// The directory.
        path: PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
    /// Another server runs on the data directory.
    #[error(
        "data directory {path} is used by another heloom serve; stop that one, or give this one \
         another --data directory"
    )]
    DataDirInUse {
        /// The directory.
        path: PathBuf,
    },
    /// The database failed (corrupt file, disk full, locked by another server).
    #[error("state database {path}: {message}")]
    Database {
        /// The database file.
        path: PathBuf,
        /// What SQLite said, and what to do.
        message: String,
    },
    /// The database was written by a newer heloom.
    #[error(
        "state database {path} has schema version {found}; this heloom reads up to {supported}: \
         upgrade heloom or use another --data directory"
    )]
    NewerSchema {
        /// The database file.
        path: PathBuf,
        /// Its schema version.
        found: i64,
        /// The newest this build reads.
        supported: i64,
    },
    /// A tenant name that is not allowed.
    #[error(
        "tenant name {name:?}: use 1 to 64 characters from a-z, 0-9, '-' and '_', starting with a \
         letter or digit"
    )]
    InvalidTenant {
        /// The name given.
        name: String,
    },
    /// A request the service cannot accept as given.
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    /// An idempotency key already used by the tenant for a different job.
    #[error(
        "idempotency key {key:?} was already used for job {job} with other inputs; use a new key \
         for a new job"
    )]
    IdempotencyConflict {
        /// The key.
        key: String,
        /// The job it belongs to.
        job: i64,
    },
    /// A stored file is damaged (changed, cut short or unreadable): it is reported, never used.
    #[error("stored file {path} is damaged: {message}; delete the object and upload it again")]
    Damaged {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// The operating system's random source failed.
    #[error("no randomness from the operating system: {0}")]
    Random(String),
    /// The GPU named with `--gpu` could not be opened.
    #[error("{0}")]
    Gpu(String),
    /// The Ray backend (`heloom serve --ray`) could not start.
    #[error(transparent)]
    Ray(#[from] RayError),
}

/// Result with [`ServeError`].
pub type Result<T> = std::result::Result<T, ServeError>;

/// Schema version this build writes (SQLite `user_version`).
const SCHEMA_VERSION: i64 = 8;

/// Schema migrations: step `i` brings the database from version `i` to `i + 1`.
const MIGRATIONS: [&str; SCHEMA_VERSION as usize] = [
    "BEGIN;
                 CREATE TABLE IF NOT EXISTS tenants (
                     name TEXT PRIMARY KEY,
                     created_unix INTEGER NOT NULL
                 );
                 CREATE TABLE IF NOT EXISTS tokens (
                     sha256 BLOB PRIMARY KEY,
                     tenant TEXT NOT NULL REFERENCES tenants(name),
                     created_unix INTEGER NOT NULL,
                     revoked INTEGER NOT NULL DEFAULT 0
                 );
                 PRAGMA user_version = 1;
                 COMMIT;",
    "BEGIN;
                 CREATE TABLE IF NOT EXISTS jobs (
                     id INTEGER PRIMARY KEY AUTOINCREMENT,
                     tenant TEXT NOT NULL REFERENCES tenants(name),
                     idempotency_key TEXT NOT NULL,
                     kind TEXT NOT NULL,
                     input_digest TEXT NOT NULL,
                     priority INTEGER NOT NULL,
                     deadline_unix INTEGER,
                     state TEXT NOT NULL,
                     attempts INTEGER NOT NULL DEFAULT 0,
                     result_ref TEXT,
                     error TEXT,
                     created_unix INTEGER NOT NULL,
                     UNIQUE (tenant, idempotency_key)
                 );
                 CREATE INDEX IF NOT EXISTS jobs_queue ON jobs (state, priority DESC, id);
                 PRAGMA user_version = 2;
                 COMMIT;",
    "BEGIN;
                 ALTER TABLE jobs ADD COLUMN spec TEXT NOT NULL DEFAULT '';
                 ALTER TABLE jobs ADD COLUMN created_ms INTEGER NOT NULL DEFAULT 0;
                 ALTER TABLE jobs ADD COLUMN started_ms INTEGER;
                 ALTER TABLE jobs ADD COLUMN finished_ms INTEGER;
                 CREATE INDEX IF NOT EXISTS jobs_tenant_state ON jobs (tenant, state);
                 CREATE TABLE IF NOT EXISTS objects (
                     tenant TEXT NOT NULL REFERENCES tenants(name),
                     id TEXT NOT NULL,
                     kind TEXT NOT NULL,
                     bytes INTEGER NOT NULL,
                     param_fp TEXT NOT NULL,
                     info TEXT NOT NULL,
                     created_unix INTEGER NOT NULL,
                     PRIMARY KEY (tenant, id)
                 );
                 PRAGMA user_version = 3;
                 COMMIT;",
    // Each tenant's queue in start order, so picking the next job and counting a tenant's
    // queue stay logarithmic however long the queues grow.
    "BEGIN;
                 CREATE INDEX IF NOT EXISTS jobs_tenant_queue
                     ON jobs (tenant, state, priority DESC, id);
                 PRAGMA user_version = 4;
                 COMMIT;",
    // A tenant's jobs in id order, for listing them a page at a time.
    "BEGIN;
                 CREATE INDEX IF NOT EXISTS jobs_tenant_id ON jobs (tenant, id);
                 PRAGMA user_version = 5;
                 COMMIT;",
    // Results as records in segment files (`segments`): their segment and offset; NULL for
    // objects in files of their own.
    "BEGIN;
                 ALTER TABLE objects ADD COLUMN segment INTEGER;
                 ALTER TABLE objects ADD COLUMN seg_offset INTEGER;
                 CREATE INDEX IF NOT EXISTS objects_segment ON objects (segment)
                     WHERE segment IS NOT NULL;
                 PRAGMA user_version = 6;
                 COMMIT;",
    // The queue over every tenant (state, priority, id) goes: the dispatcher and admission
    // control look jobs up per tenant, and each of a job's three state changes rewrote an
    // entry of it. (`jobs_tenant_state` stays: it gives a tenant's oldest queued job, by id,
    // in one step, where `jobs_tenant_queue` orders by priority first.)
    "BEGIN;
                 DROP INDEX IF EXISTS jobs_queue;
                 PRAGMA user_version = 7;
                 COMMIT;",
    // Queue indexes over the jobs in their state only (partial indexes): a job's start
    // moves it between two small indexes and its end touches none, where each state change
    // rewrote entries of two indexes over every job ever run (fewer log pages per job to
    // write and to checkpoint). Failed and cancelled jobs, rare, keep an index for listing.
    "BEGIN;
                 DROP INDEX IF EXISTS jobs_tenant_state;
                 DROP INDEX IF EXISTS jobs_tenant_queue;
                 CREATE INDEX IF NOT EXISTS jobs_accepted ON jobs (tenant, id)
                     WHERE state = 'accepted';
                 CREATE INDEX IF NOT EXISTS jobs_accepted_queue
                     ON jobs (tenant, priority DESC, id) WHERE state = 'accepted';
                 CREATE INDEX IF NOT EXISTS jobs_running ON jobs (tenant)
                     WHERE state = 'running';
                 CREATE INDEX IF NOT EXISTS jobs_failed_cancelled ON jobs (tenant, state, id)
                     WHERE state IN ('failed', 'cancelled');
                 PRAGMA user_version = 8;
                 COMMIT;",
];

/// Prefix of every bearer token (recognisable in logs and secret scanners).
pub const TOKEN_PREFIX: &str = "hlm_";

/// Prepared statements kept per connection.
const STATEMENT_CACHE: usize = 256;

/// The service's durable state in its data directory.
#[derive(Debug)]
pub struct State {
    dir: PathBuf,
    db_path: PathBuf,
    conn: Mutex<Connection>,
    /// Whether writes wait for the disk (see [`State::open_scratch`]).
    durable: bool,
    /// The results, as records in append-only segment files.
    segments: segments::Segments,
    /// Commits made durable after the fact ([`State::with_conn_flushed`]), numbered.
    commits: std::sync::atomic::AtomicU64,
    /// The write-ahead log's group flush.
    wal_flush: GroupFlush,
    /// Bytes each tenant stores, for the tenants asked about since the start: summed from the
    /// objects once, then moved by every insert and delete of an object row (under the
    /// connection's lock, so the sum and the moves keep their order). The upload quota asks
    /// on every upload, and a sum over all of a tenant's objects grew with every job's result.
    usage: Mutex<std::collections::HashMap<String, i64>>,
}

/// The default data directory: `heloom` under the user's data directory (for example
/// `~/.local/share/heloom` on Linux), or `./heloom-data` where there is none.
pub fn default_data_dir() -> PathBuf {
    dirs::data_dir()
        .map(|d| d.join("heloom"))
        .unwrap_or_else(|| PathBuf::from("heloom-data"))
}

impl State {
    /// Opens (creating if needed) the state in `dir`: the database `dir/heloom.db` in
    /// write-ahead-log mode with full sync, its schema created or checked.
    pub fn open(dir: impl AsRef<Path>) -> Result<Self> {
        Self::open_with(dir.as_ref(), true)
    }

    /// Opens the state in `dir` as scratch space: nothing is synced to the disk (database
    /// commits and stored files alike), so a crash of the machine may lose or damage what is
    /// stored. For node servers behind a front (`--local-nodes`, `--ray`): the front keeps the
    /// job records and results durably and runs a lost job again.
    pub fn open_scratch(dir: impl AsRef<Path>) -> Result<Self> {
        Self::open_with(dir.as_ref(), false)
    }

    /// Whether writes wait for the disk ([`State::open`]) or not ([`State::open_scratch`]).
    pub fn durable(&self) -> bool {
        self.durable
    }

    fn open_with(dir: &Path, durable: bool) -> Result<Self> {
        let dir = dir.to_path_buf();
        std::fs::create_dir_all(&dir).map_err(|source| ServeError::DataDir {
            path: dir.clone(),
            source,
        })?;
        let db_path = dir.join("heloom.db");
        let db_err = |e: rusqlite::Error| ServeError::Database {
            path: db_path.clone(),
            message: format!(
                "{e}; if the file is damaged, restore it from a backup (the server never \
                 serves from a database it cannot read)"
            ),
        };
        let conn = Connection::open(&db_path).map_err(db_err)?;
        // Room for every statement the server prepares (about 50): with rusqlite's default of
        // 16, a request's statements pushed others out, and each came back through SQLite's
        // parser (2% of all the CPU of a front and its node server under load, 2 cores).
        conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(db_err)?;
        // Durable: commits skip SQLite's own fsync (NORMAL) and the write-ahead log is flushed
        // by this process after each commit that must survive a power cut (`with_conn`,
        // `with_conn_flushed`). No per-transaction PRAGMA switches the level: SQLite prepares a
        // PRAGMA again on every run, which cost the dispatcher a parse per job.
        conn.pragma_update(None, "synchronous", if durable { "NORMAL" } else { "OFF" })
            .map_err(db_err)?;
        conn.pragma_update(None, "foreign_keys", "ON")
            .map_err(db_err)?;
        conn.busy_timeout(std::time::Duration::from_secs(5))
            .map_err(db_err)?;
        let version: i64 = conn
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .map_err(db_err)?;
        if version > SCHEMA_VERSION {
            return Err(ServeError::NewerSchema {
                path: db_path,
                found: version,
                supported: SCHEMA_VERSION,
            });
        }
        // Each step brings the schema from version i to i + 1 in one transaction (v3: what a
        // job computes, so a restart can run it again; its times; the tenants' objects).
        for (i, step) in MIGRATIONS.iter().enumerate() {
            if version <= i as i64 {
                conn.execute_batch(step).map_err(db_err)?;
            }
        }
        let segments = segments::Segments::open(dir.join("segments"), durable);
        Ok(Self {
            dir,
            db_path,
            conn: Mutex::new(conn),
            durable,
            segments,
            commits: std::sync::atomic::AtomicU64::new(0),
            wal_flush: GroupFlush::default(),
            usage: Mutex::new(std::collections::HashMap::new()),
        })
    }

    /// The data directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The database's write-ahead log file.
    fn wal_path(&self) -> PathBuf {
        let mut wal = self.db_path.clone().into_os_string();
        wal.push("-wal");
        PathBuf::from(wal)
    }

    /// Moves SQLite's write-ahead-log checkpoints off the connection that commits: its
    /// automatic checkpoint (every 1,000 log pages, run inside whichever commit crosses the
    /// mark, with a flush of the database file) held the database for milliseconds in a job's
    /// start or end, now and then. A thread with its own connection checkpoints instead
    /// (passive: commits go on meanwhile) every 100 ms while the log file, past 4 MiB, keeps
    /// changing. Stops when the returned handle is dropped. For the server; token commands keep SQLite's own.
    pub fn start_checkpointer(&self) -> Result<Checkpointer> {
        self.start_checkpointer_at(CHECKPOINT_LOG_BYTES, std::time::Duration::from_millis(100))
    }

    /// [`Self::start_checkpointer`] past `bytes` of log, looked at every `period`.
    fn start_checkpointer_at(
        &self,
        bytes: u64,
        period: std::time::Duration,
    ) -> Result<Checkpointer> {
        let conn = Connection::open(&self.db_path).map_err(|e| self.db_error(e))?;
        conn.pragma_update(
            None,
            "synchronous",
            if self.durable { "NORMAL" } else { "OFF" },
        )
        .and_then(|()| conn.busy_timeout(std::time::Duration::from_secs(5)))
        .map_err(|e| self.db_error(e))?;
        let wal = self.wal_path();
        let runs = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let counted = std::sync::Arc::clone(&runs);
        let stop = std::sync::Arc::new((Mutex::new(false), Condvar::new()));
        let flag = std::sync::Arc::clone(&stop);
        let db_path = self.db_path.clone();
        let thread = std::thread::Builder::new()
            .name("heloom-serve-checkpoint".into())
            .spawn(move || {
                let mut failing = false;
                // SQLite reuses the log file from its start after a complete checkpoint and
                // keeps its size, so once the file has reached `bytes` this checkpoints every
                // period while commits come (each run copies only the pages changed since;
                // cutting the file back with `journal_size_limit` made every commit's frames
                // land on new pages, no faster here). The log's modification time at the last
                // checkpoint: an idle log that checkpoint copied is not checkpointed again.
                let mut checked = None;
                loop {
                    {
                        let (lock, cv) = &*flag;
                        let stopped = lock.lock().unwrap_or_else(|p| p.into_inner());
                        let (stopped, _) = cv
                            .wait_timeout_while(stopped, period, |s| !*s)
                            .unwrap_or_else(|p| p.into_inner());
                        if *stopped {
                            return;
                        }
                    }
                    let (len, modified) =
                        std::fs::metadata(&wal).map_or((0, None), |m| (m.len(), m.modified().ok()));
                    if len < bytes || (modified.is_some() && modified == checked) {
                        continue;
                    }
                    let done = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()));
                    match done {
                        Ok(()) => {
                            failing = false;
                            checked = modified;
                            counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        }
                        Err(e) if !failing => {
                            failing = true;
                            eprintln!(
                                "heloom serve: checkpointing {}: {e} (retried; the log grows \
                                 meanwhile)",
                                db_path.display()
                            );
                        }
                        Err(_) => {}
                    }
                }
            })
            .map_err(|e| ServeError::Database {
                path: self.db_path.clone(),
                message: format!("cannot start its checkpoint thread: {e}"),
            })?;
        // Only once the thread runs: commits stop checkpointing themselves.
        self.with_conn_unsynced(|c| c.pragma_update(None, "wal_autocheckpoint", 0))?;
        Ok(Checkpointer {
            stop,
            thread: Some(thread),
            runs,
        })
    }

    fn db_error(&self, e: rusqlite::Error) -> ServeError {
        ServeError::Database {
            path: self.db_path.clone(),
            message: e.to_string(),
        }
    }

    /// [`Self::with_conn`] with commits that skip the disk flush (in WAL mode they survive
    /// the process being killed, not a power cut), for changes a power cut may undo safely.
    pub(crate) fn with_conn_unsynced<T>(
        &self,
        f: impl FnOnce(&Connection) -> rusqlite::Result<T>,
    ) -> Result<T> {
        let conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        f(&conn).map_err(|e| self.db_error(e))
    }

    /// [`Self::with_conn`] for a change that must survive power loss, made durable after the
    /// connection is released: committed without the fsync, then the write-ahead log flushed
    /// by a group flush (concurrent callers share one, and the database serves others
    /// meanwhile). `committed` runs between the two: the change is visible to this process,
    /// not yet on disk (job acceptance wakes the dispatcher there, so a job can start while
    /// its acceptance is flushed; its answer waits for the flush).
    pub(crate) fn with_conn_flushed<T>(
        &self,
        f: impl FnOnce(&Connection) -> rusqlite::Result<T>,
        committed: impl FnOnce(&T),
    ) -> Result<T> {
        let (out, seq) = self.with_conn_unsynced(|c| {
            let out = f(c)?;
            // Numbered under the connection's lock: numbers follow the commits' order.
            Ok((out, self.next_commit()))
        })?;
        committed(&out);
        self.flush_wal(seq)?;
        Ok(out)
    }

    /// The number of the commit made now (under the connection's lock).
    fn next_commit(&self) -> u64 {
        self.commits
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst)
            + 1
    }

    /// Returns once every commit numbered up to `seq` is on disk (durable state only).
    fn flush_wal(&self, seq: u64) -> Result<()> {
        if !self.durable {
            return Ok(());
        }
        // The log's frames are in the page cache since the commit: syncing the file (any
        // descriptor of it) makes every commit numbered up to `target` durable.
        let wal = self.wal_path();
        self.wal_flush
            .through(seq, || {
                let target = self.commits.load(std::sync::atomic::Ordering::SeqCst);
                std::fs::File::open(&wal)?.sync_data()?;
                Ok(target)
            })
            .map_err(|source| ServeError::DataDir { path: wal, source })
    }

    /// Runs `f` on the connection; whatever it changed is on disk when this returns (in a
    /// durable state): reads cost no flush, writes share a group flush of the log.
    pub(crate) fn with_conn<T>(
        &self,
        f: impl FnOnce(&Connection) -> rusqlite::Result<T>,
    ) -> Result<T> {
        // A panic while holding the lock cannot leave SQLite half-written (each change is a
        // transaction), so a poisoned lock is still safe to use.
        let conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        let before = conn.total_changes();
        let out = f(&conn).map_err(|e| self.db_error(e));
        // Flushed even when `f` failed after a commit of its own.
        let seq = (conn.total_changes() != before).then(|| self.next_commit());
        drop(conn);
        if let Some(seq) = seq {
            self.flush_wal(seq)?;
        }
        out
    }

    /// A new bearer token for `tenant` (created if new), returned once: only its SHA-256 is
    /// stored.
    pub fn create_token(&self, tenant: &str) -> Result<String> {
        check_tenant(tenant)?;
        let mut secret = [0u8; 32];
        rand::rngs::OsRng
            .try_fill_bytes(&mut secret)
            .map_err(|e| ServeError::Random(e.to_string()))?;
        let token = format!("{TOKEN_PREFIX}{}", hex(&secret));
        let digest = sha256(&token);
        let now = unix_now();
        self.with_conn(|c| {
            let tx = Tx::begin(c)?;
            tx.prepare_cached(
                "INSERT OR IGNORE INTO tenants (name, created_unix) VALUES (?1, ?2)",
            )?
            .execute(params![tenant, now])?;
            tx.prepare_cached(
                "INSERT INTO tokens (sha256, tenant, created_unix) VALUES (?1, ?2, ?3)",
            )?
            .execute(params![&digest[..], tenant, now])?;
            tx.commit()
        })?;
        Ok(token)
    }

    /// The tenant a presented token belongs to, or `None` for an unknown, malformed or revoked
    /// token (the caller answers all of them alike).
    pub fn authenticate(&self, token: &str) -> Result<Option<String>> {
        if !token.starts_with(TOKEN_PREFIX) || token.len() > 256 {
            return Ok(None);
        }
        let digest = sha256(token);
        let row: Option<(Vec<u8>, String, i64)> = self.with_conn(|c| {
            c.prepare_cached("SELECT sha256, tenant, revoked FROM tokens WHERE sha256 = ?1")?
                .query_row(params![&digest[..]], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?))
                })
                .optional()
        })?;
        Ok(row.and_then(|(stored, tenant, revoked)| {
            // The lookup is by hash; the final check compares in constant time anyway.
            let same: bool = stored.as_slice().ct_eq(&digest[..]).into();
            (same && revoked == 0).then_some(tenant)
        }))
    }

    /// Revokes a token; returns whether it was active.
    pub fn revoke_token(&self, token: &str) -> Result<bool> {
        let digest = sha256(token);
        let n = self.with_conn(|c| {
            c.prepare_cached("UPDATE tokens SET revoked = 1 WHERE sha256 = ?1 AND revoked = 0")?
                .execute(params![&digest[..]])
        })?;
        Ok(n > 0)
    }

    /// Tenants with their number of active tokens, by name.
    pub fn tenants(&self) -> Result<Vec<(String, usize)>> {
        self.with_conn(|c| {
            let mut st = c.prepare(
                "SELECT t.name, COUNT(k.sha256) FROM tenants t
                 LEFT JOIN tokens k ON k.tenant = t.name AND k.revoked = 0
                 GROUP BY t.name ORDER BY t.name",
            )?;
            let rows = st.query_map([], |r| Ok((r.get(0)?, r.get::<_, i64>(1)? as usize)))?;
            rows.collect()
        })
    }
}

/// Tenant names: 1 to 64 of `a-z0-9-_`, not starting with `-` or `_` (they appear in paths,
/// metrics labels and logs).
fn check_tenant(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
        && name
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    if ok {
        Ok(())
    } else {
        Err(ServeError::InvalidTenant {
            name: name.to_string(),
        })
    }
}

/// A transaction begun and ended with cached statements: rusqlite's own transactions parse
/// `BEGIN` and `COMMIT` again each time (`execute_batch`), a sixth of the CPU the server
/// spends storing a result. Dropped without [`Tx::commit`], it rolls back.
pub(crate) struct Tx<'c> {
    conn: &'c Connection,
    open: bool,
}

impl<'c> Tx<'c> {
    /// Begins a (deferred) transaction on `conn`.
    pub(crate) fn begin(conn: &'c Connection) -> rusqlite::Result<Self> {
        conn.prepare_cached("BEGIN")?.execute([])?;
        Ok(Self { conn, open: true })
    }

    /// Commits it (on failure, dropping it rolls back).
    pub(crate) fn commit(mut self) -> rusqlite::Result<()> {
        self.conn.prepare_cached("COMMIT")?.execute([])?;
        self.open = false;
        Ok(())
    }
}

impl std::ops::Deref for Tx<'_> {
    type Target = Connection;
    fn deref(&self) -> &Connection {
        self.conn
    }
}

impl Drop for Tx<'_> {
    fn drop(&mut self) {
        if self.open && !self.conn.is_autocommit() {
            // Nothing to report to: the caller is returning its own error already.
            let _ = self
                .conn
                .prepare_cached("ROLLBACK")
                .and_then(|mut s| s.execute([]));
        }
    }
}

fn sha256(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub(crate) fn unix_now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

pub(crate) fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// Log size past which the background checkpointer copies the log into the database.
const CHECKPOINT_LOG_BYTES: u64 = 4 << 20;

/// The background checkpoint thread of [`State::start_checkpointer`]; stops when dropped.
#[derive(Debug)]
pub struct Checkpointer {
    stop: std::sync::Arc<(Mutex<bool>, Condvar)>,
    thread: Option<std::thread::JoinHandle<()>>,
    runs: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl Checkpointer {
    /// Checkpoints run so far.
    pub fn runs(&self) -> u64 {
        self.runs.load(std::sync::atomic::Ordering::Relaxed)
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        let (lock, cv) = &*self.stop;
        *lock.lock().unwrap_or_else(|p| p.into_inner()) = true;
        cv.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[derive(Debug, Default)]
struct Synced {
    /// Writes known to be on disk, by sequence number.
    through: u64,
    /// Whether a thread is flushing now.
    flushing: bool,
}

/// Group commit: writers number their writes `1, 2, ...`; a writer that needs write `seq` on
/// disk either finds it covered, waits for the flush in progress, or flushes itself, and one
/// flush covers every write numbered before it started. Concurrent writers share flushes.
#[derive(Debug, Default)]
pub(crate) struct GroupFlush {
    synced: Mutex<Synced>,
    flushed: Condvar,
}

impl GroupFlush {
    /// Returns once write `seq` is covered. `flush` reads the number of the last write so far,
    /// then flushes, and returns that number.
    pub(crate) fn through(
        &self,
        seq: u64,
        mut flush: impl FnMut() -> std::io::Result<u64>,
    ) -> std::io::Result<()> {
        let mut s = self.synced.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if s.through >= seq {
                return Ok(());
            }
            if s.flushing {
                s = self.flushed.wait(s).unwrap_or_else(|p| p.into_inner());
                continue;
            }
            s.flushing = true;
            drop(s);
            let r = flush();
            s = self.synced.lock().unwrap_or_else(|p| p.into_inner());
            s.flushing = false;
            if let Ok(target) = r {
                s.through = s.through.max(target);
            }
            self.flushed.notify_all();
            r?;
        }
    }

    /// Writes known to be on disk.
    #[cfg(test)]
    fn through_now(&self) -> u64 {
        self.synced
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .through
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_group_flush_covers_every_write_before_it() {
        let g = GroupFlush::default();
        let flushes = std::sync::atomic::AtomicU64::new(0);
        let written = std::sync::atomic::AtomicU64::new(0);
        std::thread::scope(|sc| {
            for _ in 0..8 {
                sc.spawn(|| {
                    for _ in 0..50 {
                        let seq = written.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
                        g.through(seq, || {
                            let target = written.load(std::sync::atomic::Ordering::SeqCst);
                            flushes.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                            std::thread::sleep(std::time::Duration::from_micros(200));
                            Ok(target)
                        })
                        .expect("test step");
                    }
                });
            }
        });
        assert_eq!(g.through_now(), 400);
        // Eight writers, each waiting for its write: flushes are shared.
        assert!(flushes.load(std::sync::atomic::Ordering::SeqCst) < 400);
    }

    #[test]
    fn a_cached_transaction_commits_or_rolls_back() {
        let c = Connection::open_in_memory().expect("test step");
        c.execute_batch("CREATE TABLE t (x INTEGER)")
            .expect("test step");
        let count = |c: &Connection| -> i64 {
            c.query_row("SELECT COUNT(*) FROM t", [], |r| r.get(0))
                .expect("test step")
        };
        for round in 0..3 {
            let tx = Tx::begin(&c).expect("test step");
            tx.execute("INSERT INTO t VALUES (1)", [])
                .expect("test step");
            tx.commit().expect("test step");
            assert_eq!(count(&c), round + 1);
            // Dropped without a commit: undone, and the connection is usable again.
            let tx = Tx::begin(&c).expect("test step");
            tx.execute("INSERT INTO t VALUES (2)", [])
                .expect("test step");
            drop(tx);
            assert!(c.is_autocommit());
            assert_eq!(count(&c), round + 1);
        }
    }

    #[test]
    fn a_segment_holding_records_not_yet_named_is_not_reclaimed() {
        use segments::{Segments, RECORD_HEADER};
        let dir = tempfile::tempdir().expect("test step");
        let mut state = State::open_scratch(dir.path()).expect("test step");
        // Two 1,000-byte records fill a segment.
        let rec = RECORD_HEADER + 1000;
        state.segments =
            Segments::open_limited(dir.path().join("segments"), false, 2 * rec + 10).buffered();
        state.create_token("t").expect("test step");
        let a = state.store_result("t", &[1u8; 1000], 7).expect("test step");
        let (_, at) = state
            .object_location("t", &a.id)
            .expect("test step")
            .expect("test step");
        let seg = at.expect("test step").segment;
        // B is written to A's segment but its row is not committed yet (a store in progress);
        // C seals that segment.
        let b = vec![2u8; 1000];
        let wb = state
            .segments
            .append_fresh(&[std::sync::Arc::new(b.clone())])
            .expect("test step");
        assert_eq!(wb[0].segment, seg);
        let wc = state
            .segments
            .append_fresh(&[std::sync::Arc::new(vec![3u8; 1000])])
            .expect("test step");
        assert_ne!(wc[0].segment, seg);
        drop(wc);
        // Deleting A leaves no committed row in the segment: its reclaim waits for B's.
        assert!(state.delete_object("t", &a.id).expect("test step"));
        assert!(
            state.segments.size(seg) > 0,
            "the segment holding B was removed"
        );
        let b_id = objects::result_id(&b);
        state
            .with_conn_unsynced(|c| {
                c.execute(
                    "INSERT INTO objects (tenant, id, kind, bytes, param_fp, info, created_unix,
                     segment, seg_offset) VALUES ('t', ?1, 'result', 1000, '7', '{}', 0, ?2, ?3)",
                    params![b_id, wb[0].segment, wb[0].offset],
                )
            })
            .expect("test step");
        drop(wb);
        assert_eq!(state.segments.take_ready(), vec![seg]);
        state.reclaim_segment(seg).expect("test step");
        assert_eq!(
            state.read_object("t", &b_id).expect("test step"),
            Some(b),
            "B is read back from its segment"
        );
        assert!(state.segments.take_ready().is_empty());
    }

    #[test]
    fn a_result_deleted_while_its_twin_is_stored_is_written_again() {
        let dir = tempfile::tempdir().expect("test step");
        let state = State::open_scratch(dir.path()).expect("test step");
        state.create_token("t").expect("test step");
        let data = vec![5u8; 3000];
        let first = state.store_result("t", &data, 9).expect("test step");
        let new = NewJob {
            idempotency_key: "j",
            kind: "exp",
            input_digest: "d",
            priority: 0,
            deadline_unix: None,
            spec: "{}",
        };
        let (job, _) = state.submit_job("t", &new).expect("test step");
        assert_eq!(
            state.start_next().expect("test step").map(|r| r.id),
            Some(job.id)
        );
        // The same bytes again: found stored, then deleted before this store commits.
        let id = first.id.clone();
        objects::BEFORE_STORE_COMMIT.with(|h| {
            *h.borrow_mut() = Some(Box::new(move |s: &State| {
                assert!(s.delete_object("t", &id).expect("test step"));
            }))
        });
        let stored = state
            .store_results(vec![objects::NewResult {
                job: Some(job.id),
                tenant: "t".into(),
                data: data.clone(),
                parameters: 9,
                known: None,
            }])
            .expect("test step");
        assert_eq!(stored[0].0.id, first.id);
        assert!(stored[0].1, "the job ended");
        let rec = state
            .job("t", job.id)
            .expect("test step")
            .expect("test step");
        let result = rec.result_ref.expect("a result");
        assert_eq!(
            state.read_object("t", &result).expect("test step"),
            Some(data),
            "the done job's result is readable"
        );
    }

    #[test]
    fn the_checkpointer_keeps_the_log_small() {
        let dir = tempfile::tempdir().expect("test step");
        let state = State::open_scratch(dir.path()).expect("test step");
        let ckpt = state
            .start_checkpointer_at(64 << 10, std::time::Duration::from_millis(5))
            .expect("test step");
        let auto: i64 = state
            .with_conn_unsynced(|c| c.pragma_query_value(None, "wal_autocheckpoint", |r| r.get(0)))
            .expect("test step");
        assert_eq!(auto, 0, "commits no longer checkpoint themselves");
        state
            .with_conn_unsynced(|c| c.execute_batch("CREATE TABLE t (x BLOB)"))
            .expect("test step");
        let wal = dir.path().join("heloom.db-wal");
        let mut largest = 0;
        // 8 MiB in 8 KiB rows, a pause now and then for the checkpoint thread.
        for i in 0..1024 {
            state
                .with_conn_unsynced(|c| c.execute("INSERT INTO t VALUES (?1)", [vec![7u8; 8192]]))
                .expect("test step");
            if i % 16 == 15 {
                std::thread::sleep(std::time::Duration::from_millis(20));
                largest = largest.max(std::fs::metadata(&wal).map_or(0, |m| m.len()));
            }
        }
        assert!(largest > 0);
        assert!(largest < 2 << 20, "the log grew to {largest} bytes");
        // At most one checkpoint per period while commits come.
        let runs = ckpt.runs();
        assert!((1..=400).contains(&runs), "{runs} checkpoints");
        // An idle log is not checkpointed again and again (before, every 5 ms).
        std::thread::sleep(std::time::Duration::from_millis(100));
        assert!(ckpt.runs() <= runs + 1, "{} after {runs}", ckpt.runs());
        drop(ckpt);
        let rows: i64 = state
            .with_conn_unsynced(|c| c.query_row("SELECT COUNT(*) FROM t", [], |r| r.get(0)))
            .expect("test step");
        assert_eq!(rows, 1024);
    }
}
