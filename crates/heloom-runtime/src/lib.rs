//! # heloom-runtime
//!
//! The many-core runtime of heloom (seed 000: Suzuki, Ishimaki, Yamana, "task scheduling of
//! CKKS operations on a many-core CPU").
//!
//! - [`ops`]: the operations a cost model prices.
//! - [`record`]: what a scheduling run records.
//! - [`profile`]: cost profiles (seed 000's Xeon Phi tables, or measured on the host).

pub mod ops;
pub mod profile;
pub mod record;

pub use ops::{ContentionClass, OpKind};
pub use profile::Profile;
pub use record::{JobRecord, RunRecord, TaskRecord};
