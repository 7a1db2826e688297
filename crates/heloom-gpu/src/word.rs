//! Word sizes the kernels are instantiated for.

use heloom_math::Word;

/// A CKKS word the GPU kernels exist for: `u64` (primes up to 61 bits) and `u32` (up to 31).
pub trait GpuWord: Word + bytemuck::Pod + Default + Send + Sync {
    /// Kernel name suffix (`_u64`, `_u32`).
    const SUFFIX: &'static str;
    /// Bytes per word.
    const BYTES: usize;
}

impl GpuWord for u64 {
    const SUFFIX: &'static str = "_u64";
    const BYTES: usize = 8;
}

impl GpuWord for u32 {
    const SUFFIX: &'static str = "_u32";
    const BYTES: usize = 4;
}
