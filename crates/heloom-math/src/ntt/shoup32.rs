//! The Shoup 32-bit kernel family (AVX2 and AVX-512): the butterflies, written once over the
//! instructions of [`Prim32`], the chunk loop of the register tail, and one
//! [`Kernel`](super::skeleton::Kernel) per instruction set (the `kernel!` macro). An instruction
//! set keeps only its register tail: how the words of a chunk move between the layouts of the
//! layers below one register ([`Tail32`]). Nishi et al.: 32-bit words double the lanes of the
//! 64-bit path.
//!
//! Lazy ranges (const generic `L4`): Harvey's (`[0, 4q)` forward, `[0, 2q)` inverse) where `4q`
//! fits a word; for 31-bit primes values stay below `2q`, one more conditional subtraction per
//! butterfly.
//!
//! Every function here is `#[inline(always)]` and needs the instruction set's features: it is
//! compiled inside that set's `#[target_feature]` code.

use super::NttCore;
use crate::simd::Prim32;

/// Broadcast constants of one modulus.
#[derive(Clone, Copy)]
pub(super) struct Consts<P: Prim32> {
    /// `q` in every lane.
    pub(super) q: P::V,
    /// `2q` in every lane.
    pub(super) two_q: P::V,
    /// The bound of the butterflies' inputs after one conditional subtraction: `2q` for Harvey's
    /// ranges, `q` for 31-bit primes.
    pub(super) b1: P::V,
}

impl<P: Prim32> Consts<P> {
    /// Broadcasts the constants of `core`'s modulus.
    #[inline(always)]
    pub(super) unsafe fn new<const L4: bool>(core: &NttCore<u32>) -> Self {
        let q = core.modulus.q();
        let two_q = core.modulus.two_q();
        // SAFETY: the features are enabled (module contract).
        unsafe {
            Self {
                q: P::splat(q),
                two_q: P::splat(two_q),
                b1: P::splat(if L4 { two_q } else { q }),
            }
        }
    }

    /// `x - b` if `x >= b`, else `x` (unsigned; `x < 2b`): the wrapped difference is larger.
    #[inline(always)]
    pub(super) unsafe fn csub(&self, x: P::V, b: P::V) -> P::V {
        // SAFETY: the features are enabled (module contract).
        unsafe { P::min(x, P::sub(x, b)) }
    }
}

/// A twiddle factor in vector form: value, Shoup companion, companion of the odd lanes.
#[derive(Clone, Copy)]
pub(super) struct Tw<P: Prim32> {
    /// Root values.
    pub(super) w: P::V,
    /// Shoup companions.
    pub(super) ws: P::V,
    /// Shoup companions of the odd lanes, moved to the even positions.
    pub(super) ws_odd: P::V,
}

impl<P: Prim32> Tw<P> {
    /// Broadcasts one twiddle.
    #[inline(always)]
    pub(super) unsafe fn splat(w: u32, ws: u32) -> Self {
        // SAFETY: the features are enabled (module contract).
        unsafe {
            let ws = P::splat(ws);
            Self {
                w: P::splat(w),
                ws,
                ws_odd: ws,
            }
        }
    }

    /// Per-lane twiddles from vectors of values and companions.
    #[inline(always)]
    pub(super) unsafe fn lanes(w: P::V, ws: P::V) -> Self {
        // SAFETY: the features are enabled (module contract).
        let ws_odd = unsafe { P::odd_down(ws) };
        Self { w, ws, ws_odd }
    }

    /// Per-lane twiddles whose adjacent lanes share a value (the odd companions equal `ws`).
    #[inline(always)]
    pub(super) fn pairs(w: P::V, ws: P::V) -> Self {
        Self { w, ws, ws_odd: ws }
    }
}

/// Shoup's lazy product `x * w mod q` in `[0, 2q)` for any `x < 2^32` (Shoup; Harvey 2014
/// Alg. 2): `x * w - hi32(x * w') * q` computed in wrapping 32-bit lanes.
#[inline(always)]
unsafe fn mul_shoup<P: Prim32>(x: P::V, t: &Tw<P>, q: P::V) -> P::V {
    // SAFETY: the features are enabled (module contract).
    unsafe {
        let even = P::mul_even(x, t.ws);
        let odd = P::mul_even(P::odd_down(x), t.ws_odd);
        P::sub(P::mullo(x, t.w), P::mullo(P::merge_hi(even, odd), q))
    }
}

