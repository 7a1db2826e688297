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

use super::NttCore;
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

/// `K` butterflies after Harvey, in lockstep; returns `[x', y']` per butterfly.
/// - Forward (`FWD`, Cooley-Tukey): inputs and outputs in `[0, 8q)`; `x` is reduced to
///   `[0, 4q)` and the product `w y`, in `[0, 4q)`, is used unreduced.
/// - Inverse (Gentleman-Sande): inputs and outputs in `[0, 4q)`; the sum is reduced from
///   `[0, 8q)`, the product `w (x - y)` is used unreduced.
#[inline(always)]
pub(super) unsafe fn bf<P: Prim64, const K: usize, const FWD: bool>(
    x: [P::V; K],
    y: [P::V; K],
    tw: [Tw<P>; K],
    c: &Consts<P>,
) -> [[P::V; 2]; K] {
    // SAFETY: the features are enabled (module contract).
    unsafe {
        let mut out = [[P::zero(); 2]; K];
        if FWD {
            let v = mul_lazy(y, tw, c);
            for i in 0..K {
                let u = P::red(x[i], c.q4);
                out[i] = [P::add(u, v[i]), P::sub(P::add(u, c.q4), v[i])];
            }
        } else {
            let mut d = [P::zero(); K];
            for i in 0..K {
                d[i] = P::sub(P::add(x[i], c.q4), y[i]);
            }
            let v = mul_lazy(d, tw, c);
            for i in 0..K {
                out[i] = [P::red(P::add(x[i], y[i]), c.q4), v[i]];
            }
        }
        out
    }
}

/// The register tail of a Shoup 64-bit instruction set: the layers whose pairs lie within one
/// block of `2 * LANES` words (distances `LANES / 2` down to 1) run on whole blocks held in two
/// registers, with shuffles between layers and per-lane twiddle vectors. An instruction set
/// gives only its shuffles (on the two registers of a block); the loads, the block loop and the
/// butterflies are this module's.
///
/// Every method needs the instruction set's features (module contract).
pub(super) trait Tail64: Prim64 {
    /// In-register layers: `log2(LANES) + 1`.
    const LAYERS: usize;

    /// `count` twiddle words at `w` (`count` = `LANES >> j` for the layer at distance `2^j`),
    /// each repeated over `LANES / count` adjacent lanes. The caller guarantees `count`
    /// readable words at `w`.
    unsafe fn spread(w: *const u64, count: usize) -> Self::V;

    /// Forward: a block (its two registers as loaded) as the pairs of its first layer
    /// (distance `LANES / 2`).
    unsafe fn fwd_split(a: Self::V, b: Self::V) -> (Self::V, Self::V);

    /// Forward: the outputs of in-register layer `l` as the pairs of layer `l + 1`.
    unsafe fn fwd_next(l: usize, x: Self::V, y: Self::V) -> (Self::V, Self::V);

    /// Forward: the outputs of the last layer as the block's two registers, in natural order.
    unsafe fn fwd_join(x: Self::V, y: Self::V) -> (Self::V, Self::V);

    /// Inverse: a block as the pairs of its first layer (distance 1).
    unsafe fn inv_split(a: Self::V, b: Self::V) -> (Self::V, Self::V);

    /// Inverse: the outputs of in-register layer `l` as the pairs of layer `l + 1`.
    unsafe fn inv_next(l: usize, x: Self::V, y: Self::V) -> (Self::V, Self::V);

    /// Inverse: the outputs of the last layer as the block's two registers, in natural order.
    unsafe fn inv_join(x: Self::V, y: Self::V) -> (Self::V, Self::V);
}

/// The in-register layers on `K` blocks at `a`, the blocks through each step in lockstep:
/// forward (`FWD`, the last layers, plus the final reduction to `[0, q)`) or inverse (the first
/// layers). The layer at distance `2^j` of the block at element `b` uses the `LANES >> j` group
/// roots from `n/2^(j+1) + b/2^(j+1)`, spread over the lanes.
///
/// # Safety
/// The features are enabled; `a` is element `k` of the transform's `n` words,
/// `k + 2 LANES K <= n`, `k` a multiple of `2 LANES`.
#[inline(always)]
unsafe fn blocks<P: Tail64, const K: usize, const FWD: bool>(
    core: &NttCore<u64>,
    c: &Consts<P>,
    a: *mut u64,
    k: usize,
) {
    let (n, lanes) = (core.n, P::LANES);
    let (roots, s) = if FWD {
        (core.roots.as_ptr(), core.roots_shoup.as_ptr())
    } else {
        (core.inv_roots.as_ptr(), core.inv_roots_shoup.as_ptr())
    };
    // SAFETY: the K blocks lie in the n words (caller); a twiddle read ends at
    // n/2^(j+1) + (k + 2 LANES K)/2^(j+1) <= n, the length of the tables.
    unsafe {
        // The blocks and every layer's twiddles up front: the loads overlap one another.
        let (mut x, mut y) = ([P::zero(); K], [P::zero(); K]);
        let mut tws = [[Tw::zero(); K]; 3];
        for i in 0..K {
            let p = a.add(2 * lanes * i);
            let (u, v) = (P::load(p), P::load(p.add(lanes)));
            (x[i], y[i]) = if FWD {
                P::fwd_split(u, v)
            } else {
                P::inv_split(u, v)
            };
            for (l, tw) in tws.iter_mut().enumerate().take(P::LAYERS) {
                let j = if FWD { P::LAYERS - 1 - l } else { l };
                let g = (n >> (j + 1)) + ((k + 2 * lanes * i) >> (j + 1));
                let w = P::spread(roots.add(g), lanes >> j);
                tw[i] = Tw::lanes(w, P::spread(s.add(g), lanes >> j));
            }
        }
        // Layer by layer, written out (a loop over the layers is not always unrolled, and the
        // shuffles between layers depend on the layer).
        macro_rules! layer {
            ($l:expr) => {{
                let l: usize = $l;
                let xy = bf::<P, K, FWD>(x, y, tws[l], c);
                let last = l + 1 == P::LAYERS;
                for (i, [u, v]) in xy.into_iter().enumerate() {
                    (x[i], y[i]) = match (FWD, last) {
                        (true, false) => P::fwd_next(l, u, v),
                        (true, true) => P::fwd_join(c.reduce8(u), c.reduce8(v)),
                        (false, false) => P::inv_next(l, u, v),
                        (false, true) => P::inv_join(u, v),
                    };
                }
            }};
        }
        // Two or three layers (4 or 8 lanes).
        layer!(0);
        layer!(1);
        if P::LAYERS == 3 {
            layer!(2);
        }
        for i in 0..K {
            let p = a.add(2 * lanes * i);
            P::store(p, x[i]);
            P::store(p.add(lanes), y[i]);
        }
    }
}

