//! The HTTP API end to end: a real server on a loopback port, real keys and ciphertexts, every
//! result decrypted on the client side and checked.

use heloom_ckks::{keygen, Context, Decryptor, Encryptor, KeySet};
use heloom_runtime::graph::exp_coefficients;
use heloom_runtime::workload::default_params;
use heloom_serve::client::{Client, ClientError, JobsQuery, SubmitJob};
use heloom_serve::worker::Task;
use heloom_serve::{Server, ServerConfig, State};
use std::sync::Arc;
use std::time::Duration;

/// Error bound of a decrypted e^x or polynomial result at N = 2^12 with a 40-bit scale.
const TOL: f64 = 1e-4;

struct Tenant {
    ctx: Arc<Context<u64>>,
    keys: KeySet<u64>,
}

impl Tenant {
    fn new() -> Self {
        let ctx = Context::<u64>::new(default_params(12).expect("params")).expect("context");
        let keys = keygen(&ctx, &[], false).expect("keys");
        Self { ctx, keys }
    }

    fn encrypt(&self, xs: &[f64]) -> heloom_ckks::Ciphertext<u64> {
        Encryptor::new(&self.ctx)
            .encrypt(xs, &self.keys.public_key)
            .expect("encrypt")
    }

    fn decrypt(&self, ct: &heloom_ckks::Ciphertext<u64>) -> Vec<f64> {
        Decryptor::new(&self.ctx, &self.keys.secret_key)
            .expect("decryptor")
            .decrypt(ct)
            .expect("decrypt")
    }
}

/// A loopback server on a free port over `dir`, insecure test parameters allowed.
fn test_config(dir: &std::path::Path, threads: usize) -> ServerConfig {
    let model = Arc::new(heloom_runtime::Profile::load("xeon-phi-7230f").expect("profile"));
    let mut config = ServerConfig::new(dir.to_path_buf(), model);
    config.listen = "127.0.0.1:0".parse().expect("addr");
    config.threads = threads;
    config.allow_insecure = true;
    config
}

fn start(dir: &std::path::Path) -> Server {
    Server::start(test_config(dir, 2)).expect("server")
}

fn xs(n: usize, seed: u64) -> Vec<f64> {
    (0..n)
        .map(|i| (((i as u64 * 2654435761 + seed) % 2001) as f64 / 1000.0) - 1.0)
        .collect()
}

fn poly(c: &[f64], x: f64) -> f64 {
    c.iter().rev().fold(0.0, |acc, k| acc * x + k)
}

fn max_err(got: &[f64], want: impl Fn(usize) -> f64) -> f64 {
    got.iter()
        .enumerate()
        .map(|(i, g)| (g - want(i)).abs())
        .fold(0.0, f64::max)
}

fn api_code(e: ClientError) -> (u16, String, String) {
    match e {
        ClientError::Api {
            status,
            code,
            message,
            ..
        } => (status, code, message),
        other => panic!("expected an API error, got {other}"),
    }
}

/// Tenant `alice` on `server` with her key set and one encrypted input of slot values
/// `xs(slots, seed)` uploaded: her client, keys, key set id, input id and the values.
fn alice_with_input(server: &Server, seed: u64) -> (Client, Tenant, String, String, Vec<f64>) {
    let url = format!("http://{}", server.addr());
    let alice =
        Client::new(&url, &server.state().create_token("alice").expect("token")).expect("client");
    let a = Tenant::new();
    let key = alice
        .upload_keys(a.ctx.params(), &a.keys.evaluation_keys)
        .expect("keys");
    let x = xs(a.ctx.n() / 2, seed);
    let input = alice.upload_ciphertext(&a.encrypt(&x)).expect("ciphertext");
    (alice, a, key.id, input.id, x)
}

