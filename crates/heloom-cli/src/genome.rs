//! `heloom genome`: private longest-match search in a haplotype panel (seed 004). `serve` runs
//! the server, `query` the client, `demo` both as separate processes over localhost, checking
//! every answer against the plaintext PBWT search, and repeats the run with the server's tables
//! under memory budgets of 100%, 25% and 10% of its working set.

use std::io::{BufRead, BufReader, Write as _};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _, Result};
use clap::{Args, Subcommand, ValueEnum};
use heloom_apps::genome::net::{self, TcpTransport, DEFAULT_ADDR};
use heloom_apps::genome::protocol::{self, QueryOutcome};
use heloom_apps::genome::{run_query, Client, MatchResult, Mode, Panel, Pbwt, Server};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;

/// Arguments of `heloom genome`.
#[derive(Args, Debug)]
pub struct GenomeArgs {
    #[command(subcommand)]
    command: GenomeCommand,
}

#[derive(Subcommand, Debug)]
enum GenomeCommand {
    /// Serve the panel: answer encrypted longest-match queries on a TCP socket.
    Serve(ServeArgs),
    /// Query a server with an encrypted query (taken from a panel haplotype with mutations,
    /// or given with --query).
    Query(QueryArgs),
    /// Run a server process and a client on localhost for the embedded 2,184 x 10,000 panel:
    /// per-phase times, bytes per round, peak memory, agreement with the plaintext search,
    /// and the same run under server memory budgets of 100%, 25% and 10%.
    Demo(DemoArgs),
}

