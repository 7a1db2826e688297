//! The Shoup 64-bit kernel family (AVX2 and AVX-512 without IFMA): the lockstep butterflies,
//! written once over the instructions of [`Prim64`], the block loop of the register tail, and
//! one [`Kernel`](super::skeleton::Kernel) per instruction set (the `kernel!` macro). The two
//! instruction-set files keep only their register tails.
//!
//! Twiddle multiplication is Shoup's (Shoup 2007, Harvey 2014 Alg. 2) with the core's
//! companions `s = floor(w * 2^64 / q)`: the quotient `floor(y * s / 2^64)` is estimated from
//! three 32x32-bit products (the low x low one dropped), at most 2 below Shoup's, so the product
//! is in `[0, 4q)`. Lazy ranges one step wider than Harvey's: forward values in `[0, 8q)`
//! (`8q < 2^64`), the unmultiplied input reduced to `[0, 4q)` and the product left in
//! `[0, 4q)`; inverse values in `[0, 4q)`. One conditional subtraction per butterfly.
//!
//! Every function here is `#[inline(always)]` and needs the instruction set's features: it is
//! compiled inside that set's `#[target_feature]` code.

use crate::simd::{Multiples, Prim64, Shoup64};

/// A twiddle factor in vector form (its companion scaled by 2^64).
pub(super) type Tw<P> = Shoup64<P>;

/// Multiples of the modulus in every lane.
pub(super) type Consts<P> = Multiples<P>;

/// `y[i] * w[i] mod q` in `[0, 4q)` for any words `y[i]` (Shoup with an approximate quotient),
/// `K` products computed step by step in lockstep: the out-of-order window then always holds
/// independent work (each product alone is one long dependency chain).
///
/// `qhat = y1*s1 + (y1*s0 >> 32) + (y0*s1 >> 32)` drops `y0*s0 / 2^64 < 1` and two floors, so
/// it is at most 2 below Shoup's `floor(y*s/2^64)`, whose remainder is below `2q`: the result is
/// below `4q`. The middle products are shifted separately, so no sum can overflow.
#[inline(always)]
pub(super) unsafe fn mul_lazy<P: Prim64, const K: usize>(
    y: [P::V; K],
    tw: [Tw<P>; K],
    c: &Consts<P>,
) -> [P::V; K] {
    // SAFETY: the features are enabled (module contract).
    unsafe {
        let z = P::zero();
        let (mut y1, mut qh, mut r) = ([z; K], [z; K], [z; K]);
        for i in 0..K {
            y1[i] = P::shr32(y[i]);
        }
        for i in 0..K {
            let hl = P::shr32(P::mul32(y1[i], tw[i].s));
            let lh = P::shr32(P::mul32(y[i], tw[i].sh));
            qh[i] = P::add(hl, lh);
        }
        for i in 0..K {
            qh[i] = P::add(qh[i], P::mul32(y1[i], tw[i].sh));
        }
        for i in 0..K {
            r[i] = P::mullo_diff(y[i], tw[i].w, tw[i].wsw, qh[i], c.q, c.qsw);
        }
        r
    }
}

/// `K` forward (Cooley-Tukey) butterflies after Harvey, in lockstep: inputs and outputs in
/// `[0, 8q)`; `x` is reduced to `[0, 4q)` and the product, in `[0, 4q)`, is used unreduced.
/// Returns `[x', y']` per butterfly.
#[inline(always)]
pub(super) unsafe fn fwd_bf<P: Prim64, const K: usize>(
    x: [P::V; K],
    y: [P::V; K],
    tw: [Tw<P>; K],
    c: &Consts<P>,
) -> [[P::V; 2]; K] {
    // SAFETY: the features are enabled (module contract).
    unsafe {
        let v = mul_lazy(y, tw, c);
        let mut out = [[P::zero(); 2]; K];
        for i in 0..K {
            let u = P::red(x[i], c.q4);
            out[i] = [P::add(u, v[i]), P::sub(P::add(u, c.q4), v[i])];
        }
        out
    }
}

