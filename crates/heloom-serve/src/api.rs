//! The HTTP API, version 1 (reference: `docs/serve-api.md`; machine-readable:
//! `crates/heloom-serve/openapi.yaml`).
//!
//! Every `/v1/...` route needs `Authorization: Bearer <token>` (`GET /v1`, the version, and
//! `/healthz`, `/readyz`, `/metrics` do not); what a tenant cannot see (another
//! tenant's jobs and objects, or none at all) is answered 404, never 403. Errors are JSON:
//! `{"error": {"code": "...", "message": "..."}}` with a message that says what to do.

use crate::metrics::Metrics;
use crate::objects::{Contexts, ObjectKind};
use crate::worker::{JobSpec, Shared, Task};
use crate::{JobRecord, JobState, NewJob, ServeError, State};
use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, MatchedPath, Path, Query, Request};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use http_body_util::BodyExt;
use sha2::{Digest, Sha256};
use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

/// The API version in every path (`/v1/...`).
pub const API_VERSION: u32 = 1;

/// Limits on requests.
#[derive(Clone, Debug)]
pub struct Limits {
    /// Largest object upload, bytes.
    pub max_upload_bytes: u64,
    /// Largest JSON request body, bytes.
    pub max_json_bytes: usize,
    /// Longest wait for the next chunk of an upload before it is abandoned.
    pub idle_timeout: Duration,
    /// Longest `wait` a client may ask for.
    pub max_wait: Duration,
    /// Most jobs a tenant may have queued (accepted, not started).
    pub max_queued_jobs: u64,
    /// Most bytes a tenant may store.
    pub max_stored_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_upload_bytes: 8 << 30,
            max_json_bytes: 1 << 20,
            idle_timeout: Duration::from_secs(30),
            max_wait: Duration::from_secs(300),
            max_queued_jobs: 10_000,
            max_stored_bytes: 64 << 30,
        }
    }
}

/// What every handler shares.
#[derive(Clone)]
pub struct AppState {
    pub(crate) state: Arc<State>,
    pub(crate) contexts: Arc<Contexts>,
    pub(crate) worker: Arc<Shared>,
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) limits: Limits,
    pub(crate) allow_insecure: bool,
}

/// An API error: status, machine-readable code, message.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    code: &'static str,
    message: String,
    retry_after_s: Option<u64>,
}

impl ApiError {
    fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
            retry_after_s: None,
        }
    }

    fn not_found(what: &str) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "not_found",
            format!("{what} does not exist (or belongs to another tenant)"),
        )
    }

    fn bad(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_request", message)
    }
}

impl From<ServeError> for ApiError {
    fn from(e: ServeError) -> Self {
        match &e {
            ServeError::InvalidRequest(m) => Self::bad(m.clone()),
            ServeError::InvalidTenant { .. } => Self::bad(e.to_string()),
            ServeError::IdempotencyConflict { .. } => {
                Self::new(StatusCode::CONFLICT, "idempotency_conflict", e.to_string())
            }
            ServeError::Damaged { .. } => {
                eprintln!("heloom serve: {e}");
                Self::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "damaged",
                    "a stored file is damaged and was not served; upload the object again \
                     (the operator has the details in the server log)",
                )
            }
            _ => {
                eprintln!("heloom serve: {e}");
                Self::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "unavailable",
                    "the server cannot reach its state right now; retry later",
                )
            }
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = serde_json::json!({"error": {"code": self.code, "message": self.message}});
        let mut r = (self.status, Json(body)).into_response();
        if let Some(s) = self.retry_after_s {
            if let Ok(v) = HeaderValue::from_str(&s.to_string()) {
                r.headers_mut().insert(header::RETRY_AFTER, v);
            }
        }
        if self.status == StatusCode::UNAUTHORIZED {
            r.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"heloom\""),
            );
        }
        r
    }
}

type ApiResult<T> = Result<T, ApiError>;

/// Runs blocking work (SQLite, file I/O, parsing) off the async threads.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, ServeError> + Send + 'static,
) -> ApiResult<T> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| {
            ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal",
                format!("internal error: {e}"),
            )
        })?
        .map_err(ApiError::from)
}

/// The tenant a request's bearer token belongs to.
async fn tenant(app: &AppState, headers: &HeaderMap) -> ApiResult<String> {
    let unauthorized = |m: &str| ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", m);
    let value = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .ok_or_else(|| {
            unauthorized("send Authorization: Bearer <token> (heloom serve token create)")
        })?;
    let token = value
        .strip_prefix("Bearer ")
        .ok_or_else(|| unauthorized("the Authorization header must be \"Bearer <token>\""))?
        .trim()
        .to_string();
    let state = Arc::clone(&app.state);
    blocking(move || state.authenticate(&token))
        .await?
        .ok_or_else(|| unauthorized("unknown or revoked token"))
}

