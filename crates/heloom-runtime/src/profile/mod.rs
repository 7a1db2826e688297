//! Cost profiles: how long each HE operation takes at each level and thread budget, how much
//! it slows down when the machine is busy, and what starting a task costs.
//!
//! A [`Profile`] comes either from seed 000's tables (the built-in `xeon-phi-7230f`: SEAL 3.2
//! CKKS on a Xeon Phi 7230F, N = 32768) or from measuring this machine with [`measure_host`]
//! (`heloom profile`), and is stored as JSON.
//!
//! # The model
//!
//! [`Profile::op_ms`] prices one op from its [`OpTable`] (rows: `n_q`, columns: threads). Off
//! the measured grid it uses the paper's ceiling model (Tables 2 and 3): an op splits
//! [`parallel_width`] independent items (`n_q` limbs, `2 n_q` for rescale: two polynomials) over
//! `t` threads in static contiguous chunks, so
//!
//! `T(n_q, t) = ceil(w(n_q) / t) * u(n_q)`
//!
//! where `u` is the time of one item: constant in `n_q` for every op except relinearization,
//! whose per-limb work (the key-switch inner loop over all limbs) grows linearly with `n_q`
//! (the paper's `a n_q + b`).
//!
//! [`Profile::slowdown`] is the factor by which an op's latency grows when `busy` threads of
//! the machine are computing (Tables 4 and 5), one curve per [`ContentionClass`].

use crate::ops::{ContentionClass, OpKind};
use heloom_ckks::{
    Ciphertext, CkksError, CkksParameters, Context, Encryptor, Evaluator, KeyGenerator,
    SecurityLevel, Threads,
};
use heloom_math::Word;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{mpsc, Arc, Condvar, Mutex, MutexGuard};
use std::time::Instant;
use thiserror::Error;

mod measure;
mod xeon_phi;
pub use measure::{host_machine, measure_host, MeasureConfig};
use xeon_phi::xeon_phi;

/// Cost of starting one task on the Xeon Phi, in milliseconds. The paper gives no number; its
/// measured job times are matched by [`XEON_PHI_JOB_FACTOR`] instead (a fixed per-task cost
/// that occupied the task's threads would make `fixed-full` collapse at every gap, which the
/// paper's Table 6 rules out).
pub const XEON_PHI_TASK_OVERHEAD_MS: f64 = 0.0;

/// Ops inside an e^x job on the Xeon Phi against Table 1: the paper (Section 7.1) reports one
/// job at 4 s run task by task and 2 s with its tasks in parallel; Table 1's costs of our Fig. 3
/// reconstruction (`exp_graph(Paper)`) sum to 2,841 ms and its single-thread critical path to
/// 1,473 ms. Both ratios agree (1.41 and 1.36), so every op is scaled by 4000 / 2841.
pub const XEON_PHI_JOB_FACTOR: f64 = 4000.0 / 2841.0;

fn one() -> f64 {
    1.0
}

/// Name of the built-in profile taken from seed 000's tables.
pub const XEON_PHI: &str = "xeon-phi-7230f";

const BUILTIN_NAMES: &[&str] = &[XEON_PHI];

/// What can go wrong loading, saving or measuring a profile.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ProfileError {
    /// `load` got a name that is neither a built-in profile nor an existing file.
    #[error("unknown profile `{name}`: not a built-in profile (built-ins: {builtins}) and no file at that path")]
    Unknown {
        /// What was asked for.
        name: String,
        /// The built-in names, comma-separated.
        builtins: String,
    },
    /// Reading or writing a profile file failed.
    #[error("{action} profile file {path}: {source}")]
    Io {
        /// `reading` or `writing`.
        action: &'static str,
        /// The file.
        path: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The text is not a profile in JSON.
    #[error("not a valid profile JSON{origin}: {source}")]
    Json {
        /// ` (file PATH)` when it came from a file, else empty.
        origin: String,
        /// The parser's error.
        #[source]
        source: serde_json::Error,
    },
    /// The profile parses but its contents cannot be used (missing ops, ragged tables,
    /// non-positive times, unsorted curves).
    #[error("invalid profile: {0}")]
    Invalid(String),
    /// A measurement setting that cannot work.
    #[error("invalid measurement settings: {0}")]
    Config(String),
    /// Building parameters, keys or running an op failed while measuring.
    #[error("measuring failed: {0}")]
    Ckks(#[from] CkksError),
    /// The OS refused to start a measuring thread, or one panicked.
    #[error("measuring failed: {0}")]
    Thread(String),
}

/// Times of one op: `ms[i][j]` is the latency in milliseconds at `nq[i]` RNS limbs
/// (level + 1) with `threads[j]` threads.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OpTable {
    /// Measured limb counts, strictly increasing.
    pub nq: Vec<usize>,
    /// Measured thread budgets, strictly increasing, from 1 on.
    pub threads: Vec<usize>,
    /// `ms[i][j]`: milliseconds at `nq[i]` with `threads[j]`.
    pub ms: Vec<Vec<f64>>,
}

