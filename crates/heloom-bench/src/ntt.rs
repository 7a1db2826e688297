//! `heloom bench ntt`: forward/inverse NTT, pointwise multiply and the other element-wise
//! kernels for every word size and backend on one core, with the task's targets checked as
//! ratios within the same run.

use std::hint::black_box;

use anyhow::{Context, Result};
use heloom_math::backend::{cpu_model, Backend, BackendChoice};
use heloom_math::{primes, Eltwise, NttTable, Word};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;
use serde::Serialize;

use crate::timing::{estimate_ghz, median_us, stream_gbs};

/// Options of the NTT benchmark.
#[derive(Debug, Clone)]
pub struct NttBenchOptions {
    /// log2 of the ring degrees to measure.
    pub log_ns: Vec<u32>,
    /// Timing samples per measurement (the median is reported).
    pub samples: usize,
    /// Minimum duration of one sample in microseconds.
    pub min_sample_us: f64,
    /// Backends to include (empty = every available one).
    pub backends: Vec<Backend>,
}

impl Default for NttBenchOptions {
    fn default() -> Self {
        Self {
            log_ns: (12..=17).collect(),
            samples: 11,
            min_sample_us: 2000.0,
            backends: vec![],
        }
    }
}

/// One measurement.
#[derive(Debug, Clone, Serialize)]
pub struct Measurement {
    /// "ntt_forward", "ntt_inverse", "mul" (pointwise product) or "elt_*" (the other
    /// element-wise kernels: add, sub, neg, mul_add, mul_add2, mul_scalar, mul_scalar_add,
    /// sub_mul_scalar, reduce).
    pub op: &'static str,
    /// Ring degree.
    pub n: usize,
    /// Word size in bits.
    pub word_bits: u32,
    /// Prime size in bits.
    pub prime_bits: u32,
    /// Backend name.
    pub backend: &'static str,
    /// Median microseconds per call.
    pub us: f64,
    /// `n * prime_bits / us` (megabits of residues processed per second).
    pub mbits_per_s: f64,
    /// Butterflies (NTT) or modular products (mul) per core clock cycle.
    pub ops_per_cycle: f64,
    /// Minimal traffic (each array read and written once) per second, GB/s.
    pub gbytes_per_s: f64,
}

pub use crate::target::Target;

/// The machine the benchmark ran on.
#[derive(Debug, Clone, Serialize)]
pub struct MachineInfo {
    /// CPU model string.
    pub cpu: String,
    /// Logical cores.
    pub cores: usize,
    /// Estimated core clock, GHz.
    pub ghz_estimate: f64,
    /// Streaming copy bandwidth (read + write) on a 256 MiB buffer, GB/s.
    pub dram_stream_gbs: f64,
    /// Streaming copy bandwidth on a 1 MiB buffer (L2-resident), GB/s.
    pub l2_stream_gbs: f64,
    /// Backends the CPU supports.
    pub backends: Vec<&'static str>,
}

/// The whole report, as printed with `--json`.
#[derive(Debug, Clone, Serialize)]
pub struct NttReport {
    /// Benchmark name.
    pub benchmark: &'static str,
    /// The machine.
    pub machine: MachineInfo,
    /// Every measurement.
    pub results: Vec<Measurement>,
    /// Targets from the task, as measured in this run.
    pub targets: Vec<Target>,
}

/// (word bits, prime bits) configurations measured.
const CONFIGS: [(u32, u32); 4] = [(64, 50), (64, 60), (32, 31), (32, 30)];