/// The router of every route.
pub fn router(app: AppState) -> Router {
    let json_limit = app.limits.max_json_bytes;
    let v1 = Router::new()
        .route("/v1", get(version))
        .route("/v1/objects", post(upload).get(list_objects))
        .route("/v1/objects/{id}", get(get_object).delete(delete_object))
        .route("/v1/objects/{id}/data", get(object_data))
        .route(
            "/v1/jobs",
            post(submit)
                .get(list_jobs)
                .layer(DefaultBodyLimit::max(json_limit)),
        )
        .route(
            "/v1/jobs/batch",
            post(submit_batch).layer(DefaultBodyLimit::max(json_limit)),
        )
        .route("/v1/jobs/{id}", get(get_job).delete(delete_job))
        .route("/v1/jobs/{id}/wait", get(wait_job))
        .route("/v1/jobs/{id}/cancel", post(cancel_job))
        .route("/v1/jobs/{id}/result", get(job_result))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .fallback(|| async {
            ApiError::new(
                StatusCode::NOT_FOUND,
                "no_route",
                "no such route: see docs/serve-api.md (GET /v1 names the API version)",
            )
        });
    v1.layer(axum::middleware::from_fn_with_state(app.clone(), count))
        .with_state(app)
}

/// Counts requests by route and status, and response bytes where known.
async fn count(
    axum::extract::State(app): axum::extract::State<AppState>,
    req: Request,
    next: Next,
) -> Response {
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_string(), |m| m.as_str().to_string());
    let r = next.run(req).await;
    app.metrics.request(&route, r.status().as_u16());
    r
}

async fn version() -> Json<serde_json::Value> {
    Json(serde_json::json!({
        "api": "heloom",
        "version": API_VERSION,
        "heloom": env!("CARGO_PKG_VERSION"),
    }))
}

async fn healthz() -> &'static str {
    "ok\n"
}

async fn readyz(axum::extract::State(app): axum::extract::State<AppState>) -> Response {
    if let Err(why) = app.worker.ready() {
        // With --ray: the bridge stopped, or no node server is up (jobs stay queued).
        return ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            format!("not ready: {why}"),
        )
        .into_response();
    }
    let state = Arc::clone(&app.state);
    match blocking(move || state.queue_depths()).await {
        Ok(_) => "ready\n".into_response(),
        Err(e) => e.into_response(),
    }
}

async fn metrics(axum::extract::State(app): axum::extract::State<AppState>) -> Response {
    let state = Arc::clone(&app.state);
    let depths = blocking(move || state.queue_depths())
        .await
        .unwrap_or_default();
    let mut g = app.worker.gauges();
    g.queued = depths.iter().map(|(t, q, _)| (t.clone(), *q)).collect();
    g.running = depths.iter().map(|(t, _, r)| (t.clone(), *r)).collect();
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        app.metrics.render(&g),
    )
        .into_response()
}

/// `POST /v1/objects`: the body is streamed to a temporary file, hashed as it arrives,
/// validated, then stored under its SHA-256.
async fn upload(
    axum::extract::State(app): axum::extract::State<AppState>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    let tenant = tenant(&app, &headers).await?;
    let limit = app.limits.max_upload_bytes;
    if let Some(len) = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok())
    {
        if len > limit {
            drain(body, app.limits.idle_timeout).await;
            return Err(too_large(len, limit));
        }
    }
    let stored = {
        let state = Arc::clone(&app.state);
        let t = tenant.clone();
        blocking(move || state.stored_bytes(&t)).await?
    };
    let quota = app.limits.max_stored_bytes;
    let over_quota = |received: u64| ApiError {
        retry_after_s: None,
        ..ApiError::new(
            StatusCode::INSUFFICIENT_STORAGE,
            "quota",
            format!(
                "this tenant stores {stored} bytes; {received} more exceed its quota of {quota} \
                 bytes: delete objects first"
            ),
        )
    };
    let state = Arc::clone(&app.state);
    let (tmp, file) = blocking(move || state.upload_file()).await?;
    let cleanup = TempGuard(Some(tmp.clone()));
    let mut file = std::io::BufWriter::with_capacity(1 << 20, file);
    let mut sha = Sha256::new();
    let mut received: u64 = 0;
    let mut body = body;
    loop {
        let frame = match tokio::time::timeout(app.limits.idle_timeout, body.frame()).await {
            Err(_) => {
                return Err(ApiError::new(
                    StatusCode::REQUEST_TIMEOUT,
                    "timeout",
                    format!(
                        "no upload data for {} s: the upload was abandoned; send it again",
                        app.limits.idle_timeout.as_secs()
                    ),
                ))
            }
            Ok(None) => break,
            Ok(Some(Err(e))) => {
                return Err(ApiError::bad(format!(
                    "the upload broke off after {received} bytes: {e}"
                )))
            }
            Ok(Some(Ok(f))) => f,
        };
        let Ok(chunk) = frame.into_data() else {
            continue;
        };
        received += chunk.len() as u64;
        if received > limit {
            drain(body, app.limits.idle_timeout).await;
            return Err(too_large(received, limit));
        }
        // Stop a quota breach as soon as it shows, not after the whole upload.
        if stored.saturating_add(received) > quota {
            drain(body, app.limits.idle_timeout).await;
            return Err(over_quota(received));
        }
        sha.update(&chunk);
        // Small synchronous writes into a buffered file: the kernel absorbs them.
        file.write_all(&chunk).map_err(|e| {
            ApiError::new(
                StatusCode::INSUFFICIENT_STORAGE,
                "storage",
                format!("the server could not store the upload: {e}"),
            )
        })?;
    }
    file.flush().map_err(|e| {
        ApiError::new(
            StatusCode::INSUFFICIENT_STORAGE,
            "storage",
            format!("the server could not store the upload: {e}"),
        )
    })?;
    drop(file);
    app.metrics.bytes(received, 0);
    let digest: [u8; 32] = sha.finalize().into();
    let state = Arc::clone(&app.state);
    let contexts = Arc::clone(&app.contexts);
    let allow = app.allow_insecure;
    let tmp2 = tmp.clone();
    let t = tenant.clone();
    let (info, new, ct) =
        blocking(move || state.store_upload(&t, &tmp2, &digest, &contexts, allow)).await?;
    cleanup.defuse();
    if let Some(ct) = ct {
        app.worker.inputs.insert(&tenant, &info.id, ct);
    }
    let status = if new {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(info)).into_response())
}

