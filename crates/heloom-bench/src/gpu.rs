//! `heloom bench gpu`: the CUDA backend (`heloom-gpu`) against heloom's CPU backend on one core
//! and on every core: forward NTT, rescale (and the seed-003 naive GPU rescale as a baseline),
//! multiply, multiply + relinearize, relinearize and rotate, at N = 2^14 .. 2^16 with up to 30
//! 64-bit limbs, and on 32-bit words at the same N and log Q (more limbs). Every GPU result is
//! checked equal to the CPU's, word for word, before anything is timed; the H200
//! targets are checked on the same run.
//!
//! With `--emulator` the very same code runs on the host emulator of the kernels
//! ([`Gpu::emulator`]) with tiny parameters: a correctness smoke test of the benchmark, whose
//! "GPU" times are not speeds.

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use crate::progress::Progress;
use crate::report::{save_json_and_text, ParamSummary};
use crate::timing::fmt_sig;
use anyhow::{anyhow, bail, Context as _, Result};
use heloom_ckks::{
    keygen, Ciphertext, CkksParameters, Context, Encryptor, Evaluator, SecurityLevel, Threads,
};
use heloom_gpu::{Gpu, GpuContext, GpuEvaluator, GpuKind, GpuWord};
use heloom_math::backend::{cpu_model, Backend};
use heloom_math::sampler::uniform_from_seed;
use heloom_math::{Form, RnsPoly, Seed};
use plotters::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;
use serde::Serialize;

use crate::plot::{chart_builder, draw_legend, nth_colour, pe, svg_canvas};

/// The operations measured, in report order.
pub const OPS: [&str; 7] = [
    "ntt",
    "rescale",
    "rescale-naive",
    "multiply",
    "multiply+relin",
    "relinearize",
    "rotate",
];

/// Options of the GPU benchmark.
#[derive(Debug, Clone)]
pub struct GpuBenchOptions {
    /// Only N = 2^14, fewer repetitions.
    pub quick: bool,
    /// Timed rounds per GPU measurement (best and median reported).
    pub gpu_rounds: usize,
    /// Minimum length of one GPU round, us (fast ops are repeated back to back).
    pub gpu_min_round_us: f64,
    /// Timing samples per CPU measurement (best and median reported).
    pub cpu_samples: usize,
    /// Minimum length of one CPU sample, us (fast calls are batched).
    pub cpu_min_sample_us: f64,
}

impl GpuBenchOptions {
    /// The full run, the `--quick` one, or the emulator's (one call per GPU op: its times mean
    /// nothing; few short CPU samples).
    pub fn new(quick: bool, emulated: bool) -> Self {
        if emulated {
            Self {
                quick,
                gpu_rounds: 1,
                gpu_min_round_us: 0.0,
                cpu_samples: 3,
                cpu_min_sample_us: 500.0,
            }
        } else if quick {
            Self {
                quick,
                gpu_rounds: 3,
                gpu_min_round_us: 5_000.0,
                cpu_samples: 3,
                cpu_min_sample_us: 1_000.0,
            }
        } else {
            Self {
                quick,
                gpu_rounds: 7,
                gpu_min_round_us: 20_000.0,
                cpu_samples: 5,
                cpu_min_sample_us: 2_000.0,
            }
        }
    }
}

/// Why there is no device to benchmark: the backend's error and what to do instead.
#[derive(Debug)]
pub struct NoGpu(pub heloom_gpu::GpuError);

impl std::fmt::Display for NoGpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "heloom bench gpu needs a CUDA GPU, and there is none to use here: {}\n\
             `heloom bench gpu --emulator` runs this benchmark's code on the host emulator of the \
             GPU kernels instead, with tiny parameters: a correctness smoke test only, whose times \
             are not GPU speeds.",
            self.0
        )
    }
}

/// The device to benchmark: CUDA device 0, or the host emulator when asked for.
pub fn open_device(emulator: bool) -> std::result::Result<Gpu, NoGpu> {
    if emulator {
        Ok(Gpu::emulator())
    } else {
        Gpu::cuda(0).map_err(NoGpu)
    }
}

/// One parameter set to measure.
#[derive(Debug, Clone, Copy)]
struct SetSpec {
    word_bits: u32,
    log_n: u32,
    limbs: usize,
    scale_bits: u32,
    first_bits: u32,
    /// `false`: the explicit security opt-out (emulator sizes only).
    secure: bool,
}

/// 64-bit sets: 40-bit scaling primes after a 50-bit `q_0` (log Q = 330, 610, 1210 against the
/// 128-bit bounds 438, 881, 1747 on log QP; the builder picks the special primes within them).
const SETS64: [(u32, usize); 3] = [(14, 8), (15, 15), (16, 30)];

/// The 32-bit set at the same N and (about) the same log Q: 28-bit scaling primes after a
/// 30-bit `q_0`, hence more limbs.
fn set32(log_n: u32, limbs64: usize) -> SetSpec {
    let log_q64 = 50 + 40 * (limbs64 as u32 - 1);
    let scaling = ((log_q64 - 30) as f64 / 28.0).round().max(1.0) as usize;
    SetSpec {
        word_bits: 32,
        log_n,
        limbs: scaling + 1,
        scale_bits: 28,
        first_bits: 30,
        secure: true,
    }
}

