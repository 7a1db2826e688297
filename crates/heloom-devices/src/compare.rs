//! Side-by-side comparison of devices and balancers on the paper's workload (seed 001 Tables 2 and 3).
//!
//! For each item size every single device and every combined method runs on the same workload, `reps` times in
//! rotating order (rounds outside, sizes inside) (the machine drifts; rotation spreads the drift over all methods), after one untimed warm-up
//! round. The ideal combined time is 1 / Σ_d 1/T_d from the single devices' best times, and each method's
//! efficiency is ideal / its best time (see [`MethodStats::best_ms`] for why the best). Every output of every run is checked against the reference engine.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::aes::{AesWorkload, Cipher, Direction};
use crate::balance::{Balancer, Method, Outcome};
use crate::device::{Device, DeviceInfo, Workload};
use crate::error::{DeviceError, Result};

/// The paper's item sizes in bytes.
pub const PAPER_SIZES: [usize; 8] = [8, 16, 64, 256, 1024, 4096, 8192, 16384];
/// The paper's items per size.
pub const PAPER_ITEMS: usize = 4000;

/// What to compare.
#[derive(Clone, Debug)]
pub struct CompareConfig {
    /// Cipher and mode.
    pub cipher: Cipher,
    /// Encryption or decryption.
    pub direction: Direction,
    /// Item sizes, one workload each.
    pub sizes: Vec<usize>,
    /// Items per size.
    pub items: usize,
    /// Timed repetitions (the paper: 5).
    pub reps: usize,
    /// Combined methods to run besides every single device.
    pub methods: Vec<Method>,
    /// Also run a mixed queue holding `items / sizes` items of every size (size-aware placement).
    pub mixed: bool,
    /// Payload seed.
    pub seed: u64,
}

impl Default for CompareConfig {
    fn default() -> Self {
        CompareConfig {
            cipher: Cipher::Aes128Cbc,
            direction: Direction::Encrypt,
            sizes: PAPER_SIZES.to_vec(),
            items: PAPER_ITEMS,
            reps: 5,
            methods: Method::COMBINED.to_vec(),
            mixed: true,
            seed: 1,
        }
    }
}

/// One method on one workload, averaged over the repetitions.
#[derive(Clone, Debug, Serialize)]
pub struct RunRow {
    /// Device name for single-device runs, else the balancer's name.
    pub method: String,
    /// Whether this is a single device (a column of Table 2 the ideal is computed from).
    pub single: bool,
    /// Cipher name.
    pub cipher: String,
    /// "encrypt" or "decrypt".
    pub direction: String,
    /// Item size in bytes (0 for the mixed queue).
    pub size: usize,
    /// "uniform" or "mixed".
    pub workload: String,
    /// Items in the workload.
    pub items: usize,
    /// Best time over the repetitions, ms (the Table 2 entry; the paper gives a mean of 5 runs, but on a
    /// shared machine a repetition can only be slowed by others, see [`MethodStats::best_ms`]).
    pub ms: f64,
    /// Mean time over the repetitions, ms.
    pub ms_mean: f64,
    /// Median time over the repetitions, ms.
    pub ms_median: f64,
    /// Fastest repetition, ms.
    pub ms_min: f64,
    /// Slowest repetition, ms.
    pub ms_max: f64,
    /// Every repetition, ms.
    pub ms_reps: Vec<f64>,
    /// Ideal combined time 1 / Σ 1/T_d over the single devices, ms.
    pub ideal_ms: f64,
    /// ideal / measured (1 means the ideal split; a single device's value is its share of the ideal).
    pub efficiency: f64,
    /// Input throughput, MB/s.
    pub mb_per_s: f64,
    /// Mean items each device processed (the paper's Table 3).
    pub items_per_device: BTreeMap<String, f64>,
    /// Mean time each device finished, ms from the start.
    pub finish_ms_per_device: BTreeMap<String, f64>,
    /// Mean queue claims per run.
    pub claims: f64,
}

/// A whole comparison.
#[derive(Clone, Debug, Serialize)]
pub struct CompareReport {
    /// The devices.
    pub devices: Vec<DeviceInfo>,
    /// Cipher name.
    pub cipher: String,
    /// "encrypt" or "decrypt".
    pub direction: String,
    /// Items per size.
    pub items: usize,
    /// Timed repetitions.
    pub reps: usize,
    /// One row per method and workload.
    pub runs: Vec<RunRow>,
}

impl CompareReport {
    /// Rows of one workload (`size` 0 for mixed).
    pub fn rows(&self, size: usize) -> impl Iterator<Item = &RunRow> {
        self.runs.iter().filter(move |r| r.size == size)
    }

