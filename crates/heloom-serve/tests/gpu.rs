//! The GPU as a device of the server, on the host emulator of heloom's CUDA kernels (the same
//! kernels a GPU runs; real GPUs: `bench/gpu/run-on-gpu.sh`): jobs pulled by the GPU beside
//! the CPU lanes come out correct and bit-exact with the CPU's (their results' content
//! addresses are equal), the GPU shows in `/metrics`, and a GPU that cannot be opened stops the
//! start with what to do.
//!
//! Parameters: N = 2^10, six 29-bit primes over a 30-bit `q_0` (test-only security: the
//! emulator is slow). Bound: e^x's degree-6 polynomial within 1e-3 of the f64 value for inputs
//! in [-1, 1] at scale 2^29.

use heloom_ckks::{keygen, CkksParameters, Context, Decryptor, Encryptor, SecurityLevel};
use heloom_runtime::graph::exp_coefficients;
use heloom_serve::client::{Client, SubmitJob};
use heloom_serve::gpu::GpuChoice;
use heloom_serve::worker::Task;
use heloom_serve::{Server, ServerConfig};
use std::sync::Arc;
use std::time::Duration;

fn config(dir: &std::path::Path, gpu: GpuChoice) -> ServerConfig {
    let model = Arc::new(heloom_runtime::Profile::load("xeon-phi-7230f").expect("profile"));
    let mut c = ServerConfig::new(dir.to_path_buf(), model);
    c.listen = "127.0.0.1:0".parse().expect("addr");
    c.threads = 1;
    c.allow_insecure = true;
    c.gpu = gpu;
    c
}

/// A server with `gpu`, its URL and tenant alice's client.
fn start(dir: &std::path::Path, gpu: GpuChoice) -> (Server, String, Client) {
    let server = Server::start(config(dir, gpu)).expect("server");
    let url = format!("http://{}", server.addr());
    let c = Client::new(&url, &server.state().create_token("alice").expect("token")).expect("c");
    (server, url, c)
}

fn metrics(url: &str) -> String {
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    reqwest::blocking::Client::new()
        .get(format!("{url}/metrics"))
        .send()
        .expect("metrics")
        .text()
        .expect("text")
}

fn series(text: &str, name: &str) -> f64 {
    text.lines()
        .find(|l| l.starts_with(name))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in\n{text}"))
}

