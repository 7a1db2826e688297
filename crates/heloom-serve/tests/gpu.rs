//! The GPU as a device of the server, on the host emulator of heloom's CUDA kernels (the same
//! kernels a GPU runs; real GPUs: `bench/gpu/run-on-gpu.sh`): jobs pulled by the GPU beside
//! the CPU lanes come out correct and bit-exact with the CPU's (their results' content
//! addresses are equal), the GPU shows in `/metrics`, and a GPU that cannot be opened stops the
//! start with what to do.
//!
//! Parameters: N = 2^10, six 29-bit primes over a 30-bit `q_0` (test-only security: the
//! emulator is slow). Bound: e^x's degree-6 polynomial within 1e-3 of the f64 value for inputs
//! in [-1, 1] at scale 2^29.

use heloom_ckks::{
    keygen, Ciphertext, CkksParameters, Context, Decryptor, Encryptor, KeySet, SecurityLevel,
};
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

/// A server's tenant with its key set and one input uploaded.
struct Setup {
    _server: Server,
    url: String,
    c: Client,
    key: String,
    input: String,
}

fn setup(
    dir: &std::path::Path,
    gpu: GpuChoice,
    ctx: &Context<u64>,
    keys: &KeySet<u64>,
    ct: &Ciphertext<u64>,
) -> Setup {
    let (server, url, c) = start(dir, gpu);
    let key = c
        .upload_keys(ctx.params(), &keys.evaluation_keys)
        .expect("keys")
        .id;
    let input = c.upload_ciphertext(ct).expect("input").id;
    Setup {
        _server: server,
        url,
        c,
        key,
        input,
    }
}

/// `n` e^x jobs on the input submitted at once (results at `level` when given): their result
/// ids, in order.
fn burst(s: &Setup, n: usize, level: Option<usize>) -> Vec<String> {
    let batch: Vec<SubmitJob> = (0..n)
        .map(|i| {
            let mut j = SubmitJob::new(
                &format!("b{i}-{level:?}"),
                &s.key,
                vec![s.input.clone()],
                Task::Exp { variant: None },
            );
            j.result_level = level;
            j
        })
        .collect();
    s.c.submit_batch(&batch)
        .expect("batch")
        .iter()
        .map(|j| {
            let done = s.c.wait(j.id, Duration::from_secs(300)).expect("wait");
            assert_eq!(done.state, "done", "{:?}", done.error);
            done.result_id.expect("result id")
        })
        .collect()
}

fn gpu_jobs(url: &str) -> f64 {
    series(
        &metrics(url),
        "heloom_gpu_jobs_total{device=\"gpu-emulator\"}",
    )
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

    // A CPU-only server: the bytes every device must give.
    let dir = tempfile::tempdir().expect("dir");
    let cpu = setup(dir.path(), GpuChoice::Off, &ctx, &keys, &ct);
    let (full, low) = (
        burst(&cpu, 1, None)[0].clone(),
        burst(&cpu, 1, Some(0))[0].clone(),
    );
    assert_ne!(full, low);
    assert!(!metrics(&cpu.url).contains("heloom_gpu_jobs_total"));
    let out = cpu.c.result(1, &ctx).expect("result");
    let got = Decryptor::new(&ctx, &keys.secret_key)
        .expect("decryptor")
        .decrypt(&out[0])
        .expect("decrypt");
    let c6 = exp_coefficients(6);
    let err = (0..slots)
        .map(|i| (got[i] - c6.iter().rev().fold(0.0, |a, k| a * x[i] + k)).abs())
        .fold(0.0, f64::max);
    assert!(err < 1e-3, "e^x error {err}");

    // GPU servers: one CPU thread (two slots) and the emulated GPU pull from one queue. Before
    // it has timed a job the GPU takes one from a burst; every result is the CPU's bytes (one
    // content address), full and at level 0 (dropped on the device before the download).
    // (Once timed, the emulator, about 80 ms a job against a few on a CPU slot, takes a job
    // only from a backlog the CPU would need longer to clear: `gpu::worth_pulling`'s unit
    // test.)
    for (level, want) in [(None, &full), (Some(0), &low)] {
        let dir = tempfile::tempdir().expect("dir");
        let g = setup(dir.path(), GpuChoice::Emulator, &ctx, &keys, &ct);
        let ids = burst(&g, 16, level);
        assert!(
            ids.iter().all(|i| i == want),
            "{level:?}: {ids:?} against {want}"
        );
        let m = metrics(&g.url);
        let took = gpu_jobs(&g.url);
        eprintln!(
            "level {level:?}: the GPU ran {took} of 16 jobs, {} s each",
            series(&m, "heloom_gpu_job_seconds")
        );
        assert!(took >= 1.0, "the GPU ran none of 16 jobs:\n{m}");
        assert_eq!(series(&m, "heloom_gpu_failures_total"), 0.0);
        assert!(series(&m, "heloom_gpu_busy_seconds_total") > 0.0);
    }
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