/// Most bytes of a refused upload read and discarded before answering.
const DRAIN_BYTES: u64 = 64 << 20;

/// Reads and discards what is left of a refused request body, up to [`DRAIN_BYTES`], so that
/// an HTTP/1.1 client still sending it reads the error instead of a broken connection; a
/// longer body is cut off (the client then sees the connection close).
async fn drain(mut body: Body, idle: Duration) {
    let mut left = DRAIN_BYTES;
    while let Ok(Some(Ok(frame))) = tokio::time::timeout(idle, body.frame()).await {
        let n = frame.data_ref().map_or(0, |d| d.len() as u64);
        if n >= left {
            break;
        }
        left -= n;
    }
}

/// Removes an abandoned upload's temporary file.
struct TempGuard(Option<std::path::PathBuf>);

impl TempGuard {
    fn defuse(mut self) {
        self.0 = None;
    }
}

impl Drop for TempGuard {
    fn drop(&mut self) {
        if let Some(p) = self.0.take() {
            let _ = std::fs::remove_file(p);
        }
    }
}

fn too_large(bytes: u64, limit: u64) -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "too_large",
        format!("{bytes} bytes exceed this server's upload limit of {limit} bytes (--max-upload)"),
    )
}

/// The `next_before` of a list page of `len` entries out of at most `limit`, whose last
/// entry is at `last`: a full page may have more after it.
fn next_page(limit: usize, len: usize, last: Option<i64>) -> Option<i64> {
    (limit > 0 && len == limit).then_some(last).flatten()
}

#[derive(serde::Deserialize)]
struct ObjectsQuery {
    limit: Option<usize>,
    before: Option<i64>,
}

async fn list_objects(
    axum::extract::State(app): axum::extract::State<AppState>,
    headers: HeaderMap,
    Query(q): Query<ObjectsQuery>,
) -> ApiResult<Json<serde_json::Value>> {
    let tenant = tenant(&app, &headers).await?;
    let state = Arc::clone(&app.state);
    let limit = q.limit.unwrap_or(1000).min(10_000);
    let before = q.before;
    let page = blocking(move || state.objects_page(&tenant, before, limit)).await?;
    let next_before = next_page(limit, page.len(), page.last().map(|(pos, _)| *pos));
    let objects: Vec<crate::ObjectInfo> = page.into_iter().map(|(_, o)| o).collect();
    Ok(Json(
        serde_json::json!({ "objects": objects, "next_before": next_before }),
    ))
}

fn check_id(id: &str) -> ApiResult<()> {
    if crate::objects::is_object_id(id) {
        Ok(())
    } else {
        Err(ApiError::not_found(&format!("object {id:?}")))
    }
}

/// Runs `f` on the tenant's object `id` (off the async threads); `None` is 404.
async fn on_object<T: Send + 'static>(
    app: &AppState,
    headers: &HeaderMap,
    id: String,
    f: impl FnOnce(&State, &str, &str) -> Result<Option<T>, ServeError> + Send + 'static,
) -> ApiResult<T> {
    let tenant = tenant(app, headers).await?;
    check_id(&id)?;
    let state = Arc::clone(&app.state);
    let i = id.clone();
    blocking(move || f(&state, &tenant, &i))
        .await?
        .ok_or_else(|| ApiError::not_found(&format!("object {id}")))
}

