//! Memory benchmark of `heloom serve` (issue 18's target: 20 tenants with 200 MB of keys each
//! under a 1 GB budget stay within the budget + 15%, every tenant served).
//!
//! Starts `heloom serve --memory-budget B` as its own process (the binary next to this
//! example's, or `HELOOM_BIN`), then for each tenant: makes a key set of about `--key-mb` MB
//! (N = 2^15, relinearization plus rotation keys), uploads it, drops it here; then runs
//! `--rounds` rounds in which every tenant submits one e^x job (so every key set is loaded,
//! evicted and loaded again), decrypts every result and checks it. The server's resident
//! memory (VmRSS, sampled every 50 ms, and VmHWM) is compared with the budget.
//!
//! ```sh
//! cargo build --release -p heloom-cli
//! cargo run --release -p heloom-serve --example memory_budget -- \
//!     --tenants 20 --key-mb 200 --budget-mb 1024 --rounds 2 --out bench/results/serve-memory-CPU
//! ```

use heloom_ckks::{keygen, CkksParameters, Context, Decryptor, Encryptor};
use heloom_runtime::graph::exp_coefficients;
use heloom_serve::client::{Client, SubmitJob};
use heloom_serve::worker::Task;
use std::io::BufRead;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

type R<T> = Result<T, Box<dyn std::error::Error>>;

struct Args {
    tenants: usize,
    key_mb: f64,
    budget_mb: u64,
    rounds: usize,
    threads: usize,
    out: PathBuf,
}

fn args() -> R<Args> {
    let mut a = Args {
        tenants: 20,
        key_mb: 200.0,
        budget_mb: 1024,
        rounds: 2,
        threads: 2,
        out: PathBuf::from("target/heloom-serve-memory"),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let v = it.next().ok_or(format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--tenants" => a.tenants = v.parse()?,
            "--key-mb" => a.key_mb = v.parse()?,
            "--budget-mb" => a.budget_mb = v.parse()?,
            "--rounds" => a.rounds = v.parse()?,
            "--threads" => a.threads = v.parse()?,
            "--out" => a.out = PathBuf::from(v),
            other => return Err(format!("unknown flag {other}").into()),
        }
    }
    Ok(a)
}

/// A size field of the process's `/proc/PID/status` in bytes (0 where there is none).
fn proc_kb(pid: u32, field: &str) -> u64 {
    heloom_pool::proc_status_bytes(Some(pid), field).unwrap_or(0)
}

