//! Tenants' stored objects: evaluation keys, ciphertexts, task graphs and job results.
//!
//! An object is the bytes a client uploaded (or a job produced), content-addressed by their
//! SHA-256: uploading the same bytes twice stores them once. Each lives in its own file,
//! `DIR/objects/<tenant>/<sha256>`, written to a temporary file first, synced, then renamed
//! into place and the directory synced, so that a crash leaves either the whole object or
//! none. Its row in the `objects` table (kind, size, parameter fingerprint, a JSON summary) is
//! committed after the rename: a row always names a complete file. The heloom format's
//! checksum (XXH3 over every byte) is checked whenever a file is loaded, so a damaged file is
//! reported, never used.
//!
//! Uploads are validated before they are stored: the kind comes from the header, a secret key
//! is refused, parameters below 128-bit security are refused unless the server allows them,
//! evaluation keys and ciphertexts are parsed in full against their parameters. An upload is
//! streamed to disk as it arrives (never buffered in memory as it arrives) and parsed from that
//! file once it is complete.

use crate::segments::{Location, RECORD_HEADER};
use crate::{hex, unix_now, Result, ServeError, State};
use heloom_ckks::serialize::{peek_header, ObjectKind as Wire, CHECKSUM_LEN, HEADER_LEN};
use heloom_ckks::{Ciphertext, CkksParameters, Context, EvaluationKeys, SecurityLevel};
use heloom_runtime::TaskGraph;
use rusqlite::{params, OptionalExtension};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// What a stored object is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ObjectKind {
    /// CKKS parameters followed by evaluation keys made for them (one upload).
    Keys,
    /// One ciphertext.
    Ciphertext,
    /// A task graph (`heloom_runtime::TaskGraph`).
    Graph,
    /// A job's outputs: ciphertexts, one after another.
    Result,
}

impl ObjectKind {
    /// The name stored and shown by the API.
    pub fn name(self) -> &'static str {
        match self {
            ObjectKind::Keys => "keys",
            ObjectKind::Ciphertext => "ciphertext",
            ObjectKind::Graph => "graph",
            ObjectKind::Result => "result",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        [Self::Keys, Self::Ciphertext, Self::Graph, Self::Result]
            .into_iter()
            .find(|k| k.name() == s)
    }
}

/// A stored object as the API describes it.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ObjectInfo {
    /// SHA-256 of its bytes, 64 hex digits.
    pub id: String,
    /// What it is.
    pub kind: ObjectKind,
    /// Its size in bytes.
    pub bytes: u64,
    /// Fingerprint of the CKKS parameters it was made for (16 hex digits; empty for graphs).
    pub parameters: String,
    /// A summary of what it holds (ring degree and keys; level, scale and slots; task count).
    pub info: serde_json::Value,
    /// Unix time it was stored.
    pub created_unix: i64,
}

/// Largest ring degree a key set may use.
pub const MAX_RING: usize = 1 << 17;
/// Most ciphertext and special primes together a key set may use.
pub const MAX_PRIMES: usize = 128;
/// Most contexts kept at once (each holds NTT tables); beyond it the cache starts over.
const MAX_CONTEXTS: usize = 64;

/// Contexts by parameter fingerprint: building one (NTT tables for every prime) costs
/// milliseconds, and every key set and ciphertext for the same parameters shares it.
#[derive(Default)]
pub struct Contexts {
    map: Mutex<HashMap<u64, Arc<Context<u64>>>>,
}

impl std::fmt::Debug for Contexts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Contexts")
    }
}

impl Contexts {
    /// The context for `params`, built once.
    pub fn get(&self, params: CkksParameters) -> Result<Arc<Context<u64>>> {
        let fp = params.fingerprint();
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(c) = map.get(&fp) {
            return Ok(Arc::clone(c));
        }
        let ctx = Context::<u64>::new(params).map_err(invalid)?;
        if map.len() >= MAX_CONTEXTS {
            // Key sets keep their own Arc; only the sharing is lost.
            map.clear();
        }
        map.insert(fp, Arc::clone(&ctx));
        Ok(ctx)
    }

    /// The context already built for parameter fingerprint `fp`.
    pub fn by_fingerprint(&self, fp: u64) -> Option<Arc<Context<u64>>> {
        let map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        map.get(&fp).cloned()
    }
}

fn invalid(e: impl std::fmt::Display) -> ServeError {
    ServeError::InvalidRequest(e.to_string())
}

/// Length of the heloom object at the start of `bytes` (header, payload, checksum).
pub fn object_len(bytes: &[u8]) -> Result<usize> {
    if bytes.len() < HEADER_LEN {
        return Err(invalid(format!(
            "truncated upload: {} bytes, a heloom object header alone has {HEADER_LEN}",
            bytes.len()
        )));
    }
    let mut len = [0u8; 8];
    len.copy_from_slice(&bytes[24..32]);
    let payload = u64::from_le_bytes(len);
    let total = (HEADER_LEN as u64)
        .checked_add(payload)
        .and_then(|t| t.checked_add(CHECKSUM_LEN as u64))
        .filter(|&t| t <= bytes.len() as u64)
        .ok_or_else(|| {
            invalid(format!(
                "truncated upload: the header declares a {payload}-byte payload, {} bytes arrived",
                bytes.len()
            ))
        })?;
    Ok(total as usize)
}

