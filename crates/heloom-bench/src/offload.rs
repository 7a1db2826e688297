//! `heloom offload`: devices that pull AES items (later HE jobs) from one queue (seed 001).
//! `--compare` runs every single device and balancer (the paper's Tables 2 and 3 with the ideal
//! split and each method's efficiency), `--vs-openssl` sets the `cpu` engine beside
//! `openssl speed -evp`, `--list` shows which devices open here. `--load N` runs either under N
//! competing CPU-bound processes.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, IsTerminal, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::ArgGroup;
use heloom_devices::aes::{Cipher, Direction};
use heloom_devices::compare::{compare, CompareConfig, CompareReport, PAPER_ITEMS, PAPER_SIZES};
use heloom_devices::speed::{compare_openssl, SpeedRow};
use heloom_devices::{open_aes_devices, Device, DeviceKind, DeviceSpec, Method};
use heloom_math::backend::cpu_model;
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::{json, Value};

use crate::plot::offload::{efficiency_plot, items_plot, table2_plot};
use crate::timing::fmt_sig;

/// A combined method should reach this fraction of the ideal time at every size.
pub const EFFICIENCY_TARGET: f64 = 0.90;
/// The `cpu` engine should reach this fraction of `openssl speed` at every size.
pub const OPENSSL_TARGET: f64 = 0.90;
/// Longest a competing load process lives if nobody stops it.
const BURN_MAX_S: u64 = 6 * 3600;

/// Options of `heloom offload`.
#[derive(clap::Args, Debug, Clone)]
#[command(group(ArgGroup::new("mode").args(["compare", "vs_openssl", "list"])))]
pub struct OffloadArgs {
    /// Compare every single device and balancer on the paper's workload (Tables 2 and 3).
    #[arg(long)]
    pub compare: bool,
    /// Time the `cpu` engine beside `openssl speed -evp` (target: within 10%).
    #[arg(long)]
    pub vs_openssl: bool,
    /// Show each device kind and whether it can be opened here.
    #[arg(long)]
    pub list: bool,
    /// Run streams of encrypted e^x jobs (the runtime's task graphs) on cpu-pool devices under
    /// every balancer, instead of AES items; every result is decrypted and checked.
    #[arg(long, conflicts_with = "mode")]
    pub he: bool,
    /// --he: log2 of the ring degree.
    #[arg(long, default_value_t = 13)]
    pub log_n: u32,
    /// --he: jobs per run.
    #[arg(long, default_value_t = 24)]
    pub jobs: usize,
    /// --he: e^x graph of every job: paper-fig3, bsgs, horner or mixed (all three in turn).
    #[arg(long, default_value = "mixed")]
    pub variant: String,
    /// Internal: spin on core K as competing load (started by --load).
    #[arg(long, hide = true, value_name = "K")]
    pub burn_core: Option<usize>,
    /// Internal: longest a --burn-core process spins, s.
    #[arg(long, hide = true, default_value_t = BURN_MAX_S)]
    pub burn_max_s: u64,
    /// Devices, comma-separated: `cpu[:workers]`, `soft[:workers]`, `kernel[:workers]`, `gpu` (HE jobs:
    /// `cpu-pool[:threads]`, `gpu`)
    /// (default workers split the cores among the CPU-bound devices).
    #[arg(long, default_value = "cpu,soft")]
    pub devices: String,
    /// Cipher: aes-128-cbc, aes-192-cbc, aes-256-cbc, aes-256-gcm, or all (comma-separated
    /// list allowed).
    #[arg(long, default_value = "aes-128-cbc")]
    pub cipher: String,
    /// Decrypt instead of encrypt.
    #[arg(long, conflicts_with = "both")]
    pub decrypt: bool,
    /// Encrypt and decrypt.
    #[arg(long)]
    pub both: bool,
    /// Item sizes in bytes, comma-separated (default: the paper's 8 .. 16384).
    #[arg(long, value_delimiter = ',')]
    pub sizes: Vec<usize>,
    /// Items per size.
    #[arg(long, default_value_t = PAPER_ITEMS)]
    pub items: usize,
    /// Timed repetitions per method and size (after one untimed warm-up).
    #[arg(long, default_value_t = 5)]
    pub reps: usize,
    /// Combined methods, comma-separated: round-robin, polling, pull, heloom (default all).
    #[arg(long, value_delimiter = ',')]
    pub methods: Vec<String>,
    /// Skip the mixed queue (items of every size in one queue).
    #[arg(long)]
    pub no_mixed: bool,
    /// Print one JSON object on stdout (the tables go to stderr).
    #[arg(long)]
    pub json: bool,
    /// Directory for offload.json and the SVG plots.
    #[arg(long, default_value = "target/heloom-offload")]
    pub out: PathBuf,
    /// Skip the plots.
    #[arg(long)]
    pub no_plots: bool,
    /// Run under N competing CPU-bound processes, pinned to cores 0..N-1 (the first devices'
    /// cores).
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub load: usize,
    /// Payload seed.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Threads for --vs-openssl (each with its own cipher context).
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// Seconds per size for --vs-openssl (each side).
    #[arg(long, default_value_t = 3)]
    pub seconds: u32,
}