impl OpTable {
    /// The table of an op with one row per `nq` and one column per thread budget, from a
    /// function of `(nq, threads)`.
    pub fn from_fn(nq: &[usize], threads: &[usize], f: impl Fn(usize, usize) -> f64) -> Self {
        Self {
            nq: nq.to_vec(),
            threads: threads.to_vec(),
            ms: nq
                .iter()
                .map(|&q| threads.iter().map(|&t| f(q, t)).collect())
                .collect(),
        }
    }

    fn validate(&self, op: OpKind) -> Result<(), ProfileError> {
        let bad = |m: String| Err(ProfileError::Invalid(format!("op {op}: {m}")));
        if self.nq.is_empty() || self.threads.is_empty() {
            return bad("the table needs at least one n_q row and one thread column".into());
        }
        if self.nq[0] == 0 || self.nq.windows(2).any(|w| w[0] >= w[1]) {
            return bad(format!(
                "n_q rows must be positive and strictly increasing, got {:?}",
                self.nq
            ));
        }
        if self.threads[0] == 0 || self.threads.windows(2).any(|w| w[0] >= w[1]) {
            return bad(format!(
                "thread columns must be positive and strictly increasing, got {:?}",
                self.threads
            ));
        }
        if self.ms.len() != self.nq.len() || self.ms.iter().any(|r| r.len() != self.threads.len()) {
            return bad(format!(
                "ms must have {} rows of {} values (n_q x threads)",
                self.nq.len(),
                self.threads.len()
            ));
        }
        if let Some(v) = self
            .ms
            .iter()
            .flatten()
            .find(|v| !(v.is_finite() && **v > 0.0))
        {
            return bad(format!("every time must be a positive number, got {v}"));
        }
        Ok(())
    }
}

/// A contention curve: `(busy threads, latency factor)` points, increasing in busy threads.
pub type Curve = Vec<(f64, f64)>;

/// A cost model of one machine for the scheduler and the simulator.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Profile {
    /// `xeon-phi-7230f` or `host`.
    pub name: String,
    /// CPU model (`/proc/cpuinfo`'s `model name` on the host).
    pub machine: String,
    /// Ring degree the times are for.
    pub n: usize,
    /// Word size of the RNS limbs.
    pub word_bits: u32,
    /// Largest `n_q` (level + 1) of the parameter set measured.
    pub max_nq: usize,
    /// Threads usable for HE tasks: 126 on the Phi (paper, section 7.3), the cores on the host.
    pub capacity: usize,
    /// Latency of each op at each `n_q` and thread budget.
    pub ops: BTreeMap<OpKind, OpTable>,
    /// Slowdown under load: `(busy threads, latency factor)`, increasing in busy threads.
    pub contention: BTreeMap<ContentionClass, Vec<(f64, f64)>>,
    /// Cost of starting one task (dispatch to a parked worker and its wake-up), paid by the
    /// task, in milliseconds.
    pub task_overhead_ms: f64,
    /// Factor by which ops run slower inside a job than in the isolated measurements of the
    /// tables (cold caches, fresh allocations); applied to every op by the cost model. 1 on
    /// the host, where the profile is measured the way tasks run. See [`XEON_PHI_JOB_FACTOR`].
    #[serde(default = "one")]
    pub job_factor: f64,
    /// Further factor per thread budget (entry `t - 1`; 1 where absent): real tasks with `t`
    /// threads in a loaded job stream against the op tables, from [`crate::calibrate`].
    #[serde(default)]
    pub thread_factors: Vec<f64>,
    /// Slowdown with a backlog: `(jobs in the system, factor)`, increasing in jobs, 1 where
    /// absent; from [`crate::calibrate`] (a deep backlog leaves every task's inputs cold).
    #[serde(default)]
    pub backlog_factors: Vec<(f64, f64)>,
    /// The contention curves per thread budget, where the source has them (the Xeon Phi's
    /// Tables 4-5: one row per `t` in 1, 2, 4, 8): `(t, curve)` rows, increasing in `t`. At the
    /// same busy count, ops on more threads each slow down less there (at 128 busy threads a
    /// relinearization is 3.13x slower on 1 thread each, 2.57x on 8). Empty: the merged curve.
    #[serde(default)]
    pub contention_by_threads: BTreeMap<ContentionClass, Vec<(usize, Curve)>>,
    /// Where each number comes from.
    pub notes: Vec<String>,
}