/// A key set as loaded: its context and evaluation keys.
#[derive(Clone)]
pub struct KeySet {
    /// The context of the keys' parameters.
    pub ctx: Arc<Context<u64>>,
    /// The evaluation keys.
    pub keys: Arc<EvaluationKeys<u64>>,
}

/// Parses a key upload: parameters, then evaluation keys for them.
pub fn parse_keys(bytes: &[u8], contexts: &Contexts, allow_insecure: bool) -> Result<KeySet> {
    let n1 = object_len(bytes)?;
    let params = CkksParameters::from_bytes(&bytes[..n1]).map_err(invalid)?;
    // A context costs memory in proportion to N times the primes: refuse what no real key
    // set needs before building one (a tenant could otherwise make the server allocate
    // without bound).
    let primes = params.qp_moduli().count();
    if params.n() > MAX_RING || primes > MAX_PRIMES {
        return Err(invalid(format!(
            "parameters with N = {} and {primes} primes exceed this server's limits (N <= {MAX_RING}, \
             at most {MAX_PRIMES} primes)",
            params.n()
        )));
    }
    if params.word_bits() != 64 {
        return Err(invalid(format!(
            "the parameters use {}-bit words; this server runs 64-bit words: make the keys with \
             word_bits(64)",
            params.word_bits()
        )));
    }
    if params.security() == SecurityLevel::None && !allow_insecure {
        return Err(invalid(
            "the parameters are below 128-bit security (HE standard tables); use secure \
             parameters, or start the server with --allow-insecure for tests"
                .to_string(),
        ));
    }
    if n1 == bytes.len() {
        return Err(invalid(
            "the upload holds parameters only: send the parameters followed by the evaluation \
             keys made for them"
                .to_string(),
        ));
    }
    let ctx = contexts.get(params)?;
    let keys = EvaluationKeys::<u64>::from_bytes(&ctx, &bytes[n1..]).map_err(invalid)?;
    Ok(KeySet {
        ctx,
        keys: Arc::new(keys),
    })
}

/// Parses a sequence of ciphertexts for `ctx` (a result object, or one uploaded ciphertext).
pub fn parse_ciphertexts(bytes: &[u8], ctx: &Context<u64>) -> Result<Vec<Ciphertext<u64>>> {
    let mut out = Vec::new();
    let mut rest = bytes;
    while !rest.is_empty() {
        let n = object_len(rest)?;
        out.push(Ciphertext::<u64>::from_bytes(ctx, &rest[..n]).map_err(invalid)?);
        rest = &rest[n..];
    }
    Ok(out)
}

/// What validation of an upload found.
struct Checked {
    kind: ObjectKind,
    parameters: String,
    info: serde_json::Value,
    /// An uploaded ciphertext as parsed by the validation (the worker keeps it for the jobs
    /// that use it, instead of parsing the file again).
    ciphertext: Option<Ciphertext<u64>>,
}

impl State {
    fn objects_dir(&self, tenant: &str) -> PathBuf {
        self.dir().join("objects").join(tenant)
    }

    /// Where the tenant's object `id` is stored.
    pub fn object_path(&self, tenant: &str, id: &str) -> PathBuf {
        self.objects_dir(tenant).join(id)
    }

