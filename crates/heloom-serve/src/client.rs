//! A blocking Rust client of the API (`heloom client ...` is built on it).
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use heloom_serve::client::{Client, SubmitJob};
//! use heloom_serve::worker::Task;
//! let client = Client::new("http://127.0.0.1:8787", &std::env::var("HELOOM_TOKEN")?)?;
//! # let (params, keys, ct): (heloom_ckks::CkksParameters, heloom_ckks::EvaluationKeys<u64>, heloom_ckks::Ciphertext<u64>) = todo!();
//! let key = client.upload_keys(&params, &keys)?;
//! let input = client.upload_ciphertext(&ct)?;
//! let job = client.submit(&SubmitJob::new("job-1", &key.id, vec![input.id], Task::Exp { variant: None }))?;
//! let done = client.wait(job.id, std::time::Duration::from_secs(60))?;
//! let bytes = client.result_bytes(done.id)?;
//! # Ok(()) }
//! ```

use crate::api::JobView;
use crate::worker::Task;
use crate::ObjectInfo;
use heloom_ckks::{Ciphertext, CkksParameters, Context, EvaluationKeys};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What can go wrong talking to a server.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// The server answered with an error.
    #[error("server said {status} {code}: {message}")]
    Api {
        /// HTTP status.
        status: u16,
        /// The API's error code (`not_found`, `queue_full`, ...).
        code: String,
        /// What the server said to do.
        message: String,
        /// Seconds to wait before retrying, when the server said so (429).
        retry_after_s: Option<u64>,
    },
    /// The server could not be reached or the connection broke.
    #[error("cannot reach the server at {url}: {message}; is `heloom serve` running there?")]
    Transport {
        /// The server URL.
        url: String,
        /// What failed.
        message: String,
    },
    /// The server's answer was not what the API defines.
    #[error("unexpected answer from the server: {0}")]
    Decode(String),
    /// A local file could not be read.
    #[error("{path}: {source}")]
    File {
        /// The file.
        path: std::path::PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
    /// A job did not end within the time given.
    #[error("job {id} is still {state} after {waited_s:.0} s")]
    Timeout {
        /// The job.
        id: i64,
        /// Its state when the time ran out.
        state: String,
        /// Seconds waited.
        waited_s: f64,
    },
}

/// Result with [`ClientError`].
pub type Result<T> = std::result::Result<T, ClientError>;

/// Which jobs `GET /v1/jobs` lists (every field optional).
#[derive(Clone, Debug, Default)]
pub struct JobsQuery {
    /// Only jobs in this state (`accepted`, `running`, `done`, `failed`, `cancelled`).
    pub state: Option<String>,
    /// At most this many (the server's default 1000, at most 10 000).
    pub limit: Option<usize>,
    /// Only jobs with an id below this one: the previous page's `next_before`.
    pub before: Option<i64>,
}

/// One page of `GET /v1/jobs`.
#[derive(Debug, serde::Deserialize)]
pub struct JobsPage {
    /// The jobs, newest first.
    pub jobs: Vec<JobView>,
    /// Set when the page is full: the `before` of the next page.
    #[serde(default)]
    pub next_before: Option<i64>,
}

/// One page of `GET /v1/objects`.
#[derive(Debug, serde::Deserialize)]
pub struct ObjectsPage {
    /// The objects, newest first.
    pub objects: Vec<ObjectInfo>,
    /// Set when the page is full: the `before` of the next page (an opaque position).
    #[serde(default)]
    pub next_before: Option<i64>,
}

/// A job to submit (`POST /v1/jobs`).
#[derive(Clone, Debug, serde::Serialize)]
pub struct SubmitJob {
    /// The client's idempotency key: the same key and job give the same job, however often
    /// sent.
    pub idempotency_key: String,
    /// The key set the job runs with.
    pub key_id: String,
    /// Input ciphertext objects.
    pub inputs: Vec<String>,
    /// What to compute.
    pub task: Task,
    /// Higher runs first among this tenant's jobs.
    pub priority: i32,
    /// Unix time after which the result is of no use.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deadline_unix: Option<i64>,
    /// Keep the result at this level at most (`JobSpec::result_level`): fewer bytes to
    /// store and fetch; `0` needs every slot value below `q0 / (2 * scale)`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result_level: Option<usize>,
}

impl SubmitJob {
    /// A job with default priority, no deadline, the result at the level the task leaves it.
    pub fn new(idempotency_key: &str, key_id: &str, inputs: Vec<String>, task: Task) -> Self {
        Self {
            idempotency_key: idempotency_key.to_string(),
            key_id: key_id.to_string(),
            inputs,
            task,
            priority: 0,
            deadline_unix: None,
            result_level: None,
        }
    }
}

