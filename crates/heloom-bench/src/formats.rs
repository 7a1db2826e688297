//! `heloom bench formats`: every byte checked, and how fast.
//!
//! Part one corrupts valid objects of every serialized kind (CKKS parameters, ciphertexts
//! seeded and not, plaintexts, public, secret, switching and evaluation keys, task graphs,
//! store spill files, genome protocol frames) a million times each (by default) and loads every result:
//! random bit flips, byte overwrites, truncations, extensions and splices of two valid
//! objects of the same kind. A corruption may fail with the loader's typed error, or load as
//! one of the two originals (a splice can rebuild one); anything else (a different object, a
//! panic) is counted as accepted and fails the run. Objects are small (N = 2^10, the fuzz
//! parameters) so that a million loads take seconds; the checks do not depend on the size.
//!
//! Part two times the loader on the size: a ciphertext at N = 2^16 with 30 limbs of
//! 64-bit words (checksum included), on one core, against the 1 GB/s target, with the
//! checksum alone and the writer for comparison.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Result};
use heloom_apps::genome::wire::{Message, Mode};
use heloom_ckks::{
    keygen, Ciphertext, CkksParameters, Context, Encryptor, EvaluationKeys, Evaluator, Plaintext,
    PublicKey, SecretKey, SecurityLevel, SwitchingKey,
};
use heloom_math::backend::cpu_model;
use heloom_runtime::graph::{exp_graph, ExpVariant};
use heloom_runtime::TaskGraph;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use crate::progress::Progress;
use crate::timing::median;

/// The load-throughput target (bytes per second, one core).
pub const LOAD_TARGET_GBPS: f64 = 1.0;

/// Options of the formats benchmark.
#[derive(Debug, Clone)]
pub struct FormatsBenchOptions {
    /// Corruptions per object kind.
    pub corruptions: usize,
    /// Timing samples of the large load (the median is reported).
    pub samples: usize,
    /// Whether `--quick` was given (smaller counts, N = 2^14 for the timing).
    pub quick: bool,
}

impl FormatsBenchOptions {
    /// Defaults: a million corruptions per kind, 9 samples; `--quick`: 20,000 and 3.
    pub fn new(quick: bool) -> Self {
        Self {
            corruptions: if quick { 20_000 } else { 1_000_000 },
            samples: if quick { 3 } else { 9 },
            quick,
        }
    }
}

/// Counts for one object kind.
#[derive(Debug, Clone, Serialize)]
pub struct KindRow {
    /// Object kind.
    pub kind: String,
    /// Size of the valid objects in bytes.
    pub bytes: usize,
    /// Corruptions tried.
    pub corruptions: usize,
    /// Refused with the loader's typed error.
    pub refused: usize,
    /// Loaded as one of the two originals (a splice that rebuilt one).
    pub original: usize,
    /// Loaded as something else: must be 0.
    pub accepted: usize,
    /// Panics: must be 0.
    pub panics: usize,
    /// Corruptions by mutation: flips, overwrites, truncations, extensions, splices.
    pub by_mutation: [usize; 5],
    /// Wall time of the loads, seconds.
    pub seconds: f64,
}

/// The load timing.
#[derive(Debug, Clone, Serialize)]
pub struct LoadRow {
    /// Ring degree.
    pub n: usize,
    /// Limbs (ciphertext primes at the top level).
    pub limbs: usize,
    /// Serialized size, bytes.
    pub bytes: usize,
    /// `Ciphertext::from_bytes`, median seconds.
    pub load_s: f64,
    /// Load throughput, GB/s (10^9 bytes of serialized input per second).
    pub load_gbps: f64,
    /// XXH3-64 over the same bytes alone, GB/s.
    pub checksum_gbps: f64,
    /// `Ciphertext::to_bytes`, GB/s of output.
    pub save_gbps: f64,
    /// Whether the load met the target.
    pub meets_target: bool,
}

/// The whole report.
#[derive(Debug, Clone, Serialize)]
pub struct FormatsReport {
    /// CPU model.
    pub cpu: String,
    /// Whether `--quick` was given.
    pub quick: bool,
    /// Corruption counts per kind.
    pub kinds: Vec<KindRow>,
    /// Total accepted corruptions and panics over every kind (must be 0).
    pub accepted_total: usize,
    /// The load timing.
    pub load: LoadRow,
    /// Load target, GB/s.
    pub load_target_gbps: f64,
}

/// A loader that returns the canonical bytes of what it loaded, or why it refused.
type Loader = Box<dyn Fn(&[u8]) -> std::result::Result<Vec<u8>, String>>;

/// One kind under test: two valid objects and its loader.
struct Subject {
    kind: &'static str,
    objects: [Vec<u8>; 2],
    load: Loader,
}