    /// Removes uploads a previous process left unfinished (called at start).
    pub fn clean_incoming(&self) {
        let dir = self.dir().join("objects").join(".incoming");
        if let Ok(entries) = std::fs::read_dir(&dir) {
            for e in entries.flatten() {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }

    /// Flushes of result segment files so far: at sealing, at a clean stop, and when a job
    /// whose result may not be on disk yet is deleted (nothing could compute it again).
    pub fn segment_flushes(&self) -> u64 {
        self.segments.flushes()
    }

    /// Result reads answered from memory (the most recent results stay there after their
    /// write, for the fetch that usually follows).
    pub fn result_memory_reads(&self) -> u64 {
        self.segments.fresh_hits()
    }

    /// Writes of result records so far: results stored together ([`Self::store_results`])
    /// share one.
    pub fn result_writes(&self) -> u64 {
        self.segments.writes()
    }

    /// Checks the results a crashed server may not have flushed (the segments with a marker:
    /// see `segments.rs`): every record a row names in them is read and checked; a torn one's
    /// row is deleted and the jobs it ended are queued again (they compute the same bytes
    /// under the same id); then the segment is flushed and its marker removed. For the server
    /// at start, before it serves. Returns the jobs queued again.
    pub fn verify_segments(&self) -> Result<usize> {
        let mut requeued = 0;
        for id in self.segments.unsettled()? {
            let mut torn = Vec::new();
            for (tenant, oid, loc) in self.segment_rows(id)? {
                if !matches!(self.segments.read(loc), Ok(Some(_))) {
                    torn.push((tenant, oid));
                }
            }
            if !torn.is_empty() {
                requeued += self.with_conn(|c| {
                    let tx = crate::Tx::begin(c)?;
                    let mut n = 0;
                    for (tenant, oid) in &torn {
                        tx.prepare_cached("DELETE FROM objects WHERE tenant = ?1 AND id = ?2")?
                            .execute(params![tenant, oid])?;
                        n += tx
                            .prepare_cached(
                                "UPDATE jobs SET state = 'accepted', result_ref = NULL,
                                     started_ms = NULL, finished_ms = NULL
                                 WHERE tenant = ?1 AND result_ref = ?2 AND state = 'done'",
                            )?
                            .execute(params![tenant, oid])?;
                    }
                    tx.commit()?;
                    // Summed again when next asked.
                    self.usage().clear();
                    Ok(n)
                })?;
                eprintln!(
                    "heloom serve: segment {id}: {} results were lost in a crash before they \
                     reached the disk; their jobs run again",
                    torn.len()
                );
            }
            self.segments.settle(id)?;
        }
        Ok(requeued)
    }

    /// Removes the result segments no row names (a crash between a record and its row) and
    /// compacts the sparse ones. For the server at start, the only process writing the
    /// directory.
    pub fn reclaim_segments(&self) -> Result<()> {
        for id in self.segments.list()? {
            self.reclaim_segment(id)?;
        }
        Ok(())
    }

    /// A new temporary file for an upload (in the data directory, so the final rename never
    /// crosses file systems).
    pub fn upload_file(&self) -> Result<(PathBuf, std::fs::File)> {
        let dir = self.dir().join("objects").join(".incoming");
        let mut name = [0u8; 16];
        rand::RngCore::try_fill_bytes(&mut rand::rngs::OsRng, &mut name)
            .map_err(|e| ServeError::Random(e.to_string()))?;
        let path = dir.join(hex(&name));
        // The directory exists after the first upload: create it only when it is missing.
        let file = std::fs::File::create(&path).or_else(|e| {
            if e.kind() != std::io::ErrorKind::NotFound {
                return Err(e);
            }
            std::fs::create_dir_all(&dir)?;
            std::fs::File::create(&path)
        });
        let file = file.map_err(|source| ServeError::DataDir {
            path: path.clone(),
            source,
        })?;
        Ok((path, file))
    }

    /// Validates the upload in `tmp` (its SHA-256 `sha`) for `tenant` and stores it: the
    /// tenant's object (new or already there, `false`), and an uploaded ciphertext as its
    /// validation parsed it (the worker keeps it for jobs). The temporary file is consumed.
    pub fn store_upload(
        &self,
        tenant: &str,
        tmp: &Path,
        sha: &[u8; 32],
        contexts: &Contexts,
        allow_insecure: bool,
    ) -> Result<(ObjectInfo, bool, Option<Ciphertext<u64>>)> {
        let id = hex(sha);
        let checked = (|| {
            let file = std::fs::File::open(tmp).map_err(|source| ServeError::DataDir {
                path: tmp.to_path_buf(),
                source,
            })?;
            let len = file.metadata().map(|m| m.len()).unwrap_or(0);
            if len == 0 {
                return Err(invalid("empty upload: send a heloom object".to_string()));
            }
            drop(file);
            let data = read_file(tmp)?;
            self.check_upload(tenant, &data, contexts, allow_insecure)
        })();
        let mut checked = match checked {
            Ok(c) => c,
            Err(e) => {
                let _ = std::fs::remove_file(tmp);
                return Err(e);
            }
        };
        let bytes = std::fs::metadata(tmp).map(|m| m.len()).unwrap_or(0);
        let ct = checked.ciphertext.take();
        self.commit_object(tenant, &id, tmp, bytes, checked)
            .map(|(info, new)| (info, new, ct))
    }

    fn check_upload(
        &self,
        tenant: &str,
        data: &[u8],
        contexts: &Contexts,
        allow_insecure: bool,
    ) -> Result<Checked> {
        let first = object_len(data).unwrap_or(data.len());
        let header = peek_header(&data[..first]).map_err(invalid)?;
        match header.kind {
            Wire::SecretKey => Err(invalid(
                "this is a secret key: the server never takes secret keys; keep it on the client \
                 and upload evaluation keys"
                    .to_string(),
            )),
            Wire::Parameters => {
                let ks = parse_keys(data, contexts, allow_insecure)?;
                let p = ks.ctx.params();
                let mut steps: Vec<u64> = ks.keys.galois_elements();
                steps.sort_unstable();
                Ok(Checked {
                    kind: ObjectKind::Keys,
                    parameters: format!("{:016x}", p.fingerprint()),
                    info: serde_json::json!({
                        "ring_degree": p.n(),
                        "max_level": p.max_level(),
                        "relinearization": ks.keys.has_relin(),
                        "galois_elements": steps,
                        "memory_bytes": ks.keys.memory_bytes(),
                    }),
                    ciphertext: None,
                })
            }
            Wire::Ciphertext => {
                let fp = header.params_fingerprint;
                let ctx = self.context_for(tenant, fp, contexts, allow_insecure)?;
                let mut cts = parse_ciphertexts(data, &ctx)?;
                if cts.len() != 1 {
                    return Err(invalid(format!(
                        "{} ciphertexts in one upload: upload one ciphertext per object",
                        cts.len()
                    )));
                }
                let ct = cts.remove(0);
                Ok(Checked {
                    kind: ObjectKind::Ciphertext,
                    parameters: format!("{fp:016x}"),
                    info: serde_json::json!({
                        "level": ct.level(),
                        "scale": ct.scale(),
                        "slots": ct.slots(),
                    }),
                    ciphertext: Some(ct),
                })
            }
            Wire::TaskGraph => {
                let g = TaskGraph::from_bytes(data).map_err(invalid)?;
                Ok(Checked {
                    kind: ObjectKind::Graph,
                    parameters: String::new(),
                    info: serde_json::json!({
                        "name": g.name(),
                        "tasks": g.tasks().len(),
                        "inputs": g.num_inputs(),
                        "outputs": g.outputs().len(),
                    }),
                    ciphertext: None,
                })
            }
            other => Err(invalid(format!(
                "a {other} cannot be uploaded: upload parameters followed by evaluation keys, a \
                 ciphertext, or a task graph"
            ))),
        }
    }

    /// The context of the tenant's key set for parameter fingerprint `fp`, loading the key
    /// upload's parameters when no context is cached yet.
    pub fn context_for(
        &self,
        tenant: &str,
        fp: u64,
        contexts: &Contexts,
        allow_insecure: bool,
    ) -> Result<Arc<Context<u64>>> {
        let fp_hex = format!("{fp:016x}");
        let key_id: Option<String> = self.with_conn(|c| {
            c.prepare_cached(
                "SELECT id FROM objects WHERE tenant = ?1 AND kind = 'keys' AND param_fp = ?2
                 ORDER BY created_unix LIMIT 1",
            )?
            .query_row(params![tenant, fp_hex], |r| r.get(0))
            .optional()
        })?;
        let Some(key_id) = key_id else {
            return Err(invalid(format!(
                "no evaluation keys for parameters {fp_hex} are stored for this tenant: upload \
                 the parameters and evaluation keys first"
            )));
        };
        if let Some(ctx) = contexts.by_fingerprint(fp) {
            return Ok(ctx);
        }
        let path = self.object_path(tenant, &key_id);
        let head = read_params_object(&path)?;
        let params = CkksParameters::from_bytes(&head).map_err(|e| damaged(&path, e))?;
        if params.security() == SecurityLevel::None && !allow_insecure {
            return Err(invalid(
                "the stored keys' parameters are below 128-bit security and this server no \
                 longer allows them (--allow-insecure)"
                    .to_string(),
            ));
        }
        contexts.get(params)
    }

    /// Moves the checked upload into place and records it.
    fn commit_object(
        &self,
        tenant: &str,
        id: &str,
        tmp: &Path,
        bytes: u64,
        checked: Checked,
    ) -> Result<(ObjectInfo, bool)> {
        if let Some(info) = self.object(tenant, id)? {
            let _ = std::fs::remove_file(tmp);
            return Ok((info, false));
        }
        if self.durable() {
            std::fs::File::open(tmp)
                .and_then(|f| f.sync_all())
                .map_err(|source| ServeError::DataDir {
                    path: tmp.to_path_buf(),
                    source,
                })?;
        }
        self.install_object(tenant, id, tmp, bytes, checked)
    }

    /// Moves the synced file `tmp` to the tenant's object `id` (a rename, then a sync of the
    /// directory) and records it.
    fn install_object(
        &self,
        tenant: &str,
        id: &str,
        tmp: &Path,
        bytes: u64,
        checked: Checked,
    ) -> Result<(ObjectInfo, bool)> {
        let dir = self.objects_dir(tenant);
        std::fs::create_dir_all(&dir).map_err(|source| ServeError::DataDir {
            path: dir.clone(),
            source,
        })?;
        let path = dir.join(id);
        let io = |source| ServeError::DataDir {
            path: path.clone(),
            source,
        };
        std::fs::rename(tmp, &path).map_err(io)?;
        if self.durable() {
            sync_dir(&dir).map_err(io)?;
        }
        let info = ObjectInfo {
            id: id.to_string(),
            kind: checked.kind,
            bytes,
            parameters: checked.parameters,
            info: checked.info,
            created_unix: unix_now(),
        };
        let insert = |c: &rusqlite::Connection| {
            c.prepare_cached(
                "INSERT OR IGNORE INTO objects (tenant, id, kind, bytes, param_fp, info, created_unix)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            )?
            .execute(params![
                tenant,
                id,
                info.kind.name(),
                bytes as i64,
                info.parameters,
                info.info.to_string(),
                info.created_unix
            ])
        };
        self.with_conn(|c| {
            if insert(c)? > 0 {
                self.used(tenant, bytes as i64);
            }
            Ok(())
        })?;
        Ok((info, true))
    }

    /// Stores bytes the server made (a job's result) as the tenant's object: a record appended
    /// to the current segment file, then its row. Bytes already stored (the same content
    /// address, [`result_id`]) are not written again.
    pub fn store_result(&self, tenant: &str, data: &[u8], parameters: u64) -> Result<ObjectInfo> {
        let (info, _) = self.store_one(None, tenant, data, parameters)?;
        Ok(info)
    }

    /// Stores the result of running job `job` ([`Self::store_result`]) and records the job's
    /// end with it, both in one commit; returns the result's object and whether this call
    /// ended the job ([`Self::finish_job`]).
    pub fn finish_job_with_result(
        &self,
        job: i64,
        tenant: &str,
        data: &[u8],
        parameters: u64,
    ) -> Result<(ObjectInfo, bool)> {
        self.store_one(Some(job), tenant, data, parameters)
    }

    /// [`Self::store_results`] of one result.
    fn store_one(
        &self,
        job: Option<i64>,
        tenant: &str,
        data: &[u8],
        parameters: u64,
    ) -> Result<(ObjectInfo, bool)> {
        let one = NewResult {
            job,
            tenant: tenant.to_string(),
            data: data.to_vec(),
            parameters,
            known: None,
        };
        self.store_results(vec![one])?
            .pop()
            .ok_or_else(|| ServeError::InvalidRequest("no result was stored".into()))
    }

    /// Stores results ([`Self::store_result`]) and records the end of the jobs that made them,
    /// all in one write of the records that are new and one commit: a group of jobs that end
    /// together shares the system call, the block layer's trip and the commit's log frames.
    /// Returns, in order, each result's object and whether this call ended its job (`true`
    /// for a result of no job).
    pub fn store_results(&self, items: Vec<NewResult>) -> Result<Vec<(ObjectInfo, bool)>> {
        let mut infos: Vec<ObjectInfo> = Vec::with_capacity(items.len());
        // For each item, the index into `new` of the record it writes, if any.
        let mut writes: Vec<Option<usize>> = Vec::with_capacity(items.len());
        let mut new: Vec<Arc<Vec<u8>>> = Vec::new();
        let mut jobs = Vec::with_capacity(items.len());
        // The bytes of results found stored already: written after all if a deletion takes
        // their row before the commit.
        let mut kept: Vec<Option<Vec<u8>>> = Vec::with_capacity(items.len());
        for it in items {
            let id = match it.known.as_deref() {
                Some(id) if is_object_id(id) => id.to_string(),
                _ => result_id(&it.data),
            };
            // Stored already, or earlier in this group: not written again.
            let earlier = infos
                .iter()
                .zip(&jobs)
                .position(|(i, (_, t))| i.id == id && *t == it.tenant);
            let existing = match earlier {
                Some(k) => Some(infos[k].clone()),
                None => self.object(&it.tenant, &id)?,
            };
            let bytes = it.data.len() as u64;
            match existing {
                Some(_) => {
                    writes.push(None);
                    kept.push(earlier.is_none().then_some(it.data));
                }
                None => {
                    new.push(Arc::new(it.data));
                    writes.push(Some(new.len() - 1));
                    kept.push(None);
                }
            }
            infos.push(existing.unwrap_or_else(|| ObjectInfo {
                id,
                kind: ObjectKind::Result,
                bytes,
                parameters: format!("{:016x}", it.parameters),
                info: serde_json::json!({}),
                created_unix: unix_now(),
            }));
            jobs.push((it.job, it.tenant));
        }
        #[cfg(test)]
        if let Some(hook) = BEFORE_STORE_COMMIT.with(|h| h.borrow_mut().take()) {
            hook(self);
        }
        // Held until the rows naming the records are committed: no reclaim removes their
        // segment meanwhile (it counts live records by rows).
        let locs = if new.is_empty() {
            None
        } else {
            Some(self.segments.append_fresh(&new)?)
        };
        let mut late = Vec::new();
        let mut write_err = None;
        // The commit skips the disk flush, like the jobs' ends it comes with: a power cut that
        // undoes it also undoes the jobs' ends, so they run again and store the same bytes
        // under the same ids. The records themselves are on disk before the rows name them.
        let ended = self.with_conn_unsynced(|c| {
            let tx = crate::Tx::begin(c)?;
            let mut ended = Vec::with_capacity(infos.len());
            let mut added: Vec<(&str, i64)> = Vec::new();
            let insert = |tenant: &str, info: &ObjectInfo, loc: Location| -> rusqlite::Result<bool> {
                let n = tx
                    .prepare_cached(
                        "INSERT OR IGNORE INTO objects
                         (tenant, id, kind, bytes, param_fp, info, created_unix, segment, seg_offset)
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                    )?
                    .execute(params![
                        tenant,
                        info.id,
                        info.kind.name(),
                        info.bytes as i64,
                        info.parameters,
                        "{}",
                        info.created_unix,
                        loc.segment,
                        loc.offset
                    ])?;
                Ok(n > 0)
            };
            for (((info, w), (job, tenant)), keep) in
                infos.iter().zip(&writes).zip(&jobs).zip(&mut kept)
            {
                if let Some(loc) = w.zip(locs.as_ref()).map(|(k, l)| l[k]) {
                    if insert(tenant, info, loc)? {
                        added.push((tenant, info.bytes as i64));
                    }
                } else if let Some(data) = keep.take() {
                    // Found stored before this transaction: a deletion may have taken it since
                    // (its job would end naming nothing). Then it is written now.
                    let there = tx
                        .prepare_cached("SELECT 1 FROM objects WHERE tenant = ?1 AND id = ?2")?
                        .query_row(params![tenant, info.id], |_| Ok(()))
                        .optional()?
                        .is_some();
                    if !there {
                        let w = match self.segments.append_fresh(&[Arc::new(data)]) {
                            Ok(w) => w,
                            Err(e) => {
                                // Rolled back; the write's error is the answer.
                                write_err = Some(e);
                                return Err(rusqlite::Error::InvalidQuery);
                            }
                        };
                        if insert(tenant, info, w[0])? {
                            added.push((tenant, info.bytes as i64));
                        }
                        late.push(w);
                    }
                }
                ended.push(match job {
                    Some(job) => {
                        tx.prepare_cached(
                            "UPDATE jobs SET state = 'done', result_ref = ?2, finished_ms = ?3
                             WHERE id = ?1 AND state = 'running'",
                        )?
                        .execute(params![job, info.id, crate::unix_now_ms()])?
                            > 0
                    }
                    None => true,
                });
            }
            tx.commit()?;
            for (tenant, b) in added {
                self.used(tenant, b);
            }
            Ok(ended)
        });
        drop(late);
        drop(locs);
        // Reclaims put off while these records were unnamed.
        for id in self.segments.take_ready() {
            if let Err(e) = self.reclaim_segment(id) {
                eprintln!("heloom serve: reclaiming segment {id}: {e}; retried at the next start");
            }
        }
        if let Some(e) = write_err {
            return Err(e);
        }
        Ok(infos.into_iter().zip(ended?).collect())
    }

    /// The size of the tenant's object `id` and where it is: its record in a segment, or
    /// `None` for an object in a file of its own; `None` for no such object.
    pub(crate) fn object_location(
        &self,
        tenant: &str,
        id: &str,
    ) -> Result<Option<(u64, Option<Location>)>> {
        self.with_conn(|c| {
            c.prepare_cached(
                "SELECT bytes, segment, seg_offset FROM objects WHERE tenant = ?1 AND id = ?2",
            )?
            .query_row(params![tenant, id], |r| {
                let bytes = r.get::<_, i64>(0)?.max(0) as u64;
                let seg: Option<i64> = r.get(1)?;
                let off: Option<i64> = r.get(2)?;
                let loc = seg.zip(off).map(|(segment, offset)| Location {
                    segment,
                    offset,
                    len: bytes,
                });
                Ok((bytes, loc))
            })
            .optional()
        })
    }

    /// The rows naming a record in segment `id`: tenant, object id, where.
    fn segment_rows(&self, id: i64) -> Result<Vec<(String, String, Location)>> {
        self.with_conn(|c| {
            let mut st = c.prepare_cached(
                "SELECT tenant, id, bytes, seg_offset FROM objects WHERE segment = ?1",
            )?;
            let rows = st.query_map([id], |r| {
                let loc = Location {
                    segment: id,
                    offset: r.get(3)?,
                    len: r.get::<_, i64>(2)?.max(0) as u64,
                };
                Ok((r.get(0)?, r.get(1)?, loc))
            })?;
            rows.collect()
        })
    }

    /// Removes segment `id` if no row names it, or compacts it when it is sealed and less than
    /// a quarter of its bytes are still named: its live records are appended to the current
    /// segment (and flushed), their rows moved in one transaction, then the file removed.
    pub(crate) fn reclaim_segment(&self, id: i64) -> Result<()> {
        if Some(id) == self.segments.active_id() {
            return Ok(());
        }
        let _one = self
            .segments
            .compacting
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        // Records written there whose rows are not committed yet would not be counted: the
        // segment waits until they are (the store that names them reclaims it then).
        if self.segments.put_off_if_unnamed(id) {
            return Ok(());
        }
        // Each live record counted as the whole pages a direct write gives it (a buffered
        // segment's records take less: it is compacted a little later).
        let (live, rows) = self.with_conn(|c| {
            c.prepare_cached(
                "SELECT COALESCE(SUM((bytes + ?2 + 4095) / 4096 * 4096), 0), COUNT(*)
                 FROM objects WHERE segment = ?1",
            )?
            .query_row(params![id, RECORD_HEADER as i64], |r| {
                Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?))
            })
        })?;
        if rows == 0 {
            self.segments.remove(id);
            return Ok(());
        }
        if live.max(0) as u64 * 4 >= self.segments.size(id) {
            return Ok(());
        }
        let moving = self.segment_rows(id)?;
        let mut moved = Vec::with_capacity(moving.len());
        for (tenant, oid, from) in moving {
            // A damaged record stays where it is (and keeps the segment): it is reported
            // when read, never copied as if it were sound.
            let Ok(Some(data)) = self.segments.read(from) else {
                return Ok(());
            };
            let to = self.segments.append(&data)?;
            moved.push((tenant, oid, to[0], to));
        }
        // The copies on disk before the rows name them and the old file goes.
        self.segments.flush_active()?;
        self.with_conn(|c| {
            let tx = crate::Tx::begin(c)?;
            for (tenant, oid, to, _) in &moved {
                tx.prepare_cached(
                    "UPDATE objects SET segment = ?3, seg_offset = ?4
                     WHERE tenant = ?1 AND id = ?2 AND segment = ?5",
                )?
                .execute(params![tenant, oid, to.segment, to.offset, id])?;
            }
            tx.commit()
        })?;
        self.segments.remove(id);
        Ok(())
    }

    /// The tenant's object `id`, or `None` (absent, or another tenant's: the API answers both
    /// with 404).
    pub fn object(&self, tenant: &str, id: &str) -> Result<Option<ObjectInfo>> {
        self.with_conn(|c| {
            c.prepare_cached(
                "SELECT id, kind, bytes, param_fp, info, created_unix FROM objects
                 WHERE tenant = ?1 AND id = ?2",
            )?
            .query_row(params![tenant, id], object_row)
            .optional()
        })
    }

    /// The tenant's objects, newest first.
    pub fn objects(&self, tenant: &str) -> Result<Vec<ObjectInfo>> {
        Ok(self
            .objects_page(tenant, None, usize::MAX)?
            .into_iter()
            .map(|(_, o)| o)
            .collect())
    }

    /// One page of the tenant's objects, newest stored first, each with its position (the
    /// database's row id): only those before position `before` when given, at most `limit`.
    /// The last position of a page is the `before` of the next.
    pub fn objects_page(
        &self,
        tenant: &str,
        before: Option<i64>,
        limit: usize,
    ) -> Result<Vec<(i64, ObjectInfo)>> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.with_conn(|c| {
            let mut st = c.prepare_cached(
                "SELECT id, kind, bytes, param_fp, info, created_unix, rowid FROM objects
                 WHERE tenant = ?1 AND rowid < ?2 ORDER BY rowid DESC LIMIT ?3",
            )?;
            let rows = st.query_map(params![tenant, before.unwrap_or(i64::MAX), limit], |r| {
                Ok((r.get(6)?, object_row(r)?))
            })?;
            rows.collect()
        })
    }