#[test]
fn jobs_the_gpu_pulls_are_bit_exact_with_the_cpu() {
    let params = CkksParameters::builder(1 << 10)
        .levels(6)
        .scale_bits(29)
        .first_bits(30)
        .security(SecurityLevel::None)
        .build()
        .expect("params");
    let ctx = Context::<u64>::new(params).expect("context");
    let keys = keygen(&ctx, &[], false).expect("keys");
    let slots = ctx.n() / 2;
    let x: Vec<f64> = (0..slots)
        .map(|i| 2.0 * i as f64 / slots as f64 - 1.0)
        .collect();
    let ct = Encryptor::new(&ctx)
        .encrypt_symmetric(&x, &keys.secret_key)
        .expect("encrypt");
    let task = Task::Exp { variant: None };

    // The GPU server: one CPU thread (two slots) and the emulated GPU pull from one queue;
    // sixteen jobs at once leave the GPU some.
    let dir = tempfile::tempdir().expect("dir");
    let (server, url, c) = start(dir.path(), GpuChoice::Emulator);
    let key = c
        .upload_keys(ctx.params(), &keys.evaluation_keys)
        .expect("keys");
    let input = c.upload_ciphertext(&ct).expect("input");
    let batch: Vec<SubmitJob> = (0..16)
        .map(|i| {
            SubmitJob::new(
                &format!("e{i}"),
                &key.id,
                vec![input.id.clone()],
                task.clone(),
            )
        })
        .collect();
    let jobs = c.submit_batch(&batch).expect("batch");
    let mut ids = Vec::new();
    for j in &jobs {
        let done = c.wait(j.id, Duration::from_secs(300)).expect("wait");
        assert_eq!(done.state, "done", "{:?}", done.error);
        ids.push(done.result_id.expect("result id"));
    }
    let gpu_jobs = |m: &str| series(m, "heloom_gpu_jobs_total{device=\"gpu-emulator\"}");
    let m = metrics(&url);
    let on_gpu = gpu_jobs(&m);
    eprintln!("the GPU ran {on_gpu} of 16 jobs");
    assert!(on_gpu >= 1.0, "the GPU ran none of 16 jobs:\n{m}");
    // Level-0 results (the limbs dropped on the device before the download).
    let low: Vec<SubmitJob> = (0..16)
        .map(|i| {
            let mut j = SubmitJob::new(
                &format!("l{i}"),
                &key.id,
                vec![input.id.clone()],
                task.clone(),
            );
            j.result_level = Some(0);
            j
        })
        .collect();
    let mut low_ids = Vec::new();
    for j in &c.submit_batch(&low).expect("batch") {
        let done = c.wait(j.id, Duration::from_secs(300)).expect("wait");
        assert_eq!(done.state, "done", "{:?}", done.error);
        low_ids.push(done.result_id.expect("result id"));
    }
    assert!(
        gpu_jobs(&metrics(&url)) > on_gpu,
        "the GPU ran none of the level-0 jobs"
    );
    assert!(low_ids.iter().all(|i| *i == low_ids[0]), "{low_ids:?}");
    assert_ne!(low_ids[0], ids[0]);
    let m = metrics(&url);
    assert_eq!(series(&m, "heloom_gpu_failures_total"), 0.0);
    assert!(series(&m, "heloom_gpu_busy_seconds_total") > 0.0);
    // Every device gave the same bytes: one content address for the sixteen results.
    assert!(ids.iter().all(|i| *i == ids[0]), "results differ: {ids:?}");
    let out = c.result(jobs[0].id, &ctx).expect("result");
    let got = Decryptor::new(&ctx, &keys.secret_key)
        .expect("decryptor")
        .decrypt(&out[0])
        .expect("decrypt");
    let c6 = exp_coefficients(6);
    let err = (0..slots)
        .map(|i| (got[i] - c6.iter().rev().fold(0.0, |a, k| a * x[i] + k)).abs())
        .fold(0.0, f64::max);
    assert!(err < 1e-3, "e^x error {err}");
    drop(server);

    // A CPU-only server computes the same bytes for the same job.
    let dir2 = tempfile::tempdir().expect("dir");
    let (_cpu, url2, c2) = start(dir2.path(), GpuChoice::Off);
    let key2 = c2
        .upload_keys(ctx.params(), &keys.evaluation_keys)
        .expect("keys");
    let input2 = c2.upload_ciphertext(&ct).expect("input");
    assert_eq!(input2.id, input.id);
    let j = c2
        .submit(&SubmitJob::new(
            "e",
            &key2.id,
            vec![input2.id.clone()],
            task.clone(),
        ))
        .expect("submit");
    let done = c2.wait(j.id, Duration::from_secs(300)).expect("wait");
    assert_eq!(done.state, "done", "{:?}", done.error);
    assert_eq!(done.result_id.as_deref(), Some(ids[0].as_str()));
    let mut j = SubmitJob::new("l", &key2.id, vec![input2.id], task);
    j.result_level = Some(0);
    let j = c2.submit(&j).expect("submit");
    let done = c2.wait(j.id, Duration::from_secs(300)).expect("wait");
    assert_eq!(done.result_id.as_deref(), Some(low_ids[0].as_str()));
    assert!(!metrics(&url2).contains("heloom_gpu_jobs_total"));
}

#[test]
fn a_gpu_that_cannot_be_opened_is_reported() {
    assert_eq!("auto".parse::<GpuChoice>(), Ok(GpuChoice::Auto));
    assert_eq!("off".parse::<GpuChoice>(), Ok(GpuChoice::Off));
    assert_eq!("emulator".parse::<GpuChoice>(), Ok(GpuChoice::Emulator));
    assert_eq!("3".parse::<GpuChoice>(), Ok(GpuChoice::Cuda(3)));
    assert!("x"
        .parse::<GpuChoice>()
        .expect_err("bad")
        .contains("use auto, off, emulator or a CUDA device number"));
    // A device number past the machine's GPUs (or on a machine with none): the start stops,
    // saying why and what to do. `auto` starts without one.
    let dir = tempfile::tempdir().expect("dir");
    let e = Server::start(config(dir.path(), GpuChoice::Cuda(64)))
        .expect_err("no GPU 64")
        .to_string();
    assert!(e.contains("--gpu 64") && e.contains("--gpu off"), "{e}");
    let dir = tempfile::tempdir().expect("dir");
    let s = Server::start(config(dir.path(), GpuChoice::Auto)).expect("auto starts");
    drop(s);
}