    /// The best single device's time for `size`.
    pub fn fastest_single_ms(&self, size: usize) -> Option<f64> {
        self.rows(size)
            .filter(|r| r.single)
            .map(|r| r.ms)
            .min_by(f64::total_cmp)
    }
}

/// Times of every method on one workload, one entry per method.
#[derive(Clone, Debug, Default)]
pub struct MethodStats {
    /// Method name.
    pub name: String,
    /// Whether it is a single device.
    pub single: bool,
    /// Timed repetitions, ms.
    pub ms: Vec<f64>,
    /// Mean items per device.
    pub items: Vec<f64>,
    /// Mean finish time per device, ms.
    pub finish: Vec<f64>,
    /// Mean claims per run.
    pub claims: f64,
}

impl MethodStats {
    /// Mean time, ms.
    pub fn mean_ms(&self) -> f64 {
        self.ms.iter().sum::<f64>() / self.ms.len().max(1) as f64
    }

    /// Fastest repetition, ms: the statistic comparisons use. On a shared machine a repetition can only be
    /// slowed by others (this VM's speed jumps between two levels, 2x apart at small sizes), so the best of
    /// several is each method's undisturbed time, and every method gets the same number of tries.
    pub fn best_ms(&self) -> f64 {
        self.ms.iter().copied().fold(f64::INFINITY, f64::min)
    }

    /// Median time, ms.
    pub fn median_ms(&self) -> f64 {
        let mut v = self.ms.clone();
        v.sort_by(f64::total_cmp);
        match v.len() {
            0 => f64::NAN,
            n if n % 2 == 1 => v[n / 2],
            n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
        }
    }
}

/// Ideal combined time 1 / Σ_d 1/T_d from the single devices' best times.
pub fn ideal_ms(stats: &[MethodStats]) -> f64 {
    1.0 / stats
        .iter()
        .filter(|s| s.single)
        .map(|s| 1.0 / s.best_ms())
        .sum::<f64>()
}

/// The methods a comparison runs: every device alone, then (with two or more devices) the combined ones.
pub fn methods_for(devices: usize, combined: &[Method]) -> Vec<Method> {
    let mut methods: Vec<Method> = (0..devices).map(Method::Single).collect();
    if devices > 1 {
        methods.extend(
            combined
                .iter()
                .copied()
                .filter(|m| !matches!(m, Method::Single(_))),
        );
    }
    methods
}

/// Empty statistics, one entry per balancer.
pub fn new_stats(names: &[String], balancers: &[Balancer]) -> Vec<MethodStats> {
    balancers
        .iter()
        .map(|b| MethodStats {
            name: b.method().name(names),
            single: matches!(b.method(), Method::Single(_)),
            items: vec![0.0; names.len()],
            finish: vec![0.0; names.len()],
            ..Default::default()
        })
        .collect()
}

/// One round: every method once on `work`, in an order rotated by `round` (round 0 is the untimed
/// warm-up), each run's outputs checked with `verify`, times added to `stats`.
#[allow(clippy::too_many_arguments)]
pub fn run_round<W: Workload>(
    devices: &[&dyn Device<W>],
    work: &W,
    balancers: &mut [Balancer],
    stats: &mut [MethodStats],
    round: usize,
    reps: usize,
    verify: &dyn Fn(&Outcome<W::Output>) -> Result<()>,
    progress: &mut dyn FnMut(&str),
) -> Result<()> {
    let m_count = balancers.len();
    for j in 0..m_count {
        let m = (j + round) % m_count;
        let out = balancers[m].run(devices, work)?;
        verify(&out)?;
        if round > 0 {
            let st = &mut stats[m];
            st.ms.push(out.report.ms);
            for d in 0..devices.len() {
                st.items[d] += out.report.items_per_device[d] as f64 / reps as f64;
                st.finish[d] += out.report.finish_ms_per_device[d] / reps as f64;
            }
            st.claims += out.report.claims as f64 / reps as f64;
        }
        progress(&out.report.method);
    }
    Ok(())
}

/// Runs every method on `work` `reps` times after one untimed warm-up round, rotating the order each round,
/// checking every run's outputs with `verify`. `balancers` (one per method) keep what they learn.
pub fn run_methods<W: Workload>(
    devices: &[&dyn Device<W>],
    work: &W,
    balancers: &mut [Balancer],
    reps: usize,
    verify: &dyn Fn(&Outcome<W::Output>) -> Result<()>,
    progress: &mut dyn FnMut(&str),
) -> Result<Vec<MethodStats>> {
    let names: Vec<String> = devices.iter().map(|d| d.info().name.clone()).collect();
    let mut stats = new_stats(&names, balancers);
    for round in 0..=reps {
        run_round(
            devices, work, balancers, &mut stats, round, reps, verify, progress,
        )?;
    }
    Ok(stats)
}

