//! `heloom loadtest`: many tenants' encrypted jobs against `heloom serve` (spawned here or
//! already running), optionally killing and restarting the server; the measuring is in
//! heloom-bench's `loadtest`, this module parses, shows progress and prints.

use anyhow::{bail, Result};
use heloom_bench::loadtest::{self, Event, LoadtestOptions, ServerTarget};
use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::Mutex;

/// Options of `heloom loadtest`.
#[derive(clap::Args, Debug)]
pub struct LoadtestArgs {
    /// URL of a running `heloom serve` (default: spawn one on a temporary data directory).
    #[arg(long, requires = "data")]
    url: Option<String>,
    /// The running server's --data directory: the tenants' tokens are created there.
    #[arg(long, requires = "url")]
    data: Option<PathBuf>,
    /// Number of tenants, each with its own key set and inputs.
    #[arg(long, default_value_t = 4)]
    tenants: usize,
    /// Jobs per second offered by all tenants together (Poisson arrivals).
    #[arg(long, default_value_t = 2.0)]
    rate: f64,
    /// Seconds of arrivals (with --kills: at least until the last kill).
    #[arg(long, default_value_t = 20.0)]
    duration: f64,
    /// Tenant 0 submits this many times the rate of each other tenant.
    #[arg(long, default_value_t = 1.0)]
    heavy: f64,
    /// Job kinds and their shares.
    #[arg(long, default_value = "exp=0.7,polynomial=0.3")]
    mix: String,
    /// log2 of the ring degree (below 14 the spawned server gets --allow-insecure).
    #[arg(long, default_value_t = 13)]
    log_n: u32,
    /// Threads of the spawned server (default: every core).
    #[arg(long, conflicts_with = "url")]
    threads: Option<usize>,
    /// Durability mode: kill -9 the spawned server every this many seconds (uniform within
    /// +-50%) and restart it on the same data; clients retry with the same idempotency keys.
    #[arg(long, value_name = "SECONDS", conflicts_with = "url")]
    kill_every: Option<f64>,
    /// Stop killing after this many kills (the arrivals go on until then).
    #[arg(long, requires = "kill_every")]
    kills: Option<usize>,
    /// Seconds at the start whose jobs run and are checked but are left out of the latency
    /// and queue-wait figures (the server's cold start).
    #[arg(long, default_value_t = 0.0)]
    warmup: f64,
    /// Seed of the arrivals, job choices and inputs.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Client threads that submit and wait (each holds one job from its submission to its end:
    /// too few turn the open-loop arrivals into a closed loop; the report shows the lag); four
    /// more fetch, decrypt and check the results.
    #[arg(long, default_value_t = 256)]
    clients: usize,
    /// Fetch, decrypt and check the results after the run, not during it (with a server on
    /// the same cores, the checking would compete with it). A job's latency then ends when the
    /// client sees it done, not when the client has its result.
    #[arg(long)]
    check_after: bool,
    /// Closed loop, to measure capacity: each client thread submits its next job as soon as its
    /// last one ended, until --duration is over (--rate then only weighs the tenants). Without
    /// it every Poisson arrival of the window is submitted, however long that takes.
    #[arg(long)]
    closed_loop: bool,
    /// Cost profile of the spawned server's scheduler: `measure` (this machine, measured once
    /// before the run, about 10 s), a built-in name or a file from `heloom profile --out`.
    /// Default: the server's (DATA/profile.json, else the built-in).
    #[arg(long, conflicts_with = "url")]
    profile: Option<String>,
    /// Distinct encrypted inputs per tenant.
    #[arg(long, default_value_t = 4)]
    inputs: usize,
    /// Print the report as JSON on stdout instead of the table.
    #[arg(long)]
    json: bool,
    /// Directory for loadtest.json/.txt, jobs.csv, metrics.csv and the SVG plots.
    #[arg(long, default_value = "target/heloom-loadtest")]
    out: PathBuf,
}

/// Runs `heloom loadtest`; fails when a result was wrong, a job failed or was lost, or a key
/// mapped to two jobs.
pub fn run(args: &LoadtestArgs) -> Result<()> {
    let server = match (&args.url, &args.data) {
        (Some(url), Some(data)) => ServerTarget::Running {
            url: url.clone(),
            data: data.clone(),
        },
        _ => ServerTarget::Spawn {
            exe: std::env::current_exe()?,
            threads: args.threads,
        },
    };
    let opts = LoadtestOptions {
        tenants: args.tenants,
        rate: args.rate,
        duration_s: args.duration,
        heavy: args.heavy,
        mix: loadtest::parse_mix(&args.mix)?,
        log_n: args.log_n,
        kill_every_s: args.kill_every,
        kills: args.kills,
        warmup_s: args.warmup,
        seed: args.seed,
        clients: args.clients,
        inputs_per_tenant: args.inputs,
        check_after: args.check_after,
        closed_loop: args.closed_loop,
        server_profile: args.profile.clone(),
        ..LoadtestOptions::new(server)
    };
    opts.check()?;
    if opts.insecure() && matches!(opts.server, ServerTarget::Spawn { .. }) {
        eprintln!(
            "heloom loadtest: N = 2^{} is below 128-bit security; the spawned server runs with \
             --allow-insecure",
            opts.log_n
        );
    }
    let terminal = std::io::stderr().is_terminal();
    let bar = if terminal {
        let pb = ProgressBar::new(0);
        pb.set_style(
            ProgressStyle::with_template("{bar:30} {pos}/{len} done [{elapsed}] {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        pb.enable_steady_tick(std::time::Duration::from_millis(200));
        pb
    } else {
        ProgressBar::hidden()
    };
    // Without a terminal, a status line every 5 s instead of the bar.
    let last_line = Mutex::new(f64::NEG_INFINITY);
    let observe = |e: Event| match e {
        Event::Setup(m) | Event::Note(m) => {
            if terminal {
                bar.println(format!("  {m}"));
            } else {
                eprintln!("  {m}");
            }
        }
        Event::Status(s) => {
            let msg = format!(
                "{:.0} s{}: {} submitted, {} refused, {} wrong, {} failed, queued {:.0}, busy \
                 threads {:.0}{}",
                s.elapsed_s,
                if s.draining { " (draining)" } else { "" },
                s.submitted,
                s.refused,
                s.wrong,
                s.failed,
                s.queued,
                s.busy_threads,
                if s.kills > 0 {
                    format!(", {} kills", s.kills)
                } else {
                    String::new()
                }
            );
            if terminal {
                bar.set_length(s.expected.max(s.submitted) as u64);
                bar.set_position(s.done as u64);
                bar.set_message(msg);
            } else {
                let mut last = last_line.lock().unwrap_or_else(|p| p.into_inner());
                if s.elapsed_s - *last >= 5.0 {
                    *last = s.elapsed_s;
                    eprintln!("  {msg}, {} done", s.done);
                }
            }
        }
    };
    let report = loadtest::run(&opts, &observe);
    bar.finish_and_clear();
    let report = report?;
    for p in loadtest::save(&report, &args.out)? {
        eprintln!("wrote {}", p.display());
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", loadtest::render(&report));
    }
    if !report.ok {
        bail!("load test failed: {}", report.problems.join("; "));
    }
    Ok(())
}
