//! `heloom bench ckks`: CKKS operations (encode, encrypt, decrypt, add, multiply, relinearize,
//! rescale, rotate, and multiply + relinearize + rescale) on one thread for N = 2^13..2^16, on
//! parameter sets shaped like Microsoft SEAL's, optionally against SEAL itself (through
//! TenSEAL's `sealapi`, in a Python subprocess of the same run), with the issue's targets
//! checked as same-run ratios.
//!
//! Parameter sets, per N (log QP against the HE standard's 128-bit bound; 2^16: OpenFHE's):
//!
//! | N    | 64-bit words, primes <= 50 bits (IFMA)  | log QP       | 32-bit words                  |
//! |------|-----------------------------------------|--------------|-------------------------------|
//! | 2^13 | q = 48,40,40,40 + special 50            | 218 <= 218   | 30 + 29x5, special 30         |
//! | 2^14 | q = 50,48x7 + special 50                | 436 <= 438   | 30 + 29x12, special 30        |
//! | 2^15 | q = 50x16 + special 50                  | 850 <= 881   | 30 + 29x27, special 30        |
//! | 2^16 | q = 50x32 + special 50                  | 1650 <= 1747 | 30 + 29x54, special 30        |
//!
//! plus, at N = 2^14, a 60-bit-prime variant q = 60,45x7 + special 60 (log QP 435, AVX-512).
//! SEAL always has one special prime (dnum = number of ciphertext primes); heloom runs each set
//! twice: with exactly that shape (`special_count(1)`) and with its own choice of special
//! primes within the same security bound ("auto"; measured only when it differs). The 32-bit
//! sets keep log Q within 15 bits of the 64-bit set with about twice as many primes and are
//! compared with SEAL's 64-bit set of the same N.

use std::collections::HashMap;
use std::hint::black_box;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Instant;

use crate::progress::Progress;
use crate::report::ParamSummary;
use anyhow::{bail, Result};
use heloom_ckks::{
    keygen, security, CkksParameters, Context, Decryptor, Encryptor, Evaluator, SecurityLevel,
};
use heloom_math::Word;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;
use serde::{Deserialize, Serialize};

use crate::target::Target;
use crate::timing::{clock_name, fmt_sig, median_cpu_us};

/// The operations measured, in report order.
pub const OPS: [&str; 9] = [
    "encode",
    "encrypt",
    "decrypt",
    "add",
    "multiply",
    "relinearize",
    "rescale",
    "rotate",
    "mul_relin_rescale",
];

/// An absolute error above which a result counts as wrong rather than imprecise.
const WRONG: f64 = 0.25;

/// The comparison script, embedded so that the binary runs it from any directory.
const TENSEAL_SCRIPT: &str = include_str!("../../../bench/tenseal_ckks.py");

/// Options of the CKKS benchmark.
#[derive(Debug, Clone)]
pub struct CkksBenchOptions {
    /// log2 of the ring degrees to measure (13..=16).
    pub log_ns: Vec<u32>,
    /// Word sizes to measure (32 and/or 64).
    pub word_bits: Vec<u32>,
    /// Timing samples per measurement (the median is reported).
    pub samples: usize,
    /// Minimum duration of one sample in microseconds (fast calls are batched).
    pub min_sample_us: f64,
    /// Python interpreter for the SEAL comparison; `None` = no comparison.
    pub vs_tenseal: Option<PathBuf>,
}

impl Default for CkksBenchOptions {
    fn default() -> Self {
        Self {
            log_ns: vec![13, 14, 15, 16],
            word_bits: vec![64, 32],
            samples: 9,
            min_sample_us: 2000.0,
            vs_tenseal: None,
        }
    }
}

/// The default Python interpreter: `.venv/bin/python` when it exists, else `python3`.
pub fn default_python() -> PathBuf {
    let venv = PathBuf::from(".venv/bin/python");
    if venv.exists() {
        venv
    } else {
        PathBuf::from("python3")
    }
}

/// A family of coefficient moduli at one N: ciphertext prime sizes, one special prime size,
/// the scale.
#[derive(Debug, Clone)]
struct Family {
    /// "w64-p50" (64-bit words, primes <= 50 bits), "w64-p60" (64-bit words, 60-bit outer
    /// primes) or "w32" (32-bit words).
    id: &'static str,
    word_bits: u32,
    ct_bits: Vec<u32>,
    special_bits: u32,
    scale_bits: u32,
    /// The SEAL set it is compared with.
    seal_family: &'static str,
    note: Option<String>,
}

/// The 64-bit families at `log_n` (SEAL is run on these).
fn families64(log_n: u32) -> Vec<Family> {
    let f = |seal_family, ct_bits: Vec<u32>, special_bits, scale_bits| Family {
        id: if seal_family == "p50" {
            "w64-p50"
        } else {
            "w64-p60"
        },
        word_bits: 64,
        ct_bits,
        special_bits,
        scale_bits,
        seal_family,
        note: None,
    };
    let rep = |first: u32, rest: u32, count: usize| {
        std::iter::once(first)
            .chain(std::iter::repeat_n(rest, count))
            .collect::<Vec<u32>>()
    };
    match log_n {
        13 => vec![f("p50", rep(48, 40, 3), 50, 40)],
        14 => vec![
            f("p50", rep(50, 48, 7), 50, 48),
            f("p60", rep(60, 45, 7), 60, 45),
        ],
        15 => vec![f("p50", rep(50, 50, 15), 50, 50)],
        _ => vec![f("p50", rep(50, 50, 31), 50, 50)],
    }
}