async fn get_object(
    axum::extract::State(app): axum::extract::State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> ApiResult<Json<crate::ObjectInfo>> {
    on_object(&app, &headers, id, |s, t, i| s.object(t, i))
        .await
        .map(Json)
}

async fn delete_object(
    axum::extract::State(app): axum::extract::State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> ApiResult<StatusCode> {
    let worker = Arc::clone(&app.worker);
    on_object(&app, &headers, id, move |s, t, i| {
        let deleted = s.delete_object(t, i)?;
        if deleted {
            worker.inputs.remove(t, i);
        }
        Ok(deleted.then_some(StatusCode::NO_CONTENT))
    })
    .await
}

async fn object_data(
    axum::extract::State(app): axum::extract::State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> ApiResult<Response> {
    let data = on_object(&app, &headers, id, |s, t, i| s.read_object(t, i)).await?;
    Ok(binary(&app, data))
}

fn binary(app: &AppState, data: Vec<u8>) -> Response {
    app.metrics.bytes(0, data.len() as u64);
    (
        [(header::CONTENT_TYPE, "application/octet-stream")],
        Bytes::from(data),
    )
        .into_response()
}

/// `POST /v1/jobs` body.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct SubmitRequest {
    idempotency_key: String,
    key_id: String,
    #[serde(default)]
    inputs: Vec<String>,
    task: Task,
    #[serde(default)]
    priority: i32,
    #[serde(default)]
    deadline_unix: Option<i64>,
    #[serde(default)]
    result_level: Option<usize>,
}

/// A job as the API shows it.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct JobView {
    /// Job id.
    pub id: i64,
    /// `accepted`, `running`, `done`, `failed` or `cancelled`.
    pub state: String,
    /// `exp`, `polynomial`, `graph`, `matmul`, `matmul_encrypted` or `cryptonets`.
    pub kind: String,
    /// The client's idempotency key.
    pub idempotency_key: String,
    /// Priority among the tenant's jobs.
    pub priority: i32,
    /// Unix time after which the result is of no use.
    pub deadline_unix: Option<i64>,
    /// Times a worker took it.
    pub attempts: i64,
    /// Accepted, Unix ms.
    pub created_ms: i64,
    /// Last started, Unix ms.
    pub started_ms: Option<i64>,
    /// Ended, Unix ms.
    pub finished_ms: Option<i64>,
    /// Tasks done and total while it runs.
    pub progress: Option<Progress>,
    /// The result object, once done.
    pub result_id: Option<String>,
    /// Why it failed.
    pub error: Option<String>,
}

/// A running job's progress.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct Progress {
    /// Tasks finished.
    pub tasks_done: usize,
    /// Tasks in the job's graph.
    pub tasks_total: usize,
}

fn view(app: &AppState, r: JobRecord) -> JobView {
    let progress = (r.state == JobState::Running)
        .then(|| app.worker.progress(r.id))
        .flatten()
        .map(|(d, t)| Progress {
            tasks_done: d,
            tasks_total: t,
        });
    JobView {
        id: r.id,
        state: r.state.name().to_string(),
        kind: r.kind,
        idempotency_key: r.idempotency_key,
        priority: r.priority,
        deadline_unix: r.deadline_unix,
        attempts: r.attempts,
        created_ms: r.created_ms,
        started_ms: r.started_ms,
        finished_ms: r.finished_ms,
        progress,
        result_id: r.result_ref,
        error: r.error,
    }
}

async fn submit(
    axum::extract::State(app): axum::extract::State<AppState>,
    headers: HeaderMap,
    body: Bytes,
) -> ApiResult<Response> {
    let decode = |b: &[u8]| decode_submit(b).map(|j| vec![j]);
    let (rec, new) = accept_body(&app, &headers, &body, decode)
        .await?
        .pop()
        .ok_or_else(|| ApiError::bad("no job to submit"))?;
    let status = if new {
        StatusCode::ACCEPTED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(view(&app, rec))).into_response())
}

/// Authenticates, decodes the body's jobs with `decode` and [`accept`]s them.
async fn accept_body(
    app: &AppState,
    headers: &HeaderMap,
    body: &[u8],
    decode: impl FnOnce(&[u8]) -> Result<Vec<DecodedSubmit>, ServeError>,
) -> ApiResult<Vec<(JobRecord, bool)>> {
    let received = std::time::Instant::now();
    let tenant = tenant(app, headers).await?;
    app.metrics.bytes(body.len() as u64, 0);
    let jobs = decode(body).map_err(ApiError::from)?;
    accept(app, &tenant, received, jobs).await
}