#[test]
fn jobs_run_and_tenants_are_isolated() {
    let dir = tempfile::tempdir().expect("dir");
    let server = start(dir.path());
    let url = format!("http://{}", server.addr());
    let alice_token = server.state().create_token("alice").expect("token");
    let bob_token = server.state().create_token("bob").expect("token");
    let alice = Client::new(&url, &alice_token).expect("client");
    let bob = Client::new(&url, &bob_token).expect("client");
    let a = Tenant::new();

    let key = alice
        .upload_keys(a.ctx.params(), &a.keys.evaluation_keys)
        .expect("keys");
    assert_eq!(key.id.len(), 64);
    let again = alice
        .upload_keys(a.ctx.params(), &a.keys.evaluation_keys)
        .expect("same keys again");
    assert_eq!(again.id, key.id, "content-addressed");
    let slots = a.ctx.n() / 2;
    let x = xs(slots, 7);
    let input = alice.upload_ciphertext(&a.encrypt(&x)).expect("ciphertext");

    // e^x and a polynomial, both decrypted and checked.
    let exp = alice
        .submit(&SubmitJob::new(
            "exp-1",
            &key.id,
            vec![input.id.clone()],
            Task::Exp { variant: None },
        ))
        .expect("submit");
    assert_eq!(exp.state, "accepted");
    let coeffs = vec![0.5, -1.0, 0.25, 0.125];
    let pj = alice
        .submit(&SubmitJob::new(
            "poly-1",
            &key.id,
            vec![input.id.clone()],
            Task::Polynomial {
                coefficients: coeffs.clone(),
            },
        ))
        .expect("submit");
    let done = alice.wait(exp.id, Duration::from_secs(120)).expect("wait");
    assert_eq!(done.state, "done", "{:?}", done.error);
    let out = alice.result(exp.id, &a.ctx).expect("result");
    assert_eq!(out.len(), 1);
    let c6 = exp_coefficients(6);
    let err = max_err(&a.decrypt(&out[0])[..slots], |i| poly(&c6, x[i]));
    assert!(err < TOL, "e^x error {err}");
    let pdone = alice.wait(pj.id, Duration::from_secs(120)).expect("wait");
    assert_eq!(pdone.state, "done", "{:?}", pdone.error);
    let pout = alice.result(pj.id, &a.ctx).expect("result");
    let err = max_err(&a.decrypt(&pout[0])[..slots], |i| poly(&coeffs, x[i]));
    assert!(err < TOL, "polynomial error {err}");

    // Idempotency: the same key and job give the same job; the key reused for another job
    // is refused.
    let retry = alice
        .submit(&SubmitJob::new(
            "exp-1",
            &key.id,
            vec![input.id.clone()],
            Task::Exp { variant: None },
        ))
        .expect("retry");
    assert_eq!(retry.id, exp.id);
    assert_eq!(retry.state, "done");
    let (status, code, _) = api_code(
        alice
            .submit(&SubmitJob::new(
                "exp-1",
                &key.id,
                vec![input.id.clone()],
                Task::Polynomial {
                    coefficients: vec![1.0],
                },
            ))
            .expect_err("conflict"),
    );
    assert_eq!((status, code.as_str()), (409, "idempotency_conflict"));

    // Bob sees none of it: 404 for the job, its result and the objects; alice's ids are
    // unknown to him when he submits.
    for e in [
        bob.job(exp.id).expect_err("job"),
        bob.result_bytes(exp.id).expect_err("result"),
        bob.cancel(exp.id).expect_err("cancel"),
    ] {
        assert_eq!(api_code(e).0, 404);
    }
    assert_eq!(
        api_code(bob.delete_object(&key.id).expect_err("delete")).0,
        404
    );
    assert!(bob.jobs().expect("jobs").is_empty());
    assert!(bob.objects().expect("objects").is_empty());
    let (status, _, message) = api_code(
        bob.submit(&SubmitJob::new(
            "b",
            &key.id,
            vec![input.id.clone()],
            Task::Exp { variant: None },
        ))
        .expect_err("foreign key"),
    );
    assert_eq!(status, 400);
    assert!(message.contains("no stored key set"), "{message}");
    assert_eq!(alice.jobs().expect("jobs").len(), 2);
    // Listing a page at a time: newest first, the cursor continues exactly where it stopped.
    let all = alice.jobs().expect("jobs");
    let first = alice
        .jobs_page(&JobsQuery {
            limit: Some(1),
            ..JobsQuery::default()
        })
        .expect("page 1");
    assert_eq!(first.jobs.len(), 1);
    assert_eq!(first.jobs[0].id, all[0].id);
    assert_eq!(first.next_before, Some(all[0].id));
    let second = alice
        .jobs_page(&JobsQuery {
            limit: Some(1),
            before: first.next_before,
            ..JobsQuery::default()
        })
        .expect("page 2");
    assert_eq!(second.jobs.len(), 1);
    assert_eq!(second.jobs[0].id, all[1].id);
    let third = alice
        .jobs_page(&JobsQuery {
            limit: Some(1),
            before: second.next_before,
            ..JobsQuery::default()
        })
        .expect("page 3");
    assert!(third.jobs.is_empty() && third.next_before.is_none());
    // Objects a page at a time, the same way.
    let objects = alice.objects().expect("objects");
    assert!(objects.len() >= 2, "{objects:?}");
    let p1 = alice.objects_page(Some(1), None).expect("objects page 1");
    assert_eq!(p1.objects, objects[..1]);
    let p2 = alice
        .objects_page(Some(1), p1.next_before)
        .expect("objects page 2");
    assert_eq!(p2.objects, objects[1..2]);
    assert_eq!(alice.all_objects().expect("all objects"), objects);
    let ids = |v: Vec<heloom_serve::api::JobView>| v.into_iter().map(|j| j.id).collect::<Vec<_>>();
    assert_eq!(ids(alice.all_jobs(None).expect("all")), ids(all));
    let (status, _, message) = api_code(
        alice
            .jobs_page(&JobsQuery {
                state: Some("finished".into()),
                ..JobsQuery::default()
            })
            .expect_err("unknown state"),
    );
    assert_eq!(status, 400);
    assert!(message.contains("unknown job state"), "{message}");

    // No token, a wrong token: 401.
    let anon = Client::new(&url, "hlm_0000").expect("client");
    assert_eq!(api_code(anon.jobs().expect_err("401")).0, 401);

    // A secret key is refused, and so is garbage.
    let (status, _, message) = api_code(
        alice
            .upload(a.keys.secret_key.to_bytes())
            .expect_err("secret key"),
    );
    assert_eq!(status, 400);
    assert!(message.contains("never takes secret keys"), "{message}");
    let (status, _, message) = api_code(
        alice
            .upload(b"not a heloom object".to_vec())
            .expect_err("junk"),
    );
    assert_eq!(status, 400);
    assert!(message.contains("HELM"), "{message}");
    // A ciphertext for parameters bob has no keys for.
    let (status, _, message) =
        api_code(bob.upload_ciphertext(&a.encrypt(&x)).expect_err("no keys"));
    assert_eq!(status, 400);
    assert!(message.contains("upload the parameters"), "{message}");

    // Health, readiness and metrics (no token needed). reqwest as built here has no TLS
    // provider of its own: give it rustls' (plain HTTP never uses it, but the builder asks).
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    let http = reqwest::blocking::Client::new();
    let get = |p: &str| http.get(format!("{url}{p}")).send().expect("get");
    assert_eq!(get("/healthz").status().as_u16(), 200);
    assert_eq!(get("/readyz").status().as_u16(), 200);
    let m = get("/metrics").text().expect("metrics");
    assert!(
        m.contains("heloom_jobs_finished_total{tenant=\"alice\",state=\"done\"} 2"),
        "{m}"
    );
    assert!(
        m.contains("heloom_job_latency_seconds_count{tenant=\"alice\"} 2"),
        "{m}"
    );
    assert!(m.contains("heloom_device_threads 2"), "{m}");
    assert_eq!(get("/v2/nothing").status().as_u16(), 404);
    // HTTP/2 (prior knowledge, cleartext) on the same port.
    let h2 = reqwest::blocking::Client::builder()
        .http2_prior_knowledge()
        .build()
        .expect("h2 client");
    let r = h2
        .get(format!("{url}/v1/jobs"))
        .bearer_auth(&alice_token)
        .send()
        .expect("h2");
    assert_eq!(r.version(), reqwest::Version::HTTP_2);
    assert_eq!(r.status().as_u16(), 200);
}