    /// Bytes the tenant stores, over all objects: summed once, then kept up to date.
    pub fn stored_bytes(&self, tenant: &str) -> Result<u64> {
        self.with_conn(|c| {
            if let Some(&b) = self.usage().get(tenant) {
                return Ok(b);
            }
            let b = c
                .prepare_cached("SELECT COALESCE(SUM(bytes), 0) FROM objects WHERE tenant = ?1")?
                .query_row(params![tenant], |r| r.get::<_, i64>(0))?;
            self.usage().insert(tenant.to_string(), b);
            Ok(b)
        })
        .map(|b| b.max(0) as u64)
    }

    fn usage(&self) -> std::sync::MutexGuard<'_, HashMap<String, i64>> {
        self.usage.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Moves the tenant's stored bytes by `delta` (an object row inserted or deleted and
    /// committed); called with the connection held.
    fn used(&self, tenant: &str, delta: i64) {
        if let Some(b) = self.usage().get_mut(tenant) {
            *b += delta;
        }
    }

    /// Deletes the tenant's object; returns whether it existed. A result's segment is removed
    /// or compacted once little of it is still named.
    pub fn delete_object(&self, tenant: &str, id: &str) -> Result<bool> {
        let Some((bytes, loc)) = self.object_location(tenant, id)? else {
            return Ok(false);
        };
        let n = self.with_conn(|c| {
            let n = c
                .prepare_cached("DELETE FROM objects WHERE tenant = ?1 AND id = ?2")?
                .execute(params![tenant, id])?;
            if n > 0 {
                self.used(tenant, -(bytes as i64));
            }
            Ok(n)
        })?;
        if n > 0 {
            match loc {
                Some(loc) => {
                    self.segments.forget(loc);
                    self.reclaim_segment(loc.segment)?
                }
                None => {
                    let _ = std::fs::remove_file(self.object_path(tenant, id));
                }
            }
        }
        Ok(n > 0)
    }

