//! Calibrates a measured host profile against real job streams.
//!
//! The op tables are measured in isolation: the same ciphertexts again and again, warm in
//! cache. Inside a job, a task reads ciphertexts another thread wrote, allocates fresh ones and
//! shares the cores and memory with the rest of the stream, so it runs at a different speed.
//! For every thread budget `t`, a short real stream of e^x jobs (all arriving at once, every
//! task given `t` threads, every core busy) measures real over predicted task time; that ratio,
//! divided by the contention the profile already predicts at full occupancy, becomes the
//! profile's factor for budget `t`. This is the host counterpart of the Xeon Phi's job factor
//! ([`crate::profile::XEON_PHI_JOB_FACTOR`], from the paper's 4 s per job).

use crate::cost::{CostModel, SplitCost};
use crate::exec::execute;
use crate::graph::GraphError;
use crate::policy::{LoadView, Policy, Variant};
use crate::profile::Profile;
use crate::record::RunRecord;
use crate::scheduler::Scheduler;
use crate::workload::ExpWorkload;
use heloom_ckks::CkksParameters;
use std::sync::Arc;

/// Every task gets `t` threads.
struct Uniform(usize);

impl Policy for Uniform {
    fn name(&self) -> &'static str {
        "uniform"
    }
    fn threads(&mut self, view: &LoadView<'_>, _variant: &Variant) -> Option<usize> {
        (view.busy + self.0 <= view.capacity).then_some(self.0)
    }
}

/// Real over predicted time, summed over every task of `run` (prediction at the busy count the
/// stream keeps: the capacity).
fn ratio(run: &RunRecord, model: &Profile, w: &ExpWorkload<u64>) -> f64 {
    let busy = run.capacity as f64;
    let (mut real, mut pred) = (0.0, 0.0);
    for t in &run.tasks {
        let Some(g) = w
            .variants()
            .iter()
            .find(|g| g.name() == run.jobs[t.job].variant)
        else {
            continue;
        };
        let c: SplitCost = g.task_cost(model, t.task, t.threads);
        real += t.end_ms - t.start_ms;
        pred += c.total() * c.slowdown(model, busy) + model.task_overhead_ms();
    }
    if pred > 0.0 {
        real / pred
    } else {
        1.0
    }
}