#[test]
fn result_level_drops_the_result_exactly() {
    let dir = tempfile::tempdir().expect("dir");
    let server = start(dir.path());
    let (alice, a, key_id, input_id, x) = alice_with_input(&server, 11);
    let slots = a.ctx.n() / 2;
    let c6 = exp_coefficients(6);
    let exp = alice
        .submit(&SubmitJob::new(
            "exp-1",
            &key_id,
            vec![input_id.clone()],
            Task::Exp { variant: None },
        ))
        .expect("submit");
    assert_eq!(
        alice
            .wait(exp.id, Duration::from_secs(120))
            .expect("wait")
            .state,
        "done"
    );
    let out = alice.result(exp.id, &a.ctx).expect("result");
    // The same e^x with its result dropped to level 0: fewer bytes, the same values. The
    // level is part of the job (another key: the same key with it is another job).
    let mut low = SubmitJob::new(
        "exp-low",
        &key_id,
        vec![input_id.clone()],
        Task::Exp { variant: None },
    );
    low.result_level = Some(0);
    let low = alice.submit(&low).expect("submit");
    assert_eq!(
        alice
            .wait(low.id, Duration::from_secs(120))
            .expect("wait")
            .state,
        "done"
    );
    let low_out = alice.result(low.id, &a.ctx).expect("result");
    assert!(out[0].level() > 0);
    assert_eq!(low_out[0].level(), 0);
    let (full_bytes, low_bytes) = (
        alice.result_bytes(exp.id).expect("bytes").len(),
        alice.result_bytes(low.id).expect("bytes").len(),
    );
    // Bit-packed words: level 0 keeps q0's bits of the primes' total.
    assert!(
        low_bytes * 3 <= full_bytes + 256,
        "{low_bytes} bytes at level 0, {full_bytes} at level {}",
        out[0].level()
    );
    let err = max_err(&a.decrypt(&low_out[0])[..slots], |i| poly(&c6, x[i]));
    assert!(err < TOL, "e^x error at level 0 {err}");
    // A result's own checksums (what a --ray front checks instead of hashing it again).
    let mut bytes = alice.result_bytes(low.id).expect("bytes");
    heloom_serve::objects::check_result_checksums(&bytes).expect("sound");
    let mid = bytes.len() / 2;
    bytes[mid] ^= 4;
    assert!(heloom_serve::objects::check_result_checksums(&bytes).is_err());
    let mut conflicting = SubmitJob::new(
        "exp-1",
        &key_id,
        vec![input_id.clone()],
        Task::Exp { variant: None },
    );
    conflicting.result_level = Some(0);
    let (status, code, _) = api_code(alice.submit(&conflicting).expect_err("conflict"));
    assert_eq!((status, code.as_str()), (409, "idempotency_conflict"));

    // Deleting the ended job's record frees its key; its result object stays.
    let result_id = alice.job(exp.id).expect("job").result_id.expect("a result");
    alice.delete_job(exp.id).expect("delete");
    assert_eq!(api_code(alice.job(exp.id).expect_err("gone")).0, 404);
    assert_eq!(api_code(alice.delete_job(exp.id).expect_err("gone")).0, 404);
    assert!(alice
        .objects()
        .expect("objects")
        .iter()
        .any(|o| o.id == result_id));
    let again = alice.submit(&conflicting).expect("the key is free");
    assert!(again.id != exp.id);
}

