//! # heloom-runtime
//!
//! The many-core runtime of heloom (seed 000: Suzuki, Ishimaki, Yamana, "task scheduling of
//! CKKS operations on a many-core CPU").
//!
//! - [`ops`]: the operations a cost model prices.
//! - [`record`]: what a scheduling run records.
//! - [`metrics`]: latency percentiles, makespan, utilisation and reports of a run.

pub mod metrics;
pub mod ops;
pub mod record;

pub use metrics::{
    compare_json, jobs_csv, percentile, summarize, summary_csv, summary_table, tasks_csv,
    utilisation, RunSummary,
};
pub use ops::{ContentionClass, OpKind};
pub use record::{JobRecord, RunRecord, TaskRecord};