    /// Reads the tenant's object `id`, checking its size against the record (a file cut short
    /// or grown is reported as damaged; the format's checksum catches the rest when it is
    /// parsed).
    pub fn read_object(&self, tenant: &str, id: &str) -> Result<Option<Vec<u8>>> {
        // A result is a checked segment record; a compaction may move it between the lookup
        // and the read, so a segment found gone means: look it up again.
        let mut gone = 0;
        for _ in 0..3 {
            let (bytes, loc) = match self.object_location(tenant, id)? {
                None => return Ok(None),
                Some(found) => found,
            };
            let Some(loc) = loc else {
                let path = self.object_path(tenant, id);
                let map = std::fs::read(&path).map_err(|e| damaged(&path, e))?;
                if map.len() as u64 != bytes {
                    return Err(damaged(
                        &path,
                        format!("{} bytes on disk, {bytes} stored", map.len()),
                    ));
                }
                return Ok(Some(map));
            };
            match self.segments.read(loc)? {
                Some(data) => return Ok(Some(data)),
                None => gone = loc.segment,
            }
        }
        Err(damaged(
            &self.segments.path(gone),
            "the segment holding this result is gone",
        ))
    }
}

/// A test's step run inside [`State::store_results`].
#[cfg(test)]
pub(crate) type StoreHook = Box<dyn FnOnce(&State)>;