#[test]
fn accepted_jobs_survive_a_restart() {
    let dir = tempfile::tempdir().expect("dir");
    let a = Tenant::new();
    let slots = a.ctx.n() / 2;
    let mut ids = Vec::new();
    let mut inputs = Vec::new();
    let (token, key_id) = {
        let server = start(dir.path());
        let url = format!("http://{}", server.addr());
        let token = server.state().create_token("alice").expect("token");
        let c = Client::new(&url, &token).expect("client");
        let key = c
            .upload_keys(a.ctx.params(), &a.keys.evaluation_keys)
            .expect("keys");
        for j in 0..6 {
            let x = xs(slots, j);
            let input = c.upload_ciphertext(&a.encrypt(&x)).expect("ciphertext");
            let job = c
                .submit(&SubmitJob::new(
                    &format!("job-{j}"),
                    &key.id,
                    vec![input.id],
                    Task::Exp { variant: None },
                ))
                .expect("submit");
            ids.push(job.id);
            inputs.push(x);
        }
        // Stopped at once: jobs queued or mid-run stay in the database.
        (token, key.id)
    };
    let server = start(dir.path());
    let c = Client::new(&format!("http://{}", server.addr()), &token).expect("client");
    let c6 = exp_coefficients(6);
    for (id, x) in ids.iter().zip(&inputs) {
        let job = c.wait(*id, Duration::from_secs(120)).expect("wait");
        assert_eq!(job.state, "done", "{:?}", job.error);
        let out = c.result(*id, &a.ctx).expect("result");
        let err = max_err(&a.decrypt(&out[0])[..slots], |i| poly(&c6, x[i]));
        assert!(err < TOL, "job {id}: error {err}");
    }
    // The key set survived too: a new job with it runs.
    let x = xs(slots, 99);
    let input = c.upload_ciphertext(&a.encrypt(&x)).expect("ciphertext");
    let job = c
        .submit(&SubmitJob::new(
            "after",
            &key_id,
            vec![input.id],
            Task::Exp { variant: None },
        ))
        .expect("submit");
    assert_eq!(
        c.wait(job.id, Duration::from_secs(120))
            .expect("wait")
            .state,
        "done"
    );
}

