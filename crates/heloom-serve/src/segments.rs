//! Append-only segment files for the objects the server makes itself (job results).
//!
//! A result used to be a file of its own: created, written, synced, renamed, its directory
//! synced. On ext4 the creation alone (inode allocation) cost about half a millisecond of CPU
//! per result, as much as the hashing. Here results are records appended to the current
//! segment file (`DIR/segments/<id>.seg`, a new one past 64 MiB). The database row of a
//! result names its segment and offset.
//!
//! Each record is a 24-byte header (magic `HLSR`, format 1, the data's length, its XXH3-64)
//! and the data. A read checks all three, so a damaged record is reported, never served.
//!
//! **Direct I/O.** On Linux a segment is written with `O_DIRECT` where its file system takes
//! it: each record (header, data, zeros to the next 4 KiB) goes from a per-thread staging
//! buffer to the disk in one write, with no copy into the page cache. Under load that copy
//! (into fresh page-cache pages, while the HE lanes use the memory bandwidth) cost about
//! 0.2 ms per 200 KB result on a 2-core AMD Zen 4 VM, a third of storing a result. Reads go
//! through the page cache as before. Where direct I/O is refused (tmpfs, other systems), the
//! segment is written buffered.
//!
//! **No flush per record.** A record is written to the page cache only; the segment is
//! flushed when it is sealed (past 64 MiB) and when the server stops. While a segment may hold
//! unflushed records it has a marker file beside it (`<id>.open`, created with the segment,
//! removed after its flush). A power cut can then leave a row (made durable by a later flushed
//! commit) naming a record that never reached the disk, so the server, before it serves,
//! verifies every record named in a segment that still has its marker
//! (`State::verify_segments`): a torn record's row is deleted and its job queued again, to
//! compute the same bytes under the same id; then the segment is flushed and the marker
//! removed. `kill -9` loses nothing (the page cache survives it): the check then finds every
//! record sound. Compared with a flush per result, this saves the flush's CPU on every job
//! (about 4% of the server's throughput at N = 2^13 on 2 cores).
//!
//! **Fresh records stay in memory.** A result is usually read soon after it is written (its
//! client, or the front that placed the job on this node server, fetches it), and a record
//! written with direct I/O is not in the page cache: that read went to the disk, about a
//! sixth of a node server's request-handling CPU. The last records appended (up to
//! [`FRESH_BYTES`]) are kept in memory and read from there; a record leaves when newer ones
//! push it out, or when its object is deleted.
//!
//! A process creates its first segment when it first appends, after every segment there
//! (`heloom serve token create` and other readers of the directory create none). A restarted
//! server never appends to an old segment (its tail may hold a torn record that no row
//! names). Space is reclaimed when rows are deleted: a sealed segment that no row names is
//! removed, and one with less than a quarter of its bytes still named is compacted (its live
//! records copied to the current segment, flushed, then the file removed); at start, the
//! server removes the segments a crash left with no row.

use crate::{Result, ServeError};
use std::collections::{HashMap, HashSet, VecDeque};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use xxhash_rust::xxh3::xxh3_64;

/// A segment is sealed (a new one started) once it would grow past this.
pub(crate) const SEGMENT_BYTES: u64 = 64 << 20;

/// Bytes of the most recent records kept in memory for the reads that follow their writes.
pub(crate) const FRESH_BYTES: usize = 16 << 20;

/// The records appended last, by where they are, oldest first (see the module's docs).
#[derive(Default)]
struct Fresh {
    map: HashMap<(i64, i64), Arc<Vec<u8>>>,
    order: VecDeque<(i64, i64)>,
    bytes: usize,
}

impl Fresh {
    fn insert(&mut self, at: (i64, i64), data: Arc<Vec<u8>>, cap: usize) {
        if data.len() > cap {
            return;
        }
        self.bytes += data.len();
        if let Some(old) = self.map.insert(at, data) {
            self.bytes -= old.len();
        } else {
            self.order.push_back(at);
        }
        while self.bytes > cap {
            let Some(first) = self.order.pop_front() else {
                break;
            };
            if let Some(gone) = self.map.remove(&first) {
                self.bytes -= gone.len();
            }
        }
    }

    fn remove(&mut self, at: (i64, i64)) {
        if let Some(gone) = self.map.remove(&at) {
            self.bytes -= gone.len();
            self.order.retain(|&o| o != at);
        }
    }

    fn remove_segment(&mut self, id: i64) {
        let before = self.map.len();
        self.map.retain(|&(seg, _), _| seg != id);
        if self.map.len() != before {
            self.order.retain(|&(seg, _)| seg != id);
            self.bytes = self.map.values().map(|d| d.len()).sum();
        }
    }
}