#[cfg(test)]
thread_local! {
    /// Run once by this thread's next [`State::store_results`] between its existence checks
    /// and its commit (tests of what may happen there).
    pub(crate) static BEFORE_STORE_COMMIT: std::cell::RefCell<Option<StoreHook>> =
        const { std::cell::RefCell::new(None) };
}

/// A result to store with [`State::store_results`].
pub struct NewResult {
    /// The job that made it, ended by the same commit (`None`: a result of no job).
    pub job: Option<i64>,
    /// Its tenant.
    pub tenant: String,
    /// Its bytes (serialized ciphertexts).
    pub data: Vec<u8>,
    /// Its parameters' fingerprint.
    pub parameters: u64,
    /// Its id when known already (a node server hashed the same bytes), else hashed here.
    pub known: Option<String>,
}

/// The content address of a job's result: BLAKE3-256 of its bytes, 64 lowercase hex digits.
/// Uploads are addressed by SHA-256 (what a client can compute with any tool); results by
/// BLAKE3, about four times faster (28 against 119 us for a 200 KB result on an AMD Zen 4),
/// because every job's result is hashed on the server's path from the job's end to its
/// stored result. Both are cryptographic: a tenant's results cannot collide with its other
/// objects.
pub fn result_id(data: &[u8]) -> String {
    blake3::hash(data).to_hex().to_string()
}

