//! # heloom-store
//!
//! A memory/SSD tier for keys and ciphertexts: a key-value [`Store`] with a memory budget.
//! Values beyond the budget are spilled to files on local disk and read back when needed,
//! with parallel asynchronous I/O and prefetch driven by the known access order.
//!
//! ## Why
//!
//! Seed paper 004 (Tsuji et al.) ran an HE genome search whose working set exceeded DRAM;
//! capping the memory made the OS swap to SSD, at +16% time. The OS knows nothing of the
//! access order; heloom does (the task graph, the protocol round), so it tiers memory on
//! purpose: it writes what is needed last, reads ahead what is needed next, and counts what
//! it did ([`StoreStats`]).
//!
//! ## Use
//!
//! ```
//! use heloom_store::{Spill, Store, StoreConfig};
//! use std::sync::Arc;
//!
//! struct Blob(Vec<u8>);
//! impl Spill for Blob {
//!     fn to_spill(&self) -> Vec<u8> { self.0.clone() }
//!     fn memory_bytes(&self) -> usize { self.0.len() }
//! }
//!
//! let config = StoreConfig { budget_bytes: Some(2_000), ..StoreConfig::default() };
//! let store = Store::new(config, |b: &[u8]| Ok(Blob(b.to_vec())))?;
//! for k in 0..5u64 {
//!     store.insert(k, Blob(vec![k as u8; 1_000]))?;
//! }
//! store.set_access_order(&[4, 3, 2, 1, 0]);
//! for k in (0..5u64).rev() {
//!     let v: Arc<Blob> = store.get(k)?;
//!     assert_eq!(v.0, vec![k as u8; 1_000]);
//! }
//! assert!(store.stats().bytes_written > 0);
//! # Ok::<(), heloom_store::StoreError>(())
//! ```
//!
//! ## Values and budget accounting
//!
//! A value is anything that implements [`Spill`]: the bytes to write and the bytes it takes in
//! memory. The store holds values as `Arc<T>`; [`Store::get`] hands out a clone of that `Arc`.
//! The budget counts what the *store* holds: when a value is evicted the store drops its own
//! `Arc`, and a caller still holding one keeps the value alive, uncounted. This is on purpose:
//! the store cannot take memory back from a caller, and counting handed-out values would make
//! every get look like a leak. [`Store::resident_bytes`] is therefore "held by the store"; a
//! caller that keeps many values alive should count them itself.
//!
//! The budget is exceeded transiently, and only by bounded amounts:
//! - a value being written keeps its memory until the write completes (it must stay readable);
//!   [`Store::insert`] waits (backpressure, counted as stall time) while such writes hold more
//!   than a quarter of the budget;
//! - a value read on demand by [`Store::get`] is in memory before something else is evicted;
//! - a value larger than the whole budget is stored anyway (refusing it would lose data the
//!   caller expects to keep): it is written to disk as soon as it is inserted, read back for
//!   each get and dropped again right after (the caller's `Arc` keeps it alive while used).
//!
//! With no budget (`budget_bytes: None`) nothing is ever written and no directory is made.
//!
//! ## Eviction policy
//!
//! With an access order ([`Store::set_access_order`]) the store evicts the resident value
//! whose next use is furthest away (Belady's optimal policy; a value with no next use counts
//! as furthest, ties go to the least recently used). Each [`Store::get`] of a key consumes that
//! key's next occurrence in the order, so gets slightly out of order (several threads) are
//! fine. Without an order the store falls back to LRU, and values prefetched but not used yet
//! are evicted last.
//!
//! A value already on disk and unchanged since (a clean value) is evicted by dropping the
//! memory copy; only dirty values (inserted and never written) are written.
//!
//! With [`Store::set_prefer_unheld`], values a caller still holds (an `Arc` from
//! [`Store::get`] alive outside the store) go after every value nobody holds, whatever the
//! order says: dropping the store's copy of a value in use frees no memory, so for values
//! held long (a server's key sets of running jobs) it would only let the process exceed the
//! budget by that value.
//!
//! ## Prefetch
//!
//! After each get the store looks at the next `prefetch_depth` gets of the access order and
//! starts asynchronous reads for those not in memory. A prefetch only pushes out values whose
//! next use is strictly later than the prefetched one's; when there is no such room it is not
//! started (a later get tries again). [`Store::prefetch`] starts reads explicitly, with the
//! same rule (a key outside the access order may only push out values with no known next use,
//! never another prefetched value not yet used). A get on a key whose read is in flight waits
//! for it rather than issuing a second read.
//!
//! ## I/O
//!
//! `io_threads` worker threads do the writes of evictions and the prefetch reads; a demand
//! read (a get that misses) is done by the calling thread. The files are in the spill
//! directory: [`StoreConfig::dir`], or a fresh private directory under `$HELOOM_STORE_DIR` or
//! [`std::env::temp_dir`], removed when the store is dropped (in a directory the caller gave,
//! only the store's own files are removed). Put it on a local SSD.
//!
//! One file per key and version: `<key as 16 hex digits>-<version>.spill`, written once and
//! never modified (a new insert of a key gets a new version and file; the old file is deleted
//! when no I/O uses it any more). This keeps concurrent reads and writes independent and
//! means a half-written file is never mistaken for another version. The format (module
//! [`format`](mod@format)) is a 40-byte header (magic `HLSTORE2`, key, version, payload length,
//! XXH3-64 of the header's first 32 bytes and the payload) followed by the bytes of
//! [`Spill::to_spill`]. Every read checks all of
//! them, so a corrupted or truncated file gives [`StoreError::Corrupt`] naming the key and the
//! file, never garbage; a loader that rejects checked bytes gives [`StoreError::Load`]. Files
//! are not `fsync`ed: a spill directory is a cache for one process, not a database.
//!
//! The I/O is buffered `std::fs` (no `O_DIRECT`, no `unsafe`), so the OS page cache is in
//! play: a value evicted and read back soon after may come from the page cache, not the SSD.
//! Without `libc` there is no `posix_fadvise(DONTNEED)` to drop those pages; a benchmark
//! that wants SSD numbers must make the spilled data exceed the free page cache (or drop the
//! caches between phases as root), and should report [`StoreStats::read_s`] along with the
//! wall time.
//!
//! ## Statistics
//!
//! [`StoreStats`]: gets split into hits (served from memory, including values a prefetch
//! brought in, counted again in `prefetch_hits`, and gets that waited for an in-flight
//! prefetch) and misses (the get read the file itself); evictions (memory copies dropped by
//! the policy); bytes written and read (whole files, header included); the time gets and
//! inserts spent waiting (`stall_s`); the summed time of writes and reads on all threads
//! (`write_s`, `read_s`, which can exceed the wall time); the peak of resident bytes.
//!
//! ## Where it is used
//!
//! `heloom-ckks` implements [`Spill`] for ciphertexts, plaintexts, public, switching and
//! evaluation keys (module `heloom_ckks::spill`; the loader is the type's `from_bytes` with
//! the context). `heloom-runtime` runs task graphs with their intermediate values in a store
//! (`TaskGraph::run_with_store`, the execution order as access order). The example
//! `store_budget` measures budgets of 100%, 25% and 10% with and without an access order.
//!
//! ## Limitations
//!
//! - Choosing a victim scans the resident values (O(resident) per eviction): fine for
//!   thousands of values, not for millions of tiny ones.
//! - A failed write (disk full) keeps the value in memory, so nothing is lost, and the error
//!   is returned by the next [`Store::insert`] or [`Store::flush`]; until the disk has room the
//!   store can exceed its budget.
//! - Memory is what [`Spill::memory_bytes`] says; allocator overhead is not counted.

