//! Side-by-side comparison of devices and balancers on the paper's workload (seed 001 Tables 2 and 3).
//!
//! For each item size every single device and every combined method runs on the same workload, `reps` times in
//! rotating order (the machine drifts; rotation spreads the drift over all methods), after one untimed warm-up
//! round. The ideal combined time is 1 / Σ_d 1/T_d from the single-device means, and each method's efficiency is
//! ideal / measured. Every output of every run is checked against the reference engine.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::aes::{AesWorkload, Cipher, Direction};
use crate::balance::{Balancer, Method};
use crate::device::{Device, DeviceInfo};
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
    /// Mean time over the repetitions, ms (the paper's Table 2 entry).
    pub ms: f64,
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
    let mut methods: Vec<Method> = (0..devices.len()).map(Method::Single).collect();
    if devices.len() > 1 {
        methods.extend(
            cfg.methods
                .iter()
                .copied()
                .filter(|m| !matches!(m, Method::Single(_))),
        );
    }
    // One balancer per method for the whole comparison: heloom's learned curves carry across sizes.
    let mut balancers: Vec<Balancer> = methods.iter().map(|&m| Balancer::new(m)).collect();
    let mut workloads: Vec<(usize, bool)> = cfg.sizes.iter().map(|&s| (s, false)).collect();
    if cfg.mixed && cfg.sizes.len() > 1 {
        workloads.push((0, true));
    }
    let total = workloads.len() * methods.len() * (cfg.reps + 1);
    let mut done = 0;
    let mut runs = Vec::new();
    for (wi, &(size, mixed)) in workloads.iter().enumerate() {
        let seed = cfg.seed.wrapping_add(wi as u64);
        let work = if mixed {
            let per = (cfg.items / cfg.sizes.len()).max(1);
            AesWorkload::mixed(cfg.cipher, cfg.direction, &cfg.sizes, per, seed)?
        } else {
            AesWorkload::uniform(cfg.cipher, cfg.direction, size, cfg.items, seed)?
        };
        let label = if mixed {
            "mixed".to_string()
        } else {
            format!("{size} B")
        };
        let mut ms: Vec<Vec<f64>> = vec![Vec::new(); methods.len()];
        let mut items: Vec<Vec<f64>> = vec![vec![0.0; devices.len()]; methods.len()];
        let mut finish: Vec<Vec<f64>> = vec![vec![0.0; devices.len()]; methods.len()];
        let mut claims = vec![0.0; methods.len()];
        for rep in 0..=cfg.reps {
            for j in 0..methods.len() {
                // Rotate the order each repetition; round 0 is the untimed warm-up.
                let m = (j + rep) % methods.len();
                let out = balancers[m].run(devices, &work)?;
                work.verify(&out.outputs, &|i| {
                    names
                        .get(out.report.producer[i] as usize)
                        .cloned()
                        .unwrap_or_else(|| "?".into())
                })?;
                if rep > 0 {
                    ms[m].push(out.report.ms);
                    for d in 0..devices.len() {
                        items[m][d] += out.report.items_per_device[d] as f64 / cfg.reps as f64;
                        finish[m][d] += out.report.finish_ms_per_device[d] / cfg.reps as f64;
                    }
                    claims[m] += out.report.claims as f64 / cfg.reps as f64;
                }
                done += 1;
                progress(&format!("{label} {}", out.report.method), done, total);
            }
        }
        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
        let ideal = 1.0 / (0..devices.len()).map(|d| 1.0 / mean(&ms[d])).sum::<f64>();
        let bytes = work.input_bytes() as f64;
        for (m, method) in methods.iter().enumerate() {
            let t = mean(&ms[m]);
            runs.push(RunRow {
                method: method.name(&names),
                single: matches!(method, Method::Single(_)),
                cipher: cfg.cipher.name().into(),
                direction: cfg.direction.name().into(),
                size,
                workload: if mixed { "mixed" } else { "uniform" }.into(),
                items: work_len(&work),
                ms: t,
                ms_min: ms[m].iter().copied().fold(f64::INFINITY, f64::min),
                ms_max: ms[m].iter().copied().fold(0.0, f64::max),
                ms_reps: ms[m].clone(),
                ideal_ms: ideal,
                efficiency: ideal / t,
                mb_per_s: bytes / (t * 1e3),
                items_per_device: names
                    .iter()
                    .cloned()
                    .zip(items[m].iter().copied())
                    .collect(),
                finish_ms_per_device: names
                    .iter()
                    .cloned()
                    .zip(finish[m].iter().copied())
                    .collect(),
                claims: claims[m],
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

fn work_len(w: &AesWorkload) -> usize {
    use crate::device::Workload;
    w.len()
}