fn plan(opts: &GpuBenchOptions, emulated: bool) -> Vec<SetSpec> {
    if emulated {
        // The emulator runs one OS thread per GPU thread: tiny sizes only, no security.
        return vec![
            SetSpec {
                word_bits: 64,
                log_n: 11,
                limbs: 4,
                scale_bits: 40,
                first_bits: 45,
                secure: false,
            },
            SetSpec {
                word_bits: 32,
                log_n: 11,
                limbs: 4,
                scale_bits: 28,
                first_bits: 30,
                secure: false,
            },
        ];
    }
    let sets: &[(u32, usize)] = if opts.quick { &SETS64[..1] } else { &SETS64 };
    let mut out = Vec::new();
    for &(log_n, limbs) in sets {
        out.push(SetSpec {
            word_bits: 64,
            log_n,
            limbs,
            scale_bits: 40,
            first_bits: 50,
            secure: true,
        });
        out.push(set32(log_n, limbs));
    }
    out
}

fn build_params(s: &SetSpec) -> Result<CkksParameters> {
    Ok(CkksParameters::builder(1 << s.log_n)
        .word_bits(s.word_bits)
        .levels(s.limbs - 1)
        .scale_bits(s.scale_bits)
        .first_bits(s.first_bits)
        .security(if s.secure {
            SecurityLevel::Bits128
        } else {
            SecurityLevel::None
        })
        .build()?)
}

/// The GPU as reported.
#[derive(Debug, Clone, Serialize)]
pub struct GpuInfoOut {
    /// Device name ("NVIDIA H200", or "host emulator").
    pub name: String,
    /// `cuda` or `emulator`.
    pub kind: &'static str,
    /// Compute capability, e.g. "9.0" (`None` for the emulator).
    pub compute_capability: Option<String>,
    /// Device memory in bytes (0 when unknown).
    pub memory: usize,
    /// Architecture the kernels were compiled for.
    pub arch: String,
    /// Most bytes the benchmark held on the device at once (buffers, tables and keys).
    pub peak_memory: usize,
}

/// The host as reported.
#[derive(Debug, Clone, Serialize)]
pub struct CpuInfoOut {
    /// CPU model string.
    pub model: String,
    /// Cores the all-cores CPU columns use (`heloom_pool::cores`).
    pub cores: usize,
    /// SIMD backends the CPU supports.
    pub backends: Vec<&'static str>,
}

/// One parameter set as measured.
#[derive(Debug, Clone, Serialize)]
pub struct SetInfo {
    /// Word size in bits.
    pub word_bits: u32,
    /// Ring degree.
    pub n: usize,
    /// Ciphertext primes (limbs) at the top level.
    pub limbs: usize,
    /// log Q, log QP, its 128-bit bound (`None`: security opted out), dnum and alpha.
    #[serde(flatten)]
    pub params: ParamSummary,
    /// log2 of the default scale.
    pub scale_bits: u32,
}

/// One operation on one parameter set.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// Operation (see [`OPS`]).
    pub op: &'static str,
    /// Word size in bits.
    pub word_bits: u32,
    /// Ring degree.
    pub n: usize,
    /// Limbs of the input (all of them: every op runs at the top level).
    pub limbs: usize,
    /// GPU time per call, us: the best round (calls back to back, stream synchronized).
    pub gpu_us: f64,
    /// GPU time per call, median round, us.
    pub gpu_median_us: f64,
    /// CPU time per call on one core, best sample, us.
    pub cpu1_us: f64,
    /// CPU time per call on one core, median sample, us.
    pub cpu1_median_us: f64,
    /// CPU time per call on every core, best sample, us.
    pub cpu_all_us: f64,
    /// CPU time per call on every core, median sample, us.
    pub cpu_all_median_us: f64,
    /// `rescale` only: the naive GPU baseline, best round, us.
    pub naive_us: Option<f64>,
    /// `rescale` only: `naive_us / gpu_us` (`None` on the emulator).
    pub naive_over_fused: Option<f64>,
    /// `cpu1_us / gpu_us` (`None` on the emulator, whose times are not speeds).
    pub speedup_1: Option<f64>,
    /// `cpu_all_us / gpu_us` (`None` on the emulator).
    pub speedup_all: Option<f64>,
    /// The GPU result was checked equal to the CPU's, word for word (always true in a report:
    /// a difference aborts the run).
    pub verified: bool,
}

pub use crate::target::Target;

/// The whole report, as printed with `--json`.
#[derive(Debug, Clone, Serialize)]
pub struct GpuReport {
    /// Benchmark name.
    pub benchmark: &'static str,
    /// Whether the GPU was the host emulator (GPU times are then not speeds).
    pub emulated: bool,
    /// Whether `--quick` was given.
    pub quick: bool,
    /// The GPU.
    pub gpu: GpuInfoOut,
    /// The CPU.
    pub cpu: CpuInfoOut,
    /// How the times were taken.
    pub method: String,
    /// Parameter sets.
    pub sets: Vec<SetInfo>,
    /// Measurements.
    pub rows: Vec<Row>,
    /// The targets (set for an H100 or H200).
    pub targets: Vec<Target>,
    /// Wall time of the whole run, seconds.
    pub wall_s: f64,
}

/// Best and median of a set of timings, us per call.
#[derive(Debug, Clone, Copy)]
struct Stat {
    best: f64,
    median: f64,
}

fn stat(mut v: Vec<f64>) -> Stat {
    v.sort_by(f64::total_cmp);
    Stat {
        best: v.first().copied().unwrap_or(f64::NAN),
        median: v.get(v.len() / 2).copied().unwrap_or(f64::NAN),
    }
}