/// What `heloom offload` was asked to do.
enum Mode {
    Compare,
    VsOpenssl,
    List,
    /// HE jobs on the same devices and balancers (see [`run_he`]).
    He,
    Burn(usize),
}

impl OffloadArgs {
    fn mode(&self) -> Result<Mode> {
        Ok(if let Some(k) = self.burn_core {
            Mode::Burn(k)
        } else if self.he {
            Mode::He
        } else if self.vs_openssl {
            Mode::VsOpenssl
        } else if self.list {
            Mode::List
        } else if self.compare {
            Mode::Compare
        } else {
            bail!(
                "choose what to do: --compare, --vs-openssl or --list (see heloom offload --help)"
            )
        })
    }

    fn ciphers(&self) -> Result<Vec<Cipher>> {
        if self.cipher.trim().eq_ignore_ascii_case("all") {
            return Ok(Cipher::ALL.to_vec());
        }
        let mut out = Vec::new();
        for name in self.cipher.split(',').filter(|s| !s.trim().is_empty()) {
            let c = Cipher::parse(name).context("reading --cipher")?;
            if !out.contains(&c) {
                out.push(c);
            }
        }
        if out.is_empty() {
            bail!("--cipher is empty; name a cipher or `all`");
        }
        Ok(out)
    }

    fn directions(&self) -> Vec<Direction> {
        if self.both {
            vec![Direction::Encrypt, Direction::Decrypt]
        } else if self.decrypt {
            vec![Direction::Decrypt]
        } else {
            vec![Direction::Encrypt]
        }
    }

    fn combined_methods(&self) -> Result<Vec<Method>> {
        if self.methods.is_empty() {
            return Ok(Method::COMBINED.to_vec());
        }
        let mut out = Vec::new();
        for m in &self.methods {
            let m = Method::parse(m).context("reading --methods")?;
            if !out.contains(&m) {
                out.push(m);
            }
        }
        Ok(out)
    }

    fn sizes(&self) -> Result<Vec<usize>> {
        let mut sizes = if self.sizes.is_empty() {
            PAPER_SIZES.to_vec()
        } else {
            self.sizes.clone()
        };
        if sizes.contains(&0) {
            bail!("--sizes: item sizes must be at least 1 byte");
        }
        sizes.sort_unstable();
        sizes.dedup();
        Ok(sizes)
    }
}

/// Runs `heloom offload`.
pub fn run(args: &OffloadArgs) -> Result<()> {
    match args.mode()? {
        Mode::Burn(core) => burn(core, args.burn_max_s),
        Mode::List => list(args),
        Mode::VsOpenssl => vs_openssl(args),
        Mode::Compare => run_compare(args),
        Mode::He => run_he(args),
    }
}

// ---- HE mode -----------------------------------------------------------------------------

