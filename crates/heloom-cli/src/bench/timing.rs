//! Timing helpers: robust medians, a CPU clock estimate and a memory-bandwidth probe, so results
//! can be put against the machine's limits.

use std::hint::black_box;
use std::time::Instant;

/// Median time of one call of `f` in microseconds.
///
/// Calls are batched so each sample lasts at least `min_sample_us`; the median over `samples`
/// batches resists the noise of a shared machine.
pub fn median_us(samples: usize, min_sample_us: f64, mut f: impl FnMut()) -> f64 {
    // Warm caches, branch predictors and the clock.
    let t0 = Instant::now();
    let mut warm = 0u64;
    while t0.elapsed().as_secs_f64() * 1e6 < min_sample_us.max(200.0) || warm < 3 {
        f();
        warm += 1;
    }
    let per_call = t0.elapsed().as_secs_f64() * 1e6 / warm as f64;
    let batch = ((min_sample_us / per_call).ceil() as u64).max(1);
    let mut times: Vec<f64> = (0..samples.max(1))
        .map(|_| {
            let t = Instant::now();
            for _ in 0..batch {
                f();
            }
            t.elapsed().as_secs_f64() * 1e6 / batch as f64
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

/// Estimated core clock in GHz from a dependent chain of `x = (x * k) ^ (x >> 7)`: a 64-bit
/// multiply (3 cycles of latency on every Intel core since Nehalem and every AMD Zen core) then
/// an xor (1 cycle); the xor with a shift of `x` keeps the compiler from reassociating the
/// multiplies.
pub fn estimate_ghz() -> f64 {
    let k = black_box(0x9e37_79b9_7f4a_7c15u64);
    let iters = 200_000u64;
    let us = median_us(7, 2000.0, || {
        let mut x = black_box(1u64);
        for _ in 0..iters {
            x = x.wrapping_mul(k) ^ (x >> 7);
        }
        black_box(x);
    });
    (4.0 * iters as f64) / (us * 1e3)
}

/// Streaming bandwidth in GB/s (bytes read + written per second) for a buffer of `bytes`.
pub fn stream_gbs(bytes: usize) -> f64 {
    let n = bytes / 8;
    let src: Vec<u64> = (0..n as u64).collect();
    let mut dst = vec![0u64; n];
    let us = median_us(5, 2000.0, || {
        dst.copy_from_slice(black_box(&src));
        black_box(&mut dst);
    });
    (2.0 * bytes as f64) / (us * 1e3)
}

/// 1/5/15-minute load averages (Linux), to judge how much other work shared a run.
pub fn load_average() -> Option<[f64; 3]> {
    let s = std::fs::read_to_string("/proc/loadavg").ok()?;
    let mut it = s.split_whitespace().map(|x| x.parse::<f64>().ok());
    Some([it.next()??, it.next()??, it.next()??])
}