/// GPU time per call of `f`. On a GPU: two warm-up calls, then `rounds` rounds of calls back to
/// back, each long enough to hide launch latency, timed from the first launch until the stream
/// is drained. On the emulator: one call (it is not a speed anyway, and it is slow).
fn time_gpu(
    gpu: &Gpu,
    opts: &GpuBenchOptions,
    f: &mut dyn FnMut() -> heloom_gpu::Result<()>,
) -> Result<Stat> {
    if gpu.kind() == GpuKind::Emulator {
        let t = Instant::now();
        f()?;
        gpu.synchronize()?;
        let us = t.elapsed().as_secs_f64() * 1e6;
        return Ok(Stat {
            best: us,
            median: us,
        });
    }
    for _ in 0..2 {
        f()?;
    }
    gpu.synchronize()?;
    let t = Instant::now();
    f()?;
    gpu.synchronize()?;
    let one = (t.elapsed().as_secs_f64() * 1e6).max(1.0);
    let reps = ((opts.gpu_min_round_us / one).ceil() as usize).clamp(1, 5_000);
    let mut times = Vec::with_capacity(opts.gpu_rounds);
    for _ in 0..opts.gpu_rounds.max(1) {
        let t = Instant::now();
        for _ in 0..reps {
            f()?;
        }
        gpu.synchronize()?;
        times.push(t.elapsed().as_secs_f64() * 1e6 / reps as f64);
    }
    Ok(stat(times))
}

/// CPU wall time per call of `f` (wall, like the GPU's, so that the all-cores runs count):
/// warm-up, then `samples` batches of at least `min_sample_us` each.
fn time_cpu(samples: usize, min_sample_us: f64, f: &mut dyn FnMut() -> Result<()>) -> Result<Stat> {
    let t0 = Instant::now();
    let mut warm = 0u32;
    // At least one call; fast ops keep going for a while (caches, clocks), slow ones do not.
    while warm < 1 || t0.elapsed().as_secs_f64() * 1e6 < min_sample_us {
        f()?;
        warm += 1;
    }
    let per_call = t0.elapsed().as_secs_f64() * 1e6 / warm as f64;
    let batch = ((min_sample_us / per_call.max(1e-3)).ceil() as u64).max(1);
    let mut times = Vec::with_capacity(samples);
    for _ in 0..samples.max(1) {
        let t = Instant::now();
        for _ in 0..batch {
            f()?;
        }
        times.push(t.elapsed().as_secs_f64() * 1e6 / batch as f64);
    }
    Ok(stat(times))
}

/// Steps per set for the progress bar: setup, verification, every op.
const STEPS_PER_SET: u64 = 2 + OPS.len() as u64;

fn random_values(seed: u64, len: usize) -> Vec<f64> {
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    (0..len).map(|_| rng.gen_range(-1.0..=1.0)).collect()
}

/// A uniformly random polynomial at `level` in coefficient form, expanded from `seed`.
fn random_coeff_poly<W: GpuWord>(ctx: &Context<W>, level: usize, seed: u64) -> Result<RnsPoly<W>> {
    let basis = ctx.q_basis(level)?;
    let mut poly = basis.zero(Form::Coeff);
    let mut expanded = Seed::default();
    expanded[..8].copy_from_slice(&seed.to_le_bytes());
    uniform_from_seed(&expanded, basis, &mut poly)?;
    // Uniform in either form: the sampler tags it NTT, the ops timed here take coefficients.
    poly.set_form(Form::Coeff);
    Ok(poly)
}

/// Where two word arrays first differ, as "word i (limb l, coefficient c)".
fn first_difference<W: PartialEq>(a: &[W], b: &[W], n: usize) -> String {
    match a.iter().zip(b).position(|(x, y)| x != y) {
        Some(i) => format!("word {i} (limb {}, coefficient {})", i / n, i % n),
        None => format!("length {} against {}", a.len(), b.len()),
    }
}

/// Checks a GPU ciphertext (downloaded) against the CPU's, word for word.
fn same_ct<W: GpuWord>(
    what: &str,
    got: &Ciphertext<W>,
    want: &Ciphertext<W>,
    n: usize,
) -> Result<()> {
    if got.level() != want.level() || got.size() != want.size() {
        bail!(
            "{what}: level {} with {} polynomials, expected level {} with {}",
            got.level(),
            got.size(),
            want.level(),
            want.size()
        );
    }
    if (got.scale() - want.scale()).abs() > 1e-9 * want.scale() {
        bail!("{what}: scale {} against {}", got.scale(), want.scale());
    }
    for (i, (x, y)) in got.polys().iter().zip(want.polys()).enumerate() {
        if x.as_slice() != y.as_slice() {
            bail!(
                "{what}: polynomial {i} differs first at {}",
                first_difference(x.as_slice(), y.as_slice(), n)
            );
        }
    }
    Ok(())
}

/// Times of one op on the three engines.
struct Times {
    gpu: Stat,
    cpu1: Stat,
    cpu_all: Stat,
}