/// Runs the register tail over `[off, off + len)` (multiples of 16), forward (`FWD`) or
/// inverse: 32 words at a time while they fit, then 16.
///
/// # Safety
/// The features are enabled; `off + len <= n = core.n`.
#[inline(always)]
pub(super) unsafe fn tail<P: Tail64, const FWD: bool>(
    core: &NttCore<u64>,
    c: &Consts<P>,
    a: *mut u64,
    off: usize,
    len: usize,
) {
    let mut k = off;
    // No closure here: a closure is compiled without the caller's target features, and the
    // kernels inside it would become calls (an order of magnitude slower).
    // SAFETY: every call covers k + 32 (wide) or k + 16 <= off + len <= n words, and k is a
    // multiple of 16, hence of the block (caller). Four and two blocks of 4 lanes, two and one
    // of 8.
    unsafe {
        while k + 32 <= off + len {
            if P::LANES == 4 {
                blocks::<P, 4, FWD>(core, c, a.add(k), k);
            } else {
                blocks::<P, 2, FWD>(core, c, a.add(k), k);
            }
            k += 32;
        }
        while k < off + len {
            if P::LANES == 4 {
                blocks::<P, 2, FWD>(core, c, a.add(k), k);
            } else {
                blocks::<P, 1, FWD>(core, c, a.add(k), k);
            }
            k += 16;
        }
    }
}

/// Defines the backend's `Tables`, `forward` and `inverse`, and `Kern`, the
/// [`Kernel`](super::skeleton::Kernel) of a Shoup 64-bit instruction set `$isa` (registers `$v`),
/// with the `forward_impl` / `inverse_impl` entry points under its target features. Expects in
/// scope: `NttCore`, `Kernel`, `Prim64`; `$isa` implements [`Tail64`].
macro_rules! kernel {
    (
        $feat:literal,
        $isa:ty,
        $v:ty
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

        /// The register tail as a function of its own, as the passes are (inlined into the
        /// skeleton's block loop it costs the passes registers).
        ///
        /// # Safety
        /// As [`super::shoup64::tail`].
        #[inline(never)]
        #[target_feature(enable = $feat)]
        unsafe fn tail_fn<const FWD: bool>(
            core: &NttCore<u64>,
            c: &Consts,
            a: *mut u64,
            off: usize,
            len: usize,
        ) {
            // SAFETY: forwarded from the caller.
            unsafe { super::shoup64::tail::<$isa, FWD>(core, c, a, off, len) }
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
            const LANES: usize = <$isa as Prim64>::LANES;
            // The register tail takes the layers within a block of two registers.
            const TAIL_LOG: u32 = <$isa as super::shoup64::Tail64>::LAYERS as u32;
            const BLOCK_LOG: u32 = 11;
            const MAX_PASS: u32 = <$isa as super::shoup64::Tail64>::LAYERS as u32;
            const WIDE: bool = true;

            super::skeleton::plumbing!(
                $feat,
                u64,
                $v,
                zero = <$isa as Prim64>::zero,
                load = <$isa as Prim64>::load,
                store = <$isa as Prim64>::store,
                shoup_tw
            );

            #[inline]
            #[target_feature(enable = $feat)]
            unsafe fn bfs<const FWD: bool, const M: usize>(
                &self,
                mut x: [$v; M],
                mut y: [$v; M],
                t: [Tw; M],
                edge: bool,
            ) -> ([$v; M], [$v; M]) {
                let c = &self.c;
                // SAFETY: the features are enabled here.
                unsafe {
                    if FWD || !edge {
                        let out = super::shoup64::bf::<$isa, M, FWD>(x, y, t, c);
                        for i in 0..M {
                            [x[i], y[i]] = out[i];
                        }
                        return (x, y);
                    }
                    // The last inverse layer: inputs in [0, 4q), so the sum and the shifted
                    // difference stay below 8q, and the products of any word are in [0, 4q).
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
            unsafe fn tail<const FWD: bool>(&self, a: *mut u64, base: usize, len: usize) {
                // SAFETY: forwarded from the caller (features, bounds, multiples of 2^TAIL_LOG).
                unsafe { tail_fn::<FWD>(self.core, &self.c, a, base, len) }
            }
        }
    };
}

pub(crate) use kernel;
