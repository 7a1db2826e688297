//! `heloom`: the command-line program.

mod client;
mod demo;
mod format;
mod genome;
mod loadtest;
mod mnist;
mod nodes;
mod serve;

use heloom_bench as bench;
use heloom_bench::report::{at_least_one, check_word_bits};
use heloom_bench::{offload, profile, schedule};

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

// HE ops allocate and free multi-megabyte polynomials; mimalloc keeps those pages mapped
// instead of returning them to the OS (glibc's mmap path costs page faults on every op).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use heloom_math::backend::{cpu_report, Backend};
use indicatif::{ProgressBar, ProgressStyle};

/// heloom: a homomorphic-encryption compute engine that keeps every core, SIMD lane and
/// accelerator busy.
#[derive(Parser, Debug)]
#[command(name = "heloom", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the main demonstration on embedded defaults.
    Demo,
    /// Report the CPU and the backends heloom will use.
    Info,
    /// Run a benchmark.
    Bench {
        #[command(subcommand)]
        which: BenchCommand,
    },
    /// Measure this machine's cost profile for the runtime: time per op by n_q and threads
    /// (seed 000's Tables 1-3), slowdown under concurrent load (Tables 4-5) and the cost of
    /// starting a task; or show a stored profile with --show.
    Profile(profile::ProfileArgs),
    /// Schedule a stream of encrypted e^x jobs on this machine's cores (or simulate one with a
    /// profile) under a thread policy, or compare every policy at every gap.
    Schedule(schedule::ScheduleArgs),
    /// Share AES work (or HE jobs) among devices that pull from one queue (seed 001): compare
    /// devices and balancers.
    Offload(offload::OffloadArgs),
    /// Look inside a serialized heloom object (kind, fingerprints, checksum; every field with
    /// --params), or convert a format-version-1 file to version 2.
    Format(format::FormatArgs),
    /// Classify encrypted MNIST images with CryptoNets (seed 002): accuracy, agreement with
    /// the same network in f64, images per second, peak memory.
    Mnist(mnist::MnistArgs),
    /// Private genome search (seed 004): the longest match of an encrypted query in a
    /// 2,184 x 10,000 haplotype panel (PBWT), client and server over a socket.
    Genome(genome::GenomeArgs),
    /// The multi-tenant service: `heloom serve` runs it (HTTP API on 127.0.0.1:8787, state in
    /// a data directory); `heloom serve token ...` manages its tenants' bearer tokens.
    Serve(serve::ServeArgs),
    /// Talk to a running `heloom serve`: upload keys and ciphertexts, submit jobs, wait, fetch
    /// results (token from HELOOM_TOKEN).
    Client(client::ClientArgs),
    /// Load-test `heloom serve`: tenants submit encrypted e^x and polynomial jobs at Poisson
    /// arrivals, every result decrypted and checked; per-tenant throughput, latency, queue
    /// wait, Jain's fairness index; with --kill-every the server is killed and restarted and
    /// every accepted job must complete exactly once.
    Loadtest(loadtest::LoadtestArgs),
}