/// Measures every op on one parameter set: results checked first, then timed.
fn bench_set<W: GpuWord>(
    gpu: &Gpu,
    spec: &SetSpec,
    params: CkksParameters,
    opts: &GpuBenchOptions,
    prog: &Progress,
    rows: &mut Vec<Row>,
) -> Result<SetInfo> {
    let label = format!(
        "N=2^{} {}-bit words x {} limbs",
        spec.log_n, spec.word_bits, spec.limbs
    );
    prog.step(&format!("{label}: keys and GPU tables"));
    let cores = heloom_pool::cores();
    let info = SetInfo {
        word_bits: spec.word_bits,
        n: params.n(),
        limbs: params.moduli().len(),
        params: ParamSummary::of(&params, params.security()),
        scale_bits: spec.scale_bits,
    };
    let ctx = Context::<W>::new(params)?;
    let n = ctx.n();
    let top = ctx.max_level();
    let keys = keygen(&ctx, &[1], false)?;
    let enc = Encryptor::new(&ctx);
    let seed = ((n as u64) << 8) | spec.word_bits as u64;
    let ca = enc.encrypt(&random_values(seed, n / 2), &keys.public_key)?;
    let cb = enc.encrypt(&random_values(seed + 1, n / 2), &keys.public_key)?;
    let cpu1 = Evaluator::new(&ctx, Arc::new(keys.evaluation_keys.clone()))?;
    let cpu_all = cpu1.with_threads(Threads::new(cores));
    let g = GpuContext::new(gpu, &ctx)?;
    let ge = GpuEvaluator::new(&g, &keys.evaluation_keys)?;
    let basis = ctx.q_basis(top)?;
    let poly = random_coeff_poly(&ctx, top, seed + 2)?;
    prog.inc();

    // Results first: timing wrong answers would mean nothing. The CPU references come from
    // one core; the all-cores evaluator must agree with them too.
    prog.step(&format!("{label}: checking GPU results against the CPU"));
    let c3 = cpu1.multiply(&ca, &cb)?;
    let c2 = cpu1.relinearize(&c3)?;
    let rs = cpu1.rescale(&c2)?;
    let rot = cpu1.rotate(&ca, 1)?;
    let mut ntt_ref = poly.clone();
    basis.forward(&mut ntt_ref)?;
    let mut ntt_all = poly.clone();
    basis.forward_with(&mut ntt_all, Threads::new(cores))?;
    if ntt_all.as_slice() != ntt_ref.as_slice() {
        bail!("{label}: the CPU's NTT on {cores} threads differs from one thread's");
    }
    let all = |what: &str, got: Ciphertext<W>, want: &Ciphertext<W>| {
        same_ct(
            &format!("{label}: CPU {what} on {cores} threads"),
            &got,
            want,
            n,
        )
    };
    all("multiply", cpu_all.multiply(&ca, &cb)?, &c3)?;
    all("relinearize", cpu_all.relinearize(&c3)?, &c2)?;
    all("rescale", cpu_all.rescale(&c2)?, &rs)?;
    all("rotate", cpu_all.rotate(&ca, 1)?, &rot)?;

    let (ga, gb) = (g.upload(&ca)?, g.upload(&cb)?);
    let (gc3, gc2) = (g.upload(&c3)?, g.upload(&c2)?);
    let check = |what: &str, got: heloom_gpu::GpuCiphertext<W>, want: &Ciphertext<W>| {
        same_ct(
            &format!("{label}: GPU {what} differs from the CPU's;"),
            &g.download(&got)?,
            want,
            n,
        )
        .context("the GPU backend is wrong on this device; timings would be meaningless")
    };
    let mut buf = g.upload_polys(&[&poly], top)?;
    g.ntt_forward(&mut buf, top)?;
    let got = gpu.download(&buf)?;
    if got != ntt_ref.as_slice() {
        bail!(
            "{label}: GPU forward NTT differs from the CPU's at {}; the GPU backend is wrong on \
             this device and timings would be meaningless",
            first_difference(&got, ntt_ref.as_slice(), n)
        );
    }
    check("multiply", g.multiply(&ga, &gb)?, &c3)?;
    check("multiply+relin", ge.multiply_relin(&ga, &gb)?, &c2)?;
    check("relinearize", ge.relinearize(&gc3)?, &c2)?;
    check("rescale", g.rescale(&gc2)?, &rs)?;
    let naive_exists = W::BITS == 64;
    if naive_exists {
        check("rescale-naive", g.rescale_naive(&gc2)?, &rs)?;
    }
    check("rotate", ge.rotate(&ga, 1)?, &rot)?;
    prog.inc();

    let cpu_t =
        |f: &mut dyn FnMut() -> Result<()>| time_cpu(opts.cpu_samples, opts.cpu_min_sample_us, f);
    let gpu_t = |f: &mut dyn FnMut() -> heloom_gpu::Result<()>| time_gpu(gpu, opts, f);
    let mut naive: Option<Stat> = None;
    let mut rescale_times: Option<(Stat, Stat)> = None;
    for op in OPS {
        if op == "rescale-naive" && !naive_exists {
            prog.inc();
            continue;
        }
        prog.step(&format!("{label}: {op}"));
        let t = match op {
            "ntt" => {
                // Repeated transforms of one buffer: every output is reduced, so it is a valid
                // input again; only the form label needs resetting on the CPU.
                let mut p1 = poly.clone();
                let mut pa = poly.clone();
                Times {
                    gpu: gpu_t(&mut || g.ntt_forward(&mut buf, top))?,
                    cpu1: cpu_t(&mut || {
                        p1.set_form(Form::Coeff);
                        Ok(basis.forward(black_box(&mut p1))?)
                    })?,
                    cpu_all: cpu_t(&mut || {
                        pa.set_form(Form::Coeff);
                        Ok(basis.forward_with(black_box(&mut pa), Threads::new(cores))?)
                    })?,
                }
            }
            "rescale" => {
                let t = Times {
                    gpu: gpu_t(&mut || g.rescale(&gc2).map(drop))?,
                    cpu1: cpu_t(&mut || {
                        black_box(cpu1.rescale(&c2)?);
                        Ok(())
                    })?,
                    cpu_all: cpu_t(&mut || {
                        black_box(cpu_all.rescale(&c2)?);
                        Ok(())
                    })?,
                };
                rescale_times = Some((t.cpu1, t.cpu_all));
                t
            }
            "rescale-naive" => {
                let gt = gpu_t(&mut || g.rescale_naive(&gc2).map(drop))?;
                naive = Some(gt);
                // The CPU side is the same op as `rescale`'s: measured once.
                let (cpu1_t, cpu_all_t) = rescale_times
                    .ok_or_else(|| anyhow!("rescale-naive is measured after rescale"))?;
                Times {
                    gpu: gt,
                    cpu1: cpu1_t,
                    cpu_all: cpu_all_t,
                }
            }
            "multiply" => Times {
                gpu: gpu_t(&mut || g.multiply(&ga, &gb).map(drop))?,
                cpu1: cpu_t(&mut || {
                    black_box(cpu1.multiply(&ca, &cb)?);
                    Ok(())
                })?,
                cpu_all: cpu_t(&mut || {
                    black_box(cpu_all.multiply(&ca, &cb)?);
                    Ok(())
                })?,
            },
            "multiply+relin" => Times {
                gpu: gpu_t(&mut || ge.multiply_relin(&ga, &gb).map(drop))?,
                cpu1: cpu_t(&mut || {
                    let m = cpu1.multiply(&ca, &cb)?;
                    black_box(cpu1.relinearize(&m)?);
                    Ok(())
                })?,
                cpu_all: cpu_t(&mut || {
                    let m = cpu_all.multiply(&ca, &cb)?;
                    black_box(cpu_all.relinearize(&m)?);
                    Ok(())
                })?,
            },
            "relinearize" => Times {
                gpu: gpu_t(&mut || ge.relinearize(&gc3).map(drop))?,
                cpu1: cpu_t(&mut || {
                    black_box(cpu1.relinearize(&c3)?);
                    Ok(())
                })?,
                cpu_all: cpu_t(&mut || {
                    black_box(cpu_all.relinearize(&c3)?);
                    Ok(())
                })?,
            },
            "rotate" => Times {
                gpu: gpu_t(&mut || ge.rotate(&ga, 1).map(drop))?,
                cpu1: cpu_t(&mut || {
                    black_box(cpu1.rotate(&ca, 1)?);
                    Ok(())
                })?,
                cpu_all: cpu_t(&mut || {
                    black_box(cpu_all.rotate(&ca, 1)?);
                    Ok(())
                })?,
            },
            other => bail!("no measurement for op {other}"),
        };
        let emulated = gpu.kind() == GpuKind::Emulator;
        let speed = |cpu: f64| (!emulated).then(|| cpu / t.gpu.best);
        rows.push(Row {
            op,
            word_bits: spec.word_bits,
            n,
            limbs: top + 1,
            gpu_us: t.gpu.best,
            gpu_median_us: t.gpu.median,
            cpu1_us: t.cpu1.best,
            cpu1_median_us: t.cpu1.median,
            cpu_all_us: t.cpu_all.best,
            cpu_all_median_us: t.cpu_all.median,
            naive_us: None,
            naive_over_fused: None,
            speedup_1: speed(t.cpu1.best),
            speedup_all: speed(t.cpu_all.best),
            verified: true,
        });
        prog.inc();
    }
    // The naive baseline is timed after the fused rescale: fill in the ratio now.
    if let Some(nv) = naive {
        if let Some(r) = rows
            .iter_mut()
            .rev()
            .find(|r| r.op == "rescale" && r.n == n && r.word_bits == spec.word_bits)
        {
            r.naive_us = Some(nv.best);
            // The emulator's ratio says nothing about GPUs.
            r.naive_over_fused = (gpu.kind() != GpuKind::Emulator).then(|| nv.best / r.gpu_us);
        }
    }
    Ok(info)
}

