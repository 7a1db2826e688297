//! Machine words that hold one residue: `u64` (primes up to 61 bits) and `u32` (primes up to 31 bits).
//!
//! The 32-bit word is seed 002's lever: twice the SIMD lanes and half the memory traffic per residue.

use std::fmt::{Debug, Display};
use std::hash::Hash;

mod sealed {
    pub trait Sealed {}
    impl Sealed for u32 {}
    impl Sealed for u64 {}
}

/// An unsigned machine word that stores residues modulo a prime below `2^MAX_PRIME_BITS`.
///
/// Sealed: implemented for `u32` and `u64` only, so every backend can rely on the layout.
pub trait Word:
    sealed::Sealed
    + Copy
    + Default
    + Eq
    + Ord
    + Hash
    + Debug
    + Display
    + Send
    + Sync
    + 'static
    + crate::kernels::Kernels
{
    /// Width of the word in bits.
    const BITS: u32;
    /// Largest supported prime size in bits (two bits of headroom for lazy reduction, Harvey 2014).
    const MAX_PRIME_BITS: u32;
    /// The value 0.
    const ZERO: Self;
    /// The value 1.
    const ONE: Self;

    /// Converts from `u64`, truncating to the word (callers check ranges first).
    fn from_u64(v: u64) -> Self;
    /// Widens to `u64`.
    fn to_u64(self) -> u64;
    /// Wrapping addition.
    fn wadd(self, b: Self) -> Self;
    /// Wrapping subtraction.
    fn wsub(self, b: Self) -> Self;
    /// Wrapping (low-word) multiplication.
    fn wmul(self, b: Self) -> Self;
    /// High word of the double-width product.
    fn mul_hi(self, b: Self) -> Self;
    /// Full double-width product as `(low, high)`.
    fn mul_wide(self, b: Self) -> (Self, Self);
    /// Addition returning the carry.
    fn add_carry(self, b: Self) -> (Self, bool);
}

macro_rules! impl_word {
    ($t:ty, $wide:ty, $max:expr) => {
        impl Word for $t {
            const BITS: u32 = <$t>::BITS;
            const MAX_PRIME_BITS: u32 = $max;
            const ZERO: Self = 0;
            const ONE: Self = 1;
            #[inline(always)]
            fn from_u64(v: u64) -> Self {
                v as $t
            }
            #[inline(always)]
            fn to_u64(self) -> u64 {
                self as u64
            }
            #[inline(always)]
            fn wadd(self, b: Self) -> Self {
                self.wrapping_add(b)
            }
            #[inline(always)]
            fn wsub(self, b: Self) -> Self {
                self.wrapping_sub(b)
            }
            #[inline(always)]
            fn wmul(self, b: Self) -> Self {
                self.wrapping_mul(b)
            }
            #[inline(always)]
            fn mul_hi(self, b: Self) -> Self {
                ((self as $wide * b as $wide) >> <$t>::BITS) as $t
            }
            #[inline(always)]
            fn mul_wide(self, b: Self) -> (Self, Self) {
                let p = self as $wide * b as $wide;
                (p as $t, (p >> <$t>::BITS) as $t)
            }
            #[inline(always)]
            fn add_carry(self, b: Self) -> (Self, bool) {
                self.overflowing_add(b)
            }
        }
    };
}

impl_word!(u64, u128, 61);
impl_word!(u32, u64, 31);
