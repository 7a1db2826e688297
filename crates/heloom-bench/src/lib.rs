//! # heloom-bench
//!
//! heloom's measurement library: everything `heloom bench`, `heloom profile`, `heloom schedule`
//! and `heloom offload` measure, so the command-line program only parses, runs and prints (and
//! the service's load test can reuse the same harnesses).
//!
//! Every harness follows one shape: options in, a serializable report out, `render` for the
//! table and `save` for JSON, text and SVG under `bench/results/`.
//!
//! - [`timing`]: medians, load averages, clock and memory-bandwidth estimates.
//! - [`target`]: the issues' targets and their pass/fail checks.
//! - [`plot`]: every SVG chart (plotters).
//! - [`progress`]: progress bars for long runs.
//! - [`report`]: what the reports share: parameter-set columns, saved files, option checks.
//! - Harnesses: [`ntt`], [`ckks`] (and SEAL through TenSEAL), [`bootstrap`], [`matmul`],
//!   [`cryptonets`],
//!   [`formats`], [`gpu`], [`profile`] (the runtime's cost profile), [`schedule`] (e^x job
//!   streams under thread policies), [`offload`] (AES and HE work shared among devices, and
//!   openssl), [`loadtest`] (`heloom serve` under many tenants' load, and killed and
//!   restarted: fairness, latency, durability).
//! - [`bootstrap_peers`]: Lattigo (a Go program) and OpenFHE (its Python wheel) run beside
//!   [`bootstrap`] in subprocesses.
//! - [`spawn`]: starting a `heloom serve` process and reading the address it prints.

pub mod bootstrap;
pub mod bootstrap_peers;
pub mod ckks;
pub mod cryptonets;
pub mod formats;
pub mod gpu;
pub mod loadtest;
pub mod logreg;
pub mod matmul;
pub mod ntt;
pub mod offload;
pub mod plot;
pub mod profile;
pub mod progress;
pub mod report;
pub mod schedule;
pub mod serve_overhead;
pub mod spawn;
pub mod target;
pub mod timing;