pub mod format;

use serde::Serialize;
use std::collections::{HashMap, VecDeque};
use std::fs;
use std::io::Write;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// A value the store can spill to disk.
///
/// Reading a value back is done by the loader given to [`Store::new`], which turns the bytes
/// of [`Spill::to_spill`] into a value again (it may need context, like CKKS parameters).
pub trait Spill: Send + Sync + Sized + 'static {
    /// The bytes written to disk when the value is spilled.
    fn to_spill(&self) -> Vec<u8>;
    /// Bytes the value occupies in memory (what the budget counts).
    fn memory_bytes(&self) -> usize;
}

/// Plain bytes spill as themselves.
impl Spill for Vec<u8> {
    fn to_spill(&self) -> Vec<u8> {
        self.clone()
    }
    fn memory_bytes(&self) -> usize {
        self.len()
    }
}

/// How a [`Store`] is set up.
#[derive(Clone, Debug)]
pub struct StoreConfig {
    /// Memory budget in bytes; `None` = unlimited (nothing spills). `Some(0)` is refused.
    pub budget_bytes: Option<u64>,
    /// Spill directory; `None` = a fresh private directory under `$HELOOM_STORE_DIR` or
    /// [`std::env::temp_dir`], removed on drop.
    pub dir: Option<PathBuf>,
    /// Parallel I/O worker threads (default 4).
    pub io_threads: usize,
    /// How many upcoming keys of the access order to keep loading ahead (default 4; 0 turns
    /// automatic prefetch off).
    pub prefetch_depth: usize,
}

impl Default for StoreConfig {
    fn default() -> Self {
        Self {
            budget_bytes: None,
            dir: None,
            io_threads: 4,
            prefetch_depth: 4,
        }
    }
}

/// What a store did since it was made or since [`Store::reset_stats`].
#[derive(Clone, Debug, Default, Serialize)]
pub struct StoreStats {
    /// Calls to [`Store::get`] that returned a value.
    pub gets: u64,
    /// Gets served from memory or by a read already in flight (`gets = hits + misses`).
    pub hits: u64,
    /// Gets that read the value's file themselves.
    pub misses: u64,
    /// Hits on a value brought in by a prefetch (its first get after the prefetch).
    pub prefetch_hits: u64,
    /// Memory copies dropped by the eviction policy.
    pub evictions: u64,
    /// Bytes written to spill files (headers included).
    pub bytes_written: u64,
    /// Bytes read from spill files (headers included).
    pub bytes_read: u64,
    /// Seconds gets spent waiting for data (reading it or waiting on a prefetch) plus seconds
    /// inserts spent waiting for writes to free memory.
    pub stall_s: f64,
    /// Seconds spent writing files, summed over threads.
    pub write_s: f64,
    /// Seconds spent reading and loading files, summed over threads.
    pub read_s: f64,
    /// Largest number of bytes the store held in memory at once.
    pub peak_resident_bytes: u64,
}