/// `K` inverse (Gentleman-Sande) butterflies after Harvey, in lockstep: inputs and outputs in
/// `[0, 4q)`; the sum is reduced from `[0, 8q)`, the product is used unreduced.
#[inline(always)]
pub(super) unsafe fn inv_bf<P: Prim64, const K: usize>(
    x: [P::V; K],
    y: [P::V; K],
    tw: [Tw<P>; K],
    c: &Consts<P>,
) -> [[P::V; 2]; K] {
    // SAFETY: the features are enabled (module contract).
    unsafe {
        let mut d = [P::zero(); K];
        for i in 0..K {
            d[i] = P::sub(P::add(x[i], c.q4), y[i]);
        }
        let v = mul_lazy(d, tw, c);
        let mut out = [[P::zero(); 2]; K];
        for i in 0..K {
            out[i] = [P::red(P::add(x[i], y[i]), c.q4), v[i]];
        }
        out
    }
}

/// Runs the register tail over `[off, off + len)`: `f(k, true)` on 32 words at `k` while they
/// fit, then `f(k, false)` on 16 (`off` and `len` are multiples of 16).
#[inline(always)]
pub(super) fn tail_blocks(off: usize, len: usize, mut f: impl FnMut(usize, bool)) {
    let mut k = off;
    while k + 32 <= off + len {
        f(k, true);
        k += 32;
    }
    while k < off + len {
        f(k, false);
        k += 16;
    }
}

