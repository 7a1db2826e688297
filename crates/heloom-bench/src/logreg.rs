//! `heloom bench logreg`: issue 19's deep workload end to end. Logistic-regression training
//! on an encrypted data set (`heloom_apps::logreg`) for more iterations than any leveled
//! parameter set holds, the encrypted weights bootstrapped whenever their levels run out, on
//! the 128-bit N = 2^16 bootstrapping preset (`--quick`: an insecure N = 2^10 chain). Reports
//! each iteration's time and whether it bootstrapped, and after each iteration the weights'
//! error against the same descent in the clear and the training accuracy.

use crate::report::save_json_and_text;
use crate::timing::Machine;
use anyhow::Result;
use heloom_apps::logreg::{
    rotation_steps, small_insecure_setting, train_encrypted, train_plain, Dataset,
    LEVELS_PER_ITERATION,
};
use heloom_ckks::circuits::bootstrap::{preset, sparse_secret_keys, AutoBootstrap};
use heloom_ckks::{keygen, Bootstrapper, Context, Decryptor, Encryptor, Evaluator, Threads};
use serde::Serialize;
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Instant;

/// What to run.
#[derive(Clone, Debug)]
pub struct LogregBenchOptions {
    /// The insecure N = 2^10 chain instead of the N = 2^16 preset.
    pub quick: bool,
    /// Gradient-descent iterations.
    pub iterations: usize,
    /// Threads for everything.
    pub threads: usize,
    /// Learning rate.
    pub alpha: f64,
}

impl LogregBenchOptions {
    /// Defaults: 4 iterations (3 bootstraps), every core, learning rate 2.
    pub fn new(quick: bool) -> Self {
        Self {
            quick,
            iterations: 4,
            threads: heloom_pool::cores(),
            alpha: 2.0,
        }
    }
}

/// One iteration.
#[derive(Clone, Debug, Serialize)]
pub struct IterationRow {
    /// 1-based.
    pub iteration: usize,
    /// Whether the weights were bootstrapped before it.
    pub bootstrapped: bool,
    /// Wall time, its bootstrap included, s.
    pub seconds: f64,
}

/// The report.
#[derive(Clone, Debug, Serialize)]
pub struct LogregReport {
    /// The machine.
    pub machine: Machine,
    /// The parameter set.
    pub setting: String,
    /// Security level claimed (bits; 0 for none).
    pub security_bits: u32,
    /// Samples.
    pub samples: usize,
    /// Features (with the bias).
    pub features: usize,
    /// Learning rate.
    pub alpha: f64,
    /// Threads.
    pub threads: usize,
    /// Levels after a bootstrap.
    pub levels_after_bootstrap: usize,
    /// Levels an iteration uses.
    pub levels_per_iteration: usize,
    /// Transforms and keys, s.
    pub setup_s: f64,
    /// One row per iteration.
    pub iterations: Vec<IterationRow>,
    /// Bootstraps in all.
    pub bootstraps: usize,
    /// The final weights decrypted.
    pub weights: Vec<f64>,
    /// The same descent in the clear.
    pub weights_plain: Vec<f64>,
    /// Largest difference between the two over every row's copy of the weights.
    pub max_error: f64,
    /// Training accuracy of the decrypted weights.
    pub accuracy: f64,
    /// Training accuracy of the clear weights.
    pub accuracy_plain: f64,
    /// Peak resident memory (VmHWM), bytes.
    pub peak_rss_bytes: u64,
}