/// The targets (set for an H100 or H200), on 64-bit words.
fn check_targets(rows: &[Row], emulated: bool, quick: bool) -> Vec<Target> {
    let specs: [(String, &str, u32, usize, f64, &'static str); 3] = [
        (
            "rescale (N, L) = (2^15, 15): GPU vs CPU one core".into(),
            "rescale",
            15,
            15,
            50.0,
            "x",
        ),
        (
            "forward NTT N = 2^16 x 30 limbs: GPU time".into(),
            "ntt",
            16,
            30,
            50.0,
            "us",
        ),
        (
            "multiply + relinearize N = 2^16, 30 limbs: GPU time".into(),
            "multiply+relin",
            16,
            30,
            2000.0,
            "us",
        ),
    ];
    specs
        .into_iter()
        .map(|(name, op, log_n, limbs, target, unit)| {
            let value = if emulated {
                None
            } else {
                rows.iter()
                    .find(|r| {
                        r.op == op && r.word_bits == 64 && r.n == 1 << log_n && r.limbs == limbs
                    })
                    .and_then(|r| {
                        if unit == "x" {
                            r.speedup_1
                        } else {
                            Some(r.gpu_us)
                        }
                    })
            };
            let unmeasured = if emulated {
                ": emulator"
            } else if quick {
                ": not in a --quick run"
            } else {
                ""
            };
            Target::judge(name, value, target, unit, unmeasured)
        })
        .collect()
}

/// Runs the benchmark on `gpu` (a CUDA device, or the emulator with tiny parameters).
pub fn run(gpu: &Gpu, opts: &GpuBenchOptions) -> Result<GpuReport> {
    let start = Instant::now();
    let emulated = gpu.kind() == GpuKind::Emulator;
    let specs = plan(opts, emulated);
    let prog = Progress::new(specs.len() as u64 * STEPS_PER_SET);
    let mut rows = Vec::new();
    let mut sets = Vec::new();
    for spec in &specs {
        let params = build_params(spec).with_context(|| {
            format!(
                "parameters N=2^{} {}-bit words x {} limbs",
                spec.log_n, spec.word_bits, spec.limbs
            )
        })?;
        let info = if spec.word_bits == 64 {
            bench_set::<u64>(gpu, spec, params, opts, &prog, &mut rows)
        } else {
            bench_set::<u32>(gpu, spec, params, opts, &prog, &mut rows)
        }
        .with_context(|| {
            format!(
                "benchmarking N=2^{} with {}-bit words",
                spec.log_n, spec.word_bits
            )
        })?;
        sets.push(info);
    }
    prog.finish();
    let info = gpu.info();
    let cc = info.compute_capability;
    let cores = heloom_pool::cores();
    let method = if emulated {
        format!(
            "GPU: one call per op on the host emulator (not a speed); CPU: wall clock, best of {} \
             samples of >= {:.1} ms, on one thread and on {cores}",
            opts.cpu_samples,
            opts.cpu_min_sample_us / 1000.0
        )
    } else {
        format!(
            "GPU: best of {} rounds (median alongside), each round >= {:.0} ms of calls back to \
             back, the stream drained before the clock stops; CPU: wall clock, best of {} samples \
             of >= {:.0} ms (median alongside), on one thread and on {cores}",
            opts.gpu_rounds,
            opts.gpu_min_round_us / 1000.0,
            opts.cpu_samples,
            opts.cpu_min_sample_us / 1000.0
        )
    };
    Ok(GpuReport {
        benchmark: "gpu",
        emulated,
        quick: opts.quick,
        gpu: GpuInfoOut {
            name: info.name.clone(),
            kind: if emulated { "emulator" } else { "cuda" },
            compute_capability: (!emulated).then(|| format!("{}.{}", cc.0, cc.1)),
            memory: info.total_memory,
            arch: info.arch.clone(),
            peak_memory: gpu.memory_stats().peak_live_bytes,
        },
        cpu: CpuInfoOut {
            model: cpu_model(),
            cores,
            backends: Backend::available().into_iter().map(|b| b.name()).collect(),
        },
        method,
        sets,
        targets: check_targets(&rows, emulated, opts.quick),
        rows,
        wall_s: start.elapsed().as_secs_f64(),
    })
}

fn fmt_x(x: Option<f64>) -> String {
    match x {
        Some(x) if x >= 100.0 => format!("{x:.0}x"),
        Some(x) => format!("{x:.1}x"),
        None => "-".into(),
    }
}

fn gib(bytes: usize) -> f64 {
    bytes as f64 / (1u64 << 30) as f64
}

/// Renders the report as a text table.
pub fn render(rep: &GpuReport) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let g = &rep.gpu;
    let gpu_line = match &g.compute_capability {
        Some(cc) => format!(
            "{} (compute capability {cc}, {:.1} GiB, kernels for {})",
            g.name,
            gib(g.memory),
            g.arch
        ),
        None => format!(
            "{} — the GPU kernels compiled for the host: a correctness smoke test, NOT a speed",
            g.name
        ),
    };
    let _ = writeln!(s, "heloom bench gpu — GPU: {gpu_line}");
    let _ = writeln!(
        s,
        "CPU: {} ({} cores; backends: {}); {:.0} s in all",
        rep.cpu.model,
        rep.cpu.cores,
        rep.cpu.backends.join(", "),
        rep.wall_s
    );
    let _ = writeln!(s, "{}", rep.method);
    let _ = writeln!(
        s,
        "Every GPU result was checked equal to the CPU's, word for word, before timing.\n"
    );
    let _ = writeln!(s, "Parameter sets (every op runs at the top level):");
    let _ = writeln!(
        s,
        "  {:>4} {:>5} {:>5} {} {:>6}",
        "word",
        "N",
        "limbs",
        ParamSummary::header(12),
        "scale"
    );
    for c in &rep.sets {
        let _ = writeln!(
            s,
            "  {:>4} {:>5} {:>5} {} {:>6}",
            c.word_bits,
            format!("2^{}", c.n.trailing_zeros()),
            c.limbs,
            c.params.cells(12, "none"),
            format!("2^{}", c.scale_bits)
        );
    }
    let cores = rep.cpu.cores;
    let all_hdr = format!("CPU {cores}c us");
    let xall_hdr = format!("x {cores} cores");
    let _ = writeln!(
        s,
        "\n{:<15} {:>4} {:>5} {:>5} {:>24} {:>12} {:>12} {:>9} {:>10} {:>11}",
        "op",
        "word",
        "N",
        "limbs",
        "GPU us (median)",
        "CPU 1c us",
        all_hdr,
        "x 1 core",
        xall_hdr,
        "naive/fused"
    );
    for r in &rep.rows {
        let gpu = if rep.emulated {
            "emulator (not a speed)".to_string()
        } else {
            format!("{} ({})", fmt_sig(r.gpu_us), fmt_sig(r.gpu_median_us))
        };
        let _ = writeln!(
            s,
            "{:<15} {:>4} {:>5} {:>5} {:>24} {:>12} {:>12} {:>9} {:>10} {:>11}",
            r.op,
            r.word_bits,
            format!("2^{}", r.n.trailing_zeros()),
            r.limbs,
            gpu,
            fmt_sig(r.cpu1_us),
            fmt_sig(r.cpu_all_us),
            fmt_x(r.speedup_1),
            fmt_x(r.speedup_all),
            if rep.emulated {
                "-".to_string()
            } else {
                r.naive_over_fused
                    .map(|x| format!("{x:.1}x"))
                    .unwrap_or_else(|| "-".into())
            }
        );
    }
    let _ = writeln!(
        s,
        "\nntt: forward NTT of one polynomial of every limb; multiply: tensor product (3 \
         polynomials, no relinearization);\nrescale-naive: the seed-003 GPU baseline (one block \
         per polynomial, global memory, emulated 64-bit products), against the same CPU rescale."
    );
    let _ = writeln!(s, "\nTargets (set for an H100 or H200; 64-bit words):");
    s.push_str(&crate::target::render(&rep.targets));
    s
}

