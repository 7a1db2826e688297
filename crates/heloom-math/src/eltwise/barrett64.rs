//! Element-wise arithmetic on 64-bit words (primes up to 61 bits) for any vector width: one
//! [`Lanes`] over the instructions of [`Prim64`] (AVX2: 4 lanes, AVX-512 DQ: 8).
//!
//! AVX2 keeps `x` where `x - m` is negative for its conditional subtractions (no unsigned 64-bit
//! compare; every value stays below `m + 2^63`) and assembles 64-bit low products from
//! `vpmuludq` and one `vpmulld` against the half-swapped constant; AVX-512 DQ has `vpminuq` and
//! `vpmullq`.
//!
//! Products of two variables are formed exactly (four 32x32-bit products) and reduced by
//! Barrett (Barrett 1986, the shifted form of Shoup's NTL / Intel HEXL): the quotient estimate
//! `(P >> (b-1)) * floor(2^(62+b) / q) >> 63` comes from three 32x32-bit products and is at most
//! 4 too small, so three conditional subtractions (4q, 2q, q) finish. Products by a constant are
//! Shoup multiplications with a 2^63-scaled companion (any `x < 2^63`). `reduce` of arbitrary
//! words is the same Barrett with `P = x`.

use std::marker::PhantomData;

use super::skeleton::Lanes;
use crate::modulus::Modulus;
use crate::simd::{Multiples, Prim64, Shoup64};

/// The constants of one modulus on instruction set `P`.
#[derive(Clone, Copy)]
pub(crate) struct Barrett64<P: Prim64> {
    /// `q` and its multiples.
    m: Multiples<P>,
    /// Barrett factor `floor(2^(62+b) / q)` (at most 2^63; only its low half is read).
    s: P::V,
    /// Its high 32 bits.
    sh: P::V,
    /// Shift count `65 - b` for the high word of the product.
    shl: P::Cnt,
    /// Shift count `b - 1` for the low word of the product.
    shr: P::Cnt,
    _p: PhantomData<P>,
}

impl<P: Prim64> Barrett64<P> {
    /// `floor(y * s / 2^63)` minus at most 2, for `y < 2^63`, `s <= 2^63`, `sh = s >> 32`:
    /// the dropped `y0*s0 / 2^63 < 2` and the floor of the middle sum lose less than 3. Both
    /// middle products are below 2^63, so their sum fits a word.
    #[inline(always)]
    unsafe fn qhat63(y: P::V, s: P::V, sh: P::V) -> P::V {
        // SAFETY: the features are enabled (trait contract).
        unsafe {
            let y1 = P::shr32(y);
            let hh = P::mul32(y1, sh);
            let mid = P::add(P::mul32(y1, s), P::mul32(y, sh));
            P::add(P::add(hh, hh), P::shr31(mid))
        }
    }

    /// `x * s mod q` in `[0, 4q)` for `x < 2^63` (Shoup with the 2^63-scaled companion: the
    /// companion and `qhat63` lose at most 3 from the quotient).
    #[inline(always)]
    unsafe fn mul_shoup_lazy4(&self, x: P::V, w: &Shoup64<P>) -> P::V {
        // SAFETY: the features are enabled (trait contract).
        unsafe {
            let qh = Self::qhat63(x, w.s, w.sh);
            P::mullo_diff(x, w.w, w.wsw, qh, self.m.q, self.m.qsw)
        }
    }
}

impl<P: Prim64> Lanes for Barrett64<P> {
    type W = u64;
    type V = P::V;
    /// `s` with its 2^63-scaled companion.
    type S = Shoup64<P>;
    /// `q`, its bit length `b` and the Barrett factor `floor(2^(62+b) / q)`.
    type Scalars = (u64, u32, u64);
    /// `s` and its 2^63-scaled companion.
    type Pre = (u64, u64);
    const LANES: usize = P::LANES;

    fn takes(_m: &Modulus<u64>) -> bool {
        true
    }

    fn scalars(m: &Modulus<u64>) -> (u64, u32, u64) {
        let (q, b) = (m.q(), m.bits());
        (q, b, ((1u128 << (62 + b)) / q as u128) as u64)
    }

    fn pre(m: &Modulus<u64>, s: u64) -> (u64, u64) {
        (s, m.shoup(s) >> 1)
    }