fn small_context(word_bits: u32) -> Result<Arc<Context<u64>>> {
    let p = CkksParameters::builder(1 << 10)
        .word_bits(word_bits)
        .levels(1)
        .scale_bits(40)
        .security(SecurityLevel::None)
        .build()?;
    Ok(Context::<u64>::new(p)?)
}

/// Valid objects of every kind (64-bit words, N = 2^10).
fn subjects() -> Result<Vec<Subject>> {
    let ctx = small_context(64)?;
    let k1 = keygen(&ctx, &[1], true)?;
    let k2 = keygen(&ctx, &[1], true)?;
    let enc = Encryptor::new(&ctx);
    let v = [0.5, -0.25, 0.125, 1.0];
    let w = [-0.5, 0.75, 0.0, 0.25];
    let ev = Evaluator::without_keys(&ctx);
    let ct = |k: &heloom_ckks::KeySet<u64>, x: &[f64]| enc.encrypt(x, &k.public_key);
    let mut out = Vec::new();
    let c = Arc::clone(&ctx);
    out.push(Subject {
        kind: "parameters",
        objects: [
            ctx.params().to_bytes(),
            CkksParameters::builder(1 << 10)
                .levels(2)
                .security(SecurityLevel::None)
                .build()?
                .to_bytes(),
        ],
        load: Box::new(|b| {
            CkksParameters::from_bytes(b)
                .map(|p| p.to_bytes())
                .map_err(|e| e.to_string())
        }),
    });
    macro_rules! subject {
        ($kind:expr, $a:expr, $b:expr, $ty:ident) => {{
            let c = Arc::clone(&c);
            out.push(Subject {
                kind: $kind,
                objects: [$a, $b],
                load: Box::new(move |bytes| {
                    $ty::<u64>::from_bytes(&c, bytes)
                        .map(|x| x.to_bytes())
                        .map_err(|e| e.to_string())
                }),
            });
        }};
    }
    subject!(
        "ciphertext",
        ct(&k1, &v)?.to_bytes(),
        ct(&k2, &w)?.to_bytes(),
        Ciphertext
    );
    subject!(
        "ciphertext (seeded)",
        enc.encrypt_symmetric(&v, &k1.secret_key)?.to_bytes(),
        enc.encrypt_symmetric(&w, &k2.secret_key)?.to_bytes(),
        Ciphertext
    );
    subject!(
        "ciphertext (3 polys)",
        ev.multiply(&ct(&k1, &v)?, &ct(&k1, &w)?)?.to_bytes(),
        ev.multiply(&ct(&k2, &w)?, &ct(&k2, &v)?)?.to_bytes(),
        Ciphertext
    );
    subject!(
        "plaintext",
        ctx.encode(&v)?.to_bytes(),
        ctx.encode(&w)?.to_bytes(),
        Plaintext
    );
    subject!(
        "public key",
        k1.public_key.to_bytes(),
        k2.public_key.to_bytes(),
        PublicKey
    );
    subject!(
        "secret key",
        k1.secret_key.to_bytes(),
        k2.secret_key.to_bytes(),
        SecretKey
    );
    subject!(
        "switching key",
        k1.evaluation_keys.relin_key()?.to_bytes(),
        k2.evaluation_keys.relin_key()?.to_bytes(),
        SwitchingKey
    );
    subject!(
        "evaluation keys",
        k1.evaluation_keys.to_bytes(),
        k2.evaluation_keys.to_bytes(),
        EvaluationKeys
    );
    // Store spill files hold a serialized object under a key.
    let spill = |key: u64, payload: &[u8]| {
        let mut f = heloom_store::format::header(key, 1, payload).to_vec();
        f.extend_from_slice(payload);
        f
    };
    out.push(Subject {
        kind: "store spill file",
        objects: [
            spill(7, &ct(&k1, &v)?.to_bytes()),
            spill(7, &ct(&k2, &w)?.to_bytes()),
        ],
        load: Box::new(|b| {
            heloom_store::format::payload(b, 7).map(|p| {
                let mut f = heloom_store::format::header(7, 1, p).to_vec();
                f.extend_from_slice(p);
                f
            })
        }),
    });
    let chain = CkksParameters::builder(1 << 12)
        .levels(5)
        .first_bits(50)
        .scale_bits(40)
        .security(SecurityLevel::None)
        .build()?
        .moduli()
        .to_vec();
    let graph = |v: ExpVariant| -> Result<Vec<u8>> {
        Ok(exp_graph(v, &chain, 5, 2f64.powi(40))?.to_bytes())
    };
    out.push(Subject {
        kind: "task graph",
        objects: [graph(ExpVariant::Paper)?, graph(ExpVariant::Bsgs)?],
        load: Box::new(|b| {
            TaskGraph::from_bytes(b)
                .map(|g| g.to_bytes())
                .map_err(|e| e.to_string())
        }),
    });
    let fp = ctx.fingerprint();
    let query = |x: &[f64], k: &heloom_ckks::KeySet<u64>| -> Result<Vec<u8>> {
        Ok(Message::Query {
            round: 3,
            cts: vec![ct(k, x)?.to_bytes()],
        }
        .encode(fp, 11))
    };
    out.push(Subject {
        kind: "genome frame (query)",
        objects: [query(&v, &k1)?, query(&w, &k2)?],
        load: Box::new(move |b| {
            Message::decode(b, Some((fp, 11)))
                .map(|(m, _)| m.encode(fp, 11))
                .map_err(|e| e.to_string())
        }),
    });
    let hello = |k: &heloom_ckks::KeySet<u64>| {
        Message::Hello {
            params: c.params().to_bytes(),
            public_key: k.public_key.to_bytes(),
            eval_keys: k.evaluation_keys.to_bytes(),
            mode: Mode::Interactive,
            start: 5,
            length: 9,
        }
        .encode(fp, 11)
    };
    out.push(Subject {
        kind: "genome frame (hello)",
        objects: [hello(&k1), hello(&k2)],
        load: Box::new(move |b| {
            Message::decode(b, Some((fp, 11)))
                .map(|(m, _)| m.encode(fp, 11))
                .map_err(|e| e.to_string())
        }),
    });
    Ok(out)
}