/// A file-name-safe form of the GPU name: "NVIDIA H200" -> "nvidia-h200".
pub fn slug(name: &str) -> String {
    let mut out = String::new();
    for c in name.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    let out = out.trim_matches('-').to_string();
    if out.is_empty() {
        "gpu".into()
    } else {
        out
    }
}

/// Writes `gpu-<slug>.json`, `.txt` and `.svg` into `dir`; returns their paths.
pub fn save(rep: &GpuReport, dir: &Path) -> Result<Vec<PathBuf>> {
    let base = format!("gpu-{}", slug(&rep.gpu.name));
    let mut paths = save_json_and_text(rep, &render(rep), dir, &base)?;
    let svg = dir.join(format!("{base}.svg"));
    speedup_chart(rep, &svg).with_context(|| format!("drawing {}", svg.display()))?;
    paths.push(svg);
    Ok(paths)
}

/// Bar colours of the parameter sets, by position.
const SET_COLOURS: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
];

/// Draws the speedup over one CPU core of every op (groups) and parameter set (bars), on a log
/// axis. The emulator's times are not speeds: its chart says so and draws no bars.
pub fn speedup_chart(rep: &GpuReport, path: &Path) -> Result<()> {
    let root = svg_canvas(path, (1200, 650))?;
    if rep.emulated {
        root.draw(&Text::new(
            format!(
                "heloom bench gpu ran on the {}: a correctness smoke test; no GPU speeds to plot",
                rep.gpu.name
            ),
            (40, 300),
            ("sans-serif", 22).into_font(),
        ))
        .map_err(pe)?;
        root.present().map_err(pe)?;
        return Ok(());
    }
    // Series: one per (word, N) set, in report order; x = op index (bars side by side).
    let mut keys: Vec<(u32, usize, usize)> = Vec::new();
    for r in &rep.rows {
        if !keys.contains(&(r.word_bits, r.n, r.limbs)) {
            keys.push((r.word_bits, r.n, r.limbs));
        }
    }
    let values: Vec<f64> = rep.rows.iter().filter_map(|r| r.speedup_1).collect();
    let (lo, hi) = values
        .iter()
        .filter(|v| **v > 0.0 && v.is_finite())
        .fold((f64::INFINITY, 0.0f64), |(a, b), v| (a.min(*v), b.max(*v)));
    if !lo.is_finite() {
        return Err(anyhow!("no speedups to plot"));
    }
    // Headroom above the tallest bar for the legend: about a quarter of the log axis.
    let ymin = (lo / 2.0).min(0.5);
    let ymax = hi * (hi / ymin).powf(0.4).max(4.0);
    let nops = OPS.len();
    let title = format!(
        "GPU speedup over heloom's CPU on one core — {} vs {}",
        rep.gpu.name, rep.cpu.model
    );
    let mut chart = chart_builder(&root, title, 20, 15, (45, 70))
        .build_cartesian_2d(-0.5..(nops as f64 - 0.5), (ymin..ymax).log_scale())
        .map_err(pe)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(nops)
        .x_label_formatter(&|x: &f64| {
            let i = x.round();
            if (x - i).abs() < 1e-6 && i >= 0.0 && (i as usize) < nops {
                OPS[i as usize].to_string()
            } else {
                String::new()
            }
        })
        .y_label_formatter(&|y: &f64| {
            if *y >= 1.0 {
                format!("{y:.0}x")
            } else {
                format!("{y:.2}x")
            }
        })
        .y_desc("CPU one core time / GPU time (log)")
        .draw()
        .map_err(pe)?;
    let width = 0.8 / keys.len() as f64;
    for (k, &(wb, n, limbs)) in keys.iter().enumerate() {
        let colour = nth_colour(&SET_COLOURS, k, 0);
        let bars: Vec<Rectangle<(f64, f64)>> = rep
            .rows
            .iter()
            .filter(|r| r.word_bits == wb && r.n == n && r.limbs == limbs)
            .filter_map(|r| {
                let i = OPS.iter().position(|o| *o == r.op)? as f64;
                let x0 = i - 0.4 + k as f64 * width;
                let v = r.speedup_1.filter(|v| *v > 0.0)?;
                Some(Rectangle::new(
                    [(x0, ymin), (x0 + width * 0.9, v)],
                    colour.filled(),
                ))
            })
            .collect();
        chart
            .draw_series(bars)
            .map_err(pe)?
            .label(format!(
                "N=2^{}, {wb}-bit words, {limbs} limbs",
                n.trailing_zeros()
            ))
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 14, y + 5)], colour.filled()));
    }
    chart
        .draw_series(LineSeries::new(
            [(-0.5, 1.0), (nops as f64 - 0.5, 1.0)],
            BLACK.stroke_width(1),
        ))
        .map_err(pe)?
        .label("1x: CPU one core")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], BLACK.stroke_width(1)));
    draw_legend(&mut chart, SeriesLabelPosition::UpperRight)?;
    root.present().map_err(pe)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use heloom_ckks::security;

    fn row(op: &'static str, word_bits: u32, log_n: u32, limbs: usize, gpu: f64) -> Row {
        Row {
            op,
            word_bits,
            n: 1 << log_n,
            limbs,
            gpu_us: gpu,
            gpu_median_us: gpu,
            cpu1_us: 1000.0,
            cpu1_median_us: 1000.0,
            cpu_all_us: 200.0,
            cpu_all_median_us: 200.0,
            naive_us: None,
            naive_over_fused: None,
            speedup_1: Some(1000.0 / gpu),
            speedup_all: Some(200.0 / gpu),
            verified: true,
        }
    }

    fn report(rows: Vec<Row>, emulated: bool) -> GpuReport {
        GpuReport {
            benchmark: "gpu",
            emulated,
            quick: false,
            gpu: GpuInfoOut {
                name: "NVIDIA Test GPU".into(),
                kind: "cuda",
                compute_capability: Some("9.0".into()),
                memory: 1 << 30,
                arch: "compute_90".into(),
                peak_memory: 0,
            },
            cpu: CpuInfoOut {
                model: "test cpu".into(),
                cores: 2,
                backends: vec![],
            },
            method: String::new(),
            sets: vec![],
            targets: check_targets(&rows, emulated, false),
            rows,
            wall_s: 0.0,
        }
    }

    #[test]
    fn every_planned_set_builds_within_the_security_bound() -> Result<()> {
        for emulated in [false, true] {
            for spec in plan(&GpuBenchOptions::new(false, emulated), emulated) {
                let p = build_params(&spec)?;
                assert_eq!(p.moduli().len(), spec.limbs, "{spec:?}");
                if spec.secure {
                    let bound = security::max_log_qp(p.n(), SecurityLevel::Bits128)
                        .ok_or_else(|| anyhow!("no bound"))?;
                    assert!(p.log_qp() <= bound as f64 + 0.5, "{spec:?}");
                }
            }
        }
        // The 32-bit sets keep log Q of the 64-bit ones within one 28-bit prime.
        for (log_n, limbs) in SETS64 {
            let s = set32(log_n, limbs);
            let q32 = 30 + 28 * (s.limbs as i64 - 1);
            let q64 = 50 + 40 * (limbs as i64 - 1);
            assert!((q32 - q64).abs() <= 14, "{s:?}");
        }
        Ok(())
    }

    #[test]
    fn targets_are_judged_on_the_right_rows() {
        let rows = vec![
            row("rescale", 64, 15, 15, 10.0),
            row("ntt", 64, 16, 30, 60.0),
            row("multiply+relin", 64, 16, 30, 1500.0),
            row("ntt", 32, 16, 43, 10.0),
        ];
        let t = check_targets(&rows, false, false);
        assert_eq!(t.len(), 3);
        assert_eq!(t[0].met, Some(true)); // 100x >= 50x
        assert_eq!(t[1].met, Some(false)); // 60 us > 50 us (the 32-bit row does not count)
        assert_eq!(t[2].met, Some(true));
        let e = check_targets(&rows, true, false);
        assert!(e
            .iter()
            .all(|t| t.met.is_none() && t.status.contains("emulator")));
        let q = check_targets(&rows[..1], false, true);
        assert_eq!(q[1].status, "not measured: not in a --quick run");
    }

    #[test]
    fn slugs_are_file_names() {
        assert_eq!(slug("NVIDIA H200"), "nvidia-h200");
        assert_eq!(slug("host emulator"), "host-emulator");
        assert_eq!(slug("  A100-SXM4 (80GB) "), "a100-sxm4-80gb");
        assert_eq!(slug("???"), "gpu");
    }

    #[test]
    fn report_renders_and_charts() -> Result<()> {
        let mut rows = Vec::new();
        for (wb, log_n, limbs) in [(64, 14, 8), (32, 14, 12)] {
            for (i, op) in OPS.iter().enumerate() {
                if *op == "rescale-naive" && wb == 32 {
                    continue;
                }
                rows.push(row(op, wb, log_n, limbs, 5.0 * (i + 1) as f64));
            }
        }
        let dir = std::env::temp_dir().join(format!("heloom-gpu-chart-{}", std::process::id()));
        let rep = report(rows.clone(), false);
        let text = render(&rep);
        assert!(text.contains("compute capability 9.0") && text.contains("multiply+relin"));
        let files = save(&rep, &dir)?;
        let svg = std::fs::read_to_string(&files[2])?;
        assert!(svg.contains("<svg") && svg.contains("rect") && svg.contains("2^14"));
        let emu = report(rows, true);
        assert!(render(&emu).contains("emulator (not a speed)"));
        speedup_chart(&emu, &files[2])?;
        assert!(std::fs::read_to_string(&files[2])?.contains("no GPU speeds"));
        std::fs::remove_dir_all(&dir)?;
        Ok(())
    }
}