/// The 32-bit family at `log_n`: log Q within 15 bits of the 64-bit <= 50-bit set, with 29-bit
/// scaling primes after a 30-bit `q_0`, one 30-bit special prime; fewer primes when log QP
/// would exceed the security bound (said in the note).
fn family32(log_n: u32, bound: u32) -> Family {
    let base = &families64(log_n)[0];
    let log_q64: u32 = base.ct_bits.iter().sum();
    let mut k = ((log_q64 as f64 - 30.0) / 29.0).round().max(1.0) as usize;
    let wanted = k;
    while k > 1 && 30 + 29 * k as u32 + 30 > bound {
        k -= 1;
    }
    let note = (k != wanted).then(|| {
        format!(
            "log QP of {} 29-bit primes exceeds the {bound}-bit bound; reduced to {k}",
            wanted
        )
    });
    Family {
        id: "w32",
        word_bits: 32,
        ct_bits: std::iter::once(30)
            .chain(std::iter::repeat_n(29, k))
            .collect(),
        special_bits: 30,
        scale_bits: 29,
        seal_family: "p50",
        note,
    }
}

/// One heloom parameter set as measured.
#[derive(Debug, Clone, Serialize)]
pub struct ConfigInfo {
    /// Identifier, e.g. `n14-w64-p50-seal`, `n14-w32-auto`.
    pub id: String,
    /// Ring degree.
    pub n: usize,
    /// log2 of the ring degree.
    pub log_n: u32,
    /// Word size in bits.
    pub word_bits: u32,
    /// Prime family: `w64-p50`, `w64-p60` or `w32`.
    pub family: String,
    /// `seal` (one special prime, dnum = number of ciphertext primes, as SEAL) or `auto`
    /// (heloom's own choice within the security bound).
    pub shape: String,
    /// Requested ciphertext prime sizes `q_0 .. q_L`.
    pub prime_bits: Vec<u32>,
    /// Requested special prime size.
    pub special_bits: u32,
    /// Ciphertext primes.
    pub moduli: Vec<u64>,
    /// Special primes.
    pub special: Vec<u64>,
    /// log Q, log QP, its 128-bit bound, dnum and alpha.
    #[serde(flatten)]
    pub params: ParamSummary,
    /// SIMD backend the kernels run on.
    pub backend: String,
    /// Default scale, log2.
    pub scale_bits: f64,
    /// The SEAL set it is compared with (`None` when the comparison is off).
    pub seal_set: Option<String>,
    /// When `auto` picked exactly the `seal` shape: the config whose numbers apply.
    pub same_as: Option<String>,
    /// Anything worth saying about the set.
    pub note: Option<String>,
}

/// One heloom timing.
#[derive(Debug, Clone, Serialize)]
pub struct Measurement {
    /// Config id.
    pub config: String,
    /// Operation (see [`OPS`]).
    pub op: &'static str,
    /// Ring degree.
    pub n: usize,
    /// Word size in bits.
    pub word_bits: u32,
    /// Median microseconds per call.
    pub us: f64,
}

/// Precision of one multiply + relinearize + rescale on uniform inputs in [-1, 1], against the
/// product in double precision.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Precision {
    /// Mean absolute error over the slots.
    pub mean_abs_error: f64,
    /// Largest absolute error over the slots.
    pub max_abs_error: f64,
    /// `-log2(mean_abs_error)`.
    pub mean_bits: Option<f64>,
    /// `-log2(max_abs_error)`.
    pub worst_bits: Option<f64>,
    /// Largest absolute error of a rotation by one slot of a fresh encryption.
    #[serde(default)]
    pub rotate_max_abs_error: Option<f64>,
}

impl Precision {
    fn from_errors(errs: &[f64], rotate_max_abs_error: f64) -> Self {
        let mean = errs.iter().sum::<f64>() / errs.len().max(1) as f64;
        let max = errs.iter().copied().fold(0.0, f64::max);
        let bits = |e: f64| (e > 0.0).then(|| -e.log2());
        Self {
            mean_abs_error: mean,
            max_abs_error: max,
            mean_bits: bits(mean),
            worst_bits: bits(max),
            rotate_max_abs_error: Some(rotate_max_abs_error),
        }
    }
}

/// Precision of one heloom config.
#[derive(Debug, Clone, Serialize)]
pub struct ConfigPrecision {
    /// Config id.
    pub config: String,
    /// The errors.
    #[serde(flatten)]
    pub precision: Precision,
}

/// One SEAL parameter set, as reported by the script.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SealSet {
    /// Set id, e.g. `n14-p50`.
    pub id: String,
    /// Ring degree.
    pub n: usize,
    /// log2 of the ring degree.
    pub log_n: u32,
    /// Coefficient-modulus bit sizes (the last is SEAL's special prime).
    pub bits: Vec<u32>,
    /// Sum of the bit sizes.
    pub log_qp: u32,
    /// Decomposition number (number of ciphertext primes).
    pub dnum: usize,
    /// Special primes (always 1 in SEAL).
    pub special_primes: usize,
    /// Security level SEAL was told to check.
    pub sec_level: String,
    /// Precision of multiply + relinearize + rescale.
    pub precision: Precision,
}

/// One SEAL timing.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SealMeasurement {
    /// Set id.
    pub set: String,
    /// Operation.
    pub op: String,
    /// Ring degree.
    pub n: usize,
    /// Median microseconds per call, Python/C++ conversion of the value vector subtracted.
    pub us: f64,
    /// Median microseconds per call as measured from Python.
    pub us_raw: f64,
    /// The conversion overhead subtracted (encode, decode only).
    pub binding_overhead_us: f64,
}

/// What `bench/tenseal_ckks.py` prints.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SealReport {
    /// Library description.
    pub library: String,
    /// TenSEAL version.
    pub tenseal_version: String,
    /// SEAL version (from its serialization header).
    pub seal_version: String,
    /// Python version.
    pub python: String,
    /// Threads SEAL ran on.
    pub threads: usize,
    /// Clock of the timings (`thread_cpu` or `wall`).
    #[serde(default)]
    pub clock: String,
    /// Samples per timing.
    pub samples: usize,
    /// Parameter sets.
    pub sets: Vec<SealSet>,
    /// Timings.
    pub results: Vec<SealMeasurement>,
    /// Sets that could not be measured, and why.
    #[serde(default)]
    pub errors: Vec<String>,
}