/// `--he`: streams of encrypted e^x jobs, each a task graph from the runtime, carried to cpu-pool
/// devices (and, with the CUDA backend, the GPU) by the same balancers as AES items.
fn run_he(args: &OffloadArgs) -> Result<()> {
    // The AES default `cpu,soft` means "two devices" here: two pool shares splitting the cores.
    let spec = if args.devices == "cpu,soft" {
        "cpu-pool,cpu-pool"
    } else {
        args.devices.as_str()
    };
    let specs = DeviceSpec::parse_list(spec).context("reading --devices")?;
    let variant = heloom_devices::he::parse_variant(&args.variant).context("reading --variant")?;
    if args.jobs == 0 || args.reps == 0 {
        bail!("--jobs and --reps must be at least 1");
    }
    let devices = heloom_devices::he::open_he_devices(&specs)
        .with_context(|| format!("opening the devices `{spec}`"))?;
    let refs: Vec<&dyn Device<heloom_devices::he::HeJobs>> =
        devices.iter().map(|d| d.as_ref()).collect();
    let emit = |text: &str| {
        if args.json {
            eprint!("{text}");
        } else {
            print!("{text}");
        }
    };
    let mut text = format!(
        "heloom offload --he on {} ({} cores)\n{}\n{} e^x jobs per run (N = 2^{}, graph {}), {} timed repetition(s) after a warm-up\ndevices:\n",
        cpu_model(),
        heloom_pool::cores(),
        load_line(args.load),
        args.jobs,
        args.log_n,
        args.variant,
        args.reps
    );
    for d in &refs {
        let i = d.info();
        text.push_str(&format!("  {:<14} {}\n", i.name, i.engine));
    }
    emit(&text);
    let cfg = heloom_devices::he::HeCompareConfig {
        log_n: args.log_n,
        jobs: args.jobs,
        variant,
        reps: args.reps,
        methods: args.combined_methods()?,
        seed: args.seed,
    };
    let mut load = Competitors::start(args.load)?;
    let pb = bar(args.json);
    let rows = heloom_devices::he::compare_he(&refs, &cfg, &mut |label, done, total| {
        pb.set_length(total as u64);
        pb.set_position(done as u64);
        pb.set_message(format!("e^x jobs {label}"));
    })
    .context("running HE jobs on the devices")?;
    pb.finish_and_clear();
    let load_held = load.all_running();
    drop(load);
    let names: Vec<String> = refs.iter().map(|d| d.info().name.clone()).collect();
    let mut header: Vec<String> = ["method", "ms", "jobs/s", "efficiency"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    header.extend(names.iter().map(|n| format!("jobs on {n}")));
    let mut body: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let mut v = vec![
                r.method.clone(),
                fmt_sig(r.ms),
                format!("{:.2}", r.jobs_per_s),
                format!("{:.3}", r.efficiency),
            ];
            v.extend(
                names
                    .iter()
                    .map(|n| fmt_items(r.items_per_device.get(n).copied().unwrap_or(0.0))),
            );
            v
        })
        .collect();
    if let Some(r) = rows.first() {
        let mut v = vec![
            "ideal".to_string(),
            fmt_sig(r.ideal_ms),
            format!("{:.2}", r.jobs as f64 / (r.ideal_ms / 1e3)),
            "1.000".into(),
        ];
        v.extend(names.iter().map(|_| String::new()));
        body.push(v);
    }
    let max_error = rows.iter().map(|r| r.max_error).fold(0.0, f64::max);
    let mut part = table(&header, &body);
    part.push_str(&format!(
        "every result decrypted and checked: max error {max_error:.2e} (tolerance {:.0e})\n",
        heloom_runtime::workload::EXP_TOLERANCE
    ));
    if args.load > 0 && !load_held {
        part.push_str("warning: a competing load process ended before the runs did\n");
    }
    emit(&part);
    text.push_str(&part);
    let v = json!({
        "machine": machine(),
        "devices": refs.iter().map(|d| d.info().clone()).collect::<Vec<_>>(),
        "load": args.load,
        "load_held": load_held,
        "config": { "log_n": args.log_n, "jobs": args.jobs, "variant": args.variant, "reps": args.reps, "seed": args.seed },
        "runs": rows,
    });
    save(args, "offload-he", &v, &text)?;
    eprintln!("results in {}", args.out.display());
    Ok(())
}

/// The demo's offload part: the paper's comparison at three sizes on `cpu` + `soft` (every
/// output checked against the reference engine), then a stream of e^x jobs on two cpu-pool
/// devices. Files land in `out`.
pub fn demo(out: &Path) -> Result<()> {
    println!("\n== offload: devices pulling from one queue (seed 001) ==");
    let specs = DeviceSpec::parse_list("cpu,soft")?;
    let devices = open_aes_devices(&specs).context("opening cpu and soft")?;
    let refs: Vec<&dyn Device<_>> = devices.iter().map(|d| d.as_ref()).collect();
    for d in &refs {
        let i = d.info();
        println!("  {:<10} {} worker(s)  {}", i.name, i.workers, i.engine);
    }
    let cfg = CompareConfig {
        sizes: vec![16, 1024, 16384],
        items: 2000,
        reps: 2,
        ..CompareConfig::default()
    };
    println!(
        "AES-128-CBC encryption of {} files per size, {} repetitions, every output checked",
        cfg.items, cfg.reps
    );
    let pb = bar(false);
    let rep = compare(&refs, &cfg, &mut |label, done, total| {
        pb.set_length(total as u64);
        pb.set_position(done as u64);
        pb.set_message(label.to_string());
    })?;
    pb.finish_and_clear();
    let mut text = render_tables(&rep);
    let (tv, ts) = targets(&rep);
    text.push_str(&ts);
    print!("{text}");
    let js = serde_json::to_string_pretty(
        &json!({ "machine": machine(), "runs": rep.runs, "targets": tv }),
    )?;
    write(&out.join("offload.json"), &js)?;
    write(&out.join("offload.txt"), &text)?;
    table2_plot(
        &rep,
        &out.join("table2.svg"),
        "Table 2: time per method against item size",
    )?;
    efficiency_plot(
        &rep,
        EFFICIENCY_TARGET,
        &out.join("efficiency.svg"),
        "Efficiency (ideal / measured)",
    )?;
    items_plot(
        &rep,
        &out.join("items.svg"),
        "Table 3: share of items per device",
    )?;

    let he_specs = DeviceSpec::parse_list("cpu-pool,cpu-pool")?;
    let he_devices = heloom_devices::he::open_he_devices(&he_specs)?;
    let he_refs: Vec<&dyn Device<heloom_devices::he::HeJobs>> =
        he_devices.iter().map(|d| d.as_ref()).collect();
    let he_cfg = heloom_devices::he::HeCompareConfig {
        log_n: 12,
        jobs: 12,
        reps: 1,
        ..Default::default()
    };
    let rows = heloom_devices::he::compare_he(&he_refs, &he_cfg, &mut |_, _, _| {})?;
    println!(
        "\nthe same balancers carrying {} encrypted e^x jobs (N = 2^{}) to two cpu-pool devices:",
        he_cfg.jobs, he_cfg.log_n
    );
    for r in &rows {
        println!(
            "  {:<14} {:>8} ms  efficiency {:.3}",
            r.method,
            fmt_sig(r.ms),
            r.efficiency
        );
    }
    let max_error = rows.iter().map(|r| r.max_error).fold(0.0, f64::max);
    println!(
        "every job decrypted within {max_error:.1e} of e^x; results in {}",
        out.display()
    );
    Ok(())
}

