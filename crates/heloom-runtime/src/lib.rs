//! # heloom-runtime
//!
//! The many-core runtime of heloom (seed 000: Suzuki, Ishimaki, Yamana, "task scheduling of
//! CKKS operations on a many-core CPU").
//!
//! - [`ops`]: the operations a cost model prices.
//! - [`record`]: what a scheduling run records.

pub mod ops;
pub mod record;

pub use ops::{ContentionClass, OpKind};
pub use record::{JobRecord, RunRecord, TaskRecord};
