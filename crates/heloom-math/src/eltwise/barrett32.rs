//! Element-wise arithmetic on 32-bit words for any vector width: one [`Lanes`] over the dozen
//! instructions of [`Prim32`] (AVX2: 8 lanes, AVX-512: 16).
//!
//! Pointwise products `a * b mod q` of two arbitrary vectors use a Barrett reduction (Barrett
//! 1986) of the 64-bit products from the even/odd 32x32-bit multiplies, with a 32-bit quotient
//! constant `mu = floor(2^(31+L) / q)` (`L` = bits of q) and the high partial product kept, so
//! the quotient estimate is off by at most one and the remainder `ab - qhat q < 2q` fits a
//! 32-bit lane. It beat Montgomery reduction (Montgomery 1985, R = 2^32) followed by a Shoup
//! multiply by `R mod q` (to leave Montgomery form) by about 13% on Zen 4 (AVX-512; the
//! candidate is kept, tested, in `avx512_u32`). Measured there (2^14 words in L2, one core,
//! medians): Barrett 3.7 us (AVX-512) and 4.4 us (AVX2) for 30- and 31-bit q, Montgomery +
//! Shoup 4.2-4.4 us, the scalar kernel 21 us. Powers of two (not NTT primes, but valid moduli)
//! go to the scalar kernels: their `mu` would be 2^32.
//!
//! Products by a constant `w` are Shoup's (Shoup; Harvey 2014) with `ws = floor(w 2^32 / q)`,
//! exact for any `x < 2^32`; `reduce` is the Shoup product by 1.

use std::marker::PhantomData;

use super::skeleton::Lanes;
use crate::modulus::Modulus;
use crate::simd::Prim32;

/// The constants of one modulus on instruction set `P`.
#[derive(Clone, Copy)]
pub(crate) struct Barrett32<P: Prim32> {
    /// `q` in every lane.
    pub(crate) q: P::V,
    /// `mu = floor(2^(31+L) / q)` (Barrett quotient constant, below 2^32).
    mu: P::V,
    /// `floor(2^32 / q)`, the Shoup companion of 1 (for `reduce`).
    r: P::V,
    /// Shift `s = L - 1`.
    s: P::Cnt,
    /// `32 - s`.
    s_up: P::Cnt,
    _p: PhantomData<P>,
}

impl<P: Prim32> Barrett32<P> {
    /// `x - q` if `x >= q`, else `x` (`x < 2q`).
    #[inline(always)]
    unsafe fn csub(&self, x: P::V) -> P::V {
        // SAFETY: the features are enabled (trait contract).
        unsafe { P::min(x, P::sub(x, self.q)) }
    }

    /// `x * w mod q` in `[0, 2q)` for any `x < 2^32`, `w < q`, `ws = floor(w 2^32 / q)`
    /// (`w` already multiplied in: `xw` is `x * w mod 2^32`).
    #[inline(always)]
    unsafe fn shoup_lazy(&self, x: P::V, xw: P::V, ws: P::V) -> P::V {
        // SAFETY: the features are enabled (trait contract).
        unsafe {
            let even = P::mul_even(x, ws);
            let odd = P::mul_even(P::odd_down(x), ws);
            P::sub(xw, P::mullo(P::merge_hi(even, odd), self.q))
        }
    }

    /// Barrett quotient of the 64-bit products in `p` (one per 64-bit lane, `p < q^2`):
    /// `floor((p_hi mu + hi32(p_lo mu)) / 2^s)`, at most one below `floor(p / q)`.
    #[inline(always)]
    unsafe fn barrett_t(&self, p: P::V) -> P::V {
        // SAFETY: the features are enabled (trait contract).
        unsafe {
            let hi = P::mul_even(P::odd_down(p), self.mu);
            let lo = P::odd_down(P::mul_even(p, self.mu));
            P::add64(hi, lo)
        }
    }
}

impl<P: Prim32> Lanes for Barrett32<P> {
    type W = u32;
    type V = P::V;
    /// `w` and `ws` broadcast.
    type S = (P::V, P::V);
    /// `q`, `mu`, the Shoup companion of 1 and the shift `s`.
    type Scalars = (u32, u32, u32, u32);
    /// `w` and its Shoup companion.
    type Pre = (u32, u32);
    const LANES: usize = P::LANES;

    fn takes(m: &Modulus<u32>) -> bool {
        !m.q().is_power_of_two()
    }

    fn scalars(m: &Modulus<u32>) -> (u32, u32, u32, u32) {
        let (q, s) = (m.q(), m.bits() - 1);
        let mu = ((1u64 << (32 + s)) / q as u64) as u32;
        (q, mu, m.shoup(1), s)
    }