/// The outcome of the SEAL comparison.
#[derive(Debug, Clone, Serialize, Default)]
pub struct SealOutcome {
    /// Whether `--vs tenseal` was given.
    pub requested: bool,
    /// Python interpreter used.
    pub python: Option<String>,
    /// Why there are no SEAL numbers, when there are none.
    pub error: Option<String>,
    /// The script's report.
    pub report: Option<SealReport>,
}

/// heloom against SEAL for one op, N and heloom config.
#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    /// Operation.
    pub op: &'static str,
    /// Ring degree.
    pub n: usize,
    /// heloom config id.
    pub config: String,
    /// Word size of the heloom config.
    pub word_bits: u32,
    /// SEAL set id.
    pub seal_set: String,
    /// heloom median, us.
    pub heloom_us: f64,
    /// SEAL median, us.
    pub seal_us: f64,
    /// `seal_us / heloom_us`: how many times faster heloom is.
    pub seal_over_heloom: f64,
    /// The issue's target for this op (1x: ahead of SEAL; 4x for relinearize and rotate).
    pub target: f64,
    /// Whether the target is met.
    pub pass: bool,
}

pub use crate::timing::Machine;

/// The whole report, as printed with `--json`.
#[derive(Debug, Clone, Serialize)]
pub struct CkksReport {
    /// Benchmark name.
    pub benchmark: &'static str,
    /// The machine.
    pub machine: Machine,
    /// Threads every measurement ran on.
    pub threads: usize,
    /// Clock of every timing (heloom and SEAL): `thread_cpu` (CPU time of the measuring
    /// thread, robust to other processes on a shared machine) or `wall`.
    pub clock: &'static str,
    /// Samples per timing (median reported).
    pub samples: usize,
    /// Minimum length of one sample, us.
    pub min_sample_us: f64,
    /// heloom parameter sets.
    pub configs: Vec<ConfigInfo>,
    /// heloom timings.
    pub results: Vec<Measurement>,
    /// heloom precision per config.
    pub precision: Vec<ConfigPrecision>,
    /// SEAL, when compared.
    pub seal: SealOutcome,
    /// Every heloom timing that has a SEAL counterpart.
    pub comparisons: Vec<Comparison>,
    /// The issue's targets on the apples-to-apples configs (64-bit words, primes <= 50 bits,
    /// SEAL's shape).
    pub targets: Vec<Target>,
    /// Configs or ops that could not be measured, and why.
    pub skipped: Vec<String>,
    /// Wall time of the whole run, seconds.
    pub wall_s: f64,
}

/// A planned heloom measurement.
struct Plan {
    info: ConfigInfo,
    params: CkksParameters,
}

fn build_params(fam: &Family, n: usize, seal_shape: bool) -> Result<CkksParameters> {
    let mut b = CkksParameters::builder(n)
        .word_bits(fam.word_bits)
        .scale_bits(fam.scale_bits)
        .prime_bits(fam.ct_bits.clone())
        .special_bits(fam.special_bits)
        .security(SecurityLevel::Bits128);
    if seal_shape {
        b = b.special_count(1);
    }
    Ok(b.build()?)
}

fn config_info(fam: &Family, log_n: u32, shape: &str, p: &CkksParameters, vs: bool) -> ConfigInfo {
    let n = 1usize << log_n;
    ConfigInfo {
        id: format!("n{log_n}-{}-{shape}", fam.id),
        n,
        log_n,
        word_bits: fam.word_bits,
        family: fam.id.to_string(),
        shape: shape.to_string(),
        prime_bits: fam.ct_bits.clone(),
        special_bits: fam.special_bits,
        moduli: p.moduli().to_vec(),
        special: p.special_moduli().to_vec(),
        params: ParamSummary::of(p, SecurityLevel::Bits128),
        backend: p.auto_backend().name().to_string(),
        scale_bits: p.scale().log2(),
        seal_set: vs.then(|| format!("n{log_n}-{}", fam.seal_family)),
        same_as: None,
        note: fam.note.clone(),
    }
}

/// Plans every heloom config; sets that cannot be built are reported in `skipped`.
fn plan(opts: &CkksBenchOptions, skipped: &mut Vec<String>) -> Vec<Plan> {
    let vs = opts.vs_tenseal.is_some();
    let mut out = Vec::new();
    for &log_n in &opts.log_ns {
        let n = 1usize << log_n;
        let bound = security::max_log_qp(n, SecurityLevel::Bits128).unwrap_or(0);
        let mut fams = Vec::new();
        if opts.word_bits.contains(&64) {
            fams.extend(families64(log_n));
        }
        if opts.word_bits.contains(&32) {
            fams.push(family32(log_n, bound));
        }
        for fam in fams {
            let seal = match build_params(&fam, n, true) {
                Ok(p) => {
                    let info = config_info(&fam, log_n, "seal", &p, vs);
                    out.push(Plan {
                        info: info.clone(),
                        params: p,
                    });
                    Some(info)
                }
                Err(e) => {
                    skipped.push(format!(
                        "N=2^{log_n} {}-bit {} (SEAL shape): {e:#}",
                        fam.word_bits, fam.id
                    ));
                    None
                }
            };
            match build_params(&fam, n, false) {
                Ok(p) => {
                    let mut info = config_info(&fam, log_n, "auto", &p, vs);
                    if let Some(s) = &seal {
                        if s.moduli == info.moduli
                            && s.special == info.special
                            && s.params.dnum == info.params.dnum
                        {
                            info.same_as = Some(s.id.clone());
                        }
                    }
                    out.push(Plan { info, params: p });
                }
                Err(e) => skipped.push(format!(
                    "N=2^{log_n} {}-bit {} (heloom's choice): {e:#}",
                    fam.word_bits, fam.id
                )),
            }
        }
    }
    out
}

