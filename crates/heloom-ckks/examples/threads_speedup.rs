//! Intra-operation speedup of the thread budget: median time of each operation with budgets 1
//! and 2 (or `BUDGETS=1,2,4`) at N = 2^14 with 8 ciphertext primes (levels 7, scale 2^40,
//! first prime 50 bits, 64-bit words, default security). `RUNS=k` sets the runs per median.
use heloom_ckks::*;
use std::sync::Arc;
use std::time::Instant;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Median milliseconds of `op` on each evaluator, the evaluators interleaved run by run so that
/// background load on a shared machine hits every budget alike.
fn medians_ms(
    runs: usize,
    evs: &[Evaluator<u64>],
    op: &dyn Fn(&Evaluator<u64>) -> Result<()>,
) -> Result<Vec<f64>> {
    let mut times = vec![Vec::with_capacity(runs); evs.len()];
    for ev in evs {
        op(ev)?; // warm-up: pool threads, permutation cache, allocator
    }
    for _ in 0..runs {
        for (ev, t) in evs.iter().zip(&mut times) {
            let s = Instant::now();
            op(ev)?;
            t.push(s.elapsed().as_secs_f64() * 1e3);
        }
    }
    Ok(times
        .into_iter()
        .map(|mut t| {
            t.sort_by(f64::total_cmp);
            t[t.len() / 2]
        })
        .collect())
}

fn main() -> Result<()> {
    let runs: usize = std::env::var("RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20)
        .max(1);
    let budgets: Vec<usize> = std::env::var("BUDGETS")
        .ok()
        .map(|v| v.split(',').filter_map(|x| x.trim().parse().ok()).collect())
        .filter(|v: &Vec<usize>| !v.is_empty())
        .unwrap_or_else(|| vec![1, 2]);
    let p = CkksParameters::builder(1 << 14)
        .levels(7)
        .scale_bits(40)
        .first_bits(50)
        .word_bits(64)
        .build()?;
    println!("{p}");
    println!(
        "pool: {} cores, {} workers; {} runs per median\n",
        heloom_pool::cores(),
        heloom_pool::pool_workers(),
        runs
    );
    let ctx = Context::<u64>::new(p)?;
    let keys = keygen(&ctx, &[1, 2, 4, 8], false)?;
    let enc = Encryptor::new(&ctx);
    let base = Evaluator::new(&ctx, Arc::new(keys.evaluation_keys.clone()))?;
    let x: Vec<f64> = (0..8192).map(|i| (i as f64 / 8192.0) - 0.5).collect();
    let a = enc.encrypt(&x, &keys.public_key)?;
    let b = enc.encrypt(&x, &keys.public_key)?;
    let m = base.multiply(&a, &b)?;
    let r = base.relinearize(&m)?;

    type Op<'a> = Box<dyn Fn(&Evaluator<u64>) -> Result<()> + 'a>;
    let ops: Vec<(&str, Op)> = vec![
        ("multiply", Box::new(|ev| ev.multiply(&a, &b).map(drop))),
        ("relinearize", Box::new(|ev| ev.relinearize(&m).map(drop))),
        ("rescale", Box::new(|ev| ev.rescale(&r).map(drop))),
        ("rotate", Box::new(|ev| ev.rotate(&a, 1).map(drop))),
        (
            "rotate_many x4",
            Box::new(|ev| ev.rotate_many(&a, &[1, 2, 4, 8]).map(drop)),
        ),
        (
            "multiply_relin_rescale",
            Box::new(|ev| ev.multiply_relin_rescale(&a, &b).map(drop)),
        ),
    ];
    let evs: Vec<Evaluator<u64>> = budgets
        .iter()
        .map(|&t| base.with_threads(Threads::new(t)))
        .collect();
    print!("{:<24}", "operation");
    for t in &budgets {
        print!("{:>12}", format!("t={t} (ms)"));
    }
    for t in budgets.iter().skip(1) {
        print!("{:>12}", format!("x t={t}"));
    }
    println!();
    for (name, op) in &ops {
        let times = medians_ms(runs, &evs, op.as_ref())?;
        print!("{name:<24}");
        for ms in &times {
            print!("{ms:>12.3}");
        }
        for ms in times.iter().skip(1) {
            print!("{:>12.2}", times[0] / ms);
        }
        println!();
    }
    Ok(())
}