    fn pre(m: &Modulus<u32>, s: u32) -> (u32, u32) {
        (s, m.shoup(s))
    }

    #[inline(always)]
    unsafe fn new(&(q, mu, r, s): &(u32, u32, u32, u32)) -> Self {
        // SAFETY: the features are enabled (trait contract).
        unsafe {
            Self {
                q: P::splat(q),
                mu: P::splat(mu),
                r: P::splat(r),
                s: P::count(s),
                s_up: P::count(32 - s),
                _p: PhantomData,
            }
        }
    }

    #[inline(always)]
    unsafe fn load(&self, p: *const u32) -> P::V {
        // SAFETY: the caller guarantees a readable vector at `p`.
        unsafe { P::load(p) }
    }

    #[inline(always)]
    unsafe fn store(&self, p: *mut u32, v: P::V) {
        // SAFETY: the caller guarantees a writable vector at `p`.
        unsafe { P::store(p, v) }
    }

    #[inline(always)]
    unsafe fn add(&self, a: P::V, b: P::V) -> P::V {
        // SAFETY: the features are enabled (trait contract).
        unsafe { self.csub(P::add(a, b)) }
    }

    /// The wrapped difference is huge exactly when `a < b`; then `d + q` is the smaller one.
    #[inline(always)]
    unsafe fn sub(&self, a: P::V, b: P::V) -> P::V {
        // SAFETY: the features are enabled (trait contract).
        unsafe {
            let d = P::sub(a, b);
            P::min(d, P::add(d, self.q))
        }
    }

    /// `q - 0 = q` folds to 0 by the conditional subtraction.
    #[inline(always)]
    unsafe fn neg(&self, a: P::V) -> P::V {
        // SAFETY: the features are enabled (trait contract).
        unsafe { self.csub(P::sub(self.q, a)) }
    }

    /// Barrett (module docs): 18 vector operations, 8 of them multiplies.
    #[inline(always)]
    unsafe fn mul(&self, a: P::V, b: P::V) -> P::V {
        // SAFETY: the features are enabled (trait contract).
        unsafe {
            let pe = P::mul_even(a, b);
            let po = P::mul_even(P::odd_down(a), P::odd_down(b));
            // Quotients: even ones shifted down into the low words, odd ones shifted up into
            // the high words (t < 2^(31+L), so the left shift by 32 - s loses nothing).
            let qe = P::srl64(self.barrett_t(pe), self.s);
            let qo = P::sll64(self.barrett_t(po), self.s_up);
            let qhat = P::blend_odd(qe, qo);
            // ab - qhat q is in [0, 2q): exact in wrapping 32-bit arithmetic.
            self.csub(P::sub(P::mullo(a, b), P::mullo(qhat, self.q)))
        }
    }

    #[inline(always)]
    unsafe fn mul_add(&self, acc: P::V, a: P::V, b: P::V) -> P::V {
        // SAFETY: the features are enabled (trait contract).
        unsafe { self.add(acc, self.mul(a, b)) }
    }

    /// Shoup's product by 1: `x - hi(x floor(2^32/q)) q` in `[0, 2q)`, then one conditional
    /// subtraction.
    #[inline(always)]
    unsafe fn reduce(&self, x: P::V) -> P::V {
        // SAFETY: the features are enabled (trait contract).
        unsafe { self.csub(self.shoup_lazy(x, x, self.r)) }
    }

    #[inline(always)]
    unsafe fn scalar(&self, (w, ws): (u32, u32)) -> (P::V, P::V) {
        // SAFETY: the features are enabled (trait contract).
        unsafe { (P::splat(w), P::splat(ws)) }
    }

    #[inline(always)]
    unsafe fn mul_scalar(&self, x: P::V, &(w, ws): &(P::V, P::V)) -> P::V {
        // SAFETY: the features are enabled (trait contract).
        unsafe { self.csub(self.shoup_lazy(x, P::mullo(x, w), ws)) }
    }

    #[inline(always)]
    unsafe fn mul_scalar_add(&self, acc: P::V, x: P::V, s: &(P::V, P::V)) -> P::V {
        // SAFETY: the features are enabled (trait contract).
        unsafe { self.add(acc, self.mul_scalar(x, s)) }
    }

    /// Shoup on `a + q - b`, which lies in `(0, 2q)`.
    #[inline(always)]
    unsafe fn sub_mul_scalar(&self, a: P::V, b: P::V, s: &(P::V, P::V)) -> P::V {
        // SAFETY: the features are enabled (trait contract).
        unsafe { self.mul_scalar(P::sub(P::add(a, self.q), b), s) }
    }
}
