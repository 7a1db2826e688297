//! What the scheduler needs from a cost model: the time of one op at a level on some threads,
//! and how much slower ops run while the machine is busy.

use crate::ops::{ContentionClass, OpKind};

/// A cost model (implemented by [`crate::profile::Profile`]).
pub trait CostModel: Send + Sync {
    /// Milliseconds of `op` on a ciphertext with `nq` RNS limbs, on `threads` threads, alone.
    fn op_ms(&self, op: OpKind, nq: usize, threads: usize) -> f64;
    /// Factor by which ops of `class` slow down while `busy` threads compute in total.
    fn slowdown(&self, class: ContentionClass, busy: f64) -> f64;
    /// [`Self::slowdown`] for an op on `threads` threads (a profile may know that wider ops
    /// suffer less at the same busy count); the same by default.
    fn slowdown_for(&self, class: ContentionClass, busy: f64, _threads: usize) -> f64 {
        self.slowdown(class, busy)
    }
    /// Fixed cost of starting one task (dispatch and wake-up), paid once per task.
    fn task_overhead_ms(&self) -> f64;
    /// Factor by which every task slows down while `jobs` jobs are in the system: a growing
    /// backlog means each task's inputs were written long ago by another job's task (cold in
    /// cache) and the working set grows. 1 unless calibrated.
    fn backlog_slowdown(&self, _jobs: f64) -> f64 {
        1.0
    }
    /// Threads available to HE tasks.
    fn capacity(&self) -> usize;
}

/// Time of a task split by contention class, on a given number of threads.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SplitCost {
    /// Key-switching part (relinearization), ms.
    pub keyswitch_ms: f64,
    /// Everything else, ms.
    pub other_ms: f64,
}

impl SplitCost {
    /// Total, alone on the machine.
    pub fn total(&self) -> f64 {
        self.keyswitch_ms + self.other_ms
    }

    /// Adds the cost of one op.
    pub fn add(&mut self, class: ContentionClass, ms: f64) {
        match class {
            ContentionClass::KeySwitch => self.keyswitch_ms += ms,
            ContentionClass::Other => self.other_ms += ms,
        }
    }

    /// Mean slowdown of this mix, run on `threads` threads, while `busy` threads compute.
    pub fn slowdown_for(&self, model: &dyn CostModel, busy: f64, threads: usize) -> f64 {
        let t = self.total();
        if t <= 0.0 {
            return 1.0;
        }
        (self.keyswitch_ms * model.slowdown_for(ContentionClass::KeySwitch, busy, threads)
            + self.other_ms * model.slowdown_for(ContentionClass::Other, busy, threads))
            / t
    }

    /// Mean slowdown of this mix while `busy` threads compute.
    pub fn slowdown(&self, model: &dyn CostModel, busy: f64) -> f64 {
        let t = self.total();
        if t <= 0.0 {
            return 1.0;
        }
        (self.keyswitch_ms * model.slowdown(ContentionClass::KeySwitch, busy)
            + self.other_ms * model.slowdown(ContentionClass::Other, busy))
            / t
    }
}

/// Throughput with `busy` threads computing, in single-thread equivalents: `busy` over the
/// slowdown there of a work mix with key-switching fraction `ks_fraction`.
pub fn effective_threads(model: &dyn CostModel, ks_fraction: f64, busy: usize) -> f64 {
    let b = busy as f64;
    let s = ks_fraction * model.slowdown(ContentionClass::KeySwitch, b)
        + (1.0 - ks_fraction) * model.slowdown(ContentionClass::Other, b);
    b / s.max(1e-9)
}

/// Busy-thread count (at most the capacity) that maximises throughput for a work mix with
/// key-switching fraction `ks_fraction`: `argmax_B B / slowdown(B)`. Seed 000's Tables 4-5 put
/// it near 64 of the Xeon Phi's 256 hardware threads for relinearization; on a machine without
/// memory-bound contention it is the capacity.
pub fn throughput_optimal_busy(model: &dyn CostModel, ks_fraction: f64) -> usize {
    let cap = model.capacity().max(1);
    let mut best = (cap, 0.0);
    for b in 1..=cap {
        let x = effective_threads(model, ks_fraction, b);
        // Prefer fewer threads unless more buys at least 0.5% throughput.
        if x > best.1 * 1.005 {
            best = (b, x);
        }
    }
    best.0
}

impl CostModel for crate::profile::Profile {
    fn op_ms(&self, op: OpKind, nq: usize, threads: usize) -> f64 {
        let t = threads.max(1);
        let per_thread = self.thread_factors.get(t - 1).copied().unwrap_or(1.0);
        self.job_factor * per_thread * crate::profile::Profile::op_ms(self, op, nq, t)
    }
    fn slowdown(&self, class: ContentionClass, busy: f64) -> f64 {
        crate::profile::Profile::slowdown(self, class, busy)
    }
    fn slowdown_for(&self, class: ContentionClass, busy: f64, threads: usize) -> f64 {
        crate::profile::Profile::slowdown_for(self, class, busy, threads)
    }
    fn task_overhead_ms(&self) -> f64 {
        self.task_overhead_ms
    }
    fn backlog_slowdown(&self, jobs: f64) -> f64 {
        let c = &self.backlog_factors;
        match (c.first(), c.last()) {
            (Some(&(j0, f0)), Some(&(j1, f1))) => {
                if jobs <= j0 {
                    f0
                } else if jobs >= j1 {
                    f1
                } else {
                    let i = c.partition_point(|p| p.0 <= jobs).clamp(1, c.len() - 1);
                    let (a, b) = (c[i - 1], c[i]);
                    a.1 + (b.1 - a.1) * (jobs - a.0) / (b.0 - a.0)
                }
            }
            _ => 1.0,
        }
    }
    fn capacity(&self) -> usize {
        self.capacity
    }
}