#[derive(Subcommand, Debug)]
enum BenchCommand {
    /// Forward/inverse NTT, pointwise multiply and the other element-wise kernels for N = 2^12..2^17, every word size and backend.
    Ntt {
        /// Print one JSON object instead of the table.
        #[arg(long)]
        json: bool,
        /// Fewer sizes (2^12, 2^14, 2^16) and samples, for a quick look.
        #[arg(long)]
        quick: bool,
        /// Comma-separated log2(N) values to measure (default 12..17).
        #[arg(long, value_delimiter = ',')]
        log_n: Vec<u32>,
        /// Only these backends (comma-separated: scalar, avx2, avx512, avx512-ifma).
        #[arg(long, value_delimiter = ',')]
        backend: Vec<String>,
        /// Timing samples per measurement (median reported).
        #[arg(long, default_value_t = 11)]
        samples: usize,
        /// Also write the JSON report to this file.
        #[arg(long)]
        out: Option<std::path::PathBuf>,
        /// Also draw forward-NTT throughput against N as an SVG chart in this file.
        #[arg(long)]
        plot: Option<std::path::PathBuf>,
    },
    /// CKKS operations (encode, encrypt, decrypt, add, multiply, relinearize, rescale, rotate,
    /// multiply+relinearize+rescale) for N = 2^13..2^16 on one thread, on SEAL-shaped parameter
    /// sets, optionally against Microsoft SEAL through TenSEAL.
    Ckks {
        /// Print one JSON object instead of the tables.
        #[arg(long)]
        json: bool,
        /// Also time Microsoft SEAL (TenSEAL's sealapi, in a Python subprocess of this run) on
        /// the same N and coefficient-modulus sizes, and check the targets against it.
        #[arg(long, value_enum, value_name = "LIBRARY")]
        vs: Option<Versus>,
        /// Only N = 2^13 and 2^14, 3 samples (CI smoke runs).
        #[arg(long)]
        quick: bool,
        /// Comma-separated log2(N) values, 13..=16 (default 13,14,15,16).
        #[arg(long, value_delimiter = ',')]
        log_n: Vec<u32>,
        /// Comma-separated word sizes, 32 and/or 64 (default both).
        #[arg(long, value_delimiter = ',')]
        word_bits: Vec<u32>,
        /// Timing samples per measurement, median reported (default 9; 3 with --quick).
        #[arg(long)]
        samples: Option<usize>,
        /// Also write the JSON report to this file.
        #[arg(long)]
        out: Option<std::path::PathBuf>,
        /// Python interpreter with TenSEAL for --vs tenseal (default: .venv/bin/python when it
        /// exists, else python3).
        #[arg(long)]
        python: Option<std::path::PathBuf>,
    },
    /// The CUDA backend against heloom's CPU on one core and on every core: forward NTT,
    /// rescale (and the naive GPU baseline), multiply, multiply+relinearize, relinearize and
    /// rotate at N = 2^14..2^16 with up to 30 64-bit limbs (and 32-bit words), every GPU result
    /// checked against the CPU's first; the H200 targets checked. Exits with status 2
    /// when there is no GPU.
    Gpu {
        /// Print one JSON object instead of the table.
        #[arg(long)]
        json: bool,
        /// Only N = 2^14, fewer repetitions.
        #[arg(long)]
        quick: bool,
        /// Run on the host emulator of the GPU kernels with tiny parameters (N = 2^11, 4
        /// limbs): a correctness smoke test of the benchmark, not a speed.
        #[arg(long)]
        emulator: bool,
        /// Also write `gpu-<gpu name>.json`, `.txt` and `.svg` (speedups over one core) into this
        /// directory.
        #[arg(long, value_name = "DIR")]
        out: Option<std::path::PathBuf>,
    },
    /// Matrix products at seed 002's parameters (N = 2^14, L = 14, 128-bit security): a
    /// plaintext matrix times an encrypted vector (Halevi-Shoup diagonals, baby-step
    /// giant-step, hoisted rotations) and encrypted times encrypted square matrices (Jiang et
    /// al. 2018), d = 16, 32, 64, 32- and 64-bit words, one thread and every core, inputs at
    /// the top level and at the level the product needs; stages timed separately, every result
    /// checked against the plaintext product; the targets checked.
    /// The service's overhead: e^x jobs at saturation through a spawned `heloom serve` against
    /// `heloom schedule` in this process (rounds alternate), and the start latency of small
    /// jobs at idle; targets: >= 95% of the in-process throughput, p99 start <= 2 ms.
    Serve {
        /// Print one JSON object instead of the table.
        #[arg(long)]
        json: bool,
        /// log2 of the ring degree (below 14 the server gets --allow-insecure).
        #[arg(long, default_value_t = 13)]
        log_n: u32,
        /// Jobs per round and side.
        #[arg(long, default_value_t = 300)]
        jobs: usize,
        /// Timed rounds (in process, then through the server), after one warm-up round that
        /// is not counted.
        #[arg(long, default_value_t = 3)]
        rounds: usize,
        /// Jobs of the idle start-latency measurement.
        #[arg(long, default_value_t = 300)]
        idle_jobs: usize,
        /// A stored cost profile (name or path) for both sides instead of measuring this
        /// machine's.
        #[arg(long)]
        profile: Option<String>,
        /// Seed of the inputs and arrivals.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// A further flag for the spawned server, as one argument (repeatable), for example
        /// --server-arg=--max-in-flight=4.
        #[arg(long = "server-arg", value_name = "FLAG", allow_hyphen_values = true)]
        server_args: Vec<String>,
        /// The `heloom` binary to start as the server (default: this one), to compare two
        /// builds' servers against the same in-process side and client.
        #[arg(long, value_name = "PATH")]
        server_exe: Option<std::path::PathBuf>,
        /// Also write serve-overhead.json and .txt into this directory.
        #[arg(long, value_name = "DIR")]
        out: Option<std::path::PathBuf>,
    },
    /// Full-slot CKKS bootstrapping on the 128-bit N = 2^16 preset (dense ternary secret,
    /// sparse-secret encapsulation, 9 levels of 2^45 left): time of each phase, precision
    /// (worst and mean bits over all slots of uniform complex inputs), levels left, key memory
    /// and peak resident memory, on 1 thread and every core, with the targets. Needs
    /// about 11 GB of memory. With --vs, Lattigo and/or OpenFHE run first, one at a time, at
    /// their default bootstrapping parameters.
    Bootstrap {
        /// Print one JSON object instead of the table.
        #[arg(long)]
        json: bool,
        /// An insecure N = 2^12 chain instead (a smoke run of a few seconds).
        #[arg(long)]
        quick: bool,
        /// The preset's log2 N: 16 (9 levels left) or 15 (1 level left).
        #[arg(long, default_value_t = 16, conflicts_with = "quick")]
        log_n: u32,
        /// Comma-separated thread budgets (default: 1 and every core).
        #[arg(long, value_delimiter = ',')]
        threads: Vec<usize>,
        /// Bootstraps per budget, the fastest reported (default 1).
        #[arg(long)]
        reps: Option<usize>,
        /// The memory-lean key set: power-of-two baby-step keys only (15 rotation keys instead
        /// of 27 at N = 2^16; the transforms' baby steps one rotation after another).
        #[arg(long)]
        fewer_keys: bool,
        /// Every key kept, the transforms' diagonals stored with one word per coefficient
        /// instead of one per prime and expanded at each use (about 3 GB less at N = 2^16, the
        /// same result, a little slower).
        #[arg(long)]
        compact_diagonals: bool,
        /// Sparse packing: bootstrap ciphertexts of this many slots (a power of two below N/2;
        /// one EvalMod for both halves, smaller transforms). Without --vs: the peers run full
        /// packing.
        #[arg(long)]
        slots: Option<usize>,
        /// Comma-separated peers to run before heloom, each alone in a subprocess with the same
        /// thread budgets: lattigo (Lattigo v6.1.1, N16QP1788H32768H32 or, for --log-n 15 and
        /// --quick, N15QP880H16384H32; needs Go) and/or openfhe (OpenFHE's CKKS bootstrapping
        /// example at 128 bits; needs a Python 3.10 with the `openfhe` wheel).
        #[arg(long, value_delimiter = ',', value_enum)]
        vs: Vec<bench::bootstrap_peers::Peer>,
        /// The Go toolchain that builds the Lattigo program (default: `go` on PATH, else
        /// /usr/local/go/bin/go).
        #[arg(long, value_name = "PATH")]
        go: Option<std::path::PathBuf>,
        /// Lattigo's default set to run instead of the one matching N, e.g.
        /// N16QP1788H32768H32 (9 levels of 2^45 left, as heloom's preset).
        #[arg(long, value_name = "NAME")]
        lattigo_params: Option<String>,
        /// The Python 3.10 interpreter with `openfhe` (default: .venv-openfhe/bin/python when
        /// it exists, else python3.10).
        #[arg(long, value_name = "PATH")]
        python_openfhe: Option<std::path::PathBuf>,
        /// OpenFHE's ring dimension (default: heloom's N, which OpenFHE refuses when its
        /// default chain needs a larger one at 128 bits; 0: OpenFHE's own choice, e.g. 2^17).
        #[arg(long, value_name = "N")]
        openfhe_ring_dim: Option<usize>,
        /// Address-space cap of the OpenFHE process, GiB: running out ends in an error record.
        #[arg(long, value_name = "GB", default_value_t = 20.0)]
        openfhe_max_gb: f64,
        /// Also bootstrap on CUDA device 0, every step on the device (after the CPU rows; pass
        /// --threads to choose those): phases, precision, the speed-up over each CPU row, and
        /// issue 21's target at N = 2^16 (within 3x of Cheddar's 31 ms).
        #[arg(long, conflicts_with = "gpu_emulator")]
        gpu: bool,
        /// The --gpu run on the host emulator of the kernels instead (a correctness smoke run:
        /// use it with --quick).
        #[arg(long)]
        gpu_emulator: bool,
        /// Also write bootstrap.json and bootstrap.txt into this directory.
        #[arg(long, value_name = "DIR")]
        out: Option<std::path::PathBuf>,
    },
    /// Bootstrapping's deep workload end to end: logistic-regression training on an encrypted
    /// data set (2048 samples x 16 features) for more iterations than the levels hold, the
    /// encrypted weights bootstrapped whenever they run out (128-bit N = 2^16 preset, about
    /// 10 GB of memory), checked against the same descent in the clear: time per iteration,
    /// bootstraps, the weights' error, the training accuracy.
    Logreg {
        /// Print one JSON object instead of the table.
        #[arg(long)]
        json: bool,
        /// An insecure N = 2^10 chain instead (a smoke run of about a second).
        #[arg(long)]
        quick: bool,
        /// Gradient-descent iterations (each uses 5 levels; the preset leaves 9 after a
        /// bootstrap, so every iteration after the first bootstraps).
        #[arg(long, default_value_t = 4)]
        iterations: usize,
        /// Threads (default: every core).
        #[arg(long)]
        threads: Option<usize>,
        /// Also write logreg.json and logreg.txt into this directory.
        #[arg(long, value_name = "DIR")]
        out: Option<std::path::PathBuf>,
    },
    Matmul {
        /// Print one JSON object instead of the table.
        #[arg(long)]
        json: bool,
        /// Only d = 16, one run per configuration.
        #[arg(long)]
        quick: bool,
        /// Comma-separated matrix sides (default 16,32,64; 16 with --quick).
        #[arg(long, value_delimiter = ',')]
        dims: Vec<usize>,
        /// Comma-separated word sizes, 32 and/or 64 (default both).
        #[arg(long, value_delimiter = ',')]
        word_bits: Vec<u32>,
        /// End-to-end runs per configuration, the fastest reported (default 3; 1 with --quick).
        #[arg(long)]
        reps: Option<usize>,
        /// Also write matmul.json and matmul.txt into this directory.
        #[arg(long, value_name = "DIR")]
        out: Option<std::path::PathBuf>,
    },
    /// Every serialized kind (CKKS objects, task graphs, spill files, genome frames) corrupted a
    /// million times each (flips, overwrites, truncations, extensions, splices): counts of
    /// refused and accepted corruptions (must be 0); and the load speed of a ciphertext at
    /// N = 2^16 with 30 limbs on one core against the 1 GB/s target. Exits with status 1 when
    /// a corruption was accepted or a loader panicked.
    Formats {
        /// Print one JSON object instead of the tables.
        #[arg(long)]
        json: bool,
        /// 20,000 corruptions per kind and N = 2^14 with 8 limbs for the timing.
        #[arg(long)]
        quick: bool,
        /// Corruptions per kind (default 1,000,000; 20,000 with --quick).
        #[arg(long)]
        corruptions: Option<usize>,
        /// Also write formats.json and formats.txt into this directory.
        #[arg(long, value_name = "DIR")]
        out: Option<std::path::PathBuf>,
    },
    /// CryptoNets batch inference (seed 002's parameters) with 32-bit and 64-bit words side by
    /// side in one run, per stage, rounds alternating between the word sizes; the issue's
    /// 32/64 speed ratio and throughput targets checked.
    Cryptonets {
        /// Print one JSON object instead of the table.
        #[arg(long)]
        json: bool,
        /// Held-out images in the batch (1..=5000).
        #[arg(long, default_value_t = 5000)]
        images: usize,
        /// Rounds per word size; the fastest is reported.
        #[arg(long, default_value_t = 3)]
        rounds: usize,
        /// Threads (default: every core).
        #[arg(long)]
        threads: Option<usize>,
        /// Also write cryptonets-words.json and .txt into this directory.
        #[arg(long, value_name = "DIR")]
        out: Option<std::path::PathBuf>,
    },
}