// ---- shared helpers ----------------------------------------------------------------------

fn bar(hidden: bool) -> ProgressBar {
    if hidden || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let pb = ProgressBar::new(0);
    pb.set_style(
        ProgressStyle::with_template("{msg:>40} [{bar:30}] {pos}/{len} {elapsed}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    pb
}

fn machine() -> Value {
    json!({ "cpu_model": cpu_model(), "cores": heloom_pool::cores() })
}

fn pass(ok: bool) -> &'static str {
    if ok {
        "PASS"
    } else {
        "MISS"
    }
}

/// Prints the JSON report on stdout with `--json`, and writes `<stem>.json` and `<stem>.txt` to `--out`.
fn save(args: &OffloadArgs, stem: &str, v: &Value, text: &str) -> Result<()> {
    let js = serde_json::to_string_pretty(v)?;
    if args.json {
        println!("{js}");
    }
    write(&args.out.join(format!("{stem}.json")), &js)?;
    write(&args.out.join(format!("{stem}.txt")), text)
}

fn write(path: &Path, text: &str) -> Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

/// A text table: the first column left-aligned, the others right-aligned.
fn table(header: &[String], rows: &[Vec<String>]) -> String {
    let cols = header.len();
    let mut width: Vec<usize> = header.iter().map(String::len).collect();
    for r in rows {
        for (w, c) in width.iter_mut().zip(r) {
            *w = (*w).max(c.len());
        }
    }
    let line = |cells: &[String]| {
        let mut s = String::from(" ");
        for (i, c) in cells.iter().enumerate().take(cols) {
            if i == 0 {
                s.push_str(&format!(" {c:<w$}", w = width[0]));
            } else {
                s.push_str(&format!("  {c:>w$}", w = width[i]));
            }
        }
        s.push('\n');
        s
    };
    let mut s = line(header);
    for r in rows {
        s.push_str(&line(r));
    }
    s
}

fn size_label(size: usize) -> String {
    if size == 0 {
        "mixed".into()
    } else {
        size.to_string()
    }
}

// ---- competing load ----------------------------------------------------------------------

/// The competing load processes; killed and reaped when dropped, on every exit path.
struct Competitors {
    children: Vec<Child>,
}

impl Competitors {
    /// Starts `n` copies of this program spinning on cores 0..n-1 and waits until each spins.
    fn start(n: usize) -> Result<Self> {
        let mut me = Competitors {
            children: Vec::new(),
        };
        if n == 0 {
            return Ok(me);
        }
        let exe = std::env::current_exe().context("finding this program to start the load")?;
        let cores: Vec<usize> = core_affinity::get_core_ids()
            .unwrap_or_default()
            .iter()
            .map(|c| c.id)
            .collect();
        for k in 0..n {
            let core = if cores.is_empty() {
                k
            } else {
                cores[k % cores.len()]
            };
            let child = Command::new(&exe)
                .args(["offload", "--burn-core", &core.to_string()])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .with_context(|| format!("starting competing load process {k}"))?;
            me.children.push(child);
        }
        // Each child says `ready` once pinned and spinning; EOF means it died first.
        for (k, c) in me.children.iter_mut().enumerate() {
            let out = c
                .stdout
                .take()
                .with_context(|| format!("load process {k} has no stdout"))?;
            let mut line = String::new();
            BufReader::new(out)
                .read_line(&mut line)
                .with_context(|| format!("waiting for load process {k}"))?;
            if line.trim() != "ready" {
                bail!("competing load process {k} exited before it started spinning");
            }
        }
        Ok(me)
    }

    /// Whether every load process is still running.
    fn all_running(&mut self) -> bool {
        self.children
            .iter_mut()
            .all(|c| matches!(c.try_wait(), Ok(None)))
    }
}

impl Drop for Competitors {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The competing load: spins on `core` until stdin closes (the parent died or dropped its
/// guard) or `max_s` seconds pass.
fn burn(core: usize, max_s: u64) -> Result<()> {
    match core_affinity::get_core_ids().and_then(|ids| ids.into_iter().find(|c| c.id == core)) {
        Some(id) => {
            if !core_affinity::set_for_current(id) {
                eprintln!("heloom load: could not pin to core {core}; spinning unpinned");
            }
        }
        None => eprintln!("heloom load: no core {core}; spinning unpinned"),
    }
    std::thread::spawn(|| {
        let mut buf = [0u8; 64];
        let mut stdin = std::io::stdin();
        loop {
            match stdin.read(&mut buf) {
                Ok(0) | Err(_) => std::process::exit(0),
                Ok(_) => {}
            }
        }
    });
    {
        let mut out = std::io::stdout();
        writeln!(out, "ready").context("telling the parent the load runs")?;
        out.flush().context("telling the parent the load runs")?;
    }
    let deadline = Instant::now() + Duration::from_secs(max_s);
    let mut x = 1u64;
    while Instant::now() < deadline {
        for _ in 0..1_000_000 {
            x = std::hint::black_box(x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1));
        }
    }
    Ok(())
}

fn load_line(n: usize) -> String {
    match n {
        0 => "load: none (no competing processes)".into(),
        1 => "load: 1 competing CPU-bound process pinned to core 0".into(),
        n => format!(
            "load: {n} competing CPU-bound processes pinned to cores 0..{}",
            n - 1
        ),
    }
}

// ---- --list ------------------------------------------------------------------------------

fn list(args: &OffloadArgs) -> Result<()> {
    let mut rows = Vec::new();
    let mut js = Vec::new();
    for kind in [
        DeviceKind::Cpu,
        DeviceKind::Soft,
        DeviceKind::Kernel,
        DeviceKind::Gpu,
    ] {
        let spec = DeviceSpec {
            kind,
            workers: None,
        };
        match open_aes_devices(&[spec]) {
            Ok(devs) => {
                for d in &devs {
                    let i = d.info();
                    rows.push(vec![
                        kind.name().to_string(),
                        "available".into(),
                        format!("{} worker(s), {}", i.workers, i.engine),
                    ]);
                    js.push(json!({"kind": kind.name(), "available": true, "info": i}));
                }
            }
            Err(e) => {
                rows.push(vec![
                    kind.name().to_string(),
                    "unavailable".into(),
                    e.to_string(),
                ]);
                js.push(json!({"kind": kind.name(), "available": false, "error": e.to_string()}));
            }
        }
    }
    // HE devices: the worker pool always; the GPU where heloom's CUDA backend finds one.
    let he_gpu = match heloom_devices::he_gpu::GpuHeDevice::cuda(0) {
        Ok(d) => json!({"kind": "gpu", "available": true, "info": d.info()}),
        Err(e) => json!({"kind": "gpu", "available": false, "error": e.to_string()}),
    };
    if args.json {
        let v = json!({
            "machine": machine(),
            "devices": js,
            "he_devices": [{"kind": "cpu-pool", "available": true}, he_gpu],
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        println!("AES devices on this machine ({}):", cpu_model());
        for r in &rows {
            println!("  {:<7} {:<12} {}", r[0], r[1], r[2]);
        }
        println!("HE devices (heloom offload --he --devices ...):");
        println!("  cpu-pool available    e^x task graphs on shares of the worker pool");
        match he_gpu.get("error").and_then(|e| e.as_str()) {
            Some(e) => println!("  gpu      unavailable  {e}"),
            None => println!(
                "  gpu      available    {}",
                he_gpu["info"]["engine"].as_str().unwrap_or("CUDA backend")
            ),
        }
    }
    Ok(())
}

// ---- --vs-openssl ------------------------------------------------------------------------

fn vs_openssl(args: &OffloadArgs) -> Result<()> {
    if args.threads == 0 {
        bail!("--threads must be at least 1");
    }
    if args.seconds == 0 {
        bail!("--seconds must be at least 1");
    }
    let ciphers = args.ciphers()?;
    let dirs = args.directions();
    let mut load = Competitors::start(args.load)?;
    let mut rows: Vec<SpeedRow> = Vec::new();
    for &c in &ciphers {
        for &d in &dirs {
            if !args.json {
                eprintln!(
                    "timing {} {}: openssl speed, then heloom (about {} s)",
                    c.name(),
                    d.name(),
                    12 * args.seconds
                );
            }
            rows.extend(
                compare_openssl(c, d, args.threads, args.seconds).with_context(|| {
                    format!("comparing {} {} with openssl speed", c.name(), d.name())
                })?,
            );
        }
    }
    let load_held = load.all_running();
    drop(load);
    let worst = rows
        .iter()
        .min_by(|a, b| a.ratio.total_cmp(&b.ratio))
        .context("openssl speed reported no sizes")?;
    let all_ok = rows.iter().all(|r| r.ratio >= OPENSSL_TARGET);
    let mut text = format!(
        "heloom cpu engine beside `openssl speed -evp` ({}, {} thread(s), {} s per size; {})\n",
        cpu_model(),
        args.threads,
        args.seconds,
        load_line(args.load)
    );
    let header: Vec<String> = [
        "cipher",
        "direction",
        "size (B)",
        "heloom MB/s",
        "openssl MB/s",
        "ratio",
        "",
    ]
    .map(String::from)
    .to_vec();
    let body: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                r.cipher.clone(),
                r.direction.clone(),
                r.size.to_string(),
                format!("{:.1}", r.heloom_mb_s),
                format!("{:.1}", r.openssl_mb_s),
                format!("{:.3}", r.ratio),
                pass(r.ratio >= OPENSSL_TARGET).into(),
            ]
        })
        .collect();
    text.push_str(&table(&header, &body));
    text.push_str(&format!(
        "target: every ratio >= {OPENSSL_TARGET:.2}: {} (worst {:.3}, {} {} at {} B)\n",
        pass(all_ok),
        worst.ratio,
        worst.cipher,
        worst.direction,
        worst.size
    ));
    if args.load > 0 && !load_held {
        text.push_str("warning: a competing load process ended before the runs did\n");
    }
    let v = json!({
        "machine": machine(),
        "threads": args.threads,
        "seconds": args.seconds,
        "load": args.load,
        "load_held": load_held,
        "rows": rows,
        "targets": {
            "ratio_target": OPENSSL_TARGET,
            "min_ratio": worst.ratio,
            "worst": {"cipher": worst.cipher, "direction": worst.direction, "size": worst.size},
            "every_ratio_ge_target": all_ok,
        },
    });
    let js = serde_json::to_string_pretty(&v)?;
    write(&args.out.join("vs-openssl.json"), &js)?;
    if args.json {
        eprint!("{text}");
        println!("{js}");
    } else {
        print!("{text}");
    }
    Ok(())
}

// ---- --compare ---------------------------------------------------------------------------

/// Method names of a report in table order (single devices first), with the single flag.
fn methods_of(rep: &CompareReport) -> Vec<(String, bool)> {
    let mut out: Vec<(String, bool)> = Vec::new();
    for r in &rep.runs {
        if !out.iter().any(|(m, _)| *m == r.method) {
            out.push((r.method.clone(), r.single));
        }
    }
    out
}

/// Workload columns of a report: sizes in order, then 0 for the mixed queue.
fn columns_of(rep: &CompareReport) -> Vec<usize> {
    let mut out: Vec<usize> = Vec::new();
    for r in &rep.runs {
        if !out.contains(&r.size) {
            out.push(r.size);
        }
    }
    out.sort_by_key(|&s| (s == 0, s));
    out
}

fn row<'a>(
    rep: &'a CompareReport,
    method: &str,
    size: usize,
) -> Option<&'a heloom_devices::compare::RunRow> {
    rep.runs
        .iter()
        .find(|r| r.method == method && r.size == size)
}