#[test]
fn limits_are_enforced_with_clear_errors() {
    let dir = tempfile::tempdir().expect("dir");
    let mut config = test_config(dir.path(), 1);
    config.limits.max_upload_bytes = 4 << 20;
    config.limits.max_queued_jobs = 0;
    let server = Server::start(config).expect("server");
    let url = format!("http://{}", server.addr());
    let token = server.state().create_token("carol").expect("token");
    let c = Client::new(&url, &token).expect("client");
    let a = Tenant::new();

    // Over the upload limit: 413 before anything is stored.
    let (status, code, message) = api_code(c.upload(vec![0u8; 5 << 20]).expect_err("too large"));
    assert_eq!((status, code.as_str()), (413, "too_large"), "{message}");
    assert!(c.objects().expect("objects").is_empty());
    // Truncated and corrupted objects: 400, nothing stored.
    let mut ct = a.encrypt(&[0.5]).to_bytes();
    let truncated = ct[..ct.len() / 2].to_vec();
    let key = c
        .upload_keys(a.ctx.params(), &a.keys.evaluation_keys)
        .expect("keys");
    let (status, _, message) = api_code(c.upload(truncated).expect_err("truncated"));
    assert_eq!(status, 400, "{message}");
    let mid = ct.len() / 2;
    ct[mid] ^= 1;
    let (status, _, message) = api_code(c.upload(ct).expect_err("corrupted"));
    assert_eq!(status, 400, "{message}");
    assert!(message.contains("checksum"), "{message}");
    assert_eq!(c.objects().expect("objects").len(), 1);

    // A queue at its limit: 429 with a retry hint; a deadline in the past: 400.
    let input = c.upload_ciphertext(&a.encrypt(&[0.5])).expect("ciphertext");
    let job = SubmitJob::new(
        "q",
        &key.id,
        vec![input.id.clone()],
        Task::Exp { variant: None },
    );
    match c.submit(&job).expect_err("queue full") {
        ClientError::Api {
            status,
            code,
            retry_after_s,
            ..
        } => {
            assert_eq!((status, code.as_str()), (429, "queue_full"));
            assert!(retry_after_s.is_some());
        }
        other => panic!("{other}"),
    }
    let mut late = job.clone();
    late.deadline_unix = Some(1);
    let (status, _, message) = api_code(c.submit(&late).expect_err("past deadline"));
    assert_eq!(status, 400);
    assert!(message.contains("already passed"), "{message}");
    // Unknown task details are refused at once, not when the job runs.
    let bad = SubmitJob::new(
        "v",
        &key.id,
        vec![input.id],
        Task::Exp {
            variant: Some("taylor".into()),
        },
    );
    let (status, _, message) = api_code(c.submit(&bad).expect_err("variant"));
    assert_eq!(status, 400);
    assert!(message.contains("horner"), "{message}");
    assert!(c.jobs().expect("jobs").is_empty());
}

#[test]
fn a_stored_quota_stops_uploads() {
    let dir = tempfile::tempdir().expect("dir");
    let mut config = test_config(dir.path(), 1);
    config.limits.max_stored_bytes = 100_000;
    let server = Server::start(config).expect("server");
    let token = server.state().create_token("dave").expect("token");
    let c = Client::new(&format!("http://{}", server.addr()), &token).expect("client");
    let a = Tenant::new();
    let (status, code, message) = api_code(
        c.upload_keys(a.ctx.params(), &a.keys.evaluation_keys)
            .expect_err("quota"),
    );
    assert_eq!((status, code.as_str()), (507, "quota"), "{message}");
    assert!(c.objects().expect("objects").is_empty());
    // Nothing left behind in the upload area either.
    let incoming = dir.path().join("objects").join(".incoming");
    let left = std::fs::read_dir(&incoming).map_or(0, |d| d.count());
    assert_eq!(left, 0);
}