#[derive(Args, Debug)]
struct ServeArgs {
    /// Address to listen on (port 0: any free port; the address is printed on stdout).
    #[arg(long, default_value = DEFAULT_ADDR)]
    addr: String,
    /// Panel file (HLPANEL1, plain or gzip) instead of the embedded 2,184 x 10,000 panel.
    #[arg(long)]
    panel: Option<PathBuf>,
    /// Memory budget of the tiered store for the per-site tables, as a fraction of a
    /// session's tables (1 = all in memory).
    #[arg(long, default_value_t = 1.0)]
    budget_fraction: f64,
    /// Directory for spilled tables (default: a temporary directory).
    #[arg(long)]
    spill_dir: Option<PathBuf>,
    /// Stop after this many connections (0: serve forever).
    #[arg(long, default_value_t = 0)]
    sessions: usize,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum ModeArg {
    /// One round per query character.
    Interactive,
    /// One round for a query of at most 12 sites.
    Noninteractive,
}

impl From<ModeArg> for Mode {
    fn from(m: ModeArg) -> Mode {
        match m {
            ModeArg::Interactive => Mode::Interactive,
            ModeArg::Noninteractive => Mode::NonInteractive,
        }
    }
}

#[derive(Args, Debug, Clone)]
struct QuerySpec {
    /// First site of the query.
    #[arg(long, default_value_t = 2000)]
    start: usize,
    /// Query length (sites).
    #[arg(long, default_value_t = 1)]
    length: usize,
    /// Interactive (one round per site) or non-interactive (one round, at most 12 sites).
    #[arg(long, value_enum, default_value = "interactive")]
    mode: ModeArg,
    /// The query alleles as a string of 0 and 1 (default: a panel haplotype with mutations).
    #[arg(long)]
    query: Option<String>,
    /// Haplotype of the embedded panel the query is copied from (default: drawn with --seed).
    #[arg(long)]
    haplotype: Option<usize>,
    /// Probability that each copied allele is flipped (a relative's haplotype, not a copy).
    #[arg(long, default_value_t = 0.03)]
    mutation_rate: f64,
    /// Seed of the query's haplotype and mutations.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

#[derive(Args, Debug)]
struct QueryArgs {
    /// Server address.
    #[arg(long, default_value = DEFAULT_ADDR)]
    addr: String,
    #[command(flatten)]
    spec: QuerySpec,
    /// Print one JSON object instead of the report.
    #[arg(long)]
    json: bool,
}

#[derive(Args, Debug)]
struct DemoArgs {
    #[command(flatten)]
    spec: QuerySpec,
    /// Memory budgets to run, as fractions of the server's working set (first = baseline).
    #[arg(long, value_delimiter = ',', default_value = "1,0.25,0.1")]
    budgets: Vec<f64>,
    /// Runs per budget (each with a fresh server process); the fastest is reported.
    #[arg(long, default_value_t = 3)]
    reps: usize,
    /// Print one JSON object instead of the report.
    #[arg(long)]
    json: bool,
    /// Also write `genome-<length>.json` and `.txt` into this directory.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
}

/// Runs `heloom genome`.
pub fn run(args: &GenomeArgs) -> Result<()> {
    match &args.command {
        GenomeCommand::Serve(a) => serve(a),
        GenomeCommand::Query(a) => query(a),
        GenomeCommand::Demo(a) => demo(a),
    }
}

fn load_panel(path: Option<&PathBuf>) -> Result<Panel> {
    Ok(match path {
        Some(p) => Panel::load(p)?,
        None => Panel::embedded()?,
    })
}

fn serve(a: &ServeArgs) -> Result<()> {
    if !(a.budget_fraction > 0.0 && a.budget_fraction <= 1.0) {
        bail!(
            "--budget-fraction must be in (0, 1], not {}",
            a.budget_fraction
        );
    }
    let t = Instant::now();
    let panel = load_panel(a.panel.as_ref())?;
    let load_s = t.elapsed().as_secs_f64();
    let server = Server::new(&panel)?;
    let server =
        heloom_apps::genome::tiered::with_budget(server, a.budget_fraction, a.spill_dir.clone())?;
    let listener = std::net::TcpListener::bind(&a.addr)
        .with_context(|| format!("cannot listen on {}", a.addr))?;
    let addr = listener.local_addr()?;
    eprintln!(
        "heloom genome serve: {} haplotypes x {} sites (panel {:.2} s, PBWT {:.2} s), budget {:.0}%",
        panel.haplotypes(),
        panel.sites(),
        load_s,
        server.pbwt_s,
        100.0 * a.budget_fraction
    );
    // The first stdout line tells a parent process (the demo) where to connect.
    println!(
        "listening {addr} startup_s {:.4}",
        t.elapsed().as_secs_f64()
    );
    std::io::stdout().flush()?;
    net::serve(&server, &listener, a.sessions, &mut |m| eprintln!("  {m}"))?;
    Ok(())
}

/// The query alleles: given, or copied from a panel haplotype with mutations.
fn make_query(spec: &QuerySpec, panel: &Panel) -> Result<(Vec<u8>, Option<usize>)> {
    if let Some(q) = &spec.query {
        let v: Vec<u8> = q
            .chars()
            .map(|c| match c {
                '0' => Ok(0),
                '1' => Ok(1),
                _ => bail!("--query takes 0s and 1s, found {c:?}"),
            })
            .collect::<Result<_>>()?;
        return Ok((v, None));
    }
    if spec.start + spec.length > panel.sites() || spec.length == 0 {
        bail!(
            "a query of length {} from site {} does not fit in {} sites",
            spec.length,
            spec.start,
            panel.sites()
        );
    }
    let mut rng = ChaCha20Rng::seed_from_u64(spec.seed);
    let h = match spec.haplotype {
        Some(h) if h < panel.haplotypes() => h,
        Some(h) => bail!("--haplotype {h} is not below {}", panel.haplotypes()),
        None => rng.gen_range(0..panel.haplotypes()),
    };
    let mut q = panel.haplotype_segment(h, spec.start, spec.length);
    for x in &mut q {
        if rng.gen_bool(spec.mutation_rate.clamp(0.0, 1.0)) {
            *x ^= 1;
        }
    }
    Ok((q, Some(h)))
}

/// One client run against a server at `addr`.
struct ClientRun {
    keygen_s: f64,
    total_s: f64,
    outcome: QueryOutcome,
    client_peak: u64,
}

fn client_run(
    addr: &str,
    mode: Mode,
    start: usize,
    q: &[u8],
    say: &mut dyn FnMut(&str),
) -> Result<ClientRun> {
    let t = Instant::now();
    say("client: key generation");
    let client = Client::new()?;
    let keygen_s = t.elapsed().as_secs_f64();
    say("client: connecting, uploading keys");
    let mut tr = TcpTransport::connect(addr, Duration::from_secs(5)).with_context(|| {
        format!("cannot connect to {addr}; is `heloom genome serve --addr {addr}` running?")
    })?;
    say(&format!(
        "client: {} rounds",
        if mode == Mode::Interactive {
            q.len()
        } else {
            1
        }
    ));
    let outcome = run_query(&client, &mut tr, mode, start, q)?;
    Ok(ClientRun {
        keygen_s,
        total_s: t.elapsed().as_secs_f64(),
        outcome,
        client_peak: heloom_apps::cryptonets::evaluate::peak_memory(),
    })
}

fn query(a: &QueryArgs) -> Result<()> {
    let panel = Panel::embedded()?;
    let (q, h) = make_query(&a.spec, &panel)?;
    let mode = a.spec.mode.into();
    let progress = crate::bench::progress::Progress::new(0);
    let run = client_run(&a.addr, mode, a.spec.start, &q, &mut |m| progress.step(m))?;
    progress.finish();
    let r = &run.outcome;
    let j = serde_json::json!({
        "query_length": q.len(),
        "start": a.spec.start,
        "haplotype": h,
        "mode": mode,
        "result": r.result,
        "total_s": run.total_s,
        "keygen_s": run.keygen_s,
        "outcome": r,
    });
    if a.json {
        println!("{}", serde_json::to_string_pretty(&j)?);
    } else {
        println!(
            "longest match {} sites from site {} ({} haplotypes), {:.2} s end to end",
            r.result.length, a.spec.start, r.result.count, run.total_s
        );
    }
    Ok(())
}

/// A server process started by the demo.
struct ServerProc {
    child: Child,
    addr: String,
    startup_s: f64,
}

impl Drop for ServerProc {
    fn drop(&mut self) {
        // The server exits by itself after its one session; this only cleans up after errors.
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

fn spawn_server(budget: f64, spill: &std::path::Path) -> Result<ServerProc> {
    let exe = std::env::current_exe().context("locating this program to start the server")?;
    let mut child = Command::new(exe)
        .args([
            "genome",
            "serve",
            "--addr",
            "127.0.0.1:0",
            "--sessions",
            "1",
        ])
        .arg("--budget-fraction")
        .arg(budget.to_string())
        .arg("--spill-dir")
        .arg(spill)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .context("starting the server process")?;
    let Some(out) = child.stdout.take() else {
        bail!("no stdout from the server process");
    };
    let mut line = String::new();
    BufReader::new(out).read_line(&mut line)?;
    let mut it = line.split_whitespace();
    let (Some("listening"), Some(addr), Some("startup_s"), Some(s)) =
        (it.next(), it.next(), it.next(), it.next())
    else {
        let _ = child.kill();
        bail!("the server process did not start (said {line:?})");
    };
    Ok(ServerProc {
        addr: addr.to_string(),
        startup_s: s.parse().unwrap_or(f64::NAN),
        child,
    })
}

/// One budget run of the demo.
#[derive(serde::Serialize)]
struct BudgetRun {
    budget_fraction: f64,
    total_s: f64,
    slowdown: f64,
    /// Server time: initialisation (tables into the store) and look-ups.
    server_s: f64,
    server_slowdown: f64,
    per_char_server_ms: f64,
    server_init_s: f64,
    all_match: bool,
    server_peak_memory_bytes: u64,
    store: serde_json::Value,
    /// Server look-up of each round, milliseconds (plotted).
    round_server_ms: Vec<f64>,
}

/// Server look-up time per round, one line per budget: what a memory budget costs over the
/// query (prefetch misses would show as spikes).
fn plot_rounds(runs: &[BudgetRun], len: usize, path: &std::path::Path) -> Result<()> {
    use heloom_bench::plot::{draw_legend, draw_lines, pe, Series};
    use plotters::prelude::*;
    let colours = [BLUE, RED, GREEN, MAGENTA, CYAN, BLACK];
    let series: Vec<Series> = runs
        .iter()
        .enumerate()
        .map(|(i, r)| {
            (
                format!("budget {:.0}% of the tables", 100.0 * r.budget_fraction),
                colours[i % colours.len()],
                r.round_server_ms
                    .iter()
                    .enumerate()
                    .map(|(k, &ms)| ((k + 1) as f64, ms))
                    .collect(),
            )
        })
        .collect();
    let ymax = series
        .iter()
        .flat_map(|(_, _, p)| p.iter().map(|q| q.1))
        .fold(0.0, f64::max)
        * 1.4;
    let xmax = series.iter().map(|(_, _, p)| p.len()).max().unwrap_or(1) as f64;
    let root = SVGBackend::new(path, (1000, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(pe)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!("heloom genome: server look-up per round, query of {len} sites"),
            ("sans-serif", 20),
        )
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(60)
        .build_cartesian_2d(0.5..(xmax + 0.5), 0.0..ymax.max(1.0))
        .map_err(pe)?;
    chart
        .configure_mesh()
        .x_desc("round (query character)")
        .y_desc("server look-up, ms")
        .draw()
        .map_err(pe)?;
    draw_lines(&mut chart, &series)?;
    draw_legend(&mut chart, SeriesLabelPosition::UpperRight)?;
    root.present().map_err(pe)?;
    Ok(())
}

fn demo(a: &DemoArgs) -> Result<()> {
    let spec = &a.spec;
    let mode: Mode = spec.mode.into();
    if a.budgets.is_empty() || a.budgets.iter().any(|&b| !(b > 0.0 && b <= 1.0)) {
        bail!("--budgets takes fractions in (0, 1]");
    }
    let panel = Panel::embedded()?;
    let (q, h) = make_query(spec, &panel)?;
    let pbwt = Pbwt::build(&panel)?;
    let reference = pbwt.longest_match(spec.start, &q)?;
    let ref_counts: Vec<usize> = pbwt
        .intervals(spec.start, &q)?
        .iter()
        .map(|&(f, g)| g - f)
        .collect();
    let spill = std::env::temp_dir().join(format!("heloom-genome-{}", std::process::id()));
    std::fs::create_dir_all(&spill)?;
    let progress = crate::bench::progress::Progress::new(a.budgets.len() as u64);
    let mut runs = Vec::new();
    let mut main: Option<(ClientRun, f64)> = None;
    let mut first_total_s = f64::NAN;
    for &b in &a.budgets {
        // Each budget: `reps` fresh server processes, the fastest run kept (the machine is
        // shared; the first run of a process also pays cold caches).
        let mut best: Option<(ClientRun, f64)> = None;
        let mut ok = true;
        for rep in 0..a.reps.max(1) {
            progress.step(&format!(
                "budget {:.0}% run {}: starting the server",
                100.0 * b,
                rep + 1
            ));
            let sp = spawn_server(b, &spill)?;
            let run = client_run(&sp.addr, mode, spec.start, &q, &mut |m| {
                progress.step(&format!("budget {:.0}% run {}: {m}", 100.0 * b, rep + 1))
            })?;
            let startup_s = sp.startup_s;
            drop(sp);
            let o = &run.outcome;
            ok &= o.result == reference && (mode == Mode::NonInteractive || o.counts == ref_counts);
            if first_total_s.is_nan() {
                first_total_s = run.total_s;
            }
            if best.as_ref().is_none_or(|(r, _)| run.total_s < r.total_s) {
                best = Some((run, startup_s));
            }
        }
        let Some((run, startup_s)) = best else {
            bail!("no run");
        };
        let o = &run.outcome;
        let base = runs.first().map_or(run.total_s, |r: &BudgetRun| r.total_s);
        let server_s = o.server_init_s + o.rounds.iter().map(|r| r.server_s).sum::<f64>();
        let base_server = runs.first().map_or(server_s, |r: &BudgetRun| r.server_s);
        runs.push(BudgetRun {
            budget_fraction: b,
            total_s: run.total_s,
            slowdown: run.total_s / base,
            server_s,
            server_slowdown: server_s / base_server,
            per_char_server_ms: 1e3 * o.rounds.iter().map(|r| r.server_s).sum::<f64>()
                / q.len() as f64,
            server_init_s: o.server_init_s,
            all_match: ok,
            server_peak_memory_bytes: o.server_stats["peak_memory_bytes"].as_u64().unwrap_or(0),
            store: o.server_stats["store"].clone(),
            round_server_ms: o.rounds.iter().map(|r| 1e3 * r.server_s).collect(),
        });
        if main.is_none() {
            main = Some((run, startup_s));
        }
        progress.inc();
    }
    progress.finish();
    let _ = std::fs::remove_dir_all(&spill);
    let Some((run, startup_s)) = main else {
        bail!("no run");
    };
    let o = &run.outcome;
    // Per character of the query (the non-interactive mode has one round for all of them).
    let rounds = q.len() as f64;
    let per_char = |f: &dyn Fn(&protocol::RoundTimes) -> f64| {
        1e3 * o.rounds.iter().map(f).sum::<f64>() / rounds
    };
    let server_peak = o.server_stats["peak_memory_bytes"].as_u64().unwrap_or(0);
    let params = protocol::parameters()?;
    let all_match = runs.iter().all(|r| r.all_match);
    let bytes_up: usize = o.rounds.iter().map(|r| r.bytes_up).sum();
    let bytes_down: usize = o.rounds.iter().map(|r| r.bytes_down).sum();
    let target_s = if q.len() <= 1 {
        5.0
    } else {
        120.0 * q.len() as f64 / 100.0
    };
    let j = serde_json::json!({
        "query_length": q.len(),
        "start": spec.start,
        "mode": mode,
        "haplotype": h,
        "mutation_rate": spec.mutation_rate,
        "panel": {"haplotypes": panel.haplotypes(), "sites": panel.sites()},
        "result": o.result,
        "reference": reference,
        "all_match": all_match,
        "total_s": run.total_s,
        "total_s_first_run": first_total_s,
        "reps": a.reps.max(1),
        "client_keygen_s": run.keygen_s,
        "hello_s": o.hello_s,
        "server_startup_s": startup_s,
        "server_pbwt_s": o.server_stats["pbwt_s"],
        "server_init_s": o.server_init_s,
        "per_char_server_ms": per_char(&|r| r.server_s),
        "per_char_encrypt_ms": per_char(&|r| r.encrypt_s),
        "per_char_decrypt_ms": per_char(&|r| r.decrypt_s),
        "per_char_round_trip_ms": per_char(&|r| r.exchange_s),
        "bytes_per_char": (bytes_up + bytes_down) as f64 / rounds,
        "bytes_up_per_char": bytes_up as f64 / rounds,
        "bytes_down_per_char": bytes_down as f64 / rounds,
        "hello_bytes": o.hello_bytes,
        "peak_memory_bytes": server_peak.max(run.client_peak),
        "server_peak_memory_bytes": server_peak,
        "client_peak_memory_bytes": run.client_peak,
        "largest_angle_error": o.largest_error,
        "half_spacing": std::f64::consts::PI / protocol::SLOTS as f64,
        "budget_runs": runs,
        "params": {
            "n": params.n(),
            "log_q": params.log_q(),
            "log_qp": params.log_qp(),
            "primes": params.moduli().len(),
            "security_bits": params.estimated_security(),
        },
        "target_total_s": target_s,
        "target_met": run.total_s <= target_s,
        "cpu": heloom_math::backend::cpu_model(),
        "cores": heloom_pool::cores(),
    });
    let text = render(&j);
    if let Some(dir) = &a.out {
        std::fs::create_dir_all(dir)?;
        std::fs::write(
            dir.join(format!("genome-{}.json", q.len())),
            serde_json::to_string_pretty(&j)?,
        )?;
        std::fs::write(dir.join(format!("genome-{}.txt", q.len())), &text)?;
        plot_rounds(&runs, q.len(), &dir.join(format!("genome-{}.svg", q.len())))?;
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&j)?);
    } else {
        print!("{text}");
    }
    if !all_match {
        bail!("an encrypted answer differs from the plaintext reference");
    }
    Ok(())
}

/// `heloom demo`'s genome section: a 30-site query against the embedded panel, the server in
/// its own process, with the tables under budgets of 100% and 25%; fails if an answer differs
/// from the plaintext search.
pub fn demo_section() -> Result<()> {
    println!("\nPrivate genome search over a PBWT (heloom genome demo --length 30)");
    demo(&DemoArgs {
        spec: QuerySpec {
            start: 2000,
            length: 30,
            mode: ModeArg::Interactive,
            query: None,
            haplotype: None,
            mutation_rate: 0.03,
            seed: 1,
        },
        budgets: vec![1.0, 0.25],
        reps: 1,
        json: false,
        out: None,
    })
}

fn render(j: &serde_json::Value) -> String {
    use std::fmt::Write as _;
    let f = |k: &str| j[k].as_f64().unwrap_or(f64::NAN);
    let yes = |k: &str| j[k].as_bool() == Some(true);
    let mut s = String::new();
    let r: Option<MatchResult> = serde_json::from_value::<(usize, usize)>(serde_json::json!([
        j["result"]["length"],
        j["result"]["count"]
    ]))
    .ok()
    .map(|(length, count)| MatchResult { length, count });
    let _ = writeln!(
        s,
        "heloom genome demo: {} haplotypes x {} sites, query of {} sites from site {} ({}), {} cores",
        j["panel"]["haplotypes"], j["panel"]["sites"], j["query_length"], j["start"], j["mode"].as_str().unwrap_or("?"), j["cores"]
    );
    let _ = writeln!(
        s,
        "  CKKS N = {}, log QP = {:.0}, {}-bit security; indices as 4096th roots of unity",
        j["params"]["n"],
        f64::from(j["params"]["log_qp"].as_f64().unwrap_or(0.0) as f32),
        j["params"]["security_bits"]
    );
    if let Some(r) = r {
        let _ = writeln!(
            s,
            "  answer: longest match {} sites, {} haplotypes; plaintext reference {} / {}: {}",
            r.length,
            r.count,
            j["reference"]["length"],
            j["reference"]["count"],
            if yes("all_match") {
                "equal (every run)"
            } else {
                "DIFFERENT"
            }
        );
    }
    let _ = writeln!(
        s,
        "  server startup (panel + PBWT)   {:>9.3} s",
        f("server_startup_s")
    );
    let _ = writeln!(
        s,
        "  client key generation           {:>9.3} s",
        f("client_keygen_s")
    );
    let _ = writeln!(
        s,
        "  hello (keys up, tables)         {:>9.3} s   ({:.2} MB; server init {:.3} s)",
        f("hello_s"),
        f("hello_bytes") / 1e6,
        f("server_init_s")
    );
    let _ = writeln!(
        s,
        "  per character: encrypt {:.1} ms, server look-up {:.1} ms, decrypt {:.1} ms, round trip {:.1} ms",
        f("per_char_encrypt_ms"),
        f("per_char_server_ms"),
        f("per_char_decrypt_ms"),
        f("per_char_round_trip_ms")
    );
    let _ = writeln!(
        s,
        "  per character: {:.0} KB ({:.0} KB up, {:.0} KB down)",
        f("bytes_per_char") / 1e3,
        f("bytes_up_per_char") / 1e3,
        f("bytes_down_per_char") / 1e3
    );
    let _ = writeln!(
        s,
        "  total (keygen to answer)        {:>9.3} s   (fastest of {}; first run {:.3} s) target {:.0} s: {}",
        f("total_s"),
        j["reps"],
        f("total_s_first_run"),
        f("target_total_s"),
        if yes("target_met") {
            "met"
        } else {
            "missed"
        }
    );
    let _ = writeln!(
        s,
        "  peak memory: server {:.0} MB, client {:.0} MB",
        f("server_peak_memory_bytes") / 1e6,
        f("client_peak_memory_bytes") / 1e6
    );
    let _ = writeln!(
        s,
        "  memory budgets (fraction of the server's encoded tables, {:.1} MB; keys and PBWT stay in memory):",
        j["budget_runs"][0]["store"]["working_set_bytes"].as_f64().unwrap_or(f64::NAN) / 1e6
    );
    if let Some(runs) = j["budget_runs"].as_array() {
        for b in runs {
            let g = |k: &str| b[k].as_f64().unwrap_or(f64::NAN);
            let st = &b["store"];
            let _ = writeln!(
                s,
                "    {:>5.0}%  total {:>8.3} s  slowdown {:.3}x  server {:.3} s ({:.3}x)  look-up {:.1} ms/char  server peak {:.0} MB  store: {} gets, {} misses, {} prefetch hits, stall {:.3} s",
                100.0 * g("budget_fraction"),
                g("total_s"),
                g("slowdown"),
                g("server_s"),
                g("server_slowdown"),
                g("per_char_server_ms"),
                g("server_peak_memory_bytes") / 1e6,
                st["gets"],
                st["misses"],
                st["prefetch_hits"],
                st["stall_s"].as_f64().unwrap_or(0.0)
            );
        }
    }
    s
}
