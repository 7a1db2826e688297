//! Timing helpers: robust medians, a CPU clock estimate and a memory-bandwidth probe, so results
//! can be put against the machine's limits.

use heloom_math::backend::{cpu_model, Backend};
use serde::Serialize;
use std::hint::black_box;
use std::time::Instant;

/// Median time of one call of `f` in microseconds.
///
/// Calls are batched so each sample lasts at least `min_sample_us`; the median over `samples`
/// batches resists the noise of a shared machine.
pub fn median_us(samples: usize, min_sample_us: f64, mut f: impl FnMut()) -> f64 {
    let t0 = Instant::now();
    batched_median(samples, min_sample_us, &mut f, &mut || {
        t0.elapsed().as_nanos() as u64
    })
}

/// Median time of one call of `f` in microseconds, on this thread's CPU clock: the same batching
/// and warm-up as [`median_us`] (which it falls back to where there is no such clock), but time
/// the thread spends preempted by other processes is not counted, so a busy shared machine
/// slows the numbers less. On an idle core the two clocks agree.
pub fn median_cpu_us(samples: usize, min_sample_us: f64, mut f: impl FnMut()) -> f64 {
    if thread_cpu_ns().is_none() {
        return median_us(samples, min_sample_us, f);
    }
    batched_median(samples, min_sample_us, &mut f, &mut || {
        thread_cpu_ns().unwrap_or(0)
    })
}

/// This thread's CPU time in nanoseconds, where the platform has such a clock.
pub fn thread_cpu_ns() -> Option<u64> {
    cpu_time::ThreadTime::try_now()
        .ok()
        .map(|t| t.as_duration().as_nanos() as u64)
}

/// The clock [`median_cpu_us`] reads: `"thread_cpu"` where the per-thread CPU clock exists,
/// else `"wall"`.
pub fn clock_name() -> &'static str {
    if thread_cpu_ns().is_some() {
        "thread_cpu"
    } else {
        "wall"
    }
}

/// Warm-up (at least 200 us and 3 calls: caches, branch predictors, the clock), then the median
/// of `samples` batches of calls, each batch lasting at least `min_sample_us` on `now_ns`.
fn batched_median(
    samples: usize,
    min_sample_us: f64,
    f: &mut dyn FnMut(),
    now_ns: &mut dyn FnMut() -> u64,
) -> f64 {
    let t0 = now_ns();
    let mut warm = 0u64;
    while (now_ns().saturating_sub(t0) as f64) / 1e3 < min_sample_us.max(200.0) || warm < 3 {
        f();
        warm += 1;
    }
    let per_call = now_ns().saturating_sub(t0) as f64 / 1e3 / warm as f64;
    let batch = ((min_sample_us / per_call.max(1e-3)).ceil() as u64).max(1);
    let times: Vec<f64> = (0..samples.max(1))
        .map(|_| {
            let t = now_ns();
            for _ in 0..batch {
                f();
            }
            now_ns().saturating_sub(t) as f64 / 1e3 / batch as f64
        })
        .collect();
    median(times)
}

/// The median of `values` (the upper one of an even count; NaN when empty).
pub fn median(mut values: Vec<f64>) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// A time (or any positive figure) with a precision that suits its size: no decimals from 100
/// or for a whole number, one from 10, two from 1, three below; `-` when not finite.
pub fn fmt_sig(v: f64) -> String {
    if !v.is_finite() {
        "-".to_string()
    } else if v.abs() >= 100.0 || (v.fract() == 0.0 && v.abs() < 1e9) {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else if v.abs() >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
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

/// The machine a benchmark ran on, as every report records it.
#[derive(Debug, Clone, Serialize)]
pub struct Machine {
    /// CPU model string.
    pub model: String,
    /// `family F model M` from `/proc/cpuinfo` (the model string alone can be vague, e.g.
    /// "AMD EPYC"; family 25 model 17 is Zen 4).
    pub family_model: Option<String>,
    /// Logical cores (the all-cores thread budget).
    pub cores: usize,
    /// SIMD backends the CPU supports.
    pub backends: Vec<&'static str>,
    /// `/proc/loadavg` when the run started (other work on the machine skews the times).
    pub load_average_start: Option<[f64; 3]>,
    /// The same when it ended ([`Machine::finish`]).
    pub load_average_end: Option<[f64; 3]>,
}

impl Machine {
    /// This machine, now (call at the start of a run).
    pub fn now() -> Self {
        Self {
            model: cpu_model(),
            family_model: family_model(),
            cores: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1),
            backends: Backend::available().into_iter().map(|b| b.name()).collect(),
            load_average_start: load_average(),
            load_average_end: None,
        }
    }

    /// Records the load average at the end of the run.
    pub fn finish(mut self) -> Self {
        self.load_average_end = load_average();
        self
    }
}

/// `family F model M` from `/proc/cpuinfo`, where there is one.
pub fn family_model() -> Option<String> {
    let info = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    let field = |name: &str| {
        info.lines()
            .find(|l| l.split(':').next().map(str::trim) == Some(name))
            .and_then(|l| l.split(':').nth(1))
            .map(|v| v.trim().to_string())
    };
    Some(format!(
        "family {} model {}",
        field("cpu family")?,
        field("model")?
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_and_medians() {
        assert_eq!(fmt_sig(349.0), "349");
        assert_eq!(fmt_sig(2.0), "2");
        assert_eq!(fmt_sig(20.625), "20.6");
        assert_eq!(fmt_sig(1.234), "1.23");
        assert_eq!(fmt_sig(0.01234), "0.012");
        assert_eq!(fmt_sig(f64::NAN), "-");
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 3.0, 2.0]), 3.0);
        assert!(median(Vec::new()).is_nan());
    }
}