/// Bytes of a record's header.
pub(crate) const RECORD_HEADER: u64 = 24;

const MAGIC: &[u8; 4] = b"HLSR";
const FORMAT: u32 = 1;

/// Where a record is: its segment, the offset of its header, the data's length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Location {
    pub segment: i64,
    pub offset: i64,
    pub len: u64,
}

struct Active {
    id: i64,
    /// Buffered handle: reads, flushes, and writes where direct I/O is not available.
    file: Arc<File>,
    /// The same file opened for direct I/O (Linux, where the file system takes it): records
    /// are written from this process's buffer to the disk, not copied into the page cache.
    direct: Option<File>,
    len: u64,
}

/// Alignment of direct-I/O writes (offset, length and buffer): the page size, which every
/// logical block size of common disks divides.
const DIRECT_ALIGN: usize = 4096;

/// Opens `path` a second time for direct I/O, or `None` where that is not supported (tmpfs,
/// some network file systems, other systems): those segments are written buffered.
#[cfg(target_os = "linux")]
fn open_direct(path: &Path) -> Option<File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)
        .ok()
}

#[cfg(not(target_os = "linux"))]
fn open_direct(_path: &Path) -> Option<File> {
    None
}

thread_local! {
    /// Each writer thread's staging buffer for direct writes: reused, so its pages stay
    /// mapped and warm.
    static STAGING: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Writes `records` (header and data each) from `off` (aligned) in one direct write, each
/// record zero-padded to [`DIRECT_ALIGN`]; returns each record's padded length.
fn write_direct(file: &File, off: u64, records: &[(&[u8], &[u8])]) -> std::io::Result<Vec<u64>> {
    let padded: Vec<usize> = records
        .iter()
        .map(|(h, d)| (h.len() + d.len()).div_ceil(DIRECT_ALIGN) * DIRECT_ALIGN)
        .collect();
    let total: usize = padded.iter().sum();
    STAGING.with(|cell| {
        let mut buf = cell.borrow_mut();
        if buf.len() < total + DIRECT_ALIGN {
            buf.resize(total + DIRECT_ALIGN, 0);
        }
        let start = buf.as_ptr().align_offset(DIRECT_ALIGN);
        let mut area = &mut buf[start..start + total];
        for ((header, data), &p) in records.iter().zip(&padded) {
            let (rec, rest) = area.split_at_mut(p);
            let len = header.len() + data.len();
            rec[..header.len()].copy_from_slice(header);
            rec[header.len()..len].copy_from_slice(data);
            rec[len..].fill(0);
            area = rest;
        }
        file.write_all_at(&buf[start..start + total], off)?;
        Ok(padded.iter().map(|&p| p as u64).collect())
    })
}

/// Writes `records` (header and data each) from `off` through the page cache, packed;
/// returns each record's length.
fn write_buffered(file: &File, off: u64, records: &[(&[u8], &[u8])]) -> std::io::Result<Vec<u64>> {
    let mut at = off;
    let mut sizes = Vec::with_capacity(records.len());
    for (header, data) in records {
        file.write_all_at(header, at)?;
        file.write_all_at(data, at + header.len() as u64)?;
        let n = (header.len() + data.len()) as u64;
        sizes.push(n);
        at += n;
    }
    Ok(sizes)
}

/// The segment files of one data directory.
pub(crate) struct Segments {
    dir: PathBuf,
    durable: bool,
    /// A segment is sealed once it would grow past this ([`SEGMENT_BYTES`]; smaller in tests).
    limit: u64,
    /// The segment appended to (`None` until this process first appends).
    active: Mutex<Option<Active>>,
    readers: Mutex<HashMap<i64, Arc<File>>>,
    /// One compaction at a time.
    pub(crate) compacting: Mutex<()>,
    /// Whether new segments are written with direct I/O where the file system takes it.
    try_direct: bool,
    /// Flushes of segment files so far.
    flushes: std::sync::atomic::AtomicU64,
    /// The records appended last, kept in memory ([`FRESH_BYTES`]).
    fresh: Mutex<Fresh>,
    fresh_cap: usize,
    /// Reads answered from [`Self::fresh`].
    fresh_hits: std::sync::atomic::AtomicU64,
    /// Writes of records (a group of records in one segment is one).
    writes: std::sync::atomic::AtomicU64,
    /// Records written whose rows are not committed yet ([`Written`]).
    unnamed: Mutex<Unnamed>,
}

/// Per segment, the records written whose rows are not committed yet: a reclaim counts a
/// segment's live records by its rows, so it must not remove (or compact) a segment that holds
/// such records. Its reclaim is put off until the last of them is named.
#[derive(Default)]
struct Unnamed {
    counts: HashMap<i64, usize>,
    put_off: HashSet<i64>,
    /// Segments whose put-off reclaim may run now ([`Segments::take_ready`]).
    ready: Vec<i64>,
}

/// Records just written ([`Segments::append`], [`Segments::append_fresh`]) and where they
/// are. Until it is dropped (after the rows naming them are committed, or the write is
/// abandoned), their segments are not reclaimed.
pub(crate) struct Written<'a> {
    segments: &'a Segments,
    locs: Vec<Location>,
}