#[test]
fn https_with_a_private_ca() {
    let dir = tempfile::tempdir().expect("dir");
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).expect("cert");
    let cert_pem = cert.cert.pem();
    std::fs::write(dir.path().join("cert.pem"), &cert_pem).expect("write");
    std::fs::write(dir.path().join("key.pem"), cert.key_pair.serialize_pem()).expect("write");
    let mut config = test_config(&dir.path().join("data"), 1);
    config.tls = Some(heloom_serve::TlsFiles {
        cert: dir.path().join("cert.pem"),
        key: dir.path().join("key.pem"),
    });
    let server = Server::start(config).expect("server");
    assert!(server.is_tls());
    let token = server.state().create_token("erin").expect("token");
    let url = format!("https://localhost:{}", server.addr().port());
    let c = Client::with_ca(&url, &token, cert_pem.as_bytes()).expect("client");
    let a = Tenant::new();
    let key = c
        .upload_keys(a.ctx.params(), &a.keys.evaluation_keys)
        .expect("keys over TLS");
    let x = xs(a.ctx.n() / 2, 3);
    let input = c.upload_ciphertext(&a.encrypt(&x)).expect("ciphertext");
    let job = c
        .submit(&SubmitJob::new(
            "tls",
            &key.id,
            vec![input.id],
            Task::Exp { variant: None },
        ))
        .expect("submit");
    assert_eq!(
        c.wait(job.id, Duration::from_secs(120))
            .expect("wait")
            .state,
        "done"
    );
    let out = c.result(job.id, &a.ctx).expect("result");
    let c6 = exp_coefficients(6);
    let err = max_err(&a.decrypt(&out[0])[..x.len()], |i| poly(&c6, x[i]));
    assert!(err < TOL, "error {err}");
    // A client that does not trust the certificate cannot talk to it; plain HTTP neither.
    let untrusting = Client::new(&url, &token).expect("client");
    assert!(matches!(
        untrusting.jobs(),
        Err(ClientError::Transport { .. })
    ));
    let plain = Client::new(
        &format!("http://127.0.0.1:{}", server.addr().port()),
        &token,
    )
    .expect("client");
    assert!(plain.jobs().is_err());
    // Bad certificate files are refused with the path in the message.
    let mut bad = test_config(&dir.path().join("data2"), 1);
    bad.tls = Some(heloom_serve::TlsFiles {
        cert: dir.path().join("missing.pem"),
        key: dir.path().join("key.pem"),
    });
    let e = Server::start(bad).expect_err("missing cert").to_string();
    assert!(e.contains("missing.pem"), "{e}");
}

#[test]
fn one_server_per_data_directory() {
    let dir = tempfile::tempdir().expect("dir");
    let first = start(dir.path());
    let e = Server::start(test_config(dir.path(), 1)).expect_err("a second server");
    assert!(
        matches!(e, heloom_serve::ServeError::DataDirInUse { .. }),
        "{e}"
    );
    assert!(e.to_string().contains("another --data directory"), "{e}");
    // Token commands still open the directory while the server runs.
    let token = State::open(dir.path())
        .expect("state")
        .create_token("carol")
        .expect("token");
    assert_eq!(
        first.state().authenticate(&token).expect("auth").as_deref(),
        Some("carol")
    );
    drop(first);
    drop(start(dir.path()));
}