/// Errors of a [`Store`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The key is not in the store.
    #[error("key {0:#x} is not in the store")]
    UnknownKey(u64),
    /// The configuration cannot work.
    #[error("store configuration: {0}")]
    Config(String),
    /// A file or directory operation failed.
    #[error("I/O error while {op} {}: {source}; check that the disk has room and is writable, or point HELOOM_STORE_DIR (or StoreConfig::dir) at a local SSD with enough free space", path.display())]
    Io {
        /// What the store was doing ("writing", "reading", "creating directory", ...).
        op: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A spill file failed its checks (magic, key, length, checksum).
    #[error("spill file {} of key {key:#x} is corrupted: {reason}; the spilled value cannot be recovered (was the spill directory modified or the disk full?)", path.display())]
    Corrupt {
        /// The key whose value was in the file.
        key: u64,
        /// The file.
        path: PathBuf,
        /// What check failed.
        reason: String,
    },
    /// The loader refused (or panicked on) bytes that passed the checks.
    #[error("the loader failed on spill file {} of key {key:#x}: {message} (the file is intact, so the loader does not read what Spill::to_spill writes: a loader for another type or other parameters?)", path.display())]
    Load {
        /// The key.
        key: u64,
        /// The file.
        path: PathBuf,
        /// The loader's message.
        message: String,
    },
    /// `Spill::to_spill` panicked while the value was being written.
    #[error("Spill::to_spill panicked on key {key:#x}: {message}; the value stays in memory")]
    Serialize {
        /// The key.
        key: u64,
        /// The panic message.
        message: String,
    },
}

/// Eviction rank of a value (see [`Shared::rank`]).
type Rank = (bool, bool, usize, bool, std::cmp::Reverse<u64>);

type Loader<T> = dyn Fn(&[u8]) -> Result<T, String> + Send + Sync;

/// One key's value and where it is.
struct Entry<T> {
    /// What the value takes in memory ([`Spill::memory_bytes`]).
    bytes: u64,
    /// Insert counter: names the file and tells stale I/O apart.
    version: u64,
    /// The store's copy, if in memory.
    mem: Option<Arc<T>>,
    /// The file of `version` is complete on disk.
    on_disk: bool,
    /// A write of `version` is queued or running (then `mem` is set).
    writing: bool,
    /// Drop `mem` as soon as the write completes (its bytes are in `pending_release`).
    evict_pending: bool,
    /// A read is queued or running (then `mem` is `None`).
    loading: bool,
    /// Brought in by a prefetch and not gotten since.
    prefetched: bool,
    /// Tick of the last use, for LRU.
    touched: u64,
}

/// The known future order of gets.
#[derive(Default)]
struct Order {
    keys: Vec<u64>,
    /// Per key: its positions in `keys`, and how many of them are consumed.
    occ: HashMap<u64, (Vec<usize>, usize)>,
    consumed: Vec<bool>,
    /// First position not consumed.
    cursor: usize,
}

impl Order {
    fn new(keys: &[u64]) -> Self {
        let mut occ: HashMap<u64, (Vec<usize>, usize)> = HashMap::new();
        for (i, &k) in keys.iter().enumerate() {
            occ.entry(k).or_default().0.push(i);
        }
        Self {
            keys: keys.to_vec(),
            occ,
            consumed: vec![false; keys.len()],
            cursor: 0,
        }
    }

    /// Position of the next use of `key`; `usize::MAX` when none is known.
    fn next_use(&self, key: u64) -> usize {
        self.occ
            .get(&key)
            .and_then(|(pos, used)| pos.get(*used).copied())
            .unwrap_or(usize::MAX)
    }

    /// A get of `key` happened: consume its next occurrence.
    fn consume(&mut self, key: u64) {
        if let Some((pos, used)) = self.occ.get_mut(&key) {
            if let Some(&p) = pos.get(*used) {
                *used += 1;
                self.consumed[p] = true;
                while self.cursor < self.consumed.len() && self.consumed[self.cursor] {
                    self.cursor += 1;
                }
            }
        }
    }
}

enum Job<T> {
    Write {
        key: u64,
        version: u64,
        value: Arc<T>,
    },
    Read {
        key: u64,
        version: u64,
        bytes: u64,
    },
}

struct State<T> {
    entries: HashMap<u64, Entry<T>>,
    /// Bytes of values the store holds in memory.
    resident: u64,
    /// Bytes that in-flight writes will release (`evict_pending` entries).
    pending_release: u64,
    /// Bytes that in-flight prefetch reads will add.
    reserved: u64,
    total: u64,
    tick: u64,
    next_version: u64,
    order: Order,
    jobs: VecDeque<Job<T>>,
    /// Jobs queued or running.
    in_flight: usize,
    /// A write error not reported yet.
    deferred: Option<StoreError>,
    stats: StoreStats,
    shutdown: bool,
}

struct Shared<T> {
    state: Mutex<State<T>>,
    /// Wakes workers: a job was queued or the store shuts down.
    work: Condvar,
    /// Wakes waiters: a job completed.
    done: Condvar,
    loader: Box<Loader<T>>,
    dir: PathBuf,
    /// Memory budget in bytes; `u64::MAX` when the store has none ([`Store::set_budget_bytes`]
    /// changes it).
    budget: std::sync::atomic::AtomicU64,
    prefetch_depth: usize,
    /// Evict values no caller holds first ([`Store::set_prefer_unheld`]).
    prefer_unheld: std::sync::atomic::AtomicBool,
}

