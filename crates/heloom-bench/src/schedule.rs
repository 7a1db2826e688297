//! `heloom schedule`: streams of e^x jobs scheduled on the local cores (real ciphertexts) or
//! simulated with a profile, one policy or every policy at every gap.

use crate::plot::schedule::{compare_plot, latency_plot, utilisation_plot};
use anyhow::{bail, Context, Result};
use heloom_runtime::cost::{effective_threads, CostModel};
use heloom_runtime::exec::execute;
use heloom_runtime::load::{default_window, poisson_arrivals};
use heloom_runtime::metrics::{compare_json, jobs_csv, summarize, summary_csv, summary_table};
use heloom_runtime::policy::{policy_by_name, Variant, POLICY_NAMES};
use heloom_runtime::profile::{measure_host, MeasureConfig, Profile};
use heloom_runtime::scheduler::Scheduler;
use heloom_runtime::sim::simulate;
use heloom_runtime::workload::{default_params, ExpWorkload};
use heloom_runtime::{exp_graph, ExpVariant, RunRecord, RunSummary, TaskGraph};
use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The paper's mean gaps (Table 6).
pub const PAPER_GAPS: [f64; 6] = [60.0, 70.0, 80.0, 90.0, 100.0, 120.0];

/// The paper's Table 6 (ms, first measured start to last measured finish), per policy at
/// [`PAPER_GAPS`].
pub const PAPER_TABLE6: [(&str, [f64; 6]); 4] = [
    (
        "fixed-1",
        [143354.0, 146066.0, 134036.0, 146159.0, 161897.0, 196799.0],
    ),
    (
        "fixed-half",
        [126634.0, 126979.0, 133520.0, 145248.0, 160605.0, 195600.0],
    ),
    (
        "fixed-full",
        [153122.0, 153039.0, 153146.0, 146915.0, 160532.0, 195467.0],
    ),
    (
        "paper-dynamic",
        [145761.0, 147913.0, 146059.0, 145560.0, 160513.0, 195519.0],
    ),
];

/// Options of `heloom schedule`.
#[derive(clap::Args, Debug, Clone)]
pub struct ScheduleArgs {
    /// Thread policy: fixed-1, fixed-half, fixed-full, paper-dynamic or heloom.
    #[arg(long, default_value = "heloom")]
    pub policy: String,
    /// Mean gap between job arrivals, ms (default: the largest scaled gap).
    #[arg(long)]
    pub gap_ms: Option<f64>,
    /// Number of jobs (default: 2,300 with the Xeon Phi profile, scaled to the machine
    /// otherwise).
    #[arg(long)]
    pub jobs: Option<usize>,
    /// Simulate with a profile (built-in name such as xeon-phi-7230f, or a JSON file) instead
    /// of running on this machine.
    #[arg(long, value_name = "PROFILE")]
    pub simulate: Option<String>,
    /// Every policy at every gap.
    #[arg(long)]
    pub compare: bool,
    /// Gaps for --compare, ms (comma-separated; default: the paper's with the Xeon Phi
    /// profile, the same load levels scaled to this machine otherwise).
    #[arg(long, value_delimiter = ',')]
    pub gaps: Vec<f64>,
    /// Print JSON on stdout (the table goes to stderr).
    #[arg(long)]
    pub json: bool,
    /// Directory for CSV, JSON and SVG plots.
    #[arg(long, default_value = "bench/results/schedule")]
    pub out: PathBuf,
    /// Host cost model for real runs: a profile JSON from `heloom profile` (default: measure
    /// a quick one now).
    #[arg(long, value_name = "PATH")]
    pub profile: Option<String>,
    /// log2 of the ring degree of the real workload.
    #[arg(long, default_value_t = 14)]
    pub log_n: u32,
    /// Seed of the arrival process (the same arrivals for every policy).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Skip the plots.
    #[arg(long)]
    pub no_plots: bool,
}

