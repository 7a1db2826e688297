//! The vector instructions heloom's SIMD kernels are written over: one trait per word size
//! ([`Prim32`], [`Prim64`]), implemented once per instruction set ([`avx2::Avx2`],
//! [`avx512::Avx512`]). The element-wise kernels (`eltwise::barrett32`, `eltwise::barrett64`)
//! and the 32-bit NTT butterflies (`ntt::shoup32`) are generic over them, so a NEON or SVE port
//! implements these traits (and its NTT register tail) and nothing else.
//!
//! Every function is an `unsafe fn` under its instruction set's `#[target_feature]`; generic
//! code calls them only from inside a function with those features enabled, after the backend
//! was checked against the CPU.

pub(crate) mod avx2;
pub(crate) mod avx512;

/// Defines one-instruction trait methods under a target feature, one line each:
/// `prims! { "avx2"; fn add(a: V, b: V) -> V = _mm256_add_epi32(a, b); }`. With `safe` first,
/// defines (safe) register-only helper functions in the same way.
macro_rules! prims {
    ($feat:literal; $(fn $name:ident($($arg:ident: $t:ty),*) -> $r:ty = $body:expr;)*) => {
        $(
            #[inline]
            #[target_feature(enable = $feat)]
            unsafe fn $name($($arg: $t),*) -> $r {
                $body
            }
        )*
    };
    (safe $feat:literal; $($(#[$doc:meta])* fn $name:ident($($arg:ident: $t:ty),*) -> $r:ty = $body:expr;)*) => {
        $(
            $(#[$doc])*
            #[inline]
            #[target_feature(enable = $feat)]
            fn $name($($arg: $t),*) -> $r {
                $body
            }
        )*
    };
}
pub(crate) use prims;

/// Defines the unaligned `load` and `store` trait methods of `$w` words in `$v` registers.
macro_rules! mem {
    ($feat:literal, $w:ty, $v:ty, $load:path, $store:path) => {
        #[inline]
        #[target_feature(enable = $feat)]
        unsafe fn load(p: *const $w) -> $v {
            // SAFETY: the caller guarantees one register of readable words at `p`.
            unsafe { $load(p.cast()) }
        }

        #[inline]
        #[target_feature(enable = $feat)]
        unsafe fn store(p: *mut $w, v: $v) {
            // SAFETY: the caller guarantees one register of writable words at `p`.
            unsafe { $store(p.cast(), v) }
        }
    };
}
pub(crate) use mem;

/// The vector instructions the 32-bit kernels need (element-wise Barrett and Shoup products,
/// the Shoup NTT butterflies). Every function needs the implementor's
/// CPU features.
pub(crate) trait Prim32: Copy {
    /// A vector of 32-bit lanes.
    type V: Copy;
    /// A shift count.
    type Cnt: Copy;
    /// Lanes per vector.
    const LANES: usize;
    /// Zero in every lane.
    unsafe fn zero() -> Self::V;
    /// `x` in every lane.
    unsafe fn splat(x: u32) -> Self::V;
    /// A shift count of `n` bits.
    unsafe fn count(n: u32) -> Self::Cnt;
    /// Unaligned load.
    unsafe fn load(p: *const u32) -> Self::V;
    /// Unaligned store.
    unsafe fn store(p: *mut u32, v: Self::V);
    /// Wrapping 32-bit addition.
    unsafe fn add(a: Self::V, b: Self::V) -> Self::V;
    /// Wrapping 32-bit subtraction.
    unsafe fn sub(a: Self::V, b: Self::V) -> Self::V;
    /// Unsigned 32-bit minimum.
    unsafe fn min(a: Self::V, b: Self::V) -> Self::V;
    /// Low 32 bits of the 32x32-bit products.
    unsafe fn mullo(a: Self::V, b: Self::V) -> Self::V;
    /// The 64-bit products of the even 32-bit lanes, one per 64-bit lane.
    unsafe fn mul_even(a: Self::V, b: Self::V) -> Self::V;
    /// Each 64-bit lane shifted right by 32 (odd words into the even positions).
    unsafe fn odd_down(a: Self::V) -> Self::V;
    /// Wrapping 64-bit addition.
    unsafe fn add64(a: Self::V, b: Self::V) -> Self::V;
    /// 64-bit lanes shifted right by `c`.
    unsafe fn srl64(a: Self::V, c: Self::Cnt) -> Self::V;
    /// 64-bit lanes shifted left by `c`.
    unsafe fn sll64(a: Self::V, c: Self::Cnt) -> Self::V;
    /// Even 32-bit lanes from `even`, odd lanes from `odd`.
    unsafe fn blend_odd(even: Self::V, odd: Self::V) -> Self::V;
    /// Even lanes from the high words of `even`'s 64-bit lanes, odd lanes from `odd`.
    unsafe fn merge_hi(even: Self::V, odd: Self::V) -> Self::V;
}

/// The vector instructions the 64-bit kernels need (element-wise Barrett and Shoup products). Every function needs the implementor's
/// CPU features.
pub(crate) trait Prim64: Copy {
    /// A vector of 64-bit lanes.
    type V: Copy;
    /// A shift count.
    type Cnt: Copy;
    /// Lanes per vector.
    const LANES: usize;
    /// Zero in every lane.
    unsafe fn zero() -> Self::V;
    /// `x` in every lane.
    unsafe fn splat(x: u64) -> Self::V;
    /// A shift count of `n` bits.
    unsafe fn count(n: u32) -> Self::Cnt;
    /// Unaligned load.
    unsafe fn load(p: *const u64) -> Self::V;
    /// Unaligned store.
    unsafe fn store(p: *mut u64, v: Self::V);
    /// Wrapping addition.
    unsafe fn add(a: Self::V, b: Self::V) -> Self::V;
    /// Wrapping subtraction.
    unsafe fn sub(a: Self::V, b: Self::V) -> Self::V;
    /// Bitwise or.
    unsafe fn or(a: Self::V, b: Self::V) -> Self::V;
    /// The 64-bit products of the low 32-bit halves.
    unsafe fn mul32(a: Self::V, b: Self::V) -> Self::V;
    /// Shifted right by 32.
    unsafe fn shr32(a: Self::V) -> Self::V;
    /// Shifted right by 31.
    unsafe fn shr31(a: Self::V) -> Self::V;
    /// Shifted left by 32.
    unsafe fn shl32(a: Self::V) -> Self::V;
    /// Shifted right by `c`.
    unsafe fn srl(a: Self::V, c: Self::Cnt) -> Self::V;
    /// Shifted left by `c`.
    unsafe fn sll(a: Self::V, c: Self::Cnt) -> Self::V;
    /// High 32 bits from `hi`, low 32 bits from `lo`.
    unsafe fn join(hi: Self::V, lo: Self::V) -> Self::V;
    /// `x * w mod 2^64`; `wsw` is `w` with its 32-bit halves swapped (for instruction sets
    /// that assemble the product from 32-bit multiplies).
    unsafe fn mullo(x: Self::V, w: Self::V, wsw: Self::V) -> Self::V;
    /// `y * w - x * v mod 2^64` (`wsw`, `vsw`: `w`, `v` half-swapped, see [`Prim64::mullo`]).
    unsafe fn mullo_diff(
        y: Self::V,
        w: Self::V,
        wsw: Self::V,
        x: Self::V,
        v: Self::V,
        vsw: Self::V,
    ) -> Self::V;
    /// The two 32-bit halves of each lane swapped.
    unsafe fn swap_halves(a: Self::V) -> Self::V;
    /// `x - m` if `x >= m`, else `x`, for `m <= 2^63` and `x < min(2m, m + 2^63)`.
    unsafe fn red(x: Self::V, m: Self::V) -> Self::V;
    /// `a - b mod q` for reduced `a`, `b`.
    unsafe fn sub_mod(a: Self::V, b: Self::V, q: Self::V) -> Self::V;
    /// `-x mod q` for reduced `x`.
    unsafe fn neg_mod(x: Self::V, q: Self::V) -> Self::V;
}

/// A 64-bit multiplier `w` in vector form for Shoup products: `w`, `w` with its 32-bit halves
/// swapped (for instruction sets that assemble 64-bit low products from 32-bit ones), a Shoup
/// companion `s` (scaled by 2^64 in the NTT, by 2^63 in the element-wise kernels) and `s >> 32`.
#[derive(Clone, Copy)]
pub(crate) struct Shoup64<P: Prim64> {
    /// The multiplier.
    pub(crate) w: P::V,
    /// The multiplier with its 32-bit halves swapped.
    pub(crate) wsw: P::V,
    /// The companion (only its low 32 bits are read).
    pub(crate) s: P::V,
    /// `s >> 32`.
    pub(crate) sh: P::V,
}

impl<P: Prim64> Shoup64<P> {
    /// Broadcasts the multiplier `w` with companion `s`.
    ///
    /// # Safety
    /// The CPU has `P`'s features.
    #[inline(always)]
    pub(crate) unsafe fn splat(w: u64, s: u64) -> Self {
        // SAFETY: the features are enabled (caller).
        unsafe {
            Self {
                w: P::splat(w),
                wsw: P::splat(w.rotate_left(32)),
                s: P::splat(s),
                sh: P::splat(s >> 32),
            }
        }
    }

    /// Per-lane multipliers from vectors of values and companions.
    ///
    /// # Safety
    /// The CPU has `P`'s features.
    #[inline(always)]
    pub(crate) unsafe fn lanes(w: P::V, s: P::V) -> Self {
        // SAFETY: the features are enabled (caller).
        unsafe {
            Self {
                w,
                wsw: P::swap_halves(w),
                s,
                sh: P::shr32(s),
            }
        }
    }

    /// A placeholder (all zero) for initializing arrays.
    ///
    /// # Safety
    /// The CPU has `P`'s features.
    #[inline(always)]
    pub(crate) unsafe fn zero() -> Self {
        // SAFETY: the features are enabled (caller).
        let z = unsafe { P::zero() };
        Self {
            w: z,
            wsw: z,
            s: z,
            sh: z,
        }
    }
}

/// A 64-bit modulus in every lane with the multiples that lazy reductions subtract.
#[derive(Clone, Copy)]
pub(crate) struct Multiples<P: Prim64> {
    /// The modulus.
    pub(crate) q: P::V,
    /// `2q`.
    pub(crate) q2: P::V,
    /// `4q`.
    pub(crate) q4: P::V,
    /// `q` with its 32-bit halves swapped (see [`Prim64::mullo`]).
    pub(crate) qsw: P::V,
}

impl<P: Prim64> Multiples<P> {
    /// Broadcasts `q < 2^62` and its multiples.
    ///
    /// # Safety
    /// The CPU has `P`'s features.
    #[inline(always)]
    pub(crate) unsafe fn splat(q: u64) -> Self {
        // SAFETY: the features are enabled (caller).
        unsafe {
            Self {
                q: P::splat(q),
                q2: P::splat(2 * q),
                q4: P::splat(4 * q),
                qsw: P::splat(q.rotate_left(32)),
            }
        }
    }

    /// `x mod q` for `x < 4q` (two conditional subtractions).
    ///
    /// # Safety
    /// The CPU has `P`'s features.
    #[inline(always)]
    pub(crate) unsafe fn reduce4(&self, x: P::V) -> P::V {
        // SAFETY: the features are enabled (caller).
        unsafe { P::red(P::red(x, self.q2), self.q) }
    }

    /// `x mod q` for `x < 8q` (three conditional subtractions).
    ///
    /// # Safety
    /// The CPU has `P`'s features.
    #[inline(always)]
    pub(crate) unsafe fn reduce8(&self, x: P::V) -> P::V {
        // SAFETY: the features are enabled (caller).
        unsafe { self.reduce4(P::red(x, self.q4)) }
    }
}
