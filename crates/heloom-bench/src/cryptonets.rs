//! `heloom bench cryptonets`: CryptoNets batch inference with 32-bit and 64-bit words side by
//! side in one run (seed 002's parameters for both: N = 2^14, seven 29-bit primes, scale
//! 2^29), per stage, with the targets checked.

use anyhow::Result;
use heloom_apps::cryptonets::words::{compare_word_sizes, WordComparison};
use heloom_apps::cryptonets::CryptoNet;
use serde::Serialize;

use crate::progress::Progress;
use crate::target::Target;
use crate::timing::load_average;

/// What to run.
#[derive(Clone, Debug)]
pub struct CryptonetsBenchOptions {
    /// Images in the batch.
    pub images: usize,
    /// Rounds per word size (the fastest is reported).
    pub rounds: usize,
    /// Threads.
    pub threads: usize,
}

/// The report: the comparison, the targets and the machine's load.
#[derive(Debug, Serialize)]
pub struct CryptonetsReport {
    /// Both word sizes, every round.
    pub comparison: WordComparison,
    /// The targets.
    pub targets: Vec<Target>,
    /// 1/5/15-minute load averages after the run.
    pub load_average: Option<[f64; 3]>,
}

/// Runs the comparison.
pub fn run(opts: &CryptonetsBenchOptions) -> Result<CryptonetsReport> {
    let net = CryptoNet::embedded()?;
    let progress = Progress::new(0);
    let mut say = |m: &str| progress.step(m);
    let c = compare_word_sizes(&net, opts.images, opts.rounds, opts.threads, &mut say)?;
    progress.finish();
    let agreement = c
        .u32
        .rounds
        .iter()
        .chain(&c.u64.rounds)
        .map(|r| r.agreement)
        .fold(f64::INFINITY, f64::min);
    let targets = vec![
        Target::judge(
            "32-bit words faster than 64-bit at equal log Q (server, best rounds)".into(),
            Some(c.server_ratio),
            1.8,
            "x",
            "",
        ),
        Target::judge(
            "batch inference, 32-bit, full batch (images/s)".into(),
            Some(c.u32.full_batch_images_per_s),
            1000.0,
            "x",
            "",
        ),
        Target::judge(
            "lowest agreement with f64 over every round (fraction)".into(),
            Some(agreement),
            0.999,
            "x",
            "",
        ),
    ];
    Ok(CryptonetsReport {
        comparison: c,
        targets,
        load_average: load_average(),
    })
}

/// The plain-text report.
pub fn render(r: &CryptonetsReport) -> String {
    use std::fmt::Write as _;
    let c = &r.comparison;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "heloom bench cryptonets: {} held-out images in one batch of {} slots, N = {}, {} x 29-bit \
         primes (log Q = {:.1}) for both word sizes, {} threads, {} rounds each, {}",
        c.images,
        c.batch_capacity,
        c.n,
        c.limbs,
        c.u32.log_q,
        c.threads,
        c.u32.rounds.len(),
        c.cpu
    );
    let names = [
        "conv + rescale",
        "square",
        "dense 845->100 + relin",
        "square + rescale",
        "dense 100->10",
    ];
    let (a, b) = (&c.u32.best.stages, &c.u64.best.stages);
    let xa = [a.conv_s, a.square1_s, a.dense1_s, a.square2_s, a.dense2_s];
    let xb = [b.conv_s, b.square1_s, b.dense1_s, b.square2_s, b.dense2_s];
    let _ = writeln!(
        s,
        "{:<26} {:>10} {:>10} {:>8}",
        "best round (s)", "32-bit", "64-bit", "64/32"
    );
    for k in 0..5 {
        let _ = writeln!(
            s,
            "{:<26} {:>10.3} {:>10.3} {:>7.2}x",
            names[k], xa[k], xb[k], c.stage_ratios[k]
        );
    }
    let _ = writeln!(
        s,
        "{:<26} {:>10.3} {:>10.3} {:>7.2}x",
        "server total", c.u32.best.server_s, c.u64.best.server_s, c.server_ratio
    );
    let _ = writeln!(
        s,
        "{:<26} {:>10.3} {:>10.3} {:>7.2}x",
        "client encrypt", c.u32.best.encrypt_s, c.u64.best.encrypt_s, c.encrypt_ratio
    );
    let _ = writeln!(
        s,
        "{:<26} {:>10.0} {:>10.0}",
        "images/s (full batch)", c.u32.full_batch_images_per_s, c.u64.full_batch_images_per_s
    );
    let rounds = |w: &heloom_apps::cryptonets::words::WordSeries| {
        w.rounds
            .iter()
            .map(|r| format!("{:.2}", r.server_s))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let _ = writeln!(s, "server s per round: 32-bit [{}]", rounds(&c.u32));
    let _ = writeln!(s, "                    64-bit [{}]", rounds(&c.u64));
    let _ = writeln!(
        s,
        "peak memory {:.2} GiB (both word sizes in one process)",
        c.peak_memory_bytes as f64 / (1u64 << 30) as f64
    );
    if let Some(l) = r.load_average {
        let _ = writeln!(s, "load average {:.2} {:.2} {:.2}", l[0], l[1], l[2]);
    }
    let _ = writeln!(s, "targets:");
    s.push_str(&crate::target::render(&r.targets));
    s
}

/// Writes `cryptonets-words.json` and `.txt` into `dir`; returns their paths.
pub fn save(rep: &CryptonetsReport, dir: &std::path::Path) -> Result<Vec<std::path::PathBuf>> {
    crate::report::save_json_and_text(rep, &render(rep), dir, "cryptonets-words")
}