fn random_values(seed: u64, len: usize) -> Vec<f64> {
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    (0..len).map(|_| rng.gen_range(-1.0..=1.0)).collect()
}

/// Measures every op on one config. `progress` is told before each op.
fn measure<W: Word>(
    info: &ConfigInfo,
    params: CkksParameters,
    opts: &CkksBenchOptions,
    prog: &Progress,
    out: &mut Vec<Measurement>,
) -> Result<Precision> {
    let label = format!("heloom N=2^{} {}", info.log_n, info.id);
    prog.step(&format!("{label}: keygen"));
    let ctx = Context::<W>::new(params)?;
    let keys = keygen(&ctx, &[1], false)?;
    let enc = Encryptor::new(&ctx);
    let dec = Decryptor::new(&ctx, &keys.secret_key)?;
    let pk = keys.public_key;
    let ev = Evaluator::new(&ctx, Arc::new(keys.evaluation_keys))?;
    prog.inc();

    let slots = ctx.params().slots();
    let top = ctx.max_level();
    let scale = ctx.params().scale();
    let a = random_values(2 * info.n as u64 + info.word_bits as u64, slots);
    let b = random_values(2 * info.n as u64 + info.word_bits as u64 + 1, slots);
    let pa = ctx.encode_at(&a, top, scale)?;
    let pb = ctx.encode_at(&b, top, scale)?;
    let ca = enc.encrypt_plaintext(&pa, &pk)?;
    let cb = enc.encrypt_plaintext(&pb, &pk)?;
    let c3 = ev.multiply(&ca, &cb)?;
    let c2 = ev.relinearize(&c3)?;

    // Results first: timing wrong answers would mean nothing.
    let r = ev.multiply_relin_rescale(&ca, &cb)?;
    let got = dec.decrypt(&r)?;
    let errs: Vec<f64> = got
        .iter()
        .zip(a.iter().zip(&b))
        .map(|(g, (x, y))| (g - x * y).abs())
        .collect();
    let rot = dec.decrypt(&ev.rotate(&ca, 1)?)?;
    let rot_err = (0..slots)
        .map(|i| (rot[i] - a[(i + 1) % slots]).abs())
        .fold(0.0, f64::max);
    let precision = Precision::from_errors(&errs, rot_err);
    // Products and rotations of values in [-1, 1] off by more than this are wrong, not
    // imprecise (the 32-bit sets at scale 2^29 legitimately reach errors around 2^-7).
    if !(precision.max_abs_error < WRONG && rot_err < WRONG) {
        bail!(
            "wrong results: multiply+relinearize+rescale max error {:.3e}, rotate-by-1 max error {rot_err:.3e}",
            precision.max_abs_error
        );
    }

    let t = |f: &mut dyn FnMut()| median_cpu_us(opts.samples, opts.min_sample_us, f);
    let mut push = |op: &'static str, us: f64| {
        out.push(Measurement {
            config: info.id.clone(),
            op,
            n: info.n,
            word_bits: info.word_bits,
            us,
        });
        prog.inc();
    };
    for op in OPS {
        prog.step(&format!("{label}: {op}"));
        let us = match op {
            "encode" => t(&mut || {
                black_box(ctx.encode_at(black_box(&a), top, scale).ok());
            }),
            "encrypt" => t(&mut || {
                black_box(enc.encrypt_plaintext(black_box(&pa), &pk).ok());
            }),
            "decrypt" => t(&mut || {
                black_box(dec.decrypt(black_box(&ca)).ok());
            }),
            "add" => t(&mut || {
                black_box(ev.add(black_box(&ca), black_box(&cb)).ok());
            }),
            "multiply" => t(&mut || {
                black_box(ev.multiply(black_box(&ca), black_box(&cb)).ok());
            }),
            "relinearize" => t(&mut || {
                black_box(ev.relinearize(black_box(&c3)).ok());
            }),
            "rescale" => t(&mut || {
                black_box(ev.rescale(black_box(&c2)).ok());
            }),
            "rotate" => t(&mut || {
                black_box(ev.rotate(black_box(&ca), 1).ok());
            }),
            _ => t(&mut || {
                black_box(
                    ev.multiply_relin_rescale(black_box(&ca), black_box(&cb))
                        .ok(),
                );
            }),
        };
        push(op, us);
    }
    Ok(precision)
}

/// SEAL sets for the planned N: every 64-bit family (the 32-bit configs compare with `p50`).
fn seal_sets(opts: &CkksBenchOptions) -> Vec<(String, u32, Vec<u32>, u32)> {
    let mut v = Vec::new();
    for &log_n in &opts.log_ns {
        for fam in families64(log_n) {
            if fam.seal_family != "p50" && !opts.word_bits.contains(&64) {
                continue;
            }
            let mut bits = fam.ct_bits.clone();
            bits.push(fam.special_bits);
            v.push((
                format!("n{log_n}-{}", fam.seal_family),
                log_n,
                bits,
                fam.scale_bits,
            ));
        }
    }
    v
}