/// A random corruption of `a` (mutation index 0..5), never equal to `a`.
fn corrupt(rng: &mut ChaCha8Rng, a: &[u8], b: &[u8]) -> (Vec<u8>, usize) {
    loop {
        let op = rng.gen_range(0..5);
        // Half of the positions fall in the first 96 bytes: headers and fields.
        let pick = |rng: &mut ChaCha8Rng, len: usize| {
            if len == 0 {
                0
            } else if rng.gen_bool(0.5) {
                rng.gen_range(0..len.min(96))
            } else {
                rng.gen_range(0..len)
            }
        };
        let mut x = a.to_vec();
        match op {
            0 => {
                for _ in 0..rng.gen_range(1..=8) {
                    let i = pick(rng, x.len());
                    x[i] ^= 1 << rng.gen_range(0..8);
                }
            }
            1 => {
                let i = pick(rng, x.len());
                let k = rng.gen_range(1..=16).min(x.len() - i);
                for v in &mut x[i..i + k] {
                    *v = match rng.gen_range(0..3) {
                        0 => 0,
                        1 => 0xff,
                        _ => rng.gen(),
                    };
                }
            }
            2 => {
                let i = pick(rng, x.len());
                x.truncate(i);
            }
            3 => {
                let i = if rng.gen_bool(0.5) {
                    x.len()
                } else {
                    pick(rng, x.len())
                };
                let k = rng.gen_range(1..=64);
                let extra: Vec<u8> = (0..k).map(|_| rng.gen()).collect();
                x.splice(i..i, extra);
            }
            _ => {
                let i = pick(rng, a.len());
                let j = if rng.gen_bool(0.5) {
                    i.min(b.len())
                } else {
                    rng.gen_range(0..=b.len())
                };
                x = a[..i].to_vec();
                x.extend_from_slice(&b[j..]);
            }
        }
        if x != a {
            return (x, op);
        }
    }
}

fn run_kind(s: &Subject, count: usize, seed: u64) -> KindRow {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut row = KindRow {
        kind: s.kind.to_string(),
        bytes: s.objects[0].len(),
        corruptions: count,
        refused: 0,
        original: 0,
        accepted: 0,
        panics: 0,
        by_mutation: [0; 5],
        seconds: 0.0,
    };
    let t = Instant::now();
    for i in 0..count {
        let (a, b) = if i % 2 == 0 {
            (&s.objects[0], &s.objects[1])
        } else {
            (&s.objects[1], &s.objects[0])
        };
        let (x, op) = corrupt(&mut rng, a, b);
        row.by_mutation[op] += 1;
        match catch_unwind(AssertUnwindSafe(|| (s.load)(&x))) {
            Err(_) => row.panics += 1,
            Ok(Err(_)) => row.refused += 1,
            Ok(Ok(y)) if y == *a || y == *b => row.original += 1,
            Ok(Ok(_)) => row.accepted += 1,
        }
    }
    row.seconds = t.elapsed().as_secs_f64();
    row
}

