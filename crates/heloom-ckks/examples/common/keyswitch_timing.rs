//! Shared body of `keyswitch_system` and `keyswitch_mimalloc`: the same key-switching timings
//! under two global allocators (issue: on the system allocator, key switching within 5% of the
//! mimalloc build). Prints one JSON line.

use heloom_ckks::*;
use std::sync::Arc;
use std::time::Instant;

/// Median of `reps` timings of `f`, in microseconds (after two warm-up calls).
fn median_us(reps: usize, mut f: impl FnMut()) -> f64 {
    f();
    f();
    let mut t: Vec<f64> = (0..reps)
        .map(|_| {
            let s = Instant::now();
            f();
            s.elapsed().as_secs_f64() * 1e6
        })
        .collect();
    t.sort_by(f64::total_cmp);
    t[t.len() / 2]
}

/// Relinearize, rotate, hoisted rotations and multiply+relinearize+rescale at N = 2^14 with 8
/// ciphertext primes (the anchor shape of the CKKS benchmark), one thread.
pub fn run(allocator: &str) -> Result<()> {
    let reps: usize = std::env::var("REPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(41);
    let p = CkksParameters::builder(1 << 14)
        .levels(7)
        .scale_bits(40)
        .build()?;
    let ctx = Context::<u64>::new(p)?;
    let keys = keygen(&ctx, &[1, 2, 3, 4], true)?;
    let ev = Evaluator::new(&ctx, Arc::new(keys.evaluation_keys))?;
    let x: Vec<f64> = (0..ctx.params().slots())
        .map(|i| (i % 7) as f64 / 7.0)
        .collect();
    let a = Encryptor::new(&ctx).encrypt(&x, &keys.public_key)?;
    let prod = ev.multiply(&a, &a)?;
    let mut sink = 0u64;
    let mut keep = |c: Ciphertext<u64>| sink = sink.wrapping_add(c.level() as u64);
    let relin = median_us(reps, || keep(ev.relinearize(&prod).expect("relinearize")));
    let rotate = median_us(reps, || keep(ev.rotate(&a, 1).expect("rotate")));
    let hoisted = median_us(reps, || {
        for c in ev.rotate_many(&a, &[1, 2, 3, 4]).expect("rotate_many") {
            keep(c);
        }
    });
    let mrr = median_us(reps, || {
        keep(ev.multiply_relin_rescale(&a, &a).expect("multiply"))
    });
    println!(
        "{{\"allocator\":\"{allocator}\",\"relinearize_us\":{relin:.1},\"rotate_us\":{rotate:.1},\"rotate_many4_us\":{hoisted:.1},\"mul_relin_rescale_us\":{mrr:.1},\"reps\":{reps},\"sink\":{sink}}}"
    );
    Ok(())
}