fn fmt_items(n: f64) -> String {
    if (n - n.round()).abs() < 0.05 {
        format!("{n:.0}")
    } else {
        format!("{n:.1}")
    }
}

/// Tables 2 and 3 and the efficiency table of one report.
fn render_tables(rep: &CompareReport) -> String {
    let methods = methods_of(rep);
    let cols = columns_of(rep);
    let devices: Vec<String> = rep.devices.iter().map(|d| d.name.clone()).collect();
    let mut header = vec!["size (B)".to_string()];
    header.extend(cols.iter().map(|&s| size_label(s)));
    let mut s = String::new();

    s.push_str("Table 2: time per method (ms, best of the repetitions)\n");
    let mut body: Vec<Vec<String>> = methods
        .iter()
        .map(|(m, _)| {
            let mut r = vec![m.clone()];
            r.extend(
                cols.iter()
                    .map(|&c| row(rep, m, c).map_or("-".into(), |x| fmt_sig(x.ms))),
            );
            r
        })
        .collect();
    let mut ideal = vec!["ideal".to_string()];
    ideal.extend(cols.iter().map(|&c| {
        rep.rows(c)
            .next()
            .map_or("-".into(), |x| fmt_sig(x.ideal_ms))
    }));
    body.push(ideal);
    s.push_str(&table(&header, &body));

    let combined: Vec<&(String, bool)> = methods.iter().filter(|(_, single)| !single).collect();
    if !combined.is_empty() {
        s.push_str(&format!(
            "\nTable 3: items each device took ({}; single devices take every item)\n",
            devices.join(" / ")
        ));
        let body: Vec<Vec<String>> = combined
            .iter()
            .map(|(m, _)| {
                let mut r = vec![m.clone()];
                r.extend(cols.iter().map(|&c| {
                    row(rep, m, c).map_or("-".into(), |x| {
                        devices
                            .iter()
                            .map(|d| fmt_items(x.items_per_device.get(d).copied().unwrap_or(0.0)))
                            .collect::<Vec<_>>()
                            .join(" / ")
                    })
                }));
                r
            })
            .collect();
        s.push_str(&table(&header, &body));
    }

    s.push_str("\nEfficiency: ideal / measured (a single device: its share of the ideal)\n");
    let body: Vec<Vec<String>> =
        methods
            .iter()
            .map(|(m, _)| {
                let mut r = vec![m.clone()];
                r.extend(cols.iter().map(|&c| {
                    row(rep, m, c).map_or("-".into(), |x| format!("{:.3}", x.efficiency))
                }));
                r
            })
            .collect();
    s.push_str(&table(&header, &body));
    if cols.contains(&0) {
        s.push_str("  (mixed: one queue holding items/sizes items of every size)\n");
    }
    s
}