/// Number of independent items `op` splits over its threads at `nq` limbs (seed 000, 4.2):
/// `2 nq` for rescale (two polynomials times the limbs), `nq` for everything else. Budgets
/// beyond it gain nothing; budgets that divide it waste nothing.
pub fn parallel_width(op: OpKind, nq: usize) -> usize {
    match op {
        OpKind::Rescale => 2 * nq,
        _ => nq,
    }
}

/// Sequential rounds of the static split: `ceil(width / t)`.
fn rounds(op: OpKind, nq: usize, t: usize) -> f64 {
    parallel_width(op, nq).div_ceil(t.max(1)) as f64
}

impl Profile {
    /// Latency in milliseconds of `op` at `nq` limbs with a budget of `threads` threads, on an
    /// otherwise idle machine.
    ///
    /// - On the table: the measured value.
    /// - `nq` between two rows: linear interpolation.
    /// - `nq` below the smallest row `m`: proportional, `T(m) * nq / m` at one thread (the
    ///   ceiling model `T = ceil(w / t) * u` with the per-item time `u` of row `m`).
    /// - `nq` above the largest row `M`: the ceiling model with the per-item time of row `M`,
    ///   kept for every op but relinearization, whose per-item time grows by `nq / M` (its
    ///   key-switch loop is `n_q x n_q`). At one thread: `T(M) * nq / M`, and quadratic
    ///   `T(M) * (nq / M)^2` for relinearization.
    /// - `threads` between two measured columns: the nearest lower column (conservative);
    ///   `threads = 0` counts as 1.
    /// - `threads` beyond the largest column `c`: `T(nq, c) * ceil(w / threads) / ceil(w / c)`
    ///   with `w = `[`parallel_width`]: never better than at `threads = w`, where the
    ///   ceiling stops falling (Tables 2 and 3).
    /// - `threads` below the smallest column (a table without a 1-thread column): the same
    ///   ceiling ratio from the smallest column.
    ///
    /// Returns NaN when the profile has no usable table for `op` (profiles from
    /// [`Profile::load`], [`Profile::from_json`], [`Profile::builtin`] and [`measure_host`]
    /// always have one).
    pub fn op_ms(&self, op: OpKind, nq: usize, threads: usize) -> f64 {
        let Some(table) = self.ops.get(&op) else {
            return f64::NAN;
        };
        if table.nq.is_empty() || table.threads.is_empty() || table.ms.len() != table.nq.len() {
            return f64::NAN;
        }
        let nq = nq.max(1);
        let t = threads.max(1);
        let cols = &table.threads;
        let last = cols.len() - 1;
        if t >= cols[0] && t <= cols[last] {
            // Nearest measured column at or below t.
            let j = cols.partition_point(|&c| c <= t) - 1;
            self.column_ms(op, table, j, nq)
        } else {
            let j = if t > cols[last] { last } else { 0 };
            self.column_ms(op, table, j, nq) * rounds(op, nq, t) / rounds(op, nq, cols[j])
        }
    }

