//! # heloom-runtime
//!
//! The many-core runtime of heloom (seed 000: Suzuki, Ishimaki, Yamana, "task scheduling of
//! CKKS operations on a many-core CPU").
//!
//! - [`ops`]: the operations a cost model prices; [`cost`]: what the scheduler asks of a cost
//!   model.
//! - [`graph`]: HE task graphs: recording, fusion into the paper's task kinds, the built-in
//!   e^x job and any polynomial of the CKKS evaluator as a graph.
//! - [`record`]: what a scheduling run records.
//! - [`metrics`]: latency percentiles, makespan, utilisation and reports of a run.
//! - [`profile`]: cost profiles (seed 000's Xeon Phi tables, or measured on the host);
//!   [`calibrate`]: the host profile checked against real job streams.
//! - [`policy`], [`scheduler`]: thread policies and the list scheduler; [`load`]: arrivals.
//! - [`sim`], [`exec`]: the two executors (simulated, real); [`workload`]: the e^x workload.
//! - [`online`]: the long-running executor: jobs from many tenants, each with its own graph,
//!   keys and inputs, submitted and cancelled at any time.
//! - [`stored`]: graph execution with intermediate values in a `heloom_store::Store` under a
//!   memory budget (spilled to disk, prefetched in execution order).

pub mod calibrate;
pub mod cost;
pub mod exec;
pub mod graph;
pub mod load;
pub mod metrics;
pub mod online;
pub mod ops;
pub mod policy;
pub mod profile;
pub mod record;
pub mod scheduler;
pub mod serialize;
pub mod sim;
pub mod stored;
pub mod workload;

pub use cost::CostModel;
pub use graph::{exp_graph, polynomial_graph, ExpVariant, GraphBuilder, TaskGraph, TaskKind};
pub use metrics::{
    compare_json, jobs_csv, percentile, summarize, summary_csv, summary_table, tasks_csv,
    utilisation, RunSummary,
};
pub use online::{OnlineConfig, OnlineExecutor, OnlineJob, OnlineStats};
pub use ops::{ContentionClass, OpKind};
pub use profile::Profile;
pub use record::{JobRecord, RunRecord, TaskRecord};