/// Efficiency of `method` over the uniform sizes and on the mixed queue.
fn efficiency_check(rep: &CompareReport, method: &str) -> Option<Value> {
    let uniform: Vec<_> = rep
        .runs
        .iter()
        .filter(|r| r.method == method && r.size > 0)
        .collect();
    let worst = uniform
        .iter()
        .min_by(|a, b| a.efficiency.total_cmp(&b.efficiency))?;
    let mixed = row(rep, method, 0).map(|r| r.efficiency);
    Some(json!({
        "min_efficiency": worst.efficiency,
        "worst_size": worst.size,
        "every_size_ge_target": uniform.iter().all(|r| r.efficiency >= EFFICIENCY_TARGET),
        "mixed_efficiency": mixed,
        "mixed_ge_target": mixed.map(|e| e >= EFFICIENCY_TARGET),
    }))
}

/// heloom's time against the fastest single device at each uniform size (and mixed).
fn fastest_single_check(rep: &CompareReport) -> Option<Value> {
    let ratios: Vec<(usize, f64)> = rep
        .runs
        .iter()
        .filter(|r| r.method == "heloom" && r.size > 0)
        .filter_map(|r| rep.fastest_single_ms(r.size).map(|f| (r.size, r.ms / f)))
        .collect();
    let worst = ratios.iter().max_by(|a, b| a.1.total_cmp(&b.1))?;
    let mixed = row(rep, "heloom", 0).and_then(|r| rep.fastest_single_ms(0).map(|f| r.ms / f));
    Some(json!({
        "worst_ratio": worst.1,
        "worst_size": worst.0,
        "every_size_le_fastest_single": ratios.iter().all(|r| r.1 <= 1.0),
        "mixed_ratio": mixed,
        "mixed_le_fastest_single": mixed.map(|m| m <= 1.0),
    }))
}