    /// Column `j` of `table` at `nq`, interpolated or extrapolated in `nq`.
    fn column_ms(&self, op: OpKind, table: &OpTable, j: usize, nq: usize) -> f64 {
        let at = |i: usize| table.ms[i].get(j).copied().unwrap_or(f64::NAN);
        let rows = &table.nq;
        let tj = table.threads[j];
        let (first, last) = (rows[0], rows[rows.len() - 1]);
        if nq < first {
            let unit = at(0) / rounds(op, first, tj);
            return unit * rounds(op, nq, tj);
        }
        if nq > last {
            let mut unit = at(rows.len() - 1) / rounds(op, last, tj);
            if op == OpKind::Relin {
                unit *= nq as f64 / last as f64;
            }
            return unit * rounds(op, nq, tj);
        }
        let i = rows.partition_point(|&r| r <= nq) - 1;
        if rows[i] == nq {
            return at(i);
        }
        let (q0, q1) = (rows[i] as f64, rows[i + 1] as f64);
        let f = (nq as f64 - q0) / (q1 - q0);
        at(i) + f * (at(i + 1) - at(i))
    }

    /// Latency factor of an op of `class` while `busy` threads of the machine compute
    /// (itself included): piecewise linear over the profile's curve, 1.0 at or below the
    /// curve's first point (and for a class without a curve), extrapolated linearly from the
    /// last two points beyond the last (a one-point curve is a step to its factor).
    pub fn slowdown(&self, class: ContentionClass, busy: f64) -> f64 {
        match self.contention.get(&class) {
            Some(curve) => curve_at(curve, busy),
            None => 1.0,
        }
    }

    /// [`Self::slowdown`] for an op running on `threads` threads: interpolated (in log2 t)
    /// between the per-budget rows of `contention_by_threads` when the profile has them,
    /// clamped to the first and last row; the merged curve otherwise.
    pub fn slowdown_for(&self, class: ContentionClass, busy: f64, threads: usize) -> f64 {
        let Some(rows) = self
            .contention_by_threads
            .get(&class)
            .filter(|r| !r.is_empty())
        else {
            return self.slowdown(class, busy);
        };
        let t = threads.max(1);
        let i = rows.partition_point(|r| r.0 <= t);
        if i == 0 {
            return curve_at(&rows[0].1, busy);
        }
        if i == rows.len() || rows[i - 1].0 == t {
            return curve_at(&rows[i - 1].1, busy);
        }
        let (lo, hi) = (&rows[i - 1], &rows[i]);
        let f = ((t as f64).log2() - (lo.0 as f64).log2())
            / ((hi.0 as f64).log2() - (lo.0 as f64).log2());
        let (a, b) = (curve_at(&lo.1, busy), curve_at(&hi.1, busy));
        a + f * (b - a)
    }
}

/// A contention curve at `busy` (see [`Profile::slowdown`]).
fn curve_at(curve: &[(f64, f64)], busy: f64) -> f64 {
    {
        match curve.len() {
            0 => return 1.0,
            1 => return if busy <= curve[0].0 { 1.0 } else { curve[0].1 },
            _ => {}
        }
        if busy <= curve[0].0 {
            return 1.0;
        }
        let k = curve
            .windows(2)
            .position(|w| busy <= w[1].0)
            .unwrap_or(curve.len() - 2);
        let ((b0, s0), (b1, s1)) = (curve[k], curve[k + 1]);
        if b1 <= b0 {
            return s1;
        }
        s0 + (busy - b0) * (s1 - s0) / (b1 - b0)
    }
}

impl Profile {
    /// A built-in profile by name (see [`Profile::builtin_names`]).
    pub fn builtin(name: &str) -> Option<Profile> {
        match name {
            XEON_PHI => Some(xeon_phi()),
            _ => None,
        }
    }