/// Forward (Cooley-Tukey) butterfly `(x, y) -> (x + w y, x - w y)`. `L4`: inputs in `[0, 4q)`,
/// outputs in `[0, 4q)`; otherwise inputs and outputs in `[0, 2q)`.
#[inline(always)]
pub(super) unsafe fn fwd_bf<P: Prim32, const L4: bool>(
    x: &mut P::V,
    y: &mut P::V,
    t: &Tw<P>,
    c: &Consts<P>,
) {
    // SAFETY: the features are enabled (module contract).
    unsafe { fwd_bf_r::<P, L4, true>(x, y, t, c) }
}

/// [`fwd_bf`] with the reduction of `x` optional: `RED = false` needs `x < q` (the first layer,
/// whose inputs are reduced).
#[inline(always)]
pub(super) unsafe fn fwd_bf_r<P: Prim32, const L4: bool, const RED: bool>(
    x: &mut P::V,
    y: &mut P::V,
    t: &Tw<P>,
    c: &Consts<P>,
) {
    // SAFETY: the features are enabled (module contract).
    unsafe {
        let u = if RED { c.csub(*x, c.b1) } else { *x };
        let mut v = mul_shoup(*y, t, c.q);
        if !L4 {
            v = c.csub(v, c.q);
        }
        *x = P::add(u, v);
        *y = P::add(P::sub(u, v), c.b1);
    }
}

/// Inverse (Gentleman-Sande) butterfly `(x, y) -> (x + y, (x - y) w)`, inputs and outputs in
/// `[0, 2q)`.
#[inline(always)]
pub(super) unsafe fn inv_bf<P: Prim32, const L4: bool>(
    x: &mut P::V,
    y: &mut P::V,
    t: &Tw<P>,
    c: &Consts<P>,
) {
    // SAFETY: the features are enabled (module contract).
    unsafe {
        let (u, v) = if L4 {
            (*x, *y)
        } else {
            (c.csub(*x, c.q), c.csub(*y, c.q))
        };
        let mut s = P::add(u, v);
        if L4 {
            s = c.csub(s, c.two_q);
        }
        let d = P::add(P::sub(u, v), c.b1);
        *x = s;
        *y = mul_shoup(d, t, c.q);
    }
}

/// The last inverse layer with `N^-1` folded in: `(x, y) -> ((x + y) / N, (x - y) w / N)`,
/// inputs in `[0, 2q)`, outputs reduced.
#[inline(always)]
pub(super) unsafe fn inv_top_bf<P: Prim32, const L4: bool>(
    x: &mut P::V,
    y: &mut P::V,
    ni: &Tw<P>,
    nw: &Tw<P>,
    c: &Consts<P>,
) {
    // SAFETY: the features are enabled (module contract).
    unsafe {
        let (u, v) = if L4 {
            (*x, *y)
        } else {
            (c.csub(*x, c.q), c.csub(*y, c.q))
        };
        // L4: u + v < 4q < 2^32; otherwise both below q. Shoup accepts any word.
        let s = P::add(u, v);
        let d = P::add(P::sub(u, v), c.b1);
        *x = c.csub(mul_shoup(s, ni, c.q), c.q);
        *y = c.csub(mul_shoup(d, nw, c.q), c.q);
    }
}

/// The register tail of one instruction set, implemented by its `Tables`: the layers whose
/// butterflies stay inside one chunk of two registers (`2 LANES` words), between the plain first
/// (forward) or last (inverse) butterfly of the chunk, which [`Kern::fwd_tail`] and
/// [`Kern::inv_tail`] do.
pub(super) trait Tail32<P: Prim32> {
    /// Whether these tables fit a transform of `n` words.
    fn fits(&self, n: usize) -> bool;
    /// The forward layers below the chunk's first one on `C` chunks from word `s0`: from the
    /// natural order back to the natural order.
    ///
    /// # Safety
    /// The features are enabled; `s0 + 2 LANES C <= N`; the tables fit.
    unsafe fn fwd_layers<const L4: bool, const C: usize>(
        &self,
        k: &Kern<'_, P, Self, L4>,
        x: &mut [P::V; C],
        y: &mut [P::V; C],
        s0: usize,
    ) where
        Self: Sized;
    /// The inverse layers before the chunk's last one, mirroring [`Tail32::fwd_layers`].
    ///
    /// # Safety
    /// As [`Tail32::fwd_layers`].
    unsafe fn inv_layers<const L4: bool, const C: usize>(
        &self,
        k: &Kern<'_, P, Self, L4>,
        x: &mut [P::V; C],
        y: &mut [P::V; C],
        s0: usize,
    ) where
        Self: Sized;
}