/// Most jobs in one `POST /v1/jobs/batch`.
pub const MAX_BATCH_JOBS: usize = 1000;

/// `POST /v1/jobs/batch` body.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct BatchRequest {
    jobs: Vec<serde_json::Value>,
}

/// `POST /v1/jobs/batch` answer: the jobs in the order submitted.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct BatchView {
    /// One job per submitted description, in order.
    pub jobs: Vec<JobView>,
}

/// Decodes a `POST /v1/jobs/batch` body: 1 to [`MAX_BATCH_JOBS`] job descriptions, each
/// checked as [`decode_submit`] checks one (an error names the job by its position).
pub fn decode_batch(body: &[u8]) -> Result<Vec<DecodedSubmit>, ServeError> {
    let bad = |m: String| ServeError::InvalidRequest(m);
    let req: BatchRequest = serde_json::from_slice(body).map_err(|e| {
        bad(format!(
            "the batch is not valid: {e} (send {{\"jobs\": [...]}})"
        ))
    })?;
    if req.jobs.is_empty() || req.jobs.len() > MAX_BATCH_JOBS {
        return Err(bad(format!(
            "{} jobs in the batch: send 1 to {MAX_BATCH_JOBS}",
            req.jobs.len()
        )));
    }
    req.jobs
        .into_iter()
        .enumerate()
        .map(|(i, v)| {
            let r: SubmitRequest = serde_json::from_value(v)
                .map_err(|e| bad(format!("job {i}: the job description is not valid: {e}")))?;
            decode_request(r).map_err(|e| match e {
                ServeError::InvalidRequest(m) => bad(format!("job {i}: {m}")),
                other => other,
            })
        })
        .collect()
}

async fn submit_batch(
    axum::extract::State(app): axum::extract::State<AppState>,
    headers: HeaderMap,
    body: Bytes,
) -> ApiResult<Response> {
    let accepted = accept_body(&app, &headers, &body, decode_batch).await?;
    let status = if accepted.iter().any(|(_, new)| *new) {
        StatusCode::ACCEPTED
    } else {
        StatusCode::OK
    };
    let jobs = accepted.into_iter().map(|(r, _)| view(&app, r)).collect();
    Ok((status, Json(BatchView { jobs })).into_response())
}

/// Checks and accepts the tenant's jobs, all or none, in one transaction: references,
/// deadlines, the tenant's queue limit (retries of accepted jobs are answered even when it is
/// full), admission control against the deadlines, the idempotency keys.
async fn accept(
    app: &AppState,
    tenant: &str,
    received: std::time::Instant,
    jobs: Vec<DecodedSubmit>,
) -> ApiResult<Vec<(JobRecord, bool)>> {
    let many = jobs.len() > 1;
    let which = move |i: usize| {
        if many {
            format!("job {i}: ")
        } else {
            String::new()
        }
    };
    let now = crate::unix_now();
    for (i, j) in jobs.iter().enumerate() {
        if let Some(d) = j.deadline_unix.filter(|&d| d <= now) {
            return Err(ApiError::bad(format!(
                "{}deadline_unix {d} has already passed; give a time in the future or none",
                which(i)
            )));
        }
    }
    let state = Arc::clone(&app.state);
    let limits = app.limits.clone();
    let t = tenant.to_string();
    let worker = Arc::clone(&app.worker);
    let outcome = blocking(move || {
        let digests: Vec<String> = jobs
            .iter()
            .map(|j| crate::hex(&Sha256::digest(j.spec_json.as_bytes())))
            .collect();
        let mut fresh = 0u64;
        let mut fresh_deadlines = Vec::new();
        for (i, j) in jobs.iter().enumerate() {
            check_references(&state, &t, &j.spec).map_err(|e| match e {
                ServeError::InvalidRequest(m) => ServeError::InvalidRequest(which(i) + &m),
                other => other,
            })?;
            // A retry of an accepted job is answered even when the queue is full.
            if state.job_by_key(&t, &j.idempotency_key)?.is_none() {
                fresh += 1;
                if let Some(d) = j.deadline_unix {
                    fresh_deadlines.push(d);
                }
            }
        }
        let queued = state.queued_jobs(Some(&t))?;
        if fresh > 0 && queued + fresh > limits.max_queued_jobs {
            return Ok(Err(Refusal::QueueFull(queued)));
        }
        // Admission control: a job that would end after its deadline is refused now, with
        // the predicted wait as the retry hint, instead of queueing work nobody can use.
        if let Some(&d) = fresh_deadlines.iter().min() {
            // Every tenant's queue drains ahead of it: counted only when a deadline asks.
            let ahead = state.queued_jobs(None)? + fresh - 1;
            if let Some(eta) = worker.predicted_completion_s(ahead) {
                let left = (d - crate::unix_now()) as f64;
                if eta > left {
                    return Ok(Err(Refusal::Deadline { eta, left }));
                }
            }
        }
        let new: Vec<NewJob<'_>> = jobs
            .iter()
            .zip(&digests)
            .map(|(j, digest)| NewJob {
                idempotency_key: &j.idempotency_key,
                kind: j.spec.task.kind(),
                input_digest: digest,
                priority: j.priority,
                deadline_unix: j.deadline_unix,
                spec: &j.spec_json,
            })
            .collect();
        // The dispatcher hears of the new jobs at their commit, so they can start while the
        // commit is flushed to disk; the answer waits for the flush.
        state
            .submit_jobs(&t, &new, |accepted| {
                for (rec, new) in accepted {
                    if *new {
                        worker.accepted(rec.id, received);
                    }
                }
            })
            .map(Ok)
    })
    .await?;
    let accepted =
        match outcome {
            Ok(r) => r,
            Err(refusal) => {
                app.metrics.rejected(tenant);
                return Err(match refusal {
                    Refusal::QueueFull(queued) => {
                        ApiError {
                            retry_after_s: Some(5),
                            ..ApiError::new(
                                StatusCode::TOO_MANY_REQUESTS,
                                "queue_full",
                                format!(
                            "this tenant has {queued} jobs queued, its limit {}: retry after \
                             the queue drains (Retry-After){}",
                            app.limits.max_queued_jobs,
                            if many { ", or send fewer jobs at once" } else { "" }
                        ),
                            )
                        }
                    }
                    Refusal::Deadline { eta, left } => ApiError {
                        retry_after_s: Some(eta.ceil() as u64),
                        ..ApiError::new(
                            StatusCode::TOO_MANY_REQUESTS,
                            "deadline_unreachable",
                            format!(
                            "the job would end in about {eta:.1} s but its deadline is {left:.0} \
                             s away: retry later (Retry-After), or give a later deadline"
                        ),
                        )
                    },
                });
            }
        };
    for _ in accepted.iter().filter(|(_, new)| *new) {
        app.metrics.submitted(tenant);
    }
    Ok(accepted)
}