#[test]
fn a_batch_is_accepted_whole_or_not_at_all() {
    let dir = tempfile::tempdir().expect("dir");
    let mut config = test_config(dir.path(), 2);
    config.limits.max_queued_jobs = 5;
    let server = Server::start(config).expect("server");
    let url = format!("http://{}", server.addr());
    let c =
        Client::new(&url, &server.state().create_token("dana").expect("token")).expect("client");
    let a = Tenant::new();
    let key = c
        .upload_keys(a.ctx.params(), &a.keys.evaluation_keys)
        .expect("keys");
    let slots = a.ctx.n() / 2;
    let xs3: Vec<Vec<f64>> = (0..3).map(|i| xs(slots, 40 + i)).collect();
    let inputs: Vec<String> = xs3
        .iter()
        .map(|x| c.upload_ciphertext(&a.encrypt(x)).expect("ciphertext").id)
        .collect();
    let job = |k: &str, i: usize| {
        let mut j = SubmitJob::new(
            k,
            &key.id,
            vec![inputs[i].clone()],
            Task::Exp { variant: None },
        );
        j.result_level = Some(0);
        j
    };
    // One job submitted alone first; the batch repeats it (a retry), adds two, and names one
    // key twice: four answers, three jobs, in order.
    let first = c.submit(&job("b-0", 0)).expect("submit");
    let batch = c
        .submit_batch(&[job("b-0", 0), job("b-1", 1), job("b-2", 2), job("b-1", 1)])
        .expect("batch");
    assert_eq!(batch.len(), 4);
    assert_eq!(batch[0].id, first.id);
    assert_eq!(batch[3].id, batch[1].id);
    assert!(batch[1].id != batch[2].id && batch[2].id != first.id);
    let c6 = exp_coefficients(6);
    for (v, x) in batch.iter().zip(xs3.iter().chain([&xs3[1]])) {
        assert_eq!(
            c.wait(v.id, Duration::from_secs(120)).expect("wait").state,
            "done"
        );
        let out = c.result(v.id, &a.ctx).expect("result");
        let err = max_err(&a.decrypt(&out[0])[..slots], |i| poly(&c6, x[i]));
        assert!(err < TOL, "job {}: error {err}", v.id);
    }
    assert_eq!(c.jobs().expect("jobs").len(), 3);

    // Nothing of a batch is accepted when one job is wrong: a conflict (409), an unknown
    // input (400 naming the job), an empty or too large batch (400).
    let conflict = SubmitJob::new(
        "b-2",
        &key.id,
        vec![inputs[2].clone()],
        Task::Polynomial {
            coefficients: vec![1.0],
        },
    );
    let (status, code, _) = api_code(
        c.submit_batch(&[job("b-3", 0), conflict])
            .expect_err("conflict"),
    );
    assert_eq!((status, code.as_str()), (409, "idempotency_conflict"));
    let mut unknown = job("b-4", 0);
    unknown.inputs = vec!["0".repeat(64)];
    let (status, _, message) = api_code(
        c.submit_batch(&[job("b-3", 0), unknown])
            .expect_err("unknown input"),
    );
    assert_eq!(status, 400);
    assert!(message.starts_with("job 1: "), "{message}");
    let (status, _, message) = api_code(c.submit_batch(&[]).expect_err("empty"));
    assert_eq!(status, 400);
    assert!(message.contains("send 1 to 1000"), "{message}");
    let many: Vec<SubmitJob> = (0..1001).map(|i| job(&format!("m-{i}"), 0)).collect();
    assert_eq!(
        api_code(c.submit_batch(&many).expect_err("too many")).0,
        400
    );
    assert_eq!(c.jobs().expect("jobs").len(), 3, "nothing accepted");

    // The queue limit (5 here) counts the batch's new jobs: six at once do not fit, five do.
    let six: Vec<SubmitJob> = (0..6).map(|i| job(&format!("q-{i}"), i % 3)).collect();
    let (status, code, message) = api_code(c.submit_batch(&six).expect_err("queue"));
    assert_eq!((status, code.as_str()), (429, "queue_full"), "{message}");
    assert!(message.contains("fewer jobs at once"), "{message}");
    assert_eq!(c.jobs().expect("jobs").len(), 3, "nothing accepted");
    let five = c.submit_batch(&six[..5]).expect("five fit");
    assert_eq!(five.len(), 5);
}

/// The express slot: a tenant with nothing running starts at once beside a tenant holding
/// every regular slot, before any of that tenant's jobs ends (not at the next free slot).
#[test]
fn a_light_tenant_starts_while_a_busy_one_holds_every_slot() {
    let dir = tempfile::tempdir().expect("dir");
    // One thread: two regular slots (threads + 1) and the express slot.
    let server = Server::start(test_config(dir.path(), 1)).expect("server");
    let url = format!("http://{}", server.addr());
    let busy =
        Client::new(&url, &server.state().create_token("busy").expect("token")).expect("client");
    let light =
        Client::new(&url, &server.state().create_token("light").expect("token")).expect("client");
    // N = 2^14: each busy job takes 60-120 ms on its thread, far above a start's delay on a
    // loaded machine (at 2^13 a 40 ms run against starts delayed up to 20 ms by the other
    // tests' load made this flaky).
    let ctx = Context::<u64>::new(default_params(14).expect("params")).expect("context");
    let keys = keygen(&ctx, &[], false).expect("keys");
    let t = Tenant { ctx, keys };
    let slots = t.ctx.n() / 2;
    let x = xs(slots, 3);
    let (bkey, lkey) = (
        busy.upload_keys(t.ctx.params(), &t.keys.evaluation_keys)
            .expect("keys"),
        light
            .upload_keys(t.ctx.params(), &t.keys.evaluation_keys)
            .expect("keys"),
    );
    let (bin, lin) = (
        busy.upload_ciphertext(&t.encrypt(&x)).expect("input"),
        light.upload_ciphertext(&t.encrypt(&x)).expect("input"),
    );
    // Degree-60 polynomials on one thread: the busy tenant's first two are still running when
    // the light tenant's job arrives.
    let coefficients: Vec<f64> = (0..=60).map(|k| 1.0 / (1 + k * k) as f64).collect();
    let task = Task::Polynomial { coefficients };
    let batch: Vec<SubmitJob> = (0..6)
        .map(|i| {
            SubmitJob::new(
                &format!("b{i}"),
                &bkey.id,
                vec![bin.id.clone()],
                task.clone(),
            )
        })
        .collect();
    let heavy = busy.submit_batch(&batch).expect("batch");
    // The light job comes once busy jobs hold both regular slots (earlier, fair queueing
    // alone would give it a free one).
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let running = heavy
            .iter()
            .filter(|j| busy.job(j.id).is_ok_and(|v| v.state == "running"))
            .count();
        if running == 2 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the busy jobs never held both slots"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    let l = light
        .submit(&SubmitJob::new(
            "l",
            &lkey.id,
            vec![lin.id.clone()],
            task.clone(),
        ))
        .expect("submit");
    let l = light.wait(l.id, Duration::from_secs(120)).expect("wait");
    assert_eq!(l.state, "done", "{:?}", l.error);
    // Without the express slot the light job would wait for a busy job to end (up to a busy
    // job's run time: 46-126 ms against runs of 62-69 ms when tried); with it, it starts at
    // once (0 ms; up to about 25 ms with two busy loops beside the test).
    let mut shortest_run = i64::MAX;
    for j in &heavy {
        let j = busy.wait(j.id, Duration::from_secs(120)).expect("wait");
        assert_eq!(j.state, "done", "{:?}", j.error);
        let run = j.finished_ms.expect("finished") - j.started_ms.expect("started");
        shortest_run = shortest_run.min(run);
    }
    let waited = l.started_ms.expect("started") - l.created_ms;
    assert!(
        waited * 2 < shortest_run,
        "the light tenant's job waited {waited} ms to start while busy jobs held both regular \
         slots; the busy tenant's jobs ran at least {shortest_run} ms each"
    );
}

