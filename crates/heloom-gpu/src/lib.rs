//! CUDA backend for heloom's RNS-CKKS.
//!
//! The kernels (`kernels/*.cu`) are compiled at run time by NVRTC through `cudarc`, so the
//! workspace builds with no CUDA toolkit and runs wherever a driver is present ([`Gpu::cuda`]).
//! Polynomials, ciphertexts and keys live on the device ([`GpuContext`], [`GpuCiphertext`],
//! [`GpuSwitchingKey`]); operations chain kernel launches on one stream with no host round trip,
//! and a size-class memory pool recycles device buffers.
//!
//! Kernels: NTT and inverse NTT with coefficient-level parallelism in shared memory (radix-2^k
//! phases, precomputed twiddles with Shoup companions, lazy reduction), element-wise products,
//! the fused rescale, exact base conversion (mod-up, mod-down), hybrid key switching for
//! relinearization and rotation, and the seed-003 naive rescale as a baseline; 64- and 32-bit
//! words. Every one is bit-exact with the CPU backend.
//!
//! With no GPU, [`Gpu::emulator`] runs the very same kernel source on the host (compiled by
//! `build.rs`, one OS thread per GPU thread, `__syncthreads` as a barrier), which is how CI
//! checks the kernels bit for bit; [`nvrtc::compile_check`] compiles them for real GPUs.

pub mod context;
pub mod error;
pub mod gpu;
pub mod nvrtc;
pub mod polyops;
pub mod source;
pub mod word;

pub use context::{
    GpuBootstrapper, GpuCiphertext, GpuContext, GpuEvaluator, GpuPlaintext, GpuSwitchingKey,
};
pub use error::{GpuError, Result};
pub use gpu::{driver_present, Gpu, GpuBuffer, GpuInfo, GpuKind, MemoryStats, NttShape};
pub use word::GpuWord;
