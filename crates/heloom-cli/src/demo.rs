//! `heloom demo`: the main job. A client encrypts data with CKKS, a server computes on the
//! ciphertexts (products, rotations, e^x as a degree-6 polynomial, a sum over all slots), the
//! client decrypts and checks every answer against plain arithmetic. Runs on 64-bit and on
//! bit-reduced 32-bit words and prints what each operation cost. Then the runtime, the device
//! layer, the CUDA backend, encrypted CryptoNets inference on MNIST and the private genome
//! search.

use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Result};
use heloom_apps::matmul::max_abs_error;
use heloom_ckks::{keygen, CkksParameters, Context, Decryptor, Encryptor, Evaluator, PolyBasis};
use heloom_math::backend::cpu_report;
use heloom_math::Word;
use heloom_runtime::graph::exp_coefficients;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;

struct Timer {
    rows: Vec<(String, f64)>,
}

impl Timer {
    fn time<T>(&mut self, name: &str, f: impl FnOnce() -> T) -> T {
        let t = Instant::now();
        let out = f();
        self.rows
            .push((name.to_string(), t.elapsed().as_secs_f64() * 1e3));
        out
    }
}

fn report(name: &str, got: &[f64], want: &[f64], bound: f64, ok: &mut bool) {
    let e = max_abs_error(got, want);
    let pass = e <= bound;
    *ok &= pass;
    println!(
        "  {:<34} max error 2^{:>6.1}  (bound 2^{:.0})  {}",
        name,
        e.max(f64::MIN_POSITIVE).log2(),
        bound.log2(),
        if pass { "ok" } else { "FAILED" }
    );
}

fn run_word<W: Word>(params: CkksParameters, bound: f64, poly_bound: f64) -> Result<bool> {
    println!("\n{params}");
    let mut t = Timer { rows: Vec::new() };
    let ctx = t.time("context (primes, NTT tables)", || Context::<W>::new(params))?;
    let slots = ctx.params().slots();
    let mut steps: Vec<i64> = Evaluator::<W>::rotate_and_sum_steps(slots);
    steps.push(-1);
    let keys = t.time("keygen (relin + Galois keys)", || {
        keygen(&ctx, &steps, false)
    })?;
    let enc = Encryptor::new(&ctx);
    let dec = Decryptor::new(&ctx, &keys.secret_key)?;
    let ev = Evaluator::new(&ctx, Arc::new(keys.evaluation_keys))?;

    // Client side: the data.
    let mut rng = ChaCha20Rng::seed_from_u64(2026);
    let x: Vec<f64> = (0..slots).map(|_| rng.gen_range(-1.0..1.0)).collect();
    let y: Vec<f64> = (0..slots).map(|_| rng.gen_range(-1.0..1.0)).collect();
    let pt = t.time("encode", || ctx.encode(&x))?;
    let cx = t.time("encrypt (public key)", || {
        enc.encrypt_plaintext(&pt, &keys.public_key)
    })?;
    let cy = enc.encrypt(&y, &keys.public_key)?;

    // Server side.
    let sum = t.time("add", || ev.add(&cx, &cy))?;
    let prod3 = t.time("multiply", || ev.multiply(&cx, &cy))?;
    let prod2 = t.time("relinearize", || ev.relinearize(&prod3))?;
    let prod = t.time("rescale", || ev.rescale(&prod2))?;
    let rot = t.time("rotate (by 1)", || ev.rotate(&cx, 1))?;
    let rots = t.time("rotate by 1, 2, 4, 8 (hoisted)", || {
        ev.rotate_many(&cx, &[1, 2, 4, 8])
    })?;
    // 1/k! for k = 0..=6: the degree-6 Maclaurin polynomial of e^x.
    let exp_coeffs = exp_coefficients(6);
    let ex = t.time("e^x (degree-6 polynomial)", || {
        ev.evaluate_polynomial(&cx, &exp_coeffs, PolyBasis::Power)
    })?;
    let total = t.time("sum of all slots (rotate-and-sum)", || {
        ev.rotate_and_sum(&cx, slots)
    })?;

    // Client side again: decrypt and check.
    let got_sum = t.time("decrypt + decode", || dec.decrypt(&sum))?;
    println!("results ({} slots, inputs in [-1, 1]):", slots);
    let mut ok = true;
    let want: Vec<f64> = x.iter().zip(&y).map(|(a, b)| a + b).collect();
    report("x + y", &got_sum, &want, bound, &mut ok);
    let want: Vec<f64> = x.iter().zip(&y).map(|(a, b)| a * b).collect();
    report(
        "x * y (relinearized, rescaled)",
        &dec.decrypt(&prod)?,
        &want,
        bound,
        &mut ok,
    );
    let rotate = |k: usize| -> Vec<f64> { (0..slots).map(|i| x[(i + k) % slots]).collect() };
    report(
        "rotate(x, 1)",
        &dec.decrypt(&rot)?,
        &rotate(1),
        bound,
        &mut ok,
    );
    for (k, r) in [1usize, 2, 4, 8].iter().zip(&rots) {
        report(
            &format!("hoisted rotate(x, {k})"),
            &dec.decrypt(r)?,
            &rotate(*k),
            bound,
            &mut ok,
        );
    }
    let want: Vec<f64> = x
        .iter()
        .map(|&v| exp_coeffs.iter().rev().fold(0.0, |acc, c| acc * v + c))
        .collect();
    report(
        "e^x (Maclaurin, degree 6)",
        &dec.decrypt(&ex)?,
        &want,
        poly_bound,
        &mut ok,
    );
    let s: f64 = x.iter().sum();
    report(
        "sum of all slots",
        &dec.decrypt(&total)?,
        &vec![s; slots],
        bound * slots as f64,
        &mut ok,
    );
    println!(
        "  e^x landed at level {} (from {}), scale 2^{:.1}",
        ex.level(),
        cx.level(),
        ex.scale().log2()
    );
    println!("timings (one thread):");
    for (name, ms) in &t.rows {
        println!("  {name:<34} {ms:>10.3} ms");
    }
    Ok(ok)
}