/// The targets of one report as JSON and text.
fn targets(rep: &CompareReport) -> (Value, String) {
    let mut v = json!({"cipher": rep.cipher, "direction": rep.direction});
    let mut s = format!(
        "\nTargets ({} {}): efficiency >= {EFFICIENCY_TARGET:.2} at every size; heloom no slower than the fastest single device\n",
        rep.cipher, rep.direction
    );
    if rep.devices.len() < 2 {
        s.push_str("  n/a: one device, no combined methods\n");
        return (v, s);
    }
    for m in ["pull", "heloom"] {
        match efficiency_check(rep, m) {
            Some(c) => {
                let f = |k: &str| c[k].as_f64().unwrap_or(f64::NAN);
                let ok = c["every_size_ge_target"].as_bool().unwrap_or(false);
                s.push_str(&format!(
                    "  {m:<7} efficiency: min {:.3} at {} B: {}",
                    f("min_efficiency"),
                    c["worst_size"],
                    pass(ok)
                ));
                if let Some(e) = c["mixed_efficiency"].as_f64() {
                    s.push_str(&format!(
                        "  (mixed queue {e:.3}: {})",
                        pass(e >= EFFICIENCY_TARGET)
                    ));
                }
                s.push('\n');
                v[m] = c;
            }
            None => s.push_str(&format!("  {m:<7} not run\n")),
        }
    }
    match fastest_single_check(rep) {
        Some(c) => {
            let ok = c["every_size_le_fastest_single"].as_bool().unwrap_or(false);
            s.push_str(&format!(
                "  heloom  time <= fastest single device at every size: {} (worst heloom/fastest {:.3} at {} B)",
                pass(ok),
                c["worst_ratio"].as_f64().unwrap_or(f64::NAN),
                c["worst_size"],
            ));
            if let Some(r) = c["mixed_ratio"].as_f64() {
                s.push_str(&format!("  (mixed queue {r:.3}: {})", pass(r <= 1.0)));
            }
            s.push('\n');
            if let Some(h) = v.get_mut("heloom") {
                h["vs_fastest_single"] = c;
            } else {
                v["heloom"] = json!({ "vs_fastest_single": c });
            }
        }
        None => {
            if efficiency_check(rep, "heloom").is_some() {
                s.push_str("  heloom  no single-device times to compare with\n");
            }
        }
    }
    (v, s)
}

/// Whether every per-report value at `path` is true (None where no report has one).
fn all_true(per: &[Value], path: &[&str]) -> Option<bool> {
    let vals: Vec<bool> = per
        .iter()
        .filter_map(|v| {
            let mut x = v;
            for p in path {
                x = x.get(p)?;
            }
            x.as_bool()
        })
        .collect();
    (!vals.is_empty()).then(|| vals.iter().all(|&b| b))
}