fn measure<W: Word>(
    n: usize,
    prime_bits: u32,
    backend: Backend,
    opts: &NttBenchOptions,
    ghz: f64,
    out: &mut Vec<Measurement>,
) -> Result<()> {
    let q = primes::ntt_primes::<W>(prime_bits, n, 1)?[0];
    let table = NttTable::<W>::with_backend(n, q, BackendChoice::Force(backend))?;
    let elt = Eltwise::<W>::new(BackendChoice::Force(backend), prime_bits)?;
    let m = *table.modulus();
    let mut rng = ChaCha20Rng::seed_from_u64(n as u64 * 31 + prime_bits as u64);
    let a: Vec<W> = (0..n).map(|_| W::from_u64(rng.gen_range(0..q))).collect();
    let b: Vec<W> = (0..n).map(|_| W::from_u64(rng.gen_range(0..q))).collect();
    let word_bytes = (W::BITS / 8) as f64;
    let log_n = n.trailing_zeros() as f64;
    let butterflies = n as f64 / 2.0 * log_n;

    // Forward and inverse run on the same buffer, alternating, so inputs stay reduced.
    let mut x = a.clone();
    let fwd = median_us(opts.samples, opts.min_sample_us, || {
        table.forward(black_box(&mut x)).ok();
    });
    let mut x = a.clone();
    let inv = median_us(opts.samples, opts.min_sample_us, || {
        table.inverse(black_box(&mut x)).ok();
    });
    let mut c = vec![W::ZERO; n];
    let mul = median_us(opts.samples, opts.min_sample_us, || {
        elt.mul(&m, black_box(&mut c), black_box(&a), black_box(&b))
            .ok();
    });
    let mk = |op, us: f64, ops: f64, arrays: f64| Measurement {
        op,
        n,
        word_bits: W::BITS,
        prime_bits,
        backend: backend.name(),
        us,
        mbits_per_s: n as f64 * prime_bits as f64 / us,
        ops_per_cycle: ops / (us * 1e3 * ghz),
        gbytes_per_s: arrays * n as f64 * word_bytes / (us * 1e3),
    };
    out.push(mk("ntt_forward", fwd, butterflies, 2.0));
    out.push(mk("ntt_inverse", inv, butterflies, 2.0));
    out.push(mk("mul", mul, n as f64, 3.0));

    // The other element-wise kernels (key switching, rescaling and base conversion run on them)
    // on the same operands; outputs stay reduced, so repeated calls stay valid inputs.
    let s = rng.gen_range(1..q);
    let mut d = vec![W::ZERO; n];
    let time = |f: &mut dyn FnMut()| median_us(opts.samples, opts.min_sample_us, f);
    let (a, b, n_ops) = (black_box(&a), black_box(&b), n as f64);
    let rows: [(&'static str, f64, f64); 9] = [
        (
            "elt_add",
            time(&mut || drop(elt.add(&m, &mut c, a, b))),
            3.0,
        ),
        (
            "elt_sub",
            time(&mut || drop(elt.sub(&m, &mut c, a, b))),
            3.0,
        ),
        ("elt_neg", time(&mut || drop(elt.neg(&m, &mut c, a))), 2.0),
        (
            "elt_mul_add",
            time(&mut || drop(elt.mul_add(&m, &mut c, a, b))),
            4.0,
        ),
        (
            "elt_mul_add2",
            time(&mut || drop(elt.mul_add2(&m, &mut c, &mut d, a, b, a))),
            7.0,
        ),
        (
            "elt_mul_scalar",
            time(&mut || drop(elt.mul_scalar(&m, &mut c, a, s))),
            2.0,
        ),
        (
            "elt_mul_scalar_add",
            time(&mut || drop(elt.mul_scalar_add(&m, &mut c, a, s))),
            3.0,
        ),
        (
            "elt_sub_mul_scalar",
            time(&mut || drop(elt.sub_mul_scalar(&m, &mut c, b, s))),
            3.0,
        ),
        (
            "elt_reduce",
            time(&mut || drop(elt.reduce(&m, &mut c, a))),
            2.0,
        ),
    ];
    for (op, us, arrays) in rows {
        out.push(mk(op, us, n_ops, arrays));
    }
    Ok(())
}

/// Runs the benchmark. `progress` is told about each finished measurement.
pub fn run(opts: &NttBenchOptions, mut progress: impl FnMut(&str)) -> Result<NttReport> {
    progress("measuring clock and memory bandwidth");
    let ghz = estimate_ghz();
    let machine = MachineInfo {
        cpu: cpu_model(),
        cores: std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1),
        ghz_estimate: ghz,
        dram_stream_gbs: stream_gbs(256 << 20),
        l2_stream_gbs: stream_gbs(1 << 20),
        backends: Backend::available().into_iter().map(|b| b.name()).collect(),
    };
    let mut results = Vec::new();
    for &log_n in &opts.log_ns {
        let n = 1usize << log_n;
        for (word_bits, prime_bits) in CONFIGS {
            for backend in Backend::ALL {
                if backend.check(word_bits, prime_bits).is_err()
                    || (!opts.backends.is_empty() && !opts.backends.contains(&backend))
                {
                    continue;
                }
                progress(&format!(
                    "N=2^{log_n} {word_bits}-bit words, {prime_bits}-bit prime, {backend}"
                ));
                if word_bits == 64 {
                    measure::<u64>(n, prime_bits, backend, opts, ghz, &mut results)
                } else {
                    measure::<u32>(n, prime_bits, backend, opts, ghz, &mut results)
                }
                .with_context(|| {
                    format!("measuring N=2^{log_n} {word_bits}/{prime_bits} {backend}")
                })?;
            }
        }
    }
    let targets = check_targets(&results);
    Ok(NttReport {
        benchmark: "ntt",
        machine,
        results,
        targets,
    })
}

