//! Balancers: how items of one queue reach the devices' workers (seed 001 and heloom's own).
//!
//! Every balancer hands each item to exactly one worker; [`Balancer::run`] checks that after the run and refuses
//! the results otherwise. Outputs come back in item order whatever the order of completion.

use std::time::Duration;

use serde::Serialize;

use crate::cost::CostBook;
use crate::device::{Device, Workload};
use crate::error::Result;

/// A way of sharing one queue of items among devices.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum Method {
    /// Everything on one device (index into the device list).
    Single(usize),
    /// Fixed equal split: item i goes to device i mod D (the paper's round robin).
    RoundRobin,
    /// A dispatcher thread watches every worker and hands the next item to an idle one (the paper's polling).
    Polling,
    /// Workers pull the next item from one shared queue when free (the paper's proposal).
    Pull,
    /// Pull with per-device cost curves learned online, size-aware ends of the queue, guided chunk sizes and an
    /// end-game that makes all devices finish together.
    Heloom,
}

/// What one run did.
#[derive(Clone, Debug, Serialize)]
pub struct RunReport {
    /// Method name (`cpu:1`, `round-robin`, `polling`, `pull`, `heloom`).
    pub method: String,
    /// From the start signal to the last worker's finish, in milliseconds.
    pub ms: f64,
    /// Items each device processed (the paper's Table 3).
    pub items_per_device: Vec<usize>,
    /// Input weight (bytes for AES) each device processed.
    pub weight_per_device: Vec<u64>,
    /// Time each device's workers spent inside items, summed over its workers, in ms.
    pub busy_ms_per_device: Vec<f64>,
    /// When each device's last worker finished, in ms from the start.
    pub finish_ms_per_device: Vec<f64>,
    /// Queue claims made (items or chunks taken from the shared queue).
    pub claims: u64,
    /// Device index that produced each item.
    #[serde(skip)]
    pub producer: Vec<u16>,
}

/// Outputs in item order plus the report.
pub struct Outcome<O> {
    /// One output per item, in item order.
    pub outputs: Vec<O>,
    /// What happened.
    pub report: RunReport,
}

/// A balancer with its learned state (heloom's cost curves persist across runs).
pub struct Balancer {
    method: Method,
    book: CostBook,
    pin: bool,
}

impl Balancer {
    /// A balancer using `method`.
    pub fn new(method: Method) -> Self {
        Balancer { method, book: CostBook::default(), pin: true }
    }

    /// Whether workers are pinned to cores when there are no more workers than cores (default: yes).
    pub fn pin(mut self, pin: bool) -> Self {
        self.pin = pin;
        self
    }

    /// The method.
    pub fn method(&self) -> Method {
        self.method
    }

    /// Runs `work` over `devices`; outputs in item order.
    pub fn run<W: Workload>(&mut self, devices: &[&dyn Device<W>], work: &W) -> Result<Outcome<W::Output>> {
        let _ = (devices, work, &mut self.book, Duration::ZERO);
        unimplemented!("in progress")
    }
}
