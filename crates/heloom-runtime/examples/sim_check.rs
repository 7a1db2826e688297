//! Runs one policy for real and compares every task's measured time with the cost model's
//! prediction for its threads and the threads busy around it (diagnostics for the simulator).

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use heloom_runtime::exec::execute;
use heloom_runtime::load::{default_window, poisson_arrivals};
use heloom_runtime::policy::policy_by_name;
use heloom_runtime::scheduler::Scheduler;
use heloom_runtime::workload::{default_params, ExpWorkload};
use heloom_runtime::{CostModel, Profile};
use std::sync::Arc;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let policy = std::env::var("POLICY").unwrap_or_else(|_| "fixed-1".into());
    let gap: f64 = std::env::var("GAP")
        .ok()
        .and_then(|g| g.parse().ok())
        .unwrap_or(9.87);
    let jobs: usize = std::env::var("JOBS")
        .ok()
        .and_then(|g| g.parse().ok())
        .unwrap_or(150);
    let prof = Arc::new(Profile::load("bench/results/profile-host.json")?);
    let w = ExpWorkload::<u64>::new(default_params(14)?, 16, 7)?;
    let p = policy_by_name(&policy, prof.clone()).ok_or("policy")?;
    let mut s = Scheduler::new(
        p,
        prof.as_ref(),
        w.variants().to_vec(),
        heloom_pool::cores(),
    );
    let arr = poisson_arrivals(jobs, gap, 1);
    let r = execute(&mut s, &w, &arr, gap, default_window(jobs), &mut |_, _| {})?;
    let mut by: std::collections::BTreeMap<(String, usize, usize), (f64, f64, usize)> =
        Default::default();
    for t in &r.tasks {
        let g = w
            .variants()
            .iter()
            .find(|g| {
                g.tasks()[t.task.min(g.tasks().len() - 1)].kind.name() == t.kind
                    && r.jobs[t.job].variant == g.name()
            })
            .ok_or("graph")?;
        let pred = g.task_cost(prof.as_ref(), t.task, t.threads).total() + prof.task_overhead_ms();
        let mid = 0.5 * (t.start_ms + t.end_ms);
        let busy: usize = r
            .tasks
            .iter()
            .filter(|u| u.start_ms <= mid && u.end_ms > mid)
            .map(|u| u.threads)
            .sum();
        let e = by.entry((t.kind.clone(), t.threads, busy)).or_default();
        e.0 += t.end_ms - t.start_ms;
        e.1 += pred;
        e.2 += 1;
    }
    for ((k, th, b), (real, pred, n)) in by {
        println!(
            "{k:<22} t={th} busy={b}  n={n:>4}  real/pred {:.3}  (mean real {:.3} ms)",
            real / pred,
            real / n as f64
        );
    }
    let disp: f64 = r
        .tasks
        .iter()
        .map(|t| t.start_ms - t.dispatch_ms)
        .sum::<f64>()
        / r.tasks.len() as f64;
    println!("mean dispatch latency {disp:.4} ms, sched overhead per task {:.4} ms, model slowdown(2) ks {:.3}", r.sched_overhead_ms, prof.slowdown(heloom_runtime::ContentionClass::KeySwitch, 2.0));
    Ok(())
}