/// A client of one server with one tenant's token.
#[derive(Debug, Clone)]
pub struct Client {
    base: String,
    token: String,
    http: reqwest::blocking::Client,
}

impl Client {
    /// A client of the server at `url` (`http://127.0.0.1:8787`, or `https://...`, checked
    /// against the public web roots) with `token`.
    pub fn new(url: &str, token: &str) -> Result<Self> {
        Self::build(url, token, None, None)
    }

    /// [`Client::new`] with a limit on each request, from connecting to the end of its
    /// answer (a server that stops answering fails the request instead of holding it).
    pub fn with_timeout(url: &str, token: &str, timeout: Duration) -> Result<Self> {
        Self::build(url, token, None, Some(timeout))
    }

    /// A client of an HTTPS server whose certificate chains to the CA certificate(s) in the
    /// PEM bytes `ca` (a private CA, or a self-signed server certificate).
    pub fn with_ca(url: &str, token: &str, ca: &[u8]) -> Result<Self> {
        Self::build(url, token, Some(ca), None)
    }

    fn build(url: &str, token: &str, ca: Option<&[u8]>, timeout: Option<Duration>) -> Result<Self> {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::CertificateDer;
        let fail = |m: String| ClientError::Transport {
            url: url.to_string(),
            message: m,
        };
        let mut roots = rustls::RootCertStore::empty();
        match ca {
            Some(pem) => {
                for cert in CertificateDer::pem_slice_iter(pem) {
                    let cert = cert.map_err(|e| fail(format!("the CA file is not PEM: {e}")))?;
                    roots
                        .add(cert)
                        .map_err(|e| fail(format!("the CA certificate is not usable: {e}")))?;
                }
                if roots.is_empty() {
                    return Err(fail("the CA file holds no certificate".into()));
                }
            }
            None => roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned()),
        }
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let mut tls = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| fail(e.to_string()))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        tls.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        let http = reqwest::blocking::Client::builder()
            .timeout(timeout)
            .connect_timeout(Duration::from_secs(10))
            .use_preconfigured_tls(tls)
            .build()
            .map_err(|e| fail(e.to_string()))?;
        Ok(Self {
            base: url.trim_end_matches('/').to_string(),
            token: token.to_string(),
            http,
        })
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    fn transport(&self, e: reqwest::Error) -> ClientError {
        ClientError::Transport {
            url: self.base.clone(),
            message: e.to_string(),
        }
    }

    fn send(&self, rb: reqwest::blocking::RequestBuilder) -> Result<reqwest::blocking::Response> {
        let rb = rb.bearer_auth(&self.token);
        // A pooled connection the server closed (after refusing an upload mid-body, say)
        // fails the next request on it: a request that can be sent again is, once.
        let again = rb.try_clone();
        let r = match (rb.send(), again) {
            (Ok(r), _) => r,
            (Err(e), Some(again)) if e.is_request() || e.is_connect() => {
                again.send().map_err(|e| self.transport(e))?
            }
            (Err(e), _) => return Err(self.transport(e)),
        };
        if r.status().is_success() {
            return Ok(r);
        }
        let status = r.status().as_u16();
        let retry_after_s = r
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse().ok());
        let body: serde_json::Value = r.json().unwrap_or(serde_json::Value::Null);
        let field = |k: &str| {
            body["error"][k]
                .as_str()
                .map_or_else(|| "(no message)".to_string(), str::to_string)
        };
        Err(ClientError::Api {
            status,
            code: field("code"),
            message: field("message"),
            retry_after_s,
        })
    }

    fn json<T: serde::de::DeserializeOwned>(&self, r: reqwest::blocking::Response) -> Result<T> {
        r.json().map_err(|e| ClientError::Decode(e.to_string()))
    }

    /// The server's API name and version (`GET /v1`, no token needed).
    pub fn version(&self) -> Result<serde_json::Value> {
        let r = self.send(self.http.get(self.url("/v1")))?;
        self.json(r)
    }

    /// Uploads one object's bytes (keys, a ciphertext, a task graph).
    pub fn upload(&self, bytes: Vec<u8>) -> Result<ObjectInfo> {
        let r = self.send(self.http.post(self.url("/v1/objects")).body(bytes))?;
        self.json(r)
    }

    /// Uploads a file, streamed (a key set of gigabytes is never read into memory here).
    pub fn upload_file(&self, path: &std::path::Path) -> Result<ObjectInfo> {
        let file = std::fs::File::open(path).map_err(|source| ClientError::File {
            path: path.to_path_buf(),
            source,
        })?;
        let len = file.metadata().map(|m| m.len()).ok();
        let body = match len {
            Some(n) => reqwest::blocking::Body::sized(file, n),
            None => reqwest::blocking::Body::new(file),
        };
        let r = self.send(self.http.post(self.url("/v1/objects")).body(body))?;
        self.json(r)
    }

    /// Uploads parameters and evaluation keys as one key set.
    pub fn upload_keys(
        &self,
        params: &CkksParameters,
        keys: &EvaluationKeys<u64>,
    ) -> Result<ObjectInfo> {
        let mut b = params.to_bytes();
        b.extend_from_slice(&keys.to_bytes());
        self.upload(b)
    }

    /// Uploads one ciphertext.
    pub fn upload_ciphertext(&self, ct: &Ciphertext<u64>) -> Result<ObjectInfo> {
        self.upload(ct.to_bytes())
    }

    /// This tenant's newest objects (the server's first page: at most 1000), newest first;
    /// [`Client::all_objects`] for every one.
    pub fn objects(&self) -> Result<Vec<ObjectInfo>> {
        Ok(self.objects_page(None, None)?.objects)
    }

    /// One page of this tenant's objects, newest first: at most `limit` (the server's default
    /// 1000, at most 10 000), only those before the cursor `before` (a page's `next_before`).
    pub fn objects_page(&self, limit: Option<usize>, before: Option<i64>) -> Result<ObjectsPage> {
        let mut query: Vec<(&str, String)> = Vec::new();
        if let Some(l) = limit {
            query.push(("limit", l.to_string()));
        }
        if let Some(b) = before {
            query.push(("before", b.to_string()));
        }
        let r = self.send(self.http.get(self.url("/v1/objects")).query(&query))?;
        self.json(r)
    }

    /// Every object of this tenant, newest first, page by page.
    pub fn all_objects(&self) -> Result<Vec<ObjectInfo>> {
        let mut out = Vec::new();
        let mut before = None;
        loop {
            let page = self.objects_page(Some(10_000), before)?;
            out.extend(page.objects);
            match page.next_before {
                Some(b) => before = Some(b),
                None => return Ok(out),
            }
        }
    }

    /// Deletes one of this tenant's objects.
    pub fn delete_object(&self, id: &str) -> Result<()> {
        self.send(self.http.delete(self.url(&format!("/v1/objects/{id}"))))?;
        Ok(())
    }

    /// Submits a job (or finds the one already submitted with the same idempotency key).
    pub fn submit(&self, job: &SubmitJob) -> Result<JobView> {
        let r = self.send(self.http.post(self.url("/v1/jobs")).json(job))?;
        self.json(r)
    }

    /// Submits several jobs in one request and one commit (`POST /v1/jobs/batch`): all are
    /// accepted, or none (the error names the job). At most
    /// [`crate::api::MAX_BATCH_JOBS`] per call; returns the jobs in order.
    pub fn submit_batch(&self, jobs: &[SubmitJob]) -> Result<Vec<JobView>> {
        #[derive(serde::Serialize)]
        struct Batch<'a> {
            jobs: &'a [SubmitJob],
        }
        let r = self.send(
            self.http
                .post(self.url("/v1/jobs/batch"))
                .json(&Batch { jobs }),
        )?;
        let v: crate::api::BatchView = self.json(r)?;
        Ok(v.jobs)
    }

    /// One job.
    pub fn job(&self, id: i64) -> Result<JobView> {
        let r = self.send(self.http.get(self.url(&format!("/v1/jobs/{id}"))))?;
        self.json(r)
    }

    /// This tenant's newest jobs (the server's first page: at most 1000), newest first.
    /// [`Client::jobs_page`] for a filter or the pages after it; [`Client::all_jobs`] for
    /// every job.
    pub fn jobs(&self) -> Result<Vec<JobView>> {
        Ok(self.jobs_page(&JobsQuery::default())?.jobs)
    }

    /// One page of this tenant's jobs, newest first. Its `next_before`, when set, is the
    /// `before` of the next page.
    pub fn jobs_page(&self, q: &JobsQuery) -> Result<JobsPage> {
        let mut query: Vec<(&str, String)> = Vec::new();
        if let Some(s) = &q.state {
            query.push(("state", s.clone()));
        }
        if let Some(l) = q.limit {
            query.push(("limit", l.to_string()));
        }
        if let Some(b) = q.before {
            query.push(("before", b.to_string()));
        }
        let r = self.send(self.http.get(self.url("/v1/jobs")).query(&query))?;
        self.json(r)
    }

    /// Every job of this tenant (in `state` when given), newest first, page by page.
    pub fn all_jobs(&self, state: Option<&str>) -> Result<Vec<JobView>> {
        let mut q = JobsQuery {
            state: state.map(str::to_string),
            limit: Some(10_000),
            before: None,
        };
        let mut out = Vec::new();
        loop {
            let page = self.jobs_page(&q)?;
            out.extend(page.jobs);
            match page.next_before {
                Some(b) => q.before = Some(b),
                None => return Ok(out),
            }
        }
    }

    /// Cancels a job that has not ended.
    pub fn cancel(&self, id: i64) -> Result<JobView> {
        let r = self.send(self.http.post(self.url(&format!("/v1/jobs/{id}/cancel"))))?;
        self.json(r)
    }

    /// Deletes the record of an ended job (`DELETE /v1/jobs/{id}`; a job not ended yet is a
    /// `409`: cancel it first). Its result object stays; its idempotency key is free again.
    pub fn delete_job(&self, id: i64) -> Result<()> {
        self.send(self.http.delete(self.url(&format!("/v1/jobs/{id}"))))?;
        Ok(())
    }

    /// Deletes an ended job's record and its result object in one request (`DELETE
    /// /v1/jobs/{id}?result=true`), for a client that has the result.
    pub fn delete_job_with_result(&self, id: i64) -> Result<()> {
        self.send(
            self.http
                .delete(self.url(&format!("/v1/jobs/{id}")))
                .query(&[("result", "true")]),
        )?;
        Ok(())
    }

    /// A job's result once it is done, waiting up to `timeout` for it to end (`GET
    /// /v1/jobs/{id}/result?timeout_s=...`: one request where a wait and a fetch would be
    /// two): the bytes and the result object's id, or `None` when the job had not ended by
    /// then. A failed or cancelled job is an [`ClientError::Api`] error `no_result`.
    pub fn result_wait(&self, id: i64, timeout: Duration) -> Result<Option<(Vec<u8>, String)>> {
        let r = self.send(
            self.http
                .get(self.url(&format!("/v1/jobs/{id}/result")))
                .query(&[("timeout_s", format!("{:.3}", timeout.as_secs_f64()))]),
        );
        let r = match r {
            Ok(r) => r,
            Err(ClientError::Api {
                status: 409, code, ..
            }) if code == "not_ended" => return Ok(None),
            Err(e) => return Err(e),
        };
        let id_there = r
            .headers()
            .get(crate::api::RESULT_ID_HEADER)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
            .ok_or_else(|| {
                ClientError::Decode(format!("job {id}'s result came without its object id"))
            })?;
        let bytes = r.bytes().map_err(|e| self.transport(e))?;
        Ok(Some((bytes.to_vec(), id_there)))
    }

    /// Waits until the job ends (the server holds each request up to 30 s; no busy polling),
    /// at most `timeout`.
    pub fn wait(&self, id: i64, timeout: Duration) -> Result<JobView> {
        self.wait_steps(id, timeout, 30.0, &mut |_| {})
    }

    /// [`Client::wait`], calling `on_update` with the job after each answer (progress).
    pub fn wait_with(
        &self,
        id: i64,
        timeout: Duration,
        on_update: &mut dyn FnMut(&JobView),
    ) -> Result<JobView> {
        self.wait_steps(id, timeout, 1.0, on_update)
    }

    fn wait_steps(
        &self,
        id: i64,
        timeout: Duration,
        most: f64,
        on_update: &mut dyn FnMut(&JobView),
    ) -> Result<JobView> {
        let start = Instant::now();
        loop {
            let left = timeout.saturating_sub(start.elapsed()).as_secs_f64();
            let step = left.min(most);
            let r = self.send(
                self.http
                    .get(self.url(&format!("/v1/jobs/{id}/wait")))
                    .query(&[("timeout_s", format!("{step:.3}"))]),
            )?;
            let job: JobView = self.json(r)?;
            on_update(&job);
            if matches!(job.state.as_str(), "done" | "failed" | "cancelled") {
                return Ok(job);
            }
            if start.elapsed() >= timeout {
                return Err(ClientError::Timeout {
                    id,
                    state: job.state,
                    waited_s: start.elapsed().as_secs_f64(),
                });
            }
        }
    }

    /// A finished job's result: its output ciphertexts' bytes, one after another.
    pub fn result_bytes(&self, id: i64) -> Result<Vec<u8>> {
        let r = self.send(self.http.get(self.url(&format!("/v1/jobs/{id}/result"))))?;
        r.bytes().map(|b| b.to_vec()).map_err(|e| self.transport(e))
    }

    /// A finished job's output ciphertexts, loaded for `ctx`.
    pub fn result(&self, id: i64, ctx: &Context<u64>) -> Result<Vec<Ciphertext<u64>>> {
        let bytes = self.result_bytes(id)?;
        crate::objects::parse_ciphertexts(&bytes, ctx)
            .map_err(|e| ClientError::Decode(e.to_string()))
    }
}
