//! The device abstraction: anything that takes items of a workload and reports what it can do.
//!
//! A device opens one [`Worker`] per hardware queue or thread it drives; balancers hand items to workers
//! (or let them pull). Every balancer works with every device, for AES items and HE jobs alike.

use serde::Serialize;

use crate::error::{DeviceError, Result};

/// What kind of engine a device is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DeviceKind {
    /// CPU cores with AES instructions (AES-NI / VAES).
    Cpu,
    /// Constant-time software AES on CPU cores, no AES instructions.
    Soft,
    /// The Linux kernel crypto API (AF_ALG), reaching whatever crypto driver or module the kernel exposes.
    Kernel,
    /// A GPU.
    Gpu,
    /// A share of heloom's CPU worker pool running HE task graphs.
    CpuPool,
}

impl DeviceKind {
    /// Lower-case name as used in device specifications.
    pub fn name(self) -> &'static str {
        match self {
            DeviceKind::Cpu => "cpu",
            DeviceKind::Soft => "soft",
            DeviceKind::Kernel => "kernel",
            DeviceKind::Gpu => "gpu",
            DeviceKind::CpuPool => "cpu-pool",
        }
    }
}

/// What a device reports about itself.
#[derive(Clone, Debug, Serialize)]
pub struct DeviceInfo {
    /// Unique name within a run, e.g. `cpu:1` or `soft`.
    pub name: String,
    /// Engine kind.
    pub kind: DeviceKind,
    /// Workers (threads or hardware queues) it drives at once.
    pub workers: usize,
    /// Implementation, e.g. "AWS-LC AES-NI/VAES" or "kernel driver cbc(aes-aesni)".
    pub engine: String,
    /// Whether it needs CPU cores of its own (true for everything but offload engines).
    pub uses_cpu: bool,
}

impl DeviceInfo {
    /// A `kind` device on `threads` CPU threads, named `kind:threads`, driving `workers`
    /// workers with the `engine` it names; at least one thread, else InvalidParameter.
    pub(crate) fn on_threads(
        kind: DeviceKind,
        threads: usize,
        workers: usize,
        engine: impl FnOnce() -> String,
    ) -> Result<Self> {
        if threads == 0 {
            return Err(DeviceError::InvalidParameter(format!(
                "the {} device needs at least one thread",
                kind.name()
            )));
        }
        Ok(DeviceInfo {
            name: format!("{}:{threads}", kind.name()),
            kind,
            workers,
            engine: engine(),
            uses_cpu: true,
        })
    }
}

/// A workload: a fixed list of items, each with a weight the cost curves scale with (bytes for AES).
pub trait Workload: Sync {
    /// What one item produces.
    type Output: Send;
    /// Number of items.
    fn len(&self) -> usize;
    /// Whether there are no items.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Weight of item `i` (bytes for AES, estimated work for HE jobs).
    fn weight(&self, i: usize) -> u64;
}

/// One worker of a device: processes one item at a time on its own thread.
pub trait Worker<O>: Send {
    /// Processes item `item` of the workload the worker was opened for.
    fn run(&mut self, item: usize) -> Result<O>;
}

/// A device that can process workload `W`.
pub trait Device<W: Workload>: Send + Sync {
    /// What this device is.
    fn info(&self) -> &DeviceInfo;
    /// Opens the device's workers for `work` (key set-up, sockets, contexts); not timed by balancers.
    fn open<'w>(&'w self, work: &'w W) -> Result<Vec<Box<dyn Worker<W::Output> + 'w>>>;
}
