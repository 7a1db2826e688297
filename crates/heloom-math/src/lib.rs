//! # heloom-math
//!
//! The arithmetic layer of heloom: everything above it (CKKS, the scheduler, the GPU backend)
//! spends most of its time here.
//!
//! - [`Modulus`]: Barrett, Shoup and Montgomery modular arithmetic behind one [`Word`] trait,
//!   for 64-bit words (primes up to 61 bits) and bit-reduced 32-bit words (primes up to 31 bits).
//! - [`primes`]: NTT-friendly primes and primitive roots.
//! - [`ntt`]: negacyclic NTT and inverse, N = 2^4 .. 2^17.
//! - [`eltwise`]: element-wise kernels on slices.
//! - [`RnsPoly`], [`RnsBasis`]: RNS polynomials (limbs x N, 64-byte aligned) and the basis that
//!   operates on them.
//! - [`backend`]: scalar, AVX2, AVX-512 and AVX-512 IFMA backends chosen at run time.
//! - [`rns`]: fast (approximate) RNS base conversion for hybrid key switching.
//! - [`scaling`]: exact RNS scaling: rescale (divide-and-round by the last prime) and mod-down.
//! - [`sampler`]: ternary, sparse ternary and discrete Gaussian samplers, and uniform
//!   polynomials expanded from a seed with ChaCha20.
//! - [`automorphism`]: Galois automorphisms `X -> X^g` in coefficient and NTT form.
//!
//! ```
//! use heloom_math::{ntt::NttTable, primes};
//! let n = 1 << 12;
//! let q = primes::ntt_primes::<u64>(50, n, 1)?[0];
//! let table = NttTable::<u64>::new(n, q)?;
//! let mut a: Vec<u64> = (0..n as u64).collect();
//! let orig = a.clone();
//! table.forward(&mut a)?;
//! table.inverse(&mut a)?;
//! assert_eq!(a, orig);
//! # Ok::<(), heloom_math::MathError>(())
//! ```

/// Defines a method in two forms from one signature: `name(args)` on one thread, and
/// `name_with(args, threads)` with a thread budget (the one meaning of `_with` in this workspace),
/// whose body is given. `name` calls `name_with(args, Threads::single())`.
macro_rules! threaded {
    ($(
        $(#[$doc:meta])*
        fn $name:ident(&$self:ident $(, $arg:ident: $t:ty)*) -> $ret:ty;
        $(#[$wdoc:meta])*
        fn $with:ident(.., $threads:ident) $body:block
    )*) => {
        $(
            $(#[$doc])*
            pub fn $name(&$self $(, $arg: $t)*) -> $ret {
                $self.$with($($arg,)* $crate::Threads::single())
            }

            $(#[$wdoc])*
            pub fn $with(&$self $(, $arg: $t)*, $threads: $crate::Threads) -> $ret $body
        )*
    };
}

pub mod automorphism;
pub mod backend;
mod buffer;
pub use buffer::{live_buffer_bytes, take_peak_buffer_bytes};
pub mod eltwise;
mod error;
pub mod kernels;
mod modulus;
pub mod ntt;
mod poly;
mod pool;
pub mod primes;
pub mod rns;
pub mod sampler;
pub mod scaling;
mod simd;
mod word;

pub use automorphism::NttPermutation;
pub use backend::{Backend, BackendChoice, IFMA_MAX_PRIME_BITS};
pub use eltwise::Eltwise;
pub use error::{MathError, Result};
pub use modulus::{Modulus, Montgomery32};
pub use ntt::NttTable;
pub use poly::{Form, RnsBasis, RnsPoly};
pub use pool::{BufferPool, Scratch};
pub use rns::BasisConverter;
pub use sampler::Seed;
pub use scaling::{ModDown, Rescaler};
pub use word::Word;

/// The thread budget the `_with` variants of the heavy operations take.
pub use heloom_pool::Threads;