/// Whether `id` looks like an object id (64 lowercase hex digits).
pub(crate) fn is_object_id(id: &str) -> bool {
    id.len() == 64 && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Checks each object of a result (a sequence of ciphertexts) against its own header and
/// XXH3 checksum, without parsing it: bytes damaged in transit are caught.
pub fn check_result_checksums(bytes: &[u8]) -> Result<()> {
    let mut rest = bytes;
    while !rest.is_empty() {
        let n = object_len(rest)?;
        heloom_ckks::serialize::open(&rest[..n], Wire::Ciphertext).map_err(invalid)?;
        rest = &rest[n..];
    }
    Ok(())
}

/// A stored file that cannot be used as recorded.
pub fn damaged(path: &Path, e: impl std::fmt::Display) -> ServeError {
    ServeError::Damaged {
        path: path.to_path_buf(),
        message: e.to_string(),
    }
}

/// The first object of a stored key set (its parameters), without reading the keys after it.
fn read_params_object(path: &Path) -> Result<Vec<u8>> {
    use std::io::Read;
    let io = |source| ServeError::DataDir {
        path: path.to_path_buf(),
        source,
    };
    let mut f = std::fs::File::open(path).map_err(io)?;
    let mut head = vec![0u8; HEADER_LEN];
    f.read_exact(&mut head).map_err(|e| damaged(path, e))?;
    let mut len = [0u8; 8];
    len.copy_from_slice(&head[24..32]);
    let total = u64::from_le_bytes(len)
        .checked_add((HEADER_LEN + CHECKSUM_LEN) as u64)
        .filter(|&t| t <= 1 << 20)
        .ok_or_else(|| damaged(path, "the parameters object has an impossible length"))?;
    head.resize(total as usize, 0);
    f.read_exact(&mut head[HEADER_LEN..])
        .map_err(|e| damaged(path, e))?;
    Ok(head)
}

fn read_file(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|source| ServeError::DataDir {
        path: path.to_path_buf(),
        source,
    })
}

fn object_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<ObjectInfo> {
    let kind: String = r.get(1)?;
    let info: String = r.get(4)?;
    Ok(ObjectInfo {
        id: r.get(0)?,
        kind: ObjectKind::parse(&kind).ok_or_else(|| {
            rusqlite::Error::FromSqlConversionFailure(
                1,
                rusqlite::types::Type::Text,
                format!("unknown object kind {kind:?}").into(),
            )
        })?,
        bytes: r.get::<_, i64>(2)?.max(0) as u64,
        parameters: r.get(3)?,
        info: serde_json::from_str(&info).unwrap_or(serde_json::Value::Null),
        created_unix: r.get(5)?,
    })
}

fn sync_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}