    /// Names [`Profile::builtin`] knows.
    pub fn builtin_names() -> &'static [&'static str] {
        BUILTIN_NAMES
    }

    /// A built-in profile by name, or else a profile JSON file at that path.
    pub fn load(name_or_path: &str) -> Result<Profile, ProfileError> {
        if let Some(p) = Self::builtin(name_or_path) {
            return Ok(p);
        }
        let path = Path::new(name_or_path);
        if !path.exists() {
            return Err(ProfileError::Unknown {
                name: name_or_path.to_string(),
                builtins: BUILTIN_NAMES.join(", "),
            });
        }
        let text = std::fs::read_to_string(path).map_err(|source| ProfileError::Io {
            action: "reading",
            path: path.display().to_string(),
            source,
        })?;
        Self::parse(&text, &format!(" (file {})", path.display()))
    }

    /// Pretty-printed JSON.
    pub fn to_json(&self) -> String {
        // Cannot fail: string map keys (unit enum variants), no custom serializers, and
        // serde_json writes non-finite floats as null instead of failing.
        #[allow(clippy::expect_used)]
        serde_json::to_string_pretty(self).expect("a Profile always serializes to JSON")
    }

    /// Parses and validates a profile from JSON.
    pub fn from_json(s: &str) -> Result<Profile, ProfileError> {
        Self::parse(s, "")
    }

    fn parse(s: &str, origin: &str) -> Result<Profile, ProfileError> {
        let p: Profile = serde_json::from_str(s).map_err(|source| ProfileError::Json {
            origin: origin.to_string(),
            source,
        })?;
        p.validate()?;
        Ok(p)
    }

    /// Writes the profile as JSON to `path`, creating its directory if needed.
    pub fn save(&self, path: &Path) -> Result<(), ProfileError> {
        let io = |source| ProfileError::Io {
            action: "writing",
            path: path.display().to_string(),
            source,
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        let mut text = self.to_json();
        text.push('\n');
        std::fs::write(path, text).map_err(io)
    }

    /// Checks that every op has a well-formed table and the curves are usable.
    pub fn validate(&self) -> Result<(), ProfileError> {
        if self.n == 0 || self.max_nq == 0 || self.capacity == 0 {
            return Err(ProfileError::Invalid(
                "n, max_nq and capacity must be positive".into(),
            ));
        }
        if !self.task_overhead_ms.is_finite() || self.task_overhead_ms < 0.0 {
            return Err(ProfileError::Invalid(format!(
                "task_overhead_ms must be a non-negative number, got {}",
                self.task_overhead_ms
            )));
        }
        for op in OpKind::ALL {
            match self.ops.get(&op) {
                None => {
                    return Err(ProfileError::Invalid(format!(
                        "op {op} has no table (every op needs one: {})",
                        OpKind::ALL.map(|o| o.name()).join(", ")
                    )))
                }
                Some(t) => t.validate(op)?,
            }
        }
        for (class, curve) in &self.contention {
            if curve
                .iter()
                .any(|(b, s)| !(b.is_finite() && s.is_finite() && *b >= 0.0 && *s > 0.0))
                || curve.windows(2).any(|w| w[0].0 >= w[1].0)
            {
                return Err(ProfileError::Invalid(format!(
                    "contention curve {class:?} must be (busy, factor) points with busy strictly increasing and positive factors"
                )));
            }
        }
        Ok(())
    }
}