fn time_load(opts: &FormatsBenchOptions) -> Result<LoadRow> {
    let log_n = if opts.quick { 14 } else { 16 };
    let limbs = if opts.quick { 8 } else { 30 };
    let p = CkksParameters::builder(1 << log_n)
        .levels(limbs - 1)
        .scale_bits(40)
        .build()?;
    let ctx = Context::<u64>::new(p)?;
    let keys = keygen(&ctx, &[], false)?;
    let ct = Encryptor::new(&ctx).encrypt(&[0.5, 0.25], &keys.public_key)?;
    let bytes = ct.to_bytes();
    let back = Ciphertext::from_bytes(&ctx, &bytes)?;
    if back.to_bytes() != bytes {
        bail!("the large ciphertext does not round-trip");
    }
    let mut load = Vec::new();
    let mut sum = Vec::new();
    let mut save = Vec::new();
    for _ in 0..opts.samples {
        let t = Instant::now();
        let x = Ciphertext::from_bytes(&ctx, &bytes)?;
        load.push(t.elapsed().as_secs_f64());
        std::hint::black_box(&x);
        let t = Instant::now();
        std::hint::black_box(heloom_store::format::hash64(std::hint::black_box(&bytes)));
        sum.push(t.elapsed().as_secs_f64());
        let t = Instant::now();
        std::hint::black_box(x.to_bytes());
        save.push(t.elapsed().as_secs_f64());
    }
    let gb = bytes.len() as f64 / 1e9;
    let load_s = median(load);
    Ok(LoadRow {
        n: 1 << log_n,
        limbs,
        bytes: bytes.len(),
        load_s,
        load_gbps: gb / load_s,
        checksum_gbps: gb / median(sum),
        save_gbps: gb / median(save),
        meets_target: gb / load_s >= LOAD_TARGET_GBPS,
    })
}

/// Runs the benchmark.
pub fn run(opts: &FormatsBenchOptions) -> Result<FormatsReport> {
    let subjects = subjects()?;
    let progress = Progress::new(subjects.len() as u64 + 1);
    // Panics are counted, not printed a million times.
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let mut kinds = Vec::new();
    for (i, s) in subjects.iter().enumerate() {
        progress.step(&format!("{}: {} corruptions", s.kind, opts.corruptions));
        kinds.push(run_kind(s, opts.corruptions, 0x4845_4c4d + i as u64));
        progress.inc();
    }
    std::panic::set_hook(hook);
    progress.step("load throughput");
    let load = time_load(opts)?;
    progress.inc();
    progress.finish();
    let accepted_total = kinds.iter().map(|k| k.accepted + k.panics).sum();
    Ok(FormatsReport {
        cpu: cpu_model(),
        quick: opts.quick,
        kinds,
        accepted_total,
        load,
        load_target_gbps: LOAD_TARGET_GBPS,
    })
}

/// The report as tables.
pub fn render(r: &FormatsReport) -> String {
    let mut s = String::new();
    s.push_str(&format!("heloom bench formats on {}\n\n", r.cpu));
    s.push_str("Random corruptions of valid objects (flips, overwrites, truncations, extensions, splices of two objects):\n");
    s.push_str(&format!(
        "{:<22} {:>8} {:>11} {:>11} {:>9} {:>9} {:>7} {:>8}\n",
        "kind", "bytes", "corruptions", "refused", "original", "ACCEPTED", "panics", "seconds"
    ));
    for k in &r.kinds {
        s.push_str(&format!(
            "{:<22} {:>8} {:>11} {:>11} {:>9} {:>9} {:>7} {:>8.1}\n",
            k.kind, k.bytes, k.corruptions, k.refused, k.original, k.accepted, k.panics, k.seconds
        ));
    }
    s.push_str(&format!(
        "\naccepted corruptions and panics in total: {} ({})\n",
        r.accepted_total,
        if r.accepted_total == 0 {
            "every corruption refused or loaded as an original"
        } else {
            "FAILED"
        }
    ));
    let l = &r.load;
    s.push_str(&format!(
        "\nLoading a ciphertext at N = {}, {} limbs (64-bit words, {:.1} MB serialized), one core, median of the samples:\n",
        l.n,
        l.limbs,
        l.bytes as f64 / 1e6
    ));
    s.push_str(&format!(
        "  Ciphertext::from_bytes (checksum included)  {:>7.2} GB/s  ({:.2} ms)  target >= {:.1} GB/s: {}\n",
        l.load_gbps,
        l.load_s * 1e3,
        r.load_target_gbps,
        if l.meets_target { "met" } else { "NOT met" }
    ));
    s.push_str(&format!(
        "  XXH3-64 checksum alone                       {:>7.2} GB/s\n",
        l.checksum_gbps
    ));
    s.push_str(&format!(
        "  Ciphertext::to_bytes                         {:>7.2} GB/s\n",
        l.save_gbps
    ));
    s
}

/// Writes `formats.json` and `formats.txt` into `dir`.
pub fn save(r: &FormatsReport, dir: &std::path::Path) -> Result<Vec<std::path::PathBuf>> {
    crate::report::save_json_and_text(r, &render(r), dir, "formats")
}