/// Runs the demo on both word sizes; fails if any decrypted answer is off.
pub fn run() -> Result<()> {
    println!("heloom demo: CKKS on encrypted data, checked against plain arithmetic");
    println!("{}", cpu_report());
    let p64 = CkksParameters::builder(1 << 14)
        .levels(7)
        .scale_bits(40)
        .build()?;
    let ok64 = run_word::<u64>(p64, 2f64.powi(-24), 2f64.powi(-20))?;
    let p32 = CkksParameters::builder(1 << 14)
        .word_bits(32)
        .levels(7)
        .scale_bits(28)
        .build()?;
    let ok32 = run_word::<u32>(p32, 2f64.powi(-11), 2f64.powi(-8))?;
    if !(ok64 && ok32) {
        bail!("some decrypted results exceeded their error bound (see above)");
    }
    println!("\nall results within their bounds");
    if !crate::schedule::demo(std::path::Path::new("target/heloom-demo"))? {
        bail!("some scheduled jobs decrypted to a wrong result (see above)");
    }
    println!("\nevery scheduled job's result decrypted correctly");
    crate::offload::demo(std::path::Path::new("target/heloom-demo/offload"))?;
    gpu_demo()?;
    mnist_demo()?;
    crate::genome::demo_section()?;
    serve_demo()?;
    Ok(())
}