/// A key-value store of `Arc<T>` with a memory budget, spilling to disk (see the crate docs).
///
/// `Send + Sync`; every method takes `&self`.
pub struct Store<T: Spill> {
    shared: Arc<Shared<T>>,
    workers: Vec<JoinHandle<()>>,
    /// Remove the whole directory on drop (it was made by the store).
    own_dir: bool,
}

fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic".to_string()
    }
}

fn io_err(op: &'static str, path: &Path, source: std::io::Error) -> StoreError {
    StoreError::Io {
        op,
        path: path.to_path_buf(),
        source,
    }
}

/// A fresh directory under `$HELOOM_STORE_DIR` or the temp dir.
fn private_dir() -> Result<PathBuf, StoreError> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let base = std::env::var_os("HELOOM_STORE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    fs::create_dir_all(&base).map_err(|e| io_err("creating directory", &base, e))?;
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    loop {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let dir = base.join(format!(
            "heloom-store-{}-{n}-{nanos:08x}",
            std::process::id()
        ));
        match fs::create_dir(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(io_err("creating directory", &dir, e)),
        }
    }
}

impl<T: Spill> Shared<T> {
    fn lock(&self) -> MutexGuard<'_, State<T>> {
        // A panic never happens while the lock is held (user code runs outside it), so a
        // poisoned lock still guards consistent state.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn wait<'a>(&self, cv: &Condvar, g: MutexGuard<'a, State<T>>) -> MutexGuard<'a, State<T>> {
        cv.wait(g).unwrap_or_else(|e| e.into_inner())
    }

    fn path(&self, key: u64, version: u64) -> PathBuf {
        self.dir.join(format!("{key:016x}-{version}.spill"))
    }

    /// Writes `value`'s file; returns the bytes written.
    fn write_file(&self, key: u64, version: u64, value: &T) -> Result<u64, StoreError> {
        let payload = catch_unwind(AssertUnwindSafe(|| value.to_spill())).map_err(|p| {
            StoreError::Serialize {
                key,
                message: panic_message(p.as_ref()),
            }
        })?;
        let path = self.path(key, version);
        let header = format::header(key, version, &payload);
        let write = || -> std::io::Result<()> {
            let mut f = fs::File::create(&path)?;
            f.write_all(&header)?;
            f.write_all(&payload)?;
            f.flush()
        };
        if let Err(e) = write() {
            // A partial file must not stay behind (disk full): nothing would delete it.
            let _ = fs::remove_file(&path);
            return Err(io_err("writing", &path, e));
        }
        Ok((format::HEADER_LEN + payload.len()) as u64)
    }

    /// Reads, checks and loads `key`'s file; returns the value and the bytes read.
    fn read_file(&self, key: u64, version: u64) -> Result<(T, u64), StoreError> {
        let path = self.path(key, version);
        let data = fs::read(&path).map_err(|e| io_err("reading", &path, e))?;
        let body = format::payload(&data, key).map_err(|reason| StoreError::Corrupt {
            key,
            path: path.clone(),
            reason,
        })?;
        let value = match catch_unwind(AssertUnwindSafe(|| (self.loader)(body))) {
            Ok(Ok(v)) => v,
            Ok(Err(message)) => return Err(StoreError::Load { key, path, message }),
            Err(p) => {
                return Err(StoreError::Load {
                    key,
                    path,
                    message: format!("the loader panicked: {}", panic_message(p.as_ref())),
                })
            }
        };
        Ok((value, data.len() as u64))
    }

    fn remove_file(&self, key: u64, version: u64) {
        // Best effort: a file left behind only costs disk space until the directory goes.
        let _ = fs::remove_file(self.path(key, version));
    }

    fn push(&self, st: &mut State<T>, job: Job<T>) {
        st.jobs.push_back(job);
        st.in_flight += 1;
        self.work.notify_one();
    }

    /// The budget now (`None`: the store has none).
    fn budget(&self) -> Option<u64> {
        let b = self.budget.load(std::sync::atomic::Ordering::Relaxed);
        (b != u64::MAX).then_some(b)
    }

    fn over_budget(&self, st: &State<T>) -> bool {
        self.budget()
            .is_some_and(|b| st.resident.saturating_sub(st.pending_release) > b)
    }

    /// Victim rank: larger goes first. Values larger than the whole budget (they cannot stay
    /// anyway), then (when asked) values no caller holds (evicting a value in use frees
    /// nothing), then furthest next use, then values not waiting for their first get, then least recently
    /// used.
    fn rank(&self, st: &State<T>, key: u64, e: &Entry<T>) -> Rank {
        (
            self.budget().is_some_and(|b| e.bytes > b),
            !self
                .prefer_unheld
                .load(std::sync::atomic::Ordering::Relaxed)
                || e.mem.as_ref().is_none_or(|m| Arc::strong_count(m) == 1),
            st.order.next_use(key),
            !e.prefetched,
            std::cmp::Reverse(e.touched),
        )
    }

    fn evictable(e: &Entry<T>) -> bool {
        e.mem.is_some() && !e.writing && !e.evict_pending
    }

    /// Drops the memory copy of `key` (clean) or starts its write (dirty).
    fn evict(&self, st: &mut State<T>, key: u64) {
        let Some(e) = st.entries.get_mut(&key) else {
            return;
        };
        if e.on_disk {
            e.mem = None;
            e.prefetched = false;
            st.resident -= e.bytes;
            st.stats.evictions += 1;
        } else if let Some(value) = e.mem.clone() {
            e.writing = true;
            e.evict_pending = true;
            st.pending_release += e.bytes;
            let job = Job::Write {
                key,
                version: e.version,
                value,
            };
            self.push(st, job);
        }
    }

    /// Evicts by the policy until the budget holds (counting writes in flight as done).
    fn rebalance(&self, st: &mut State<T>) {
        while self.over_budget(st) {
            let victim = st
                .entries
                .iter()
                .filter(|(_, e)| Self::evictable(e))
                .max_by_key(|(&k, e)| self.rank(st, k, e))
                .map(|(&k, _)| k);
            match victim {
                Some(k) => self.evict(st, k),
                None => break,
            }
        }
    }

    /// Starts a prefetch read of `key` if it is on disk only and room can be made without
    /// evicting a value needed no later than it. Returns false when there is no room.
    fn try_prefetch(&self, st: &mut State<T>, key: u64) -> bool {
        let Some(e) = st.entries.get(&key) else {
            return true;
        };
        if e.mem.is_some() || e.loading {
            return true;
        }
        let bytes = e.bytes;
        if let Some(budget) = self.budget() {
            let held = st.resident.saturating_sub(st.pending_release) + st.reserved + bytes;
            let mut need = held.saturating_sub(budget);
            if need > 0 {
                let mine = st.order.next_use(key);
                let mut cands: Vec<(u64, Rank, u64)> = st
                    .entries
                    .iter()
                    .filter(|(&k, e)| k != key && Self::evictable(e))
                    .map(|(&k, e)| (k, self.rank(st, k, e), e.bytes))
                    .filter(|(_, r, _)| {
                        // Only values needed strictly later; with no known next use on
                        // either side, only values not waiting for their first get.
                        if mine == usize::MAX {
                            r.2 == usize::MAX && r.3
                        } else {
                            r.2 > mine
                        }
                    })
                    .collect();
                cands.sort_by_key(|c| std::cmp::Reverse(c.1));
                let mut chosen = Vec::new();
                for (k, _, b) in cands {
                    if need == 0 {
                        break;
                    }
                    chosen.push(k);
                    need = need.saturating_sub(b);
                }
                if need > 0 {
                    return false;
                }
                for k in chosen {
                    self.evict(st, k);
                }
            }
        }
        let Some(e) = st.entries.get_mut(&key) else {
            return true;
        };
        e.loading = true;
        let version = e.version;
        st.reserved += bytes;
        self.push(
            st,
            Job::Read {
                key,
                version,
                bytes,
            },
        );
        true
    }

    /// Prefetches the next `prefetch_depth` gets of the access order.
    fn prefetch_ahead(&self, st: &mut State<T>) {
        let mut pos = st.order.cursor;
        let mut taken = 0;
        while taken < self.prefetch_depth && pos < st.order.keys.len() {
            if !st.order.consumed[pos] {
                taken += 1;
                let key = st.order.keys[pos];
                if !self.try_prefetch(st, key) {
                    break;
                }
            }
            pos += 1;
        }
    }

    fn note_resident(st: &mut State<T>) {
        st.stats.peak_resident_bytes = st.stats.peak_resident_bytes.max(st.resident);
    }

    /// Worker side of a finished write.
    fn finish_write(&self, key: u64, version: u64, result: Result<u64, StoreError>, secs: f64) {
        let mut guard = self.lock();
        let st = &mut *guard;
        st.in_flight -= 1;
        st.stats.write_s += secs;
        if let Ok(n) = result {
            st.stats.bytes_written += n;
        }
        let current = st
            .entries
            .get(&key)
            .is_some_and(|e| e.version == version && e.writing);
        if !current {
            // Removed or replaced meanwhile (accounting was fixed then): the file is stale.
            if result.is_ok() {
                self.remove_file(key, version);
            }
        } else {
            let mut released = false;
            let mut st_bytes = 0;
            if let Some(e) = st.entries.get_mut(&key) {
                e.writing = false;
                st_bytes = e.bytes;
                if result.is_ok() {
                    e.on_disk = true;
                    if e.evict_pending {
                        e.mem = None;
                        e.prefetched = false;
                        released = true;
                    }
                }
                if e.evict_pending {
                    e.evict_pending = false;
                    st.pending_release -= e.bytes;
                }
            }
            if released {
                st.resident -= st_bytes;
                st.stats.evictions += 1;
            }
            match result {
                Ok(_) => self.rebalance(st),
                // Retrying now would spin on a full disk; the next insert reports it.
                Err(e) => st.deferred = Some(e),
            }
        }
        drop(guard);
        self.done.notify_all();
    }

    /// Worker side of a finished prefetch read.
    fn finish_read(
        &self,
        key: u64,
        version: u64,
        bytes: u64,
        result: Result<(T, u64), StoreError>,
        secs: f64,
    ) {
        let mut guard = self.lock();
        let st = &mut *guard;
        st.in_flight -= 1;
        st.reserved -= bytes;
        st.stats.read_s += secs;
        if let Ok((_, n)) = &result {
            st.stats.bytes_read += n;
        }
        let current = st
            .entries
            .get(&key)
            .is_some_and(|e| e.version == version && e.loading);
        if !current {
            self.remove_file(key, version);
        } else {
            let tick = st.tick + 1;
            st.tick = tick;
            let mut added = 0;
            if let Some(e) = st.entries.get_mut(&key) {
                e.loading = false;
                if let Ok((v, _)) = result {
                    let now = v.memory_bytes() as u64;
                    added = now;
                    st.total = st.total - e.bytes + now;
                    e.bytes = now;
                    e.mem = Some(Arc::new(v));
                    e.prefetched = true;
                    e.touched = tick;
                }
                // A failed prefetch is left for the get, which reads again and reports.
            }
            st.resident += added;
            Self::note_resident(st);
            self.rebalance(st);
        }
        drop(guard);
        self.done.notify_all();
    }

    fn worker(&self) {
        loop {
            let mut st = self.lock();
            let job = loop {
                if st.shutdown {
                    return;
                }
                if let Some(j) = st.jobs.pop_front() {
                    break j;
                }
                st = self.wait(&self.work, st);
            };
            drop(st);
            let t0 = Instant::now();
            match job {
                Job::Write {
                    key,
                    version,
                    value,
                } => {
                    let r = self.write_file(key, version, &value);
                    drop(value);
                    self.finish_write(key, version, r, t0.elapsed().as_secs_f64());
                }
                Job::Read {
                    key,
                    version,
                    bytes,
                } => {
                    let r = self.read_file(key, version);
                    self.finish_read(key, version, bytes, r, t0.elapsed().as_secs_f64());
                }
            }
        }
    }

    /// Takes `key` out of the map and fixes the accounting; deletes its file unless I/O in
    /// flight will (stale completions delete their own file).
    fn forget(&self, st: &mut State<T>, key: u64) -> Option<Entry<T>> {
        let e = st.entries.remove(&key)?;
        if e.mem.is_some() {
            st.resident -= e.bytes;
        }
        if e.evict_pending {
            st.pending_release -= e.bytes;
        }
        st.total -= e.bytes;
        if e.on_disk && !e.loading {
            self.remove_file(key, e.version);
        }
        Some(e)
    }
}