/// Libraries `heloom bench ckks --vs` compares against.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Versus {
    /// Microsoft SEAL as bundled by TenSEAL (`pip install tenseal`), without HEXL.
    Tenseal,
}

/// The GPU line of `heloom info`: the first CUDA device, opened as `heloom serve --gpu auto`
/// would open it (its kernels compiled), or why there is none.
fn gpu_report() -> String {
    if !heloom_gpu::driver_present() {
        return "gpu: none (no CUDA driver); heloom serve runs jobs on the CPU".into();
    }
    match heloom_gpu::Gpu::cuda(0) {
        Ok(g) => {
            let i = g.info();
            format!(
                "gpu: {} (compute {}.{}, {}), kernels compiled: heloom serve --gpu auto runs \
                 jobs on it beside the CPU lanes",
                i.name, i.compute_capability.0, i.compute_capability.1, i.arch
            )
        }
        Err(e) => format!("gpu: not usable ({e}); heloom serve runs jobs on the CPU"),
    }
}

/// A reader that closed our output early (`heloom info | head -1`) ends the process quietly,
/// as SIGPIPE ends other tools, instead of a panic with a backtrace: Rust ignores SIGPIPE, so
/// `println!` panics on the closed pipe.
fn quiet_on_closed_stdout() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let msg = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("");
        if msg.starts_with("failed printing to stdout") && msg.contains("Broken pipe") {
            // 128 + SIGPIPE, what a shell reports for a process a closed pipe ended.
            std::process::exit(141);
        }
        default(info);
    }));
}