/// The service: `heloom serve` started as its own process, a client in this one uploads
/// keys and ciphertexts over HTTP, submits e^x and polynomial jobs, waits for them and
/// decrypts the results.
fn serve_demo() -> Result<()> {
    use heloom_serve::client::{Client, SubmitJob};
    use heloom_serve::worker::Task;
    println!("\nheloom serve: a client and the server as separate processes");
    let dir = std::path::Path::new("target/heloom-demo/serve");
    if dir.exists() {
        std::fs::remove_dir_all(dir)?;
    }
    std::fs::create_dir_all(dir)?;
    let token = heloom_serve::State::open(dir)?.create_token("demo")?;
    let exe = std::env::current_exe()?;
    // The server prints its address first; port 0 let the OS pick a free one. Its log is
    // drained (and dropped) so that it never blocks on a full pipe.
    let mut cmd = std::process::Command::new(exe);
    cmd.args(["serve", "--listen", "127.0.0.1:0", "--data"])
        .arg(dir)
        .stdout(std::process::Stdio::null());
    let heloom_bench::spawn::Listening { mut child, url } =
        heloom_bench::spawn::spawn_listening(&mut cmd, |_| {})?;
    let outcome = (|| -> Result<()> {
        println!(
            "  server {url} (pid {}), data {}",
            child.id(),
            dir.display()
        );
        let client = Client::new(&url, &token)?;
        let params = CkksParameters::builder(1 << 14)
            .levels(7)
            .scale_bits(40)
            .build()?;
        let ctx = Context::<u64>::new(params)?;
        let keys = keygen(&ctx, &[], false)?;
        let t = Instant::now();
        let key = client.upload_keys(ctx.params(), &keys.evaluation_keys)?;
        println!(
            "  key set {}.. uploaded: {:.1} MB in {:.0} ms",
            &key.id[..12],
            key.bytes as f64 / 1e6,
            t.elapsed().as_secs_f64() * 1e3
        );
        let enc = Encryptor::new(&ctx);
        let dec = Decryptor::new(&ctx, &keys.secret_key)?;
        let slots = ctx.params().slots();
        let mut rng = ChaCha20Rng::seed_from_u64(2028);
        let coeffs = vec![0.25, 0.5, -0.75, 0.125];
        let mut jobs = Vec::new();
        let t = Instant::now();
        for j in 0..4 {
            let x: Vec<f64> = (0..slots).map(|_| rng.gen_range(-1.0..1.0)).collect();
            let input = client.upload_ciphertext(&enc.encrypt(&x, &keys.public_key)?)?;
            let (task, c) = if j % 2 == 0 {
                (Task::Exp { variant: None }, exp_coefficients(6))
            } else {
                (
                    Task::Polynomial {
                        coefficients: coeffs.clone(),
                    },
                    coeffs.clone(),
                )
            };
            let job = client.submit(&SubmitJob::new(
                &format!("demo-{j}"),
                &key.id,
                vec![input.id],
                task,
            ))?;
            jobs.push((job.id, x, c));
        }
        let mut ok = true;
        for (id, x, c) in &jobs {
            let job = client.wait(*id, std::time::Duration::from_secs(600))?;
            if job.state != "done" {
                bail!("job {id} ended {}: {:?}", job.state, job.error);
            }
            let out = client.result(*id, &ctx)?;
            let Some(ct) = out.first() else {
                bail!("job {id} returned no ciphertext");
            };
            let want: Vec<f64> = x
                .iter()
                .map(|&v| c.iter().rev().fold(0.0, |acc, k| acc * v + k))
                .collect();
            report(
                &format!("job {id} ({}), decrypted", job.kind),
                &dec.decrypt(ct)?,
                &want,
                2f64.powi(-20),
                &mut ok,
            );
        }
        println!(
            "  4 jobs uploaded, run and fetched over HTTP in {:.0} ms",
            t.elapsed().as_secs_f64() * 1e3
        );
        if !ok {
            bail!("a result from the server decrypted wrongly (see above)");
        }
        Ok(())
    })();
    let _ = child.kill();
    let _ = child.wait();
    outcome
}

/// Encrypted inference: CryptoNets on 500 held-out MNIST images in one batch (32-bit words).
fn mnist_demo() -> Result<()> {
    use heloom_apps::cryptonets::evaluate::{evaluate, EvalConfig, Packing};
    use heloom_apps::cryptonets::CryptoNet;
    println!("\nCryptoNets on encrypted MNIST (heloom mnist)");
    let net = CryptoNet::embedded()?;
    let cfg = EvalConfig {
        images: 500,
        packing: Packing::Batch,
        threads: heloom_pool::cores(),
    };
    let r = evaluate::<u32>(&net, &cfg, &mut |_| {})?;
    println!(
        "  {} held-out images, 32-bit words: accuracy {:.1}% encrypted ({:.1}% in f64), agreement {:.1}%",
        r.images,
        100.0 * r.encrypted_accuracy,
        100.0 * r.plain_accuracy,
        100.0 * r.agreement
    );
    println!(
        "  server {:.2} s per batch: {:.0} images/s with full batches of {}",
        r.batch_latency_s, r.full_batch_images_per_s, r.batch_capacity
    );
    if r.agreement < 0.99 {
        bail!("encrypted and plaintext predictions disagree on too many images");
    }
    Ok(())
}