/// The butterflies and tail of one instruction set `P` (tables `T`) for one NTT table.
pub(super) struct Kern<'a, P: Prim32, T, const L4: bool> {
    /// The table.
    pub(super) core: &'a NttCore<u32>,
    /// The backend's tables.
    pub(super) t: &'a T,
    /// Constants of the modulus.
    pub(super) c: Consts<P>,
    /// `N^-1` (last inverse layer, sum branch).
    pub(super) ni: Tw<P>,
    /// `N^-1 psi^-bitrev(1)` (last inverse layer, difference branch).
    pub(super) nw: Tw<P>,
}

impl<'a, P: Prim32, T: Tail32<P>, const L4: bool> Kern<'a, P, T, L4> {
    /// Broadcasts the constants of `core`.
    #[inline(always)]
    pub(super) unsafe fn new(core: &'a NttCore<u32>, t: &'a T) -> Self {
        // SAFETY: the features are enabled (module contract).
        unsafe {
            Self {
                core,
                t,
                c: Consts::new::<L4>(core),
                ni: Tw::splat(core.n_inv.0, core.n_inv.1),
                nw: Tw::splat(core.n_inv_w.0, core.n_inv_w.1),
            }
        }
    }

    /// The lockstep forward butterflies of one pass (`first`: inputs reduced).
    #[inline(always)]
    pub(super) unsafe fn fwd_bfs<const M: usize>(
        &self,
        mut x: [P::V; M],
        mut y: [P::V; M],
        t: [Tw<P>; M],
        first: bool,
    ) -> ([P::V; M], [P::V; M]) {
        // SAFETY: the features are enabled (module contract).
        unsafe {
            for i in 0..M {
                if first {
                    fwd_bf_r::<P, L4, false>(&mut x[i], &mut y[i], &t[i], &self.c);
                } else {
                    fwd_bf_r::<P, L4, true>(&mut x[i], &mut y[i], &t[i], &self.c);
                }
            }
        }
        (x, y)
    }

    /// The lockstep inverse butterflies of one pass (`top`: the last layer, `N^-1` folded in).
    #[inline(always)]
    pub(super) unsafe fn inv_bfs<const M: usize>(
        &self,
        mut x: [P::V; M],
        mut y: [P::V; M],
        t: [Tw<P>; M],
        top: bool,
    ) -> ([P::V; M], [P::V; M]) {
        // SAFETY: the features are enabled (module contract).
        unsafe {
            for i in 0..M {
                if top {
                    inv_top_bf::<P, L4>(&mut x[i], &mut y[i], &self.ni, &self.nw, &self.c);
                } else {
                    inv_bf::<P, L4>(&mut x[i], &mut y[i], &t[i], &self.c);
                }
            }
        }
        (x, y)
    }

    /// The last forward layers on each chunk of the `len` words at `base` of the transform at
    /// `a`, in registers, `C` chunks side by side where `len` allows (one chunk is a serial
    /// chain of butterflies and shuffles; independent chunks hide the latencies), followed by
    /// the full reduction to `[0, q)`.
    ///
    /// # Safety
    /// The features are enabled; `a` points to the transform's N words, borrowed nowhere else.
    #[inline(always)]
    pub(super) unsafe fn fwd_tail<const C: usize>(&self, a: *mut u32, base: usize, len: usize) {
        // SAFETY: the features are enabled (caller).
        unsafe {
            if len.is_multiple_of(2 * P::LANES * C) {
                self.fwd_tail_c::<C>(a, base, len)
            } else {
                self.fwd_tail_c::<1>(a, base, len)
            }
        }
    }

    /// Checks the chunk bounds of a tail call; returns the chunk size.
    #[inline(always)]
    fn chunk_bounds(&self, c: usize, base: usize, len: usize) -> usize {
        let chunk = 2 * P::LANES;
        assert!(
            base.is_multiple_of(chunk)
                && len.is_multiple_of(chunk * c)
                && base + len <= self.core.n
                && self.t.fits(self.core.n)
        );
        chunk
    }