/// Runs `bench/tenseal_ckks.py` (embedded) with `python`; progress lines move the bar.
fn run_seal(
    python: &PathBuf,
    sets: &[(String, u32, Vec<u32>, u32)],
    opts: &CkksBenchOptions,
    prog: &Progress,
) -> std::result::Result<SealReport, String> {
    let spec: Vec<serde_json::Value> = sets
        .iter()
        .map(|(id, log_n, bits, scale)| {
            serde_json::json!({"id": id, "log_n": log_n, "bits": bits, "scale_bits": scale})
        })
        .collect();
    let spec = serde_json::to_string(&spec).map_err(|e| e.to_string())?;
    let mut child = Command::new(python)
        .arg("-")
        .arg("--sets")
        .arg(&spec)
        .arg("--samples")
        .arg(opts.samples.to_string())
        .arg("--min-sample-us")
        .arg(opts.min_sample_us.to_string())
        .arg("--clock")
        .arg(clock_name())
        .env("OMP_NUM_THREADS", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| {
            format!(
                "could not start {}: {e}. Install Python 3 with TenSEAL (`pip install tenseal numpy`) or pass --python PATH",
                python.display()
            )
        })?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(TENSEAL_SCRIPT.as_bytes())
            .map_err(|e| format!("could not send the script to {}: {e}", python.display()))?;
    }
    let stdout = child.stdout.take();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        if let Some(mut o) = stdout {
            let _ = o.read_to_string(&mut s);
        }
        s
    });
    let mut errors = Vec::new();
    if let Some(stderr) = child.stderr.take() {
        for line in BufReader::new(stderr).lines().map_while(|l| l.ok()) {
            if let Some(msg) = line.strip_prefix("progress: ") {
                prog.step(msg);
                prog.inc();
            } else {
                errors.push(line);
            }
        }
    }
    let status = child.wait().map_err(|e| e.to_string())?;
    let stdout = reader.join().unwrap_or_default();
    let err_text = errors.join("\n");
    match status.code() {
        Some(0) => serde_json::from_str(stdout.trim())
            .map_err(|e| format!("could not read the SEAL script's output: {e}\n{err_text}")),
        Some(3) => Err(format!(
            "TenSEAL is not available to {}: {}.\nInstall it with `pip install tenseal numpy` (for \
             example `python3 -m venv .venv && .venv/bin/pip install tenseal numpy`; \
             .venv/bin/python is used by default), or pass --python PATH to an interpreter that \
             has it.",
            python.display(),
            err_text.trim()
        )),
        _ => Err(format!(
            "the SEAL script failed ({status}) under {}:\n{}",
            python.display(),
            err_text.trim()
        )),
    }
}

fn target_for(op: &str) -> f64 {
    if op == "relinearize" || op == "rotate" {
        4.0
    } else {
        1.0
    }
}

/// Runs the benchmark.
pub fn run(opts: &CkksBenchOptions) -> Result<CkksReport> {
    let started = Instant::now();
    let machine = crate::timing::Machine::now();
    let mut skipped = Vec::new();
    let plans = plan(opts, &mut skipped);
    let sets = if opts.vs_tenseal.is_some() {
        seal_sets(opts)
    } else {
        vec![]
    };
    let to_measure = plans.iter().filter(|p| p.info.same_as.is_none()).count();
    let prog = Progress::new((to_measure * (OPS.len() + 1) + sets.len() * 9) as u64);

    let mut results = Vec::new();
    let mut precision = Vec::new();
    let mut seal = SealOutcome {
        requested: opts.vs_tenseal.is_some(),
        python: opts.vs_tenseal.as_ref().map(|p| p.display().to_string()),
        ..Default::default()
    };
    // One N at a time, heloom then SEAL, so that both see the machine in the same state.
    for &log_n in &opts.log_ns {
        for p in plans
            .iter()
            .filter(|p| p.info.log_n == log_n && p.info.same_as.is_none())
        {
            let params = p.params.clone();
            let r = if p.info.word_bits == 64 {
                measure::<u64>(&p.info, params, opts, &prog, &mut results)
            } else {
                measure::<u32>(&p.info, params, opts, &prog, &mut results)
            };
            match r {
                Ok(prec) => precision.push(ConfigPrecision {
                    config: p.info.id.clone(),
                    precision: prec,
                }),
                Err(e) => {
                    let msg = format!("{}: {e:#}", p.info.id);
                    prog.println(&format!("heloom: skipping {msg}"));
                    skipped.push(msg);
                    results.retain(|m| m.config != p.info.id);
                }
            }
        }
        let Some(python) = &opts.vs_tenseal else {
            continue;
        };
        if seal.error.is_some() {
            continue;
        }
        let these: Vec<_> = sets.iter().filter(|s| s.1 == log_n).cloned().collect();
        match run_seal(python, &these, opts, &prog) {
            Ok(r) => {
                skipped.extend(r.errors.iter().map(|e| format!("SEAL: {e}")));
                match &mut seal.report {
                    None => seal.report = Some(r),
                    Some(acc) => {
                        acc.sets.extend(r.sets);
                        acc.results.extend(r.results);
                        acc.errors.extend(r.errors);
                    }
                }
            }
            Err(e) => {
                prog.println(&format!(
                    "SEAL comparison skipped: {e}\nContinuing with heloom only."
                ));
                seal.error = Some(e);
            }
        }
    }
    prog.finish();

    let configs: Vec<ConfigInfo> = plans.into_iter().map(|p| p.info).collect();
    let comparisons = compare(&configs, &results, seal.report.as_ref());
    let targets = comparisons
        .iter()
        .filter(|c| primary(&configs, &c.config))
        .map(|c| {
            let name = format!(
                "{} N=2^{}: SEAL / heloom ({}){}",
                c.op,
                c.n.trailing_zeros(),
                c.config,
                if c.target > 1.0 {
                    ""
                } else {
                    " (heloom ahead)"
                }
            );
            Target::measured(name, c.seal_over_heloom, c.target, "x")
        })
        .collect();
    Ok(CkksReport {
        benchmark: "ckks",
        machine: machine.finish(),
        threads: 1,
        clock: clock_name(),
        samples: opts.samples,
        min_sample_us: opts.min_sample_us,
        configs,
        results,
        precision,
        seal,
        comparisons,
        targets,
        skipped,
        wall_s: started.elapsed().as_secs_f64(),
    })
}

/// The apples-to-apples config: 64-bit words, primes <= 50 bits, SEAL's shape.
fn primary(configs: &[ConfigInfo], id: &str) -> bool {
    configs
        .iter()
        .any(|c| c.id == id && c.family == "w64-p50" && c.shape == "seal")
}