fn main() -> Result<()> {
    quiet_on_closed_stdout();
    heloom_pool::retain_freed_memory();
    let cli = Cli::parse();
    match cli.command {
        Command::Demo => demo::run(),
        Command::Profile(args) => profile::run(args),
        Command::Schedule(args) => schedule::run(&args),
        Command::Offload(args) => offload::run(&args),
        Command::Mnist(args) => mnist::run(&args),
        Command::Format(args) => format::run(&args),
        Command::Genome(args) => genome::run(&args),
        Command::Serve(args) => serve::run(&args),
        Command::Client(args) => client::run(&args),
        Command::Loadtest(args) => loadtest::run(&args),
        Command::Info => {
            println!("{}", cpu_report());
            for b in Backend::ALL {
                match b.missing_features() {
                    None => println!("  {:<12} available", b.name()),
                    Some(m) => println!("  {:<12} unavailable (needs {m})", b.name()),
                }
            }
            println!("{}", gpu_report());
            Ok(())
        }
        Command::Bench {
            which:
                BenchCommand::Ntt {
                    json,
                    quick,
                    log_n,
                    backend,
                    samples,
                    out,
                    plot,
                },
        } => {
            let mut opts = bench::ntt::NttBenchOptions {
                samples,
                ..Default::default()
            };
            if quick {
                opts.log_ns = vec![12, 14, 16];
                opts.samples = samples.min(7);
                opts.min_sample_us = 1000.0;
            }
            if !log_n.is_empty() {
                for &l in &log_n {
                    if !(4..=17).contains(&l) {
                        anyhow::bail!("--log-n {l} is out of range: N = 2^4 .. 2^17 are supported");
                    }
                }
                opts.log_ns = log_n;
            }
            for name in &backend {
                let b: Backend = name.parse()?;
                if let Some(m) = b.missing_features() {
                    anyhow::bail!(
                        "backend {b} is not available on this CPU (needs {m}); see `heloom info`"
                    );
                }
                opts.backends.push(b);
            }
            let bar = if std::io::stderr().is_terminal() {
                let pb = ProgressBar::new_spinner();
                pb.set_style(ProgressStyle::with_template("{spinner} [{elapsed}] {msg}")?);
                pb.enable_steady_tick(std::time::Duration::from_millis(120));
                pb
            } else {
                ProgressBar::hidden()
            };
            let report = bench::ntt::run(&opts, |msg| {
                if bar.is_hidden() {
                    eprintln!("  {msg}");
                } else {
                    bar.set_message(msg.to_string());
                }
            })?;
            bar.finish_and_clear();
            let js = serde_json::to_string_pretty(&report)?;
            if let Some(path) = out {
                std::fs::write(&path, &js)?;
            }
            if let Some(path) = plot {
                bench::plot::ntt_throughput(&report, &path)?;
            }
            if json {
                println!("{js}");
            } else {
                print!("{}", bench::ntt::render(&report));
            }
            Ok(())
        }
        Command::Bench {
            which:
                BenchCommand::Ckks {
                    json,
                    vs,
                    quick,
                    log_n,
                    word_bits,
                    samples,
                    out,
                    python,
                },
        } => {
            let mut opts = bench::ckks::CkksBenchOptions::default();
            if quick {
                opts.log_ns = vec![13, 14];
                opts.samples = 3;
                opts.min_sample_us = 500.0;
            }
            if let Some(k) = samples {
                opts.samples = at_least_one("--samples", k)?;
            }
            if !log_n.is_empty() {
                for &l in &log_n {
                    if !(13..=16).contains(&l) {
                        anyhow::bail!(
                            "--log-n {l} is out of range: the CKKS benchmark has parameter sets for N = 2^13 .. 2^16"
                        );
                    }
                }
                opts.log_ns = log_n;
                opts.log_ns.sort_unstable();
                opts.log_ns.dedup();
            }
            if !word_bits.is_empty() {
                check_word_bits(&word_bits)?;
                opts.word_bits = word_bits;
            }
            if vs == Some(Versus::Tenseal) {
                opts.vs_tenseal = Some(python.unwrap_or_else(bench::ckks::default_python));
            }
            let report = bench::ckks::run(&opts)?;
            let js = serde_json::to_string_pretty(&report)?;
            if let Some(path) = out {
                std::fs::write(&path, &js)
                    .with_context(|| format!("writing {}", path.display()))?;
            }
            if json {
                println!("{js}");
            } else {
                print!("{}", bench::ckks::render(&report));
            }
            Ok(())
        }
        Command::Bench {
            which:
                BenchCommand::Gpu {
                    json,
                    quick,
                    emulator,
                    out,
                },
        } => {
            let gpu = match bench::gpu::open_device(emulator) {
                Ok(g) => g,
                Err(e) => {
                    // Not a failure of the benchmark but of the machine: a distinct status so
                    // scripts can tell "no GPU here" from "the GPU backend is wrong".
                    eprintln!("error: {e}");
                    std::process::exit(2);
                }
            };
            let opts = bench::gpu::GpuBenchOptions::new(quick, emulator);
            let report = bench::gpu::run(&gpu, &opts)?;
            save_and_print(
                &report,
                out.as_deref(),
                json,
                bench::gpu::save,
                bench::gpu::render,
            )?;
            Ok(())
        }
        Command::Bench {
            which:
                BenchCommand::Cryptonets {
                    json,
                    images,
                    rounds,
                    threads,
                    out,
                },
        } => {
            let opts = bench::cryptonets::CryptonetsBenchOptions {
                images,
                rounds,
                threads: threads.unwrap_or_else(heloom_pool::cores),
            };
            let report = bench::cryptonets::run(&opts)?;
            save_and_print(
                &report,
                out.as_deref(),
                json,
                bench::cryptonets::save,
                bench::cryptonets::render,
            )?;
            Ok(())
        }
        Command::Bench {
            which:
                BenchCommand::Formats {
                    json,
                    quick,
                    corruptions,
                    out,
                },
        } => {
            let mut opts = bench::formats::FormatsBenchOptions::new(quick);
            if let Some(c) = corruptions {
                opts.corruptions = at_least_one("--corruptions", c)?;
            }
            let report = bench::formats::run(&opts)?;
            save_and_print(
                &report,
                out.as_deref(),
                json,
                bench::formats::save,
                bench::formats::render,
            )?;
            if report.accepted_total > 0 {
                anyhow::bail!(
                    "{} corruptions were accepted or made a loader panic",
                    report.accepted_total
                );
            }
            Ok(())
        }
        Command::Bench {
            which:
                BenchCommand::Serve {
                    json,
                    log_n,
                    jobs,
                    rounds,
                    idle_jobs,
                    profile,
                    seed,
                    server_args,
                    server_exe,
                    out,
                },
        } => {
            let opts = bench::serve_overhead::OverheadOptions {
                exe: match server_exe {
                    Some(p) => p,
                    None => std::env::current_exe()?,
                },
                log_n,
                jobs,
                rounds,
                idle_jobs,
                threads: None,
                profile,
                seed,
                server_args,
            };
            let report =
                bench::serve_overhead::run(&opts, &|m| eprintln!("heloom bench serve: {m}"))?;
            save_and_print(
                &report,
                out.as_deref(),
                json,
                bench::serve_overhead::save,
                bench::serve_overhead::render,
            )?;
            Ok(())
        }
        Command::Bench {
            which:
                BenchCommand::Bootstrap {
                    json,
                    quick,
                    log_n,
                    threads,
                    reps,
                    fewer_keys,
                    compact_diagonals,
                    slots,
                    vs,
                    go,
                    lattigo_params,
                    python_openfhe,
                    openfhe_ring_dim,
                    openfhe_max_gb,
                    gpu,
                    gpu_emulator,
                    out,
                },
        } => {
            let mut opts = bench::bootstrap::BootstrapBenchOptions::new(quick);
            opts.gpu = match (gpu, gpu_emulator) {
                (true, _) => Some(bench::bootstrap::GpuChoice::Cuda),
                (_, true) => Some(bench::bootstrap::GpuChoice::Emulator),
                _ => None,
            };
            opts.log_n = log_n;
            opts.fewer_keys = fewer_keys;
            opts.compact_diagonals = compact_diagonals;
            opts.slots = slots;
            opts.vs = vs;
            opts.go = go;
            opts.lattigo_params = lattigo_params;
            opts.python_openfhe = python_openfhe;
            opts.openfhe_ring_dim = openfhe_ring_dim;
            if openfhe_max_gb.is_nan() || openfhe_max_gb <= 0.0 {
                anyhow::bail!("--openfhe-max-gb {openfhe_max_gb}: want a positive size in GiB");
            }
            opts.openfhe_max_gb = openfhe_max_gb;
            if !threads.is_empty() {
                for &t in &threads {
                    at_least_one("--threads", t)?;
                }
                opts.threads = threads;
            }
            if let Some(r) = reps {
                opts.reps = at_least_one("--reps", r)?;
            }
            let report =
                bench::bootstrap::run(&opts, &|m| eprintln!("heloom bench bootstrap: {m}"))?;
            save_and_print(
                &report,
                out.as_deref(),
                json,
                bench::bootstrap::save,
                bench::bootstrap::render,
            )?;
            Ok(())
        }
        Command::Bench {
            which:
                BenchCommand::Logreg {
                    json,
                    quick,
                    iterations,
                    threads,
                    out,
                },
        } => {
            let mut opts = bench::logreg::LogregBenchOptions::new(quick);
            opts.iterations = at_least_one("--iterations", iterations)?;
            if let Some(t) = threads {
                opts.threads = at_least_one("--threads", t)?;
            }
            let report = bench::logreg::run(&opts, &|m| eprintln!("heloom bench logreg: {m}"))?;
            save_and_print(
                &report,
                out.as_deref(),
                json,
                bench::logreg::save,
                bench::logreg::render,
            )?;
            Ok(())
        }
        Command::Bench {
            which:
                BenchCommand::Matmul {
                    json,
                    quick,
                    dims,
                    word_bits,
                    reps,
                    out,
                },
        } => {
            let mut opts = bench::matmul::MatmulBenchOptions::new(quick);
            if !dims.is_empty() {
                for &d in &dims {
                    if !(1..=64).contains(&d) {
                        anyhow::bail!(
                            "--dims {d}: matrix sides 1..=64 fit N = 2^14 (d^2 <= 8192 slots)"
                        );
                    }
                }
                opts.dims = dims;
            }
            if !word_bits.is_empty() {
                check_word_bits(&word_bits)?;
                opts.word_bits = word_bits;
            }
            if let Some(r) = reps {
                opts.reps = at_least_one("--reps", r)?;
            }
            let report = bench::matmul::run(&opts)?;
            save_and_print(
                &report,
                out.as_deref(),
                json,
                bench::matmul::save,
                bench::matmul::render,
            )?;
            Ok(())
        }
    }
}

/// Saves a report's files into `out` (when given), naming each on stderr, then prints the report:
/// JSON with `--json`, the table otherwise.
fn save_and_print<R: serde::Serialize>(
    report: &R,
    out: Option<&Path>,
    json: bool,
    save: impl Fn(&R, &Path) -> Result<Vec<PathBuf>>,
    render: impl Fn(&R) -> String,
) -> Result<()> {
    if let Some(dir) = out {
        for p in save(report, dir)? {
            eprintln!("wrote {}", p.display());
        }
    }
    if json {
        println!("{}", serde_json::to_string_pretty(report)?);
    } else {
        print!("{}", render(report));
    }
    Ok(())
}