/// The CUDA backend: a client's ciphertexts multiplied, relinearized, rescaled and rotated on
/// the GPU, checked against the CPU word for word and decrypted. Without a GPU it says why and
/// runs the same kernels on the host emulator at a small ring (a correctness check, not a speed).
fn gpu_demo() -> Result<()> {
    use heloom_gpu::{Gpu, GpuContext, GpuEvaluator};
    println!(
        "
CUDA backend"
    );
    let (gpu, params) = match Gpu::cuda(0) {
        Ok(g) => {
            let i = g.info();
            println!(
                "  {} (compute {}.{}, {} SMs), kernels compiled by NVRTC for {}",
                i.name, i.compute_capability.0, i.compute_capability.1, i.multiprocessors, i.arch
            );
            (
                g,
                CkksParameters::builder(1 << 14)
                    .levels(7)
                    .scale_bits(40)
                    .build()?,
            )
        }
        Err(e) => {
            println!("  {e}");
            println!("  running the same CUDA kernels on the host emulator instead (N = 2^11, not a speed)");
            let p = CkksParameters::builder(1 << 11)
                .levels(3)
                .scale_bits(40)
                .security(heloom_ckks::SecurityLevel::None)
                .build()?;
            (Gpu::emulator(), p)
        }
    };
    let ctx = Context::<u64>::new(params)?;
    let keys = keygen(&ctx, &[1], false)?;
    let slots = ctx.params().slots();
    let mut rng = ChaCha20Rng::seed_from_u64(2027);
    let x: Vec<f64> = (0..slots).map(|_| rng.gen_range(-1.0..1.0)).collect();
    let y: Vec<f64> = (0..slots).map(|_| rng.gen_range(-1.0..1.0)).collect();
    let enc = Encryptor::new(&ctx);
    let (cx, cy) = (
        enc.encrypt(&x, &keys.public_key)?,
        enc.encrypt(&y, &keys.public_key)?,
    );
    let g = GpuContext::new(&gpu, &ctx)?;
    let ge = GpuEvaluator::new(&g, &keys.evaluation_keys)?;
    let t = Instant::now();
    let (gx, gy) = (g.upload(&cx)?, g.upload(&cy)?);
    let r = ge.rotate(&ge.multiply_relin_rescale(&gx, &gy)?, 1)?;
    let out = g.download(&r)?;
    let ms = t.elapsed().as_secs_f64() * 1e3;
    let cpu = Evaluator::new(&ctx, Arc::new(keys.evaluation_keys.clone()))?;
    let want = cpu.rotate(&cpu.multiply_relin_rescale(&cx, &cy)?, 1)?;
    let same = out
        .polys()
        .iter()
        .zip(want.polys())
        .all(|(a, b)| a.as_slice() == b.as_slice());
    let got = Decryptor::new(&ctx, &keys.secret_key)?.decrypt(&out)?;
    let plain: Vec<f64> = (0..slots)
        .map(|i| x[(i + 1) % slots] * y[(i + 1) % slots])
        .collect();
    let mut ok = true;
    report(
        "GPU: rotate(x * y, 1), decrypted",
        &got,
        &plain,
        2f64.powi(-20),
        &mut ok,
    );
    println!(
        "  upload, multiply + relinearize + rescale, rotate, download: {ms:.1} ms; equal to the CPU word for word: {}",
        if same { "yes" } else { "NO" }
    );
    if !(ok && same) {
        bail!("the GPU result differs from the CPU's or decrypts wrongly (see above)");
    }
    Ok(())
}