/// Merges slowdown measurements into one curve over busy threads.
///
/// Each row is one thread budget `t` with its `(M, latency)` points (`M` ops running at once,
/// `t` threads each); the smallest `M` of the row is its reference. Every other point gives
/// `(busy = M t, latency / reference)`. Points at the same busy count (different `t`) are
/// averaged: the curve says how busy the machine is, not how the busy threads are grouped.
/// Busy counts that only a reference covers get 1.0, and the curve starts at `(1, 1)`.
pub fn merge_contention(rows: &[(usize, Vec<(usize, f64)>)]) -> Vec<(f64, f64)> {
    let mut at: BTreeMap<usize, Vec<f64>> = BTreeMap::new();
    let mut refs: Vec<usize> = vec![1];
    for (t, points) in rows {
        let Some(&(m0, l0)) = points.iter().min_by_key(|p| p.0) else {
            continue;
        };
        refs.push(m0 * t);
        for &(m, l) in points {
            if m != m0 {
                at.entry(m * t).or_default().push(l / l0);
            }
        }
    }
    for b in refs {
        at.entry(b).or_insert_with(|| vec![1.0]);
    }
    at.into_iter()
        .map(|(b, v)| (b as f64, v.iter().sum::<f64>() / v.len() as f64))
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::measure::*;
    use super::xeon_phi::*;
    use super::*;

    fn phi() -> Profile {
        Profile::builtin(XEON_PHI).unwrap()
    }

    /// Asserts `p.op_ms(op, nq, threads) == ms` for every `(op, nq, threads, ms)`.
    fn assert_op_ms(p: &Profile, cases: &[(OpKind, usize, usize, f64)]) {
        for &(op, nq, t, want) in cases {
            assert_eq!(p.op_ms(op, nq, t), want, "{op} n_q={nq} threads={t}");
        }
    }

    /// [`assert_op_ms`] within 1e-9, for values derived by arithmetic on the tables.
    fn assert_op_ms_near(p: &Profile, cases: &[(OpKind, usize, usize, f64)]) {
        for &(op, nq, t, want) in cases {
            let got = p.op_ms(op, nq, t);
            assert!(
                (got - want).abs() < 1e-9,
                "{op} n_q={nq} threads={t}: {got} vs {want}"
            );
        }
    }

    #[test]
    fn phi_reproduces_tables_1_2_3() {
        let p = phi();
        p.validate().unwrap();
        for (k, op) in OpKind::ALL.into_iter().enumerate() {
            for (i, nq) in PHI_NQ.into_iter().enumerate() {
                assert_eq!(p.op_ms(op, nq, 1), PHI_TABLE1[k][i], "{op} n_q={nq}");
            }
        }
        for nq in PHI_NQ {
            for t in 1..=12 {
                assert_eq!(p.op_ms(OpKind::Relin, nq, t), PHI_TABLE2[nq - 2][t - 1]);
                assert_eq!(p.op_ms(OpKind::Rescale, nq, t), PHI_TABLE3[nq - 2][t - 1]);
            }
        }
        // Spot checks against the paper's text.
        assert_op_ms(
            &p,
            &[
                (OpKind::Relin, 8, 1, 349.0),
                (OpKind::Relin, 8, 8, 47.0),
                (OpKind::Rescale, 5, 10, 19.0),
                (OpKind::Mul, 8, 1, 55.0),
                (OpKind::AddPlain, 2, 1, 1.0),
                // Limb-parallel ops: T1 * ceil(nq / t) / nq.
                (OpKind::Mul, 8, 3, 55.0 * 3.0 / 8.0),
                (OpKind::Square, 8, 8, 39.0 / 8.0),
            ],
        );
        assert_eq!(p.capacity, 126);
        assert_eq!((p.n, p.word_bits, p.max_nq), (32768, 64, 8));
    }

    #[test]
    fn phi_threads_beyond_table_and_zero() {
        let p = phi();
        // threads = 0 counts as 1.
        assert_op_ms(
            &p,
            &[
                (OpKind::Relin, 8, 0, 349.0),
                // Relin at n_q = 8: ceil(8 / t) = 1 from t = 8 on, so no gain past column 12.
                (OpKind::Relin, 8, 16, 46.0),
                (OpKind::Relin, 8, 100, 46.0),
                // Rescale at n_q = 8: ceil(16 / 12) = 2 -> ceil(16 / 16) = 1 halves.
                (OpKind::Rescale, 8, 13, 35.0),
                (OpKind::Rescale, 8, 16, 17.5),
                (OpKind::Rescale, 8, 64, 17.5),
            ],
        );
    }

    #[test]
    fn phi_nq_extrapolation() {
        let p = phi();
        // Above: quadratic for relin, linear for the rest (one thread).
        assert_op_ms_near(
            &p,
            &[
                (OpKind::Relin, 9, 1, 349.0 * 81.0 / 64.0),
                (OpKind::Mul, 16, 1, 110.0),
                (OpKind::Rescale, 16, 1, 324.0),
                // Below: proportional.
                (OpKind::Relin, 1, 1, 16.5),
                (OpKind::Rescale, 1, 1, 15.5),
                // Above with threads: relin n_q = 16 at 12 threads: per-limb time 46 * 16 / 8 = 92,
                // ceil(16 / 12) = 2 rounds.
                (OpKind::Relin, 16, 12, 184.0),
                // ... and at 16 threads one round.
                (OpKind::Relin, 16, 16, 92.0),
            ],
        );
    }

    fn sparse() -> Profile {
        let mut p = phi();
        let table = OpTable {
            nq: vec![2, 4],
            threads: vec![1, 4],
            ms: vec![vec![10.0, 4.0], vec![30.0, 9.0]],
        };
        for op in OpKind::ALL {
            p.ops.insert(op, table.clone());
        }
        p.contention.insert(
            ContentionClass::KeySwitch,
            vec![(1.0, 1.0), (4.0, 1.0), (8.0, 3.0)],
        );
        p.contention.remove(&ContentionClass::Other);
        p
    }

    #[test]
    fn interpolation_and_columns() {
        let p = sparse();
        p.validate().unwrap();
        // Between rows: linear.
        assert_op_ms(
            &p,
            &[
                (OpKind::Mul, 3, 1, 20.0),
                (OpKind::Mul, 3, 4, 6.5),
                // Between columns: nearest lower.
                (OpKind::Mul, 3, 2, 20.0),
                (OpKind::Mul, 4, 3, 30.0),
                // Below / above the rows.
                (OpKind::Mul, 1, 1, 5.0),
                (OpKind::Mul, 8, 1, 60.0),
                (OpKind::Relin, 8, 1, 120.0),
                // Beyond the columns: ceil model from column 4.
                (OpKind::Mul, 4, 8, 9.0),
                // n_q 8 at column 4: 9 per round, 2 rounds = 18; at 8 threads one round.
                (OpKind::Mul, 8, 4, 18.0),
                (OpKind::Mul, 8, 8, 9.0),
                // Rescale splits 2 n_q items: at n_q = 4 column 4 has 2 rounds; 8 threads -> 1.
                (OpKind::Rescale, 4, 8, 4.5),
            ],
        );
    }

    #[test]
    fn missing_columns_below() {
        let mut p = sparse();
        p.ops.insert(
            OpKind::Mul,
            OpTable {
                nq: vec![4],
                threads: vec![2],
                ms: vec![vec![10.0]],
            },
        );
        // 1 thread: 4 rounds instead of 2.
        assert_eq!(p.op_ms(OpKind::Mul, 4, 1), 20.0);
    }

    #[test]
    fn slowdown_curve() {
        let p = sparse();
        let c = ContentionClass::KeySwitch;
        for (busy, want) in [
            (0.0, 1.0),
            (1.0, 1.0),
            (3.0, 1.0),
            (6.0, 2.0),
            (8.0, 3.0),
            (12.0, 5.0),
        ] {
            assert_eq!(p.slowdown(c, busy), want, "busy {busy}");
        }
        // No curve: no slowdown.
        assert_eq!(p.slowdown(ContentionClass::Other, 100.0), 1.0);
    }

    #[test]
    fn phi_contention_curves() {
        let p = phi();
        let ks = &p.contention[&ContentionClass::KeySwitch];
        assert_eq!(ks[0], (1.0, 1.0));
        assert_eq!(ks[1], (2.0, 1.0));
        // busy 4: only t = 1, M = 4 (t = 2, M = 2 is a reference).
        assert!((ks[2].1 - 344.0 / 348.0).abs() < 1e-12);
        // busy 128: mean over t = 1, 2, 4, 8.
        let b128 = (1091.0 / 348.0 + 519.0 / 174.0 + 256.0 / 89.0 + 131.0 / 51.0) / 4.0;
        let got = p.slowdown(ContentionClass::KeySwitch, 128.0);
        assert!((got - b128).abs() < 1e-12, "{got} vs {b128}");
        let b256 = (2787.0 / 348.0 + 1388.0 / 174.0 + 674.0 / 89.0 + 322.0 / 51.0) / 4.0;
        assert!((p.slowdown(ContentionClass::KeySwitch, 256.0) - b256).abs() < 1e-12);
        // Between 64 and 128: linear.
        let b64 = p.slowdown(ContentionClass::KeySwitch, 64.0);
        let mid = p.slowdown(ContentionClass::KeySwitch, 96.0);
        assert!((mid - (b64 + b128) / 2.0).abs() < 1e-12);
        let other = &p.contention[&ContentionClass::Other];
        assert_eq!(other.last().unwrap().0, 256.0);
        let o128 = (335.0 / 162.0 + 157.0 / 81.0 + 94.0 / 53.0 + 68.0 / 36.0) / 4.0;
        assert!((p.slowdown(ContentionClass::Other, 128.0) - o128).abs() < 1e-12);
        assert!(p.slowdown(ContentionClass::Other, 32.0) < 1.2);
    }

    #[test]
    fn json_round_trip() {
        let p = phi();
        let q = Profile::from_json(&p.to_json()).unwrap();
        assert_eq!(q.name, p.name);
        assert_eq!(q.ops, p.ops);
        for (class, curve) in &p.contention {
            let c2 = &q.contention[class];
            assert_eq!(c2.len(), curve.len());
            for (a, b) in curve.iter().zip(c2) {
                assert!((a.0 - b.0).abs() < 1e-12 && (a.1 - b.1).abs() < 1e-12);
            }
        }
        assert!(p.to_json().contains("\"relin\""));
        assert!(p.to_json().contains("\"key-switch\""));
        let dir = std::env::temp_dir().join(format!("heloom-profile-{}", std::process::id()));
        let path = dir.join("sub").join("phi.json");
        p.save(&path).unwrap();
        let r = Profile::load(path.to_str().unwrap()).unwrap();
        assert_eq!(r.ops, p.ops);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn load_errors() {
        let e = Profile::load("no-such-profile").unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("no-such-profile") && msg.contains(XEON_PHI),
            "{msg}"
        );
        assert!(matches!(Profile::load(XEON_PHI), Ok(p) if p.name == XEON_PHI));
        assert_eq!(Profile::builtin_names(), &[XEON_PHI]);
        assert!(Profile::builtin("host").is_none());
        let e = Profile::from_json("{").unwrap_err();
        assert!(matches!(e, ProfileError::Json { .. }));
        // A profile missing an op is rejected.
        let mut p = phi();
        p.ops.remove(&OpKind::Square);
        let e = Profile::from_json(&p.to_json()).unwrap_err();
        assert!(e.to_string().contains("square"), "{e}");
        // A ragged table is rejected.
        let mut p = phi();
        if let Some(t) = p.ops.get_mut(&OpKind::Add) {
            t.ms[0].pop();
        }
        assert!(matches!(
            Profile::from_json(&p.to_json()),
            Err(ProfileError::Invalid(_))
        ));
    }

    #[test]
    fn merge_rules() {
        let rows = vec![
            (1, vec![(1, 10.0), (2, 12.0), (4, 20.0)]),
            (2, vec![(1, 5.0), (2, 8.0)]),
        ];
        let c = merge_contention(&rows);
        // busy 1: reference; busy 2: t=1 M=2 (1.2), t=2 M=1 is a reference;
        // busy 4: mean of 2.0 (t=1, M=4) and 1.6 (t=2, M=2).
        assert_eq!(c, vec![(1.0, 1.0), (2.0, 1.2), (4.0, 1.8)]);
        assert_eq!(contention_grid(2), vec![(1, vec![1, 2]), (2, vec![1])]);
        assert_eq!(
            contention_grid(6),
            vec![(1, vec![1, 2, 4, 6]), (2, vec![1, 2, 3]), (4, vec![1])]
        );
    }

    #[test]
    fn measure_tiny_host() {
        let cfg = MeasureConfig {
            log_n: 12,
            levels: 2,
            reps: 1,
            max_threads: 2,
            ..MeasureConfig::default()
        };
        let mut calls = Vec::new();
        let p = measure_host(&cfg, &mut |d, t, l| calls.push((d, t, l.to_string()))).unwrap();
        p.validate().unwrap();
        assert_eq!(p.name, "host");
        assert_eq!((p.n, p.max_nq, p.word_bits), (4096, 3, 64));
        for op in OpKind::ALL {
            let t = &p.ops[&op];
            assert_eq!(t.nq, vec![2, 3]);
            assert_eq!(t.threads, vec![1, 2]);
            assert!(t.ms.iter().flatten().all(|&v| v > 0.0), "{op}: {:?}", t.ms);
        }
        // A key switch costs many times an addition (a wide margin: tests run concurrently, so
        // close timings could swap).
        assert!(p.op_ms(OpKind::Relin, 3, 1) > 3.0 * p.op_ms(OpKind::Add, 3, 1));
        for class in [ContentionClass::KeySwitch, ContentionClass::Other] {
            let c = &p.contention[&class];
            assert_eq!(c[0], (1.0, 1.0));
            assert!(c.iter().all(|&(b, s)| b >= 1.0 && s > 0.0));
        }
        assert!(p.task_overhead_ms > 0.0 && p.task_overhead_ms < 100.0);
        let (d, t, _) = calls.last().unwrap().clone();
        assert_eq!(d, t);
        assert!(calls.windows(2).all(|w| w[0].0 < w[1].0));
        assert!(Profile::from_json(&p.to_json()).is_ok());
        let bad = MeasureConfig {
            reps: 0,
            ..cfg.clone()
        };
        assert!(matches!(
            measure_host(&bad, &mut |_, _, _| {}),
            Err(ProfileError::Config(_))
        ));
    }
}