fn run_compare(args: &OffloadArgs) -> Result<()> {
    let specs = DeviceSpec::parse_list(&args.devices).context("reading --devices")?;
    let ciphers = args.ciphers()?;
    let dirs = args.directions();
    let sizes = args.sizes()?;
    let methods = args.combined_methods()?;
    if args.items == 0 {
        bail!("--items must be at least 1");
    }
    if args.reps == 0 {
        bail!("--reps must be at least 1");
    }
    let devices = open_aes_devices(&specs)
        .with_context(|| format!("opening the devices `{}`", args.devices))?;
    let refs: Vec<&dyn Device<_>> = devices.iter().map(|d| d.as_ref()).collect();

    let mut head = format!(
        "heloom offload --compare on {} ({} cores)\n{}\ndevices:\n",
        cpu_model(),
        heloom_pool::cores(),
        load_line(args.load)
    );
    for d in &refs {
        let i = d.info();
        head.push_str(&format!(
            "  {:<10} {:<7} {} worker(s)  {}\n",
            i.name,
            i.kind.name(),
            i.workers,
            i.engine
        ));
    }
    head.push_str(&format!(
        "{} items per size, {} timed repetition(s) after a warm-up\n",
        args.items, args.reps
    ));
    let emit = |text: &str| {
        if args.json {
            eprint!("{text}");
        } else {
            print!("{text}");
        }
    };
    emit(&head);

    let mut load = Competitors::start(args.load)?;
    let pb = bar(args.json);
    let mut reports = Vec::new();
    let mut text = head;
    let mut per_run_targets = Vec::new();
    for &c in &ciphers {
        for &d in &dirs {
            let cfg = CompareConfig {
                cipher: c,
                direction: d,
                sizes: sizes.clone(),
                items: args.items,
                reps: args.reps,
                methods: methods.clone(),
                mixed: !args.no_mixed,
                seed: args.seed,
            };
            pb.reset();
            let rep = compare(&refs, &cfg, &mut |label, done, total| {
                pb.set_length(total as u64);
                pb.set_position(done as u64);
                pb.set_message(format!("{} {} {label}", c.name(), d.name()));
            })
            .with_context(|| format!("comparing on {} {}", c.name(), d.name()))?;
            let mut part = format!("\n== {} {} ==\n", rep.cipher, rep.direction);
            part.push_str(&render_tables(&rep));
            let (tv, ts) = targets(&rep);
            part.push_str(&ts);
            pb.suspend(|| emit(&part));
            text.push_str(&part);
            per_run_targets.push(tv);
            reports.push(rep);
        }
    }
    pb.finish_and_clear();
    let load_held = load.all_running();
    drop(load);
    if args.load > 0 && !load_held {
        let w = "warning: a competing load process ended before the runs did\n";
        emit(w);
        text.push_str(w);
    }

    let runs: Vec<&heloom_devices::compare::RunRow> =
        reports.iter().flat_map(|r| r.runs.iter()).collect();
    let v = json!({
        "machine": machine(),
        "devices": reports.first().map(|r| &r.devices),
        "load": args.load,
        "load_held": load_held,
        "config": {
            "ciphers": ciphers.iter().map(|c| c.name()).collect::<Vec<_>>(),
            "directions": dirs.iter().map(|d| d.name()).collect::<Vec<_>>(),
            "sizes": sizes,
            "items": args.items,
            "reps": args.reps,
            "methods": methods.iter().map(|m| m.name(&[])).collect::<Vec<_>>(),
            "mixed": !args.no_mixed && sizes.len() > 1,
            "seed": args.seed,
        },
        "runs": runs,
        "targets": {
            "efficiency_target": EFFICIENCY_TARGET,
            "pull_every_size_ge_target": all_true(&per_run_targets, &["pull", "every_size_ge_target"]),
            "heloom_every_size_ge_target": all_true(&per_run_targets, &["heloom", "every_size_ge_target"]),
            "heloom_every_size_le_fastest_single": all_true(
                &per_run_targets,
                &["heloom", "vs_fastest_single", "every_size_le_fastest_single"],
            ),
            "per_run": per_run_targets,
        },
    });
    save(args, "offload", &v, &text)?;
    if !args.no_plots {
        for rep in &reports {
            let tag = format!("{}-{}", rep.cipher, rep.direction);
            let what = format!("{} {}, {}", rep.cipher, rep.direction, load_tag(args.load));
            table2_plot(
                rep,
                &args.out.join(format!("table2-{tag}.svg")),
                &format!("Table 2: time per method against item size ({what})"),
            )?;
            if rep.runs.iter().any(|r| !r.single) {
                efficiency_plot(
                    rep,
                    EFFICIENCY_TARGET,
                    &args.out.join(format!("efficiency-{tag}.svg")),
                    &format!("Efficiency (ideal / measured) against item size ({what})"),
                )?;
                items_plot(
                    rep,
                    &args.out.join(format!("items-{tag}.svg")),
                    &format!("Table 3: share of items per device ({what})"),
                )?;
            }
        }
    }
    eprintln!("results in {}", args.out.display());
    Ok(())
}

fn load_tag(n: usize) -> String {
    if n == 0 {
        "no load".into()
    } else {
        format!("load {n}")
    }
}

/// Mean items per device of a row, in device order (for the plots).
pub fn items_in_order(
    items: &BTreeMap<String, f64>,
    devices: &[heloom_devices::DeviceInfo],
) -> Vec<f64> {
    devices
        .iter()
        .map(|d| items.get(&d.name).copied().unwrap_or(0.0))
        .collect()
}
