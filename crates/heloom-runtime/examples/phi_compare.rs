//! Simulates every policy at the paper's gaps on the built-in Xeon Phi profile and prints
//! makespan and p99 (a quick look; `heloom schedule --compare --simulate xeon-phi-7230f` is the
//! full report).

use heloom_runtime::load::{default_window, poisson_arrivals};
use heloom_runtime::policy::{policy_by_name, POLICY_NAMES};
use heloom_runtime::scheduler::Scheduler;
use heloom_runtime::sim::simulate;
use heloom_runtime::workload::default_params;
use heloom_runtime::{exp_graph, summarize, CostModel, ExpVariant, Profile};
use std::sync::Arc;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let name = std::env::var("PROFILE").unwrap_or_else(|_| "xeon-phi-7230f".into());
    let model: Arc<dyn CostModel> = Arc::new(Profile::load(&name)?);
    let params = default_params(14)?;
    let moduli = params.moduli().to_vec();
    let graphs = ExpVariant::ALL
        .iter()
        .map(|&v| exp_graph(v, &moduli, moduli.len() - 1, params.scale()).map(Arc::new))
        .collect::<Result<Vec<_>, _>>()?;
    for g in &graphs {
        let v = heloom_runtime::policy::Variant::new(Arc::clone(g), model.as_ref());
        println!(
            "variant {:<11} tasks {:>2} work {:>7.1} ms  critical path (1 thread) {:>7.1} ms, (fast) {:>7.1} ms, keyswitch {:.2}",
            g.name(),
            g.tasks().len(),
            v.work_ms,
            v.priority.iter().copied().fold(0.0, f64::max),
            v.cp_fast_ms,
            v.keyswitch_fraction
        );
    }
    let jobs: usize = std::env::var("JOBS")
        .ok()
        .and_then(|j| j.parse().ok())
        .unwrap_or(2300);
    let gaps: Vec<f64> = std::env::var("GAPS")
        .ok()
        .map(|g| g.split(',').filter_map(|x| x.parse().ok()).collect())
        .unwrap_or_else(|| vec![60.0, 70.0, 80.0, 90.0, 100.0, 120.0]);
    for g in gaps {
        for p in POLICY_NAMES {
            let pol = policy_by_name(p, Arc::clone(&model)).ok_or("policy")?;
            let mut s = Scheduler::new(pol, model.as_ref(), graphs.clone(), model.capacity());
            let arr = poisson_arrivals(jobs, g, 1);
            let t0 = std::time::Instant::now();
            let r = simulate(
                &mut s,
                model.as_ref(),
                &arr,
                g,
                default_window(jobs),
                "sim",
                &mut |_, _| {},
            );
            let su = summarize(&r);
            let mut variants = std::collections::BTreeMap::new();
            for j in &r.jobs {
                *variants.entry(j.variant.clone()).or_insert(0) += 1;
            }
            println!(
                "D={g:>5} {p:<14} makespan {:>9.1} s  p50 {:>8.0} p99 {:>8.0} ms  util {:.2}  mean threads {:.2}  ({:.2}s) {:?}",
                su.makespan_ms / 1e3,
                su.p50_ms,
                su.p99_ms,
                su.utilisation,
                r.tasks.iter().map(|t| t.threads as f64).sum::<f64>() / r.tasks.len() as f64,
                t0.elapsed().as_secs_f64(),
                variants
            );
        }
    }
    Ok(())
}