    /// [`Kern::fwd_tail`] on `C` chunks at a time (`len` a multiple of `C` chunks).
    #[inline(always)]
    unsafe fn fwd_tail_c<const C: usize>(&self, ptr: *mut u32, base: usize, len: usize) {
        let (core, c) = (self.core, &self.c);
        let chunk = self.chunk_bounds(C, base, len);
        let (n, log_chunk) = (core.n, chunk.trailing_zeros());
        // SAFETY: the features are enabled (caller); every chunk read or written lies in
        // [base, base + len) within the N words at `ptr`, so `s0 + chunk C <= N` for the layers.
        unsafe {
            for s0 in (base..base + len).step_by(chunk * C) {
                let (mut x, mut y) = ([P::zero(); C], [P::zero(); C]);
                for i in 0..C {
                    let s = s0 + chunk * i;
                    (x[i], y[i]) = (P::load(ptr.add(s)), P::load(ptr.add(s + P::LANES)));
                    let g = (n >> log_chunk) + (s >> log_chunk);
                    let t = Tw::splat(core.roots[g], core.roots_shoup[g]);
                    fwd_bf::<P, L4>(&mut x[i], &mut y[i], &t, c);
                }
                self.t.fwd_layers::<L4, C>(self, &mut x, &mut y, s0);
                for i in 0..C {
                    let (mut u, mut v) = (x[i], y[i]);
                    if L4 {
                        u = c.csub(u, c.two_q);
                        v = c.csub(v, c.two_q);
                    }
                    let s = s0 + chunk * i;
                    P::store(ptr.add(s), c.csub(u, c.q));
                    P::store(ptr.add(s + P::LANES), c.csub(v, c.q));
                }
            }
        }
    }

    /// The first inverse layers on each chunk (see [`Kern::fwd_tail`]); for `N = 2 LANES` the
    /// chunk's last layer is the transform's last (`N^-1` folded in).
    ///
    /// # Safety
    /// As [`Kern::fwd_tail`].
    #[inline(always)]
    pub(super) unsafe fn inv_tail<const C: usize>(&self, a: *mut u32, base: usize, len: usize) {
        // SAFETY: the features are enabled (caller).
        unsafe {
            if len.is_multiple_of(2 * P::LANES * C) {
                self.inv_tail_c::<C>(a, base, len)
            } else {
                self.inv_tail_c::<1>(a, base, len)
            }
        }
    }

    /// [`Kern::inv_tail`] on `C` chunks at a time (`len` a multiple of `C` chunks).
    #[inline(always)]
    unsafe fn inv_tail_c<const C: usize>(&self, ptr: *mut u32, base: usize, len: usize) {
        let (core, c) = (self.core, &self.c);
        let chunk = self.chunk_bounds(C, base, len);
        let (n, log_chunk) = (core.n, chunk.trailing_zeros());
        let top = n == chunk;
        // SAFETY: as in `fwd_tail_c`.
        unsafe {
            for s0 in (base..base + len).step_by(chunk * C) {
                let (mut x, mut y) = ([P::zero(); C], [P::zero(); C]);
                for i in 0..C {
                    let s = s0 + chunk * i;
                    (x[i], y[i]) = (P::load(ptr.add(s)), P::load(ptr.add(s + P::LANES)));
                }
                self.t.inv_layers::<L4, C>(self, &mut x, &mut y, s0);
                for i in 0..C {
                    let s = s0 + chunk * i;
                    if top {
                        inv_top_bf::<P, L4>(&mut x[i], &mut y[i], &self.ni, &self.nw, c);
                    } else {
                        let g = (n >> log_chunk) + (s >> log_chunk);
                        let t = Tw::splat(core.inv_roots[g], core.inv_roots_shoup[g]);
                        inv_bf::<P, L4>(&mut x[i], &mut y[i], &t, c);
                    }
                    P::store(ptr.add(s), x[i]);
                    P::store(ptr.add(s + P::LANES), y[i]);
                }
            }
        }
    }
}

