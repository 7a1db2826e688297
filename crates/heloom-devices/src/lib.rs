//! heloom's device layer (seed 001, generalised): devices that take items and report what they can do, and
//! balancers that share one queue of items among them.
//!
//! - [`device`]: the [`Device`] / [`Worker`] / [`Workload`] traits.
//! - [`aes`]: the paper's file-encryption workload and its devices: `cpu` (AES-NI/VAES), `soft` (constant-time
//!   software AES), `kernel` (Linux AF_ALG), `gpu` (with the CUDA backend).
//! - [`balance`]: single device, round robin, polling, pull queue and heloom's learned pull.
//! - [`compare`]: the paper's Tables 2 and 3, the ideal combined time and each method's efficiency.
//! - [`he`]: HE task graphs (e^x jobs from the runtime) carried by the same devices and balancers.

pub mod aes;
pub mod balance;
pub mod compare;
pub mod cost;
pub mod device;
pub mod error;
pub mod he;
pub mod he_gpu;
pub mod spec;
pub mod speed;

pub use balance::{Method, RunReport};
pub use device::{Device, DeviceInfo, DeviceKind, Worker, Workload};
pub use error::{DeviceError, Result};
pub use spec::{open_aes_devices, DeviceSpec};