/// Runs the workload, reporting progress through `note`.
pub fn run(opts: &LogregBenchOptions, note: &dyn Fn(&str)) -> Result<LogregReport> {
    anyhow::ensure!(opts.iterations >= 1, "--iterations must be at least 1");
    let machine = Machine::now();
    let threads = Threads::new(opts.threads.max(1));
    let (params, mut config, sparse, setting) = if opts.quick {
        let (params, config) = small_insecure_setting()?;
        (
            params,
            config,
            None,
            "quick N = 2^10 (insecure, a smoke run)".to_string(),
        )
    } else {
        let p = preset(16)?;
        (
            p.params,
            p.config,
            Some(p.sparse_weight),
            "bootstrapping preset N = 2^16 (128-bit)".to_string(),
        )
    };
    // The workload's own rotation keys come on top of bootstrapping's: take the memory-lean
    // key set for bootstrapping.
    config.fewer_keys = !opts.quick;
    let security_bits = params.security().bits();
    let ctx = Context::<u64>::new(params)?;
    let slots = ctx.n() / 2;
    let d = if opts.quick { 8 } else { 16 };
    let n = slots / d;
    let data = Dataset::synthetic(n, d, 3);
    data.check(slots)?;
    let t = Instant::now();
    note("encoding the homomorphic DFT's transforms");
    let mut boot = Bootstrapper::new(&ctx, config, threads)?;
    let mut steps = boot.rotation_steps();
    steps.extend(rotation_steps(n, d));
    steps.sort_unstable();
    steps.dedup();
    note(&format!(
        "generating keys: {} rotations, conjugation, relinearization",
        steps.len()
    ));
    let keys = keygen(&ctx, &steps, true)?;
    if let Some(h) = sparse {
        boot = boot.with_sparse_keys(Arc::new(sparse_secret_keys(&ctx, &keys.secret_key, h)?))?;
    }
    let setup_s = t.elapsed().as_secs_f64();
    let level = boot.output_level();
    let ev = Evaluator::new(&ctx, Arc::new(keys.evaluation_keys.clone()))?.with_threads(threads);
    let enc = Encryptor::new(&ctx);
    note("encrypting the data set and zero weights (client side)");
    let z = ev.drop_to_level(&enc.encrypt(&data.packed(), &keys.public_key)?, level)?;
    let w0 = ev.drop_to_level(&enc.encrypt(&vec![0.0; slots], &keys.public_key)?, level)?;
    let auto = AutoBootstrap::new(ev, boot);
    let (w, stats) = train_encrypted(&auto, &z, &w0, n, d, opts.iterations, opts.alpha, &|i| {
        note(&format!("iteration {i} of {} done", opts.iterations))
    })?;
    let plain = train_plain(&data, opts.iterations, opts.alpha);
    let weights_plain = plain.last().cloned().unwrap_or_default();
    let got = Decryptor::new(&ctx, &keys.secret_key)?.decrypt(&w)?;
    let max_error = got
        .chunks(d)
        .flat_map(|row| row.iter().zip(&weights_plain).map(|(g, w)| (g - w).abs()))
        .fold(0.0, f64::max);
    let weights = got[..d].to_vec();
    let iterations = stats
        .bootstraps
        .iter()
        .zip(&stats.seconds)
        .enumerate()
        .map(|(i, (&b, &s))| IterationRow {
            iteration: i + 1,
            bootstrapped: b > 0,
            seconds: s,
        })
        .collect();
    Ok(LogregReport {
        machine: machine.finish(),
        setting,
        security_bits,
        samples: n,
        features: d,
        alpha: opts.alpha,
        threads: threads.get(),
        levels_after_bootstrap: level,
        levels_per_iteration: LEVELS_PER_ITERATION,
        setup_s,
        iterations,
        bootstraps: auto.bootstraps(),
        accuracy: data.accuracy(&weights),
        accuracy_plain: data.accuracy(&weights_plain),
        weights,
        weights_plain,
        max_error,
        peak_rss_bytes: heloom_pool::proc_status_bytes(None, "VmHWM").unwrap_or(0),
    })
}

/// The report as a table.
pub fn render(r: &LogregReport) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "heloom bench logreg: {} on {} ({} threads)",
        r.setting, r.machine.model, r.threads
    );
    let _ = writeln!(
        s,
        "{} samples x {} features, learning rate {}, {} levels per iteration, {} after a bootstrap; setup {:.2} s; peak resident {:.2} GB\n",
        r.samples,
        r.features,
        r.alpha,
        r.levels_per_iteration,
        r.levels_after_bootstrap,
        r.setup_s,
        r.peak_rss_bytes as f64 / 1e9
    );
    let _ = writeln!(s, "iteration  bootstrapped  seconds");
    for row in &r.iterations {
        let _ = writeln!(
            s,
            "{:>9}  {:>12}  {:>7.2}",
            row.iteration,
            if row.bootstrapped { "yes" } else { "no" },
            row.seconds
        );
    }
    let _ = writeln!(
        s,
        "\n{} bootstraps; weights against the clear: max error 2^{:.1}; accuracy {:.3} (clear {:.3})",
        r.bootstraps,
        r.max_error.log2(),
        r.accuracy,
        r.accuracy_plain
    );
    s
}

/// Writes `logreg.json` and `logreg.txt` into `dir`.
pub fn save(r: &LogregReport, dir: &std::path::Path) -> Result<Vec<std::path::PathBuf>> {
    save_json_and_text(r, &render(r), dir, "logreg")
}
