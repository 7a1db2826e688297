//! The Shoup 32-bit kernel family (AVX2 and AVX-512): one [`Kernel`](super::skeleton::Kernel)
//! implementation over each instruction set's butterflies, so that the two files keep only their
//! arithmetic and their register tails (Nishi et al.: 32-bit words double the lanes of the 64-bit
//! path).
//!
//! Lazy ranges (const generic `L4`): Harvey's (`[0, 4q)` forward, `[0, 2q)` inverse) where `4q`
//! fits a word; for 31-bit primes values stay below `2q`, one more conditional subtraction per
//! butterfly.

/// Defines `Kern`, the [`Kernel`](super::skeleton::Kernel) of a Shoup 32-bit instruction set, and
/// the `forward_impl` / `inverse_impl` entry points under its target features. Expects in scope:
/// `NttCore`, `Tables`, `Consts::new`, `Tw::splat`, `fwd_bf_r`, `inv_bf`, `inv_top_bf`, `load`,
/// `store`, `fwd_tail`, `inv_tail`, `LANES`, `TAIL_LOG`, `BLOCK_LOG`.
macro_rules! kernel {
    ($feat:literal, $v:ty, zero = $zero:ident) => {
        /// Full forward transform through the shared skeleton.
        ///
        /// # Safety
        /// The features are available; `a.len() == core.n >= 2^TAIL_LOG`.
        #[target_feature(enable = $feat)]
        unsafe fn forward_impl<const L4: bool>(core: &NttCore<u32>, t: &Tables, a: &mut [u32]) {
            let k = Kern::<L4>::new(core, t);
            // SAFETY: the features are enabled here (caller) and `a` holds the N words.
            unsafe { super::skeleton::forward(&k, a.as_mut_ptr()) }
        }

        /// Full inverse transform through the shared skeleton.
        ///
        /// # Safety
        /// As [`forward_impl`].
        #[target_feature(enable = $feat)]
        unsafe fn inverse_impl<const L4: bool>(core: &NttCore<u32>, t: &Tables, a: &mut [u32]) {
            let k = Kern::<L4>::new(core, t);
            // SAFETY: as in `forward_impl`.
            unsafe { super::skeleton::inverse(&k, a.as_mut_ptr()) }
        }

        /// The butterflies and tail of one instruction set for one table.
        struct Kern<'a, const L4: bool> {
            /// The table.
            core: &'a NttCore<u32>,
            /// The backend's tables.
            t: &'a Tables,
            /// Constants of the modulus.
            c: Consts,
            /// `N^-1` (last inverse layer, sum branch).
            ni: Tw,
            /// `N^-1 psi^-bitrev(1)` (last inverse layer, difference branch).
            nw: Tw,
        }

        impl<'a, const L4: bool> Kern<'a, L4> {
            /// Broadcasts the constants of `core`.
            #[inline]
            #[target_feature(enable = $feat)]
            fn new(core: &'a NttCore<u32>, t: &'a Tables) -> Self {
                Self {
                    core,
                    t,
                    c: Consts::new::<L4>(core),
                    ni: Tw::splat(core.n_inv.0, core.n_inv.1),
                    nw: Tw::splat(core.n_inv_w.0, core.n_inv_w.1),
                }
            }

            /// The transform's words as a slice.
            ///
            /// # Safety
            /// `a` points to the transform's N words, not otherwise borrowed.
            #[inline]
            unsafe fn words<'w>(&self, a: *mut u32) -> &'w mut [u32] {
                // SAFETY: guaranteed by the caller.
                unsafe { std::slice::from_raw_parts_mut(a, self.core.n) }
            }
        }

        impl<const L4: bool> Kernel for Kern<'_, L4> {
            type W = u32;
            type V = $v;
            type Tw = Tw;
            const LANES: usize = LANES;
            const TAIL_LOG: u32 = TAIL_LOG;
            const BLOCK_LOG: u32 = BLOCK_LOG;
            const MAX_PASS: u32 = 3;
            const WIDE: bool = true;

            super::skeleton::plumbing!($feat, u32, $v, zero = $zero, load = load, store = store);

            #[inline]
            #[target_feature(enable = $feat)]
            unsafe fn fwd_tw(&self, idx: usize) -> Tw {
                Tw::splat(self.core.roots[idx], self.core.roots_shoup[idx])
            }

            #[inline]
            #[target_feature(enable = $feat)]
            unsafe fn inv_tw(&self, idx: usize) -> Tw {
                Tw::splat(self.core.inv_roots[idx], self.core.inv_roots_shoup[idx])
            }

            #[inline]
            #[target_feature(enable = $feat)]
            unsafe fn fwd_bfs<const M: usize>(
                &self,
                mut x: [$v; M],
                mut y: [$v; M],
                t: [Tw; M],
                first: bool,
            ) -> ([$v; M], [$v; M]) {
                for i in 0..M {
                    if first {
                        fwd_bf_r::<L4, false>(&mut x[i], &mut y[i], &t[i], &self.c);
                    } else {
                        fwd_bf_r::<L4, true>(&mut x[i], &mut y[i], &t[i], &self.c);
                    }
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
                for i in 0..M {
                    if top {
                        inv_top_bf::<L4>(&mut x[i], &mut y[i], &self.ni, &self.nw, &self.c);
                    } else {
                        inv_bf::<L4>(&mut x[i], &mut y[i], &t[i], &self.c);
                    }
                }
                (x, y)
            }

            #[inline]
            #[target_feature(enable = $feat)]
            unsafe fn fwd_tail(&self, a: *mut u32, base: usize, len: usize) {
                // SAFETY: forwarded from the caller: `a` holds the N words, borrowed nowhere else.
                let a = unsafe { self.words(a) };
                fwd_tail::<L4>(self.core, self.t, a, base, len, &self.c)
            }

            #[inline]
            #[target_feature(enable = $feat)]
            unsafe fn inv_head(&self, a: *mut u32, base: usize, len: usize) {
                // SAFETY: as in `fwd_tail`.
                let a = unsafe { self.words(a) };
                inv_tail::<L4>(self.core, self.t, a, base, len, &self.c)
            }
        }
    };
}

pub(crate) use kernel;