/// A decoded `POST /v1/jobs` body.
#[derive(Debug)]
pub struct DecodedSubmit {
    /// What the job computes.
    pub spec: JobSpec,
    /// `spec` as stored (canonical JSON: its SHA-256 identifies the job's inputs).
    pub spec_json: String,
    /// The client's idempotency key.
    pub idempotency_key: String,
    /// Priority among the tenant's jobs.
    pub priority: i32,
    /// Unix time after which the result is of no use.
    pub deadline_unix: Option<i64>,
}

/// Decodes and checks a job description as it arrives from the network (everything that
/// needs no state: JSON shape, task details); the network-facing parser the fuzzer drives.
pub fn decode_submit(body: &[u8]) -> Result<DecodedSubmit, ServeError> {
    let req: SubmitRequest = serde_json::from_slice(body).map_err(|e| {
        ServeError::InvalidRequest(format!("the job description is not valid: {e}"))
    })?;
    decode_request(req)
}

/// Checks one parsed job description (everything that needs no state).
fn decode_request(req: SubmitRequest) -> Result<DecodedSubmit, ServeError> {
    let bad = |m: String| ServeError::InvalidRequest(m);
    match &req.task {
        Task::Exp { variant: Some(v) } if crate::worker::exp_variant(v).is_none() => {
            return Err(bad(format!(
                "e^x variant {v:?}: use horner, bsgs or paper-fig3"
            )));
        }
        Task::Polynomial { coefficients }
            if coefficients.is_empty()
                || coefficients.len() > 65
                || coefficients.iter().any(|c| !c.is_finite()) =>
        {
            return Err(bad(
                "polynomial coefficients: give 1 to 65 finite numbers, lowest degree first".into(),
            ));
        }
        Task::Matmul { matrix } => {
            crate::apps::matmul_matrix(matrix)?;
        }
        Task::MatmulEncrypted { side } => {
            crate::apps::encrypted_matmul_side(*side)?;
        }
        _ => {}
    }
    if req.inputs.len() > 4096 {
        return Err(bad(format!(
            "{} inputs: a job takes at most 4096",
            req.inputs.len()
        )));
    }
    let spec = JobSpec {
        key_id: req.key_id,
        inputs: req.inputs,
        task: req.task,
        result_level: req.result_level,
    };
    let spec_json = serde_json::to_string(&spec)
        .map_err(|e| bad(format!("the job description is not valid: {e}")))?;
    Ok(DecodedSubmit {
        spec,
        spec_json,
        idempotency_key: req.idempotency_key,
        priority: req.priority,
        deadline_unix: req.deadline_unix,
    })
}

/// Why admission control refused a job.
enum Refusal {
    /// The tenant's queue is at its limit.
    QueueFull(u64),
    /// The predicted end is after the deadline.
    Deadline { eta: f64, left: f64 },
}