fn compare(
    configs: &[ConfigInfo],
    results: &[Measurement],
    seal: Option<&SealReport>,
) -> Vec<Comparison> {
    let Some(seal) = seal else {
        return vec![];
    };
    let seal_us: HashMap<(&str, &str), f64> = seal
        .results
        .iter()
        .map(|m| ((m.set.as_str(), m.op.as_str()), m.us))
        .collect();
    let mut out = Vec::new();
    for m in results {
        let Some(cfg) = configs.iter().find(|c| c.id == m.config) else {
            continue;
        };
        let Some(set) = &cfg.seal_set else { continue };
        if let Some(&s) = seal_us.get(&(set.as_str(), m.op)) {
            let ratio = s / m.us;
            let target = target_for(m.op);
            out.push(Comparison {
                op: m.op,
                n: m.n,
                config: m.config.clone(),
                word_bits: m.word_bits,
                seal_set: set.clone(),
                heloom_us: m.us,
                seal_us: s,
                seal_over_heloom: ratio,
                target,
                pass: ratio >= target,
            });
        }
    }
    out
}

/// `50,48x7`: prime sizes with runs compressed.
fn bits_summary(bits: &[u32]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < bits.len() {
        let mut j = i;
        while j + 1 < bits.len() && bits[j + 1] == bits[i] {
            j += 1;
        }
        let run = j - i + 1;
        parts.push(if run > 1 {
            format!("{}x{run}", bits[i])
        } else {
            bits[i].to_string()
        });
        i = j + 1;
    }
    parts.join(",")
}