fn main() -> R<()> {
    let a = args()?;
    let bin = std::env::var_os("HELOOM_BIN").map_or_else(
        || {
            let mut p = std::env::current_exe().unwrap_or_default();
            p.pop();
            p.pop();
            p.join("heloom")
        },
        PathBuf::from,
    );
    std::fs::create_dir_all(&a.out)?;
    let data = a.out.join("data");
    let _ = std::fs::remove_dir_all(&data);
    let state = heloom_serve::State::open(&data)?;
    let tokens: Vec<String> = (0..a.tenants)
        .map(|t| state.create_token(&format!("t{t:02}")))
        .collect::<Result<_, _>>()?;
    drop(state);
    let mut server = std::process::Command::new(&bin)
        .args(["serve", "--listen", "127.0.0.1:0", "--threads"])
        .arg(a.threads.to_string())
        .arg("--memory-budget")
        .arg(format!("{}M", a.budget_mb))
        .arg("--data")
        .arg(&data)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| {
            format!(
                "{}: {e} (build it: cargo build --release -p heloom-cli)",
                bin.display()
            )
        })?;
    let pid = server.id();
    let mut lines = std::io::BufReader::new(server.stderr.take().ok_or("no stderr")?).lines();
    let url = lines
        .by_ref()
        .map_while(Result::ok)
        .find_map(|l| {
            l.split("listening on ")
                .nth(1)
                .and_then(|r| r.split_whitespace().next().map(str::to_string))
        })
        .ok_or("the server did not start")?;
    std::thread::spawn(move || for _ in lines {});

    // RSS sampler.
    let stop = Arc::new(AtomicBool::new(false));
    let peak = Arc::new(AtomicU64::new(0));
    let sampler = {
        let (stop, peak) = (Arc::clone(&stop), Arc::clone(&peak));
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                peak.fetch_max(proc_kb(pid, "VmRSS:"), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(50));
            }
        })
    };

    // N = 2^15, 14 levels: a switching key is 3 digits x 2 x (15 + 5) limbs x 2^15 words.
    let params = CkksParameters::builder(1 << 15)
        .levels(14)
        .scale_bits(40)
        .build()?;
    let ctx = Context::<u64>::new(params)?;
    let probe = keygen(&ctx, &[], false)?;
    let per_key = probe.evaluation_keys.memory_bytes() as f64;
    let rotations = ((a.key_mb * 1e6 / per_key).round() as i64 - 1).max(0);
    let steps: Vec<i64> = (1..=rotations).collect();
    println!(
        "server pid {pid} at {url}; budget {} MB; {} tenants, key sets of {} keys ({:.0} MB each in memory)",
        a.budget_mb,
        a.tenants,
        rotations + 1,
        per_key * (rotations + 1) as f64 / 1e6
    );
    let t0 = Instant::now();
    let mut tenants = Vec::new();
    for (t, token) in tokens.iter().enumerate() {
        let keys = keygen(&ctx, &steps, false)?;
        let c = Client::new(&url, token)?;
        let info = c.upload_keys(ctx.params(), &keys.evaluation_keys)?;
        let mem = info.info["memory_bytes"].as_u64().unwrap_or(0);
        eprintln!(
            "  tenant {t:02}: key set {:.0} MB uploaded ({:.0} MB in memory); server RSS {:.0} MB",
            info.bytes as f64 / 1e6,
            mem as f64 / 1e6,
            proc_kb(pid, "VmRSS:") as f64 / 1e6
        );
        tenants.push((c, info.id, keys.secret_key, keys.public_key, mem));
    }
    let upload_s = t0.elapsed().as_secs_f64();
    let enc = Encryptor::new(&ctx);
    let c6 = exp_coefficients(6);
    let slots = ctx.n() / 2;
    let mut worst = 0.0f64;
    let mut served = vec![0usize; a.tenants];
    let t1 = Instant::now();
    for round in 0..a.rounds {
        let mut jobs = Vec::new();
        for (t, (c, key, _, pk, _)) in tenants.iter().enumerate() {
            let x: Vec<f64> = (0..slots)
                .map(|i| ((i * 7 + t * 13 + round) % 200) as f64 / 100.0 - 1.0)
                .collect();
            let input = c.upload_ciphertext(&enc.encrypt(&x, pk)?)?;
            let job = c.submit(&SubmitJob::new(
                &format!("r{round}"),
                key,
                vec![input.id],
                Task::Exp { variant: None },
            ))?;
            jobs.push((t, job.id, x));
        }
        for (t, id, x) in jobs {
            let (c, _, sk, _, _) = &tenants[t];
            let done = c.wait(id, Duration::from_secs(3600))?;
            if done.state != "done" {
                return Err(format!("tenant {t} job {id}: {} {:?}", done.state, done.error).into());
            }
            let out = c.result(id, &ctx)?;
            let got = Decryptor::new(&ctx, sk)?.decrypt(&out[0])?;
            let err = x
                .iter()
                .zip(&got)
                .map(|(v, g)| (c6.iter().rev().fold(0.0, |acc, k| acc * v + k) - g).abs())
                .fold(0.0, f64::max);
            worst = worst.max(err);
            served[t] += 1;
        }
        eprintln!(
            "  round {round}: every tenant served; server RSS {:.0} MB",
            proc_kb(pid, "VmRSS:") as f64 / 1e6
        );
    }
    let jobs_s = t1.elapsed().as_secs_f64();
    let hwm = proc_kb(pid, "VmHWM:");
    stop.store(true, Ordering::Relaxed);
    let _ = sampler.join();
    let metrics = {
        let r = std::process::Command::new("curl")
            .args(["-s", &format!("{url}/metrics")])
            .output();
        r.map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default()
    };
    let metric = |name: &str| {
        metrics
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().last())
            .unwrap_or("?")
            .to_string()
    };
    let _ = server.kill();
    let _ = server.wait();
    let budget = a.budget_mb as f64 * (1 << 20) as f64;
    let total_keys: u64 = tenants.iter().map(|t| t.4).sum();
    let rss = peak.load(Ordering::Relaxed) as f64;
    let ratio = rss / budget;
    let cpu = heloom_runtime::profile::host_machine();
    let report = serde_json::json!({
        "cpu": cpu,
        "tenants": a.tenants,
        "key_set_memory_mb": total_keys as f64 / a.tenants.max(1) as f64 / 1e6,
        "all_keys_memory_mb": total_keys as f64 / 1e6,
        "budget_mb": a.budget_mb,
        "peak_rss_mb": rss / 1e6,
        "vm_hwm_mb": hwm as f64 / 1e6,
        "peak_rss_over_budget": ratio,
        "target_ratio": 1.15,
        "met": ratio <= 1.15 && served.iter().all(|&s| s == a.rounds),
        "rounds": a.rounds,
        "jobs_served_per_tenant": served,
        "max_error": worst,
        "upload_s": upload_s,
        "jobs_s": jobs_s,
        "key_store_evictions": metric("heloom_key_store_evictions_total"),
        "key_store_misses": metric("heloom_key_store_misses_total"),
    });
    let text = format!(
        "heloom serve memory benchmark, {cpu}\n\
         {} tenants, key sets of {:.0} MB in memory each ({:.0} MB in all), budget {} MB\n\
         peak server RSS {:.0} MB (VmHWM {:.0} MB) = {:.2} x budget (target <= 1.15): {}\n\
         {} rounds, every tenant served every round: {}; max e^x error {:.1e}\n\
         key store: {} evictions, {} loads from disk; uploads {:.0} s, jobs {:.0} s\n",
        a.tenants,
        total_keys as f64 / a.tenants.max(1) as f64 / 1e6,
        total_keys as f64 / 1e6,
        a.budget_mb,
        rss / 1e6,
        hwm as f64 / 1e6,
        ratio,
        if ratio <= 1.15 { "met" } else { "NOT met" },
        a.rounds,
        served.iter().all(|&s| s == a.rounds),
        worst,
        metric("heloom_key_store_evictions_total"),
        metric("heloom_key_store_misses_total"),
        upload_s,
        jobs_s
    );
    print!("{text}");
    std::fs::write(a.out.join("memory.txt"), &text)?;
    std::fs::write(
        a.out.join("memory.json"),
        serde_json::to_string_pretty(&report)?,
    )?;
    let _ = std::fs::remove_dir_all(&data);
    if worst > 1e-4 {
        return Err(format!("a result decrypted with error {worst}").into());
    }
    Ok(())
}