/// Calibrates `profile` (measured at `params`) with one real stream of `jobs` jobs per thread
/// budget that divides the capacity, then one stream of `backlog_jobs` single-thread jobs: a
/// deep backlog, whose extra slowdown becomes `backlog_factors` (1 at a mean backlog of
/// `jobs / 2`, the measured ratio at `backlog_jobs / 2`). Sets `thread_factors` and
/// `backlog_factors`, adds a note, and returns the thread factors.
pub fn calibrate(
    profile: &mut Profile,
    params: CkksParameters,
    jobs: usize,
    backlog_jobs: usize,
    progress: &mut dyn FnMut(usize, usize, &str),
) -> Result<Vec<f64>, GraphError> {
    let w = ExpWorkload::<u64>::new(params, 4, 11)?;
    let jobs = jobs.max(2);
    let arrivals = vec![0.0; jobs];
    profile.thread_factors.clear();
    profile.backlog_factors.clear();
    let base = Arc::new(profile.clone());
    let cap = base.capacity.max(1);
    let mut factors = Vec::with_capacity(cap);
    for t in 1..=cap {
        // Budgets that leave threads idle in a saturated stream are not measured: they take the
        // factor of the largest measured budget below them.
        if !cap.is_multiple_of(t) {
            let last = factors.last().copied().unwrap_or(1.0);
            factors.push(last);
            continue;
        }
        let label = format!("calibration stream, {t} thread(s) per task");
        let mut s = Scheduler::new(
            Box::new(Uniform(t)),
            base.as_ref(),
            w.variants().to_vec(),
            cap,
        );
        let run = execute(&mut s, &w, &arrivals, 0.0, (0, jobs - 1), &mut |d, n| {
            progress(d, n, &label)
        })?;
        factors.push(ratio(&run, &base, &w));
    }
    profile.thread_factors = factors.clone();
    let shown: Vec<String> = factors.iter().map(|f| format!("{f:.3}")).collect();
    profile.notes.push(format!(
        "calibrated with real e^x streams ({jobs} jobs at once per thread budget, every core busy): real over predicted task time by budget 1..={cap} = [{}] (thread_factors)",
        shown.join(", ")
    ));
    if backlog_jobs > jobs {
        let with_threads = Arc::new(profile.clone());
        let deep = vec![0.0; backlog_jobs];
        let mut s = Scheduler::new(
            Box::new(Uniform(1)),
            with_threads.as_ref(),
            w.variants().to_vec(),
            cap,
        );
        let label = format!("calibration stream, backlog of {backlog_jobs} jobs");
        let run = execute(
            &mut s,
            &w,
            &deep,
            0.0,
            (0, backlog_jobs - 1),
            &mut |d, n| progress(d, n, &label),
        )?;
        let r = ratio(&run, &with_threads, &w).max(1.0);
        profile.backlog_factors = vec![(jobs as f64 / 2.0, 1.0), (backlog_jobs as f64 / 2.0, r)];
        profile.notes.push(format!(
            "backlog: a stream of {backlog_jobs} jobs at once runs {r:.3}x slower per task than the {jobs}-job streams (backlog_factors, by mean jobs in the system)"
        ));
    }
    Ok(factors)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calibration_sets_a_plausible_factor() {
        let params = CkksParameters::builder(1 << 12)
            .levels(7)
            .first_bits(50)
            .scale_bits(40)
            .security(heloom_ckks::SecurityLevel::None)
            .build()
            .expect("params");
        let cfg = crate::profile::MeasureConfig {
            log_n: 12,
            levels: 7,
            reps: 1,
            max_threads: 2,
            ..crate::profile::MeasureConfig::default()
        };
        // A factor is real over predicted task time: the stream timed now over the profile's
        // one sample per cell, timed seconds earlier. On a loaded machine either timing alone
        // can be slowed several-fold (with two cores kept busy elsewhere, single tries gave
        // factors from 0.13 to 2.5), which failed the old one-try bound of 0.3..10 now and
        // then. A try now passes with every factor in 0.1..10 and up to TRIES fresh tries
        // (profile and stream) are made: a pass still shows the model predicts real task times
        // within an order of magnitude, and a systematic error that large (a unit slip, a
        // wrong ratio) fails every try.
        const TRIES: usize = 3;
        let plausible = |f: &[f64]| f.iter().all(|&x| x > 0.1 && x < 10.0);
        let mut rejected = Vec::new();
        let (p, f) = loop {
            let mut p = crate::profile::measure_host(&cfg, &mut |_, _, _| {}).expect("profile");
            let f =
                calibrate(&mut p, params.clone(), 3, 6, &mut |_, _, _| {}).expect("calibration");
            if plausible(&f) || rejected.len() + 1 == TRIES {
                break (p, f);
            }
            rejected.push(f);
        };
        assert_eq!(f.len(), 2);
        assert!(plausible(&f), "every try: {rejected:?}, then {f:?}");
        assert_eq!(p.thread_factors, f);
        assert!(p.validate().is_ok());
        assert!(p.notes.iter().any(|n| n.contains("calibrated")));
        // The model now includes the factor.
        let m: &dyn CostModel = &p;
        let raw = crate::profile::Profile::op_ms(&p, crate::ops::OpKind::Relin, 8, 2);
        let scaled = m.op_ms(crate::ops::OpKind::Relin, 8, 2);
        assert!((scaled - raw * f[1]).abs() < 1e-9);
        assert_eq!(p.backlog_factors.len(), 2);
        assert_eq!(p.backlog_factors[0], (1.5, 1.0));
        assert!(p.backlog_factors[1].1 >= 1.0);
        // Interpolated between the points, constant outside.
        let mid = m.backlog_slowdown(2.25);
        assert!((mid - (1.0 + p.backlog_factors[1].1) / 2.0).abs() < 1e-9);
        assert_eq!(m.backlog_slowdown(100.0), p.backlog_factors[1].1);
        assert_eq!(m.backlog_slowdown(0.0), 1.0);
    }
}