impl std::ops::Deref for Written<'_> {
    type Target = [Location];
    fn deref(&self) -> &[Location] {
        &self.locs
    }
}

impl Drop for Written<'_> {
    fn drop(&mut self) {
        let mut u = self.segments.unnamed();
        for loc in &self.locs {
            if let Some(n) = u.counts.get_mut(&loc.segment) {
                *n -= 1;
                if *n == 0 {
                    u.counts.remove(&loc.segment);
                    if u.put_off.remove(&loc.segment) {
                        u.ready.push(loc.segment);
                    }
                }
            }
        }
    }
}

impl std::fmt::Debug for Segments {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Segments")
            .field("dir", &self.dir)
            .field("active", &self.active_id())
            .finish()
    }
}

fn io_err(path: &Path) -> impl Fn(std::io::Error) -> ServeError + '_ {
    move |source| ServeError::DataDir {
        path: path.to_path_buf(),
        source,
    }
}

impl Segments {
    /// The segments in `dir` (created when first appended to).
    pub(crate) fn open(dir: PathBuf, durable: bool) -> Self {
        Self::open_limited(dir, durable, SEGMENT_BYTES)
    }

    /// [`Self::open`] with segments sealed past `limit` bytes.
    pub(crate) fn open_limited(dir: PathBuf, durable: bool, limit: u64) -> Self {
        Self {
            dir,
            durable,
            limit,
            active: Mutex::new(None),
            readers: Mutex::new(HashMap::new()),
            compacting: Mutex::new(()),
            try_direct: true,
            flushes: std::sync::atomic::AtomicU64::new(0),
            fresh: Mutex::new(Fresh::default()),
            fresh_cap: FRESH_BYTES,
            fresh_hits: std::sync::atomic::AtomicU64::new(0),
            writes: std::sync::atomic::AtomicU64::new(0),
            unnamed: Mutex::new(Unnamed::default()),
        }
    }

    /// The same segments written through the page cache only (tests of that path).
    #[cfg(test)]
    pub(crate) fn buffered(mut self) -> Self {
        self.try_direct = false;
        self
    }

    /// Whether the active segment is written with direct I/O.
    #[cfg(test)]
    fn active_direct(&self) -> bool {
        self.active
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .is_some_and(|a| a.direct.is_some())
    }

    /// The ids of the segment files in the directory, in order.
    pub(crate) fn list(&self) -> Result<Vec<i64>> {
        self.ids_with_suffix(".seg")
    }