/// Runs the comparison; `progress(label, done, total)` is called after every run.
pub fn compare(
    devices: &[&dyn Device<AesWorkload>],
    cfg: &CompareConfig,
    progress: &mut dyn FnMut(&str, usize, usize),
) -> Result<CompareReport> {
    if devices.is_empty() {
        return Err(DeviceError::InvalidParameter(
            "compare needs at least one device".into(),
        ));
    }
    if cfg.items == 0 || cfg.reps == 0 {
        return Err(DeviceError::InvalidParameter(
            "items and reps must be at least 1".into(),
        ));
    }
    let names: Vec<String> = devices.iter().map(|d| d.info().name.clone()).collect();
    let methods = methods_for(devices.len(), &cfg.methods);
    // One balancer per method for the whole comparison: heloom's learned curves carry across sizes.
    let mut balancers: Vec<Balancer> = methods.iter().map(|&m| Balancer::new(m)).collect();
    let mut workloads: Vec<(usize, bool)> = cfg.sizes.iter().map(|&s| (s, false)).collect();
    if cfg.mixed && cfg.sizes.len() > 1 {
        workloads.push((0, true));
    }
    let total = workloads.len() * methods.len() * (cfg.reps + 1);
    let mut done = 0;
    let works: Vec<AesWorkload> = workloads
        .iter()
        .enumerate()
        .map(|(wi, &(size, mixed))| {
            let seed = cfg.seed.wrapping_add(wi as u64);
            if mixed {
                let per = (cfg.items / cfg.sizes.len()).max(1);
                AesWorkload::mixed(cfg.cipher, cfg.direction, &cfg.sizes, per, seed)
            } else {
                AesWorkload::uniform(cfg.cipher, cfg.direction, size, cfg.items, seed)
            }
        })
        .collect::<Result<_>>()?;
    let mut stats: Vec<Vec<MethodStats>> = works
        .iter()
        .map(|_| new_stats(&names, &balancers))
        .collect();
    // Rounds outside, sizes inside: a slow spell of this shared machine then spreads over every size instead of
    // landing on all repetitions of one.
    for round in 0..=cfg.reps {
        for (wi, work) in works.iter().enumerate() {
            let label = if workloads[wi].1 {
                "mixed".to_string()
            } else {
                format!("{} B", workloads[wi].0)
            };
            let verify = |out: &Outcome<Vec<u8>>| {
                work.verify(&out.outputs, &|i| {
                    names
                        .get(out.report.producer[i] as usize)
                        .cloned()
                        .unwrap_or_else(|| "?".into())
                })
            };
            run_round(
                devices,
                work,
                &mut balancers,
                &mut stats[wi],
                round,
                cfg.reps,
                &verify,
                &mut |m| {
                    done += 1;
                    progress(&format!("{label} {m}"), done, total);
                },
            )?;
        }
    }
    let mut runs = Vec::new();
    for (wi, &(size, mixed)) in workloads.iter().enumerate() {
        let work = &works[wi];
        let stats = &stats[wi];
        let ideal = ideal_ms(stats);
        let bytes = work.input_bytes() as f64;
        for st in stats {
            let t = st.best_ms();
            runs.push(RunRow {
                method: st.name.clone(),
                single: st.single,
                cipher: cfg.cipher.name().into(),
                direction: cfg.direction.name().into(),
                size,
                workload: if mixed { "mixed" } else { "uniform" }.into(),
                items: work.len(),
                ms: t,
                ms_mean: st.mean_ms(),
                ms_median: st.median_ms(),
                ms_min: t,
                ms_max: st.ms.iter().copied().fold(0.0, f64::max),
                ms_reps: st.ms.clone(),
                ideal_ms: ideal,
                efficiency: ideal / t,
                mb_per_s: bytes / (t * 1e3),
                items_per_device: names
                    .iter()
                    .cloned()
                    .zip(st.items.iter().copied())
                    .collect(),
                finish_ms_per_device: names
                    .iter()
                    .cloned()
                    .zip(st.finish.iter().copied())
                    .collect(),
                claims: st.claims,
            });
        }
    }
    Ok(CompareReport {
        devices: devices.iter().map(|d| d.info().clone()).collect(),
        cipher: cfg.cipher.name().into(),
        direction: cfg.direction.name().into(),
        items: cfg.items,
        reps: cfg.reps,
        runs,
    })
}