/// Renders the report as text tables.
pub fn render(rep: &CkksReport) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let m = &rep.machine;
    let load = |l: Option<[f64; 3]>| {
        l.map(|l| format!("{:.2}", l[0]))
            .unwrap_or_else(|| "?".into())
    };
    let _ = writeln!(
        s,
        "heloom bench ckks — {} ({} cores; backends: {}), one thread, median of {} samples ({} clock)\n\
         load average {} at start, {} at end; {:.0} s in all",
        m.model,
        m.cores,
        m.backends.join(", "),
        rep.samples,
        if rep.clock == "thread_cpu" { "thread CPU-time" } else { "wall" },
        load(m.load_average_start),
        load(m.load_average_end),
        rep.wall_s
    );
    if let Some(r) = &rep.seal.report {
        let _ = writeln!(
            s,
            "SEAL: Microsoft SEAL {} through TenSEAL {} sealapi (Python {}), one thread, same run",
            r.seal_version, r.tenseal_version, r.python
        );
    } else if let Some(e) = &rep.seal.error {
        let _ = writeln!(s, "SEAL: not measured: {e}");
    }

    let _ = writeln!(
        s,
        "\nParameter sets (q: ciphertext prime sizes in bits; sp: special primes; log QP against the 128-bit bound):"
    );
    let _ = writeln!(
        s,
        "  {:<18} {:>5} {:>4} {:<12} {:<14} {:<8} {} {:>6}",
        "config",
        "N",
        "word",
        "backend",
        "q bits",
        "sp bits",
        ParamSummary::header(13),
        "scale"
    );
    for c in &rep.configs {
        let sp: Vec<u32> = c.special.iter().map(|q| 64 - q.leading_zeros()).collect();
        let _ = writeln!(
            s,
            "  {:<18} {:>5} {:>4} {:<12} {:<14} {:<8} {} {:>6}{}",
            c.id,
            format!("2^{}", c.log_n),
            c.word_bits,
            c.backend,
            bits_summary(&c.prime_bits),
            bits_summary(&sp),
            c.params.cells(13, "-"),
            format!("2^{:.0}", c.scale_bits),
            match (&c.same_as, &c.note) {
                (Some(x), _) => format!("  (heloom's own choice = {x}: not measured twice)"),
                (None, Some(n)) => format!("  ({n})"),
                _ => String::new(),
            }
        );
    }
    if let Some(r) = &rep.seal.report {
        for set in &r.sets {
            let _ = writeln!(
                s,
                "  {:<18} {:>5} {:>4} {:<12} {:<14} {:<8} {:>7} {:>13} {:>5} {:>5}   (SEAL; security check: {})",
                format!("SEAL {}", set.id),
                format!("2^{}", set.log_n),
                64,
                "seal",
                bits_summary(&set.bits[..set.bits.len().saturating_sub(1)]),
                set.bits.last().map(|b| b.to_string()).unwrap_or_default(),
                set.bits[..set.bits.len().saturating_sub(1)].iter().sum::<u32>(),
                set.log_qp,
                set.dnum,
                set.special_primes,
                set.sec_level
            );
        }
    }

    // Full table: op x N x config.
    let seal_us = |cfg: &ConfigInfo, op: &str| -> Option<&SealMeasurement> {
        let set = cfg.seal_set.as_ref()?;
        rep.seal
            .report
            .as_ref()?
            .results
            .iter()
            .find(|m| &m.set == set && m.op == op)
    };
    let _ = writeln!(
        s,
        "\nTimings (median us per call; SEAL/heloom = how many times faster heloom is):"
    );
    let _ = writeln!(
        s,
        "  {:<18} {:>5} {:<20} {:>11} {:>11} {:>11} {:>7} {:>6}",
        "op", "N", "heloom config", "heloom us", "SEAL us", "SEAL/heloom", "target", "result"
    );
    let mut log_ns: Vec<u32> = rep.configs.iter().map(|c| c.log_n).collect();
    log_ns.dedup();
    for &log_n in &log_ns {
        for op in OPS {
            for c in rep
                .configs
                .iter()
                .filter(|c| c.log_n == log_n && c.same_as.is_none())
            {
                let Some(r) = rep.results.iter().find(|r| r.config == c.id && r.op == op) else {
                    continue;
                };
                let sm = seal_us(c, op);
                let (sus, ratio, target, result) = match sm {
                    Some(sm) => {
                        let ratio = sm.us / r.us;
                        let t = target_for(op);
                        (
                            fmt_sig(sm.us),
                            format!("{ratio:.2}x"),
                            format!(">={t:.0}x"),
                            if ratio >= t { "PASS" } else { "MISS" }.to_string(),
                        )
                    }
                    None => ("-".into(), "-".into(), "-".into(), "-".into()),
                };
                let _ = writeln!(
                    s,
                    "  {:<18} {:>5} {:<20} {:>11} {:>11} {:>11} {:>7} {:>6}",
                    op,
                    format!("2^{log_n}"),
                    c.id.trim_start_matches(&format!("n{log_n}-")),
                    fmt_sig(r.us),
                    sus,
                    ratio,
                    target,
                    result
                );
            }
        }
    }

    // Compact matrix: SEAL/heloom per op and N for the apples-to-apples config, and the best
    // heloom config.
    if !rep.comparisons.is_empty() {
        let _ = writeln!(
            s,
            "\nSEAL/heloom per op: 64-bit words, primes <= 50 bits, SEAL's shape (dnum = L+1, one special prime)\n\
             [best heloom config at that N in brackets, when better]:"
        );
        let _ = write!(s, "  {:<18}", "op");
        for &log_n in &log_ns {
            let _ = write!(s, " {:>24}", format!("N=2^{log_n}"));
        }
        let _ = writeln!(s);
        for op in OPS {
            let _ = write!(s, "  {:<18}", op);
            for &log_n in &log_ns {
                let n = 1usize << log_n;
                let prim = rep
                    .comparisons
                    .iter()
                    .find(|c| c.op == op && c.n == n && primary(&rep.configs, &c.config));
                let best = rep
                    .comparisons
                    .iter()
                    .filter(|c| c.op == op && c.n == n && c.seal_set.ends_with("-p50"))
                    .max_by(|a, b| a.seal_over_heloom.total_cmp(&b.seal_over_heloom));
                let cell = match (prim, best) {
                    (Some(p), Some(b)) if b.config != p.config => format!(
                        "{:.2}x [{:.2}x {}]",
                        p.seal_over_heloom,
                        b.seal_over_heloom,
                        short_cfg(&b.config)
                    ),
                    (Some(p), _) => format!("{:.2}x", p.seal_over_heloom),
                    (None, Some(b)) => {
                        format!("[{:.2}x {}]", b.seal_over_heloom, short_cfg(&b.config))
                    }
                    (None, None) => "-".into(),
                };
                let _ = write!(s, " {:>24}", cell);
            }
            let _ = writeln!(s);
        }
        let p60: Vec<&Comparison> = rep
            .comparisons
            .iter()
            .filter(|c| c.seal_set.ends_with("-p60") && c.config.ends_with("-seal"))
            .collect();
        if !p60.is_empty() {
            let _ = write!(s, "  60-bit primes, N=2^14 (AVX-512), SEAL/heloom:");
            for c in p60 {
                let _ = write!(s, " {} {:.2}x;", c.op, c.seal_over_heloom);
            }
            let _ = writeln!(s);
        }
    }

    // Precision.
    let _ = writeln!(
        s,
        "\nPrecision of multiply + relinearize + rescale, inputs uniform in [-1, 1], all N/2 slots\n\
         (bits = -log2 of the absolute error against the double-precision product):"
    );
    let _ = writeln!(
        s,
        "  {:<24} {:>10} {:>10} {:>12} {:>12} {:>16}",
        "config", "mean bits", "worst bits", "mean error", "max error", "rotate max error"
    );
    let row = |s: &mut String, name: &str, p: &Precision| {
        let b = |x: Option<f64>| x.map(|v| format!("{v:.1}")).unwrap_or("inf".into());
        let _ = writeln!(
            s,
            "  {:<24} {:>10} {:>10} {:>12.3e} {:>12.3e} {:>16}",
            name,
            b(p.mean_bits),
            b(p.worst_bits),
            p.mean_abs_error,
            p.max_abs_error,
            p.rotate_max_abs_error
                .map(|e| format!("{e:.3e}"))
                .unwrap_or("-".into())
        );
    };
    for p in &rep.precision {
        row(&mut s, &p.config, &p.precision);
    }
    if let Some(r) = &rep.seal.report {
        for set in &r.sets {
            row(&mut s, &format!("SEAL {}", set.id), &set.precision);
        }
    }

    if !rep.targets.is_empty() {
        let _ = writeln!(
            s,
            "\nTargets (issue: heloom ahead of SEAL on every op; relinearize and rotate >= 4x SEAL without HEXL),\n\
             on the apples-to-apples configs (64-bit words, primes <= 50 bits, SEAL's shape):"
        );
        s.push_str(&crate::target::render(&rep.targets));
    }

    let _ = writeln!(
        s,
        "\nNotes: keygen is outside the timed region; encrypt = public-key encryption of an encoded\n\
         plaintext; decrypt = decrypt + decode to N/2 doubles; rotate = by one slot. SEAL encode and\n\
         decode are reported with the Python<->C++ conversion of the N/2-value vector subtracted\n\
         (raw times in the JSON). 32-bit configs are compared with SEAL's 64-bit set of the same N\n\
         (log Q within 15 bits)."
    );
    if !rep.skipped.is_empty() {
        let _ = writeln!(s, "\nSkipped:");
        for k in &rep.skipped {
            let _ = writeln!(s, "  {k}");
        }
    }
    s
}