    /// The ids `<id><suffix>` of the files in the directory, in order.
    fn ids_with_suffix(&self, suffix: &str) -> Result<Vec<i64>> {
        let mut found = Vec::new();
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(found),
            Err(e) => return Err(io_err(&self.dir)(e)),
        };
        for e in entries.flatten() {
            if let Some(id) = e
                .file_name()
                .to_str()
                .and_then(|n| n.strip_suffix(suffix))
                .and_then(|n| n.parse::<i64>().ok())
            {
                found.push(id);
            }
        }
        found.sort_unstable();
        Ok(found)
    }

    /// The segment file `id`.
    pub(crate) fn path(&self, id: i64) -> PathBuf {
        self.dir.join(format!("{id}.seg"))
    }

    /// The segment records are appended to now (`None` before the first append).
    pub(crate) fn active_id(&self) -> Option<i64> {
        self.active
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map(|a| a.id)
    }

    /// Appends `data` as a record (to the page cache: see the module docs) and returns where
    /// it is, held unnamed until the [`Written`] is dropped.
    pub(crate) fn append(&self, data: &[u8]) -> Result<Written<'_>> {
        self.write_records(&[data])
    }

    /// Appends each of `data` as a record, in one write where they fit in the active segment,
    /// keeping them in memory for the reads that usually follow (without a copy). Returns
    /// where each is, held unnamed until the [`Written`] is dropped.
    pub(crate) fn append_fresh(&self, data: &[Arc<Vec<u8>>]) -> Result<Written<'_>> {
        let slices: Vec<&[u8]> = data.iter().map(|d| d.as_slice()).collect();
        let locs = self.write_records(&slices)?;
        let mut fresh = self.fresh.lock().unwrap_or_else(|p| p.into_inner());
        for (loc, d) in locs.iter().zip(data) {
            fresh.insert((loc.segment, loc.offset), Arc::clone(d), self.fresh_cap);
        }
        Ok(locs)
    }

    fn unnamed(&self) -> std::sync::MutexGuard<'_, Unnamed> {
        self.unnamed.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether segment `id` holds records whose rows are not committed yet; if so, its
    /// reclaim is put off until they are ([`Self::take_ready`] then lists it).
    pub(crate) fn put_off_if_unnamed(&self, id: i64) -> bool {
        let mut u = self.unnamed();
        if u.counts.contains_key(&id) {
            u.put_off.insert(id);
            true
        } else {
            false
        }
    }

    /// The segments whose put-off reclaim may run now (each listed once).
    pub(crate) fn take_ready(&self) -> Vec<i64> {
        std::mem::take(&mut self.unnamed().ready)
    }

    /// Drops the in-memory copy of the record at `loc` (its object was deleted).
    pub(crate) fn forget(&self, loc: Location) {
        self.fresh
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove((loc.segment, loc.offset));
    }

    /// Reads answered from memory so far.
    pub(crate) fn fresh_hits(&self) -> u64 {
        self.fresh_hits.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Writes of records so far (records appended together in one segment count once).
    pub(crate) fn writes(&self) -> u64 {
        self.writes.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Appends `data` as records: the records that fit in the active segment go in one write
    /// (one system call and one trip through the block layer for a group of results).
    fn write_records(&self, data: &[&[u8]]) -> Result<Written<'_>> {
        // Checksums outside the lock.
        let headers: Vec<[u8; RECORD_HEADER as usize]> = data.iter().map(|d| header(d)).collect();
        let mut written = Written {
            segments: self,
            locs: Vec::with_capacity(data.len()),
        };
        let mut sealed = Vec::new();
        let mut guard = self.active.lock().unwrap_or_else(|p| p.into_inner());
        let mut i = 0;
        while i < data.len() {
            let a = match guard.as_mut() {
                Some(a) => a,
                None => {
                    let after = self.list()?.last().copied().unwrap_or(0);
                    let (id, file) = self.create_after(after)?;
                    guard.insert(self.activate(id, file))
                }
            };
            let need = |k: usize| RECORD_HEADER + data[k].len() as u64;
            if a.len > 0 && a.len + need(i) > self.limit {
                let (id, file) = self.create_after(a.id)?;
                sealed.push(std::mem::replace(a, self.activate(id, file)));
            }
            // Records i..end fit in this segment (at least one: a record larger than the
            // limit gets a segment of its own).
            let mut end = i + 1;
            let mut grown = a.len + need(i).next_multiple_of(DIRECT_ALIGN as u64);
            while end < data.len() && grown + need(end) <= self.limit {
                grown += need(end).next_multiple_of(DIRECT_ALIGN as u64);
                end += 1;
            }
            let path = self.path(a.id);
            let records: Vec<(&[u8], &[u8])> =
                (i..end).map(|k| (headers[k].as_slice(), data[k])).collect();
            // A failed write does not advance the length: the next records overwrite it. A
            // direct write the file system refuses is done buffered, and the segment stays
            // buffered.
            let direct = match &a.direct {
                Some(d) => match write_direct(d, a.len, &records) {
                    Ok(sizes) => Some(sizes),
                    Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                        a.direct = None;
                        None
                    }
                    Err(e) => return Err(io_err(&path)(e)),
                },
                None => None,
            };
            let sizes = match direct {
                Some(sizes) => sizes,
                None => write_buffered(&a.file, a.len, &records).map_err(io_err(&path))?,
            };
            self.writes
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            // Counted before the active lock is let go, so the segment is never sealed with
            // records no reclaim knows of.
            *self.unnamed().counts.entry(a.id).or_default() += end - i;
            for (k, size) in (i..end).zip(sizes) {
                written.locs.push(Location {
                    segment: a.id,
                    offset: a.len as i64,
                    len: data[k].len() as u64,
                });
                a.len += size;
            }
            i = end;
        }
        drop(guard);
        for old in &sealed {
            self.seal(old);
        }
        Ok(written)
    }

    /// The new active segment `id`, with a direct-I/O handle where the file system takes one.
    fn activate(&self, id: i64, file: File) -> Active {
        Active {
            id,
            direct: if self.try_direct {
                open_direct(&self.path(id))
            } else {
                None
            },
            file: Arc::new(file),
            len: 0,
        }
    }

    /// Flushes a sealed segment and removes its marker, outside the lock (the other writers
    /// go on meanwhile). A failed flush keeps the marker: the next start checks the segment.
    fn seal(&self, old: &Active) {
        if !self.durable {
            return;
        }
        self.count_flush();
        match old.file.sync_data() {
            Ok(()) => {
                let _ = std::fs::remove_file(self.marker(old.id));
            }
            Err(e) => eprintln!(
                "heloom serve: flushing {}: {e}; it is checked at the next start",
                self.path(old.id).display()
            ),
        }
    }

    /// Flushes the active segment (its records are then on disk; it stays open).
    pub(crate) fn flush_active(&self) -> Result<()> {
        let active = self.active.lock().unwrap_or_else(|p| p.into_inner());
        match active.as_ref() {
            Some(a) if self.durable => {
                self.count_flush();
                a.file.sync_data().map_err(io_err(&self.path(a.id)))
            }
            _ => Ok(()),
        }
    }

    /// The marker of segment `id`: present while it may hold unflushed records.
    fn marker(&self, id: i64) -> PathBuf {
        self.dir.join(format!("{id}.open"))
    }

    /// The segments, other than this process's, that may hold unflushed records (their
    /// writer stopped without flushing them: a crash).
    pub(crate) fn unsettled(&self) -> Result<Vec<i64>> {
        let active = self.active_id();
        let mut ids = self.ids_with_suffix(".open")?;
        ids.retain(|&id| Some(id) != active);
        Ok(ids)
    }

    fn count_flush(&self) {
        self.flushes
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// Flushes of segment files so far (sealing, settling, stopping, and deleting a job whose
    /// result was not flushed yet).
    pub(crate) fn flushes(&self) -> u64 {
        self.flushes.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Makes the records of segment `id` durable now if they may not be yet (its marker is
    /// there): before the last thing that could redo a record is deleted (its job), since a
    /// power cut would otherwise tear a record that nothing can compute again. The marker
    /// stays: sealing or the next start removes it.
    pub(crate) fn make_durable(&self, id: i64) -> Result<()> {
        if !self.durable || !self.marker(id).exists() {
            return Ok(());
        }
        self.sync(id)
    }

    /// Flushes segment `id` (its records checked) and removes its marker.
    pub(crate) fn settle(&self, id: i64) -> Result<()> {
        self.sync(id)?;
        let _ = std::fs::remove_file(self.marker(id));
        Ok(())
    }

    /// Flushes segment `id`'s file; one compacted away meanwhile needs none (its records
    /// were flushed where they went).
    fn sync(&self, id: i64) -> Result<()> {
        match File::open(self.path(id)) {
            Ok(f) => {
                self.count_flush();
                f.sync_data().map_err(io_err(&self.path(id)))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(io_err(&self.path(id))(e)),
        }
    }

    fn reader(&self, id: i64) -> std::io::Result<Arc<File>> {
        {
            let a = self.active.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(a) = a.as_ref().filter(|a| a.id == id) {
                return Ok(Arc::clone(&a.file));
            }
        }
        let mut readers = self.readers.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(f) = readers.get(&id) {
            return Ok(Arc::clone(f));
        }
        let f = Arc::new(File::open(self.path(id))?);
        // Handles of sealed segments: a few are enough (reads mostly follow writes).
        if readers.len() >= 64 {
            readers.clear();
        }
        readers.insert(id, Arc::clone(&f));
        Ok(f)
    }

    /// Reads the record at `loc`, checking its header and checksum. `Ok(None)`: the segment
    /// file is gone (compacted away meanwhile: look the object up again).
    pub(crate) fn read(&self, loc: Location) -> Result<Option<Vec<u8>>> {
        let fresh = self
            .fresh
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .map
            .get(&(loc.segment, loc.offset))
            .cloned();
        if let Some(d) = fresh.filter(|d| d.len() as u64 == loc.len) {
            self.fresh_hits
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            return Ok(Some(d.as_ref().clone()));
        }
        let path = self.path(loc.segment);
        let damaged = |m: String| crate::objects::damaged(&path, m);
        let file = match self.reader(loc.segment) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(damaged(e.to_string())),
        };
        let off = u64::try_from(loc.offset).map_err(|_| damaged("negative offset".into()))?;
        let mut head = [0u8; RECORD_HEADER as usize];
        file.read_exact_at(&mut head, off)
            .map_err(|e| damaged(format!("record at {off}: {e}")))?;
        let len = check_header(&head).map_err(|m| damaged(format!("record at {off}: {m}")))?;
        if len != loc.len {
            return Err(damaged(format!(
                "record at {off} holds {len} bytes, {} stored",
                loc.len
            )));
        }
        let n = usize::try_from(len).map_err(|_| damaged("record too large".into()))?;
        let mut data = vec![0u8; n];
        file.read_exact_at(&mut data, off + RECORD_HEADER)
            .map_err(|e| damaged(format!("record at {off}: {e}")))?;
        let mut sum = [0u8; 8];
        sum.copy_from_slice(&head[16..24]);
        if xxh3_64(&data) != u64::from_le_bytes(sum) {
            return Err(damaged(format!("record at {off}: checksum mismatch")));
        }
        Ok(Some(data))
    }

    /// Removes sealed segment `id` (never the active one).
    pub(crate) fn remove(&self, id: i64) {
        if Some(id) == self.active_id() {
            return;
        }
        self.readers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&id);
        self.fresh
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove_segment(id);
        let _ = std::fs::remove_file(self.path(id));
        let _ = std::fs::remove_file(self.marker(id));
    }

    /// Creates the first free segment after `after` (never one that exists: another process
    /// may be reading it).
    fn create_after(&self, after: i64) -> Result<(i64, File)> {
        std::fs::create_dir_all(&self.dir).map_err(io_err(&self.dir))?;
        let mut id = after + 1;
        loop {
            let path = self.path(id);
            match std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .open(&path)
            {
                Ok(file) => {
                    if self.durable {
                        // Its marker (a crash before it leaves a segment with no record), and
                        // both names on disk before a row points into the segment.
                        File::create(self.marker(id)).map_err(io_err(&self.marker(id)))?;
                        File::open(&self.dir)
                            .and_then(|d| d.sync_all())
                            .map_err(io_err(&self.dir))?;
                    }
                    return Ok((id, file));
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => id += 1,
                Err(e) => return Err(io_err(&path)(e)),
            }
        }
    }

    /// The size of segment `id` on disk (0 when it is gone).
    pub(crate) fn size(&self, id: i64) -> u64 {
        std::fs::metadata(self.path(id)).map_or(0, |m| m.len())
    }
}

impl Drop for Segments {
    /// A clean stop flushes the active segment and removes its marker: nothing to check at
    /// the next start.
    fn drop(&mut self) {
        let active = self.active.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(a) = active.as_ref().filter(|_| self.durable) {
            if a.file.sync_data().is_ok() {
                let _ = std::fs::remove_file(self.marker(a.id));
            }
        }
    }
}

fn header(data: &[u8]) -> [u8; RECORD_HEADER as usize] {
    let mut h = [0u8; RECORD_HEADER as usize];
    h[..4].copy_from_slice(MAGIC);
    h[4..8].copy_from_slice(&FORMAT.to_le_bytes());
    h[8..16].copy_from_slice(&(data.len() as u64).to_le_bytes());
    h[16..24].copy_from_slice(&xxh3_64(data).to_le_bytes());
    h
}

/// The data length a record header declares, or what is wrong with it.
fn check_header(h: &[u8; RECORD_HEADER as usize]) -> std::result::Result<u64, String> {
    if &h[..4] != MAGIC {
        return Err("not a record header".into());
    }
    let mut w = [0u8; 4];
    w.copy_from_slice(&h[4..8]);
    let format = u32::from_le_bytes(w);
    if format != FORMAT {
        return Err(format!(
            "record format {format}, this heloom reads {FORMAT}"
        ));
    }
    let mut l = [0u8; 8];
    l.copy_from_slice(&h[8..16]);
    Ok(u64::from_le_bytes(l))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_read_back_and_damage_is_reported() {
        // Both write paths: direct I/O (where this file system takes it) and the page cache.
        records_read_back_and_damage_is_reported_with(true);
        records_read_back_and_damage_is_reported_with(false);
    }

    fn records_read_back_and_damage_is_reported_with(direct: bool) {
        let dir = tempfile::tempdir().expect("test step");
        let mut s = Segments::open(dir.path().join("segments"), true);
        if !direct {
            s = s.buffered();
        }
        assert!(s.list().expect("test step").is_empty());
        assert_eq!(s.active_id(), None);
        let a = s.append(b"first record").expect("test step")[0];
        let b = s.append(&[7u8; 1000]).expect("test step")[0];
        assert_eq!(a.offset, 0);
        // Direct writes are whole pages: the next record starts on the next one.
        let second = if s.active_direct() {
            assert!(direct);
            DIRECT_ALIGN as i64
        } else {
            (RECORD_HEADER + 12) as i64
        };
        assert_eq!(b.offset, second);
        assert_eq!(
            s.read(a).expect("test step").expect("test step"),
            b"first record"
        );
        assert_eq!(
            s.read(b).expect("test step").expect("test step"),
            vec![7u8; 1000]
        );
        // A wrong length in the row, a flipped data byte, a flipped header byte: damaged.
        let wrong = Location { len: 11, ..a };
        assert!(matches!(s.read(wrong), Err(ServeError::Damaged { .. })));
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(s.path(b.segment))
            .expect("test step");
        f.write_all_at(&[8], b.offset as u64 + RECORD_HEADER + 500)
            .expect("test step");
        let e = s.read(b).expect_err("an error").to_string();
        assert!(e.contains("checksum mismatch"), "{e}");
        f.write_all_at(b"X", 0).expect("test step");
        let e = s.read(a).expect_err("an error").to_string();
        assert!(e.contains("not a record header"), "{e}");
        // A restart starts a new segment after the old one; old records still read.
        drop(s);
        let mut s2 = Segments::open(dir.path().join("segments"), true);
        if !direct {
            s2 = s2.buffered();
        }
        assert_eq!(s2.list().expect("test step"), vec![a.segment]);
        assert_eq!(s2.active_id(), None);
        let c = s2.append(b"after restart").expect("test step")[0];
        assert_eq!((c.segment, c.offset), (a.segment + 1, 0));
        assert_eq!(
            s2.read(c).expect("test step").expect("test step"),
            b"after restart"
        );
        // A removed sealed segment reads as gone (compacted away), the active one stays.
        s2.remove(a.segment);
        assert_eq!(s2.read(b).expect("test step"), None);
        s2.remove(c.segment);
        assert!(s2.read(c).expect("test step").is_some());
    }

    #[test]
    fn concurrent_appends_roll_over_and_markers_follow_the_flushes() {
        let dir = tempfile::tempdir().expect("test step");
        let limit = 64 << 10;
        let s = Segments::open_limited(dir.path().to_path_buf(), true, limit);
        let s = Arc::new(s);
        // Records of 9 KiB: a segment of 64 KiB takes 6, so 24 records need at least 4.
        let locs: Vec<(u8, Location)> = std::thread::scope(|sc| {
            let hs: Vec<_> = (0..4u8)
                .map(|t| {
                    let s = Arc::clone(&s);
                    sc.spawn(move || {
                        (0..6u8)
                            .map(|i| {
                                let v = t * 16 + i;
                                (v, s.append(&vec![v; 9 << 10]).expect("test step")[0])
                            })
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            hs.into_iter()
                .flat_map(|h| h.join().expect("test step"))
                .collect()
        });
        let segs: std::collections::BTreeSet<i64> = locs.iter().map(|l| l.1.segment).collect();
        assert!(segs.len() >= 4, "{segs:?}");
        for (v, l) in &locs {
            assert!(l.offset as u64 + RECORD_HEADER + l.len <= limit);
            assert_eq!(
                s.read(*l).expect("test step").expect("test step"),
                vec![*v; 9 << 10]
            );
        }
        // Only the active segment has its marker (the sealed ones were flushed); dropping
        // the store (a clean stop) flushes it and removes the marker.
        let active = s.active_id().expect("active");
        assert_eq!(s.unsettled().expect("test step"), Vec::<i64>::new());
        let markers = |d: &Path| -> Vec<String> {
            let mut m: Vec<String> = std::fs::read_dir(d)
                .expect("test step")
                .filter_map(|e| e.ok()?.file_name().into_string().ok())
                .filter(|n| n.ends_with(".open"))
                .collect();
            m.sort();
            m
        };
        assert_eq!(markers(dir.path()), vec![format!("{active}.open")]);
        let s = Arc::try_unwrap(s).map_err(|_| "shared").expect("test step");
        drop(s);
        assert!(markers(dir.path()).is_empty());
        // A crashed writer (no drop) leaves its marker: the next process sees it unsettled.
        let crashed = Segments::open_limited(dir.path().to_path_buf(), true, limit);
        drop(crashed.append(b"unflushed").expect("test step"));
        let id = crashed.active_id().expect("active");
        std::mem::forget(crashed);
        let next = Segments::open_limited(dir.path().to_path_buf(), true, limit);
        assert_eq!(next.unsettled().expect("test step"), vec![id]);
        next.settle(id).expect("test step");
        assert!(next.unsettled().expect("test step").is_empty());
    }

    #[test]
    fn fresh_records_are_read_from_memory_until_pushed_out_or_forgotten() {
        let dir = tempfile::tempdir().expect("test step");
        let mut s = Segments::open_limited(dir.path().to_path_buf(), true, 64 << 10);
        // Room for two records of 10 KB in memory.
        s.fresh_cap = 20_000;
        let rec = |b: u8| Arc::new(vec![b; 10_000]);
        let one = |s: &Segments, d: Arc<Vec<u8>>| s.append_fresh(&[d]).expect("test step")[0];
        let a = one(&s, rec(1));
        let b = one(&s, rec(2));
        let read = |l: Location| s.read(l).expect("test step").expect("test step");
        assert_eq!(read(a), vec![1u8; 10_000]);
        assert_eq!(read(b), vec![2u8; 10_000]);
        assert_eq!(s.fresh_hits(), 2);
        // A third pushes the first out: it comes from the disk, as written.
        let c = one(&s, rec(3));
        assert_eq!(read(a), vec![1u8; 10_000]);
        assert_eq!(s.fresh_hits(), 2);
        assert_eq!(read(c), vec![3u8; 10_000]);
        assert_eq!(s.fresh_hits(), 3);
        // A forgotten one (its object deleted) too; the disk copy is what a read checks then:
        // damage there is reported.
        s.forget(b);
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(s.path(b.segment))
            .expect("test step");
        f.write_all_at(&[9], b.offset as u64 + RECORD_HEADER + 5)
            .expect("test step");
        let e = s.read(b).expect_err("an error").to_string();
        assert!(e.contains("checksum mismatch"), "{e}");
        assert_eq!(s.fresh_hits(), 3);
        // A record larger than the room is not kept; one with a different length in its row
        // is not answered from memory.
        let big = one(&s, Arc::new(vec![4u8; 30_000]));
        assert_eq!(read(big), vec![4u8; 30_000]);
        assert_eq!(s.fresh_hits(), 3);
        let wrong = Location { len: 9_999, ..c };
        assert!(matches!(s.read(wrong), Err(ServeError::Damaged { .. })));
        // A removed segment's records leave memory with it.
        let first = a.segment;
        let d = one(&s, rec(5));
        assert!(d.segment > first, "the 64 KiB segment rolled over");
        s.remove(first);
        assert_eq!(s.read(c).expect("test step"), None);
        let fresh = s.fresh.lock().expect("test step");
        assert!(fresh.map.keys().all(|&(seg, _)| seg != first));
        assert_eq!(
            fresh.bytes,
            fresh.map.values().map(|v| v.len()).sum::<usize>()
        );
    }

    #[test]
    fn a_group_of_records_is_written_at_once_and_split_where_a_segment_fills() {
        for direct in [true, false] {
            let dir = tempfile::tempdir().expect("test step");
            let mut s = Segments::open_limited(dir.path().to_path_buf(), true, 64 << 10);
            if !direct {
                s = s.buffered();
            }
            // Seven records of 15 KB: at most four fit in a 64 KiB segment (direct writes pad
            // each to 16 KiB), so the group spans segments.
            let data: Vec<Arc<Vec<u8>>> = (0..7u8)
                .map(|b| Arc::new((0..15_000).map(|i| b ^ (i % 251) as u8).collect()))
                .collect();
            let locs = s.append_fresh(&data).expect("test step").to_vec();
            assert_eq!(locs.len(), 7);
            let segments: std::collections::BTreeSet<i64> =
                locs.iter().map(|l| l.segment).collect();
            assert_eq!(segments.len(), 2, "direct {direct}: {:?}", &locs[..]);
            for w in locs.windows(2) {
                if w[0].segment == w[1].segment {
                    assert!(w[1].offset >= w[0].offset + RECORD_HEADER as i64 + 15_000);
                }
            }
            // Read back from the disk (out of memory), each record whole and checked.
            s.fresh_cap = 0;
            s.fresh.lock().expect("test step").map.clear();
            for (l, d) in locs.iter().zip(&data) {
                assert_eq!(s.read(*l).expect("test step").as_ref(), Some(&**d));
            }
            // After a restart, a new segment follows, and reads still find every record.
            let again = Segments::open_limited(dir.path().to_path_buf(), true, 64 << 10);
            let next = again.append(b"later").expect("test step")[0];
            assert!(next.segment > *segments.last().expect("test step"));
            for (l, d) in locs.iter().zip(&data) {
                assert_eq!(again.read(*l).expect("test step").as_ref(), Some(&**d));
            }
        }
    }
}