/// Defines the backend's `Tables`, `forward` and `inverse`, and `Kern`, the
/// [`Kernel`](super::skeleton::Kernel) of a Shoup 64-bit instruction set `$isa` (registers `$v`),
/// with the `forward_impl` / `inverse_impl` entry points under its target features. Expects in
/// scope: `NttCore`, `Kernel`, `Prim64`, and the register tail and head functions named
/// (`unsafe fn(&NttCore<u64>, &Consts<$isa>, *mut u64, off, len)`).
macro_rules! kernel {
    (
        $feat:literal,
        $isa:ty,
        $v:ty,
        lanes = $lanes:literal,
        tail_log = $tail_log:literal,
        max_pass = $max_pass:literal,
        tail = $tail:ident,
        head = $head:ident,
        zero = $zero:path
    ) => {
        /// Backend-specific tables: none beyond the core's; the kernels read the roots and their
        /// 2^64-scaled Shoup companions directly (see `shoup64::mul_lazy`).
        #[derive(Debug)]
        pub struct Tables {}

        impl Tables {
            /// Builds the tables from the core precomputation.
            pub(crate) fn new(_core: &NttCore<u64>) -> Self {
                Self {}
            }
        }

        /// Forward NTT in place.
        pub(crate) fn forward(core: &NttCore<u64>, _t: &Tables, a: &mut [u64]) {
            // SAFETY: tables of this backend are only built after the CPU was checked for its
            // features (`Backend::check`); `a.len() == core.n()` is checked by the caller.
            unsafe { forward_impl(core, a) }
        }

        /// Inverse NTT in place.
        pub(crate) fn inverse(core: &NttCore<u64>, _t: &Tables, a: &mut [u64]) {
            // SAFETY: as in `forward`.
            unsafe { inverse_impl(core, a) }
        }

        /// Forward transform through the shared skeleton.
        ///
        /// # Safety
        /// The features are available; `a.len() == core.n`.
        #[target_feature(enable = $feat)]
        unsafe fn forward_impl(core: &NttCore<u64>, a: &mut [u64]) {
            let k = Kern::new(core);
            // SAFETY: the features are enabled here (caller) and `a` holds the N words.
            unsafe { super::skeleton::forward(&k, a.as_mut_ptr()) }
        }

        /// Inverse transform through the shared skeleton.
        ///
        /// # Safety
        /// As [`forward_impl`].
        #[target_feature(enable = $feat)]
        unsafe fn inverse_impl(core: &NttCore<u64>, a: &mut [u64]) {
            let k = Kern::new(core);
            // SAFETY: as in `forward_impl`.
            unsafe { super::skeleton::inverse(&k, a.as_mut_ptr()) }
        }

        /// The modulus constants of this instruction set.
        type Consts = super::shoup64::Consts<$isa>;
        /// A twiddle of this instruction set.
        type Tw = super::shoup64::Tw<$isa>;

        /// The butterflies and tail of one instruction set for one table.
        struct Kern<'a> {
            /// The table.
            core: &'a NttCore<u64>,
            /// Multiples of the modulus.
            c: Consts,
            /// `N^-1` (last inverse layer, sum branch).
            ni: Tw,
            /// `N^-1 psi^-bitrev(1)` (last inverse layer, difference branch).
            nw: Tw,
        }

        impl<'a> Kern<'a> {
            /// Broadcasts the constants of `core`.
            #[inline]
            #[target_feature(enable = $feat)]
            fn new(core: &'a NttCore<u64>) -> Self {
                // SAFETY: the features are enabled here.
                unsafe {
                    Self {
                        core,
                        c: Consts::splat(core.modulus.q()),
                        ni: Tw::splat(core.n_inv.0, core.n_inv.1),
                        nw: Tw::splat(core.n_inv_w.0, core.n_inv_w.1),
                    }
                }
            }
        }

        impl Kernel for Kern<'_> {
            type W = u64;
            type V = $v;
            type Tw = Tw;
            const LANES: usize = $lanes;
            const TAIL_LOG: u32 = $tail_log;
            const BLOCK_LOG: u32 = 11;
            const MAX_PASS: u32 = $max_pass;
            const WIDE: bool = true;

            super::skeleton::plumbing!(
                $feat,
                u64,
                $v,
                zero = $zero,
                load = <$isa as Prim64>::load,
                store = <$isa as Prim64>::store
            );

            #[inline]
            #[target_feature(enable = $feat)]
            unsafe fn fwd_tw(&self, idx: usize) -> Tw {
                // SAFETY: the features are enabled here.
                unsafe { Tw::splat(self.core.roots[idx], self.core.roots_shoup[idx]) }
            }

            #[inline]
            #[target_feature(enable = $feat)]
            unsafe fn inv_tw(&self, idx: usize) -> Tw {
                // SAFETY: the features are enabled here.
                unsafe { Tw::splat(self.core.inv_roots[idx], self.core.inv_roots_shoup[idx]) }
            }

            #[inline]
            #[target_feature(enable = $feat)]
            unsafe fn fwd_bfs<const M: usize>(
                &self,
                mut x: [$v; M],
                mut y: [$v; M],
                t: [Tw; M],
                _first: bool,
            ) -> ([$v; M], [$v; M]) {
                // SAFETY: the features are enabled here.
                let out = unsafe { super::shoup64::fwd_bf(x, y, t, &self.c) };
                for i in 0..M {
                    [x[i], y[i]] = out[i];
                }
                (x, y)
            }

            #[inline]
            #[target_feature(enable = $feat)]
            unsafe fn inv_bfs<const M: usize>(
                &self,
                mut x: [$v; M],
                mut y: [$v; M],
                t: [Tw; M],
                top: bool,
            ) -> ([$v; M], [$v; M]) {
                let c = &self.c;
                // SAFETY: the features are enabled here.
                unsafe {
                    if !top {
                        let out = super::shoup64::inv_bf(x, y, t, c);
                        for i in 0..M {
                            [x[i], y[i]] = out[i];
                        }
                        return (x, y);
                    }
                    // The last layer: inputs in [0, 4q), so the sum and the shifted difference
                    // stay below 8q, and the products of any word are in [0, 4q).
                    let (mut s, mut d) = (x, y);
                    for i in 0..M {
                        s[i] = <$isa as Prim64>::add(x[i], y[i]);
                        d[i] = <$isa as Prim64>::sub(<$isa as Prim64>::add(x[i], c.q4), y[i]);
                    }
                    let ps = super::shoup64::mul_lazy(s, [self.ni; M], c);
                    let pd = super::shoup64::mul_lazy(d, [self.nw; M], c);
                    for i in 0..M {
                        x[i] = c.reduce4(ps[i]);
                        y[i] = c.reduce4(pd[i]);
                    }
                }
                (x, y)
            }

            #[inline]
            #[target_feature(enable = $feat)]
            unsafe fn fwd_tail(&self, a: *mut u64, base: usize, len: usize) {
                // SAFETY: forwarded from the caller (features, bounds, multiples of 2^TAIL_LOG).
                unsafe { $tail(self.core, &self.c, a, base, len) }
            }

            #[inline]
            #[target_feature(enable = $feat)]
            unsafe fn inv_head(&self, a: *mut u64, base: usize, len: usize) {
                // SAFETY: as in `fwd_tail`.
                unsafe { $head(self.core, &self.c, a, base, len) }
            }
        }
    };
}

pub(crate) use kernel;