impl<T: Spill> Store<T> {
    /// A store with `config`; `loader` turns the bytes of [`Spill::to_spill`] back into a
    /// value (an `Err` becomes [`StoreError::Load`]).
    ///
    /// Errors: a budget of 0 or no I/O thread ([`StoreError::Config`]), a spill directory
    /// that cannot be created ([`StoreError::Io`]).
    pub fn new(
        config: StoreConfig,
        loader: impl Fn(&[u8]) -> Result<T, String> + Send + Sync + 'static,
    ) -> Result<Self, StoreError> {
        if config.budget_bytes == Some(0) {
            return Err(StoreError::Config(
                "budget_bytes is Some(0): every value would live on disk only; give a budget of at least one value, or None for no budget".into(),
            ));
        }
        if config.io_threads == 0 {
            return Err(StoreError::Config(
                "io_threads is 0: the store needs at least one I/O thread (4 is the default)"
                    .into(),
            ));
        }
        // A directory only when something can spill.
        let (dir, own_dir) = match (&config.dir, config.budget_bytes) {
            (_, None) => (PathBuf::new(), false),
            (Some(d), Some(_)) => {
                fs::create_dir_all(d).map_err(|e| io_err("creating directory", d, e))?;
                (d.clone(), false)
            }
            (None, Some(_)) => (private_dir()?, true),
        };
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                entries: HashMap::new(),
                resident: 0,
                pending_release: 0,
                reserved: 0,
                total: 0,
                tick: 0,
                next_version: 1,
                order: Order::default(),
                jobs: VecDeque::new(),
                in_flight: 0,
                deferred: None,
                stats: StoreStats::default(),
                shutdown: false,
            }),
            work: Condvar::new(),
            done: Condvar::new(),
            loader: Box::new(loader),
            dir,
            budget: std::sync::atomic::AtomicU64::new(config.budget_bytes.unwrap_or(u64::MAX)),
            prefetch_depth: config.prefetch_depth,
            prefer_unheld: std::sync::atomic::AtomicBool::new(false),
        });
        let mut store = Store {
            shared,
            workers: Vec::new(),
            own_dir,
        };
        if config.budget_bytes.is_some() {
            for i in 0..config.io_threads {
                let s = Arc::clone(&store.shared);
                let h = std::thread::Builder::new()
                    .name(format!("heloom-store-io-{i}"))
                    .spawn(move || s.worker())
                    .map_err(|e| io_err("starting an I/O thread for", &store.shared.dir, e))?;
                store.workers.push(h);
            }
        }
        Ok(store)
    }

    /// Stores `value` under `key` (replacing any value there). Over budget, values are
    /// evicted by the policy: written to disk asynchronously, never lost. Waits while writes
    /// in flight hold more than a quarter of the budget (backpressure, counted in `stall_s`).
    ///
    /// Errors: a write error of an earlier eviction not reported yet (the value is then not
    /// inserted; the values whose write failed stay in memory).
    pub fn insert(&self, key: u64, value: T) -> Result<(), StoreError> {
        let bytes = value.memory_bytes() as u64;
        let sh = &*self.shared;
        let mut st = sh.lock();
        if let Some(e) = st.deferred.take() {
            return Err(e);
        }
        sh.forget(&mut st, key);
        st.tick += 1;
        let (version, tick) = (st.next_version, st.tick);
        st.next_version += 1;
        st.entries.insert(
            key,
            Entry {
                bytes,
                version,
                mem: Some(Arc::new(value)),
                on_disk: false,
                writing: false,
                evict_pending: false,
                loading: false,
                prefetched: false,
                touched: tick,
            },
        );
        st.resident += bytes;
        st.total += bytes;
        Shared::note_resident(&mut st);
        sh.rebalance(&mut st);
        if let Some(budget) = sh.budget() {
            let t0 = Instant::now();
            let mut waited = false;
            while st.pending_release > budget / 4 && !st.shutdown {
                waited = true;
                st = sh.wait(&sh.done, st);
            }
            if waited {
                st.stats.stall_s += t0.elapsed().as_secs_f64();
            }
        }
        Ok(())
    }

    /// The value of `key`: a memory hit; or waits for an in-flight prefetch; or reads it now
    /// (on this thread). Time spent waiting is stall time. Advances the access order and
    /// starts the prefetches it calls for.
    ///
    /// Errors: [`StoreError::UnknownKey`]; for a spilled value, [`StoreError::Io`],
    /// [`StoreError::Corrupt`] or [`StoreError::Load`].
    pub fn get(&self, key: u64) -> Result<Arc<T>, StoreError> {
        let sh = &*self.shared;
        let t0 = Instant::now();
        let mut guard = sh.lock();
        let mut waited = false;
        let version = loop {
            let st = &mut *guard;
            let e = st
                .entries
                .get_mut(&key)
                .ok_or(StoreError::UnknownKey(key))?;
            if let Some(v) = e.mem.clone() {
                let prefetched = e.prefetched;
                e.prefetched = false;
                // In use again: keep it (a finished write leaves it clean in memory).
                if e.evict_pending {
                    e.evict_pending = false;
                    st.pending_release -= e.bytes;
                }
                st.stats.gets += 1;
                st.stats.hits += 1;
                if prefetched {
                    st.stats.prefetch_hits += 1;
                }
                if waited {
                    st.stats.stall_s += t0.elapsed().as_secs_f64();
                }
                self.after_get(st, key);
                return Ok(v);
            }
            if !e.loading {
                // Demand read on this thread; other gets wait on `loading`.
                e.loading = true;
                break e.version;
            }
            waited = true;
            guard = sh.wait(&sh.done, guard);
        };
        drop(guard);
        let t1 = Instant::now();
        let result = sh.read_file(key, version);
        let read_s = t1.elapsed().as_secs_f64();
        let mut guard = sh.lock();
        let st = &mut *guard;
        st.stats.read_s += read_s;
        let current = st
            .entries
            .get(&key)
            .is_some_and(|e| e.version == version && e.loading);
        let out = match result {
            Ok((v, n)) => {
                st.stats.bytes_read += n;
                st.stats.gets += 1;
                st.stats.misses += 1;
                let v = Arc::new(v);
                if current {
                    let now = v.memory_bytes() as u64;
                    st.tick += 1;
                    if let Some(e) = st.entries.get_mut(&key) {
                        e.loading = false;
                        st.total = st.total - e.bytes + now;
                        e.bytes = now;
                        e.mem = Some(Arc::clone(&v));
                        e.touched = st.tick;
                    }
                    st.resident += now;
                    Shared::note_resident(st);
                } else {
                    // Removed or replaced while read: this get still sees the value it asked
                    // for; the stale file is ours to delete.
                    sh.remove_file(key, version);
                }
                Ok(v)
            }
            Err(err) => {
                if let Some(e) = st.entries.get_mut(&key) {
                    if e.version == version {
                        e.loading = false;
                    }
                }
                Err(err)
            }
        };
        st.stats.stall_s += t0.elapsed().as_secs_f64();
        if out.is_ok() && current {
            self.after_get(st, key);
        }
        drop(guard);
        sh.done.notify_all();
        out
    }

    fn after_get(&self, st: &mut State<T>, key: u64) {
        let sh = &*self.shared;
        st.tick += 1;
        let tick = st.tick;
        if let Some(e) = st.entries.get_mut(&key) {
            e.touched = tick;
        }
        st.order.consume(key);
        sh.rebalance(st);
        sh.prefetch_ahead(st);
    }

    /// Starts asynchronous reads of `keys`, in this order, for those on disk only. A prefetch
    /// only pushes out values needed later than it (see the crate docs); the first key that
    /// finds no room stops the rest. Unknown keys are skipped.
    pub fn prefetch(&self, keys: &[u64]) {
        let sh = &*self.shared;
        let mut st = sh.lock();
        for &k in keys {
            if !sh.try_prefetch(&mut st, k) {
                break;
            }
        }
    }

    /// Sets the known future order of gets (replacing any earlier one; an empty slice clears
    /// it and the store falls back to LRU). The store prefetches `prefetch_depth` keys ahead
    /// as gets advance along it and evicts the value whose next use is furthest away.
    pub fn set_access_order(&self, keys: &[u64]) {
        let sh = &*self.shared;
        let mut st = sh.lock();
        st.order = Order::new(keys);
        sh.prefetch_ahead(&mut st);
    }

    /// Removes `key` and returns its value (read back from disk if it was spilled), or
    /// `None` if the key was not there. Use [`Store::discard`] to drop a value without
    /// reading it.
    pub fn remove(&self, key: u64) -> Result<Option<Arc<T>>, StoreError> {
        let sh = &*self.shared;
        let mut st = sh.lock();
        loop {
            let Some(e) = st.entries.get(&key) else {
                return Ok(None);
            };
            if e.mem.is_some() || !e.loading {
                break;
            }
            // Let the read in flight finish: it brings the value in.
            st = sh.wait(&sh.done, st);
        }
        // A spilled value is read below: `loading` keeps `forget` from deleting its file.
        if let Some(e) = st.entries.get_mut(&key) {
            if e.mem.is_none() {
                e.loading = true;
            }
        }
        let Some(e) = sh.forget(&mut st, key) else {
            return Ok(None);
        };
        if let Some(v) = e.mem {
            return Ok(Some(v));
        }
        drop(st);
        // Spilled: read the file (forget left it since it is still needed), then delete it.
        let t0 = Instant::now();
        let result = sh.read_file(key, e.version);
        sh.remove_file(key, e.version);
        let mut st = sh.lock();
        st.stats.read_s += t0.elapsed().as_secs_f64();
        let (v, n) = result?;
        st.stats.bytes_read += n;
        Ok(Some(Arc::new(v)))
    }

    /// Drops `key` without reading it back; whether it was there.
    pub fn discard(&self, key: u64) -> bool {
        let sh = &*self.shared;
        let mut st = sh.lock();
        sh.forget(&mut st, key).is_some()
    }

    /// Whether `key` is in the store (in memory or on disk).
    pub fn contains(&self, key: u64) -> bool {
        self.shared.lock().entries.contains_key(&key)
    }

    /// Whether the store holds `key`'s value in memory now.
    pub fn is_resident(&self, key: u64) -> bool {
        self.shared
            .lock()
            .entries
            .get(&key)
            .is_some_and(|e| e.mem.is_some())
    }

    /// Number of keys.
    pub fn len(&self) -> usize {
        self.shared.lock().entries.len()
    }

    /// Whether the store has no key.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes the store holds in memory now (values handed out and evicted since are not
    /// counted; values being written are).
    pub fn resident_bytes(&self) -> u64 {
        self.shared.lock().resident
    }

    /// [`Spill::memory_bytes`] of everything stored.
    pub fn total_bytes(&self) -> u64 {
        self.shared.lock().total
    }

    /// When `on`, evict values no caller holds before any value a caller still holds (see
    /// the eviction policy in the crate docs): for values held long by their users.
    pub fn set_prefer_unheld(&self, on: bool) {
        self.shared
            .prefer_unheld
            .store(on, std::sync::atomic::Ordering::Relaxed);
    }

    /// The memory budget, bytes (`None`: unlimited).
    pub fn budget_bytes(&self) -> Option<u64> {
        self.shared.budget()
    }

    /// Changes the memory budget of a store made with one (a server sizing it to what the
    /// rest of the process leaves): values are evicted now until it holds. Errors: a budget
    /// of 0, or a store made without a budget (it has no spill directory).
    pub fn set_budget_bytes(&self, bytes: u64) -> Result<(), StoreError> {
        let sh = &*self.shared;
        if bytes == 0 || bytes == u64::MAX {
            return Err(StoreError::Config(format!(
                "budget {bytes}: give a positive number of bytes"
            )));
        }
        if sh.budget().is_none() {
            return Err(StoreError::Config(
                "this store was made without a budget (no spill directory): make it with one to change it"
                    .into(),
            ));
        }
        let mut st = sh.lock();
        sh.budget.store(bytes, std::sync::atomic::Ordering::Relaxed);
        sh.rebalance(&mut st);
        Ok(())
    }

    /// The spill directory (empty when the store has no budget, so never spills).
    pub fn dir(&self) -> &Path {
        &self.shared.dir
    }

    /// The spill file holding `key`'s current value, if it has been written.
    pub fn spill_path(&self, key: u64) -> Option<PathBuf> {
        let st = self.shared.lock();
        let e = st.entries.get(&key)?;
        e.on_disk.then(|| self.shared.path(key, e.version))
    }

    /// What the store did so far.
    pub fn stats(&self) -> StoreStats {
        self.shared.lock().stats.clone()
    }

    /// Zeroes the statistics (the peak restarts from the bytes resident now).
    pub fn reset_stats(&self) {
        let mut st = self.shared.lock();
        st.stats = StoreStats {
            peak_resident_bytes: st.resident,
            ..StoreStats::default()
        };
    }

    /// Waits until every write and prefetch in flight has completed; returns a write error
    /// not reported yet.
    pub fn flush(&self) -> Result<(), StoreError> {
        let sh = &*self.shared;
        let mut st = sh.lock();
        while st.in_flight > 0 && !st.shutdown {
            st = sh.wait(&sh.done, st);
        }
        match st.deferred.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

impl<T: Spill> Drop for Store<T> {
    fn drop(&mut self) {
        let sh = &*self.shared;
        {
            let mut st = sh.lock();
            st.shutdown = true;
            st.jobs.clear();
        }
        sh.work.notify_all();
        for h in self.workers.drain(..) {
            let _ = h.join();
        }
        if self.own_dir {
            let _ = fs::remove_dir_all(&sh.dir);
        } else if sh.budget().is_some() {
            let st = sh.lock();
            for (&k, e) in &st.entries {
                if e.on_disk {
                    sh.remove_file(k, e.version);
                }
            }
        }
    }
}

impl<T: Spill> std::fmt::Debug for Store<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let st = self.shared.lock();
        f.debug_struct("Store")
            .field("keys", &st.entries.len())
            .field("resident_bytes", &st.resident)
            .field("total_bytes", &st.total)
            .field("budget_bytes", &self.shared.budget())
            .field("dir", &self.shared.dir)
            .finish()
    }
}