#[test]
fn a_result_is_waited_for_and_deleted_with_its_job() {
    let dir = tempfile::tempdir().expect("dir");
    // One thread, so jobs queue behind each other.
    let server = Server::start(test_config(dir.path(), 1)).expect("server");
    let (alice, a, key_id, input_id, x) = alice_with_input(&server, 5);
    let slots = a.ctx.n() / 2;
    // Degree-60 polynomials: tens of ms each on one thread, so the last of a batch is still
    // queued when asked about right after the submission.
    let coefficients: Vec<f64> = (0..=60).map(|k| 1.0 / (1 + k * k) as f64).collect();
    let job = |name: &str| {
        SubmitJob::new(
            name,
            &key_id,
            vec![input_id.clone()],
            Task::Polynomial {
                coefficients: coefficients.clone(),
            },
        )
    };
    let batch: Vec<SubmitJob> = (0..4).map(|i| job(&format!("p{i}"))).collect();
    let jobs = alice.submit_batch(&batch).expect("batch");
    let last = jobs[3].id;
    // Not ended: no result yet, and its record cannot be deleted.
    assert!(alice
        .result_wait(last, Duration::ZERO)
        .expect("asked")
        .is_none());
    let (status, code, _) = api_code(alice.delete_job_with_result(last).expect_err("running"));
    assert_eq!((status, code.as_str()), (409, "not_ended"));
    // A cancelled job ends without a result.
    let gone = alice.submit(&job("cancelled")).expect("submit");
    alice.cancel(gone.id).expect("cancel");
    let (status, code, _) = api_code(
        alice
            .result_wait(gone.id, Duration::from_secs(5))
            .expect_err("no result"),
    );
    assert_eq!((status, code.as_str()), (409, "no_result"));
    // Waited for: the same bytes as the plain fetch, named by the job's result object.
    let (bytes, result_id) = alice
        .result_wait(last, Duration::from_secs(120))
        .expect("result")
        .expect("ended within the wait");
    assert_eq!(
        alice.job(last).expect("job").result_id.as_deref(),
        Some(result_id.as_str())
    );
    assert_eq!(bytes, alice.result_bytes(last).expect("bytes"));
    let out = heloom_serve::objects::parse_ciphertexts(&bytes, &a.ctx).expect("parse");
    let err = max_err(&a.decrypt(&out[0])[..slots], |i| poly(&coefficients, x[i]));
    assert!(err < TOL, "polynomial error {err}");
    // Deleted with its job in one request; its sibling jobs name the same object (the same
    // input and task), which is gone for them too, as after DELETE /v1/objects/{id}.
    alice.delete_job_with_result(last).expect("delete");
    assert_eq!(api_code(alice.job(last).expect_err("gone")).0, 404);
    assert!(!alice
        .objects()
        .expect("objects")
        .iter()
        .any(|o| o.id == result_id));
    assert_eq!(
        api_code(alice.result_bytes(jobs[0].id).expect_err("gone")).0,
        500
    );
}