/// Every object a job names exists for its tenant, with the right kind and parameters.
fn check_references(state: &State, tenant: &str, spec: &JobSpec) -> Result<(), ServeError> {
    let bad = |m: String| ServeError::InvalidRequest(m);
    let keys = state
        .object(tenant, &spec.key_id)?
        .filter(|o| o.kind == ObjectKind::Keys)
        .ok_or_else(|| bad(format!("key_id {:?} names no stored key set", spec.key_id)))?;
    let mut facts = Vec::with_capacity(spec.inputs.len());
    for id in &spec.inputs {
        let o = state
            .object(tenant, id)?
            .filter(|o| o.kind == ObjectKind::Ciphertext)
            .ok_or_else(|| bad(format!("input {id:?} names no stored ciphertext")))?;
        if o.parameters != keys.parameters {
            return Err(bad(format!(
                "input {id} was made for parameters {}, the key set {} for {}: encrypt with the \
                 key set's parameters",
                o.parameters, keys.id, keys.parameters
            )));
        }
        facts.push(crate::apps::InputFacts::from_info(&o.info));
    }
    // Built-in applications: input count, levels, slots and keys, before the job is queued.
    crate::apps::check(
        &spec.task,
        &crate::apps::KeyFacts::from_info(&keys.info),
        &facts,
    )?;
    if let Task::Graph { graph_id } = &spec.task {
        state
            .object(tenant, graph_id)?
            .filter(|o| o.kind == ObjectKind::Graph)
            .ok_or_else(|| bad(format!("graph_id {graph_id:?} names no stored task graph")))?;
    }
    Ok(())
}

#[derive(serde::Deserialize)]
struct ListQuery {
    state: Option<String>,
    limit: Option<usize>,
    before: Option<i64>,
}

async fn list_jobs(
    axum::extract::State(app): axum::extract::State<AppState>,
    headers: HeaderMap,
    Query(q): Query<ListQuery>,
) -> ApiResult<Json<serde_json::Value>> {
    let tenant = tenant(&app, &headers).await?;
    let job_state = match q.state.as_deref() {
        None => None,
        Some(s) => Some(JobState::from_name(s).ok_or_else(|| {
            ApiError::bad(format!(
                "unknown job state {s:?}: use one of accepted, running, done, failed, cancelled"
            ))
        })?),
    };
    let limit = q.limit.unwrap_or(1000).min(10_000);
    let state = Arc::clone(&app.state);
    let before = q.before;
    let jobs = blocking(move || state.jobs_page(&tenant, job_state, before, limit)).await?;
    let next_before = next_page(limit, jobs.len(), jobs.last().map(|j| j.id));
    let views: Vec<JobView> = jobs.into_iter().map(|j| view(&app, j)).collect();
    Ok(Json(
        serde_json::json!({ "jobs": views, "next_before": next_before }),
    ))
}

async fn find_job(app: &AppState, tenant: &str, id: i64) -> ApiResult<JobRecord> {
    let state = Arc::clone(&app.state);
    let t = tenant.to_string();
    blocking(move || state.job(&t, id))
        .await?
        .ok_or_else(|| ApiError::not_found(&format!("job {id}")))
}

async fn get_job(
    axum::extract::State(app): axum::extract::State<AppState>,
    headers: HeaderMap,
    Path(id): Path<i64>,
) -> ApiResult<Json<JobView>> {
    let tenant = tenant(&app, &headers).await?;
    let rec = find_job(&app, &tenant, id).await?;
    Ok(Json(view(&app, rec)))
}

#[derive(serde::Deserialize)]
struct WaitQuery {
    timeout_s: Option<f64>,
}

/// Returns once the job has ended or `timeout_s` (default 30) has passed, whichever first.
async fn wait_job(
    axum::extract::State(app): axum::extract::State<AppState>,
    headers: HeaderMap,
    Path(id): Path<i64>,
    Query(q): Query<WaitQuery>,
) -> ApiResult<Json<JobView>> {
    let tenant = tenant(&app, &headers).await?;
    let timeout = wait_timeout(&app, q.timeout_s.or(Some(30.0)));
    let rec = wait_end(&app, &tenant, id, timeout).await?;
    Ok(Json(view(&app, rec)))
}

/// A request's wait (`timeout_s`: a finite, non-negative number of seconds; else none), at
/// most the server's limit.
fn wait_timeout(app: &AppState, timeout_s: Option<f64>) -> Duration {
    Duration::from_secs_f64(
        timeout_s
            .filter(|t| t.is_finite() && *t >= 0.0)
            .unwrap_or(0.0)
            .min(app.limits.max_wait.as_secs_f64()),
    )
}