fn find<'a>(
    r: &'a [Measurement],
    op: &str,
    n: usize,
    word_bits: u32,
    prime_bits: u32,
    backend: &str,
) -> Option<&'a Measurement> {
    r.iter().find(|m| {
        m.op == op
            && m.n == n
            && m.word_bits == word_bits
            && m.prime_bits == prime_bits
            && m.backend == backend
    })
}

/// The fastest measurement of an op for a word/prime configuration.
fn best<'a>(
    r: &'a [Measurement],
    op: &str,
    n: usize,
    word_bits: u32,
    prime_bits: u32,
) -> Option<&'a Measurement> {
    r.iter()
        .filter(|m| {
            m.op == op
                && m.n == n
                && m.word_bits == word_bits
                && m.prime_bits == prime_bits
                && m.backend != "scalar"
        })
        .min_by(|a, b| a.us.total_cmp(&b.us))
}

/// The highest-throughput (mbits/s) SIMD measurement of an op over every prime size of a word
/// size, optionally restricted to one backend.
fn best_mbits<'a>(
    r: &'a [Measurement],
    op: &str,
    n: usize,
    word_bits: u32,
    backend: Option<&str>,
) -> Option<&'a Measurement> {
    r.iter()
        .filter(|m| m.op == op && m.n == n && m.word_bits == word_bits && m.backend != "scalar")
        .filter(|m| backend.is_none_or(|b| m.backend == b))
        .max_by(|a, b| a.mbits_per_s.total_cmp(&b.mbits_per_s))
}