    #[inline(always)]
    unsafe fn new(&(q, b, s): &(u64, u32, u64)) -> Self {
        // SAFETY: the features are enabled (trait contract).
        unsafe {
            Self {
                m: Multiples::splat(q),
                s: P::splat(s),
                sh: P::splat(s >> 32),
                shl: P::count(65 - b),
                shr: P::count(b - 1),
                _p: PhantomData,
            }
        }
    }

    #[inline(always)]
    unsafe fn load(&self, p: *const u64) -> P::V {
        // SAFETY: the caller guarantees a readable vector at `p`.
        unsafe { P::load(p) }
    }

    #[inline(always)]
    unsafe fn store(&self, p: *mut u64, v: P::V) {
        // SAFETY: the caller guarantees a writable vector at `p`.
        unsafe { P::store(p, v) }
    }

    #[inline(always)]
    unsafe fn add(&self, a: P::V, b: P::V) -> P::V {
        // SAFETY: the features are enabled (trait contract).
        unsafe { P::red(P::add(a, b), self.m.q) }
    }

    #[inline(always)]
    unsafe fn sub(&self, a: P::V, b: P::V) -> P::V {
        // SAFETY: the features are enabled (trait contract).
        unsafe { P::sub_mod(a, b, self.m.q) }
    }

    #[inline(always)]
    unsafe fn neg(&self, a: P::V) -> P::V {
        // SAFETY: the features are enabled (trait contract).
        unsafe { P::neg_mod(a, self.m.q) }
    }

    #[inline(always)]
    unsafe fn mul(&self, a: P::V, b: P::V) -> P::V {
        // SAFETY: the features are enabled (trait contract).
        unsafe {
            // Exact 122-bit product: a, b < 2^61, so the middle sum stays below 2^63.
            let a1 = P::shr32(a);
            let b1 = P::shr32(b);
            let ll = P::mul32(a, b);
            let mid = P::add(P::add(P::mul32(a, b1), P::mul32(a1, b)), P::shr32(ll));
            let hi = P::add(P::mul32(a1, b1), P::shr32(mid));
            let lo = P::join(P::shl32(mid), ll);
            // Barrett: P >> (b-1) < 2^62; quotient at most 4 below floor(P/q) (2 from the
            // shifted factor, 2 from `qhat63`), so the remainder is in [0, 5q).
            let c1 = P::or(P::sll(hi, self.shl), P::srl(lo, self.shr));
            let qh = Self::qhat63(c1, self.s, self.sh);
            self.m
                .reduce8(P::sub(lo, P::mullo(qh, self.m.q, self.m.qsw)))
        }
    }

    #[inline(always)]
    unsafe fn mul_add(&self, acc: P::V, a: P::V, b: P::V) -> P::V {
        // SAFETY: the features are enabled (trait contract).
        unsafe { self.add(acc, self.mul(a, b)) }
    }

    /// Barrett as in `mul` with `P = x`: `x >> (b-1) < 2^63`, quotient at most 4 low.
    #[inline(always)]
    unsafe fn reduce(&self, x: P::V) -> P::V {
        // SAFETY: the features are enabled (trait contract).
        unsafe {
            let qh = Self::qhat63(P::srl(x, self.shr), self.s, self.sh);
            self.m
                .reduce8(P::sub(x, P::mullo(qh, self.m.q, self.m.qsw)))
        }
    }

    #[inline(always)]
    unsafe fn scalar(&self, (s, ws): (u64, u64)) -> Shoup64<P> {
        // SAFETY: the features are enabled (trait contract).
        unsafe { Shoup64::splat(s, ws) }
    }

    #[inline(always)]
    unsafe fn mul_scalar(&self, x: P::V, s: &Shoup64<P>) -> P::V {
        // SAFETY: the features are enabled (trait contract).
        unsafe { self.m.reduce4(self.mul_shoup_lazy4(x, s)) }
    }

    /// `acc + [0, 4q) < 5q`.
    #[inline(always)]
    unsafe fn mul_scalar_add(&self, acc: P::V, x: P::V, s: &Shoup64<P>) -> P::V {
        // SAFETY: the features are enabled (trait contract).
        unsafe { self.m.reduce8(P::add(acc, self.mul_shoup_lazy4(x, s))) }
    }

    /// Shoup on `a + q - b`, which lies in `(0, 2q)`.
    #[inline(always)]
    unsafe fn sub_mul_scalar(&self, a: P::V, b: P::V, s: &Shoup64<P>) -> P::V {
        // SAFETY: the features are enabled (trait contract).
        unsafe { self.mul_scalar(P::sub(P::add(a, self.m.q), b), s) }
    }
}