/// Defines `forward` and `inverse`, the [`Kernel`](super::skeleton::Kernel) of a Shoup 32-bit
/// instruction set `$isa` (registers `$v`), and the `forward_impl` / `inverse_impl` entry points
/// under its target features. Expects in scope: `NttCore`, `Kernel`, `Prim32`, `Tables`
/// (implementing [`Tail32`]), `LANES`, `TAIL_LOG`, `BLOCK_LOG`, `TAIL_CHUNKS`.
macro_rules! kernel {
    ($feat:literal, $isa:ty, $v:ty) => {
        /// Forward NTT in place.
        pub(crate) fn forward(core: &NttCore<u32>, t: &Tables, a: &mut [u32]) {
            assert_eq!(a.len(), core.n, "NTT length");
            if core.n < 2 * LANES {
                // Less than one chunk of two registers: not worth a kernel.
                return super::scalar::forward(core, a);
            }
            // SAFETY: this backend is only selected after checking its features on this CPU
            // (Backend::check at table construction); a.len() == N was asserted above.
            unsafe {
                if core.lazy4 {
                    forward_impl::<true>(core, t, a)
                } else {
                    forward_impl::<false>(core, t, a)
                }
            }
        }

        /// Inverse NTT in place.
        pub(crate) fn inverse(core: &NttCore<u32>, t: &Tables, a: &mut [u32]) {
            assert_eq!(a.len(), core.n, "NTT length");
            if core.n < 2 * LANES {
                return super::scalar::inverse(core, a);
            }
            // SAFETY: as in `forward`: the CPU features were checked when the table was built.
            unsafe {
                if core.lazy4 {
                    inverse_impl::<true>(core, t, a)
                } else {
                    inverse_impl::<false>(core, t, a)
                }
            }
        }

        /// This instruction set's kernel.
        type Kern<'a, const L4: bool> = super::shoup32::Kern<'a, $isa, Tables, L4>;

        /// Full forward transform through the shared skeleton.
        ///
        /// # Safety
        /// The features are available; `a.len() == core.n >= 2^TAIL_LOG`.
        #[target_feature(enable = $feat)]
        unsafe fn forward_impl<const L4: bool>(core: &NttCore<u32>, t: &Tables, a: &mut [u32]) {
            // SAFETY: the features are enabled here (caller) and `a` holds the N words.
            unsafe {
                let k = Kern::<L4>::new(core, t);
                super::skeleton::forward(&k, a.as_mut_ptr())
            }
        }

        /// Full inverse transform through the shared skeleton.
        ///
        /// # Safety
        /// As [`forward_impl`].
        #[target_feature(enable = $feat)]
        unsafe fn inverse_impl<const L4: bool>(core: &NttCore<u32>, t: &Tables, a: &mut [u32]) {
            // SAFETY: as in `forward_impl`.
            unsafe {
                let k = Kern::<L4>::new(core, t);
                super::skeleton::inverse(&k, a.as_mut_ptr())
            }
        }

        impl<const L4: bool> Kernel for Kern<'_, L4> {
            type W = u32;
            type V = $v;
            type Tw = super::shoup32::Tw<$isa>;
            const LANES: usize = LANES;
            const TAIL_LOG: u32 = TAIL_LOG;
            const BLOCK_LOG: u32 = BLOCK_LOG;
            const MAX_PASS: u32 = 3;
            const WIDE: bool = true;

            super::skeleton::plumbing!(
                $feat,
                u32,
                $v,
                zero = <$isa as Prim32>::zero,
                load = <$isa as Prim32>::load,
                store = <$isa as Prim32>::store,
                shoup_tw
            );

            #[inline]
            #[target_feature(enable = $feat)]
            unsafe fn bfs<const FWD: bool, const M: usize>(
                &self,
                x: [$v; M],
                y: [$v; M],
                t: [Self::Tw; M],
                edge: bool,
            ) -> ([$v; M], [$v; M]) {
                // SAFETY: the features are enabled here.
                unsafe {
                    if FWD {
                        Kern::<L4>::fwd_bfs(self, x, y, t, edge)
                    } else {
                        Kern::<L4>::inv_bfs(self, x, y, t, edge)
                    }
                }
            }

            #[inline]
            #[target_feature(enable = $feat)]
            unsafe fn tail<const FWD: bool>(&self, a: *mut u32, base: usize, len: usize) {
                // SAFETY: forwarded from the caller: features, `a` holds the N words.
                unsafe {
                    if FWD {
                        Kern::<L4>::fwd_tail::<TAIL_CHUNKS>(self, a, base, len)
                    } else {
                        Kern::<L4>::inv_tail::<TAIL_CHUNKS>(self, a, base, len)
                    }
                }
            }
        }
    };
}

pub(crate) use kernel;