/// Checks the task's targets on whatever this run measured.
pub fn check_targets(r: &[Measurement]) -> Vec<Target> {
    let mut t = Vec::new();
    let mut push = |name: String, measured: f64, threshold: f64, unit: &'static str| {
        t.push(Target::measured(name, measured, threshold, unit));
    };
    // Absolute anchors from the task (HEXL 1.2 on this machine class).
    for (log_n, ifma_max, dq_max) in [(14u32, 35.0, 80.0 / 1.5), (16, 150.0, 360.0 / 1.5)] {
        let n = 1usize << log_n;
        if let Some(m) = find(r, "ntt_forward", n, 64, 50, "avx512-ifma") {
            push(
                format!("forward NTT N=2^{log_n}, 50-bit prime, IFMA (HEXL IFMA / 1.3)"),
                m.us,
                ifma_max,
                "us",
            );
        }
        if let Some(m) = best(r, "ntt_forward", n, 64, 60) {
            push(
                format!(
                    "forward NTT N=2^{log_n}, 60-bit prime, best 64-bit ({}) (HEXL DQ / 1.5)",
                    m.backend
                ),
                m.us,
                dq_max,
                "us",
            );
        }
        // 32-bit words (best prime size below 2^31) against 64-bit words, in throughput (mbits/s,
        // i.e. at equal log Q).
        if let (Some(w32), Some(w64)) = (
            best_mbits(r, "ntt_forward", n, 32, None),
            best(r, "ntt_forward", n, 64, 60),
        ) {
            push(
                format!(
                    "forward NTT N=2^{log_n}: 32-bit ({}, {}-bit) / 64-bit ({}, 60-bit) mbits/s",
                    w32.backend, w32.prime_bits, w64.backend
                ),
                w32.mbits_per_s / w64.mbits_per_s,
                1.8,
                "x",
            );
        }
        if let (Some(w32), Some(ifma)) = (
            best_mbits(r, "ntt_forward", n, 32, None),
            find(r, "ntt_forward", n, 64, 50, "avx512-ifma"),
        ) {
            push(
                format!(
                    "forward NTT N=2^{log_n}: 32-bit ({}, {}-bit) / IFMA (50-bit) mbits/s",
                    w32.backend, w32.prime_bits
                ),
                w32.mbits_per_s / ifma.mbits_per_s,
                1.0,
                "x",
            );
        }
        if let (Some(a32), Some(a64)) = (
            best_mbits(r, "ntt_forward", n, 32, Some("avx2")),
            find(r, "ntt_forward", n, 64, 60, "avx2"),
        ) {
            push(
                format!(
                    "forward NTT N=2^{log_n}: AVX2 32-bit ({}-bit) / AVX2 64-bit (60-bit) mbits/s",
                    a32.prime_bits
                ),
                a32.mbits_per_s / a64.mbits_per_s,
                1.8,
                "x",
            );
        }
    }
    // Every SIMD path at least 3x the scalar path (same op, size, word and prime), N >= 2^12:
    // one line per (word, prime, backend) with the worst ratio over sizes and both NTT directions.
    let mut groups: Vec<(u32, u32, &str)> = Vec::new();
    for m in r
        .iter()
        .filter(|m| m.backend != "scalar" && m.n >= 1 << 12 && m.op.starts_with("ntt"))
    {
        if !groups.contains(&(m.word_bits, m.prime_bits, m.backend)) {
            groups.push((m.word_bits, m.prime_bits, m.backend));
        }
    }
    for (wb, pb, backend) in groups {
        let worst = r
            .iter()
            .filter(|m| m.backend == backend && m.word_bits == wb && m.prime_bits == pb)
            .filter(|m| m.n >= 1 << 12 && m.op.starts_with("ntt"))
            .filter_map(|m| find(r, m.op, m.n, wb, pb, "scalar").map(|s| (s.us / m.us, m.op, m.n)))
            .min_by(|a, b| a.0.total_cmp(&b.0));
        if let Some((ratio, op, n)) = worst {
            push(
                format!(
                    "{backend} vs scalar, {wb}-bit words/{pb}-bit primes, NTT N>=2^12 (worst: {op} 2^{})",
                    n.trailing_zeros()
                ),
                ratio,
                3.0,
                "x",
            );
        }
    }
    t
}

/// Renders the report as a text table.
pub fn render(rep: &NttReport) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let m = &rep.machine;
    let _ = writeln!(
        s,
        "heloom bench ntt — {} ({} cores, ~{:.2} GHz est.), stream copy: DRAM {:.1} GB/s, L2 {:.1} GB/s; one core\n",
        m.cpu, m.cores, m.ghz_estimate, m.dram_stream_gbs, m.l2_stream_gbs
    );
    let _ = writeln!(
        s,
        "{:<18} {:>7} {:>5} {:>6} {:<12} {:>10} {:>10} {:>9} {:>8} {:>9}",
        "op", "N", "word", "prime", "backend", "us", "Mbit/s", "x scalar", "op/cyc", "GB/s"
    );
    for r in &rep.results {
        let speedup = find(&rep.results, r.op, r.n, r.word_bits, r.prime_bits, "scalar")
            .map(|sc| format!("{:.2}", sc.us / r.us))
            .unwrap_or_else(|| "-".into());
        let _ = writeln!(
            s,
            "{:<18} {:>7} {:>5} {:>6} {:<12} {:>10.2} {:>10.0} {:>9} {:>8.3} {:>9.1}",
            r.op,
            format!("2^{}", r.n.trailing_zeros()),
            r.word_bits,
            r.prime_bits,
            r.backend,
            r.us,
            r.mbits_per_s,
            speedup,
            r.ops_per_cycle,
            r.gbytes_per_s
        );
    }
    let _ = writeln!(
        s,
        "\nop/cyc: butterflies (NTT) or modular products (mul) per estimated core cycle; a vector unit\n\
         retiring one butterfly per lane per cycle would read 8 (64-bit words) or 16 (32-bit words) on AVX-512.\n\
         GB/s: each array read and written once per call, against the stream-copy bandwidth above\n\
         (L2 {:.1} GB/s, DRAM {:.1} GB/s).",
        m.l2_stream_gbs, m.dram_stream_gbs
    );
    if !rep.targets.is_empty() {
        let _ = writeln!(s, "\nTargets (measured in this run):");
        s.push_str(&crate::target::render(&rep.targets));
    }
    s
}