/// The job's record once it has ended, or when `timeout` has passed, whichever first (woken
/// by its end, not polling).
async fn wait_end(
    app: &AppState,
    tenant: &str,
    id: i64,
    timeout: Duration,
) -> ApiResult<JobRecord> {
    if timeout.is_zero() {
        return find_job(app, tenant, id).await;
    }
    // Registered before reading the state, so an end between the two is not missed.
    let watch = app.worker.ended.watch(id);
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let ended = watch.notify.notified();
        tokio::pin!(ended);
        ended.as_mut().enable();
        let rec = find_job(app, tenant, id).await?;
        if rec.state.is_final() || tokio::time::Instant::now() >= deadline {
            return Ok(rec);
        }
        // Woken by this job's end (or cancel); the state is read again every 15 s regardless,
        // a safety net that costs thousands of long-polling clients little.
        let tick = (tokio::time::Instant::now() + Duration::from_secs(15)).min(deadline);
        let _ = tokio::time::timeout_at(tick, ended).await;
        if tokio::time::Instant::now() >= deadline {
            return find_job(app, tenant, id).await;
        }
    }
}

async fn cancel_job(
    axum::extract::State(app): axum::extract::State<AppState>,
    headers: HeaderMap,
    Path(id): Path<i64>,
) -> ApiResult<Json<JobView>> {
    let tenant = tenant(&app, &headers).await?;
    let state = Arc::clone(&app.state);
    let t = tenant.clone();
    let cancelled = blocking(move || state.cancel_job(&t, id)).await?;
    if cancelled {
        app.worker.cancel(id);
        app.worker.ended.notify(id);
    }
    let rec = find_job(&app, &tenant, id).await?;
    Ok(Json(view(&app, rec)))
}

/// `DELETE /v1/jobs/{id}` query.
#[derive(Debug, serde::Deserialize)]
struct DeleteJobQuery {
    /// Delete the job's result object too.
    #[serde(default)]
    result: bool,
}

async fn delete_job(
    axum::extract::State(app): axum::extract::State<AppState>,
    headers: HeaderMap,
    Path(id): Path<i64>,
    Query(q): Query<DeleteJobQuery>,
) -> ApiResult<StatusCode> {
    let tenant = tenant(&app, &headers).await?;
    let state = Arc::clone(&app.state);
    let deleted = blocking(move || {
        if q.result {
            state.delete_job_and_result(&tenant, id)
        } else {
            state.delete_job(&tenant, id)
        }
    });
    match deleted.await? {
        Some(true) => Ok(StatusCode::NO_CONTENT),
        Some(false) => Err(ApiError::new(
            StatusCode::CONFLICT,
            "not_ended",
            format!(
                "job {id} has not ended: cancel it first (POST /v1/jobs/{id}/cancel), then \
                 delete it"
            ),
        )),
        None => Err(ApiError::not_found(&format!("job {id}"))),
    }
}

async fn job_result(
    axum::extract::State(app): axum::extract::State<AppState>,
    headers: HeaderMap,
    Path(id): Path<i64>,
    Query(q): Query<WaitQuery>,
) -> ApiResult<Response> {
    let tenant = tenant(&app, &headers).await?;
    let waiting = q.timeout_s.is_some();
    let rec = wait_end(&app, &tenant, id, wait_timeout(&app, q.timeout_s)).await?;
    if waiting && !rec.state.is_final() {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "not_ended",
            format!(
                "job {id} is still {} after the wait: ask again (or wait with GET \
                 /v1/jobs/{id}/wait)",
                rec.state.name()
            ),
        ));
    }
    let Some(result) = rec
        .result_ref
        .clone()
        .filter(|_| rec.state == JobState::Done)
    else {
        let hint = match rec.state {
            JobState::Failed => format!(
                "job {id} failed: {}",
                rec.error.as_deref().unwrap_or("no reason recorded")
            ),
            JobState::Cancelled => format!("job {id} was cancelled: it has no result"),
            _ => format!(
                "job {id} is {}: wait for it (GET /v1/jobs/{id}/wait) before fetching its result",
                rec.state.name()
            ),
        };
        return Err(ApiError::new(StatusCode::CONFLICT, "no_result", hint));
    };
    let state = Arc::clone(&app.state);
    let result_id = result.clone();
    let data = blocking(move || state.read_object(&tenant, &result))
        .await?
        .ok_or_else(|| {
            ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "damaged",
                format!("job {id}'s result object is missing; submit the job again with a new key"),
            )
        })?;
    let mut response = binary(&app, data);
    if let Ok(v) = header::HeaderValue::from_str(&result_id) {
        response.headers_mut().insert(RESULT_ID_HEADER, v);
    }
    Ok(response)
}

/// The header naming a job result's object (`GET /v1/jobs/{id}/result`).
pub const RESULT_ID_HEADER: &str = "x-heloom-result-id";