fn bar(len: u64, msg: &str) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let pb = ProgressBar::new(len);
    pb.set_style(
        ProgressStyle::with_template("{msg:>34} [{bar:30}] {pos}/{len} {elapsed}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    pb.set_message(msg.to_string());
    pb
}

/// The graphs, built for the real workload's parameters (`log_n`).
fn graphs(log_n: u32) -> Result<Vec<Arc<TaskGraph>>> {
    let params = default_params(log_n)?;
    let moduli = params.moduli().to_vec();
    let level = moduli.len() - 1;
    ExpVariant::ALL
        .iter()
        .map(|&v| Ok(Arc::new(exp_graph(v, &moduli, level, params.scale())?)))
        .collect()
}

/// Effective throughput at full occupancy in single-thread equivalents: capacity over the
/// slowdown there, for the paper graph's work mix.
fn effective_capacity(model: &dyn CostModel, v: &Variant) -> f64 {
    effective_threads(model, v.keyswitch_fraction, model.capacity())
}

/// The paper's gaps moved to `model`'s machine at the same load: a gap `D` offers the Xeon
/// Phi `W_phi / (X_phi D)` of its full-occupancy throughput `X`; the scaled gap offers the
/// same fraction here.
pub fn scaled_gaps(model: &dyn CostModel, graph: &Arc<TaskGraph>) -> Result<Vec<f64>> {
    let phi = Profile::load("xeon-phi-7230f")?;
    let vp = Variant::new(Arc::clone(graph), &phi);
    let vh = Variant::new(Arc::clone(graph), model);
    let ratio = (vh.work_ms / effective_capacity(model, &vh))
        / (vp.work_ms / effective_capacity(&phi, &vp));
    Ok(PAPER_GAPS
        .iter()
        .map(|g| (g * ratio * 100.0).round() / 100.0)
        .collect())
}

/// Loads or measures the model and says what it is.
fn host_model(args: &ScheduleArgs) -> Result<Profile> {
    if let Some(p) = &args.profile {
        return Profile::load(p).with_context(|| format!("loading profile {p}"));
    }
    let cfg = MeasureConfig {
        log_n: args.log_n,
        reps: 3,
        ..MeasureConfig::default()
    };
    let pb = bar(1, "measuring the host cost model");
    let prof = measure_host(&cfg, &mut |done, total, label| {
        pb.set_length(total as u64);
        pb.set_position(done as u64);
        pb.set_message(label.to_string());
    })?;
    pb.finish_and_clear();
    Ok(prof)
}

/// One run of one policy at one gap; for real runs also the simulated makespan.
pub struct Run {
    /// The record.
    pub record: RunRecord,
    /// Its summary.
    pub summary: RunSummary,
    /// Makespan the simulator predicts for the same arrivals (real runs).
    pub sim_makespan_ms: Option<f64>,
}

/// Everything a schedule invocation needs.
pub struct Setup {
    model: Arc<Profile>,
    graphs: Vec<Arc<TaskGraph>>,
    workload: Option<ExpWorkload<u64>>,
    label: String,
}

impl Setup {
    /// A simulation setup with `profile`.
    pub fn simulated(profile: &str, log_n: u32) -> Result<Self> {
        let model = Arc::new(Profile::load(profile)?);
        let label = format!("simulated:{}", model.name);
        Ok(Self {
            model,
            graphs: graphs(log_n)?,
            workload: None,
            label,
        })
    }

    /// A real setup: keys and inputs at `log_n`, and the host model.
    pub fn real(model: Profile, log_n: u32) -> Result<Self> {
        let pb = bar(1, "keys and encrypted inputs");
        let workload = ExpWorkload::<u64>::new(default_params(log_n)?, 16, 7)?;
        pb.finish_and_clear();
        Ok(Self {
            model: Arc::new(model),
            graphs: workload.variants().to_vec(),
            workload: Some(workload),
            label: "real".into(),
        })
    }

    /// The cost model.
    pub fn model(&self) -> &Profile {
        &self.model
    }

    /// The paper-shape graph.
    pub fn paper_graph(&self) -> &Arc<TaskGraph> {
        &self.graphs[0]
    }

    /// Whether this setup simulates the Xeon Phi.
    pub fn is_phi(&self) -> bool {
        self.workload.is_none() && self.model.name == "xeon-phi-7230f"
    }

    /// Threads given to HE tasks.
    pub fn capacity(&self) -> usize {
        if self.workload.is_some() {
            heloom_pool::cores()
        } else {
            self.model.capacity
        }
    }

    /// Runs `policy` on `jobs` jobs at `gap`.
    pub fn run(&self, policy: &str, gap: f64, jobs: usize, seed: u64) -> Result<Run> {
        let model: Arc<dyn CostModel> = self.model.clone();
        let make = || -> Result<Scheduler> {
            let p = policy_by_name(policy, Arc::clone(&model)).with_context(|| {
                format!(
                    "unknown policy '{policy}'; choose one of {}",
                    POLICY_NAMES.join(", ")
                )
            })?;
            Ok(Scheduler::new(
                p,
                model.as_ref(),
                self.graphs.clone(),
                self.capacity(),
            ))
        };
        let arrivals = poisson_arrivals(jobs, gap, seed);
        let window = default_window(jobs);
        let pb = bar(jobs as u64, &format!("{} {policy} D={gap} ms", self.label));
        let mut tick = |d: usize, _t: usize| pb.set_position(d as u64);
        // One simulated run on a fresh scheduler, its executor named `label`.
        let simulated = |label: &str, progress: &mut dyn FnMut(usize, usize)| -> Result<_> {
            let mut s = make()?;
            Ok(simulate(
                &mut s,
                model.as_ref(),
                &arrivals,
                gap,
                window,
                label,
                progress,
            ))
        };
        let (record, sim) = match &self.workload {
            None => (simulated(&self.label, &mut tick)?, None),
            Some(w) => {
                let mut s = make()?;
                let r = execute(&mut s, w, &arrivals, gap, window, &mut tick)?;
                let sim = simulated("simulated:host", &mut |_, _| {})?;
                (r, Some(summarize(&sim).makespan_ms))
            }
        };
        pb.finish_and_clear();
        let summary = summarize(&record);
        Ok(Run {
            record,
            summary,
            sim_makespan_ms: sim,
        })
    }
}

/// Default job count: the paper's 2,300 on the Xeon Phi; elsewhere enough for about 8 s of
/// arrivals at the smallest gap (at least 120).
pub fn default_jobs(setup: &Setup, gaps: &[f64]) -> usize {
    if setup.is_phi() {
        return 2300;
    }
    let g = gaps.iter().copied().fold(f64::INFINITY, f64::min);
    ((8000.0 / g.max(0.1)) as usize).clamp(120, 2300)
}

fn write(path: &Path, text: &str) -> Result<()> {
    if let Some(d) = path.parent() {
        std::fs::create_dir_all(d)?;
    }
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

/// Checks of the targets on a comparison. `min_latency_ms` is the shortest time one
/// job can take (the fastest variant's critical path): no policy finishes the measured window
/// sooner than the window's arrival span plus that, which bounds the gain any policy can show.
pub fn target_checks(
    runs: &[Run],
    gaps: &[f64],
    strict_gap: f64,
    min_latency_ms: f64,
) -> serde_json::Value {
    let mut shortest = true;
    let mut shortest_or_tied = true;
    let mut margin_ok = true;
    let mut p99_ok = true;
    let mut details = Vec::new();
    for &g in gaps {
        let at: Vec<&RunSummary> = runs
            .iter()
            .map(|r| &r.summary)
            .filter(|s| s.gap_ms == g)
            .collect();
        let Some(h) = at.iter().find(|s| s.policy == "heloom") else {
            continue;
        };
        let others: Vec<&&RunSummary> = at.iter().filter(|s| s.policy != "heloom").collect();
        let best_other = others
            .iter()
            .map(|s| s.makespan_ms)
            .fold(f64::INFINITY, f64::min);
        let best_fixed = others
            .iter()
            .filter(|s| s.policy.starts_with("fixed"))
            .map(|s| s.makespan_ms)
            .fold(f64::INFINITY, f64::min);
        let best_p99 = others
            .iter()
            .map(|s| s.p99_ms)
            .fold(f64::INFINITY, f64::min);
        let gain = 1.0 - h.makespan_ms / best_fixed;
        let record = runs
            .iter()
            .find(|r| r.summary.gap_ms == g && r.summary.policy == "heloom")
            .map(|r| &r.record);
        let span = record.map_or(0.0, |r| {
            let (a, b) = r.window;
            let first = r.jobs.get(a).map_or(0.0, |j| j.arrival_ms);
            let last = r.jobs.get(b).map_or(0.0, |j| j.arrival_ms);
            last - first
        });
        let bound = span + min_latency_ms;
        shortest &= h.makespan_ms <= best_other;
        // A real run's makespan carries about a millisecond of timing noise; where every policy
        // sits on the lower bound, within 0.05% of the best is a tie.
        shortest_or_tied &= h.makespan_ms <= best_other * 1.0005;
        if g <= strict_gap {
            margin_ok &= gain >= 0.10;
            p99_ok &= h.p99_ms < best_p99;
        } else {
            p99_ok &= h.p99_ms <= best_p99;
        }
        details.push(serde_json::json!({
            "gap_ms": g,
            "heloom_makespan_ms": h.makespan_ms,
            "best_other_makespan_ms": best_other,
            "gain_vs_best_fixed_pct": gain * 100.0,
            "heloom_p99_ms": h.p99_ms,
            "best_other_p99_ms": best_p99,
            "lower_bound_ms": bound,
            "largest_possible_gain_vs_best_fixed_pct": (1.0 - bound / best_fixed) * 100.0,
            "heloom_above_bound_pct": (h.makespan_ms / bound - 1.0) * 100.0,
        }));
    }
    serde_json::json!({
        "heloom_shortest_makespan_every_gap": shortest,
        "heloom_shortest_or_tied_within_0_05pct_every_gap": shortest_or_tied,
        "heloom_10pct_below_best_fixed_at_small_gaps": margin_ok,
        "heloom_lowest_p99": p99_ok,
        "strict_gap_ms": strict_gap,
        "per_gap": details,
    })
}

/// Side-by-side with the paper's Table 6 (Xeon Phi simulation only).
pub fn paper_table(runs: &[Run]) -> String {
    let mut s = String::from(
        "Seed 000 Table 6 beside this simulation (makespan of the measured window, s):\n",
    );
    s.push_str(&format!("{:<14}", "policy"));
    for g in PAPER_GAPS {
        s.push_str(&format!(" {:>17}", format!("D={g} paper/ours")));
    }
    s.push('\n');
    for name in POLICY_NAMES {
        s.push_str(&format!("{name:<14}"));
        for (i, g) in PAPER_GAPS.iter().enumerate() {
            let paper = PAPER_TABLE6
                .iter()
                .find(|(p, _)| *p == name)
                .map(|(_, v)| v[i] / 1000.0);
            let ours = runs
                .iter()
                .find(|r| r.summary.policy == name && r.summary.gap_ms == *g)
                .map(|r| r.summary.makespan_ms / 1000.0);
            let cell = match (paper, ours) {
                (Some(p), Some(o)) => format!("{p:.1}/{o:.1}"),
                (None, Some(o)) => format!("-/{o:.1}"),
                _ => "-".into(),
            };
            s.push_str(&format!(" {cell:>17}"));
        }
        s.push('\n');
    }
    s
}

/// Ranks (1 = shortest) of the paper's four policies at each gap, ours and the paper's.
pub fn ordering(runs: &[Run]) -> serde_json::Value {
    let mut out = Vec::new();
    for (i, g) in PAPER_GAPS.iter().enumerate() {
        let mut ours: Vec<(&str, f64)> = PAPER_TABLE6
            .iter()
            .filter_map(|(p, _)| {
                runs.iter()
                    .find(|r| r.summary.policy == *p && r.summary.gap_ms == *g)
                    .map(|r| (*p, r.summary.makespan_ms))
            })
            .collect();
        let mut paper: Vec<(&str, f64)> = PAPER_TABLE6.iter().map(|(p, v)| (*p, v[i])).collect();
        ours.sort_by(|a, b| a.1.total_cmp(&b.1));
        paper.sort_by(|a, b| a.1.total_cmp(&b.1));
        out.push(serde_json::json!({
            "gap_ms": g,
            "paper_order": paper.iter().map(|p| p.0).collect::<Vec<_>>(),
            "our_order": ours.iter().map(|p| p.0).collect::<Vec<_>>(),
            "best_matches": paper.first().map(|p| p.0) == ours.first().map(|p| p.0),
            "worst_matches": paper.last().map(|p| p.0) == ours.last().map(|p| p.0),
        }));
    }
    serde_json::Value::Array(out)
}

/// Runs `heloom schedule`.
pub fn run(args: &ScheduleArgs) -> Result<()> {
    let setup = match &args.simulate {
        Some(p) => Setup::simulated(p, args.log_n)?,
        None => {
            let m = host_model(args)?;
            Setup::real(m, args.log_n)?
        }
    };
    let default_gaps = if setup.is_phi() {
        PAPER_GAPS.to_vec()
    } else {
        scaled_gaps(setup.model(), setup.paper_graph())?
    };
    let (policies, gaps): (Vec<&str>, Vec<f64>) = if args.compare {
        let gaps = if args.gaps.is_empty() {
            default_gaps.clone()
        } else {
            args.gaps.clone()
        };
        (POLICY_NAMES.to_vec(), gaps)
    } else {
        if !POLICY_NAMES.contains(&args.policy.as_str()) {
            bail!(
                "unknown policy '{}'; choose one of {}",
                args.policy,
                POLICY_NAMES.join(", ")
            );
        }
        let g = args
            .gap_ms
            .unwrap_or_else(|| default_gaps.last().copied().unwrap_or(100.0));
        (vec![args.policy.as_str()], vec![g])
    };
    if let Some(g) = gaps.iter().find(|g| !(g.is_finite() && **g > 0.0)) {
        bail!("gap {g} ms must be a positive number");
    }
    let jobs = args.jobs.unwrap_or_else(|| default_jobs(&setup, &gaps));
    if jobs == 0 {
        bail!("--jobs must be at least 1");
    }
    let mut runs = Vec::new();
    let total = policies.len() * gaps.len();
    let overall = bar(total as u64, "runs");
    for &g in &gaps {
        for &p in &policies {
            runs.push(setup.run(p, g, jobs, args.seed)?);
            overall.inc(1);
        }
    }
    overall.finish_and_clear();
    report(args, &setup, &runs, &gaps, jobs)
}

/// Prints and writes the results of `runs`.
pub fn report(
    args: &ScheduleArgs,
    setup: &Setup,
    runs: &[Run],
    gaps: &[f64],
    jobs: usize,
) -> Result<()> {
    let summaries: Vec<RunSummary> = runs.iter().map(|r| r.summary.clone()).collect();
    let mut text = summary_table(&summaries);
    let sim_err: Vec<serde_json::Value> = runs
        .iter()
        .filter_map(|r| {
            r.sim_makespan_ms.map(|s| {
                let err = (s - r.summary.makespan_ms) / r.summary.makespan_ms * 100.0;
                serde_json::json!({
                    "policy": r.summary.policy, "gap_ms": r.summary.gap_ms,
                    "real_makespan_ms": r.summary.makespan_ms, "sim_makespan_ms": s,
                    "error_pct": err,
                })
            })
        })
        .collect();
    if !sim_err.is_empty() {
        text.push_str("\nSimulator (host profile) against the real run, same arrivals:\n");
        for e in &sim_err {
            text.push_str(&format!(
                "  {:<14} D={:>7.2} ms  real {:>9.1} ms  simulated {:>9.1} ms  ({:+.1}%)\n",
                e["policy"].as_str().unwrap_or(""),
                e["gap_ms"].as_f64().unwrap_or(0.0),
                e["real_makespan_ms"].as_f64().unwrap_or(0.0),
                e["sim_makespan_ms"].as_f64().unwrap_or(0.0),
                e["error_pct"].as_f64().unwrap_or(0.0),
            ));
        }
    }
    let mut extra = serde_json::json!({
        "machine": heloom_runtime::profile::host_machine(),
        "executor": runs.first().map(|r| r.summary.executor.clone()),
        "profile": setup.model().name,
        "capacity": setup.capacity(),
        "jobs": jobs,
        "window": default_window(jobs),
        "gaps_ms": gaps,
        "variants": setup.graphs.iter().map(|g| {
            let v = Variant::new(Arc::clone(g), setup.model());
            serde_json::json!({"name": g.name(), "tasks": g.tasks().len(),
                "work_ms": v.work_ms, "critical_path_fast_ms": v.cp_fast_ms})
        }).collect::<Vec<_>>(),
        "sim_vs_real": sim_err,
    });
    if args.compare {
        // Gaps at or below the paper's 80 ms, at this machine's scale.
        let strict = if setup.is_phi() {
            80.0
        } else {
            scaled_gaps(setup.model(), setup.paper_graph())?
                .get(2)
                .copied()
                .unwrap_or(0.0)
        };
        let min_latency = setup
            .graphs
            .iter()
            .map(|g| Variant::new(Arc::clone(g), setup.model()).cp_fast_ms)
            .fold(f64::INFINITY, f64::min);
        let checks = target_checks(runs, gaps, strict, min_latency);
        text.push_str("\nTargets (heloom against the other policies):\n");
        text.push_str(&format!(
            "  {:>8}  {:>11}  {:>11}  {:>9}  {:>12}  {:>11}  {:>10}  {:>10}\n",
            "gap ms",
            "heloom s",
            "best other",
            "vs fixed",
            "possible gain",
            "above bound",
            "p99 heloom",
            "p99 other"
        ));
        if let Some(rows) = checks["per_gap"].as_array() {
            for r in rows {
                let f = |k: &str| r[k].as_f64().unwrap_or(f64::NAN);
                text.push_str(&format!(
                    "  {:>8.2}  {:>11.2}  {:>11.2}  {:>8.1}%  {:>12.1}%  {:>10.2}%  {:>10.0}  {:>10.0}\n",
                    f("gap_ms"),
                    f("heloom_makespan_ms") / 1e3,
                    f("best_other_makespan_ms") / 1e3,
                    f("gain_vs_best_fixed_pct"),
                    f("largest_possible_gain_vs_best_fixed_pct"),
                    f("heloom_above_bound_pct"),
                    f("heloom_p99_ms"),
                    f("best_other_p99_ms"),
                ));
            }
        }
        text.push_str(&format!(
            "  shortest makespan at every gap: {} (within 0.05%: {}); lowest p99: {}; >= 10% below the best fixed policy at gaps <= {strict}: {}\n",
            checks["heloom_shortest_makespan_every_gap"],
            checks["heloom_shortest_or_tied_within_0_05pct_every_gap"],
            checks["heloom_lowest_p99"],
            checks["heloom_10pct_below_best_fixed_at_small_gaps"],
        ));
        extra["targets"] = checks;
        if setup.is_phi() {
            text.push('\n');
            text.push_str(&paper_table(runs));
            extra["table6_ordering"] = ordering(runs);
        }
    }
    let json = compare_json(&summaries, extra);
    if args.json {
        eprint!("{text}");
        println!("{}", serde_json::to_string_pretty(&json)?);
    } else {
        print!("{text}");
    }
    // Files.
    let tag = if setup.workload.is_some() {
        "real".to_string()
    } else {
        format!("sim-{}", setup.model().name)
    };
    let base = args.out.join(&tag);
    write(
        &base.join("summary.json"),
        &serde_json::to_string_pretty(&json)?,
    )?;
    write(&base.join("summary.csv"), &summary_csv(&summaries))?;
    write(&base.join("summary.txt"), &text)?;
    for r in runs {
        write(
            &base.join(format!(
                "jobs-{}-{}.csv",
                r.summary.policy, r.summary.gap_ms
            )),
            &jobs_csv(&r.record),
        )?;
    }
    if !args.no_plots {
        for &g in gaps {
            let at: Vec<&RunRecord> = runs
                .iter()
                .filter(|r| r.summary.gap_ms == g)
                .map(|r| &r.record)
                .collect();
            latency_plot(
                &at,
                &base.join(format!("latency-{g}.svg")),
                &format!("Latency per job, mean gap {g} ms ({tag})"),
            )?;
            utilisation_plot(
                &at,
                &base.join(format!("utilisation-{g}.svg")),
                200,
                &format!("Busy threads / capacity, mean gap {g} ms ({tag})"),
            )?;
        }
        if gaps.len() > 1 {
            compare_plot(
                &summaries,
                &base.join("compare.svg"),
                &format!("Makespan and p99 latency against mean gap ({tag})"),
            )?;
        }
    }
    eprintln!("results in {}", base.display());
    Ok(())
}

/// The scheduling part of `heloom demo`: a stream of encrypted e^x jobs on this machine's
/// cores under the heloom policy, then every policy at a heavy and a light load (real), then
/// the Xeon Phi simulation beside the paper's Table 6. Files go to `out`.
pub fn demo(out: &Path) -> Result<bool> {
    println!("\n== scheduling: a stream of encrypted e^x jobs (degree-6 Maclaurin, seed 000) ==");
    let args = ScheduleArgs {
        policy: "heloom".into(),
        gap_ms: None,
        jobs: None,
        simulate: None,
        compare: true,
        gaps: Vec::new(),
        json: false,
        out: out.to_path_buf(),
        profile: None,
        log_n: 14,
        seed: 1,
        no_plots: false,
    };
    let model = host_model(&args)?;
    println!(
        "host cost model measured: {} threads, task start overhead {:.3} ms",
        model.capacity, model.task_overhead_ms
    );
    let setup = Setup::real(model, args.log_n)?;
    let gaps = scaled_gaps(setup.model(), setup.paper_graph())?;
    for g in setup.graphs.iter() {
        let v = Variant::new(Arc::clone(g), setup.model());
        println!(
            "  variant {:<11} {:>2} tasks, {:>6.1} ms of work, critical path {:>6.1} ms",
            g.name(),
            g.tasks().len(),
            v.work_ms,
            v.cp_fast_ms
        );
    }
    let mid = gaps[gaps.len() / 2];
    println!(
        "\nstream: 200 jobs, Poisson arrivals every {mid:.1} ms on average, policy heloom, {} cores",
        setup.capacity()
    );
    let stream = setup.run("heloom", mid, 200, 1)?;
    println!("{}", summary_table(std::slice::from_ref(&stream.summary)));
    let mut ok = stream.summary.correct.is_some_and(|(c, n)| c == n && n > 0);
    let (heavy, light) = (gaps[0], gaps[gaps.len() - 1]);
    println!("policy comparison on this machine at mean gaps {heavy:.1} and {light:.1} ms (160 jobs each):");
    let mut runs = Vec::new();
    for g in [heavy, light] {
        for p in POLICY_NAMES {
            let r = setup.run(p, g, 160, 1)?;
            ok &= r.summary.correct.is_some_and(|(c, n)| c == n && n > 0);
            runs.push(r);
        }
    }
    let real_args = ScheduleArgs {
        no_plots: false,
        ..args.clone()
    };
    report(&real_args, &setup, &runs, &[heavy, light], 160)?;
    println!("\nthe same comparison on seed 000's Xeon Phi 7230F (simulated with its Tables 1-5):");
    let phi = Setup::simulated("xeon-phi-7230f", args.log_n)?;
    let mut sims = Vec::new();
    for g in PAPER_GAPS {
        for p in POLICY_NAMES {
            sims.push(phi.run(p, g, 2300, 1)?);
        }
    }
    report(&args, &phi, &sims, &PAPER_GAPS, 2300)?;
    Ok(ok)
}