/// `n14-w64-p50-auto` -> `w64-auto`, `n14-w32-seal` -> `w32-seal`.
fn short_cfg(id: &str) -> String {
    let rest = id.split_once('-').map(|x| x.1).unwrap_or(id);
    rest.replace("-p50", "")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_planned_set_builds_within_the_security_bound() {
        let mut skipped = Vec::new();
        let opts = CkksBenchOptions {
            vs_tenseal: Some(PathBuf::from("python3")),
            ..Default::default()
        };
        let plans = plan(&opts, &mut skipped);
        assert!(skipped.is_empty(), "{skipped:?}");
        // 4 N x (p50, w32) + p60 at 2^14, each in two shapes.
        assert_eq!(plans.len(), 2 * (4 * 2 + 1));
        for p in &plans {
            let c = &p.info;
            let bound = c.params.max_log_qp.expect("bound") as f64;
            assert!(
                c.params.log_qp <= bound,
                "{}: {} > {bound}",
                c.id,
                c.params.log_qp
            );
            if c.shape == "seal" {
                assert_eq!(
                    (c.params.alpha, c.params.dnum),
                    (1, c.moduli.len()),
                    "{}",
                    c.id
                );
            }
            if c.family == "w64-p50" {
                assert!(c.moduli.iter().chain(&c.special).all(|&q| q < 1 << 50));
            }
            assert_eq!(
                c.seal_set.as_deref(),
                Some(
                    format!(
                        "n{}-{}",
                        c.log_n,
                        if c.family == "w64-p60" { "p60" } else { "p50" }
                    )
                    .as_str()
                )
            );
        }
        // The SEAL sets are exactly the 64-bit ones: q bits then the special prime.
        let sets = seal_sets(&opts);
        assert_eq!(sets.len(), 5);
        let n14 = sets.iter().find(|s| s.0 == "n14-p50").expect("n14-p50");
        assert_eq!(n14.2, vec![50, 48, 48, 48, 48, 48, 48, 48, 50]);
        assert!(n14.2.iter().sum::<u32>() <= 438);
    }

    #[test]
    fn the_32_bit_sets_keep_log_q_with_about_twice_the_primes() {
        for log_n in 13..=16 {
            let n = 1usize << log_n;
            let bound = security::max_log_qp(n, SecurityLevel::Bits128).expect("bound");
            let f32 = family32(log_n, bound);
            let f64_ = &families64(log_n)[0];
            let q32: u32 = f32.ct_bits.iter().sum();
            let q64: u32 = f64_.ct_bits.iter().sum();
            assert!(q32.abs_diff(q64) <= 15, "2^{log_n}: {q32} vs {q64}");
            assert!(f32.ct_bits.len() >= f64_.ct_bits.len() * 3 / 2);
            assert!(q32 + f32.special_bits <= bound);
            assert!(f32.note.is_none());
        }
    }

    #[test]
    fn bit_lists_are_summarized() {
        assert_eq!(bits_summary(&[50, 48, 48, 48, 50]), "50,48x3,50");
        assert_eq!(bits_summary(&[30]), "30");
        assert_eq!(bits_summary(&[]), "");
        assert_eq!(short_cfg("n14-w64-p50-auto"), "w64-auto");
        assert_eq!(short_cfg("n14-w64-p60-seal"), "w64-p60-seal");
        assert_eq!(short_cfg("n13-w32-seal"), "w32-seal");
    }

    #[test]
    fn seal_output_is_merged_into_ratios_and_targets() {
        let js = r#"{"library": "x", "tenseal_version": "0.3.18", "seal_version": "4.1",
            "python": "3.11", "threads": 1, "clock": "thread_cpu", "samples": 3, "errors": [],
            "sets": [{"id": "n13-p50", "n": 8192, "log_n": 13, "bits": [48, 40, 40, 40, 50],
                      "log_qp": 218, "dnum": 4, "special_primes": 1, "sec_level": "tc128",
                      "precision": {"mean_abs_error": 1e-9, "max_abs_error": 1e-8,
                                    "mean_bits": 29.9, "worst_bits": 26.6,
                                    "rotate_max_abs_error": 1e-8}}],
            "results": [
              {"set": "n13-p50", "op": "relinearize", "n": 8192, "us": 3000.0,
               "us_raw": 3000.0, "binding_overhead_us": 0.0},
              {"set": "n13-p50", "op": "add", "n": 8192, "us": 20.0, "us_raw": 20.0,
               "binding_overhead_us": 0.0}]}"#;
        let seal: SealReport = serde_json::from_str(js).expect("parse");
        let mut skipped = Vec::new();
        let opts = CkksBenchOptions {
            log_ns: vec![13],
            word_bits: vec![64],
            vs_tenseal: Some(PathBuf::from("python3")),
            ..Default::default()
        };
        let configs: Vec<ConfigInfo> = plan(&opts, &mut skipped)
            .into_iter()
            .map(|p| p.info)
            .collect();
        let m = |op, us| Measurement {
            config: "n13-w64-p50-seal".into(),
            op,
            n: 8192,
            word_bits: 64,
            us,
        };
        let results = vec![m("relinearize", 1000.0), m("add", 40.0)];
        let c = compare(&configs, &results, Some(&seal));
        assert_eq!(c.len(), 2);
        assert!((c[0].seal_over_heloom - 3.0).abs() < 1e-12 && c[0].target == 4.0 && !c[0].pass);
        assert!((c[1].seal_over_heloom - 0.5).abs() < 1e-12 && c[1].target == 1.0 && !c[1].pass);
        assert!(primary(&configs, "n13-w64-p50-seal"));
        assert!(!primary(&configs, "n13-w64-p50-auto"));
    }

    #[test]
    fn the_cpu_clock_measures_work() {
        let us = median_cpu_us(3, 200.0, &mut || {
            let mut x = 1u64;
            for i in 0..10_000u64 {
                x = black_box(x.wrapping_mul(i | 1));
            }
            black_box(x);
        });
        assert!(us > 0.0 && us < 1e5, "{us}");
    }
}
